//! The plain-GEMM peers of the FCGP forward, our own GEMM in the same precision the FCGP uses
//! (TF32 tensor cores for f32, native f16/bf16), timed in the same call:
//! - `fcgp_gemm`: the FCGP's products-times-weights as one plain GEMM, `total * B` rows of
//!   path products times `N x N` weights (the same FLOPs), in the faster of the two layouts of
//!   the weights, so each `fcgp_fwd` row can report its rate as a share of our plain GEMM's
//!   (`rate_vs_gemm`);
//! - `fcgp_gemms`: the GEMM calls the FCGP forward itself makes (one per output grade, K over
//!   the grade's paths: `fcgp_forward_gemms`) on random data, alone — how much of the forward's
//!   time is GEMM (`rate_vs_own_gemms`).

use ferrotune::ops::gemm::{Gemm, Layout, Precision, gemm};
use ferrotune::{Backend, Buffer, Scalar, Stream};
use ferrotune_autotune::measure::time_on_stream;
use ferrotune_testkit::Rng;

use crate::clifford::{CliffordOptions, CliffordRow};
use crate::error::Result;
use ferrotune::ops::clifford::{Clifford, fcgp_forward_gemms};
use ferrotune_kernels::clifford::fcgp_ld;

/// Sampled entries of D checked against a float64 dot product.
const CHECKS: usize = 64;

/// The first sampled entry of `D[d0 ..]` (row-major `m x n`) that is not `A[a0 ..] (m x k)
/// B[b0 ..] (k x n)` (A row-major, B in `g`'s layout, leading dimensions of `g`) within
/// TF32's rounding: each input rounded to 10 mantissa bits, so a relative 2^-10 of the sum of
/// |products| bounds the error with room; NaN (an entry never written) fails.
fn first_mismatch<T: Scalar>(ha: &[T], hb: &[T], got: &[f32], g: &Gemm, [a0, b0, d0]: [usize; 3]) -> Option<String> {
    let g = g.resolved();
    for i in 0..CHECKS.min(g.m * g.n) {
        let (r, c) = ((i * 7919 + 3) % g.m, (i * 104_729 + 1) % g.n);
        let (mut want, mut mag) = (0.0f64, 0.0f64);
        for q in 0..g.k {
            let bq = match g.b_layout {
                Layout::Row => hb[b0 + q * g.ldb + c],
                Layout::Col => hb[b0 + c * g.ldb + q],
            };
            let v = ha[a0 + r * g.lda + q].to_f32() as f64 * bq.to_f32() as f64;
            want += v;
            mag += v.abs();
        }
        let at = d0 + r * g.ldc + c;
        let e = (got[at] as f64 - want).abs();
        if e.is_nan() || e > mag * 2f64.powi(-10) + 1e-6 {
            return Some(format!("D[{r}, {c}] = {} vs {want} (bound {})", got[at], mag * 2f64.powi(-10)));
        }
    }
    None
}

/// The `fcgp_gemm` row of `p`: `D (total B x N, f32) = A (total B x N) W (N x N)`, W read
/// row-major (`x @ w`) and column-major (`x @ w.T`, the layout the Hopper path takes in TF32
/// as well), each checked, the faster kept: the best a user of our GEMM gets on this shape.
pub fn gemm_peer_row<T: Scalar>(
    backend: &Backend,
    s: &Stream,
    p: &Clifford,
    opts: &CliffordOptions,
    copy_bps: f64,
) -> Result<CliffordRow> {
    let (m, n, k) = (p.tables()?.total * p.b, p.n, p.n);
    let mut rng = Rng::new(17);
    let ha: Vec<T> = rng.vec(m * k, -1.0, 1.0);
    let hb: Vec<T> = rng.vec(k * n, -1.0, 1.0);
    let (a, b) = (Buffer::from_slice(s, &ha)?, Buffer::from_slice(s, &hb)?);
    let mut d = Buffer::from_slice(s, &vec![f32::NAN; m * n])?;
    let mut best: Option<(ferrotune_autotune::measure::Stats, Option<String>, &str)> = None;
    for (layout, name) in [(Layout::Row, "x @ w"), (Layout::Col, "x @ w.T")] {
        let g = Gemm::new(m, n, k).layouts(Layout::Row, layout).precision(Precision::AllowTf32);
        d.copy_from(s, &vec![f32::NAN; m * n])?;
        let run = |d: &mut Buffer<f32>| gemm::<T, f32>(s, &g, &a.all(), &b.all(), None, None, &mut d.all_mut());
        run(&mut d)?;
        let mismatch = first_mismatch(&ha, &hb, &d.to_vec(s)?, &g, [0; 3]);
        let stats = time_on_stream(s, opts.repeat, |_| run(&mut d))?;
        // A layout that computed a wrong answer is reported, never kept as the faster.
        let better = match &best {
            None => true,
            Some((b, bm, _)) => {
                (mismatch.is_none() && bm.is_some())
                    || (mismatch.is_none() == bm.is_none() && stats.median_ms < b.median_ms)
            }
        };
        if better {
            best = Some((stats, mismatch, name));
        }
    }
    let (stats, mismatch, name) = best.expect("two layouts timed");
    let e = T::DTYPE.size_bytes() as u64;
    let bytes = (m * k) as u64 * e + (k * n) as u64 * e + (m * n) as u64 * 4;
    let config = format!("plain gemm M {m} N {n} K {k} (tf32 for f32), {name} (the faster layout)");
    Ok(row(backend, p, "fcgp_gemm", T::DTYPE.name(), stats, bytes, 2 * (m * n * k) as u64, copy_bps, config, mismatch))
}

/// The `fcgp_gemms` row of `p`: the FCGP forward's own GEMM calls on random products and
/// grouped weights, into f32 `(C, B, N)` planes; the first call's sampled entries checked.
pub fn own_gemms_row<T: Scalar>(
    backend: &Backend,
    s: &Stream,
    p: &Clifford,
    opts: &CliffordOptions,
    copy_bps: f64,
) -> Result<CliffordRow> {
    let (t, ld) = (p.tables()?, fcgp_ld(p.n));
    let calls = fcgp_forward_gemms(p, Precision::AllowTf32)?;
    let (al, bl, dl) = (t.total * p.b * ld, t.w * ld * ld, t.c * p.b * ld);
    let mut rng = Rng::new(19);
    let ha: Vec<T> = rng.vec(al, -1.0, 1.0);
    let hb: Vec<T> = rng.vec(bl, -1.0, 1.0);
    let (a, b) = (Buffer::from_slice(s, &ha)?, Buffer::from_slice(s, &hb)?);
    let mut d = Buffer::from_slice(s, &vec![f32::NAN; dl])?;
    let run = |d: &mut Buffer<f32>| -> ferrotune::Result<()> {
        for (g, [a0, b0, d0]) in &calls {
            gemm::<T, f32>(s, g, &a.view(*a0..)?, &b.view(*b0..)?, None, None, &mut d.view_mut(*d0..)?)?;
        }
        Ok(())
    };
    run(&mut d)?;
    let (g0, offs) = calls[0];
    let mismatch = first_mismatch(&ha, &hb, &d.to_vec(s)?, &g0, offs);
    let stats = time_on_stream(s, opts.repeat, |_| run(&mut d))?;
    let e = T::DTYPE.size_bytes() as u64;
    let bytes = (al + bl) as u64 * e + dl as u64 * 4;
    let flops = calls.iter().map(|(g, _)| g.flops()).sum::<f64>() as u64;
    let config =
        calls.iter().map(|(g, _)| format!("{}x{}x{}x{}", g.batch, g.m, g.n, g.k)).collect::<Vec<_>>().join(" + ");
    let config = format!("the FCGP's GEMMs (batch x M x N x K): {config}");
    Ok(row(backend, p, "fcgp_gemms", T::DTYPE.name(), stats, bytes, flops, copy_bps, config, mismatch))
}

#[allow(clippy::too_many_arguments)]
fn row(
    backend: &Backend,
    p: &Clifford,
    op: &str,
    dtype: &str,
    stats: ferrotune_autotune::measure::Stats,
    bytes: u64,
    flops: u64,
    copy_bps: f64,
    config: String,
    mismatch: Option<String>,
) -> CliffordRow {
    let secs = stats.median_ms * 1e-3;
    CliffordRow {
        dim: p.dim,
        op: op.into(),
        dtype: dtype.into(),
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
        ms_queued: None,
        ratio_to_copy_queued: None,
        config,
        correct: mismatch.is_none(),
        mismatch,
        sweep: Vec::new(),
        rate_vs_gemm: None,
        rate_vs_own_gemms: None,
    }
}

/// Sets `rate_vs_gemm` (`rate_vs_own_gemms`) on every `fcgp_fwd` row with an `fcgp_gemm`
/// (`fcgp_gemms`) row of the same dim, dtype, B and N: the FCGP forward's FLOP rate over the
/// peer's.
pub fn join_rates(rows: &mut [CliffordRow]) {
    for (peer, own) in [("fcgp_gemm", false), ("fcgp_gemms", true)] {
        let peers: Vec<(u32, String, usize, usize, f64)> = rows
            .iter()
            .filter(|r| r.op == peer && r.correct)
            .map(|r| (r.dim, r.dtype.clone(), r.b, r.n, r.flops_per_s))
            .collect();
        for r in rows.iter_mut().filter(|r| r.op == "fcgp_fwd") {
            if let Some(pk) = peers.iter().find(|pk| (pk.0, &pk.1, pk.2, pk.3) == (r.dim, &r.dtype, r.b, r.n)) {
                let rate = Some(r.flops_per_s / pk.4);
                if own {
                    r.rate_vs_own_gemms = rate;
                } else {
                    r.rate_vs_gemm = rate;
                }
            }
        }
    }
}
