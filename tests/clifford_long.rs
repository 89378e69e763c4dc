//! Long rows (N = 100,000): the per-row sums of the Clifford norm must stay accurate in f32.
//! The case is the bench's `d3 fwdbwd B16 N100000` (seed 5), whose check once failed: the GPU
//! gave dx = -4.2681646 at row 1, feature 68883, the CPU backward (the bench's reference)
//! -4.2688890, and a float64 central difference says -4.2681644 — the CPU's sequential f32 sum
//! over 100,000 features was the wrong one (now blocked, `clifford::cpu::SUM_BLOCK`).

use ferrotune::Buffer;
use ferrotune::ops::clifford::{Clifford, fused_gelu_sgp_norm_backward};
use ferrotune_testkit::clifford_ref as r;
use ferrotune_testkit::{Rng, cpu_backend};

#[test]
fn cpu_backward_long_rows_match_finite_differences() {
    let (b, n, c, row) = (16usize, 100_000usize, 8usize, 1usize);
    let full = Clifford::new(3, b, n, true);
    // The bench's operands (benches/clifford.rs `operands`, seed 5), then its sampled row 1.
    let mut rng = Rng::new(5);
    let len = full.mv_len().unwrap();
    let (hx, hy, hg): (Vec<f32>, Vec<f32>, Vec<f32>) =
        (rng.vec(len, -2.0, 2.0), rng.vec(len, -2.0, 2.0), rng.vec(len, -1.0, 1.0));
    let w: Vec<f32> = rng.vec(full.sgp_weights_len().unwrap(), -1.0, 1.0);
    let pick = |t: &[f32]| -> Vec<f32> {
        (0..c).flat_map(|cc| t[(cc * b + row) * n..(cc * b + row + 1) * n].to_vec()).collect()
    };
    let (x, y, go) = (pick(&hx), pick(&hy), pick(&hg));
    let p = Clifford::new(3, 1, n, true);
    let be = cpu_backend();
    let s = be.stream();
    let (bx, by, bw, bg) = (
        Buffer::from_slice(&s, &x).unwrap(),
        Buffer::from_slice(&s, &y).unwrap(),
        Buffer::from_slice(&s, &w).unwrap(),
        Buffer::from_slice(&s, &go).unwrap(),
    );
    let (mut dx, mut dy) = (Buffer::<f32>::zeros(&s, x.len()).unwrap(), Buffer::<f32>::zeros(&s, x.len()).unwrap());
    let mut dw = Buffer::<f32>::zeros(&s, w.len()).unwrap();
    let mut ws = Buffer::<f32>::zeros(&s, 0).unwrap();
    fused_gelu_sgp_norm_backward(
        &s,
        &p,
        &bx.all(),
        &by.all(),
        &bw.all(),
        &bg.all(),
        &mut dx.all_mut(),
        &mut dy.all_mut(),
        &mut dw.all_mut(),
        &mut ws,
    )
    .unwrap();
    let dx = dx.to_vec(&s).unwrap();
    let f = |v: &[f32]| v.iter().map(|&a| a as f64).collect::<Vec<f64>>();
    let (xf, yf, wf, gf) = (f(&x), f(&y), f(&w), f(&go));
    let loss = |x: &[f64]| {
        let (o, _) = r::sgp_forward(p.dim, p.b, p.n, x, &yf, &wf, true);
        o.iter().zip(&gf).map(|(a, b)| a * b).sum::<f64>()
    };
    let scale = dx.iter().fold(0.0f64, |m, v| m.max(v.abs() as f64));
    let (i, h) = (68_883, 1e-4);
    let (mut up, mut down) = (xf.clone(), xf);
    up[i] += h;
    down[i] -= h;
    let want = (loss(&up) - loss(&down)) / (2.0 * h);
    let got = dx[i] as f64;
    // The bench's check: 1e-4 of the largest |dx|; the sequential sum was off by 1.2e-4.
    assert!((got - want).abs() <= 2e-5 * scale, "dx[{i}]: got {got:e}, want {want:e} (scale {scale:e})");
}
