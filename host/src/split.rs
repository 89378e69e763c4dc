//! Splitting work over devices in proportion to their measured speed (the seeds'
//! `balanceWorkload`): `total` items (batch entries, rows, elements) become one contiguous
//! range per device, sized by largest remainders so the sizes sum to `total` exactly and
//! each is within one item (one `grain`) of its exact share.

use std::fmt;
use std::ops::Range;

use crate::error::{Error, Result};

/// One contiguous range of items per device, in device order.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkSplit {
    pub total: usize,
    /// Relative speeds the split follows (e.g. items per ms measured on each device).
    pub speeds: Vec<f64>,
    pub ranges: Vec<Range<usize>>,
}

impl WorkSplit {
    /// Splits `total` items over devices of relative `speeds`, in multiples of `grain`
    /// items (the last range takes the remainder of a partial grain). A device of speed 0
    /// gets nothing; speeds must be finite and not all 0.
    pub fn new(total: usize, speeds: &[f64], grain: usize) -> Result<WorkSplit> {
        let bad = |why: String| Error::InvalidConfig { op: "work split", why };
        if speeds.is_empty() {
            return Err(Error::EmptyInput { op: "work split", what: "device speeds" });
        }
        if grain == 0 {
            return Err(bad("grain must be at least 1 item".into()));
        }
        if let Some(s) = speeds.iter().find(|s| !s.is_finite() || **s < 0.0) {
            return Err(bad(format!("speed {s} is not a finite non-negative number")));
        }
        let sum: f64 = speeds.iter().sum();
        if sum <= 0.0 {
            return Err(bad("every device has speed 0".into()));
        }
        // Whole grains by largest remainder; the partial grain (if any) goes to the last
        // range, so ranges stay contiguous and grain-aligned at their starts.
        let grains = total / grain;
        let exact: Vec<f64> = speeds.iter().map(|s| s / sum * grains as f64).collect();
        let mut counts: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
        let mut left = grains - counts.iter().sum::<usize>();
        let mut order: Vec<usize> = (0..speeds.len()).filter(|&i| speeds[i] > 0.0).collect();
        // Largest fractional part first; ties to the lower index (deterministic).
        order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())).then(a.cmp(&b)));
        for &i in order.iter().cycle() {
            if left == 0 {
                break;
            }
            counts[i] += 1;
            left -= 1;
        }
        let mut ranges = Vec::with_capacity(speeds.len());
        let mut start = 0;
        for &c in &counts {
            ranges.push(start..start + c * grain);
            start += c * grain;
        }
        let partial = total - start;
        if partial > 0 {
            let last = (0..speeds.len()).rev().find(|&i| speeds[i] > 0.0).unwrap_or(speeds.len() - 1);
            ranges[last].end += partial;
            for r in ranges.iter_mut().skip(last + 1) {
                *r = r.start + partial..r.end + partial;
            }
        }
        Ok(WorkSplit { total, speeds: speeds.to_vec(), ranges })
    }

    /// Items given to each device.
    pub fn sizes(&self) -> Vec<usize> {
        self.ranges.iter().map(|r| r.len()).collect()
    }
}

impl fmt::Display for WorkSplit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sum: f64 = self.speeds.iter().sum();
        for (i, (r, s)) in self.ranges.iter().zip(&self.speeds).enumerate() {
            let share = if self.total == 0 { 0.0 } else { r.len() as f64 / self.total as f64 * 100.0 };
            writeln!(
                f,
                "  device {i}: items {}..{} ({} = {share:.1}%, speed share {:.1}%)",
                r.start,
                r.end,
                r.len(),
                s / sum * 100.0
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn equal_speeds_split_evenly_and_uneven_ones_in_proportion() {
        assert_eq!(WorkSplit::new(10, &[1.0, 1.0], 1).unwrap().ranges, [0..5, 5..10]);
        assert_eq!(WorkSplit::new(9, &[2.0, 1.0], 1).unwrap().ranges, [0..6, 6..9]);
        assert_eq!(WorkSplit::new(10, &[1.0, 0.0, 1.0], 1).unwrap().sizes(), [5, 0, 5]);
        assert_eq!(WorkSplit::new(100, &[3.0, 1.0], 8).unwrap().ranges, [0..72, 72..100]);
    }

    #[test]
    fn zero_and_one_item_and_bad_speeds() {
        assert_eq!(WorkSplit::new(0, &[1.0, 2.0], 1).unwrap().sizes(), [0, 0]);
        let one = WorkSplit::new(1, &[1.0, 2.0], 1).unwrap();
        assert_eq!(one.sizes(), [0, 1], "the single item goes to the faster device");
        assert_eq!(WorkSplit::new(1, &[1.0, 1.0], 4).unwrap().sizes(), [0, 1], "a partial grain goes last");
        assert!(matches!(WorkSplit::new(5, &[], 1), Err(Error::EmptyInput { .. })));
        for bad in [vec![0.0, 0.0], vec![f64::NAN, 1.0], vec![-1.0, 2.0], vec![f64::INFINITY]] {
            assert!(matches!(WorkSplit::new(5, &bad, 1), Err(Error::InvalidConfig { .. })), "{bad:?}");
        }
        assert!(WorkSplit::new(5, &[1.0], 0).is_err());
        let shown = WorkSplit::new(9, &[2.0, 1.0], 1).unwrap().to_string();
        assert!(shown.contains("device 0: items 0..6 (6 = 66.7%"), "{shown}");
    }

    proptest! {
        #[test]
        fn splits_are_contiguous_sum_to_total_and_follow_the_speeds(
            total in 0usize..100_000,
            speeds in proptest::collection::vec(0.0f64..100.0, 1..8),
            grain in 1usize..64,
        ) {
            prop_assume!(speeds.iter().sum::<f64>() > 0.0);
            let p = WorkSplit::new(total, &speeds, grain).unwrap();
            prop_assert_eq!(p.ranges.len(), speeds.len());
            prop_assert_eq!(p.ranges[0].start, 0);
            prop_assert_eq!(p.ranges.last().unwrap().end, total);
            for w in p.ranges.windows(2) {
                prop_assert_eq!(w[0].end, w[1].start);
            }
            let sum: f64 = speeds.iter().sum();
            for (r, s) in p.ranges.iter().zip(&speeds) {
                let exact = s / sum * total as f64;
                // Within one grain of the exact share (plus the partial grain on the last).
                prop_assert!((r.len() as f64 - exact).abs() <= 2.0 * grain as f64, "{r:?} vs {exact}");
                if *s == 0.0 && r.end < total {
                    prop_assert_eq!(r.len(), 0);
                }
            }
        }
    }
}
