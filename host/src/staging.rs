//! A reusable pool of page-locked host buffers: pinned memory is slow to allocate (it maps
//! and locks pages), so staging buffers are kept and handed out again by length.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::buffer::Scalar;
use crate::error::Result;
use crate::pinned::PinnedBuffer;
use crate::stream::Stream;

/// Counters of a staging pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StagingStats {
    /// Pinned allocations made (`cuMemHostAlloc`).
    pub pinned_allocs: u64,
    /// Requests served by a kept buffer.
    pub hits: u64,
    /// Bytes kept now (not handed out).
    pub cached_bytes: usize,
}

/// Kept buffers by length, and the counters.
type Kept<T> = (HashMap<usize, Vec<PinnedBuffer<T>>>, StagingStats);

/// Pinned buffers of `T`, kept by length between uses.
pub struct StagingPool<T: Scalar> {
    free: Mutex<Kept<T>>,
}

impl<T: Scalar> Default for StagingPool<T> {
    fn default() -> Self {
        StagingPool { free: Mutex::new((HashMap::new(), StagingStats::default())) }
    }
}

impl<T: Scalar> StagingPool<T> {
    pub fn new() -> StagingPool<T> {
        StagingPool::default()
    }

    /// A pinned buffer of `len` elements: a kept one (contents as last left, its pending
    /// copies waited for on first host access) or a new zero-filled one.
    pub fn take(&self, stream: &Stream, len: usize) -> Result<PinnedBuffer<T>> {
        {
            let mut g = self.free.lock().unwrap_or_else(|p| p.into_inner());
            let (free, stats) = &mut *g;
            if let Some(b) = free.get_mut(&len).and_then(Vec::pop) {
                stats.hits += 1;
                stats.cached_bytes -= len * size_of::<T>();
                return Ok(b);
            }
            stats.pinned_allocs += 1;
        }
        PinnedBuffer::zeros(stream, len)
    }

    /// Keeps `buffer` for a later `take` of the same length.
    pub fn put(&self, buffer: PinnedBuffer<T>) {
        let mut g = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let (free, stats) = &mut *g;
        stats.cached_bytes += buffer.len() * size_of::<T>();
        free.entry(buffer.len()).or_default().push(buffer);
    }

    pub fn stats(&self) -> StagingStats {
        self.free.lock().unwrap_or_else(|p| p.into_inner()).1
    }

    /// Frees every kept buffer (each waits for its pending copies first).
    pub fn clear(&self) {
        let mut g = self.free.lock().unwrap_or_else(|p| p.into_inner());
        g.0.clear();
        g.1.cached_bytes = 0;
    }
}
