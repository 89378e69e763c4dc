//! The caching device allocator: the arena's decisions carried out with the driver. Segments
//! come from `cuMemAlloc` and stay cached until `empty_cache`; blocks are handed out in stream
//! order on the stream that allocated them, and cross to another stream only behind an event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::sys::{CUevent_flags, CUresult};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, result};

use super::arena::{Addr, Arena, ArenaError, Freed, Grant, Owner, Plan};
use super::stats::PoolStats;
use crate::error::{DriverContext, Error, Result};

/// One active stream capture: allocations go to its private pool, frees of older blocks wait
/// for the graph.
struct Capture {
    private: Owner,
    deferred: Vec<(Addr, Owner)>,
}

struct State {
    arena: Arena<Arc<CudaEvent>>,
    limit: Option<usize>,
    /// Streams seen, by driver handle (events are recorded on them for cross-stream reuse),
    /// held until the pool is their last holder (`let_go`), so that a handle is never reused
    /// while the pool may still order work after its stream.
    streams: HashMap<u64, Arc<CudaStream>>,
    /// The last event of each stream let go whose work may still run, by its old handle: what
    /// a later user of its blocks (or a new stream given the same handle) waits for, instead
    /// of a device-wide synchronize (which fails, and breaks the capture, while another thread
    /// captures a stream of this context).
    gone: HashMap<u64, Arc<CudaEvent>>,
    /// Active captures, by the captured stream's handle.
    captures: HashMap<u64, Capture>,
    next_capture: u64,
}

/// The caching allocator of one device (one per context: `Gpu::pool`).
pub struct DevicePool {
    ctx: Arc<CudaContext>,
    state: Mutex<State>,
}

/// Blocks and segments freed by a finished capture's graph when it is dropped.
pub(crate) struct CaptureRelease {
    pub private: Owner,
    pub deferred: Vec<(Addr, Owner)>,
}

/// The typed out-of-memory error, counted in the statistics.
fn oom(st: &mut State, requested: usize, size: usize, limit: Option<usize>) -> Error {
    st.arena.count_oom();
    let s = st.arena.stats();
    let detail = match limit {
        Some(l) => format!("a new {size}-byte segment would pass the pool limit of {l} bytes"),
        None => format!("the device has no memory left for a new {size}-byte segment"),
    };
    Error::PoolExhausted { requested, allocated: s.allocated_bytes, reserved: s.reserved_bytes, limit, detail }
}

/// The owner key of a stream: its driver handle (0 for the legacy default stream).
pub(crate) fn stream_owner(s: &CudaStream) -> Owner {
    Owner(s.cu_stream() as u64)
}

fn arena_error(op: &'static str, e: ArenaError) -> Error {
    match e {
        ArenaError::ForeignOwner { addr, owner, by } => Error::ForeignStream {
            op,
            detail: format!(
                "block {addr:#x} belongs to stream {:#x}; stream {:#x} neither owns it nor was recorded with \
                 record_stream",
                owner.0, by.0
            ),
        },
        ArenaError::UnknownBlock(addr) => {
            Error::InvalidConfig { op, why: format!("no pool block is handed out at {addr:#x}") }
        }
        ArenaError::TooLarge(bytes) => Error::OutOfMemory {
            requested: bytes,
            available: 0,
            what: format!("{op}: a request larger than any pool segment can be"),
        },
    }
}

impl DevicePool {
    pub(crate) fn new(ctx: Arc<CudaContext>) -> Arc<DevicePool> {
        Arc::new(DevicePool {
            ctx,
            state: Mutex::new(State {
                arena: Arena::default(),
                limit: None,
                streams: HashMap::new(),
                gone: HashMap::new(),
                captures: HashMap::new(),
                next_capture: 1,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the books as they were at the last complete
        // step (each step finishes before the next driver call): keep using them.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn stats(&self) -> PoolStats {
        self.lock().arena.stats()
    }

    /// Caps reserved bytes (`None`: no cap). Requests past it fail with
    /// [`Error::PoolExhausted`] after the cache's free segments were released.
    pub fn set_limit(&self, limit: Option<usize>) {
        self.lock().limit = limit;
    }

    pub fn limit(&self) -> Option<usize> {
        self.lock().limit
    }

    /// Remembers `s` under its handle (after letting go of the streams only the pool still
    /// holds); a handle reused by a new stream after the old one was let go makes the new
    /// stream wait for the old one's last event (that work may still use its blocks).
    fn register(&self, st: &mut State, s: &Arc<CudaStream>) -> Result<()> {
        Self::let_go(st)?;
        let key = s.cu_stream() as u64;
        if st.streams.contains_key(&key) {
            return Ok(());
        }
        if let Some(ev) = st.gone.remove(&key) {
            s.wait(&ev).ctx(|| "ordering a new stream after the last work of its handle's old stream".into())?;
        }
        st.streams.insert(key, s.clone());
        Ok(())
    }

    /// Outside captures: drops the streams only the pool holds, each after recording its last
    /// event (kept in `gone`), and forgets the `gone` events that have completed. During a
    /// capture it does nothing (no stream is destroyed and no event queried then). The legacy
    /// and per-thread default streams (handles 0 and 2) are kept.
    fn let_go(st: &mut State) -> Result<()> {
        if !st.captures.is_empty() {
            return Ok(());
        }
        st.gone.retain(|_, ev| !ev.is_complete());
        let idle: Vec<u64> =
            st.streams.iter().filter(|(k, s)| **k > 2 && Arc::strong_count(s) == 1).map(|(k, _)| *k).collect();
        for key in idle {
            if let Some(s) = st.streams.remove(&key) {
                let ev = s
                    .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                    .ctx(|| "recording a stream's last pool event".into())?;
                st.gone.insert(key, Arc::new(ev));
            }
        }
        Ok(())
    }

    /// A block of at least `bytes` for work on `stream`.
    pub(crate) fn allocate(&self, stream: &Arc<CudaStream>, bytes: usize) -> Result<Grant> {
        let mut st = self.lock();
        self.register(&mut st, stream)?;
        let key = stream.cu_stream() as u64;
        let capturing = !st.captures.is_empty();
        let owner = st.captures.get(&key).map_or(Owner(key), |c| c.private);
        if !capturing {
            // Event queries are not allowed on every capture mode: poll outside captures.
            st.arena.poll(|e| e.is_complete());
        }
        let mut released_once = false;
        loop {
            match st.arena.allocate(owner, bytes).map_err(|e| arena_error("pool allocate", e))? {
                Plan::Hit(g) => return Ok(g),
                Plan::Reown { segment, from } => {
                    self.order_after(&st, from, stream)?;
                    return st.arena.take_reowned(owner, segment, bytes).map_err(|e| arena_error("pool allocate", e));
                }
                Plan::NewSegment { size } => {
                    let limit = st.limit;
                    if !st.arena.fits(size, limit) {
                        if !released_once && !capturing {
                            released_once = true;
                            self.release_cached(&mut st)?;
                            continue;
                        }
                        return Err(oom(&mut st, bytes, size, limit));
                    }
                    self.ctx.bind_to_thread().ctx(|| "binding the context".into())?;
                    // SAFETY: cuMemAlloc returns a fresh allocation of `size` bytes or an error;
                    // the arena owns the address until `empty_cache` frees it.
                    let first = unsafe { result::malloc_sync(size) };
                    let got = match first {
                        Err(e) if e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY && !capturing => {
                            // Retry once with the cache emptied; a second failure is OOM.
                            self.release_cached(&mut st)?;
                            // SAFETY: as above.
                            unsafe { result::malloc_sync(size) }
                        }
                        other => other,
                    };
                    return match got {
                        Ok(base) => Ok(st.arena.take_new_segment(owner, base, size, bytes)),
                        Err(e) if e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                            // The device itself is full (no pool limit involved): the sizes
                            // a user can act on are the request and the device's free memory.
                            st.arena.count_oom();
                            let s = st.arena.stats();
                            let free = self.ctx.mem_get_info().map(|(f, _)| f).unwrap_or(0);
                            Err(Error::OutOfMemory {
                                requested: bytes,
                                available: free,
                                what: format!(
                                    "a {size}-byte pool segment ({} bytes allocated, {} reserved by the pool)",
                                    s.allocated_bytes, s.reserved_bytes
                                ),
                            })
                        }
                        Err(e) => Err(e).ctx(|| format!("allocating a {size}-byte pool segment")),
                    };
                }
            }
        }
    }

    /// Makes `stream` wait for the work queued so far on the stream behind `from` (or, for a
    /// stream let go, its last event; none when that event has completed).
    fn order_after(&self, st: &State, from: Owner, stream: &Arc<CudaStream>) -> Result<()> {
        match (st.streams.get(&from.0), st.gone.get(&from.0)) {
            (Some(prev), _) => {
                let ev = prev
                    .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                    .ctx(|| "recording a pool event".into())?;
                stream.wait(&ev).ctx(|| "ordering a reused segment after its last stream".into())
            }
            (None, Some(ev)) => stream.wait(ev).ctx(|| "ordering a reused segment after a stream let go".into()),
            // Let go, and its last event completed: nothing of it still runs.
            (None, None) => Ok(()),
        }
    }

    /// Frees every fully free segment back to the driver (waits for the device first).
    fn release_cached(&self, st: &mut State) -> Result<()> {
        self.ctx.synchronize().ctx(|| "synchronizing before releasing cached memory".into())?;
        st.arena.poll(|e| e.is_complete());
        for (base, _) in st.arena.release_free_segments(None) {
            // SAFETY: the arena handed out nothing of this segment and forgot it; the device
            // is idle, so no queued work uses it.
            unsafe { result::free_sync(base) }.ctx(|| "freeing a pool segment".into())?;
        }
        Ok(())
    }

    /// Gives every cached, fully free segment back to the driver; reserved bytes drop to
    /// what live buffers (and live graphs' private pools) hold.
    pub fn empty_cache(&self) -> Result<()> {
        let mut st = self.lock();
        if !st.captures.is_empty() {
            return Err(Error::Capture { op: "empty_cache", why: "a stream capture is in progress".into() });
        }
        self.release_cached(&mut st)
    }

    /// Records that the block at `addr` is used on `stream` as well as on its owner's.
    pub(crate) fn record_use(&self, addr: Addr, stream: &Arc<CudaStream>) -> Result<()> {
        let mut st = self.lock();
        self.register(&mut st, stream)?;
        st.arena.record_use(addr, stream_owner(stream)).map_err(|e| arena_error("record_stream", e))
    }

    /// Frees the block at `addr` on behalf of `by` (its owner, or a stream it was recorded on).
    pub(crate) fn free(&self, addr: Addr, owner: Owner, by: Owner) -> Result<()> {
        let mut st = self.lock();
        if let Some(c) = st.captures.get_mut(&owner.0) {
            // Freed while its stream is captured: the graph may use it at every replay.
            c.deferred.push((addr, owner));
            return Ok(());
        }
        // A block of a graph's private pool freed after the graph was dropped: the pool went
        // to the capture stream, which now owns it.
        let by = match st.arena.owner_of(addr) {
            Ok(now) if by.is_private() && by == owner && now != owner => now,
            _ => by,
        };
        match st.arena.free(addr, by).map_err(|e| arena_error("pool free", e))? {
            Freed::Now => Ok(()),
            Freed::AfterEvents(others) => {
                let mut events = Vec::with_capacity(others.len());
                for o in others {
                    if let Some(s) = st.streams.get(&o.0) {
                        events.push(Arc::new(
                            s.record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                                .ctx(|| "recording a pool event".into())?,
                        ));
                    } else if let Some(ev) = st.gone.get(&o.0) {
                        events.push(ev.clone());
                    }
                }
                st.arena.park(addr, events);
                Ok(())
            }
        }
    }

    /// Starts routing `stream`'s allocations to a private pool (a graph capture).
    pub(crate) fn begin_capture(&self, stream: &Arc<CudaStream>) -> Result<Owner> {
        let mut st = self.lock();
        self.register(&mut st, stream)?;
        let key = stream.cu_stream() as u64;
        if st.captures.contains_key(&key) {
            return Err(Error::Capture { op: "capture", why: "the stream is already being captured".into() });
        }
        let private = Owner::private(st.next_capture);
        st.next_capture += 1;
        st.captures.insert(key, Capture { private, deferred: Vec::new() });
        Ok(private)
    }

    /// Ends the routing `begin_capture` started; what it returns is released with the graph.
    pub(crate) fn end_capture(&self, stream: &CudaStream) -> Option<CaptureRelease> {
        let c = self.lock().captures.remove(&(stream.cu_stream() as u64))?;
        Some(CaptureRelease { private: c.private, deferred: c.deferred })
    }

    /// Returns a graph's memory (after the caller waited for its replays): its private pool
    /// joins `to`'s cache, the blocks freed during the capture are freed now.
    pub(crate) fn release_capture(&self, r: CaptureRelease, to: Owner) {
        let mut st = self.lock();
        st.arena.transfer(r.private, to);
        for (addr, owner) in r.deferred {
            if let Err(e) = st.arena.free(addr, owner) {
                log::error!("pool: releasing a graph's block failed: {e:?}");
            }
        }
    }

    /// Whether `stream` is being captured into a graph (host waits and host copies on it
    /// would break the capture: callers refuse them with a typed error).
    pub(crate) fn is_capturing(&self, stream: &CudaStream) -> bool {
        self.lock().captures.contains_key(&(stream.cu_stream() as u64))
    }

    /// Opens a peak-tracking window (profiler scopes).
    pub(crate) fn open_watch(&self) -> usize {
        self.lock().arena.open_watch()
    }

    pub(crate) fn close_watch(&self, id: usize) -> Option<usize> {
        self.lock().arena.close_watch(id)
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
}

impl Drop for DevicePool {
    fn drop(&mut self) {
        // Buffers hold an Arc of the pool, so none is alive here: free every segment.
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        if self.ctx.synchronize().is_err() {
            return;
        }
        for (base, _) in st.arena.release_free_segments(None) {
            // SAFETY: no buffer of this pool is alive and the device is idle.
            let _ = unsafe { result::free_sync(base) };
        }
    }
}
