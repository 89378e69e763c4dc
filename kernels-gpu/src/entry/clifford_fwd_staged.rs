//! The staged SGP forward (`ft_clifford_fwdt_d{2,3}_{dt}_f{2,4}`, sm_90a; layout and copy
//! ranges in `clifford/staged.rs`). The register kernels (`clifford_fwd.rs`) keep one row in
//! flight per thread, so an SM has too few bytes in flight to reach the memory roof (ncu,
//! H200: 24% occupancy, DRAM 38% busy at 2D B4096 N512). Here thread 0 copies whole groups of
//! rows with `cp.async.bulk` into a ring of shared-memory stages (one mbarrier each), `stages
//! - 1` groups ahead, and every thread computes from shared memory: a team of `team` threads
//! per row, `F` features per thread (feature `j + k * team`), its features' weights kept in
//! registers for every row, the outputs held in registers across the team's norm reduction,
//! then stored.
#![allow(clippy::needless_range_loop)]

use super::clifford_io::team_sum;
use super::clifford_io::weights_of;
use crate::arch::nvptx::{
    block_dim_x, block_idx_x, dyn_smem_addr, grid_dim_x, ld_shared_b32, sync_threads, thread_idx_x,
};
use crate::arch::sm90::{
    bulk_load, fence_barrier_init, fence_proxy_async, mbar_arrive_expect_tx, mbar_init, mbar_wait,
};
use crate::clifford::staged::{SCRATCH, STAGES_AT, interior, segment_bytes};
use crate::clifford::{Algebra, Cl2, Cl3, MAX_C, MAX_G, MAX_W, Mv, accumulate_grades, gate, inv_rms, product};
use crate::element::Element;
use half::{bf16, f16};

/// The problem of one launch.
#[derive(Clone, Copy)]
struct Problem<T> {
    x: *const T,
    y: *const T,
    w: *const T,
    out: *mut T,
    b: usize,
    n: usize,
    normalize: bool,
    team: u32,
    stages: u32,
    aligned: bool,
}

/// Where the elements of one segment (a component plane's run of a group's rows) are: its
/// first element's byte address, the aligned interior that was copied, and its stage slot.
#[derive(Clone, Copy)]
struct Segment {
    start: u64,
    lo: u64,
    hi: u64,
    slot: u32,
}

impl Segment {
    /// Segment `c` of tensor `p` (index `t`: 0 = x, 1 = y) for rows `r0 .. r0 + rows` in the
    /// stage at `stage`.
    #[inline(always)]
    fn of<T: Element, A: Algebra>(
        p: *const T,
        q: Problem<T>,
        t: usize,
        c: usize,
        r0: usize,
        rows: usize,
        stage: u32,
    ) -> Segment {
        let es = core::mem::size_of::<T>();
        let start = p.wrapping_add((c * q.b + r0) * q.n) as u64;
        let end = start + (rows * q.n * es) as u64;
        let (lo, hi) = interior(start, end);
        let seg = segment_bytes(q.team_rows(), q.n, es) as u32;
        Segment { start, lo, hi, slot: stage + (t * A::C + c) as u32 * seg }
    }

    /// Element `i` of the segment as f32: from the stage when inside the copied interior,
    /// else from global memory.
    ///
    /// # Safety
    /// `i` is inside the segment; the stage's copies have landed.
    #[inline(always)]
    unsafe fn load<T: Element>(&self, i: usize) -> f32 {
        let es = core::mem::size_of::<T>() as u64;
        let a = self.start + i as u64 * es;
        if a >= self.lo && a < self.hi {
            let at = self.slot + (a - (self.start & !15)) as u32;
            // SAFETY: inside the copied interior of the segment's stage slot (caller).
            unsafe { shared_element::<T>(at) }
        } else {
            // SAFETY: the element lies in the caller's tensor (caller).
            unsafe { *(a as *const T) }.to_f32()
        }
    }
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

/// Element `e` of segment `c` of tensor `p` (`t`: 0 = x, 1 = y) for rows `r0 .. r0 + live`,
/// as f32: with `aligned` (every segment 16-byte aligned at both ends) straight from the stage,
/// else through [`Segment::load`].
///
/// # Safety
/// As [`Segment::load`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn element<T: Element, A: Algebra>(
    p: *const T,
    q: Problem<T>,
    t: usize,
    c: usize,
    r0: usize,
    live: usize,
    stage: u32,
    e: usize,
) -> f32 {
    let es = core::mem::size_of::<T>();
    if q.aligned {
        let seg = segment_bytes(q.team_rows(), q.n, es) as u32;
        let at = stage + (t * A::C + c) as u32 * seg + (e * es) as u32;
        // SAFETY: every segment was copied whole to the start of its slot (caller).
        return unsafe { shared_element::<T>(at) };
    }
    // SAFETY: forwarded from the caller.
    unsafe { Segment::of::<T, A>(p, q, t, c, r0, live, stage).load::<T>(e) }
}

impl<T> Problem<T> {
    /// Rows of a group: the threads of the block over the team.
    #[inline(always)]
    fn team_rows(&self) -> usize {
        block_dim_x() as usize / self.team as usize
    }
}

/// # Safety
/// Host-validated (`host/src/ops/clifford/staged.rs`): x, y, out cover `C * B * N` elements,
/// w covers `N * W`; `team` is a power of two dividing `blockDim.x` with `team * F >= N`;
/// `2 <= stages <= MAX_STAGES`; the dynamic shared memory holds `staged::smem_bytes` for the
/// block's rows and stages; `aligned` only when x and y start 16-byte aligned and `N` elements
/// are a multiple of 16 bytes; every thread of the block calls it.
#[inline(always)]
unsafe fn fwd_staged<T: Element, A: Algebra, const F: usize>(q: Problem<T>) {
    let tid = thread_idx_x() as usize;
    let team = q.team as usize;
    let rows = q.team_rows();
    let (j, rr) = (tid % team, tid / team);
    let (n, b) = (q.n, q.b);
    let groups = b.div_ceil(rows);
    let nst = q.stages as usize;
    let smem = dyn_smem_addr();
    let es = core::mem::size_of::<T>();
    let stage_len = (2 * A::C * segment_bytes(rows, n, es)) as u32;
    let stage = |s: usize| smem + STAGES_AT as u32 + s as u32 * stage_len;
    let full = |s: usize| smem + (SCRATCH + 8 * s) as u32;
    if tid == 0 {
        for s in 0..nst {
            // SAFETY: an 8-byte aligned word of the barrier area, used by no thread before the
            // block barrier below.
            unsafe { mbar_init(full(s), 1) };
        }
        fence_barrier_init();
    }
    // SAFETY: every thread of the block reaches it.
    unsafe { sync_threads() };

    // Thread 0 copies group `g` into stage `s`.
    let issue = move |g: usize, s: usize| {
        let r0 = g * rows;
        let live = if b - r0 < rows { b - r0 } else { rows };
        let mut bytes = 0u64;
        for t in 0..2 {
            for c in 0..A::C {
                let seg = Segment::of::<T, A>(if t == 0 { q.x } else { q.y }, q, t, c, r0, live, stage(s));
                bytes += seg.hi - seg.lo;
            }
        }
        // SAFETY: an initialised barrier; the copies below complete exactly these bytes.
        unsafe { mbar_arrive_expect_tx(full(s), bytes as u32) };
        for t in 0..2 {
            for c in 0..A::C {
                let seg = Segment::of::<T, A>(if t == 0 { q.x } else { q.y }, q, t, c, r0, live, stage(s));
                if seg.hi > seg.lo {
                    let dst = seg.slot + (seg.lo - (seg.start & !15)) as u32;
                    // SAFETY: the interior lies in the tensor (rows r0 .. r0 + live of plane
                    // c), both ends 16-byte aligned; its place in the stage slot is aligned and
                    // inside it (`segment_bytes`), and no thread reads stage s until the barrier.
                    unsafe { bulk_load(dst, seg.lo, (seg.hi - seg.lo) as u32, full(s)) };
                }
            }
        }
    };

    let (g0, gstep) = (block_idx_x() as usize, grid_dim_x() as usize);
    let mut ws = [[0.0f32; MAX_W]; F];
    for k in 0..F {
        let f = j + k * team;
        if f < n {
            // SAFETY: f < N.
            ws[k] = unsafe { weights_of::<T, A>(q.w, f) };
        }
    }
    if tid == 0 {
        for s in 0..nst {
            if g0 + s * gstep < groups {
                issue(g0 + s * gstep, s);
            }
        }
    }
    let mut i = 0usize;
    let mut g = g0;
    while g < groups {
        let s = i % nst;
        // SAFETY: an initialised barrier; round i / nst of stage s.
        unsafe { mbar_wait(full(s), ((i / nst) & 1) as u32) };
        let r0 = g * rows;
        let live = if b - r0 < rows { b - r0 } else { rows };
        let row = r0 + rr;
        let active = rr < live;
        let mut o = [[0.0f32; MAX_C]; F];
        let mut ss = [0.0f32; MAX_G];
        if active {
            for k in 0..F {
                let f = j + k * team;
                if f < n {
                    let e = rr * n + f;
                    let (mut xv, mut yv): (Mv, Mv) = ([0.0; MAX_C], [0.0; MAX_C]);
                    for c in 0..A::C {
                        // SAFETY: element e of each segment is row `row`, feature f; stage s
                        // has landed (the wait above).
                        unsafe {
                            xv[c] = element::<T, A>(q.x, q, 0, c, r0, live, stage(s), e);
                            yv[c] = element::<T, A>(q.y, q, 1, c, r0, live, stage(s), e);
                        }
                    }
                    gate::<A>(&mut xv);
                    gate::<A>(&mut yv);
                    o[k] = product::<A>(&xv, &yv, &ws[k]);
                    accumulate_grades::<A>(&o[k], &mut ss);
                }
            }
        }
        // This thread's reads of stage s (generic proxy) before the next copy into it (async
        // proxy), which thread 0 issues after the block barrier below.
        fence_proxy_async();
        let mut inv = [1.0f32; MAX_G];
        if q.normalize {
            // SAFETY: every thread of the block is here (the group loop is uniform).
            let sums = unsafe { team_sum(ss, q.team) };
            for gr in 0..A::G {
                inv[gr] = inv_rms(sums[gr], n);
            }
        }
        // SAFETY: every thread of the block reaches it; after it no thread reads stage s.
        unsafe { sync_threads() };
        if tid == 0 && g + nst * gstep < groups {
            issue(g + nst * gstep, s);
        }
        if active {
            for k in 0..F {
                let f = j + k * team;
                if f < n {
                    for c in 0..A::C {
                        let v = o[k][c] * inv[A::T.grade[c]];
                        // SAFETY: row < B, f < N: inside plane c of out.
                        unsafe { *q.out.add((c * b + row) * n + f) = T::from_f32(v) };
                    }
                }
            }
        }
        i += 1;
        g += gstep;
    }
}

/// `(x, y, w, out, b, n, normalize, team, stages, aligned)`.
macro_rules! fwdt_entry {
    ($A:ty, $d:literal, $T:ty, $dt:literal, $f:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_fwdt_d", $d, "_", $dt, "_f", $f))]
            unsafe extern "ptx-kernel" fn entry(
                x: *const $T,
                y: *const $T,
                w: *const $T,
                out: *mut $T,
                b: usize,
                n: usize,
                normalize: u32,
                team: u32,
                stages: u32,
                aligned: u32,
            ) {
                let q = Problem { x, y, w, out, b, n, normalize: normalize != 0, team, stages, aligned: aligned != 0 };
                // SAFETY: the host checked sizes, team, stages and shared memory.
                unsafe { fwd_staged::<$T, $A, $f>(q) }
            }
        };
    };
}

macro_rules! each_dtype {
    ($A:ty, $d:literal, $f:literal) => {
        fwdt_entry!($A, $d, f32, "f32", $f);
        fwdt_entry!($A, $d, f16, "f16", $f);
        fwdt_entry!($A, $d, bf16, "bf16", $f);
    };
}

// 3D keeps 4 features a thread (256 threads): with 2 (512 threads, 128 registers) its weights
// and outputs spilled.
each_dtype!(Cl2, "2", 2);
each_dtype!(Cl2, "2", 4);
each_dtype!(Cl3, "3", 4);
