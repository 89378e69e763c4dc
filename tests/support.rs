//! Float64 references, tolerances by dtype and random inputs: what the tests and the bench
//! check every kernel against. Written from the ops' definitions, independently of the f32
//! kernel maths in `kernels-gpu` (libm's f64 `erf`, `tanh`).

pub mod clifford_ref;

use ferrotune::{Backend, BackendChoice, DType, ElemOp, Scalar};
use ferrotune_kernels::elementwise::Activation;

/// Relative and absolute tolerance for results stored in `dtype`.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    pub rel: f64,
    pub abs: f64,
}

impl Tolerance {
    pub fn of(dtype: DType) -> Tolerance {
        match dtype {
            DType::F32 => Tolerance { rel: 1e-5, abs: 1e-30 },
            // f16 rounds to 11 significant bits; below 6e-5 it is subnormal (spacing 6e-8).
            DType::F16 => Tolerance { rel: 1e-2, abs: 1e-7 },
            DType::Bf16 => Tolerance { rel: 1e-2, abs: 1e-30 },
        }
    }
}

/// Unit roundoff of f32, the precision every op computes in.
const U32: f64 = 1.0 / (1u64 << 24) as f64;

// Both written without `1 + erf` / `1 + tanh`, which cancel to 0 in the negative tail even in
// f64: Φ(x) = erfc(-x/√2)/2 and (1 + tanh u)/2 = 1/(1 + e^(-2u)) are exact identities.
fn gelu_erf(x: f64) -> f64 {
    0.5 * x * libm::erfc(-x / std::f64::consts::SQRT_2)
}

fn gelu_tanh(x: f64) -> f64 {
    let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
    x / (1.0 + (-2.0 * u).exp())
}

/// An activation in float64 (the reference for elementwise chains and GEMM epilogues).
pub fn activation_f64(a: Activation, x: f64) -> f64 {
    match a {
        Activation::None => x,
        Activation::Relu => x.max(0.0),
        Activation::GeluErf => gelu_erf(x),
        Activation::GeluTanh => gelu_tanh(x),
    }
}

/// The exact result of `op` on f64 inputs, and the slack that f32 evaluation of its
/// intermediate steps may add (found by perturbing those steps by a few f32 roundings).
/// `x` holds the op's inputs in kernel order: `[x]`, `[a, b]`, `[x, y]` (axpy), `[a, b, c]`,
/// `[x, bias]`.
pub fn reference(op: ElemOp, alpha: f64, x: &[f64]) -> (f64, f64) {
    let spread = |f: &dyn Fn(f64) -> f64, v: f64| {
        let r = f(v);
        let lo = f(v * (1.0 - 4.0 * U32));
        let hi = f(v * (1.0 + 4.0 * U32));
        (r, (lo - r).abs().max((hi - r).abs()))
    };
    match op {
        ElemOp::Copy => (x[0], 0.0),
        ElemOp::Scale => (alpha * x[0], 0.0),
        ElemOp::Relu => (x[0].max(0.0), 0.0),
        ElemOp::GeluErf => spread(&gelu_erf, x[0]),
        ElemOp::GeluTanh => spread(&gelu_tanh, x[0]),
        ElemOp::Add | ElemOp::BiasAdd => (x[0] + x[1], 0.0),
        // The CPU backend does not fuse the multiply-add: allow one rounding of alpha * x.
        ElemOp::Axpy => (alpha * x[0] + x[1], 2.0 * U32 * (alpha * x[0]).abs()),
        ElemOp::Chain(a) => spread(&|v| activation_f64(a, v), (x[0] + x[1]) * x[2]),
    }
}

/// Does `got` match the reference `(want, slack)` within `tol`? NaN never matches.
pub fn close(got: f64, (want, slack): (f64, f64), tol: Tolerance) -> bool {
    if got.is_nan() || want.is_nan() {
        return false;
    }
    (got - want).abs() <= tol.abs + slack + tol.rel * want.abs()
}

/// A small, fast, seedable generator (SplitMix64): reproducible random inputs everywhere.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }
    /// `n` values uniform in `[lo, hi)`, rounded to `T`; never all zeros.
    pub fn vec<T: Scalar>(&mut self, n: usize, lo: f32, hi: f32) -> Vec<T> {
        (0..n).map(|_| T::from_f32(self.uniform(lo, hi))).collect()
    }
}

/// The CUDA backend when a device (and the PTX) is present; `None` after printing why, so a
/// GPU test can end with "skipped: no CUDA device".
pub fn cuda_backend(test: &str) -> Option<Backend> {
    match Backend::new(BackendChoice::Cuda) {
        Ok(b) => Some(b),
        // On the GPU machine a skip would hide a broken setup: FERROTUNE_REQUIRE_GPU=1 makes it
        // a failure.
        Err(e) if std::env::var_os("FERROTUNE_REQUIRE_GPU").is_some() => {
            panic!("{test}: FERROTUNE_REQUIRE_GPU is set but the CUDA backend failed: {e}")
        }
        Err(e) => {
            println!("{test}: skipped: no CUDA device ({e})");
            None
        }
    }
}

/// The CPU backend (always available).
pub fn cpu_backend() -> Backend {
    Backend::new(BackendChoice::Cpu).expect("a rayon pool can always be built")
}

/// Value that no kernel produces from finite inputs, written into outputs before a run so
/// that an element the kernel never wrote shows up as a mismatch.
pub fn poison<T: Scalar>() -> T {
    T::from_f32(f32::NAN)
}

/// The reference (value, slack) of element `i` of an op with `n` outputs, and the inputs it
/// used (bias is broadcast by `i % cols`).
pub fn reference_at<T: Scalar>(op: ElemOp, alpha: f32, inputs: &[&[T]], n: usize, i: usize) -> ((f64, f64), Vec<f64>) {
    let x: Vec<f64> = inputs
        .iter()
        .map(|v| if op == ElemOp::BiasAdd && v.len() != n { v[i % v.len()] } else { v[i] })
        .map(|v| v.to_f32() as f64)
        .collect();
    (reference(op, alpha as f64, &x), x)
}

/// Checks `got` (one output per element) against the f64 reference of `op` over `inputs`
/// (each of the op's input tensors; bias is broadcast by `i % cols`). Returns the index and
/// values of the first mismatch.
pub fn check_against_reference<T: Scalar>(op: ElemOp, alpha: f32, inputs: &[&[T]], got: &[T]) -> Result<(), String> {
    let tol = Tolerance::of(T::DTYPE);
    for (i, g) in got.iter().enumerate() {
        let (want, x) = reference_at(op, alpha, inputs, got.len(), i);
        let g = g.to_f32() as f64;
        if !close(g, want, tol) {
            return Err(format!(
                "{} {}: element {i} of {}: got {g:e}, want {:e} (+-{:e}), inputs {x:?}",
                op.name(),
                T::DTYPE.name(),
                got.len(),
                want.0,
                tol.abs + want.1 + tol.rel * want.0.abs()
            ));
        }
    }
    Ok(())
}

/// Element `(i, j)` of batch `z` of `op(A) op(B)` for a resolved GEMM, in float64: the dot
/// product and the sum of the absolute values of its terms (the scale rounding errors grow with).
pub fn gemm_dot<T: Scalar>(
    g: &ferrotune::ops::gemm::Gemm,
    a: &[T],
    b: &[T],
    z: usize,
    i: usize,
    j: usize,
) -> (f64, f64) {
    let (mut acc, mut mag) = (0.0f64, 0.0f64);
    for kk in 0..g.k {
        let av = a[z * g.stride_a + g.a_layout.index(i, kk, g.lda)].to_f32() as f64;
        let bv = b[z * g.stride_b + g.b_layout.index(kk, j, g.ldb)].to_f32() as f64;
        acc += av * bv;
        mag += (av * bv).abs();
    }
    (acc, mag)
}

/// The error a GEMM element may carry: `acc_rel` of the sum of |terms| `mag` for the inputs'
/// arithmetic (TF32 drops 13 mantissa bits of each input: products are off by up to 2^-9),
/// plus the rounding of the output type at `want`, with 20% headroom.
pub fn gemm_allowed(g: &ferrotune::ops::gemm::Gemm, input: DType, out: DType, mag: f64, want: f64) -> f64 {
    let acc_rel = if input == DType::F32 && g.precision.uses_tf32() { 2e-5 + 2f64.powi(-9) } else { 2e-5 };
    let tol = Tolerance::of(out);
    1.2 * (acc_rel * mag + tol.rel * want.abs() + tol.abs)
}

/// Checks `d` (the output of the resolved GEMM `g` with plain or bias+activation epilogue,
/// beta = 0) against float64 dot products: the four corners and the centre of the first and
/// last matrix of the batch, then `samples` seeded random elements. The first mismatch (or
/// unwritten NaN) is the error.
pub fn gemm_check_samples<T: Scalar, O: Scalar>(
    g: &ferrotune::ops::gemm::Gemm,
    a: &[T],
    b: &[T],
    d: &[O],
    bias: Option<&[O]>,
    samples: usize,
    seed: u64,
) -> Result<(), String> {
    let r = g.resolved();
    if r.m == 0 || r.n == 0 || r.batch == 0 {
        return Ok(());
    }
    let (lm, ln, lz) = (r.m - 1, r.n - 1, r.batch - 1);
    let mut at: Vec<(usize, usize, usize)> = Vec::with_capacity(samples + 10);
    for z in [0, lz] {
        at.extend([(z, 0, 0), (z, 0, ln), (z, lm, 0), (z, lm, ln), (z, r.m / 2, r.n / 2)]);
    }
    let mut rng = Rng::new(seed);
    for _ in 0..samples {
        let pick = |rng: &mut Rng, n: usize| (rng.next_u64() % n as u64) as usize;
        at.push((pick(&mut rng, r.batch), pick(&mut rng, r.m), pick(&mut rng, r.n)));
    }
    for (z, i, j) in at {
        let (acc, mag) = gemm_dot(&r, a, b, z, i, j);
        let mut v = r.epilogue.alpha as f64 * acc;
        if let (true, Some(bias)) = (r.epilogue.bias, bias) {
            v += bias[j].to_f32() as f64;
        }
        let want = activation_f64(r.epilogue.act, v);
        let got = d[z * r.stride_c + i * r.ldc + j].to_f32() as f64;
        let allowed = gemm_allowed(&r, T::DTYPE, O::DTYPE, mag * r.epilogue.alpha.abs() as f64, want);
        if got.is_nan() || (got - want).abs() > allowed {
            return Err(format!("element ({z}, {i}, {j}): got {got:e}, want {want:e} (allowed {allowed:e})"));
        }
    }
    Ok(())
}
