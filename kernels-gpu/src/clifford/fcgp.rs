//! The FCGP's product layout and its backward's per-feature maths and CPU row loops (the PTX
//! entries in `entry/clifford_fcgp.rs` call the same per-feature functions).
//!
//! Layout of the products (the GEMMs' A operand): the paths are grouped by output grade, and
//! component `c` (of grade `j`) owns `B` rows of `np[j] * ld` products: row `b` holds, for each
//! path `q` of grade `j` in turn, the `N` features' signed products that reach `c`, then zeros
//! up to `ld` ([`fcgp_ld`]: `N` rounded up to 8, so every row of every operand starts 16-byte
//! aligned and the GEMMs take their fast paths for any N). The rows of grade `j`'s components,
//! stacked, are one `(cdim * B) x (np * ld)` matrix, so one GEMM per grade against the grade's
//! weight matrices stacked (`(np * ld) x N`, the grouped copy of `W`, zero past `N`) sums the
//! paths inside the GEMM and gives the un-normalised output directly (`C` planes of `B` rows of
//! `ld`). The backward runs the same two GEMMs per grade (`dProd = gD Wᵀ`, `dW = Prodᵀ gD`) on
//! the gradient through the norm, laid out as that output.
#![allow(clippy::needless_range_loop)]

use super::cpu::{blocked_sums, load};
use super::{Algebra, MAX_C, MAX_G, Mv, fmaf, gate_pdf, gate_vjp_pdf, norm_backward_coefs, through_norm};
use crate::element::Element;

/// Products per feature of the largest algebra (`Tables::total` of Cl(3,0)).
pub const MAX_TOTAL: usize = 44;

/// Calls `f(s, p, c)` for every product: `s = offset[p] + slot[c]` (its index in
/// [`super::path_products`]' array), path `p`, component `c` of the path's output grade.
#[inline(always)]
pub fn each_product<A: Algebra>(mut f: impl FnMut(usize, usize, usize)) {
    let t = A::T;
    for p in 0..A::W {
        for c in 0..A::C {
            if t.grade[c] == t.paths[p].1 {
                f(t.offset[p] + t.slot[c], p, c);
            }
        }
    }
}

/// Modes of the FCGP's weight copy (`ft_clifford_fcgp_wperm_*`): path order to the grouped
/// order (zero-padded to `ld x ld`), the same transposed (the forward GEMM reads it K-major),
/// and grouped back to path order.
pub const WPERM_GATHER: u32 = 0;
pub const WPERM_SCATTER: u32 = 1;
pub const WPERM_GATHER_T: u32 = 2;

/// The row length of the FCGP's workspaces per path: `n` rounded up to a multiple of 8.
#[inline(always)]
pub const fn fcgp_ld(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Where the product of path `p` for component `c`, feature `f` of batch row `row` lives among
/// component `c`'s product rows (which start at `cstart[c] * B * ld` of the whole layout).
#[inline(always)]
pub fn prod_at<A: Algebra>(p: usize, c: usize, row: usize, f: usize, ld: usize) -> usize {
    let t = A::T;
    (row * t.np[t.grade[c]] + t.qpos[p]) * ld + f
}

/// Adds one feature's squares of the raw output `o` and `go . o` to the per-grade sums.
#[inline(always)]
pub fn norm_stats<A: Algebra>(o: &Mv, go: &Mv, ss: &mut [f32; MAX_G], dot: &mut [f32; MAX_G]) {
    let t = A::T;
    for c in 0..A::C {
        let g = t.grade[c];
        ss[g] = fmaf(o[c], o[c], ss[g]);
        dot[g] = fmaf(go[c], o[c], dot[g]);
    }
}

/// Gradient of the signed per-path products of one feature (`path_products`) given the
/// gradient `dpr` of each product: returns the gradients of the gated `x` and `y`.
#[inline(always)]
pub fn path_products_vjp<A: Algebra>(xg: &Mv, yg: &Mv, dpr: &[f32; MAX_TOTAL]) -> (Mv, Mv) {
    let t = A::T;
    let mut dxg = [0.0f32; MAX_C];
    let mut dyg = [0.0f32; MAX_C];
    for_terms!(A::C * A::C, J => {
        let tm = t.terms[J];
        let s = t.offset[tm.p] + t.slot[tm.c];
        let d = if tm.neg { -dpr[s] } else { dpr[s] };
        dxg[tm.i] = fmaf(d, yg[tm.k], dxg[tm.i]);
        dyg[tm.k] = fmaf(d, xg[tm.i], dyg[tm.k]);
    });
    (dxg, dyg)
}

/// `(dx, dy)` of one feature from its inputs and the gradient of its per-path products.
#[inline(always)]
pub fn fcgp_input_grads<A: Algebra>(x: &Mv, y: &Mv, dpr: &[f32; MAX_TOTAL]) -> (Mv, Mv) {
    let (mut xg, mut yg) = (*x, *y);
    let (sx, px) = gate_pdf::<A>(&mut xg);
    let (sy, py) = gate_pdf::<A>(&mut yg);
    let (dxg, dyg) = path_products_vjp::<A>(&xg, &yg, dpr);
    (gate_vjp_pdf::<A>(x, sx, px, &dxg), gate_vjp_pdf::<A>(y, sy, py, &dyg))
}

/// CPU path of the FCGP norm backward for whole rows: from the forward GEMM results `d` (`C`
/// planes of f32 rows of `ld`, the un-normalised output) and `go` (rows of `n`), writes the
/// gradient of the GEMM results `gd` (`C` planes of `T`, rows of `ld`: the backward GEMMs'
/// operand).
pub fn fcgp_norm_bwd_rows<A: Algebra, T: Element>(
    d: &[&[f32]],
    go: &[&[T]],
    gd: &mut [&mut [T]],
    n: usize,
    ld: usize,
    normalize: bool,
) {
    let rows = go[0].len().checked_div(n).unwrap_or(0);
    let raw = |at: usize| {
        let mut o = [0.0f32; MAX_C];
        for c in 0..A::C {
            o[c] = d[c][at];
        }
        o
    };
    for r in 0..rows {
        let coefs = normalize.then(|| {
            let (ss, dot) = blocked_sums(n, |f, ss, dot| {
                norm_stats::<A>(&raw(r * ld + f), &load::<T, A>(go, r * n + f), ss, dot);
            });
            norm_backward_coefs::<A>(&ss, &dot, n)
        });
        for f in 0..n {
            let gv = load::<T, A>(go, r * n + f);
            let g = match &coefs {
                Some((inv, k)) => through_norm::<A>(&gv, &raw(r * ld + f), inv, k),
                None => gv,
            };
            for c in 0..A::C {
                gd[c][r * ld + f] = T::from_f32(g[c]);
            }
        }
    }
}

/// CPU path of the FCGP input gradients for whole rows: `dpr[c]` is the gradient of component
/// `c`'s product rows (f32, the layout of [`prod_at`]) for the rows of `x`, `y`, `dx`, `dy`.
pub fn fcgp_products_bwd_rows<A: Algebra, T: Element>(
    x: &[&[T]],
    y: &[&[T]],
    dpr: &[&[f32]],
    dx: &mut [&mut [T]],
    dy: &mut [&mut [T]],
    n: usize,
    ld: usize,
) {
    let rows = x[0].len().checked_div(n).unwrap_or(0);
    for r in 0..rows {
        for f in 0..n {
            let idx = r * n + f;
            let mut dv = [0.0f32; MAX_TOTAL];
            each_product::<A>(|s, p, c| dv[s] = dpr[c][prod_at::<A>(p, c, r, f, ld)]);
            let (a, b) = fcgp_input_grads::<A>(&load::<T, A>(x, idx), &load::<T, A>(y, idx), &dv);
            for c in 0..A::C {
                dx[c][idx] = T::from_f32(a[c]);
                dy[c][idx] = T::from_f32(b[c]);
            }
        }
    }
}
