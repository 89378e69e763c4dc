//! Architecture invariants, checked from the manifests and sources (see ARCHITECTURE.md).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn deps(crate_dir: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(crate_dir).join("Cargo.toml")).unwrap();
    let doc: toml::Table = text.parse().unwrap();
    let mut names = Vec::new();
    for section in ["dependencies", "build-dependencies"] {
        if let Some(t) = doc.get(section).and_then(|d| d.as_table()) {
            names.extend(t.keys().cloned());
        }
    }
    names
}

#[test]
fn kernels_know_nothing_of_the_driver_or_formats() {
    // Architecture Invariant: kernels-gpu is no_std maths; no cudarc, serde, toml, rayon.
    let d = deps("kernels-gpu");
    for banned in ["cudarc", "serde", "toml", "rayon", "ferrotune"] {
        assert!(!d.iter().any(|x| x == banned), "kernels-gpu depends on {banned}");
    }
    let lib = std::fs::read_to_string(root().join("kernels-gpu/src/lib.rs")).unwrap();
    assert!(lib.contains("#![no_std]"), "kernels-gpu must stay no_std");
}

#[test]
fn only_host_touches_the_driver() {
    // Architecture Invariant: cudarc appears only in host/ (xtask and benches go through it).
    for c in ["kernels-gpu", "ptx-build", "autotune", "xtask", "benches", "tests", "profile"] {
        assert!(!deps(c).iter().any(|x| x == "cudarc"), "{c} depends on cudarc directly");
    }
    assert!(deps("host").iter().any(|x| x == "cudarc"));
}

#[test]
fn only_the_profile_crate_knows_the_profile_format() {
    // Architecture Invariant: ferrotune-profile depends on serde and toml only (no driver, no
    // host), so the format can be read anywhere; nobody else parses profiles' TOML.
    let d = deps("profile");
    for x in &d {
        assert!(["serde", "toml", "thiserror"].contains(&x.as_str()), "profile depends on {x}");
    }
    for c in ["host", "autotune", "xtask"] {
        assert!(!deps(c).iter().any(|x| x == "toml"), "{c} depends on toml: profiles go through ferrotune-profile");
    }
}

#[test]
fn cfg_nvptx_lives_only_in_arch_entry_and_conversions() {
    // Architecture Invariant: target-specific code stays in arch/, entry/ and the element
    // conversions; kernel bodies are plain index maths the CPU backend calls too.
    let src = root().join("kernels-gpu/src");
    for f in ["elementwise.rs", "reduce.rs", "math/mod.rs", "math/gelu.rs", "math/exp2.rs", "clifford.rs"] {
        let text = std::fs::read_to_string(src.join(f)).unwrap();
        assert!(!text.contains("target_arch = \"nvptx64\""), "{f} has nvptx-specific code");
    }
}

#[test]
fn every_source_file_says_why_it_exists() {
    let mut missing = Vec::new();
    for dir in [
        "kernels-gpu/src",
        "ptx-build/src",
        "host/src",
        "autotune/src",
        "autotune/tests",
        "profile/src",
        "xtask/src",
        "benches",
        "tests",
    ] {
        visit(&root().join(dir), &mut |p| {
            let text = std::fs::read_to_string(p).unwrap();
            if !text.trim_start().starts_with("//!") {
                missing.push(p.display().to_string());
            }
        });
    }
    assert!(missing.is_empty(), "files without a `//!` line: {missing:?}");
}

fn visit(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            visit(&p, f);
        } else if p.extension().is_some_and(|x| x == "rs") {
            f(&p);
        }
    }
}
