//! The runtime bench (`cargo xtask bench --ops runtime`): the quick-start optimisations, each
//! beside its baseline in the same run: pinned vs pageable copies, the caching pool vs
//! preallocated buffers vs the driver's allocators, graph replay vs eager launches, copy and
//! compute overlap vs serial, and stream priority under load. Every result is checked before
//! it is timed; the pool's statistics close the report. Torch's numbers come from
//! `benches/torch_runtime.py` run in the same device call.

use std::time::Instant;

use ferrotune::overlap::Pipeline;
use ferrotune::pool::baseline::{DriverAlloc, DriverBuffer, set_default_pool_release_threshold};
use ferrotune::{Backend, Buffer, Error, PoolStats, Pooled, StagingPool, Stream, ops};
use ferrotune_autotune::measure::Stats;
use ferrotune_testkit::Rng;
use serde::{Deserialize, Serialize};

use crate::error::Result;

/// Version of the JSON layout (docs/bench-json.md, "Runtime bench").
pub const SCHEMA: &str = "ferrotune-runtime-bench/1";

/// What to run.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    /// MiB per transfer.
    pub copy_mib: usize,
    /// Elements per scratch buffer of the allocation loop.
    pub alloc_elems: usize,
    /// MiB of input of the overlap pipeline.
    pub overlap_mib: usize,
    /// Timed samples per row (median reported).
    pub samples: usize,
}

impl RuntimeOptions {
    pub fn default_for(backend: &Backend) -> RuntimeOptions {
        let cuda = matches!(backend, Backend::Cuda(_));
        RuntimeOptions { copy_mib: 256, alloc_elems: 1 << 18, overlap_mib: if cuda { 256 } else { 16 }, samples: 15 }
    }
}

/// One measured row and its baseline of the same run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RuntimeRow {
    pub group: String,
    pub name: String,
    pub value: f64,
    pub unit: String,
    pub baseline: Option<String>,
    pub baseline_value: Option<f64>,
    /// `value / baseline_value` (for times, < 1 is faster; for bandwidths, > 1 is faster).
    pub ratio: Option<f64>,
    pub correct: bool,
    pub note: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RuntimeReport {
    pub schema: String,
    pub backend: String,
    pub device: String,
    pub driver: i32,
    pub date: String,
    pub commit: String,
    pub rows: Vec<RuntimeRow>,
    /// Rows this backend cannot run, with why.
    pub skipped: Vec<(String, String)>,
    /// The pool's statistics at the end, as printed.
    pub pool_stats: String,
    /// Driver allocations of the pool during the timed allocation loop (0 = steady state).
    pub steady_state_driver_allocs: Option<u64>,
}

fn row(
    group: &str,
    name: &str,
    value: f64,
    unit: &str,
    base: Option<(&str, f64)>,
    correct: bool,
    note: String,
) -> RuntimeRow {
    RuntimeRow {
        group: group.into(),
        name: name.into(),
        value,
        unit: unit.into(),
        baseline: base.map(|b| b.0.to_string()),
        baseline_value: base.map(|b| b.1),
        ratio: base.map(|b| value / b.1),
        correct,
        note,
    }
}

/// Median wall milliseconds of `work` (each sample ends with the work complete).
fn wall(samples: usize, warmup: usize, mut work: impl FnMut() -> Result<()>) -> Result<Stats> {
    for _ in 0..warmup {
        work()?;
    }
    let mut v = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        work()?;
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(Stats::from_samples(&v).expect("finite samples"))
}

fn gbps(bytes: usize, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e-3) / 1e9
}

/// Runs every row the backend supports.
pub fn run(backend: &Backend, opts: &RuntimeOptions, mut progress: impl FnMut(&str)) -> Result<RuntimeReport> {
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let (device, driver) = match backend.device() {
        Some(d) => (format!("{} ({})", d.name, d.arch()), d.driver_version),
        None => ("cpu".to_string(), 0),
    };
    let mut steady = None;
    match backend {
        Backend::Cuda(g) => {
            let s = backend.new_stream()?;
            // A group that fails is reported (and the run goes on to the next one).
            let mut group = |name: &str, r: Result<()>, skipped: &mut Vec<(String, String)>| match r {
                Ok(()) => progress(&format!("{name} done")),
                Err(e) => {
                    progress(&format!("{name} FAILED: {e}"));
                    skipped.push((name.to_string(), format!("error: {e}")));
                }
            };
            group("transfers", transfers(&s, opts, &mut rows), &mut skipped);
            let r = alloc_loop(backend, &s, opts, &mut rows).map(|n| steady = Some(n));
            group("allocation loop", r, &mut skipped);
            for k in [6, 50] {
                group(&format!("graphs of {k}"), graphs(&s, k, opts, &mut rows), &mut skipped);
            }
            group("overlap", overlap(backend, opts, &mut rows), &mut skipped);
            group("priority", priority(backend, opts, &mut rows), &mut skipped);
            let st = g.pool().stats();
            progress(&format!("pool: {st}"));
            return Ok(report(backend, device, driver, rows, skipped, st.to_string(), steady));
        }
        Backend::Cpu(_) => {
            let s = backend.stream();
            cpu_alloc_loop(&s, opts, &mut rows)?;
            for (what, why) in [
                ("transfers", "host and device are the same memory on the CPU backend: nothing to pin or copy"),
                ("graphs", "CPU ops run synchronously as calls; there is no launch to capture or replay"),
                ("overlap", "no copy engine: the CPU backend has no copies to overlap with compute"),
                ("priority", "the CPU backend has one rayon pool and no stream priorities"),
            ] {
                skipped.push((what.to_string(), why.to_string()));
            }
        }
    }
    Ok(report(backend, device, driver, rows, skipped, "no device pool on the CPU backend".into(), steady))
}

fn report(
    backend: &Backend,
    device: String,
    driver: i32,
    rows: Vec<RuntimeRow>,
    skipped: Vec<(String, String)>,
    pool_stats: String,
    steady_state_driver_allocs: Option<u64>,
) -> RuntimeReport {
    RuntimeReport {
        schema: SCHEMA.into(),
        backend: backend.name().into(),
        device,
        driver,
        date: String::new(),
        commit: String::new(),
        rows,
        skipped,
        pool_stats,
        steady_state_driver_allocs,
    }
}

/// Pinned vs pageable host-to-device and device-to-host bandwidth.
fn transfers(s: &Stream, opts: &RuntimeOptions, rows: &mut Vec<RuntimeRow>) -> Result<()> {
    let n = opts.copy_mib << 18;
    let bytes = n * 4;
    let data = Rng::new(11).vec::<f32>(n, -1.0, 1.0);
    let mut dev = Buffer::<f32>::zeros(s, n)?;
    let mut pinned = ferrotune::PinnedBuffer::<f32>::zeros(s, n)?;
    pinned.as_mut_slice()?.copy_from_slice(&data);
    let mut host = vec![0.0f32; n];
    let cs = s.cuda_stream().expect("CUDA stream").clone();
    let Buffer::Cuda(d) = &mut dev else { unreachable!("CUDA buffer") };
    let pageable_h2d = wall(opts.samples, 2, || {
        cs.memcpy_htod(&data, &mut **d).map_err(|e| Error::Driver { context: "pageable H2D".into(), source: e })?;
        Ok(s.synchronize()?)
    })?;
    let ok_h2d = dev.to_vec(s)? == data;
    let pinned_h2d = wall(opts.samples, 2, || {
        pinned.copy_to_device_async(s, &mut dev.all_mut())?;
        Ok(s.synchronize()?)
    })?;
    let ok_h2d = ok_h2d && dev.to_vec(s)? == data;
    let Buffer::Cuda(d) = &dev else { unreachable!("CUDA buffer") };
    let pageable_d2h = wall(opts.samples, 2, || {
        cs.memcpy_dtoh(&**d, &mut host).map_err(|e| Error::Driver { context: "pageable D2H".into(), source: e })?;
        Ok(s.synchronize()?)
    })?;
    let ok_d2h = host == data;
    pinned.as_mut_slice()?.fill(0.0);
    let pinned_d2h = wall(opts.samples, 2, || {
        pinned.copy_from_device_async(s, &dev.all())?;
        Ok(s.synchronize()?)
    })?;
    let ok_d2h = ok_d2h && pinned.as_slice()? == data.as_slice();
    let note = format!("{} MiB, wall time with synchronize, median of {}", opts.copy_mib, opts.samples);
    let (ph, gh) = (gbps(bytes, pinned_h2d.median_ms), gbps(bytes, pageable_h2d.median_ms));
    let (pd, gd) = (gbps(bytes, pinned_d2h.median_ms), gbps(bytes, pageable_d2h.median_ms));
    rows.push(row("transfer", "H2D pageable", gh, "GB/s", None, ok_h2d, note.clone()));
    rows.push(row("transfer", "H2D pinned", ph, "GB/s", Some(("H2D pageable", gh)), ok_h2d, note.clone()));
    rows.push(row("transfer", "D2H pageable", gd, "GB/s", None, ok_d2h, note.clone()));
    rows.push(row("transfer", "D2H pinned", pd, "GB/s", Some(("D2H pageable", gd)), ok_d2h, note));
    Ok(())
}

/// A loop step: two scratch buffers from `alloc`, `dst = 3 src` through them.
fn step(
    s: &Stream,
    src: &Buffer<f32>,
    dst: &mut Buffer<f32>,
    x: &mut ferrotune::ViewMut<'_, f32>,
    y: &mut ferrotune::ViewMut<'_, f32>,
) -> Result<()> {
    ops::scale(s, 2.0, &src.all(), x)?;
    let xv = as_view(x);
    ops::add(s, &xv, &src.all(), y)?;
    ops::copy(s, &as_view(y), &mut dst.all_mut())?;
    Ok(())
}

fn as_view<'a>(v: &'a ferrotune::ViewMut<'_, f32>) -> ferrotune::View<'a, f32> {
    match v {
        ferrotune::ViewMut::Cuda(c) => ferrotune::View::Cuda(c.as_view()),
        ferrotune::ViewMut::Cpu(c) => ferrotune::View::Cpu(c),
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Strategy {
    Prealloc,
    Pool,
    DriverSync,
    AsyncThreshold0,
    AsyncRetained,
}

/// Preallocated vs allocate-per-iteration through the pool vs through the driver.
fn alloc_loop(backend: &Backend, s: &Stream, opts: &RuntimeOptions, rows: &mut Vec<RuntimeRow>) -> Result<u64> {
    let Backend::Cuda(g) = backend else { unreachable!("CUDA only") };
    let n = opts.alloc_elems;
    let data = Rng::new(5).vec::<f32>(n, -1.0, 1.0);
    let want: Vec<f32> = data.iter().map(|v| 2.0 * v + v).collect();
    let src = Buffer::from_slice(s, &data)?;
    let mut dst = Buffer::<f32>::zeros(s, n)?;
    let cs = s.cuda_stream().expect("CUDA stream").clone();
    let inner = 50;
    let mut pre = (Buffer::<f32>::zeros(s, n)?, Buffer::<f32>::zeros(s, n)?);
    let mut one = |how: Strategy, dst: &mut Buffer<f32>| -> Result<()> {
        match how {
            Strategy::Prealloc => step(s, &src, dst, &mut pre.0.all_mut(), &mut pre.1.all_mut())?,
            Strategy::Pool => {
                let mut x = Buffer::Cuda(Pooled::<f32>::uninit(g.pool(), &cs, n)?);
                let mut y = Buffer::Cuda(Pooled::<f32>::uninit(g.pool(), &cs, n)?);
                step(s, &src, dst, &mut x.all_mut(), &mut y.all_mut())?;
            }
            Strategy::DriverSync | Strategy::AsyncThreshold0 | Strategy::AsyncRetained => {
                let d = if how == Strategy::DriverSync { DriverAlloc::Sync } else { DriverAlloc::Async };
                let mut x = DriverBuffer::<f32>::new(s, d, n)?;
                let mut y = DriverBuffer::<f32>::new(s, d, n)?;
                step(s, &src, dst, &mut x.view_mut(), &mut y.view_mut())?;
            }
        }
        // A step that reads its result (a loss, a flag) waits for the device.
        Ok(s.synchronize()?)
    };
    let mut times = Vec::new();
    let mut steady = 0;
    for how in
        [Strategy::Prealloc, Strategy::Pool, Strategy::DriverSync, Strategy::AsyncThreshold0, Strategy::AsyncRetained]
    {
        match how {
            Strategy::AsyncThreshold0 => set_default_pool_release_threshold(s, 0)?,
            Strategy::AsyncRetained => set_default_pool_release_threshold(s, u64::MAX)?,
            _ => {}
        }
        dst.copy_from(s, &vec![f32::NAN; n])?;
        one(how, &mut dst)?;
        let ok = dst.to_vec(s)? == want;
        let before = g.pool().stats();
        let st = wall(opts.samples, 1, || {
            for _ in 0..inner {
                one(how, &mut dst)?;
            }
            Ok(())
        })?;
        if how == Strategy::Pool {
            steady = g.pool().stats().driver_allocs - before.driver_allocs;
        }
        times.push((how, st.median_ms * 1e3 / inner as f64, ok));
    }
    set_default_pool_release_threshold(s, 0)?;
    let pre_us = times[0].1;
    let names = [
        "preallocated",
        "alloc per iteration: ferrotune pool",
        "alloc per iteration: cuMemAlloc/cuMemFree (no pool)",
        "alloc per iteration: cuMemAllocAsync, release threshold 0 (driver default)",
        "alloc per iteration: cuMemAllocAsync, release threshold max",
    ];
    for (i, (how, us, ok)) in times.into_iter().enumerate() {
        let note = format!(
            "2 scratch buffers of {} KiB + 3 launches + synchronize per iteration{}",
            n * 4 / 1024,
            if how == Strategy::Pool { format!("; {steady} driver allocations while timed") } else { String::new() }
        );
        let base = (i > 0).then_some(("preallocated", pre_us));
        rows.push(row("alloc loop", names[i], us, "us/iter", base, ok, note));
    }
    Ok(steady)
}

/// The same loop on the CPU backend: buffers per iteration through the host cache, and with
/// the cache off (a fresh `Vec`), vs preallocated.
fn cpu_alloc_loop(s: &Stream, opts: &RuntimeOptions, rows: &mut Vec<RuntimeRow>) -> Result<()> {
    let n = opts.alloc_elems;
    let data = Rng::new(5).vec::<f32>(n, -1.0, 1.0);
    let want: Vec<f32> = data.iter().map(|v| 2.0 * v + v).collect();
    let src = Buffer::from_slice(s, &data)?;
    let dst = std::cell::RefCell::new(Buffer::<f32>::zeros(s, n)?);
    let mut pre = (Buffer::<f32>::zeros(s, n)?, Buffer::<f32>::zeros(s, n)?);
    let inner = 20;
    let pre_t = wall(opts.samples, 1, || {
        for _ in 0..inner {
            step(s, &src, &mut dst.borrow_mut(), &mut pre.0.all_mut(), &mut pre.1.all_mut())?;
        }
        Ok(())
    })?;
    let ok_pre = dst.borrow().to_vec(s)? == want;
    let fresh = |cached: bool| {
        ferrotune::pool::host::set_limit(if cached { 1 << 30 } else { 0 });
        wall(opts.samples, 1, || {
            for _ in 0..inner {
                let (mut x, mut y) = (Buffer::<f32>::zeros(s, n)?, Buffer::<f32>::zeros(s, n)?);
                step(s, &src, &mut dst.borrow_mut(), &mut x.all_mut(), &mut y.all_mut())?;
            }
            Ok(())
        })
    };
    let uncached_t = fresh(false)?;
    let ok_uncached = dst.borrow().to_vec(s)? == want;
    let fresh_t = fresh(true)?;
    let ok = ok_uncached && dst.borrow().to_vec(s)? == want;
    let pre_us = pre_t.median_ms * 1e3 / inner as f64;
    let note = format!(
        "2 scratch buffers of {} KiB + 3 ops per iteration; host cache: {:?}",
        n * 4 / 1024,
        ferrotune::pool::host::stats()
    );
    rows.push(row("alloc loop", "preallocated", pre_us, "us/iter", None, ok_pre, note.clone()));
    for (name, t) in
        [("alloc per iteration: host cache", &fresh_t), ("alloc per iteration: fresh Vec (cache off)", &uncached_t)]
    {
        let us = t.median_ms * 1e3 / inner as f64;
        rows.push(row("alloc loop", name, us, "us/iter", Some(("preallocated", pre_us)), ok, note.clone()));
    }
    Ok(())
}

/// Graph replay vs eager launches of a chain of `k` small kernels.
fn graphs(s: &Stream, k: usize, opts: &RuntimeOptions, rows: &mut Vec<RuntimeRow>) -> Result<()> {
    let n = 1024;
    let data = Rng::new(k as u64).vec::<f32>(n, -1.0, 1.0);
    let src = Buffer::from_slice(s, &data)?;
    let mut a = Buffer::<f32>::zeros(s, n)?;
    let mut b = Buffer::<f32>::zeros(s, n)?;
    let chain = |s: &Stream, a: &mut Buffer<f32>, b: &mut Buffer<f32>| -> ferrotune::Result<()> {
        ops::copy(s, &src.all(), &mut a.all_mut())?;
        for i in 1..k {
            let alpha = if i % 2 == 0 { 0.5 } else { 3.0 };
            if i % 2 == 1 {
                ops::scale(s, alpha, &a.all(), &mut b.all_mut())?;
            } else {
                ops::scale(s, alpha, &b.all(), &mut a.all_mut())?;
            }
        }
        Ok(())
    };
    chain(s, &mut a, &mut b)?;
    let eager = (a.to_vec(s)?, b.to_vec(s)?);
    a.copy_from(s, &vec![f32::NAN; n])?;
    b.copy_from(s, &vec![f32::NAN; n])?;
    let g = s.capture(|c| chain(c, &mut a, &mut b))?;
    g.replay(s)?;
    let replayed = (a.to_vec(s)?, b.to_vec(s)?);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let ok = bits(&eager.0) == bits(&replayed.0) && bits(&eager.1) == bits(&replayed.1) && g.kernels() == k;
    let reps = 200;
    let eager_t = wall(opts.samples, 2, || {
        for _ in 0..reps {
            chain(s, &mut a, &mut b)?;
        }
        Ok(s.synchronize()?)
    })?;
    let graph_t = wall(opts.samples, 2, || {
        for _ in 0..reps {
            g.replay(s)?;
        }
        Ok(s.synchronize()?)
    })?;
    let per = |st: &Stats| st.median_ms * 1e3 / (reps * k) as f64;
    let note =
        format!("{k} kernels on {n} f32, {reps} chains back to back then synchronize; replay bit-identical: {ok}");
    let eager_name = format!("eager chain of {k}");
    rows.push(row("graph", &eager_name, per(&eager_t), "us/kernel", None, ok, note.clone()));
    rows.push(row(
        "graph",
        &format!("graph replay chain of {k}"),
        per(&graph_t),
        "us/kernel",
        Some((&eager_name, per(&eager_t))),
        ok,
        note,
    ));
    Ok(())
}

/// Chunked copy/compute overlap over three streams vs copy-compute-copy on one.
fn overlap(backend: &Backend, opts: &RuntimeOptions, rows: &mut Vec<RuntimeRow>) -> Result<()> {
    let n = opts.overlap_mib << 18;
    let s1 = backend.new_stream()?;
    let staging = StagingPool::<f32>::new();
    let mut input = staging.take(&s1, n)?;
    let data = Rng::new(21).vec::<f32>(n, -1.0, 1.0);
    input.as_mut_slice()?.copy_from_slice(&data);
    let mut output = staging.take(&s1, n)?;
    // Compute that takes about as long as the copies: repeats of one scale over the data.
    let mut serial = Pipeline::<f32>::new(vec![s1.clone()], n)?;
    let copy_only = wall(3, 1, || Ok(serial.run(&input, &mut output, ops::copy)?))?;
    let (x, mut y) = (Buffer::<f32>::zeros(&s1, n)?, Buffer::<f32>::zeros(&s1, n)?);
    let one_op = wall(5, 1, || {
        ops::scale(&s1, 2.0, &x.all(), &mut y.all_mut())?;
        Ok(s1.synchronize()?)
    })?;
    drop((x, y));
    let repeats = ((copy_only.median_ms - one_op.median_ms) / one_op.median_ms).round().clamp(1.0, 500.0) as usize;
    let compute = |s: &Stream, x: &ferrotune::View<'_, f32>, y: &mut ferrotune::ViewMut<'_, f32>| {
        for _ in 0..repeats {
            ops::scale(s, 2.0, x, y)?;
        }
        Ok(())
    };
    let want: Vec<f32> = data.iter().map(|v| 2.0 * v).collect();
    serial.run(&input, &mut output, compute)?;
    let ok_serial = output.as_slice()? == want.as_slice();
    let serial_t = wall(opts.samples.min(7), 1, || Ok(serial.run(&input, &mut output, compute)?))?;
    drop(serial);
    let streams = vec![s1.clone(), backend.new_stream()?, backend.new_stream()?];
    let mut piped = Pipeline::<f32>::new(streams, n / 16)?;
    output.as_mut_slice()?.fill(f32::NAN);
    piped.run(&input, &mut output, compute)?;
    let ok = ok_serial && output.as_slice()? == want.as_slice();
    let piped_t = wall(opts.samples.min(7), 1, || Ok(piped.run(&input, &mut output, compute)?))?;
    let note = format!(
        "{} MiB f32 pinned in and out; compute = {repeats} scale launches (copy alone {:.2} ms, one scale {:.3} ms); 16 chunks over 3 streams",
        opts.overlap_mib, copy_only.median_ms, one_op.median_ms
    );
    rows.push(row("overlap", "serial H2D, compute, D2H (1 stream)", serial_t.median_ms, "ms", None, ok, note.clone()));
    rows.push(row(
        "overlap",
        "chunked pipeline (3 streams)",
        piped_t.median_ms,
        "ms",
        Some(("serial", serial_t.median_ms)),
        ok,
        note,
    ));
    Ok(())
}

/// A small kernel's latency on a high-priority stream while a big one runs, vs the same
/// priority.
fn priority(backend: &Backend, opts: &RuntimeOptions, rows: &mut Vec<RuntimeRow>) -> Result<()> {
    let (low, high) = backend.stream_priority_range()?;
    let busy = backend.stream_with_priority(low)?;
    let n = 64 << 20;
    let (bx, mut by) = (Buffer::<f32>::zeros(&busy, n)?, Buffer::<f32>::zeros(&busy, n)?);
    let mut measure = |prio: i32| -> Result<(f64, bool)> {
        let s = backend.stream_with_priority(prio)?;
        let x = Buffer::from_slice(&s, &[1.0f32; 1024])?;
        let mut y = Buffer::<f32>::zeros(&s, 1024)?;
        let mut lat = Vec::new();
        for _ in 0..opts.samples.min(10) {
            for _ in 0..30 {
                ops::scale(&busy, 2.0, &bx.all(), &mut by.all_mut())?;
            }
            std::thread::sleep(std::time::Duration::from_micros(500));
            let t = ferrotune::EventTimer::start(&s)?;
            ops::scale(&s, 2.0, &x.all(), &mut y.all_mut())?;
            lat.push(t.stop(&s)? * 1e3);
            busy.synchronize()?;
        }
        let ok = y.to_vec(&s)? == [2.0f32; 1024];
        Ok((Stats::from_samples(&lat).expect("finite").median_ms, ok))
    };
    let (same, ok1) = measure(low)?;
    let (fast, ok2) = measure(high)?;
    let note = format!("1024-element scale while 30 scales of 64M f32 run at priority {low}; event time, median");
    rows.push(row("priority", &format!("small kernel, same priority ({low})"), same, "us", None, ok1, note.clone()));
    rows.push(row(
        "priority",
        &format!("small kernel, high priority ({high})"),
        fast,
        "us",
        Some(("same priority", same)),
        ok1 && ok2,
        note,
    ));
    Ok(())
}

impl RuntimeReport {
    /// The table printed by `xtask bench --ops runtime`.
    pub fn render_table(&self) -> String {
        let mut out = format!("runtime bench on {} (driver {})\n", self.device, self.driver);
        out += &format!("{:<12} {:<72} {:>12} {:<10} {:>8}  ok\n", "group", "row", "value", "unit", "ratio");
        for r in &self.rows {
            out += &format!(
                "{:<12} {:<72} {:>12.3} {:<10} {:>8}  {}\n",
                r.group,
                r.name,
                r.value,
                r.unit,
                r.ratio.map_or(String::new(), |x| format!("{x:.3}")),
                if r.correct { "yes" } else { "NO" }
            );
        }
        for (what, why) in &self.skipped {
            out += &format!("skipped {what}: {why}\n");
        }
        out += &format!("pool: {}\n", self.pool_stats);
        out
    }
}

/// Keeps `PoolStats` in this crate's public surface for the xtask printer.
pub type Pool = PoolStats;
