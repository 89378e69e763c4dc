//! Elementwise maths (exp, erfc, normal CDF, GELU, sigmoid, ReLU) in plain f32, because the GPU
//! has no libm and the CPU backend must compute the same values (the GELU forms are in
//! [`gelu`]).
//!
//! Everything here is branch-light f32 arithmetic with inline constants: no tables, no f64 (slow
//! on the GPU), and selects instead of divergent branches. Polynomials go through a
//! [`MulAdd`](crate::arch::MulAdd) that the caller picks (the `_with` functions; the plain ones
//! pass [`Portable`], fused on the GPU and `a * b + c` on the host, and the host's AVX2/AVX-512
//! loops pass a fused one); the stated error bounds hold for every choice.
//!
//! Subnormal results of `exp`, `erfc_pos`, `normal_cdf` and `sigmoid` are produced by gradual
//! underflow (one rounding). The GELU forms never compute a subnormal value: where their result
//! would fall below about 1e-36 they return 0 (see [`gelu`]), because on x86 every instruction
//! that produces or reads a subnormal takes a microcode assist (about 100 cycles) unless the
//! thread runs with flush-to-zero, which the CPU backend does not set.

use crate::arch::{MulAdd, Portable, recip_ge1};

mod exp2;
mod gelu;

pub use exp2::{exp2_poly, exp2_poly_mul_with, exp2_poly_with};
pub use gelu::{
    gelu_erf, gelu_erf_fast, gelu_erf_fast_ftz_with, gelu_erf_fast_with, gelu_erf_with, gelu_tanh, gelu_tanh_fast,
    gelu_tanh_fast_ftz_with, gelu_tanh_fast_with, gelu_tanh_with, normal_cdf_pdf_with,
};

// Cody–Waite split of ln 2: LN2_HI is ln 2 rounded to 16 significant bits (mpmath), so
// k * LN2_HI is exact for |k| < 256; LN2_LO is ln 2 - LN2_HI rounded to f32.
const LN2_HI: f32 = 0.69314575;
const LN2_LO: f32 = 1.4286068e-6;

/// 1.5 * 2^23: adding it rounds a float of magnitude below 2^22 to an integer, which then sits
/// in the low mantissa bits of the sum.
pub(crate) const ROUND_SHIFT: f32 = 12_582_912.0;

// P(r) ≈ (e^r - 1 - r) / r^2 on [-0.3476, 0.3476] (ln 2 / 2 plus margin): Remez minimax of the
// relative error of e^r, float64, degree 4, rounded to f32; max relative error 3.9e-9.
const EXP_P0: f32 = 0.49999994;
const EXP_P1: f32 = 0.1666652;
const EXP_P2: f32 = 0.041668408;
const EXP_P3: f32 = 0.008368919;
const EXP_P4: f32 = 0.0013814179;

/// The change of variable for erfc: t = 1 / (1 + ERFC_A z) maps z in [0, 10.1] onto
/// [0.2089, 1]; 3/8 gave the smallest fit error among the values tried.
pub(crate) const ERFC_A: f32 = 0.375;

// Q(t) ≈ e^{z^2} erfc(z) / t with t = 1 / (1 + 0.375 z), on t in [0.2089, 1] (z in [0, 10.1]):
// Remez minimax of the relative error, float64 with scipy's erfcx, degree 8, rounded to f32;
// max relative error 1.9e-8.
const ERFC_Q0: f32 = 0.21161282;
const ERFC_Q1: f32 = 0.21066093;
const ERFC_Q2: f32 = 0.20523155;
const ERFC_Q3: f32 = 0.121832214;
const ERFC_Q4: f32 = 0.27293718;
const ERFC_Q5: f32 = -0.22824201;
const ERFC_Q6: f32 = 0.43134472;
const ERFC_Q7: f32 = -0.28680453;
const ERFC_Q8: f32 = 0.061427124;

/// Splits `x` into `hi + lo` with `hi` holding the top 12 significant bits, so the product of
/// two `hi` parts is exact. `lo = x - hi` is exact too.
#[inline(always)]
pub(crate) fn split(x: f32) -> (f32, f32) {
    let hi = f32::from_bits(x.to_bits() & 0xFFFF_F000);
    (hi, x - hi)
}

/// `(hi, lo)` with `hi + lo = a^2` and `|lo| <= 2^-10 hi`: exactly, from the fused multiply-add
/// where `f` is fused (`hi` the rounded square); otherwise `hi = ah^2` (exact) from the split of
/// `a` and `lo = al (a + ah)`, one rounding of a term below 2^-11 `hi`. For `a` in [0, 2^60].
#[inline(always)]
pub(crate) fn square<F: MulAdd>(f: F, a: f32) -> (f32, f32) {
    if F::FUSED {
        let hi = a * a;
        (hi, f.mul_add(a, a, -hi))
    } else {
        let (ah, al) = split(a);
        (ah * ah, al * (a + ah))
    }
}

/// `(s, e)` with `s = fl(a + b)` and `s + e = a + b` exactly (Knuth's two-sum, any magnitudes).
#[inline(always)]
pub(crate) fn two_sum(a: f32, b: f32) -> (f32, f32) {
    let s = a + b;
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    (s, e)
}

/// `(m, k)` with `e^(hi + lo) = m 2^k`, `m` in about [0.7, 1.42], for `hi` in [-150 ln 2,
/// 128 ln 2]; `hi` is the rounded value and `|lo| <= 2^-10 |hi|` a correction that the callers
/// get from splitting a product exactly.
///
/// The reduction `hi - k LN2_HI` is exact (it stays within the precision of `hi`), `lo` joins
/// the small remainder, so the result is as accurate as if the exact `hi + lo` had been passed.
#[inline(always)]
fn exp_reduce<F: MulAdd>(f: F, hi: f32, lo: f32) -> (f32, i32) {
    let shifted = f.mul_add(hi + lo, core::f32::consts::LOG2_E, ROUND_SHIFT);
    let kf = shifted - ROUND_SHIFT;
    // Wrapping: a NaN input gives a garbage k, but then the mantissa below is NaN anyway.
    let k = (shifted.to_bits() as i32).wrapping_sub(ROUND_SHIFT.to_bits() as i32);
    let r = f.mul_add(kf, -LN2_HI, hi);
    let r = f.mul_add(kf, -LN2_LO, r + lo);

    let mut p = EXP_P4;
    p = f.mul_add(p, r, EXP_P3);
    p = f.mul_add(p, r, EXP_P2);
    p = f.mul_add(p, r, EXP_P1);
    p = f.mul_add(p, r, EXP_P0);
    (f.mul_add(p, r * r, r) + 1.0, k)
}

/// `e^(hi + lo)` for any `hi` (see [`exp_reduce`]): overflow gives `+inf`, small results
/// underflow gradually.
#[inline(always)]
fn exp_hl<F: MulAdd>(f: F, hi: f32, lo: f32) -> f32 {
    // Keeps k in [-150, 128]: e^89 overflows and e^-104 < 2^-150 rounds to 0 anyway.
    // Comparisons rather than min/max so that NaN flows through.
    let hi = if hi > 89.0 { 89.0 } else { hi };
    let hi = if hi < -104.0 { -104.0 } else { hi };
    let (m, k) = exp_reduce(f, hi, lo);
    // 2^k in two factors, each a normal float for k in [-150, 128]; the first product is
    // exact, so overflow and gradual underflow happen in one correctly rounded multiply.
    let k1 = k >> 1;
    let k2 = k.wrapping_sub(k1);
    let s1 = f32::from_bits((k1.wrapping_add(127) as u32) << 23);
    let s2 = f32::from_bits((k2.wrapping_add(127) as u32) << 23);
    m * s1 * s2
}

/// `e^(hi + lo)` for `hi` in [-86, 88] only, where the result is a normal float: no clamps and
/// one scaling. The GELU forms clamp their arguments into this range first.
#[inline(always)]
pub(crate) fn exp_normal<F: MulAdd>(f: F, hi: f32, lo: f32) -> f32 {
    let (m, k) = exp_reduce(f, hi, lo);
    m * f32::from_bits((k.wrapping_add(127) as u32) << 23)
}

/// `e^x`.
///
/// Relative error below 9e-8 (all f32 inputs with a normal result, fused or not); results
/// above `f32::MAX` (x >= 88.72284) give `+inf`, results below `f32::MIN_POSITIVE` underflow
/// gradually to subnormals and then to 0, NaN gives NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    exp_with(Portable, x)
}

/// [`exp`] with its multiply-adds done by `f` (same bound, fused or not).
#[inline(always)]
pub fn exp_with<F: MulAdd>(f: F, x: f32) -> f32 {
    // Adding -0.0 is a no-op the compiler removes.
    exp_hl(f, x, -0.0)
}

/// The erfc fit `Q(t)` (Horner).
#[inline(always)]
pub(crate) fn erfc_q<F: MulAdd>(f: F, t: f32) -> f32 {
    let mut q = ERFC_Q8;
    q = f.mul_add(q, t, ERFC_Q7);
    q = f.mul_add(q, t, ERFC_Q6);
    q = f.mul_add(q, t, ERFC_Q5);
    q = f.mul_add(q, t, ERFC_Q4);
    q = f.mul_add(q, t, ERFC_Q3);
    q = f.mul_add(q, t, ERFC_Q2);
    q = f.mul_add(q, t, ERFC_Q1);
    q = f.mul_add(q, t, ERFC_Q0);
    q
}

/// `erfc(z)` for `z >= 0`, given `-z^2` as `nz2_hi + nz2_lo` (see [`exp_hl`]).
#[inline(always)]
fn erfc_core<F: MulAdd>(f: F, z: f32, nz2_hi: f32, nz2_lo: f32) -> f32 {
    let t = recip_ge1(f.mul_add(ERFC_A, z, 1.0));
    exp_hl(f, nz2_hi, nz2_lo) * (t * erfc_q(f, t))
}

/// `erfc(z)`, made for `z >= 0`: there its relative error stays below about 1e-6 until the
/// result underflows (subnormal above z ≈ 9.19, 0 above z ≈ 10.05).
///
/// One formula covers all of `z >= 0`: `e^{-z^2} t Q(t)` with `t = 1 / (1 + 0.375 z)`, and
/// `e^{-z^2}` taken from the exactly split `z^2`, so the rounding of `z^2` costs nothing at large
/// `z`. Negative `z` works too, as `2 - erfc(|z|)` (a value in (1, 2), so no tail to keep).
#[inline(always)]
pub fn erfc_pos(z: f32) -> f32 {
    let a = f32::from_bits(z.to_bits() & 0x7FFF_FFFF);
    // erfc(11) is 0 in f32; the clamp keeps inf out of the split below (NaN passes).
    let a = if a > 11.0 { 11.0 } else { a };
    let (ah, al) = split(a);
    let e = erfc_core(Portable, a, -(ah * ah), -(al * (a + ah)));
    if z < 0.0 { 2.0 - e } else { e }
}

/// The standard normal CDF `Φ(s) = erfc(-s / √2) / 2`.
///
/// The lower tail keeps its relative accuracy (below about 1e-6) until it underflows: `Φ(s)` is
/// subnormal below s ≈ -13 and 0 below s ≈ -14.2. For `s > 0` it is `1 - Φ(-s)`, accurate to
/// about an ulp of the result.
#[inline(always)]
pub fn normal_cdf(s: f32) -> f32 {
    normal_cdf_with(Portable, s)
}

/// [`normal_cdf`] with its multiply-adds done by `f` (same bound, fused or not): the host's
/// AVX loops pass a fused one, which halves the operations of the two polynomials and of the
/// exact square, and halves their dependency chains.
#[inline(always)]
pub fn normal_cdf_with<F: MulAdd>(f: F, s: f32) -> f32 {
    let a = f32::from_bits(s.to_bits() & 0x7FFF_FFFF);
    // Φ(-15) is 0 in f32; the clamp keeps inf out of the split below (NaN passes).
    let a = if a > 15.0 { 15.0 } else { a };
    // z^2 = a^2 / 2 from the exact square of `a` itself: z = a / √2 is rounded, and at large a
    // the exponent would turn that rounding into a relative error of 2 z^2 ulp.
    let (q, ql) = square(f, a);
    let z = a * core::f32::consts::FRAC_1_SQRT_2;
    let tail = 0.5 * erfc_core(f, z, -0.5 * q, -0.5 * ql);
    if s > 0.0 { 1.0 - tail } else { tail }
}

/// `max(x, 0)`; NaN gives NaN, `-0.0` gives `-0.0`.
#[inline(always)]
pub fn relu(x: f32) -> f32 {
    if x < 0.0 { 0.0 } else { x }
}

/// The logistic function `1 / (1 + e^{-x})`, with relative error below about 2.5e-7 at both
/// ends (for results above 1e-30; subnormal results underflow gradually).
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    // e^{-|x|} never overflows; for x < 0 use e^x / (1 + e^x), the same value.
    let e = exp(-f32::from_bits(x.to_bits() & 0x7FFF_FFFF));
    let s = recip_ge1(1.0 + e);
    if x < 0.0 { e * s } else { s }
}

/// A fused [`MulAdd`] for the tests: std's `mul_add` (one rounding; the FMA instruction or a
/// correct software fallback), as the host's AVX2/AVX-512 loops use it.
#[cfg(test)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct StdFused;

#[cfg(test)]
impl MulAdd for StdFused {
    const FUSED: bool = true;
    #[inline(always)]
    fn mul_add(self, a: f32, b: f32, c: f32) -> f32 {
        extern crate std;
        std::primitive::f32::mul_add(a, b, c)
    }
}

#[cfg(test)]
mod gelu_tests;
#[cfg(test)]
mod tests;
