//! Device-parallel tuning: each GPU gets its own tuning session with its own worker process
//! (which sees only that GPU, through `CUDA_VISIBLE_DEVICES`) and its own part file beside
//! the profile, and the sessions take shapes from one shared queue (`queue.rs`), costliest
//! first (`shard::costliest_first`), so a GPU that finishes early takes more. A shape's
//! journal moves from the profile into the part of the session that takes it (the part is
//! written first: a crash in between leaves a duplicate, which merging drops, never a loss),
//! and each part is rewritten after every measurement, so a killed run resumes: at the start
//! every leftover part, of any device count, is folded back into the profile. A session
//! whose worker fails folds its part back and gives its shape back to the queue for another
//! device (once). At the end the parts are merged into the profile (entries in a canonical
//! order) and removed. Since the device fingerprint carries no ordinal, and shapes of one
//! bucket stay in one session in the run's order, GPUs of one model write the same entries
//! as one GPU would.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use ferrotune_profile::{JournalRecord, Profile};

use crate::protocol::Shape;
use crate::queue::{Taken, WorkQueue};
use crate::shard::{costliest_first, visible_devices_for};
use crate::tuner::{Control, Event, TuneError, TuneOptions, TuneReport, geomean, tune_each};

/// The part file of device `device` for `profile` (`<profile>.dev<d>.part`).
pub fn part_path(profile: &Path, device: usize) -> PathBuf {
    let name = profile.file_name().map_or("profile".into(), |n| n.to_string_lossy().into_owned());
    profile.with_file_name(format!("{name}.dev{device}.part"))
}

/// Every part file of `profile` left in its directory (by any device count).
pub fn leftover_parts(profile: &Path) -> Vec<PathBuf> {
    let name = profile.file_name().map_or("profile".into(), |n| n.to_string_lossy().into_owned());
    let dir = profile.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let prefix = format!("{name}.dev");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".part"))
        })
        .collect();
    v.sort();
    v
}

/// Folds `parts` into the profile at `path` (entries and journals), sorts its entries into
/// the canonical order, saves it, and deletes the parts.
pub fn fold_parts(path: &Path, parts: &[PathBuf]) -> Result<Profile, TuneError> {
    let mut main = Profile::load_or_empty(path)?;
    for p in parts {
        main.merge(&Profile::load(p)?);
    }
    main.sort_entries();
    main.save_atomic(path)?;
    for p in parts {
        std::fs::remove_file(p).map_err(|e| TuneError::Worker(format!("removing {}: {e}", p.display())))?;
    }
    Ok(main)
}

/// The profile being tuned, shared by the sessions: it holds the journal of the shapes no
/// session has taken yet.
struct Main<'p> {
    path: &'p Path,
    profile: Mutex<Profile>,
}

impl Main<'_> {
    fn lock(&self) -> MutexGuard<'_, Profile> {
        self.profile.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn owns(j: &JournalRecord, shapes: &[Shape]) -> bool {
    shapes.iter().any(|s| {
        j.op == s.op_name() && j.dtype == s.dtype_name() && j.layout == s.layout() && j.measured_shape == s.dims()
    })
}

/// Moves the journal of `shapes` from the profile into a session's `part` (saved at
/// `part_path` before the profile drops the records).
fn hand_over(main: &Main<'_>, part: &mut Profile, part_path: &Path, shapes: &[Shape]) -> Result<(), TuneError> {
    let mut m = main.lock();
    if !m.journal.iter().any(|j| owns(j, shapes)) {
        return Ok(());
    }
    for j in m.journal.iter().filter(|j| owns(j, shapes)) {
        if !part.journal.contains(j) {
            part.journal.push(j.clone());
        }
    }
    part.save_atomic(part_path)?;
    m.journal.retain(|j| !owns(j, shapes));
    m.save_atomic(main.path)?;
    Ok(())
}

/// Folds a failed session's part back into the profile (saved before the part is deleted):
/// what it measured stays, and the session that takes its shape next finds the journal.
fn fold_back(main: &Main<'_>, part_path: &Path) -> Result<(), TuneError> {
    let mut m = main.lock();
    if !part_path.is_file() {
        return Ok(());
    }
    m.merge(&Profile::load(part_path)?);
    m.save_atomic(main.path)?;
    std::fs::remove_file(part_path).map_err(|e| TuneError::Worker(format!("removing {}: {e}", part_path.display())))
}

fn labels(shapes: &[Shape], group: &[usize]) -> String {
    group.iter().map(|&i| shapes[i].label()).collect::<Vec<_>>().join(", ")
}

/// One device's session: takes bucket groups (indices into `opts.shapes`) from `queue`
/// until it is empty. On a failure the part goes back into the profile and the group being
/// tuned back to the queue; the error says so.
fn run_device(
    o: &TuneOptions,
    all: &[Shape],
    main: &Main<'_>,
    queue: &WorkQueue<Vec<usize>>,
    observe: &mut dyn FnMut(Event<'_>) -> Control,
) -> Result<TuneReport, TuneError> {
    let mut held: Option<Taken<'_, Vec<usize>>> = None;
    let mut pending: VecDeque<Shape> = VecDeque::new();
    let r = tune_each(
        o,
        &mut |part| loop {
            if let Some(s) = pending.pop_front() {
                return Ok(Some(s));
            }
            // Finish the last group before waiting for the next (a held group keeps others waiting).
            if let Some(t) = held.take() {
                t.done();
            }
            let Some(t) = queue.take() else { return Ok(None) };
            let shapes: Vec<Shape> = t.item().iter().map(|&i| all[i]).collect();
            hand_over(main, part, &o.profile, &shapes)?;
            pending.extend(shapes);
            held = Some(t);
        },
        observe,
    );
    match r {
        Err(TuneError::Worker(why)) => {
            let folded = fold_back(main, &o.profile);
            let what = match held {
                None => String::new(),
                Some(t) => {
                    let names = labels(all, t.item());
                    if t.failed() {
                        format!(" (it was tuning {names}: back to the queue for another device)")
                    } else {
                        format!(" (it was tuning {names}: left untuned)")
                    }
                }
            };
            let folded = folded.err().map(|e| format!("; folding its part back: {e}")).unwrap_or_default();
            Err(TuneError::Worker(format!("{why}{what}{folded}")))
        }
        Err(e) => {
            // Interrupted (the queue is closed) or a profile error: the part stays for the fold.
            queue.close();
            Err(e)
        }
        Ok(rep) => Ok(rep),
    }
}

/// Tunes `opts.shapes` over `devices` (ordinals of this process), one worker per device,
/// telling `observe` which device each event comes from. The merged report lists shapes
/// in `opts.shapes` order.
pub fn tune_on_devices(
    opts: &TuneOptions,
    devices: &[usize],
    observe: &(dyn Fn(usize, Event<'_>) -> Control + Sync),
) -> Result<TuneReport, TuneError> {
    if devices.is_empty() {
        return Err(TuneError::Worker("no device to tune on".into()));
    }
    let main = fold_parts(&opts.profile, &leftover_parts(&opts.profile))?;
    let parent_visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let mut jobs = Vec::new();
    for &d in devices {
        let visible = visible_devices_for(parent_visible.as_deref(), d).map_err(TuneError::Worker)?;
        let mut o = opts.clone();
        o.profile = part_path(&opts.profile, d);
        // Each part starts from the profile's entries (they count as tuned); journals come
        // with the shapes the session takes.
        Profile { source: None, entries: main.entries.clone(), journal: Vec::new() }.save_atomic(&o.profile)?;
        o.worker.env.retain(|(k, _)| k != "CUDA_VISIBLE_DEVICES");
        o.worker.env.push(("CUDA_VISIBLE_DEVICES".into(), visible));
        jobs.push((d, o));
    }
    let main = Main { path: &opts.profile, profile: Mutex::new(main) };
    let queue = WorkQueue::new(costliest_first(&opts.shapes), 1);
    let stop = AtomicBool::new(false);
    let results: Vec<(usize, Result<TuneReport, TuneError>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|(d, o)| {
                let (stop, queue, main, d) = (&stop, &queue, &main, *d);
                scope.spawn(move || {
                    let r = run_device(o, &opts.shapes, main, queue, &mut |e| {
                        if stop.load(Ordering::SeqCst) {
                            return Control::Stop;
                        }
                        let c = observe(d, e);
                        if c == Control::Stop {
                            stop.store(true, Ordering::SeqCst);
                            queue.close();
                        }
                        c
                    });
                    (d, r)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| (usize::MAX, Err(TuneError::Worker("a tuning thread panicked".into()))))
            })
            .collect()
    });
    // Whatever happened, the measurements of every part go into the profile.
    fold_parts(&opts.profile, &leftover_parts(&opts.profile))?;
    let untuned: Vec<String> = queue.into_unfinished().iter().map(|g| labels(&opts.shapes, g)).collect();
    let mut reports = Vec::new();
    let mut failures = Vec::new();
    for (d, r) in results {
        match r {
            Ok(rep) => reports.push(rep),
            Err(TuneError::Worker(w)) => failures.push(format!("device {d}: {w}")),
            Err(e) => return Err(e),
        }
    }
    if !failures.is_empty() {
        let left = if untuned.is_empty() {
            "; every shape was tuned on the other devices".to_string()
        } else {
            format!("; not tuned: {}", untuned.join(", "))
        };
        return Err(TuneError::Worker(format!("{}{left}", failures.join("; "))));
    }
    merge_reports(opts, reports)
}

/// One report from the devices' reports: shapes in `opts.shapes` order; the device
/// fingerprint must be the same everywhere (the profile would hold two devices' entries).
fn merge_reports(opts: &TuneOptions, reports: Vec<TuneReport>) -> Result<TuneReport, TuneError> {
    let first = reports.first().ok_or_else(|| TuneError::Worker("no device produced a report".into()))?.clone();
    if let Some(r) = reports.iter().find(|r| !r.device.same_device(&first.device) || r.builds != first.builds) {
        return Err(TuneError::Worker(format!(
            "the devices differ ({} vs {}): their entries were kept in the profile, each under its own device",
            first.device, r.device
        )));
    }
    let mut shapes = Vec::new();
    for s in &opts.shapes {
        let label = s.label();
        if let Some(r) = reports.iter().flat_map(|r| &r.shapes).find(|r| r.label == label) {
            shapes.push(r.clone());
        }
    }
    Ok(TuneReport {
        geomean_speedup: geomean(shapes.iter().filter_map(|r| r.speedup)),
        worker_starts: reports.iter().map(|r| r.worker_starts).sum(),
        shapes,
        ..first
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrotune::{DType, ElemOp};
    use ferrotune_profile::{Config, Device, Outcome, Param};

    fn record(s: &Shape, threads: i64) -> JournalRecord {
        let mut config = Config::new();
        config.insert("threads".into(), Param::Int(threads));
        JournalRecord {
            op: s.op_name().into(),
            dtype: s.dtype_name().into(),
            layout: s.layout(),
            measured_shape: s.dims(),
            build: "fnv1a64:1".into(),
            role: "search".into(),
            outcome: Outcome::Ok,
            median_ms: Some(1.0),
            mad_ms: None,
            detail: None,
            kernel: None,
            device: Device {
                backend: "cuda".into(),
                name: "NVIDIA H200".into(),
                arch: "sm_90".into(),
                sm_count: 132,
                driver: "13.0".into(),
            },
            config,
        }
    }

    fn sorted(mut j: Vec<JournalRecord>) -> Vec<String> {
        let mut v: Vec<String> =
            j.drain(..).map(|r| format!("{} {:?} {:?}", r.op, r.measured_shape, r.config)).collect();
        v.sort();
        v
    }

    #[test]
    fn a_taken_shapes_journal_moves_to_its_part_and_back_and_a_crash_loses_nothing() {
        let dir = std::env::temp_dir().join(format!("ferrotune-handover-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (prof, part0) = (dir.join("p.toml"), part_path(&dir.join("p.toml"), 0));
        let (a, b) = (Shape::elem(ElemOp::Add, DType::F32, 1000), Shape::elem(ElemOp::Relu, DType::F32, 1000));
        let start = Profile { journal: vec![record(&a, 64), record(&b, 64), record(&a, 128)], ..Profile::default() };
        start.save_atomic(&prof).unwrap();
        let main = Main { path: &prof, profile: Mutex::new(start.clone()) };
        let mut part = Profile::default();
        part.save_atomic(&part0).unwrap();

        hand_over(&main, &mut part, &part0, &[a]).unwrap();
        assert_eq!(Profile::load(&part0).unwrap().journal, [record(&a, 64), record(&a, 128)]);
        assert_eq!(Profile::load(&prof).unwrap().journal, [record(&b, 64)], "on disk, each record once");
        hand_over(&main, &mut part, &part0, &[a]).unwrap();
        assert_eq!(part.journal.len(), 2, "handing over again adds nothing");

        // Killed between the two writes (the part written, the profile not yet): a resume's
        // fold drops the duplicates.
        start.save_atomic(&prof).unwrap();
        let folded = fold_parts(&prof, &leftover_parts(&prof)).unwrap();
        assert_eq!(sorted(folded.journal), sorted(start.journal.clone()));
        assert!(!part0.exists());

        // A failed session's part goes back whole: the profile has everything, the part is gone.
        let main = Main { path: &prof, profile: Mutex::new(Profile::load(&prof).unwrap()) };
        let mut part = Profile::default();
        hand_over(&main, &mut part, &part0, &[b]).unwrap();
        part.journal.push(record(&b, 256));
        part.save_atomic(&part0).unwrap();
        fold_back(&main, &part0).unwrap();
        assert!(!part0.exists());
        let mut want = start.journal.clone();
        want.push(record(&b, 256));
        assert_eq!(sorted(Profile::load(&prof).unwrap().journal), sorted(want));
        fold_back(&main, &part0).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn part_files_sit_beside_the_profile_and_are_found_again() {
        let dir = std::env::temp_dir().join(format!("ferrotune-parts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let prof = dir.join("p.toml");
        assert_eq!(part_path(&prof, 3), dir.join("p.toml.dev3.part"));
        for d in [1, 0] {
            Profile::default().save_atomic(&part_path(&prof, d)).unwrap();
        }
        std::fs::write(dir.join("other.toml.dev0.part"), "").unwrap();
        assert_eq!(leftover_parts(&prof), [part_path(&prof, 0), part_path(&prof, 1)]);
        fold_parts(&prof, &leftover_parts(&prof)).unwrap();
        assert!(leftover_parts(&prof).is_empty());
        assert!(prof.is_file());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
