//! Buffers on either backend, and the borrowed views ops take (a view may start at any
//! element offset, aligned or not).

use std::ops::RangeBounds;

use cudarc::driver::{CudaView, CudaViewMut, DeviceRepr, ValidAsZeroBits};
use ferrotune_kernels::Element;

use crate::error::{DriverContext, Error, Result};
use crate::pool::Pooled;
use crate::stream::Stream;

/// An element type the ops accept: f32, `half::f16`, `half::bf16`.
pub trait Scalar: Element + DeviceRepr + ValidAsZeroBits + Default + std::fmt::Debug + Unpin + Send + 'static {}
impl<T: Element + DeviceRepr + ValidAsZeroBits + Default + std::fmt::Debug + Unpin + Send + 'static> Scalar for T {}

/// An owned buffer on the stream's backend. CUDA buffers come from the device's caching
/// pool and return to it when dropped.
pub enum Buffer<T: Scalar> {
    Cuda(Pooled<T>),
    Cpu(Vec<T>),
}

impl<T: Scalar> Drop for Buffer<T> {
    fn drop(&mut self) {
        // CPU memory goes back to the host cache; CUDA memory returns to its pool by itself.
        if let Buffer::Cpu(v) = self {
            crate::pool::host::give(std::mem::take(v));
        }
    }
}

impl<T: Scalar> std::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer::{}({} elements)", if matches!(self, Buffer::Cuda(_)) { "Cuda" } else { "Cpu" }, self.len())
    }
}

/// A borrowed, writable range of a buffer.
pub enum ViewMut<'a, T: Scalar> {
    Cuda(CudaViewMut<'a, T>),
    Cpu(&'a mut [T]),
}

/// A read-only range of a buffer.
pub enum View<'a, T: Scalar> {
    Cuda(CudaView<'a, T>),
    Cpu(&'a [T]),
}

fn bounds(len: usize, r: impl RangeBounds<usize>) -> Result<(usize, usize)> {
    use std::ops::Bound::*;
    let start = match r.start_bound() {
        Included(&s) => s,
        Excluded(&s) => s + 1,
        Unbounded => 0,
    };
    let end = match r.end_bound() {
        Included(&e) => e + 1,
        Excluded(&e) => e,
        Unbounded => len,
    };
    if start > end || end > len {
        return Err(Error::BufferTooSmall { op: "slice", what: "buffer", needed: end.max(start), got: len });
    }
    Ok((start, end))
}

impl<T: Scalar> Buffer<T> {
    /// Copies `data` to a new buffer on `stream`'s backend.
    pub fn from_slice(stream: &Stream, data: &[T]) -> Result<Buffer<T>> {
        match stream {
            Stream::Cuda { stream, gpu } => {
                crate::stream::refuse_in_capture(gpu, stream, "Buffer::from_slice")?;
                let mut b = Pooled::uninit(&gpu.pool, stream, data.len())?;
                stream.memcpy_htod(data, &mut *b).ctx(|| format!("copying {} elements to the device", data.len()))?;
                Ok(Buffer::Cuda(b))
            }
            Stream::Cpu(_) => {
                let mut v = crate::pool::host::take(data.len());
                v.extend_from_slice(data);
                Ok(Buffer::Cpu(v))
            }
        }
    }

    /// A new zero-filled buffer of `len` elements.
    pub fn zeros(stream: &Stream, len: usize) -> Result<Buffer<T>> {
        match stream {
            Stream::Cuda { stream, gpu } => {
                let mut b = Pooled::uninit(&gpu.pool, stream, len)?;
                stream.memset_zeros(&mut *b).ctx(|| format!("zeroing {len} elements on the device"))?;
                Ok(Buffer::Cuda(b))
            }
            Stream::Cpu(_) => {
                let mut v = crate::pool::host::take(len);
                v.resize(len, T::default());
                Ok(Buffer::Cpu(v))
            }
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Buffer::Cuda(s) => s.len(),
            Buffer::Cpu(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn backend_name(&self) -> &'static str {
        match self {
            Buffer::Cuda(_) => "cuda",
            Buffer::Cpu(_) => "cpu",
        }
    }

    /// Marks the buffer as used on `stream` too (work queued there reads or writes it): its
    /// memory is reused only after that work has completed. A no-op on the CPU.
    pub fn record_stream(&self, stream: &Stream) -> Result<()> {
        match (self, stream) {
            (Buffer::Cuda(b), Stream::Cuda { stream, .. }) => b.record_stream(stream),
            (Buffer::Cpu(_), Stream::Cpu(_)) => Ok(()),
            (b, s) => Err(Error::BackendMismatch {
                op: "record_stream",
                what: "buffer",
                expected: s.backend_name(),
                got: b.backend_name(),
            }),
        }
    }

    /// Drops the buffer on behalf of `stream`: the stream that allocated it or one recorded
    /// with [`Buffer::record_stream`]. Another stream is a typed error (the memory still
    /// returns to the pool, on its own stream).
    pub fn release_on(self, stream: &Stream) -> Result<()> {
        match (&self, stream) {
            (Buffer::Cuda(_), Stream::Cuda { stream, .. }) => {
                let mut this = std::mem::ManuallyDrop::new(self);
                let Buffer::Cuda(b) = &mut *this else { unreachable!("matched above") };
                // SAFETY: `this` is never dropped nor used again, so the slice is moved out once.
                let b = unsafe { std::ptr::read(b) };
                b.release_on(stream)
            }
            (Buffer::Cpu(_), Stream::Cpu(_)) => Ok(()),
            (b, s) => Err(Error::BackendMismatch {
                op: "release_on",
                what: "buffer",
                expected: s.backend_name(),
                got: b.backend_name(),
            }),
        }
    }

    /// Copies the buffer to a host vector (waits for the stream's pending work on it).
    pub fn to_vec(&self, stream: &Stream) -> Result<Vec<T>> {
        match (self, stream) {
            (Buffer::Cuda(s), Stream::Cuda { stream, gpu }) => {
                crate::stream::refuse_in_capture(gpu, stream, "to_vec")?;
                stream.clone_dtoh(&**s).ctx(|| format!("copying {} elements to the host", s.len()))
            }
            (Buffer::Cpu(v), _) => Ok(v.clone()),
            (Buffer::Cuda(_), Stream::Cpu(_)) => {
                Err(Error::BackendMismatch { op: "to_vec", what: "buffer", expected: "cpu", got: "cuda" })
            }
        }
    }

    /// Overwrites the buffer with `data` (same length).
    pub fn copy_from(&mut self, stream: &Stream, data: &[T]) -> Result<()> {
        if data.len() != self.len() {
            return Err(Error::ShapeMismatch {
                op: "copy_from",
                what: "source",
                expected: self.len(),
                got: data.len(),
            });
        }
        match (self, stream) {
            (Buffer::Cuda(s), Stream::Cuda { stream, gpu }) => {
                crate::stream::refuse_in_capture(gpu, stream, "copy_from")?;
                stream.memcpy_htod(data, &mut **s).ctx(|| format!("copying {} elements to the device", data.len()))
            }
            (Buffer::Cpu(v), _) => {
                v.copy_from_slice(data);
                Ok(())
            }
            (Buffer::Cuda(_), Stream::Cpu(_)) => {
                Err(Error::BackendMismatch { op: "copy_from", what: "buffer", expected: "cpu", got: "cuda" })
            }
        }
    }

    /// A read-only range (element offsets; need not be aligned).
    pub fn view(&self, r: impl RangeBounds<usize>) -> Result<View<'_, T>> {
        let (s, e) = bounds(self.len(), r)?;
        Ok(match self {
            Buffer::Cuda(b) => View::Cuda(b.slice(s..e)),
            Buffer::Cpu(v) => View::Cpu(&v[s..e]),
        })
    }

    /// The whole buffer, read-only.
    pub fn all(&self) -> View<'_, T> {
        match self {
            Buffer::Cuda(b) => View::Cuda(b.as_view()),
            Buffer::Cpu(v) => View::Cpu(v),
        }
    }

    /// A writable range (element offsets; need not be aligned).
    pub fn view_mut(&mut self, r: impl RangeBounds<usize>) -> Result<ViewMut<'_, T>> {
        let (s, e) = bounds(self.len(), r)?;
        Ok(match self {
            Buffer::Cuda(b) => ViewMut::Cuda(b.slice_mut(s..e)),
            Buffer::Cpu(v) => ViewMut::Cpu(&mut v[s..e]),
        })
    }

    /// The whole buffer, writable.
    pub fn all_mut(&mut self) -> ViewMut<'_, T> {
        match self {
            Buffer::Cuda(b) => ViewMut::Cuda(b.as_view_mut()),
            Buffer::Cpu(v) => ViewMut::Cpu(v),
        }
    }
}

impl<T: Scalar> View<'_, T> {
    /// A sub-range of this view (element offsets; need not be aligned).
    pub fn slice(&self, r: impl RangeBounds<usize>) -> Result<View<'_, T>> {
        let (s, e) = bounds(self.len(), r)?;
        Ok(match self {
            View::Cuda(v) => View::Cuda(v.slice(s..e)),
            View::Cpu(x) => View::Cpu(&x[s..e]),
        })
    }

    pub fn len(&self) -> usize {
        match self {
            View::Cuda(v) => v.len(),
            View::Cpu(s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn backend_name(&self) -> &'static str {
        match self {
            View::Cuda(_) => "cuda",
            View::Cpu(_) => "cpu",
        }
    }
}

impl<T: Scalar> ViewMut<'_, T> {
    pub fn len(&self) -> usize {
        match self {
            ViewMut::Cuda(v) => v.len(),
            ViewMut::Cpu(s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn backend_name(&self) -> &'static str {
        match self {
            ViewMut::Cuda(_) => "cuda",
            ViewMut::Cpu(_) => "cpu",
        }
    }
}
