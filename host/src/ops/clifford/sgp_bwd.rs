//! The SGP backward (`fused_gelu_sgp_norm_backward`): dx, dy and the weight gradient (per-block
//! partials summed by a second kernel), on the CPU and the GPU.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtrMut, LaunchConfig, PushKernelArg};
use ferrotune_kernels::clifford::{self as kc, Algebra, Cl2, Cl3, RowVariant};
use rayon::prelude::*;

use super::{
    Clifford, CliffordConfig, OP, SCRATCH_BYTES, check_backend, check_len, check_threads, device_ptr, grid,
    opt_in_smem, planes, planes_mut,
};
use crate::backend::{Cpu, Gpu};
use crate::buffer::{Buffer, Scalar, View, ViewMut};
use crate::error::{DriverContext, Error, Result};
use crate::stream::Stream;

/// Elements of the backward's workspace for `p` and `cfg` on this stream (per-block weight
/// gradient partials; 0 on the CPU).
pub fn sgp_backward_workspace_len(s: &Stream, p: &Clifford, cfg: &CliffordConfig) -> Result<usize> {
    Ok(match s.gpu() {
        Some(g) if cfg.variant.is_split() => super::sgp_bwd_split::split_workspace_len(p, cfg, g.info.sm_count)?,
        Some(g) if cfg.cluster > 1 => super::sgp_bwd_cluster::cluster_workspace_len(p, cfg, g.info.sm_count)?,
        Some(g) => partials(p, cfg, cfg.variant, g.info.sm_count)?.1 * p.sgp_weights_len()?,
        None => 0,
    })
}

/// Most f32 the per-block weight-gradient partials may take (256 MiB): long rows get fewer
/// blocks, each looping over more rows.
const MAX_PARTIAL_FLOATS: usize = 64 << 20;

/// Blocks of the backward and its weight-gradient partials (one per block for the two-pass
/// and the shared-memory one-pass kernels, one per team for the register one-pass ones): the
/// config's grid, capped so the partials stay within [`MAX_PARTIAL_FLOATS`].
fn partials(p: &Clifford, cfg: &CliffordConfig, v: RowVariant, sm_count: u32) -> Result<(u32, usize)> {
    let per_block = if v.vpt > 0 && !v.stream_w { cfg.rows_per_block.max(1) as usize } else { 1 };
    let cap = (MAX_PARTIAL_FLOATS / (per_block * p.sgp_weights_len()?.max(1))).max(1);
    let blocks = grid(p.b, cfg, sm_count).min(cap.min(u32::MAX as usize) as u32);
    Ok((blocks, blocks as usize * per_block))
}

/// Backward of [`fused_gelu_sgp_norm`] (a tuning profile's config, else the heuristic:
/// [`super::backward_choice`]): given `go = dL/dout`, writes
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
    let (cfg, _) = super::backward_choice::<T>(s, p)?;
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
    let cfg = *cfg;
    cfg.validate_backward(p, s.gpu().map(|g| g.info()))?;
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

/// Most tasks of the CPU backward (see `cpu_backward`); a constant, so the weight gradient's
/// summation order does not depend on the thread count.
const BWD_TASKS: usize = 16;

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
    // At most BWD_TASKS tasks (each at least `cpu_rows` rows): every task keeps a weight
    // gradient of N x W floats, and summing a few hundred of them cost more than the rows.
    let rows = cfg.cpu_rows.max(p.b.div_ceil(BWD_TASKS));
    let (plane, chunk) = (p.b * p.n, rows * p.n);
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
    // Weights and weight gradients as f32 lane blocks (`kc::weights_by_path`).
    let np = kc::padded(p.n);
    let nw = np * A::W;
    let mut wt = vec![0.0f32; nw];
    kc::weights_by_path::<A, T>(w, p.n, &mut wt);
    // One f32 weight gradient per task, summed in task order (deterministic).
    let parts: Vec<Vec<f32>> = cpu.install(|| {
        dxs.into_par_iter()
            .zip(dys.into_par_iter())
            .zip(xs.par_iter().zip(ys.par_iter()).zip(gs.par_iter()))
            .map(|((mut dxc, mut dyc), ((xc, yc), gc))| {
                let mut part = vec![0.0f32; nw];
                // One row's raw products and gates, from the norm statistics to the gradients.
                let mut saved = vec![0.0f32; (A::C + 2) * np];
                let (dx_dy, n) = ((&mut dxc[..], &mut dyc[..]), p.n);
                super::cpu_loops::bwd_rows::<A, T>([xc, yc, gc], &wt, dx_dy, &mut part, n, p.normalize, &mut saved);
                part
            })
            .collect()
    });
    let mut sum = vec![0.0f32; nw];
    for part in &parts {
        sum.iter_mut().zip(part).for_each(|(s, v)| *s += v);
    }
    for (f, dwf) in dw.chunks_mut(A::W).enumerate() {
        for (q, d) in dwf.iter_mut().enumerate() {
            *d = T::from_f32(sum[kc::weight_index::<A>(q, f)]);
        }
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
    let variant = runnable_bwd_variant::<T>(cfg, p, &[px, py, pg, pdx, pdy]);
    if cfg.cluster > 1 {
        // SAFETY: the lengths were checked by the caller, `validate_backward` passed, the
        // workspace grown to `sgp_backward_workspace_len`; the guards live past the launch.
        let nparts =
            unsafe { super::sgp_bwd_cluster::launch(cs, gpu, p, T::DTYPE, cfg, [px, py, pg, pw, pdx, pdy], pws) }?;
        dw_reduce::<T>(cs, gpu, t.w, p.n, (pws, pdw), nparts)?;
        drop((gx, gy, gw, gg, gdx, gdy, gdw, gws));
        return Ok(());
    }
    if variant.is_split() {
        // SAFETY: the lengths were checked by the caller, the workspace grown to
        // `sgp_backward_workspace_len`; the guards live past the launches.
        let (parts, nparts) =
            unsafe { super::sgp_bwd_split::launch::<T>(cs, gpu, p, cfg, [px, py, pg, pw, pdx, pdy], pws) }?;
        dw_reduce::<T>(cs, gpu, t.w, p.n, (parts, pdw), nparts)?;
        drop((gx, gy, gw, gg, gdx, gdy, gdw, gws));
        return Ok(());
    }
    // One pass (a row in registers) for vpt > 0; else two passes with the weights and their
    // gradient in shared memory when they fit, or the `_g` entry (weights read from global
    // memory, the block's partial in global memory).
    let staged = SCRATCH_BYTES + 8 * t.w * p.n;
    let in_smem = staged <= gpu.info.shared_mem_per_block_optin as usize;
    let lanes = if variant.vec { "v4" } else { "v1" };
    let name = if variant.vpt > 0 {
        kc::bwd_entry_name(p.dim, T::DTYPE, variant).as_str().to_string()
    } else {
        format!("ft_clifford_bwd_d{}_{}_{lanes}{}", p.dim, T::DTYPE.name(), if in_smem { "" } else { "_g" })
    };
    let kernel = gpu.kernels()?.function(&name)?;
    check_threads(&kernel, &name, cfg.threads)?;
    let smem_bytes = if variant.vpt > 0 && variant.stream_w {
        cfg.one_pass_smem(p)?
    } else if variant.vpt == 0 && in_smem {
        staged
    } else {
        SCRATCH_BYTES
    };
    let smem = opt_in_smem(gpu, &kernel, &name, smem_bytes)?;
    let (blocks, nparts) = partials(p, cfg, variant, gpu.info.sm_count)?;
    let launch = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (cfg.threads, 1, 1), shared_mem_bytes: smem };
    let (b, n, norm, team) = (p.b, p.n, p.normalize as u32, cfg.team());
    let mut lb = cs.launch_builder(&kernel.func);
    lb.arg(&px).arg(&py).arg(&pg).arg(&pw).arg(&pdx).arg(&pdy).arg(&pws);
    lb.arg(&b).arg(&n).arg(&norm).arg(&team);
    // SAFETY: matches `bwd_entry!` in entry/clifford.rs and entry/clifford_bwd.rs (7
    // pointers, b and n usize, normalize and team u32); x, y, go, dx, dy hold C * B * N
    // elements, w N * W, the workspace `nparts * W * N` f32 (grown above; one partial per
    // block, or per team for the register one-pass kernels); `validate_backward` proved the
    // team covers N for the one-pass kernels; team, lanes and alignment as for the forward;
    // shared memory holds the scratch and (shared-memory entries) the weights and their
    // gradient (one area per team for the `_p{n}s` entries, `CliffordConfig::one_pass_smem`).
    unsafe { lb.launch(launch) }.ctx(|| format!("launching {name} on {b} x {n}"))?;

    dw_reduce::<T>(cs, gpu, t.w, p.n, (pws, pdw), nparts)?;
    drop((gx, gy, gw, gg, gdx, gdy, gdw, gws));
    Ok(())
}

/// Sums the `nparts` weight-gradient partials (`W * N` f32 each, at `pws`) into `dw` (`N * W`
/// of `T`, at `pdw`) with `ft_clifford_dw_reduce_*`: blocks of `32 * DW_SLICES` threads, 32
/// outputs each.
fn dw_reduce<T: Scalar>(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    nw: usize,
    n: usize,
    (pws, pdw): (u64, u64),
    nparts: usize,
) -> Result<()> {
    let rname = format!("ft_clifford_dw_reduce_{}", T::DTYPE.name());
    let rk = gpu.kernels()?.function(&rname)?;
    let threads = (32 * kc::DW_SLICES) as u32;
    check_threads(&rk, &rname, threads)?;
    let rlaunch = LaunchConfig {
        grid_dim: ((nw * n).div_ceil(32).max(1) as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: threads * 4,
    };
    let mut lb = cs.launch_builder(&rk.func);
    lb.arg(&pws).arg(&pdw).arg(&nparts).arg(&n).arg(&nw);
    // SAFETY: matches `reduce_entry!` (2 pointers, 3 usize); the workspace holds `nparts`
    // partials of W * N f32 written by the launch before on the same stream; dw holds N * W;
    // the block has 32 * DW_SLICES threads and 4 bytes of shared memory for each.
    unsafe { lb.launch(rlaunch) }.ctx(|| format!("launching {rname}"))?;
    Ok(())
}

/// The backward variant that runs: the config's, or (a pointer or the plane not aligned to 4
/// elements) its one-feature form with four times the accesses when compiled, else the
/// two-pass one-feature kernel.
fn runnable_bwd_variant<T: Scalar>(cfg: &CliffordConfig, p: &Clifford, ptrs: &[u64]) -> RowVariant {
    let v = cfg.variant;
    let aligned = ptrs.iter().all(|q| q % (4 * T::DTYPE.size_bytes() as u64) == 0) && (p.b * p.n).is_multiple_of(4);
    if !v.vec || aligned {
        return v;
    }
    let one = RowVariant { vec: false, vpt: v.vpt * 4, stream_w: v.stream_w };
    if v.vpt > 0 && kc::BWD_VARIANTS.contains(&one) { one } else { RowVariant { vec: false, vpt: 0, stream_w: false } }
}
