//! The staged SGP forward and backward on the host (`ft_clifford_fwdt_*`, `ft_clifford_bwdt_*`,
//! sm_90a; the kernels' layout is `ferrotune_kernels::clifford::staged`): when the built-in
//! choice takes them, their launch config (`CliffordConfig` with `stages > 0`), the checks that
//! need the dtype and the device, and the forward's launch (the backward's is in
//! `sgp_bwd.rs`, beside the weight-gradient reduction it shares). Knobs for A/B runs:
//! `FERROTUNE_CLIFFORD_STAGED=1` makes them the built-in choice (else the register kernels),
//! `FERROTUNE_CLIFFORD_STAGED_FPT=2|4`
//! (2D forward) and `FERROTUNE_CLIFFORD_STAGES=k` (at most k stages) change the built-in config.

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use ferrotune_kernels::clifford::RowVariant;
use ferrotune_kernels::clifford::staged::{MAX_STAGES, entry_name, smem_bytes, threads_for};

use super::{Clifford, CliffordConfig, OP, opt_in_smem};
use crate::DType;
use crate::backend::Gpu;
use crate::device::DeviceInfo;
use crate::error::{DriverContext, Error, Result};

/// Features per thread compiled for `dim` (3D with 2 spilled: `entry/clifford_fwd_staged.rs`;
/// the backward has 2 in 2D, 4 in 3D).
pub fn fpts(dim: u32, backward: bool) -> &'static [u32] {
    match (dim, backward) {
        (2, false) => &[2, 4],
        (2, true) => &[2],
        _ => &[4],
    }
}

fn env_u32(key: &str) -> Option<u32> {
    std::env::var(key).ok().and_then(|v| v.parse().ok())
}

/// Inputs a stage holds: x, y (and grad_out in the backward).
fn tensors(backward: bool) -> usize {
    if backward { 3 } else { 2 }
}

/// Shared memory of a launch of `cfg` on `p` with `dtype` elements.
pub fn smem_of(cfg: &CliffordConfig, p: &Clifford, dtype: DType, backward: bool) -> usize {
    let c = if p.dim == 2 { 4 } else { 8 };
    smem_bytes(tensors(backward), c, cfg.rows_per_block.max(1) as usize, p.n, dtype.size_bytes(), cfg.stages as usize)
}

/// The built-in staged config for `p` (forward, or `backward`) on a device with `smem_optin`
/// bytes of shared memory a block may opt in to, or why there is none: 2 features a thread in
/// 2D (512 threads), 4 in 3D (256), a team of the power of two covering N, as many stages as
/// fit (at least 2), one block per SM.
pub fn plan(
    p: &Clifford,
    dtype: DType,
    smem_optin: usize,
    backward: bool,
) -> std::result::Result<CliffordConfig, String> {
    if p.b == 0 || p.n == 0 {
        return Err("an empty problem".into());
    }
    let fpt = match env_u32("FERROTUNE_CLIFFORD_STAGED_FPT") {
        Some(f) if fpts(p.dim, backward).contains(&f) => f,
        _ => fpts(p.dim, backward)[0],
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
    let need = smem_of(&cfg, p, dtype, backward);
    if need > smem_optin {
        return Err(format!("two stages of N = {} need {need} bytes of shared memory", p.n));
    }
    let cap = env_u32("FERROTUNE_CLIFFORD_STAGES").map_or(MAX_STAGES as u32, |k| k.clamp(2, MAX_STAGES as u32));
    while cfg.stages < cap
        && smem_of(&CliffordConfig { stages: cfg.stages + 1, ..cfg }, p, dtype, backward) <= smem_optin
    {
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
    backward: bool,
) -> std::result::Result<CliffordConfig, String> {
    if std::env::var("FERROTUNE_CLIFFORD_STAGED").ok().as_deref() != Some("1") {
        return Err(
            "off unless FERROTUNE_CLIFFORD_STAGED=1 (slower than the register kernels on the H200 so far)".into()
        );
    }
    if arch != "sm_90a" {
        return Err("the staged kernels' bulk copies need the sm_90a module".into());
    }
    plan(p, dtype, dev.shared_mem_per_block_optin as usize, backward)
}

/// Checks a staged config (`stages > 0`) beyond the structural checks of
/// [`CliffordConfig::validate`]: a compiled feature count, the threads it is compiled for, the
/// team covering N, the stage count, and (with a device) the shared memory.
pub fn validate(
    cfg: &CliffordConfig,
    p: &Clifford,
    dtype: DType,
    dev: Option<&DeviceInfo>,
    backward: bool,
) -> Result<()> {
    let bad = |why: String| Err(Error::InvalidConfig { op: OP, why });
    let v = cfg.variant;
    let pass = if backward { "backward" } else { "forward" };
    let compiled = fpts(p.dim, backward);
    if v.vec || v.stream_w || !compiled.contains(&v.vpt) {
        return bad(format!(
            "the staged {pass} in {}D is compiled for {compiled:?} features a thread, not {v:?}",
            p.dim
        ));
    }
    if cfg.threads != threads_for(v.vpt) {
        return bad(format!(
            "the staged {pass} with {} features a thread runs {} threads a block",
            v.vpt,
            threads_for(v.vpt)
        ));
    }
    if !cfg.rows_per_block.is_power_of_two() || cfg.rows_per_block > cfg.threads {
        return bad(format!("rows per block {} must be a power of two up to threads", cfg.rows_per_block));
    }
    if (cfg.team() as usize) * (v.vpt as usize) < p.n {
        return bad(format!("{} threads per row at {} features each do not cover N = {}", cfg.team(), v.vpt, p.n));
    }
    if !(2..=MAX_STAGES as u32).contains(&cfg.stages) {
        return bad(format!("stages {} must be in 2..={MAX_STAGES}", cfg.stages));
    }
    if let Some(d) = dev {
        let need = smem_of(cfg, p, dtype, backward);
        if need > d.shared_mem_per_block_optin as usize {
            return bad(format!(
                "{} stages of {} rows of N = {} need {need} bytes of shared memory, the device allows {}",
                cfg.stages, cfg.rows_per_block, p.n, d.shared_mem_per_block_optin
            ));
        }
    }
    Ok(())
}

/// Blocks of a staged launch: one per group of rows, at most one per SM.
pub fn blocks(p: &Clifford, cfg: &CliffordConfig, sm_count: u32) -> u32 {
    p.b.div_ceil(cfg.rows_per_block.max(1) as usize).min(sm_count as usize * cfg.blocks_per_sm.max(1) as usize).max(1)
        as u32
}

/// Whether every segment of these inputs starts and ends 16-byte aligned (the entries'
/// `aligned` argument).
pub fn aligned(ptrs: &[u64], p: &Clifford, dtype: DType) -> u32 {
    (ptrs.iter().all(|q| q % 16 == 0) && (p.n * dtype.size_bytes()).is_multiple_of(16)) as u32
}

/// The staged kernel `cfg` names, checked for the module, the device and the threads, with its
/// shared memory raised: `(kernel, name, shared bytes)`.
pub(super) fn kernel(
    gpu: &Gpu,
    p: &Clifford,
    cfg: &CliffordConfig,
    dtype: DType,
    backward: bool,
) -> Result<(crate::module::Kernel, String, u32)> {
    let arch = gpu.kernels()?.arch;
    if arch != "sm_90a" {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!("the staged kernels (stages {}) need the sm_90a module; this GPU runs {arch}", cfg.stages),
        });
    }
    validate(cfg, p, dtype, Some(&gpu.info), backward)?;
    let name = entry_name(backward, p.dim, dtype, cfg.variant.vpt).as_str().to_string();
    let kernel = gpu.kernels()?.function(&name)?;
    super::check_threads(&kernel, &name, cfg.threads)?;
    let smem = opt_in_smem(gpu, &kernel, &name, smem_of(cfg, p, dtype, backward))?;
    Ok((kernel, name, smem))
}

/// Launches the staged forward (`cfg.stages > 0`) on `x, y, w -> out` (device pointers of
/// operands the caller checked: `C * B * N` elements, weights `N * W`).
pub(super) fn launch_forward(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    p: &Clifford,
    cfg: &CliffordConfig,
    dtype: DType,
    [x, y, w]: [u64; 3],
    out: u64,
) -> Result<()> {
    let (kernel, name, smem) = kernel(gpu, p, cfg, dtype, false)?;
    let launch = LaunchConfig {
        grid_dim: (blocks(p, cfg, gpu.info.sm_count), 1, 1),
        block_dim: (cfg.threads, 1, 1),
        shared_mem_bytes: smem,
    };
    let (b, n, norm, team, stages) = (p.b, p.n, p.normalize as u32, cfg.team(), cfg.stages);
    let al = aligned(&[x, y], p, dtype);
    let mut lb = cs.launch_builder(&kernel.func);
    lb.arg(&x).arg(&y).arg(&w).arg(&out).arg(&b).arg(&n).arg(&norm).arg(&team).arg(&stages).arg(&al);
    // SAFETY: the arguments match `fwdt_entry!` in kernels-gpu/src/entry/clifford_fwd_staged.rs
    // (pointers as u64, b and n as usize, then five u32); the caller checked the operands'
    // lengths; `kernel` validated the features per thread, the threads the entry is compiled
    // for, the team covering N, 2 <= stages <= MAX_STAGES and the shared memory, which
    // `smem_of` sizes for two inputs, the block's rows and stages; the team is a power of two
    // dividing the threads; `aligned` is set only when both inputs start 16-byte aligned and a
    // row is a multiple of 16 bytes.
    unsafe { lb.launch(launch) }.ctx(|| format!("launching {name} on {b} x {n}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_covers_n_and_fills_shared_memory() {
        let optin = 227 * 1024;
        for backward in [false, true] {
            for dim in [2u32, 3] {
                for n in [1usize, 7, 128, 512, 777, 1000, 1024] {
                    for dt in [DType::F32, DType::Bf16] {
                        let p = Clifford::new(dim, 4096, n, true);
                        let c = plan(&p, dt, optin, backward).unwrap_or_else(|e| panic!("{p:?}: {e}"));
                        c.validate(&p, None).unwrap();
                        validate(&c, &p, dt, None, backward).unwrap();
                        assert!(smem_of(&c, &p, dt, backward) <= optin);
                        let more = CliffordConfig { stages: c.stages + 1, ..c };
                        assert!(
                            c.stages == MAX_STAGES as u32 || smem_of(&more, &p, dt, backward) > optin,
                            "{p:?} {c:?}"
                        );
                    }
                }
            }
        }
        // 3D f32 rows of 1024 features: 64 KiB a stage forward, three of them; 96 KiB backward, two.
        assert_eq!(plan(&Clifford::new(3, 8, 1024, true), DType::F32, optin, false).unwrap().stages, 3);
        assert_eq!(plan(&Clifford::new(3, 8, 1024, true), DType::F32, optin, true).unwrap().stages, 2);
        assert!(plan(&Clifford::new(2, 8, 1025, true), DType::F32, optin, false).is_err());
        assert!(
            plan(&Clifford::new(3, 8, 1024, true), DType::F32, 100 * 1024, false).is_err(),
            "two stages do not fit"
        );
    }

    #[test]
    fn validate_rejects_what_is_not_compiled() {
        let p = Clifford::new(3, 64, 512, true);
        let c = plan(&p, DType::F32, 227 * 1024, false).unwrap();
        let two = CliffordConfig { variant: RowVariant { vpt: 2, ..c.variant }, threads: 512, ..c };
        assert!(validate(&two, &p, DType::F32, None, false).is_err(), "3D has no 2-feature entry");
        assert!(validate(&CliffordConfig { threads: 512, ..c }, &p, DType::F32, None, false).is_err());
        assert!(validate(&CliffordConfig { stages: 9, ..c }, &p, DType::F32, None, false).is_err());
        assert!(validate(&CliffordConfig { stages: 1, ..c }, &p, DType::F32, None, false).is_err());
        let narrow = CliffordConfig { rows_per_block: 4, ..c };
        assert!(validate(&narrow, &p, DType::F32, None, false).is_err(), "a team of 64 at 4 features misses N = 512");
        let p2 = Clifford::new(2, 64, 512, true);
        let b = plan(&p2, DType::F32, 227 * 1024, true).unwrap();
        let four = CliffordConfig { variant: RowVariant { vpt: 4, ..b.variant }, threads: 256, ..b };
        assert!(validate(&four, &p2, DType::F32, None, true).is_err(), "the 2D backward has 2 features a thread");
    }

    #[test]
    fn alignment_needs_every_pointer_and_whole_rows() {
        let p = Clifford::new(2, 8, 512, true);
        assert_eq!(aligned(&[0, 4096], &p, DType::F32), 1);
        assert_eq!(aligned(&[0, 4100], &p, DType::F32), 0);
        assert_eq!(aligned(&[0, 4096], &Clifford::new(2, 8, 777, true), DType::F32), 0);
        assert_eq!(aligned(&[0, 4096], &Clifford::new(2, 8, 8, true), DType::Bf16), 1);
        assert_eq!(aligned(&[0, 4096], &Clifford::new(2, 8, 4, true), DType::Bf16), 0);
    }
}
