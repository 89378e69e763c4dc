//! Device-parallel tuning: the shapes are partitioned over the GPUs (`shard::split_shapes`),
//! and each GPU gets its own tuning session with its own worker process (which sees only
//! that GPU, through `CUDA_VISIBLE_DEVICES`) and its own part file beside the profile. The
//! part files hold each session's journal, so a killed run resumes: at the start every
//! leftover part is folded back into the profile and the work re-split; at the end the
//! parts are merged into the profile (entries in a canonical order) and removed. Since
//! the device fingerprint carries no ordinal, GPUs of one model write the same entries as
//! one GPU would.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ferrotune_profile::{JournalRecord, Profile};

use crate::protocol::Shape;

use crate::shard::{split_shapes, visible_devices_for};
use crate::tuner::{Control, Event, TuneError, TuneOptions, TuneReport, geomean, tune};

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
    let mut main = fold_parts(&opts.profile, &leftover_parts(&opts.profile))?;
    let parts = split_shapes(&opts.shapes, devices.len());
    // Each shape's journal moves to the part of the device that tunes it (parts are
    // written before the profile drops those records, so a crash in between loses nothing).
    let owns = |j: &JournalRecord, shapes: &[Shape]| {
        shapes.iter().any(|s| {
            j.op == s.op_name() && j.dtype == s.dtype_name() && j.layout == s.layout() && j.measured_shape == s.dims()
        })
    };
    let parent_visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let mut jobs = Vec::new();
    for (&d, shapes) in devices.iter().zip(parts) {
        if shapes.is_empty() {
            continue;
        }
        let visible = visible_devices_for(parent_visible.as_deref(), d).map_err(TuneError::Worker)?;
        let mut o = opts.clone();
        o.shapes = shapes;
        o.profile = part_path(&opts.profile, d);
        // Each part starts from the profile's entries (they count as tuned) and the journal
        // of its own shapes (an interrupted run's measurements, to resume from).
        let part = Profile {
            source: None,
            entries: main.entries.clone(),
            journal: main.journal.iter().filter(|j| owns(j, &o.shapes)).cloned().collect(),
        };
        part.save_atomic(&o.profile)?;
        o.worker.env.retain(|(k, _)| k != "CUDA_VISIBLE_DEVICES");
        o.worker.env.push(("CUDA_VISIBLE_DEVICES".into(), visible));
        jobs.push((d, o));
    }
    main.journal.retain(|j| !owns(j, &opts.shapes));
    main.save_atomic(&opts.profile)?;
    let stop = Mutex::new(false);
    let results: Vec<(usize, Result<TuneReport, TuneError>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|(d, o)| {
                let stop = &stop;
                let d = *d;
                scope.spawn(move || {
                    let r = tune(o, &mut |e| {
                        if *stop.lock().unwrap_or_else(|p| p.into_inner()) {
                            return Control::Stop;
                        }
                        let c = observe(d, e);
                        if c == Control::Stop {
                            *stop.lock().unwrap_or_else(|p| p.into_inner()) = true;
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
    let part_files: Vec<PathBuf> = jobs.iter().map(|(d, _)| part_path(&opts.profile, *d)).collect();
    fold_parts(&opts.profile, &part_files)?;
    let mut reports = Vec::new();
    for (d, r) in results {
        match r {
            Ok(rep) => reports.push(rep),
            Err(TuneError::Worker(w)) => return Err(TuneError::Worker(format!("device {d}: {w}"))),
            Err(e) => return Err(e),
        }
    }
    merge_reports(opts, reports)
}

/// One report from the devices' reports: shapes in `opts.shapes` order; the device
/// fingerprint must be the same everywhere (the profile would hold two devices' entries).
fn merge_reports(opts: &TuneOptions, reports: Vec<TuneReport>) -> Result<TuneReport, TuneError> {
    let first = reports.first().ok_or_else(|| TuneError::Worker("no device produced a report".into()))?.clone();
    if let Some(r) = reports.iter().find(|r| !r.device.same_device(&first.device) || r.build != first.build) {
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
