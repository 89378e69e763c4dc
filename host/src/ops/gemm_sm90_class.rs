//! The long-K, few-tile class on the Hopper path: which tile a problem whose tiles leave SMs
//! idle runs on (the streaming tile, or the 128 x 128 tile where the work per SM is compute
//! bound), and how many slices K is cut into (the split-K cost rule, joined in the kernel by a
//! fixed tree). `gemm_sm90` asks these rules; the plan words them.

use ferrotune_kernels::gemm_sm90 as k90;
use ferrotune_kernels::gemm_sm90_split::Sm90Split;

use crate::DType;
use crate::config::{GemmConfig, GemmPath};
use crate::ops::gemm::Gemm;

/// The 128 x 128 tile (one block per tile, six stages): the heuristic's tile for the
/// compute-bound part of the streaming class ([`mid_class`]), a tuner point for split-K, and
/// the forced-tile tests' split tile.
pub const SPLIT_TILE: u8 = 1;
/// The 64 x 128 tile with two blocks per SM (four stages): a tuner point for M <= 64 split-K.
pub const SMALL_M_TILE: u8 = 9;
/// The streaming tile (64 x 128, one consumer, eight stages, one block per SM): the heuristic's
/// tile for the streaming class ([`streams`]), split or not.
pub const STREAM_TILE: u8 = 10;
/// The streaming tile in clusters of 2 and of 4 blocks along M (B multicast): tuner points. On
/// the H200 (bench/results/longk-h200-*/) both were slower than the streaming tile on 9 of 10
/// long-K shapes (256x256x65536 37.8 and 49.0 µs against 31.5).
pub const STREAM_C2_TILE: u8 = 17;
pub const STREAM_C4_TILE: u8 = 18;
/// Least k-tiles (of 64) per K slice on the tiles other than the streaming one: shorter slices
/// spend more on the join than they save (on the H100, 128x8192x1024 ran 0.026 ms in 2 slices
/// of 8, 0.024 ms unsplit).
pub const MIN_KT_PER_SLICE: usize = 16;
/// Largest M + N at which the streaming tile splits K although its tiles fill more than a
/// quarter of the SMs: there each block's multiplies, not the weight's bytes, set the time
/// (per block `2 * 64 * 128 * K` flops against `2 K (M + N)` bytes for the whole problem), so
/// idle SMs are lost time. On the H200 (bench/results/longk-h200-*/, 2 slices forced):
/// 96x3072x16384 37.4 µs against 51.9 unsplit, 256x2048x8192 23.2 against 28.2, 128x4096x8192
/// 28.1 against 29.5; and 40x8192x8192 (M + N = 8232, the weight's bytes bound it) 43.2
/// against 38.9.
pub const STREAM_SPLIT_MN: usize = 5120;
/// The streaming tile also splits K past a quarter of the SMs where its tiles fill at most a
/// third of them, whatever M + N: fewer SMs than that cannot draw the weight at the memory's
/// rate. On the H100 (bench/results/unseen-202c0e2a0088/classes/, bf16, 1 to 4 slices forced):
/// 12x5120x13824 (40 tiles, M + N = 5132) 0.058 ms in 2 slices, 0.059 in 3, 0.068 unsplit;
/// from 48 tiles unsplit won (48x6144x12288 0.060 against 0.065 in 2, 64x7168x8192,
/// 40x8192x8192).
pub const STREAM_SPLIT_THIRD: usize = 3;

/// The tile a K split of `g` would run on: a forced tile that can split, none for a forced
/// tile that cannot, else [`SPLIT_TILE`] in the [`mid_class`], [`STREAM_TILE`] in the rest of
/// the streaming class ([`streams`]; the split then follows [`split_for`]) and none outside it:
/// there the tiles fill more than a wave at one block per SM, and on the H100 no split paid
/// (bench/results/irregular/run12-*/).
pub fn split_tile(g: &Gemm, sm_count: u32, forced: Option<u8>) -> Option<u8> {
    match forced {
        Some(t) => k90::TILES[t as usize].splits_k().then_some(t),
        None if mid_class(g, sm_count) => Some(SPLIT_TILE),
        None => streams(g, sm_count).then_some(STREAM_TILE),
    }
}

/// Whether `g` is in the streaming class: a single matrix whose 64 x 128 tiles fit in one wave
/// of one block per SM (few rows against a large weight, or few tiles with a long K). There
/// the bytes in flight per SM set the rate, and [`STREAM_TILE`] keeps eight stages in flight
/// (H100, bf16, run12-*/sweep-table.md: 64x4096x4096 0.021 ms against 0.026 for the 64 x 128
/// four-stage split, 128x8192x1024 0.013 against 0.014, 64x14336x4096 0.048 against 0.051;
/// at 224 tiles, 128x14336x4096, the 128 x 128 tile stays ahead).
pub fn streams(g: &Gemm, sm_count: u32) -> bool {
    g.batch == 1 && stream_tiles(g) <= sm_count.max(1) as usize
}

/// The part of the streaming class that runs on [`SPLIT_TILE`], split: more 64 x 128 tiles
/// than a quarter of the SMs (the streaming tile's own split rule would leave them unsplit or
/// cut K in two or three), both sides at least 384 and M + N at most 2048 (compute bound per
/// SM: the 128 x 128 tile's two consumer warpgroups multiply faster per byte loaded), and K
/// long enough that the 128 x 128 tile splits. On the H200 (bench/results/longk-h200-*/, bf16,
/// ours / best of cuBLAS and torch in the same call): 768x512x24576 0.854x against 0.461x on
/// the streaming tile, 640x640x32768 0.874x against 0.443x, 1000x1000x20000 0.916x against
/// 0.623x, 384x1024x20000 0.899x against 0.510x; 512x1024x16384 0.859x against 0.871x for the
/// streaming tile in 2 slices, 1024x1024x16384 0.898x against 0.920x unsplit.
pub fn mid_class(g: &Gemm, sm_count: u32) -> bool {
    let wide = 4 * stream_tiles(g) > sm_count.max(1) as usize;
    streams(g, sm_count)
        && wide
        && g.m.min(g.n) >= 384
        && g.m + g.n <= 2048
        && split_for(g, sm_count, SPLIT_TILE, DType::Bf16).is_split()
}

/// Output tiles of `g` (one matrix) on [`STREAM_TILE`].
pub fn stream_tiles(g: &Gemm) -> usize {
    let t = k90::TILES[STREAM_TILE as usize];
    g.m.div_ceil(t.bm()) * g.n.div_ceil(t.bn)
}

/// The split-K cost rule: a single matrix whose output tiles (of `tile`) fill at most a
/// fraction of the block slots (SMs x blocks per SM) leaves the others idle for the whole of
/// a long K; cut K into up to `slots / tiles` slices (at most 64) of at least a least number
/// of k-tiles ([`split_fill`]), so the grid is about one wave. The streaming tile also splits
/// past that fraction where M + N is at most [`STREAM_SPLIT_MN`] or its tiles fill at most a
/// third of the slots ([`STREAM_SPLIT_THIRD`]). Not when the call forces
/// `split_k` (1: no split; above 1: the `mma.sync` split-K) or is a batch.
/// `FERROTUNE_SM90_SPLIT=s` forces `s` slices (1: off). A k-tile is 128 bytes of K for every
/// input type (64 of f16/bf16, 32 of f32 on TF32, at half the rate), so the least slice is the
/// same number of k-tiles, i.e. about the same time.
pub fn split_for(g: &Gemm, sm_count: u32, tile: u8, dtype: DType) -> Sm90Split {
    if g.batch != 1 || g.split_k.is_some() {
        return Sm90Split::NONE;
    }
    if let Some(s) = std::env::var("FERROTUNE_SM90_SPLIT").ok().and_then(|v| v.parse::<usize>().ok()) {
        let t = k90::TILES[tile as usize];
        return Sm90Split::new(g.k.div_ceil(t.bk(dtype.size_bytes())), s);
    }
    split_rule(g, sm_count, tile, dtype, few_rows_split(g).then(few_rows_min_kt))
}

/// [`split_for`]'s cost rule for a single matrix, with the streaming tile's slices as short as
/// `few_min_kt` k-tiles where that is given ([`few_rows_split`]).
pub fn split_rule(g: &Gemm, sm_count: u32, tile: u8, dtype: DType, few_min_kt: Option<usize>) -> Sm90Split {
    let t = k90::TILES[tile as usize];
    // Blocks per slice: a cluster's grid rounds the row tiles up to whole clusters.
    let tiles = g.m.div_ceil(t.bm()).next_multiple_of(t.cluster) * g.n.div_ceil(t.bn);
    let ktiles = g.k.div_ceil(t.bk(dtype.size_bytes()));
    let slots = sm_count.max(1) as usize * t.blocks_per_sm();
    let (fill, min_kt) = match few_min_kt.filter(|_| is_streaming(tile)) {
        Some(kt) => (split_fill(tile).0, kt.max(1)),
        None => split_fill(tile),
    };
    if tiles == 0 || tiles > slots || (fill * tiles > slots && !splits_past_fill(g, tile, tiles, slots)) {
        return Sm90Split::NONE;
    }
    Sm90Split::new(ktiles, (slots / tiles).min(ktiles / min_kt))
}

/// Whether the streaming tile splits `g` (`tiles` output tiles on `slots` block slots) past its
/// fill fraction ([`STREAM_SPLIT_MN`], [`STREAM_SPLIT_THIRD`]).
fn splits_past_fill(g: &Gemm, tile: u8, tiles: usize, slots: usize) -> bool {
    is_streaming(tile) && (g.m + g.n <= STREAM_SPLIT_MN || STREAM_SPLIT_THIRD * tiles <= slots)
}

/// (`fill`, least k-tiles per slice) of the split rule on `tile`: K is split when the tiles
/// fill at most 1 / `fill` of the block slots. The streaming tile splits from a quarter of the
/// SMs into slices of at least 64 k-tiles: on the H100 (run12-*/sweep-table.md) unsplit won at
/// 32 and more tiles of 64 k-tiles (64x4096x4096 0.021 ms against 0.025 in 4 slices,
/// 40x8192x8192 0.052 against 0.058 in 2), and slices of 64 to 128 k-tiles won on fewer tiles
/// and a longer K (256x256x65536 0.042 ms in 16 against 0.184 unsplit, 256x1024x16384 0.030
/// in 4, 512x512x32768 0.042 in 4). Re-checked with the radix-8 join (bench/results/
/// splitk-tree-*/: 1 to 32 slices forced on 10 streaming shapes): the rule's split is within
/// 2.5% of the best forced one on each. The other tiles keep the rule they were measured with:
/// half the slots, [`MIN_KT_PER_SLICE`].
pub fn split_fill(tile: u8) -> (usize, usize) {
    if is_streaming(tile) { (4, 64) } else { (2, MIN_KT_PER_SLICE) }
}

/// Whether the streaming tile cuts K into slices as short as [`few_rows_min_kt`] k-tiles for
/// `g`, and whether the plan sends `g`'s 9 to 32 rows to the Hopper tiles whatever the
/// weight's size (`gemm_plan_small_m::hopper_rows`): at most [`FEW_ROWS`] rows of x, so the
/// weight's bytes are nearly all the traffic, each slice streams its own part of them once and
/// the partials the join adds are a few rows. Off unless `FERROTUNE_SM90_FEW_ROWS_SPLIT=1`: a
/// candidate rule for the 17-32-row shapes on 4096 x 4096-class weights where both families
/// run at 0.57-0.75x the best peer (bench/results/rows17-32-1e4e30fa25e0/: the streaming tile
/// ran them unsplit, its 28-32 tiles on a quarter of the SMs), to be timed against the plan in
/// one call before it becomes the default.
pub fn few_rows_split(g: &Gemm) -> bool {
    g.m <= FEW_ROWS && g.batch == 1 && std::env::var("FERROTUNE_SM90_FEW_ROWS_SPLIT").is_ok_and(|v| v == "1")
}

/// Rows of x up to which [`few_rows_split`] applies.
pub const FEW_ROWS: usize = 32;

/// Least k-tiles per K slice of the streaming tile under [`few_rows_split`]:
/// `FERROTUNE_SM90_FEW_ROWS_MIN_KT` (at least 1), else [`MIN_KT_PER_SLICE`].
pub fn few_rows_min_kt() -> usize {
    std::env::var("FERROTUNE_SM90_FEW_ROWS_MIN_KT")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(MIN_KT_PER_SLICE, |v| v.max(1))
}

/// Whether `tile` is the streaming tile, in clusters or not.
pub fn is_streaming(tile: u8) -> bool {
    matches!(tile, STREAM_TILE | STREAM_C2_TILE | STREAM_C4_TILE)
}

/// The K slices a tuned config asks of its Hopper tile (`path = "sm90:<t>"` with `split_k`
/// above 1), where they apply: a single matrix, no path or split forced by the call.
pub fn tuned_split(g: &Gemm, cfg: GemmConfig) -> Option<usize> {
    let tuned = matches!(cfg.path, GemmPath::Sm90(_)) && cfg.split_k > 1;
    (tuned && g.path.is_none() && g.split_k.is_none() && g.batch == 1).then_some(cfg.split_k)
}

/// What a split of `g` on `tile` is: slices, k-tiles each, workspace.
pub fn split_shape(g: &Gemm, tile: u8, split: Sm90Split) -> String {
    let t = k90::TILES[tile as usize];
    let tiles = g.m.div_ceil(t.bm()) * g.n.div_ceil(t.bn);
    format!(
        "{tiles} output tiles of {}x{}, {} K slices of {} k-tiles joined in the kernel, {} KiB workspace",
        t.bm(),
        t.bn,
        split.slices,
        split.kt_per,
        split.workspace_bytes(tiles, t.bm() * t.bn).div_ceil(1024)
    )
}

/// Why `split` was chosen, for the plan's reason.
pub fn split_reason(g: &Gemm, tile: u8, split: Sm90Split, sm_count: u32) -> String {
    let t = k90::TILES[tile as usize];
    let tiles = g.m.div_ceil(t.bm()) * g.n.div_ceil(t.bn);
    let (fill, _) = split_fill(tile);
    let slots = sm_count.max(1) as usize * t.blocks_per_sm();
    let why = if fill * tiles > slots && g.m + g.n <= STREAM_SPLIT_MN {
        format!(
            "{tiles} output tiles of {}x{} leave {} of {sm_count} SMs idle and M + N = {} is at most {STREAM_SPLIT_MN} \
             (the multiplies, not the weight's bytes, set the time)",
            t.bm(),
            t.bn,
            slots.saturating_sub(tiles),
            g.m + g.n
        )
    } else if fill * tiles > slots {
        format!(
            "{tiles} output tiles of {}x{} fill at most 1/{STREAM_SPLIT_THIRD} of {sm_count} SMs (too few to draw \
             the weight at the memory's rate)",
            t.bm(),
            t.bn
        )
    } else {
        format!(
            "{tiles} output tiles of {}x{} fill at most 1/{fill} of {sm_count} SMs x {} blocks",
            t.bm(),
            t.bn,
            t.blocks_per_sm()
        )
    };
    let mid = if tile == SPLIT_TILE && mid_class(g, sm_count) {
        format!(
            "; the 128x128 tile, not the streaming tile: {} tiles of 64x128 fill more than a quarter of the SMs, \
             M and N are at least 384 and M + N at most 2048 (compute bound per SM)",
            stream_tiles(g)
        )
    } else {
        String::new()
    };
    format!(
        "Hopper split-K: {why} and K = {} is long: {} K slices of {} k-tiles, joined in the kernel by a fixed tree \
         (deterministic), {} KiB workspace{mid}",
        g.k,
        split.slices,
        split.kt_per,
        split.workspace_bytes(tiles, t.bm() * t.bn).div_ceil(1024)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::Layout;

    fn rc(m: usize, n: usize, k: usize) -> Gemm {
        Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).resolved()
    }

    /// The few-rows candidate: the streaming tile's slices may be as short as the given k-tiles,
    /// filling the SMs where K is too short for slices of 64; without it those shapes stay whole.
    #[test]
    fn few_rows_slices_fill_the_sms() {
        let r = |g: Gemm, few| split_rule(&g, 132, STREAM_TILE, DType::Bf16, few);
        // 32x4096x4096: 32 tiles of 64 k-tiles.
        assert_eq!(r(rc(32, 4096, 4096), None), Sm90Split::NONE);
        assert_eq!(r(rc(32, 4096, 4096), Some(16)), Sm90Split { slices: 4, kt_per: 16 });
        // 24x3584x3584: 28 tiles of 56 k-tiles; 4 slots a tile, 3 slices of at least 16.
        assert_eq!(r(rc(24, 3584, 3584), Some(16)), Sm90Split { slices: 3, kt_per: 19 });
        assert_eq!(r(rc(24, 3584, 3584), Some(8)), Sm90Split { slices: 4, kt_per: 14 });
        // 24x2048x8192: 16 tiles of 128 k-tiles, already split by the rule, more under it.
        assert_eq!(r(rc(24, 2048, 8192), None).slices, 2);
        assert_eq!(r(rc(24, 2048, 8192), Some(16)).slices, 8);
        // Other tiles keep their own rule.
        assert_eq!(
            split_rule(&rc(32, 4096, 4096), 132, SPLIT_TILE, DType::Bf16, Some(1)),
            split_rule(&rc(32, 4096, 4096), 132, SPLIT_TILE, DType::Bf16, None)
        );
        // Off by default: the rule reads the variable only.
        if std::env::var("FERROTUNE_SM90_FEW_ROWS_SPLIT").is_err() {
            assert!(!few_rows_split(&rc(24, 3584, 3584)));
        }
    }
}
