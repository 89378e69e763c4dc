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
        #[arg(long, default_value = "f32")]
        dtype: String,
        #[arg(long)]
        n: usize,
        /// A profile file or directory (default: FERROTUNE_PROFILE or the default locations).
        #[arg(long)]
        profile: Option<PathBuf>,
        #[arg(long, default_value = "auto")]
        backend: BackendChoice,
    },
}

pub fn run(cmd: Cmd) -> anyhow::Result<()> {
    match cmd {
        Cmd::Show { path } => show(&path),
        Cmd::Validate { paths, backend, deny_warnings } => validate(&paths, backend, deny_warnings),
        Cmd::Merge { paths, out } => merge(&paths, &out),
        Cmd::Explain { op, dtype, n, profile, backend } => {
            let op = ElemOp::from_name(&op).with_context(|| format!("unknown op '{op}'"))?;
            let dtype = DType::ALL
                .into_iter()
                .find(|d| d.name() == dtype)
                .with_context(|| format!("unknown dtype '{dtype}'"))?;
            let b = Backend::new(backend)?;
            let paths = profile.map_or_else(ferrotune::tuned::default_profile_paths, |p| vec![p]);
            let set = ferrotune::tuned::load_profiles(&paths);
            for p in &set.problems {
                eprintln!("warning: not used: {p}");
            }
            let (cfg, src) = ferrotune::tuned::explain_in(&set, op, dtype, n, &b.stream());
            println!("{} {} n={n} on {}: {cfg:?}\n  from: {src}", op.name(), dtype.name(), b.name());
            Ok(())
        }
    }
}

fn show(path: &Path) -> anyhow::Result<()> {
    let p = Profile::load(path)?;
    println!("{}: {} entries, {} journal records of unfinished runs", path.display(), p.entries.len(), p.journal.len());
    for e in &p.entries {
        let speed = e.default_ms.map_or("-".into(), |d| format!("{:.3}x", d / e.median_ms));
        let cfg: Vec<String> = e.config.iter().map(|(k, v)| format!("{k}={}", param(v))).collect();
        println!(
            "line {:>4}: {:<18} {:<5} {:<10} bucket {:?}  {:.4} ms ({:.1} GB/s, {speed} vs default)  {}  [{} on {}, {}, {} evals, {}]",
            e.line.unwrap_or(0),
            e.op,
            e.dtype,
            e.layout,
            e.shape,
            e.median_ms,
            e.throughput_gbps,
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
    let (device, build) = ferrotune::tuned::fingerprint(&b.stream())?;
    println!("this machine: {device}, kernel build {build}");
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
            let w = p.foreign(&device, &build);
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
    merged.save_atomic(out)?;
    println!("wrote {} ({} entries)", out.display(), merged.entries.len());
    Ok(())
}
