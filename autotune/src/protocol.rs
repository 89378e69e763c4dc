//! The messages between the tuner and its worker process (one JSON object per line on the
//! worker's stdin/stdout). Kept small and explicit: the worker may die at any point, and
//! the tuner must be able to tell a crash from an answer.

use std::collections::BTreeMap;
use std::fmt;

use ferrotune::config::{GemmConfig, GemmPath, PackChoice};
use ferrotune::ops::gemm::{Gemm, Layout, Precision};
use ferrotune::{DType, ElemConfig, ElemOp, ElemVariant};
use ferrotune_profile::Device;
use serde::{Deserialize, Serialize};

use crate::measure::{Repeat, Stats};
pub use crate::protocol_clifford::{CliffordConfigJson, CliffordDefaultJson, CliffordShape};
use crate::space::{KernelResources, Limits};

/// A candidate config on the wire, of any op family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "family", rename_all = "snake_case")]
pub enum ConfigJson {
    Elem(ElemConfigJson),
    Gemm(GemmConfigJson),
    Clifford(CliffordConfigJson),
}

impl ConfigJson {
    /// The elementwise config, if this is one.
    pub fn as_elem(&self) -> Option<&ElemConfigJson> {
        match self {
            ConfigJson::Elem(c) => Some(c),
            _ => None,
        }
    }

    /// The GEMM config, if this is one.
    pub fn as_gemm(&self) -> Option<&GemmConfigJson> {
        match self {
            ConfigJson::Gemm(c) => Some(c),
            _ => None,
        }
    }

    /// The Clifford config, if this is one.
    pub fn as_clifford(&self) -> Option<&CliffordConfigJson> {
        match self {
            ConfigJson::Clifford(c) => Some(c),
            _ => None,
        }
    }
}

impl fmt::Display for ConfigJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigJson::Elem(c) => write!(
                f,
                "threads={} vec16={} unroll={} blocks/SM={} chunk={}",
                c.threads, c.vec16, c.unroll, c.blocks_per_sm, c.cpu_chunk
            ),
            ConfigJson::Gemm(c) => {
                let label = ferrotune::tuned::tile_label(c.tile as usize).unwrap_or_else(|| "not compiled".into());
                write!(f, "tile={} ({label}) cpu_rows={} split_k={}", c.tile, c.cpu_rows, c.split_k)?;
                match c.path {
                    PathJson::Sm90(t) => write!(f, " path=sm90:{t} ({})", ferrotune::tuned::sm90_tile_label(t)),
                    PathJson::Mma => write!(f, " path=mma"),
                    PathJson::SmallM => write!(f, " path=small-m"),
                    PathJson::Auto => Ok(()),
                }?;
                match c.pack {
                    Some(p) => write!(f, " pack={p}"),
                    None => Ok(()),
                }
            }
            ConfigJson::Clifford(c) => write!(
                f,
                "threads={} rows/block={} variant={} blocks/SM={} cpu_rows={}",
                c.threads,
                c.rows_per_block,
                ferrotune::tuned::variant_label(ferrotune::ops::clifford::CliffordConfig::from(*c).variant),
                c.blocks_per_sm,
                c.cpu_rows
            ),
        }
    }
}

impl From<ElemConfig> for ConfigJson {
    fn from(c: ElemConfig) -> Self {
        ConfigJson::Elem(c.into())
    }
}

impl From<GemmConfig> for ConfigJson {
    fn from(c: GemmConfig) -> Self {
        ConfigJson::Gemm(c.into())
    }
}

impl From<ferrotune::ops::clifford::CliffordConfig> for ConfigJson {
    fn from(c: ferrotune::ops::clifford::CliffordConfig) -> Self {
        ConfigJson::Clifford(c.into())
    }
}

/// A `GemmConfig` on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GemmConfigJson {
    /// Index into `gemm::tc::TILES`.
    pub tile: u32,
    pub cpu_rows: usize,
    /// Slices of K (1 = no split); absent in messages of older tools: 1.
    #[serde(default = "no_split")]
    pub split_k: usize,
    /// The kernel family (`GemmPath`); absent in messages of older tools: auto.
    #[serde(default)]
    pub path: PathJson,
    /// Packing of unaligned operands: `true`, `false`, absent (older tools too): the plan's rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack: Option<bool>,
}

fn no_split() -> usize {
    1
}

/// A `GemmPath` on the wire: `"auto"`, `"mma"`, `{"sm90": tile}` or `"small_m"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathJson {
    #[default]
    Auto,
    Mma,
    Sm90(u8),
    SmallM,
}

impl From<GemmConfig> for GemmConfigJson {
    fn from(c: GemmConfig) -> Self {
        let path = match c.path {
            GemmPath::Auto => PathJson::Auto,
            GemmPath::Mma => PathJson::Mma,
            GemmPath::Sm90(t) => PathJson::Sm90(t),
            GemmPath::SmallM => PathJson::SmallM,
        };
        let pack = match c.pack {
            PackChoice::Auto => None,
            p => Some(p == PackChoice::On),
        };
        GemmConfigJson { tile: c.tile as u32, cpu_rows: c.cpu_rows, split_k: c.split_k, path, pack }
    }
}

impl From<GemmConfigJson> for GemmConfig {
    fn from(c: GemmConfigJson) -> Self {
        let path = match c.path {
            PathJson::Auto => GemmPath::Auto,
            PathJson::Mma => GemmPath::Mma,
            PathJson::Sm90(t) => GemmPath::Sm90(t),
            PathJson::SmallM => GemmPath::SmallM,
        };
        let pack = match c.pack {
            None => PackChoice::Auto,
            Some(true) => PackChoice::On,
            Some(false) => PackChoice::Off,
        };
        GemmConfig { tile: c.tile as usize, cpu_rows: c.cpu_rows, split_k: c.split_k, path, pack }
    }
}

/// An `ElemConfig` on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ElemConfigJson {
    pub threads: u32,
    pub vec16: bool,
    pub unroll: u32,
    pub blocks_per_sm: u32,
    pub cpu_chunk: usize,
}

impl From<ElemConfig> for ElemConfigJson {
    fn from(c: ElemConfig) -> Self {
        ElemConfigJson {
            threads: c.threads,
            vec16: c.variant.vec16,
            unroll: c.variant.unroll,
            blocks_per_sm: c.blocks_per_sm,
            cpu_chunk: c.cpu_chunk,
        }
    }
}

impl From<ElemConfigJson> for ElemConfig {
    fn from(c: ElemConfigJson) -> Self {
        ElemConfig {
            threads: c.threads,
            variant: ElemVariant { vec16: c.vec16, unroll: c.unroll },
            blocks_per_sm: c.blocks_per_sm,
            cpu_chunk: c.cpu_chunk,
        }
    }
}

/// One elementwise shape to tune: an op on `n` elements of `dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ElemShape {
    pub op: ElemOp,
    pub dtype: DType,
    pub n: usize,
}

/// The input types GEMM is tuned for (the output has the input's type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmDtype {
    /// f32 inputs on TF32 tensor cores.
    Tf32,
    F16,
    Bf16,
    /// f32 inputs in exact f32 (`Precision::Strict`: the FFMA tiles), keyed `f32` in profiles.
    F32,
}

impl GemmDtype {
    pub const ALL: [GemmDtype; 4] = [GemmDtype::Tf32, GemmDtype::F16, GemmDtype::Bf16, GemmDtype::F32];

    pub fn name(self) -> &'static str {
        match self {
            GemmDtype::Tf32 => "tf32",
            GemmDtype::F16 => "f16",
            GemmDtype::Bf16 => "bf16",
            GemmDtype::F32 => "f32",
        }
    }

    /// How f32 inputs may be multiplied: exact for `F32`, TF32 allowed otherwise (16-bit inputs
    /// ignore it).
    pub fn precision(self) -> Precision {
        if self == GemmDtype::F32 { Precision::Strict } else { Precision::AllowTf32 }
    }

    pub fn from_name(s: &str) -> Option<GemmDtype> {
        GemmDtype::ALL.into_iter().find(|d| d.name() == s)
    }

    /// The element type of the operands in memory.
    pub fn dtype(self) -> DType {
        match self {
            GemmDtype::Tf32 | GemmDtype::F32 => DType::F32,
            GemmDtype::F16 => DType::F16,
            GemmDtype::Bf16 => DType::Bf16,
        }
    }
}

/// One GEMM shape to tune: `batch` products of `m x k` (A, `a`-major) by `k x n` (B), tight
/// leading dimensions, D row-major of the input type, plain epilogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmShape {
    pub dtype: GemmDtype,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batch: usize,
    pub a: Layout,
    pub b: Layout,
}

impl GemmShape {
    /// The problem as the host runs it (resolved; TF32 allowed for `tf32`, exact for `f32`).
    pub fn gemm(&self) -> Gemm {
        Gemm::new(self.m, self.n, self.k)
            .layouts(self.a, self.b)
            .batched(self.batch)
            .precision(self.dtype.precision())
            .resolved()
    }

    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }

    /// Bytes the product must move at least: A and B read and D written once.
    pub fn min_bytes(&self) -> f64 {
        let (m, n, k) = (self.m as f64, self.n as f64, self.k as f64);
        (m * k + k * n + m * n) * self.batch as f64 * self.dtype.dtype().size_bytes() as f64
    }

    /// `rc` etc.: A's and B's storage.
    pub fn layout(&self) -> String {
        ferrotune::tuned::gemm_layout(self.a, self.b)
    }
}

/// One shape to tune, of any family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    Elem(ElemShape),
    Gemm(GemmShape),
    Clifford(CliffordShape),
}

impl Shape {
    /// An elementwise shape.
    pub fn elem(op: ElemOp, dtype: DType, n: usize) -> Shape {
        Shape::Elem(ElemShape { op, dtype, n })
    }

    pub fn label(&self) -> String {
        match self {
            Shape::Elem(s) => format!("{} {} n={}", s.op.name(), s.dtype.name(), s.n),
            Shape::Gemm(g) => {
                let batch = if g.batch > 1 { format!(" batch {}", g.batch) } else { String::new() };
                format!("gemm {} {} {}x{}x{}{batch}", g.dtype.name(), g.layout(), g.m, g.n, g.k)
            }
            Shape::Clifford(c) => c.label(),
        }
    }

    /// The op name profiles key the shape by.
    pub fn op_name(&self) -> &'static str {
        match self {
            Shape::Elem(s) => s.op.name(),
            Shape::Gemm(_) => ferrotune::tuned::GEMM_OP,
            Shape::Clifford(c) => c.pass.op_name(),
        }
    }

    pub fn dtype_name(&self) -> &'static str {
        match self {
            Shape::Elem(s) => s.dtype.name(),
            Shape::Gemm(g) => g.dtype.name(),
            Shape::Clifford(c) => c.dtype.name(),
        }
    }

    /// The layout key: `contiguous` (elementwise), `rc`, `rr`, `cr`, `cc` (GEMM) or
    /// `cl<dim>_<norm|plain>` (Clifford).
    pub fn layout(&self) -> String {
        match self {
            Shape::Elem(_) => ferrotune::tuned::ELEM_LAYOUT.into(),
            Shape::Gemm(g) => g.layout(),
            Shape::Clifford(c) => ferrotune::tuned::clifford_layout(&c.problem),
        }
    }

    /// The measured dimensions as profiles store them: `[n]`, `[m, n, k, batch]` or `[B, N]`.
    pub fn dims(&self) -> Vec<u64> {
        match self {
            Shape::Elem(s) => vec![s.n as u64],
            Shape::Gemm(g) => ferrotune::tuned::gemm_dims(&g.gemm()).to_vec(),
            Shape::Clifford(c) => ferrotune::tuned::clifford_dims(&c.problem).to_vec(),
        }
    }
}

/// A shape on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "family", rename_all = "snake_case")]
pub enum ShapeJson {
    Elem { op: String, dtype: String, n: usize },
    Gemm { dtype: String, layout: String, m: usize, n: usize, k: usize, batch: usize },
    Clifford { op: String, dtype: String, dim: u32, b: usize, n: usize, normalize: bool },
}

impl From<&Shape> for ShapeJson {
    fn from(s: &Shape) -> Self {
        match s {
            Shape::Elem(e) => ShapeJson::Elem { op: e.op.name().into(), dtype: e.dtype.name().into(), n: e.n },
            Shape::Gemm(g) => ShapeJson::Gemm {
                dtype: g.dtype.name().into(),
                layout: g.layout(),
                m: g.m,
                n: g.n,
                k: g.k,
                batch: g.batch,
            },
            Shape::Clifford(c) => ShapeJson::Clifford {
                op: c.pass.op_name().into(),
                dtype: c.dtype.name().into(),
                dim: c.problem.dim,
                b: c.problem.b,
                n: c.problem.n,
                normalize: c.problem.normalize,
            },
        }
    }
}

/// `r` or `c`.
pub fn layout_from_code(c: char) -> Option<Layout> {
    match c {
        'r' => Some(Layout::Row),
        'c' => Some(Layout::Col),
        _ => None,
    }
}

impl TryFrom<&ShapeJson> for Shape {
    type Error = String;
    fn try_from(s: &ShapeJson) -> Result<Shape, String> {
        match s {
            ShapeJson::Elem { op, dtype, n } => {
                let (Some(op), Some(dtype)) =
                    (ElemOp::from_name(op), DType::ALL.into_iter().find(|d| d.name() == dtype))
                else {
                    return Err(format!("unknown op or dtype: {op} {dtype}"));
                };
                Ok(Shape::elem(op, dtype, *n))
            }
            ShapeJson::Gemm { dtype, layout, m, n, k, batch } => {
                let dt = GemmDtype::from_name(dtype)
                    .ok_or_else(|| format!("unknown GEMM dtype '{dtype}' (tf32, f16, bf16, f32)"))?;
                let mut codes = layout.chars().map(layout_from_code);
                let (Some(Some(a)), Some(Some(b)), None) = (codes.next(), codes.next(), codes.next()) else {
                    return Err(format!("GEMM layout '{layout}' is not two of r and c (e.g. rc)"));
                };
                if [*m, *n, *k, *batch].contains(&0) {
                    return Err(format!("GEMM shape {m}x{n}x{k} batch {batch} has a zero dimension"));
                }
                Ok(Shape::Gemm(GemmShape { dtype: dt, m: *m, n: *n, k: *k, batch: *batch, a, b }))
            }
            ShapeJson::Clifford { op, dtype, dim, b, n, normalize } => {
                let pass = ferrotune::tuned::CliffordPass::from_name(op)
                    .ok_or_else(|| format!("unknown Clifford op '{op}' (clifford_fwd, clifford_bwd)"))?;
                let dtype = DType::ALL
                    .into_iter()
                    .find(|d| d.name() == dtype)
                    .ok_or_else(|| format!("unknown Clifford dtype '{dtype}' (f32, f16, bf16)"))?;
                let problem = ferrotune::ops::clifford::Clifford::new(*dim, *b, *n, *normalize);
                problem.tables().map_err(|e| e.to_string())?;
                if *b == 0 || *n == 0 {
                    return Err(format!("Clifford shape B = {b}, N = {n} has a zero dimension"));
                }
                Ok(Shape::Clifford(CliffordShape { pass, dtype, problem }))
            }
        }
    }
}

/// What the tuner asks.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Request {
    /// Open the backend and describe the machine and the kernels' resources.
    Describe {
        backend: String,
        /// Elementwise ops and dtypes to describe the kernels of.
        ops: Vec<String>,
        dtypes: Vec<String>,
        /// GEMM shapes to describe the kernels (every tile that can run them) of.
        #[serde(default)]
        gemm: Vec<ShapeJson>,
        /// Clifford shapes to describe the kernels and built-in configs of.
        #[serde(default)]
        clifford: Vec<ShapeJson>,
        /// Directory with `ferrotune_kernels.<arch>.resources.json` (from `cargo xtask ptx`).
        resources_dir: Option<String>,
    },
    /// Allocate and fill the tensors of a shape (fresh random inputs from `seed`).
    Prepare { backend: String, shape: ShapeJson, seed: u64 },
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

/// The launch resources of one GEMM entry point, by name (`GemmVariant::entry_name`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmResourceJson {
    pub kernel: String,
    pub resources: KernelResources,
}

/// The built-in config of an (op, dtype) on this machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DefaultJson {
    pub op: String,
    pub dtype: String,
    pub config: ElemConfigJson,
}

/// The machine as the worker sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Description {
    /// `cuda` or `cpu`: what the tuner passes back in every `Prepare`.
    pub backend: String,
    pub device: Device,
    /// The kernel build id of each op family (`build_of` picks one): see `ferrotune::build_id`.
    pub builds: BTreeMap<String, String>,
    /// `None` on the CPU backend.
    pub limits: Option<Limits>,
    /// Last-level cache the timings must not hit (L2 on CUDA; an assumed LLC on the CPU).
    pub cache_bytes: u64,
    /// Peak DRAM bandwidth (datasheet-style, GB/s) and core clock, for the cost model.
    pub peak_gbps: f64,
    pub clock_ghz: f64,
    pub cpu_threads: usize,
    pub resources: Vec<ResourceJson>,
    #[serde(default)]
    pub gemm_resources: Vec<GemmResourceJson>,
    /// The launch resources of the Clifford kernels, by entry name (empty on the CPU).
    #[serde(default)]
    pub clifford_resources: Vec<GemmResourceJson>,
    pub defaults: Vec<DefaultJson>,
    /// The built-in config of each Clifford shape described.
    #[serde(default)]
    pub clifford_defaults: Vec<CliffordDefaultJson>,
    /// Where the register counts came from (`driver`, `ptxas report`, or an estimate).
    pub resources_from: String,
}

impl Description {
    /// The kernel build id that profile entries of `op` are keyed by on this machine: the op's
    /// own, else its family's (`clifford…` ops), else the whole module's (`*`).
    pub fn build_of(&self, op: &str) -> &str {
        let family = if op.starts_with("clifford") { "clifford" } else { "*" };
        self.builds.get(op).or_else(|| self.builds.get(family)).map_or("", |b| b.as_str())
    }
}

/// The op names `Description::builds` is keyed by: every elementwise op, `gemm`, `clifford`
/// (every `clifford…` op) and `*` (anything else).
pub fn build_keys() -> Vec<String> {
    let mut keys: Vec<String> = ElemOp::ALL.iter().map(|o| o.name().to_string()).collect();
    keys.extend(["gemm", "clifford", "*"].map(String::from));
    keys
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

    pub fn gemm_resources_of(&self, kernel: &str) -> Option<KernelResources> {
        self.gemm_resources.iter().find(|r| r.kernel == kernel).map(|r| r.resources)
    }

    pub fn clifford_resources_of(&self, kernel: &str) -> Option<KernelResources> {
        self.clifford_resources.iter().find(|r| r.kernel == kernel).map(|r| r.resources)
    }

    pub fn clifford_default_of(&self, s: &CliffordShape) -> Option<ferrotune::ops::clifford::CliffordConfig> {
        let label = s.label();
        self.clifford_defaults.iter().find(|d| d.shape == label).map(|d| d.config.into())
    }
}

/// How one evaluation ended, as the worker (or the tuner, for a dead worker) reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum EvalOutcome {
    /// Verified against the reference, then timed. `verified` says how; `kernel` what ran,
    /// where the worker can name it exactly (a GEMM plan's launch: configs of one are one point).
    Ok {
        stats: Stats,
        verified: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kernel: Option<String>,
    },
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

    /// The kernel a verified and timed config ran, where the worker named it.
    pub fn kernel(&self) -> Option<&str> {
        if let EvalOutcome::Ok { kernel, .. } = self { kernel.as_deref() } else { None }
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
