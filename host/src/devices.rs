//! Several GPUs at once: which devices to open (`all`, `0,1`, `0-3`, checked against what is
//! visible), a backend per device, the peer topology between them with peer access enabled
//! where the driver allows it, and copies between devices (peer copies, or staged through
//! pinned host memory where there is no peer path).

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut, sys};

use crate::backend::{Backend, Gpu};
use crate::buffer::{Scalar, View, ViewMut};
use crate::device::device_count;
use crate::error::{DriverContext, Error, Result};
use crate::peer_access::{PeerLink, enable_peer_access, grant_pool_access, peer_link};
use crate::stream::Stream;

/// Parses a device list: `all` (every one of `present` devices), comma-separated ordinals
/// and ranges (`0,1`, `0-3`, `2,0`). Order is kept as written; duplicates, ordinals past
/// `present` and empty lists are typed errors.
pub fn parse_device_list(spec: &str, present: usize) -> Result<Vec<usize>> {
    let bad = |why: String| Error::InvalidConfig { op: "device list", why };
    let spec = spec.trim();
    if spec.eq_ignore_ascii_case("all") {
        if present == 0 {
            return Err(Error::NoDevice("`all` devices requested, none is visible".into()));
        }
        return Ok((0..present).collect());
    }
    let mut out: Vec<usize> = Vec::new();
    for part in spec.split(',').map(str::trim) {
        let num =
            |s: &str| s.trim().parse::<usize>().map_err(|_| bad(format!("'{s}' in '{spec}' is not a device ordinal")));
        let range = match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(bad(format!("range '{part}' runs backwards")));
                }
                a..=b
            }
            None => {
                let a = num(part)?;
                a..=a
            }
        };
        for d in range {
            if d >= present {
                return Err(Error::DeviceIndex { requested: d, present });
            }
            if out.contains(&d) {
                return Err(bad(format!("device {d} named twice in '{spec}'")));
            }
            out.push(d);
        }
    }
    Ok(out)
}

impl Backend {
    /// The CUDA backend on device `ordinal` (with its kernels loaded); a typed
    /// `DeviceIndex` error when there is no such device.
    pub fn on_device(ordinal: usize) -> Result<Backend> {
        let present = device_count()?;
        if ordinal >= present {
            return Err(Error::DeviceIndex { requested: ordinal, present });
        }
        let gpu = Gpu::new(ordinal)?;
        gpu.kernels()?;
        Ok(Backend::Cuda(gpu))
    }
}

/// How a copy between two devices travelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyPath {
    /// Both views are on one device: an ordinary device-to-device copy.
    SameDevice,
    /// `cuMemcpyPeerAsync` over the peer link.
    Peer,
    /// Device → pinned host → device, in chunks (no peer access between the pair).
    Staged,
}

/// Which path `copy` may take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CopyMode {
    /// Peer when the pair has peer access enabled, staged otherwise.
    #[default]
    Auto,
    /// Always staged through host memory (the fallback, forced: for tests and comparison).
    Staged,
}

/// The links between every ordered pair of a device set (`links[i][j]`: from `i` to `j`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    pub ordinals: Vec<usize>,
    pub links: Vec<Vec<Option<PeerLink>>>,
    /// Whether peer access was enabled from `i` to `j` (both contexts and pools).
    pub enabled: Vec<Vec<bool>>,
}

/// Several CUDA devices opened together, peer access enabled where the driver allows it.
pub struct DeviceSet {
    backends: Vec<Backend>,
    topology: Topology,
}

impl DeviceSet {
    /// Every visible device.
    pub fn all() -> Result<DeviceSet> {
        let n = device_count()?;
        DeviceSet::open(&(0..n).collect::<Vec<_>>())
    }

    /// The devices `ordinals` (see [`parse_device_list`] for a user's spelling of them).
    pub fn open(ordinals: &[usize]) -> Result<DeviceSet> {
        if ordinals.is_empty() {
            return Err(Error::EmptyInput { op: "DeviceSet::open", what: "device list" });
        }
        let present = device_count()?;
        for (i, &d) in ordinals.iter().enumerate() {
            if d >= present {
                return Err(Error::DeviceIndex { requested: d, present });
            }
            if ordinals[..i].contains(&d) {
                return Err(Error::InvalidConfig { op: "DeviceSet::open", why: format!("device {d} named twice") });
            }
        }
        // Kernels load on each device's first op (copies and collectives need none).
        let backends = ordinals.iter().map(|&d| Ok(Backend::Cuda(Gpu::new(d)?))).collect::<Result<Vec<_>>>()?;
        let n = backends.len();
        let mut links = vec![vec![None; n]; n];
        let mut enabled = vec![vec![false; n]; n];
        for i in 0..n {
            for j in 0..n {
                if i == j {
                    continue;
                }
                let (a, b) = (gpu(&backends[i]).context(), gpu(&backends[j]).context());
                let link = peer_link(a, b)?;
                if link.can_access {
                    enable_peer_access(a, b)?;
                    grant_pool_access(b, a)?;
                    enabled[i][j] = true;
                }
                links[i][j] = Some(link);
            }
        }
        Ok(DeviceSet { backends, topology: Topology { ordinals: ordinals.to_vec(), links, enabled } })
    }

    pub fn len(&self) -> usize {
        self.backends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.backends.is_empty()
    }

    /// The backend of the set's `i`-th device (not ordinal `i`: see `topology().ordinals`).
    pub fn backend(&self, i: usize) -> &Backend {
        &self.backends[i]
    }

    pub fn backends(&self) -> &[Backend] {
        &self.backends
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Copies `src` (on the set's device `from`) into `dst` (on device `to`, same length),
    /// queued on `dst_stream` (a stream of device `to`), and returns the path taken. Peer
    /// copies need peer access between the pair; otherwise (or with `CopyMode::Staged`) the
    /// data goes through pinned host memory and the call returns when it has arrived.
    pub fn copy<T: Scalar>(
        &self,
        (from, src): (usize, &View<'_, T>),
        (to, dst): (usize, &mut ViewMut<'_, T>),
        dst_stream: &Stream,
        mode: CopyMode,
    ) -> Result<CopyPath> {
        let n = self.len();
        if from >= n || to >= n {
            return Err(Error::DeviceIndex { requested: from.max(to), present: n });
        }
        if src.len() != dst.len() {
            return Err(Error::ShapeMismatch {
                op: "peer copy",
                what: "destination",
                expected: src.len(),
                got: dst.len(),
            });
        }
        let dst_gpu = gpu(&self.backends[to]);
        if dst_stream.gpu().is_none_or(|g| !Arc::ptr_eq(g, dst_gpu)) {
            return Err(Error::InvalidConfig {
                op: "peer copy",
                why: format!("the stream is not on the destination device (set index {to})"),
            });
        }
        let (View::Cuda(s), ViewMut::Cuda(d), Some(cs)) = (src, &mut *dst, dst_stream.cuda_stream()) else {
            return Err(Error::BackendMismatch { op: "peer copy", what: "buffer", expected: "cuda", got: "cpu" });
        };
        let path = if from == to {
            CopyPath::SameDevice
        } else if mode == CopyMode::Auto && self.topology.enabled[to][from] && self.topology.enabled[from][to] {
            CopyPath::Peer
        } else {
            CopyPath::Staged
        };
        match path {
            CopyPath::SameDevice | CopyPath::Peer => {
                cs.memcpy_dtod(s, d).ctx(|| format!("copying {} elements between devices", src.len()))?
            }
            CopyPath::Staged => staged_copy(gpu(&self.backends[from]), s, cs, d)?,
        }
        Ok(path)
    }
}

/// The GPU of a backend the set opened (always CUDA).
fn gpu(b: &Backend) -> &Arc<Gpu> {
    match b {
        Backend::Cuda(g) => g,
        Backend::Cpu(_) => unreachable!("DeviceSet opens CUDA backends only"),
    }
}

/// Elements per staging chunk (64 MiB of f32).
const STAGE_CHUNK: usize = 16 << 20;

/// Device → pinned host (on the source's stream) → device (on the destination's), chunk by
/// chunk; each chunk's download completes before its upload is queued, and its upload before
/// the buffer is reused. The host buffer is portable pinned memory, so both contexts copy
/// it at pinned speed.
fn staged_copy<T: Scalar>(
    src_gpu: &Gpu,
    src: &CudaView<'_, T>,
    dst_cs: &Arc<CudaStream>,
    dst: &mut CudaViewMut<'_, T>,
) -> Result<()> {
    let len = src.len();
    if len == 0 {
        return Ok(());
    }
    let src_cs = src_gpu.context().default_stream();
    let alloc = |n: usize| {
        // SAFETY: the contents are written by the device-to-host copy before they are read.
        unsafe { src_gpu.context().alloc_pinned_with_flags::<T>(n, sys::CU_MEMHOSTALLOC_PORTABLE) }
            .ctx(|| format!("allocating {n} pinned staging elements"))
    };
    let mut host = alloc(STAGE_CHUNK.min(len))?;
    let mut off = 0;
    while off < len {
        let n = host.len().min(len - off);
        if n != host.len() {
            host = alloc(n)?;
        }
        let what = || format!("staging elements {off}..{} through host memory", off + n);
        src_cs.memcpy_dtoh(&src.slice(off..off + n), &mut host).ctx(what)?;
        src_cs.synchronize().ctx(what)?;
        // The upload goes through a plain slice of the (portable, pinned) buffer: handing the
        // buffer itself to the destination's stream would record the source context's event
        // on it (CUDA_ERROR_INVALID_CONTEXT). The driver still sees pinned memory.
        let staged = host.as_slice().ctx(what)?;
        dst_cs.memcpy_htod(staged, &mut dst.slice_mut(off..off + n)).ctx(what)?;
        dst_cs.synchronize().ctx(what)?;
        off += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_lists_parse_all_lists_and_ranges() {
        assert_eq!(parse_device_list("all", 3).unwrap(), [0, 1, 2]);
        assert_eq!(parse_device_list("ALL", 1).unwrap(), [0]);
        assert_eq!(parse_device_list("0,1", 2).unwrap(), [0, 1]);
        assert_eq!(parse_device_list(" 1 , 0 ", 2).unwrap(), [1, 0]);
        assert_eq!(parse_device_list("0-3", 4).unwrap(), [0, 1, 2, 3]);
        assert_eq!(parse_device_list("4,0-1", 8).unwrap(), [4, 0, 1]);
    }

    #[test]
    fn device_lists_reject_missing_devices_duplicates_and_junk() {
        assert!(matches!(parse_device_list("2", 2), Err(Error::DeviceIndex { requested: 2, present: 2 })));
        assert!(matches!(parse_device_list("0-2", 2), Err(Error::DeviceIndex { requested: 2, present: 2 })));
        assert!(matches!(parse_device_list("all", 0), Err(Error::NoDevice(_))));
        for bad in ["", "0,,1", "x", "-1", "1-0", "0,0", "0-1,1", "1.5"] {
            let e = parse_device_list(bad, 4).unwrap_err();
            assert!(matches!(e, Error::InvalidConfig { op: "device list", .. }), "{bad}: {e}");
        }
        let msg = parse_device_list("7", 2).unwrap_err().to_string();
        assert!(msg.contains("device 7") && msg.contains("2 CUDA devices"), "{msg}");
    }
}
