//! What a pool reports about itself: the numbers PyTorch's `memory_stats` gives (allocated,
//! reserved, peaks, counts) plus the driver calls it made, which a steady state keeps at zero.

/// Counters of one pool. Bytes are block sizes (requests rounded up to 512 bytes), except
/// `requested_bytes`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Bytes in blocks handed out now (used, or freed and waiting for events).
    pub allocated_bytes: usize,
    /// Bytes the callers asked for, of the blocks handed out now.
    pub requested_bytes: usize,
    /// Bytes held from the driver (every segment).
    pub reserved_bytes: usize,
    pub peak_allocated_bytes: usize,
    pub peak_reserved_bytes: usize,
    /// Blocks handed out over the pool's life.
    pub allocations: u64,
    /// Blocks returned over the pool's life.
    pub frees: u64,
    /// Allocations served without a driver call.
    pub cache_hits: u64,
    /// Segments allocated from the driver (`cuMemAlloc`) over the pool's life.
    pub driver_allocs: u64,
    /// Segments given back to the driver (`empty_cache`, or retry after out-of-memory).
    pub driver_frees: u64,
    /// Fully free segments taken over by another stream (behind an event).
    pub reowned: u64,
    /// Segments held now.
    pub segments: usize,
    /// Blocks handed out now.
    pub active_blocks: usize,
    /// Freed blocks waiting for other streams' events.
    pub pending_blocks: usize,
    /// Requests refused for lack of memory (limit or device).
    pub ooms: u64,
}

impl std::fmt::Display for PoolStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |b: usize| b as f64 / (1 << 20) as f64;
        write!(
            f,
            "allocated {:.2} MiB (peak {:.2}), reserved {:.2} MiB (peak {:.2}) in {} segments; \
             {} allocations, {} cache hits, {} driver allocations, {} driver frees, {} reowned, {} OOM",
            mib(self.allocated_bytes),
            mib(self.peak_allocated_bytes),
            mib(self.reserved_bytes),
            mib(self.peak_reserved_bytes),
            self.segments,
            self.allocations,
            self.cache_hits,
            self.driver_allocs,
            self.driver_frees,
            self.reowned,
            self.ooms
        )
    }
}
