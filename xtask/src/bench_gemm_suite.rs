//! `cargo xtask bench --ops gemm --shape-suite irregular`: the irregular-shape GEMM suite
//! (benches/gemm_suite.rs) against cuBLAS in the same process; a table on stdout and JSON with
//! device, driver, date and commit.

use anyhow::Context;
use ferrotune::peer::GemmMath;
use ferrotune::{Backend, BackendChoice};
use ferrotune_autotune::measure::Repeat;
use ferrotune_bench::gemm_suite::{SuiteRow, run_suite, suite_shapes};

/// What the suite command runs.
pub struct SuiteArgs {
    pub suite: String,
    /// `--shapes MxNxK,…`: these instead of the suite's own (a focused run).
    pub shapes: Option<Vec<String>>,
    pub dtypes: Vec<String>,
    pub warmup: usize,
    pub iters: usize,
    pub json: Option<std::path::PathBuf>,
}

fn print(r: &SuiteRow) {
    println!(
        "{:<5} {:>5}x{:>6}x{:>6} ours {:>8.4} ms {:>7.1} TF/s {:>7.0} GB/s{} | cuBLAS {:>7} TF/s | ratio {:>6} {} | queued {}/{} ms{} | graph {}/{} ms | host {}/{} us | {}",
        r.dtype,
        r.m,
        r.n,
        r.k,
        r.ours.median_ms,
        r.ours_tflops,
        r.weight_bytes_per_s / 1e9,
        r.copy_fraction.map_or(String::new(), |f| format!(" ({:.0}% of copy)", 100.0 * f)),
        r.cublas_tflops.map_or("-".into(), |t| format!("{t:.1}")),
        r.ratio.map_or("-".into(), |x| format!("{x:.3}")),
        if r.correct { "ok" } else { "MISMATCH" },
        r.ours_queued_ms.map_or("-".into(), |t| format!("{t:.4}")),
        r.cublas_queued_ms.map_or("-".into(), |t| format!("{t:.4}")),
        r.copy_fraction_queued.map_or(String::new(), |f| format!(" ({:.0}% of copy)", 100.0 * f)),
        r.ours_graph_ms.map_or("-".into(), |t| format!("{t:.4}")),
        r.cublas_graph_ms.map_or("-".into(), |t| format!("{t:.4}")),
        r.ours_host_us.map_or("-".into(), |t| format!("{t:.1}")),
        r.cublas_host_us.map_or("-".into(), |t| format!("{t:.1}")),
        r.family
    );
}

pub fn run(args: SuiteArgs) -> anyhow::Result<()> {
    let mut shapes =
        suite_shapes(&args.suite).with_context(|| format!("unknown shape suite {} (irregular)", args.suite))?;
    if let Some(given) = &args.shapes {
        shapes = given
            .iter()
            .map(|s| {
                let d: Vec<usize> = s.split('x').filter_map(|x| x.parse().ok()).collect();
                anyhow::ensure!(d.len() == 3, "--shapes {s}: the suite takes MxNxK");
                Ok((d[0], d[1], d[2]))
            })
            .collect::<anyhow::Result<_>>()?;
    }
    let maths = args
        .dtypes
        .iter()
        .map(|d| GemmMath::from_name(d).with_context(|| format!("unknown GEMM dtype {d} (f32, tf32, f16, bf16)")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let backend =
        Backend::new(BackendChoice::Cuda).context("the GEMM suite compares with cuBLAS and needs a CUDA device")?;
    let repeat = Repeat { warmup: args.warmup, iters: args.iters };
    let mut report = run_suite(&backend, &shapes, &maths, repeat, print)?;
    println!("copy ceiling: {:.0} GB/s", report.copy_bytes_per_s / 1e9);
    let ratios: Vec<f64> = report.rows.iter().filter_map(|r| r.ratio).collect();
    if !ratios.is_empty() {
        let geo = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
        let worst = ratios.iter().cloned().fold(f64::INFINITY, f64::min);
        println!("geomean ours/cuBLAS {geo:.3}, worst {worst:.3} over {} rows", ratios.len());
    }
    report.date = ferrotune_profile::utc_now();
    report.commit = std::env::var("FERROTUNE_COMMIT").unwrap_or_else(|_| crate::bench::commit());
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)?;
        println!("wrote {}", p.display());
    }
    if report.rows.iter().any(|r| !r.correct) {
        anyhow::bail!("a suite row did not match the float64 reference");
    }
    Ok(())
}
