//! Device discovery and capabilities (what the tuner and the launch heuristics read).

use std::sync::Arc;

use cudarc::driver::CudaContext;
use cudarc::driver::sys::CUdevice_attribute as Attr;

use crate::error::{DriverContext, Error, Result};

/// What a CUDA device can do, read from the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sm_count: u32,
    pub global_mem_bytes: usize,
    pub l2_bytes: u32,
    pub shared_mem_per_block: u32,
    /// The most a block can get after opting in (`MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    pub shared_mem_per_block_optin: u32,
    pub shared_mem_per_sm: u32,
    pub max_threads_per_block: u32,
    pub max_threads_per_sm: u32,
    pub registers_per_sm: u32,
    pub clock_khz: u32,
    pub memory_clock_khz: u32,
    pub memory_bus_bits: u32,
    /// `cuDriverGetVersion`, e.g. 13000 for CUDA 13.0.
    pub driver_version: i32,
}

impl DeviceInfo {
    /// Peak DRAM bandwidth from the memory clock and bus width (double data rate), in bytes/s.
    /// A datasheet-style number: the bench measures the real copy ceiling.
    pub fn theoretical_bandwidth(&self) -> f64 {
        2.0 * self.memory_clock_khz as f64 * 1e3 * self.memory_bus_bits as f64 / 8.0
    }

    /// `sm_XY` of this device.
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.compute_capability.0, self.compute_capability.1)
    }

    pub(crate) fn query(ctx: &Arc<CudaContext>) -> Result<DeviceInfo> {
        let what = || format!("reading attributes of device {}", ctx.ordinal());
        let attr = |a: Attr| -> Result<u32> { ctx.attribute(a).map(|v| v as u32).ctx(what) };
        let mut driver_version = 0i32;
        // SAFETY: cuDriverGetVersion writes one int through a valid pointer; the driver is
        // loaded (a context exists).
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) }.result().ctx(what)?;
        Ok(DeviceInfo {
            ordinal: ctx.ordinal(),
            name: ctx.name().ctx(what)?,
            compute_capability: ctx.compute_capability().ctx(what)?,
            sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            global_mem_bytes: ctx.total_mem().ctx(what)?,
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
            shared_mem_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            shared_mem_per_block_optin: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            shared_mem_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
            max_threads_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_threads_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
            registers_per_sm: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
            clock_khz: attr(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
            memory_clock_khz: attr(Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?,
            memory_bus_bits: attr(Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
            driver_version,
        })
    }
}

/// Whether the CUDA driver library can be loaded at all. cudarc loads it lazily and panics
/// when it is missing, so every entry into the driver goes through this check first.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the driver library; no driver call is made.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Number of CUDA devices, or why there are none.
pub fn device_count() -> Result<usize> {
    if !driver_present() {
        return Err(Error::NoDevice("the CUDA driver library (libcuda.so) was not found".into()));
    }
    let n = CudaContext::device_count().ctx(|| "counting CUDA devices".into())?;
    if n <= 0 {
        return Err(Error::NoDevice("the driver reports no device".into()));
    }
    Ok(n as usize)
}

/// Every CUDA device with its capabilities.
pub fn devices() -> Result<Vec<DeviceInfo>> {
    (0..device_count()?)
        .map(|i| {
            let ctx = CudaContext::new(i).ctx(|| format!("creating a context on device {i}"))?;
            DeviceInfo::query(&ctx)
        })
        .collect()
}
