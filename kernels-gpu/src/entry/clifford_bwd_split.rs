//! The split SGP backward, for rows too long to keep in registers: two kernels instead of one
//! pass over a row held by a team.
//!
//! 1. `ft_clifford_bwd_stats_d{2,3}_{dt}`: a team of threads per batch row sums the
//!    row's norm statistics (as the two-pass kernel's first pass, `row_stats`) and writes its
//!    coefficients `(inv, k)` to `coefs[row * COEFS..]` (`COEFS` f32 a row: `inv` at `0..G`,
//!    `k` at `MAX_G..MAX_G + G`). Only launched with the norm.
//! 2. `ft_clifford_bwd_feat_d{2,3}_{dt}`: every thread owns one feature for a chunk of rows
//!    (grid: feature tiles of `blockDim.x` along x, row chunks along y). Its weights and its
//!    share of the weight gradient stay in registers for the whole chunk; a row costs its
//!    inputs' loads, the row's coefficients (one broadcast load), the feature's gradient and
//!    the stores of dx and dy. No row reduction, no barrier, no shared memory: the block
//!    size and the registers alone set the occupancy. At the end the thread writes its
//!    weight gradient to the chunk's partial `dw_part[chunk]` (`[W][N]` f32), which
//!    `ft_clifford_dw_reduce` sums in chunk order (deterministic).
//!
//! The inputs are read twice with the norm (once per kernel); in exchange no team holds a row
//! in registers, which made the one-pass 3D kernels spill past 512 features.
#![allow(clippy::needless_range_loop)]

use super::clifford_io::{each_dim_dtype, ld_mv, row_stats, st_mv, weights_of};
use crate::arch::nvptx::{block_dim_x, block_idx_x, block_idx_y, grid_dim_x, opaque_u64, thread_idx_x};
use crate::clifford::{Algebra, Cl2, Cl3, MAX_G, MAX_W, SPLIT_COEFS as COEFS, bwd_feature, norm_backward_coefs};
use crate::element::Element;
use half::{bf16, f16};

/// # Safety
/// x, y, go cover `C * B * N` elements, `w` covers `N * W`, `coefs` covers `B * COEFS` f32;
/// N % L == 0 and (L = 4) the pointers and the plane `B * N` are aligned to 4 elements; `team`
/// is a power of two dividing `blockDim.x`; the dynamic shared memory holds the team-sum
/// scratch; every thread of the block calls it.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn stats_kernel<T: Element, A: Algebra, const L: usize>(
    [x, y, go]: [*const T; 3],
    w: *const T,
    coefs: *mut f32,
    b: usize,
    n: usize,
    team: u32,
) {
    let tid = thread_idx_x() as usize;
    let team_us = team as usize;
    let rows_per_block = block_dim_x() as usize / team_us;
    let plane = b * n;
    // SAFETY: f < N (row_stats walks the row's features only).
    let wts = |f: usize| unsafe { weights_of::<T, A>(w, f) };
    let mut row0 = block_idx_x() as usize * rows_per_block;
    let step = grid_dim_x() as usize * rows_per_block;
    while row0 < b {
        let row = row0 + tid / team_us;
        let active = row < b;
        // SAFETY: every thread of the block is here (row0 is uniform); the row is in range.
        let (ss, dot) = unsafe { row_stats::<T, A, L>([x, y, go], &wts, row, active, n, plane, team) };
        if active && tid % team_us == 0 {
            let (inv, k) = norm_backward_coefs::<A>(&ss, &dot, n);
            for g in 0..A::G {
                // SAFETY: row < B: inside the B * COEFS coefficients.
                unsafe {
                    *coefs.add(row * COEFS + g) = inv[g];
                    *coefs.add(row * COEFS + MAX_G + g) = k[g];
                }
            }
        }
        row0 += step;
    }
}

/// # Safety
/// x, y, go, dx, dy cover `C * B * N` elements, `w` covers `N * W`; with `normalize`, `coefs`
/// holds the statistics kernel's `B * COEFS` f32; `dw_part` covers `gridDim.y * W * N` f32;
/// `rows * gridDim.y >= B`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn feat_kernel<T: Element, A: Algebra>(
    [x, y, go]: [*const T; 3],
    w: *const T,
    coefs: *const f32,
    [dx, dy]: [*mut T; 2],
    dw_part: *mut f32,
    b: usize,
    n: usize,
    rows: usize,
    normalize: bool,
) {
    let f = block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize;
    if f >= n {
        return;
    }
    let chunk = block_idx_y() as usize;
    let plane = b * n;
    // SAFETY: f < N.
    let wf = unsafe { weights_of::<T, A>(w, f) };
    let mut dw = [0.0f32; MAX_W];
    let one = [1.0f32; MAX_G];
    let first = chunk * rows;
    let end = if first + rows < b { first + rows } else { b };
    let mut row = first;
    while row < end {
        let base = row * n + f;
        // Recomputed each row (see `opaque_u64`): a hoisted address per component took 80
        // registers.
        let plane = opaque_u64(plane as u64) as usize;
        // SAFETY: row < B, f < N.
        let (xs, ys, gs) = unsafe {
            (ld_mv::<T, A, 1>(x, plane, base), ld_mv::<T, A, 1>(y, plane, base), ld_mv::<T, A, 1>(go, plane, base))
        };
        let (mut inv, mut k) = ([1.0f32; MAX_G], [0.0f32; MAX_G]);
        if normalize {
            for g in 0..A::G {
                // SAFETY: row < B: inside the B * COEFS coefficients (caller).
                unsafe {
                    inv[g] = *coefs.add(row * COEFS + g);
                    k[g] = *coefs.add(row * COEFS + MAX_G + g);
                }
            }
        }
        let c = normalize.then_some((&inv, &k));
        let (gx, gy) = bwd_feature::<A>(&xs[0], &ys[0], &gs[0], &wf, c, &mut dw);
        // SAFETY: as for the loads.
        unsafe {
            st_mv::<T, A, 1>(dx, plane, base, &[gx], &one);
            st_mv::<T, A, 1>(dy, plane, base, &[gy], &one);
        }
        row += 1;
    }
    let part = chunk * A::W * n;
    for p in 0..A::W {
        // SAFETY: chunk < gridDim.y: this chunk's partial of W * N f32; f < N.
        unsafe { *dw_part.add(part + p * n + f) = dw[p] };
    }
}

/// `(x, y, go, w, coefs, b, n, team)`.
macro_rules! stats_entry {
    ($A:ty, $d:literal, $T:ty, $dt:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_bwd_stats_d", $d, "_", $dt))]
            unsafe extern "ptx-kernel" fn entry(
                x: *const $T,
                y: *const $T,
                go: *const $T,
                w: *const $T,
                coefs: *mut f32,
                b: usize,
                n: usize,
                team: u32,
            ) {
                // SAFETY: the host checked sizes, alignment, team and the scratch.
                unsafe { stats_kernel::<$T, $A, 1>([x, y, go], w, coefs, b, n, team) }
            }
        };
    };
}

/// `(x, y, go, w, coefs, dx, dy, dw_part, b, n, rows, normalize)`.
macro_rules! feat_entry {
    ($A:ty, $d:literal, $T:ty, $dt:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_bwd_feat_d", $d, "_", $dt))]
            unsafe extern "ptx-kernel" fn entry(
                x: *const $T,
                y: *const $T,
                go: *const $T,
                w: *const $T,
                coefs: *const f32,
                dx: *mut $T,
                dy: *mut $T,
                dw_part: *mut f32,
                b: usize,
                n: usize,
                rows: usize,
                normalize: u32,
            ) {
                // SAFETY: the host checked sizes, the chunks and the partials.
                unsafe { feat_kernel::<$T, $A>([x, y, go], w, coefs, [dx, dy], dw_part, b, n, rows, normalize != 0) }
            }
        };
    };
}

macro_rules! split_entries {
    ($A:ty, $d:literal, $T:ty, $dt:literal) => {
        stats_entry!($A, $d, $T, $dt);
        feat_entry!($A, $d, $T, $dt);
    };
}

each_dim_dtype!(split_entries);
