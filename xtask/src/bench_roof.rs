//! `cargo xtask bench --ops cpu-roof`: the CPU memory roof (a parallel copy far larger than L2)
//! and every elementwise op's fraction of it (or only those named beside it in `--ops`), pair
//! by pair, with a table and JSON. The work is in `ferrotune_bench::cpu_roof`.

use ferrotune::{Backend, BackendChoice, DType, ElemOp};
use ferrotune_bench::cpu_roof::{RoofOptions, run};

pub struct RoofArgs {
    /// The `--ops` names besides `cpu-roof`: the elementwise ops to time (none: all).
    pub ops: Vec<String>,
    pub dtypes: Option<Vec<String>>,
    pub sizes: Option<Vec<f64>>,
    pub warmup: Option<usize>,
    pub iters: Option<usize>,
    pub json: Option<std::path::PathBuf>,
}

pub fn run_cmd(args: RoofArgs) -> anyhow::Result<()> {
    let Backend::Cpu(cpu) = crate::bench::open_backend(BackendChoice::Cpu)? else {
        anyhow::bail!("the CPU backend did not open")
    };
    let dtypes = match &args.dtypes {
        Some(d) => crate::parse_list(d, &DType::ALL, |s| DType::ALL.into_iter().find(|d| d.name() == s), "dtype")?,
        None => DType::ALL.to_vec(),
    };
    let ops: Vec<String> = args.ops.iter().filter(|s| *s != "cpu-roof").cloned().collect();
    let ops = if ops.is_empty() {
        ElemOp::ALL.to_vec()
    } else {
        crate::parse_list(&ops, &ElemOp::ALL, ElemOp::from_name, "elementwise op")?
    };
    let mib = args.sizes.as_ref().and_then(|s| s.first().copied()).unwrap_or(64.0);
    let opts = RoofOptions {
        ops,
        dtypes,
        bytes_per_tensor: (mib * (1u64 << 20) as f64) as usize,
        pairs: args.iters.unwrap_or(15),
        warmup: args.warmup.unwrap_or(2),
    };
    let mut report = run(&cpu, &opts, |r| {
        println!("{:<18} {:<5} {:>6.1}% of the copy roof ({:.1} GB/s)", r.op, r.dtype, 100.0 * r.fraction, r.roof_gb_s)
    })?;
    report.date = ferrotune_profile::utc_now();
    report.commit = crate::bench::commit();
    println!("\n{}", report.render_table());
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)?;
        println!("wrote {}", p.display());
    }
    let wrong: Vec<_> = report.rows.iter().filter(|r| !r.correct).map(|r| format!("{} {}", r.op, r.dtype)).collect();
    anyhow::ensure!(wrong.is_empty(), "rows that did not match the reference: {wrong:?}");
    Ok(())
}
