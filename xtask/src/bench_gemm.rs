//! `cargo xtask bench --ops gemm`: our GEMM against cuBLAS on the same shapes in the same
//! process, plus the batched (vs separate launches, vs cuBLAS strided-batched) and fused-epilogue
//! (vs our unfused kernels, vs cuBLASLt GELU_BIAS) and split-K (our heuristic and our best
//! forced split vs cuBLAS, bf16 and tf32) comparisons; a table on stdout and JSON.

use anyhow::Context;
use ferrotune::peer::{GemmMath, GemmShape};
use ferrotune::{Backend, BackendChoice};
use ferrotune_autotune::measure::Repeat;
use ferrotune_bench::gemm::{
    GemmRow, SPLIT_K_SHAPES, batched_comparisons, compare_with_cublas, fused_linear_bias_gelu, split_k_comparisons,
};

/// What `bench --ops gemm` runs.
pub struct GemmArgs {
    pub shapes: Vec<String>,
    /// Shapes of the fused `linear_bias_gelu` rows (CUDA only).
    pub gelu_shapes: Vec<String>,
    pub dtypes: Vec<String>,
    pub warmup: usize,
    pub iters: usize,
    pub json: Option<std::path::PathBuf>,
}

/// The shapes of the GEMM issue's comparison table.
pub const DEFAULT_SHAPES: &str =
    "8192x8192x8192,4096x4096x4096,4000x4000x4000,1000x3000x700,512x3072x768,8192x3072x768";

/// The shapes of the fused `linear_bias_gelu` rows (the Hopper issue's).
pub const DEFAULT_GELU_SHAPES: &str = "8192x3072x768,512x3072x768";

pub fn parse_shape(s: &str) -> anyhow::Result<GemmShape> {
    let v: Vec<usize> =
        s.split('x').map(|p| p.trim().parse()).collect::<Result<_, _>>().with_context(|| format!("bad shape '{s}'"))?;
    anyhow::ensure!(v.len() == 3, "shape '{s}' is not MxNxK");
    Ok(GemmShape { m: v[0], n: v[1], k: v[2] })
}

fn print(r: &GemmRow) {
    println!(
        "{:<18} {:<5} {:>5}x{:>5}x{:>5} b{:<3} s{:<2} ours {:>8.3} ms {:>7.1} TF/s | {:<40} {:>8} | ratio {:>6} {}",
        r.case,
        r.dtype,
        r.m,
        r.n,
        r.k,
        r.batch,
        r.split_k.unwrap_or(1),
        r.ours.median_ms,
        r.ours_tflops,
        r.peer,
        r.peer_tflops.map_or("-".into(), |t| format!("{t:.1}")),
        r.ratio.map_or("-".into(), |x| format!("{x:.3}")),
        if r.correct { "ok" } else { "MISMATCH" }
    );
    if let Some(gr) = &r.ours_graph {
        let peer = match (&r.peer_graph, &r.peer_graph_note) {
            (Some(p), _) => format!("{:.4} ms", p.median_ms),
            (None, Some(why)) => why.clone(),
            (None, None) => "-".into(),
        };
        println!("    in a CUDA graph, per replay: ours {:.4} ms, cuBLAS {peer}", gr.median_ms);
    }
    if let Some(p) = &r.path {
        println!("    path: {p}");
    }
}

pub fn run(args: GemmArgs) -> anyhow::Result<()> {
    let backend =
        Backend::new(BackendChoice::Cuda).context("bench --ops gemm compares with cuBLAS and needs a CUDA device")?;
    let repeat = Repeat { warmup: args.warmup, iters: args.iters };
    // Every shape must fit before anything is measured.
    for s in args.shapes.iter().chain(&args.gelu_shapes) {
        let g = parse_shape(s)?;
        ferrotune_bench::preflight::check_gemm(&backend.stream(), (g.m, g.n, g.k), 4, &format!("the GEMM {s}"))?;
    }
    let mut rows = Vec::new();
    for dt in &args.dtypes {
        let name = match dt.as_str() {
            "fp32" => "f32",
            "fp16" => "f16",
            other => other,
        };
        let math =
            GemmMath::from_name(name).with_context(|| format!("unknown GEMM dtype {dt} (f32, tf32, f16, bf16)"))?;
        for s in &args.shapes {
            let r = compare_with_cublas(&backend, math, parse_shape(s)?, repeat)?;
            print(&r);
            rows.push(r);
        }
    }
    // Split-K on skinny, long-K shapes, for the inputs it targets (FERROTUNE_BENCH_NO_SPLIT=1
    // skips them, for device runs short of time).
    let split = std::env::var("FERROTUNE_BENCH_NO_SPLIT").is_err();
    for dt in ["bf16", "tf32"].into_iter().filter(|d| split && args.dtypes.iter().any(|x| x == d)) {
        let math = GemmMath::from_name(dt).context("bf16 and tf32 are GEMM dtypes")?;
        for (m, n, k) in SPLIT_K_SHAPES {
            for r in split_k_comparisons(&backend, math, GemmShape { m, n, k }, repeat)? {
                print(&r);
                if !r.split_k_sweep.is_empty() {
                    let sweep: Vec<String> =
                        r.split_k_sweep.iter().map(|t| format!("s{} {:.3} ms", t.split_k, t.median_ms)).collect();
                    println!("    forced: {}", sweep.join(", "));
                }
                rows.push(r);
            }
        }
    }
    for r in batched_comparisons(&backend, 40, 32, 256, 256, repeat)? {
        print(&r);
        rows.push(r);
    }
    for s in &args.gelu_shapes {
        let g = parse_shape(s)?;
        for r in fused_linear_bias_gelu(&backend, g.m, g.n, g.k, repeat)? {
            print(&r);
            rows.push(r);
        }
    }
    if let Some(p) = &args.json {
        let d = backend.device().context("a CUDA backend has a device")?;
        let doc = serde_json::json!({"schema": "ferrotune-gemm-bench/1", "device": d.name, "driver": d.driver_version,
            "commit": std::env::var("FERROTUNE_COMMIT").unwrap_or_default(), "rows": rows});
        std::fs::write(p, serde_json::to_string_pretty(&doc)?)?;
    }
    let bad = rows.iter().filter(|r| !r.correct).count();
    anyhow::ensure!(bad == 0, "{bad} rows did not match the reference");
    Ok(())
}

/// `bench --ops gemm` on the CPU backend: our GEMM (f32, f16, bf16; B row- and column-major)
/// beside `matrixmultiply` SGEMM on the same shapes (default 1024³ and 512x3072x768) in the same
/// run; a table and JSON (`benches/gemm_cpu.rs`).
pub fn run_cpu(args: GemmArgs) -> anyhow::Result<()> {
    use ferrotune::DType;
    let shapes: Vec<(usize, usize, usize)> = if args.shapes.is_empty() {
        ferrotune_bench::gemm_cpu::DEFAULT_SHAPES.to_vec()
    } else {
        args.shapes.iter().map(|s| parse_shape(s).map(|g| (g.m, g.n, g.k))).collect::<anyhow::Result<_>>()?
    };
    let dtypes: Vec<DType> = args
        .dtypes
        .iter()
        .map(|d| {
            DType::ALL
                .into_iter()
                .find(|t| t.name() == d)
                .with_context(|| format!("unknown CPU GEMM dtype '{d}' (valid: f32, f16, bf16)"))
        })
        .collect::<anyhow::Result<_>>()?;
    anyhow::ensure!(args.iters > 0, "--iters must be at least 1");
    let backend = Backend::new(BackendChoice::Cpu)?;
    ferrotune::tuned::check_usable(&backend.stream())?;
    if let Backend::Cpu(c) = &backend {
        println!("backend: cpu, {} threads", c.threads());
    }
    let repeat = Repeat { warmup: args.warmup, iters: args.iters };
    let rows = ferrotune_bench::gemm_cpu::rows(&backend, &shapes, &dtypes, repeat, |r| {
        println!(
            "{:<5} {} {:>5}x{:>5}x{:>5} ours {:>8.3} ms {:>6.1} GFLOP/s | matrixmultiply f32 {:>8.3} ms {:>6.1} GFLOP/s | ratio {:.3} {}",
            r.dtype,
            r.layout,
            r.m,
            r.n,
            r.k,
            r.ours.median_ms,
            r.ours_gflops,
            r.peer.median_ms,
            r.peer_gflops,
            r.ratio,
            if r.correct { "ok" } else { "MISMATCH" }
        )
    })?;
    if let Some(p) = &args.json {
        let doc = serde_json::json!({"schema": "ferrotune-gemm-cpu-bench/1", "machine": ferrotune_bench::host_cpu(),
            "threads": rows.first().map_or(0, |r| r.threads), "date": ferrotune_profile::utc_now(),
            "commit": crate::bench::commit(), "rows": rows});
        std::fs::write(p, serde_json::to_string_pretty(&doc)?).with_context(|| format!("writing {}", p.display()))?;
        println!("wrote {}", p.display());
    }
    let bad = rows.iter().filter(|r| !r.correct).count();
    anyhow::ensure!(bad == 0, "{bad} rows did not match the reference");
    Ok(())
}

/// `bench --ops gemm-tiles`: every compiled tensor-core tile on each shape and dtype (tf32,
/// f16, bf16), B column-major and row-major; a table and JSON rows (`benches/gemm_tiles.rs`).
pub fn run_tiles(args: GemmArgs) -> anyhow::Result<()> {
    use ferrotune::ops::gemm::Layout;
    let backend = Backend::new(BackendChoice::Cuda).context("bench --ops gemm-tiles needs a CUDA device")?;
    let repeat = Repeat { warmup: args.warmup, iters: args.iters };
    let mut rows = Vec::new();
    for dt in &args.dtypes {
        let math = GemmMath::from_name(dt).with_context(|| format!("unknown GEMM dtype {dt} (tf32, f16, bf16)"))?;
        if math == GemmMath::F32 {
            continue; // one FFMA tile: nothing to sweep
        }
        for s in &args.shapes {
            for lb in [Layout::Col, Layout::Row] {
                let shape = parse_shape(s)?;
                let tiles = ferrotune_bench::gemm_tiles::tile_sweep(&backend, math, shape, lb, repeat)?;
                let best = tiles
                    .iter()
                    .filter(|t| t.correct)
                    .filter_map(|t| t.stats.map(|s| s.median_ms))
                    .fold(f64::INFINITY, f64::min);
                for t in &tiles {
                    println!(
                        "{:<5} r{} {:>5}x{:>5}x{:>5} tile {} {:<44} {:>9} ms {:>7} TF/s {}{}",
                        t.dtype,
                        lb.code(),
                        t.m,
                        t.n,
                        t.k,
                        t.tile,
                        t.kernel,
                        t.stats.map_or("-".into(), |s| format!("{:.4}", s.median_ms)),
                        t.tflops.map_or("-".into(), |x| format!("{x:.1}")),
                        if t.correct { "ok" } else { "WRONG" },
                        match (t.heuristic, t.stats.is_some_and(|s| s.median_ms == best)) {
                            (true, true) => " <- heuristic, best",
                            (true, false) => " <- heuristic",
                            (false, true) => " <- best",
                            _ => "",
                        }
                    );
                    if let Some(e) = &t.error {
                        println!("      {e}");
                    }
                }
                rows.extend(tiles);
            }
        }
    }
    if let Some(p) = &args.json {
        let d = backend.device().context("a CUDA backend has a device")?;
        let doc = serde_json::json!({"schema": "ferrotune-gemm-tiles/1", "device": d.name, "driver": d.driver_version,
            "commit": std::env::var("FERROTUNE_COMMIT").unwrap_or_default(), "rows": rows});
        std::fs::write(p, serde_json::to_string_pretty(&doc)?)?;
    }
    let bad = rows.iter().filter(|r| !r.correct).count();
    anyhow::ensure!(bad == 0, "{bad} tiles did not match the reference");
    Ok(())
}
