//! The elementwise benchmark: for each op and dtype, the median time, the bytes the op must
//! move, GB/s, and the ratio to the copy ceiling measured in the same run (the best of our
//! copy kernel and the driver's device-to-device copy on CUDA; a parallel memcpy on the
//! CPU). Every timed output is checked against the f64 reference first.

use ferrotune::config::ElemConfig;
use ferrotune::ops;
use ferrotune::{Backend, Buffer, DType, ElemOp, Result, Scalar, Stream, View, bf16, f16};
use ferrotune_autotune::measure::{Repeat, Stats, time_on_stream};
use ferrotune_testkit::{Rng, check_against_reference};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Version of the JSON layout below; bump it when a field changes meaning.
pub const SCHEMA: &str = "ferrotune-bench/1";

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    pub ops: Vec<ElemOp>,
    pub dtypes: Vec<DType>,
    /// Bytes of each full-size tensor (inputs and output alike).
    pub bytes_per_tensor: usize,
    pub repeat: Repeat,
    /// Also time every GPU config of the tuning space and report the best.
    pub sweep: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub backend: String,
    pub device: Option<DeviceJson>,
    pub cpu_threads: usize,
    pub date: String,
    pub commit: String,
    pub bytes_per_tensor: usize,
    pub warmup: usize,
    pub iters: usize,
    pub ceilings: Vec<Ceiling>,
    /// The copy ceiling the ratios use (GB/s): the best of `ceilings`.
    pub copy_gbps: f64,
    pub rows: Vec<Row>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeviceJson {
    pub name: String,
    pub compute_capability: String,
    pub sm_count: u32,
    pub l2_bytes: u32,
    pub driver: String,
    pub ptx_arch: String,
}

/// A bandwidth ceiling measured in the run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ceiling {
    pub name: String,
    pub bytes: usize,
    pub stats: Stats,
    pub gbps: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConfigJson {
    pub threads: u32,
    pub vec16: bool,
    pub unroll: u32,
    pub blocks_per_sm: u32,
    pub cpu_chunk: usize,
}

impl From<&ElemConfig> for ConfigJson {
    fn from(c: &ElemConfig) -> Self {
        ConfigJson {
            threads: c.threads,
            vec16: c.variant.vec16,
            unroll: c.variant.unroll,
            blocks_per_sm: c.blocks_per_sm,
            cpu_chunk: c.cpu_chunk,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub op: String,
    pub dtype: String,
    pub elements: usize,
    /// Bias length for bias_add; 0 otherwise.
    pub cols: usize,
    /// Fewest bytes the op must move (inputs read once, output written once).
    pub bytes: usize,
    pub config: ConfigJson,
    pub stats: Stats,
    pub gbps: f64,
    pub ratio_to_copy: f64,
    /// The output matched the f64 reference within the dtype's tolerance.
    pub correct: bool,
    /// First mismatch, when not correct.
    pub mismatch: Option<String>,
    /// With `sweep`: the fastest config of the tuning space and its time.
    pub best_config: Option<ConfigJson>,
    pub best_gbps: Option<f64>,
    pub configs_swept: usize,
}

fn gbps(bytes: usize, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e-3) / 1e9
}

/// Runs the benchmark on `backend`. `progress` gets one line per finished row.
pub fn run(backend: &Backend, opts: &Options, mut progress: impl FnMut(&str)) -> Result<Report> {
    let s = backend.stream();
    let ceilings = measure_ceilings(backend, &s, opts)?;
    let copy_gbps = ceilings.iter().map(|c| c.gbps).fold(0.0, f64::max);
    for c in &ceilings {
        progress(&format!("ceiling {:<24} {:>9.3} ms {:>8.1} GB/s", c.name, c.stats.median_ms, c.gbps));
    }
    let mut rows = Vec::new();
    for &dt in &opts.dtypes {
        for &op in &opts.ops {
            let row = match dt {
                DType::F32 => bench_op::<f32>(backend, &s, op, opts, copy_gbps)?,
                DType::F16 => bench_op::<f16>(backend, &s, op, opts, copy_gbps)?,
                DType::Bf16 => bench_op::<bf16>(backend, &s, op, opts, copy_gbps)?,
            };
            progress(&format!(
                "{:<18} {:<5} {:>9.3} ms {:>8.1} GB/s {:>6.3}x copy {}",
                row.op,
                row.dtype,
                row.stats.median_ms,
                row.gbps,
                row.ratio_to_copy,
                if row.correct { "ok" } else { "MISMATCH" }
            ));
            rows.push(row);
        }
    }
    let device = match backend {
        Backend::Cuda(g) => {
            let d = g.info();
            Some(DeviceJson {
                name: d.name.clone(),
                compute_capability: format!("{}.{}", d.compute_capability.0, d.compute_capability.1),
                sm_count: d.sm_count,
                l2_bytes: d.l2_bytes,
                driver: format!("CUDA {}.{}", d.driver_version / 1000, d.driver_version % 1000 / 10),
                ptx_arch: g.ptx_arch()?.to_string(),
            })
        }
        Backend::Cpu(_) => None,
    };
    Ok(Report {
        schema: SCHEMA.into(),
        backend: backend.name().into(),
        device,
        cpu_threads: rayon::current_num_threads(),
        date: String::new(),
        commit: String::new(),
        bytes_per_tensor: opts.bytes_per_tensor,
        warmup: opts.repeat.warmup,
        iters: opts.repeat.iters,
        ceilings,
        copy_gbps,
        rows,
    })
}

/// The copy ceilings: our copy kernel (f32, heuristic config) and, on CUDA, the driver's
/// device-to-device copy; on the CPU a parallel memcpy in the backend's pool.
fn measure_ceilings(backend: &Backend, s: &Stream, opts: &Options) -> Result<Vec<Ceiling>> {
    let n = opts.bytes_per_tensor / 4;
    let mut rng = Rng::new(1);
    let src = Buffer::from_slice(s, &rng.vec::<f32>(n, -1.0, 1.0))?;
    let mut dst = Buffer::<f32>::zeros(s, n)?;
    let bytes = 2 * n * 4;
    let mut out = Vec::new();
    let cfg = ElemConfig::heuristic(ElemOp::Copy, DType::F32, backend.device());
    let st = time_on_stream(s, opts.repeat, |_| {
        ops::run_elementwise(s, ElemOp::Copy, &cfg, &[&src.all()], &mut dst.all_mut(), 0.0)
    })?;
    out.push(Ceiling { name: "copy kernel (f32)".into(), bytes, gbps: gbps(bytes, st.median_ms), stats: st });
    match (backend, &src, &mut dst) {
        (Backend::Cuda(_), Buffer::Cuda(a), Buffer::Cuda(b)) => {
            let cs = s.cuda_stream().expect("a CUDA backend gives CUDA streams");
            let st = time_on_stream(s, opts.repeat, |_| {
                cs.memcpy_dtod(a, b).map_err(|e| ferrotune::Error::Driver { context: "cuMemcpyDtoD".into(), source: e })
            })?;
            out.push(Ceiling { name: "driver memcpy DtoD".into(), bytes, gbps: gbps(bytes, st.median_ms), stats: st });
        }
        (Backend::Cpu(cpu), Buffer::Cpu(a), Buffer::Cpu(b)) => {
            let st = time_on_stream(s, opts.repeat, |_| {
                cpu.install(|| {
                    b.par_chunks_mut(1 << 16).zip(a.par_chunks(1 << 16)).for_each(|(d, s)| d.copy_from_slice(s))
                });
                Ok(())
            })?;
            out.push(Ceiling { name: "parallel memcpy".into(), bytes, gbps: gbps(bytes, st.median_ms), stats: st });
        }
        _ => {}
    }
    Ok(out)
}

/// `check_against_reference` over chunks in parallel (chunks are whole bias rows).
fn check_parallel<T: Scalar>(op: ElemOp, alpha: f32, inputs: &[&[T]], got: &[T], cols: usize) -> Option<String> {
    let chunk = cols * (1usize << 16).div_ceil(cols);
    let n = got.len();
    (0..n.div_ceil(chunk)).into_par_iter().find_map_first(|c| {
        let r = c * chunk..((c + 1) * chunk).min(n);
        let part: Vec<&[T]> = inputs.iter().map(|x| if x.len() == n { &x[r.clone()] } else { *x }).collect();
        check_against_reference(op, alpha, &part, &got[r.clone()]).err().map(|e| format!("chunk at {}: {e}", r.start))
    })
}

/// Bias rows for the bench: 4096 columns (a typical hidden size).
const BIAS_COLS: usize = 4096;

fn bench_op<T: Scalar>(backend: &Backend, s: &Stream, op: ElemOp, opts: &Options, copy_gbps: f64) -> Result<Row> {
    let elem = T::DTYPE.size_bytes();
    let n = (opts.bytes_per_tensor / elem) / BIAS_COLS * BIAS_COLS;
    let cols = if op == ElemOp::BiasAdd { BIAS_COLS } else { 0 };
    let mut rng = Rng::new(42);
    let alpha = 0.5f32;
    // Separate inputs (besides the output) and the output's initial contents.
    let n_in = match op {
        ElemOp::Add => 2,
        ElemOp::Chain(_) => 3,
        _ => 1,
    };
    let host_in: Vec<Vec<T>> = (0..n_in)
        .map(|i| if op == ElemOp::BiasAdd && i == 0 { rng.vec(cols, -2.0, 2.0) } else { rng.vec(n, -4.0, 4.0) })
        .collect();
    let out_init: Vec<T> = rng.vec(n, -4.0, 4.0);
    let ins = host_in.iter().map(|h| Buffer::from_slice(s, h)).collect::<Result<Vec<_>>>()?;
    let mut out = Buffer::from_slice(s, &out_init)?;
    let views: Vec<View<'_, T>> = ins.iter().map(|b| b.all()).collect();
    let refs: Vec<&View<'_, T>> = views.iter().collect();
    let cfg = ElemConfig::heuristic(op, T::DTYPE, backend.device());

    // Correctness first: one run on fresh data, checked against the f64 reference.
    ops::run_elementwise(s, op, &cfg, &refs, &mut out.all_mut(), alpha)?;
    let got = out.to_vec(s)?;
    let ref_inputs: Vec<&[T]> = match op {
        ElemOp::Axpy => vec![&host_in[0], &out_init],
        ElemOp::BiasAdd => vec![&out_init, &host_in[0]],
        _ => host_in.iter().map(|v| v.as_slice()).collect(),
    };
    let mismatch = check_parallel(op, alpha, &ref_inputs, &got, cols.max(1));

    let bytes = op.min_bytes(n, elem, cols);
    let time = |cfg: &ElemConfig, repeat: Repeat, out: &mut Buffer<T>| {
        time_on_stream(s, repeat, |_| ops::run_elementwise(s, op, cfg, &refs, &mut out.all_mut(), alpha))
    };
    let stats = time(&cfg, opts.repeat, &mut out)?;
    let (mut best_config, mut best_gbps, mut swept) = (None, None, 0);
    if opts.sweep && matches!(backend, Backend::Cuda(_)) {
        let short = Repeat { warmup: 2, iters: opts.repeat.iters.min(10) };
        let mut best = (f64::INFINITY, cfg);
        for c in ElemConfig::gpu_space() {
            // Blocks larger than the variant's registers allow are pruned, not launched.
            if ops::elementwise::max_threads(s, op, T::DTYPE, c.variant)?.is_some_and(|m| c.threads > m) {
                continue;
            }
            let st = time(&c, short, &mut out)?;
            swept += 1;
            if st.median_ms < best.0 {
                best = (st.median_ms, c);
            }
        }
        best_config = Some(ConfigJson::from(&best.1));
        best_gbps = Some(gbps(bytes, best.0));
    }
    let g = gbps(bytes, stats.median_ms);
    Ok(Row {
        op: op.name().into(),
        dtype: T::DTYPE.name().into(),
        elements: n,
        cols,
        bytes,
        config: ConfigJson::from(&cfg),
        stats,
        gbps: g,
        ratio_to_copy: g / copy_gbps,
        correct: mismatch.is_none(),
        mismatch,
        best_config,
        best_gbps,
        configs_swept: swept,
    })
}
