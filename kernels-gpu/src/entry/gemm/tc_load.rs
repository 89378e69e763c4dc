//! Tensor-core GEMM, global -> shared: the input element trait and each thread's share of a
//! stage's `cp.async` loads (`Loader`), for the kernel in `tc.rs`.

use super::sat_sub;
use crate::arch::nvptx::{
    cp_async_4, cp_async_8, cp_async_16, mma_m16n8k8_tf32, mma_m16n8k16_bf16, mma_m16n8k16_f16, st_shared_b16,
};
use crate::element::Element;
use crate::gemm::tc;
use half::{bf16, f16};

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
pub(super) trait TcElem: Element {
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
pub(super) struct Loader<E, const KC: bool, const AL: usize, const ROWS: usize, const KB: usize, const TH: usize> {
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
    pub(super) fn new(p: *const u8, ld: usize, row0: usize, rows: usize, tid: usize) -> Self {
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
    pub(super) fn step(&mut self, ld: usize) {
        let kstep = if KC { KB } else { KB * ld };
        self.src = self.src.wrapping_add(kstep);
    }

    /// `issue` for a tile known to lie wholly inside the operand (rows and K): no tests.
    ///
    /// # Safety
    /// As `issue`, and every chunk of the tile exists.
    #[inline(always)]
    pub(super) unsafe fn issue_whole(&mut self, dst: u32, ld: usize) {
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
    pub(super) unsafe fn issue(&mut self, dst: u32, p: *const u8, ld: usize, k0: usize, k: usize) {
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
pub(super) unsafe fn copy_chunk<const AL: usize>(sdst: u32, src: *const u8, valid: u32) {
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
