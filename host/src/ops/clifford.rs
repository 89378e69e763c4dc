//! Clifford-algebra layer ops (the Flash Clifford family) for Cl(2,0) and Cl(3,0):
//! `fused_gelu_sgp_norm` (forward and backward) and `fused_gelu_fcgp_norm` (forward), in f32,
//! f16 and bf16 (f32 maths). Tensors are `(C, B, N)` (component, batch, feature), contiguous.
//! Launch parameters are a [`CliffordConfig`] the tuner can sweep.

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg, SyncOnDrop};
use ferrotune_kernels::clifford::{self as kc, Algebra, Cl2, Cl3, CliffordKernel, ROW_VARIANTS, RowVariant, Tables};
use rayon::prelude::*;

pub use ferrotune_kernels::clifford::RowVariant as CliffordVariant;

use crate::DType;
use crate::backend::{Cpu, Gpu};
use crate::buffer::{Buffer, Scalar, View, ViewMut};
use crate::device::DeviceInfo;
use crate::error::{DriverContext, Error, Result};
use crate::ops::gemm::{Gemm, Precision, gemm};
use crate::stream::Stream;

const OP: &str = "clifford";
/// Bytes of team-reduction scratch before the weights in dynamic shared memory (see
/// kernels-gpu/src/entry/clifford.rs).
const SCRATCH_BYTES: usize = 1024;

/// One problem: the algebra Cl(`dim`,0) (2 or 3), `b` batch rows, `n` features, and whether
/// the per-grade RMS norm is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Clifford {
    pub dim: u32,
    pub b: usize,
    pub n: usize,
    pub normalize: bool,
}

impl Clifford {
    pub fn new(dim: u32, b: usize, n: usize, normalize: bool) -> Clifford {
        Clifford { dim, b, n, normalize }
    }

    /// The algebra's tables; an error for a dimension other than 2 or 3.
    pub fn tables(&self) -> Result<&'static Tables> {
        kc::tables_of(self.dim)
            .ok_or_else(|| Error::InvalidConfig { op: OP, why: format!("dimension {} (only 2 and 3)", self.dim) })
    }

    /// Elements of one multivector tensor (`C * B * N`).
    pub fn mv_len(&self) -> Result<usize> {
        let t = self.tables()?;
        t.c.checked_mul(self.b)
            .and_then(|v| v.checked_mul(self.n))
            .ok_or_else(|| Error::InvalidConfig { op: OP, why: "C * B * N overflows".into() })
    }

    /// Elements of the SGP weights (`N * W`).
    pub fn sgp_weights_len(&self) -> Result<usize> {
        Ok(self.n * self.tables()?.w)
    }

    /// Elements of the FCGP weights (`W * N * N`).
    pub fn fcgp_weights_len(&self) -> Result<usize> {
        Ok(self.tables()?.w * self.n * self.n)
    }
}

/// How the row kernels (forward, FCGP assembly) and the backward are launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CliffordConfig {
    /// Threads per block: a power of two in 32..=1024.
    pub threads: u32,
    /// Batch rows a block works on at once (the batch block): a power of two dividing
    /// `threads`; each row gets a team of `threads / rows_per_block` threads covering its N
    /// features.
    pub rows_per_block: u32,
    /// Accesses of 4 features or 1, and how many a thread keeps in registers per row (0: two
    /// passes). A compiled variant ([`ROW_VARIANTS`]); the backward uses only `vec`.
    pub variant: RowVariant,
    /// 0: one block per group of rows. k > 0: at most k blocks per SM, each looping over rows.
    pub blocks_per_sm: u32,
    /// Batch rows per rayon task on the CPU backend.
    pub cpu_rows: usize,
}

impl CliffordConfig {
    /// The built-in choice for `p` in `dtype` (not yet measured; the tuner's starting point):
    /// 4-feature accesses in 2D, teams of at most 256 threads per row; in 3D one feature per
    /// access (the 4-wide 3D variants need 127 registers per thread and more, see `cargo
    /// xtask ptx`) and teams of at most 512, keeping as few accesses per thread as that
    /// allows (registers grow with them); blocks of at least 256 threads; at most 4 blocks per
    /// SM (each block stages the weights once).
    pub fn heuristic(p: &Clifford, _dtype: DType, device: Option<&DeviceInfo>) -> CliffordConfig {
        let vec = p.dim == 2 && p.n.is_multiple_of(4);
        let lanes = if vec { 4 } else { 1 };
        let max_team = if vec { 256 } else { 512 };
        let accesses = p.n.div_ceil(lanes).max(1);
        let vpts: &[u32] = if vec { &[1] } else { &[1, 2, 4] };
        let mut variant = RowVariant { vec, vpt: 0 };
        let mut team = accesses.next_power_of_two().min(max_team);
        for &vpt in vpts {
            let t = accesses.div_ceil(vpt as usize).next_power_of_two();
            if t <= max_team {
                variant.vpt = vpt;
                team = t;
                break;
            }
        }
        let threads = (team as u32).max(256).min(device.map_or(1024, |d| d.max_threads_per_block));
        CliffordConfig {
            threads,
            rows_per_block: threads / team as u32,
            variant,
            blocks_per_sm: 4,
            cpu_rows: (4096 / p.n.max(1)).max(1),
        }
    }

    /// The config's form for the backward kernels: they keep nothing in registers across a row
    /// (the two-pass form of the variant, whose rows any team size covers), and their register
    /// use (up to 250 per thread in 3D) allows at most 256 threads per block.
    pub fn backward_form(mut self) -> CliffordConfig {
        self.variant.vpt = 0;
        let team = self.team().min(256);
        self.threads = self.threads.min(256).max(team);
        self.rows_per_block = self.threads / team;
        self
    }

    /// Threads per row.
    pub fn team(&self) -> u32 {
        self.threads / self.rows_per_block.max(1)
    }

    /// Checks the config against the compiled variants, the device and the problem.
    pub fn validate(&self, p: &Clifford, device: Option<&DeviceInfo>) -> Result<()> {
        let bad = |why: String| Err(Error::InvalidConfig { op: OP, why });
        let max_threads = device.map_or(1024, |d| d.max_threads_per_block);
        if !self.threads.is_power_of_two() || self.threads < 32 || self.threads > max_threads {
            return bad(format!("threads per block {} must be a power of two in 32..={max_threads}", self.threads));
        }
        if !self.rows_per_block.is_power_of_two() || self.rows_per_block > self.threads {
            return bad(format!("rows per block {} must be a power of two up to threads", self.rows_per_block));
        }
        if !ROW_VARIANTS.contains(&self.variant) {
            return bad(format!("variant {:?} is not compiled into the PTX (see ROW_VARIANTS)", self.variant));
        }
        if self.variant.vec && !p.n.is_multiple_of(4) {
            return bad(format!("4-feature accesses need N % 4 == 0, N is {}", p.n));
        }
        if let Some(max) = self.variant.max_features(self.team() as usize)
            && p.n > max
        {
            return bad(format!(
                "{} threads per row keeping {} accesses of {} cover {max} features, N is {}",
                self.team(),
                self.variant.vpt,
                self.variant.lanes(),
                p.n
            ));
        }
        if self.cpu_rows == 0 {
            return bad("cpu_rows must be at least 1".into());
        }
        Ok(())
    }

    /// Every config the tuner may try for `p` on the GPU: compiled variants x block sizes x
    /// batch blocks x grid policies, keeping those that cover N.
    pub fn gpu_space(p: &Clifford) -> Vec<CliffordConfig> {
        let mut v = Vec::new();
        for variant in ROW_VARIANTS {
            for threads in [64, 128, 256, 512, 1024] {
                let mut rows = 1;
                while rows <= threads {
                    for blocks_per_sm in [0, 2, 4, 8] {
                        let c = CliffordConfig { threads, rows_per_block: rows, variant, blocks_per_sm, cpu_rows: 16 };
                        if c.validate(p, None).is_ok() {
                            v.push(c);
                        }
                    }
                    rows *= 2;
                }
            }
        }
        v
    }
}

/// The entry point of a row kernel.
pub fn row_entry(kernel: CliffordKernel, dim: u32, dtype: DType, v: RowVariant) -> String {
    kc::row_entry_name(kernel, dim, dtype, v).as_str().to_string()
}

/// Every Clifford entry point in the PTX (the host launches each of them for some input).
pub fn all_entries() -> Vec<String> {
    let mut v = Vec::new();
    for dim in [2, 3] {
        for dt in DType::ALL {
            for var in ROW_VARIANTS {
                v.push(row_entry(CliffordKernel::Forward, dim, dt, var));
                v.push(row_entry(CliffordKernel::FcgpAssemble, dim, dt, var));
            }
            for lanes in ["v4", "v1"] {
                v.push(format!("ft_clifford_bwd_d{dim}_{}_{lanes}", dt.name()));
            }
            v.push(format!("ft_clifford_fcgp_prod_d{dim}_{}", dt.name()));
        }
    }
    for dt in DType::ALL {
        v.push(format!("ft_clifford_dw_reduce_{}", dt.name()));
    }
    v
}

fn check_backend(s: &Stream, what: &'static str, got: &'static str) -> Result<()> {
    if got != s.backend_name() {
        return Err(Error::BackendMismatch { op: OP, what, expected: s.backend_name(), got });
    }
    Ok(())
}

/// Exact length for a tensor the op reads or writes whole.
fn check_len(what: &'static str, got: usize, want: usize) -> Result<()> {
    if got < want {
        return Err(Error::BufferTooSmall { op: OP, what, needed: want, got });
    }
    if got != want {
        return Err(Error::ShapeMismatch { op: OP, what, expected: want, got });
    }
    Ok(())
}

/// Forward of the weighted geometric product layer with the launch config from the heuristic:
/// `out = norm(w-product(gelu_gate(x), gelu_gate(y)))`. `x`, `y`, `out`: `(C, B, N)`;
/// `w`: `(N, W)`.
pub fn fused_gelu_sgp_norm<T: Scalar>(
    s: &Stream,
    p: &Clifford,
    x: &View<'_, T>,
    y: &View<'_, T>,
    w: &View<'_, T>,
    out: &mut ViewMut<'_, T>,
) -> Result<()> {
    let cfg = CliffordConfig::heuristic(p, T::DTYPE, s.gpu().map(|g| g.info()));
    run_sgp_forward(s, p, &cfg, x, y, w, out)
}

/// [`fused_gelu_sgp_norm`] with an explicit config.
pub fn run_sgp_forward<T: Scalar>(
    s: &Stream,
    p: &Clifford,
    cfg: &CliffordConfig,
    x: &View<'_, T>,
    y: &View<'_, T>,
    w: &View<'_, T>,
    out: &mut ViewMut<'_, T>,
) -> Result<()> {
    let len = p.mv_len()?;
    for (what, v) in [("x", x), ("y", y), ("w", w)] {
        check_backend(s, what, v.backend_name())?;
    }
    check_backend(s, "out", out.backend_name())?;
    check_len("x", x.len(), len)?;
    check_len("y", y.len(), len)?;
    check_len("w (N x W)", w.len(), p.sgp_weights_len()?)?;
    check_len("out", out.len(), len)?;
    cfg.validate(p, s.gpu().map(|g| g.info()))?;
    if len == 0 {
        return Ok(());
    }
    match (s, x, y, w, out) {
        (Stream::Cpu(cpu), View::Cpu(x), View::Cpu(y), View::Cpu(w), ViewMut::Cpu(out)) => {
            match p.dim {
                2 => cpu_forward::<Cl2, T>(cpu, p, cfg, x, y, w, out),
                _ => cpu_forward::<Cl3, T>(cpu, p, cfg, x, y, w, out),
            }
            Ok(())
        }
        (Stream::Cuda { stream, gpu }, View::Cuda(x), View::Cuda(y), View::Cuda(w), ViewMut::Cuda(out)) => {
            let (px, gx) = x.device_ptr(stream);
            let (py, gy) = y.device_ptr(stream);
            let (pw, gw) = w.device_ptr(stream);
            let (po, go) = out.device_ptr_mut(stream);
            let r =
                gpu_row_kernel::<T>(stream, gpu, p, cfg, RowLaunch::Forward { x: px, y: py, w: pw }, po, [px, py, po]);
            drop((gx, gy, gw, go));
            r
        }
        _ => unreachable!("every operand's backend was matched to the stream's"),
    }
}

/// Splits each component plane of `len = C * B * N` elements into row chunks of
/// `rows * n`: one `Vec` of `C` slices per chunk.
fn planes<T>(x: &[T], c: usize, plane: usize, chunk: usize) -> Vec<Vec<&[T]>> {
    let per: Vec<Vec<&[T]>> = x.chunks(plane).take(c).map(|pl| pl.chunks(chunk).collect()).collect();
    transpose(per)
}

fn planes_mut<T>(x: &mut [T], c: usize, plane: usize, chunk: usize) -> Vec<Vec<&mut [T]>> {
    let per: Vec<Vec<&mut [T]>> = x.chunks_mut(plane).take(c).map(|pl| pl.chunks_mut(chunk).collect()).collect();
    transpose(per)
}

fn transpose<S>(per: Vec<Vec<S>>) -> Vec<Vec<S>> {
    let chunks = per.first().map_or(0, |v| v.len());
    let mut out: Vec<Vec<S>> = (0..chunks).map(|_| Vec::with_capacity(per.len())).collect();
    for comp in per {
        for (i, s) in comp.into_iter().enumerate() {
            out[i].push(s);
        }
    }
    out
}

fn cpu_forward<A: Algebra, T: Scalar>(
    cpu: &Cpu,
    p: &Clifford,
    cfg: &CliffordConfig,
    x: &[T],
    y: &[T],
    w: &[T],
    out: &mut [T],
) {
    let (plane, chunk) = (p.b * p.n, cfg.cpu_rows * p.n);
    let xs = planes(x, A::C, plane, chunk);
    let ys = planes(y, A::C, plane, chunk);
    let os = planes_mut(out, A::C, plane, chunk);
    cpu.install(|| {
        os.into_par_iter().zip(xs.par_iter().zip(ys.par_iter())).for_each(|(mut o, (xc, yc))| {
            let mut scratch = vec![0.0f32; A::C * p.n];
            kc::fwd_rows::<A, T>(xc, yc, w, &mut o, p.n, p.normalize, &mut scratch);
        })
    });
}

/// What a row-kernel launch computes.
enum RowLaunch {
    Forward { x: u64, y: u64, w: u64 },
    Assemble { d: u64 },
}

/// Blocks for `rows` batch rows.
fn grid(b: usize, cfg: &CliffordConfig, sm_count: u32) -> u32 {
    let mut blocks = b.div_ceil(cfg.rows_per_block as usize).max(1);
    if cfg.blocks_per_sm > 0 {
        blocks = blocks.min(cfg.blocks_per_sm as usize * sm_count as usize);
    }
    blocks.min(i32::MAX as usize) as u32
}

/// The variant that runs: the config's, or its one-feature form when a pointer is not aligned
/// to 4 elements (same features per thread).
fn runnable_variant<T: Scalar>(v: RowVariant, ptrs: &[u64]) -> RowVariant {
    let align = 4 * T::DTYPE.size_bytes() as u64;
    if v.vec && !ptrs.iter().all(|p| p % align == 0) {
        let vpt = if v.vpt == 1 { 4 } else { v.vpt };
        return RowVariant { vec: false, vpt };
    }
    v
}

/// Raises the dynamic shared-memory limit of `kernel` to `bytes` when above the default, or
/// says why it cannot.
fn opt_in_smem(gpu: &Gpu, kernel: &crate::module::Kernel, name: &str, bytes: usize) -> Result<u32> {
    let limit = gpu.info.shared_mem_per_block_optin as usize;
    if bytes > limit {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!(
                "{name} needs {bytes} bytes of shared memory for the weights of N features, the device allows \
                 {limit}: N is too large for this kernel"
            ),
        });
    }
    if bytes > 48 * 1024 {
        kernel
            .func
            .set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes as i32)
            .ctx(|| format!("raising the shared-memory limit of {name}"))?;
    }
    Ok(bytes as u32)
}

fn check_threads(kernel: &crate::module::Kernel, name: &str, threads: u32) -> Result<()> {
    if threads > kernel.max_threads {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!(
                "{name} uses {} registers per thread, so at most {} threads per block; {threads} requested",
                kernel.registers, kernel.max_threads
            ),
        });
    }
    Ok(())
}

fn gpu_row_kernel<T: Scalar>(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    p: &Clifford,
    cfg: &CliffordConfig,
    what: RowLaunch,
    out: u64,
    ptrs: [u64; 3],
) -> Result<()> {
    let t = p.tables()?;
    let kind = match what {
        RowLaunch::Forward { .. } => CliffordKernel::Forward,
        RowLaunch::Assemble { .. } => CliffordKernel::FcgpAssemble,
    };
    let variant = runnable_variant::<T>(cfg.variant, &ptrs);
    let name = row_entry(kind, p.dim, T::DTYPE, variant);
    let kernel = gpu.kernels()?.function(&name)?;
    check_threads(&kernel, &name, cfg.threads)?;
    let smem_bytes = match kind {
        CliffordKernel::Forward => SCRATCH_BYTES + 4 * t.w * p.n,
        _ => SCRATCH_BYTES,
    };
    let smem = opt_in_smem(gpu, &kernel, &name, smem_bytes)?;
    let launch = LaunchConfig {
        grid_dim: (grid(p.b, cfg, gpu.info.sm_count), 1, 1),
        block_dim: (cfg.threads, 1, 1),
        shared_mem_bytes: smem,
    };
    let (b, n, norm, team) = (p.b, p.n, p.normalize as u32, cfg.team());
    let mut lb = cs.launch_builder(&kernel.func);
    match &what {
        RowLaunch::Forward { x, y, w } => lb.arg(x).arg(y).arg(w).arg(&out),
        RowLaunch::Assemble { d } => lb.arg(d).arg(&out),
    };
    lb.arg(&b).arg(&n).arg(&norm).arg(&team);
    // SAFETY: the arguments match `fwd_entry!` / `asm_entry!` in kernels-gpu/src/entry/clifford.rs
    // (pointers as u64, b and n as usize, normalize and team as u32); the caller checked that
    // x, y and out hold C * B * N elements, w N * W (the FCGP results `total * B * N` f32);
    // `validate` proved team is a power of two dividing threads and that team * vpt * lanes
    // covers N; 4-feature variants run only with N % 4 == 0 and aligned pointers; the shared
    // memory holds the scratch and the weights.
    unsafe { lb.launch(launch) }.ctx(|| format!("launching {name} on {b} x {n}"))?;
    Ok(())
}

/// Elements of the backward's workspace for `p` and `cfg` on this stream (per-block weight
/// gradient partials; 0 on the CPU).
pub fn sgp_backward_workspace_len(s: &Stream, p: &Clifford, cfg: &CliffordConfig) -> Result<usize> {
    Ok(match s.gpu() {
        Some(g) => grid(p.b, cfg, g.info.sm_count) as usize * p.sgp_weights_len()?,
        None => 0,
    })
}

/// Backward of [`fused_gelu_sgp_norm`] (heuristic config): given `go = dL/dout`, writes
/// `dx`, `dy` (`(C, B, N)`) and `dw` (`(N, W)`). `workspace` holds the per-block weight
/// gradients; it is reallocated when too small, so keep it across calls.
#[allow(clippy::too_many_arguments)]
pub fn fused_gelu_sgp_norm_backward<T: Scalar>(
    s: &Stream,
    p: &Clifford,
    x: &View<'_, T>,
    y: &View<'_, T>,
    w: &View<'_, T>,
    go: &View<'_, T>,
    dx: &mut ViewMut<'_, T>,
    dy: &mut ViewMut<'_, T>,
    dw: &mut ViewMut<'_, T>,
    workspace: &mut Buffer<f32>,
) -> Result<()> {
    let cfg = CliffordConfig::heuristic(p, T::DTYPE, s.gpu().map(|g| g.info())).backward_form();
    run_sgp_backward(s, p, &cfg, x, y, w, go, dx, dy, dw, workspace)
}

/// [`fused_gelu_sgp_norm_backward`] with an explicit config (`variant.vec` picks 4-feature
/// accesses; `vpt` is not used).
#[allow(clippy::too_many_arguments)]
pub fn run_sgp_backward<T: Scalar>(
    s: &Stream,
    p: &Clifford,
    cfg: &CliffordConfig,
    x: &View<'_, T>,
    y: &View<'_, T>,
    w: &View<'_, T>,
    go: &View<'_, T>,
    dx: &mut ViewMut<'_, T>,
    dy: &mut ViewMut<'_, T>,
    dw: &mut ViewMut<'_, T>,
    workspace: &mut Buffer<f32>,
) -> Result<()> {
    let len = p.mv_len()?;
    for (what, v) in [("x", x), ("y", y), ("w", w), ("grad_out", go)] {
        check_backend(s, what, v.backend_name())?;
    }
    for (what, v) in [("dx", &*dx), ("dy", &*dy), ("dw", &*dw)] {
        check_backend(s, what, v.backend_name())?;
    }
    check_backend(s, "workspace", workspace.backend_name())?;
    let wl = p.sgp_weights_len()?;
    check_len("x", x.len(), len)?;
    check_len("y", y.len(), len)?;
    check_len("grad_out", go.len(), len)?;
    check_len("w (N x W)", w.len(), wl)?;
    check_len("dx", dx.len(), len)?;
    check_len("dy", dy.len(), len)?;
    check_len("dw (N x W)", dw.len(), wl)?;
    let mut cfg = *cfg;
    cfg.variant.vpt = 0;
    cfg.validate(p, s.gpu().map(|g| g.info()))?;
    if wl == 0 {
        return Ok(());
    }
    match s {
        Stream::Cpu(cpu) => {
            let (View::Cpu(x), View::Cpu(y), View::Cpu(w), View::Cpu(go)) = (x, y, w, go) else {
                unreachable!("backends matched above")
            };
            let (ViewMut::Cpu(dx), ViewMut::Cpu(dy), ViewMut::Cpu(dw)) = (dx, dy, dw) else {
                unreachable!("backends matched above")
            };
            match p.dim {
                2 => cpu_backward::<Cl2, T>(cpu, p, &cfg, [*x, *y, *go], w, dx, dy, dw),
                _ => cpu_backward::<Cl3, T>(cpu, p, &cfg, [*x, *y, *go], w, dx, dy, dw),
            }
            Ok(())
        }
        Stream::Cuda { stream, gpu } => {
            let need = sgp_backward_workspace_len(s, p, &cfg)?;
            if workspace.len() < need {
                *workspace = Buffer::zeros(s, need)?;
            }
            gpu_backward::<T>(stream, gpu, p, &cfg, [x, y, w, go], dx, dy, dw, workspace)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn cpu_backward<A: Algebra, T: Scalar>(
    cpu: &Cpu,
    p: &Clifford,
    cfg: &CliffordConfig,
    [x, y, go]: [&[T]; 3],
    w: &[T],
    dx: &mut [T],
    dy: &mut [T],
    dw: &mut [T],
) {
    let (plane, chunk) = (p.b * p.n, cfg.cpu_rows * p.n);
    if plane == 0 {
        // No rows: the weight gradient is a sum of nothing.
        dw.iter_mut().for_each(|d| *d = T::from_f32(0.0));
        return;
    }
    let xs = planes(x, A::C, plane, chunk);
    let ys = planes(y, A::C, plane, chunk);
    let gs = planes(go, A::C, plane, chunk);
    let dxs = planes_mut(dx, A::C, plane, chunk);
    let dys = planes_mut(dy, A::C, plane, chunk);
    let nw = p.n * A::W;
    // One f32 weight gradient per task, summed in task order (deterministic).
    let parts: Vec<Vec<f32>> = cpu.install(|| {
        dxs.into_par_iter()
            .zip(dys.into_par_iter())
            .zip(xs.par_iter().zip(ys.par_iter()).zip(gs.par_iter()))
            .map(|((mut dxc, mut dyc), ((xc, yc), gc))| {
                let mut part = vec![0.0f32; nw];
                kc::bwd_rows::<A, T>(xc, yc, gc, w, &mut dxc, &mut dyc, &mut part, p.n, p.normalize);
                part
            })
            .collect()
    });
    for (i, d) in dw.iter_mut().enumerate() {
        *d = T::from_f32(parts.iter().map(|v| v[i]).sum());
    }
}

/// The device pointer of a CUDA view, with the guard that records its use on the stream.
fn device_ptr<'a, T: Scalar>(v: &'a View<'_, T>, cs: &'a CudaStream) -> Result<(u64, SyncOnDrop<'a>)> {
    match v {
        View::Cuda(v) => Ok(v.device_ptr(cs)),
        View::Cpu(_) => Err(Error::BackendMismatch { op: OP, what: "input", expected: "cuda", got: "cpu" }),
    }
}

#[allow(clippy::too_many_arguments)]
fn gpu_backward<T: Scalar>(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    p: &Clifford,
    cfg: &CliffordConfig,
    [x, y, w, go]: [&View<'_, T>; 4],
    dx: &mut ViewMut<'_, T>,
    dy: &mut ViewMut<'_, T>,
    dw: &mut ViewMut<'_, T>,
    workspace: &mut Buffer<f32>,
) -> Result<()> {
    let t = p.tables()?;
    let (px, gx) = device_ptr(x, cs)?;
    let (py, gy) = device_ptr(y, cs)?;
    let (pw, gw) = device_ptr(w, cs)?;
    let (pg, gg) = device_ptr(go, cs)?;
    let (ViewMut::Cuda(dx), ViewMut::Cuda(dy), ViewMut::Cuda(dw), Buffer::Cuda(ws)) = (dx, dy, dw, workspace) else {
        return Err(Error::BackendMismatch { op: OP, what: "output", expected: "cuda", got: "cpu" });
    };
    let (pdx, gdx) = dx.device_ptr_mut(cs);
    let (pdy, gdy) = dy.device_ptr_mut(cs);
    let (pdw, gdw) = dw.device_ptr_mut(cs);
    let (pws, gws) = ws.device_ptr_mut(cs);
    let variant = runnable_variant::<T>(RowVariant { vec: cfg.variant.vec, vpt: 0 }, &[px, py, pg, pdx, pdy]);
    let name = format!("ft_clifford_bwd_d{}_{}_{}", p.dim, T::DTYPE.name(), if variant.vec { "v4" } else { "v1" });
    let kernel = gpu.kernels()?.function(&name)?;
    check_threads(&kernel, &name, cfg.threads)?;
    let smem = opt_in_smem(gpu, &kernel, &name, SCRATCH_BYTES + 8 * t.w * p.n)?;
    let blocks = grid(p.b, cfg, gpu.info.sm_count);
    let launch = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (cfg.threads, 1, 1), shared_mem_bytes: smem };
    let (b, n, norm, team) = (p.b, p.n, p.normalize as u32, cfg.team());
    let mut lb = cs.launch_builder(&kernel.func);
    lb.arg(&px).arg(&py).arg(&pg).arg(&pw).arg(&pdx).arg(&pdy).arg(&pws);
    lb.arg(&b).arg(&n).arg(&norm).arg(&team);
    // SAFETY: matches `bwd_entry!` (7 pointers, b and n usize, normalize and team u32); x, y,
    // go, dx, dy hold C * B * N elements, w N * W, the workspace `blocks * W * N` f32 (grown
    // above); team, lanes and alignment as for the forward; shared memory holds the scratch,
    // the weights and their gradient.
    unsafe { lb.launch(launch) }.ctx(|| format!("launching {name} on {b} x {n}"))?;

    let rname = format!("ft_clifford_dw_reduce_{}", T::DTYPE.name());
    let rk = gpu.kernels()?.function(&rname)?;
    let total = t.w * p.n;
    let rthreads = 256u32.min(rk.max_threads);
    let rlaunch = LaunchConfig {
        grid_dim: (total.div_ceil(rthreads as usize).max(1) as u32, 1, 1),
        block_dim: (rthreads, 1, 1),
        shared_mem_bytes: 0,
    };
    let (nblocks, nw) = (blocks as usize, t.w);
    let mut lb = cs.launch_builder(&rk.func);
    lb.arg(&pws).arg(&pdw).arg(&nblocks).arg(&n).arg(&nw);
    // SAFETY: matches `reduce_entry!` (2 pointers, 3 usize); the workspace holds `blocks`
    // partials of W * N f32 written by the launch before on the same stream; dw holds N * W.
    unsafe { lb.launch(rlaunch) }.ctx(|| format!("launching {rname}"))?;
    drop((gx, gy, gw, gg, gdx, gdy, gdw, gws));
    Ok(())
}

/// Scratch of [`fused_gelu_fcgp_norm`]: the signed per-path products (`total * B * N` of
/// `T`, the GEMM's A operands) and the GEMM results (`total * B * N` f32).
pub struct FcgpWorkspace<T: Scalar> {
    prod: Buffer<T>,
    d: Buffer<f32>,
}

impl<T: Scalar> FcgpWorkspace<T> {
    /// Workspace for problems up to `p`'s size on `s`'s backend.
    pub fn new(s: &Stream, p: &Clifford) -> Result<FcgpWorkspace<T>> {
        let len = p.tables()?.total * p.b * p.n;
        Ok(FcgpWorkspace { prod: Buffer::zeros(s, len)?, d: Buffer::zeros(s, len)? })
    }
}

/// The fully connected variant: `o_c[b, m] = sum over paths p of ± sum_n x_i[b, n] y_k[b, n]
/// W_p[n, m]` on the gated inputs, then the per-grade norm. `w` is `(W, N, N)`. Runs the
/// per-path products, one strided-batched GEMM per run of consecutive paths with the same
/// number of output components (ours: FFMA in f32, tensor cores with f32 results in
/// f16/bf16), then the assembly and norm. Forward only.
#[allow(clippy::too_many_arguments)]
pub fn fused_gelu_fcgp_norm<T: Scalar>(
    s: &Stream,
    p: &Clifford,
    x: &View<'_, T>,
    y: &View<'_, T>,
    w: &View<'_, T>,
    ws: &mut FcgpWorkspace<T>,
    out: &mut ViewMut<'_, T>,
) -> Result<()> {
    let cfg = CliffordConfig::heuristic(p, T::DTYPE, s.gpu().map(|g| g.info()));
    run_fcgp_forward(s, p, &cfg, x, y, w, ws, out)
}

/// [`fused_gelu_fcgp_norm`] with an explicit config for the assembly.
#[allow(clippy::too_many_arguments)]
pub fn run_fcgp_forward<T: Scalar>(
    s: &Stream,
    p: &Clifford,
    cfg: &CliffordConfig,
    x: &View<'_, T>,
    y: &View<'_, T>,
    w: &View<'_, T>,
    ws: &mut FcgpWorkspace<T>,
    out: &mut ViewMut<'_, T>,
) -> Result<()> {
    let t = p.tables()?;
    let len = p.mv_len()?;
    for (what, v) in [("x", x), ("y", y), ("w", w)] {
        check_backend(s, what, v.backend_name())?;
    }
    check_backend(s, "out", out.backend_name())?;
    check_backend(s, "workspace", ws.d.backend_name())?;
    check_len("x", x.len(), len)?;
    check_len("y", y.len(), len)?;
    check_len("w (W x N x N)", w.len(), p.fcgp_weights_len()?)?;
    check_len("out", out.len(), len)?;
    let wsl = t.total * p.b * p.n;
    if ws.prod.len() < wsl || ws.d.len() < wsl {
        return Err(Error::BufferTooSmall { op: OP, what: "FCGP workspace", needed: wsl, got: ws.d.len() });
    }
    cfg.validate(p, s.gpu().map(|g| g.info()))?;
    if len == 0 {
        return Ok(());
    }
    let plane = p.b * p.n;
    // 1. Signed per-path products.
    match (s, x, y, &mut ws.prod) {
        (Stream::Cpu(cpu), View::Cpu(x), View::Cpu(y), Buffer::Cpu(prod)) => match p.dim {
            2 => cpu_products::<Cl2, T>(cpu, p, cfg, x, y, prod),
            _ => cpu_products::<Cl3, T>(cpu, p, cfg, x, y, prod),
        },
        (Stream::Cuda { stream, gpu }, View::Cuda(x), View::Cuda(y), Buffer::Cuda(prod)) => {
            let name = format!("ft_clifford_fcgp_prod_d{}_{}", p.dim, T::DTYPE.name());
            let kernel = gpu.kernels()?.function(&name)?;
            let threads = 256u32.min(kernel.max_threads);
            let blocks = plane.div_ceil(threads as usize).min(gpu.info.sm_count as usize * 16).max(1) as u32;
            let (px, gx) = x.device_ptr(stream);
            let (py, gy) = y.device_ptr(stream);
            let (pp, gp) = prod.device_ptr_mut(stream);
            let launch = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
            let mut lb = stream.launch_builder(&kernel.func);
            lb.arg(&px).arg(&py).arg(&pp).arg(&p.b).arg(&p.n);
            // SAFETY: matches `prod_entry!` (3 pointers, 2 usize); x and y hold C * B * N
            // elements, the workspace at least total * B * N (checked above).
            unsafe { lb.launch(launch) }.ctx(|| format!("launching {name}"))?;
            drop((gx, gy, gp));
        }
        _ => unreachable!("backends matched above"),
    }
    // 2. One strided batch per run of consecutive paths with the same component count.
    let mut p0 = 0;
    while p0 < t.w {
        let cd = t.cdim[p0];
        let mut p1 = p0 + 1;
        while p1 < t.w && t.cdim[p1] == cd {
            p1 += 1;
        }
        let (a0, rows) = (t.offset[p0] * plane, cd * p.b);
        // Exact f32 products for f32 inputs: the op promises f32 accuracy (TF32 would not).
        let g = Gemm::new(rows, p.n, p.n).batched(p1 - p0).precision(Precision::Strict);
        let a = ws.prod.view(a0..t.total * plane)?;
        let bw = w.slice(p0 * p.n * p.n..)?;
        let mut d = ws.d.view_mut(a0..t.total * plane)?;
        gemm::<T, f32>(s, &g, &a, &bw, None, None, &mut d)?;
        p0 = p1;
    }
    // 3. Assembly and norm.
    match (s, &ws.d, out) {
        (Stream::Cpu(cpu), Buffer::Cpu(d), ViewMut::Cpu(out)) => {
            match p.dim {
                2 => cpu_assemble::<Cl2, T>(cpu, p, cfg, &d[..wsl], out),
                _ => cpu_assemble::<Cl3, T>(cpu, p, cfg, &d[..wsl], out),
            }
            Ok(())
        }
        (Stream::Cuda { stream, gpu }, Buffer::Cuda(d), ViewMut::Cuda(out)) => {
            let (pd, gd) = d.device_ptr(stream);
            let (po, go) = out.device_ptr_mut(stream);
            let r = gpu_row_kernel::<T>(stream, gpu, p, cfg, RowLaunch::Assemble { d: pd }, po, [pd, po, po]);
            drop((gd, go));
            r
        }
        _ => unreachable!("backends matched above"),
    }
}

fn cpu_products<A: Algebra, T: Scalar>(
    cpu: &Cpu,
    p: &Clifford,
    cfg: &CliffordConfig,
    x: &[T],
    y: &[T],
    prod: &mut [T],
) {
    let (plane, chunk) = (p.b * p.n, cfg.cpu_rows * p.n);
    let xs = planes(x, A::C, plane, chunk);
    let ys = planes(y, A::C, plane, chunk);
    let ps = planes_mut(&mut prod[..A::TOTAL * plane], A::TOTAL, plane, chunk);
    cpu.install(|| {
        ps.into_par_iter().zip(xs.par_iter().zip(ys.par_iter())).for_each(|(mut pc, (xc, yc))| {
            kc::fcgp_products_rows::<A, T, T>(xc, yc, &mut pc);
        })
    });
}

fn cpu_assemble<A: Algebra, T: Scalar>(cpu: &Cpu, p: &Clifford, cfg: &CliffordConfig, d: &[f32], out: &mut [T]) {
    let (plane, chunk) = (p.b * p.n, cfg.cpu_rows * p.n);
    let ds = planes(d, A::TOTAL, plane, chunk);
    let os = planes_mut(out, A::C, plane, chunk);
    cpu.install(|| {
        os.into_par_iter().zip(ds.par_iter()).for_each(|(mut o, dc)| {
            let mut scratch = vec![0.0f32; A::C * p.n];
            kc::fcgp_assemble_rows::<A, T>(dc, &mut o, p.n, p.normalize, &mut scratch);
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heuristic_is_valid_for_many_shapes() {
        for dim in [2, 3] {
            for n in [1, 3, 4, 31, 32, 100, 128, 512, 1000, 1024, 4096] {
                for dt in DType::ALL {
                    let p = Clifford::new(dim, 7, n, true);
                    let c = CliffordConfig::heuristic(&p, dt, None);
                    c.validate(&p, None).unwrap_or_else(|e| panic!("{p:?}: {c:?}: {e}"));
                }
            }
        }
    }

    #[test]
    fn space_is_valid_and_rejects_what_does_not_cover_n() {
        let p = Clifford::new(3, 64, 1024, true);
        let space = CliffordConfig::gpu_space(&p);
        assert!(!space.is_empty());
        assert!(space.iter().all(|c| c.validate(&p, None).is_ok()));
        let bad = CliffordConfig {
            threads: 64,
            rows_per_block: 1,
            variant: RowVariant { vec: false, vpt: 1 },
            blocks_per_sm: 0,
            cpu_rows: 1,
        };
        assert!(matches!(bad.validate(&p, None), Err(Error::InvalidConfig { .. })));
        let odd = Clifford::new(2, 4, 7, true);
        let vec = CliffordConfig { variant: RowVariant { vec: true, vpt: 1 }, threads: 32, ..bad };
        assert!(vec.validate(&odd, None).is_err());
    }
}
