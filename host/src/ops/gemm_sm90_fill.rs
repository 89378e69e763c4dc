//! How full the Hopper tiles keep the SMs: the fraction of the tile slots (waves x SMs x tile
//! area) a grid of one block per SM fills with outputs, and the plan's choice of the persistent
//! 128 x 192 tile where it fills them much better than 128 x 256 (few waves with a mostly empty
//! last one), the one-tile 128 x 160 where its grid takes no more waves than the 128 x 256's,
//! and the 128 x 128 tile for outputs at most 128 columns wide.

use ferrotune_kernels::gemm_sm90::Sm90Variant;

use crate::DType;
use crate::ops::gemm::Gemm;

/// The persistent 128 x 192 tile (wgmma N 192; 16-bit inputs).
pub const N192_TILE: u8 = 14;

/// The one-tile 128 x 160, six stages (wgmma N 160; 16-bit inputs).
pub const N160_TILE: u8 = 19;

/// The one-tile 128 x 128, six stages: the heuristic's tile for a narrow N ([`narrow_n`]).
pub const NARROW_TILE: u8 = 1;

/// Widest N that [`narrow_n`] gives to [`NARROW_TILE`]: one column of 128-wide tiles.
pub const NARROW_N: usize = 128;

/// Whether `g`'s output is narrow (N <= [`NARROW_N`]): a 128 x 256 tile would load and multiply
/// B rows that are not there, half or more of each tile, and read A once per 128 x 256 output
/// it fills only in part. Asked after the streaming class (few enough 64 x 128 tiles for one
/// wave keep the streaming tile). On the H100, bf16, built-in plan against the 128 x 128 tile
/// (bench/results/unseen-202c0e2a0088/classes/, best of call, queue and graph):
/// 16384x64x8192 0.144 -> 0.100 ms, 32768x64x2048 0.078 -> 0.057, 20000x128x1024 0.030 ->
/// 0.027, 65536x32x1024 0.079 -> 0.060, 10000x120x5120 0.084 -> 0.045, 12288x96x8192 0.138 ->
/// 0.078; its persistent form (tile 3) within 5% of it.
pub fn narrow_n(g: &Gemm) -> bool {
    g.n <= NARROW_N
}

/// How much more of the SMs' tile slots the 128 x 192 tile must fill with useful outputs than
/// the 128 x 256 one for the plan to take it (a 128 x 192 tile does less per byte it loads).
const N192_MARGIN: f64 = 0.1;

/// The fraction of the tile slots (waves x SMs x tile area) a persistent `bm x bn` grid over
/// `g` fills with outputs (the last wave's idle SMs and the ragged edges are the rest).
pub fn wave_fill(g: &Gemm, bm: usize, bn: usize, sm_count: u32) -> f64 {
    let sms = sm_count.max(1) as usize;
    let tiles = g.m.div_ceil(bm) * g.n.div_ceil(bn) * g.batch;
    let slots = tiles.div_ceil(sms) * sms * bm * bn;
    (g.m * g.n * g.batch) as f64 / slots.max(1) as f64
}

/// Whether the 128 x 192 tile fills the SMs better than 128 x 256 by [`N192_MARGIN`] (3072 x
/// 3072 on 132 SMs: 0.97 against 0.73).
pub fn n192_fills_better(g: &Gemm, dtype: DType, sm_count: u32) -> bool {
    let compiled = Sm90Variant { dtype, out_f32: false, tile: N192_TILE }.is_compiled();
    compiled && wave_fill(g, 128, 192, sm_count) >= wave_fill(g, 128, 256, sm_count) + N192_MARGIN
}

/// Waves of one block per SM that a one-tile grid of `bm x bn` tiles over `g` takes.
pub fn waves(g: &Gemm, bm: usize, bn: usize, sm_count: u32) -> usize {
    (g.m.div_ceil(bm) * g.n.div_ceil(bn) * g.batch).div_ceil(sm_count.max(1) as usize)
}

/// Whether the one-tile 128 x 160 replaces the 128 x 256 (one-tile or persistent) and the
/// persistent 128 x 192: compiled for `dtype` (16-bit), its grid takes no more waves than the
/// 128 x 256's, so each wave does 5/8 of the work or less (the plan asks where the 128 x 192
/// it would take otherwise runs as many tiles, [`n160_no_more_tiles_than_n192`]; ahead of the
/// row split, which lost to it: 9000x300x2048 0.041 ms against the split's 0.054,
/// bench/results/n160-landed-3eb02e8/table.txt). Where it takes more waves it lost: a 128 x 160 tile does less per byte it loads.
/// On the H100, bf16, ms, 128 x 160 against the plan before (bench/results/n160-landed-fda0558/):
/// D rows the TMA store cannot write (`table.txt`, against the one-tile 128 x 256), same
/// waves, 5000x300x4000 0.035 / 0.066, 8000x620x2000 0.051 / 0.064, 9000x300x2048 0.041 /
/// 0.058, 12000x310x1024 0.032 / 0.042; more waves, 7000x330x2048 0.044 / 0.042, 4000x1001x3000
/// 0.093 / 0.068, 2048x5118x5120 0.194 / 0.179; D through the TMA store (`persisting/`,
/// against the persistent 128 x 256 or 128 x 192), same waves, all eight faster: 6000x600x4096
/// 0.062 / 0.099, 9000x304x2048 0.037 / 0.043, 8000x624x2000 0.047 / 0.056; more waves, all
/// five slower: 3000x1280x2048 0.035 / 0.028, 3072x3072x1536 0.061 / 0.044.
pub fn n160_fills_as_fast(g: &Gemm, dtype: DType, sm_count: u32) -> bool {
    let compiled = Sm90Variant { dtype, out_f32: false, tile: N160_TILE }.is_compiled();
    compiled && waves(g, 128, 160, sm_count) <= waves(g, 128, 256, sm_count)
}

/// Whether the one-tile 128 x 160 runs no more tiles than the persistent 128 x 192 (as many
/// column tiles: N = 480, 600, 640, 800), where the plan would take the 128 x 192: with more,
/// the persistent tile's overlap of one tile's epilogue with the next one's loads won. On the
/// H100, bf16, ms, 128 x 160 against 128 x 192 (bench/results/n160-landed-46f4c70/table.txt):
/// as many tiles, 6000x600x4096 0.063 / 0.093, 11000x480x1536 0.033 / 0.037, 2500x800x4096
/// 0.033 / 0.035; more, 1664x3072x1536 0.037 / 0.031, 1100x2048x264 0.011 / 0.0105,
/// 2200x1800x2500 0.096 / 0.096, 3072x768x3072 0.028 / 0.029.
pub fn n160_no_more_tiles_than_n192(g: &Gemm) -> bool {
    g.n.div_ceil(160) <= g.n.div_ceil(192)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wave_fill_counts_the_last_wave_and_the_ragged_edges() {
        let g = |m, n| Gemm { m, n, ..Gemm::new(1, 1, 64) };
        // 3072x3072: 288 tiles of 128 x 256 in 3 waves of 132 (0.727); 384 of 128 x 192 (0.970).
        assert!((wave_fill(&g(3072, 3072), 128, 256, 132) - 288.0 / 396.0).abs() < 1e-12);
        assert!((wave_fill(&g(3072, 3072), 128, 192, 132) - 384.0 / 396.0).abs() < 1e-12);
        // 4096 columns in 192-wide tiles: 21.33 per row, the last a third used.
        let ragged = wave_fill(&g(128, 4096), 128, 192, 22);
        assert!((ragged - 4096.0 / (22.0 * 192.0)).abs() < 1e-12, "{ragged}");
        assert!(n192_fills_better(&g(3072, 3072), DType::Bf16, 132));
        assert!(!n192_fills_better(&g(3072, 3072), DType::F32, 132), "not compiled for TF32");
        assert!(!n192_fills_better(&g(4096, 4096), DType::Bf16, 132));
        // The one-tile 128 x 160: N = 300, 80 tiles of either width; 8000 x 620, 252 tiles
        // against 189, two waves each; 7000 x 330 takes a second wave (165 tiles against 110).
        assert!(n160_fills_as_fast(&g(5000, 300), DType::Bf16, 132));
        assert!(n160_fills_as_fast(&g(8000, 620), DType::F16, 132));
        assert!(!n160_fills_as_fast(&g(5000, 300), DType::F32, 132), "not compiled for TF32");
        assert_eq!((waves(&g(7000, 330), 128, 160, 132), waves(&g(7000, 330), 128, 256, 132)), (2, 1));
        for (m, n) in [(7000, 330), (6000, 450), (3001, 2999), (2048, 5118), (4096, 4100), (8192, 8192)] {
            assert!(!n160_fills_as_fast(&g(m, n), DType::Bf16, 132), "{m}x{n}");
        }
        assert!(narrow_n(&g(16384, 64)) && narrow_n(&g(9000, 128)) && !narrow_n(&g(9000, 129)));
    }
}
