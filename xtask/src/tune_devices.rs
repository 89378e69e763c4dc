//! `cargo xtask tune --devices …`: the device-parallel run, with one line per event prefixed
//! by the GPU it came from and the seconds since the run started (several sessions at once do
//! not fit one progress bar; the times show each GPU's start-up, shapes and idle tail).

use ferrotune_autotune::parallel::tune_on_devices;
use ferrotune_autotune::tuner::Event;
use ferrotune_autotune::{Control, EvalOutcome, TuneOptions, TuneReport};

pub fn run(opts: &TuneOptions, devices: &[usize]) -> anyhow::Result<TuneReport> {
    println!(
        "tuning {} shapes on devices {devices:?}, one worker process each, shapes from a shared queue",
        opts.shapes.len()
    );
    let t0 = std::time::Instant::now();
    let report = tune_on_devices(opts, devices, &|d, e| {
        let at = t0.elapsed().as_secs_f64();
        match e {
            Event::Machine(m) => {
                println!("[gpu {d} +{at:.2}s] {} on {} (gemm build {})", m.backend, m.device, m.build_of("gemm"))
            }
            Event::Warning(w) => println!("[gpu {d} +{at:.2}s] warning: {w}"),
            Event::ShapeStart { shape, candidates, planned, pruned } => println!(
                "[gpu {d} +{at:.2}s] {}: {candidates} candidates, {planned} planned, {} pruned",
                shape.label(),
                pruned.len()
            ),
            Event::Candidate { config, role, outcome, reused: false, .. }
                if !matches!(outcome, EvalOutcome::Ok { .. }) =>
            {
                println!("[gpu {d} +{at:.2}s]   {role} {config}: {}", crate::tune::summary(outcome))
            }
            Event::Candidate { .. } => {}
            Event::ShapeDone(r) => println!(
                "[gpu {d} +{at:.2}s] {}: {} ({} evaluations, {} measured now, {} from the journal)",
                r.label, r.stop, r.evaluations, r.measured, r.reused
            ),
        }
        Control::Continue
    })?;
    println!("device-parallel tuning took {:.1} s on {} devices", t0.elapsed().as_secs_f64(), devices.len());
    Ok(report)
}
