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

/// The cubin (SASS) assembled from `arch`'s PTX at build time, when the build had ptxas and
/// `FERROTUNE_CUBIN=1` (the GPU-machine carry does): loading it skips the driver's JIT.
pub fn embedded_cubin(arch: &str) -> Option<&'static [u8]> {
    #[cfg(ferrotune_cubin)]
    {
        match arch {
            "sm_90a" => Some(include_bytes!(env!("FERROTUNE_CUBIN_SM_90A"))),
            "sm_90" => Some(include_bytes!(env!("FERROTUNE_CUBIN_SM_90"))),
            "sm_80" => Some(include_bytes!(env!("FERROTUNE_CUBIN_SM_80"))),
            _ => None,
        }
    }
    #[cfg(not(ferrotune_cubin))]
    {
        let _ = arch;
        None
    }
}

/// Whether SASS assembled for `arch` runs on compute capability `cc`: the same major version
/// and a minor at least `arch`'s; an arch-specific `sm_XYa` only on XY exactly.
pub fn cubin_runs_on(arch: &str, cc: (i32, i32)) -> bool {
    let Some(v) = arch.strip_prefix("sm_") else { return false };
    let (digits, exact) = match v.strip_suffix('a') {
        Some(d) => (d, true),
        None => (v, false),
    };
    let Ok(n) = digits.parse::<i32>() else { return false };
    let (major, minor) = (n / 10, n % 10);
    cc.0 == major && if exact { cc.1 == minor } else { cc.1 >= minor }
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
    /// Loaded from the embedded cubin (no JIT) rather than the PTX.
    pub from_cubin: bool,
    module: Arc<CudaModule>,
    functions: Mutex<HashMap<String, Kernel>>,
}

impl Kernels {
    /// Loads `arch`'s kernels into `ctx`: the embedded cubin when there is one for this device
    /// (no JIT; `FERROTUNE_NO_CUBIN=1` skips it), else — or if the driver refuses it — the PTX.
    pub fn load(ctx: &Arc<CudaContext>, cc: (i32, i32), arch: &'static str, ptx: &'static str) -> Result<Kernels> {
        let cubin = embedded_cubin(arch)
            .filter(|_| cubin_runs_on(arch, cc) && std::env::var_os("FERROTUNE_NO_CUBIN").is_none());
        if let Some(bin) = cubin {
            match ctx.load_module(Ptx::from_binary(bin.to_vec())) {
                Ok(module) => {
                    return Ok(Kernels { arch, from_cubin: true, module, functions: Mutex::new(HashMap::new()) });
                }
                Err(e) => log::warn!("the embedded {arch} cubin did not load ({e:?}): JIT-compiling the PTX instead"),
            }
        }
        let module = ctx.load_module(Ptx::from_src(ptx)).ctx(|| format!("loading the {arch} PTX module"))?;
        Ok(Kernels { arch, from_cubin: false, module, functions: Mutex::new(HashMap::new()) })
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
    use super::{cubin_runs_on, runs_on};

    #[test]
    fn cubins_run_on_their_major_version_only() {
        assert!(cubin_runs_on("sm_90a", (9, 0)));
        assert!(!cubin_runs_on("sm_90a", (9, 1)));
        assert!(cubin_runs_on("sm_80", (8, 6)));
        assert!(!cubin_runs_on("sm_80", (9, 0)));
        assert!(!cubin_runs_on("sm_90", (8, 9)));
        assert!(!cubin_runs_on("sm_90", (10, 0)));
        assert!(!cubin_runs_on("compute_90", (9, 0)));
    }

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
