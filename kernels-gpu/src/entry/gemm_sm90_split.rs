//! The in-kernel reduction of the Hopper split-K (sm_90a PTX only): after its K slice, a
//! block's consumer warpgroups walk the fixed radix-8 join tree of `gemm_sm90_split` — publish
//! the f32 accumulators (fragment order, 16-byte coalesced stores) in the workspace, count the
//! arrival at the join's counter, and either leave (not the last of the siblings to arrive) or
//! add every sibling's partials in child order and go on up (the last, which also resets the
//! counter). The block that reaches the root holds the whole sum in its registers and runs the
//! ordinary epilogue.

use crate::arch::nvptx::{
    atom_add_global_u32, fence_gpu, ld_global_cg_v4_f32, ld_shared_b32, st_global_v4, st_shared_f32,
};
use crate::arch::sm90::named_barrier;
use crate::gemm_sm90_split::{RADIX, Sm90Split, TreeStep, tree_step};

/// Where a block's split reduction works: the workspace (counters, then partials), its output
/// tile among `tiles`, its slice, and a shared-memory word to broadcast the arrival count.
#[derive(Clone, Copy)]
pub(super) struct SplitCtx {
    pub ws: *mut f32,
    pub split: Sm90Split,
    pub tiles: usize,
    pub tile: usize,
    pub slice: usize,
    pub flag: u32,
}

/// Joins this block's accumulators up the tree; `true` when the block holds the whole sum
/// (run the epilogue), `false` when another block carries on (leave). `ct` is the thread's
/// index among the `consumers` threads (all of which call this together; barrier 1).
///
/// # Safety
/// The workspace holds `split.workspace_bytes(tiles, 2 * NACC * consumers)` bytes with every
/// counter at zero (as every completed launch leaves them); one block per (tile, slice);
/// `flag` is a shared word no other code uses meanwhile.
#[inline(always)]
pub(super) unsafe fn split_reduce<const NACC: usize>(
    acc: &mut [f32; NACC],
    cx: SplitCtx,
    ct: usize,
    consumers: u32,
) -> bool {
    let sp = cx.split;
    let tile_floats = NACC * consumers as usize;
    let counters = cx.ws as *mut u32;
    // SAFETY: the partials follow the counters inside the workspace (caller).
    let parts = unsafe { cx.ws.add(sp.counter_words(cx.tiles)) };
    let (mut node, mut level) = (cx.slice, 0);
    loop {
        match tree_step(node, level, sp.slices) {
            TreeStep::Root => return true,
            TreeStep::Up => {}
            TreeStep::Join { mine, first, stride, count, counter } => {
                // SAFETY: slots and counters lie inside the workspace (caller); the barrier
                // orders every consumer's fenced stores before the one atomic.
                unsafe {
                    let dst = parts.add(sp.partial_offset(mine, cx.tile, cx.tiles, tile_floats));
                    for j in 0..NACC / 4 {
                        let v = [acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]];
                        st_global_v4(dst.add((j * consumers as usize + ct) * 4) as *mut u32, v.map(f32::to_bits));
                    }
                    fence_gpu();
                    named_barrier(1, consumers);
                    if ct == 0 {
                        let c = counters.add(sp.counter_index(cx.tile, counter));
                        let old = atom_add_global_u32(c, 1);
                        if old as usize + 1 == count {
                            // Every sibling arrived: leave the counter at zero for the next call.
                            core::ptr::write_volatile(c, 0);
                        }
                        st_shared_f32(cx.flag, f32::from_bits(old));
                    }
                    named_barrier(1, consumers);
                    if (ld_shared_b32(cx.flag) as usize) + 1 < count {
                        return false;
                    }
                    fence_gpu();
                    // The siblings' partials (this block's own among them) in child order.
                    for i in 0..count {
                        let slot = first + i * stride;
                        let src = parts.add(sp.partial_offset(slot, cx.tile, cx.tiles, tile_floats)) as *const f32;
                        for j in 0..NACC / 4 {
                            let v = ld_global_cg_v4_f32(src.add((j * consumers as usize + ct) * 4));
                            if i == 0 {
                                acc[4 * j] = v[0];
                                acc[4 * j + 1] = v[1];
                                acc[4 * j + 2] = v[2];
                                acc[4 * j + 3] = v[3];
                            } else {
                                acc[4 * j] += v[0];
                                acc[4 * j + 1] += v[1];
                                acc[4 * j + 2] += v[2];
                                acc[4 * j + 3] += v[3];
                            }
                        }
                    }
                }
            }
        }
        node /= RADIX;
        level += 1;
    }
}
