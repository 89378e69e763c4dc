//! `cargo xtask bench --ops clifford`: the Clifford layer ops (forward with norm, forward +
//! backward, FCGP forward; 2D and 3D) timed beside a copy ceiling of the same run; a table on
//! stdout and JSON. CUDA when a device is present, else the CPU backend on small sizes (it
//! says so). The work is in `ferrotune_bench::clifford`.

use anyhow::Context;
use ferrotune::{BackendChoice, DType};
use ferrotune_autotune::measure::Repeat;
use ferrotune_bench::clifford::{CliffordOptions, OPS, run};

/// What `bench --ops clifford` runs.
pub struct CliffordArgs {
    pub backend: BackendChoice,
    /// `BxN` pairs (empty: the default table).
    pub shapes: Vec<String>,
    pub dtypes: Vec<String>,
    /// `fwd`, `fwdbwd`, `fcgp_fwd` (empty: all).
    pub rows: Vec<String>,
    pub warmup: Option<usize>,
    pub iters: Option<usize>,
    pub json: Option<std::path::PathBuf>,
}

fn parse_bn(s: &str) -> anyhow::Result<(usize, usize)> {
    let v: Vec<usize> =
        s.split('x').map(|p| p.trim().parse()).collect::<Result<_, _>>().with_context(|| format!("bad shape '{s}'"))?;
    anyhow::ensure!(v.len() == 2 && v[0] > 0 && v[1] > 0, "shape '{s}' is not BxN with B, N >= 1");
    Ok((v[0], v[1]))
}

pub fn run_cmd(args: CliffordArgs) -> anyhow::Result<()> {
    let backend = crate::bench::open_backend(args.backend)?;
    let mut opts = CliffordOptions::default_for(&backend);
    if matches!(backend, ferrotune::Backend::Cpu(_)) {
        println!("clifford: CPU backend, small sizes (the GPU table needs a CUDA device)");
    }
    if !args.shapes.is_empty() {
        opts.shapes = args.shapes.iter().map(|s| parse_bn(s)).collect::<anyhow::Result<_>>()?;
    }
    if !args.dtypes.is_empty() {
        opts.dtypes =
            crate::parse_list(&args.dtypes, &DType::ALL, |s| DType::ALL.into_iter().find(|d| d.name() == s), "dtype")?;
    }
    if !args.rows.is_empty() {
        for r in &args.rows {
            anyhow::ensure!(
                OPS.contains(&r.as_str())
                    || ["fwd_sweep", "fwdbwd_sweep", "fcgp_gemm", "fcgp_gemms"].contains(&r.as_str()),
                "unknown clifford row '{r}' (fwd, fwdbwd, fcgp_fwd, fcgp_gemm, fcgp_gemms, fwd_sweep, fwdbwd_sweep)"
            );
        }
        opts.ops = args.rows.clone();
    }
    opts.repeat = Repeat {
        warmup: args.warmup.unwrap_or(opts.repeat.warmup),
        iters: args.iters.unwrap_or(opts.repeat.iters).max(1),
    };
    let mut report = run(&backend, &opts, |line| println!("{line}"))?;
    report.date = ferrotune_profile::utc_now();
    report.commit = std::env::var("FERROTUNE_COMMIT").unwrap_or_default();
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)?;
        println!("wrote {}", p.display());
    }
    let bad: Vec<_> = report.rows.iter().filter(|r| !r.correct).collect();
    for r in &bad {
        eprintln!(
            "MISMATCH d{} {} {} B {} N {}: {}",
            r.dim,
            r.op,
            r.dtype,
            r.b,
            r.n,
            r.mismatch.as_deref().unwrap_or("")
        );
    }
    anyhow::ensure!(bad.is_empty(), "{} rows did not match the reference", bad.len());
    Ok(())
}
