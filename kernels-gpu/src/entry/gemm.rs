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

/// Issues the loads of one operand tile (`rows` = BM or BN rows of the operand starting at
/// `row0`, K from `k0`) into the stage tile at `dst`. `KC`: k is the contiguous dimension in
/// memory (element (r, kk) at `r * ld + kk`), else at `kk * ld + r`.
///
/// # Safety
/// `p` covers the operand; for `AL` >= 4 it is `AL`-aligned and `ld * E::BYTES` a multiple of
/// `AL`; `dst` is a stage tile of the dynamic shared buffer.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn tc_issue<
    E: TcElem,
    const KC: bool,
    const AL: usize,
    const ROWS: usize,
    const KB: usize,
    const THREADS: usize,
>(
    dst: u32,
    p: *const u8,
    ld: usize,
    row0: usize,
    rows: usize,
    k0: usize,
    k: usize,
    tid: usize,
) {
    // Chunks of AL bytes: KC tiles are ROWS rows of KB bytes; others KB / BYTES rows of ROWS
    // elements.
    let per_row = if KC { KB / AL } else { ROWS * E::BYTES / AL };
    let total = if KC { ROWS * per_row } else { (KB / E::BYTES) * per_row };
    let pitch = if KC { KB + 16 } else { tc::pitch_mn(ROWS, E::BYTES) };
    for i in 0..total.div_ceil(THREADS) {
        let c = tid + i * THREADS;
        if total % THREADS != 0 && c >= total {
            break;
        }
        let (r, cb) = (c / per_row, (c % per_row) * AL);
        // (row of the operand, k) of the chunk's first element, and how many bytes exist.
        let (gr, gk, valid) = if KC {
            let (gr, gk) = (row0 + r, k0 + cb / E::BYTES);
            (gr, gk, if gr < rows { (sat_sub(k, gk) * E::BYTES).min(AL) } else { 0 })
        } else {
            let (gk, gr) = (k0 + r, row0 + cb / E::BYTES);
            (gr, gk, if gk < k { (sat_sub(rows, gr) * E::BYTES).min(AL) } else { 0 })
        };
        let off = if KC { gr * ld + gk } else { gk * ld + gr } * E::BYTES;
        let sdst = dst + (r * pitch + cb) as u32;
        // With nothing valid no byte is read; the base pointer stands in.
        let src = if valid > 0 { unsafe { p.add(off) } } else { p };
        // SAFETY: `valid` bytes exist at `src`, aligned to AL per the caller; `sdst` is inside the
        // stage tile (r and cb within the tile by construction) and AL-aligned.
        unsafe {
            match AL {
                16 => cp_async_16(sdst, src, valid as u32),
                8 => cp_async_8(sdst, src, valid as u32),
                4 => cp_async_4(sdst, src, valid as u32),
                _ => {
                    let h = if valid > 0 { *(src as *const u16) } else { 0 };
                    st_shared_b16(sdst, h);
                }
            }
        }
    }
}

/// The warp's A and B fragments of one 32-byte K step of a stage: `MT` A tiles of 16 rows
/// and `NT` B tiles of 8 columns.
///
/// # Safety
/// The stage holds complete tiles; all 32 lanes of every warp call it.
#[allow(clippy::too_many_arguments)]
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
    m0: usize,
    n0: usize,
    lane: usize,
) -> ([[u32; 4]; MT], [[u32; 2]; NT]) {
    let pk = (KB + 16) as u32;
    let (pa, pb) = (tc::pitch_mn(BM, E::BYTES) as u32, tc::pitch_mn(BN, E::BYTES) as u32);
    let kb0 = (ks * 32) as u32; // byte offset of the step along a k-contiguous row
    let ke0 = ks * 32 / E::BYTES; // first k element of the step
    let mut fa = [[0u32; 4]; MT];
    #[allow(clippy::needless_range_loop)]
    for mt in 0..MT {
        let m = m0 + mt * 16;
        fa[mt] = if A_KC {
            // Lanes 0-15 address rows m..m+15 at the step's first 16 bytes, 16-31 the next 16.
            let addr = sa + ((m + lane % 16) as u32) * pk + kb0 + ((lane / 16) * 16) as u32;
            // SAFETY: whole warp; 16-byte aligned rows inside the A tile.
            unsafe { ldmatrix_x4(addr) }
        } else if E::BYTES == 2 {
            // Stored [k][m]: matrices (k 0-7, m 0-7), (k 0-7, m 8-15), (k 8-15, m 0-7), (k 8-15, m 8-15).
            let kk = ke0 + (lane / 16) * 8 + lane % 8;
            let addr = sa + (kk as u32) * pa + ((m + ((lane / 8) % 2) * 8) * 2) as u32;
            // SAFETY: as above.
            unsafe { ldmatrix_x4_trans(addr) }
        } else {
            let (g, t) = (lane / 4, lane % 4);
            let at = |kk: usize, mm: usize| sa + ((ke0 + kk) as u32) * pa + ((m + mm) * 4) as u32;
            // SAFETY: 4-byte reads inside the A tile.
            unsafe {
                [
                    ld_shared_b32(at(t, g)),
                    ld_shared_b32(at(t, g + 8)),
                    ld_shared_b32(at(t + 4, g)),
                    ld_shared_b32(at(t + 4, g + 8)),
                ]
            }
        };
    }
    let mut fb = [[0u32; 2]; NT];
    for np in 0..NT / 2 {
        let n = n0 + np * 16;
        let q = if B_KC {
            // Matrices: (n 0-7, first 16 bytes), (n 0-7, next 16), (n 8-15, first), (n 8-15, next).
            let addr = sb + ((n + lane % 8 + (lane / 16) * 8) as u32) * pk + kb0 + (((lane / 8) % 2) * 16) as u32;
            // SAFETY: whole warp; rows inside the B tile.
            unsafe { ldmatrix_x4(addr) }
        } else if E::BYTES == 2 {
            // Stored [k][n]: matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15).
            let kk = ke0 + ((lane / 8) % 2) * 8 + lane % 8;
            let addr = sb + (kk as u32) * pb + ((n + (lane / 16) * 8) * 2) as u32;
            // SAFETY: as above.
            unsafe { ldmatrix_x4_trans(addr) }
        } else {
            let (g, t) = (lane / 4, lane % 4);
            let at = |kk: usize, nn: usize| sb + ((ke0 + kk) as u32) * pb + ((n + nn) * 4) as u32;
            // SAFETY: 4-byte reads inside the B tile.
            unsafe {
                [
                    ld_shared_b32(at(t, g)),
                    ld_shared_b32(at(t + 4, g)),
                    ld_shared_b32(at(t, g + 8)),
                    ld_shared_b32(at(t + 4, g + 8)),
                ]
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
    let issue = |kt: usize| {
        let stage = smem + (kt % ST) as u32 * stage_bytes;
        // SAFETY: the stage lies in the dynamic buffer the host sized; operands as above.
        unsafe {
            tc_issue::<E, A_KC, AL, BM, KB, TH>(stage, a, pr.lda, bm, pr.m, kt * bk, pr.k, tid);
            tc_issue::<E, B_KC, AL, BN, KB, TH>(stage + a_bytes, b, pr.ldb, bn, pr.n, kt * bk, pr.k, tid);
        }
    };
    // Software pipeline: all ST stages are filled up front; in each k-tile the fragments of
    // step ks + 1 are read while step ks multiplies, and before the tile's last step the
    // block waits for the next tile, refills the stage it just finished reading (every
    // fragment of it is in registers by then) and starts reading the next tile, so neither
    // the barrier nor the first ldmatrix of a tile stalls the tensor cores.
    for kt in 0..ST {
        if kt < ktiles {
            issue(kt);
        }
        // Empty groups keep the group count in step with the tiles.
        cp_async_commit();
    }
    let mut acc = [[[0.0f32; 4]; NT]; MT];
    let (m0, n0) = (wm * MT * 16, wn * NT * 8);
    let frags = |stage: u32, ks: usize| {
        // SAFETY: callers pass a stage whose tile is complete (after the barrier); whole warps.
        unsafe { tc_frags::<E, A_KC, B_KC, BM, BN, KB, MT, NT>(stage, stage + a_bytes, ks, m0, n0, lane) }
    };
    cp_async_wait_at_most(ST - 1);
    // SAFETY: all threads; tile 0 is complete after it.
    unsafe { sync_threads() };
    let mut cur = frags(smem, 0);
    for kt in 0..ktiles {
        let stage = smem + (kt % ST) as u32 * stage_bytes;
        for ks in 0..KB / 32 {
            let next = if ks + 1 < KB / 32 {
                frags(stage, ks + 1)
            } else {
                // Tile kt + 1 complete: of the tiles committed (up to kt + ST - 1), ST - 2 may pend.
                cp_async_wait_at_most(ST - 2);
                // SAFETY: all threads (uniform trip counts); after it tile kt + 1 is visible and
                // no warp reads stage kt any more.
                unsafe { sync_threads() };
                if kt + ST < ktiles {
                    issue(kt + ST);
                }
                cp_async_commit();
                if kt + 1 < ktiles { frags(smem + ((kt + 1) % ST) as u32 * stage_bytes, 0) } else { cur }
            };
            // SAFETY: whole warps.
            unsafe { tc_mma::<E, MT, NT>(&cur, &mut acc) };
            cur = next;
        }
    }
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
/// store where aligned) instead of scattered pairs.
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
    let pitch = ((width + 8) * 4) as u32;
    let size = core::mem::size_of::<O>();
    let quads = pr.ldc % 4 == 0 && (d as usize) % (4 * size) == 0;
    let (g, t) = (lane / 4, lane % 4);
    let lanes_per_row = width / 4;
    let rows_per_pass = 32 / lanes_per_row;
    for (mt, row) in acc.iter().enumerate() {
        for (nt, cell) in row.iter().enumerate() {
            let col = ((nt * 8 + 2 * t) * 4) as u32;
            // SAFETY: rows g and g + 8 of the warp's region, 8-byte aligned.
            unsafe {
                st_shared_v2_f32(scratch + g as u32 * pitch + col, cell[0], cell[1]);
                st_shared_v2_f32(scratch + (g + 8) as u32 * pitch + col, cell[2], cell[3]);
            }
        }
        sync_warp();
        for pass in 0..16 / rows_per_pass {
            let r = pass * rows_per_pass + lane / lanes_per_row;
            let cc = (lane % lanes_per_row) * 4;
            // SAFETY: inside the warp's region, 16-byte aligned (pitch and cc multiples of 4).
            let v = unsafe { ld_shared_v4_f32(scratch + r as u32 * pitch + (cc * 4) as u32) };
            // SAFETY: predicated on the bounds checked inside.
            unsafe { store_out_quad(c, d, bias, pr.out(), m0 + mt * 16 + r, n0 + cc, v, quads) };
        }
        sync_warp();
    }
}

/// Epilogue and predicated store of the outputs `(gm, gn .. gn + 4)`. Not inlined: its body
/// (the GELU forms) repeated for each of a thread's output groups would make the epilogue
/// loops too large to unroll, and the accumulators would then be indexed from local memory.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
unsafe fn store_out_quad<O: Element>(
    c: *const O,
    d: *mut O,
    bias: *const O,
    out: OutArgs,
    gm: usize,
    gn: usize,
    v: [f32; 4],
    quads: bool,
) {
    if gm >= out.m || gn >= out.n {
        return;
    }
    let idx = gm * out.ldc + gn;
    let epi = |x: f32, j: usize| {
        // SAFETY: (gm, gn + j) is inside the output; C and bias are read only when enabled.
        let cv = if out.flags & 8 != 0 { unsafe { (*c.add(idx + j)).to_f32() } } else { 0.0 };
        let bv = if out.flags & 1 != 0 { unsafe { (*bias.add(gn + j)).to_f32() } } else { 0.0 };
        O::from_f32(Epilogue::apply_flags(out.flags, out.alpha, out.beta, x, cv, bv, O::DTYPE))
    };
    if quads && gn + 3 < out.n {
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

/// Default tile at every load width and output type; the other tiles at 16-byte loads with
/// the input's own output type (see `GemmVariant::all`).
macro_rules! tc_family {
    ($in:literal, $E:ty, $kind:ident, [$($al:literal)*], $outs:tt, $own:literal, $OwnO:ty) => {
        $(tc_family!(@outs $in, $E, $kind, $al, $outs);)*
        tuned_tiles!(tc_layouts!($in, $E, $own, $OwnO, 16, $kind,));
    };
    (@outs $in:literal, $E:ty, $kind:ident, $al:literal, [$(($out:literal, $O:ty)),*]) => {
        $(default_tile!(tc_layouts!($in, $E, $out, $O, $al, $kind,));)*
    };
}

tc_family!("tf32", f32, tf32, [16 8 4], [("f32", f32)], "f32", f32);
tc_family!("f16", f16, half, [16 8 4 2], [("f16", f16), ("f32", f32)], "f16", f16);
tc_family!("bf16", bf16, half, [16 8 4 2], [("bf16", bf16), ("f32", f32)], "bf16", bf16);
