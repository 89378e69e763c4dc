//! Tests of the bench library without a GPU: the CPU bench end to end on tiny sizes, the JSON
//! round trip, the regression gate on synthetic results, the roofline maths, classification
//! and the SVG, and the profiler's trace of a run.

use ferrotune::profiler::Profiler;
use ferrotune::{Backend, BackendChoice, DType};
use ferrotune_autotune::measure::{Repeat, Stats};
use ferrotune_bench::report::{Ceiling, CeilingKind, DeviceJson, ElemConfigJson, GemmConfigJson, RowConfig};
use ferrotune_bench::roofline::{self, Bound, ClassifyConfig, KernelResources, PlotConfig, Roof};
use ferrotune_bench::{BenchError, CompareConfig, Options, Report, Roofs, Row, Verdict, compare};

/// The quick options shrunk to run in well under a second on two cores.
fn tiny(backend: &Backend) -> Options {
    let mut o = Options::quick(backend);
    o.sizes = vec![64 << 10];
    o.repeat = Repeat { warmup: 1, iters: 3 };
    o.ceilings.copy_bytes = 64 << 10;
    o.ceilings.copy_repeat = o.repeat;
    o.ceilings.gemm_size = 64;
    o.ceilings.gemm_repeat = Repeat { warmup: 0, iters: 2 };
    o
}

fn cpu_run() -> (Report, Profiler) {
    cpu_run_with(|_| {})
}

/// The tiny CPU run with GEMM rows: an awkward shape (no dimension a multiple of 8) in f32
/// and bf16.
const GEMM: (usize, usize, usize) = (33, 17, 70);

fn cpu_gemm_run() -> (Report, Profiler) {
    cpu_run_with(|o| {
        o.gemm_shapes = vec![GEMM];
        o.gemm_dtypes = vec![DType::F32, DType::Bf16];
    })
}

fn cpu_run_with(edit: impl FnOnce(&mut Options)) -> (Report, Profiler) {
    let backend = Backend::new(BackendChoice::Cpu).unwrap();
    let mut prof = Profiler::new(&backend.stream()).unwrap();
    let mut lines = Vec::new();
    let mut opts = tiny(&backend);
    edit(&mut opts);
    let report = ferrotune_bench::run(&backend, &opts, &mut prof, |l| lines.push(l.to_string())).unwrap();
    assert_eq!(lines.len(), report.ceilings.len() + report.rows.len(), "one progress line per ceiling and row");
    (report, prof)
}

#[test]
fn the_quick_cpu_bench_runs_end_to_end() {
    let (r, prof) = cpu_run();
    assert_eq!((r.schema.as_str(), r.backend.as_str()), (ferrotune_bench::SCHEMA, "cpu"));
    assert!(r.device.is_none() && r.run.quick);
    let names: Vec<&str> = r.rows.iter().map(|x| x.op.as_str()).collect();
    assert_eq!(names, ["copy", "add", "gelu_erf", "add_mul_gelu_erf"]);
    // Ceilings first: our copy, the parallel memcpy, the CPU SGEMM peer.
    let kinds: Vec<CeilingKind> = r.ceilings.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [CeilingKind::Bandwidth, CeilingKind::Bandwidth, CeilingKind::Compute]);
    assert_eq!(r.roofs.compute.len(), 1);
    assert_eq!(r.roofs.compute[0].math, "f32");
    for row in &r.rows {
        assert!(row.correct, "{}: {:?}", row.op, row.mismatch);
        assert_eq!(row.elements, 16 << 10);
        assert!(row.stats.median_ms > 0.0 && row.stats.min_ms <= row.stats.median_ms);
        assert!(row.stats.median_ms <= row.stats.max_ms && row.stats.samples == 3);
        assert!(row.bytes_per_s > 0.0 && row.roof_fraction > 0.0);
        assert!((row.bytes_per_s / r.roofs.bandwidth_bytes_per_s - row.ratio_to_copy).abs() < 1e-9);
    }
    let gelu = r.rows.iter().find(|x| x.op == "gelu_erf").unwrap();
    assert_eq!(gelu.flops, 5 * (16 << 10));
    assert_eq!(gelu.bytes, 2 * 4 * (16 << 10));
    // Every buffer was released; the peak covers at least one add's three tensors.
    assert_eq!(prof.memory().current_bytes(), 0);
    assert!(r.memory.peak_bytes >= 3 * (64 << 10), "{:?}", r.memory);
    let table = r.render_table();
    assert!(table.contains("gelu_erf") && table.contains("parallel memcpy"), "{table}");
}

#[test]
fn the_trace_has_one_scope_per_timed_region() {
    let (r, prof) = cpu_run();
    let trace: serde_json::Value = serde_json::from_str(&prof.chrome_trace().unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let scopes: Vec<&str> = events.iter().filter(|e| e["ph"] == "X").map(|e| e["name"].as_str().unwrap()).collect();
    for row in &r.rows {
        let timed = format!("{} {} {}: timed", row.op, row.dtype, row.elements);
        assert!(scopes.iter().any(|s| s.starts_with(&timed)), "no scope {timed} in {scopes:?}");
    }
    assert!(scopes.iter().any(|s| s.starts_with("ceiling: matrixmultiply SGEMM")));
    for e in events.iter().filter(|e| e["ph"] == "X") {
        assert!(e["ts"].as_f64().unwrap() >= 0.0 && e["dur"].as_f64().unwrap() >= 0.0, "{e}");
        assert_eq!((e["pid"].as_u64(), e["tid"].as_u64()), (Some(1), Some(1)));
    }
    assert!(events.iter().any(|e| e["ph"] == "C"), "memory counter events");
    assert_eq!(trace["otherData"]["peak_bytes"].as_u64(), Some(r.memory.peak_bytes as u64));
}

#[test]
fn json_round_trips_and_other_schemas_are_refused() {
    let (mut r, _) = cpu_run();
    r.date = "2025-01-02T03:04:05Z".into();
    r.commit = "abc123".into();
    let dir = std::env::temp_dir().join(format!("ferrotune-bench-test-{}", std::process::id()));
    let path = dir.join("r.json");
    r.save(&path).unwrap();
    assert_eq!(Report::load(&path).unwrap(), r);

    let old = r.to_json().unwrap().replace(ferrotune_bench::SCHEMA, "ferrotune-bench/1");
    let err = Report::from_json(&old, &path).unwrap_err();
    assert!(matches!(err, BenchError::Schema { .. }), "{err}");
    assert!(err.to_string().contains("ferrotune-bench/1"), "{err}");
    assert!(matches!(Report::from_json("{not json", &path), Err(BenchError::Json { .. })));
    assert!(matches!(Report::load(&dir.join("missing.json")), Err(BenchError::Io { .. })));
    let md = r.to_markdown();
    assert!(md.contains("| add_mul_gelu_erf | f32 |") && md.contains("## Ceilings"), "{md}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn gemm_rows_are_checked_timed_keyed_and_round_trip() {
    // The quick options and the CPU's quick run have no GEMM rows; the full CPU run one small one.
    let cpu = Backend::new(BackendChoice::Cpu).unwrap();
    assert!(Options::quick(&cpu).gemm_shapes.is_empty());
    assert_eq!(
        (Options::full(&cpu).gemm_shapes, Options::full(&cpu).gemm_dtypes),
        (vec![(1024, 1024, 1024), (512, 3072, 768)], DType::ALL.to_vec())
    );
    assert!(cpu_run().0.rows.iter().all(|r| r.family == "elementwise"));

    let (mut r, prof) = cpu_gemm_run();
    let (m, n, k) = GEMM;
    let gemms: Vec<&Row> = r.rows.iter().filter(|x| x.family == "gemm").collect();
    assert_eq!(gemms.iter().map(|x| x.dtype.as_str()).collect::<Vec<_>>(), ["f32", "bf16"]);
    for (g, elem) in gemms.iter().zip([4u64, 2]) {
        // The CPU computes every input dtype in f32: its rows sit under the f32 SGEMM roof.
        assert_eq!((g.op.as_str(), g.shape.as_slice(), g.math.as_str()), ("gemm", &[m, n, k][..], "f32"));
        assert!(g.correct, "{}: {:?}", g.dtype, g.mismatch);
        assert_eq!(g.flops, 2 * (m * n * k) as u64);
        assert_eq!(g.bytes, (m * k + k * n + m * n) as u64 * elem);
        assert_eq!((g.elements, g.kernel.as_deref(), g.stats.samples), (m * n, None, 3));
        assert!(g.stats.median_ms > 0.0 && g.flops_per_s > 0.0 && g.roof_fraction > 0.0);
        let cfg = GemmConfigJson { a_layout: "row".into(), b_layout: "col".into(), tile: None, threads: None };
        assert_eq!(g.config, RowConfig::Gemm(cfg));
        // Both are judged against the f32 SGEMM peer (the CPU has no bf16 one).
        let p = r.roofs.place(&g.math, g.flops, g.bytes, g.stats.median_ms * 1e-3);
        assert_eq!((p.fraction, p.roof), (g.roof_fraction, g.roof));
    }
    assert_eq!(r.run.gemm_shapes, [[m, n, k]]);
    assert_eq!(r.run.gemm_dtypes, ["f32", "bf16"]);
    // Keys: distinct from each other and from every elementwise row.
    let mut keys: Vec<_> = r.rows.iter().map(Row::key).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), r.rows.len());
    let cmp = compare(&r, &r, CompareConfig::default()).unwrap();
    assert!(cmp.rows.iter().any(|c| c.key.op == "gemm" && c.key.shape == [m, n, k] && c.key.dtype == "bf16"));
    // The timed region is a profiler scope; every buffer was freed.
    let trace: serde_json::Value = serde_json::from_str(&prof.chrome_trace().unwrap()).unwrap();
    let scopes: Vec<&str> =
        trace["traceEvents"].as_array().unwrap().iter().filter_map(|e| e["name"].as_str()).collect();
    assert!(scopes.iter().any(|s| s.starts_with("gemm bf16 33x17x70: timed")), "{scopes:?}");
    assert_eq!(prof.memory().current_bytes(), 0);

    r.date = "2025-01-02T03:04:05Z".into();
    let json = r.to_json().unwrap();
    let path = std::path::Path::new("r.json");
    assert_eq!(Report::from_json(&json, path).unwrap(), r);
    // A file written before GEMM rows (no gemm_* in `run`) still reads.
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let run = v["run"].as_object_mut().unwrap();
    run.remove("gemm_shapes");
    run.remove("gemm_dtypes");
    assert!(Report::from_json(&v.to_string(), path).unwrap().run.gemm_shapes.is_empty());
    let md = r.to_markdown();
    assert!(md.contains("| gemm | bf16 | 33×17×70 |") && md.contains("| A row B col |"), "{md}");
    assert!(r.render_table().contains("gemm "));
}

#[test]
fn bad_options_are_errors_before_anything_runs() {
    let backend = Backend::new(BackendChoice::Cpu).unwrap();
    let mut prof = Profiler::new(&backend.stream()).unwrap();
    let mut o = tiny(&backend);
    o.sizes = vec![100];
    assert!(matches!(ferrotune_bench::run(&backend, &o, &mut prof, |_| {}), Err(BenchError::Options(_))));
    let mut o = tiny(&backend);
    o.ops.clear();
    assert!(matches!(ferrotune_bench::run(&backend, &o, &mut prof, |_| {}), Err(BenchError::Options(_))));
    let mut o = tiny(&backend);
    (o.gemm_shapes, o.gemm_dtypes) = (vec![(8, 0, 8)], vec![DType::F32]);
    assert!(matches!(ferrotune_bench::run(&backend, &o, &mut prof, |_| {}), Err(BenchError::Options(_))));
}

/// A CUDA GEMM row of `m x n x k` in f32 taking `ms`.
fn gemm_row(m: usize, n: usize, k: usize, ms: f64, roofs: &Roofs) -> Row {
    let mut r = row("gemm", m * n, ms, 0, 0, cfg(256, true, 1), roofs);
    r.family = "gemm".into();
    r.shape = vec![m, n, k];
    r.kernel = Some("ft_gemm_f32_rc_v16_f32".into());
    r.flops = 2 * (m * n * k) as u64;
    r.bytes = 4 * (m * k + k * n + m * n) as u64;
    r.config = RowConfig::Gemm(GemmConfigJson {
        a_layout: "row".into(),
        b_layout: "col".into(),
        tile: Some([128, 128, 8]),
        threads: Some(256),
    });
    r.derive(roofs);
    r
}

#[test]
fn gemm_rows_sit_under_the_compute_roof() {
    let mut r = synthetic(&[("add", 0.3)]);
    // 4096³ f32: 137 GFLOP over 201 MB is 683 FLOP/byte, far right of the ridge (10); 10 ms is
    // 13.7 TFLOP/s, 46% of the 30 TFLOP/s peak.
    r.rows.push(gemm_row(4096, 4096, 4096, 10.0, &r.roofs));
    let g = r.rows.last().unwrap();
    assert_eq!(g.roof, Roof::Compute);
    assert!((g.roof_fraction - 2.0 * 4096f64.powi(3) / 10e-3 / 30e12).abs() < 1e-9, "{}", g.roof_fraction);
    let c = roofline::classify_all(&r, &[], &ClassifyConfig::default());
    let gc = c.iter().find(|x| x.label == "gemm f32 4096x4096x4096").unwrap();
    assert_eq!(gc.bound, Bound::Compute);
    assert!(gc.intensity > 600.0 && gc.attainable_flops == 30e12, "{gc:?}");
    assert!(gc.cause.contains("cuBLAS GEMM f32") && gc.cause.contains("--ops gemm"), "{}", gc.cause);
    // At 90% of the peak it is at its roof.
    r.rows.push(gemm_row(4096, 4096, 4096, 2.0 * 4096f64.powi(3) / 27e12 * 1e3, &r.roofs));
    let c = roofline::classify(&r, r.rows.last().unwrap(), &[], &ClassifyConfig::default());
    assert_eq!((c.bound, c.cause.as_str()), (Bound::Compute, "at its roof"));
    r.rows.pop();
    assert!(
        RowConfig::Gemm(GemmConfigJson {
            a_layout: "row".into(),
            b_layout: "col".into(),
            tile: Some([128, 128, 8]),
            threads: Some(256)
        })
        .describe()
        .contains("tile 128x128x8 256t")
    );

    let path = std::env::temp_dir().join(format!("ferrotune-roofline-gemm-{}.svg", std::process::id()));
    roofline::write_svg(&r, &path, &PlotConfig::for_report(&r)).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    for label in ["gemm 4096x4096x4096 (f32)", "add (f32)", "elementwise"] {
        assert!(svg.contains(label), "no '{label}' in the SVG");
    }
    // The family's legend entry: a text line of its own.
    assert!(svg.lines().any(|l| l.trim() == "gemm"), "no gemm legend in the SVG");
}

// ---- synthetic reports: the gate and the roofline without timing noise ----

fn stats(ms: f64) -> Stats {
    Stats { median_ms: ms, min_ms: ms * 0.99, max_ms: ms * 1.02, mad_ms: ms * 0.005, samples: 10 }
}

fn h100() -> DeviceJson {
    DeviceJson {
        name: "NVIDIA H100 80GB HBM3".into(),
        compute_capability: "9.0".into(),
        sm_count: 132,
        l2_bytes: 50 << 20,
        registers_per_sm: 65536,
        max_threads_per_sm: 2048,
        shared_mem_per_sm: 233472,
        theoretical_bandwidth_bytes_per_s: 3.35e12,
        driver: "CUDA 13.0".into(),
        ptx_arch: "sm_90".into(),
    }
}

/// Ceilings of 3 TB/s and an f32 peak of 30 TFLOP/s (H100-like): the ridge is at 10 FLOP/byte.
fn ceilings() -> Vec<Ceiling> {
    let bw = Ceiling {
        name: "driver memcpy DtoD".into(),
        kind: CeilingKind::Bandwidth,
        math: None,
        shape: vec![1 << 30],
        bytes: 1 << 30,
        flops: 0,
        stats: stats(1.0),
        bytes_per_s: 3e12,
        flops_per_s: 0.0,
    };
    let slower = Ceiling { name: "copy kernel (f32)".into(), bytes_per_s: 2.7e12, ..bw.clone() };
    let gemm = |math: &str, rate: f64| Ceiling {
        name: format!("cuBLAS GEMM {math}"),
        kind: CeilingKind::Compute,
        math: Some(math.into()),
        shape: vec![4096; 3],
        bytes: 0,
        flops: 1,
        stats: stats(1.0),
        bytes_per_s: 0.0,
        flops_per_s: rate,
    };
    vec![slower, bw, gemm("f32", 24e12), gemm("f32", 30e12), gemm("tf32", 300e12)]
}

/// A row of `op` on `n` f32 elements taking `ms`, with a config and its entry name.
fn row(op: &str, n: usize, ms: f64, flops_per_elem: u64, tensors: u64, cfg: ElemConfigJson, roofs: &Roofs) -> Row {
    let mut r = Row {
        family: "elementwise".into(),
        op: op.into(),
        dtype: "f32".into(),
        backend: "cuda".into(),
        shape: vec![n],
        elements: n,
        kernel: Some(format!("ft_{op}_f32_{}_u{}", if cfg.vec16 { "v16" } else { "v1" }, cfg.unroll)),
        math: "f32".into(),
        flops: flops_per_elem * n as u64,
        bytes: tensors * 4 * n as u64,
        config: RowConfig::Elementwise(cfg),
        stats: stats(ms),
        flops_per_s: 0.0,
        bytes_per_s: 0.0,
        ratio_to_copy: 0.0,
        roof_fraction: 0.0,
        roof: Roof::Memory,
        correct: true,
        mismatch: None,
        best_config: None,
        best_bytes_per_s: None,
        configs_swept: 0,
    };
    r.derive(roofs);
    r
}

fn cfg(threads: u32, vec16: bool, unroll: u32) -> ElemConfigJson {
    ElemConfigJson { threads, vec16, unroll, blocks_per_sm: 0, cpu_chunk: 1 << 16 }
}

/// A CUDA report on an H100 with rows (op, median ms).
fn synthetic(rows: &[(&str, f64)]) -> Report {
    let (report, _) = cpu_run();
    let c = ceilings();
    let roofs = Roofs::from_ceilings(&c);
    let n = 1 << 24;
    Report {
        backend: "cuda".into(),
        device: Some(h100()),
        ceilings: c,
        rows: rows.iter().map(|(op, ms)| row(op, n, *ms, 1, 3, cfg(1024, true, 1), &roofs)).collect(),
        roofs,
        ..report
    }
}

#[test]
fn the_gate_sorts_improvement_noise_warning_regression_missing_and_new() {
    let base = synthetic(&[("add", 1.0), ("scale", 1.0), ("relu", 1.0), ("axpy", 1.0), ("copy", 1.0), ("gone", 1.0)]);
    let now =
        synthetic(&[("add", 0.8), ("scale", 1.05), ("relu", 1.15), ("axpy", 1.3), ("copy", 0.97), ("fresh", 1.0)]);
    let cmp = compare(&base, &now, CompareConfig::default()).unwrap();
    let verdict = |op: &str| cmp.rows.iter().find(|r| r.key.op == op).unwrap().verdict;
    assert_eq!(verdict("add"), Verdict::Improved);
    assert_eq!(verdict("scale"), Verdict::Unchanged);
    assert_eq!(verdict("copy"), Verdict::Unchanged);
    assert_eq!(verdict("relu"), Verdict::Slower);
    assert_eq!(verdict("axpy"), Verdict::Regressed);
    assert!(cmp.failed());
    assert_eq!(cmp.regressions().count(), 1);
    let axpy = cmp.rows.iter().find(|r| r.key.op == "axpy").unwrap();
    assert!((axpy.change - 0.3).abs() < 1e-12);
    assert_eq!(cmp.missing.iter().map(|k| k.op.as_str()).collect::<Vec<_>>(), ["gone"]);
    assert_eq!(cmp.new.iter().map(|k| k.op.as_str()).collect::<Vec<_>>(), ["fresh"]);
    assert!(cmp.device_warning.is_none());
    let text = cmp.render();
    assert!(text.contains("REGRESSED") && text.contains("missing (in the baseline, not run now): gone"), "{text}");

    // Noise within the thresholds passes.
    let calm = synthetic(&[("add", 1.02), ("scale", 0.95), ("relu", 1.09), ("axpy", 1.0), ("copy", 1.0)]);
    let cmp = compare(&base, &calm, CompareConfig::default()).unwrap();
    assert!(!cmp.failed() && cmp.warnings().count() == 0, "{}", cmp.render());

    // One --threshold sets both: 0.05 turns relu's +9% into a regression.
    let strict = CompareConfig::from_flags(Some(0.05), true).unwrap();
    assert_eq!((strict.warn_threshold, strict.fail_threshold), (0.05, 0.05));
    assert!(compare(&base, &calm, strict).unwrap().failed());
    assert!(CompareConfig::from_flags(Some(-1.0), false).is_err());
    assert!(CompareConfig::from_flags(Some(f64::NAN), false).is_err());
}

#[test]
fn rows_match_on_shape_and_backend_too() {
    let base = synthetic(&[("add", 1.0)]);
    let mut now = synthetic(&[("add", 2.0)]);
    now.rows[0].shape = vec![1 << 20];
    let cmp = compare(&base, &now, CompareConfig::default()).unwrap();
    assert!(cmp.rows.is_empty() && cmp.missing.len() == 1 && cmp.new.len() == 1 && !cmp.failed());
    now.rows[0].shape = base.rows[0].shape.clone();
    now.rows[0].backend = "cpu".into();
    assert!(compare(&base, &now, CompareConfig::default()).unwrap().rows.is_empty());
}

#[test]
fn another_devices_baseline_warns_or_is_refused() {
    let base = synthetic(&[("add", 1.0)]);
    let mut now = synthetic(&[("add", 1.0)]);
    now.device.as_mut().unwrap().name = "NVIDIA H200".into();
    let cmp = compare(&base, &now, CompareConfig::default()).unwrap();
    let w = cmp.device_warning.as_deref().unwrap();
    assert!(w.contains("NVIDIA H100 80GB HBM3") && w.contains("NVIDIA H200"), "{w}");
    assert!(cmp.render().starts_with("WARNING: baseline is from"));
    let err = compare(&base, &now, CompareConfig::from_flags(None, true).unwrap()).unwrap_err();
    assert!(matches!(err, BenchError::DeviceMismatch { .. }), "{err}");
    assert!(err.to_string().contains("refusing to gate"), "{err}");
}

#[test]
fn a_planted_slowdown_fails_the_gate_and_is_marked() {
    let base = synthetic(&[("add", 1.0), ("copy", 2.0)]);
    let mut now = base.clone();
    assert!(!compare(&base, &now, CompareConfig::default()).unwrap().failed());
    now.plant_slowdown(1.3).unwrap();
    assert_eq!(now.planted_slowdown, Some(1.3));
    assert!((now.rows[0].bytes_per_s * 1.3 - base.rows[0].bytes_per_s).abs() < 1e-3 * base.rows[0].bytes_per_s);
    assert!(compare(&base, &now, CompareConfig::default()).unwrap().failed());
    assert!(now.to_json().unwrap().contains("\"planted_slowdown\": 1.3"));
    assert!(!base.to_json().unwrap().contains("planted_slowdown"));
    assert!(now.plant_slowdown(0.0).is_err());
}

#[test]
fn roofs_take_the_best_ceilings_and_place_rows() {
    let roofs = Roofs::from_ceilings(&ceilings());
    assert_eq!((roofs.bandwidth_bytes_per_s, roofs.bandwidth_from.as_str()), (3e12, "driver memcpy DtoD"));
    assert_eq!(roofs.peak("f32"), Some(30e12));
    assert_eq!(roofs.peak("tf32"), Some(300e12));
    assert_eq!(roofs.ridge("f32"), Some(10.0));
    assert_eq!(roofs.peak("f16"), None);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
    // 1 FLOP/byte at 1.5 TB/s: memory-bound at half the roof (attainable 3 TFLOP/s).
    let p = roofs.place("f32", 3_000_000, 3_000_000, 2e-6);
    assert_eq!((p.roof, p.intensity, p.attainable_flops), (Roof::Memory, 1.0, 3e12));
    assert!(close(p.fraction, 0.5), "{p:?}");
    // 100 FLOP/byte at 15 TFLOP/s: compute-bound at half the 30 TFLOP/s peak.
    let p = roofs.place("f32", 300_000_000, 3_000_000, 20e-6);
    assert_eq!((p.roof, p.attainable_flops), (Roof::Compute, 30e12));
    assert!(close(p.fraction, 0.5), "{p:?}");
    // No FLOPs (copy): the fraction is the bandwidth fraction.
    let p = roofs.place("f32", 0, 3_000_000, 1e-6);
    assert!(close(p.fraction, 1.0) && p.roof == Roof::Memory, "{p:?}");
    // A math without a compute roof is bounded by memory only.
    assert_eq!(roofs.place("f16", 1_000_000_000, 1, 1.0).roof, Roof::Memory);
}

#[test]
fn classification_names_the_bound_and_the_likely_cause() {
    let mut r = synthetic(&[]);
    let roofs = r.roofs.clone();
    let n = 1 << 24;
    // 3 tensors of 64 MiB: 201 MB at 3 TB/s is 0.067 ms.
    r.rows = vec![
        row("add", n, 0.07, 1, 3, cfg(1024, true, 1), &roofs),
        row("scale", n, 0.5, 1, 2, cfg(1024, false, 1), &roofs),
        row("relu", n, 0.5, 1, 2, cfg(256, true, 4), &roofs),
        row("axpy", n, 0.5, 2, 3, cfg(1024, true, 4), &roofs),
        row("copy", 1024, 0.004, 0, 2, cfg(1024, true, 1), &roofs),
        // Short but at its roof (3 TB/s): not launch-bound.
        row("relu", 1 << 20, 0.0029, 1, 2, cfg(1024, true, 1), &roofs),
        row("gelu_erf", n, 0.5, 5, 2, cfg(256, true, 4), &roofs),
    ];
    let res = |name: &str, registers, stack| KernelResources {
        name: name.into(),
        registers,
        stack_bytes: stack,
        spill_stores: 0,
        spill_loads: 0,
        shared_bytes: 0,
    };
    let resources = vec![
        res("ft_add_f32_v16_u1", 16, 0),
        res("ft_scale_f32_v1_u1", 16, 0),
        res("ft_relu_f32_v16_u4", 128, 0),
        res("ft_axpy_f32_v16_u4", 32, 64),
        res("ft_gelu_erf_f32_v16_u4", 32, 0),
    ];
    let c = roofline::classify_all(&r, &resources, &ClassifyConfig::default());
    let by = |op: &str| c.iter().find(|x| x.label.starts_with(&format!("{op} "))).unwrap();
    assert_eq!(by("add").bound, Bound::Memory);
    assert_eq!(by("add").cause, "at its roof");
    assert!(by("scale").cause.starts_with("too few bytes in flight"), "{}", by("scale").cause);
    assert!(by("relu").cause.starts_with("low occupancy"), "{}", by("relu").cause);
    assert!(by("axpy").cause.starts_with("register spills"), "{}", by("axpy").cause);
    assert_eq!(by("copy").bound, Bound::LatencyLaunch);
    let short = c.iter().find(|x| x.label == "relu f32 1048576").unwrap();
    assert_eq!((short.bound, short.cause.as_str()), (Bound::Memory, "at its roof"));
    assert!(by("gelu_erf").cause.starts_with("instruction issue"), "{}", by("gelu_erf").cause);
    // Without the ptxas report the cause says where to get it.
    let c = roofline::classify_all(&r, &[], &ClassifyConfig::default());
    assert!(c[1].cause.contains("cargo xtask ptx"), "{}", c[1].cause);
    let text = roofline::render_classification(&r, &c);
    assert!(text.contains("ridge at 10.0 FLOP/byte") && text.contains("latency/launch-bound"), "{text}");
}

#[test]
fn occupancy_follows_registers_threads_and_shared_memory() {
    let d = h100();
    assert_eq!(roofline::resident_threads(&d, 1024, 32, 0), 2048);
    assert_eq!(roofline::resident_threads(&d, 1024, 64, 0), 1024);
    assert_eq!(roofline::resident_threads(&d, 256, 255, 0), 256);
    assert_eq!(roofline::resident_threads(&d, 256, 32, 100_000), 512);
}

#[test]
fn the_roofline_svg_is_written_with_its_roofs_and_points() {
    let mut r = synthetic(&[("add", 0.3), ("gelu_erf", 0.5)]);
    r.rows.push(row("copy", 1 << 24, 0.2, 0, 2, cfg(1024, true, 1), &r.roofs));
    let path = std::env::temp_dir().join(format!("ferrotune-roofline-{}/r.svg", std::process::id()));
    roofline::write_svg(&r, &path, &PlotConfig::for_report(&r)).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg") && svg.len() > 2000, "{} bytes", svg.len());
    for label in
        ["add (f32)", "gelu_erf (f32)", "bandwidth 3000 GB/s", "f32 peak 30.0 TFLOP/s", "tf32 peak", "elementwise"]
    {
        assert!(svg.contains(label), "no '{label}' in the SVG");
    }
    // copy does no arithmetic: no point on a log intensity axis.
    assert!(!svg.contains("copy ("));
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();

    // The CPU run's own roofline (memcpy + SGEMM peer) plots too.
    let (cpu, _) = cpu_run();
    let path = std::env::temp_dir().join(format!("ferrotune-roofline-cpu-{}.svg", std::process::id()));
    roofline::write_svg(&cpu, &path, &PlotConfig::for_report(&cpu)).unwrap();
    assert!(std::fs::read_to_string(&path).unwrap().contains("gelu_erf (f32)"));
    std::fs::remove_file(&path).unwrap();
}

/// The torch peers of the Clifford ops (`benches/torch_clifford.py`) check themselves against a
/// float64 reference built from the blade table, the notes' 2D formulas and finite differences.
/// Runs where the interpreter (`FERROTUNE_PYTHON`, else `python3`) has torch; CI has none.
#[test]
fn the_torch_clifford_peers_pass_their_self_check() {
    let py = std::env::var("FERROTUNE_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_torch = std::process::Command::new(&py)
        .args(["-c", "import torch"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !has_torch {
        println!("skipped: {py} has no torch");
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("torch_clifford.py");
    let out = std::process::Command::new(&py).arg(&script).args(["--check", "--device", "cpu"]).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{}", text);
    assert!(text.contains("self-check on cpu:") && !text.contains("CHECK FAILED"), "{text}");
}
