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
            f16::to_f32(self)
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
            f16::from_f32(v)
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
            bf16::from_f32(v)
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
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn conversions_round_to_nearest_even() {
        // 1 + 2^-11 (and 1 + 2^-8 for bf16) is halfway between two f16 values: ties go to the even one (1.0).
        assert_eq!(<f16 as Element>::from_f32(1.000_488_3).to_bits(), 0x3c00);
        assert_eq!(<bf16 as Element>::from_f32(1.003_906_3).to_bits(), 0x3f80);
        assert_eq!(<bf16 as Element>::to_f32(bf16::from_bits(0x3fc0)), 1.5);
    }
}
