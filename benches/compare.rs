//! The regression gate: a run against a baseline file, row by row (matched on family, op,
//! dtype, shape and backend), with a warning threshold and a failing one.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::error::{BenchError, Result};
use crate::report::{Report, RowKey};

/// How strict the gate is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompareConfig {
    /// A row slower by more than this fraction (0.10 = 10%) is reported as a warning.
    pub warn_threshold: f64,
    /// A row slower by more than this is a regression (`--fail-on-regression` exits non-zero).
    pub fail_threshold: f64,
    /// Baseline from another device: an error (the gate refuses) instead of a warning.
    pub strict_device: bool,
}

impl Default for CompareConfig {
    fn default() -> Self {
        CompareConfig { warn_threshold: 0.10, fail_threshold: 0.25, strict_device: false }
    }
}

impl CompareConfig {
    /// The command line's rule: `--threshold T` sets both thresholds to T; without it, warn
    /// at 10% and fail at 25%. `--fail-on-regression` also refuses another device's baseline.
    pub fn from_flags(threshold: Option<f64>, fail_on_regression: bool) -> Result<CompareConfig> {
        if let Some(t) = threshold.filter(|t| !(t.is_finite() && *t > 0.0)) {
            return Err(BenchError::Options(format!("--threshold {t} must be a positive fraction (0.10 = 10%)")));
        }
        let d = CompareConfig::default();
        Ok(CompareConfig {
            warn_threshold: threshold.unwrap_or(d.warn_threshold),
            fail_threshold: threshold.unwrap_or(d.fail_threshold),
            strict_device: fail_on_regression,
        })
    }
}

/// How one row moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Faster by more than the warning threshold.
    Improved,
    /// Within the warning threshold either way: noise.
    Unchanged,
    /// Slower by more than the warning threshold, not by more than the failing one.
    Slower,
    /// Slower by more than the failing threshold.
    Regressed,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Unchanged => "ok",
            Verdict::Slower => "WARN slower",
            Verdict::Regressed => "REGRESSED",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct RowChange {
    pub key: RowKey,
    pub baseline_ms: f64,
    pub current_ms: f64,
    /// `current / baseline - 1` of the median time: +0.30 is 30% slower.
    pub change: f64,
    /// The baseline's MAD relative to its median: how noisy the row was then.
    pub baseline_noise: f64,
    pub verdict: Verdict,
}

/// A whole comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub config: CompareConfig,
    pub baseline_device: String,
    pub current_device: String,
    /// Set when the devices differ (and the gate was not strict about it).
    pub device_warning: Option<String>,
    pub rows: Vec<RowChange>,
    /// In the baseline, not run now (a subset with --ops, or a row that went away).
    pub missing: Vec<RowKey>,
    /// Run now, not in the baseline (new rows: no verdict).
    pub new: Vec<RowKey>,
    /// The baseline itself was produced with a planted slowdown.
    pub baseline_planted: Option<f64>,
}

/// Compares `current` with `baseline` under `config`.
pub fn compare(baseline: &Report, current: &Report, config: CompareConfig) -> Result<Comparison> {
    let (bd, cd) = (baseline.device_label(), current.device_label());
    let device_warning = if bd == cd {
        None
    } else if config.strict_device {
        return Err(BenchError::DeviceMismatch { baseline: bd, current: cd });
    } else {
        Some(format!("baseline is from {bd}, this run is on {cd}: changes below compare two machines, not two commits"))
    };
    let base: BTreeMap<RowKey, &crate::report::Row> = baseline.rows.iter().map(|r| (r.key(), r)).collect();
    let mut seen = std::collections::BTreeSet::new();
    let mut rows = Vec::new();
    let mut new = Vec::new();
    for r in &current.rows {
        let key = r.key();
        let Some(b) = base.get(&key) else {
            new.push(key);
            continue;
        };
        seen.insert(key.clone());
        let change = r.stats.median_ms / b.stats.median_ms - 1.0;
        let verdict = if change > config.fail_threshold {
            Verdict::Regressed
        } else if change > config.warn_threshold {
            Verdict::Slower
        } else if change < -config.warn_threshold {
            Verdict::Improved
        } else {
            Verdict::Unchanged
        };
        rows.push(RowChange {
            key,
            baseline_ms: b.stats.median_ms,
            current_ms: r.stats.median_ms,
            change,
            baseline_noise: b.stats.mad_ms / b.stats.median_ms,
            verdict,
        });
    }
    let missing = base.keys().filter(|k| !seen.contains(*k)).cloned().collect();
    Ok(Comparison {
        config,
        baseline_device: bd,
        current_device: cd,
        device_warning,
        rows,
        missing,
        new,
        baseline_planted: baseline.planted_slowdown,
    })
}

impl Comparison {
    pub fn regressions(&self) -> impl Iterator<Item = &RowChange> {
        self.rows.iter().filter(|r| r.verdict == Verdict::Regressed)
    }

    pub fn warnings(&self) -> impl Iterator<Item = &RowChange> {
        self.rows.iter().filter(|r| r.verdict == Verdict::Slower)
    }

    /// Whether the gate fails: any row slower than the failing threshold.
    pub fn failed(&self) -> bool {
        self.regressions().next().is_some()
    }

    /// Per-row changes, then the missing and new rows, then a one-line summary.
    pub fn render(&self) -> String {
        let mut t = String::new();
        if let Some(w) = &self.device_warning {
            let _ = writeln!(t, "WARNING: {w}");
        }
        if let Some(f) = self.baseline_planted {
            let _ = writeln!(t, "WARNING: the baseline was written with a planted slowdown (×{f})");
        }
        let _ = writeln!(t, "{:<44} {:>11} {:>11} {:>8} {:>7}  verdict", "row", "base ms", "now ms", "change", "noise");
        for r in &self.rows {
            let _ = writeln!(
                t,
                "{:<44} {:>11.4} {:>11.4} {:>+7.1}% {:>6.1}%  {}",
                r.key.to_string(),
                r.baseline_ms,
                r.current_ms,
                100.0 * r.change,
                100.0 * r.baseline_noise,
                r.verdict.name()
            );
        }
        for k in &self.missing {
            let _ = writeln!(t, "missing (in the baseline, not run now): {k}");
        }
        for k in &self.new {
            let _ = writeln!(t, "new (not in the baseline): {k}");
        }
        let _ = writeln!(
            t,
            "compare: {} rows, {} regressed (>{:.0}% slower), {} slower (>{:.0}%), {} improved, {} missing, {} new",
            self.rows.len(),
            self.regressions().count(),
            100.0 * self.config.fail_threshold,
            self.warnings().count(),
            100.0 * self.config.warn_threshold,
            self.rows.iter().filter(|r| r.verdict == Verdict::Improved).count(),
            self.missing.len(),
            self.new.len()
        );
        t
    }
}
