//! The irregular-shape GEMM suite (`cargo xtask bench --ops gemm --shape-suite irregular`):
//! odd M/N/K, small M (the decode shape), tiny and long K, LLM layer shapes, each against
//! cuBLAS in the same process, every row naming the kernel family and config that ran and
//! checked against the float64 reference (sampled elements, D poisoned first) before timing.
//! Operands rotate over several copies so the working set exceeds twice the L2 (memory-bound
//! rows are not served from cache), and a copy-bandwidth ceiling measured in the same run gives
//! the small-M rows their fraction of copy bandwidth on the weight's bytes.

use ferrotune::ops::gemm::{Gemm, Layout, Precision, gemm};
use ferrotune::peer::{CublasGemm, GemmMath, GemmShape};
use ferrotune::{Backend, Buffer, DType, Result, Scalar, bf16, f16, ops};
use ferrotune_autotune::measure::{Repeat, Stats, time_on_stream, time_queued};
use ferrotune_testkit::Rng;
use serde::{Deserialize, Serialize};

/// The suite's shapes (m, n, k): A row-major, B column-major (`x wᵀ`).
pub const IRREGULAR: [(usize, usize, usize); 26] = [
    (1, 4096, 4096),
    (8, 4096, 4096),
    (16, 11008, 4096),
    (1, 14336, 4096),
    (1, 4096, 14336),
    (33, 8191, 4099),
    (64, 4096, 4096),
    (1, 8193, 4099),
    (8, 3000, 64),
    (33, 1023, 777),
    (1, 4097, 777),
    (8, 12288, 4099),
    (33, 4096, 64),
    (4097, 1023, 777),
    (8191, 8193, 64),
    (128, 8192, 1024),
    (256, 256, 65536),
    (512, 512, 32768),
    (1024, 1024, 16384),
    (1000, 3000, 700),
    (2047, 2049, 1025),
    (3, 5, 7),
    (1, 1, 4099),
    (17, 33, 9000),
    (4096, 4096, 4096),
    (8192, 3072, 768),
];

/// One (shape, dtype) row.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SuiteRow {
    pub dtype: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Kernel family and config our call ran (`small-M <entry> ksplit S` or `tiles <entry> split S`).
    pub family: String,
    pub ours: Stats,
    pub ours_tflops: f64,
    /// Bytes of the weight (B) per second of our median: the small-M rows' figure of merit.
    pub weight_bytes_per_s: f64,
    /// `weight_bytes_per_s` over the copy ceiling of this run (small-M rows; null otherwise).
    pub copy_fraction: Option<f64>,
    /// Rows under 0.2 ms: the median per call of [`QUEUE`](ferrotune_autotune::measure::QUEUE) calls queued between two events (the
    /// GPU's time per call once launches overlap; `ours` times each call alone, host launch
    /// cost included), ours and cuBLAS alike.
    pub ours_queued_ms: Option<f64>,
    pub cublas_queued_ms: Option<f64>,
    /// `copy_fraction` from `ours_queued_ms`.
    pub copy_fraction_queued: Option<f64>,
    /// Rows under 0.2 ms: the CPU's time per call, in µs, to enqueue [`HOST_CALLS`] calls back
    /// to back without waiting for the GPU (plan, checks and launch: what a call costs the
    /// host), ours and cuBLAS alike. Where it is above the queued time per call, the host
    /// sets the pace of a stream of such calls.
    #[serde(default)]
    pub ours_host_us: Option<f64>,
    #[serde(default)]
    pub cublas_host_us: Option<f64>,
    /// Rows under 0.2 ms: our call on each operand copy captured in a CUDA graph and replayed
    /// in turn, the median per replay (`graph_time`; torch's `matmul_graph` is the peer's
    /// like). A replay after NaN-poisoning D is checked against the reference (`mismatch`).
    #[serde(default)]
    pub ours_graph_ms: Option<f64>,
    /// Rows under 0.2 ms: cuBLAS on each operand copy captured in a CUDA graph and replayed in
    /// turn, the median per replay (`graph_time::cublas_replays`; why not, in `peer_note`).
    #[serde(default)]
    pub cublas_graph_ms: Option<f64>,
    pub cublas: Option<Stats>,
    pub cublas_tflops: Option<f64>,
    /// ours / cuBLAS throughput (> 1: we are faster).
    pub ratio: Option<f64>,
    /// Operand copies rotated over in the timed loop (both ours and cuBLAS).
    pub copies: usize,
    pub correct: bool,
    pub mismatch: Option<String>,
    pub peer_note: Option<String>,
}

/// The whole suite, with the copy ceiling it was judged against.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SuiteReport {
    pub suite: String,
    pub device: String,
    pub driver: String,
    pub date: String,
    pub commit: String,
    /// Our copy kernel on 256 MiB: (read + written bytes) per second.
    pub copy_bytes_per_s: f64,
    pub copy: Stats,
    pub rows: Vec<SuiteRow>,
}

const MIB: usize = 1 << 20;

/// Calls enqueued for the host time per call (few enough that the launch queue never fills).
pub const HOST_CALLS: usize = 200;

/// The CPU's time per call, in µs, of [`HOST_CALLS`] calls of `call` enqueued back to back on
/// `s` (the stream idle before, drained after; the median of three such rounds).
pub fn host_us(s: &ferrotune::Stream, mut call: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    let mut t = Vec::with_capacity(3);
    for round in 0..3 {
        s.synchronize()?;
        let start = std::time::Instant::now();
        for i in 0..HOST_CALLS {
            call(round * HOST_CALLS + i)?;
        }
        t.push(start.elapsed().as_secs_f64() * 1e6 / HOST_CALLS as f64);
        s.synchronize()?;
    }
    t.sort_by(f64::total_cmp);
    Ok(t[1])
}

/// Copy bandwidth: `ops::copy` of 256 MiB (bytes read plus bytes written over the median).
pub fn copy_ceiling(backend: &Backend, repeat: Repeat) -> Result<(f64, Stats)> {
    let s = backend.stream();
    let n = 64 * MIB; // f32 elements
    let x = Buffer::<f32>::zeros(&s, n)?;
    let mut y = Buffer::<f32>::zeros(&s, n)?;
    let st = time_on_stream(&s, repeat, |_| ops::copy(&s, &x.all(), &mut y.all_mut()))?;
    Ok((2.0 * 4.0 * n as f64 / (st.median_ms * 1e-3), st))
}

/// What our call runs for `g` with operands at `ptrs` (A, B): the plan's path and reason
/// (`ops::gemm_plan`, the same decision the call makes).
pub fn family(backend: &Backend, g: &Gemm, dtype: DType, ptrs: [u64; 2]) -> String {
    let s = backend.stream();
    let cfg = ferrotune::config::gemm_explain(&g.resolved(), dtype, backend).0;
    let plan = ferrotune::ops::gemm_plan::explain_at(&s, g, dtype, dtype, cfg, ptrs);

    match plan {
        Ok(Some(p)) => format!("{} ({})", p.path(), p.reason),
        Ok(None) => "cpu".into(),
        Err(e) => format!("no plan: {e}"),
    }
}

/// Runs the suite's `shapes` in `maths` (bf16, f16, tf32).
pub fn run_suite(
    backend: &Backend,
    shapes: &[(usize, usize, usize)],
    maths: &[GemmMath],
    repeat: Repeat,
    mut progress: impl FnMut(&SuiteRow),
) -> Result<SuiteReport> {
    let (copy_bps, copy) = copy_ceiling(backend, repeat)?;
    let (device, driver, l2) = match backend {
        Backend::Cuda(g) => {
            let d = g.info();
            (
                d.name.clone(),
                format!("CUDA {}.{}", d.driver_version / 1000, d.driver_version % 1000 / 10),
                d.l2_bytes as usize,
            )
        }
        Backend::Cpu(_) => ("cpu".into(), String::new(), 0),
    };
    let mut rows = Vec::new();
    for &math in maths {
        for &(m, n, k) in shapes {
            let row = match math {
                GemmMath::Bf16 => row::<bf16>(backend, math, (m, n, k), repeat, copy_bps, l2)?,
                GemmMath::F16 => row::<f16>(backend, math, (m, n, k), repeat, copy_bps, l2)?,
                GemmMath::F32 | GemmMath::Tf32 => row::<f32>(backend, math, (m, n, k), repeat, copy_bps, l2)?,
            };
            progress(&row);
            rows.push(row);
        }
    }
    Ok(SuiteReport {
        suite: "irregular".into(),
        device,
        driver,
        date: String::new(),
        commit: String::new(),
        copy_bytes_per_s: copy_bps,
        copy,
        rows,
    })
}

fn row<T: Scalar>(
    backend: &Backend,
    math: GemmMath,
    (m, n, k): (usize, usize, usize),
    repeat: Repeat,
    copy_bps: f64,
    l2: usize,
) -> Result<SuiteRow> {
    let s = backend.stream();
    let precision = if math == GemmMath::F32 { Precision::Strict } else { Precision::AllowTf32 };
    let g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).precision(precision);
    let es = T::DTYPE.size_bytes();
    let per_copy = (m * k + k * n + m * n) * es;
    // Working set above twice the L2 (at most 8 copies).
    let copies = (2 * l2.max(MIB)).div_ceil(per_copy.max(1)).clamp(1, 8);
    let mut rng = Rng::new((m * 31 + n * 7 + k) as u64);
    let ha: Vec<T> = rng.vec(m * k, -1.0, 1.0);
    let hb: Vec<T> = rng.vec(k * n, -1.0, 1.0);
    let nan = vec![T::from_f32(f32::NAN); m * n];
    let mut ops_ = Vec::with_capacity(copies);
    for _ in 0..copies {
        ops_.push((Buffer::from_slice(&s, &ha)?, Buffer::from_slice(&s, &hb)?, Buffer::from_slice(&s, &nan)?));
    }
    let ptrs = [0u64, 0u64]; // cudaMalloc'd buffers: 256-byte aligned, as 0 is
    let fam = family(backend, &g, T::DTYPE, ptrs);
    let run = |i: usize, o: &mut [(Buffer<T>, Buffer<T>, Buffer<T>)]| {
        let (a, b, d) = &mut o[i % copies];
        gemm::<T, T>(&s, &g, &a.all(), &b.all(), None, None, &mut d.all_mut())
    };
    run(0, &mut ops_)?;
    let d = ops_[0].2.to_vec(&s)?;
    let mismatch = ferrotune_testkit::gemm_check_samples(&g, &ha, &hb, &d, None, 256, 99).err();
    let ours = time_on_stream(&s, repeat, |i| run(i, &mut ops_))?;
    let queued = ours.median_ms < 0.2;
    let ours_queued_ms = if queued { Some(time_queued(&s, repeat, |k| run(k, &mut ops_))?) } else { None };
    let ours_host_us = if queued { Some(host_us(&s, |i| run(i, &mut ops_))?) } else { None };
    let (ours_graph_ms, mismatch) =
        if queued { graphed(backend, repeat, &g, &mut ops_, (&ha, &hb), mismatch)? } else { (None, mismatch) };
    drop(ops_);
    let secs = ours.median_ms * 1e-3;
    let flops = g.flops();
    let weight_bps = (k * n * es) as f64 / secs;
    let small = streams_weight(&fam);
    let shape = GemmShape { m, n, k };
    let mut peers = Vec::new();
    let mut note = None;
    for _ in 0..copies {
        match CublasGemm::new(&s, math, shape) {
            Ok(p) => peers.push(p),
            Err(e) => {
                note = Some(format!("cuBLAS unavailable: {e}"));
                break;
            }
        }
    }
    let mut cublas = None;
    let mut cublas_queued_ms = None;
    let mut cublas_host_us = None;
    if peers.len() == copies {
        match peers[0].verify(64) {
            Err(e) => note = Some(format!("cuBLAS failed its check: {e}")),
            Ok(_) => {
                let st = time_on_stream(&s, repeat, |i| {
                    peers[i % copies]
                        .launch()
                        .map_err(|e| ferrotune::Error::InvalidConfig { op: "cublas", why: e.to_string() })
                })?;
                cublas = Some(st);
                if queued {
                    cublas_queued_ms = Some(time_queued(&s, repeat, |k| {
                        peers[k % copies]
                            .launch()
                            .map_err(|e| ferrotune::Error::InvalidConfig { op: "cublas", why: e.to_string() })
                    })?);
                    cublas_host_us = Some(host_us(&s, |i| {
                        peers[i % copies]
                            .launch()
                            .map_err(|e| ferrotune::Error::InvalidConfig { op: "cublas", why: e.to_string() })
                    })?);
                }
            }
        }
    }
    drop(peers);
    let mut cublas_graph_ms = None;
    if queued && cublas.is_some() {
        match crate::graph_time::cublas_replays(backend, repeat, math, shape, copies) {
            Ok(st) => cublas_graph_ms = st.map(|st| st.median_ms),
            Err(e) => note = Some(format!("cuBLAS in a graph not run: {e}")),
        }
    }
    let tf = |st: &Stats| flops / (st.median_ms * 1e-3) / 1e12;
    let ours_tflops = flops / secs / 1e12;
    let cublas_tflops = cublas.as_ref().map(tf);
    Ok(SuiteRow {
        dtype: math.name().into(),
        m,
        n,
        k,
        family: fam,
        ours,
        ours_tflops,
        weight_bytes_per_s: weight_bps,
        copy_fraction: small.then_some(weight_bps / copy_bps),
        ours_queued_ms,
        cublas_queued_ms,
        copy_fraction_queued: ours_queued_ms.filter(|_| small).map(|ms| (k * n * es) as f64 / (ms * 1e-3) / copy_bps),
        ours_host_us,
        cublas_host_us,
        ours_graph_ms,
        cublas_graph_ms,
        cublas,
        cublas_tflops,
        ratio: cublas_tflops.map(|p| ours_tflops / p),
        copies,
        correct: mismatch.is_none(),
        mismatch,
        peer_note: note,
    })
}

/// Whether a row's path streams the weight (the small-M family, directly or after a pack):
/// those rows get a fraction of copy bandwidth. The path names are `GemmPlan::path`'s.
pub fn streams_weight(family: &str) -> bool {
    family.starts_with("small-m") || family.starts_with("pack") && family.contains("then small-m")
}

/// Parses `irregular` (the only suite) into its shapes.
pub fn suite_shapes(name: &str) -> Option<Vec<(usize, usize, usize)>> {
    (name == "irregular").then(|| IRREGULAR.to_vec())
}

/// Our call on every operand copy graphed and replayed in turn ([`crate::graph_time`]): the
/// median per replay; then copy 0's D is poisoned with NaN, its graph replayed once more and
/// D sampled against the reference (the eager call's mismatch, if any, wins).
fn graphed<T: Scalar>(
    backend: &Backend,
    repeat: Repeat,
    g: &Gemm,
    ops_: &mut [(Buffer<T>, Buffer<T>, Buffer<T>)],
    (ha, hb): (&[T], &[T]),
    mismatch: Option<String>,
) -> Result<(Option<f64>, Option<String>)> {
    let replays = crate::graph_time::replay_stats(backend, repeat, ops_.len(), |i, c| {
        let (a, b, d) = &mut ops_[i];
        gemm::<T, T>(c, g, &a.all(), &b.all(), None, None, &mut d.all_mut())
    })?;
    let Some(r) = replays else { return Ok((None, mismatch)) };
    let s = backend.stream();
    let d = &mut ops_[0].2;
    d.copy_from(&s, &vec![T::from_f32(f32::NAN); d.len()])?;
    s.synchronize()?;
    r.replay_once()?;
    let out = d.to_vec(&s)?;
    let after = ferrotune_testkit::gemm_check_samples(g, ha, hb, &out, None, 256, 98)
        .err()
        .map(|m| format!("graph replay: {m}"));
    Ok((Some(r.stats.median_ms), mismatch.or(after)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irregular_suite_covers_the_shape_classes() {
        let s = suite_shapes("irregular").unwrap();
        assert!(s.len() >= 20);
        for m in [1, 8, 33] {
            assert!(s.iter().any(|&(x, _, _)| x == m), "M = {m}");
        }
        for k in [64, 777, 4099] {
            assert!(s.iter().any(|&(_, _, x)| x == k), "K = {k}");
        }
        assert!(s.iter().any(|&(m, n, k)| k >= 16 * m.max(n)), "long K");
        assert!(s.iter().any(|&(m, n, k)| m % 2 == 1 && n % 2 == 1 && k % 2 == 1 && m > 64), "odd M, N, K");
        assert!(suite_shapes("nope").is_none());
    }

    #[test]
    fn copy_fraction_rows_are_the_small_m_paths() {
        assert!(streams_weight("small-m (M <= 64: …; ft_gemv_bf16_bf16_g1_v, 256 slabs x 1 K slices)"));
        assert!(streams_weight("pack (rows not aligned; then small-m (M <= 64 …))"));
        assert!(!streams_weight("pack (rows not aligned; then sm90:ft_gemm90_bf16_rc_bf16_128x256x64s4 (…))"));
        assert!(!streams_weight("sm90:ft_gemm90_bf16_rc_bf16_128x128x64s6"));
    }
}
