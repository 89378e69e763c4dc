//! The messages between the tuner and its worker process (one JSON object per line on the
//! worker's stdin/stdout). Kept small and explicit: the worker may die at any point, and
//! the tuner must be able to tell a crash from an answer.

use ferrotune::ElemConfig;
use ferrotune::{DType, ElemOp, ElemVariant};
use ferrotune_profile::Device;
use serde::{Deserialize, Serialize};

use crate::measure::{Repeat, Stats};
use crate::space::{KernelResources, Limits};

/// An `ElemConfig` on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConfigJson {
    pub threads: u32,
    pub vec16: bool,
    pub unroll: u32,
    pub blocks_per_sm: u32,
    pub cpu_chunk: usize,
}

impl From<ElemConfig> for ConfigJson {
    fn from(c: ElemConfig) -> Self {
        ConfigJson {
            threads: c.threads,
            vec16: c.variant.vec16,
            unroll: c.variant.unroll,
            blocks_per_sm: c.blocks_per_sm,
            cpu_chunk: c.cpu_chunk,
        }
    }
}

impl From<ConfigJson> for ElemConfig {
    fn from(c: ConfigJson) -> Self {
        ElemConfig {
            threads: c.threads,
            variant: ElemVariant { vec16: c.vec16, unroll: c.unroll },
            blocks_per_sm: c.blocks_per_sm,
            cpu_chunk: c.cpu_chunk,
        }
    }
}

/// One shape to tune: an op on `n` elements of `dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    pub op: ElemOp,
    pub dtype: DType,
    pub n: usize,
}

impl Shape {
    pub fn label(&self) -> String {
        format!("{} {} n={}", self.op.name(), self.dtype.name(), self.n)
    }
}

/// What the tuner asks.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Request {
    /// Open the backend and describe the machine and the kernels' resources.
    Describe {
        backend: String,
        ops: Vec<String>,
        dtypes: Vec<String>,
        /// Directory with `ferrotune_kernels.<arch>.resources.json` (from `cargo xtask ptx`).
        resources_dir: Option<String>,
    },
    /// Allocate and fill the tensors of a shape (fresh random inputs from `seed`).
    Prepare { backend: String, op: String, dtype: String, n: usize, seed: u64 },
    /// Run, verify and time one config on the prepared shape.
    Eval { config: ConfigJson, warmup: usize, iters: usize },
}

/// The launch resources of one (op, dtype, variant) entry point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResourceJson {
    pub op: String,
    pub dtype: String,
    pub vec16: bool,
    pub unroll: u32,
    pub resources: KernelResources,
}

/// The built-in config of an (op, dtype) on this machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DefaultJson {
    pub op: String,
    pub dtype: String,
    pub config: ConfigJson,
}

/// The machine as the worker sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Description {
    /// `cuda` or `cpu`: what the tuner passes back in every `Prepare`.
    pub backend: String,
    pub device: Device,
    pub build: String,
    /// `None` on the CPU backend.
    pub limits: Option<Limits>,
    /// Last-level cache the timings must not hit (L2 on CUDA; an assumed LLC on the CPU).
    pub cache_bytes: u64,
    /// Peak DRAM bandwidth (datasheet-style, GB/s) and core clock, for the cost model.
    pub peak_gbps: f64,
    pub clock_ghz: f64,
    pub cpu_threads: usize,
    pub resources: Vec<ResourceJson>,
    pub defaults: Vec<DefaultJson>,
    /// Where the register counts came from (`driver`, `ptxas report`, or an estimate).
    pub resources_from: String,
}

impl Description {
    pub fn resources_of(&self, op: ElemOp, dtype: DType, v: ElemVariant) -> Option<KernelResources> {
        self.resources
            .iter()
            .find(|r| r.op == op.name() && r.dtype == dtype.name() && r.vec16 == v.vec16 && r.unroll == v.unroll)
            .map(|r| r.resources)
    }

    pub fn default_of(&self, op: ElemOp, dtype: DType) -> Option<ElemConfig> {
        self.defaults.iter().find(|d| d.op == op.name() && d.dtype == dtype.name()).map(|d| d.config.into())
    }
}

/// How one evaluation ended, as the worker (or the tuner, for a dead worker) reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum EvalOutcome {
    /// Verified against the reference, then timed. `verified` says how.
    Ok { stats: Stats, verified: String },
    /// The output did not match the reference: recorded, never picked.
    Invalid { why: String },
    /// Rejected before launch, failed to launch or faulted. `fatal`: the worker's context is
    /// unusable and it exits.
    Failed { why: String, fatal: bool },
    /// Ran past the per-candidate timeout (set by the tuner, which killed the worker).
    Timeout { after_s: f64 },
}

impl EvalOutcome {
    pub fn median_ms(&self) -> Option<f64> {
        match self {
            EvalOutcome::Ok { stats, .. } => Some(stats.median_ms),
            _ => None,
        }
    }
}

/// What the worker answers.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Response {
    Description(Box<Description>),
    Prepared {
        sets: usize,
        bytes_per_set: u64,
    },
    Outcome(EvalOutcome),
    /// A request the worker could not serve (bad request, backend unavailable).
    Error {
        why: String,
    },
}

/// The default repetitions of a candidate.
pub const SEARCH_REPEAT: Repeat = Repeat { warmup: 3, iters: 20 };
