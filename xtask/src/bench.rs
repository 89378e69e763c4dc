//! `cargo xtask bench`: runs the benchmark on the chosen backend (CUDA when a device is
//! present, else the CPU, and it says which), prints the table, writes JSON, markdown and a
//! Chrome trace, and gates against a baseline. The work is in `ferrotune-bench`.

use std::path::{Path, PathBuf};

use anyhow::Context;

use ferrotune::profiler::Profiler;
use ferrotune::{Backend, BackendChoice, DType, ElemOp};
use ferrotune_autotune::measure::Repeat;
use ferrotune_bench::{CompareConfig, Options, Report};

#[derive(clap::Args)]
pub struct Args {
    /// Ops to run, comma-separated, or `all`; `clifford` runs the Clifford layer bench
    /// (`--shapes BxN,...`, `--dtypes`, `--clifford-rows fwd,fwdbwd,fcgp_fwd`, `--json`);
    /// `runtime` runs the runtime bench (pool, graphs, pinned copies, overlap, priority);
    /// `cpu-roof` times every elementwise op on the CPU beside a parallel copy, pair by pair
    /// (`--dtypes`, `--sizes` MiB (first), `--iters` pairs, `--json`; elementwise names beside
    /// it, as in `cpu-roof,gelu_erf`, time only those);
    /// `gemm` runs the GEMM comparison with cuBLAS
    /// (GPU only) over `--shapes` and `--dtypes` (f32, tf32, f16, bf16); `multi-gpu` runs peer
    /// copies, NCCL all-reduce (vs torch.distributed) and the data-parallel step (`--shapes
    /// BxNxK`, `--sizes` in MiB; needs 2 GPUs); `runtime` the host-runtime rows. Without it the
    /// full run also has GEMM rows (4096³ and 8192x3072x768, f32 and bf16, on CUDA; 1024³ and
    /// 512x3072x768 in f32, f16 and bf16 on the CPU; none with --quick); naming elementwise ops
    /// leaves them out. On the CPU (or without a GPU) `gemm` runs our GEMM beside
    /// `matrixmultiply` (f32, f16, bf16) instead.
    #[arg(long, value_delimiter = ',')]
    ops: Option<Vec<String>>,
    /// Which rows of `--ops clifford`: fwd, fwdbwd, fcgp_fwd (default all), or the sweeps
    /// fwd_sweep, fwdbwd_sweep (every forward / backward config timed, the fastest kept).
    #[arg(long, value_delimiter = ',')]
    clifford_rows: Option<Vec<String>>,
    /// GEMM shapes, as MxNxK, comma-separated: for `--ops gemm`, else the report's GEMM rows;
    /// for `--ops clifford`, BxN.
    #[arg(long, value_delimiter = ',')]
    shapes: Option<Vec<String>>,
    /// With `--ops gemm`: the shapes of the fused `linear_bias_gelu` rows (MxNxK; default
    /// 8192x3072x768,512x3072x768).
    #[arg(long, value_delimiter = ',')]
    gelu_shapes: Option<Vec<String>>,
    /// With `--ops gemm`: a named shape suite instead of `--shapes` (`irregular`: odd, small-M,
    /// tiny- and long-K shapes against cuBLAS, with a copy-bandwidth ceiling; bf16 and f16
    /// unless `--dtypes` says otherwise).
    #[arg(long)]
    shape_suite: Option<String>,
    /// Dtypes: f32, f16, bf16 (comma-separated) or `all`; GEMM rows keep those listed.
    #[arg(long, value_delimiter = ',')]
    dtypes: Option<Vec<String>>,
    /// A small set in seconds: copy, add, gelu_erf, add_mul_gelu_erf in f32 on 32 MiB tensors,
    /// 4096³ GEMM ceilings (512³ on the CPU). Other flags given still apply.
    #[arg(long)]
    quick: bool,
    /// auto | cuda | cpu.
    #[arg(long, default_value = "auto")]
    backend: BackendChoice,
    /// MiB per tensor, comma-separated (one set of rows per size; fractions allowed).
    /// Default 256 on CUDA, 64 on the CPU, 32 with --quick.
    #[arg(long, value_delimiter = ',', alias = "size-mib")]
    sizes: Option<Vec<f64>>,
    /// Untimed runs before each measurement (default 5; 2 with --quick).
    #[arg(long)]
    warmup: Option<usize>,
    /// Timed runs per row (default 50; 10 with --quick).
    #[arg(long)]
    iters: Option<usize>,
    /// Edge of the square GEMM of the compute ceilings (default 8192 on CUDA, 1024 on the CPU).
    #[arg(long)]
    gemm_size: Option<usize>,
    /// Also time every config of the GPU tuning space per op and report the best.
    #[arg(long)]
    sweep: bool,
    /// Write the results as JSON here (schema: docs/bench-json.md).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the results as a markdown page here.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Write a Chrome trace (chrome://tracing, Perfetto) of every timed region here.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Compare with this baseline JSON (rows matched on op, dtype, shape, backend).
    #[arg(long)]
    compare: Option<PathBuf>,
    /// Slowdown that warns (0.10 = 10%); when given it is also the failing threshold.
    #[arg(long)]
    threshold: Option<f64>,
    /// Exit non-zero when a row is slower than the baseline by more than 25% (or
    /// --threshold), or when the baseline is from another device.
    #[arg(long)]
    fail_on_regression: bool,
    /// Test of the gate: multiply every measured row time by FACTOR (marked in the JSON).
    #[arg(long, hide = true)]
    plant_slowdown: Option<f64>,
}

/// Opens the backend and says which one runs (and why the CPU, when it is the CPU).
pub fn open_backend(choice: BackendChoice) -> anyhow::Result<Backend> {
    let backend = Backend::new(choice)?;
    // Profiles that cannot serve this machine: warned about now (an error when strict), even
    // though the bench times explicit configs.
    ferrotune::tuned::check_usable(&backend.stream())?;
    match &backend {
        Backend::Cuda(g) => println!("backend: cuda ({}, {}, PTX {})", g.info().name, g.info().arch(), g.ptx_arch()?),
        Backend::Cpu(c) => {
            let why = ferrotune::device_count().err().map(|e| e.to_string()).unwrap_or_else(|| "CPU requested".into());
            println!("backend: cpu, {} threads ({why})", c.threads());
        }
    }
    Ok(backend)
}

/// Runs the bench with `opts`, prints progress and the table, fills in date and commit.
pub fn run_report(backend: &Backend, opts: &Options, trace: Option<&Path>) -> anyhow::Result<Report> {
    let s = backend.stream();
    let mut prof = Profiler::new(&s)?;
    let mut report = ferrotune_bench::run(backend, opts, &mut prof, |line| println!("{line}"))?;
    report.date = ferrotune_profile::utc_now();
    report.commit = commit();
    if let Some(path) = trace {
        ferrotune_bench::report::write_file(path, &prof.chrome_trace()?)?;
        println!("wrote {} (open in chrome://tracing or ui.perfetto.dev)", path.display());
    }
    Ok(report)
}

/// Every flag checked before anything is measured (see `validate`).
fn check(args: &Args) -> anyhow::Result<()> {
    use crate::validate as v;
    if let Some(ops) = &args.ops {
        v::ops(ops, &v::BENCH_FAMILIES)?;
    }
    let family = |f: &str| args.ops.as_ref().is_some_and(|o| o.iter().any(|s| s == f));
    if let Some(d) = &args.dtypes {
        // tf32 is a GEMM input of the CUDA comparison only.
        v::dtypes(d, if family("gemm") || family("gemm-tiles") { &["tf32", "fp32", "fp16"] } else { &[] })?;
    }
    for s in args.gelu_shapes.iter().flatten() {
        v::shape(s, &[3], "MxNxK")?;
    }
    for s in args.shapes.iter().flatten() {
        if family("clifford") {
            v::shape(s, &[2], "BxN")?;
        } else {
            v::shape(s, &[3, 4], "MxNxK or MxNxKxBATCH")?;
        }
    }
    v::sizes_mib(args.sizes.as_deref().unwrap_or_default())?;
    v::at_least_one("--iters", args.iters)?;
    v::at_least_one("--gemm-size", args.gemm_size)?;
    if let Some(t) = args.threshold {
        anyhow::ensure!(t.is_finite() && t > 0.0, "--threshold {t} must be a positive fraction (0.10 = 10%)");
    }
    for (flag, p) in [("--json", &args.json), ("--markdown", &args.markdown), ("--trace", &args.trace)] {
        if let Some(p) = p {
            v::writable(flag, p)?;
        }
    }
    if let Some(p) = &args.compare {
        anyhow::ensure!(p.is_file(), "--compare {}: no such file", p.display());
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    check(&args)?;
    if args.ops.as_ref().is_some_and(|o| o.iter().any(|s| s == "cpu-roof")) {
        return crate::bench_roof::run_cmd(crate::bench_roof::RoofArgs {
            ops: args.ops.clone().unwrap_or_default(),
            dtypes: args.dtypes.clone(),
            sizes: args.sizes.clone(),
            warmup: args.warmup,
            iters: args.iters,
            json: args.json.clone(),
        });
    }
    if args.ops.as_ref().is_some_and(|o| o.iter().any(|s| s == "runtime")) {
        return crate::bench_runtime::run_cmd(args.backend, args.iters, args.json.clone());
    }
    if args.ops.as_ref().is_some_and(|o| o.iter().any(|s| s == "clifford")) {
        return crate::bench_clifford::run_cmd(crate::bench_clifford::CliffordArgs {
            backend: args.backend,
            shapes: args.shapes.clone().unwrap_or_default(),
            dtypes: args.dtypes.clone().unwrap_or_default(),
            rows: args.clifford_rows.clone().unwrap_or_default(),
            warmup: args.warmup,
            iters: args.iters,
            json: args.json.clone(),
        });
    }
    if args.ops.as_ref().is_some_and(|o| o.iter().any(|s| s == "multi-gpu")) {
        let dp_shape = match args.shapes.as_ref().and_then(|s| s.first()) {
            None => None,
            Some(s) => {
                let v: Vec<usize> = s
                    .split('x')
                    .map(|p| p.trim().parse())
                    .collect::<Result<_, _>>()
                    .with_context(|| format!("data-parallel shape '{s}' is not BxNxK"))?;
                let [b, n, k] = v[..] else { anyhow::bail!("data-parallel shape '{s}' is not BxNxK") };
                anyhow::ensure!(b > 0 && n > 0 && k > 0, "data-parallel shape '{s}' must be positive");
                Some([b, n, k])
            }
        };
        return crate::bench_multigpu::run(crate::bench_multigpu::MultiGpuArgs {
            sizes: args
                .sizes
                .as_ref()
                .map(|v| v.iter().map(|mib| ((mib * (1u64 << 20) as f64) as usize / 4 * 4).max(4)).collect()),
            warmup: args.warmup,
            iters: args.iters,
            json: args.json.clone(),
            dp_shape,
        });
    }
    if let Some(suite) = &args.shape_suite {
        return crate::bench_gemm_suite::run(crate::bench_gemm_suite::SuiteArgs {
            suite: suite.clone(),
            shapes: args.shapes.clone(),
            dtypes: args.dtypes.clone().unwrap_or_else(|| ["bf16", "f16"].map(String::from).to_vec()),
            warmup: args.warmup.unwrap_or(3),
            iters: args.iters.unwrap_or(20),
            json: args.json.clone(),
        });
    }
    let gemm_tiles = args.ops.as_ref().is_some_and(|o| o.iter().any(|s| s == "gemm-tiles"));
    let gemm_ops = args.ops.as_ref().is_some_and(|o| o.iter().any(|s| s == "gemm"));
    // Without a GPU, `--ops gemm` runs the CPU rows (ours beside matrixmultiply).
    let on_cpu = args.backend == BackendChoice::Cpu
        || (args.backend == BackendChoice::Auto && ferrotune::device_count().map_or(true, |n| n == 0));
    if gemm_ops && on_cpu {
        return crate::bench_gemm::run_cpu(crate::bench_gemm::GemmArgs {
            shapes: args.shapes.clone().unwrap_or_default(),
            gelu_shapes: Vec::new(),
            dtypes: args.dtypes.clone().unwrap_or_else(|| ["f32", "f16", "bf16"].map(String::from).to_vec()),
            warmup: args.warmup.unwrap_or(2),
            iters: args.iters.unwrap_or(10),
            json: args.json.clone(),
        });
    }
    if gemm_tiles || gemm_ops {
        let run = if gemm_tiles { crate::bench_gemm::run_tiles } else { crate::bench_gemm::run };
        return run(crate::bench_gemm::GemmArgs {
            shapes: args
                .shapes
                .clone()
                .unwrap_or_else(|| crate::bench_gemm::DEFAULT_SHAPES.split(',').map(String::from).collect()),
            gelu_shapes: args
                .gelu_shapes
                .clone()
                .unwrap_or_else(|| crate::bench_gemm::DEFAULT_GELU_SHAPES.split(',').map(String::from).collect()),
            dtypes: args.dtypes.clone().unwrap_or_else(|| ["f32", "tf32", "f16", "bf16"].map(String::from).to_vec()),
            warmup: args.warmup.unwrap_or(3),
            iters: args.iters.unwrap_or(20),
            json: args.json.clone(),
        });
    }
    let backend = open_backend(args.backend)?;
    let mut opts = if args.quick { Options::quick(&backend) } else { Options::full(&backend) };
    if let Some(ops) = &args.ops {
        opts.ops = crate::parse_list(ops, &ElemOp::ALL, ElemOp::from_name, "op")?;
        opts.gemm_shapes.clear();
    }
    if let Some(dtypes) = &args.dtypes {
        opts.dtypes =
            crate::parse_list(dtypes, &DType::ALL, |s| DType::ALL.into_iter().find(|d| d.name() == s), "dtype")?;
        opts.gemm_dtypes.retain(|d| opts.dtypes.contains(d));
    }
    if let Some(shapes) = &args.shapes {
        opts.gemm_shapes = shapes
            .iter()
            .map(|s| crate::bench_gemm::parse_shape(s).map(|g| (g.m, g.n, g.k)))
            .collect::<anyhow::Result<_>>()?;
        if opts.gemm_dtypes.is_empty() {
            opts.gemm_dtypes = opts.dtypes.clone();
        }
    }
    if let Some(sizes) = &args.sizes {
        opts.sizes = sizes.iter().map(|mib| (mib * (1u64 << 20) as f64) as usize).collect();
        opts.ceilings.copy_bytes = opts.sizes.iter().copied().max().unwrap_or(opts.ceilings.copy_bytes);
    }
    opts.repeat =
        Repeat { warmup: args.warmup.unwrap_or(opts.repeat.warmup), iters: args.iters.unwrap_or(opts.repeat.iters) };
    opts.ceilings.copy_repeat = opts.repeat;
    if let Some(g) = args.gemm_size {
        opts.ceilings.gemm_size = g;
    }
    opts.sweep = args.sweep;
    // Checked before the run so a bad flag costs nothing.
    let gate = CompareConfig::from_flags(args.threshold, args.fail_on_regression)?;
    let baseline = args.compare.as_deref().map(Report::load).transpose()?;

    let mut report = run_report(&backend, &opts, args.trace.as_deref())?;
    if let Some(f) = args.plant_slowdown {
        report.plant_slowdown(f)?;
        println!("PLANTED SLOWDOWN: every row time multiplied by {f} (a test of the gate, not a result)");
    }
    println!("\n{}", report.render_table());
    if let Some(path) = &args.json {
        report.save(path)?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = &args.markdown {
        ferrotune_bench::report::write_file(path, &report.to_markdown())?;
        println!("wrote {}", path.display());
    }
    let wrong: Vec<_> = report.rows.iter().filter(|r| !r.correct).collect();
    for r in &wrong {
        eprintln!("MISMATCH {} {}: {}", r.op, r.dtype, r.mismatch.as_deref().unwrap_or(""));
    }
    if let (Some(base), Some(path)) = (&baseline, &args.compare) {
        println!("\ncomparing with {}", path.display());
        let cmp = ferrotune_bench::compare(base, &report, gate)?;
        print!("{}", cmp.render());
        if cmp.failed() && args.fail_on_regression {
            anyhow::bail!(
                "{} rows regressed by more than {:.0}%",
                cmp.regressions().count(),
                100.0 * gate.fail_threshold
            );
        }
    }
    if !wrong.is_empty() {
        anyhow::bail!("{} rows did not match the reference", wrong.len());
    }
    Ok(())
}

/// The commit benchmarked: `FERROTUNE_COMMIT`, else `git rev-parse`, else "unknown".
pub fn commit() -> String {
    if let Ok(c) = std::env::var("FERROTUNE_COMMIT") {
        return c;
    }
    std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}
