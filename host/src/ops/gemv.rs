//! Small-M GEMM on the GPU (the gemv family, `kernels-gpu/src/gemv.rs`): whether a call takes
//! it and why, and its launch. M = 1..=64 rows of 16-bit inputs against any weight: every block
//! streams 1, 2 or 4 slabs of 16 weight rows once (the width: wider blocks read x from L2 fewer
//! times), with a K split over blocks (fixed up by the last block, deterministic) when the
//! blocks alone leave SMs idle.

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use ferrotune_kernels::gemv::{self as kv, SmallMPlan};
use ferrotune_kernels::pack as kp;

use super::gemm::{Gemm, Layout, operand_ptrs};
use crate::DType;
use crate::backend::Gpu;
use crate::buffer::{Scalar, View, ViewMut};
use crate::error::{DriverContext, Error, Result};

const OP: &str = "gemm";

/// Why the small-M family serves `g` (resolved) with `dtype` inputs, or `None` when it does
/// not: 16-bit inputs, 1 <= M <= 64, a single matrix (batched calls left matrices after the
/// first unwritten on the H100: they take the tiles until that is fixed), no tile or split
/// forced by the call, and not switched off with `FERROTUNE_SMALL_M=0`.
pub fn small_m_applies(g: &Gemm, dtype: DType) -> Option<&'static str> {
    if std::env::var("FERROTUNE_SMALL_M").is_ok_and(|v| v == "0") {
        return None;
    }
    if dtype == DType::F32
        || g.m == 0
        || g.m > kv::MAX_M
        || g.batch != 1
        || g.tile.is_some()
        || g.split_k.is_some_and(|s| s > 1)
    {
        return None;
    }
    Some(if vector_loads(g, [0, 0]) {
        "M <= 64: streams the weight once over all SMs (small-M family, K-contiguous 16-byte loads)"
    } else {
        "M <= 64: streams the weight once over all SMs (small-M family, element loads: A not \
         row-major or B not column-major)"
    })
}

/// Whether the 16-byte variant serves `g`: A row-major and B column-major (K contiguous). Rows
/// that are not 16-byte aligned are read in an aligned frame (`interleaved`) or with two
/// aligned loads and a funnel shift, so the addresses do not matter (kept in the signature
/// for the callers that know them).
pub fn vector_loads(g: &Gemm, _ptrs: [u64; 2]) -> bool {
    g.a_layout == Layout::Row && g.b_layout == Layout::Col
}

/// Whether the weight B at `pb` is read in interleaved slabs (`gemv::slab_row`): the 16-byte
/// variant with rows that are not all 16-byte aligned (odd K, odd leading dimension, a view at
/// an odd offset). Each slab then takes rows 8 apart, which share one misalignment, and walks
/// K in that misalignment's frame: every load of the weight is one aligned 16-byte vector, and
/// x is read from its 8 shifted copies (`pack::SHIFTS`, made first: m x (k + 7) elements
/// each), the one of the slab's shift, aligned too. `FERROTUNE_SMALL_M_UNALIGNED=0` turns it
/// off (consecutive rows, two loads and a funnel shift per vector; unaligned calls are then
/// packed first above `pack::MIN_MACS`), for A/B runs. Weights below [`IN_PLACE_MIN_WEIGHT`]
/// elements keep the funnel shift: there the copies' launch costs more than it saves.
pub fn interleaved(g: &Gemm, [pa, pb]: [u64; 2]) -> bool {
    vector_loads(g, [pa, pb])
        && !(pb.is_multiple_of(16) && g.ldb.is_multiple_of(8))
        && g.n.saturating_mul(g.k) >= IN_PLACE_MIN_WEIGHT
        && !std::env::var("FERROTUNE_SMALL_M_UNALIGNED").is_ok_and(|v| v == "0")
}

/// Weight elements (N x K) from which unaligned rows are read by interleaved slabs. On the H100
/// (bench/results/irregular/run9-9016e63693b2/irregular-explore.txt, queued ms, interleaved
/// against the funnel shift): 33x1023x777 0.0148 against 0.0207, 1x4097x777 0.016 against
/// 0.020, but 8x3000x65 0.0122 against 0.0096 and 3x5x7 0.0148 against 0.0055 (suite, run 7).
pub const IN_PLACE_MIN_WEIGHT: usize = 1 << 19;

/// Whether a call the small-M family takes should skip the pack of its unaligned operands: up
/// to [`IN_PLACE_MAX_ROWS`] rows the weight is read in place (`interleaved`), which streams it
/// once where the pack would copy it first and the Hopper tiles then read the copy. This holds
/// whatever the weight's size: on the H100, 24x8191x4099 ran 0.057 ms in place against 0.098
/// packed for the Hopper tiles (bench/results/rows17-32-1e4e30fa25e0/), although aligned
/// calls of 17 to 32 rows against weights that large take the Hopper path
/// (`gemm_plan_small_m::hopper_rows`). From 33 rows large weights run in blocks of two slabs
/// (`gemv::heuristic_width`): 33x8191x4099 0.069-0.074 ms in place against 0.100 packed
/// (bench/results/smallm-width-ba3e29311e30/), hence the limit of 40 rows; above, the packed
/// copies go to the Hopper tiles (x costs the small-M kernel more with every row group), unless
/// the row kernel takes the call (`gemv_rows::applies`: up to 64 rows, x staged on chip).
/// The slabs read in place with x row-major only (`vector_loads`); the row kernel stages x of
/// either layout. `FERROTUNE_SMALL_M_BESIDE_HOPPER=n` moves the limit to n rows. The plan
/// packs anyway, for the Hopper tiles, 33 to 64 rows of K below 1024 where the packed problem
/// can take them (`gemm_plan_small_m::packed_for_hopper`).
pub fn reads_unaligned_in_place(g: &Gemm, dtype: DType, ptrs: [u64; 2]) -> bool {
    let limit = std::env::var("FERROTUNE_SMALL_M_BESIDE_HOPPER").ok().and_then(|v| v.parse::<usize>().ok());
    small_m_applies(g, dtype).is_some()
        && !std::env::var("FERROTUNE_SMALL_M_UNALIGNED").is_ok_and(|v| v == "0")
        && ((vector_loads(g, ptrs) && g.m <= limit.unwrap_or(IN_PLACE_MAX_ROWS))
            || (limit.is_none() && super::gemv_rows::applies(g, dtype, ptrs[1], None).is_ok()))
}

/// Whether interleaved slabs read x itself in their frame (funnel shifts, `gemv::X_IN_PLACE`)
/// rather than shifted copies made by a launch first: a single row against a K of at most
/// [`X_IN_PLACE_MAX_K`], where the copies' launch is most of the call. On the H100
/// (bench/results/smallm-xinplace-f0f91552f431/) 1x4097x777 ran 0.0197 ms in place against
/// 0.0226 with the copies, but in place lost 1.3-3x on long K (1x8193x4099 0.061 against
/// 0.046, 16x8193x4099 0.163 against 0.054) and tied at 8x4097x777.
/// `FERROTUNE_SMALL_M_X_COPIES=1` (copies always) or `=0` (never) overrides it, for A/B runs.
pub fn x_in_place(g: &Gemm) -> bool {
    match std::env::var("FERROTUNE_SMALL_M_X_COPIES").ok().as_deref() {
        Some("1") => false,
        Some("0") => true,
        _ => g.m == 1 && g.k <= X_IN_PLACE_MAX_K,
    }
}

/// K up to which one row of x is read in place by interleaved slabs ([`x_in_place`]).
pub const X_IN_PLACE_MAX_K: usize = 1024;

/// Rows up to which unaligned weights are read in place ([`reads_unaligned_in_place`]).
pub const IN_PLACE_MAX_ROWS: usize = 40;

/// The entry name and plan a call would launch with on a device of `sms` SMs (for `explain`
/// and the bench). Width (slabs per block): `FERROTUNE_SMALL_M_WIDTH=w` (1, 2 or 4; forced, for
/// A/B runs), else the tuned config's (narrowed to the widest compiled for the rows: 2 at 33
/// to 64), else `gemv::heuristic_width`; always 1 with element loads. K split: `FERROTUNE_SMALL_M_KSPLIT=s` (forced), else the tuned config's, else the
/// built-in split for that width; clamped to what K allows. `tuned`: (K split, width) of a
/// config that names the family.
pub fn describe(
    g: &Gemm,
    dtype: DType,
    out: DType,
    ptrs: [u64; 2],
    sms: usize,
    tuned: Option<(usize, usize)>,
) -> Option<(&'static str, SmallMPlan)> {
    let groups = kv::m_groups_for(g.m)?;
    let vec = vector_loads(g, ptrs);
    let forced = std::env::var("FERROTUNE_SMALL_M_WIDTH").ok().and_then(|v| v.parse::<usize>().ok());
    // A tuned config naming the streaming or the row kernel carries a marker, not a width: where
    // that kernel cannot run, the slab kernel takes its built-in width.
    let tuned_width = tuned.map(|t| t.1).filter(|w| kv::WIDTHS.contains(w));
    let width = match forced.filter(|w| kv::WIDTHS.contains(w)).or(tuned_width) {
        _ if !vec => 1,
        // The widest compiled for these rows, up to the one asked for.
        Some(w) => kv::WIDTHS.into_iter().filter(|&c| c <= w && kv::width_compiled(groups, c)).max().unwrap_or(1),
        None => wave_width(groups, g, interleaved(g, ptrs), sms),
    };
    let name = kv::entry_name(dtype, out, groups, vec, width)?;
    let env = || std::env::var("FERROTUNE_SMALL_M_KSPLIT").ok().and_then(|v| v.parse().ok());
    let per_sm = kv::blocks_per_sm(groups, width) as usize;
    let ksplit =
        env().or(tuned.map(|t| t.0)).unwrap_or_else(|| SmallMPlan::heuristic_ksplit(g.n, g.k, sms, width, per_sm));
    Some((name, SmallMPlan::with_rows(g.n, g.k, ksplit, interleaved(g, ptrs), width)))
}

/// The built-in width on a device of `sms` SMs: `gemv::heuristic_width`, except up to 16 rows
/// where one slab per block makes more than one and at most 1.5 waves of blocks: its second
/// wave would run mostly empty, while blocks of two slabs (as many per SM: the same slots) fit
/// in one. On the H100 (bench/results/smallm-m1-16461f943225/) 1x5120x5120 (320 slabs, 1.21
/// waves of 264 slots) ran 24.8 µs at width 2 against 29.6 at width 1, and 1x6144x6144 (1.45)
/// 32.9 against 35.3; below one wave (1x4096x4096 16.5 against 18.3) and well past it
/// (1x11008x4096, 2.6 waves: 37.8 against 40.7) width 1 stays ahead.
pub fn wave_width(groups: usize, g: &Gemm, interleaved: bool, sms: usize) -> usize {
    let w = kv::heuristic_width(groups, g.n, g.k);
    let same_slots = kv::width_compiled(groups, 2) && kv::blocks_per_sm(groups, 2) == kv::blocks_per_sm(groups, 1);
    if w != 1 || groups > 2 || !same_slots {
        return w;
    }
    let blocks = SmallMPlan::with_rows(g.n, g.k, 1, interleaved, 1).slabs * g.batch.max(1);
    let slots = sms * kv::blocks_per_sm(groups, 1) as usize;
    if blocks > slots && 2 * blocks <= 3 * slots { 2 } else { 1 }
}

/// Runs the resolved, checked GEMM `g` (for which `small_m_applies` said yes) on the stream,
/// with the tuned (K split, width) (`None`: the built-in ones).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<T: Scalar, O: Scalar>(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    g: &Gemm,
    tuned: Option<(usize, usize)>,
    a: &View<'_, T>,
    b: &View<'_, T>,
    c: Option<&View<'_, O>>,
    bias: Option<&View<'_, O>>,
    d: &mut ViewMut<'_, O>,
) -> Result<()> {
    let op = operand_ptrs(cs, a, b, c, bias, d)?;
    let [pa, pb, pc, pd, pbias] = op.ptrs;
    let arch = gpu.kernels()?.arch;
    if super::gemv_stream::applies(g, T::DTYPE, arch, [pa, pb], tuned).is_ok() {
        // SAFETY: `check` (ops/gemm.rs) proved every operand covers its matrix at the call's
        // leading dimensions, `applies` the alignment and layout; the guards keep them alive.
        unsafe { super::gemv_stream::launch(cs, gpu, g, T::DTYPE, O::DTYPE, op.ptrs) }?;
        drop(op);
        return Ok(());
    }
    if super::gemv_rows::applies(g, T::DTYPE, pb, tuned).is_ok() {
        // SAFETY: as above; `applies` checked the rows of x, the weight's layout and the
        // shared memory the staged x needs.
        unsafe { super::gemv_rows::launch(cs, gpu, g, T::DTYPE, O::DTYPE, op.ptrs) }?;
        drop(op);
        return Ok(());
    }
    if !interleaved(g, [pa, pb]) || x_in_place(g) {
        // SAFETY: `check` (ops/gemm.rs) proved every operand covers its batch of matrices at
        // the call's strides and leading dimensions; the guards keep them alive for the launch.
        unsafe { launch(cs, gpu, g, T::DTYPE, O::DTYPE, op.ptrs, tuned) }?;
        drop(op);
        return Ok(());
    }
    // Interleaved slabs read x from its shifted copies (one per misalignment a slab can have),
    // made first in the stream's workspace: `SHIFTS` matrices of m x shifted_ld(k).
    let ldx = kp::shifted_ld(g.k);
    let elems = kp::SHIFTS * g.m * ldx;
    let bytes = elems * T::DTYPE.size_bytes();
    let r = crate::workspace::with_stream_workspace(gpu, cs, crate::workspace::Slot::SmallMShift, bytes, |ws| {
        // SAFETY: the workspace holds `bytes` = `elems` 16-bit elements (asked for above) and
        // any bit pattern is a valid T.
        let copies = unsafe { ws.transmute::<T>(elems) }.ok_or_else(|| Error::InvalidConfig {
            op: OP,
            why: "the small-M shift workspace is smaller than asked".into(),
        })?;
        let copies = View::Cuda(copies);
        let (px, _gx) = crate::ops::gemm::device_ptr(&copies, cs)?;
        // SAFETY: A is m x k row-major at lda (`check`; `vector_loads` holds); the workspace
        // holds `bytes` (asked for above) and starts 256-byte aligned.
        unsafe { crate::ops::pack::launch_shifted_copies(cs, gpu, T::DTYPE, pa, px, g.m, g.k, g.lda) }?;
        let g2 = Gemm { lda: ldx, stride_a: g.m * ldx, ..*g };
        // SAFETY: as above for B, C, D and bias; A is now the copies, `SHIFTS` matrices of
        // m x ldx at stride_a, which the interleaved kernel reads at copy `row_shift` < SHIFTS.
        unsafe { launch(cs, gpu, &g2, T::DTYPE, O::DTYPE, [px, pb, pc, pd, pbias], tuned) }
    });
    drop(op);
    r
}

/// Launches the small-M kernel on `ptrs` = (a, b, c, d, bias).
///
/// # Safety
/// The pointers cover their matrices as `g` (resolved, 1 <= m <= 64, 16-bit `dtype`) describes
/// them, and stay alive until the launch completes.
unsafe fn launch(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    g: &Gemm,
    dtype: DType,
    out: DType,
    ptrs: [u64; 5],
    tuned: Option<(usize, usize)>,
) -> Result<()> {
    let [pa, pb, pc, pd, pbias] = ptrs;
    if dtype == DType::F32 || (out != dtype && out != DType::F32) {
        return Err(Error::UnsupportedDtype { op: OP, dtype: dtype.name() });
    }
    let Some((name, plan)) = describe(g, dtype, out, [pa, pb], gpu.info.sm_count.max(1) as usize, tuned) else {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!(
                "the small-M kernels take 1..={} rows and widths {:?} (16-byte variants), not {} rows at {:?}",
                kv::MAX_M,
                kv::WIDTHS,
                g.m,
                tuned
            ),
        });
    };
    let groups = kv::m_groups_for(g.m).unwrap_or(kv::M_GROUPS[3]);
    let ws_bytes = plan.workspace_bytes(g.m, g.n, g.batch).ok_or_else(|| Error::OutOfMemory {
        requested: usize::MAX,
        available: 0,
        what: format!("the small-M split workspace of {}x{}x{} (overflows)", g.m, g.n, plan.ksplit),
    })?;
    let smem = kv::smem_bytes(groups, plan.width) as u32;
    let go = |ws: u64| -> Result<()> {
        let kernel = gpu.kernels()?.function_with_smem(name, smem)?;
        if kv::THREADS > kernel.max_threads {
            return Err(Error::InvalidConfig {
                op: OP,
                why: format!("{name} allows {} threads per block, needs {}", kernel.max_threads, kv::THREADS),
            });
        }
        let grid = (plan.slabs as u32, plan.ksplit as u32, g.batch as u32);
        let cfg = LaunchConfig { grid_dim: grid, block_dim: (kv::THREADS, 1, 1), shared_mem_bytes: smem };
        let dims = [g.m, g.n, g.k, g.lda, g.ldb, g.ldc].map(|x| x as u32);
        let strides = [g.stride_a, g.stride_b, g.stride_c].map(|x| x as u64);
        let e = g.epilogue;
        let flags = e.flags();
        let layout = (if g.a_layout == Layout::Col { kv::A_COL } else { 0 })
            | (if g.b_layout == Layout::Row { kv::B_ROW } else { 0 })
            | (if interleaved(g, [pa, pb]) { kv::ROWS_INTERLEAVED } else { 0 })
            | (if x_in_place(g) { kv::X_IN_PLACE } else { 0 });
        let split = [plan.ksplit as u32, plan.kslice as u32];
        let mut lb = cs.launch_builder(&kernel.func);
        for p in [&pa, &pb, &pc, &pd, &pbias, &ws] {
            lb.arg(p);
        }
        for x in &dims {
            lb.arg(x);
        }
        for x in &strides {
            lb.arg(x);
        }
        lb.arg(&e.alpha).arg(&e.beta).arg(&flags).arg(&layout);
        for x in &split {
            lb.arg(x);
        }
        // SAFETY: the arguments match `gemv_entry!` in kernels-gpu/src/entry/gemv.rs (6 pointers,
        // 6 u32, 3 u64, 2 f32, 4 u32); the caller vouches for the operands; `describe` picked the
        // 16-byte variant only for K-contiguous A and B (`vector_loads`), and the plan's blocks
        // (of the entry's width) and K slices for the same `interleaved` choice as the layout
        // bit; the
        // workspace holds `plan.workspace_bytes` with its counters at zero (the kernel leaves them
        // so); the block size and shared memory are the ones the kernel is written for.
        unsafe { lb.launch(cfg) }.ctx(|| {
            format!("launching {name} ({}x{}x{}, batch {}, {} K slices)", g.m, g.n, g.k, g.batch, plan.ksplit)
        })?;
        Ok(())
    };
    // Without a split the workspace is never touched: D stands in for its address. With one,
    // the counters are zero (zeroed where the last call left data) and the buffer held until
    // the launch is queued.
    if ws_bytes > 0 {
        let slot = crate::workspace::Slot::SmallMSplit;
        crate::workspace::with_counters(gpu, cs, slot, ws_bytes, plan.counter_bytes(g.batch), go)
    } else {
        go(pd)
    }
}
