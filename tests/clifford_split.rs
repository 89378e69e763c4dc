//! The split SGP backward (norm coefficients per row, then one feature per thread for a chunk
//! of rows): its gradients against the CPU backward (itself checked against finite
//! differences in `clifford.rs`) on edge and long rows, every dtype, with and without the norm,
//! feature tiles that leave threads idle, one chunk or many; and its config rules on the CPU.

use ferrotune::ops::clifford::{Clifford, CliffordConfig, split_grid};
use ferrotune::{Backend, DType, Scalar, bf16, f16};
use ferrotune_testkit::{Rng, cpu_backend, cuda_backend};

use super::clifford::{check_grad, f64s, make_case, run_backward};

/// (B, N, normalize): one row and one feature, odd N, N around a tile, long rows, many rows.
const SHAPES: [(usize, usize, bool); 9] = [
    (1, 1, true),
    (3, 7, false),
    (5, 63, true),
    (9, 65, true),
    (2, 257, false),
    (300, 777, true),
    (33, 1024, true),
    (700, 100, true),
    (2, 3000, true),
];

fn split(threads: u32, blocks_per_sm: u32) -> CliffordConfig {
    CliffordConfig::split(threads, blocks_per_sm)
}

fn gpu_split_typed<T: Scalar>(gpu: &Backend) -> usize {
    let mut runs = 0;
    for dim in [2, 3] {
        for (i, &(b, n, normalize)) in SHAPES.iter().enumerate() {
            if n > 1024 && T::DTYPE != DType::F32 {
                continue; // the long rows once, in f32
            }
            let p = Clifford::new(dim, b, n, normalize);
            let case = make_case::<T>(p, false, 900 + i as u64);
            let go: Vec<T> = Rng::new(40 + i as u64).vec(case.x.len(), -1.0, 1.0);
            let (cx, cy, cw) = run_backward(&cpu_backend(), &case, &go, None).unwrap();
            // The built-in split config, then tiles of 32, 128 and 256 features (idle threads in
            // the last tile), one chunk per SM or many.
            let mut cfgs = vec![CliffordConfig::split_backward(&p)];
            for (threads, bps) in [(32, 8), (256, 1), (128, 0)] {
                let c = split(threads, bps);
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

#[test]
fn gpu_clifford_split_backward_matches_cpu() {
    let Some(gpu) = cuda_backend("gpu_clifford_split_backward_matches_cpu") else { return };
    let runs = gpu_split_typed::<f32>(&gpu) + gpu_split_typed::<bf16>(&gpu) + gpu_split_typed::<f16>(&gpu);
    assert!(runs >= 100, "only {runs} split configs ran");
    println!("gpu_clifford_split_backward_matches_cpu: {runs} runs");
}

/// Two calls give the same bits (the chunks' partials are summed in chunk order), and a
/// workspace kept from a larger problem serves a smaller one.
#[test]
fn gpu_clifford_split_backward_is_deterministic() {
    let Some(gpu) = cuda_backend("gpu_clifford_split_backward_is_deterministic") else { return };
    for dim in [2, 3] {
        let p = Clifford::new(dim, 1000, 333, true);
        let case = make_case::<f32>(p, false, 5);
        let go: Vec<f32> = Rng::new(6).vec(case.x.len(), -1.0, 1.0);
        let cfg = split(64, 2);
        let a = run_backward(&gpu, &case, &go, Some(&cfg)).unwrap();
        let b = run_backward(&gpu, &case, &go, Some(&cfg)).unwrap();
        assert!(a == b, "{p:?}: two runs differ");
    }
}

#[test]
fn split_configs_are_checked() {
    let p = Clifford::new(3, 64, 777, true);
    assert!(split(64, 0).validate_backward(&p, None).is_ok());
    // One feature a thread: a block holds no second row.
    let mut c = split(64, 0);
    c.rows_per_block = 2;
    let e = c.validate_backward(&p, None).unwrap_err().to_string();
    assert!(e.contains("rows per block must be 1"), "{e}");
    // No 4-feature form is compiled, even where N allows it.
    let mut c = split(64, 0);
    c.variant.vec = true;
    let e = c.validate_backward(&Clifford::new(3, 64, 1024, true), None).unwrap_err().to_string();
    assert!(e.contains("one-feature accesses only"), "{e}");
    // Blocks of a power of two up to 1024 threads, as every Clifford config.
    assert!(split(96, 0).validate_backward(&p, None).is_err());
    // The grid covers every feature once.
    let g = split_grid(&p, &split(64, 0), 132).unwrap();
    assert_eq!(g.tiles, 13);
    assert!(g.chunks * g.rows >= 64);
}
