//! The run-time lookup: which tuned entry (if any) applies to an op call, and how closely it
//! matches: exact entry → nearest bucket on the same device → same architecture. The caller
//! falls back to its built-in heuristic when nothing matches.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::{Device, Entry, Profile, ProfileError, bucket_shape};

/// What an op call needs tuned.
#[derive(Clone, Copy, Debug)]
pub struct Query<'a> {
    pub device: &'a Device,
    pub build: &'a str,
    pub op: &'a str,
    pub dtype: &'a str,
    pub layout: &'a str,
    /// The call's real shape (bucketed here).
    pub shape: &'a [u64],
}

/// How an entry matched a query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Match {
    /// Same device (driver included), build, op, dtype, layout and bucket.
    Exact,
    /// Same device and build; the nearest bucket (log2 distance `distance`).
    NearestBucket { bucket: Vec<u64>, distance: u32 },
    /// Another device of the same architecture (and build), nearest bucket.
    SameArch { device: String, bucket: Vec<u64>, distance: u32 },
}

impl fmt::Display for Match {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Match::Exact => f.write_str("exact entry"),
            Match::NearestBucket { bucket, distance } => {
                write!(f, "nearest bucket {bucket:?} on this device ({distance} octaves away)")
            }
            Match::SameArch { device, bucket, distance } => {
                write!(f, "bucket {bucket:?} tuned on {device}, same architecture ({distance} octaves away)")
            }
        }
    }
}

/// An entry that answers a query.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    pub entry: Entry,
    pub how: Match,
    pub path: PathBuf,
}

/// Every profile found at a path (a file, or each `*.toml` in a directory), plus the files
/// that could not be used and why. Problems are reported, never silently ignored.
#[derive(Clone, Debug, Default)]
pub struct ProfileSet {
    pub profiles: Vec<Profile>,
    pub problems: Vec<String>,
}

/// Octaves between two bucketed shapes of the same rank.
fn distance(a: &[u64], b: &[u64]) -> Option<u32> {
    if a.len() != b.len() {
        return None;
    }
    let lg = |x: u64| if x == 0 { 0i64 } else { 63 - x.leading_zeros() as i64 };
    Some(a.iter().zip(b).map(|(x, y)| (lg(*x) - lg(*y)).unsigned_abs() as u32).sum())
}

impl ProfileSet {
    /// Loads `path`: one file, or every `*.toml` directly in a directory (sorted by name). A
    /// missing path is an empty set; unreadable or invalid files go to `problems`.
    pub fn load(path: &Path) -> ProfileSet {
        let mut set = ProfileSet::default();
        if path.is_dir() {
            let mut files: Vec<PathBuf> = match std::fs::read_dir(path) {
                Ok(d) => d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect(),
                Err(e) => {
                    set.problems.push(format!("{}: {e}", path.display()));
                    return set;
                }
            };
            files.sort();
            for f in files {
                set.add(Profile::load(&f));
            }
        } else if path.exists() {
            set.add(Profile::load(path));
        }
        set
    }

    fn add(&mut self, p: Result<Profile, ProfileError>) {
        match p {
            Ok(p) => self.profiles.push(p),
            Err(e) => self.problems.push(e.to_string()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.profiles.iter().all(|p| p.entries.is_empty())
    }

    /// Why each loaded profile with entries cannot serve the machine `device` whose kernels of
    /// op `o` are build `build(o)`: every entry is for another architecture or backend (a
    /// foreign device), or for another build of its op's kernels (re-tune after they changed).
    /// One line per file, naming it. Files under `shipped` (profiles distributed for known
    /// devices) are expected to be for other devices: only a stale build is reported for them.
    pub fn unusable_for(&self, device: &Device, build: &dyn Fn(&str) -> String, shipped: Option<&Path>) -> Vec<String> {
        let mut out = Vec::new();
        for p in self.profiles.iter().filter(|p| !p.entries.is_empty()) {
            let is_shipped = shipped.is_some_and(|d| p.source.as_ref().is_some_and(|s| s.starts_with(d)));
            let name = p.source.as_ref().map_or_else(|| "<in memory>".to_string(), |s| s.display().to_string());
            let same_arch: Vec<&Entry> = p.entries.iter().filter(|e| e.device.same_arch(device)).collect();
            let list = |items: Vec<String>| {
                let mut items = items;
                items.sort();
                items.dedup();
                items.join(", ")
            };
            if same_arch.is_empty() {
                if is_shipped {
                    continue;
                }
                let devices = list(p.entries.iter().map(|e| e.device.to_string()).collect());
                out.push(format!("{name}: tuned for another device ({devices}), this machine is {device}"));
            } else if !same_arch.iter().any(|e| e.build == build(&e.op)) {
                let builds = list(same_arch.iter().map(|e| format!("{} {}", e.op, e.build)).collect());
                let now = list(same_arch.iter().map(|e| format!("{} {}", e.op, build(&e.op))).collect());
                out.push(format!("{name}: tuned for another kernel build ({builds}), this binary has {now}: re-tune"));
            }
        }
        out
    }

    /// The best entry for `q`, trying in order: exact, nearest bucket on the same device,
    /// nearest bucket on the same architecture. Entries of another kernel build never match.
    pub fn lookup(&self, q: &Query<'_>) -> Option<Found> {
        let want = bucket_shape(q.shape);
        let candidates = || {
            self.profiles
                .iter()
                .flat_map(|p| p.entries.iter().map(move |e| (p, e)))
                .filter(|(_, e)| e.build == q.build && e.op == q.op && e.dtype == q.dtype && e.layout == q.layout)
        };
        let found =
            |p: &Profile, e: &Entry, how| Found { entry: e.clone(), how, path: p.source.clone().unwrap_or_default() };
        if let Some((p, e)) = candidates().find(|(_, e)| e.device == *q.device && e.shape == want) {
            return Some(found(p, e, Match::Exact));
        }
        let nearest = |same: &dyn Fn(&Device) -> bool| {
            candidates()
                .filter(|(_, e)| same(&e.device))
                .filter_map(|(p, e)| distance(&e.shape, &want).map(|d| (d, p, e)))
                .min_by_key(|(d, _, e)| (*d, std::cmp::Reverse(e.shape.clone())))
        };
        if let Some((d, p, e)) = nearest(&|d| d.same_device(q.device)) {
            return Some(found(p, e, Match::NearestBucket { bucket: e.shape.clone(), distance: d }));
        }
        if let Some((d, p, e)) = nearest(&|d| d.same_arch(q.device)) {
            let how = Match::SameArch { device: e.device.name.clone(), bucket: e.shape.clone(), distance: d };
            return Some(found(p, e, how));
        }
        None
    }
}
