//! The GEMM family's search space and cost model. On the GPU the space is exactly the compiled
//! tensor-core tiles (`tc::TILES`, so adding a tile to kernels-gpu makes it tunable) times the
//! split-K factors of `SPLIT_K`, pruned by the host (tiles other than 0 need 16-byte
//! aligned operands, `tc::NARROW_TILES` 8-byte; split-K needs a single matrix, slices of at
//! least 256 of K, and an f32-output variant of the tile, which 16-bit inputs only have for
//! tile 0), by what cannot pay (splitting a grid that already fills two waves) and by the
//! device (dynamic shared
//! memory against the opt-in limit, threads against the function's register limit, at least one
//! resident block). `Param::Path` picks the family on every GPU: the tiles, the Hopper tiles
//! (`gemm_sm90.rs`, with their in-kernel K split) and the small-M family (`gemm_small_m.rs`,
//! `SplitK` its K split); `Param::Pack` packing unaligned operands (`gemm_pack.rs`). Exact f32
//! (`GemmDtype::F32`) takes the FFMA tiles as `Tile` instead (`gemm_ffma.rs`). On the CPU
//! the space is the rows per rayon task. The model ranks candidates for the model-guided
//! strategy.

use ferrotune::config::{GemmConfig, GemmPath};
use ferrotune::ops::gemm::{Layout, SplitPlan, split_launches, variant_for};
use ferrotune_kernels::gemm::GemmVariant;
use ferrotune_kernels::gemm::tc::{TILES, Tile};

pub use crate::gemm_splitk::{MMA_SPLIT_MAX, split_pruned};
use crate::protocol::{Description, GemmDtype, GemmShape};
use crate::space::{Constraint, Context, Domain, KernelResources, Limits, Param, Point, Pruned, Space, occupancy};

/// Rows of output per rayon task tried on the CPU: each task is one packed SGEMM on its band
/// (B is packed once per band), so the band height trades parallelism against repacking.
/// Powers of two (bands below the micro-kernel's 8 rows waste part of each tile, but they
/// still split differently); values past M are pruned (one band).
pub const CPU_ROWS: [u64; 13] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];

/// Split-K factors tried on the GPU (the `mma.sync` split-K up to [`MMA_SPLIT_MAX`]; the
/// Hopper and small-M in-kernel splits up to 64).
pub const SPLIT_K: [u64; 7] = [1, 2, 4, 8, 16, 32, 64];

/// The space of `shape` on the machine `d` describes.
pub fn space(d: &Description, shape: &GemmShape) -> Space {
    if d.limits.is_none() {
        // No more rows per task than the matrix has (rounded up to a power of two).
        let top = (shape.m.max(1) as u64).next_power_of_two();
        let values = CPU_ROWS.iter().copied().filter(|&r| r <= top).collect();
        return Space {
            domains: vec![Domain { param: Param::CpuRows, values }],
            constraints: vec![Constraint::AtLeast { param: Param::CpuRows, min: 1 }, Constraint::HostAccepts],
        };
    }
    Space {
        domains: [crate::gemm_sm90::path_domain(d), crate::gemm_pack::pack_domain(shape)]
            .into_iter()
            .flatten()
            .chain([
                Domain { param: Param::Tile, values: tile_values(shape) },
                Domain { param: Param::SplitK, values: SPLIT_K.to_vec() },
            ])
            .collect(),
        constraints: vec![
            Constraint::HostAccepts,
            Constraint::SharedMemory { dynamic_per_block: 0 },
            Constraint::RegisterLimit,
            Constraint::MinResidentBlocks { min: 1 },
        ],
    }
}

/// The `Param::Tile` values of `shape`: the FFMA tiles for exact f32, else the tensor-core ones.
fn tile_values(shape: &GemmShape) -> Vec<u64> {
    match shape.dtype {
        GemmDtype::F32 => crate::gemm_ffma::tiles(),
        _ => (0..TILES.len() as u64).collect(),
    }
}

/// The config a point stands for (parameters the point lacks keep `base`'s values).
pub fn to_config(p: &Point, base: GemmConfig) -> GemmConfig {
    let mut c = base;
    if let Some(t) = p.get(Param::Tile) {
        c.tile = t as usize;
    }
    if let Some(r) = p.get(Param::CpuRows) {
        c.cpu_rows = r as usize;
    }
    if let Some(s) = p.get(Param::SplitK) {
        c.split_k = s as usize;
    }
    if let Some(v) = p.get(Param::Path) {
        c.path = crate::gemm_sm90::path_of(v);
    }
    if let Some(v) = p.get(Param::Pack) {
        c.pack = crate::gemm_pack::pack_of(v);
    }
    c
}

/// The compiled variant `cfg` launches for `shape` (the worker's buffers start 256-byte
/// aligned; packed where `cfg` packs) — with split-K, that of the partial products — or the
/// host's reason it cannot.
pub fn variant(shape: &GemmShape, cfg: &GemmConfig) -> Result<GemmVariant, String> {
    if shape.dtype == GemmDtype::F32 {
        return crate::gemm_ffma::variant(shape, cfg);
    }
    let dt = shape.dtype.dtype();
    let g = crate::gemm_pack::planned_gemm(shape, cfg).tile(cfg.tile);
    let plan = SplitPlan::new(shape.k, cfg.split_k);
    if cfg.split_k > 1 && plan.is_split() && shape.batch <= 1 {
        return split_launches(&g, dt, plan, 256, 256, *cfg).map(|l| l.v_part).map_err(|e| e.to_string());
    }
    variant_for(&g, dt, dt, 256, 256).map_err(|e| e.to_string())
}

/// What the kernel of `cfg` needs per launch: registers and limits from the worker's driver,
/// block size and dynamic shared memory from the variant itself.
pub fn resources(d: &Description, shape: &GemmShape, cfg: &GemmConfig) -> Option<KernelResources> {
    match cfg.path {
        GemmPath::Sm90(_) => return crate::gemm_sm90::resources(d, shape, cfg),
        GemmPath::SmallM => {
            let g = crate::gemm_pack::planned_gemm(shape, cfg);
            return crate::gemm_small_m::resources(d, &g, shape.dtype.dtype(), cfg);
        }
        _ => {}
    }
    let v = variant(shape, cfg).ok()?;
    let mut r = d.gemm_resources_of(v.entry_name().as_str())?;
    r.block_threads = v.block().2;
    r.dynamic_shared = v.smem_bytes() as u32;
    Some(r)
}

/// The candidates to measure and the pruned points (with reasons), as configs.
pub fn candidates(d: &Description, shape: &GemmShape, base: GemmConfig) -> (Vec<GemmConfig>, Vec<Pruned>) {
    let res = |p: &Point| resources(d, shape, &to_config(p, base));
    let gpu = d.limits.is_some();
    let host = |p: &Point| {
        let c = to_config(p, base);
        c.validate().map_err(|e| e.to_string())?;
        if matches!(c.path, GemmPath::Sm90(_)) {
            return crate::gemm_sm90::variant(d, shape, &c).map(|_| ());
        }
        if c.path == GemmPath::SmallM {
            let (g, dt, sms) =
                (crate::gemm_pack::planned_gemm(shape, &c), shape.dtype.dtype(), d.limits.map_or(1, |l| l.sm_count));
            return crate::gemm_small_m::pruned(d, &g, dt, &c, sms).map_or(Ok(()), Err);
        }
        if let Some(why) = d.limits.and_then(|l| split_pruned(shape, c.tile, c.split_k, l.sm_count)) {
            return Err(why);
        }
        if gpu {
            let v = variant(shape, &c)?;
            let name = v.entry_name();
            if d.gemm_resources_of(name.as_str()).is_none() {
                return Err(format!("{} is not in the PTX the device loaded", name.as_str()));
            }
        }
        Ok(())
    };
    let ctx = Context { limits: d.limits, resources: &res, host: &host };
    let (keep, pruned) = space(d, shape).solve(&ctx);
    let mut out: Vec<GemmConfig> = Vec::with_capacity(keep.len());
    for c in keep.iter().map(|p| to_config(p, base)) {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    (out, pruned)
}

/// Tensor-core `mma.sync` throughput per SM and clock (FLOP), 16-bit inputs: 1024 FMA on
/// sm_80 and sm_90 (Hopper's legacy path; its `wgmma` peak is about twice that), half on the
/// consumer parts. TF32 runs at half the 16-bit rate.
fn mma_flops_per_clk(arch: &str, dtype: GemmDtype) -> f64 {
    let half = match arch {
        "sm_80" | "sm_90" | "sm_100" => 2048.0,
        _ => 1024.0,
    };
    if dtype == GemmDtype::Tf32 { half / 2.0 } else { half }
}

/// Shared-memory bandwidth per SM and clock.
const SMEM_BYTES_PER_CLK: f64 = 128.0;
/// The fraction of the per-SM bound (tensor pipes and shared memory together) our `mma.sync`
/// kernels reach in steady state: 212 TFLOP/s for tile 0 on bf16 4096³ on the H100
/// (bench/results), against a bound of about 380.
const KERNEL_EFFICIENCY: f64 = 0.55;
/// L2-to-SM bandwidth as a multiple of the DRAM peak.
const L2_BANDWIDTH_FACTOR: f64 = 2.0;
/// Clocks a round of resident blocks spends filling its `cp.async` ring and writing its tile.
const PROLOGUE_CLK: f64 = 1500.0;
/// Clocks of one K step's barrier and ring wait that no other resident block covers. Set from
/// the H100 sweep (bench/results/tune-gemm): 128x256 tiles with 128 bytes of K per stage run
/// 1.3x faster than the same tile with 64 bytes, which only this term tells apart.
const SYNC_CLK: f64 = 300.0;
/// Local memory per thread that is a call frame (the out-of-line epilogue's arguments), not
/// spilling inside the main loop.
const FRAME_BYTES: u32 = 128;
/// A launch with nothing to do.
const LAUNCH_US: f64 = 4.0;

/// Bytes of shared-memory traffic per FLOP of a tile: `ldmatrix` reads of each warp's
/// `WM x WN` tile ((WM + WN) elements per K for 2 WM WN FLOP) plus the ring writes of the
/// block's `BM x BN` tile ((BM + BN) per K). The second term is the block's arithmetic
/// intensity `BM BN / (BM + BN)` upside down.
fn smem_bytes_per_flop(t: &Tile, elem: f64) -> f64 {
    let (wm, wn) = ((t.mt * 16) as f64, (t.nt * 8) as f64);
    let (bm, bn) = (t.bm() as f64, t.bn() as f64);
    elem * (wm + wn) / (2.0 * wm * wn) + elem * (bm + bn) / (2.0 * bm * bn)
}

/// A smooth minimum of two rates (both pipes busy, imperfect overlap).
fn soft_min(a: f64, b: f64) -> f64 {
    (a.powi(-3) + b.powi(-3)).powf(-1.0 / 3.0)
}

/// The steady-state FLOP per clock of one SM running `resident` blocks of tile `t`.
fn sm_rate(d: &Description, dtype: GemmDtype, t: &Tile, r: &KernelResources, resident: f64) -> f64 {
    let elem = dtype.dtype().size_bytes() as f64;
    let bound = soft_min(mma_flops_per_clk(&d.device.arch, dtype), SMEM_BYTES_PER_CLK / smem_bytes_per_flop(t, elem));
    // Few warps per scheduler expose ldmatrix -> mma latencies.
    let warps_per_scheduler = resident * (t.wm * t.wn) as f64 / 4.0;
    let latency = 1.0 - 0.25 / warps_per_scheduler.max(0.25);
    // Each K step ends in a barrier; other resident blocks fill that bubble.
    let step_clk = 2.0 * (t.bm() * t.bn() * t.bk(elem as usize)) as f64 * resident / bound;
    let sync = step_clk / (step_clk + SYNC_CLK);
    // Local memory (spills, stack) goes through L1 with every access.
    let spill = 1.0 / (1.0 + f64::from(r.local_bytes.saturating_sub(FRAME_BYTES)) / 256.0);
    bound * KERNEL_EFFICIENCY * latency.max(0.05) * sync * spill
}

/// Resources assumed where the worker gave none (tests, or a kernel the driver did not report):
/// registers from the accumulators and fragments of a warp's tile.
fn estimated_resources(t: &Tile) -> KernelResources {
    let registers = (40 + t.mt * t.nt * 4 + t.mt * 4 + t.nt * 2).min(255) as u32;
    KernelResources { registers, max_threads: 1024, ..KernelResources::default() }
}

/// Predicted time (ms) of `cfg` on `shape`: the busiest SM's work (its share of the grid's
/// blocks, padded tiles included, at the per-SM rate its resident blocks reach: tensor pipes vs
/// shared-memory traffic from the warp and block tiles, latency, barriers, spills) plus a ring
/// fill per round of resident blocks — so wave quantisation and idle SMs show — against the L2
/// and DRAM traffic of the tiles, plus launch overhead. Only the ranking matters.
///
/// Split-K: the partial products as a batch of `slices` GEMMs of `kc` (on the tile that runs
/// them: tile 0 for 16-bit inputs) writing f32, plus the second GEMM launch, plus the reduce:
/// the workspace read once more (it was written by the GEMMs, f32 instead of the output type),
/// D written (and C read) at DRAM speed, and its launch.
pub fn predict_ms(d: &Description, shape: &GemmShape, cfg: &GemmConfig) -> f64 {
    let Some(l) = d.limits else { return predict_cpu_ms(d, shape, cfg) };
    // `path` auto (the untuned plan): priced as the point it resolves to.
    if let Some(c) = crate::gemm_auto::resolved(d, shape, cfg) {
        return predict_ms(d, shape, &c);
    }
    if cfg.pack == ferrotune::config::PackChoice::On && crate::gemm_pack::pack_domain(shape).is_some() {
        let rest = GemmConfig { pack: ferrotune::config::PackChoice::Off, ..*cfg };
        return crate::gemm_pack::pack_ms(d, shape) + predict_ms(d, &crate::gemm_pack::packed_shape(shape), &rest);
    }
    if cfg.path == GemmPath::SmallM {
        return crate::gemm_small_m::predict_ms(d, &l, shape, cfg);
    }
    if let GemmPath::Sm90(t) = cfg.path {
        return crate::gemm_sm90::predict_ms(d, &l, shape, t, cfg.split_k);
    }
    if shape.dtype == GemmDtype::F32 {
        return crate::gemm_ffma::predict_ms(d, &l, shape, cfg);
    }
    let plan = SplitPlan::new(shape.k, cfg.split_k);
    let split = cfg.split_k > 1 && plan.is_split() && shape.batch <= 1;
    let tile = if split && shape.dtype != GemmDtype::Tf32 { 0 } else { cfg.tile };
    let Some(t) = TILES.get(tile) else { return f64::INFINITY };
    let elem = shape.dtype.dtype().size_bytes();
    let mut r = resources(d, shape, cfg).unwrap_or_else(|| estimated_resources(t));
    if r.block_threads == 0 {
        r.block_threads = t.threads();
        r.dynamic_shared = t.smem_bytes(elem, shape.a == Layout::Row, shape.b == Layout::Col) as u32;
    }
    // Narrower copies move the same tile in more instructions (2-byte loads: the H100 ran
    // bf16 4097x1023x777 at a fifth of the aligned rate, bench/results/irregular/).
    let slow = match variant(shape, cfg).map_or(16, |v| v.align) {
        16 => 1.0,
        8 => 1.3,
        4 => 2.0,
        _ => 4.0,
    };
    if !split {
        return gpu_time_ms(d, &l, shape, t, &r, elem, slow);
    }
    let parts = GemmShape { k: plan.kc, batch: plan.slices, ..*shape };
    let gemms = gpu_time_ms(d, &l, &parts, t, &r, 4, slow);
    let mn = (shape.m * shape.n) as f64;
    let reduce_bytes = plan.slices as f64 * mn * 4.0 + mn * elem as f64;
    let reduce_ms = reduce_bytes / (0.9 * d.peak_gbps.max(1.0) * 1e9) * 1e3;
    gemms + reduce_ms + 2.0 * LAUNCH_US * 1e-3
}

/// `out_elem`: bytes per element of D as the kernel writes it (f32 for split-K's partials);
/// `slow`: how much longer the SMs take for narrower loads than 16 bytes.
fn gpu_time_ms(
    d: &Description,
    l: &Limits,
    shape: &GemmShape,
    t: &Tile,
    r: &KernelResources,
    out_elem: usize,
    slow: f64,
) -> f64 {
    let elem = shape.dtype.dtype().size_bytes();
    let (bm, bn, bk) = (t.bm(), t.bn(), t.bk(elem));
    let occ = occupancy(l, r.block_threads, r, u64::from(r.dynamic_shared));
    let per_sm = f64::from(occ.blocks_per_sm.max(1));
    let sms = f64::from(l.sm_count.max(1));
    let tiles_per_batch = (shape.m.div_ceil(bm) * shape.n.div_ceil(bn)) as f64;
    let blocks = tiles_per_batch * shape.batch.max(1) as f64;
    let k_pad = (shape.k.div_ceil(bk) * bk) as f64;
    let block_flops = 2.0 * (bm * bn) as f64 * k_pad;
    // The busiest SM: its blocks, at the rate of as many as can be resident together.
    let q = (blocks / sms).ceil().max(1.0);
    let resident = q.min(per_sm);
    let rounds = (q / resident).ceil();
    let clk = q * block_flops / sm_rate(d, shape.dtype, t, r, resident) + rounds * PROLOGUE_CLK;
    let t_sm = slow * clk / (d.clock_ghz.max(0.1) * 1e9);
    // Every block streams its A and B panels through L2.
    let peak = d.peak_gbps.max(1.0) * 1e9;
    let t_l2 = blocks * (bm + bn) as f64 * k_pad * elem as f64 / (L2_BANDWIDTH_FACTOR * peak);
    // DRAM: A and D once; B again for every wave when it does not stay in L2.
    let (m, n, k, batch) = (shape.m as f64, shape.n as f64, shape.k as f64, shape.batch.max(1) as f64);
    let b_bytes = k * n * elem as f64;
    let waves = (tiles_per_batch / (sms * per_sm)).ceil().max(1.0);
    let b_reads = if b_bytes > d.cache_bytes as f64 / 2.0 { waves } else { 1.0 };
    let dram = batch * (m * k * elem as f64 + m * n * out_elem as f64 + b_bytes * b_reads);
    let t_dram = dram / (0.9 * peak);
    (t_sm.max(t_l2).max(t_dram) + LAUNCH_US * 1e-6) * 1e3
}

/// The CPU: bands of `cpu_rows` output rows spread over the rayon pool, each one packed SGEMM
/// that packs (and for 16-bit inputs widens) all of B again; the last round of bands leaves
/// threads idle, except that with fewer bands than threads each band is threaded by the GEMM
/// crate over the whole pool.
fn predict_cpu_ms(d: &Description, shape: &GemmShape, cfg: &GemmConfig) -> f64 {
    let threads = d.cpu_threads.max(1) as f64;
    let tasks = (shape.m as f64 / cfg.cpu_rows.max(1) as f64).ceil().max(1.0) * shape.batch.max(1) as f64;
    let threaded = tasks < threads;
    let rounds = if threaded { 1.0 } else { (tasks / threads).ceil() };
    let busy = if threaded { threads } else { tasks.min(threads) };
    let flops = 2.0 * (shape.m * shape.n * shape.k) as f64 * shape.batch.max(1) as f64;
    // About 80 GFLOP/s per thread for the packed AVX-512 SGEMM, in whole rounds of bands.
    let t_work = if threaded { flops / threads / 80e9 } else { flops / tasks / 80e9 * rounds };
    // Packing B: k x n floats per band at about 4 GB/s per thread, plus scheduling.
    let t_pack = tasks * (5e-6 + (shape.k * shape.n) as f64 * 4.0 / 4e9) / busy;
    (t_work + t_pack) * 1e3
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::protocol::GemmResourceJson;
    use ferrotune::config::PackChoice;
    use proptest::prelude::*;

    /// An H100 description with the resources of every tile of every dtype and layout
    /// (registers estimated from the warp tiles, as a driver would report them).
    pub(crate) fn gemm_description() -> Description {
        let mut d = crate::elem::tests::gpu_description(20);
        for v in GemmVariant::all() {
            if v.math == ferrotune_kernels::gemm::Math::Ffma {
                continue;
            }
            let t = TILES[v.tile as usize];
            let mut r = estimated_resources(&t);
            let regs_per_warp = (r.registers * 32).div_ceil(256) * 256;
            r.max_threads = (65536 / regs_per_warp * 32).min(1024);
            d.gemm_resources.push(GemmResourceJson { kernel: v.entry_name().as_str().into(), resources: r });
        }
        d
    }

    /// Tile 0 of the `mma.sync` kernels (`path` auto would price the plan's own family).
    const MMA0: GemmConfig = GemmConfig { path: GemmPath::Mma, ..GemmConfig::DEFAULT };

    /// A point of the `mma.sync` tiles (not a Hopper one).
    pub(crate) fn mma(p: &Pruned) -> bool {
        p.point.get(Param::Path) == Some(0)
    }

    pub(crate) fn shape(dtype: GemmDtype, m: usize, n: usize, k: usize) -> GemmShape {
        GemmShape { dtype, m, n, k, batch: 1, a: Layout::Row, b: Layout::Col }
    }

    /// The unsplit candidates' tiles, fastest first by the model.
    fn ranked(d: &Description, s: &GemmShape) -> Vec<usize> {
        let (cands, _) = candidates(d, s, GemmConfig::DEFAULT);
        let mut c: Vec<(f64, usize)> =
            cands.iter().filter(|c| c.split_k == 1).map(|c| (predict_ms(d, s, c), c.tile)).collect();
        c.sort_by(|a, b| a.0.total_cmp(&b.0));
        c.into_iter().map(|(_, t)| t).collect()
    }

    #[test]
    fn the_gpu_space_is_exactly_the_compiled_tiles() {
        let d = gemm_description();
        let s = shape(GemmDtype::Bf16, 4096, 4096, 4096);
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        let paths = crate::gemm_sm90::path_values().len();
        assert_eq!(cands.len() + pruned.len(), paths * TILES.len() * SPLIT_K.len());
        assert_eq!(cands.len(), TILES.len(), "every tile fits an H100, no split pays");
        assert!(cands.iter().enumerate().all(|(i, c)| c.tile == i
            && c.cpu_rows == GemmConfig::DEFAULT.cpu_rows
            && c.split_k == 1
            && c.path == GemmPath::Mma));
        let (mma, hopper): (Vec<_>, Vec<_>) = pruned.iter().partition(|p| p.point.get(Param::Path) == Some(0));
        assert!(mma.iter().all(|p| p.reason.contains("two waves") || p.reason.contains("at most 16")));
        // This description lists no Hopper entry: those points say so (or why they repeat one,
        // or why their split cannot pay); the small-M points say why the family does not apply.
        let whys = [
            "not in the PTX",
            "does not split K",
            "tile 0 stands",
            "width index",
            "under 4",
            "already fill half",
            "1..=64 rows",
        ];
        let odd: Vec<_> = hopper.iter().filter(|p| !whys.iter().any(|w| p.reason.contains(w))).collect();
        assert!(odd.is_empty(), "{:?}", odd.first());
    }

    #[test]
    fn split_k_is_searched_where_it_can_pay_and_pruned_with_reasons() {
        let d = gemm_description();
        // bf16 256 x 256 x 65536: 4 tiles of 128 x 128; every factor gives long slices, but
        // only tile 0 has the f32 output the partial products need.
        let s = shape(GemmDtype::Bf16, 256, 256, 65536);
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        let splits: Vec<usize> = cands.iter().filter(|c| c.split_k > 1).map(|c| c.split_k).collect();
        assert_eq!(splits, vec![2, 4, 8, 16]);
        assert!(cands.iter().filter(|c| c.split_k > 1).all(|c| c.tile == 0));
        let p = pruned.iter().find(|p| p.point.get(Param::Tile) == Some(4) && mma(p)).unwrap();
        assert!(p.reason.contains("f32-output"), "{}", p.reason);
        // The model prefers splitting a 4-block grid 16 ways over any unsplit tile.
        let best = cands.iter().min_by(|a, b| predict_ms(&d, &s, a).total_cmp(&predict_ms(&d, &s, b))).unwrap();
        assert!(best.split_k >= 8, "{best:?}");
        // tf32 keeps its tiles under split-K (every tile has an f32 output).
        let t = shape(GemmDtype::Tf32, 256, 256, 65536);
        let (cands, _) = candidates(&d, &t, GemmConfig::DEFAULT);
        assert!(cands.iter().any(|c| c.tile == 7 && c.split_k == 16), "{cands:?}");
        // K = 1000: 4 slices of 256 (250 rounded up to a multiple of 8); 8 would be 128 long.
        let s = shape(GemmDtype::Bf16, 64, 64, 1000);
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        assert_eq!(cands.iter().map(|c| c.split_k).max(), Some(4));
        assert!(pruned.iter().any(|p| p.point.get(Param::SplitK) == Some(8) && p.reason.contains("shorter than 256")));
        // Batches are never split.
        let mut b = shape(GemmDtype::Bf16, 64, 64, 65536);
        b.batch = 2;
        let (cands, pruned) = candidates(&d, &b, GemmConfig::DEFAULT);
        assert!(cands.iter().all(|c| c.split_k == 1));
        assert!(pruned.iter().any(|p| p.reason.contains("single matrices")));
        // The model charges the workspace and the reduce: for a large grid splitting is slower.
        let big = shape(GemmDtype::Bf16, 4096, 4096, 4096);
        let t1 = predict_ms(&d, &big, &MMA0);
        let t2 = predict_ms(&d, &big, &GemmConfig { split_k: 2, ..MMA0 });
        assert!(t2 > t1, "{t1} vs {t2}");
    }

    #[test]
    fn unaligned_shapes_only_get_the_tiles_compiled_for_their_loads_and_say_why() {
        let d = gemm_description();
        // k = 700 bf16: rows of A and B are 1400 bytes, 8- but not 16-byte aligned.
        let s = shape(GemmDtype::Bf16, 1000, 3000, 700);
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        // (Split-K on tile 0 stays: its slices of 352 keep the 8-byte loads the shape allows.)
        // Packed first (`Param::Pack` 1), every tile runs; as given, the loads decide.
        let cands: Vec<_> =
            cands.into_iter().filter(|c| c.pack == PackChoice::Off && c.path == GemmPath::Mma).collect();
        let mut tiles: Vec<usize> = cands.iter().filter(|c| c.split_k == 1).map(|c| c.tile).collect();
        tiles.sort();
        let mut want = vec![0];
        want.extend(ferrotune_kernels::gemm::tc::NARROW_TILES);
        assert_eq!(tiles, want);
        assert!(cands.iter().all(|c| c.split_k == 1 || c.tile == 0));
        let unpacked = |p: &&Pruned| p.point.get(Param::Pack) == Some(0);
        let unsplit: Vec<_> =
            pruned.iter().filter(|p| p.point.get(Param::SplitK) == Some(1) && mma(p)).filter(unpacked).collect();
        assert_eq!(unsplit.len(), TILES.len() - want.len());
        assert!(unsplit.iter().all(|p| p.reason.contains("16-byte aligned")), "{pruned:?}");
        // k = 701: 2-byte rows, only the default tile.
        let s = shape(GemmDtype::Bf16, 1000, 3000, 701);
        let (cands, _) = candidates(&d, &s, GemmConfig::DEFAULT);
        assert!(cands.iter().filter(|c| c.pack == PackChoice::Off).all(|c| c.tile == 0), "{cands:?}");
        assert!(cands.iter().any(|c| c.pack == PackChoice::On && c.tile == 4), "packed, the wide tiles run");
    }

    #[test]
    fn small_devices_prune_big_rings_with_the_reason() {
        let mut d = gemm_description();
        let l = d.limits.as_mut().unwrap();
        // An sm_86-like opt-in limit of 99 KiB: the 162 KiB ring of tile 4 does not fit.
        l.shared_per_block_optin = 101_376;
        l.shared_per_sm = 102_400;
        let s = shape(GemmDtype::F16, 4096, 4096, 4096);
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        assert!(cands.iter().all(|c| c.tile != 4));
        let p = pruned.iter().find(|p| p.point.get(Param::Tile) == Some(4) && mma(p)).unwrap();
        assert!(p.reason.contains("shared memory") && p.reason.contains("opt-in"), "{}", p.reason);
    }

    #[test]
    fn the_model_ranks_small_tiles_first_for_small_problems_and_big_ones_for_big() {
        let d = gemm_description();
        let tiny = ranked(&d, &shape(GemmDtype::Bf16, 64, 64, 64));
        assert_eq!(tiny[0], 7, "64 x 64 for a 64 x 64 problem: {tiny:?}");
        let pos = |v: &[usize], t: usize| v.iter().position(|&x| x == t).unwrap();
        for huge in [1, 2, 4] {
            assert!(pos(&tiny, 7) < pos(&tiny, huge), "{tiny:?}");
        }
        // 128 x 8192: 128-row tiles leave half of the SMs idle; 64-row tiles fill them.
        let skinny = ranked(&d, &shape(GemmDtype::Bf16, 128, 8192, 1024));
        assert!([5, 6, 7].contains(&skinny[0]), "{skinny:?}");
        // 8192³: the 64 x 64 warp tiles (fewer shared-memory bytes per FLOP) lead.
        let big = ranked(&d, &shape(GemmDtype::Bf16, 8192, 8192, 8192));
        assert!([1, 2, 3, 4].contains(&big[0]) && [1, 2, 3, 4].contains(&big[1]), "{big:?}");
        assert!(pos(&big, 7) > pos(&big, 0), "{big:?}");
    }

    #[test]
    fn the_model_sees_wave_quantisation() {
        let d = gemm_description();
        let c = MMA0;
        // 132 blocks of 128 x 128 fill the H100 once; 133 need a second round on one SM...
        let full = predict_ms(&d, &shape(GemmDtype::F16, 128 * 12, 128 * 11, 4096), &c);
        let more = predict_ms(&d, &shape(GemmDtype::F16, 128 * 12 + 1, 128 * 11, 4096), &c);
        assert!(more > full * 1.2, "{full} -> {more}");
    }

    #[test]
    fn cpu_rows_cover_the_matrix_and_favour_balanced_tasks() {
        let mut d = gemm_description();
        d.limits = None;
        d.cpu_threads = 8;
        let s = shape(GemmDtype::F16, 100, 64, 64);
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        assert!(pruned.is_empty());
        assert_eq!(cands.iter().map(|c| c.cpu_rows).max(), Some(128));
        let t = |rows| predict_ms(&d, &s, &GemmConfig { cpu_rows: rows, ..GemmConfig::DEFAULT });
        assert!(t(128) < t(16), "one band is threaded over the pool and packs B once");
        // Thin bands repack B for every 8 rows: on a large problem they lose to one per thread,
        // and that to one band threaded by the crate.
        let big = shape(GemmDtype::Bf16, 1024, 1024, 1024);
        let tb = |rows| predict_ms(&d, &big, &GemmConfig { cpu_rows: rows, ..GemmConfig::DEFAULT });
        assert!(tb(1024) < tb(128) && tb(128) < tb(8), "{} {} {}", tb(8), tb(128), tb(1024));
    }

    proptest! {
        // Whatever the shape and the device's shared memory, the solved configs are ones the
        // host launches: unaligned shapes never get tiles > 0, rings fit the opt-in limit.
        #[test]
        fn solved_gemm_configs_are_always_valid(
            m in 1usize..5000, n in 1usize..5000, k in 1usize..5000, batch in 1usize..4,
            dt in 0usize..3, a_row: bool, b_row: bool,
            optin in prop::sample::select(vec![49_152u32, 101_376, 166_912, 232_448]),
        ) {
            let mut d = crate::gemm_sm90::tests::hopper_description();
            let l = d.limits.as_mut().unwrap();
            l.shared_per_block_optin = optin;
            l.shared_per_sm = optin + 1024;
            let limits = *l;
            let lay = |r: bool| if r { Layout::Row } else { Layout::Col };
            let s = GemmShape { dtype: GemmDtype::ALL[dt], m, n, k, batch, a: lay(a_row), b: lay(b_row) };
            let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
            prop_assert_eq!(cands.len() + pruned.len(), space(&d, &s).size());
            for c in cands.iter().filter(|c| c.path == GemmPath::SmallM) {
                prop_assert!(c.validate().is_ok() && c.tile == 0 && m <= 64 && batch == 1);
                prop_assert!(predict_ms(&d, &s, c).is_finite());
            }
            for c in cands.iter().filter(|c| matches!(c.path, GemmPath::Sm90(_))) {
                // A Hopper point: a variant the host runs for this call, whose ring fits.
                prop_assert!(c.validate().is_ok());
                let v = crate::gemm_sm90::variant(&d, &s, c);
                prop_assert!(v.is_ok(), "{:?}", v);
                prop_assert!(v.unwrap().tile().smem_bytes() as u32 <= limits.shared_optin());
                prop_assert!(predict_ms(&d, &s, c).is_finite());
            }
            for c in cands.iter().filter(|c| c.path == GemmPath::Mma) {
                prop_assert!(c.validate().is_ok());
                let v = variant(&s, c);
                prop_assert!(v.is_ok(), "{:?}", v);
                let v = v.unwrap();
                prop_assert_eq!(v.tile as usize, c.tile);
                prop_assert!(v.is_compiled(), "{:?}", v);
                if c.tile > 0 {
                    prop_assert!(v.align == 16 || ferrotune_kernels::gemm::tc::NARROW_TILES.contains(&c.tile));
                }
                prop_assert!(v.smem_bytes() as u32 <= limits.shared_optin());
                let r = resources(&d, &s, c).unwrap();
                prop_assert!(r.block_threads <= r.max_threads);
                prop_assert!(occupancy(&limits, r.block_threads, &r, u64::from(r.dynamic_shared)).blocks_per_sm >= 1);
                prop_assert!(predict_ms(&d, &s, c).is_finite());
            }
            let (g, elem) = (s.gemm(), s.dtype.dtype().size_bytes());
            let aligned = |al: usize| [g.lda, g.ldb, g.stride_a, g.stride_b].iter().all(|x| (x * elem) % al == 0);
            let narrow = ferrotune_kernels::gemm::tc::NARROW_TILES;
            if !aligned(16) {
                // As given: narrow loads only; packed first (16-bit single matrices), any tile.
                let given: Vec<_> = cands.iter().filter(|c| c.pack != PackChoice::On).collect();
                prop_assert!(given.iter().all(|c| c.tile == 0 || (aligned(8) && narrow.contains(&c.tile))), "{:?}", given);
                prop_assert!(given.iter().all(|c| !matches!(c.path, GemmPath::Sm90(_))), "TMA needs 16-byte rows: {:?}", given);
            }
            prop_assert!(cands.iter().all(|c| c.pack == PackChoice::Auto) || crate::gemm_pack::pack_domain(&s).is_some());
        }
    }
}
