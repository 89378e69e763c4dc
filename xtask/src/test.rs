//! `cargo xtask test`: makes sure the PTX can be built (rust-src for nightly), then runs
//! `cargo test --workspace`. GPU tests run where a device exists and print a skip otherwise.

use std::process::Command;

use anyhow::bail;

#[derive(clap::Args)]
pub struct Args {
    /// Extra arguments for `cargo test` (after `--`).
    #[arg(last = true)]
    rest: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match ferrotune_ptx_build::check_toolchain(true) {
        Ok(v) => println!("PTX toolchain: {v} with rust-src"),
        Err(e) => println!("PTX toolchain unavailable ({e}); testing the CPU backend only"),
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(crate::workspace_root())
        .args(["test", "--workspace"])
        .args(&args.rest)
        .status()?;
    if !status.success() {
        bail!("cargo test failed ({status})");
    }
    Ok(())
}
