//! Several GPUs: device lists and missing devices, peer copies (peer path and staged
//! fallback, both ways), NCCL collectives one process driving every GPU and one rank per
//! thread (ids shared like torchrun does), ranks that disagree on sizes, a rank that never
//! comes (a timeout, not a hang), and a batched GEMM split over the devices. GPU tests print
//! "skipped: needs 2 CUDA devices" on smaller machines (FERROTUNE_REQUIRE_GPUS=2 makes that
//! a failure, for the multi-GPU machine).

use std::time::{Duration, Instant};

use ferrotune::collective::{Communicator, Reduce, group_all_reduce};
use ferrotune::device_split::{batched_matmul_split, measure_speeds};
use ferrotune::nccl::{CollectiveError, NcclId, require_nccl};
use ferrotune::{Backend, Buffer, CopyMode, CopyPath, DeviceSet, Error, WorkSplit, bf16};
use ferrotune_testkit::Rng;

/// Every GPU when there are at least two (else `None`, after saying why).
fn two_gpus(test: &str) -> Option<DeviceSet> {
    let n = ferrotune::device_count().unwrap_or(0);
    if n < 2 {
        assert!(
            std::env::var("FERROTUNE_REQUIRE_GPUS").as_deref() != Ok("2"),
            "{test}: FERROTUNE_REQUIRE_GPUS=2 but {n} devices are visible"
        );
        println!("{test}: skipped: needs 2 CUDA devices ({n} present)");
        return None;
    }
    Some(DeviceSet::all().unwrap_or_else(|e| panic!("{test}: opening every device: {e}")))
}

/// `two_gpus`, and NCCL loadable.
fn two_gpus_nccl(test: &str) -> Option<DeviceSet> {
    let set = two_gpus(test)?;
    if let Err(e) = require_nccl() {
        assert!(std::env::var_os("FERROTUNE_REQUIRE_NCCL").is_none(), "{test}: FERROTUNE_REQUIRE_NCCL is set: {e}");
        println!("{test}: skipped: {e}");
        return None;
    }
    Some(set)
}

#[test]
fn a_device_that_does_not_exist_is_a_typed_error() {
    match Backend::on_device(1000) {
        Err(Error::DeviceIndex { requested: 1000, present }) => assert!(present >= 1),
        Err(Error::NoDevice(_)) => {} // no driver here: that is the error
        other => panic!("expected DeviceIndex or NoDevice, got {other:?}"),
    }
    assert!(matches!(DeviceSet::open(&[]), Err(Error::EmptyInput { .. })));
    match DeviceSet::open(&[0, 0]) {
        Err(Error::InvalidConfig { .. } | Error::NoDevice(_)) => {}
        other => panic!("a device named twice: {:?}", other.map(|s| s.len())),
    }
    let e = ferrotune::parse_device_list("0,5", 2).unwrap_err();
    assert!(e.to_string().contains("device 5 does not exist (2 CUDA devices visible)"), "{e}");
}

#[test]
fn gpu_peer_copies_arrive_intact_on_both_paths_both_ways() {
    let Some(set) = two_gpus("gpu_peer_copies_arrive_intact_on_both_paths_both_ways") else { return };
    let t = set.topology();
    println!("links: {:?}, enabled: {:?}", t.links, t.enabled);
    let n = 1_000_003; // odd, not a multiple of any chunk or vector width
    let data: Vec<f32> = Rng::new(3).vec(n, -1.0, 1.0);
    for (from, to) in [(0, 1), (1, 0)] {
        let (sa, sb) = (set.backend(from).new_stream().unwrap(), set.backend(to).new_stream().unwrap());
        let src = Buffer::from_slice(&sa, &data).unwrap();
        sa.synchronize().unwrap();
        for mode in [CopyMode::Auto, CopyMode::Staged] {
            let mut dst = Buffer::<f32>::from_slice(&sb, &vec![f32::NAN; n]).unwrap();
            let path = set.copy((from, &src.all()), (to, &mut dst.all_mut()), &sb, mode).unwrap();
            sb.synchronize().unwrap();
            let want = if mode == CopyMode::Staged || !t.enabled[from][to] { CopyPath::Staged } else { CopyPath::Peer };
            assert_eq!(path, want);
            assert_eq!(dst.to_vec(&sb).unwrap(), data, "{from}->{to} {path:?}");
            // A sub-range at an odd offset.
            let mut part = Buffer::<f32>::zeros(&sb, 777).unwrap();
            set.copy((from, &src.view(5..782).unwrap()), (to, &mut part.all_mut()), &sb, mode).unwrap();
            sb.synchronize().unwrap();
            assert_eq!(part.to_vec(&sb).unwrap(), data[5..782]);
        }
        // The stream must be the destination's; lengths must match.
        let mut dst = Buffer::<f32>::zeros(&sb, n).unwrap();
        let e = set.copy((from, &src.all()), (to, &mut dst.all_mut()), &sa, CopyMode::Auto).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig { .. }), "{e}");
        let mut short = Buffer::<f32>::zeros(&sb, n - 1).unwrap();
        let e = set.copy((from, &src.all()), (to, &mut short.all_mut()), &sb, CopyMode::Auto).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    }
    let e = set.copy(
        (0, &Buffer::<f32>::zeros(&set.backend(0).stream(), 1).unwrap().all()),
        (7, &mut Buffer::<f32>::zeros(&set.backend(1).stream(), 1).unwrap().all_mut()),
        &set.backend(1).stream(),
        CopyMode::Auto,
    );
    assert!(matches!(e, Err(Error::DeviceIndex { requested: 7, .. })));
}

#[test]
fn gpu_nccl_group_all_reduce_sums_and_rejects_unequal_lengths() {
    let Some(set) = two_gpus_nccl("gpu_nccl_group_all_reduce_sums_and_rejects_unequal_lengths") else { return };
    let streams: Vec<_> = set.backends().iter().map(|b| b.new_stream().unwrap()).collect();
    let mut comms = Communicator::for_devices(&streams, Duration::from_secs(30)).unwrap();
    let g = set.len();
    for n in [1, 1023, 1 << 20] {
        let mut bufs: Vec<Buffer<f32>> =
            (0..g).map(|r| Buffer::from_slice(&streams[r], &vec![(r + 1) as f32; n]).unwrap()).collect();
        let mut views: Vec<_> = bufs.iter_mut().map(|b| b.all_mut()).collect();
        group_all_reduce(&mut comms, &mut views, Reduce::Sum).unwrap();
        drop(views);
        for (r, b) in bufs.iter().enumerate() {
            assert!(b.to_vec(&streams[r]).unwrap().iter().all(|v| *v == (g * (g + 1) / 2) as f32), "n={n} rank {r}");
        }
    }
    // bf16, max.
    let mut bufs: Vec<Buffer<bf16>> =
        (0..g).map(|r| Buffer::from_slice(&streams[r], &[bf16::from_f32(r as f32 - 0.5); 33]).unwrap()).collect();
    let mut views: Vec<_> = bufs.iter_mut().map(|b| b.all_mut()).collect();
    group_all_reduce(&mut comms, &mut views, Reduce::Max).unwrap();
    drop(views);
    assert!(bufs[0].to_vec(&streams[0]).unwrap().iter().all(|v| v.to_f32() == g as f32 - 1.5));
    // Unequal lengths: a typed error before NCCL sees them.
    let mut a = Buffer::<f32>::zeros(&streams[0], 8).unwrap();
    let mut b = Buffer::<f32>::zeros(&streams[1], 9).unwrap();
    let mut views = vec![a.all_mut(), b.all_mut()];
    let e = group_all_reduce(&mut comms[..2], &mut views, Reduce::Sum).unwrap_err();
    assert!(matches!(e, Error::Collective(CollectiveError::SizeMismatch { rank: 1, expected: 8, got: 9, .. })), "{e}");
}

/// Runs `f(rank, communicator)` on one thread per GPU (ranks 0 and 1), each joining with
/// the same id, as separate processes would.
fn ranks<R: Send>(timeout: Duration, f: impl Fn(usize, &mut Communicator) -> R + Sync) -> Vec<R> {
    let id = NcclId::new().unwrap();
    let hex = id.to_hex(); // what a launcher would hand each process
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|r| {
                let (f, hex) = (&f, hex.clone());
                s.spawn(move || {
                    // No kernels needed: collectives only.
                    let b = Backend::Cuda(ferrotune::Gpu::new(r).unwrap());
                    let stream = b.new_stream().unwrap();
                    let id = NcclId::from_hex(&hex).unwrap();
                    let mut c = Communicator::from_rank(&stream, r, 2, &id, timeout).unwrap();
                    f(r, &mut c)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn gpu_nccl_ranks_run_every_collective() {
    if two_gpus_nccl("gpu_nccl_ranks_run_every_collective").is_none() {
        return;
    }
    let out = ranks(Duration::from_secs(60), |r, c| {
        let s = c.stream().clone();
        let n = 1001;
        let x: Vec<f32> = (0..n).map(|i| (i + 1000 * r) as f32).collect();
        let xb = Buffer::from_slice(&s, &x).unwrap();
        let mut sum = Buffer::<f32>::zeros(&s, n).unwrap();
        c.all_reduce(&xb.all(), &mut sum.all_mut(), Reduce::Sum).unwrap();
        let mut bc = Buffer::from_slice(&s, &x).unwrap();
        c.broadcast(&mut bc.all_mut(), 1).unwrap();
        let mut gathered = Buffer::<f32>::zeros(&s, 2 * n).unwrap();
        c.all_gather(&xb.all(), &mut gathered.all_mut()).unwrap();
        let big: Vec<f32> = (0..2 * n).map(|i| (i * (r + 1)) as f32).collect();
        let bigb = Buffer::from_slice(&s, &big).unwrap();
        let mut scattered = Buffer::<f32>::zeros(&s, n).unwrap();
        c.reduce_scatter(&bigb.all(), &mut scattered.all_mut(), Reduce::Sum).unwrap();
        let mut avg = Buffer::from_slice(&s, &x).unwrap();
        c.all_reduce_in_place(&mut avg.all_mut(), Reduce::Avg).unwrap();
        let e = c.all_gather(&xb.all(), &mut Buffer::<f32>::zeros(&s, n).unwrap().all_mut()).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
        [sum, bc, gathered, scattered, avg].map(|b| b.to_vec(&s).unwrap())
    });
    let n = 1001;
    for (r, [sum, bc, gathered, scattered, avg]) in out.into_iter().enumerate() {
        for i in 0..n {
            assert_eq!(sum[i], (2 * i + 1000) as f32, "all_reduce rank {r}");
            assert_eq!(bc[i], (i + 1000) as f32, "broadcast from rank 1");
            assert_eq!((gathered[i], gathered[n + i]), (i as f32, (i + 1000) as f32), "all_gather");
            assert_eq!(scattered[i], (3 * (r * n + i)) as f32, "reduce_scatter rank {r}");
            assert_eq!(avg[i], (i + 500) as f32, "avg");
        }
    }
}

#[test]
fn gpu_nccl_ranks_that_disagree_on_size_get_a_typed_error() {
    if two_gpus_nccl("gpu_nccl_ranks_that_disagree_on_size_get_a_typed_error").is_none() {
        return;
    }
    let errs = ranks(Duration::from_secs(60), |r, c| {
        let mut b = Buffer::<f32>::zeros(&c.stream().clone(), 8 + r).unwrap();
        c.all_reduce_in_place(&mut b.all_mut(), Reduce::Sum).unwrap_err().to_string()
    });
    for e in errs {
        assert!(e.contains("ranks disagree on the element count: rank 1 has 9, rank 0 has 8"), "{e}");
    }
}

#[test]
fn gpu_nccl_a_rank_that_never_comes_is_a_timeout_not_a_hang() {
    let Some(set) = two_gpus_nccl("gpu_nccl_a_rank_that_never_comes_is_a_timeout_not_a_hang") else { return };
    let id = NcclId::new().unwrap();
    let t0 = Instant::now();
    let step = |what: &str| eprintln!("  [{:6.2} s] {what}", t0.elapsed().as_secs_f64());
    step("rank 0 alone: init must time out");
    let e =
        Communicator::from_rank(&set.backend(0).new_stream().unwrap(), 0, 2, &id, Duration::from_secs(3)).unwrap_err();
    step("timed out; rank 0's communicator was aborted");
    assert!(matches!(e, Error::Collective(CollectiveError::Timeout { op: "communicator init", .. })), "{e}");
    assert!(t0.elapsed() >= Duration::from_secs(3) && t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    // Rank 1 comes late: rank 0 has given up (its communicator is aborted), so rank 1 cannot
    // join either. It must get an error within its own deadline, not hang.
    let t1 = Instant::now();
    let late = Communicator::from_rank(
        &Backend::Cuda(ferrotune::Gpu::new(1).unwrap()).new_stream().unwrap(),
        1,
        2,
        &id,
        Duration::from_secs(3),
    );
    step(&format!("late rank's init returned: {late:?}"));
    assert!(late.is_err(), "rank 1 joined a communicator whose rank 0 was aborted: {late:?}");
    assert!(t1.elapsed() < Duration::from_secs(20), "{:?}", t1.elapsed());
}

/// Both ranks join; rank 0 calls a collective that rank 1 never calls (rank 1 stays alive,
/// idle, until rank 0 is done). NCCL sets up the ranks' connections lazily, inside the first
/// collective's host call: the non-blocking communicator keeps that call from holding the
/// caller, so rank 0 gets a timeout and an aborted communicator, not a hang.
#[test]
fn gpu_nccl_a_collective_one_rank_never_calls_times_out() {
    if two_gpus_nccl("gpu_nccl_a_collective_one_rank_never_calls_times_out").is_none() {
        return;
    }
    let t0 = Instant::now();
    let step = |what: &str| eprintln!("  [{:6.2} s] {what}", t0.elapsed().as_secs_f64());
    step("two ranks join; only rank 0 calls the collective");
    let done = std::sync::Barrier::new(2);
    let out = ranks(Duration::from_secs(30), |r, c| {
        if r == 1 {
            done.wait();
            return String::new();
        }
        let mut b = Buffer::<f32>::zeros(&c.stream().clone(), 1 << 16).unwrap();
        c.check_sizes = false;
        c.timeout = Duration::from_secs(3);
        let t0 = Instant::now();
        let e = c.all_reduce_in_place(&mut b.all_mut(), Reduce::Sum);
        let took = t0.elapsed();
        let again = c.all_reduce_in_place(&mut b.all_mut(), Reduce::Sum);
        done.wait(); // before any assertion, so a failure cannot leave rank 1 waiting
        let (e, again) = (e.unwrap_err(), again.unwrap_err());
        eprintln!("  rank 0: the collective returned after {:.2} s: {e}; then: {again}", took.as_secs_f64());
        assert!(took >= Duration::from_secs(3) && took < Duration::from_secs(20), "{took:?}");
        format!("{e} / {again}")
    });
    step("both ranks returned");
    assert!(
        out[0].contains("all_reduce did not complete within 3000 ms")
            && out[0].contains("aborted after an earlier failure"),
        "{}",
        out[0]
    );
}

#[test]
fn gpu_batched_gemm_split_over_devices_matches_one_device() {
    let Some(set) = two_gpus("gpu_batched_gemm_split_over_devices_matches_one_device") else { return };
    let (batch, m, n, k) = (9, 67, 45, 131);
    let mut rng = Rng::new(11);
    let a: Vec<bf16> = rng.vec(batch * m * k, -1.0, 1.0);
    let b: Vec<bf16> = rng.vec(batch * k * n, -1.0, 1.0);
    let mut one = vec![f32::NAN; batch * m * n];
    batched_matmul_split(
        &set.backends()[..1],
        &WorkSplit::new(batch, &[1.0], 1).unwrap(),
        &a,
        &b,
        &mut one,
        (batch, m, n, k),
    )
    .unwrap();
    let speeds = measure_speeds::<bf16>(set.backends(), (1, m, n, k), 3).unwrap();
    for s in [speeds.clone(), vec![3.0, 1.0], vec![0.0, 1.0]] {
        let plan = WorkSplit::new(batch, &s[..2], 1).unwrap();
        let mut got = vec![f32::NAN; batch * m * n];
        batched_matmul_split(&set.backends()[..2], &plan, &a, &b, &mut got, (batch, m, n, k)).unwrap();
        assert_eq!(got, one, "the same kernels on the same data: bit-identical ({plan})");
    }
    // Against f64 at a few entries.
    for (bi, i, j) in [(0, 0, 0), (8, 66, 44), (4, 33, 7)] {
        let want: f64 = (0..k).map(|p| a[bi * m * k + i * k + p].to_f64() * b[bi * k * n + p * n + j].to_f64()).sum();
        assert!((one[bi * m * n + i * n + j] as f64 - want).abs() < 1e-3 * (1.0 + want.abs()));
    }
}
