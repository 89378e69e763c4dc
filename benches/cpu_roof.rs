//! The CPU memory roof and every elementwise op's fraction of it, measured in pairs: a
//! parallel copy of tensors far larger than L2 (the roof) and the op, timed back to back, many
//! times, alternating which goes first; the fraction is the median of the pairs' ratios. On a
//! shared machine the copy's own rate moves by 5x between seconds, so a roof measured once at
//! the start (as the main bench's ceilings are) does not hold for rows timed a minute later;
//! a ratio taken pair by pair does.

use std::sync::Arc;
use std::time::Instant;

use ferrotune::config::ElemConfig;
use ferrotune::{Backend, Buffer, Cpu, DType, ElemOp, Scalar, Stream, View, bf16, f16, ops};
use ferrotune_testkit::Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::elementwise::{BIAS_COLS, check_parallel, elements};
use crate::error::Result;

/// The JSON schema of [`RoofReport`].
pub const ROOF_SCHEMA: &str = "ferrotune-cpu-roof/1";

/// What the roof bench runs.
#[derive(Clone, Debug)]
pub struct RoofOptions {
    pub ops: Vec<ElemOp>,
    pub dtypes: Vec<DType>,
    /// Bytes of each full-size tensor (and of the copy's source and destination).
    pub bytes_per_tensor: usize,
    /// Timed (copy, op) pairs per row, after `warmup` untimed pairs.
    pub pairs: usize,
    pub warmup: usize,
}

/// One (op, dtype): its fraction of the copy roof, pair by pair.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoofRow {
    pub op: String,
    pub dtype: String,
    pub elements: usize,
    /// Fewest bytes the op moves (inputs read once, output written once).
    pub bytes: u64,
    /// Median over the pairs of (op's bytes/s) / (copy's bytes/s).
    pub fraction: f64,
    pub fraction_min: f64,
    pub fraction_max: f64,
    pub op_median_ms: f64,
    pub op_gb_s: f64,
    /// The copy's median rate in this row's pairs.
    pub roof_gb_s: f64,
    /// Checked against the f64 reference before timing.
    pub correct: bool,
    pub mismatch: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoofReport {
    pub schema: String,
    pub machine: String,
    pub threads: usize,
    pub date: String,
    pub commit: String,
    pub bytes_per_tensor: usize,
    pub pairs: usize,
    /// How the roof is measured, in words.
    pub method: String,
    pub rows: Vec<RoofRow>,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Copies `src` into `dst` on the backend's threads, in 256 KiB tasks: the roof.
fn parallel_copy(cpu: &Cpu, src: &[f32], dst: &mut [f32]) {
    cpu.install(|| dst.par_chunks_mut(1 << 16).zip(src.par_chunks(1 << 16)).for_each(|(d, s)| d.copy_from_slice(s)));
}

fn row<T: Scalar>(
    cpu: &Cpu,
    s: &Stream,
    op: ElemOp,
    opts: &RoofOptions,
    copy: (&[f32], &mut [f32]),
) -> Result<RoofRow> {
    let elem = T::DTYPE.size_bytes();
    let n = elements(opts.bytes_per_tensor, elem);
    let cols = if op == ElemOp::BiasAdd { BIAS_COLS } else { 0 };
    let mut rng = Rng::new(42);
    let alpha = 0.5f32;
    // The inputs of the main bench's rows: uniform in [-4, 4) (bias [-2, 2)), no subnormals.
    let n_in = match op {
        ElemOp::Add => 2,
        ElemOp::Chain(_) => 3,
        _ => 1,
    };
    let host_in: Vec<Vec<T>> = (0..n_in)
        .map(|i| if op == ElemOp::BiasAdd && i == 0 { rng.vec(cols, -2.0, 2.0) } else { rng.vec(n, -4.0, 4.0) })
        .collect();
    let out_init: Vec<T> = rng.vec(n, -4.0, 4.0);
    let ins = host_in.iter().map(|h| Buffer::from_slice(s, h)).collect::<ferrotune::Result<Vec<_>>>()?;
    let mut out = Buffer::from_slice(s, &out_init)?;
    let cfg = ElemConfig::heuristic(op, T::DTYPE, None);
    let views: Vec<View<'_, T>> = ins.iter().map(|b| b.all()).collect();
    let refs: Vec<&View<'_, T>> = views.iter().collect();

    ops::run_elementwise(s, op, &cfg, &refs, &mut out.all_mut(), alpha)?;
    let got = out.to_vec(s)?;
    let ref_inputs: Vec<&[T]> = match op {
        ElemOp::Axpy => vec![&host_in[0], &out_init],
        ElemOp::BiasAdd => vec![&out_init, &host_in[0]],
        _ => host_in.iter().map(|v| v.as_slice()).collect(),
    };
    let mismatch = check_parallel(op, alpha, &ref_inputs, &got, cols.max(1));

    let (src, dst) = copy;
    let copy_bytes = 2.0 * (src.len() * 4) as f64;
    let bytes = op.min_bytes(n, elem, cols) as u64;
    let (mut ratios, mut op_ms, mut copy_rates) = (Vec::new(), Vec::new(), Vec::new());
    for p in 0..opts.warmup + opts.pairs {
        let mut time_op = || -> Result<f64> {
            let t = Instant::now();
            ops::run_elementwise(s, op, &cfg, &refs, &mut out.all_mut(), alpha)?;
            s.synchronize()?;
            Ok(t.elapsed().as_secs_f64())
        };
        let mut time_copy = || {
            let t = Instant::now();
            parallel_copy(cpu, src, dst);
            t.elapsed().as_secs_f64()
        };
        // Alternate the order, so neither side always runs on the other's warm caches.
        let (t_op, t_copy) = if p % 2 == 0 {
            let c = time_copy();
            (time_op()?, c)
        } else {
            let o = time_op()?;
            (o, time_copy())
        };
        if p >= opts.warmup {
            ratios.push((bytes as f64 / t_op) / (copy_bytes / t_copy));
            op_ms.push(t_op * 1e3);
            copy_rates.push(copy_bytes / t_copy / 1e9);
        }
    }
    let op_median_ms = median(&mut op_ms);
    Ok(RoofRow {
        op: op.name().into(),
        dtype: T::DTYPE.name().into(),
        elements: n,
        bytes,
        fraction: median(&mut ratios),
        fraction_min: ratios.first().copied().unwrap_or(f64::NAN),
        fraction_max: ratios.last().copied().unwrap_or(f64::NAN),
        op_median_ms,
        op_gb_s: bytes as f64 / (op_median_ms * 1e-3) / 1e9,
        roof_gb_s: median(&mut copy_rates),
        correct: mismatch.is_none(),
        mismatch,
    })
}

/// Every (op, dtype) of `opts` on the CPU backend `cpu`, each beside the copy roof; `progress`
/// gets a line per row.
pub fn run(cpu: &Arc<Cpu>, opts: &RoofOptions, mut progress: impl FnMut(&RoofRow)) -> Result<RoofReport> {
    let backend = Backend::Cpu(cpu.clone());
    let s = backend.stream();
    let copy_n = opts.bytes_per_tensor / 4;
    let src: Vec<f32> = Rng::new(1).vec(copy_n, -1.0, 1.0);
    let mut dst = vec![0f32; copy_n];
    let mut rows = Vec::new();
    for &dtype in &opts.dtypes {
        for &op in &opts.ops {
            let copy = (src.as_slice(), dst.as_mut_slice());
            let r = match dtype {
                DType::F32 => row::<f32>(cpu, &s, op, opts, copy)?,
                DType::F16 => row::<f16>(cpu, &s, op, opts, copy)?,
                DType::Bf16 => row::<bf16>(cpu, &s, op, opts, copy)?,
            };
            progress(&r);
            rows.push(r);
        }
    }
    Ok(RoofReport {
        schema: ROOF_SCHEMA.into(),
        machine: crate::host_cpu(),
        threads: cpu.threads(),
        date: String::new(),
        commit: String::new(),
        bytes_per_tensor: opts.bytes_per_tensor,
        pairs: opts.pairs,
        method: format!(
            "per row: {} untimed then {} timed pairs of (parallel copy of {} MiB f32 into another {} MiB, the op on \
             {} MiB tensors), order alternating; fraction = median over pairs of (op min bytes / op time) / (2 x copy \
             bytes / copy time); each op checked against the f64 reference first",
            opts.warmup,
            opts.pairs,
            opts.bytes_per_tensor >> 20,
            opts.bytes_per_tensor >> 20,
            opts.bytes_per_tensor >> 20
        ),
        rows,
    })
}

impl RoofReport {
    /// One line per row: op, dtype, fraction (min–max), rates.
    pub fn render_table(&self) -> String {
        let mut t = format!(
            "{:<18} {:<5} {:>9} {:>15} {:>9} {:>9}  check\n",
            "op", "dtype", "of roof", "min-max", "op GB/s", "roof GB/s"
        );
        for r in &self.rows {
            t += &format!(
                "{:<18} {:<5} {:>8.1}% {:>6.0}%-{:>5.0}% {:>9.1} {:>9.1}  {}\n",
                r.op,
                r.dtype,
                100.0 * r.fraction,
                100.0 * r.fraction_min,
                100.0 * r.fraction_max,
                r.op_gb_s,
                r.roof_gb_s,
                if r.correct { "ok" } else { "MISMATCH" }
            );
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_roof_run_checks_and_measures_every_row() {
        let cpu = Cpu::new(2).unwrap();
        let opts = RoofOptions {
            ops: vec![
                ElemOp::Copy,
                ElemOp::Chain(ferrotune_kernels::elementwise::Activation::GeluErf),
                ElemOp::BiasAdd,
            ],
            dtypes: vec![DType::F32, DType::F16],
            bytes_per_tensor: 4 * BIAS_COLS * 4,
            pairs: 3,
            warmup: 1,
        };
        let rep = run(&cpu, &opts, |_| {}).unwrap();
        assert_eq!(rep.rows.len(), 6);
        for r in &rep.rows {
            assert!(r.correct, "{r:?}");
            assert!(r.fraction > 0.0 && r.fraction_min <= r.fraction && r.fraction <= r.fraction_max, "{r:?}");
        }
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
