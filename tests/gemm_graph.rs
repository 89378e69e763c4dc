//! GEMM calls captured in a CUDA graph (`Stream::capture`) replay bit-identically to the eager
//! call on every family the plan picks (small-M, small-M split over K, the pack path for rows
//! that are not 16-byte aligned, the tiles, and on Hopper the split-K joined in the kernel),
//! read their operands at replay time (new contents, same buffers: the new product), and a
//! call whose workspace is not yet allocated on the capture stream fails the capture with a
//! typed error instead of baking a graph-private block into the cache. GPU only ("skipped"
//! without a device).

use ferrotune::ops::gemm::{Gemm, Layout, gemm};
use ferrotune::{Buffer, Error, Stream, bf16};
use ferrotune_testkit::{Rng, cuda_backend};

/// `x wᵀ` on `(a, b)` into `d`.
fn call(s: &Stream, g: &Gemm, a: &Buffer<bf16>, b: &Buffer<bf16>, d: &mut Buffer<bf16>) -> ferrotune::Result<()> {
    gemm::<bf16, bf16>(s, g, &a.all(), &b.all(), None, None, &mut d.all_mut())
}

fn bits(v: &[bf16]) -> Vec<u16> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn gpu_gemm_graph_replays_match_eager_on_every_family() {
    let Some(be) = cuda_backend("gpu_gemm_graph_replays_match_eager_on_every_family") else { return };
    let s = be.new_stream().unwrap();
    // Small-M, small-M with K split, odd K (pack or in-place unaligned rows), a tile shape,
    // a long K with few tiles (the Hopper split-K on sm_90a), an odd everything.
    let shapes =
        [(1, 4097, 777), (8, 512, 30_000), (33, 1023, 777), (512, 384, 768), (256, 256, 16_384), (67, 129, 4099)];
    for (i, &(m, n, k)) in shapes.iter().enumerate() {
        let g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col);
        let mut rng = Rng::new(40 + i as u64);
        let a = Buffer::from_slice(&s, &rng.vec::<bf16>(m * k, -1.0, 1.0)).unwrap();
        let b = Buffer::from_slice(&s, &rng.vec::<bf16>(n * k, -1.0, 1.0)).unwrap();
        let mut d = Buffer::from_slice(&s, &vec![bf16::from_f32(f32::NAN); m * n]).unwrap();
        // Eager first: it also allocates the call's workspaces on this stream.
        call(&s, &g, &a, &b, &mut d).unwrap();
        let want = bits(&d.to_vec(&s).unwrap());
        assert!(want.iter().all(|&x| !bf16::from_bits(x).is_nan()), "{m}x{n}x{k}: eager left NaN");
        d.copy_from(&s, &vec![bf16::from_f32(f32::NAN); m * n]).unwrap();
        let graph = s.capture(|c| call(c, &g, &a, &b, &mut d)).unwrap();
        assert!(graph.kernels() >= 1, "{m}x{n}x{k}: the graph holds no kernel");
        assert!(d.to_vec(&s).unwrap().iter().all(|v| v.is_nan()), "{m}x{n}x{k}: the capture ran work");
        for _ in 0..3 {
            graph.replay(&s).unwrap();
        }
        assert_eq!(bits(&d.to_vec(&s).unwrap()), want, "{m}x{n}x{k}: replay differs from eager");
    }
}

#[test]
fn gpu_gemm_graph_reads_operands_at_replay() {
    let Some(be) = cuda_backend("gpu_gemm_graph_reads_operands_at_replay") else { return };
    let s = be.new_stream().unwrap();
    let (m, n, k) = (64, 640, 2050);
    let g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col);
    let mut rng = Rng::new(9);
    let (ha1, ha2) = (rng.vec::<bf16>(m * k, -1.0, 1.0), rng.vec::<bf16>(m * k, -1.0, 1.0));
    let hb = rng.vec::<bf16>(n * k, -1.0, 1.0);
    let mut a = Buffer::from_slice(&s, &ha2).unwrap();
    let b = Buffer::from_slice(&s, &hb).unwrap();
    let mut d = Buffer::<bf16>::zeros(&s, m * n).unwrap();
    call(&s, &g, &a, &b, &mut d).unwrap();
    let want2 = bits(&d.to_vec(&s).unwrap());
    a.copy_from(&s, &ha1).unwrap();
    let graph = s.capture(|c| call(c, &g, &a, &b, &mut d)).unwrap();
    graph.replay(&s).unwrap();
    let got1 = bits(&d.to_vec(&s).unwrap());
    assert_ne!(got1, want2, "different inputs, same product");
    a.copy_from(&s, &ha2).unwrap();
    graph.replay(&s).unwrap();
    assert_eq!(bits(&d.to_vec(&s).unwrap()), want2, "the replay did not read the new A");
}

#[test]
fn gpu_gemm_capture_without_warm_workspace_is_a_typed_error() {
    let Some(be) = cuda_backend("gpu_gemm_capture_without_warm_workspace_is_a_typed_error") else { return };
    // A fresh stream has no workspace; shapes whose plan needs one (the small-M K split, the
    // pack of unaligned rows, the Hopper split) must refuse the capture, not allocate in it.
    let shapes = [(8, 512, 30_000), (33, 1023, 777), (256, 256, 16_384)];
    let mut refused = 0;
    for (m, n, k) in shapes {
        let s = be.new_stream().unwrap();
        let g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col);
        let mut rng = Rng::new(3);
        let a = Buffer::from_slice(&s, &rng.vec::<bf16>(m * k, -1.0, 1.0)).unwrap();
        let b = Buffer::from_slice(&s, &rng.vec::<bf16>(n * k, -1.0, 1.0)).unwrap();
        let mut d = Buffer::<bf16>::zeros(&s, m * n).unwrap();
        match s.capture(|c| call(c, &g, &a, &b, &mut d)) {
            Err(Error::Capture { why, .. }) => {
                assert!(why.contains("workspace"), "{m}x{n}x{k}: {why}");
                refused += 1;
            }
            Err(e) => panic!("{m}x{n}x{k}: expected a capture error about the workspace, got {e}"),
            // A plan without a workspace on this GPU: nothing to refuse; it must still work.
            Ok(graph) => {
                graph.replay(&s).unwrap();
                s.synchronize().unwrap();
            }
        }
        // The stream is usable after a refused capture.
        call(&s, &g, &a, &b, &mut d).unwrap();
        s.synchronize().unwrap();
    }
    println!("gpu_gemm_capture_without_warm_workspace_is_a_typed_error: {refused} of 3 captures refused");
}
