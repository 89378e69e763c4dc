//! The streaming small-M entries (`ft_gemvs_<in>_<out>_g<groups>`, sm_90a; see
//! `gemv_stream.rs`): warp 8 copies each unit's weight rows and x rows into the ring with
//! `cp.async.bulk` (full/empty mbarriers per stage); warps 0-7 split the unit's K chunk by 32-k
//! steps and feed `mma.m16n8k16` from 16-byte shared loads (the fragments of `gemv.rs`); at the
//! end of each slab of its range the block reduces its warps in shared memory and either applies
//! the epilogue (a whole slab) or joins the slab's partial sums with the other blocks that hold
//! part of it (the last to arrive adds them in block order: deterministic).

use super::gemv::MmaElem;
use crate::arch::nvptx::{
    atom_add_global_u32, block_idx_x, dyn_smem_addr, fence_gpu, grid_dim_x, ld_global_cg_f32, ld_shared_f32,
    ld_shared_v4_f32, st_shared_f32, sync_threads, sync_warp, thread_idx_x,
};
use crate::arch::sm90::{
    bulk_load, fence_barrier_init, fence_proxy_async, mbar_arrive, mbar_arrive_expect_tx, mbar_init, mbar_wait,
    named_barrier,
};
use crate::element::Element;
use crate::gemm::Epilogue;
use crate::gemv::{SLAB, a_fragment, b_fragment};
use crate::gemv_stream::{Ring, StreamPlan, WARPS, part_slot};
use half::{bf16, f16};

/// Threads of the consumer warps (named barrier 1).
const CONSUMERS: u32 = (WARPS * 32) as u32;

/// What every entry receives (passed field by field in the ABI).
#[derive(Clone, Copy)]
struct Args {
    m: usize,
    n: usize,
    k: usize,
    lda: usize,
    ldb: usize,
    ldc: usize,
    alpha: f32,
    beta: f32,
    flags: u32,
    kc: usize,
    stages: usize,
}

#[inline(always)]
fn smaller(a: usize, b: usize) -> usize {
    if a < b { a } else { b }
}

/// One block of the launch: units `start(b) .. start(b + 1)` of the plan.
///
/// # Safety
/// Host-validated (`host/src/ops/gemv_stream.rs`): 1 <= m <= 8·G, k > 0 a multiple of 8, kc
/// one of `gemv_stream::KCS` and `stages` at least 2; A (m
/// x k, row-major at lda) and B (the n x k weight, K-contiguous at ldb) start 16-byte aligned
/// with lda and ldb multiples of 8; `ws` holds `StreamPlan::workspace_bytes(G)` with its
/// counters zero; the grid is the plan's blocks, the block `gemv_stream::THREADS` threads with
/// `Ring::smem_bytes(G)` bytes of dynamic shared memory for the ring `(m, kc, stages)`.
#[inline(always)]
unsafe fn stream<E: MmaElem, O: Element, const G: usize>(
    a: *const E,
    b: *const E,
    c: *const O,
    d: *mut O,
    bias: *const O,
    ws: *mut u8,
    q: Args,
) {
    let tid = thread_idx_x() as usize;
    let (warp, lane) = (tid / 32, tid % 32);
    let p = StreamPlan { slabs: q.n.div_ceil(SLAB), kchunks: q.k.div_ceil(q.kc), blocks: grid_dim_x() as usize };
    let blk = block_idx_x() as usize;
    let (u0, u1) = (p.start(blk), p.start(blk + 1));
    let ring = Ring { kc: q.kc, m: q.m, stages: q.stages };
    let (nst, row_bytes) = (ring.stages, ring.row_bytes());
    let smem = dyn_smem_addr();
    let stage = |s: usize| smem + (s * ring.stage_bytes()) as u32;
    let full = |s: usize| smem + (ring.bars_offset() + 8 * s) as u32;
    let empty = |s: usize| smem + (ring.bars_offset() + 8 * (nst + s)) as u32;
    if tid == 0 {
        for s in 0..nst {
            // SAFETY: 8-byte aligned words after the ring, used by no thread before the barrier.
            unsafe {
                mbar_init(full(s), 1);
                mbar_init(empty(s), CONSUMERS);
            }
        }
        fence_barrier_init();
    }
    // SAFETY: every thread of the block reaches it.
    unsafe { sync_threads() };
    // Unit `u`: slab, first k, chunk length (a multiple of 8), weight rows that exist.
    let unit = |u: usize| {
        let (slab, kc) = (u / p.kchunks, u % p.kchunks);
        let k0 = kc * q.kc;
        (slab, kc, k0, smaller(q.kc, q.k - k0), smaller(SLAB, q.n - slab * SLAB))
    };

    if warp == WARPS {
        // Producer: one lane per row copy (up to 16 weight rows and 16 rows of x).
        for u in u0..u1 {
            let i = u - u0;
            let s = i % nst;
            if i >= nst {
                // SAFETY: an initialised barrier; the consumers freed round i / nst - 1.
                unsafe { mbar_wait(empty(s), ((i / nst - 1) & 1) as u32) };
            }
            let (slab, _, k0, len, rows) = unit(u);
            let copies = rows + q.m;
            if lane == 0 {
                // SAFETY: an initialised barrier; the copies below complete exactly these bytes.
                unsafe { mbar_arrive_expect_tx(full(s), (copies * len * 2) as u32) };
            }
            sync_warp();
            if lane < copies {
                let (src, r) = if lane < rows {
                    (b.wrapping_add((slab * SLAB + lane) * q.ldb + k0), lane)
                } else {
                    (a.wrapping_add((lane - rows) * q.lda + k0), SLAB + lane - rows)
                };
                // SAFETY: row `lane` of the weight (or x) holds k0 .. k0 + len (len <= k - k0),
                // 16-byte aligned (aligned bases, ld and k0 multiples of 8), len * 2 a multiple
                // of 16; the destination row lies in stage s, free (empty barrier above).
                unsafe { bulk_load(stage(s) + (r * row_bytes) as u32, src as u64, (len * 2) as u32, full(s)) };
            }
        }
        return;
    }

    let (gid, t) = (lane / 4, lane % 4);
    let red = |w: usize, mi: usize, col: usize| smem + (ring.red_offset() + ((w * 8 * G + mi) * SLAB + col) * 4) as u32;
    let flag = smem + (ring.red_offset() + WARPS * 8 * G * SLAB * 4) as u32;
    let parts = ws.wrapping_add(p.counter_bytes()) as *mut f32;
    let part =
        |bb: usize, sl: usize, mi: usize, col: usize| parts.wrapping_add(((bb * 2 + sl) * 8 * G + mi) * SLAB + col);
    let finish = |v: f32, mi: usize, n: usize| {
        let idx = mi * q.ldc + n;
        // SAFETY: (mi, n) is an output; C and bias are read only when enabled.
        let cv = if q.flags & 8 != 0 { unsafe { (*c.add(idx)).to_f32() } } else { 0.0 };
        let bv = if q.flags & 1 != 0 { unsafe { (*bias.add(n)).to_f32() } } else { 0.0 };
        let o = Epilogue::apply_flags(q.flags, q.alpha, q.beta, v, cv, bv, O::DTYPE);
        // SAFETY: as above.
        unsafe { *d.add(idx) = O::from_f32(o) };
    };
    let outs = q.m * SLAB;
    let mut acc = [[0.0f32; 4]; G];
    for u in u0..u1 {
        let i = u - u0;
        let s = i % nst;
        // SAFETY: an initialised barrier; round i / nst of stage s.
        unsafe { mbar_wait(full(s), ((i / nst) & 1) as u32) };
        let (slab, kc, _, len, rows) = unit(u);
        let base = stage(s);
        let ld = |r: usize, live: bool, kk: usize| -> [u32; 4] {
            if live && kk < len {
                // SAFETY: row r of the landed stage, elements kk .. kk + 8 < len.
                unsafe { ld_shared_v4_f32(base + (r * row_bytes + kk * 2) as u32) }.map(f32::to_bits)
            } else {
                [0; 4]
            }
        };
        let mut step = warp;
        while step < len.div_ceil(32) {
            let kk = step * 32 + 8 * t;
            let (lo, hi) = (ld(gid, gid < rows, kk), ld(gid + 8, gid + 8 < rows, kk));
            for (g, ag) in acc.iter_mut().enumerate() {
                let xv = ld(SLAB + 8 * g + gid, 8 * g + gid < q.m, kk);
                for j in 0..2 {
                    // SAFETY: the loop bounds are warp-uniform, so the whole warp is here.
                    *ag = unsafe { E::mma(a_fragment(lo, hi, j), b_fragment(xv, j), *ag) };
                }
            }
            step += WARPS;
        }
        // This thread's reads of stage s (generic proxy) before the next copies into it
        // (async proxy); every consumer thread arrives, each releasing its own reads.
        fence_proxy_async();
        // SAFETY: an initialised barrier; this thread has read stage s (its values are in
        // registers, consumed above).
        unsafe { mbar_arrive(empty(s)) };
        if kc + 1 < p.kchunks && u + 1 < u1 {
            continue;
        }

        // End of this block's part of the slab: reduce the warps.
        for (g, ag) in acc.iter_mut().enumerate() {
            for (e, v) in ag.iter_mut().enumerate() {
                let (col, mi) = (gid + 8 * (e / 2), 8 * g + 2 * t + e % 2);
                // SAFETY: inside the reduction buffer.
                unsafe { st_shared_f32(red(warp, mi, col), *v) };
                *v = 0.0;
            }
        }
        // SAFETY: the consumer warps all reach it (the unit loop is uniform over them).
        unsafe { named_barrier(1, CONSUMERS) };
        let whole = slab * p.kchunks >= u0 && (slab + 1) * p.kchunks <= u1;
        let slot = part_slot(&p, blk, slab);
        let mut o = tid;
        while o < outs {
            let (mi, col) = (o / SLAB, o % SLAB);
            let n = slab * SLAB + col;
            if n < q.n {
                let mut v = 0.0f32;
                for w in 0..WARPS {
                    // SAFETY: written before the barrier.
                    v += unsafe { ld_shared_f32(red(w, mi, col)) };
                }
                if whole {
                    finish(v, mi, n);
                } else {
                    // SAFETY: this block's slot, inside the host-sized workspace.
                    unsafe { *part(blk, slot, mi, col) = v };
                }
            }
            o += CONSUMERS as usize;
        }
        if !whole {
            // Publish the part, count the arrival; the last of the slab's blocks adds them. The
            // barrier orders the consumers' stores before thread 0's fence and atomic
            // (cumulative), so one fence serves the block.
            // SAFETY: as above.
            unsafe { named_barrier(1, CONSUMERS) };
            let (f, l) = p.contributors(slab);
            if tid == 0 {
                fence_gpu();
                let counter = (ws as *mut u32).wrapping_add(slab);
                // SAFETY: the counters open the workspace (host-sized, zeroed).
                let old = unsafe { atom_add_global_u32(counter, 1) };
                let last = old as usize == l - f;
                if last {
                    // Leave the counter at zero for the next call on this workspace.
                    // SAFETY: as above; no other block of this call touches it any more.
                    unsafe { core::ptr::write_volatile(counter, 0) };
                }
                fence_gpu();
                // SAFETY: the flag word follows the reduction buffer.
                unsafe { st_shared_f32(flag, if last { 1.0 } else { 0.0 }) };
            }
            // SAFETY: as above.
            unsafe { named_barrier(1, CONSUMERS) };
            // SAFETY: written by thread 0 before the barrier.
            // (Thread 0 fenced after its atomic; the parts are read from L2, `ld.global.cg`.)
            if unsafe { ld_shared_f32(flag) } != 0.0 {
                let mut o = tid;
                while o < outs {
                    let (mi, col) = (o / SLAB, o % SLAB);
                    let n = slab * SLAB + col;
                    if n < q.n {
                        let mut v = 0.0f32;
                        for bb in f..=l {
                            // SAFETY: every block of the slab published its part before arriving.
                            v += unsafe { ld_global_cg_f32(part(bb, part_slot(&p, bb, slab), mi, col)) };
                        }
                        finish(v, mi, n);
                    }
                    o += CONSUMERS as usize;
                }
            }
        }
        // The reduction buffer and the flag are rewritten at the next slab.
        // SAFETY: as above.
        unsafe { named_barrier(1, CONSUMERS) };
    }
}

// ABI: (a, b, c, d, bias, ws, m, n, k, lda, ldb, ldc, alpha, beta, flags, kc, stages); dims
// u32, flags as `Epilogue::flags`.
macro_rules! gemvs_entry {
    ($name:expr, $E:ty, $O:ty, $G:literal) => {
        const _: () = {
            #[unsafe(export_name = $name)]
            #[allow(clippy::too_many_arguments)]
            unsafe extern "ptx-kernel" fn entry(
                a: *const $E,
                b: *const $E,
                c: *const $O,
                d: *mut $O,
                bias: *const $O,
                ws: *mut u8,
                m: u32,
                n: u32,
                k: u32,
                lda: u32,
                ldb: u32,
                ldc: u32,
                alpha: f32,
                beta: f32,
                flags: u32,
                kc: u32,
                stages: u32,
            ) {
                let q = Args {
                    m: m as usize,
                    n: n as usize,
                    k: k as usize,
                    lda: lda as usize,
                    ldb: ldb as usize,
                    ldc: ldc as usize,
                    alpha,
                    beta,
                    flags,
                    kc: kc as usize,
                    stages: stages as usize,
                };
                // SAFETY: the host validated operands, alignment, workspace and launch shape.
                unsafe { stream::<$E, $O, $G>(a, b, c, d, bias, ws, q) }
            }
        };
    };
}

gemvs_entry!("ft_gemvs_bf16_bf16_g1", bf16, bf16, 1);
gemvs_entry!("ft_gemvs_bf16_bf16_g2", bf16, bf16, 2);
gemvs_entry!("ft_gemvs_bf16_f32_g1", bf16, f32, 1);
gemvs_entry!("ft_gemvs_bf16_f32_g2", bf16, f32, 2);
gemvs_entry!("ft_gemvs_f16_f16_g1", f16, f16, 1);
gemvs_entry!("ft_gemvs_f16_f16_g2", f16, f16, 2);
gemvs_entry!("ft_gemvs_f16_f32_g1", f16, f32, 1);
gemvs_entry!("ft_gemvs_f16_f32_g2", f16, f32, 2);
