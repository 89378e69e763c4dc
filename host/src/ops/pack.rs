//! Unaligned operands on the fast tiles: a 16-bit operand whose rows are not 16-byte aligned
//! (odd K or leading dimension, a view at an odd offset) would run the tile kernel with 2-byte
//! loads, an f32 one on TF32 (K not a multiple of 4) could not take the Hopper path (TMA
//! steps rows in 16-byte multiples) and would run the `mma.sync` tiles with 4-byte loads, and
//! an exact-f32 one would run the FFMA kernel's 4-byte form;
//! instead it is packed (one kernel, `kernels-gpu/src/pack.rs`) into an aligned,
//! zero-padded K-contiguous copy in the stream's workspace and the GEMM runs its 16-byte tiles
//! on that. The pack's time is part of the call.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use ferrotune_kernels::pack::{self as kp, b_offset, packed_ld};

use super::gemm::{Gemm, Layout, device_ptr, gemm};
use crate::DType;
use crate::backend::Gpu;
use crate::buffer::{Scalar, View, ViewMut};
use crate::error::{DriverContext, Error, Result};
use crate::stream::Stream;
use crate::workspace::{Slot, with_stream_workspace};

const OP: &str = "gemm";

/// Multiply-adds below which packing does not pay for its launch.
pub const MIN_MACS: usize = 1 << 25;

/// Whether an operand at `p` with leading dimension `ld` (elements of `dtype`) has 16-byte
/// aligned rows.
fn aligned(p: u64, ld: usize, dtype: DType) -> bool {
    p.is_multiple_of(16) && (ld * dtype.size_bytes()).is_multiple_of(16)
}

/// Why `g` (resolved) with inputs at `pa`, `pb` is packed first, or `None`: a single matrix, no
/// forced tile or split, at least one operand without 16-byte rows, and enough work
/// (`MIN_MACS`) to pay for the pack. Every input type: 16-bit inputs and f32 on TF32 for the
/// 16-byte tiles and TMA; exact f32 for the FFMA kernel's 16-byte form, whose fragments are
/// double-buffered (the 4-byte form's are not: it would need 151 registers), on the H200
/// 0.52-0.59x cuBLAS on unaligned rows against 0.76-0.97x aligned
/// (bench/results/ffma-v4-277ad92edbfc/run1).
pub fn pack_applies(g: &Gemm, dtype: DType, [pa, pb]: [u64; 2]) -> Option<&'static str> {
    if std::env::var("FERROTUNE_PACK").is_ok_and(|v| v == "0") {
        return None;
    }
    if g.batch != 1 || g.tile.is_some() || g.split_k.is_some_and(|s| s > 1) {
        return None;
    }
    if aligned(pa, g.lda, dtype) && aligned(pb, g.ldb, dtype) {
        return None;
    }
    if g.m.saturating_mul(g.n).saturating_mul(g.k.max(1)) < MIN_MACS {
        return None;
    }
    Some("operand rows not 16-byte aligned: packed into an aligned, zero-padded copy, then the 16-byte tiles")
}

/// Whether `g` (resolved) with inputs at `pa`, `pb` can be packed, whatever its size (a tuned
/// `pack = true`): a single matrix, no forced tile or split, and at least one operand without
/// 16-byte rows.
pub fn pack_possible(g: &Gemm, dtype: DType, [pa, pb]: [u64; 2]) -> bool {
    let forced = g.tile.is_some() || g.split_k.is_some_and(|s| s > 1);
    let unaligned = !(aligned(pa, g.lda, dtype) && aligned(pb, g.ldb, dtype));
    g.batch == 1 && !forced && unaligned
}

/// The problem the packed copies pose: each operand that is not 16-byte aligned (at `pa`, `pb`,
/// elements of `dtype`) becomes K-contiguous (A row-major, B column-major) at the packed
/// leading dimension.
pub fn packed_gemm(g: &Gemm, dtype: DType, [pa, pb]: [u64; 2]) -> Gemm {
    let ldp = packed_ld(g.k);
    let mut g2 = *g;
    if !aligned(pa, g.lda, dtype) {
        g2.a_layout = Layout::Row;
        g2.lda = ldp;
        g2.stride_a = g.m * ldp;
    }
    if !aligned(pb, g.ldb, dtype) {
        g2.b_layout = Layout::Col;
        g2.ldb = ldp;
        g2.stride_b = g.n * ldp;
    }
    g2
}

/// Packs the unaligned operands of `g` (for which `pack_applies` said yes) into the stream's
/// workspace and runs the GEMM on the packed copies.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<T: Scalar, O: Scalar>(
    s: &Stream,
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    g: &Gemm,
    a: &View<'_, T>,
    b: &View<'_, T>,
    c: Option<&View<'_, O>>,
    bias: Option<&View<'_, O>>,
    d: &mut ViewMut<'_, O>,
) -> Result<()> {
    let (pa, ga) = device_ptr(a, cs)?;
    let (pb, gb) = device_ptr(b, cs)?;
    let (pack_a, pack_b) = (!aligned(pa, g.lda, T::DTYPE), !aligned(pb, g.ldb, T::DTYPE));
    let ldp = packed_ld(g.k);
    let off_b = b_offset(g.m, g.k);
    let elems = off_b + g.n * ldp;
    let bytes = elems * T::DTYPE.size_bytes();
    let gemm_packed = |ws: &CudaSlice<u8>| -> Result<()> {
        // SAFETY: the workspace holds `bytes` = `elems` elements of T (asked for below) and
        // any bit pattern is a valid T; the views cover disjoint ranges.
        let all = unsafe { ws.transmute::<T>(elems) }
            .ok_or_else(|| Error::InvalidConfig { op: OP, why: "the pack workspace is smaller than asked".into() })?;
        let (wa, wb) = (all.slice(0..g.m * ldp), all.slice(off_b..off_b + g.n * ldp));
        let (wa, wb) = (View::Cuda(wa), View::Cuda(wb));
        let (dst_a, _g1) = device_ptr(&wa, cs)?;
        let (dst_b, _g2) = device_ptr(&wb, cs)?;
        let g2 = packed_gemm(g, T::DTYPE, [pa, pb]);
        if pack_a {
            // SAFETY: `check` proved A covers m x k at lda in its layout; the destination holds
            // m * ldp elements, 16-byte aligned (workspace start).
            unsafe { launch_pack(cs, gpu, T::DTYPE, pa, dst_a, g.m, g.k, g.lda, g.a_layout == Layout::Col)? };
        }
        if pack_b {
            // SAFETY: as for A: B seen as n x k (K-contiguous when column-major); the
            // destination starts at a 256-byte multiple and holds n * ldp elements.
            unsafe { launch_pack(cs, gpu, T::DTYPE, pb, dst_b, g.n, g.k, g.ldb, g.b_layout == Layout::Row)? };
        }
        let av = if pack_a { &wa } else { a };
        let bv = if pack_b { &wb } else { b };
        gemm::<T, O>(s, &g2, av, bv, c, bias, d)
    };
    let r = with_stream_workspace(gpu, cs, Slot::Pack, bytes, gemm_packed);
    drop((ga, gb));
    r
}

/// The `pack::SHIFTS` shifted copies of x (`rows x k`, row-major at `ld`, at `src`) into
/// `dst` at `pack::shifted_ld(k)`, for the small-M family's interleaved slabs.
///
/// # Safety
/// `src` covers `rows x k` at `ld`; `dst` is 16-byte aligned with room for
/// `SHIFTS * rows * shifted_ld(k)` elements; both stay alive until the launch completes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn launch_shifted_copies(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    dtype: DType,
    src: u64,
    dst: u64,
    rows: usize,
    k: usize,
    ld: usize,
) -> Result<()> {
    let name = match dtype {
        DType::Bf16 => "ft_pack_shift_bf16",
        DType::F16 => "ft_pack_shift_f16",
        DType::F32 => return Err(Error::UnsupportedDtype { op: OP, dtype: dtype.name() }),
    };
    let groups = kp::SHIFTS * rows * kp::shifted_ld(k) / kp::K_ALIGN;
    let dims = [rows as u32, k as u32, ld as u32];
    // SAFETY: `shift_entry!` in kernels-gpu/src/entry/pack.rs takes (2 pointers, 3 u32); the
    // caller vouches for the source and destination.
    unsafe { launch_groups(cs, gpu, name, groups, src, dst, &dims) }
}

/// Launches pack entry `name` over `groups` groups of 8 elements with (src, dst, dims...).
///
/// # Safety
/// The arguments match the entry's ABI and the caller vouches for the pointers.
unsafe fn launch_groups(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    name: &str,
    groups: usize,
    src: u64,
    dst: u64,
    dims: &[u32],
) -> Result<()> {
    let kernel = gpu.kernels()?.function(name)?;
    let blocks = groups.div_ceil(kp::THREADS as usize).clamp(1, 32 * gpu.info.sm_count.max(1) as usize) as u32;
    let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (kp::THREADS, 1, 1), shared_mem_bytes: 0 };
    let mut lb = cs.launch_builder(&kernel.func);
    lb.arg(&src).arg(&dst);
    for x in dims {
        lb.arg(x);
    }
    // SAFETY: forwarded to the caller.
    unsafe { lb.launch(cfg) }.ctx(|| format!("launching {name} ({groups} groups of 8)"))?;
    Ok(())
}

/// One pack launch: `rows x k` of the operand at `src` (`kcol`: element (row, kk) at
/// `kk * ld + row`) into `rows x packed_ld(k)` at `dst`.
///
/// # Safety
/// `src` covers the operand as described; `dst` is 16-byte aligned with room for
/// `rows * packed_ld(k)` elements; both stay alive until the launch completes.
#[allow(clippy::too_many_arguments)]
unsafe fn launch_pack(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    dtype: DType,
    src: u64,
    dst: u64,
    rows: usize,
    k: usize,
    ld: usize,
    kcol: bool,
) -> Result<()> {
    let name = match dtype {
        DType::Bf16 => "ft_pack_k_bf16",
        DType::F16 => "ft_pack_k_f16",
        DType::F32 => "ft_pack_k_f32",
    };
    let groups = rows * packed_ld(k) / kp::K_ALIGN;
    let dims = [rows as u32, k as u32, ld as u32, kcol as u32];
    // SAFETY: matches `pack_entry!` in kernels-gpu/src/entry/pack.rs (2 pointers, 4 u32); the
    // caller vouches for the source and destination.
    unsafe { launch_groups(cs, gpu, name, groups, src, dst, &dims) }
}
