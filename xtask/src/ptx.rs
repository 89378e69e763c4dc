//! `cargo xtask ptx`: builds the PTX with the shared builder, prints every entry point and,
//! where ptxas is found, each entry's registers, spills and shared memory.

use anyhow::{Context, bail};
use ferrotune_ptx_build::{ARCHS, BuildOptions, find_ptxas, ptxas_check};

#[derive(clap::Args)]
pub struct Args {
    /// Architectures to build (default: sm_80,sm_90,sm_90a).
    #[arg(long, value_delimiter = ',')]
    arch: Vec<String>,
    /// Fail when ptxas is not found (CI sets this; locally a missing ptxas only warns).
    #[arg(long)]
    require_ptxas: bool,
    /// Print only the summary, not one line per entry.
    #[arg(long)]
    quiet: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let root = crate::workspace_root();
    let archs = if args.arch.is_empty() { ARCHS.iter().map(|a| a.to_string()).collect() } else { args.arch };
    let opts = BuildOptions {
        workspace: root.clone(),
        out_dir: root.join("target").join("ptx"),
        archs,
        install_rust_src: true,
    };
    let artifacts = ferrotune_ptx_build::build(&opts).context("building the PTX")?;
    let ptxas = find_ptxas();
    if ptxas.is_none() {
        let msg = "ptxas not found (pip install nvidia-cuda-nvcc, or set PTXAS)";
        if args.require_ptxas {
            bail!(msg);
        }
        eprintln!("warning: {msg}; entries are listed without resources");
    }
    for a in &artifacts {
        println!("{}: {} ({} entries)", a.arch, a.path.display(), a.entries.len());
        let Some(ptxas) = &ptxas else {
            if !args.quiet {
                a.entries.iter().for_each(|e| println!("  {e}"));
            }
            continue;
        };
        let res = ptxas_check(ptxas, &a.path, &a.arch)
            .map_err(|log| anyhow::anyhow!("ptxas rejected {}:\n{log}", a.path.display()))?;
        if res.len() != a.entries.len() {
            bail!("ptxas compiled {} entries, the PTX declares {}", res.len(), a.entries.len());
        }
        let report = a.path.with_extension("resources.json");
        let json: Vec<_> = res
            .iter()
            .map(|r| {
                serde_json::json!({"name": r.name, "registers": r.registers, "stack_bytes": r.stack_bytes,
                    "spill_stores": r.spill_stores, "spill_loads": r.spill_loads, "shared_bytes": r.shared_bytes})
            })
            .collect();
        std::fs::write(&report, serde_json::to_string_pretty(&json)?)?;
        let spilling: Vec<_> = res.iter().filter(|r| r.stack_bytes > 0 || r.spill_stores > 0).collect();
        if !args.quiet {
            println!("  {:<34} {:>5} {:>7} {:>7} {:>6}", "entry", "regs", "spill", "stack", "smem");
            for r in &res {
                println!(
                    "  {:<34} {:>5} {:>7} {:>7} {:>6}",
                    r.name,
                    r.registers,
                    r.spill_stores + r.spill_loads,
                    r.stack_bytes,
                    r.shared_bytes
                );
            }
        }
        println!(
            "  ptxas {}: all {} entries assembled; max registers {}; {} with a stack frame or spills; report {}",
            a.arch,
            res.len(),
            res.iter().map(|r| r.registers).max().unwrap_or(0),
            spilling.len(),
            report.display()
        );
    }
    Ok(())
}
