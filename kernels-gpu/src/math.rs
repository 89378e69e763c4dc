//! Elementwise maths (exp, erfc, normal CDF, GELU, sigmoid, ReLU) in plain f32, because the GPU
//! has no libm and the CPU backend must compute the same values.
//!
//! Everything here is branch-light f32 arithmetic with inline constants: no tables, no f64 (slow
//! on the GPU), and selects instead of divergent branches. Polynomials go through
//! [`fmaf`](crate::arch::fmaf), which is fused on the GPU and `a * b + c` on the host; the stated
//! error bounds hold for both.
//!
//! Subnormal results are produced by gradual underflow (one rounding). A kernel built with
//! flush-to-zero would flush them to 0, which is within the absolute error these functions allow
//! for results below `f32::MIN_POSITIVE`.

use crate::arch::{exp2_approx, fmaf, recip_ge1};

// Cody–Waite split of ln 2: LN2_HI is ln 2 rounded to 16 significant bits (mpmath), so
// k * LN2_HI is exact for |k| < 256; LN2_LO is ln 2 - LN2_HI rounded to f32.
const LN2_HI: f32 = 0.69314575;
const LN2_LO: f32 = 1.4286068e-6;

/// 1.5 * 2^23: adding it rounds a float of magnitude below 2^22 to an integer, which then sits
/// in the low mantissa bits of the sum.
const ROUND_SHIFT: f32 = 12_582_912.0;

// P(r) ≈ (e^r - 1 - r) / r^2 on [-0.3476, 0.3476] (ln 2 / 2 plus margin): Remez minimax of the
// relative error of e^r, float64, degree 4, rounded to f32; max relative error 3.9e-9.
const EXP_P0: f32 = 0.49999994;
const EXP_P1: f32 = 0.1666652;
const EXP_P2: f32 = 0.041668408;
const EXP_P3: f32 = 0.008368919;
const EXP_P4: f32 = 0.0013814179;

/// The change of variable for erfc: t = 1 / (1 + ERFC_A z) maps z in [0, 10.1] onto
/// [0.2089, 1]; 3/8 gave the smallest fit error among the values tried.
const ERFC_A: f32 = 0.375;

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

// gelu_tanh needs 2u = A x + B x^3 to about 2^-28 relative, so both constants are kept as
// hi + lo pairs (mpmath): A = 2 sqrt(2/pi) rounded to f32 plus its f32 remainder; B = 0.044715 A
// with B_HI rounded to 12 significant bits (so B_HI times a 12-bit number is exact).
const GELU_A_HI: f32 = 1.5957692;
const GELU_A_LO: f32 = -4.534068e-8;
const GELU_B_HI: f32 = 0.0713501;
const GELU_B_LO: f32 = 4.7186163e-6;

/// Splits `x` into `hi + lo` with `hi` holding the top 12 significant bits, so the product of
/// two `hi` parts is exact. `lo = x - hi` is exact too.
#[inline(always)]
fn split(x: f32) -> (f32, f32) {
    let hi = f32::from_bits(x.to_bits() & 0xFFFF_F000);
    (hi, x - hi)
}

/// `(s, e)` with `s = fl(a + b)` and `s + e = a + b` exactly (Knuth's two-sum, any magnitudes).
#[inline(always)]
fn two_sum(a: f32, b: f32) -> (f32, f32) {
    let s = a + b;
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    (s, e)
}

/// `e^(hi + lo)`, where `hi` is the rounded value and `|lo| <= 2^-10 |hi|` is a correction that
/// the callers get from splitting a product exactly.
///
/// The reduction `hi - k LN2_HI` is exact (it stays within the precision of `hi`), `lo` joins
/// the small remainder, so the result is as accurate as if the exact `hi + lo` had been passed.
#[inline(always)]
fn exp_hl(hi: f32, lo: f32) -> f32 {
    // Keeps k in [-150, 128]: e^89 overflows and e^-104 < 2^-150 rounds to 0 anyway.
    // Comparisons rather than min/max so that NaN flows through.
    let hi = if hi > 89.0 { 89.0 } else { hi };
    let hi = if hi < -104.0 { -104.0 } else { hi };
    let shifted = fmaf(hi + lo, core::f32::consts::LOG2_E, ROUND_SHIFT);
    let kf = shifted - ROUND_SHIFT;
    // Wrapping: a NaN input gives a garbage k, but then the mantissa below is NaN anyway.
    let k = (shifted.to_bits() as i32).wrapping_sub(ROUND_SHIFT.to_bits() as i32);
    let r = fmaf(kf, -LN2_HI, hi);
    let r = fmaf(kf, -LN2_LO, r + lo);

    let mut p = EXP_P4;
    p = fmaf(p, r, EXP_P3);
    p = fmaf(p, r, EXP_P2);
    p = fmaf(p, r, EXP_P1);
    p = fmaf(p, r, EXP_P0);
    let m = fmaf(p, r * r, r) + 1.0;

    // 2^k in two factors, each a normal float for k in [-150, 128]; the first product is
    // exact, so overflow and gradual underflow happen in one correctly rounded multiply.
    let k1 = k >> 1;
    let k2 = k.wrapping_sub(k1);
    let s1 = f32::from_bits((k1.wrapping_add(127) as u32) << 23);
    let s2 = f32::from_bits((k2.wrapping_add(127) as u32) << 23);
    m * s1 * s2
}

/// `e^x`.
///
/// Relative error below 9e-8 (all f32 inputs with a normal result, fused or not); results
/// above `f32::MAX` (x >= 88.72284) give `+inf`, results below `f32::MIN_POSITIVE` underflow
/// gradually to subnormals and then to 0, NaN gives NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // Adding -0.0 is a no-op the compiler removes.
    exp_hl(x, -0.0)
}

/// The erfc fit `Q(t)` (Horner).
#[inline(always)]
fn erfc_q(t: f32) -> f32 {
    let mut q = ERFC_Q8;
    q = fmaf(q, t, ERFC_Q7);
    q = fmaf(q, t, ERFC_Q6);
    q = fmaf(q, t, ERFC_Q5);
    q = fmaf(q, t, ERFC_Q4);
    q = fmaf(q, t, ERFC_Q3);
    q = fmaf(q, t, ERFC_Q2);
    q = fmaf(q, t, ERFC_Q1);
    q = fmaf(q, t, ERFC_Q0);
    q
}

/// `erfc(z)` for `z >= 0`, given `-z^2` as `nz2_hi + nz2_lo` (see [`exp_hl`]).
#[inline(always)]
fn erfc_core(z: f32, nz2_hi: f32, nz2_lo: f32) -> f32 {
    let t = recip_ge1(fmaf(ERFC_A, z, 1.0));
    exp_hl(nz2_hi, nz2_lo) * (t * erfc_q(t))
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
    let e = erfc_core(a, -(ah * ah), -(al * (a + ah)));
    if z < 0.0 { 2.0 - e } else { e }
}

/// The standard normal CDF `Φ(s) = erfc(-s / √2) / 2`.
///
/// The lower tail keeps its relative accuracy (below about 1e-6) until it underflows: `Φ(s)` is
/// subnormal below s ≈ -13 and 0 below s ≈ -14.2. For `s > 0` it is `1 - Φ(-s)`, accurate to
/// about an ulp of the result.
#[inline(always)]
pub fn normal_cdf(s: f32) -> f32 {
    let a = f32::from_bits(s.to_bits() & 0x7FFF_FFFF);
    // Φ(-15) is 0 in f32; the clamp keeps inf out of the split below (NaN passes).
    let a = if a > 15.0 { 15.0 } else { a };
    // z^2 = a^2 / 2 from a split of `a` itself: z = a / √2 is rounded, and at large a the
    // exponent would turn that rounding into a relative error of 2 z^2 ulp.
    let (ah, al) = split(a);
    let nz2_hi = -0.5 * (ah * ah);
    let nz2_lo = -0.5 * (al * (a + ah));
    let z = a * core::f32::consts::FRAC_1_SQRT_2;
    let tail = 0.5 * erfc_core(z, nz2_hi, nz2_lo);
    if s > 0.0 { 1.0 - tail } else { tail }
}

/// GELU with the exact Gaussian CDF: `x Φ(x)`. Relative error follows [`normal_cdf`]'s (below
/// about 6e-7 for results above 1e-30).
#[inline(always)]
pub fn gelu_erf(x: f32) -> f32 {
    // Φ(x) is 0 below -15; the clamp avoids -inf * 0 = NaN (NaN passes).
    let xm = if x < -15.0 { -15.0 } else { x };
    xm * normal_cdf(x)
}

/// GELU with the tanh approximation: `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x^3)))`.
///
/// Relative error below about 3e-7 for results above 1e-30. Computed as `x / (1 + e^{-2u})`
/// (the same function) with `2u` evaluated in double-f32: for negative `x` the result is about
/// `x e^{2u}`, so half an ulp of error in `2u ≈ 70` would alone cost 4e-6 relative error.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    // Beyond ±12 the result is x or 0 in f32; the clamp keeps x^3 finite and inf out of the
    // splits (NaN passes).
    let xc = if x > 12.0 { 12.0 } else { x };
    let xc = if xc < -12.0 { -12.0 } else { xc };

    // x^2 = qh + ql, qh exact.
    let (xh, xl) = split(xc);
    let qh = xh * xh;
    let ql = xl * (xc + xh);
    // B x^2 = mh + ml, mh exact; ml gathers the terms below 2^-10 of it.
    let (qhh, qhl) = split(qh);
    let mh = GELU_B_HI * qhh;
    let ml = fmaf(GELU_B_HI, qhl, fmaf(GELU_B_LO, qh, (GELU_B_HI + GELU_B_LO) * ql));
    // A + B x^2 = th + tl.
    let (th, e) = two_sum(GELU_A_HI, mh);
    let tl = e + (GELU_A_LO + ml);
    // 2u = x (A + B x^2) = vh + vl, vh exact.
    let (thh, thl) = split(th);
    let vh = xh * thh;
    let vl = fmaf(xh, thl, fmaf(xl, th, xc * tl));

    // e^{-|2u|} never overflows; the sign of 2u is that of x.
    let neg = vh < 0.0;
    let e = exp_hl(if neg { vh } else { -vh }, if neg { vl } else { -vl });
    let s = recip_ge1(1.0 + e);
    // x < 0: x e^{2u} / (1 + e^{2u}); xc keeps -inf * 0 out.
    if x < 0.0 { xc * (e * s) } else { x * s }
}

/// [`gelu_erf`] for results stored in f16/bf16 (8 or 11 significant bits): the same erfc
/// fit, but `e^{-z^2}` from the hardware `2^x` without the exact split of `z^2`. Relative
/// error about 1e-5 (2e-5 deep in the tail), far below half an ulp of either 16-bit type, for
/// about half the instructions.
#[inline(always)]
pub fn gelu_erf_fast(x: f32) -> f32 {
    let a = f32::from_bits(x.to_bits() & 0x7FFF_FFFF);
    let a = if a > 15.0 { 15.0 } else { a };
    let z = a * core::f32::consts::FRAC_1_SQRT_2;
    let t = recip_ge1(fmaf(ERFC_A, z, 1.0));
    // Φ(-|x|) = erfc(|x| / √2) / 2 = e^{-x^2/2} t Q(t) / 2.
    let tail = 0.5 * exp2_approx(-0.5 * core::f32::consts::LOG2_E * (a * a)) * (t * erfc_q(t));
    let xm = if x < -15.0 { -15.0 } else { x };
    xm * if x > 0.0 { 1.0 - tail } else { tail }
}

/// [`gelu_tanh`] for results stored in f16/bf16: `2u` in plain f32 and the hardware `2^x`.
/// Relative error below about 1e-5 where the result is above 1e-30.
#[inline(always)]
pub fn gelu_tanh_fast(x: f32) -> f32 {
    let xc = if x > 12.0 { 12.0 } else { x };
    let xc = if xc < -12.0 { -12.0 } else { xc };
    let v = xc * fmaf(GELU_B_HI + GELU_B_LO, xc * xc, GELU_A_HI);
    let e = exp2_approx(-core::f32::consts::LOG2_E * f32::from_bits(v.to_bits() & 0x7FFF_FFFF));
    let s = recip_ge1(1.0 + e);
    if x < 0.0 { xc * (e * s) } else { x * s }
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

#[cfg(test)]
mod tests {
    extern crate std;

    #[test]
    fn fast_gelus_track_the_accurate_ones() {
        // The 16-bit forms need only ~1e-3; they stay within 3e-5 of the accurate forms
        // wherever the result is above 1e-30 (and are exactly 0 below that or equal in sign).
        let mut worst = [0.0f64; 2];
        let mut x = -14.0f32;
        while x < 14.0 {
            for (w, (fast, slow)) in
                worst.iter_mut().zip([(gelu_erf_fast(x), gelu_erf(x)), (gelu_tanh_fast(x), gelu_tanh(x))])
            {
                if slow.abs() > 1e-30 {
                    let e = ((fast - slow) / slow).abs() as f64;
                    assert!(e < 3e-5, "x {x}: fast {fast:e} vs {slow:e}");
                    *w = w.max(e);
                }
            }
            x += 0.000_7;
        }
        std::println!("fast gelu max relative deviation: erf {:e}, tanh {:e}", worst[0], worst[1]);
        assert!(gelu_erf_fast(f32::NAN).is_nan() && gelu_tanh_fast(f32::NAN).is_nan());
        assert_eq!(gelu_erf_fast(f32::INFINITY), f32::INFINITY);
    }

    use super::*;
    use proptest::prelude::*;
    use std::{println, vec::Vec};

    /// Results whose reference is below this are checked in absolute terms.
    const REL_FLOOR: f64 = 1e-30;
    const ABS_BOUND: f64 = 1e-35;

    /// Worst errors of `f` against the f64 reference `r` over `xs`.
    #[derive(Debug, Default)]
    struct Worst {
        rel: f64,
        rel_at: f32,
        abs: f64,
        abs_at: f32,
        count: usize,
    }

    /// Measures relative error where `|r(x)| >= floor` and absolute error below it; a NaN or
    /// infinite result for a finite reference counts as an infinite error.
    fn measure(f: impl Fn(f32) -> f32, r: impl Fn(f64) -> f64, xs: impl IntoIterator<Item = f32>, floor: f64) -> Worst {
        let mut w = Worst::default();
        for x in xs {
            let got = f(x) as f64;
            let want = r(x as f64);
            assert!(want.is_finite(), "reference not finite at {x:e}");
            let err = if got.is_finite() { (got - want).abs() } else { f64::INFINITY };
            if want.abs() >= floor {
                let rel = err / want.abs();
                if rel > w.rel {
                    (w.rel, w.rel_at) = (rel, x);
                }
            } else if err > w.abs {
                (w.abs, w.abs_at) = (err, x);
            }
            w.count += 1;
        }
        w
    }

    /// Asserts the bounds and prints what was observed, to show how tight they are.
    #[track_caller]
    fn check(
        name: &str,
        f: impl Fn(f32) -> f32,
        r: impl Fn(f64) -> f64,
        xs: impl IntoIterator<Item = f32>,
        rel_bound: f64,
        floor: f64,
        abs_bound: f64,
    ) {
        let w = measure(f, r, xs, floor);
        println!(
            "{name}: {} points, max rel {:.3e} at {:e} (bound {rel_bound:e}), max abs below \
             {floor:e} {:.3e} at {:e} (bound {abs_bound:e})",
            w.count, w.rel, w.rel_at, w.abs, w.abs_at
        );
        assert!(w.rel <= rel_bound, "{name}: relative error {:e} at {:e}", w.rel, w.rel_at);
        assert!(w.abs <= abs_bound, "{name}: absolute error {:e} at {:e}", w.abs, w.abs_at);
    }

    /// `lo, lo + step, ..., hi`, each rounded to f32.
    fn grid(lo: f64, hi: f64, step: f64) -> impl Iterator<Item = f32> {
        let n = ((hi - lo) / step).round() as u64;
        (0..=n).map(move |i| (lo + i as f64 * step) as f32)
    }

    /// ±x for x from 1e-30 to 1e-3, 200 points a decade, plus ±0.
    fn tiny() -> impl Iterator<Item = f32> {
        (0..=27 * 200).flat_map(|i| {
            let x = 10f64.powf(-30.0 + i as f64 / 200.0) as f32;
            [x, -x]
        })
    }

    /// Every `stride`-th f32 in `[lo, hi]` (same sign), walking the bit patterns, so every
    /// binade is covered evenly.
    fn f32_walk(lo: f32, hi: f32, stride: u32) -> impl Iterator<Item = f32> {
        let (a, b) = (lo.to_bits().min(hi.to_bits()), lo.to_bits().max(hi.to_bits()));
        (a..=b).step_by(stride as usize).map(f32::from_bits)
    }

    /// The usual inputs: every 1e-3 over [-20, 20], tiny values, and an f32 walk over ±[1e-3, 20].
    fn standard_inputs() -> Vec<f32> {
        let mut xs: Vec<f32> = grid(-20.0, 20.0, 1e-3).chain(tiny()).collect();
        xs.extend(f32_walk(1e-3, 20.0, 97));
        xs.extend(f32_walk(-1e-3, -20.0, 97));
        xs.extend([0.0, -0.0]);
        xs
    }

    fn exp_ref(x: f64) -> f64 {
        libm::exp(x)
    }

    fn erfc_ref(z: f64) -> f64 {
        libm::erfc(z)
    }

    fn normal_cdf_ref(s: f64) -> f64 {
        0.5 * libm::erfc(-s * core::f64::consts::FRAC_1_SQRT_2)
    }

    fn gelu_erf_ref(x: f64) -> f64 {
        x * normal_cdf_ref(x)
    }

    /// The tanh form where `1 + tanh(u)` keeps its precision in f64, and the equal
    /// `x e^{2u} / (1 + e^{2u})` below u = -5, where `1 + tanh(u)` would cancel.
    fn gelu_tanh_ref(x: f64) -> f64 {
        let u = (2.0 / core::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
        if u >= -5.0 {
            0.5 * x * (1.0 + libm::tanh(u))
        } else {
            let e = libm::exp(2.0 * u);
            x * e / (1.0 + e)
        }
    }

    fn sigmoid_ref(x: f64) -> f64 {
        1.0 / (1.0 + libm::exp(-x))
    }

    #[test]
    fn exp_sweep() {
        // Every 1e-3 over the whole finite range, an f32 walk, and tiny arguments.
        let mut xs: Vec<f32> = grid(-110.0, 88.72, 1e-3).chain(tiny()).collect();
        xs.extend(f32_walk(1e-8, 88.72283, 61));
        xs.extend(f32_walk(-1e-8, -110.0, 61));
        // Normal results relative, subnormal ones within two subnormal ulps (2^-148): the
        // rounding plus the mantissa's relative error at the top of the subnormal range.
        let min = f32::MIN_POSITIVE as f64;
        check("exp", exp, exp_ref, xs, 5e-7, min, 2.9e-45);
    }

    #[test]
    fn exp_special() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(1e-30), 1.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(-f32::INFINITY), 0.0);
        assert!(exp(f32::NAN).is_nan());
        assert!(exp(-f32::NAN).is_nan());
        assert_eq!(exp(f32::MAX), f32::INFINITY);
        assert_eq!(exp(-f32::MAX), 0.0);
        // ln(f32::MAX) = 88.722839...: the last finite result and the first overflow.
        let last = exp(88.72283);
        assert!(last.is_finite() && last > 3.4e38, "{last:e}");
        assert_eq!(exp(88.72284), f32::INFINITY);
        assert_eq!(exp(89.0), f32::INFINITY);
        // Gradual underflow: e^-100 = 3.72e-44 is subnormal, e^-104 is below 2^-150.
        assert!((exp(-100.0) as f64 - 3.720075976020836e-44).abs() <= 1.5e-45);
        assert_eq!(exp(-104.0), 0.0);
        assert_eq!(exp(-1000.0), 0.0);
    }

    #[test]
    fn erfc_pos_sweep() {
        let mut xs = standard_inputs();
        // The tail, densely, until the result is 0.
        xs.extend(f32_walk(1.0, 11.0, 17));
        check("erfc_pos", erfc_pos, erfc_ref, xs, 5e-6, REL_FLOOR, ABS_BOUND);
    }

    #[test]
    fn erfc_pos_special() {
        assert_eq!(erfc_pos(0.0), 1.0);
        assert_eq!(erfc_pos(-0.0), 1.0);
        assert_eq!(erfc_pos(f32::INFINITY), 0.0);
        assert_eq!(erfc_pos(f32::MAX), 0.0);
        assert_eq!(erfc_pos(11.0), 0.0);
        assert_eq!(erfc_pos(-f32::INFINITY), 2.0);
        assert!(erfc_pos(f32::NAN).is_nan());
        assert!(erfc_pos(-f32::NAN).is_nan());
        // Still a (subnormal) nonzero value past the normal range: erfc(9.5) = 6.3e-41.
        assert!(erfc_pos(9.5) > 0.0);
    }

    #[test]
    fn normal_cdf_sweep() {
        check("normal_cdf", normal_cdf, normal_cdf_ref, standard_inputs(), 5e-6, REL_FLOOR, ABS_BOUND);
    }

    #[test]
    fn normal_cdf_special() {
        assert_eq!(normal_cdf(0.0), 0.5);
        assert_eq!(normal_cdf(-0.0), 0.5);
        assert_eq!(normal_cdf(f32::INFINITY), 1.0);
        assert_eq!(normal_cdf(f32::MAX), 1.0);
        assert_eq!(normal_cdf(-f32::INFINITY), 0.0);
        assert_eq!(normal_cdf(-f32::MAX), 0.0);
        assert!(normal_cdf(f32::NAN).is_nan());
    }

    #[test]
    fn gelu_erf_sweep() {
        check("gelu_erf", gelu_erf, gelu_erf_ref, standard_inputs(), 5e-6, REL_FLOOR, ABS_BOUND);
    }

    #[test]
    fn gelu_erf_special() {
        assert_eq!(gelu_erf(0.0), 0.0);
        assert_eq!(gelu_erf(f32::INFINITY), f32::INFINITY);
        assert_eq!(gelu_erf(f32::MAX), f32::MAX);
        assert_eq!(gelu_erf(-f32::INFINITY), 0.0);
        assert_eq!(gelu_erf(-f32::MAX), 0.0);
        assert_eq!(gelu_erf(-1e6), 0.0);
        assert!(gelu_erf(f32::NAN).is_nan());
    }

    #[test]
    fn gelu_tanh_sweep() {
        check("gelu_tanh", gelu_tanh, gelu_tanh_ref, standard_inputs(), 5e-6, REL_FLOOR, ABS_BOUND);
    }

    #[test]
    fn gelu_tanh_reference_forms_agree() {
        // The two f64 forms used by the reference are the same function.
        for x in grid(-5.0, 5.0, 1e-3) {
            let x = x as f64;
            let u = (2.0 / core::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            let a = 0.5 * x * (1.0 + libm::tanh(u));
            let b = x / (1.0 + libm::exp(-2.0 * u));
            assert!((a - b).abs() <= 1e-12 * b.abs().max(1e-3), "{x}: {a} {b}");
        }
    }

    #[test]
    fn gelu_tanh_special() {
        assert_eq!(gelu_tanh(0.0), 0.0);
        assert_eq!(gelu_tanh(f32::INFINITY), f32::INFINITY);
        assert_eq!(gelu_tanh(f32::MAX), f32::MAX);
        assert_eq!(gelu_tanh(1e6), 1e6);
        assert_eq!(gelu_tanh(-f32::INFINITY), 0.0);
        assert_eq!(gelu_tanh(-f32::MAX), 0.0);
        assert_eq!(gelu_tanh(-1e6), 0.0);
        assert!(gelu_tanh(f32::NAN).is_nan());
    }

    #[test]
    fn sigmoid_sweep() {
        let mut xs = standard_inputs();
        xs.extend(grid(-110.0, 110.0, 1e-2));
        check("sigmoid", sigmoid, sigmoid_ref, xs, 5e-7, REL_FLOOR, ABS_BOUND);
    }

    #[test]
    fn sigmoid_special() {
        assert_eq!(sigmoid(0.0), 0.5);
        assert_eq!(sigmoid(f32::INFINITY), 1.0);
        assert_eq!(sigmoid(f32::MAX), 1.0);
        assert_eq!(sigmoid(-f32::INFINITY), 0.0);
        assert_eq!(sigmoid(-f32::MAX), 0.0);
        assert!(sigmoid(f32::NAN).is_nan());
    }

    #[test]
    fn relu_values() {
        assert_eq!(relu(3.5), 3.5);
        assert_eq!(relu(-3.5), 0.0);
        assert_eq!(relu(0.0), 0.0);
        assert_eq!(relu(-0.0), 0.0);
        assert_eq!(relu(f32::INFINITY), f32::INFINITY);
        assert_eq!(relu(-f32::INFINITY), 0.0);
        assert_eq!(relu(f32::MIN_POSITIVE), f32::MIN_POSITIVE);
        assert!(relu(f32::NAN).is_nan());
        assert!(relu(-f32::NAN).is_nan());
    }

    #[test]
    fn the_checks_catch_small_errors() {
        // A 1e-6 relative error must fail exp's bound, and 1e-5 the others'.
        let xs = || grid(-20.0, 20.0, 1e-2);
        let w = measure(|x| exp(x) * (1.0 + 1e-6), exp_ref, xs(), REL_FLOOR);
        assert!(w.rel > 5e-7, "{w:?}");
        let w = measure(|x| normal_cdf(x) * (1.0 + 1e-5), normal_cdf_ref, xs(), REL_FLOOR);
        assert!(w.rel > 5e-6, "{w:?}");
        // gelu_tanh with 2u in plain f32 misses the bound in the negative tail, which is why
        // gelu_tanh evaluates 2u in double-f32.
        let naive = |x: f32| {
            let v = x * fmaf(GELU_B_HI + GELU_B_LO, x * x, GELU_A_HI);
            x / (1.0 + exp(-v))
        };
        let w = measure(naive, gelu_tanh_ref, grid(-10.0, -3.0, 1e-4), REL_FLOOR);
        println!("naive gelu_tanh: {w:?}");
        assert!(w.rel > 5e-6, "{w:?}");
    }

    /// Relative error with the same floor as the sweeps, for the proptest cases.
    fn rel_err(got: f32, want: f64) -> f64 {
        let err = if got.is_finite() { (got as f64 - want).abs() } else { f64::INFINITY };
        if want.abs() >= REL_FLOOR { err / want.abs() } else { err / REL_FLOOR * ABS_BOUND }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        #[test]
        fn exp_random(x in -87.3f32..88.72) {
            prop_assert!(rel_err(exp(x), exp_ref(x as f64)) <= 5e-7);
        }

        #[test]
        fn erfc_pos_random(z in 0.0f32..10.5) {
            prop_assert!(rel_err(erfc_pos(z), erfc_ref(z as f64)) <= 5e-6);
        }

        #[test]
        fn normal_cdf_random(s in -16.0f32..16.0) {
            prop_assert!(rel_err(normal_cdf(s), normal_cdf_ref(s as f64)) <= 5e-6);
        }

        #[test]
        fn gelu_erf_random(x in -16.0f32..16.0) {
            prop_assert!(rel_err(gelu_erf(x), gelu_erf_ref(x as f64)) <= 5e-6);
        }

        #[test]
        fn gelu_tanh_random(x in -12.0f32..12.0) {
            prop_assert!(rel_err(gelu_tanh(x), gelu_tanh_ref(x as f64)) <= 5e-6);
        }

        #[test]
        fn sigmoid_random(x in -100.0f32..100.0) {
            prop_assert!(rel_err(sigmoid(x), sigmoid_ref(x as f64)) <= 5e-7);
        }

        #[test]
        fn any_bits_give_sane_results(bits in any::<u32>()) {
            // No panics (overflow checks are on in tests), NaN only for NaN, ranges respected.
            let x = f32::from_bits(bits);
            let outs = [exp(x), erfc_pos(x), normal_cdf(x), gelu_erf(x), gelu_tanh(x), sigmoid(x)];
            for y in outs {
                prop_assert_eq!(y.is_nan(), x.is_nan());
            }
            if !x.is_nan() {
                prop_assert!(outs[0] >= 0.0);
                prop_assert!((0.0..=2.0).contains(&outs[1]));
                prop_assert!((0.0..=1.0).contains(&outs[2]));
                prop_assert!((0.0..=1.0).contains(&outs[5]));
            }
        }
    }
}
