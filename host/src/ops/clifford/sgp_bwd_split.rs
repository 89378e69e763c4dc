//! The split SGP backward on the GPU (`kernels-gpu/src/entry/clifford_bwd_split.rs`): the
//! norm's per-row coefficients first (a team per row), then one feature per thread for a chunk
//! of rows, its weights and weight gradient in registers; the chunks' weight-gradient partials
//! are summed by `ft_clifford_dw_reduce` (chunk order: deterministic).
//!
//! Workspace (f32): the coefficients, `B * SPLIT_COEFS`, then one `W * N` partial per chunk.

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use ferrotune_kernels::clifford as kc;

use super::{Clifford, CliffordConfig, OP, SCRATCH_BYTES, check_threads};
use crate::DType;
use crate::backend::Gpu;
use crate::error::{DriverContext, Error, Result};

/// Most f32 the chunks' weight-gradient partials may take (256 MiB), as the other backward
/// kernels: long rows get fewer chunks.
const MAX_PARTIAL_FLOATS: usize = 64 << 20;

/// Most blocks of a launch's y dimension (the chunks).
const MAX_CHUNKS: usize = 65_535;

/// Threads per block of the statistics kernel.
const STATS_THREADS: u32 = 256;

/// Blocks per SM of the statistics kernel's grid (it loops over the rows).
const STATS_BLOCKS_PER_SM: usize = 8;

/// How the feature kernel covers the problem: `tiles` blocks of `cfg.threads` features along
/// x, `chunks` of `rows` batch rows along y (the last chunk may be shorter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitGrid {
    pub tiles: usize,
    pub chunks: usize,
    pub rows: usize,
}

/// The feature kernel's grid for `p` and `cfg` on `sm_count` SMs: enough chunks that the
/// blocks fill `cfg.blocks_per_sm` per SM (0: as many as the SM's 2,048 threads hold), as
/// few as that, so each thread's weights and gradient serve as many rows as possible.
pub fn split_grid(p: &Clifford, cfg: &CliffordConfig, sm_count: u32) -> Result<SplitGrid> {
    let threads = cfg.threads.max(1) as usize;
    let tiles = p.n.div_ceil(threads).max(1);
    let per_sm = if cfg.blocks_per_sm > 0 { cfg.blocks_per_sm as usize } else { (2048 / threads).max(1) };
    let target = sm_count.max(1) as usize * per_sm;
    let wn = p.sgp_weights_len()?.max(1);
    let cap = (MAX_PARTIAL_FLOATS / wn).clamp(1, MAX_CHUNKS);
    let chunks = target.div_ceil(tiles).clamp(1, p.b.max(1)).min(cap);
    let rows = p.b.max(1).div_ceil(chunks);
    Ok(SplitGrid { tiles, chunks: p.b.max(1).div_ceil(rows), rows })
}

/// f32 of the split backward's workspace: the coefficients, then the chunks' partials.
pub fn split_workspace_len(p: &Clifford, cfg: &CliffordConfig, sm_count: u32) -> Result<usize> {
    let g = split_grid(p, cfg, sm_count)?;
    p.b.checked_mul(kc::SPLIT_COEFS)
        .and_then(|c| g.chunks.checked_mul(p.sgp_weights_len().ok()?)?.checked_add(c))
        .ok_or(Error::InvalidConfig { op: OP, why: format!("the split backward's workspace of {p:?} overflows") })
}

/// The feature kernel's entry for `dim` and `dtype` (the one whose block the config sets).
pub fn feat_entry(dim: u32, dtype: DType) -> String {
    kc::split_entry_names(dim, dtype).1.as_str().to_string()
}

/// The statistics kernel's team for `n` features: a power of two up to the block, about two
/// features a thread.
fn stats_team(n: usize) -> u32 {
    (n.div_ceil(2).next_power_of_two()).clamp(1, STATS_THREADS as usize) as u32
}

/// Launches the split backward of `p`: `ptrs` = (x, y, go, w, dx, dy), `pws` the workspace
/// ([`split_workspace_len`] f32). Returns where the partials start and how many there are, for
/// the weight-gradient reduction.
///
/// # Safety
/// The tensors hold `C * B * N` elements (w `N * W`), the workspace
/// [`split_workspace_len`] f32, all alive until the launches complete.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn launch<T: crate::buffer::Scalar>(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    p: &Clifford,
    cfg: &CliffordConfig,
    [px, py, pg, pw, pdx, pdy]: [u64; 6],
    pws: u64,
) -> Result<(u64, usize)> {
    let (b, n) = (p.b, p.n);
    let g = split_grid(p, cfg, gpu.info.sm_count)?;
    let coefs = pws;
    let parts = pws + (b * kc::SPLIT_COEFS * 4) as u64;
    if p.normalize {
        let (sname, _) = kc::split_entry_names(p.dim, T::DTYPE);
        let sname = sname.as_str();
        let k = gpu.kernels()?.function(sname)?;
        let team = stats_team(n);
        // A power of two (so a multiple of the team) that the kernel's registers allow.
        let fits = STATS_THREADS.min(k.max_threads).max(1);
        let threads = (1u32 << (31 - fits.leading_zeros())).max(team);
        check_threads(&k, sname, threads)?;
        let rows_per_block = (threads / team) as usize;
        let blocks = b.div_ceil(rows_per_block).min(gpu.info.sm_count as usize * STATS_BLOCKS_PER_SM).max(1);
        let cfg = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: SCRATCH_BYTES as u32,
        };
        let mut lb = cs.launch_builder(&k.func);
        lb.arg(&px).arg(&py).arg(&pg).arg(&pw).arg(&coefs).arg(&b).arg(&n).arg(&team);
        // SAFETY: matches `stats_entry!` (5 pointers, b and n usize, team u32); the tensors and
        // the B * SPLIT_COEFS coefficients at the workspace's start are covered (caller); team
        // is a power of two dividing the block, with the scratch the team sum needs.
        unsafe { lb.launch(cfg) }.ctx(|| format!("launching {sname} on {b} x {n}"))?;
    }
    let fname = feat_entry(p.dim, T::DTYPE);
    let k = gpu.kernels()?.function(&fname)?;
    check_threads(&k, &fname, cfg.threads)?;
    let launch = LaunchConfig {
        grid_dim: (g.tiles as u32, g.chunks as u32, 1),
        block_dim: (cfg.threads, 1, 1),
        shared_mem_bytes: 0,
    };
    let norm = p.normalize as u32;
    let mut lb = cs.launch_builder(&k.func);
    lb.arg(&px).arg(&py).arg(&pg).arg(&pw).arg(&coefs).arg(&pdx).arg(&pdy).arg(&parts);
    lb.arg(&b).arg(&n).arg(&g.rows).arg(&norm);
    // SAFETY: matches `feat_entry!` (8 pointers, b, n and rows usize, normalize u32); the
    // chunks of `g.rows` rows cover B; the workspace holds the coefficients the launch before
    // wrote (same stream) and `g.chunks` partials of W * N f32 after them (caller).
    unsafe { lb.launch(launch) }.ctx(|| format!("launching {fname} on {b} x {n}"))?;
    Ok((parts, g.chunks))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(threads: u32, blocks_per_sm: u32) -> CliffordConfig {
        CliffordConfig::split(threads, blocks_per_sm)
    }

    #[test]
    fn split_grid_covers_every_row_and_feature_once() {
        for (dim, b, n) in [(3, 4096, 777), (2, 1, 1), (3, 3, 100_000), (2, 100_000, 64), (3, 5000, 1536)] {
            let p = Clifford::new(dim, b, n, true);
            for (threads, bps) in [(64, 0), (128, 4), (256, 1), (1024, 8)] {
                let g = split_grid(&p, &cfg(threads, bps), 132).unwrap();
                assert!(g.tiles * threads as usize >= n && (g.tiles - 1) * (threads as usize) < n, "{p:?} {g:?}");
                // Every row in exactly one chunk, no chunk empty.
                assert!(g.chunks * g.rows >= b && (g.chunks - 1) * g.rows < b, "{p:?} {g:?}");
                assert!(
                    g.chunks <= MAX_CHUNKS
                        && g.chunks * p.sgp_weights_len().unwrap()
                            <= MAX_PARTIAL_FLOATS.max(p.sgp_weights_len().unwrap())
                );
            }
        }
        // Enough blocks to fill the SMs where the rows allow it.
        let g = split_grid(&Clifford::new(3, 4096, 777, true), &cfg(128, 4), 132).unwrap();
        assert_eq!(g.tiles, 7);
        assert!(g.tiles * g.chunks >= 4 * 132, "{g:?}");
        let len = split_workspace_len(&Clifford::new(3, 4096, 777, true), &cfg(128, 4), 132).unwrap();
        assert_eq!(len, 4096 * kc::SPLIT_COEFS + g.chunks * 20 * 777);
    }

    #[test]
    fn stats_team_is_a_power_of_two_within_the_block() {
        assert_eq!(stats_team(1), 1);
        assert_eq!(stats_team(777), 256);
        assert_eq!(stats_team(64), 32);
        assert_eq!(stats_team(100_000), 256);
    }
}
