//! The host runtime: the caching pool (steady state, limits, foreign streams, empty_cache),
//! CUDA graphs (bit-identical replay, update, capture errors), the overlap pipeline and the
//! profiler's pool-fed memory track. GPU tests print "skipped" without a device.

use ferrotune::ops;
use ferrotune::overlap::Pipeline;
use ferrotune::profiler::Profiler;
use ferrotune::{Backend, Buffer, Error, PinnedBuffer, StagingPool, Stream, Updated};
use ferrotune_testkit::{Rng, cpu_backend, cuda_backend};

fn pool(b: &Backend) -> &std::sync::Arc<ferrotune::DevicePool> {
    match b {
        Backend::Cuda(g) => g.pool(),
        Backend::Cpu(_) => unreachable!("CUDA backends only"),
    }
}

/// A chain of small elementwise ops (6 launches) from `x` into `out`, using `t` as scratch.
fn chain6(s: &Stream, x: &Buffer<f32>, t: &mut Buffer<f32>, out: &mut Buffer<f32>) -> ferrotune::Result<()> {
    ops::scale(s, 1.5, &x.all(), &mut t.all_mut())?;
    ops::relu(s, &t.all(), &mut out.all_mut())?;
    ops::add(s, &out.all(), &x.all(), &mut t.all_mut())?;
    ops::gelu(s, ops::GeluForm::Erf, &t.all(), &mut out.all_mut())?;
    ops::axpy(s, 0.25, &x.all(), &mut out.all_mut())?;
    ops::scale(s, 0.5, &out.all(), &mut t.all_mut())?;
    ops::copy(s, &t.all(), &mut out.all_mut())
}

#[test]
fn steady_state_loop_makes_no_driver_allocations() {
    let Some(b) = cuda_backend("steady_state_loop_makes_no_driver_allocations") else { return };
    let s = b.new_stream().unwrap();
    let x = Buffer::from_slice(&s, &Rng::new(1).vec::<f32>(100_003, -2.0, 2.0)).unwrap();
    let mut after_warmup = None;
    for it in 0..20 {
        // Allocate per iteration: buffers, op scratch (the sum's partials), a big block.
        let mut t = Buffer::<f32>::zeros(&s, 100_003).unwrap();
        let mut out = Buffer::<f32>::zeros(&s, 100_003).unwrap();
        let big = Buffer::<f32>::zeros(&s, 5 << 20).unwrap();
        chain6(&s, &x, &mut t, &mut out).unwrap();
        let total = ops::reduce::sum(&s, &out.all()).unwrap();
        assert!(total.is_finite());
        drop((t, out, big));
        if it == 1 {
            after_warmup = Some(pool(&b).stats());
        }
    }
    let (w, end) = (after_warmup.unwrap(), pool(&b).stats());
    assert_eq!(end.driver_allocs, w.driver_allocs, "driver allocations after warm-up: {end}");
    assert!(end.cache_hits >= w.cache_hits + 18 * 4, "{end}");
    assert_eq!(end.allocated_bytes, x.len().next_multiple_of(128) * 4, "only x is live: {end}");
}

#[test]
fn empty_cache_returns_reserved_bytes_to_the_start() {
    let Some(b) = cuda_backend("empty_cache_returns_reserved_bytes_to_the_start") else { return };
    let s = b.new_stream().unwrap();
    let start = pool(&b).stats().reserved_bytes;
    {
        let _a = Buffer::<f32>::zeros(&s, 1000).unwrap();
        let _c = Buffer::<f32>::zeros(&s, 30 << 20).unwrap();
        assert!(pool(&b).stats().reserved_bytes > start);
    }
    assert!(pool(&b).stats().reserved_bytes > start, "cached after drop");
    pool(&b).empty_cache().unwrap();
    let st = pool(&b).stats();
    assert_eq!((st.reserved_bytes, st.allocated_bytes), (start, 0), "{st}");
}

#[test]
fn pool_limit_is_a_typed_out_of_memory_error() {
    let Some(b) = cuda_backend("pool_limit_is_a_typed_out_of_memory_error") else { return };
    let s = b.new_stream().unwrap();
    let p = pool(&b);
    p.set_limit(Some(8 << 20));
    let e = Buffer::<f32>::zeros(&s, 4 << 20).unwrap_err();
    match &e {
        Error::PoolExhausted { requested, allocated, reserved, limit, .. } => {
            assert_eq!((*requested, *allocated, *reserved, *limit), (16 << 20, 0, 0, Some(8 << 20)), "{e}");
        }
        other => panic!("expected PoolExhausted, got {other}"),
    }
    assert!(e.to_string().contains("limit"), "{e}");
    let small = Buffer::<f32>::from_slice(&s, &[1.0, 2.0, 3.0]).unwrap();
    assert_eq!(small.to_vec(&s).unwrap(), [1.0, 2.0, 3.0]);
    drop(small);
    p.set_limit(None);
    p.empty_cache().unwrap();
    assert_eq!(p.stats().reserved_bytes, 0);
    assert_eq!(p.stats().ooms, 1);
}

#[test]
fn freeing_on_a_foreign_stream_is_a_typed_error_without_leak() {
    let Some(b) = cuda_backend("freeing_on_a_foreign_stream_is_a_typed_error_without_leak") else { return };
    let (s1, s2) = (b.new_stream().unwrap(), b.new_stream().unwrap());
    let a = Buffer::<f32>::zeros(&s1, 4096).unwrap();
    let e = a.release_on(&s2).unwrap_err();
    assert!(matches!(e, Error::ForeignStream { .. }), "{e}");
    assert_eq!(pool(&b).stats().allocated_bytes, 0, "returned on its own stream anyway");
    // Recorded on s2: s2 may release it; the block waits for s2's work before reuse.
    let a = Buffer::<f32>::zeros(&s1, 4096).unwrap();
    a.record_stream(&s2).unwrap();
    a.release_on(&s2).unwrap();
    s2.synchronize().unwrap();
    let again = Buffer::<f32>::zeros(&s1, 4096).unwrap();
    assert_eq!(pool(&b).stats().pending_blocks, 0);
    drop(again);
    pool(&b).empty_cache().unwrap();
    assert_eq!(pool(&b).stats().reserved_bytes, 0);
}

#[test]
fn a_free_segment_moves_to_another_stream_without_the_driver() {
    let Some(b) = cuda_backend("a_free_segment_moves_to_another_stream_without_the_driver") else { return };
    let (s1, s2) = (b.new_stream().unwrap(), b.new_stream().unwrap());
    let data = Rng::new(3).vec::<f32>(50_000, -1.0, 1.0);
    drop(Buffer::from_slice(&s1, &data).unwrap());
    let before = pool(&b).stats();
    let mut y = Buffer::<f32>::zeros(&s2, 50_000).unwrap();
    let x = Buffer::from_slice(&s2, &data).unwrap();
    ops::copy(&s2, &x.all(), &mut y.all_mut()).unwrap();
    assert_eq!(y.to_vec(&s2).unwrap(), data);
    let after = pool(&b).stats();
    assert_eq!(after.driver_allocs, before.driver_allocs, "{after}");
    assert_eq!(after.reowned, before.reowned + 1, "{after}");
}

#[test]
fn graph_replay_is_bit_identical_to_eager() {
    let Some(b) = cuda_backend("graph_replay_is_bit_identical_to_eager") else { return };
    let s = b.new_stream().unwrap();
    let n = 10_007;
    let x = Buffer::from_slice(&s, &Rng::new(7).vec::<f32>(n, -3.0, 3.0)).unwrap();
    let (mut t, mut eager) = (Buffer::<f32>::zeros(&s, n).unwrap(), Buffer::<f32>::zeros(&s, n).unwrap());
    chain6(&s, &x, &mut t, &mut eager).unwrap();
    let want = eager.to_vec(&s).unwrap();
    let mut out = Buffer::from_slice(&s, &vec![f32::NAN; n]).unwrap();
    let g = s.capture(|c| chain6(c, &x, &mut t, &mut out)).unwrap();
    assert_eq!(g.kernels(), 7);
    assert!(out.to_vec(&s).unwrap().iter().all(|v| v.is_nan()), "capture runs nothing");
    for _ in 0..10 {
        g.replay(&s).unwrap();
    }
    let got = out.to_vec(&s).unwrap();
    assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "replay differs from eager");
    // Another stream of the same device replays it too.
    let s2 = b.new_stream().unwrap();
    g.replay(&s2).unwrap();
    s2.synchronize().unwrap();
}

#[test]
fn graph_update_moves_to_new_buffers() {
    let Some(b) = cuda_backend("graph_update_moves_to_new_buffers") else { return };
    let s = b.new_stream().unwrap();
    let n = 4099;
    let x1 = Buffer::from_slice(&s, &Rng::new(1).vec::<f32>(n, -1.0, 1.0)).unwrap();
    let x2 = Buffer::from_slice(&s, &Rng::new(2).vec::<f32>(n, -1.0, 1.0)).unwrap();
    let (mut t, mut o1, mut o2) = (
        Buffer::<f32>::zeros(&s, n).unwrap(),
        Buffer::<f32>::zeros(&s, n).unwrap(),
        Buffer::<f32>::zeros(&s, n).unwrap(),
    );
    let mut g = s.capture(|c| chain6(c, &x1, &mut t, &mut o1)).unwrap();
    let how = g.update(|c| chain6(c, &x2, &mut t, &mut o2)).unwrap();
    assert_eq!(how, Updated::InPlace);
    g.replay(&s).unwrap();
    let mut want = Buffer::<f32>::zeros(&s, n).unwrap();
    chain6(&s, &x2, &mut t, &mut want).unwrap();
    assert_eq!(o2.to_vec(&s).unwrap(), want.to_vec(&s).unwrap());
    assert!(o1.to_vec(&s).unwrap().iter().all(|&v| v == 0.0), "the old output is not written");
    // A different op sequence cannot be updated in place: re-instantiated.
    let how = g.update(|c| ops::copy(c, &x1.all(), &mut o1.all_mut())).unwrap();
    assert_eq!(how, Updated::Reinstantiated);
    g.replay(&s).unwrap();
    assert_eq!(o1.to_vec(&s).unwrap(), x1.to_vec(&s).unwrap());
}

#[test]
fn unsupported_calls_in_a_capture_are_typed_errors() {
    let Some(b) = cuda_backend("unsupported_calls_in_a_capture_are_typed_errors") else { return };
    let s = b.new_stream().unwrap();
    let x = Buffer::from_slice(&s, &[1.0f32; 64]).unwrap();
    let e = s.capture(|c| c.synchronize()).unwrap_err();
    assert!(matches!(e, Error::Capture { .. }), "{e}");
    let e = s.capture(|c| x.to_vec(c).map(|_| ())).unwrap_err();
    assert!(matches!(e, Error::Capture { .. }), "{e}");
    let e = b.stream().capture(|_| Ok(())).unwrap_err();
    assert!(matches!(e, Error::Capture { .. }) && e.to_string().contains("default"), "{e}");
    // The stream still works and nothing leaked.
    let mut y = Buffer::<f32>::zeros(&s, 64).unwrap();
    ops::scale(&s, 2.0, &x.all(), &mut y.all_mut()).unwrap();
    assert_eq!(y.to_vec(&s).unwrap(), [2.0; 64]);
    drop((x, y));
    pool(&b).empty_cache().unwrap();
    assert_eq!(pool(&b).stats().reserved_bytes, 0);
}

#[test]
fn allocations_inside_a_capture_live_with_the_graph() {
    let Some(b) = cuda_backend("allocations_inside_a_capture_live_with_the_graph") else { return };
    let s = b.new_stream().unwrap();
    let x = Buffer::from_slice(&s, &[1.0f32, -2.0, 3.0]).unwrap();
    let mut out = Buffer::<f32>::zeros(&s, 3).unwrap();
    let g = s
        .capture(|c| {
            let mut tmp = Buffer::<f32>::zeros(c, 3)?;
            ops::scale(c, 2.0, &x.all(), &mut tmp.all_mut())?;
            ops::relu(c, &tmp.all(), &mut out.all_mut())
        })
        .unwrap();
    // Eager work between replays must not get the graph's scratch block.
    for _ in 0..3 {
        let mut other = Buffer::<f32>::zeros(&s, 3).unwrap();
        ops::scale(&s, -7.0, &x.all(), &mut other.all_mut()).unwrap();
        g.replay(&s).unwrap();
        assert_eq!(out.to_vec(&s).unwrap(), [2.0, 0.0, 6.0]);
    }
    drop(g);
    drop((x, out));
    pool(&b).empty_cache().unwrap();
    assert_eq!(pool(&b).stats().reserved_bytes, 0, "the graph's private pool is released with it");
}

#[test]
fn graphs_need_a_cuda_stream_of_their_device() {
    let cpu = cpu_backend();
    let e = cpu.stream().capture(|_| Ok(())).unwrap_err();
    assert!(matches!(e, Error::BackendMismatch { .. }), "{e}");
    let Some(b) = cuda_backend("graphs_need_a_cuda_stream_of_their_device") else { return };
    let s = b.new_stream().unwrap();
    let g = s.capture(|c| Buffer::<f32>::zeros(c, 8).map(drop)).unwrap();
    let e = g.replay(&cpu.stream()).unwrap_err();
    assert!(matches!(e, Error::BackendMismatch { .. }), "{e}");
    match ferrotune::Gpu::new(1) {
        Ok(other) => {
            let b1 = Backend::Cuda(other);
            let e = g.replay(&b1.new_stream().unwrap()).unwrap_err();
            assert!(matches!(e, Error::WrongDevice { expected: 0, got: 1, .. }), "{e}");
        }
        Err(e) => println!("graphs_need_a_cuda_stream_of_their_device: replay on device 1 skipped: {e}"),
    }
}

#[test]
fn overlap_pipeline_matches_the_serial_result() {
    let Some(b) = cuda_backend("overlap_pipeline_matches_the_serial_result") else { return };
    let streams = vec![b.new_stream().unwrap(), b.new_stream().unwrap(), b.new_stream().unwrap()];
    let s0 = streams[0].clone();
    let n = 100_003;
    let staging = StagingPool::<f32>::new();
    let mut input = staging.take(&s0, n).unwrap();
    let data = Rng::new(9).vec::<f32>(n, -1.0, 1.0);
    input.as_mut_slice().unwrap().copy_from_slice(&data);
    let mut output: PinnedBuffer<f32> = staging.take(&s0, n).unwrap();
    let mut p = Pipeline::<f32>::new(streams, 7_001).unwrap();
    for _ in 0..2 {
        p.run(&input, &mut output, |s, x, y| ops::scale(s, 3.0, x, y)).unwrap();
        let got = output.as_slice().unwrap();
        assert!(got.iter().zip(&data).all(|(g, d)| *g == 3.0 * d));
    }
    staging.put(output);
    let again = staging.take(&s0, n).unwrap();
    assert_eq!((staging.stats().pinned_allocs, staging.stats().hits), (2, 1));
    drop(again);
    assert!(Pipeline::<f32>::new(vec![cpu_backend().stream()], 8).is_err());
}

#[test]
fn profiler_scopes_carry_the_pool_peak() {
    let Some(b) = cuda_backend("profiler_scopes_carry_the_pool_peak") else { return };
    let s = b.new_stream().unwrap();
    let mut prof = Profiler::new(&s).unwrap();
    prof.scope("alloc 4 MiB", &s, || Buffer::<f32>::zeros(&s, 1 << 20).map(drop)).unwrap();
    let mem = prof.scope_memory();
    assert_eq!(mem.len(), 1);
    assert!(mem[0].1 >= 4 << 20 && mem[0].2 < 4 << 20, "{mem:?}");
    let trace = prof.chrome_trace().unwrap();
    assert!(trace.contains("pool_peak_bytes") && trace.contains("pool allocated bytes"), "{trace}");
}

#[test]
fn a_buffer_made_in_a_capture_may_outlive_its_graph() {
    let Some(b) = cuda_backend("a_buffer_made_in_a_capture_may_outlive_its_graph") else { return };
    let s = b.new_stream().unwrap();
    let mut kept = None;
    let g = s.capture(|c| {
        kept = Some(Buffer::<f32>::zeros(c, 256)?);
        Ok(())
    });
    let g = g.unwrap();
    g.replay(&s).unwrap();
    drop(g);
    let kept = kept.unwrap();
    assert_eq!(kept.to_vec(&s).unwrap(), [0.0; 256]);
    drop(kept);
    assert_eq!(pool(&b).stats().allocated_bytes, 0, "freed to the stream that inherited the graph's pool");
    pool(&b).empty_cache().unwrap();
    assert_eq!(pool(&b).stats().reserved_bytes, 0);
}
