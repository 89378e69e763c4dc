//! Search strategies (the order candidates are measured in) and budgets (when to stop).
//! Orders are deterministic for a given seed, so a resumed run walks the same path and finds
//! every candidate it already measured in the journal.

use std::str::FromStr;
use std::time::Duration;

/// How candidates are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Every candidate, in space order.
    Exhaustive,
    /// A seeded random sample.
    Random,
    /// Best-predicted first by the cost model (roofline + occupancy), measuring the top of the
    /// ranking until the budget or patience runs out.
    Model,
}

impl Strategy {
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Exhaustive => "exhaustive",
            Strategy::Random => "random",
            Strategy::Model => "model",
        }
    }
}

impl FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "exhaustive" => Ok(Strategy::Exhaustive),
            "random" => Ok(Strategy::Random),
            "model" => Ok(Strategy::Model),
            other => Err(format!("unknown strategy '{other}' (expected exhaustive, random or model)")),
        }
    }
}

/// When a shape's search stops (whichever comes first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budget {
    /// Candidates measured per shape (failed and invalid ones count).
    pub max_evals: Option<usize>,
    /// Wall time per shape.
    pub time_limit: Option<Duration>,
    /// Stop after this many measured candidates in a row without a 0.5% improvement.
    pub patience: Option<usize>,
}

/// A new best must beat the old by this factor to reset the patience counter.
pub const IMPROVEMENT: f64 = 0.995;

/// SplitMix64, for seeded shuffles.
pub(crate) fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The order in which to measure `n` candidates; `predict(i)` is the model's time for
/// candidate `i` (used by `Model` only).
pub fn order(strategy: Strategy, n: usize, seed: u64, predict: impl Fn(usize) -> f64) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    match strategy {
        Strategy::Exhaustive => {}
        Strategy::Random => {
            let mut s = seed;
            for i in (1..n).rev() {
                let j = (splitmix(&mut s) % (i as u64 + 1)) as usize;
                idx.swap(i, j);
            }
        }
        Strategy::Model => {
            let p: Vec<f64> = (0..n).map(&predict).collect();
            idx.sort_by(|&a, &b| p[a].total_cmp(&p[b]).then(a.cmp(&b)));
        }
    }
    idx
}

/// Tracks a search against its budget.
#[derive(Clone, Debug)]
pub struct Progress {
    budget: Budget,
    pub evals: usize,
    pub since_improvement: usize,
    pub best_ms: Option<f64>,
}

impl Progress {
    pub fn new(budget: Budget) -> Progress {
        Progress { budget, evals: 0, since_improvement: 0, best_ms: None }
    }

    /// Why the search must stop before the next candidate, if it must.
    pub fn stop_reason(&self, elapsed: Duration) -> Option<String> {
        if self.budget.max_evals.is_some_and(|m| self.evals >= m) {
            return Some(format!("budget of {} evaluations reached", self.evals));
        }
        if self.budget.time_limit.is_some_and(|t| elapsed >= t) {
            return Some(format!("time limit reached after {} evaluations", self.evals));
        }
        if self.budget.patience.is_some_and(|p| self.since_improvement >= p) {
            return Some(format!("no improvement in {} evaluations", self.since_improvement));
        }
        None
    }

    /// Records one evaluation (`None`: failed or invalid).
    pub fn record(&mut self, median_ms: Option<f64>) {
        self.evals += 1;
        match (median_ms, self.best_ms) {
            (Some(t), None) => {
                self.best_ms = Some(t);
                self.since_improvement = 0;
            }
            (Some(t), Some(b)) if t < b => {
                self.best_ms = Some(t);
                if t < b * IMPROVEMENT {
                    self.since_improvement = 0;
                } else {
                    self.since_improvement += 1;
                }
            }
            _ => self.since_improvement += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_are_permutations_and_deterministic() {
        for s in [Strategy::Exhaustive, Strategy::Random, Strategy::Model] {
            let o = order(s, 50, 7, |i| ((i * 37) % 50) as f64);
            let mut sorted = o.clone();
            sorted.sort();
            assert_eq!(sorted, (0..50).collect::<Vec<_>>(), "{s:?}");
            assert_eq!(o, order(s, 50, 7, |i| ((i * 37) % 50) as f64));
        }
        assert_ne!(order(Strategy::Random, 50, 7, |_| 0.0), order(Strategy::Random, 50, 8, |_| 0.0));
        let m = order(Strategy::Model, 5, 0, |i| [5.0, 1.0, 3.0, 2.0, 4.0][i]);
        assert_eq!(m, vec![1, 3, 2, 4, 0]);
    }

    #[test]
    fn budgets_stop_the_search() {
        let mut p = Progress::new(Budget { max_evals: Some(3), ..Budget::default() });
        for _ in 0..3 {
            assert!(p.stop_reason(Duration::ZERO).is_none());
            p.record(Some(1.0));
        }
        assert!(p.stop_reason(Duration::ZERO).unwrap().contains("budget"));

        let mut p = Progress::new(Budget { patience: Some(2), ..Budget::default() });
        p.record(Some(10.0));
        p.record(Some(9.0));
        p.record(Some(8.99)); // less than 0.5% better: counts as no improvement
        assert!(p.stop_reason(Duration::ZERO).is_none());
        p.record(None);
        assert!(p.stop_reason(Duration::ZERO).unwrap().contains("no improvement"));
        assert_eq!(p.best_ms, Some(8.99));

        let p = Progress::new(Budget { time_limit: Some(Duration::from_secs(1)), ..Budget::default() });
        assert!(p.stop_reason(Duration::from_millis(999)).is_none());
        assert!(p.stop_reason(Duration::from_secs(1)).is_some());
    }
}
