//! Tensor-core GEMM main loop: fragments from the shared-memory ring (`ldmatrix`), the `mma`
//! steps, the `cp.async` pipeline (`TcPipe`) and one output tile (`tc_gemm`).

use super::Problem;
use super::tc_epilogue::tc_epilogue;
use super::tc_load::{Loader, TcElem};
use crate::arch::nvptx::{
    block_idx_x, block_idx_y, cp_async_commit, cp_async_wait, dyn_smem_addr, ld_shared_b32, ldmatrix_x4,
    ldmatrix_x4_trans, sync_threads, thread_idx_x,
};
use crate::element::Element;
use crate::gemm::tc;

/// Per-lane byte offsets of the fragments of the warp's first m-tile and n-tile pair within
/// a stage's A and B tiles (every other fragment is a compile-time offset from them).
#[inline(always)]
fn tc_lane_offsets<E: TcElem, const A_KC: bool, const B_KC: bool, const BM: usize, const BN: usize, const KB: usize>(
    m0: usize,
    n0: usize,
    lane: usize,
) -> (u32, u32) {
    let pk = KB + 16;
    let (pa, pb) = (tc::pitch_mn(BM, E::BYTES), tc::pitch_mn(BN, E::BYTES));
    let (g, t) = (lane / 4, lane % 4);
    let la = if A_KC {
        // Lanes 0-15 address rows m..m+15 at the step's first 16 bytes, 16-31 the next 16.
        (m0 + lane % 16) * pk + (lane / 16) * 16
    } else if E::BYTES == 2 {
        // Stored [k][m]: matrices (k 0-7, m 0-7), (k 0-7, m 8-15), (k 8-15, m 0-7), (k 8-15, m 8-15).
        ((lane / 16) * 8 + lane % 8) * pa + (m0 + ((lane / 8) % 2) * 8) * 2
    } else {
        t * pa + (m0 + g) * 4
    };
    let lb = if B_KC {
        // Matrices: (n 0-7, first 16 bytes), (n 0-7, next 16), (n 8-15, first), (n 8-15, next).
        (n0 + lane % 8 + (lane / 16) * 8) * pk + ((lane / 8) % 2) * 16
    } else if E::BYTES == 2 {
        // Stored [k][n]: matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15).
        (((lane / 8) % 2) * 8 + lane % 8) * pb + (n0 + (lane / 16) * 8) * 2
    } else {
        t * pb + (n0 + g) * 4
    };
    (la as u32, lb as u32)
}

/// The warp's A and B fragments of one 32-byte K step of a stage: `MT` A tiles of 16 rows
/// and `NT` B tiles of 8 columns. `sa`, `sb`: the stage's A and B tiles plus the lane offsets
/// of `tc_lane_offsets`.
///
/// # Safety
/// The stage holds complete tiles; all 32 lanes of every warp call it.
#[inline(always)]
unsafe fn tc_frags<
    E: TcElem,
    const A_KC: bool,
    const B_KC: bool,
    const BM: usize,
    const BN: usize,
    const KB: usize,
    const MT: usize,
    const NT: usize,
>(
    sa: u32,
    sb: u32,
    ks: usize,
) -> ([[u32; 4]; MT], [[u32; 2]; NT]) {
    let pk = KB + 16;
    let (pa, pb) = (tc::pitch_mn(BM, E::BYTES), tc::pitch_mn(BN, E::BYTES));
    let kb0 = ks * 32; // byte offset of the step along a k-contiguous row
    let ke0 = ks * 32 / E::BYTES; // first k element of the step
    let mut fa = [[0u32; 4]; MT];
    #[allow(clippy::needless_range_loop)]
    for mt in 0..MT {
        // SAFETY (all arms): whole warp; 16-byte aligned rows (ldmatrix) or 4-byte words inside
        // the A tile.
        fa[mt] = unsafe {
            if A_KC {
                ldmatrix_x4(sa + (mt * 16 * pk + kb0) as u32)
            } else if E::BYTES == 2 {
                ldmatrix_x4_trans(sa + (ke0 * pa + mt * 32) as u32)
            } else {
                let at = |kk: usize, mm: usize| sa + ((ke0 + kk) * pa + (mt * 16 + mm) * 4) as u32;
                [ld_shared_b32(at(0, 0)), ld_shared_b32(at(0, 8)), ld_shared_b32(at(4, 0)), ld_shared_b32(at(4, 8))]
            }
        };
    }
    let mut fb = [[0u32; 2]; NT];
    for np in 0..NT / 2 {
        // SAFETY: as above, inside the B tile.
        let q = unsafe {
            if B_KC {
                ldmatrix_x4(sb + (np * 16 * pk + kb0) as u32)
            } else if E::BYTES == 2 {
                ldmatrix_x4_trans(sb + (ke0 * pb + np * 32) as u32)
            } else {
                let at = |kk: usize, nn: usize| sb + ((ke0 + kk) * pb + (np * 16 + nn) * 4) as u32;
                [ld_shared_b32(at(0, 0)), ld_shared_b32(at(4, 0)), ld_shared_b32(at(0, 8)), ld_shared_b32(at(4, 8))]
            }
        };
        fb[2 * np] = [q[0], q[1]];
        fb[2 * np + 1] = [q[2], q[3]];
    }
    (fa, fb)
}

/// The warp's `MT x NT` mma of one K step.
///
/// # Safety
/// All 32 lanes of every warp call it.
#[inline(always)]
unsafe fn tc_mma<E: TcElem, const MT: usize, const NT: usize>(
    f: &([[u32; 4]; MT], [[u32; 2]; NT]),
    acc: &mut [[[f32; 4]; NT]; MT],
) {
    for (mt, row) in acc.iter_mut().enumerate() {
        for (nt, cell) in row.iter_mut().enumerate() {
            // SAFETY: whole warp.
            *cell = unsafe { E::mma(f.0[mt], f.1[nt], *cell) };
        }
    }
}

/// Waits until at most `n` of this thread's `cp.async` groups are pending (an immediate
/// operand: one arm per depth the tiles use).
#[inline(always)]
fn cp_async_wait_at_most(n: usize) {
    match n {
        0 => cp_async_wait::<0>(),
        1 => cp_async_wait::<1>(),
        2 => cp_async_wait::<2>(),
        _ => cp_async_wait::<3>(),
    }
}

/// What a k-tile step of `tc_gemm` refills: nothing, a tile with bounds tests, a whole tile.
const ISSUE_NONE: u8 = 0;
const ISSUE_CHECKED: u8 = 1;
const ISSUE_WHOLE: u8 = 2;

/// The state of `tc_gemm`'s main loop (all of it lives in registers once inlined).
struct TcPipe<
    E,
    const A_KC: bool,
    const B_KC: bool,
    const AL: usize,
    const MT: usize,
    const NT: usize,
    const KB: usize,
    const ST: usize,
    const BM: usize,
    const BN: usize,
    const TH: usize,
> {
    la: Loader<E, A_KC, AL, BM, KB, TH>,
    lb: Loader<E, B_KC, AL, BN, KB, TH>,
    acc: [[[f32; 4]; NT]; MT],
    /// Fragments of the next K step.
    cur: ([[u32; 4]; MT], [[u32; 2]; NT]),
    smem: u32,
    a_bytes: u32,
    stage_bytes: u32,
    /// Ring offset of the stage being read.
    rd: u32,
    /// Lane offsets of the fragments (`tc_lane_offsets`).
    fa: u32,
    fb: u32,
}

impl<
    E: TcElem,
    const A_KC: bool,
    const B_KC: bool,
    const AL: usize,
    const MT: usize,
    const NT: usize,
    const KB: usize,
    const ST: usize,
    const BM: usize,
    const BN: usize,
    const TH: usize,
> TcPipe<E, A_KC, B_KC, AL, MT, NT, KB, ST, BM, BN, TH>
{
    /// Fragments of K step `ks` of the stage at ring offset `st`.
    #[inline(always)]
    fn frags(&self, st: u32, ks: usize) -> ([[u32; 4]; MT], [[u32; 2]; NT]) {
        let s = self.smem + st;
        // SAFETY: callers pass a stage whose tile is complete (after the barrier); whole warps.
        unsafe { tc_frags::<E, A_KC, B_KC, BM, BN, KB, MT, NT>(s + self.fa, s + self.a_bytes + self.fb, ks) }
    }

    /// Loads the k-tile starting at `k0` into the stage at ring offset `st`.
    ///
    /// # Safety
    /// As `tc_gemm`; with `ISSUE_WHOLE` the tile lies inside both operands.
    #[inline(always)]
    unsafe fn issue<const MODE: u8>(&mut self, st: u32, a: *const u8, b: *const u8, pr: &Problem, k0: usize) {
        let dst = self.smem + st;
        // SAFETY: forwarded.
        unsafe {
            if MODE == ISSUE_WHOLE {
                self.la.issue_whole(dst, pr.lda);
                self.lb.issue_whole(dst + self.a_bytes, pr.ldb);
            } else {
                self.la.issue(dst, a, pr.lda, k0, pr.k);
                self.lb.issue(dst + self.a_bytes, b, pr.ldb, k0, pr.k);
            }
        }
    }

    /// Multiplies k-tile `kt` (whose stage is complete) and, at its last step, refills its
    /// stage with tile `kt + ST` as `MODE` says.
    ///
    /// # Safety
    /// All threads of the block call it with the same arguments; as `tc_gemm`.
    #[inline(always)]
    unsafe fn ktile<const MODE: u8>(&mut self, kt: usize, a: *const u8, b: *const u8, pr: &Problem) {
        let rd = self.rd;
        let nx = if rd + self.stage_bytes == ST as u32 * self.stage_bytes { 0 } else { rd + self.stage_bytes };
        for ks in 0..KB / 32 {
            let next = if ks + 1 < KB / 32 {
                self.frags(rd, ks + 1)
            } else {
                // Tile kt + 1 complete: of the tiles committed (up to kt + ST - 1), ST - 2 may pend.
                cp_async_wait_at_most(ST - 2);
                // SAFETY: all threads (uniform trip counts); after it tile kt + 1 is visible and
                // no warp reads stage kt any more.
                unsafe { sync_threads() };
                if MODE != ISSUE_NONE {
                    // Tile kt + ST goes where tile kt was.
                    // SAFETY: forwarded.
                    unsafe { self.issue::<MODE>(rd, a, b, pr, (kt + ST) * (KB / E::BYTES)) };
                }
                cp_async_commit();
                // After the last tile this reads a finished stage to no use: cheaper than the
                // register copies a select would cost in every tile.
                self.frags(nx, 0)
            };
            // SAFETY: whole warps.
            unsafe { tc_mma::<E, MT, NT>(&self.cur, &mut self.acc) };
            self.cur = next;
        }
        self.rd = nx;
    }
}

/// One `BM x BN` output tile of `D = epilogue(A B)` on tensor cores.
///
/// # Safety
/// Launched with `WM * WN * 32` threads and `Tile::smem_bytes` of dynamic shared memory;
/// pointers cover the problem (host-checked); for `AL` >= 4 the A and B bases are `AL`-aligned
/// and `lda`, `ldb` (in bytes) multiples of `AL`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn tc_gemm<
    E: TcElem,
    O: Element,
    const A_KC: bool,
    const B_KC: bool,
    const AL: usize,
    const WM: usize,
    const WN: usize,
    const MT: usize,
    const NT: usize,
    const KB: usize,
    const ST: usize,
    const BM: usize,
    const BN: usize,
    const TH: usize,
>(
    a: *const u8,
    b: *const u8,
    c: *const O,
    d: *mut O,
    bias: *const O,
    pr: Problem,
) {
    // BM, BN, TH are derived parameters (const generics cannot compute them); check them.
    const { assert!(BM == WM * MT * 16 && BN == WN * NT * 8 && TH == WM * WN * 32 && NT % 2 == 0 && KB % 32 == 0) };
    const { assert!(ST >= 2 && ST <= 5) };
    let tile = tc::Tile { wm: WM, wn: WN, mt: MT, nt: NT, kb: KB, stages: ST, min_blocks: 1 };
    let a_bytes = tile.operand_bytes(BM, E::BYTES, A_KC) as u32;
    let stage_bytes = a_bytes + tile.operand_bytes(BN, E::BYTES, B_KC) as u32;
    let tid = thread_idx_x() as usize;
    let lane = tid % 32;
    let warp = tid / 32;
    let (wm, wn) = (warp / WN, warp % WN);
    let bm = block_idx_y() as usize * BM;
    let bn = block_idx_x() as usize * BN;
    let smem = dyn_smem_addr();
    let bk = KB / E::BYTES;
    let ktiles = pr.k.div_ceil(bk);
    let mut p = TcPipe::<E, A_KC, B_KC, AL, MT, NT, KB, ST, BM, BN, TH> {
        la: Loader::new(a, pr.lda, bm, pr.m, tid),
        lb: Loader::new(b, pr.ldb, bn, pr.n, tid),
        acc: [[[0.0f32; 4]; NT]; MT],
        cur: ([[0u32; 4]; MT], [[0u32; 2]; NT]),
        smem,
        a_bytes,
        stage_bytes,
        rd: 0,
        fa: 0,
        fb: 0,
    };
    // Software pipeline: all ST stages are filled up front; in each k-tile the fragments of
    // step ks + 1 are read while step ks multiplies, and before the tile's last step the
    // block waits for the next tile, refills the stage it just finished reading (every
    // fragment of it is in registers by then) and starts reading the next tile, so neither
    // the barrier nor the first ldmatrix of a tile stalls the tensor cores.
    for kt in 0..ST {
        if kt < ktiles {
            // SAFETY: the stage lies in the dynamic buffer the host sized; operands as above.
            unsafe { p.issue::<ISSUE_CHECKED>(kt as u32 * stage_bytes, a, b, &pr, kt * bk) };
        }
        // Empty groups keep the group count in step with the tiles.
        cp_async_commit();
    }
    let (m0, n0) = (wm * MT * 16, wn * NT * 8);
    (p.fa, p.fb) = tc_lane_offsets::<E, A_KC, B_KC, BM, BN, KB>(m0, n0, lane);
    cp_async_wait_at_most(ST - 1);
    // SAFETY: all threads; tile 0 is complete after it.
    unsafe { sync_threads() };
    p.cur = p.frags(0, 0);
    // Three loops over k-tiles by what each refills: whole tiles without bounds tests (blocks
    // inside M and N, tiles before the last), tiles with tests, nothing (the last ST tiles).
    // All block-uniform, so every thread takes the same barriers.
    let mut kt = 0;
    if bm + BM <= pr.m && bn + BN <= pr.n {
        while kt + ST + 1 < ktiles {
            // SAFETY: all threads (uniform trip counts); tile kt + ST is whole (not the last).
            unsafe { p.ktile::<ISSUE_WHOLE>(kt, a, b, &pr) };
            kt += 1;
        }
    }
    while kt + ST < ktiles {
        // SAFETY: as above.
        unsafe { p.ktile::<ISSUE_CHECKED>(kt, a, b, &pr) };
        kt += 1;
    }
    while kt < ktiles {
        // SAFETY: as above.
        unsafe { p.ktile::<ISSUE_NONE>(kt, a, b, &pr) };
        kt += 1;
    }
    let acc = p.acc;
    cp_async_wait::<0>();
    // SAFETY: all threads; after it no warp reads the ring, whose start becomes the warps'
    // epilogue scratch (warp w at w * 16 * (NT * 8 + 8) * 4 bytes: at most 36 KiB, within
    // every tile's ring).
    unsafe { sync_threads() };
    let scratch = smem + (warp * 16 * (NT * 8 + 8) * 4) as u32;
    // SAFETY: forwarded from the caller; the scratch region is this warp's.
    unsafe { tc_epilogue(c, d, bias, pr, bm + m0, bn + n0, lane, &acc, scratch) };
}
