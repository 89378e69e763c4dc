//! Per-stream device workspaces for kernels that need scratch memory on every call (the
//! small-M GEMM's split-K fix-up): one zero-initialised buffer per CUDA stream that grows on
//! demand, so a call does not allocate. Kernels that use it must leave any counters they keep
//! there back at zero. One function acquires a workspace: the place to switch to a caching
//! allocator.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::error::{DriverContext, Result};

/// The cached buffers, keyed by the raw stream handle. Each buffer holds its stream alive, so
/// a handle is never reused while its entry exists.
fn cache() -> &'static Mutex<HashMap<usize, CudaSlice<u8>>> {
    static CACHE: OnceLock<Mutex<HashMap<usize, CudaSlice<u8>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Device address of at least `bytes` zero-initialised bytes (zero when first handed out; the
/// kernels restore any counters) reserved for work on `cs`. Valid for launches on `cs` until
/// a later call on the same stream asks for more: the old buffer is then freed in stream
/// order, after the launches already queued. `bytes` is rounded up to 1 MiB.
pub(crate) fn stream_workspace(cs: &Arc<CudaStream>, bytes: usize) -> Result<u64> {
    use std::collections::hash_map::Entry;
    let key = cs.cu_stream() as usize;
    let alloc = || {
        let size = bytes.max(1).div_ceil(1 << 20) << 20;
        cs.alloc_zeros::<u8>(size).ctx(|| format!("allocating a {} MiB stream workspace", size >> 20))
    };
    let mut map = cache().lock().unwrap_or_else(|p| p.into_inner());
    let buf = match map.entry(key) {
        Entry::Occupied(mut o) => {
            if o.get().len() < bytes {
                // The old buffer drops here, freed in stream order.
                o.insert(alloc()?);
            }
            o.into_mut()
        }
        Entry::Vacant(v) => v.insert(alloc()?),
    };
    let (ptr, _guard) = buf.device_ptr(cs);
    Ok(ptr)
}
