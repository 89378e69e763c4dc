//! GEMM entry points. f16/bf16/tf32 inputs: `mma.sync` tensor-core tiles fed by `ldmatrix`
//! from a multi-stage `cp.async` ring in shared memory, one instantiation per tile of
//! `gemm::tc::TILES`; f32: register-blocked FFMA outer products with two shared-memory stages
//! filled from registers. All predicate every edge (any M, N, K >= 1 in the same kernel), fuse
//! the epilogue, and walk a strided or pointer-array batch with `blockIdx.z`.

use crate::arch::nvptx::{
    block_idx_x, block_idx_y, block_idx_z, cp_async_4, cp_async_8, cp_async_16, cp_async_commit, cp_async_wait,
    dyn_smem_addr, gemm_smem_addr, ld_global_v4, ld_shared_b32, ld_shared_v4_f32, ldmatrix_x4, ldmatrix_x4_trans,
    mma_m16n8k8_tf32, mma_m16n8k16_bf16, mma_m16n8k16_f16, st_global_v4, st_shared_b16, st_shared_f32,
    st_shared_v2_f32, st_shared_v4, sync_threads, sync_warp, thread_idx_x,
};
use crate::element::Element;
use crate::gemm::{Epilogue, ffma, tc};
use half::{bf16, f16};

/// Problem description every GEMM entry receives (one struct keeps the 17 parameters in one
/// place; it is passed field by field in the ABI).
#[derive(Clone, Copy)]
struct Problem {
    m: usize,
    n: usize,
    k: usize,
    lda: usize,
    ldb: usize,
    ldc: usize,
    alpha: f32,
    beta: f32,
    flags: u32,
}

/// Loads 4 consecutive f32 starting at `idx` (first `valid` exist), zero-filling the rest.
#[inline(always)]
unsafe fn load4_f32<const VEC: bool>(p: *const f32, idx: usize, valid: usize) -> [f32; 4] {
    if VEC && valid >= 4 {
        // SAFETY: 4 valid elements from a 16-byte aligned address (host-checked alignment).
        return unsafe { ld_global_v4(p.add(idx) as *const u32) }.map(f32::from_bits);
    }
    let mut v = [0.0f32; 4];
    for (e, x) in v.iter_mut().enumerate() {
        if e < valid {
            // SAFETY: e < valid.
            *x = unsafe { *p.add(idx + e) };
        }
    }
    v
}

#[inline(always)]
fn sat_sub(a: usize, b: usize) -> usize {
    if a > b { a - b } else { 0 }
}

// ---------------------------------------------------------------------------------------------
// Tensor-core kernel (f16 / bf16 / tf32 inputs, f32 accumulators).
//
// Tiles live in dynamic shared memory as a ring of `ST` stages; each stage holds an A tile and
// a B tile covering `KB` bytes of K. A k-contiguous operand (A row-major, B column-major) is
// stored as rows of K (`ldmatrix`); an M/N-contiguous one as rows of M or N (`ldmatrix.trans`
// for 16-bit, scalar fragment reads for tf32). Global -> shared goes through `cp.async` of
// `AL` bytes (16, 8 or 4), so later stages load while this one is multiplied; `AL` = 2 (16-bit
// operands of odd leading dimension) uses plain loads and stores into the same ring.

/// A tensor-core input type: element size and the `mma` consuming 32 bytes of K per row.
trait TcElem: Element {
    const BYTES: usize;
    /// # Safety
    /// Whole-warp convergence.
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4];
}

impl TcElem for bf16 {
    const BYTES: usize = 2;
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        // SAFETY: forwarded.
        unsafe { mma_m16n8k16_bf16(a, b, c) }
    }
}

impl TcElem for f16 {
    const BYTES: usize = 2;
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        // SAFETY: forwarded.
        unsafe { mma_m16n8k16_f16(a, b, c) }
    }
}

/// f32 data multiplied as TF32.
impl TcElem for f32 {
    const BYTES: usize = 4;
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        // SAFETY: forwarded.
        unsafe { mma_m16n8k8_tf32(a, b, c) }
    }
}

/// A thread's share of the stage loads of one operand, worked out once per block. With the
/// thread count a multiple of the chunks per tile row, a thread always moves the same
/// `AL`-byte column (`cb`) of the tile, in `CH` rows spaced `RS` apart: a k-tile then costs a
/// pointer step and one validity select per chunk instead of the index arithmetic of each.
///
/// Tile geometry: with `KC` (k contiguous in memory, element (r, kk) at `r * ld + kk`) the tile
/// is `ROWS` rows of `KB` bytes of K; otherwise `KB / E::BYTES` rows of K, each `ROWS`
/// elements of the operand's M or N wide.
struct Loader<E, const KC: bool, const AL: usize, const ROWS: usize, const KB: usize, const TH: usize> {
    /// Global address of the thread's first chunk in the next k-tile (wrapping arithmetic: it
    /// is only dereferenced where valid).
    src: *const u8,
    /// Offset of the thread's first chunk in the stage tile.
    soff: u32,
    /// KC: how many of the thread's chunks have their row inside the operand; else: the valid
    /// bytes of each chunk whose K row exists (short only at the operand's M or N edge).
    lim: u32,
    /// KC: the k of the thread's column within the tile; else: its first tile row.
    kofs: u32,
    _e: core::marker::PhantomData<E>,
}

impl<E: TcElem, const KC: bool, const AL: usize, const ROWS: usize, const KB: usize, const TH: usize>
    Loader<E, KC, AL, ROWS, KB, TH>
{
    /// `AL`-byte chunks per tile row.
    const PER_ROW: usize = if KC { KB / AL } else { ROWS * E::BYTES / AL };
    /// Chunks per thread.
    const CH: usize = if KC { ROWS } else { KB / E::BYTES } * Self::PER_ROW / TH;
    /// Tile rows between a thread's chunks.
    const RS: usize = TH / Self::PER_ROW;
    /// Bytes per tile row in shared memory (padded against bank conflicts).
    const PITCH: usize = if KC { KB + 16 } else { tc::pitch_mn(ROWS, E::BYTES) };

    /// The loader of thread `tid` for the operand at `p` (leading dimension `ld` elements,
    /// `rows` rows in M or N), whose tile starts at operand row `row0`.
    #[inline(always)]
    fn new(p: *const u8, ld: usize, row0: usize, rows: usize, tid: usize) -> Self {
        // Every compiled tile divides evenly; a new tile that does not fails to build here.
        const {
            assert!(TH % Self::PER_ROW == 0 && Self::CH >= 1);
            assert!((if KC { ROWS } else { KB / E::BYTES }) * Self::PER_ROW == Self::CH * TH);
        };
        let (r0, cb) = (tid / Self::PER_ROW, (tid % Self::PER_ROW) * AL);
        let soff = (r0 * Self::PITCH + cb) as u32;
        let (off, lim, kofs) = if KC {
            let gr = row0 + r0;
            ((gr * ld + cb / E::BYTES) * E::BYTES, sat_sub(rows, gr).div_ceil(Self::RS).min(Self::CH), cb / E::BYTES)
        } else {
            let gr = row0 + cb / E::BYTES;
            ((r0 * ld + gr) * E::BYTES, (sat_sub(rows, gr) * E::BYTES).min(AL), r0)
        };
        Loader { src: p.wrapping_add(off), soff, lim: lim as u32, kofs: kofs as u32, _e: core::marker::PhantomData }
    }

    /// Moves to the next k-tile in global memory.
    #[inline(always)]
    fn step(&mut self, ld: usize) {
        let kstep = if KC { KB } else { KB * ld };
        self.src = self.src.wrapping_add(kstep);
    }

    /// `issue` for a tile known to lie wholly inside the operand (rows and K): no tests.
    ///
    /// # Safety
    /// As `issue`, and every chunk of the tile exists.
    #[inline(always)]
    unsafe fn issue_whole(&mut self, dst: u32, ld: usize) {
        let gstride = Self::RS * ld * E::BYTES;
        for i in 0..Self::CH {
            let sdst = dst + self.soff + (i * Self::RS * Self::PITCH) as u32;
            // SAFETY: the chunk exists (caller), aligned per the caller; `sdst` lies in the stage
            // tile and is AL-aligned.
            unsafe { copy_chunk::<AL>(sdst, self.src.wrapping_add(i * gstride), AL as u32) };
        }
        self.step(ld);
    }

    /// Issues the thread's chunks of the k-tile starting at `k0` (the tile after the last one
    /// issued) into the stage tile at `dst`, zero-filling what lies beyond the operand.
    ///
    /// # Safety
    /// `p` and `ld` as given to `new`; `p` covers the operand and, for `AL` >= 4, is
    /// `AL`-aligned with `ld * E::BYTES` a multiple of `AL`; `dst` is a stage tile of the
    /// dynamic shared buffer.
    #[inline(always)]
    unsafe fn issue(&mut self, dst: u32, p: *const u8, ld: usize, k0: usize, k: usize) {
        let gstride = Self::RS * ld * E::BYTES;
        // k left from the thread's first element (KC) or first tile row.
        let krem = sat_sub(k, k0 + self.kofs as usize);
        let kv = (krem * E::BYTES).min(AL) as u32;
        let all_valid = if KC {
            self.lim as usize == Self::CH && kv as usize == AL
        } else {
            self.lim as usize == AL && (Self::CH - 1) * Self::RS < krem
        };
        if all_valid {
            // SAFETY: every chunk of this thread's share exists (all_valid); as the caller's.
            return unsafe { self.issue_whole(dst, ld) };
        }
        for i in 0..Self::CH {
            let valid = if KC {
                if (i as u32) < self.lim { kv } else { 0 }
            } else if i * Self::RS < krem {
                self.lim
            } else {
                0
            };
            // With nothing valid no byte is read; the operand base stands in.
            let src = if valid > 0 { self.src.wrapping_add(i * gstride) } else { p };
            let sdst = dst + self.soff + (i * Self::RS * Self::PITCH) as u32;
            // SAFETY: `valid` bytes of the operand exist at `src`, AL-aligned per the caller;
            // `sdst` lies in the stage tile (row r0 + i RS < the tile's rows), AL-aligned.
            unsafe { copy_chunk::<AL>(sdst, src, valid) };
        }
        self.step(ld);
    }
}

/// Global -> shared copy of one `AL`-byte chunk of which the first `valid` bytes exist (the
/// rest is zero-filled): `cp.async` for 16, 8 and 4 bytes, a plain 2-byte load and store
/// otherwise.
///
/// # Safety
/// `valid` (<= AL) bytes are readable at `src`, which is AL-aligned (any address when 0);
/// `sdst` is an AL-aligned address in the dynamic shared buffer.
#[inline(always)]
unsafe fn copy_chunk<const AL: usize>(sdst: u32, src: *const u8, valid: u32) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match AL {
            16 => cp_async_16(sdst, src, valid),
            8 => cp_async_8(sdst, src, valid),
            4 => cp_async_4(sdst, src, valid),
            _ => {
                let h = if valid > 0 { *(src as *const u16) } else { 0 };
                st_shared_b16(sdst, h);
            }
        }
    }
}

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
unsafe fn tc_gemm<
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

/// Stores a warp's `MT*16 x NT*8` accumulators (rows from `m0`, columns from `n0`) through
/// the warp's own `16 x NT*8` f32 region of shared memory at `scratch`, one m-tile at a time,
/// so that each lane then writes 4 consecutive outputs of a row (coalesced, one 8- or 16-byte
/// store where aligned) instead of scattered pairs. A lane keeps the same 4 columns in every
/// row it writes, so their bias is read once.
///
/// # Safety
/// The output pointers cover the problem; `scratch` holds `16 * (NT * 8 + 8) * 4` bytes that
/// no other warp uses; all 32 lanes call it.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn tc_epilogue<O: Element, const MT: usize, const NT: usize>(
    c: *const O,
    d: *mut O,
    bias: *const O,
    pr: Problem,
    m0: usize,
    n0: usize,
    lane: usize,
    acc: &[[[f32; 4]; NT]; MT],
    scratch: u32,
) {
    let width = NT * 8;
    // 8 floats of padding: a half-warp's 8-byte writes (rows g, columns 2t) hit distinct banks.
    let pitch = (width + 8) * 4;
    let size = core::mem::size_of::<O>();
    let quads = pr.ldc % 4 == 0 && (d as usize) % (4 * size) == 0;
    let (g, t) = (lane / 4, lane % 4);
    let lanes_per_row = width / 4;
    let rows_per_pass = 32 / lanes_per_row;
    let (r0, cc) = (lane / lanes_per_row, (lane % lanes_per_row) * 4);
    let gn = n0 + cc;
    let mut bv = [0.0f32; 4];
    if pr.flags & 1 != 0 {
        for (j, b) in bv.iter_mut().enumerate() {
            if gn + j < pr.n {
                // SAFETY: column gn + j exists and the bias covers every column.
                *b = unsafe { *bias.add(gn + j) }.to_f32();
            }
        }
    }
    let rows = Rows { m0: 0, gn, src: scratch + (r0 * pitch + cc * 4) as u32, step: (rows_per_pass * pitch) as u32 };
    for (mt, row) in acc.iter().enumerate() {
        for (nt, cell) in row.iter().enumerate() {
            let col = ((nt * 8 + 2 * t) * 4) as u32;
            // SAFETY: rows g and g + 8 of the warp's region, 8-byte aligned.
            unsafe {
                st_shared_v2_f32(scratch + (g * pitch) as u32 + col, cell[0], cell[1]);
                st_shared_v2_f32(scratch + ((g + 8) * pitch) as u32 + col, cell[2], cell[3]);
            }
        }
        sync_warp();
        let rows = Rows { m0: m0 + mt * 16 + r0, ..rows };
        // SAFETY: the rows are in the warp's region, written above; outputs predicated inside.
        unsafe { tc_drain(c, d, pr.out(), rows, rows_per_pass, 16 / rows_per_pass, bv, quads) };
        sync_warp();
    }
}

/// Where a lane's epilogue rows are: output rows `m0`, `m0 + rs`, ... at columns `gn..gn+4`,
/// staged in shared memory at `src`, `src + step`, ...
#[derive(Clone, Copy)]
struct Rows {
    m0: usize,
    gn: usize,
    src: u32,
    step: u32,
}

/// Applies the epilogue to `passes` staged rows of 4 outputs and stores them (4-wide where
/// `quads` says the output allows it). One call per m-tile, not per output: the activation is
/// a compile-time choice here, so the loop carries no per-element flag tests, and `bias`
/// holds the lane's 4 bias values (0 where unused).
///
/// # Safety
/// The staged rows are in shared memory; the output pointers cover the problem.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
unsafe fn tc_drain<O: Element>(
    c: *const O,
    d: *mut O,
    out: OutArgs,
    rows: Rows,
    rs: usize,
    passes: usize,
    bias: [f32; 4],
    quads: bool,
) {
    // SAFETY (each arm): forwarded.
    unsafe {
        match (out.flags >> 1) & 3 {
            0 => drain_rows::<O, 0>(c, d, out, rows, rs, passes, bias, quads),
            1 => drain_rows::<O, 1>(c, d, out, rows, rs, passes, bias, quads),
            2 => drain_rows::<O, 2>(c, d, out, rows, rs, passes, bias, quads),
            _ => drain_rows::<O, 3>(c, d, out, rows, rs, passes, bias, quads),
        }
    }
}

/// `tc_drain` for activation `ACT` (the flags' bits 1-2).
///
/// # Safety
/// As `tc_drain`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn drain_rows<O: Element, const ACT: u32>(
    c: *const O,
    d: *mut O,
    out: OutArgs,
    rows: Rows,
    rs: usize,
    passes: usize,
    bias: [f32; 4],
    quads: bool,
) {
    let gn = rows.gn;
    if gn >= out.n {
        return;
    }
    let flags = (out.flags & !6) | (ACT << 1);
    let full = quads && gn + 3 < out.n;
    for pass in 0..passes {
        let gm = rows.m0 + pass * rs;
        if gm >= out.m {
            break;
        }
        // SAFETY: the staged row, 16-byte aligned.
        let v = unsafe { ld_shared_v4_f32(rows.src + pass as u32 * rows.step) };
        let idx = gm * out.ldc + gn;
        let epi = |x: f32, j: usize| {
            // SAFETY: (gm, gn + j) is inside the output; C is read only when enabled.
            let cv = if flags & 8 != 0 { unsafe { (*c.add(idx + j)).to_f32() } } else { 0.0 };
            O::from_f32(Epilogue::apply_flags(flags, out.alpha, out.beta, x, cv, bias[j], O::DTYPE))
        };
        if full {
            let o = [epi(v[0], 0), epi(v[1], 1), epi(v[2], 2), epi(v[3], 3)];
            // SAFETY: the 4 elements are inside the output and `quads` aligns the address to
            // their total size.
            unsafe { store_quad(d.add(idx), o) };
        } else {
            for (j, &x) in v.iter().enumerate() {
                if gn + j < out.n {
                    // SAFETY: (gm, gn + j) is inside the output.
                    unsafe { *d.add(idx + j) = epi(x, j) };
                }
            }
        }
    }
}

/// Stores four adjacent output elements with one 8- (16-bit) or 16-byte (f32) access.
///
/// # Safety
/// The 4 elements at `p` are writable and `p` is aligned to 4 times the element size.
#[inline(always)]
unsafe fn store_quad<O: Element>(p: *mut O, o: [O; 4]) {
    // SAFETY: the caller guarantees alignment and bounds; the element types are plain 2- or
    // 4-byte values.
    unsafe {
        if core::mem::size_of::<O>() == 2 {
            let b: [u16; 4] = core::mem::transmute_copy(&o);
            *(p as *mut u64) = b[0] as u64 | (b[1] as u64) << 16 | (b[2] as u64) << 32 | (b[3] as u64) << 48;
        } else {
            let b: [u32; 4] = core::mem::transmute_copy(&o);
            st_global_v4(p as *mut u32, b);
        }
    }
}

/// What the epilogue needs, small enough to travel in registers to the non-inlined store.
#[derive(Clone, Copy)]
struct OutArgs {
    m: usize,
    n: usize,
    ldc: usize,
    alpha: f32,
    beta: f32,
    flags: u32,
}

impl Problem {
    #[inline(always)]
    fn out(&self) -> OutArgs {
        OutArgs { m: self.m, n: self.n, ldc: self.ldc, alpha: self.alpha, beta: self.beta, flags: self.flags }
    }
}

/// Epilogue and predicated store of one output element. Not inlined: its body (the GELU
/// forms) repeated for each of a thread's 64 accumulators would stop the compiler from fully
/// unrolling the store loops, which then index the accumulators from local memory.
#[inline(never)]
unsafe fn store_out<O: Element>(c: *const O, d: *mut O, bias: *const O, out: OutArgs, gm: usize, gn: usize, v: f32) {
    if gm < out.m && gn < out.n {
        let idx = gm * out.ldc + gn;
        // SAFETY: (gm, gn) is inside the output; C and bias are read only when enabled.
        let cv = if out.flags & 8 != 0 { unsafe { (*c.add(idx)).to_f32() } } else { 0.0 };
        let bv = if out.flags & 1 != 0 { unsafe { (*bias.add(gn)).to_f32() } } else { 0.0 };
        let o = Epilogue::apply_flags(out.flags, out.alpha, out.beta, v, cv, bv, O::DTYPE);
        // SAFETY: as above.
        unsafe { *d.add(idx) = O::from_f32(o) };
    }
}

// ---------------------------------------------------------------------------------------------
// FFMA kernel (f32).

const FF_TILE_BYTES: u32 = (ffma::BK * ffma::PITCH * 4) as u32;
const FF_STAGE_BYTES: u32 = 2 * FF_TILE_BYTES;

/// Global -> registers for one 128 x 8 f32 operand tile (rows M or N): 4 elements per thread.
/// Returns the values and, for the store, nothing else: the mapping is recomputed there.
#[inline(always)]
unsafe fn ff_load_tile<const KCONTIG: bool, const VEC: bool>(
    p: *const f32,
    ld: usize,
    row0: usize,
    rows: usize,
    k0: usize,
    k: usize,
    tid: usize,
) -> [f32; 4] {
    if KCONTIG {
        // (128 rows, 2 chunks of 4 along k)
        let (r, kc) = (tid / 2, (tid % 2) * 4);
        let (gr, gk) = (row0 + r, k0 + kc);
        let valid = if gr < rows { sat_sub(k, gk).min(4) } else { 0 };
        // SAFETY: only valid elements are read.
        unsafe { load4_f32::<VEC>(p, gr * ld + gk, valid) }
    } else {
        // (8 k, 32 chunks of 4 along rows)
        let (kk, rc) = (tid / 32, (tid % 32) * 4);
        let (gk, gr) = (k0 + kk, row0 + rc);
        let valid = if gk < k { sat_sub(rows, gr).min(4) } else { 0 };
        // SAFETY: only valid elements are read.
        unsafe { load4_f32::<VEC>(p, gk * ld + gr, valid) }
    }
}

/// Registers -> shared, stored row-contiguous per k: `(r, kk)` at `base + (kk * PITCH + r) * 4`.
#[inline(always)]
unsafe fn ff_store_tile<const KCONTIG: bool>(base: u32, v: [f32; 4], tid: usize) {
    if KCONTIG {
        let (r, kc) = (tid / 2, (tid % 2) * 4);
        #[allow(clippy::needless_range_loop)]
        for e in 0..4 {
            // SAFETY: kc + e < 8, r < 128: inside the tile.
            unsafe { st_shared_f32(base + (((kc + e) * ffma::PITCH + r) * 4) as u32, v[e]) };
        }
    } else {
        let (kk, rc) = (tid / 32, (tid % 32) * 4);
        // SAFETY: 16-byte aligned (PITCH and rc multiples of 4), inside the tile.
        unsafe { st_shared_v4(base + ((kk * ffma::PITCH + rc) * 4) as u32, v.map(f32::to_bits)) };
    }
}

/// One 128 x 128 output tile of `D = epilogue(A B)` in f32 FFMA; each thread owns 8 x 8
/// outputs as four 4 x 4 blocks (rows `ty*4` and `64 + ty*4`, columns `tx*4` and `64 + tx*4`)
/// so its shared-memory reads are 16-byte vectors.
///
/// # Safety
/// Launched with 256 threads; pointers cover the problem; for `VEC` A and B are 16-byte
/// aligned and `lda`, `ldb` multiples of 4.
#[inline(always)]
unsafe fn ffma_gemm<const A_ROW: bool, const B_KC: bool, const VEC: bool>(
    a: *const f32,
    b: *const f32,
    c: *const f32,
    d: *mut f32,
    bias: *const f32,
    pr: Problem,
) {
    let tid = thread_idx_x() as usize;
    let (tx, ty) = (tid % 16, tid / 16);
    let bm = block_idx_y() as usize * ffma::BM;
    let bn = block_idx_x() as usize * ffma::BN;
    let smem = gemm_smem_addr();
    let load_a = |k0: usize| unsafe { ff_load_tile::<A_ROW, VEC>(a, pr.lda, bm, pr.m, k0, pr.k, tid) };
    let load_b = |k0: usize| unsafe { ff_load_tile::<B_KC, VEC>(b, pr.ldb, bn, pr.n, k0, pr.k, tid) };

    let mut acc = [[0.0f32; 8]; 8];
    let ktiles = pr.k.div_ceil(ffma::BK);
    let (mut ra, mut rb) = (load_a(0), load_b(0));
    // SAFETY: stage 0 inside the GEMM buffer; all threads reach the barrier.
    unsafe {
        ff_store_tile::<A_ROW>(smem, ra, tid);
        ff_store_tile::<B_KC>(smem + FF_TILE_BYTES, rb, tid);
        sync_threads();
    }
    for kt in 0..ktiles {
        let stage = smem + (kt % 2) as u32 * FF_STAGE_BYTES;
        let has_next = kt + 1 < ktiles;
        if has_next {
            ra = load_a((kt + 1) * ffma::BK);
            rb = load_b((kt + 1) * ffma::BK);
        }
        for kk in 0..ffma::BK {
            let row = stage + (kk * ffma::PITCH * 4) as u32;
            let brow = row + FF_TILE_BYTES;
            // SAFETY: 16-byte aligned reads inside the tiles.
            let (a0, a1, b0, b1) = unsafe {
                (
                    ld_shared_v4_f32(row + (ty * 16) as u32),
                    ld_shared_v4_f32(row + (256 + ty * 16) as u32),
                    ld_shared_v4_f32(brow + (tx * 16) as u32),
                    ld_shared_v4_f32(brow + (256 + tx * 16) as u32),
                )
            };
            let av = [a0[0], a0[1], a0[2], a0[3], a1[0], a1[1], a1[2], a1[3]];
            let bv = [b0[0], b0[1], b0[2], b0[3], b1[0], b1[1], b1[2], b1[3]];
            for (i, row) in acc.iter_mut().enumerate() {
                for (j, cell) in row.iter_mut().enumerate() {
                    *cell = crate::arch::fmaf(av[i], bv[j], *cell);
                }
            }
        }
        if has_next {
            let next = smem + ((kt + 1) % 2) as u32 * FF_STAGE_BYTES;
            // SAFETY: the other stage was last read before the previous barrier.
            unsafe {
                ff_store_tile::<A_ROW>(next, ra, tid);
                ff_store_tile::<B_KC>(next + FF_TILE_BYTES, rb, tid);
            }
        }
        // SAFETY: uniform trip count.
        unsafe { sync_threads() };
    }
    for (i, row) in acc.iter().enumerate() {
        let gm = bm + if i < 4 { ty * 4 + i } else { 64 + ty * 4 + i - 4 };
        for (j, &v) in row.iter().enumerate() {
            let gn = bn + if j < 4 { tx * 4 + j } else { 64 + tx * 4 + j - 4 };
            // SAFETY: predicated inside.
            unsafe { store_out(c, d, bias, pr.out(), gm, gn, v) };
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points: `ft_gemm_<in>_<a><b>_v<align>_<out>_<tile>` (see `GemmVariant::entry_name`).
// ABI: (a, b, c, d, bias, m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, alpha, beta,
// flags); strides are in elements, blockIdx.z is the batch index. With flag bit 4 set, a, b,
// c and d are device arrays of per-batch pointers (pointer-array batches) and strides unused.

macro_rules! gemm_entry {
    ($name:expr, $T:ty, $O:ty, |$a:ident, $b:ident, $c:ident, $d:ident, $bias:ident, $pr:ident| $body:expr) => {
        const _: () = {
            #[unsafe(export_name = $name)]
            #[allow(clippy::too_many_arguments)]
            unsafe extern "ptx-kernel" fn entry(
                a: *const $T,
                b: *const $T,
                c: *const $O,
                d: *mut $O,
                $bias: *const $O,
                m: u32,
                n: u32,
                k: u32,
                lda: u32,
                ldb: u32,
                ldc: u32,
                stride_a: u64,
                stride_b: u64,
                stride_c: u64,
                alpha: f32,
                beta: f32,
                flags: u32,
            ) {
                let z = block_idx_z() as usize;
                let $pr = Problem {
                    m: m as usize,
                    n: n as usize,
                    k: k as usize,
                    lda: lda as usize,
                    ldb: ldb as usize,
                    ldc: ldc as usize,
                    alpha,
                    beta,
                    flags,
                };
                // SAFETY: the host checked every pointer (or pointer array) covers its batch of
                // matrices, the alignment the variant needs, and the block size and shared
                // memory of the variant.
                unsafe {
                    let ($a, $b, $c, $d) = if flags & crate::gemm::PTR_ARRAY != 0 {
                        (
                            *(a as *const *const $T).add(z),
                            *(b as *const *const $T).add(z),
                            *(c as *const *const $O).add(z),
                            *(d as *const *mut $O).add(z),
                        )
                    } else {
                        (
                            a.add(z * stride_a as usize),
                            b.add(z * stride_b as usize),
                            c.add(z * stride_c as usize),
                            d.add(z * stride_c as usize),
                        )
                    };
                    $body
                }
            }
        };
    };
}

// FFMA (f32): arguments A row-major, B column-major, 16-byte loads.
macro_rules! ffma_entry {
    ($ab:literal, $ar:literal, $bc:literal, $al:literal, $vec:literal) => {
        gemm_entry!(concat!("ft_gemm_f32_", $ab, "_v", $al, "_f32_128x128x8"), f32, f32, |a, b, c, d, bias, pr| {
            ffma_gemm::<$ar, $bc, $vec>(a, b, c, d, bias, pr)
        });
    };
}
ffma_entry!("rr", true, false, 16, true);
ffma_entry!("rc", true, true, 16, true);
ffma_entry!("cr", false, false, 16, true);
ffma_entry!("cc", false, true, 16, true);
ffma_entry!("rr", true, false, 4, false);
ffma_entry!("rc", true, true, 4, false);
ffma_entry!("cr", false, false, 4, false);
ffma_entry!("cc", false, true, 4, false);

// Tensor cores. A tile group is (WM, WN, MT, NT, KB, ST, BM, BN, threads, name for 16-bit
// inputs, name for tf32) and must match `gemm::tc::TILES` (the PTX test checks every name).
macro_rules! tc_entry {
    ($in:literal, $ab:literal, $akc:literal, $bkc:literal, $E:ty, $out:literal, $O:ty, $al:literal, $kind:ident,
     ($wm:literal, $wn:literal, $mt:literal, $nt:literal, $kb:literal, $st:literal, $bm:literal, $bn:literal,
      $th:literal, $n16:literal, $n32:literal)) => {
        gemm_entry!(
            concat!("ft_gemm_", $in, "_", $ab, "_v", $al, "_", $out, "_", tc_entry!(@name $kind, $n16, $n32)),
            $E,
            $O,
            |a, b, c, d, bias, pr| tc_gemm::<$E, $O, $akc, $bkc, $al, $wm, $wn, $mt, $nt, $kb, $st, $bm, $bn, $th>(
                a as *const u8,
                b as *const u8,
                c,
                d,
                bias,
                pr
            )
        );
    };
    (@name half, $n16:literal, $n32:literal) => { $n16 };
    (@name tf32, $n16:literal, $n32:literal) => { $n32 };
}

/// The four layouts of one (input, output, load width, tile).
macro_rules! tc_layouts {
    ($in:literal, $E:ty, $out:literal, $O:ty, $al:literal, $kind:ident, $tile:tt) => {
        tc_entry!($in, "rr", true, false, $E, $out, $O, $al, $kind, $tile);
        tc_entry!($in, "rc", true, true, $E, $out, $O, $al, $kind, $tile);
        tc_entry!($in, "cr", false, false, $E, $out, $O, $al, $kind, $tile);
        tc_entry!($in, "cc", false, true, $E, $out, $O, $al, $kind, $tile);
    };
}

/// Calls `$m!(args..., tile)` with the default tile (`TILES[0]`).
macro_rules! default_tile {
    ($m:ident!($($a:tt)*)) => {
        $m!($($a)* (2, 4, 4, 4, 64, 4, 128, 128, 256, "128x128x32w2x4s4", "128x128x16w2x4s4"));
    };
}

/// Calls `$m!(args..., tile)` for `TILES[1..]`, in order.
macro_rules! tuned_tiles {
    ($m:ident!($($a:tt)*)) => {
        $m!($($a)* (2, 4, 4, 8, 64, 3, 128, 256, 256, "128x256x32w2x4s3", "128x256x16w2x4s3"));
        $m!($($a)* (4, 2, 4, 8, 64, 3, 256, 128, 256, "256x128x32w4x2s3", "256x128x16w4x2s3"));
        $m!($($a)* (2, 2, 4, 8, 64, 4, 128, 128, 128, "128x128x32w2x2s4", "128x128x16w2x2s4"));
        $m!($($a)* (2, 4, 4, 8, 128, 3, 128, 256, 256, "128x256x64w2x4s3", "128x256x32w2x4s3"));
        $m!($($a)* (2, 2, 4, 4, 64, 4, 128, 64, 128, "128x64x32w2x2s4", "128x64x16w2x2s4"));
        $m!($($a)* (2, 2, 2, 8, 64, 4, 64, 128, 128, "64x128x32w2x2s4", "64x128x16w2x2s4"));
        $m!($($a)* (2, 2, 2, 4, 64, 4, 64, 64, 128, "64x64x32w2x2s4", "64x64x16w2x2s4"));
    };
}

/// Calls `$m!(args..., tile)` for `gemm::tc::NARROW_TILES` (tile 4), in order.
macro_rules! narrow_tiles {
    ($m:ident!($($a:tt)*)) => {
        $m!($($a)* (2, 4, 4, 8, 128, 3, 128, 256, 256, "128x256x64w2x4s3", "128x256x32w2x4s3"));
    };
}

/// Default tile at every load width and output type; the other tiles at 16-byte loads with
/// the input's own output type, the narrow tiles also at 8-byte loads (see
/// `GemmVariant::all`).
macro_rules! tc_family {
    ($in:literal, $E:ty, $kind:ident, [$($al:literal)*], $outs:tt, $own:literal, $OwnO:ty) => {
        $(tc_family!(@outs $in, $E, $kind, $al, $outs);)*
        tuned_tiles!(tc_layouts!($in, $E, $own, $OwnO, 16, $kind,));
        narrow_tiles!(tc_layouts!($in, $E, $own, $OwnO, 8, $kind,));
    };
    (@outs $in:literal, $E:ty, $kind:ident, $al:literal, [$(($out:literal, $O:ty)),*]) => {
        $(default_tile!(tc_layouts!($in, $E, $out, $O, $al, $kind,));)*
    };
}

tc_family!("tf32", f32, tf32, [16 8 4], [("f32", f32)], "f32", f32);
tc_family!("f16", f16, half, [16 8 4 2], [("f16", f16), ("f32", f32)], "f16", f16);
tc_family!("bf16", bf16, half, [16 8 4 2], [("bf16", bf16), ("f32", f32)], "bf16", bf16);
