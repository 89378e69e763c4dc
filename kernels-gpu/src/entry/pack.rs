//! Pack entry points (`ft_pack_k_<dtype>` and the shifted copies of x, `ft_pack_shift_<dtype>`,
//! see `pack.rs`): a grid-stride loop over groups of 8 packed elements, each read element by
//! element from the source layout (zero outside the row) and written as one 16-byte store (two
//! for f32).

use crate::arch::nvptx::{block_dim_x, block_idx_x, grid_dim_x, st_global_v4, thread_idx_x};
use crate::pack::{K_ALIGN, SHIFTS, packed_ld, shifted_k, shifted_ld, source_index};
use half::{bf16, f16};

/// `shifts` copies of `rows x k` at leading dimension `ldp`: copy `s`, row `r` holds the row's
/// element `f - s` at `f` (`pack::shifted_k`; `shifts` 1: the plain packed copy).
///
/// # Safety
/// `src` covers `rows x k` at `ld` (`kcol` as in `pack::source_index`); `dst` is 16-byte
/// aligned and holds `shifts * rows * ldp` elements; `ldp` is a multiple of 8 and at least
/// `k + shifts - 1`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn pack<T: Copy + Into<u16Bits>>(
    src: *const T,
    dst: *mut u16,
    rows: usize,
    k: usize,
    ld: usize,
    kcol: bool,
    shifts: usize,
    ldp: usize,
) {
    let groups = ldp / K_ALIGN;
    let total = shifts * rows * groups;
    let step = grid_dim_x() as usize * block_dim_x() as usize;
    let mut q = block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize;
    while q < total {
        let (copy_row, k0) = (q / groups, (q % groups) * K_ALIGN);
        let (s, row) = (copy_row / rows, copy_row % rows);
        let mut w = [0u32; 4];
        for (e, wd) in w.iter_mut().enumerate() {
            for h in 0..2 {
                if let Some(kk) = shifted_k(k0 + 2 * e + h, s, k) {
                    // SAFETY: (row, kk) lies inside the source (kk < k).
                    let v: u16Bits = unsafe { *src.add(source_index(row, kk, ld, kcol)) }.into();
                    *wd |= (v.0 as u32) << (16 * h);
                }
            }
        }
        // SAFETY: the group lies inside `dst` (copy_row < shifts * rows, k0 + 8 <= ldp),
        // 16-byte aligned.
        unsafe { st_global_v4(dst.add(copy_row * ldp + k0) as *mut u32, w) };
        q += step;
    }
}

/// The f32 form of [`pack`] (one copy, no shift): each group of 8 packed elements is two
/// 16-byte stores.
///
/// # Safety
/// `src` covers `rows x k` at `ld` (`kcol` as in `pack::source_index`); `dst` is 16-byte
/// aligned and holds `rows * packed_ld(k)` elements.
#[inline(always)]
unsafe fn pack_f32(src: *const f32, dst: *mut u32, rows: usize, k: usize, ld: usize, kcol: bool) {
    let ldp = packed_ld(k);
    let groups = ldp / K_ALIGN;
    let total = rows * groups;
    let step = grid_dim_x() as usize * block_dim_x() as usize;
    let mut q = block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize;
    while q < total {
        let (row, k0) = (q / groups, (q % groups) * K_ALIGN);
        let mut w = [[0u32; 4]; 2];
        for (h, half) in w.iter_mut().enumerate() {
            for (e, wd) in half.iter_mut().enumerate() {
                let kk = k0 + 4 * h + e;
                if kk < k {
                    // SAFETY: (row, kk) lies inside the source (kk < k).
                    *wd = unsafe { *src.add(source_index(row, kk, ld, kcol)) }.to_bits();
                }
            }
        }
        // SAFETY: the group lies inside `dst` (row < rows, k0 + 8 <= ldp); `ldp` is a multiple
        // of 8, so both halves are 16-byte aligned.
        unsafe {
            st_global_v4(dst.add(row * ldp + k0), w[0]);
            st_global_v4(dst.add(row * ldp + k0 + 4), w[1]);
        }
        q += step;
    }
}

/// Bits of a 16-bit element.
#[allow(non_camel_case_types)]
struct u16Bits(u16);

impl From<bf16> for u16Bits {
    #[inline(always)]
    fn from(v: bf16) -> u16Bits {
        u16Bits(v.to_bits())
    }
}

impl From<f16> for u16Bits {
    #[inline(always)]
    fn from(v: f16) -> u16Bits {
        u16Bits(v.to_bits())
    }
}

// ABI: (src, dst, rows, k, ld, kcol).
macro_rules! pack_entry {
    ($name:literal, $T:ty) => {
        const _: () = {
            #[unsafe(export_name = $name)]
            unsafe extern "ptx-kernel" fn entry(src: *const $T, dst: *mut u16, rows: u32, k: u32, ld: u32, kcol: u32) {
                let k = k as usize;
                // SAFETY: the host sized and aligned the workspace and checked the source.
                unsafe { pack::<$T>(src, dst, rows as usize, k, ld as usize, kcol != 0, 1, packed_ld(k)) }
            }
        };
    };
}

// ABI: (src, dst, rows, k, ld): the `pack::SHIFTS` shifted copies of a K-contiguous x at
// `pack::shifted_ld(k)`.
macro_rules! shift_entry {
    ($name:literal, $T:ty) => {
        const _: () = {
            #[unsafe(export_name = $name)]
            unsafe extern "ptx-kernel" fn entry(src: *const $T, dst: *mut u16, rows: u32, k: u32, ld: u32) {
                let k = k as usize;
                // SAFETY: the host sized and aligned the workspace and checked the source.
                unsafe { pack::<$T>(src, dst, rows as usize, k, ld as usize, false, SHIFTS, shifted_ld(k)) }
            }
        };
    };
}

// ABI as `pack_entry!`: (src, dst, rows, k, ld, kcol).
#[unsafe(export_name = "ft_pack_k_f32")]
unsafe extern "ptx-kernel" fn pack_k_f32(src: *const f32, dst: *mut u32, rows: u32, k: u32, ld: u32, kcol: u32) {
    // SAFETY: the host sized and aligned the workspace and checked the source.
    unsafe { pack_f32(src, dst, rows as usize, k as usize, ld as usize, kcol != 0) }
}

pack_entry!("ft_pack_k_bf16", bf16);
pack_entry!("ft_pack_k_f16", f16);
shift_entry!("ft_pack_shift_bf16", bf16);
shift_entry!("ft_pack_shift_f16", f16);
