//! A stream: where ops are queued. On CUDA a driver stream; on the CPU the rayon pool (ops run
//! synchronously there, so "synchronize" is a no-op).

use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::backend::{Cpu, Gpu};
use crate::error::{DriverContext, Result};

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
            Stream::Cuda { stream, .. } => stream.synchronize().ctx(|| "synchronizing a stream".into()),
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
