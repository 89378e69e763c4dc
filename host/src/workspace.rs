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
    /// The shifted copies of x beside a weight read in interleaved slabs (small-M).
    SmallMShift,
    /// Counters and f32 partials of the Hopper split-K (counters kept at zero).
    Sm90Split,
    /// Counters and f32 partial slabs of the streaming small-M kernel (counters kept at zero).
    SmallMStream,
}

/// A cached workspace and its stream, held alive so that its handle is never reused while the
/// entry exists, and the length of its prefix known to be zero (see [`with_counters`]).
type Entry2 = (Arc<CudaStream>, Arc<Pooled<u8>>, ZeroPrefix);
/// Bytes at the start of a workspace known to be zero, locked while a launch is queued.
type ZeroPrefix = Arc<Mutex<usize>>;
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
    let (buf, _) = entry(gpu, cs, slot, bytes)?;
    f(&buf)
}

/// The cached buffer for `slot` on `cs` of at least `bytes` bytes (a zeroed one replaces a
/// smaller), and its zero-prefix length.
fn entry(gpu: &Gpu, cs: &Arc<CudaStream>, slot: Slot, bytes: usize) -> Result<(Arc<Pooled<u8>>, ZeroPrefix)> {
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
        Ok((Arc::clone(cs), Arc::new(b), Arc::new(Mutex::new(size))))
    };
    let mut map = cache().lock().unwrap_or_else(|p| p.into_inner());
    let e = match map.entry((cs.cu_stream() as usize, slot)) {
        Entry::Occupied(mut o) => {
            if o.get().1.len() < bytes {
                o.insert(alloc()?);
            }
            o.into_mut()
        }
        Entry::Vacant(v) => v.insert(alloc()?),
    };
    Ok((Arc::clone(&e.1), Arc::clone(&e.2)))
}

/// Runs `launch` with the device address of a workspace of at least `bytes` bytes for `slot`
/// on `cs` whose first `counter_bytes` bytes are zero: kernels keep arrival counters there
/// (leaving them at zero) and write data after them, so a call whose counters reach past
/// where the last call's data began first zeroes that gap (in stream order). The buffer stays
/// alive and the entry locked while `launch` enqueues, so neither a concurrent call that grows
/// the workspace nor one that dirties it can slip between the zeroing and the launch.
pub(crate) fn with_counters<R>(
    gpu: &Gpu,
    cs: &Arc<CudaStream>,
    slot: Slot,
    bytes: usize,
    counter_bytes: usize,
    launch: impl FnOnce(u64) -> Result<R>,
) -> Result<R> {
    let (buf, clean) = entry(gpu, cs, slot, bytes.max(counter_bytes))?;
    let mut clean = clean.lock().unwrap_or_else(|p| p.into_inner());
    let ptr = buf.device_ptr(cs).0;
    if *clean < counter_bytes {
        zero(cs, ptr + *clean as u64, counter_bytes - *clean)?;
    }
    let r = launch(ptr);
    // The counters are zero again once the launch completes; what follows them is data.
    *clean = counter_bytes;
    r
}

/// Zeroes `len` bytes at `ptr` on `cs` (`cuMemsetD8Async`).
fn zero(cs: &Arc<CudaStream>, ptr: u64, len: usize) -> Result<()> {
    // SAFETY: the callers pass a range inside a live workspace buffer of this stream, kept
    // alive by their reference until the stream has run the memset.
    unsafe { cudarc::driver::result::memset_d8_async(ptr, 0, len, cs.cu_stream()) }
        .ctx(|| format!("zeroing {len} bytes of workspace counters"))
}
