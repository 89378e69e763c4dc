//! Builds the kernels into PTX (through `ferrotune-ptx-build`, the same builder as
//! `cargo xtask ptx`) and embeds it. Without a usable nightly toolchain the library still
//! builds, with the CPU backend only, and says why.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest.parent().expect("host/ sits in the workspace").to_path_buf();
    println!("cargo::rustc-check-cfg=cfg(ferrotune_ptx)");
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
            for a in artifacts {
                println!("cargo::rustc-env=FERROTUNE_PTX_{}={}", a.arch.to_uppercase(), a.path.display());
                println!("cargo::rerun-if-changed={}", a.path.display());
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

fn workspace_retry_marker() -> PathBuf {
    PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("retry-ptx-build")
}
