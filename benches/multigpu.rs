//! The multi-GPU bench (`cargo xtask bench --ops multi-gpu`): peer-copy bandwidth both ways
//! (peer path and the staged fallback), NCCL all-reduce bus bandwidth from 1 KiB to 1 GiB
//! beside torch.distributed's NCCL all-reduce run by the same call, and the data-parallel
//! step on one GPU vs all of them. Every number is checked before it is timed.

use std::time::{Duration, Instant};

use ferrotune::collective::{Communicator, Reduce, group_all_reduce_async};
use ferrotune::{Buffer, CopyMode, CopyPath, DeviceSet, Error, Result};
use serde::{Deserialize, Serialize};

use crate::data_parallel::{DataParallel, DpInputs, DpProblem, check_dw_samples, relative_difference};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CopyRow {
    pub from: usize,
    pub to: usize,
    /// `peer` or `staged`.
    pub path: String,
    pub bytes: usize,
    pub median_ms: f64,
    pub gbps: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AllReduceRow {
    pub bytes: usize,
    pub ours_ms: f64,
    /// Bus bandwidth, `bytes / time · 2 (n-1) / n` (nccl-tests' definition), GB/s.
    pub ours_busbw: f64,
    pub torch_ms: Option<f64>,
    pub torch_busbw: Option<f64>,
    /// `ours_busbw / torch_busbw`.
    pub ratio: Option<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DpRow {
    pub problem: [usize; 3],
    pub gpus: usize,
    pub step_ms: f64,
    /// Step on one GPU / step on `gpus`.
    pub scaling: f64,
    /// Largest difference of dW and dx from the one-GPU step, relative to their largest value.
    pub dw_difference: f64,
    pub dx_difference: f64,
    /// Worst error of sampled dW entries against an f64 reference.
    pub dw_reference_error: f64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MultiGpuReport {
    pub schema: String,
    pub devices: Vec<String>,
    pub driver: String,
    pub nccl: String,
    pub date: String,
    pub commit: String,
    pub topology: Vec<String>,
    pub copies: Vec<CopyRow>,
    pub all_reduce: Vec<AllReduceRow>,
    pub torch_note: String,
    pub data_parallel: Vec<DpRow>,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct MultiGpuOptions {
    pub copy_bytes: usize,
    pub sizes: Vec<usize>,
    pub warmup: usize,
    pub iters: usize,
    pub dp: DpProblem,
    pub timeout: Duration,
    /// torch.distributed's numbers for the same sizes, when its script ran.
    pub torch: Option<Vec<(usize, f64)>>,
}

/// 1 KiB, 4 KiB, … 1 GiB.
pub fn default_sizes() -> Vec<usize> {
    (0..=10).map(|i| 1024usize << (2 * i)).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Peer-copy bandwidth between the set's devices 0 and 1, both ways, peer and staged.
pub fn copies(set: &DeviceSet, bytes: usize, iters: usize) -> Result<Vec<CopyRow>> {
    let n = bytes / 4;
    let mut rows = Vec::new();
    for (from, to) in [(0, 1), (1, 0)] {
        let (sa, sb) = (set.backend(from).new_stream()?, set.backend(to).new_stream()?);
        let data: Vec<f32> = (0..n).map(|i| (i % 65_521) as f32).collect();
        let src = Buffer::from_slice(&sa, &data)?;
        sa.synchronize()?;
        for mode in [CopyMode::Auto, CopyMode::Staged] {
            let mut dst = Buffer::<f32>::zeros(&sb, n)?;
            let path = set.copy((from, &src.all()), (to, &mut dst.all_mut()), &sb, mode)?;
            sb.synchronize()?;
            if dst.to_vec(&sb)? != data {
                return Err(Error::InvalidConfig {
                    op: "peer copy",
                    why: format!("{from}->{to} {path:?}: wrong data"),
                });
            }
            let mut t = Vec::new();
            for _ in 0..iters.max(1) {
                let t0 = Instant::now();
                set.copy((from, &src.all()), (to, &mut dst.all_mut()), &sb, mode)?;
                sb.synchronize()?;
                t.push(t0.elapsed().as_secs_f64() * 1e3);
            }
            let ms = median(t);
            let name = match path {
                CopyPath::Peer => "peer",
                CopyPath::Staged => "staged",
                CopyPath::SameDevice => "same-device",
            };
            rows.push(CopyRow {
                from,
                to,
                path: name.into(),
                bytes: n * 4,
                median_ms: ms,
                gbps: (n * 4) as f64 / (ms * 1e-3) / 1e9,
            });
        }
    }
    Ok(rows)
}

/// Our all-reduce (one process, every GPU, group calls) over `sizes` bytes of f32.
pub fn all_reduce(set: &DeviceSet, o: &MultiGpuOptions) -> Result<Vec<AllReduceRow>> {
    let g = set.len();
    let streams = set.backends().iter().map(|b| b.new_stream()).collect::<Result<Vec<_>>>()?;
    let mut comms = Communicator::for_devices(&streams, o.timeout)?;
    let mut rows = Vec::new();
    for &bytes in &o.sizes {
        let n = bytes / 4;
        let mut bufs =
            (0..g).map(|r| Buffer::from_slice(&streams[r], &vec![(r + 1) as f32; n])).collect::<Result<Vec<_>>>()?;
        {
            let mut views: Vec<_> = bufs.iter_mut().map(|b| b.all_mut()).collect();
            group_all_reduce_async(&mut comms, &mut views, Reduce::Sum)?;
        }
        comms.iter_mut().try_for_each(|c| c.synchronize())?;
        let want = (g * (g + 1) / 2) as f32;
        for (r, b) in bufs.iter().enumerate() {
            let v = b.to_vec(&streams[r])?;
            if let Some(i) = v.iter().position(|x| *x != want) {
                return Err(Error::InvalidConfig {
                    op: "all_reduce",
                    why: format!("rank {r}[{i}] = {} != {want}", v[i]),
                });
            }
        }
        let mut views: Vec<_> = bufs.iter_mut().map(|b| b.all_mut()).collect();
        for _ in 0..o.warmup {
            group_all_reduce_async(&mut comms, &mut views, Reduce::Sum)?;
        }
        comms.iter_mut().try_for_each(|c| c.synchronize())?;
        let iters = if bytes >= 256 << 20 { o.iters.min(10) } else { o.iters };
        let mut t = Vec::new();
        for _ in 0..3 {
            let t0 = Instant::now();
            for _ in 0..iters.max(1) {
                group_all_reduce_async(&mut comms, &mut views, Reduce::Sum)?;
            }
            comms.iter_mut().try_for_each(|c| c.synchronize())?;
            t.push(t0.elapsed().as_secs_f64() * 1e3 / iters.max(1) as f64);
        }
        let ms = median(t);
        let busbw = |ms: f64| bytes as f64 / (ms * 1e-3) / 1e9 * 2.0 * (g - 1) as f64 / g as f64;
        let torch_ms = o.torch.as_ref().and_then(|t| t.iter().find(|(b, _)| *b == bytes).map(|(_, ms)| *ms));
        rows.push(AllReduceRow {
            bytes,
            ours_ms: ms,
            ours_busbw: busbw(ms),
            torch_ms,
            torch_busbw: torch_ms.map(busbw),
            ratio: torch_ms.map(|t| t / ms),
        });
    }
    Ok(rows)
}

/// The data-parallel step on GPU 0 alone and on every GPU of the set, checked against each
/// other and against an f64 reference.
pub fn data_parallel(set: &DeviceSet, o: &MultiGpuOptions) -> Result<Vec<DpRow>> {
    let p = o.dp;
    let inputs = DpInputs::new(p, 7);
    let mut one = DataParallel::new(&set.backends()[..1], p, &inputs, o.timeout)?;
    one.step()?;
    let (dw1, dx1) = (one.dw()?, one.dx()?);
    let ref1 = check_dw_samples(p, &inputs, &dw1, 8);
    let t1 = one.time_step(2, o.iters.min(10))?;
    drop(one);
    let mut all = DataParallel::new(set.backends(), p, &inputs, o.timeout)?;
    all.step()?;
    let (dw, dx) = (all.dw()?, all.dx()?);
    let row = |gpus, step_ms: f64, dwd, dxd, refe| DpRow {
        problem: [p.batch, p.n, p.k],
        gpus,
        step_ms,
        scaling: t1 / step_ms,
        dw_difference: dwd,
        dx_difference: dxd,
        dw_reference_error: refe,
    };
    let (dwd, dxd) = (relative_difference(&dw, &dw1), relative_difference(&dx, &dx1));
    let refn = check_dw_samples(p, &inputs, &dw, 8);
    if dwd > 1e-3 || dxd > 1e-3 || refn > 1e-3 || ref1 > 1e-3 {
        return Err(Error::InvalidConfig {
            op: "data parallel",
            why: format!("results differ: dW {dwd:.2e}, dx {dxd:.2e}, reference {ref1:.2e} / {refn:.2e}"),
        });
    }
    let tn = all.time_step(2, o.iters.min(10))?;
    Ok(vec![row(1, t1, 0.0, 0.0, ref1), row(set.len(), tn, dwd, dxd, refn)])
}

/// Parses torch_allreduce.py's JSON: `{"rows": [{"bytes": .., "ms": ..}, ..]}`.
pub fn parse_torch(text: &str) -> std::result::Result<Vec<(usize, f64)>, String> {
    #[derive(Deserialize)]
    struct Row {
        bytes: usize,
        ms: f64,
    }
    #[derive(Deserialize)]
    struct Doc {
        rows: Vec<Row>,
    }
    let d: Doc = serde_json::from_str(text).map_err(|e| format!("torch all-reduce JSON: {e}"))?;
    Ok(d.rows.into_iter().map(|r| (r.bytes, r.ms)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_run_from_1_kib_to_1_gib_and_torch_rows_parse() {
        let s = default_sizes();
        assert_eq!((s[0], *s.last().unwrap(), s.len()), (1024, 1 << 30, 11));
        let t = parse_torch(r#"{"rows": [{"bytes": 1024, "ms": 0.02, "busbw": 0.05}]}"#).unwrap();
        assert_eq!(t, [(1024, 0.02)]);
        assert!(parse_torch("{}").is_err());
    }
}
