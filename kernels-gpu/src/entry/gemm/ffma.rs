//! FFMA GEMM (exact f32): register-blocked 128 x 128 x 8 outer products with two shared-memory
//! stages filled from registers, and its entry points `ft_gemm_f32_<ab>_v<al>_f32_128x128x8`.

use super::{OutArgs, Problem, sat_sub};
use crate::arch::nvptx::{
    block_idx_x, block_idx_y, block_idx_z, gemm_smem_addr, ld_global_v4, ld_shared_v4_f32, st_shared_f32, st_shared_v4,
    sync_threads, thread_idx_x,
};
use crate::element::Element;
use crate::gemm::{Epilogue, ffma};

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

// FFMA (f32): arguments A row-major, B column-major, 16-byte loads.
macro_rules! ffma_entry {
    ($ab:literal, $ar:literal, $bc:literal, $al:literal, $vec:literal) => {
        gemm_entry!(concat!("ft_gemm_f32_", $ab, "_v", $al, "_f32_128x128x8"), f32, f32, |a, b, c, d, bias, pr| {
            ffma_gemm::<$ar, $bc, $vec>(a, b, c, d, bias, pr)
        });
    };
}
ffma_entry!("rr", true, false, 16, true);
ffma_entry!("rc", true, true, 16, true);
ffma_entry!("cr", false, false, 16, true);
ffma_entry!("cc", false, true, 16, true);
ffma_entry!("rr", true, false, 4, false);
ffma_entry!("rc", true, true, 4, false);
ffma_entry!("cr", false, false, 4, false);
ffma_entry!("cc", false, true, 4, false);
