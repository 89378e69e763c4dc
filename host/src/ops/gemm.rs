//! GEMM: `D = act(alpha op(A) op(B) + beta C + bias)` for f32 (FFMA), f16 and bf16 (tensor
//! cores, f32 accumulators), any M, N, K, row- or column-major operands, leading dimensions,
//! strided batches, and an f32 or same-dtype output. `matmul`, `matmul_bias_relu`,
//! `linear_bias_gelu` and `batched_matmul` are shorthands for common cases.

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg, SyncOnDrop};
use ferrotune_kernels::gemm::{self as kg, CpuOperands, GemmVariant};
use rayon::prelude::*;

pub use ferrotune_kernels::gemm::{Epilogue, Layout};

use crate::DType;
use crate::backend::{Cpu, Gpu};
use crate::buffer::{Scalar, View, ViewMut};
use crate::error::{DriverContext, Error, Result};
use crate::stream::Stream;

/// One GEMM problem (or a strided batch of them). Leading dimensions and batch strides of 0
/// mean "tight" (the smallest valid value). D is row-major with leading dimension `ldc`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a_layout: Layout,
    pub b_layout: Layout,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
    pub batch: usize,
    pub stride_a: usize,
    pub stride_b: usize,
    pub stride_c: usize,
    pub epilogue: Epilogue,
}

impl Gemm {
    /// `m x k` times `k x n`, both row-major, tight, one matrix, plain epilogue.
    pub fn new(m: usize, n: usize, k: usize) -> Gemm {
        Gemm {
            m,
            n,
            k,
            a_layout: Layout::Row,
            b_layout: Layout::Row,
            lda: 0,
            ldb: 0,
            ldc: 0,
            batch: 1,
            stride_a: 0,
            stride_b: 0,
            stride_c: 0,
            epilogue: Epilogue::PLAIN,
        }
    }

    pub fn layouts(mut self, a: Layout, b: Layout) -> Gemm {
        self.a_layout = a;
        self.b_layout = b;
        self
    }

    pub fn batched(mut self, batch: usize) -> Gemm {
        self.batch = batch;
        self
    }

    pub fn epilogue(mut self, e: Epilogue) -> Gemm {
        self.epilogue = e;
        self
    }

    /// Leading dimensions and strides with the tight defaults filled in.
    pub fn resolved(&self) -> Gemm {
        let mut g = *self;
        let (ar, ac) = match g.a_layout {
            Layout::Row => (g.m, g.k),
            Layout::Col => (g.k, g.m),
        };
        let (br, bc) = match g.b_layout {
            Layout::Row => (g.k, g.n),
            Layout::Col => (g.n, g.k),
        };
        if g.lda == 0 {
            g.lda = ac.max(1);
        }
        if g.ldb == 0 {
            g.ldb = bc.max(1);
        }
        if g.ldc == 0 {
            g.ldc = g.n.max(1);
        }
        if g.stride_a == 0 {
            g.stride_a = ar * g.lda;
        }
        if g.stride_b == 0 {
            g.stride_b = br * g.ldb;
        }
        if g.stride_c == 0 {
            g.stride_c = g.m * g.ldc;
        }
        g
    }

    /// Floating-point operations (2 M N K per matrix).
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }
}

/// Elements a matrix of `rows x cols` in `layout` with leading dimension `ld` spans.
fn extent(layout: Layout, rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        return 0;
    }
    match layout {
        Layout::Row => (rows - 1) * ld + cols,
        Layout::Col => (cols - 1) * ld + rows,
    }
}

const OP: &str = "gemm";

#[allow(clippy::too_many_arguments)]
fn check_operand(
    what: &'static str,
    len: usize,
    layout: Layout,
    rows: usize,
    cols: usize,
    ld: usize,
    g: &Gemm,
    stride: usize,
) -> Result<()> {
    let min_ld = match layout {
        Layout::Row => cols,
        Layout::Col => rows,
    };
    if ld < min_ld.max(1) {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!("leading dimension of {what} is {ld}, below {min_ld}"),
        });
    }
    let one = extent(layout, rows, cols, ld);
    let needed = if g.batch == 0 || one == 0 { 0 } else { (g.batch - 1) * stride + one };
    if len < needed {
        return Err(Error::BufferTooSmall { op: OP, what, needed, got: len });
    }
    Ok(())
}

fn check<T: Scalar, O: Scalar>(
    s: &Stream,
    g: &Gemm,
    a: &View<'_, T>,
    b: &View<'_, T>,
    c: Option<&View<'_, O>>,
    bias: Option<&View<'_, O>>,
    d: &ViewMut<'_, O>,
) -> Result<()> {
    if O::DTYPE != T::DTYPE && O::DTYPE != DType::F32 {
        return Err(Error::UnsupportedDtype { op: OP, dtype: O::DTYPE.name() });
    }
    let backend = s.backend_name();
    for (what, got) in [("A", a.backend_name()), ("B", b.backend_name()), ("D", d.backend_name())]
        .into_iter()
        .chain(c.map(|v| ("C", v.backend_name())))
        .chain(bias.map(|v| ("bias", v.backend_name())))
    {
        if got != backend {
            return Err(Error::BackendMismatch { op: OP, what, expected: backend, got });
        }
    }
    let lim = i32::MAX as usize;
    if [g.m, g.n, g.k, g.lda, g.ldb, g.ldc].iter().any(|&v| v > lim) {
        return Err(Error::InvalidConfig {
            op: OP,
            why: "dimensions and leading dimensions must be below 2^31".into(),
        });
    }
    if g.batch > 65_535 {
        return Err(Error::InvalidConfig { op: OP, why: format!("batch {} above 65535", g.batch) });
    }
    check_operand("A", a.len(), g.a_layout, g.m, g.k, g.lda, g, g.stride_a)?;
    check_operand("B", b.len(), g.b_layout, g.k, g.n, g.ldb, g, g.stride_b)?;
    check_operand("D", d.len(), Layout::Row, g.m, g.n, g.ldc, g, g.stride_c)?;
    if g.batch > 1 && g.m > 0 && g.n > 0 && g.stride_c < extent(Layout::Row, g.m, g.n, g.ldc) {
        return Err(Error::InvalidConfig { op: OP, why: "batches of D overlap (stride_c too small)".into() });
    }
    let reads_c = g.epilogue.beta != 0.0;
    match (reads_c, c) {
        (true, Some(c)) => check_operand("C", c.len(), Layout::Row, g.m, g.n, g.ldc, g, g.stride_c)?,
        (true, None) => return Err(Error::InvalidConfig { op: OP, why: "beta != 0 needs C".into() }),
        _ => {}
    }
    match (g.epilogue.bias, bias) {
        (true, Some(bv)) if bv.len() < g.n => {
            return Err(Error::ShapeMismatch { op: OP, what: "bias", expected: g.n, got: bv.len() });
        }
        (true, None) => {
            return Err(Error::InvalidConfig { op: OP, why: "the epilogue adds a bias but none was given".into() });
        }
        _ => {}
    }
    Ok(())
}

/// Runs the GEMM `g` on the stream: `d = epilogue(op(a) op(b))`, reading `c` when
/// `epilogue.beta != 0` and `bias` (length >= n) when `epilogue.bias`. Inputs f32/f16/bf16;
/// the output is the input dtype or f32.
pub fn gemm<T: Scalar, O: Scalar>(
    s: &Stream,
    g: &Gemm,
    a: &View<'_, T>,
    b: &View<'_, T>,
    c: Option<&View<'_, O>>,
    bias: Option<&View<'_, O>>,
    d: &mut ViewMut<'_, O>,
) -> Result<()> {
    let g = g.resolved();
    check(s, &g, a, b, c, bias, d)?;
    if g.m == 0 || g.n == 0 || g.batch == 0 {
        return Ok(());
    }
    match s {
        Stream::Cpu(cpu) => run_cpu(cpu, &g, a, b, c, bias, d),
        Stream::Cuda { stream, gpu } => run_gpu(stream, gpu, &g, a, b, c, bias, d),
    }
}

/// `d = a b`, all row-major and tight: `a` is `m x k`, `b` is `k x n`, `d` is `m x n`.
pub fn matmul<T: Scalar, O: Scalar>(
    s: &Stream,
    a: &View<'_, T>,
    b: &View<'_, T>,
    d: &mut ViewMut<'_, O>,
    m: usize,
    n: usize,
    k: usize,
) -> Result<()> {
    gemm::<T, O>(s, &Gemm::new(m, n, k), a, b, None, None, d)
}

/// `d = relu(a b + bias)`, row-major and tight.
#[allow(clippy::too_many_arguments)]
pub fn matmul_bias_relu<T: Scalar, O: Scalar>(
    s: &Stream,
    a: &View<'_, T>,
    b: &View<'_, T>,
    bias: &View<'_, O>,
    d: &mut ViewMut<'_, O>,
    m: usize,
    n: usize,
    k: usize,
) -> Result<()> {
    let e = Epilogue { bias: true, act: crate::ops::Activation::Relu, ..Epilogue::PLAIN };
    gemm::<T, O>(s, &Gemm::new(m, n, k).epilogue(e), a, b, None, Some(bias), d)
}

/// A linear layer: `d = gelu(x wᵀ + bias)` with `x` `m x k` (row-major) and `w` `n x k`
/// (row-major, i.e. B column-major), the layout of `torch.nn.Linear`.
#[allow(clippy::too_many_arguments)]
pub fn linear_bias_gelu<T: Scalar, O: Scalar>(
    s: &Stream,
    x: &View<'_, T>,
    w: &View<'_, T>,
    bias: &View<'_, O>,
    d: &mut ViewMut<'_, O>,
    m: usize,
    n: usize,
    k: usize,
) -> Result<()> {
    let e = Epilogue { bias: true, act: crate::ops::Activation::GeluErf, ..Epilogue::PLAIN };
    let g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).epilogue(e);
    gemm::<T, O>(s, &g, x, w, None, Some(bias), d)
}

/// `batch` independent row-major products stored back to back: `a` is `batch x m x k`, `b`
/// is `batch x k x n`, `d` is `batch x m x n`. One launch.
#[allow(clippy::too_many_arguments)]
pub fn batched_matmul<T: Scalar, O: Scalar>(
    s: &Stream,
    a: &View<'_, T>,
    b: &View<'_, T>,
    d: &mut ViewMut<'_, O>,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
) -> Result<()> {
    gemm::<T, O>(s, &Gemm::new(m, n, k).batched(batch), a, b, None, None, d)
}

/// The compiled variant for these operands: 16-byte loads when the pointers, leading
/// dimensions and batch strides allow them.
fn variant<T: Scalar, O: Scalar>(g: &Gemm, pa: u64, pb: u64) -> GemmVariant {
    let mut v = GemmVariant {
        dtype: T::DTYPE,
        a: g.a_layout,
        b: g.b_layout,
        vec: true,
        out_f32: O::DTYPE == DType::F32 && T::DTYPE != DType::F32,
    };
    let ve = v.vec_elems();
    v.vec = pa.is_multiple_of(16)
        && pb.is_multiple_of(16)
        && [g.lda, g.ldb, g.stride_a, g.stride_b].iter().all(|x| x % ve == 0);
    v
}

#[allow(clippy::too_many_arguments)]
fn run_gpu<T: Scalar, O: Scalar>(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    g: &Gemm,
    a: &View<'_, T>,
    b: &View<'_, T>,
    c: Option<&View<'_, O>>,
    bias: Option<&View<'_, O>>,
    d: &mut ViewMut<'_, O>,
) -> Result<()> {
    let (pa, ga) = device_ptr(a, cs)?;
    let (pb, gb) = device_ptr(b, cs)?;
    let ViewMut::Cuda(dv) = d else {
        return Err(Error::BackendMismatch { op: OP, what: "D", expected: "cuda", got: "cpu" });
    };
    let (pd, gd) = dv.device_ptr_mut(cs);
    // Unused pointers are never dereferenced; D is a valid address to pass in their place.
    let (pc, gc) = match c {
        Some(v) => device_ptr(v, cs).map(|(p, g)| (p, Some(g)))?,
        None => (pd, None),
    };
    let (pbias, gbias) = match bias {
        Some(v) => device_ptr(v, cs).map(|(p, g)| (p, Some(g)))?,
        None => (pd, None),
    };
    let v = variant::<T, O>(g, pa, pb);
    let name = v.entry_name();
    let kernel = gpu.kernels()?.function(name.as_str())?;
    let (bm, bn, threads) = match T::DTYPE {
        DType::F32 => (kg::ffma::BM, kg::ffma::BN, kg::ffma::THREADS),
        _ => (kg::tc::BM, kg::tc::BN, kg::tc::THREADS),
    };
    if threads > kernel.max_threads {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!("{} allows {} threads per block, needs {threads}", name.as_str(), kernel.max_threads),
        });
    }
    let grid = (g.n.div_ceil(bn) as u32, g.m.div_ceil(bm) as u32, g.batch as u32);
    if grid.1 > 65_535 {
        return Err(Error::InvalidConfig { op: OP, why: format!("m = {} needs more than 65535 block rows", g.m) });
    }
    let mut smem = 0u32;
    if kg::tc::uses_cp_async(&v) {
        // The cp.async ring lives in dynamic shared memory beyond the 48 KiB default: opt in.
        smem = kg::tc::CP_SMEM_BYTES as u32;
        if smem > gpu.info.shared_mem_per_block_optin {
            return Err(Error::InvalidConfig {
                op: OP,
                why: format!(
                    "{} needs {smem} bytes of shared memory, the device allows {}",
                    name.as_str(),
                    gpu.info.shared_mem_per_block_optin
                ),
            });
        }
        kernel
            .func
            .set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem as i32)
            .ctx(|| format!("raising the shared-memory limit of {}", name.as_str()))?;
    }
    let launch = LaunchConfig { grid_dim: grid, block_dim: (threads, 1, 1), shared_mem_bytes: smem };
    let dims = [g.m, g.n, g.k, g.lda, g.ldb, g.ldc].map(|x| x as u32);
    let strides = [g.stride_a, g.stride_b, g.stride_c].map(|x| x as u64);
    let e = g.epilogue;
    let flags = e.flags();
    let mut lb = cs.launch_builder(&kernel.func);
    lb.arg(&pa).arg(&pb).arg(&pc).arg(&pd).arg(&pbias);
    for x in &dims {
        lb.arg(x);
    }
    for x in &strides {
        lb.arg(x);
    }
    lb.arg(&e.alpha).arg(&e.beta).arg(&flags);
    // SAFETY: the arguments match `gemm_entry!` in kernels-gpu/src/entry/gemm.rs (5 pointers,
    // 6 u32, 3 u64, 2 f32, 1 u32); `check` proved every operand covers its batch of matrices
    // and the leading dimensions; `variant` picked 16-byte loads only for aligned operands; the
    // block size is the one the kernel is written for and within its register limit.
    unsafe { lb.launch(launch) }
        .ctx(|| format!("launching {} ({}x{}x{}, batch {})", name.as_str(), g.m, g.n, g.k, g.batch))?;
    drop((ga, gb, gd, gc, gbias));
    Ok(())
}

/// The device pointer of a CUDA view, with the guard that records its use on the stream.
fn device_ptr<'a, T: Scalar>(v: &'a View<'_, T>, cs: &'a CudaStream) -> Result<(u64, SyncOnDrop<'a>)> {
    match v {
        View::Cuda(v) => Ok(v.device_ptr(cs)),
        View::Cpu(_) => Err(Error::BackendMismatch { op: OP, what: "input", expected: "cuda", got: "cpu" }),
    }
}

/// The slice behind a CPU view.
fn host_slice<'a, T: Scalar>(v: &'a View<'_, T>) -> Result<&'a [T]> {
    match v {
        View::Cpu(s) => Ok(s),
        View::Cuda(_) => Err(Error::BackendMismatch { op: OP, what: "input", expected: "cpu", got: "cuda" }),
    }
}

/// f32 copy of one matrix of `rows x cols`, row-major and tight.
fn to_rows_f32<T: Scalar>(src: &[T], layout: Layout, rows: usize, cols: usize, ld: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; rows * cols];
    for i in 0..rows {
        for j in 0..cols {
            v[i * cols + j] = src[layout.index(i, j, ld)].to_f32();
        }
    }
    v
}

#[allow(clippy::too_many_arguments)]
fn run_cpu<T: Scalar, O: Scalar>(
    cpu: &Cpu,
    g: &Gemm,
    a: &View<'_, T>,
    b: &View<'_, T>,
    c: Option<&View<'_, O>>,
    bias: Option<&View<'_, O>>,
    d: &mut ViewMut<'_, O>,
) -> Result<()> {
    let (a, b) = (host_slice(a)?, host_slice(b)?);
    let c = c.map(host_slice).transpose()?.unwrap_or(&[]);
    let bias = bias.map(host_slice).transpose()?.unwrap_or(&[]);
    let ViewMut::Cpu(d) = d else {
        return Err(Error::BackendMismatch { op: OP, what: "D", expected: "cpu", got: "cuda" });
    };
    let rows_per_task = 16;
    cpu.install(|| {
        for z in 0..g.batch {
            let af = to_rows_f32(&a[z * g.stride_a..], g.a_layout, g.m, g.k, g.lda);
            let bf = to_rows_f32(&b[z * g.stride_b..], g.b_layout, g.k, g.n, g.ldb);
            let ops = CpuOperands { a: &af, b: &bf, m: g.m, n: g.n, k: g.k };
            // Tight rows of this batch's D, computed in parallel, then copied out (ldc may be
            // wider than n).
            let mut out = vec![O::default(); g.m * g.n];
            let cz: Vec<O> = if g.epilogue.beta != 0.0 {
                (0..g.m).flat_map(|i| c[z * g.stride_c + i * g.ldc..][..g.n].iter().copied()).collect()
            } else {
                Vec::new()
            };
            out.par_chunks_mut(rows_per_task * g.n).enumerate().for_each(|(t, chunk)| {
                let row0 = t * rows_per_task;
                let cr = if cz.is_empty() { &[][..] } else { &cz[row0 * g.n..row0 * g.n + chunk.len()] };
                let mut acc = vec![0.0f32; g.n];
                kg::cpu_rows(&ops, row0, &g.epilogue, cr, bias, chunk, &mut acc);
            });
            for i in 0..g.m {
                let dst = z * g.stride_c + i * g.ldc;
                d[dst..dst + g.n].copy_from_slice(&out[i * g.n..(i + 1) * g.n]);
            }
        }
    });
    Ok(())
}
