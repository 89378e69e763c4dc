//! The persistent Hopper epilogue's arithmetic a store box at a time (`act(alpha x + bias)`
//! in place on a warp's accumulators, before the box is written), and the box's bias, loaded
//! one box ahead.
//!
//! Why ahead: the epilogue is bound by latency, not by instructions. Taking the epilogue
//! from 27 to 21 instructions an element (erf) and from 20 to 13 (tanh) — alpha and bias in
//! one multiply-add, a pair of bias values per load, the GPU's GELU forms without the host's
//! clamps — took linear_bias_gelu 8192x3072x768 only from 0.094 to 0.091 ms on the H100
//! (bench/results/gelu-ahead-2382fd421cb6/). Each box waited for its own bias loads (an L2
//! round trip, four or eight times a tile); now box `i + 1`'s loads are in flight while box
//! `i` is computed, and the first box's while the tile's last wgmmas finish.

use crate::arch::fmaf;
use crate::element::Element;
use crate::elementwise::Activation;

use super::epilogue::Out;

/// The epilogue code of the plain product (alpha 1, no bias, no activation), past the flags'
/// 2-bit activation codes: its stores skip the arithmetic.
pub(super) const PLAIN: u32 = 4;

/// One store box's bias for one thread, as loaded: its column pairs (columns `8 j' + 2t` and
/// `8 j' + 2t + 1` of each of the box's column groups `j'`) as raw bits, eight words: a pair
/// of 16-bit values per word (low column in the low half), or the two words of an f32 pair.
/// All -0.0 without a bias.
#[derive(Clone, Copy)]
pub(super) struct BoxBias([u32; 8]);

/// Column groups (8 columns each) per store box of a tile `bn` wide: 8 for 16-bit outputs, 4
/// for f32 and for the 16-bit 128 x 160's 64-byte boxes.
#[inline(always)]
pub(super) const fn groups_per_box(size: usize, bn: usize) -> usize {
    crate::gemm_sm90::store_box_cols(size, bn) / 8
}

/// Loads the bias of the store box whose first column group is `j` (thread `t` of its quad,
/// tile's first column `n0`, tile `bn` wide).
///
/// # Safety
/// The bias covers every column when `out.flags` has bit 0.
#[inline(always)]
pub(super) unsafe fn box_bias<O: Element>(
    bias: *const O,
    out: Out,
    n0: usize,
    t: usize,
    j: usize,
    bn: usize,
) -> BoxBias {
    let size = core::mem::size_of::<O>();
    if out.flags & 1 == 0 {
        // -0.0 in every element: two 16-bit ones a word, or one f32.
        return BoxBias([if size == 2 { 0x8000_8000 } else { 0x8000_0000 }; 8]);
    }
    let per_box = groups_per_box(size, bn);
    let mut w = [0u32; 8];
    // The thread's first column in the box; its columns come in adjacent pairs.
    let first = n0 + j * 8 + 2 * t;
    if n0 + (j + per_box) * 8 <= out.n && (bias as usize) % (2 * size) == 0 {
        // The whole box is inside the matrix and the bias aligned to pairs (uniform across
        // the warp): one load a pair, at constant offsets from one address.
        for q in 0..per_box {
            let p = first + q * 8;
            // SAFETY: both columns exist (above) and the bias covers them; the pair's address
            // is aligned to its size (`first` is even, the base aligned).
            unsafe {
                if size == 2 {
                    w[q % 8] = (bias.add(p) as *const u32).read();
                } else {
                    let v = (bias.add(p) as *const u64).read();
                    w[(2 * q) % 8] = v as u32;
                    w[(2 * q + 1) % 8] = (v >> 32) as u32;
                }
            }
        }
    } else {
        // Columns past the edge read the last column's bias; TMA clips their results.
        let last = out.n.saturating_sub(1);
        for q in 0..per_box {
            let col = first + q * 8;
            // SAFETY: both columns are at most the last one; the bias covers every column.
            let (lo, hi) = unsafe { (bits(*bias.add(col.min(last))), bits(*bias.add((col + 1).min(last)))) };
            if size == 2 {
                w[q % 8] = lo | (hi << 16);
            } else {
                w[(2 * q) % 8] = lo;
                w[(2 * q + 1) % 8] = hi;
            }
        }
    }
    BoxBias(w)
}

/// The bits of a 2- or 4-byte element, zero-extended.
#[inline(always)]
fn bits<O: Element>(v: O) -> u32 {
    // SAFETY: `O` is a plain float of 2 or 4 bytes, read as an integer of its size.
    unsafe {
        if core::mem::size_of::<O>() == 2 {
            core::mem::transmute_copy::<O, u16>(&v) as u32
        } else {
            core::mem::transmute_copy::<O, u32>(&v)
        }
    }
}

/// An element of `O` from its bits (the low 16 for a 16-bit type), widened to f32.
#[inline(always)]
fn widen<O: Element>(w: u32) -> f32 {
    // SAFETY: any bits of its size are a value of `O` (a plain float).
    unsafe {
        if core::mem::size_of::<O>() == 2 {
            core::mem::transmute_copy::<u16, O>(&(w as u16)).to_f32()
        } else {
            core::mem::transmute_copy::<u32, O>(&w).to_f32()
        }
    }
}

/// Applies `act(alpha x + bias)` (activation `ACT`; nothing for [`PLAIN`]) in place to the
/// column groups of the store box starting at group `j` (tile columns 8 j' + 2t and
/// 8 j' + 2t + 1 of group j', rows g and g + 8), with the box's bias `b` ([`box_bias`]).
/// Without a bias every value is -0.0 and `alpha x + (-0.0)` is `alpha x` exactly (-0.0
/// included).
#[inline(always)]
pub(super) fn activate_box<O: Element, const NACC: usize, const ACT: u32>(
    acc: &mut [f32; NACC],
    b: BoxBias,
    alpha: f32,
    j: usize,
) {
    if ACT == PLAIN {
        return;
    }
    let act = Activation::from_code(ACT);
    let size = core::mem::size_of::<O>();
    for q in 0..groups_per_box(size, 2 * NACC) {
        let (lo, hi) = if size == 2 {
            let w = b.0[q % 8];
            (widen::<O>(w), widen::<O>(w >> 16))
        } else {
            (widen::<O>(b.0[(2 * q) % 8]), widen::<O>(b.0[(2 * q + 1) % 8]))
        };
        for e in 0..4 {
            let k = (4 * (j + q) + e) % NACC;
            acc[k] = act.apply_for(O::DTYPE, fmaf(alpha, acc[k], if e % 2 == 0 { lo } else { hi }));
        }
    }
}
