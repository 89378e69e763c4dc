//! The staged SGP forward on the host (`ft_clifford_fwdt_*`, sm_90a; the kernel's layout is
//! `ferrotune_kernels::clifford::staged`): when the built-in choice takes it, its launch config
//! (`CliffordConfig` with `stages > 0`), the checks that need the dtype and the device, and the
//! launch. Knobs for A/B runs: `FERROTUNE_CLIFFORD_STAGED=0` keeps the register kernels,
//! `FERROTUNE_CLIFFORD_STAGED_FPT=2|4` (2D) and `FERROTUNE_CLIFFORD_STAGES=k` (at most k stages)
//! change the built-in staged config.

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use ferrotune_kernels::clifford::RowVariant;
use ferrotune_kernels::clifford::staged::{MAX_STAGES, entry_name, smem_bytes, threads_for};

use super::{Clifford, CliffordConfig, OP, opt_in_smem};
use crate::DType;
use crate::backend::Gpu;
use crate::device::DeviceInfo;
use crate::error::{DriverContext, Error, Result};

/// Features per thread compiled for `dim` (3D with 2 spilled: `entry/clifford_fwd_staged.rs`).
pub fn fpts(dim: u32) -> &'static [u32] {
    if dim == 2 { &[2, 4] } else { &[4] }
}

fn env_u32(key: &str) -> Option<u32> {
    std::env::var(key).ok().and_then(|v| v.parse().ok())
}

/// Rows one block computes at once (a group) for `cfg`.
fn group_rows(cfg: &CliffordConfig) -> usize {
    cfg.rows_per_block.max(1) as usize
}

/// Shared memory of a launch of `cfg` on `p` with `dtype` elements.
pub fn smem_of(cfg: &CliffordConfig, p: &Clifford, dtype: DType) -> usize {
    let c = if p.dim == 2 { 4 } else { 8 };
    smem_bytes(c, group_rows(cfg), p.n, dtype.size_bytes(), cfg.stages as usize)
}

/// The built-in staged config for `p` on a device with `smem_optin` bytes of shared memory a
/// block may opt in to, or why there is none: 2 features a thread in 2D (512 threads), 4 in 3D
/// (256), a team of the power of two covering N, as many stages as fit (at least 2), one block
/// per SM.
pub fn plan(p: &Clifford, dtype: DType, smem_optin: usize) -> std::result::Result<CliffordConfig, String> {
    if std::env::var("FERROTUNE_CLIFFORD_STAGED").ok().as_deref() == Some("0") {
        return Err("FERROTUNE_CLIFFORD_STAGED=0".into());
    }
    if p.b == 0 || p.n == 0 {
        return Err("an empty problem".into());
    }
    let fpt = match env_u32("FERROTUNE_CLIFFORD_STAGED_FPT") {
        Some(f) if fpts(p.dim).contains(&f) => f,
        _ if p.dim == 2 => 2,
        _ => 4,
    };
    let threads = threads_for(fpt);
    let team = p.n.div_ceil(fpt as usize).next_power_of_two();
    if team > threads as usize {
        return Err(format!("N = {} needs more than {threads} threads at {fpt} features each", p.n));
    }
    let mut cfg = CliffordConfig {
        threads,
        rows_per_block: threads / team as u32,
        variant: RowVariant { vec: false, vpt: fpt, stream_w: false },
        blocks_per_sm: 1,
        cpu_rows: (4096 / p.n).max(1),
        stages: 2,
    };
    if smem_of(&cfg, p, dtype) > smem_optin {
        return Err(format!("two stages of N = {} need {} bytes of shared memory", p.n, smem_of(&cfg, p, dtype)));
    }
    let cap = env_u32("FERROTUNE_CLIFFORD_STAGES").map_or(MAX_STAGES as u32, |k| k.clamp(2, MAX_STAGES as u32));
    while cfg.stages < cap && smem_of(&CliffordConfig { stages: cfg.stages + 1, ..cfg }, p, dtype) <= smem_optin {
        cfg.stages += 1;
    }
    Ok(cfg)
}

/// The staged config the built-in choice takes on this GPU and module, or why not.
pub fn built_in(
    p: &Clifford,
    dtype: DType,
    arch: &str,
    dev: &DeviceInfo,
) -> std::result::Result<CliffordConfig, String> {
    if arch != "sm_90a" {
        return Err("the staged forward's bulk copies need the sm_90a module".into());
    }
    plan(p, dtype, dev.shared_mem_per_block_optin as usize)
}

/// Checks a staged config (`stages > 0`) beyond [`CliffordConfig::validate`]: a compiled
/// feature count, the threads it is compiled for, the stage count, and (with a device) the
/// shared memory.
pub fn validate(cfg: &CliffordConfig, p: &Clifford, dtype: DType, dev: Option<&DeviceInfo>) -> Result<()> {
    let bad = |why: String| Err(Error::InvalidConfig { op: OP, why });
    let v = cfg.variant;
    if v.vec || v.stream_w || !fpts(p.dim).contains(&v.vpt) {
        return bad(format!(
            "the staged forward in {}D is compiled for {:?} features a thread, not {v:?}",
            p.dim,
            fpts(p.dim)
        ));
    }
    if cfg.threads != threads_for(v.vpt) {
        return bad(format!(
            "the staged forward with {} features a thread runs {} threads a block",
            v.vpt,
            threads_for(v.vpt)
        ));
    }
    if !(2..=MAX_STAGES as u32).contains(&cfg.stages) {
        return bad(format!("stages {} must be in 2..={MAX_STAGES}", cfg.stages));
    }
    if let Some(d) = dev {
        let need = smem_of(cfg, p, dtype);
        if need > d.shared_mem_per_block_optin as usize {
            return bad(format!(
                "{} stages of {} rows of N = {} need {need} bytes of shared memory, the device allows {}",
                cfg.stages, cfg.rows_per_block, p.n, d.shared_mem_per_block_optin
            ));
        }
    }
    Ok(())
}

/// Launches the staged forward (`cfg.stages > 0`, validated) on `x, y, w -> out` (device
/// pointers of operands the caller checked: `C * B * N` elements, weights `N * W`).
#[allow(clippy::too_many_arguments)]
pub(super) fn launch(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    p: &Clifford,
    cfg: &CliffordConfig,
    dtype: DType,
    [x, y, w]: [u64; 3],
    out: u64,
) -> Result<()> {
    let arch = gpu.kernels()?.arch;
    if arch != "sm_90a" {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!("the staged forward (stages {}) needs the sm_90a module; this GPU runs {arch}", cfg.stages),
        });
    }
    validate(cfg, p, dtype, Some(&gpu.info))?;
    let name = entry_name(p.dim, dtype, cfg.variant.vpt);
    let kernel = gpu.kernels()?.function(name.as_str())?;
    super::check_threads(&kernel, name.as_str(), cfg.threads)?;
    let smem = opt_in_smem(gpu, &kernel, name.as_str(), smem_of(cfg, p, dtype))?;
    let groups = p.b.div_ceil(group_rows(cfg));
    let blocks = groups.min(gpu.info.sm_count as usize * cfg.blocks_per_sm.max(1) as usize).max(1) as u32;
    let es = dtype.size_bytes() as u64;
    let aligned = (x % 16 == 0 && y % 16 == 0 && (p.n as u64 * es).is_multiple_of(16)) as u32;
    let launch = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (cfg.threads, 1, 1), shared_mem_bytes: smem };
    let (b, n, norm, team, stages) = (p.b, p.n, p.normalize as u32, cfg.team(), cfg.stages);
    let mut lb = cs.launch_builder(&kernel.func);
    lb.arg(&x).arg(&y).arg(&w).arg(&out).arg(&b).arg(&n).arg(&norm).arg(&team).arg(&stages).arg(&aligned);
    // SAFETY: the arguments match `fwdt_entry!` in kernels-gpu/src/entry/clifford_fwd_staged.rs
    // (pointers as u64, b and n as usize, then five u32); the caller checked the operands'
    // lengths; `validate` checked the features per thread, the threads the entry is compiled
    // for, 2 <= stages <= MAX_STAGES and the shared memory, which `smem_of` sizes for the
    // block's rows and stages; the team is a power of two dividing the threads
    // (`CliffordConfig::validate`) with team * vpt >= N; `aligned` is set only when both
    // inputs start 16-byte aligned and a row is a multiple of 16 bytes.
    unsafe { lb.launch(launch) }.ctx(|| format!("launching {} on {b} x {n}", name.as_str()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_covers_n_and_fills_shared_memory() {
        let optin = 227 * 1024;
        for dim in [2u32, 3] {
            for n in [1usize, 7, 128, 512, 777, 1000, 1024] {
                for dt in [DType::F32, DType::Bf16] {
                    let p = Clifford::new(dim, 4096, n, true);
                    let c = plan(&p, dt, optin).unwrap_or_else(|e| panic!("{p:?}: {e}"));
                    c.validate(&p, None).unwrap();
                    validate(&c, &p, dt, None).unwrap();
                    assert!(c.team() as usize * c.variant.vpt as usize >= n);
                    assert!(smem_of(&c, &p, dt) <= optin);
                    let more = CliffordConfig { stages: c.stages + 1, ..c };
                    assert!(c.stages == MAX_STAGES as u32 || smem_of(&more, &p, dt) > optin, "{p:?} {c:?}");
                }
            }
        }
        // 3D f32 rows of 1024 features: 64 KiB a stage, three of them.
        assert_eq!(plan(&Clifford::new(3, 8, 1024, true), DType::F32, optin).unwrap().stages, 3);
        assert!(plan(&Clifford::new(2, 8, 1025, true), DType::F32, optin).is_err());
        assert!(plan(&Clifford::new(3, 8, 1024, true), DType::F32, 100 * 1024).is_err(), "two stages do not fit");
    }

    #[test]
    fn validate_rejects_what_is_not_compiled() {
        let p = Clifford::new(3, 64, 512, true);
        let c = plan(&p, DType::F32, 227 * 1024).unwrap();
        let two = CliffordConfig { variant: RowVariant { vpt: 2, ..c.variant }, threads: 512, ..c };
        assert!(validate(&two, &p, DType::F32, None).is_err(), "3D has no 2-feature entry");
        assert!(validate(&CliffordConfig { threads: 512, ..c }, &p, DType::F32, None).is_err());
        assert!(validate(&CliffordConfig { stages: 9, ..c }, &p, DType::F32, None).is_err());
        assert!(validate(&CliffordConfig { stages: 1, ..c }, &p, DType::F32, None).is_err());
    }
}
