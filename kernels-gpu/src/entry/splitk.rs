//! Split-K reduce entry points: `D = epilogue(sum over slices of W[s])` for the f32 partial
//! products the split GEMM left in its workspace, one entry per output dtype
//! (`ft_gemm_splitk_reduce_<out>`). The partial GEMMs themselves are the ordinary GEMM entries.

use crate::arch::nvptx::{block_dim_x, block_idx_x, grid_dim_x, ld_global_v4, thread_idx_x};
use crate::element::Element;
use crate::splitk::finish_element;
use half::{bf16, f16};

/// Grid-stride over groups of 4 adjacent outputs of a row: the slices' values are added in
/// slice order (as `splitk::reduce_element` does), read as one 16-byte load per slice when the
/// whole group exists and `vec` holds, then the epilogue and the cast to `O`.
///
/// # Safety
/// `w` covers `slices` blocks of `m * n` f32 spaced `stride` elements apart; with `vec`, `w` is
/// 16-byte aligned and `n`, `stride` are multiples of 4. `d` (and `c` when flag bit 3 is set)
/// cover `m` rows of `ldc >= n` elements; `bias` covers `n` elements when flag bit 0 is set.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn reduce<O: Element>(
    w: *const f32,
    c: *const O,
    d: *mut O,
    bias: *const O,
    (m, n, ldc): (usize, usize, usize),
    (slices, stride): (usize, usize),
    (alpha, beta, flags): (f32, f32, u32),
) {
    let per_row = n.div_ceil(4);
    let total = m * per_row;
    let vec = n.is_multiple_of(4) && stride.is_multiple_of(4) && (w as usize).is_multiple_of(16);
    let step = grid_dim_x() as usize * block_dim_x() as usize;
    let mut q = block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize;
    while q < total {
        let (i, j0) = (q / per_row, (q % per_row) * 4);
        let valid = if n - j0 < 4 { n - j0 } else { 4 };
        let base = i * n + j0;
        let mut acc = [0.0f32; 4];
        for s in 0..slices {
            // SAFETY: slice s, row i, columns j0..j0 + valid lie inside the workspace.
            let p = unsafe { w.add(s * stride + base) };
            if vec {
                // SAFETY: `vec`: 16-byte aligned (w, stride and n multiples of 4 floats), and
                // n % 4 == 0 means the whole group exists.
                let v = unsafe { ld_global_v4(p as *const u32) };
                for l in 0..4 {
                    acc[l] += f32::from_bits(v[l]);
                }
            } else {
                // A constant trip count with a predicate keeps `acc` in registers (a loop
                // bounded by `valid` indexes it dynamically, in local memory).
                for (l, a) in acc.iter_mut().enumerate() {
                    if l < valid {
                        // SAFETY: l < valid.
                        *a += unsafe { *p.add(l) };
                    }
                }
            }
        }
        for (l, &a) in acc.iter().enumerate() {
            if l >= valid {
                continue;
            }
            let idx = i * ldc + j0 + l;
            // SAFETY: (i, j0 + l) is inside the output; C and bias are read only when enabled.
            let cv = if flags & 8 != 0 { unsafe { (*c.add(idx)).to_f32() } } else { 0.0 };
            let bv = if flags & 1 != 0 { unsafe { (*bias.add(j0 + l)).to_f32() } } else { 0.0 };
            let o = finish_element(a, flags, alpha, beta, cv, bv, O::DTYPE);
            // SAFETY: as above.
            unsafe { *d.add(idx) = O::from_f32(o) };
        }
        q += step;
    }
}

// ABI: (w, c, d, bias, m, n, ldc, slices, slice_stride, alpha, beta, flags); slice_stride in
// f32 elements, flags as the GEMM epilogue's (`Epilogue::flags`).
macro_rules! reduce_entry {
    ($name:literal, $O:ty) => {
        const _: () = {
            #[unsafe(export_name = $name)]
            #[allow(clippy::too_many_arguments)]
            unsafe extern "ptx-kernel" fn entry(
                w: *const f32,
                c: *const $O,
                d: *mut $O,
                bias: *const $O,
                m: u32,
                n: u32,
                ldc: u32,
                slices: u32,
                slice_stride: u64,
                alpha: f32,
                beta: f32,
                flags: u32,
            ) {
                // SAFETY: the host sized the workspace, C, D and bias for these dimensions and
                // passes the epilogue's flags (see `reduce`).
                unsafe {
                    reduce::<$O>(
                        w,
                        c,
                        d,
                        bias,
                        (m as usize, n as usize, ldc as usize),
                        (slices as usize, slice_stride as usize),
                        (alpha, beta, flags),
                    )
                }
            }
        };
    };
}

reduce_entry!("ft_gemm_splitk_reduce_f32", f32);
reduce_entry!("ft_gemm_splitk_reduce_f16", f16);
reduce_entry!("ft_gemm_splitk_reduce_bf16", bf16);
