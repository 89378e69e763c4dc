//! The CPU backend's buffer cache: `Vec`s of dropped CPU buffers are kept by element type and
//! length and handed to the next buffer of that shape. Fresh large `Vec`s come from `mmap` and
//! pay a page fault per page on first touch (the bench measured 2.5x over preallocated);
//! reused ones are already mapped.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Counters of the host cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostCacheStats {
    /// Bytes of buffers kept now.
    pub cached_bytes: usize,
    /// The most bytes it keeps (default 1 GiB; `set_limit`).
    pub limit_bytes: usize,
    /// Buffers served from the cache.
    pub hits: u64,
    /// Buffers that needed a fresh allocation.
    pub misses: u64,
}

struct Cache {
    free: HashMap<(TypeId, usize), Vec<Box<dyn Any + Send>>>,
    stats: HostCacheStats,
}

fn cache() -> MutexGuard<'static, Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE
        .get_or_init(|| {
            Mutex::new(Cache {
                free: HashMap::new(),
                stats: HostCacheStats { limit_bytes: 1 << 30, ..Default::default() },
            })
        })
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// An empty `Vec` with room for exactly `len` elements: a kept one, else a new one allocated
/// fallibly (`Error::OutOfMemory` naming `what` when the host cannot hold it).
pub(crate) fn take<T: Send + 'static>(len: usize, what: &str) -> crate::Result<Vec<T>> {
    let mut c = cache();
    // Keyed by the type's id, so the downcast always succeeds.
    if let Some(b) = c.free.get_mut(&(TypeId::of::<T>(), len)).and_then(Vec::pop)
        && let Ok(v) = b.downcast::<Vec<T>>()
    {
        c.stats.hits += 1;
        c.stats.cached_bytes -= len * size_of::<T>();
        let mut v = *v;
        v.clear();
        return Ok(v);
    }
    c.stats.misses += 1;
    drop(c);
    crate::buffer::try_host_capacity(len, what)
}

/// Keeps `v` for a later `take` of its capacity, while the cache is under its limit.
pub(crate) fn give<T: Send + 'static>(v: Vec<T>) {
    let bytes = v.capacity() * size_of::<T>();
    if bytes == 0 {
        return;
    }
    let mut c = cache();
    if c.stats.cached_bytes + bytes > c.stats.limit_bytes {
        return;
    }
    c.stats.cached_bytes += bytes;
    c.free.entry((TypeId::of::<T>(), v.capacity())).or_default().push(Box::new(v));
}

pub fn stats() -> HostCacheStats {
    cache().stats
}

/// Frees every kept buffer.
pub fn empty_cache() {
    let mut c = cache();
    c.free.clear();
    c.stats.cached_bytes = 0;
}

/// Caps the bytes kept (0 turns the cache off); frees what is kept when lowering it.
pub fn set_limit(bytes: usize) {
    let mut c = cache();
    c.stats.limit_bytes = bytes;
    if c.stats.cached_bytes > bytes {
        c.free.clear();
        c.stats.cached_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vecs_come_back_by_type_and_length() {
        // A length no other test uses, so parallel tests do not interfere.
        let n = 12_345;
        let mut v: Vec<f32> = take(n, "test").unwrap();
        v.resize(n, 1.0);
        let p = v.as_ptr();
        give(v);
        let w: Vec<u16> = take(n, "test").unwrap();
        assert_ne!(w.as_ptr() as usize, p as usize, "another type never gets it");
        let v2: Vec<f32> = take(n, "test").unwrap();
        assert_eq!((v2.as_ptr(), v2.len(), v2.capacity()), (p, 0, n), "the same memory, emptied");
        give(Vec::<f32>::new());
        assert!(stats().hits >= 1 && stats().misses >= 2);
    }
}
