//! The Hopper GEMM path (sm_90a, TMA + wgmma) against float64 references: edge shapes in
//! M, N, K, K = 4099, a large shape, every epilogue, both output types, strided batches,
//! NaN-poisoned outputs, and the plan's fallback for calls the path cannot serve. Skips
//! without a device, and on a GPU that does not load the sm_90a module.

use ferrotune::config::GemmPath;
use ferrotune::ops::gemm::{Gemm, Layout};
use ferrotune::ops::gemm_plan::{self, Family, Launch};
use ferrotune::{Backend, DType};
use ferrotune_testkit::cuda_backend;

use crate::gemm::{dispatch, epilogue};

/// The CUDA backend when it runs the sm_90a module, else `None` after saying why.
pub(crate) fn hopper(test: &str) -> Option<Backend> {
    let b = cuda_backend(test)?;
    let arch = match &b {
        Backend::Cuda(g) => g.ptx_arch().ok(),
        _ => None,
    };
    if arch != Some("sm_90a") {
        println!(
            "{test}: skipped: the GPU does not run the sm_90a module ({arch:?}); the Hopper path needs compute capability 9.0"
        );
        return None;
    }
    Some(b)
}

/// `x wᵀ` with K padded to whole 16-byte rows (what TMA needs; the padding holds random data
/// the kernel must not read).
fn rc(m: usize, n: usize, k: usize) -> Gemm {
    let mut g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col);
    g.lda = k.next_multiple_of(8);
    g.ldb = k.next_multiple_of(8) + 8;
    g
}

/// The path `g` takes on `b` (fresh allocations are 256-byte aligned).
pub(crate) fn family(b: &Backend, g: &Gemm, dt: DType, out: DType) -> Family {
    gemm_plan::explain(&b.stream(), g, dt, out).expect("a plan").expect("a CUDA stream").family
}

/// Runs `g` after asserting it takes the Hopper path, or the small-M family where that one
/// applies (the plan tries it first: M <= 64 single matrices; run with `FERROTUNE_SMALL_M=0`
/// to put those shapes on the Hopper kernel too).
fn on_hopper(b: &Backend, dt: DType, out_f32: bool, g: Gemm, seed: u64) -> Result<(), String> {
    let out = if out_f32 { DType::F32 } else { dt };
    let f = family(b, &g, dt, out);
    let small_m = ferrotune::ops::gemv::small_m_applies(&g.resolved(), dt).is_some();
    if !(matches!(f, Family::Launch(Launch::Hopper(..))) || small_m && f == Family::SmallM) {
        return Err(format!("{g:?} was expected on the Hopper path, plan: {f:?}"));
    }
    dispatch(b, dt, out_f32, g, seed)
}

const EDGES: [usize; 8] = [1, 2, 63, 65, 127, 129, 255, 257];

#[test]
fn sm90_edge_shapes_every_epilogue() {
    let Some(b) = hopper("sm90_edge_shapes_every_epilogue") else { return };
    let mut i = 0;
    for m in EDGES {
        for n in EDGES {
            for k in [1, 16, 63, 65, 257] {
                let dt = if i % 2 == 0 { DType::Bf16 } else { DType::F16 };
                let g = rc(m, n, k).epilogue(epilogue(i));
                on_hopper(&b, dt, i % 3 == 0, g, i as u64).unwrap();
                i += 1;
            }
        }
    }
}

#[test]
fn sm90_k_edges_long_k_and_large() {
    let Some(b) = hopper("sm90_k_edges_long_k_and_large") else { return };
    for (i, k) in EDGES.into_iter().chain([4099]).enumerate() {
        // No split-K (the heuristic splits the long K of this small output).
        on_hopper(&b, DType::Bf16, false, rc(129, 257, k).epilogue(epilogue(i)).split_k(1), 100 + i as u64).unwrap();
    }
    // Both tiles on a shape that fills the SMs (128 x 256) and one that does not (128 x 128).
    on_hopper(&b, DType::Bf16, false, rc(2048, 4096, 320).epilogue(epilogue(3)), 7).unwrap();
    on_hopper(&b, DType::F16, true, rc(1000, 1000, 1000).epilogue(epilogue(1)), 8).unwrap();
}

#[test]
fn sm90_strided_batches_and_leading_dimensions() {
    let Some(b) = hopper("sm90_strided_batches_and_leading_dimensions") else { return };
    // Padded leading dimensions (16-byte multiples) and a strided batch with gaps.
    let mut g = rc(200, 300, 136).batched(3).epilogue(epilogue(3));
    g.lda = 144;
    g.ldb = 152;
    g.ldc = 310;
    g.stride_a = 200 * 144 + 64;
    g.stride_b = 300 * 152 + 8;
    g.stride_c = 200 * 310 + 5;
    on_hopper(&b, DType::Bf16, false, g, 11).unwrap();
    on_hopper(&b, DType::F16, true, rc(65, 129, 72).batched(5).epilogue(epilogue(2)), 12).unwrap();
}

#[test]
fn sm90_falls_back_where_tma_cannot_load() {
    let Some(b) = hopper("sm90_falls_back_where_tma_cannot_load") else { return };
    // K = 100: rows of 200 bytes, not a multiple of 16: TMA cannot describe A or B (M = 65:
    // above the small-M family, and too little work for the pack).
    let cases = [
        Gemm::new(65, 64, 100).layouts(Layout::Row, Layout::Col),
        Gemm::new(256, 256, 256),
        rc(64, 64, 64).tile(0),
        Gemm::new(128, 128, 128).layouts(Layout::Col, Layout::Col),
    ];
    for (i, g) in cases.into_iter().enumerate() {
        let f = family(&b, &g, DType::Bf16, DType::Bf16);
        assert!(matches!(f, Family::Launch(Launch::Tiles(_))), "{g:?}: {f:?}");
        dispatch(&b, DType::Bf16, false, g, 20 + i as u64).unwrap();
    }
    // Exact f32 stays on FFMA (TF32 calls take the path: `gemm_sm90_tf32.rs`).
    let g = rc(256, 256, 256).precision(ferrotune::ops::gemm::Precision::Strict);
    let f = family(&b, &g, DType::F32, DType::F32);
    assert!(matches!(f, Family::Launch(Launch::Tiles(_))), "{f:?}");
}

#[test]
fn sm90_every_tile_forced_through_the_path() {
    let Some(b) = hopper("sm90_every_tile_forced_through_the_path") else { return };
    // Each Hopper tile (per-tile, persistent, ping-pong) forced by the call: edge rows and
    // columns, several tiles per persistent block (1000 x 1000: 16 to 64 tiles), K = 4099,
    // a strided batch, both output types, every epilogue.
    let n = ferrotune_kernels::gemm_sm90::TILES.len();
    for t in 0..n as u8 {
        let cases = [rc(129, 257, 65), rc(1000, 1000, 1000), rc(65, 300, 4099).split_k(1), rc(200, 136, 72).batched(3)];
        for (i, g) in cases.into_iter().enumerate() {
            let g = g.path(GemmPath::Sm90(t)).epilogue(epilogue(i + t as usize));
            let dt = if (i + t as usize).is_multiple_of(2) { DType::Bf16 } else { DType::F16 };
            let out = if i == 1 { DType::F32 } else { dt };
            let f = family(&b, &g, dt, out);
            let want = ferrotune_kernels::gemm_sm90::Sm90Variant { dtype: dt, out_f32: i == 1, tile: t };
            let none = ferrotune_kernels::gemm_sm90_split::Sm90Split::NONE;
            assert_eq!(f, Family::Launch(Launch::Hopper(want, none)), "tile {t}, {g:?}");
            dispatch(&b, dt, i == 1, g, 40 + 10 * t as u64 + i as u64).unwrap_or_else(|e| panic!("tile {t}: {e}"));
        }
    }
    // A forced Hopper tile the call cannot take is an error, not a silent fallback.
    let g = Gemm::new(128, 128, 128).path(GemmPath::Sm90(0));
    let e = gemm_plan::explain(&b.stream(), &g, DType::Bf16, DType::Bf16).unwrap_err();
    assert!(e.to_string().contains("layout"), "{e}");
}

/// Every cluster tile (12: persistent 128 x 256, 13: one-tile 128 x 256; two blocks along M
/// that load half of the shared B tile each and multicast it): odd and even counts of row
/// tiles (an odd count leaves the last cluster's second block past the edge, loading zeros for
/// its partner), several tile pairs per persistent cluster, K = 4099, a strided batch, both
/// output types, every epilogue. Small enough for compute-sanitizer (the device script runs
/// it under memcheck, racecheck and synccheck).
#[test]
fn sm90_cluster_tiles() {
    let Some(b) = hopper("sm90_cluster_tiles") else { return };
    let mut i = 0;
    let tiles = ferrotune_kernels::gemm_sm90::TILES;
    let clustered = (0..tiles.len() as u8).filter(|&t| tiles[t as usize].cluster > 1).collect::<Vec<_>>();
    assert!(clustered.len() >= 2, "{clustered:?}");
    for t in clustered {
        let cases = [rc(129, 257, 65), rc(300, 520, 200), rc(1000, 264, 136), rc(65, 300, 4099).split_k(1)];
        for g in cases.into_iter().chain([rc(200, 136, 72).batched(3)]) {
            let g = g.path(GemmPath::Sm90(t)).epilogue(epilogue(i));
            let dt = if i % 2 == 0 { DType::Bf16 } else { DType::F16 };
            let out_f32 = i % 3 == 1;
            let out = if out_f32 { DType::F32 } else { dt };
            let want = ferrotune_kernels::gemm_sm90::Sm90Variant { dtype: dt, out_f32, tile: t };
            let none = ferrotune_kernels::gemm_sm90_split::Sm90Split::NONE;
            assert_eq!(family(&b, &g, dt, out), Family::Launch(Launch::Hopper(want, none)), "tile {t}, {g:?}");
            dispatch(&b, dt, out_f32, g, 500 + i as u64).unwrap_or_else(|e| panic!("tile {t}: {e}"));
            i += 1;
        }
    }
}

/// The row split (`ops::gemm_sm90_rows`): a problem whose 128 x 256 tiles leave the last wave
/// at most a quarter full after one or two whole waves runs the rows of the whole waves, then
/// the rest as a problem of its own (A, C and D advanced by the head's rows). With a C read
/// (the one-tile 128 x 256 head; without one these shapes take the persistent 128 x 192
/// whole), both outputs, and D rows TMA cannot store whole (N = 3070 halves); 4096 x 2560 (42%
/// in the last wave) as the control that does not split; 1664 x 3072 takes the one-tile
/// 128 x 160 instead (two waves of it, `gemm_sm90_fill::n160_fills_as_fast`). Every element
/// checked, NaN-poisoned before the call.
#[test]
fn sm90_row_split_matches_the_reference() {
    let Some(b) = hopper("sm90_row_split_matches_the_reference") else { return };
    let sms = b.stream().gpu().map_or(132, |g| g.info().sm_count as usize);
    for (i, (m, n, k)) in
        [(3072, 3072, 72), (3000, 3070, 136), (4096, 2560, 64), (1664, 3072, 200)].into_iter().enumerate()
    {
        for e in 0..2 {
            // Epilogues 1 and 3 read C (beta != 0).
            let g = rc(m, n, k).epilogue(epilogue(1 + 2 * e));
            let dt = if (i + e) % 2 == 0 { DType::Bf16 } else { DType::F16 };
            let out_f32 = e == 1;
            let out = if out_f32 { DType::F32 } else { dt };
            let f = family(&b, &g, dt, out);
            let n160 = ferrotune::ops::gemm_sm90_fill::n160_fills_as_fast(&g, dt, sms as u32);
            let splits = ferrotune::ops::gemm_sm90_rows::head_rows(m, n, 128, 256, sms).is_some() && !n160;
            assert_eq!(n160, (m, n) == (1664, 3072), "{m}x{n}");
            assert_eq!(matches!(f, Family::Launch(Launch::HopperRows(_))), splits, "{m}x{n}x{k} on {sms} SMs: {f:?}");
            dispatch(&b, dt, out_f32, g, 600 + 2 * i as u64 + e as u64).unwrap();
        }
    }
}

/// The TMA-store epilogue (one-tile form, D describable by TMA, no C read: fresh allocations
/// are 256-byte aligned, so every row here of a multiple of 16 bytes takes it): ragged edges
/// in M and N (partial 64-row slabs, partial and absent 64-column boxes), padded leading
/// dimensions whose padding must stay poisoned, a strided batch, each activation with and
/// without a bias, both output types (N = 100: whole 16-byte rows for f32 only, so 16-bit
/// outputs take the staged epilogue), on each one-tile form (two consumers 128 x 256 and
/// 128 x 128, one consumer 64 x 128 at 4 and 8 stages) and two persistent ones (128 x 256,
/// 128 x 128: each warp's 16 rows box by box through buffers of its own; the device script
/// also runs this with `FERROTUNE_SM90_MAX_BLOCKS=3`, so each block stores many tiles), and the
/// 128 x 256 tiles in clusters of two blocks (persistent and one-tile; 257 rows leave the last
/// cluster's second block past the edge), the persistent 128 x 192 (three boxes of 64 columns
/// per 16-bit row), and both again with a whole tile of store buffers (15: 4 per warp, 16: 3),
/// and the ping-pong tiles (4: 64 x 256, 5: 64 x 128, 6: 128 x 128 whose warps store two
/// slabs per tile; 7, 64 x 256 at five stages, has no room for the buffers and takes the
/// staged epilogue), and the one-tile 128 x 160 (19: five 16-bit boxes of 32 columns per row,
/// in the 64-byte swizzle, the last of a ragged tile partly or wholly past N). A C read
/// (beta != 0) on the same shapes takes the staged epilogue.
#[test]
fn sm90_tma_store_epilogue_edges() {
    use ferrotune::ops::gemm::Epilogue;
    use ferrotune_kernels::elementwise::Activation;
    let Some(b) = hopper("sm90_tma_store_epilogue_edges") else { return };
    let epis = [
        Epilogue::PLAIN,
        Epilogue { alpha: -0.75, beta: 0.0, bias: true, act: Activation::GeluTanh },
        Epilogue { alpha: 1.0, beta: 0.0, bias: true, act: Activation::GeluErf },
        Epilogue { alpha: 2.0, beta: 0.0, bias: false, act: Activation::Relu },
        Epilogue { alpha: 0.5, beta: -1.5, bias: true, act: Activation::None },
    ];
    let mut i = 0;
    for (m, n) in [(1, 8), (63, 136), (65, 64), (129, 264), (200, 520), (257, 1000), (65, 100)] {
        for (tile, k) in [
            (0u8, 72),
            (1, 136),
            (9, 64),
            (10, 200),
            (8, 520),
            (3, 72),
            (12, 264),
            (13, 72),
            (14, 136),
            (15, 200),
            (16, 72),
            (4, 200),
            (5, 136),
            (6, 520),
            (7, 72),
            (19, 264),
        ] {
            // The epilogue moves on by one per shape, so every tile meets every epilogue.
            let mut g = rc(m, n, k).epilogue(epis[(i + i / 16) % epis.len()]).path(GemmPath::Sm90(tile));
            if i % 3 == 1 {
                g.ldc = n + 8;
            }
            let dt = if i % 2 == 0 { DType::Bf16 } else { DType::F16 };
            let out_f32 = i % 4 == 3;
            let out = if out_f32 { DType::F32 } else { dt };
            let f = family(&b, &g, dt, out);
            assert!(matches!(f, Family::Launch(Launch::Hopper(..))), "tile {tile}, {g:?}: {f:?}");
            dispatch(&b, dt, out_f32, g, 300 + i as u64).unwrap_or_else(|e| panic!("tile {tile}: {e}"));
            i += 1;
        }
    }
    // A strided batch with padded rows and a gap between the matrices (16-byte multiples).
    let mut g = rc(130, 200, 64).batched(3).epilogue(epis[1]);
    g.ldc = 208;
    g.stride_c = 130 * 208 + 16;
    on_hopper(&b, DType::Bf16, false, g, 399).unwrap();
}
