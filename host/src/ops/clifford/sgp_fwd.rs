//! The SGP forward (`fused_gelu_sgp_norm`): checks, the CPU row loop and the GPU launch.

use ferrotune_kernels::clifford::{self as kc, Algebra, Cl2, Cl3, CliffordKernel};
use rayon::prelude::*;

use super::{
    Clifford, CliffordConfig, RowLaunch, check_backend, check_len, fit_to, gpu_row_kernel, planes, planes_mut,
    row_entry,
};
use crate::backend::Cpu;
use crate::buffer::{Scalar, View, ViewMut};
use crate::error::Result;
use crate::stream::Stream;
use cudarc::driver::{DevicePtr, DevicePtrMut};

/// Forward of the weighted geometric product layer with the launch config of a tuning profile,
/// else the heuristic ([`super::forward_choice`]): `out = norm(w-product(gelu_gate(x), gelu_gate(y)))`. `x`, `y`, `out`: `(C, B, N)`;
/// `w`: `(N, W)`.
pub fn fused_gelu_sgp_norm<T: Scalar>(
    s: &Stream,
    p: &Clifford,
    x: &View<'_, T>,
    y: &View<'_, T>,
    w: &View<'_, T>,
    out: &mut ViewMut<'_, T>,
) -> Result<()> {
    let (cfg, _) = super::forward_choice::<T>(s, p)?;
    run_sgp_forward(s, p, &cfg, x, y, w, out)
}

/// The heuristic's config for `p` on this stream: on the GPU the first of
/// [`CliffordConfig::forward_candidates`] whose team the compiled kernel's registers allow in
/// one block (threads lowered to that limit), so a register estimate that is off costs speed,
/// never a failed launch.
pub fn forward_config<T: Scalar>(s: &Stream, p: &Clifford) -> Result<CliffordConfig> {
    let dev = s.gpu().map(|g| g.info());
    let first = CliffordConfig::heuristic(p, T::DTYPE, dev);
    let Some(gpu) = s.gpu() else { return Ok(first) };
    let kernels = gpu.kernels()?;
    let start = CliffordConfig::forward_candidates(p, T::DTYPE, dev).into_iter().skip_while(|c| *c != first);
    for c in start {
        let k = kernels.function(&row_entry(CliffordKernel::Forward, p.dim, T::DTYPE, c.variant))?;
        if let Some(f) = c.fit(k.max_threads) {
            return Ok(f);
        }
    }
    fit_to(s, first, &row_entry(CliffordKernel::Forward, p.dim, T::DTYPE, first.variant))
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
    let stream = super::cpu_loops::stream_outputs(core::mem::size_of_val(out));
    let xs = planes(x, A::C, plane, chunk);
    let ys = planes(y, A::C, plane, chunk);
    let os = planes_mut(out, A::C, plane, chunk);
    // The weights once per call as f32 lane blocks, so each lane block reads them in order.
    let mut wt = vec![0.0f32; A::W * kc::padded(p.n)];
    kc::weights_by_path::<A, T>(w, p.n, &mut wt);
    cpu.install(|| {
        os.into_par_iter().zip(xs.par_iter().zip(ys.par_iter())).for_each(|(mut o, (xc, yc))| {
            let mut scratch = vec![0.0f32; A::C * kc::padded(p.n)];
            // A row of staging for the streaming stores (see `cpu_loops::stream_outputs`).
            let mut stage = stream.then(|| vec![T::from_f32(0.0); p.n]);
            super::cpu_loops::fwd_rows::<A, T>(
                xc,
                yc,
                &wt,
                &mut o,
                p.n,
                p.normalize,
                &mut scratch,
                stage.as_deref_mut(),
            );
        })
    });
}
