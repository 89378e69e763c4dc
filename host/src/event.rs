//! Events and an event timer: device time between two points of a stream (CUDA events), or
//! wall time on the CPU backend, whose ops run synchronously.

use std::time::Instant;

use cudarc::driver::CudaEvent;
use cudarc::driver::sys::CUevent_flags;

use crate::error::{DriverContext, Result};
use crate::stream::Stream;

/// A point recorded on a stream.
pub enum Event {
    Cuda(CudaEvent),
    Cpu(Instant),
}

impl Event {
    /// Records the current end of `stream`'s queue (with timing enabled).
    pub fn record(stream: &Stream) -> Result<Event> {
        match stream {
            Stream::Cuda { stream, .. } => Ok(Event::Cuda(
                stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).ctx(|| "recording an event".into())?,
            )),
            Stream::Cpu(_) => Ok(Event::Cpu(Instant::now())),
        }
    }

    /// Milliseconds from `self` to `end` (waits for `end` to complete).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f64> {
        match (self, end) {
            (Event::Cuda(a), Event::Cuda(b)) => {
                b.synchronize().ctx(|| "waiting for an event".into())?;
                Ok(a.elapsed_ms(b).ctx(|| "reading event time".into())? as f64)
            }
            (Event::Cpu(a), Event::Cpu(b)) => Ok(b.duration_since(*a).as_secs_f64() * 1e3),
            _ => Err(crate::Error::InvalidConfig {
                op: "Event::elapsed_ms",
                why: "events from different backends".into(),
            }),
        }
    }
}

/// Times a region of a stream: `start`, enqueue work, `stop` → milliseconds.
pub struct EventTimer {
    start: Event,
}

impl EventTimer {
    pub fn start(stream: &Stream) -> Result<EventTimer> {
        Ok(EventTimer { start: Event::record(stream)? })
    }

    /// Records the end of the region and returns its duration in milliseconds.
    pub fn stop(self, stream: &Stream) -> Result<f64> {
        let end = Event::record(stream)?;
        self.start.elapsed_ms(&end)
    }
}
