//! Tuning profiles: the versioned TOML format the autotuner writes and the host reads at run
//! time. This crate is the only place that knows the format (docs/profile-format.md): its
//! types, validation with file:line errors, atomic writes, merging, bucketing and lookup.

mod lookup;

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Spanned;

pub use lookup::{Found, Match, ProfileSet, Query};

/// The `format` value every profile carries.
pub const FORMAT: &str = "ferrotune-profile";
/// The schema version this build writes. It reads this one and [`OLDEST_VERSION`]; a file
/// with another version is refused.
pub const VERSION: u32 = 2;
/// The oldest version this build still reads (version 2 only added the optional `tflops`, so
/// every version 1 file is a valid version 2 file).
pub const OLDEST_VERSION: u32 = 1;

/// Errors reading, validating or writing a profile. Each names the file and, where the
/// problem has a place, its line and column.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}:{line}:{col}: {msg}", path.display())]
    Syntax { path: PathBuf, line: usize, col: usize, msg: String },
    #[error("{}: not a ferrotune profile: missing `format = \"{FORMAT}\"` and `version`", path.display())]
    NotAProfile { path: PathBuf },
    #[error("{}:{line}: format is {found:?}, expected \"{FORMAT}\"", path.display())]
    WrongFormat { path: PathBuf, line: usize, found: String },
    #[error("{}:{line}: unknown profile version {found} (this build reads versions {OLDEST_VERSION} to {VERSION}); retune or convert the file", path.display())]
    UnknownVersion { path: PathBuf, line: usize, found: String },
    #[error("{}:{line}: {msg}", path.display())]
    Invalid { path: PathBuf, line: usize, msg: String },
    #[error("serialising the profile: {0}")]
    Serialize(String),
}

pub type Result<T, E = ProfileError> = std::result::Result<T, E>;

/// Which machine a measurement is valid for. On CUDA: the device name, `sm_XY`, SM count and
/// driver version; on the CPU backend: `cpu`, the target architecture, worker threads and
/// `rayon`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    pub backend: String,
    pub name: String,
    /// `sm_90` (compute capability 9.0) on CUDA; `x86_64`, `aarch64` on the CPU.
    pub arch: String,
    /// SMs on CUDA; worker threads on the CPU.
    pub sm_count: u32,
    /// `13.0` (CUDA driver API version); `rayon` on the CPU.
    pub driver: String,
}

impl Device {
    /// Same hardware (a different driver version still counts as the same device).
    pub fn same_device(&self, o: &Device) -> bool {
        self.backend == o.backend && self.name == o.name && self.arch == o.arch && self.sm_count == o.sm_count
    }

    /// Same backend and architecture (e.g. two sm_90 parts).
    pub fn same_arch(&self, o: &Device) -> bool {
        self.backend == o.backend && self.arch == o.arch
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ({}, {} units, driver {})", self.backend, self.name, self.arch, self.sm_count, self.driver)
    }
}

/// One launch parameter's value. Names and meanings belong to the op family (threads,
/// vec16, unroll, ... for elementwise; tile_m, stages, split_k, ... for GEMM).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Param {
    Bool(bool),
    Int(i64),
    Text(String),
}

/// A launch config as named parameters (sorted, so files diff cleanly).
pub type Config = BTreeMap<String, Param>;

/// What an entry is for, besides the device and build: op, dtype, layout and shape bucket.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub op: String,
    pub dtype: String,
    /// `contiguous` for elementwise; `rc`, `rr`, `cr`, `cc` for GEMM; `cl<dim>_<norm|plain>` for
    /// the Clifford layer.
    pub layout: String,
    /// Bucketed dimensions: `[elements]` for elementwise, `[m, n, k, batch]` for GEMM, `[B, N]`
    /// for the Clifford layer.
    pub shape: Vec<u64>,
}

/// A config with its measured time (a runner-up of a tuning run).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ranked {
    pub median_ms: f64,
    pub config: Config,
}

/// The tuned choice for one (device, build, op, dtype, layout, shape bucket).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub op: String,
    pub dtype: String,
    pub layout: String,
    /// The shape bucket (see [`bucket`]); the key.
    pub shape: Vec<u64>,
    /// The exact shape measured.
    pub measured_shape: Vec<u64>,
    /// Hash of the kernel build (the PTX text on CUDA); a changed kernel invalidates the entry.
    pub build: String,
    pub median_ms: f64,
    /// Median absolute deviation of the timings.
    pub mad_ms: f64,
    /// Bytes the op must move per second at the median time, in GB/s.
    pub throughput_gbps: f64,
    /// Floating-point operations per second at the median time, in TFLOP/s (GEMM: 2 m n k
    /// batch / median). Since version 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tflops: Option<f64>,
    /// The built-in heuristic config's median time, measured in the same run (absent when
    /// the built-in config itself failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_ms: Option<f64>,
    pub strategy: String,
    /// Candidates measured (failed and invalid ones included).
    pub evaluations: u32,
    pub date: String,
    pub tool_version: String,
    pub device: Device,
    pub config: Config,
    #[serde(default)]
    pub runners_up: Vec<Ranked>,
    /// Line of the entry in the file it was read from (not part of the format).
    #[serde(skip)]
    pub line: Option<usize>,
}

impl Entry {
    pub fn key(&self) -> Key {
        Key { op: self.op.clone(), dtype: self.dtype.clone(), layout: self.layout.clone(), shape: self.shape.clone() }
    }

    /// Same key, device (exactly) and build: the entry `self` would replace.
    pub fn same_slot(&self, o: &Entry) -> bool {
        self.key() == o.key() && self.device == o.device && self.build == o.build
    }
}

/// How a journalled measurement ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Ran, verified against the reference, timed.
    Ok,
    /// Ran but its output did not match the reference: never picked.
    Invalid,
    /// Failed to launch, faulted, or its worker died.
    Failed,
    /// Ran past the per-candidate timeout; its worker was killed.
    Timeout,
}

/// One measured candidate of a tuning run still in progress: what makes a killed run
/// resumable. Removed when the run for its shape finishes (the entry then holds the result).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalRecord {
    pub op: String,
    pub dtype: String,
    pub layout: String,
    pub measured_shape: Vec<u64>,
    pub build: String,
    /// `search`, `baseline`, `confirm-best`, `confirm-default`.
    pub role: String,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mad_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// What the config ran, where the worker can name it exactly (a GEMM plan's launch): two
    /// configs with the same kernel are one point (older journals have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    pub device: Device,
    pub config: Config,
}

impl JournalRecord {
    /// Is this the record of measuring `config` in `role` for this shape on this device/build?
    pub fn is_for(&self, slot: &JournalSlot<'_>, role: &str, config: &Config) -> bool {
        self.matches_shape(slot) && self.role == role && &self.config == config
    }

    pub fn matches_shape(&self, s: &JournalSlot<'_>) -> bool {
        self.op == s.op
            && self.dtype == s.dtype
            && self.layout == s.layout
            && self.measured_shape == s.measured_shape
            && &self.device == s.device
            && self.build == s.build
    }
}

/// The shape a tuning run is working on (to find its journal records).
#[derive(Clone, Copy, Debug)]
pub struct JournalSlot<'a> {
    pub op: &'a str,
    pub dtype: &'a str,
    pub layout: &'a str,
    pub measured_shape: &'a [u64],
    pub device: &'a Device,
    pub build: &'a str,
}

/// A profile: tuned entries plus the journal of runs in progress.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    /// The file it was read from, if any.
    pub source: Option<PathBuf>,
    pub entries: Vec<Entry>,
    pub journal: Vec<JournalRecord>,
}

/// A warning about a profile that is usable but partly not for this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub msg: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.path.display(), self.msg),
            None => write!(f, "{}: {}", self.path.display(), self.msg),
        }
    }
}

/// What `merge` did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MergeReport {
    pub added: usize,
    pub replaced: usize,
    pub kept: usize,
}

#[derive(Serialize)]
struct DocOut<'a> {
    format: &'static str,
    version: u32,
    entry: &'a [Entry],
    journal: &'a [JournalRecord],
}

#[derive(Deserialize)]
struct Header {
    format: Option<Spanned<toml::Value>>,
    version: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DocIn {
    #[allow(dead_code)]
    format: String,
    #[allow(dead_code)]
    version: u32,
    #[serde(default)]
    entry: Vec<Spanned<Entry>>,
    #[serde(default)]
    journal: Vec<Spanned<JournalRecord>>,
}

/// 1-based line and column of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

fn syntax(path: &Path, text: &str, e: &toml::de::Error) -> ProfileError {
    let (line, col) = e.span().map_or((1, 1), |s| line_col(text, s.start));
    ProfileError::Syntax { path: path.to_path_buf(), line, col, msg: e.message().trim().to_string() }
}

impl Profile {
    /// Parses and validates `text` (read from `path`, named in errors). Refuses a missing or
    /// unknown `format`/`version` before looking at anything else.
    pub fn parse(text: &str, path: &Path) -> Result<Profile> {
        let header: Header = toml::from_str(text).map_err(|e| syntax(path, text, &e))?;
        let line_of = |s: &Spanned<toml::Value>| line_col(text, s.span().start).0;
        match (&header.format, &header.version) {
            (None, None) => return Err(ProfileError::NotAProfile { path: path.into() }),
            (Some(f), _) if f.get_ref().as_str() != Some(FORMAT) => {
                let found = f.get_ref().to_string();
                return Err(ProfileError::WrongFormat { path: path.into(), line: line_of(f), found });
            }
            (None, Some(v)) => {
                return Err(ProfileError::Invalid {
                    path: path.into(),
                    line: line_of(v),
                    msg: "missing `format`".into(),
                });
            }
            (Some(f), None) => {
                return Err(ProfileError::Invalid {
                    path: path.into(),
                    line: line_of(f),
                    msg: "missing `version`".into(),
                });
            }
            (Some(_), Some(v)) => {
                let known = OLDEST_VERSION as i64..=VERSION as i64;
                if !v.get_ref().as_integer().is_some_and(|x| known.contains(&x)) {
                    let found = v.get_ref().to_string();
                    return Err(ProfileError::UnknownVersion { path: path.into(), line: line_of(v), found });
                }
            }
        }
        let doc: DocIn = toml::from_str(text).map_err(|e| syntax(path, text, &e))?;
        let mut entries = Vec::with_capacity(doc.entry.len());
        for s in doc.entry {
            let line = line_col(text, s.span().start).0;
            let mut e = s.into_inner();
            e.line = Some(line);
            validate_entry(&e).map_err(|msg| ProfileError::Invalid { path: path.into(), line, msg })?;
            entries.push(e);
        }
        let journal = doc.journal.into_iter().map(Spanned::into_inner).collect();
        Ok(Profile { source: Some(path.to_path_buf()), entries, journal })
    }

    /// Reads and validates the profile at `path`.
    pub fn load(path: &Path) -> Result<Profile> {
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Io { path: path.into(), source })?;
        Profile::parse(&text, path)
    }

    /// Like `load`, but a missing file is an empty profile (what a first tuning run starts from).
    pub fn load_or_empty(path: &Path) -> Result<Profile> {
        if path.exists() {
            Profile::load(path)
        } else {
            Ok(Profile { source: Some(path.to_path_buf()), ..Profile::default() })
        }
    }

    /// The TOML text of this profile.
    pub fn to_toml(&self) -> Result<String> {
        let doc = DocOut { format: FORMAT, version: VERSION, entry: &self.entries, journal: &self.journal };
        let body = toml::to_string(&doc).map_err(|e| ProfileError::Serialize(e.to_string()))?;
        Ok(format!("# ferrotune tuning profile; format: docs/profile-format.md\n{body}"))
    }

    /// Writes the profile to `path` atomically: a temporary file in the same directory,
    /// flushed to disk, then renamed over `path`. A crash leaves the old file or the new one.
    pub fn save_atomic(&self, path: &Path) -> Result<()> {
        let io = |source| ProfileError::Io { path: path.into(), source };
        let text = self.to_toml()?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let name = path.file_name().map_or("profile".into(), |n| n.to_string_lossy().into_owned());
        let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(text.as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(io)?;
        // The rename itself reaches the disk with the directory (best effort: not every
        // platform can open a directory).
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Adds `e`, replacing an entry for the same key, device and build.
    pub fn upsert(&mut self, e: Entry) {
        match self.entries.iter_mut().find(|x| x.same_slot(&e)) {
            Some(x) => *x = e,
            None => self.entries.push(e),
        }
    }

    /// Merges `other` into `self`. For the same key, device and build the newer entry wins
    /// (by `date`; on a tie the faster). Journals are concatenated (duplicates dropped).
    pub fn merge(&mut self, other: &Profile) -> MergeReport {
        let mut r = MergeReport::default();
        for e in &other.entries {
            match self.entries.iter_mut().find(|x| x.same_slot(e)) {
                None => {
                    self.entries.push(e.clone());
                    r.added += 1;
                }
                Some(x) => {
                    let newer = (e.date.as_str(), -e.median_ms) > (x.date.as_str(), -x.median_ms);
                    if newer {
                        *x = e.clone();
                        r.replaced += 1;
                    } else {
                        r.kept += 1;
                    }
                }
            }
        }
        for j in &other.journal {
            if !self.journal.contains(j) {
                self.journal.push(j.clone());
            }
        }
        r
    }

    /// Puts the entries in a canonical order (op, dtype, layout, shape, device, build), so
    /// profiles built from the same entries in any order (shards merged, several GPUs, one
    /// GPU) have the same text apart from the measurements.
    pub fn sort_entries(&mut self) {
        let key = |e: &Entry| {
            (e.op.clone(), e.dtype.clone(), e.layout.clone(), e.shape.clone(), e.device.to_string(), e.build.clone())
        };
        self.entries.sort_by_key(key);
    }

    /// Entries and journal records measured on another device (or another build of their op's
    /// kernels, `build(op)`), each with its line: they are never used on `device`, and a whole
    /// profile of them is almost certainly the wrong file.
    pub fn foreign(&self, device: &Device, build: &dyn Fn(&str) -> String) -> Vec<Warning> {
        let path = self.source.clone().unwrap_or_default();
        let mut w = Vec::new();
        for e in &self.entries {
            if !e.device.same_arch(device) {
                let msg = format!("entry {} {} was measured on {}, not on this {}", e.op, e.dtype, e.device, device);
                w.push(Warning { path: path.clone(), line: e.line, msg });
            } else if e.device.same_arch(device) && e.build != build(&e.op) {
                let msg = format!(
                    "entry {} {} is for kernel build {}, not the current {}",
                    e.op,
                    e.dtype,
                    e.build,
                    build(&e.op)
                );
                w.push(Warning { path: path.clone(), line: e.line, msg });
            }
        }
        w
    }

    /// The journal record of measuring `config` in `role` for this shape, if any.
    pub fn journalled(&self, slot: &JournalSlot<'_>, role: &str, config: &Config) -> Option<&JournalRecord> {
        self.journal.iter().find(|j| j.is_for(slot, role, config))
    }

    /// Drops the journal of a finished shape.
    pub fn clear_journal(&mut self, slot: &JournalSlot<'_>) {
        self.journal.retain(|j| !j.matches_shape(slot));
    }

    /// The entry for exactly this slot, if any.
    pub fn exact(&self, key: &Key, device: &Device, build: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.key() == *key && e.device == *device && e.build == build)
    }
}

fn validate_entry(e: &Entry) -> std::result::Result<(), String> {
    let what = format!("entry {} {}", e.op, e.dtype);
    if e.op.is_empty() || e.dtype.is_empty() || e.layout.is_empty() {
        return Err(format!("{what}: op, dtype and layout must not be empty"));
    }
    if e.shape.is_empty() || e.shape.len() != e.measured_shape.len() {
        return Err(format!("{what}: shape and measured_shape must have the same, non-zero number of dimensions"));
    }
    if e.shape != bucket_shape(&e.shape) {
        return Err(format!("{what}: shape {:?} is not a bucket (each dimension a power of two)", e.shape));
    }
    if bucket_shape(&e.measured_shape) != e.shape {
        return Err(format!("{what}: measured_shape {:?} is not in bucket {:?}", e.measured_shape, e.shape));
    }
    for (name, v) in [("median_ms", Some(e.median_ms)), ("default_ms", e.default_ms), ("tflops", e.tflops)] {
        let Some(v) = v else { continue };
        if !(v.is_finite() && v > 0.0) {
            return Err(format!("{what}: {name} must be a positive number, got {v}"));
        }
    }
    if e.config.is_empty() {
        return Err(format!("{what}: config is empty"));
    }
    Ok(())
}

/// The bucket of one dimension: the largest power of two not above it (0 stays 0). Sizes
/// within a factor of two share a bucket and so a tuned config; GEMM buckets M, N, K and the
/// batch each (`[m, n, k, batch]`).
pub fn bucket(n: u64) -> u64 {
    if n == 0 { 0 } else { 1u64 << (63 - n.leading_zeros()) }
}

/// `bucket` of every dimension.
pub fn bucket_shape(shape: &[u64]) -> Vec<u64> {
    shape.iter().map(|&d| bucket(d)).collect()
}

/// A stable hash of a kernel build's text (64-bit FNV-1a, hex): equal across platforms and
/// Rust versions, so profiles written on one machine match binaries built on another.
pub fn build_hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("fnv1a64:{h:016x}")
}

/// Today's date and time in UTC, `YYYY-MM-DDTHH:MM:SSZ` (what entries record).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

#[cfg(test)]
mod tests;
