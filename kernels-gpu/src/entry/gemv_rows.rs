//! Row small-M entry points (`ft_gemvr_<in>_<out>_m<rows>`, see `gemv_rows.rs`): block
//! `(b, y)` computes output columns `gemv_rows::row_of(b, team, 0..8 / team, 0..8)` (groups of
//! 8 weight rows 8 apart, one misalignment) for rows `y * rows ..` of x (up to `rows` of
//! them). A team of `team` warps per group splits K in chunks of 32 elements; lane `4g + t`
//! reads vector `t` of a chunk of weight row `g` in the rows' aligned frame (a batch of
//! [`UNROLL`] chunks per lane in flight, the first while x is staged) and the same vector of
//! rows `16 i + g` and `16 i + g + 8` of x staged in shared memory, and two `mma.m16n8k16` per
//! MMA tile `i` add the chunk's products; a team's sums meet in shared memory, one thread per
//! output applies the epilogue.

use super::gemv::{MmaElem, load8};
use crate::arch::nvptx::{
    block_idx_x, block_idx_y, block_idx_z, dyn_smem_addr, ld_global_nc_v4, ld_shared_f32, ld_shared_v4_f32,
    st_shared_v4, sync_threads, thread_idx_x,
};
use crate::element::Element;
use crate::gemm::Epilogue;
use crate::gemv::{A_COL, row_shift};
use crate::gemv_rows::{CHUNK, SLOTS, THREADS, UNROLL, WARPS, acc_place, in_row, row_of, vectors, x_bytes, x_stride};
use half::{bf16, f16};
/// What every entry receives (passed field by field in the ABI).
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
    team: usize,
    /// Vectors per thread in flight while x is staged (1 to the entry's `SU`).
    stage: usize,
}

/// Vector `j` of the frame that starts at element `first` of the weight (its `span` elements
/// from `b`): one aligned 16-byte load where the vector lies inside the operand, else element
/// loads of the part that does (only the operand's first and last vectors, when its base or
/// end is not 16-byte aligned).
///
/// # Safety
/// `b` covers `span` elements; `first` is a 16-byte boundary relative to 16-byte aligned memory
/// (`b`'s address minus `row_shift` elements).
#[inline(always)]
unsafe fn load_vector<E: MmaElem>(b: *const E, first: isize, j: usize, span: usize) -> [u32; 4] {
    let e0 = first + 8 * j as isize;
    if e0 >= 0 && e0 as usize + 8 <= span {
        // SAFETY: the 8 elements lie inside the operand, 16-byte aligned (the frame's start is);
        // operands are never written by this kernel.
        return unsafe { ld_global_nc_v4(b.wrapping_offset(e0) as *const u32) };
    }
    let mut w = [0u32; 4];
    for i in 0..8 {
        let e = e0 + i as isize;
        if e >= 0 && (e as usize) < span {
            // SAFETY: element e lies inside the operand.
            let v = unsafe { *b.offset(e) }.bits() as u32;
            w[i / 2] |= v << (16 * (i % 2));
        }
    }
    w
}

/// `w` (vector `j` of a frame shifted by `s`) with the elements outside the row of `k` zeroed:
/// they belong to a neighbouring row, whose values (an infinity, a NaN) must not reach this
/// row's sum.
#[inline(always)]
fn in_row_only(mut w: [u32; 4], j: usize, s: usize, k: usize) -> [u32; 4] {
    if j == 0 || 8 * j + 8 > s + k {
        for i in 0..8 {
            if !in_row(j, i, s, k) {
                w[i / 2] &= !(0xffffu32 << (16 * (i % 2)));
            }
        }
    }
    w
}

/// One block: weight rows `gemv_rows::row_of(blockIdx.x, team, 0..8 / team, 0..8)`, rows
/// `blockIdx.y * R ..` of x, matrix `blockIdx.z`. `MT` MMA tiles (`gemv_rows::m_tiles(R)`),
/// up to `SU` vectors per thread in flight while x is staged (`gemv_rows::stage_unroll(R)`;
/// the launch's `stage`).
///
/// # Safety
/// Host-validated: the operands cover their matrices as `q` describes (the weight B
/// K-contiguous, `ldb >= k`; R <= 16 MT); the block has `gemv_rows::smem_bytes(R, k)` bytes
/// of dynamic shared memory and `gemv_rows::THREADS` threads; the grid is
/// `gemv_rows::blocks(n, team)` by `gemv_rows::slices(m, R)` by the batch, `team` one of
/// `gemv_rows::TEAMS`.
#[inline(always)]
unsafe fn rows<E: MmaElem, O: Element, const R: usize, const MT: usize, const SU: usize>(
    a: *const E,
    b: *const E,
    c: *const O,
    d: *mut O,
    bias: *const O,
    q: Args,
) {
    let tid = thread_idx_x() as usize;
    let (warp, lane) = (tid / 32, tid % 32);
    let (g, t) = (lane / 4, lane % 4);
    let z = block_idx_z() as usize;
    // This block's first row of x.
    let m0 = block_idx_y() as usize * R;
    let block = block_idx_x() as usize;
    let team = q.team;
    let (group, wt) = (warp / team, warp % team);
    // SAFETY (pointer offsets): matrix z of A and B, inside them (host-checked strides).
    let (a, b) = unsafe { (a.add(z * q.stride_a), b.add(z * q.stride_b)) };
    // The block's frame: its rows start `s` elements past a 16-byte boundary (the same for
    // all of them; computed from the address arithmetic alone, also past the last row).
    let s = row_shift(b as usize, row_of(block, team, 0, 0), q.ldb);
    let nx = vectors(q.k, s);
    let chunks = nx.div_ceil(CHUNK / 8);
    let xs = x_stride(q.k);
    // This lane's weight row (the MMA's column g) in the warp's group.
    let row = row_of(block, team, group, g);
    let nv = if row < q.n { nx } else { 0 };
    let first = (row * q.ldb) as isize - s as isize;
    let span = if q.n == 0 { 0 } else { (q.n - 1) * q.ldb + q.k };
    // Vector t of this warp's chunk `base + team * u`, for u in 0..UNROLL.
    let load_batch = |base: usize| {
        let mut v = [[0u32; 4]; UNROLL];
        for (u, w) in v.iter_mut().enumerate() {
            let j = 4 * (base + team * u) + t;
            if j < nv {
                // SAFETY: the frame lies on 16-byte boundaries; load_vector keeps to the operand.
                *w = unsafe { load_vector::<E>(b, first, j, span) };
            }
        }
        v
    };
    // The first batch of the weight is on its way while x is staged.
    let mut cur = load_batch(wt);

    // x in the block's frame: row r, vector c holds x[m0 + r][8c - s ..][..8] (zeros outside K
    // and for rows past m), 16 bytes per vector, rows `xs` vectors apart.
    let smem = dyn_smem_addr();
    let a_col = q.layout & A_COL != 0;
    let total = R * xs;
    let su = q.stage.clamp(1, SU);
    let mut i0 = tid;
    while i0 < total {
        let mut v = [[0u32; 4]; SU];
        for (u, vu) in v.iter_mut().enumerate() {
            let e = i0 + u * THREADS as usize;
            let (r, cc) = (m0 + e / xs, e % xs);
            if u < su && e < total && r < q.m {
                // SAFETY: row r of x (r < m), predicated inside it (load8).
                *vu = unsafe {
                    if a_col {
                        load8::<E, false>(a, r, q.m, 8 * cc, s, q.k, q.k, q.lda, true)
                    } else {
                        load8::<E, true>(a, r, q.m, 8 * cc, s, q.k, q.k, q.lda, false)
                    }
                };
            }
        }
        for (u, &vu) in v.iter().enumerate() {
            let e = i0 + u * THREADS as usize;
            if u < su && e < total {
                // SAFETY: inside the block's `x_bytes(R, k)`, 16-byte aligned.
                unsafe { st_shared_v4(smem + (16 * e) as u32, vu) };
            }
        }
        i0 += su * THREADS as usize;
    }
    // SAFETY: every thread of the block reaches the barrier.
    unsafe { sync_threads() };

    // The x vector of staged row `r` that meets weight vector `j` (zeros for rows past R).
    let x_at = |r: usize, j: usize| -> [u32; 4] {
        if r < R {
            // SAFETY: row r < R, vector j < xs (a chunk's 4 vectors lie inside the staged row).
            unsafe { ld_shared_v4_f32(smem + (16 * (r * xs + j)) as u32) }.map(f32::to_bits)
        } else {
            [0; 4]
        }
    };
    let mut acc = [[0.0f32; 4]; MT];
    let mut base = wt;
    // Warp-uniform: every lane runs the same chunks (the MMAs need the whole warp).
    while base < chunks {
        if base > wt {
            cur = load_batch(base);
        }
        for (u, &wv) in cur.iter().enumerate() {
            let ch = base + team * u;
            if ch < chunks {
                let j = 4 * ch + t;
                let w = in_row_only(wv, j, s, q.k);
                for (i, at) in acc.iter_mut().enumerate() {
                    let (x0, x8) = (x_at(16 * i + g, j), x_at(16 * i + g + 8, j));
                    // Chunk element pairs (0,1), (2,3) of each lane's vector are the first
                    // MMA's K pairs (2t, 2t+1), (2t+8, 2t+9); pairs (4,5), (6,7) the second's.
                    // SAFETY: the whole warp runs this (the loop and the test are warp-uniform).
                    *at = unsafe { E::mma([x0[0], x8[0], x0[1], x8[1]], [w[0], w[1]], *at) };
                    *at = unsafe { E::mma([x0[2], x8[2], x0[3], x8[3]], [w[2], w[3]], *at) };
                }
            }
        }
        base += team * UNROLL;
    }

    // The warps' sums meet in shared memory after x: lane l of warp w, MMA tile i, at
    // (THREADS i + 32 w + l) * 16.
    let red = smem + x_bytes(R, q.k).unwrap_or(0) as u32;
    for (i, at) in acc.iter().enumerate() {
        // SAFETY: inside the block's `smem_bytes(R, k)` (MT areas of RED_BYTES after x),
        // 16-byte aligned.
        unsafe { st_shared_v4(red + (16 * (i * THREADS as usize + tid)) as u32, at.map(f32::to_bits)) };
    }
    // SAFETY: every thread of the block reaches the barrier.
    unsafe { sync_threads() };
    // One thread per (group, lane, accumulator) of the MMA results: rows of x past R are
    // zeros, not stored.
    let cells = if R > 8 { 128 * MT } else { 64 };
    let mut o = tid;
    while o < (WARPS / team) * cells {
        let (gr, l, ci) = (o / cells, o % 32, (o % cells) / 32);
        let (xr, slot) = acc_place(l, ci);
        let row = row_of(block, team, gr, slot);
        if xr < R && m0 + xr < q.m && row < q.n && slot < SLOTS {
            let mut v = 0.0f32;
            let cell = 16 * (ci / 4) * THREADS as usize + 4 * (ci % 4);
            for w in gr * team..(gr + 1) * team {
                // SAFETY: warp w's lane l, accumulator ci, inside the sums' area.
                v += unsafe { ld_shared_f32(red + (cell + 16 * (32 * w + l)) as u32) };
            }
            let idx = z * q.stride_c + (m0 + xr) * q.ldc + row;
            // SAFETY: (xr, row) is an output of matrix z; C and bias are read only when enabled.
            let cv = if q.flags & 8 != 0 { unsafe { (*c.add(idx)).to_f32() } } else { 0.0 };
            let bv = if q.flags & 1 != 0 { unsafe { (*bias.add(row)).to_f32() } } else { 0.0 };
            let o = Epilogue::apply_flags(q.flags, q.alpha, q.beta, v, cv, bv, O::DTYPE);
            // SAFETY: as above.
            unsafe { *d.add(idx) = O::from_f32(o) };
        }
        o += THREADS as usize;
    }
}

// ABI: (a, b, c, d, bias, m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, alpha, beta,
// flags, layout, team, stage); dims u32, strides u64, flags as `Epilogue::flags`, layout bit
// `gemv::A_COL`, team one of `gemv_rows::TEAMS`, stage the staging depth
// (`gemv_rows::stage_for`; clamped to the entry's).
macro_rules! gemvr_entry {
    ($name:expr, $E:ty, $O:ty, $R:literal, $MT:literal, $SU:literal) => {
        const _: () = {
            #[unsafe(export_name = $name)]
            #[allow(clippy::too_many_arguments)]
            unsafe extern "ptx-kernel" fn entry(
                a: *const $E,
                b: *const $E,
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
                layout: u32,
                team: u32,
                stage: u32,
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
                    team: team as usize,
                    stage: stage as usize,
                };
                // SAFETY: the host validated the operands, rows, shared memory and launch shape
                // for this variant (see `rows`).
                unsafe { rows::<$E, $O, $R, $MT, $SU>(a, b, c, d, bias, q) }
            }
        };
    };
}

macro_rules! gemvr_rows {
    ($p:literal, $E:ty, $O:ty) => {
        // (rows, m_tiles(rows), stage_unroll(rows)): checked against gemv_rows below.
        gemvr_entry!(concat!($p, "_m1"), $E, $O, 1, 1, 2);
        gemvr_entry!(concat!($p, "_m4"), $E, $O, 4, 1, 2);
        gemvr_entry!(concat!($p, "_m8"), $E, $O, 8, 1, 4);
        gemvr_entry!(concat!($p, "_m16"), $E, $O, 16, 1, 4);
        gemvr_entry!(concat!($p, "_m32"), $E, $O, 32, 2, 4);
        gemvr_entry!(concat!($p, "_m48"), $E, $O, 48, 3, 4);
        gemvr_entry!(concat!($p, "_m64"), $E, $O, 64, 4, 4);
    };
}

// The entries' compile-time counts agree with the plan's (`gemv_rows::m_tiles`,
// `gemv_rows::stage_unroll`, `gemv_rows::ROWS`).
const _: () = {
    let table = [(1, 1, 2), (4, 1, 2), (8, 1, 4), (16, 1, 4), (32, 2, 4), (48, 3, 4), (64, 4, 4)];
    let mut i = 0;
    while i < table.len() {
        let (r, mt, su) = table[i];
        assert!(crate::gemv_rows::ROWS[i] == r);
        assert!(crate::gemv_rows::m_tiles(r) == mt && crate::gemv_rows::stage_unroll(r) == su);
        i += 1;
    }
    assert!(crate::gemv_rows::ROWS.len() == table.len());
};

gemvr_rows!("ft_gemvr_bf16_bf16", bf16, bf16);
gemvr_rows!("ft_gemvr_bf16_f32", bf16, f32);
gemvr_rows!("ft_gemvr_f16_f16", f16, f16);
gemvr_rows!("ft_gemvr_f16_f32", f16, f32);
