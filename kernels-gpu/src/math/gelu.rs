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

use super::exp2::{exp2_fine, round_product};
use super::{exp_normal, split, square, two_sum};
use crate::arch::{FLUSHES_SUBNORMALS, MulAdd, Portable, div_by_ge1, exp2_approx_mul_with, recip_ge1};

/// Beyond this `|x|` the erf form's result is `x` (x > 0) or `|x Φ(x)| < 2.9e-37` (x < 0);
/// `e^{-x^2/2}` at the cut-off is 7.3e-37, a normal float.
const ERF_CUT: f32 = 12.9;

/// Beyond this `|x|` the tanh form's result is `x` or `|x e^{2u}/(1 + e^{2u})| < 1.2e-36`;
/// `e^{-2u}` at the cut-offs is 1.2e-37 and 8.6e36, normal floats.
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

// The fused tanh form's exponent -2u log2(e) = x (NA + NB x^2) (Python's decimal, 50 digits):
// NA = -A log2(e) rounded to a multiple of 2^-20 (22 significant bits) plus its remainder;
// NB = -B log2(e) rounded to 11 significant bits (a multiple of 2^-14) plus its remainder. NB_HI
// times x^2 rounded to a multiple of 2^-6 (13 bits below 128) is a multiple of 2^-20 below 16,
// and so is its sum with NA_HI: both exact.
const TANH_NA_HI: f32 = -2.302_208;
const TANH_NA_LO: f32 = -2.513_669_7e-7;
const TANH_NB_HI: f32 = -0.102_966_31;
const TANH_NB_LO: f32 = 2.306_901_3e-5;
/// 1.5 * 2^17: adding it rounds a float below 2^16 to a multiple of 2^-6.
const Q_SHIFT: f32 = 196_608.0;
// The 16-bit tanh form's exponent: the same NA and NB, each rounded to f32.
const TANH_NA_FAST: f32 = -2.302_208_2;
const TANH_NB_FAST: f32 = -0.102_943_24;

// The erf forms' exponent -x^2 log2(e) / 2 = C x^2, C = C_HI + C_LO (Python's decimal).
const GAUSS_C_HI: f32 = -0.721_347_5;
const GAUSS_C_LO: f32 = -9.629_815e-9;

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
/// with `q = r e = Φ(-|x|)` (at least 2.2e-38 up to the cut-off, so never subnormal),
/// `x (1 - q)` above 0, `x q` below, `-0.0` below the cut-off.
#[inline(always)]
fn gelu_erf_from(x: f32, r: f32, e: f32) -> f32 {
    let q = r * e;
    let y = x * if x > 0.0 { 1.0 - q } else { q };
    if x < -ERF_CUT { -0.0 } else { y }
}

/// `x / (1 + e)` from `e = e^{-2u}` (at most e^85.1 = 8.6e36 up to the cut-off: for x < 0 the
/// result is about `x e^{2u}`, at least 1.2e-36 in magnitude), `-0.0` below the cut-off.
#[inline(always)]
fn gelu_tanh_from(x: f32, e: f32) -> f32 {
    let y = div_by_ge1(x, 1.0 + e);
    if x < -TANH_CUT { -0.0 } else { y }
}

/// `x` clamped to [-TANH_CUT, TANH_CUT], NaN passing through.
#[inline(always)]
fn tanh_clamped(x: f32) -> f32 {
    let xc = if x > TANH_CUT { TANH_CUT } else { x };
    if xc < -TANH_CUT { -TANH_CUT } else { xc }
}

/// GELU with the exact Gaussian CDF: `x Φ(x)`. Relative error below about 1.1e-6 for results
/// above 1e-30; `-0.0` where `|x Φ(x)| < 2.9e-37` (x < -12.9).
///
/// `Φ(-a) = e^{-a^2/2} t R(t)` with `t = 1 / (1 + 0.375 a/√2)` (a degree-6 fit), and
/// `e^{-a^2/2}` from the exact square `a^2` (see [`gaussian`]), so the rounding of `a^2` costs
/// nothing at large `a`.
#[inline(always)]
pub fn gelu_erf(x: f32) -> f32 {
    gelu_erf_with(Portable, x)
}

/// [`gelu_erf`] with its multiply-adds done by `f` (same bound, fused or not).
#[inline(always)]
pub fn gelu_erf_with<F: MulAdd>(f: F, x: f32) -> f32 {
    let a = abs_clamped(x, ERF_CUT);
    gelu_erf_from(x, erf_tail_ratio(f, a, ERF_T_ACCURATE, &ERF_R_ACCURATE), gaussian(f, a))
}

/// `e^{-a^2/2}` for `a` in [0, 12.9], relative error below about 2e-7. Where `f` is fused:
/// `2^(C a^2)` with `a^2 = q + ql` exact and `C q` rounded to its integer `n` and fraction
/// inside multiply-adds (exact products), so the fraction is off by one rounding; otherwise
/// `e^{-a^2/2}` by [`exp_normal`] from `a^2` split into two 12-bit halves.
#[inline(always)]
fn gaussian<F: MulAdd>(f: F, a: f32) -> f32 {
    if F::FUSED {
        let q = a * a;
        let ql = f.mul_add(a, a, -q);
        let (shifted, r) = round_product(f, GAUSS_C_HI, q);
        exp2_fine(f, shifted, f.mul_add(GAUSS_C_HI, ql, f.mul_add(GAUSS_C_LO, q, r)))
    } else {
        let (qh, ql) = square(f, a);
        exp_normal(f, -0.5 * qh, -0.5 * ql)
    }
}

/// GELU with the tanh approximation: `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x^3)))`.
///
/// Relative error below about 4e-7 for results above 1e-30; `-0.0` below x = -9.9 (results
/// under 1.2e-36). Computed as `x / (1 + e^{-2u})` (the same function) with `2u` carried in
/// double-f32 precision: for negative `x` the result is about `x e^{2u}`, so half an ulp of
/// error in `2u ≈ 70` would alone cost 4e-6 relative error.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    gelu_tanh_with(Portable, x)
}

/// [`gelu_tanh`] with its multiply-adds done by `f` (same bound, fused or not). A fused `f`
/// takes `e^{-2u} = 2^(x (NA + NB x^2))` with `NA + NB x^2` as an exact head and a small tail
/// and the product with `x` rounded inside multiply-adds ([`tanh_exp_fused`]), in about half
/// the operations of splitting the operands.
#[inline(always)]
pub fn gelu_tanh_with<F: MulAdd>(f: F, x: f32) -> f32 {
    let xc = tanh_clamped(x);
    let e = if F::FUSED {
        tanh_exp_fused(f, xc)
    } else {
        // |2u| <= 85.1 keeps e^{-2u} normal.
        let (vh, vl) = two_u_split(xc);
        exp_normal(f, -vh, -vl)
    };
    gelu_tanh_from(x, e)
}

/// `e^{-2u} = 2^(xc t)` with `t = NA + NB xc^2 = th + tl` for a fused `f`: `xc^2 = q + ql`
/// exactly, `q` rounded to a multiple of 2^-6 (`qq`, the rest `qr` exact), so `th = NA_HI +
/// NB_HI qq` is exact and `tl` (below 3.1e-3) carries the rest; `xc th` is split into its
/// nearest integer and fraction inside multiply-adds (exact product), and `xc tl` joins the
/// fraction (|fraction| < 0.535). The exponent is off by about one rounding of the fraction.
#[inline(always)]
fn tanh_exp_fused<F: MulAdd>(f: F, xc: f32) -> f32 {
    let q = xc * xc;
    let ql = f.mul_add(xc, xc, -q);
    let qq = (q + Q_SHIFT) - Q_SHIFT;
    let qr = q - qq;
    let th = f.mul_add(TANH_NB_HI, qq, TANH_NA_HI);
    let tl = f.mul_add(TANH_NB_HI, qr + ql, f.mul_add(TANH_NB_LO, q, TANH_NA_LO));
    let (shifted, r) = round_product(f, xc, th);
    exp2_fine(f, shifted, f.mul_add(xc, tl, r))
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

/// [`gelu_erf`] for results stored in f16/bf16 (8 or 11 significant bits): a degree-5 fit,
/// and `e^{-x^2/2}` from [`exp2_approx`](crate::arch::exp2_approx) (the GPU's `ex2.approx`,
/// the host's [`super::exp2_poly`]) without the exact split of `x^2`. Relative error about
/// 1e-5 (2e-5 deep in the tail), far below half an ulp of either 16-bit type, for about half
/// the instructions.
#[inline(always)]
pub fn gelu_erf_fast(x: f32) -> f32 {
    gelu_erf_fast_with(Portable, x)
}

/// [`gelu_erf_fast`] with its multiply-adds done by `f`: [`gelu_erf_fast_ftz_with`] on the
/// GPU, the form that keeps every intermediate normal on the host.
#[inline(always)]
pub fn gelu_erf_fast_with<F: MulAdd>(f: F, x: f32) -> f32 {
    if FLUSHES_SUBNORMALS {
        return gelu_erf_fast_ftz_with(f, x);
    }
    let a = abs_clamped(x, ERF_CUT);
    let e = exp2_approx_mul_with(f, a * a, GAUSS_C_HI);
    gelu_erf_from(x, erf_tail_ratio(f, a, ERF_T_FAST, &ERF_R_FAST), e)
}

/// [`gelu_erf_fast`] as the GPU runs it, in fewer instructions: `x Φ(x) = max(x, 0) - a q`
/// with `a = min(|x|, 12.9)` and `q = Φ(-a)`, one multiply-add where the host form takes a
/// subtraction, a select, a multiply and the cut-off's compare and select. The clamped `a`
/// keeps the tail finite (below x = -12.9 the result is `-12.9 Φ(-12.9)`, about -2.9e-37,
/// which 16-bit outputs round to -0.0 or keep as a value far below their tolerance); the sign
/// of zero is kept (`-0.0 + -0.0`, `+0.0 - 0.0`). Same error bound as [`gelu_erf_fast`]
/// wherever the result is above 1e-30 (the subtraction, for `x > 0`, has no cancellation:
/// `a q < x / 2`).
#[inline(always)]
pub fn gelu_erf_fast_ftz_with<F: MulAdd>(f: F, x: f32) -> f32 {
    let a = abs_clamped(x, ERF_CUT);
    let e = exp2_approx_mul_with(f, a * a, GAUSS_C_HI);
    let q = erf_tail_ratio(f, a, ERF_T_FAST, &ERF_R_FAST) * e;
    // `>=`: +0.0 keeps its sign (+0.0 - 0.0), -0.0 takes the else arm (-0.0 - 0.0).
    f.mul_add(-a, q, if x >= 0.0 { x } else { -0.0 })
}

/// `1 / sqrt(2 pi)`.
const INV_SQRT_2PI: f32 = 0.398_942_3;

/// The standard normal CDF and density together, `(Φ(s), φ(s))`, from one exponential: for
/// gates computed in f32 whose inputs and results are f32 values of moderate accuracy (the
/// Clifford layers' `x Φ(x0)` and its gradient, checked at 1e-5 of the row's scale).
///
/// `Φ(-a) = e^{-a^2/2} t R(t)` with the accurate degree-6 fit of [`gelu_erf`] and `e^{-a^2/2}`
/// from [`exp2_approx`](crate::arch::exp2_approx) of the rounded `a^2` (the GPU's
/// `ex2.approx`, the host's [`super::exp2_poly`]); `φ(s) = e^{-a^2/2} / √(2π)`. Relative error
/// below 2e-5 for both where the result is above 1e-30 (6e-6 for `|s| < 5`, where the layers'
/// values live), absolute below 1e-35 beyond; past the cut-off `|s| = 12.9` both stay at their
/// cut-off values (CDF about 2.2e-38, density below 8e-37), never subnormal. NaN gives NaN. About a third of [`super::normal_cdf`]'s
/// instructions on the GPU, and the density comes free.
#[inline(always)]
pub fn normal_cdf_pdf_with<F: MulAdd>(f: F, s: f32) -> (f32, f32) {
    let a = abs_clamped(s, ERF_CUT);
    let e = exp2_approx_mul_with(f, a * a, GAUSS_C_HI);
    let q = erf_tail_ratio(f, a, ERF_T_ACCURATE, &ERF_R_ACCURATE) * e;
    (if s > 0.0 { 1.0 - q } else { q }, INV_SQRT_2PI * e)
}

/// [`gelu_tanh`] for results stored in f16/bf16: `e^{-2u} = 2^(x (NA + NB x^2))` in plain f32
/// from [`exp2_approx`](crate::arch::exp2_approx). Relative error below about 1e-5 where the
/// result is above 1e-30.
#[inline(always)]
pub fn gelu_tanh_fast(x: f32) -> f32 {
    gelu_tanh_fast_with(Portable, x)
}

/// [`gelu_tanh_fast`] with its multiply-adds done by `f`: [`gelu_tanh_fast_ftz_with`] on the
/// GPU, the form that keeps every intermediate normal on the host.
#[inline(always)]
pub fn gelu_tanh_fast_with<F: MulAdd>(f: F, x: f32) -> f32 {
    if FLUSHES_SUBNORMALS {
        return gelu_tanh_fast_ftz_with(f, x);
    }
    let xc = tanh_clamped(x);
    let t = f.mul_add(TANH_NB_FAST, xc * xc, TANH_NA_FAST);
    gelu_tanh_from(x, exp2_approx_mul_with(f, xc, t))
}

/// [`gelu_tanh_fast`] as the GPU runs it, in fewer instructions: `xc / (1 + 2^(xc t))` with
/// `xc = max(x, -9.9)` and no upper clamp and no cut-off select. On the GPU `ex2.approx.ftz`
/// and `rcp.approx.ftz` flush what would be subnormal, so large `x` gives `2^(-inf) = 0` and
/// `x` itself (+inf included), and below the clamp the result stays about `-1.5e-36` (-inf
/// included), far below a 16-bit output's tolerance. NaN and the sign of zero pass through.
/// The host's exponential takes arguments in [-125, 127] only: there this form holds for
/// `x <= 9.9`.
#[inline(always)]
pub fn gelu_tanh_fast_ftz_with<F: MulAdd>(f: F, x: f32) -> f32 {
    // A compare and select (not `f32::max`), so NaN passes through.
    let xc = if x < -TANH_CUT { -TANH_CUT } else { x };
    let t = f.mul_add(TANH_NB_FAST, xc * xc, TANH_NA_FAST);
    div_by_ge1(xc, 1.0 + exp2_approx_mul_with(f, xc, t))
}
