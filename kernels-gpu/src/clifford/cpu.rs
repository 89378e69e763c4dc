//! The CPU backend's row loops of the Clifford ops (forward, backward; the FCGP's are in
//! `fcgp_cpu.rs`) over `(C, B, N)` component planes, in blocks of [`LANES`] features: each block's
//! components are widened into f32 lane arrays (16-bit data by the caller's [`Widen`], i.e. in
//! blocks, not per element), the per-feature maths of the parent module (the one shared with
//! the PTX entries) runs in a loop over the lanes with a fixed trip count that LLVM vectorises,
//! and the results are narrowed back a block at a time. Weights come transposed to `(W, N)`
//! f32 planes ([`weights_by_path`]), so a lane's weights are contiguous too.
#![allow(clippy::needless_range_loop)]

use super::{
    Algebra, Gv, MAX_C, MAX_G, MAX_W, Mv, Wv, accumulate_grades, apply_gate, gate_vjp_pdf, inv_rms,
    norm_backward_coefs, norm_stats, product_vjp_with, product_with, through_norm,
};
use crate::arch::{MulAdd, prefetch, store_streaming, streaming_fence};
use crate::element::{DType, Element};
use crate::elementwise::Widen;
use crate::math::normal_cdf_pdf_with;

/// Features per partial sum of the CPU row reductions (norm statistics): a sum per block of
/// features, then the sum of the blocks, so the f32 rounding error grows with
/// `SUM_BLOCK + N / SUM_BLOCK` terms instead of N. A sequential sum over N = 100,000 features
/// was off by 1.2e-4 of the largest gradient (tests/clifford_long.rs); the GPU's per-thread
/// sums and team tree are blocked the same way.
pub const SUM_BLOCK: usize = 256;

/// Features per lane block of the CPU loops (a multiple of 16 that divides [`SUM_BLOCK`]).
pub const LANES: usize = 64;

/// One f32 value per lane of a block.
pub(super) type Lanes = [f32; LANES];

/// How far ahead of the block being computed the row loops prefetch their inputs, in features.
/// Measured against no software prefetch (same layout, whole-process medians): 3-5% faster at
/// 3D 1024 x 1024 f32, within noise elsewhere.
const PREFETCH_AHEAD: usize = 2 * LANES;

/// Prefetches the cache lines of `count` component planes at `at..at + LANES` (those that exist).
#[inline(always)]
fn prefetch_block<T, P: AsRef<[T]>>(planes: &[P], count: usize, at: usize) {
    // Elements per 64-byte line (16 for f32, 32 for 16-bit data).
    let step = (64 / core::mem::size_of::<T>()).max(1);
    for c in 0..count {
        let p = planes[c].as_ref();
        let mut i = at;
        while i < (at + LANES).min(p.len()) {
            prefetch(&p[i]);
            i += step;
        }
    }
}

/// Lane blocks of the row reductions per [`SUM_BLOCK`].
pub(super) const BLOCKS_PER_SUM: usize = SUM_BLOCK / LANES;

/// Per-grade sums over the `n` features of one row, blocked by [`SUM_BLOCK`]: `add(f, ss, dot)`
/// adds feature `f`'s terms.
#[inline(always)]
pub fn blocked_sums(n: usize, mut add: impl FnMut(usize, &mut Gv, &mut Gv)) -> (Gv, Gv) {
    let (mut ss, mut dot) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
    let mut f0 = 0;
    while f0 < n {
        let (mut bs, mut bd) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
        for f in f0..(f0 + SUM_BLOCK).min(n) {
            add(f, &mut bs, &mut bd);
        }
        for g in 0..MAX_G {
            ss[g] += bs[g];
            dot[g] += bd[g];
        }
        f0 += SUM_BLOCK;
    }
    (ss, dot)
}

#[inline(always)]
pub(super) fn load<T: Element, A: Algebra>(p: &[&[T]], idx: usize) -> Mv {
    let mut v = [0.0f32; MAX_C];
    for c in 0..A::C {
        v[c] = p[c][idx].to_f32();
    }
    v
}

/// Features of `n` rounded up to whole lane blocks: the row length of [`weights_by_path`].
pub const fn padded(n: usize) -> usize {
    n.div_ceil(LANES) * LANES
}

/// Where plane `q`'s lanes of the lane block starting at feature `f0` begin in a blocked
/// buffer of `count` planes: each block's `count` lane arrays lie together, so a loop over
/// the blocks reads (or writes) one stream, not `count`. The hardware's stream prefetcher
/// follows a limited number of streams; with the weights (up to 20 planes), the raw outputs
/// and the saved products as separate planes beside the 16 input and 8 output planes, the 3D
/// forward walked about 50 at once.
#[inline(always)]
pub const fn blocked_at(count: usize, q: usize, f0: usize) -> usize {
    (f0 / LANES) * count * LANES + q * LANES
}

/// Index of weight `p` of feature `f` in [`weights_by_path`]'s layout.
#[inline(always)]
pub const fn weight_index<A: Algebra>(p: usize, f: usize) -> usize {
    blocked_at(A::W, p, f) + f % LANES
}

/// Transposes the `(n, W)` weights `w` into f32 lane blocks `wt` (`W * padded(n)` floats,
/// [`blocked_at`] with `W` planes; the padding 0).
pub fn weights_by_path<A: Algebra, T: Element>(w: &[T], n: usize, wt: &mut [f32]) {
    wt[..A::W * padded(n)].fill(0.0);
    for f in 0..n {
        for p in 0..A::W {
            wt[weight_index::<A>(p, f)] = w[f * A::W + p].to_f32();
        }
    }
}

/// Widens `count` components of `planes` at `base..base + m` into lane arrays (0 past `m`).
#[inline(always)]
pub(super) fn widen_block<T: Element, V: Widen<T>, const K: usize>(
    conv: V,
    planes: &[&[T]],
    count: usize,
    base: usize,
    m: usize,
    dst: &mut [Lanes; K],
) {
    for c in 0..count {
        load_lanes(conv, &planes[c][base..base + m], &mut dst[c]);
    }
}

/// `src` (at most [`LANES`] long) widened into `dst`, 0 past its end. A whole block of f32 or
/// bf16 is a fixed-size loop (a few vector moves, or shifts); only partial blocks and f16 go
/// through `conv`: a `memcpy` call of 256 bytes per component cost more than the maths.
#[inline(always)]
fn load_lanes<T: Element, V: Widen<T>>(conv: V, src: &[T], dst: &mut Lanes) {
    match <&[T; LANES]>::try_from(src) {
        Ok(s) if T::DTYPE != DType::F16 => {
            for l in 0..LANES {
                dst[l] = s[l].to_f32();
            }
        }
        _ => {
            let m = src.len();
            conv.widen(src, &mut dst[..m]);
            dst[m..].fill(0.0);
        }
    }
}

/// The first `dst.len()` lanes of `src` narrowed into `dst`: a whole block of f32 as a
/// fixed-size loop, everything else through `conv` (see [`load_lanes`]).
#[inline(always)]
pub(super) fn store_lanes<T: Element, V: Widen<T>>(conv: V, src: &Lanes, dst: &mut [T]) {
    let m = dst.len();
    match <&mut [T; LANES]>::try_from(&mut *dst) {
        Ok(d) if T::DTYPE == DType::F32 => {
            for l in 0..LANES {
                d[l] = T::from_f32(src[l]);
            }
        }
        _ => conv.narrow(&src[..m], dst),
    }
}

/// The weights of lane block `f0` (each path's plane, `LANES` long). A plain loop, not
/// `array::from_fn`, which was left as a call in the row loops.
#[inline(always)]
fn weight_block<A: Algebra>(wt: &[f32], f0: usize) -> [&Lanes; MAX_W] {
    static ZERO: Lanes = [0.0; LANES];
    let mut o = [&ZERO; MAX_W];
    for p in 0..A::W {
        let at = blocked_at(A::W, p, f0);
        o[p] = wt[at..at + LANES].try_into().unwrap_or(&ZERO);
    }
    o
}

#[inline(always)]
pub(super) fn lane<const K: usize>(v: &[Lanes; K], count: usize, l: usize) -> [f32; MAX_C] {
    let mut o = [0.0f32; MAX_C];
    for c in 0..count.min(MAX_C) {
        o[c] = v[c][l];
    }
    o
}

#[inline(always)]
fn lane_w<A: Algebra>(w: &[&Lanes; MAX_W], l: usize) -> Wv {
    let mut o = [0.0f32; MAX_W];
    for p in 0..A::W {
        o[p] = w[p][l];
    }
    o
}

/// The gates `Phi(x0)` and `Phi(y0)` of a lane block into `sx`, `sy`: a loop of its own with a
/// small body, so that the core overlaps the long dependency chains (polynomial, exponential,
/// division) of many lanes; inside the product loop, a body of several hundred instructions,
/// little more than one lane vector's chain fitted in the core's window at a time.
#[inline(always)]
fn gates_block<F: MulAdd>(f: F, x0: &Lanes, y0: &Lanes, sx: &mut Lanes, sy: &mut Lanes) {
    for l in 0..LANES {
        sx[l] = normal_cdf_pdf_with(f, x0[l]).0;
        sy[l] = normal_cdf_pdf_with(f, y0[l]).0;
    }
}

/// [`gates_block`] into the gates' places of the backward's saved lanes (`C`, `C + 1`).
#[inline(always)]
fn gates_saved<A: Algebra, F: MulAdd>(f: F, x0: &Lanes, y0: &Lanes, sv: &mut [Lanes; SAVED]) {
    let (lo, hi) = sv.split_at_mut(A::C + 1);
    gates_block(f, x0, y0, &mut lo[A::C], &mut hi[0]);
}

/// The densities `phi(x0)`, `phi(y0)` of a lane block (the gates' gradients), as [`gates_block`].
#[inline(always)]
fn pdfs_block<F: MulAdd>(f: F, x0: &Lanes, y0: &Lanes, px: &mut Lanes, py: &mut Lanes) {
    for l in 0..LANES {
        px[l] = normal_cdf_pdf_with(f, x0[l]).1;
        py[l] = normal_cdf_pdf_with(f, y0[l]).1;
    }
}

/// Width of the tree that [`lane_sum`] folds a lane block's sums with (one AVX-512 vector).
const FOLD: usize = 16;

/// The sum of one lane block's values as a tree: [`LANES`] / [`FOLD`] vectors added into one,
/// then halves added pairwise. A sum lane by lane was a chain of 64 dependent additions per
/// grade, which took as long as the maths of two blocks (N = 128 rows fold every 128 features).
#[inline(always)]
fn lane_sum(v: &Lanes) -> f32 {
    let mut t = [0.0f32; FOLD];
    for c in 0..LANES / FOLD {
        for l in 0..FOLD {
            t[l] += v[c * FOLD + l];
        }
    }
    let mut w = FOLD / 2;
    while w > 0 {
        for l in 0..w {
            t[l] += t[l + w];
        }
        w /= 2;
    }
    t[0]
}

/// Adds the per-lane sums `acc` (then cleared), each as a [`lane_sum`], into `sums`.
#[inline(always)]
pub(super) fn fold_lanes<A: Algebra>(acc: &mut [Lanes; MAX_G], sums: &mut Gv) {
    for g in 0..A::G {
        sums[g] += lane_sum(&acc[g]);
        acc[g] = [0.0; LANES];
    }
}

/// Writes row `r` of `out` from the raw outputs in `scratch` (`C * padded(n)`, [`blocked_at`]
/// with `C` planes), each divided by its grade's RMS when `ss` (the row's per-grade sums of
/// squares) is given, narrowed in blocks. With `stage` (at least `n` elements) each
/// component's row is narrowed there first and then written with streaming stores
/// ([`store_streaming`]: whole cache lines of the row, however the row's lanes blocks fall on
/// them); the caller fences.
#[inline(always)]
pub(super) fn write_row<A: Algebra, T: Element, V: Widen<T>>(
    conv: V,
    scratch: &[f32],
    out: &mut [&mut [T]],
    (r, n): (usize, usize),
    ss: Option<&Gv>,
    mut stage: Option<&mut [T]>,
) {
    let mut inv = [1.0f32; MAX_G];
    if let Some(ss) = ss {
        for g in 0..A::G {
            inv[g] = inv_rms(ss[g], n);
        }
    }
    let mut tmp = [0.0f32; LANES];
    for c in 0..A::C {
        let s = inv[A::T.grade[c]];
        let row = &mut out[c][r * n..(r + 1) * n];
        let dst: &mut [T] = match stage.as_deref_mut() {
            Some(st) => &mut st[..n],
            None => row,
        };
        for (b, o) in dst.chunks_mut(LANES).enumerate() {
            let at = blocked_at(A::C, c, b * LANES);
            let src: &Lanes = scratch[at..at + LANES].try_into().expect("scratch holds C * padded(n)");
            for l in 0..LANES {
                tmp[l] = src[l] * s;
            }
            store_lanes(conv, &tmp, o);
        }
        if let Some(st) = stage.as_deref() {
            store_streaming(&mut out[c][r * n..(r + 1) * n], &st[..n]);
        }
    }
}

/// CPU path of the forward for whole rows: `x[c]`, `y[c]`, `out[c]` hold component `c` of the
/// same rows (`rows * n` elements each), `wt` is [`weights_by_path`]. `scratch` holds `C * padded(n)`
/// floats. With `stage` (at least `n` elements) the outputs are written with streaming stores
/// (for outputs larger than the caches: no read for ownership), fenced before the function
/// returns.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn fwd_rows<A: Algebra, T: Element, V: Widen<T>, F: MulAdd>(
    f: F,
    conv: V,
    x: &[&[T]],
    y: &[&[T]],
    wt: &[f32],
    out: &mut [&mut [T]],
    n: usize,
    normalize: bool,
    scratch: &mut [f32],
    mut stage: Option<&mut [T]>,
) {
    let rows = x[0].len().checked_div(n).unwrap_or(0);
    let (mut xs, mut ys) = ([[0.0f32; LANES]; MAX_C], [[0.0f32; LANES]; MAX_C]);
    let mut acc = [[0.0f32; LANES]; MAX_G];
    let (mut sx, mut sy) = ([0.0f32; LANES], [0.0f32; LANES]);
    // Every lane of the algebra's components is written in each block: no clearing per block.
    let mut ob = [[0.0f32; LANES]; MAX_C];
    for r in 0..rows {
        let mut ss = [0.0f32; MAX_G];
        for (b, f0) in (0..n).step_by(LANES).enumerate() {
            let m = LANES.min(n - f0);
            prefetch_block(x, A::C, r * n + f0 + PREFETCH_AHEAD);
            prefetch_block(y, A::C, r * n + f0 + PREFETCH_AHEAD);
            widen_block(conv, x, A::C, r * n + f0, m, &mut xs);
            widen_block(conv, y, A::C, r * n + f0, m, &mut ys);
            let wb = weight_block::<A>(wt, f0);
            gates_block(f, &xs[0], &ys[0], &mut sx, &mut sy);
            for l in 0..LANES {
                let (mut xg, mut yg) = (lane(&xs, A::C, l), lane(&ys, A::C, l));
                apply_gate::<A>(&mut xg, sx[l]);
                apply_gate::<A>(&mut yg, sy[l]);
                let o = product_with::<A, F>(f, &xg, &yg, &lane_w::<A>(&wb, l));
                let mut sq = [0.0f32; MAX_G];
                accumulate_grades::<A>(&o, &mut sq);
                for g in 0..A::G {
                    acc[g][l] += sq[g];
                }
                for c in 0..A::C {
                    ob[c][l] = o[c];
                }
            }
            for c in 0..A::C {
                let at = blocked_at(A::C, c, f0);
                scratch[at..at + LANES].copy_from_slice(&ob[c]);
            }
            if (b + 1) % BLOCKS_PER_SUM == 0 || f0 + LANES >= n {
                fold_lanes::<A>(&mut acc, &mut ss);
            }
        }
        write_row::<A, T, V>(conv, scratch, out, (r, n), normalize.then_some(&ss), stage.as_deref_mut());
    }
    if stage.is_some() {
        streaming_fence();
    }
}

/// Lane arrays of the backward's statistics pass kept for its gradient pass: the raw product
/// (components `0..C`), then the gate values `Phi(x0)` and `Phi(y0)` at `C` and `C + 1`.
const SAVED: usize = MAX_C + 2;

/// The backward's lanes of one block, the steps of `bwd_feature_with` after its gates and
/// product: `(dx, dy)` into `da`, `db`, the weight gradient added to the lanes of `dw`. `sv`
/// holds the gates at `C`, `C + 1` and, with the norm (`coefs`: its `(inv, k)`), the raw
/// product at `0..C`, so nothing the statistics pass computed is computed twice; `pdf` holds
/// `phi(x0)`, `phi(y0)`. The gated inputs are `x Phi(x0)`, as `gate` makes them.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn bwd_block<A: Algebra, F: MulAdd>(
    f: F,
    [xs, ys, gs]: [&[Lanes; MAX_C]; 3],
    sv: &[Lanes; SAVED],
    [px, py]: [&Lanes; 2],
    wb: &[&Lanes; MAX_W],
    coefs: Option<(&Gv, &Gv)>,
    da: &mut [Lanes; MAX_C],
    db: &mut [Lanes; MAX_C],
    dw: &mut [Lanes; MAX_W],
) {
    for l in 0..LANES {
        let (xv, yv, gv) = (lane(xs, A::C, l), lane(ys, A::C, l), lane(gs, A::C, l));
        let (sx, sy) = (sv[A::C][l], sv[A::C + 1][l]);
        let (mut xg, mut yg) = (xv, yv);
        apply_gate::<A>(&mut xg, sx);
        apply_gate::<A>(&mut yg, sy);
        let g = match coefs {
            Some((inv, k)) => through_norm::<A>(&gv, &lane(sv, A::C, l), inv, k),
            None => gv,
        };
        let (mut dxg, mut dyg, mut dwf) = ([0.0f32; MAX_C], [0.0f32; MAX_C], [0.0f32; MAX_W]);
        product_vjp_with::<A, F>(f, &xg, &yg, &lane_w::<A>(wb, l), &g, &mut dxg, &mut dyg, &mut dwf);
        let (a, b) = (gate_vjp_pdf::<A>(&xv, sx, px[l], &dxg), gate_vjp_pdf::<A>(&yv, sy, py[l], &dyg));
        for c in 0..A::C {
            da[c][l] = a[c];
            db[c][l] = b[c];
        }
        for p in 0..A::W {
            dw[p][l] += dwf[p];
        }
    }
}

/// CPU path of the backward for whole rows (layout as [`fwd_rows`]): writes `dx`, `dy` and adds
/// this chunk's weight gradient to `dwt` (`W * padded(n)` f32, laid out as [`weights_by_path`]).
/// `saved` holds `(C + 2) padded(n)` floats (one row's raw products and gates, [`blocked_at`]
/// with `C + 2` planes).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn bwd_rows<A: Algebra, T: Element, V: Widen<T>, F: MulAdd>(
    f: F,
    conv: V,
    x: &[&[T]],
    y: &[&[T]],
    go: &[&[T]],
    wt: &[f32],
    dx: &mut [&mut [T]],
    dy: &mut [&mut [T]],
    dwt: &mut [f32],
    n: usize,
    normalize: bool,
    saved: &mut [f32],
) {
    let rows = x[0].len().checked_div(n).unwrap_or(0);
    let mut sv = [[0.0f32; LANES]; SAVED];
    let (mut xs, mut ys, mut gs) = ([[0.0f32; LANES]; MAX_C], [[0.0f32; LANES]; MAX_C], [[0.0f32; LANES]; MAX_C]);
    let (mut acc_s, mut acc_d) = ([[0.0f32; LANES]; MAX_G], [[0.0f32; LANES]; MAX_G]);
    // Overwritten (da, db) or loaded (dw) in full for the algebra's components each block.
    let (mut da, mut db) = ([[0.0f32; LANES]; MAX_C], [[0.0f32; LANES]; MAX_C]);
    let mut dw = [[0.0f32; LANES]; MAX_W];
    let (mut px, mut py) = ([0.0f32; LANES], [0.0f32; LANES]);
    for r in 0..rows {
        let coefs = normalize.then(|| {
            let (mut ss, mut dot) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
            for (b, f0) in (0..n).step_by(LANES).enumerate() {
                let m = LANES.min(n - f0);
                for p in [x, y, go] {
                    prefetch_block(p, A::C, r * n + f0 + PREFETCH_AHEAD);
                }
                widen_block(conv, x, A::C, r * n + f0, m, &mut xs);
                widen_block(conv, y, A::C, r * n + f0, m, &mut ys);
                widen_block(conv, go, A::C, r * n + f0, m, &mut gs);
                let wb = weight_block::<A>(wt, f0);
                gates_saved::<A, F>(f, &xs[0], &ys[0], &mut sv);
                for l in 0..LANES {
                    let (mut xg, mut yg) = (lane(&xs, A::C, l), lane(&ys, A::C, l));
                    apply_gate::<A>(&mut xg, sv[A::C][l]);
                    apply_gate::<A>(&mut yg, sv[A::C + 1][l]);
                    let o = product_with::<A, F>(f, &xg, &yg, &lane_w::<A>(&wb, l));
                    let (mut s, mut d) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
                    norm_stats::<A>(&o, &lane(&gs, A::C, l), &mut s, &mut d);
                    for g in 0..A::G {
                        acc_s[g][l] += s[g];
                        acc_d[g][l] += d[g];
                    }
                    for c in 0..A::C {
                        sv[c][l] = o[c];
                    }
                }
                for (q, v) in sv.iter().enumerate().take(A::C + 2) {
                    let at = blocked_at(A::C + 2, q, f0);
                    saved[at..at + LANES].copy_from_slice(v);
                }
                if (b + 1) % BLOCKS_PER_SUM == 0 || f0 + LANES >= n {
                    fold_lanes::<A>(&mut acc_s, &mut ss);
                    fold_lanes::<A>(&mut acc_d, &mut dot);
                }
            }
            norm_backward_coefs::<A>(&ss, &dot, n)
        });
        for f0 in (0..n).step_by(LANES) {
            let m = LANES.min(n - f0);
            if coefs.is_none() {
                for p in [x, y, go] {
                    prefetch_block(p, A::C, r * n + f0 + PREFETCH_AHEAD);
                }
            }
            prefetch_block(dx, A::C, r * n + f0 + PREFETCH_AHEAD);
            prefetch_block(dy, A::C, r * n + f0 + PREFETCH_AHEAD);
            widen_block(conv, x, A::C, r * n + f0, m, &mut xs);
            widen_block(conv, y, A::C, r * n + f0, m, &mut ys);
            widen_block(conv, go, A::C, r * n + f0, m, &mut gs);
            let wb = weight_block::<A>(wt, f0);
            for p in 0..A::W {
                let at = blocked_at(A::W, p, f0);
                dw[p].copy_from_slice(&dwt[at..at + LANES]);
            }
            match &coefs {
                Some(_) => {
                    for (q, v) in sv.iter_mut().enumerate().take(A::C + 2) {
                        let at = blocked_at(A::C + 2, q, f0);
                        v.copy_from_slice(&saved[at..at + LANES]);
                    }
                }
                None => {
                    gates_saved::<A, F>(f, &xs[0], &ys[0], &mut sv);
                }
            }
            pdfs_block(f, &xs[0], &ys[0], &mut px, &mut py);
            let coefs = coefs.as_ref().map(|(inv, k)| (inv, k));
            bwd_block::<A, F>(f, [&xs, &ys, &gs], &sv, [&px, &py], &wb, coefs, &mut da, &mut db, &mut dw);
            for p in 0..A::W {
                let at = blocked_at(A::W, p, f0);
                dwt[at..at + LANES].copy_from_slice(&dw[p]);
            }
            for c in 0..A::C {
                let at = r * n + f0;
                store_lanes(conv, &da[c], &mut dx[c][at..at + m]);
                store_lanes(conv, &db[c], &mut dy[c][at..at + m]);
            }
        }
    }
}

#[cfg(test)]
#[path = "cpu_tests.rs"]
mod tests;
