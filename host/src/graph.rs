//! CUDA graphs: capture a sequence of ops on a stream once, replay it with one launch, and
//! update its kernel parameters (new buffers of the same shapes) without re-instantiating
//! where the driver allows. Allocations during a capture come from a private pool the graph
//! keeps for its lifetime, so a replay never writes memory the rest of the program reuses.

use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{self, CUgraph, CUgraphExec, CUgraphInstantiate_flags, CUresult, CUstreamCaptureMode};
use cudarc::driver::{CudaStream, result};

use crate::backend::Gpu;
use crate::error::{DriverContext, Error, Result};
use crate::pool::device::{CaptureRelease, stream_owner};
use crate::stream::Stream;

/// A captured and instantiated sequence of work, replayable on any stream of its device.
pub struct Graph {
    gpu: Arc<Gpu>,
    stream: Arc<CudaStream>,
    graph: CUgraph,
    exec: CUgraphExec,
    kernels: usize,
    memory: Vec<CaptureRelease>,
    replayed_on: Mutex<Vec<Arc<CudaStream>>>,
}

/// How [`Graph::update`] applied the new capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Updated {
    /// `cuGraphExecUpdate` changed the parameters in place.
    InPlace,
    /// The topology changed: the graph was instantiated again.
    Reinstantiated,
}

/// Captures `work` on `stream` into a graph (not instantiated), with cudarc's per-buffer event
/// tracking off and the pool routing allocations to a private pool.
fn capture_raw(
    gpu: &Arc<Gpu>,
    stream: &Arc<CudaStream>,
    work: impl FnOnce(&Stream) -> Result<()>,
) -> Result<(CUgraph, CaptureRelease)> {
    if stream.cu_stream().is_null() {
        return Err(Error::Capture {
            op: "capture",
            why: "the default (legacy) stream cannot be captured: use Backend::new_stream".into(),
        });
    }
    let ctx = stream.context();
    ctx.bind_to_thread().ctx(|| "binding the context".into())?;
    let tracking = ctx.is_event_tracking();
    gpu.pool.begin_capture(stream)?;
    // SAFETY: tracking is restored below on every path. While it is off cudarc records no
    // per-buffer events; the captured work is ordered by the one capture stream.
    unsafe { ctx.disable_event_tracking() };
    // Relaxed: the pool may create a segment (cuMemAlloc) while this thread captures.
    // SAFETY: the stream is a live, non-default stream of this context.
    let begun = unsafe {
        result::stream::begin_capture(stream.cu_stream(), CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
    };
    let outcome = match begun {
        Ok(()) => {
            let s = Stream::Cuda { stream: stream.clone(), gpu: gpu.clone() };
            let ran = work(&s);
            // SAFETY: ends the capture begun above (also after a failed or invalidated one).
            let ended = unsafe { result::stream::end_capture(stream.cu_stream()) };
            match (ran, ended) {
                (Ok(()), Ok(g)) if !g.is_null() => Ok(g),
                (ran, ended) => {
                    if let Ok(g) = ended
                        && !g.is_null()
                    {
                        // SAFETY: a graph this capture produced and nothing else holds.
                        let _ = unsafe { result::graph::destroy(g) };
                    }
                    let why = match (ran, ended) {
                        (Err(e), _) => format!(
                            "{e} (inside a capture, calls that wait for the device or copy to pageable \
                             host memory are not allowed)"
                        ),
                        (Ok(()), Err(e)) => format!("the driver invalidated the capture: {e}"),
                        (Ok(()), Ok(_)) => "the capture produced no graph".into(),
                    };
                    Err(Error::Capture { op: "capture", why })
                }
            }
        }
        Err(e) => Err(Error::Capture { op: "capture", why: format!("cuStreamBeginCapture failed: {e}") }),
    };
    if tracking {
        // SAFETY: restores the state found on entry.
        unsafe { ctx.enable_event_tracking() };
    }
    let release = gpu.pool.end_capture(stream).expect("begin_capture registered this stream");
    match outcome {
        Ok(g) => Ok((g, release)),
        Err(e) => {
            // Nothing captured ever runs: the capture stream's own order is enough.
            gpu.pool.release_capture(release, stream_owner(stream));
            Err(e)
        }
    }
}

/// Kernel nodes of a graph (what `µs per kernel` divides by).
fn kernel_count(graph: CUgraph) -> Result<usize> {
    let mut n = 0usize;
    // SAFETY: a null node array asks only for the count.
    unsafe { sys::cuGraphGetNodes(graph, std::ptr::null_mut(), &mut n) }
        .result()
        .ctx(|| "counting graph nodes".into())?;
    let mut nodes = vec![std::ptr::null_mut(); n];
    // SAFETY: `nodes` has room for the `n` nodes the driver reported.
    unsafe { sys::cuGraphGetNodes(graph, nodes.as_mut_ptr(), &mut n) }.result().ctx(|| "listing graph nodes".into())?;
    let mut kernels = 0;
    for node in nodes.into_iter().take(n) {
        let mut ty = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
        // SAFETY: `node` belongs to `graph`, which is alive.
        unsafe { sys::cuGraphNodeGetType(node, &mut ty) }.result().ctx(|| "reading a graph node's type".into())?;
        kernels += usize::from(ty == sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL);
    }
    Ok(kernels)
}

/// `cuGraphExecUpdate`: true when `exec` now runs `graph`'s parameters, false when the
/// driver refused (topology or node kinds changed) and `exec` is unchanged.
fn exec_update(exec: CUgraphExec, graph: CUgraph) -> Result<bool> {
    // SAFETY: a plain-old-data out parameter.
    let mut info: sys::CUgraphExecUpdateResultInfo = unsafe { std::mem::zeroed() };
    // SAFETY: both handles are alive and of one context; `info` is a valid out pointer.
    match unsafe { sys::cuGraphExecUpdate_v2(exec, graph, &mut info) } {
        CUresult::CUDA_SUCCESS => Ok(true),
        CUresult::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE => Ok(false),
        e => Err(e.result().err().map_or_else(
            || Error::Capture { op: "Graph::update", why: "cuGraphExecUpdate failed".into() },
            |source| Error::Driver { context: "updating a graph's parameters".into(), source },
        )),
    }
}

impl Stream {
    /// Captures the ops `work` queues on this stream into a [`Graph`] and instantiates it.
    /// The stream must be a CUDA stream other than the default one. Inside `work`, calls that
    /// wait for the device (synchronize, copies to host vectors) fail the capture with a
    /// typed error; allocations come from a private pool the graph keeps.
    pub fn capture(&self, work: impl FnOnce(&Stream) -> Result<()>) -> Result<Graph> {
        let Stream::Cuda { stream, gpu } = self else {
            return Err(Error::BackendMismatch { op: "capture", what: "stream", expected: "cuda", got: "cpu" });
        };
        let (graph, release) = capture_raw(gpu, stream, work)?;
        let kernels = kernel_count(graph);
        // SAFETY: `graph` is the live graph just captured.
        let (kernels, exec) = match (kernels, unsafe { result::graph::instantiate(graph, CUgraphInstantiate_flags(0)) })
        {
            (Ok(k), Ok(exec)) => (k, exec),
            (k, e) => {
                // SAFETY: the graph is ours and not instantiated.
                let _ = unsafe { result::graph::destroy(graph) };
                gpu.pool.release_capture(release, stream_owner(stream));
                k?;
                return Err(e.err().map_or_else(
                    || Error::Capture { op: "capture", why: "instantiation failed".into() },
                    |source| Error::Driver { context: "instantiating a graph".into(), source },
                ));
            }
        };
        Ok(Graph {
            gpu: gpu.clone(),
            stream: stream.clone(),
            graph,
            exec,
            kernels,
            memory: vec![release],
            replayed_on: Mutex::new(Vec::new()),
        })
    }
}

impl Graph {
    /// Launches the whole graph on `stream` (any stream of the graph's device).
    pub fn replay(&self, stream: &Stream) -> Result<()> {
        let Stream::Cuda { stream: cs, gpu } = stream else {
            return Err(Error::BackendMismatch { op: "Graph::replay", what: "stream", expected: "cuda", got: "cpu" });
        };
        if gpu.info.ordinal != self.gpu.info.ordinal || !Arc::ptr_eq(cs.context(), self.stream.context()) {
            return Err(Error::WrongDevice {
                op: "Graph::replay",
                expected: self.gpu.info.ordinal,
                got: gpu.info.ordinal,
            });
        }
        {
            let mut on = self.replayed_on.lock().unwrap_or_else(|p| p.into_inner());
            if !on.iter().any(|s| s.cu_stream() == cs.cu_stream()) {
                on.push(cs.clone());
            }
        }
        // SAFETY: `exec` is alive and belongs to this stream's context (checked above).
        unsafe { result::graph::launch(self.exec, cs.cu_stream()) }.ctx(|| "launching a graph".into())
    }

    /// Kernel launches in the graph.
    pub fn kernels(&self) -> usize {
        self.kernels
    }

    /// Captures `work` again (same ops, e.g. on other buffers of the same shapes) and applies
    /// it to the instantiated graph: in place through `cuGraphExecUpdate` when the driver
    /// accepts it, else by instantiating the new graph.
    pub fn update(&mut self, work: impl FnOnce(&Stream) -> Result<()>) -> Result<Updated> {
        self.wait_replays()?;
        let (graph, release) = capture_raw(&self.gpu, &self.stream, work)?;
        self.memory.push(release);
        let kernels = kernel_count(graph)?;
        let how = if exec_update(self.exec, graph)? {
            Updated::InPlace
        } else {
            // SAFETY: `graph` is the live graph just captured.
            let exec = unsafe { result::graph::instantiate(graph, CUgraphInstantiate_flags(0)) }
                .ctx(|| "instantiating an updated graph".into());
            let exec = match exec {
                Ok(e) => e,
                Err(e) => {
                    // SAFETY: ours, never instantiated.
                    let _ = unsafe { result::graph::destroy(graph) };
                    return Err(e);
                }
            };
            // SAFETY: no replay is in flight (waited above); the old exec is ours.
            let _ = unsafe { result::graph::exec_destroy(self.exec) };
            self.exec = exec;
            Updated::Reinstantiated
        };
        // SAFETY: the old graph is ours; the exec does not reference it after update or
        // re-instantiation.
        let _ = unsafe { result::graph::destroy(self.graph) };
        self.graph = graph;
        self.kernels = kernels;
        Ok(how)
    }

    fn wait_replays(&self) -> Result<()> {
        let on = self.replayed_on.lock().unwrap_or_else(|p| p.into_inner());
        for s in on.iter() {
            s.synchronize().ctx(|| "waiting for a graph's replays".into())?;
        }
        Ok(())
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        if let Err(e) = self.wait_replays() {
            log::error!("graph: waiting for replays failed: {e}");
        }
        // SAFETY: no replay is in flight; both handles are ours.
        unsafe {
            let _ = result::graph::exec_destroy(self.exec);
            let _ = result::graph::destroy(self.graph);
        }
        for r in self.memory.drain(..) {
            self.gpu.pool.release_capture(r, stream_owner(&self.stream));
        }
    }
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Graph({} kernels on device {})", self.kernels, self.gpu.info.ordinal)
    }
}
