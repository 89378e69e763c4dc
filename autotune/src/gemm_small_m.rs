//! The small-M points of the GEMM space (`ops::gemv`, M <= 64 against a large weight):
//! `Param::Path` [`PATH_VALUE`] with `Param::SplitK` as the family's K split over blocks and
//! `Param::Tile` as the index of its block width (`gemv::WIDTHS`: slabs per block), or one past
//! them ([`STREAM_TILE`]) for the streaming kernel (`ops::gemv_stream`, no K split), two past
//! them ([`ROWS_TILE`]) for the row-per-warp kernel (`ops::gemv_rows`, no K split). Why
//! a point cannot run or cannot pay (pruned with the reason: the host's own eligibility, K too
//! short for that many slices, slabs that already fill the device, an entry missing from the
//! loaded PTX), its launch resources, and its cost model (the weight streamed once from DRAM).

use ferrotune::config::{GemmConfig, GemmPath};
use ferrotune::ops::gemm::Gemm;
use ferrotune::ops::gemv::{interleaved, small_m_applies, vector_loads};
use ferrotune::ops::gemv_rows::{self, ROWS_TILE};
use ferrotune::ops::gemv_stream::{self, STREAM_TILE};
use ferrotune_kernels::gemv::{self as kv, SmallMPlan};

use crate::protocol::{Description, GemmShape};
use crate::space::{KernelResources, Limits};

/// The `Param::Path` value of the small-M family (after the `mma.sync` tiles, 0, and the
/// Hopper tiles, 1 + i).
pub const PATH_VALUE: u64 = 1 + ferrotune_kernels::gemm_sm90::TILES.len() as u64;

/// Why the small-M point `cfg` cannot run on the problem `g` (the shape as the call poses it,
/// packed where `cfg` packs) or is not worth measuring on a device of `sms` SMs, if it is not.
pub fn pruned(d: &Description, g: &Gemm, dtype: ferrotune::DType, cfg: &GemmConfig, sms: u32) -> Option<String> {
    debug_assert_eq!(cfg.path, GemmPath::SmallM);
    if cfg.tile == STREAM_TILE {
        return stream_pruned(d, g, dtype, cfg);
    }
    if cfg.tile == ROWS_TILE {
        return rows_pruned(d, g, dtype, cfg);
    }
    if cfg.tile >= kv::WIDTHS.len() {
        return Some(format!(
            "tile {}: the small-M family's tile is its width index, 0..{} (widths {:?})",
            cfg.tile,
            kv::WIDTHS.len(),
            kv::WIDTHS
        ));
    }
    let width = kv::WIDTHS[cfg.tile];
    if small_m_applies(g, dtype).is_none() {
        return Some(family_reason(g, dtype));
    }
    let groups = kv::m_groups_for(g.m).unwrap_or(kv::M_GROUPS[3]);
    if !kv::width_compiled(groups, width) {
        return Some(format!("width {width}: not compiled for {} rows of x ({groups} groups of 8)", g.m));
    }
    let s = cfg.split_k;
    // (Weights with unaligned rows are read in interleaved slabs, K in their aligned frame.)
    let plan = SmallMPlan::with_rows(g.n, g.k, s, interleaved(g, [256, 256]), width);
    if width > 1 && !vector_loads(g, [256, 256]) {
        return Some(format!("width {width}: blocks wider than one slab need K-contiguous x and weight"));
    }
    let per_block = kv::SLAB * (width / 2) * if interleaved(g, [256, 256]) { kv::INTERLEAVE } else { 1 };
    if width > 1 && g.n <= per_block {
        return Some(format!("width {width}: the weight's {} rows fit blocks of half that width", g.n));
    }
    if s > 1 {
        if plan.ksplit != s {
            return Some(format!(
                "split_k {s}: K = {} makes only {} small-M slices of {} (whole {}-k chunks)",
                g.k,
                plan.ksplit,
                plan.kslice,
                kv::CHUNK
            ));
        }
        if plan.kslice < kv::CHUNK * kv::WARPS {
            return Some(format!(
                "split_k {s}: small-M slices of {} leave warps without a {}-k chunk ({} warps per block)",
                plan.kslice,
                kv::CHUNK,
                kv::WARPS
            ));
        }
        if plan.slabs >= 2 * sms as usize {
            return Some(format!(
                "split_k {s}: {} blocks of {} columns already fill two waves of {sms} SMs",
                plan.slabs,
                kv::SLAB * width
            ));
        }
    }
    let name = entry(g, dtype, width)?;
    if d.gemm_resources_of(name).is_none() {
        return Some(format!("{name} is not in the PTX the device loaded"));
    }
    None
}

/// Why the streaming kernel's point (`tile` [`STREAM_TILE`]) cannot run `g`, if it cannot:
/// the host's own conditions (`gemv_stream::applies` as a config naming it sees them), its
/// entry in the loaded PTX (sm_90a only), and no K split of the config's (the kernel deals K
/// chunks over the SMs itself).
fn stream_pruned(d: &Description, g: &Gemm, dtype: ferrotune::DType, cfg: &GemmConfig) -> Option<String> {
    if small_m_applies(g, dtype).is_none() {
        return Some(family_reason(g, dtype));
    }
    if cfg.split_k > 1 {
        return Some(format!(
            "split_k {}: the streaming kernel deals its K chunks over the SMs itself (split_k 1 only)",
            cfg.split_k
        ));
    }
    if let Err(why) = gemv_stream::applies(g, dtype, "sm_90a", [256, 256], Some((1, gemv_stream::STREAM_WIDTH))) {
        return Some(format!("the streaming small-M kernel: {why}"));
    }
    let Some((name, ..)) = gemv_stream::describe(g, dtype, dtype, 1) else {
        return Some(format!("no streaming small-M entry for {}", dtype.name()));
    };
    if d.gemm_resources_of(name).is_none() {
        return Some(format!("{name} is not in the PTX the device loaded (sm_90a only)"));
    }
    None
}

/// Why the row kernel's point (`tile` [`ROWS_TILE`]) cannot run `g`, if it cannot: the host's
/// own conditions (`gemv_rows::applies` as a config naming it sees them, with the worker's
/// 256-byte aligned weight), its entry in the loaded PTX, and no K split (a block walks its rows
/// whole).
fn rows_pruned(d: &Description, g: &Gemm, dtype: ferrotune::DType, cfg: &GemmConfig) -> Option<String> {
    if small_m_applies(g, dtype).is_none() {
        return Some(family_reason(g, dtype));
    }
    if cfg.split_k > 1 {
        return Some(format!("split_k {}: the row kernel walks its weight rows whole (split_k 1 only)", cfg.split_k));
    }
    if let Err(why) = gemv_rows::applies(g, dtype, 256, Some((1, gemv_rows::ROWS_WIDTH))) {
        return Some(format!("the row kernel: {why}"));
    }
    let Some(gemv_rows::RowsLaunch { name, .. }) =
        gemv_rows::describe(g, dtype, dtype, d.limits.map_or(132, |l| l.sm_count.max(1)) as usize)
    else {
        return Some(format!("no row-kernel entry for {} rows of {}", g.m, dtype.name()));
    };
    if d.gemm_resources_of(name).is_none() {
        return Some(format!("{name} is not in the PTX the device loaded"));
    }
    None
}

/// Why the small-M family does not take `g` at all.
fn family_reason(g: &Gemm, dtype: ferrotune::DType) -> String {
    format!(
        "the small-M family takes 16-bit single matrices of 1..={} rows (here {} {}x{}x{}, batch {})",
        kv::MAX_M,
        dtype.name(),
        g.m,
        g.n,
        g.k,
        g.batch
    )
}

/// The small-M entry `g` runs at `width` slabs per block (inputs and output of `dtype`).
pub fn entry(g: &Gemm, dtype: ferrotune::DType, width: usize) -> Option<&'static str> {
    kv::entry_name(dtype, dtype, kv::m_groups_for(g.m)?, vector_loads(g, [256, 256]), width)
}

/// Launch resources of a small-M point: registers from the worker's driver, the kernel's own
/// block size and (dynamic) shared memory.
pub fn resources(d: &Description, g: &Gemm, dtype: ferrotune::DType, cfg: &GemmConfig) -> Option<KernelResources> {
    if cfg.tile == STREAM_TILE {
        let (name, _, ring) = gemv_stream::describe(g, dtype, dtype, 1)?;
        let mut r = d.gemm_resources_of(name)?;
        r.block_threads = ferrotune_kernels::gemv_stream::THREADS;
        r.dynamic_shared = ring.smem_bytes(gemv_stream::groups_for(g.m)) as u32;
        return Some(r);
    }
    if cfg.tile == ROWS_TILE {
        let l = gemv_rows::describe(g, dtype, dtype, d.limits.map_or(132, |l| l.sm_count.max(1)) as usize)?;
        let mut r = d.gemm_resources_of(l.name)?;
        r.block_threads = ferrotune_kernels::gemv_rows::THREADS;
        r.dynamic_shared = ferrotune_kernels::gemv_rows::smem_bytes(l.rows, g.k)? as u32;
        return Some(r);
    }
    let groups = kv::m_groups_for(g.m)?;
    let width = *kv::WIDTHS.get(cfg.tile)?;
    let mut r = d.gemm_resources_of(entry(g, dtype, width)?)?;
    r.block_threads = kv::THREADS;
    r.dynamic_shared = kv::smem_bytes(groups, width) as u32;
    Some(r)
}

/// The most DRAM bandwidth one SM's blocks pull, as a multiple of its even share of the peak
/// (a few SMs cannot saturate HBM).
const SM_SHARE_FACTOR: f64 = 2.0;
/// The share of the DRAM peak the streaming kernel's ring pulls (the register-fed blocks: 0.9
/// at best).
const STREAM_SHARE: f64 = 0.92;
/// Launch and the split's fix-up by the last block of a slab.
const LAUNCH_US: f64 = 4.0;
const FIXUP_US: f64 = 1.5;
/// The row kernel's staging of x in shared memory (a load round trip and a block barrier).
const STAGE_US: f64 = 1.0;

/// Predicted time (ms) of the small-M point `cfg` (K split `cfg.split_k`, width
/// `WIDTHS[cfg.tile]`): the weight, x and D through DRAM at the bandwidth the grid's blocks can
/// pull (`blocks x ksplit` on at most every SM), x re-read from L2 once per block, the split's
/// f32 partials written and read back, and the launch. Only the ranking matters.
pub fn predict_ms(d: &Description, l: &Limits, shape: &GemmShape, cfg: &GemmConfig) -> f64 {
    let elem = shape.dtype.dtype().size_bytes() as f64;
    if cfg.tile == STREAM_TILE {
        // The streaming kernel: the weight, x and D at the ring's rate (every SM, deep), the
        // launch and one join of split slabs.
        let (m, n, k) = (shape.m as f64, shape.n as f64, shape.k as f64);
        let peak = d.peak_gbps.max(1.0) * 1e9;
        let dram = (n * k + m * k + m * n) * elem;
        return dram / (STREAM_SHARE * peak) * 1e3 + (LAUNCH_US + FIXUP_US) * 1e-3;
    }
    if cfg.tile == ROWS_TILE {
        // The row kernel: the weight, x and D through DRAM at the rate of its blocks (8 rows
        // each, the warps splitting K, a batch of 16-byte loads in flight), x re-read from L2
        // per block, the launch and the staging of x before the first product.
        let (m, n, k) = (shape.m as f64, shape.n as f64, shape.k as f64);
        let sms = f64::from(l.sm_count.max(1));
        let dt = shape.dtype.dtype();
        let launch = gemv_rows::describe(&shape.gemm(), dt, dt, l.sm_count.max(1) as usize);
        let blocks = launch.map_or(ferrotune_kernels::gemv_rows::blocks(shape.n, 8), |l| l.blocks * l.slices) as f64;
        // Rows of x each block stages (a slice of at most 16 from 17 rows).
        let rows = launch.map_or(m, |l| l.rows.min(shape.m) as f64);
        let peak = d.peak_gbps.max(1.0) * 1e9;
        let bw = (0.9 * peak).min(blocks.min(sms) * SM_SHARE_FACTOR * peak / sms);
        let dram = (n * k + m * k + m * n) * elem;
        let l2 = blocks * rows * k * elem;
        return (dram / bw).max(l2 / (2.5 * peak)) * 1e3 + (LAUNCH_US + STAGE_US) * 1e-3;
    }
    let width = kv::WIDTHS[cfg.tile.min(kv::WIDTHS.len() - 1)];
    let plan = SmallMPlan::with_rows(shape.n, shape.k, cfg.split_k, interleaved(&shape.gemm(), [256, 256]), width);
    let (m, n, k) = (shape.m as f64, shape.n as f64, shape.k as f64);
    let sms = f64::from(l.sm_count.max(1));
    let blocks = (plan.slabs * plan.ksplit) as f64;
    let peak = d.peak_gbps.max(1.0) * 1e9;
    let bw = (0.9 * peak).min(blocks.min(sms) * SM_SHARE_FACTOR * peak / sms);
    let dram = (n * k + m * k + m * n) * elem;
    let partials = if plan.ksplit > 1 { 2.0 * plan.ksplit as f64 * m * n * 4.0 } else { 0.0 };
    let l2 = plan.slabs as f64 * m * k * elem;
    let fixup = if plan.ksplit > 1 { FIXUP_US * 1e-6 } else { 0.0 };
    ((dram + partials) / bw).max(l2 / (2.5 * peak)) * 1e3 + (LAUNCH_US * 1e-6 + fixup) * 1e3
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::gemm::tests::shape;
    use crate::gemm::{candidates, predict_ms as predict};
    use crate::protocol::{GemmDtype, GemmResourceJson};
    use crate::space::Param;
    use ferrotune::ops::gemm::Layout;
    use proptest::prelude::*;

    /// The H100 description with the Hopper entries and every small-M entry.
    pub(crate) fn small_m_description() -> Description {
        let mut d = crate::gemm_sm90::tests::hopper_description();
        for name in kv::NAMES {
            let r = KernelResources { registers: 96, max_threads: 256, ..KernelResources::default() };
            d.gemm_resources.push(GemmResourceJson { kernel: name.into(), resources: r });
        }
        for name in ferrotune_kernels::gemv_stream::NAMES {
            let r = KernelResources { registers: 94, max_threads: 288, ..KernelResources::default() };
            d.gemm_resources.push(GemmResourceJson { kernel: name.into(), resources: r });
        }
        for name in ferrotune_kernels::gemv_rows::NAMES {
            let r = KernelResources { registers: 40, max_threads: 256, ..KernelResources::default() };
            d.gemm_resources.push(GemmResourceJson { kernel: name.into(), resources: r });
        }
        d
    }

    /// The K splits of the one-slab small-M points run on the operands as given (not packed
    /// first).
    fn small_m_points(cands: &[GemmConfig]) -> Vec<usize> {
        small_m_points_of_width(cands, 0)
    }

    /// As [`small_m_points`] at width index `tile`.
    fn small_m_points_of_width(cands: &[GemmConfig], tile: usize) -> Vec<usize> {
        let unpacked = |c: &&GemmConfig| c.pack != ferrotune::config::PackChoice::On;
        let of = |c: &&GemmConfig| c.path == GemmPath::SmallM && c.tile == tile;
        cands.iter().filter(of).filter(unpacked).map(|c| c.split_k).collect()
    }

    #[test]
    fn small_m_k_splits_are_points_where_the_host_takes_them_and_pruned_with_reasons() {
        let d = small_m_description();
        // 17 x 33 x 9000: 3 slabs and 282 chunks of K: 32 slices of 9 chunks; 64 would make
        // only 57 slices of 5.
        let s = shape(GemmDtype::Bf16, 17, 33, 9000);
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        assert_eq!(small_m_points(&cands), vec![1, 2, 4, 8, 16, 32]);
        let own = |p: &&crate::space::Pruned| p.point.get(Param::Path) == Some(PATH_VALUE);
        let p64 = pruned.iter().filter(own).find(|p| p.point.get(Param::SplitK) == Some(64)).unwrap();
        assert!(p64.reason.contains("makes only 57"), "{}", p64.reason);
        assert!(pruned.iter().filter(own).any(|p| p.reason.contains("width index, 0..3")));
        // 33 weight rows: blocks of 2 and 4 slabs are points too (half as wide is still two blocks).
        assert_eq!(small_m_points_of_width(&cands, 1), vec![1, 2, 4, 8, 16, 32]);
        assert_eq!(small_m_points_of_width(&cands, 2), vec![1, 2, 4, 8, 16, 32]);
        let s = shape(GemmDtype::Bf16, 17, 20, 9000);
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        assert!(small_m_points_of_width(&cands, 1).len() > 1);
        assert!(small_m_points_of_width(&cands, 2).is_empty());
        assert!(pruned.iter().filter(own).any(|p| p.reason.contains("fit blocks of half")), "{pruned:?}");
        // Element loads (x column-major): one slab only.
        let s = GemmShape { a: Layout::Col, ..shape(GemmDtype::Bf16, 17, 4096, 4096) };
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        assert!(!small_m_points_of_width(&cands, 0).is_empty());
        assert!(small_m_points_of_width(&cands, 1).is_empty() && small_m_points_of_width(&cands, 2).is_empty());
        assert!(pruned.iter().filter(own).any(|p| p.reason.contains("K-contiguous")), "{pruned:?}");
        // 1 x 8192 x 4096: 512 slabs fill two waves of 132 SMs; splitting cannot pay.
        let s = shape(GemmDtype::Bf16, 1, 8192, 4096);
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        assert_eq!(small_m_points(&cands), vec![1]);
        assert!(pruned.iter().filter(own).any(|p| p.reason.contains("two waves")));
        // K = 100: 4 chunks, so 2 slices already leave warps idle, 8 cannot be made.
        let s = shape(GemmDtype::F16, 8, 256, 100);
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        assert_eq!(small_m_points(&cands), vec![1]);
        assert!(pruned.iter().filter(own).any(|p| p.reason.contains("leave warps without")), "{pruned:?}");
        assert!(pruned.iter().filter(own).any(|p| p.reason.contains("makes only")), "{pruned:?}");
        // Calls the family cannot take: every small-M point pruned with the host's reason.
        for s in [
            shape(GemmDtype::Bf16, 65, 4096, 4096),
            shape(GemmDtype::Tf32, 8, 4096, 4096),
            GemmShape { batch: 2, ..shape(GemmDtype::Bf16, 8, 4096, 4096) },
        ] {
            let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
            assert!(small_m_points(&cands).is_empty(), "{s:?}");
            assert!(pruned.iter().filter(own).any(|p| p.reason.contains("1..=64 rows")), "{s:?}");
        }
    }

    #[test]
    fn the_streaming_kernel_is_a_point_where_the_host_can_run_it() {
        let d = small_m_description();
        let own = |p: &&crate::space::Pruned| {
            p.point.get(Param::Path) == Some(PATH_VALUE) && p.point.get(Param::Tile) == Some(STREAM_TILE as u64)
        };
        let s = shape(GemmDtype::Bf16, 1, 4096, 4096);
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        assert_eq!(small_m_points_of_width(&cands, STREAM_TILE), vec![1]);
        assert!(pruned.iter().filter(own).any(|p| p.reason.contains("deals its K chunks")), "{pruned:?}");
        let odd = shape(GemmDtype::F16, 8, 4096, 4097);
        let (cands, pruned) = candidates(&d, &odd, GemmConfig::DEFAULT);
        assert!(small_m_points_of_width(&cands, STREAM_TILE).is_empty());
        assert!(pruned.iter().filter(own).any(|p| p.reason.contains("not 16-byte aligned")), "{pruned:?}");
        // The model prices it: the weight at most at the DRAM peak, plus the launch.
        let t = predict(&d, &s, &GemmConfig { path: GemmPath::SmallM, tile: STREAM_TILE, ..GemmConfig::DEFAULT });
        let floor = 4096.0 * 4096.0 * 2.0 / (d.peak_gbps * 1e9) * 1e3;
        assert!(t.is_finite() && t > floor, "{t} vs {floor}");
    }

    #[test]
    fn the_row_kernel_is_a_point_where_the_host_can_run_it() {
        let d = small_m_description();
        let own = |p: &&crate::space::Pruned| {
            p.point.get(Param::Path) == Some(PATH_VALUE) && p.point.get(Param::Tile) == Some(ROWS_TILE as u64)
        };
        let s = shape(GemmDtype::Bf16, 1, 4097, 777);
        let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
        assert_eq!(small_m_points_of_width(&cands, ROWS_TILE), vec![1]);
        assert!(pruned.iter().filter(own).any(|p| p.reason.contains("walks its weight rows whole")), "{pruned:?}");
        let r =
            resources(&d, &s.gemm(), ferrotune::DType::Bf16, &GemmConfig { tile: ROWS_TILE, ..GemmConfig::DEFAULT });
        let r = r.unwrap();
        // x staged (98 vectors of the longest frame, stored 100 apart), then the warps' sums.
        assert_eq!((r.block_threads, r.dynamic_shared), (256, 100 * 16 + 4096));
        // 8 rows of a 4096-long x do not fit its shared memory, nor do 16 rows of a 2000-long
        // one (the slice the wide calls fall back to); 65 rows are past the kernel.
        for s in [
            shape(GemmDtype::F16, 8, 4096, 4096),
            shape(GemmDtype::F16, 40, 4096, 2000),
            shape(GemmDtype::F16, 65, 4096, 777),
        ] {
            let (cands, pruned) = candidates(&d, &s, GemmConfig::DEFAULT);
            assert!(small_m_points_of_width(&cands, ROWS_TILE).is_empty(), "{s:?}");
            let why =
                |p: &&crate::space::Pruned| p.reason.contains("the row kernel") || p.reason.contains("1..=64 rows");
            assert!(pruned.iter().filter(own).any(|p| why(&p)), "{s:?}");
        }
        // 33 rows are a point, in 3 slices of 16 rows (x of 16 x 300 staged per block).
        let s33 = shape(GemmDtype::Bf16, 33, 5000, 300);
        let (cands, _) = candidates(&d, &s33, GemmConfig::DEFAULT);
        assert_eq!(small_m_points_of_width(&cands, ROWS_TILE), vec![1]);
        let r =
            resources(&d, &s33.gemm(), ferrotune::DType::Bf16, &GemmConfig { tile: ROWS_TILE, ..GemmConfig::DEFAULT });
        assert_eq!(r.unwrap().dynamic_shared, 16 * 44 * 16 + 4096);
        let t = predict(&d, &s, &GemmConfig { path: GemmPath::SmallM, tile: ROWS_TILE, ..GemmConfig::DEFAULT });
        let floor = 4097.0 * 777.0 * 2.0 / (d.peak_gbps * 1e9) * 1e3;
        assert!(t.is_finite() && t > floor, "{t} vs {floor}");
    }

    #[test]
    fn the_model_prefers_a_k_split_when_the_slabs_leave_sms_idle() {
        let d = small_m_description();
        let t = |s: &GemmShape, ks| {
            predict(&d, s, &GemmConfig { path: GemmPath::SmallM, split_k: ks, ..GemmConfig::DEFAULT })
        };
        // 3 slabs: unsplit, 3 SMs pull the weight.
        let long = shape(GemmDtype::Bf16, 17, 33, 9000);
        assert!(t(&long, 16) < t(&long, 1), "{} vs {}", t(&long, 16), t(&long, 1));
        let longer = shape(GemmDtype::Bf16, 17, 33, 90_000);
        assert!(t(&longer, 32) < t(&longer, 1) / 4.0, "{} vs {}", t(&longer, 32), t(&longer, 1));
        // 1 x 4096 x 4096: the weight streams at full bandwidth unsplit; a split only adds.
        let wide = shape(GemmDtype::Bf16, 1, 4096, 4096);
        assert!(t(&wide, 1) <= t(&wide, 2));
        // The small-M family beats every mma.sync tile on a decode GEMV in the model.
        let (cands, _) = candidates(&d, &wide, GemmConfig::DEFAULT);
        let not_hopper = cands.iter().filter(|c| !matches!(c.path, GemmPath::Sm90(_)));
        let best = not_hopper.min_by(|a, b| predict(&d, &wide, a).total_cmp(&predict(&d, &wide, b))).unwrap();
        assert_eq!(best.path, GemmPath::SmallM, "{best:?}");
    }

    proptest! {
        /// Every small-M point the space keeps is one the host plans as small-M with exactly
        /// that K split (what the profile entry will run), and the model prices it.
        #[test]
        fn kept_small_m_points_are_what_the_plan_runs(
            m in 1usize..80, n in 1usize..5000, k in 1usize..20000, dt in 0usize..3, a_row: bool,
        ) {
            let d = small_m_description();
            let a = if a_row { Layout::Row } else { Layout::Col };
            let s = GemmShape { a, b: Layout::Col, ..shape(GemmDtype::ALL[dt], m, n, k) };
            let (cands, _) = candidates(&d, &s, GemmConfig::DEFAULT);
            for c in cands.iter().filter(|c| c.path == GemmPath::SmallM) {
                let dtype = s.dtype.dtype();
                let p = ferrotune::ops::gemm_plan::plan(&s.gemm(), dtype, dtype, "sm_90a", 132, *c, [256, 256]).unwrap();
                let packed = p.family == ferrotune::ops::gemm_plan::Family::Pack;
                prop_assert!(p.family == ferrotune::ops::gemm_plan::Family::SmallM || packed, "{:?}", p);
                prop_assert_eq!(packed, c.pack == ferrotune::config::PackChoice::On);
                if c.tile == ROWS_TILE {
                    prop_assert!(packed || p.path() == "small-m:rows", "{}", p.path());
                    prop_assert!(p.reason.contains("ft_gemvr_"), "{}", p.reason);
                    prop_assert!(m <= ferrotune_kernels::gemv_rows::MAX_M && c.split_k == 1);
                    prop_assert!(predict(&d, &s, c).is_finite());
                    continue;
                }
                if c.tile == STREAM_TILE {
                    prop_assert!(packed || p.path() == "small-m:stream", "{}", p.path());
                    prop_assert!(p.reason.contains("ft_gemvs_"), "{}", p.reason);
                    prop_assert!(predict(&d, &s, c).is_finite());
                    continue;
                }
                let w = kv::WIDTHS[c.tile];
                let said = format!("K split {}, width {w} from the tuned config", c.split_k);
                prop_assert!(p.reason.contains(&said), "{}", p.reason);
                prop_assert!(m <= 64 && s.dtype != GemmDtype::Tf32);
                let g = crate::gemm_pack::planned_gemm(&s, c);
                let plan = SmallMPlan::with_rows(g.n, g.k, c.split_k, interleaved(&g, [256, 256]), w);
                prop_assert_eq!(plan.ksplit, c.split_k);
                let want = kv::entry_name(dtype, dtype, kv::m_groups_for(m).unwrap(), vector_loads(&g, [256, 256]), w);
                prop_assert!(p.reason.contains(want.unwrap_or("?")), "{}", p.reason);
                prop_assert!(predict(&d, &s, c).is_finite());
            }
        }
    }
}
