//! The one-pass SGP backward (`ft_clifford_bwd_d{2,3}_{dt}_{v4|v1}_p{n}`): as in the forward
//! (`clifford_fwd.rs`), a team of threads owns one batch row at a time, each thread the same
//! `VPT` accesses of `L` features for every row, so its weights sit in registers and so does
//! its share of the weight gradient, summed over all the rows it visits. A row's x, y and
//! grad_out stay in registers between the norm statistics (a team reduction) and the
//! gradients: every input is read once and dx, dy written once. At the end each team writes
//! its weight-gradient partial (`[W][N]` f32, plain stores) to `dw_part[team]`; the
//! `ft_clifford_dw_reduce` kernel sums the partials.
//!
//! The `..._p{n}s` entries (`SM`) keep only the row in registers: the weights are staged once
//! per block in shared memory and each team's weight gradient lives there too (every slot
//! owned by one thread: plain loads and stores, no atomics), which frees 20 (2D) or 40 (3D)
//! registers per feature, so 3D rows of 1024 features fit one block without spilling. At the
//! end the block sums its teams' areas in team order and writes one partial `dw_part[block]`.
//! Shared layout after the 1 KiB scratch: the weights, then one gradient area per team, each
//! `W * N` f32 with element `(q, vi, l)` (path, access, lane) at `(q * L + l) * N / L + vi`,
//! so consecutive threads touch consecutive words.
#![allow(clippy::needless_range_loop)]

use super::clifford_io::{SCRATCH, ld_mv, st_mv, team_sum, weights_of};
use crate::arch::nvptx::{
    block_dim_x, block_idx_x, dyn_smem_addr, grid_dim_x, ld_shared_f32, st_shared_f32, sync_threads, thread_idx_x,
};
use crate::clifford::{
    Algebra, Cl2, Cl3, MAX_C, MAX_G, MAX_W, Mv, Wv, bwd_feature, bwd_stats_feature, norm_backward_coefs,
};
use crate::element::Element;
use half::{bf16, f16};

/// The problem of one launch.
struct Problem<T> {
    x: *const T,
    y: *const T,
    go: *const T,
    w: *const T,
    dx: *mut T,
    dy: *mut T,
    dw_part: *mut f32,
    b: usize,
    n: usize,
    normalize: bool,
    team: u32,
}

/// Byte offset of element `(q, vi, l)` in a shared weight or gradient area (`nvec = N / L`).
#[inline(always)]
fn slot<const L: usize>(q: usize, vi: usize, l: usize, nvec: usize) -> u32 {
    (((q * L + l) * nvec + vi) * 4) as u32
}

/// The weights of access `vi`, lane `l` from the shared copy at `wsm`.
///
/// # Safety
/// `wsm` holds the staged `W * N` weights; `vi < nvec`, `l < L`.
#[inline(always)]
unsafe fn shared_weights<A: Algebra, const L: usize>(wsm: u32, vi: usize, l: usize, nvec: usize) -> Wv {
    let mut w = [0.0f32; MAX_W];
    for q in 0..A::W {
        // SAFETY: inside the staged area (caller).
        w[q] = unsafe { ld_shared_f32(wsm + slot::<L>(q, vi, l, nvec)) };
    }
    w
}

/// # Safety
/// Every multivector covers `C * B * N` elements, `w` covers `N * W`, `dw_part` covers
/// `gridDim.x * (blockDim.x / team) * W * N` f32 (`SM`: `gridDim.x * W * N`); N % L == 0 and
/// (L = 4) every pointer and the plane `B * N` are aligned to 4 elements; `team` is a power of
/// two dividing `blockDim.x` with `team * VPT * L >= N`; with `SM` the dynamic shared memory
/// holds `SCRATCH + (1 + blockDim.x / team) * W * N * 4` bytes; every thread of the block calls it.
#[inline(always)]
unsafe fn bwd_kept<T: Element, A: Algebra, const L: usize, const VPT: usize, const SM: bool>(p: &Problem<T>) {
    let tid = thread_idx_x() as usize;
    let nthreads = block_dim_x() as usize;
    let team = p.team as usize;
    let rows_per_block = nthreads / team;
    let j = tid % team;
    let (n, b) = (p.n, p.b);
    let nvec = n / L;
    let plane = b * n;
    let wn = A::W * n;
    let wsm = dyn_smem_addr() + SCRATCH;
    let areas = wsm + (wn * 4) as u32;
    let dwsm = areas + ((tid / team) * wn * 4) as u32;
    let mut ws = [[[0.0f32; MAX_W]; L]; VPT];
    let mut dws = [[[0.0f32; MAX_W]; L]; VPT];
    if SM {
        let mut idx = tid;
        while idx < wn {
            let (vi, ql) = (idx % nvec, idx / nvec);
            // SAFETY: feature vi * L + ql % L < N, path ql / L < W; idx < W * N floats staged.
            unsafe { st_shared_f32(wsm + (idx * 4) as u32, (*p.w.add((vi * L + ql % L) * A::W + ql / L)).to_f32()) };
            idx += nthreads;
        }
        for v in 0..VPT {
            let vi = j + v * team;
            if vi < nvec {
                for l in 0..L {
                    for q in 0..A::W {
                        // SAFETY: this team's area, a slot this thread owns.
                        unsafe { st_shared_f32(dwsm + slot::<L>(q, vi, l, nvec), 0.0) };
                    }
                }
            }
        }
        // SAFETY: every thread arrives (caller); the staged weights are visible after it.
        unsafe { sync_threads() };
    } else {
        for v in 0..VPT {
            let vi = j + v * team;
            if vi < nvec {
                for l in 0..L {
                    // SAFETY: vi * L + l < N.
                    ws[v][l] = unsafe { weights_of::<T, A>(p.w, vi * L + l) };
                }
            }
        }
    }
    let mut row0 = block_idx_x() as usize * rows_per_block;
    let step = grid_dim_x() as usize * rows_per_block;
    while row0 < b {
        let row = row0 + tid / team;
        let active = row < b;
        let mut xs = [[[0.0f32; MAX_C]; L]; VPT];
        let mut ys = [[[0.0f32; MAX_C]; L]; VPT];
        let mut gs = [[[0.0f32; MAX_C]; L]; VPT];
        for v in 0..VPT {
            let vi = j + v * team;
            if active && vi < nvec {
                let base = row * n + vi * L;
                // SAFETY: row < B and features vi * L .. + L <= N.
                unsafe {
                    xs[v] = ld_mv::<T, A, L>(p.x, plane, base);
                    ys[v] = ld_mv::<T, A, L>(p.y, plane, base);
                    gs[v] = ld_mv::<T, A, L>(p.go, plane, base);
                }
            }
        }
        let mut coefs = ([1.0f32; MAX_G], [0.0f32; MAX_G]);
        if p.normalize {
            let mut acc = [0.0f32; 2 * MAX_G];
            for v in 0..VPT {
                if active && j + v * team < nvec {
                    for l in 0..L {
                        let (mut ss, mut dot) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
                        // SAFETY: staged (SM), j + v * team < nvec.
                        let wf =
                            if SM { unsafe { shared_weights::<A, L>(wsm, j + v * team, l, nvec) } } else { ws[v][l] };
                        bwd_stats_feature::<A>(&xs[v][l], &ys[v][l], &gs[v][l], &wf, &mut ss, &mut dot);
                        for g in 0..MAX_G {
                            acc[g] += ss[g];
                            acc[MAX_G + g] += dot[g];
                        }
                    }
                }
            }
            // SAFETY: every thread of the block is here (row0 is uniform).
            let acc = unsafe { team_sum(acc, p.team, A::G) };
            let (mut ss, mut dot) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
            ss.copy_from_slice(&acc[..MAX_G]);
            dot.copy_from_slice(&acc[MAX_G..]);
            coefs = norm_backward_coefs::<A>(&ss, &dot, n);
        }
        for v in 0..VPT {
            let vi = j + v * team;
            if active && vi < nvec {
                let mut dxs: [Mv; L] = [[0.0f32; MAX_C]; L];
                let mut dys: [Mv; L] = [[0.0f32; MAX_C]; L];
                for l in 0..L {
                    let c = p.normalize.then_some((&coefs.0, &coefs.1));
                    if SM {
                        // SAFETY: staged, vi < nvec.
                        let wf = unsafe { shared_weights::<A, L>(wsm, vi, l, nvec) };
                        let mut dw = [0.0f32; MAX_W];
                        (dxs[l], dys[l]) = bwd_feature::<A>(&xs[v][l], &ys[v][l], &gs[v][l], &wf, c, &mut dw);
                        for q in 0..A::W {
                            let a = dwsm + slot::<L>(q, vi, l, nvec);
                            // SAFETY: a slot of this team's area that only this thread touches.
                            unsafe { st_shared_f32(a, ld_shared_f32(a) + dw[q]) };
                        }
                    } else {
                        (dxs[l], dys[l]) =
                            bwd_feature::<A>(&xs[v][l], &ys[v][l], &gs[v][l], &ws[v][l], c, &mut dws[v][l]);
                    }
                }
                let one = [1.0f32; MAX_G];
                let base = row * n + vi * L;
                // SAFETY: as for the loads.
                unsafe {
                    st_mv::<T, A, L>(p.dx, plane, base, &dxs, &one);
                    st_mv::<T, A, L>(p.dy, plane, base, &dys, &one);
                }
            }
        }
        row0 += step;
    }
    if SM {
        // SAFETY: every thread arrives (row0 is uniform); the areas are complete after it.
        unsafe { sync_threads() };
        let part = block_idx_x() as usize * wn;
        let mut idx = tid;
        while idx < wn {
            let mut s = 0.0f32;
            for t in 0..rows_per_block {
                // SAFETY: team t's area, element idx < W * N.
                s += unsafe { ld_shared_f32(areas + ((t * wn + idx) * 4) as u32) };
            }
            let (vi, ql) = (idx % nvec, idx / nvec);
            // SAFETY: this block's partial of W * N f32: path ql / L, feature vi * L + ql % L.
            unsafe { *p.dw_part.add(part + (ql / L) * n + vi * L + ql % L) = s };
            idx += nthreads;
        }
        return;
    }
    let part = (block_idx_x() as usize * rows_per_block + tid / team) * A::W * n;
    for v in 0..VPT {
        let vi = j + v * team;
        if vi < nvec {
            for l in 0..L {
                for q in 0..A::W {
                    // SAFETY: this team's partial holds W * N f32; vi * L + l < N.
                    unsafe { *p.dw_part.add(part + q * n + vi * L + l) = dws[v][l][q] };
                }
            }
        }
    }
}

// Kept-row backward variants; the list must match `BWD_VARIANTS` in clifford.rs.
macro_rules! each_variant {
    ($m:ident, $($a:tt),*) => {
        $m!($($a),*, "v4", 4, "1", 1);
        $m!($($a),*, "v1", 1, "1", 1);
        $m!($($a),*, "v1", 1, "2", 2);
        $m!($($a),*, "v1", 1, "4", 4);
        $m!($($a),*, "v4", 4, "1s", 1, true);
        $m!($($a),*, "v1", 1, "1s", 1, true);
        $m!($($a),*, "v1", 1, "2s", 2, true);
        $m!($($a),*, "v1", 1, "4s", 4, true);
    };
}

/// `(x, y, go, w, dx, dy, dw_part, b, n, normalize, team)`.
macro_rules! bwd_entry {
    ($A:ty, $d:literal, $T:ty, $dt:literal, $vn:literal, $l:literal, $pn:literal, $vpt:literal) => {
        bwd_entry!($A, $d, $T, $dt, $vn, $l, $pn, $vpt, false);
    };
    ($A:ty, $d:literal, $T:ty, $dt:literal, $vn:literal, $l:literal, $pn:literal, $vpt:literal, $sm:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_bwd_d", $d, "_", $dt, "_", $vn, "_p", $pn))]
            unsafe extern "ptx-kernel" fn entry(
                x: *const $T,
                y: *const $T,
                go: *const $T,
                w: *const $T,
                dx: *mut $T,
                dy: *mut $T,
                dw_part: *mut f32,
                b: usize,
                n: usize,
                normalize: u32,
                team: u32,
            ) {
                let p = Problem { x, y, go, w, dx, dy, dw_part, b, n, normalize: normalize != 0, team };
                // SAFETY: the host checked sizes, alignment, team, coverage and the partials.
                unsafe { bwd_kept::<$T, $A, $l, $vpt, $sm>(&p) }
            }
        };
    };
}

each_variant!(bwd_entry, Cl2, "2", f32, "f32");
each_variant!(bwd_entry, Cl2, "2", f16, "f16");
each_variant!(bwd_entry, Cl2, "2", bf16, "bf16");
each_variant!(bwd_entry, Cl3, "3", f32, "f32");
each_variant!(bwd_entry, Cl3, "3", f16, "f16");
each_variant!(bwd_entry, Cl3, "3", bf16, "bf16");
