//! `cargo xtask bench --ops runtime`: the runtime's quick-start optimisations beside their
//! baselines (pinned vs pageable, pool vs preallocated vs the driver, graphs vs eager, overlap
//! vs serial, stream priority), the pool's statistics, a table and JSON. The work is in
//! `ferrotune_bench::runtime`.

use ferrotune::BackendChoice;
use ferrotune_bench::runtime::{RuntimeOptions, run};

pub fn run_cmd(backend: BackendChoice, iters: Option<usize>, json: Option<std::path::PathBuf>) -> anyhow::Result<()> {
    let backend = crate::bench::open_backend(backend)?;
    let mut opts = RuntimeOptions::default_for(&backend);
    if let Some(i) = iters {
        opts.samples = i.max(1);
    }
    let mut report = run(&backend, &opts, |line| println!("{line}"))?;
    report.date = ferrotune_profile::utc_now();
    report.commit = crate::bench::commit();
    println!("\n{}", report.render_table());
    if let Some(p) = &json {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)?;
        println!("wrote {}", p.display());
    }
    let wrong: Vec<_> = report.rows.iter().filter(|r| !r.correct).map(|r| r.name.clone()).collect();
    anyhow::ensure!(wrong.is_empty(), "rows that did not match their reference: {wrong:?}");
    Ok(())
}
