//! Our GEMM call captured in a CUDA graph (`Stream::capture`) and replayed, timed as torch's
//! `matmul_graph` peer is (events around each replay): what a call costs a user who graphs it,
//! the host's per-call planning and launch cost gone. The GEMM rows report it beside the
//! single call, and cuBLAS graphed beside its single call, so both sides of a comparison get
//! the same choice (eager or graphed).

use ferrotune::graph::Graph;
use ferrotune::peer::{CublasGemm, GemmMath, GemmShape, PeerError};
use ferrotune::{Backend, Result, Stream};
use ferrotune_autotune::measure::{Repeat, Stats, time_on_stream};

/// The timed replays and the graphs behind them (kept for one more replay to check).
pub struct Replays {
    pub stats: Stats,
    graphs: Vec<Graph>,
    stream: Stream,
}

impl Replays {
    /// Replays copy 0's graph once more and waits for it.
    pub fn replay_once(&self) -> Result<()> {
        self.graphs[0].replay(&self.stream)?;
        self.stream.synchronize()
    }
}

/// Captures `call(i, stream)` for each operand copy `i < copies` into a graph of its own on a
/// new stream and times replaying them in turn ([`replay_on`]). `None` on the CPU backend
/// (nothing to capture); a capture or replay that fails is an error, not a missing column.
pub fn replay_stats(
    backend: &Backend,
    repeat: Repeat,
    copies: usize,
    call: impl FnMut(usize, &Stream) -> Result<()>,
) -> Result<Option<Replays>> {
    if !matches!(backend, Backend::Cuda(_)) || copies == 0 {
        return Ok(None);
    }
    // The operands were written on the default stream: the new stream starts after them.
    backend.stream().synchronize()?;
    replay_on(backend.new_stream()?, repeat, copies, call).map(Some)
}

/// [`replay_stats`] on a given CUDA stream (not the default one), for work bound to it when it
/// was made (a cuBLAS handle): each copy is run once there first (workspaces belong to their
/// stream and are never allocated inside a capture), then captured, then the graphs are
/// replayed in turn (copy `i % copies` at replay `i`), events around each replay.
pub fn replay_on(
    stream: Stream,
    repeat: Repeat,
    copies: usize,
    mut call: impl FnMut(usize, &Stream) -> Result<()>,
) -> Result<Replays> {
    for i in 0..copies {
        call(i, &stream)?;
    }
    stream.synchronize()?;
    let graphs = (0..copies.max(1)).map(|i| stream.capture(|c| call(i, c))).collect::<Result<Vec<_>>>()?;
    let stats = time_on_stream(&stream, repeat, |i| graphs[i % graphs.len()].replay(&stream))?;
    stream.synchronize()?;
    Ok(Replays { stats, graphs, stream })
}

/// cuBLAS (`cublasGemmEx`, as the rows' `cuBLAS` peer) on `copies` operand sets captured in
/// CUDA graphs and replayed in turn: the graphed form of the vendor peer, beside ours. The
/// peer's output is checked on sampled elements before the capture; `None` on the CPU backend.
pub fn cublas_replays(
    backend: &Backend,
    repeat: Repeat,
    math: GemmMath,
    shape: GemmShape,
    copies: usize,
) -> std::result::Result<Option<Stats>, PeerError> {
    if !matches!(backend, Backend::Cuda(_)) || copies == 0 {
        return Ok(None);
    }
    let stream = backend.new_stream()?;
    let mut peers = (0..copies).map(|_| CublasGemm::new(&stream, math, shape)).collect::<Result<Vec<_>, _>>()?;
    peers[0].verify(64)?;
    let launch = |p: &mut CublasGemm| {
        p.launch().map_err(|e| ferrotune::Error::InvalidConfig { op: "cublas graph", why: e.to_string() })
    };
    let r = replay_on(stream, repeat, copies, |i, _| launch(&mut peers[i]))?;
    Ok(Some(r.stats))
}
