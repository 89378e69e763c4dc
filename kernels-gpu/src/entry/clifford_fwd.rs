//! The SGP forward entries (`ft_clifford_fwd_d{2,3}_{dt}_{v4|v1}_p{n}`). A team of threads owns
//! one batch row at a time and covers its N features; each thread keeps the same features for
//! every row it visits, so with `VPT` > 0 it reads its features' weights from global memory
//! once (into registers) and, while it computes, reduces and stores one row, the loads of its
//! next row are already in flight. The per-grade norm is a team reduction of values held in
//! registers: x and y are read once, the output written once, and no shared memory holds
//! weights, so no N is too large. `VPT` = 0 streams the row twice (statistics, then recompute
//! and write; the second read mostly hits L2) for rows too long for the team's registers.
#![allow(clippy::needless_range_loop)]

use super::clifford_io::{ld_mv, st_mv, team_sum, weights_of};
use crate::arch::nvptx::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};
use crate::clifford::{Algebra, Cl2, Cl3, Gv, MAX_C, MAX_G, MAX_W, Mv, Wv, accumulate_grades, gated_product, inv_rms};
use crate::element::Element;
use half::{bf16, f16};

/// The gated product of `L` features with their weights, added to the grade sums `ss`.
#[inline(always)]
fn eval<A: Algebra, const L: usize>(xs: &[Mv; L], ys: &[Mv; L], ws: &[Wv; L], ss: &mut Gv) -> [Mv; L] {
    let mut o = [[0.0f32; MAX_C]; L];
    for l in 0..L {
        o[l] = gated_product::<A>(&xs[l], &ys[l], &ws[l]);
        accumulate_grades::<A>(&o[l], ss);
    }
    o
}

#[inline(always)]
fn inv_all<A: Algebra>(ss: Gv, n: usize, normalize: bool) -> Gv {
    let mut inv = [1.0f32; MAX_G];
    if normalize {
        for g in 0..A::G {
            inv[g] = inv_rms(ss[g], n);
        }
    }
    inv
}

/// The problem of one launch.
struct Problem<T> {
    x: *const T,
    y: *const T,
    w: *const T,
    out: *mut T,
    b: usize,
    n: usize,
    normalize: bool,
    team: u32,
}

/// `VPT` > 0: registers hold one row's inputs (and, with `KEEP_W`, the thread's weights,
/// else they are re-read per row from L1 / L2); the next row's inputs are loaded before the
/// current row is computed.
///
/// # Safety
/// B >= 1, N >= 1; every pointer covers the problem (`C * B * N` elements, weights `N * W`); N % L == 0 and
/// (L = 4) every pointer and the plane `B * N` are aligned to 4 elements; `team` is a power of
/// two dividing `blockDim.x` with `team * VPT * L >= N`; every thread of the block calls it.
#[inline(always)]
unsafe fn fwd_kept<T: Element, A: Algebra, const L: usize, const VPT: usize, const KEEP_W: bool>(p: &Problem<T>) {
    let tid = thread_idx_x();
    let team = p.team as usize;
    let rows_per_block = block_dim_x() as usize / team;
    let j = tid as usize % team;
    let (n, b) = (p.n, p.b);
    let nvec = n / L;
    let plane = b * n;
    let mut ws = [[[0.0f32; MAX_W]; L]; VPT];
    for v in 0..VPT {
        let vi = j + v * team;
        if KEEP_W && vi < nvec {
            for l in 0..L {
                // SAFETY: vi * L + l < N.
                ws[v][l] = unsafe { weights_of::<T, A>(p.w, vi * L + l) };
            }
        }
    }
    // Rows past B and accesses past N load the last row's (the last access's) values instead,
    // which nothing uses: no zeroing and no branches around the loads (B >= 1 and N >= L:
    // the host launches nothing else). Fewer instructions and registers (2D v1_p2 80 -> 72).
    let load = |row: usize| {
        let mut xs = [[[0.0f32; MAX_C]; L]; VPT];
        let mut ys = [[[0.0f32; MAX_C]; L]; VPT];
        let row = if row < b { row } else { b - 1 };
        for v in 0..VPT {
            let vi = j + v * team;
            let vi = if vi < nvec { vi } else { nvec - 1 };
            // SAFETY: row < B and features vi * L .. + L <= N.
            unsafe {
                xs[v] = ld_mv::<T, A, L>(p.x, plane, row * n + vi * L);
                ys[v] = ld_mv::<T, A, L>(p.y, plane, row * n + vi * L);
            }
        }
        (xs, ys)
    };
    let mut row0 = block_idx_x() as usize * rows_per_block;
    let step = grid_dim_x() as usize * rows_per_block;
    let mut row = row0 + tid as usize / team;
    let (mut xs, mut ys) = load(row);
    while row0 < b {
        let next = load(row + step);
        let mut ss = [0.0f32; MAX_G];
        let mut o = [[[0.0f32; MAX_C]; L]; VPT];
        for v in 0..VPT {
            let vi = j + v * team;
            if vi < nvec {
                if KEEP_W {
                    o[v] = eval::<A, L>(&xs[v], &ys[v], &ws[v], &mut ss);
                } else {
                    let mut wv = [[0.0f32; MAX_W]; L];
                    for l in 0..L {
                        // SAFETY: vi * L + l < N; re-read per row (L1 / L2 hits).
                        wv[l] = unsafe { weights_of::<T, A>(p.w, vi * L + l) };
                    }
                    o[v] = eval::<A, L>(&xs[v], &ys[v], &wv, &mut ss);
                }
            }
        }
        // SAFETY: every thread of the block runs the same trips (row0 is uniform).
        let inv = inv_all::<A>(if p.normalize { unsafe { team_sum(ss, p.team, A::G) } } else { ss }, n, p.normalize);
        if row < b {
            for v in 0..VPT {
                let vi = j + v * team;
                if vi < nvec {
                    // SAFETY: as for the loads.
                    unsafe { st_mv::<T, A, L>(p.out, plane, row * n + vi * L, &o[v], &inv) };
                }
            }
        }
        (xs, ys) = next;
        row0 += step;
        row += step;
    }
}

/// `VPT` = 0: two passes over each row (any N); weights read per feature from global memory
/// (L1 / L2).
///
/// # Safety
/// As [`fwd_kept`] without the coverage condition.
#[inline(always)]
unsafe fn fwd_stream<T: Element, A: Algebra, const L: usize>(p: &Problem<T>) {
    let tid = thread_idx_x();
    let team = p.team as usize;
    let rows_per_block = block_dim_x() as usize / team;
    let j = tid as usize % team;
    let (n, b) = (p.n, p.b);
    let nvec = n / L;
    let plane = b * n;
    let chunk = |row: usize, vi: usize, ss: &mut Gv| {
        let base = row * n + vi * L;
        let mut wv = [[0.0f32; MAX_W]; L];
        for l in 0..L {
            // SAFETY: vi * L + l < N (callers).
            wv[l] = unsafe { weights_of::<T, A>(p.w, vi * L + l) };
        }
        // SAFETY: row < B and the features in range (callers).
        let (xs, ys) = unsafe { (ld_mv::<T, A, L>(p.x, plane, base), ld_mv::<T, A, L>(p.y, plane, base)) };
        eval::<A, L>(&xs, &ys, &wv, ss)
    };
    let mut row0 = block_idx_x() as usize * rows_per_block;
    let step = grid_dim_x() as usize * rows_per_block;
    while row0 < b {
        let row = row0 + tid as usize / team;
        let active = row < b;
        let mut ss = [0.0f32; MAX_G];
        if p.normalize {
            let mut vi = j;
            while active && vi < nvec {
                chunk(row, vi, &mut ss);
                vi += team;
            }
            // SAFETY: every thread of the block is here (row0 is uniform).
            ss = unsafe { team_sum(ss, p.team, A::G) };
        }
        let inv = inv_all::<A>(ss, n, p.normalize);
        let mut vi = j;
        while active && vi < nvec {
            let mut dummy = [0.0f32; MAX_G];
            let o = chunk(row, vi, &mut dummy);
            // SAFETY: as above.
            unsafe { st_mv::<T, A, L>(p.out, plane, row * n + vi * L, &o, &inv) };
            vi += team;
        }
        row0 += step;
    }
}

// Variants; the list must match `ROW_VARIANTS` in clifford.rs.
macro_rules! each_variant {
    ($m:ident, $($a:tt),*) => {
        $m!($($a),*, "v4", 4, "1", 1);
        $m!($($a),*, "v4", 4, "0", 0);
        $m!($($a),*, "v1", 1, "1", 1);
        $m!($($a),*, "v1", 1, "2", 2);
        $m!($($a),*, "v1", 1, "4", 4);
        $m!($($a),*, "v1", 1, "0", 0);
    };
}

// The streamed-weights variants; the list must match `FWD_STREAM_VARIANTS` in clifford.rs.
macro_rules! each_stream_variant {
    ($m:ident, $($a:tt),*) => {
        $m!($($a),*, "v1", 1, "1s", 1, false);
        $m!($($a),*, "v1", 1, "2s", 2, false);
        $m!($($a),*, "v1", 1, "4s", 4, false);
        $m!($($a),*, "v4", 4, "1s", 1, false);
    };
}

/// `(x, y, w, out, b, n, normalize, team)`.
macro_rules! fwd_entry {
    ($A:ty, $d:literal, $T:ty, $dt:literal, $vn:literal, $l:literal, $pn:literal, $vpt:literal) => {
        fwd_entry!($A, $d, $T, $dt, $vn, $l, $pn, $vpt, true);
    };
    ($A:ty, $d:literal, $T:ty, $dt:literal, $vn:literal, $l:literal, $pn:literal, $vpt:literal, $keep:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_fwd_d", $d, "_", $dt, "_", $vn, "_p", $pn))]
            unsafe extern "ptx-kernel" fn entry(
                x: *const $T,
                y: *const $T,
                w: *const $T,
                out: *mut $T,
                b: usize,
                n: usize,
                normalize: u32,
                team: u32,
            ) {
                let p = Problem { x, y, w, out, b, n, normalize: normalize != 0, team };
                // SAFETY: the host checked sizes, alignment, team and coverage.
                unsafe {
                    if $vpt == 0 { fwd_stream::<$T, $A, $l>(&p) } else { fwd_kept::<$T, $A, $l, $vpt, $keep>(&p) }
                }
            }
        };
    };
}

each_variant!(fwd_entry, Cl2, "2", f32, "f32");
each_stream_variant!(fwd_entry, Cl2, "2", f32, "f32");
each_variant!(fwd_entry, Cl2, "2", f16, "f16");
each_stream_variant!(fwd_entry, Cl2, "2", f16, "f16");
each_variant!(fwd_entry, Cl2, "2", bf16, "bf16");
each_stream_variant!(fwd_entry, Cl2, "2", bf16, "bf16");
each_variant!(fwd_entry, Cl3, "3", f32, "f32");
each_stream_variant!(fwd_entry, Cl3, "3", f32, "f32");
each_variant!(fwd_entry, Cl3, "3", f16, "f16");
each_stream_variant!(fwd_entry, Cl3, "3", f16, "f16");
each_variant!(fwd_entry, Cl3, "3", bf16, "bf16");
each_stream_variant!(fwd_entry, Cl3, "3", bf16, "bf16");
