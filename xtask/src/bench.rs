//! `cargo xtask bench`: runs the elementwise benchmark on the chosen backend (CUDA when a
//! device is present, else the CPU, and it says which), prints a table, writes JSON.

use anyhow::Context;
use ferrotune::{Backend, BackendChoice, DType, ElemOp};
use ferrotune_autotune::measure::Repeat;
use ferrotune_bench::Options;

#[derive(clap::Args)]
pub struct Args {
    /// Ops to run, comma-separated, or `all`.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    ops: Vec<String>,
    /// Dtypes: f32, f16, bf16 (comma-separated) or `all`.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    dtypes: Vec<String>,
    /// A small set in seconds: copy, add, gelu_erf, add_mul_gelu_erf in f32 on 32 MiB tensors.
    #[arg(long)]
    quick: bool,
    /// auto | cuda | cpu.
    #[arg(long, default_value = "auto")]
    backend: BackendChoice,
    /// MiB per tensor (default 256 on CUDA, 64 on the CPU).
    #[arg(long)]
    size_mib: Option<usize>,
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    #[arg(long, default_value_t = 50)]
    iters: usize,
    /// Also time every config of the GPU tuning space per op and report the best.
    #[arg(long)]
    sweep: bool,
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

fn parse_list<T>(items: &[String], all: &[T], parse: impl Fn(&str) -> Option<T>, what: &str) -> anyhow::Result<Vec<T>>
where
    T: Copy,
{
    if items.iter().any(|s| s == "all") {
        return Ok(all.to_vec());
    }
    items.iter().map(|s| parse(s).with_context(|| format!("unknown {what} '{s}'"))).collect()
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let backend = Backend::new(args.backend)?;
    match &backend {
        Backend::Cuda(g) => println!("backend: cuda ({}, {}, PTX {})", g.info().name, g.info().arch(), g.ptx_arch()?),
        Backend::Cpu(c) => {
            let why = ferrotune::device_count().err().map(|e| e.to_string()).unwrap_or_else(|| "CPU requested".into());
            println!("backend: cpu, {} threads ({why})", c.threads());
        }
    }
    let (mut ops, mut dtypes) = (
        parse_list(&args.ops, &ElemOp::ALL, ElemOp::from_name, "op")?,
        parse_list(&args.dtypes, &DType::ALL, |s| DType::ALL.into_iter().find(|d| d.name() == s), "dtype")?,
    );
    let mut mib = args.size_mib.unwrap_or(if matches!(backend, Backend::Cuda(_)) { 256 } else { 64 });
    let mut repeat = Repeat { warmup: args.warmup, iters: args.iters };
    if args.quick {
        ops = ["copy", "add", "gelu_erf", "add_mul_gelu_erf"].iter().filter_map(|s| ElemOp::from_name(s)).collect();
        dtypes = vec![DType::F32];
        mib = args.size_mib.unwrap_or(32);
        repeat = Repeat { warmup: 2, iters: 10 };
    }
    let opts = Options { ops, dtypes, bytes_per_tensor: mib << 20, repeat, sweep: args.sweep };
    let mut report = ferrotune_bench::run(&backend, &opts, |line| println!("{line}"))?;
    report.date = utc_now();
    report.commit = commit();
    let worst = report.rows.iter().min_by(|a, b| a.ratio_to_copy.total_cmp(&b.ratio_to_copy));
    if let Some(w) = worst {
        println!("worst ratio to copy: {:.3} ({} {})", w.ratio_to_copy, w.op, w.dtype);
    }
    let wrong: Vec<_> = report.rows.iter().filter(|r| !r.correct).collect();
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    if !wrong.is_empty() {
        for r in &wrong {
            eprintln!("MISMATCH {} {}: {}", r.op, r.dtype, r.mismatch.as_deref().unwrap_or(""));
        }
        anyhow::bail!("{} rows did not match the reference", wrong.len());
    }
    Ok(())
}

/// The commit benchmarked: `FERROTUNE_COMMIT`, else `git rev-parse`, else "unknown".
fn commit() -> String {
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

/// Current UTC time as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days conversion).
fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}
