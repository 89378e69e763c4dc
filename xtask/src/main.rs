//! `cargo xtask <command>`: one file per command; each parses its flags and calls a library.

mod bench;
mod bench_clifford;
mod bench_gemm;
mod bench_gemm_suite;
mod bench_multigpu;
mod bench_roof;
mod bench_runtime;
mod explain_clifford;
mod explain_split;
mod info;
mod profile;
mod ptx;
mod ranks;
mod repeat;
mod roofline;
mod test;
mod tune;
mod tune_devices;
mod validate;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "ferrotune developer commands")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build the PTX (sm_80, sm_90, sm_90a) into target/ptx/, list entries, check with ptxas.
    Ptx(ptx::Args),
    /// Print the CUDA devices and their capabilities (or the CPU backend in use).
    Info,
    /// Benchmark ops against ceilings measured in the same run; JSON, markdown, trace, regression gate.
    Bench(bench::Args),
    /// Plot bench results on the roofline of their measured ceilings; say what bounds each op.
    Roofline(roofline::Args),
    /// Run the whole test suite (installs rust-src for the PTX build when missing).
    Test(test::Args),
    /// Autotune ops into a TOML profile (candidates run, verified and timed in worker processes).
    Tune(tune::Args),
    /// Inspect, validate, merge tuning profiles; explain which config an op gets.
    #[command(subcommand)]
    Profile(profile::Cmd),
    /// NCCL with one process per GPU, launched like torchrun (id by env and file): every
    /// collective checked on every rank, and ranks that disagree on lengths.
    Ranks(ranks::Args),
    /// One CPU op (copy, Clifford, GEMM or its `matrixmultiply` peer) `--iters` times in one
    /// process, for timing whole processes from outside.
    Repeat(repeat::Args),
    /// Internal: the tuner's worker process (JSON requests on stdin, answers on stdout).
    #[command(hide = true)]
    TuneWorker,
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Ptx(a) => ptx::run(a),
        Cmd::Info => info::run(),
        Cmd::Bench(a) => bench::run(a),
        Cmd::Roofline(a) => roofline::run(a),
        Cmd::Test(a) => test::run(a),
        Cmd::Tune(a) => tune::run(a),
        Cmd::Profile(c) => profile::run(c),
        Cmd::Ranks(a) => ranks::run(a),
        Cmd::Repeat(a) => repeat::run_cmd(a),
        Cmd::TuneWorker => tune::worker(),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

/// The workspace root (xtask sits one level below it).
pub fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask/ has a parent").to_path_buf()
}

/// Parses a comma-separated list of names (`all` for every one), naming what was unknown.
pub fn parse_list<T: Copy>(
    items: &[String],
    all: &[T],
    parse: impl Fn(&str) -> Option<T>,
    what: &str,
) -> anyhow::Result<Vec<T>> {
    if items.iter().any(|s| s == "all") {
        return Ok(all.to_vec());
    }
    items.iter().map(|s| parse(s).with_context(|| format!("unknown {what} '{s}'"))).collect()
}
