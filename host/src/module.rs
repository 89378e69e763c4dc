//! The embedded PTX, loaded once per context, and the cache of kernel functions by name.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use crate::error::{DriverContext, Error, Result};

/// The PTX modules built into this binary, newest architecture first.
pub fn embedded_ptx() -> Result<Vec<(&'static str, &'static str)>> {
    #[cfg(ferrotune_ptx)]
    {
        Ok(vec![
            ("sm_90a", include_str!(env!("FERROTUNE_PTX_SM_90A"))),
            ("sm_90", include_str!(env!("FERROTUNE_PTX_SM_90"))),
            ("sm_80", include_str!(env!("FERROTUNE_PTX_SM_80"))),
        ])
    }
    #[cfg(not(ferrotune_ptx))]
    {
        Err(Error::KernelsNotBuilt(env!("FERROTUNE_PTX_MISSING").to_string()))
    }
}

/// Whether a device of compute capability `cc` runs PTX built for `arch`: `sm_XY` runs on
/// XY and newer; an arch-specific `sm_XYa` (Hopper's wgmma, setmaxnreg) only on XY exactly.
pub fn runs_on(arch: &str, cc: (i32, i32)) -> bool {
    let want = cc.0 * 10 + cc.1;
    match arch.strip_prefix("sm_") {
        Some(v) if v.ends_with('a') => v[..v.len() - 1].parse::<i32>().is_ok_and(|a| a == want),
        Some(v) => v.parse::<i32>().is_ok_and(|a| a <= want),
        None => false,
    }
}

/// The newest embedded PTX the device can run (`cc` = compute capability).
pub fn select_ptx(cc: (i32, i32)) -> Result<(&'static str, &'static str)> {
    embedded_ptx()?
        .into_iter()
        .find(|(arch, _)| runs_on(arch, cc))
        .ok_or_else(|| Error::KernelsNotBuilt(format!("no PTX for compute capability {}.{}", cc.0, cc.1)))
}

/// A kernel function and the limits its compiled code imposes on a launch.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub func: CudaFunction,
    /// Most threads per block this function can launch with (its registers decide).
    pub max_threads: u32,
    pub registers: u32,
    /// Dynamic shared memory the function has been allowed (bytes; 48 KiB without opting in).
    pub dyn_smem_limit: u32,
}

/// A loaded module and the functions looked up in it so far.
pub(crate) struct Kernels {
    pub arch: &'static str,
    module: Arc<CudaModule>,
    functions: Mutex<HashMap<String, Kernel>>,
}

impl Kernels {
    pub fn load(ctx: &Arc<CudaContext>, arch: &'static str, ptx: &'static str) -> Result<Kernels> {
        let module = ctx.load_module(Ptx::from_src(ptx)).ctx(|| format!("loading the {arch} PTX module"))?;
        Ok(Kernels { arch, module, functions: Mutex::new(HashMap::new()) })
    }

    /// The function `name` with its launch limits, looked up in the driver once and cached.
    pub fn function(&self, name: &str) -> Result<Kernel> {
        let mut map = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = map.get(name) {
            return Ok(k.clone());
        }
        let what = || format!("looking up kernel {name}");
        let func = self.module.load_function(name).ctx(what)?;
        let max_threads = func.max_threads_per_block().ctx(what)? as u32;
        let registers = func.num_regs().ctx(what)? as u32;
        let k = Kernel { func, max_threads, registers, dyn_smem_limit: 48 * 1024 };
        map.insert(name.to_string(), k.clone());
        Ok(k)
    }

    /// As [`Kernels::function`], with the function's dynamic shared-memory limit raised to at
    /// least `bytes` (one driver call the first time, none after).
    pub fn function_with_smem(&self, name: &str, bytes: u32) -> Result<Kernel> {
        let k = self.function(name)?;
        if bytes <= k.dyn_smem_limit {
            return Ok(k);
        }
        k.func
            .set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes as i32)
            .ctx(|| format!("raising the shared-memory limit of {name} to {bytes} bytes"))?;
        let raised = Kernel { dyn_smem_limit: bytes, ..k };
        let mut map = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        map.insert(name.to_string(), raised.clone());
        Ok(raised)
    }
}

/// What the driver says one compiled entry point needs per launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionResources {
    pub registers: u32,
    /// Most threads per block its registers allow.
    pub max_threads: u32,
    /// Local memory per thread (stack frame and register spills), bytes.
    pub local_bytes: u32,
}

/// The resources of the entry point `name` on this stream's device (`None` on the CPU
/// backend): what the autotuner prunes and ranks candidates with.
pub fn function_resources(s: &crate::stream::Stream, name: &str) -> Result<Option<FunctionResources>> {
    let Some(gpu) = s.gpu() else { return Ok(None) };
    let k = gpu.kernels()?.function(name)?;
    let local = k.func.local_size_bytes().ctx(|| format!("reading the local memory of {name}"))?;
    Ok(Some(FunctionResources {
        registers: k.registers,
        max_threads: k.max_threads,
        local_bytes: u32::try_from(local).unwrap_or(0),
    }))
}

#[cfg(test)]
mod tests {
    use super::runs_on;

    #[test]
    fn arch_specific_ptx_runs_on_its_own_chip_only() {
        assert!(runs_on("sm_90a", (9, 0)));
        assert!(!runs_on("sm_90a", (10, 0)));
        assert!(!runs_on("sm_90a", (8, 9)));
        assert!(runs_on("sm_90", (12, 0)));
        assert!(runs_on("sm_80", (9, 0)));
        assert!(!runs_on("sm_90", (8, 6)));
    }
}
