//! Pointer-array batched GEMM: one launch over matrices anywhere in memory, each view one
//! matrix as the problem describes it (the device arrays of pointers built per call).

use cudarc::driver::{DevicePtr, DevicePtrMut};

use super::gemm::{Gemm, OP, check, device_ptr, launch, run_cpu, variant_chosen};
use crate::buffer::{Scalar, View, ViewMut};
use crate::error::{DriverContext, Error, Result};
use crate::stream::Stream;

/// Pointer-array batched GEMM: `d[i] = epilogue(op(a[i]) op(b[i]))` for every `i`, one launch,
/// with matrices anywhere in memory (each view holds one matrix as `g` describes it; `g.batch`
/// and the strides are ignored). CUDA streams only; the CPU backend runs them one by one.
pub fn gemm_ptr_array<T: Scalar, O: Scalar>(
    s: &Stream,
    g: &Gemm,
    a: &[View<'_, T>],
    b: &[View<'_, T>],
    bias: Option<&View<'_, O>>,
    d: &mut [ViewMut<'_, O>],
) -> Result<()> {
    if let Some(sk @ 2..) = g.split_k {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!("split_k {sk} is not available for pointer-array batches (single matrices only)"),
        });
    }
    let g = Gemm { batch: 1, stride_a: 0, stride_b: 0, stride_c: 0, split_k: Some(1), ..*g }.resolved();
    if g.epilogue.beta != 0.0 {
        return Err(Error::InvalidConfig { op: OP, why: "pointer-array batches take no C (beta must be 0)".into() });
    }
    for (what, len) in [("B", b.len()), ("D", d.len())] {
        if len != a.len() {
            return Err(Error::ShapeMismatch { op: OP, what, expected: a.len(), got: len });
        }
    }
    for ((x, y), z) in a.iter().zip(b).zip(d.iter()) {
        check(s, &g, x, y, None, bias, z)?;
    }
    let batch = a.len();
    if batch == 0 || g.m == 0 || g.n == 0 {
        return Ok(());
    }
    if batch > 65_535 {
        return Err(Error::InvalidConfig { op: OP, why: format!("batch {batch} above 65535") });
    }
    let cfg = crate::tuned::gemm_config_for(s, &Gemm { batch, ..g }, T::DTYPE)?;
    match s {
        Stream::Cpu(cpu) => {
            for ((x, y), z) in a.iter().zip(b).zip(d.iter_mut()) {
                run_cpu(cpu, &g, cfg, x, y, None, bias, z)?;
            }
            Ok(())
        }
        Stream::Cuda { stream: cs, gpu } => {
            let mut guards = Vec::with_capacity(4 * batch);
            let mut table = vec![0u64; 4 * batch];
            for i in 0..batch {
                let (pa, ga) = device_ptr(&a[i], cs)?;
                let (pb, gb) = device_ptr(&b[i], cs)?;
                table[i] = pa;
                table[batch + i] = pb;
                guards.push(ga);
                guards.push(gb);
            }
            for (i, z) in d.iter_mut().enumerate() {
                let ViewMut::Cuda(dv) = z else {
                    return Err(Error::BackendMismatch { op: OP, what: "D", expected: "cuda", got: "cpu" });
                };
                let (pd, gd) = dv.device_ptr_mut(cs);
                table[2 * batch + i] = pd; // C: never read (beta = 0), D stands in
                table[3 * batch + i] = pd;
                guards.push(gd);
            }
            let (pbias, gbias) = match bias {
                Some(v) => device_ptr(v, cs).map(|(p, g)| (p, Some(g)))?,
                None => (table[3 * batch], None),
            };
            // One variant for all: the OR of the pointers is aligned only if every one is.
            let or = |r: std::ops::Range<usize>| table[r].iter().fold(0u64, |acc, p| acc | p);
            let v = variant_chosen(&g, T::DTYPE, O::DTYPE, or(0..batch), or(batch..2 * batch), cfg)?;
            let mut dev = crate::pool::Pooled::<u64>::uninit(&gpu.pool, cs, table.len())?;
            cs.memcpy_htod(&table, &mut *dev).ctx(|| "copying the pointer array to the device".to_string())?;
            let (pt, gt) = dev.device_ptr(cs);
            let ptrs = [pt, pt + 8 * batch as u64, pt + 16 * batch as u64, pt + 24 * batch as u64, pbias];
            // SAFETY: `check` proved each view covers one matrix as `g` describes it; the
            // table holds exactly those pointers, lives in `dev` (freed in stream order after
            // the launch), and `variant_for` matched the load width to all of them.
            // One grid layer per matrix (`g.batch` was 1 for the per-matrix checks).
            unsafe { launch(cs, gpu, &Gemm { batch, ..g }, v, ptrs, true) }?;
            drop((gt, gbias, guards));
            drop(dev);
            Ok(())
        }
    }
}
