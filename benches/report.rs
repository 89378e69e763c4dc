//! The bench's results as data: the JSON layout (documented in docs/bench-json.md), reading
//! and writing it, and the two human views of it (the stdout table and a markdown table).

use std::fmt::Write as _;
use std::path::Path;

use ferrotune::config::ElemConfig;
use ferrotune_autotune::measure::Stats;
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::roofline::{Roof, Roofs};

/// Version of the JSON layout; bump it when a field changes meaning.
pub const SCHEMA: &str = "ferrotune-bench/2";

/// One run of the bench: where it ran, what it measured first (ceilings), then every row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    /// `cuda` or `cpu`.
    pub backend: String,
    /// The GPU, on the CUDA backend.
    pub device: Option<DeviceJson>,
    /// The host CPU's model name (from /proc/cpuinfo where readable).
    pub host_cpu: String,
    pub cpu_threads: usize,
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub date: String,
    pub commit: String,
    pub run: RunConfig,
    pub ceilings: Vec<Ceiling>,
    /// The roofs the rows are placed under: the best of `ceilings` per kind.
    pub roofs: Roofs,
    pub rows: Vec<Row>,
    /// Buffers the bench allocated (tracked by the profiler).
    pub memory: MemoryJson,
    /// Things the reader should know: a ceiling that could not be measured, and why.
    pub notes: Vec<String>,
    /// Set only by `--plant-slowdown` (a test of the regression gate): every time was
    /// multiplied by this factor after measuring. Such a file is not a real result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planted_slowdown: Option<f64>,
}

/// The options the run used, so a result file says how to reproduce it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub quick: bool,
    pub ops: Vec<String>,
    pub dtypes: Vec<String>,
    /// Bytes of each full-size tensor, one set of rows per entry.
    pub sizes_bytes: Vec<usize>,
    pub warmup: usize,
    pub iters: usize,
    pub sweep: bool,
    /// Edge of the square GEMM the compute ceilings use.
    pub gemm_size: usize,
    /// `[m, n, k]` of the GEMM rows (empty: none).
    #[serde(default)]
    pub gemm_shapes: Vec<[usize; 3]>,
    /// Input dtypes of the GEMM rows.
    #[serde(default)]
    pub gemm_dtypes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceJson {
    pub name: String,
    pub compute_capability: String,
    pub sm_count: u32,
    pub l2_bytes: u32,
    pub registers_per_sm: u32,
    pub max_threads_per_sm: u32,
    pub shared_mem_per_sm: u32,
    /// From the memory clock and bus width: a datasheet number, not a measurement.
    pub theoretical_bandwidth_bytes_per_s: f64,
    pub driver: String,
    pub ptx_arch: String,
}

/// What a ceiling bounds: bytes per second or FLOPs per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CeilingKind {
    Bandwidth,
    Compute,
}

/// A ceiling measured in the run: a copy (bandwidth) or a peer GEMM (compute).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    pub name: String,
    pub kind: CeilingKind,
    /// Compute ceilings: the math they bound (`f32`, `tf32`, `f16`, `bf16`).
    pub math: Option<String>,
    /// `[bytes]` for a copy, `[m, n, k]` for a GEMM.
    pub shape: Vec<usize>,
    pub bytes: u64,
    pub flops: u64,
    pub stats: Stats,
    pub bytes_per_s: f64,
    pub flops_per_s: f64,
}

impl Ceiling {
    /// The rate this ceiling bounds (bytes/s or FLOP/s).
    pub fn rate(&self) -> f64 {
        match self.kind {
            CeilingKind::Bandwidth => self.bytes_per_s,
            CeilingKind::Compute => self.flops_per_s,
        }
    }
}

/// An elementwise launch configuration as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElemConfigJson {
    pub threads: u32,
    pub vec16: bool,
    pub unroll: u32,
    pub blocks_per_sm: u32,
    pub cpu_chunk: usize,
}

impl From<&ElemConfig> for ElemConfigJson {
    fn from(c: &ElemConfig) -> Self {
        ElemConfigJson {
            threads: c.threads,
            vec16: c.variant.vec16,
            unroll: c.variant.unroll,
            blocks_per_sm: c.blocks_per_sm,
            cpu_chunk: c.cpu_chunk,
        }
    }
}

/// A GEMM row's configuration: operand layouts and, on CUDA, the block tile and threads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GemmConfigJson {
    /// `row` or `col`.
    pub a_layout: String,
    pub b_layout: String,
    /// `[bm, bn, bk]` of the kernel's block tile (CUDA).
    pub tile: Option<[usize; 3]>,
    pub threads: Option<u32>,
}

/// The configuration a row ran with, by family.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowConfig {
    Elementwise(ElemConfigJson),
    Gemm(GemmConfigJson),
}

/// One op at one dtype and shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Op family (`elementwise` or `gemm`): one colour on the roofline.
    pub family: String,
    pub op: String,
    pub dtype: String,
    pub backend: String,
    /// `[n]`, `[rows, cols]` for bias_add; `[m, n, k]` for GEMMs.
    pub shape: Vec<usize>,
    pub elements: usize,
    /// The PTX entry point timed (CUDA).
    pub kernel: Option<String>,
    /// Which compute roof applies: the math the op runs in (`f32` for elementwise ops, which
    /// compute in f32 whatever they store; the input dtype for GEMMs).
    pub math: String,
    /// FLOPs by the op's definition (see docs/bench-json.md for the per-element counts).
    pub flops: u64,
    /// Fewest bytes the op must move: inputs read once, output written once.
    pub bytes: u64,
    pub config: RowConfig,
    pub stats: Stats,
    pub flops_per_s: f64,
    pub bytes_per_s: f64,
    /// Bytes/s over the bandwidth roof.
    pub ratio_to_copy: f64,
    /// Achieved over attainable (`min(peak, intensity × bandwidth)`), 0..1 (above 1 when
    /// the data fit in cache).
    pub roof_fraction: f64,
    /// The roof that binds at this intensity.
    pub roof: Roof,
    /// The output matched the f64 reference within the dtype's tolerance.
    pub correct: bool,
    pub mismatch: Option<String>,
    /// With `--sweep`: the fastest config of the tuning space and its rate.
    pub best_config: Option<RowConfig>,
    pub best_bytes_per_s: Option<f64>,
    pub configs_swept: usize,
}

impl Row {
    pub fn key(&self) -> RowKey {
        RowKey {
            family: self.family.clone(),
            op: self.op.clone(),
            dtype: self.dtype.clone(),
            shape: self.shape.clone(),
            backend: self.backend.clone(),
        }
    }

    /// Recomputes the rates and the roof placement from `stats`.
    pub fn derive(&mut self, roofs: &Roofs) {
        let secs = self.stats.median_ms * 1e-3;
        self.flops_per_s = self.flops as f64 / secs;
        self.bytes_per_s = self.bytes as f64 / secs;
        self.ratio_to_copy = self.bytes_per_s / roofs.bandwidth_bytes_per_s;
        let p = roofs.place(&self.math, self.flops, self.bytes, secs);
        self.roof_fraction = p.fraction;
        self.roof = p.roof;
    }
}

/// What identifies a row across runs: `--compare` matches rows on it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowKey {
    pub family: String,
    pub op: String,
    pub dtype: String,
    pub shape: Vec<usize>,
    pub backend: String,
}

impl std::fmt::Display for RowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shape: Vec<String> = self.shape.iter().map(|d| d.to_string()).collect();
        write!(f, "{} {} [{}] {}", self.op, self.dtype, shape.join("x"), self.backend)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryJson {
    pub peak_bytes: usize,
    pub allocations: usize,
}

impl Report {
    /// The device the numbers belong to: the GPU's name and architecture, or the CPU's model
    /// and thread count. `--compare` refuses to gate across different ones.
    pub fn device_label(&self) -> String {
        match &self.device {
            Some(d) => format!("{} (sm_{})", d.name, d.compute_capability.replace('.', "")),
            None => format!("CPU {} ({} threads)", self.host_cpu, self.cpu_threads),
        }
    }

    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|source| BenchError::Json { path: "<report>".into(), source })
    }

    /// Parses a report, checking the schema first so an old file gets a clear message.
    pub fn from_json(text: &str, path: &Path) -> Result<Report> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|source| BenchError::Json { path: path.into(), source })?;
        let found = value.get("schema").and_then(|s| s.as_str()).unwrap_or("(none)");
        if found != SCHEMA {
            return Err(BenchError::Schema { path: path.into(), found: found.into(), expected: SCHEMA });
        }
        serde_json::from_value(value).map_err(|source| BenchError::Json { path: path.into(), source })
    }

    pub fn load(path: &Path) -> Result<Report> {
        let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io { path: path.into(), source })?;
        Report::from_json(&text, path)
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        write_file(path, &self.to_json()?)
    }

    /// Multiplies every row's times by `factor` and marks the report: the regression gate's
    /// own test (a planted slowdown must fail it). Ceilings are left as measured.
    pub fn plant_slowdown(&mut self, factor: f64) -> Result<()> {
        if !(factor.is_finite() && factor > 0.0) {
            return Err(BenchError::Options(format!("slowdown factor {factor} must be positive")));
        }
        for r in &mut self.rows {
            for t in [&mut r.stats.median_ms, &mut r.stats.min_ms, &mut r.stats.max_ms, &mut r.stats.mad_ms] {
                *t *= factor;
            }
            r.derive(&self.roofs);
        }
        self.planted_slowdown = Some(factor);
        Ok(())
    }

    /// The table printed after a run: ceilings, then one line per row.
    pub fn render_table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(t, "{:<34} {:>10} {:>10} {:>14}", "ceiling", "median ms", "MAD ms", "rate");
        for c in &self.ceilings {
            let _ = writeln!(t, "{:<34} {:>10.3} {:>10.4} {:>14}", c.name, c.stats.median_ms, c.stats.mad_ms, rate(c));
        }
        let _ = writeln!(
            t,
            "\n{:<18} {:<5} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>6} {:<7} check",
            "op", "dtype", "MiB", "median ms", "min ms", "max ms", "MAD %", "GB/s", "GFLOP/s", "%roof", "roof"
        );
        for r in &self.rows {
            let _ = writeln!(
                t,
                "{:<18} {:<5} {:>9.2} {:>9.3} {:>9.3} {:>9.3} {:>8.2} {:>9.1} {:>9.1} {:>6.1} {:<7} {}",
                r.op,
                r.dtype,
                r.elements as f64 * r.element_bytes() / MIB,
                r.stats.median_ms,
                r.stats.min_ms,
                r.stats.max_ms,
                100.0 * r.stats.mad_ms / r.stats.median_ms,
                r.bytes_per_s / 1e9,
                r.flops_per_s / 1e9,
                100.0 * r.roof_fraction,
                r.roof.name(),
                if r.correct { "ok" } else { "MISMATCH" }
            );
        }
        for n in &self.notes {
            let _ = writeln!(t, "note: {n}");
        }
        t
    }

    /// A markdown page: where and how it ran, the ceilings, the rows.
    pub fn to_markdown(&self) -> String {
        let mut m = String::new();
        let _ = writeln!(m, "# ferrotune bench: {}\n", self.device_label());
        let _ = writeln!(m, "| | |\n|---|---|");
        let _ = writeln!(m, "| backend | {} |", self.backend);
        if let Some(d) = &self.device {
            let _ = writeln!(
                m,
                "| device | {} (cc {}, {} SMs, PTX {}) |",
                d.name, d.compute_capability, d.sm_count, d.ptx_arch
            );
            let _ = writeln!(m, "| driver | {} |", d.driver);
        }
        let _ = writeln!(m, "| host CPU | {} ({} threads) |", self.host_cpu, self.cpu_threads);
        let _ = writeln!(m, "| commit | `{}` |", self.commit);
        let _ = writeln!(m, "| date | {} |", self.date);
        let sizes: Vec<String> = self.run.sizes_bytes.iter().map(|b| format!("{}", *b as f64 / MIB)).collect();
        let _ = writeln!(
            m,
            "| run | {}sizes {} MiB/tensor, warmup {}, iters {}{}, GEMM {}³ |",
            if self.run.quick { "quick, " } else { "" },
            sizes.join(", "),
            self.run.warmup,
            self.run.iters,
            if self.run.sweep { ", sweep" } else { "" },
            self.run.gemm_size
        );
        let _ = writeln!(m, "| peak tracked memory | {:.1} MiB |", self.memory.peak_bytes as f64 / MIB);
        if let Some(f) = self.planted_slowdown {
            let _ = writeln!(m, "| **planted slowdown** | ×{f} (a gate test, not a result) |");
        }
        let _ =
            writeln!(m, "\n## Ceilings\n\n| ceiling | kind | median ms | MAD ms | rate |\n|---|---|---:|---:|---:|");
        for c in &self.ceilings {
            let kind = match c.kind {
                CeilingKind::Bandwidth => "bandwidth".to_string(),
                CeilingKind::Compute => format!("compute ({})", c.math.as_deref().unwrap_or("?")),
            };
            let _ = writeln!(
                m,
                "| {} | {} | {:.3} | {:.4} | {} |",
                c.name,
                kind,
                c.stats.median_ms,
                c.stats.mad_ms,
                rate(c)
            );
        }
        let _ = writeln!(
            m,
            "\n## Ops\n\n| op | dtype | shape | median ms | min ms | max ms | MAD ms | GB/s | GFLOP/s | % of roof | roof | config | check |\n\
             |---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|"
        );
        for r in &self.rows {
            let shape: Vec<String> = r.shape.iter().map(|d| d.to_string()).collect();
            let _ = writeln!(
                m,
                "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.4} | {:.1} | {:.1} | {:.1} | {} | {} | {} |",
                r.op,
                r.dtype,
                shape.join("×"),
                r.stats.median_ms,
                r.stats.min_ms,
                r.stats.max_ms,
                r.stats.mad_ms,
                r.bytes_per_s / 1e9,
                r.flops_per_s / 1e9,
                100.0 * r.roof_fraction,
                r.roof.name(),
                r.config.describe(),
                if r.correct { "ok" } else { "**mismatch**" }
            );
        }
        if !self.notes.is_empty() {
            let _ = writeln!(m, "\n## Notes\n");
            for n in &self.notes {
                let _ = writeln!(m, "- {n}");
            }
        }
        m
    }
}

impl Row {
    /// Bytes of one element of the row's dtype (so the table can show MiB per tensor).
    fn element_bytes(&self) -> f64 {
        match self.dtype.as_str() {
            "f16" | "bf16" => 2.0,
            _ => 4.0,
        }
    }
}

impl RowConfig {
    /// Short form for tables: `1024t v16 u1 grid:full`.
    pub fn describe(&self) -> String {
        match self {
            RowConfig::Elementwise(c) => format!(
                "{}t {} u{} {}",
                c.threads,
                if c.vec16 { "v16" } else { "v1" },
                c.unroll,
                if c.blocks_per_sm == 0 { "grid:full".to_string() } else { format!("grid:{}/SM", c.blocks_per_sm) }
            ),
            RowConfig::Gemm(c) => {
                let mut d = format!("A {} B {}", c.a_layout, c.b_layout);
                if let Some([m, n, k]) = c.tile {
                    let _ = write!(d, " tile {m}x{n}x{k}");
                }
                if let Some(t) = c.threads {
                    let _ = write!(d, " {t}t");
                }
                d
            }
        }
    }
}

const MIB: f64 = (1u64 << 20) as f64;

fn rate(c: &Ceiling) -> String {
    match c.kind {
        CeilingKind::Bandwidth => format!("{:.1} GB/s", c.bytes_per_s / 1e9),
        CeilingKind::Compute => format_flops(c.flops_per_s),
    }
}

/// A FLOP rate in TFLOP/s, or GFLOP/s below one TFLOP/s (CPU peers).
pub fn format_flops(flops_per_s: f64) -> String {
    if flops_per_s >= 1e12 {
        format!("{:.1} TFLOP/s", flops_per_s / 1e12)
    } else {
        format!("{:.1} GFLOP/s", flops_per_s / 1e9)
    }
}

/// Writes `text` to `path`, creating its folder.
pub fn write_file(path: &Path, text: &str) -> Result<()> {
    let io = |source| BenchError::Io { path: path.into(), source };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::write(path, text).map_err(io)
}
