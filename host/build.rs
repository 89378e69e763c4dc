//! Builds the kernels into PTX (through `ferrotune-ptx-build`, the same builder as
//! `cargo xtask ptx`) and embeds it. Without a usable nightly toolchain the library still
//! builds, with the CPU backend only, and says why.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest.parent().expect("host/ sits in the workspace").to_path_buf();
    println!("cargo::rustc-check-cfg=cfg(ferrotune_ptx)");
    println!("cargo::rustc-check-cfg=cfg(ferrotune_cubin)");
    println!("cargo::rerun-if-env-changed=FERROTUNE_CUBIN");
    println!("cargo::rerun-if-changed={}", workspace.join("kernels-gpu").display());
    println!("cargo::rerun-if-changed={}", workspace.join("ptx-build/src").display());
    println!("cargo::rerun-if-env-changed=FERROTUNE_NO_PTX");
    let reason = if std::env::var_os("FERROTUNE_NO_PTX").is_some() {
        Err("FERROTUNE_NO_PTX is set".to_string())
    } else {
        let opts = ferrotune_ptx_build::BuildOptions {
            out_dir: workspace.join("target").join("ptx"),
            workspace,
            archs: ferrotune_ptx_build::ARCHS.iter().map(|a| a.to_string()).collect(),
            install_rust_src: false,
        };
        ferrotune_ptx_build::build(&opts).map_err(|e| e.to_string())
    };
    match reason {
        Ok(artifacts) => {
            println!("cargo::rustc-cfg=ferrotune_ptx");
            for a in &artifacts {
                println!("cargo::rustc-env=FERROTUNE_PTX_{}={}", a.arch.to_uppercase(), a.path.display());
                println!("cargo::rerun-if-changed={}", a.path.display());
            }
            if std::env::var("FERROTUNE_CUBIN").is_ok_and(|v| v == "1") {
                match cubins(&artifacts) {
                    Ok(()) => println!("cargo::rustc-cfg=ferrotune_cubin"),
                    Err(why) => println!("cargo::warning=cubins not built (the PTX is JIT-compiled at load): {why}"),
                }
            }
        }
        Err(why) => {
            let first = why.lines().next().unwrap_or_default().to_string();
            println!("cargo::warning=GPU kernels not built: {first}");
            // A path that never exists makes cargo rerun this script on every build, so the
            // PTX appears as soon as the toolchain problem is fixed (the check is quick).
            println!("cargo::rerun-if-changed={}", workspace_retry_marker().display());
            println!("cargo::rustc-env=FERROTUNE_PTX_MISSING={}", first.replace('\n', " "));
        }
    }
}

/// With `FERROTUNE_CUBIN=1`: each arch's PTX assembled by ptxas into a cubin next to it (in
/// parallel), embedded beside the PTX so a matching GPU skips the JIT. All or none.
fn cubins(artifacts: &[ferrotune_ptx_build::PtxArtifact]) -> Result<(), String> {
    let ptxas =
        ferrotune_ptx_build::find_ptxas().ok_or("ptxas not found (pip install nvidia-cuda-nvcc, or set PTXAS)")?;
    let outs: Vec<PathBuf> = artifacts.iter().map(|a| a.path.with_extension("cubin")).collect();
    std::thread::scope(|sc| {
        let jobs: Vec<_> = artifacts
            .iter()
            .zip(&outs)
            .map(|(a, out)| sc.spawn(|| ferrotune_ptx_build::assemble_cubin(&ptxas, &a.path, &a.arch, out)))
            .collect();
        jobs.into_iter().try_for_each(|j| j.join().map_err(|_| "ptxas thread panicked".to_string())?)
    })?;
    for (a, out) in artifacts.iter().zip(&outs) {
        println!("cargo::rustc-env=FERROTUNE_CUBIN_{}={}", a.arch.to_uppercase(), out.display());
    }
    Ok(())
}

fn workspace_retry_marker() -> PathBuf {
    PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("retry-ptx-build")
}
