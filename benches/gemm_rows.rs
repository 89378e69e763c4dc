//! GEMM rows of the standard report: our GEMM (A row-major, B column-major: `x wᵀ`) timed
//! with the same loop as every other row, checked on sampled elements against a float64 dot
//! product, and placed under the compute roof of its math (the cuBLAS ceiling of the run).

use ferrotune::ops::gemm::{Gemm, Layout, gemm};
use ferrotune::profiler::Profiler;
use ferrotune::{Backend, DType, Scalar, Stream};
use ferrotune_autotune::measure::{Repeat, time_on_stream};
use ferrotune_kernels::gemm as kg;
use ferrotune_testkit::Rng;

use crate::error::Result;
use crate::report::{GemmConfigJson, Row, RowConfig};
use crate::roofline::{Roof, Roofs};

/// Elements sampled for the correctness check.
const SAMPLES: usize = 256;

/// The compute roof a GEMM of input dtype `dt` is judged against (f32 runs exact FFMA, so
/// the f32 SGEMM ceiling, not TF32).
pub fn math(dt: DType) -> &'static str {
    dt.name()
}

/// FLOPs (2mnk) and fewest bytes (A and B read once, D written once) of one `m x n x k` GEMM.
pub fn work(m: usize, n: usize, k: usize, element_bytes: usize) -> (u64, u64) {
    let flops = 2 * m as u64 * n as u64 * k as u64;
    let bytes = ((m * k + k * n + m * n) * element_bytes) as u64;
    (flops, bytes)
}

/// Checks, then times one (dtype `T`, `m x n x k`) GEMM row; allocations go through `prof`
/// and the timed region is one of its scopes.
pub fn bench_row<T: Scalar>(
    backend: &Backend,
    s: &Stream,
    (m, n, k): (usize, usize, usize),
    repeat: Repeat,
    roofs: &Roofs,
    prof: &mut Profiler,
) -> Result<Row> {
    let g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col);
    let r = g.resolved();
    let mut rng = Rng::new(7);
    let ha: Vec<T> = rng.vec(r.stride_a, -1.0, 1.0);
    let hb: Vec<T> = rng.vec(r.stride_b, -1.0, 1.0);
    let a = prof.upload(s, &ha)?;
    let b = prof.upload(s, &hb)?;
    let mut d = prof.upload(s, &vec![T::from_f32(f32::NAN); r.stride_c])?;
    let label = format!("gemm {} {m}x{n}x{k}", T::DTYPE.name());

    let id = prof.begin(format!("{label}: check"), s)?;
    gemm::<T, T>(s, &g, &a.all(), &b.all(), None, None, &mut d.all_mut())?;
    let got = d.to_vec(s)?;
    prof.end(id, s)?;
    let mismatch = crate::gemm::check_samples(&g, &ha, &hb, &got, None, SAMPLES);

    let id = prof.begin(format!("{label}: timed ({} + {} runs)", repeat.warmup, repeat.iters), s)?;
    let stats = time_on_stream(s, repeat, |_| gemm::<T, T>(s, &g, &a.all(), &b.all(), None, None, &mut d.all_mut()))?;
    prof.end(id, s)?;
    prof.free(s, a)?;
    prof.free(s, b)?;
    prof.free(s, d)?;

    let cuda = matches!(backend, Backend::Cuda(_));
    // Fresh allocations are 256-byte aligned, so only the dimensions decide (as in the host).
    let variant = ferrotune::ops::gemm::variant_for(&r, T::DTYPE, T::DTYPE, 256, 256)?;
    let (bm, bn, threads) = variant.block();
    let bk = match variant.math {
        kg::Math::Ffma => kg::ffma::BK,
        _ => kg::tc::TILES[variant.tile as usize].bk(T::DTYPE.size_bytes()),
    };
    let tile = [bm, bn, bk];
    let (flops, bytes) = work(m, n, k, T::DTYPE.size_bytes());
    let mut row = Row {
        family: "gemm".into(),
        op: "gemm".into(),
        dtype: T::DTYPE.name().into(),
        backend: backend.name().into(),
        shape: vec![m, n, k],
        elements: m * n,
        kernel: cuda.then(|| variant.entry_name().as_str().to_string()),
        // The CPU backend always computes exact f32 (16-bit inputs are widened): its roof is
        // the f32 SGEMM ceiling whatever the input dtype.
        math: match (cuda, variant.math) {
            (true, kg::Math::Tf32) => "tf32".into(),
            (true, _) => math(T::DTYPE).into(),
            (false, _) => "f32".into(),
        },
        flops,
        bytes,
        config: RowConfig::Gemm(GemmConfigJson {
            a_layout: "row".into(),
            b_layout: "col".into(),
            tile: cuda.then_some(tile),
            threads: cuda.then_some(threads),
        }),
        stats,
        flops_per_s: 0.0,
        bytes_per_s: 0.0,
        ratio_to_copy: 0.0,
        roof_fraction: 0.0,
        roof: Roof::Compute,
        correct: mismatch.is_none(),
        mismatch,
        best_config: None,
        best_bytes_per_s: None,
        configs_swept: 0,
    };
    row.derive(roofs);
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_counts_2mnk_and_each_operand_once() {
        assert_eq!(work(2, 3, 4, 4), (48, (8 + 12 + 6) * 4));
        assert_eq!(work(4096, 4096, 4096, 2).0, 2 * 4096u64.pow(3));
        assert_eq!((math(DType::F32), math(DType::Bf16)), ("f32", "bf16"));
    }
}
