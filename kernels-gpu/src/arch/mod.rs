//! Device intrinsics, and their host stand-ins where the kernel maths needs one.
//!
//! `cfg(target_arch = "nvptx64")` lives here and in `entry/`; everything else in this crate is
//! plain index maths that the CPU backend and the tests call too.

#[cfg(target_arch = "nvptx64")]
pub mod nvptx;
#[cfg(all(target_arch = "nvptx64", target_feature = "sm_90a"))]
pub mod sm90;
mod stream_store;
#[cfg(all(target_arch = "nvptx64", target_feature = "sm_90a"))]
pub mod wgmma;
pub use stream_store::{store_streaming, streaming_fence};

/// Whether the approximate exponential and reciprocal ([`exp2_approx`], [`recip_ge1`]) flush
/// what would be subnormal to zero and take any argument: true on the GPU (`ex2.approx.ftz`,
/// `rcp.approx.ftz`), where the 16-bit GELU forms skip the clamps that keep the host's
/// intermediates normal (`math::gelu_erf_fast_ftz_with`); false on the host, whose
/// exponential takes arguments in [-125, 127] only.
pub const FLUSHES_SUBNORMALS: bool = cfg!(target_arch = "nvptx64");

/// Fused multiply-add `a * b + c`.
///
/// On the GPU this is one `fma.rn.f32` (LLVM does not contract `a * b + c` by itself). On the
/// host it is a plain multiply and add: `no_std` has no fast portable fma, and a software fma
/// would make the CPU backend several times slower. The two differ by at most one rounding.
#[inline(always)]
pub fn fmaf(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: `fmaf32` has no preconditions; it is an intrinsic only because it is unstable.
        #[allow(unused_unsafe)]
        unsafe {
            core::intrinsics::fmaf32(a, b, c)
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        a * b + c
    }
}

/// How the shared maths does its multiply-adds (`mul_add(a, b, c) = a * b + c`).
///
/// The GELU forms and their exponentials take one as a parameter, so that one source serves
/// the GPU and both host paths: [`Portable`] is [`fmaf`] (fused on the GPU, a multiply then an
/// add on the host); the host's runtime-detected AVX2/AVX-512 loops pass one that is fused (the
/// FMA instruction, vectorised with the loop). The stated error bounds hold for both.
pub trait MulAdd: Copy {
    /// True when `mul_add` rounds once: the maths then takes exact products from it
    /// (`p = a * b`, `mul_add(a, b, -p)` is the error of `p`) instead of splitting operands.
    const FUSED: bool;
    fn mul_add(self, a: f32, b: f32, c: f32) -> f32;
}

/// [`fmaf`]: the GPU's multiply-adds and the host's portable ones. `FUSED` is false even on
/// the GPU, so the GPU keeps the split-operand forms it was checked with.
#[derive(Clone, Copy, Debug, Default)]
pub struct Portable;

impl MulAdd for Portable {
    const FUSED: bool = false;
    #[inline(always)]
    fn mul_add(self, a: f32, b: f32, c: f32) -> f32 {
        fmaf(a, b, c)
    }
}

/// `1 / x` for `x >= 1` (the only use: denominators like `1 + e^{-v}`).
///
/// On the GPU this is `rcp.approx.ftz.f32` (at most about one ulp off, several times cheaper
/// than the IEEE division `div.rn.f32` that `/` compiles to); on the host an exact division.
#[inline(always)]
pub fn recip_ge1(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a register-to-register instruction.
        unsafe {
            core::arch::asm!("rcp.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x,
                             options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        1.0 / x
    }
}

/// `2^x`, approximate, for `x` in [-125, 127] (callers clamp). On the GPU `ex2.approx.ftz.f32`
/// (about 2 ulp); on the host [`crate::math::exp2_poly`] (relative error below 3e-6, a few
/// lane-wise operations). For maths whose result is stored in 16 bits, where neither error is
/// visible.
#[inline(always)]
pub fn exp2_approx(x: f32) -> f32 {
    exp2_approx_with(Portable, x)
}

/// [`exp2_approx`] with the host polynomial's multiply-adds done by `f` (the GPU ignores it).
#[inline(always)]
pub fn exp2_approx_with<F: MulAdd>(f: F, x: f32) -> f32 {
    exp2_approx_mul_with(f, x, 1.0)
}

/// `2^(a b)`, approximate, for `a b` in [-125, 127]: on the GPU `ex2.approx` of the rounded
/// product; on the host [`crate::math::exp2_poly_mul_with`], whose reduction takes the product
/// inside a multiply-add (one rounding and one instruction fewer where `f` is fused).
#[inline(always)]
pub fn exp2_approx_mul_with<F: MulAdd>(f: F, a: f32, b: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let _ = f;
        let x = a * b;
        let r: f32;
        // SAFETY: a register-to-register instruction.
        unsafe {
            core::arch::asm!("ex2.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x,
                             options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::math::exp2_poly_mul_with(f, a, b)
    }
}

/// `n / d` for `d >= 1` and a normal `1 / d`: on the GPU `n` times [`recip_ge1`]'s
/// `rcp.approx` (two roundings and the approximation's ulp), on the host one IEEE division
/// (a 16-lane division costs about what six multiply-adds do, less than a reciprocal
/// refined by Newton steps).
#[inline(always)]
pub fn div_by_ge1(n: f32, d: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        n * recip_ge1(d)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        n / d
    }
}

/// Square root, correctly rounded: `sqrt.rn.f32` on the GPU, the SSE intrinsic on x86-64 and
/// libm's `sqrtf` elsewhere on the host (all correctly rounded), so the backends agree bit for
/// bit. Not libm on x86-64: its inline `sqrtss` is the legacy (non-VEX) encoding, which in
/// the host's AVX-512 loops paid an SSE/AVX transition each call (a third of the Clifford
/// forward's time at N = 128, where each row takes three).
#[inline(always)]
pub fn sqrt(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a register-to-register instruction.
        unsafe {
            core::arch::asm!("sqrt.rn.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x,
                             options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_cvtss_f32, _mm_set_ss, _mm_sqrt_ss};
        // SAFETY: SSE is part of every x86-64 CPU; the intrinsics are register operations
        // that the compiler encodes for the calling function's features (VEX under AVX).
        unsafe { _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(x))) }
    }
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "x86_64")))]
    {
        libm::sqrtf(x)
    }
}

/// `1 / sqrt(x)` for a normal positive `x`: on the GPU one `rsqrt.approx` (relative error
/// below about 2^-22.9), on the host `1 / `[`sqrt`] (two roundings). For per-row scales
/// (the Clifford norm), where a correctly rounded division and square root cost some 30
/// instructions each on the GPU.
#[inline(always)]
pub fn rsqrt(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a register-to-register instruction.
        unsafe {
            core::arch::asm!("rsqrt.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x,
                             options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        1.0 / sqrt(x)
    }
}

/// Asks the CPU to bring the cache line holding `v` into its nearest cache (x86-64:
/// `prefetcht0`); nothing on other targets. A hint: it never faults and changes no value.
///
/// The host's Clifford row loops read 8 to 24 component streams and write 4 to 16 at once,
/// each a new 4 KiB page every row at N = 1024, where the hardware prefetchers start over: the
/// loops prefetch their next blocks themselves (see `clifford::cpu`).
#[inline(always)]
pub fn prefetch<T>(v: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch has no architectural effect and cannot fault; `v` is a valid
        // reference anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((v as *const T).cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = v;
    }
}
