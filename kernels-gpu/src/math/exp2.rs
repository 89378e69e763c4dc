//! `2^x` from lane-wise operations that LLVM vectorises, with no table and no branch: a cheap
//! one for maths whose result is stored in 16 bits (the host's stand-in for the GPU's
//! `ex2.approx`, see [`crate::arch::exp2_approx`]) and, for the accurate f32 forms where the
//! multiply-adds are fused, the pieces of a finer one: the argument given as a product whose
//! rounding the fused multiply-add avoids ([`round_product`]) and a degree-5 polynomial
//! ([`exp2_fine`]).

use super::ROUND_SHIFT;
use crate::arch::{MulAdd, Portable};

// 2^r ≈ E0 + r (E1 + r (E2 + r (E3 + r E4))) on r in [-0.5, 0.5]: Remez minimax of the relative
// error (float64), degree 4, rounded to f32; max relative error 2.7e-6 evaluated in f32.
const E0: f32 = 0.9999993;
const E1: f32 = 0.6931218;
const E2: f32 = 0.24024744;
const E3: f32 = 0.05591786;
const E4: f32 = 0.009570102;

// 2^r ≈ F0 + r (F1 + ...) on r in [-0.535, 0.535] (the fraction plus what the callers add to
// it): Remez minimax of the relative error (float64), degree 5, rounded to f32; max relative
// error 1.8e-7 evaluated in f32 with fused multiply-adds.
const F0: f32 = 1.0000001;
const F1: f32 = 0.6931469;
const F2: f32 = 0.24021956;
const F3: f32 = 0.055508077;
const F4: f32 = 0.009683793;
const F5: f32 = 0.0013267979;

/// `(shifted, r)` with `a b = n + r`: `n` the integer nearest to `a b`, kept in the low
/// mantissa bits of `shifted` (see [`scale_by`]), and `r` in [-0.5, 0.5]. Where `f` is fused,
/// both multiply-adds see the exact product, so `r` is `a b - n` rounded once; otherwise `a b`
/// is rounded first. For `|a b| < 2^22`.
#[inline(always)]
pub(crate) fn round_product<F: MulAdd>(f: F, a: f32, b: f32) -> (f32, f32) {
    let shifted = f.mul_add(a, b, ROUND_SHIFT);
    (shifted, f.mul_add(a, b, -(shifted - ROUND_SHIFT)))
}

/// `p 2^n` for the `n` of [`round_product`]'s `shifted`, by an integer add to the exponent
/// field: `p` and the result must be normal floats.
#[inline(always)]
pub(crate) fn scale_by(p: f32, shifted: f32) -> f32 {
    let n = (shifted.to_bits() as i32).wrapping_sub(ROUND_SHIFT.to_bits() as i32);
    f32::from_bits(p.to_bits().wrapping_add((n as u32) << 23))
}

/// `2^(n + r)` for [`round_product`]'s `(shifted, r)` (with `r` in [-0.535, 0.535]), relative
/// error below 2e-7 where the multiply-adds are fused; the result must be a normal float.
#[inline(always)]
pub(crate) fn exp2_fine<F: MulAdd>(f: F, shifted: f32, r: f32) -> f32 {
    let mut p = F5;
    p = f.mul_add(p, r, F4);
    p = f.mul_add(p, r, F3);
    p = f.mul_add(p, r, F2);
    p = f.mul_add(p, r, F1);
    p = f.mul_add(p, r, F0);
    scale_by(p, shifted)
}

/// `2^x` for `x` in [-125, 127] (a normal result), relative error below 3e-6.
///
/// Outside that range, and for NaN, the result is unspecified (callers clamp first and carry
/// NaN through their other factors; no check here, so that it stays a handful of operations).
/// `x = n + r` with `n` the nearest integer (by the round-by-adding trick, [`round_product`])
/// and `r = x - n` exact, `2^r` from the polynomial and `2^n` added to its exponent field.
#[inline(always)]
pub fn exp2_poly(x: f32) -> f32 {
    exp2_poly_with(Portable, x)
}

/// [`exp2_poly`] with its multiply-adds done by `f` (same bound, fused or not).
#[inline(always)]
pub fn exp2_poly_with<F: MulAdd>(f: F, x: f32) -> f32 {
    // The product with 1.0 folds away.
    exp2_poly_mul_with(f, x, 1.0)
}

/// `2^(a b)` for `a b` in [-125, 127], relative error below 3e-6 (plus, where `f` is not fused,
/// the rounding of `a b`): [`exp2_poly`] with the product inside the reduction, where a fused
/// `f` saves its rounding and an instruction.
#[inline(always)]
pub fn exp2_poly_mul_with<F: MulAdd>(f: F, a: f32, b: f32) -> f32 {
    let (shifted, r) = round_product(f, a, b);
    let mut p = E4;
    p = f.mul_add(p, r, E3);
    p = f.mul_add(p, r, E2);
    p = f.mul_add(p, r, E1);
    p = f.mul_add(p, r, E0);
    scale_by(p, shifted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp2_poly_is_within_its_bound_over_its_domain() {
        // Every 1/1024 over [-125, 127]: the fraction's whole range in every binade.
        let mut worst = 0.0f64;
        for i in -125 * 1024..=127 * 1024 {
            let x = i as f32 / 1024.0;
            let want = libm::exp2(x as f64);
            let got = exp2_poly(x) as f64;
            worst = worst.max((got - want).abs() / want);
        }
        assert!(worst < 3e-6, "max relative error {worst:e}");
        assert_eq!(exp2_poly(0.0), 0.9999993);
        assert!(exp2_poly(-125.0) >= f32::MIN_POSITIVE);
    }
}
