//! GEMM against a float64 reference: CPU backend over random shapes (proptest), GPU over the
//! edge shapes {1, 2, 15, 17, 31, 33, 127, 129}, large K, every layout, batches, epilogues,
//! unaligned leading dimensions, every compiled tile, TF32 and exact f32, pointer-array
//! batches; outputs poisoned first. Plus the typed errors.

use ferrotune::ops::gemm::{Epilogue, Gemm, Layout, Precision, gemm, gemm_ptr_array};
use ferrotune::ops::{self, Activation};
use ferrotune::{Backend, Buffer, DType, Error, Scalar, bf16, f16};
use ferrotune_testkit::{Rng, Tolerance, activation_f64, cpu_backend, cuda_backend, gemm_dot, poison};
use proptest::prelude::*;

/// Inputs of one random problem, on the host.
#[derive(Clone)]
pub(crate) struct Case<T, O> {
    pub(crate) g: Gemm,
    pub(crate) a: Vec<T>,
    pub(crate) b: Vec<T>,
    pub(crate) c: Vec<O>,
    pub(crate) bias: Vec<O>,
}

pub(crate) fn make_case<T: Scalar, O: Scalar>(rng: &mut Rng, g: Gemm) -> Case<T, O> {
    let r = g.resolved();
    let len = |stride: usize, rows: usize, ld: usize| if r.batch == 0 { 0 } else { (r.batch - 1) * stride + rows * ld };
    let (ar, br) =
        (if r.a_layout == Layout::Row { r.m } else { r.k }, if r.b_layout == Layout::Row { r.k } else { r.n });
    Case {
        g,
        a: rng.vec(len(r.stride_a, ar, r.lda), -1.0, 1.0),
        b: rng.vec(len(r.stride_b, br, r.ldb), -1.0, 1.0),
        c: rng.vec(len(r.stride_c, r.m, r.ldc), -1.0, 1.0),
        bias: rng.vec(r.n, -1.0, 1.0),
    }
}

/// Runs the case on `backend`; returns D (poisoned before the run).
pub(crate) fn run<T: Scalar, O: Scalar>(backend: &Backend, case: &Case<T, O>) -> Result<Vec<O>, Error> {
    let s = backend.stream();
    let r = case.g.resolved();
    let a = Buffer::from_slice(&s, &case.a)?;
    let b = Buffer::from_slice(&s, &case.b)?;
    let c = Buffer::from_slice(&s, &case.c)?;
    let bias = Buffer::from_slice(&s, &case.bias)?;
    let mut d = Buffer::from_slice(&s, &vec![poison::<O>(); case.c.len()])?;
    let (cv, bv) = (c.all(), bias.all());
    gemm::<T, O>(
        &s,
        &case.g,
        &a.all(),
        &b.all(),
        (r.epilogue.beta != 0.0).then_some(&cv),
        r.epilogue.bias.then_some(&bv),
        &mut d.all_mut(),
    )?;
    d.to_vec(&s)
}

/// Compares D with the f64 reference; elements outside the m x n windows must stay poisoned.
pub(crate) fn check<T: Scalar, O: Scalar>(case: &Case<T, O>, d: &[O]) -> Result<(), String> {
    let r = case.g.resolved();
    let e = r.epilogue;
    // f32 accumulation over k terms: allow 2e-5 of the sum of |terms| (random-sign sums stay
    // far below the k * 2^-24 worst case); then the output dtype's rounding. TF32 drops the
    // low 13 mantissa bits of both inputs: each product is off by up to 2^-9 of its size.
    let tf32 = T::DTYPE == DType::F32 && r.precision.uses_tf32();
    let acc_rel = if tf32 { 2e-5 + 2f64.powi(-9) } else { 2e-5 };
    let tol = Tolerance::of(O::DTYPE);
    let mut written = vec![false; d.len()];
    for z in 0..r.batch {
        for i in 0..r.m {
            for j in 0..r.n {
                let (acc, mag) = gemm_dot(&r, &case.a, &case.b, z, i, j);
                let idx = z * r.stride_c + i * r.ldc + j;
                let mut v = e.alpha as f64 * acc;
                let mut scale = (e.alpha as f64).abs() * mag;
                if e.beta != 0.0 {
                    let cv = case.c[idx].to_f32() as f64;
                    v += e.beta as f64 * cv;
                    scale += (e.beta as f64 * cv).abs();
                }
                if e.bias {
                    let bv = case.bias[j].to_f32() as f64;
                    v += bv;
                    scale += bv.abs();
                }
                let want = activation_f64(e.act, v);
                let delta = acc_rel * scale + 1e-30;
                let spread = (activation_f64(e.act, v + delta) - want)
                    .abs()
                    .max((activation_f64(e.act, v - delta) - want).abs());
                let got = d[idx].to_f32() as f64;
                written[idx] = true;
                if got.is_nan() || (got - want).abs() > spread + tol.rel * want.abs() + tol.abs.max(1e-6 * delta) {
                    return Err(format!(
                        "{:?} batch {z} ({i}, {j}): got {got:e}, want {want:e} (spread {spread:e}, k {})",
                        case.g, r.k
                    ));
                }
            }
        }
    }
    if let Some(i) = (0..d.len()).find(|&i| !written[i] && !d[i].to_f32().is_nan()) {
        return Err(format!("D element {i} outside the output was written"));
    }
    Ok(())
}

pub(crate) fn layouts() -> [(Layout, Layout); 4] {
    [(Layout::Row, Layout::Row), (Layout::Row, Layout::Col), (Layout::Col, Layout::Row), (Layout::Col, Layout::Col)]
}

pub(crate) fn epilogue(i: usize) -> Epilogue {
    match i % 4 {
        0 => Epilogue::PLAIN,
        1 => Epilogue { alpha: 0.5, beta: -1.5, bias: false, act: Activation::None },
        2 => Epilogue { alpha: 1.0, beta: 0.0, bias: true, act: Activation::Relu },
        _ => Epilogue { alpha: 1.25, beta: 0.5, bias: true, act: Activation::GeluErf },
    }
}

fn run_and_check<T: Scalar, O: Scalar>(backend: &Backend, g: Gemm, seed: u64) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let case = make_case::<T, O>(&mut rng, g);
    let d = run(backend, &case).map_err(|e| format!("{g:?}: {e}"))?;
    check(&case, &d)
}

pub(crate) fn dispatch(backend: &Backend, dt: DType, out_f32: bool, g: Gemm, seed: u64) -> Result<(), String> {
    match (dt, out_f32) {
        (DType::F32, _) => run_and_check::<f32, f32>(backend, g, seed),
        (DType::F16, false) => run_and_check::<f16, f16>(backend, g, seed),
        (DType::F16, true) => run_and_check::<f16, f32>(backend, g, seed),
        (DType::Bf16, false) => run_and_check::<bf16, bf16>(backend, g, seed),
        (DType::Bf16, true) => run_and_check::<bf16, f32>(backend, g, seed),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    #[test]
    fn cpu_gemm_matches_f64_reference(
        m in prop_oneof![Just(1usize), Just(2), 1usize..40], n in prop_oneof![Just(1usize), 1usize..40],
        k in prop_oneof![Just(1usize), 1usize..70], lay in 0usize..4, epi in 0usize..4, batch in 1usize..3,
        dt in prop::sample::select(DType::ALL.to_vec()), out_f32 in any::<bool>(), pad in 0usize..3,
        seed in any::<u64>(),
    ) {
        let (la, lb) = layouts()[lay];
        let mut g = Gemm::new(m, n, k).layouts(la, lb).batched(batch).epilogue(epilogue(epi));
        // Padded leading dimensions (0 keeps them tight).
        if pad > 0 {
            let r = g.resolved();
            g.lda = r.lda + pad;
            g.ldb = r.ldb + pad;
            g.ldc = r.ldc + pad;
        }
        let r = dispatch(&cpu_backend(), dt, out_f32, g, seed);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

/// The CPU backend widens 16-bit operands one K panel of 256 at a time and splits the output
/// into bands of rows: K across several panels (and a partial last one), forced bands that
/// do not divide M, every layout, padded leading dimensions, a batch, and K = 0.
#[test]
fn cpu_gemm_k_panels_and_row_bands() {
    let b = cpu_backend();
    for (i, (la, lb)) in layouts().into_iter().enumerate() {
        for (dt, out_f32) in [(DType::F16, false), (DType::Bf16, true), (DType::F32, true), (DType::Bf16, false)] {
            for (k, rows) in [(600, 8), (257, 5), (0, 3)] {
                let mut g = Gemm::new(37, 19, k).layouts(la, lb).batched(2).epilogue(epilogue(i + k)).cpu_rows(rows);
                let r = g.resolved();
                (g.lda, g.ldb, g.ldc) = (r.lda + 3, r.ldb + 1, r.ldc + 2);
                let res = dispatch(&b, dt, out_f32, g, 11 + k as u64);
                assert!(res.is_ok(), "{dt:?} out_f32 {out_f32} k {k} rows {rows}: {}", res.unwrap_err());
            }
        }
    }
}

/// A column-major B whose columns lie a multiple of 2 KiB apart is copied (f32) or widened
/// (16-bit) into panels with padded columns before the crate packs it (`gemm_cpu::col_pitch`):
/// K a multiple of 512 in one panel and across panels (2000 columns: panels of 2048 of K, the
/// last partial), a padded leading dimension with K not a multiple, every dtype, an epilogue.
#[test]
fn cpu_gemm_b_columns_2kib_apart() {
    let b = cpu_backend();
    for (i, (m, n, k, ldb)) in
        [(9, 33, 1024, 1024), (8, 2000, 5000, 5120), (5, 7, 1000, 1024), (3, 4, 512, 512)].into_iter().enumerate()
    {
        for (dt, out_f32) in [(DType::F32, true), (DType::Bf16, false), (DType::F16, true)] {
            let mut g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).epilogue(epilogue(i));
            g.ldb = ldb;
            let res = dispatch(&b, dt, out_f32, g, 70 + i as u64);
            assert!(res.is_ok(), "{m}x{n}x{k} ldb {ldb} {dt:?}: {}", res.unwrap_err());
        }
    }
}

#[test]
fn gemm_reference_check_can_fail() {
    // A result perturbed by 1% in f32 is caught.
    let mut rng = Rng::new(3);
    let case = make_case::<f32, f32>(&mut rng, Gemm::new(3, 4, 5));
    let mut d = run(&cpu_backend(), &case).unwrap();
    check(&case, &d).unwrap();
    d[5] *= 1.01;
    assert!(check(&case, &d).is_err());
}

/// Every dtype, layout and epilogue at the edge shapes, on the GPU.
#[test]
fn gpu_gemm_matches_f64_reference_at_edge_shapes() {
    let Some(gpu) = cuda_backend("gpu_gemm_matches_f64_reference_at_edge_shapes") else { return };
    let sizes = [1usize, 2, 15, 17, 31, 33, 127, 129];
    let mut cases = 0;
    let inputs = [
        (DType::F32, Precision::Strict),
        (DType::F32, Precision::AllowTf32),
        (DType::F16, Precision::Strict),
        (DType::Bf16, Precision::Strict),
    ];
    for (t, (dt, prec)) in inputs.into_iter().enumerate() {
        for (l, (la, lb)) in layouts().into_iter().enumerate() {
            for (i, &m) in sizes.iter().enumerate() {
                let n = sizes[(i + 3 + l) % sizes.len()];
                let k = sizes[(i + 5 + t) % sizes.len()];
                let g = Gemm::new(m, n, k).layouts(la, lb).epilogue(epilogue(i + l)).precision(prec);
                let out_f32 = (i + l) % 2 == 1;
                if let Err(e) = dispatch(&gpu, dt, out_f32, g, (cases as u64) << 4) {
                    panic!("{dt:?} out_f32 {out_f32}: {e}");
                }
                cases += 1;
            }
        }
    }
    println!("gpu_gemm_matches_f64_reference_at_edge_shapes: {cases} cases");
}

#[test]
fn gpu_gemm_large_k_batched_and_unaligned() {
    let Some(gpu) = cuda_backend("gpu_gemm_large_k_batched_and_unaligned") else { return };
    for dt in DType::ALL {
        for prec in [Precision::Strict, Precision::AllowTf32] {
            if prec == Precision::AllowTf32 && dt != DType::F32 {
                continue;
            }
            for (la, lb) in layouts() {
                // Large K (many k-tiles), a batch of 3 with padded strides.
                let mut g = Gemm::new(70, 45, 1000).layouts(la, lb).batched(3).epilogue(epilogue(1)).precision(prec);
                g.stride_a = g.resolved().stride_a + 8;
                dispatch(&gpu, dt, false, g, 1).unwrap();
                // Leading dimensions padded by 1, 2 and 4 elements: every load width (scalar,
                // 4-, 8-byte cp.async for 16-bit; 4, 8 bytes for tf32) on some operand.
                for (i, pad) in [1usize, 2, 4].into_iter().enumerate() {
                    let mut g = Gemm::new(33, 17, 65).layouts(la, lb).epilogue(epilogue(3)).precision(prec);
                    let r = g.resolved();
                    g.lda = r.lda + pad;
                    g.ldb = r.ldb + pad;
                    g.ldc = r.ldc + 5;
                    dispatch(&gpu, dt, i % 2 == 0, g, 2 + i as u64).unwrap();
                }
            }
        }
    }
}

/// Every compiled tile of the tensor-core kernel, at shapes that end mid-tile and at exact
/// multiples, all layouts, for f16, bf16 and tf32.
#[test]
fn gpu_gemm_every_tile() {
    let Some(gpu) = cuda_backend("gpu_gemm_every_tile") else { return };
    let mut cases = 0;
    for tile in 0..ferrotune_kernels::gemm::tc::TILES.len() {
        for (l, (la, lb)) in layouts().into_iter().enumerate() {
            for (j, dt) in DType::ALL.into_iter().enumerate() {
                // Multiples of 8 (the tuned tiles need 16-byte aligned rows), not of the tiles.
                for &(m, n, k) in &[(264usize, 136usize, 72usize), (256, 256, 128), (8, 24, 8)] {
                    let g = Gemm::new(m, n, k).layouts(la, lb).epilogue(epilogue(l + j + tile)).tile(tile);
                    if let Err(e) = dispatch(&gpu, dt, false, g, (tile * 100 + cases) as u64) {
                        panic!("tile {tile} {dt:?}: {e}");
                    }
                    cases += 1;
                }
            }
        }
    }
    // Rows 8- but not 16-byte aligned: the narrow tiles' 8-byte loads.
    for &tile in &ferrotune_kernels::gemm::tc::NARROW_TILES {
        for (l, (la, lb)) in layouts().into_iter().enumerate() {
            for (j, dt) in DType::ALL.into_iter().enumerate() {
                // Every leading dimension 4 mod 8 elements (2 mod 4 for f32), whatever the layout.
                for &(m, n, k) in &[(260usize, 132usize, 76usize), (132, 260, 700), (12, 20, 12)] {
                    let (m, n, k) = if dt == DType::F32 { (m / 2, n / 2, k / 2) } else { (m, n, k) };
                    let g = Gemm::new(m, n, k).layouts(la, lb).epilogue(epilogue(l + j + tile)).tile(tile);
                    if let Err(e) = dispatch(&gpu, dt, false, g, (tile * 100 + cases) as u64) {
                        panic!("narrow tile {tile} {dt:?} k {k}: {e}");
                    }
                    cases += 1;
                }
            }
        }
    }
    println!("gpu_gemm_every_tile: {cases} cases");
}

/// Pointer-array batches: matrices at unrelated places, one launch; CPU and GPU.
#[test]
fn gemm_pointer_array_batches() {
    let mut backends = vec![cpu_backend()];
    backends.extend(cuda_backend("gemm_pointer_array_batches"));
    for backend in backends {
        let s = backend.stream();
        let mut rng = Rng::new(11);
        let (m, n, k) = (37usize, 29usize, 45usize);
        let g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col);
        let cases: Vec<Case<bf16, f32>> = (0..5).map(|_| make_case(&mut rng, g)).collect();
        let a: Vec<_> = cases.iter().map(|c| Buffer::from_slice(&s, &c.a).unwrap()).collect();
        let b: Vec<_> = cases.iter().map(|c| Buffer::from_slice(&s, &c.b).unwrap()).collect();
        let mut d: Vec<_> =
            cases.iter().map(|c| Buffer::from_slice(&s, &vec![poison::<f32>(); c.c.len()]).unwrap()).collect();
        let av: Vec<_> = a.iter().map(|x| x.all()).collect();
        let bv: Vec<_> = b.iter().map(|x| x.all()).collect();
        let mut dv: Vec<_> = d.iter_mut().map(|x| x.all_mut()).collect();
        gemm_ptr_array::<bf16, f32>(&s, &g, &av, &bv, None, &mut dv).unwrap();
        drop(dv);
        for (c, out) in cases.iter().zip(&d) {
            check(c, &out.to_vec(&s).unwrap()).unwrap();
        }
        // Mismatched list lengths are a typed error.
        let mut dv: Vec<_> = d.iter_mut().map(|x| x.all_mut()).collect();
        let e = gemm_ptr_array::<bf16, f32>(&s, &g, &av[..4], &bv, None, &mut dv).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { what: "B", .. }), "{e}");
    }
}

#[test]
fn gemm_shorthands_and_gpu_cpu_agreement() {
    let mut backends = vec![cpu_backend()];
    backends.extend(cuda_backend("gemm_shorthands_and_gpu_cpu_agreement"));
    for b in backends {
        let s = b.stream();
        // [1 2; 3 4] [5 6; 7 8] = [19 22; 43 50]
        let a = Buffer::from_slice(&s, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let w = Buffer::from_slice(&s, &[5.0f32, 6.0, 7.0, 8.0]).unwrap();
        let bias = Buffer::from_slice(&s, &[-20.0f32, 1.0]).unwrap();
        let mut d = Buffer::<f32>::zeros(&s, 4).unwrap();
        ops::matmul(&s, &a.all(), &w.all(), &mut d.all_mut(), 2, 2, 2).unwrap();
        assert_eq!(d.to_vec(&s).unwrap(), [19.0, 22.0, 43.0, 50.0]);
        ops::matmul_bias_relu(&s, &a.all(), &w.all(), &bias.all(), &mut d.all_mut(), 2, 2, 2).unwrap();
        assert_eq!(d.to_vec(&s).unwrap(), [0.0, 23.0, 23.0, 51.0]);
        // x wᵀ: w rows are output features. [1 2; 3 4] [5 7; 6 8] = [17 23; 39 53]
        ops::linear_bias_gelu(&s, &a.all(), &w.all(), &bias.all(), &mut d.all_mut(), 2, 2, 2).unwrap();
        let got = d.to_vec(&s).unwrap();
        assert!((got[0] - activation_f64(Activation::GeluErf, -3.0) as f32).abs() < 1e-5, "{got:?}");
        assert!((got[3] - 54.0).abs() < 1e-4, "{got:?}");
        let mut d2 = Buffer::<f32>::zeros(&s, 8).unwrap();
        let a2 = Buffer::from_slice(&s, &[1.0f32, 2.0, 3.0, 4.0, 1.0, 0.0, 0.0, 1.0]).unwrap();
        let b2 = Buffer::from_slice(&s, &[5.0f32, 6.0, 7.0, 8.0, 5.0, 6.0, 7.0, 8.0]).unwrap();
        ops::batched_matmul(&s, &a2.all(), &b2.all(), &mut d2.all_mut(), 2, 2, 2, 2).unwrap();
        assert_eq!(d2.to_vec(&s).unwrap(), [19.0, 22.0, 43.0, 50.0, 5.0, 6.0, 7.0, 8.0]);
    }
}

#[test]
fn gemm_bad_inputs_are_typed_errors() {
    let b = cpu_backend();
    let s = b.stream();
    let a = Buffer::from_slice(&s, &[1.0f32; 6]).unwrap();
    let mut d = Buffer::<f32>::zeros(&s, 4).unwrap();
    // A needs 2 x 4 = 8 elements.
    let e = ops::matmul(&s, &a.all(), &a.all(), &mut d.all_mut(), 2, 2, 4).unwrap_err();
    assert!(matches!(e, Error::BufferTooSmall { what: "A", needed: 8, got: 6, .. }), "{e}");
    // Leading dimension below the row length.
    let mut g = Gemm::new(2, 2, 3);
    g.lda = 2;
    let e = gemm::<f32, f32>(&s, &g, &a.all(), &a.all(), None, None, &mut d.all_mut()).unwrap_err();
    assert!(e.to_string().contains("leading dimension of A"), "{e}");
    // beta != 0 without C, bias missing, bias too short.
    let g = Gemm::new(2, 2, 3).epilogue(Epilogue { beta: 1.0, ..Epilogue::PLAIN });
    assert!(gemm::<f32, f32>(&s, &g, &a.all(), &a.all(), None, None, &mut d.all_mut()).is_err());
    let short = Buffer::from_slice(&s, &[1.0f32]).unwrap();
    let e = ops::matmul_bias_relu(&s, &a.all(), &a.all(), &short.all(), &mut d.all_mut(), 2, 2, 3).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { what: "bias", expected: 2, got: 1, .. }), "{e}");
    // f16 inputs to a bf16 output is not a compiled combination.
    let h = Buffer::from_slice(&s, &[f16::ONE; 6]).unwrap();
    let mut db = Buffer::<bf16>::zeros(&s, 4).unwrap();
    let e = ops::matmul(&s, &h.all(), &h.all(), &mut db.all_mut(), 2, 2, 3).unwrap_err();
    assert!(matches!(e, Error::UnsupportedDtype { dtype: "bf16", .. }), "{e}");
    // Empty problems are a no-op.
    ops::matmul::<f32, f32>(&s, &a.all(), &a.all(), &mut d.all_mut(), 0, 2, 3).unwrap();
}
