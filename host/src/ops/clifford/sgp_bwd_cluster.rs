//! The cluster SGP backward on the GPU (`kernels-gpu/src/entry/clifford_bwd_cluster.rs`,
//! sm_90a): the one-pass backward with a row shared by the `cfg.cluster` blocks of a
//! thread-block cluster, each block keeping `cfg.threads * vpt` of its features in registers.
//! Clusters loop over the rows; each writes one weight-gradient partial (`W * N` f32), summed
//! by `ft_clifford_dw_reduce` in cluster order (deterministic).

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig};
use ferrotune_kernels::clifford as kc;

use super::{Clifford, CliffordConfig, OP, SCRATCH_BYTES, check_threads, opt_in_smem};
use crate::DType;
use crate::backend::Gpu;
use crate::cluster::{self, ClusterArgs};
use crate::error::{DriverContext, Error, Result};

/// Most f32 the clusters' weight-gradient partials may take (256 MiB), as the other backward
/// kernels.
const MAX_PARTIAL_FLOATS: usize = 64 << 20;

/// Clusters of the launch before the device's occupancy is asked (which may lower it): as
/// many as `blocks_per_sm` blocks on every SM make (0 counts as one), at most one per row and
/// within the partials' cap. The workspace is sized for this many.
pub fn cluster_count(p: &Clifford, cfg: &CliffordConfig, sm_count: u32) -> Result<usize> {
    let per_sm = cfg.blocks_per_sm.max(1) as usize;
    let blocks = sm_count.max(1) as usize * per_sm;
    let wn = p.sgp_weights_len()?.max(1);
    let cap = (MAX_PARTIAL_FLOATS / wn).max(1);
    Ok((blocks / cfg.cluster.max(1) as usize).clamp(1, p.b.max(1)).min(cap))
}

/// f32 of the cluster backward's workspace: one partial per cluster.
pub fn cluster_workspace_len(p: &Clifford, cfg: &CliffordConfig, sm_count: u32) -> Result<usize> {
    cluster_count(p, cfg, sm_count)?
        .checked_mul(p.sgp_weights_len()?)
        .ok_or(Error::InvalidConfig { op: OP, why: format!("the cluster backward's workspace of {p:?} overflows") })
}

/// Launches the cluster backward of `p` for element type `dtype`: `ptrs` = (x, y, go, w, dx,
/// dy), `pws` the workspace ([`cluster_workspace_len`] f32). Returns how many partials it
/// writes (from `pws`), for the weight-gradient reduction.
///
/// # Safety
/// The tensors hold `C * B * N` elements (w `N * W`), the workspace
/// [`cluster_workspace_len`] f32, all alive until the launch completes; `cfg` passed
/// `validate_backward` for `p` (its clusters cover N, one row per block).
pub unsafe fn launch(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    p: &Clifford,
    dtype: DType,
    cfg: &CliffordConfig,
    ptrs: [u64; 6],
    pws: u64,
) -> Result<usize> {
    let name = kc::bwd_cluster_entry_name(p.dim, dtype, cfg.variant.vpt);
    let name = name.as_str();
    let kernels = gpu.kernels()?;
    if kernels.arch != "sm_90a" {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!(
                "the cluster backward ({name}) is built for sm_90a only; this device loaded the {} module",
                kernels.arch
            ),
        });
    }
    let kernel = kernels.function(name)?;
    check_threads(&kernel, name, cfg.threads)?;
    let smem = opt_in_smem(gpu, &kernel, name, SCRATCH_BYTES + 2 * kc::CLUSTER_SLOT_BYTES as usize)?;
    let cl = cfg.cluster;
    let block = (cfg.threads, 1, 1);
    let probe = LaunchConfig { grid_dim: (cl, 1, 1), block_dim: block, shared_mem_bytes: smem };
    cluster::allow_cluster(&kernel.func, cl).ctx(|| format!("allowing clusters of {cl} blocks of {name}"))?;
    let fit = cluster::max_active_clusters_cached(cs, &kernel.func, probe, cl)
        .ctx(|| format!("querying the clusters of {name} the device holds"))?;
    if fit == 0 {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!("no cluster of {cl} blocks of {} threads of {name} fits on this device", cfg.threads),
        });
    }
    // Every cluster resident at once: the rows are dealt round-robin, so a cluster that waited
    // for another's SMs would double the time.
    let clusters = cluster_count(p, cfg, gpu.info.sm_count)?.min(fit as usize) as u32;
    let launch = LaunchConfig { grid_dim: (clusters * cl, 1, 1), block_dim: block, shared_mem_bytes: smem };
    let [px, py, pg, pw, pdx, pdy] = ptrs;
    let (b, n, norm, team) = (p.b, p.n, p.normalize as u32, cfg.threads);
    let mut args = ClusterArgs::new();
    args.arg(&px).arg(&py).arg(&pg).arg(&pw).arg(&pdx).arg(&pdy).arg(&pws);
    args.arg(&b).arg(&n).arg(&norm).arg(&team);
    // SAFETY: matches `cluster_entry!` (7 pointers, b and n usize, normalize and team u32);
    // the tensors and the workspace (`clusters` partials of W * N f32, at most what
    // `cluster_workspace_len` sized) are the caller's; `validate_backward` proved
    // `cluster * threads * vpt >= N` and a power-of-two block from 32; the grid's x is a
    // multiple of the cluster; shared memory holds the scratch and the two slots.
    unsafe { cluster::launch(cs, &kernel.func, launch, cl, &mut args) }
        .ctx(|| format!("launching {name} on {b} x {n} in clusters of {cl}"))?;
    Ok(clusters as usize)
}
