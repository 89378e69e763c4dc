//! Backend choice: the CUDA device (through the embedded PTX) or the CPU (the same kernel
//! maths through rayon). Chosen automatically, by option, or by `FERROTUNE_BACKEND`.

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaContext, CudaStream};

use crate::device::{DeviceInfo, device_count};
use crate::error::{DriverContext, Error, Result};
use crate::module::{Kernels, select_ptx};
use crate::pool::DevicePool;
use crate::stream::Stream;

/// Which backend to use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendChoice {
    /// CUDA when a usable device and the PTX are present, else the CPU.
    #[default]
    Auto,
    Cuda,
    Cpu,
}

impl FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(BackendChoice::Auto),
            "cuda" | "gpu" => Ok(BackendChoice::Cuda),
            "cpu" => Ok(BackendChoice::Cpu),
            other => Err(format!("unknown backend '{other}' (expected auto, cuda or cpu)")),
        }
    }
}

impl BackendChoice {
    /// `FERROTUNE_BACKEND` (auto | cuda | cpu), or `Auto` when unset.
    pub fn from_env() -> Result<BackendChoice> {
        match std::env::var("FERROTUNE_BACKEND") {
            Ok(v) => v.parse().map_err(|why| Error::InvalidConfig { op: "FERROTUNE_BACKEND", why }),
            Err(_) => Ok(BackendChoice::Auto),
        }
    }
}

/// The CUDA side: one context, its device's capabilities and the loaded kernels.
pub struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) info: DeviceInfo,
    pub(crate) pool: Arc<DevicePool>,
    kernels: OnceLock<Result<Kernels, String>>,
    /// A stream held for the `Gpu`'s life. cudarc synchronizes the whole context when a
    /// context object goes from no stream to one (`CudaContext::new_stream` with event
    /// tracking on), which fails, and breaks the capture, while another thread captures a
    /// stream of the device; holding one makes that transition here, before any capture
    /// (`tests/pool_threads.rs`).
    _keeper: Arc<CudaStream>,
}

impl Gpu {
    /// Opens device `ordinal`; fails with a typed error when there is no driver or device, or
    /// when the device is older than sm_80.
    pub fn new(ordinal: usize) -> Result<Arc<Gpu>> {
        let n = device_count()?;
        if ordinal >= n {
            return Err(Error::NoDevice(format!("device {ordinal} requested, {n} present")));
        }
        let ctx = CudaContext::new(ordinal).ctx(|| format!("creating a context on device {ordinal}"))?;
        let info = DeviceInfo::query(&ctx)?;
        if info.compute_capability.0 < 8 {
            let (major, minor) = info.compute_capability;
            return Err(Error::UnsupportedDevice { name: info.name, major, minor });
        }
        let pool = DevicePool::new(ctx.clone());
        let _keeper = ctx.new_stream().ctx(|| format!("creating a stream on device {ordinal}"))?;
        Ok(Arc::new(Gpu { ctx, info, pool, kernels: OnceLock::new(), _keeper }))
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The device's caching allocator (every buffer and workspace comes from it).
    pub fn pool(&self) -> &Arc<DevicePool> {
        &self.pool
    }

    /// The kernels, loaded on first use (once per context).
    pub(crate) fn kernels(&self) -> Result<&Kernels> {
        let k = self.kernels.get_or_init(|| {
            let (arch, ptx) = select_ptx(self.info.compute_capability).map_err(|e| e.to_string())?;
            Kernels::load(&self.ctx, self.info.compute_capability, arch, ptx).map_err(|e| e.to_string())
        });
        k.as_ref().map_err(|e| Error::KernelsNotBuilt(e.clone()))
    }

    /// Architecture of the PTX module in use (`sm_90`...).
    pub fn ptx_arch(&self) -> Result<&'static str> {
        Ok(self.kernels()?.arch)
    }

    /// Whether the kernels came from the embedded cubin (no JIT) rather than the PTX.
    pub fn kernels_from_cubin(&self) -> Result<bool> {
        Ok(self.kernels()?.from_cubin)
    }
}

/// The CPU side: a rayon pool the ops run in.
pub struct Cpu {
    pub(crate) pool: rayon::ThreadPool,
}

impl Cpu {
    /// A pool of `threads` workers (0 = one per core).
    pub fn new(threads: usize) -> Result<Arc<Cpu>> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("ferrotune-cpu-{i}"))
            .build()
            .map_err(|e| Error::InvalidConfig { op: "cpu backend", why: e.to_string() })?;
        Ok(Arc::new(Cpu { pool }))
    }

    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Runs `f` inside the backend's pool (rayon work in `f` uses its threads).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.install(f)
    }
}

/// A backend ready to run ops.
#[derive(Clone)]
pub enum Backend {
    Cuda(Arc<Gpu>),
    Cpu(Arc<Cpu>),
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Cuda(g) => write!(f, "Cuda({}, {})", g.info.name, g.info.arch()),
            Backend::Cpu(c) => write!(f, "Cpu({} threads)", c.threads()),
        }
    }
}

impl Backend {
    /// Opens the backend `choice` asks for. `Auto` falls back to the CPU when there is no
    /// usable device or no PTX, and logs why (`log::info`); `Cuda` returns that error.
    pub fn new(choice: BackendChoice) -> Result<Backend> {
        match choice {
            BackendChoice::Cpu => Ok(Backend::Cpu(Cpu::new(0)?)),
            BackendChoice::Cuda => {
                let gpu = Gpu::new(0)?;
                gpu.kernels()?;
                Ok(Backend::Cuda(gpu))
            }
            BackendChoice::Auto => match Backend::new(BackendChoice::Cuda) {
                Ok(b) => Ok(b),
                Err(why) => {
                    log::info!("CUDA backend unavailable ({why}); using the CPU backend");
                    Backend::new(BackendChoice::Cpu)
                }
            },
        }
    }

    /// `Backend::new(BackendChoice::from_env()?)`.
    pub fn from_env() -> Result<Backend> {
        Backend::new(BackendChoice::from_env()?)
    }

    pub fn name(&self) -> &'static str {
        match self {
            Backend::Cuda(_) => "cuda",
            Backend::Cpu(_) => "cpu",
        }
    }

    /// The device's capabilities, when this is the CUDA backend.
    pub fn device(&self) -> Option<&DeviceInfo> {
        match self {
            Backend::Cuda(g) => Some(&g.info),
            Backend::Cpu(_) => None,
        }
    }

    /// The default stream (CUDA) or the pool (CPU).
    pub fn stream(&self) -> Stream {
        match self {
            Backend::Cuda(g) => Stream::Cuda { stream: g.ctx.default_stream(), gpu: g.clone() },
            Backend::Cpu(c) => Stream::Cpu(c.clone()),
        }
    }

    /// A new stream with a priority (lower numbers run first; the CPU backend ignores it).
    pub fn stream_with_priority(&self, priority: i32) -> Result<Stream> {
        match self {
            Backend::Cuda(g) => {
                let stream = g
                    .ctx
                    .new_stream_with_priority(priority)
                    .ctx(|| format!("creating a stream with priority {priority}"))?;
                Ok(Stream::Cuda { stream, gpu: g.clone() })
            }
            Backend::Cpu(c) => Ok(Stream::Cpu(c.clone())),
        }
    }

    /// The stream priorities the device supports: (lowest, highest); the highest is the
    /// numerically smallest. The CPU backend has one priority, (0, 0).
    pub fn stream_priority_range(&self) -> Result<(i32, i32)> {
        match self {
            Backend::Cuda(g) => {
                g.ctx.bind_to_thread().ctx(|| "binding the context".into())?;
                cudarc::driver::result::stream::get_priority_range().ctx(|| "reading stream priorities".into())
            }
            Backend::Cpu(_) => Ok((0, 0)),
        }
    }

    /// A new stream with the default priority.
    pub fn new_stream(&self) -> Result<Stream> {
        match self {
            Backend::Cuda(g) => {
                let stream = g.ctx.new_stream().ctx(|| "creating a stream".into())?;
                Ok(Stream::Cuda { stream, gpu: g.clone() })
            }
            Backend::Cpu(c) => Ok(Stream::Cpu(c.clone())),
        }
    }
}
