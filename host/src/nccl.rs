//! Finding NCCL and naming a communicator: whether cudarc can load the library (and, when
//! it cannot, where a `libnccl.so.2` is and how to make it loadable), the unique id that
//! ranks share (hex text, passed by file or environment like torchrun does), and the
//! errors collectives report. The collectives themselves are in `collective.rs`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why a collective (or getting ready for one) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollectiveError {
    /// cudarc cannot load NCCL in this process.
    #[error("NCCL unavailable: {0}")]
    Unavailable(String),
    /// NCCL returned a failure code.
    #[error("NCCL error during {context}: {code}")]
    Nccl { context: String, code: String },
    /// The operation did not finish in time; the communicator was aborted (`ncclCommAbort`),
    /// so a peer that never arrives cannot hang the caller.
    #[error("{op} did not complete within {} ms; the communicator was aborted", after.as_millis())]
    Timeout { op: &'static str, after: Duration },
    /// The ranks called the same collective with different element counts.
    #[error("{op}: ranks disagree on the element count: rank {rank} has {got}, rank 0 has {expected}")]
    SizeMismatch { op: &'static str, rank: usize, expected: usize, got: usize },
    /// An earlier timeout aborted this communicator; make a new one.
    #[error("{op}: the communicator was aborted after an earlier failure")]
    Aborted { op: &'static str },
    /// A rank number outside the world, or an empty world.
    #[error("invalid rank {rank} for a world of {world}")]
    BadRank { rank: usize, world: usize },
    /// A unique id that is not 256 hex digits, or one that never arrived.
    #[error("NCCL unique id: {0}")]
    BadId(String),
}

/// The environment variable naming `libnccl.so.2` (the file, or the directory holding it).
pub const NCCL_PATH_ENV: &str = "FERROTUNE_NCCL_PATH";
/// The environment variable carrying the unique id to every rank (hex, see [`NcclId`]).
pub const NCCL_ID_ENV: &str = "FERROTUNE_NCCL_ID";

/// Whether cudarc can load NCCL in this process (it looks for `libnccl.so`, `.so.13`, `.so.12`
/// ... on the loader's path, not for `libnccl.so.2`).
pub fn nccl_loadable() -> bool {
    // SAFETY: only tries to dlopen the library under cudarc's candidate names.
    crate::device::driver_present() && unsafe { cudarc::nccl::sys::is_culib_present() }
}

/// `Ok` when collectives can run here; otherwise why not and what to do about it.
pub fn require_nccl() -> Result<(), CollectiveError> {
    if nccl_loadable() {
        return Ok(());
    }
    let hint = match find_nccl_file() {
        Some(p) => format!(
            "found {} but cudarc loads NCCL only as libnccl.so, libnccl.so.13, .so.12 ... from the \
             loader's path, fixed when the process starts: start it with LD_LIBRARY_PATH holding a \
             directory where libnccl.so links to that file (`ferrotune::nccl::loader_dir` makes one; \
             `cargo xtask` does this itself)",
            p.display()
        ),
        None => format!(
            "no libnccl.so on the loader's path, {NCCL_PATH_ENV} unset, and no nvidia/nccl/lib/libnccl.so.2 \
             in python3's site-packages (pip install nvidia-nccl-cu12, or set {NCCL_PATH_ENV})"
        ),
    };
    Err(CollectiveError::Unavailable(hint))
}

/// NCCL's version as `major.minor.patch` (`ncclGetVersion`).
pub fn nccl_version() -> Result<String, CollectiveError> {
    require_nccl()?;
    let v = cudarc::nccl::result::get_nccl_version()
        .map_err(|e| CollectiveError::Nccl { context: "ncclGetVersion".into(), code: format!("{:?}", e.0) })?;
    // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
    Ok(format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100))
}

/// Where a `libnccl.so*` file is: `FERROTUNE_NCCL_PATH` (a file, or a directory holding
/// `libnccl.so.2` / `libnccl.so`), else the one NCCL's pip wheel installs for python3.
pub fn find_nccl_file() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(NCCL_PATH_ENV).map(PathBuf::from) {
        return nccl_in(&p);
    }
    let out = std::process::Command::new("python3")
        .args(["-c", "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let dir = String::from_utf8(out.stdout).ok()?;
    nccl_in(Path::new(dir.trim()))
}

/// `p` itself when it is a file, else `p/libnccl.so.2` or `p/libnccl.so` when present.
fn nccl_in(p: &Path) -> Option<PathBuf> {
    if p.is_file() {
        return Some(p.to_path_buf());
    }
    ["libnccl.so.2", "libnccl.so"].iter().map(|n| p.join(n)).find(|f| f.is_file())
}

/// A private directory holding `libnccl.so` → `lib` (a symbolic link; replaced when it
/// points elsewhere). Put it first on `LD_LIBRARY_PATH` of a process you start: the loader
/// reads that variable once, at process start, and `dlopen("libnccl.so")` does not match an
/// already-loaded `libnccl.so.2` (glibc compares the soname), so preloading cannot help.
pub fn loader_dir(lib: &Path) -> std::io::Result<PathBuf> {
    let lib = lib.canonicalize()?;
    let tag = lib
        .to_string_lossy()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let dir = std::env::temp_dir().join(format!("ferrotune-nccl-{tag:016x}"));
    std::fs::create_dir_all(&dir)?;
    let link = dir.join("libnccl.so");
    if std::fs::read_link(&link).ok().as_deref() != Some(lib.as_path()) {
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&lib, &link)?;
    }
    Ok(dir)
}

/// `LD_LIBRARY_PATH` for a child process that must load NCCL: `dir` first, then the
/// current value.
pub fn library_path_with(dir: &Path) -> String {
    match std::env::var("LD_LIBRARY_PATH") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", dir.display()),
        _ => dir.display().to_string(),
    }
}

/// An NCCL unique id: what every rank of a communicator must share. Rank 0 makes one
/// ([`NcclId::new`]) and hands it out as 256 hex digits, by file or environment.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct NcclId(pub [u8; 128]);

impl std::fmt::Debug for NcclId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NcclId({}…)", &self.to_hex()[..16])
    }
}

impl NcclId {
    /// A fresh id from NCCL (`ncclGetUniqueId`).
    pub fn new() -> Result<NcclId, CollectiveError> {
        require_nccl()?;
        let id = cudarc::nccl::result::get_uniqueid()
            .map_err(|e| CollectiveError::Nccl { context: "ncclGetUniqueId".into(), code: format!("{:?}", e.0) })?;
        Ok(NcclId(id.internal.map(|c| c as u8)))
    }

    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn from_hex(s: &str) -> Result<NcclId, CollectiveError> {
        let s = s.trim();
        if s.len() != 256 || !s.is_ascii() {
            return Err(CollectiveError::BadId(format!("expected 256 hex digits, got {} characters", s.len())));
        }
        let mut out = [0u8; 128];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| {
                CollectiveError::BadId(format!("'{}' at digit {} is not hex", &s[2 * i..2 * i + 2], 2 * i))
            })?;
        }
        Ok(NcclId(out))
    }

    /// The id in `FERROTUNE_NCCL_ID`.
    pub fn from_env() -> Result<NcclId, CollectiveError> {
        let v = std::env::var(NCCL_ID_ENV).map_err(|_| CollectiveError::BadId(format!("{NCCL_ID_ENV} is not set")))?;
        NcclId::from_hex(&v)
    }

    /// Writes the id to `path` atomically (a temporary file renamed into place), so a rank
    /// polling for it never reads half an id.
    pub fn write_file(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        std::fs::write(&tmp, self.to_hex())?;
        std::fs::rename(&tmp, path)
    }

    /// Waits up to `timeout` for rank 0's id file at `path`, then reads it.
    pub fn read_file(path: &Path, timeout: Duration) -> Result<NcclId, CollectiveError> {
        let t0 = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(path) {
                return NcclId::from_hex(&text);
            }
            if t0.elapsed() >= timeout {
                return Err(CollectiveError::BadId(format!(
                    "{} did not appear within {} ms",
                    path.display(),
                    timeout.as_millis()
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub(crate) fn raw(&self) -> cudarc::nccl::sys::ncclUniqueId {
        cudarc::nccl::sys::ncclUniqueId { internal: self.0.map(|b| b as core::ffi::c_char) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_hex_files() {
        let mut bytes = [0u8; 128];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i * 37 % 256) as u8;
        }
        let id = NcclId(bytes);
        assert_eq!(NcclId::from_hex(&id.to_hex()).unwrap(), id);
        assert_eq!(NcclId::from_hex(&format!(" {}\n", id.to_hex())).unwrap(), id);
        let dir = std::env::temp_dir().join(format!("ferrotune-id-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("nccl.id");
        id.write_file(&path).unwrap();
        assert_eq!(NcclId::read_file(&path, Duration::from_secs(1)).unwrap(), id);
        assert_eq!(NcclId(id.0).raw().internal.map(|c| c as u8), id.0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_ids_and_missing_files_are_typed_errors() {
        for bad in ["", "00", &"g".repeat(256), &"0".repeat(255), &"é".repeat(128)] {
            assert!(matches!(NcclId::from_hex(bad), Err(CollectiveError::BadId(_))), "{bad}");
        }
        let missing = std::env::temp_dir().join("ferrotune-no-such-id-file");
        let t0 = Instant::now();
        let e = NcclId::read_file(&missing, Duration::from_millis(50)).unwrap_err();
        assert!(matches!(e, CollectiveError::BadId(_)) && t0.elapsed() < Duration::from_secs(5), "{e}");
    }

    #[test]
    fn missing_nccl_is_a_typed_error_that_says_what_to_do() {
        if nccl_loadable() {
            println!("missing_nccl_is_a_typed_error_that_says_what_to_do: skipped: NCCL is loadable here");
            return;
        }
        let e = require_nccl().unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, CollectiveError::Unavailable(_)), "{m}");
        assert!(m.contains("libnccl.so") && (m.contains(NCCL_PATH_ENV) || m.contains("LD_LIBRARY_PATH")), "{m}");
        assert!(matches!(NcclId::new(), Err(CollectiveError::Unavailable(_))));
    }

    #[test]
    fn loader_dirs_link_libnccl_so_to_the_file() {
        let dir = std::env::temp_dir().join(format!("ferrotune-fake-nccl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join("libnccl.so.2");
        std::fs::write(&lib, b"not a library").unwrap();
        assert_eq!(nccl_in(&dir), Some(lib.clone()));
        assert_eq!(nccl_in(&lib), Some(lib.clone()));
        assert_eq!(nccl_in(&dir.join("nothing")), None);
        let ld = loader_dir(&lib).unwrap();
        assert_eq!(std::fs::read_link(ld.join("libnccl.so")).unwrap(), lib.canonicalize().unwrap());
        assert_eq!(loader_dir(&lib).unwrap(), ld, "stable for the same file");
        assert!(library_path_with(&ld).starts_with(&ld.display().to_string()));
        std::fs::remove_dir_all(&ld).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
