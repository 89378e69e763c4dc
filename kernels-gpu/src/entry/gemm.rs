//! GEMM entry points. 16-bit inputs: `mma.sync.m16n8k16` tensor-core tiles fed by `ldmatrix`
//! from shared memory; f32: register-blocked FFMA outer products. Both use two shared-memory
//! stages filled from registers that were loaded from global memory during the previous
//! tile's maths, predicate every edge (any M, N, K >= 1 in the same kernel), and fuse the
//! epilogue. `blockIdx.z` walks a strided batch.

use crate::arch::nvptx::{
    block_idx_x, block_idx_y, block_idx_z, cp_async_16, cp_async_commit, cp_async_wait, dyn_smem_addr, gemm_smem_addr,
    ld_global_v4, ld_shared_v4_f32, ldmatrix_x4, mma_m16n8k16_bf16, mma_m16n8k16_f16, st_shared_b16, st_shared_f32,
    st_shared_v4, sync_threads, thread_idx_x,
};
use crate::element::Element;
use crate::gemm::{Epilogue, ffma, tc};
use half::{bf16, f16};

/// Problem description every GEMM entry receives (one struct keeps the 17 parameters in one
/// place; it is passed field by field in the ABI).
#[derive(Clone, Copy)]
struct Problem {
    m: usize,
    n: usize,
    k: usize,
    lda: usize,
    ldb: usize,
    ldc: usize,
    alpha: f32,
    beta: f32,
    flags: u32,
}

/// A 16-bit input type with its tensor-core instruction.
trait MmaElem: Element {
    /// # Safety
    /// Whole-warp convergence.
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4];
}

impl MmaElem for bf16 {
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        // SAFETY: forwarded.
        unsafe { mma_m16n8k16_bf16(a, b, c) }
    }
}

impl MmaElem for f16 {
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        // SAFETY: forwarded.
        unsafe { mma_m16n8k16_f16(a, b, c) }
    }
}

/// Reads the raw bits of element `idx` of a 16-bit array.
#[inline(always)]
unsafe fn ld_b16(p: *const u16, idx: usize) -> u16 {
    // SAFETY: the caller checked idx is in bounds.
    unsafe { *p.add(idx) }
}

/// Loads 8 consecutive 16-bit elements starting at `idx` (of which the first `valid` exist),
/// zero-filling the rest; one 16-byte load when `VEC` and all 8 exist.
#[inline(always)]
unsafe fn load8_b16<const VEC: bool>(p: *const u16, idx: usize, valid: usize) -> [u32; 4] {
    if VEC && valid >= 8 {
        // SAFETY: 8 valid elements from a 16-byte aligned address (host-checked alignment).
        return unsafe { ld_global_v4(p.add(idx) as *const u32) };
    }
    let mut h = [0u16; 8];
    for (e, v) in h.iter_mut().enumerate() {
        if e < valid {
            // SAFETY: e < valid elements exist from idx.
            *v = unsafe { ld_b16(p, idx + e) };
        }
    }
    [
        h[0] as u32 | (h[1] as u32) << 16,
        h[2] as u32 | (h[3] as u32) << 16,
        h[4] as u32 | (h[5] as u32) << 16,
        h[6] as u32 | (h[7] as u32) << 16,
    ]
}

/// Loads 4 consecutive f32 starting at `idx` (first `valid` exist), zero-filling the rest.
#[inline(always)]
unsafe fn load4_f32<const VEC: bool>(p: *const f32, idx: usize, valid: usize) -> [f32; 4] {
    if VEC && valid >= 4 {
        // SAFETY: 4 valid elements from a 16-byte aligned address (host-checked alignment).
        return unsafe { ld_global_v4(p.add(idx) as *const u32) }.map(f32::from_bits);
    }
    let mut v = [0.0f32; 4];
    for (e, x) in v.iter_mut().enumerate() {
        if e < valid {
            // SAFETY: e < valid.
            *x = unsafe { *p.add(idx + e) };
        }
    }
    v
}

#[inline(always)]
fn sat_sub(a: usize, b: usize) -> usize {
    if a > b { a - b } else { 0 }
}

// ---------------------------------------------------------------------------------------------
// Tensor-core kernel (f16 / bf16 inputs, f32 accumulators).

/// Shared-memory bytes of one operand tile: BM (or BN) rows of PITCH 16-bit elements.
const TC_TILE_BYTES: u32 = (tc::BM * tc::PITCH * 2) as u32;
/// One stage holds the A tile then the B tile.
const TC_STAGE_BYTES: u32 = 2 * TC_TILE_BYTES;

/// Global -> registers for one 128 x 32 operand tile whose rows are M (A) or N (B). Each thread
/// moves two chunks of 8 elements. `KCONTIG`: k is the contiguous dimension in memory (A
/// row-major, B column-major), element (r, kk) at `r * ld + kk`; else at `kk * ld + r`.
#[inline(always)]
unsafe fn tc_load_tile<const KCONTIG: bool, const VEC: bool>(
    p: *const u16,
    ld: usize,
    row0: usize,
    rows: usize,
    k0: usize,
    k: usize,
    tid: usize,
) -> [[u32; 4]; 2] {
    let mut out = [[0u32; 4]; 2];
    for (i, o) in out.iter_mut().enumerate() {
        let c = tid + i * tc::THREADS as usize;
        if KCONTIG {
            // (128 rows, 4 chunks of 8 along k)
            let (r, kc) = (c / 4, (c % 4) * 8);
            let (gr, gk) = (row0 + r, k0 + kc);
            let valid = if gr < rows { sat_sub(k, gk).min(8) } else { 0 };
            // SAFETY: only the `valid` in-bounds elements are read.
            *o = unsafe { load8_b16::<VEC>(p, gr * ld + gk, valid) };
        } else {
            // (32 k, 16 chunks of 8 along rows)
            let (kk, rc) = (c / 16, (c % 16) * 8);
            let (gk, gr) = (k0 + kk, row0 + rc);
            let valid = if gk < k { sat_sub(rows, gr).min(8) } else { 0 };
            // SAFETY: only the `valid` in-bounds elements are read.
            *o = unsafe { load8_b16::<VEC>(p, gk * ld + gr, valid) };
        }
    }
    out
}

/// Registers -> shared memory for the tile loaded by `tc_load_tile`, stored k-contiguous:
/// `(r, kk)` at `base + (r * PITCH + kk) * 2`.
#[inline(always)]
unsafe fn tc_store_tile<const KCONTIG: bool>(base: u32, regs: [[u32; 4]; 2], tid: usize) {
    // Index loops, not `into_iter`: an array iterator's state would live in local memory.
    #[allow(clippy::needless_range_loop)]
    for i in 0..2 {
        let v = regs[i];
        let c = tid + i * tc::THREADS as usize;
        if KCONTIG {
            let (r, kc) = (c / 4, (c % 4) * 8);
            // SAFETY: r < 128, kc + 8 <= 32: inside the tile, 16-byte aligned.
            unsafe { st_shared_v4(base + ((r * tc::PITCH + kc) * 2) as u32, v) };
        } else {
            let (kk, rc) = (c / 16, (c % 16) * 8);
            for e in 0..8 {
                let h = (v[e / 2] >> (16 * (e % 2))) as u16;
                // SAFETY: rc + e < 128, kk < 32: inside the tile.
                unsafe { st_shared_b16(base + (((rc + e) * tc::PITCH + kk) * 2) as u32, h) };
            }
        }
    }
}

/// The tensor-core maths on one shared-memory stage: per 16-wide k step, ldmatrix the warp's
/// A and B fragments, then 16 `mma.sync`.
///
/// # Safety
/// `stage` holds a complete A and B tile; all 32 lanes of every warp call it.
#[inline(always)]
unsafe fn tc_compute<T: MmaElem>(stage: u32, wm: usize, wn: usize, lane: usize, acc: &mut [[[f32; 4]; 4]; 4]) {
    for ks in 0..tc::BK / 16 {
        let mut fa = [[0u32; 4]; 4];
        for (mt, f) in fa.iter_mut().enumerate() {
            // (16 rows, 16 k) of A for m-tile mt: lanes 0-15 rows at k, 16-31 at k + 8.
            let r = wm * 64 + mt * 16 + lane % 16;
            let kk = ks * 16 + (lane / 16) * 8;
            // SAFETY: whole warp, row addresses inside the A tile, 16-byte aligned.
            *f = unsafe { ldmatrix_x4(stage + ((r * tc::PITCH + kk) * 2) as u32) };
        }
        let mut fb = [[0u32; 2]; 4];
        for np in 0..2 {
            // Two n-tiles: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
            let r = wn * 32 + np * 16 + lane % 8 + (lane / 16) * 8;
            let kk = ks * 16 + ((lane / 8) % 2) * 8;
            // SAFETY: whole warp, row addresses inside the B tile, 16-byte aligned.
            let m = unsafe { ldmatrix_x4(stage + TC_TILE_BYTES + ((r * tc::PITCH + kk) * 2) as u32) };
            fb[2 * np] = [m[0], m[1]];
            fb[2 * np + 1] = [m[2], m[3]];
        }
        for (mt, row) in acc.iter_mut().enumerate() {
            for (nt, cell) in row.iter_mut().enumerate() {
                // SAFETY: whole warp.
                *cell = unsafe { T::mma(fa[mt], fb[nt], *cell) };
            }
        }
    }
}

/// One 128 x 128 output tile of `D = epilogue(A B)` on tensor cores.
///
/// # Safety
/// Launched with 256 threads; pointers cover the problem (host-checked); for `VEC` the A and
/// B base pointers are 16-byte aligned and `lda`, `ldb` multiples of 8.
#[inline(always)]
unsafe fn tc_gemm<T: MmaElem, O: Element, const A_ROW: bool, const B_KC: bool, const VEC: bool>(
    a: *const u16,
    b: *const u16,
    c: *const O,
    d: *mut O,
    bias: *const O,
    pr: Problem,
) {
    let tid = thread_idx_x() as usize;
    let lane = tid % 32;
    let warp = tid / 32;
    let (wm, wn) = (warp / 4, warp % 4);
    let bm = block_idx_y() as usize * tc::BM;
    let bn = block_idx_x() as usize * tc::BN;
    let smem = gemm_smem_addr();
    // A is k-contiguous when row-major; B when column-major (`B_KC`).
    let load_a = |k0: usize| unsafe { tc_load_tile::<A_ROW, VEC>(a, pr.lda, bm, pr.m, k0, pr.k, tid) };
    let load_b = |k0: usize| unsafe { tc_load_tile::<B_KC, VEC>(b, pr.ldb, bn, pr.n, k0, pr.k, tid) };

    let mut acc = [[[0.0f32; 4]; 4]; 4];
    let ktiles = pr.k.div_ceil(tc::BK);
    let (mut ra, mut rb) = (load_a(0), load_b(0));
    // SAFETY: stage 0 lies inside the 40 KiB GEMM buffer; all threads reach the barrier.
    unsafe {
        tc_store_tile::<A_ROW>(smem, ra, tid);
        tc_store_tile::<B_KC>(smem + TC_TILE_BYTES, rb, tid);
        sync_threads();
    }
    for kt in 0..ktiles {
        let stage = smem + (kt % 2) as u32 * TC_STAGE_BYTES;
        let has_next = kt + 1 < ktiles;
        if has_next {
            // The next tile's global loads are in flight during this tile's maths.
            ra = load_a((kt + 1) * tc::BK);
            rb = load_b((kt + 1) * tc::BK);
        }
        // SAFETY: the stage holds a complete tile (barrier above); whole warps.
        unsafe { tc_compute::<T>(stage, wm, wn, lane, &mut acc) };
        if has_next {
            let next = smem + ((kt + 1) % 2) as u32 * TC_STAGE_BYTES;
            // SAFETY: the other stage was last read before the previous barrier.
            unsafe {
                tc_store_tile::<A_ROW>(next, ra, tid);
                tc_store_tile::<B_KC>(next + TC_TILE_BYTES, rb, tid);
            }
        }
        // SAFETY: all threads reach it (ktiles is uniform).
        unsafe { sync_threads() };
    }

    // SAFETY: forwarded from the caller.
    unsafe { tc_epilogue(c, d, bias, pr, bm + wm * 64, bn + wn * 32, lane, &acc) };
}

/// Stores a warp's 64 x 32 accumulators (m-tile rows from `m0`, columns from `n0`).
///
/// # Safety
/// The output pointers cover the problem.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn tc_epilogue<O: Element>(
    c: *const O,
    d: *mut O,
    bias: *const O,
    pr: Problem,
    m0: usize,
    n0: usize,
    lane: usize,
    acc: &[[[f32; 4]; 4]; 4],
) {
    for (mt, row) in acc.iter().enumerate() {
        for (nt, cell) in row.iter().enumerate() {
            for (i, &v) in cell.iter().enumerate() {
                let gm = m0 + mt * 16 + lane / 4 + (i / 2) * 8;
                let gn = n0 + nt * 8 + (lane % 4) * 2 + i % 2;
                // SAFETY: predicated on the bounds checked inside.
                unsafe { store_out(c, d, bias, pr.out(), gm, gn, v) };
            }
        }
    }
}

/// Pipeline depth of the `cp.async` kernel: stages of A and B tiles in dynamic shared memory.
pub(crate) const TC_CP_STAGES: usize = crate::gemm::tc::CP_STAGES;

/// Issues the `cp.async` copies of one 128 x 32 k-contiguous tile (two 16-byte chunks per
/// thread), zero-filling what lies outside the matrix.
///
/// # Safety
/// `p` is 16-byte aligned and `ld` a multiple of 8; `dst` is a tile inside dynamic shared memory.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn tc_issue_tile(dst: u32, p: *const u16, ld: usize, row0: usize, rows: usize, k0: usize, k: usize, tid: usize) {
    for i in 0..2 {
        let c = tid + i * tc::THREADS as usize;
        let (r, kc) = (c / 4, (c % 4) * 8);
        let (gr, gk) = (row0 + r, k0 + kc);
        let valid = if gr < rows { sat_sub(k, gk).min(8) } else { 0 };
        // With nothing valid no byte is read; the base pointer stands in.
        let src = if valid > 0 { unsafe { p.add(gr * ld + gk) } } else { p };
        // SAFETY: 16-byte aligned (kc multiple of 8, ld multiple of 8), `valid` elements exist.
        unsafe { cp_async_16(dst + ((r * tc::PITCH + kc) * 2) as u32, src as *const u8, (valid * 2) as u32) };
    }
}

/// The tensor-core kernel for k-contiguous, 16-byte aligned operands (A row-major, B
/// column-major): tiles go global -> shared with `cp.async` through a `CP_STAGES`-deep ring,
/// so loads for later k-tiles are in flight while this one is multiplied.
///
/// # Safety
/// 256 threads; dynamic shared memory of `CP_STAGES` stages; A and B 16-byte aligned with
/// `lda`, `ldb` multiples of 8; pointers cover the problem.
#[inline(always)]
unsafe fn tc_gemm_cp<T: MmaElem, O: Element>(
    a: *const u16,
    b: *const u16,
    c: *const O,
    d: *mut O,
    bias: *const O,
    pr: Problem,
) {
    let tid = thread_idx_x() as usize;
    let lane = tid % 32;
    let warp = tid / 32;
    let (wm, wn) = (warp / 4, warp % 4);
    let bm = block_idx_y() as usize * tc::BM;
    let bn = block_idx_x() as usize * tc::BN;
    let smem = dyn_smem_addr();
    let ktiles = pr.k.div_ceil(tc::BK);
    let issue = |kt: usize| {
        let stage = smem + (kt % TC_CP_STAGES) as u32 * TC_STAGE_BYTES;
        // SAFETY: the stage lies in the dynamic buffer the host sized; operands as above.
        unsafe {
            tc_issue_tile(stage, a, pr.lda, bm, pr.m, kt * tc::BK, pr.k, tid);
            tc_issue_tile(stage + TC_TILE_BYTES, b, pr.ldb, bn, pr.n, kt * tc::BK, pr.k, tid);
        }
    };
    for kt in 0..TC_CP_STAGES - 1 {
        if kt < ktiles {
            issue(kt);
        }
        // Empty groups keep the group count in step with the tiles.
        cp_async_commit();
    }
    let mut acc = [[[0.0f32; 4]; 4]; 4];
    for kt in 0..ktiles {
        cp_async_wait::<{ (TC_CP_STAGES - 2) as u32 }>();
        // SAFETY: all threads; after it tile kt is complete and stage (kt - 1) is free.
        unsafe { sync_threads() };
        if kt + TC_CP_STAGES - 1 < ktiles {
            issue(kt + TC_CP_STAGES - 1);
        }
        cp_async_commit();
        let stage = smem + (kt % TC_CP_STAGES) as u32 * TC_STAGE_BYTES;
        // SAFETY: tile kt is complete in this stage.
        unsafe { tc_compute::<T>(stage, wm, wn, lane, &mut acc) };
    }
    cp_async_wait::<0>();
    // SAFETY: forwarded from the caller.
    unsafe { tc_epilogue(c, d, bias, pr, bm + wm * 64, bn + wn * 32, lane, &acc) };
}

/// What the epilogue needs, small enough to travel in registers to the non-inlined store.
#[derive(Clone, Copy)]
struct OutArgs {
    m: usize,
    n: usize,
    ldc: usize,
    alpha: f32,
    beta: f32,
    flags: u32,
}

impl Problem {
    #[inline(always)]
    fn out(&self) -> OutArgs {
        OutArgs { m: self.m, n: self.n, ldc: self.ldc, alpha: self.alpha, beta: self.beta, flags: self.flags }
    }
}

/// Epilogue and predicated store of one output element. Not inlined: its body (the GELU
/// forms) repeated for each of a thread's 64 accumulators would stop the compiler from fully
/// unrolling the store loops, which then index the accumulators from local memory.
#[inline(never)]
unsafe fn store_out<O: Element>(c: *const O, d: *mut O, bias: *const O, out: OutArgs, gm: usize, gn: usize, v: f32) {
    if gm < out.m && gn < out.n {
        let idx = gm * out.ldc + gn;
        // SAFETY: (gm, gn) is inside the output; C and bias are read only when enabled.
        let cv = if out.flags & 8 != 0 { unsafe { (*c.add(idx)).to_f32() } } else { 0.0 };
        let bv = if out.flags & 1 != 0 { unsafe { (*bias.add(gn)).to_f32() } } else { 0.0 };
        let o = Epilogue::apply_flags(out.flags, out.alpha, out.beta, v, cv, bv, O::DTYPE);
        // SAFETY: as above.
        unsafe { *d.add(idx) = O::from_f32(o) };
    }
}

// ---------------------------------------------------------------------------------------------
// FFMA kernel (f32).

const FF_TILE_BYTES: u32 = (ffma::BK * ffma::PITCH * 4) as u32;
const FF_STAGE_BYTES: u32 = 2 * FF_TILE_BYTES;

/// Global -> registers for one 128 x 8 f32 operand tile (rows M or N): 4 elements per thread.
/// Returns the values and, for the store, nothing else: the mapping is recomputed there.
#[inline(always)]
unsafe fn ff_load_tile<const KCONTIG: bool, const VEC: bool>(
    p: *const f32,
    ld: usize,
    row0: usize,
    rows: usize,
    k0: usize,
    k: usize,
    tid: usize,
) -> [f32; 4] {
    if KCONTIG {
        // (128 rows, 2 chunks of 4 along k)
        let (r, kc) = (tid / 2, (tid % 2) * 4);
        let (gr, gk) = (row0 + r, k0 + kc);
        let valid = if gr < rows { sat_sub(k, gk).min(4) } else { 0 };
        // SAFETY: only valid elements are read.
        unsafe { load4_f32::<VEC>(p, gr * ld + gk, valid) }
    } else {
        // (8 k, 32 chunks of 4 along rows)
        let (kk, rc) = (tid / 32, (tid % 32) * 4);
        let (gk, gr) = (k0 + kk, row0 + rc);
        let valid = if gk < k { sat_sub(rows, gr).min(4) } else { 0 };
        // SAFETY: only valid elements are read.
        unsafe { load4_f32::<VEC>(p, gk * ld + gr, valid) }
    }
}

/// Registers -> shared, stored row-contiguous per k: `(r, kk)` at `base + (kk * PITCH + r) * 4`.
#[inline(always)]
unsafe fn ff_store_tile<const KCONTIG: bool>(base: u32, v: [f32; 4], tid: usize) {
    if KCONTIG {
        let (r, kc) = (tid / 2, (tid % 2) * 4);
        #[allow(clippy::needless_range_loop)]
        for e in 0..4 {
            // SAFETY: kc + e < 8, r < 128: inside the tile.
            unsafe { st_shared_f32(base + (((kc + e) * ffma::PITCH + r) * 4) as u32, v[e]) };
        }
    } else {
        let (kk, rc) = (tid / 32, (tid % 32) * 4);
        // SAFETY: 16-byte aligned (PITCH and rc multiples of 4), inside the tile.
        unsafe { st_shared_v4(base + ((kk * ffma::PITCH + rc) * 4) as u32, v.map(f32::to_bits)) };
    }
}

/// One 128 x 128 output tile of `D = epilogue(A B)` in f32 FFMA; each thread owns 8 x 8
/// outputs as four 4 x 4 blocks (rows `ty*4` and `64 + ty*4`, columns `tx*4` and `64 + tx*4`)
/// so its shared-memory reads are 16-byte vectors.
///
/// # Safety
/// Launched with 256 threads; pointers cover the problem; for `VEC` A and B are 16-byte
/// aligned and `lda`, `ldb` multiples of 4.
#[inline(always)]
unsafe fn ffma_gemm<const A_ROW: bool, const B_KC: bool, const VEC: bool>(
    a: *const f32,
    b: *const f32,
    c: *const f32,
    d: *mut f32,
    bias: *const f32,
    pr: Problem,
) {
    let tid = thread_idx_x() as usize;
    let (tx, ty) = (tid % 16, tid / 16);
    let bm = block_idx_y() as usize * ffma::BM;
    let bn = block_idx_x() as usize * ffma::BN;
    let smem = gemm_smem_addr();
    let load_a = |k0: usize| unsafe { ff_load_tile::<A_ROW, VEC>(a, pr.lda, bm, pr.m, k0, pr.k, tid) };
    let load_b = |k0: usize| unsafe { ff_load_tile::<B_KC, VEC>(b, pr.ldb, bn, pr.n, k0, pr.k, tid) };

    let mut acc = [[0.0f32; 8]; 8];
    let ktiles = pr.k.div_ceil(ffma::BK);
    let (mut ra, mut rb) = (load_a(0), load_b(0));
    // SAFETY: stage 0 inside the GEMM buffer; all threads reach the barrier.
    unsafe {
        ff_store_tile::<A_ROW>(smem, ra, tid);
        ff_store_tile::<B_KC>(smem + FF_TILE_BYTES, rb, tid);
        sync_threads();
    }
    for kt in 0..ktiles {
        let stage = smem + (kt % 2) as u32 * FF_STAGE_BYTES;
        let has_next = kt + 1 < ktiles;
        if has_next {
            ra = load_a((kt + 1) * ffma::BK);
            rb = load_b((kt + 1) * ffma::BK);
        }
        for kk in 0..ffma::BK {
            let row = stage + (kk * ffma::PITCH * 4) as u32;
            let brow = row + FF_TILE_BYTES;
            // SAFETY: 16-byte aligned reads inside the tiles.
            let (a0, a1, b0, b1) = unsafe {
                (
                    ld_shared_v4_f32(row + (ty * 16) as u32),
                    ld_shared_v4_f32(row + (256 + ty * 16) as u32),
                    ld_shared_v4_f32(brow + (tx * 16) as u32),
                    ld_shared_v4_f32(brow + (256 + tx * 16) as u32),
                )
            };
            let av = [a0[0], a0[1], a0[2], a0[3], a1[0], a1[1], a1[2], a1[3]];
            let bv = [b0[0], b0[1], b0[2], b0[3], b1[0], b1[1], b1[2], b1[3]];
            for (i, row) in acc.iter_mut().enumerate() {
                for (j, cell) in row.iter_mut().enumerate() {
                    *cell = crate::arch::fmaf(av[i], bv[j], *cell);
                }
            }
        }
        if has_next {
            let next = smem + ((kt + 1) % 2) as u32 * FF_STAGE_BYTES;
            // SAFETY: the other stage was last read before the previous barrier.
            unsafe {
                ff_store_tile::<A_ROW>(next, ra, tid);
                ff_store_tile::<B_KC>(next + FF_TILE_BYTES, rb, tid);
            }
        }
        // SAFETY: uniform trip count.
        unsafe { sync_threads() };
    }
    for (i, row) in acc.iter().enumerate() {
        let gm = bm + if i < 4 { ty * 4 + i } else { 64 + ty * 4 + i - 4 };
        for (j, &v) in row.iter().enumerate() {
            let gn = bn + if j < 4 { tx * 4 + j } else { 64 + tx * 4 + j - 4 };
            // SAFETY: predicated inside.
            unsafe { store_out(c, d, bias, pr.out(), gm, gn, v) };
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points: `ft_gemm_<dtype>_<a><b>_<v16|v1>_<out>` (see `GemmVariant::entry_name`).
// ABI: (a, b, c, d, bias, m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, alpha, beta,
// flags); strides are in elements, blockIdx.z is the batch index.

macro_rules! gemm_entry {
    ($name:expr, $body:ident, $T:ty, $O:ty, $ar:literal, $br:literal, $vec:literal) => {
        const _: () = {
            #[unsafe(export_name = $name)]
            #[allow(clippy::too_many_arguments)]
            unsafe extern "ptx-kernel" fn entry(
                a: *const $T,
                b: *const $T,
                c: *const $O,
                d: *mut $O,
                bias: *const $O,
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
            ) {
                let z = block_idx_z() as usize;
                let pr = Problem {
                    m: m as usize,
                    n: n as usize,
                    k: k as usize,
                    lda: lda as usize,
                    ldb: ldb as usize,
                    ldc: ldc as usize,
                    alpha,
                    beta,
                    flags,
                };
                // SAFETY: the host checked every pointer covers its batch of matrices, the
                // alignment the variant needs, and launched 256 threads.
                unsafe {
            gemm_entry!(@call $body, $T, $O, $ar, $br, $vec,
                        a.add(z * stride_a as usize), b.add(z * stride_b as usize),
                        c.add(z * stride_c as usize), d.add(z * stride_c as usize), bias, pr)
                }
            }
        };
    };
    (@call tc, $T:ty, $O:ty, $ar:literal, $br:literal, $vec:literal, $a:expr, $b:expr, $c:expr, $d:expr, $bias:expr, $pr:expr) => {
        tc_gemm::<$T, $O, $ar, $br, $vec>($a as *const u16, $b as *const u16, $c, $d, $bias, $pr)
    };
    (@call tc_cp, $T:ty, $O:ty, $ar:literal, $br:literal, $vec:literal, $a:expr, $b:expr, $c:expr, $d:expr, $bias:expr, $pr:expr) => {
        tc_gemm_cp::<$T, $O>($a as *const u16, $b as *const u16, $c, $d, $bias, $pr)
    };
    (@call ffma, $T:ty, $O:ty, $ar:literal, $br:literal, $vec:literal, $a:expr, $b:expr, $c:expr, $d:expr, $bias:expr, $pr:expr) => {
        ffma_gemm::<$ar, $br, $vec>($a, $b, $c, $d, $bias, $pr)
    };
}

// Arguments after the types: A row-major (k-contiguous), B column-major (k-contiguous), VEC.
macro_rules! gemm_layouts {
    ($body:ident, $rc16:ident, $T:ty, $O:ty, $dt:literal, $out:literal) => {
        gemm_entry!(concat!("ft_gemm_", $dt, "_rr_v16_", $out), $body, $T, $O, true, false, true);
        gemm_entry!(concat!("ft_gemm_", $dt, "_rc_v16_", $out), $rc16, $T, $O, true, true, true);
        gemm_entry!(concat!("ft_gemm_", $dt, "_cr_v16_", $out), $body, $T, $O, false, false, true);
        gemm_entry!(concat!("ft_gemm_", $dt, "_cc_v16_", $out), $body, $T, $O, false, true, true);
        gemm_entry!(concat!("ft_gemm_", $dt, "_rr_v1_", $out), $body, $T, $O, true, false, false);
        gemm_entry!(concat!("ft_gemm_", $dt, "_rc_v1_", $out), $body, $T, $O, true, true, false);
        gemm_entry!(concat!("ft_gemm_", $dt, "_cr_v1_", $out), $body, $T, $O, false, false, false);
        gemm_entry!(concat!("ft_gemm_", $dt, "_cc_v1_", $out), $body, $T, $O, false, true, false);
    };
}

// The k-contiguous aligned layout (`rc`, `v16`) of the 16-bit types takes the cp.async body.
gemm_layouts!(ffma, ffma, f32, f32, "f32", "f32");
gemm_layouts!(tc, tc_cp, f16, f16, "f16", "f16");
gemm_layouts!(tc, tc_cp, f16, f32, "f16", "f32");
gemm_layouts!(tc, tc_cp, bf16, bf16, "bf16", "bf16");
gemm_layouts!(tc, tc_cp, bf16, f32, "bf16", "f32");
