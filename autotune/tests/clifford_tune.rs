//! The Clifford SGP layer tuned end to end through the real worker process on the CPU backend
//! (rows per rayon task are its parameter): a candidate that crashes or answers wrong never
//! wins, the winners of the forward and the backward are written to the profile under their
//! keys, and once that profile is loaded they are what the ops choose. Times are synthetic
//! (`FERROTUNE_TUNE_FAKE_TIME`: lowest at 8 rows, then 4 and 16); runs and verification are real.
//! Its own test binary: it loads the profile process-wide (`config::use_profiles`).

use std::time::Duration;

use ferrotune::backend::Cpu;
use ferrotune::ops::clifford::{self as cl, Clifford, CliffordConfig};
use ferrotune::profile::{Match, Param, Profile};
use ferrotune::tuned::{CliffordPass, Source};
use ferrotune::{Backend, Buffer, DType};
use ferrotune_autotune::measure::Repeat;
use ferrotune_autotune::tuner::Event;
use ferrotune_autotune::{
    Budget, CliffordShape, Control, EvalOutcome, Shape, Strategy, Timeouts, TuneOptions, WorkerCommand, tune,
};

fn rows_of(c: &ferrotune::profile::Config) -> i64 {
    match c.get("cpu_rows") {
        Some(Param::Int(v)) => *v,
        other => panic!("no cpu_rows: {other:?}"),
    }
}

#[test]
fn clifford_winners_are_verified_written_and_then_chosen_by_the_ops() {
    let dir = std::env::temp_dir().join(format!("ferrotune-tune-{}-clifford", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("profile.toml");
    // 2D, 40 rows of 12 features: rows per task 1 ..= 64 and the built-in 341 are the candidates.
    let p = Clifford::new(2, 40, 12, true);
    let shapes = CliffordPass::ALL.map(|pass| Shape::Clifford(CliffordShape { pass, dtype: DType::F32, problem: p }));
    let opts = TuneOptions {
        shapes: shapes.to_vec(),
        strategy: Strategy::Exhaustive,
        budget: Budget::default(),
        profile: path.clone(),
        backend: "cpu".into(),
        worker: WorkerCommand {
            program: env!("CARGO_BIN_EXE_ferrotune-tune-worker").into(),
            args: vec![],
            env: vec![
                ("FERROTUNE_TUNE_FAKE_TIME".into(), "1".into()),
                // The would-be winner (8 rows) answers wrong; 4 rows crashes its worker.
                ("FERROTUNE_TUNE_INJECT".into(), "wrong@cpu_rows=8;fault@cpu_rows=4".into()),
                ("RAYON_NUM_THREADS".into(), "2".into()),
            ],
        },
        timeouts: Timeouts {
            describe: Duration::from_secs(60),
            prepare: Duration::from_secs(60),
            candidate: Duration::from_secs(20),
        },
        search_repeat: Repeat { warmup: 1, iters: 2 },
        confirm_repeat: Repeat { warmup: 1, iters: 3 },
        seed: 1,
        retune: false,
        compare_model: None,
        min_gain: ferrotune_autotune::confirm::DEFAULT_MIN_GAIN,
        resources_dir: None,
    };
    let mut outcomes = Vec::new();
    let report = tune(&opts, &mut |e| {
        if let Event::Candidate { shape, config, outcome, role: "search", .. } = e {
            outcomes.push((shape.op_name(), config.as_clifford().unwrap().cpu_rows, outcome.clone()));
        }
        Control::Continue
    })
    .unwrap();
    assert_eq!(report.shapes.len(), 2);
    for (s, pass) in report.shapes.iter().zip(CliffordPass::ALL) {
        assert_eq!(s.op, pass.op_name());
        assert_eq!((s.failed, s.invalid), (1, 1), "{s:?}");
        let find = |rows| outcomes.iter().find(|(op, r, _)| *op == s.op && *r == rows).map(|(_, _, o)| o.clone());
        assert!(matches!(find(8), Some(EvalOutcome::Invalid { ref why }) if why.contains("built-in config")), "{pass}");
        assert!(format!("{:?}", find(4)).contains("SIGABRT"), "{pass}: {:?}", find(4));
        assert_eq!(s.tuned_config.unwrap().as_clifford().unwrap().cpu_rows, 16, "{pass}: the best valid candidate");
    }

    let profile = Profile::load(&path).unwrap();
    assert!(profile.journal.is_empty());
    assert_eq!(profile.entries.len(), 2);
    for (e, pass) in profile.entries.iter().zip(CliffordPass::ALL) {
        assert_eq!((e.op.as_str(), e.dtype.as_str(), e.layout.as_str()), (pass.op_name(), "f32", "cl2_norm"));
        assert_eq!((e.shape.clone(), e.measured_shape.clone()), (vec![32, 8], vec![40, 12]));
        assert_eq!(rows_of(&e.config), 16);
        assert!(e.runners_up.iter().all(|r| rows_of(&r.config) != 8), "an invalid result is no runner-up");
    }

    // The ops on a CPU backend like the worker's (2 threads: the same fingerprint) now choose
    // the tuned configs, from the exact entries.
    ferrotune::config::use_profiles(Some(path.clone())).unwrap();
    let b = Backend::Cpu(Cpu::new(2).unwrap());
    let s = b.stream();
    let (f, fsrc) = cl::forward_choice::<f32>(&s, &p).unwrap();
    let (g, gsrc) = cl::backward_choice::<f32>(&s, &p).unwrap();
    for (c, src) in [(f, &fsrc), (g, &gsrc)] {
        assert_eq!(c.cpu_rows, 16, "{src}");
        assert!(matches!(src, Source::Profile { how: Match::Exact, line: Some(_), .. }), "{src}");
    }
    // Another problem (3D) has no entry: the heuristic, saying why.
    let q = Clifford::new(3, 40, 12, true);
    let (h, src) = cl::forward_choice::<f32>(&s, &q).unwrap();
    assert_eq!(h, CliffordConfig::heuristic(&q, DType::F32, None));
    assert!(src.to_string().contains("no entry for clifford_fwd f32 cl3_norm"), "{src}");
    // The op runs with the tuned config (and gives what an explicit run of it gives).
    let len = p.mv_len().unwrap();
    let x = Buffer::from_slice(&s, &vec![0.5f32; len]).unwrap();
    let w = Buffer::from_slice(&s, &vec![0.25f32; p.sgp_weights_len().unwrap()]).unwrap();
    let mut out = Buffer::<f32>::zeros(&s, len).unwrap();
    let mut again = Buffer::<f32>::zeros(&s, len).unwrap();
    cl::fused_gelu_sgp_norm(&s, &p, &x.all(), &x.all(), &w.all(), &mut out.all_mut()).unwrap();
    cl::run_sgp_forward(&s, &p, &f, &x.all(), &x.all(), &w.all(), &mut again.all_mut()).unwrap();
    assert_eq!(out.to_vec(&s).unwrap(), again.to_vec(&s).unwrap());
    ferrotune::config::use_profiles(None).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// On a GPU: every candidate of the Clifford space (forward and backward, 2D and 3D, N not a
/// multiple of 4 and one that is) runs in a CUDA worker and matches the built-in config's
/// CPU output, or is refused with a reason; none faults. In process: a fault fails the test.
#[test]
fn gpu_every_clifford_candidate_is_verified_in_a_cuda_worker() {
    use ferrotune_autotune::family;
    use ferrotune_autotune::protocol::{Request, Response, ShapeJson};
    use ferrotune_autotune::worker::Worker;
    let mut w = Worker::from_env();
    let mut ran = 0;
    for (dim, b, n) in [(2, 67, 130), (3, 33, 200), (3, 16, 777)] {
        for pass in CliffordPass::ALL {
            let shape =
                Shape::Clifford(CliffordShape { pass, dtype: DType::F32, problem: Clifford::new(dim, b, n, n != 200) });
            let d = match w.handle(Request::Describe {
                backend: "cuda".into(),
                ops: vec![],
                dtypes: vec![],
                gemm: vec![],
                clifford: vec![ShapeJson::from(&shape)],
                resources_dir: None,
            }) {
                (Response::Description(d), _) => d,
                (Response::Error { why }, _) if std::env::var_os("FERROTUNE_REQUIRE_GPU").is_none() => {
                    println!(
                        "gpu_every_clifford_candidate_is_verified_in_a_cuda_worker: skipped: no CUDA device ({why})"
                    );
                    return;
                }
                (other, _) => panic!("describe: {other:?}"),
            };
            assert!(!d.clifford_resources.is_empty(), "the kernels' resources are described");
            let base = family::default_config(&d, &shape).expect("the built-in config is described");
            let (cands, pruned) = family::candidates(&d, &shape, &base);
            assert!(!cands.is_empty() && pruned.iter().all(|p| !p.reason.is_empty()));
            let (Response::Prepared { .. }, false) =
                w.handle(Request::Prepare { backend: "cuda".into(), shape: (&shape).into(), seed: 3 })
            else {
                panic!("prepare failed")
            };
            for config in cands {
                let (Response::Outcome(o), false) = w.handle(Request::Eval { config, warmup: 0, iters: 1 }) else {
                    panic!("{}: {config}: eval failed", shape.label())
                };
                match o {
                    EvalOutcome::Ok { .. } => ran += 1,
                    other => panic!("{}: {config}: {other:?}", shape.label()),
                }
            }
        }
    }
    println!("{ran} Clifford candidates verified on the GPU");
}
