//! GPU checks of what the bench builds on: the cuBLAS GEMM its compute ceilings time must
//! compute the product, and the profiler's CUDA-event scopes must measure the work inside.
//! (The bench library's own tests, which need no GPU, are in benches/tests/.)

use ferrotune::ops;
use ferrotune::peer::{CublasGemm, GemmMath, GemmShape, cublas_present};
use ferrotune::profiler::Profiler;
use ferrotune_testkit::cuda_backend;

#[test]
fn gpu_cublas_peer_matches_the_reference() {
    let Some(gpu) = cuda_backend("gpu_cublas_peer_matches_the_reference") else { return };
    if !cublas_present() {
        assert!(
            std::env::var_os("FERROTUNE_REQUIRE_GPU").is_none(),
            "FERROTUNE_REQUIRE_GPU is set but libcublas is missing"
        );
        println!("gpu_cublas_peer_matches_the_reference: skipped: libcublas not found");
        return;
    }
    let s = gpu.stream();
    // Edges that are not multiples of a tile, and m != n != k, so a transposed layout fails.
    let shape = GemmShape { m: 200, n: 136, k: 72 };
    for math in GemmMath::ALL {
        let mut g = CublasGemm::new(&s, math, shape).unwrap();
        let err = g.verify(64).unwrap_or_else(|e| panic!("{}: {e}", math.name()));
        assert!(err <= math.tolerance(), "{}: {err}", math.name());
        g.launch().unwrap();
    }
    s.synchronize().unwrap();
}

#[test]
fn gpu_profiler_scopes_time_device_work() {
    let Some(gpu) = cuda_backend("gpu_profiler_scopes_time_device_work") else { return };
    let s = gpu.stream();
    let mut p = Profiler::new(&s).unwrap();
    let n = 1 << 24;
    let src = p.upload(&s, &vec![1.0f32; n]).unwrap();
    let mut dst = p.zeros::<f32>(&s, n).unwrap();
    p.scope("ten copies of 64 MiB", &s, || {
        for _ in 0..10 {
            ops::copy(&s, &src.all(), &mut dst.all_mut())?;
        }
        Ok(())
    })
    .unwrap();
    let spans = p.spans().unwrap();
    assert_eq!(spans.len(), 1);
    // 1.3 GB moved: well over 100 µs on any device ferrotune supports, under a second.
    assert!(spans[0].dur_us > 100.0 && spans[0].dur_us < 1e6, "{:?}", spans[0]);
    assert!(spans[0].start_us >= 0.0);
    assert_eq!(p.memory().peak_bytes(), 2 * n * 4);
    assert!(p.chrome_trace().unwrap().contains("\"name\":\"ten copies of 64 MiB\""));
    p.free(&s, src).unwrap();
    p.free(&s, dst).unwrap();
    assert_eq!(p.memory().current_bytes(), 0);
}
