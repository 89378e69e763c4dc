//! The staged SGP forward (`ft_clifford_fwdt_d{2,3}_{dt}_f{2,4}`, sm_90a; the ring is
//! `clifford_staged_io.rs`, its layout `clifford/staged.rs`). The register kernels
//! (`clifford_fwd.rs`) keep one row in flight per thread, so an SM has too few bytes in flight
//! to reach the memory roof (ncu, H200: 24% occupancy, DRAM 38% busy at 2D B4096 N512). Here
//! warp 0 copies whole groups of rows into a ring of shared-memory stages, `stages - 1`
//! groups ahead, and every thread computes from shared memory: a team of `team` threads per
//! row, `F` features per thread (feature `j + k * team`), its features' weights kept in
//! registers for every row, the outputs held in registers across the team's norm reduction,
//! then stored.
#![allow(clippy::needless_range_loop)]

use super::clifford_io::{team_sum, weights_of};
use super::clifford_staged_io::Ring;
use crate::arch::nvptx::{block_dim_x, block_idx_x, grid_dim_x, sync_threads, thread_idx_x};
use crate::arch::sm90::fence_proxy_async;
use crate::clifford::{Algebra, Cl2, Cl3, MAX_C, MAX_G, MAX_W, Mv, accumulate_grades, gate, inv_rms, product};
use crate::element::Element;
use half::{bf16, f16};

/// # Safety
/// Host-validated (`host/src/ops/clifford/staged.rs`): x, y, out cover `C * B * N` elements,
/// w covers `N * W`; `team` is a power of two dividing `blockDim.x` with `team * F >= N`;
/// `2 <= stages <= MAX_STAGES`; the dynamic shared memory holds `staged::smem_bytes` for two
/// inputs, the block's rows and stages; `aligned` only when x and y start 16-byte aligned and
/// `N` elements are a multiple of 16 bytes; every thread of the block calls it.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn fwd_staged<T: Element, A: Algebra, const F: usize>(
    x: *const T,
    y: *const T,
    w: *const T,
    out: *mut T,
    (b, n): (usize, usize),
    normalize: bool,
    team: usize,
    stages: usize,
    aligned: bool,
) {
    let tid = thread_idx_x() as usize;
    let rows = block_dim_x() as usize / team;
    let (j, rr) = (tid % team, tid / team);
    let ring = Ring { b, n, rows, tensors: 2, stages, aligned };
    let groups = b.div_ceil(rows);
    let ins = [x, y, x];
    // SAFETY: every thread, once, first.
    unsafe { ring.init(tid) };
    let (g0, gstep) = (block_idx_x() as usize, grid_dim_x() as usize);
    let mut ws = [[0.0f32; MAX_W]; F];
    for k in 0..F {
        if j + k * team < n {
            // SAFETY: the feature is below N.
            ws[k] = unsafe { weights_of::<T, A>(w, j + k * team) };
        }
    }
    if tid < 32 {
        for s in 0..stages {
            if g0 + s * gstep < groups {
                // SAFETY: warp 0, an existing group, a stage not yet used.
                unsafe { ring.issue::<T, A>(ins, g0 + s * gstep, s, tid) };
            }
        }
    }
    let (mut i, mut g) = (0usize, g0);
    while g < groups {
        let s = i % stages;
        // SAFETY: issued for this round (prologue or the previous round of stage s).
        unsafe { ring.wait(s, i / stages) };
        let active = rr < ring.live(g);
        let v = ring.group::<T, A>(g, s, rr);
        let mut o = [[0.0f32; MAX_C]; F];
        let mut ss = [0.0f32; MAX_G];
        for k in 0..F {
            let f = j + k * team;
            if active && f < n {
                let (mut xv, mut yv): (Mv, Mv) = ([0.0; MAX_C], [0.0; MAX_C]);
                for c in 0..A::C {
                    // SAFETY: the stage holds group g; row rr exists, f < N.
                    unsafe {
                        xv[c] = ring.load::<T, A>(&v, x, 0, c, f);
                        yv[c] = ring.load::<T, A>(&v, y, 1, c, f);
                    }
                }
                gate::<A>(&mut xv);
                gate::<A>(&mut yv);
                o[k] = product::<A>(&xv, &yv, &ws[k]);
                accumulate_grades::<A>(&o[k], &mut ss);
            }
        }
        // This thread's reads of stage s (generic proxy) before the next copy into it (async
        // proxy), which warp 0 issues after the block barrier below.
        fence_proxy_async();
        let mut inv = [1.0f32; MAX_G];
        if normalize {
            // SAFETY: every thread of the block is here (the group loop is uniform).
            let sums = unsafe { team_sum(ss, team as u32) };
            for gr in 0..A::G {
                inv[gr] = inv_rms(sums[gr], n);
            }
        }
        // SAFETY: every thread of the block reaches it; after it no thread reads stage s.
        unsafe { sync_threads() };
        if tid < 32 && g + stages * gstep < groups {
            // SAFETY: warp 0, an existing group, stage s read by nobody any more.
            unsafe { ring.issue::<T, A>(ins, g + stages * gstep, s, tid) };
        }
        let row = g * rows + rr;
        for k in 0..F {
            let f = j + k * team;
            if active && f < n {
                for c in 0..A::C {
                    let v = o[k][c] * inv[A::T.grade[c]];
                    // SAFETY: row < B, f < N: inside plane c of out.
                    unsafe { *out.add((c * b + row) * n + f) = T::from_f32(v) };
                }
            }
        }
        i += 1;
        g += gstep;
    }
}

/// `(x, y, w, out, b, n, normalize, team, stages, aligned)`.
macro_rules! fwdt_entry {
    ($A:ty, $d:literal, $T:ty, $dt:literal, $f:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_fwdt_d", $d, "_", $dt, "_f", $f))]
            unsafe extern "ptx-kernel" fn entry(
                x: *const $T,
                y: *const $T,
                w: *const $T,
                out: *mut $T,
                b: usize,
                n: usize,
                normalize: u32,
                team: u32,
                stages: u32,
                aligned: u32,
            ) {
                // SAFETY: the host checked sizes, team, stages and shared memory.
                unsafe {
                    fwd_staged::<$T, $A, $f>(
                        x,
                        y,
                        w,
                        out,
                        (b, n),
                        normalize != 0,
                        team as usize,
                        stages as usize,
                        aligned != 0,
                    )
                }
            }
        };
    };
}

macro_rules! each_dtype {
    ($A:ty, $d:literal, $f:literal) => {
        fwdt_entry!($A, $d, f32, "f32", $f);
        fwdt_entry!($A, $d, f16, "f16", $f);
        fwdt_entry!($A, $d, bf16, "bf16", $f);
    };
}

// 3D keeps 4 features a thread (256 threads): with 2 (512 threads, 128 registers) its weights
// and outputs spilled.
each_dtype!(Cl2, "2", 2);
each_dtype!(Cl2, "2", 4);
each_dtype!(Cl3, "3", 4);
