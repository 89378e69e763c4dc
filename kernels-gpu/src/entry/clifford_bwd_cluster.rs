//! The one-pass SGP backward over a thread-block cluster (`ft_clifford_bwd_d{2,3}_{dt}_v1_p{n}c`,
//! sm_90a): the one-pass form of `clifford_bwd.rs` for rows longer than one block's registers
//! hold. A cluster of K blocks owns one batch row at a time; block `r` of the cluster keeps
//! features `r * span .. (r + 1) * span` of it (`span = blockDim.x * VPT`, one feature an
//! access), with their weights and their share of the weight gradient in registers for every
//! row it visits. A row's x, y and grad_out are read once and stay in registers between the
//! norm statistics and the gradients, so the row costs its minimum traffic (the split form,
//! `clifford_bwd_split.rs`, reads the inputs twice).
//!
//! The row's statistics: each block sums its features' (`team_sum`), thread 0 writes the sums
//! to the block's slot in shared memory, one cluster barrier, and every thread adds the K
//! blocks' slots in rank order through distributed shared memory (the same order in every
//! block, so all K blocks get the same coefficients): lane q of each warp sums statistic q
//! over the ranks and the warp takes the sums from those lanes by shuffles. The slots
//! alternate by row parity: a slot is written again two rows later, after every block has
//! passed the next row's barrier, which comes after its reads of this one. A last barrier
//! keeps any block from exiting while another may still read its slots.
//!
//! Clusters walk the rows in a grid-stride loop (`%clusterid.x`, `%nclusterid.x`); at the end
//! each block writes its features' weight gradient to the cluster's partial
//! `dw_part[cluster]` (`[W][N]` f32), which `ft_clifford_dw_reduce` sums in cluster order.
//! Shared layout: the 1 KiB team-sum scratch, then the two slots ([`SLOT_BYTES`] each).
#![allow(clippy::needless_range_loop)]

use super::clifford_io::{SCRATCH, each_dim_dtype, ld_mv, st_mv, team_sum, weights_of};
use crate::arch::nvptx::{block_dim_x, dyn_smem_addr, shfl_idx_f32, st_shared_f32, thread_idx_x};
use crate::arch::sm90::{
    cluster_ctarank, cluster_id_x, cluster_nctarank, cluster_sync, ld_shared_cluster_f32, n_cluster_id_x,
};
use crate::clifford::{
    Algebra, CLUSTER_SLOT_BYTES as SLOT_BYTES, Cl2, Cl3, MAX_C, MAX_G, MAX_W, bwd_feature, bwd_stats_feature,
    norm_backward_coefs,
};
use crate::element::Element;
use half::{bf16, f16};

/// The problem of one launch.
struct Problem<T> {
    x: *const T,
    y: *const T,
    go: *const T,
    w: *const T,
    dx: *mut T,
    dy: *mut T,
    dw_part: *mut f32,
    b: usize,
    n: usize,
    normalize: bool,
}

/// # Safety
/// Every multivector covers `C * B * N` elements, `w` covers `N * W`, `dw_part` covers
/// `%nclusterid.x * W * N` f32; the launch is in clusters along x with
/// `%cluster_nctarank * blockDim.x * VPT >= N`; `blockDim.x` is a power of two from 32; the
/// dynamic shared memory holds `SCRATCH + 2 * SLOT_BYTES` bytes; every thread of every block
/// calls it.
#[inline(always)]
unsafe fn bwd_cluster<T: Element, A: Algebra, const VPT: usize>(p: &Problem<T>) {
    let tid = thread_idx_x() as usize;
    let team = block_dim_x() as usize;
    let ranks = cluster_nctarank();
    let f0 = cluster_ctarank() as usize * team * VPT;
    let (n, b) = (p.n, p.b);
    let plane = b * n;
    let slots = dyn_smem_addr() + SCRATCH;
    let mut ws = [[0.0f32; MAX_W]; VPT];
    let mut dws = [[0.0f32; MAX_W]; VPT];
    for v in 0..VPT {
        let f = f0 + tid + v * team;
        if f < n {
            // SAFETY: f < N.
            ws[v] = unsafe { weights_of::<T, A>(p.w, f) };
        }
    }
    let mut row = cluster_id_x() as usize;
    let step = n_cluster_id_x() as usize;
    let mut slot = slots;
    while row < b {
        let mut xs = [[0.0f32; MAX_C]; VPT];
        let mut ys = [[0.0f32; MAX_C]; VPT];
        let mut gs = [[0.0f32; MAX_C]; VPT];
        for v in 0..VPT {
            let f = f0 + tid + v * team;
            if f < n {
                let base = row * n + f;
                // SAFETY: row < B and f < N.
                unsafe {
                    xs[v] = ld_mv::<T, A, 1>(p.x, plane, base)[0];
                    ys[v] = ld_mv::<T, A, 1>(p.y, plane, base)[0];
                    gs[v] = ld_mv::<T, A, 1>(p.go, plane, base)[0];
                }
            }
        }
        let mut coefs = ([1.0f32; MAX_G], [0.0f32; MAX_G]);
        if p.normalize {
            let mut acc = [0.0f32; 2 * MAX_G];
            for v in 0..VPT {
                if f0 + tid + v * team < n {
                    let (mut ss, mut dot) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
                    bwd_stats_feature::<A>(&xs[v], &ys[v], &gs[v], &ws[v], &mut ss, &mut dot);
                    for g in 0..MAX_G {
                        acc[g] += ss[g];
                        acc[MAX_G + g] += dot[g];
                    }
                }
            }
            // SAFETY: every thread of the block is here (the row loop is uniform over the
            // cluster); the block is one team.
            let acc = unsafe { team_sum(acc, team as u32, A::G) };
            if tid == 0 {
                for (g, &s) in acc.iter().enumerate() {
                    // SAFETY: this block's slot of 2 * MAX_G f32 (the caller's shared memory).
                    unsafe { st_shared_f32(slot + 4 * g as u32, s) };
                }
            }
            // SAFETY: every thread of every block of the cluster reaches it once per row.
            unsafe { cluster_sync() };
            // Lane q of each warp sums statistic q (q < 2 * MAX_G) over the ranks, in rank
            // order; then every lane takes the sums from those lanes. One remote load an issue
            // per rank for the warp, instead of 2 * G per thread.
            let q = tid as u32 % 32;
            let mut total = 0.0f32;
            if q < 2 * MAX_G as u32 && (q as usize % MAX_G) < A::G {
                for r in 0..ranks {
                    // SAFETY: block r wrote its slot before the barrier just passed; it is
                    // written again only after the next row's barrier (module docs).
                    total += unsafe { ld_shared_cluster_f32(slot + 4 * q, r) };
                }
            }
            let (mut ss, mut dot) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
            for g in 0..A::G {
                // SAFETY: every lane of the warp is here (the branch above has rejoined).
                unsafe {
                    ss[g] = shfl_idx_f32(total, g as u32);
                    dot[g] = shfl_idx_f32(total, (MAX_G + g) as u32);
                }
            }
            coefs = norm_backward_coefs::<A>(&ss, &dot, n);
            slot = if slot == slots { slots + SLOT_BYTES } else { slots };
        }
        for v in 0..VPT {
            let f = f0 + tid + v * team;
            if f < n {
                let c = p.normalize.then_some((&coefs.0, &coefs.1));
                let (dxv, dyv) = bwd_feature::<A>(&xs[v], &ys[v], &gs[v], &ws[v], c, &mut dws[v]);
                let one = [1.0f32; MAX_G];
                let base = row * n + f;
                // SAFETY: as for the loads.
                unsafe {
                    st_mv::<T, A, 1>(p.dx, plane, base, &[dxv], &one);
                    st_mv::<T, A, 1>(p.dy, plane, base, &[dyv], &one);
                }
            }
        }
        row += step;
    }
    if p.normalize {
        // SAFETY: as the barrier in the loop; no block leaves while a peer reads its slots.
        unsafe { cluster_sync() };
    }
    let part = cluster_id_x() as usize * A::W * n;
    for v in 0..VPT {
        let f = f0 + tid + v * team;
        if f < n {
            for q in 0..A::W {
                // SAFETY: this cluster's partial holds W * N f32; f < N.
                unsafe { *p.dw_part.add(part + q * n + f) = dws[v][q] };
            }
        }
    }
}

/// `(x, y, go, w, dx, dy, dw_part, b, n, normalize, team)`: the one-pass backward's parameters
/// (`team` is the block: it is not read).
macro_rules! cluster_entry {
    ($A:ty, $d:literal, $T:ty, $dt:literal, $pn:literal, $vpt:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_bwd_d", $d, "_", $dt, "_v1_p", $pn, "c"))]
            unsafe extern "ptx-kernel" fn entry(
                x: *const $T,
                y: *const $T,
                go: *const $T,
                w: *const $T,
                dx: *mut $T,
                dy: *mut $T,
                dw_part: *mut f32,
                b: usize,
                n: usize,
                normalize: u32,
                _team: u32,
            ) {
                let p = Problem { x, y, go, w, dx, dy, dw_part, b, n, normalize: normalize != 0 };
                // SAFETY: the host checked sizes, the cluster's coverage of N, the block and
                // the partials.
                unsafe { bwd_cluster::<$T, $A, $vpt>(&p) }
            }
        };
    };
}

/// The cluster variants for one (algebra, dtype); the list must match `BWD_CLUSTER_VPT`.
macro_rules! cluster_entries {
    ($A:ty, $d:literal, $T:ty, $dt:literal) => {
        cluster_entry!($A, $d, $T, $dt, "1", 1);
        cluster_entry!($A, $d, $T, $dt, "2", 2);
    };
}

each_dim_dtype!(cluster_entries);
