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
mod variants;
pub use cpu::{LANES, blocked_at, bwd_rows, fwd_rows, padded, weight_index, weights_by_path};
pub use fcgp_cpu::{fcgp_assemble_rows, fcgp_products_rows};
pub use variants::{
    BWD_VARIANTS, CliffordKernel, FWD_STREAM_VARIANTS, ROW_VARIANTS, RowVariant, bwd_entry_name, fwd_variants,
    launch_bounds, row_entry_name,
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

/// One non-zero product of basis blades: `o[c] += (neg ? -1 : 1) w[p] x[i] y[k]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Term {
    pub i: usize,
    pub k: usize,
    pub c: usize,
    pub neg: bool,
    pub p: usize,
}

/// Everything the kernels need to know about one algebra.
#[derive(Debug)]
pub struct Tables {
    pub dim: u32,
    /// Components (2^dim).
    pub c: usize,
    /// Weights per feature (= paths).
    pub w: usize,
    /// Grades (dim + 1).
    pub g: usize,
    /// Basis blade of each component, as a bitmask of basis vectors (e13 = 0b101).
    pub blades: [u8; MAX_C],
    pub grade: [usize; MAX_C],
    /// Position of each component among the components of its grade.
    pub slot: [usize; MAX_C],
    /// `(x grade, output grade, y grade)` of each weight.
    pub paths: [(usize, usize, usize); MAX_W],
    /// Components of each path's output grade.
    pub cdim: [usize; MAX_W],
    /// Components of all earlier paths (FCGP: where a path's products start).
    pub offset: [usize; MAX_W],
    /// Sum of `cdim` (the signed per-path products of FCGP: 14 in 2D, 44 in 3D).
    pub total: usize,
    /// FCGP: paths per output grade.
    pub np: [usize; MAX_G],
    /// FCGP: position of each path among the paths of its output grade.
    pub qpos: [usize; MAX_W],
    /// FCGP: the paths grouped by output grade (grade 0's first, path order within a grade):
    /// the order of the weight matrices in the grouped copy the GEMMs read.
    pub gorder: [usize; MAX_W],
    /// FCGP: where each component's product rows start, in planes of `B * N` elements (the
    /// components before it, each counted `np` of its grade times).
    pub cstart: [usize; MAX_C],
    /// The `c * c` products, in (i, k) order.
    pub terms: [Term; MAX_C * MAX_C],
}

const fn popcount(m: u8) -> usize {
    m.count_ones() as usize
}

/// Sign of the product of basis blades `a b` in Cl(p,0): the parity of the swaps that sort
/// the concatenated vector lists (each vector of `a` passes the smaller vectors of `b`); equal
/// vectors then square to +1.
const fn blade_sign(a: u8, b: u8) -> bool {
    let mut swaps = 0;
    let mut x = a >> 1;
    while x != 0 {
        swaps += popcount(x & b);
        x >>= 1;
    }
    swaps % 2 == 1
}

const fn tables(dim: u32, blades: [u8; MAX_C], paths: [(usize, usize, usize); MAX_W]) -> Tables {
    let c = 1usize << dim;
    let g = dim as usize + 1;
    let w = match dim {
        2 => 10,
        _ => 20,
    };
    let mut grade = [0usize; MAX_C];
    let mut slot = [0usize; MAX_C];
    let mut per_grade = [0usize; MAX_G];
    let mut j = 0;
    while j < c {
        grade[j] = popcount(blades[j]);
        slot[j] = per_grade[grade[j]];
        per_grade[grade[j]] += 1;
        j += 1;
    }
    let mut cdim = [0usize; MAX_W];
    let mut offset = [0usize; MAX_W];
    let mut total = 0;
    let mut p = 0;
    while p < w {
        cdim[p] = per_grade[paths[p].1];
        offset[p] = total;
        total += cdim[p];
        p += 1;
    }
    let zero = Term { i: 0, k: 0, c: 0, neg: false, p: 0 };
    let mut terms = [zero; MAX_C * MAX_C];
    let mut t = 0;
    let mut i = 0;
    while i < c {
        let mut k = 0;
        while k < c {
            let m = blades[i] ^ blades[k];
            let mut oc = 0;
            while blades[oc] != m {
                oc += 1;
            }
            let key = (grade[i], grade[oc], grade[k]);
            let mut p = 0;
            while !(paths[p].0 == key.0 && paths[p].1 == key.1 && paths[p].2 == key.2) {
                p += 1;
            }
            terms[t] = Term { i, k, c: oc, neg: blade_sign(blades[i], blades[k]), p };
            t += 1;
            k += 1;
        }
        i += 1;
    }
    let (np, qpos, gorder, cstart) = grouped(c, g, w, &grade, &paths);
    Tables { dim, c, w, g, blades, grade, slot, paths, cdim, offset, total, np, qpos, gorder, cstart, terms }
}

/// The FCGP's grouping of paths by output grade: `(np, qpos, gorder, cstart)` of [`Tables`].
#[allow(clippy::type_complexity)]
const fn grouped(
    c: usize,
    g: usize,
    w: usize,
    grade: &[usize; MAX_C],
    paths: &[(usize, usize, usize); MAX_W],
) -> ([usize; MAX_G], [usize; MAX_W], [usize; MAX_W], [usize; MAX_C]) {
    let mut np = [0usize; MAX_G];
    let mut qpos = [0usize; MAX_W];
    let mut gorder = [0usize; MAX_W];
    let mut at = 0;
    let mut j = 0;
    while j < g {
        let mut p = 0;
        while p < w {
            if paths[p].1 == j {
                qpos[p] = np[j];
                np[j] += 1;
                gorder[at] = p;
                at += 1;
            }
            p += 1;
        }
        j += 1;
    }
    let mut cstart = [0usize; MAX_C];
    let mut k = 1;
    while k < c {
        cstart[k] = cstart[k - 1] + np[grade[k - 1]];
        k += 1;
    }
    (np, qpos, gorder, cstart)
}

const PATHS_2D: [(usize, usize, usize); MAX_W] = {
    let mut p = [(0, 0, 0); MAX_W];
    let list =
        [(0, 0, 0), (0, 1, 1), (0, 2, 2), (1, 0, 1), (1, 1, 0), (1, 1, 2), (1, 2, 1), (2, 0, 2), (2, 1, 1), (2, 2, 0)];
    let mut j = 0;
    while j < list.len() {
        p[j] = list[j];
        j += 1;
    }
    p
};

/// Cl(2,0): `[1, e1, e2, e12]`.
pub static CL2: Tables = CL2_TABLES;
/// Cl(3,0): `[1, e1, e2, e3, e12, e13, e23, e123]`.
pub static CL3: Tables = CL3_TABLES;

// The tables as constants: `Algebra::T` points at these, so every crate that compiles the
// maths (the host's monomorphised CPU loops included, not only this crate's PTX entries) sees
// their values and folds the term loops to constants; a reference to the `static` was opaque
// outside this crate, and the CPU loops then indexed arrays in memory and did not vectorise.
const CL2_TABLES: Tables = tables(2, [0b00, 0b01, 0b10, 0b11, 0, 0, 0, 0], PATHS_2D);
const CL3_TABLES: Tables = tables(
    3,
    [0b000, 0b001, 0b010, 0b100, 0b011, 0b101, 0b110, 0b111],
    [
        (0, 0, 0),
        (0, 1, 1),
        (0, 2, 2),
        (0, 3, 3),
        (1, 0, 1),
        (1, 1, 0),
        (1, 1, 2),
        (1, 2, 1),
        (1, 2, 3),
        (1, 3, 2),
        (2, 0, 2),
        (2, 1, 1),
        (2, 1, 3),
        (2, 2, 0),
        (2, 2, 2),
        (2, 3, 1),
        (3, 0, 3),
        (3, 1, 2),
        (3, 2, 1),
        (3, 3, 0),
    ],
);

/// An algebra as a type, so that kernels are compiled once per algebra with its tables folded.
/// The counts are associated constants (not read from the tables) so that every loop over
/// components, weights or grades has a trip count known before LLVM decides what to unroll;
/// the arrays then stay in registers.
pub trait Algebra: Copy + Send + Sync + 'static {
    const T: &'static Tables;
    const C: usize;
    const W: usize;
    const G: usize;
    const TOTAL: usize;
}

#[derive(Clone, Copy, Debug)]
pub struct Cl2;
impl Algebra for Cl2 {
    const T: &'static Tables = &CL2_TABLES;
    const C: usize = 4;
    const W: usize = 10;
    const G: usize = 3;
    const TOTAL: usize = 14;
}

#[derive(Clone, Copy, Debug)]
pub struct Cl3;
impl Algebra for Cl3 {
    const T: &'static Tables = &CL3_TABLES;
    const C: usize = 8;
    const W: usize = 20;
    const G: usize = 4;
    const TOTAL: usize = 44;
}

/// The tables of Cl(`dim`,0), for `dim` 2 or 3.
pub fn tables_of(dim: u32) -> Option<&'static Tables> {
    match dim {
        2 => Some(&CL2),
        3 => Some(&CL3),
        _ => None,
    }
}

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

/// Per-row sums for the backward norm: squares of the raw output and `go . o_raw`, by grade.
#[inline(always)]
pub fn bwd_stats_feature<A: Algebra>(x: &Mv, y: &Mv, go: &Mv, w: &Wv, ss: &mut Gv, dot: &mut Gv) {
    norm_stats::<A>(&gated_product::<A>(x, y, w), go, ss, dot);
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
    let g = match coefs {
        Some((inv, k)) => through_norm::<A>(go, &product_with::<A, F>(f, &xg, &yg, w), inv, k),
        None => *go,
    };
    let mut dxg = [0.0f32; MAX_C];
    let mut dyg = [0.0f32; MAX_C];
    product_vjp_with::<A, F>(f, &xg, &yg, w, &g, &mut dxg, &mut dyg, dw);
    (gate_vjp_pdf::<A>(x, sx, px, &dxg), gate_vjp_pdf::<A>(y, sy, py, &dyg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::DType;

    fn counts<A: Algebra>() -> (usize, usize, usize, usize) {
        (A::C, A::W, A::G, A::TOTAL)
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
