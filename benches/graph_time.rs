//! Our GEMM call captured in a CUDA graph (`Stream::capture`) and replayed, timed as torch's
//! `matmul_graph` peer is (events around each replay): what a call costs a user who graphs it,
//! the host's per-call planning and launch cost gone. The GEMM rows report it beside the
//! single call, so both sides of a comparison get the same choice (eager or graphed).

use ferrotune::graph::Graph;
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
/// new stream and times replaying them in turn (copy `i % copies` at replay `i`). Each copy is
/// run once on that stream first: workspaces belong to their stream and are never allocated
/// inside a capture. `None` on the CPU backend (nothing to capture); a capture or replay that
/// fails is an error, not a missing column.
pub fn replay_stats(
    backend: &Backend,
    repeat: Repeat,
    copies: usize,
    mut call: impl FnMut(usize, &Stream) -> Result<()>,
) -> Result<Option<Replays>> {
    if !matches!(backend, Backend::Cuda(_)) || copies == 0 {
        return Ok(None);
    }
    // The operands were written on the default stream: the new stream starts after them.
    backend.stream().synchronize()?;
    let stream = backend.new_stream()?;
    for i in 0..copies {
        call(i, &stream)?;
    }
    stream.synchronize()?;
    let graphs = (0..copies).map(|i| stream.capture(|c| call(i, c))).collect::<Result<Vec<_>>>()?;
    let stats = time_on_stream(&stream, repeat, |i| graphs[i % copies].replay(&stream))?;
    stream.synchronize()?;
    Ok(Some(Replays { stats, graphs, stream }))
}
