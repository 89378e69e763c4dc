//! Dividing a tuning run: the order of the shared queue the GPUs of one machine take shapes
//! from (`costliest_first`, used by `parallel.rs`), and a job array's static `--shard I/N`
//! (`partition`: the costliest first, each to the least-loaded part, ties to the lower
//! index, each part keeping the run's order). Shapes of one profile bucket always travel
//! together, in the run's order, so one session tunes the first and the rest find its entry,
//! as a one-GPU run does. The same shape list always gives the same order and parts.

use std::fmt;
use std::str::FromStr;

use ferrotune_profile::bucket_shape;

use crate::family;
use crate::protocol::Shape;

/// Splits items of `costs` into `parts` groups of near-equal total cost; each group lists
/// item indices in increasing order. Deterministic (no hashing, no clock).
pub fn partition(costs: &[f64], parts: usize) -> Vec<Vec<usize>> {
    let parts = parts.max(1);
    let mut order: Vec<usize> = (0..costs.len()).collect();
    let cost = |i: usize| if costs[i].is_finite() && costs[i] > 0.0 { costs[i] } else { 0.0 };
    order.sort_by(|&a, &b| cost(b).total_cmp(&cost(a)).then(a.cmp(&b)));
    let mut load = vec![0.0f64; parts];
    let mut out = vec![Vec::new(); parts];
    for i in order {
        // Least loaded part; on equal load the one with fewer items, then the lower index.
        let p = (0..parts)
            .min_by(|&x, &y| load[x].total_cmp(&load[y]).then(out[x].len().cmp(&out[y].len())).then(x.cmp(&y)))
            .unwrap_or(0);
        load[p] += cost(i);
        out[p].push(i);
    }
    for o in &mut out {
        o.sort_unstable();
    }
    out
}

/// A rough cost of tuning a shape: its FLOPs (GEMM) or bytes moved (elementwise).
pub fn shape_cost(s: &Shape) -> f64 {
    family::flops(s).unwrap_or_else(|| family::min_bytes(s))
}

/// The indices of `shapes` grouped by profile bucket (op, dtype, layout and the bucket of
/// the dimensions), groups in order of first appearance, each in the run's order.
pub fn bucket_groups(shapes: &[Shape]) -> Vec<Vec<usize>> {
    let key = |s: &Shape| (s.op_name(), s.dtype_name(), s.layout(), bucket_shape(&s.dims()));
    let mut keys = Vec::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, s) in shapes.iter().enumerate() {
        let k = key(s);
        match keys.iter().position(|x| *x == k) {
            Some(g) => groups[g].push(i),
            None => {
                keys.push(k);
                groups.push(vec![i]);
            }
        }
    }
    groups
}

fn group_cost(shapes: &[Shape], g: &[usize]) -> f64 {
    g.iter().map(|&i| shape_cost(&shapes[i])).filter(|c| c.is_finite() && *c > 0.0).sum()
}

/// The order of the device-parallel queue: the bucket groups, costliest first (a rough
/// estimate: [`shape_cost`] summed), ties in the run's order.
pub fn costliest_first(shapes: &[Shape]) -> Vec<Vec<usize>> {
    let mut groups = bucket_groups(shapes);
    let costs: Vec<f64> = groups.iter().map(|g| group_cost(shapes, g)).collect();
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by(|&a, &b| costs[b].total_cmp(&costs[a]).then(a.cmp(&b)));
    order.into_iter().map(|g| std::mem::take(&mut groups[g])).collect()
}

/// The shapes of each of `parts` parts: the bucket groups spread by [`partition`].
pub fn split_shapes(shapes: &[Shape], parts: usize) -> Vec<Vec<Shape>> {
    let groups = bucket_groups(shapes);
    let costs: Vec<f64> = groups.iter().map(|g| group_cost(shapes, g)).collect();
    partition(&costs, parts)
        .into_iter()
        .map(|gs| {
            let mut idx: Vec<usize> = gs.into_iter().flat_map(|g| groups[g].iter().copied()).collect();
            idx.sort_unstable();
            idx.into_iter().map(|i| shapes[i]).collect()
        })
        .collect()
}

/// `--shard I/N`: part `index` (0-based) of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// This shard's shapes.
    pub fn select(&self, shapes: &[Shape]) -> Vec<Shape> {
        split_shapes(shapes, self.count).swap_remove(self.index)
    }
}

impl FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let (i, n) = s.split_once('/').ok_or_else(|| format!("shard '{s}' is not I/N (e.g. 0/4)"))?;
        let num = |x: &str| x.trim().parse::<usize>().map_err(|_| format!("shard '{s}': '{x}' is not a number"));
        let (index, count) = (num(i)?, num(n)?);
        if count == 0 || index >= count {
            return Err(format!("shard '{s}': need 0 <= I < N (I is 0-based, e.g. 0/4 .. 3/4)"));
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// `CUDA_VISIBLE_DEVICES` for a worker that should see only ordinal `device` of this
/// process: the ordinal itself, or the matching entry of the parent's own list.
pub fn visible_devices_for(parent: Option<&str>, device: usize) -> Result<String, String> {
    match parent.map(str::trim).filter(|p| !p.is_empty()) {
        None => Ok(device.to_string()),
        Some(p) => p.split(',').map(str::trim).nth(device).map(str::to_string).ok_or_else(|| {
            format!("device {device} is not in CUDA_VISIBLE_DEVICES={p} (ordinals count from 0 within that list)")
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::GemmDtype;
    use ferrotune::{DType, ElemOp};
    use proptest::prelude::*;

    fn shapes() -> Vec<Shape> {
        let mut v: Vec<Shape> =
            [1 << 10, 1 << 20, 1 << 24].iter().map(|&n| Shape::elem(ElemOp::ALL[0], DType::F32, n)).collect();
        for m in [512, 1000, 4096, 8192] {
            v.push(Shape::Gemm(crate::GemmShape {
                dtype: GemmDtype::ALL[0],
                m,
                n: 1024,
                k: 777,
                batch: 1,
                a: crate::protocol::layout_from_code('r').unwrap(),
                b: crate::protocol::layout_from_code('c').unwrap(),
            }));
        }
        v
    }

    #[test]
    fn shards_partition_the_shapes_stably() {
        let all = shapes();
        for n in 1..=all.len() + 2 {
            let parts: Vec<Vec<Shape>> = (0..n).map(|i| Shard { index: i, count: n }.select(&all)).collect();
            let mut seen: Vec<String> = parts.iter().flatten().map(|s| s.label()).collect();
            seen.sort();
            let mut want: Vec<String> = all.iter().map(|s| s.label()).collect();
            want.sort();
            assert_eq!(seen, want, "{n} shards: every shape exactly once");
            let again: Vec<Vec<Shape>> = (0..n).map(|i| Shard { index: i, count: n }.select(&all)).collect();
            assert_eq!(parts, again, "the same list gives the same shards");
        }
    }

    #[test]
    fn the_queue_takes_the_costliest_buckets_first_and_keeps_a_bucket_together() {
        // GEMM m = 512 and 1000 share the bucket m = 512 (indices 3 and 4).
        let all = shapes();
        assert_eq!(costliest_first(&all), [vec![6], vec![5], vec![3, 4], vec![2], vec![1], vec![0]]);
        assert_eq!(bucket_groups(&all).len(), 6);
        assert!(costliest_first(&[]).is_empty());
        let twice: Vec<Shape> = all.iter().chain(&all).copied().collect();
        assert_eq!(costliest_first(&twice)[0], [6, 13], "repeats join their bucket, in run order");
        for n in 1..=4 {
            let parts: Vec<Vec<Shape>> = (0..n).map(|i| Shard { index: i, count: n }.select(&all)).collect();
            assert!(parts.iter().any(|p| p.contains(&all[3]) && p.contains(&all[4])), "{n} shards");
        }
    }

    #[test]
    fn the_costliest_shapes_land_on_different_parts() {
        let p = partition(&[100.0, 1.0, 90.0, 1.0, 1.0], 2);
        assert_eq!(p, [vec![0], vec![1, 2, 3, 4]]);
        assert_eq!(partition(&[], 3), [Vec::<usize>::new(), vec![], vec![]]);
        assert_eq!(partition(&[1.0], 1), [vec![0]]);
        assert_eq!(partition(&[f64::NAN, 1.0, 1.0], 2), [vec![0, 1], vec![2]], "NaN costs count as 0");
        assert_eq!(partition(&[1.0, 1.0, 1.0, 1.0], 2), [vec![0, 2], vec![1, 3]]);
    }

    #[test]
    fn shard_flags_parse_and_reject_bad_ones() {
        assert_eq!("0/4".parse::<Shard>().unwrap(), Shard { index: 0, count: 4 });
        assert_eq!(" 3 / 4 ".parse::<Shard>().unwrap().to_string(), "3/4");
        for bad in ["4/4", "1/0", "1", "a/2", "1/b", "-1/2", ""] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn workers_see_one_device_of_the_parents_list() {
        assert_eq!(visible_devices_for(None, 1).unwrap(), "1");
        assert_eq!(visible_devices_for(Some(""), 0).unwrap(), "0");
        assert_eq!(visible_devices_for(Some("2,3"), 1).unwrap(), "3");
        assert_eq!(visible_devices_for(Some("GPU-abc, GPU-def"), 1).unwrap(), "GPU-def");
        assert!(visible_devices_for(Some("2,3"), 2).is_err());
    }

    proptest! {
        #[test]
        fn partitions_cover_every_item_once_and_balance_within_the_largest_cost(
            costs in proptest::collection::vec(0.0f64..1e6, 0..40),
            parts in 1usize..6,
        ) {
            let p = partition(&costs, parts);
            prop_assert_eq!(p.len(), parts);
            let mut all: Vec<usize> = p.iter().flatten().copied().collect();
            all.sort_unstable();
            prop_assert_eq!(all, (0..costs.len()).collect::<Vec<_>>());
            let loads: Vec<f64> = p.iter().map(|g| g.iter().map(|&i| costs[i]).sum()).collect();
            let max_cost = costs.iter().copied().fold(0.0, f64::max);
            let (lo, hi) = loads.iter().fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
            prop_assert!(hi - lo <= max_cost + 1e-6, "loads {loads:?}");
        }
    }
}
