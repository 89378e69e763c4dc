//! The tuner end to end through its real worker process (this package's
//! `ferrotune-tune-worker` binary) on the CPU backend, for an elementwise op and for GEMM
//! (rows per task): candidates that crash, hang or return
//! wrong answers are recorded and never win; an interrupted run resumes without measuring
//! anything twice. Times are synthetic (`FERROTUNE_TUNE_FAKE_TIME`) so the winner is known;
//! runs and verification are real.

use std::path::PathBuf;
use std::time::Duration;

use ferrotune::ops::gemm::Layout;
use ferrotune::{DType, ElemOp};
use ferrotune_autotune::measure::Repeat;
use ferrotune_autotune::tuner::Event;
use ferrotune_autotune::{
    Budget, Control, GemmDtype, GemmShape, Shape, Strategy, Timeouts, TuneError, TuneOptions, WorkerCommand, tune,
};
use ferrotune_profile::{Outcome, Param, Profile};

fn temp_profile(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrotune-tune-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("profile.toml")
}

fn options(profile: PathBuf, inject: &str) -> TuneOptions {
    TuneOptions {
        // 20000 elements: CPU chunks 2^10 ..= 2^15 are the candidates; the synthetic time is
        // lowest at 2^14, then 2^13 and 2^15.
        shapes: vec![Shape::elem(ElemOp::Add, DType::F32, 20_000)],
        strategy: Strategy::Exhaustive,
        budget: Budget::default(),
        profile,
        backend: "cpu".into(),
        worker: WorkerCommand {
            program: env!("CARGO_BIN_EXE_ferrotune-tune-worker").into(),
            args: vec![],
            env: vec![
                ("FERROTUNE_TUNE_FAKE_TIME".into(), "1".into()),
                ("FERROTUNE_TUNE_INJECT".into(), inject.into()),
                ("RAYON_NUM_THREADS".into(), "2".into()),
            ],
        },
        timeouts: Timeouts {
            describe: Duration::from_secs(60),
            prepare: Duration::from_secs(60),
            candidate: Duration::from_secs(3),
        },
        search_repeat: Repeat { warmup: 1, iters: 2 },
        confirm_repeat: Repeat { warmup: 1, iters: 3 },
        seed: 1,
        retune: false,
        compare_model: Some(3),
        min_gain: ferrotune_autotune::confirm::DEFAULT_MIN_GAIN,
        resources_dir: None,
    }
}

fn chunk_of(c: &ferrotune_profile::Config) -> i64 {
    match c.get("cpu_chunk") {
        Some(Param::Int(v)) => *v,
        other => panic!("no cpu_chunk: {other:?}"),
    }
}

#[test]
fn faults_hangs_and_wrong_answers_are_isolated_and_never_win() {
    let path = temp_profile("isolation");
    // The would-be winner (2^14) answers wrong; 2^12 crashes its worker; 2^10 hangs.
    let opts = options(path.clone(), "wrong@cpu_chunk=16384;fault@cpu_chunk=4096;hang@cpu_chunk=1024");
    let mut outcomes = Vec::new();
    let report = tune(&opts, &mut |e| {
        if let Event::Candidate { config, outcome, role: "search", .. } = e {
            outcomes.push((config.as_elem().unwrap().cpu_chunk, outcome.clone()));
        }
        Control::Continue
    })
    .unwrap();
    let s = &report.shapes[0];
    assert_eq!(s.evaluations, 6, "{s:?}");
    assert_eq!((s.failed, s.invalid), (2, 1), "{s:?}");
    let find = |chunk| outcomes.iter().find(|(c, _)| *c == chunk).map(|(_, o)| o.clone()).unwrap();
    assert!(matches!(find(16384), ferrotune_autotune::EvalOutcome::Invalid { .. }));
    let crash = format!("{:?}", find(4096));
    assert!(crash.contains("worker died") && crash.contains("SIGABRT"), "{crash}");
    assert!(matches!(find(1024), ferrotune_autotune::EvalOutcome::Timeout { .. }));
    assert!(report.worker_starts >= 3, "a new worker after the crash and after the hang: {}", report.worker_starts);
    // The winner is the best *valid* candidate; the wrong one never wins.
    let tuned = s.tuned_config.unwrap().as_elem().unwrap().cpu_chunk;
    assert!(tuned == 8192 || tuned == 32768, "tuned chunk {tuned}");
    assert!(s.speedup.unwrap() > 1.0, "default chunk 65536 is slower in the synthetic model");
    let m = s.model_compare.as_ref().unwrap();
    assert!(m.gap >= 0.0 && m.model_evals_to_best <= 3, "{m:?}");

    let p = Profile::load(&path).unwrap();
    assert_eq!(p.entries.len(), 1);
    assert_eq!(chunk_of(&p.entries[0].config), tuned as i64);
    assert!(p.entries[0].runners_up.iter().all(|r| chunk_of(&r.config) != 16384), "an invalid result is no runner-up");
    assert!(p.journal.is_empty(), "a finished shape leaves no journal");

    // Tuning the same bucket again measures nothing.
    let again = tune(&opts, &mut |_| Control::Continue).unwrap();
    assert!(again.shapes[0].existing);
    assert_eq!(again.shapes[0].measured, 0);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn an_interrupted_run_resumes_without_measuring_twice() {
    let path = temp_profile("resume");
    let opts = options(path.clone(), "fault@cpu_chunk=2048");
    let mut searched = 0;
    let err = tune(&opts, &mut |e| {
        if let Event::Candidate { role: "search", .. } = e {
            searched += 1;
            if searched == 3 {
                return Control::Stop;
            }
        }
        Control::Continue
    })
    .unwrap_err();
    assert!(matches!(err, TuneError::Interrupted), "{err}");
    let p = Profile::load(&path).unwrap();
    assert!(p.entries.is_empty());
    assert_eq!(p.journal.len(), 4, "baseline + 3 candidates journalled: {:?}", p.journal);
    assert!(p.journal.iter().any(|j| j.outcome == Outcome::Failed), "the fault (chunk 2048) is recorded too");

    let report = tune(&opts, &mut |_| Control::Continue).unwrap();
    let s = &report.shapes[0];
    assert_eq!(s.reused, 4, "{s:?}");
    // 3 more candidates + the confirmation rounds of both; nothing measured twice.
    assert_eq!(s.measured, 3 + 2 * ferrotune_autotune::confirm::ROUNDS, "{s:?}");
    assert_eq!(s.evaluations, 6);
    assert_eq!(s.failed, 1);
    let p = Profile::load(&path).unwrap();
    assert_eq!(p.entries.len(), 1);
    assert!(p.journal.is_empty());
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn budgets_and_strategies_limit_the_search() {
    let path = temp_profile("budget");
    let mut opts = options(path.clone(), "");
    opts.strategy = Strategy::Model;
    opts.budget = Budget { max_evals: Some(2), ..Budget::default() };
    let r = tune(&opts, &mut |_| Control::Continue).unwrap();
    assert_eq!(r.shapes[0].evaluations, 2);
    assert!(r.shapes[0].stop.contains("budget"), "{}", r.shapes[0].stop);
    opts.retune = true;
    opts.strategy = Strategy::Random;
    opts.budget = Budget { patience: Some(1), ..Budget::default() };
    let r = tune(&opts, &mut |_| Control::Continue).unwrap();
    assert!(r.shapes[0].evaluations < 6 || r.shapes[0].stop.contains("every"), "{:?}", r.shapes[0]);
    assert_eq!(Profile::load(&path).unwrap().entries.len(), 1, "a retune replaces its entry");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn a_malformed_profile_stops_the_run_naming_file_and_line() {
    let path = temp_profile("malformed");
    std::fs::write(&path, "format = \"ferrotune-profile\"\nversion = 1\n[[entry]\n").unwrap();
    let err = tune(&options(path.clone(), ""), &mut |_| Control::Continue).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("profile.toml:3:"), "{msg}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "format = \"ferrotune-profile\"\nversion = 1\n[[entry]\n");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

fn gemm_options(profile: PathBuf, inject: &str) -> TuneOptions {
    // 40 x 24 x 16 bf16 on the CPU: rows per task 1 ..= 64 are the candidates; the synthetic
    // time is lowest at 4, then 2 and 8.
    let shape = GemmShape { dtype: GemmDtype::Bf16, m: 40, n: 24, k: 16, batch: 1, a: Layout::Row, b: Layout::Col };
    TuneOptions { shapes: vec![Shape::Gemm(shape)], ..options(profile, inject) }
}

fn rows_of(c: &ferrotune_profile::Config) -> i64 {
    match c.get("cpu_rows") {
        Some(Param::Int(v)) => *v,
        other => panic!("no cpu_rows: {other:?}"),
    }
}

#[test]
fn gemm_candidates_are_isolated_verified_and_resumed_like_elementwise_ones() {
    let path = temp_profile("gemm");
    // The would-be winner (4 rows) answers wrong, 2 crashes its worker, 1 hangs; the run is
    // interrupted after 3 search candidates and resumed.
    let opts = gemm_options(path.clone(), "wrong@cpu_rows=4;fault@cpu_rows=2;hang@cpu_rows=1");
    let mut searched = 0;
    let err = tune(&opts, &mut |e| {
        if let Event::Candidate { role: "search", .. } = e {
            searched += 1;
            if searched == 3 {
                return Control::Stop;
            }
        }
        Control::Continue
    })
    .unwrap_err();
    assert!(matches!(err, TuneError::Interrupted), "{err}");
    let p = Profile::load(&path).unwrap();
    assert_eq!(p.journal.len(), 4, "baseline + 3 candidates: {:?}", p.journal);
    assert!(p.journal.iter().all(|j| j.op == "gemm" && j.layout == "rc" && j.measured_shape == [40, 24, 16, 1]));
    assert!(p.journal.iter().any(|j| j.outcome == Outcome::Timeout), "the hang (1 row) is journalled");

    let mut outcomes = Vec::new();
    let report = tune(&opts, &mut |e| {
        if let Event::Candidate { config, outcome, role: "search", .. } = e {
            outcomes.push((config.as_gemm().unwrap().cpu_rows, outcome.clone()));
        }
        Control::Continue
    })
    .unwrap();
    let s = &report.shapes[0];
    assert_eq!((s.evaluations, s.reused), (7, 4), "{s:?}");
    assert_eq!((s.failed, s.invalid), (2, 1), "{s:?}");
    let find = |rows| outcomes.iter().find(|(r, _)| *r == rows).map(|(_, o)| o.clone()).unwrap();
    assert!(matches!(find(4), ferrotune_autotune::EvalOutcome::Invalid { ref why } if why.contains("(0, 20, 12)")));
    assert!(format!("{:?}", find(2)).contains("SIGABRT"));
    assert!(matches!(find(1), ferrotune_autotune::EvalOutcome::Timeout { .. }));
    let tuned = s.tuned_config.unwrap().as_gemm().unwrap().cpu_rows;
    assert_eq!(tuned, 8, "the best valid candidate");
    assert!(s.speedup.unwrap() > 1.0 && s.tuned_tflops.is_some());
    assert_eq!(s.candidates.len(), 7);

    let p = Profile::load(&path).unwrap();
    assert!(p.journal.is_empty());
    let e = &p.entries[0];
    assert_eq!((e.op.as_str(), e.dtype.as_str(), e.layout.as_str()), ("gemm", "bf16", "rc"));
    assert_eq!((e.shape.clone(), e.measured_shape.clone()), (vec![32, 16, 16, 1], vec![40, 24, 16, 1]));
    assert_eq!(rows_of(&e.config), 8);
    assert!(e.tflops.is_some_and(|t| t > 0.0));
    assert!(e.runners_up.iter().all(|r| rows_of(&r.config) != 4), "an invalid result is no runner-up");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn a_win_within_the_margin_keeps_the_built_in_config() {
    // The synthetic times: the built-in chunk 1.23 ms, the best (2^14) 1.03 ms, 16% faster.
    let path = temp_profile("margin");
    let mut opts = options(path.clone(), "");
    opts.min_gain = 0.20;
    let report = tune(&opts, &mut |_| Control::Continue).unwrap();
    let s = &report.shapes[0];
    assert_eq!(s.tuned_config, Some(s.default_config), "{s:?}");
    assert_eq!(s.speedup, Some(1.0));
    let gain = s.within_margin.expect("the margin's verdict is reported");
    assert!((gain - (1.0 - 1.03 / 1.23)).abs() < 1e-9, "{gain}");
    let p = Profile::load(&path).unwrap();
    assert_eq!(chunk_of(&p.entries[0].config), 65536, "the profile keeps the built-in chunk");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();

    // Under the gain, the winner is kept.
    let path = temp_profile("margin-under");
    let mut opts = options(path.clone(), "");
    opts.min_gain = 0.10;
    let s = &tune(&opts, &mut |_| Control::Continue).unwrap().shapes[0];
    assert_eq!(s.within_margin, None);
    assert_eq!(chunk_of(&Profile::load(&path).unwrap().entries[0].config), 16384, "the winner is kept");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}
