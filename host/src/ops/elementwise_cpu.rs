//! The CPU backend of the elementwise family: the shared maths (`kernels-gpu`'s `Map` ops)
//! over rayon tasks of `cpu_chunk` elements, each task one fixed-lane loop (`map_into`)
//! compiled three times: for the build's baseline and, picked at run time, for AVX2 + FMA +
//! F16C and for AVX-512 (8 and 16 lanes of f32). The two runtime-picked builds do the GELU
//! maths' multiply-adds fused (`HwFma`, the FMA instruction in every lane; the baseline does a
//! multiply then an add), so their GELU results may differ from the baseline's in the last
//! bits, all within the maths' stated bounds. 16-bit data takes the widened loop
//! (`map_into_widened`: blocks of 256 widened, the maths over whole blocks of f32 lanes, then
//! narrowed), f16 through the F16C instructions (`f16c.rs`), bf16 widened by a shift and
//! rounded by AVX512-BF16 where the CPU has it (`bf16_avx512.rs`), else by the portable
//! rounding add; f32 runs the per-element loop. Copy is a `memcpy` of each chunk.
//! The fused chain's activation is fixed per call at compile time, as in the PTX entries.

#[cfg(target_arch = "x86_64")]
use std::any::TypeId;

#[cfg(target_arch = "x86_64")]
use ferrotune_kernels::arch::MulAdd;
use ferrotune_kernels::elementwise::{
    self as k, Activation, Add, AddMulAct, Axpy, ElemOp, GeluErf, GeluTanh, Map, Relu, Scale,
};
use ferrotune_kernels::{DType, Element};
#[cfg(target_arch = "x86_64")]
use half::{bf16, f16};
use rayon::prelude::*;

use crate::backend::Cpu;
use crate::buffer::Scalar;

/// The widest instruction set the loops have a build for on this CPU (checked once).
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Isa {
    Baseline,
    Avx2,
    Avx512,
}

pub(crate) fn isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        static ISA: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        *ISA.get_or_init(|| {
            let fma = std::arch::is_x86_feature_detected!("fma");
            if fma && std::arch::is_x86_feature_detected!("avx512f") {
                Isa::Avx512
            } else if fma && std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c")
            {
                Isa::Avx2
            } else {
                Isa::Baseline
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Isa::Baseline
    }
}

#[cfg(target_arch = "x86_64")]
/// `slice` as a slice of `U` when `T` is `U` (to give f16 data its F16C converter).
pub(crate) fn cast<T: 'static, U: 'static>(slice: &[T]) -> Option<&[U]> {
    // SAFETY: the TypeIds are equal, so T and U are the same type.
    (TypeId::of::<T>() == TypeId::of::<U>()).then(|| unsafe { &*(slice as *const [T] as *const [U]) })
}

#[cfg(target_arch = "x86_64")]
pub(crate) fn cast_mut<T: 'static, U: 'static>(slice: &mut [T]) -> Option<&mut [U]> {
    // SAFETY: the TypeIds are equal, so T and U are the same type.
    (TypeId::of::<T>() == TypeId::of::<U>()).then(|| unsafe { &mut *(slice as *mut [T] as *mut [U]) })
}

/// Fused multiply-adds for the shared maths: std's `mul_add`, which inside the
/// `target_feature(enable = "fma")` loops below is the FMA instruction, vectorised with the
/// loop. Only those loops use it (elsewhere it would be a call to a software fma).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct HwFma;

#[cfg(target_arch = "x86_64")]
impl MulAdd for HwFma {
    const FUSED: bool = true;
    #[inline(always)]
    fn mul_add(self, a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

/// `Op` with its maths' multiply-adds done by [`HwFma`] (see `Map::map_with`).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
struct Fused<Op>(Op);

#[cfg(target_arch = "x86_64")]
impl<const K: usize, Op: Map<K>> Map<K> for Fused<Op> {
    #[inline(always)]
    fn map_f32(self, x: [f32; K]) -> f32 {
        self.0.map_with(HwFma, DType::F32, x)
    }
    #[inline(always)]
    fn map_for(self, dtype: DType, x: [f32; K]) -> f32 {
        self.0.map_with(HwFma, dtype, x)
    }
}

/// The loops of one instruction set: `map_into` and `map_inplace` per element for f32, the
/// widened path for f16 (hardware conversions) and bf16 (hardware rounding where `$bf16`
/// finds it, else portable). `$features` is what the functions are compiled for, `$widen` the
/// F16C converter of that width.
macro_rules! isa_loops {
    ($name:ident, $features:literal, $widen:ty, $bf16:expr, $doc:literal) => {
        #[cfg(target_arch = "x86_64")]
        mod $name {
            use super::*;

            #[doc = $doc]
            /// # Safety
            /// The CPU must support the features named in `target_feature` (`isa`).
            #[target_feature(enable = $features)]
            pub(super) unsafe fn map_into<T: Element, const K: usize, Op: Map<K>>(
                op: Op,
                ins: [&[T]; K],
                out: &mut [T],
            ) {
                let op = Fused(op);
                if let (Some(out), Some(first)) = (cast_mut::<T, f16>(out), cast::<T, f16>(ins[0])) {
                    let ins = ins.map(|x| cast::<T, f16>(x).unwrap_or(first));
                    // SAFETY: this function runs only where the features were detected.
                    let conv = unsafe { <$widen>::new() };
                    return k::map_into_widened(op, conv, ins, out);
                }
                if let (Some(out), Some(first)) = (cast_mut::<T, bf16>(out), cast::<T, bf16>(ins[0])) {
                    let ins = ins.map(|x| cast::<T, bf16>(x).unwrap_or(first));
                    return match $bf16 {
                        Some(conv) => k::map_into_widened(op, conv, ins, out),
                        None => k::map_into_widened(op, k::PortableWiden, ins, out),
                    };
                }
                k::map_into(op, ins, out)
            }

            /// # Safety
            /// As for `map_into`.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn map_inplace<T: Element, Op: Map<2>>(op: Op, x: &[T], io: &mut [T]) {
                let op = Fused(op);
                if let (Some(io), Some(x)) = (cast_mut::<T, f16>(io), cast::<T, f16>(x)) {
                    // SAFETY: this function runs only where the features were detected.
                    let conv = unsafe { <$widen>::new() };
                    return k::map_inplace_widened(op, conv, x, io);
                }
                if let (Some(io), Some(x)) = (cast_mut::<T, bf16>(io), cast::<T, bf16>(x)) {
                    return match $bf16 {
                        Some(conv) => k::map_inplace_widened(op, conv, x, io),
                        None => k::map_inplace_widened(op, k::PortableWiden, x, io),
                    };
                }
                k::map_inplace(op, x, io)
            }
        }
    };
}

isa_loops!(
    avx2,
    "avx2,f16c,fma",
    crate::ops::f16c::F16cAvx2,
    None::<crate::ops::bf16_avx512::Bf16Avx512>,
    "The loops for AVX2 + FMA (8 lanes of f32)."
);
isa_loops!(
    avx512,
    "avx512f,fma",
    crate::ops::f16c::F16cAvx512,
    crate::ops::bf16_avx512::Bf16Avx512::detect(),
    "The loops for AVX-512 (16 lanes of f32)."
);

/// `k::map_into` in the widest build the CPU runs.
#[inline]
fn map_into<T: Element, const K: usize, Op: Map<K>>(op: Op, ins: [&[T]; K], out: &mut [T]) {
    match isa() {
        // SAFETY: the CPU has AVX-512F and FMA (checked by `isa`).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512::map_into(op, ins, out) },
        // SAFETY: the CPU has AVX2, F16C and FMA (checked by `isa`).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { avx2::map_into(op, ins, out) },
        _ => k::map_into(op, ins, out),
    }
}

/// `k::map_inplace` in the widest build the CPU runs.
#[inline]
fn map_inplace<T: Element, Op: Map<2>>(op: Op, x: &[T], io: &mut [T]) {
    match isa() {
        // SAFETY: the CPU has AVX-512F and FMA (checked by `isa`).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512::map_inplace(op, x, io) },
        // SAFETY: the CPU has AVX2, F16C and FMA (checked by `isa`).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { avx2::map_inplace(op, x, io) },
        _ => k::map_inplace(op, x, io),
    }
}

/// `bias_add_inplace` on whole rows: `map_inplace` of the bias over each row.
#[inline]
fn bias_add_rows<T: Element>(rows: &mut [T], bias: &[T]) {
    for row in rows.chunks_exact_mut(bias.len()) {
        map_inplace(Add, bias, row);
    }
}

/// The fused chain with activation `Activation::ALL[A]` fixed at compile time, so that the
/// per-element match folds away (the maths is `AddMulAct`'s).
#[derive(Clone, Copy)]
struct ChainOf<const A: usize>;

impl<const A: usize> ChainOf<A> {
    const OP: AddMulAct = AddMulAct { act: Activation::ALL[A] };
}

impl<const A: usize> Map<3> for ChainOf<A> {
    #[inline(always)]
    fn map_f32(self, x: [f32; 3]) -> f32 {
        Self::OP.map_f32(x)
    }
    #[inline(always)]
    fn map_for(self, dtype: DType, x: [f32; 3]) -> f32 {
        Self::OP.map_for(dtype, x)
    }
    #[inline(always)]
    fn map_with<F: ferrotune_kernels::arch::MulAdd>(self, f: F, dtype: DType, x: [f32; 3]) -> f32 {
        Self::OP.map_with(f, dtype, x)
    }
}

/// Splits `out` into rayon tasks of `chunk` elements; each task maps its part of the inputs.
fn par_map<T: Scalar, const K: usize, Op: Map<K>>(op: Op, ins: [&[T]; K], out: &mut [T], chunk: usize) {
    out.par_chunks_mut(chunk).enumerate().for_each(|(i, o)| {
        let start = i * chunk;
        map_into(op, ins.map(|x| &x[start..start + o.len()]), o);
    });
}

/// Runs `op` on checked host slices: `ins` as the op takes them (see `run_elementwise`).
pub(crate) fn run<T: Scalar>(cpu: &Cpu, op: ElemOp, chunk: usize, ins: &[&[T]], out: &mut [T], alpha: f32) {
    let chunk = chunk.max(1);
    cpu.install(|| match op {
        // A bit copy: no conversion, whatever the type.
        ElemOp::Copy => out.par_chunks_mut(chunk).zip(ins[0].par_chunks(chunk)).for_each(|(o, x)| o.copy_from_slice(x)),
        ElemOp::Scale => par_map(Scale { alpha }, [ins[0]], out, chunk),
        ElemOp::Relu => par_map(Relu, [ins[0]], out, chunk),
        ElemOp::GeluErf => par_map(GeluErf, [ins[0]], out, chunk),
        ElemOp::GeluTanh => par_map(GeluTanh, [ins[0]], out, chunk),
        ElemOp::Add => par_map(Add, [ins[0], ins[1]], out, chunk),
        ElemOp::Chain(Activation::None) => par_map(ChainOf::<0>, [ins[0], ins[1], ins[2]], out, chunk),
        ElemOp::Chain(Activation::Relu) => par_map(ChainOf::<1>, [ins[0], ins[1], ins[2]], out, chunk),
        ElemOp::Chain(Activation::GeluErf) => par_map(ChainOf::<2>, [ins[0], ins[1], ins[2]], out, chunk),
        ElemOp::Chain(Activation::GeluTanh) => par_map(ChainOf::<3>, [ins[0], ins[1], ins[2]], out, chunk),
        ElemOp::Axpy => {
            out.par_chunks_mut(chunk).zip(ins[0].par_chunks(chunk)).for_each(|(y, x)| map_inplace(Axpy { alpha }, x, y))
        }
        ElemOp::BiasAdd => {
            let bias = ins[0];
            let rows_per_task = (chunk / bias.len()).max(1);
            out.par_chunks_mut(rows_per_task * bias.len()).for_each(|rows| bias_add_rows(rows, bias));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime-picked loops compute the fused maths exactly: every lane's result is the
    /// scalar `HwFma` maths' (std's `mul_add`, one rounding), bit for bit, for GELU in every
    /// dtype and the fused chain, lengths with tails included.
    #[test]
    fn the_fma_loops_are_the_fused_maths() {
        #[cfg(target_arch = "x86_64")]
        {
            if isa() == Isa::Baseline {
                println!("skipped: this CPU lacks AVX2 + FMA + F16C");
                return;
            }
            fn check<T: Element + core::fmt::Debug>(n: usize) {
                let v = |seed: u32| -> Vec<T> {
                    (0..n as u32)
                        .map(|i| T::from_f32(((i.wrapping_mul(2654435761) ^ seed) % 4001) as f32 / 150.0 - 13.3))
                        .collect()
                };
                let (a, b, c) = (v(1), v(7), v(13));
                let mut got = vec![T::from_f32(f32::NAN); n];
                let same = |got: &[T], want: &dyn Fn(usize) -> T| {
                    got.iter().enumerate().all(|(i, g)| g.to_f32().to_bits() == want(i).to_f32().to_bits())
                };
                map_into(GeluErf, [&a[..]], &mut got);
                assert!(same(&got, &|i| Fused(GeluErf).apply([a[i]])), "gelu_erf {:?} n={n}", T::DTYPE);
                map_into(GeluTanh, [&a[..]], &mut got);
                assert!(same(&got, &|i| Fused(GeluTanh).apply([a[i]])), "gelu_tanh {:?} n={n}", T::DTYPE);
                map_into(ChainOf::<2>, [&a[..], &b[..], &c[..]], &mut got);
                assert!(same(&got, &|i| Fused(ChainOf::<2>).apply([a[i], b[i], c[i]])), "chain {:?} n={n}", T::DTYPE);
                // And the fused maths is not the portable maths on these inputs (so the loops
                // really took the fused path).
                if n >= 1000 && T::DTYPE == DType::F32 {
                    map_into(GeluErf, [&a[..]], &mut got);
                    assert!((0..n).any(|i| got[i].to_f32().to_bits() != GeluErf.apply([a[i]]).to_f32().to_bits()));
                }
            }
            for n in [0, 1, 7, 63, 64, 65, 1000, 4099] {
                check::<f32>(n);
                check::<half::f16>(n);
                check::<half::bf16>(n);
            }
        }
    }

    #[test]
    fn the_fixed_chains_are_the_chain_ops_in_order() {
        for (a, act) in Activation::ALL.into_iter().enumerate() {
            let want = AddMulAct { act }.map_f32([0.5, -2.0, 1.5]);
            let got = match a {
                0 => ChainOf::<0>.map_f32([0.5, -2.0, 1.5]),
                1 => ChainOf::<1>.map_f32([0.5, -2.0, 1.5]),
                2 => ChainOf::<2>.map_f32([0.5, -2.0, 1.5]),
                _ => ChainOf::<3>.map_f32([0.5, -2.0, 1.5]),
            };
            assert_eq!(got.to_bits(), want.to_bits(), "{act:?}");
        }
    }
}
