//! `cargo xtask bench --ops multi-gpu`: needs two GPUs (says so and exits 0 otherwise);
//! makes NCCL loadable (re-running itself with a loader directory for torch's
//! `libnccl.so.2` when that is what the machine has), runs torch.distributed's all-reduce
//! script, then ours, the peer copies and the data-parallel step; prints a table and
//! writes JSON. The measurements are in `ferrotune_bench::multigpu`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use ferrotune::nccl::{NCCL_PATH_ENV, find_nccl_file, library_path_with, loader_dir, nccl_loadable, require_nccl};
use ferrotune_bench::data_parallel::DpProblem;
use ferrotune_bench::multigpu::{self, MultiGpuOptions, MultiGpuReport};

pub struct MultiGpuArgs {
    pub sizes: Option<Vec<usize>>,
    pub warmup: Option<usize>,
    pub iters: Option<usize>,
    pub json: Option<PathBuf>,
    /// `BxNxK` of the data-parallel step.
    pub dp_shape: Option<[usize; 3]>,
}

/// Re-runs this command with `LD_LIBRARY_PATH` holding a `libnccl.so` link to the
/// `libnccl.so.2` found (`FERROTUNE_NCCL_PATH` or python3's nvidia-nccl wheel), when cudarc
/// cannot load NCCL as things are. Returns `None` when nothing needed doing.
fn reexec_for_nccl() -> anyhow::Result<Option<i32>> {
    if nccl_loadable() || std::env::var_os("FERROTUNE_NCCL_REEXEC").is_some() {
        return Ok(None);
    }
    let Some(lib) = find_nccl_file() else { return Ok(None) };
    let dir = loader_dir(&lib).with_context(|| format!("making a loader directory for {}", lib.display()))?;
    println!("NCCL: using {} (through {}/libnccl.so)", lib.display(), dir.display());
    let status = std::process::Command::new(std::env::current_exe()?)
        .args(std::env::args_os().skip(1))
        .env("LD_LIBRARY_PATH", library_path_with(&dir))
        .env("FERROTUNE_NCCL_REEXEC", "1")
        .env(NCCL_PATH_ENV, &lib)
        .status()?;
    Ok(Some(status.code().unwrap_or(1)))
}

/// torch_allreduce.py: `FERROTUNE_TORCH_ALLREDUCE`, else benches/ in the current directory
/// or in this workspace.
fn torch_script() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FERROTUNE_TORCH_ALLREDUCE") {
        return Some(PathBuf::from(p));
    }
    [PathBuf::from("benches/torch_allreduce.py"), crate::workspace_root().join("benches/torch_allreduce.py")]
        .into_iter()
        .find(|p| p.is_file())
}

fn run_torch(script: &Path, o: &MultiGpuOptions, gpus: usize) -> Result<Vec<(usize, f64)>, String> {
    let out = std::env::temp_dir().join(format!("ferrotune-torch-allreduce-{}.json", std::process::id()));
    let sizes: Vec<String> = o.sizes.iter().map(|s| s.to_string()).collect();
    let status = std::process::Command::new("python3")
        .arg(script)
        .args(["--sizes", &sizes.join(","), "--iters", &o.iters.to_string(), "--warmup", &o.warmup.to_string()])
        .args(["--gpus", &gpus.to_string(), "--json"])
        .arg(&out)
        .env("NCCL_NVLS_ENABLE", "0")
        .status()
        .map_err(|e| format!("starting python3: {e}"))?;
    if !status.success() {
        return Err(format!("{} exited with {status}", script.display()));
    }
    let text = std::fs::read_to_string(&out).map_err(|e| format!("reading {}: {e}", out.display()))?;
    let _ = std::fs::remove_file(&out);
    multigpu::parse_torch(&text)
}

pub fn run(a: MultiGpuArgs) -> anyhow::Result<()> {
    // NVLink multicast stays off (the lent machines require it) unless the caller chose.
    if std::env::var_os("NCCL_NVLS_ENABLE").is_none() {
        // SAFETY: no other thread of this process exists yet (no driver call has been made), and NCCL is not loaded.
        unsafe { std::env::set_var("NCCL_NVLS_ENABLE", "0") };
    }
    let n = ferrotune::device_count().unwrap_or(0);
    if n < 2 {
        println!("multi-gpu bench: skipped: needs 2 CUDA devices, this machine has {n}");
        return Ok(());
    }
    if let Some(code) = reexec_for_nccl()? {
        std::process::exit(code);
    }
    require_nccl()?;
    let [b, nn, k] = a.dp_shape.unwrap_or([16384, 8192, 8192]);
    let mut o = MultiGpuOptions {
        copy_bytes: 256 << 20,
        sizes: a.sizes.unwrap_or_else(multigpu::default_sizes),
        warmup: a.warmup.unwrap_or(5),
        iters: a.iters.unwrap_or(20),
        dp: DpProblem { batch: b, n: nn, k },
        timeout: Duration::from_secs(60),
        torch: None,
    };
    let mut report = MultiGpuReport { schema: "ferrotune-multigpu-1".into(), ..MultiGpuReport::default() };
    report.torch_note = match torch_script() {
        None => "benches/torch_allreduce.py not found".into(),
        Some(script) => match run_torch(&script, &o, n) {
            Ok(rows) => {
                o.torch = Some(rows);
                format!("torch.distributed NCCL all-reduce, {n} processes ({})", script.display())
            }
            Err(e) => format!("torch all-reduce failed: {e}"),
        },
    };
    println!("{}", report.torch_note);
    let set = ferrotune::DeviceSet::all()?;
    report.devices =
        set.backends().iter().filter_map(|b| b.device()).map(|d| format!("{} ({})", d.name, d.arch())).collect();
    report.driver = set.backends()[0]
        .device()
        .map(|d| format!("{}.{}", d.driver_version / 1000, d.driver_version % 1000 / 10))
        .unwrap_or_default();
    report.nccl = ferrotune::nccl::nccl_version().unwrap_or_else(|e| e.to_string());
    report.date = ferrotune_profile::utc_now();
    report.commit = crate::bench::commit();
    let t = set.topology();
    for (i, row) in t.links.iter().enumerate() {
        for (j, l) in row.iter().enumerate() {
            if let Some(l) = l {
                report.topology.push(format!(
                    "{} -> {}: {} (rank {})",
                    t.ordinals[i],
                    t.ordinals[j],
                    l.kind(),
                    l.performance_rank
                ));
            }
        }
    }
    report.topology.iter().for_each(|l| println!("{l}"));
    report.copies = multigpu::copies(&set, o.copy_bytes, o.iters.min(10))?;
    println!("\n{:<10} {:>8} {:>12} {:>10}", "copy", "path", "ms", "GB/s");
    for c in &report.copies {
        println!("{:<10} {:>8} {:>12.3} {:>10.1}", format!("{} -> {}", c.from, c.to), c.path, c.median_ms, c.gbps);
    }
    report.all_reduce = multigpu::all_reduce(&set, &o)?;
    println!(
        "\n{:>12} {:>12} {:>12} {:>12} {:>12} {:>7}",
        "all-reduce", "ours ms", "ours busbw", "torch ms", "torch busbw", "ratio"
    );
    for r in &report.all_reduce {
        let opt = |v: Option<f64>, p: usize| v.map_or("-".into(), |v| format!("{v:.p$}"));
        println!(
            "{:>12} {:>12.4} {:>12.2} {:>12} {:>12} {:>7}",
            r.bytes,
            r.ours_ms,
            r.ours_busbw,
            opt(r.torch_ms, 4),
            opt(r.torch_busbw, 2),
            opt(r.ratio, 3)
        );
    }
    report.data_parallel = multigpu::data_parallel(&set, &o)?;
    println!("\ndata-parallel step {b}x{nn}x{k} (bf16 in, f32 out; forward + dW + dx, dW all-reduced during dx)");
    for r in &report.data_parallel {
        println!(
            "  {} GPU(s): {:.3} ms, scaling {:.2}x (dW diff {:.1e}, dx diff {:.1e}, dW vs f64 {:.1e})",
            r.gpus, r.step_ms, r.scaling, r.dw_difference, r.dx_difference, r.dw_reference_error
        );
    }
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
