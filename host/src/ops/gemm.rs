//! GEMM: `D = act(alpha op(A) op(B) + beta C + bias)` for f32 (FFMA), f16 and bf16 (tensor
//! cores, f32 accumulators), any M, N, K, row- or column-major operands, leading dimensions,
//! strided batches, and an f32 or same-dtype output. `matmul`, `matmul_bias_relu`,
//! `linear_bias_gelu` and `batched_matmul` are shorthands for common cases.

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use ferrotune_kernels::gemm::{self as kg, GemmVariant};

pub use ferrotune_kernels::gemm::{Epilogue, Layout};
pub use ferrotune_kernels::splitk::SplitPlan;

pub(crate) use super::gemm_operands::{device_ptr, operand_ptrs};
pub use super::gemm_ptr_array::gemm_ptr_array;
use super::gemm_splitk::launch_split;
pub use super::gemm_splitk::{SplitLaunches, split_launches};

use crate::DType;
use crate::backend::{Cpu, Gpu};
use crate::buffer::{Scalar, View, ViewMut};
use crate::config::GemmConfig;
use crate::error::{DriverContext, Error, Result};
use crate::ops::gemm_plan::{self, Family, Launch};
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
    /// Whether f32 inputs may run on TF32 tensor cores (the default, like cuBLAS with TF32
    /// math allowed); `Precision::Strict` or `FERROTUNE_ALLOW_TF32=0` keeps exact FFMA.
    pub precision: Precision,
    /// Tile of the tensor-core kernel (index into `gemm::tc::TILES`); `None` asks the
    /// chooser (profiles, then the built-in heuristic).
    pub tile: Option<usize>,
    /// Output rows per rayon task on the CPU backend; `None` asks the chooser.
    pub cpu_rows: Option<usize>,
    /// Slices K is split into on the GPU (1 = no split); `None` asks the chooser. Forcing more
    /// than 1 on a batch of several matrices (strided or pointer-array) is an error; the CPU
    /// backend ignores it (its result is the same up to rounding).
    pub split_k: Option<usize>,
    /// Forces a kernel family (see `Gemm::path`); `None` asks the chooser.
    pub path: Option<crate::config::GemmPath>,
    /// Runs with this config instead of the chooser's (`Gemm::with_config`).
    pub config: Option<GemmConfig>,
}

/// Arithmetic allowed for f32 inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Precision {
    /// TF32 tensor cores unless `FERROTUNE_ALLOW_TF32=0` (inputs rounded to 10-bit mantissas,
    /// f32 accumulation: relative error around 5e-4).
    #[default]
    AllowTf32,
    /// Exact f32 FFMA.
    Strict,
}

impl Precision {
    /// Whether f32 inputs run on TF32 here, the environment considered.
    pub fn uses_tf32(self) -> bool {
        self == Precision::AllowTf32 && std::env::var("FERROTUNE_ALLOW_TF32").map(|v| v != "0").unwrap_or(true)
    }
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
            precision: Precision::AllowTf32,
            tile: None,
            cpu_rows: None,
            split_k: None,
            path: None,
            config: None,
        }
    }

    pub fn precision(mut self, p: Precision) -> Gemm {
        self.precision = p;
        self
    }

    /// Forces a tile of the tensor-core kernel (see `gemm::tc::TILES`), or of the exact-f32
    /// FFMA kernel (`gemm::ffma::TILES`) for `Precision::Strict` f32; an index out of range, or
    /// a tile the operands' alignment does not allow, is an `InvalidConfig` error at launch.
    pub fn tile(mut self, t: usize) -> Gemm {
        self.tile = Some(t);
        self
    }

    /// Forces split-K with `s` slices of K (1 = off; at most `GemmConfig::MAX_SPLIT_K`, else an
    /// `InvalidConfig` error at launch). The slices' f32 partial products go to a workspace
    /// allocated on the stream for the call, `s * m * n` floats; K too short for `s` slices of
    /// at least 8 uses fewer. Single matrices only (`batch == 1`).
    pub fn split_k(mut self, s: usize) -> Gemm {
        self.split_k = Some(s);
        self
    }

    /// Forces the rows per rayon task of the CPU backend (at least 1).
    pub fn cpu_rows(mut self, rows: usize) -> Gemm {
        self.cpu_rows = Some(rows);
        self
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

pub(crate) const OP: &str = "gemm";

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

pub(crate) fn check<T: Scalar, O: Scalar>(
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
    if g.cpu_rows == Some(0) {
        return Err(Error::InvalidConfig { op: OP, why: "cpu_rows must be at least 1".into() });
    }
    if let Some(sk) = g.split_k {
        crate::config::validate_split_k(sk)?;
        if sk > 1 && g.batch > 1 {
            return Err(Error::InvalidConfig {
                op: OP,
                why: format!("split_k {sk} needs a single matrix, this call has a batch of {}", g.batch),
            });
        }
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

/// Runs the GEMM `g` on the stream: `d = epilogue(op(a) op(b))`, reading `c` when `beta != 0`
/// and `bias` (length >= n) when `epilogue.bias`. Inputs f32/f16/bf16; output that or f32.
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
    let cfg = super::gemm_plan::chosen_config(s, &g, T::DTYPE)?; // the call's, tuned or built-in
    match s {
        // The CPU backend does not split K: the result is the same up to rounding.
        Stream::Cpu(cpu) => run_cpu(cpu, &g, cfg, a, b, c, bias, d),
        Stream::Cuda { stream, gpu } => run_gpu(s, stream, gpu, &g, cfg, a, b, c, bias, d),
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

/// `batch` row-major products back to back (`batch x m x k` by `batch x k x n`), one launch.
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

/// The compiled variant for these operands: the arithmetic (TF32 or FFMA for f32), the widest
/// loads the pointers, leading dimensions and batch strides allow, and the tile (explicit, else
/// the built-in heuristic's; tiles other than the default exist for 16-byte loads with the
/// input's own output type only).
pub fn variant_for(g: &Gemm, dtype: DType, out: DType, pa: u64, pb: u64) -> Result<GemmVariant> {
    variant_chosen(g, dtype, out, pa, pb, GemmConfig::heuristic(g.m, g.n, g.k, g.batch))
}

/// As [`variant_for`], with `chosen` (a tuned profile's config or the heuristic) giving the
/// tile when `g` forces none.
pub fn variant_chosen(g: &Gemm, dtype: DType, out: DType, pa: u64, pb: u64, chosen: GemmConfig) -> Result<GemmVariant> {
    let math = match dtype {
        DType::F32 if g.precision.uses_tf32() => kg::Math::Tf32,
        DType::F32 => kg::Math::Ffma,
        _ => kg::Math::Half,
    };
    let dims = [g.lda, g.ldb, g.stride_a, g.stride_b];
    let mut v = GemmVariant {
        dtype,
        math,
        a: g.a_layout,
        b: g.b_layout,
        align: 0,
        out_f32: out == DType::F32 && dtype != DType::F32,
        tile: 0,
    };
    // A pointer array's matrices are only known on the device: their alignment is the caller's
    // promise, checked on the host copies of the pointers (see `batched_matmul_ptrs`).
    v.align = GemmVariant::aligns(math)
        .iter()
        .copied()
        .find(|&al| GemmVariant { align: al, ..v }.fits_alignment([pa, pb], dims))
        .ok_or_else(|| Error::InvalidConfig {
            op: OP,
            why: format!("{} operands must be at least {}-byte aligned", dtype.name(), dtype.size_bytes()),
        })?;
    if math == kg::Math::Ffma {
        return Ok(v);
    }
    let tile = match g.tile {
        Some(t) => t,
        None => chosen.tile,
    };
    if tile >= kg::tc::TILES.len() {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!("tile {tile} does not exist (0..{})", kg::tc::TILES.len()),
        });
    }
    if !(GemmVariant { tile: tile as u8, ..v }).is_compiled() {
        if g.tile.is_some() {
            return Err(Error::InvalidConfig {
                op: OP,
                why: format!(
                    "tile {tile} is compiled for 16-byte aligned operands (tiles {:?} also 8-byte) with a {} \
                     output only; these operands allow {}-byte loads",
                    kg::tc::NARROW_TILES,
                    dtype.name(),
                    v.align
                ),
            });
        }
        return Ok(v);
    }
    v.tile = tile as u8;
    Ok(v)
}

/// One GEMM call on a CUDA stream: resolves the plan (`gemm_plan`, the one place that decides)
/// and runs it.
#[allow(clippy::too_many_arguments)]
fn run_gpu<T: Scalar, O: Scalar>(
    s: &Stream,
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    g: &Gemm,
    cfg: GemmConfig,
    a: &View<'_, T>,
    b: &View<'_, T>,
    c: Option<&View<'_, O>>,
    bias: Option<&View<'_, O>>,
    d: &mut ViewMut<'_, O>,
) -> Result<()> {
    let arch = gpu.kernels()?.arch;
    let p = {
        let (pa, _ga) = device_ptr(a, cs)?;
        let (pb, _gb) = device_ptr(b, cs)?;
        gemm_plan::plan(g, T::DTYPE, O::DTYPE, arch, gpu.info.sm_count, cfg, [pa, pb])?
    };
    log::trace!("gemm {}x{}x{} batch {}: {} ({})", g.m, g.n, g.k, g.batch, p.path(), p.reason);
    match p.family {
        Family::SmallM => super::gemv::run(cs, gpu, g, p.small_m_tuned(), a, b, c, bias, d),
        Family::Pack => super::pack::run(s, cs, gpu, g, a, b, c, bias, d),
        Family::Launch(l) => launch_planned(cs, gpu, g, p.cfg, l, a, b, c, bias, d),
    }
}

/// The launches of a plan on the operands as given: Hopper, the tiles or split-K.
#[allow(clippy::too_many_arguments)]
fn launch_planned<T: Scalar, O: Scalar>(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    g: &Gemm,
    cfg: GemmConfig,
    l: Launch,
    a: &View<'_, T>,
    b: &View<'_, T>,
    c: Option<&View<'_, O>>,
    bias: Option<&View<'_, O>>,
    d: &mut ViewMut<'_, O>,
) -> Result<()> {
    let op = operand_ptrs(cs, a, b, c, bias, d)?;
    let ptrs = op.ptrs;
    // SAFETY (each arm): `check` proved every operand covers its batch of matrices at the
    // given strides and leading dimensions; the plan matched the kernel to the pointers (load
    // width, or tensor maps TMA can describe); the split's launches stay inside the operands.
    match l {
        Launch::SplitK(plan) => unsafe { launch_split(cs, gpu, g, cfg, plan, T::DTYPE, O::DTYPE, ptrs) }?,
        Launch::Hopper(v, sp) => unsafe { crate::ops::gemm_sm90::launch(cs, gpu, g, v, sp, ptrs) }?,
        Launch::HopperRows(r) => unsafe { crate::ops::gemm_sm90_rows::launch(cs, gpu, g, r, ptrs) }?,
        Launch::Tiles(v) => unsafe { launch(cs, gpu, g, v, ptrs, false) }?,
    }
    drop(op);
    Ok(())
}

/// Launches variant `v` of the GEMM entry on `ptrs` = (a, b, c, d, bias); with `ptr_array`
/// the first four are device arrays of `g.batch` per-matrix pointers.
///
/// # Safety
/// The pointers (or every pointer in the arrays) cover their matrices as `g` describes them,
/// aligned as `v.align` requires; the arrays stay alive until the launch completes.
pub(crate) unsafe fn launch(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    g: &Gemm,
    v: GemmVariant,
    ptrs: [u64; 5],
    ptr_array: bool,
) -> Result<()> {
    let name = v.entry_name();
    let smem = v.smem_bytes() as u32;
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
    // The ring lives in dynamic shared memory, beyond the 48 KiB default for big tiles: the
    // function's limit is raised once, when it is first looked up.
    let kernel = gpu.kernels()?.function_with_smem(name.as_str(), smem)?;
    let (bm, bn, threads) = v.block();
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
    let launch = LaunchConfig { grid_dim: grid, block_dim: (threads, 1, 1), shared_mem_bytes: smem };
    let dims = [g.m, g.n, g.k, g.lda, g.ldb, g.ldc].map(|x| x as u32);
    let strides = [g.stride_a, g.stride_b, g.stride_c].map(|x| x as u64);
    let e = g.epilogue;
    let flags = e.flags() | if ptr_array { kg::PTR_ARRAY } else { 0 };
    let mut lb = cs.launch_builder(&kernel.func);
    for p in &ptrs {
        lb.arg(p);
    }
    for x in &dims {
        lb.arg(x);
    }
    for x in &strides {
        lb.arg(x);
    }
    lb.arg(&e.alpha).arg(&e.beta).arg(&flags);
    // SAFETY: the arguments match `gemm_entry!` in kernels-gpu/src/entry/gemm.rs (5 pointers,
    // 6 u32, 3 u64, 2 f32, 1 u32); the caller vouches for the pointers; block size and shared
    // memory are the variant's, within its register and the device's limits.
    unsafe { lb.launch(launch) }
        .ctx(|| format!("launching {} ({}x{}x{}, batch {})", name.as_str(), g.m, g.n, g.k, g.batch))?;
    Ok(())
}

/// The slice behind a CPU view.
fn host_slice<'a, T: Scalar>(v: &'a View<'_, T>) -> Result<&'a [T]> {
    match v {
        View::Cpu(s) => Ok(s),
        View::Cuda(_) => Err(Error::BackendMismatch { op: OP, what: "input", expected: "cpu", got: "cuda" }),
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn run_cpu<T: Scalar, O: Scalar>(
    cpu: &Cpu,
    g: &Gemm,
    cfg: GemmConfig,
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
    // Rows of output per rayon task (each task one packed SGEMM on its band).
    let band_rows = g.cpu_rows.unwrap_or(cfg.cpu_rows);
    super::gemm_cpu::run(cpu, g, band_rows, a, b, c, bias, d)
}
