//! The FFMA family's host side (exact f32, `kernels-gpu`'s `entry/gemm/ffma.rs`): which of
//! `ffma::TILES` a problem runs. The built-in rule is `ffma::tile_for` (the 256-row tile where
//! its blocks fill at least eight tenths of the SMs, `ffma::WAVE_TENTHS`); an explicit `Gemm::tile` below
//! `ffma::TILES.len()` or `FERROTUNE_FFMA_TILE=0|1` (the bench's A/B columns) picks one. Not a
//! tuner parameter yet.

use ferrotune_kernels::gemm::{GemmVariant, Math, ffma};

use crate::ops::gemm::Gemm;

/// `v` with the FFMA tile for `g` on `sm_count` SMs, and the reason in words (empty for
/// variants of other families, which are returned as they are).
pub(crate) fn with_tile(v: GemmVariant, g: &Gemm, sm_count: u32) -> (GemmVariant, String) {
    if v.math != Math::Ffma {
        return (v, String::new());
    }
    let forced = g
        .tile
        .filter(|&t| t < ffma::TILES.len())
        .map(|t| t as u8)
        .or_else(|| std::env::var("FERROTUNE_FFMA_TILE").ok().and_then(|t| t.parse::<u8>().ok()));
    let tile = forced.unwrap_or_else(|| ffma::tile_for(g.m, g.n, g.batch, sm_count as usize));
    let cand = GemmVariant { tile, ..v };
    let name = |t: u8| format!("{}x{}", ffma::TILES[t as usize], ffma::BN);
    if (tile as usize) < ffma::TILES.len() && cand.is_compiled() {
        let why = match (forced, tile) {
            (Some(_), _) => "forced by the call's tile or FERROTUNE_FFMA_TILE".to_string(),
            (None, 1) => format!("its blocks fill at least {}/10 of the {sm_count} SMs", ffma::WAVE_TENTHS),
            (None, _) => {
                format!("blocks of 256 x 128 would fill under {}/10 of the {sm_count} SMs", ffma::WAVE_TENTHS)
            }
        };
        (cand, format!("; FFMA tile {} ({why})", name(tile)))
    } else if (tile as usize) >= ffma::TILES.len() {
        (v, format!("; FFMA tile {} (FERROTUNE_FFMA_TILE={tile} names no tile: 0..{})", name(0), ffma::TILES.len()))
    } else {
        (v, format!("; FFMA tile {} (tile {tile} needs 16-byte loads; these operands allow {})", name(0), v.align))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrotune_kernels::DType;
    use ferrotune_kernels::gemm::Layout;

    fn ffma_v(align: u8) -> GemmVariant {
        GemmVariant {
            dtype: DType::F32,
            math: Math::Ffma,
            a: Layout::Row,
            b: Layout::Col,
            align,
            out_f32: true,
            tile: 0,
        }
    }

    #[test]
    fn big_problems_take_the_256_row_tile_small_ones_the_128() {
        // 4096^2: 16 x 32 = 512 blocks of 256 x 128 on 132 SMs (3.9 waves).
        let (v, why) = with_tile(ffma_v(16), &Gemm::new(4096, 4096, 4096), 132);
        assert_eq!((v.tile, v.entry_name().as_str()), (1, "ft_gemm_f32_rc_v16_f32_256x128x8"), "{why}");
        // 512 x 3072: 2 x 24 = 48 blocks, under one wave.
        let (v, why) = with_tile(ffma_v(16), &Gemm::new(512, 3072, 768), 132);
        assert_eq!((v.tile, v.entry_name().as_str()), (0, "ft_gemm_f32_rc_v16_f32_128x128x8"), "{why}");
        // 2048^2: 128 blocks; 1792 x 2048: 112; 2304 x 2048: 144 (a ragged second wave);
        // 1000 x 3000: 4 x 24 = 96, under eight tenths of 132 SMs.
        for (m, n, k, tile) in
            [(2048, 2048, 2048, 1), (1792, 2048, 2048, 1), (2304, 2048, 2048, 1), (1000, 3000, 700, 0)]
        {
            assert_eq!(with_tile(ffma_v(16), &Gemm::new(m, n, k), 132).0.tile, tile, "{m}x{n}x{k}");
        }
        // The boundary: 105.6 blocks.
        assert_eq!(with_tile(ffma_v(16), &Gemm::new(256 * 2, 128 * 53, 64), 132).0.tile, 1);
        assert_eq!(with_tile(ffma_v(16), &Gemm::new(256 * 2, 128 * 53 - 128, 64), 132).0.tile, 0);
        // A batch counts its blocks: 48 blocks a matrix.
        assert_eq!(with_tile(ffma_v(16), &Gemm::new(512, 3072, 768).batched(3), 132).0.tile, 1);
        assert_eq!(with_tile(ffma_v(16), &Gemm::new(512, 3072, 768).batched(2), 132).0.tile, 0);
    }

    #[test]
    fn unaligned_operands_keep_the_128_row_tile_and_other_families_are_untouched() {
        let (v, why) = with_tile(ffma_v(4), &Gemm::new(4096, 4096, 4099), 132);
        assert_eq!(v.tile, 0);
        assert!(why.contains("16-byte"), "{why}");
        let tc = GemmVariant { math: Math::Tf32, tile: 3, ..ffma_v(16) };
        assert_eq!(with_tile(tc, &Gemm::new(4096, 4096, 4096), 132), (tc, String::new()));
    }
}
