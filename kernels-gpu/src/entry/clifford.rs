//! Entry points of the Clifford family besides the SGP forward (`clifford_fwd.rs`): the FCGP
//! products and assembly, the SGP backward and its weight-gradient reduction. The assembly
//! row kernel gives each batch row to a team of threads that covers all N features, so the
//! per-grade norm is a team reduction: the outputs wait in registers (`vpt` > 0) or are
//! recomputed from L2-resident inputs (`vpt` = 0). The backward recomputes the forward in two
//! passes (norm statistics, then gradients) and accumulates the weight gradient of the block's
//! rows in shared memory (or, `_g` entries for large N, in its global partial); a second small
//! kernel sums the per-block partials.
//!
//! Dynamic shared memory: `[0, 1024)` team-reduction scratch (32 warps x 8 floats), then
//! (backward, shared-memory entries) the weights as f32 `[W][N]` and their gradient `[W][N]`.
//!
//! Loops over components, weights and products are plain index loops with constant bounds:
//! iterator chains (`enumerate().take(n)`) were not unrolled, which put the arrays they index
//! in local memory.
#![allow(clippy::needless_range_loop)]

use super::clifford_io::{SCRATCH, each_dim_dtype, ld, ld_mv, row_stats, st_mv, team_sum, weights_of};
use crate::arch::nvptx::{
    block_dim_x, block_idx_x, dyn_smem_addr, grid_dim_x, ld_shared_f32, red_global_add_f32, red_shared_add_f32,
    st_shared_f32, sync_threads, thread_idx_x,
};
use crate::clifford::{
    Algebra, Cl2, Cl3, DW_SLICES, Gv, MAX_C, MAX_G, MAX_TOTAL, MAX_W, Mv, Wv, accumulate_grades, bwd_feature,
    each_product, gate, inv_rms, norm_backward_coefs, path_products, prod_at,
};
use crate::element::Element;
use half::{bf16, f16};

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

/// Where a row kernel's un-normalised output comes from.
trait Source<A: Algebra> {
    /// The output of `L` consecutive features from `f` of row `row`.
    ///
    /// # Safety
    /// `row < B`, `f + L <= N`, and the source's pointers cover the problem.
    unsafe fn eval<const L: usize>(&self, row: usize, f: usize) -> [Mv; L];
}

/// FCGP: the GEMM results `d` (f32, `C` planes of `B` rows of `ld`), which are the
/// un-normalised output.
struct Assemble {
    d: *const f32,
    plane: usize,
    ld: usize,
}

impl<A: Algebra> Source<A> for Assemble {
    #[inline(always)]
    unsafe fn eval<const L: usize>(&self, row: usize, f: usize) -> [Mv; L] {
        let base = row * self.ld + f;
        let mut o = [[0.0f32; MAX_C]; L];
        for c in 0..A::C {
            // SAFETY: component c of row `row` covers N features (caller).
            let v = unsafe { ld::<f32, L>(self.d.add(c * self.plane + base)) };
            for l in 0..L {
                o[l][c] = v[l];
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
                inv_all::<A>(unsafe { team_sum(ss, team, A::G) }, n)
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
                inv = inv_all::<A>(unsafe { team_sum(ss, team, A::G) }, n);
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
/// of squares and `go . o`; pass 2 writes dx, dy and adds the weight gradient to the block's
/// partial `dw_part[block]` (`[W][N]` f32). `SMEM`: the weights and the partial live in shared
/// memory during the kernel (the partial is copied out at the end); otherwise (N too large for
/// shared memory) the weights are read from global memory and the partial, zeroed first, takes
/// `red.global.add`s.
///
/// # Safety
/// Every tensor covers `C * B * N` elements, `w` covers `N * W`, `dw_part` covers
/// `gridDim.x * W * N` f32; with `SMEM` shared memory holds `SCRATCH + 2 W N` floats' bytes
/// (else `SCRATCH`); alignment, `team` and N % L as for [`row_kernel`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn bwd_kernel<T: Element, A: Algebra, const L: usize, const SMEM: bool>(
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
    let tid = thread_idx_x() as usize;
    let nthreads = block_dim_x() as usize;
    let part = block_idx_x() as usize * A::W * n;
    // SAFETY: all threads; room checked by the host.
    let wsm = if SMEM { unsafe { stage_weights::<T, A>(w, n) } } else { 0 };
    let dwsm = wsm + (A::W * n * 4) as u32;
    let mut idx = tid;
    while idx < A::W * n {
        if SMEM {
            // SAFETY: inside the gradient area.
            unsafe { st_shared_f32(dwsm + (idx * 4) as u32, 0.0) };
        } else {
            // SAFETY: inside this block's partial.
            unsafe { *dw_part.add(part + idx) = 0.0 };
        }
        idx += nthreads;
    }
    // SAFETY: all threads (the zeroed partial is visible to the block after the barrier).
    unsafe { sync_threads() };
    let wts = |f: usize| {
        if SMEM {
            // SAFETY: f < N (callers).
            unsafe { weights::<A>(wsm, n, f) }
        } else {
            // SAFETY: f < N (callers).
            unsafe { weights_of::<T, A>(w, f) }
        }
    };

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
            // SAFETY: every thread of the block is here; the pointers cover the row (caller).
            let (ss, dot) = unsafe { row_stats::<T, A, L>([x, y, go], &wts, row, active, n, plane, team) };
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
                let wf = wts(f);
                let mut dw = [0.0f32; MAX_W];
                let c = normalize.then_some((&coefs.0, &coefs.1));
                (dxs[l], dys[l]) = bwd_feature::<A>(&xs[l], &ys[l], &gs[l], &wf, c, &mut dw);
                for p in 0..A::W {
                    if SMEM {
                        // SAFETY: p * n + f < W * n floats of the gradient area.
                        unsafe { red_shared_add_f32(dwsm + ((p * n + f) * 4) as u32, dw[p]) };
                    } else {
                        // SAFETY: p * n + f < W * n floats of this block's partial.
                        unsafe { red_global_add_f32(dw_part.add(part + p * n + f), dw[p]) };
                    }
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
    if SMEM {
        // SAFETY: all threads.
        unsafe { sync_threads() };
        let mut idx = tid;
        while idx < A::W * n {
            // SAFETY: idx < W * n, inside this block's partial and the gradient area.
            unsafe { *dw_part.add(part + idx) = ld_shared_f32(dwsm + (idx * 4) as u32) };
            idx += nthreads;
        }
    }
}

/// FCGP products: for every (row, feature) the signed per-path products, in the grouped
/// layout of [`prod_at`] (component `c`'s rows from `cstart[c] * B * ld`), and zeros in each
/// row's padding from `n` to `ld`. The threads walk the padded index (row, feature < `ld`), so
/// a warp's stores of one product cover whole 32-byte sectors of its rows (which start 32-byte
/// aligned) whatever `n`; the padding lanes store zeros.
///
/// # Safety
/// `x`, `y` cover `C * B * N` elements, `prod` covers `total * B * ld`; `1 <= n <= ld`.
#[inline(always)]
unsafe fn fcgp_products<T: Element, A: Algebra, P: Element>(
    x: *const T,
    y: *const T,
    prod: *mut P,
    b: usize,
    n: usize,
    ld: usize,
) {
    let (plane, lplane) = (b * n, b * ld);
    let mut idx = block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize;
    let step = grid_dim_x() as usize * block_dim_x() as usize;
    while idx < lplane {
        let (row, f) = (idx / ld, idx % ld);
        let mut pr = [0.0f32; MAX_TOTAL];
        if f < n {
            let at = row * n + f;
            // SAFETY: at < B * N (row < B, f < N).
            let (xs, ys) = unsafe { (ld_mv::<T, A, 1>(x, plane, at), ld_mv::<T, A, 1>(y, plane, at)) };
            let (mut xg, mut yg) = (xs[0], ys[0]);
            gate::<A>(&mut xg);
            gate::<A>(&mut yg);
            pr = path_products::<A>(&xg, &yg);
        }
        each_product::<A>(|s, p, c| {
            let at = A::T.cstart[c] * lplane + prod_at::<A>(p, c, row, f, ld);
            // SAFETY: component c's rows end at (cstart[c] + np) * B * ld <= total * B * ld.
            unsafe { *prod.add(at) = P::from_f32(pr[s]) };
        });
        idx += step;
    }
}

/// `dw[f * W + p] = sum over blocks of part[blk][p][f]`, in a fixed order. A block of
/// `32 * DW_SLICES` threads takes 32 consecutive outputs (lanes: coalesced loads); warp `s`
/// sums partials `s, s + DW_SLICES, ...` (four interleaved sums, four loads in flight), and
/// warp 0 adds the slices in order. The old form (one thread per output over every partial)
/// ran 13-21 µs at 2D N 512-1024 on the H200 with only 20-40 blocks; 8 slices took it to
/// 7-11 µs (bench/results/clifroof-5bda29ff586e/run3).
///
/// # Safety
/// `part` covers `blocks * W * N` f32, `dw` covers `N * W`; `nw >= 1`, `n >= 1`; the block
/// has `32 * DW_SLICES` threads and `4 * 32 * DW_SLICES` bytes of dynamic shared memory.
#[inline(always)]
unsafe fn dw_reduce<T: Element>(part: *const f32, dw: *mut T, blocks: usize, n: usize, nw: usize) {
    let total = n * nw;
    let (lane, slice) = (thread_idx_x() as usize % 32, thread_idx_x() as usize / 32);
    let idx = block_idx_x() as usize * 32 + lane;
    let mut acc = [0.0f32; 4];
    if idx < total {
        let mut blk = slice;
        while blk + 3 * DW_SLICES < blocks {
            for u in 0..4 {
                // SAFETY: (blk + u * DW_SLICES) * total + idx < blocks * W * N.
                acc[u] += unsafe { *part.add((blk + u * DW_SLICES) * total + idx) };
            }
            blk += 4 * DW_SLICES;
        }
        while blk < blocks {
            // SAFETY: as above.
            acc[0] += unsafe { *part.add(blk * total + idx) };
            blk += DW_SLICES;
        }
    }
    let smem = dyn_smem_addr();
    // SAFETY: slot (slice, lane) of the 4 * 32 * DW_SLICES bytes (caller).
    unsafe { st_shared_f32(smem + ((slice * 32 + lane) * 4) as u32, (acc[0] + acc[1]) + (acc[2] + acc[3])) };
    // SAFETY: every thread of the block reaches it.
    unsafe { sync_threads() };
    if slice == 0 && idx < total {
        let mut s = 0.0f32;
        for sl in 0..DW_SLICES {
            // SAFETY: as above.
            s += unsafe { ld_shared_f32(smem + ((sl * 32 + lane) * 4) as u32) };
        }
        let (p, f) = (idx / n, idx % n);
        // SAFETY: f * nw + p < N * W.
        unsafe { *dw.add(f * nw + p) = T::from_f32(s) };
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

/// `(d, out, b, n, ld, normalize, team)`.
macro_rules! asm_entry {
    ($A:ty, $d:literal, $T:ty, $dt:literal, $vn:literal, $l:literal, $pn:literal, $vpt:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_fcgp_asm_d", $d, "_", $dt, "_", $vn, "_p", $pn))]
            unsafe extern "ptx-kernel" fn entry(
                d: *const f32,
                out: *mut $T,
                b: usize,
                n: usize,
                ld: usize,
                normalize: u32,
                team: u32,
            ) {
                let src = Assemble { d, plane: b * ld, ld };
                // SAFETY: the host checked sizes, alignment and team.
                unsafe { row_kernel::<$T, $A, Assemble, $l, $vpt>(&src, out, b, n, normalize != 0, team) }
            }
        };
    };
}

/// `(x, y, go, w, dx, dy, dw_part, b, n, normalize, team)`.
macro_rules! bwd_entry {
    ($A:ty, $d:literal, $T:ty, $dt:literal, $vn:literal, $l:literal, $sm:literal, $smem:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_bwd_d", $d, "_", $dt, "_", $vn, $sm))]
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
                unsafe { bwd_kernel::<$T, $A, $l, $smem>(x, y, go, w, dx, dy, dw_part, b, n, normalize != 0, team) }
            }
        };
    };
}

/// `(x, y, prod, b, n, ld)`.
macro_rules! prod_entry {
    ($A:ty, $d:literal, $T:ty, $dt:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_fcgp_prod_d", $d, "_", $dt))]
            unsafe extern "ptx-kernel" fn entry(
                x: *const $T,
                y: *const $T,
                prod: *mut $T,
                b: usize,
                n: usize,
                ld: usize,
            ) {
                // SAFETY: the host checked sizes and 1 <= n <= ld.
                unsafe { fcgp_products::<$T, $A, $T>(x, y, prod, b, n, ld) }
            }
        };
    };
}

macro_rules! all_entries {
    ($A:ty, $d:literal, $T:ty, $dt:literal) => {
        each_row_variant!(asm_entry, $A, $d, $T, $dt);
        bwd_entry!($A, $d, $T, $dt, "v4", 4, "", true);
        bwd_entry!($A, $d, $T, $dt, "v1", 1, "", true);
        bwd_entry!($A, $d, $T, $dt, "v4", 4, "_g", false);
        bwd_entry!($A, $d, $T, $dt, "v1", 1, "_g", false);
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
