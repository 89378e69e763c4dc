//! The staged SGP backward (`ft_clifford_bwdt_d{2,3}_{dt}_f{2,4}`, sm_90a; the ring is
//! `clifford_staged_io.rs`). The one-pass register backward (`clifford_bwd.rs`) loads a row
//! and then waits for it, with nothing else in flight; here warp 0 copies whole groups of
//! rows of x, y and grad_out into a ring of shared-memory stages, `stages - 1` groups ahead.
//! A team of `team` threads owns a row, `F` features per thread (`j + k * team`): the norm's
//! statistics from the stage (a team reduction), then the gradients from the stage again;
//! dx and dy are stored, and each thread's weight gradient stays in registers over all the
//! rows it visits. At the end each team writes its `[W][N]` f32 partial to
//! `dw_part[block * rows + team index]`; `ft_clifford_dw_reduce` sums them.
#![allow(clippy::needless_range_loop)]

use super::clifford_io::{team_sum, weights_of};
use super::clifford_staged_io::Ring;
use crate::arch::nvptx::{block_dim_x, block_idx_x, grid_dim_x, sync_threads, thread_idx_x};
use crate::arch::sm90::fence_proxy_async;
use crate::clifford::{
    Algebra, Cl2, Cl3, MAX_C, MAX_G, MAX_W, Mv, bwd_feature, bwd_stats_feature, norm_backward_coefs,
};
use crate::element::Element;
use half::{bf16, f16};

/// The inputs and outputs of one launch.
#[derive(Clone, Copy)]
struct Io<T> {
    x: *const T,
    y: *const T,
    go: *const T,
    w: *const T,
    dx: *mut T,
    dy: *mut T,
    dw_part: *mut f32,
}

/// # Safety
/// Host-validated (`host/src/ops/clifford/staged.rs`): x, y, go, dx, dy cover `C * B * N`
/// elements, w covers `N * W`, `dw_part` covers `gridDim.x * (blockDim.x / team) * W * N` f32;
/// `team` is a power of two dividing `blockDim.x` with `team * F >= N`; `2 <= stages <=
/// MAX_STAGES`; the dynamic shared memory holds `staged::smem_bytes` for three inputs, the
/// block's rows and stages; `aligned` only when x, y and go start 16-byte aligned and `N`
/// elements are a multiple of 16 bytes; every thread of the block calls it.
#[inline(always)]
unsafe fn bwd_staged<T: Element, A: Algebra, const F: usize>(
    io: Io<T>,
    (b, n): (usize, usize),
    normalize: bool,
    team: usize,
    stages: usize,
    aligned: bool,
) {
    let tid = thread_idx_x() as usize;
    let rows = block_dim_x() as usize / team;
    let (j, rr) = (tid % team, tid / team);
    let ring = Ring { b, n, rows, tensors: 3, stages, aligned };
    let groups = b.div_ceil(rows);
    let ins = [io.x, io.y, io.go];
    // SAFETY: every thread, once, first.
    unsafe { ring.init(tid) };
    let (g0, gstep) = (block_idx_x() as usize, grid_dim_x() as usize);
    let mut ws = [[0.0f32; MAX_W]; F];
    let mut dws = [[0.0f32; MAX_W]; F];
    for k in 0..F {
        if j + k * team < n {
            // SAFETY: the feature is below N.
            ws[k] = unsafe { weights_of::<T, A>(io.w, j + k * team) };
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
    // Feature f of row rr of the group in stage s: x, y and grad_out.
    let inputs = |v: &super::clifford_staged_io::Group, f: usize| {
        let (mut xv, mut yv, mut gv): (Mv, Mv, Mv) = ([0.0; MAX_C], [0.0; MAX_C], [0.0; MAX_C]);
        for c in 0..A::C {
            // SAFETY: the stage holds the group (callers waited); row rr exists, f < N.
            unsafe {
                xv[c] = ring.load::<T, A>(v, io.x, 0, c, f);
                yv[c] = ring.load::<T, A>(v, io.y, 1, c, f);
                gv[c] = ring.load::<T, A>(v, io.go, 2, c, f);
            }
        }
        (xv, yv, gv)
    };
    let (mut i, mut g) = (0usize, g0);
    while g < groups {
        let s = i % stages;
        // SAFETY: issued for this round (prologue or the previous round of stage s).
        unsafe { ring.wait(s, i / stages) };
        let active = rr < ring.live(g);
        let v = ring.group::<T, A>(g, s, rr);
        let mut coefs = ([1.0f32; MAX_G], [0.0f32; MAX_G]);
        if normalize {
            let mut acc = [0.0f32; 2 * MAX_G];
            for k in 0..F {
                let f = j + k * team;
                if active && f < n {
                    let (xv, yv, gv) = inputs(&v, f);
                    let (mut ss, mut dot) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
                    bwd_stats_feature::<A>(&xv, &yv, &gv, &ws[k], &mut ss, &mut dot);
                    for gr in 0..MAX_G {
                        acc[gr] += ss[gr];
                        acc[MAX_G + gr] += dot[gr];
                    }
                }
            }
            // SAFETY: every thread of the block is here (the group loop is uniform).
            let acc = unsafe { team_sum(acc, team as u32) };
            let (mut ss, mut dot) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
            ss.copy_from_slice(&acc[..MAX_G]);
            dot.copy_from_slice(&acc[MAX_G..]);
            coefs = norm_backward_coefs::<A>(&ss, &dot, n);
        }
        let row = g * rows + rr;
        for k in 0..F {
            let f = j + k * team;
            if active && f < n {
                let (xv, yv, gv) = inputs(&v, f);
                let c = normalize.then_some((&coefs.0, &coefs.1));
                let (dx, dy) = bwd_feature::<A>(&xv, &yv, &gv, &ws[k], c, &mut dws[k]);
                for cc in 0..A::C {
                    let at = (cc * b + row) * n + f;
                    // SAFETY: row < B, f < N: inside plane cc of dx and dy.
                    unsafe {
                        *io.dx.add(at) = T::from_f32(dx[cc]);
                        *io.dy.add(at) = T::from_f32(dy[cc]);
                    }
                }
            }
        }
        // This thread's reads of stage s (generic proxy) before the next copy into it (async
        // proxy), which warp 0 issues after the block barrier below.
        fence_proxy_async();
        // SAFETY: every thread of the block reaches it; after it no thread reads stage s.
        unsafe { sync_threads() };
        if tid < 32 && g + stages * gstep < groups {
            // SAFETY: warp 0, an existing group, stage s read by nobody any more.
            unsafe { ring.issue::<T, A>(ins, g + stages * gstep, s, tid) };
        }
        i += 1;
        g += gstep;
    }
    let part = (block_idx_x() as usize * rows + rr) * A::W * n;
    for k in 0..F {
        let f = j + k * team;
        if f < n {
            for q in 0..A::W {
                // SAFETY: this team's partial (`W * N` f32 at `part`), path q, feature f.
                unsafe { *io.dw_part.add(part + q * n + f) = dws[k][q] };
            }
        }
    }
}

/// `(x, y, go, w, dx, dy, dw_part, b, n, normalize, team, stages, aligned)`.
macro_rules! bwdt_entry {
    ($A:ty, $d:literal, $T:ty, $dt:literal, $f:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_bwdt_d", $d, "_", $dt, "_f", $f))]
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
                team: u32,
                stages: u32,
                aligned: u32,
            ) {
                let io = Io { x, y, go, w, dx, dy, dw_part };
                // SAFETY: the host checked sizes, team, stages and shared memory.
                unsafe {
                    bwd_staged::<$T, $A, $f>(io, (b, n), normalize != 0, team as usize, stages as usize, aligned != 0)
                }
            }
        };
    };
}

macro_rules! each_dtype {
    ($A:ty, $d:literal, $f:literal) => {
        bwdt_entry!($A, $d, f32, "f32", $f);
        bwdt_entry!($A, $d, f16, "f16", $f);
        bwdt_entry!($A, $d, bf16, "bf16", $f);
    };
}

each_dtype!(Cl2, "2", 2);
each_dtype!(Cl3, "3", 4);
