//! Small-M GEMM (the gemv family, M = 1..=64): on the GPU against the float64 reference over
//! edge shapes (M in {1, 2, 7, 8, 9, 16, 17, 33, 64}, K in {0, 1, 7, 8, 33, 777, 4099}), every
//! layout (16-byte and element-load variants), padded leading dimensions, views at odd offsets,
//! batches, epilogues, f16/bf16 with f32 and same-type outputs, outputs poisoned first; long K
//! with few columns (the split with its last-block fix-up), called repeatedly on one stream;
//! random shapes. On the CPU: which calls the family takes.

use ferrotune::config::{GemmConfig, GemmPath};
use ferrotune::ops::gemm::{Gemm, Layout, gemm};
use ferrotune::ops::gemm_plan::explain;
use ferrotune::ops::gemv::{IN_PLACE_MIN_WEIGHT, describe, interleaved, small_m_applies, vector_loads, x_in_place};
use ferrotune::{Buffer, DType, bf16};
use ferrotune_testkit::{Rng, cuda_backend, poison};

use crate::gemm::{Case, check, dispatch, epilogue, layouts, make_case};

const DTYPES: [DType; 2] = [DType::Bf16, DType::F16];

#[test]
fn gpu_small_m_edge_shapes_match_f64_reference() {
    let Some(gpu) = cuda_backend("gpu_small_m_edge_shapes_match_f64_reference") else { return };
    let mut cases = 0u64;
    for (mi, m) in [1usize, 2, 7, 8, 9, 16, 17, 33, 64].into_iter().enumerate() {
        for (ki, k) in [0usize, 1, 7, 8, 33, 777, 4099].into_iter().enumerate() {
            for (l, (la, lb)) in layouts().into_iter().enumerate() {
                let i = mi + ki + l;
                let n = [1usize, 15, 17, 100, 1023][i % 5];
                let mut g = Gemm::new(m, n, k).layouts(la, lb).epilogue(epilogue(i)).batched(1 + (i % 7 == 0) as usize);
                if i % 3 == 1 {
                    let r = g.resolved();
                    g.lda = r.lda + 8; // still 16-byte rows
                    g.ldb = r.ldb + 8;
                    g.ldc = r.ldc + 3;
                } else if i % 3 == 2 {
                    let r = g.resolved();
                    g.lda = r.lda + 1; // element loads
                    g.ldb = r.ldb + 1;
                }
                let dt = DTYPES[i % 2];
                let out_f32 = (i / 2) % 2 == 1;
                // Batches take the tiles (see `small_m_applies`); they are checked all the same.
                assert_eq!(small_m_applies(&g.resolved(), dt).is_some(), g.batch == 1, "{g:?}: small-M family?");
                if let Err(e) = dispatch(&gpu, dt, out_f32, g, cases) {
                    panic!("{dt:?} out_f32 {out_f32}: {e}");
                }
                cases += 1;
            }
        }
    }
    println!("gpu_small_m_edge_shapes_match_f64_reference: {cases} cases");
}

/// Few columns, long K: the split over blocks with its fix-up by the last block; repeated on
/// the same stream (the counters must be back at zero after each call).
#[test]
fn gpu_small_m_split_k_fix_up_is_exact_and_repeatable() {
    let Some(gpu) = cuda_backend("gpu_small_m_split_k_fix_up_is_exact_and_repeatable") else { return };
    let sms = gpu.stream().gpu().map_or(132, |g| g.info().sm_count as usize);
    for (i, (m, n, k)) in [(1usize, 16usize, 20000usize), (8, 64, 9000), (33, 100, 4099), (64, 17, 30000), (5, 1, 777)]
        .into_iter()
        .enumerate()
    {
        let g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).epilogue(epilogue(i)).batched(1 + i % 2);
        let (_, plan) = describe(&g.resolved(), DType::Bf16, DType::Bf16, [0, 0], sms, None).expect("m <= 64");
        if k >= 9000 {
            assert!(plan.ksplit > 1, "{m}x{n}x{k} should split K: {plan:?}");
        }
        for rep in 0..3 {
            for dt in DTYPES {
                if let Err(e) = dispatch(&gpu, dt, rep % 2 == 1, g, 7 * i as u64 + rep) {
                    panic!("{dt:?} rep {rep} {plan:?}: {e}");
                }
            }
        }
    }
}

/// Seeded random shapes, layouts, paddings, batches and epilogues.
#[test]
fn gpu_small_m_random_shapes() {
    let Some(gpu) = cuda_backend("gpu_small_m_random_shapes") else { return };
    let mut rng = Rng::new(0x6e3f);
    let mut pick = |n: usize| (rng.next_u64() % n as u64) as usize;
    for case in 0..120u64 {
        let (m, n) = (1 + pick(64), 1 + pick(700));
        let k = if case % 3 == 0 { pick(9000) } else { pick(300) };
        let (la, lb) = layouts()[pick(4)];
        let mut g = Gemm::new(m, n, k).layouts(la, lb).epilogue(epilogue(pick(4))).batched(1 + pick(3));
        let pad = pick(10);
        if pad > 0 {
            let r = g.resolved();
            g.lda = r.lda + pad;
            g.ldb = r.ldb + pad;
            g.ldc = r.ldc + pad / 2;
        }
        let dt = DTYPES[pick(2)];
        let out_f32 = pick(2) == 1;
        if let Err(e) = dispatch(&gpu, dt, out_f32, g, case) {
            panic!("case {case}: {dt:?} out_f32 {out_f32}: {e}");
        }
    }
}

/// A and B views starting one element into their buffers (2-byte aligned only): two aligned
/// loads and a funnel shift per group, same answer.
#[test]
fn gpu_small_m_odd_view_offsets() {
    let Some(gpu) = cuda_backend("gpu_small_m_odd_view_offsets") else { return };
    let s = gpu.stream();
    for (i, (m, n, k)) in [(1usize, 300usize, 512usize), (9, 64, 1000), (33, 129, 4096)].into_iter().enumerate() {
        let g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).epilogue(epilogue(i + 2));
        if let Err(e) = at_offset(&s, g, i as u64, 1) {
            panic!("offset views {m}x{n}x{k}: {e}");
        }
    }
}

/// Runs bf16 `g` with A and B as views `offset` elements into their buffers (C, bias
/// aligned; D poisoned) and checks D against the float64 reference.
fn at_offset(s: &ferrotune::Stream, g: Gemm, seed: u64, offset: usize) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let case: Case<bf16, bf16> = make_case(&mut rng, g);
    let pad =
        |v: &[bf16]| std::iter::repeat_n(bf16::from_f32(0.0), offset).chain(v.iter().copied()).collect::<Vec<_>>();
    let a = Buffer::from_slice(s, &pad(&case.a)).unwrap();
    let b = Buffer::from_slice(s, &pad(&case.b)).unwrap();
    let bias = Buffer::from_slice(s, &case.bias).unwrap();
    let c = Buffer::from_slice(s, &case.c).unwrap();
    let mut d = Buffer::from_slice(s, &vec![poison::<bf16>(); case.c.len()]).unwrap();
    let (av, bv) = (a.view(offset..).unwrap(), b.view(offset..).unwrap());
    let (cv, biasv) = (c.all(), bias.all());
    let r = g.resolved();
    gemm::<bf16, bf16>(
        s,
        &g,
        &av,
        &bv,
        (r.epilogue.beta != 0.0).then_some(&cv),
        r.epilogue.bias.then_some(&biasv),
        &mut d.all_mut(),
    )
    .map_err(|e| e.to_string())?;
    check(&case, &d.to_vec(s).unwrap())
}

/// Weights whose rows are not 16-byte aligned (odd K, odd leading dimensions, a view at an odd
/// offset) read in place by interleaved slabs (rows 8 apart, in their aligned K frame): many
/// slab groups with a ragged last one, few slabs with the K split, every M class, outputs
/// poisoned and checked against the float64 reference. Shapes large enough that they used to
/// be packed first.
#[test]
fn gpu_small_m_unaligned_rows() {
    let Some(gpu) = cuda_backend("gpu_small_m_unaligned_rows") else { return };
    let s = gpu.stream();
    let shapes = [
        (1usize, 4097usize, 777usize, 0usize),
        (8, 1000, 4099, 0),
        (33, 300, 3001, 1),
        (64, 600, 1025, 0),
        (5, 64, 20001, 1),
        (1, 8193, 4099, 1),
        (17, 2049, 513, 0),
        (3, 100, 999, 1), // below IN_PLACE_MIN_WEIGHT: consecutive rows, funnel shifts
    ];
    for (i, (m, n, k, offset)) in shapes.into_iter().enumerate() {
        let g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).epilogue(epilogue(i));
        let ptrs = [256, 256 + 2 * offset as u64];
        let (_, plan) = describe(&g.resolved(), DType::Bf16, DType::Bf16, ptrs, 132, None).unwrap();
        let inter = n * k >= IN_PLACE_MIN_WEIGHT;
        assert_eq!(interleaved(&g.resolved(), ptrs), inter, "{m}x{n}x{k}");
        let w = plan.width;
        let slabs = if inter { n.div_ceil(128 * w) * 8 } else { n.div_ceil(16 * w) };
        assert_eq!(plan.slabs, slabs, "{m}x{n}x{k}: interleaved slabs");
        if let Err(e) = at_offset(&s, g, 31 * i as u64, offset) {
            panic!("unaligned rows {m}x{n}x{k} offset {offset}: {e}");
        }
        if let Err(e) = dispatch(&gpu, DType::F16, i % 2 == 1, g, 100 + i as u64) {
            panic!("f16 {m}x{n}x{k}: {e}");
        }
    }
}

/// Every block width (`gemv::WIDTHS`, forced through the config a tuned profile would carry)
/// on every row class: aligned weights with a ragged last block, unaligned rows in interleaved
/// blocks (whole groups of 128 rows per slab, an odd view offset), and the K split with its
/// fix-up; f16/bf16, both outputs, epilogues, outputs poisoned and checked against the float64
/// reference. Each call is also checked to have run the forced width.
#[test]
fn gpu_small_m_every_width() {
    let Some(gpu) = cuda_backend("gpu_small_m_every_width") else { return };
    let s = gpu.stream();
    let shapes = [
        (1usize, 1000usize, 4096usize, 0usize, 1usize),
        (9, 333, 1000, 0, 1),
        (17, 2049, 512, 0, 2),
        (32, 4111, 4096, 0, 1),
        (33, 100, 9000, 0, 8),
        (64, 257, 777, 0, 1),
        (24, 1000, 4099, 1, 1),
        (40, 1111, 768, 0, 3),
    ];
    for (i, (m, n, k, offset, split)) in shapes.into_iter().enumerate() {
        for (tile, &w) in ferrotune_kernels::gemv::WIDTHS.iter().enumerate() {
            let cfg = GemmConfig { path: GemmPath::SmallM, tile, split_k: split, ..GemmConfig::DEFAULT };
            let g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).epilogue(epilogue(i + tile)).with_config(cfg);
            let dt = DTYPES[(i + tile) % 2];
            let p = explain(&s, &g, dt, dt).unwrap().expect("a CUDA stream");
            assert_eq!(p.small_m_tuned(), Some((split, w)), "{m}x{n}x{k}: {}", p.reason);
            // 33 to 64 rows are compiled up to width 2 (a wider config runs that).
            let ran = if m > 32 { w.min(2) } else { w };
            let want = if ran > 1 { format!("_v_w{ran},") } else { "_v,".to_string() };
            assert!(p.reason.contains(&want), "{m}x{n}x{k} width {w}: {}", p.reason);
            if let Err(e) = at_offset(&s, g, 7 * i as u64 + tile as u64, offset) {
                panic!("width {w} {m}x{n}x{k} offset {offset} split {split}: {e}");
            }
            if let Err(e) = dispatch(&gpu, dt, (i + tile) % 2 == 1, g, 500 + i as u64) {
                panic!("width {w} {dt:?} {m}x{n}x{k} split {split}: {e}");
            }
        }
    }
}

#[test]
fn small_m_widths_are_chosen_and_reported() {
    let rc = |m, n, k| Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).resolved();
    // One slab per block, except 33-64 rows against a large weight (x then costs most).
    for (m, n, k, want) in [(1, 4096, 4096, 1), (32, 8192, 4096, 1), (33, 16384, 4096, 2), (64, 1000, 768, 1)] {
        let (name, plan) = describe(&rc(m, n, k), DType::Bf16, DType::Bf16, [0, 0], 132, None).unwrap();
        assert_eq!(plan.width, want, "{m}x{n}x{k}: {name}");
        assert_eq!(name.ends_with(&format!("_w{want}")), want > 1, "{name}");
        assert_eq!(plan.slabs, n.div_ceil(16 * want), "{m}x{n}");
    }
    // A tuned width wins over the built-in one; element loads have only one slab per block.
    let (name, plan) = describe(&rc(32, 8192, 4096), DType::F16, DType::F32, [0, 0], 132, Some((2, 2))).unwrap();
    assert_eq!((name, plan.width, plan.ksplit), ("ft_gemv_f16_f32_g4_v_w2", 2, 2));
    let col = Gemm::new(32, 8192, 4096).resolved();
    let (name, plan) = describe(&col, DType::Bf16, DType::Bf16, [0, 0], 132, Some((1, 4))).unwrap();
    assert_eq!((name, plan.width), ("ft_gemv_bf16_bf16_g4_s", 1));
    // A config naming the row or the streaming kernel carries a marker, not a width: where the
    // slab kernel runs instead, it takes the built-in width (1 here, not the widest).
    for marker in [ferrotune::ops::gemv_rows::ROWS_WIDTH, ferrotune::ops::gemv_stream::STREAM_WIDTH] {
        let (_, plan) = describe(&rc(1, 4096, 4096), DType::Bf16, DType::Bf16, [0, 0], 132, Some((1, marker))).unwrap();
        assert_eq!(plan.width, 1, "marker {marker}");
    }
    // A width index past the compiled ones is a config error, not a fallback.
    let bad = GemmConfig { path: GemmPath::SmallM, tile: 5, ..GemmConfig::DEFAULT };
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("width index"), "{e}");
}

#[test]
fn small_m_takes_16_bit_calls_up_to_64_rows_without_a_forced_kernel() {
    let rc = |m| Gemm::new(m, 4096, 4096).layouts(Layout::Row, Layout::Col).resolved();
    assert!(small_m_applies(&rc(1), DType::Bf16).is_some());
    assert!(small_m_applies(&rc(64), DType::F16).is_some());
    assert!(small_m_applies(&rc(65), DType::Bf16).is_none(), "65 rows go to the tiles");
    assert!(small_m_applies(&rc(8), DType::F32).is_none(), "f32 inputs are not in the family");
    assert!(small_m_applies(&Gemm { tile: Some(2), ..rc(8) }, DType::Bf16).is_none(), "a forced tile wins");
    assert!(small_m_applies(&Gemm { split_k: Some(4), ..rc(8) }, DType::Bf16).is_none(), "a forced split wins");
    assert!(small_m_applies(&Gemm { batch: 2, ..rc(8) }, DType::Bf16).is_none(), "batches take the tiles");
    assert!(vector_loads(&rc(8), [256, 512]));
    assert!(vector_loads(&rc(8), [258, 512]), "A at an odd element offset: two loads and a funnel shift");
    assert!(!vector_loads(&Gemm::new(8, 4096, 4096).resolved(), [0, 0]), "B row-major: element loads");
    assert!(vector_loads(&Gemm::new(8, 4096, 4099).layouts(Layout::Row, Layout::Col).resolved(), [0, 0]));
    let (name, plan) = describe(&rc(1), DType::Bf16, DType::Bf16, [0, 0], 132, None).unwrap();
    assert_eq!((name, plan.ksplit), ("ft_gemv_bf16_bf16_g1_v", 1));
    // Between one and 1.5 waves of one-slab blocks (264 slots on 132 SMs), up to 16 rows: two
    // slabs per block, one wave; not below one wave, past 1.5, or from 17 rows.
    let sq = |m: usize, n: usize| Gemm::new(m, n, 4096).layouts(Layout::Row, Layout::Col).resolved();
    let width = |m, n, sms| describe(&sq(m, n), DType::Bf16, DType::Bf16, [0, 0], sms, None).unwrap().1.width;
    assert_eq!([width(1, 5120, 132), width(16, 6144, 132), width(1, 4352, 132)], [2, 2, 2]);
    assert_eq!([width(1, 4096, 132), width(1, 6400, 132), width(1, 11008, 132), width(17, 5120, 132)], [1; 4]);
    assert_eq!(width(1, 5120, 160), 1, "320 slabs are one wave of 320 slots");
    let (name, _) = describe(&sq(1, 5120), DType::Bf16, DType::Bf16, [0, 0], 132, None).unwrap();
    assert_eq!(name, "ft_gemv_bf16_bf16_g1_v_w2");
    // Odd K (interleaved slabs, whole groups of 128 rows): 1x5121 has 41 x 8 = 328 slabs.
    let odd5 = Gemm::new(1, 5121, 4099).layouts(Layout::Row, Layout::Col).resolved();
    assert_eq!(describe(&odd5, DType::Bf16, DType::Bf16, [256, 256], 132, None).unwrap().1.width, 2);
    let (name, plan) = describe(&rc(33), DType::F16, DType::F32, [0, 2], 132, None).unwrap();
    assert!(name.starts_with("ft_gemv_f16_f32_g8_v"), "{name}");
    assert_eq!(plan.slabs, 4096usize.div_ceil(16 * plan.width));
    // Odd K: slabs of rows 8 apart, whole groups of 128 rows, K cut in a frame up to 7 longer.
    let odd = Gemm::new(1, 4097, 777).layouts(Layout::Row, Layout::Col).resolved();
    let (_, plan) = describe(&odd, DType::Bf16, DType::Bf16, [256, 256], 132, None).unwrap();
    assert_eq!(plan.slabs, 33 * 8);
    // One row against a short K: x is read in the slabs' frame too; otherwise from its copies.
    assert!(x_in_place(&odd) && !x_in_place(&Gemm { m: 2, ..odd }) && !x_in_place(&Gemm { k: 4099, ..odd }));
    assert!(plan.ksplit * plan.kslice >= 777 + 7);
}
