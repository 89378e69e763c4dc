//! ferrotune's benchmark library: ceilings first (copy bandwidth, peer GEMM rates), then every
//! op row checked against the f64 reference and timed, placed under the roofline built from
//! those ceilings; JSON and markdown results, the regression gate and the roofline plot.
//! `cargo xtask bench` and `cargo xtask roofline` are thin wrappers around it.

pub mod ceilings;
pub mod clifford;
pub mod clifford_gemm_peer;
pub mod clifford_space;
pub mod compare;
pub mod cpu_roof;
pub mod data_parallel;
pub mod elementwise;
pub mod error;
pub mod gemm;
pub mod gemm_cpu;
pub mod gemm_rows;
pub mod gemm_suite;
pub mod gemm_tiles;
pub mod graph_time;
pub mod multigpu;
pub mod preflight;
pub mod repeat;
pub mod report;
pub mod roofline;
pub mod runtime;

use ferrotune::peer::GemmMath;
use ferrotune::profiler::Profiler;
use ferrotune::{Backend, DType, ElemOp, bf16, f16};
use ferrotune_autotune::measure::Repeat;

pub use ceilings::CeilingOptions;
pub use compare::{CompareConfig, Comparison, Verdict, compare};
pub use error::{BenchError, Result};
pub use report::{Report, Row, RowKey, SCHEMA};
pub use roofline::Roofs;

use elementwise::RowSpec;
use report::{DeviceJson, MemoryJson, RunConfig};

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub ops: Vec<ElemOp>,
    pub dtypes: Vec<DType>,
    /// Bytes of each full-size tensor (inputs and output alike); one set of rows per entry.
    pub sizes: Vec<usize>,
    pub repeat: Repeat,
    /// Also time every GPU config of the tuning space and report the best.
    pub sweep: bool,
    /// Recorded in the report: the run used the quick set.
    pub quick: bool,
    pub ceilings: CeilingOptions,
    /// `(m, n, k)` of the GEMM rows (A row-major, B column-major); one row per shape and
    /// entry of `gemm_dtypes`. Empty: no GEMM rows.
    pub gemm_shapes: Vec<(usize, usize, usize)>,
    /// Input (and output) dtypes of the GEMM rows.
    pub gemm_dtypes: Vec<DType>,
}

const MIB: usize = 1 << 20;

impl Options {
    /// The full run: every op and dtype; 256 MiB tensors and 8192³ GEMM ceilings on CUDA, 64
    /// MiB and 1024³ on the CPU. GEMM rows: 4096³ and 8192x3072x768 in f32 and bf16 on CUDA,
    /// 1024³ and 512x3072x768 in f32, f16 and bf16 on the CPU.
    pub fn full(backend: &Backend) -> Options {
        let cuda = matches!(backend, Backend::Cuda(_));
        let size = if cuda { 256 * MIB } else { 64 * MIB };
        let repeat = Repeat { warmup: 5, iters: 50 };
        Options {
            ops: ElemOp::ALL.to_vec(),
            dtypes: DType::ALL.to_vec(),
            sizes: vec![size],
            repeat,
            sweep: false,
            quick: false,
            ceilings: CeilingOptions {
                gemm_size: if cuda { 8192 } else { 1024 },
                gemm_maths: GemmMath::ALL.to_vec(),
                gemm_repeat: Repeat { warmup: 3, iters: 20 },
                copy_bytes: size,
                copy_repeat: repeat,
            },
            gemm_shapes: if cuda {
                vec![(4096, 4096, 4096), (8192, 3072, 768)]
            } else {
                vec![(1024, 1024, 1024), (512, 3072, 768)]
            },
            gemm_dtypes: if cuda { vec![DType::F32, DType::Bf16] } else { DType::ALL.to_vec() },
        }
    }

    /// Seconds, not minutes: copy, add, gelu_erf, add_mul_gelu_erf in f32 on 32 MiB tensors;
    /// 4096³ GEMM ceilings on CUDA, 512³ on the CPU; no GEMM rows.
    pub fn quick(backend: &Backend) -> Options {
        let cuda = matches!(backend, Backend::Cuda(_));
        let repeat = Repeat { warmup: 2, iters: 10 };
        Options {
            ops: ["copy", "add", "gelu_erf", "add_mul_gelu_erf"].iter().filter_map(|s| ElemOp::from_name(s)).collect(),
            dtypes: vec![DType::F32],
            sizes: vec![32 * MIB],
            repeat,
            sweep: false,
            quick: true,
            ceilings: CeilingOptions {
                gemm_size: if cuda { 4096 } else { 512 },
                gemm_maths: GemmMath::ALL.to_vec(),
                gemm_repeat: Repeat { warmup: 2, iters: 10 },
                copy_bytes: 32 * MIB,
                copy_repeat: repeat,
            },
            gemm_shapes: Vec::new(),
            gemm_dtypes: Vec::new(),
        }
    }

    /// Options that cannot produce a row are an error before anything runs.
    pub fn validate(&self) -> Result<()> {
        let bad = |why: String| Err(BenchError::Options(why));
        if self.ops.is_empty() || self.dtypes.is_empty() || self.sizes.is_empty() {
            return bad("no ops, dtypes or sizes to run".into());
        }
        if self.repeat.iters == 0 || self.ceilings.gemm_repeat.iters == 0 || self.ceilings.copy_repeat.iters == 0 {
            return bad("iters must be at least 1".into());
        }
        let smallest = elementwise::BIAS_COLS * 4;
        if let Some(s) = self.sizes.iter().find(|&&s| s < smallest) {
            return bad(format!(
                "size {s} bytes is below one {}-column row of f32 ({smallest} bytes)",
                elementwise::BIAS_COLS
            ));
        }
        if self.ceilings.copy_bytes < 4 || self.ceilings.gemm_size == 0 {
            return bad("the ceilings need a copy of at least one f32 and a GEMM edge of at least 1".into());
        }
        if self.gemm_shapes.iter().any(|&(m, n, k)| m == 0 || n == 0 || k == 0) {
            return bad("GEMM shapes need every dimension at least 1".into());
        }
        Ok(())
    }
}

/// Runs the benchmark on `backend`: ceilings, then every (size, dtype, op) row. Allocations
/// and timed regions go through `prof` (write its trace with `Profiler::chrome_trace`).
/// `progress` gets one line per ceiling and per row. `date` and `commit` are left for the
/// caller to fill.
pub fn run(backend: &Backend, opts: &Options, prof: &mut Profiler, mut progress: impl FnMut(&str)) -> Result<Report> {
    opts.validate()?;
    let s = backend.stream();
    preflight::check_run(&s, opts)?;
    let mut notes = Vec::new();
    let ceilings = ceilings::measure(backend, &s, &opts.ceilings, prof, &mut notes)?;
    for c in &ceilings {
        let rate = match c.kind {
            report::CeilingKind::Bandwidth => format!("{:>10.1} GB/s", c.bytes_per_s / 1e9),
            report::CeilingKind::Compute => format!("{:>15}", report::format_flops(c.flops_per_s)),
        };
        progress(&format!("ceiling {:<34} {:>9.3} ms {rate}", c.name, c.stats.median_ms));
    }
    let roofs = Roofs::from_ceilings(&ceilings);
    let mut rows = Vec::new();
    for &bytes_per_tensor in &opts.sizes {
        for &dt in &opts.dtypes {
            for &op in &opts.ops {
                let spec = RowSpec { op, bytes_per_tensor, repeat: opts.repeat, sweep: opts.sweep };
                let row = match dt {
                    DType::F32 => elementwise::bench_row::<f32>(backend, &s, spec, &roofs, prof)?,
                    DType::F16 => elementwise::bench_row::<f16>(backend, &s, spec, &roofs, prof)?,
                    DType::Bf16 => elementwise::bench_row::<bf16>(backend, &s, spec, &roofs, prof)?,
                };
                progress(&format!(
                    "{:<18} {:<5} {:>9.3} ms {:>8.1} GB/s {:>9.2} GFLOP/s {:>5.1}% of {} roof {}",
                    row.op,
                    row.dtype,
                    row.stats.median_ms,
                    row.bytes_per_s / 1e9,
                    row.flops_per_s / 1e9,
                    100.0 * row.roof_fraction,
                    row.roof.name(),
                    if row.correct { "ok" } else { "MISMATCH" }
                ));
                rows.push(row);
            }
        }
    }
    for &dt in &opts.gemm_dtypes {
        for &shape in &opts.gemm_shapes {
            let row = match dt {
                DType::F32 => gemm_rows::bench_row::<f32>(backend, &s, shape, opts.repeat, &roofs, prof)?,
                DType::F16 => gemm_rows::bench_row::<f16>(backend, &s, shape, opts.repeat, &roofs, prof)?,
                DType::Bf16 => gemm_rows::bench_row::<bf16>(backend, &s, shape, opts.repeat, &roofs, prof)?,
            };
            progress(&format!(
                "{:<18} {:<5} {:>9.3} ms {:>15} {:>5.1}% of {} {} roof {}",
                format!("gemm {}", row.shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")),
                row.dtype,
                row.stats.median_ms,
                report::format_flops(row.flops_per_s),
                100.0 * row.roof_fraction,
                row.math,
                row.roof.name(),
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
                registers_per_sm: d.registers_per_sm,
                max_threads_per_sm: d.max_threads_per_sm,
                shared_mem_per_sm: d.shared_mem_per_sm,
                theoretical_bandwidth_bytes_per_s: d.theoretical_bandwidth(),
                driver: format!("CUDA {}.{}", d.driver_version / 1000, d.driver_version % 1000 / 10),
                ptx_arch: g.ptx_arch()?.to_string(),
            })
        }
        Backend::Cpu(_) => None,
    };
    let cpu_threads = match backend {
        Backend::Cpu(c) => c.threads(),
        Backend::Cuda(_) => rayon::current_num_threads(),
    };
    Ok(Report {
        schema: SCHEMA.into(),
        backend: backend.name().into(),
        device,
        host_cpu: host_cpu(),
        cpu_threads,
        date: String::new(),
        commit: String::new(),
        run: RunConfig {
            quick: opts.quick,
            ops: opts.ops.iter().map(|o| o.name().to_string()).collect(),
            dtypes: opts.dtypes.iter().map(|d| d.name().to_string()).collect(),
            sizes_bytes: opts.sizes.clone(),
            warmup: opts.repeat.warmup,
            iters: opts.repeat.iters,
            sweep: opts.sweep,
            gemm_size: opts.ceilings.gemm_size,
            gemm_shapes: opts.gemm_shapes.iter().map(|&(m, n, k)| [m, n, k]).collect(),
            gemm_dtypes: opts.gemm_dtypes.iter().map(|d| d.name().to_string()).collect(),
        },
        ceilings,
        roofs,
        rows,
        memory: MemoryJson { peak_bytes: prof.memory().peak_bytes(), allocations: prof.memory().allocations() },
        notes,
        planted_slowdown: None,
    })
}

/// The CPU's model name from /proc/cpuinfo, or the architecture where that is unreadable.
pub fn host_cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}
