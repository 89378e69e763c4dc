//! A cheap `2^x` for maths whose result is stored in 16 bits: the host's stand-in for the
//! GPU's `ex2.approx` (see [`crate::arch::exp2_approx`]), a few lane-wise operations that LLVM
//! vectorises, with no table and no branch.

use super::ROUND_SHIFT;
use crate::arch::{MulAdd, Portable};

// 2^r ≈ E0 + r (E1 + r (E2 + r (E3 + r E4))) on r in [-0.5, 0.5]: Remez minimax of the relative
// error (float64), degree 4, rounded to f32; max relative error 2.7e-6 evaluated in f32.
const E0: f32 = 0.9999993;
const E1: f32 = 0.6931218;
const E2: f32 = 0.24024744;
const E3: f32 = 0.05591786;
const E4: f32 = 0.009570102;

/// `2^x` for `x` in [-125, 127] (a normal result), relative error below 3e-6.
///
/// Outside that range, and for NaN, the result is unspecified (callers clamp first and carry
/// NaN through their other factors; no check here, so that it stays a handful of operations).
/// `x = n + r` with `n` the nearest integer (by the round-by-adding trick) and `r = x - n`
/// exact, `2^r` from the polynomial and `2^n` added to its exponent field.
#[inline(always)]
pub fn exp2_poly(x: f32) -> f32 {
    exp2_poly_with(Portable, x)
}

/// [`exp2_poly`] with its multiply-adds done by `f` (same bound, fused or not).
#[inline(always)]
pub fn exp2_poly_with<F: MulAdd>(f: F, x: f32) -> f32 {
    let shifted = x + ROUND_SHIFT;
    let r = x - (shifted - ROUND_SHIFT);
    let n = (shifted.to_bits() as i32).wrapping_sub(ROUND_SHIFT.to_bits() as i32);
    let mut p = E4;
    p = f.mul_add(p, r, E3);
    p = f.mul_add(p, r, E2);
    p = f.mul_add(p, r, E1);
    p = f.mul_add(p, r, E0);
    f32::from_bits(p.to_bits().wrapping_add((n as u32) << 23))
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
