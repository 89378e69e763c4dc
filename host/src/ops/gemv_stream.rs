//! The streaming small-M kernel on the host (`kernels-gpu/src/gemv_stream.rs`): whether a
//! small-M call takes it and why, and its launch. It serves up to 16 rows of x against a weight
//! large enough that streaming it is the whole cost, on the sm_90a module, where both operands
//! can be copied by `cp.async.bulk` (16-byte aligned rows: aligned bases, leading dimensions
//! and K multiples of 8 elements); every other small-M call keeps the register-fed kernel
//! (`ops::gemv`).

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use ferrotune_kernels::gemv_stream::{self as ks, Ring, StreamPlan};

use super::gemm::{Gemm, Layout};
use crate::DType;
use crate::backend::Gpu;
use crate::error::{DriverContext, Error, Result};

const OP: &str = "gemm";

/// Weight elements (N x K) from which the streaming kernel serves a call. On the H100
/// (bench/results/gemvs-67e14fa00cda/, 4 KiB copies against the register-fed kernel): from
/// 2^25 elements it took 0.94-1.00 of the time on 9 of 11 shapes (1x14336x4096 45.2 µs against
/// 48.2, 1x6144x6144 31.2 against 33.1) and 1.02-1.06 on two; below, it lost on most (up to
/// 1.3x on 2048 x 2048 weights, 1.12x on 4x4608x4608). `FERROTUNE_SMALL_M_STREAM=0` (never) or
/// `=1` (wherever it can) overrides it; a profile entry (`path = "small-m"`, tile 3) asks for it
/// per shape.
pub const MIN_WEIGHT: usize = 1 << 25;

/// The small-M config's `tile` that names the streaming kernel (after the register-fed
/// kernel's width indices, `gemv::WIDTHS`).
pub const STREAM_TILE: usize = ferrotune_kernels::gemv::WIDTHS.len();

/// The width `gemm_plan` reports for a config naming the streaming kernel (no register-fed
/// width is 0).
pub const STREAM_WIDTH: usize = 0;

/// Why the streaming kernel serves the small-M call `g` (resolved) with `dtype` inputs on the
/// `arch` module, or why not (`Err`). `tuned`: the (K split, width) a tuned config names;
/// a register-fed width keeps that kernel, [`STREAM_WIDTH`] asks for this one whatever the
/// weight's size.
pub fn applies(
    g: &Gemm,
    dtype: DType,
    arch: &str,
    [pa, pb]: [u64; 2],
    tuned: Option<(usize, usize)>,
) -> std::result::Result<&'static str, &'static str> {
    let env = std::env::var("FERROTUNE_SMALL_M_STREAM").ok();
    if env.as_deref() == Some("0") {
        return Err("FERROTUNE_SMALL_M_STREAM=0");
    }
    if arch != "sm_90a" {
        return Err("bulk copies need the sm_90a module");
    }
    let asked = tuned.is_some_and(|t| t.1 == STREAM_WIDTH);
    if tuned.is_some() && !asked {
        return Err("the tuned config names the register-fed kernel's K split and width");
    }
    let forced = asked || env.as_deref() == Some("1");
    if !matches!(dtype, DType::Bf16 | DType::F16) || g.m == 0 || g.m > ks::MAX_M || g.batch != 1 {
        return Err("the streaming kernel takes 1..=16 rows of 16-bit data, one matrix");
    }
    let aligned = g.a_layout == Layout::Row
        && g.b_layout == Layout::Col
        && pa.is_multiple_of(16)
        && pb.is_multiple_of(16)
        && g.lda.is_multiple_of(8)
        && g.ldb.is_multiple_of(8)
        && g.k.is_multiple_of(8)
        && g.k > 0;
    if !aligned {
        return Err("rows not 16-byte aligned (bulk copies need aligned bases, leading dimensions and K)");
    }
    if !forced && g.n.saturating_mul(g.k) < MIN_WEIGHT {
        return Err("weight below 2^25 elements (the register-fed kernel is as fast or faster there)");
    }
    Ok("weight rows streamed by bulk copies into a shared-memory ring, units dealt evenly over the SMs")
}

/// The row groups of the entry that serves `m` rows of x (8 rows each, `gemv_stream::M_GROUPS`).
pub fn groups_for(m: usize) -> usize {
    if m <= 8 { 1 } else { 2 }
}

/// The entry, plan and ring of a call `applies` accepted, on a device of `sms` SMs: chunks of
/// `gemv_stream::KC` elements, or `FERROTUNE_SMALL_M_STREAM_KC` (one of `gemv_stream::KCS`,
/// for A/B runs), halved where the ring would hold fewer than two stages.
pub fn describe(g: &Gemm, dtype: DType, out: DType, sms: usize) -> Option<(&'static str, StreamPlan, Ring)> {
    let groups = groups_for(g.m);
    let name = ks::entry_name(dtype, out, groups)?;
    let env = std::env::var("FERROTUNE_SMALL_M_STREAM_KC").ok().and_then(|v| v.parse::<usize>().ok());
    let ring = Ring::fit(g.m, env.filter(|k| ks::KCS.contains(k)).unwrap_or(ks::KC));
    Some((name, StreamPlan::new(g.n, g.k, ring.kc, sms.max(1)), ring))
}

/// Launches the streaming kernel on `ptrs` = (a, b, c, d, bias).
///
/// # Safety
/// `applies` accepted `g` (resolved) at these pointers; they cover their matrices as `g`
/// describes them and stay alive until the launch completes.
pub(crate) unsafe fn launch(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    g: &Gemm,
    dtype: DType,
    out: DType,
    ptrs: [u64; 5],
) -> Result<()> {
    let [pa, pb, pc, pd, pbias] = ptrs;
    let Some((name, plan, ring)) = describe(g, dtype, out, gpu.info.sm_count.max(1) as usize) else {
        return Err(Error::UnsupportedDtype { op: OP, dtype: dtype.name() });
    };
    let groups = groups_for(g.m);
    let smem = ring.smem_bytes(groups) as u32;
    if ring.stages < 2 {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!("{name}: a ring of {ring:?} has fewer than two stages"),
        });
    }
    if smem > gpu.info.shared_mem_per_block_optin {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!(
                "{name} needs {smem} bytes of shared memory, the device allows {}",
                gpu.info.shared_mem_per_block_optin
            ),
        });
    }
    let go = |ws: u64| -> Result<()> {
        let kernel = gpu.kernels()?.function_with_smem(name, smem)?;
        if ks::THREADS > kernel.max_threads {
            return Err(Error::InvalidConfig {
                op: OP,
                why: format!("{name} allows {} threads per block, needs {}", kernel.max_threads, ks::THREADS),
            });
        }
        let cfg = LaunchConfig {
            grid_dim: (plan.blocks as u32, 1, 1),
            block_dim: (ks::THREADS, 1, 1),
            shared_mem_bytes: smem,
        };
        let dims = [g.m, g.n, g.k, g.lda, g.ldb, g.ldc].map(|x| x as u32);
        let e = g.epilogue;
        let flags = e.flags();
        let mut lb = cs.launch_builder(&kernel.func);
        for p in [&pa, &pb, &pc, &pd, &pbias, &ws] {
            lb.arg(p);
        }
        for x in &dims {
            lb.arg(x);
        }
        let (kc, stages) = (ring.kc as u32, ring.stages as u32);
        lb.arg(&e.alpha).arg(&e.beta).arg(&flags).arg(&kc).arg(&stages);
        // SAFETY: the arguments match `gemvs_entry!` in kernels-gpu/src/entry/gemv_stream.rs (6
        // pointers, 6 u32, 2 f32, 3 u32); the ring has two stages or more; `applies` checked the rows, alignment and layout the
        // bulk copies need; the workspace holds `plan.workspace_bytes(groups)` with its counters
        // at zero (the kernel leaves them so); block size, grid and shared memory are the ones
        // the kernel is written for.
        unsafe { lb.launch(cfg) }
            .ctx(|| format!("launching {name} ({}x{}x{}, {} blocks)", g.m, g.n, g.k, plan.blocks))?;
        Ok(())
    };
    let slot = crate::workspace::Slot::SmallMStream;
    crate::workspace::with_counters(gpu, cs, slot, plan.workspace_bytes(groups), plan.counter_bytes(), go)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_aligned_large_weights_on_sm90a_only() {
        let rc = |m, n, k| Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).resolved();
        let g = rc(1, 4096, 4096);
        let ok = |g: &Gemm, arch: &str, ptrs: [u64; 2]| applies(g, DType::Bf16, arch, ptrs, None).is_ok();
        assert!(!ok(&g, "sm_90a", [256, 256]), "below 2^25 elements");
        let g = rc(1, 8192, 4096);
        assert!(ok(&g, "sm_90a", [256, 256]));
        assert!(!ok(&g, "sm_90", [256, 256]));
        assert!(!ok(&g, "sm_90a", [258, 256]), "unaligned x");
        assert!(!ok(&g, "sm_90a", [256, 264 + 2]), "unaligned weight");
        // K not a multiple of 8, even with 16-byte leading dimensions (the last chunk's copy
        // would not be a whole number of 16-byte units).
        let odd_k = Gemm { lda: 4104, ldb: 4104, ..rc(1, 8192, 4100) };
        assert!(!ok(&odd_k, "sm_90a", [256, 256]), "K not a multiple of 8");
        assert!(ok(&Gemm { k: 4096, ..odd_k }, "sm_90a", [256, 256]), "padded rows, K a multiple of 8");
        assert!(!ok(&rc(17, 8192, 4096), "sm_90a", [256, 256]), "17 rows");
        assert!(!ok(&rc(1, 1024, 1024), "sm_90a", [256, 256]), "small weight");
        assert!(!ok(&Gemm::new(1, 8192, 4096).resolved(), "sm_90a", [256, 256]), "row-major weight");
        assert!(applies(&g, DType::F32, "sm_90a", [256, 256], None).is_err());
        assert!(applies(&g, DType::F16, "sm_90a", [256, 256], Some((1, 1))).is_err(), "tuned register-fed config");
        let small = rc(3, 40, 24);
        assert!(applies(&small, DType::F16, "sm_90a", [256, 256], Some((1, STREAM_WIDTH))).is_ok(), "asked for");
        let (name, p, ring) = describe(&rc(9, 4096, 4096), DType::F16, DType::F32, 132).unwrap();
        if std::env::var("FERROTUNE_SMALL_M_STREAM_KC").is_err() {
            assert_eq!((name, p.blocks, p.slabs, p.kchunks), ("ft_gemvs_f16_f32_g2", 132, 256, 2));
            assert_eq!((ring.kc, ring.m, ring.stages), (2048, 9, 2));
            // 16 rows of x: two stages of 2048 would not fit, 1024 makes three.
            let (_, _, ring) = describe(&rc(16, 4096, 4096), DType::F16, DType::F16, 132).unwrap();
            assert_eq!((ring.kc, ring.stages), (1024, 3));
        }
    }
}
