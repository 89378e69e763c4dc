//! Split-K GEMM: on the GPU against the float64 reference (K in {1, 7, 8, 9, 255, 1000, 4097},
//! 1, 2, 3, 4 and 16 slices, slice counts above the number of 8-element K chunks, every layout,
//! exact f32, TF32, f16 and bf16 with f32 and same-type outputs, bias + GELU and beta != 0,
//! outputs poisoned first; random shapes; the heuristic's own choice). On the CPU: the reduce
//! maths against float64, config validation, and that the CPU backend ignores split-K.

use ferrotune::config::GemmConfig;
use ferrotune::ops::gemm::{Epilogue, Gemm, Layout, Precision, SplitPlan, gemm, gemm_ptr_array, split_launches};
use ferrotune::ops::{self, Activation};
use ferrotune::{Buffer, DType, Error, Scalar, bf16, f16};
use ferrotune_kernels::splitk::cpu_reduce;
use ferrotune_testkit::{Rng, Tolerance, activation_f64, cpu_backend, cuda_backend};

use crate::gemm::{Case, check, dispatch, epilogue, layouts, make_case, run};

/// The inputs the tests cycle through: (dtype, precision).
const INPUTS: [(DType, Precision); 4] = [
    (DType::F32, Precision::Strict),
    (DType::F32, Precision::AllowTf32),
    (DType::F16, Precision::Strict),
    (DType::Bf16, Precision::Strict),
];

/// Epilogues with bias + GELU and beta != 0 among them.
fn split_epilogue(i: usize) -> Epilogue {
    match i % 3 {
        0 => Epilogue::PLAIN,
        1 => Epilogue { alpha: 1.25, beta: 0.5, bias: true, act: Activation::GeluErf },
        _ => epilogue(1), // alpha 0.5, beta -1.5
    }
}

#[test]
fn gpu_split_k_matches_f64_reference() {
    let Some(gpu) = cuda_backend("gpu_split_k_matches_f64_reference") else { return };
    let mut cases = 0usize;
    for (ki, k) in [1usize, 7, 8, 9, 255, 1000, 4097].into_iter().enumerate() {
        for (si, s) in [1usize, 2, 3, 4, 16].into_iter().enumerate() {
            for (l, (la, lb)) in layouts().into_iter().enumerate() {
                for (t, (dt, prec)) in INPUTS.into_iter().enumerate() {
                    let i = ki + si + l + t;
                    let (m, n) = ([1usize, 17, 33, 70][i % 4], [1usize, 9, 45, 64][(i / 2) % 4]);
                    let g = Gemm::new(m, n, k).layouts(la, lb).epilogue(split_epilogue(i)).precision(prec).split_k(s);
                    let out_f32 = (i / 3) % 2 == 1;
                    if let Err(e) = dispatch(&gpu, dt, out_f32, g, cases as u64) {
                        panic!("{dt:?} {prec:?} out_f32 {out_f32} split {s} ({:?}): {e}", SplitPlan::new(k, s));
                    }
                    cases += 1;
                }
            }
        }
    }
    println!("gpu_split_k_matches_f64_reference: {cases} cases");
}

/// Random shapes, leading dimensions and epilogues (seeded), each split a random number of
/// ways, on every input type.
#[test]
fn gpu_split_k_random_shapes() {
    let Some(gpu) = cuda_backend("gpu_split_k_random_shapes") else { return };
    let mut rng = Rng::new(0x5b11);
    let mut pick = |n: usize| (rng.next_u64() % n as u64) as usize;
    for case in 0..80 {
        let (m, n) = (1 + pick(200), 1 + pick(200));
        let k = if case % 2 == 0 { [1usize, 7, 8, 9, 255, 1000, 4097][pick(7)] } else { 1 + pick(3000) };
        let s = [1usize, 2, 3, 4, 16][pick(5)];
        let (la, lb) = layouts()[pick(4)];
        let (dt, prec) = INPUTS[pick(4)];
        let mut g = Gemm::new(m, n, k).layouts(la, lb).epilogue(split_epilogue(pick(3))).precision(prec).split_k(s);
        // Padded leading dimensions half of the time: narrower loads, unaligned slice starts.
        let pad = pick(4);
        if pad > 0 && case % 2 == 1 {
            let r = g.resolved();
            g.lda = r.lda + pad;
            g.ldb = r.ldb + pad;
            g.ldc = r.ldc + pad;
        }
        let out_f32 = pick(2) == 1;
        if let Err(e) = dispatch(&gpu, dt, out_f32, g, case as u64) {
            panic!("case {case}: {dt:?} {prec:?} out_f32 {out_f32} split {s}: {e}");
        }
    }
}

/// Calls that force no split get the heuristic's, which splits these shapes (as the tests of
/// `GemmConfig::heuristic` show); the result must still match.
#[test]
fn gpu_split_k_from_the_heuristic() {
    let Some(gpu) = cuda_backend("gpu_split_k_from_the_heuristic") else { return };
    for (i, (m, n, k)) in [(64usize, 64usize, 4096usize), (200, 130, 8192), (96, 64, 2048)].into_iter().enumerate() {
        assert!(GemmConfig::heuristic(m, n, k, 1).split_k > 1, "{m}x{n}x{k}");
        for (t, (dt, prec)) in INPUTS.into_iter().enumerate() {
            let g =
                Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).epilogue(split_epilogue(i + t)).precision(prec);
            dispatch(&gpu, dt, t % 2 == 0, g, (i * 10 + t) as u64).unwrap();
        }
    }
}

/// The split path really runs on the GPU: a forced tile without an f32-output variant for
/// 16-bit inputs is refused there (the unsplit call accepts it), with the reason.
#[test]
fn gpu_split_k_refuses_tiles_without_f32_output() {
    let Some(gpu) = cuda_backend("gpu_split_k_refuses_tiles_without_f32_output") else { return };
    let g = Gemm::new(64, 64, 4096).layouts(Layout::Row, Layout::Col).tile(3);
    dispatch(&gpu, DType::Bf16, false, g, 1).unwrap();
    let e = dispatch(&gpu, DType::Bf16, false, g.split_k(4), 1).unwrap_err();
    assert!(e.contains("f32-output"), "{e}");
    // tf32 has f32 outputs at every tile.
    dispatch(&gpu, DType::F32, false, g.split_k(4).precision(Precision::AllowTf32), 2).unwrap();
}

/// The split decomposition the GPU runs, replayed on the CPU backend: the partial GEMMs
/// exactly as `split_launches` describes them (k, batch, strides, the last slice's offsets)
/// on views of the same buffers, f32 into a workspace, then the reduce maths; the result must
/// match the float64 reference. Checks the slicing arithmetic for every layout, padded leading
/// dimensions and slice counts above the K chunks, without a GPU.
#[test]
fn split_k_decomposition_matches_f64_on_the_cpu() {
    let b = cpu_backend();
    let mut rng = Rng::new(0x5b1);
    let mut cases = 0;
    for (ki, k) in [9usize, 255, 1000, 4097].into_iter().enumerate() {
        for (si, sk) in [2usize, 3, 4, 16].into_iter().enumerate() {
            for (l, (la, lb)) in layouts().into_iter().enumerate() {
                let i = ki + si + l;
                let mut g = Gemm::new([3usize, 17, 40][i % 3], [5usize, 12, 33][(i / 3) % 3], k)
                    .layouts(la, lb)
                    .epilogue(split_epilogue(i));
                if i % 2 == 1 {
                    let r = g.resolved();
                    (g.lda, g.ldb, g.ldc) = (r.lda + 3, r.ldb + 1, r.ldc + 2);
                }
                match i % 3 {
                    0 => replay::<f32, f32>(&b, make_case(&mut rng, g), sk),
                    1 => replay::<bf16, bf16>(&b, make_case(&mut rng, g), sk),
                    _ => replay::<f16, f32>(&b, make_case(&mut rng, g), sk),
                }
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 64);
}

fn replay<T: Scalar, O: Scalar>(backend: &ferrotune::Backend, case: Case<T, O>, sk: usize) {
    let s = backend.stream();
    let r = case.g.resolved();
    let plan = SplitPlan::new(r.k, sk);
    assert!(plan.is_split(), "{plan:?}");
    // A stand-in base address (256-byte aligned like device allocations): offsets come back
    // as addresses, in bytes.
    let base = 1 << 20;
    let l = split_launches(&r, T::DTYPE, plan, base, base, GemmConfig::DEFAULT).unwrap();
    assert_eq!((l.part.k, l.part.batch, l.last.k), (plan.kc, plan.slices - 1, plan.last_k));
    assert_eq!(l.part.epilogue, Epilogue::PLAIN);
    assert!(l.v_part.out_f32 || T::DTYPE == DType::F32);
    let es = T::DTYPE.size_bytes() as u64;
    let (off_a, off_b) = (((l.last_a - base) / es) as usize, ((l.last_b - base) / es) as usize);
    let a = Buffer::from_slice(&s, &case.a).unwrap();
    let bb = Buffer::from_slice(&s, &case.b).unwrap();
    let mn = r.m * r.n;
    let mut ws = Buffer::from_slice(&s, &vec![f32::NAN; plan.slices * mn]).unwrap();
    {
        let mut w = ws.view_mut(..(plan.slices - 1) * mn).unwrap();
        gemm::<T, f32>(&s, &l.part, &a.all(), &bb.all(), None, None, &mut w).unwrap();
    }
    {
        let mut w = ws.view_mut((plan.slices - 1) * mn..).unwrap();
        let (av, bv) = (a.view(off_a..).unwrap(), bb.view(off_b..).unwrap());
        gemm::<T, f32>(&s, &l.last, &av, &bv, None, None, &mut w).unwrap();
    }
    let w = ws.to_vec(&s).unwrap();
    assert!(w.iter().all(|x| !x.is_nan()), "the partial GEMMs cover the workspace");
    let mut d = vec![O::from_f32(f32::NAN); case.c.len()];
    cpu_reduce(&w, plan.slices, r.m, r.n, &r.epilogue, &case.c, &case.bias, &mut d, r.ldc);
    if let Err(e) = check(&case, &d) {
        panic!("{sk} slices ({plan:?}): {e}");
    }
}

#[test]
fn cpu_backend_ignores_split_k() {
    let b = cpu_backend();
    let mut rng = Rng::new(9);
    for (l, (la, lb)) in layouts().into_iter().enumerate() {
        let g = Gemm::new(13, 11, 1000).layouts(la, lb).epilogue(split_epilogue(l));
        let case = make_case::<bf16, f32>(&mut rng, g);
        let want = run(&b, &case).unwrap();
        for s in [1, 2, 16, 64] {
            let split = crate::gemm::Case { g: g.split_k(s), ..case.clone() };
            let got = run(&b, &split).unwrap();
            assert!(got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()), "split {s}");
        }
    }
}

#[test]
fn split_k_configs_are_validated_with_typed_errors() {
    let b = cpu_backend();
    let s = b.stream();
    let a = Buffer::from_slice(&s, &[1.0f32; 64]).unwrap();
    let mut d = Buffer::<f32>::zeros(&s, 64).unwrap();
    let call =
        |g: &Gemm, d: &mut Buffer<f32>| gemm::<f32, f32>(&s, g, &a.all(), &a.all(), None, None, &mut d.all_mut());
    for bad in [0, 65, 1000] {
        let e = call(&Gemm::new(4, 4, 4).split_k(bad), &mut d).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig { .. }) && e.to_string().contains("split_k"), "{e}");
    }
    call(&Gemm::new(4, 4, 4).split_k(64), &mut d).unwrap();
    // Forced on a batch: refused; 1 is fine.
    let e = call(&Gemm::new(2, 2, 4).batched(2).split_k(2), &mut d).unwrap_err();
    assert!(matches!(e, Error::InvalidConfig { .. }) && e.to_string().contains("batch of 2"), "{e}");
    call(&Gemm::new(2, 2, 4).batched(2).split_k(1), &mut d).unwrap();
    // Pointer-array batches: refused when forced.
    let (av, mut dv) = (vec![a.all()], vec![d.all_mut()]);
    let e = gemm_ptr_array::<f32, f32>(&s, &Gemm::new(2, 2, 4).split_k(4), &av, &av, None, &mut dv).unwrap_err();
    assert!(matches!(e, Error::InvalidConfig { .. }) && e.to_string().contains("pointer-array"), "{e}");
    gemm_ptr_array::<f32, f32>(&s, &Gemm::new(2, 2, 4).split_k(1), &av, &av, None, &mut dv).unwrap();
    // A batch of a shape the heuristic would split alone runs unsplit, without an error.
    assert!(GemmConfig::heuristic(8, 8, 4096, 1).split_k > 1);
    let big = Buffer::from_slice(&s, &vec![0.5f32; 2 * 8 * 4096]).unwrap();
    let mut out = Buffer::<f32>::zeros(&s, 2 * 8 * 8).unwrap();
    ops::batched_matmul(&s, &big.all(), &big.all(), &mut out.all_mut(), 2, 8, 8, 4096).unwrap();
    assert!(out.to_vec(&s).unwrap().iter().all(|&v| v == 1024.0));
}

/// The reduce kernel's maths (`cpu_reduce`, the same per-element function the kernel calls)
/// against float64 sums of the slices and the epilogue, for every output type and epilogue.
#[test]
fn split_k_reduce_matches_f64() {
    let mut rng = Rng::new(77);
    for (i, &(m, n, slices, ldc)) in
        [(1usize, 1usize, 2usize, 1usize), (7, 13, 3, 15), (16, 64, 16, 64), (5, 9, 64, 9)].iter().enumerate()
    {
        for e in 0..4 {
            let epi = match e {
                3 => Epilogue { alpha: 0.75, beta: -0.5, bias: true, act: Activation::GeluTanh },
                e => split_epilogue(e + i),
            };
            let w: Vec<f32> = rng.vec(slices * m * n, -4.0, 4.0);
            reduce_case::<f32>(&mut rng, &w, slices, m, n, ldc, &epi);
            reduce_case::<f16>(&mut rng, &w, slices, m, n, ldc, &epi);
            reduce_case::<bf16>(&mut rng, &w, slices, m, n, ldc, &epi);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn reduce_case<O: Scalar>(rng: &mut Rng, w: &[f32], slices: usize, m: usize, n: usize, ldc: usize, epi: &Epilogue) {
    let c: Vec<O> = rng.vec(m * ldc, -2.0, 2.0);
    let bias: Vec<O> = rng.vec(n, -1.0, 1.0);
    let mut d = vec![O::from_f32(f32::NAN); m * ldc];
    cpu_reduce(w, slices, m, n, epi, &c, &bias, &mut d, ldc);
    let tol = Tolerance::of(O::DTYPE);
    for i in 0..m {
        for j in 0..ldc {
            let got = d[i * ldc + j].to_f32() as f64;
            if j >= n {
                assert!(got.is_nan(), "padding ({i}, {j}) written");
                continue;
            }
            let (mut acc, mut mag) = (0.0f64, 0.0f64);
            for s in 0..slices {
                let x = w[s * m * n + i * n + j] as f64;
                acc += x;
                mag += x.abs();
            }
            let mut v = epi.alpha as f64 * acc;
            let mut scale = (epi.alpha as f64).abs() * mag;
            if epi.beta != 0.0 {
                let cv = c[i * ldc + j].to_f32() as f64;
                v += epi.beta as f64 * cv;
                scale += (epi.beta as f64 * cv).abs();
            }
            if epi.bias {
                v += bias[j].to_f32() as f64;
                scale += bias[j].to_f32().abs() as f64;
            }
            let want = activation_f64(epi.act, v);
            // f32 additions of `slices` terms, then the activation's own error and the output
            // type's rounding.
            let allowed = 1e-6 * scale * slices as f64 + tol.rel * want.abs() + tol.abs.max(1e-6);
            assert!(
                (got - want).abs() <= allowed,
                "{:?} {epi:?} ({i}, {j}) of {m}x{n}, {slices} slices: got {got:e}, want {want:e}",
                O::DTYPE
            );
        }
    }
}
