//! The staged SGP forward and backward (`ft_clifford_fwdt_*`, `ft_clifford_bwdt_*`, sm_90a: bulk copies of row groups into a ring
//! of shared-memory stages) against the float64 reference, outputs poisoned first: every
//! compiled feature count, two stages and the most that fit, odd N, rows that are not a
//! multiple of 16 bytes, inputs at an unaligned offset (the segment edges read from global
//! memory), groups that wrap the ring several times, a last group with fewer rows, norm on and
//! off, every dtype.

use super::clifford::{check_forward, check_grad, f64s, make_case, run_backward, run_forward};
use ferrotune::ops::clifford::{Clifford, CliffordConfig, staged};
use ferrotune::{Backend, DType, Scalar, bf16, f16};
use ferrotune_testkit::{Rng, cpu_backend, cuda_backend};

/// (B, N): tiny, odd, a warp's worth, rows of 8 and 16 features a group (many rows a group),
/// rows that need the whole block, and enough rows that every block goes round its ring.
const SHAPES: [(usize, usize); 9] =
    [(1, 1), (3, 7), (37, 100), (2, 129), (50, 64), (9, 512), (3, 777), (5, 1024), (1500, 777)];

fn staged_typed<T: Scalar>(gpu: &Backend) -> usize {
    let dev = gpu.device().expect("a CUDA backend has a device");
    let optin = dev.shared_mem_per_block_optin as usize;
    let mut cases = 0;
    for dim in [2u32, 3] {
        for (i, &(b, n)) in SHAPES.iter().enumerate() {
            // The large case once, in f32 (and not at all under FERROTUNE_TEST_SMALL, for runs
            // under compute-sanitizer).
            if b * n > 100_000 && (T::DTYPE != DType::F32 || std::env::var_os("FERROTUNE_TEST_SMALL").is_some()) {
                continue;
            }
            let p = Clifford::new(dim, b, n, i % 3 != 1);
            let case = make_case::<T>(p, false, 900 + ((dim as u64) << 8 | i as u64));
            let base = staged::plan(&p, T::DTYPE, optin, false).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            for &fpt in staged::fpts(dim, false) {
                let mut c = base;
                c.variant.vpt = fpt;
                c.threads = ferrotune_kernels::clifford::staged::threads_for(fpt);
                let team = n.div_ceil(fpt as usize).next_power_of_two() as u32;
                c.rows_per_block = c.threads / team;
                for stages in [2, base.stages] {
                    c.stages = stages;
                    if staged::validate(&c, &p, T::DTYPE, Some(dev), false).is_err() {
                        continue;
                    }
                    for offset in [0, 1] {
                        let got = run_forward(gpu, &case, Some(&c), false, offset)
                            .unwrap_or_else(|e| panic!("{p:?} {c:?}: {e}"));
                        if let Err(e) = check_forward(&case, &got, false) {
                            panic!("staged {c:?} offset {offset}: {e}");
                        }
                        cases += 1;
                    }
                }
            }
        }
    }
    cases
}

#[test]
fn gpu_clifford_staged_forward_matches_reference() {
    let Some(gpu) = cuda_backend("gpu_clifford_staged_forward_matches_reference") else { return };
    if gpu.device().map(|d| d.compute_capability) != Some((9, 0)) {
        println!("gpu_clifford_staged_forward_matches_reference: skipped: the staged forward needs sm_90a");
        return;
    }
    let n = staged_typed::<f32>(&gpu) + staged_typed::<bf16>(&gpu) + staged_typed::<f16>(&gpu);
    println!("gpu_clifford_staged_forward_matches_reference: {n} cases");
    assert!(n > 60, "only {n} cases ran");
}

/// The staged backward against the CPU backward (itself checked against finite differences):
/// dx, dy and the weight gradient summed over teams, blocks and the ring's rounds.
fn staged_backward_typed<T: Scalar>(gpu: &Backend) -> usize {
    let dev = gpu.device().expect("a CUDA backend has a device");
    let optin = dev.shared_mem_per_block_optin as usize;
    let mut cases = 0;
    for dim in [2u32, 3] {
        for (i, &(b, n)) in SHAPES.iter().enumerate() {
            if b * n > 100_000 && (T::DTYPE != DType::F32 || std::env::var_os("FERROTUNE_TEST_SMALL").is_some()) {
                continue;
            }
            let p = Clifford::new(dim, b, n, i % 3 != 1);
            let case = make_case::<T>(p, false, 700 + ((dim as u64) << 8 | i as u64));
            let go: Vec<T> = Rng::new(i as u64 + 17).vec(case.x.len(), -1.0, 1.0);
            let (cx, cy, cw) = run_backward(&cpu_backend(), &case, &go, None).unwrap();
            let base = staged::plan(&p, T::DTYPE, optin, true).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            for stages in [2, base.stages] {
                let c = CliffordConfig { stages, ..base };
                let (gx, gy, gw) =
                    run_backward(gpu, &case, &go, Some(&c)).unwrap_or_else(|e| panic!("{p:?} {c:?}: {e}"));
                let rel = if T::DTYPE == DType::F32 { 1e-4 } else { 2e-2 };
                let r = check_grad("dx", &f64s(&gx), &f64s(&cx), rel)
                    .and_then(|_| check_grad("dy", &f64s(&gy), &f64s(&cy), rel))
                    .and_then(|_| check_grad("dw", &f64s(&gw), &f64s(&cw), rel));
                assert!(r.is_ok(), "staged backward {} {p:?} {c:?}: {}", T::DTYPE.name(), r.unwrap_err());
                cases += 1;
            }
        }
    }
    cases
}

#[test]
fn gpu_clifford_staged_backward_matches_cpu() {
    let Some(gpu) = cuda_backend("gpu_clifford_staged_backward_matches_cpu") else { return };
    if gpu.device().map(|d| d.compute_capability) != Some((9, 0)) {
        println!("gpu_clifford_staged_backward_matches_cpu: skipped: the staged backward needs sm_90a");
        return;
    }
    let n =
        staged_backward_typed::<f32>(&gpu) + staged_backward_typed::<bf16>(&gpu) + staged_backward_typed::<f16>(&gpu);
    println!("gpu_clifford_staged_backward_matches_cpu: {n} cases");
    assert!(n > 30, "only {n} cases ran");
}
