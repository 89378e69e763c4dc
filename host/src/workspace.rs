//! Per-stream device workspaces for kernels that need scratch memory on every call (the
//! small-M GEMM's split-K fix-up, the packing of unaligned GEMM operands): one buffer per CUDA
//! stream and purpose that grows on demand, so a call does not allocate. Zero-initialised when
//! allocated; kernels that keep counters there must leave them at zero. The two functions
//! below are the only places that acquire one: the place to switch to a caching allocator.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::error::{DriverContext, Result};

/// What a workspace is for: each purpose has its own buffer (the small-M counters must not be
/// overwritten by a pack).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Slot {
    /// Counters and f32 partials of the small-M split (counters kept at zero).
    SmallMSplit,
    /// Packed copies of unaligned GEMM operands.
    Pack,
}

type Cache = Mutex<HashMap<(usize, Slot), Arc<CudaSlice<u8>>>>;

/// The cached buffers, keyed by the raw stream handle and purpose. Each buffer holds its stream
/// alive, so a handle is never reused while its entry exists.
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
    cs: &Arc<CudaStream>,
    slot: Slot,
    bytes: usize,
    f: impl FnOnce(&CudaSlice<u8>) -> Result<R>,
) -> Result<R> {
    let alloc = || {
        let size = bytes.max(1).div_ceil(1 << 20) << 20;
        cs.alloc_zeros::<u8>(size).map(Arc::new).ctx(|| format!("allocating a {} MiB stream workspace", size >> 20))
    };
    let buf = {
        let mut map = cache().lock().unwrap_or_else(|p| p.into_inner());
        match map.entry((cs.cu_stream() as usize, slot)) {
            Entry::Occupied(mut o) => {
                if o.get().len() < bytes {
                    o.insert(alloc()?);
                }
                Arc::clone(o.get())
            }
            Entry::Vacant(v) => Arc::clone(v.insert(alloc()?)),
        }
    };
    f(&buf)
}

/// Device address of a workspace of at least `bytes` bytes for `slot` on `cs`, valid for
/// launches on `cs` until a later call for the same stream and slot asks for more.
pub(crate) fn stream_workspace(cs: &Arc<CudaStream>, slot: Slot, bytes: usize) -> Result<u64> {
    with_stream_workspace(cs, slot, bytes, |buf| Ok(buf.device_ptr(cs).0))
}
