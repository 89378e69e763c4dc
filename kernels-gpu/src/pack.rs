//! Packing of operands whose rows are not 16-byte aligned (odd K, odd leading dimensions, views
//! at odd offsets) into an aligned, zero-padded K-contiguous copy, so the GEMM runs its fast
//! 16-byte tiles on it: the packed layout and the index maths shared by the pack kernel
//! (`entry/pack.rs`), the host and the tests. 16-bit inputs and f32 (for TF32) are packed.

/// Elements the packed leading dimension is a multiple of (16 bytes of 16-bit data, 32 of f32).
pub const K_ALIGN: usize = 8;
/// Threads per block of the pack kernel.
pub const THREADS: u32 = 256;

/// Leading dimension of a packed copy of K = `k`: `k` rounded up to [`K_ALIGN`] (at least one
/// group).
pub const fn packed_ld(k: usize) -> usize {
    let g = k.div_ceil(K_ALIGN);
    (if g == 0 { 1 } else { g }) * K_ALIGN
}

/// Copies of x the small-M family reads beside a weight in interleaved slabs (`gemv::slab_row`),
/// one per misalignment a slab can have: copy `s` holds x shifted right by `s` elements.
pub const SHIFTS: usize = 8;

/// Leading dimension of the shifted copies of K = `k`: room for the longest frame (`k + 7`),
/// a multiple of [`K_ALIGN`].
pub const fn shifted_ld(k: usize) -> usize {
    packed_ld(k + SHIFTS - 1)
}

/// Element `f` of row `row` of shifted copy `s`: x's element `f - s` of that row, or `None`
/// (zero) before the row's start or past K.
#[inline(always)]
pub const fn shifted_k(f: usize, s: usize, k: usize) -> Option<usize> {
    if f >= s && f - s < k { Some(f - s) } else { None }
}

/// Elements between the packed A and the packed B in one workspace (A's size rounded up to 128
/// elements: 256 bytes of 16-bit data, 512 of f32, so B starts 16-byte aligned).
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
    fn shifted_copies_hold_every_element_once_at_its_shift() {
        for k in [0usize, 1, 7, 777, 4099] {
            let ld = shifted_ld(k);
            assert!(ld.is_multiple_of(K_ALIGN) && ld >= k + SHIFTS - 1);
            for s in 0..SHIFTS {
                let got: vec::Vec<usize> = (0..ld).filter_map(|f| shifted_k(f, s, k)).collect();
                assert_eq!(got, (0..k).collect::<vec::Vec<_>>(), "k {k} shift {s}");
                assert!((0..s).all(|f| shifted_k(f, s, k).is_none()));
            }
        }
    }

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
