//! The cluster SGP backward (a row shared by the blocks of a thread-block cluster, sm_90a):
//! its gradients against the CPU backward (itself checked against finite differences in
//! `clifford.rs`) on edge and long rows, every dtype, with and without the norm, clusters of 2
//! to 16 blocks (past 8 the non-portable sizes) with idle threads in the last one, two to
//! eight blocks an SM; the same bits on a
//! second call; and its config rules on the CPU.

use ferrotune::ops::clifford::{Clifford, CliffordConfig, CliffordVariant};
use ferrotune::{Backend, DType, Scalar, bf16, f16};
use ferrotune_testkit::{Rng, cpu_backend, cuda_backend};

use super::clifford::{check_grad, f64s, make_case, run_backward};

/// (B, N, normalize): one row and one feature, odd N, N around a block, long rows, many rows.
const SHAPES: [(usize, usize, bool); 8] = [
    (1, 1, true),
    (3, 7, false),
    (5, 129, true),
    (9, 257, true),
    (300, 777, true),
    (33, 1024, true),
    (700, 513, false),
    (2, 3000, true),
];

/// The cluster config of `threads` blocks keeping `vpt` features a thread, with the fewest
/// blocks (2 to 16) that cover N.
fn cluster(p: &Clifford, threads: u32, vpt: u32, blocks_per_sm: u32) -> CliffordConfig {
    let k = p.n.max(1).div_ceil((threads * vpt) as usize).max(2) as u32;
    CliffordConfig {
        threads,
        rows_per_block: 1,
        variant: CliffordVariant { vec: false, vpt, stream_w: false },
        blocks_per_sm,
        cpu_rows: 1,
        cluster: k,
    }
}

fn gpu_cluster_typed<T: Scalar>(gpu: &Backend) -> usize {
    let mut runs = 0;
    for dim in [2, 3] {
        for (i, &(b, n, normalize)) in SHAPES.iter().enumerate() {
            if n > 1024 && T::DTYPE != DType::F32 {
                continue; // the long rows once, in f32
            }
            let p = Clifford::new(dim, b, n, normalize);
            let case = make_case::<T>(p, false, 700 + i as u64);
            let go: Vec<T> = Rng::new(70 + i as u64).vec(case.x.len(), -1.0, 1.0);
            let (cx, cy, cw) = run_backward(&cpu_backend(), &case, &go, None).unwrap();
            let mut cfgs = Vec::new();
            for (threads, vpt, bps) in [(128, 2, 0), (32, 1, 2), (256, 1, 0), (64, 2, 2), (32, 2, 8)] {
                let c = cluster(&p, threads, vpt, bps);
                if c.validate_backward(&p, None).is_ok() && !cfgs.contains(&c) {
                    cfgs.push(c);
                }
            }
            for cfg in cfgs {
                let (gx, gy, gw) =
                    run_backward(gpu, &case, &go, Some(&cfg)).unwrap_or_else(|e| panic!("{p:?} {cfg:?}: {e}"));
                let rel = if T::DTYPE == DType::F32 { 1e-4 } else { 2e-2 };
                let r = check_grad("dx", &f64s(&gx), &f64s(&cx), rel)
                    .and_then(|_| check_grad("dy", &f64s(&gy), &f64s(&cy), rel))
                    .and_then(|_| check_grad("dw", &f64s(&gw), &f64s(&cw), rel));
                assert!(r.is_ok(), "{} {p:?} {cfg:?}: {}", T::DTYPE.name(), r.unwrap_err());
                runs += 1;
            }
        }
    }
    runs
}

/// Skips (with the reason) where the GPU has no thread-block clusters.
fn cluster_gpu(test: &str) -> Option<Backend> {
    let gpu = cuda_backend(test)?;
    let cc = gpu.device().map_or((0, 0), |d| d.compute_capability);
    if cc.0 < 9 {
        println!("{test}: skipped: the cluster backward needs compute capability 9.0, this GPU is {}.{}", cc.0, cc.1);
        return None;
    }
    Some(gpu)
}

#[test]
fn gpu_clifford_cluster_backward_matches_cpu() {
    let Some(gpu) = cluster_gpu("gpu_clifford_cluster_backward_matches_cpu") else { return };
    let runs = gpu_cluster_typed::<f32>(&gpu) + gpu_cluster_typed::<bf16>(&gpu) + gpu_cluster_typed::<f16>(&gpu);
    assert!(runs >= 60, "only {runs} cluster configs ran");
    println!("gpu_clifford_cluster_backward_matches_cpu: {runs} runs");
}

/// Two calls give the same bits (the clusters sum a row's statistics in rank order and their
/// partials are summed in cluster order), with and without the norm.
#[test]
fn gpu_clifford_cluster_backward_is_deterministic() {
    let Some(gpu) = cluster_gpu("gpu_clifford_cluster_backward_is_deterministic") else { return };
    for dim in [2, 3] {
        for normalize in [true, false] {
            let p = Clifford::new(dim, 1000, 1333, normalize);
            let case = make_case::<f32>(p, false, 5);
            let go: Vec<f32> = Rng::new(6).vec(case.x.len(), -1.0, 1.0);
            let cfg = cluster(&p, 256, 2, 1);
            let a = run_backward(&gpu, &case, &go, Some(&cfg)).unwrap();
            let b = run_backward(&gpu, &case, &go, Some(&cfg)).unwrap();
            assert!(a == b, "{p:?}: two runs differ");
        }
    }
}

#[test]
fn cluster_configs_are_checked() {
    let p = Clifford::new(3, 64, 777, true);
    let ok = cluster(&p, 256, 2, 0);
    assert_eq!(ok.cluster, 2);
    assert!(ok.validate_backward(&p, None).is_ok());
    let err = |c: CliffordConfig, p: &Clifford| c.validate_backward(p, None).unwrap_err().to_string();
    // The blocks must cover the row.
    let e = err(CliffordConfig { threads: 128, ..ok }, &p);
    assert!(e.contains("cover 512 features, N is 777"), "{e}");
    // One row per block, one-feature accesses kept in registers, 1 or 2 a thread.
    assert!(err(CliffordConfig { rows_per_block: 2, ..ok }, &p).contains("rows per block must be 1"));
    for variant in [
        CliffordVariant { vec: true, vpt: 1, stream_w: false },
        CliffordVariant { vec: false, vpt: 4, stream_w: false },
        CliffordVariant { vec: false, vpt: 2, stream_w: true },
    ] {
        let p = Clifford::new(3, 64, 1024, true);
        let e = err(CliffordConfig { variant, cluster: 4, ..ok }, &p);
        assert!(e.contains("is not compiled"), "{variant:?}: {e}");
    }
    // At most 16 blocks (the H100's non-portable cluster size).
    let long = Clifford::new(2, 4, 100_000, true);
    let e = err(cluster(&long, 1024, 2, 0), &long);
    assert!(e.contains("must be in 1..=16"), "{e}");
    let wide = Clifford::new(3, 4, 1025, true);
    assert!(cluster(&wide, 64, 2, 0).validate_backward(&wide, None).is_ok(), "9 blocks of 64 x 2");
    let e = err(cluster(&wide, 32, 2, 0), &wide);
    assert!(e.contains("cluster 17 must be in 1..=16"), "{e}");
    // The forward has no cluster form.
    let fwd = CliffordConfig { cluster: 2, ..CliffordConfig::heuristic(&p, DType::F32, None) };
    let e = fwd.validate(&p, None).unwrap_err().to_string();
    assert!(e.contains("backward's cluster form only"), "{e}");
}

/// On the CPU a cluster config runs the CPU backward (the cluster is a GPU launch shape): the
/// same gradients as the built-in config.
#[test]
fn cpu_backward_takes_a_cluster_config() {
    let p = Clifford::new(3, 5, 600, true);
    let case = make_case::<f32>(p, false, 3);
    let go: Vec<f32> = Rng::new(4).vec(case.x.len(), -1.0, 1.0);
    let a = run_backward(&cpu_backend(), &case, &go, None).unwrap();
    let b = run_backward(&cpu_backend(), &case, &go, Some(&cluster(&p, 256, 2, 0))).unwrap();
    assert!(a == b, "the CPU backward changed with a cluster config");
}
