//! Launch configurations of the elementwise family, checked once before any launch, and the
//! built-in heuristic used until a tuned profile says otherwise.

use ferrotune_kernels::DType;
use ferrotune_kernels::elementwise::{ELEM_VARIANTS, ElemOp, ElemVariant};

use crate::device::DeviceInfo;
use crate::error::{Error, Result};

/// Run-time choice of configs from tuning profiles (see `tuned`).
pub use crate::tuned::{Source, explain, gemm_explain, use_profiles};

/// How an elementwise op is launched. The GPU fields pick a PTX variant and the grid; the CPU
/// field sizes the rayon tasks. The autotuner sweeps all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ElemConfig {
    /// Threads per block: a multiple of 32, at most 1024.
    pub threads: u32,
    /// 16-byte vectors or scalars, and vectors in flight per thread (a compiled variant).
    pub variant: ElemVariant,
    /// 0: enough blocks to cover the data in one pass. N > 0: at most N blocks per SM, each
    /// looping over the data (a persistent grid).
    pub blocks_per_sm: u32,
    /// Elements per rayon task on the CPU backend.
    pub cpu_chunk: usize,
}

impl ElemConfig {
    /// The built-in choice, from the config sweep of `cargo xtask bench --sweep` on the H100
    /// (bench/results/): 16-byte vectors everywhere; one vector per thread and large blocks
    /// for the ops that only move bytes; more vectors in flight for the arithmetic-heavy GELU
    /// family, whose instruction count per byte is highest.
    pub fn heuristic(op: ElemOp, dtype: DType, _device: Option<&DeviceInfo>) -> ElemConfig {
        let (threads, unroll, blocks_per_sm) = match (op, dtype) {
            (ElemOp::GeluErf | ElemOp::GeluTanh, DType::F32) => (256, 4, 0),
            (ElemOp::GeluErf | ElemOp::GeluTanh, _) => (256, 1, 0),
            (ElemOp::BiasAdd, _) => (256, 1, 0),
            _ => (1024, 1, 0),
        };
        ElemConfig { threads, variant: ElemVariant { vec16: true, unroll }, blocks_per_sm, cpu_chunk: 1 << 16 }
    }

    /// Checks the config against the compiled variants and the device limits.
    pub fn validate(&self, op: ElemOp, device: Option<&DeviceInfo>) -> Result<()> {
        let bad = |why: String| Err(Error::InvalidConfig { op: op.name(), why });
        let max_threads = device.map_or(1024, |d| d.max_threads_per_block);
        if self.threads == 0 || !self.threads.is_multiple_of(32) || self.threads > max_threads {
            return bad(format!("threads per block {} must be a multiple of 32 in 32..={max_threads}", self.threads));
        }
        if !ELEM_VARIANTS.contains(&self.variant) {
            return bad(format!("variant {:?} is not compiled into the PTX (see ELEM_VARIANTS)", self.variant));
        }
        if self.cpu_chunk == 0 {
            return bad("cpu_chunk must be at least 1".into());
        }
        Ok(())
    }

    /// Every config the tuner may try for the GPU: each compiled variant x block sizes x grid
    /// policies.
    pub fn gpu_space() -> Vec<ElemConfig> {
        let mut v = Vec::new();
        for variant in ELEM_VARIANTS {
            for threads in [128, 256, 512, 1024] {
                for blocks_per_sm in [0, 4, 8, 16] {
                    v.push(ElemConfig { threads, variant, blocks_per_sm, cpu_chunk: 1 << 16 });
                }
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heuristic_is_valid_for_every_op_and_dtype() {
        for op in ElemOp::ALL {
            for dt in DType::ALL {
                ElemConfig::heuristic(op, dt, None).validate(op, None).unwrap();
            }
        }
    }

    #[test]
    fn bad_configs_are_rejected_with_a_reason() {
        let ok = ElemConfig::heuristic(ElemOp::Add, DType::F32, None);
        for bad in [
            ElemConfig { threads: 0, ..ok },
            ElemConfig { threads: 100, ..ok },
            ElemConfig { threads: 2048, ..ok },
            ElemConfig { variant: ElemVariant { vec16: true, unroll: 3 }, ..ok },
            ElemConfig { cpu_chunk: 0, ..ok },
        ] {
            let e = bad.validate(ElemOp::Add, None).unwrap_err();
            assert!(matches!(e, Error::InvalidConfig { .. }), "{e}");
        }
        assert_eq!(ElemConfig::gpu_space().len(), ELEM_VARIANTS.len() * 16);
        assert!(ElemConfig::gpu_space().iter().all(|c| c.validate(ElemOp::Add, None).is_ok()));
    }
}

/// How a GEMM is launched: the tile of the tensor-core kernel (an index into
/// `gemm::tc::TILES`, i.e. one of the compiled variants) and, on the CPU backend, output rows
/// per rayon task. From a tuning profile (see `tuned::gemm_explain`) or the built-in heuristic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmConfig {
    pub tile: usize,
    /// Output rows per rayon task (CPU backend).
    pub cpu_rows: usize,
}

impl GemmConfig {
    /// The kernels' own default: tile 0 (128 x 128) and 16 rows per CPU task. What the tuner
    /// compares its result against.
    pub const DEFAULT: GemmConfig = GemmConfig { tile: 0, cpu_rows: 16 };

    /// Built-in choice by shape, from the all-tiles sweep on an H100 (bench/results/
    /// gemm-tiles-h100.json): 128 x 256 x 64 (tile 4, fastest on every large bf16/tf32 shape
    /// and on tf32 1000x3000x700 with 96 blocks) once it fills two thirds of the 132 SMs with
    /// one block each; else 128 x 128 (best on 512x3072x768) or 64 x 128 from half a wave at
    /// two or three blocks per SM; else 64 x 64. A tile is skipped where padding to whole
    /// tiles would waste more than a quarter of its work (a batch of 32-row matrices).
    pub fn heuristic(m: usize, n: usize, _k: usize, batch: usize) -> GemmConfig {
        let fits = |t: usize, min_blocks: usize| {
            let tile = ferrotune_kernels::gemm::tc::TILES[t];
            let (bm, bn) = (m.div_ceil(tile.bm()), n.div_ceil(tile.bn()));
            let blocks = bm * bn * batch.max(1);
            let used = (m * n) as f64 / ((bm * tile.bm() * bn * tile.bn()) as f64).max(1.0);
            blocks >= min_blocks && used >= 0.75
        };
        let tile = [(4, 88), (0, 66), (6, 66)].into_iter().find(|&(t, b)| fits(t, b)).map_or(7, |(t, _)| t);
        GemmConfig { tile, ..GemmConfig::DEFAULT }
    }

    /// Checks the config against the compiled tiles.
    pub fn validate(&self) -> Result<()> {
        let tiles = ferrotune_kernels::gemm::tc::TILES.len();
        if self.tile >= tiles {
            return Err(Error::InvalidConfig {
                op: "gemm",
                why: format!("tile {} is not compiled into the PTX (0..{tiles})", self.tile),
            });
        }
        if self.cpu_rows == 0 {
            return Err(Error::InvalidConfig { op: "gemm", why: "cpu_rows must be at least 1".into() });
        }
        Ok(())
    }
}

#[cfg(test)]
mod gemm_tests {
    use super::*;

    #[test]
    fn gemm_configs_are_checked_against_the_compiled_tiles() {
        let n = ferrotune_kernels::gemm::tc::TILES.len();
        assert!(GemmConfig::DEFAULT.validate().is_ok());
        assert!(GemmConfig { tile: n - 1, cpu_rows: 1 }.validate().is_ok());
        assert!(GemmConfig { tile: n, ..GemmConfig::DEFAULT }.validate().is_err());
        assert!(GemmConfig { cpu_rows: 0, ..GemmConfig::DEFAULT }.validate().is_err());
        for (m, n, k) in [(8192, 8192, 8192), (128, 8192, 1024), (64, 64, 64)] {
            assert!(GemmConfig::heuristic(m, n, k, 1).validate().is_ok());
        }
    }

    #[test]
    fn gemm_heuristic_picks_the_tiles_the_h100_sweep_found_fastest() {
        let tile = |m, n, k, batch| GemmConfig::heuristic(m, n, k, batch).tile;
        assert_eq!(tile(8192, 8192, 8192, 1), 4);
        assert_eq!(tile(8192, 3072, 768, 1), 4);
        assert_eq!(tile(1000, 3000, 700, 1), 4);
        assert_eq!(tile(512, 3072, 768, 1), 0);
        // 32-row matrices: every taller tile would be mostly padding.
        assert_eq!(tile(32, 256, 256, 40), 7);
        assert_eq!(tile(1, 1, 1, 1), 7);
    }
}
