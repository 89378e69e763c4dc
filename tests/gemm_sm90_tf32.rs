//! f32 inputs on TF32 through the Hopper path (wgmma k8 on TMA-loaded f32 tiles) against
//! float64 references with the TF32 tolerance: edge shapes, every epilogue, padded leading
//! dimensions, strided batches, each compiled tile forced, the split of K on both split
//! tiles, random shapes whose K is or is not a multiple of 4 (rows TMA cannot load are packed
//! for it, or on small problems go to the mma.sync TF32 tiles), exact f32 on FFMA; outputs
//! NaN-poisoned first (`gemm::run`).

use ferrotune::config::GemmPath;
use ferrotune::ops::gemm::{Gemm, Layout, Precision};
use ferrotune::ops::gemm_plan::{Family, Launch};
use ferrotune::{Backend, DType};
use ferrotune_kernels::gemm::Math;
use ferrotune_kernels::gemm_sm90::TF32_TILES;
use ferrotune_testkit::Rng;

use crate::gemm::{dispatch, epilogue};
use crate::gemm_sm90::{family, hopper};

/// `x wᵀ` in f32, rows padded to whole 16 bytes (4 floats; B's by 4 more) as TMA needs.
fn rc(m: usize, n: usize, k: usize) -> Gemm {
    let mut g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col);
    g.lda = k.next_multiple_of(4);
    g.ldb = k.next_multiple_of(4) + 4;
    g
}

/// The Hopper tile and K slices `g` runs on, asserting it takes the TF32 Hopper path.
fn on_hopper(b: &Backend, g: Gemm, seed: u64) -> (u8, usize) {
    let f = family(b, &g, DType::F32, DType::F32);
    let Family::Launch(Launch::Hopper(v, sp)) = f else { panic!("{g:?}: expected the Hopper path, plan {f:?}") };
    assert_eq!((v.dtype, v.out_dtype()), (DType::F32, DType::F32));
    dispatch(b, DType::F32, false, g, seed).unwrap();
    (v.tile, sp.slices)
}

/// Asserts that `g` packs its operands first (whose packed copy then takes the TF32 Hopper
/// path) and checks the result.
fn on_packed(b: &Backend, g: Gemm, seed: u64) {
    let f = family(b, &g, DType::F32, DType::F32);
    assert_eq!(f, Family::Pack, "{g:?}");
    let explained =
        ferrotune::ops::gemm_plan::explain(&b.stream(), &g, DType::F32, DType::F32).unwrap().expect("a GPU plan");
    assert!(explained.reason.contains("then sm90:ft_gemm90_tf32"), "{}", explained.reason);
    dispatch(b, DType::F32, false, g, seed).unwrap();
}

/// The math of the `mma.sync`/FFMA tiles `g` runs on (asserting it does), after checking it.
fn on_tiles(b: &Backend, g: Gemm, seed: u64) -> Math {
    let f = family(b, &g, DType::F32, DType::F32);
    let Family::Launch(Launch::Tiles(v)) = f else { panic!("{g:?}: expected the mma.sync tiles, plan {f:?}") };
    dispatch(b, DType::F32, false, g, seed).unwrap();
    v.math
}

#[test]
fn sm90_tf32_edge_shapes_every_epilogue() {
    let Some(b) = hopper("sm90_tf32_edge_shapes_every_epilogue") else { return };
    let mut i = 0;
    for m in [1, 2, 63, 65, 129, 257] {
        for n in [1, 63, 65, 129, 257] {
            for k in [4, 8, 36, 260] {
                let mut g = rc(m, n, k).epilogue(epilogue(i));
                if i % 3 == 0 {
                    g.ldc = n + 3; // the gap between rows must stay poisoned
                }
                on_hopper(&b, g, 300 + i as u64);
                i += 1;
            }
        }
    }
    // A long K, unsplit (the streaming tile: its tiles fit one wave); larger shapes on the
    // three heuristic tiles; strided batches with gaps.
    assert_eq!(on_hopper(&b, rc(129, 257, 4100).epilogue(epilogue(3)).split_k(1), 1), (10, 1));
    assert_eq!(on_hopper(&b, rc(2048, 4096, 320).epilogue(epilogue(1)), 2).0, 0);
    // No C read and D rows of whole 16-byte chunks: the persistent 128 x 256 with the TMA store.
    assert_eq!(on_hopper(&b, rc(2048, 4096, 320).epilogue(epilogue(2)), 10).0, 8);
    assert_eq!(on_hopper(&b, rc(1100, 2048, 264).epilogue(epilogue(0)), 11).0, 8);
    assert_eq!(on_hopper(&b, rc(1000, 1000, 1000).epilogue(epilogue(2)), 3).0, 10);
    assert_eq!(on_hopper(&b, rc(512, 3072, 300).epilogue(epilogue(0)), 9).0, 1);
    let mut g = rc(200, 300, 136).batched(3).epilogue(epilogue(3));
    g.lda = 140;
    g.ldb = 148;
    g.ldc = 310;
    g.stride_a = 200 * 140 + 64;
    g.stride_b = 300 * 148 + 8;
    g.stride_c = 200 * 310 + 5;
    on_hopper(&b, g, 4);
    on_hopper(&b, rc(65, 129, 72).batched(5).epilogue(epilogue(2)), 5);
}

#[test]
fn sm90_tf32_every_tile_and_the_split() {
    let Some(b) = hopper("sm90_tf32_every_tile_and_the_split") else { return };
    for t in TF32_TILES {
        for (i, g) in
            [rc(129, 257, 68), rc(1000, 1000, 1000), rc(65, 300, 4100).split_k(1), rc(200, 136, 72).batched(3)]
                .into_iter()
                .enumerate()
        {
            let g = g.path(GemmPath::Sm90(t)).epilogue(epilogue(i + t as usize));
            assert_eq!(on_hopper(&b, g, 400 + 10 * t as u64 + i as u64).0, t, "{g:?}");
        }
    }
    // K split over blocks and joined in the kernel: the plan's streaming tile (uneven last
    // slice), and forced, the 128 x 128 tile and the 64 x 128 tile with two blocks per SM;
    // every epilogue.
    let (t, s) = on_hopper(&b, rc(256, 256, 8196).epilogue(epilogue(3)), 6);
    assert!(t == 10 && s > 1, "tile {t}, {s} slices");
    let (t, s) = on_hopper(&b, rc(129, 257, 4100).epilogue(epilogue(1)), 7);
    assert!(t == 10 && s > 1, "tile {t}, {s} slices");
    let (t, s) = on_hopper(&b, rc(256, 256, 8196).path(GemmPath::Sm90(1)).epilogue(epilogue(2)), 8);
    assert!(t == 1 && s > 1, "tile {t}, {s} slices");
    let (t, s) = on_hopper(&b, rc(64, 4096, 4096).path(GemmPath::Sm90(9)).epilogue(epilogue(0)), 9);
    assert!(t == 9 && s > 1, "tile {t}, {s} slices");
    // A tile not compiled for TF32, forced by the call: an error, not a silent fallback.
    let e = ferrotune::ops::gemm_plan::explain(
        &b.stream(),
        &rc(256, 256, 256).path(GemmPath::Sm90(2)),
        DType::F32,
        DType::F32,
    )
    .unwrap_err();
    assert!(e.to_string().contains("not compiled for tf32"), "{e}");
}

/// Random shapes, tight leading dimensions: K a multiple of 4 takes the Hopper path; any other
/// K (rows of a length TMA cannot step) is packed into aligned rows for it where the work
/// pays for the pack (`pack::MIN_MACS`), else runs the mma.sync TF32 tiles; exact f32 runs
/// FFMA (packed first on the same rule).
#[test]
fn sm90_tf32_random_shapes_route_by_alignment() {
    let Some(b) = hopper("sm90_tf32_random_shapes_route_by_alignment") else { return };
    let mut rng = Rng::new(2026);
    for i in 0..24u64 {
        let m = 1 + (rng.next_u64() % 700) as usize;
        let n = 1 + (rng.next_u64() % 700) as usize;
        let k = 1 + (rng.next_u64() % 1500) as usize;
        let g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).epilogue(epilogue(i as usize));
        if k.is_multiple_of(4) {
            on_hopper(&b, g, 500 + i);
        } else if m * n * k >= ferrotune::ops::pack::MIN_MACS {
            on_packed(&b, g, 500 + i);
        } else {
            assert_eq!(on_tiles(&b, g, 500 + i), Math::Tf32, "{g:?}");
        }
        if i % 4 == 0 {
            let strict = g.precision(Precision::Strict);
            if !k.is_multiple_of(4) && m * n * k >= ferrotune::ops::pack::MIN_MACS {
                // Packed for the FFMA kernel's 16-byte form (tests/pack.rs checks that form).
                assert_eq!(family(&b, &strict, DType::F32, DType::F32), Family::Pack, "{g:?}");
                dispatch(&b, DType::F32, false, strict, 600 + i).unwrap();
            } else {
                assert_eq!(on_tiles(&b, strict, 600 + i), Math::Ffma, "{g:?}");
            }
        }
    }
    // K = 4 exactly once more with an odd M and N; a K not a multiple of 4 on a large shape
    // (packed) and on a small one (the tiles); an A at an offset of one float, K aligned.
    on_hopper(&b, Gemm::new(333, 517, 4).layouts(Layout::Row, Layout::Col), 700);
    on_packed(&b, Gemm::new(1024, 1024, 1023).layouts(Layout::Row, Layout::Col), 701);
    assert_eq!(on_tiles(&b, Gemm::new(64, 96, 1023).layouts(Layout::Row, Layout::Col), 702), Math::Tf32);
}
