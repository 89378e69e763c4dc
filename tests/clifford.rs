//! The Clifford layer ops against the first-principles float64 reference (tests/clifford_ref.rs):
//! algebra sanity, the notes' hand-expanded 2D formulas, the CPU forward at random shapes and
//! dtypes (proptest), gradients against central finite differences of a float64 forward, FCGP,
//! GPU against CPU and the reference (outputs poisoned first), and the typed errors.

use ferrotune::ops::clifford::{
    self as cl, Clifford, CliffordConfig, CliffordVariant, FcgpWorkspace, fused_gelu_fcgp_norm, fused_gelu_sgp_norm,
    fused_gelu_sgp_norm_backward,
};
use ferrotune::ops::gemm::Precision;
use ferrotune::{Backend, Buffer, DType, Error, Scalar, bf16, f16};
use ferrotune_kernels::clifford::{BWD_VARIANTS, ROW_VARIANTS, fwd_variants};
use ferrotune_testkit::clifford_ref as r;
use ferrotune_testkit::{Rng, Tolerance, cpu_backend, cuda_backend, poison};
use proptest::prelude::*;

fn rand_mv(rng: &mut Rng, c: usize) -> Vec<f64> {
    (0..c).map(|_| rng.uniform(-1.0, 1.0) as f64).collect()
}

fn close_vec(a: &[f64], b: &[f64], tol: f64) -> bool {
    a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol)
}

#[test]
fn basis_blades_multiply_as_in_cl_p0() {
    // 2D: e1 e2 = e12, e2 e1 = -e12, e12 e12 = -1, e1 e1 = 1.
    assert_eq!(r::blade_product(0b01, 0b10), (1.0, 0b11));
    assert_eq!(r::blade_product(0b10, 0b01), (-1.0, 0b11));
    assert_eq!(r::blade_product(0b11, 0b11), (-1.0, 0));
    assert_eq!(r::blade_product(0b01, 0b01), (1.0, 0));
    // 3D: e123 e123 = -1, e13 e13 = -1, e1 e23 = e123, e2 e13 = -e123.
    assert_eq!(r::blade_product(0b111, 0b111), (-1.0, 0));
    assert_eq!(r::blade_product(0b101, 0b101), (-1.0, 0));
    assert_eq!(r::blade_product(0b001, 0b110), (1.0, 0b111));
    assert_eq!(r::blade_product(0b010, 0b101), (-1.0, 0b111));
    // Through whole multivectors: e12 * e12 = -1.
    let e12 = [0.0, 0.0, 0.0, 1.0];
    assert_eq!(r::gp(2, &e12, &e12), vec![-1.0, 0.0, 0.0, 0.0]);
}

#[test]
fn geometric_product_is_associative() {
    let mut rng = Rng::new(11);
    for dim in [2, 3] {
        let c = 1 << dim;
        for _ in 0..20 {
            let (a, b, d) = (rand_mv(&mut rng, c), rand_mv(&mut rng, c), rand_mv(&mut rng, c));
            let left = r::gp(dim, &r::gp(dim, &a, &b), &d);
            let right = r::gp(dim, &a, &r::gp(dim, &b, &d));
            assert!(close_vec(&left, &right, 1e-12), "dim {dim}: {left:?} vs {right:?}");
        }
    }
}

#[test]
fn notes_2d_formulas_agree_with_the_reference() {
    let mut rng = Rng::new(5);
    for _ in 0..50 {
        let (x, y) = (rand_mv(&mut rng, 4), rand_mv(&mut rng, 4));
        let w: Vec<f64> = (0..10).map(|_| rng.uniform(-1.0, 1.0) as f64).collect();
        let hand = [
            w[0] * x[0] * y[0] + w[3] * (x[1] * y[1] + x[2] * y[2]) - w[7] * x[3] * y[3],
            w[1] * x[0] * y[1] + w[4] * x[1] * y[0] - w[5] * x[2] * y[3] + w[8] * x[3] * y[2],
            w[1] * x[0] * y[2] + w[4] * x[2] * y[0] + w[5] * x[1] * y[3] - w[8] * x[3] * y[1],
            w[2] * x[0] * y[3] + w[6] * (x[1] * y[2] - x[2] * y[1]) + w[9] * x[3] * y[0],
        ];
        let (o, _) = r::weighted_product(2, &x, &y, &w);
        assert!(close_vec(&o, &hand, 1e-12), "{o:?} vs {hand:?}");
    }
}

#[test]
fn kernel_product_matches_the_reference_per_feature() {
    use ferrotune_kernels::clifford::{Algebra, Cl2, Cl3, MAX_C, MAX_W, product};
    fn check<A: Algebra>(dim: u32, rng: &mut Rng) {
        for _ in 0..50 {
            let (x, y) = (rand_mv(rng, A::C), rand_mv(rng, A::C));
            let w: Vec<f64> = (0..A::W).map(|_| rng.uniform(-1.0, 1.0) as f64).collect();
            let (mut xf, mut yf, mut wf) = ([0.0f32; MAX_C], [0.0f32; MAX_C], [0.0f32; MAX_W]);
            for c in 0..A::C {
                (xf[c], yf[c]) = (x[c] as f32, y[c] as f32);
            }
            for p in 0..A::W {
                wf[p] = w[p] as f32;
            }
            let got = product::<A>(&xf, &yf, &wf);
            let (want, mag) = r::weighted_product(dim, &x, &y, &w);
            for c in 0..A::C {
                assert!((got[c] as f64 - want[c]).abs() <= 1e-6 * (mag[c] + 1e-30), "dim {dim} c {c}");
            }
        }
    }
    let mut rng = Rng::new(2);
    check::<Cl2>(2, &mut rng);
    check::<Cl3>(3, &mut rng);
}

/// Inputs of one problem, rounded to `T`, and their f64 values.
pub(crate) struct Case<T> {
    pub(crate) p: Clifford,
    pub(crate) x: Vec<T>,
    pub(crate) y: Vec<T>,
    pub(crate) w: Vec<T>,
}

pub(crate) fn make_case<T: Scalar>(p: Clifford, fcgp: bool, seed: u64) -> Case<T> {
    let mut rng = Rng::new(seed);
    let len = p.mv_len().unwrap();
    let wl = if fcgp { p.fcgp_weights_len().unwrap() } else { p.sgp_weights_len().unwrap() };
    // FCGP sums over N features: smaller weights keep the outputs O(1).
    let ws = if fcgp { 1.0 / (p.n as f32).sqrt() } else { 1.0 };
    Case { p, x: rng.vec(len, -2.0, 2.0), y: rng.vec(len, -2.0, 2.0), w: rng.vec(wl, -ws, ws) }
}

pub(crate) fn f64s<T: Scalar>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| x.to_f32() as f64).collect()
}

/// Runs the SGP forward (or FCGP) on `backend` with `cfg` (None: the op's default); the output
/// is poisoned first.
fn run_forward<T: Scalar>(
    backend: &Backend,
    case: &Case<T>,
    cfg: Option<&CliffordConfig>,
    fcgp: bool,
    offset: usize,
) -> Result<Vec<T>, Error> {
    let s = backend.stream();
    let len = case.x.len();
    // Each operand at element `offset` of its buffer (offset 1 exercises the unaligned path).
    let place = |v: &[T]| {
        let mut b = vec![T::from_f32(0.0); offset];
        b.extend_from_slice(v);
        b
    };
    let x = Buffer::from_slice(&s, &place(&case.x))?;
    let y = Buffer::from_slice(&s, &place(&case.y))?;
    let w = Buffer::from_slice(&s, &case.w)?;
    let mut out = Buffer::from_slice(&s, &vec![poison::<T>(); len + offset])?;
    let (xv, yv) = (x.view(offset..)?, y.view(offset..)?);
    {
        let mut ov = out.view_mut(offset..)?;
        if fcgp {
            let mut ws = FcgpWorkspace::<T>::new(&s, &case.p)?.with_precision(Precision::Strict);
            match cfg {
                Some(c) => cl::run_fcgp_forward(&s, &case.p, c, &xv, &yv, &w.all(), &mut ws, &mut ov)?,
                None => fused_gelu_fcgp_norm(&s, &case.p, &xv, &yv, &w.all(), &mut ws, &mut ov)?,
            }
        } else {
            match cfg {
                Some(c) => cl::run_sgp_forward(&s, &case.p, c, &xv, &yv, &w.all(), &mut ov)?,
                None => fused_gelu_sgp_norm(&s, &case.p, &xv, &yv, &w.all(), &mut ov)?,
            }
        }
    }
    Ok(out.to_vec(&s)?[offset..].to_vec())
}

/// Compares with the f64 reference: `|got - want| <= rel * (|want| + scale)` (plus the dtype's
/// absolute floor), where `scale` is the sum of |terms| (f32 accumulation error grows with it).
fn check_forward<T: Scalar>(case: &Case<T>, got: &[T], fcgp: bool) -> Result<(), String> {
    let p = case.p;
    let (x, y, w) = (f64s(&case.x), f64s(&case.y), f64s(&case.w));
    let (want, scale) = if fcgp {
        r::fcgp_forward(p.dim, p.b, p.n, &x, &y, &w, p.normalize)
    } else {
        r::sgp_forward(p.dim, p.b, p.n, &x, &y, &w, p.normalize)
    };
    let tol = Tolerance::of(T::DTYPE);
    // f32 maths: a few roundings of every term (GEMM sums over N in FCGP).
    let rel = if T::DTYPE == DType::F32 { if fcgp { 2e-5 } else { 1e-5 } } else { tol.rel };
    for (i, g) in got.iter().enumerate() {
        let g = g.to_f32() as f64;
        let allowed = rel * (want[i].abs() + scale[i]) + tol.abs;
        if g.is_nan() || (g - want[i]).abs() > allowed {
            return Err(format!(
                "{p:?} {} fcgp {fcgp}: element {i} (component {}, row {}, feature {}): got {g:e}, want {:e} (allowed {allowed:e})",
                T::DTYPE.name(),
                i / (p.b * p.n),
                i / p.n % p.b,
                i % p.n,
                want[i]
            ));
        }
    }
    Ok(())
}

fn cpu_forward_case<T: Scalar>(p: Clifford, fcgp: bool, seed: u64, cpu_rows: usize) -> Result<(), String> {
    let case = make_case::<T>(p, fcgp, seed);
    let cfg = CliffordConfig { cpu_rows, ..CliffordConfig::heuristic(&p, T::DTYPE, None) };
    let got = run_forward(&cpu_backend(), &case, Some(&cfg), fcgp, 0).map_err(|e| e.to_string())?;
    check_forward(&case, &got, fcgp)
}

fn dispatch(dt: DType, p: Clifford, fcgp: bool, seed: u64, cpu_rows: usize) -> Result<(), String> {
    match dt {
        DType::F32 => cpu_forward_case::<f32>(p, fcgp, seed, cpu_rows),
        DType::F16 => cpu_forward_case::<f16>(p, fcgp, seed, cpu_rows),
        DType::Bf16 => cpu_forward_case::<bf16>(p, fcgp, seed, cpu_rows),
    }
}

/// Features: 1, small odd ones, below 32, not multiples of 4/8/32, and a few larger.
fn any_n() -> impl Strategy<Value = usize> {
    prop_oneof![Just(1usize), 2usize..40, prop::sample::select(vec![33usize, 63, 64, 100, 129])]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn cpu_sgp_forward_matches_f64_reference(
        dim in 2u32..4, b in prop_oneof![Just(1usize), 1usize..6], n in any_n(), normalize in any::<bool>(),
        dt in prop::sample::select(DType::ALL.to_vec()), cpu_rows in 1usize..4, seed in any::<u64>(),
    ) {
        let r = dispatch(dt, Clifford::new(dim, b, n, normalize), false, seed, cpu_rows);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }

    #[test]
    fn cpu_fcgp_forward_matches_f64_reference(
        dim in 2u32..4, b in 1usize..4, n in prop_oneof![Just(1usize), 2usize..20], normalize in any::<bool>(),
        dt in prop::sample::select(DType::ALL.to_vec()), seed in any::<u64>(),
    ) {
        let r = dispatch(dt, Clifford::new(dim, b, n, normalize), true, seed, 2);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

#[test]
fn forward_check_can_fail() {
    // One output off by 0.1% is caught in f32.
    let p = Clifford::new(3, 2, 5, true);
    let case = make_case::<f32>(p, false, 1);
    let mut got = run_forward(&cpu_backend(), &case, None, false, 0).unwrap();
    check_forward(&case, &got, false).unwrap();
    got[17] *= 1.001;
    assert!(check_forward(&case, &got, false).is_err());
}

/// Gradients of `L = sum(go * out)` by central differences of the float64 reference forward.
fn finite_differences(case: &Case<f32>, go: &[f64]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let p = case.p;
    let (x, y, w) = (f64s(&case.x), f64s(&case.y), f64s(&case.w));
    let loss = |x: &[f64], y: &[f64], w: &[f64]| {
        let (o, _) = r::sgp_forward(p.dim, p.b, p.n, x, y, w, p.normalize);
        o.iter().zip(go).map(|(a, b)| a * b).sum::<f64>()
    };
    let [gx, gy, gw] = r::central_differences([&x, &y, &w], 1e-5, loss);
    (gx, gy, gw)
}

/// `(dx, dy, dw)`.
pub(crate) type Grads<T> = (Vec<T>, Vec<T>, Vec<T>);

/// Runs the backward on `backend`; outputs poisoned first.
pub(crate) fn run_backward<T: Scalar>(
    backend: &Backend,
    case: &Case<T>,
    go: &[T],
    cfg: Option<&CliffordConfig>,
) -> Result<Grads<T>, Error> {
    let s = backend.stream();
    let len = case.x.len();
    let x = Buffer::from_slice(&s, &case.x)?;
    let y = Buffer::from_slice(&s, &case.y)?;
    let w = Buffer::from_slice(&s, &case.w)?;
    let g = Buffer::from_slice(&s, go)?;
    let mut dx = Buffer::from_slice(&s, &vec![poison::<T>(); len])?;
    let mut dy = Buffer::from_slice(&s, &vec![poison::<T>(); len])?;
    let mut dw = Buffer::from_slice(&s, &vec![poison::<T>(); case.w.len()])?;
    let mut ws = Buffer::<f32>::zeros(&s, 0)?;
    let p = &case.p;
    match cfg {
        Some(c) => cl::run_sgp_backward(
            &s,
            p,
            c,
            &x.all(),
            &y.all(),
            &w.all(),
            &g.all(),
            &mut dx.all_mut(),
            &mut dy.all_mut(),
            &mut dw.all_mut(),
            &mut ws,
        )?,
        None => fused_gelu_sgp_norm_backward(
            &s,
            p,
            &x.all(),
            &y.all(),
            &w.all(),
            &g.all(),
            &mut dx.all_mut(),
            &mut dy.all_mut(),
            &mut dw.all_mut(),
            &mut ws,
        )?,
    }
    Ok((dx.to_vec(&s)?, dy.to_vec(&s)?, dw.to_vec(&s)?))
}

/// `got` against `want` relative to the largest |want| of the tensor (gradients mix signs).
pub(crate) fn check_grad(what: &str, got: &[f64], want: &[f64], rel: f64) -> Result<(), String> {
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-12);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.is_nan() || (g - w).abs() > rel * scale {
            return Err(format!("{what}[{i}]: got {g:e}, want {w:e} (scale {scale:e})"));
        }
    }
    Ok(())
}

#[test]
fn cpu_gradients_match_finite_differences() {
    for (dim, b, n, normalize) in
        [(2, 2, 3, true), (2, 3, 1, false), (3, 2, 5, true), (3, 1, 4, false), (3, 3, 2, true), (2, 1, 7, true)]
    {
        let p = Clifford::new(dim, b, n, normalize);
        let case = make_case::<f32>(p, false, 7 + n as u64);
        let mut rng = Rng::new(3);
        let go: Vec<f32> = rng.vec(case.x.len(), -1.0, 1.0);
        let (dx, dy, dw) = run_backward(&cpu_backend(), &case, &go, None).unwrap();
        let (fx, fy, fw) = finite_differences(&case, &f64s(&go));
        let r = check_grad("dx", &f64s(&dx), &fx, 1e-4)
            .and_then(|_| check_grad("dy", &f64s(&dy), &fy, 1e-4))
            .and_then(|_| check_grad("dw", &f64s(&dw), &fw, 1e-4));
        assert!(r.is_ok(), "{p:?}: {}", r.unwrap_err());
    }
}

#[test]
fn gradient_check_can_fail() {
    let p = Clifford::new(2, 2, 3, true);
    let case = make_case::<f32>(p, false, 9);
    let go: Vec<f32> = Rng::new(1).vec(case.x.len(), -1.0, 1.0);
    let (_, _, dw) = run_backward(&cpu_backend(), &case, &go, None).unwrap();
    let (_, _, fw) = finite_differences(&case, &f64s(&go));
    let mut bad = f64s(&dw);
    bad[4] += 1e-3 * fw.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(check_grad("dw", &bad, &fw, 1e-4).is_err());
}

/// Shapes for the GPU: odd N, N < 32, N not a multiple of 4/8/32, larger rows, and rows whose
/// weights and weight gradient do not fit in shared memory (N = 3000: the backward's `_g`
/// entries).
const GPU_SHAPES: [(usize, usize); 10] =
    [(1, 1), (3, 7), (5, 31), (4, 32), (7, 100), (2, 129), (3, 512), (2, 1024), (5, 777), (1, 3000)];

fn gpu_forward_typed<T: Scalar>(gpu: &Backend, fcgp: bool) -> usize {
    let mut cases = 0;
    for dim in [2, 3] {
        for (i, &(b, n)) in GPU_SHAPES.iter().enumerate() {
            if fcgp && n > 129 || n > 1024 && T::DTYPE != DType::F32 {
                continue; // the f64 reference of FCGP is O(B N^2 W)
            }
            let p = Clifford::new(dim, b, n, i % 3 != 1);
            let case = make_case::<T>(p, fcgp, (dim as u64) << 8 | i as u64);
            // The default config, an unaligned view, and every compiled variant that covers N.
            let mut cfgs: Vec<(Option<CliffordConfig>, usize)> = vec![(None, 0), (None, 1)];
            // (The forward also has the streamed-weights variants; the FCGP assembly has no weights.)
            let variants: Vec<CliffordVariant> = if fcgp { ROW_VARIANTS.to_vec() } else { fwd_variants().collect() };
            for v in variants {
                let space = CliffordConfig::gpu_space(&p);
                if let Some(c) = space.into_iter().find(|c| c.variant == v && c.blocks_per_sm == 2) {
                    cfgs.push((Some(c), 0));
                }
            }
            let cpu = run_forward(&cpu_backend(), &case, None, fcgp, 0).unwrap();
            for (cfg, offset) in cfgs {
                let got = run_forward(gpu, &case, cfg.as_ref(), fcgp, offset)
                    .unwrap_or_else(|e| panic!("{p:?} {cfg:?}: {e}"));
                if let Err(e) = check_forward(&case, &got, fcgp) {
                    panic!("GPU {cfg:?} offset {offset}: {e}");
                }
                // GPU and CPU compute the same f32 maths in a different order (FCGP: GEMMs
                // summing N terms each).
                let tol = Tolerance::of(T::DTYPE).rel.max(if fcgp { 1e-4 } else { 1e-5 });
                for (j, (g, c)) in got.iter().zip(&cpu).enumerate() {
                    let (g, c) = (g.to_f32() as f64, c.to_f32() as f64);
                    assert!((g - c).abs() <= tol * (c.abs() + 1.0), "{p:?} {cfg:?}: element {j}: GPU {g} CPU {c}");
                }
                cases += 1;
            }
        }
    }
    cases
}

#[test]
fn gpu_clifford_forward_matches_reference_and_cpu() {
    let Some(gpu) = cuda_backend("gpu_clifford_forward_matches_reference_and_cpu") else { return };
    let n = gpu_forward_typed::<f32>(&gpu, false)
        + gpu_forward_typed::<bf16>(&gpu, false)
        + gpu_forward_typed::<f16>(&gpu, false);
    println!("gpu_clifford_forward_matches_reference_and_cpu: {n} cases");
}

#[test]
fn gpu_clifford_fcgp_matches_reference_and_cpu() {
    let Some(gpu) = cuda_backend("gpu_clifford_fcgp_matches_reference_and_cpu") else { return };
    let n = gpu_forward_typed::<f32>(&gpu, true) + gpu_forward_typed::<bf16>(&gpu, true);
    println!("gpu_clifford_fcgp_matches_reference_and_cpu: {n} cases");
}

/// FCGP in f32 on TF32 tensor cores (the default) against the exact-f32 run: inputs rounded to
/// 10-bit mantissas, so a relative error of a few 1e-4 of the row's scale.
#[test]
fn gpu_clifford_fcgp_tf32_is_close_to_exact() {
    let Some(gpu) = cuda_backend("gpu_clifford_fcgp_tf32_is_close_to_exact") else { return };
    let s = gpu.stream();
    for (dim, b, n) in [(2, 5, 64), (3, 3, 129)] {
        let p = Clifford::new(dim, b, n, true);
        let case = make_case::<f32>(p, true, 11);
        let exact = run_forward(&gpu, &case, None, true, 0).unwrap();
        let x = Buffer::from_slice(&s, &case.x).unwrap();
        let y = Buffer::from_slice(&s, &case.y).unwrap();
        let w = Buffer::from_slice(&s, &case.w).unwrap();
        let mut out = Buffer::from_slice(&s, &vec![poison::<f32>(); case.x.len()]).unwrap();
        let mut ws = FcgpWorkspace::<f32>::new(&s, &p).unwrap();
        fused_gelu_fcgp_norm(&s, &p, &x.all(), &y.all(), &w.all(), &mut ws, &mut out.all_mut()).unwrap();
        let tf32 = out.to_vec(&s).unwrap();
        for (j, (a, e)) in tf32.iter().zip(&exact).enumerate() {
            assert!((a - e).abs() <= 5e-3 * (e.abs() + 1.0), "{p:?}: element {j}: TF32 {a} exact {e}");
        }
    }
}

fn gpu_backward_typed<T: Scalar>(gpu: &Backend) {
    for dim in [2, 3] {
        for (i, &(b, n)) in GPU_SHAPES.iter().enumerate() {
            if n > 1024 && T::DTYPE != DType::F32 {
                continue; // the long rows once, in f32
            }
            let p = Clifford::new(dim, b, n, i % 3 != 1);
            let case = make_case::<T>(p, false, 100 + i as u64);
            let go: Vec<T> = Rng::new(i as u64).vec(case.x.len(), -1.0, 1.0);
            let (cx, cy, cw) = run_backward(&cpu_backend(), &case, &go, None).unwrap();
            let mut cfgs = vec![None];
            for vec in [true, false] {
                let mut c = CliffordConfig::heuristic(&p, T::DTYPE, None).backward_form();
                c.variant = CliffordVariant { vec, vpt: 0, stream_w: false };
                c.blocks_per_sm = 1; // many rows per block: the shared-memory accumulation
                if c.validate(&p, None).is_ok() {
                    cfgs.push(Some(c));
                }
            }
            // Every one-pass variant whose team of at most 256 covers N, one block per SM (each
            // team sums its weight gradient over many rows).
            for v in BWD_VARIANTS {
                let team = n.div_ceil(v.lanes() * v.vpt as usize).next_power_of_two() as u32;
                let threads = team.max(64);
                let c = CliffordConfig {
                    threads,
                    rows_per_block: threads / team,
                    variant: v,
                    blocks_per_sm: 1,
                    cpu_rows: 1,
                    cluster: 1,
                };
                if team <= 256 && c.validate_backward(&p, None).is_ok() {
                    cfgs.push(Some(c));
                }
            }
            for cfg in cfgs {
                let (gx, gy, gw) =
                    run_backward(gpu, &case, &go, cfg.as_ref()).unwrap_or_else(|e| panic!("{p:?} {cfg:?}: {e}"));
                // Against the CPU gradients (themselves checked against finite differences);
                // dw sums B * N terms in another order, hence the looser bound for 16-bit.
                let rel = if T::DTYPE == DType::F32 { 1e-4 } else { 2e-2 };
                let r = check_grad("dx", &f64s(&gx), &f64s(&cx), rel)
                    .and_then(|_| check_grad("dy", &f64s(&gy), &f64s(&cy), rel))
                    .and_then(|_| check_grad("dw", &f64s(&gw), &f64s(&cw), rel));
                assert!(r.is_ok(), "{} {p:?} {cfg:?}: {}", T::DTYPE.name(), r.unwrap_err());
            }
        }
    }
}

#[test]
fn gpu_clifford_backward_matches_cpu() {
    let Some(gpu) = cuda_backend("gpu_clifford_backward_matches_cpu") else { return };
    gpu_backward_typed::<f32>(&gpu);
    gpu_backward_typed::<bf16>(&gpu);
    gpu_backward_typed::<f16>(&gpu);
}

/// The shared-memory one-pass backward (`_p{n}s`) where each team visits several rows and a
/// block holds several teams (their weight-gradient areas summed at the end), against the CPU.
#[test]
fn gpu_clifford_backward_smem_many_rows() {
    let Some(gpu) = cuda_backend("gpu_clifford_backward_smem_many_rows") else { return };
    for dim in [2, 3] {
        for (i, &(b, n, normalize)) in
            [(2000usize, 100usize, true), (600, 512, true), (700, 77, false)].iter().enumerate()
        {
            let p = Clifford::new(dim, b, n, normalize);
            let case = make_case::<f32>(p, false, 300 + i as u64);
            let go: Vec<f32> = Rng::new(7 + i as u64).vec(case.x.len(), -1.0, 1.0);
            let (cx, cy, cw) = run_backward(&cpu_backend(), &case, &go, None).unwrap();
            let mut runs = 0;
            for v in BWD_VARIANTS.into_iter().filter(|v| v.stream_w) {
                let team = n.div_ceil(v.lanes() * v.vpt as usize).next_power_of_two() as u32;
                for threads in [team.max(32), (2 * team).max(64)] {
                    let c = CliffordConfig {
                        threads,
                        rows_per_block: threads / team,
                        variant: v,
                        blocks_per_sm: 1,
                        cpu_rows: 1,
                        cluster: 1,
                    };
                    if threads > 1024 || c.validate_backward(&p, None).is_err() {
                        continue;
                    }
                    let (gx, gy, gw) =
                        run_backward(&gpu, &case, &go, Some(&c)).unwrap_or_else(|e| panic!("{p:?} {c:?}: {e}"));
                    let r = check_grad("dx", &f64s(&gx), &f64s(&cx), 1e-4)
                        .and_then(|_| check_grad("dy", &f64s(&gy), &f64s(&cy), 1e-4))
                        .and_then(|_| check_grad("dw", &f64s(&gw), &f64s(&cw), 1e-4));
                    assert!(r.is_ok(), "{p:?} {c:?}: {}", r.unwrap_err());
                    runs += 1;
                }
            }
            assert!(runs >= 3, "{p:?}: only {runs} shared-memory configs ran");
        }
    }
}

/// N = 100,000 (B small): the forward streams its weights (no shared memory holds them), the
/// backward takes its split form (the heuristic) and the two-pass `_g` entries (weights in
/// global memory); all against the CPU.
#[test]
fn gpu_clifford_any_n() {
    let Some(gpu) = cuda_backend("gpu_clifford_any_n") else { return };
    for dim in [2, 3] {
        let p = Clifford::new(dim, 2, 100_000, true);
        let case = make_case::<f32>(p, false, 7);
        let got = run_forward(&gpu, &case, None, false, 0).unwrap_or_else(|e| panic!("{p:?}: {e}"));
        check_forward(&case, &got, false).unwrap_or_else(|e| panic!("GPU against the f64 reference: {e}"));
        // The CPU sums each row's 100,000 squares one after another in f32 (relative error up
        // to ~1e-4 in the norm), the GPU in a tree: hence the looser GPU-CPU bounds here.
        let cpu = run_forward(&cpu_backend(), &case, None, false, 0).unwrap();
        for (j, (g, c)) in got.iter().zip(&cpu).enumerate() {
            assert!((g - c).abs() <= 2e-3 * (c.abs() + 1.0), "{p:?}: element {j}: GPU {g} CPU {c}");
        }
        let go: Vec<f32> = Rng::new(3).vec(case.x.len(), -1.0, 1.0);
        let (cx, cy, cw) = run_backward(&cpu_backend(), &case, &go, None).unwrap();
        let two_pass = CliffordConfig::heuristic(&p, DType::F32, None).backward_form();
        for cfg in [None, Some(two_pass)] {
            let (gx, gy, gw) =
                run_backward(&gpu, &case, &go, cfg.as_ref()).unwrap_or_else(|e| panic!("{p:?} {cfg:?}: {e}"));
            let r = check_grad("dx", &f64s(&gx), &f64s(&cx), 2e-3)
                .and_then(|_| check_grad("dy", &f64s(&gy), &f64s(&cy), 2e-3))
                .and_then(|_| check_grad("dw", &f64s(&gw), &f64s(&cw), 2e-3));
            assert!(r.is_ok(), "{p:?} {cfg:?}: {}", r.unwrap_err());
        }
    }
    println!("gpu_clifford_any_n: N = 100000 forward and backward, 2D and 3D");
}

#[test]
fn clifford_bad_inputs_are_typed_errors() {
    let b = cpu_backend();
    let s = b.stream();
    let p = Clifford::new(3, 2, 4, true);
    let len = p.mv_len().unwrap();
    let x = Buffer::from_slice(&s, &vec![0.5f32; len]).unwrap();
    let short = Buffer::from_slice(&s, &vec![0.5f32; len - 1]).unwrap();
    let long = Buffer::from_slice(&s, &vec![0.5f32; len + 1]).unwrap();
    let w = Buffer::from_slice(&s, &vec![0.5f32; p.sgp_weights_len().unwrap()]).unwrap();
    let mut out = Buffer::<f32>::zeros(&s, len).unwrap();
    let e = fused_gelu_sgp_norm(&s, &p, &short.all(), &x.all(), &w.all(), &mut out.all_mut()).unwrap_err();
    assert!(matches!(e, Error::BufferTooSmall { what: "x", .. }), "{e}");
    let e = fused_gelu_sgp_norm(&s, &p, &x.all(), &long.all(), &w.all(), &mut out.all_mut()).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { what: "y", .. }), "{e}");
    let e = fused_gelu_sgp_norm(&s, &p, &x.all(), &x.all(), &x.all(), &mut out.all_mut()).unwrap_err();
    assert!(matches!(e, Error::BufferTooSmall { what: "w (N x W)", needed: 80, got: 64, .. }), "{e}");
    let bad_dim = Clifford::new(4, 2, 4, true);
    let e = fused_gelu_sgp_norm(&s, &bad_dim, &x.all(), &x.all(), &w.all(), &mut out.all_mut()).unwrap_err();
    assert!(matches!(e, Error::InvalidConfig { .. }), "{e}");
    let cfg = CliffordConfig { threads: 96, ..CliffordConfig::heuristic(&p, DType::F32, None) };
    let e = cl::run_sgp_forward(&s, &p, &cfg, &x.all(), &x.all(), &w.all(), &mut out.all_mut()).unwrap_err();
    assert!(matches!(e, Error::InvalidConfig { .. }), "{e}");
    // FCGP: the workspace must fit the problem.
    let small = Clifford::new(3, 1, 4, true);
    let mut ws = FcgpWorkspace::<f32>::new(&s, &small).unwrap();
    let wf = Buffer::from_slice(&s, &vec![0.5f32; p.fcgp_weights_len().unwrap()]).unwrap();
    let e = fused_gelu_fcgp_norm(&s, &p, &x.all(), &x.all(), &wf.all(), &mut ws, &mut out.all_mut()).unwrap_err();
    assert!(matches!(e, Error::BufferTooSmall { what: "FCGP workspace (products)", .. }), "{e}");
    // Empty batches are a no-op forward and a zero weight gradient.
    let empty = Clifford::new(2, 0, 3, true);
    let e0 = Buffer::<f32>::zeros(&s, 0).unwrap();
    let w0 = Buffer::from_slice(&s, &[1.0f32; 30]).unwrap();
    let mut o0 = Buffer::<f32>::zeros(&s, 0).unwrap();
    fused_gelu_sgp_norm(&s, &empty, &e0.all(), &e0.all(), &w0.all(), &mut o0.all_mut()).unwrap();
}
