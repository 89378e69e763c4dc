//! Shared pieces of the Clifford PTX entries: element loads and stores of 1 or 4 features
//! (16-byte accesses for f32), whole-multivector loads and stores over the component planes,
//! and the per-row team reduction.
#![allow(clippy::needless_range_loop)]

use crate::arch::nvptx::{
    dyn_smem_addr, ld_global_v2, ld_global_v4, ld_shared_f32, shfl_xor_f32, st_global_v2, st_global_v4, st_shared_f32,
    sync_threads, thread_idx_x,
};
use crate::clifford::{Algebra, Gv, MAX_C, MAX_G, MAX_W, Mv, Wv, bwd_stats_feature};
use crate::element::Element;

/// Calls `$m!(algebra, "dim", type, "dtype")` for each of the six (algebra, element type)
/// pairs the Clifford entries are compiled for (the caller has `Cl2`, `Cl3`, `f16`, `bf16` in
/// scope).
macro_rules! each_dim_dtype {
    ($m:ident) => {
        $m!(Cl2, "2", f32, "f32");
        $m!(Cl2, "2", f16, "f16");
        $m!(Cl2, "2", bf16, "bf16");
        $m!(Cl3, "3", f32, "f32");
        $m!(Cl3, "3", f16, "f16");
        $m!(Cl3, "3", bf16, "bf16");
    };
}
pub(super) use each_dim_dtype;

/// Bytes of team-reduction scratch at the start of the dynamic shared memory.
pub(super) const SCRATCH: u32 = 1024;

/// Loads `L` consecutive elements (L = 4: one 16-byte access for f32, 8-byte for 16-bit
/// types; L = 1: one element) as f32.
///
/// # Safety
/// `p..p + L` is readable; for L = 4 `p` is aligned to 4 elements.
#[inline(always)]
pub(super) unsafe fn ld<T: Element, const L: usize>(p: *const T) -> [f32; L] {
    let mut v = [0.0f32; L];
    if L == 4 {
        let words = if core::mem::size_of::<T>() == 4 {
            // SAFETY: 4 aligned f32 (caller).
            unsafe { ld_global_v4(p as *const u32) }
        } else {
            // SAFETY: 4 aligned 16-bit elements = 8 aligned bytes (caller).
            let w = unsafe { ld_global_v2(p as *const u32) };
            [w[0], w[1], 0, 0]
        };
        let lanes = T::from_words(words);
        for (l, o) in v.iter_mut().enumerate() {
            *o = lanes.as_ref()[l].to_f32();
        }
    } else {
        // SAFETY: one readable element (caller).
        v[0] = unsafe { *p }.to_f32();
    }
    v
}

/// Stores `L` consecutive elements, rounded to `T` (as [`ld`]).
///
/// # Safety
/// As [`ld`], writable.
#[inline(always)]
pub(super) unsafe fn st<T: Element, const L: usize>(p: *mut T, v: [f32; L]) {
    if L == 4 {
        let mut lanes = T::from_words([0; 4]);
        for (l, &x) in v.iter().enumerate() {
            lanes.as_mut()[l] = T::from_f32(x);
        }
        let w = T::to_words(lanes);
        if core::mem::size_of::<T>() == 4 {
            // SAFETY: 4 aligned f32 (caller).
            unsafe { st_global_v4(p as *mut u32, w) }
        } else {
            // SAFETY: 8 aligned bytes (caller).
            unsafe { st_global_v2(p as *mut u32, [w[0], w[1]]) }
        }
    } else {
        // SAFETY: one writable element (caller).
        unsafe { *p = T::from_f32(v[0]) }
    }
}

/// Sums `v` over the `team` threads of each row and gives every thread its team's sums.
/// Teams are a power of two; below 32 they are aligned parts of a warp, from 32 up whole warps
/// (then through `SCRATCH`, with barriers). The butterfly rounds are unrolled over the five
/// possible masks, each taken or skipped by the whole block (`team` is uniform), and the
/// warps' partials are summed by a second butterfly instead of a loop over them. Only the
/// entries whose index modulo `MAX_G` is below `grades` (the algebra's grades: 3 of each 4 in
/// 2D) are summed; the others are returned as they came (zeros in every caller).
///
/// # Safety
/// Every thread of the block calls it together (`team` is the same for all).
#[inline(always)]
pub(super) unsafe fn team_sum<const G: usize>(v: [f32; G], team: u32, grades: usize) -> [f32; G] {
    let width = if team < 32 { team } else { 32 };
    // SAFETY: every lane of every warp is here (caller).
    let mut v = unsafe { butterfly(v, width, grades) };
    if team > 32 {
        let tid = thread_idx_x();
        let (warp, lane) = (tid / 32, tid % 32);
        let warps = team / 32;
        let smem = dyn_smem_addr();
        // SAFETY (barriers): reached by all threads (caller). The first one keeps the previous
        // call's readers from seeing this call's writes.
        unsafe { sync_threads() };
        if lane == 0 {
            for (g, &x) in v.iter().enumerate() {
                // SAFETY: warp < 32 and G <= 8: inside the 1024-byte scratch.
                unsafe { st_shared_f32(smem + (warp * G as u32 + g as u32) * 4, x) };
            }
        }
        unsafe { sync_threads() };
        // Lane l of every warp of a team takes the partials of the team's warp l % warps, so
        // each aligned group of `warps` lanes holds every partial once and sums them to the
        // total, in the same order in every group.
        let first = (tid / team) * warps;
        let mut s = v;
        for (g, x) in s.iter_mut().enumerate() {
            if g % MAX_G < grades {
                // SAFETY: first + lane % warps < 32 warps, inside the scratch.
                *x = unsafe { ld_shared_f32(smem + ((first + lane % warps) * G as u32 + g as u32) * 4) };
            }
        }
        // SAFETY: every lane of every warp is here.
        v = unsafe { butterfly(s, warps, grades) };
    }
    v
}

/// Sums `v` (the entries `team_sum` names) over aligned groups of `width` lanes (a power of
/// two up to 32), every lane getting its group's sums: the xor rounds below `width`, unrolled.
///
/// # Safety
/// All 32 lanes of the warp call it together with the same `width`.
#[inline(always)]
unsafe fn butterfly<const G: usize>(v: [f32; G], width: u32, grades: usize) -> [f32; G] {
    // Five calls, not a loop over an array of masks: that one was not unrolled.
    // SAFETY: every lane of the warp is here (caller).
    unsafe {
        let v = xor_round(v, 16, width, grades);
        let v = xor_round(v, 8, width, grades);
        let v = xor_round(v, 4, width, grades);
        let v = xor_round(v, 2, width, grades);
        xor_round(v, 1, width, grades)
    }
}

/// One butterfly round: adds lane `l ^ m`'s values where `m < width`.
///
/// # Safety
/// As [`butterfly`].
#[inline(always)]
unsafe fn xor_round<const G: usize>(mut v: [f32; G], m: u32, width: u32, grades: usize) -> [f32; G] {
    if m < width {
        for (i, x) in v.iter_mut().enumerate() {
            if i % MAX_G < grades {
                // SAFETY: every lane of the warp is here (caller).
                *x += unsafe { shfl_xor_f32(*x, m) };
            }
        }
    }
    v
}

/// Loads `L` consecutive features of every component at element `base` of each plane.
///
/// # Safety
/// Each plane `c < C` at `p + c * plane` covers `base + L` elements (aligned as for [`ld`]).
#[inline(always)]
pub(super) unsafe fn ld_mv<T: Element, A: Algebra, const L: usize>(p: *const T, plane: usize, base: usize) -> [Mv; L] {
    let mut out = [[0.0f32; MAX_C]; L];
    for c in 0..A::C {
        // SAFETY: forwarded from the caller.
        let v = unsafe { ld::<T, L>(p.add(c * plane + base)) };
        for l in 0..L {
            out[l][c] = v[l];
        }
    }
    out
}

/// Stores `L` features of every component, each scaled by its grade's `scale`.
///
/// # Safety
/// As [`ld_mv`], writable.
#[inline(always)]
pub(super) unsafe fn st_mv<T: Element, A: Algebra, const L: usize>(
    p: *mut T,
    plane: usize,
    base: usize,
    v: &[Mv; L],
    scale: &Gv,
) {
    let t = A::T;
    for c in 0..A::C {
        let mut lanes = [0.0f32; L];
        for l in 0..L {
            lanes[l] = v[l][c] * scale[t.grade[c]];
        }
        // SAFETY: forwarded from the caller.
        unsafe { st::<T, L>(p.add(c * plane + base), lanes) };
    }
}

/// The `(N, W)` weights of feature `f` from global memory, as f32.
///
/// # Safety
/// `w` covers `(f + 1) * W` elements.
#[inline(always)]
pub(super) unsafe fn weights_of<T: Element, A: Algebra>(w: *const T, f: usize) -> Wv {
    let mut v = [0.0f32; MAX_W];
    for p in 0..A::W {
        // SAFETY: f * W + p < (f + 1) * W (caller).
        v[p] = unsafe { *w.add(f * A::W + p) }.to_f32();
    }
    v
}

/// One row's backward norm statistics `(ss, dot)` (per grade: the raw output's squares and
/// `go . o_raw`), summed over the row's team: thread `j` of the team takes the accesses
/// `j, j + team, ...` of `L` features, `wts(f)` gives feature `f`'s weights. Threads of
/// rows past B (`active` false) add nothing but take part in the team sum.
///
/// # Safety
/// x, y and go cover `C * plane` elements with the row's `n` features at `row * n`
/// (aligned as for [`ld`]); `n % L == 0`; every thread of the block calls it together with
/// the same `team` (as [`team_sum`]).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn row_stats<T: Element, A: Algebra, const L: usize>(
    [x, y, go]: [*const T; 3],
    wts: impl Fn(usize) -> Wv,
    row: usize,
    active: bool,
    n: usize,
    plane: usize,
    team: u32,
) -> (Gv, Gv) {
    let j = thread_idx_x() as usize % team as usize;
    let nvec = n / L;
    let mut acc = [0.0f32; 2 * MAX_G];
    let mut vi = j;
    while active && vi < nvec {
        let base = row * n + vi * L;
        // SAFETY: row < B, features in range (caller).
        let (xs, ys, gs) = unsafe {
            (ld_mv::<T, A, L>(x, plane, base), ld_mv::<T, A, L>(y, plane, base), ld_mv::<T, A, L>(go, plane, base))
        };
        for l in 0..L {
            let (mut ss, mut dot) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
            bwd_stats_feature::<A>(&xs[l], &ys[l], &gs[l], &wts(vi * L + l), &mut ss, &mut dot);
            for g in 0..MAX_G {
                acc[g] += ss[g];
                acc[MAX_G + g] += dot[g];
            }
        }
        vi += team as usize;
    }
    // SAFETY: every thread of the block is here (caller).
    let acc = unsafe { team_sum(acc, team, A::G) };
    let (mut ss, mut dot) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
    ss.copy_from_slice(&acc[..MAX_G]);
    dot.copy_from_slice(&acc[MAX_G..]);
    (ss, dot)
}
