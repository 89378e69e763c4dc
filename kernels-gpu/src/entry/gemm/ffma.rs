//! FFMA GEMM (exact f32): register-blocked `BM` x 128 x 8 outer products (`BM` 128 or 256,
//! `ffma::TILES`) with two shared-memory stages filled from registers, fragments double-
//! buffered across k in the 16-byte forms, and its entry points
//! `ft_gemm_f32_<ab>_v<al>_f32_<BM>x128x8` (the 256-row tile at 16-byte loads only).

#![allow(clippy::needless_range_loop)]

use super::{OutArgs, Problem, sat_sub};
use crate::arch::nvptx::{
    block_idx_x, block_idx_y, block_idx_z, gemm_smem_addr, ld_global_v4, ld_shared_v4_f32, st_global_v4, st_shared_f32,
    st_shared_v4, sync_threads, thread_idx_x,
};
use crate::element::Element;
use crate::elementwise::Activation;
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

/// The epilogue's activation alone (flag bits 1-2), for an f32 result. Not inlined, as
/// [`store_out`]; scalars in and out, so the call passes registers, not a stack frame.
#[inline(never)]
fn activate_f32(flags: u32, v: f32) -> f32 {
    Activation::from_code(flags >> 1).apply_for(crate::DType::F32, v)
}

/// Epilogue and store of the four adjacent outputs `(gm, gn..gn + 4)` (`v0..v3`): where the
/// row holds all four and D's (and, when read, C's) element address is 16-byte aligned, one
/// 16-byte store (and C read), so a warp's 16 lanes of a row write 8 whole 32-byte sectors of
/// D at once instead of a quarter of each sector four times over; elsewhere [`store_out`] per
/// element. The affine part is inlined and the activation, when one is on (a uniform branch),
/// is [`activate_f32`] per value: no array crosses a call, so the tile's registers stay those
/// of the per-element form (an earlier form passing `[f32; 4]` to a non-inlined function took
/// the 128-row tile from 128 to 147 registers and a local frame,
/// bench/results/ffma-tune-6e491b224208/run5-v4-stores).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn store_out4(
    c: *const f32,
    d: *mut f32,
    bias: *const f32,
    out: OutArgs,
    gm: usize,
    gn: usize,
    v: (f32, f32, f32, f32),
) {
    if gm >= out.m || gn >= out.n {
        return;
    }
    let idx = gm * out.ldc + gn;
    let reads_c = out.flags & 8 != 0;
    let aligned = |p: usize| (p + idx * 4).is_multiple_of(16);
    if gn + 4 <= out.n && aligned(d as usize) && (!reads_c || aligned(c as usize)) {
        // SAFETY: the four elements are inside row gm of C and D (gn + 4 <= n) and 16-byte
        // aligned (checked above); C is read only when enabled.
        let cv = if reads_c { unsafe { ld_global_v4(c.add(idx) as *const u32) }.map(f32::from_bits) } else { [0.0; 4] };
        let affine = |e: usize, x: f32| {
            let mut y = out.alpha * x;
            if reads_c {
                y = crate::arch::fmaf(out.beta, cv[e], y);
            }
            if out.flags & 1 != 0 {
                // SAFETY: gn + e < n, the bias holds n elements.
                y += unsafe { *bias.add(gn + e) };
            }
            y
        };
        let mut o = [affine(0, v.0), affine(1, v.1), affine(2, v.2), affine(3, v.3)];
        if (out.flags >> 1) & 3 != 0 {
            o = [
                activate_f32(out.flags, o[0]),
                activate_f32(out.flags, o[1]),
                activate_f32(out.flags, o[2]),
                activate_f32(out.flags, o[3]),
            ];
        }
        // SAFETY: as above.
        unsafe { st_global_v4(d.add(idx) as *mut u32, o.map(f32::to_bits)) };
        return;
    }
    // SAFETY: predicated inside.
    unsafe {
        store_out(c, d, bias, out, gm, gn, v.0);
        store_out(c, d, bias, out, gm, gn + 1, v.1);
        store_out(c, d, bias, out, gm, gn + 2, v.2);
        store_out(c, d, bias, out, gm, gn + 3, v.3);
    }
}

// ---------------------------------------------------------------------------------------------
// FFMA kernel (f32).

/// Operand loads per thread and k-tile: a tile of `rows` x 8 is `2 rows` 4-float chunks over
/// 256 threads (the tiles' row counts are multiples of 128).
const MAX_LOADS: usize = ffma::TILES[ffma::TILES.len() - 1] / 128;

// Two stages of the largest tile fit the module's shared GEMM buffer.
const _: () = assert!(2 * ffma::stage_bytes(ffma::TILES[ffma::TILES.len() - 1]) <= crate::arch::nvptx::GEMM_SMEM_BYTES);

/// Where load `j` of thread `tid` falls in a `rows` x 8 operand tile: `(row, k)` of its first
/// element; `KCONTIG` operands take 4 along k (two chunks a row), the others 4 along rows.
#[inline(always)]
fn ff_chunk<const KCONTIG: bool>(rows: usize, tid: usize, j: usize) -> (usize, usize) {
    let c = tid + j * ffma::THREADS as usize;
    if KCONTIG { (c / 2, (c % 2) * 4) } else { ((c % (rows / 4)) * 4, c / (rows / 4)) }
}

/// Global -> registers for one `rows` x 8 f32 operand tile (rows M or N): `rows / 128` chunks
/// of 4 per thread (the rest of the array unused). The store recomputes the mapping.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn ff_load_tile<const KCONTIG: bool, const VEC: bool, const ROWS: usize>(
    p: *const f32,
    ld: usize,
    row0: usize,
    rows: usize,
    k0: usize,
    k: usize,
    tid: usize,
) -> [[f32; 4]; MAX_LOADS] {
    let mut v = [[0.0f32; 4]; MAX_LOADS];
    for j in 0..ROWS / 128 {
        let (r, kc) = ff_chunk::<KCONTIG>(ROWS, tid, j);
        let (gr, gk) = (row0 + r, k0 + kc);
        // SAFETY: only valid elements are read.
        v[j] = if KCONTIG {
            let valid = if gr < rows { sat_sub(k, gk).min(4) } else { 0 };
            unsafe { load4_f32::<VEC>(p, gr * ld + gk, valid) }
        } else {
            let valid = if gk < k { sat_sub(rows, gr).min(4) } else { 0 };
            unsafe { load4_f32::<VEC>(p, gk * ld + gr, valid) }
        };
    }
    v
}

/// Registers -> shared, stored row-contiguous per k: `(r, kk)` at `base + (kk * pitch + r) * 4`.
#[inline(always)]
unsafe fn ff_store_tile<const KCONTIG: bool, const ROWS: usize>(base: u32, v: [[f32; 4]; MAX_LOADS], tid: usize) {
    let pitch = ffma::pitch(ROWS);
    for j in 0..ROWS / 128 {
        let (r, kc) = ff_chunk::<KCONTIG>(ROWS, tid, j);
        if KCONTIG {
            for e in 0..4 {
                // SAFETY: kc + e < 8, r < ROWS: inside the tile.
                unsafe { st_shared_f32(base + (((kc + e) * pitch + r) * 4) as u32, v[j][e]) };
            }
        } else {
            // SAFETY: 16-byte aligned (pitch and r multiples of 4), inside the tile.
            unsafe { st_shared_v4(base + ((kc * pitch + r) * 4) as u32, v[j].map(f32::to_bits)) };
        }
    }
}

/// Accumulator rows of the largest tile per thread.
const MAX_ROWS: usize = ffma::TILES[ffma::TILES.len() - 1] / 16;

/// One `BM` x 128 output tile of `D = epilogue(A B)` in f32 FFMA; each thread owns `BM / 16`
/// x 8 outputs as 4 x 4 blocks (rows `q * 64 + ty * 4`, columns `tx * 4` and `64 + tx * 4`)
/// so its shared-memory reads are 16-byte vectors. `BM` = 256 reads half as much shared memory
/// per multiply-add as 128 (six 16-byte reads for 128 of them, against four for 64).
///
/// With `DB` a thread reads row `kk + 1`'s fragments before row `kk`'s products, and at the
/// k-tile's last row stores the next stage, passes the one barrier of the k-tile and reads the
/// next stage's first row, all before that row's products; without it the reads of a row
/// precede its products and the store and barrier follow the k-tile. On the H200 `DB` took the
/// 128-row tile from 0.79x to 0.86x cuBLAS at 4096^3 and the 256-row one from 0.85x to 0.87x
/// (bench/results/ffma-7eada27ec71e/run1).
///
/// # Safety
/// Launched with 256 threads; pointers cover the problem; for `VEC` A and B are 16-byte
/// aligned and `lda`, `ldb` multiples of 4.
#[inline(always)]
unsafe fn ffma_gemm<const A_ROW: bool, const B_KC: bool, const VEC: bool, const BM: usize, const DB: bool>(
    a: *const f32,
    b: *const f32,
    c: *const f32,
    d: *mut f32,
    bias: *const f32,
    pr: Problem,
) {
    const BN: usize = ffma::BN;
    let tid = thread_idx_x() as usize;
    let (tx, ty) = (tid % 16, tid / 16);
    let bm = block_idx_y() as usize * BM;
    let bn = block_idx_x() as usize * BN;
    let smem = gemm_smem_addr();
    let (a_bytes, stage_bytes) = ((ffma::BK * ffma::pitch(BM) * 4) as u32, ffma::stage_bytes(BM) as u32);
    let load_a = |k0: usize| unsafe { ff_load_tile::<A_ROW, VEC, BM>(a, pr.lda, bm, pr.m, k0, pr.k, tid) };
    let load_b = |k0: usize| unsafe { ff_load_tile::<B_KC, VEC, BN>(b, pr.ldb, bn, pr.n, k0, pr.k, tid) };

    let mut acc = [[0.0f32; 8]; MAX_ROWS];
    let ktiles = pr.k.div_ceil(ffma::BK);
    let (mut ra, mut rb) = (load_a(0), load_b(0));
    // SAFETY: stage 0 inside the GEMM buffer; all threads reach the barrier.
    unsafe {
        ff_store_tile::<A_ROW, BM>(smem, ra, tid);
        ff_store_tile::<B_KC, BN>(smem + a_bytes, rb, tid);
        sync_threads();
    }
    // This thread's fragments of row `kk` of a stage: `BM / 16` values of A, 8 of B.
    let frag = |stage: u32, kk: usize| -> ([f32; MAX_ROWS], [f32; 8]) {
        let row = stage + (kk * ffma::pitch(BM) * 4) as u32;
        let brow = stage + a_bytes + (kk * ffma::pitch(BN) * 4) as u32;
        let mut av = [0.0f32; MAX_ROWS];
        for q in 0..BM / 64 {
            // SAFETY: 16-byte aligned reads inside the A tile.
            let v = unsafe { ld_shared_v4_f32(row + ((q * 64 + ty * 4) * 4) as u32) };
            for e in 0..4 {
                av[q * 4 + e] = v[e];
            }
        }
        // SAFETY: 16-byte aligned reads inside the B tile.
        let (b0, b1) =
            unsafe { (ld_shared_v4_f32(brow + (tx * 16) as u32), ld_shared_v4_f32(brow + (256 + tx * 16) as u32)) };
        (av, [b0[0], b0[1], b0[2], b0[3], b1[0], b1[1], b1[2], b1[3]])
    };
    let mut cur = if DB { frag(smem, 0) } else { ([0.0f32; MAX_ROWS], [0.0f32; 8]) };
    for kt in 0..ktiles {
        let stage = smem + (kt % 2) as u32 * stage_bytes;
        let next = smem + ((kt + 1) % 2) as u32 * stage_bytes;
        let has_next = kt + 1 < ktiles;
        if has_next {
            ra = load_a((kt + 1) * ffma::BK);
            rb = load_b((kt + 1) * ffma::BK);
        }
        for kk in 0..ffma::BK {
            let (av, bv) = if DB {
                // The next row's fragments are read before this row's products, so the
                // shared-memory latency hides behind them; at the last row the next stage is
                // stored and, after the one barrier of the k-tile, its first row read.
                let nxt = if kk + 1 < ffma::BK {
                    frag(stage, kk + 1)
                } else {
                    if has_next {
                        // SAFETY: the other stage was last read before the previous barrier.
                        unsafe {
                            ff_store_tile::<A_ROW, BM>(next, ra, tid);
                            ff_store_tile::<B_KC, BN>(next + a_bytes, rb, tid);
                        }
                    }
                    // SAFETY: uniform trip count.
                    unsafe { sync_threads() };
                    frag(next, 0)
                };
                core::mem::replace(&mut cur, nxt)
            } else {
                frag(stage, kk)
            };
            for i in 0..BM / 16 {
                for j in 0..8 {
                    acc[i][j] = crate::arch::fmaf(av[i], bv[j], acc[i][j]);
                }
            }
        }
        if !DB {
            if has_next {
                // SAFETY: the other stage was last read before the previous barrier.
                unsafe {
                    ff_store_tile::<A_ROW, BM>(next, ra, tid);
                    ff_store_tile::<B_KC, BN>(next + a_bytes, rb, tid);
                }
            }
            // SAFETY: uniform trip count.
            unsafe { sync_threads() };
        }
    }
    // A thread's columns are two runs of four: tx * 4 + 0..4 and 64 + tx * 4 + 0..4.
    for i in 0..BM / 16 {
        let gm = bm + (i / 4) * 64 + ty * 4 + i % 4;
        for h in 0..2 {
            let v = (acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]);
            // SAFETY: predicated inside.
            unsafe { store_out4(c, d, bias, pr.out(), gm, bn + h * 64 + tx * 4, v) };
        }
    }
}

// FFMA (f32): layouts, load width (16 bytes or 4), block rows (`ffma::TILES`).
macro_rules! ffma_entry {
    ($ab:literal, $ar:literal, $bc:literal, $al:literal, $vec:literal, $bm:literal) => {
        gemm_entry!(
            concat!("ft_gemm_f32_", $ab, "_v", $al, "_f32_", $bm, "x128x8"),
            f32,
            f32,
            // The 16-byte forms double-buffer their fragments (`DB`); the 4-byte ones do not:
            // there it took 151 registers and one block an SM, 0.33x cuBLAS at
            // 1536x1536x4099 against 0.55x (bench/results/ffma-7eada27ec71e/run1).
            |a, b, c, d, bias, pr| { ffma_gemm::<$ar, $bc, $vec, $bm, $vec>(a, b, c, d, bias, pr) }
        );
    };
}
ffma_entry!("rr", true, false, 16, true, 128);
ffma_entry!("rc", true, true, 16, true, 128);
ffma_entry!("cr", false, false, 16, true, 128);
ffma_entry!("cc", false, true, 16, true, 128);
ffma_entry!("rr", true, false, 4, false, 128);
ffma_entry!("rc", true, true, 4, false, 128);
ffma_entry!("cr", false, false, 4, false, 128);
ffma_entry!("cc", false, true, 4, false, 128);
ffma_entry!("rr", true, false, 16, true, 256);
ffma_entry!("rc", true, true, 16, true, 256);
ffma_entry!("cr", false, false, 16, true, 256);
ffma_entry!("cc", false, true, 16, true, 256);
