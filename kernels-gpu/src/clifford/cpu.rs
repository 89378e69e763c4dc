//! The CPU backend's row loops of the Clifford ops (forward, backward, FCGP products and
//! assembly) over `(C, B, N)` component planes, built on the per-feature maths of the parent
//! module (shared with the PTX entries).
#![allow(clippy::needless_range_loop)]

use super::{
    Algebra, Gv, MAX_C, MAX_G, MAX_W, Mv, Wv, accumulate_grades, assemble, bwd_feature, bwd_stats_feature, gate,
    inv_rms, norm_backward_coefs, path_products, product,
};
use crate::element::Element;

/// Features per partial sum of the CPU row reductions (norm statistics): a sum per block of
/// features, then the sum of the blocks, so the f32 rounding error grows with
/// `SUM_BLOCK + N / SUM_BLOCK` terms instead of N. A sequential sum over N = 100,000 features
/// was off by 1.2e-4 of the largest gradient (tests/clifford_long.rs); the GPU's per-thread
/// sums and team tree are blocked the same way.
pub const SUM_BLOCK: usize = 256;

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

/// Writes row `r` of `out` from the raw outputs in `scratch` (`C * n`), each divided by its
/// grade's RMS when `ss` (the row's per-grade sums of squares) is given.
#[inline(always)]
fn write_row<A: Algebra, T: Element>(scratch: &[f32], out: &mut [&mut [T]], r: usize, n: usize, ss: Option<&Gv>) {
    let mut inv = [1.0f32; MAX_G];
    if let Some(ss) = ss {
        for g in 0..A::G {
            inv[g] = inv_rms(ss[g], n);
        }
    }
    for c in 0..A::C {
        let s = inv[A::T.grade[c]];
        for f in 0..n {
            out[c][r * n + f] = T::from_f32(scratch[c * n + f] * s);
        }
    }
}

#[inline(always)]
pub(super) fn load<T: Element, A: Algebra>(p: &[&[T]], idx: usize) -> Mv {
    let mut v = [0.0f32; MAX_C];
    for c in 0..A::C {
        v[c] = p[c][idx].to_f32();
    }
    v
}

#[inline(always)]
fn load_w<T: Element, A: Algebra>(w: &[T], f: usize) -> Wv {
    let mut v = [0.0f32; MAX_W];
    for p in 0..A::W {
        v[p] = w[f * A::W + p].to_f32();
    }
    v
}

/// CPU path of the forward for whole rows: `x[c]`, `y[c]`, `out[c]` hold component `c` of the
/// same rows (`rows * n` elements each), `w` is `(n, W)`. `scratch` holds `C * n` floats.
pub fn fwd_rows<A: Algebra, T: Element>(
    x: &[&[T]],
    y: &[&[T]],
    w: &[T],
    out: &mut [&mut [T]],
    n: usize,
    normalize: bool,
    scratch: &mut [f32],
) {
    let rows = x[0].len().checked_div(n).unwrap_or(0);
    for r in 0..rows {
        let (ss, _) = blocked_sums(n, |f, ss, _| {
            let idx = r * n + f;
            let (mut xg, mut yg) = (load::<T, A>(x, idx), load::<T, A>(y, idx));
            gate::<A>(&mut xg);
            gate::<A>(&mut yg);
            let o = product::<A>(&xg, &yg, &load_w::<T, A>(w, f));
            accumulate_grades::<A>(&o, ss);
            for c in 0..A::C {
                scratch[c * n + f] = o[c];
            }
        });
        write_row::<A, T>(scratch, out, r, n, normalize.then_some(&ss));
    }
}

/// CPU path of the backward for whole rows (layout as [`fwd_rows`]): writes `dx`, `dy` and adds
/// this chunk's weight gradient to `dw` (`(n, W)`, f32).
#[allow(clippy::too_many_arguments)]
pub fn bwd_rows<A: Algebra, T: Element>(
    x: &[&[T]],
    y: &[&[T]],
    go: &[&[T]],
    w: &[T],
    dx: &mut [&mut [T]],
    dy: &mut [&mut [T]],
    dw: &mut [f32],
    n: usize,
    normalize: bool,
) {
    let rows = x[0].len().checked_div(n).unwrap_or(0);
    for r in 0..rows {
        let coefs = normalize.then(|| {
            let (ss, dot) = blocked_sums(n, |f, ss, dot| {
                let idx = r * n + f;
                let (xv, yv, gv) = (load::<T, A>(x, idx), load::<T, A>(y, idx), load::<T, A>(go, idx));
                bwd_stats_feature::<A>(&xv, &yv, &gv, &load_w::<T, A>(w, f), ss, dot);
            });
            norm_backward_coefs::<A>(&ss, &dot, n)
        });
        for f in 0..n {
            let idx = r * n + f;
            let (xv, yv, gv) = (load::<T, A>(x, idx), load::<T, A>(y, idx), load::<T, A>(go, idx));
            let mut dwf = [0.0f32; MAX_W];
            let (a, b) =
                bwd_feature::<A>(&xv, &yv, &gv, &load_w::<T, A>(w, f), coefs.as_ref().map(|(i, k)| (i, k)), &mut dwf);
            for c in 0..A::C {
                dx[c][idx] = T::from_f32(a[c]);
                dy[c][idx] = T::from_f32(b[c]);
            }
            for p in 0..A::W {
                dw[f * A::W + p] += dwf[p];
            }
        }
    }
}

/// CPU path of the FCGP products for whole rows: `prod[s]` is the rows of product `s`
/// (`offset[p] + slot[c]`), same row layout as `x`.
pub fn fcgp_products_rows<A: Algebra, T: Element, P: Element>(x: &[&[T]], y: &[&[T]], prod: &mut [&mut [P]]) {
    let len = x[0].len();
    for idx in 0..len {
        let (mut xg, mut yg) = (load::<T, A>(x, idx), load::<T, A>(y, idx));
        gate::<A>(&mut xg);
        gate::<A>(&mut yg);
        let pr = path_products::<A>(&xg, &yg);
        for s in 0..A::TOTAL {
            prod[s][idx] = P::from_f32(pr[s]);
        }
    }
}

/// CPU path of the FCGP assembly and norm for whole rows: `d[s]` are the GEMM results' rows of
/// product `s` (f32).
pub fn fcgp_assemble_rows<A: Algebra, T: Element>(
    d: &[&[f32]],
    out: &mut [&mut [T]],
    n: usize,
    normalize: bool,
    scratch: &mut [f32],
) {
    let rows = d[0].len().checked_div(n).unwrap_or(0);
    for r in 0..rows {
        let (ss, _) = blocked_sums(n, |f, ss, _| {
            let o = assemble::<A>(|s| d[s][r * n + f]);
            accumulate_grades::<A>(&o, ss);
            for c in 0..A::C {
                scratch[c * n + f] = o[c];
            }
        });
        write_row::<A, T>(scratch, out, r, n, normalize.then_some(&ss));
    }
}
