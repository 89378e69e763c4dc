//! NCCL collectives on ferrotune buffers: all-reduce, broadcast, all-gather and
//! reduce-scatter, either one process per GPU (`Communicator::from_rank`, the id shared by
//! file or environment) or one process driving every GPU (`Communicator::for_devices` and
//! the `group_*` functions, which wrap the per-device calls in one NCCL group). Every call
//! has a deadline. Rank communicators are non-blocking (`nccl_call.rs`): joining, the
//! connection set-up of the first collective and the collectives' host calls are polled
//! against it, and a late one aborts the communicator (`ncclCommAbort`) and returns
//! `CollectiveError::Timeout`. One process driving every GPU uses blocking communicators
//! (`ncclCommInitAll`, on a helper thread abandoned when late): its group calls must
//! include every rank, which is checked, so no rank can be missing. The device-side wait
//! after a collective has the same deadline. Ranks check that they agree on the element
//! count before a collective (a tiny all-gather), since NCCL itself would hang or corrupt.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use cudarc::nccl::NcclType;
use cudarc::nccl::result as nr;
use cudarc::nccl::sys::{ncclComm_t, ncclDataType_t, ncclRedOp_t};

use crate::buffer::{Scalar, View, ViewMut};
use crate::error::{DriverContext, Error, Result};
use crate::nccl::{CollectiveError, NcclId, require_nccl};
use crate::nccl_call::{self as call, ABORT_GRACE, Call, Settled};
use crate::stream::Stream;

/// The reductions the collectives offer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    Sum,
    Max,
    Min,
    Avg,
}

impl Reduce {
    fn raw(self) -> ncclRedOp_t {
        match self {
            Reduce::Sum => ncclRedOp_t::ncclSum,
            Reduce::Max => ncclRedOp_t::ncclMax,
            Reduce::Min => ncclRedOp_t::ncclMin,
            Reduce::Avg => ncclRedOp_t::ncclAvg,
        }
    }
}

/// An element type the collectives move: f32, f16, bf16.
pub trait CollectiveScalar: Scalar + NcclType {}
impl<T: Scalar + NcclType> CollectiveScalar for T {}

/// The raw communicator; aborted when dropped (abort never waits for peers, and the caller
/// waits for it at most `ABORT_GRACE`).
struct RawComm(ncclComm_t);

// SAFETY: an NCCL communicator may be used from any thread, one call at a time; the
// `Communicator` owning it is not `Sync`, so calls are never concurrent.
unsafe impl Send for RawComm {}

impl Drop for RawComm {
    fn drop(&mut self) {
        call::abort(self.0, ABORT_GRACE);
    }
}

fn nccl_err(context: impl Into<String>) -> impl FnOnce(nr::NcclError) -> Error {
    let context = context.into();
    move |e| Error::Collective(CollectiveError::Nccl { context, code: format!("{:?}", e.0) })
}

/// One rank of a communicator, bound to one stream of one GPU.
pub struct Communicator {
    comm: Option<RawComm>,
    stream: Stream,
    cs: Arc<CudaStream>,
    rank: usize,
    world: usize,
    /// The most any call may take before the communicator is aborted.
    pub timeout: Duration,
    /// Check before each collective that every rank passes the same element count (one
    /// small all-gather more per call; the group functions check on the host instead).
    pub check_sizes: bool,
    /// Made non-blocking (`from_rank`): every call is polled until it settles.
    nonblocking: bool,
    /// The `for_devices` call that made it (its group calls must include every rank).
    clique: Option<u64>,
}

/// Numbers the `for_devices` calls of this process.
static CLIQUES: AtomicU64 = AtomicU64::new(1);

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Communicator(rank {}/{}, {})",
            self.rank,
            self.world,
            if self.comm.is_some() { "live" } else { "aborted" }
        )
    }
}

/// Runs `init` (which blocks until every rank has joined) on a helper thread bound to
/// `cs`'s context, waiting at most `timeout`. A late init is abandoned: its thread aborts
/// the communicator if it ever completes.
fn init_with_deadline(
    cs: &Arc<CudaStream>,
    timeout: Duration,
    init: impl FnOnce() -> std::result::Result<Vec<usize>, nr::NcclError> + Send + 'static,
) -> Result<Vec<RawComm>> {
    let (tx, rx) = channel();
    let ctx = cs.context().clone();
    std::thread::spawn(move || {
        let r =
            ctx.bind_to_thread().map_err(|e| format!("{e:?}")).and_then(|_| init().map_err(|e| format!("{:?}", e.0)));
        if let Err(std::sync::mpsc::SendError(Ok(late))) = tx.send(r) {
            drop(late.into_iter().map(|p| RawComm(p as ncclComm_t)).collect::<Vec<_>>());
        }
    });
    // An answer that lands just after the deadline is still taken (not leaked).
    match rx.recv_timeout(timeout).or_else(|_| rx.try_recv().map_err(|_| ())) {
        Ok(Ok(ptrs)) => Ok(ptrs.into_iter().map(|p| RawComm(p as ncclComm_t)).collect()),
        Ok(Err(code)) => Err(Error::Collective(CollectiveError::Nccl { context: "communicator init".into(), code })),
        Err(_) => Err(Error::Collective(CollectiveError::Timeout { op: "communicator init", after: timeout })),
    }
}

fn cuda_of(stream: &Stream) -> Result<Arc<CudaStream>> {
    stream.cuda_stream().cloned().ok_or(Error::BackendMismatch {
        op: "collective",
        what: "stream",
        expected: "cuda",
        got: "cpu",
    })
}

impl Communicator {
    /// Joins rank `rank` of a `world`-rank communicator named by `id` (one process per GPU;
    /// blocks until every rank has joined, at most `timeout`).
    pub fn from_rank(
        stream: &Stream,
        rank: usize,
        world: usize,
        id: &NcclId,
        timeout: Duration,
    ) -> Result<Communicator> {
        if world == 0 || rank >= world || world > i32::MAX as usize {
            return Err(CollectiveError::BadRank { rank, world }.into());
        }
        let cs = cuda_of(stream)?;
        require_nccl()?;
        cs.context().bind_to_thread().ctx(|| "binding the context for communicator init".into())?;
        let t0 = Instant::now();
        let (raw, first) = call::init_rank_nonblocking(world as i32, id.raw(), rank as i32);
        let comm = RawComm(raw);
        let op = "communicator init";
        match call::settle(first, true, t0, timeout, || call::state(comm.0)) {
            Settled::Ready => {}
            Settled::Refused(code) => return Err(CollectiveError::Nccl { context: op.into(), code }.into()),
            Settled::Broken(code) => return Err(CollectiveError::Nccl { context: op.into(), code }.into()),
            Settled::Late => return Err(CollectiveError::Timeout { op, after: timeout }.into()),
        }
        Ok(Communicator {
            comm: Some(comm),
            stream: stream.clone(),
            cs,
            rank,
            world,
            timeout,
            check_sizes: true,
            nonblocking: true,
            clique: None,
        })
    }

    /// One communicator per stream (each on a different GPU), all in this process
    /// (`ncclCommInitAll`, blocking communicators); rank `i` is `streams[i]`. Use the
    /// `group_*` functions on them, with every rank in each call.
    pub fn for_devices(streams: &[Stream], timeout: Duration) -> Result<Vec<Communicator>> {
        if streams.is_empty() {
            return Err(Error::EmptyInput { op: "Communicator::for_devices", what: "streams" });
        }
        let css = streams.iter().map(cuda_of).collect::<Result<Vec<_>>>()?;
        require_nccl()?;
        let ordinals: Vec<i32> = css.iter().map(|c| c.context().ordinal() as i32).collect();
        let n = ordinals.len();
        let clique = CLIQUES.fetch_add(1, Ordering::Relaxed);
        let comms = init_with_deadline(&css[0], timeout, move || {
            let mut cs = vec![std::ptr::null_mut(); n];
            // SAFETY: `cs` has room for `n` handles and `ordinals` holds `n` device ordinals.
            unsafe { nr::comm_init_all(cs.as_mut_ptr(), n as i32, ordinals.as_ptr()) }?;
            Ok(cs.into_iter().map(|c| c as usize).collect())
        })?;
        Ok(comms
            .into_iter()
            .zip(streams.iter().zip(css))
            .enumerate()
            .map(|(rank, (comm, (stream, cs)))| Communicator {
                comm: Some(comm),
                stream: stream.clone(),
                cs,
                rank,
                world: n,
                timeout,
                check_sizes: false,
                nonblocking: false,
                clique: Some(clique),
            })
            .collect())
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn world_size(&self) -> usize {
        self.world
    }

    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    fn live(&self, op: &'static str) -> Result<ncclComm_t> {
        let c = self.comm.as_ref().ok_or(CollectiveError::Aborted { op })?;
        self.cs.context().bind_to_thread().ctx(|| format!("binding the context for {op}"))?;
        Ok(c.0)
    }

    /// Settles a host call's answer `first` against the deadline (`nccl_call::settle`): a
    /// late call, or one whose background work failed, aborts the communicator.
    fn finish(&mut self, op: &'static str, first: Call, t0: Instant) -> Result<()> {
        let comm = self.comm.as_ref().ok_or(CollectiveError::Aborted { op })?.0;
        match call::settle(first, self.nonblocking, t0, self.timeout, || call::state(comm)) {
            Settled::Ready => Ok(()),
            Settled::Refused(code) => Err(CollectiveError::Nccl { context: op.into(), code }.into()),
            Settled::Broken(code) => {
                self.comm = None;
                Err(CollectiveError::Nccl { context: format!("{op} (communicator aborted)"), code }.into())
            }
            Settled::Late => {
                self.comm = None; // ncclCommAbort: NCCL's threads waiting for peers stop.
                Err(CollectiveError::Timeout { op, after: self.timeout }.into())
            }
        }
    }

    /// Waits for the stream until the deadline; past it, aborts the communicator.
    fn wait(&mut self, op: &'static str, t0: Instant) -> Result<()> {
        let ev = self.cs.record_event(None).ctx(|| format!("recording an event after {op}"))?;
        // Spin (yielding) for the first 2 ms, so short collectives are not timed with a
        // sleep's granularity; then poll every 50 µs (a 1 ms poll added up to a millisecond
        // to every wait: 10% of a 64 MiB all-reduce round in the bench).
        let spin_until = Instant::now() + Duration::from_millis(2);
        loop {
            if ev.try_is_complete().ctx(|| format!("waiting for {op}"))? {
                return Ok(());
            }
            if t0.elapsed() >= self.timeout {
                self.comm = None; // ncclCommAbort: the kernels waiting for peers exit.
                return Err(CollectiveError::Timeout { op, after: self.timeout }.into());
            }
            if Instant::now() < spin_until {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// Every rank must pass the same `len` (checked by an all-gather of the counts).
    fn agree(&mut self, op: &'static str, len: usize, t0: Instant) -> Result<()> {
        if !self.check_sizes || self.world == 1 {
            return Ok(());
        }
        let comm = self.live(op)?;
        let mine = self.cs.clone_htod(&[len as u64]).ctx(|| "uploading the element count".into())?;
        let mut all = self.cs.alloc_zeros::<u64>(self.world).ctx(|| "allocating the counts".into())?;
        let r = {
            let (s, _gs) = mine.device_ptr(&self.cs);
            let (d, _gd) = all.device_ptr_mut(&self.cs);
            // SAFETY: `s` holds 1 u64 and `d` holds `world` u64 on this communicator's device.
            unsafe { nr::all_gather(s as _, d as _, 1, ncclDataType_t::ncclUint64, comm, self.cs.cu_stream() as _) }
        };
        self.finish(op, r, t0)?;
        self.wait(op, t0)?;
        let counts = self.cs.clone_dtoh(&all).ctx(|| "reading the counts".into())?;
        match counts.iter().position(|&c| c != counts[0]) {
            None => Ok(()),
            Some(rank) => Err(CollectiveError::SizeMismatch {
                op,
                rank,
                expected: counts[0] as usize,
                got: counts[rank] as usize,
            }
            .into()),
        }
    }

    /// Queues `recv = reduce over ranks of send` (same length); returns NCCL's answer
    /// (settle it with `finish`, or after the group's end).
    fn enqueue_all_reduce<T: CollectiveScalar>(
        &self,
        send: Option<&View<'_, T>>,
        recv: &mut ViewMut<'_, T>,
        op: Reduce,
    ) -> Result<Call> {
        let comm = self.live("all_reduce")?;
        let ViewMut::Cuda(r) = recv else { return Err(cpu_buffer("all_reduce")) };
        let n = r.len();
        let (d, _gd) = r.device_ptr_mut(&self.cs);
        let (s, _gs) = match send {
            Some(View::Cuda(s)) => {
                let (p, g) = s.device_ptr(&self.cs);
                (p, Some(g))
            }
            Some(View::Cpu(_)) => return Err(cpu_buffer("all_reduce")),
            None => (d, None),
        };
        // SAFETY: both pointers address `n` elements of T on this device (lengths checked by
        // the callers); the guards keep cudarc's stream ordering of the buffers.
        Ok(unsafe { nr::all_reduce(s as _, d as _, n, T::as_nccl_type(), op.raw(), comm, self.cs.cu_stream() as _) })
    }

    /// `buf = Σ (or max, min, mean) of every rank's buf`, in place.
    pub fn all_reduce_in_place<T: CollectiveScalar>(&mut self, buf: &mut ViewMut<'_, T>, op: Reduce) -> Result<()> {
        let t0 = Instant::now();
        self.agree("all_reduce", buf.len(), t0)?;
        let r = self.enqueue_all_reduce(None, buf, op)?;
        self.finish("all_reduce", r, t0)?;
        self.wait("all_reduce", t0)
    }

    /// `recv = reduction of every rank's send` (same length).
    pub fn all_reduce<T: CollectiveScalar>(
        &mut self,
        send: &View<'_, T>,
        recv: &mut ViewMut<'_, T>,
        op: Reduce,
    ) -> Result<()> {
        if send.len() != recv.len() {
            return Err(Error::ShapeMismatch { op: "all_reduce", what: "recv", expected: send.len(), got: recv.len() });
        }
        let t0 = Instant::now();
        self.agree("all_reduce", send.len(), t0)?;
        let r = self.enqueue_all_reduce(Some(send), recv, op)?;
        self.finish("all_reduce", r, t0)?;
        self.wait("all_reduce", t0)
    }

    /// Rank `root`'s `buf` copied into every rank's `buf`, in place.
    pub fn broadcast<T: CollectiveScalar>(&mut self, buf: &mut ViewMut<'_, T>, root: usize) -> Result<()> {
        if root >= self.world {
            return Err(CollectiveError::BadRank { rank: root, world: self.world }.into());
        }
        let t0 = Instant::now();
        self.agree("broadcast", buf.len(), t0)?;
        let comm = self.live("broadcast")?;
        let ViewMut::Cuda(b) = buf else { return Err(cpu_buffer("broadcast")) };
        let n = b.len();
        let r = {
            let (d, _g) = b.device_ptr_mut(&self.cs);
            // SAFETY: in place: one pointer to `n` elements of T on this device; root < world.
            unsafe { nr::broadcast(d as _, d as _, n, T::as_nccl_type(), root as i32, comm, self.cs.cu_stream() as _) }
        };
        self.finish("broadcast", r, t0)?;
        self.wait("broadcast", t0)
    }

    /// `recv` = every rank's `send`, concatenated in rank order (`recv` is `world` times
    /// as long as `send`).
    pub fn all_gather<T: CollectiveScalar>(&mut self, send: &View<'_, T>, recv: &mut ViewMut<'_, T>) -> Result<()> {
        let want = send.len() * self.world;
        if recv.len() != want {
            return Err(Error::ShapeMismatch { op: "all_gather", what: "recv", expected: want, got: recv.len() });
        }
        let t0 = Instant::now();
        self.agree("all_gather", send.len(), t0)?;
        let comm = self.live("all_gather")?;
        let (View::Cuda(s), ViewMut::Cuda(r)) = (send, recv) else { return Err(cpu_buffer("all_gather")) };
        let answer = {
            let (sp, _gs) = s.device_ptr(&self.cs);
            let (rp, _gr) = r.device_ptr_mut(&self.cs);
            // SAFETY: `s` holds `send.len()` and `r` `world` times as many elements of T.
            unsafe { nr::all_gather(sp as _, rp as _, s.len(), T::as_nccl_type(), comm, self.cs.cu_stream() as _) }
        };
        self.finish("all_gather", answer, t0)?;
        self.wait("all_gather", t0)
    }

    /// `recv` = this rank's block of the reduction of every rank's `send` (`send` is
    /// `world` times as long as `recv`; rank r gets block r).
    pub fn reduce_scatter<T: CollectiveScalar>(
        &mut self,
        send: &View<'_, T>,
        recv: &mut ViewMut<'_, T>,
        op: Reduce,
    ) -> Result<()> {
        let want = recv.len() * self.world;
        if send.len() != want {
            return Err(Error::ShapeMismatch { op: "reduce_scatter", what: "send", expected: want, got: send.len() });
        }
        let t0 = Instant::now();
        self.agree("reduce_scatter", recv.len(), t0)?;
        let comm = self.live("reduce_scatter")?;
        let (View::Cuda(s), ViewMut::Cuda(r)) = (send, recv) else { return Err(cpu_buffer("reduce_scatter")) };
        let answer = {
            let n = r.len();
            let (sp, _gs) = s.device_ptr(&self.cs);
            let (rp, _gr) = r.device_ptr_mut(&self.cs);
            // SAFETY: `r` holds `n` elements, `s` `world` times as many, all of T.
            unsafe {
                nr::reduce_scatter(sp as _, rp as _, n, T::as_nccl_type(), op.raw(), comm, self.cs.cu_stream() as _)
            }
        };
        self.finish("reduce_scatter", answer, t0)?;
        self.wait("reduce_scatter", t0)
    }
}

fn cpu_buffer(op: &'static str) -> Error {
    Error::BackendMismatch { op, what: "buffer", expected: "cuda", got: "cpu" }
}

impl Communicator {
    /// Makes this rank's stream wait for the work queued on `other` so far (a stream of
    /// the same GPU): a collective queued next starts after it, without blocking the host.
    pub fn wait_for(&self, other: &Stream) -> Result<()> {
        let o = cuda_of(other)?;
        let ev = o.record_event(None).ctx(|| "recording an event to wait for".into())?;
        self.cs.wait(&ev).ctx(|| "making the collective's stream wait".into())
    }

    /// Waits (at most `timeout` from now) for everything queued on this rank's stream, the
    /// collectives queued by `group_all_reduce_async` included; aborts the communicator
    /// when late.
    pub fn synchronize(&mut self) -> Result<()> {
        self.live("synchronize")?;
        self.wait("synchronize", Instant::now())
    }
}

/// Queues the in-place all-reduce of `bufs[i]` on `comms[i]` as one NCCL group and returns
/// without waiting for the GPUs (work queued on the same streams after it runs after it);
/// finish with [`Communicator::synchronize`] on each. Lengths are checked on the host first,
/// and communicators of one `for_devices` call must all be there (a missing rank would
/// leave the others waiting inside NCCL).
pub fn group_all_reduce_async<T: CollectiveScalar>(
    comms: &mut [Communicator],
    bufs: &mut [ViewMut<'_, T>],
    op: Reduce,
) -> Result<()> {
    if comms.len() != bufs.len() {
        return Err(Error::ShapeMismatch {
            op: "group_all_reduce",
            what: "buffers",
            expected: comms.len(),
            got: bufs.len(),
        });
    }
    agree_on_host("all_reduce", &bufs.iter().map(|b| b.len()).collect::<Vec<_>>())?;
    whole_cliques(&comms.iter().map(|c| (c.clique, c.rank, c.world)).collect::<Vec<_>>())?;
    let t0 = Instant::now();
    nr::group_start().map_err(nccl_err("ncclGroupStart"))?;
    let queued: Result<Vec<Call>> =
        comms.iter().zip(bufs.iter_mut()).map(|(c, b)| c.enqueue_all_reduce(None, b, op)).collect();
    // Inside a group NCCL only records the calls; the group's end answers for them all.
    let end = nr::group_end();
    if let Some(e) = queued?.into_iter().find_map(|r| r.err()) {
        return Err(CollectiveError::Nccl { context: "all_reduce (in a group)".into(), code: call::code(&e) }.into());
    }
    comms.iter_mut().try_for_each(|c| c.finish("all_reduce", end.clone(), t0))
}

/// One process, every GPU: all-reduces `bufs[i]` (on `comms[i]`'s device) in place, as one
/// NCCL group so a single thread can drive every rank, then waits for all of them. The
/// lengths are checked on the host first (`SizeMismatch` names the first rank that differs).
pub fn group_all_reduce<T: CollectiveScalar>(
    comms: &mut [Communicator],
    bufs: &mut [ViewMut<'_, T>],
    op: Reduce,
) -> Result<()> {
    let t0 = Instant::now();
    group_all_reduce_async(comms, bufs, op)?;
    comms.iter_mut().try_for_each(|c| c.wait("all_reduce", t0))
}

/// Group calls on communicators of one `for_devices` call (`clique`) must hold every rank
/// of it once: NCCL would wait inside the group's end for a missing one, with no deadline
/// (those communicators are blocking). Entries are `(clique, rank, world)`.
fn whole_cliques(members: &[(Option<u64>, usize, usize)]) -> Result<()> {
    let bad = |why: String| Err(Error::InvalidConfig { op: "group_all_reduce", why });
    let Some(&(Some(id), _, world)) = members.iter().find(|m| m.0.is_some()) else { return Ok(()) };
    if members.iter().any(|m| m.0 != Some(id)) {
        return bad("the communicators come from different Communicator::for_devices calls (or from_rank)".into());
    }
    let mut ranks: Vec<usize> = members.iter().map(|m| m.1).collect();
    ranks.sort_unstable();
    if ranks != (0..world).collect::<Vec<_>>() {
        return bad(format!(
            "a group call needs every rank of its communicators once: got ranks {ranks:?} of a world of {world}"
        ));
    }
    Ok(())
}

/// Every rank's element count equals rank 0's, or the first that differs as an error.
fn agree_on_host(op: &'static str, lens: &[usize]) -> Result<()> {
    match lens.iter().position(|&l| l != lens[0]) {
        None => Ok(()),
        Some(rank) => Err(CollectiveError::SizeMismatch { op, rank, expected: lens[0], got: lens[rank] }.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_streams_and_bad_ranks_are_typed_errors() {
        let cpu = crate::Backend::new(crate::BackendChoice::Cpu).unwrap();
        let id = NcclId([0; 128]);
        let e = Communicator::from_rank(&cpu.stream(), 2, 2, &id, Duration::from_millis(10)).unwrap_err();
        assert!(matches!(e, Error::Collective(CollectiveError::BadRank { rank: 2, world: 2 })), "{e}");
        let e = Communicator::from_rank(&cpu.stream(), 0, 0, &id, Duration::from_millis(10)).unwrap_err();
        assert!(matches!(e, Error::Collective(CollectiveError::BadRank { .. })), "{e}");
        let e = Communicator::from_rank(&cpu.stream(), 0, 2, &id, Duration::from_millis(10)).unwrap_err();
        assert!(matches!(e, Error::BackendMismatch { got: "cpu", .. }), "{e}");
        let e = Communicator::for_devices(&[], Duration::from_millis(10)).unwrap_err();
        assert!(matches!(e, Error::EmptyInput { .. }), "{e}");
        let e = Communicator::for_devices(&[cpu.stream()], Duration::from_millis(10)).unwrap_err();
        assert!(matches!(e, Error::BackendMismatch { .. }), "{e}");
    }

    #[test]
    fn group_calls_check_lengths_before_touching_nccl() {
        let mut a = [0f32; 4];
        let mut b = [0f32; 5];
        let mut bufs = [ViewMut::Cpu(&mut a[..]), ViewMut::Cpu(&mut b[..])];
        let e = group_all_reduce::<f32>(&mut [], &mut bufs, Reduce::Sum).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { op: "group_all_reduce", .. }), "{e}");
        assert!(agree_on_host("all_reduce", &[4, 4, 4]).is_ok());
        let e = agree_on_host("all_reduce", &[4, 4, 5, 4]).unwrap_err();
        assert!(
            matches!(e, Error::Collective(CollectiveError::SizeMismatch { rank: 2, expected: 4, got: 5, .. })),
            "{e}"
        );
        assert!(e.to_string().contains("rank 2 has 5, rank 0 has 4"), "{e}");
    }

    #[test]
    fn group_calls_need_every_rank_of_a_for_devices_clique() {
        assert!(whole_cliques(&[(Some(7), 1, 2), (Some(7), 0, 2)]).is_ok());
        // Rank communicators (from_rank) may each drive their own group.
        assert!(whole_cliques(&[(None, 1, 2)]).is_ok());
        for bad in [
            vec![(Some(7), 0, 2)],                                   // rank 1 missing: NCCL would wait for it
            vec![(Some(7), 0, 2), (Some(7), 0, 2)],                  // rank 0 twice
            vec![(Some(7), 0, 2), (Some(8), 1, 2)],                  // two for_devices calls
            vec![(Some(7), 0, 2), (None, 1, 2)],                     // mixed with a rank communicator
            vec![(Some(7), 0, 3), (Some(7), 1, 3), (Some(7), 3, 3)], // rank 3 of 3
        ] {
            let e = whole_cliques(&bad).unwrap_err();
            assert!(matches!(e, Error::InvalidConfig { op: "group_all_reduce", .. }), "{bad:?}: {e}");
        }
        let e = whole_cliques(&[(Some(7), 0, 2)]).unwrap_err();
        assert!(e.to_string().contains("got ranks [0] of a world of 2"), "{e}");
    }
}
