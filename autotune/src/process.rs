//! The tuner's side of the worker process: start it, send one request, wait for one answer
//! with a timeout, and turn a crash, a fault or a hang into a recorded outcome instead of
//! the end of the sweep. A dead or killed worker is replaced on the next request.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::protocol::{ConfigJson, Description, EvalOutcome, Request, Response, Shape, ShapeJson};

/// How to start a worker: a program (e.g. the xtask binary) and its arguments (e.g. the
/// hidden `tune-worker` subcommand), plus extra environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// Timeouts of the worker requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Opening the backend and describing the machine.
    pub describe: Duration,
    /// Allocating and filling a shape's tensors.
    pub prepare: Duration,
    /// One candidate (run, verify, time).
    pub candidate: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            describe: Duration::from_secs(120),
            prepare: Duration::from_secs(300),
            candidate: Duration::from_secs(30),
        }
    }
}

/// Why a request got no answer.
#[derive(Debug)]
enum CallError {
    Timeout(Duration),
    Died(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Timeout(t) => write!(f, "no answer within {} s (worker killed)", t.as_secs_f64()),
            CallError::Died(why) => f.write_str(why),
        }
    }
}

struct Live {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    prepared: bool,
}

/// A worker process, restarted as needed. `describe` and `prepare` must succeed for the
/// sweep to go on; `evaluate` never fails: every problem becomes an `EvalOutcome`.
pub struct ProcessEvaluator {
    cmd: WorkerCommand,
    timeouts: Timeouts,
    live: Option<Live>,
    /// The `Prepare` of the current shape, replayed into a replacement worker.
    prepare: Option<Request>,
    /// Workers started so far (the first included).
    pub starts: usize,
}

impl Drop for ProcessEvaluator {
    fn drop(&mut self) {
        self.kill();
    }
}

impl ProcessEvaluator {
    pub fn new(cmd: WorkerCommand, timeouts: Timeouts) -> ProcessEvaluator {
        ProcessEvaluator { cmd, timeouts, live: None, prepare: None, starts: 0 }
    }

    fn spawn(&mut self) -> Result<&mut Live, String> {
        if self.live.is_none() {
            let mut c = Command::new(&self.cmd.program);
            c.args(&self.cmd.args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
            for (k, v) in &self.cmd.env {
                c.env(k, v);
            }
            let mut child = c.spawn().map_err(|e| format!("starting worker {}: {e}", self.cmd.program.display()))?;
            let (Some(stdin), Some(stdout), Some(stderr)) =
                (child.stdin.take(), child.stdout.take(), child.stderr.take())
            else {
                let _ = child.kill();
                return Err("worker started without pipes".into());
            };
            let (tx, lines) = channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            // The last lines of stderr say why a worker died (a panic message, a driver error).
            let tail = Arc::new(Mutex::new(VecDeque::new()));
            let t = tail.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    let mut q = t.lock().unwrap_or_else(|p| p.into_inner());
                    if q.len() == 8 {
                        q.pop_front();
                    }
                    q.push_back(line);
                }
            });
            self.starts += 1;
            self.live = Some(Live { child, stdin, lines, stderr: tail, prepared: false });
        }
        self.live.as_mut().ok_or_else(|| "no worker".to_string())
    }

    /// Kills the worker (if any) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut l) = self.live.take() {
            let _ = l.child.kill();
            let _ = l.child.wait();
        }
    }

    fn call(&mut self, req: &Request, timeout: Duration) -> Result<Response, CallError> {
        let line = serde_json::to_string(req).map_err(|e| CallError::Died(format!("encoding the request: {e}")))?;
        let live = self.spawn().map_err(CallError::Died)?;
        let sent = writeln!(live.stdin, "{line}").and_then(|_| live.stdin.flush());
        let answer = match sent {
            Ok(()) => live.lines.recv_timeout(timeout),
            Err(_) => Err(RecvTimeoutError::Disconnected),
        };
        match answer {
            Ok(text) => serde_json::from_str(&text).map_err(|e| {
                self.kill();
                CallError::Died(format!("unreadable answer from the worker ({e}): {text}"))
            }),
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                Err(CallError::Timeout(timeout))
            }
            Err(RecvTimeoutError::Disconnected) => Err(CallError::Died(self.reap())),
        }
    }

    /// Waits for a worker that closed its output and says how it ended.
    fn reap(&mut self) -> String {
        let Some(mut l) = self.live.take() else { return "no worker".into() };
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            match l.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                _ => {
                    let _ = l.child.kill();
                    break l.child.wait().ok();
                }
            }
        };
        // Give the stderr reader a moment to collect the last words.
        std::thread::sleep(Duration::from_millis(20));
        let tail: Vec<String> = l.stderr.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect();
        let how = match status {
            Some(s) => describe_status(&s),
            None => "an unknown status".into(),
        };
        if tail.is_empty() {
            format!("worker died with {how}")
        } else {
            format!("worker died with {how}: {}", tail.join(" | "))
        }
    }

    /// Opens the backend in a worker and describes the machine.
    pub fn describe(
        &mut self,
        backend: &str,
        shapes: &[Shape],
        resources_dir: Option<String>,
    ) -> Result<Description, String> {
        let elems = shapes.iter().filter_map(|s| match s {
            Shape::Elem(e) => Some(e),
            _ => None,
        });
        let mut ops: Vec<String> = elems.clone().map(|s| s.op.name().to_string()).collect();
        let mut dtypes: Vec<String> = elems.map(|s| s.dtype.name().to_string()).collect();
        ops.sort();
        ops.dedup();
        dtypes.sort();
        dtypes.dedup();
        let gemm = shapes.iter().filter(|s| matches!(s, Shape::Gemm(_))).map(ShapeJson::from).collect();
        let clifford = shapes.iter().filter(|s| matches!(s, Shape::Clifford(_))).map(ShapeJson::from).collect();
        let req = Request::Describe { backend: backend.into(), ops, dtypes, gemm, clifford, resources_dir };
        match self.call(&req, self.timeouts.describe) {
            Ok(Response::Description(d)) => Ok(*d),
            Ok(Response::Error { why }) => Err(why),
            Ok(other) => Err(format!("unexpected answer to describe: {other:?}")),
            Err(e) => Err(format!("describing the machine: {e}")),
        }
    }

    /// Makes `shape` the current one (its tensors are built in the worker now and again in
    /// every replacement worker).
    pub fn prepare(&mut self, backend: &str, shape: &Shape, seed: u64) -> Result<(), String> {
        let req = Request::Prepare { backend: backend.into(), shape: shape.into(), seed };
        self.prepare = Some(req);
        if let Some(l) = self.live.as_mut() {
            l.prepared = false;
        }
        self.ensure_prepared()
    }

    fn ensure_prepared(&mut self) -> Result<(), String> {
        if self.live.as_ref().is_some_and(|l| l.prepared) {
            return Ok(());
        }
        let Some(req) = self.prepare.clone() else { return Err("no shape prepared".into()) };
        match self.call(&req, self.timeouts.prepare) {
            Ok(Response::Prepared { .. }) => {
                if let Some(l) = self.live.as_mut() {
                    l.prepared = true;
                }
                Ok(())
            }
            Ok(Response::Error { why }) => {
                self.kill();
                Err(why)
            }
            Ok(other) => Err(format!("unexpected answer to prepare: {other:?}")),
            Err(e) => Err(format!("preparing the shape: {e}")),
        }
    }

    /// Runs one candidate in the worker. A crash, a fault or a timeout is an outcome; the
    /// next call starts a fresh worker.
    pub fn evaluate(&mut self, config: ConfigJson, warmup: usize, iters: usize) -> EvalOutcome {
        if let Err(why) = self.ensure_prepared() {
            return EvalOutcome::Failed { why: format!("worker could not prepare the shape: {why}"), fatal: true };
        }
        let t0 = Instant::now();
        match self.call(&Request::Eval { config, warmup, iters }, self.timeouts.candidate) {
            Ok(Response::Outcome(o)) => {
                if matches!(o, EvalOutcome::Failed { fatal: true, .. }) {
                    // Its context is unusable: it exits; make sure it is gone.
                    self.kill();
                }
                o
            }
            Ok(Response::Error { why }) => EvalOutcome::Failed { why, fatal: false },
            Ok(other) => EvalOutcome::Failed { why: format!("unexpected answer: {other:?}"), fatal: false },
            Err(CallError::Timeout(_)) => EvalOutcome::Timeout { after_s: t0.elapsed().as_secs_f64() },
            Err(CallError::Died(why)) => EvalOutcome::Failed { why, fatal: true },
        }
    }
}

fn describe_status(s: &std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = s.signal() {
            let name = match sig {
                6 => " (SIGABRT)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                _ => "",
            };
            return format!("signal {sig}{name}");
        }
    }
    match s.code() {
        Some(c) => format!("exit code {c}"),
        None => "no exit code".into(),
    }
}
