//! The shared-memory ring of the Hopper GEMM: `ST` stages of an A tile (BM x BK) and a B tile
//! (BN x BK) at a 1024-aligned base, then each stage's full and empty mbarriers; the producer's
//! load of a stage and a consumer warpgroup's wgmmas on it. In clusters of `CL` blocks along M
//! the blocks share the B tile: each loads `BN / CL` rows of it and multicasts them to every
//! block of the cluster, and a stage is free only when the consumers of every block have
//! released it (each arrives on the empty barrier of every block).

use super::WgmmaElem;
use crate::arch::nvptx::sync_threads;
use crate::arch::sm90::{
    cluster_ctarank, cluster_sync, desc_k_sw128, fence_barrier_init, mbar_arrive, mbar_arrive_cluster,
    mbar_arrive_expect_tx, mbar_init, mbar_wait, smem_base_1024, tma_load_3d, tma_load_3d_multicast, wgmma_commit,
    wgmma_fence, wgmma_wait,
};
use crate::gemm_sm90::{BK_BYTES, STAGE_PITCH_BYTES};

/// wgmmas per stage: each takes 32 bytes of K (descriptor step 2).
pub(super) const K_STEPS: u64 = (BK_BYTES / 32) as u64;

/// Row pitch of a warp's persistent-epilogue staging (a chunk plus padding).
const STG_PITCH: usize = STAGE_PITCH_BYTES;

/// One block's ring; `NACC` = BN / 2 accumulators per consumer thread, `CONS` consumer
/// warpgroups (BM = 64 CONS), `ST` stages, `CL` blocks per cluster (along M).
#[derive(Clone, Copy)]
pub(super) struct Ring<const NACC: usize, const CONS: usize, const ST: usize, const CL: usize = 1> {
    pub(super) base: u32,
    /// This block's rank in its cluster (0 without one).
    rank: u32,
}

impl<const NACC: usize, const CONS: usize, const ST: usize, const CL: usize> Ring<NACC, CONS, ST, CL> {
    pub(super) const BN: usize = 2 * NACC;
    pub(super) const BM: usize = 64 * CONS;
    pub(super) const A_BYTES: usize = Self::BM * BK_BYTES;
    pub(super) const STAGE: usize = (Self::BM + Self::BN) * BK_BYTES;
    /// Bytes of the B tile each block of a cluster loads (and multicasts).
    const B_PART: usize = Self::BN / CL * BK_BYTES;

    #[inline(always)]
    pub(super) fn new() -> Self {
        Ring { base: smem_base_1024(), rank: if CL > 1 { cluster_ctarank() } else { 0 } }
    }
    #[inline(always)]
    pub(super) fn bm(&self) -> usize {
        Self::BM
    }
    #[inline(always)]
    pub(super) fn bn(&self) -> usize {
        Self::BN
    }
    /// This block's rank in its cluster.
    #[inline(always)]
    pub(super) fn rank(&self) -> usize {
        self.rank as usize
    }
    #[inline(always)]
    pub(super) fn stage(&self, s: usize) -> u32 {
        self.base + (s * Self::STAGE) as u32
    }
    #[inline(always)]
    pub(super) fn full(&self, s: usize) -> u32 {
        self.base + (ST * Self::STAGE + 8 * s) as u32
    }
    #[inline(always)]
    pub(super) fn empty(&self, s: usize) -> u32 {
        self.base + (ST * Self::STAGE + 8 * (ST + s)) as u32
    }

    /// The split reduction's shared flag word (one-tile form): just past the barriers.
    #[inline(always)]
    pub(super) fn flag(&self) -> u32 {
        self.base + (ST * Self::STAGE + 16 * ST) as u32
    }

    /// The staging area of warp `w` of consumer `cw` (persistent form): past the barriers,
    /// 16 rows of [`STG_PITCH`] bytes per warp.
    #[inline(always)]
    pub(super) fn staging(&self, cw: usize, w: usize) -> u32 {
        self.base + (ST * Self::STAGE + 16 * ST + (cw * 4 + w) * 16 * STG_PITCH) as u32
    }

    /// Thread 0 initialises the barriers (full: the producer's arrival plus the bytes;
    /// empty: one arrival per consumer warpgroup of every block of the cluster); then the
    /// whole block syncs, and in a cluster the whole cluster, so that no block multicasts
    /// into or arrives on a barrier not yet initialised.
    ///
    /// # Safety
    /// Every thread of the block (of every block of the cluster) calls it once, first.
    #[inline(always)]
    pub(super) unsafe fn init(&self, tid: usize) {
        // SAFETY: forwarded.
        unsafe { self.init_counts(tid, (CONS * CL) as u32) }
    }

    /// As [`Ring::init`] with `consumers` arrivals completing a stage's empty barrier.
    ///
    /// # Safety
    /// As [`Ring::init`].
    #[inline(always)]
    pub(super) unsafe fn init_counts(&self, tid: usize, consumers: u32) {
        if tid == 0 {
            for s in 0..ST {
                // SAFETY: the barriers lie past the ring, 8-byte aligned; the sync below
                // orders the initialisation before every other use.
                unsafe {
                    mbar_init(self.full(s), 1);
                    mbar_init(self.empty(s), consumers);
                }
            }
            fence_barrier_init();
        }
        // SAFETY: every thread reaches it (of every block of the cluster, with one).
        unsafe {
            if CL > 1 {
                cluster_sync();
            } else {
                sync_threads();
            }
        }
    }

    /// The producer's `it`-th load (ring-wide count): waits for the stage to be free, then
    /// loads k-tile `kt` of A rows `tm BM..` and B rows `tn BN..` of batch matrix `z` — in a
    /// cluster, this block's `1 / CL` of the B rows, multicast to every block.
    ///
    /// # Safety
    /// One thread; the maps describe A and B with this ring's boxes (B's: `BN / CL` rows); in a
    /// cluster every block loads the same `tn`, `kt` and `z` at the same `it`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) unsafe fn produce<E: WgmmaElem>(
        &self,
        it: usize,
        map_a: u64,
        map_b: u64,
        kt: usize,
        tm: usize,
        tn: usize,
        z: i32,
    ) {
        let s = it % ST;
        let sa = self.stage(s);
        // SAFETY: the stage is free (in every block of the cluster) once its empty barrier
        // completed the previous round; the full barriers of every block expect the bytes.
        unsafe {
            if it >= ST {
                mbar_wait(self.empty(s), ((it / ST - 1) & 1) as u32);
            }
            mbar_arrive_expect_tx(self.full(s), Self::STAGE as u32);
            let k0 = (kt * E::BK) as i32;
            tma_load_3d(sa, map_a, k0, (tm * Self::BM) as i32, z, self.full(s));
            let sb = sa + Self::A_BYTES as u32;
            if CL > 1 {
                let part = self.rank as usize;
                let row = (tn * Self::BN + part * Self::BN / CL) as i32;
                let dst = sb + (part * Self::B_PART) as u32;
                tma_load_3d_multicast(dst, map_b, k0, row, z, self.full(s), ((1u32 << CL) - 1) as u16);
            } else {
                tma_load_3d(sb, map_b, k0, (tn * Self::BN) as i32, z, self.full(s));
            }
        }
    }

    /// Frees stage `s` (its wgmmas done): one arrival on its empty barrier, in every block of
    /// the cluster.
    ///
    /// # Safety
    /// One thread per consumer warpgroup, once per round of the stage; in a cluster no block
    /// has exited (the kernel ends on a cluster barrier).
    #[inline(always)]
    pub(super) unsafe fn release(&self, s: usize) {
        // SAFETY: as the caller guarantees.
        unsafe {
            if CL > 1 {
                for r in 0..CL as u32 {
                    mbar_arrive_cluster(self.empty(s), r);
                }
            } else {
                mbar_arrive(self.empty(s));
            }
        }
    }

    /// Consumer warpgroup `cw`'s `it`-th stage: waits for it, issues its wgmmas into `acc`
    /// (with `fresh`, the first one overwrites it: a tile's first stage, no zeroing), keeps
    /// that group in flight and, with `release`, frees the previous stage (whose group is then
    /// complete).
    ///
    /// # Safety
    /// The whole warpgroup calls it, in the producer's order.
    #[inline(always)]
    pub(super) unsafe fn consume<E: WgmmaElem>(
        &self,
        it: usize,
        cw: usize,
        acc: &mut [f32; NACC],
        release: bool,
        fresh: bool,
    ) {
        let s = it % ST;
        let sa = self.stage(s) + (cw * 64 * BK_BYTES) as u32;
        let sb = self.stage(s) + Self::A_BYTES as u32;
        // SAFETY: the full barrier says the stage landed; the warpgroup issues together.
        unsafe {
            mbar_wait(self.full(s), ((it / ST) & 1) as u32);
            wgmma_fence();
            let (da, db) = (desc_k_sw128(sa), desc_k_sw128(sb));
            for kk in 0..K_STEPS {
                E::mma::<NACC>(acc, da + 2 * kk, db + 2 * kk, (kk > 0 || !fresh) as u32);
            }
            wgmma_commit();
            wgmma_wait::<1>();
            if release {
                self.release((it + ST - 1) % ST);
            }
        }
    }
}
