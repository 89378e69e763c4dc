//! The elementwise family's rows: each (op, dtype, size) checked against the f64 reference,
//! then timed with its heuristic config (and, with `--sweep`, every config of the tuning
//! space), with the op's FLOPs and fewest bytes.

use ferrotune::config::ElemConfig;
use ferrotune::ops;
use ferrotune::profiler::Profiler;
use ferrotune::{Backend, Buffer, ElemOp, Scalar, Stream, View};
use ferrotune_autotune::measure::{Repeat, time_on_stream};
use ferrotune_kernels::elementwise::Activation;
use ferrotune_testkit::{Rng, check_against_reference};
use rayon::prelude::*;

use crate::error::Result;
use crate::report::{ElemConfigJson, Row, RowConfig};
use crate::roofline::{Roof, Roofs};

/// Bias rows for the bench: 4096 columns (a typical hidden size).
pub const BIAS_COLS: usize = 4096;

/// FLOPs per output element by the op's definition (not by the instructions our kernels
/// happen to run): one per add, multiply or max, one per transcendental (erf, tanh).
/// `gelu_erf` = `0.5·x·(1 + erf(x/√2))`: 5. `gelu_tanh` = `0.5·x·(1 + tanh(√(2/π)·(x +
/// 0.044715·x³)))`: 9. docs/bench-json.md lists them all.
pub const fn flops_per_element(op: ElemOp) -> u64 {
    const fn act(a: Activation) -> u64 {
        match a {
            Activation::None => 0,
            Activation::Relu => 1,
            Activation::GeluErf => 5,
            Activation::GeluTanh => 9,
        }
    }
    match op {
        ElemOp::Copy => 0,
        ElemOp::Scale | ElemOp::Relu | ElemOp::Add | ElemOp::BiasAdd => 1,
        ElemOp::GeluErf => act(Activation::GeluErf),
        ElemOp::GeluTanh => act(Activation::GeluTanh),
        ElemOp::Axpy => 2,
        // (a + b) * c, then the activation.
        ElemOp::Chain(a) => 2 + act(a),
    }
}

/// Elements of a row for `bytes_per_tensor`: whole bias rows, so every op gets the same n.
pub fn elements(bytes_per_tensor: usize, element_bytes: usize) -> usize {
    (bytes_per_tensor / element_bytes) / BIAS_COLS * BIAS_COLS
}

/// `check_against_reference` over chunks in parallel (chunks are whole bias rows).
pub fn check_parallel<T: Scalar>(op: ElemOp, alpha: f32, inputs: &[&[T]], got: &[T], cols: usize) -> Option<String> {
    let chunk = cols * (1usize << 16).div_ceil(cols);
    let n = got.len();
    (0..n.div_ceil(chunk)).into_par_iter().find_map_first(|c| {
        let r = c * chunk..((c + 1) * chunk).min(n);
        let part: Vec<&[T]> = inputs.iter().map(|x| if x.len() == n { &x[r.clone()] } else { *x }).collect();
        check_against_reference(op, alpha, &part, &got[r.clone()]).err().map(|e| format!("chunk at {}: {e}", r.start))
    })
}

/// What one row runs.
#[derive(Clone, Copy, Debug)]
pub struct RowSpec {
    pub op: ElemOp,
    pub bytes_per_tensor: usize,
    pub repeat: Repeat,
    pub sweep: bool,
}

/// Checks, then times one (op, dtype `T`, size) row; every allocation goes through `prof`
/// and the timed region is one of its scopes.
pub fn bench_row<T: Scalar>(
    backend: &Backend,
    s: &Stream,
    spec: RowSpec,
    roofs: &Roofs,
    prof: &mut Profiler,
) -> Result<Row> {
    let op = spec.op;
    let elem = T::DTYPE.size_bytes();
    let n = elements(spec.bytes_per_tensor, elem);
    let cols = if op == ElemOp::BiasAdd { BIAS_COLS } else { 0 };
    let mut rng = Rng::new(42);
    let alpha = 0.5f32;
    // Separate inputs (besides the output) and the output's initial contents.
    let n_in = match op {
        ElemOp::Add => 2,
        ElemOp::Chain(_) => 3,
        _ => 1,
    };
    let host_in: Vec<Vec<T>> = (0..n_in)
        .map(|i| if op == ElemOp::BiasAdd && i == 0 { rng.vec(cols, -2.0, 2.0) } else { rng.vec(n, -4.0, 4.0) })
        .collect();
    let out_init: Vec<T> = rng.vec(n, -4.0, 4.0);
    let ins = host_in.iter().map(|h| prof.upload(s, h)).collect::<ferrotune::Result<Vec<_>>>()?;
    let mut out = prof.upload(s, &out_init)?;
    let label = format!("{} {} {}", op.name(), T::DTYPE.name(), n);
    let cfg = ElemConfig::heuristic(op, T::DTYPE, backend.device());
    let (stats, mismatch, best) = {
        let views: Vec<View<'_, T>> = ins.iter().map(|b| b.all()).collect();
        let refs: Vec<&View<'_, T>> = views.iter().collect();

        // Correctness first: one run on fresh data, checked against the f64 reference.
        let id = prof.begin(format!("{label}: check"), s)?;
        ops::run_elementwise(s, op, &cfg, &refs, &mut out.all_mut(), alpha)?;
        let got = out.to_vec(s)?;
        prof.end(id, s)?;
        let ref_inputs: Vec<&[T]> = match op {
            ElemOp::Axpy => vec![&host_in[0], &out_init],
            ElemOp::BiasAdd => vec![&out_init, &host_in[0]],
            _ => host_in.iter().map(|v| v.as_slice()).collect(),
        };
        let mismatch = check_parallel(op, alpha, &ref_inputs, &got, cols.max(1));

        let time = |cfg: &ElemConfig, repeat: Repeat, out: &mut Buffer<T>| {
            time_on_stream(s, repeat, |_| ops::run_elementwise(s, op, cfg, &refs, &mut out.all_mut(), alpha))
        };
        let id = prof.begin(format!("{label}: timed ({} + {} runs)", spec.repeat.warmup, spec.repeat.iters), s)?;
        let stats = time(&cfg, spec.repeat, &mut out)?;
        prof.end(id, s)?;
        let mut best = None;
        if spec.sweep && matches!(backend, Backend::Cuda(_)) {
            let id = prof.begin(format!("{label}: sweep"), s)?;
            let short = Repeat { warmup: 2, iters: spec.repeat.iters.min(10) };
            let mut fastest = (f64::INFINITY, cfg, 0usize);
            for c in ElemConfig::gpu_space() {
                // Blocks larger than the variant's registers allow are pruned, not launched.
                if ops::elementwise::max_threads(s, op, T::DTYPE, c.variant)?.is_some_and(|m| c.threads > m) {
                    continue;
                }
                let st = time(&c, short, &mut out)?;
                fastest.2 += 1;
                if st.median_ms < fastest.0 {
                    (fastest.0, fastest.1) = (st.median_ms, c);
                }
            }
            prof.end(id, s)?;
            best = Some(fastest);
        }
        (stats, mismatch, best)
    };
    for b in ins {
        prof.free(s, b)?;
    }
    prof.free(s, out)?;

    let bytes = op.min_bytes(n, elem, cols) as u64;
    let mut row = Row {
        family: "elementwise".into(),
        op: op.name().into(),
        dtype: T::DTYPE.name().into(),
        backend: backend.name().into(),
        shape: n.checked_div(cols).map_or(vec![n], |rows| vec![rows, cols]),
        elements: n,
        kernel: matches!(backend, Backend::Cuda(_)).then(|| ops::elementwise::entry_name(op, T::DTYPE, cfg.variant)),
        math: "f32".into(),
        flops: flops_per_element(op) * n as u64,
        bytes,
        config: RowConfig::Elementwise(ElemConfigJson::from(&cfg)),
        stats,
        flops_per_s: 0.0,
        bytes_per_s: 0.0,
        ratio_to_copy: 0.0,
        roof_fraction: 0.0,
        roof: Roof::Memory,
        correct: mismatch.is_none(),
        mismatch,
        best_config: best.map(|b| RowConfig::Elementwise(ElemConfigJson::from(&b.1))),
        best_bytes_per_s: best.map(|b| bytes as f64 / (b.0 * 1e-3)),
        configs_swept: best.map_or(0, |b| b.2),
    };
    row.derive(roofs);
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flop_counts_follow_the_definitions() {
        let by_name = |s| flops_per_element(ElemOp::from_name(s).unwrap());
        assert_eq!(
            ["copy", "scale", "relu", "add", "axpy", "bias_add", "gelu_erf", "gelu_tanh"].map(by_name),
            [0, 1, 1, 1, 2, 1, 5, 9]
        );
        assert_eq!(["add_mul", "add_mul_relu", "add_mul_gelu_erf", "add_mul_gelu_tanh"].map(by_name), [2, 3, 7, 11]);
    }

    #[test]
    fn sizes_round_down_to_whole_bias_rows() {
        assert_eq!(elements(32 << 20, 4), 8 << 20);
        assert_eq!(elements(64 << 10, 2), 32 << 10);
        assert_eq!(elements(BIAS_COLS * 4 + 100, 4), BIAS_COLS);
        assert_eq!(elements(1000, 4), 0);
    }
}
