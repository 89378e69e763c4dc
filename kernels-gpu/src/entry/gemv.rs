//! Small-M GEMM entry points (`ft_gemv_<in>_<out>_g<groups>_<v|s>[_w<width>]`, see `gemv.rs`):
//! each block streams `width` slabs of 16 weight rows over its K slice once, its 8 warps
//! splitting the slice by 32-k chunks (several 16-byte loads in flight per thread; the x vectors
//! a warp loads serve all its slabs), `mma.m16n8k16` on fragments built from those loads, a
//! fixed-order reduction of the warps in shared memory, then either the
//! fused epilogue or, when K is split over blocks, the partials to a workspace and a fix-up by
//! the block that arrives last (slices added in order: deterministic).

use crate::arch::nvptx::{
    atom_add_global_u32, block_idx_x, block_idx_y, block_idx_z, dyn_smem_addr, fence_gpu, ld_global_cg_f32,
    ld_global_nc_v4, ld_shared_f32, mma_m16n8k16_bf16, mma_m16n8k16_f16, st_shared_f32, sync_threads, thread_idx_x,
};
use crate::element::Element;
use crate::gemm::Epilogue;
use crate::gemv::{
    A_COL, B_ROW, CHUNK, ROWS_INTERLEAVED, SLAB, SmallMPlan, WARPS, X_IN_PLACE, a_fragment, b_fragment, block_slab,
    funnel, row_shift, slab_row, unroll,
};
use half::{bf16, f16};

/// A 16-bit input type the kernel multiplies with tensor cores.
pub(super) trait MmaElem: Element {
    fn bits(self) -> u16;
    /// The f32 value of an element given as its bits (exact).
    fn widen(bits: u16) -> f32;
    /// # Safety
    /// Whole-warp convergence.
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4];
}

impl MmaElem for bf16 {
    #[inline(always)]
    fn bits(self) -> u16 {
        self.to_bits()
    }
    #[inline(always)]
    fn widen(bits: u16) -> f32 {
        bf16::from_bits(bits).to_f32()
    }
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        // SAFETY: forwarded.
        unsafe { mma_m16n8k16_bf16(a, b, c) }
    }
}

impl MmaElem for f16 {
    #[inline(always)]
    fn bits(self) -> u16 {
        self.to_bits()
    }
    #[inline(always)]
    fn widen(bits: u16) -> f32 {
        f16::from_bits(bits).to_f32()
    }
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        // SAFETY: forwarded.
        unsafe { mma_m16n8k16_f16(a, b, c) }
    }
}

/// What every small-M entry receives (passed field by field in the ABI).
#[derive(Clone, Copy)]
struct Args {
    m: usize,
    n: usize,
    k: usize,
    lda: usize,
    ldb: usize,
    ldc: usize,
    stride_a: usize,
    stride_b: usize,
    stride_c: usize,
    alpha: f32,
    beta: f32,
    flags: u32,
    layout: u32,
    ksplit: usize,
    kslice: usize,
}

/// 8 consecutive k of one row (`row` of `rows`) of an operand, the elements `f - s .. f - s + 8`
/// (`f` a multiple of 8 in a frame starting `s` elements before K = 0; with an interleaved
/// slab's shift every weight load is one aligned vector), as 16-bit pairs; zero before the
/// row's start, past `kend` or past the last row. `VEC`: the row is K-contiguous; a group is one
/// 16-byte load where it is 16-byte aligned, else two aligned loads around it and a funnel shift
/// (when both lie inside the row's `klen` elements), else element loads at the edges. Without
/// `VEC` each element is loaded at `kcol ? k * ld + row : row * ld + k`.
///
/// # Safety
/// `p` covers the operand (`rows` rows of `klen` K) at leading dimension `ld`, 2-byte aligned;
/// `kend <= klen`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn load8<E: MmaElem, const VEC: bool>(
    p: *const E,
    row: usize,
    rows: usize,
    f: usize,
    s: usize,
    kend: usize,
    klen: usize,
    ld: usize,
    kcol: bool,
) -> [u32; 4] {
    let mut w = [0u32; 4];
    if row >= rows || f >= kend + s {
        return w;
    }
    if VEC && f >= s && f + 8 <= kend + s {
        let kk = f - s;
        let at = p.wrapping_add(row * ld + kk) as usize;
        // Misalignment in elements; the same for every group of this row and frame.
        let m = (at % 16) / 2;
        if m == 0 {
            // SAFETY: the 8 elements exist (kk + 8 <= kend), 16-byte aligned; operands are
            // never written by this kernel.
            return unsafe { ld_global_nc_v4(at as *const u32) };
        }
        if kk >= m && kk + 16 - m <= klen {
            let base = (at - 2 * m) as *const u32;
            // SAFETY: the two aligned vectors hold elements kk - m .. kk + 16 - m of this row,
            // all inside it (kk >= m, kk + 16 - m <= klen).
            let (lo, hi) = unsafe { (ld_global_nc_v4(base), ld_global_nc_v4(base.wrapping_add(4))) };
            return funnel(lo, hi, m);
        }
    }
    for (e, wd) in w.iter_mut().enumerate() {
        for h in 0..2 {
            let fe = f + 2 * e + h;
            if fe >= s && fe < kend + s {
                let kx = fe - s;
                let idx = if kcol && !VEC { kx * ld + row } else { row * ld + kx };
                // SAFETY: (row, kx) lies inside the operand (kx < kend <= klen).
                let v = unsafe { *p.add(idx) }.bits() as u32;
                *wd |= v << (16 * h);
            }
        }
    }
    w
}

/// One block: `W` slabs (`gemv::block_slab` of block `blockIdx.x`), K slice `blockIdx.y`,
/// matrix `blockIdx.z`.
///
/// # Safety
/// Host-validated: the operands cover `batch` matrices as `q` describes; with `VEC`, A is
/// row-major and B column-major; `ws` holds the split's workspace
/// (`SmallMPlan::workspace_bytes`, counters zero) when `q.ksplit > 1`; the grid is the plan of
/// width `W`; the block has `gemv::smem_bytes(G, W)` bytes of dynamic shared memory and
/// `gemv::THREADS` threads.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn small_m<E: MmaElem, O: Element, const G: usize, const W: usize, const VEC: bool>(
    a: *const E,
    b: *const E,
    c: *const O,
    d: *mut O,
    bias: *const O,
    ws: *mut u8,
    q: Args,
) {
    let tid = thread_idx_x() as usize;
    let (warp, lane) = (tid / 32, tid % 32);
    let (gid, t) = (lane / 4, lane % 4);
    let (block, ks, z) = (block_idx_x() as usize, block_idx_y() as usize, block_idx_z() as usize);
    let inter = q.layout & ROWS_INTERLEAVED != 0;
    // Weight row of column `nl` of the block's slab `r`.
    let row_of = |r: usize, nl: usize| slab_row(block_slab(block, r, W, inter), nl, inter);
    // SAFETY (pointer offset): matrix z of B, inside it (host-checked strides).
    let b = unsafe { b.add(z * q.stride_b) };
    // K is walked in a frame `s` elements before K = 0: the shift every row of an interleaved
    // slab starts past a 16-byte boundary (so its loads are aligned; the block's slabs share
    // it), else 0.
    let s = if inter { row_shift(b as usize, row_of(0, 0), q.ldb) } else { 0 };
    // Interleaved: A is x's `pack::SHIFTS` shifted copies (`stride_a` apart, one matrix), read
    // at copy `s` in the same frame: aligned too; or with `X_IN_PLACE` x itself, read in the
    // frame like the weight (funnel shifts). Else matrix z of A.
    let copies = inter && q.layout & X_IN_PLACE == 0;
    // SAFETY (pointer offset): inside A (host-sized copies, or host-checked strides).
    let a = unsafe { a.add(if copies { s } else { z } * q.stride_a) };
    // x's frame shift, row length and the slice's end in its row coordinates: the copies' (frame
    // 0, rows of at least K + 7), else x's own (frame s, K).
    let (xs, xlen) = if copies { (0, q.lda) } else { (s, q.k) };
    let kf = q.k + s;
    let kb0 = ks * q.kslice;
    let kb1 = kb1_of(ks, q.kslice, kf);
    let chunks = if kb1 > kb0 { (kb1 - kb0).div_ceil(CHUNK) } else { 0 };
    // The slice's end in row coordinates (kb1 <= K + s).
    let kend = if kb1 > s { kb1 - s } else { 0 };
    let xend = if copies { kb1 } else { kend };
    let (a_col, b_row) = (q.layout & A_COL != 0, q.layout & B_ROW != 0);

    // Accumulators: slab r, group g holds (slab rows gid, gid + 8) x (x rows 8g + 2t, + 1).
    let mut acc = [[[0.0f32; 4]; G]; W];
    const U: usize = 4;
    let un = unroll(G, W);
    let step = WARPS * un;
    let mut c0 = warp;
    while c0 < chunks {
        let mut wv = [[[[0u32; 4]; 2]; W]; U];
        let mut xv = [[[0u32; 4]; G]; U];
        for u in 0..un {
            let cc = c0 + u * WARPS;
            if cc < chunks {
                let f = kb0 + cc * CHUNK + 8 * t;
                // SAFETY: rows and k are predicated inside the operands (load8).
                unsafe {
                    for (r, wr) in wv[u].iter_mut().enumerate() {
                        wr[0] = load8::<E, VEC>(b, row_of(r, gid), q.n, f, s, kend, q.k, q.ldb, b_row);
                        wr[1] = load8::<E, VEC>(b, row_of(r, gid + 8), q.n, f, s, kend, q.k, q.ldb, b_row);
                    }
                    for (g, x) in xv[u].iter_mut().enumerate() {
                        *x = load8::<E, VEC>(a, 8 * g + gid, q.m, f, xs, xend, xlen, q.lda, a_col);
                    }
                }
            }
        }
        for u in 0..un {
            for (r, ar) in acc.iter_mut().enumerate() {
                for (g, ag) in ar.iter_mut().enumerate() {
                    for j in 0..2 {
                        let fa = a_fragment(wv[u][r][0], wv[u][r][1], j);
                        // SAFETY: the loop bounds are warp-uniform, so the whole warp is here.
                        *ag = unsafe { E::mma(fa, b_fragment(xv[u][g], j), *ag) };
                    }
                }
            }
        }
        c0 += step;
    }

    // Cross-warp reduction: red[warp][x row][block column] in shared memory (block column
    // `SLAB * r + nl`: column nl of slab r).
    let rows = 8 * G;
    let cols = SLAB * W;
    let smem = dyn_smem_addr();
    let slot = |w: usize, mi: usize, col: usize| smem + (((w * rows + mi) * cols + col) * 4) as u32;
    for (r, ar) in acc.iter().enumerate() {
        for (g, ag) in ar.iter().enumerate() {
            for (i, &v) in ag.iter().enumerate() {
                let (col, mi) = (SLAB * r + gid + 8 * (i / 2), 8 * g + 2 * t + i % 2);
                // SAFETY: inside the block's `smem_bytes(G, W)` buffer.
                unsafe { st_shared_f32(slot(warp, mi, col), v) };
            }
        }
    }
    // SAFETY: every thread of the block reaches the barrier.
    unsafe { sync_threads() };
    let mrows = if q.m < rows { q.m } else { rows };
    let outs = mrows * cols;
    let finish = |v: f32, mi: usize, n: usize| {
        let idx = z * q.stride_c + mi * q.ldc + n;
        // SAFETY: (mi, n) is an output of matrix z; C and bias are read only when enabled.
        let cv = if q.flags & 8 != 0 { unsafe { (*c.add(idx)).to_f32() } } else { 0.0 };
        let bv = if q.flags & 1 != 0 { unsafe { (*bias.add(n)).to_f32() } } else { 0.0 };
        let o = Epilogue::apply_flags(q.flags, q.alpha, q.beta, v, cv, bv, O::DTYPE);
        // SAFETY: as above.
        unsafe { *d.add(idx) = O::from_f32(o) };
    };
    let plan = SmallMPlan { slabs: grid_dim(0), ksplit: q.ksplit, kslice: q.kslice, width: W };
    let batch_z = z;
    // Partials of the split: [matrix][slice][m][n] after the counters.
    let parts = ws.wrapping_add(plan.counter_bytes(grid_dim(2))) as *mut f32;
    let part = |s: usize, mi: usize, n: usize| parts.wrapping_add(((batch_z * q.ksplit + s) * q.m + mi) * q.n + n);
    let mut i = tid;
    while i < outs {
        let (mi, col) = (i / cols, i % cols);
        let n = row_of(col / SLAB, col % SLAB);
        if n < q.n {
            let mut v = 0.0f32;
            for w in 0..WARPS {
                // SAFETY: inside the buffer (written above, before the barrier).
                v += unsafe { ld_shared_f32(slot(w, mi, col)) };
            }
            if q.ksplit <= 1 {
                finish(v, mi, n);
            } else {
                // SAFETY: the workspace holds every (matrix, slice, row, column) (host-sized).
                unsafe { *part(ks, mi, n) = v };
            }
        }
        i += WARPS * 32;
    }
    if q.ksplit <= 1 {
        return;
    }
    // Split: publish the partials, count the arrival; the last block of the slab adds the
    // slices in order 0, 1, ... and applies the epilogue.
    fence_gpu();
    // SAFETY: every thread of the block reaches the barrier.
    unsafe { sync_threads() };
    let flag = smem + (WARPS * rows * cols * 4) as u32;
    if tid == 0 {
        let counter = (ws as *mut u32).wrapping_add(z * plan.slabs + block);
        // SAFETY: the counters precede the partials in the workspace (host-sized, zeroed).
        let old = unsafe { atom_add_global_u32(counter, 1) };
        let last = old as usize == q.ksplit - 1;
        if last {
            // Leave the counter at zero for the next call on this workspace.
            // SAFETY: as above; no other block of this call touches it any more.
            unsafe { core::ptr::write_volatile(counter, 0) };
        }
        fence_gpu();
        // SAFETY: the flag word lies after the reduction buffer, inside `smem_bytes(G, W)`.
        unsafe { st_shared_f32(flag, if last { 1.0 } else { 0.0 }) };
    }
    // SAFETY: every thread of the block reaches the barrier.
    unsafe { sync_threads() };
    // SAFETY: written by thread 0 before the barrier.
    if unsafe { ld_shared_f32(flag) } == 0.0 {
        return;
    }
    fence_gpu();
    let mut i = tid;
    while i < outs {
        let (mi, col) = (i / cols, i % cols);
        let n = row_of(col / SLAB, col % SLAB);
        if n < q.n {
            let mut v = 0.0f32;
            for s in 0..q.ksplit {
                // SAFETY: every slice's block published this element before its arrival.
                v += unsafe { ld_global_cg_f32(part(s, mi, n)) };
            }
            finish(v, mi, n);
        }
        i += WARPS * 32;
    }
}

/// End of K slice `ks` of `kslice` in a frame of `kf` elements.
#[inline(always)]
fn kb1_of(ks: usize, kslice: usize, kf: usize) -> usize {
    let e = ks * kslice + kslice;
    if e < kf { e } else { kf }
}

/// Blocks of the launch along x (`d` 0: slabs) or z (`d` 2: matrices).
#[inline(always)]
fn grid_dim(d: u32) -> usize {
    let v: u32;
    // SAFETY: reads a special register.
    unsafe {
        if d == 0 {
            core::arch::asm!("mov.u32 {v}, %nctaid.x;", v = out(reg32) v)
        } else {
            core::arch::asm!("mov.u32 {v}, %nctaid.z;", v = out(reg32) v)
        }
    };
    v as usize
}

// ABI: (a, b, c, d, bias, ws, m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, alpha,
// beta, flags, layout, ksplit, kslice); dims u32, strides u64, flags as `Epilogue::flags`,
// layout bits `gemv::A_COL | gemv::B_ROW`.
macro_rules! gemv_entry {
    ($name:expr, $E:ty, $O:ty, $G:literal, $W:literal, $V:literal) => {
        const _: () = {
            #[unsafe(export_name = $name)]
            #[allow(clippy::too_many_arguments)]
            unsafe extern "ptx-kernel" fn entry(
                a: *const $E,
                b: *const $E,
                c: *const $O,
                d: *mut $O,
                bias: *const $O,
                ws: *mut u8,
                m: u32,
                n: u32,
                k: u32,
                lda: u32,
                ldb: u32,
                ldc: u32,
                stride_a: u64,
                stride_b: u64,
                stride_c: u64,
                alpha: f32,
                beta: f32,
                flags: u32,
                layout: u32,
                ksplit: u32,
                kslice: u32,
            ) {
                let q = Args {
                    m: m as usize,
                    n: n as usize,
                    k: k as usize,
                    lda: lda as usize,
                    ldb: ldb as usize,
                    ldc: ldc as usize,
                    stride_a: stride_a as usize,
                    stride_b: stride_b as usize,
                    stride_c: stride_c as usize,
                    alpha,
                    beta,
                    flags,
                    layout,
                    ksplit: ksplit as usize,
                    kslice: kslice as usize,
                };
                // SAFETY: the host validated the operands, alignment, workspace and launch
                // shape for this variant (see `small_m`).
                unsafe { small_m::<$E, $O, $G, $W, $V>(a, b, c, d, bias, ws, q) }
            }
        };
    };
}

macro_rules! gemv_groups {
    ($p:literal, $E:ty, $O:ty) => {
        gemv_entry!(concat!($p, "_g1_v"), $E, $O, 1, 1, true);
        gemv_entry!(concat!($p, "_g1_s"), $E, $O, 1, 1, false);
        gemv_entry!(concat!($p, "_g1_v_w2"), $E, $O, 1, 2, true);
        gemv_entry!(concat!($p, "_g1_v_w4"), $E, $O, 1, 4, true);
        gemv_entry!(concat!($p, "_g2_v"), $E, $O, 2, 1, true);
        gemv_entry!(concat!($p, "_g2_s"), $E, $O, 2, 1, false);
        gemv_entry!(concat!($p, "_g2_v_w2"), $E, $O, 2, 2, true);
        gemv_entry!(concat!($p, "_g2_v_w4"), $E, $O, 2, 4, true);
        gemv_entry!(concat!($p, "_g4_v"), $E, $O, 4, 1, true);
        gemv_entry!(concat!($p, "_g4_s"), $E, $O, 4, 1, false);
        gemv_entry!(concat!($p, "_g4_v_w2"), $E, $O, 4, 2, true);
        gemv_entry!(concat!($p, "_g4_v_w4"), $E, $O, 4, 4, true);
        gemv_entry!(concat!($p, "_g8_v"), $E, $O, 8, 1, true);
        gemv_entry!(concat!($p, "_g8_s"), $E, $O, 8, 1, false);
        gemv_entry!(concat!($p, "_g8_v_w2"), $E, $O, 8, 2, true);
    };
}

gemv_groups!("ft_gemv_bf16_bf16", bf16, bf16);
gemv_groups!("ft_gemv_bf16_f32", bf16, f32);
gemv_groups!("ft_gemv_f16_f16", f16, f16);
gemv_groups!("ft_gemv_f16_f32", f16, f32);
