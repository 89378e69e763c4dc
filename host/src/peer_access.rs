//! The raw driver calls for peer access between two GPUs, each behind one small safe
//! function: can A read B's memory, how the driver ranks that link, enable it for ordinary
//! allocations (`cuCtxEnablePeerAccess`) and for stream-ordered pool memory
//! (`cuMemPoolSetAccess`, which pools need: they ignore the context-level switch).

use cudarc::driver::sys::{self, CUdevice_P2PAttribute as P2pAttr, CUresult};
use cudarc::driver::{CudaContext, DriverError};

use crate::error::{DriverContext, Result};

/// What the driver says about the link from one device to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerLink {
    /// `cuDeviceCanAccessPeer`: kernels and copies on `from` may address `to`'s memory.
    pub can_access: bool,
    /// `CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK`: relative rank of the link (0 = best the
    /// system has; higher = slower); meaningful only when `can_access`.
    pub performance_rank: i32,
    /// `CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED`: atomics over the link are native
    /// (NVLink links have them; PCIe peer links in practice do not).
    pub native_atomics: bool,
}

impl PeerLink {
    /// The link's kind as far as the driver's attributes tell: the driver API has no
    /// "NVLink" flag (NVML has), so native atomics stand for an NVLink-class link.
    pub fn kind(&self) -> &'static str {
        match (self.can_access, self.native_atomics) {
            (false, _) => "none (copies staged through host memory)",
            (true, true) => "P2P, NVLink-class (native atomics)",
            (true, false) => "P2P, PCIe-class (no native atomics)",
        }
    }
}

/// Reads the driver's peer attributes for the pair `from → to` (two different devices).
pub fn peer_link(from: &CudaContext, to: &CudaContext) -> Result<PeerLink> {
    let what = || format!("reading peer attributes of devices {} -> {}", from.ordinal(), to.ordinal());
    let (a, b) = (from.cu_device(), to.cu_device());
    let mut can = 0i32;
    // SAFETY: writes one int through a valid pointer; both device handles come from live
    // contexts, so the driver is initialised.
    unsafe { sys::cuDeviceCanAccessPeer(&mut can, a, b) }.result().ctx(what)?;
    let attr = |attr: P2pAttr| -> Result<i32> {
        let mut v = 0i32;
        // SAFETY: as above; `attr` is a valid enumerator of the driver's header.
        unsafe { sys::cuDeviceGetP2PAttribute(&mut v, attr, a, b) }.result().ctx(what)?;
        Ok(v)
    };
    Ok(PeerLink {
        can_access: can != 0,
        performance_rank: attr(P2pAttr::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK)?,
        native_atomics: attr(P2pAttr::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED)? != 0,
    })
}

/// Lets `from`'s context address memory allocated in `to`'s context (`cuMemAlloc`-style
/// memory). Idempotent: "already enabled" counts as success.
pub fn enable_peer_access(from: &CudaContext, to: &CudaContext) -> Result<()> {
    let what = || format!("enabling peer access {} -> {}", from.ordinal(), to.ordinal());
    from.bind_to_thread().ctx(what)?;
    // SAFETY: `from` is bound to this thread (the call acts on the current context) and
    // `to.cu_ctx()` is a live context kept alive by the borrow; flags must be 0.
    let r = unsafe { sys::cuCtxEnablePeerAccess(to.cu_ctx(), 0) };
    match r {
        CUresult::CUDA_SUCCESS | CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
        other => Err(DriverError(other)).ctx(what),
    }
}

/// Gives `accessor` read-write access to `owner`'s current memory pool (what cudarc's
/// stream-ordered `alloc` uses: the default pool, or one a pool manager installed with
/// `cuDeviceSetMemPool`), so kernels on `accessor` may read pool allocations of `owner`
/// directly. A pool installed later needs the call again.
pub fn grant_pool_access(owner: &CudaContext, accessor: &CudaContext) -> Result<()> {
    let what = || format!("granting device {} access to device {}'s memory pool", accessor.ordinal(), owner.ordinal());
    owner.bind_to_thread().ctx(what)?;
    // SAFETY: the device handle comes from a live context; the pool handle is the device's
    // current pool, alive while it is installed.
    let pool = unsafe { cudarc::driver::result::device::get_mem_pool(owner.cu_device()) }.ctx(what)?;
    let desc = sys::CUmemAccessDesc {
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: accessor.cu_device(),
        },
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: one valid descriptor, count 1; the pool handle is live (see above).
    unsafe { sys::cuMemPoolSetAccess(pool, &desc, 1) }.result().ctx(what)
}
