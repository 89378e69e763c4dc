//! Packing of operands whose rows are not 16-byte aligned (odd K, odd leading dimensions, views
//! at odd offsets) into an aligned, zero-padded K-contiguous copy, so the GEMM runs its fast
//! 16-byte tiles on it: the packed layout and the index maths shared by the pack kernel
//! (`entry/pack.rs`), the host and the tests.

/// Elements the packed leading dimension is a multiple of (16 bytes of 16-bit data).
pub const K_ALIGN: usize = 8;
/// Threads per block of the pack kernel.
pub const THREADS: u32 = 256;

/// Leading dimension of a packed copy of K = `k`: `k` rounded up to [`K_ALIGN`] (at least one
/// group).
pub const fn packed_ld(k: usize) -> usize {
    let g = k.div_ceil(K_ALIGN);
    (if g == 0 { 1 } else { g }) * K_ALIGN
}

/// Elements between the packed A and the packed B in one workspace (A's size rounded up to 256
/// bytes of 16-bit data, so B starts 16-byte aligned).
pub const fn b_offset(m: usize, k: usize) -> usize {
    (m * packed_ld(k)).div_ceil(128) * 128
}

/// Source index of element (`row`, `kk`) of an operand seen as `rows x K` (row = M for A, N for
/// B): K-contiguous (`kcol == false`) at `row * ld + kk`, else at `kk * ld + row`.
#[inline(always)]
pub const fn source_index(row: usize, kk: usize, ld: usize, kcol: bool) -> usize {
    if kcol { kk * ld + row } else { row * ld + kk }
}

/// Writes the packed copy on the CPU (reference for the tests): `dst[row * ldp + kk]` for every
/// row and kk < ldp, zero where kk >= k.
pub fn pack_cpu<T: Copy + Default>(src: &[T], rows: usize, k: usize, ld: usize, kcol: bool, dst: &mut [T]) {
    let ldp = packed_ld(k);
    for row in 0..rows {
        for kk in 0..ldp {
            dst[row * ldp + kk] = if kk < k { src[source_index(row, kk, ld, kcol)] } else { T::default() };
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;

    #[test]
    fn packed_rows_are_16_byte_multiples_and_cover_k() {
        for k in [0usize, 1, 7, 8, 9, 777, 4099] {
            let l = packed_ld(k);
            assert!(l.is_multiple_of(K_ALIGN) && l >= k && l < k + K_ALIGN + 8 * (k == 0) as usize);
        }
        assert!(b_offset(3, 777).is_multiple_of(128) && b_offset(3, 777) >= 3 * packed_ld(777));
    }

    #[test]
    fn pack_cpu_transposes_and_pads() {
        // 2 rows x K = 3, stored K-major (kcol) with ld 5: element (r, kk) at kk * 5 + r.
        let src: vec::Vec<u32> = (0..15).collect();
        let mut dst = vec![99u32; 2 * 8];
        pack_cpu(&src, 2, 3, 5, true, &mut dst);
        assert_eq!(&dst[..8], &[0, 5, 10, 0, 0, 0, 0, 0]);
        assert_eq!(&dst[8..], &[1, 6, 11, 0, 0, 0, 0, 0]);
    }
}
