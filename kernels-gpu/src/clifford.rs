//! Clifford-algebra layer ops (the Flash Clifford family) for Cl(2,0) and Cl(3,0): the algebra
//! tables (built at compile time from basis-blade bitmasks), the per-feature maths (GELU gate,
//! weighted geometric product, their gradients, the per-grade RMS norm), the compiled launch
//! variants (`variants.rs`), and the CPU row loops. The PTX entries (`entry/clifford.rs`) and the CPU backend
//! both call the per-feature functions here.
//!
//! Layout: multivectors are `(C, B, N)` (component, batch row, feature), weights `(N, W)`.
//! Every per-feature value is held in fixed `[f32; 8]` / `[f32; 20]` arrays whatever the
//! dimension: loops run to the algebra's own count, so the unused tail costs nothing once the
//! loops are unrolled. They are index loops on purpose: iterator chains were not unrolled on
//! the GPU and left the arrays in local memory.
#![allow(clippy::needless_range_loop)]

use crate::arch::{MulAdd, Portable, div_by_ge1, fmaf, rsqrt};
use crate::math::normal_cdf_pdf_with;

mod cpu;
mod fcgp_cpu;
mod tables;
mod variants;
pub use cpu::{LANES, blocked_at, bwd_rows, fwd_rows, padded, weight_index, weights_by_path};
pub use fcgp_cpu::{fcgp_assemble_rows, fcgp_products_rows};
pub use tables::{Algebra, CL2, CL3, Cl2, Cl3, Tables, Term, tables_of};
pub use variants::{
    BWD_CLUSTER_VPT, BWD_SPLIT, BWD_VARIANTS, CLUSTER_SLOT_BYTES, CliffordKernel, FWD_STREAM_VARIANTS, MAX_CLUSTER,
    PORTABLE_CLUSTER, ROW_VARIANTS, RowVariant, SPLIT_COEFS, bwd_cluster_entry_name, bwd_entry_name, fwd_variants,
    launch_bounds, row_entry_name, split_entry_names,
};

/// Warps of a `ft_clifford_dw_reduce_*` block, each summing one slice of the weight-gradient
/// partials (`entry/clifford.rs`).
pub const DW_SLICES: usize = 32;

/// Components of the largest algebra (Cl(3,0)).
pub const MAX_C: usize = 8;
/// Weights per feature of the largest algebra.
pub const MAX_W: usize = 20;
/// Grades of the largest algebra (0..=3).
pub const MAX_G: usize = 4;
/// Added to the mean square inside the square root of the norm.
pub const EPS: f32 = 1e-6;

/// A multivector of one feature, f32, component order of the algebra.
pub type Mv = [f32; MAX_C];
/// The weights of one feature, path order.
pub type Wv = [f32; MAX_W];
/// One value per grade.
pub type Gv = [f32; MAX_G];

/// Runs `$body` once per product term `$j < $limit`, with `$j` a constant: the term's
/// fields then fold to constants and the weight and multivector arrays stay in registers
/// (a `for` loop over 64 terms is not always unrolled, and its indexed arrays then go to
/// local memory).
macro_rules! for_terms {
    ($limit:expr, $j:ident => $body:block) => {
        for_terms!(@ $limit, $j, $body,
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63)
    };
    (@ $limit:expr, $j:ident, $body:block, $($n:literal)*) => {
        $({
            const $j: usize = $n;
            if $j < $limit $body
        })*
    };
}

// After `for_terms!`, which it uses.
mod fcgp;
pub use fcgp::{
    MAX_TOTAL, WPERM_GATHER, WPERM_GATHER_T, WPERM_SCATTER, each_product, fcgp_input_grads, fcgp_ld,
    fcgp_norm_bwd_rows, fcgp_products_bwd_rows, norm_stats, path_products_vjp, prod_at,
};

/// The gate `x * Phi(x0)` in place; returns `Phi(x0)`.
#[inline(always)]
pub fn gate<A: Algebra>(x: &mut Mv) -> f32 {
    gate_pdf::<A>(x).0
}

/// The gate `x * Phi(x0)` in place; returns `(Phi(x0), phi(x0))` (the density for the
/// gradient comes from the same exponential, [`normal_cdf_pdf_with`]).
#[inline(always)]
pub fn gate_pdf<A: Algebra>(x: &mut Mv) -> (f32, f32) {
    let (s, pdf) = normal_cdf_pdf_with(Portable, x[0]);
    apply_gate::<A>(x, s);
    (s, pdf)
}

/// The gate with its value `s = Phi(x0)` already known: `x * s` in place (the CPU loops take
/// the CDFs of a whole lane block first, in a loop of their own).
#[inline(always)]
pub fn apply_gate<A: Algebra>(x: &mut Mv, s: f32) {
    for c in 0..A::C {
        x[c] *= s;
    }
}

/// The weighted geometric product of one feature: `o = sum over paths of w_p <x_i y_k>_g`.
#[inline(always)]
pub fn product<A: Algebra>(xg: &Mv, yg: &Mv, w: &Wv) -> Mv {
    product_with::<A, Portable>(Portable, xg, yg, w)
}

/// [`product`] with its multiply-adds done by `f` (the host's AVX loops pass a fused one; the
/// GPU entries use [`Portable`], its `fma.rn`).
#[inline(always)]
pub fn product_with<A: Algebra, F: MulAdd>(f: F, xg: &Mv, yg: &Mv, w: &Wv) -> Mv {
    let mut o = [0.0f32; MAX_C];
    for_terms!(A::C * A::C, J => {
        let tm = A::T.terms[J];
        let wv = if tm.neg { -w[tm.p] } else { w[tm.p] };
        o[tm.c] = f.mul_add(wv, xg[tm.i] * yg[tm.k], o[tm.c]);
    });
    o
}

/// The weighted product of the gated inputs, `product(x Φ(x0), y Φ(y0), w)`, computed as
/// `Φ(x0) Φ(y0) product(x, y, w)` (the product is bilinear): C - 1 multiplies fewer than
/// gating both inputs first, and the same value up to rounding.
#[inline(always)]
pub fn gated_product<A: Algebra>(x: &Mv, y: &Mv, w: &Wv) -> Mv {
    let g = normal_cdf_pdf_with(Portable, x[0]).0 * normal_cdf_pdf_with(Portable, y[0]).0;
    let mut o = product::<A>(x, y, w);
    for c in 0..A::C {
        o[c] *= g;
    }
    o
}

/// Adds `o`'s squares, grade by grade, to `ss`; with `g` also `g . o` grade by grade to `dot`.
#[inline(always)]
pub fn accumulate_grades<A: Algebra>(o: &Mv, ss: &mut Gv) {
    let t = A::T;
    for c in 0..A::C {
        ss[t.grade[c]] = fmaf(o[c], o[c], ss[t.grade[c]]);
    }
}

/// `1 / r` with `r = sqrt(sumsq / n + EPS)` ([`rsqrt`] and [`div_by_ge1`]: a few
/// instructions on the GPU, not a correctly rounded division, square root and reciprocal).
#[inline(always)]
pub fn inv_rms(sumsq: f32, n: usize) -> f32 {
    rsqrt(div_by_ge1(sumsq, n as f32) + EPS)
}

/// Gradient of the product for one feature, given the gradient `g` of its output: adds to
/// `dxg`, `dyg` and `dw`.
#[inline(always)]
pub fn product_vjp<A: Algebra>(xg: &Mv, yg: &Mv, w: &Wv, g: &Mv, dxg: &mut Mv, dyg: &mut Mv, dw: &mut Wv) {
    product_vjp_with::<A, Portable>(Portable, xg, yg, w, g, dxg, dyg, dw)
}

/// [`product_vjp`] with its multiply-adds done by `f` (see [`product_with`]).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn product_vjp_with<A: Algebra, F: MulAdd>(
    f: F,
    xg: &Mv,
    yg: &Mv,
    w: &Wv,
    g: &Mv,
    dxg: &mut Mv,
    dyg: &mut Mv,
    dw: &mut Wv,
) {
    for_terms!(A::C * A::C, J => {
        let tm = A::T.terms[J];
        let gc = if tm.neg { -g[tm.c] } else { g[tm.c] };
        let wg = w[tm.p] * gc;
        dxg[tm.i] = f.mul_add(wg, yg[tm.k], dxg[tm.i]);
        dyg[tm.k] = f.mul_add(wg, xg[tm.i], dyg[tm.k]);
        dw[tm.p] = f.mul_add(gc, xg[tm.i] * yg[tm.k], dw[tm.p]);
    });
}

/// Gradient of the gate `x Phi(x0)` given the gradient `dg` of its output, `s = Phi(x0)` and
/// `pdf = phi(x0)`: `Phi dg_c` for every component, plus `phi(x0) sum_c x_c dg_c` on the scalar.
#[inline(always)]
pub fn gate_vjp_pdf<A: Algebra>(x: &Mv, s: f32, pdf: f32, dg: &Mv) -> Mv {
    let mut dot = 0.0f32;
    let mut dx = [0.0f32; MAX_C];
    for c in 0..A::C {
        dot = fmaf(x[c], dg[c], dot);
        dx[c] = s * dg[c];
    }
    dx[0] = fmaf(pdf, dot, dx[0]);
    dx
}

/// Per-row norm statistics for the backward: `inv[g] = 1 / r_g` and `k[g] = (sum g.o_raw) /
/// (N r_g^3)`, so that the gradient through the norm is `go inv - o_raw k`.
#[inline(always)]
pub fn norm_backward_coefs<A: Algebra>(ss: &Gv, dot: &Gv, n: usize) -> (Gv, Gv) {
    let mut inv = [0.0f32; MAX_G];
    let mut k = [0.0f32; MAX_G];
    for g in 0..A::G {
        inv[g] = inv_rms(ss[g], n);
        k[g] = dot[g] * inv[g] * inv[g] * inv[g] / n as f32;
    }
    (inv, k)
}

/// Gradient of the raw product output through the norm (identity without it).
#[inline(always)]
pub fn through_norm<A: Algebra>(go: &Mv, o_raw: &Mv, inv: &Gv, k: &Gv) -> Mv {
    let t = A::T;
    let mut g = [0.0f32; MAX_C];
    for c in 0..A::C {
        let gr = t.grade[c];
        g[c] = fmaf(go[c], inv[gr], -(o_raw[c] * k[gr]));
    }
    g
}

/// FCGP: the signed per-path products of one feature, `prod[offset[p] + slot[c]] += ±x_i y_k`.
#[inline(always)]
pub fn path_products<A: Algebra>(xg: &Mv, yg: &Mv) -> [f32; 44] {
    let t = A::T;
    let mut pr = [0.0f32; 44];
    for_terms!(A::C * A::C, J => {
        let tm = t.terms[J];
        let v = xg[tm.i] * yg[tm.k];
        let s = t.offset[tm.p] + t.slot[tm.c];
        pr[s] += if tm.neg { -v } else { v };
    });
    pr
}

/// One value per signed per-path product (`Tables::total` used; sized for `for_terms!`'s
/// constant indices).
type Slots = [f32; MAX_C * MAX_C];

/// The signed per-path products of one feature as multiply-adds by `f`:
/// `pr[offset[p] + slot[c]] = sum of ±x_i y_k` over the terms of path `p` into component `c`.
#[inline(always)]
fn path_sums<A: Algebra, F: MulAdd>(f: F, x: &Mv, y: &Mv) -> Slots {
    let t = A::T;
    let mut pr = [0.0f32; MAX_C * MAX_C];
    for_terms!(A::C * A::C, J => {
        let tm = t.terms[J];
        let s = t.offset[tm.p] + t.slot[tm.c];
        pr[s] = f.mul_add(if tm.neg { -x[tm.i] } else { x[tm.i] }, y[tm.k], pr[s]);
    });
    pr
}

/// The weighted output from the per-path products: `o[c] = sum over paths of w[p] pr[p, c]`.
#[inline(always)]
fn output_of_paths<A: Algebra, F: MulAdd>(f: F, w: &Wv, pr: &Slots) -> Mv {
    let mut o = [0.0f32; MAX_C];
    for_terms!(A::TOTAL, S => {
        let (p, c) = A::T.pc[S];
        o[c] = f.mul_add(w[p], pr[S], o[c]);
    });
    o
}

/// Per-row sums for the backward norm: squares of the raw output and `go . o_raw`, by grade
/// (the output through the per-path products of the raw inputs, scaled by both gates).
#[inline(always)]
pub fn bwd_stats_feature<A: Algebra>(x: &Mv, y: &Mv, go: &Mv, w: &Wv, ss: &mut Gv, dot: &mut Gv) {
    let g = normal_cdf_pdf_with(Portable, x[0]).0 * normal_cdf_pdf_with(Portable, y[0]).0;
    let mut o = output_of_paths::<A, Portable>(Portable, w, &path_sums::<A, Portable>(Portable, x, y));
    for c in 0..A::C {
        o[c] *= g;
    }
    norm_stats::<A>(&o, go, ss, dot);
}

/// The backward of one feature: returns `(dx, dy)` and adds to `dw`. `coefs` are the norm's
/// `(inv, k)` (None: no norm).
#[inline(always)]
pub fn bwd_feature<A: Algebra>(x: &Mv, y: &Mv, go: &Mv, w: &Wv, coefs: Option<(&Gv, &Gv)>, dw: &mut Wv) -> (Mv, Mv) {
    bwd_feature_with::<A, Portable>(Portable, x, y, go, w, coefs, dw)
}

/// [`bwd_feature`] with the product's and its gradient's multiply-adds done by `f`.
#[inline(always)]
pub fn bwd_feature_with<A: Algebra, F: MulAdd>(
    f: F,
    x: &Mv,
    y: &Mv,
    go: &Mv,
    w: &Wv,
    coefs: Option<(&Gv, &Gv)>,
    dw: &mut Wv,
) -> (Mv, Mv) {
    let (mut xg, mut yg) = (*x, *y);
    let (sx, px) = gate_pdf::<A>(&mut xg);
    let (sy, py) = gate_pdf::<A>(&mut yg);
    // Through the per-path products (14 in 2D, 44 in 3D), which the output, the weight
    // gradient and the inputs' gradient all read: a term costs three multiply-adds, not the
    // five of `product_with` plus `product_vjp_with`.
    let pr = path_sums::<A, F>(f, &xg, &yg);
    let g = match coefs {
        Some((inv, k)) => through_norm::<A>(go, &output_of_paths::<A, F>(f, w, &pr), inv, k),
        None => *go,
    };
    let t = A::T;
    let mut wg = [0.0f32; MAX_C * MAX_C];
    for_terms!(A::TOTAL, S => {
        let (p, c) = t.pc[S];
        dw[p] = f.mul_add(g[c], pr[S], dw[p]);
        wg[S] = w[p] * g[c];
    });
    let mut dxg = [0.0f32; MAX_C];
    let mut dyg = [0.0f32; MAX_C];
    for_terms!(A::C * A::C, J => {
        let tm = t.terms[J];
        let s = t.offset[tm.p] + t.slot[tm.c];
        let v = if tm.neg { -wg[s] } else { wg[s] };
        dxg[tm.i] = f.mul_add(v, yg[tm.k], dxg[tm.i]);
        dyg[tm.k] = f.mul_add(v, xg[tm.i], dyg[tm.k]);
    });
    (gate_vjp_pdf::<A>(x, sx, px, &dxg), gate_vjp_pdf::<A>(y, sy, py, &dyg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::DType;

    fn counts<A: Algebra>() -> (usize, usize, usize, usize) {
        (A::C, A::W, A::G, A::TOTAL)
    }

    /// The backward through the per-path products against the term-by-term gradient
    /// (`product_with`, `product_vjp_with`) on pseudo-random features, with and without the
    /// norm's coefficients.
    fn paths_backward_matches_terms<A: Algebra>() {
        let mut seed = 0x9e37_79b9u32;
        let mut r = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
        };
        for case in 0..200 {
            let (mut x, mut y, mut go, mut w) = ([0.0f32; MAX_C], [0.0f32; MAX_C], [0.0f32; MAX_C], [0.0f32; MAX_W]);
            for c in 0..A::C {
                (x[c], y[c], go[c]) = (r(), r(), r());
            }
            for q in 0..A::W {
                w[q] = r();
            }
            let inv = [r().abs() + 0.5, r().abs() + 0.5, r().abs() + 0.5, r().abs() + 0.5];
            let k = [r(), r(), r(), r()];
            let coefs = (case % 2 == 0).then_some((&inv, &k));
            let mut dw = [0.0f32; MAX_W];
            let (dx, dy) = bwd_feature::<A>(&x, &y, &go, &w, coefs, &mut dw);
            // The term-by-term form.
            let (mut xg, mut yg) = (x, y);
            let (sx, px) = gate_pdf::<A>(&mut xg);
            let (sy, py) = gate_pdf::<A>(&mut yg);
            let g = match coefs {
                Some((inv, k)) => through_norm::<A>(&go, &product::<A>(&xg, &yg, &w), inv, k),
                None => go,
            };
            let (mut dxg, mut dyg, mut dw_ref) = ([0.0f32; MAX_C], [0.0f32; MAX_C], [0.0f32; MAX_W]);
            product_vjp::<A>(&xg, &yg, &w, &g, &mut dxg, &mut dyg, &mut dw_ref);
            let (dx_ref, dy_ref) = (gate_vjp_pdf::<A>(&x, sx, px, &dxg), gate_vjp_pdf::<A>(&y, sy, py, &dyg));
            let close = |a: f32, b: f32| (a - b).abs() <= 1e-4 * (1.0 + b.abs());
            for c in 0..A::C {
                assert!(close(dx[c], dx_ref[c]) && close(dy[c], dy_ref[c]), "case {case} c {c}: {dx:?} {dx_ref:?}");
            }
            for q in 0..A::W {
                assert!(close(dw[q], dw_ref[q]), "case {case} path {q}: {} vs {}", dw[q], dw_ref[q]);
            }
            // The statistics pass agrees with the gated product too.
            let (mut ss, mut dot, mut ss_ref, mut dot_ref) =
                ([0.0f32; MAX_G], [0.0f32; MAX_G], [0.0f32; MAX_G], [0.0f32; MAX_G]);
            bwd_stats_feature::<A>(&x, &y, &go, &w, &mut ss, &mut dot);
            norm_stats::<A>(&product::<A>(&xg, &yg, &w), &go, &mut ss_ref, &mut dot_ref);
            for gr in 0..A::G {
                assert!(close(ss[gr], ss_ref[gr]) && close(dot[gr], dot_ref[gr]), "case {case} grade {gr}");
            }
        }
    }

    #[test]
    fn the_backward_through_path_products_matches_the_terms() {
        paths_backward_matches_terms::<Cl2>();
        paths_backward_matches_terms::<Cl3>();
    }

    #[test]
    fn tables_have_the_documented_sizes() {
        assert_eq!(counts::<Cl2>(), (CL2.c, CL2.w, CL2.g, CL2.total));
        assert_eq!(counts::<Cl3>(), (CL3.c, CL3.w, CL3.g, CL3.total));
        assert_eq!((CL2.c, CL2.w, CL2.g, CL2.total), (4, 10, 3, 14));
        assert_eq!((CL3.c, CL3.w, CL3.g, CL3.total), (8, 20, 4, 44));
        // Every path is used by at least one product.
        for t in [&CL2, &CL3] {
            for p in 0..t.w {
                assert!(t.terms[..t.c * t.c].iter().any(|tm| tm.p == p), "path {p} unused");
            }
        }
    }

    #[test]
    fn fcgp_grouping_covers_every_product_once() {
        assert_eq!(&CL2.np[..3], &[3, 4, 3]);
        assert_eq!(&CL3.np[..4], &[4, 6, 6, 4]);
        assert_eq!(&CL2.gorder[..10], &[0, 3, 7, 1, 4, 5, 8, 2, 6, 9]);
        for t in [&CL2, &CL3] {
            // Every path once in the grouped order, at its grade's position.
            let mut seen = [false; MAX_W];
            let mut start = 0;
            for j in 0..t.g {
                for q in 0..t.np[j] {
                    let p = t.gorder[start + q];
                    assert!(!seen[p]);
                    seen[p] = true;
                    assert_eq!((t.paths[p].1, t.qpos[p]), (j, q));
                }
                start += t.np[j];
            }
            assert_eq!(start, t.w);
            // The component row blocks tile the products without gaps.
            let mut at = 0;
            for c in 0..t.c {
                assert_eq!(t.cstart[c], at);
                at += t.np[t.grade[c]];
            }
            assert_eq!(at, t.total);
        }
    }

    #[test]
    fn e12_squares_to_minus_one() {
        let tm = CL2.terms[3 * 4 + 3];
        assert_eq!((tm.c, tm.neg), (0, true));
        let tm = CL3.terms[7 * 8 + 7];
        assert_eq!((tm.c, tm.neg), (0, true));
    }

    #[test]
    fn entry_names() {
        let v = RowVariant { vec: true, vpt: 2, stream_w: false };
        assert_eq!(
            row_entry_name(CliffordKernel::Forward, 3, DType::Bf16, v).as_str(),
            "ft_clifford_fwd_d3_bf16_v4_p2"
        );
    }
}
