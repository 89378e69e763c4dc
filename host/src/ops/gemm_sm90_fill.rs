//! How full the Hopper tiles keep the SMs: the fraction of the tile slots (waves x SMs x tile
//! area) a grid of one block per SM fills with outputs, and the plan's choice of a narrower
//! tile (128 x 192 or 128 x 160) where it fills them much better than 128 x 256 (few waves with
//! a mostly empty last one, or columns past N), and the 128 x 128 tile for outputs at most 128
//! columns wide.

use ferrotune_kernels::gemm_sm90::Sm90Variant;

use crate::DType;
use crate::ops::gemm::Gemm;

/// The persistent 128 x 192 tile (wgmma N 192; 16-bit inputs).
pub const N192_TILE: u8 = 14;

/// The persistent 128 x 160 tile (wgmma N 160; 16-bit inputs).
pub const N160_TILE: u8 = 19;

/// The one-tile 128 x 160, six stages: [`N160_TILE`]'s form where the TMA store cannot write D.
pub const N160_ONE_TILE: u8 = 21;

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

/// How much more of the SMs' tile slots a narrower tile must fill with useful outputs than the
/// 128 x 256 one for the plan to take it (a narrower tile does less per byte it loads).
const NARROW_MARGIN: f64 = 0.1;

/// The fraction of the tile slots (waves x SMs x tile area) a persistent `bm x bn` grid over
/// `g` fills with outputs (the last wave's idle SMs and the ragged edges are the rest).
pub fn wave_fill(g: &Gemm, bm: usize, bn: usize, sm_count: u32) -> f64 {
    let sms = sm_count.max(1) as usize;
    let tiles = g.m.div_ceil(bm) * g.n.div_ceil(bn) * g.batch;
    let slots = tiles.div_ceil(sms) * sms * bm * bn;
    (g.m * g.n * g.batch) as f64 / slots.max(1) as f64
}

/// The persistent tile for a large problem whose D the TMA store writes: of 128 x 192 and
/// 128 x 160 the one that fills the SMs' tile slots better (128 x 192 on a tie), where it
/// fills them better than `wide` (the 128 x 256) by [`NARROW_MARGIN`] (3072 x 3072 on 132 SMs:
/// 128 x 192 0.97 against 0.73; 2048 x 5120: 128 x 160 0.97 against 0.81 for both others),
/// else `wide`. The narrow tiles are compiled for 16-bit inputs only.
pub fn persistent_by_fill(g: &Gemm, dtype: DType, sm_count: u32, wide: u8) -> u8 {
    narrowest_filling(g, dtype, sm_count, [(N192_TILE, 192), (N160_TILE, 160)]).unwrap_or(wide)
}

/// The one-tile form's choice ([`N160_ONE_TILE`] or `wide`, the one-tile 128 x 256) by the same
/// rule as [`persistent_by_fill`] (N = 300: two 160-wide tiles 94% used, against 59% of 256).
pub fn one_tile_by_fill(g: &Gemm, dtype: DType, sm_count: u32, wide: u8) -> u8 {
    narrowest_filling(g, dtype, sm_count, [(N160_ONE_TILE, 160)]).unwrap_or(wide)
}

/// Of `narrow` (tile, width) the best-filling one (the first on a tie) where it fills the
/// slots better than 128 x 256 by [`NARROW_MARGIN`] and is compiled for `dtype`.
fn narrowest_filling<const N: usize>(g: &Gemm, dtype: DType, sm_count: u32, narrow: [(u8, usize); N]) -> Option<u8> {
    let wide = wave_fill(g, 128, 256, sm_count);
    let mut best: Option<(u8, f64)> = None;
    for (tile, bn) in narrow {
        let fill = wave_fill(g, 128, bn, sm_count);
        let compiled = Sm90Variant { dtype, out_f32: false, tile }.is_compiled();
        if compiled && fill >= wide + NARROW_MARGIN && best.is_none_or(|(_, f)| fill > f) {
            best = Some((tile, fill));
        }
    }
    best.map(|(t, _)| t)
}

/// The width of a narrow tile's outputs (for the plan's reason), or 256.
pub fn tile_bn(tile: u8) -> usize {
    ferrotune_kernels::gemm_sm90::TILES.get(tile as usize).map_or(256, |t| t.bn)
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
        let p = |m, n, dt| persistent_by_fill(&g(m, n), dt, 132, 8);
        assert_eq!(p(3072, 3072, DType::Bf16), N192_TILE);
        assert_eq!(p(3072, 3072, DType::F32), 8, "not compiled for TF32");
        assert_eq!(p(4096, 4096, DType::Bf16), 8);
        assert_eq!(p(8192, 8192, DType::Bf16), 8);
        // 2048 x 5120: 320 tiles of 128 x 256 in 3 waves (0.81), 432 of 128 x 192 in 4 (0.81),
        // 512 of 128 x 160 in 4 (0.97).
        assert!((wave_fill(&g(2048, 5120), 128, 160, 132) - 512.0 / 528.0).abs() < 1e-12);
        assert_eq!(p(2048, 5120, DType::Bf16), N160_TILE);
        assert_eq!(p(2048, 5120, DType::F16), N160_TILE);
        // N = 300 in one wave: 0.56 of 128 x 160 against 0.35 (256) and 0.42 (192).
        assert_eq!(one_tile_by_fill(&g(5000, 300), DType::Bf16, 132, 0), N160_ONE_TILE);
        assert_eq!(one_tile_by_fill(&g(5000, 300), DType::F32, 132, 0), 0);
        assert_eq!(one_tile_by_fill(&g(8192, 8192), DType::Bf16, 132, 0), 0);
        assert_eq!((tile_bn(N160_TILE), tile_bn(N192_TILE), tile_bn(200)), (160, 192, 256));
        assert!(narrow_n(&g(16384, 64)) && narrow_n(&g(9000, 128)) && !narrow_n(&g(9000, 129)));
    }
}
