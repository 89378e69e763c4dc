//! The in-kernel reduction of the Hopper split-K (sm_90a PTX only): after its K slice, a
//! block's consumer warpgroups walk the fixed radix-8 join tree of `gemm_sm90_split` — publish
//! the f32 accumulators (fragment order, 16-byte coalesced stores) in the workspace, count the
//! arrival at the join's counter, and either leave (not the last of the siblings to arrive) or
//! add every sibling's partials in child order and go on up (the last, which also resets the
//! counter). The last block brings the siblings' partials into its idle ring with bulk copies,
//! as many at once as the ring holds, so the whole read is a round trip or two instead of one
//! per sibling (each thread's registers hold one partial's share at a time otherwise). The
//! block that reaches the root holds the whole sum in its registers and runs the ordinary
//! epilogue.

use crate::arch::nvptx::{
    atom_add_global_u32, fence_gpu, ld_shared_b32, ld_shared_v4_f32, st_global_v4, st_shared_f32,
};
use crate::arch::sm90::{
    bulk_load, fence_barrier_init, fence_proxy_async, fence_proxy_async_global, mbar_arrive_expect_tx, mbar_init,
    mbar_wait, named_barrier,
};
use crate::gemm_sm90_split::{RADIX, Sm90Split, TreeStep, tree_step};

/// Where a block's split reduction works: the workspace (counters, then partials), its output
/// tile among `tiles`, its slice, a shared-memory word to broadcast the arrival count (`flag`,
/// 16-byte aligned, with an mbarrier 8 bytes after it), and the shared memory the siblings'
/// partials land in (`land`, 1024-aligned, `land_bytes` long: the ring, idle after the main
/// loop).
#[derive(Clone, Copy)]
pub(super) struct SplitCtx {
    pub ws: *mut f32,
    pub split: Sm90Split,
    pub tiles: usize,
    pub tile: usize,
    pub slice: usize,
    pub flag: u32,
    pub land: u32,
    pub land_bytes: usize,
}

/// Joins this block's accumulators up the tree; `true` when the block holds the whole sum
/// (run the epilogue), `false` when another block carries on (leave). `ct` is the thread's
/// index among the `consumers` threads (all of which call this together; barrier 1).
///
/// # Safety
/// The workspace holds `split.workspace_bytes(tiles, 2 * NACC * consumers)` bytes with every
/// counter at zero (as every completed launch leaves them); one block per (tile, slice);
/// `flag` and the 8 bytes 8 past it are shared memory no other code uses meanwhile, and so is
/// `land` (no wgmma or TMA copy in flight into it), which holds at least one partial.
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
    // The landing area's mbarrier (initialised at the first join this block carries) and the
    // phase its next batch completes.
    let bar = cx.flag + 8;
    let (mut bar_ready, mut phase) = (false, 0u32);
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
                    // The siblings' partials (this block's own among them) in child order,
                    // `batch` at a time through the landing area.
                    let bytes = tile_floats * 4;
                    let batch = cx.land_bytes / bytes;
                    let mut i = 0;
                    while i < count {
                        let n = if count - i < batch { count - i } else { batch };
                        if ct == 0 {
                            if !bar_ready {
                                mbar_init(bar, 1);
                                fence_barrier_init();
                            }
                            // The acquired partials (generic writes) before the bulk reads, and
                            // the last batch's shared reads (barrier below) before its overwrite.
                            fence_proxy_async_global();
                            fence_proxy_async();
                            mbar_arrive_expect_tx(bar, (n * bytes) as u32);
                            for b in 0..n {
                                let slot = first + (i + b) * stride;
                                let src = parts.add(sp.partial_offset(slot, cx.tile, cx.tiles, tile_floats));
                                bulk_load(cx.land + (b * bytes) as u32, src as u64, bytes as u32, bar);
                            }
                        }
                        if !bar_ready {
                            // Nobody waits on the barrier before thread 0 has initialised it.
                            named_barrier(1, consumers);
                            bar_ready = true;
                        }
                        mbar_wait(bar, phase);
                        phase ^= 1;
                        for b in 0..n {
                            let src = cx.land + (b * bytes) as u32;
                            for j in 0..NACC / 4 {
                                let v = ld_shared_v4_f32(src + ((j * consumers as usize + ct) * 16) as u32);
                                if i + b == 0 {
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
                        // Every thread has read the batch before the next one lands.
                        named_barrier(1, consumers);
                        i += n;
                    }
                }
            }
        }
        node /= RADIX;
        level += 1;
    }
}
