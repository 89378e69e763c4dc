//! The row kernel for a few rows of x (1 to [`MAX_M`]) against a weight whose rows are not
//! 16-byte aligned (the 1x4097x777 and 33x1023x777 classes), on tensor cores
//! (`entry/gemv_rows.rs`). A group of 8 weight rows 8 apart ([`row_of`]) shares one
//! misalignment and is walked in its aligned frame (`gemv::row_shift` elements before
//! K = 0): every load of the weight is one aligned 16-byte vector whatever the misalignment, no
//! funnel shift and no copies of x first. A block's rows of x (up to [`MAX_ROWS`]: 16 per MMA
//! tile, [`m_tiles`] tiles) are staged once per block in shared memory in that frame (16-bit,
//! zeros outside K); more rows of x than a block takes go to further blocks along y
//! ([`slices`]), which read the same weight rows (from L2). A block holds 1 to 8 groups of one
//! residue modulo 8, and a team of its warps per group ([`team_for`]: short rows need fewer)
//! splits K in chunks of 32 elements: in a chunk, lane `4g + t` loads vector `t` of row `g` and
//! the x vectors that meet it, and the products go to two `mma.m16n8k16` per MMA tile with f32
//! accumulators: the weight rows are the MMA's 8 columns, 16 rows of x its rows, and the 32
//! elements of a chunk its K of the two MMAs in a fixed order that both operands share (a dot
//! product does not care in which order K is summed). So an element costs no conversion and no
//! FMA of its own, and one weight vector serves every row of x of the block. The warps' partial
//! sums meet once in shared memory, and the epilogue runs on one thread per output.
//!
//! Shared by the kernel, the host's plan (`host/src/ops/gemv_rows.rs`) and the tests.

use crate::element::DType;

/// Warps per block (a team of them per 8-row group; each takes every team-th chunk of 32
/// elements of its group's rows).
pub const WARPS: usize = 8;
/// Weight rows per block (the MMA's 8 columns).
pub const SLOTS: usize = 8;
/// Threads per block.
pub const THREADS: u32 = (WARPS * 32) as u32;
/// Chunks a warp loads before it multiplies them: a row of up to 1024 elements is one batch of
/// the block (a lane's 16-byte vectors, all in flight at once).
pub const UNROLL: usize = 4;
/// Elements of K a chunk covers (4 lanes of a row, one 16-byte vector each).
pub const CHUNK: usize = 32;
/// Most rows of x the kernel serves (in [`slices`] of a block's rows each).
pub const MAX_M: usize = 64;
/// Most rows of x one block takes (four MMA tiles of 16).
pub const MAX_ROWS: usize = 64;
/// Compiled x-row counts per block (rows of x staged; the others of an MMA tile are zeros).
pub const ROWS: [usize; 7] = [1, 4, 8, 16, 32, 48, 64];
/// Most shared memory the staged x may take in a block of up to 16 rows (4 blocks an SM).
pub const MAX_X_BYTES: usize = 40 * 1024;
/// Most shared memory the staged x may take in a block of more than 16 rows (2 blocks an SM).
pub const MAX_X_BYTES_WIDE: usize = 96 * 1024;
/// Shared memory of the warps' partial sums of one MMA tile (4 floats per lane), after x.
pub const RED_BYTES: usize = WARPS * 32 * 16;

/// The compiled x-row count that holds `m` rows in one block, `None` at 0 or above
/// [`MAX_ROWS`].
pub const fn rows_for(m: usize) -> Option<usize> {
    match m {
        1 => Some(1),
        2..=4 => Some(4),
        5..=8 => Some(8),
        9..=16 => Some(16),
        17..=32 => Some(32),
        33..=48 => Some(48),
        49..=64 => Some(64),
        _ => None,
    }
}

/// MMA tiles of 16 rows of x for `rows` compiled rows (one below 16: its rows past `rows` are
/// zeros).
pub const fn m_tiles(rows: usize) -> usize {
    if rows <= 16 { 1 } else { rows.div_ceil(16) }
}

/// Blocks along y for `m` rows of x at `rows` rows per block.
pub const fn slices(m: usize, rows: usize) -> usize {
    if rows == 0 { 0 } else { m.div_ceil(rows) }
}

/// Blocks of an entry of `rows` compiled rows that share an SM (its launch bounds): 4 up to 16
/// rows (up to 64 registers), 2 above (more accumulators, x vectors and staging in flight).
pub const fn blocks_per_sm(rows: usize) -> u32 {
    if rows <= 16 { 4 } else { 2 }
}

/// Most shared memory the staged x of a block of `rows` compiled rows may take.
pub const fn max_x_bytes(rows: usize) -> usize {
    if rows <= 16 { MAX_X_BYTES } else { MAX_X_BYTES_WIDE }
}

/// 16-byte vectors a thread may load before it stores them while staging x (the compiled
/// depth; a launch asks for up to this many, [`stage_for`]): 2 for up to 4 rows, whose x is at
/// most two rounds of the block's threads; 4 from 8 rows, so that a 16-row slice of K up to 1024
/// (up to 2,100 vectors) lands in two rounds instead of four (each round one trip to L2 before
/// the block's first multiply).
pub const fn stage_unroll(rows: usize) -> usize {
    if rows <= 4 { 2 } else { 4 }
}

/// The staging depth a launch of `rows` compiled rows asks for: `asked` (1 to the compiled
/// depth, A/B runs) or the compiled depth.
pub const fn stage_for(rows: usize, asked: Option<usize>) -> usize {
    let most = stage_unroll(rows);
    match asked {
        Some(d) if d >= 1 && d <= most => d,
        _ => most,
    }
}

/// 16-byte vectors of one staged row of x: the longest frame of K (a shift of 7), rounded up to
/// 4 modulo 8 (rows `g` and `g + 1`, read by the same 8 lanes of a shared load, then fall on
/// different banks, and a chunk's 4 vectors never run past the row).
pub const fn x_stride(k: usize) -> usize {
    let v = vectors(k, 7);
    v + (12 - v % 8) % 8
}

/// Shared memory of the staged x for `rows` compiled rows and K = `k` (16-bit elements);
/// `None` on overflow.
pub const fn x_bytes(rows: usize, k: usize) -> Option<usize> {
    let Some(e) = x_stride(k).checked_mul(rows) else { return None };
    e.checked_mul(16)
}

/// Dynamic shared memory of a block: the staged x, then the warps' partial sums (one area per
/// MMA tile).
pub const fn smem_bytes(rows: usize, k: usize) -> Option<usize> {
    let Some(x) = x_bytes(rows, k) else { return None };
    x.checked_add(RED_BYTES * m_tiles(rows))
}

/// Whether the staged x of `rows` compiled rows and K = `k` fits the block's limit
/// ([`max_x_bytes`]).
pub const fn x_fits(rows: usize, k: usize) -> bool {
    match x_bytes(rows, k) {
        Some(b) => b <= max_x_bytes(rows),
        None => false,
    }
}

/// Rows of the weight one group of 8 rows per residue modulo 8 covers.
pub const GROUP_ROWS: usize = SLOTS * 8;

/// Teams a block's warps may form (warps per 8-row group); a block of `team` warps per group
/// covers `WARPS / team` groups of the same residue modulo 8.
pub const TEAMS: [usize; 4] = [1, 2, 4, 8];

/// Chunks of 32 elements of a row of `k` elements in the longest frame.
pub const fn chunks(k: usize) -> usize {
    vectors(k, 7).div_ceil(CHUNK / 8)
}

/// Blocks of a launch for a weight of `n` rows, `team` warps per 8-row group (a block covers
/// `WARPS / team` groups of one residue modulo 8; 8 residues).
pub const fn blocks(n: usize, team: usize) -> usize {
    n.div_ceil(GROUP_ROWS * (WARPS / team)) * 8
}

/// Batches of [`UNROLL`] chunks a warp may take per row for `rows` compiled rows of x: one for a
/// single row; two from 4 rows, where x staged per block costs as much as the block's weight
/// (ncu, 7x12001x513: 53% of issue slots busy with 8 warps per group, most of them staging x),
/// so that a block holds more groups for one staging.
pub const fn batches_for(rows: usize) -> usize {
    if rows >= 4 { 2 } else { 1 }
}

/// The team for K = `k` and `n` weight rows on `sms` SMs: the fewest warps per group that hold
/// a row's chunks in `batches` batches of [`UNROLL`] each (fewer, fuller blocks: x staged once
/// for several groups, no idle warps on short rows), but enough blocks to cover the SMs.
pub const fn team_for(n: usize, k: usize, sms: usize, batches: usize) -> usize {
    let mut i = 0;
    while i < TEAMS.len() {
        let t = TEAMS[i];
        if chunks(k) <= UNROLL * t * batches && blocks(n, t) >= sms {
            return t;
        }
        i += 1;
    }
    WARPS
}

/// Weight row `slot` (0..8) of group `group` (0..WARPS / team) of block `block` with `team`
/// warps per group: rows 8 apart, which share one misalignment (8 rows of 2-byte elements are
/// `16 * ld` bytes apart), and the block's groups 64 rows apart (the same residue modulo 8).
pub const fn row_of(block: usize, team: usize, group: usize, slot: usize) -> usize {
    ((block / 8) * (WARPS / team) + group) * GROUP_ROWS + block % 8 + 8 * slot
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

/// The (row of x, weight slot) of accumulator `c` of lane `lane`: accumulator `c % 4` of MMA
/// tile `c / 4` (its rows 16 further down), where an `mma.m16n8k16`'s result holds rows
/// `lane / 4` and `lane / 4 + 8`, columns `2 (lane % 4)` and the next.
pub const fn acc_place(lane: usize, c: usize) -> (usize, usize) {
    (16 * (c / 4) + lane / 4 + 8 * ((c % 4) / 2), 2 * (lane % 4) + c % 2)
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
pub const NAMES: [&str; 28] = [
    "ft_gemvr_bf16_bf16_m1",
    "ft_gemvr_bf16_bf16_m4",
    "ft_gemvr_bf16_bf16_m8",
    "ft_gemvr_bf16_bf16_m16",
    "ft_gemvr_bf16_bf16_m32",
    "ft_gemvr_bf16_bf16_m48",
    "ft_gemvr_bf16_bf16_m64",
    "ft_gemvr_bf16_f32_m1",
    "ft_gemvr_bf16_f32_m4",
    "ft_gemvr_bf16_f32_m8",
    "ft_gemvr_bf16_f32_m16",
    "ft_gemvr_bf16_f32_m32",
    "ft_gemvr_bf16_f32_m48",
    "ft_gemvr_bf16_f32_m64",
    "ft_gemvr_f16_f16_m1",
    "ft_gemvr_f16_f16_m4",
    "ft_gemvr_f16_f16_m8",
    "ft_gemvr_f16_f16_m16",
    "ft_gemvr_f16_f16_m32",
    "ft_gemvr_f16_f16_m48",
    "ft_gemvr_f16_f16_m64",
    "ft_gemvr_f16_f32_m1",
    "ft_gemvr_f16_f32_m4",
    "ft_gemvr_f16_f32_m8",
    "ft_gemvr_f16_f32_m16",
    "ft_gemvr_f16_f32_m32",
    "ft_gemvr_f16_f32_m48",
    "ft_gemvr_f16_f32_m64",
];

/// Launch bounds of an entry (threads, blocks per SM): [`blocks_per_sm`] of its rows (up to 16
/// rows 4 blocks, up to 64 registers: a lane holds [`UNROLL`] weight vectors, the x vectors of
/// one chunk and 4 accumulators per MMA tile); `None` for other names.
pub fn launch_bounds(entry: &str) -> Option<(u32, u32)> {
    let i = NAMES.iter().position(|&n| n == entry)?;
    Some((THREADS, blocks_per_sm(ROWS[i % ROWS.len()])))
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
                    assert_eq!(launch_bounds(n), Some((THREADS, if r <= 16 { 4 } else { 2 })));
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
        for m in 1..=MAX_ROWS {
            let r = rows_for(m).unwrap();
            assert!(r >= m && ROWS.contains(&r), "{m} -> {r}");
            // The smallest compiled count that holds m.
            assert!(ROWS.iter().all(|&c| c < m || c >= r), "{m} -> {r}");
            assert!(m_tiles(r) * 16 >= r && m_tiles(r) <= 4);
        }
        assert_eq!(rows_for(0), None);
        assert_eq!(rows_for(MAX_ROWS + 1), None);
        assert_eq!((m_tiles(1), m_tiles(16), m_tiles(32), m_tiles(48), m_tiles(64)), (1, 1, 2, 3, 4));
        // Slices of a block's rows cover every row of x once.
        for m in 1..=MAX_M {
            for r in ROWS {
                assert!(slices(m, r) * r >= m && (slices(m, r) - 1) * r < m, "{m} {r}");
            }
        }
        assert_eq!((slices(33, 16), slices(33, 48), slices(0, 16)), (3, 1, 0));
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
        // 777 elements in a frame shifted by up to 7: 98 vectors, stored 100 apart.
        assert_eq!(x_stride(777), 100);
        assert_eq!(smem_bytes(1, 777), Some(100 * 16 + RED_BYTES));
        assert_eq!(x_bytes(8, 0), Some(8 * 4 * 16));
        assert_eq!(smem_bytes(8, usize::MAX - 8), None);
        assert_eq!(x_bytes(16, usize::MAX / 8), None);
        assert_eq!(blocks(4097, 8), 65 * 8);
        assert_eq!(blocks(4097, 1), 9 * 8);
        assert_eq!(blocks(1, 4), 8);
    }

    #[test]
    fn blocks_cover_every_row_once_with_one_misalignment_each() {
        for n in [1usize, 5, 63, 64, 65, 513, 4097] {
            for team in TEAMS {
                let mut seen = std::vec![0u8; n];
                for b in 0..blocks(n, team) {
                    let rows: std::vec::Vec<usize> =
                        (0..WARPS / team).flat_map(|g| (0..SLOTS).map(move |sl| row_of(b, team, g, sl))).collect();
                    // The same offset modulo 16 bytes at any leading dimension.
                    for ld in [1usize, 7, 777, 4099] {
                        let shift = |r: usize| (r * ld * 2) % 16;
                        assert!(
                            rows.iter().all(|&r| shift(r) == shift(rows[0])),
                            "n {n} team {team} block {b} ld {ld}"
                        );
                    }
                    for r in rows.into_iter().filter(|&r| r < n) {
                        seen[r] += 1;
                    }
                }
                assert!(seen.iter().all(|&c| c == 1), "n {n} team {team}");
            }
        }
    }

    #[test]
    fn teams_hold_a_row_in_one_batch_and_cover_the_sms() {
        // Short rows: one warp per group while the blocks still cover the SMs.
        assert_eq!(team_for(50_000, 100, 132, 1), 1);
        assert_eq!(team_for(50_000, 255, 132, 1), 4);
        assert_eq!(team_for(4097, 777, 132, 1), 8);
        // Two batches per warp: half the warps per group.
        assert_eq!(team_for(4097, 777, 132, 2), 4);
        assert_eq!(team_for(12_001, 513, 132, 2), 4);
        assert_eq!((batches_for(1), batches_for(4), batches_for(16)), (1, 2, 2));
        // Few rows: more warps per group, so that more blocks run.
        assert_eq!(team_for(3000, 65, 132, 1), 4);
        assert_eq!(team_for(5, 7, 132, 2), 8);
        for k in [0usize, 1, 100, 129, 255, 256, 511, 777, 1024, 5000] {
            for n in [1usize, 700, 6000, 50_000] {
                for b in [1, 2] {
                    let t = team_for(n, k, 132, b);
                    assert!(TEAMS.contains(&t));
                    assert!(t == WARPS || (chunks(k) <= UNROLL * t * b && blocks(n, t) >= 132), "n {n} k {k}");
                }
            }
        }
    }

    #[test]
    fn x_rows_are_4_mod_8_vectors_apart_and_hold_a_whole_chunk() {
        for k in 0..2000 {
            let xs = x_stride(k);
            assert_eq!(xs % 8, 4, "k {k}");
            for sh in 0..8 {
                // The last chunk's 4 vectors lie inside the staged row.
                assert!(vectors(k, sh).div_ceil(4) * 4 <= xs, "k {k} s {sh}");
            }
        }
    }

    #[test]
    fn accumulators_cover_the_rows_of_x_by_8_slots_once() {
        for tiles in 1..=4 {
            let mut seen = std::vec![[0u8; SLOTS]; 16 * tiles];
            for lane in 0..32 {
                for c in 0..4 * tiles {
                    let (r, slot) = acc_place(lane, c);
                    seen[r][slot] += 1;
                }
            }
            assert!(seen.iter().flatten().all(|&n| n == 1), "{tiles} tiles");
        }
        assert_eq!(acc_place(5, 3), (9, 3));
        assert_eq!(acc_place(5, 7), (25, 3));
        assert_eq!(acc_place(0, 12), (48, 0));
    }

    #[test]
    fn wide_blocks_take_more_shared_memory_and_fewer_blocks_per_sm() {
        assert_eq!(smem_bytes(64, 777), Some(64 * 100 * 16 + 4 * RED_BYTES));
        assert_eq!(smem_bytes(16, 777), Some(16 * 100 * 16 + RED_BYTES));
        assert!(x_fits(48, 777) && !x_fits(64, 777) && x_fits(16, 1200) && !x_fits(16, 1300));
        assert!(!x_fits(64, usize::MAX / 4));
        for r in ROWS {
            let most = max_x_bytes(r) + RED_BYTES * m_tiles(r) + 1024;
            // Every block that fits leaves room for its blocks per SM in an SM's 228 KiB (the
            // driver's 1 KiB per block included).
            assert!(most * blocks_per_sm(r) as usize <= 228 * 1024, "{r}");
            assert!(stage_unroll(r) >= 2);
            assert_eq!(stage_for(r, None), stage_unroll(r));
            assert_eq!(stage_for(r, Some(1)), 1);
            assert_eq!(stage_for(r, Some(0)), stage_unroll(r));
            assert_eq!(stage_for(r, Some(99)), stage_unroll(r));
        }
    }
}
