//! The exact-f32 GEMM (`GemmDtype::F32`, `Precision::Strict`) in the GEMM space: the FFMA
//! tiles (`ffma::TILES`: 128 x 128 at two blocks an SM, 256 x 128 at one, the latter on
//! 16-byte aligned operands only) times the `mma.sync` split-K factors (up to
//! `gemm_splitk::FFMA_SPLIT_MAX` = 64 slices), whose partial products always run the 128-row tile. The host runs a config naming the tiles (`path = "mma"`) with
//! its FFMA tile (`ops::gemm_ffma::with_tile`). The cost model below prices a point as the
//! busiest SM's blocks at the FFMA rate its resident blocks reach plus a per-block fixed cost,
//! which is what separates the two tiles: the 256-row tile's main loop 6% faster per FLOP, its
//! fixed cost per block (not overlapped: one block an SM) seven times the 128-row tile's, and
//! the whole-block granularity of ragged waves.

use ferrotune::config::GemmConfig;
use ferrotune::ops::gemm::{SplitPlan, split_launches, variant_for};
use ferrotune_kernels::DType;
use ferrotune_kernels::gemm::{GemmVariant, Math, ffma};

use crate::protocol::{Description, GemmDtype, GemmShape};
use crate::space::{Limits, occupancy};

/// FFMA lanes per SM and clock (sm_80 and sm_90: 128, two FLOP each).
const FLOP_PER_CLK: f64 = 256.0;
/// The fraction of [`FLOP_PER_CLK`] each tile's blocks reach in their main loop, and the clocks
/// per block outside it (fill, epilogue), at the 1.965 GHz the H200's description gives: a
/// line through each tile's unsplit times in the exhaustive tuner run on the H200 with the
/// 16-byte epilogue stores (bench/results/ffma-v4-277ad92edbfc/run5-78d8870-tune, 11 aligned shapes,
/// K from 512 to 8192), least squares of the relative error: the 128-row tile (two blocks an
/// SM) 0.683 and 2.2 µs a block, the 256-row tile 0.725 and 14.8 µs, every time within 3.3%
/// but 640x640x8192 on the 128-row tile (one block on each of 25 SMs, 8% under; the model's
/// [`ALONE`] puts it above). Before those stores (ffma-tune-6e491b224208) the fixed costs were
/// 18 and 53 µs.
const EFFICIENCY: [f64; 2] = [0.683, 0.725];
const BLOCK_CLK: [f64; 2] = [4_300.0, 29_000.0];
/// The 128-row tile alone on an SM (fewer blocks than SMs): half the warps to hide latency.
const ALONE: f64 = 0.8;
/// A launch with nothing to do (µs).
const LAUNCH_US: f64 = 4.0;

/// The `Param::Tile` values of an exact-f32 shape: every FFMA tile.
pub fn tiles() -> Vec<u64> {
    (0..ffma::TILES.len() as u64).collect()
}

/// Every FFMA entry an `f32` shape's points may launch (for the worker's resources): each tile
/// at each load width it is compiled for, in the shape's layouts.
pub fn variants(shape: &GemmShape) -> Vec<GemmVariant> {
    let Ok(base) = variant_for(&shape.gemm(), DType::F32, DType::F32, 256, 256) else { return Vec::new() };
    let aligns = GemmVariant::aligns(Math::Ffma);
    let all = aligns.iter().flat_map(|&align| (0..ffma::TILES.len()).map(move |t| (align, t as u8)));
    all.map(|(align, tile)| GemmVariant { align, tile, ..base }).filter(GemmVariant::is_compiled).collect()
}

/// The FFMA variant `cfg` launches on `shape` (the worker's buffers start 256-byte aligned):
/// with split-K that of the partial products, else the config's tile — or why it cannot.
pub fn variant(shape: &GemmShape, cfg: &GemmConfig) -> Result<GemmVariant, String> {
    let g = shape.gemm();
    let plan = SplitPlan::new(shape.k, cfg.split_k);
    if cfg.split_k > 1 && plan.is_split() && shape.batch <= 1 {
        if cfg.tile != 0 {
            return Err(format!(
                "tile {}: the exact-f32 split-K runs its partial products on FFMA tile 0 (128 x {}), as the point \
                 with tile 0 does",
                cfg.tile,
                ffma::BN
            ));
        }
        return split_launches(&g, DType::F32, plan, 256, 256, *cfg).map(|l| l.v_part).map_err(|e| e.to_string());
    }
    let base = variant_for(&g, DType::F32, DType::F32, 256, 256).map_err(|e| e.to_string())?;
    let Some(&rows) = ffma::TILES.get(cfg.tile) else {
        return Err(format!("FFMA tile {} does not exist (0..{})", cfg.tile, ffma::TILES.len()));
    };
    let v = GemmVariant { tile: cfg.tile as u8, ..base };
    if !v.is_compiled() {
        return Err(format!(
            "FFMA tile {} ({rows} x {}) needs 16-byte aligned rows; these operands allow {}-byte loads",
            cfg.tile,
            ffma::BN,
            base.align
        ));
    }
    Ok(v)
}

/// Predicted time (ms) of the exact-f32 point `cfg` on `shape` (see the module's words); with
/// split-K, the partial products as a batch of `slices` on the 128-row tile, the reduce (the
/// f32 partials read once more, D written) and the second launches.
pub fn predict_ms(d: &Description, l: &Limits, shape: &GemmShape, cfg: &GemmConfig) -> f64 {
    debug_assert_eq!(shape.dtype, GemmDtype::F32);
    let Ok(v) = variant(shape, cfg) else { return f64::INFINITY };
    let plan = SplitPlan::new(shape.k, cfg.split_k);
    let split = cfg.split_k > 1 && plan.is_split() && shape.batch <= 1;
    let (k, batch) = if split { (plan.kc, plan.slices) } else { (shape.k, shape.batch.max(1)) };
    let t = v.tile as usize;
    let (bm, bn, threads) = v.block();
    // Resident blocks per SM from the worker's register counts (else the tile's design).
    let per_sm = match d.gemm_resources_of(v.entry_name().as_str()) {
        Some(r) => occupancy(l, threads, &r, 0).blocks_per_sm.max(1) as usize,
        None => 2 - t.min(1),
    };
    let sms = l.sm_count.max(1) as usize;
    let blocks = shape.m.div_ceil(bm) * shape.n.div_ceil(bn);
    // Blocks of the busiest SM; a split runs its last slice as a launch of its own.
    let q = if split {
        ((batch - 1) * blocks).div_ceil(sms) + blocks.div_ceil(sms)
    } else {
        (blocks * batch).div_ceil(sms)
    }
    .max(1);
    let alone = if q < per_sm.min(2) { ALONE } else { 1.0 };
    let block_flops = 2.0 * (bm * bn) as f64 * k.div_ceil(ffma::BK).max(1) as f64 * ffma::BK as f64;
    let rate = FLOP_PER_CLK * EFFICIENCY[t.min(1)] * alone;
    let clk = q as f64 * (block_flops / rate + BLOCK_CLK[t.min(1)]);
    let t_sm = clk / (d.clock_ghz.max(0.1) * 1e9);
    let (m, n, kk) = (shape.m as f64, shape.n as f64, shape.k as f64);
    let peak = d.peak_gbps.max(1.0) * 1e9;
    let dram =
        shape.batch.max(1) as f64 * 4.0 * (m * kk + kk * n + m * n * if split { plan.slices as f64 } else { 1.0 });
    let mut ms = (t_sm.max(dram / (0.9 * peak)) + LAUNCH_US * 1e-6) * 1e3;
    if split {
        let reduce_bytes = (plan.slices as f64 + 1.0) * m * n * 4.0;
        ms += reduce_bytes / (0.9 * peak) * 1e3 + 2.0 * LAUNCH_US * 1e-3;
    }
    ms
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::tests::{gemm_description, shape};
    use crate::gemm::{candidates, predict_ms as predict};
    use crate::protocol::GemmResourceJson;
    use crate::space::{KernelResources, Param};
    use ferrotune::config::GemmPath;
    use ferrotune::ops::gemm::Layout;

    /// The H100 description with every FFMA entry (128-row tile at 128 registers, the 256-row
    /// at 255, as ptxas builds them).
    fn ffma_description() -> Description {
        let mut d = gemm_description();
        for v in GemmVariant::all().filter(|v| v.math == Math::Ffma) {
            let registers = if v.tile == 0 { 128 } else { 255 };
            let r = KernelResources { registers, max_threads: 256, ..KernelResources::default() };
            d.gemm_resources.push(GemmResourceJson { kernel: v.entry_name().as_str().into(), resources: r });
        }
        d
    }

    fn tiles_points(d: &Description, s: &GemmShape) -> Vec<GemmConfig> {
        let (cands, _) = candidates(d, s, GemmConfig::DEFAULT);
        cands.into_iter().filter(|c| c.path == GemmPath::Mma).collect()
    }

    #[test]
    fn exact_f32_points_are_the_ffma_tiles_and_their_splits() {
        let d = ffma_description();
        let s = shape(GemmDtype::F32, 4096, 4096, 4096);
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        let tiles: Vec<_> = cands.iter().map(|c| (c.path, c.tile, c.split_k)).collect();
        assert_eq!(tiles, vec![(GemmPath::Mma, 0, 1), (GemmPath::Mma, 1, 1)], "no Hopper, small-M or split point");
        // Every other point says why: no exact f32 on Hopper or small-M, no split of a grid
        // that fills two waves.
        assert!(pruned.iter().all(|p| !p.reason.is_empty()));
        assert!(pruned.iter().all(|p| p.point.get(Param::Tile).is_some_and(|t| t < 2)));
        assert!(pruned.iter().any(|p| p.point.get(Param::SplitK) == Some(2) && p.reason.contains("two waves")));
        // Rows not 16-byte aligned: the 128-row tile only, the 256-row pruned with the reason.
        let odd = shape(GemmDtype::F32, 4096, 4096, 4099);
        let (cands, pruned) = candidates(&d, &odd, GemmConfig::DEFAULT);
        assert!(cands.iter().all(|c| c.tile == 0), "{cands:?}");
        assert!(pruned.iter().any(|p| p.point.get(Param::Tile) == Some(1) && p.reason.contains("16-byte")));
        // A few blocks and a long K: the splits are points, on tile 0 only.
        let (cands, pruned) = candidates(&d, &shape(GemmDtype::F32, 512, 512, 16384), GemmConfig::DEFAULT);
        let splits: Vec<_> = cands.iter().filter(|c| c.split_k > 1).map(|c| (c.tile, c.split_k)).collect();
        assert_eq!(splits, vec![(0, 2), (0, 4), (0, 8), (0, 16), (0, 32), (0, 64)]);
        assert!(pruned.iter().any(|p| p.point.get(Param::Tile) == Some(1)
            && p.point.get(Param::SplitK) == Some(2)
            && p.reason.contains("partial products on FFMA tile 0")));
    }

    #[test]
    fn the_model_ranks_the_tiles_as_measured() {
        let d = ffma_description();
        let at = |m, n, k, tile, split_k| {
            let c = GemmConfig { path: GemmPath::Mma, tile, split_k, ..GemmConfig::DEFAULT };
            predict(&d, &shape(GemmDtype::F32, m, n, k), &c)
        };
        // Full waves at a long K: the 256-row tile ahead, by little (3.117 against 3.171 ms).
        let (t0, t1) = (at(4096, 4096, 4096, 0, 1), at(4096, 4096, 4096, 1, 1));
        assert!(t1 < t0 && t0 < 1.08 * t1, "{t0} {t1}");
        assert!((2.9..3.4).contains(&t1), "{t1}");
        // Ragged waves: 3072^3 has 5 blocks of 128 x 128 per SM against 3 of 256 x 128 (6 of
        // work): the 128-row tile ahead (0.851x against 0.729x of cuBLAS on the H200).
        assert!(at(3072, 3072, 3072, 0, 1) < at(3072, 3072, 3072, 1, 1));
        // As much work per SM at K = 2048: a near tie (0.437 against 0.447 ms).
        let (t0, t1) = (at(2048, 2048, 2048, 0, 1), at(2048, 2048, 2048, 1, 1));
        assert!((t0 / t1 - 1.0).abs() < 0.05, "{t0} {t1}");
        // A long K on few blocks: a split fills the SMs (640x640x8192: 0.37 ms on 8 slices
        // against 0.88 unsplit), but not on 192 blocks at K = 700 (0.24 against 0.18 ms: the
        // last slice is a launch of its own).
        assert!(at(640, 640, 8192, 0, 8) < at(640, 640, 8192, 0, 1));
        assert!(at(1000, 3000, 700, 0, 1) < at(1000, 3000, 700, 0, 2));
        // The tiles' order on the measured shapes where quantisation decides.
        assert!(at(1280, 4096, 4096, 0, 1) < at(1280, 4096, 4096, 1, 1));
        assert!(at(6000, 1000, 3500, 0, 1) < at(6000, 1000, 3500, 1, 1));
        assert!(at(2560, 2560, 5000, 1, 1) < at(2560, 2560, 5000, 0, 1));
        // Tile 1 cannot run unaligned rows: priced out.
        assert_eq!(at(4096, 4096, 4099, 1, 1), f64::INFINITY);
    }

    #[test]
    fn every_ffma_entry_a_shape_may_launch_is_listed() {
        let s = GemmShape { b: Layout::Row, ..shape(GemmDtype::F32, 100, 200, 301) };
        let names: Vec<String> = variants(&s).iter().map(|v| v.entry_name().as_str().to_string()).collect();
        assert_eq!(
            names,
            ["ft_gemm_f32_rr_v16_f32_128x128x8", "ft_gemm_f32_rr_v16_f32_256x128x8", "ft_gemm_f32_rr_v4_f32_128x128x8"],
        );
        let tuned = tiles_points(&ffma_description(), &s);
        assert!(tuned.iter().all(|c| c.tile == 0), "K = 301: A's rows are not 16-byte aligned: {tuned:?}");
    }
}
