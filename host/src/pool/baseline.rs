//! The allocation strategies the pool is measured against (the bench's baselines, and the
//! data behind the driver-pool decision in ARCHITECTURE.md): plain `cuMemAlloc`/`cuMemFree`,
//! and stream-ordered `cuMemAllocAsync` on the device's default pool with a release threshold.

use std::sync::Arc;

use cudarc::driver::sys::CUmemPool_attribute;
use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, result};

use crate::buffer::{View, ViewMut};
use crate::error::{DriverContext, Error, Result};
use crate::stream::Stream;

/// How a [`DriverBuffer`] gets and returns its memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverAlloc {
    /// `cuMemAlloc` / `cuMemFree`: no cache at all (the free waits for the device).
    Sync,
    /// `cuMemAllocAsync` / `cuMemFreeAsync` on the default pool (its release threshold as set
    /// by [`set_default_pool_release_threshold`]).
    Async,
}

/// A device buffer straight from the driver (no ferrotune pool).
pub struct DriverBuffer<T> {
    slice: Option<CudaSlice<T>>,
    how: DriverAlloc,
    stream: Arc<CudaStream>,
}

fn cuda(s: &Stream, op: &'static str) -> Result<Arc<CudaStream>> {
    s.cuda_stream().cloned().ok_or(Error::BackendMismatch { op, what: "stream", expected: "cuda", got: "cpu" })
}

impl<T: DeviceRepr> DriverBuffer<T> {
    /// `len` uninitialised elements.
    pub fn new(stream: &Stream, how: DriverAlloc, len: usize) -> Result<DriverBuffer<T>> {
        let cs = cuda(stream, "DriverBuffer::new")?;
        let slice = match how {
            // SAFETY: callers write before they read (the bench fills or overwrites it).
            DriverAlloc::Async => unsafe { cs.alloc::<T>(len) }.ctx(|| "cuMemAllocAsync".into())?,
            DriverAlloc::Sync => {
                cs.context().bind_to_thread().ctx(|| "binding the context".into())?;
                // SAFETY: a fresh allocation, owned by the slice until `Drop` frees it.
                let p = unsafe { result::malloc_sync(len.max(1) * size_of::<T>()) }.ctx(|| "cuMemAlloc".into())?;
                // SAFETY: `p` holds `len` elements; `Drop` takes it back with `leak`.
                unsafe { cs.upgrade_device_ptr::<T>(p, len) }
            }
        };
        Ok(DriverBuffer { slice: Some(slice), how, stream: cs })
    }

    pub fn view(&self) -> View<'_, T>
    where
        T: crate::buffer::Scalar,
    {
        View::Cuda(self.slice.as_ref().expect("present until drop").as_view())
    }

    pub fn view_mut(&mut self) -> ViewMut<'_, T>
    where
        T: crate::buffer::Scalar,
    {
        ViewMut::Cuda(self.slice.as_mut().expect("present until drop").as_view_mut())
    }
}

impl<T> Drop for DriverBuffer<T> {
    fn drop(&mut self) {
        let Some(slice) = self.slice.take() else { return };
        match self.how {
            DriverAlloc::Async => drop(slice),
            DriverAlloc::Sync => {
                let p = slice.leak();
                let _ = self.stream.synchronize();
                // SAFETY: the stream's work on it is done; `p` came from cuMemAlloc.
                let _ = unsafe { result::free_sync(p) };
            }
        }
    }
}

/// Sets the default pool's release threshold: bytes it keeps cached across synchronizations
/// (0, the driver's default, returns everything at each synchronize; `u64::MAX` keeps all).
pub fn set_default_pool_release_threshold(stream: &Stream, bytes: u64) -> Result<()> {
    let cs = cuda(stream, "set_default_pool_release_threshold")?;
    let ctx = cs.context();
    ctx.bind_to_thread().ctx(|| "binding the context".into())?;
    // SAFETY: the device handle is the context's; the pool returned is the device's default.
    let pool =
        unsafe { result::device::get_default_mem_pool(ctx.cu_device()) }.ctx(|| "reading the default pool".into())?;
    let mut v = bytes;
    // SAFETY: RELEASE_THRESHOLD takes a cuuint64_t, which `v` is.
    unsafe {
        result::mem_pool::set_attribute(
            pool,
            CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            &mut v as *mut u64 as *mut std::ffi::c_void,
        )
    }
    .ctx(|| "setting the pool's release threshold".into())
}
