//! Streaming (non-temporal) stores for the host's row loops, behind one safe wrapper.
//!
//! A row loop that writes an output much larger than the caches pays twice for each line it
//! stores with ordinary stores: the line is first read for ownership, then written back. The
//! x86_64 non-temporal store (`movntdq`) writes whole lines through write-combining buffers
//! without reading them. Measured on the CPU Clifford forward as landed (bench/NOTES.md,
//! "Streaming stores for the CPU Clifford forward, landed"): 0.95-0.96x the wall time at
//! 1024 x 1024. Other targets get a plain copy.

use crate::element::Element;

/// Bytes of a cache line: the unit the streaming stores write whole.
const LINE: usize = 64;

/// Copies `src` into `dst` (same length), with non-temporal stores where the target has them:
/// on x86_64 the whole 64-byte cache lines `dst` covers are streamed, the ragged head and tail
/// (under a line each) copied with ordinary stores; elsewhere a plain copy. Only whole lines
/// stream: a line written partly by streaming stores (or by both kinds) goes to memory as a
/// partial write, which took a row loop of unaligned 777-feature rows 4.5x longer. The stores
/// are weakly ordered: the thread that made them calls [`streaming_fence`] before another
/// thread may read `dst`.
///
/// # Panics
/// When the lengths differ (as `copy_from_slice`).
#[inline(always)]
pub fn store_streaming<T: Element>(dst: &mut [T], src: &[T]) {
    assert_eq!(dst.len(), src.len(), "store_streaming: lengths differ");
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let size = core::mem::size_of::<T>();
        // Elements before the first line boundary (an element never straddles one: sizes are
        // 2 or 4 and `dst` is aligned to its element).
        let head = ((LINE - dst.as_ptr() as usize % LINE) % LINE / size).min(dst.len());
        let lines = (dst.len() - head) * size / LINE;
        let tail = head + lines * LINE / size;
        let (d, s) = (dst[head..].as_mut_ptr().cast::<__m128i>(), src[head..].as_ptr().cast::<__m128i>());
        for q in 0..lines * LINE / 16 {
            // SAFETY: `Element` types (f32, f16, bf16) are plain bits with no padding, so
            // every byte of `src` is initialised; vector `q` lies inside `head..tail` of both
            // slices; the load is unaligned, the store is 16-byte aligned (`head` reaches a
            // line boundary); SSE2 is part of x86_64.
            unsafe { _mm_stream_si128(d.add(q), _mm_loadu_si128(s.add(q))) }
        }
        dst[..head].copy_from_slice(&src[..head]);
        dst[tail..].copy_from_slice(&src[tail..]);
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

/// Orders this thread's earlier [`store_streaming`] stores before its later stores (`sfence`
/// on x86_64, nothing elsewhere), so that a thread which synchronises with it afterwards (a
/// join, a channel) sees them. Call it once after a batch of streaming stores.
#[inline(always)]
pub fn streaming_fence() {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `sfence` has no operands and no preconditions; SSE is part of x86_64.
        unsafe { core::arch::x86_64::_mm_sfence() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    #[test]
    fn copies_every_element_aligned_or_not() {
        // A line-aligned buffer written at every offset within a line and lengths with and
        // without whole lines: the lines stream, heads and tails copy; all must equal the source.
        #[repr(align(64))]
        struct Lines([[f32; 16]; 5]);
        let src: [f32; 70] = core::array::from_fn(|i| i as f32 * 1.5 - 7.0);
        for at in 0..16 {
            for len in [0usize, 1, 3, 4, 15, 16, 17, 33, 48, 64] {
                let mut lines = Lines([[f32::NAN; 16]; 5]);
                let buf = &mut lines.0;
                let flat: &mut [f32] = buf.as_flattened_mut();
                store_streaming(&mut flat[at..at + len], &src[..len]);
                streaming_fence();
                assert_eq!(&flat[at..at + len], &src[..len], "offset {at}, length {len}");
                assert!(flat[..at].iter().chain(&flat[at + len..]).all(|v| v.is_nan()), "wrote outside");
            }
        }
        #[repr(align(64))]
        struct Lines16([[bf16; 32]; 3]);
        let s16: [bf16; 70] = core::array::from_fn(|i| bf16::from_f32(i as f32 - 3.25));
        let mut d16 = Lines16([[bf16::ZERO; 32]; 3]);
        let flat = d16.0.as_flattened_mut();
        store_streaming(&mut flat[8..78], &s16);
        streaming_fence();
        assert_eq!(&flat[8..78], &s16);
        assert!(flat[..8].iter().chain(&flat[78..]).all(|v| *v == bf16::ZERO));
    }
}
