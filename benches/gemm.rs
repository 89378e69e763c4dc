//! The GEMM benchmark: our kernels against cuBLAS on the same shapes and dtypes in the same
//! process, each result checked against a float64 reference on sampled elements; plus the
//! batched (against separate launches and cuBLAS strided-batched), fused-epilogue (against
//! our unfused kernels and cuBLASLt's GELU_BIAS epilogue) and split-K (our heuristic's choice
//! and our best forced split against cuBLAS on skinny, long-K shapes) comparisons.

use ferrotune::ops::gemm::{Epilogue, Gemm, Layout, Precision, SplitPlan, gemm};
use ferrotune::ops::{self, Activation, GeluForm};
use ferrotune::peer::{CublasBatchedGemm, CublasGemm, CublasLtGeluBias, GemmMath, GemmShape, PeerError};
use ferrotune::{Backend, Buffer, DType, Result, Scalar, Stream, bf16, f16};
use ferrotune_autotune::measure::{Repeat, Stats, time_on_stream};
use ferrotune_testkit::Rng;
use serde::{Deserialize, Serialize};

/// One (dtype, shape) comparison.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GemmRow {
    pub case: String,
    pub dtype: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batch: usize,
    pub ours: Stats,
    pub ours_tflops: f64,
    /// The peer's time for the same work (cuBLAS, or another of our variants for the
    /// batched/fused cases, named in `peer`).
    pub peer: String,
    pub peer_stats: Option<Stats>,
    pub peer_tflops: Option<f64>,
    /// ours / peer throughput (> 1: we are faster).
    pub ratio: Option<f64>,
    /// Sampled elements matched the f64 reference within the dtype tolerance.
    pub correct: bool,
    pub mismatch: Option<String>,
    /// Slices of K our kernel ran with (1: no split-K); null in files from before split-K.
    #[serde(default)]
    pub split_k: Option<usize>,
    /// `split_k best forced` rows: every forced factor's run, by the slices it ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub split_k_sweep: Vec<SplitTiming>,
    /// The kernel path our call ran (`sm90:<entry>`, `mma:<entry>`, `splitk:<slices>`...) and
    /// why (see `ops::gemm_plan`); null in files from before the plan.
    #[serde(default)]
    pub path: Option<String>,
    /// Plain GEMM rows on a GPU: our call captured once in a CUDA graph and replayed
    /// (`graph_time`), its output checked again after the replays; the peer files carry
    /// torch's `matmul_graph` likewise. `ratio` stays the single call's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ours_graph: Option<Stats>,
    /// Plain GEMM rows on a GPU: the cuBLAS peer captured in a CUDA graph and replayed
    /// (`graph_time::cublas_replays`), its output checked before; absent where it could not
    /// run (the reason in `peer_graph_note`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_graph: Option<Stats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_graph_note: Option<String>,
}

/// The path and reason `ops::gemm` takes for `g` here (fresh, aligned operands).
pub fn path_of(backend: &Backend, g: &Gemm, dtype: DType, out: DType) -> Option<String> {
    match ferrotune::ops::gemm_plan::explain(&backend.stream(), g, dtype, out) {
        Ok(Some(p)) => Some(format!("{} ({})", p.path(), p.reason)),
        Ok(None) => None,
        Err(e) => Some(format!("no plan: {e}")),
    }
}

/// One forced split-K factor's run in the sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SplitTiming {
    pub split_k: usize,
    pub median_ms: f64,
    pub correct: bool,
}

/// The K slices `ops::gemm` runs `g` with here: the chosen config's split-K (profile, else
/// heuristic) or the call's own, as the plan cuts it (batches never split).
pub fn slices_run(backend: &Backend, g: &Gemm, dtype: DType) -> usize {
    let r = g.resolved();
    if r.batch > 1 {
        return 1;
    }
    // The Hopper split (joined in the kernel) is the plan's, not the config's.
    use ferrotune::ops::gemm_plan::{Family, Launch};
    if let Ok(Some(p)) = ferrotune::ops::gemm_plan::explain(&backend.stream(), g, dtype, dtype)
        && let Family::Launch(Launch::Hopper(_, sp)) = p.family
    {
        return sp.slices;
    }
    let s = g.split_k.unwrap_or_else(|| ferrotune::config::gemm_explain(&r, dtype, backend).0.split_k);
    SplitPlan::new(r.k, s).slices
}

fn tflops(flops: f64, ms: f64) -> f64 {
    flops / (ms * 1e-3) / 1e12
}

/// Elements of a vendor peer's output checked against its float64 reference before timing.
const PEER_SAMPLES: usize = 256;

/// A vendor peer the bench checks, then times.
trait Peer {
    fn verify(&mut self, samples: usize) -> std::result::Result<f64, PeerError>;
    fn launch(&mut self) -> std::result::Result<(), PeerError>;
}

impl Peer for CublasBatchedGemm {
    fn verify(&mut self, samples: usize) -> std::result::Result<f64, PeerError> {
        CublasBatchedGemm::verify(self, samples)
    }
    fn launch(&mut self) -> std::result::Result<(), PeerError> {
        CublasBatchedGemm::launch(self)
    }
}

impl Peer for CublasLtGeluBias {
    fn verify(&mut self, samples: usize) -> std::result::Result<f64, PeerError> {
        CublasLtGeluBias::verify(self, samples)
    }
    fn launch(&mut self) -> std::result::Result<(), PeerError> {
        CublasLtGeluBias::launch(self)
    }
}

/// Checks `peer` on sampled elements, then times its launches: the row's peer column and
/// stats. A peer that cannot be made, fails, or does not match its reference is not a
/// comparison: no stats, and the column says why.
fn check_and_time<P: Peer>(
    s: &Stream,
    repeat: Repeat,
    name: &str,
    peer: std::result::Result<P, PeerError>,
) -> (String, Option<Stats>) {
    let timed = peer.and_then(|mut p| {
        p.verify(PEER_SAMPLES)?;
        time_on_stream(s, repeat, |_| {
            p.launch().map_err(|e| ferrotune::Error::InvalidConfig { op: "peer", why: e.to_string() })
        })
        .map_err(PeerError::from)
    });
    match timed {
        Ok(st) => (name.into(), Some(st)),
        Err(e) => (format!("{name} not run: {e}"), None),
    }
}

/// Checks `samples` random elements of D (and its corners and centre) against a float64 dot
/// product (`ferrotune_testkit::gemm_check_samples`).
pub(crate) fn check_samples<T: Scalar, O: Scalar>(
    g: &Gemm,
    a: &[T],
    b: &[T],
    d: &[O],
    bias: Option<&[O]>,
    samples: usize,
) -> Option<String> {
    ferrotune_testkit::gemm_check_samples(g, a, b, d, bias, samples, 99).err()
}

/// Operands of one problem on the device, and their host copies for the check.
struct Operands<T: Scalar, O: Scalar> {
    ha: Vec<T>,
    hb: Vec<T>,
    a: Buffer<T>,
    b: Buffer<T>,
    d: Buffer<O>,
    hbias: Vec<O>,
    bias: Buffer<O>,
}

fn operands<T: Scalar, O: Scalar>(s: &Stream, g: &Gemm, seed: u64) -> Result<Operands<T, O>> {
    let r = g.resolved();
    let mut rng = Rng::new(seed);
    let ha: Vec<T> = rng.vec(r.batch * r.stride_a, -1.0, 1.0);
    let hb: Vec<T> = rng.vec(r.batch * r.stride_b, -1.0, 1.0);
    let hbias: Vec<O> = rng.vec(r.n, -1.0, 1.0);
    let nan = O::from_f32(f32::NAN);
    Ok(Operands {
        a: Buffer::from_slice(s, &ha)?,
        b: Buffer::from_slice(s, &hb)?,
        d: Buffer::from_slice(s, &vec![nan; r.batch * r.stride_c])?,
        bias: Buffer::from_slice(s, &hbias)?,
        ha,
        hb,
        hbias,
    })
}

fn run_ours<T: Scalar, O: Scalar>(s: &Stream, g: &Gemm, o: &mut Operands<T, O>) -> Result<()> {
    let bias = o.bias.all();
    gemm::<T, O>(s, g, &o.a.all(), &o.b.all(), None, g.epilogue.bias.then_some(&bias), &mut o.d.all_mut())
}

/// Our GEMM (A row-major, B column-major: `x wᵀ`) against cuBLAS for one shape and dtype.
pub fn compare_with_cublas(backend: &Backend, math: GemmMath, shape: GemmShape, repeat: Repeat) -> Result<GemmRow> {
    match math {
        // f32 against cuBLAS's exact f32, TF32 against cuBLAS with TF32 tensor-core maths.
        GemmMath::F32 => compare_typed::<f32>(backend, math, shape, repeat),
        GemmMath::Tf32 => compare_typed::<f32>(backend, math, shape, repeat),
        GemmMath::F16 => compare_typed::<f16>(backend, math, shape, repeat),
        GemmMath::Bf16 => compare_typed::<bf16>(backend, math, shape, repeat),
    }
}

fn compare_typed<T: Scalar>(backend: &Backend, math: GemmMath, shape: GemmShape, repeat: Repeat) -> Result<GemmRow> {
    let s = backend.stream();
    let precision = if math == GemmMath::F32 { Precision::Strict } else { Precision::AllowTf32 };
    let g = Gemm::new(shape.m, shape.n, shape.k).layouts(Layout::Row, Layout::Col).precision(precision);
    let mut o = operands::<T, T>(&s, &g, 7)?;
    run_ours(&s, &g, &mut o)?;
    let d = o.d.to_vec(&s)?;
    let mismatch = check_samples(&g, &o.ha, &o.hb, &d, None, 256);
    let ours = time_on_stream(&s, repeat, |_| run_ours(&s, &g, &mut o))?;
    let (ours_graph, mismatch) = graphed(backend, repeat, &g, &mut o, mismatch)?;
    drop(o);
    let peer = CublasGemm::new(&s, math, shape).and_then(|mut p| {
        time_on_stream(&s, repeat, |_| {
            p.launch().map_err(|e| ferrotune::Error::InvalidConfig { op: "cublas", why: e.to_string() })
        })
        .map_err(ferrotune::peer::PeerError::from)
    });
    let (peer_stats, peer_tflops) = match &peer {
        Ok(st) => (Some(*st), Some(tflops(g.flops(), st.median_ms))),
        Err(_) => (None, None),
    };
    let (peer_graph, peer_graph_note) = match crate::graph_time::cublas_replays(backend, repeat, math, shape, 1) {
        Ok(st) => (st, None),
        Err(e) => (None, Some(format!("cuBLAS in a graph not run: {e}"))),
    };
    let ours_tflops = tflops(g.flops(), ours.median_ms);
    Ok(GemmRow {
        case: "gemm".into(),
        dtype: math.name().into(),
        m: shape.m,
        n: shape.n,
        k: shape.k,
        batch: 1,
        ours,
        ours_tflops,
        peer: match &peer {
            Ok(_) => "cuBLAS".into(),
            Err(e) => format!("cuBLAS unavailable: {e}"),
        },
        peer_stats,
        peer_tflops,
        ratio: peer_tflops.map(|p| ours_tflops / p),
        correct: mismatch.is_none(),
        mismatch,
        split_k: Some(slices_run(backend, &g, T::DTYPE)),
        split_k_sweep: Vec::new(),
        path: path_of(backend, &g, T::DTYPE, T::DTYPE),
        ours_graph,
        peer_graph,
        peer_graph_note,
    })
}

/// Our call on `o` graphed and replayed ([`graph_time::replay_stats`]); then D is poisoned
/// with NaN, the graph replayed once more and D sampled against the reference, so a graph that
/// wrote nothing or the wrong thing makes the row's mismatch (the eager call's, if any, wins).
fn graphed<T: Scalar>(
    backend: &Backend,
    repeat: Repeat,
    g: &Gemm,
    o: &mut Operands<T, T>,
    mismatch: Option<String>,
) -> Result<(Option<Stats>, Option<String>)> {
    let Some(r) = crate::graph_time::replay_stats(backend, repeat, 1, |_, c| run_ours(c, g, o))? else {
        return Ok((None, mismatch));
    };
    let s = backend.stream();
    o.d.copy_from(&s, &vec![T::from_f32(f32::NAN); o.d.len()])?;
    s.synchronize()?;
    r.replay_once()?;
    let d = o.d.to_vec(&s)?;
    let after = check_samples(g, &o.ha, &o.hb, &d, None, 256).map(|m| format!("graph replay: {m}"));
    Ok((Some(r.stats), mismatch.or(after)))
}

/// The split-K comparison's shapes (m, n, k): few output tiles, long K.
pub const SPLIT_K_SHAPES: [(usize, usize, usize); 4] =
    [(256, 256, 65536), (512, 512, 32768), (1024, 1024, 16384), (128, 4096, 8192)];
/// The split-K factors forced to find our best.
pub const SPLIT_K_FACTORS: [usize; 5] = [1, 2, 4, 8, 16];

/// Split-K on one shape (A row-major, B column-major), each of our runs checked against the
/// float64 reference on sampled elements: our default (the heuristic's or a profile's split,
/// `split_k` says which) and the fastest correct forced factor of [`SPLIT_K_FACTORS`], both
/// against cuBLAS in the same process. Rows: `split_k heuristic` and `split_k best forced`
/// (with every forced factor's run in `split_k_sweep`).
pub fn split_k_comparisons(
    backend: &Backend,
    math: GemmMath,
    shape: GemmShape,
    repeat: Repeat,
) -> Result<[GemmRow; 2]> {
    match math {
        GemmMath::F32 | GemmMath::Tf32 => split_k_typed::<f32>(backend, math, shape, repeat),
        GemmMath::F16 => split_k_typed::<f16>(backend, math, shape, repeat),
        GemmMath::Bf16 => split_k_typed::<bf16>(backend, math, shape, repeat),
    }
}

fn split_k_typed<T: Scalar>(
    backend: &Backend,
    math: GemmMath,
    shape: GemmShape,
    repeat: Repeat,
) -> Result<[GemmRow; 2]> {
    let s = backend.stream();
    let precision = if math == GemmMath::F32 { Precision::Strict } else { Precision::AllowTf32 };
    let base = Gemm::new(shape.m, shape.n, shape.k).layouts(Layout::Row, Layout::Col).precision(precision);
    let mut o = operands::<T, T>(&s, &base, 17)?;
    let poisoned = vec![T::from_f32(f32::NAN); shape.m * shape.n];
    // Poisoned D, one checked run, then the timed runs.
    let mut measure = |g: &Gemm| -> Result<(Stats, Option<String>)> {
        o.d.copy_from(&s, &poisoned)?;
        run_ours(&s, g, &mut o)?;
        let d = o.d.to_vec(&s)?;
        let mismatch = check_samples(g, &o.ha, &o.hb, &d, None, 256);
        let st = time_on_stream(&s, repeat, |_| run_ours(&s, g, &mut o))?;
        Ok((st, mismatch))
    };
    let heuristic = measure(&base)?;
    let mut forced: Vec<(usize, Stats, Option<String>)> = Vec::new();
    for f in SPLIT_K_FACTORS {
        let slices = SplitPlan::new(shape.k, f).slices;
        if forced.iter().any(|x| x.0 == slices) {
            continue; // K too short for f slices: the same run as a smaller factor
        }
        let (st, mm) = measure(&base.split_k(f))?;
        forced.push((slices, st, mm));
    }
    drop(o);
    // The fastest correct factor (a wrong one is never "best"; if all are wrong, the fastest).
    let best = forced
        .iter()
        .filter(|x| x.2.is_none())
        .chain(forced.iter().filter(|x| x.2.is_some()))
        .min_by(|a, b| (a.2.is_some(), a.1.median_ms).partial_cmp(&(b.2.is_some(), b.1.median_ms)).unwrap())
        .cloned()
        .ok_or_else(|| ferrotune::Error::InvalidConfig { op: "bench", why: "no split-K factor ran".into() })?;
    let sweep: Vec<SplitTiming> = forced
        .iter()
        .map(|(sl, st, mm)| SplitTiming { split_k: *sl, median_ms: st.median_ms, correct: mm.is_none() })
        .collect();
    let peer = CublasGemm::new(&s, math, shape).and_then(|mut p| {
        time_on_stream(&s, repeat, |_| {
            p.launch().map_err(|e| ferrotune::Error::InvalidConfig { op: "cublas", why: e.to_string() })
        })
        .map_err(ferrotune::peer::PeerError::from)
    });
    let flops = base.flops();
    let (peer_name, peer_stats) = match &peer {
        Ok(st) => ("cuBLAS".to_string(), Some(*st)),
        Err(e) => (format!("cuBLAS unavailable: {e}"), None),
    };
    let row = |case: String, ours: Stats, mismatch: Option<String>, split_k: usize| {
        let ours_tflops = tflops(flops, ours.median_ms);
        let peer_tflops = peer_stats.map(|st| tflops(flops, st.median_ms));
        GemmRow {
            case,
            dtype: math.name().into(),
            m: shape.m,
            n: shape.n,
            k: shape.k,
            batch: 1,
            ours,
            ours_tflops,
            peer: peer_name.clone(),
            peer_stats,
            peer_tflops,
            ratio: peer_tflops.map(|p| ours_tflops / p),
            correct: mismatch.is_none(),
            mismatch,
            split_k: Some(split_k),
            split_k_sweep: Vec::new(),
            path: Some(format!("splitk:{split_k} (forced)")),
            ours_graph: None,
            peer_graph: None,
            peer_graph_note: None,
        }
    };
    let mut best_row = row("split_k best forced".into(), best.1, best.2, best.0);
    best_row.split_k_sweep = sweep;
    // The unforced run is whatever the plan chose (on sm_90a the Hopper split for these shapes).
    let mut heuristic_row =
        row("split_k heuristic".into(), heuristic.0, heuristic.1, slices_run(backend, &base, T::DTYPE));
    heuristic_row.path = path_of(backend, &base, T::DTYPE, T::DTYPE);
    Ok([heuristic_row, best_row])
}

/// A strided batch of row-major bf16 products in one launch, against the same products launched
/// one by one (ours) and against cuBLAS's strided-batched GEMM on the same layout. Returns
/// (vs separate launches, vs cuBLAS).
pub fn batched_comparisons(
    backend: &Backend,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    repeat: Repeat,
) -> Result<[GemmRow; 2]> {
    let s = backend.stream();
    let g = Gemm::new(m, n, k).batched(batch);
    let split_k = Some(slices_run(backend, &g, DType::Bf16));
    let mut o = operands::<bf16, bf16>(&s, &g, 11)?;
    run_ours(&s, &g, &mut o)?;
    let d = o.d.to_vec(&s)?;
    let mismatch = check_samples(&g, &o.ha, &o.hb, &d, None, 256);
    let ours = time_on_stream(&s, repeat, |_| run_ours(&s, &g, &mut o))?;
    let r = g.resolved();
    let single = Gemm::new(m, n, k);
    let looped = time_on_stream(&s, repeat, |_| {
        for z in 0..batch {
            let a = o.a.view(z * r.stride_a..(z + 1) * r.stride_a)?;
            let b = o.b.view(z * r.stride_b..(z + 1) * r.stride_b)?;
            let mut dz = o.d.view_mut(z * r.stride_c..(z + 1) * r.stride_c)?;
            gemm::<bf16, bf16>(&s, &single, &a, &b, None, None, &mut dz)?;
        }
        Ok(())
    })?;
    drop(o);
    let shape = GemmShape { m, n, k };
    let (cublas, cublas_stats) =
        check_and_time(&s, repeat, "cuBLAS strided-batched", CublasBatchedGemm::new(&s, GemmMath::Bf16, shape, batch));
    let row = |peer: String, st: Option<Stats>| {
        let peer_tflops = st.map(|st| tflops(g.flops(), st.median_ms));
        let ours_tflops = tflops(g.flops(), ours.median_ms);
        GemmRow {
            case: format!("batched {batch} x"),
            dtype: "bf16".into(),
            m,
            n,
            k,
            batch,
            ours,
            ours_tflops,
            peer,
            peer_stats: st,
            peer_tflops,
            ratio: peer_tflops.map(|p| ours_tflops / p),
            correct: mismatch.is_none(),
            mismatch: mismatch.clone(),
            split_k,
            split_k_sweep: Vec::new(),
            path: path_of(backend, &g, DType::Bf16, DType::Bf16),
            ours_graph: None,
            peer_graph: None,
            peer_graph_note: None,
        }
    };
    Ok([row(format!("{batch} separate launches (ours)"), Some(looped)), row(cublas, cublas_stats)])
}

/// `gelu(x wᵀ + bias)` fused, against our GEMM alone and against GEMM + bias_add + gelu as
/// three kernels; and, with the tanh GELU (the form cuBLASLt's epilogue computes), against
/// cuBLASLt's GELU_BIAS epilogue. Returns (fused vs GEMM-only, fused vs three kernels, tanh
/// fused vs cuBLASLt): the third row's case is `linear_bias_gelu_tanh`, its time our kernel
/// with the tanh epilogue.
pub fn fused_linear_bias_gelu(backend: &Backend, m: usize, n: usize, k: usize, repeat: Repeat) -> Result<[GemmRow; 3]> {
    let s = backend.stream();
    let e = Epilogue { bias: true, act: Activation::GeluErf, ..Epilogue::PLAIN };
    let fused = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).epilogue(e);
    let plain = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col);
    let mut o = operands::<bf16, bf16>(&s, &fused, 13)?;
    run_ours(&s, &fused, &mut o)?;
    let d = o.d.to_vec(&s)?;
    let mismatch = check_samples(&fused, &o.ha, &o.hb, &d, Some(&o.hbias), 256);
    let t_fused = time_on_stream(&s, repeat, |_| run_ours(&s, &fused, &mut o))?;
    let t_plain = time_on_stream(&s, repeat, |_| run_ours(&s, &plain, &mut o))?;
    let mut tmp = Buffer::<bf16>::zeros(&s, m * n)?;
    let t_three = time_on_stream(&s, repeat, |_| {
        run_ours(&s, &plain, &mut o)?;
        ops::bias_add_inplace(&s, &mut o.d.all_mut(), &o.bias.all(), m, n)?;
        ops::gelu(&s, GeluForm::Erf, &o.d.all(), &mut tmp.all_mut())
    })?;
    let tanh = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).epilogue(Epilogue {
        bias: true,
        act: Activation::GeluTanh,
        ..Epilogue::PLAIN
    });
    run_ours(&s, &tanh, &mut o)?;
    let d = o.d.to_vec(&s)?;
    let tanh_mismatch = check_samples(&tanh, &o.ha, &o.hb, &d, Some(&o.hbias), 256);
    let t_tanh = time_on_stream(&s, repeat, |_| run_ours(&s, &tanh, &mut o))?;
    drop((o, tmp));
    let (lt, lt_stats) = check_and_time(
        &s,
        repeat,
        "cuBLASLt GELU_BIAS",
        CublasLtGeluBias::new(&s, GemmMath::Bf16, GemmShape { m, n, k }),
    );
    let flops = fused.flops();
    let split_k = Some(slices_run(backend, &fused, DType::Bf16));
    // Each row names the path of the GEMM it timed (the tanh epilogue may take another tile).
    let (fused_path, tanh_path) =
        (path_of(backend, &fused, DType::Bf16, DType::Bf16), path_of(backend, &tanh, DType::Bf16, DType::Bf16));
    let row =
        |case: &str, ours: Stats, peer: String, st: Option<Stats>, mismatch: &Option<String>, path: &Option<String>| {
            GemmRow {
                case: case.into(),
                dtype: DType::Bf16.name().into(),
                m,
                n,
                k,
                batch: 1,
                ours,
                ours_tflops: tflops(flops, ours.median_ms),
                peer,
                peer_stats: st,
                peer_tflops: st.map(|st| tflops(flops, st.median_ms)),
                ratio: st.map(|st| st.median_ms / ours.median_ms),
                correct: mismatch.is_none(),
                mismatch: mismatch.clone(),
                split_k,
                split_k_sweep: Vec::new(),
                path: path.clone(),
                ours_graph: None,
                peer_graph: None,
                peer_graph_note: None,
            }
        };
    Ok([
        row("linear_bias_gelu", t_fused, "our GEMM without epilogue".into(), Some(t_plain), &mismatch, &fused_path),
        row(
            "linear_bias_gelu",
            t_fused,
            "GEMM + bias_add + gelu (3 kernels, ours)".into(),
            Some(t_three),
            &mismatch,
            &fused_path,
        ),
        row("linear_bias_gelu_tanh", t_tanh, lt, lt_stats, &tanh_mismatch, &tanh_path),
    ])
}
