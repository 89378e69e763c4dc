//! Small-M GEMM entry points, wide blocks (`ft_gemv_<in>_<out>_g<groups>_w`, see
//! `gemv_wide.rs`): each warp streams a slab of 16 weight rows of its own over the block's K
//! slice, keeping `depth(G)` chunks of it and of x in flight (the weight's 16-byte loads marked
//! evict-first), the block's warps walking the same chunks of x (from L2 once per block, then
//! from L1).
//! `mma.m16n8k16` on fragments built from those loads as in `entry/gemv.rs`; no reduction
//! across warps. Unsplit, each thread applies the epilogue to its own accumulators; split, the
//! partials go to a workspace and the block that arrives last adds the slices in order
//! (deterministic).

use super::gemv::{Args, MmaElem, gemv_entry, grid_dim, kb1_of, load8};
use crate::arch::nvptx::{
    atom_add_global_u32, block_idx_x, block_idx_y, dyn_smem_addr, fence_gpu, ld_global_cg_f32, ld_shared_f32,
    st_shared_f32, sync_threads, thread_idx_x,
};
use crate::element::Element;
use crate::gemm::Epilogue;
use crate::gemv::{CHUNK, ROWS_INTERLEAVED, SmallMPlan, a_fragment, b_fragment, row_shift, slab_row};
use crate::gemv_wide::{block_slab, counter_bytes};
use half::{bf16, f16};

/// One block: `WARPS` slabs (`block_slab(blockIdx.x, warp)`), K slice `blockIdx.y`; one matrix.
/// `P`: weight chunks in flight per warp (`gemv_wide::depth(G)`).
///
/// # Safety
/// Host-validated: A is row-major and B column-major (K contiguous), covering one matrix as
/// `q` describes (interleaved: A is x's shifted copies, as for `entry/gemv.rs`); `ws` holds the
/// split's workspace (`gemv_wide::workspace_bytes` for this grid, counters zero) when
/// `q.ksplit > 1`; the block has `gemv_wide::SMEM_BYTES` of dynamic shared memory and
/// `gemv::THREADS` threads.
#[inline(always)]
unsafe fn small_m_wide<E: MmaElem, O: Element, const G: usize, const P: usize>(
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
    let (gid, t) = (lane / 4, lane % 4);
    let (bx, ks) = (block_idx_x() as usize, block_idx_y() as usize);
    let inter = q.layout & ROWS_INTERLEAVED != 0;
    let slab = block_slab(bx, warp, inter);
    let (r0, r1) = (slab_row(slab, gid, inter), slab_row(slab, gid + 8, inter));
    // The frame of an interleaved slab (the same for all the block's warps), and x's copy of
    // that shift; else 0 and x itself (see `entry/gemv.rs`).
    let s = if inter { row_shift(b as usize, slab_row(slab, 0, inter), q.ldb) } else { 0 };
    // SAFETY (pointer offset): inside A (host-sized copies; 0 otherwise).
    let a = unsafe { a.add(if inter { s * q.stride_a } else { 0 }) };
    let xlen = if inter { q.lda } else { q.k };
    let kb0 = ks * q.kslice;
    let kb1 = kb1_of(ks, q.kslice, q.k + s);
    let chunks = if kb1 > kb0 { (kb1 - kb0).div_ceil(CHUNK) } else { 0 };
    let kend = if kb1 > s { kb1 - s } else { 0 };
    // Chunk `cc` of the warp: 16 weight rows and the G x 8 rows of x, 32 k each (a thread's
    // two weight vectors and G x vectors); zero past the slice, past N or M, or before a row's
    // start.
    let chunk = |cc: usize| -> ([[u32; 4]; 2], [[u32; 4]; G]) {
        let mut xv = [[0u32; 4]; G];
        if cc >= chunks {
            return ([[0; 4]; 2], xv);
        }
        let f = kb0 + cc * CHUNK + 8 * t;
        // SAFETY: rows and k are predicated inside B and A (load8).
        unsafe {
            for (g, x) in xv.iter_mut().enumerate() {
                *x = load8::<E, true, false>(a, 8 * g + gid, q.m, f, 0, kb1, xlen, q.lda, false);
            }
            let w = [
                load8::<E, true, true>(b, r0, q.n, f, s, kend, q.k, q.ldb, false),
                load8::<E, true, true>(b, r1, q.n, f, s, kend, q.k, q.ldb, false),
            ];
            (w, xv)
        }
    };

    // Accumulators: group g holds (slab rows gid, gid + 8) x (x rows 8g + 2t, + 1). The ring
    // holds the next P chunks (weight and x both: x's first read by a block comes from L2).
    let mut acc = [[0.0f32; 4]; G];
    let mut ring = [([[0u32; 4]; 2], [[0u32; 4]; G]); P];
    for (u, r) in ring.iter_mut().enumerate() {
        *r = chunk(u);
    }
    let mut c0 = 0;
    while c0 < chunks {
        for (u, slot) in ring.iter_mut().enumerate() {
            let cc = c0 + u;
            if cc < chunks {
                let (w, xv) = *slot;
                *slot = chunk(cc + P);
                for (g, ag) in acc.iter_mut().enumerate() {
                    for j in 0..2 {
                        // SAFETY: `chunks` is warp-uniform, so the whole warp is here.
                        *ag = unsafe { E::mma(a_fragment(w[0], w[1], j), b_fragment(xv[g], j), *ag) };
                    }
                }
            }
        }
        c0 += P;
    }

    let finish = |v: f32, mi: usize, n: usize| {
        let idx = mi * q.ldc + n;
        // SAFETY: (mi, n) is an output; C and bias are read only when enabled.
        let cv = if q.flags & 8 != 0 { unsafe { (*c.add(idx)).to_f32() } } else { 0.0 };
        let bv = if q.flags & 1 != 0 { unsafe { (*bias.add(n)).to_f32() } } else { 0.0 };
        let o = Epilogue::apply_flags(q.flags, q.alpha, q.beta, v, cv, bv, O::DTYPE);
        // SAFETY: as above.
        unsafe { *d.add(idx) = O::from_f32(o) };
    };
    // This thread's outputs: accumulator (g, r) is x row 8g + 2t + r % 2, weight row r0 or r1.
    let out = |g: usize, r: usize| (8 * g + 2 * t + r % 2, if r < 2 { r0 } else { r1 });
    if q.ksplit <= 1 {
        for (g, ag) in acc.iter().enumerate() {
            for (r, &v) in ag.iter().enumerate() {
                let (mi, n) = out(g, r);
                if mi < q.m && n < q.n {
                    finish(v, mi, n);
                }
            }
        }
        return;
    }
    // Split: the partials [slice][m][n] after one counter per block.
    let plan = SmallMPlan { slabs: 0, ksplit: q.ksplit, kslice: q.kslice };
    let parts = ws.wrapping_add(counter_bytes(&plan, grid_dim(0))) as *mut f32;
    let part = |sl: usize, mi: usize, n: usize| parts.wrapping_add((sl * q.m + mi) * q.n + n);
    for (g, ag) in acc.iter().enumerate() {
        for (r, &v) in ag.iter().enumerate() {
            let (mi, n) = out(g, r);
            if mi < q.m && n < q.n {
                // SAFETY: the workspace holds every (slice, row, column) (host-sized).
                unsafe { *part(ks, mi, n) = v };
            }
        }
    }
    fence_gpu();
    // SAFETY: every thread of the block reaches the barrier.
    unsafe { sync_threads() };
    let flag = dyn_smem_addr();
    if tid == 0 {
        let counter = (ws as *mut u32).wrapping_add(bx);
        // SAFETY: the counters precede the partials in the workspace (host-sized, zeroed).
        let old = unsafe { atom_add_global_u32(counter, 1) };
        let last = old as usize == q.ksplit - 1;
        if last {
            // Leave the counter at zero for the next call on this workspace.
            // SAFETY: as above; no other block of this call touches it any more.
            unsafe { core::ptr::write_volatile(counter, 0) };
        }
        fence_gpu();
        // SAFETY: the flag word is the block's `SMEM_BYTES`.
        unsafe { st_shared_f32(flag, if last { 1.0 } else { 0.0 }) };
    }
    // SAFETY: every thread of the block reaches the barrier.
    unsafe { sync_threads() };
    // SAFETY: written by thread 0 before the barrier.
    if unsafe { ld_shared_f32(flag) } == 0.0 {
        return;
    }
    fence_gpu();
    for g in 0..G {
        for r in 0..4 {
            let (mi, n) = out(g, r);
            if mi < q.m && n < q.n {
                let mut v = 0.0f32;
                for sl in 0..q.ksplit {
                    // SAFETY: every slice's block published this element before its arrival.
                    v += unsafe { ld_global_cg_f32(part(sl, mi, n)) };
                }
                finish(v, mi, n);
            }
        }
    }
}

macro_rules! wide_groups {
    ($p:literal, $E:ty, $O:ty) => {
        gemv_entry!(concat!($p, "_g1_w"), $E, $O, small_m_wide, [$E, $O, 1, { crate::gemv_wide::depth(1) }]);
        gemv_entry!(concat!($p, "_g2_w"), $E, $O, small_m_wide, [$E, $O, 2, { crate::gemv_wide::depth(2) }]);
        gemv_entry!(concat!($p, "_g4_w"), $E, $O, small_m_wide, [$E, $O, 4, { crate::gemv_wide::depth(4) }]);
        gemv_entry!(concat!($p, "_g8_w"), $E, $O, small_m_wide, [$E, $O, 8, { crate::gemv_wide::depth(8) }]);
    };
}

wide_groups!("ft_gemv_bf16_bf16", bf16, bf16);
wide_groups!("ft_gemv_bf16_f32", bf16, f32);
wide_groups!("ft_gemv_f16_f16", f16, f16);
wide_groups!("ft_gemv_f16_f32", f16, f32);
