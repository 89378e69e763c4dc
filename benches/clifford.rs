//! The Clifford layer bench (`cargo xtask bench --ops clifford`): forward with norm, forward +
//! backward, and the FCGP forward for Cl(2,0) and Cl(3,0) over (B, N), each timed with events
//! (warm-up, median of many) beside a copy ceiling measured in the same run, rated on its
//! minimum traffic, and checked on sampled rows against the float64 reference. Rows carry
//! `dim`, `op` (`fwd`, `fwdbwd`, `fcgp_fwd`; `fcgp_gemm`, `fcgp_gemms`: the FCGP's GEMM peers), `B` and
//! `N` so the torch baselines join on them.

use ferrotune::config::ElemConfig;
use ferrotune::ops::clifford::{self as cl, Clifford, CliffordConfig, FcgpWorkspace};
use ferrotune::{Backend, Buffer, DType, ElemOp, Scalar, Stream, bf16, f16, ops};
use ferrotune_autotune::measure::{Repeat, Stats, time_on_stream, time_queued};
use ferrotune_testkit::clifford_ref as r;
use ferrotune_testkit::{Rng, Tolerance, cpu_backend};
use serde::{Deserialize, Serialize};

pub use crate::clifford_space::{bwd_sweep_space, sweep_space};
use crate::error::Result;

/// Version of the JSON layout (docs/bench-json.md, "Clifford bench").
pub const SCHEMA: &str = "ferrotune-clifford-bench/1";

/// The row ops, as named in the JSON and in the torch baselines.
pub const OPS: [&str; 3] = ["fwd", "fwdbwd", "fcgp_fwd"];

/// What to run.
#[derive(Clone, Debug)]
pub struct CliffordOptions {
    pub dims: Vec<u32>,
    pub ops: Vec<String>,
    pub dtypes: Vec<DType>,
    /// `(B, N)` pairs.
    pub shapes: Vec<(usize, usize)>,
    pub repeat: Repeat,
    /// Batch rows checked against the float64 reference per row.
    pub check_rows: usize,
}

impl CliffordOptions {
    /// The table on CUDA (B in {1024, 4096, 8192} x N in {128, 512, 1024}, f32); on
    /// the CPU small sizes (B in {64, 256} x N in {32, 128}).
    pub fn default_for(backend: &Backend) -> CliffordOptions {
        let cuda = matches!(backend, Backend::Cuda(_));
        let (bs, ns): (&[usize], &[usize]) =
            if cuda { (&[1024, 4096, 8192], &[128, 512, 1024]) } else { (&[64, 256], &[32, 128]) };
        CliffordOptions {
            dims: vec![2, 3],
            ops: OPS.iter().map(|s| s.to_string()).collect(),
            dtypes: vec![DType::F32],
            shapes: bs.iter().flat_map(|&b| ns.iter().map(move |&n| (b, n))).collect(),
            repeat: if cuda { Repeat { warmup: 10, iters: 50 } } else { Repeat { warmup: 1, iters: 5 } },
            check_rows: 2,
        }
    }
}

/// One (dim, op, dtype, B, N) measurement.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CliffordRow {
    pub dim: u32,
    pub op: String,
    pub dtype: String,
    pub backend: String,
    #[serde(rename = "B")]
    pub b: usize,
    #[serde(rename = "N")]
    pub n: usize,
    pub normalize: bool,
    pub stats: Stats,
    /// `stats.median_ms`, repeated for joins.
    pub ms: f64,
    /// Fewest bytes the op must move (see docs/bench-json.md).
    pub bytes: u64,
    pub flops: u64,
    pub bytes_per_s: f64,
    pub flops_per_s: f64,
    /// `bytes_per_s` over the copy ceiling of the run.
    pub ratio_to_copy: f64,
    /// CUDA: the median per call of [`QUEUE`](ferrotune_autotune::measure::QUEUE) calls queued between two events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms_queued: Option<f64>,
    /// The bytes over `ms_queued`, over the copy ceiling timed the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_to_copy_queued: Option<f64>,
    pub config: String,
    pub correct: bool,
    pub mismatch: Option<String>,
    /// `fwd_sweep` rows: every config timed (the row itself is the fastest correct one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sweep: Vec<SweepPoint>,
    /// `fcgp_fwd` rows timed beside an `fcgp_gemm` row: this row's FLOP rate over our plain
    /// GEMM's on the same GEMM shape (`clifford_gemm_peer.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_vs_gemm: Option<f64>,
    /// `fcgp_fwd` rows timed beside an `fcgp_gemms` row: this row's FLOP rate over the FCGP's
    /// own GEMM calls alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_vs_own_gemms: Option<f64>,
}

/// One config of a `fwd_sweep` row.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepPoint {
    pub config: String,
    pub ms: f64,
    pub correct: bool,
}

/// The copy ceiling of the run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CopyCeiling {
    /// Bytes moved per copy (read + write).
    pub bytes: u64,
    pub stats: Stats,
    pub bytes_per_s: f64,
    /// CUDA: the same copy timed [`QUEUE`](ferrotune_autotune::measure::QUEUE) calls at a time between two events (no launch gap
    /// between calls), bytes per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_bytes_per_s: Option<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CliffordReport {
    pub schema: String,
    pub backend: String,
    pub device: Option<String>,
    pub driver: Option<i32>,
    pub commit: String,
    pub date: String,
    pub warmup: usize,
    pub iters: usize,
    pub copy: CopyCeiling,
    pub rows: Vec<CliffordRow>,
}

/// Minimum bytes and the FLOPs (by definition: 2 per product term, the GEMM's 2 M N K) of
/// `op` on `p` with elements of `e` bytes. fwd: x, y read, out written, weights read once.
/// fwdbwd: that plus x, y, grad read, dx, dy written, w read, dw written. fcgp_fwd: x, y read,
/// out written, the `(W, N, N)` weights read once.
pub fn work(op: &str, p: &Clifford, e: usize) -> ferrotune::Result<(u64, u64)> {
    let t = p.tables()?;
    let mv = (t.c * p.b * p.n * e) as u64;
    let w = (t.w * p.n * e) as u64;
    let terms = (t.c * t.c * p.b * p.n) as u64;
    Ok(match op {
        "fwd" | "fwd_sweep" => (3 * mv + w, 2 * terms),
        "fwdbwd" | "fwdbwd_sweep" => (8 * mv + 3 * w, 8 * terms),
        _ => (3 * mv + (t.w * p.n * p.n * e) as u64, 2 * (t.total * p.b * p.n * p.n) as u64),
    })
}

/// Operands of one problem.
struct Operands<T: Scalar> {
    hx: Vec<T>,
    hy: Vec<T>,
    hw: Vec<T>,
    hg: Vec<T>,
    x: Buffer<T>,
    y: Buffer<T>,
    w: Buffer<T>,
    g: Buffer<T>,
    out: Buffer<T>,
    dx: Buffer<T>,
    dy: Buffer<T>,
    dw: Buffer<T>,
}

fn operands<T: Scalar>(s: &Stream, p: &Clifford, fcgp: bool, seed: u64) -> Result<Operands<T>> {
    let mut rng = Rng::new(seed);
    let len = p.mv_len()?;
    let (wl, ws) = if fcgp { (p.fcgp_weights_len()?, 1.0 / (p.n as f32).sqrt()) } else { (p.sgp_weights_len()?, 1.0) };
    let (hx, hy, hg): (Vec<T>, Vec<T>, Vec<T>) =
        (rng.vec(len, -2.0, 2.0), rng.vec(len, -2.0, 2.0), rng.vec(len, -1.0, 1.0));
    let hw: Vec<T> = rng.vec(wl, -ws, ws);
    let nan = vec![T::from_f32(f32::NAN); len];
    Ok(Operands {
        x: Buffer::from_slice(s, &hx)?,
        y: Buffer::from_slice(s, &hy)?,
        w: Buffer::from_slice(s, &hw)?,
        g: Buffer::from_slice(s, &hg)?,
        out: Buffer::from_slice(s, &nan)?,
        dx: Buffer::from_slice(s, &nan)?,
        dy: Buffer::from_slice(s, &nan)?,
        dw: Buffer::zeros(s, if fcgp { 0 } else { wl })?,
        hx,
        hy,
        hw,
        hg,
    })
}

/// Rows `rows` of a `(C, B, N)` tensor as a `(C, rows.len(), N)` one, in f64.
fn gather<T: Scalar>(v: &[T], c: usize, b: usize, n: usize, rows: &[usize]) -> Vec<f64> {
    let mut out = Vec::with_capacity(c * rows.len() * n);
    for comp in 0..c {
        for &r in rows {
            out.extend(v[(comp * b + r) * n..(comp * b + r + 1) * n].iter().map(|x| x.to_f32() as f64));
        }
    }
    out
}

fn sample_rows(b: usize, k: usize) -> Vec<usize> {
    let mut rng = Rng::new(17);
    let mut v: Vec<usize> = (0..k.min(b)).map(|_| (rng.next_u64() % b as u64) as usize).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The first element of `got` off the reference `(want, scale)` by more than the dtype's
/// tolerance (as in tests/clifford.rs).
fn first_mismatch<T: Scalar>(what: &str, got: &[f64], want: &[f64], scale: &[f64], fcgp: bool) -> Option<String> {
    let tol = Tolerance::of(T::DTYPE);
    // FCGP's f32 GEMMs run on TF32 tensor cores (inputs rounded to 10-bit mantissas).
    let rel = if T::DTYPE == DType::F32 { if fcgp { 3e-3 } else { 1e-5 } } else { tol.rel };
    (0..got.len()).find_map(|i| {
        let allowed = rel * (want[i].abs() + scale[i]) + tol.abs;
        (got[i].is_nan() || (got[i] - want[i]).abs() > allowed)
            .then(|| format!("{what} element {i}: got {:e}, want {:e} (allowed {allowed:e})", got[i], want[i]))
    })
}

/// Checks the sampled rows of the forward (or FCGP) output against the float64 reference.
fn check_forward<T: Scalar>(s: &Stream, p: &Clifford, o: &Operands<T>, fcgp: bool, k: usize) -> Result<Option<String>> {
    let c = p.tables()?.c;
    let rows = sample_rows(p.b, k);
    let got = gather(&o.out.to_vec(s)?, c, p.b, p.n, &rows);
    let (x, y) = (gather(&o.hx, c, p.b, p.n, &rows), gather(&o.hy, c, p.b, p.n, &rows));
    let w: Vec<f64> = o.hw.iter().map(|v| v.to_f32() as f64).collect();
    let (want, scale) = if fcgp {
        r::fcgp_forward(p.dim, rows.len(), p.n, &x, &y, &w, p.normalize)
    } else {
        r::sgp_forward(p.dim, rows.len(), p.n, &x, &y, &w, p.normalize)
    };
    Ok(first_mismatch::<T>("out", &got, &want, &scale, fcgp))
}

/// Checks dx, dy of the sampled rows against the CPU backend's backward of those rows (itself
/// tested against finite differences); dw sums every row and is not checked here.
fn check_backward<T: Scalar>(s: &Stream, p: &Clifford, o: &Operands<T>, k: usize) -> Result<Option<String>> {
    let c = p.tables()?.c;
    let rows = sample_rows(p.b, k);
    let sub = Clifford { b: rows.len(), ..*p };
    let to_t = |v: Vec<f64>| v.into_iter().map(|x| T::from_f32(x as f32)).collect::<Vec<T>>();
    let (x, y, g) = (
        to_t(gather(&o.hx, c, p.b, p.n, &rows)),
        to_t(gather(&o.hy, c, p.b, p.n, &rows)),
        to_t(gather(&o.hg, c, p.b, p.n, &rows)),
    );
    let cpu = cpu_backend();
    let cs = cpu.stream();
    let (bx, by, bw, bg) = (
        Buffer::from_slice(&cs, &x)?,
        Buffer::from_slice(&cs, &y)?,
        Buffer::from_slice(&cs, &o.hw)?,
        Buffer::from_slice(&cs, &g)?,
    );
    let mut dx = Buffer::<T>::zeros(&cs, x.len())?;
    let mut dy = Buffer::<T>::zeros(&cs, x.len())?;
    let mut dw = Buffer::<T>::zeros(&cs, o.hw.len())?;
    let mut ws = Buffer::<f32>::zeros(&cs, 0)?;
    let (xa, ya, wa, ga) = (bx.all(), by.all(), bw.all(), bg.all());
    cl::fused_gelu_sgp_norm_backward(
        &cs,
        &sub,
        &xa,
        &ya,
        &wa,
        &ga,
        &mut dx.all_mut(),
        &mut dy.all_mut(),
        &mut dw.all_mut(),
        &mut ws,
    )?;
    let rel = if T::DTYPE == DType::F32 { 1e-4 } else { 2e-2 };
    for (what, dev, host) in [("dx", &o.dx, dx.to_vec(&cs)?), ("dy", &o.dy, dy.to_vec(&cs)?)] {
        let got = gather(&dev.to_vec(s)?, c, p.b, p.n, &rows);
        let want: Vec<f64> = host.iter().map(|v| v.to_f32() as f64).collect();
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        if let Some(i) = (0..got.len()).find(|&i| got[i].is_nan() || (got[i] - want[i]).abs() > rel * scale) {
            return Ok(Some(format!("{what} element {i}: got {:e}, want {:e}", got[i], want[i])));
        }
    }
    Ok(None)
}

/// Times one (op, p) on `backend`; checks the sampled rows first.
fn bench_row<T: Scalar>(
    backend: &Backend,
    s: &Stream,
    op: &str,
    p: &Clifford,
    opts: &CliffordOptions,
    copy_bps: f64,
) -> Result<CliffordRow> {
    if op == "fwd_sweep" || op == "fwdbwd_sweep" {
        return sweep_row::<T>(backend, s, p, opts, copy_bps, op == "fwdbwd_sweep");
    }
    if op == "fcgp_gemm" {
        return crate::clifford_gemm_peer::gemm_peer_row::<T>(backend, s, p, opts, copy_bps);
    }
    if op == "fcgp_gemms" {
        return crate::clifford_gemm_peer::own_gemms_row::<T>(backend, s, p, opts, copy_bps);
    }
    let cfg = match op {
        // The config `fused_gelu_fcgp_norm` takes for its norm pass.
        "fcgp_fwd" => CliffordConfig::assemble_heuristic(p, backend.device()),
        // The config `fused_gelu_sgp_norm` takes untuned on this stream (the heuristic fitted
        // to the compiled kernel's registers), and the backward's likewise.
        _ => ferrotune::ops::clifford::forward_config::<T>(s, p)?,
    };
    let bwd = ferrotune::ops::clifford::backward_config::<T>(s, p)?;
    bench_row_with::<T>(backend, s, op, p, opts, copy_bps, &cfg, &bwd)
}

/// `fwd_sweep`: the forward under every config of [`sweep_space`] (each checked, then timed);
/// the row carries the fastest correct one and every point.
fn sweep_row<T: Scalar>(
    backend: &Backend,
    s: &Stream,
    p: &Clifford,
    opts: &CliffordOptions,
    copy_bps: f64,
    backward: bool,
) -> Result<CliffordRow> {
    let repeat = Repeat { warmup: 3, iters: 15 };
    let quick = CliffordOptions { repeat, ..opts.clone() };
    let mut best: Option<CliffordRow> = None;
    let mut points = Vec::new();
    let fwd = CliffordConfig::heuristic(p, T::DTYPE, backend.device());
    let bwd = CliffordConfig::backward_heuristic(p, T::DTYPE, backend.device());
    let space = if backward { bwd_sweep_space(p) } else { sweep_space(p) };
    let mut o = operands::<T>(s, p, false, 5)?;
    for cfg in space {
        let (op, f, b) = if backward { ("fwdbwd", &fwd, &cfg) } else { ("fwd", &cfg, &bwd) };
        let Ok(mut r) = bench_row_on::<T>(backend, s, op, p, &quick, copy_bps, f, b, &mut o) else { continue };
        if backward {
            r.config = format!("bwd {}", describe(&cfg));
        }
        points.push(SweepPoint { config: r.config.clone(), ms: r.ms, correct: r.correct });
        if r.correct && best.as_ref().is_none_or(|b| r.ms < b.ms) {
            best = Some(r);
        }
    }
    let mut row =
        best.ok_or_else(|| ferrotune::Error::InvalidConfig { op: "clifford", why: "no config ran".into() })?;
    row.op = if backward { "fwdbwd_sweep" } else { "fwd_sweep" }.into();
    row.sweep = points;
    Ok(row)
}

#[allow(clippy::too_many_arguments)]
fn bench_row_with<T: Scalar>(
    backend: &Backend,
    s: &Stream,
    op: &str,
    p: &Clifford,
    opts: &CliffordOptions,
    copy_bps: f64,
    cfg: &CliffordConfig,
    bwd: &CliffordConfig,
) -> Result<CliffordRow> {
    let fcgp = op == "fcgp_fwd";
    let mut o = operands::<T>(s, p, fcgp, 5)?;
    bench_row_on::<T>(backend, s, op, p, opts, copy_bps, cfg, bwd, &mut o)
}

/// [`bench_row_with`] on given operands (the sweep makes them once): the outputs are poisoned
/// with NaN first, so a config that writes nothing cannot pass the check.
#[allow(clippy::too_many_arguments)]
fn bench_row_on<T: Scalar>(
    backend: &Backend,
    s: &Stream,
    op: &str,
    p: &Clifford,
    opts: &CliffordOptions,
    copy_bps: f64,
    cfg: &CliffordConfig,
    bwd: &CliffordConfig,
    o: &mut Operands<T>,
) -> Result<CliffordRow> {
    let (cfg, bwd) = (*cfg, *bwd);
    let fcgp = op == "fcgp_fwd";
    let nan = vec![T::from_f32(f32::NAN); p.mv_len()?];
    o.out = Buffer::from_slice(s, &nan)?;
    o.dx = Buffer::from_slice(s, &nan)?;
    o.dy = Buffer::from_slice(s, &nan)?;
    let mut ws = Buffer::<f32>::zeros(s, 0)?;
    let mut fws = if fcgp { Some(FcgpWorkspace::<T>::new(s, p)?) } else { None };
    let mut run = |o: &mut Operands<T>| -> ferrotune::Result<()> {
        let (x, y, w) = (o.x.all(), o.y.all(), o.w.all());
        if let Some(fws) = fws.as_mut() {
            return cl::run_fcgp_forward(s, p, &cfg, &x, &y, &w, fws, &mut o.out.all_mut());
        }
        cl::run_sgp_forward(s, p, &cfg, &x, &y, &w, &mut o.out.all_mut())?;
        if op == "fwdbwd" {
            let g = o.g.all();
            cl::run_sgp_backward(
                s,
                p,
                &bwd,
                &x,
                &y,
                &w,
                &g,
                &mut o.dx.all_mut(),
                &mut o.dy.all_mut(),
                &mut o.dw.all_mut(),
                &mut ws,
            )?;
        }
        Ok(())
    };
    run(o)?;
    let mut mismatch = check_forward(s, p, o, fcgp, opts.check_rows)?;
    if mismatch.is_none() && op == "fwdbwd" {
        mismatch = check_backward(s, p, o, opts.check_rows)?;
    }
    let stats = time_on_stream(s, opts.repeat, |_| run(o))?;
    let ms_queued =
        if matches!(backend, Backend::Cuda(_)) { Some(time_queued(s, opts.repeat, |_| run(o))?) } else { None };
    let (bytes, flops) = work(op, p, T::DTYPE.size_bytes())?;
    let secs = stats.median_ms * 1e-3;
    Ok(CliffordRow {
        dim: p.dim,
        op: op.into(),
        dtype: T::DTYPE.name().into(),
        backend: backend.name().into(),
        b: p.b,
        n: p.n,
        normalize: p.normalize,
        stats,
        ms: stats.median_ms,
        bytes,
        flops,
        bytes_per_s: bytes as f64 / secs,
        flops_per_s: flops as f64 / secs,
        ratio_to_copy: bytes as f64 / secs / copy_bps,
        ms_queued,
        ratio_to_copy_queued: None,
        config: if op == "fwdbwd" { format!("{}; bwd {}", describe(&cfg), describe(&bwd)) } else { describe(&cfg) },
        correct: mismatch.is_none(),
        mismatch,
        sweep: Vec::new(),
        rate_vs_gemm: None,
        rate_vs_own_gemms: None,
    })
}

/// A launch config in words.
fn describe(c: &CliffordConfig) -> String {
    format!(
        "threads {} rows/block {} {}_p{}{}{} blocks/SM {}",
        c.threads,
        c.rows_per_block,
        if c.variant.vec { "v4" } else { "v1" },
        c.variant.vpt,
        if c.variant.stream_w { "s" } else { "" },
        if c.cluster > 1 { format!("c cluster {}", c.cluster) } else { String::new() },
        c.blocks_per_sm
    )
}

/// Smallest source (and destination) of the CPU copy ceiling: 64 MiB, 32x the L2 of a core
/// and the size of the CPU roof bench (`cpu_roof.rs`), so the ceiling is the memory rate.
pub const CPU_COPY_MIN_BYTES: usize = 64 << 20;

/// The copy ceiling: our f32 copy kernel over `bytes` (read + write counted).
fn copy_ceiling(backend: &Backend, s: &Stream, bytes: usize, repeat: Repeat) -> Result<CopyCeiling> {
    let n = (bytes / 4).max(1);
    let src = Buffer::from_slice(s, &Rng::new(1).vec::<f32>(n, -1.0, 1.0))?;
    let mut dst = Buffer::<f32>::zeros(s, n)?;
    let cfg = ElemConfig::heuristic(ElemOp::Copy, DType::F32, backend.device());
    let stats = time_on_stream(s, repeat, |_| {
        ops::run_elementwise(s, ElemOp::Copy, &cfg, &[&src.all()], &mut dst.all_mut(), 0.0)
    })?;
    let moved = 2 * n as u64 * 4;
    let queued_bytes_per_s = if matches!(backend, Backend::Cuda(_)) {
        let ms = time_queued(s, repeat, |_| {
            ops::run_elementwise(s, ElemOp::Copy, &cfg, &[&src.all()], &mut dst.all_mut(), 0.0)
        })?;
        Some(moved as f64 / (ms * 1e-3))
    } else {
        None
    };
    Ok(CopyCeiling { bytes: moved, stats, bytes_per_s: moved as f64 / (stats.median_ms * 1e-3), queued_bytes_per_s })
}

/// Runs every (dtype, dim, op, shape) row; `progress` gets one line each. `date` and
/// `commit` are left for the caller.
pub fn run(backend: &Backend, opts: &CliffordOptions, mut progress: impl FnMut(&str)) -> Result<CliffordReport> {
    let s = backend.stream();
    let largest = opts.shapes.iter().map(|&(b, n)| 8 * b * n * 4).max().unwrap_or(1 << 20);
    // On the CPU a copy of the small shapes' size stays in L2 (2 MiB a core here) and reads
    // 4x the memory rate: the roof is a copy of at least CPU_COPY_MIN_BYTES per buffer.
    let copy_bytes = if matches!(backend, Backend::Cpu(_)) { largest.max(CPU_COPY_MIN_BYTES) } else { largest };
    let copy = copy_ceiling(backend, &s, copy_bytes, opts.repeat)?;
    progress(&format!(
        "copy ceiling: {:.3} ms, {:.1} GB/s{}",
        copy.stats.median_ms,
        copy.bytes_per_s / 1e9,
        copy.queued_bytes_per_s.map_or(String::new(), |q| format!(", queued {:.1} GB/s", q / 1e9))
    ));
    let mut rows = Vec::new();
    for &dt in &opts.dtypes {
        for &dim in &opts.dims {
            for op in &opts.ops {
                for &(b, n) in &opts.shapes {
                    let p = Clifford::new(dim, b, n, true);
                    let mut row = match dt {
                        DType::F32 => bench_row::<f32>(backend, &s, op, &p, opts, copy.bytes_per_s)?,
                        DType::F16 => bench_row::<f16>(backend, &s, op, &p, opts, copy.bytes_per_s)?,
                        DType::Bf16 => bench_row::<bf16>(backend, &s, op, &p, opts, copy.bytes_per_s)?,
                    };
                    if let (Some(ms), Some(cq)) = (row.ms_queued, copy.queued_bytes_per_s) {
                        row.ratio_to_copy_queued = Some(row.bytes as f64 / (ms * 1e-3) / cq);
                    }
                    progress(&format!(
                        "d{} {:<8} {:<4} B {:>5} N {:>5} {:>9.4} ms {:>8.1} GB/s {:>5.2}x copy {:>9.1} GFLOP/s {} {}",
                        row.dim,
                        row.op,
                        row.dtype,
                        row.b,
                        row.n,
                        row.ms,
                        row.bytes_per_s / 1e9,
                        row.ratio_to_copy,
                        row.flops_per_s / 1e9,
                        if row.correct { "ok" } else { "MISMATCH" },
                        row.ms_queued
                            .zip(row.ratio_to_copy_queued)
                            .map_or(String::new(), |(q, r)| format!("queued {q:.4} ms {r:.2}x copy")),
                    ));
                    rows.push(row);
                }
            }
        }
    }
    crate::clifford_gemm_peer::join_rates(&mut rows);
    for r in rows.iter().filter(|r| r.rate_vs_gemm.is_some() || r.rate_vs_own_gemms.is_some()) {
        let share = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}x"));
        progress(&format!(
            "d{} fcgp_fwd {:<4} B {:>5} N {:>5} {:.1} TFLOP/s = {} our plain GEMM (M = total B, N, K = N), {} its own GEMM calls alone",
            r.dim,
            r.dtype,
            r.b,
            r.n,
            r.flops_per_s / 1e12,
            share(r.rate_vs_gemm),
            share(r.rate_vs_own_gemms)
        ));
    }
    let (device, driver) = match backend {
        Backend::Cuda(g) => (Some(g.info().name.clone()), Some(g.info().driver_version)),
        Backend::Cpu(_) => (None, None),
    };
    Ok(CliffordReport {
        schema: SCHEMA.into(),
        backend: backend.name().into(),
        device,
        driver,
        commit: String::new(),
        date: String::new(),
        warmup: opts.repeat.warmup,
        iters: opts.repeat.iters,
        copy,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_counts_minimum_traffic() {
        let p = Clifford::new(2, 2, 3, true);
        // C B N = 24 elements per tensor, W N = 30 weights.
        assert_eq!(work("fwd", &p, 4).unwrap(), ((3 * 24 + 30) * 4, 2 * 16 * 6));
        assert_eq!(work("fwdbwd", &p, 4).unwrap().0, (8 * 24 + 90) * 4);
        assert_eq!(work("fcgp_fwd", &p, 2).unwrap(), ((3 * 24 + 10 * 9) * 2, 2 * 14 * 6 * 3));
        assert!(work("fwd", &Clifford::new(4, 2, 3, true), 4).is_err());
    }

    #[test]
    fn cpu_run_is_correct_on_a_small_shape() {
        let b = cpu_backend();
        let opts = CliffordOptions {
            dims: vec![2, 3],
            ops: OPS.iter().map(|s| s.to_string()).collect(),
            dtypes: vec![DType::F32],
            shapes: vec![(5, 12)],
            repeat: Repeat { warmup: 0, iters: 1 },
            check_rows: 3,
        };
        let rep = run(&b, &opts, |_| {}).unwrap();
        assert_eq!(rep.rows.len(), 6);
        assert!(rep.rows.iter().all(|r| r.correct), "{:?}", rep.rows.iter().find(|r| !r.correct));
    }
}
