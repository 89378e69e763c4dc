//! Run-time use of tuning profiles: which `ElemConfig` or `GemmConfig` an op call gets and why
//! (exact profile entry → nearest bucket → same architecture → built-in heuristic). Profiles
//! are loaded once and lookups are memoised, so an op call does no file I/O. The format itself
//! lives in `ferrotune-profile`; this file only maps the configs to and from named parameters
//! (the Clifford layer's in `tuned_clifford.rs`, re-exported here).

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use ferrotune_kernels::DType;
use ferrotune_kernels::elementwise::{ElemOp, ElemVariant};
use ferrotune_kernels::gemm::tc::TILES;
use ferrotune_profile::{Config, Match, Param, ProfileSet, Query};

use crate::backend::Backend;
use crate::config::{ElemConfig, GemmConfig, GemmPath, PackChoice};
use crate::error::{Error, Result};
use crate::ops::clifford::CliffordConfig;
use crate::ops::gemm::{Gemm, Layout, Precision};
use crate::stream::Stream;

pub use crate::build_id::{Builds, fingerprint, machine};
use crate::tuned_clifford::CliffordMemoKey;
pub use crate::tuned_clifford::{
    CliffordPass, clifford_dims, clifford_explain_in, clifford_from_params, clifford_layout, clifford_to_params,
    variant_label,
};

/// The layout of every elementwise op in profiles.
pub const ELEM_LAYOUT: &str = "contiguous";
/// The op name of GEMM entries.
pub const GEMM_OP: &str = "gemm";

/// The dtype key of a GEMM: its input type, `tf32` for f32 inputs allowed onto TF32 tensor
/// cores (`f32` for exact FFMA).
pub fn gemm_dtype_name(dtype: DType, precision: Precision) -> &'static str {
    match dtype {
        DType::F32 if precision.uses_tf32() => "tf32",
        d => d.name(),
    }
}

/// The layout key of a GEMM: A's then B's storage, `r` (row-major) or `c` (column-major).
pub fn gemm_layout(a: Layout, b: Layout) -> String {
    format!("{}{}", a.code(), b.code())
}

/// The dimensions of a GEMM as profiles key them: `[m, n, k, batch]`.
pub fn gemm_dims(g: &Gemm) -> [u64; 4] {
    [g.m as u64, g.n as u64, g.k as u64, g.batch.max(1) as u64]
}

/// A compiled tile's shape for people reading a profile: `BMxBN_kKB_wWMxWN_sS` (K bytes per
/// stage, warps, stages).
pub fn tile_label(tile: usize) -> Option<String> {
    TILES.get(tile).map(|t| format!("{}x{}_k{}B_w{}x{}_s{}", t.bm(), t.bn(), t.kb, t.wm, t.wn, t.stages))
}

/// An exact-f32 FFMA tile's shape (`ffma::TILES`), as `f32` profile entries label their
/// `tile`: `ffma_256x128x8` (BM x BN x BK).
pub fn ffma_tile_label(tile: usize) -> Option<String> {
    let f =
        |bm: &usize| format!("ffma_{bm}x{}x{}", ferrotune_kernels::gemm::ffma::BN, ferrotune_kernels::gemm::ffma::BK);
    ferrotune_kernels::gemm::ffma::TILES.get(tile).map(f)
}

/// A GEMM config as named parameters: `tile` (index into `tc::TILES`), `tile_shape` (its
/// label, checked on reading), `cpu_rows`, `split_k`, and where not automatic `path` (with
/// `sm90_tile_shape`) and `pack`.
pub fn gemm_to_params(c: &GemmConfig) -> Config {
    let mut m = Config::new();
    m.insert("tile".into(), Param::Int(c.tile as i64));
    if let Some(l) = tile_label(c.tile) {
        m.insert("tile_shape".into(), Param::Text(l));
    }
    m.insert("cpu_rows".into(), Param::Int(c.cpu_rows as i64));
    m.insert("split_k".into(), Param::Int(c.split_k as i64));
    if c.path != GemmPath::Auto {
        m.insert("path".into(), Param::Text(c.path.label()));
    }
    if let GemmPath::Sm90(t) = c.path {
        m.insert("sm90_tile_shape".into(), Param::Text(sm90_tile_label(t)));
    }
    if c.pack != PackChoice::Auto {
        m.insert("pack".into(), Param::Bool(c.pack == PackChoice::On));
    }
    m
}

/// A Hopper tile's shape for people reading a profile: the entry-name suffix
/// (`128x256x64s4`, `64x256x64s4pp`; `not compiled (<t>)` past the list, never a panic).
pub fn sm90_tile_label(t: u8) -> String {
    if t as usize >= ferrotune_kernels::gemm_sm90::TILES.len() {
        return format!("not compiled ({t})");
    }
    let v = ferrotune_kernels::gemm_sm90::Sm90Variant { dtype: crate::DType::Bf16, out_f32: false, tile: t };
    let name = v.entry_name();
    name.as_str().rsplit('_').next().unwrap_or_default().to_string()
}

/// The GEMM config from named parameters; `None` when one is missing or out of range, or the
/// tile's shape is not the one compiled at that index. `split_k` may be missing (entries
/// written before split-K existed): 1, no split.
pub fn gemm_from_params(m: &Config) -> Option<GemmConfig> {
    let int = |k: &str| match m.get(k) {
        Some(Param::Int(v)) => usize::try_from(*v).ok(),
        _ => None,
    };
    let split_k = match m.get("split_k") {
        None => 1,
        Some(_) => int("split_k")?,
    };
    // `path` is missing in entries written before the Hopper path was tunable: the plan decides.
    let path = match m.get("path") {
        None => GemmPath::Auto,
        Some(Param::Text(p)) => GemmPath::parse(p)?,
        Some(_) => return None,
    };
    if let GemmPath::Sm90(t) = path
        && m.get("sm90_tile_shape").is_some_and(|l| *l != Param::Text(sm90_tile_label(t)))
    {
        return None;
    }
    // `pack` is missing in entries written before packing was tunable: the plan decides.
    let pack = match m.get("pack") {
        None => PackChoice::Auto,
        Some(Param::Bool(true)) => PackChoice::On,
        Some(Param::Bool(false)) => PackChoice::Off,
        Some(_) => return None,
    };
    let c = GemmConfig { tile: int("tile")?, cpu_rows: int("cpu_rows")?, split_k, path, pack };
    match m.get("tile_shape") {
        // An `f32` entry names its FFMA tile (`ffma_tile_label`), every other a tensor-core one.
        Some(Param::Text(t))
            if Some(t) != tile_label(c.tile).as_ref() && Some(t) != ffma_tile_label(c.tile).as_ref() =>
        {
            return None;
        }
        Some(Param::Text(_)) | None => {}
        Some(_) => return None,
    }
    c.validate().is_ok().then_some(c)
}

/// Where a config came from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// A tuned profile entry: the file, its line, and how closely it matched.
    Profile { path: PathBuf, line: Option<usize>, how: Match },
    /// The built-in heuristic, and why no profile entry applied.
    Heuristic { why: String },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Profile { path, line: Some(l), how } => write!(f, "{how} ({}:{l})", path.display()),
            Source::Profile { path, line: None, how } => write!(f, "{how} ({})", path.display()),
            Source::Heuristic { why } => write!(f, "built-in heuristic: {why}"),
        }
    }
}

/// The config's named parameters as profiles store them.
pub fn to_params(c: &ElemConfig) -> Config {
    let mut m = Config::new();
    m.insert("threads".into(), Param::Int(c.threads.into()));
    m.insert("vec16".into(), Param::Bool(c.variant.vec16));
    m.insert("unroll".into(), Param::Int(c.variant.unroll.into()));
    m.insert("blocks_per_sm".into(), Param::Int(c.blocks_per_sm.into()));
    m.insert("cpu_chunk".into(), Param::Int(c.cpu_chunk as i64));
    m
}

/// The config from named parameters; `None` when one is missing or out of range.
pub fn from_params(m: &Config) -> Option<ElemConfig> {
    let int = |k: &str| match m.get(k) {
        Some(Param::Int(v)) => Some(*v),
        _ => None,
    };
    let u32_of = |k: &str| int(k).and_then(|v| u32::try_from(v).ok());
    let vec16 = match m.get("vec16") {
        Some(Param::Bool(b)) => *b,
        _ => return None,
    };
    Some(ElemConfig {
        threads: u32_of("threads")?,
        variant: ElemVariant { vec16, unroll: u32_of("unroll")? },
        blocks_per_sm: u32_of("blocks_per_sm")?,
        cpu_chunk: usize::try_from(int("cpu_chunk")?).ok()?,
    })
}

/// Where profiles are read from: `FERROTUNE_PROFILE` (a file or a directory) when set, else
/// `~/.config/ferrotune/profiles/` and the `profiles/` directory shipped in the repository.
pub fn default_profile_paths() -> Vec<PathBuf> {
    if let Some(p) = std::env::var_os("FERROTUNE_PROFILE") {
        return vec![PathBuf::from(p)];
    }
    let mut v = Vec::new();
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
    if let Some(c) = config {
        v.push(c.join("ferrotune/profiles"));
    }
    v.push(shipped_profiles());
    v
}

/// Loads the profiles at `paths`; files that cannot be read or parsed are in `problems`
/// (reported once per process when an op first consults the profiles, see [`check_usable`]).
pub fn load_profiles(paths: &[PathBuf]) -> ProfileSet {
    let mut all = ProfileSet::default();
    for p in paths {
        let s = ProfileSet::load(p);
        all.profiles.extend(s.profiles);
        all.problems.extend(s.problems);
    }
    all
}

static STRICT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes a profile that cannot be used an error of the op that consults it, instead of a
/// warning (also `FERROTUNE_PROFILE_STRICT=1`).
pub fn set_strict_profiles(strict: bool) {
    STRICT.store(strict, std::sync::atomic::Ordering::Relaxed);
}

/// Whether unusable profiles are errors: [`set_strict_profiles`] or `FERROTUNE_PROFILE_STRICT=1`.
pub fn strict_profiles() -> bool {
    STRICT.load(std::sync::atomic::Ordering::Relaxed)
        || std::env::var("FERROTUNE_PROFILE_STRICT").is_ok_and(|v| v != "0" && !v.is_empty())
}

/// The repository's `profiles/` directory: profiles shipped for known GPUs.
fn shipped_profiles() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../profiles"))
}

/// Why profiles in `set` cannot serve the machine behind `s`: unreadable or malformed files,
/// files tuned for another device (except the shipped ones, which are for known GPUs), files
/// tuned for another kernel build. One line each, naming the file.
pub fn unusable_profiles(set: &ProfileSet, s: &Stream) -> Vec<String> {
    let mut out = set.problems.clone();
    if let Ok((dev, builds)) = machine(s) {
        out.extend(set.unusable_for(&dev, &|op| builds.of(op), Some(&shipped_profiles())));
    }
    out
}

/// Prints each problem on stderr (and logs it) the first time this process meets it.
fn warn_once(problems: &[String]) {
    static WARNED: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
    for p in problems {
        if !warned.contains(p) {
            eprintln!("warning: tuning profile not used: {p}");
            log::warn!("tuning profile not used: {p}");
            warned.push(p.clone());
        }
    }
}

/// Reports the profiles that cannot serve this stream's machine: a warning per problem once
/// per process, or with strict profiles an `InvalidConfig` error. Checked once per machine.
pub fn check_usable(s: &Stream) -> Result<()> {
    check_usable_in(&current(), s)
}

pub(crate) fn check_usable_in(c: &Cache, s: &Stream) -> Result<()> {
    if c.set.problems.is_empty() && c.set.profiles.is_empty() {
        return Ok(());
    }
    let machine = machine_of(s);
    let problems = {
        let mut checked = c.checked.lock().unwrap_or_else(|p| p.into_inner());
        checked.entry(machine).or_insert_with(|| unusable_profiles(&c.set, s)).clone()
    };
    if problems.is_empty() {
        return Ok(());
    }
    if strict_profiles() {
        return Err(Error::InvalidConfig {
            op: "tuning profile",
            why: format!("{} (FERROTUNE_PROFILE_STRICT is set)", problems.join("; ")),
        });
    }
    warn_once(&problems);
    Ok(())
}

type MemoKey = (ElemOp, DType, u64, String);
/// (dtype key, layout key, bucketed `[m, n, k, batch]`, machine).
type GemmMemoKey = (&'static str, String, Vec<u64>, String);

pub(crate) struct Cache {
    pub(crate) set: Arc<ProfileSet>,
    memo: Mutex<HashMap<MemoKey, (ElemConfig, Source)>>,
    gemm_memo: Mutex<HashMap<GemmMemoKey, (GemmConfig, Source)>>,
    pub(crate) clifford_memo: Mutex<HashMap<CliffordMemoKey, (Option<CliffordConfig>, Source)>>,
    /// Per machine: why profiles cannot serve it (see `check_usable`).
    checked: Mutex<HashMap<String, Vec<String>>>,
}

impl Cache {
    fn new(set: ProfileSet) -> Cache {
        Cache {
            set: Arc::new(set),
            memo: Mutex::default(),
            gemm_memo: Mutex::default(),
            clifford_memo: Mutex::default(),
            checked: Mutex::default(),
        }
    }
}

fn cache() -> &'static RwLock<Option<Arc<Cache>>> {
    static CACHE: RwLock<Option<Arc<Cache>>> = RwLock::new(None);
    &CACHE
}

pub(crate) fn current() -> Arc<Cache> {
    if let Some(c) = cache().read().unwrap_or_else(|p| p.into_inner()).as_ref() {
        return c.clone();
    }
    let mut w = cache().write().unwrap_or_else(|p| p.into_inner());
    w.get_or_insert_with(|| Arc::new(Cache::new(load_profiles(&default_profile_paths())))).clone()
}

/// Uses the profiles at `path` (a file or directory) from now on, instead of the default
/// locations; `None` goes back to them. Reports a file that cannot be used as an error.
pub fn use_profiles(path: Option<PathBuf>) -> Result<()> {
    let set = match &path {
        Some(p) => {
            let set = load_profiles(std::slice::from_ref(p));
            if let Some(why) = set.problems.first() {
                return Err(Error::InvalidConfig { op: "tuning profile", why: why.clone() });
            }
            set
        }
        None => load_profiles(&default_profile_paths()),
    };
    *cache().write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(Cache::new(set)));
    Ok(())
}

/// Which config `op` on `n` elements of `dtype` gets on `backend`, and why.
pub fn explain(op: ElemOp, dtype: DType, n: usize, backend: &Backend) -> (ElemConfig, Source) {
    explain_in(&current().set, op, dtype, n, &backend.stream())
}

/// `explain` against an explicit set of profiles (what tests and tools use).
pub fn explain_in(set: &ProfileSet, op: ElemOp, dtype: DType, n: usize, s: &Stream) -> (ElemConfig, Source) {
    let device = s.gpu().map(|g| g.info());
    let heuristic = |why: String| (ElemConfig::heuristic(op, dtype, device), Source::Heuristic { why });
    if set.is_empty() {
        return heuristic("no tuning profile loaded (FERROTUNE_PROFILE or ~/.config/ferrotune/profiles)".into());
    }
    let (dev, build) = match fingerprint(s, op.name()) {
        Ok(f) => f,
        Err(e) => return heuristic(format!("no device fingerprint: {e}")),
    };
    let shape = [n as u64];
    let q =
        Query { device: &dev, build: &build, op: op.name(), dtype: dtype.name(), layout: ELEM_LAYOUT, shape: &shape };
    let Some(found) = set.lookup(&q) else {
        return heuristic(format!("no entry for {} {} on {dev} with kernel build {build}", op.name(), dtype.name()));
    };
    let line = found.entry.line;
    let src = Source::Profile { path: found.path.clone(), line, how: found.how };
    match from_params(&found.entry.config) {
        Some(c) if c.validate(op, device).is_ok() => (c, src),
        _ => heuristic(format!("the entry at {src} has an invalid config {:?}", found.entry.config)),
    }
}

/// The config `run_default` launches with: the memoised `explain` for this stream's machine
/// (an error only with strict profiles, see [`check_usable`]).
pub(crate) fn config_for(s: &Stream, op: ElemOp, dtype: DType, n: usize) -> Result<ElemConfig> {
    let c = current();
    check_usable_in(&c, s)?;
    if c.set.is_empty() {
        return Ok(ElemConfig::heuristic(op, dtype, s.gpu().map(|g| g.info())));
    }
    let key = (op, dtype, ferrotune_profile::bucket(n as u64), machine_of(s));
    let mut memo = c.memo.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((cfg, _)) = memo.get(&key) {
        return Ok(*cfg);
    }
    let (cfg, src) = explain_in(&c.set, op, dtype, n, s);
    log::debug!("{} {} n={n}: {cfg:?} from {src}", op.name(), dtype.name());
    memo.insert(key, (cfg, src));
    Ok(cfg)
}

pub(crate) fn machine_of(s: &Stream) -> String {
    match s {
        Stream::Cuda { gpu, .. } => format!("cuda{}", gpu.info().ordinal),
        Stream::Cpu(cpu) => format!("cpu{}", cpu.threads()),
    }
}

/// Which config the GEMM `g` (resolved, inputs of `dtype`) gets on `backend`, and why.
pub fn gemm_explain(g: &Gemm, dtype: DType, backend: &Backend) -> (GemmConfig, Source) {
    gemm_explain_in(&current().set, g, dtype, &backend.stream())
}

/// `gemm_explain` against an explicit set of profiles (what tests and tools use). The key is
/// (device, build, op `gemm`, dtype key, layout key, bucket of `[m, n, k, batch]`).
pub fn gemm_explain_in(set: &ProfileSet, g: &Gemm, dtype: DType, s: &Stream) -> (GemmConfig, Source) {
    let heuristic = |why: String| (gemm_heuristic(s, g, dtype), Source::Heuristic { why });
    if set.is_empty() {
        return heuristic("no tuning profile loaded (FERROTUNE_PROFILE or ~/.config/ferrotune/profiles)".into());
    }
    let (dev, build) = match fingerprint(s, GEMM_OP) {
        Ok(f) => f,
        Err(e) => return heuristic(format!("no device fingerprint: {e}")),
    };
    let dt = gemm_dtype_name(dtype, g.precision);
    let layout = gemm_layout(g.a_layout, g.b_layout);
    let shape = gemm_dims(g);
    let q = Query { device: &dev, build: &build, op: GEMM_OP, dtype: dt, layout: &layout, shape: &shape };
    let Some(found) = set.lookup(&q) else {
        return heuristic(format!("no entry for gemm {dt} {layout} on {dev} with kernel build {build}"));
    };
    let src = Source::Profile { path: found.path.clone(), line: found.entry.line, how: found.how };
    match gemm_from_params(&found.entry.config) {
        Some(c) => (c, src),
        None => heuristic(format!("the entry at {src} has an invalid config {:?}", found.entry.config)),
    }
}

/// The built-in GEMM config on this stream's machine: the GPU heuristic's tile and split
/// (exact f32: the FFMA family's split, `ops::gemm_ffma::built_in_split`), and on the CPU one
/// band per matrix (threaded by the GEMM crate).
fn gemm_heuristic(s: &Stream, g: &Gemm, dtype: DType) -> GemmConfig {
    let mut c = GemmConfig::heuristic(g.m, g.n, g.k, g.batch);
    match s {
        Stream::Cpu(_) => c.cpu_rows = GemmConfig::cpu_band_rows(g.m),
        // `FERROTUNE_FFMA_SPLIT=0` keeps the tensor cores' rule (A/B runs).
        Stream::Cuda { gpu, .. }
            if dtype == DType::F32
                && !g.precision.uses_tf32()
                && !std::env::var("FERROTUNE_FFMA_SPLIT").is_ok_and(|v| v == "0") =>
        {
            let split = crate::ops::gemm_ffma::built_in_split(g.m, g.n, g.k, g.batch, gpu.info().sm_count);
            c = if split > 1 { GemmConfig { tile: 0, split_k: split, ..c } } else { GemmConfig { split_k: 1, ..c } };
        }
        Stream::Cuda { .. } => {}
    }
    c
}

/// The config `ops::gemm` launches with when the call forces none: the memoised
/// `gemm_explain` for this stream's machine, logged once per bucket at `debug` level.
pub(crate) fn gemm_config_for(s: &Stream, g: &Gemm, dtype: DType) -> Result<GemmConfig> {
    let c = current();
    check_usable_in(&c, s)?;
    if c.set.is_empty() {
        return Ok(gemm_heuristic(s, g, dtype));
    }
    let key = (
        gemm_dtype_name(dtype, g.precision),
        gemm_layout(g.a_layout, g.b_layout),
        ferrotune_profile::bucket_shape(&gemm_dims(g)),
        machine_of(s),
    );
    let mut memo = c.gemm_memo.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((cfg, _)) = memo.get(&key) {
        return Ok(*cfg);
    }
    let (cfg, src) = gemm_explain_in(&c.set, g, dtype, s);
    log::debug!("gemm {} {} {}x{}x{} batch {}: {cfg:?} from {src}", key.0, key.1, g.m, g.n, g.k, g.batch);
    memo.insert(key, (cfg, src));
    Ok(cfg)
}

/// Deliberately launches a kernel that reads and writes an unmapped address, so the context
/// faults with an illegal-address error. Only the autotuner's fault-injection mode calls it,
/// to prove that a faulting candidate is isolated in its worker process. CPU: an error.
#[doc(hidden)]
pub fn launch_faulting_kernel(s: &Stream) -> Result<()> {
    use cudarc::driver::{LaunchConfig, PushKernelArg};
    let Stream::Cuda { stream, gpu } = s else {
        return Err(Error::InvalidConfig { op: "fault injection", why: "needs the CUDA backend".into() });
    };
    let name = crate::ops::elementwise::entry_name(ElemOp::Copy, DType::F32, ElemVariant { vec16: false, unroll: 1 });
    let kernel = gpu.kernels()?.function(&name)?;
    let (bad, n, alpha) = (0x10u64, 1usize << 20, 0f32);
    let mut b = stream.launch_builder(&kernel.func);
    b.arg(&bad).arg(&bad).arg(&n).arg(&alpha);
    let cfg = LaunchConfig { grid_dim: (1024, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: not safe by design: the pointers are invalid so that the device faults. The
    // fault stays inside the tuner's worker process, whose context is then discarded.
    unsafe { b.launch(cfg) }
        .map_err(|e| Error::Driver { context: "launching the faulting kernel".into(), source: e })?;
    s.synchronize()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_round_trip_and_reject_missing_fields() {
        for op in ElemOp::ALL {
            let c = ElemConfig::heuristic(op, DType::F16, None);
            assert_eq!(from_params(&to_params(&c)), Some(c));
        }
        let mut m = to_params(&ElemConfig::heuristic(ElemOp::Add, DType::F32, None));
        m.remove("unroll");
        assert_eq!(from_params(&m), None);
        let mut m = to_params(&ElemConfig::heuristic(ElemOp::Add, DType::F32, None));
        m.insert("threads".into(), Param::Int(-1));
        assert_eq!(from_params(&m), None);
    }

    #[test]
    fn gemm_params_round_trip_and_check_the_tile_shape() {
        for tile in 0..TILES.len() {
            for split_k in [1, 2, 16, 64] {
                let c = GemmConfig { tile, cpu_rows: 8, split_k, ..GemmConfig::DEFAULT };
                assert_eq!(gemm_from_params(&gemm_to_params(&c)), Some(c));
            }
        }
        // Entries from before split-K have no `split_k`: no split.
        let mut m = gemm_to_params(&GemmConfig { tile: 2, cpu_rows: 8, split_k: 4, ..GemmConfig::DEFAULT });
        m.remove("split_k");
        assert_eq!(gemm_from_params(&m), Some(GemmConfig { tile: 2, cpu_rows: 8, split_k: 1, ..GemmConfig::DEFAULT }));
        for bad in [Param::Int(0), Param::Int(65), Param::Int(-2), Param::Text("4".into())] {
            let mut m = gemm_to_params(&GemmConfig::DEFAULT);
            m.insert("split_k".into(), bad.clone());
            assert_eq!(gemm_from_params(&m), None, "split_k {bad:?}");
        }
        let mut m = gemm_to_params(&GemmConfig { tile: 1, cpu_rows: 8, split_k: 1, ..GemmConfig::DEFAULT });
        m.insert("tile_shape".into(), Param::Text("1x1".into()));
        assert_eq!(gemm_from_params(&m), None, "a tile index whose shape changed is not used");
        // An exact-f32 entry labels its FFMA tile; another tile's label is refused.
        let f32_tile = GemmConfig { tile: 1, path: GemmPath::Mma, ..GemmConfig::DEFAULT };
        let mut m = gemm_to_params(&f32_tile);
        m.insert("tile_shape".into(), Param::Text(ffma_tile_label(1).unwrap()));
        assert_eq!(ffma_tile_label(1).as_deref(), Some("ffma_256x128x8"));
        assert_eq!(gemm_from_params(&m), Some(f32_tile));
        m.insert("tile_shape".into(), Param::Text(ffma_tile_label(0).unwrap()));
        assert_eq!(gemm_from_params(&m), None, "the 128-row label on tile 1");
        let mut m = gemm_to_params(&GemmConfig::DEFAULT);
        m.insert("tile".into(), Param::Int(TILES.len() as i64));
        assert_eq!(gemm_from_params(&m), None, "a tile that is not compiled");
        let mut m = gemm_to_params(&GemmConfig::DEFAULT);
        m.remove("cpu_rows");
        assert_eq!(gemm_from_params(&m), None);
        assert_eq!(gemm_layout(Layout::Row, Layout::Col), "rc");
    }

    #[test]
    fn gemm_path_round_trips_and_old_entries_load_as_auto() {
        let n = ferrotune_kernels::gemm_sm90::TILES.len() as u8;
        for path in [GemmPath::Mma, GemmPath::Sm90(0), GemmPath::Sm90(n - 1)] {
            let c = GemmConfig { path, ..GemmConfig::DEFAULT };
            let m = gemm_to_params(&c);
            assert_eq!(m.get("path"), Some(&Param::Text(path.label())));
            assert_eq!(gemm_from_params(&m), Some(c));
        }
        // An entry without `path` (every profile before the Hopper path was tunable).
        let m = gemm_to_params(&GemmConfig::DEFAULT);
        assert!(!m.contains_key("path"));
        assert_eq!(gemm_from_params(&m).map(|c| c.path), Some(GemmPath::Auto));
        assert_eq!(sm90_tile_label(0), "128x256x64s4");
        assert_eq!(sm90_tile_label(4), "64x256x64s4pp");
        // A Hopper tile whose shape changed at that index, an unknown path, a tile not compiled.
        let mut m = gemm_to_params(&GemmConfig { path: GemmPath::Sm90(0), ..GemmConfig::DEFAULT });
        m.insert("sm90_tile_shape".into(), Param::Text("64x64x64s2".into()));
        assert_eq!(gemm_from_params(&m), None);
        for bad in [Param::Text("cublas".into()), Param::Text(format!("sm90:{n}")), Param::Int(1)] {
            let mut m = gemm_to_params(&GemmConfig::DEFAULT);
            m.insert("path".into(), bad.clone());
            assert_eq!(gemm_from_params(&m), None, "path {bad:?}");
        }
    }
}
