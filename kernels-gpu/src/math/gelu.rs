//! The GELU forms (erf and tanh; accurate for f32 results, cheaper ones for f16/bf16 results):
//! straight-line f32 code with selects, one source for the PTX and the CPU backend, where LLVM
//! turns a loop over it into SIMD over the elements.
//!
//! No intermediate is ever subnormal. Each form clamps `|x|` to a cut-off (12.9 for the erf
//! form, 9.9 for the tanh form) beyond which its result is `x` (above) or below about 1e-36 in
//! magnitude (below, returned as `-0.0`); up to the cut-off every factor, the exponential
//! included, is a normal float. On x86 an instruction that reads or produces a subnormal takes
//! a microcode assist of about 100 cycles, and a vector instruction takes it if any one lane
//! does: with gradual underflow in the tail, a chain whose inputs reach |x| > 13 ran 5x slower.
//! The flush costs at most 1.2e-36 of absolute error, below the 1e-35 these functions allow
//! for results under 1e-30.

use super::{exp_normal, split, square, two_sum};
use crate::arch::{MulAdd, Portable, exp2_approx_with, recip_ge1};

/// Beyond this `|x|` the erf form's result is `x` (x > 0) or `|x Φ(x)| < 2.9e-37` (x < 0);
/// `e^{-x^2/2}` at the cut-off is 7.3e-37, a normal float.
const ERF_CUT: f32 = 12.9;

/// Beyond this `|x|` the tanh form's result is `x` or `|x e^{2u}/(1 + e^{2u})| < 1.2e-36`;
/// `e^{-|2u|}` at the cut-off is 1.2e-37, a normal float.
const TANH_CUT: f32 = 9.9;

// R(t) ≈ e^{z^2} erfc(z) / (2 t) with t = 1 / (1 + A z), z = |x| / √2 in [0, 12.9 / √2]
// (t in [0.2262, 1] for A = 3/8, [0.1960, 1] for A = 0.45): Remez minimax of the relative error
// (float64), halved and rounded to f32, so that Φ(-|x|) = e^{-x^2/2} t R(t). Degree 6 for the
// accurate form (max relative error 7.8e-7 evaluated in f32), degree 5 for the 16-bit forms
// (8.9e-6). ERF_T_* is A / √2, the coefficient of |x| in 1 + A z.
const ERF_T_ACCURATE: f32 = 0.26516504;
const ERF_R_ACCURATE: [f32; 7] =
    [0.10566972, 0.10784459, 0.08333227, 0.1415308, -0.064798675, 0.19396894, -0.067547955];
const ERF_T_FAST: f32 = 0.31819805;
const ERF_R_FAST: [f32; 6] = [0.12693907, 0.12630397, 0.122545764, 0.047699973, 0.143652, -0.067145206];

// gelu_tanh needs 2u = A x + B x^3 to about 2^-28 relative, so both constants are kept as
// hi + lo pairs (mpmath): A = 2 sqrt(2/pi) rounded to f32 plus its f32 remainder; B = 0.044715 A
// with B_HI rounded to 12 significant bits (so B_HI times a 12-bit number is exact).
pub(super) const GELU_A_HI: f32 = 1.5957692;
pub(super) const GELU_A_LO: f32 = -4.534068e-8;
pub(super) const GELU_B_HI: f32 = 0.0713501;
pub(super) const GELU_B_LO: f32 = 4.7186163e-6;

/// `c[0] + t (c[1] + t (...))` (Horner, unrolled).
#[inline(always)]
fn horner<F: MulAdd, const N: usize>(f: F, t: f32, c: &[f32; N]) -> f32 {
    let mut p = c[N - 1];
    for &ci in c[..N - 1].iter().rev() {
        p = f.mul_add(p, t, ci);
    }
    p
}

/// `Φ(-a) / e^{-a^2/2} = t R(t)` for `a >= 0`, with the fit `(t_coef, r)` above.
#[inline(always)]
fn erf_tail_ratio<F: MulAdd, const N: usize>(f: F, a: f32, t_coef: f32, r: &[f32; N]) -> f32 {
    let t = recip_ge1(f.mul_add(t_coef, a, 1.0));
    t * horner(f, t, r)
}

/// `min(|x|, cut)`, NaN passing through (a comparison, not `f32::min`).
#[inline(always)]
fn abs_clamped(x: f32, cut: f32) -> f32 {
    let a = f32::from_bits(x.to_bits() & 0x7FFF_FFFF);
    if a > cut { cut } else { a }
}

/// `x Φ(x)` from `r = Φ(-|x|) / e^{-x^2/2}` (a value in (0.03, 0.5]) and `e = e^{-x^2/2}`:
/// `x (1 - r e)` above 0, `(x r) e` below (the small factor last, so no product is ever
/// subnormal), `-0.0` below the cut-off.
#[inline(always)]
fn gelu_erf_from(x: f32, r: f32, e: f32) -> f32 {
    if x > 0.0 {
        x * (1.0 - r * e)
    } else if x < -ERF_CUT {
        -0.0
    } else {
        (x * r) * e
    }
}

/// `x / (1 + e^{-2u})` from `e = e^{-|2u|}` (2u has the sign of x): `x / (1 + e)` above 0,
/// `x e / (1 + e)` below, `-0.0` below the cut-off.
#[inline(always)]
fn gelu_tanh_from(x: f32, e: f32) -> f32 {
    let s = recip_ge1(1.0 + e);
    if x > 0.0 {
        x * s
    } else if x < -TANH_CUT {
        -0.0
    } else {
        x * (e * s)
    }
}

/// GELU with the exact Gaussian CDF: `x Φ(x)`. Relative error below about 1.1e-6 for results
/// above 1e-30; `-0.0` where `|x Φ(x)| < 2.9e-37` (x < -12.9).
///
/// `Φ(-a) = e^{-a^2/2} t R(t)` with `t = 1 / (1 + 0.375 a/√2)` (a degree-6 fit), and
/// `e^{-a^2/2}` from `a^2` as an exact (fused) or nearly exact (split) sum of two floats, so the
/// rounding of `a^2` costs nothing at large `a`.
#[inline(always)]
pub fn gelu_erf(x: f32) -> f32 {
    gelu_erf_with(Portable, x)
}

/// [`gelu_erf`] with its multiply-adds done by `f` (same bound, fused or not).
#[inline(always)]
pub fn gelu_erf_with<F: MulAdd>(f: F, x: f32) -> f32 {
    let a = abs_clamped(x, ERF_CUT);
    let (qh, ql) = square(f, a);
    let e = exp_normal(f, -0.5 * qh, -0.5 * ql);
    gelu_erf_from(x, erf_tail_ratio(f, a, ERF_T_ACCURATE, &ERF_R_ACCURATE), e)
}

/// GELU with the tanh approximation: `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x^3)))`.
///
/// Relative error below about 3e-7 for results above 1e-30; `-0.0` below x = -9.9 (results
/// under 1.2e-36). Computed as `x / (1 + e^{-2u})` (the same function) with `2u` evaluated in
/// double-f32: for negative `x` the result is about `x e^{2u}`, so half an ulp of error in
/// `2u ≈ 70` would alone cost 4e-6 relative error.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    gelu_tanh_with(Portable, x)
}

/// [`gelu_tanh`] with its multiply-adds done by `f` (same bound, fused or not). A fused `f`
/// gives the exact products of the double-f32 evaluation directly (`p`, `mul_add(a, b, -p)`),
/// in about half the operations of splitting the operands.
#[inline(always)]
pub fn gelu_tanh_with<F: MulAdd>(f: F, x: f32) -> f32 {
    let xc = if x > TANH_CUT { TANH_CUT } else { x };
    let xc = if xc < -TANH_CUT { -TANH_CUT } else { xc };
    let (vh, vl) = if F::FUSED { two_u_fused(f, xc) } else { two_u_split(xc) };

    // e^{-|2u|}: the sign of 2u is that of x; |2u| <= 85.1 keeps it normal.
    let neg = vh < 0.0;
    gelu_tanh_from(x, exp_normal(f, if neg { vh } else { -vh }, if neg { vl } else { -vl }))
}

/// `2u = x (A + B x^2)` as `vh + vl` (double-f32) by splitting the operands (no fused
/// multiply-add needed): every `hi` product is of two 12-bit numbers, so exact.
#[inline(always)]
fn two_u_split(xc: f32) -> (f32, f32) {
    let f = Portable;
    // x^2 = qh + ql, qh exact.
    let (xh, xl) = split(xc);
    let qh = xh * xh;
    let ql = xl * (xc + xh);
    // B x^2 = mh + ml, mh exact; ml gathers the terms below 2^-10 of it.
    let (qhh, qhl) = split(qh);
    let mh = GELU_B_HI * qhh;
    let ml = f.mul_add(GELU_B_HI, qhl, f.mul_add(GELU_B_LO, qh, (GELU_B_HI + GELU_B_LO) * ql));
    // A + B x^2 = th + tl.
    let (th, e) = two_sum(GELU_A_HI, mh);
    let tl = e + (GELU_A_LO + ml);
    // 2u = x (A + B x^2) = vh + vl, vh exact.
    let (thh, thl) = split(th);
    let vh = xh * thh;
    let vl = f.mul_add(xh, thl, f.mul_add(xl, th, xc * tl));
    (vh, vl)
}

/// `2u = x (A + B x^2)` as `vh + vl`, the products' errors from the fused `f` (exact).
#[inline(always)]
fn two_u_fused<F: MulAdd>(f: F, xc: f32) -> (f32, f32) {
    // x^2 = qh + ql exactly.
    let qh = xc * xc;
    let ql = f.mul_add(xc, xc, -qh);
    // B x^2 = mh + ml: B_HI qh exactly as mh + its error, the rest (below 2^-10 of it) in ml.
    let mh = GELU_B_HI * qh;
    let ml = f.mul_add(GELU_B_HI, qh, -mh) + f.mul_add(GELU_B_HI + GELU_B_LO, ql, GELU_B_LO * qh);
    // A + B x^2 = th + tl.
    let (th, e) = two_sum(GELU_A_HI, mh);
    let tl = e + (GELU_A_LO + ml);
    // 2u = x (A + B x^2) = vh + vl: x th exactly, plus x tl.
    let vh = xc * th;
    let vl = f.mul_add(xc, th, -vh) + xc * tl;
    (vh, vl)
}

/// [`gelu_erf`] for results stored in f16/bf16 (8 or 11 significant bits): a degree-5 fit,
/// and `e^{-x^2/2}` from [`exp2_approx`](crate::arch::exp2_approx) (the GPU's `ex2.approx`,
/// the host's [`super::exp2_poly`]) without the exact split of `x^2`. Relative error about
/// 1e-5 (2e-5 deep in the tail), far below half an ulp of either 16-bit type, for about half
/// the instructions.
#[inline(always)]
pub fn gelu_erf_fast(x: f32) -> f32 {
    gelu_erf_fast_with(Portable, x)
}

/// [`gelu_erf_fast`] with its multiply-adds done by `f`.
#[inline(always)]
pub fn gelu_erf_fast_with<F: MulAdd>(f: F, x: f32) -> f32 {
    let a = abs_clamped(x, ERF_CUT);
    let e = exp2_approx_with(f, -0.5 * core::f32::consts::LOG2_E * (a * a));
    gelu_erf_from(x, erf_tail_ratio(f, a, ERF_T_FAST, &ERF_R_FAST), e)
}

/// [`gelu_tanh`] for results stored in f16/bf16: `2u` in plain f32 and
/// [`exp2_approx`](crate::arch::exp2_approx). Relative error below about 1e-5 where the result
/// is above 1e-30.
#[inline(always)]
pub fn gelu_tanh_fast(x: f32) -> f32 {
    gelu_tanh_fast_with(Portable, x)
}

/// [`gelu_tanh_fast`] with its multiply-adds done by `f`.
#[inline(always)]
pub fn gelu_tanh_fast_with<F: MulAdd>(f: F, x: f32) -> f32 {
    let a = abs_clamped(x, TANH_CUT);
    // |2u| = a (A + B a^2): 2u is odd in x.
    let v = a * f.mul_add(GELU_B_HI + GELU_B_LO, a * a, GELU_A_HI);
    gelu_tanh_from(x, exp2_approx_with(f, -core::f32::consts::LOG2_E * v))
}
