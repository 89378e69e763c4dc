//! A stream: where ops are queued. On CUDA a driver stream; on the CPU the rayon pool (ops run
//! synchronously there, so "synchronize" is a no-op).

use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::backend::{Cpu, Gpu};
use crate::error::{DriverContext, Error, Result};

#[derive(Clone)]
pub enum Stream {
    Cuda { stream: Arc<CudaStream>, gpu: Arc<Gpu> },
    Cpu(Arc<Cpu>),
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stream::Cuda { .. } => "Stream::Cuda",
            Stream::Cpu(_) => "Stream::Cpu",
        })
    }
}

impl Stream {
    pub fn backend_name(&self) -> &'static str {
        match self {
            Stream::Cuda { .. } => "cuda",
            Stream::Cpu(_) => "cpu",
        }
    }

    /// Waits for everything queued on this stream.
    pub fn synchronize(&self) -> Result<()> {
        match self {
            Stream::Cuda { stream, gpu } => {
                refuse_in_capture(gpu, stream, "synchronize")?;
                stream.synchronize().ctx(|| "synchronizing a stream".into())
            }
            Stream::Cpu(_) => Ok(()),
        }
    }

    /// The GPU behind a CUDA stream.
    pub fn gpu(&self) -> Option<&Arc<Gpu>> {
        match self {
            Stream::Cuda { gpu, .. } => Some(gpu),
            Stream::Cpu(_) => None,
        }
    }

    /// The cudarc stream, for interop (cuBLAS handles, custom launches).
    pub fn cuda_stream(&self) -> Option<&Arc<CudaStream>> {
        match self {
            Stream::Cuda { stream, .. } => Some(stream),
            Stream::Cpu(_) => None,
        }
    }
}

/// A typed error for calls that wait for the device or copy to host memory while `stream`
/// is being captured into a graph (the driver would invalidate the capture).
pub(crate) fn refuse_in_capture(gpu: &Gpu, stream: &CudaStream, op: &'static str) -> Result<()> {
    if gpu.pool.is_capturing(stream) {
        return Err(Error::Capture {
            op,
            why: "the stream is being captured into a graph: host waits and host copies cannot be captured".into(),
        });
    }
    Ok(())
}
