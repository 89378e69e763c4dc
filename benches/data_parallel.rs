//! The data-parallel example: one linear layer `y = gelu(x Wᵀ + b)` with the batch split
//! over the GPUs (`WorkSplit`), forward and the two backward GEMMs on each GPU, and the
//! weight gradient all-reduced (NCCL, one process driving every GPU) on a second stream
//! while the input gradient is still being computed. The result is checked against the
//! same step on one GPU. gelu's derivative is not one of the ops, so the gradient at the
//! pre-activation (`dz`) is an input (random, fixed per sample): the backward is then
//! exactly `dW = dzᵀ x` and `dx = dz W`.

use std::time::{Duration, Instant};

use ferrotune::collective::{Communicator, Reduce, group_all_reduce_async};
use ferrotune::ops::gemm::{Gemm, Layout, gemm, linear_bias_gelu};
use ferrotune::{Backend, Buffer, Result, Stream, WorkSplit, bf16};

/// The layer and the global batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DpProblem {
    pub batch: usize,
    /// Output features (rows of W).
    pub n: usize,
    /// Input features.
    pub k: usize,
}

/// The step's inputs on the host (values repeat with a period of 2^20 elements, so large
/// problems fill in milliseconds).
pub struct DpInputs {
    pub x: Vec<bf16>,
    pub w: Vec<bf16>,
    pub bias: Vec<f32>,
    pub dz: Vec<bf16>,
}

fn pattern(len: usize, seed: u64) -> Vec<bf16> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let period: Vec<bf16> = (0..len.min(1 << 20))
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            bf16::from_f32(((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0)
        })
        .collect();
    (0..len).map(|i| period[i % period.len().max(1)]).collect()
}

impl DpInputs {
    pub fn new(p: DpProblem, seed: u64) -> DpInputs {
        DpInputs {
            x: pattern(p.batch * p.k, seed),
            w: pattern(p.n * p.k, seed + 1),
            bias: pattern(p.n, seed + 2).iter().map(|v| v.to_f32()).collect(),
            dz: pattern(p.batch * p.n, seed + 3),
        }
    }
}

/// One GPU's share: its rows of the batch, a copy of the weights, its gradients.
struct Replica {
    main: Stream,
    rows: usize,
    x: Buffer<bf16>,
    w: Buffer<bf16>,
    bias: Buffer<f32>,
    dz: Buffer<bf16>,
    y: Buffer<f32>,
    dw: Buffer<f32>,
    dx: Buffer<f32>,
}

/// The layer on one or more GPUs, ready to step.
pub struct DataParallel {
    p: DpProblem,
    pub plan: WorkSplit,
    replicas: Vec<Replica>,
    comms: Vec<Communicator>,
}

impl DataParallel {
    /// Splits the batch over `backends` (equal speeds, in multiples of 128 rows) and uploads
    /// each GPU's share; with more than one GPU, one NCCL communicator per GPU on a second
    /// stream.
    pub fn new(backends: &[Backend], p: DpProblem, inputs: &DpInputs, timeout: Duration) -> Result<DataParallel> {
        let plan = WorkSplit::new(p.batch, &vec![1.0; backends.len()], 128)?;
        let mut replicas = Vec::new();
        let mut comm_streams = Vec::new();
        for (b, r) in backends.iter().zip(&plan.ranges) {
            let main = b.new_stream()?;
            let rows = r.len();
            replicas.push(Replica {
                x: Buffer::from_slice(&main, &inputs.x[r.start * p.k..r.end * p.k])?,
                w: Buffer::from_slice(&main, &inputs.w)?,
                bias: Buffer::from_slice(&main, &inputs.bias)?,
                dz: Buffer::from_slice(&main, &inputs.dz[r.start * p.n..r.end * p.n])?,
                y: Buffer::zeros(&main, rows * p.n)?,
                dw: Buffer::zeros(&main, p.n * p.k)?,
                dx: Buffer::zeros(&main, rows * p.k)?,
                main,
                rows,
            });
            comm_streams.push(b.new_stream()?);
        }
        let comms = if backends.len() > 1 { Communicator::for_devices(&comm_streams, timeout)? } else { Vec::new() };
        Ok(DataParallel { p, plan, replicas, comms })
    }

    /// One training step: forward, `dW` on every GPU, the all-reduce of `dW` on the
    /// communication streams overlapped with `dx` on the compute streams; returns when all
    /// of it is done.
    pub fn step(&mut self) -> Result<()> {
        let DpProblem { n, k, .. } = self.p;
        for r in &mut self.replicas {
            let m = r.rows;
            linear_bias_gelu::<bf16, f32>(&r.main, &r.x.all(), &r.w.all(), &r.bias.all(), &mut r.y.all_mut(), m, n, k)?;
            // dW (n x k) = dzᵀ (n x m, dz stored m x n row-major: column-major n x m) · x (m x k).
            let g = Gemm::new(n, k, m).layouts(Layout::Col, Layout::Row);
            gemm::<bf16, f32>(&r.main, &g, &r.dz.all(), &r.x.all(), None, None, &mut r.dw.all_mut())?;
        }
        if !self.comms.is_empty() {
            // The communication streams start when dW is written.
            for (r, c) in self.replicas.iter().zip(&self.comms) {
                c.wait_for(&r.main)?;
            }
            let mut views: Vec<_> = self.replicas.iter_mut().map(|r| r.dw.all_mut()).collect();
            group_all_reduce_async(&mut self.comms, &mut views, Reduce::Sum)?;
        }
        for r in &mut self.replicas {
            // dx (m x k) = dz (m x n) · W (n x k), while dW is being reduced.
            let g = Gemm::new(r.rows, k, n);
            gemm::<bf16, f32>(&r.main, &g, &r.dz.all(), &r.w.all(), None, None, &mut r.dx.all_mut())?;
        }
        for r in &self.replicas {
            r.main.synchronize()?;
        }
        self.comms.iter_mut().try_for_each(|c| c.synchronize())
    }

    /// The (reduced) weight gradient as GPU 0 holds it.
    pub fn dw(&self) -> Result<Vec<f32>> {
        self.replicas[0].dw.to_vec(&self.replicas[0].main)
    }

    /// The input gradient, every GPU's rows in batch order.
    pub fn dx(&self) -> Result<Vec<f32>> {
        let mut out = Vec::new();
        for r in &self.replicas {
            out.extend(r.dx.to_vec(&r.main)?);
        }
        Ok(out)
    }

    /// Median wall-clock time of `iters` steps after `warmup`, in ms.
    pub fn time_step(&mut self, warmup: usize, iters: usize) -> Result<f64> {
        for _ in 0..warmup {
            self.step()?;
        }
        let mut t = Vec::new();
        for _ in 0..iters.max(1) {
            let t0 = Instant::now();
            self.step()?;
            t.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        t.sort_by(f64::total_cmp);
        Ok(t[t.len() / 2])
    }
}

/// Worst `|a - b| / (max |b| )` over two results of the same step (0 for empty ones; a
/// length mismatch or NaN is infinitely wrong).
pub fn relative_difference(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs() as f64)).max(f64::MIN_POSITIVE);
    a.iter().zip(b).fold(0.0f64, |w, (x, y)| {
        let d = (*x as f64 - *y as f64).abs() / scale;
        if d.is_nan() { f64::INFINITY } else { w.max(d) }
    })
}

/// Worst error of `samples` entries of `dW` against an f64 product of the inputs, relative
/// to `sqrt(Σ terms²)`.
pub fn check_dw_samples(p: DpProblem, inputs: &DpInputs, dw: &[f32], samples: usize) -> f64 {
    let mut worst = 0.0f64;
    for s in 0..samples {
        let (i, j) = ((s * 7919 + 3) % p.n, (s * 104_729 + 11) % p.k);
        let (mut want, mut sq) = (0.0f64, 0.0f64);
        for r in 0..p.batch {
            let t = inputs.dz[r * p.n + i].to_f64() * inputs.x[r * p.k + j].to_f64();
            want += t;
            sq += t * t;
        }
        let err = (dw[i * p.k + j] as f64 - want).abs() / (sq.sqrt() + f64::MIN_POSITIVE);
        worst = worst.max(if err.is_nan() { f64::INFINITY } else { err });
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_are_relative_and_nan_is_infinite() {
        assert_eq!(relative_difference(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert!((relative_difference(&[1.0, 2.2], &[1.0, 2.0]) - 0.1).abs() < 1e-6);
        assert_eq!(relative_difference(&[f32::NAN], &[1.0]), f64::INFINITY);
        assert_eq!(relative_difference(&[1.0], &[1.0, 2.0]), f64::INFINITY);
    }

    #[test]
    fn the_cpu_backend_runs_the_single_device_step_and_matches_the_f64_reference() {
        let p = DpProblem { batch: 256, n: 32, k: 48 };
        let inputs = DpInputs::new(p, 5);
        let cpu = Backend::new(ferrotune::BackendChoice::Cpu).unwrap();
        let mut dp = DataParallel::new(std::slice::from_ref(&cpu), p, &inputs, Duration::from_secs(5)).unwrap();
        dp.step().unwrap();
        let dw = dp.dw().unwrap();
        assert!(check_dw_samples(p, &inputs, &dw, 64) < 1e-5);
        // dx = dz W, one sample checked exactly.
        let dx = dp.dx().unwrap();
        let (r, j) = (200, 7);
        let want: f64 = (0..p.n).map(|i| inputs.dz[r * p.n + i].to_f64() * inputs.w[i * p.k + j].to_f64()).sum();
        assert!((dx[r * p.k + j] as f64 - want).abs() < 1e-4 * (1.0 + want.abs()), "{} vs {want}", dx[r * p.k + j]);
    }
}
