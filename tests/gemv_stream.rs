//! The streaming small-M kernel (`ops::gemv_stream`, sm_90a): on the GPU, forced by a config
//! naming it (`path = "small-m"`, tile 3) so that small shapes take it too, against the
//! float64 reference with poisoned outputs: M in 1..=16, N around the 16-row slab, K around the
//! 512-element chunk, padded leading dimensions, every epilogue, f16/bf16 with f32 and
//! same-type outputs; slabs shared by up to every block (the join), repeated on one stream
//! (its counters must be back at zero); random shapes. On the CPU: which calls take it and
//! what `explain` says.

use ferrotune::DType;
use ferrotune::config::{GemmConfig, GemmPath};
use ferrotune::ops::gemm::{Gemm, Layout};
use ferrotune::ops::gemm_plan::{Family, plan};
use ferrotune::ops::gemv_stream::{MIN_WEIGHT, STREAM_TILE};
use ferrotune_kernels::gemv_stream::StreamPlan;
use ferrotune_testkit::{Rng, cuda_backend};

use crate::gemm::{dispatch, epilogue};

const STREAM: GemmConfig = GemmConfig { path: GemmPath::SmallM, tile: STREAM_TILE, ..GemmConfig::DEFAULT };

fn rc(m: usize, n: usize, k: usize) -> Gemm {
    Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col)
}

/// Whether this process would run the streaming kernel for `g` on an H100-like device.
fn streams(g: &Gemm, cfg: GemmConfig) -> bool {
    let p = plan(&g.resolved(), DType::Bf16, DType::Bf16, "sm_90a", 132, cfg, [256, 256]).unwrap();
    p.family == Family::SmallM && p.reason.contains("ft_gemvs_")
}

#[test]
fn gpu_small_m_stream_edge_shapes_match_f64_reference() {
    let Some(gpu) = cuda_backend("gpu_small_m_stream_edge_shapes_match_f64_reference") else { return };
    if std::env::var("FERROTUNE_SMALL_M_STREAM").is_ok_and(|v| v == "0") {
        println!("gpu_small_m_stream_edge_shapes_match_f64_reference: skipped: FERROTUNE_SMALL_M_STREAM=0");
        return;
    }
    let mut cases = 0u64;
    for (mi, m) in [1usize, 2, 7, 8, 9, 16].into_iter().enumerate() {
        for (ni, n) in [1usize, 15, 16, 17, 100, 1023].into_iter().enumerate() {
            for (ki, k) in [8usize, 16, 504, 512, 520, 1024, 1032, 2056, 4104].into_iter().enumerate() {
                let i = mi + ni + ki;
                let mut g = rc(m, n, k).epilogue(epilogue(i)).with_config(STREAM);
                if i % 3 == 1 {
                    let r = g.resolved();
                    g.lda = r.lda + 8; // still 16-byte rows
                    g.ldb = r.ldb + 24;
                    g.ldc = r.ldc + 3;
                }
                assert!(streams(&g, STREAM), "{g:?} should take the streaming kernel");
                let dt = [DType::Bf16, DType::F16][i % 2];
                let out_f32 = (i / 2) % 2 == 1;
                if let Err(e) = dispatch(&gpu, dt, out_f32, g, cases) {
                    panic!("{dt:?} out_f32 {out_f32}: {e}");
                }
                cases += 1;
            }
        }
    }
    println!("gpu_small_m_stream_edge_shapes_match_f64_reference: {cases} cases");
}

/// Slabs split between many blocks (one slab of 200 chunks over every SM; fewer slabs than
/// SMs), and whole slabs per block on LLM-sized weights (the built-in choice); three calls each
/// on one stream.
#[test]
fn gpu_small_m_stream_join_is_exact_and_repeatable() {
    let Some(gpu) = cuda_backend("gpu_small_m_stream_join_is_exact_and_repeatable") else { return };
    if std::env::var("FERROTUNE_SMALL_M_STREAM").is_ok_and(|v| v == "0") {
        println!("gpu_small_m_stream_join_is_exact_and_repeatable: skipped: FERROTUNE_SMALL_M_STREAM=0");
        return;
    }
    let sms = gpu.stream().gpu().map_or(132, |g| g.info().sm_count as usize);
    for (i, (m, n, k)) in [
        (1usize, 16usize, 1024 * 200),
        (5, 40, 1024 * 61),
        (2, 1000, 8192),
        (16, 4096, 4096),
        (3, 11008, 4096),
        (1, 4096, 4104),
    ]
    .into_iter()
    .enumerate()
    {
        let p = StreamPlan::new(n, k, ferrotune_kernels::gemv_stream::KC, sms);
        let shared = (0..p.slabs).filter(|&s| p.contributors(s).0 != p.contributors(s).1).count();
        // Fewer slabs than blocks: slabs are split between blocks and joined; else whole.
        assert_eq!(shared > 0, !p.whole_slabs(), "{m}x{n}x{k}: {p:?}");
        let auto = n * k >= MIN_WEIGHT;
        let g = if auto { rc(m, n, k) } else { rc(m, n, k).with_config(STREAM) }.epilogue(epilogue(i));
        assert!(streams(&g, if auto { GemmConfig::DEFAULT } else { STREAM }), "{m}x{n}x{k}");
        for rep in 0..3 {
            for dt in [DType::Bf16, DType::F16] {
                if let Err(e) = dispatch(&gpu, dt, rep % 2 == 1, g, 11 * i as u64 + rep) {
                    panic!("{dt:?} rep {rep} {p:?}: {e}");
                }
            }
        }
    }
}

/// Seeded random shapes the kernel can take (K a multiple of 8), paddings and epilogues.
#[test]
fn gpu_small_m_stream_random_shapes() {
    let Some(gpu) = cuda_backend("gpu_small_m_stream_random_shapes") else { return };
    if std::env::var("FERROTUNE_SMALL_M_STREAM").is_ok_and(|v| v == "0") {
        println!("gpu_small_m_stream_random_shapes: skipped: FERROTUNE_SMALL_M_STREAM=0");
        return;
    }
    let mut rng = Rng::new(0x57ea);
    let mut pick = |n: usize| (rng.next_u64() % n as u64) as usize;
    for case in 0..60u64 {
        let (m, n, k) = (1 + pick(16), 1 + pick(3000), 8 * (1 + pick(1200)));
        let mut g = rc(m, n, k).epilogue(epilogue(pick(4))).with_config(STREAM);
        let pad = 8 * pick(3);
        if pad > 0 {
            let r = g.resolved();
            g.lda = r.lda + pad;
            g.ldb = r.ldb + pad;
            g.ldc = r.ldc + pick(5);
        }
        let dt = [DType::Bf16, DType::F16][pick(2)];
        let out_f32 = pick(2) == 1;
        if let Err(e) = dispatch(&gpu, dt, out_f32, g, case) {
            panic!("case {case}: {dt:?} out_f32 {out_f32}: {e}");
        }
    }
}

#[test]
fn small_m_stream_is_chosen_where_bulk_copies_can_serve_and_explained_otherwise() {
    if std::env::var("FERROTUNE_SMALL_M_STREAM").is_ok() || std::env::var("FERROTUNE_SMALL_M").is_ok() {
        return;
    }
    // Built in: aligned rows, up to 16 of them, a weight of 2^25 elements or more; from 9
    // rows only where the Hopper path does not take the call (N or K below 1024).
    assert!(streams(&rc(1, 8192, 8192), GemmConfig::DEFAULT));
    assert!(streams(&rc(8, 11008, 4096), GemmConfig::DEFAULT));
    assert!(streams(&rc(16, 512, 65_536), GemmConfig::DEFAULT));
    assert!(!streams(&rc(16, 11008, 4096), GemmConfig::DEFAULT), "16 rows: the Hopper streaming tile");
    assert!(!streams(&rc(17, 11008, 4096), GemmConfig::DEFAULT), "17 rows");
    assert!(!streams(&rc(1, 4096, 4096), GemmConfig::DEFAULT), "weight below 2^25 elements");
    assert!(!streams(&rc(1, 8192, 4100), GemmConfig::DEFAULT), "K not a multiple of 8");
    // Asked for by a config: any size; the plan says why not where it cannot.
    assert!(streams(&rc(3, 5, 8), STREAM));
    let odd = plan(&rc(1, 8192, 4097).resolved(), DType::Bf16, DType::Bf16, "sm_90a", 132, STREAM, [256, 256]).unwrap();
    assert_eq!(odd.family, Family::SmallM);
    assert!(odd.reason.contains("not the streaming kernel: rows not 16-byte aligned"), "{}", odd.reason);
    let sm80 = plan(&rc(1, 8192, 4096).resolved(), DType::Bf16, DType::Bf16, "sm_80", 108, STREAM, [256, 256]).unwrap();
    assert!(sm80.reason.contains("need the sm_90a module"), "{}", sm80.reason);
    assert_eq!(
        plan(&rc(1, 4096, 4096).resolved(), DType::Bf16, DType::Bf16, "sm_90a", 132, STREAM, [256, 256])
            .unwrap()
            .path(),
        "small-m:stream"
    );
}
