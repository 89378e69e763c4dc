//! Packing of unaligned 16-bit operands before the 16-byte tiles: on the GPU against the
//! float64 reference (odd K, odd leading dimensions, every layout, epilogues, f16/bf16 with f32
//! and same-type outputs, outputs poisoned first; repeated calls that grow the workspace), and
//! of unaligned exact-f32 operands before the FFMA kernel's 16-byte form. On the CPU: which
//! calls are packed.

use ferrotune::DType;
use ferrotune::ops::gemm::{Gemm, Layout, Precision};
use ferrotune::ops::gemm_plan::explain;
use ferrotune::ops::pack::{MIN_MACS, pack_applies};
use ferrotune_testkit::cuda_backend;

use crate::gemm::{dispatch, epilogue, layouts};

#[test]
fn gpu_packed_unaligned_gemm_matches_f64_reference() {
    let Some(gpu) = cuda_backend("gpu_packed_unaligned_gemm_matches_f64_reference") else { return };
    let mut cases = 0u64;
    for (si, (m, n, k)) in
        [(257usize, 300usize, 777usize), (97, 1023, 401), (600, 129, 1025), (1000, 333, 4099)].into_iter().enumerate()
    {
        for (l, (la, lb)) in layouts().into_iter().enumerate() {
            let i = si + l;
            let mut g = Gemm::new(m, n, k).layouts(la, lb).epilogue(epilogue(i));
            if i % 2 == 1 {
                let r = g.resolved();
                g.lda = r.lda + 3;
                g.ldb = r.ldb + 1;
                g.ldc = r.ldc + 1;
            }
            let dt = [DType::Bf16, DType::F16][i % 2];
            let out_f32 = (i / 2) % 2 == 1;
            let r = g.resolved();
            if r.m * r.n * r.k >= MIN_MACS && (!r.lda.is_multiple_of(8) || !r.ldb.is_multiple_of(8)) {
                assert!(pack_applies(&r, dt, [0, 0]).is_some(), "{g:?} should be packed");
            }
            if let Err(e) = dispatch(&gpu, dt, out_f32, g, cases) {
                panic!("{dt:?} out_f32 {out_f32}: {e}");
            }
            cases += 1;
        }
    }
    println!("gpu_packed_unaligned_gemm_matches_f64_reference: {cases} cases");
}

/// Exact f32 with rows that are not whole 16 bytes is packed for the FFMA kernel's 16-byte
/// form (the plan says so), every layout, padded leading dimensions and an epilogue each,
/// against the float64 reference with the output poisoned first.
#[test]
fn gpu_packed_exact_f32_runs_the_16_byte_ffma_form() {
    let Some(gpu) = cuda_backend("gpu_packed_exact_f32_runs_the_16_byte_ffma_form") else { return };
    let mut cases = 0u64;
    for (si, (m, n, k)) in [(257usize, 300usize, 777usize), (600, 130, 1025), (1000, 333, 4099)].into_iter().enumerate()
    {
        for (l, (la, lb)) in layouts().into_iter().enumerate() {
            let i = si + l;
            let mut g = Gemm::new(m, n, k).layouts(la, lb).epilogue(epilogue(i)).precision(Precision::Strict);
            if i % 2 == 1 {
                let r = g.resolved();
                g.lda = r.lda + 1;
                g.ldb = r.ldb + 2;
                g.ldc = r.ldc + 3;
            }
            let plan = explain(&gpu.stream(), &g, DType::F32, DType::F32).unwrap().expect("a GPU plan");
            // The packed copy runs the FFMA kernel's 16-byte form (an aligned operand keeps its
            // layout), or the K split (whose partial products run it) where its blocks would
            // leave SMs idle.
            let then_ffma = plan.reason.contains("then ffma:ft_gemm_f32_") && plan.reason.contains("_v16_f32_");
            assert!(
                plan.path() == "pack" && (then_ffma || plan.reason.contains("then splitk:")),
                "{g:?}: {} ({})",
                plan.path(),
                plan.reason
            );
            if let Err(e) = dispatch(&gpu, DType::F32, true, g, 900 + cases) {
                panic!("exact f32 packed: {e}");
            }
            cases += 1;
        }
    }
    println!("gpu_packed_exact_f32_runs_the_16_byte_ffma_form: {cases} cases");
}

#[test]
fn pack_takes_large_unaligned_single_matrices() {
    let g = |m, n, k| Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).resolved();
    assert!(pack_applies(&g(4097, 1023, 777), DType::Bf16, [0, 0]).is_some(), "odd K");
    assert!(pack_applies(&g(4096, 1024, 776), DType::Bf16, [0, 0]).is_none(), "aligned rows");
    assert!(pack_applies(&g(4096, 1024, 776), DType::Bf16, [2, 0]).is_some(), "A at an odd offset");
    // f32 packs rows that are not whole 16 bytes, on TF32 (the default precision) and exact
    // (for the FFMA kernel's 16-byte form).
    assert!(pack_applies(&g(4097, 1023, 777), DType::F32, [0, 0]).is_some(), "f32 on TF32, odd K");
    assert!(pack_applies(&g(4096, 1024, 772), DType::F32, [0, 0]).is_none(), "f32 rows of whole 16 bytes");
    assert!(pack_applies(&g(4096, 1024, 772), DType::F32, [4, 0]).is_some(), "f32 A one float off");
    let strict = g(4097, 1023, 777).precision(Precision::Strict);
    assert!(pack_applies(&strict, DType::F32, [0, 0]).is_some(), "exact f32, odd K");
    let strict_aligned = g(4096, 1024, 772).precision(Precision::Strict);
    assert!(pack_applies(&strict_aligned, DType::F32, [0, 0]).is_none(), "exact f32, rows of whole 16 bytes");
    assert!(pack_applies(&g(33, 40, 77), DType::F16, [0, 0]).is_none(), "too small to pay");
    assert!(pack_applies(&g(4097, 1023, 777).batched(2).resolved(), DType::Bf16, [0, 0]).is_none(), "batches");
    assert!(pack_applies(&Gemm { tile: Some(0), ..g(4097, 1023, 777) }, DType::Bf16, [0, 0]).is_none());
}
