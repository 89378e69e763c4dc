//! The FCGP forward (`fused_gelu_fcgp_norm`): per-path products, our GEMM, assembly and norm.

use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use ferrotune_kernels::clifford::{
    self as kc, Algebra, Cl2, Cl3, CliffordKernel, WPERM_GATHER_T, WPERM_SCATTER, fcgp_ld,
};
use rayon::prelude::*;

use super::{
    Clifford, CliffordConfig, OP, RowLaunch, check_backend, check_len, fit_to, gpu_row_kernel, planes, planes_mut,
    row_entry,
};
use crate::backend::Cpu;
use crate::buffer::{Buffer, Scalar, View, ViewMut};
use crate::error::{DriverContext, Error, Result};
use crate::ops::gemm::{Gemm, Layout, Precision, gemm};
use crate::stream::Stream;

/// Scratch of [`fused_gelu_fcgp_norm`], with rows of `ld` = N rounded up to 8
/// (`ferrotune_kernels::clifford::fcgp_ld`): the signed per-path products (`total * B * ld`
/// of `T`, the GEMMs' A operands, grouped by output grade: see `ferrotune_kernels::clifford::
/// prod_at`), the weights copied into that grouping (`W * ld * ld` of `T`; transposed for the
/// forward's GEMMs, which then read both operands K-major, as the backward's first GEMM),
/// the GEMM results
/// (`C * B * ld` f32, the un-normalised output; the backward grows it to `total * B * ld` for
/// the products' gradient), the backward's gradient through the norm (`C * B * ld` of `T`,
/// allocated by the first backward), and the precision of the GEMMs for f32 inputs.
pub struct FcgpWorkspace<T: Scalar> {
    pub(super) prod: Buffer<T>,
    pub(super) wg: Buffer<T>,
    pub(super) d: Buffer<f32>,
    pub(super) grad: Buffer<T>,
    pub(super) precision: Precision,
}

impl<T: Scalar> FcgpWorkspace<T> {
    /// Workspace for problems up to `p`'s size on `s`'s backend; f32 GEMMs on TF32 tensor
    /// cores as in [`gemm`] (f16/bf16 always run natively on tensor cores).
    pub fn new(s: &Stream, p: &Clifford) -> Result<FcgpWorkspace<T>> {
        let t = p.tables()?;
        let (plane, ld) = (p.b * fcgp_ld(p.n), fcgp_ld(p.n));
        Ok(FcgpWorkspace {
            prod: Buffer::zeros(s, t.total * plane)?,
            wg: Buffer::zeros(s, t.w * ld * ld)?,
            d: Buffer::zeros(s, t.c * plane)?,
            grad: Buffer::zeros(s, 0)?,
            precision: Precision::AllowTf32,
        })
    }

    /// The GEMMs' precision for f32 inputs: [`Precision::Strict`] for exact f32 products.
    pub fn with_precision(mut self, precision: Precision) -> FcgpWorkspace<T> {
        self.precision = precision;
        self
    }

    /// An error unless the products, grouped weights and GEMM results fit problem `p`.
    pub(super) fn check(&self, p: &Clifford) -> Result<()> {
        let (t, ld) = (p.tables()?, fcgp_ld(p.n));
        let needed = [
            ("FCGP workspace (products)", t.total * p.b * ld, self.prod.len()),
            ("FCGP workspace (grouped weights)", t.w * ld * ld, self.wg.len()),
            ("FCGP workspace (GEMM results)", t.c * p.b * ld, self.d.len()),
        ];
        match needed.into_iter().find(|&(_, need, got)| got < need) {
            Some((what, needed, got)) => Err(Error::BufferTooSmall { op: OP, what, needed, got }),
            None => Ok(()),
        }
    }
}

/// The fully connected variant: `o_c[b, m] = sum over paths p of ± sum_n x_i[b, n] y_k[b, n]
/// W_p[n, m]` on the gated inputs, then the per-grade norm. `w` is `(W, N, N)`. Runs the
/// per-path products (grouped by output grade), one GEMM per output grade whose K runs over
/// the grade's paths — `(cdim * B) x (np * N)` products times the grade's weights stacked, so
/// the sum over paths happens inside the GEMM (ours: TF32 tensor cores for f32 unless the
/// workspace asks for exact f32, tensor cores with f32 results in f16/bf16; grades of equal
/// shape in one batched call) — then the norm. The backward is
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
    let cfg = CliffordConfig::assemble_heuristic(p, s.gpu().map(|g| g.info()));
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
    ws.check(p)?;
    cfg.validate(p, s.gpu().map(|g| g.info()))?;
    if len == 0 {
        return Ok(());
    }
    products(s, p, cfg, x, y, &mut ws.prod)?;
    forward_gemms(s, p, w, ws)?;
    // 3. The norm.
    match (s, &ws.d, out) {
        (Stream::Cpu(cpu), Buffer::Cpu(d), ViewMut::Cpu(out)) => {
            match p.dim {
                2 => cpu_assemble::<Cl2, T>(cpu, p, cfg, d, out),
                _ => cpu_assemble::<Cl3, T>(cpu, p, cfg, d, out),
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
/// into `prod` (`total * B * N`, grouped by output grade; sizes checked by the caller).
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
            let ld = fcgp_ld(p.n);
            let mut lb = stream.launch_builder(&kernel.func);
            lb.arg(&px).arg(&py).arg(&pp).arg(&p.b).arg(&p.n).arg(&ld);
            // SAFETY: matches `prod_entry!` (3 pointers, 3 usize); x and y hold C * B * N
            // elements, the workspace at least total * B * ld (checked by the caller);
            // 1 <= N <= ld (the caller returned early on an empty problem).
            unsafe { lb.launch(launch) }.ctx(|| format!("launching {name}"))?;
            drop((gx, gy, gp));
            Ok(())
        }
        _ => Err(Error::BackendMismatch { op: OP, what: "FCGP operands", expected: s.backend_name(), got: "mixed" }),
    }
}

/// One GEMM call of the FCGP (forward or backward): output grades of equal shape in one
/// batch — `rows = cdim * B` rows of products, `k = np * ld` — with the element offsets of the
/// first grade's products, grouped weights and output planes (`C` planes of `B` rows of `ld`),
/// and the strides between the batch's grades (0 for a batch of one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct GradeGemm {
    pub rows: usize,
    pub k: usize,
    pub batch: usize,
    pub prod: (usize, usize),
    pub w: (usize, usize),
    pub planes: (usize, usize),
}

/// The FCGP's GEMMs: one per output grade, grades with the same `(cdim, np)` batched together
/// when their offsets are evenly spaced (in 2D grades 0 and 2; in 3D 0 and 3, 1 and 2).
pub(super) fn grade_gemms(p: &Clifford) -> Result<Vec<GradeGemm>> {
    let t = p.tables()?;
    let ld = fcgp_ld(p.n);
    let plane = p.b * ld;
    let (mut prod, mut w, mut planes) = (vec![0; t.g], vec![0; t.g], vec![0; t.g]);
    let mut cd = vec![0; t.g];
    for c in 0..t.c {
        cd[t.grade[c]] += 1;
    }
    for j in 1..t.g {
        prod[j] = prod[j - 1] + cd[j - 1] * t.np[j - 1] * plane;
        w[j] = w[j - 1] + t.np[j - 1] * ld * ld;
        planes[j] = planes[j - 1] + cd[j - 1] * plane;
    }
    let mut done = vec![false; t.g];
    let mut out = Vec::new();
    for j in 0..t.g {
        if done[j] {
            continue;
        }
        let same: Vec<usize> = (j..t.g).filter(|&i| !done[i] && cd[i] == cd[j] && t.np[i] == t.np[j]).collect();
        let even = |v: &[usize]| same.windows(3).all(|s| v[s[1]] - v[s[0]] == v[s[2]] - v[s[1]]);
        let members = if even(&prod) && even(&w) && even(&planes) { same } else { vec![j] };
        let stride = |v: &[usize]| if members.len() > 1 { v[members[1]] - v[j] } else { 0 };
        out.push(GradeGemm {
            rows: cd[j] * p.b,
            k: t.np[j] * ld,
            batch: members.len(),
            prod: (prod[j], stride(&prod)),
            w: (w[j], stride(&w)),
            planes: (planes[j], stride(&planes)),
        });
        for m in members {
            done[m] = true;
        }
    }
    Ok(out)
}

/// A GEMM of `g`'s batch with the given strides of A, B and D (a batch of one keeps the tight
/// defaults).
pub(super) fn batched(g: Gemm, batch: usize, strides: [usize; 3]) -> Gemm {
    let mut g = g.batched(batch);
    if batch > 1 {
        (g.stride_a, g.stride_b, g.stride_c) = (strides[0], strides[1], strides[2]);
    }
    g
}

/// The GEMM calls of the FCGP forward on `p`, each with the element offsets of its first
/// matrix in the products (`total * B * ld`, A, row-major), the grouped weights transposed
/// (`W * ld * ld`, B, column-major: `x @ w.T` form, which the Hopper path takes for TF32 too)
/// and the output planes (`C * B * ld`, D, f32), `ld` being N rounded up to 8: one call per
/// output grade or batch of equal grades. Their FLOPs are those of one
/// `(total * B) x N x (N rounded up to 8)` GEMM.
pub fn fcgp_forward_gemms(p: &Clifford, precision: Precision) -> Result<Vec<(Gemm, [usize; 3])>> {
    let ld = fcgp_ld(p.n);
    Ok(grade_gemms(p)?
        .into_iter()
        .map(|gg| {
            let mut g = Gemm::new(gg.rows, p.n, gg.k).layouts(Layout::Row, Layout::Col).precision(precision);
            g.ldc = ld;
            (batched(g, gg.batch, [gg.prod.1, gg.w.1, gg.planes.1]), [gg.prod.0, gg.w.0, gg.planes.0])
        })
        .collect())
}

/// Step 2: the weights copied into the grade grouping (`ws.wg`), then per grade
/// `d_j = prod_j wg_j` (`(cdim * B) x N`, f32) into `ws.d`, the un-normalised output.
pub(super) fn forward_gemms<T: Scalar>(
    s: &Stream,
    p: &Clifford,
    w: &View<'_, T>,
    ws: &mut FcgpWorkspace<T>,
) -> Result<()> {
    weight_perm(s, p, w, &mut ws.wg.all_mut(), WPERM_GATHER_T)?;
    for (g, [a0, b0, d0]) in fcgp_forward_gemms(p, ws.precision)? {
        let a = ws.prod.view(a0..)?;
        let b = ws.wg.view(b0..)?;
        gemm::<T, f32>(s, &g, &a, &b, None, None, &mut ws.d.view_mut(d0..)?)?;
    }
    Ok(())
}

/// Copies the `(W, N, N)` weight matrices from path order into the grouped order of
/// `Tables::gorder`, `ld x ld` each with zeros past N (`WPERM_GATHER`; transposed:
/// [`WPERM_GATHER_T`]), or a grouped weight gradient back to path order ([`WPERM_SCATTER`]).
pub(super) fn weight_perm<T: Scalar>(
    s: &Stream,
    p: &Clifford,
    src: &View<'_, T>,
    dst: &mut ViewMut<'_, T>,
    mode: u32,
) -> Result<()> {
    let scatter = mode == WPERM_SCATTER;
    let t = p.tables()?;
    let (n, ld) = (p.n, fcgp_ld(p.n));
    let (tight, padded) = (t.w * n * n, t.w * ld * ld);
    let (need_src, need_dst) = if scatter { (padded, tight) } else { (tight, padded) };
    check_len("FCGP weights", src.len().min(need_src), need_src)?;
    check_len("FCGP weights", dst.len().min(need_dst), need_dst)?;
    if n == 0 {
        return Ok(());
    }
    match (s, src, dst) {
        (Stream::Cpu(_), View::Cpu(src), ViewMut::Cpu(dst)) => {
            for i in 0..t.w {
                let q = t.gorder[i];
                let (np, pos) = (t.np[t.paths[q].1], t.qpos[q]);
                for r in 0..ld {
                    // Transposed, row r of the grade's block (output feature r) holds path
                    // `pos`'s inputs at `pos * ld` of `np * ld`; else each path is ld x ld.
                    let at = match mode {
                        WPERM_GATHER_T => (i - pos) * ld * ld + r * np * ld + pos * ld,
                        _ => i * ld * ld + r * ld,
                    };
                    if scatter && r < n {
                        dst[(q * n + r) * n..(q * n + r + 1) * n].copy_from_slice(&src[at..at + n]);
                    } else if !scatter {
                        let row = &mut dst[at..at + ld];
                        row.fill(T::from_f32(0.0));
                        if r < n {
                            for (c, v) in row[..n].iter_mut().enumerate() {
                                let (sr, sc) = if mode == WPERM_GATHER_T { (c, r) } else { (r, c) };
                                *v = src[(q * n + sr) * n + sc];
                            }
                        }
                    }
                }
            }
            Ok(())
        }
        (Stream::Cuda { stream, gpu }, View::Cuda(src), ViewMut::Cuda(dst)) => {
            let name = format!("ft_clifford_fcgp_wperm_d{}_{}", p.dim, T::DTYPE.name());
            let kernel = gpu.kernels()?.function(&name)?;
            let threads = 256u32.min(kernel.max_threads);
            if threads < 256 {
                return Err(Error::InvalidConfig {
                    op: OP,
                    why: format!("{name} allows {} threads per block, it needs 256", kernel.max_threads),
                });
            }
            let per_matrix = (gpu.info.sm_count as usize * 8).div_ceil(t.w);
            let work = if mode == WPERM_GATHER_T { ld.div_ceil(32).pow(2) } else { (ld * ld).div_ceil(256) };
            let blocks = work.min(per_matrix).max(1) as u32;
            let smem = if mode == WPERM_GATHER_T { 32 * 33 * 4 } else { 0 };
            let launch =
                LaunchConfig { grid_dim: (blocks, t.w as u32, 1), block_dim: (256, 1, 1), shared_mem_bytes: smem };
            let (ps, g1) = src.device_ptr(stream);
            let (pd, g2) = dst.device_ptr_mut(stream);
            let mut lb = stream.launch_builder(&kernel.func);
            lb.arg(&ps).arg(&pd).arg(&n).arg(&ld).arg(&mode);
            // SAFETY: matches `fcgp_bwd_entries!` (src, dst, n, ld, mode); the path side
            // holds W * N * N elements, the grouped side W * ld * ld (checked above), in
            // separate buffers; N <= ld; W block rows of 256 threads; the transposed mode's
            // 32 x 33 f32 tile in dynamic shared memory.
            unsafe { lb.launch(launch) }.ctx(|| format!("launching {name}"))?;
            drop((g1, g2));
            Ok(())
        }
        _ => Err(Error::BackendMismatch { op: OP, what: "FCGP weights", expected: s.backend_name(), got: "mixed" }),
    }
}

/// The length of one batch row of each component's products (`np * ld`).
fn product_row_lens(p: &Clifford) -> Result<Vec<usize>> {
    let t = p.tables()?;
    Ok((0..t.c).map(|c| t.np[t.grade[c]] * fcgp_ld(p.n)).collect())
}

/// Component `c`'s `rows * np * ld` products for each chunk of `rows` batch rows (the CPU
/// loops' view of the grouped layout), chunk-major.
pub(super) fn product_rows<'a, U>(x: &'a [U], p: &Clifford, rows: usize) -> Result<Vec<Vec<&'a [U]>>> {
    let mut per = Vec::new();
    let mut at = 0;
    for rl in product_row_lens(p)? {
        per.push(x[at..at + rl * p.b].chunks((rl * rows).max(1)).collect());
        at += rl * p.b;
    }
    Ok(super::transpose(per))
}

/// [`product_rows`], mutable.
pub(super) fn product_rows_mut<'a, U>(x: &'a mut [U], p: &Clifford, rows: usize) -> Result<Vec<Vec<&'a mut [U]>>> {
    let mut per = Vec::new();
    let mut rest = x;
    for rl in product_row_lens(p)? {
        let (mine, tail) = rest.split_at_mut(rl * p.b);
        per.push(mine.chunks_mut((rl * rows).max(1)).collect());
        rest = tail;
    }
    Ok(super::transpose(per))
}

fn cpu_products<A: Algebra, T: Scalar>(
    cpu: &Cpu,
    p: &Clifford,
    cfg: &CliffordConfig,
    x: &[T],
    y: &[T],
    prod: &mut [T],
) -> Result<()> {
    let (plane, chunk) = (p.b * p.n, cfg.cpu_rows * p.n);
    let xs = planes(x, A::C, plane, chunk);
    let ys = planes(y, A::C, plane, chunk);
    let ps = product_rows_mut(&mut prod[..A::TOTAL * p.b * fcgp_ld(p.n)], p, cfg.cpu_rows)?;
    cpu.install(|| {
        ps.into_par_iter().zip(xs.par_iter().zip(ys.par_iter())).for_each(|(mut pc, (xc, yc))| {
            super::cpu_loops::products_rows::<A, T>(xc, yc, &mut pc, p.n, fcgp_ld(p.n));
        })
    });
    Ok(())
}

fn cpu_assemble<A: Algebra, T: Scalar>(cpu: &Cpu, p: &Clifford, cfg: &CliffordConfig, d: &[f32], out: &mut [T]) {
    let ld = fcgp_ld(p.n);
    let ds = planes(d, A::C, p.b * ld, cfg.cpu_rows * ld);
    let os = planes_mut(out, A::C, p.b * p.n, cfg.cpu_rows * p.n);
    cpu.install(|| {
        os.into_par_iter().zip(ds.par_iter()).for_each(|(mut o, dc)| {
            let mut scratch = vec![0.0f32; A::C * kc::padded(p.n)];
            super::cpu_loops::assemble_rows::<A, T>(dc, &mut o, p.n, ld, p.normalize, &mut scratch);
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grade_gemms_batch_the_grades_of_equal_shape() {
        // N = 3 pads to ld = 8: every offset counts rows of 8.
        let (b, n) = (5, 8);
        let (plane, nn) = (b * n, n * n);
        // 2D: grades 0 and 2 (1 component, 3 paths) in one batch, grade 1 (2 x 4) alone.
        let g = grade_gemms(&Clifford::new(2, b, 3, true)).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].rows, g[0].k, g[0].batch), (b, 3 * n, 2));
        assert_eq!(g[0].prod, (0, (3 + 2 * 4) * plane));
        assert_eq!(g[0].w, (0, 7 * nn));
        assert_eq!(g[0].planes, (0, 3 * plane));
        assert_eq!((g[1].rows, g[1].k, g[1].batch), (2 * b, 4 * n, 1));
        assert_eq!((g[1].prod.0, g[1].w.0, g[1].planes.0), (3 * plane, 3 * nn, plane));
        // 3D: grades 0 and 3 (1 x 4), 1 and 2 (3 x 6).
        let g = grade_gemms(&Clifford::new(3, b, 3, true)).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].rows, g[0].k, g[0].batch, g[0].planes), (b, 4 * n, 2, (0, 7 * plane)));
        assert_eq!((g[1].rows, g[1].k, g[1].batch, g[1].planes), (3 * b, 6 * n, 2, (plane, 3 * plane)));
        assert_eq!(g[1].prod, (4 * plane, 18 * plane));
        // Every product row and weight matrix is covered once.
        let t = Clifford::new(3, b, n, true).tables().unwrap();
        let rows: usize = g.iter().map(|x| x.batch * x.rows * x.k).sum();
        assert_eq!(rows, t.total * plane);
        let ws: usize = g.iter().map(|x| x.batch * x.k * n).sum();
        assert_eq!(ws, t.w * nn);
    }
}
