//! Checks of `bench` and `tune` flags before anything is measured: every value is checked and
//! a wrong one is refused with the valid values in the message, output paths are proved
//! writable, so a typo costs a second instead of a run.

use std::path::Path;

use ferrotune::{DType, ElemOp};

/// Op names `bench --ops` takes besides the elementwise ones.
pub const BENCH_FAMILIES: [&str; 6] = ["gemm", "gemm-tiles", "clifford", "runtime", "multi-gpu", "cpu-roof"];

fn one_of(what: &str, got: &str, valid: &[&str]) -> anyhow::Result<()> {
    anyhow::ensure!(valid.contains(&got), "unknown {what} '{got}' (valid: {})", valid.join(", "));
    Ok(())
}

/// Every `--ops` name is an elementwise op, a family or `all`.
pub fn ops(names: &[String], families: &[&str]) -> anyhow::Result<()> {
    let mut valid: Vec<&str> = ElemOp::ALL.iter().map(|o| o.name()).collect();
    valid.extend_from_slice(families);
    valid.push("all");
    names.iter().try_for_each(|n| one_of("op", n, &valid))
}

/// Every `--dtypes` name is one of `extra` plus f32, f16, bf16 and `all`.
pub fn dtypes(names: &[String], extra: &[&str]) -> anyhow::Result<()> {
    let mut valid: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
    valid.extend_from_slice(extra);
    valid.push("all");
    names.iter().try_for_each(|n| one_of("dtype", n, &valid))
}

/// A shape of `dims` positive integers joined by `x` (`MxNxK`, `BxN`).
pub fn shape(s: &str, dims: &[usize], form: &str) -> anyhow::Result<Vec<usize>> {
    let v: Option<Vec<usize>> = s.split('x').map(|p| p.trim().parse().ok()).collect();
    match v {
        Some(v) if dims.contains(&v.len()) && v.iter().all(|&d| d > 0) => Ok(v),
        _ => anyhow::bail!("shape '{s}' is not {form} with every dimension a positive integer"),
    }
}

/// Tensor sizes in MiB: finite and positive.
pub fn sizes_mib(sizes: &[f64]) -> anyhow::Result<()> {
    for &s in sizes {
        anyhow::ensure!(s.is_finite() && s > 0.0, "size {s} MiB must be a positive number of MiB per tensor");
    }
    Ok(())
}

/// A repeat count given on the command line: at least 1.
pub fn at_least_one(flag: &str, v: Option<usize>) -> anyhow::Result<()> {
    anyhow::ensure!(v != Some(0), "{flag} must be at least 1");
    Ok(())
}

/// A duration in seconds: finite and positive.
pub fn seconds(flag: &str, v: Option<f64>) -> anyhow::Result<()> {
    if let Some(s) = v {
        anyhow::ensure!(s.is_finite() && s > 0.0, "{flag} {s} must be a positive number of seconds");
    }
    Ok(())
}

/// The file at `path` can be written: opened for writing (created and removed again when it
/// did not exist), so a bad directory fails now, not after the run.
pub fn writable(flag: &str, path: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(!path.is_dir(), "{flag} {}: is a directory, give a file path", path.display());
    let existed = path.exists();
    match std::fs::OpenOptions::new().append(true).create(true).open(path) {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => anyhow::bail!("{flag} {}: cannot write there ({e})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn unknown_names_are_refused_with_the_valid_ones() {
        ops(&strings(&["add", "gemm", "all"]), &BENCH_FAMILIES).unwrap();
        let e = ops(&strings(&["add", "gelu"]), &BENCH_FAMILIES).unwrap_err().to_string();
        assert!(
            e.starts_with("unknown op 'gelu' (valid: copy, scale,") && e.contains("gelu_erf") && e.contains("clifford"),
            "{e}"
        );
        dtypes(&strings(&["f32", "bf16"]), &[]).unwrap();
        let e = dtypes(&strings(&["fp8"]), &["tf32"]).unwrap_err().to_string();
        assert_eq!(e, "unknown dtype 'fp8' (valid: f32, f16, bf16, tf32, all)");
    }

    #[test]
    fn shapes_sizes_and_counts_must_be_positive() {
        assert_eq!(shape("512x3072x768", &[3], "MxNxK").unwrap(), vec![512, 3072, 768]);
        for bad in ["512x0x768", "512x3072", "axbxc", "1x2x3x4", ""] {
            let e = shape(bad, &[3], "MxNxK").unwrap_err().to_string();
            assert!(e.contains("is not MxNxK"), "{bad}: {e}");
        }
        sizes_mib(&[0.5, 64.0]).unwrap();
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(sizes_mib(&[bad]).is_err(), "{bad}");
        }
        at_least_one("--iters", Some(3)).unwrap();
        assert_eq!(at_least_one("--iters", Some(0)).unwrap_err().to_string(), "--iters must be at least 1");
        assert!(seconds("--time-limit", Some(-2.0)).is_err() && seconds("--time-limit", None).is_ok());
    }

    #[test]
    fn output_paths_must_be_writable_and_are_left_as_found() {
        let dir = std::env::temp_dir().join(format!("xtask-validate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("out.json");
        writable("--json", &f).unwrap();
        assert!(!f.exists(), "the probe must not leave a file behind");
        let e = writable("--json", &dir.join("missing/out.json")).unwrap_err().to_string();
        assert!(e.starts_with("--json ") && e.contains("cannot write there"), "{e}");
        assert!(writable("--json", &dir).unwrap_err().to_string().contains("is a directory"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
