//! Element types the kernels work on (f32, f16, bf16): conversion to and from the f32 the maths
//! is done in, and the packing of a 16-byte vector into lanes.

use half::{bf16, f16};

/// The dtype tag used in entry-point names, profiles and error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    Bf16,
}

impl DType {
    pub const ALL: [DType; 3] = [DType::F32, DType::F16, DType::Bf16];

    /// Short name used in entry points and on the command line (`f32`, `f16`, `bf16`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
        }
    }

    pub const fn size_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::Bf16 => 2,
        }
    }

    /// Lanes in one 16-byte vector.
    pub const fn lanes(self) -> usize {
        16 / self.size_bytes()
    }
}

/// f16 bits to f32, exactly, by integer and one float operation per path and selects (no
/// branches, so a loop over lanes vectorises): normals rebias the exponent, subnormals are
/// normalised by a float subtraction, inf and NaN keep their payload (NaN made quiet).
#[inline(always)]
pub fn f16_bits_to_f32(h: u16) -> f32 {
    let h = h as u32;
    let sign = (h & 0x8000) << 16;
    let em = h & 0x7fff;
    let shifted = em << 13;
    let exp = shifted & 0x0f80_0000; // the f16 exponent field, in f32 position
    let normal = shifted + 0x3800_0000; // exponent + (127 - 15)
    let infnan = (normal + 0x3800_0000) | if em > 0x7c00 { 0x0040_0000 } else { 0 };
    // 2^-14 (1 + m) - 2^-14 = 2^-14 m: the subnormal's value, exactly.
    let sub = (f32::from_bits(normal + 0x0080_0000) - f32::from_bits(0x3880_0000)).to_bits();
    let o = if exp == 0x0f80_0000 {
        infnan
    } else if exp == 0 {
        sub
    } else {
        normal
    };
    f32::from_bits(o | sign)
}

/// f32 to f16 bits, round to nearest even, branch-free (see [`f16_bits_to_f32`]): overflow
/// gives inf, NaN a quiet NaN with the top of its payload, subnormals come from one float
/// addition that rounds at the subnormal quantum.
#[inline(always)]
pub fn f32_to_f16_bits(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = x & 0x8000_0000;
    let a = x ^ sign;
    let infnan = if a > 0x7f80_0000 { 0x7e00 | ((a >> 13) & 0x3ff) } else { 0x7c00 };
    // |f| + 0.5 rounds |f| to a multiple of 2^-24 (the subnormal quantum) in one addition.
    const HALF: u32 = 0x3f00_0000;
    let sub = (f32::from_bits(a) + f32::from_bits(HALF)).to_bits().wrapping_sub(HALF);
    // Rebias the exponent, add just under half an ulp plus the kept lsb (ties to even).
    let norm = a.wrapping_sub(0x3800_0000).wrapping_add(0x0fff + ((a >> 13) & 1)) >> 13;
    let o = if a >= 0x4780_0000 {
        infnan
    } else if a < 0x3880_0000 {
        sub
    } else {
        norm
    };
    (o | (sign >> 16)) as u16
}

/// f32 to bf16 bits, round to nearest even, branch-free; NaN stays a (quiet) NaN.
#[inline(always)]
pub fn f32_to_bf16_bits(f: f32) -> u16 {
    let x = f.to_bits();
    let rounded = x.wrapping_add(0x7fff + ((x >> 16) & 1)) >> 16;
    let o = if x & 0x7fff_ffff > 0x7f80_0000 { (x >> 16) | 0x40 } else { rounded };
    o as u16
}

/// A storage type: loaded, converted to f32, computed on, converted back.
pub trait Element: Copy + Send + Sync + 'static {
    const DTYPE: DType;
    /// One 16-byte vector of this type, as lanes.
    type Vec16: Copy + AsRef<[Self]> + AsMut<[Self]>;
    fn to_f32(self) -> f32;
    /// Round to nearest even.
    fn from_f32(v: f32) -> Self;
    fn from_words(w: [u32; 4]) -> Self::Vec16;
    fn to_words(v: Self::Vec16) -> [u32; 4];
    /// A 16-bit type: `lo` and `hi` rounded to nearest even and packed into one word, `lo` in
    /// the low half (as the pair sits in memory) — one `cvt.rn.{bf16,f16}x2.f32` on the GPU.
    /// f32: `lo`'s bits (a 32-bit type has no pair in a word).
    fn pack2_f32(lo: f32, hi: f32) -> u32;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    type Vec16 = [f32; 4];
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn from_words(w: [u32; 4]) -> [f32; 4] {
        w.map(f32::from_bits)
    }
    #[inline(always)]
    fn to_words(v: [f32; 4]) -> [u32; 4] {
        v.map(f32::to_bits)
    }
    #[inline(always)]
    fn pack2_f32(lo: f32, _hi: f32) -> u32 {
        lo.to_bits()
    }
}

/// Splits four 32-bit words into eight 16-bit lanes, low half first (little-endian order, as
/// the lanes sit in memory).
#[inline(always)]
fn split_halves(w: [u32; 4]) -> [u16; 8] {
    [
        w[0] as u16,
        (w[0] >> 16) as u16,
        w[1] as u16,
        (w[1] >> 16) as u16,
        w[2] as u16,
        (w[2] >> 16) as u16,
        w[3] as u16,
        (w[3] >> 16) as u16,
    ]
}

#[inline(always)]
fn join_halves(h: [u16; 8]) -> [u32; 4] {
    [
        h[0] as u32 | (h[1] as u32) << 16,
        h[2] as u32 | (h[3] as u32) << 16,
        h[4] as u32 | (h[5] as u32) << 16,
        h[6] as u32 | (h[7] as u32) << 16,
    ]
}

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    type Vec16 = [f16; 8];
    #[inline(always)]
    fn to_f32(self) -> f32 {
        #[cfg(target_arch = "nvptx64")]
        {
            crate::arch::nvptx::f16_to_f32(self.to_bits())
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            f16_bits_to_f32(self.to_bits())
        }
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        #[cfg(target_arch = "nvptx64")]
        {
            f16::from_bits(crate::arch::nvptx::f32_to_f16(v))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            f16::from_bits(f32_to_f16_bits(v))
        }
    }
    #[inline(always)]
    fn from_words(w: [u32; 4]) -> [f16; 8] {
        split_halves(w).map(f16::from_bits)
    }
    #[inline(always)]
    fn to_words(v: [f16; 8]) -> [u32; 4] {
        join_halves(v.map(f16::to_bits))
    }
    #[inline(always)]
    fn pack2_f32(lo: f32, hi: f32) -> u32 {
        #[cfg(target_arch = "nvptx64")]
        {
            crate::arch::nvptx::f32x2_to_f16x2(lo, hi)
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            f32_to_f16_bits(lo) as u32 | (f32_to_f16_bits(hi) as u32) << 16
        }
    }
}

impl Element for bf16 {
    const DTYPE: DType = DType::Bf16;
    type Vec16 = [bf16; 8];
    #[inline(always)]
    fn to_f32(self) -> f32 {
        // bf16 is the top half of an f32: widening is exact and the same everywhere.
        f32::from_bits((self.to_bits() as u32) << 16)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        #[cfg(target_arch = "nvptx64")]
        {
            bf16::from_bits(crate::arch::nvptx::f32_to_bf16(v))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            bf16::from_bits(f32_to_bf16_bits(v))
        }
    }
    #[inline(always)]
    fn from_words(w: [u32; 4]) -> [bf16; 8] {
        split_halves(w).map(bf16::from_bits)
    }
    #[inline(always)]
    fn to_words(v: [bf16; 8]) -> [u32; 4] {
        join_halves(v.map(bf16::to_bits))
    }
    #[inline(always)]
    fn pack2_f32(lo: f32, hi: f32) -> u32 {
        #[cfg(target_arch = "nvptx64")]
        {
            crate::arch::nvptx::f32x2_to_bf16x2(lo, hi)
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            f32_to_bf16_bits(lo) as u32 | (f32_to_bf16_bits(hi) as u32) << 16
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The packed pair is the two roundings side by side, low value in the low half (what the
    /// GPU's `cvt.rn.*x2.f32` gives): ties, NaN, infinities, overflow, subnormals.
    #[test]
    fn pack2_is_two_roundings_low_first() {
        let vals = [
            0.0f32,
            -0.0,
            1.0,
            -2.5,
            1.0 + 1.0 / 256.0,
            65504.0,
            65520.0,
            3.0e38,
            f32::INFINITY,
            f32::NAN,
            1.0e-8,
            -7.0e-6,
        ];
        for &lo in &vals {
            for &hi in &vals {
                let b = bf16::pack2_f32(lo, hi);
                assert_eq!(
                    b,
                    join_halves([bf16::from_f32(lo).to_bits(), bf16::from_f32(hi).to_bits(), 0, 0, 0, 0, 0, 0])[0]
                );
                let h = f16::pack2_f32(lo, hi);
                assert_eq!(
                    h,
                    join_halves([f16::from_f32(lo).to_bits(), f16::from_f32(hi).to_bits(), 0, 0, 0, 0, 0, 0])[0]
                );
            }
        }
        assert_eq!(f32::pack2_f32(1.5, 2.0), 1.5f32.to_bits());
    }

    #[test]
    fn words_round_trip_keeps_lane_order() {
        let w = [0x0002_0001, 0x0004_0003, 0x0006_0005, 0x0008_0007];
        let h = f16::from_words(w);
        assert_eq!(h.map(f16::to_bits), [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(f16::to_words(h), w);
        assert_eq!(bf16::to_words(bf16::from_words(w)), w);
        let f = f32::from_words([1.5f32.to_bits(), 0, 2, 3]);
        assert_eq!(f[0], 1.5);
    }

    /// The branch-free conversions agree with `half` bit for bit: every f16, and f32 values
    /// on a walk through all bit patterns plus the rounding edges (NaN: a NaN).
    #[test]
    fn bit_conversions_match_half() {
        for h in 0..=u16::MAX {
            let (got, want) = (f16_bits_to_f32(h), f16::from_bits(h).to_f32());
            assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{h:#x}: {got} {want}");
        }
        let edges =
            [65504.0f32, 65519.99, 65520.0, 6.1035156e-5, 6.097555e-5, 5.9604645e-8, 2.9802322e-8, 2.9802326e-8];
        let walk = (0..u32::MAX / 7919).map(|i| i * 7919).chain(edges.iter().map(|e| e.to_bits()));
        for bits in walk.flat_map(|b| [b, b ^ 0x8000_0000, b | 0x1fff, b & !0x1fff | 0x1000]) {
            let f = f32::from_bits(bits);
            let (h, b) = (f32_to_f16_bits(f), f32_to_bf16_bits(f));
            if f.is_nan() {
                assert!(f16::from_bits(h).is_nan() && bf16::from_bits(b).is_nan(), "{bits:#x}");
            } else {
                assert_eq!(h, f16::from_f32(f).to_bits(), "f16 of {f:e} ({bits:#x})");
                assert_eq!(b, bf16::from_f32(f).to_bits(), "bf16 of {f:e} ({bits:#x})");
            }
        }
    }

    #[test]
    fn conversions_round_to_nearest_even() {
        // 1 + 2^-11 (and 1 + 2^-8 for bf16) is halfway between two f16 values: ties go to the even one (1.0).
        assert_eq!(<f16 as Element>::from_f32(1.000_488_3).to_bits(), 0x3c00);
        assert_eq!(<bf16 as Element>::from_f32(1.003_906_3).to_bits(), 0x3f80);
        assert_eq!(<bf16 as Element>::to_f32(bf16::from_bits(0x3fc0)), 1.5);
    }
}
