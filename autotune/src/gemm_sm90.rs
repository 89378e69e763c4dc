//! The Hopper (sm_90a) points of the GEMM space: `Param::Path` 0 is the `mma.sync` tiles,
//! 1 + i the Hopper kernel with `gemm_sm90::TILES[i]`. Why a Hopper point cannot run (pruned
//! with the reason: the host's own eligibility, an entry missing from the loaded PTX, a
//! duplicate of another point), its launch resources, and its cost model.

use ferrotune::config::{GemmConfig, GemmPath};
use ferrotune::ops::gemm_sm90;
use ferrotune_kernels::gemm_sm90::{Sm90Tile, Sm90Variant, TILES};

use crate::protocol::{Description, GemmShape};
use crate::space::{Domain, KernelResources, Limits, Param};

/// The values of `Param::Path`: the `mma.sync` tiles, then every compiled Hopper tile.
pub fn path_values() -> Vec<u64> {
    (0..=TILES.len() as u64).collect()
}

/// The `Param::Path` domain on a device of compute capability 9.0 (the only one that loads the
/// sm_90a module), none elsewhere (the plan decides, and only the tiles can run).
pub fn path_domain(d: &Description) -> Option<Domain> {
    (d.limits.is_some() && d.device.arch == "sm_90").then(|| Domain { param: Param::Path, values: path_values() })
}

/// The path a `Param::Path` value stands for.
pub fn path_of(v: u64) -> GemmPath {
    match v.checked_sub(1) {
        None => GemmPath::Mma,
        Some(t) => GemmPath::Sm90(t as u8),
    }
}

/// The Hopper variant `cfg` runs on `shape` (the worker's buffers are 256-byte aligned), or
/// why it cannot: the host's eligibility (`gemm_sm90::choose` on the device's module), and a
/// point that differs from another only in parameters the Hopper path does not use.
pub fn variant(d: &Description, shape: &GemmShape, cfg: &GemmConfig) -> Result<Sm90Variant, String> {
    let GemmPath::Sm90(t) = cfg.path else { return Err("not a Hopper point".into()) };
    if cfg.split_k > 1 {
        return Err(format!("split_k {}: split-K runs the mma.sync tiles, not the Hopper kernel", cfg.split_k));
    }
    if cfg.tile != 0 {
        return Err(format!(
            "tile {}: the Hopper path does not use the mma.sync tile (tile 0 stands for it)",
            cfg.tile
        ));
    }
    let l = d.limits.ok_or("the Hopper kernel runs on the GPU only")?;
    let dt = shape.dtype.dtype();
    let g = shape.gemm().path(cfg.path);
    let arch = if d.device.arch == "sm_90" { "sm_90a" } else { d.device.arch.as_str() };
    // Tile 1 on a long K with few tiles also splits K (what the call then runs).
    let (v, _split) = gemm_sm90::choose(&g, dt, dt, arch, l.sm_count, *cfg, [256, 256])?;
    if v.tile != t {
        return Err(format!("Hopper tile {t} is overridden (FERROTUNE_SM90_TILE?) by tile {}", v.tile));
    }
    let name = v.entry_name();
    if d.gemm_resources_of(name.as_str()).is_none() {
        return Err(format!("{} is not in the PTX the device loaded (sm_90a only)", name.as_str()));
    }
    Ok(v)
}

/// Launch resources of a Hopper point: registers from the worker's driver, block size and
/// dynamic shared memory from the tile.
pub fn resources(d: &Description, shape: &GemmShape, cfg: &GemmConfig) -> Option<KernelResources> {
    let v = variant(d, shape, cfg).ok()?;
    let mut r = d.gemm_resources_of(v.entry_name().as_str())?;
    r.block_threads = v.tile().threads();
    r.dynamic_shared = v.tile().smem_bytes() as u32;
    Some(r)
}

/// wgmma throughput per SM and clock (FLOP), 16-bit inputs: twice `mma.sync`'s.
const WGMMA_FLOPS_PER_CLK: f64 = 4096.0;
/// The fraction of the wgmma peak the mainloop reaches (tile 0 on bf16 8192³: 697 TFLOP/s of
/// 989, bench/results/hopper-run5/sweep-tile0.txt).
const MAINLOOP_EFFICIENCY: f64 = 0.7;
/// Clocks a tile pays outside its mainloop: the ring fill of a one-block-per-tile launch, the
/// epilogue (overlapped with the other warpgroup's mainloop in the ping-pong form).
const FILL_CLK: f64 = 2000.0;
const EPILOGUE_CLK_PER_OUTPUT: f64 = 0.12;
/// L2-to-SM bandwidth as a multiple of the DRAM peak.
const L2_FACTOR: f64 = 2.5;

/// Predicted time (ms) of a Hopper point: the busiest SM's tiles (wave quantisation: one
/// block per SM; persistent blocks walk the tiles), each a mainloop at the wgmma rate plus the
/// ring fill (per-tile launches) and the epilogue (hidden behind the other warpgroup's
/// mainloop in the ping-pong form), against the L2 traffic of the A and B tiles and the DRAM
/// traffic of the operands and output. Only the ranking matters.
pub fn predict_ms(d: &Description, l: &Limits, shape: &GemmShape, t: &Sm90Tile) -> f64 {
    let elem = shape.dtype.dtype().size_bytes() as f64;
    let (bm, bn) = (t.bm(), t.bn);
    let tiles = (shape.m.div_ceil(bm) * shape.n.div_ceil(bn) * shape.batch.max(1)) as f64;
    let sms = f64::from(l.sm_count.max(1));
    let per_sm = (tiles / sms).ceil();
    let clk = d.clock_ghz.max(0.1) * 1e9;
    let mainloop = 2.0 * (bm * bn * shape.k.max(1)) as f64 / (WGMMA_FLOPS_PER_CLK * MAINLOOP_EFFICIENCY);
    let epilogue = EPILOGUE_CLK_PER_OUTPUT * (bm * bn) as f64;
    let tile_clk = match (t.pingpong(), t.persistent) {
        // One warpgroup's mainloop at a time; each tile's epilogue behind the next mainloop.
        (true, _) => mainloop.max(epilogue),
        (false, true) => mainloop + epilogue,
        (false, false) => mainloop + epilogue + FILL_CLK,
    };
    let compute_s = per_sm * tile_clk / clk;
    let l2_bytes = tiles * (bm + bn) as f64 * shape.k as f64 * elem;
    let dram_bytes = ((shape.m + shape.n) * shape.k + 2 * shape.m * shape.n) as f64 * elem * shape.batch.max(1) as f64;
    let peak = d.peak_gbps.max(1.0) * 1e9;
    let memory_s = (l2_bytes / (L2_FACTOR * peak)).max(dram_bytes / peak);
    compute_s.max(memory_s) * 1e3 + 0.004
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::gemm::tests::{gemm_description, shape};
    use crate::gemm::{candidates, predict_ms};
    use crate::protocol::{GemmDtype, GemmResourceJson};
    use ferrotune::ops::gemm::Layout;

    /// The H100 description with the Hopper entries the sm_90a module has (168 registers at
    /// the 384-thread launch bound, as ptxas reports them).
    pub(crate) fn hopper_description() -> Description {
        let mut d = gemm_description();
        for v in Sm90Variant::all() {
            let r = KernelResources { registers: 168, max_threads: 384, ..KernelResources::default() };
            d.gemm_resources.push(GemmResourceJson { kernel: v.entry_name().as_str().into(), resources: r });
        }
        d
    }

    fn hopper_points(cands: &[GemmConfig]) -> Vec<u8> {
        cands.iter().filter_map(|c| if let GemmPath::Sm90(t) = c.path { Some(t) } else { None }).collect()
    }

    #[test]
    fn hopper_tiles_are_points_where_the_call_can_take_them_and_pruned_with_reasons_elsewhere() {
        let d = hopper_description();
        let s = shape(GemmDtype::Bf16, 8192, 3072, 768);
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        // Every Hopper tile once (tile 0, no split: the other values repeat it and say so).
        assert_eq!(hopper_points(&cands), (0..TILES.len() as u8).collect::<Vec<_>>());
        assert!(cands.iter().filter(|c| c.path != GemmPath::Mma).all(|c| c.tile == 0 && c.split_k == 1));
        let repeat = pruned.iter().filter(|p| p.point.get(Param::Path) == Some(1)).count();
        assert!(repeat > 0);
        assert!(
            pruned
                .iter()
                .filter(|p| p.point.get(Param::Path) == Some(1))
                .all(|p| p.reason.contains("tile 0 stands") || p.reason.contains("split-K runs")),
            "{pruned:?}"
        );
        // The model prices them; the wgmma rate puts the big Hopper tile ahead of every mma tile.
        let t = |c: &GemmConfig| predict_ms(&d, &s, c);
        let big = GemmConfig { path: GemmPath::Sm90(0), ..GemmConfig::DEFAULT };
        assert!(t(&big).is_finite());
        let mma_best = cands.iter().filter(|c| c.path == GemmPath::Mma).map(t).fold(f64::INFINITY, f64::min);
        assert!(t(&big) < mma_best, "{} vs {mma_best}", t(&big));
        // The ping-pong form hides the epilogue: for a short K it beats the same-size
        // per-tile launch in the model.
        let pp = TILES.iter().position(|x| x.pingpong() && x.bn == 256).unwrap() as u8;
        assert!(t(&GemmConfig { path: GemmPath::Sm90(pp), ..GemmConfig::DEFAULT }).is_finite());

        // Calls the Hopper path cannot take: every Hopper point pruned, with the host's reason.
        let cases = [
            (shape(GemmDtype::Tf32, 1000, 3000, 701), "TMA cannot load"),
            (GemmShape { a: Layout::Col, ..shape(GemmDtype::Bf16, 1024, 1024, 1024) }, "layout"),
            (shape(GemmDtype::Bf16, 1000, 3000, 700), "TMA cannot load"),
        ];
        for (s, why) in cases {
            let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
            assert!(hopper_points(&cands).is_empty(), "{s:?}: {cands:?}");
            let own =
                pruned.iter().filter(|p| p.point.get(Param::Path) == Some(1) && p.point.get(Param::Tile) == Some(0));
            assert!(own.clone().any(|p| p.reason.contains(why)), "{s:?}: {:?}", own.collect::<Vec<_>>());
        }
        // TF32: the tiles compiled for it are points, the others pruned with the reason.
        let (cands, pruned) = candidates(&d, &shape(GemmDtype::Tf32, 1024, 1024, 1024), GemmConfig::DEFAULT);
        assert_eq!(hopper_points(&cands), ferrotune_kernels::gemm_sm90::TF32_TILES.to_vec());
        assert!(
            pruned.iter().any(|p| p.point.get(Param::Path) == Some(3) && p.reason.contains("not compiled for tf32"))
        );
        // A device without the sm_90a module (compute capability 8.0): no Path domain at all.
        let mut a100 = gemm_description();
        a100.device.arch = "sm_80".into();
        let (cands, pruned) = candidates(&a100, &s, GemmConfig::DEFAULT);
        assert!(cands.iter().all(|c| c.path == GemmPath::Auto));
        assert!(pruned.iter().all(|p| p.point.get(Param::Path).is_none()));
    }

    #[test]
    fn path_values_cover_the_mma_tiles_and_every_hopper_tile() {
        let v = path_values();
        assert_eq!(v.len(), TILES.len() + 1);
        assert_eq!(path_of(0), GemmPath::Mma);
        for (i, &x) in v.iter().enumerate().skip(1) {
            assert_eq!(path_of(x), GemmPath::Sm90(i as u8 - 1));
        }
    }
}
