//! The shared-memory ring of the staged Clifford entries (`clifford_fwd_staged.rs`,
//! `clifford_bwd_staged.rs`, sm_90a; layout and copy ranges in `clifford/staged.rs`): warp 0
//! copies the rows of a group, component plane by component plane, with `cp.async.bulk` into a
//! stage (one mbarrier each); every thread then reads its elements from the stage, or from
//! global memory where they lie outside the copied, 16-byte-aligned interior of a segment.

use crate::arch::nvptx::{dyn_smem_addr, ld_shared_b32, shfl_xor_f32, sync_threads, sync_warp};
use crate::arch::sm90::{bulk_load, fence_barrier_init, mbar_arrive_expect_tx, mbar_init, mbar_wait};
use crate::clifford::Algebra;
use crate::clifford::staged::{SCRATCH, STAGES_AT, interior, segment_bytes};
use crate::element::Element;

/// One launch's ring: `tensors` inputs of `(C, B, N)` elements, groups of `rows` batch rows.
#[derive(Clone, Copy)]
pub(super) struct Ring {
    pub b: usize,
    pub n: usize,
    pub rows: usize,
    pub tensors: usize,
    pub stages: usize,
    /// Every segment starts and ends 16-byte aligned (host-checked): elements come straight
    /// from the stage.
    pub aligned: bool,
}

impl Ring {
    #[inline(always)]
    fn seg_len<T: Element>(&self) -> u32 {
        segment_bytes(self.rows, self.n, core::mem::size_of::<T>()) as u32
    }

    /// Shared address of stage `s`.
    #[inline(always)]
    fn stage<T: Element, A: Algebra>(&self, s: usize) -> u32 {
        dyn_smem_addr() + STAGES_AT as u32 + s as u32 * (self.tensors * A::C) as u32 * self.seg_len::<T>()
    }

    /// Shared address of stage `s`'s mbarrier.
    #[inline(always)]
    fn full(&self, s: usize) -> u32 {
        dyn_smem_addr() + (SCRATCH + 8 * s) as u32
    }

    /// Rows of group `g` that exist.
    #[inline(always)]
    pub fn live(&self, g: usize) -> usize {
        let r0 = g * self.rows;
        if self.b - r0 < self.rows { self.b - r0 } else { self.rows }
    }

    /// Thread 0 initialises the barriers; then the whole block synchronises.
    ///
    /// # Safety
    /// Every thread of the block calls it once, before any other use of the ring.
    #[inline(always)]
    pub unsafe fn init(&self, tid: usize) {
        if tid == 0 {
            for s in 0..self.stages {
                // SAFETY: an 8-byte aligned word of the barrier area, used by no thread before
                // the block barrier below.
                unsafe { mbar_init(self.full(s), 1) };
            }
            fence_barrier_init();
        }
        // SAFETY: every thread of the block reaches it (caller).
        unsafe { sync_threads() };
    }

    /// Byte address and copied interior of segment `c` of an input at `p` for group `g`.
    #[inline(always)]
    fn segment<T: Element>(&self, p: *const T, c: usize, g: usize) -> (u64, u64, u64) {
        let es = core::mem::size_of::<T>();
        let start = p.wrapping_add((c * self.b + g * self.rows) * self.n) as u64;
        let (lo, hi) = interior(start, start + (self.live(g) * self.n * es) as u64);
        (start, lo, hi)
    }

    /// Warp 0 copies group `g` of the inputs `ptrs[..tensors]` into stage `s`: lane `l` takes
    /// segment `l` (input `l / C`, component `l % C`), lane 0 posts the bytes of all of them
    /// (a warp sum) on the stage's barrier, then each lane issues its copy. (With thread 0
    /// alone, the 16-24 segments' 64-bit address arithmetic held up every group's barrier.)
    ///
    /// # Safety
    /// The whole of warp 0 calls it (`lane` = its lane), for a group that exists, into a stage
    /// no thread reads (its last group's readers passed a block barrier since); the inputs
    /// cover `C * B * N` elements each.
    #[inline(always)]
    pub unsafe fn issue<T: Element, A: Algebra>(&self, ptrs: [*const T; 3], g: usize, s: usize, lane: usize) {
        let (t, c) = (lane / A::C, lane % A::C);
        let mine = lane < self.tensors * A::C;
        let p = if t == 0 {
            ptrs[0]
        } else if t == 1 {
            ptrs[1]
        } else {
            ptrs[2]
        };
        let (start, lo, hi) = if mine { self.segment::<T>(p, c, g) } else { (0, 0, 0) };
        // Bytes below 2^24: exact in f32.
        let mut bytes = (hi - lo) as f32;
        let mut m = 16;
        while m > 0 {
            // SAFETY: the whole warp is here (caller).
            bytes += unsafe { shfl_xor_f32(bytes, m) };
            m /= 2;
        }
        if lane == 0 {
            // SAFETY: an initialised barrier; the copies below complete exactly these bytes.
            unsafe { mbar_arrive_expect_tx(self.full(s), bytes as u32) };
        }
        sync_warp();
        if mine && hi > lo {
            let slot = self.stage::<T, A>(s) + (t * A::C + c) as u32 * self.seg_len::<T>();
            // SAFETY: the interior lies in the input (rows of group g of plane c), both ends
            // 16-byte aligned; its place in the slot is aligned and inside it
            // (`segment_bytes`); nobody reads stage s until the barrier completes.
            unsafe { bulk_load(slot + (lo - (start & !15)) as u32, lo, (hi - lo) as u32, self.full(s)) };
        }
    }

    /// Waits for round `round` of stage `s`.
    ///
    /// # Safety
    /// The ring was initialised and the stage's copies issued for that round.
    #[inline(always)]
    pub unsafe fn wait(&self, s: usize, round: usize) {
        // SAFETY: as the caller guarantees.
        unsafe { mbar_wait(self.full(s), (round & 1) as u32) };
    }

    /// This thread's view of group `g` in stage `s` (row `rr` of the group), computed once per
    /// group so that each element costs a few 32-bit operations.
    #[inline(always)]
    pub fn group<T: Element, A: Algebra>(&self, g: usize, s: usize, rr: usize) -> Group {
        let es = core::mem::size_of::<T>();
        Group {
            stage: self.stage::<T, A>(s),
            seg: self.seg_len::<T>(),
            row: (rr * self.n * es) as u32,
            len: (self.live(g) * self.n * es) as u32,
            r0: g * self.rows,
            rr,
        }
    }

    /// Feature `f` of plane `c` of input `t` (at `p`) in the group `v` views, as f32.
    ///
    /// # Safety
    /// The stage holds the group (waited for); row `v.rr` of it exists and `f < N`.
    #[inline(always)]
    pub unsafe fn load<T: Element, A: Algebra>(&self, v: &Group, p: *const T, t: usize, c: usize, f: usize) -> f32 {
        let es = core::mem::size_of::<T>() as u32;
        let slot = v.stage + (t * A::C + c) as u32 * v.seg;
        let off = v.row + f as u32 * es;
        if self.aligned {
            // SAFETY: every segment was copied whole to the start of its slot (caller).
            return unsafe { shared_element::<T>(slot + off) };
        }
        // The segment's misalignment: only the low 4 bits of its byte address matter, so
        // 32-bit wrapping arithmetic gives them.
        let first = ((c as u32).wrapping_mul(self.b as u32).wrapping_add(v.r0 as u32)).wrapping_mul(self.n as u32);
        let mis = (p as u64 as u32).wrapping_add(first.wrapping_mul(es)) & 15;
        let at = off + mis;
        let (lo, hi) = (if mis != 0 { 16 } else { 0 }, (mis + v.len) & !15);
        if at >= lo && at < hi {
            // SAFETY: inside the copied interior of the slot (`interior`, relative to the
            // segment's 16-byte-aligned start).
            unsafe { shared_element::<T>(slot + at) }
        } else {
            // SAFETY: the element lies in the input (caller).
            unsafe { *p.add((c * self.b + v.r0 + v.rr) * self.n + f) }.to_f32()
        }
    }
}

/// One thread's view of a group in a stage ([`Ring::group`]).
#[derive(Clone, Copy)]
pub(super) struct Group {
    stage: u32,
    seg: u32,
    /// Byte offset of the thread's row in a segment.
    row: u32,
    /// Bytes of a segment (the group's rows that exist).
    len: u32,
    r0: usize,
    rr: usize,
}

/// The element of `T` at shared address `at` (aligned to its size) as f32: the 32-bit word
/// around it, shifted (no dynamically indexed array, which would live in local memory).
///
/// # Safety
/// `at` lies in this block's shared memory.
#[inline(always)]
unsafe fn shared_element<T: Element>(at: u32) -> f32 {
    // SAFETY: the word around `at` is in shared memory too (caller; `at & !3` is below it).
    let word = unsafe { ld_shared_b32(at & !3) };
    let word = if core::mem::size_of::<T>() == 2 && at & 2 != 0 { word >> 16 } else { word };
    T::from_words([word, 0, 0, 0]).as_ref()[0].to_f32()
}
