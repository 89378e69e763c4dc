//! The roofline built from the ceilings measured in the run: where each row sits under it
//! (attainable = min(peak, intensity × bandwidth)), a classification of what bounds it and
//! the most likely cause of its gap, and the log-log SVG plot.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use ferrotune::{DType, ElemOp};
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::report::{Ceiling, CeilingKind, Report, Row, RowConfig, format_flops};

/// The performance a kernel of arithmetic intensity `intensity` (FLOP/byte) can reach under
/// a compute peak (FLOP/s) and a bandwidth (bytes/s).
pub fn attainable(peak_flops: f64, bandwidth: f64, intensity: f64) -> f64 {
    peak_flops.min(intensity * bandwidth)
}

/// Which roof binds a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Roof {
    Memory,
    Compute,
}

impl Roof {
    pub fn name(self) -> &'static str {
        match self {
            Roof::Memory => "memory",
            Roof::Compute => "compute",
        }
    }
}

/// A compute roof: the best peer GEMM rate for one math.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComputeRoof {
    pub math: String,
    pub flops_per_s: f64,
    /// The ceiling it came from.
    pub from: String,
}

/// The roofs of a run: one bandwidth (the best copy) and one compute peak per math.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Roofs {
    pub bandwidth_bytes_per_s: f64,
    pub bandwidth_from: String,
    pub compute: Vec<ComputeRoof>,
}

/// Where one (FLOPs, bytes, seconds) measurement sits under the roofs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    /// FLOP per byte.
    pub intensity: f64,
    /// FLOP/s the roofs allow at this intensity (infinite compute when the math has no roof).
    pub attainable_flops: f64,
    /// Achieved over attainable: `max(flops/peak, bytes/bandwidth)`, which also holds for ops
    /// that do no arithmetic.
    pub fraction: f64,
    pub roof: Roof,
}

impl Roofs {
    /// The best bandwidth ceiling and the best compute ceiling of each math.
    pub fn from_ceilings(ceilings: &[Ceiling]) -> Roofs {
        let bw = ceilings
            .iter()
            .filter(|c| c.kind == CeilingKind::Bandwidth)
            .max_by(|a, b| a.bytes_per_s.total_cmp(&b.bytes_per_s));
        let mut compute: BTreeMap<String, ComputeRoof> = BTreeMap::new();
        for c in ceilings.iter().filter(|c| c.kind == CeilingKind::Compute) {
            let math = c.math.clone().unwrap_or_default();
            let better = compute.get(&math).is_none_or(|r| c.flops_per_s > r.flops_per_s);
            if better {
                compute.insert(math.clone(), ComputeRoof { math, flops_per_s: c.flops_per_s, from: c.name.clone() });
            }
        }
        Roofs {
            bandwidth_bytes_per_s: bw.map_or(f64::NAN, |c| c.bytes_per_s),
            bandwidth_from: bw.map_or_else(|| "(none)".into(), |c| c.name.clone()),
            compute: compute.into_values().collect(),
        }
    }

    pub fn peak(&self, math: &str) -> Option<f64> {
        self.compute.iter().find(|r| r.math == math).map(|r| r.flops_per_s)
    }

    /// Intensity (FLOP/byte) where the bandwidth roof meets `math`'s compute roof.
    pub fn ridge(&self, math: &str) -> Option<f64> {
        self.peak(math).map(|p| p / self.bandwidth_bytes_per_s)
    }

    pub fn place(&self, math: &str, flops: u64, bytes: u64, seconds: f64) -> Placement {
        let peak = self.peak(math).unwrap_or(f64::INFINITY);
        let bw = self.bandwidth_bytes_per_s;
        let intensity = flops as f64 / bytes.max(1) as f64;
        let (by_compute, by_memory) = (flops as f64 / seconds / peak, bytes as f64 / seconds / bw);
        Placement {
            intensity,
            attainable_flops: attainable(peak, bw, intensity),
            fraction: by_compute.max(by_memory),
            roof: if intensity * bw > peak { Roof::Compute } else { Roof::Memory },
        }
    }
}

/// What bounds a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    Memory,
    Compute,
    /// Too short to reach either roof: launch overhead and latency dominate.
    LatencyLaunch,
}

impl Bound {
    pub fn name(self) -> &'static str {
        match self {
            Bound::Memory => "memory-bound",
            Bound::Compute => "compute-bound",
            Bound::LatencyLaunch => "latency/launch-bound",
        }
    }
}

/// ptxas's resource report of one entry point (`cargo xtask ptx` writes
/// `target/ptx/ferrotune_kernels.<arch>.resources.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelResources {
    pub name: String,
    pub registers: u32,
    pub stack_bytes: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
    pub shared_bytes: u32,
}

pub fn load_resources(path: &Path) -> Result<Vec<KernelResources>> {
    let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io { path: path.into(), source })?;
    serde_json::from_str(&text).map_err(|source| BenchError::Json { path: path.into(), source })
}

/// Thresholds of the classification.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClassifyConfig {
    /// Rows faster than this and below `at_roof` are latency/launch-bound (a few launch
    /// latencies).
    pub launch_floor_ms_cuda: f64,
    pub launch_floor_ms_cpu: f64,
    /// At or above this fraction of its roof a row is "at its roof".
    pub at_roof: f64,
    /// DRAM latency under load, for the bytes in flight that Little's law asks for.
    pub dram_latency_ns: f64,
}

impl Default for ClassifyConfig {
    fn default() -> Self {
        ClassifyConfig { launch_floor_ms_cuda: 0.02, launch_floor_ms_cpu: 0.1, at_roof: 0.8, dram_latency_ns: 650.0 }
    }
}

/// A row's verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Classification {
    pub label: String,
    pub bound: Bound,
    pub intensity: f64,
    pub achieved_flops: f64,
    pub attainable_flops: f64,
    pub fraction: f64,
    pub cause: String,
}

/// Resident threads per SM for `threads`-thread blocks using `regs` registers and
/// `shared` bytes of shared memory each (registers are allocated per warp in 256s).
pub fn resident_threads(d: &crate::report::DeviceJson, threads: u32, regs: u32, shared: u32) -> u32 {
    let warps = threads.div_ceil(32).max(1);
    let regs_per_warp = (regs.max(1) * 32).div_ceil(256) * 256;
    let by_regs = d.registers_per_sm / (regs_per_warp * warps);
    let by_threads = d.max_threads_per_sm / threads.max(1);
    let by_shared = d.shared_mem_per_sm.checked_div(shared).unwrap_or(u32::MAX);
    by_regs.min(by_threads).min(by_shared).min(32) * threads
}

/// Classifies `row` of `report`; `resources` is ptxas's report (empty when absent).
pub fn classify(report: &Report, row: &Row, resources: &[KernelResources], cfg: &ClassifyConfig) -> Classification {
    let secs = row.stats.median_ms * 1e-3;
    let p = report.roofs.place(&row.math, row.flops, row.bytes, secs);
    let floor = if row.backend == "cuda" { cfg.launch_floor_ms_cuda } else { cfg.launch_floor_ms_cpu };
    // Short and below its roof: the launch, not a roof, is what it waits on.
    let bound = if row.stats.median_ms < floor && p.fraction < cfg.at_roof {
        Bound::LatencyLaunch
    } else if p.roof == Roof::Compute {
        Bound::Compute
    } else {
        Bound::Memory
    };
    let cause = if bound == Bound::LatencyLaunch {
        format!(
            "{:.1} µs per call is a few launch latencies: batch or fuse small ops, or use larger tensors",
            row.stats.median_ms * 1e3
        )
    } else if p.fraction >= cfg.at_roof {
        "at its roof".to_string()
    } else {
        gap_cause(report, row, bound, resources, cfg)
    };
    Classification {
        label: format!("{} {} {}", row.op, row.dtype, shape_label(&row.shape)),
        bound,
        intensity: p.intensity,
        achieved_flops: row.flops as f64 / secs,
        attainable_flops: p.attainable_flops,
        fraction: p.fraction,
        cause,
    }
}

fn shape_label(shape: &[usize]) -> String {
    shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
}

/// The most likely reason a row stays below its roof, from its config, its entry's ptxas
/// resources, the device and the op's work per element.
fn gap_cause(report: &Report, row: &Row, bound: Bound, resources: &[KernelResources], cfg: &ClassifyConfig) -> String {
    if row.family == "gemm" {
        return gemm_gap_cause(report, row, bound);
    }
    let op = ElemOp::from_name(&row.op);
    let flops_per_elem = row.flops as f64 / row.elements.max(1) as f64;
    let (Some(d), Some(op), RowConfig::Elementwise(c)) = (&report.device, op, &row.config) else {
        return if flops_per_elem > 2.0 {
            format!("per-element maths ({flops_per_elem:.0} FLOP/element) runs scalar on the CPU: instruction-bound")
        } else {
            "memory parallelism: more threads or larger rayon chunks".to_string()
        };
    };
    if bound == Bound::Compute {
        return format!(
            "{flops_per_elem:.0} FLOP/element on the CUDA cores against a peer GEMM peak: \
             transcendentals cost several instructions each"
        );
    }
    let res = row.kernel.as_deref().and_then(|k| resources.iter().find(|r| r.name == k));
    let Some(res) = res else {
        return "no ptxas report for its entry (run `cargo xtask ptx`): check bytes in flight and occupancy".into();
    };
    if res.spill_stores + res.spill_loads > 0 || res.stack_bytes > 0 {
        return format!(
            "register spills: {} bytes of stack, {} spill stores, {} spill loads add local-memory traffic",
            res.stack_bytes, res.spill_stores, res.spill_loads
        );
    }
    let mut resident = resident_threads(d, c.threads, res.registers, res.shared_bytes);
    if c.blocks_per_sm > 0 {
        resident = resident.min(c.blocks_per_sm * c.threads);
    }
    let occupancy = resident as f64 / d.max_threads_per_sm.max(1) as f64;
    if occupancy < 0.5 {
        return format!(
            "low occupancy: {} registers × {} threads{} leave {:.0}% of the SM's threads resident",
            res.registers,
            c.threads,
            if res.shared_bytes > 0 { format!(", {} B shared", res.shared_bytes) } else { String::new() },
            100.0 * occupancy
        );
    }
    let elem = DType::ALL.into_iter().find(|t| t.name() == row.dtype).map_or(4, |t| t.size_bytes());
    let access = if c.vec16 { 16 } else { elem };
    let in_flight = resident as f64 * c.unroll as f64 * access as f64 * op.inputs() as f64;
    let needed = report.roofs.bandwidth_bytes_per_s * cfg.dram_latency_ns * 1e-9 / d.sm_count.max(1) as f64;
    if in_flight < needed {
        return format!(
            "too few bytes in flight: about {:.0} KiB per SM, {:.0} KiB needed (bandwidth × {:.0} ns / SMs); \
             raise unroll or use 16-byte accesses",
            in_flight / 1024.0,
            needed / 1024.0,
            cfg.dram_latency_ns
        );
    }
    if flops_per_elem > 2.0 {
        return format!(
            "instruction issue: {flops_per_elem:.0} FLOP/element (transcendentals) keep the SM busy between loads; \
             more work per thread or fewer instructions per element"
        );
    }
    "enough bytes in flight and occupancy: look at DRAM page locality or the tail of the grid (Nsight Compute)".into()
}

/// Why a GEMM row stays below its roof: against the peer GEMM's peak (compute-bound) the gap is
/// the kernel's tiling and pipelining; a memory-bound GEMM is too thin to reuse its operands.
fn gemm_gap_cause(report: &Report, row: &Row, bound: Bound) -> String {
    let peer = report.roofs.compute.iter().find(|c| c.math == row.math).map(|c| c.from.as_str());
    match (bound, peer) {
        (Bound::Compute, Some(peer)) => format!(
            "below the {peer} peak: tiling, pipelining and occupancy of the GEMM kernel \
             (`cargo xtask bench --ops gemm` compares with cuBLAS shape by shape)"
        ),
        (Bound::Compute, None) => format!("no {} compute ceiling in this run to judge it against", row.math),
        _ => "thin GEMM (small k or n): operands are reused too little to reach the compute roof".into(),
    }
}

/// Every row classified, in report order.
pub fn classify_all(report: &Report, resources: &[KernelResources], cfg: &ClassifyConfig) -> Vec<Classification> {
    report.rows.iter().map(|r| classify(report, r, resources, cfg)).collect()
}

/// The classification as text: the roofs, then one line per row.
pub fn render_classification(report: &Report, rows: &[Classification]) -> String {
    let mut t = String::new();
    let r = &report.roofs;
    let _ = writeln!(t, "bandwidth roof: {:.1} GB/s ({})", r.bandwidth_bytes_per_s / 1e9, r.bandwidth_from);
    for c in &r.compute {
        let ridge = c.flops_per_s / r.bandwidth_bytes_per_s;
        let _ = writeln!(
            t,
            "compute roof {:<5} {:>15} ({}), ridge at {:.1} FLOP/byte",
            c.math,
            format_flops(c.flops_per_s),
            c.from,
            ridge
        );
    }
    let _ = writeln!(
        t,
        "\n{:<36} {:>9} {:>10} {:>10} {:>6} {:<21} most likely cause",
        "row", "FLOP/B", "GFLOP/s", "roof", "% roof", "class"
    );
    for c in rows {
        let _ = writeln!(
            t,
            "{:<36} {:>9.3} {:>10.1} {:>10.1} {:>6.1} {:<21} {}",
            c.label,
            c.intensity,
            c.achieved_flops / 1e9,
            c.attainable_flops / 1e9,
            100.0 * c.fraction,
            c.bound.name(),
            c.cause
        );
    }
    t
}

/// Size and title of the plot.
#[derive(Clone, Debug, PartialEq)]
pub struct PlotConfig {
    pub width: u32,
    pub height: u32,
    pub title: String,
}

impl PlotConfig {
    pub fn for_report(report: &Report) -> PlotConfig {
        PlotConfig { width: 1100, height: 750, title: format!("ferrotune roofline: {}", report.device_label()) }
    }
}

/// Colour of an op family on the plot.
fn family_colour(family: &str) -> RGBColor {
    match family {
        "elementwise" => RGBColor(31, 119, 180),
        "gemm" => RGBColor(214, 39, 40),
        "reduce" => RGBColor(44, 160, 44),
        _ => RGBColor(148, 103, 189),
    }
}

const ROOF_COLOURS: [RGBColor; 5] =
    [RGBColor(0, 0, 0), RGBColor(255, 127, 14), RGBColor(140, 86, 75), RGBColor(227, 119, 194), RGBColor(23, 190, 207)];

/// Writes the roofline of `report` as SVG: log-log, the bandwidth roof and one compute roof
/// per math, one labelled point per row that does arithmetic (ops without FLOPs have no
/// place on a log intensity axis; the classification lists them).
pub fn write_svg(report: &Report, path: &Path, cfg: &PlotConfig) -> Result<()> {
    let roofs = &report.roofs;
    let bw = roofs.bandwidth_bytes_per_s;
    if !(bw.is_finite() && bw > 0.0) {
        return Err(BenchError::Plot("the report has no bandwidth ceiling".into()));
    }
    let points: Vec<(&Row, f64, f64)> = report
        .rows
        .iter()
        .filter(|r| r.flops > 0 && r.bytes > 0 && r.stats.median_ms > 0.0)
        .map(|r| (r, r.flops as f64 / r.bytes as f64, r.flops as f64 / (r.stats.median_ms * 1e-3)))
        .collect();
    let peaks: Vec<f64> = roofs.compute.iter().map(|c| c.flops_per_s).collect();
    let max_peak = peaks.iter().copied().fold(0.0, f64::max);
    let ridges: Vec<f64> = peaks.iter().map(|p| p / bw).collect();
    let lo = |v: &mut dyn Iterator<Item = f64>| v.fold(f64::INFINITY, f64::min);
    let hi = |v: &mut dyn Iterator<Item = f64>| v.fold(0.0, f64::max);
    let x_min = lo(&mut points.iter().map(|p| p.1).chain([0.1])) / 4.0;
    let x_max = hi(&mut points.iter().map(|p| p.1).chain(ridges.iter().copied()).chain([1.0])) * 8.0;
    let y_min = lo(&mut points.iter().map(|p| p.2).chain([x_min * bw])) / 4.0;
    // Without a compute peak the bandwidth roof runs to the right edge, so the top follows it.
    let top = if max_peak > 0.0 { max_peak } else { x_max * bw };
    let y_max = hi(&mut points.iter().map(|p| p.2).chain([top])) * 3.0;

    let plot_err = |e: &dyn std::fmt::Display| BenchError::Plot(e.to_string());
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| BenchError::Io { path: dir.into(), source })?;
    }
    let root = SVGBackend::new(path, (cfg.width, cfg.height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&cfg.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d((x_min..x_max).log_scale(), (y_min..y_max).log_scale())
        .map_err(|e| plot_err(&e))?;
    chart
        .configure_mesh()
        .x_desc("arithmetic intensity (FLOP/byte)")
        .y_desc("FLOP/s")
        .y_label_formatter(&|y| format!("{y:.0e}"))
        .x_label_formatter(&|x| format!("{x}"))
        .draw()
        .map_err(|e| plot_err(&e))?;

    // The bandwidth roof up to the highest ridge (or across the plot when there is no peak).
    let top_ridge = ridges.iter().copied().fold(0.0, f64::max);
    let bw_end = if top_ridge > 0.0 { top_ridge.min(x_max) } else { x_max };
    let bw_colour = ROOF_COLOURS[0];
    chart
        .draw_series(LineSeries::new([(x_min, x_min * bw), (bw_end, bw_end * bw)], bw_colour.stroke_width(2)))
        .map_err(|e| plot_err(&e))?
        .label(format!("bandwidth {:.0} GB/s ({})", bw / 1e9, roofs.bandwidth_from))
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], bw_colour.stroke_width(2)));
    for (i, c) in roofs.compute.iter().enumerate() {
        let colour = ROOF_COLOURS[(i + 1) % ROOF_COLOURS.len()];
        let ridge = c.flops_per_s / bw;
        chart
            .draw_series(LineSeries::new(
                [(ridge.max(x_min), c.flops_per_s), (x_max, c.flops_per_s)],
                colour.stroke_width(2),
            ))
            .map_err(|e| plot_err(&e))?
            .label(format!("{} peak {} ({})", c.math, format_flops(c.flops_per_s), c.from))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2)));
    }

    // Colour by family, marker by dtype; one label per (op, shape) so dtypes of one op, which
    // sit close together, do not pile up their labels.
    let mut families: Vec<&str> = points.iter().map(|p| p.0.family.as_str()).collect();
    families.sort_unstable();
    families.dedup();
    let mut dtypes: Vec<&str> = points.iter().map(|p| p.0.dtype.as_str()).collect();
    // f32 first (circles), then f16, bf16, then anything else.
    dtypes.sort_by_key(|d| (DType::ALL.iter().position(|t| t.name() == *d).unwrap_or(usize::MAX), *d));
    dtypes.dedup();
    for fam in &families {
        let colour = family_colour(fam);
        for (d, dtype) in dtypes.iter().enumerate() {
            let mine = points.iter().filter(|p| p.0.family == *fam && p.0.dtype == *dtype);
            let style = colour.filled();
            let series = match d % 3 {
                0 => chart.draw_series(mine.map(|p| Circle::new((p.1, p.2), 5, style).into_dyn())),
                1 => chart.draw_series(mine.map(|p| TriangleMarker::new((p.1, p.2), 6, style).into_dyn())),
                _ => chart.draw_series(mine.map(|p| Cross::new((p.1, p.2), 5, colour.stroke_width(2)).into_dyn())),
            }
            .map_err(|e| plot_err(&e))?;
            if d == 0 {
                series.label(fam.to_string()).legend(move |(x, y)| Circle::new((x + 10, y), 5, colour.filled()));
            }
        }
    }
    for (d, dtype) in dtypes.iter().enumerate() {
        let series = chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            .map_err(|e| plot_err(&e))?
            .label(dtype.to_string());
        match d % 3 {
            0 => series.legend(|(x, y)| Circle::new((x + 10, y), 5, BLACK.filled())),
            1 => series.legend(|(x, y)| TriangleMarker::new((x + 10, y), 6, BLACK.filled())),
            _ => series.legend(|(x, y)| Cross::new((x + 10, y), 5, BLACK.stroke_width(2))),
        };
    }
    let mut labelled: Vec<(&str, &[usize])> = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let key = (p.0.op.as_str(), p.0.shape.as_slice());
        if labelled.contains(&key) {
            continue;
        }
        labelled.push(key);
        let mine: Vec<&str> = points
            .iter()
            .filter(|q| (q.0.op.as_str(), q.0.shape.as_slice()) == key)
            .map(|q| q.0.dtype.as_str())
            .collect();
        // Labels alternate above and below their point so neighbours overlap less.
        let dy = if i % 2 == 0 { -16 } else { 6 };
        // GEMMs differ by shape more than by op: name it.
        let label = if p.0.family == "gemm" {
            format!("{} {} ({})", p.0.op, shape_label(&p.0.shape), mine.join(", "))
        } else {
            format!("{} ({})", p.0.op, mine.join(", "))
        };
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((p.1, p.2)) + Text::new(label, (8, dy), ("sans-serif", 12).into_font()),
            ))
            .map_err(|e| plot_err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| plot_err(&e))?;
    root.present().map_err(|e| plot_err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attainable_is_the_lower_roof() {
        // 100 GB/s and 1 TFLOP/s: the ridge is at 10 FLOP/byte.
        assert_eq!(attainable(1e12, 1e11, 0.25), 2.5e10);
        assert_eq!(attainable(1e12, 1e11, 10.0), 1e12);
        assert_eq!(attainable(1e12, 1e11, 1000.0), 1e12);
        assert_eq!(attainable(f64::INFINITY, 1e11, 0.5), 5e10);
    }
}
