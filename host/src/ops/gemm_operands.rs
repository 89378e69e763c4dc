//! The device addresses of a GEMM call's operands and the guards that order their use on the
//! stream: one prologue for every family's launch.

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};

use crate::buffer::{Scalar, View, ViewMut};
use crate::error::{Error, Result};

/// The op name in errors (the GEMM's).
const OP: &str = "gemm";

/// The device addresses of a GEMM call's operands, `[A, B, C, D, bias]`, with the guards that
/// order their use on the stream until dropped (keep it alive until the launches are queued).
pub(crate) struct OperandPtrs<'a> {
    pub ptrs: [u64; 5],
    _guards: Vec<SyncOnDrop<'a>>,
}

/// The operands' device addresses; C and bias, where absent, are D's address (never
/// dereferenced then: the epilogue flags say they are unused).
pub(crate) fn operand_ptrs<'a, T: Scalar, O: Scalar>(
    cs: &'a CudaStream,
    a: &'a View<'_, T>,
    b: &'a View<'_, T>,
    c: Option<&'a View<'_, O>>,
    bias: Option<&'a View<'_, O>>,
    d: &'a mut ViewMut<'_, O>,
) -> Result<OperandPtrs<'a>> {
    let (pa, ga) = device_ptr(a, cs)?;
    let (pb, gb) = device_ptr(b, cs)?;
    let ViewMut::Cuda(dv) = d else {
        return Err(Error::BackendMismatch { op: OP, what: "D", expected: "cuda", got: "cpu" });
    };
    let (pd, gd) = dv.device_ptr_mut(cs);
    let mut guards = vec![ga, gb, gd];
    let mut or_d = |v: Option<&'a View<'_, O>>| -> Result<u64> {
        let Some(v) = v else { return Ok(pd) };
        let (p, g) = device_ptr(v, cs)?;
        guards.push(g);
        Ok(p)
    };
    let (pc, pbias) = (or_d(c)?, or_d(bias)?);
    Ok(OperandPtrs { ptrs: [pa, pb, pc, pd, pbias], _guards: guards })
}

/// The device pointer of a CUDA view, with the guard that records its use on the stream.
pub(crate) fn device_ptr<'a, T: Scalar>(v: &'a View<'_, T>, cs: &'a CudaStream) -> Result<(u64, SyncOnDrop<'a>)> {
    match v {
        View::Cuda(v) => Ok(v.device_ptr(cs)),
        View::Cpu(_) => Err(Error::BackendMismatch { op: OP, what: "input", expected: "cuda", got: "cpu" }),
    }
}
