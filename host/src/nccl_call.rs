//! The deadline on NCCL's host calls: non-blocking communicators (`ncclConfig_t.blocking =
//! 0`, made by `ncclCommInitRankConfig`), their state (`ncclCommGetAsyncError`) and abort
//! (`ncclCommAbort`), and the loop that polls a call answering `ncclInProgress` until it
//! settles or its deadline passes. A non-blocking communicator never keeps the caller inside
//! NCCL: joining the ranks, and the connection set-up NCCL does lazily in the first
//! collective, run on NCCL's own threads, so a peer that never comes costs a timeout and an
//! abort, not a hang. The raw NCCL calls of that are here and nowhere else; the loop is
//! generic over its probe, so CI tests it without NCCL.

use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use cudarc::nccl::result::{self as nr, NcclError, NcclStatus};
use cudarc::nccl::sys;

/// What an NCCL call answered when it returned.
pub(crate) type Call = std::result::Result<NcclStatus, NcclError>;

/// What one look at a communicator's state found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    Ready,
    Pending,
    Failed(String),
}

/// How a call ended, judged against its deadline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Done (for a collective: queued on its stream).
    Ready,
    /// The call itself refused (a bad argument...): the communicator is still usable.
    Refused(String),
    /// The communicator's background work failed: it must be aborted.
    Broken(String),
    /// Still in progress at the deadline: it must be aborted.
    Late,
}

/// Busy-polls (yielding) this long before sleeping between looks, so a call that settles
/// in microseconds is not charged a sleep's granularity.
const SPIN: Duration = Duration::from_millis(2);
/// The sleep between looks after the spin.
const POLL: Duration = Duration::from_micros(50);

/// Judges a call's answer `first`. An error is a refusal; `ncclInProgress` (and, for a
/// non-blocking communicator, any answer: its state may hold an error of background work)
/// is followed by looks at `probe` until it is ready or failed, or until `timeout` has
/// passed since `t0`. `probe` is looked at at least once, even past the deadline, so an
/// answer that is already there is taken.
pub(crate) fn settle(
    first: Call,
    nonblocking: bool,
    t0: Instant,
    timeout: Duration,
    mut probe: impl FnMut() -> Probe,
) -> Settled {
    match first {
        Err(e) => return Settled::Refused(code(&e)),
        Ok(NcclStatus::InProgress) => {}
        Ok(_) if nonblocking => {}
        Ok(_) => return Settled::Ready,
    }
    let spin_until = Instant::now() + SPIN;
    loop {
        match probe() {
            Probe::Ready => return Settled::Ready,
            Probe::Failed(c) => return Settled::Broken(c),
            Probe::Pending => {}
        }
        let waited = t0.elapsed();
        if waited >= timeout {
            return Settled::Late;
        }
        if Instant::now() < spin_until {
            std::thread::yield_now();
        } else {
            std::thread::sleep(POLL.min(timeout - waited));
        }
    }
}

/// NCCL's name for a result code.
pub(crate) fn code(e: &NcclError) -> String {
    format!("{:?}", e.0)
}

/// `NCCL_VERSION(2, 30, 0)`: the layout of `ncclConfig_t` in cudarc's `nccl` feature
/// (nccl-02030). An older library reads the prefix it knows: it copies `min(size, its own
/// size)` bytes and checks only `magic` and which fields `version` predates.
const CONFIG_VERSION: u32 = 23000;
/// `NCCL_CONFIG_UNDEF_INT`: NCCL picks its default (or the `NCCL_*` environment's).
const UNDEF: i32 = i32::MIN;

/// `NCCL_CONFIG_INITIALIZER` with `blocking = 0`.
fn nonblocking_config() -> sys::ncclConfig_t {
    sys::ncclConfig_t {
        size: std::mem::size_of::<sys::ncclConfig_t>(),
        magic: 0xcafe_beef,
        version: CONFIG_VERSION,
        blocking: 0,
        cgaClusterSize: UNDEF,
        minCTAs: UNDEF,
        maxCTAs: UNDEF,
        netName: std::ptr::null(),
        splitShare: UNDEF,
        trafficClass: UNDEF,
        commName: std::ptr::null(),
        collnetEnable: UNDEF,
        CTAPolicy: UNDEF,
        shrinkShare: UNDEF,
        nvlsCTAs: UNDEF,
        nChannelsPerNetPeer: UNDEF,
        nvlinkCentricSched: UNDEF,
        graphUsageMode: UNDEF,
        numRmaCtx: UNDEF,
        maxP2pPeers: UNDEF,
    }
}

/// Starts joining rank `rank` of `world` as a non-blocking communicator on the device of
/// the CUDA context bound to this thread. Returns the handle (null when the call refused)
/// and the call's answer; finish with [`settle`] over [`state`].
pub(crate) fn init_rank_nonblocking(world: i32, id: sys::ncclUniqueId, rank: i32) -> (sys::ncclComm_t, Call) {
    let mut config = nonblocking_config();
    let mut comm: sys::ncclComm_t = std::ptr::null_mut();
    // SAFETY: `comm` and `config` are locals that outlive the call; NCCL copies the config
    // (its pointer fields are null) and writes the handle before it returns, also when it
    // answers ncclInProgress. The caller checked 0 <= rank < world.
    let r = unsafe { nr::comm_init_rank_config(&mut comm, world, id, rank, &mut config) };
    if r.is_err() {
        comm = std::ptr::null_mut(); // NCCL freed what it had made.
    }
    (comm, r)
}

/// One look at `comm`'s state (`ncclCommGetAsyncError`).
pub(crate) fn state(comm: sys::ncclComm_t) -> Probe {
    let mut r = sys::ncclResult_t::ncclSuccess;
    // SAFETY: `comm` is a live handle (its owner aborts it only after the last look); one
    // out-pointer to a local.
    let call = unsafe { sys::ncclCommGetAsyncError(comm, &mut r) };
    match (call, r) {
        (sys::ncclResult_t::ncclSuccess, sys::ncclResult_t::ncclSuccess) => Probe::Ready,
        (sys::ncclResult_t::ncclSuccess, sys::ncclResult_t::ncclInProgress) => Probe::Pending,
        (sys::ncclResult_t::ncclSuccess, e) => Probe::Failed(format!("{e:?}")),
        (c, _) => Probe::Failed(format!("ncclCommGetAsyncError answered {c:?}")),
    }
}

/// How long an abort may take before the caller goes on without it.
pub(crate) const ABORT_GRACE: Duration = Duration::from_secs(10);

/// Aborts `comm` (`ncclCommAbort`: NCCL's threads and the kernels waiting for peers stop)
/// on a helper thread, waiting at most `grace`: should NCCL itself not return, the caller
/// goes on and the thread finishes whenever NCCL does.
pub(crate) fn abort(comm: sys::ncclComm_t, grace: Duration) {
    if comm.is_null() {
        return;
    }
    let handle = comm as usize;
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        // SAFETY: the handle came from a successful init and its owner gives it up here:
        // it is aborted once and never used again.
        let r = unsafe { nr::comm_abort(handle as sys::ncclComm_t) };
        let _ = tx.send(r);
    });
    match rx.recv_timeout(grace) {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => log::warn!("ncclCommAbort failed: {}", code(&e)),
        Err(_) => log::warn!("ncclCommAbort did not return within {} s; going on without it", grace.as_secs()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_blocking_call_that_succeeded_is_never_polled() {
        let looks = Cell::new(0);
        let probe = || {
            looks.set(looks.get() + 1);
            Probe::Pending
        };
        assert_eq!(settle(Ok(NcclStatus::Success), false, Instant::now(), ms(50), probe), Settled::Ready);
        assert_eq!(looks.get(), 0);
    }

    #[test]
    fn a_refused_call_is_reported_without_polling_and_keeps_the_communicator() {
        let looks = Cell::new(0);
        let e = NcclError(sys::ncclResult_t::ncclInvalidArgument);
        let s = settle(Err(e), true, Instant::now(), ms(50), || {
            looks.set(looks.get() + 1);
            Probe::Ready
        });
        assert_eq!(s, Settled::Refused("ncclInvalidArgument".into()));
        assert_eq!(looks.get(), 0);
    }

    #[test]
    fn in_progress_is_polled_until_ready() {
        for nonblocking in [false, true] {
            let looks = Cell::new(0);
            let s = settle(Ok(NcclStatus::InProgress), nonblocking, Instant::now(), Duration::from_secs(10), || {
                looks.set(looks.get() + 1);
                if looks.get() < 5 { Probe::Pending } else { Probe::Ready }
            });
            assert_eq!((s, looks.get()), (Settled::Ready, 5));
        }
        // A non-blocking communicator's state is looked at even after ncclSuccess.
        let looks = Cell::new(0);
        let s = settle(Ok(NcclStatus::Success), true, Instant::now(), ms(50), || {
            looks.set(looks.get() + 1);
            Probe::Ready
        });
        assert_eq!((s, looks.get()), (Settled::Ready, 1));
    }

    #[test]
    fn a_background_failure_breaks_the_communicator() {
        let looks = Cell::new(0);
        let s = settle(Ok(NcclStatus::InProgress), true, Instant::now(), Duration::from_secs(10), || {
            looks.set(looks.get() + 1);
            if looks.get() < 3 { Probe::Pending } else { Probe::Failed("ncclRemoteError".into()) }
        });
        assert_eq!(s, Settled::Broken("ncclRemoteError".into()));
    }

    #[test]
    fn pending_past_the_deadline_is_late_after_the_deadline_and_soon_after() {
        let t0 = Instant::now();
        let looks = Cell::new(0);
        let s = settle(Ok(NcclStatus::InProgress), true, t0, ms(60), || {
            looks.set(looks.get() + 1);
            Probe::Pending
        });
        let took = t0.elapsed();
        assert_eq!(s, Settled::Late);
        assert!(took >= ms(60), "gave up early: {took:?}");
        assert!(took < Duration::from_secs(5), "gave up late: {took:?}");
        assert!(looks.get() > 10, "polled only {} times", looks.get());
    }

    #[test]
    fn an_answer_already_there_is_taken_even_past_the_deadline() {
        let t0 = Instant::now() - Duration::from_secs(1);
        assert_eq!(settle(Ok(NcclStatus::InProgress), true, t0, ms(1), || Probe::Ready), Settled::Ready);
        assert_eq!(settle(Ok(NcclStatus::InProgress), true, t0, ms(1), || Probe::Pending), Settled::Late);
    }

    #[test]
    fn the_config_asks_for_a_nonblocking_communicator_and_leaves_the_rest_to_nccl() {
        let c = nonblocking_config();
        assert_eq!((c.blocking, c.magic, c.size), (0, 0xcafe_beef, std::mem::size_of::<sys::ncclConfig_t>()));
        assert_eq!(c.version, 2 * 10000 + 30 * 100);
        assert!(c.netName.is_null() && c.commName.is_null());
        assert!(
            [c.cgaClusterSize, c.minCTAs, c.maxCTAs, c.splitShare, c.CTAPolicy, c.maxP2pPeers]
                .iter()
                .all(|v| *v == UNDEF)
        );
        // Null handles are never passed to NCCL.
        abort(std::ptr::null_mut(), ms(1));
    }
}
