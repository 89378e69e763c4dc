//! Reduction maths shared by the GPU block reduction and the CPU backend: the order in which
//! partial sums are combined.

/// Adds a thread's four lane accumulators pairwise.
#[inline(always)]
pub fn combine(acc: [f32; 4]) -> f32 {
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// Butterfly tree over 32 lanes: `exchange(v, mask)` returns the value of lane `lane ^ mask`
/// (a warp shuffle on the GPU). After it every lane holds the sum.
#[inline(always)]
pub fn warp_tree(mut v: f32, exchange: impl Fn(f32, u32) -> f32) -> f32 {
    let mut m = 16;
    while m > 0 {
        v += exchange(v, m);
        m /= 2;
    }
    v
}

/// CPU path: sum of a slice in four interleaved f32 accumulators (the GPU thread's order).
pub fn sum_slice(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; 4];
    let chunks = x.chunks_exact(4);
    let tail = chunks.remainder();
    for c in chunks {
        for l in 0..4 {
            acc[l] += c[l];
        }
    }
    for &t in tail {
        acc[0] += t;
    }
    combine(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warp_tree_sums_32_lanes() {
        // Simulate 32 lanes: each step exchanges with lane ^ mask.
        let mut lanes: [f32; 32] = core::array::from_fn(|i| i as f32);
        let mut m = 16;
        while m > 0 {
            let prev = lanes;
            for (i, l) in lanes.iter_mut().enumerate() {
                *l += prev[i ^ m as usize];
            }
            m /= 2;
        }
        assert!(lanes.iter().all(|&l| l == 496.0));
        // The closure form gives the same when every lane holds the same value.
        assert_eq!(warp_tree(1.0, |v, _| v), 32.0);
    }

    #[test]
    fn sum_slice_matches_exact_sum_of_small_integers() {
        let x: [f32; 11] = core::array::from_fn(|i| i as f32);
        assert_eq!(sum_slice(&x), 55.0);
        assert_eq!(sum_slice(&[]), 0.0);
    }
}
