//! The ping-pong persistent form of the Hopper GEMM: each of the two consumer warpgroups owns
//! a whole `64 SLABS` x BN output tile (one or two wgmma slabs of 64 rows) and the two take
//! turns, so one warpgroup's epilogue runs while
//! the other's wgmmas keep the tensor cores busy (the cooperative forms leave the tensor cores
//! idle during the epilogue, a large share of the time when K is short).
//!
//! Epilogue: with `TMA_STORE` in the flags (where the tile's shared memory holds the buffers,
//! `Sm90Tile::store_buffers`), each warp's 16 rows of every 64-row slab leave box by box
//! through TMA from buffers of its own past the ring (`tma_store::store_boxes`, as the
//! persistent cooperative form), else through the per-warp f32 staging and coalesced stores.
//! Each tile's first wgmma overwrites the accumulators (no zeroing per tile).
//!
//! Order: the producer loads the tiles of this block in sequence (tile j's k-blocks, then tile
//! j + 1's) through the shared ring; warpgroup `j % 2` consumes tile j. Two named barriers hand
//! the mainloop over (warpgroup 0 → 1 on one, 1 → 0 on the other): a warpgroup starts waiting
//! on the ring's full barriers only after the other has waited on all of its stages, so no
//! stage's barrier can be two phases behind the parity a waiter asks for.

use super::{Boxes, K_STEPS, Out, Ring, WgmmaElem, first_box_bias, store_boxes, store_staged};
use crate::arch::nvptx::{block_idx_x, grid_dim_x, thread_idx_x};
use crate::arch::sm90::{
    bulk_wait_read, desc_k_sw128, mbar_arrive, mbar_wait, named_barrier, named_barrier_arrive, setmaxnreg_dec,
    setmaxnreg_inc, wgmma_commit, wgmma_fence, wgmma_wait,
};
use crate::element::Element;
use crate::gemm_sm90::{BK_BYTES, SMEM_MAX, STORE_BOX_BYTES, TMA_STORE, WARP_BOX_BYTES, WARP_BOX_ROWS};
use crate::gemm_sm90::{CONSUMER_REGS, PRODUCER_REGS, WG_THREADS, raster};

/// Named barriers of the mainloop hand-over (0 is the block-wide one; the per-tile form uses
/// 1..=3 but never runs in the same kernel).
const HANDOFF: [u32; 2] = [1, 2];

/// The tiles one block walks: `first`, `first + step`, … below `total`, each (batch, row
/// tile, column tile) in raster order.
#[derive(Clone, Copy)]
struct Walk {
    first: usize,
    step: usize,
    total: usize,
    per_batch: usize,
    tiles_m: usize,
    tiles_n: usize,
}

impl Walk {
    /// The block's `j`-th tile, if it has one.
    #[inline(always)]
    fn tile(&self, j: usize) -> Option<(usize, usize, usize)> {
        let t = self.first + j * self.step;
        if t >= self.total {
            return None;
        }
        let (tm, tn) = raster(t % self.per_batch, self.tiles_m, self.tiles_n);
        Some((t / self.per_batch, tm, tn))
    }
}

/// The kernel body: 384 threads (a producer warpgroup, two consumer warpgroups), `gridDim.x`
/// blocks walking the `64 SLABS` x BN tiles of every batch matrix. `NACC` = BN / 2.
///
/// # Safety
/// As the cooperative persistent form (`sm90_gemm_persistent`) with an A box of `64 SLABS`
/// rows and, with `TMA_STORE`, D boxes of one warp's rows; shared memory is the tile's
/// (`Sm90Tile::smem_bytes` of a ping-pong tile with `SB` store buffers per warpgroup).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn sm90_gemm_pingpong<
    E: WgmmaElem,
    O: Element,
    const NACC: usize,
    const SLABS: usize,
    const ST: usize,
    const SB: usize,
>(
    map_a: u64,
    map_b: u64,
    map_d: u64,
    c: *const O,
    d: *mut O,
    bias: *const O,
    k: usize,
    batch: usize,
    stride_c: usize,
    out: Out,
) {
    // The ring of a `64 SLABS`-row tile; one consumer warpgroup frees each stage.
    let ring = Ring::<NACC, SLABS, ST>::new();
    let tid = thread_idx_x() as usize;
    let wg = tid / WG_THREADS as usize;
    let (tiles_m, tiles_n) = (out.m.div_ceil(ring.bm()), out.n.div_ceil(ring.bn()));
    let per_batch = tiles_m * tiles_n;
    let walk = Walk {
        first: block_idx_x() as usize,
        step: grid_dim_x() as usize,
        total: per_batch * batch,
        per_batch,
        tiles_m,
        tiles_n,
    };
    let ktiles = k.div_ceil(E::BK);
    // SAFETY: thread 0 initialises, every thread syncs.
    unsafe { ring.init_counts(tid, 1) };
    if wg == 0 {
        setmaxnreg_dec::<PRODUCER_REGS>();
        if tid == 0 {
            let mut it = 0;
            let mut j = 0;
            while let Some((z, tm, tn)) = walk.tile(j) {
                for kt in 0..ktiles {
                    // SAFETY: the maps describe A (64-row boxes) and B (caller).
                    unsafe { ring.produce::<E>(it, map_a, map_b, kt, tm, tn, z as i32) };
                    it += 1;
                }
                j += 1;
            }
        }
        return;
    }
    setmaxnreg_inc::<CONSUMER_REGS>();
    let cw = wg - 1;
    let lt = tid % WG_THREADS as usize;
    let warp = lt / 32;
    // The TMA store only where the buffers fit beside this ring (the host sets the flag on
    // those tiles only; the test keeps the others from compiling the path).
    let fits = ST * Ring::<NACC, SLABS, ST>::STAGE + 2048 + 2 * SB * STORE_BOX_BYTES <= SMEM_MAX;
    let tma = fits && out.flags & TMA_STORE != 0;
    // Past the barriers, 1024-aligned (`Sm90Tile::store_buffers_offset`): the warpgroup's,
    // then this warp's share of them.
    let wg_bufs = ST * Ring::<NACC, SLABS, ST>::STAGE + 1024 + cw * SB * STORE_BOX_BYTES;
    let bufs = ring.base + (wg_bufs + warp * SB * WARP_BOX_BYTES) as u32;
    let mut boxes = 0;
    // Zeroed once: each tile's first wgmma overwrites them (with K = 0 none runs, and they
    // stay zero).
    let mut acc = [[0.0f32; NACC]; SLABS];
    let mut j = cw;
    while let Some((z, tm, tn)) = walk.tile(j) {
        // SAFETY: both consumer warpgroups walk the same tile sequence, so each hand-over has
        // one arriving and one waiting warpgroup (see `mainloop`).
        unsafe { mainloop::<E, NACC, SLABS, ST>(&ring, &walk, j, ktiles, lt, &mut acc) };
        // The slabs by constant index, each call written out (a loop over them that the
        // compiler declines to unroll, or a closure it declines to inline, would move the
        // accumulators to local memory).
        if tma {
            macro_rules! store {
                ($h:expr) => {{
                    let m0 = tm * ring.bm() + $h * 64 + warp * WARP_BOX_ROWS;
                    let s = Boxes { bufs, map_d, m0, n0: tn * ring.bn(), z: z as i32, done: boxes };
                    // SAFETY: the warpgroup calls it together after the tile's wgmmas
                    // completed; each warp's buffers are its own; the host set the flag with
                    // D's map.
                    boxes = unsafe {
                        let first = first_box_bias::<O, NACC>(bias, out, s.n0, lt);
                        store_boxes::<O, NACC, SB>(&mut acc[$h], bias, out, s, lt, first)
                    };
                }};
            }
            store!(0);
            if SLABS > 1 {
                store!(SLABS - 1);
            }
            j += 2;
            continue;
        }
        let off = z * stride_c;
        macro_rules! staged {
            ($h:expr) => {
                // SAFETY: the tile lies in batch matrix z, which C and D cover; the warp's
                // staging area is its own (indexed by the consumer warpgroup).
                unsafe {
                    store_staged::<O, NACC>(
                        c.add(off),
                        d.add(off),
                        bias,
                        out,
                        &acc[$h],
                        ring.staging(cw, lt / 32),
                        (tm * ring.bm() + $h * 64, tn * ring.bn()),
                        lt,
                    )
                }
            };
        }
        staged!(0);
        if SLABS > 1 {
            staged!(SLABS - 1);
        }
        j += 2;
    }
    if tma && lt % 32 == 0 {
        // The last boxes' stores read the buffers: the block stays until they have.
        bulk_wait_read();
    }
}

/// The block's tile `j` on its consumer warpgroup: waits for the previous tile's mainloop
/// (tile j - 1, the other warpgroup) to have waited on all of its stages, consumes this tile's
/// `ktiles` stages (ring-wide iterations `j ktiles ..`), hands over to tile j + 1's warpgroup,
/// finishes its wgmmas and frees the last stage. The tile's first wgmma of each slab
/// overwrites `acc`.
///
/// # Safety
/// The whole warpgroup calls it, for every `j ≡ cw (mod 2)` the block has, in order.
#[inline(always)]
unsafe fn mainloop<E: WgmmaElem, const NACC: usize, const SLABS: usize, const ST: usize>(
    ring: &Ring<NACC, SLABS, ST>,
    walk: &Walk,
    j: usize,
    ktiles: usize,
    lt: usize,
    acc: &mut [[f32; NACC]; SLABS],
) {
    let pair = 2 * WG_THREADS;
    let mut it = j * ktiles;
    // SAFETY: tile j - 1 exists (j > 0) and its warpgroup arrives once on this barrier after
    // its mainloop; tile j + 1's warpgroup waits once on the other.
    unsafe {
        if j > 0 {
            named_barrier(HANDOFF[j % 2], pair);
        }
        for kt in 0..ktiles {
            ring.consume_tile::<E>(it, acc, kt > 0 && lt == 0, kt == 0);
            it += 1;
        }
        if walk.tile(j + 1).is_some() {
            named_barrier_arrive(HANDOFF[(j + 1) % 2], pair);
        }
    }
    wgmma_wait::<0>();
    if ktiles > 0 && lt == 0 {
        // SAFETY: the tile's last stage is no longer read.
        unsafe { mbar_arrive(ring.empty((it - 1) % ST)) };
    }
}

impl<const NACC: usize, const SLABS: usize, const ST: usize> Ring<NACC, SLABS, ST> {
    /// One warpgroup's `it`-th stage of a whole tile: waits for it, issues the wgmmas of every
    /// 64-row slab (A rows `64 h ..` against the whole B tile; with `fresh`, the first one of
    /// each slab overwrites it), keeps the group in flight and, with `release`, frees the
    /// previous stage (whose group is then complete).
    ///
    /// # Safety
    /// The whole warpgroup calls it, in the producer's order, with the hand-over of
    /// [`mainloop`] between the warpgroups.
    #[inline(always)]
    unsafe fn consume_tile<E: WgmmaElem>(&self, it: usize, acc: &mut [[f32; NACC]; SLABS], release: bool, fresh: bool) {
        let s = it % ST;
        let db = desc_k_sw128(self.stage(s) + Self::A_BYTES as u32);
        // SAFETY: the full barrier says the stage landed; the warpgroup issues together.
        unsafe {
            mbar_wait(self.full(s), ((it / ST) & 1) as u32);
            wgmma_fence();
            for kk in 0..K_STEPS {
                for (h, slab) in acc.iter_mut().enumerate() {
                    let da = desc_k_sw128(self.stage(s) + (h * 64 * BK_BYTES) as u32);
                    E::mma::<NACC>(slab, da + 2 * kk, db + 2 * kk, (kk > 0 || !fresh) as u32);
                }
            }
            wgmma_commit();
            wgmma_wait::<1>();
            if release {
                mbar_arrive(self.empty((it + ST - 1) % ST));
            }
        }
    }
}
