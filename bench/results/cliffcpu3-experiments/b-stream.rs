//! Streaming (non-temporal) stores for the CPU row loops' large outputs (experiment b of
//! bench/results/cliffcpu3-clifford-cpu.json, as kernels-gpu/src/arch/stream.rs; not kept).

/// Copies `src` into `dst` (the shorter length) with streaming stores where the target has
/// them (x86-64: 16-byte `movntdq` for the aligned middle, ordinary stores for the ends).
#[inline(always)]
pub fn stream_copy<T: Copy>(dst: &mut [T], src: &[T]) {
    let n = dst.len().min(src.len());
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let size = core::mem::size_of::<T>();
        if size > 0 && 16 % size == 0 {
            let per = 16 / size;
            let head = (((16 - dst.as_ptr() as usize % 16) % 16) / size).min(n);
            dst[..head].copy_from_slice(&src[..head]);
            let body = (n - head) / per;
            for v in 0..body {
                let at = head + v * per;
                // SAFETY: `at + per <= n` elements lie in both slices; `dst + at` is 16-byte
                // aligned (the head ends at a boundary); the load is unaligned.
                unsafe {
                    let v = _mm_loadu_si128(src.as_ptr().add(at).cast::<__m128i>());
                    _mm_stream_si128(dst.as_mut_ptr().add(at).cast::<__m128i>(), v);
                }
            }
            let done = head + body * per;
            dst[done..n].copy_from_slice(&src[done..n]);
            return;
        }
    }
    dst[..n].copy_from_slice(&src[..n]);
}

/// `sfence` after the streaming stores of a call.
#[inline(always)]
pub fn stream_fence() {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `sfence` only orders stores.
        unsafe { core::arch::x86_64::_mm_sfence() }
    }
}
