//! Hopper GEMM entry points (sm_90a PTX only; f16, bf16, and f32 on TF32): one block per
//! output tile, a producer warp that loads A and B tiles with TMA (128-byte swizzle) into a
//! `stages`-deep shared-memory ring guarded by full/empty mbarriers, and consumer warpgroups
//! that multiply them with `wgmma` (one group kept in flight) and run the fused epilogue
//! through a shared-memory staging so the stores are coalesced. Strided batches walk
//! `blockIdx.z` (the maps' third dimension).

use core::arch::asm;

use super::gemm_sm90_split::{SplitCtx, split_reduce};
use crate::arch::nvptx::{block_idx_x, block_idx_y, block_idx_z, grid_dim_x, st_shared_v2_f32, thread_idx_x};
use crate::arch::sm90::{
    bulk_wait_read, cluster_sync, named_barrier, param_to_generic, prefetch_tensormap, setmaxnreg_dec, setmaxnreg_inc,
    wgmma_m64n128k8_tf32, wgmma_m64n128k16_bf16, wgmma_m64n128k16_f16, wgmma_m64n160k16_bf16, wgmma_m64n160k16_f16,
    wgmma_m64n192k16_bf16, wgmma_m64n192k16_f16, wgmma_m64n256k8_tf32, wgmma_m64n256k16_bf16, wgmma_m64n256k16_f16,
    wgmma_wait,
};
use crate::element::Element;
use crate::gemm_sm90::{
    BK_BYTES, CONSUMER_REGS, EPI_PAD, MAP_PREFETCH, PRODUCER_REGS, STORE_BOX_BYTES, STORE_BOX_ROWS, TMA_STORE,
    WARP_BOX_BYTES, WARP_BOX_ROWS, WG_THREADS, paired, raster_cluster,
};
use crate::gemm_sm90_split::Sm90Split;
use half::{bf16, f16};

mod box_bias;
mod epilogue;
mod pingpong;
mod ring;
mod tma_store;

use epilogue::{Out, drain, store_staged};
use ring::{K_STEPS, Ring};
use tma_store::{Boxes, Slab, first_box_bias, store_boxes, store_tma};

/// A `CUtensorMap` passed by value: 128 opaque bytes. Declared align(16) (rustc cannot pass
/// more); the PTX build raises the parameter's alignment to 64, as TMA needs.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub struct TensorMap([u64; 16]);

/// An input type and its wgmma (K-major A and B): f16, bf16 (k16; N 128, 160, 192 or 256) and f32 on
/// TF32 (k8; N 128 or 256, the tiles `gemm_sm90::TF32_TILES` compiles).
/// Every wgmma takes 32 bytes of K, so a 128-byte stage is [`K_STEPS`] of them whatever the
/// type, and the descriptor steps are the same.
trait WgmmaElem: Element {
    /// K elements per stage (one 128-byte swizzle row).
    const BK: usize = BK_BYTES / core::mem::size_of::<Self>();
    /// `d = A B + d`, or `A B` alone when `scale_d` is 0.
    ///
    /// # Safety
    /// As the `wgmma_*` wrappers.
    unsafe fn mma<const NACC: usize>(d: &mut [f32; NACC], da: u64, db: u64, scale_d: u32);
}

macro_rules! wgmma_elem {
    ($E:ty, $n128:ident, $n160:ident, $n192:ident, $n256:ident) => {
        impl WgmmaElem for $E {
            #[inline(always)]
            unsafe fn mma<const NACC: usize>(d: &mut [f32; NACC], da: u64, db: u64, scale_d: u32) {
                // SAFETY: NACC selects the matching array type (the casts are identities);
                // the wgmma preconditions are forwarded.
                unsafe {
                    if NACC == 128 {
                        $n256::<0>(&mut *(d as *mut [f32; NACC] as *mut [f32; 128]), da, db, scale_d)
                    } else if NACC == 96 {
                        $n192::<0>(&mut *(d as *mut [f32; NACC] as *mut [f32; 96]), da, db, scale_d)
                    } else if NACC == 80 {
                        $n160::<0>(&mut *(d as *mut [f32; NACC] as *mut [f32; 80]), da, db, scale_d)
                    } else if NACC == 64 {
                        $n128::<0>(&mut *(d as *mut [f32; NACC] as *mut [f32; 64]), da, db, scale_d)
                    }
                }
            }
        }
    };
}
wgmma_elem!(bf16, wgmma_m64n128k16_bf16, wgmma_m64n160k16_bf16, wgmma_m64n192k16_bf16, wgmma_m64n256k16_bf16);
wgmma_elem!(f16, wgmma_m64n128k16_f16, wgmma_m64n160k16_f16, wgmma_m64n192k16_f16, wgmma_m64n256k16_f16);

impl WgmmaElem for f32 {
    #[inline(always)]
    unsafe fn mma<const NACC: usize>(d: &mut [f32; NACC], da: u64, db: u64, scale_d: u32) {
        // SAFETY: as in `wgmma_elem!`.
        unsafe {
            if NACC == 128 {
                wgmma_m64n256k8_tf32(&mut *(d as *mut [f32; NACC] as *mut [f32; 128]), da, db, scale_d)
            } else if NACC == 64 {
                wgmma_m64n128k8_tf32(&mut *(d as *mut [f32; NACC] as *mut [f32; 64]), da, db, scale_d)
            }
        }
    }
}

/// The kernel body: one block per output tile (and K slice, `blockIdx.y`, with `split`).
/// `NACC` = BN / 2 accumulators per thread, `CONS` consumer warpgroups (BM = 64 CONS), `ST` stages.
///
/// # Safety
/// With a split, `ws` is its workspace (`gemm_sm90_split`, counters zero), grid (tiles, slices, 1).
/// `map_a` / `map_b` are the generic addresses of valid maps of A (dims K, M, batch) and B
/// (dims K, N, batch) with boxes (64, BM, 1) and (64, BN, 1) and the 128-byte swizzle; C, D
/// and bias cover the batch of M x N outputs at `ldc`; the launch has `128 (1 + CONS)` threads
/// and the tile's shared memory. With [`TMA_STORE`] in `out.flags` (never with a C read),
/// `map_d` is D's map (dims N, M, batch; boxes of 128 bytes x 64 rows, 128-byte swizzle) and
/// `d` is unused.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn sm90_gemm<
    E: WgmmaElem,
    O: Element,
    const NACC: usize,
    const CONS: usize,
    const ST: usize,
    const CL: usize,
>(
    map_a: u64,
    map_b: u64,
    map_d: u64,
    c: *const O,
    d: *mut O,
    bias: *const O,
    k: usize,
    out: Out,
    ws: *mut f32,
    split: Sm90Split,
) {
    let ring = Ring::<NACC, CONS, ST, CL>::new();
    let (bm, bn) = (ring.bm(), ring.bn());
    let tid = thread_idx_x() as usize;
    let (tiles_m, tiles_n) = (out.m.div_ceil(bm), out.n.div_ceil(bn));
    let (tm, tn) = raster_cluster(block_idx_x() as usize / CL, ring.rank(), CL, tiles_m, tiles_n);
    let z = block_idx_z() as i32;
    let slice = block_idx_y() as usize;
    let (kt0, kt1) = split.range(slice, k.div_ceil(E::BK));
    let ktiles = kt1 - kt0;
    // SAFETY: every thread calls it first.
    unsafe { ring.init(tid) };
    // Roles: the producer warpgroup first, the consumers after it; a paired tile has its
    // consumers first (warpgroups stay 4-warp aligned for wgmma) and one producer warp last.
    // `ct`: the thread's index among the consumers.
    let pair = paired(NACC, CONS, ST);
    let consumers = WG_THREADS as usize * CONS;
    let (producer, lead, ct) = if pair {
        (tid >= consumers, consumers, tid)
    } else {
        (tid < WG_THREADS as usize, 0, tid.wrapping_sub(WG_THREADS as usize))
    };
    if producer {
        if CONS == 2 && !pair {
            setmaxnreg_dec::<PRODUCER_REGS>();
        }
        if tid == lead {
            for it in 0..ktiles {
                // SAFETY: the maps describe A and B (caller).
                unsafe { ring.produce::<E>(it, map_a, map_b, kt0 + it, tm, tn, z) };
            }
        }
        return;
    }
    if CONS == 2 && !pair {
        setmaxnreg_inc::<CONSUMER_REGS>();
    }
    let cw = ct / WG_THREADS as usize;
    let lt = ct % WG_THREADS as usize;
    let mut acc = [0.0f32; NACC];
    // The wait closes the wgmma pipeline inside the branch: were it after the join with the
    // K = 0 path (whose accumulators are set by plain moves), ptxas would serialise every
    // wgmma (C7515, "non wgmma instructions defining accumulator registers").
    if ktiles > 0 {
        for kt in 0..ktiles {
            // SAFETY: the warpgroup calls it together, in the producer's order.
            unsafe { ring.consume::<E>(kt, cw, &mut acc, kt > 0 && lt == 0, false) };
        }
        wgmma_wait::<0>();
    }
    // The second block of a cluster's last pair row with an odd number of row tiles: it only
    // helped its partner load B.
    if tm >= tiles_m {
        return;
    }
    if split.is_split() {
        // The workspace slot of the tile: its block's index, or in clusters (whose grid holds
        // a block past the edge where the row tiles are not a multiple of the cluster) its
        // place in the output.
        let tile = if CL > 1 { tm * tiles_n + tn } else { block_idx_x() as usize };
        let cx = SplitCtx { ws, split, tiles: tiles_m * tiles_n, tile, slice, flag: ring.flag() };
        // SAFETY: every consumer thread calls it (caller: the workspace and the grid).
        if !unsafe { split_reduce::<NACC>(&mut acc, cx, ct, WG_THREADS * CONS as u32) } {
            return;
        }
    }
    if out.flags & TMA_STORE != 0 {
        let bytes = STORE_BOX_ROWS * bn * core::mem::size_of::<O>();
        let slab = Slab {
            region: ring.base + (cw * bytes) as u32,
            map_d,
            m0: tm * bm + cw * 64,
            n0: tn * bn,
            z,
            bar: 2 + cw as u32,
        };
        // SAFETY: the consumers (and only they) reach the barrier; after it no wgmma reads the
        // ring, whose first `CONS` slabs (64 x BN outputs each: within the ring, as the f32
        // staging bound asserted in `gemm_sm90` implies) then hold
        // each warpgroup's outputs; the host set the flag with D's map and no C read.
        unsafe {
            named_barrier(1, WG_THREADS * CONS as u32);
            store_tma::<O, NACC>(&acc, bias, out, slab, lt);
        }
        return;
    }
    // SAFETY: the consumers (and only they) reach both barriers; after the first no wgmma
    // reads the ring, so it holds the f32 staging of each warpgroup's 64 rows.
    unsafe {
        named_barrier(1, WG_THREADS * CONS as u32);
        let pitch = (bn + EPI_PAD) * 4;
        let region = ring.base + (cw * 64 * pitch) as u32;
        let (w, lane) = (lt / 32, lt % 32);
        let (g, t) = (lane / 4, lane % 4);
        for j in 0..bn / 8 {
            let col = ((j * 8 + 2 * t) * 4) as u32;
            let row = (w * 16 + g) * pitch;
            st_shared_v2_f32(region + row as u32 + col, acc[4 * j], acc[4 * j + 1]);
            st_shared_v2_f32(region + (row + 8 * pitch) as u32 + col, acc[4 * j + 2], acc[4 * j + 3]);
        }
        named_barrier(2 + cw as u32, WG_THREADS);
        let shape = (bn, 64, WG_THREADS as usize);
        drain::<O>(c, d, bias, out, region, pitch, shape, tm * bm + cw * 64, tn * bn, lt);
    }
}

/// The persistent form: `gridDim.x` blocks (one per SM) walk the output tiles of every batch
/// matrix `gridDim.x` apart in raster order; the producer runs ahead across tile boundaries
/// (the ring's stage counter never restarts), and each consumer applies the epilogue straight
/// through a small per-warp staging area (the ring is busy with the next tile) — or, with
/// [`TMA_STORE`], each warp's rows box by box through TMA from `SB` buffers of its own past the
/// barriers.
///
/// # Safety
/// As [`sm90_gemm`]; `stride_c` is the batch stride of C and D; with `TMA_STORE` the launch's
/// shared memory holds the buffers (`Sm90Tile::store_buffers`).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn sm90_gemm_persistent<
    E: WgmmaElem,
    O: Element,
    const NACC: usize,
    const CONS: usize,
    const ST: usize,
    const CL: usize,
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
    let ring = Ring::<NACC, CONS, ST, CL>::new();
    let tid = thread_idx_x() as usize;
    let wg = tid / WG_THREADS as usize;
    let (tiles_m, tiles_n) = (out.m.div_ceil(ring.bm()), out.n.div_ceil(ring.bn()));
    // Clusters walk pairs of vertically adjacent tiles (single tiles without a cluster).
    let per_batch = tiles_m.div_ceil(CL) * tiles_n;
    let total = per_batch * batch;
    let (first, step) = (block_idx_x() as usize / CL, grid_dim_x() as usize / CL);
    let rank = ring.rank();
    let ktiles = k.div_ceil(E::BK);
    // SAFETY: thread 0 initialises, every thread syncs.
    unsafe { ring.init(tid) };
    if wg == 0 {
        if CONS == 2 {
            setmaxnreg_dec::<PRODUCER_REGS>();
        }
        if tid == 0 {
            let mut it = 0;
            let mut t = first;
            while t < total {
                let (z, (tm, tn)) = (t / per_batch, raster_cluster(t % per_batch, rank, CL, tiles_m, tiles_n));
                for kt in 0..ktiles {
                    // SAFETY: as in `sm90_gemm`.
                    unsafe { ring.produce::<E>(it, map_a, map_b, kt, tm, tn, z as i32) };
                    it += 1;
                }
                t += step;
            }
        }
        return;
    }
    if CONS == 2 {
        setmaxnreg_inc::<CONSUMER_REGS>();
    }
    let cw = wg - 1;
    let lt = tid % WG_THREADS as usize;
    let tma = out.flags & TMA_STORE != 0;
    // Past the barriers, 1024-aligned (`Sm90Tile::store_buffers_offset`): the warpgroup's, then
    // this warp's share of them.
    let warp = lt / 32;
    let wg_bufs = ST * Ring::<NACC, CONS, ST, CL>::STAGE + 1024 + cw * SB * STORE_BOX_BYTES;
    let bufs = ring.base + (wg_bufs + warp * SB * WARP_BOX_BYTES) as u32;
    let mut boxes = 0;
    let mut it = 0;
    let mut t = first;
    // Zeroed once: each tile's first wgmma overwrites them (with K = 0 none runs, and they
    // stay zero), so no tile spends its start zeroing registers.
    let mut acc = [0.0f32; NACC];
    while t < total {
        let (z, (tm, tn)) = (t / per_batch, raster_cluster(t % per_batch, rank, CL, tiles_m, tiles_n));
        for kt in 0..ktiles {
            // SAFETY: as in `sm90_gemm`.
            unsafe { ring.consume::<E>(it, cw, &mut acc, kt > 0 && lt == 0, kt == 0) };
            it += 1;
        }
        // The first store box's bias loads, in flight while the last wgmmas finish.
        // SAFETY: the bias covers every column when the flags say so (host).
        let first_bias = unsafe { first_box_bias::<O, NACC>(bias, out, tn * ring.bn(), lt) };
        wgmma_wait::<0>();
        if ktiles > 0 && lt == 0 {
            // SAFETY: the tile's last stage is no longer read.
            unsafe { ring.release((it - 1) % ST) };
        }
        if tm >= tiles_m {
            // Past the last row tile (a cluster's pair with an odd count): nothing to store.
            t += step;
            continue;
        }
        if tma {
            let (m0, n0) = (tm * ring.bm() + cw * 64 + warp * WARP_BOX_ROWS, tn * ring.bn());
            let s = Boxes { bufs, map_d, m0, n0, z: z as i32, done: boxes };
            // SAFETY: the warpgroup calls it together; each warp's buffers are its own.
            boxes = unsafe { store_boxes::<O, NACC, SB>(&mut acc, bias, out, s, lt, first_bias) };
            t += step;
            continue;
        }
        let off = z * stride_c;
        // SAFETY: the tile lies in the batch matrix z, which C and D cover; the warp's staging
        // area is its own.
        unsafe {
            store_staged::<O, NACC>(
                c.add(off),
                d.add(off),
                bias,
                out,
                &acc,
                ring.staging(cw, lt / 32),
                (tm * ring.bm() + cw * 64, tn * ring.bn()),
                lt,
            )
        };
        t += step;
    }
    if tma && lt % 32 == 0 {
        // The last boxes' stores read the buffers: the block stays until they have.
        bulk_wait_read();
    }
}

// ABI: (map_a, map_b, map_d, c, d, bias, m, n, k, ldc, batch, stride_c, alpha, beta, flags, ws,
// slices, kt_per; the last three: split-K, one-tile form only, `slices` 1 = no split; map_d:
// the one-tile form's TMA-store epilogue, read only with `TMA_STORE` in flags); the maps
// by value (`__grid_constant__`; on the H100 this ran as fast as maps in global memory, see
// bench/results/hopper-run1/maps-*.txt). Entries ending in `p` are persistent (grid: at most
// one block per SM, walking the tiles), in `pp` persistent ping-pong (`pingpong.rs`); `c2`
// and `c4` entries run in clusters of 2 or 4 blocks along M (`ring.rs`), launched with that
// cluster shape.
macro_rules! sm90_entry {
    ($name:expr, $E:ty, $O:ty, $nacc:literal, $cons:literal, $st:literal, $persist:literal, $pp:literal, $cl:literal) => {
        sm90_entry!($name, $E, $O, $nacc, $cons, $st, $persist, $pp, $cl, 2);
    };
    ($name:expr, $E:ty, $O:ty, $nacc:literal, $cons:literal, $st:literal, $persist:literal, $pp:literal, $cl:literal, $sb:literal) => {
        const _: () = {
            #[unsafe(export_name = $name)]
            #[allow(clippy::too_many_arguments)]
            unsafe extern "ptx-kernel" fn entry(
                _map_a: TensorMap,
                _map_b: TensorMap,
                _map_d: TensorMap,
                c: *const $O,
                d: *mut $O,
                bias: *const $O,
                m: u32,
                n: u32,
                k: u32,
                ldc: u32,
                batch: u32,
                stride_c: u64,
                alpha: f32,
                beta: f32,
                flags: u32,
                ws: *mut f32,
                slices: u32,
                kt_per: u32,
            ) {
                let (pa, pb, pd): (u64, u64, u64);
                // SAFETY: takes the param-space addresses of the first three parameters.
                unsafe {
            asm!(concat!("mov.u64 {a}, ", $name, "_param_0;"), a = out(reg64) pa);
            asm!(concat!("mov.u64 {b}, ", $name, "_param_1;"), b = out(reg64) pb);
            asm!(concat!("mov.u64 {d}, ", $name, "_param_2;"), d = out(reg64) pd);
                }
                let out = Out { m: m as usize, n: n as usize, ldc: ldc as usize, alpha, beta, flags };
                let (ma, mb, md) = (param_to_generic(pa), param_to_generic(pb), param_to_generic(pd));
                if flags & MAP_PREFETCH != 0 && thread_idx_x() == 0 {
                    // SAFETY: the maps the host encoded (D's only with the TMA store).
                    unsafe {
                        prefetch_tensormap(ma);
                        prefetch_tensormap(mb);
                        if flags & TMA_STORE != 0 {
                            prefetch_tensormap(md);
                        }
                    }
                }
                // SAFETY: the host encoded the maps for this variant's boxes and checked the
                // outputs, the block size and the shared memory (and, persistent, launched at
                // most one block per tile).
                unsafe {
                    if $pp > 0 {
                        pingpong::sm90_gemm_pingpong::<$E, $O, $nacc, $pp, $st, $sb>(
                            ma,
                            mb,
                            md,
                            c,
                            d,
                            bias,
                            k as usize,
                            batch as usize,
                            stride_c as usize,
                            out,
                        )
                    } else if $persist {
                        sm90_gemm_persistent::<$E, $O, $nacc, $cons, $st, $cl, $sb>(
                            ma,
                            mb,
                            md,
                            c,
                            d,
                            bias,
                            k as usize,
                            batch as usize,
                            stride_c as usize,
                            out,
                        )
                    } else {
                        let z = block_idx_z() as usize * stride_c as usize;
                        let sp = Sm90Split { slices: slices as usize, kt_per: kt_per as usize };
                        let (cz, dz) = (c.add(z), d.add(z));
                        sm90_gemm::<$E, $O, $nacc, $cons, $st, $cl>(ma, mb, md, cz, dz, bias, k as usize, out, ws, sp)
                    }
                    // A cluster's blocks stay until all are done: a partner may still arrive
                    // on this block's barriers, and every thread of every block reaches this.
                    if $cl > 1 {
                        cluster_sync();
                    }
                }
            }
        };
    };
}

/// Every tile of `gemm_sm90::TILES` for one (input, output): (NACC = BN / 2, consumers,
/// stages, persistent, ping-pong slabs (0: cooperative), blocks per cluster[, TMA-store
/// buffers per warpgroup, 2 if absent]), in order.
macro_rules! sm90_tiles {
    ($in:literal, $E:ty, $out:literal, $O:ty) => {
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_128x256x64s4"), $E, $O, 128, 2, 4, false, 0, 1);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_128x128x64s6"), $E, $O, 64, 2, 6, false, 0, 1);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_128x256x64s3p"), $E, $O, 128, 2, 3, true, 0, 1);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_128x128x64s5p"), $E, $O, 64, 2, 5, true, 0, 1);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_64x256x64s4pp"), $E, $O, 128, 2, 4, true, 1, 1);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_64x128x64s7pp"), $E, $O, 64, 2, 7, true, 1, 1);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_128x128x64s5pp"), $E, $O, 64, 2, 5, true, 2, 1);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_64x256x64s5pp"), $E, $O, 128, 2, 5, true, 1, 1);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_128x256x64s4p"), $E, $O, 128, 2, 4, true, 0, 1);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_64x128x64s4"), $E, $O, 64, 1, 4, false, 0, 1);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_64x128x64s8"), $E, $O, 64, 1, 8, false, 0, 1);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_128x128x64s3"), $E, $O, 64, 2, 3, false, 0, 1);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_128x256x64s4pc2"), $E, $O, 128, 2, 4, true, 0, 2);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_128x256x64s4c2"), $E, $O, 128, 2, 4, false, 0, 2);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_128x192x64s4p"), $E, $O, 96, 2, 4, true, 0, 1);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_128x256x64s3pb4"), $E, $O, 128, 2, 3, true, 0, 1, 4);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_128x192x64s4pb3"), $E, $O, 96, 2, 4, true, 0, 1, 3);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_64x128x64s8c2"), $E, $O, 64, 1, 8, false, 0, 2);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_64x128x64s8c4"), $E, $O, 64, 1, 8, false, 0, 4);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_128x160x64s6"), $E, $O, 80, 2, 6, false, 0, 1);
    };
}

sm90_tiles!("bf16", bf16, "bf16", bf16);
sm90_tiles!("bf16", bf16, "f32", f32);
sm90_tiles!("f16", f16, "f16", f16);
sm90_tiles!("f16", f16, "f32", f32);

// f32 inputs on TF32 (f32 output only): the two one-tile shapes the heuristic picks, the
// persistent 128 x 256, the small-M split tile and the streaming tile (indices 0, 1, 8, 9 and
// 10 of `TILES`, `gemm_sm90::TF32_TILES`); K 32 per stage.
sm90_entry!("ft_gemm90_tf32_rc_f32_128x256x32s4", f32, f32, 128, 2, 4, false, 0, 1);
sm90_entry!("ft_gemm90_tf32_rc_f32_128x128x32s6", f32, f32, 64, 2, 6, false, 0, 1);
sm90_entry!("ft_gemm90_tf32_rc_f32_128x256x32s4p", f32, f32, 128, 2, 4, true, 0, 1);
sm90_entry!("ft_gemm90_tf32_rc_f32_64x128x32s4", f32, f32, 64, 1, 4, false, 0, 1);
sm90_entry!("ft_gemm90_tf32_rc_f32_64x128x32s8", f32, f32, 64, 1, 8, false, 0, 1);
