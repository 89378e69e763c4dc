//! The caching allocator's bookkeeping, with no driver in it: size classes, best fit,
//! splitting and coalescing, per-stream ownership, deferred reuse behind events, statistics.
//! The device pool (`pool/device.rs`) asks it what to do and makes the driver calls; being
//! plain Rust, every rule here is unit-tested on machines without a GPU.

use std::collections::{BTreeMap, BTreeSet};

use super::stats::PoolStats;

/// Every block is a multiple of this many bytes (and so aligned to it).
pub const MIN_BLOCK: usize = 512;
/// Requests up to this size are "small": they share 2 MiB segments.
pub const SMALL_REQUEST: usize = 1 << 20;
/// The segment small requests are carved from.
pub const SMALL_SEGMENT: usize = 2 << 20;
/// Requests up to this size (and over `SMALL_REQUEST`) are carved from 20 MiB segments.
pub const MID_REQUEST: usize = 10 << 20;
/// The segment mid-size requests are carved from.
pub const MID_SEGMENT: usize = 20 << 20;
/// Larger requests get a segment of their own, rounded up to this.
pub const LARGE_ROUND: usize = 2 << 20;

/// A device address (the arena never dereferences it).
pub type Addr = u64;

/// Who owns a block: a stream's driver handle, or a graph's private pool (see `private`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owner(pub u64);

impl Owner {
    const PRIVATE: u64 = 1 << 63;
    /// The private pool of capture number `n`: never reowned, never released while it lives.
    pub fn private(n: u64) -> Owner {
        Owner(Self::PRIVATE | n)
    }
    pub fn is_private(self) -> bool {
        self.0 & Self::PRIVATE != 0
    }
}

/// Small blocks and large blocks never share a segment (fragmentation stays bounded).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Small,
    Large,
}

/// `bytes` rounded up to whole blocks (at least one block, so a 0-byte request has an address).
pub fn round_size(bytes: usize) -> Option<usize> {
    bytes.max(1).checked_next_multiple_of(MIN_BLOCK)
}

/// Which segments a rounded request is carved from.
pub fn kind_of(rounded: usize) -> Kind {
    if rounded <= SMALL_REQUEST { Kind::Small } else { Kind::Large }
}

/// The size of a new segment for a rounded request.
pub fn segment_size(rounded: usize) -> Option<usize> {
    if rounded <= SMALL_REQUEST {
        Some(SMALL_SEGMENT)
    } else if rounded <= MID_REQUEST {
        Some(MID_SEGMENT)
    } else {
        rounded.checked_next_multiple_of(LARGE_ROUND)
    }
}

/// Whether a block with `rest` bytes left over after a request is split in two.
fn splits(kind: Kind, rest: usize) -> bool {
    match kind {
        Kind::Small => rest >= MIN_BLOCK,
        Kind::Large => rest > SMALL_REQUEST,
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Free,
    /// Handed out; `uses` are the other owners it was recorded on (`record_use`).
    Used {
        requested: usize,
        uses: Vec<Owner>,
    },
    /// Freed, waiting for events on the streams that used it before it is free again.
    Pending {
        requested: usize,
    },
}

#[derive(Clone, Debug)]
struct Block {
    size: usize,
    segment: Addr,
    state: State,
}

#[derive(Clone, Debug)]
struct Segment {
    size: usize,
    owner: Owner,
    kind: Kind,
    /// Blocks of the segment not free (used or pending).
    busy: usize,
}

/// A block handed out: its address, its (rounded) size and its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    pub addr: Addr,
    pub size: usize,
    pub owner: Owner,
}

/// What `allocate` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// A cached block: no driver call.
    Hit(Grant),
    /// Nothing cached fits; a fully free segment of another owner does: after the caller
    /// makes the requesting stream wait on an event recorded on `from`, `take_reowned`.
    Reown { segment: Addr, from: Owner },
    /// A new segment of `size` bytes is needed (`take_new_segment` once the driver gave it).
    NewSegment { size: usize },
}

/// What `free` decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Freed {
    /// The block is free again (coalesced with its free neighbours).
    Now,
    /// The block was used on these other owners' streams: record an event on each and
    /// `park` the block with them; it is reused once all have completed.
    AfterEvents(Vec<Owner>),
}

/// Bookkeeping mistakes a caller can make (all are reported as typed errors upstream).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArenaError {
    /// No block is handed out at this address.
    UnknownBlock(Addr),
    /// The block is owned by `owner` and was not recorded on `by`.
    ForeignOwner { addr: Addr, owner: Owner, by: Owner },
    /// A request too large to round (close to `usize::MAX`).
    TooLarge(usize),
}

/// The state of one pool: its segments, blocks, free lists and counters. `E` is whatever
/// tells the caller that a stream passed a point (a CUDA event; a test's flag).
pub struct Arena<E> {
    blocks: BTreeMap<Addr, Block>,
    segments: BTreeMap<Addr, Segment>,
    /// Free blocks, best fit first: (owner, kind, size, address).
    free: BTreeSet<(Owner, Kind, usize, Addr)>,
    pending: Vec<(Addr, Vec<E>)>,
    stats: PoolStats,
    /// Peak allocated bytes since each open watch (the profiler's scopes).
    watches: Vec<Option<usize>>,
}

impl<E> Default for Arena<E> {
    fn default() -> Self {
        Arena {
            blocks: BTreeMap::new(),
            segments: BTreeMap::new(),
            free: BTreeSet::new(),
            pending: Vec::new(),
            stats: PoolStats::default(),
            watches: Vec::new(),
        }
    }
}

impl<E> Arena<E> {
    pub fn stats(&self) -> PoolStats {
        self.stats
    }

    /// Plans a request of `bytes` for `owner`: a cached block (best fit among the owner's
    /// free blocks of the request's kind), a segment to take over, or a new segment.
    pub fn allocate(&mut self, owner: Owner, bytes: usize) -> Result<Plan, ArenaError> {
        let rounded = round_size(bytes).ok_or(ArenaError::TooLarge(bytes))?;
        let kind = kind_of(rounded);
        if let Some(g) = self.take_free(owner, kind, rounded, bytes) {
            self.stats.cache_hits += 1;
            return Ok(Plan::Hit(g));
        }
        // A fully free segment of another (non-private) owner, the smallest that fits.
        let reown = self
            .segments
            .iter()
            .filter(|(_, s)| s.owner != owner && !s.owner.is_private() && !owner.is_private())
            .filter(|(_, s)| s.busy == 0 && s.kind == kind && s.size >= rounded)
            .min_by_key(|&(&a, s)| (s.size, a))
            .map(|(&a, s)| (a, s.owner));
        if let Some((segment, from)) = reown {
            return Ok(Plan::Reown { segment, from });
        }
        let size = segment_size(rounded).ok_or(ArenaError::TooLarge(bytes))?;
        Ok(Plan::NewSegment { size })
    }

    /// Registers a segment the driver just gave `owner` and hands out a block of it.
    pub fn take_new_segment(&mut self, owner: Owner, base: Addr, size: usize, bytes: usize) -> Grant {
        let rounded = round_size(bytes).expect("allocate rounded this request");
        let kind = kind_of(rounded);
        debug_assert!(size >= rounded);
        self.segments.insert(base, Segment { size, owner, kind, busy: 0 });
        self.blocks.insert(base, Block { size, segment: base, state: State::Free });
        self.free.insert((owner, kind, size, base));
        self.stats.driver_allocs += 1;
        self.stats.segments += 1;
        self.stats.reserved_bytes += size;
        self.stats.peak_reserved_bytes = self.stats.peak_reserved_bytes.max(self.stats.reserved_bytes);
        self.take_free(owner, kind, rounded, bytes).expect("a new segment fits its request")
    }

    /// Gives a fully free segment to `owner` (the caller made `owner`'s stream wait for the
    /// previous owner's work) and hands out a block of it.
    pub fn take_reowned(&mut self, owner: Owner, segment: Addr, bytes: usize) -> Result<Grant, ArenaError> {
        let rounded = round_size(bytes).ok_or(ArenaError::TooLarge(bytes))?;
        let seg = self.segments.get_mut(&segment).ok_or(ArenaError::UnknownBlock(segment))?;
        let (old, kind, size) = (seg.owner, seg.kind, seg.size);
        seg.owner = owner;
        // A fully free segment is one free block.
        self.free.remove(&(old, kind, size, segment));
        self.free.insert((owner, kind, size, segment));
        self.stats.reowned += 1;
        self.stats.cache_hits += 1;
        self.take_free(owner, kind, rounded, bytes).ok_or(ArenaError::UnknownBlock(segment))
    }

    fn take_free(&mut self, owner: Owner, kind: Kind, rounded: usize, bytes: usize) -> Option<Grant> {
        let &(o, k, size, addr) = self.free.range((owner, kind, rounded, 0)..).next()?;
        if o != owner || k != kind {
            return None;
        }
        self.free.remove(&(o, k, size, addr));
        let segment = self.blocks[&addr].segment;
        let mut taken = size;
        if splits(kind, size - rounded) {
            taken = rounded;
            let rest = addr + rounded as u64;
            self.blocks.insert(rest, Block { size: size - rounded, segment, state: State::Free });
            self.free.insert((owner, kind, size - rounded, rest));
        }
        let b = self.blocks.get_mut(&addr).expect("free block is in the map");
        b.size = taken;
        b.state = State::Used { requested: bytes, uses: Vec::new() };
        self.segments.get_mut(&segment).expect("block's segment").busy += 1;
        let s = &mut self.stats;
        s.allocations += 1;
        s.active_blocks += 1;
        s.allocated_bytes += taken;
        s.requested_bytes += bytes;
        s.peak_allocated_bytes = s.peak_allocated_bytes.max(s.allocated_bytes);
        for w in self.watches.iter_mut().flatten() {
            *w = (*w).max(s.allocated_bytes);
        }
        Some(Grant { addr, size: taken, owner })
    }

    /// Records that the block at `addr` is used on `other`'s stream too: it is reused only
    /// after that stream's work queued before the free has completed.
    pub fn record_use(&mut self, addr: Addr, other: Owner) -> Result<(), ArenaError> {
        let owner = self.owner_of(addr)?;
        match self.blocks.get_mut(&addr).map(|b| &mut b.state) {
            Some(State::Used { uses, .. }) => {
                if other != owner && !uses.contains(&other) {
                    uses.push(other);
                }
                Ok(())
            }
            _ => Err(ArenaError::UnknownBlock(addr)),
        }
    }

    /// The owner of the handed-out block at `addr`.
    pub fn owner_of(&self, addr: Addr) -> Result<Owner, ArenaError> {
        match self.blocks.get(&addr) {
            Some(b @ Block { state: State::Used { .. }, .. }) => Ok(self.segments[&b.segment].owner),
            _ => Err(ArenaError::UnknownBlock(addr)),
        }
    }

    /// Frees the block at `addr` on behalf of `by`, which must be its owner or an owner it
    /// was recorded on.
    pub fn free(&mut self, addr: Addr, by: Owner) -> Result<Freed, ArenaError> {
        let owner = self.owner_of(addr)?;
        let b = self.blocks.get_mut(&addr).ok_or(ArenaError::UnknownBlock(addr))?;
        let State::Used { requested, uses } = &mut b.state else { return Err(ArenaError::UnknownBlock(addr)) };
        if by != owner && !uses.contains(&by) {
            return Err(ArenaError::ForeignOwner { addr, owner, by });
        }
        let (requested, uses) = (*requested, std::mem::take(uses));
        if uses.is_empty() {
            b.state = State::Pending { requested };
            self.release(addr);
            Ok(Freed::Now)
        } else {
            b.state = State::Pending { requested };
            self.stats.pending_blocks += 1;
            Ok(Freed::AfterEvents(uses))
        }
    }

    /// Holds a block `free` answered `AfterEvents` for until `events` have completed.
    pub fn park(&mut self, addr: Addr, events: Vec<E>) {
        self.pending.push((addr, events));
    }

    /// Frees every parked block whose events have all completed (`done` asks one event).
    pub fn poll(&mut self, mut done: impl FnMut(&E) -> bool) {
        let mut i = 0;
        while i < self.pending.len() {
            if self.pending[i].1.iter().all(&mut done) {
                let (addr, _) = self.pending.swap_remove(i);
                self.stats.pending_blocks -= 1;
                self.release(addr);
            } else {
                i += 1;
            }
        }
    }

    /// A pending block goes back to its owner's free list, merged with free neighbours.
    fn release(&mut self, addr: Addr) {
        let b = self.blocks.get_mut(&addr).expect("released block exists");
        let State::Pending { requested } = b.state else { unreachable!("only pending blocks are released") };
        b.state = State::Free;
        let (mut start, mut size, segment) = (addr, b.size, b.segment);
        let seg = self.segments.get_mut(&segment).expect("block's segment");
        seg.busy -= 1;
        let (owner, kind) = (seg.owner, seg.kind);
        let s = &mut self.stats;
        s.active_blocks -= 1;
        s.frees += 1;
        s.allocated_bytes -= size;
        s.requested_bytes -= requested;
        // The next block of the same segment, when free.
        let next = start + size as u64;
        if let Some(n) = self.blocks.get(&next).filter(|n| n.segment == segment && n.state == State::Free) {
            let n_size = n.size;
            self.free.remove(&(owner, kind, n_size, next));
            self.blocks.remove(&next);
            size += n_size;
        }
        // The previous block of the same segment, when free.
        if let Some((&p, pb)) = self.blocks.range(..start).next_back()
            && pb.segment == segment
            && pb.state == State::Free
            && p + pb.size as u64 == start
        {
            self.free.remove(&(owner, kind, pb.size, p));
            size += pb.size;
            self.blocks.remove(&start);
            start = p;
        }
        let b = self.blocks.get_mut(&start).expect("merged block exists");
        b.size = size;
        self.free.insert((owner, kind, size, start));
    }

    /// Forgets every fully free segment (of `owner` only, when given; private pools only
    /// when named) and returns them for the driver to free: `empty_cache`.
    pub fn release_free_segments(&mut self, owner: Option<Owner>) -> Vec<(Addr, usize)> {
        let out: Vec<(Addr, usize)> = self
            .segments
            .iter()
            .filter(|(_, s)| s.busy == 0)
            .filter(|(_, s)| match owner {
                Some(o) => s.owner == o,
                None => !s.owner.is_private(),
            })
            .map(|(&a, s)| (a, s.size))
            .collect();
        for &(a, size) in &out {
            let s = self.segments.remove(&a).expect("listed segment");
            self.blocks.remove(&a);
            self.free.remove(&(s.owner, s.kind, size, a));
            self.stats.reserved_bytes -= size;
            self.stats.segments -= 1;
            self.stats.driver_frees += 1;
        }
        out
    }

    /// Hands every segment of `from` (a graph's private pool) to `to`.
    pub fn transfer(&mut self, from: Owner, to: Owner) {
        let moved: Vec<_> = self.free.iter().filter(|f| f.0 == from).copied().collect();
        for f in moved {
            self.free.remove(&f);
            self.free.insert((to, f.1, f.2, f.3));
        }
        for s in self.segments.values_mut().filter(|s| s.owner == from) {
            s.owner = to;
        }
    }

    /// Whether a new segment of `size` bytes keeps reserved memory within `limit`.
    pub fn fits(&self, size: usize, limit: Option<usize>) -> bool {
        limit.is_none_or(|l| self.stats.reserved_bytes.saturating_add(size) <= l)
    }

    /// Counts an out-of-memory answer in the statistics.
    pub fn count_oom(&mut self) {
        self.stats.ooms += 1;
    }

    /// Starts tracking the peak of allocated bytes from now (one profiler scope).
    pub fn open_watch(&mut self) -> usize {
        let now = self.stats.allocated_bytes;
        match self.watches.iter().position(Option::is_none) {
            Some(i) => {
                self.watches[i] = Some(now);
                i
            }
            None => {
                self.watches.push(Some(now));
                self.watches.len() - 1
            }
        }
    }

    /// The peak of allocated bytes since `open_watch` returned `id` (and closes it).
    pub fn close_watch(&mut self, id: usize) -> Option<usize> {
        self.watches.get_mut(id).and_then(Option::take)
    }

    /// Number of blocks (free, used or pending) in the segment at `base`: 1 when coalesced.
    pub fn blocks_in(&self, base: Addr) -> usize {
        self.blocks.values().filter(|b| b.segment == base).count()
    }
}

#[cfg(test)]
#[path = "arena_tests.rs"]
mod tests;
