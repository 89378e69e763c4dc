//! The ping-pong persistent form of the Hopper GEMM: each of the two consumer warpgroups owns
//! a whole `64 SLABS` x BN output tile (one or two wgmma slabs of 64 rows) and the two take
//! turns, so one warpgroup's epilogue runs while
//! the other's wgmmas keep the tensor cores busy (the cooperative forms leave the tensor cores
//! idle during the epilogue, a large share of the time when K is short).
//!
//! Order: the producer loads the tiles of this block in sequence (tile j's k-blocks, then tile
//! j + 1's) through the shared ring; warpgroup `j % 2` consumes tile j. Two named barriers hand
//! the mainloop over (warpgroup 0 → 1 on one, 1 → 0 on the other): a warpgroup starts waiting
//! on the ring's full barriers only after the other has waited on all of its stages, so no
//! stage's barrier can be two phases behind the parity a waiter asks for.

use super::{K_STEPS, Out, Ring, WgmmaElem, store_staged};
use crate::arch::nvptx::{block_idx_x, grid_dim_x, thread_idx_x};
use crate::arch::sm90::{
    desc_k_sw128, mbar_arrive, mbar_wait, named_barrier, named_barrier_arrive, setmaxnreg_dec, setmaxnreg_inc,
    wgmma_commit, wgmma_fence, wgmma_wait,
};
use crate::element::Element;
use crate::gemm_sm90::BK_BYTES;
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
/// rows; shared memory is the tile's (`Sm90Tile::smem_bytes` of a ping-pong tile).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn sm90_gemm_pingpong<
    E: WgmmaElem,
    O: Element,
    const NACC: usize,
    const SLABS: usize,
    const ST: usize,
>(
    map_a: u64,
    map_b: u64,
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
    let mut j = cw;
    while let Some((z, tm, tn)) = walk.tile(j) {
        // SAFETY: both consumer warpgroups walk the same tile sequence, so each hand-over has
        // one arriving and one waiting warpgroup (see `mainloop`).
        let acc = unsafe { mainloop::<E, NACC, SLABS, ST>(&ring, &walk, j, ktiles, lt) };
        let off = z * stride_c;
        for (h, slab) in acc.iter().enumerate() {
            // SAFETY: the tile lies in batch matrix z, which C and D cover; the warp's staging
            // area is its own (indexed by the consumer warpgroup).
            unsafe {
                store_staged::<O, NACC>(
                    c.add(off),
                    d.add(off),
                    bias,
                    out,
                    slab,
                    ring.staging(cw, lt / 32),
                    (tm * ring.bm() + h * 64, tn * ring.bn()),
                    lt,
                )
            };
        }
        j += 2;
    }
}

/// The block's tile `j` on its consumer warpgroup: waits for the previous tile's mainloop
/// (tile j - 1, the other warpgroup) to have waited on all of its stages, consumes this tile's
/// `ktiles` stages (ring-wide iterations `j ktiles ..`), hands over to tile j + 1's warpgroup,
/// finishes its wgmmas and frees the last stage. Returns the accumulators.
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
) -> [[f32; NACC]; SLABS] {
    let pair = 2 * WG_THREADS;
    let mut acc = [[0.0f32; NACC]; SLABS];
    let mut it = j * ktiles;
    // SAFETY: tile j - 1 exists (j > 0) and its warpgroup arrives once on this barrier after
    // its mainloop; tile j + 1's warpgroup waits once on the other.
    unsafe {
        if j > 0 {
            named_barrier(HANDOFF[j % 2], pair);
        }
        for kt in 0..ktiles {
            ring.consume_tile::<E>(it, &mut acc, kt > 0 && lt == 0);
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
    acc
}

impl<const NACC: usize, const SLABS: usize, const ST: usize> Ring<NACC, SLABS, ST> {
    /// One warpgroup's `it`-th stage of a whole tile: waits for it, issues the wgmmas of every
    /// 64-row slab (A rows `64 h ..` against the whole B tile), keeps the group in flight and,
    /// with `release`, frees the previous stage (whose group is then complete).
    ///
    /// # Safety
    /// The whole warpgroup calls it, in the producer's order, with the hand-over of
    /// [`mainloop`] between the warpgroups.
    #[inline(always)]
    unsafe fn consume_tile<E: WgmmaElem>(&self, it: usize, acc: &mut [[f32; NACC]; SLABS], release: bool) {
        let s = it % ST;
        let db = desc_k_sw128(self.stage(s) + Self::A_BYTES as u32);
        // SAFETY: the full barrier says the stage landed; the warpgroup issues together.
        unsafe {
            mbar_wait(self.full(s), ((it / ST) & 1) as u32);
            wgmma_fence();
            for kk in 0..K_STEPS {
                for (h, slab) in acc.iter_mut().enumerate() {
                    let da = desc_k_sw128(self.stage(s) + (h * 64 * BK_BYTES) as u32);
                    E::mma::<NACC>(slab, da + 2 * kk, db + 2 * kk, 1);
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
