//! The Hopper (sm_90a) points of the GEMM space: `Param::Path` 0 is the `mma.sync` tiles,
//! 1 + i the Hopper kernel with `gemm_sm90::TILES[i]` (then the small-M family,
//! `gemm_small_m::PATH_VALUE`); on a tile that splits K, `Param::SplitK` above 1 is the
//! kernel's own split (1: the plan's). Why a Hopper point cannot run or pay (pruned with the
//! reason: the host's own eligibility, an entry missing from the loaded PTX, a duplicate of
//! another point, a split K cannot make or that repeats the plan's), its launch resources,
//! and its cost model.

use ferrotune::config::{GemmConfig, GemmPath};
use ferrotune::ops::gemm_sm90;
use ferrotune_kernels::gemm_sm90::{Sm90Variant, TILES};
use ferrotune_kernels::gemm_sm90_split::Sm90Split;

use crate::protocol::{Description, GemmShape};
use crate::space::{Domain, KernelResources, Limits, Param};

/// The values of `Param::Path`: the `mma.sync` tiles, then every compiled Hopper tile, then
/// the small-M family.
pub fn path_values() -> Vec<u64> {
    (0..=crate::gemm_small_m::PATH_VALUE).collect()
}

/// The `Param::Path` domain on a GPU: the Hopper tiles on compute capability 9.0 (the only
/// one that loads the sm_90a module), the tiles and the small-M family everywhere.
pub fn path_domain(d: &Description) -> Option<Domain> {
    d.limits?;
    let values = if d.device.arch == "sm_90" { path_values() } else { vec![0, crate::gemm_small_m::PATH_VALUE] };
    Some(Domain { param: Param::Path, values })
}

/// The path a `Param::Path` value stands for.
pub fn path_of(v: u64) -> GemmPath {
    match v.checked_sub(1) {
        None => GemmPath::Mma,
        _ if v == crate::gemm_small_m::PATH_VALUE => GemmPath::SmallM,
        Some(t) => GemmPath::Sm90(t as u8),
    }
}

/// The least k-tiles per slice a tuned Hopper split is tried with.
pub const MIN_TUNED_KT: usize = 4;

/// The Hopper variant `cfg` runs on `shape` (the worker's buffers are 256-byte aligned), or
/// why it cannot: the host's eligibility (`gemm_sm90::choose` on the device's module), and a
/// point that differs from another only in parameters the Hopper path does not use.
pub fn variant(d: &Description, shape: &GemmShape, cfg: &GemmConfig) -> Result<Sm90Variant, String> {
    let GemmPath::Sm90(t) = cfg.path else { return Err("not a Hopper point".into()) };
    if cfg.tile != 0 {
        return Err(format!(
            "tile {}: the Hopper path does not use the mma.sync tile (tile 0 stands for it)",
            cfg.tile
        ));
    }
    let l = d.limits.ok_or("the Hopper kernel runs on the GPU only")?;
    let dt = shape.dtype.dtype();
    // The config, not a forced path: what a profile entry with it runs.
    let g = crate::gemm_pack::planned_gemm(shape, cfg);
    let arch = if d.device.arch == "sm_90" { "sm_90a" } else { d.device.arch.as_str() };
    // With split_k 1 a tile that splits K takes the plan's own split (what the call then runs).
    let (v, split) = gemm_sm90::choose(&g, dt, dt, arch, l.sm_count, *cfg, [256, 256])?;
    if cfg.split_k > 1 {
        split_pruned(&g, l.sm_count, t, cfg.split_k, split, dt)?;
    }
    if v.tile != t {
        return Err(format!("Hopper tile {t} is overridden (FERROTUNE_SM90_TILE?) by tile {}", v.tile));
    }
    let name = v.entry_name();
    if d.gemm_resources_of(name.as_str()).is_none() {
        return Err(format!("{} is not in the PTX the device loaded (sm_90a only)", name.as_str()));
    }
    Ok(v)
}

/// Why the tuned split `s` of Hopper tile `t` on `g` (which `choose` cut as `split`) is not
/// worth measuring, if it is not: K too short for `s` slices (or slices under
/// [`MIN_TUNED_KT`] k-tiles), tiles that already fill half the block slots, or the same cut
/// as the plan's own split (the point with `split_k` 1 measures that).
fn split_pruned(
    g: &ferrotune::ops::gemm::Gemm,
    sms: u32,
    t: u8,
    s: usize,
    split: Sm90Split,
    dt: ferrotune::DType,
) -> Result<(), String> {
    if g.batch > 1 {
        return Err(format!("split_k {s}: the Hopper split runs single matrices only (batch {})", g.batch));
    }
    let tile = TILES[t as usize];
    let ktiles = g.k.div_ceil(tile.bk(dt.size_bytes()));
    if split.slices != s {
        return Err(format!("split_k {s}: K = {} ({ktiles} k-tiles) makes only {} Hopper slices", g.k, split.slices));
    }
    if split.kt_per < MIN_TUNED_KT {
        return Err(format!("split_k {s}: Hopper slices of {} k-tiles are under {MIN_TUNED_KT}", split.kt_per));
    }
    let tiles = g.m.div_ceil(tile.bm()) * g.n.div_ceil(tile.bn);
    let slots = sms.max(1) as usize * tile.blocks_per_sm();
    if 2 * tiles > slots {
        return Err(format!("split_k {s}: {tiles} Hopper tiles already fill half of {slots} block slots"));
    }
    let own = gemm_sm90::split_for(g, sms, t, dt);
    if own == split {
        return Err(format!("split_k {s}: the plan's own split of this tile (the split_k 1 point measures it)"));
    }
    Ok(())
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

/// Clocks of one level of the in-kernel join tree (a fenced partial store, a counter atomic,
/// the sibling's partial read back).
const JOIN_CLK: f64 = 1500.0;

/// Predicted time (ms) of a Hopper point: the busiest SM's tiles (wave quantisation: one
/// block per SM; persistent blocks walk the tiles), each a mainloop at the wgmma rate plus the
/// ring fill (per-tile launches) and the epilogue (hidden behind the other warpgroup's
/// mainloop in the ping-pong form), against the L2 traffic of the A and B tiles (B's shared by
/// a cluster's blocks) and the DRAM
/// traffic of the operands and output. A K split (`split_k` above 1, else the plan's own on a
/// tile that splits) multiplies the blocks, divides the mainloop, and adds the join tree's
/// levels and the f32 partials' L2 traffic. Only the ranking matters.
pub fn predict_ms(d: &Description, l: &Limits, shape: &GemmShape, tile: u8, split_k: usize) -> f64 {
    let Some(t) = TILES.get(tile as usize) else { return f64::INFINITY };
    let elem = shape.dtype.dtype().size_bytes() as f64;
    let (bm, bn) = (t.bm(), t.bn);
    let ktiles = shape.k.div_ceil(t.bk(shape.dtype.dtype().size_bytes()));
    let split = match split_k {
        s if s > 1 && t.splits_k() => Sm90Split::new(ktiles, s),
        _ if t.splits_k() && shape.batch <= 1 => {
            gemm_sm90::split_for(&shape.gemm(), l.sm_count, tile, shape.dtype.dtype())
        }
        _ => Sm90Split::NONE,
    };
    let slices = split.slices as f64;
    let tiles = (shape.m.div_ceil(bm) * shape.n.div_ceil(bn) * shape.batch.max(1)) as f64;
    let sms = f64::from(l.sm_count.max(1));
    let per_sm = (tiles * slices / sms).ceil();
    let clk = d.clock_ghz.max(0.1) * 1e9;
    let k_slice = if split.is_split() { split.kt_per * t.bk(2) } else { shape.k.max(1) };
    let join = if split.is_split() { JOIN_CLK * slices.log2().ceil() } else { 0.0 };
    let mainloop = 2.0 * (bm * bn * k_slice) as f64 / (WGMMA_FLOPS_PER_CLK * MAINLOOP_EFFICIENCY) + join;
    let epilogue = EPILOGUE_CLK_PER_OUTPUT * (bm * bn) as f64;
    let tile_clk = match (t.pingpong(), t.persistent) {
        // One warpgroup's mainloop at a time; each tile's epilogue behind the next mainloop.
        (true, _) => mainloop.max(epilogue),
        (false, true) => mainloop + epilogue,
        (false, false) => mainloop + epilogue + FILL_CLK,
    };
    let compute_s = per_sm * tile_clk / clk;
    let partials = if split.is_split() { 2.0 * slices * tiles * (bm * bn) as f64 * 4.0 } else { 0.0 };
    // A cluster's blocks read B once between them (multicast).
    let l2_bytes = tiles * (bm + bn / t.cluster) as f64 * shape.k as f64 * elem + partials;
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
        let whys = ["tile 0 stands", "does not split K", "already fill half", "under 4", "makes only"];
        let odd = pruned
            .iter()
            .filter(|p| p.point.get(Param::Path).is_some_and(|v| (1..crate::gemm_small_m::PATH_VALUE).contains(&v)))
            .find(|p| !whys.iter().any(|w| p.reason.contains(w)));
        assert!(odd.is_none(), "{odd:?}");
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

        // Calls the Hopper path cannot take: every Hopper point pruned, with the host's reason
        // (unaligned rows: unless packed first, which gives TMA 16-byte rows).
        let cases = [
            (shape(GemmDtype::Tf32, 1000, 3000, 701), "TMA cannot load"),
            (GemmShape { a: Layout::Col, ..shape(GemmDtype::Bf16, 1024, 1024, 1024) }, "layout"),
            (shape(GemmDtype::Bf16, 1000, 3000, 700), "TMA cannot load"),
        ];
        for (s, why) in cases {
            let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
            let given: Vec<_> = cands.into_iter().filter(|c| c.pack != ferrotune::config::PackChoice::On).collect();
            assert!(hopper_points(&given).is_empty(), "{s:?}: {given:?}");
            let own = pruned.iter().filter(|p| {
                p.point.get(Param::Path) == Some(1)
                    && p.point.get(Param::Tile) == Some(0)
                    && p.point.get(Param::Pack) != Some(1)
            });
            assert!(own.clone().any(|p| p.reason.contains(why)), "{s:?}: {:?}", own.collect::<Vec<_>>());
        }
        // TF32: the tiles compiled for it are points, the others pruned with the reason.
        let (cands, pruned) = candidates(&d, &shape(GemmDtype::Tf32, 1024, 1024, 1024), GemmConfig::DEFAULT);
        let mut tiles = hopper_points(&cands);
        tiles.dedup(); // a tile that splits K is a point per split
        assert_eq!(tiles, ferrotune_kernels::gemm_sm90::TF32_TILES.to_vec());
        assert!(
            pruned.iter().any(|p| p.point.get(Param::Path) == Some(3) && p.reason.contains("not compiled for tf32"))
        );
        // A device without the sm_90a module (compute capability 8.0): no Path domain at all.
        let mut a100 = gemm_description();
        a100.device.arch = "sm_80".into();
        // A device without the sm_90a module: the tiles and the small-M family only.
        let (cands, pruned) = candidates(&a100, &s, GemmConfig::DEFAULT);
        assert!(cands.iter().all(|c| c.path == GemmPath::Mma));
        assert!(
            pruned.iter().all(|p| matches!(p.point.get(Param::Path), Some(0) | Some(crate::gemm_small_m::PATH_VALUE)))
        );
    }

    /// bf16 256 x 256 x 65536: the 64 x 128 tile's own split, and the other cuts of K as points.
    #[test]
    fn hopper_k_splits_are_points_on_the_tiles_that_split_and_pruned_with_reasons() {
        let d = hopper_description();
        let s = shape(GemmDtype::Bf16, 256, 256, 65536);
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        let split_tiles: Vec<u8> = (0..TILES.len() as u8).filter(|&t| TILES[t as usize].splits_k()).collect();
        for &t in &split_tiles {
            let splits: Vec<usize> = cands.iter().filter(|c| c.path == GemmPath::Sm90(t)).map(|c| c.split_k).collect();
            assert!(splits.contains(&1) && splits.iter().any(|&x| x > 1), "tile {t}: {splits:?}");
            // The plan's own split is measured once (split_k 1), never again under its count.
            let g = s.gemm();
            let own = gemm_sm90::split_for(&g, 132, t, ferrotune::DType::Bf16).slices;
            assert!(!splits.contains(&own) || own == 1, "tile {t}: {own} in {splits:?}");
        }
        let whys = |p: &&crate::space::Pruned| p.reason.contains("plan's own split");
        assert!(pruned.iter().any(|p| whys(&p)), "the plan's own cut is pruned as a repeat");
        // Tiles that do not split: every split_k above 1 pruned, saying so.
        let nosplit = (0..TILES.len() as u64).find(|&t| !TILES[t as usize].splits_k()).unwrap() + 1;
        let p =
            pruned.iter().find(|p| p.point.get(Param::Path) == Some(nosplit) && p.point.get(Param::SplitK) == Some(2));
        assert!(p.unwrap().reason.contains("does not split K"));
        // The model: the split cuts the long mainloop; the persistent 128 x 256 (tile 8, which
        // never splits: two tiles of the whole K) is slower than the 128 x 128 split.
        let t = |split_k| predict_ms(&d, &s, &GemmConfig { path: GemmPath::Sm90(1), split_k, ..GemmConfig::DEFAULT });
        assert!(!TILES[8].splits_k());
        let unsplit_like = predict_ms(&d, &s, &GemmConfig { path: GemmPath::Sm90(8), ..GemmConfig::DEFAULT });
        assert!(t(16) < unsplit_like && t(32) < unsplit_like, "{} {} {unsplit_like}", t(16), t(32));
    }

    #[test]
    fn path_values_cover_the_mma_tiles_and_every_hopper_tile() {
        let v = path_values();
        assert_eq!(v.len(), TILES.len() + 2);
        assert_eq!(path_of(0), GemmPath::Mma);
        for (i, &x) in v.iter().enumerate().skip(1).take(TILES.len()) {
            assert_eq!(path_of(x), GemmPath::Sm90(i as u8 - 1));
        }
        assert_eq!(path_of(crate::gemm_small_m::PATH_VALUE), GemmPath::SmallM);
    }
}
