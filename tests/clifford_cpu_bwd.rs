//! The Clifford CPU backward on the row loops' block edges, in every dtype: N of one feature,
//! below one lane block (64), one block plus one, several blocks and a partial one (odd), B = 1
//! and more rows than one task; with and without the norm. f32 against central differences of
//! the float64 reference forward (sampled elements, block edges included); f16 and bf16 against the f32 backward of the same (rounded)
//! inputs, so that their own paths (block conversions, the lane blocks' gates and densities)
//! are checked element by element. Outputs are poisoned first.

use ferrotune::ops::clifford::{Clifford, fused_gelu_sgp_norm_backward};
use ferrotune::{Buffer, Scalar, bf16, f16};
use ferrotune_testkit::clifford_ref as r;
use ferrotune_testkit::{Rng, cpu_backend, poison};

/// `(dx, dy, dw)` as f64.
type Grads = [Vec<f64>; 3];

fn f64s<T: Scalar>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| x.to_f32() as f64).collect()
}

/// The operands of `p` (seed `seed`) in `T`: x, y in [-2, 2], w in [-1, 1], the output's
/// gradient in [-1, 1].
fn operands<T: Scalar>(p: &Clifford, seed: u64) -> [Vec<T>; 4] {
    let mut rng = Rng::new(seed);
    let len = p.mv_len().unwrap();
    let wl = p.sgp_weights_len().unwrap();
    [rng.vec(len, -2.0, 2.0), rng.vec(len, -2.0, 2.0), rng.vec(wl, -1.0, 1.0), rng.vec(len, -1.0, 1.0)]
}

fn backward<T: Scalar>(p: &Clifford, [x, y, w, go]: &[Vec<T>; 4]) -> Grads {
    let be = cpu_backend();
    let s = be.stream();
    let up = |v: &[T]| Buffer::from_slice(&s, v).unwrap();
    let (bx, by, bw, bg) = (up(x), up(y), up(w), up(go));
    let mut dx = up(&vec![poison::<T>(); x.len()]);
    let mut dy = up(&vec![poison::<T>(); y.len()]);
    let mut dw = up(&vec![poison::<T>(); w.len()]);
    let mut ws = Buffer::<f32>::zeros(&s, 0).unwrap();
    let (xa, ya, wa, ga) = (bx.all(), by.all(), bw.all(), bg.all());
    let (dxa, dya, dwa) = (&mut dx.all_mut(), &mut dy.all_mut(), &mut dw.all_mut());
    fused_gelu_sgp_norm_backward(&s, p, &xa, &ya, &wa, &ga, dxa, dya, dwa, &mut ws).unwrap();
    [f64s(&dx.to_vec(&s).unwrap()), f64s(&dy.to_vec(&s).unwrap()), f64s(&dw.to_vec(&s).unwrap())]
}

/// `got` against `want`, each element within `rel` of the tensor's largest |want|.
fn close(what: &str, got: &[f64], want: &[f64], rel: f64) -> Result<(), String> {
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-12);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.is_nan() || (g - w).abs() > rel * scale {
            return Err(format!("{what}[{i}]: got {g:e}, want {w:e} (scale {scale:e})"));
        }
    }
    Ok(())
}

/// The shapes: (dim, B, N, normalize).
const SHAPES: [(u32, usize, usize, bool); 8] = [
    (2, 1, 1, true),
    (3, 2, 1, false),
    (2, 3, 63, true),
    (3, 1, 65, true),
    (2, 2, 65, false),
    (3, 2, 131, true),
    (2, 1, 193, true),
    (3, 19, 7, true),
];

#[test]
fn cpu_backward_f32_block_edges_match_finite_differences() {
    for (dim, b, n, normalize) in SHAPES {
        let p = Clifford::new(dim, b, n, normalize);
        let ops = operands::<f32>(&p, 11 + n as u64);
        let got = backward(&p, &ops);
        let [x, y, w, go] = [0, 1, 2, 3].map(|i| f64s(&ops[i]));
        // Every element was written (outputs were poisoned).
        assert!(got.iter().all(|t| t.iter().all(|v| v.is_finite())), "{p:?}: an output left unwritten");
        let loss = |x: &[f64], y: &[f64], w: &[f64]| {
            let (o, _) = r::sgp_forward(p.dim, p.b, p.n, x, y, w, p.normalize);
            o.iter().zip(&go).map(|(a, b)| a * b).sum::<f64>()
        };
        // Central differences (h = 1e-5) of sampled elements: the first and last of every
        // plane and row, the block edges (features 63, 64, 65), and a spread of others.
        let picks = |len: usize| -> Vec<usize> {
            let mut v: Vec<usize> = (0..len).step_by((len / 12).max(1)).collect();
            for f in [0, 62, 63, 64, 65, n - 1] {
                v.extend((f..len).step_by(n).filter(|_| f < n).take(4));
            }
            v.push(len - 1);
            v.sort_unstable();
            v.dedup();
            v
        };
        let mut args = [x, y, w];
        for (k, what) in ["dx", "dy", "dw"].iter().enumerate() {
            let scale = got[k].iter().fold(0.0f64, |m, v| m.max(v.abs()));
            for i in picks(args[k].len()) {
                let v = args[k][i];
                args[k][i] = v + 1e-5;
                let up = loss(&args[0], &args[1], &args[2]);
                args[k][i] = v - 1e-5;
                let down = loss(&args[0], &args[1], &args[2]);
                args[k][i] = v;
                let want = (up - down) / 2e-5;
                let g = got[k][i];
                assert!(!g.is_nan() && (g - want).abs() <= 1e-4 * scale, "{p:?} {what}[{i}]: got {g:e}, want {want:e}");
            }
        }
    }
}

/// The 16-bit backward against the f32 one on the same inputs: within `rel` (its output's
/// rounding, and dw's sums of rounded terms) of each tensor's largest value.
fn sixteen_bit_matches_f32<T: Scalar>(rel: f64) {
    for (dim, b, n, normalize) in SHAPES {
        let p = Clifford::new(dim, b, n, normalize);
        let ops = operands::<T>(&p, 23 + n as u64);
        let wide: [Vec<f32>; 4] = [0, 1, 2, 3].map(|i| ops[i].iter().map(|v| v.to_f32()).collect());
        let (got, want) = (backward(&p, &ops), backward(&p, &wide));
        for (k, what) in ["dx", "dy", "dw"].iter().enumerate() {
            let res = close(what, &got[k], &want[k], rel);
            assert!(res.is_ok(), "{:?} {p:?}: {}", T::DTYPE, res.unwrap_err());
        }
    }
}

#[test]
fn cpu_backward_f16_matches_f32() {
    sixteen_bit_matches_f32::<f16>(2e-3);
}

#[test]
fn cpu_backward_bf16_matches_f32() {
    sixteen_bit_matches_f32::<bf16>(1.6e-2);
}

#[test]
fn the_block_edge_check_can_fail() {
    // One gradient element off by 0.1% of the largest is caught.
    let p = Clifford::new(3, 1, 65, true);
    let ops = operands::<f32>(&p, 5);
    let got = backward(&p, &ops);
    let mut bad = got[0].clone();
    let scale = bad.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    bad[64 + 65] += 1e-3 * scale;
    assert!(close("dx", &bad, &got[0], 1e-4).is_err());
    assert!(close("dx", &got[0], &got[0], 1e-4).is_ok());
}
