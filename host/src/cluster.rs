//! Thread-block clusters: the one launch cudarc's builder lacks, `cuLaunchKernelEx` with a
//! cluster dimension, and the occupancy query for it (how many clusters of a kernel the GPU
//! holds at once, which sizes a persistent grid). Both are small safe wrappers over the raw
//! driver calls (`cudarc::driver::sys`).

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Mutex;

use cudarc::driver::sys::{self, CUfunction_attribute, CUlaunchAttribute, CUlaunchAttributeID, CUlaunchConfig};
use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr, DriverError, LaunchConfig};

/// A kernel's arguments in parameter order: the address of each value, borrowed for as long as
/// the list lives (the driver copies the values at the launch).
#[derive(Default)]
pub struct ClusterArgs<'a> {
    ptrs: Vec<*mut c_void>,
    _borrow: PhantomData<&'a ()>,
}

impl<'a> ClusterArgs<'a> {
    pub fn new() -> Self {
        ClusterArgs { ptrs: Vec::new(), _borrow: PhantomData }
    }

    /// Appends the next argument, passed by value as the kernel's parameter of type `T`.
    pub fn arg<T: DeviceRepr>(&mut self, v: &'a T) -> &mut Self {
        self.ptrs.push(v as *const T as *mut c_void);
        self
    }
}

/// The launch configuration with one attribute, the cluster dimension (`x` blocks along the
/// grid's x, 1 along y and z). `attr` must outlive every use of the result.
fn config(cs: &CudaStream, cfg: LaunchConfig, attr: &mut CUlaunchAttribute) -> CUlaunchConfig {
    CUlaunchConfig {
        gridDimX: cfg.grid_dim.0,
        gridDimY: cfg.grid_dim.1,
        gridDimZ: cfg.grid_dim.2,
        blockDimX: cfg.block_dim.0,
        blockDimY: cfg.block_dim.1,
        blockDimZ: cfg.block_dim.2,
        sharedMemBytes: cfg.shared_mem_bytes,
        hStream: cs.cu_stream(),
        attrs: attr as *mut CUlaunchAttribute,
        numAttrs: 1,
    }
}

fn cluster_attr(x: u32) -> CUlaunchAttribute {
    // SAFETY: an all-zero attribute is a valid value of this plain C struct; the id and the
    // cluster member are then set.
    let mut attr: CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = x;
    attr.value.clusterDim.y = 1;
    attr.value.clusterDim.z = 1;
    attr
}

/// Launches `f` on `cs` in clusters of `cluster_x` blocks along x (`cfg.grid_dim.0` a multiple
/// of it).
///
/// # Safety
/// As cudarc's `LaunchArgs::launch`: `args` match the kernel's parameters in number, order and
/// type, every pointer among them is valid for what the kernel does with it until the launch
/// completes, and the kernel is correct for this grid, block, shared memory and cluster shape.
pub unsafe fn launch(
    cs: &CudaStream,
    f: &CudaFunction,
    cfg: LaunchConfig,
    cluster_x: u32,
    args: &mut ClusterArgs<'_>,
) -> Result<(), DriverError> {
    cs.context().bind_to_thread()?;
    let mut attr = cluster_attr(cluster_x);
    let c = config(cs, cfg, &mut attr);
    // SAFETY: `c` and the attribute it points to live across the call; the argument pointers
    // are borrowed from live values (`ClusterArgs`); the rest is the caller's.
    unsafe { sys::cuLaunchKernelEx(&c, f.cu_function(), args.ptrs.as_mut_ptr(), std::ptr::null_mut()).result() }
}

/// Lets `f` run in clusters of more than the portable 8 blocks (the H100 takes 16): sets the
/// function's `NON_PORTABLE_CLUSTER_SIZE_ALLOWED`, which both the occupancy query and the
/// launch of such a cluster need. Clusters of up to 8 blocks need nothing.
pub fn allow_cluster(f: &CudaFunction, cluster_x: u32) -> Result<(), DriverError> {
    if cluster_x > 8 {
        f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)?;
    }
    Ok(())
}

/// How many clusters of `cluster_x` blocks of `f` (with `cfg`'s block and shared memory) the
/// device runs at once (`cuOccupancyMaxActiveClusters`); 0 where none fits.
pub fn max_active_clusters(
    cs: &CudaStream,
    f: &CudaFunction,
    cfg: LaunchConfig,
    cluster_x: u32,
) -> Result<u32, DriverError> {
    cs.context().bind_to_thread()?;
    let mut attr = cluster_attr(cluster_x);
    let c = config(cs, cfg, &mut attr);
    let mut n: std::ffi::c_int = 0;
    // SAFETY: `c` and its attribute live across the call, `n` is a valid out pointer; the
    // query launches nothing.
    unsafe { sys::cuOccupancyMaxActiveClusters(&mut n, f.cu_function(), &c).result()? };
    Ok(n.max(0) as u32)
}

/// [`max_active_clusters`], asked of the driver once per
/// function (the answer depends only on the function, its block and shared memory, which a
/// tile fixes).
pub fn max_active_clusters_cached(
    cs: &CudaStream,
    f: &CudaFunction,
    probe: LaunchConfig,
    cl: u32,
) -> Result<u32, DriverError> {
    static FIT: Mutex<BTreeMap<(usize, u32, u32), u32>> = Mutex::new(BTreeMap::new());
    let key = (f.cu_function() as usize, probe.shared_mem_bytes, cl);
    if let Some(&n) = FIT.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(n);
    }
    let n = max_active_clusters(cs, f, probe, cl)?;
    FIT.lock().unwrap_or_else(|p| p.into_inner()).insert(key, n);
    Ok(n)
}
