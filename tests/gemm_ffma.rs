//! The exact-f32 FFMA tiles (`ffma::TILES`: 128 and 256 rows) against the float64 reference:
//! every layout, every epilogue, shapes that end mid-tile in M, N and K, a padded batch, with
//! NaN-poisoned outputs (`gemm::dispatch`), each tile forced by `Gemm::tile` and checked to be
//! the one the plan ran; and the epilogue's 16-byte and per-element stores in one output.

use ferrotune::DType;
use ferrotune::ops::gemm::{Gemm, Precision};
use ferrotune::ops::gemm_plan::explain;
use ferrotune_kernels::gemm::ffma;
use ferrotune_testkit::cuda_backend;

use crate::gemm::{dispatch, epilogue, layouts};

#[test]
fn gpu_ffma_every_tile_matches_f64_reference() {
    let Some(gpu) = cuda_backend("gpu_ffma_every_tile_matches_f64_reference") else { return };
    let mut cases = 0;
    for (t, &rows) in ffma::TILES.iter().enumerate() {
        for (l, (la, lb)) in layouts().into_iter().enumerate() {
            // Multiples of 4 (16-byte rows in every layout), not of the tiles; K not of 8.
            for (i, &(m, n, k, batch)) in
                [(300usize, 260usize, 72usize, 1usize), (516, 132, 1004, 1), (4, 8, 4, 1), (260, 136, 44, 2)]
                    .iter()
                    .enumerate()
            {
                let mut g = Gemm::new(m, n, k)
                    .layouts(la, lb)
                    .batched(batch)
                    .epilogue(epilogue(i + l + t))
                    .precision(Precision::Strict)
                    .tile(t);
                if batch > 1 {
                    let r = g.resolved();
                    g.stride_a = r.stride_a + 4;
                    g.stride_b = r.stride_b + 8;
                }
                let plan = explain(&gpu.stream(), &g, DType::F32, DType::F32).unwrap().expect("a GPU plan");
                let want = format!("ffma:ft_gemm_f32_{}{}_v16_f32_{rows}x128x8", lcode(la), lcode(lb));
                assert_eq!(plan.path(), want, "{g:?}: {}", plan.reason);
                if let Err(e) = dispatch(&gpu, DType::F32, true, g, (t * 1000 + cases) as u64) {
                    panic!("FFMA tile {t} ({rows} rows): {e}");
                }
                cases += 1;
            }
        }
    }
    println!("gpu_ffma_every_tile_matches_f64_reference: {cases} cases");
}

/// The FFMA epilogue stores four adjacent outputs with one 16-byte store where the row holds
/// all four and D's (and C's) element address is 16-byte aligned, else element by element:
/// with rc operands (16-byte loads need only K a multiple of 4) an N that ends two columns
/// into a group of four, and a padded `ldc` that leaves every other row of D unaligned, so
/// both stores meet in one output, on each tile and with every epilogue.
#[test]
fn gpu_ffma_epilogue_vector_and_element_stores() {
    let Some(gpu) = cuda_backend("gpu_ffma_epilogue_vector_and_element_stores") else { return };
    let (la, lb) = layouts()[1];
    let mut cases = 0;
    for (t, &rows) in ffma::TILES.iter().enumerate() {
        for (i, &(m, n, k, pad)) in
            [(300usize, 130usize, 72usize, 3usize), (130, 262, 20, 1), (64, 128, 8, 2), (17, 6, 36, 0)]
                .iter()
                .enumerate()
        {
            for e in 0..4 {
                let mut g =
                    Gemm::new(m, n, k).layouts(la, lb).epilogue(epilogue(e + i)).precision(Precision::Strict).tile(t);
                g.ldc = g.resolved().ldc + pad;
                let plan = explain(&gpu.stream(), &g, DType::F32, DType::F32).unwrap().expect("a GPU plan");
                assert_eq!(plan.path(), format!("ffma:ft_gemm_f32_rc_v16_f32_{rows}x128x8"), "{g:?}: {}", plan.reason);
                if let Err(err) = dispatch(&gpu, DType::F32, true, g, (t * 100 + cases) as u64) {
                    panic!("FFMA tile {t} ({rows} rows), {m}x{n}x{k} ldc {}: {err}", g.ldc);
                }
                cases += 1;
            }
        }
    }
    println!("gpu_ffma_epilogue_vector_and_element_stores: {cases} cases");
}

fn lcode(l: ferrotune::ops::gemm::Layout) -> &'static str {
    if l == ferrotune::ops::gemm::Layout::Row { "r" } else { "c" }
}
