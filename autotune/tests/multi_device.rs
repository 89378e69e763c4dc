//! Device-parallel tuning and job-array shards end to end through the real worker process
//! on the CPU backend (synthetic times, real runs and verification): the profile built with
//! two "devices" (two worker processes, each told its device through CUDA_VISIBLE_DEVICES)
//! equals the one built with one, shards merged equal the unsharded run, a run stopped or
//! killed part-way resumes (on another device count too) from the part files' journals
//! without measuring anything twice, and a failing device's shape goes to another device.

use std::path::PathBuf;
use std::time::Duration;

use ferrotune::{DType, ElemOp};
use ferrotune_autotune::measure::Repeat;
use ferrotune_autotune::parallel::{leftover_parts, tune_on_devices};
use ferrotune_autotune::tuner::Event;
use ferrotune_autotune::{
    Budget, Control, Shape, Shard, Strategy, Timeouts, TuneError, TuneOptions, WorkerCommand, tune,
};
use ferrotune_profile::{Entry, Profile};

fn temp_profile(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrotune-multi-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("profile.toml")
}

fn options(profile: PathBuf) -> TuneOptions {
    TuneOptions {
        // Four shapes in four different buckets (two ops, three sizes).
        shapes: vec![
            Shape::elem(ElemOp::Add, DType::F32, 20_000),
            Shape::elem(ElemOp::Add, DType::F32, 70_000),
            Shape::elem(ElemOp::Relu, DType::F32, 20_000),
            Shape::elem(ElemOp::Add, DType::F32, 300_000),
        ],
        strategy: Strategy::Exhaustive,
        budget: Budget::default(),
        profile,
        backend: "cpu".into(),
        worker: WorkerCommand {
            program: env!("CARGO_BIN_EXE_ferrotune-tune-worker").into(),
            args: vec![],
            env: vec![("FERROTUNE_TUNE_FAKE_TIME".into(), "1".into()), ("RAYON_NUM_THREADS".into(), "1".into())],
        },
        timeouts: Timeouts {
            describe: Duration::from_secs(60),
            prepare: Duration::from_secs(60),
            candidate: Duration::from_secs(10),
        },
        search_repeat: Repeat { warmup: 1, iters: 2 },
        confirm_repeat: Repeat { warmup: 1, iters: 3 },
        seed: 1,
        retune: false,
        compare_model: None,
        min_gain: ferrotune_autotune::confirm::DEFAULT_MIN_GAIN,
        resources_dir: None,
    }
}

/// The entries without what differs between two runs of the same measurements (dates,
/// spreads), in file order.
fn content(p: &Profile) -> Vec<Entry> {
    p.entries.iter().map(|e| Entry { date: String::new(), mad_ms: 0.0, line: None, ..e.clone() }).collect()
}

#[test]
fn two_devices_build_the_same_profile_as_one() {
    let one = temp_profile("one");
    let r1 = tune_on_devices(&options(one.clone()), &[0], &|_, _| Control::Continue).unwrap();
    let two = temp_profile("two");
    let r2 = tune_on_devices(&options(two.clone()), &[0, 1], &|_, _| Control::Continue).unwrap();
    let (p1, p2) = (Profile::load(&one).unwrap(), Profile::load(&two).unwrap());
    assert_eq!(p1.entries.len(), 4);
    assert_eq!(content(&p1), content(&p2), "same entries, same order");
    assert!(p2.journal.is_empty() && leftover_parts(&two).is_empty(), "parts merged and removed");
    let labels = |r: &ferrotune_autotune::TuneReport| r.shapes.iter().map(|s| s.label.clone()).collect::<Vec<_>>();
    assert_eq!(labels(&r1), labels(&r2), "the report lists shapes in the run's order");
    assert!(r2.worker_starts >= 2, "one worker per device: {}", r2.worker_starts);
    // Again on two devices: everything is in the profile, nothing is measured.
    let again = tune_on_devices(&options(two.clone()), &[1, 0], &|_, _| Control::Continue).unwrap();
    assert!(again.shapes.iter().all(|s| s.existing && s.measured == 0), "{again:?}");
    for p in [one, two] {
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }
}

#[test]
fn shards_merged_equal_the_unsharded_profile() {
    let whole = temp_profile("whole");
    tune_on_devices(&options(whole.clone()), &[0], &|_, _| Control::Continue).unwrap();
    let mut merged = Profile::default();
    let mut dirs = vec![whole.clone()];
    for i in 0..3 {
        let path = temp_profile(&format!("shard{i}"));
        let mut o = options(path.clone());
        o.shapes = Shard { index: i, count: 3 }.select(&o.shapes);
        if !o.shapes.is_empty() {
            tune(&o, &mut |_| Control::Continue).unwrap();
            merged.merge(&Profile::load(&path).unwrap());
        }
        dirs.push(path);
    }
    merged.sort_entries();
    assert_eq!(content(&merged), content(&Profile::load(&whole).unwrap()));
    for p in dirs {
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }
}

#[test]
fn an_interrupted_two_device_run_resumes_without_measuring_twice() {
    let path = temp_profile("resume");
    let opts = options(path.clone());
    let searched = std::sync::atomic::AtomicUsize::new(0);
    let err = tune_on_devices(&opts, &[0, 1], &|_, e| {
        if let Event::Candidate { role: "search", .. } = e
            && searched.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 >= 5
        {
            return Control::Stop;
        }
        Control::Continue
    })
    .unwrap_err();
    assert!(matches!(err, TuneError::Interrupted), "{err}");
    let p = Profile::load(&path).unwrap();
    assert!(leftover_parts(&path).is_empty(), "the parts were folded into the profile");
    let journalled = p.journal.len();
    assert!(journalled >= 5, "every measurement so far is journalled: {journalled}");

    let report = tune_on_devices(&opts, &[0, 1], &|_, _| Control::Continue).unwrap();
    let reused: usize = report.shapes.iter().map(|s| s.reused).sum();
    let done_before: usize = report.shapes.iter().filter(|s| s.existing).count();
    assert!(reused + done_before > 0, "{report:?}");
    assert_eq!(reused, journalled, "each journalled measurement reused once, none re-measured");
    let p = Profile::load(&path).unwrap();
    assert_eq!(p.entries.len(), 4);
    assert!(p.journal.is_empty());
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

/// The profile and part files of `profile`'s directory, copied into `to`'s directory: what a
/// kill -9 at this instant would leave (every file is replaced atomically).
fn snapshot(profile: &std::path::Path, to: &std::path::Path) {
    let dir = to.parent().unwrap();
    for f in std::fs::read_dir(profile.parent().unwrap()).unwrap().flatten() {
        // Not another session's temporary file (renamed over its target any moment).
        if !f.file_name().to_string_lossy().starts_with('.') {
            std::fs::copy(f.path(), dir.join(f.file_name())).unwrap();
        }
    }
}

#[test]
fn a_killed_two_device_run_resumes_on_three_without_measuring_twice() {
    let (path, killed) = (temp_profile("killed-live"), temp_profile("killed"));
    let searched = std::sync::atomic::AtomicUsize::new(0);
    let taken = std::sync::Mutex::new(false);
    let err = tune_on_devices(&options(path.clone()), &[0, 1], &|_, e| {
        if let Event::Candidate { role: "search", .. } = e
            && searched.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 >= 6
        {
            let mut t = taken.lock().unwrap();
            if !*t {
                snapshot(&path, &killed);
                *t = true;
            }
            return Control::Stop;
        }
        Control::Continue
    })
    .unwrap_err();
    assert!(matches!(err, TuneError::Interrupted), "{err}");
    // What the killed run left: the profile and two part files, each shape's journal in one.
    let parts = leftover_parts(&killed);
    assert_eq!(parts.len(), 2, "{parts:?}");
    let mut left = Profile::load(&killed).unwrap();
    for p in &parts {
        left.merge(&Profile::load(p).unwrap());
    }
    assert!(left.journal.len() >= 6, "every measurement so far is in a part: {}", left.journal.len());

    let report = tune_on_devices(&options(killed.clone()), &[2, 0, 1], &|_, _| Control::Continue).unwrap();
    let reused: usize = report.shapes.iter().map(|s| s.reused).sum();
    let existing = report.shapes.iter().filter(|s| s.existing).count();
    assert_eq!(reused, left.journal.len(), "each journalled measurement reused once, none re-measured");
    assert_eq!(existing, left.entries.len(), "shapes finished before the kill are not tuned again");
    let p = Profile::load(&killed).unwrap();
    assert_eq!(p.entries.len(), 4);
    assert!(p.journal.is_empty() && leftover_parts(&killed).is_empty());
    for p in [path, killed] {
        std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
    }
}

#[cfg(unix)]
#[test]
fn a_failing_device_gives_its_shape_back_and_the_others_finish_the_queue() {
    // Device 1's worker answers `describe`, then its input ends (it exits): preparing its
    // first shape fails. Device 2's worker does not start at all.
    let path = temp_profile("faulty");
    let mut opts = options(path.clone());
    let script = r#"case "$CUDA_VISIBLE_DEVICES" in
        1) head -n 1 | "$0" ;;
        2) echo "device 2 is broken" >&2; exit 3 ;;
        *) exec "$0" ;;
    esac"#;
    opts.worker.args = vec!["-c".into(), script.into(), opts.worker.program.display().to_string()];
    opts.worker.program = "/bin/sh".into();
    // Device 0 starts work only once device 1 holds a shape, so that one is given back.
    let (holds, wait) = (std::sync::Mutex::new(false), std::sync::Condvar::new());
    let err = tune_on_devices(&opts, &[0, 1, 2], &|d, e| {
        match (d, &e) {
            (1, Event::ShapeStart { .. }) => {
                *holds.lock().unwrap() = true;
                wait.notify_all();
            }
            (0, Event::Machine(_)) => {
                // (A bounded wait: if device 1 never gets that far, the assertions say so.)
                let h = holds.lock().unwrap();
                drop(wait.wait_timeout_while(h, Duration::from_secs(30), |h| !*h).unwrap());
            }
            _ => {}
        }
        Control::Continue
    })
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("device 1: ") && msg.contains("back to the queue for another device"), "{msg}");
    assert!(msg.contains("device 2: ") && msg.contains("device 2 is broken"), "{msg}");
    assert!(msg.contains("every shape was tuned on the other devices"), "{msg}");
    let p = Profile::load(&path).unwrap();
    assert_eq!(p.entries.len(), 4);
    assert!(p.journal.is_empty() && leftover_parts(&path).is_empty());
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}
