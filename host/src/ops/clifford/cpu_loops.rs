//! The Clifford CPU row loops (`kernels-gpu`'s `clifford::cpu`, lane blocks of the shared
//! per-feature maths) compiled for the widest instruction set this CPU has, picked at run time
//! as the elementwise loops are (`elementwise_cpu::isa`): AVX-512 (16 f32 lanes), AVX2 + FMA
//! (8), or the build's baseline; 16-bit data is widened and narrowed a block at a time by the
//! hardware conversions where the CPU has them (F16C, AVX512-BF16), else the portable ones.

use ferrotune_kernels::arch::Portable;
use ferrotune_kernels::clifford::{self as kc, Algebra};
use ferrotune_kernels::elementwise::{PortableWiden, Widen};
use ferrotune_kernels::{DType, Element};

use crate::ops::elementwise_cpu::{Isa, isa};

/// The block converter of one call: one variant per hardware converter, chosen once per call
/// from the dtype and the CPU (a match per block of [`kc::LANES`] elements, not per element).
#[derive(Clone, Copy, Debug)]
pub(super) enum Conv {
    Portable,
    #[cfg(target_arch = "x86_64")]
    F16Avx2(crate::ops::f16c::F16cAvx2),
    #[cfg(target_arch = "x86_64")]
    F16Avx512(crate::ops::f16c::F16cAvx512),
    #[cfg(target_arch = "x86_64")]
    Bf16Avx512(crate::ops::bf16_avx512::Bf16Avx512),
}

impl<T: Element> Widen<T> for Conv {
    #[inline(always)]
    fn widen(self, src: &[T], dst: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::ops::elementwise_cpu::cast;
            match self {
                Conv::F16Avx2(c) => {
                    if let Some(s) = cast::<T, half::f16>(src) {
                        return c.widen(s, dst);
                    }
                }
                Conv::F16Avx512(c) => {
                    if let Some(s) = cast::<T, half::f16>(src) {
                        return c.widen(s, dst);
                    }
                }
                Conv::Bf16Avx512(c) => {
                    if let Some(s) = cast::<T, half::bf16>(src) {
                        return c.widen(s, dst);
                    }
                }
                Conv::Portable => {}
            }
        }
        PortableWiden.widen(src, dst)
    }

    #[inline(always)]
    fn narrow(self, src: &[f32], dst: &mut [T]) {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::ops::elementwise_cpu::cast_mut;
            match self {
                Conv::F16Avx2(c) => {
                    if let Some(d) = cast_mut::<T, half::f16>(dst) {
                        return c.narrow(src, d);
                    }
                }
                Conv::F16Avx512(c) => {
                    if let Some(d) = cast_mut::<T, half::f16>(dst) {
                        return c.narrow(src, d);
                    }
                }
                Conv::Bf16Avx512(c) => {
                    if let Some(d) = cast_mut::<T, half::bf16>(dst) {
                        return c.narrow(src, d);
                    }
                }
                Conv::Portable => {}
            }
        }
        PortableWiden.narrow(src, dst)
    }
}

/// The converter for `T` on this CPU.
fn conv_for<T: Element>() -> Conv {
    #[cfg(target_arch = "x86_64")]
    {
        match (T::DTYPE, isa()) {
            // SAFETY: `isa` found AVX-512F.
            (DType::F16, Isa::Avx512) => return Conv::F16Avx512(unsafe { crate::ops::f16c::F16cAvx512::new() }),
            // SAFETY: `isa` found AVX2 and F16C.
            (DType::F16, Isa::Avx2) => return Conv::F16Avx2(unsafe { crate::ops::f16c::F16cAvx2::new() }),
            (DType::Bf16, Isa::Avx512) => {
                if let Some(c) = crate::ops::bf16_avx512::Bf16Avx512::detect() {
                    return Conv::Bf16Avx512(c);
                }
            }
            _ => {}
        }
    }
    Conv::Portable
}

/// One module of the four loops per instruction set, each a `target_feature` function that
/// the shared loops (all `inline(always)`) are compiled into.
macro_rules! isa_loops {
    ($name:ident, $features:literal) => {
        #[cfg(target_arch = "x86_64")]
        mod $name {
            use super::*;
            use crate::ops::elementwise_cpu::HwFma;

            /// # Safety
            /// The CPU must support the features named in `target_feature`.
            #[allow(clippy::too_many_arguments)]
            #[target_feature(enable = $features)]
            pub(super) unsafe fn fwd<A: Algebra, T: Element>(
                conv: Conv,
                x: &[&[T]],
                y: &[&[T]],
                wt: &[f32],
                out: &mut [&mut [T]],
                n: usize,
                normalize: bool,
                scratch: &mut [f32],
                stage: Option<&mut [T]>,
            ) {
                kc::fwd_rows::<A, T, Conv, HwFma>(HwFma, conv, x, y, wt, out, n, normalize, scratch, stage)
            }

            /// # Safety
            /// As for `fwd`.
            #[allow(clippy::too_many_arguments)]
            #[target_feature(enable = $features)]
            pub(super) unsafe fn bwd<A: Algebra, T: Element>(
                conv: Conv,
                [x, y, go]: [&[&[T]]; 3],
                wt: &[f32],
                dx: &mut [&mut [T]],
                dy: &mut [&mut [T]],
                dwt: &mut [f32],
                n: usize,
                normalize: bool,
                saved: &mut [f32],
            ) {
                kc::bwd_rows::<A, T, Conv, HwFma>(HwFma, conv, x, y, go, wt, dx, dy, dwt, n, normalize, saved)
            }

            /// # Safety
            /// As for `fwd`.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn products<A: Algebra, T: Element>(
                conv: Conv,
                x: &[&[T]],
                y: &[&[T]],
                prod: &mut [&mut [T]],
                n: usize,
                ld: usize,
            ) {
                kc::fcgp_products_rows::<A, T, Conv>(conv, x, y, prod, n, ld)
            }

            /// # Safety
            /// As for `fwd`.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn assemble<A: Algebra, T: Element>(
                conv: Conv,
                d: &[&[f32]],
                out: &mut [&mut [T]],
                n: usize,
                ld: usize,
                normalize: bool,
                scratch: &mut [f32],
            ) {
                kc::fcgp_assemble_rows::<A, T, Conv>(conv, d, out, n, ld, normalize, scratch)
            }
        }
    };
}

isa_loops!(avx2, "avx2,f16c,fma");
isa_loops!(avx512, "avx512f,fma");

/// Runs `$loop` of the widest build this CPU has (`$baseline`: the portable one).
macro_rules! pick {
    ($f:ident, $baseline:expr, ($($arg:expr),*)) => {
        match isa() {
            // SAFETY: the CPU has AVX-512F and FMA (checked by `isa`).
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { avx512::$f::<A, T>($($arg),*) },
            // SAFETY: the CPU has AVX2, F16C and FMA (checked by `isa`).
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { avx2::$f::<A, T>($($arg),*) },
            _ => $baseline,
        }
    };
}

/// Outputs of at least this many bytes per call are written with streaming stores (no read
/// for ownership of each output line; see `ferrotune_kernels::arch::store_streaming`). Below
/// it the outputs may still be in the last-level cache when the caller reads them, which
/// streaming stores would give up. Measured in bench/NOTES.md (issue 16).
pub(super) const STREAM_MIN_BYTES: usize = 8 << 20;

/// Whether a call whose outputs take `bytes` writes them with streaming stores: from
/// [`STREAM_MIN_BYTES`] on; `FERROTUNE_CPU_STREAM_STORES=0` (or `1`) turns them off (or on)
/// for every size, for A/B runs.
pub(super) fn stream_outputs(bytes: usize) -> bool {
    static FORCED: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    let forced = FORCED.get_or_init(|| match std::env::var("FERROTUNE_CPU_STREAM_STORES").as_deref() {
        Ok("0") => Some(false),
        Ok("1") => Some(true),
        _ => None,
    });
    forced.unwrap_or(bytes >= STREAM_MIN_BYTES)
}

/// [`kc::fwd_rows`] in the widest build.
#[allow(clippy::too_many_arguments)]
pub(super) fn fwd_rows<A: Algebra, T: Element>(
    x: &[&[T]],
    y: &[&[T]],
    wt: &[f32],
    out: &mut [&mut [T]],
    n: usize,
    normalize: bool,
    scratch: &mut [f32],
    stage: Option<&mut [T]>,
) {
    let conv = conv_for::<T>();
    pick!(
        fwd,
        kc::fwd_rows::<A, T, Conv, Portable>(Portable, conv, x, y, wt, out, n, normalize, scratch, stage),
        (conv, x, y, wt, out, n, normalize, scratch, stage)
    )
}

/// [`kc::bwd_rows`] in the widest build.
#[allow(clippy::too_many_arguments)]
pub(super) fn bwd_rows<A: Algebra, T: Element>(
    xyg: [&[&[T]]; 3],
    wt: &[f32],
    (dx, dy): (&mut [&mut [T]], &mut [&mut [T]]),
    dwt: &mut [f32],
    n: usize,
    normalize: bool,
    saved: &mut [f32],
) {
    let conv = conv_for::<T>();
    let [x, y, go] = xyg;
    pick!(
        bwd,
        kc::bwd_rows::<A, T, Conv, Portable>(Portable, conv, x, y, go, wt, dx, dy, dwt, n, normalize, saved),
        (conv, xyg, wt, dx, dy, dwt, n, normalize, saved)
    )
}

/// [`kc::fcgp_products_rows`] in the widest build.
pub(super) fn products_rows<A: Algebra, T: Element>(
    x: &[&[T]],
    y: &[&[T]],
    prod: &mut [&mut [T]],
    n: usize,
    ld: usize,
) {
    let conv = conv_for::<T>();
    pick!(products, kc::fcgp_products_rows::<A, T, Conv>(conv, x, y, prod, n, ld), (conv, x, y, prod, n, ld))
}

/// [`kc::fcgp_assemble_rows`] in the widest build.
pub(super) fn assemble_rows<A: Algebra, T: Element>(
    d: &[&[f32]],
    out: &mut [&mut [T]],
    n: usize,
    ld: usize,
    normalize: bool,
    scratch: &mut [f32],
) {
    let conv = conv_for::<T>();
    pick!(
        assemble,
        kc::fcgp_assemble_rows::<A, T, Conv>(conv, d, out, n, ld, normalize, scratch),
        (conv, d, out, n, ld, normalize, scratch)
    )
}
