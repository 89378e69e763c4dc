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
    /// With `path = SmallM`, the index of the block width in `gemv::WIDTHS` instead.
    pub tile: usize,
    /// Output rows per rayon task (CPU backend).
    pub cpu_rows: usize,
    /// Slices K is split into (1 = off): partial products of each slice go to an f32
    /// workspace, a reduce kernel adds them and applies the epilogue. Single GEMMs on the GPU
    /// only; the CPU backend and batches ignore it.
    pub split_k: usize,
    /// The kernel family a tuned config asks for (profiles' `path`; `Auto` in older ones).
    /// With `SmallM`, `split_k` is that family's K split; with `Sm90(t)`, a `split_k` above 1
    /// is the Hopper kernel's in-kernel split (1: the plan's own).
    pub path: GemmPath,
    /// Whether operands without 16-byte rows are packed first (profiles' `pack`; `Auto`: the
    /// plan's size rule).
    pub pack: PackChoice,
}

/// Whether a GEMM's unaligned 16-bit operands are packed into an aligned copy (`ops::pack`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PackChoice {
    /// The plan decides (`pack::pack_applies`: unaligned and large enough).
    #[default]
    Auto,
    /// Pack whenever the call's operands are unaligned and the call can be packed.
    On,
    /// Never pack: the family runs on the operands as given.
    Off,
}

/// Which GEMM kernel family a config asks the plan (`ops::gemm_plan`) for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GemmPath {
    /// The plan decides (the Hopper kernels where the call can take them, else the tiles).
    #[default]
    Auto,
    /// The `mma.sync`/FFMA tiles (`tile`), even where the Hopper path could run.
    Mma,
    /// The Hopper kernel with tile `gemm_sm90::TILES[i]`, where the call can take it.
    Sm90(u8),
    /// The small-M family (`ops::gemv`, M <= 64, 16-bit), with `split_k` K slices.
    SmallM,
}

impl GemmPath {
    /// `auto`, `mma` or `sm90:<tile>`: how profiles and the tuner's messages write it.
    pub fn label(&self) -> String {
        match self {
            GemmPath::Auto => "auto".into(),
            GemmPath::Mma => "mma".into(),
            GemmPath::Sm90(t) => format!("sm90:{t}"),
            GemmPath::SmallM => "small-m".into(),
        }
    }

    /// The inverse of [`GemmPath::label`]; `None` for anything else or an uncompiled tile.
    pub fn parse(s: &str) -> Option<GemmPath> {
        match s {
            "auto" => Some(GemmPath::Auto),
            "mma" => Some(GemmPath::Mma),
            "small-m" => Some(GemmPath::SmallM),
            _ => {
                let t: u8 = s.strip_prefix("sm90:")?.parse().ok()?;
                ((t as usize) < ferrotune_kernels::gemm_sm90::TILES.len()).then_some(GemmPath::Sm90(t))
            }
        }
    }
}

impl GemmConfig {
    /// The kernels' own default: tile 0 (128 x 128), 16 rows per CPU task, no split-K. What the
    /// tuner compares its result against.
    pub const DEFAULT: GemmConfig =
        GemmConfig { tile: 0, cpu_rows: 16, split_k: 1, path: GemmPath::Auto, pack: PackChoice::Auto };

    /// The most K slices a config may ask for.
    pub const MAX_SPLIT_K: usize = ferrotune_kernels::splitk::MAX_SLICES;

    /// Built-in choice by shape, from the all-tiles sweep on an H100 (bench/results/
    /// gemm-tiles-h100.json), see `heuristic_unsplit`.
    ///
    /// Split-K (single GEMMs only): when the output has at most a quarter wave of 128 x 128
    /// tiles (33 on 132 SMs; the H100 split-K rows in bench/results/gemm-h100.json: 16 slices
    /// ran 3.3x faster on 4 such tiles and 1.9x on 16, but slower on 64) and K is long
    /// (`k >= 2048` and `k >= 4 max(m, n)`), K is cut into `s` slices so that the partial GEMMs, which run tile 0 (the only tile with an
    /// f32 output for 16-bit inputs), give one to two waves: `s` = the most slices with at
    /// most two waves of tile-0 blocks, at most 16, each slice at least 256 long.
    pub fn heuristic(m: usize, n: usize, k: usize, batch: usize) -> GemmConfig {
        let blocks = |t: usize| {
            let tile = ferrotune_kernels::gemm::tc::TILES[t];
            m.div_ceil(tile.bm()) * n.div_ceil(tile.bn()) * batch.max(1)
        };
        let tile = Self::heuristic_unsplit(m, n, batch).tile;
        if batch <= 1 && blocks(0) <= SMS / 4 && k >= 2048 && k >= 4 * m.max(n) {
            let s = (2 * SMS / blocks(0).max(1)).min(16).min(k / MIN_SLICE_K);
            if s >= 2 {
                return GemmConfig { tile: 0, split_k: s, ..GemmConfig::DEFAULT };
            }
        }
        GemmConfig { tile, ..GemmConfig::DEFAULT }
    }

    /// The heuristic's tile without split-K (also what a call that does not split runs when
    /// the chosen config's tile was picked for a split): 128 x 256 x 64 (tile 4, fastest on
    /// every large bf16/tf32 shape and on tf32 1000x3000x700 with 96 blocks) once it fills two
    /// thirds of the 132 SMs with one block each; else 128 x 128 with four 64 x 64 warps
    /// (tile 3, best on 512x3072x768) or 64 x 128 from half a wave at two or three blocks per
    /// SM; else 64 x 64. A tile is
    /// skipped where padding to whole tiles would waste more than a quarter of its work (a
    /// batch of 32-row matrices).
    pub fn heuristic_unsplit(m: usize, n: usize, batch: usize) -> GemmConfig {
        let fits = |t: usize, min_blocks: usize| {
            let tile = ferrotune_kernels::gemm::tc::TILES[t];
            let (bm, bn) = (m.div_ceil(tile.bm()), n.div_ceil(tile.bn()));
            let blocks = bm * bn * batch.max(1);
            let used = (m * n) as f64 / ((bm * tile.bm() * bn * tile.bn()) as f64).max(1.0);
            blocks >= min_blocks && used >= 0.75
        };
        let tile = [(4, 88), (3, 66), (6, 66)].into_iter().find(|&(t, b)| fits(t, b)).map_or(7, |(t, _)| t);
        GemmConfig { tile, ..GemmConfig::DEFAULT }
    }

    /// Rows of output per band on the CPU backend when nothing is forced: the whole matrix, so
    /// each matrix is one product (B packed once), threaded over the pool by the GEMM crate
    /// unless the batch's matrices already fill it (`gemm_cpu.rs`).
    pub fn cpu_band_rows(m: usize) -> usize {
        m.max(1)
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
        if let GemmPath::Sm90(t) = self.path
            && t as usize >= ferrotune_kernels::gemm_sm90::TILES.len()
        {
            return Err(Error::InvalidConfig { op: "gemm", why: format!("Hopper tile {t} is not compiled") });
        }
        validate_split_k(self.split_k)?;
        self.validate_family_split()
    }

    /// A `split_k` above 1 on the small-M or a Hopper path is that family's own K split: at
    /// most `gemv::MAX_KSPLIT` slices, and on a Hopper tile that can split K. On the small-M
    /// path `tile` indexes `gemv::WIDTHS`, one past them names the streaming kernel
    /// (`ops::gemv_stream`).
    fn validate_family_split(&self) -> Result<()> {
        let s = self.split_k;
        match self.path {
            GemmPath::SmallM if s > ferrotune_kernels::gemv::MAX_KSPLIT => Err(Error::InvalidConfig {
                op: "gemm",
                why: format!("small-M K split {s} is above {}", ferrotune_kernels::gemv::MAX_KSPLIT),
            }),
            GemmPath::SmallM if self.tile > crate::ops::gemv_rows::ROWS_TILE => Err(Error::InvalidConfig {
                op: "gemm",
                why: format!(
                    "small-M tile {}: the family's tile is its width index, 0..{} (widths {:?} slabs), {} for \
                     the streaming kernel or {} for the row kernel",
                    self.tile,
                    ferrotune_kernels::gemv::WIDTHS.len(),
                    ferrotune_kernels::gemv::WIDTHS,
                    crate::ops::gemv_stream::STREAM_TILE,
                    crate::ops::gemv_rows::ROWS_TILE
                ),
            }),
            GemmPath::Sm90(t) if s > 1 && !ferrotune_kernels::gemm_sm90::TILES[t as usize].splits_k() => {
                Err(Error::InvalidConfig {
                    op: "gemm",
                    why: format!("split_k {s}: Hopper tile {t} does not split K (persistent, or not 128 wide)"),
                })
            }
            _ => Ok(()),
        }
    }
}

/// SMs of the H100 the GEMM heuristic was fitted on (one wave of blocks).
const SMS: usize = 132;
/// The shortest K slice the heuristic (and the tuner) splits into: shorter ones spend more on
/// the workspace than they gain in parallelism.
pub const MIN_SLICE_K: usize = 256;

/// Checks a split-K factor: 1 (off) to [`GemmConfig::MAX_SPLIT_K`].
pub fn validate_split_k(s: usize) -> Result<()> {
    if s == 0 || s > GemmConfig::MAX_SPLIT_K {
        return Err(Error::InvalidConfig {
            op: "gemm",
            why: format!("split_k {s} is outside 1..={} (1 = no split)", GemmConfig::MAX_SPLIT_K),
        });
    }
    Ok(())
}

#[cfg(test)]
mod gemm_tests {
    use super::*;

    #[test]
    fn gemm_configs_are_checked_against_the_compiled_tiles() {
        let n = ferrotune_kernels::gemm::tc::TILES.len();
        assert!(GemmConfig::DEFAULT.validate().is_ok());
        assert!(GemmConfig { tile: n - 1, cpu_rows: 1, split_k: 64, ..GemmConfig::DEFAULT }.validate().is_ok());
        assert!(GemmConfig { tile: n, ..GemmConfig::DEFAULT }.validate().is_err());
        assert!(GemmConfig { cpu_rows: 0, ..GemmConfig::DEFAULT }.validate().is_err());
        let hopper = ferrotune_kernels::gemm_sm90::TILES.len() as u8;
        assert!(GemmConfig { path: GemmPath::Sm90(hopper - 1), ..GemmConfig::DEFAULT }.validate().is_ok());
        assert!(GemmConfig { path: GemmPath::Sm90(hopper), ..GemmConfig::DEFAULT }.validate().is_err());
        for p in [GemmPath::Auto, GemmPath::Mma, GemmPath::Sm90(0), GemmPath::Sm90(hopper - 1)] {
            assert_eq!(GemmPath::parse(&p.label()), Some(p));
        }
        for bad in ["", "sm90", "sm90:", "sm90:x", "tiles", "SM90:1"] {
            assert_eq!(GemmPath::parse(bad), None, "{bad}");
        }
        assert_eq!(GemmPath::parse(&format!("sm90:{hopper}")), None);
        // CPU bands: one per matrix (never 0 rows).
        assert_eq!(GemmConfig::cpu_band_rows(1024), 1024);
        assert_eq!(GemmConfig::cpu_band_rows(0), 1);
        for s in [0, 65, usize::MAX] {
            let e = GemmConfig { split_k: s, ..GemmConfig::DEFAULT }.validate().unwrap_err();
            assert!(e.to_string().contains("split_k"), "{e}");
        }
        for (m, n, k) in [(8192, 8192, 8192), (128, 8192, 1024), (64, 64, 64), (256, 256, 65536)] {
            assert!(GemmConfig::heuristic(m, n, k, 1).validate().is_ok());
        }
    }

    #[test]
    fn gemm_heuristic_picks_the_tiles_the_h100_sweep_found_fastest() {
        let tile = |m, n, k, batch| GemmConfig::heuristic(m, n, k, batch).tile;
        assert_eq!(tile(8192, 8192, 8192, 1), 4);
        assert_eq!(tile(8192, 3072, 768, 1), 4);
        assert_eq!(tile(1000, 3000, 700, 1), 4);
        assert_eq!(tile(512, 3072, 768, 1), 3);
        // 32-row matrices: every taller tile would be mostly padding.
        assert_eq!(tile(32, 256, 256, 40), 7);
        assert_eq!(tile(1, 1, 1, 1), 7);
    }

    #[test]
    fn the_heuristic_splits_k_only_for_few_tiles_and_long_k() {
        let split = |m, n, k, b| GemmConfig::heuristic(m, n, k, b).split_k;
        // 4 tiles of 128 x 128: 16 slices (the cap) of 4096.
        assert_eq!(
            GemmConfig::heuristic(256, 256, 65536, 1),
            GemmConfig { tile: 0, split_k: 16, ..GemmConfig::DEFAULT }
        );
        // 16 tiles: 16 slices give 256 blocks, two waves at most.
        assert_eq!(split(512, 512, 32768, 1), 16);
        // 64 tiles: 4 slices.
        assert_eq!(split(1024, 1024, 16384, 1), 1, "64 tiles: splitting measured slower");
        assert_eq!(split(640, 640, 16384, 1), 10);
        // Short K, K not long against the output, or a batch: no split.
        assert_eq!(split(256, 256, 1024, 1), 1);
        assert_eq!(split(128, 4096, 8192, 1), 1);
        assert_eq!(split(256, 256, 65536, 2), 1);
        // Slices stay at least 256 long: 2048 / 256 = 8.
        assert_eq!(split(64, 64, 2048, 1), 8);
        assert_eq!(split(8192, 8192, 65536, 1), 1);
        // Without a split, the tile is the unsplit rule's.
        for (m, n, k, b) in [(8192, 8192, 8192, 1), (128, 8192, 1024, 1), (256, 256, 65536, 2), (64, 64, 64, 1)] {
            assert_eq!(GemmConfig::heuristic(m, n, k, b), GemmConfig::heuristic_unsplit(m, n, b));
        }
        assert_eq!(GemmConfig::heuristic_unsplit(256, 256, 1).tile, 7);
    }
}
