//! The ceilings every row is judged against, measured first in the same run: copy bandwidth
//! (our copy kernel, and the driver's DtoD copy or a parallel memcpy) and the best peer GEMM
//! rate per math (cuBLAS on CUDA; `matrixmultiply` SGEMM across the pool on the CPU).

use ferrotune::config::ElemConfig;
use ferrotune::peer::{CublasGemm, GemmMath, GemmShape, PeerError};
use ferrotune::profiler::Profiler;
use ferrotune::{Backend, Buffer, Cpu, DType, ElemOp, Stream, ops};
use ferrotune_autotune::measure::{Repeat, Stats, time_on_stream};
use ferrotune_testkit::Rng;
use rayon::prelude::*;

use crate::error::Result;
use crate::report::{Ceiling, CeilingKind};

/// What the compute ceilings run.
#[derive(Clone, Debug, PartialEq)]
pub struct CeilingOptions {
    /// Edge of the square GEMM (8192 on the GPU, 4096 in --quick).
    pub gemm_size: usize,
    /// The maths to measure on CUDA (the CPU peer is f32 only).
    pub gemm_maths: Vec<GemmMath>,
    pub gemm_repeat: Repeat,
    /// Bytes of the copy ceiling's source (and destination).
    pub copy_bytes: usize,
    pub copy_repeat: Repeat,
}

fn bandwidth(name: &str, bytes: usize, stats: Stats) -> Ceiling {
    Ceiling {
        name: name.into(),
        kind: CeilingKind::Bandwidth,
        math: None,
        shape: vec![bytes],
        bytes: bytes as u64,
        flops: 0,
        bytes_per_s: bytes as f64 / (stats.median_ms * 1e-3),
        flops_per_s: 0.0,
        stats,
    }
}

fn compute(name: String, math: &str, shape: GemmShape, element_bytes: usize, stats: Stats) -> Ceiling {
    let secs = stats.median_ms * 1e-3;
    Ceiling {
        name,
        kind: CeilingKind::Compute,
        math: Some(math.into()),
        shape: vec![shape.m, shape.n, shape.k],
        bytes: shape.min_bytes(element_bytes),
        flops: shape.flops(),
        bytes_per_s: shape.min_bytes(element_bytes) as f64 / secs,
        flops_per_s: shape.flops() as f64 / secs,
        stats,
    }
}

/// Measures every ceiling; a peer that cannot run here (no cuBLAS, a cuBLAS failure) adds a
/// note instead of a ceiling.
pub fn measure(
    backend: &Backend,
    s: &Stream,
    opts: &CeilingOptions,
    prof: &mut Profiler,
    notes: &mut Vec<String>,
) -> Result<Vec<Ceiling>> {
    let mut out = copy_ceilings(backend, s, opts, prof)?;
    match backend {
        Backend::Cuda(_) => {
            for &math in &opts.gemm_maths {
                match cublas_ceiling(s, math, GemmShape::cube(opts.gemm_size), opts.gemm_repeat, prof) {
                    Ok(c) => out.push(c),
                    Err(crate::BenchError::Peer(e @ PeerError::Unavailable(_))) => {
                        notes.push(format!("no compute ceilings: {e}"));
                        break;
                    }
                    // A peer that fails is a missing roof, not a failed bench: our rows still
                    // have the bandwidth roof, and the note says what went wrong.
                    Err(e) => notes.push(format!("no {} compute ceiling: {e}", math.name())),
                }
            }
        }
        Backend::Cpu(cpu) => out.push(cpu_sgemm_ceiling(cpu, s, opts.gemm_size, opts.gemm_repeat, prof)?),
    }
    Ok(out)
}

/// Our copy kernel (f32, heuristic config) and the driver's DtoD copy on CUDA, or a parallel
/// memcpy in the backend's pool on the CPU. Bytes moved: read once plus written once.
fn copy_ceilings(backend: &Backend, s: &Stream, opts: &CeilingOptions, prof: &mut Profiler) -> Result<Vec<Ceiling>> {
    let n = opts.copy_bytes / 4;
    let mut rng = Rng::new(1);
    let src = prof.upload(s, &rng.vec::<f32>(n, -1.0, 1.0))?;
    let mut dst = prof.zeros::<f32>(s, n)?;
    let bytes = 2 * n * 4;
    let mut out = Vec::new();
    let cfg = ElemConfig::heuristic(ElemOp::Copy, DType::F32, backend.device());
    let id = prof.begin("ceiling: copy kernel (f32)", s)?;
    let st = time_on_stream(s, opts.copy_repeat, |_| {
        ops::run_elementwise(s, ElemOp::Copy, &cfg, &[&src.all()], &mut dst.all_mut(), 0.0)
    })?;
    prof.end(id, s)?;
    out.push(bandwidth("copy kernel (f32)", bytes, st));
    match (backend, s.cuda_stream(), &src, &mut dst) {
        (Backend::Cuda(_), Some(cs), Buffer::Cuda(a), Buffer::Cuda(b)) => {
            let id = prof.begin("ceiling: driver memcpy DtoD", s)?;
            let st = time_on_stream(s, opts.copy_repeat, |_| {
                cs.memcpy_dtod(a, b).map_err(|e| ferrotune::Error::Driver { context: "cuMemcpyDtoD".into(), source: e })
            })?;
            prof.end(id, s)?;
            out.push(bandwidth("driver memcpy DtoD", bytes, st));
        }
        (Backend::Cpu(cpu), _, Buffer::Cpu(a), Buffer::Cpu(b)) => {
            let id = prof.begin("ceiling: parallel memcpy", s)?;
            let st = time_on_stream(s, opts.copy_repeat, |_| {
                cpu.install(|| {
                    b.par_chunks_mut(1 << 16).zip(a.par_chunks(1 << 16)).for_each(|(d, s)| d.copy_from_slice(s))
                });
                Ok(())
            })?;
            prof.end(id, s)?;
            out.push(bandwidth("parallel memcpy", bytes, st));
        }
        _ => {}
    }
    prof.free(s, src)?;
    prof.free(s, dst)?;
    Ok(out)
}

/// One cuBLAS GEMM of `math`, checked against an f64 product on sampled entries, then timed
/// like every op (events around each launch).
fn cublas_ceiling(
    s: &Stream,
    math: GemmMath,
    shape: GemmShape,
    repeat: Repeat,
    prof: &mut Profiler,
) -> Result<Ceiling> {
    let mut gemm = CublasGemm::new(s, math, shape)?;
    let held = gemm.operand_bytes();
    prof.track_alloc(s, held)?;
    let name = format!("cuBLAS GEMM {} {}³", math.name(), shape.m);
    // A ceiling from a GEMM that computes garbage is no ceiling: check it first.
    let timed = gemm.verify(16).map_err(Into::into).and_then(|_| time_gemm(s, &mut gemm, repeat, prof, &name));
    drop(gemm);
    prof.track_free(s, held)?;
    Ok(compute(name, math.name(), shape, math.element_bytes(), timed?))
}

fn time_gemm(s: &Stream, gemm: &mut CublasGemm, repeat: Repeat, prof: &mut Profiler, name: &str) -> Result<Stats> {
    let id = prof.begin(format!("ceiling: {name}"), s)?;
    // time_on_stream speaks the runtime's error type: keep the first peer error aside.
    let mut failed = None;
    let st = time_on_stream(s, repeat, |_| {
        if let Err(e) = gemm.launch() {
            failed.get_or_insert(e);
        }
        Ok(())
    })?;
    prof.end(id, s)?;
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(st),
    }
}

/// Row-major SGEMM `C = A · B` of `size`³ with `matrixmultiply`, rows of C split across the
/// backend's pool (each thread one single-threaded call on its band).
fn cpu_sgemm_ceiling(cpu: &Cpu, s: &Stream, size: usize, repeat: Repeat, prof: &mut Profiler) -> Result<Ceiling> {
    let shape = GemmShape::cube(size);
    let mut rng = Rng::new(3);
    let a: Vec<f32> = rng.vec(size * size, -1.0, 1.0);
    let b: Vec<f32> = rng.vec(size * size, -1.0, 1.0);
    let mut c = vec![0f32; size * size];
    prof.track_alloc(s, 3 * size * size * 4)?;
    let name = format!("matrixmultiply SGEMM f32 {size}³");
    let id = prof.begin(format!("ceiling: {name}"), s)?;
    let st = time_on_stream(s, repeat, |_| {
        sgemm_bands(cpu, size, &a, &b, &mut c);
        Ok(())
    })?;
    prof.end(id, s)?;
    prof.track_free(s, 3 * size * size * 4)?;
    Ok(compute(name, "f32", shape, 4, st))
}

/// `c = a · b` for row-major `size`×`size` matrices: rows of C split into one band per
/// thread of the pool, each band one single-threaded `matrixmultiply` call.
fn sgemm_bands(cpu: &Cpu, size: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    assert!(a.len() == size * size && b.len() == size * size && c.len() == size * size);
    let band = size.div_ceil(cpu.threads().max(1)).max(1);
    cpu.install(|| {
        c.par_chunks_mut(band * size).zip(a.par_chunks(band * size)).for_each(|(c_band, a_band)| {
            let rows = a_band.len() / size;
            // SAFETY: a_band is rows×size, b is size×size and c_band is rows×size, all
            // row-major with the strides given (checked above); the slices outlive the call.
            unsafe {
                matrixmultiply::sgemm(
                    rows,
                    size,
                    size,
                    1.0,
                    a_band.as_ptr(),
                    size as isize,
                    1,
                    b.as_ptr(),
                    size as isize,
                    1,
                    0.0,
                    c_band.as_mut_ptr(),
                    size as isize,
                    1,
                )
            }
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_sgemm_peer_computes_the_product() {
        // A 2-thread pool and an edge that does not divide evenly: the bands cover every row.
        let cpu = Cpu::new(2).unwrap();
        let n = 33;
        let mut rng = Rng::new(9);
        let (a, b): (Vec<f32>, Vec<f32>) = (rng.vec(n * n, -1.0, 1.0), rng.vec(n * n, -1.0, 1.0));
        let mut c = vec![f32::NAN; n * n];
        sgemm_bands(&cpu, n, &a, &b, &mut c);
        for i in 0..n {
            for j in 0..n {
                let want: f64 = (0..n).map(|k| a[i * n + k] as f64 * b[k * n + j] as f64).sum();
                assert!((c[i * n + j] as f64 - want).abs() < 1e-4, "c[{i}][{j}] = {} != {want}", c[i * n + j]);
            }
        }
    }

    #[test]
    fn the_cpu_sgemm_ceiling_counts_work_and_memory() {
        let cpu = Cpu::new(2).unwrap();
        let s = Backend::Cpu(cpu.clone()).stream();
        let mut prof = Profiler::new(&s).unwrap();
        let c = cpu_sgemm_ceiling(&cpu, &s, 64, Repeat { warmup: 0, iters: 2 }, &mut prof).unwrap();
        assert_eq!((c.flops, c.shape.clone()), (2 * 64 * 64 * 64, vec![64, 64, 64]));
        assert!(c.flops_per_s > 0.0 && c.kind == CeilingKind::Compute && c.math.as_deref() == Some("f32"));
        assert_eq!((prof.memory().peak_bytes(), prof.memory().current_bytes()), (3 * 64 * 64 * 4, 0));
    }
}
