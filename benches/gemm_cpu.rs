//! CPU GEMM rows (`bench --ops gemm` on the CPU backend): our `ops::gemm` with f32, f16 and
//! bf16 inputs beside `matrixmultiply` SGEMM on the same shape, layout and thread pool in the
//! same run (row bands, one single-threaded call per thread, as the CPU compute ceiling does),
//! each checked on sampled elements against a float64 dot product before it is timed.

use ferrotune::ops::gemm::{Gemm, Layout, gemm};
use ferrotune::{Backend, Buffer, DType, Scalar, Stream, bf16, f16};
use ferrotune_autotune::measure::{Repeat, Stats, time_on_stream};
use ferrotune_testkit::Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};

/// Shapes of the CPU table: the ceiling's cube and an LLM layer (`x wᵀ` of a
/// 768-wide model with a 3072-wide MLP, 512 tokens).
pub const DEFAULT_SHAPES: [(usize, usize, usize); 2] = [(1024, 1024, 1024), (512, 3072, 768)];

/// Elements sampled for the correctness check.
const SAMPLES: usize = 256;

/// One CPU GEMM row: ours and the `matrixmultiply` peer on the same problem.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CpuGemmRow {
    pub dtype: String,
    /// A's then B's layout: `rr` or `rc` (`x wᵀ`).
    pub layout: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub threads: usize,
    pub ours: Stats,
    pub ours_gflops: f64,
    /// `matrixmultiply` SGEMM (f32 operands, whatever our input dtype).
    pub peer: Stats,
    pub peer_gflops: f64,
    /// Peer time over ours: above 1 we are faster.
    pub ratio: f64,
    pub correct: bool,
    pub mismatch: Option<String>,
}

/// `c = a · b` (`m x k` row-major times `k x n` in `lb`, tight) with `matrixmultiply`, rows
/// of C split into one band per thread of the pool.
pub fn sgemm_bands(s: &Stream, (m, n, k): (usize, usize, usize), lb: Layout, a: &[f32], b: &[f32], c: &mut [f32]) {
    assert!(a.len() == m * k && b.len() == k * n && c.len() == m * n && m * n * k > 0);
    let Stream::Cpu(cpu) = s else { unreachable!("CPU rows run on the CPU backend") };
    let band = m.div_ceil(cpu.threads().max(1)).max(1);
    let (rsb, csb) = if lb == Layout::Row { (n as isize, 1) } else { (1, k as isize) };
    cpu.install(|| {
        c.par_chunks_mut(band * n).zip(a.par_chunks(band * k)).for_each(|(cb, ab)| {
            let rows = ab.len() / k;
            // SAFETY: ab is rows x k and cb rows x n, row-major and tight; b is k x n with
            // the strides of its layout (lengths asserted above); the slices outlive the call.
            unsafe {
                matrixmultiply::sgemm(
                    rows,
                    k,
                    n,
                    1.0,
                    ab.as_ptr(),
                    k as isize,
                    1,
                    b.as_ptr(),
                    rsb,
                    csb,
                    0.0,
                    cb.as_mut_ptr(),
                    n as isize,
                    1,
                )
            }
        })
    });
}

fn gflops(m: usize, n: usize, k: usize, st: &Stats) -> f64 {
    2.0 * (m * n * k) as f64 / (st.median_ms * 1e-3) / 1e9
}

/// Checks, then times ours and the peer on one (dtype `T`, shape, layout of B): four rounds
/// each, alternating, and the best median of each is kept (the machine is shared).
pub fn row<T: Scalar>(
    backend: &Backend,
    shape: (usize, usize, usize),
    lb: Layout,
    repeat: Repeat,
) -> Result<CpuGemmRow> {
    let (m, n, k) = shape;
    let Backend::Cpu(cpu) = backend else {
        return Err(BenchError::Options("CPU GEMM rows need the CPU backend".into()));
    };
    let s = backend.stream();
    let g = Gemm::new(m, n, k).layouts(Layout::Row, lb);
    let mut rng = Rng::new(17);
    let ha: Vec<T> = rng.vec(m * k, -1.0, 1.0);
    let hb: Vec<T> = rng.vec(k * n, -1.0, 1.0);
    let a = Buffer::from_slice(&s, &ha)?;
    let b = Buffer::from_slice(&s, &hb)?;
    let mut d = Buffer::from_slice(&s, &vec![T::from_f32(f32::NAN); m * n])?;
    gemm::<T, T>(&s, &g, &a.all(), &b.all(), None, None, &mut d.all_mut())?;
    let mismatch = crate::gemm::check_samples(&g, &ha, &hb, &d.to_vec(&s)?, None, SAMPLES);

    let (fa, fb): (Vec<f32>, Vec<f32>) =
        (ha.iter().map(|x| x.to_f32()).collect(), hb.iter().map(|x| x.to_f32()).collect());
    let mut fc = vec![0f32; m * n];
    let mut ours: Option<Stats> = None;
    let mut peer: Option<Stats> = None;
    let better = |old: Option<Stats>, new: Stats| Some(old.filter(|o| o.median_ms <= new.median_ms).unwrap_or(new));
    for _ in 0..4 {
        let st =
            time_on_stream(&s, repeat, |_| gemm::<T, T>(&s, &g, &a.all(), &b.all(), None, None, &mut d.all_mut()))?;
        ours = better(ours, st);
        let st = time_on_stream(&s, repeat, |_| {
            sgemm_bands(&s, shape, lb, &fa, &fb, &mut fc);
            Ok(())
        })?;
        peer = better(peer, st);
    }
    let (ours, peer) = (ours.expect("four rounds ran"), peer.expect("four rounds ran"));
    Ok(CpuGemmRow {
        dtype: T::DTYPE.name().into(),
        layout: format!("r{}", lb.code()),
        m,
        n,
        k,
        threads: cpu.threads(),
        ours_gflops: gflops(m, n, k, &ours),
        peer_gflops: gflops(m, n, k, &peer),
        ratio: peer.median_ms / ours.median_ms,
        ours,
        peer,
        correct: mismatch.is_none(),
        mismatch,
    })
}

/// Every row of `shapes` x `dtypes` x {B row-major, B column-major}.
pub fn rows(
    backend: &Backend,
    shapes: &[(usize, usize, usize)],
    dtypes: &[DType],
    repeat: Repeat,
    mut each: impl FnMut(&CpuGemmRow),
) -> Result<Vec<CpuGemmRow>> {
    let s = backend.stream();
    for &shape in shapes {
        if shape.0 == 0 || shape.1 == 0 || shape.2 == 0 {
            return Err(BenchError::Options(format!("GEMM shape {shape:?} is empty")));
        }
        let what = format!("the CPU GEMM row {}x{}x{}", shape.0, shape.1, shape.2);
        crate::preflight::check_gemm(&s, shape, 4, &what)?;
    }
    let mut out = Vec::new();
    for &shape in shapes {
        for &dt in dtypes {
            for lb in [Layout::Row, Layout::Col] {
                let r = match dt {
                    DType::F32 => row::<f32>(backend, shape, lb, repeat)?,
                    DType::F16 => row::<f16>(backend, shape, lb, repeat)?,
                    DType::Bf16 => row::<bf16>(backend, shape, lb, repeat)?,
                };
                each(&r);
                out.push(r);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_gemm_rows_are_checked_and_compared() {
        let backend = Backend::Cpu(ferrotune::Cpu::new(2).unwrap());
        let r = rows(&backend, &[(33, 17, 29)], &[DType::F32, DType::Bf16], Repeat { warmup: 0, iters: 2 }, |_| {})
            .unwrap();
        assert_eq!(r.len(), 4);
        assert!(r.iter().all(|r| r.correct && r.ratio > 0.0 && r.ours_gflops > 0.0), "{r:?}");
        assert_eq!((r[1].layout.as_str(), r[2].dtype.as_str()), ("rc", "bf16"));
    }

    #[test]
    fn the_band_peer_multiplies_in_both_layouts() {
        let s = Backend::Cpu(ferrotune::Cpu::new(2).unwrap()).stream();
        let (m, n, k) = (5, 3, 4);
        let a: Vec<f32> = (0..m * k).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32).collect();
        for lb in [Layout::Row, Layout::Col] {
            let mut c = vec![f32::NAN; m * n];
            sgemm_bands(&s, (m, n, k), lb, &a, &b, &mut c);
            for i in 0..m {
                for j in 0..n {
                    let bk = |kk: usize| if lb == Layout::Row { b[kk * n + j] } else { b[j * k + kk] };
                    let want: f32 = (0..k).map(|kk| a[i * k + kk] * bk(kk)).sum();
                    assert_eq!(c[i * n + j], want);
                }
            }
        }
    }
}
