//! The row-per-warp small-M kernel (`ops::gemv_rows`): on the GPU, forced by a config naming it
//! (`path = "small-m"`, tile 4) so that aligned and long rows take it too, against the float64
//! reference with poisoned outputs: M in 1..=64 (one block's rows or slices of 16), N around the 8-row block, K around the 16-byte
//! vector and the lanes' batches, padded and odd leading dimensions, both layouts of x, every
//! epilogue, f16/bf16 with f32 and same-type outputs; weights at odd view offsets whose
//! neighbouring elements are NaN and infinity (they share the edge vectors and must not reach
//! the sums); seeded random shapes. On the CPU: which calls take it and what `explain` says.

use ferrotune::config::{GemmConfig, GemmPath};
use ferrotune::ops::gemm::{Gemm, Layout, gemm};
use ferrotune::ops::gemm_plan::{Family, plan};
use ferrotune::ops::gemv_rows::ROWS_TILE;
use ferrotune::{Buffer, DType, bf16};
use ferrotune_testkit::{Rng, cuda_backend, poison};

use crate::gemm::{Case, check, dispatch, epilogue, make_case};

const ROWS: GemmConfig = GemmConfig { path: GemmPath::SmallM, tile: ROWS_TILE, ..GemmConfig::DEFAULT };

/// Whether this process would run the row kernel for `g` (weight at `pb`) on an H100-like device.
fn takes_rows(g: &Gemm, cfg: GemmConfig, pb: u64) -> bool {
    let p = plan(&g.resolved(), DType::Bf16, DType::Bf16, "sm_90a", 132, cfg, [256, pb]).unwrap();
    p.family == Family::SmallM && p.reason.contains("ft_gemvr_")
}

fn disabled(test: &str) -> bool {
    let off = std::env::var("FERROTUNE_SMALL_M_ROWS").is_ok_and(|v| v == "0")
        || std::env::var("FERROTUNE_SMALL_M").is_ok_and(|v| v == "0");
    if off {
        println!("{test}: skipped: the row kernel is switched off in this environment");
    }
    off
}

#[test]
fn gpu_small_m_rows_edge_shapes_match_f64_reference() {
    let test = "gpu_small_m_rows_edge_shapes_match_f64_reference";
    let Some(gpu) = cuda_backend(test) else { return };
    if disabled(test) {
        return;
    }
    let (mut cases, mut taken) = (0u64, 0u64);
    for (mi, m) in [1usize, 2, 3, 5, 8, 9, 16, 17, 33, 48, 64].into_iter().enumerate() {
        for (ni, n) in [1usize, 7, 8, 9, 100, 1023].into_iter().enumerate() {
            for (ki, k) in [0usize, 1, 7, 8, 9, 63, 255, 257, 777, 1025, 2500].into_iter().enumerate() {
                let i = mi + ni + ki;
                let la = if i % 4 == 3 { Layout::Col } else { Layout::Row };
                let mut g = Gemm::new(m, n, k).layouts(la, Layout::Col).epilogue(epilogue(i)).with_config(ROWS);
                let r = g.resolved();
                match i % 3 {
                    1 => {
                        g.lda = r.lda + 3;
                        g.ldb = r.ldb + 1; // every row at a different misalignment
                        g.ldc = r.ldc + 2;
                    }
                    2 => g.ldb = r.ldb + 8, // aligned rows when K is a multiple of 8
                    _ => {}
                }
                // x staged in shared memory must fit the kernel's shared memory (a slice of 16
                // rows at least); else the slab kernel runs.
                let fits = ferrotune::ops::gemv_rows::block_rows(m, k).is_some();
                assert_eq!(takes_rows(&g, ROWS, 256), fits, "{g:?}: the row kernel?");
                taken += fits as u64;
                let dt = [DType::Bf16, DType::F16][i % 2];
                let out_f32 = (i / 2) % 2 == 1;
                if let Err(e) = dispatch(&gpu, dt, out_f32, g, cases) {
                    panic!("{dt:?} out_f32 {out_f32}: {e}");
                }
                cases += 1;
            }
        }
    }
    println!("{test}: {cases} cases, {taken} on the row kernel");
}

/// Weights as views 1, 3 and 7 elements into their buffers, with NaN before the view and in
/// the padding of every row, and an infinity as the element after the last row: the edge
/// vectors of each row's frame hold them, and the kernel must leave them out.
#[test]
fn gpu_small_m_rows_ignore_neighbouring_nan_and_inf() {
    let test = "gpu_small_m_rows_ignore_neighbouring_nan_and_inf";
    let Some(gpu) = cuda_backend(test) else { return };
    if disabled(test) {
        return;
    }
    let s = gpu.stream();
    let shapes = [(1usize, 4097usize, 777usize, 1usize, 0usize), (3, 100, 63, 3, 5), (8, 33, 9, 7, 1), (2, 9, 1, 1, 2)];
    for (i, (m, n, k, offset, pad)) in shapes.into_iter().enumerate() {
        let mut g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).epilogue(epilogue(i));
        g.ldb = k + pad;
        let g = g.with_config(if m == 1 { GemmConfig::DEFAULT } else { ROWS });
        assert!(takes_rows(&g, g.config.unwrap_or(GemmConfig::DEFAULT), 256 + 2 * offset as u64), "{g:?}");
        let mut rng = Rng::new(77 + i as u64);
        let case: Case<bf16, bf16> = make_case(&mut rng, g);
        let mut b = vec![bf16::NAN; offset];
        for row in 0..n {
            for c in 0..g.ldb {
                b.push(if c < k { case.b[row * g.ldb + c] } else { bf16::NAN });
            }
        }
        b.truncate(offset + (n - 1) * g.ldb + k);
        b.push(bf16::INFINITY);
        b.extend([bf16::NAN; 8]);
        let a = Buffer::from_slice(&s, &case.a).unwrap();
        let bb = Buffer::from_slice(&s, &b).unwrap();
        let c = Buffer::from_slice(&s, &case.c).unwrap();
        let bias = Buffer::from_slice(&s, &case.bias).unwrap();
        let mut d = Buffer::from_slice(&s, &vec![poison::<bf16>(); case.c.len()]).unwrap();
        let r = g.resolved();
        let bv = bb.view(offset..offset + (n - 1) * g.ldb + k).unwrap();
        let (cv, biasv) = (c.all(), bias.all());
        gemm::<bf16, bf16>(
            &s,
            &g,
            &a.all(),
            &bv,
            (r.epilogue.beta != 0.0).then_some(&cv),
            r.epilogue.bias.then_some(&biasv),
            &mut d.all_mut(),
        )
        .unwrap_or_else(|e| panic!("{m}x{n}x{k} offset {offset}: {e}"));
        if let Err(e) = check(&case, &d.to_vec(&s).unwrap()) {
            panic!("{m}x{n}x{k} offset {offset} ldb {}: {e}", g.ldb);
        }
    }
}

/// Seeded random shapes the kernel can take, forced, with paddings, layouts of x and epilogues.
#[test]
fn gpu_small_m_rows_random_shapes() {
    let test = "gpu_small_m_rows_random_shapes";
    let Some(gpu) = cuda_backend(test) else { return };
    if disabled(test) {
        return;
    }
    let mut rng = Rng::new(0x60e5);
    let mut pick = |n: usize| (rng.next_u64() % n as u64) as usize;
    for case in 0..80u64 {
        let (m, n, k) = (1 + pick(if case % 2 == 0 { 16 } else { 64 }), 1 + pick(3000), pick(1400));
        let la = if pick(4) == 0 { Layout::Col } else { Layout::Row };
        let mut g = Gemm::new(m, n, k).layouts(la, Layout::Col).epilogue(epilogue(pick(4))).with_config(ROWS);
        if pick(2) == 1 {
            let r = g.resolved();
            g.lda = r.lda + pick(9);
            g.ldb = r.ldb + pick(9);
            g.ldc = r.ldc + pick(5);
        }
        let dt = [DType::Bf16, DType::F16][pick(2)];
        let out_f32 = pick(2) == 1;
        if let Err(e) = dispatch(&gpu, dt, out_f32, g, case) {
            panic!("case {case}: {dt:?} out_f32 {out_f32}: {e}");
        }
    }
}

/// Every team size (warps per 8-row group: 1, 2, 4, 8) on shapes whose K and N choose it, with
/// odd leading dimensions and partial last blocks, against the float64 reference.
#[test]
fn gpu_small_m_rows_every_team() {
    let test = "gpu_small_m_rows_every_team";
    let Some(gpu) = cuda_backend(test) else { return };
    if disabled(test) {
        return;
    }
    let sms = gpu.stream().gpu().map_or(132, |g| g.info().sm_count.max(1) as usize);
    let mut seen = std::collections::BTreeSet::new();
    let mut rows_seen = std::collections::BTreeSet::new();
    let shapes = [
        (1usize, 9001usize, 100usize),
        (9, 20_011, 60),
        (3, 5003, 129),
        (4, 9000, 200),
        (1, 3001, 255),
        (16, 4501, 250),
        (7, 2000, 777),
        (40, 6007, 300),
        (64, 20_000, 130),
        (33, 1023, 777),
    ];
    for (i, (m, n, k)) in shapes.into_iter().enumerate() {
        let mut g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).epilogue(epilogue(i)).with_config(ROWS);
        g.ldb = k + 1 + i % 3;
        let l = ferrotune::ops::gemv_rows::describe(&g.resolved(), DType::Bf16, DType::Bf16, sms).unwrap();
        seen.insert(l.team);
        rows_seen.insert((l.rows, l.slices));
        for (dt, out_f32) in [(DType::Bf16, i % 2 == 0), (DType::F16, i % 2 == 1)] {
            if let Err(e) = dispatch(&gpu, dt, out_f32, g, i as u64) {
                panic!("{m}x{n}x{k} {dt:?} out_f32 {out_f32}: {e}");
            }
        }
    }
    println!("{test}: teams {seen:?}, (rows per block, slices) {rows_seen:?} on {sms} SMs");
    if sms <= 132 {
        assert_eq!(seen.len(), 4, "every team size: {seen:?}");
        // Blocks of more than 16 rows only when asked for (`FERROTUNE_SMALL_M_ROWS_R`, A/B runs:
        // the device script runs these tests with it too).
        let wide = std::env::var("FERROTUNE_SMALL_M_ROWS_R").is_ok_and(|v| v.parse::<usize>().is_ok_and(|r| r > 16));
        assert_eq!(rows_seen.iter().any(|&(r, _)| r > 16), wide, "blocks of more than 16 rows: {rows_seen:?}");
        // Slices of 16 rows unless the blocks take up to 64 rows at once.
        if !wide {
            assert!(rows_seen.iter().any(|&(_, s)| s > 1), "slices of rows: {rows_seen:?}");
        }
    }
}

#[test]
fn small_m_rows_takes_short_unaligned_rows_and_explains_otherwise() {
    if ["FERROTUNE_SMALL_M_ROWS", "FERROTUNE_SMALL_M", "FERROTUNE_SMALL_M_SHORT_K_HOPPER", "FERROTUNE_SM90"]
        .iter()
        .any(|v| std::env::var(v).is_ok())
    {
        return;
    }
    let rc = |m, n, k| Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col);
    let auto = GemmConfig::DEFAULT;
    // Built in: weight rows not 16-byte aligned, 64 of them or more; 1 row of x at any K that
    // fits, 2-8 rows up to K 1024, 9-64 rows up to K 800 (17-64 in slices of 16 rows).
    assert!(takes_rows(&rc(1, 4097, 777), auto, 256));
    assert!(!takes_rows(&rc(1, 5, 7), auto, 256), "5 weight rows");
    assert!(takes_rows(&rc(8, 3000, 65), auto, 256), "8 rows");
    assert!(!takes_rows(&rc(3, 5, 7), auto, 256), "5 weight rows");
    assert!(takes_rows(&rc(1, 4096, 1024), auto, 258), "a weight view at an odd offset");
    assert!(!takes_rows(&rc(1, 4096, 1024), auto, 256), "aligned rows");
    assert!(takes_rows(&rc(9, 4097, 777), auto, 256), "9 rows");
    assert!(!takes_rows(&rc(9, 4097, 801), auto, 256), "9 rows, K above 800");
    assert!(takes_rows(&rc(17, 2000, 777), auto, 256), "17 rows");
    assert!(!takes_rows(&rc(17, 4097, 777), auto, 256), "17 rows, K 640 or more, 2048 weight rows or more");
    assert!(takes_rows(&rc(48, 1000, 799), auto, 256), "48 rows");
    assert!(!takes_rows(&rc(48, 1000, 999), auto, 256), "48 rows, K above 800");
    assert!(!takes_rows(&rc(28, 3001, 1201), auto, 256), "28 rows, K above 800");
    assert!(takes_rows(&rc(64, 777, 333), auto, 256), "64 rows, past the slab kernel's in-place limit");
    assert!(!takes_rows(&rc(64, 777, 336), auto, 256), "64 rows, aligned");
    assert!(takes_rows(&rc(30, 6001, 601), auto, 256), "30 rows: the short-K Hopper rule starts at 33");
    assert!(!takes_rows(&rc(30, 6001, 700), auto, 256), "30 rows, K 700: the slab kernel reads the weight once");
    assert!(takes_rows(&rc(33, 4096, 65), auto, 256), "K below the short-K Hopper rule's 128");
    // 33 to 64 rows, K 128 to 1023, at least 1024 weight rows: packed for the Hopper tiles on
    // sm_90a (`gemm_plan_small_m::hopper_shape`), the row kernel elsewhere.
    for (m, n, k) in [(36, 5000, 300), (64, 5000, 301), (48, 12_001, 255), (40, 10_000, 513), (48, 6000, 129)] {
        let p = plan(&rc(m, n, k).resolved(), DType::Bf16, DType::Bf16, "sm_90a", 132, auto, [256, 256]).unwrap();
        assert!(p.family == Family::Pack && p.reason.contains("then sm90:"), "{m}x{n}x{k}: {}", p.reason);
        let p = plan(&rc(m, n, k).resolved(), DType::Bf16, DType::Bf16, "sm_80", 108, auto, [256, 256]).unwrap();
        assert!(p.reason.contains("ft_gemvr_bf16_bf16_m16"), "{m}x{n}x{k} on sm_80: {}", p.reason);
    }
    assert!(!takes_rows(&rc(33, 8191, 4099), auto, 256), "33 rows, long K");
    let p = plan(&rc(33, 1023, 777).resolved(), DType::Bf16, DType::Bf16, "sm_90a", 132, auto, [256, 256]).unwrap();
    assert!(
        p.reason.contains("ft_gemvr_bf16_bf16_m16") && p.reason.contains("3 slices of 16 rows of x"),
        "{}",
        p.reason
    );
    let p = plan(&rc(36, 1000, 300).resolved(), DType::Bf16, DType::Bf16, "sm_90a", 132, auto, [256, 256]).unwrap();
    assert!(
        p.reason.contains("ft_gemvr_bf16_bf16_m16") && p.reason.contains("3 slices of 16 rows of x"),
        "{}",
        p.reason
    );
    // The slab kernel in place up to 40 rows above K 800, the packed tiles beyond.
    let p = plan(&rc(28, 3001, 1201).resolved(), DType::Bf16, DType::Bf16, "sm_90a", 132, auto, [256, 256]).unwrap();
    assert!(p.family == Family::SmallM && p.reason.contains("not the row kernel: K above 800"), "{}", p.reason);
    let p = plan(&rc(48, 3000, 999).resolved(), DType::Bf16, DType::Bf16, "sm_90a", 132, auto, [256, 256]).unwrap();
    assert!(p.family == Family::Pack && p.reason.contains("then sm90:"), "{}", p.reason);
    // From K 1024, 33 to 40 rows stay in place: the pack would copy the large weight first.
    let p = plan(&rc(33, 8191, 4099).resolved(), DType::Bf16, DType::Bf16, "sm_90a", 132, auto, [256, 256]).unwrap();
    assert_eq!(p.family, Family::SmallM, "{}", p.reason);
    // A config naming the row kernel reads an unaligned weight in place with x column-major too
    // (the slab kernel's in-place read needs x row-major), rather than packing it.
    let mut colx = Gemm::new(48, 1023, 1025).layouts(Layout::Col, Layout::Col);
    colx.ldb = 1033;
    assert!(takes_rows(&colx, ROWS, 256), "x column-major, asked for");
    assert!(takes_rows(&rc(1, 8193, 4099), auto, 256), "one row, long K");
    assert!(!takes_rows(&rc(2, 8193, 4099), auto, 256), "two rows, long K");
    // Asked for by a config: aligned and long rows too, while x fits the shared memory.
    assert!(takes_rows(&rc(1, 4096, 4096), ROWS, 256));
    let big = plan(&rc(8, 4096, 4096).resolved(), DType::Bf16, DType::Bf16, "sm_90a", 132, ROWS, [256, 256]).unwrap();
    assert!(big.reason.contains("not the row kernel: x staged in shared memory"), "{}", big.reason);
    let p = plan(&rc(1, 4097, 777).resolved(), DType::Bf16, DType::Bf16, "sm_80", 108, ROWS, [256, 256]).unwrap();
    assert_eq!(p.path(), "small-m:rows");
    assert!(
        p.reason.contains("ft_gemvr_bf16_bf16_m1") && p.reason.contains("520 blocks of 1 x 8 rows, 8 warps per 8 rows"),
        "{}",
        p.reason
    );
    let p = plan(&rc(1, 4097, 777).resolved(), DType::Bf16, DType::Bf16, "sm_90a", 132, auto, [256, 256]).unwrap();
    assert!(p.reason.contains("weight rows not 16-byte aligned: 8 per block"), "{}", p.reason);
    let f16 = plan(&rc(1, 4097, 777).resolved(), DType::F16, DType::F16, "sm_90a", 132, auto, [256, 256]).unwrap();
    assert!(f16.reason.contains("ft_gemvr_f16_f16_m1"), "{}", f16.reason);
    let few = plan(&rc(3, 5, 7).resolved(), DType::F16, DType::F16, "sm_90a", 132, auto, [256, 256]).unwrap();
    assert!(few.reason.contains("not the row kernel: fewer than 64 weight rows"), "{}", few.reason);
    let long = plan(&rc(16, 4097, 1023).resolved(), DType::Bf16, DType::Bf16, "sm_90a", 132, auto, [256, 256]).unwrap();
    assert!(long.reason.contains("not the row kernel: K above 800 with 9 to 64 rows"), "{}", long.reason);
    let p = plan(&rc(1, 4096, 4096).resolved(), DType::Bf16, DType::Bf16, "sm_90a", 132, auto, [256, 256]).unwrap();
    assert!(p.reason.contains("not the row kernel: weight rows 16-byte aligned"), "{}", p.reason);
    assert!(GemmConfig { tile: ROWS_TILE + 1, ..ROWS }.validate().is_err());
    assert!(ROWS.validate().is_ok());
}
