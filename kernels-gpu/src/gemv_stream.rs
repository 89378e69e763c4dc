//! The streaming small-M kernel (sm_90a; `entry/gemv_stream.rs`): the weight reaches shared
//! memory through bulk asynchronous copies (`cp.async.bulk`, one per weight row and K chunk,
//! completing on an mbarrier) into a [`Ring`] of stages, so the bytes in flight per SM
//! are the ring's (about 130 KiB), not what the threads' registers can hold: the register-fed
//! small-M kernel (`gemv.rs`) keeps about 64 KiB per SM in flight at best, and half of that on
//! average, which held M = 1 at 0.70 of copy bandwidth on a 32 MiB weight.
//!
//! Work is cut into units of one slab ([`SLAB`] weight rows) by one K chunk ([`KC`] by default) and dealt
//! out stream-K fashion: block `b` of `P` takes units `b·U/P .. (b+1)·U/P` in slab-major order,
//! so every SM gets the same bytes whatever the shape (no wave quantisation). A slab whose
//! chunks are split between blocks is joined deterministically: each block that holds part of
//! it writes its partial sums (at most two partial slabs per block, the first and the last of
//! its range: [`part_slot`]), counts its arrival, and the block that arrives last adds the
//! partials in block order and applies the epilogue.
//!
//! Shared by the kernel, the host's launch (`host/src/ops/gemv_stream.rs`) and the tests.

use crate::element::DType;
use crate::gemv::SLAB;

/// K elements per unit by default (one bulk copy of 4 KiB per weight row and x row; the host may
/// pick another of [`KCS`]; [`Ring::fit`] halves it where two stages would not fit). On the
/// H100 (bench/results/gemvs-*/) copies of 1 KiB capped the kernel at 0.69 of copy bandwidth on
/// a 224 MiB weight, 2 KiB at 0.89-0.93, 4 KiB at 0.91-0.95.
pub const KC: usize = 2048;
/// The K chunks a launch may use (multiples of 64, so that rows are 64 bytes apart modulo 128).
pub const KCS: [usize; 3] = [512, 1024, 2048];
/// Consumer warps (they split each unit's K chunk by 32-element steps).
pub const WARPS: usize = 8;
/// Threads per block: the consumers and one producer warp that issues the copies.
pub const THREADS: u32 = ((WARPS + 1) * 32) as u32;
/// Compiled row groups (8 rows of x each).
pub const M_GROUPS: [usize; 2] = [1, 2];
/// Most rows of x the family serves.
pub const MAX_M: usize = 16;
/// Shared memory the ring may take (the H100 allows 227 KiB per block; the barriers and the
/// reduction buffer follow it; compute-sanitizer's synccheck could not track launches of 220
/// KiB, and did at 213).
pub const RING_BUDGET: usize = 204 * 1024;
/// Most stages of a ring.
pub const MAX_STAGES: usize = 16;

/// The shared-memory ring of a launch: stages of one unit each (a slab of weight rows, then
/// the `m` rows of x), rows `kc * 2 + 64` bytes apart so that the 16-byte fragment loads of
/// rows `gid` and `gid + 1` fall in different banks. The kernel rebuilds it from its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ring {
    pub kc: usize,
    pub m: usize,
    pub stages: usize,
}

impl Ring {
    /// The deepest ring of `kc`-element chunks for `m` rows of x within [`RING_BUDGET`].
    pub const fn new(m: usize, kc: usize) -> Ring {
        let r = Ring { kc, m, stages: 1 };
        let s = RING_BUDGET / r.stage_bytes();
        Ring { stages: if s > MAX_STAGES { MAX_STAGES } else { s }, ..r }
    }

    /// [`Ring::new`] with `kc` halved (down to 512) until the ring holds two stages or more.
    pub const fn fit(m: usize, kc: usize) -> Ring {
        let mut r = Ring::new(m, kc);
        while r.stages < 2 && r.kc > KCS[0] {
            r = Ring::new(m, r.kc / 2);
        }
        r
    }

    pub const fn row_bytes(&self) -> usize {
        self.kc * 2 + 64
    }

    pub const fn stage_bytes(&self) -> usize {
        (SLAB + self.m) * self.row_bytes()
    }

    /// Offset of the full barriers (then the empty ones), after the ring.
    pub const fn bars_offset(&self) -> usize {
        self.stages * self.stage_bytes()
    }

    /// Offset of the cross-warp reduction buffer `[warp][x row][slab column]` f32, after the
    /// barriers; the flag word of the join follows it.
    pub const fn red_offset(&self) -> usize {
        self.bars_offset() + 16 * self.stages
    }

    /// Dynamic shared memory of a block with `groups` row groups.
    pub const fn smem_bytes(&self, groups: usize) -> usize {
        self.red_offset() + WARPS * 8 * groups * SLAB * 4 + 16
    }
}

/// The unit range of one launch: `slabs` x `kchunks` units over `blocks` blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamPlan {
    pub slabs: usize,
    pub kchunks: usize,
    pub blocks: usize,
}

impl StreamPlan {
    /// The plan of an `n` x `k` weight (k > 0) in chunks of `kc` over at most `sms` blocks (one
    /// per SM: the ring fills its shared memory).
    pub const fn new(n: usize, k: usize, kc: usize, sms: usize) -> StreamPlan {
        let slabs = n.div_ceil(SLAB);
        let kchunks = k.div_ceil(kc);
        let units = slabs * kchunks;
        let blocks = if sms < units { sms } else { units };
        StreamPlan { slabs, kchunks, blocks: if blocks < 1 { 1 } else { blocks } }
    }

    pub const fn units(&self) -> usize {
        self.slabs * self.kchunks
    }

    /// Whether blocks take whole slabs: when there are at least as many slabs as blocks, ranges
    /// are cut at slab boundaries (at most one slab more than another block, no join: on the
    /// H100 a join cost several microseconds, bench/results/gemvs-*/); else at any unit.
    pub const fn whole_slabs(&self) -> bool {
        self.slabs >= self.blocks
    }

    /// First unit of block `b` (`b = blocks` gives the end).
    pub const fn start(&self, b: usize) -> usize {
        if self.whole_slabs() {
            ((b as u64 * self.slabs as u64) / self.blocks as u64) as usize * self.kchunks
        } else {
            ((b as u64 * self.units() as u64) / self.blocks as u64) as usize
        }
    }

    /// The block whose range holds unit `u`.
    pub const fn block_of(&self, u: usize) -> usize {
        let (at, of) = if self.whole_slabs() { (u / self.kchunks, self.slabs) } else { (u, self.units()) };
        (((at as u64 + 1) * self.blocks as u64 - 1) / of as u64) as usize
    }

    /// The blocks that hold a part of slab `s` (first, last).
    pub const fn contributors(&self, s: usize) -> (usize, usize) {
        (self.block_of(s * self.kchunks), self.block_of((s + 1) * self.kchunks - 1))
    }

    /// Bytes of the join's counters (one u32 per slab), rounded to 256.
    pub const fn counter_bytes(&self) -> usize {
        (self.slabs * 4).div_ceil(256) * 256
    }

    /// Workspace bytes: the counters, then two partial slabs per block (`8 · groups` x
    /// [`SLAB`] f32 each).
    pub const fn workspace_bytes(&self, groups: usize) -> usize {
        self.counter_bytes() + self.blocks * 2 * 8 * groups * SLAB * 4
    }
}

/// Which of block `b`'s two partial slots holds its part of slab `s`: 0 for the first slab of
/// its range, 1 for the last (a block's middle slabs are whole and never written).
pub const fn part_slot(p: &StreamPlan, b: usize, s: usize) -> usize {
    if p.start(b) / p.kchunks == s { 0 } else { 1 }
}

/// The entry of `dtype` inputs, `out` outputs and `groups` row groups.
pub fn entry_name(dtype: DType, out: DType, groups: usize) -> Option<&'static str> {
    let gi = M_GROUPS.iter().position(|&g| g == groups)?;
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
    Some(NAMES[(di * 2 + oi) * M_GROUPS.len() + gi])
}

/// Every entry, in the order of `entry_name`'s index.
pub const NAMES: [&str; 8] = [
    "ft_gemvs_bf16_bf16_g1",
    "ft_gemvs_bf16_bf16_g2",
    "ft_gemvs_bf16_f32_g1",
    "ft_gemvs_bf16_f32_g2",
    "ft_gemvs_f16_f16_g1",
    "ft_gemvs_f16_f16_g2",
    "ft_gemvs_f16_f32_g1",
    "ft_gemvs_f16_f32_g2",
];

/// `(threads, blocks per SM)` of an entry of this family (the PTX's launch bounds).
pub fn launch_bounds(entry: &str) -> Option<(u32, u32)> {
    NAMES.contains(&entry).then_some((THREADS, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_belongs_to_exactly_one_block_and_slots_do_not_collide() {
        for (n, k, sms) in
            [(4096, 4096, 132), (16, 8, 132), (4097, 777 * 8, 132), (5, 512, 3), (11008, 4096, 114), (300, 40960, 132)]
        {
            let p = StreamPlan::new(n, k, 512, sms);
            assert!(p.blocks >= 1 && p.blocks <= sms);
            let mut prev = 0;
            for b in 0..p.blocks {
                let (u0, u1) = (p.start(b), p.start(b + 1));
                assert_eq!(u0, prev);
                assert!(u1 > u0, "block {b} of {p:?} has no unit");
                for u in u0..u1 {
                    assert_eq!(p.block_of(u), b, "{p:?} unit {u}");
                }
                prev = u1;
            }
            assert_eq!(prev, p.units());
            if p.whole_slabs() {
                assert!((0..p.slabs).all(|s| p.contributors(s).0 == p.contributors(s).1), "{p:?}");
            }
            for s in 0..p.slabs {
                let (f, l) = p.contributors(s);
                assert!(f <= l && p.start(f) <= s * p.kchunks && p.start(l + 1) >= (s + 1) * p.kchunks);
                if f < l {
                    // Each block sharing the slab holds it as the first or last slab of its
                    // range, in the slot the join reads.
                    for b in f..=l {
                        let first = p.start(b) / p.kchunks;
                        let last = (p.start(b + 1) - 1) / p.kchunks;
                        assert!(s == first || s == last);
                        assert_eq!(part_slot(&p, b, s), if s == first { 0 } else { 1 });
                    }
                }
            }
        }
    }

    #[test]
    fn the_ring_fits_the_h100s_shared_memory() {
        for m in 1..=MAX_M {
            for kc in KCS {
                let r = Ring::fit(m, kc);
                let g = if m <= 8 { 1 } else { 2 };
                assert!(r.smem_bytes(g) <= 227 * 1024, "{r:?}: {}", r.smem_bytes(g));
                assert!(r.stages >= 2, "{r:?}");
                assert_eq!(r.bars_offset() % 16, 0);
                assert_eq!(r.row_bytes() % 128, 64);
            }
        }
        assert_eq!(Ring::new(1, 1024).stages, 5);
    }

    #[test]
    fn names_follow_the_index() {
        assert_eq!(entry_name(DType::F16, DType::F32, 2), Some("ft_gemvs_f16_f32_g2"));
        assert_eq!(entry_name(DType::Bf16, DType::Bf16, 1), Some("ft_gemvs_bf16_bf16_g1"));
        assert_eq!(entry_name(DType::F32, DType::F32, 1), None);
        assert_eq!(entry_name(DType::F16, DType::Bf16, 1), None);
        assert_eq!(launch_bounds("ft_gemvs_f16_f16_g2"), Some((288, 1)));
    }
}
