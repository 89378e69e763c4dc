//! The memory-bound family: copy, scale, relu, gelu (erf and tanh), add, axpy,
//! bias_add_inplace and the fused chain `act((a + b) * c)`, in f32, f16 and bf16.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use ferrotune_kernels::elementwise::{ElemOp, ElemVariant};

pub use ferrotune_kernels::elementwise::Activation;

use crate::backend::{Cpu, Gpu};
use crate::buffer::{Scalar, View, ViewMut};
use crate::config::ElemConfig;
use crate::error::{DriverContext, Error, Result};
use crate::stream::Stream;

/// Which GELU formula.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeluForm {
    /// `x Φ(x)`, the exact form.
    Erf,
    /// The tanh approximation.
    Tanh,
}

/// `y = x` (a bit copy; the bandwidth probe).
pub fn copy<T: Scalar>(s: &Stream, x: &View<'_, T>, y: &mut ViewMut<'_, T>) -> Result<()> {
    run_default(s, ElemOp::Copy, &[x], y, 0.0)
}

/// `y = alpha * x`.
pub fn scale<T: Scalar>(s: &Stream, alpha: f32, x: &View<'_, T>, y: &mut ViewMut<'_, T>) -> Result<()> {
    run_default(s, ElemOp::Scale, &[x], y, alpha)
}

/// `y = max(x, 0)`.
pub fn relu<T: Scalar>(s: &Stream, x: &View<'_, T>, y: &mut ViewMut<'_, T>) -> Result<()> {
    run_default(s, ElemOp::Relu, &[x], y, 0.0)
}

/// `y = gelu(x)` in the chosen form.
pub fn gelu<T: Scalar>(s: &Stream, form: GeluForm, x: &View<'_, T>, y: &mut ViewMut<'_, T>) -> Result<()> {
    let op = match form {
        GeluForm::Erf => ElemOp::GeluErf,
        GeluForm::Tanh => ElemOp::GeluTanh,
    };
    run_default(s, op, &[x], y, 0.0)
}

/// `out = a + b`.
pub fn add<T: Scalar>(s: &Stream, a: &View<'_, T>, b: &View<'_, T>, out: &mut ViewMut<'_, T>) -> Result<()> {
    run_default(s, ElemOp::Add, &[a, b], out, 0.0)
}

/// `y = alpha * x + y`, in place.
pub fn axpy<T: Scalar>(s: &Stream, alpha: f32, x: &View<'_, T>, y: &mut ViewMut<'_, T>) -> Result<()> {
    run_default(s, ElemOp::Axpy, &[x], y, alpha)
}

/// `x[r, c] += bias[c]` for a row-major `rows x cols` matrix `x`, in place.
pub fn bias_add_inplace<T: Scalar>(
    s: &Stream,
    x: &mut ViewMut<'_, T>,
    bias: &View<'_, T>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    let op = "bias_add_inplace";
    if cols == 0 || bias.is_empty() {
        return Err(Error::EmptyInput { op, what: "bias" });
    }
    if bias.len() != cols {
        return Err(Error::ShapeMismatch { op, what: "bias", expected: cols, got: bias.len() });
    }
    let n = rows.checked_mul(cols).ok_or(Error::InvalidConfig { op, why: "rows * cols overflows".into() })?;
    if x.len() != n {
        return Err(Error::ShapeMismatch { op, what: "x (rows * cols)", expected: n, got: x.len() });
    }
    run_default(s, ElemOp::BiasAdd, &[bias], x, 0.0)
}

/// `out = act((a + b) * c)` in one pass.
pub fn add_mul_act<T: Scalar>(
    s: &Stream,
    act: Activation,
    a: &View<'_, T>,
    b: &View<'_, T>,
    c: &View<'_, T>,
    out: &mut ViewMut<'_, T>,
) -> Result<()> {
    run_default(s, ElemOp::Chain(act), &[a, b, c], out, 0.0)
}

fn run_default<T: Scalar>(
    s: &Stream,
    op: ElemOp,
    inputs: &[&View<'_, T>],
    out: &mut ViewMut<'_, T>,
    alpha: f32,
) -> Result<()> {
    // A tuned profile entry for this machine and size when there is one, else the heuristic.
    let cfg = crate::tuned::config_for(s, op, T::DTYPE, out.len())?;
    run_elementwise(s, op, &cfg, inputs, out, alpha)
}

/// Inputs an op takes besides `out` (in-place ops read `out` too: axpy's `y`, bias_add's `x`).
fn separate_inputs(op: ElemOp) -> usize {
    match op {
        ElemOp::Copy | ElemOp::Scale | ElemOp::Relu | ElemOp::GeluErf | ElemOp::GeluTanh => 1,
        ElemOp::Axpy | ElemOp::BiasAdd => 1,
        ElemOp::Add => 2,
        ElemOp::Chain(_) => 3,
    }
}

fn check<T: Scalar>(s: &Stream, op: ElemOp, inputs: &[&View<'_, T>], out: &ViewMut<'_, T>) -> Result<()> {
    let name = op.name();
    if inputs.len() != separate_inputs(op) {
        return Err(Error::InvalidConfig {
            op: name,
            why: format!("takes {} inputs besides the output, got {}", separate_inputs(op), inputs.len()),
        });
    }
    let backend = s.backend_name();
    if out.backend_name() != backend {
        return Err(Error::BackendMismatch { op: name, what: "output", expected: backend, got: out.backend_name() });
    }
    for x in inputs {
        if x.backend_name() != backend {
            return Err(Error::BackendMismatch { op: name, what: "input", expected: backend, got: x.backend_name() });
        }
    }
    if op == ElemOp::BiasAdd {
        let cols = inputs[0].len();
        if cols == 0 {
            return Err(Error::EmptyInput { op: name, what: "bias" });
        }
        if !out.len().is_multiple_of(cols) {
            return Err(Error::ShapeMismatch {
                op: name,
                what: "x (a whole number of bias rows)",
                expected: out.len().div_ceil(cols) * cols,
                got: out.len(),
            });
        }
    } else {
        for x in inputs {
            if x.len() != out.len() {
                return Err(Error::ShapeMismatch { op: name, what: "input", expected: out.len(), got: x.len() });
            }
        }
    }
    Ok(())
}

/// Runs `op` with an explicit config (what the tuner and the bench call). `inputs` are the
/// operands besides `out`; in-place ops (axpy, bias_add) read `out` as well. `alpha` is the
/// scalar of scale and axpy.
pub fn run_elementwise<T: Scalar>(
    s: &Stream,
    op: ElemOp,
    cfg: &ElemConfig,
    inputs: &[&View<'_, T>],
    out: &mut ViewMut<'_, T>,
    alpha: f32,
) -> Result<()> {
    check(s, op, inputs, out)?;
    cfg.validate(op, s.gpu().map(|g| g.info()))?;
    if out.is_empty() {
        return Ok(());
    }
    match s {
        Stream::Cpu(cpu) => run_cpu(cpu, op, cfg, inputs, out, alpha),
        Stream::Cuda { stream, gpu } => run_gpu(stream, gpu, op, cfg, inputs, out, alpha),
    }
}

fn cpu_slices<'a, T: Scalar>(inputs: &'a [&View<'_, T>]) -> Vec<&'a [T]> {
    inputs
        .iter()
        .filter_map(|v| match v {
            View::Cpu(s) => Some(*s),
            View::Cuda(_) => None,
        })
        .collect()
}

fn run_cpu<T: Scalar>(
    cpu: &Cpu,
    op: ElemOp,
    cfg: &ElemConfig,
    inputs: &[&View<'_, T>],
    out: &mut ViewMut<'_, T>,
    alpha: f32,
) -> Result<()> {
    let ViewMut::Cpu(out) = out else {
        unreachable!("check() matched the output's backend to the stream's");
    };
    super::elementwise_cpu::run(cpu, op, cfg.cpu_chunk, &cpu_slices(inputs), out, alpha);
    Ok(())
}

/// The PTX entry point of (op, dtype, variant): `ft_<op>_<dtype>_<v16|v1>_u<unroll>`.
pub fn entry_name(op: ElemOp, dtype: ferrotune_kernels::DType, variant: ElemVariant) -> String {
    let (v, u) = variant.suffix();
    format!("ft_{}_{}_{}_u{}", op.name(), dtype.name(), v, u)
}

/// Most threads per block the entry point of (op, dtype, variant) can launch with on this
/// stream's device (its register use decides); `None` on the CPU backend. The tuner prunes
/// configs above it; `run_elementwise` rejects them with `InvalidConfig`.
pub fn max_threads(
    s: &Stream,
    op: ElemOp,
    dtype: ferrotune_kernels::DType,
    variant: ElemVariant,
) -> Result<Option<u32>> {
    match s {
        Stream::Cpu(_) => Ok(None),
        Stream::Cuda { gpu, .. } => Ok(Some(gpu.kernels()?.function(&entry_name(op, dtype, variant))?.max_threads)),
    }
}

/// Blocks for `n` elements: one pass over the data, or a capped persistent grid.
pub(crate) fn grid_blocks(n: usize, lanes: usize, cfg: &ElemConfig, variant: ElemVariant, sm_count: u32) -> u32 {
    let per_block = cfg.threads as usize * variant.unroll as usize * lanes;
    let mut blocks = n.div_ceil(per_block).max(1);
    if cfg.blocks_per_sm > 0 {
        blocks = blocks.min(cfg.blocks_per_sm as usize * sm_count as usize);
    }
    blocks.min(i32::MAX as usize) as u32
}

fn run_gpu<T: Scalar>(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    op: ElemOp,
    cfg: &ElemConfig,
    inputs: &[&View<'_, T>],
    out: &mut ViewMut<'_, T>,
    alpha: f32,
) -> Result<()> {
    let kernels = gpu.kernels()?;
    let n = out.len();
    let ViewMut::Cuda(out) = out else {
        unreachable!("check() matched the output's backend to the stream's");
    };
    let mut ptrs = Vec::with_capacity(3);
    let mut guards = Vec::with_capacity(4);
    for v in inputs {
        let View::Cuda(v) = v else {
            unreachable!("check() matched every input's backend to the stream's");
        };
        let (p, g) = v.device_ptr(cs);
        ptrs.push(p);
        guards.push(g);
    }
    let (po, go) = out.device_ptr_mut(cs);
    guards.push(go);

    // 16-byte vectors need every pointer 16-byte aligned (views may start anywhere), and
    // bias_add needs rows of at least one vector; otherwise the scalar variant runs.
    let lanes = T::DTYPE.lanes();
    let aligned = ptrs.iter().chain([&po]).all(|p| p % 16 == 0);
    let bias_ok = op != ElemOp::BiasAdd || inputs[0].len() >= lanes;
    let mut variant = cfg.variant;
    if variant.vec16 && !(aligned && bias_ok) {
        log::debug!("{}: unaligned view or short bias row; using the scalar variant", op.name());
        variant.vec16 = false;
    }
    let name = entry_name(op, T::DTYPE, variant);
    let kernel = kernels.function(&name)?;
    if cfg.threads > kernel.max_threads {
        return Err(Error::InvalidConfig {
            op: op.name(),
            why: format!(
                "{name} uses {} registers per thread, so at most {} threads per block; {} requested",
                kernel.registers, kernel.max_threads, cfg.threads
            ),
        });
    }
    let blocks = grid_blocks(n, if variant.vec16 { lanes } else { 1 }, cfg, variant, gpu.info.sm_count);
    let launch = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (cfg.threads, 1, 1), shared_mem_bytes: 0 };
    let cols = inputs[0].len();
    let mut b = cs.launch_builder(&kernel.func);
    match op {
        ElemOp::Copy | ElemOp::Scale | ElemOp::Relu | ElemOp::GeluErf | ElemOp::GeluTanh => {
            b.arg(&ptrs[0]).arg(&po).arg(&n).arg(&alpha)
        }
        ElemOp::Add => b.arg(&ptrs[0]).arg(&ptrs[1]).arg(&po).arg(&n).arg(&alpha),
        ElemOp::Axpy => b.arg(&ptrs[0]).arg(&po).arg(&po).arg(&n).arg(&alpha),
        ElemOp::Chain(_) => b.arg(&ptrs[0]).arg(&ptrs[1]).arg(&ptrs[2]).arg(&po).arg(&n),
        ElemOp::BiasAdd => b.arg(&po).arg(&ptrs[0]).arg(&n).arg(&cols),
    };
    // SAFETY: the arguments match the entry point's parameters in number, order and type
    // (see kernels-gpu/src/entry/elementwise.rs: pointers as u64, n and cols as usize, alpha
    // as f32); every pointer covers n elements (bias: cols), checked above; vector variants
    // run only with 16-byte aligned pointers; threads and the grid are within device limits.
    unsafe { b.launch(launch) }.ctx(|| format!("launching {name} on {n} elements"))?;
    drop(guards);
    Ok(())
}
