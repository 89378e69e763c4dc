//! A scoped profiler: named regions of streams timed with events (device time on CUDA, wall
//! time on the CPU backend), exported as Chrome trace JSON for chrome://tracing or Perfetto,
//! and a memory tracker of the buffers allocated through it (current, peak, allocations). On
//! CUDA every scope also records the device pool's allocated bytes at its end and their peak
//! inside it (fed by the pool, so op scratch and every buffer count).

use std::fmt::Write as _;

use crate::buffer::{Buffer, Scalar};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::stream::Stream;

/// Bytes held by buffers the caller allocated through the profiler (or registered with it).
/// Counts only what it is told about: the runtime's own allocations are not seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryTracker {
    current: usize,
    peak: usize,
    allocations: usize,
    frees: usize,
}

impl MemoryTracker {
    pub fn on_alloc(&mut self, bytes: usize) {
        self.current += bytes;
        self.peak = self.peak.max(self.current);
        self.allocations += 1;
    }

    /// Frees more than is held leave zero: the tracker never goes negative.
    pub fn on_free(&mut self, bytes: usize) {
        self.current = self.current.saturating_sub(bytes);
        self.frees += 1;
    }

    pub fn current_bytes(&self) -> usize {
        self.current
    }

    pub fn peak_bytes(&self) -> usize {
        self.peak
    }

    pub fn allocations(&self) -> usize {
        self.allocations
    }

    pub fn frees(&self) -> usize {
        self.frees
    }
}

/// An open scope, returned by [`Profiler::begin`] and closed by [`Profiler::end`].
#[must_use = "a scope is only recorded once it is ended"]
#[derive(Debug)]
pub struct ScopeId(usize);

/// One timed region, resolved to microseconds from the profiler's creation.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub name: String,
    pub start_us: f64,
    pub dur_us: f64,
    /// One track per stream (1 = the first stream seen).
    pub track: u32,
}

struct Open {
    name: String,
    start: Event,
    track: u32,
    watch: Option<usize>,
}

struct Closed {
    name: String,
    start: Event,
    end: Event,
    track: u32,
    /// The pool's allocated bytes: the peak inside the scope and the value at its end.
    pool: Option<(usize, usize)>,
}

/// Named scopes on streams and a memory tracker; times are read when the trace is built, so
/// scopes add only event records to the timed streams.
pub struct Profiler {
    origin: Event,
    process: String,
    open: Vec<Option<Open>>,
    closed: Vec<Closed>,
    streams: Vec<usize>,
    memory: MemoryTracker,
    samples: Vec<(Event, usize)>,
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Profiler({}, {} spans, {:?})", self.process, self.closed.len(), self.memory)
    }
}

impl Profiler {
    /// Starts the clock on `stream`: every time in the trace is relative to this point.
    pub fn new(stream: &Stream) -> Result<Profiler> {
        Ok(Profiler {
            origin: Event::record(stream)?,
            process: format!("ferrotune ({})", stream.backend_name()),
            open: Vec::new(),
            closed: Vec::new(),
            streams: Vec::new(),
            memory: MemoryTracker::default(),
            samples: Vec::new(),
        })
    }

    /// Pool bytes of each closed scope: (name, peak allocated inside it, allocated at its end).
    pub fn scope_memory(&self) -> Vec<(String, usize, usize)> {
        self.closed.iter().filter_map(|c| c.pool.map(|(p, n)| (c.name.clone(), p, n))).collect()
    }

    /// The stream's track: streams are told apart by their driver handle.
    fn track(&mut self, stream: &Stream) -> u32 {
        let id = stream.cuda_stream().map_or(0, |s| s.cu_stream() as usize);
        let i = self.streams.iter().position(|&s| s == id).unwrap_or_else(|| {
            self.streams.push(id);
            self.streams.len() - 1
        });
        i as u32 + 1
    }

    /// Opens a scope at the current end of `stream`'s queue.
    pub fn begin(&mut self, name: impl Into<String>, stream: &Stream) -> Result<ScopeId> {
        let track = self.track(stream);
        let watch = stream.gpu().map(|g| g.pool.open_watch());
        self.open.push(Some(Open { name: name.into(), start: Event::record(stream)?, track, watch }));
        Ok(ScopeId(self.open.len() - 1))
    }

    /// Closes `scope` at the current end of `stream`'s queue.
    pub fn end(&mut self, scope: ScopeId, stream: &Stream) -> Result<()> {
        let open = self.open.get_mut(scope.0).and_then(Option::take).ok_or_else(|| Error::InvalidConfig {
            op: "Profiler::end",
            why: format!("scope {} was not opened by this profiler or is already closed", scope.0),
        })?;
        let end = Event::record(stream)?;
        let pool = match (stream.gpu(), open.watch) {
            (Some(g), Some(w)) => g.pool.close_watch(w).map(|peak| (peak, g.pool.stats().allocated_bytes)),
            _ => None,
        };
        self.closed.push(Closed { name: open.name, start: open.start, end, track: open.track, pool });
        Ok(())
    }

    /// Runs `work` (which enqueues on `stream`) inside a scope named `name`.
    pub fn scope<R>(
        &mut self,
        name: impl Into<String>,
        stream: &Stream,
        work: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let id = self.begin(name, stream)?;
        let r = work()?;
        self.end(id, stream)?;
        Ok(r)
    }

    pub fn memory(&self) -> &MemoryTracker {
        &self.memory
    }

    /// Records an allocation made elsewhere (a peer library's operands...).
    pub fn track_alloc(&mut self, stream: &Stream, bytes: usize) -> Result<()> {
        self.memory.on_alloc(bytes);
        self.samples.push((Event::record(stream)?, self.memory.current_bytes()));
        Ok(())
    }

    /// Records the release of bytes registered with [`Profiler::track_alloc`].
    pub fn track_free(&mut self, stream: &Stream, bytes: usize) -> Result<()> {
        self.memory.on_free(bytes);
        self.samples.push((Event::record(stream)?, self.memory.current_bytes()));
        Ok(())
    }

    /// `Buffer::zeros`, tracked.
    pub fn zeros<T: Scalar>(&mut self, stream: &Stream, len: usize) -> Result<Buffer<T>> {
        let b = Buffer::zeros(stream, len)?;
        self.track_alloc(stream, len * size_of::<T>())?;
        Ok(b)
    }

    /// `Buffer::from_slice`, tracked.
    pub fn upload<T: Scalar>(&mut self, stream: &Stream, data: &[T]) -> Result<Buffer<T>> {
        let b = Buffer::from_slice(stream, data)?;
        self.track_alloc(stream, std::mem::size_of_val(data))?;
        Ok(b)
    }

    /// Drops a buffer allocated through the profiler and records the release.
    pub fn free<T: Scalar>(&mut self, stream: &Stream, buffer: Buffer<T>) -> Result<()> {
        let bytes = buffer.len() * size_of::<T>();
        drop(buffer);
        self.track_free(stream, bytes)
    }

    /// Every closed scope with its times (waits for the events it needs).
    pub fn spans(&self) -> Result<Vec<Span>> {
        self.closed
            .iter()
            .map(|c| {
                Ok(Span {
                    name: c.name.clone(),
                    start_us: self.origin.elapsed_ms(&c.start)? * 1e3,
                    dur_us: c.start.elapsed_ms(&c.end)? * 1e3,
                    track: c.track,
                })
            })
            .collect()
    }

    /// Scopes still open (a trace built now leaves them out).
    pub fn open_scopes(&self) -> usize {
        self.open.iter().filter(|o| o.is_some()).count()
    }

    /// The trace in Chrome's JSON format: one complete ("X") event per scope, a counter ("C")
    /// of tracked bytes at each allocation and release, and the process and track names.
    pub fn chrome_trace(&self) -> Result<String> {
        let mut events = Vec::new();
        events.push(format!(
            r#"{{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{{"name":{}}}}}"#,
            json_string(&self.process)
        ));
        for (i, &id) in self.streams.iter().enumerate() {
            let name = if id == 0 { "default stream".to_string() } else { format!("stream {id:#x}") };
            events.push(format!(
                r#"{{"name":"thread_name","ph":"M","pid":1,"tid":{},"args":{{"name":{}}}}}"#,
                i + 1,
                json_string(&name)
            ));
        }
        for (s, c) in self.spans()?.into_iter().zip(&self.closed) {
            let args = match c.pool {
                Some((peak, now)) => format!(r#","args":{{"pool_peak_bytes":{peak},"pool_allocated_bytes":{now}}}"#),
                None => String::new(),
            };
            events.push(format!(
                r#"{{"name":{},"cat":"scope","ph":"X","ts":{:.3},"dur":{:.3},"pid":1,"tid":{}{args}}}"#,
                json_string(&s.name),
                s.start_us,
                s.dur_us,
                s.track
            ));
            if let Some((_, now)) = c.pool {
                events.push(format!(
                    r#"{{"name":"pool allocated bytes","ph":"C","ts":{:.3},"pid":1,"tid":0,"args":{{"bytes":{now}}}}}"#,
                    s.start_us + s.dur_us
                ));
            }
        }
        for (at, bytes) in &self.samples {
            events.push(format!(
                r#"{{"name":"tracked bytes","ph":"C","ts":{:.3},"pid":1,"tid":0,"args":{{"bytes":{bytes}}}}}"#,
                self.origin.elapsed_ms(at)? * 1e3
            ));
        }
        let m = &self.memory;
        let mut out = String::from("{\"traceEvents\":[\n");
        out.push_str(&events.join(",\n"));
        let _ = write!(
            out,
            "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{{\"peak_bytes\":{},\"current_bytes\":{},\"allocations\":{}}}}}\n",
            m.peak_bytes(),
            m.current_bytes(),
            m.allocations()
        );
        Ok(out)
    }
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, BackendChoice};

    #[test]
    fn memory_tracker_keeps_current_and_peak() {
        let mut m = MemoryTracker::default();
        m.on_alloc(100);
        m.on_alloc(50);
        m.on_free(100);
        m.on_alloc(20);
        assert_eq!((m.current_bytes(), m.peak_bytes(), m.allocations(), m.frees()), (70, 150, 3, 1));
        m.on_free(1000);
        assert_eq!(m.current_bytes(), 0);
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\nd\u{1}"), r#""a\"b\\c\nd\u0001""#);
    }

    #[test]
    fn scopes_nest_and_close_once() {
        let backend = Backend::new(BackendChoice::Cpu).unwrap();
        let s = backend.stream();
        let mut p = Profiler::new(&s).unwrap();
        let outer = p.begin("outer", &s).unwrap();
        let buf = p.zeros::<f32>(&s, 256).unwrap();
        p.scope("inner", &s, || {
            std::thread::sleep(std::time::Duration::from_millis(2));
            Ok(())
        })
        .unwrap();
        p.free(&s, buf).unwrap();
        p.end(outer, &s).unwrap();
        assert!(p.end(ScopeId(0), &s).is_err(), "a scope closes once");
        let spans = p.spans().unwrap();
        assert_eq!(spans.len(), 2);
        let (inner, outer) = (&spans[0], &spans[1]);
        assert_eq!((inner.name.as_str(), outer.name.as_str()), ("inner", "outer"));
        assert!(inner.dur_us >= 2000.0 && outer.dur_us >= inner.dur_us);
        assert!(inner.start_us >= outer.start_us);
        assert_eq!((p.memory().peak_bytes(), p.memory().current_bytes()), (1024, 0));
        let trace = p.chrome_trace().unwrap();
        assert!(trace.starts_with("{\"traceEvents\":[") && trace.contains(r#""name":"inner""#));
        assert!(trace.contains(r#""peak_bytes":1024"#));
    }
}
