//! The FCGP backward (`fused_gelu_fcgp_norm_backward`): dx, dy and dW. The forward's products
//! and GEMMs are recomputed, the gradient is taken through the norm (`gD`, `(C, B, N)`), and
//! the two backward GEMMs per output grade — `dProd_j = gD_j wg_jᵀ` and `dW_j = Prod_jᵀ gD_j`,
//! on the grade-grouped layout of the forward — go through our GEMM (TF32 tensor cores for f32
//! unless the workspace asks for exact f32; f16/bf16 natively). The grouped weight gradient is
//! copied back to path order, and a last kernel takes `dProd` back through the products and
//! the gate to dx and dy.

use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use ferrotune_kernels::clifford::{self as kc, Algebra, Cl2, Cl3, WPERM_GATHER, WPERM_SCATTER, fcgp_ld};
use rayon::prelude::*;

use super::fcgp::{batched, forward_gemms, grade_gemms, product_rows, products, weight_perm};
use super::{Clifford, CliffordConfig, FcgpWorkspace, OP, SCRATCH_BYTES, check_backend, check_len, planes, planes_mut};
use crate::buffer::{Buffer, Scalar, View, ViewMut};
use crate::error::{DriverContext, Error, Result};
use crate::ops::gemm::{Gemm, Layout, gemm};
use crate::stream::Stream;

/// Backward of [`super::fused_gelu_fcgp_norm`]: given `go = dL/dout` (`(C, B, N)`), writes
/// `dx`, `dy` (`(C, B, N)`) and `dw` (`(W, N, N)`). `ws` is the forward's workspace (its
/// precision applies to all five GEMMs); the first call adds the gradient scratch to it.
#[allow(clippy::too_many_arguments)]
pub fn fused_gelu_fcgp_norm_backward<T: Scalar>(
    s: &Stream,
    p: &Clifford,
    x: &View<'_, T>,
    y: &View<'_, T>,
    w: &View<'_, T>,
    go: &View<'_, T>,
    ws: &mut FcgpWorkspace<T>,
    dx: &mut ViewMut<'_, T>,
    dy: &mut ViewMut<'_, T>,
    dw: &mut ViewMut<'_, T>,
) -> Result<()> {
    let cfg = CliffordConfig::heuristic(p, T::DTYPE, s.gpu().map(|g| g.info()));
    run_fcgp_backward(s, p, &cfg, x, y, w, go, ws, dx, dy, dw)
}

/// [`fused_gelu_fcgp_norm_backward`] with an explicit config (its `cpu_rows` chunks the CPU
/// loops; the GPU kernels of the backward take their block sizes from the problem).
#[allow(clippy::too_many_arguments)]
pub fn run_fcgp_backward<T: Scalar>(
    s: &Stream,
    p: &Clifford,
    cfg: &CliffordConfig,
    x: &View<'_, T>,
    y: &View<'_, T>,
    w: &View<'_, T>,
    go: &View<'_, T>,
    ws: &mut FcgpWorkspace<T>,
    dx: &mut ViewMut<'_, T>,
    dy: &mut ViewMut<'_, T>,
    dw: &mut ViewMut<'_, T>,
) -> Result<()> {
    let t = p.tables()?;
    let len = p.mv_len()?;
    for (what, v) in [("x", x), ("y", y), ("w", w), ("grad_out", go)] {
        check_backend(s, what, v.backend_name())?;
    }
    for (what, v) in [("dx", &*dx), ("dy", &*dy), ("dw", &*dw)] {
        check_backend(s, what, v.backend_name())?;
    }
    check_backend(s, "workspace", ws.d.backend_name())?;
    let wl = p.fcgp_weights_len()?;
    for (what, got) in [("x", x.len()), ("y", y.len()), ("grad_out", go.len()), ("dx", dx.len()), ("dy", dy.len())] {
        check_len(what, got, len)?;
    }
    check_len("w (W x N x N)", w.len(), wl)?;
    check_len("dw (W x N x N)", dw.len(), wl)?;
    ws.check(p)?;
    cfg.validate(p, s.gpu().map(|g| g.info()))?;
    if wl == 0 {
        return Ok(());
    }
    if len == 0 {
        // No batch rows: the weight gradient is zero.
        let zeros = Buffer::<T>::zeros(s, wl)?;
        return crate::ops::copy(s, &zeros.all(), dw);
    }
    let ld = fcgp_ld(p.n);
    let wsl = t.total * p.b * ld;
    if ws.grad.len() < t.c * p.b * ld {
        ws.grad = Buffer::zeros(s, t.c * p.b * ld)?;
    }
    if ws.d.len() < wsl {
        ws.d = Buffer::zeros(s, wsl)?;
    }
    products(s, p, cfg, x, y, &mut ws.prod)?;
    forward_gemms(s, p, w, ws)?;
    norm_backward(s, p, cfg, go, ws)?;
    // The grouped weights again, untransposed: `dProd` then reads both operands K-major.
    weight_perm(s, p, w, &mut ws.wg.all_mut(), WPERM_GATHER)?;
    for gg in grade_gemms(p)? {
        let gd = ws.grad.view(gg.planes.0..)?;
        // dProd_j ((cdim B) x (np ld)) = gD_j ((cdim B) x N, rows of ld) wg_jᵀ: the grouped
        // weights read column-major. Into `d`, whose forward values the norm backward has used.
        let mut g = Gemm::new(gg.rows, gg.k, p.n).layouts(Layout::Row, Layout::Col).precision(ws.precision);
        (g.lda, g.ldb) = (ld, ld);
        let g = batched(g, gg.batch, [gg.planes.1, gg.w.1, gg.prod.1]);
        let mut dpr = ws.d.view_mut(gg.prod.0..wsl)?;
        gemm::<T, f32>(s, &g, &gd, &ws.wg.view(gg.w.0..)?, None, None, &mut dpr)?;
        // dW_j ((np ld) x N) = Prod_jᵀ ((np ld) x (cdim B)) gD_j, over the grouped weights
        // (this grade's dProd GEMM, which read them, is ahead of it on the stream); the rows
        // of the padding come out 0 (the products' padding is 0).
        let mut g = Gemm::new(gg.k, p.n, gg.rows).layouts(Layout::Col, Layout::Row).precision(ws.precision);
        (g.ldb, g.ldc) = (ld, ld);
        let g = batched(g, gg.batch, [gg.prod.1, gg.planes.1, gg.w.1]);
        let prod = ws.prod.view(gg.prod.0..)?;
        gemm::<T, T>(s, &g, &prod, &gd, None, None, &mut ws.wg.view_mut(gg.w.0..)?)?;
    }
    weight_perm(s, p, &ws.wg.all(), dw, WPERM_SCATTER)?;
    input_grads(s, p, cfg, x, y, &ws.d, dx, dy)
}

/// The gradient through the norm (`ws.grad`, `(C, B, N)`) from the forward GEMM results (the
/// un-normalised output, `ws.d`) and `go`.
fn norm_backward<T: Scalar>(
    s: &Stream,
    p: &Clifford,
    cfg: &CliffordConfig,
    go: &View<'_, T>,
    ws: &mut FcgpWorkspace<T>,
) -> Result<()> {
    match (s, go, &ws.d, &mut ws.grad) {
        (Stream::Cpu(cpu), View::Cpu(go), Buffer::Cpu(d), Buffer::Cpu(gd)) => {
            let f = match p.dim {
                2 => cpu_norm_bwd::<Cl2, T>,
                _ => cpu_norm_bwd::<Cl3, T>,
            };
            cpu.install(|| f(p, cfg.cpu_rows, d, go, gd));
            Ok(())
        }
        (Stream::Cuda { stream, gpu }, View::Cuda(go), Buffer::Cuda(d), Buffer::Cuda(gd)) => {
            let name = format!("ft_clifford_fcgp_nbwd_d{}_{}", p.dim, T::DTYPE.name());
            let kernel = gpu.kernels()?.function(&name)?;
            // One block per row: a power of two from 32 to 256 that covers N if it can.
            let limit = 256u32.min(kernel.max_threads);
            let mut threads = (p.n as u32).clamp(32, limit).next_power_of_two();
            while threads > limit {
                threads /= 2;
            }
            if threads < 32 {
                return Err(Error::InvalidConfig {
                    op: OP,
                    why: format!("{name} allows {} threads per block, it needs at least 32", kernel.max_threads),
                });
            }
            let blocks = p.b.min(gpu.info.sm_count as usize * 16).max(1) as u32;
            let launch = LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (threads, 1, 1),
                shared_mem_bytes: SCRATCH_BYTES as u32,
            };
            let (pd, g1) = d.device_ptr(stream);
            let (pg, g2) = go.device_ptr(stream);
            let (pgd, g3) = gd.device_ptr_mut(stream);
            let (b, n, ld, norm) = (p.b, p.n, fcgp_ld(p.n), p.normalize as u32);
            let mut lb = stream.launch_builder(&kernel.func);
            lb.arg(&pd).arg(&pg).arg(&pgd).arg(&b).arg(&n).arg(&ld).arg(&norm);
            // SAFETY: matches `fcgp_bwd_entries!` (d, go, gd, b, n, ld, normalize); d and gd
            // hold C * B * ld elements, go C * B * N (checked by the caller); the block is a
            // power of two from 32 to 256 within the kernel's limit; the scratch is the 1024
            // bytes of dynamic shared memory the block reduction uses.
            unsafe { lb.launch(launch) }.ctx(|| format!("launching {name} on {b} x {n}"))?;
            drop((g1, g2, g3));
            Ok(())
        }
        _ => Err(Error::BackendMismatch { op: OP, what: "FCGP operands", expected: s.backend_name(), got: "mixed" }),
    }
}

fn cpu_norm_bwd<A: Algebra, T: Scalar>(p: &Clifford, rows: usize, d: &[f32], go: &[T], gd: &mut [T]) {
    let ld = fcgp_ld(p.n);
    let ds = planes(d, A::C, p.b * ld, rows * ld);
    let gs = planes(go, A::C, p.b * p.n, rows * p.n);
    let outs = planes_mut(&mut gd[..A::C * p.b * ld], A::C, p.b * ld, rows * ld);
    outs.into_par_iter().zip(ds.par_iter().zip(gs.par_iter())).for_each(|(mut o, (dc, gc))| {
        kc::fcgp_norm_bwd_rows::<A, T>(dc, gc, &mut o, p.n, ld, p.normalize);
    });
}

/// dx and dy from the products' gradient (`dpr`, f32, the products' grouped layout).
#[allow(clippy::too_many_arguments)]
fn input_grads<T: Scalar>(
    s: &Stream,
    p: &Clifford,
    cfg: &CliffordConfig,
    x: &View<'_, T>,
    y: &View<'_, T>,
    dpr: &Buffer<f32>,
    dx: &mut ViewMut<'_, T>,
    dy: &mut ViewMut<'_, T>,
) -> Result<()> {
    let plane = p.b * p.n;
    match (s, x, y, dpr, dx, dy) {
        (Stream::Cpu(cpu), View::Cpu(x), View::Cpu(y), Buffer::Cpu(dpr), ViewMut::Cpu(dx), ViewMut::Cpu(dy)) => {
            let f = match p.dim {
                2 => cpu_input_grads::<Cl2, T>,
                _ => cpu_input_grads::<Cl3, T>,
            };
            cpu.install(|| f(p, cfg.cpu_rows, [x, y], dpr, dx, dy))
        }
        (
            Stream::Cuda { stream, gpu },
            View::Cuda(x),
            View::Cuda(y),
            Buffer::Cuda(dpr),
            ViewMut::Cuda(dx),
            ViewMut::Cuda(dy),
        ) => {
            let name = format!("ft_clifford_fcgp_pbwd_d{}_{}", p.dim, T::DTYPE.name());
            let kernel = gpu.kernels()?.function(&name)?;
            let threads = 256u32.min(kernel.max_threads);
            let blocks = plane.div_ceil(threads as usize).min(gpu.info.sm_count as usize * 16).max(1) as u32;
            let launch = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
            let (px, g1) = x.device_ptr(stream);
            let (py, g2) = y.device_ptr(stream);
            let (pd, g3) = dpr.device_ptr(stream);
            let (pdx, g4) = dx.device_ptr_mut(stream);
            let (pdy, g5) = dy.device_ptr_mut(stream);
            let mut lb = stream.launch_builder(&kernel.func);
            let ld = fcgp_ld(p.n);
            lb.arg(&px).arg(&py).arg(&pd).arg(&pdx).arg(&pdy).arg(&p.b).arg(&p.n).arg(&ld);
            // SAFETY: matches `fcgp_bwd_entries!` (x, y, dpr, dx, dy, b, n, ld); x, y, dx, dy
            // hold C * B * N elements, dpr total * B * ld (checked by the caller); 1 <= N <= ld
            // (the caller returned early on an empty problem); grid-stride loop.
            unsafe { lb.launch(launch) }.ctx(|| format!("launching {name}"))?;
            drop((g1, g2, g3, g4, g5));
            Ok(())
        }
        _ => Err(Error::BackendMismatch { op: OP, what: "FCGP operands", expected: s.backend_name(), got: "mixed" }),
    }
}

fn cpu_input_grads<A: Algebra, T: Scalar>(
    p: &Clifford,
    rows: usize,
    xy: [&[T]; 2],
    dpr: &[f32],
    dx: &mut [T],
    dy: &mut [T],
) -> Result<()> {
    let (plane, chunk) = (p.b * p.n, rows * p.n);
    let xs = planes(xy[0], A::C, plane, chunk);
    let ys = planes(xy[1], A::C, plane, chunk);
    let ds = product_rows(&dpr[..A::TOTAL * p.b * fcgp_ld(p.n)], p, rows)?;
    let dxs = planes_mut(dx, A::C, plane, chunk);
    let dys = planes_mut(dy, A::C, plane, chunk);
    dxs.into_par_iter().zip(dys).zip(xs.par_iter().zip(ys.par_iter()).zip(ds.par_iter())).for_each(
        |((mut a, mut b), ((xc, yc), dc))| {
            kc::fcgp_products_bwd_rows::<A, T>(xc, yc, dc, &mut a, &mut b, p.n, fcgp_ld(p.n));
        },
    );
    Ok(())
}
