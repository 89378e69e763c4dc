//! Hardware f32 → bf16 rounding for the CPU backend's widened elementwise path (x86
//! AVX512-BF16: `vcvtneps2bf16`, 16 lanes in one instruction where the portable round-to-nearest
//! with its NaN select takes about nine). The instruction rounds to nearest even and makes NaN
//! quiet keeping the top of its payload, as `kernels-gpu`'s portable conversion does, but it
//! flushes subnormal inputs to zero: a block of 16 with a subnormal lane takes the portable
//! conversion instead (one class test per 16 lanes), so the results are the same bits
//! (`tests::the_hardware_rounding_matches_the_portable_one`). Widening is a shift either way.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use ferrotune_kernels::elementwise::{PortableWiden, Widen};
use half::bf16;

/// `vfpclassps` class bits: positive and negative denormal.
const DENORMAL: i32 = 0x20;

/// AVX512-BF16 rounding (16 lanes). Only built by code that checked `avx512f`, `avx512bf16`
/// and `avx512dq` (`new`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bf16Avx512(());

impl Bf16Avx512 {
    /// The converter where this CPU has the instructions (checked once by std's detection).
    pub(crate) fn detect() -> Option<Bf16Avx512> {
        let has = std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bf16")
            && std::arch::is_x86_feature_detected!("avx512dq");
        has.then_some(Bf16Avx512(()))
    }
}

#[target_feature(enable = "avx512f,avx512bf16,avx512dq")]
fn narrow16(src: &[f32], dst: &mut [bf16]) {
    let n = src.len().min(dst.len());
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: i + 16 <= n keeps the 16-lane load and store inside the slices; unaligned
        // forms; `__m256bh` and `__m256i` are the same 256 bits.
        let subnormal = unsafe {
            let v = _mm512_loadu_ps(src.as_ptr().add(i));
            let h: __m256i = std::mem::transmute(_mm512_cvtneps_pbh(v));
            _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast(), h);
            _mm512_fpclass_ps_mask::<DENORMAL>(v) != 0
        };
        if subnormal {
            PortableWiden.narrow(&src[i..i + 16], &mut dst[i..i + 16]);
        }
        i += 16;
    }
    PortableWiden.narrow(&src[i..n], &mut dst[i..n]);
}

impl Widen<bf16> for Bf16Avx512 {
    #[inline(always)]
    fn widen(self, src: &[bf16], dst: &mut [f32]) {
        // The top half of an f32: the portable loop is already a vector shift.
        PortableWiden.widen(src, dst)
    }
    #[inline(always)]
    fn narrow(self, src: &[f32], dst: &mut [bf16]) {
        // SAFETY: a Bf16Avx512 exists only where the features were detected (`detect`).
        unsafe { narrow16(src, dst) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the portable rounding, bit for bit: f32 values on a walk through the bit
    /// patterns plus the edges (ties, overflow, subnormals, NaN), at every offset in a block of
    /// 16 and with a subnormal in some blocks only.
    #[test]
    fn the_hardware_rounding_matches_the_portable_one() {
        let Some(c) = Bf16Avx512::detect() else {
            println!("skipped: this CPU lacks AVX512-BF16");
            return;
        };
        let edges = [3.3895314e38f32, 3.4028235e38, 1.0039062, 1.0039063, 1.0117188, 1e-39, 1e-45, 1.1754942e-38];
        let f32s: Vec<f32> = (0..u32::MAX / 7919)
            .map(|i| i * 7919)
            .chain(edges.iter().map(|e| e.to_bits()))
            .flat_map(|b| [b, b ^ 0x8000_0000, b | 0x7fff, b & !0xffff | 0x8000])
            .map(f32::from_bits)
            .collect();
        for start in [0, 1, 15, 16, 17] {
            let src = &f32s[start..];
            let (mut want, mut got) = (vec![bf16::ZERO; src.len()], vec![bf16::ZERO; src.len()]);
            PortableWiden.narrow(src, &mut want);
            c.narrow(src, &mut got);
            for ((w, g), f) in want.iter().zip(&got).zip(src) {
                assert_eq!(w.to_bits(), g.to_bits(), "narrowing {f:e} ({:#x})", f.to_bits());
            }
        }
        // A run of normal values only (every block through the instruction) matches too.
        let normal: Vec<f32> = (1..4099).map(|i| i as f32 * 0.37 - 700.0).collect();
        let (mut want, mut got) = (vec![bf16::ZERO; normal.len()], vec![bf16::ZERO; normal.len()]);
        PortableWiden.narrow(&normal, &mut want);
        c.narrow(&normal, &mut got);
        assert!(want.iter().zip(&got).all(|(w, g)| w.to_bits() == g.to_bits()));
        // And widening is exact.
        let mut back = vec![0f32; normal.len()];
        c.widen(&got, &mut back);
        assert!(back.iter().zip(&got).all(|(b, g)| b.to_bits() == g.to_f32().to_bits()));
    }
}
