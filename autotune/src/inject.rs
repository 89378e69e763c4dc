//! Fault injection for the worker process, to prove on any machine that a candidate's
//! fault, hang, error or wrong result takes down only what it should.
//!
//! `FERROTUNE_TUNE_INJECT`
//! = `KIND@key=value,...;KIND@...` with KIND `fault` (CUDA: a kernel reading an unmapped
//! address; CPU: the process aborts), `wrong` (one output element corrupted before
//! verification), `hang` (never returns) or `error` (a launch error), and keys `threads`,
//! `vec16`, `unroll`, `blocks_per_sm`, `cpu_chunk` (elementwise), `tile`, `cpu_rows`, `split_k` (GEMM),
//! `threads`, `rows_per_block`, `blocks_per_sm`, `cpu_rows` (Clifford), `op`, `dtype` selecting
//! the candidates (a key of another family never matches).
//! `FERROTUNE_TUNE_FAKE_TIME=1` replaces measured times by a fixed function of the config
//! (run and verification stay real), so tests know which candidate must win.

use ferrotune::Stream;

use crate::protocol::{ConfigJson, EvalOutcome, Shape};

/// One injected misbehaviour and the candidates it applies to.
#[derive(Clone, Debug, PartialEq)]
pub struct Injection {
    pub kind: InjectKind,
    pub matches: Vec<(String, String)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectKind {
    Fault,
    Wrong,
    Hang,
    Error,
}

/// Parses `FERROTUNE_TUNE_INJECT`'s syntax (see the module docs).
pub fn parse_injections(spec: &str) -> Result<Vec<Injection>, String> {
    let mut out = Vec::new();
    for part in spec.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let (kind, rest) = part.split_once('@').unwrap_or((part, ""));
        let kind = match kind.trim() {
            "fault" => InjectKind::Fault,
            "wrong" => InjectKind::Wrong,
            "hang" => InjectKind::Hang,
            "error" => InjectKind::Error,
            k => return Err(format!("unknown injection '{k}' (fault, wrong, hang, error)")),
        };
        let mut matches = Vec::new();
        for kv in rest.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("'{kv}' is not key=value"))?;
            let k = k.trim();
            const KEYS: [&str; 11] = [
                "threads",
                "vec16",
                "unroll",
                "blocks_per_sm",
                "cpu_chunk",
                "tile",
                "cpu_rows",
                "split_k",
                "rows_per_block",
                "op",
                "dtype",
            ];
            if !KEYS.contains(&k) {
                return Err(format!("unknown injection key '{k}'"));
            }
            matches.push((k.to_string(), v.trim().to_string()));
        }
        out.push(Injection { kind, matches });
    }
    Ok(out)
}

impl Injection {
    pub(crate) fn applies(&self, shape: &Shape, c: &ConfigJson) -> bool {
        self.matches.iter().all(|(k, v)| {
            let have = match (k.as_str(), c) {
                ("op", _) => Some(shape.op_name().to_string()),
                ("dtype", _) => Some(shape.dtype_name().to_string()),
                ("threads", ConfigJson::Elem(c)) => Some(c.threads.to_string()),
                ("vec16", ConfigJson::Elem(c)) => Some(c.vec16.to_string()),
                ("unroll", ConfigJson::Elem(c)) => Some(c.unroll.to_string()),
                ("blocks_per_sm", ConfigJson::Elem(c)) => Some(c.blocks_per_sm.to_string()),
                ("cpu_chunk", ConfigJson::Elem(c)) => Some(c.cpu_chunk.to_string()),
                ("tile", ConfigJson::Gemm(c)) => Some(c.tile.to_string()),
                ("cpu_rows", ConfigJson::Gemm(c)) => Some(c.cpu_rows.to_string()),
                ("split_k", ConfigJson::Gemm(c)) => Some(c.split_k.to_string()),
                ("path", ConfigJson::Gemm(c)) => Some(ferrotune::config::GemmConfig::from(*c).path.label()),
                ("threads", ConfigJson::Clifford(c)) => Some(c.threads.to_string()),
                ("rows_per_block", ConfigJson::Clifford(c)) => Some(c.rows_per_block.to_string()),
                ("blocks_per_sm", ConfigJson::Clifford(c)) => Some(c.blocks_per_sm.to_string()),
                ("cpu_rows", ConfigJson::Clifford(c)) => Some(c.cpu_rows.to_string()),
                _ => None,
            };
            have.as_ref() == Some(v)
        })
    }
}

/// The synthetic time of `FERROTUNE_TUNE_FAKE_TIME`: elementwise, smallest at cpu_chunk 2^14,
/// 256 threads, vec16, unroll 2, blocks_per_sm 0; GEMM, smallest at cpu_rows 4, tile 0, no split;
/// Clifford, smallest at cpu_rows 8, 256 threads, one row per block.
pub fn fake_ms(c: &ConfigJson) -> f64 {
    let lg = |x: f64| x.max(1.0).log2();
    match c {
        ConfigJson::Elem(c) => {
            1.0 + 0.1 * (lg(c.cpu_chunk as f64) - 14.0).abs()
                + 0.01 * (lg(f64::from(c.threads)) - 8.0).abs()
                + if c.vec16 { 0.0 } else { 0.05 }
                + 0.01 * (f64::from(c.unroll) - 2.0).abs()
                + 0.001 * f64::from(c.blocks_per_sm)
        }
        ConfigJson::Gemm(c) => {
            1.0 + 0.1 * (lg(c.cpu_rows as f64) - 2.0).abs() + 0.01 * f64::from(c.tile) + 0.001 * lg(c.split_k as f64)
        }
        ConfigJson::Clifford(c) => {
            1.0 + 0.1 * (lg(c.cpu_rows as f64) - 3.0).abs()
                + 0.01 * (lg(f64::from(c.threads)) - 8.0).abs()
                + 0.001 * lg(f64::from(c.rows_per_block))
        }
    }
}

/// Carries out the injections that replace a candidate's run (`hang`, `error`, `fault`); the
/// outcome when one did. `wrong` is applied by the benches to the output they verify.
pub(crate) fn injected(s: &Stream, inject: &[Injection], shape: &Shape, c: &ConfigJson) -> Option<EvalOutcome> {
    let hit = |k: InjectKind| inject.iter().any(|i| i.kind == k && i.applies(shape, c));
    if hit(InjectKind::Hang) {
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
    if hit(InjectKind::Error) {
        return Some(EvalOutcome::Failed { why: "injected launch error".into(), fatal: false });
    }
    if hit(InjectKind::Fault) {
        if s.gpu().is_none() {
            // The CPU has no device to fault: die the way a crashed process does.
            std::process::abort();
        }
        if let Err(e) = ferrotune::tuned::launch_faulting_kernel(s) {
            return Some(EvalOutcome::Failed { why: format!("injected fault: {e}"), fatal: true });
        }
    }
    None
}

/// Whether `wrong` is injected for this candidate.
pub(crate) fn wrong_injected(inject: &[Injection], shape: &Shape, c: &ConfigJson) -> bool {
    inject.iter().any(|i| i.kind == InjectKind::Wrong && i.applies(shape, c))
}
