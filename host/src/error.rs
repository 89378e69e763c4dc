//! The library's one error type: every failure an op, a buffer or the runtime can report.

use cudarc::driver::DriverError;
use cudarc::driver::sys::CUresult;

/// Everything that can go wrong in ferrotune. Bad input is always reported here, before any
/// kernel is launched; nothing panics on user input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No CUDA driver or no device: the CUDA backend cannot be used.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// The PTX was not built into this binary (see the build warning "GPU kernels not built").
    #[error("GPU kernels not built into this binary: {0}")]
    KernelsNotBuilt(String),
    /// The device is older than the oldest architecture the PTX targets.
    #[error("unsupported device {name} (compute capability {major}.{minor}); ferrotune needs 8.0 or newer")]
    UnsupportedDevice { name: String, major: i32, minor: i32 },
    /// Two operands of an op disagree in length or shape.
    #[error("{op}: shape mismatch: {what} has {got} elements, expected {expected}")]
    ShapeMismatch { op: &'static str, what: &'static str, expected: usize, got: usize },
    /// A buffer is smaller than the op needs.
    #[error("{op}: buffer too small: {what} has {got} elements, needs {needed}")]
    BufferTooSmall { op: &'static str, what: &'static str, needed: usize, got: usize },
    /// An input that must not be empty is.
    #[error("{op}: {what} must not be empty")]
    EmptyInput { op: &'static str, what: &'static str },
    /// The op has no kernel for this element type.
    #[error("{op}: unsupported dtype {dtype}")]
    UnsupportedDtype { op: &'static str, dtype: &'static str },
    /// A launch configuration the kernels or the device cannot run.
    #[error("invalid config for {op}: {why}")]
    InvalidConfig { op: &'static str, why: String },
    /// Operands live on different backends (a CPU buffer passed to a CUDA stream...).
    #[error("{op}: operand {what} lives on the {got} backend, the stream on {expected}")]
    BackendMismatch { op: &'static str, what: &'static str, expected: &'static str, got: &'static str },
    /// A size that does not fit: on the host (fallible allocation failed or the size overflows),
    /// on the device (above its free memory, or the driver said so). `requested` and `available`
    /// are bytes; `requested == usize::MAX` means it overflows the address space, and both are 0
    /// when the driver reported the failure without sizes. Checked before any work starts.
    #[error("{}", oom_message(*requested, *available, what))]
    OutOfMemory { requested: usize, available: usize, what: String },
    /// A memory pool could not serve a request: its byte limit, or the memory behind it, is
    /// exhausted even after its cache was released. Any backend's pool reports this.
    #[error(
        "out of pool memory: requested {requested} bytes with {allocated} allocated and {reserved} reserved \
         (limit {limit:?}): {detail}"
    )]
    PoolExhausted { requested: usize, allocated: usize, reserved: usize, limit: Option<usize>, detail: String },
    /// Pool memory returned on a stream that neither allocated it nor was recorded on it.
    #[error("{op}: foreign stream: {detail}")]
    ForeignStream { op: &'static str, detail: String },
    /// A stream capture (CUDA graph) failed or was misused: an unsupported call inside the
    /// capture (a synchronize, a host copy), the default stream, a nested capture.
    #[error("{op}: graph capture: {why}")]
    Capture { op: &'static str, why: String },
    /// An object of one device used with another's stream (a graph replayed elsewhere...).
    #[error("{op}: made on device {expected}, used on device {got}")]
    WrongDevice { op: &'static str, expected: usize, got: usize },
    /// A device ordinal that does not exist on this machine.
    #[error("device {requested} does not exist ({present} CUDA devices visible)")]
    DeviceIndex { requested: usize, present: usize },
    /// A collective across devices failed: NCCL missing, a timeout, ranks that disagree.
    #[error(transparent)]
    Collective(#[from] crate::nccl::CollectiveError),
    /// Any other CUDA driver error, with what was being done.
    #[error("CUDA error during {context}: {source}")]
    Driver { context: String, source: DriverError },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Bytes for people: `1.5 GiB`, `512 B`.
pub fn human_bytes(b: usize) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{b} B") } else { format!("{v:.1} {}", UNITS[u]) }
}

/// The one-line message of [`Error::OutOfMemory`].
fn oom_message(requested: usize, available: usize, what: &str) -> String {
    match (requested, available) {
        (usize::MAX, _) => format!("out of memory: {what}: the size overflows the address space"),
        (0, 0) => format!("out of memory: {what}"),
        (r, a) => format!("out of memory: {what} needs {}, {} available", human_bytes(r), human_bytes(a)),
    }
}

/// Attaches what was being done to a driver error; out-of-memory becomes its own kind.
pub(crate) trait DriverContext<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> DriverContext<T> for std::result::Result<T, DriverError> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| {
            if source.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                Error::OutOfMemory { requested: 0, available: 0, what: context() }
            } else {
                Error::Driver { context: context(), source }
            }
        })
    }
}
