//! Clifford-algebra layer ops (the Flash Clifford family) for Cl(2,0) and Cl(3,0):
//! `fused_gelu_sgp_norm` (forward and backward, `sgp_fwd.rs`, `sgp_bwd.rs`) and
//! `fused_gelu_fcgp_norm` (forward `fcgp.rs`, backward `fcgp_bwd.rs`), in f32, f16 and bf16 (f32 maths). Tensors are
//! `(C, B, N)` (component, batch, feature), contiguous. Launch parameters are a
//! [`CliffordConfig`] (`config.rs`); the SGP ops without one take a tuning profile's or the
//! heuristic's (`choice.rs`). This file holds the problem type, the checks and the
//! launch pieces the three share.

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaStream, DevicePtr, LaunchConfig, PushKernelArg, SyncOnDrop};
use ferrotune_kernels::clifford::{self as kc, CliffordKernel, ROW_VARIANTS, RowVariant, Tables};

/// Every compiled row variant (forward and FCGP assembly).
pub use ferrotune_kernels::clifford::ROW_VARIANTS as ROW_VARIANT_LIST;
pub use ferrotune_kernels::clifford::RowVariant as CliffordVariant;

mod choice;
mod config;
mod cpu_loops;
mod fcgp;
mod fcgp_bwd;
mod sgp_bwd;
mod sgp_bwd_cluster;
mod sgp_bwd_split;
mod sgp_fwd;

pub use choice::{backward_choice, backward_config, backward_entry, backward_entry_of, choice_in, forward_choice};
pub use config::CliffordConfig;
pub use fcgp::{FcgpWorkspace, fcgp_forward_gemms, fused_gelu_fcgp_norm, run_fcgp_forward};
pub use fcgp_bwd::{fused_gelu_fcgp_norm_backward, run_fcgp_backward};
pub use sgp_bwd::{fused_gelu_sgp_norm_backward, run_sgp_backward, sgp_backward_workspace_len};
pub use sgp_bwd_split::{SplitGrid, split_grid};
pub use sgp_fwd::{forward_config, fused_gelu_sgp_norm, run_sgp_forward};

use crate::DType;
use crate::backend::Gpu;
use crate::buffer::{Scalar, View};
use crate::error::{DriverContext, Error, Result};
use crate::stream::Stream;

const OP: &str = "clifford";
/// Bytes of team-reduction scratch before the weights in dynamic shared memory (see
/// kernels-gpu/src/entry/clifford.rs).
const SCRATCH_BYTES: usize = 1024;

/// One problem: the algebra Cl(`dim`,0) (2 or 3), `b` batch rows, `n` features, and whether
/// the per-grade RMS norm is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Clifford {
    pub dim: u32,
    pub b: usize,
    pub n: usize,
    pub normalize: bool,
}

impl Clifford {
    pub fn new(dim: u32, b: usize, n: usize, normalize: bool) -> Clifford {
        Clifford { dim, b, n, normalize }
    }

    /// The algebra's tables; an error for a dimension other than 2 or 3.
    pub fn tables(&self) -> Result<&'static Tables> {
        kc::tables_of(self.dim)
            .ok_or_else(|| Error::InvalidConfig { op: OP, why: format!("dimension {} (only 2 and 3)", self.dim) })
    }

    /// Elements of one multivector tensor (`C * B * N`).
    pub fn mv_len(&self) -> Result<usize> {
        let t = self.tables()?;
        t.c.checked_mul(self.b)
            .and_then(|v| v.checked_mul(self.n))
            .ok_or_else(|| Error::InvalidConfig { op: OP, why: "C * B * N overflows".into() })
    }

    /// Elements of the SGP weights (`N * W`).
    pub fn sgp_weights_len(&self) -> Result<usize> {
        Ok(self.n * self.tables()?.w)
    }

    /// Elements of the FCGP weights (`W * N * N`).
    pub fn fcgp_weights_len(&self) -> Result<usize> {
        Ok(self.tables()?.w * self.n * self.n)
    }
}

/// The entry point of a row kernel.
pub fn row_entry(kernel: CliffordKernel, dim: u32, dtype: DType, v: RowVariant) -> String {
    kc::row_entry_name(kernel, dim, dtype, v).as_str().to_string()
}

/// Every Clifford entry point in the PTX (the host launches each of them for some input).
pub fn all_entries() -> Vec<String> {
    let mut v = Vec::new();
    for dim in [2, 3] {
        for dt in DType::ALL {
            for var in ROW_VARIANTS {
                v.push(row_entry(CliffordKernel::Forward, dim, dt, var));
                v.push(row_entry(CliffordKernel::FcgpAssemble, dim, dt, var));
            }
            for var in kc::FWD_STREAM_VARIANTS {
                v.push(row_entry(CliffordKernel::Forward, dim, dt, var));
            }
            for lanes in ["v4", "v1", "v4_g", "v1_g"] {
                v.push(format!("ft_clifford_bwd_d{dim}_{}_{lanes}", dt.name()));
            }
            for var in kc::BWD_VARIANTS {
                v.push(kc::bwd_entry_name(dim, dt, var).as_str().to_string());
            }
            let (stats, feat) = kc::split_entry_names(dim, dt);
            v.push(stats.as_str().to_string());
            v.push(feat.as_str().to_string());
            v.push(format!("ft_clifford_fcgp_prod_d{dim}_{}", dt.name()));
            v.push(format!("ft_clifford_fcgp_nbwd_d{dim}_{}", dt.name()));
            v.push(format!("ft_clifford_fcgp_pbwd_d{dim}_{}", dt.name()));
            v.push(format!("ft_clifford_fcgp_wperm_d{dim}_{}", dt.name()));
        }
    }
    for dt in DType::ALL {
        v.push(format!("ft_clifford_dw_reduce_{}", dt.name()));
    }
    v
}

/// The cluster backward's entry points (`ft_clifford_bwd_d{2,3}_{dt}_v1_p{n}c`), compiled into
/// the sm_90a module only.
pub fn cluster_entries() -> Vec<String> {
    let mut v = Vec::new();
    for dim in [2, 3] {
        for dt in DType::ALL {
            for vpt in kc::BWD_CLUSTER_VPT {
                v.push(kc::bwd_cluster_entry_name(dim, dt, vpt).as_str().to_string());
            }
        }
    }
    v
}

fn check_backend(s: &Stream, what: &'static str, got: &'static str) -> Result<()> {
    if got != s.backend_name() {
        return Err(Error::BackendMismatch { op: OP, what, expected: s.backend_name(), got });
    }
    Ok(())
}

/// Exact length for a tensor the op reads or writes whole.
fn check_len(what: &'static str, got: usize, want: usize) -> Result<()> {
    if got < want {
        return Err(Error::BufferTooSmall { op: OP, what, needed: want, got });
    }
    if got != want {
        return Err(Error::ShapeMismatch { op: OP, what, expected: want, got });
    }
    Ok(())
}

/// Splits each component plane of `len = C * B * N` elements into row chunks of
/// `rows * n`: one `Vec` of `C` slices per chunk.
fn planes<T>(x: &[T], c: usize, plane: usize, chunk: usize) -> Vec<Vec<&[T]>> {
    let per: Vec<Vec<&[T]>> = x.chunks(plane).take(c).map(|pl| pl.chunks(chunk).collect()).collect();
    transpose(per)
}

fn planes_mut<T>(x: &mut [T], c: usize, plane: usize, chunk: usize) -> Vec<Vec<&mut [T]>> {
    let per: Vec<Vec<&mut [T]>> = x.chunks_mut(plane).take(c).map(|pl| pl.chunks_mut(chunk).collect()).collect();
    transpose(per)
}

fn transpose<S>(per: Vec<Vec<S>>) -> Vec<Vec<S>> {
    let chunks = per.first().map_or(0, |v| v.len());
    let mut out: Vec<Vec<S>> = (0..chunks).map(|_| Vec::with_capacity(per.len())).collect();
    for comp in per {
        for (i, s) in comp.into_iter().enumerate() {
            out[i].push(s);
        }
    }
    out
}

/// What a row-kernel launch computes.
enum RowLaunch {
    Forward { x: u64, y: u64, w: u64 },
    Assemble { d: u64 },
}

/// Blocks for `rows` batch rows.
fn grid(b: usize, cfg: &CliffordConfig, sm_count: u32) -> u32 {
    let mut blocks = b.div_ceil(cfg.rows_per_block as usize).max(1);
    if cfg.blocks_per_sm > 0 {
        blocks = blocks.min(cfg.blocks_per_sm as usize * sm_count as usize);
    }
    blocks.min(i32::MAX as usize) as u32
}

/// The variant that runs: the config's, or its one-feature form when a pointer is not aligned
/// to 4 elements (same features per thread).
fn runnable_variant<T: Scalar>(v: RowVariant, ptrs: &[u64]) -> RowVariant {
    let align = 4 * T::DTYPE.size_bytes() as u64;
    if v.vec && !ptrs.iter().all(|p| p % align == 0) {
        let vpt = if v.vpt == 1 { 4 } else { v.vpt };
        return RowVariant { vec: false, vpt, stream_w: v.stream_w };
    }
    v
}

/// Raises the dynamic shared-memory limit of `kernel` to `bytes` when above the default, or
/// says why it cannot.
fn opt_in_smem(gpu: &Gpu, kernel: &crate::module::Kernel, name: &str, bytes: usize) -> Result<u32> {
    let limit = gpu.info.shared_mem_per_block_optin as usize;
    if bytes > limit {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!(
                "{name} needs {bytes} bytes of shared memory for the weights of N features, the device allows \
                 {limit}: N is too large for this kernel"
            ),
        });
    }
    if bytes > 48 * 1024 {
        kernel
            .func
            .set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes as i32)
            .ctx(|| format!("raising the shared-memory limit of {name}"))?;
    }
    Ok(bytes as u32)
}

fn check_threads(kernel: &crate::module::Kernel, name: &str, threads: u32) -> Result<()> {
    if threads > kernel.max_threads {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!(
                "{name} uses {} registers per thread, so at most {} threads per block; {threads} requested",
                kernel.registers, kernel.max_threads
            ),
        });
    }
    Ok(())
}

fn gpu_row_kernel<T: Scalar>(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    p: &Clifford,
    cfg: &CliffordConfig,
    what: RowLaunch,
    out: u64,
    ptrs: [u64; 3],
) -> Result<()> {
    let kind = match what {
        RowLaunch::Forward { .. } => CliffordKernel::Forward,
        RowLaunch::Assemble { .. } => CliffordKernel::FcgpAssemble,
    };
    let variant = runnable_variant::<T>(cfg.variant, &ptrs);
    // The assembly has no weights: its entries are the kept-weights ones.
    let variant = if kind == CliffordKernel::FcgpAssemble { variant.keeping_w() } else { variant };
    let name = row_entry(kind, p.dim, T::DTYPE, variant);
    let kernel = gpu.kernels()?.function(&name)?;
    check_threads(&kernel, &name, cfg.threads)?;
    // Only the team-reduction scratch: the forward reads its weights from global memory.
    let smem = opt_in_smem(gpu, &kernel, &name, SCRATCH_BYTES)?;
    let launch = LaunchConfig {
        grid_dim: (grid(p.b, cfg, gpu.info.sm_count), 1, 1),
        block_dim: (cfg.threads, 1, 1),
        shared_mem_bytes: smem,
    };
    let (b, n, ld, norm, team) = (p.b, p.n, kc::fcgp_ld(p.n), p.normalize as u32, cfg.team());
    let mut lb = cs.launch_builder(&kernel.func);
    match &what {
        RowLaunch::Forward { x, y, w } => lb.arg(x).arg(y).arg(w).arg(&out).arg(&b).arg(&n),
        RowLaunch::Assemble { d } => lb.arg(d).arg(&out).arg(&b).arg(&n).arg(&ld),
    };
    lb.arg(&norm).arg(&team);
    // SAFETY: the arguments match `fwd_entry!` / `asm_entry!` in kernels-gpu/src/entry/clifford.rs
    // (pointers as u64, b, n and the FCGP's ld as usize, normalize and team as u32); the
    // caller checked that x, y and out hold C * B * N elements, w N * W (the FCGP results
    // C planes of B rows of ld f32);
    // `validate` proved team is a power of two dividing threads and that team * vpt * lanes
    // covers N; 4-feature variants run only with N % 4 == 0 and aligned pointers; the shared
    // memory holds the scratch and the weights.
    unsafe { lb.launch(launch) }.ctx(|| format!("launching {name} on {b} x {n}"))?;
    Ok(())
}

/// The device pointer of a CUDA view, with the guard that records its use on the stream.
fn device_ptr<'a, T: Scalar>(v: &'a View<'_, T>, cs: &'a CudaStream) -> Result<(u64, SyncOnDrop<'a>)> {
    match v {
        View::Cuda(v) => Ok(v.device_ptr(cs)),
        View::Cpu(_) => Err(Error::BackendMismatch { op: OP, what: "input", expected: "cuda", got: "cpu" }),
    }
}

/// A heuristic config refitted to the registers of the kernel `name` on this stream's GPU
/// (fewer threads per block where the compiled code allows fewer; unchanged on the CPU, or
/// when even one team does not fit: the launch then says why).
fn fit_to(s: &Stream, cfg: CliffordConfig, name: &str) -> Result<CliffordConfig> {
    let Some(gpu) = s.gpu() else { return Ok(cfg) };
    let k = gpu.kernels()?.function(name)?;
    Ok(cfg.fit(k.max_threads).unwrap_or(cfg))
}
