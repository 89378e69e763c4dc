//! Split-K on the GPU: K cut into slices whose f32 partial products run as one strided-batched
//! launch of the ordinary GEMM entry plus a launch for the last, shorter slice, into a pool
//! workspace `[slice][m][n]`; the reduce kernel adds them and applies the call's epilogue.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtrMut, LaunchConfig, PushKernelArg};
use ferrotune_kernels::gemm::GemmVariant;
use ferrotune_kernels::splitk::{REDUCE_THREADS, SplitPlan, reduce_entry};

use super::gemm::{Epilogue, Gemm, Layout, OP, launch, variant_chosen};
use crate::DType;
use crate::backend::Gpu;
use crate::config::GemmConfig;
use crate::error::{DriverContext, Error, Result};

/// The two GEMM launches of a split-K call (see [`split_launches`]).
#[derive(Clone, Copy, Debug)]
pub struct SplitLaunches {
    pub plan: SplitPlan,
    /// The first `slices - 1` slices: a strided batch over K (batch index = slice), plain
    /// epilogue, f32 output into the workspace `[slice][m][n]`.
    pub part: Gemm,
    /// The last slice (`last_k` long), into the workspace's last matrix.
    pub last: Gemm,
    pub v_part: GemmVariant,
    pub v_last: GemmVariant,
    /// Addresses of the last slice's first elements of A and B.
    pub last_a: u64,
    pub last_b: u64,
}

/// The partial GEMMs of `plan` for the resolved single GEMM `g` with inputs of `dtype` at
/// `pa`, `pb`, and their compiled variants (f32 output; the load width from each launch's own
/// pointers and strides; the tile forced by `g`, else `chosen`'s where it has an f32-output
/// variant, else tile 0). An error where the forced tile has no such variant.
pub fn split_launches(
    g: &Gemm,
    dtype: DType,
    plan: SplitPlan,
    pa: u64,
    pb: u64,
    chosen: GemmConfig,
) -> Result<SplitLaunches> {
    if !plan.is_split() || g.batch > 1 {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!("split-K needs a single matrix and at least 2 slices (batch {}, {:?})", g.batch, plan),
        });
    }
    // Element offset of `kc` along K in each operand.
    let off_a = match g.a_layout {
        Layout::Row => plan.kc,
        Layout::Col => plan.kc * g.lda,
    };
    let off_b = match g.b_layout {
        Layout::Row => plan.kc * g.ldb,
        Layout::Col => plan.kc,
    };
    let mn = g.m.checked_mul(g.n).ok_or_else(|| Error::OutOfMemory {
        requested: usize::MAX,
        available: 0,
        what: format!("the split-K workspace of {} x {} floats", g.m, g.n),
    })?;
    let part = Gemm {
        k: plan.kc,
        batch: plan.slices - 1,
        stride_a: off_a,
        stride_b: off_b,
        ldc: g.n,
        stride_c: mn,
        epilogue: Epilogue::PLAIN,
        split_k: Some(1),
        ..*g
    };
    let last = Gemm { k: plan.last_k, batch: 1, ..part };
    let es = dtype.size_bytes() as u64;
    let rest = (plan.slices - 1) as u64;
    let (last_a, last_b) = (pa + rest * off_a as u64 * es, pb + rest * off_b as u64 * es);
    let why_split = |e: Error| match e {
        Error::InvalidConfig { op, why } => Error::InvalidConfig {
            op,
            why: format!("split-K's partial products need an f32-output GEMM variant: {why}"),
        },
        e => e,
    };
    let v_part = variant_chosen(&part, dtype, DType::F32, pa, pb, chosen).map_err(why_split)?;
    let v_last = variant_chosen(&last, dtype, DType::F32, last_a, last_b, chosen).map_err(why_split)?;
    Ok(SplitLaunches { plan, part, last, v_part, v_last, last_a, last_b })
}

/// Split-K on the GPU: the first `plan.slices - 1` slices of K as one strided-batched launch
/// of the GEMM entry (batch index = slice, plain epilogue, f32 output into the workspace
/// `[slice][m][n]`), the last, shorter slice as a second launch, then the reduce kernel adds
/// the slices and applies the call's epilogue into D. The workspace is allocated on the stream
/// and freed in stream order after the reduce.
///
/// # Safety
/// `ptrs` = (a, b, c, d, bias) on the device, covering the single matrix `g` describes (as
/// `check` proves for the call's views) and staying alive until the launches complete.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn launch_split(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    g: &Gemm,
    cfg: GemmConfig,
    plan: SplitPlan,
    dtype: DType,
    out: DType,
    [pa, pb, pc, pd, pbias]: [u64; 5],
) -> Result<()> {
    let (m, n) = (g.m, g.n);
    let SplitLaunches { part, last, v_part, v_last, last_a: pa_last, last_b: pb_last, .. } =
        split_launches(g, dtype, plan, pa, pb, cfg)?;
    let mn = part.stride_c;
    let ws_len = plan.workspace_elems_checked(m, n).ok_or_else(|| Error::OutOfMemory {
        requested: usize::MAX,
        available: 0,
        what: format!("the split-K workspace of {} x {m} x {n} floats", plan.slices),
    })?;
    let rest = (plan.slices - 1) as u64;
    let reduce = gpu.kernels()?.function(reduce_entry(out))?;
    // Left uninitialised: the workspace is written in full by the two GEMM launches (every (slice, i, j)
    // with i < m, j < n) before the reduce reads it, all in stream order.
    let mut ws = crate::pool::Pooled::<f32>::uninit(&gpu.pool, cs, ws_len)?;
    let (pw, gw) = ws.device_ptr_mut(cs);
    let pw_last = pw + rest * mn as u64 * 4;
    // SAFETY: the caller vouches A and B cover the m x k problem at these leading dimensions; slice
    // z < slices - 1 reads K range [z kc, (z + 1) kc) and the last [rest kc, k), all inside it.
    // The workspace holds `slices` tight m x n f32 matrices; C is not read (beta = 0) and no
    // bias is added, so the workspace stands in for those pointers. `variant_chosen` matched
    // each launch's load width to its pointers and strides.
    unsafe {
        launch(cs, gpu, &part, v_part, [pa, pb, pw, pw, pw], false)?;
        launch(cs, gpu, &last, v_last, [pa_last, pb_last, pw_last, pw_last, pw_last], false)?;
    }
    let total = m * n.div_ceil(4);
    let blocks = total.div_ceil(REDUCE_THREADS as usize).clamp(1, 16 * gpu.info.sm_count.max(1) as usize) as u32;
    let launch_cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (REDUCE_THREADS, 1, 1), shared_mem_bytes: 0 };
    let dims = [m, n, g.ldc, plan.slices].map(|x| x as u32);
    let stride = mn as u64;
    let e = g.epilogue;
    let flags = e.flags();
    let mut lb = cs.launch_builder(&reduce.func);
    lb.arg(&pw).arg(&pc).arg(&pd).arg(&pbias);
    for x in &dims {
        lb.arg(x);
    }
    lb.arg(&stride).arg(&e.alpha).arg(&e.beta).arg(&flags);
    // SAFETY: matches `reduce_entry!` in kernels-gpu/src/entry/splitk.rs (4 pointers, 4 u32,
    // 1 u64, 2 f32, 1 u32). The workspace holds `slices` m x n matrices `stride` apart (the
    // kernel uses 16-byte loads only where its base, n and stride allow); the caller vouches
    // that D (and C when beta != 0) cover m rows of ldc and bias n entries when it is added.
    unsafe { lb.launch(launch_cfg) }
        .ctx(|| format!("launching {} ({m}x{n}, {} slices)", reduce_entry(out), plan.slices))?;
    drop(gw);
    // Freed in stream order, after the reduce.
    drop(ws);
    Ok(())
}
