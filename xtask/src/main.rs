//! `cargo xtask <command>`: one file per command; each parses its flags and calls a library.

mod bench;
mod info;
mod ptx;
mod test;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "ferrotune developer commands")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build the PTX (sm_80, sm_90) into target/ptx/, list entries, check with ptxas.
    Ptx(ptx::Args),
    /// Print the CUDA devices and their capabilities (or the CPU backend in use).
    Info,
    /// Benchmark ops: median time, GB/s, ratio to the copy probe measured in the same run.
    Bench(bench::Args),
    /// Run the whole test suite (installs rust-src for the PTX build when missing).
    Test(test::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Ptx(a) => ptx::run(a),
        Cmd::Info => info::run(),
        Cmd::Bench(a) => bench::run(a),
        Cmd::Test(a) => test::run(a),
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
