//! Small-M GEMM (the "GEMV family": M = 1..=64 rows against a large weight, the decode shape of
//! every LLM layer): launch geometry, the K permutation that lets each thread feed
//! `mma.m16n8k16` straight from 16-byte loads, the split-K workspace layout and the entry
//! names. Shared by the kernel (`entry/gemv.rs`), the host's planning and the tests.
//!
//! The product is computed transposed, `Dᵀ = W · xᵀ`: a slab of [`SLAB`] output columns (rows
//! of the weight, the `mma`'s M dimension) against up to 8 rows of x per `mma` (its N). Because
//! a dot product does not care in which order K is summed, the thread with `t = lane % 4` loads
//! 8 consecutive k (one 16-byte vector) of each of its two weight rows and of its x row, and the
//! fragment registers are filled from those words ([`a_fragment`], [`b_fragment`]): two `mma`s
//! per 32-k chunk, no shared memory, no shuffles.
//!
//! A block may be [`WIDTHS`] slabs wide: each warp then multiplies the x vectors it loaded with
//! `width` slabs' weight vectors, so x is read from L2 once per `16 x width` weight rows instead
//! of once per 16 (with 32 rows of x, narrow slabs pull twice as many bytes of x as of weight).

use crate::element::DType;

/// Largest M the family serves (8 groups of 8 rows).
pub const MAX_M: usize = 64;
/// Output columns (weight rows) per block: the `mma`'s M dimension.
pub const SLAB: usize = 16;
/// Warps per block; they share the block's slab and split its K range.
pub const WARPS: usize = 8;
/// Threads per block.
pub const THREADS: u32 = (WARPS * 32) as u32;
/// K per warp step: 4 threads x 8 elements (two `m16n8k16`).
pub const CHUNK: usize = 32;
/// Largest split of K over blocks.
pub const MAX_KSPLIT: usize = 64;
/// Compiled row-group counts (rows of x = 8 x groups).
pub const M_GROUPS: [usize; 4] = [1, 2, 4, 8];
/// Compiled block widths, in slabs (16 weight rows each) per block; widths above 1 exist for
/// the 16-byte (`v`) variants only, and 4 not with 8 row groups (its 128 accumulators per
/// thread would spill).
pub const WIDTHS: [usize; 3] = [1, 2, 4];

/// Whether `groups` row groups are compiled at `width` slabs per block.
pub const fn width_compiled(groups: usize, width: usize) -> bool {
    match width {
        1 | 2 => true,
        4 => groups <= 4,
        _ => false,
    }
}

/// The compiled row-group count for `m` rows (1..=64), `None` above [`MAX_M`] or at 0.
pub const fn m_groups_for(m: usize) -> Option<usize> {
    match m {
        1..=8 => Some(1),
        9..=16 => Some(2),
        17..=32 => Some(4),
        33..=64 => Some(8),
        _ => None,
    }
}

/// Chunks a warp loads before it multiplies (more bytes in flight where registers allow):
/// about 64 registers of loaded vectors (8 per slab of weight, 4 per group of x), 1 to 4.
pub const fn unroll(groups: usize, width: usize) -> usize {
    let u = 64 / (8 * width + 4 * groups);
    if u < 1 {
        1
    } else if u > 4 {
        4
    } else {
        u
    }
}

/// Dynamic shared memory of a block: one f32 per (warp, row of x, block column) for the
/// cross-warp reduction, plus 16 bytes for the "last block" flag of the split.
pub const fn smem_bytes(groups: usize, width: usize) -> usize {
    WARPS * groups * 8 * SLAB * width * 4 + 16
}

/// Blocks per SM a variant is compiled for: 2, or 1 where a wide block's accumulators, loaded
/// vectors and row addresses need more than the 128 registers two blocks of [`THREADS`] leave
/// each thread (ptxas spilled 132-188 bytes at 8 = groups x width under that cap).
pub const fn blocks_per_sm(groups: usize, width: usize) -> u32 {
    if width > 1 && groups * width >= 8 { 1 } else { 2 }
}

/// How one call is cut: `slabs` blocks along N (each `width` slabs of [`SLAB`] weight rows),
/// `ksplit` blocks along K of `kslice` elements (a multiple of [`CHUNK`]; the last slice is
/// shorter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmallMPlan {
    pub slabs: usize,
    pub ksplit: usize,
    pub kslice: usize,
    /// Slabs per block (one of [`WIDTHS`]).
    pub width: usize,
}

impl SmallMPlan {
    /// The plan for `requested` K slices (clamped to 1..=[`MAX_KSPLIT`]; fewer when K is too
    /// short for that many whole chunks).
    pub const fn new(n: usize, k: usize, requested: usize) -> SmallMPlan {
        SmallMPlan::with_rows(n, k, requested, false, 1)
    }

    /// As [`SmallMPlan::new`]; `interleaved`: the weight's rows are not 16-byte aligned, so
    /// slabs hold rows [`INTERLEAVE`] apart ([`slab_row`]: whole groups of `SLAB * INTERLEAVE`
    /// rows) and K is cut in the aligned frame of their shift (up to 7 elements longer);
    /// `width`: slabs per block ([`block_slab`]).
    pub const fn with_rows(n: usize, k: usize, requested: usize, interleaved: bool, width: usize) -> SmallMPlan {
        let w = if width < 1 { 1 } else { width };
        let (slabs, k) = if interleaved {
            (n.div_ceil(SLAB * INTERLEAVE * w) * INTERLEAVE, k + INTERLEAVE - 1)
        } else {
            (n.div_ceil(SLAB * w), k)
        };
        let req = if requested < 1 {
            1
        } else if requested > MAX_KSPLIT {
            MAX_KSPLIT
        } else {
            requested
        };
        let chunks = if k == 0 { 1 } else { k.div_ceil(CHUNK) };
        let per = chunks.div_ceil(req);
        let kslice = per * CHUNK;
        let ksplit = chunks.div_ceil(per);
        SmallMPlan { slabs, ksplit, kslice, width: w }
    }

    /// The built-in split: none when the slabs alone give every SM at least one block;
    /// otherwise as many slices as fit the variant's `per_sm` blocks per SM
    /// ([`blocks_per_sm`]) without a second wave (rounded down: on the H100, 63 slabs of
    /// 24x999x1500 ran 0.024 ms in 4 slices and 0.032 in 5, two blocks per SM), each at least
    /// one chunk per warp (33x1023x777: 4 slices of 7 chunks 0.031 ms, unsplit 0.055;
    /// bench/results/irregular/run5-*/README.md). `width`: slabs per block.
    pub const fn heuristic_ksplit(n: usize, k: usize, sms: usize, width: usize, per_sm: usize) -> usize {
        let slabs = n.div_ceil(SLAB * if width < 1 { 1 } else { width });
        if slabs >= sms {
            return 1;
        }
        let want = (if per_sm < 1 { 1 } else { per_sm } * sms) / slabs;
        let most = k.div_ceil(CHUNK).div_ceil(WARPS);
        let s = if want < most { want } else { most };
        if s < 1 {
            1
        } else if s > MAX_KSPLIT {
            MAX_KSPLIT
        } else {
            s
        }
    }

    /// Bytes of the split's arrival counters (one u32 per slab and matrix), rounded up to 256 so
    /// the partial products after them stay aligned.
    pub const fn counter_bytes(&self, batch: usize) -> usize {
        (self.slabs * batch * 4).div_ceil(256) * 256
    }

    /// Workspace bytes of a split call: counters, then `[batch][ksplit][m][n]` f32 partials.
    /// 0 without a split. `None` on overflow.
    pub const fn workspace_bytes(&self, m: usize, n: usize, batch: usize) -> Option<usize> {
        if self.ksplit <= 1 {
            return Some(0);
        }
        let Some(mn) = m.checked_mul(n) else { return None };
        let Some(x) = mn.checked_mul(self.ksplit) else { return None };
        let Some(x) = x.checked_mul(batch) else { return None };
        let Some(x) = x.checked_mul(4) else { return None };
        x.checked_add(self.counter_bytes(batch))
    }
}

/// The slab (in [`slab_row`]'s numbering) that slab `r` (0..`width`) of block `block` multiplies:
/// consecutive slabs, or with `interleaved` slabs [`INTERLEAVE`] apart, which hold rows of one
/// residue modulo [`INTERLEAVE`] and so share one misalignment (the block walks K in one frame).
pub const fn block_slab(block: usize, r: usize, width: usize, interleaved: bool) -> usize {
    if interleaved { ((block / INTERLEAVE) * width + r) * INTERLEAVE + block % INTERLEAVE } else { block * width + r }
}

/// The built-in width: one slab per block, except 33 to 64 rows (8 groups) against a weight
/// of at least 2^24 elements, where blocks of 2 slabs read x half as often. On the H100
/// (bench/results/smallm-width-ba3e29311e30/): wider blocks lost on every 1-32-row shape
/// (32x4096x4096 0.025 ms at width 1, 0.037 at 2 and 4; 16x11008x4096 0.048 against 0.054 and
/// 0.062), but 33x8191x4099 in place ran 0.069-0.074 at width 2 against 0.091 at width 1 (and
/// 0.100 packed for the Hopper tiles). `FERROTUNE_SMALL_M_WIDTH` overrides it on the host; the
/// tuner searches every compiled width.
pub const fn heuristic_width(groups: usize, n: usize, k: usize) -> usize {
    if groups >= 8 && n.saturating_mul(k) >= 1 << 24 { 2 } else { 1 }
}

/// Rows apart inside an interleaved slab: 8 rows of 2-byte elements are `16 * ld` bytes apart,
/// so rows `r`, `r + 8`, ... share their misalignment whatever `ld` is.
pub const INTERLEAVE: usize = 8;

/// The weight row (an output column) of column `nl` (0..[`SLAB`]) of slab `slab`: consecutive
/// rows, or with `interleaved` rows [`INTERLEAVE`] apart (slab `s` of a group of
/// `SLAB * INTERLEAVE` rows takes the rows congruent to `s % INTERLEAVE`).
pub const fn slab_row(slab: usize, nl: usize, interleaved: bool) -> usize {
    if interleaved {
        (slab / INTERLEAVE) * SLAB * INTERLEAVE + slab % INTERLEAVE + INTERLEAVE * nl
    } else {
        slab * SLAB + nl
    }
}

/// How many 2-byte elements past a 16-byte boundary row `row` of an operand at byte address
/// `base` with leading dimension `ld` starts (0..8). An interleaved slab reads its rows in the
/// frame that starts this many elements before K = 0: there every 16-byte load is aligned.
pub const fn row_shift(base: usize, row: usize, ld: usize) -> usize {
    (base.wrapping_add(row.wrapping_mul(ld).wrapping_mul(2)) % 16) / 2
}

/// The k (offset inside a 32-k chunk) that thread `t = lane % 4` feeds to `mma` `j` (0 or 1)
/// in the k-slot pair `2t + 8 hi + h` (`hi`, `h` in 0..2): `8t + 4j + 2hi + h`, i.e. word
/// `2j + hi` of the thread's 16-byte vector at `8t`. A bijection of the 32 (t, j, hi, h) onto
/// 0..32 (tested), so the two `mma`s add up exactly the chunk's products.
pub const fn chunk_k(t: usize, j: usize, hi: usize, h: usize) -> usize {
    8 * t + 4 * j + 2 * hi + h
}

/// A fragment of `mma` `j` from the thread's two weight vectors (rows `l/4` and `l/4 + 8` of
/// the slab, 8 consecutive k each, as 16-bit pairs): registers in the ISA's order (row lo,
/// slots 2t; row hi, slots 2t; row lo, slots 2t+8; row hi, slots 2t+8).
#[inline(always)]
pub const fn a_fragment(lo: [u32; 4], hi: [u32; 4], j: usize) -> [u32; 4] {
    [lo[2 * j], hi[2 * j], lo[2 * j + 1], hi[2 * j + 1]]
}

/// B fragment of `mma` `j` from the thread's x vector (row `l/4` of the group, same 8 k).
#[inline(always)]
pub const fn b_fragment(x: [u32; 4], j: usize) -> [u32; 2] {
    [x[2 * j], x[2 * j + 1]]
}

/// The 8 16-bit elements starting `s` elements (0..8) into the 32 bytes `lo ++ hi`: how a row
/// whose elements are not 16-byte aligned is read with two aligned 16-byte loads. Constant
/// indices and selects only (stays in registers on the GPU).
#[inline(always)]
pub fn funnel(lo: [u32; 4], hi: [u32; 4], s: usize) -> [u32; 4] {
    let w = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]];
    let (q, odd) = (s / 2, s % 2 == 1);
    let pick = |i: usize| match q {
        0 => w[i],
        1 => w[i + 1],
        2 => w[i + 2],
        _ => w[i + 3],
    };
    let mut out = [0u32; 4];
    for (j, o) in out.iter_mut().enumerate() {
        let (a, b) = (pick(j), pick(j + 1));
        *o = if odd { (a >> 16) | (b << 16) } else { a };
    }
    out
}

/// Entry name of a small-M variant: `ft_gemv_<in>_<out>_g<groups>_<v|s>[_w<width>]` (`v`:
/// K-contiguous weight and x (A row-major, B column-major), 16-byte loads, two and a funnel
/// shift where a row is not 16-byte aligned; `s`: element loads in any layout; `_w2`, `_w4`:
/// blocks of 2 or 4 slabs, `v` only, [`width_compiled`]). `None` for a combination that is not
/// compiled.
pub fn entry_name(dtype: DType, out: DType, groups: usize, vec: bool, width: usize) -> Option<&'static str> {
    let vi = VARIANTS.iter().position(|&v| v == (groups, vec, width))?;
    let di = match dtype {
        DType::Bf16 => 0,
        DType::F16 => 1,
        _ => return None,
    };
    let oi = if out == DType::F32 {
        1
    } else if out == dtype {
        0
    } else {
        return None;
    };
    Some(NAMES[(di * 2 + oi) * VARIANTS.len() + vi])
}

/// The compiled (groups, 16-byte loads, width) of each input and output type, in [`NAMES`]'
/// order: every group count with and without 16-byte loads at width 1, and the widths
/// [`width_compiled`] allows with them.
pub const VARIANTS: [(usize, bool, usize); 15] = [
    (1, true, 1),
    (1, false, 1),
    (1, true, 2),
    (1, true, 4),
    (2, true, 1),
    (2, false, 1),
    (2, true, 2),
    (2, true, 4),
    (4, true, 1),
    (4, false, 1),
    (4, true, 2),
    (4, true, 4),
    (8, true, 1),
    (8, false, 1),
    (8, true, 2),
];

/// (groups, width) of a compiled small-M entry, `None` for other names.
pub fn variant_of(entry: &str) -> Option<(usize, usize)> {
    let i = NAMES.iter().position(|&n| n == entry)?;
    let (g, _, w) = VARIANTS[i % VARIANTS.len()];
    Some((g, w))
}

/// Every compiled entry, in [`entry_name`]'s order.
pub const NAMES: [&str; 60] = [
    "ft_gemv_bf16_bf16_g1_v",
    "ft_gemv_bf16_bf16_g1_s",
    "ft_gemv_bf16_bf16_g1_v_w2",
    "ft_gemv_bf16_bf16_g1_v_w4",
    "ft_gemv_bf16_bf16_g2_v",
    "ft_gemv_bf16_bf16_g2_s",
    "ft_gemv_bf16_bf16_g2_v_w2",
    "ft_gemv_bf16_bf16_g2_v_w4",
    "ft_gemv_bf16_bf16_g4_v",
    "ft_gemv_bf16_bf16_g4_s",
    "ft_gemv_bf16_bf16_g4_v_w2",
    "ft_gemv_bf16_bf16_g4_v_w4",
    "ft_gemv_bf16_bf16_g8_v",
    "ft_gemv_bf16_bf16_g8_s",
    "ft_gemv_bf16_bf16_g8_v_w2",
    "ft_gemv_bf16_f32_g1_v",
    "ft_gemv_bf16_f32_g1_s",
    "ft_gemv_bf16_f32_g1_v_w2",
    "ft_gemv_bf16_f32_g1_v_w4",
    "ft_gemv_bf16_f32_g2_v",
    "ft_gemv_bf16_f32_g2_s",
    "ft_gemv_bf16_f32_g2_v_w2",
    "ft_gemv_bf16_f32_g2_v_w4",
    "ft_gemv_bf16_f32_g4_v",
    "ft_gemv_bf16_f32_g4_s",
    "ft_gemv_bf16_f32_g4_v_w2",
    "ft_gemv_bf16_f32_g4_v_w4",
    "ft_gemv_bf16_f32_g8_v",
    "ft_gemv_bf16_f32_g8_s",
    "ft_gemv_bf16_f32_g8_v_w2",
    "ft_gemv_f16_f16_g1_v",
    "ft_gemv_f16_f16_g1_s",
    "ft_gemv_f16_f16_g1_v_w2",
    "ft_gemv_f16_f16_g1_v_w4",
    "ft_gemv_f16_f16_g2_v",
    "ft_gemv_f16_f16_g2_s",
    "ft_gemv_f16_f16_g2_v_w2",
    "ft_gemv_f16_f16_g2_v_w4",
    "ft_gemv_f16_f16_g4_v",
    "ft_gemv_f16_f16_g4_s",
    "ft_gemv_f16_f16_g4_v_w2",
    "ft_gemv_f16_f16_g4_v_w4",
    "ft_gemv_f16_f16_g8_v",
    "ft_gemv_f16_f16_g8_s",
    "ft_gemv_f16_f16_g8_v_w2",
    "ft_gemv_f16_f32_g1_v",
    "ft_gemv_f16_f32_g1_s",
    "ft_gemv_f16_f32_g1_v_w2",
    "ft_gemv_f16_f32_g1_v_w4",
    "ft_gemv_f16_f32_g2_v",
    "ft_gemv_f16_f32_g2_s",
    "ft_gemv_f16_f32_g2_v_w2",
    "ft_gemv_f16_f32_g2_v_w4",
    "ft_gemv_f16_f32_g4_v",
    "ft_gemv_f16_f32_g4_s",
    "ft_gemv_f16_f32_g4_v_w2",
    "ft_gemv_f16_f32_g4_v_w4",
    "ft_gemv_f16_f32_g8_v",
    "ft_gemv_f16_f32_g8_s",
    "ft_gemv_f16_f32_g8_v_w2",
];

/// Launch bounds of a small-M entry (threads, blocks per SM) for the PTX build; `None` for
/// other names.
pub fn launch_bounds(entry: &str) -> Option<(u32, u32)> {
    let (groups, width) = variant_of(entry)?;
    Some((THREADS, blocks_per_sm(groups, width)))
}

/// Bit of the kernel's `layout` argument: A (x) is column-major.
pub const A_COL: u32 = 1;
/// Bit of the kernel's `layout` argument: B (the weight) is row-major (N contiguous).
pub const B_ROW: u32 = 2;
/// Bit of the kernel's `layout` argument: slabs of interleaved rows in their aligned K frame
/// ([`slab_row`], [`row_shift`]; the plan from [`SmallMPlan::with_rows`]); A is then x's
/// `pack::SHIFTS` shifted copies (`pack::shifted_ld(k)` leading dimension, `stride_a` apart),
/// of which a slab reads the one of its shift.
pub const ROWS_INTERLEAVED: u32 = 4;
/// Bit of the kernel's `layout` argument, with [`ROWS_INTERLEAVED`]: A is x itself (row-major at
/// `lda`), read in the slab's frame with two aligned loads and a funnel shift per vector, so no
/// shifted copies are made first (one launch less; more ALU per x vector).
pub const X_IN_PLACE: u32 = 8;

#[cfg(test)]
#[path = "gemv_tests.rs"]
mod tests;
