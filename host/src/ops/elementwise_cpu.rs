//! The CPU backend of the elementwise family: the shared maths (`kernels-gpu`'s `Map` ops)
//! over rayon tasks of `cpu_chunk` elements, each task one fixed-lane loop (`map_into`)
//! compiled three times: for the build's baseline and, picked at run time, for AVX2 + F16C and
//! for AVX-512 (8 and 16 lanes of f32). 16-bit data takes the widened loop
//! (`map_into_widened`: blocks of 64 widened, the maths over whole blocks of f32 lanes, then
//! narrowed), f16 through the F16C instructions (`f16c.rs`), bf16 through its portable
//! conversions (a shift and a rounding add); f32 runs the per-element loop. Copy is a
//! `memcpy` of each chunk.
//! The fused chain's activation is fixed per call at compile time, as in the PTX entries.

#[cfg(target_arch = "x86_64")]
use std::any::TypeId;

use ferrotune_kernels::elementwise::{
    self as k, Activation, Add, AddMulAct, Axpy, ElemOp, GeluErf, GeluTanh, Map, Relu, Scale,
};
use ferrotune_kernels::{DType, Element};
#[cfg(target_arch = "x86_64")]
use half::f16;
use rayon::prelude::*;

use crate::backend::Cpu;
use crate::buffer::Scalar;

/// The widest instruction set the loops have a build for on this CPU (checked once). The
/// results are the same bits in every build: the host maths has no fused multiply-adds.
#[derive(Clone, Copy, PartialEq)]
enum Isa {
    Baseline,
    Avx2,
    Avx512,
}

fn isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        static ISA: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        *ISA.get_or_init(|| {
            if std::arch::is_x86_feature_detected!("avx512f") {
                Isa::Avx512
            } else if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c") {
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
fn cast<T: 'static, U: 'static>(slice: &[T]) -> Option<&[U]> {
    // SAFETY: the TypeIds are equal, so T and U are the same type.
    (TypeId::of::<T>() == TypeId::of::<U>()).then(|| unsafe { &*(slice as *const [T] as *const [U]) })
}

#[cfg(target_arch = "x86_64")]
fn cast_mut<T: 'static, U: 'static>(slice: &mut [T]) -> Option<&mut [U]> {
    // SAFETY: the TypeIds are equal, so T and U are the same type.
    (TypeId::of::<T>() == TypeId::of::<U>()).then(|| unsafe { &mut *(slice as *mut [T] as *mut [U]) })
}

/// The loops of one instruction set: `map_into` and `map_inplace` per element for f32, the
/// widened path for f16 (hardware conversions) and bf16 (portable ones). `$features` is what
/// the functions are compiled for, `$widen` the F16C converter of that width.
macro_rules! isa_loops {
    ($name:ident, $features:literal, $widen:ty, $doc:literal) => {
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
                if let (Some(out), Some(first)) = (cast_mut::<T, f16>(out), cast::<T, f16>(ins[0])) {
                    let ins = ins.map(|x| cast::<T, f16>(x).unwrap_or(first));
                    // SAFETY: this function runs only where the features were detected.
                    let conv = unsafe { <$widen>::new() };
                    return k::map_into_widened(op, conv, ins, out);
                }
                if T::DTYPE == DType::Bf16 {
                    return k::map_into_widened(op, k::PortableWiden, ins, out);
                }
                k::map_into(op, ins, out)
            }

            /// # Safety
            /// As for `map_into`.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn map_inplace<T: Element, Op: Map<2>>(op: Op, x: &[T], io: &mut [T]) {
                if let (Some(io), Some(x)) = (cast_mut::<T, f16>(io), cast::<T, f16>(x)) {
                    // SAFETY: this function runs only where the features were detected.
                    let conv = unsafe { <$widen>::new() };
                    return k::map_inplace_widened(op, conv, x, io);
                }
                if T::DTYPE == DType::Bf16 {
                    return k::map_inplace_widened(op, k::PortableWiden, x, io);
                }
                k::map_inplace(op, x, io)
            }
        }
    };
}

isa_loops!(avx2, "avx2,f16c", crate::ops::f16c::F16cAvx2, "The loops for AVX2 (8 lanes of f32).");
isa_loops!(avx512, "avx512f", crate::ops::f16c::F16cAvx512, "The loops for AVX-512 (16 lanes of f32).");

/// `k::map_into` in the widest build the CPU runs.
#[inline]
fn map_into<T: Element, const K: usize, Op: Map<K>>(op: Op, ins: [&[T]; K], out: &mut [T]) {
    match isa() {
        // SAFETY: the CPU has AVX-512F (checked by `isa`).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512::map_into(op, ins, out) },
        // SAFETY: the CPU has AVX2 and F16C (checked by `isa`).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { avx2::map_into(op, ins, out) },
        _ => k::map_into(op, ins, out),
    }
}

/// `k::map_inplace` in the widest build the CPU runs.
#[inline]
fn map_inplace<T: Element, Op: Map<2>>(op: Op, x: &[T], io: &mut [T]) {
    match isa() {
        // SAFETY: the CPU has AVX-512F (checked by `isa`).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512::map_inplace(op, x, io) },
        // SAFETY: the CPU has AVX2 and F16C (checked by `isa`).
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
