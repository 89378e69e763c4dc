//! The tuning loop: for each shape, build the pruned space, walk it in the strategy's order
//! within the budget, measure every candidate in the worker (verified before it may win),
//! confirm the winner against the built-in config, and write the profile. Every measurement
//! is journalled in the profile (written atomically) as it happens, so a run killed at any
//! point resumes without measuring anything twice or losing anything measured.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ferrotune_profile::{Entry, JournalRecord, JournalSlot, Key, Outcome, Profile, ProfileError, Ranked, bucket_shape};
use serde::{Deserialize, Serialize};

use crate::confirm;
use crate::family::{self, to_params};
use crate::measure::{Repeat, Stats};
use crate::process::{ProcessEvaluator, Timeouts, WorkerCommand};
use crate::protocol::{ConfigJson, Description, EvalOutcome, Shape};
use crate::space::Pruned;
use crate::strategy::{self, Budget, Progress, Strategy};

/// Everything a tuning run needs.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    pub shapes: Vec<Shape>,
    pub strategy: Strategy,
    pub budget: Budget,
    /// The profile file: read first (entries kept, journal resumed), rewritten atomically.
    pub profile: PathBuf,
    /// `auto`, `cuda` or `cpu`.
    pub backend: String,
    pub worker: WorkerCommand,
    pub timeouts: Timeouts,
    /// Repetitions of each candidate during the search, and of the final comparison of the
    /// winner with the built-in config.
    pub search_repeat: Repeat,
    pub confirm_repeat: Repeat,
    /// Seeds the random strategy and the inputs.
    pub seed: u64,
    /// Tune shapes whose bucket already has an entry for this device and build.
    pub retune: bool,
    /// With the exhaustive strategy: also replay the model-guided strategy with this budget
    /// over the exhaustive measurements, to report how close it gets and how fast.
    pub compare_model: Option<usize>,
    /// The least relative gain a challenger needs over the built-in config in the final
    /// comparison ([`confirm::DEFAULT_MIN_GAIN`] unless set).
    pub min_gain: f64,
    /// Where `cargo xtask ptx` wrote `*.resources.json` (register counts for pruning).
    pub resources_dir: Option<PathBuf>,
}

/// Why a tuning run stopped early.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error("worker: {0}")]
    Worker(String),
    #[error("interrupted; the profile's journal keeps every measurement made so far")]
    Interrupted,
}

/// What an observer is told.
#[derive(Debug)]
pub enum Event<'a> {
    Machine(&'a Description),
    /// A profile entry or journal record for another device or kernel build.
    Warning(String),
    ShapeStart {
        shape: &'a Shape,
        candidates: usize,
        planned: usize,
        pruned: &'a [Pruned],
    },
    Candidate {
        shape: &'a Shape,
        config: &'a ConfigJson,
        role: &'a str,
        outcome: &'a EvalOutcome,
        reused: bool,
        counts: &'a Counts,
    },
    ShapeDone(&'a ShapeReport),
}

/// Running totals of a shape's search.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub done: usize,
    pub planned: usize,
    pub pruned: usize,
    pub failed: usize,
    pub invalid: usize,
    pub reused: usize,
    pub best_ms: Option<f64>,
}

/// What the observer wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    Continue,
    /// Stop now, as if killed (the journal keeps what was measured).
    Stop,
}

/// How the model-guided strategy would have done on the exhaustive measurements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelCompare {
    pub budget: usize,
    pub exhaustive_evals: usize,
    pub exhaustive_best_ms: f64,
    pub model_best_ms: f64,
    /// Evaluations the model needed to reach its best.
    pub model_evals_to_best: usize,
    /// `model_best / exhaustive_best - 1`.
    pub gap: f64,
}

/// One measured search candidate: what the model predicted and what it got.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateReport {
    pub config: ConfigJson,
    pub predicted_ms: f64,
    /// `ok`, `invalid`, `failed` or `timeout`.
    pub outcome: String,
    pub median_ms: Option<f64>,
}

/// One shape's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShapeReport {
    pub label: String,
    pub op: String,
    pub dtype: String,
    pub layout: String,
    /// The measured dimensions: `[n]` or `[m, n, k, batch]`.
    pub shape: Vec<u64>,
    pub bucket: Vec<u64>,
    /// What the tuned config is compared with: the built-in heuristic (elementwise) or the
    /// kernels' default tile 0 (GEMM).
    pub default_config: ConfigJson,
    pub default_ms: Option<f64>,
    pub tuned_config: Option<ConfigJson>,
    pub tuned_ms: Option<f64>,
    /// `default_ms / tuned_ms`, both from the confirmation measurement.
    pub speedup: Option<f64>,
    /// GEMM: TFLOP/s of the default and tuned configs at those times.
    pub default_tflops: Option<f64>,
    pub tuned_tflops: Option<f64>,
    /// GEMM: the built-in heuristic's config (`GemmConfig::heuristic`) and its search time,
    /// when it was measured.
    pub heuristic_config: Option<ConfigJson>,
    pub heuristic_ms: Option<f64>,
    pub evaluations: usize,
    /// Measured in this run (the rest came from the journal of an interrupted run).
    pub measured: usize,
    pub reused: usize,
    pub pruned: usize,
    pub failed: usize,
    pub invalid: usize,
    pub stop: String,
    /// The profile already had this bucket; nothing was measured.
    pub existing: bool,
    pub model_compare: Option<ModelCompare>,
    /// The search's winner was faster than the built-in config by this much (relative) in the
    /// final comparison, but not by more than the margin: the built-in config was kept.
    #[serde(default)]
    pub within_margin: Option<f64>,
    /// The search's winner runs this kernel, the built-in config's: the built-in config was
    /// kept without a comparison (their times differ only by noise).
    #[serde(default)]
    pub same_kernel: Option<String>,
    /// (gain, rounds won): the winner beat the built-in config by more than the margin pooled,
    /// but not in every round of the comparison; the built-in config was kept.
    #[serde(default)]
    pub not_every_round: Option<(f64, usize)>,
    /// Every search measurement in the order made (journalled ones included).
    pub candidates: Vec<CandidateReport>,
}

/// A whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneReport {
    pub backend: String,
    pub device: ferrotune_profile::Device,
    /// The kernel build id of each op family (see `Description::builds`).
    pub builds: std::collections::BTreeMap<String, String>,
    pub strategy: String,
    pub worker_starts: usize,
    pub shapes: Vec<ShapeReport>,
    pub geomean_speedup: Option<f64>,
}

struct Session<'o> {
    opts: &'o TuneOptions,
    profile: Profile,
    ev: ProcessEvaluator,
    desc: Description,
}

fn outcome_from_journal(j: &JournalRecord) -> EvalOutcome {
    let why = j.detail.clone().unwrap_or_default();
    match (j.outcome, j.median_ms) {
        (Outcome::Ok, Some(m)) => {
            let mad = j.mad_ms.unwrap_or(0.0);
            EvalOutcome::Ok {
                stats: Stats { median_ms: m, min_ms: m, max_ms: m, mad_ms: mad, samples: 0 },
                verified: format!("journal: {why}"),
                kernel: j.kernel.clone(),
            }
        }
        (Outcome::Invalid, _) => EvalOutcome::Invalid { why },
        (Outcome::Timeout, _) => EvalOutcome::Timeout { after_s: 0.0 },
        _ => EvalOutcome::Failed { why, fatal: false },
    }
}

fn shape_seed(seed: u64, s: &Shape) -> u64 {
    let mut h = seed ^ 0x5EED;
    for b in s.label().bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Session<'_> {
    /// Measures `cfg` in `role`, or returns the journalled result of an earlier run.
    fn measure(
        &mut self,
        shape: &Shape,
        cfg: &ConfigJson,
        role: &str,
        repeat: Repeat,
    ) -> Result<(EvalOutcome, bool), TuneError> {
        let (op, dtype, layout, measured) = (shape.op_name(), shape.dtype_name(), shape.layout(), shape.dims());
        let params = to_params(shape, cfg);
        let slot = JournalSlot {
            op,
            dtype,
            layout: &layout,
            measured_shape: &measured,
            device: &self.desc.device,
            build: self.desc.build_of(op),
        };
        if let Some(j) = self.profile.journalled(&slot, role, &params) {
            return Ok((outcome_from_journal(j), true));
        }
        let out = self.ev.evaluate(*cfg, repeat.warmup, repeat.iters);
        let (outcome, median_ms, mad_ms, detail) = match &out {
            EvalOutcome::Ok { stats, verified, .. } => {
                (Outcome::Ok, Some(stats.median_ms), Some(stats.mad_ms), Some(verified.clone()))
            }
            EvalOutcome::Invalid { why } => (Outcome::Invalid, None, None, Some(why.clone())),
            EvalOutcome::Failed { why, .. } => (Outcome::Failed, None, None, Some(why.clone())),
            EvalOutcome::Timeout { after_s } => {
                (Outcome::Timeout, None, None, Some(format!("killed after {after_s:.1} s")))
            }
        };
        self.profile.journal.push(JournalRecord {
            op: op.into(),
            dtype: dtype.into(),
            layout,
            measured_shape: measured,
            build: self.desc.build_of(op).to_string(),
            role: role.into(),
            outcome,
            median_ms,
            mad_ms,
            detail,
            kernel: out.kernel().map(str::to_string),
            device: self.desc.device.clone(),
            config: params,
        });
        self.profile.save_atomic(&self.opts.profile)?;
        Ok((out, false))
    }

    fn tune_shape(
        &mut self,
        shape: &Shape,
        observe: &mut dyn FnMut(Event<'_>) -> Control,
    ) -> Result<ShapeReport, TuneError> {
        let opts = self.opts;
        let b = bucket_shape(&shape.dims());
        let key = Key {
            op: shape.op_name().into(),
            dtype: shape.dtype_name().into(),
            layout: shape.layout(),
            shape: b.clone(),
        };
        let base = family::default_config(&self.desc, shape)
            .ok_or_else(|| TuneError::Worker(format!("no built-in config for {}", shape.label())))?;
        let flops = family::flops(shape);
        let tflops = |ms: Option<f64>| flops.zip(ms).map(|(f, ms)| f / (ms * 1e-3) / 1e12);
        let mut report = ShapeReport {
            label: shape.label(),
            op: key.op.clone(),
            dtype: key.dtype.clone(),
            layout: key.layout.clone(),
            shape: shape.dims(),
            bucket: b,
            default_config: base,
            default_ms: None,
            tuned_config: None,
            tuned_ms: None,
            speedup: None,
            default_tflops: None,
            tuned_tflops: None,
            heuristic_config: family::heuristic_config(&self.desc, shape),
            heuristic_ms: None,
            evaluations: 0,
            measured: 0,
            reused: 0,
            pruned: 0,
            failed: 0,
            invalid: 0,
            stop: String::new(),
            existing: false,
            model_compare: None,
            within_margin: None,
            same_kernel: None,
            not_every_round: None,
            candidates: Vec::new(),
        };
        let existing =
            if opts.retune { None } else { self.profile.exact(&key, &self.desc.device, self.desc.build_of(&key.op)) };
        if let Some(e) = existing {
            report.existing = true;
            report.default_ms = e.default_ms;
            report.tuned_ms = Some(e.median_ms);
            report.tuned_config = family::from_params(shape, &e.config);
            report.speedup = e.default_ms.map(|d| d / e.median_ms);
            // The entry's times are of its own measured shape, which may be another in the bucket.
            let same = e.measured_shape == shape.dims();
            report.default_tflops = if same { tflops(e.default_ms) } else { None };
            report.tuned_tflops = if same { tflops(Some(e.median_ms)) } else { e.tflops };
            report.stop = format!(
                "bucket already tuned on {} (use --retune to measure again)",
                e.measured_shape.iter().map(u64::to_string).collect::<Vec<_>>().join("x")
            );
            observe(Event::ShapeDone(&report));
            return Ok(report);
        }
        let (cands, pruned) = family::candidates(&self.desc, shape, &base);
        let desc = &self.desc;
        let predicted: Vec<f64> = cands.iter().map(|c| family::predict_ms(desc, shape, c)).collect();
        let order = strategy::order(opts.strategy, cands.len(), shape_seed(opts.seed, shape), |i| predicted[i]);
        let planned = opts.budget.max_evals.map_or(order.len(), |m| m.min(order.len()));
        report.pruned = pruned.len();
        if observe(Event::ShapeStart { shape, candidates: cands.len(), planned, pruned: &pruned }) == Control::Stop {
            return Err(TuneError::Interrupted);
        }
        self.ev.prepare(&self.desc.backend, shape, shape_seed(opts.seed, shape)).map_err(TuneError::Worker)?;

        let mut counts = Counts { planned, pruned: pruned.len(), ..Counts::default() };
        let tally = |o: &EvalOutcome, reused: bool, counts: &mut Counts, report: &mut ShapeReport| {
            match o {
                EvalOutcome::Invalid { .. } => counts.invalid += 1,
                EvalOutcome::Failed { .. } | EvalOutcome::Timeout { .. } => counts.failed += 1,
                EvalOutcome::Ok { .. } => {}
            }
            if reused {
                counts.reused += 1;
                report.reused += 1;
            } else {
                report.measured += 1;
            }
        };

        let (baseline, reused) = self.measure(shape, &base, "baseline", opts.search_repeat)?;
        tally(&baseline, reused, &mut counts, &mut report);
        if observe(Event::Candidate {
            shape,
            config: &base,
            role: "baseline",
            outcome: &baseline,
            reused,
            counts: &counts,
        }) == Control::Stop
        {
            return Err(TuneError::Interrupted);
        }

        let mut progress = Progress::new(opts.budget);
        let t0 = Instant::now();
        let mut results: Vec<(usize, EvalOutcome)> = Vec::new();
        let mut stop = "every candidate measured".to_string();
        for &i in &order {
            // Replayed (journalled) measurements cost no time: the clock counts real work.
            if let Some(why) = progress.stop_reason(t0.elapsed()) {
                stop = why;
                break;
            }
            let (o, reused) = self.measure(shape, &cands[i], "search", opts.search_repeat)?;
            progress.record(o.median_ms());
            counts.done = progress.evals;
            counts.best_ms = progress.best_ms;
            tally(&o, reused, &mut counts, &mut report);
            let ctl = observe(Event::Candidate {
                shape,
                config: &cands[i],
                role: "search",
                outcome: &o,
                reused,
                counts: &counts,
            });
            report.candidates.push(CandidateReport {
                config: cands[i],
                predicted_ms: predicted[i],
                outcome: outcome_name(&o).into(),
                median_ms: o.median_ms(),
            });
            results.push((i, o));
            if ctl == Control::Stop {
                return Err(TuneError::Interrupted);
            }
        }
        report.evaluations = progress.evals;
        report.failed = counts.failed;
        report.invalid = counts.invalid;
        report.stop = stop;

        // Ranked valid results (the baseline is one of the candidates too).
        let mut ranked: Vec<(ConfigJson, Stats, Option<&str>)> = results
            .iter()
            .filter_map(|(i, o)| match o {
                EvalOutcome::Ok { stats, kernel, .. } => Some((cands[*i], *stats, kernel.as_deref())),
                _ => None,
            })
            .collect();
        if let EvalOutcome::Ok { stats, kernel, .. } = &baseline
            && !ranked.iter().any(|(c, ..)| *c == base)
        {
            ranked.push((base, *stats, kernel.as_deref()));
        }
        ranked.sort_by(|a, b| a.1.median_ms.total_cmp(&b.1.median_ms));

        if let (Strategy::Exhaustive, Some(k)) = (opts.strategy, opts.compare_model) {
            report.model_compare = compare_model(&predicted, &results, k);
        }
        report.heuristic_ms =
            report.heuristic_config.and_then(|h| ranked.iter().find(|(c, ..)| *c == h)).map(|(_, s, _)| s.median_ms);

        // Confirm: the winner and the built-in config measured again, longer, in alternating
        // rounds; the reported speedup comes from these, not from the (optimistically biased)
        // best of many short searches, and the winner must beat the built-in config by the
        // margin (`confirm`). A winner that runs the built-in config's kernel is no challenger.
        let (challenger, same_kernel) =
            confirm::challenger(base, baseline.kernel(), ranked.first().map(|(c, _, k)| (*c, *k)));
        report.same_kernel = same_kernel;
        let (default_stats, decided) =
            confirm::run(base, challenger, opts.confirm_repeat, opts.min_gain, |cfg, role, repeat| {
                let (o, reused) = self.measure(shape, cfg, role, repeat)?;
                tally(&o, reused, &mut counts, &mut report);
                Ok::<_, TuneError>(o)
            })?;
        report.default_ms = default_stats.map(|s| s.median_ms);
        match decided {
            Some((_, _, confirm::Verdict::WithinMargin { gain })) => report.within_margin = Some(gain),
            Some((_, _, confirm::Verdict::NotEveryRound { gain, won })) => report.not_every_round = Some((gain, won)),
            _ => {}
        }
        let chosen = decided.map(|(c, s, _)| (c, s));
        let Some((tuned, tuned_stats)) = chosen else {
            report.stop = format!("{}; no candidate passed verification", report.stop);
            self.finish_shape(shape)?;
            observe(Event::ShapeDone(&report));
            return Ok(report);
        };
        report.tuned_config = Some(tuned);
        report.tuned_ms = Some(tuned_stats.median_ms);
        report.speedup = report.default_ms.map(|d| d / tuned_stats.median_ms);
        report.default_tflops = tflops(report.default_ms);
        report.tuned_tflops = tflops(report.tuned_ms);
        let bytes = family::min_bytes(shape);
        let entry = Entry {
            op: key.op.clone(),
            dtype: key.dtype.clone(),
            layout: key.layout.clone(),
            shape: key.shape.clone(),
            measured_shape: shape.dims(),
            build: self.desc.build_of(&key.op).to_string(),
            median_ms: tuned_stats.median_ms,
            mad_ms: tuned_stats.mad_ms,
            throughput_gbps: bytes / (tuned_stats.median_ms * 1e-3) / 1e9,
            tflops: report.tuned_tflops,
            default_ms: report.default_ms,
            strategy: opts.strategy.name().into(),
            evaluations: report.evaluations as u32,
            date: ferrotune_profile::utc_now(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            device: self.desc.device.clone(),
            config: to_params(shape, &tuned),
            runners_up: ranked
                .iter()
                .filter(|(c, ..)| *c != tuned)
                .take(3)
                .map(|(c, s, _)| Ranked { median_ms: s.median_ms, config: to_params(shape, c) })
                .collect(),
            line: None,
        };
        self.profile.upsert(entry);
        self.finish_shape(shape)?;
        observe(Event::ShapeDone(&report));
        Ok(report)
    }

    /// The shape is done: its journal is dropped (the entry holds the result) and saved.
    fn finish_shape(&mut self, shape: &Shape) -> Result<(), TuneError> {
        let (layout, measured) = (shape.layout(), shape.dims());
        let slot = JournalSlot {
            op: shape.op_name(),
            dtype: shape.dtype_name(),
            layout: &layout,
            measured_shape: &measured,
            device: &self.desc.device,
            build: self.desc.build_of(shape.op_name()),
        };
        self.profile.clear_journal(&slot);
        self.profile.save_atomic(&self.opts.profile)?;
        Ok(())
    }
}

fn outcome_name(o: &EvalOutcome) -> &'static str {
    match o {
        EvalOutcome::Ok { .. } => "ok",
        EvalOutcome::Invalid { .. } => "invalid",
        EvalOutcome::Failed { .. } => "failed",
        EvalOutcome::Timeout { .. } => "timeout",
    }
}

/// Replays the model-guided order (`predicted` times of the candidates) over exhaustive
/// results: the best it finds within `budget` evaluations and how many it needed.
fn compare_model(predicted: &[f64], results: &[(usize, EvalOutcome)], budget: usize) -> Option<ModelCompare> {
    let time = |i: usize| results.iter().find(|(j, _)| *j == i).and_then(|(_, o)| o.median_ms());
    let exhaustive_best_ms = results.iter().filter_map(|(_, o)| o.median_ms()).min_by(f64::total_cmp)?;
    let order = strategy::order(Strategy::Model, predicted.len(), 0, |i| predicted[i]);
    let mut best: Option<(f64, usize)> = None;
    for (k, &i) in order.iter().take(budget).enumerate() {
        if let Some(t) = time(i)
            && best.is_none_or(|(b, _)| t < b)
        {
            best = Some((t, k + 1));
        }
    }
    let (model_best_ms, model_evals_to_best) = best?;
    Some(ModelCompare {
        budget,
        exhaustive_evals: results.len(),
        exhaustive_best_ms,
        model_best_ms,
        model_evals_to_best,
        gap: model_best_ms / exhaustive_best_ms - 1.0,
    })
}

/// Geometric mean of the speedups that exist.
pub fn geomean(xs: impl IntoIterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = xs.into_iter().filter(|x| x.is_finite() && *x > 0.0).collect();
    (!v.is_empty()).then(|| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
}

/// Tunes every shape of `opts`, telling `observe` as it goes (it may stop the run).
pub fn tune(opts: &TuneOptions, observe: &mut dyn FnMut(Event<'_>) -> Control) -> Result<TuneReport, TuneError> {
    let mut shapes = opts.shapes.iter();
    tune_each(opts, &mut |_| Ok(shapes.next().copied()), observe)
}

/// Tunes the shapes `next` hands out, one per call, until it returns `None` (a queue shared
/// with other devices' sessions: `parallel.rs`). `next` gets the session's profile, to move
/// the journal of the shape it hands out into it; the worker is told about all of
/// `opts.shapes` at the start.
pub fn tune_each(
    opts: &TuneOptions,
    next: &mut dyn FnMut(&mut Profile) -> Result<Option<Shape>, TuneError>,
    observe: &mut dyn FnMut(Event<'_>) -> Control,
) -> Result<TuneReport, TuneError> {
    let profile = Profile::load_or_empty(&opts.profile)?;
    let mut ev = ProcessEvaluator::new(opts.worker.clone(), opts.timeouts);
    let resources = opts.resources_dir.as_ref().map(|p| p.display().to_string());
    let desc = ev.describe(&opts.backend, &opts.shapes, resources).map_err(TuneError::Worker)?;
    observe(Event::Machine(&desc));
    for w in profile.foreign(&desc.device, &|op| desc.build_of(op).to_string()) {
        observe(Event::Warning(format!("{w} (kept, not used here)")));
    }
    let mut s = Session { opts, profile, ev, desc };
    let mut shapes = Vec::new();
    while let Some(shape) = next(&mut s.profile)? {
        shapes.push(s.tune_shape(&shape, observe)?);
    }
    let geomean_speedup = geomean(shapes.iter().filter_map(|r| r.speedup));
    Ok(TuneReport {
        backend: s.desc.backend.clone(),
        device: s.desc.device.clone(),
        builds: s.desc.builds.clone(),
        strategy: opts.strategy.name().into(),
        worker_starts: s.ev.starts,
        shapes,
        geomean_speedup,
    })
}

/// The default per-candidate timeout, generous for the largest shapes.
pub const CANDIDATE_TIMEOUT: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geomean_ignores_missing_values() {
        assert_eq!(geomean([]), None);
        assert!((geomean([2.0, 8.0]).unwrap() - 4.0).abs() < 1e-12);
        assert!((geomean([1.0, f64::NAN, 1.0]).unwrap() - 1.0).abs() < 1e-12);
    }
}
