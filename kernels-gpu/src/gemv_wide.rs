//! Small-M GEMM, wide blocks (`ft_gemv_<in>_<out>_g<groups>_w`): the same product and fragment
//! maths as the small-M family (`gemv.rs`), cut the other way. There the 8 warps of a block
//! split the K range of one 16-row slab, so every block reads all of x for only 16 weight rows
//! and x's traffic from L2 is `groups` x 4 times the weight's (33 to 64 rows: 4x, the loads a
//! warp waits on). Here each warp owns a slab of its own, the block's [`WARPS`] slabs walk the
//! same K chunks in step, and x is read once per block from L2 (the other warps hit L1; the
//! weight's loads are marked evict-first): x's L2 traffic falls by the warp count. Each warp
//! keeps [`depth`] chunks of its weight and of x in flight in a register ring. Only K-contiguous operands (A row-major,
//! B column-major), one matrix. A K split over blocks has one arrival counter per block.

use crate::element::DType;
use crate::gemv::{CHUNK, INTERLEAVE, MAX_KSPLIT, SLAB, SmallMPlan};

/// Warps (and slabs) per block.
pub const WARPS: usize = crate::gemv::WARPS;

/// Chunks (32 k of the slab's 16 weight rows and of x's rows) a warp keeps in flight: about
/// 100 to 160 registers of ring (2 + G 16-byte vectors per chunk and thread).
pub const fn depth(groups: usize) -> usize {
    match groups {
        0..=1 => 12,
        2 => 8,
        3..=4 => 6,
        _ => 4,
    }
}

/// Blocks per SM a variant is compiled for (its launch bounds): one, so that the ring of
/// [`depth`] chunks gets up to 255 registers without spilling; its 8 warps keep 32 to 96 KiB
/// of the weight in flight per SM.
pub const fn blocks_per_sm(_groups: usize) -> usize {
    1
}

/// Launch bounds of a wide entry (threads, blocks per SM) for the PTX build; `None` for other
/// names.
pub fn launch_bounds(entry: &str) -> Option<(u32, u32)> {
    let name = NAMES.iter().find(|n| **n == entry)?;
    let groups = match name.rsplit('_').nth(1)? {
        "g1" => 1,
        "g2" => 2,
        "g4" => 4,
        _ => 8,
    };
    Some((crate::gemv::THREADS, blocks_per_sm(groups) as u32))
}

/// Fewest chunks a warp walks in a K slice of the built-in split (the ring's fill and the
/// split's fix-up are paid per slice).
pub const MIN_CHUNKS: usize = 8;

/// Blocks along x for `slabs` slabs (`SmallMPlan::with_rows`): [`WARPS`] slabs each; with
/// `interleaved` slabs (multiples of [`INTERLEAVE`]), blocks of slabs with the same shift.
pub const fn blocks(slabs: usize, interleaved: bool) -> usize {
    if interleaved { slabs.div_ceil(INTERLEAVE * WARPS) * INTERLEAVE } else { slabs.div_ceil(WARPS) }
}

/// The slab warp `warp` of block `block` walks. Interleaved: block `b` takes the slabs of
/// group `b / 8` of `8 x WARPS` slabs congruent to `b % 8`, whose rows are 128 apart and so
/// share their misalignment: the block's warps read the same shifted copy of x. Slabs at or
/// past the plan's count hold only rows past N (the kernel predicates them away).
pub const fn block_slab(block: usize, warp: usize, interleaved: bool) -> usize {
    if interleaved {
        (block / INTERLEAVE) * INTERLEAVE * WARPS + block % INTERLEAVE + INTERLEAVE * warp
    } else {
        block * WARPS + warp
    }
}

/// The built-in K split for `groups` row groups: none when the blocks alone fill every SM's
/// [`blocks_per_sm`]; otherwise about that many blocks per SM, each warp walking at least
/// [`MIN_CHUNKS`] chunks.
pub const fn heuristic_ksplit(n: usize, k: usize, groups: usize, sms: usize, interleaved: bool) -> usize {
    let slabs = SmallMPlan::with_rows(n, k, 1, interleaved).slabs;
    let b = blocks(slabs, interleaved);
    let resident = blocks_per_sm(groups) * sms;
    if b >= resident {
        return 1;
    }
    let want = resident / b;
    let most = k.div_ceil(CHUNK) / MIN_CHUNKS;
    let s = if want < most { want } else { most };
    if s < 1 {
        1
    } else if s > MAX_KSPLIT {
        MAX_KSPLIT
    } else {
        s
    }
}

/// Workspace bytes of a split call on `blocks` blocks: one arrival counter per block (256-byte
/// rounded), then `[ksplit][m][n]` f32 partials; 0 without a split, `None` on overflow.
pub const fn workspace_bytes(plan: &SmallMPlan, blocks: usize, m: usize, n: usize) -> Option<usize> {
    SmallMPlan { slabs: blocks, ..*plan }.workspace_bytes(m, n, 1)
}

/// Bytes of the counters in front of the partials (see [`workspace_bytes`]).
pub const fn counter_bytes(plan: &SmallMPlan, blocks: usize) -> usize {
    SmallMPlan { slabs: blocks, ..*plan }.counter_bytes(1)
}

/// Dynamic shared memory of a block: the "last block" flag of the split.
pub const SMEM_BYTES: usize = 16;

/// Entry name of a wide variant.
pub fn entry_name(dtype: DType, out: DType, groups: usize) -> &'static str {
    let gi = match groups {
        1 => 0,
        2 => 1,
        4 => 2,
        _ => 3,
    };
    let di = if dtype == DType::Bf16 { 0 } else { 1 };
    let oi = if out == DType::F32 { 1 } else { 0 };
    NAMES[(di * 2 + oi) * 4 + gi]
}

/// Every compiled wide entry, in [`entry_name`]'s order.
pub const NAMES: [&str; 16] = [
    "ft_gemv_bf16_bf16_g1_w",
    "ft_gemv_bf16_bf16_g2_w",
    "ft_gemv_bf16_bf16_g4_w",
    "ft_gemv_bf16_bf16_g8_w",
    "ft_gemv_bf16_f32_g1_w",
    "ft_gemv_bf16_f32_g2_w",
    "ft_gemv_bf16_f32_g4_w",
    "ft_gemv_bf16_f32_g8_w",
    "ft_gemv_f16_f16_g1_w",
    "ft_gemv_f16_f16_g2_w",
    "ft_gemv_f16_f16_g4_w",
    "ft_gemv_f16_f16_g8_w",
    "ft_gemv_f16_f32_g1_w",
    "ft_gemv_f16_f32_g2_w",
    "ft_gemv_f16_f32_g4_w",
    "ft_gemv_f16_f32_g8_w",
];

/// Rows of the weight a block covers (its slabs' [`SLAB`] columns each).
pub const ROWS_PER_BLOCK: usize = WARPS * SLAB;

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::gemv::{M_GROUPS, row_shift, slab_row};

    /// Every row of the weight belongs to exactly one (block, warp, column); in an interleaved
    /// block all warps' rows share one misalignment (so they read the same copy of x).
    #[test]
    fn blocks_cover_every_row_once_and_share_their_shift() {
        for (n, ld, base) in
            [(1usize, 4099usize, 256usize), (8191, 4099, 258), (4096, 4096, 256), (129, 777, 2), (1000, 9, 14)]
        {
            for inter in [false, true] {
                let slabs = SmallMPlan::with_rows(n, 64, 1, inter).slabs;
                let mut seen = std::vec![0u32; n];
                for b in 0..blocks(slabs, inter) {
                    let shift0 = row_shift(base, slab_row(block_slab(b, 0, inter), 0, inter), ld);
                    for w in 0..WARPS {
                        let slab = block_slab(b, w, inter);
                        for nl in 0..SLAB {
                            let r = slab_row(slab, nl, inter);
                            if r < n {
                                assert!(slab < slabs, "n {n}: row {r} from slab {slab} of {slabs}");
                                seen[r] += 1;
                                if inter {
                                    assert_eq!(row_shift(base, r, ld), shift0, "n {n} block {b} warp {w}");
                                }
                            }
                        }
                    }
                }
                assert!(seen.iter().all(|&c| c == 1), "n {n} inter {inter}");
            }
        }
    }

    #[test]
    fn heuristic_fills_the_sms_with_long_enough_slices() {
        // 33x8191x4099 (interleaved, one block per SM): 64 blocks, 2 slices.
        assert_eq!(heuristic_ksplit(8191, 4099, 8, 132, true), 2);
        // 1x4096x4096 (one block per SM): 32 blocks, 4 slices of 32 chunks.
        assert_eq!(heuristic_ksplit(4096, 4096, 1, 132, false), 4);
        // Enough blocks: no split.
        assert_eq!(heuristic_ksplit(65536, 4096, 1, 132, false), 1);
        // Short K: no slice below MIN_CHUNKS chunks.
        assert_eq!(heuristic_ksplit(4096, 300, 1, 132, false), 1);
        for (n, k) in [(1usize, 1usize), (100, 70000), (14336, 4096), (3000, 64)] {
            let s = heuristic_ksplit(n, k, 2, 132, false);
            assert!((1..=MAX_KSPLIT).contains(&s), "{n}x{k}: {s}");
        }
    }

    #[test]
    fn names_match_their_variant_and_the_launch_bounds() {
        let mut all = std::vec::Vec::new();
        for d in [DType::Bf16, DType::F16] {
            for o in [d, DType::F32] {
                for g in M_GROUPS {
                    let n = entry_name(d, o, g);
                    assert_eq!(n, std::format!("ft_gemv_{}_{}_g{g}_w", d.name(), o.name()));
                    assert_eq!(launch_bounds(n), Some((crate::gemv::THREADS, blocks_per_sm(g) as u32)));
                    assert_eq!(crate::gemv::launch_bounds(n), None);
                    all.push(n);
                }
            }
        }
        assert_eq!(all.len(), NAMES.len());
    }

    #[test]
    fn workspace_has_a_counter_per_block() {
        let p = SmallMPlan::new(4096, 4096, 8);
        let b = blocks(p.slabs, false);
        assert_eq!(counter_bytes(&p, b), 256);
        assert_eq!(workspace_bytes(&p, b, 3, 4096), Some(256 + 4 * 3 * 4096 * p.ksplit));
        assert_eq!(workspace_bytes(&SmallMPlan::new(4096, 4096, 1), b, 3, 4096), Some(0));
    }
}
