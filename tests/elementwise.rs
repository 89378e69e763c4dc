//! The elementwise family against the f64 reference (CPU backend, proptest over lengths,
//! offsets and dtypes) and GPU against CPU on the same random inputs, for every compiled
//! variant. Outputs are poisoned first, and guard elements around each view must survive.

use ferrotune::config::ElemConfig;
use ferrotune::ops::{self, Activation};
use ferrotune::{Backend, Buffer, DType, ElemOp, ElemVariant, Scalar, bf16, f16};
use ferrotune_kernels::elementwise::ELEM_VARIANTS;
use ferrotune_testkit::{
    Rng, Tolerance, check_against_reference, close, cpu_backend, cuda_backend, poison, reference_at,
};
use proptest::prelude::*;

/// Guard elements before and after every view.
const GUARD: usize = 5;

/// Inputs of `op` (kernel order) for `n` outputs; bias has `cols` elements.
fn make_inputs<T: Scalar>(rng: &mut Rng, op: ElemOp, n: usize, cols: usize) -> Vec<Vec<T>> {
    match op {
        ElemOp::BiasAdd => vec![rng.vec(n, -4.0, 4.0), rng.vec(cols, -4.0, 4.0)],
        _ => (0..op.inputs()).map(|_| rng.vec(n, -4.0, 4.0)).collect(),
    }
}

/// Runs `op` on `backend` with each operand placed at element `offset` of a larger buffer, the
/// output poisoned; returns the output view's contents after checking the guards.
fn run_op<T: Scalar>(
    backend: &Backend,
    op: ElemOp,
    cfg: &ElemConfig,
    inputs: &[Vec<T>],
    offset: usize,
    alpha: f32,
) -> Result<Vec<T>, String> {
    let s = backend.stream();
    // The first tensor is full size for every op (bias_add: x comes before the bias).
    let n = inputs[0].len();
    let place = |data: &[T], fill: T| -> Vec<T> {
        let mut v = vec![fill; offset + data.len() + GUARD];
        v[offset..offset + data.len()].copy_from_slice(data);
        v
    };
    let bufs = |data: &[T]| Buffer::from_slice(&s, &place(data, T::from_f32(1.0))).map_err(|e| e.to_string());
    // In-place ops (axpy's y, bias_add's x) take their last/first tensor as the output.
    let (ins, out_init): (Vec<&Vec<T>>, Vec<T>) = match op {
        ElemOp::Axpy => (vec![&inputs[0]], inputs[1].clone()),
        ElemOp::BiasAdd => (vec![&inputs[1]], inputs[0].clone()),
        _ => (inputs.iter().collect(), vec![poison::<T>(); n]),
    };
    let in_bufs = ins.iter().map(|d| bufs(d)).collect::<Result<Vec<_>, _>>()?;
    let mut out = Buffer::from_slice(&s, &place(&out_init, poison::<T>())).map_err(|e| e.to_string())?;
    let views = in_bufs
        .iter()
        .zip(&ins)
        .map(|(b, d)| b.view(offset..offset + d.len()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let view_refs: Vec<_> = views.iter().collect();
    {
        let mut o = out.view_mut(offset..offset + n).map_err(|e| e.to_string())?;
        ops::run_elementwise(&s, op, cfg, &view_refs, &mut o, alpha).map_err(|e| e.to_string())?;
    }
    s.synchronize().map_err(|e| e.to_string())?;
    let all = out.to_vec(&s).map_err(|e| e.to_string())?;
    let guards_ok = all[..offset].iter().chain(&all[offset + n..]).all(|g| g.to_f32().is_nan());
    if !guards_ok {
        return Err(format!("{} wrote outside its output view (offset {offset}, n {n})", op.name()));
    }
    Ok(all[offset..offset + n].to_vec())
}

fn cols_for(n: usize, seed: u64) -> usize {
    // A divisor of n (bias rows must tile x), from the small ones up.
    let divisors: Vec<usize> = (1..=n.min(300)).filter(|d| n.is_multiple_of(*d)).collect();
    if divisors.is_empty() { 1 } else { divisors[seed as usize % divisors.len()] }
}

fn cpu_matches_reference<T: Scalar>(
    op: ElemOp,
    n: usize,
    offset: usize,
    seed: u64,
    chunk: usize,
) -> Result<(), String> {
    let backend = cpu_backend();
    let mut rng = Rng::new(seed);
    let cols = if n == 0 { 1 } else { cols_for(n, seed) };
    let inputs = make_inputs::<T>(&mut rng, op, n, cols);
    let alpha = rng.uniform(-2.0, 2.0);
    let cfg = ElemConfig { cpu_chunk: chunk, ..ElemConfig::heuristic(op, T::DTYPE, None) };
    let got = run_op(&backend, op, &cfg, &inputs, offset, alpha)?;
    let refs: Vec<&[T]> = inputs.iter().map(|v| v.as_slice()).collect();
    check_against_reference(op, alpha, &refs, &got)
}

fn for_dtype(dt: DType, op: ElemOp, n: usize, offset: usize, seed: u64, chunk: usize) -> Result<(), String> {
    match dt {
        DType::F32 => cpu_matches_reference::<f32>(op, n, offset, seed, chunk),
        DType::F16 => cpu_matches_reference::<f16>(op, n, offset, seed, chunk),
        DType::Bf16 => cpu_matches_reference::<bf16>(op, n, offset, seed, chunk),
    }
}

fn any_op() -> impl Strategy<Value = ElemOp> {
    prop::sample::select(ElemOp::ALL.to_vec())
}

fn any_dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(DType::ALL.to_vec())
}

/// Lengths: 0, 1, small odd ones, and larger ones that are not multiples of anything.
fn any_len() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0usize), Just(1usize), 2usize..40, 40usize..5000]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn cpu_backend_matches_f64_reference(
        op in any_op(), dt in any_dtype(), n in any_len(), offset in 0usize..4, seed in any::<u64>(),
        chunk in prop_oneof![Just(1usize), 2usize..64, Just(1usize << 16)],
    ) {
        let r = for_dtype(dt, op, n, offset, seed, chunk);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

#[test]
fn reference_check_catches_a_wrong_result() {
    // The harness itself must be able to fail: a result off by 1% in f32 is caught.
    let x = [1.0f32, 2.0];
    let y = [3.0f32, 4.0];
    let bad = [4.0f32, 6.06];
    assert!(check_against_reference(ElemOp::Add, 0.0, &[&x, &y], &bad).is_err());
    assert!(check_against_reference(ElemOp::Add, 0.0, &[&x, &y], &[4.0, 6.0]).is_ok());
    assert!(!close(f64::NAN, (1.0, 0.0), Tolerance::of(DType::F32)));
}

#[test]
fn gelu_tails_are_accurate_in_f32() {
    // Deep negative tails: gelu is tiny but must still be relatively accurate.
    let x: Vec<f32> = (0..2000).map(|i| -12.0 + i as f32 * 0.012).collect();
    let backend = cpu_backend();
    for op in [ElemOp::GeluErf, ElemOp::GeluTanh] {
        let got = run_op(&backend, op, &ElemConfig::heuristic(op, DType::F32, None), std::slice::from_ref(&x), 0, 0.0)
            .unwrap();
        check_against_reference(op, 0.0, &[&x], &got).unwrap();
    }
}

#[test]
fn sum_matches_f64_sum_on_cpu() {
    let backend = cpu_backend();
    let s = backend.stream();
    let mut rng = Rng::new(7);
    for n in [0usize, 1, 3, 17, 100_003] {
        let x: Vec<f32> = rng.vec(n, -1.0, 1.0);
        let buf = Buffer::from_slice(&s, &x).unwrap();
        for off in 0..n.min(3) {
            let got = ops::sum(&s, &buf.view(off..).unwrap()).unwrap() as f64;
            let want: f64 = x[off..].iter().map(|&v| v as f64).sum();
            let scale: f64 = x[off..].iter().map(|&v| v.abs() as f64).sum();
            assert!((got - want).abs() <= 1e-6 * scale + 1e-7, "n {n} off {off}: {got} vs {want}");
        }
    }
}

/// GPU vs CPU on identical inputs: every op, dtype and compiled variant, at lengths that hit
/// the vector body, the remainder loop and the scalar tail, at aligned and unaligned offsets.
#[test]
fn gpu_matches_cpu_for_every_variant() {
    let Some(gpu) = cuda_backend("gpu_matches_cpu_for_every_variant") else { return };
    let cpu = cpu_backend();
    let (mut checked, mut pruned) = (0, 0);
    for dt in DType::ALL {
        for op in ElemOp::ALL {
            // FERROTUNE_TEST_SMALL drops the large size (for runs under compute-sanitizer).
            let sizes: &[usize] = if std::env::var_os("FERROTUNE_TEST_SMALL").is_some() {
                &[1, 7, 33, 1000, 4099]
            } else {
                &[1, 7, 33, 1000, 4099, (1 << 20) + 3]
            };
            for (i, &n) in sizes.iter().enumerate() {
                for offset in [0usize, 1] {
                    for (j, variant) in ELEM_VARIANTS.iter().enumerate() {
                        // Offset 1 is unaligned for every dtype: the scalar variant runs instead.
                        let effective = ElemVariant { vec16: variant.vec16 && offset == 0, ..*variant };
                        let limit = ops::elementwise::max_threads(&gpu.stream(), op, dt, effective).unwrap().unwrap();
                        let threads = [64, 128, 256, 512, 1024, 96][(i + j) % 6];
                        let blocks_per_sm = [0, 1, 4][(i + j + offset) % 3];
                        let cfg = ElemConfig { threads, variant: *variant, blocks_per_sm, cpu_chunk: 1 << 16 };
                        if threads > limit {
                            // Too many registers for this block size: a typed error, no launch.
                            let r = match dt {
                                DType::F32 => gpu_vs_cpu::<f32>(&gpu, &cpu, op, &cfg, n, offset, 1),
                                DType::F16 => gpu_vs_cpu::<f16>(&gpu, &cpu, op, &cfg, n, offset, 1),
                                DType::Bf16 => gpu_vs_cpu::<bf16>(&gpu, &cpu, op, &cfg, n, offset, 1),
                            };
                            let e = r.expect_err("a block too large for the kernel's registers must be refused");
                            assert!(e.contains("threads per block") && e.contains("registers"), "{e}");
                            pruned += 1;
                            continue;
                        }
                        let seed = (checked as u64) << 8 | n as u64;
                        let r = match dt {
                            DType::F32 => gpu_vs_cpu::<f32>(&gpu, &cpu, op, &cfg, n, offset, seed),
                            DType::F16 => gpu_vs_cpu::<f16>(&gpu, &cpu, op, &cfg, n, offset, seed),
                            DType::Bf16 => gpu_vs_cpu::<bf16>(&gpu, &cpu, op, &cfg, n, offset, seed),
                        };
                        if let Err(e) = r {
                            panic!("{e} (config {cfg:?})");
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    println!("gpu_matches_cpu_for_every_variant: {checked} cases, {pruned} refused (block too large)");
}

fn gpu_vs_cpu<T: Scalar>(
    gpu: &Backend,
    cpu: &Backend,
    op: ElemOp,
    cfg: &ElemConfig,
    n: usize,
    offset: usize,
    seed: u64,
) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let cols = cols_for(n, seed);
    let inputs = make_inputs::<T>(&mut rng, op, n, cols);
    let alpha = rng.uniform(-2.0, 2.0);
    let g = run_op(gpu, op, cfg, &inputs, offset, alpha)?;
    let c = run_op(cpu, op, cfg, &inputs, offset, alpha)?;
    let refs: Vec<&[T]> = inputs.iter().map(|v| v.as_slice()).collect();
    check_against_reference(op, alpha, &refs, &g).map_err(|e| format!("GPU: {e}"))?;
    // GPU and CPU run the same maths; they may differ by the fma, the approximate reciprocal
    // and one output rounding: a few ulps, plus what the reference allows for intermediate
    // rounding (axpy's unfused product on the CPU, for instance).
    let tol = Tolerance::of(T::DTYPE);
    for (i, (a, b)) in g.iter().zip(&c).enumerate() {
        let ((_, slack), _) = reference_at(op, alpha, &refs, g.len(), i);
        let (a, b) = (a.to_f32() as f64, b.to_f32() as f64);
        if !close(a, (b, 4e-6 * b.abs() + 2.0 * slack), tol) {
            return Err(format!("{} {}: element {i}: GPU {a:e} vs CPU {b:e}", op.name(), T::DTYPE.name()));
        }
    }
    Ok(())
}

#[test]
fn gpu_sum_matches_cpu_sum() {
    let Some(gpu) = cuda_backend("gpu_sum_matches_cpu_sum") else { return };
    let s = gpu.stream();
    let mut rng = Rng::new(11);
    for n in [1usize, 2, 5, 1023, 1 << 20, (1 << 22) + 7] {
        let x: Vec<f32> = rng.vec(n, -1.0, 1.0);
        let buf = Buffer::from_slice(&s, &x).unwrap();
        for off in 0..n.min(4) {
            let got = ops::sum(&s, &buf.view(off..).unwrap()).unwrap() as f64;
            let want: f64 = x[off..].iter().map(|&v| v as f64).sum();
            let scale: f64 = x[off..].iter().map(|&v| v.abs() as f64).sum();
            assert!((got - want).abs() <= 1e-6 * scale + 1e-7, "n {n} off {off}: {got} vs {want}");
        }
    }
}

#[test]
fn public_wrappers_compute_their_ops() {
    // The convenience functions route to the right op and argument order (CPU; GPU too when
    // present).
    let mut backends = vec![cpu_backend()];
    backends.extend(cuda_backend("public_wrappers_compute_their_ops"));
    for b in backends {
        let s = b.stream();
        let x = Buffer::from_slice(&s, &[-1.0f32, 2.0, 3.0, -4.0]).unwrap();
        let y = Buffer::from_slice(&s, &[0.5f32, 0.5, 0.5, 0.5]).unwrap();
        let c = Buffer::from_slice(&s, &[2.0f32, 2.0, 2.0, 2.0]).unwrap();
        let mut o = Buffer::<f32>::zeros(&s, 4).unwrap();
        ops::scale(&s, 3.0, &x.all(), &mut o.all_mut()).unwrap();
        assert_eq!(o.to_vec(&s).unwrap(), [-3.0, 6.0, 9.0, -12.0]);
        ops::relu(&s, &x.all(), &mut o.all_mut()).unwrap();
        assert_eq!(o.to_vec(&s).unwrap(), [0.0, 2.0, 3.0, 0.0]);
        ops::add_mul_act(&s, Activation::Relu, &x.all(), &y.all(), &c.all(), &mut o.all_mut()).unwrap();
        assert_eq!(o.to_vec(&s).unwrap(), [0.0, 5.0, 7.0, 0.0]);
        let mut yy = Buffer::from_slice(&s, &[1.0f32; 4]).unwrap();
        ops::axpy(&s, 2.0, &x.all(), &mut yy.all_mut()).unwrap();
        assert_eq!(yy.to_vec(&s).unwrap(), [-1.0, 5.0, 7.0, -7.0]);
        let mut m = Buffer::from_slice(&s, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let bias = Buffer::from_slice(&s, &[10.0f32, 20.0]).unwrap();
        ops::bias_add_inplace(&s, &mut m.all_mut(), &bias.all(), 2, 2).unwrap();
        assert_eq!(m.to_vec(&s).unwrap(), [11.0, 22.0, 13.0, 24.0]);
        ops::gelu(&s, ops::GeluForm::Erf, &x.all(), &mut o.all_mut()).unwrap();
        let g = o.to_vec(&s).unwrap();
        assert!((g[1] - 1.954_499_7).abs() < 1e-5, "{g:?}"); // 2 Φ(2)
        ops::copy(&s, &y.all(), &mut o.all_mut()).unwrap();
        assert_eq!(o.to_vec(&s).unwrap(), [0.5; 4]);
        ops::add(&s, &x.all(), &y.all(), &mut o.all_mut()).unwrap();
        assert_eq!(o.to_vec(&s).unwrap(), [-0.5, 2.5, 3.5, -3.5]);
    }
}
