//! `cargo xtask tune`: parses the flags, runs the autotuner (its workers are this binary's
//! hidden `tune-worker` subcommand), shows progress, prints the default-vs-tuned table.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use ferrotune::ops::clifford::Clifford;
use ferrotune::tuned::CliffordPass;
use ferrotune::{DType, ElemOp};
use ferrotune_autotune::measure::Repeat;
use ferrotune_autotune::protocol::layout_from_code;
use ferrotune_autotune::tuner::{CANDIDATE_TIMEOUT, Event};
use ferrotune_autotune::{
    Budget, CliffordShape, Control, EvalOutcome, GemmDtype, GemmShape, Shape, Shard, Strategy, Timeouts, TuneOptions,
    WorkerCommand,
};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(clap::Args)]
pub struct Args {
    /// Ops, comma-separated, or `all` (the elementwise ops); `gemm` for the GEMM tiles;
    /// `clifford_fwd`, `clifford_bwd` (or `clifford`: both) for the Clifford SGP layer.
    #[arg(long, value_delimiter = ',', default_value = "add,gelu_erf")]
    ops: Vec<String>,
    /// Dtypes: f32, f16, bf16 for elementwise ops; tf32, f16, bf16, f32 (exact, FFMA) for gemm (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "f32")]
    dtypes: Vec<String>,
    /// Elementwise: element counts; K, M, G suffixes are powers of 1024 (e.g. 16M). GEMM:
    /// MxNxK or MxNxKxBATCH (e.g. 8192x8192x8192,1000x3000x700). Comma-separated; each op takes
    /// the sizes of its kind.
    #[arg(long, value_delimiter = ',', default_value = "16M")]
    sizes: Vec<String>,
    /// GEMM operand layouts, A then B: rc (x wᵀ), rr, cr, cc (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "rc")]
    layouts: Vec<String>,
    /// Clifford problems: DIMxBxN, the algebra (2 or 3), batch rows and features
    /// (e.g. 2x4096x512,3x4096x777; comma-separated).
    #[arg(long, value_delimiter = ',')]
    clifford_shapes: Vec<String>,
    /// Clifford: with the per-grade norm (`on`), without (`off`), or both (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "on")]
    clifford_norm: Vec<String>,
    /// exhaustive | random | model.
    #[arg(long, default_value = "model")]
    strategy: Strategy,
    /// Most candidates measured per shape (default: all for exhaustive, 16 otherwise).
    #[arg(long)]
    budget: Option<usize>,
    /// Wall-clock limit per shape, seconds.
    #[arg(long)]
    time_limit: Option<f64>,
    /// Stop a shape after this many candidates in a row without a 0.5% improvement.
    #[arg(long)]
    patience: Option<usize>,
    /// The profile to write (created, or merged into and resumed from).
    #[arg(long)]
    profile: PathBuf,
    /// auto | cuda | cpu.
    #[arg(long, default_value = "auto")]
    backend: String,
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Timed runs per candidate during the search.
    #[arg(long, default_value_t = 20)]
    iters: usize,
    /// Timed runs of the final default-vs-winner comparison.
    #[arg(long, default_value_t = 100)]
    confirm_iters: usize,
    /// Seconds before a candidate's worker is killed and the candidate recorded as a timeout.
    #[arg(long, default_value_t = CANDIDATE_TIMEOUT.as_secs_f64())]
    candidate_timeout: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Measure again shapes whose bucket the profile already has.
    #[arg(long)]
    retune: bool,
    /// With --strategy exhaustive: replay the model-guided strategy with this budget over the
    /// exhaustive measurements and report its gap to the exhaustive best.
    #[arg(long)]
    compare_model: Option<usize>,
    /// The least gain (percent) the search's winner needs over the built-in config in the final,
    /// alternating comparison to be kept; a smaller win keeps the built-in config, so near-ties
    /// give the same profile on every run. 0 keeps the plain fastest.
    #[arg(long, default_value_t = 100.0 * ferrotune_autotune::confirm::DEFAULT_MIN_GAIN)]
    min_gain: f64,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// GPUs to tune on, one worker process each (`all`, `0,1`, `0-3`): the shapes are spread
    /// over them; part files beside the profile hold each GPU's journal until the merge.
    #[arg(long)]
    devices: Option<String>,
    /// Tune only shard I of N (0-based, e.g. 3/8): a deterministic 1/N of the shapes, for a
    /// scheduler's job array; join the shards' profiles with `cargo xtask profile merge`.
    #[arg(long)]
    shard: Option<Shard>,
}

fn parse_size(s: &str) -> anyhow::Result<usize> {
    let s = s.trim();
    let (digits, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1usize << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: usize = digits.parse().with_context(|| format!("size '{s}' is not a number (K/M/G suffixes allowed)"))?;
    n.checked_mul(mult).filter(|n| *n > 0).with_context(|| format!("size '{s}' must be positive and fit in memory"))
}

/// `MxNxK` or `MxNxKxBATCH`.
fn parse_gemm_size(s: &str) -> anyhow::Result<[usize; 4]> {
    let v: Vec<usize> = s
        .split('x')
        .map(|p| p.trim().parse())
        .collect::<Result<_, _>>()
        .with_context(|| format!("GEMM size '{s}' is not MxNxK or MxNxKxBATCH"))?;
    match v[..] {
        [m, n, k] if m > 0 && n > 0 && k > 0 => Ok([m, n, k, 1]),
        [m, n, k, b] if m > 0 && n > 0 && k > 0 && b > 0 => Ok([m, n, k, b]),
        _ => anyhow::bail!("GEMM size '{s}' must be MxNxK or MxNxKxBATCH, all positive"),
    }
}

/// The Clifford passes `--ops` names (`clifford` is both).
fn clifford_passes(ops: &[String]) -> Vec<CliffordPass> {
    let both = ops.iter().any(|o| o == "clifford");
    CliffordPass::ALL.into_iter().filter(|p| both || ops.iter().any(|o| o == p.op_name())).collect()
}

/// `DIMxBxN` with DIM 2 or 3, B and N positive.
fn parse_clifford_shape(s: &str) -> anyhow::Result<[usize; 3]> {
    let v = crate::validate::shape(s, &[3], "DIMxBxN (e.g. 2x4096x512)")?;
    anyhow::ensure!(matches!(v[0], 2 | 3), "Clifford shape '{s}': the algebra's dimension must be 2 or 3");
    Ok([v[0], v[1], v[2]])
}

/// The shapes of every (op, dtype, size[, layout]) combination the flags name: elementwise
/// ops take the element counts and f32/f16/bf16, `gemm` takes the MxNxK sizes, tf32/f16/bf16/f32
/// and the layouts, the Clifford passes `--clifford-shapes`, f32/f16/bf16 and
/// `--clifford-norm`. A dtype or size that no op can use is an error.
fn shapes_of(a: &Args) -> anyhow::Result<Vec<Shape>> {
    let gemm = a.ops.iter().any(|o| o == "gemm");
    let passes = clifford_passes(&a.ops);
    let elem_names: Vec<String> = a
        .ops
        .iter()
        .filter(|o| *o != "gemm" && *o != "clifford" && CliffordPass::from_name(o).is_none())
        .cloned()
        .collect();
    let ops = crate::parse_list(&elem_names, &ElemOp::ALL, ElemOp::from_name, "op")?;
    let (gemm_sizes, elem_sizes): (Vec<&String>, Vec<&String>) = a.sizes.iter().partition(|s| s.contains('x'));
    let sizes = elem_sizes.iter().map(|s| parse_size(s)).collect::<anyhow::Result<Vec<_>>>()?;
    let gemm_sizes = gemm_sizes.iter().map(|s| parse_gemm_size(s)).collect::<anyhow::Result<Vec<_>>>()?;
    let all_dtypes = a.dtypes.iter().any(|d| d == "all");
    let elem_dtypes: Vec<DType> =
        DType::ALL.into_iter().filter(|d| all_dtypes || a.dtypes.iter().any(|x| x == d.name())).collect();
    let gemm_dtypes: Vec<GemmDtype> =
        GemmDtype::ALL.into_iter().filter(|d| all_dtypes || a.dtypes.iter().any(|x| x == d.name())).collect();
    for d in a.dtypes.iter().filter(|d| *d != "all") {
        let elem_ok = !ops.is_empty() && elem_dtypes.iter().any(|x| x.name() == d);
        let gemm_ok = gemm && gemm_dtypes.iter().any(|x| x.name() == d);
        let clifford_ok = !passes.is_empty() && elem_dtypes.iter().any(|x| x.name() == d);
        anyhow::ensure!(
            elem_ok || gemm_ok || clifford_ok,
            "dtype '{d}' fits none of the ops (elementwise and clifford: f32, f16, bf16; gemm: tf32, f16, bf16, f32)"
        );
    }
    let mut layouts = Vec::new();
    for l in &a.layouts {
        let mut c = l.chars().map(layout_from_code);
        let (Some(Some(x)), Some(Some(y)), None) = (c.next(), c.next(), c.next()) else {
            anyhow::bail!("layout '{l}' is not two of r and c (rc, rr, cr, cc)");
        };
        layouts.push((x, y));
    }
    let mut shapes = Vec::new();
    if !ops.is_empty() {
        anyhow::ensure!(!sizes.is_empty(), "elementwise ops need element counts in --sizes (e.g. 16M)");
        for &op in &ops {
            for &dtype in &elem_dtypes {
                for &n in &sizes {
                    shapes.push(Shape::elem(op, dtype, n));
                }
            }
        }
    }
    if gemm {
        anyhow::ensure!(!gemm_sizes.is_empty(), "gemm needs MxNxK sizes in --sizes (e.g. 4096x4096x4096)");
        for &dtype in &gemm_dtypes {
            for &(a, b) in &layouts {
                for &[m, n, k, batch] in &gemm_sizes {
                    shapes.push(Shape::Gemm(GemmShape { dtype, m, n, k, batch, a, b }));
                }
            }
        }
    }
    if !passes.is_empty() {
        anyhow::ensure!(
            !a.clifford_shapes.is_empty(),
            "clifford ops need DIMxBxN problems in --clifford-shapes (e.g. 2x4096x512)"
        );
        let problems = a.clifford_shapes.iter().map(|s| parse_clifford_shape(s)).collect::<anyhow::Result<Vec<_>>>()?;
        for &pass in &passes {
            for &dtype in &elem_dtypes {
                for norm in &a.clifford_norm {
                    for &[dim, b, n] in &problems {
                        let problem = Clifford::new(dim as u32, b, n, norm == "on");
                        shapes.push(Shape::Clifford(CliffordShape { pass, dtype, problem }));
                    }
                }
            }
        }
    } else {
        anyhow::ensure!(a.clifford_shapes.is_empty(), "--clifford-shapes needs a clifford op in --ops");
    }
    anyhow::ensure!(!shapes.is_empty(), "nothing to tune: no shape for these --ops, --dtypes and --sizes");
    Ok(shapes)
}

/// The flags `shapes_of` does not cover, checked before any worker starts.
fn check(a: &Args) -> anyhow::Result<()> {
    use crate::validate as v;
    v::ops(&a.ops, &["gemm", "clifford", "clifford_fwd", "clifford_bwd"])?;
    for s in &a.clifford_shapes {
        parse_clifford_shape(s)?;
    }
    for n in &a.clifford_norm {
        anyhow::ensure!(["on", "off"].contains(&n.as_str()), "unknown --clifford-norm '{n}' (valid: on, off)");
    }
    v::dtypes(&a.dtypes, &["tf32"])?;
    anyhow::ensure!(
        ["auto", "cuda", "cpu"].contains(&a.backend.as_str()),
        "unknown backend '{}' (valid: auto, cuda, cpu)",
        a.backend
    );
    v::at_least_one("--iters", Some(a.iters))?;
    v::at_least_one("--confirm-iters", Some(a.confirm_iters))?;
    anyhow::ensure!(
        a.min_gain.is_finite() && (0.0..50.0).contains(&a.min_gain),
        "--min-gain {} is not a percentage in [0, 50)",
        a.min_gain
    );
    v::at_least_one("--budget", a.budget)?;
    v::at_least_one("--patience", a.patience)?;
    v::seconds("--time-limit", a.time_limit)?;
    v::seconds("--candidate-timeout", Some(a.candidate_timeout))?;
    anyhow::ensure!(
        a.compare_model.is_none() || a.strategy == Strategy::Exhaustive,
        "--compare-model replays the model over exhaustive measurements: use it with --strategy exhaustive"
    );
    v::writable("--profile", &a.profile)?;
    if let Some(p) = &a.json {
        v::writable("--json", p)?;
    }
    Ok(())
}

pub fn run(a: Args) -> anyhow::Result<()> {
    check(&a)?;
    let mut shapes = shapes_of(&a)?;
    if let Some(sh) = a.shard {
        let total = shapes.len();
        shapes = sh.select(&shapes);
        println!("shard {sh}: {} of {total} shapes", shapes.len());
        if shapes.is_empty() {
            println!("nothing to tune in this shard (more shards than shapes)");
            return Ok(());
        }
    }
    let default_budget = if a.strategy == Strategy::Exhaustive { None } else { Some(16) };
    let opts = TuneOptions {
        shapes,
        strategy: a.strategy,
        budget: Budget {
            max_evals: a.budget.or(default_budget),
            time_limit: a.time_limit.map(Duration::from_secs_f64),
            patience: a.patience,
        },
        profile: a.profile.clone(),
        backend: a.backend.clone(),
        worker: WorkerCommand {
            program: std::env::current_exe().context("finding the xtask binary to start workers")?,
            args: vec!["tune-worker".into()],
            env: vec![],
        },
        timeouts: Timeouts { candidate: Duration::from_secs_f64(a.candidate_timeout), ..Timeouts::default() },
        search_repeat: Repeat { warmup: a.warmup, iters: a.iters },
        confirm_repeat: Repeat { warmup: a.warmup, iters: a.confirm_iters },
        seed: a.seed,
        retune: a.retune,
        compare_model: a.compare_model,
        min_gain: a.min_gain / 100.0,
        // Register counts from `cargo xtask ptx`'s report: in the current directory's target/
        // (where the binary was carried to another machine) or this workspace's.
        resources_dir: Some(if std::path::Path::new("target/ptx").is_dir() {
            PathBuf::from("target/ptx")
        } else {
            crate::workspace_root().join("target/ptx")
        }),
    };
    if let Some(spec) = &a.devices {
        anyhow::ensure!(a.backend != "cpu", "--devices needs the CUDA backend (--backend cuda or auto)");
        let devices = ferrotune::parse_device_list(spec, ferrotune::device_count()?)?;
        let report = crate::tune_devices::run(&opts, &devices)?;
        return print_report(&a, &report);
    }
    // Parts left by a killed `--devices` run hold its journal: fold them in to resume here.
    let parts = ferrotune_autotune::parallel::leftover_parts(&opts.profile);
    if !parts.is_empty() {
        ferrotune_autotune::parallel::fold_parts(&opts.profile, &parts)?;
        println!("folded {} part files of an interrupted device-parallel run into the profile", parts.len());
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>28} [{bar:30}] {pos}/{len} {msg}")
            .map_err(|e| anyhow::anyhow!("progress template: {e}"))?
            .progress_chars("=> "),
    );
    let report = ferrotune_autotune::tune(&opts, &mut |e| {
        match e {
            Event::Machine(d) => say(
                &bar,
                format!(
                    "backend: {} on {} (kernel builds: gemm {}, clifford {}, elementwise per op; registers from {})",
                    d.backend,
                    d.device,
                    d.build_of("gemm"),
                    d.build_of("clifford"),
                    d.resources_from
                ),
            ),
            Event::Warning(w) => say(&bar, format!("warning: {w}")),
            Event::ShapeStart { shape, candidates, planned, pruned } => {
                bar.reset();
                bar.set_length(planned as u64);
                bar.set_prefix(shape.label());
                say(
                    &bar,
                    format!(
                        "{}: {candidates} candidates, {} pruned{}",
                        shape.label(),
                        pruned.len(),
                        pruned.first().map(|p| format!(" (e.g. {}: {})", p.point, p.reason)).unwrap_or_default()
                    ),
                );
            }
            Event::Candidate { config, role, outcome, reused, counts, .. } => {
                if role == "search" {
                    bar.set_position(counts.done as u64);
                }
                let best = counts.best_ms.map_or("-".into(), |b| format!("{b:.4} ms"));
                bar.set_message(format!(
                    "pruned {} failed {} invalid {} reused {} best {best}",
                    counts.pruned, counts.failed, counts.invalid, counts.reused
                ));
                match outcome {
                    EvalOutcome::Ok { .. } => {}
                    other if !reused => say(&bar, format!("  {role} {config}: {}", summary(other))),
                    _ => {}
                }
            }
            Event::ShapeDone(r) => say(
                &bar,
                format!(
                    "{}: {} ({} evaluations, {} measured now, {} from the journal)",
                    r.label, r.stop, r.evaluations, r.measured, r.reused
                ),
            ),
        }
        Control::Continue
    });
    bar.finish_and_clear();
    print_report(&a, &report?)
}

/// The default-vs-tuned table, and the JSON report when asked for.
fn print_report(a: &Args, report: &ferrotune_autotune::TuneReport) -> anyhow::Result<()> {
    println!(
        "\n{:<36} {:>12} {:>12} {:>8} {:>9}  tuned config",
        "op / shape", "default ms", "tuned ms", "speedup", "TFLOP/s"
    );
    for s in &report.shapes {
        let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.4}"));
        let f32_exact = s.op == "gemm" && s.dtype == "f32";
        let show = |c: ferrotune_autotune::ConfigJson| ferrotune_autotune::family::describe(&c, f32_exact);
        let cfg = s.tuned_config.map_or("-".into(), show);
        println!(
            "{:<36} {:>12} {:>12} {:>8} {:>9}  {cfg}{}",
            s.label,
            ms(s.default_ms),
            ms(s.tuned_ms),
            s.speedup.map_or("-".into(), |x| format!("{x:.3}x")),
            s.tuned_tflops.map_or("-".into(), |t| format!("{t:.2}")),
            if s.existing { format!(" (from the profile: {})", s.stop) } else { String::new() }
        );
        if let (Some(h), Some(t)) = (s.heuristic_config, s.tuned_ms) {
            let hm = s.heuristic_ms.map_or("not measured".into(), |m| format!("{m:.4} ms, tuned {:.3}x", m / t));
            let h = if f32_exact { "the plan's own (path auto)".to_string() } else { show(h) };
            println!("{:>36} built-in heuristic: {h} ({hm})", "");
        }
        if let Some(k) = &s.same_kernel {
            println!("{:>36} the search's winner runs the built-in config's kernel ({k}): built-in kept", "");
        }
        if let Some((g, won)) = s.not_every_round {
            println!(
                "{:>36} the search's winner was {:.1}% faster but won {won} of {} rounds: built-in kept",
                "",
                100.0 * g,
                ferrotune_autotune::confirm::ROUNDS
            );
        }
        if let Some(g) = s.within_margin {
            println!("{:>36} the search's winner was {:.1}% faster, within --min-gain: built-in kept", "", 100.0 * g);
        }
        if let Some(m) = &s.model_compare {
            println!(
                "{:>36} model-guided, budget {}: best {:.4} ms after {} evaluations vs exhaustive {:.4} ms after {} (gap {:+.2}%)",
                "",
                m.budget,
                m.model_best_ms,
                m.model_evals_to_best,
                m.exhaustive_best_ms,
                m.exhaustive_evals,
                m.gap * 100.0
            );
        }
    }
    if report.shapes.iter().any(|s| s.op == "gemm") {
        println!(
            "GEMM default config: tile 0 (128x128, the kernels' default) with the plan's own family, K split and \
             packing; same run, confirmation timings"
        );
    }
    if let Some(g) = report.geomean_speedup {
        println!("geomean speedup over the built-in configs: {g:.3}x ({} shapes)", report.shapes.len());
    }
    println!("profile: {} (workers started: {})", a.profile.display(), report.worker_starts);
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_string_pretty(report)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// A line above the progress bar, or on stdout when the bar is hidden (not a terminal).
fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        println!("{line}");
    } else {
        bar.println(line);
    }
}

pub(crate) fn summary(o: &EvalOutcome) -> String {
    match o {
        EvalOutcome::Ok { stats, .. } => format!("{:.4} ms", stats.median_ms),
        EvalOutcome::Invalid { why } => format!("INVALID (wrong output, never picked): {why}"),
        EvalOutcome::Failed { why, .. } => format!("FAILED: {why}"),
        EvalOutcome::Timeout { after_s } => format!("TIMEOUT after {after_s:.1} s (worker killed)"),
    }
}

/// The hidden `tune-worker` subcommand: serve the tuner on stdin/stdout, then exit.
pub fn worker() -> ! {
    let code = ferrotune_autotune::worker::serve(std::io::stdin().lock(), std::io::stdout().lock());
    std::process::exit(code)
}
