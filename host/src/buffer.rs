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

/// Host memory the kernel says can be had without swapping (`MemAvailable`), when known.
fn host_available() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Bytes of `len` elements of `T`, or the out-of-memory error when that overflows.
fn bytes_of<T>(len: usize, what: &str) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| Error::OutOfMemory {
        requested: usize::MAX,
        available: host_available().unwrap_or(0),
        what: format!("{what} ({len} elements)"),
    })
}

/// Host allocations from this size on are checked against the available memory first.
const LARGE_HOST_BYTES: usize = 64 << 20;

/// An empty host vector with room for `len` elements, allocated fallibly: a size above the
/// memory available (or one the allocator refuses) is `Error::OutOfMemory`, not an abort and
/// not minutes of swapping.
pub(crate) fn try_host_capacity<T>(len: usize, what: &str) -> Result<Vec<T>> {
    let bytes = bytes_of::<T>(len, what)?;
    let oom = |available: Option<usize>| Error::OutOfMemory {
        requested: bytes,
        available: available.unwrap_or(0),
        what: format!("{what} ({len} elements on the host)"),
    };
    // Large requests are compared with the available memory first (the allocator may accept
    // them and then swap for minutes); small ones skip reading /proc/meminfo.
    if bytes >= LARGE_HOST_BYTES {
        let available = host_available();
        if available.is_some_and(|a| bytes > a) {
            return Err(oom(available));
        }
    }
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| oom(host_available()))?;
    Ok(v)
}

/// A host vector of `len` default (zero) elements, allocated fallibly (see
/// [`try_host_capacity`]).
pub(crate) fn try_host_vec<T: Default + Clone>(len: usize, what: &str) -> Result<Vec<T>> {
    let mut v = try_host_capacity(len, what)?;
    v.resize(len, T::default());
    Ok(v)
}

/// Names the buffer in a device out-of-memory error from the pool, so the message says what
/// the user asked for (`zeros(len)`) and not only the pool segment behind it.
fn as_buffer_oom(e: Error, len: usize) -> Error {
    match e {
        Error::OutOfMemory { requested, available, what } => Error::OutOfMemory {
            requested,
            available,
            what: format!("a buffer ({len} elements on the device; {what})"),
        },
        other => other,
    }
}

/// What the stream's backend can still allocate, in bytes: the device's free memory (CUDA) or
/// the host's available memory (CPU); `None` when the host does not say (not Linux).
pub fn available_memory(stream: &Stream) -> Result<Option<usize>> {
    match stream {
        Stream::Cuda { stream, .. } => {
            let (free, _) = stream.context().mem_get_info().ctx(|| "querying the device's free memory".into())?;
            Ok(Some(free))
        }
        Stream::Cpu(_) => Ok(host_available()),
    }
}

/// Checks, before any work starts, that `device_bytes` on the stream's backend plus
/// `host_bytes` of host copies fit (on the CPU backend both come from host memory):
/// `Error::OutOfMemory` naming `what` otherwise. Sizes that overflow are `usize::MAX`.
pub fn ensure_fits(stream: &Stream, device_bytes: usize, host_bytes: usize, what: &str) -> Result<()> {
    let host = host_available();
    let too_big = |requested: usize, available: Option<usize>, place: &str| match available {
        Some(a) if requested > a => {
            Err(Error::OutOfMemory { requested, available: a, what: format!("{what} ({place})") })
        }
        _ => Ok(()),
    };
    match stream {
        Stream::Cpu(_) => too_big(device_bytes.saturating_add(host_bytes), host, "host memory"),
        Stream::Cuda { .. } => {
            too_big(device_bytes, available_memory(stream)?, "device memory")?;
            too_big(host_bytes, host, "host memory for its copies")
        }
    }
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
    /// A size above the free memory is `Error::OutOfMemory`, checked before anything is copied.
    pub fn from_slice(stream: &Stream, data: &[T]) -> Result<Buffer<T>> {
        match stream {
            Stream::Cuda { stream, gpu } => {
                crate::stream::refuse_in_capture(gpu, stream, "Buffer::from_slice")?;
                let mut b = Pooled::uninit(&gpu.pool, stream, data.len()).map_err(|e| as_buffer_oom(e, data.len()))?;
                stream.memcpy_htod(data, &mut *b).ctx(|| format!("copying {} elements to the device", data.len()))?;
                Ok(Buffer::Cuda(b))
            }
            Stream::Cpu(_) => {
                let mut v = crate::pool::host::take(data.len(), "a buffer")?;
                v.extend_from_slice(data);
                Ok(Buffer::Cpu(v))
            }
        }
    }

    /// A new zero-filled buffer of `len` elements. A size above the free memory (device) or
    /// the available memory (host) is `Error::OutOfMemory`, before anything is allocated.
    pub fn zeros(stream: &Stream, len: usize) -> Result<Buffer<T>> {
        match stream {
            Stream::Cuda { stream, gpu } => {
                let mut b = Pooled::uninit(&gpu.pool, stream, len).map_err(|e| as_buffer_oom(e, len))?;
                stream.memset_zeros(&mut *b).ctx(|| format!("zeroing {len} elements on the device"))?;
                Ok(Buffer::Cuda(b))
            }
            Stream::Cpu(_) => {
                let mut v = crate::pool::host::take(len, "a buffer")?;
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
    /// A writable sub-range of this view (element offsets; need not be aligned).
    pub fn slice_mut(&mut self, r: impl RangeBounds<usize>) -> Result<ViewMut<'_, T>> {
        let (s, e) = bounds(self.len(), r)?;
        Ok(match self {
            ViewMut::Cuda(v) => ViewMut::Cuda(v.slice_mut(s..e)),
            ViewMut::Cpu(x) => ViewMut::Cpu(&mut x[s..e]),
        })
    }

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
