//! The FCGP backward's per-feature maths and CPU row loops (the PTX entries in
//! `entry/clifford_fcgp.rs` call the same per-feature functions): the gradient through the
//! norm spread over the signed per-path products, and the products' gradient back to x and y
//! through the gate. The GEMMs between them (`dProd = gD Wᵀ`, `dW = Prodᵀ gD`) run on the host.
#![allow(clippy::needless_range_loop)]

use super::cpu::{blocked_sums, load};
use super::{Algebra, MAX_C, MAX_G, Mv, assemble, fmaf, gate, gate_vjp, norm_backward_coefs, through_norm};
use crate::element::Element;

/// Products per feature of the largest algebra (`Tables::total` of Cl(3,0)).
pub const MAX_TOTAL: usize = 44;

/// The assembled output is a plain sum of GEMM results, so the gradient of product row
/// `offset[p] + slot[c]` is the gradient `g[c]` of its component.
#[inline(always)]
pub fn expand_grad<A: Algebra>(g: &Mv) -> [f32; MAX_TOTAL] {
    let t = A::T;
    let mut e = [0.0f32; MAX_TOTAL];
    for p in 0..A::W {
        for c in 0..A::C {
            if t.grade[c] == t.paths[p].1 {
                e[t.offset[p] + t.slot[c]] = g[c];
            }
        }
    }
    e
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
    let sx = gate::<A>(&mut xg);
    let sy = gate::<A>(&mut yg);
    let (dxg, dyg) = path_products_vjp::<A>(&xg, &yg, dpr);
    (gate_vjp::<A>(x, sx, &dxg), gate_vjp::<A>(y, sy, &dyg))
}

/// CPU path of the FCGP norm backward for whole rows: from the forward GEMM results `d`
/// (`total` planes of f32) and `go`, writes the gradient of every product row to `gd`
/// (`total` planes of `T`, the GEMMs' operand).
pub fn fcgp_norm_bwd_rows<A: Algebra, T: Element>(
    d: &[&[f32]],
    go: &[&[T]],
    gd: &mut [&mut [T]],
    n: usize,
    normalize: bool,
) {
    let rows = d[0].len().checked_div(n).unwrap_or(0);
    for r in 0..rows {
        let coefs = normalize.then(|| {
            let (ss, dot) = blocked_sums(n, |f, ss, dot| {
                let idx = r * n + f;
                norm_stats::<A>(&assemble::<A>(|s| d[s][idx]), &load::<T, A>(go, idx), ss, dot);
            });
            norm_backward_coefs::<A>(&ss, &dot, n)
        });
        for f in 0..n {
            let idx = r * n + f;
            let gv = load::<T, A>(go, idx);
            let g = match &coefs {
                Some((inv, k)) => through_norm::<A>(&gv, &assemble::<A>(|s| d[s][idx]), inv, k),
                None => gv,
            };
            let e = expand_grad::<A>(&g);
            for s in 0..A::TOTAL {
                gd[s][idx] = T::from_f32(e[s]);
            }
        }
    }
}

/// CPU path of the FCGP input gradients for whole rows: `dpr` is the gradient of every product
/// row (`total` planes of f32).
pub fn fcgp_products_bwd_rows<A: Algebra, T: Element>(
    x: &[&[T]],
    y: &[&[T]],
    dpr: &[&[f32]],
    dx: &mut [&mut [T]],
    dy: &mut [&mut [T]],
) {
    for idx in 0..x[0].len() {
        let mut dv = [0.0f32; MAX_TOTAL];
        for s in 0..A::TOTAL {
            dv[s] = dpr[s][idx];
        }
        let (a, b) = fcgp_input_grads::<A>(&load::<T, A>(x, idx), &load::<T, A>(y, idx), &dv);
        for c in 0..A::C {
            dx[c][idx] = T::from_f32(a[c]);
            dy[c][idx] = T::from_f32(b[c]);
        }
    }
}
