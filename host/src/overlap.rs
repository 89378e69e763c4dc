//! Copy/compute overlap: a chunked host→device→compute→host pipeline over several streams.
//! Chunk `i` runs on stream `i % n`, so one stream's copies run while another computes; each
//! stream has its own device buffers, reused in its own order.

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, result};

use crate::buffer::{Buffer, Scalar, View, ViewMut};
use crate::error::{DriverContext, Error, Result};
use crate::pinned::PinnedBuffer;
use crate::stream::Stream;

/// Streams and per-stream device buffers for chunks of up to `chunk` elements.
pub struct Pipeline<T: Scalar> {
    streams: Vec<Stream>,
    chunk: usize,
    inputs: Vec<Buffer<T>>,
    outputs: Vec<Buffer<T>>,
}

/// Queues a copy of pinned host elements `src` to `dst` on `cs`.
fn h2d<T: Scalar>(cs: &std::sync::Arc<CudaStream>, src: &[T], dst: &mut ViewMut<'_, T>) -> Result<()> {
    let ViewMut::Cuda(d) = dst else { unreachable!("pipeline buffers are CUDA buffers") };
    let (p, _g) = d.device_ptr_mut(cs);
    // SAFETY: `src` is page-locked memory the caller keeps borrowed until the pipeline has
    // waited for its streams; `dst` holds at least `src.len()` elements.
    unsafe { result::memcpy_htod_async(p, src, cs.cu_stream()) }.ctx(|| "queuing a host-to-device chunk".into())
}

/// Queues a copy of `src` to pinned host elements `dst` on `cs`.
fn d2h<T: Scalar>(cs: &std::sync::Arc<CudaStream>, src: &View<'_, T>, dst: &mut [T]) -> Result<()> {
    let View::Cuda(v) = src else { unreachable!("pipeline buffers are CUDA buffers") };
    let (p, _g) = v.device_ptr(cs);
    // SAFETY: as in `h2d`, the other way.
    unsafe { result::memcpy_dtoh_async(dst, p, cs.cu_stream()) }.ctx(|| "queuing a device-to-host chunk".into())
}

impl<T: Scalar> Pipeline<T> {
    /// `streams` (at least one; two or more overlap) and chunks of `chunk` elements.
    pub fn new(streams: Vec<Stream>, chunk: usize) -> Result<Pipeline<T>> {
        if streams.is_empty() || chunk == 0 {
            return Err(Error::InvalidConfig {
                op: "Pipeline::new",
                why: "needs a stream and a chunk of at least 1".into(),
            });
        }
        if streams.iter().any(|s| s.cuda_stream().is_none()) {
            return Err(Error::BackendMismatch { op: "Pipeline::new", what: "stream", expected: "cuda", got: "cpu" });
        }
        let inputs = streams.iter().map(|s| Buffer::zeros(s, chunk)).collect::<Result<Vec<_>>>()?;
        let outputs = streams.iter().map(|s| Buffer::zeros(s, chunk)).collect::<Result<Vec<_>>>()?;
        Ok(Pipeline { streams, chunk, inputs, outputs })
    }

    pub fn streams(&self) -> &[Stream] {
        &self.streams
    }

    /// Runs `input` through `compute` into `output` chunk by chunk and waits for the end.
    /// `compute(stream, x, y)` queues work on `stream` reading `x` and writing `y` (same
    /// length, at most `chunk`).
    pub fn run(
        &mut self,
        input: &PinnedBuffer<T>,
        output: &mut PinnedBuffer<T>,
        mut compute: impl FnMut(&Stream, &View<'_, T>, &mut ViewMut<'_, T>) -> Result<()>,
    ) -> Result<()> {
        if input.len() != output.len() {
            return Err(Error::ShapeMismatch {
                op: "Pipeline::run",
                what: "output",
                expected: input.len(),
                got: output.len(),
            });
        }
        let n = input.len();
        let src = input.as_slice()?;
        let dst = output.as_mut_slice()?;
        let k = self.streams.len();
        for (i, start) in (0..n).step_by(self.chunk).enumerate() {
            let len = self.chunk.min(n - start);
            let j = i % k;
            let s = &self.streams[j];
            let cs = s.cuda_stream().expect("checked in new");
            let mut x = self.inputs[j].view_mut(..len)?;
            h2d(cs, &src[start..start + len], &mut x)?;
            let x = self.inputs[j].view(..len)?;
            let mut y = self.outputs[j].view_mut(..len)?;
            compute(s, &x, &mut y)?;
            let y = self.outputs[j].view(..len)?;
            d2h(cs, &y, &mut dst[start..start + len])?;
        }
        // One event per stream marks its last chunk; waiting on them ends the run.
        for s in &self.streams {
            let cs = s.cuda_stream().expect("checked in new");
            let ev =
                cs.record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING)).ctx(|| "recording an event".into())?;
            ev.synchronize().ctx(|| "waiting for the pipeline".into())?;
        }
        Ok(())
    }
}
