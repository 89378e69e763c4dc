//! Timing a piece of work on a stream: warm-up, then each repetition bracketed by events
//! (device time on CUDA, wall time on the synchronous CPU backend), summarised robustly.

use ferrotune::{Error, EventTimer, Result, Stream};
use serde::{Deserialize, Serialize};

/// How many runs to discard and to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repeat {
    pub warmup: usize,
    pub iters: usize,
}

/// Summary of repeated timings, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// Median absolute deviation from the median: the dispersion that ignores outliers.
    pub mad_ms: f64,
    pub samples: usize,
}

impl Stats {
    /// Summarises `samples` (milliseconds); `None` when there are none or one is not finite.
    pub fn from_samples(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
            return None;
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let median = median_sorted(&v);
        let mut dev: Vec<f64> = v.iter().map(|x| (x - median).abs()).collect();
        dev.sort_by(f64::total_cmp);
        Some(Stats {
            median_ms: median,
            min_ms: v[0],
            max_ms: v[v.len() - 1],
            mad_ms: median_sorted(&dev),
            samples: v.len(),
        })
    }
}

fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }
}

/// Runs `work` `warmup` times untimed, then `iters` times each between two events on
/// `stream`; returns the statistics. `work(i)` gets the repetition index so callers can
/// rotate inputs.
pub fn time_on_stream(stream: &Stream, repeat: Repeat, mut work: impl FnMut(usize) -> Result<()>) -> Result<Stats> {
    if repeat.iters == 0 {
        return Err(Error::InvalidConfig { op: "time_on_stream", why: "iters must be at least 1".into() });
    }
    for i in 0..repeat.warmup {
        work(i)?;
    }
    stream.synchronize()?;
    let mut samples = Vec::with_capacity(repeat.iters);
    for i in 0..repeat.iters {
        let t = EventTimer::start(stream)?;
        work(i)?;
        samples.push(t.stop(stream)?);
    }
    Ok(Stats::from_samples(&samples).expect("event timings are finite and iters >= 1"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_are_robust_to_outliers() {
        let s = Stats::from_samples(&[1.0, 1.1, 0.9, 1.0, 50.0]).unwrap();
        assert_eq!(s.median_ms, 1.0);
        assert_eq!(s.min_ms, 0.9);
        assert_eq!(s.max_ms, 50.0);
        assert!((s.mad_ms - 0.1).abs() < 1e-12);
        assert_eq!(Stats::from_samples(&[2.0, 4.0]).unwrap().median_ms, 3.0);
        assert!(Stats::from_samples(&[]).is_none());
        assert!(Stats::from_samples(&[1.0, f64::NAN]).is_none());
    }
}
