//! PTX entries of the FCGP besides its products and norm (`entry/clifford.rs`; the GEMMs run
//! through `ops::gemm`): `ft_clifford_fcgp_wperm_d{2,3}_{dt}` — the weight matrices copied into
//! the grouped order the GEMMs read, or a grouped weight gradient copied back to path order;
//! `ft_clifford_fcgp_nbwd_d{2,3}_{dt}` — per batch row, the gradient through the norm from the
//! forward GEMM results and `go` (`gD`, `(C, B, N)`, the backward GEMMs' operand; one block
//! per row, the per-grade sums a block reduction); `ft_clifford_fcgp_pbwd_d{2,3}_{dt}` — per
//! (row, feature), dx and dy from the products' gradient (`dProd = gD Wᵀ`, f32, the layout of
//! `prod_at`).
#![allow(clippy::needless_range_loop)]

use super::clifford_io::{each_dim_dtype, ld_mv, team_sum};
use crate::arch::nvptx::{
    block_dim_x, block_idx_x, block_idx_y, dyn_smem_addr, grid_dim_x, ld_shared_f32, st_shared_f32, sync_threads,
    thread_idx_x,
};
use crate::clifford::{
    Algebra, Cl2, Cl3, MAX_C, MAX_G, MAX_TOTAL, Mv, WPERM_GATHER, WPERM_GATHER_T, each_product, fcgp_input_grads,
    norm_backward_coefs, norm_stats, prod_at, through_norm,
};
use crate::element::Element;
use half::{bf16, f16};

/// The raw (un-normalised) FCGP output at `idx` of the GEMM results' planes.
///
/// # Safety
/// `d` covers `C * plane` f32 and `idx < plane`.
#[inline(always)]
unsafe fn raw<A: Algebra>(d: *const f32, plane: usize, idx: usize) -> Mv {
    let mut o = [0.0f32; MAX_C];
    for c in 0..A::C {
        // SAFETY: c < C, idx < plane (caller).
        o[c] = unsafe { *d.add(c * plane + idx) };
    }
    o
}

/// Copies the `W` weight matrices between path order (`n x n` each, tight) and the grouped
/// order of `Tables::gorder` (`ld x ld` each, zero past `n`): [`WPERM_GATHER`], grouped matrix
/// `i` from path `gorder[i]`, padding written as zeros; [`WPERM_GATHER_T`], the same
/// transposed, each grade's block as `ld` rows (output features) of `np * ld` (its paths'
/// input features in turn: the forward GEMM's B read K-major); [`WPERM_SCATTER`], path `gorder[i]` from
/// grouped `i` (untransposed). Block row `blockIdx.y` is grouped position `i`; the x blocks
/// stride over the padded matrix (transposed: over its 32 x 32 tiles, through shared memory so
/// that reads and writes are both row-wise).
///
/// # Safety
/// The grouped side covers `W * ld * ld` elements, the path side `W * n * n`, they do not
/// overlap; `n <= ld`; `gridDim.y == W`; 256 threads per block; transposed, the dynamic shared
/// memory holds `32 * 33` f32.
#[inline(always)]
unsafe fn weight_perm<T: Element, A: Algebra>(src: *const T, dst: *mut T, n: usize, ld: usize, mode: u32) {
    let i = block_idx_y() as usize;
    let (mut p, mut np, mut q) = (0, 1, 0);
    for g in 0..A::W {
        if g == i {
            p = A::T.gorder[g];
            np = A::T.np[A::T.paths[A::T.gorder[g]].1];
            q = A::T.qpos[A::T.gorder[g]];
        }
    }
    let (tight, padded) = (p * n * n, i * ld * ld);
    let tid = thread_idx_x() as usize;
    if mode == WPERM_GATHER_T {
        // Row r of the grade's transposed block is output feature r: `np * ld` long, path q's
        // `ld` inputs at `q * ld` (the grade's blocks start at grouped position i - q).
        let (base, row_len) = ((i - q) * ld * ld + q * ld, np * ld);
        let (tx, ty, tiles) = (tid % 32, tid / 32, ld.div_ceil(32));
        let smem = dyn_smem_addr();
        let at = |r: usize, c: usize| smem + ((r * 33 + c) * 4) as u32;
        let mut t = block_idx_x() as usize;
        // Uniform over the block: every thread reaches both barriers.
        while t < tiles * tiles {
            let (r0, c0) = ((t / tiles) * 32, (t % tiles) * 32);
            for j in 0..4 {
                let (r, c) = (r0 + ty + 8 * j, c0 + tx);
                // SAFETY: read inside the path's n x n matrix; the tile is in shared memory.
                unsafe {
                    let v = if r < n && c < n { (*src.add(tight + r * n + c)).to_f32() } else { 0.0 };
                    st_shared_f32(at(ty + 8 * j, tx), v);
                }
            }
            // SAFETY: uniform loop, every thread is here.
            unsafe { sync_threads() };
            for j in 0..4 {
                let (r, c) = (c0 + ty + 8 * j, r0 + tx);
                if r < ld && c < ld {
                    // SAFETY: inside the grade's np * ld * ld block; the tile is in shared memory.
                    unsafe { *dst.add(base + r * row_len + c) = T::from_f32(ld_shared_f32(at(tx, ty + 8 * j))) };
                }
            }
            // SAFETY: as above, before the tile is overwritten.
            unsafe { sync_threads() };
            t += grid_dim_x() as usize;
        }
        return;
    }
    let mut e = block_idx_x() as usize * block_dim_x() as usize + tid;
    let step = grid_dim_x() as usize * block_dim_x() as usize;
    while e < ld * ld {
        let (r, c) = (e / ld, e % ld);
        let inside = r < n && c < n;
        // SAFETY: i, p < W, e < ld * ld, and r * n + c < n * n when inside (caller's sizes).
        unsafe {
            if mode == WPERM_GATHER {
                *dst.add(padded + e) = if inside { *src.add(tight + r * n + c) } else { T::from_f32(0.0) };
            } else if inside {
                *dst.add(tight + r * n + c) = *src.add(padded + e);
            }
        }
        e += step;
    }
}

/// Norm backward of the FCGP: each block owns one batch row at a time (grid-stride); its
/// threads stride over the features twice (the per-grade sums of squares and `go . o`, a
/// block reduction; then the gradients).
///
/// # Safety
/// `d` and `gd` cover `C * B * ld` (rows of `ld`), `go` `C * B * N`; `blockDim.x` is a
/// power of two (at most 1024); the dynamic shared memory holds the 1024-byte scratch.
#[inline(always)]
unsafe fn norm_bwd<T: Element, A: Algebra>(
    d: *const f32,
    go: *const T,
    gd: *mut T,
    b: usize,
    n: usize,
    ld: usize,
    normalize: bool,
) {
    let (plane, lplane) = (b * n, b * ld);
    let (tid, nt) = (thread_idx_x() as usize, block_dim_x() as usize);
    let mut row = block_idx_x() as usize;
    while row < b {
        let (base, lbase) = (row * n, row * ld);
        let mut inv = [1.0f32; MAX_G];
        let mut k = [0.0f32; MAX_G];
        if normalize {
            let mut acc = [0.0f32; 2 * MAX_G];
            let mut f = tid;
            while f < n {
                let (mut ss, mut dot) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
                // SAFETY: row < B, f < N <= ld.
                let (o, g) = unsafe { (raw::<A>(d, lplane, lbase + f), ld_mv::<T, A, 1>(go, plane, base + f)[0]) };
                norm_stats::<A>(&o, &g, &mut ss, &mut dot);
                for j in 0..MAX_G {
                    acc[j] += ss[j];
                    acc[MAX_G + j] += dot[j];
                }
                f += nt;
            }
            // SAFETY: the row loop is uniform over the block: every thread is here.
            let acc = unsafe { team_sum(acc, nt as u32, A::G) };
            let (mut ss, mut dot) = ([0.0f32; MAX_G], [0.0f32; MAX_G]);
            for j in 0..MAX_G {
                ss[j] = acc[j];
                dot[j] = acc[MAX_G + j];
            }
            (inv, k) = norm_backward_coefs::<A>(&ss, &dot, n);
        }
        let mut f = tid;
        while f < n {
            // SAFETY: as above.
            let gv = unsafe { ld_mv::<T, A, 1>(go, plane, base + f)[0] };
            let g: Mv = if normalize {
                // SAFETY: as above.
                through_norm::<A>(&gv, &unsafe { raw::<A>(d, lplane, lbase + f) }, &inv, &k)
            } else {
                gv
            };
            for c in 0..A::C {
                // SAFETY: c < C, lbase + f < B * ld.
                unsafe { *gd.add(c * lplane + lbase + f) = T::from_f32(g[c]) };
            }
            f += nt;
        }
        row += grid_dim_x() as usize;
    }
}

/// dx, dy of every (row, feature) from the products' gradient (grid-stride).
///
/// # Safety
/// `x`, `y`, `dx`, `dy` cover `C * B * N` elements, `dpr` `total * B * ld` f32; `1 <= n <= ld`.
#[inline(always)]
unsafe fn products_bwd<T: Element, A: Algebra>(
    x: *const T,
    y: *const T,
    dpr: *const f32,
    dx: *mut T,
    dy: *mut T,
    b: usize,
    n: usize,
    ld: usize,
) {
    let plane = b * n;
    let mut idx = block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize;
    let step = grid_dim_x() as usize * block_dim_x() as usize;
    while idx < plane {
        let mut dv = [0.0f32; MAX_TOTAL];
        let (row, f) = (idx / n, idx % n);
        each_product::<A>(|s, p, c| {
            let at = A::T.cstart[c] * b * ld + prod_at::<A>(p, c, row, f, ld);
            // SAFETY: inside the `total * B * ld` products (see `fcgp_products`).
            dv[s] = unsafe { *dpr.add(at) };
        });
        // SAFETY: idx < B * N.
        let (xs, ys) = unsafe { (ld_mv::<T, A, 1>(x, plane, idx)[0], ld_mv::<T, A, 1>(y, plane, idx)[0]) };
        let (a, c) = fcgp_input_grads::<A>(&xs, &ys, &dv);
        for j in 0..A::C {
            // SAFETY: j < C, idx < plane.
            unsafe {
                *dx.add(j * plane + idx) = T::from_f32(a[j]);
                *dy.add(j * plane + idx) = T::from_f32(c[j]);
            }
        }
        idx += step;
    }
}

/// `(src, dst, n, ld, mode)`, `(d, go, gd, b, n, ld, normalize)` and
/// `(x, y, dpr, dx, dy, b, n, ld)`.
macro_rules! fcgp_bwd_entries {
    ($A:ty, $d:literal, $T:ty, $dt:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_clifford_fcgp_wperm_d", $d, "_", $dt))]
            unsafe extern "ptx-kernel" fn wperm(src: *const $T, dst: *mut $T, n: usize, ld: usize, mode: u32) {
                // SAFETY: the host checked sizes and n <= ld, and launches W block rows of 256
                // threads with the shared memory of the transposed mode.
                unsafe { weight_perm::<$T, $A>(src, dst, n, ld, mode) }
            }
            #[unsafe(export_name = concat!("ft_clifford_fcgp_nbwd_d", $d, "_", $dt))]
            unsafe extern "ptx-kernel" fn nbwd(
                d: *const f32,
                go: *const $T,
                gd: *mut $T,
                b: usize,
                n: usize,
                ld: usize,
                normalize: u32,
            ) {
                // SAFETY: the host checked sizes, the block size and the shared memory.
                unsafe { norm_bwd::<$T, $A>(d, go, gd, b, n, ld, normalize != 0) }
            }
            #[unsafe(export_name = concat!("ft_clifford_fcgp_pbwd_d", $d, "_", $dt))]
            unsafe extern "ptx-kernel" fn pbwd(
                x: *const $T,
                y: *const $T,
                dpr: *const f32,
                dx: *mut $T,
                dy: *mut $T,
                b: usize,
                n: usize,
                ld: usize,
            ) {
                // SAFETY: the host checked sizes and 1 <= n <= ld.
                unsafe { products_bwd::<$T, $A>(x, y, dpr, dx, dy, b, n, ld) }
            }
        };
    };
}

each_dim_dtype!(fcgp_bwd_entries);
