//! The row-per-warp small-M kernel (`entry/gemv_rows.rs`): for a few rows of x (1 to
//! [`MAX_M`]) against a weight whose rows are not 16-byte aligned and whose K is short (the
//! 1x4097x777 class). Each warp owns one weight row and walks it in the row's aligned frame
//! (`gemv::row_shift` elements before K = 0), so every load of the weight is one aligned
//! 16-byte vector whatever the misalignment, no funnel shift and no copies of x first. A
//! block's 8 rows lie 8 apart ([`row_of`]), so they share one misalignment; x is staged once
//! per block in shared memory in that frame (16-bit, zeros outside K), and a lane reads the x
//! that meets its weight vector as one 16-byte shared load per row of x, lanes on consecutive
//! vectors (no bank conflicts). The products are f32 FMAs (a handful of rows of x do not pay an
//! `mma`'s 8 columns), the warp adds its lanes with shuffles (no block barrier after the loads,
//! no shared-memory reduction) and applies the epilogue.
//!
//! Shared by the kernel, the host's plan (`host/src/ops/gemv_rows.rs`) and the tests.

use crate::element::DType;

/// Warps per block (one weight row each).
pub const WARPS: usize = 8;
/// Threads per block.
pub const THREADS: u32 = (WARPS * 32) as u32;
/// 16-byte vectors a lane loads before it multiplies them: a row of up to 1024 elements is one
/// batch per lane (with a fifth vector for the first lanes at most), all in flight at once.
pub const UNROLL: usize = 4;
/// Most rows of x the kernel serves.
pub const MAX_M: usize = 8;
/// Compiled x-row counts (each lane keeps one accumulator per row).
pub const ROWS: [usize; 4] = [1, 2, 4, 8];
/// Most shared memory the staged x may take (so that 8 blocks of 8 warps fit an SM).
pub const MAX_X_BYTES: usize = 24 * 1024;

/// The compiled x-row count for `m` rows, `None` at 0 or above [`MAX_M`].
pub const fn rows_for(m: usize) -> Option<usize> {
    match m {
        1 => Some(1),
        2 => Some(2),
        3..=4 => Some(4),
        5..=8 => Some(8),
        _ => None,
    }
}

/// 16-byte vectors of one staged row of x: the longest frame of K (a shift of 7).
pub const fn x_vectors(k: usize) -> usize {
    vectors(k, 7)
}

/// Dynamic shared memory of a block for `rows` compiled rows of x and K = `k` (16-bit
/// elements); `None` on overflow.
pub const fn smem_bytes(rows: usize, k: usize) -> Option<usize> {
    let Some(e) = x_vectors(k).checked_mul(rows) else { return None };
    e.checked_mul(16)
}

/// Rows of the weight one group of blocks covers: [`WARPS`] blocks, each of the rows of one
/// residue modulo 8.
pub const GROUP_ROWS: usize = WARPS * 8;

/// Blocks of a launch for a weight of `n` rows (whole groups of [`GROUP_ROWS`]).
pub const fn blocks(n: usize) -> usize {
    n.div_ceil(GROUP_ROWS) * WARPS
}

/// The weight row of warp `warp` of block `block`: rows 8 apart, which share one
/// misalignment (8 rows of 2-byte elements are `16 * ld` bytes apart).
pub const fn row_of(block: usize, warp: usize) -> usize {
    (block / WARPS) * GROUP_ROWS + block % WARPS + 8 * warp
}
/// 16-byte vectors of a row of `k` elements walked in a frame that starts `s` elements before
/// it.
pub const fn vectors(k: usize, s: usize) -> usize {
    if k == 0 { 0 } else { (k + s).div_ceil(8) }
}

/// Whether element `i` (0..8) of vector `j` of a frame shifted by `s` lies in the row of `k`
/// elements (the others belong to a neighbour or to nothing and are multiplied as zero).
pub const fn in_row(j: usize, i: usize, s: usize, k: usize) -> bool {
    let f = 8 * j + i;
    f >= s && f < s + k
}

/// Element `i` of a frame's 16-byte vector (16-bit pairs, low half first) as its bits.
#[inline(always)]
pub const fn half_bits(w: [u32; 4], i: usize) -> u16 {
    (w[i / 2] >> (16 * (i % 2))) as u16
}

/// Entry name: `ft_gemvr_<in>_<out>_m<rows>`; `None` for a combination that is not compiled.
pub fn entry_name(dtype: DType, out: DType, rows: usize) -> Option<&'static str> {
    let ri = ROWS.iter().position(|&r| r == rows)?;
    let di = match dtype {
        DType::Bf16 => 0,
        DType::F16 => 1,
        _ => return None,
    };
    let oi = if out == dtype {
        0
    } else if out == DType::F32 {
        1
    } else {
        return None;
    };
    Some(NAMES[(di * 2 + oi) * ROWS.len() + ri])
}

/// Every compiled entry, in [`entry_name`]'s order.
pub const NAMES: [&str; 16] = [
    "ft_gemvr_bf16_bf16_m1",
    "ft_gemvr_bf16_bf16_m2",
    "ft_gemvr_bf16_bf16_m4",
    "ft_gemvr_bf16_bf16_m8",
    "ft_gemvr_bf16_f32_m1",
    "ft_gemvr_bf16_f32_m2",
    "ft_gemvr_bf16_f32_m4",
    "ft_gemvr_bf16_f32_m8",
    "ft_gemvr_f16_f16_m1",
    "ft_gemvr_f16_f16_m2",
    "ft_gemvr_f16_f16_m4",
    "ft_gemvr_f16_f16_m8",
    "ft_gemvr_f16_f32_m1",
    "ft_gemvr_f16_f32_m2",
    "ft_gemvr_f16_f32_m4",
    "ft_gemvr_f16_f32_m8",
];

/// Launch bounds of an entry (threads, blocks per SM): 4 blocks (up to 64 registers) for 1 and
/// 2 rows of x, 2 (up to 128) for 4 and 8, whose accumulators and widened x spilled under 64
/// (f16 most: 512 and 1252 bytes); `None` for other names.
pub fn launch_bounds(entry: &str) -> Option<(u32, u32)> {
    let i = NAMES.iter().position(|&n| n == entry)?;
    Some((THREADS, if ROWS[i % ROWS.len()] <= 2 { 4 } else { 2 }))
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::format;

    #[test]
    fn every_name_is_found_once_and_only_16_bit_inputs_are_compiled() {
        let mut seen = std::collections::HashSet::new();
        for dt in [DType::Bf16, DType::F16] {
            for out in [dt, DType::F32] {
                for r in ROWS {
                    let n = entry_name(dt, out, r).unwrap();
                    assert!(n.contains(dt.name()) && n.ends_with(&format!("_m{r}")), "{n}");
                    assert!(seen.insert(n));
                    assert_eq!(launch_bounds(n), Some((THREADS, if r <= 2 { 4 } else { 2 })));
                }
            }
        }
        assert_eq!(seen.len(), NAMES.len());
        assert_eq!(entry_name(DType::F32, DType::F32, 1), None);
        assert_eq!(entry_name(DType::Bf16, DType::F16, 1), None);
        assert_eq!(entry_name(DType::Bf16, DType::Bf16, 3), None);
        assert_eq!(launch_bounds("ft_gemv_bf16_bf16_g1_v"), None);
    }

    #[test]
    fn rows_round_up_to_a_compiled_count() {
        for m in 1..=MAX_M {
            let r = rows_for(m).unwrap();
            assert!(r >= m && ROWS.contains(&r), "{m} -> {r}");
        }
        assert_eq!(rows_for(0), None);
        assert_eq!(rows_for(MAX_M + 1), None);
    }

    #[test]
    fn a_frame_covers_its_row_exactly_once() {
        // Every element of the row lies in exactly one (vector, slot) of the frame, in order,
        // and the frame's vectors start on 16-byte boundaries of the operand.
        for k in [0usize, 1, 2, 7, 8, 9, 63, 777, 1025] {
            for s in 0..8 {
                let nv = vectors(k, s);
                let mut next = 0;
                for j in 0..nv {
                    for i in 0..8 {
                        if in_row(j, i, s, k) {
                            assert_eq!(8 * j + i - s, next, "k {k} s {s}");
                            next += 1;
                        }
                    }
                }
                assert_eq!(next, k, "k {k} s {s}");
                // No vector past the last one would hold an element.
                assert!((0..8).all(|i| !in_row(nv, i, s, k)));
            }
        }
    }

    #[test]
    fn shared_memory_grows_with_rows_and_k_and_overflow_is_none() {
        assert_eq!(smem_bytes(1, 777), Some(98 * 16));
        assert_eq!(smem_bytes(8, 0), Some(0));
        assert_eq!(smem_bytes(8, usize::MAX - 8), None);
        assert_eq!(blocks(4097), 65 * 8);
        assert_eq!(blocks(1), 8);
    }

    #[test]
    fn blocks_cover_every_row_once_with_one_misalignment_each() {
        for n in [1usize, 5, 63, 64, 65, 4097] {
            let mut seen = std::vec![0u8; n];
            for b in 0..blocks(n) {
                let rows: std::vec::Vec<usize> = (0..WARPS).map(|w| row_of(b, w)).collect();
                // Rows 8 apart: the same offset modulo 16 bytes at any leading dimension.
                for ld in [1usize, 7, 777, 4099] {
                    let shift = |r: usize| (r * ld * 2) % 16;
                    assert!(rows.iter().all(|&r| shift(r) == shift(rows[0])), "n {n} block {b} ld {ld}");
                }
                for r in rows.into_iter().filter(|&r| r < n) {
                    seen[r] += 1;
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "n {n}");
        }
    }

    #[test]
    fn half_bits_reads_pairs_low_half_first() {
        let w = [0x2222_1111, 0x4444_3333, 0x6666_5555, 0x8888_7777];
        let got: [u16; 8] = core::array::from_fn(|i| half_bits(w, i));
        assert_eq!(got, [0x1111, 0x2222, 0x3333, 0x4444, 0x5555, 0x6666, 0x7777, 0x8888]);
    }
}
