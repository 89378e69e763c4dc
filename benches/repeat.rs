//! One CPU op run `iters` times in one process, for timing whole processes from outside
//! (`/usr/bin/time`, a harness that alternates two commands): the parallel copy (the memory
//! roof), a Clifford op, or a GEMM (ours or the `matrixmultiply` peer). Operands are made once
//! before the loop; `iters` 0 runs only that setup, so its share can be taken out of a timing.
//! Nothing is checked here: `bench --ops clifford` / `--ops gemm` check the same ops first.

use ferrotune::ops::clifford::{self as cl, Clifford};
use ferrotune::ops::gemm::{Gemm, Layout, gemm};
use ferrotune::{Backend, Buffer, DType, Scalar, Stream, bf16, f16};
use ferrotune_testkit::Rng;
use rayon::prelude::*;

use crate::error::{BenchError, Result};

/// What one process repeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// A parallel f32 copy of `bytes` into another `bytes` (read + write counted).
    Copy { bytes: usize },
    /// `fused_gelu_sgp_norm` (with the norm), and its backward too when `bwd`.
    Clifford { dim: u32, b: usize, n: usize, bwd: bool, dtype: DType },
    /// `D = A B` (A row-major `m x k`, B `k x n` in `lb`); `peer`: `matrixmultiply` SGEMM on
    /// f32 copies of the operands instead of ours.
    Gemm { m: usize, n: usize, k: usize, lb: Layout, dtype: DType, peer: bool },
}

/// What the loop did: the bytes and FLOPs of one iteration (the bench's own counts) and a
/// checksum of the last output, so no iteration can be optimised away.
#[derive(Clone, Copy, Debug)]
pub struct Done {
    pub bytes: u64,
    pub flops: u64,
    pub checksum: f64,
}

/// Runs `work` `iters` times on the CPU backend `backend`.
pub fn run(backend: &Backend, work: Work, iters: usize) -> Result<Done> {
    let Backend::Cpu(cpu) = backend else {
        return Err(BenchError::Options("repeat runs on the CPU backend".into()));
    };
    let s = backend.stream();
    match work {
        Work::Copy { bytes } => {
            let len = (bytes / 4).max(1);
            let src: Vec<f32> = Rng::new(3).vec(len, -1.0, 1.0);
            let mut dst = vec![0f32; len];
            for _ in 0..iters {
                cpu.install(|| {
                    dst.par_chunks_mut(1 << 16).zip(src.par_chunks(1 << 16)).for_each(|(d, s)| d.copy_from_slice(s))
                });
            }
            Ok(Done { bytes: 8 * len as u64, flops: 0, checksum: sample_sum(&dst) })
        }
        Work::Clifford { dim, b, n, bwd, dtype } => {
            let p = Clifford::new(dim, b, n, true);
            match dtype {
                DType::F32 => clifford::<f32>(&s, &p, bwd, iters),
                DType::F16 => clifford::<f16>(&s, &p, bwd, iters),
                DType::Bf16 => clifford::<bf16>(&s, &p, bwd, iters),
            }
        }
        Work::Gemm { m, n, k, lb, dtype, peer } => match dtype {
            DType::F32 => gemm_loop::<f32>(&s, (m, n, k), lb, peer, iters),
            DType::F16 => gemm_loop::<f16>(&s, (m, n, k), lb, peer, iters),
            DType::Bf16 => gemm_loop::<bf16>(&s, (m, n, k), lb, peer, iters),
        },
    }
}

/// Sum of up to 64 spread elements.
fn sample_sum<T: Scalar>(v: &[T]) -> f64 {
    let step = (v.len() / 64).max(1);
    v.iter().step_by(step).map(|x| x.to_f32() as f64).sum()
}

fn clifford<T: Scalar>(s: &Stream, p: &Clifford, bwd: bool, iters: usize) -> Result<Done> {
    let mut rng = Rng::new(5);
    let len = p.mv_len()?;
    let wl = p.sgp_weights_len()?;
    let x = Buffer::from_slice(s, &rng.vec::<T>(len, -2.0, 2.0))?;
    let y = Buffer::from_slice(s, &rng.vec::<T>(len, -2.0, 2.0))?;
    let g = Buffer::from_slice(s, &rng.vec::<T>(len, -1.0, 1.0))?;
    let w = Buffer::from_slice(s, &rng.vec::<T>(wl, -1.0, 1.0))?;
    let mut out = Buffer::<T>::zeros(s, len)?;
    let (mut dx, mut dy, mut dw) =
        (Buffer::<T>::zeros(s, len)?, Buffer::<T>::zeros(s, len)?, Buffer::<T>::zeros(s, wl)?);
    let mut ws = Buffer::<f32>::zeros(s, 0)?;
    for _ in 0..iters {
        cl::fused_gelu_sgp_norm(s, p, &x.all(), &y.all(), &w.all(), &mut out.all_mut())?;
        if bwd {
            let (xa, ya, wa, ga) = (x.all(), y.all(), w.all(), g.all());
            let (dxa, dya, dwa) = (&mut dx.all_mut(), &mut dy.all_mut(), &mut dw.all_mut());
            cl::fused_gelu_sgp_norm_backward(s, p, &xa, &ya, &wa, &ga, dxa, dya, dwa, &mut ws)?;
        }
    }
    let (bytes, flops) = crate::clifford::work(if bwd { "fwdbwd" } else { "fwd" }, p, T::DTYPE.size_bytes())?;
    let checksum = sample_sum(&out.to_vec(s)?) + if bwd { sample_sum(&dx.to_vec(s)?) } else { 0.0 };
    Ok(Done { bytes, flops, checksum })
}

fn gemm_loop<T: Scalar>(
    s: &Stream,
    (m, n, k): (usize, usize, usize),
    lb: Layout,
    peer: bool,
    iters: usize,
) -> Result<Done> {
    let mut rng = Rng::new(17);
    let ha: Vec<T> = rng.vec(m * k, -1.0, 1.0);
    let hb: Vec<T> = rng.vec(k * n, -1.0, 1.0);
    let flops = 2 * (m * n * k) as u64;
    let bytes = ((m * k + k * n + m * n) * T::DTYPE.size_bytes()) as u64;
    if peer {
        let (fa, fb): (Vec<f32>, Vec<f32>) =
            (ha.iter().map(|x| x.to_f32()).collect(), hb.iter().map(|x| x.to_f32()).collect());
        let mut fc = vec![0f32; m * n];
        for _ in 0..iters {
            crate::gemm_cpu::sgemm_bands(s, (m, n, k), lb, &fa, &fb, &mut fc);
        }
        return Ok(Done { bytes, flops, checksum: sample_sum(&fc) });
    }
    let g = Gemm::new(m, n, k).layouts(Layout::Row, lb);
    let (a, b) = (Buffer::from_slice(s, &ha)?, Buffer::from_slice(s, &hb)?);
    let mut d = Buffer::<T>::zeros(s, m * n)?;
    for _ in 0..iters {
        gemm::<T, T>(s, &g, &a.all(), &b.all(), None, None, &mut d.all_mut())?;
    }
    Ok(Done { bytes, flops, checksum: sample_sum(&d.to_vec(s)?) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_work_runs_and_the_gemm_matches_its_peer() {
        let backend = Backend::Cpu(ferrotune::Cpu::new(2).unwrap());
        let copy = run(&backend, Work::Copy { bytes: 4096 }, 2).unwrap();
        assert_eq!(copy.bytes, 8192);
        for bwd in [false, true] {
            let w = Work::Clifford { dim: 3, b: 3, n: 70, bwd, dtype: DType::Bf16 };
            let d = run(&backend, w, 1).unwrap();
            assert!(d.checksum.is_finite() && d.checksum != 0.0 && d.flops > 0, "{d:?}");
        }
        let gw = |peer| Work::Gemm { m: 33, n: 17, k: 29, lb: Layout::Col, dtype: DType::F32, peer };
        let (ours, peer) = (run(&backend, gw(false), 1).unwrap(), run(&backend, gw(true), 1).unwrap());
        assert!((ours.checksum - peer.checksum).abs() < 1e-3 * (1.0 + peer.checksum.abs()), "{ours:?} {peer:?}");
        assert_eq!(run(&backend, gw(false), 0).unwrap().checksum, 0.0);
    }
}
