//! The elementwise maths over its whole input range on the CPU backend, for every dtype:
//! every f16 and every bf16 bit pattern, and a walk through the f32 bit patterns, with NaN,
//! ±inf, ±0, subnormals and the largest finite values, through the public API (so the
//! conversions, f16's hardware-converted blocks included, are part of what is checked).
//! Finite results against the f64 reference with the dtype's tolerance; the rest exactly.

use ferrotune::config::ElemConfig;
use ferrotune::ops::{self, Activation};
use ferrotune::{Buffer, ElemOp, Scalar, bf16, f16};
use ferrotune_testkit::{Tolerance, close, cpu_backend, reference};

/// The single-input ops whose maths is more than a copy.
const UNARY: [ElemOp; 4] = [ElemOp::GeluErf, ElemOp::GeluTanh, ElemOp::Relu, ElemOp::Scale];

/// Runs `op` on the CPU backend (chunks of 1000 elements, so tasks end mid-block too).
fn run<T: Scalar>(op: ElemOp, inputs: &[Vec<T>]) -> Vec<T> {
    let backend = cpu_backend();
    let s = backend.stream();
    let bufs: Vec<Buffer<T>> = inputs.iter().map(|v| Buffer::from_slice(&s, v).unwrap()).collect();
    let views: Vec<_> = bufs.iter().map(|b| b.all()).collect();
    let refs: Vec<_> = views.iter().collect();
    let mut out = Buffer::<T>::zeros(&s, inputs[0].len()).unwrap();
    let cfg = ElemConfig { cpu_chunk: 1000, ..ElemConfig::heuristic(op, T::DTYPE, None) };
    ops::run_elementwise(&s, op, &cfg, &refs, &mut out.all_mut(), 0.75).unwrap();
    out.to_vec(&s).unwrap()
}

/// What `op` must give for a non-finite input: NaN for NaN; the limits for ±inf.
fn non_finite(op: ElemOp, x: f32) -> f32 {
    match op {
        _ if x.is_nan() => f32::NAN,
        ElemOp::Scale => 0.75 * x,
        _ if x > 0.0 => f32::INFINITY,
        // GELU and relu of -inf: 0 (either sign).
        _ => 0.0,
    }
}

/// Checks every output of the unary ops on `xs`; returns how many were checked.
fn check_unary<T: Scalar>(xs: &[T]) -> usize {
    let tol = Tolerance::of(T::DTYPE);
    for op in UNARY {
        let got = run(op, &[xs.to_vec()]);
        for (x, g) in xs.iter().zip(&got) {
            let (x, g) = (x.to_f32(), g.to_f32());
            if x.is_finite() {
                let want = reference(op, 0.75, &[x as f64]);
                assert!(
                    close(g as f64, want, tol),
                    "{} {}: x {x:e} ({:#x}): got {g:e}, want {want:?}",
                    op.name(),
                    T::DTYPE.name(),
                    x.to_bits()
                );
            } else {
                let want = non_finite(op, x);
                let ok = if want.is_nan() { g.is_nan() } else { g == want };
                assert!(ok, "{} {}: x {x:e}: got {g:e}, want {want:e}", op.name(), T::DTYPE.name());
            }
        }
    }
    xs.len()
}

/// Every bit pattern of a 16-bit type.
fn every<T: Scalar>(from_bits: fn(u16) -> T) -> Vec<T> {
    (0..=u16::MAX).map(from_bits).collect()
}

#[test]
fn unary_ops_are_right_on_every_f16_and_bf16() {
    assert_eq!(check_unary(&every(f16::from_bits)), 65536);
    assert_eq!(check_unary(&every(bf16::from_bits)), 65536);
}

/// A walk through the f32 bit patterns (both signs, every binade) plus the edges.
fn f32_walk() -> Vec<f32> {
    let edges = [
        0.0f32,
        -0.0,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        1e-45,
        -1e-45,
        1e-40,
        -1e-40,
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        9.9,
        -9.9,
        12.9,
        -12.9,
        -13.0,
        -10.0,
    ];
    (0..u32::MAX / 4099).map(|i| f32::from_bits(i * 4099)).chain(edges).collect()
}

#[test]
fn unary_ops_are_right_over_the_f32_range() {
    assert!(check_unary(&f32_walk()) > 1_000_000);
}

#[test]
fn signed_zeros_and_subnormals_keep_their_sign_and_size() {
    // GELU(x) ~ x / 2 near 0, in every dtype: -0.0 stays -0.0, subnormals give half, rounded
    // to the dtype's subnormal quantum (f32 2^-149, bf16 2^-133, f16 2^-24).
    fn check<T: Scalar>(xs: &[f32], quantum: f32) {
        let inputs: Vec<T> = xs.iter().map(|&x| T::from_f32(x)).collect();
        for op in [ElemOp::GeluErf, ElemOp::GeluTanh] {
            for (x, g) in inputs.iter().zip(run(op, std::slice::from_ref(&inputs))) {
                let (x, g) = (x.to_f32(), g.to_f32());
                assert_eq!(
                    g.is_sign_negative(),
                    x.is_sign_negative(),
                    "{} {}: x {x:e} gave {g:e}",
                    op.name(),
                    T::DTYPE.name()
                );
                assert!(
                    (g - x / 2.0).abs() <= x.abs() * 1e-2 + quantum,
                    "{} {}: x {x:e} gave {g:e}",
                    op.name(),
                    T::DTYPE.name()
                );
            }
        }
    }
    let xs = [0.0, -0.0, 1e-45, -1e-45, 3e-40, -3e-40, 1e-38, -1e-38, 1e-7, -1e-7];
    check::<f32>(&xs, f32::from_bits(1));
    check::<bf16>(&xs, f32::from_bits(1 << 16));
    check::<f16>(&xs, 5.9604645e-8);
}

#[test]
fn fused_chains_are_right_on_large_and_special_values() {
    // (a + b) * c reaches far into both GELU tails (where the forms switch to their cut-offs),
    // in every dtype; NaN in any input gives NaN.
    fn check<T: Scalar>() {
        let tol = Tolerance::of(T::DTYPE);
        let vals: Vec<f32> = (-60..=60).map(|i| i as f32 * 0.37).chain([0.0, -0.0, 1e-40, 7.0e4]).collect();
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        for &x in &vals {
            for &y in &[1.0f32, -3.5, 0.5, 2.25] {
                a.push(T::from_f32(x));
                b.push(T::from_f32(y));
                c.push(T::from_f32(y * 0.75));
            }
        }
        a.push(T::from_f32(f32::NAN));
        b.push(T::from_f32(1.0));
        c.push(T::from_f32(1.0));
        for act in Activation::ALL {
            let op = ElemOp::Chain(act);
            let got = run(op, &[a.clone(), b.clone(), c.clone()]);
            for i in 0..got.len() {
                let x = [a[i], b[i], c[i]].map(|v| v.to_f32() as f64);
                let g = got[i].to_f32();
                let v = (x[0] + x[1]) * x[2];
                if v.is_nan() {
                    assert!(g.is_nan(), "{} {}: {x:?} gave {g:e}", op.name(), T::DTYPE.name());
                } else if v.abs() < f32::MAX as f64 {
                    let want = reference(op, 0.0, &x);
                    assert!(
                        close(g as f64, want, tol),
                        "{} {}: {x:?} gave {g:e}, want {want:?}",
                        op.name(),
                        T::DTYPE.name()
                    );
                }
            }
        }
    }
    check::<f32>();
    check::<bf16>();
    check::<f16>();
}
