//! The configuration spaces the Clifford sweeps (`--clifford-rows fwd_sweep,fwdbwd_sweep`) time:
//! every compiled forward and backward variant with the teams, block sizes and blocks per SM
//! that can run a given (B, N). Kept apart from the bench rows so each file stays one concept.

use ferrotune::DType;
use ferrotune::ops::clifford::{Clifford, CliffordConfig};

/// The backward configs `fwdbwd_sweep` times: every one-pass variant with the smallest team
/// that covers N (up to 1024), blocks of 128..=1024 threads, 0, 1 and 2 blocks per SM, the
/// two-pass form of the forward heuristic (1- and 4-feature accesses, 1 or 2 blocks per SM),
/// the split form (blocks of 64 to 256 features, 0, 2, 4 or 8 blocks per SM) and the cluster
/// form (a row over the fewest blocks of 32 to 256 threads that cover it, up to 16).
/// `FERROTUNE_SWEEP_FORMS` (a comma list of `one-pass`, `two-pass`, `split`, `cluster`) keeps
/// only those forms besides the first config (a sweep of one form in a short device call).
pub fn bwd_sweep_space(p: &Clifford) -> Vec<CliffordConfig> {
    let v = bwd_space_all(p);
    match std::env::var("FERROTUNE_SWEEP_FORMS") {
        Ok(forms) => {
            let keep: Vec<&str> = forms.split(',').map(str::trim).collect();
            v.iter().enumerate().filter(|(i, c)| *i == 0 || keep.contains(&form_of(c))).map(|(_, c)| *c).collect()
        }
        Err(_) => v,
    }
}

/// The backward form a config runs, as `FERROTUNE_SWEEP_FORMS` names it.
fn form_of(c: &CliffordConfig) -> &'static str {
    if c.cluster > 1 {
        "cluster"
    } else if c.variant.is_split() {
        "split"
    } else if c.variant.vpt == 0 {
        "two-pass"
    } else {
        "one-pass"
    }
}

fn bwd_space_all(p: &Clifford) -> Vec<CliffordConfig> {
    let mut v = vec![CliffordConfig::heuristic(p, DType::F32, None).backward_form()];
    // The two-pass kernels with 1- and 4-feature accesses, one or two blocks per SM.
    for vec in [false, true] {
        for blocks_per_sm in [1, 2] {
            let mut c = v[0];
            c.variant.vec = vec;
            c.blocks_per_sm = blocks_per_sm;
            if c != v[0] && c.validate_backward(p, None).is_ok() {
                v.push(c);
            }
        }
    }
    // The split form: feature tiles of 64 to 256 threads, the chunk rule's blocks per SM and
    // 2, 4, 8.
    for variant in ferrotune_kernels::clifford::BWD_SPLIT {
        for threads in [64u32, 128, 256] {
            for blocks_per_sm in [0, 2, 4, 8] {
                let c = CliffordConfig { threads, rows_per_block: 1, variant, blocks_per_sm, cpu_rows: 16, cluster: 1 };
                if c.validate_backward(p, None).is_ok() {
                    v.push(c);
                }
            }
        }
    }
    // The cluster form: one-feature accesses kept in registers (1 or 2 a thread), blocks of
    // 32 to 256 threads, the fewest blocks per cluster (2 to 16) that cover N; two blocks an
    // SM, or as many as the SM's 2,048 threads (the launch caps both at what the registers
    // let the device hold).
    for vpt in ferrotune_kernels::clifford::BWD_CLUSTER_VPT {
        for threads in [32u32, 64, 128, 256] {
            let cluster = p.n.max(1).div_ceil((threads * vpt) as usize).max(2);
            for blocks_per_sm in [2, 2048 / threads] {
                let c = CliffordConfig {
                    threads,
                    rows_per_block: 1,
                    variant: ferrotune::ops::clifford::CliffordVariant { vec: false, vpt, stream_w: false },
                    blocks_per_sm,
                    cpu_rows: 16,
                    cluster: cluster.min(u32::MAX as usize) as u32,
                };
                if c.validate_backward(p, None).is_ok() && !v.contains(&c) {
                    v.push(c);
                }
            }
        }
    }
    for variant in ferrotune_kernels::clifford::BWD_VARIANTS {
        let team = p.n.max(1).div_ceil(variant.lanes() * variant.vpt as usize).next_power_of_two();
        for threads in [128u32, 256, 512, 1024] {
            for blocks_per_sm in [0, 1, 2] {
                if team > threads as usize {
                    continue;
                }
                let c = CliffordConfig {
                    threads,
                    rows_per_block: threads / team as u32,
                    variant,
                    blocks_per_sm,
                    cpu_rows: 16,
                    cluster: 1,
                };
                if c.validate_backward(p, None).is_ok() {
                    v.push(c);
                }
            }
        }
    }
    v
}

/// The forward configs `fwd_sweep` times: every compiled forward variant (weights kept or
/// re-read per row) with the smallest team that
/// covers N and twice that, blocks of 256..=1024 threads, 0 (one block per row group), 1, 2
/// and 4 blocks per SM.
pub fn sweep_space(p: &Clifford) -> Vec<CliffordConfig> {
    let mut v = Vec::new();
    for variant in ferrotune_kernels::clifford::fwd_variants() {
        let per = variant.lanes() * (variant.vpt.max(1) as usize);
        let base = if variant.vpt == 0 { 128 } else { p.n.max(1).div_ceil(per).next_power_of_two() };
        for team in [base, 2 * base] {
            for threads in [128u32, 256, 512, 1024] {
                for blocks_per_sm in [0, 1, 2, 4] {
                    if team > threads as usize {
                        continue;
                    }
                    let c = CliffordConfig {
                        threads,
                        rows_per_block: threads / team as u32,
                        variant,
                        blocks_per_sm,
                        cpu_rows: 16,
                        cluster: 1,
                    };
                    if c.validate(p, None).is_ok() {
                        v.push(c);
                    }
                }
            }
        }
    }
    v
}
