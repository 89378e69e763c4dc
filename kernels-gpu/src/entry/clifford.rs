//! Entry points of the Clifford family. The row kernels (forward, FCGP assembly) give each
//! batch row to a team of threads that covers all N features, so the per-grade norm is a team
//! reduction and x, y are read from DRAM once: the outputs wait in registers (`vpt` > 0) or
//! are recomputed from L2-resident inputs (`vpt` = 0). The backward recomputes the forward in
//! two passes (norm statistics, then gradients) and accumulates the weight gradient of the
//! block's rows in shared memory; a second small kernel sums the per-block partials.
//!
//! Dynamic shared memory: `[0, 1024)` team-reduction scratch (32 warps x 8 floats), then the
//! weights as f32 `[W][N]`, then (backward) the weight gradient `[W][N]`.
//!
//! Loops over components, weights and products are plain index loops with constant bounds:
//! iterator chains (`enumerate().take(n)`) were not unrolled, which put the arrays they index
//! in local memory.
#![allow(clippy::needless_range_loop)]

use crate::arch::nvptx::{
    block_dim_x, block_idx_x, dyn_smem_addr, grid_dim_x, ld_global_v2, ld_global_v4, ld_shared_f32, red_shared_add_f32,
    shfl_xor_f32, st_global_v2, st_global_v4, st_shared_f32, sync_threads, thread_idx_x,
};
use crate::clifford::{
    Algebra, Cl2, Cl3, Gv, MAX_C, MAX_G, MAX_W, Mv, Wv, accumulate_grades, bwd_feature, bwd_stats_feature, gate,
    inv_rms, norm_backward_coefs, path_products, product,
};
use crate::element::Element;
use half::{bf16, f16};

/// Bytes of team-reduction scratch at the start of the dynamic shared memory.
const SCRATCH: u32 = 1024;

/// Loads `L` consecutive elements (L = 4: one 16-byte access for f32, 8-byte for 16-bit
/// types; L = 1: one element) as f32.
///
/// # Safety
/// `p..p + L` is readable; for L = 4 `p` is aligned to 4 elements.
#[inline(always)]
unsafe fn ld<T: Element, const L: usize>(p: *const T) -> [f32; L] {
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
unsafe fn st<T: Element, const L: usize>(p: *mut T, v: [f32; L]) {
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
/// (then through `SCRATCH`, with barriers).
///
/// # Safety
/// Every thread of the block calls it together (`team` is the same for all).
#[inline(always)]
unsafe fn team_sum<const G: usize>(mut v: [f32; G], team: u32) -> [f32; G] {
    let width = if team < 32 { team } else { 32 };
    let mut m = width / 2;
    while m > 0 {
        for x in v.iter_mut() {
            // SAFETY: every lane of every warp is here (caller).
            *x += unsafe { shfl_xor_f32(*x, m) };
        }
        m /= 2;
    }
    if team > 32 {
        let tid = thread_idx_x();
        let warp = tid / 32;
        let smem = dyn_smem_addr();
        // SAFETY (barriers): reached by all threads (caller). The first one keeps the previous
        // call's readers from seeing this call's writes.
        unsafe { sync_threads() };
        if tid % 32 == 0 {
            for (g, &x) in v.iter().enumerate() {
                // SAFETY: warp < 32 and G <= 8: inside the 1024-byte scratch.
                unsafe { st_shared_f32(smem + (warp * G as u32 + g as u32) * 4, x) };
            }
        }
        unsafe { sync_threads() };
        let first = (tid / team) * (team / 32);
        let mut s = [0.0f32; G];
        for w in 0..team / 32 {
            for (g, x) in s.iter_mut().enumerate() {
                // SAFETY: first + w < 32 warps, inside the scratch.
                *x += unsafe { ld_shared_f32(smem + ((first + w) * G as u32 + g as u32) * 4) };
            }
        }
        v = s;
    }
    v
}

/// Copies the `(n, W)` weights to shared memory as f32 `[W][n]` (so a thread's four
/// consecutive features of one path are adjacent), then waits for the block.
///
/// # Safety
/// `w` covers `n * W` elements; the dynamic shared memory has room for them after `SCRATCH`;
/// every thread of the block calls it.
#[inline(always)]
unsafe fn stage_weights<T: Element, A: Algebra>(w: *const T, n: usize) -> u32 {
    let wsm = dyn_smem_addr() + SCRATCH;
    let nw = A::W;
    let mut idx = thread_idx_x() as usize;
    while idx < n * nw {
        let (f, p) = (idx / nw, idx % nw);
        // SAFETY: idx < n * W; p * n + f < W * n floats after the scratch.
        unsafe { st_shared_f32(wsm + ((p * n + f) * 4) as u32, (*w.add(idx)).to_f32()) };
        idx += block_dim_x() as usize;
    }
    // SAFETY: every thread arrives (caller).
    unsafe { sync_threads() };
    wsm
}

/// The weights of feature `f` from the staged copy.
///
/// # Safety
/// `wsm` is the staged copy of `n` features and `f < n`.
#[inline(always)]
unsafe fn weights<A: Algebra>(wsm: u32, n: usize, f: usize) -> Wv {
    let mut w = [0.0f32; MAX_W];
    for p in 0..A::W {
        // SAFETY: p * n + f < W * n (caller).
        w[p] = unsafe { ld_shared_f32(wsm + ((p * n + f) * 4) as u32) };
    }
    w
}

/// Loads `L` consecutive features of every component at element `base` of each plane.
///
/// # Safety
/// Each plane `c < C` at `p + c * plane` covers `base + L` elements (aligned as for [`ld`]).
#[inline(always)]
unsafe fn ld_mv<T: Element, A: Algebra, const L: usize>(p: *const T, plane: usize, base: usize) -> [Mv; L] {
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
unsafe fn st_mv<T: Element, A: Algebra, const L: usize>(p: *mut T, plane: usize, base: usize, v: &[Mv; L], scale: &Gv) {
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

/// Where a row kernel's un-normalised output comes from.
trait Source<A: Algebra> {
    /// The output of `L` consecutive features from `f` of row `row`.
    ///
    /// # Safety
    /// `row < B`, `f + L <= N`, and the source's pointers cover the problem.
    unsafe fn eval<const L: usize>(&self, row: usize, f: usize) -> [Mv; L];
}

/// The forward: gate both inputs, weighted product with the staged weights.
struct Forward<T> {
    x: *const T,
    y: *const T,
    plane: usize,
    n: usize,
    wsm: u32,
}

impl<T: Element, A: Algebra> Source<A> for Forward<T> {
    #[inline(always)]
    unsafe fn eval<const L: usize>(&self, row: usize, f: usize) -> [Mv; L] {
        let base = row * self.n + f;
        // SAFETY: forwarded from the caller.
        let xs = unsafe { ld_mv::<T, A, L>(self.x, self.plane, base) };
        let ys = unsafe { ld_mv::<T, A, L>(self.y, self.plane, base) };
        let mut o = [[0.0f32; MAX_C]; L];
        for l in 0..L {
            let (mut xg, mut yg) = (xs[l], ys[l]);
            gate::<A>(&mut xg);
            gate::<A>(&mut yg);
            // SAFETY: f + l < N.
            let w = unsafe { weights::<A>(self.wsm, self.n, f + l) };
            o[l] = product::<A>(&xg, &yg, &w);
        }
        o
    }
}

/// FCGP: sums of the GEMM results `d` (f32, product `s` at rows `s * B ..`).
struct Assemble {
    d: *const f32,
    plane: usize,
    n: usize,
}

impl<A: Algebra> Source<A> for Assemble {
    #[inline(always)]
    unsafe fn eval<const L: usize>(&self, row: usize, f: usize) -> [Mv; L] {
        let base = row * self.n + f;
        let mut o = [[0.0f32; MAX_C]; L];
        let t = A::T;
        for p in 0..A::W {
            for c in 0..A::C {
                if t.grade[c] == t.paths[p].1 {
                    let s = t.offset[p] + t.slot[c];
                    // SAFETY: product s of row `row` covers N features (caller).
                    let v = unsafe { ld::<f32, L>(self.d.add(s * self.plane + base)) };
                    for l in 0..L {
                        o[l][c] += v[l];
                    }
                }
            }
        }
        o
    }
}

/// The row kernel: each team of `team` threads owns one batch row at a time (grid-stride
/// over rows) and covers its N features in accesses of `L`; the per-grade sums of squares are
/// a team reduction; outputs are scaled by `1 / r_g` and stored.
///
/// # Safety
/// `out` covers `C * B * N` elements; the source covers the problem; N % L == 0 and (L = 4)
/// every pointer is aligned to 4 elements; `team` is a power of two dividing `blockDim.x`
/// (a multiple of 32); with `VPT > 0`, `team * VPT * L >= N`.
#[inline(always)]
unsafe fn row_kernel<T: Element, A: Algebra, S: Source<A>, const L: usize, const VPT: usize>(
    src: &S,
    out: *mut T,
    b: usize,
    n: usize,
    normalize: bool,
    team: u32,
) {
    let tid = thread_idx_x();
    let rows_per_block = (block_dim_x() / team) as usize;
    let j = (tid % team) as usize;
    let team_us = team as usize;
    let nvec = n / L;
    let plane = b * n;
    let mut row0 = block_idx_x() as usize * rows_per_block;
    let step = grid_dim_x() as usize * rows_per_block;
    while row0 < b {
        let row = row0 + (tid / team) as usize;
        let active = row < b;
        let mut ss = [0.0f32; MAX_G];
        if VPT > 0 {
            let mut keep = [[[0.0f32; MAX_C]; L]; VPT];
            for (v, kv) in keep.iter_mut().enumerate() {
                let vi = j + v * team_us;
                if active && vi < nvec {
                    // SAFETY: row < B and the features vi * L .. + L < N.
                    *kv = unsafe { src.eval::<L>(row, vi * L) };
                    for o in kv.iter() {
                        accumulate_grades::<A>(o, &mut ss);
                    }
                }
            }
            let inv = if normalize {
                // SAFETY: every thread of the block is here (the loop bounds are uniform).
                inv_all::<A>(unsafe { team_sum(ss, team) }, n)
            } else {
                [1.0; MAX_G]
            };
            for (v, kv) in keep.iter().enumerate() {
                let vi = j + v * team_us;
                if active && vi < nvec {
                    // SAFETY: as above.
                    unsafe { st_mv::<T, A, L>(out, plane, row * n + vi * L, kv, &inv) };
                }
            }
        } else {
            let mut inv = [1.0f32; MAX_G];
            if normalize {
                let mut vi = j;
                while active && vi < nvec {
                    // SAFETY: row < B, features in range.
                    for o in unsafe { src.eval::<L>(row, vi * L) }.iter() {
                        accumulate_grades::<A>(o, &mut ss);
                    }
                    vi += team_us;
                }
                // SAFETY: every thread of the block is here.
                inv = inv_all::<A>(unsafe { team_sum(ss, team) }, n);
            }
            let mut vi = j;
            while active && vi < nvec {
                // SAFETY: as above (the second read of the inputs mostly hits L2).
                let o = unsafe { src.eval::<L>(row, vi * L) };
                unsafe { st_mv::<T, A, L>(out, plane, row * n + vi * L, &o, &inv) };
                vi += team_us;
            }
        }
        row0 += step;
    }
}

#[inline(always)]
fn inv_all<A: Algebra>(ss: Gv, n: usize) -> Gv {
    let mut inv = [1.0f32; MAX_G];
    for g in 0..A::G {
        inv[g] = inv_rms(ss[g], n);
    }
    inv
}

/// The backward: per row, pass 1 (with the norm) recomputes the forward and reduces the sums
/// of squares and `go . o`; pass 2 writes dx, dy and adds the weight gradient to shared
/// memory. At the end the block's weight gradient goes to `dw_part[block]` (`[W][N]` f32).
///
/// # Safety
/// Every tensor covers `C * B * N` elements, `w` covers `N * W`, `dw_part` covers
/// `gridDim.x * W * N` f32; shared memory holds `SCRATCH + 2 W N` floats' bytes; alignment,
/// `team` and N % L as for [`row_kernel`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn bwd_kernel<T: Element, A: Algebra, const L: usize>(
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
) {
    // SAFETY: all threads; room checked by the host.
    let wsm = unsafe { stage_weights::<T, A>(w, n) };
    let dwsm = wsm + (A::W * n * 4) as u32;
    let tid = thread_idx_x() as usize;
    let nthreads = block_dim_x() as usize;
    let mut idx = tid;
    while idx < A::W * n {
        // SAFETY: inside the gradient area.
        unsafe { st_shared_f32(dwsm + (idx * 4) as u32, 0.0) };
        idx += nthreads;
    }
    // SAFETY: all threads.
    unsafe { sync_threads() };

    let rows_per_block = nthreads / team as usize;
    let j = tid % team as usize;
    let team_us = team as usize;
    let nvec = n / L;
    let plane = b * n;
    let mut row0 = block_idx_x() as usize * rows_per_block;
    let step = grid_dim_x() as usize * rows_per_block;
    while row0 < b {
        let row = row0 + tid / team_us;
        let active = row < b;
        let mut coefs = ([1.0f32; MAX_G], [0.0f32; MAX_G]);
        if normalize {
            let mut acc = [0.0f32; 2 * MAX_G];
            let mut vi = j;
            while active && vi < nvec {
                let base = row * n + vi * L;
                // SAFETY: row < B, features in range.
                let (xs, ys, gs) = unsafe {
                    (
                        ld_mv::<T, A, L>(x, plane, base),
                        ld_mv::<T, A, L>(y, plane, base),
                        ld_mv::<T, A, L>(go, plane, base),
                    )
                };
                for l in 0..L {
                    let (mut ss, mut dot) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
                    // SAFETY: vi * L + l < N.
                    let wf = unsafe { weights::<A>(wsm, n, vi * L + l) };
                    bwd_stats_feature::<A>(&xs[l], &ys[l], &gs[l], &wf, &mut ss, &mut dot);
                    for g in 0..MAX_G {
                        acc[g] += ss[g];
                        acc[MAX_G + g] += dot[g];
                    }
                }
                vi += team_us;
            }
            // SAFETY: every thread of the block is here.
            let acc = unsafe { team_sum(acc, team) };
            let (mut ss, mut dot) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
            ss.copy_from_slice(&acc[..MAX_G]);
            dot.copy_from_slice(&acc[MAX_G..]);
            coefs = norm_backward_coefs::<A>(&ss, &dot, n);
        }
        let mut vi = j;
        while active && vi < nvec {
            let base = row * n + vi * L;
            // SAFETY: as above.
            let (xs, ys, gs) = unsafe {
                (ld_mv::<T, A, L>(x, plane, base), ld_mv::<T, A, L>(y, plane, base), ld_mv::<T, A, L>(go, plane, base))
            };
            let mut dxs = [[0.0f32; MAX_C]; L];
            let mut dys = [[0.0f32; MAX_C]; L];
            for l in 0..L {
                let f = vi * L + l;
                // SAFETY: f < N.
                let wf = unsafe { weights::<A>(wsm, n, f) };
                let mut dw = [0.0f32; MAX_W];
                let c = normalize.then_some((&coefs.0, &coefs.1));
                (dxs[l], dys[l]) = bwd_feature::<A>(&xs[l], &ys[l], &gs[l], &wf, c, &mut dw);
                for p in 0..A::W {
                    // SAFETY: p * n + f < W * n floats of the gradient area.
                    unsafe { red_shared_add_f32(dwsm + ((p * n + f) * 4) as u32, dw[p]) };
                }
            }
            let one = [1.0f32; MAX_G];
            // SAFETY: as above.
            unsafe {
                st_mv::<T, A, L>(dx, plane, base, &dxs, &one);
                st_mv::<T, A, L>(dy, plane, base, &dys, &one);
            }
            vi += team_us;
        }
        row0 += step;
    }
    // SAFETY: all threads.
    unsafe { sync_threads() };
    let part = block_idx_x() as usize * A::W * n;
    let mut idx = tid;
    while idx < A::W * n {
        // SAFETY: idx < W * n, inside this block's partial and the gradient area.
        unsafe { *dw_part.add(part + idx) = ld_shared_f32(dwsm + (idx * 4) as u32) };
        idx += nthreads;
    }
}

/// FCGP products: for every (row, feature) the signed per-path products, `prod[s]` planes of
/// `B * N` elements.
///
/// # Safety
/// `x`, `y` cover `C * B * N` elements, `prod` covers `total * B * N`.
#[inline(always)]
unsafe fn fcgp_products<T: Element, A: Algebra, P: Element>(
    x: *const T,
    y: *const T,
    prod: *mut P,
    b: usize,
    n: usize,
) {
    let plane = b * n;
    let mut idx = block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize;
    let step = grid_dim_x() as usize * block_dim_x() as usize;
    while idx < plane {
        // SAFETY: idx < B * N.
        let (xs, ys) = unsafe { (ld_mv::<T, A, 1>(x, plane, idx), ld_mv::<T, A, 1>(y, plane, idx)) };
        let (mut xg, mut yg) = (xs[0], ys[0]);
        gate::<A>(&mut xg);
        gate::<A>(&mut yg);
        let pr = path_products::<A>(&xg, &yg);
        for s in 0..A::TOTAL {
            // SAFETY: s < total, idx < B * N.
            unsafe { *prod.add(s * plane + idx) = P::from_f32(pr[s]) };
        }
        idx += step;
    }
}

/// `dw[f * W + p] = sum over blocks of part[blk][p][f]`, in block order.
///
/// # Safety
/// `part` covers `blocks * W * N` f32, `dw` covers `N * W`; `nw >= 1`, `n >= 1`.
#[inline(always)]
unsafe fn dw_reduce<T: Element>(part: *const f32, dw: *mut T, blocks: usize, n: usize, nw: usize) {
    let total = n * nw;
    let mut idx = block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize;
    let step = grid_dim_x() as usize * block_dim_x() as usize;
    while idx < total {
        let mut s = 0.0f32;
        for blk in 0..blocks {
            // SAFETY: blk * total + idx < blocks * W * N.
            s += unsafe { *part.add(blk * total + idx) };
        }
        let (p, f) = (idx / n, idx % n);
        // SAFETY: f * nw + p < N * W.
        unsafe { *dw.add(f * nw + p) = T::from_f32(s) };
        idx += step;
    }
}

// Row variants; the list must match `ROW_VARIANTS` in clifford.rs.
macro_rules! each_row_variant {
    ($m:ident, $($a:tt),*) => {
        $m!($($a),*, "v4", 4, "1", 1);
        $m!($($a),*, "v4", 4, "0", 0);
        $m!($($a),*, "v1", 1, "1", 1);
        $m!($($a),*, "v1", 1, "2", 2);
        $m!($($a),*, "v1", 1, "4", 4);
        $m!($($a),*, "v1", 1, "0", 0);
    };
}

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

/// `(x, y, w, out, b, n, normalize, team)`.
macro_rules! fwd_entry {
    ($A:ty, $d:literal, $T:ty, $dt:literal, $vn:literal, $l:literal, $pn:literal, $vpt:literal) => {
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
                // SAFETY: the host checked sizes, alignment, team and shared memory.
                unsafe {
                    let wsm = stage_weights::<$T, $A>(w, n);
                    let src = Forward { x, y, plane: b * n, n, wsm };
                    row_kernel::<$T, $A, Forward<$T>, $l, $vpt>(&src, out, b, n, normalize != 0, team)
                }
            }
        };
    };
}

/// `(d, out, b, n, normalize, team)`.
macro_rules! asm_entry {
    ($A:ty, $d:literal, $T:ty, $dt:literal, $vn:literal, $l:literal, $pn:literal, $vpt:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_fcgp_asm_d", $d, "_", $dt, "_", $vn, "_p", $pn))]
            unsafe extern "ptx-kernel" fn entry(
                d: *const f32,
                out: *mut $T,
                b: usize,
                n: usize,
                normalize: u32,
                team: u32,
            ) {
                let src = Assemble { d, plane: b * n, n };
                // SAFETY: the host checked sizes, alignment and team.
                unsafe { row_kernel::<$T, $A, Assemble, $l, $vpt>(&src, out, b, n, normalize != 0, team) }
            }
        };
    };
}

/// `(x, y, go, w, dx, dy, dw_part, b, n, normalize, team)`.
macro_rules! bwd_entry {
    ($A:ty, $d:literal, $T:ty, $dt:literal, $vn:literal, $l:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_bwd_d", $d, "_", $dt, "_", $vn))]
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
                // SAFETY: the host checked sizes, alignment, team and shared memory.
                unsafe { bwd_kernel::<$T, $A, $l>(x, y, go, w, dx, dy, dw_part, b, n, normalize != 0, team) }
            }
        };
    };
}

/// `(x, y, prod, b, n)`.
macro_rules! prod_entry {
    ($A:ty, $d:literal, $T:ty, $dt:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_fcgp_prod_d", $d, "_", $dt))]
            unsafe extern "ptx-kernel" fn entry(x: *const $T, y: *const $T, prod: *mut $T, b: usize, n: usize) {
                // SAFETY: the host checked sizes.
                unsafe { fcgp_products::<$T, $A, $T>(x, y, prod, b, n) }
            }
        };
    };
}

macro_rules! all_entries {
    ($A:ty, $d:literal, $T:ty, $dt:literal) => {
        each_row_variant!(fwd_entry, $A, $d, $T, $dt);
        each_row_variant!(asm_entry, $A, $d, $T, $dt);
        bwd_entry!($A, $d, $T, $dt, "v4", 4);
        bwd_entry!($A, $d, $T, $dt, "v1", 1);
        prod_entry!($A, $d, $T, $dt);
    };
}

each_dim_dtype!(all_entries);

/// `(part, dw, blocks, n, w)`.
macro_rules! reduce_entry {
    ($T:ty, $dt:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_dw_reduce_", $dt))]
            unsafe extern "ptx-kernel" fn entry(part: *const f32, dw: *mut $T, blocks: usize, n: usize, nw: usize) {
                // SAFETY: the host checked sizes.
                unsafe { dw_reduce::<$T>(part, dw, blocks, n, nw) }
            }
        };
    };
}

reduce_entry!(f32, "f32");
reduce_entry!(f16, "f16");
reduce_entry!(bf16, "bf16");
