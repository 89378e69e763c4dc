//! The Hopper split-K (K cut over blocks, slices joined in the kernel by a fixed tree) against
//! float64 references: shapes whose few output tiles make the plan split (M, N odd or 1, K odd,
//! uneven last slices, 2 to 64 slices; the plan's streaming tile and, forced, the other split
//! tiles, the 128 x 256 ones included), every epilogue, both output types, NaN-poisoned
//! outputs; repeated calls give bit-identical results (the counters reset, the order fixed).
//! Skips without a device, and on a GPU that does not load the sm_90a module.

use ferrotune::config::GemmPath;
use ferrotune::ops::gemm::{Gemm, Layout};
use ferrotune::ops::gemm_plan::{self, Family, Launch};
use ferrotune::{Backend, DType, bf16, f16};
use ferrotune_testkit::{Rng, cuda_backend};

use crate::gemm::{check, dispatch, epilogue, make_case, run};

/// The CUDA backend when it runs the sm_90a module, else `None` after saying why.
fn hopper(test: &str) -> Option<Backend> {
    let b = cuda_backend(test)?;
    let arch = match &b {
        Backend::Cuda(g) => g.ptx_arch().ok(),
        _ => None,
    };
    if arch != Some("sm_90a") {
        println!("{test}: skipped: the GPU does not run the sm_90a module ({arch:?}); the Hopper split-K needs it");
        return None;
    }
    Some(b)
}

/// `x wᵀ` with rows padded to 16 bytes (what TMA needs; the padding holds data the kernel
/// must not read).
fn rc(m: usize, n: usize, k: usize) -> Gemm {
    let mut g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col);
    g.lda = k.next_multiple_of(8);
    g.ldb = k.next_multiple_of(8) + 8;
    g
}

/// The slices the plan gives `g`, asserting it is the Hopper split.
fn slices(b: &Backend, g: &Gemm, dt: DType, out: DType) -> Result<usize, String> {
    let p = gemm_plan::explain(&b.stream(), g, dt, out).map_err(|e| e.to_string())?.expect("a CUDA stream");
    match p.family {
        Family::Launch(Launch::Hopper(_, sp)) if sp.is_split() => Ok(sp.slices),
        f => Err(format!("{g:?}: expected the Hopper split-K, plan {f:?} ({})", p.reason)),
    }
}

#[test]
fn gpu_sm90_split_k_shapes_every_epilogue() {
    let Some(b) = hopper("gpu_sm90_split_k_shapes_every_epilogue") else { return };
    // (m, n, k, forced tile): one tile of odd edges, odd K, uneven last slices, up to 64
    // slices on the plan's streaming tile; forced, the 128 x 128 tile and the 64 x 128 tile
    // with two blocks per SM (their own split rule).
    let shapes = [
        (65, 1, 300_000, None),
        (129, 257, 40_990, None),
        (300, 200, 50_001, None),
        (257, 129, 9000, None),
        (128, 128, 70_000, None),
        (1000, 1000, 2100, Some(1)),
        (100, 3, 20_000, None),
        (48, 1100, 3000, Some(9)),
        (33, 1030, 5001, Some(9)),
        // The 128 x 256 tile (two consumers, 128 accumulators each) and its clustered form:
        // 64 slices of a long K, odd edges and an uneven last slice.
        (256, 256, 65_536, Some(0)),
        (129, 300, 50_001, Some(0)),
        (300, 257, 40_000, Some(13)),
    ];
    let mut seen = vec![];
    for (i, &(m, n, k, tile)) in shapes.iter().enumerate() {
        let dt = if i % 2 == 0 { DType::Bf16 } else { DType::F16 };
        let out_f32 = i % 3 == 1;
        let out = if out_f32 { DType::F32 } else { dt };
        let g = rc(m, n, k).epilogue(epilogue(i));
        let g = if let Some(t) = tile { g.path(GemmPath::Sm90(t)) } else { g };
        let s = slices(&b, &g, dt, out).unwrap();
        seen.push(s);
        dispatch(&b, dt, out_f32, g, 300 + i as u64).unwrap_or_else(|e| panic!("{m}x{n}x{k}, {s} slices: {e}"));
    }
    assert!(seen.iter().any(|&s| s % 2 == 1) && seen.iter().any(|&s| s >= 32), "slices {seen:?}");
}

/// The streaming tile in clusters of 2 and 4 blocks along M (B multicast), split: row tiles
/// not a multiple of the cluster (blocks past the edge that only load B), one row tile, both
/// outputs, every epilogue. Small enough for compute-sanitizer.
#[test]
fn gpu_sm90_split_k_cluster_tiles() {
    let Some(b) = hopper("gpu_sm90_split_k_cluster_tiles") else { return };
    let c2 = ferrotune::ops::gemm_sm90::STREAM_C2_TILE;
    let c4 = ferrotune::ops::gemm_sm90::STREAM_C4_TILE;
    let shapes = [(300, 200, 20_001, c4), (257, 129, 9000, c2), (129, 300, 12_000, c4), (64, 256, 10_000, c2)];
    for (i, &(m, n, k, tile)) in shapes.iter().enumerate() {
        assert!(ferrotune_kernels::gemm_sm90::TILES[tile as usize].cluster > 1);
        let dt = if i % 2 == 0 { DType::Bf16 } else { DType::F16 };
        let out_f32 = i % 3 == 1;
        let out = if out_f32 { DType::F32 } else { dt };
        let g = rc(m, n, k).epilogue(epilogue(i + 1)).path(GemmPath::Sm90(tile));
        let s = slices(&b, &g, dt, out).unwrap();
        assert!(s >= 2, "{m}x{n}x{k} on tile {tile}: {s} slices");
        dispatch(&b, dt, out_f32, g, 700 + i as u64)
            .unwrap_or_else(|e| panic!("{m}x{n}x{k}, tile {tile}, {s} slices: {e}"));
    }
}

#[test]
fn gpu_sm90_split_k_is_deterministic_and_reusable() {
    let Some(b) = hopper("gpu_sm90_split_k_is_deterministic_and_reusable") else { return };
    // Two shapes alternating on the same stream's workspace (different tile and slice counts),
    // each run three times: every run checked, all bit-identical.
    let mut rng = Rng::new(77);
    let c1 = make_case::<bf16, bf16>(&mut rng, rc(256, 256, 16_384).epilogue(epilogue(3)));
    let c2 = make_case::<f16, f32>(&mut rng, rc(384, 130, 20_000).epilogue(epilogue(1)));
    slices(&b, &c1.g, DType::Bf16, DType::Bf16).unwrap();
    slices(&b, &c2.g, DType::F16, DType::F32).unwrap();
    let (mut first1, mut first2) = (None, None);
    for _ in 0..3 {
        let d1 = run(&b, &c1).unwrap();
        let d2 = run(&b, &c2).unwrap();
        check(&c1, &d1).unwrap();
        check(&c2, &d2).unwrap();
        let bits1: Vec<u16> = d1.iter().map(|x| x.to_bits()).collect();
        let bits2: Vec<u32> = d2.iter().map(|x| x.to_bits()).collect();
        assert_eq!(first1.get_or_insert_with(|| bits1.clone()), &bits1, "bf16 run differs");
        assert_eq!(first2.get_or_insert_with(|| bits2.clone()), &bits2, "f32 run differs");
    }
}

#[test]
fn gpu_sm90_split_k_not_taken_where_it_does_not_apply() {
    let Some(b) = hopper("gpu_sm90_split_k_not_taken_where_it_does_not_apply") else { return };
    let unsplit = |g: Gemm| {
        let p = gemm_plan::explain(&b.stream(), &g, DType::Bf16, DType::Bf16).unwrap().unwrap();
        assert!(!matches!(p.family, Family::Launch(Launch::Hopper(_, sp)) if sp.is_split()), "{g:?}: {}", p.path());
    };
    unsplit(rc(4096, 4096, 4096)); // a full wave of tiles
    unsplit(rc(256, 256, 256)); // K too short to slice
    unsplit(rc(256, 256, 65_536).split_k(1)); // the call says no split
    unsplit(rc(256, 256, 65_536).batched(2)); // batches do not split
    // A split the call forces runs the mma.sync split-K.
    let p = gemm_plan::explain(&b.stream(), &rc(256, 256, 8192).split_k(4), DType::Bf16, DType::Bf16).unwrap().unwrap();
    assert!(matches!(p.family, Family::Launch(Launch::SplitK(_))), "{}", p.path());
}
