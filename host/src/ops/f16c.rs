//! Hardware f16 ⇄ f32 conversions for the CPU backend's widened elementwise path (x86 F16C:
//! 8 lanes with AVX2, 16 with AVX-512F): one instruction per vector where the portable
//! bit manipulation takes about twelve. IEEE conversions, so the results are the same bits
//! as `kernels-gpu`'s portable ones (round to nearest even; NaN made quiet with its top payload
//! kept), which `tests::hardware_conversions_match_the_portable_ones` checks over every f16
//! and a walk through the f32 bit patterns.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use ferrotune_kernels::elementwise::{PortableWiden, Widen};
use half::f16;

/// Round to nearest even (the F16C immediate: 3 bits, not MXCSR's mode).
const NEAREST_F16C: i32 = _MM_FROUND_TO_NEAREST_INT;
/// Round to nearest even, exceptions suppressed (the AVX-512 form's immediate).
const NEAREST_AVX512: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

/// F16C through AVX2 registers (8 lanes). Only built by code that checked `avx2` and `f16c`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct F16cAvx2(());

impl F16cAvx2 {
    /// # Safety
    /// The CPU must support AVX2 and F16C.
    pub(crate) unsafe fn new() -> F16cAvx2 {
        F16cAvx2(())
    }
}

/// F16C through AVX-512 registers (16 lanes). Only built by code that checked `avx512f`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct F16cAvx512(());

impl F16cAvx512 {
    /// # Safety
    /// The CPU must support AVX-512F.
    pub(crate) unsafe fn new() -> F16cAvx512 {
        F16cAvx512(())
    }
}

#[target_feature(enable = "avx2,f16c")]
fn widen8(src: &[f16], dst: &mut [f32]) {
    let n = src.len().min(dst.len());
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n keeps both 8-lane accesses inside the slices; unaligned forms.
        unsafe {
            let h = _mm_loadu_si128(src.as_ptr().add(i).cast());
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
        }
        i += 8;
    }
    PortableWiden.widen(&src[i..n], &mut dst[i..n]);
}

#[target_feature(enable = "avx2,f16c")]
fn narrow8(src: &[f32], dst: &mut [f16]) {
    let n = src.len().min(dst.len());
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n keeps both 8-lane accesses inside the slices; unaligned forms.
        unsafe {
            let h = _mm256_cvtps_ph::<NEAREST_F16C>(_mm256_loadu_ps(src.as_ptr().add(i)));
            _mm_storeu_si128(dst.as_mut_ptr().add(i).cast(), h);
        }
        i += 8;
    }
    PortableWiden.narrow(&src[i..n], &mut dst[i..n]);
}

#[target_feature(enable = "avx512f")]
fn widen16(src: &[f16], dst: &mut [f32]) {
    let n = src.len().min(dst.len());
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: i + 16 <= n keeps both 16-lane accesses inside the slices; unaligned forms.
        unsafe {
            let h = _mm256_loadu_si256(src.as_ptr().add(i).cast());
            _mm512_storeu_ps(dst.as_mut_ptr().add(i), _mm512_cvtph_ps(h));
        }
        i += 16;
    }
    PortableWiden.widen(&src[i..n], &mut dst[i..n]);
}

#[target_feature(enable = "avx512f")]
fn narrow16(src: &[f32], dst: &mut [f16]) {
    let n = src.len().min(dst.len());
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: i + 16 <= n keeps both 16-lane accesses inside the slices; unaligned forms.
        unsafe {
            let h = _mm512_cvtps_ph::<NEAREST_AVX512>(_mm512_loadu_ps(src.as_ptr().add(i)));
            _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast(), h);
        }
        i += 16;
    }
    PortableWiden.narrow(&src[i..n], &mut dst[i..n]);
}

impl Widen<f16> for F16cAvx2 {
    #[inline(always)]
    fn widen(self, src: &[f16], dst: &mut [f32]) {
        // SAFETY: an F16cAvx2 exists only where AVX2 and F16C were detected (`new`).
        unsafe { widen8(src, dst) }
    }
    #[inline(always)]
    fn narrow(self, src: &[f32], dst: &mut [f16]) {
        // SAFETY: as in `widen`.
        unsafe { narrow8(src, dst) }
    }
}

impl Widen<f16> for F16cAvx512 {
    #[inline(always)]
    fn widen(self, src: &[f16], dst: &mut [f32]) {
        // SAFETY: an F16cAvx512 exists only where AVX-512F was detected (`new`).
        unsafe { widen16(src, dst) }
    }
    #[inline(always)]
    fn narrow(self, src: &[f32], dst: &mut [f16]) {
        // SAFETY: as in `widen`.
        unsafe { narrow16(src, dst) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both widths against the portable conversions, bit for bit: every f16, and f32 values on
    /// a walk through the bit patterns plus the rounding edges (ties, overflow, subnormals, NaN).
    #[test]
    fn hardware_conversions_match_the_portable_ones() {
        let every_f16: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
        let edges = [65504.0f32, 65519.99, 65520.0, 6.1035156e-5, 6.097555e-5, 5.9604645e-8, 2.9802322e-8];
        let f32s: Vec<f32> = (0..u32::MAX / 7919)
            .map(|i| i * 7919)
            .chain(edges.iter().map(|e| e.to_bits()))
            .flat_map(|b| [b, b ^ 0x8000_0000, b | 0x1fff, b & !0x1fff | 0x1000])
            .map(f32::from_bits)
            .collect();
        let check = |name: &str, widen: &dyn Fn(&[f16], &mut [f32]), narrow: &dyn Fn(&[f32], &mut [f16])| {
            let (mut want, mut got) = (vec![0f32; every_f16.len()], vec![0f32; every_f16.len()]);
            PortableWiden.widen(&every_f16, &mut want);
            widen(&every_f16, &mut got);
            let same = |a: f32, b: f32| a.to_bits() == b.to_bits();
            assert!(want.iter().zip(&got).all(|(&a, &b)| same(a, b)), "{name}: widening differs");
            let (mut want, mut got) = (vec![f16::ZERO; f32s.len()], vec![f16::ZERO; f32s.len()]);
            PortableWiden.narrow(&f32s, &mut want);
            narrow(&f32s, &mut got);
            for ((w, g), f) in want.iter().zip(&got).zip(&f32s) {
                assert_eq!(w.to_bits(), g.to_bits(), "{name}: narrowing {f:e} ({:#x})", f.to_bits());
            }
        };
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c") {
            // SAFETY: detected just above.
            let c = unsafe { F16cAvx2::new() };
            check("avx2", &|s, d| c.widen(s, d), &|s, d| c.narrow(s, d));
        } else {
            println!("avx2 + f16c: skipped: this CPU lacks them");
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: detected just above.
            let c = unsafe { F16cAvx512::new() };
            check("avx512", &|s, d| c.widen(s, d), &|s, d| c.narrow(s, d));
        } else {
            println!("avx512f: skipped: this CPU lacks it");
        }
    }
}
