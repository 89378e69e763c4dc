//! The FFMA family's host side (exact f32, `kernels-gpu`'s `entry/gemm/ffma.rs`): which of
//! `ffma::TILES` a problem runs. The built-in rule is `ffma::tile_for` (the 256-row tile for
//! K of `ffma::K_MIN` and up where its blocks keep the SMs busy: eight tenths of them in one
//! wave, `ffma::WAVE_TENTHS`, and three quarters over its waves). An explicit `Gemm::tile`
//! picks one (a tile the operands cannot take is an error), as does `FERROTUNE_FFMA_TILE=0|1`
//! (the bench's A/B columns; it falls back with the reason), and so does a config that names
//! the tiles (`path = "mma"`: a tuned profile's `f32` entry, or `Gemm::with_config`), which
//! falls back with the reason where these operands cannot take its tile. And the built-in K
//! split of exact f32 (`built_in_split`), which the GPU heuristic takes instead of the tensor
//! cores' rule.

use ferrotune_kernels::gemm::{GemmVariant, Math, ffma};

use crate::config::{GemmConfig, GemmPath};
use crate::error::{Error, Result};
use crate::ops::gemm::Gemm;

/// `v` with the FFMA tile for `g` on `sm_count` SMs, and the reason in words (empty for
/// variants of other families, which are returned as they are). A tile the call forces
/// (`Gemm::tile`) that is out of range or needs 16-byte loads these operands do not allow is
/// an `InvalidConfig` error; one `FERROTUNE_FFMA_TILE` names, or the chosen config `cfg` names
/// (where its `path` is the tiles), falls back to the built-in rule with the reason (the
/// variable is a process-wide switch for A/B columns over many shapes; a profile entry covers
/// a bucket of shapes, not all of which the tile fits).
pub(crate) fn with_tile(v: GemmVariant, g: &Gemm, cfg: &GemmConfig, sm_count: u32) -> Result<(GemmVariant, String)> {
    if v.math != Math::Ffma {
        return Ok((v, String::new()));
    }
    let name = |t: u8| format!("{}x{}", ffma::TILES[t as usize], ffma::BN);
    if let Some(t) = g.tile {
        let cand = GemmVariant { tile: t.min(u8::MAX as usize) as u8, ..v };
        if t >= ffma::TILES.len() {
            return Err(Error::InvalidConfig {
                op: "gemm",
                why: format!("exact-f32 (FFMA) tile {t} does not exist: tiles 0..{}", ffma::TILES.len()),
            });
        }
        if !cand.is_compiled() {
            return Err(Error::InvalidConfig {
                op: "gemm",
                why: format!(
                    "exact-f32 (FFMA) tile {t} ({}) needs 16-byte aligned operands; these allow {}-byte loads",
                    name(t as u8),
                    v.align
                ),
            });
        }
        return Ok((cand, format!("; FFMA tile {} (forced by the call's tile)", name(t as u8))));
    }
    let forced = std::env::var("FERROTUNE_FFMA_TILE").ok().and_then(|t| t.parse::<u8>().ok());
    let built_in = || ffma::tile_for(g.m, g.n, g.k, g.batch, sm_count as usize);
    if forced.is_none() && cfg.path == GemmPath::Mma {
        let t = cfg.tile.min(u8::MAX as usize) as u8;
        let cand = GemmVariant { tile: t, ..v };
        if cfg.tile < ffma::TILES.len() && cand.is_compiled() {
            return Ok((cand, format!("; FFMA tile {} (the chosen config's tile {t})", name(t))));
        }
        let b = built_in();
        let fallback = GemmVariant { tile: b, ..v };
        let (fallback, b) = if fallback.is_compiled() { (fallback, b) } else { (v, 0) };
        let why = if cfg.tile >= ffma::TILES.len() {
            format!("names no FFMA tile (0..{})", ffma::TILES.len())
        } else {
            format!("needs 16-byte loads; these operands allow {}", v.align)
        };
        return Ok((fallback, format!("; FFMA tile {} (the chosen config's tile {} {why})", name(b), cfg.tile)));
    }
    let tile = forced.unwrap_or_else(built_in);
    let cand = GemmVariant { tile, ..v };
    Ok(if (tile as usize) < ffma::TILES.len() && cand.is_compiled() {
        let why = match (forced, tile) {
            (Some(_), _) => "forced by FERROTUNE_FFMA_TILE".to_string(),
            (None, 1) => format!(
                "K >= {} and its blocks keep the {sm_count} SMs busy (at least {}/10 in one wave, 3/4 over its waves)",
                ffma::K_MIN,
                ffma::WAVE_TENTHS
            ),
            (None, _) if g.k < ffma::K_MIN => format!("K < {}: two blocks an SM", ffma::K_MIN),
            (None, _) => format!(
                "blocks of 256 x 128 would leave the {sm_count} SMs idle (under {}/10 in one wave or 3/4 over its waves)",
                ffma::WAVE_TENTHS
            ),
        };
        (cand, format!("; FFMA tile {} ({why})", name(tile)))
    } else if (tile as usize) >= ffma::TILES.len() {
        (v, format!("; FFMA tile {} (FERROTUNE_FFMA_TILE={tile} names no tile: 0..{})", name(0), ffma::TILES.len()))
    } else {
        (v, format!("; FFMA tile {} (tile {tile} needs 16-byte loads; these operands allow {})", name(0), v.align))
    })
}

/// The built-in K split of an exact-f32 call (1: none), for the GPU heuristic: where the
/// 128-row tile's blocks (two an SM) keep less than [`SPLIT_BELOW_TENTHS`] tenths of the SMs'
/// rate busy (up to one block an SM, each at nine tenths of a pair's rate; beyond, the slots
/// their waves hold: at most two waves, since a third keeps two thirds busy) and K is at least
/// [`SPLIT_MIN_K`], the fewest slices that give four waves of slots, each slice at least
/// `MIN_SLICE_K` long, at most `splitk::MAX_SLICES`. The partial products run the 128-row
/// tile, and being compute-bound at the FFMA rate they gain from every SM kept busy, where the
/// tensor cores' rule (`GemmConfig::heuristic`: a quarter wave of tiles, at most 16 slices)
/// stops early. Measured by the tuner on the H200 (bench/results/ffma-v4-277ad92edbfc/
/// run5-78d8870-tune): 1536x1536x4099 (144 blocks) ran 1.40x faster on 8 slices than unsplit,
/// 640x640x8192 (25 blocks) 1.12x faster on 32 than on the tensor-core rule's 10; nine shapes
/// filling at least six tenths of their slots kept no split. Measured as first built
/// (bench/results/ffma-v4-277ad92edbfc/run6-3cec15c-split) against the tensor cores' rule:
/// 1.12-1.96x faster on 7 long-K shapes of 4 to 144 blocks; 2048x1024x4096 (128 blocks, one
/// an SM) 6% slower split, hence the alone rate; 1000x333x4099 16% slower on 16 slices than on
/// the other rule's 11. Single matrices only.
pub(crate) fn built_in_split(m: usize, n: usize, k: usize, batch: usize, sm_count: u32) -> usize {
    if batch > 1 || k < SPLIT_MIN_K {
        return 1;
    }
    let sms = sm_count.max(1) as usize;
    let slots = 2 * sms;
    let blocks = m.div_ceil(ffma::TILES[0]) * n.div_ceil(ffma::BN);
    // Up to one block an SM, each runs alone at about nine tenths of a pair's rate (the
    // tuner's 640x640x8192); beyond, the busiest SMs' pairs set the time.
    let filled = if blocks <= sms {
        9 * blocks >= SPLIT_BELOW_TENTHS * sms
    } else {
        blocks * 10 >= SPLIT_BELOW_TENTHS * blocks.div_ceil(slots) * slots
    };
    if blocks == 0 || filled {
        return 1;
    }
    (4 * slots).div_ceil(blocks).min(k / crate::config::MIN_SLICE_K).clamp(1, ferrotune_kernels::splitk::MAX_SLICES)
}

/// See [`built_in_split`].
pub const SPLIT_BELOW_TENTHS: usize = 6;
/// See [`built_in_split`].
pub const SPLIT_MIN_K: usize = 2048;

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact-f32 split: the tuner's winners on the H200 (8 slices at 1536x1536x4099, 32 at
    /// 640x640x8192), none where the blocks fill six tenths of their slots or K is short, at
    /// most 64 slices of at least 256, never for batches.
    #[test]
    fn built_in_split_fills_the_slots_of_long_k_problems() {
        let s = |m, n, k| built_in_split(m, n, k, 1, 132);
        assert_eq!(s(1536, 1536, 4099), 8);
        assert_eq!(s(640, 640, 8192), 32);
        assert_eq!(s(256, 256, 16_384), 64);
        assert_eq!(s(256, 256, 4096), 16, "slices of at least 256");
        assert_eq!(s(1024, 1024, 4096), 16, "64 blocks, one an SM");
        for (m, n, k) in [
            (4096, 4096, 4096),
            (3072, 3072, 3072),
            (1280, 4096, 4096),
            (6000, 1000, 3500),
            (2560, 2560, 5000),
            (2048, 1024, 4096),
        ] {
            assert_eq!(s(m, n, k), 1, "{m}x{n}x{k}");
        }
        assert_eq!(s(1536, 1536, 2047), 1, "short K");
        assert_eq!(s(0, 1536, 4096), 1);
        assert_eq!(built_in_split(1536, 1536, 4099, 2, 132), 1, "batches");
        assert_eq!(built_in_split(1536, 1536, 4099, 1, 264), 15, "more SMs, more slices");
    }
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
    fn long_k_big_problems_take_the_256_row_tile_the_rest_the_128() {
        // 4096^2: 16 x 32 = 512 blocks of 256 x 128 on 132 SMs (3.9 waves).
        let (v, why) = tile_of(ffma_v(16), &Gemm::new(4096, 4096, 4096), 132);
        assert_eq!((v.tile, v.entry_name().as_str()), (1, "ft_gemm_f32_rc_v16_f32_256x128x8"), "{why}");
        // 512 x 3072: 2 x 24 = 48 blocks, under one wave.
        let (v, why) = tile_of(ffma_v(16), &Gemm::new(512, 3072, 768), 132);
        assert_eq!((v.tile, v.entry_name().as_str()), (0, "ft_gemm_f32_rc_v16_f32_128x128x8"), "{why}");
        // K below ffma::K_MIN keeps the 128-row tile whatever the block count: 2048^3 (128
        // blocks of 256 x 128), 6144x2048x1536 (384), 8192x3072x768 (768).
        for (m, n, k) in [(2048, 2048, 2048), (6144, 2048, 1536), (8192, 3072, 768)] {
            let (v, why) = tile_of(ffma_v(16), &Gemm::new(m, n, k), 132);
            assert_eq!(v.tile, 0, "{m}x{n}x{k}: {why}");
            assert!(why.contains("K < 3072"), "{why}");
        }
        // A long K: 2048 x 2048 (128 blocks), 1792 x 2048 (112) take the 256-row tile; 2304 x
        // 2048 (144, 0.55 of two waves) and 1000 x 3000 (96, under eight tenths) do not.
        for (m, n, k, tile) in [
            (2048, 2048, 4096, 1),
            (1792, 2048, 3072, 1),
            (2304, 2048, 8192, 0),
            (1000, 3000, 8192, 0),
            (4096, 4096, 3071, 0),
        ] {
            assert_eq!(tile_of(ffma_v(16), &Gemm::new(m, n, k), 132).0.tile, tile, "{m}x{n}x{k}");
        }
        // Ragged waves: 3072^3 has 288 blocks (0.73 of three waves), 2560 x 2560 200 (0.76 of two).
        let (v, why) = tile_of(ffma_v(16), &Gemm::new(3072, 3072, 3072), 132);
        assert_eq!(v.tile, 0, "{why}");
        assert!(why.contains("idle"), "{why}");
        assert_eq!(tile_of(ffma_v(16), &Gemm::new(2560, 2560, 5000), 132).0.tile, 1);
        // The wave boundary: 105.6 blocks.
        assert_eq!(tile_of(ffma_v(16), &Gemm::new(256 * 2, 128 * 53, 4096), 132).0.tile, 1);
        assert_eq!(tile_of(ffma_v(16), &Gemm::new(256 * 2, 128 * 53 - 128, 4096), 132).0.tile, 0);
        // A batch counts its blocks: 48 blocks a matrix (240 of 264 slots for 5, 96 of 132 for 2).
        assert_eq!(tile_of(ffma_v(16), &Gemm::new(512, 3072, 4096).batched(5), 132).0.tile, 1);
        assert_eq!(tile_of(ffma_v(16), &Gemm::new(512, 3072, 4096).batched(2), 132).0.tile, 0);
    }

    #[test]
    fn unaligned_operands_keep_the_128_row_tile_and_other_families_are_untouched() {
        let (v, why) = tile_of(ffma_v(4), &Gemm::new(4096, 4096, 4099), 132);
        assert_eq!(v.tile, 0);
        assert!(why.contains("16-byte"), "{why}");
        let tc = GemmVariant { math: Math::Tf32, tile: 3, ..ffma_v(16) };
        assert_eq!(tile_of(tc, &Gemm::new(4096, 4096, 4096), 132), (tc, String::new()));
    }

    #[test]
    fn a_forced_tile_the_operands_cannot_take_is_an_error() {
        let g = Gemm::new(4096, 4096, 4099);
        assert_eq!(tile_of(ffma_v(4), &g.tile(0), 132).0.tile, 0);
        assert_eq!(tile_of(ffma_v(16), &g.tile(1), 132).0.tile, 1);
        for (v, t, what) in [(ffma_v(4), 1, "16-byte"), (ffma_v(16), 2, "does not exist")] {
            match with_tile(v, &g.tile(t), &GemmConfig::DEFAULT, 132) {
                Err(Error::InvalidConfig { why, .. }) => assert!(why.contains(what), "{why}"),
                other => panic!("tile {t}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_config_naming_the_tiles_picks_the_tile_and_falls_back_where_it_cannot() {
        if std::env::var("FERROTUNE_FFMA_TILE").is_ok() {
            return; // the variable wins over configs
        }
        let tuned = |tile| GemmConfig { path: GemmPath::Mma, tile, ..GemmConfig::DEFAULT };
        // 3072^3 takes the 128-row tile by the rule; a tuned tile 1 wins.
        let g = Gemm::new(3072, 3072, 3072);
        assert_eq!(tile_of(ffma_v(16), &g, 132).0.tile, 0);
        let (v, why) = with_tile(ffma_v(16), &g, &tuned(1), 132).unwrap();
        assert_eq!(v.tile, 1, "{why}");
        assert!(why.contains("chosen config"), "{why}");
        // Rows not 16-byte aligned, or a tile that does not exist: the rule, saying why.
        let (v, why) = with_tile(ffma_v(4), &Gemm::new(4096, 4096, 4099), &tuned(1), 132).unwrap();
        assert_eq!(v.tile, 0);
        assert!(why.contains("16-byte"), "{why}");
        let (v, why) = with_tile(ffma_v(16), &Gemm::new(4096, 4096, 4096), &tuned(7), 132).unwrap();
        assert_eq!(v.tile, 1, "{why}");
        assert!(why.contains("names no FFMA tile"), "{why}");
        // A config of path auto (the heuristic's) leaves the rule alone, whatever its tc tile.
        let auto = GemmConfig { tile: 4, ..GemmConfig::DEFAULT };
        assert_eq!(with_tile(ffma_v(16), &g, &auto, 132).unwrap().0.tile, 0);
    }

    fn tile_of(v: GemmVariant, g: &Gemm, sms: u32) -> (GemmVariant, String) {
        with_tile(v, g, &GemmConfig::DEFAULT, sms).unwrap()
    }
}
