//! The FCGP forward (`fused_gelu_fcgp_norm`): per-path products, our GEMM, assembly and norm.

use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use ferrotune_kernels::clifford::{self as kc, Algebra, Cl2, Cl3, CliffordKernel};
use rayon::prelude::*;

use super::{
    Clifford, CliffordConfig, OP, RowLaunch, check_backend, check_len, fit_to, gpu_row_kernel, planes, planes_mut,
    row_entry,
};
use crate::backend::Cpu;
use crate::buffer::{Buffer, Scalar, View, ViewMut};
use crate::error::{DriverContext, Error, Result};
use crate::ops::gemm::{Gemm, Precision, gemm};
use crate::stream::Stream;

/// Scratch of [`fused_gelu_fcgp_norm`]: the signed per-path products (`total * B * N` of
/// `T`, the GEMM's A operands) and the GEMM results (`total * B * N` f32); the backward's
/// gradient of the GEMM results (`total * B * N` of `T`, allocated by the first backward); and
/// the precision of the GEMMs for f32 inputs.
pub struct FcgpWorkspace<T: Scalar> {
    pub(super) prod: Buffer<T>,
    pub(super) d: Buffer<f32>,
    pub(super) grad: Buffer<T>,
    pub(super) precision: Precision,
}

impl<T: Scalar> FcgpWorkspace<T> {
    /// Workspace for problems up to `p`'s size on `s`'s backend; f32 GEMMs on TF32 tensor
    /// cores as in [`gemm`] (f16/bf16 always run natively on tensor cores).
    pub fn new(s: &Stream, p: &Clifford) -> Result<FcgpWorkspace<T>> {
        let len = p.tables()?.total * p.b * p.n;
        Ok(FcgpWorkspace {
            prod: Buffer::zeros(s, len)?,
            d: Buffer::zeros(s, len)?,
            grad: Buffer::zeros(s, 0)?,
            precision: Precision::AllowTf32,
        })
    }

    /// The GEMMs' precision for f32 inputs: [`Precision::Strict`] for exact f32 products.
    pub fn with_precision(mut self, precision: Precision) -> FcgpWorkspace<T> {
        self.precision = precision;
        self
    }
}

/// The fully connected variant: `o_c[b, m] = sum over paths p of ± sum_n x_i[b, n] y_k[b, n]
/// W_p[n, m]` on the gated inputs, then the per-grade norm. `w` is `(W, N, N)`. Runs the
/// per-path products, one strided-batched GEMM per run of consecutive paths with the same
/// number of output components (ours: TF32 tensor cores for f32 unless the workspace asks for
/// exact f32, tensor cores with f32 results in f16/bf16), then the assembly and norm. The backward is
/// [`super::fused_gelu_fcgp_norm_backward`].
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
    let cfg = fit_to(s, cfg, &row_entry(CliffordKernel::FcgpAssemble, p.dim, T::DTYPE, cfg.variant))?;
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
    products(s, p, cfg, x, y, &mut ws.prod)?;
    forward_gemms(s, p, w, ws)?;
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

/// Step 1 of the forward (and backward): the signed per-path products of the gated inputs
/// into `prod` (`total * B * N`; sizes checked by the caller).
pub(super) fn products<T: Scalar>(
    s: &Stream,
    p: &Clifford,
    cfg: &CliffordConfig,
    x: &View<'_, T>,
    y: &View<'_, T>,
    prod: &mut Buffer<T>,
) -> Result<()> {
    let plane = p.b * p.n;
    match (s, x, y, prod) {
        (Stream::Cpu(cpu), View::Cpu(x), View::Cpu(y), Buffer::Cpu(prod)) => {
            match p.dim {
                2 => cpu_products::<Cl2, T>(cpu, p, cfg, x, y, prod),
                _ => cpu_products::<Cl3, T>(cpu, p, cfg, x, y, prod),
            }
            Ok(())
        }
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
            // elements, the workspace at least total * B * N (checked by the caller).
            unsafe { lb.launch(launch) }.ctx(|| format!("launching {name}"))?;
            drop((gx, gy, gp));
            Ok(())
        }
        _ => Err(Error::BackendMismatch { op: OP, what: "FCGP operands", expected: s.backend_name(), got: "mixed" }),
    }
}

/// The runs of consecutive paths with the same output component count, as `(first, end, cdim)`:
/// one strided-batched GEMM each.
pub(super) fn path_runs(p: &Clifford) -> Result<Vec<(usize, usize, usize)>> {
    let t = p.tables()?;
    let mut runs = Vec::new();
    let mut p0 = 0;
    while p0 < t.w {
        let cd = t.cdim[p0];
        let mut p1 = p0 + 1;
        while p1 < t.w && t.cdim[p1] == cd {
            p1 += 1;
        }
        runs.push((p0, p1, cd));
        p0 = p1;
    }
    Ok(runs)
}

/// Step 2: `d_p = prod_p W_p` per path (rows `cdim * B`, `N x N` weights), into `ws.d` (f32).
pub(super) fn forward_gemms<T: Scalar>(
    s: &Stream,
    p: &Clifford,
    w: &View<'_, T>,
    ws: &mut FcgpWorkspace<T>,
) -> Result<()> {
    let t = p.tables()?;
    let plane = p.b * p.n;
    for (p0, p1, cd) in path_runs(p)? {
        let (a0, rows) = (t.offset[p0] * plane, cd * p.b);
        let g = Gemm::new(rows, p.n, p.n).batched(p1 - p0).precision(ws.precision);
        let a = ws.prod.view(a0..t.total * plane)?;
        let bw = w.slice(p0 * p.n * p.n..)?;
        let mut d = ws.d.view_mut(a0..t.total * plane)?;
        gemm::<T, f32>(s, &g, &a, &bw, None, None, &mut d)?;
    }
    Ok(())
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
            super::cpu_loops::products_rows::<A, T>(xc, yc, &mut pc);
        })
    });
}

fn cpu_assemble<A: Algebra, T: Scalar>(cpu: &Cpu, p: &Clifford, cfg: &CliffordConfig, d: &[f32], out: &mut [T]) {
    let (plane, chunk) = (p.b * p.n, cfg.cpu_rows * p.n);
    let ds = planes(d, A::TOTAL, plane, chunk);
    let os = planes_mut(out, A::C, plane, chunk);
    cpu.install(|| {
        os.into_par_iter().zip(ds.par_iter()).for_each(|(mut o, dc)| {
            let mut scratch = vec![0.0f32; A::C * kc::padded(p.n)];
            super::cpu_loops::assemble_rows::<A, T>(dc, &mut o, p.n, p.normalize, &mut scratch);
        })
    });
}
