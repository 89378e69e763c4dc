//! The GELU forms over their whole input range: no subnormal value anywhere (results and the
//! products that lead to them), the cut-offs, the 16-bit forms against the f64 reference, and
//! the special values (NaN, ±inf, ±0, subnormals, the largest finite) for all four forms.

extern crate std;

use super::*;
use std::vec::Vec;

/// One GELU form and its name.
type Form = (&'static str, fn(f32) -> f32);

/// The four forms, named, with the portable multiply-adds and with fused ones (the host's
/// AVX2/AVX-512 path).
const FORMS: [Form; 8] = [
    ("gelu_erf", gelu_erf),
    ("gelu_tanh", gelu_tanh),
    ("gelu_erf_fast", gelu_erf_fast),
    ("gelu_tanh_fast", gelu_tanh_fast),
    ("gelu_erf fused", |x| gelu_erf_with(StdFused, x)),
    ("gelu_tanh fused", |x| gelu_tanh_with(StdFused, x)),
    ("gelu_erf_fast fused", |x| gelu_erf_fast_with(StdFused, x)),
    ("gelu_tanh_fast fused", |x| gelu_tanh_fast_with(StdFused, x)),
];

/// Every 997th f32 bit pattern of both signs (every binade, about 2000 values in each), plus
/// the edges.
fn walk() -> Vec<f32> {
    let mut xs: Vec<f32> = (0..u32::MAX / 997).map(|i| f32::from_bits(i * 997)).collect();
    xs.extend([0.0, -0.0, f32::MIN_POSITIVE, -f32::MIN_POSITIVE, f32::MAX, f32::MIN, 9.9, -9.9, 12.9, -12.9]);
    xs
}

fn subnormal(y: f32) -> bool {
    y != 0.0 && y.abs() < f32::MIN_POSITIVE
}

#[test]
fn no_form_returns_a_subnormal_for_a_normal_input() {
    // The result of a normal input is 0, or at least f32::MIN_POSITIVE in magnitude: in the
    // tails the forms stop at their cut-off instead of underflowing gradually. (An input below
    // 2 f32::MIN_POSITIVE gives about half of itself, a subnormal, as x Φ(x) must.)
    for x in walk().into_iter().filter(|x| x.is_normal() && x.abs() >= 2.0 * f32::MIN_POSITIVE) {
        for (name, f) in FORMS {
            let y = f(x);
            assert!(!subnormal(y), "{name}({x:e}) = {y:e} is subnormal");
        }
    }
}

#[test]
fn the_exponentials_inside_stay_normal_up_to_the_cut_offs() {
    // The smallest factors the forms compute: e^{-x^2/2} at |x| = 12.9, e^{-|2u|} at 9.9.
    for (qh, ql) in [square(crate::arch::Portable, 12.9), square(StdFused, 12.9)] {
        assert!(exp_normal(crate::arch::Portable, -0.5 * qh, -0.5 * ql).is_normal());
    }
    assert!(exp2_poly(-0.5 * core::f32::consts::LOG2_E * 12.9 * 12.9).is_normal());
    let v = 9.9f32 * (1.5957692 + 0.0713548 * 9.9 * 9.9);
    assert!(
        exp_normal(crate::arch::Portable, -v, 0.0).is_normal() && exp2_poly(-core::f32::consts::LOG2_E * v).is_normal()
    );
    // Beyond the cut-offs: exactly x above, -0.0 below.
    for (name, f) in FORMS {
        for x in [13.0f32, 20.0, 1e6, f32::MAX] {
            assert_eq!(f(x), x, "{name}({x})");
            assert_eq!(f(-x).to_bits(), (-0.0f32).to_bits(), "{name}({})", -x);
        }
    }
}

#[test]
fn every_form_handles_the_special_values() {
    for (name, f) in FORMS {
        assert!(f(f32::NAN).is_nan() && f(-f32::NAN).is_nan(), "{name}: NaN");
        assert!(f(f32::from_bits(0x7f80_0001)).is_nan(), "{name}: signalling NaN");
        assert_eq!(f(f32::INFINITY), f32::INFINITY, "{name}: +inf");
        assert_eq!(f(f32::NEG_INFINITY), 0.0, "{name}: -inf");
        assert_eq!(f(0.0).to_bits(), 0, "{name}: +0");
        assert_eq!(f(-0.0).to_bits(), (-0.0f32).to_bits(), "{name}: -0");
        // Subnormal and tiny inputs: x Φ(x) = x / 2 (to the forms' relative error).
        for x in [1e-45f32, 3e-41, 1e-39, f32::MIN_POSITIVE, 1e-30, 1e-20] {
            for x in [x, -x] {
                let y = f(x);
                assert!((y - x * 0.5).abs() <= 1e-45 + (x * 0.5).abs() * 3e-5, "{name}({x:e}) = {y:e}");
                assert_eq!(y.is_sign_negative(), x.is_sign_negative(), "{name}({x:e}) = {y:e}");
            }
        }
    }
}

fn gelu_erf_ref(x: f64) -> f64 {
    0.5 * x * libm::erfc(-x * core::f64::consts::FRAC_1_SQRT_2)
}

fn gelu_tanh_ref(x: f64) -> f64 {
    let u = (2.0 / core::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
    x / (1.0 + libm::exp(-2.0 * u))
}

#[test]
fn the_16_bit_forms_are_within_3e_5_of_the_f64_reference_everywhere() {
    // Relative where the reference is above 2e-36 (3e-5 is a sixteenth of f16's half ulp),
    // absolute 2e-36 below it (the cut-offs' flush to -0.0); on the whole walk, so large |x|
    // and the cut-offs are included.
    for (name, f, r) in [
        ("gelu_erf_fast", gelu_erf_fast as fn(f32) -> f32, gelu_erf_ref as fn(f64) -> f64),
        ("gelu_tanh_fast", gelu_tanh_fast, gelu_tanh_ref),
        ("gelu_erf_fast fused", FORMS[6].1, gelu_erf_ref),
        ("gelu_tanh_fast fused", FORMS[7].1, gelu_tanh_ref),
    ] {
        let mut worst = (0.0f64, 0.0f32);
        for x in walk().into_iter().filter(|x| x.is_finite()) {
            let (got, want) = (f(x) as f64, r(x as f64));
            if want.abs() >= 2e-36 {
                let e = (got - want).abs() / want.abs();
                if e > worst.0 {
                    worst = (e, x);
                }
            } else {
                assert!((got - want).abs() <= 2e-36, "{name}({x:e}) = {got:e}, want {want:e}");
            }
        }
        std::println!("{name}: max relative error {:e} at {:e}", worst.0, worst.1);
        assert!(worst.0 < 3e-5, "{name}: relative error {:e} at {:e}", worst.0, worst.1);
    }
}
