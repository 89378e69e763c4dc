//! A batched GEMM split over several devices in proportion to their measured speed: each
//! device times one probe of the problem (`measure_speeds`), `WorkSplit` turns the speeds
//! into contiguous batch ranges, and `batched_matmul_split` uploads each device's range,
//! runs it there (all devices at once: every launch is queued before any result is read)
//! and gathers the results into one host array.

use std::time::Instant;

use crate::backend::Backend;
use crate::buffer::{Buffer, Scalar};
use crate::error::{Error, Result};
use crate::ops::gemm::batched_matmul;
use crate::split::WorkSplit;

/// Relative speed of each backend on a `probe_batch x m x n x k` batched GEMM of `T`:
/// 1 / (median of `iters` timed runs after one warm-up), in runs per ms.
pub fn measure_speeds<T: Scalar>(
    backends: &[Backend],
    (probe_batch, m, n, k): (usize, usize, usize, usize),
    iters: usize,
) -> Result<Vec<f64>> {
    let mut speeds = Vec::new();
    for b in backends {
        let s = b.new_stream()?;
        let a = Buffer::<T>::from_slice(&s, &vec![T::from_f32(0.5); probe_batch * m * k])?;
        let bb = Buffer::<T>::from_slice(&s, &vec![T::from_f32(0.25); probe_batch * k * n])?;
        let mut d = Buffer::<f32>::zeros(&s, probe_batch * m * n)?;
        batched_matmul::<T, f32>(&s, &a.all(), &bb.all(), &mut d.all_mut(), probe_batch, m, n, k)?;
        s.synchronize()?;
        let mut t = Vec::new();
        for _ in 0..iters.max(1) {
            let t0 = Instant::now();
            batched_matmul::<T, f32>(&s, &a.all(), &bb.all(), &mut d.all_mut(), probe_batch, m, n, k)?;
            s.synchronize()?;
            t.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        t.sort_by(f64::total_cmp);
        speeds.push(1.0 / t[t.len() / 2].max(1e-6));
    }
    Ok(speeds)
}

/// `d[i] = a[i] b[i]` for `batch` row-major products (`a`: batch x m x k, `b`: batch x k x n,
/// `d`: batch x m x n, on the host), batch entries `plan.ranges[j]` computed on
/// `backends[j]`.
#[allow(clippy::too_many_arguments)]
pub fn batched_matmul_split<T: Scalar>(
    backends: &[Backend],
    plan: &WorkSplit,
    a: &[T],
    b: &[T],
    d: &mut [f32],
    (batch, m, n, k): (usize, usize, usize, usize),
) -> Result<()> {
    const OP: &str = "batched_matmul_split";
    if plan.ranges.len() != backends.len() || plan.total != batch {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!(
                "the split has {} ranges over {} items for {} devices and a batch of {batch}",
                plan.ranges.len(),
                plan.total,
                backends.len()
            ),
        });
    }
    for (what, got, want) in
        [("a", a.len(), batch * m * k), ("b", b.len(), batch * k * n), ("d", d.len(), batch * m * n)]
    {
        if got != want {
            return Err(Error::ShapeMismatch { op: OP, what, expected: want, got });
        }
    }
    // Queue every device's share first, then read the results back: the devices overlap.
    let mut queued = Vec::new();
    for (be, r) in backends.iter().zip(&plan.ranges) {
        if r.is_empty() {
            continue;
        }
        let s = be.new_stream()?;
        let ab = Buffer::from_slice(&s, &a[r.start * m * k..r.end * m * k])?;
        let bb = Buffer::from_slice(&s, &b[r.start * k * n..r.end * k * n])?;
        let mut db = Buffer::<f32>::zeros(&s, r.len() * m * n)?;
        batched_matmul::<T, f32>(&s, &ab.all(), &bb.all(), &mut db.all_mut(), r.len(), m, n, k)?;
        queued.push((s, r.clone(), db));
    }
    for (s, r, db) in queued {
        d[r.start * m * n..r.end * m * n].copy_from_slice(&db.to_vec(&s)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu() -> Backend {
        Backend::new(crate::BackendChoice::Cpu).unwrap()
    }

    #[test]
    fn a_split_batch_equals_the_unsplit_one_for_any_proportions() {
        let (batch, m, n, k) = (7, 5, 3, 4);
        let a: Vec<f32> = (0..batch * m * k).map(|i| (i % 13) as f32 - 6.0).collect();
        let b: Vec<f32> = (0..batch * k * n).map(|i| (i % 7) as f32 * 0.5).collect();
        let one = cpu();
        let mut want = vec![0f32; batch * m * n];
        batched_matmul_split(
            std::slice::from_ref(&one),
            &WorkSplit::new(batch, &[1.0], 1).unwrap(),
            &a,
            &b,
            &mut want,
            (batch, m, n, k),
        )
        .unwrap();
        // Spot-check the unsplit result against the definition.
        let at = |bi: usize, i: usize, j: usize| {
            (0..k).map(|p| a[bi * m * k + i * k + p] * b[bi * k * n + p * n + j]).sum::<f32>()
        };
        assert_eq!(want[6 * m * n + 4 * n + 2], at(6, 4, 2));
        let backends = [cpu(), cpu(), cpu()];
        for speeds in [[1.0, 1.0, 1.0], [5.0, 1.0, 0.0], [0.0, 0.0, 1.0]] {
            let plan = WorkSplit::new(batch, &speeds, 1).unwrap();
            let mut got = vec![f32::NAN; batch * m * n];
            batched_matmul_split(&backends, &plan, &a, &b, &mut got, (batch, m, n, k)).unwrap();
            assert_eq!(got, want, "{speeds:?}");
        }
        let speeds = measure_speeds::<f32>(&backends[..2], (1, m, n, k), 2).unwrap();
        assert!(speeds.iter().all(|s| s.is_finite() && *s > 0.0), "{speeds:?}");
    }

    #[test]
    fn mismatched_plans_and_lengths_are_typed_errors() {
        let backends = [cpu(), cpu()];
        let plan = WorkSplit::new(2, &[1.0, 1.0], 1).unwrap();
        let (a, b, mut d) = (vec![0f32; 2 * 4], vec![0f32; 2 * 4], vec![0f32; 2 * 4]);
        let e = batched_matmul_split(&backends[..1], &plan, &a, &b, &mut d, (2, 2, 2, 2)).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig { .. }), "{e}");
        let e = batched_matmul_split(&backends, &plan, &a[..7], &b, &mut d, (2, 2, 2, 2)).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { what: "a", .. }), "{e}");
        batched_matmul_split(&backends, &plan, &a, &b, &mut d, (2, 2, 2, 2)).unwrap();
    }
}
