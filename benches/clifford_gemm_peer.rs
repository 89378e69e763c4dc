//! The plain-GEMM peer of the FCGP forward (`fcgp_gemm` rows): our own GEMM, in the same
//! precision the FCGP uses (TF32 tensor cores for f32, native f16/bf16), on the GEMM shape the
//! FCGP forward runs (`total * B` rows of path products, `N x N` weights: the same M, N, K and
//! the same FLOPs), timed in the same call, so each `fcgp_fwd` row can report its rate as a
//! share of our plain GEMM's (`rate_vs_gemm`).

use ferrotune::ops::gemm::{Gemm, Precision, gemm};
use ferrotune::{Backend, Buffer, Scalar, Stream};
use ferrotune_autotune::measure::time_on_stream;
use ferrotune_testkit::Rng;

use crate::clifford::{CliffordOptions, CliffordRow};
use crate::error::Result;
use ferrotune::ops::clifford::Clifford;

/// Sampled entries of D checked against a float64 dot product.
const CHECKS: usize = 64;

/// The `fcgp_gemm` row of `p`: `D (total B x N, f32) = A (total B x N) W (N x N)`.
pub fn gemm_peer_row<T: Scalar>(
    backend: &Backend,
    s: &Stream,
    p: &Clifford,
    opts: &CliffordOptions,
    copy_bps: f64,
) -> Result<CliffordRow> {
    let (m, n, k) = (p.tables()?.total * p.b, p.n, p.n);
    let g = Gemm::new(m, n, k).precision(Precision::AllowTf32);
    let mut rng = Rng::new(17);
    let ha: Vec<T> = rng.vec(m * k, -1.0, 1.0);
    let hb: Vec<T> = rng.vec(k * n, -1.0, 1.0);
    let (a, b) = (Buffer::from_slice(s, &ha)?, Buffer::from_slice(s, &hb)?);
    let mut d = Buffer::from_slice(s, &vec![f32::NAN; m * n])?;
    let run = |d: &mut Buffer<f32>| gemm::<T, f32>(s, &g, &a.all(), &b.all(), None, None, &mut d.all_mut());
    run(&mut d)?;
    let got = d.to_vec(s)?;
    // TF32 rounds each input to 10 mantissa bits: a relative 2^-10 of the sum of |products|
    // bounds the error with room; NaN (an entry never written) fails.
    let mut mismatch = None;
    for i in 0..CHECKS.min(m * n) {
        let (r, c) = ((i * 7919 + 3) % m, (i * 104_729 + 1) % n);
        let (mut want, mut mag) = (0.0f64, 0.0f64);
        for q in 0..k {
            let v = ha[r * k + q].to_f32() as f64 * hb[q * n + c].to_f32() as f64;
            want += v;
            mag += v.abs();
        }
        let e = (got[r * n + c] as f64 - want).abs();
        if e.is_nan() || e > mag * 2f64.powi(-10) + 1e-6 {
            mismatch = Some(format!("D[{r}, {c}] = {} vs {want} (bound {})", got[r * n + c], mag * 2f64.powi(-10)));
            break;
        }
    }
    let stats = time_on_stream(s, opts.repeat, |_| run(&mut d))?;
    let e = T::DTYPE.size_bytes() as u64;
    let bytes = (m * k) as u64 * e + (k * n) as u64 * e + (m * n) as u64 * 4;
    let flops = 2 * (m * n * k) as u64;
    let secs = stats.median_ms * 1e-3;
    Ok(CliffordRow {
        dim: p.dim,
        op: "fcgp_gemm".into(),
        dtype: T::DTYPE.name().into(),
        backend: backend.name().into(),
        b: p.b,
        n: p.n,
        normalize: p.normalize,
        stats,
        ms: stats.median_ms,
        bytes,
        flops,
        bytes_per_s: bytes as f64 / secs,
        flops_per_s: flops as f64 / secs,
        ratio_to_copy: bytes as f64 / secs / copy_bps,
        config: format!("plain gemm M {m} N {n} K {k} (tf32 for f32)"),
        correct: mismatch.is_none(),
        mismatch,
        sweep: Vec::new(),
        rate_vs_gemm: None,
    })
}

/// Sets `rate_vs_gemm` on every `fcgp_fwd` row with an `fcgp_gemm` row of the same dim,
/// dtype, B and N: the FCGP forward's FLOP rate over the plain GEMM's.
pub fn join_rates(rows: &mut [CliffordRow]) {
    let peers: Vec<(u32, String, usize, usize, f64)> = rows
        .iter()
        .filter(|r| r.op == "fcgp_gemm" && r.correct)
        .map(|r| (r.dim, r.dtype.clone(), r.b, r.n, r.flops_per_s))
        .collect();
    for r in rows.iter_mut().filter(|r| r.op == "fcgp_fwd") {
        if let Some(pk) = peers.iter().find(|pk| (pk.0, &pk.1, pk.2, pk.3) == (r.dim, &r.dtype, r.b, r.n)) {
            r.rate_vs_gemm = Some(r.flops_per_s / pk.4);
        }
    }
}
