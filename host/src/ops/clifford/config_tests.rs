//! Unit tests of `config.rs`: the heuristics (forward, backward, the cluster form on a
//! device with clusters), validation, `fit` and the tuner space.

use super::*;

#[test]
fn heuristic_is_valid_for_many_shapes() {
    for dim in [2, 3] {
        for n in [1, 3, 4, 31, 32, 100, 128, 512, 777, 1000, 1024, 1536, 4096, 100_000] {
            for dt in DType::ALL {
                let p = Clifford::new(dim, 7, n, true);
                let c = CliffordConfig::heuristic(&p, dt, None);
                c.validate(&p, None).unwrap_or_else(|e| panic!("{p:?}: {c:?}: {e}"));
                // Within the register limit of the compiled kernel (ptxas, sm_90).
                assert!(c.threads <= block_limit(dim, c.variant, false), "{p:?}: {c:?}");
                let c = CliffordConfig::backward_heuristic(&p, dt, None);
                c.validate_backward(&p, None).unwrap_or_else(|e| panic!("backward {p:?}: {c:?}: {e}"));
                assert!(c.threads <= block_limit(dim, c.variant, true), "backward {p:?}: {c:?}");
            }
        }
    }
}

#[test]
fn sixteen_bit_forward_takes_the_sweeps_winners() {
    let c = CliffordConfig::heuristic(&Clifford::new(2, 4096, 512, true), DType::Bf16, None);
    assert_eq!((c.threads, c.rows_per_block, c.blocks_per_sm), (128, 1, 4));
    assert_eq!(c.variant, RowVariant { vec: true, vpt: 1, stream_w: false });
    let c = CliffordConfig::heuristic(&Clifford::new(3, 4096, 512, true), DType::F16, None);
    assert_eq!((c.threads, c.rows_per_block, c.blocks_per_sm), (128, 1, 2));
    assert_eq!(c.variant, RowVariant { vec: true, vpt: 1, stream_w: false });
    let c = CliffordConfig::heuristic(&Clifford::new(3, 4096, 777, true), DType::Bf16, None);
    assert_eq!((c.threads, c.team(), c.variant.vpt, c.variant.vec), (512, 512, 2, false));
    // So does f32 there (3D rows of 513 to 1,024 features: two a thread, teams of 512, one
    // block per SM), and the four-feature teams of 256 stay next (f16's two-feature kernel
    // does not fit 512 threads).
    let p = Clifford::new(3, 4096, 777, true);
    let f = CliffordConfig::forward_candidates(&p, DType::F32, None);
    assert_eq!((f[0].threads, f[0].team(), f[0].variant.vpt, f[0].blocks_per_sm), (512, 512, 2, 1));
    assert_eq!((f[1].team(), f[1].variant.vpt), (256, 4));
    // f32 keeps its own order.
    let f = CliffordConfig::heuristic(&Clifford::new(2, 4096, 512, true), DType::F32, None);
    assert_eq!(f.variant, RowVariant { vec: false, vpt: 2, stream_w: false });
    // 16-bit 2D rows from 512 features: four-feature accesses filling a team, else split.
    let b = CliffordConfig::backward_heuristic(&Clifford::new(2, 4096, 1024, true), DType::Bf16, None);
    assert_eq!((b.team(), b.variant), (256, RowVariant { vec: true, vpt: 1, stream_w: false }));
    for n in [640, 777, 1536] {
        let b = CliffordConfig::backward_heuristic(&Clifford::new(2, 4096, n, true), DType::F16, None);
        assert!(b.variant.is_split(), "{n}: {b:?}");
        let f = CliffordConfig::backward_heuristic(&Clifford::new(2, 4096, n, true), DType::F32, None);
        assert_eq!(f.variant.is_split(), n > 1024, "{n}: {f:?}");
    }
    // The backward's split form (3D, N > 512) is the same for every dtype: one feature a
    // thread in blocks of 64.
    for n in [513, 777, 1024, 100_000] {
        let p = Clifford::new(3, 4096, n, true);
        let b = CliffordConfig::backward_heuristic(&p, DType::Bf16, None);
        assert_eq!(b, CliffordConfig::backward_heuristic(&p, DType::F32, None));
        assert_eq!(b.variant, RowVariant { vec: false, vpt: 0, stream_w: true });
        assert_eq!((b.threads, b.rows_per_block, b.blocks_per_sm), (64, 1, 0));
    }
    // 512 features keep the one-pass kernel, two features a thread.
    let b = CliffordConfig::backward_heuristic(&Clifford::new(3, 4096, 512, true), DType::F32, None);
    assert_eq!((b.team(), b.variant.vpt, b.variant.stream_w), (256, 2, false));
}

/// An H100-like device of compute capability `cc`.
fn device(cc: (i32, i32)) -> DeviceInfo {
    DeviceInfo {
        ordinal: 0,
        name: "test".into(),
        compute_capability: cc,
        sm_count: 132,
        global_mem_bytes: 80 << 30,
        l2_bytes: 50 << 20,
        shared_mem_per_block: 48 << 10,
        shared_mem_per_block_optin: 227 << 10,
        shared_mem_per_sm: 228 << 10,
        max_threads_per_block: 1024,
        max_threads_per_sm: 2048,
        registers_per_sm: 65536,
        clock_khz: 1_980_000,
        memory_clock_khz: 2_619_000,
        memory_bus_bits: 5120,
        driver_version: 12080,
    }
}

#[test]
fn the_backward_takes_clusters_for_f32_rows_the_split_form_would_take() {
    let h100 = device((9, 0));
    let bwd = |dim, n, dt, d: Option<&DeviceInfo>| {
        CliffordConfig::backward_heuristic(&Clifford::new(dim, 4096, n, true), dt, d)
    };
    // f32 rows past one block's registers in portable clusters of the smallest blocks of 64,
    // 128 or 256 threads x 2 features that cover them.
    for (dim, n, k, threads) in [
        (3, 513, 5, 64),
        (3, 640, 5, 64),
        (3, 777, 7, 64),
        (3, 1024, 8, 64),
        (3, 1025, 5, 128),
        (3, 1100, 5, 128),
        (3, 1536, 6, 128),
        (3, 2048, 8, 128),
        (3, 2049, 5, 256),
        (2, 1025, 5, 128),
        (2, 1536, 6, 128),
        (2, 2500, 5, 256),
        (3, 4096, 8, 256),
    ] {
        let c = bwd(dim, n, DType::F32, Some(&h100));
        assert_eq!((c.cluster, c.threads, c.variant.vpt, c.rows_per_block), (k, threads, 2, 1), "{dim}D N {n}: {c:?}");
        let p = Clifford::new(dim, 4096, n, true);
        c.validate_backward(&p, Some(&h100)).unwrap_or_else(|e| panic!("{dim}D N {n}: {e}"));
        // Without a device (the CPU) or on a GPU without clusters, the split form.
        assert!(bwd(dim, n, DType::F32, None).variant.is_split());
        assert!(bwd(dim, n, DType::F32, Some(&device((8, 0)))).variant.is_split());
    }
    // Rows one block holds keep the one-pass form; longer rows than 8 blocks and 16-bit
    // rows keep the split form.
    assert_eq!(bwd(3, 512, DType::F32, Some(&h100)).cluster, 1);
    assert_eq!(bwd(2, 1024, DType::F32, Some(&h100)).cluster, 1);
    assert!(bwd(3, 4097, DType::F32, Some(&h100)).variant.is_split());
    assert!(bwd(3, 100_000, DType::F32, Some(&h100)).variant.is_split());
    for dt in [DType::Bf16, DType::F16] {
        assert!(bwd(3, 777, dt, Some(&h100)).variant.is_split(), "{dt:?}");
    }
    // A cluster config on a device without clusters says so; a device described by its
    // limits only (the tuner's, capability 0.0) leaves it to the launch.
    let p = Clifford::new(3, 4096, 777, true);
    let c = bwd(3, 777, DType::F32, Some(&h100));
    let e = c.validate_backward(&p, Some(&device((8, 0)))).unwrap_err().to_string();
    assert!(e.contains("compute capability 9.0"), "{e}");
    assert!(c.validate_backward(&p, Some(&device((0, 0)))).is_ok());
}

#[test]
fn fit_lowers_threads_and_keeps_the_team() {
    let c = CliffordConfig {
        threads: 1024,
        rows_per_block: 4,
        variant: RowVariant { vec: false, vpt: 1, stream_w: false },
        blocks_per_sm: 1,
        cpu_rows: 1,
        cluster: 1,
    };
    let f = c.fit(384).unwrap();
    assert_eq!((f.threads, f.team(), f.rows_per_block), (256, 256, 1));
    assert!(c.fit(128).is_none());
    assert_eq!(block_limit(2, RowVariant { vec: true, vpt: 1, stream_w: false }, false), 256);
    assert_eq!(block_limit(2, RowVariant { vec: false, vpt: 1, stream_w: false }, false), 1024);
}

#[test]
fn space_is_valid_and_rejects_what_does_not_cover_n() {
    let p = Clifford::new(3, 64, 1024, true);
    let space = CliffordConfig::gpu_space(&p);
    assert!(!space.is_empty());
    assert!(space.iter().all(|c| c.validate(&p, None).is_ok()));
    let bad = CliffordConfig {
        threads: 64,
        rows_per_block: 1,
        variant: RowVariant { vec: false, vpt: 1, stream_w: false },
        blocks_per_sm: 0,
        cpu_rows: 1,
        cluster: 1,
    };
    assert!(matches!(bad.validate(&p, None), Err(Error::InvalidConfig { .. })));
    let odd = Clifford::new(2, 4, 7, true);
    let vec = CliffordConfig { variant: RowVariant { vec: true, vpt: 1, stream_w: false }, threads: 32, ..bad };
    assert!(vec.validate(&odd, None).is_err());
}
