//! The ping-pong tiles' 16-bit GELU epilogue as a loop over shared memory, one store box at a
//! time: the warp writes `alpha x + bias` of the box in f32 to a scratch box of its own,
//! then every lane runs the GELU over 4 of those values at a time, packs them and writes them
//! into the box's TMA-store buffer, which lane 0 stores.
//!
//! Why: unrolled in registers (`box_bias::activate_box`), the erf GELU of a 64 x 256 tile is
//! about 2,400 straight-line instructions per warp, executed once per tile: Nsight Compute on
//! the H100 (bench/results/act-loop-*/) had a third of that code's warp samples waiting for
//! instructions to be fetched, so one warp per scheduler issued about one instruction in four
//! cycles and the epilogue outlasted the other warpgroup's mainloop it should hide behind
//! (linear_bias_gelu 1.38x the plain product's kernel time on the ping-pong 64 x 256). Here
//! the boxes go through one copy of the code (a loop whose trip count the compiler cannot
//! see), a few hundred instructions that stay in the instruction cache; the arithmetic is the
//! same (`Activation::apply_for`, in f32, rounded once), so results are unchanged.

use crate::arch::fmaf;
use crate::arch::nvptx::{ld_shared_v4_f32, opaque_u64, st_shared_v2_f32, sync_warp};
use crate::arch::sm90::{bulk_commit, bulk_wait_read_n, fence_proxy_async, tma_store_3d};
use crate::element::Element;
use crate::elementwise::Activation;
use crate::gemm_sm90::{WARP_BOX_BYTES, sw128_offset};

use super::box_bias::{BoxBias, box_bias, widen};
use super::epilogue::Out;
use super::tma_store::Boxes;

/// Fragment column groups (8 columns each) of a 16-bit store box.
const GROUPS: usize = 8;

/// Bytes of one row of the f32 scratch box (64 columns).
const ROW_BYTES: usize = 256;

/// The persistent form's store boxes of one warp's 16 x `2 NACC` share of a tile with a
/// 16-bit GELU (`ACT` 2 or 3) applied through the warp's f32 scratch box at `scratch`; as
/// `tma_store::store_boxes` otherwise (buffers, bias one box ahead, stores left in flight).
/// Returns the boxes stored so far.
///
/// # Safety
/// As `tma_store::store_boxes` for 16-bit `O`; `scratch` is a 16-byte aligned shared box of
/// `gemm_sm90::ACT_SCRATCH_BYTES` that only this warp uses.
#[inline(always)]
pub(super) unsafe fn boxes_looped<O: Element, const NACC: usize, const SB: usize, const ACT: u32>(
    acc: &[f32; NACC],
    bias: *const O,
    out: Out,
    s: Boxes,
    lt: usize,
    first: BoxBias,
    scratch: u32,
) -> usize {
    let lane = lt % 32;
    let t = lt % 4;
    let boxes = NACC / (4 * GROUPS);
    let mut next = first;
    // A trip count the compiler cannot see: one copy of the loop's code for every box.
    let n = opaque_u64(boxes as u64) as usize;
    let mut b = 0;
    while b < n {
        let cur = next;
        if b + 1 < boxes {
            // SAFETY: forwarded (the bias covers every column when flagged).
            next = unsafe { box_bias(bias, out, s.n0, t, (b + 1) * GROUPS) };
        }
        // SAFETY: the scratch box is this warp's; the previous box's reads of it finished
        // before the warp barrier that ended its iteration.
        unsafe { stage::<O, NACC>(acc, b, cur, out.alpha, scratch, lane) };
        // The buffer's last store (`SB` boxes back) has read it once at most `SB - 1` groups
        // are still reading; the warp barrier also makes the staged box visible to every lane.
        if lane == 0 {
            match SB {
                2 => bulk_wait_read_n::<1>(),
                3 => bulk_wait_read_n::<2>(),
                _ => bulk_wait_read_n::<3>(),
            }
        }
        sync_warp();
        let buf = s.bufs + (((s.done + b) % SB) * WARP_BOX_BYTES) as u32;
        // SAFETY: the buffer is free (above) and this warp's; the scratch box is staged.
        unsafe { activate_staged::<O, ACT>(scratch, buf, lane) };
        // The fence makes every lane's writes visible to the copy engine first; the barrier
        // also ends every lane's reads of the scratch box.
        fence_proxy_async();
        sync_warp();
        if lane == 0 {
            let c0 = s.n0 + b * GROUPS * 8;
            if s.m0 < out.m && c0 < out.n {
                // SAFETY: the box is written and fenced; the map is D's (caller).
                unsafe { tma_store_3d(s.map_d, c0 as i32, s.m0 as i32, s.z, buf) };
            }
            // One group per box, empty or not, so the buffer arithmetic above holds.
            bulk_commit();
        }
        b += 1;
    }
    s.done + boxes
}

/// Writes `alpha x + bias` of box `b` (runtime) of this thread's accumulators into the scratch
/// box: a branch per box, each with constant accumulator indices.
///
/// # Safety
/// `scratch` is a 16-byte aligned shared box of 16 rows of [`ROW_BYTES`] this thread may write.
#[inline(always)]
unsafe fn stage<O: Element, const NACC: usize>(
    acc: &[f32; NACC],
    b: usize,
    bias: BoxBias,
    alpha: f32,
    scratch: u32,
    lane: usize,
) {
    macro_rules! arms {
        ($($j:literal)*) => {
            $(
                if b == $j && $j < NACC / (4 * GROUPS) {
                    // SAFETY: forwarded.
                    unsafe { stage_box::<O, NACC, $j>(acc, bias, alpha, scratch, lane) };
                }
            )*
        };
    }
    arms!(0 1 2 3);
}

/// [`stage`] of box `B`: thread (g, t) of the warp holds, for each of the box's column groups
/// q, rows g and g + 8 at columns 8 q + 2t and + 1; each pair goes to its row's logical
/// 16-byte chunk `2q + t / 2` (byte `8 (t % 2)` in it), permuted by the row's index modulo 8
/// (rows g and g + 8 alike): the 8 rows of a store then cover every bank.
///
/// # Safety
/// As [`stage`].
#[inline(always)]
unsafe fn stage_box<O: Element, const NACC: usize, const B: usize>(
    acc: &[f32; NACC],
    bias: BoxBias,
    alpha: f32,
    scratch: u32,
    lane: usize,
) {
    let (g, t) = (lane / 4, lane % 4);
    for q in 0..GROUPS {
        let k = (4 * (GROUPS * B + q)) % NACC;
        let w = bias.0[q];
        let (lo, hi) = (widen::<O>(w), widen::<O>(w >> 16));
        let off = (((2 * q + t / 2) ^ g) * 16 + (t % 2) * 8) as u32;
        let (r0, r1) = (scratch + (g * ROW_BYTES) as u32, scratch + ((g + 8) * ROW_BYTES) as u32);
        // SAFETY: inside the box (rows < 16, chunk < 16), aligned to the pair.
        unsafe {
            st_shared_v2_f32(r0 + off, fmaf(alpha, acc[k], lo), fmaf(alpha, acc[(k + 1) % NACC], hi));
            st_shared_v2_f32(r1 + off, fmaf(alpha, acc[(k + 2) % NACC], lo), fmaf(alpha, acc[(k + 3) % NACC], hi));
        }
    }
}

/// The activation of the staged box into its 16-bit TMA-store buffer: 256 chunks of 4 values
/// (row `i / 16`, logical chunk `i % 16`), each lane taking chunk `32 s + lane` in step `s`,
/// four steps an iteration (16 values in flight per lane), two iterations. A quarter-warp reads
/// one row's 8 chunks (every bank once) and a half-warp writes one 128-byte row of the buffer.
///
/// # Safety
/// `scratch` holds the staged box ([`stage`], made visible to the warp); `buf` is a
/// 1024-aligned TMA-store buffer of 16 rows of 128 bytes that this warp may write.
#[inline(always)]
unsafe fn activate_staged<O: Element, const ACT: u32>(scratch: u32, buf: u32, lane: usize) {
    let act = Activation::from_code(ACT);
    const STEPS: usize = 4;
    let iters = opaque_u64(2) as usize;
    let mut i = 0;
    while i < iters {
        let mut v = [[0.0f32; 4]; STEPS];
        for (h, vh) in v.iter_mut().enumerate() {
            let c = (STEPS * i + h) * 32 + lane;
            let (row, chunk) = (c / 16, c % 16);
            // SAFETY: inside the staged box, 16-byte aligned.
            *vh = unsafe { ld_shared_v4_f32(scratch + (row * ROW_BYTES + (chunk ^ (row % 8)) * 16) as u32) };
        }
        for (h, vh) in v.iter().enumerate() {
            let c = (STEPS * i + h) * 32 + lane;
            let (row, chunk) = (c / 16, c % 16);
            let r = vh.map(|x| act.apply_for(O::DTYPE, x));
            let (p0, p1) = (O::pack2_f32(r[0], r[1]), O::pack2_f32(r[2], r[3]));
            // Columns 4 chunk .. + 4: bytes 8 chunk .. + 8 of the buffer's 128-byte row.
            let addr = buf + sw128_offset(row, chunk * 8) as u32;
            // SAFETY: inside the buffer (row < 16, byte < 128), 8-byte aligned.
            unsafe { st_shared_v2_f32(addr, f32::from_bits(p0), f32::from_bits(p1)) };
        }
        i += 1;
    }
}
