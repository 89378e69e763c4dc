//! `cargo xtask profile show|validate|merge|explain`: inspect, check (file:line errors,
//! profiles for another device), combine tuning profiles, and ask which config an op gets.

use std::path::{Path, PathBuf};

use anyhow::Context;
use ferrotune::profile::{Profile, ProfileSet};
use ferrotune::{Backend, BackendChoice, DType, ElemOp};

#[derive(clap::Subcommand)]
pub enum Cmd {
    /// Print a profile's entries (and its journal of unfinished runs).
    Show { path: PathBuf },
    /// Check profiles: syntax, schema version, values; warn about entries for another device
    /// or kernel build than this machine's.
    Validate {
        paths: Vec<PathBuf>,
        #[arg(long, default_value = "auto")]
        backend: BackendChoice,
        /// Treat warnings as errors.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Merge profiles into one (for the same key, device and build the newer entry wins).
    Merge {
        paths: Vec<PathBuf>,
        #[arg(long, short)]
        out: PathBuf,
    },
    /// Which config an op gets on this machine, and why.
    Explain {
        #[arg(long)]
        op: String,
        /// f32, f16, bf16; for gemm also tf32 (f32 inputs on TF32 tensor cores; f32 is then exact FFMA).
        #[arg(long, default_value = "f32")]
        dtype: String,
        /// Elements (elementwise ops).
        #[arg(long, required_unless_present = "shape")]
        n: Option<usize>,
        /// GEMM: MxNxK or MxNxKxBATCH; clifford: DIMxBxN (e.g. 2x4096x512).
        #[arg(long)]
        shape: Option<String>,
        /// GEMM: A's and B's layout (rc, rr, cr, cc).
        #[arg(long, default_value = "rc")]
        layout: String,
        /// Clifford: the problem without the per-grade norm (default: with it).
        #[arg(long)]
        no_norm: bool,
        /// A profile file or directory (default: FERROTUNE_PROFILE or the default locations).
        #[arg(long)]
        profile: Option<PathBuf>,
        #[arg(long, default_value = "auto")]
        backend: BackendChoice,
        /// GEMM: also show how the batch would be split over these GPUs (`all`, `0,1`) in
        /// proportion to their measured speed.
        #[arg(long)]
        devices: Option<String>,
    },
}

pub fn run(cmd: Cmd) -> anyhow::Result<()> {
    match cmd {
        Cmd::Show { path } => show(&path),
        Cmd::Validate { paths, backend, deny_warnings } => validate(&paths, backend, deny_warnings),
        Cmd::Merge { paths, out } => merge(&paths, &out),
        Cmd::Explain { op, dtype, n, shape, layout, no_norm, profile, backend, devices } => {
            let b = Backend::new(backend)?;
            let paths = profile.map_or_else(ferrotune::tuned::default_profile_paths, |p| vec![p]);
            let set = ferrotune::tuned::load_profiles(&paths);
            for p in ferrotune::tuned::unusable_profiles(&set, &b.stream()) {
                eprintln!("warning: tuning profile not used: {p}");
            }
            if op == "gemm" {
                return explain_gemm(&set, &dtype, shape.as_deref(), &layout, &b, devices.as_deref());
            }
            if op == "clifford" {
                return crate::explain_clifford::run(&set, &dtype, shape.as_deref(), !no_norm, &b);
            }
            let n = n.context("elementwise ops need --n")?;
            let op = ElemOp::from_name(&op).with_context(|| format!("unknown op '{op}'"))?;
            let dtype = DType::ALL
                .into_iter()
                .find(|d| d.name() == dtype)
                .with_context(|| format!("unknown dtype '{dtype}'"))?;
            let (cfg, src) = ferrotune::tuned::explain_in(&set, op, dtype, n, &b.stream());
            println!("{} {} n={n} on {}: {cfg:?}\n  from: {src}", op.name(), dtype.name(), b.name());
            Ok(())
        }
    }
}

/// `profile explain --op gemm`: the config a GEMM of this shape gets (tile, CPU rows, split-K,
/// family, packing) and where from, then on a GPU the kernel family the plan runs and why.
fn explain_gemm(
    set: &ProfileSet,
    dtype: &str,
    shape: Option<&str>,
    layout: &str,
    b: &Backend,
    devices: Option<&str>,
) -> anyhow::Result<()> {
    let shape = shape.context("gemm needs --shape MxNxK")?;
    let v: Vec<usize> = shape
        .split('x')
        .map(|p| p.trim().parse())
        .collect::<Result<_, _>>()
        .with_context(|| format!("shape '{shape}' is not MxNxK"))?;
    let (m, n, k, batch) = match v[..] {
        [m, n, k] => (m, n, k, 1),
        [m, n, k, b] => (m, n, k, b),
        _ => anyhow::bail!("shape '{shape}' is not MxNxK or MxNxKxBATCH"),
    };
    let dt = ferrotune_autotune::GemmDtype::from_name(dtype)
        .with_context(|| format!("unknown GEMM dtype '{dtype}' (tf32, f16, bf16, f32)"))?;
    let mut c = layout.chars().map(ferrotune_autotune::protocol::layout_from_code);
    let (Some(Some(la)), Some(Some(lb)), None) = (c.next(), c.next(), c.next()) else {
        anyhow::bail!("layout '{layout}' is not two of r and c (rc, rr, cr, cc)");
    };
    let g = ferrotune_autotune::GemmShape { dtype: dt, m, n, k, batch, a: la, b: lb }.gemm();
    let (cfg, src) = ferrotune::tuned::gemm_explain_in(set, &g, dt.dtype(), &b.stream());
    let label = match dt {
        // Exact f32: a config naming the tiles picks an FFMA tile; an automatic one leaves it to
        // the plan (its `path` line says which).
        ferrotune_autotune::GemmDtype::F32 if cfg.path == ferrotune::config::GemmPath::Mma => {
            ferrotune::tuned::ffma_tile_label(cfg.tile).unwrap_or_else(|| "no FFMA tile".into())
        }
        ferrotune_autotune::GemmDtype::F32 => "the plan's FFMA rule".into(),
        _ => ferrotune::tuned::tile_label(cfg.tile).unwrap_or_default(),
    };
    let pack = match cfg.pack {
        ferrotune::config::PackChoice::Auto => "auto",
        ferrotune::config::PackChoice::On => "on",
        ferrotune::config::PackChoice::Off => "off",
    };
    println!(
        "gemm {dtype} {layout} {m}x{n}x{k} batch {batch} on {}: tile {} ({label}), cpu_rows {}, split_k {}, path {}, pack {pack}\n  from: {src}",
        b.name(),
        cfg.tile,
        cfg.cpu_rows,
        cfg.split_k,
        cfg.path.label()
    );
    let mut note = match cfg.path {
        ferrotune::config::GemmPath::SmallM => format!("the small-M family's own K split: {} slices", cfg.split_k),
        ferrotune::config::GemmPath::Sm90(t) if cfg.split_k > 1 => {
            format!("the Hopper kernel's own split of K on tile {t}: {} slices, joined in the kernel", cfg.split_k)
        }
        _ => split_k_note(&g, cfg.split_k, b.name() == "cpu"),
    };
    if cfg.split_k > 1 && cfg.tile != 0 && dt != ferrotune_autotune::GemmDtype::Tf32 && note.contains("slices") {
        note.push_str(&format!(
            "; the partial products run tile 0, not tile {} (16-bit inputs have f32 outputs on tile 0 only)",
            cfg.tile
        ));
    }
    println!("  split-K: {note}");
    match ferrotune::ops::gemm_plan::explain_with(&b.stream(), &g, dt.dtype(), dt.dtype(), cfg)? {
        Some(p) => println!("  family: {}\n  path: {} ({})", p.family_name(), p.path(), p.reason),
        None => println!("  path: the CPU backend (rows per band {})", cfg.cpu_rows),
    }
    if let Some(spec) = devices {
        crate::explain_split::run(spec, dt, (batch, m, n, k))?;
    }
    Ok(())
}

/// What a split-K factor does to this GEMM: the slices it runs, the workspace, or why not.
fn split_k_note(g: &ferrotune::ops::gemm::Gemm, split_k: usize, cpu: bool) -> String {
    let plan = ferrotune::ops::gemm::SplitPlan::new(g.k, split_k);
    if split_k <= 1 {
        "off".into()
    } else if cpu {
        "ignored on the CPU backend (same result up to rounding)".into()
    } else if g.batch > 1 {
        "ignored: batches run unsplit".into()
    } else if !plan.is_split() {
        format!("K = {} is too short to split (slices are multiples of 8 long)", g.k)
    } else {
        let mib =
            plan.workspace_elems_checked(g.m, g.n).map_or(f64::INFINITY, |e| e as f64 * 4.0 / (1u64 << 20) as f64);
        format!(
            "{} slices of K = {} (the last {}), partial products in an f32 workspace of {mib:.1} MiB, then a reduce kernel with the epilogue",
            plan.slices, plan.kc, plan.last_k
        )
    }
}

fn show(path: &Path) -> anyhow::Result<()> {
    let p = Profile::load(path)?;
    println!("{}: {} entries, {} journal records of unfinished runs", path.display(), p.entries.len(), p.journal.len());
    for e in &p.entries {
        let speed = e.default_ms.map_or("-".into(), |d| format!("{:.3}x", d / e.median_ms));
        let rate = e.tflops.map_or(format!("{:.1} GB/s", e.throughput_gbps), |t| format!("{t:.1} TFLOP/s"));
        let cfg: Vec<String> = e.config.iter().map(|(k, v)| format!("{k}={}", param(v))).collect();
        println!(
            "line {:>4}: {:<18} {:<5} {:<10} bucket {:?}  {:.4} ms ({rate}, {speed} vs default)  {}  [{} on {}, {}, {} evals, {}]",
            e.line.unwrap_or(0),
            e.op,
            e.dtype,
            e.layout,
            e.shape,
            e.median_ms,
            cfg.join(" "),
            e.strategy,
            e.device,
            e.build,
            e.evaluations,
            e.date
        );
    }
    Ok(())
}

fn param(p: &ferrotune::profile::Param) -> String {
    match p {
        ferrotune::profile::Param::Bool(b) => b.to_string(),
        ferrotune::profile::Param::Int(i) => i.to_string(),
        ferrotune::profile::Param::Text(t) => t.clone(),
    }
}

fn validate(paths: &[PathBuf], backend: BackendChoice, deny_warnings: bool) -> anyhow::Result<()> {
    let b = Backend::new(backend)?;
    let (device, builds) = ferrotune::tuned::machine(&b.stream())?;
    println!("this machine: {device}, kernel builds: gemm {}, elementwise and clifford per op", builds.of("gemm"));
    let (mut errors, mut warnings) = (0, 0);
    for path in paths {
        let set = ProfileSet::load(path);
        for e in &set.problems {
            eprintln!("error: {e}");
            errors += 1;
        }
        if set.profiles.is_empty() && set.problems.is_empty() {
            eprintln!("error: {}: no profile there", path.display());
            errors += 1;
        }
        for p in &set.profiles {
            let w = p.foreign(&device, &|op| builds.of(op));
            for x in &w {
                eprintln!("warning: {x} (never used on this machine)");
            }
            warnings += w.len();
            let name = p.source.as_ref().map_or(path.clone(), |s| s.clone());
            println!("{}: ok, {} entries ({} usable here)", name.display(), p.entries.len(), p.entries.len() - w.len());
        }
    }
    if errors > 0 || (deny_warnings && warnings > 0) {
        anyhow::bail!("{errors} errors, {warnings} warnings");
    }
    Ok(())
}

fn merge(paths: &[PathBuf], out: &Path) -> anyhow::Result<()> {
    let mut merged = Profile::load_or_empty(out)?;
    for p in paths {
        let r = merged.merge(&Profile::load(p)?);
        println!("{}: {} added, {} replaced, {} kept", p.display(), r.added, r.replaced, r.kept);
    }
    merged.sort_entries();
    merged.save_atomic(out)?;
    println!("wrote {} ({} entries)", out.display(), merged.entries.len());
    Ok(())
}
