//! Page-locked host buffers and asynchronous copies between them and device buffers: the
//! copies return at once and complete in stream order.

use cudarc::driver::PinnedHostSlice;

use crate::buffer::{Scalar, ViewMut};
use crate::error::{DriverContext, Error, Result};
use crate::stream::Stream;

/// Page-locked host memory (CUDA backend only).
pub struct PinnedBuffer<T: Scalar> {
    inner: PinnedHostSlice<T>,
}

impl<T: Scalar> PinnedBuffer<T> {
    /// Allocates `len` page-locked elements, zero-filled.
    pub fn zeros(stream: &Stream, len: usize) -> Result<PinnedBuffer<T>> {
        let Some(gpu) = stream.gpu() else {
            return Err(Error::BackendMismatch {
                op: "PinnedBuffer::zeros",
                what: "stream",
                expected: "cuda",
                got: "cpu",
            });
        };
        // SAFETY: the memory is uninitialised until the fill below; nothing reads it before.
        // Flags 0 (not write-combined) keep host reads of the buffer fast.
        let mut inner = unsafe { gpu.ctx.alloc_pinned_with_flags::<T>(len, 0) }
            .ctx(|| format!("allocating {len} pinned host elements"))?;
        inner.as_mut_slice().ctx(|| "mapping pinned memory".into())?.fill(T::default());
        Ok(PinnedBuffer { inner })
    }

    pub fn len(&self) -> usize {
        self.inner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.len() == 0
    }

    /// The host-side contents (waits for pending copies into the buffer).
    pub fn as_slice(&self) -> Result<&[T]> {
        self.inner.as_slice().ctx(|| "reading pinned memory".into())
    }

    /// The host-side contents, writable (waits for pending copies out of the buffer).
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.inner.as_mut_slice().ctx(|| "writing pinned memory".into())
    }

    /// Queues a host-to-device copy of the whole buffer into `dst` (same length) on `stream`.
    pub fn copy_to_device_async(&self, stream: &Stream, dst: &mut ViewMut<'_, T>) -> Result<()> {
        if dst.len() != self.len() {
            return Err(Error::ShapeMismatch {
                op: "copy_to_device_async",
                what: "destination",
                expected: self.len(),
                got: dst.len(),
            });
        }
        match (stream.cuda_stream(), dst) {
            (Some(s), ViewMut::Cuda(d)) => s.memcpy_htod(&self.inner, d).ctx(|| "queuing a host-to-device copy".into()),
            _ => Err(Error::BackendMismatch {
                op: "copy_to_device_async",
                what: "destination",
                expected: "cuda",
                got: "cpu",
            }),
        }
    }

    /// Queues a device-to-host copy from `src` (same length) into this buffer on `stream`.
    pub fn copy_from_device_async(&mut self, stream: &Stream, src: &crate::buffer::View<'_, T>) -> Result<()> {
        if src.len() != self.len() {
            return Err(Error::ShapeMismatch {
                op: "copy_from_device_async",
                what: "source",
                expected: self.len(),
                got: src.len(),
            });
        }
        match (stream.cuda_stream(), src) {
            (Some(s), crate::buffer::View::Cuda(v)) => {
                s.memcpy_dtoh(v, &mut self.inner).ctx(|| "queuing a device-to-host copy".into())
            }
            _ => Err(Error::BackendMismatch {
                op: "copy_from_device_async",
                what: "source",
                expected: "cuda",
                got: "cpu",
            }),
        }
    }
}
