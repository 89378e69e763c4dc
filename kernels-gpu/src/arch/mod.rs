//! Device intrinsics, and their host stand-ins where the kernel maths needs one.
//!
//! `cfg(target_arch = "nvptx64")` lives here and in `entry/`; everything else in this crate is
//! plain index maths that the CPU backend and the tests call too.

#[cfg(target_arch = "nvptx64")]
pub mod nvptx;

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
