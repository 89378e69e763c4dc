//! Timing a piece of work on a stream: warm-up, then each repetition bracketed by events
//! (device time on CUDA, wall time on the synchronous CPU backend), summarised robustly.

use std::time::{Duration, Instant};

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

/// The least wall time a (non-zero) warm-up lasts. A GPU left idle while the worker verified the
/// previous candidate on the CPU drops its clocks, and a few 0.1 ms runs do not bring them back:
/// the H200 tuning runs of bench/results/multigpu-h200/run4 timed the same config 8% apart.
pub const WARM_FLOOR: Duration = Duration::from_millis(10);
/// The most extra warm-up runs the floor may add (a kernel of 1 µs stops here, at ~1 ms).
pub const WARM_FLOOR_MAX_RUNS: usize = 1000;

/// Runs `work` `warmup` times untimed (and on, until [`WARM_FLOOR`] has passed, when `warmup`
/// is not 0: `warmup: 0` times a cold first run), then `iters` times each between two events
/// on `stream`; returns the statistics. `work(i)` gets the repetition index so callers can
/// rotate inputs.
pub fn time_on_stream(stream: &Stream, repeat: Repeat, mut work: impl FnMut(usize) -> Result<()>) -> Result<Stats> {
    if repeat.iters == 0 {
        return Err(Error::InvalidConfig { op: "time_on_stream", why: "iters must be at least 1".into() });
    }
    let start = Instant::now();
    for i in 0..repeat.warmup {
        work(i)?;
    }
    stream.synchronize()?;
    if repeat.warmup > 0 {
        let mut i = repeat.warmup;
        while start.elapsed() < WARM_FLOOR && i < repeat.warmup + WARM_FLOOR_MAX_RUNS {
            work(i)?;
            stream.synchronize()?;
            i += 1;
        }
    }
    let mut samples = Vec::with_capacity(repeat.iters);
    for i in 0..repeat.iters {
        let t = EventTimer::start(stream)?;
        work(i)?;
        samples.push(t.stop(stream)?);
    }
    Ok(Stats::from_samples(&samples).expect("event timings are finite and iters >= 1"))
}

/// Calls per sample of [`time_queued`].
pub const QUEUE: usize = 10;

/// The median time per call, in ms, of `work` run [`QUEUE`] times back to back between two
/// events ([`time_on_stream`] around each batch): what a call costs in a stream of calls, the
/// host's launch latency hidden behind the previous call. `work(k)` gets the call's index.
pub fn time_queued(stream: &Stream, repeat: Repeat, mut work: impl FnMut(usize) -> Result<()>) -> Result<f64> {
    let st = time_on_stream(stream, repeat, |i| (0..QUEUE).try_for_each(|j| work(i * QUEUE + j)))?;
    Ok(st.median_ms / QUEUE as f64)
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

    #[test]
    fn queued_time_is_per_call_and_indexes_every_call() {
        let s = ferrotune::Stream::Cpu(ferrotune::Cpu::new(1).unwrap());
        let mut seen = Vec::new();
        let ms = time_queued(&s, Repeat { warmup: 0, iters: 2 }, |k| {
            seen.push(k);
            std::thread::sleep(Duration::from_millis(1));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, (0..2 * QUEUE).collect::<Vec<_>>());
        // About 1 ms a call; a batch's total would be QUEUE times that.
        assert!((1.0..QUEUE as f64).contains(&ms), "{ms} ms per call");
    }

    #[test]
    fn a_warm_up_lasts_the_floor_and_a_cold_run_stays_cold() {
        let s = ferrotune::Stream::Cpu(ferrotune::Cpu::new(1).unwrap());
        let mut calls = 0;
        time_on_stream(&s, Repeat { warmup: 0, iters: 3 }, |_| {
            calls += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(calls, 3, "warmup 0: no warm-up at all");
        // 1 ms a run: the 10 ms floor takes about 10 runs beyond the one asked for (at most
        // 10; fewer where a loaded machine lets each sleep run long, so the lower bound only
        // asks that the warm-up went past the one run asked for).
        let (mut calls, t) = (0, Instant::now());
        time_on_stream(&s, Repeat { warmup: 1, iters: 2 }, |_| {
            calls += 1;
            std::thread::sleep(Duration::from_millis(1));
            Ok(())
        })
        .unwrap();
        assert!(t.elapsed() >= WARM_FLOOR, "{:?}", t.elapsed());
        assert!((1 + 2 + 1..=1 + 2 + 12).contains(&calls), "{calls} runs");
        // A run too short for the floor stops at the cap.
        let mut calls = 0;
        time_on_stream(&s, Repeat { warmup: 2, iters: 1 }, |_| {
            calls += 1;
            Ok(())
        })
        .unwrap();
        assert!(calls <= 2 + WARM_FLOOR_MAX_RUNS + 1, "{calls} runs");
    }
}
