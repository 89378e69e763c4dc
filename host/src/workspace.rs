//! Per-stream device workspaces for kernels that need scratch memory on every call (the
//! small-M GEMM's split-K fix-up, the Hopper split-K's tree reduction, the packing of unaligned GEMM operands): one buffer per CUDA
//! stream and purpose that grows on demand, so a call does not allocate. Zero-initialised when
//! allocated; kernels that keep counters there must leave them at zero. The buffers are blocks
//! of the device's caching pool (`pool/`), so they count in its statistics and limit.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::backend::Gpu;
use crate::error::{DriverContext, Error, Result};
use crate::pool::Pooled;

/// What a workspace is for: each purpose has its own buffer (the small-M counters must not be
/// overwritten by a pack).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Slot {
    /// Counters and f32 partials of the small-M split (counters kept at zero).
    SmallMSplit,
    /// Packed copies of unaligned GEMM operands.
    Pack,
    /// Counters and f32 partials of the Hopper split-K (counters kept at zero).
    Sm90Split,
}

/// A cached workspace and its stream, held alive so that its handle is never reused while the
/// entry exists.
type Entry2 = (Arc<CudaStream>, Arc<Pooled<u8>>);
type Cache = Mutex<HashMap<(usize, Slot), Entry2>>;

/// The cached buffers, keyed by the raw stream handle and purpose.
fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Runs `f` on a workspace of at least `bytes` bytes for `slot` on `cs`. The cache is not
/// locked while `f` runs (a packed GEMM planned again may ask for another slot's workspace);
/// `f` holds its own reference, so a concurrent call that replaces a too-small entry (by a
/// zeroed one, rounded up to 1 MiB) leaves this one alive until `f` is done, and the old
/// buffer is then freed in stream order, after the launches already queued.
pub(crate) fn with_stream_workspace<R>(
    gpu: &Gpu,
    cs: &Arc<CudaStream>,
    slot: Slot,
    bytes: usize,
    f: impl FnOnce(&CudaSlice<u8>) -> Result<R>,
) -> Result<R> {
    let alloc = || -> Result<Entry2> {
        // A block allocated during a capture would belong to the graph's private pool; warm
        // the call up before capturing it instead.
        if gpu.pool.is_capturing(cs) {
            return Err(Error::Capture {
                op: "gemm",
                why: format!(
                    "a {slot:?} workspace of {bytes} bytes would be allocated inside the capture: run the call once before capturing it"
                ),
            });
        }
        let size = bytes.max(1).div_ceil(1 << 20) << 20;
        let mut b = Pooled::<u8>::uninit(&gpu.pool, cs, size)?;
        cs.memset_zeros(&mut *b).ctx(|| format!("zeroing a {} MiB stream workspace", size >> 20))?;
        Ok((Arc::clone(cs), Arc::new(b)))
    };
    let buf = {
        let mut map = cache().lock().unwrap_or_else(|p| p.into_inner());
        match map.entry((cs.cu_stream() as usize, slot)) {
            Entry::Occupied(mut o) => {
                if o.get().1.len() < bytes {
                    o.insert(alloc()?);
                }
                Arc::clone(&o.get().1)
            }
            Entry::Vacant(v) => Arc::clone(&v.insert(alloc()?).1),
        }
    };
    f(&buf)
}

/// Device address of a workspace of at least `bytes` bytes for `slot` on `cs`, valid for
/// launches on `cs` until a later call for the same stream and slot asks for more.
pub(crate) fn stream_workspace(gpu: &Gpu, cs: &Arc<CudaStream>, slot: Slot, bytes: usize) -> Result<u64> {
    with_stream_workspace(gpu, cs, slot, bytes, |buf| Ok(buf.device_ptr(cs).0))
}
