//! cuBLASLt with the GELU_BIAS epilogue as the peer of our fused `linear_bias_gelu`: the same
//! operands (X row-major, W row-major `n x k`, a bias per output column), one `cublasLtMatmul`
//! with the bias add and the GELU (cuBLASLt's tanh form) in its epilogue. Descriptors, layouts
//! and the algorithm are made once in `new`, so `launch` is the matmul call alone.

use std::ffi::c_void;
use std::mem::size_of;
use std::sync::Arc;

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys::{
    cublasComputeType_t, cublasLtEpilogue_t, cublasLtHandle_t, cublasLtMatmulAlgo_t, cublasLtMatmulDesc_t,
    cublasLtMatmulDescAttributes_t as Attr, cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
    cublasLtMatrixLayout_t, cudaDataType_t,
};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

use super::colmajor::ColMajorGemm;
use super::{GemmMath, GemmShape, PeerError, filled, operand_bytes, sample_error};
use crate::error::DriverContext;
use crate::stream::Stream;

/// Workspace offered to cuBLASLt: NVIDIA's recommendation for Hopper (32 MiB), more than enough
/// before it.
const WORKSPACE_BYTES: usize = 32 << 20;

/// Whether libcublasLt (and the driver) can be loaded; cudarc panics on first use otherwise.
pub fn cublaslt_present() -> bool {
    // SAFETY: only tries to dlopen libcublasLt; no cuBLASLt call is made.
    crate::device::driver_present() && unsafe { cudarc::cublaslt::sys::is_culib_present() }
}

/// GELU in the tanh form cuBLASLt's GELU epilogues use:
/// `0.5 v (1 + tanh(sqrt(2/π) (v + 0.044715 v³)))`.
pub fn gelu_tanh(v: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * v * (1.0 + (c * (v + 0.044715 * v * v * v)).tanh())
}

fn lt_error(context: &str) -> impl FnOnce(lt::CublasError) -> PeerError + '_ {
    move |source| PeerError::CublasLt { context: context.to_string(), source }
}

struct Handle(cublasLtHandle_t);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: created by create_handle in `new` and destroyed only here. A failure to
        // destroy leaves nothing to recover, so its status is dropped.
        let _ = unsafe { lt::destroy_handle(self.0) };
    }
}

struct MatmulDesc(cublasLtMatmulDesc_t);

impl MatmulDesc {
    /// Sets one attribute to `value`.
    ///
    /// # Safety
    /// `T` must be the attribute's documented type (its size is what cuBLASLt reads), and any
    /// pointer it holds must stay valid while the descriptor is used.
    unsafe fn set<T>(&self, attr: Attr, value: &T, what: &str) -> Result<(), PeerError> {
        // SAFETY: the descriptor is live (owned by self); `value` is a T of size_of::<T>() bytes.
        unsafe { lt::set_matmul_desc_attribute(self.0, attr, (value as *const T).cast::<c_void>(), size_of::<T>()) }
            .map_err(lt_error(what))
    }
}

impl Drop for MatmulDesc {
    fn drop(&mut self) {
        // SAFETY: created by create_matmul_desc in `new`, destroyed only here.
        let _ = unsafe { lt::destroy_matmul_desc(self.0) };
    }
}

struct Layout(cublasLtMatrixLayout_t);

impl Layout {
    /// A column-major `rows x cols` matrix of `ty` with leading dimension `ld`.
    fn new(ty: cudaDataType_t, (rows, cols): (usize, usize), ld: usize, what: &str) -> Result<Layout, PeerError> {
        lt::create_matrix_layout(ty, rows as u64, cols as u64, ld as i64).map(Layout).map_err(lt_error(what))
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        // SAFETY: created by create_matrix_layout, destroyed only here.
        let _ = unsafe { lt::destroy_matrix_layout(self.0) };
    }
}

struct Preference(cublasLtMatmulPreference_t);

impl Drop for Preference {
    fn drop(&mut self) {
        // SAFETY: created by create_matmul_pref, destroyed only here.
        let _ = unsafe { lt::destroy_matmul_pref(self.0) };
    }
}

/// `D (m x n, row-major) = gelu_tanh(X (m x k, row-major) · Wᵀ + bias)`, W `n x k` row-major,
/// bias `n`: f16 or bf16 in and out (bias too), f32 accumulation and scaling, the bias and GELU
/// applied by cuBLASLt's `CUBLASLT_EPILOGUE_GELU_BIAS`. Operands filled with values in [-1, 1).
pub struct CublasLtGeluBias {
    stream: Arc<CudaStream>,
    math: GemmMath,
    shape: GemmShape,
    desc: MatmulDesc,
    layout_a: Layout,
    layout_b: Layout,
    layout_d: Layout,
    algo: cublasLtMatmulAlgo_t,
    handle: Handle,
    workspace: CudaSlice<u8>,
    x: CudaSlice<u8>,
    w: CudaSlice<u8>,
    bias: CudaSlice<u8>,
    d: CudaSlice<u8>,
}

impl std::fmt::Debug for CublasLtGeluBias {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let GemmShape { m, n, k } = self.shape;
        write!(f, "CublasLtGeluBias({} {m}x{n}x{k})", self.math.name())
    }
}

impl CublasLtGeluBias {
    /// Checks the sizes and the math (f16, bf16), allocates and fills the operands, builds the
    /// descriptors and asks cuBLASLt's heuristic for the algorithm it will run.
    pub fn new(stream: &Stream, math: GemmMath, shape: GemmShape) -> Result<CublasLtGeluBias, PeerError> {
        let args = ColMajorGemm::row_times_transposed(shape)?;
        let ty = match math {
            GemmMath::F16 => cudaDataType_t::CUDA_R_16F,
            GemmMath::Bf16 => cudaDataType_t::CUDA_R_16BF,
            GemmMath::F32 | GemmMath::Tf32 => {
                return Err(PeerError::Unsupported {
                    what: "cuBLASLt GELU_BIAS",
                    why: format!("{} operands (the peer runs f16 and bf16)", math.name()),
                });
            }
        };
        let Some(cs) = stream.cuda_stream() else {
            return Err(PeerError::NeedsCuda { what: "cuBLASLt GELU_BIAS", got: stream.backend_name() });
        };
        if !cublaslt_present() {
            return Err(PeerError::Unavailable("libcublasLt could not be loaded (is it on LD_LIBRARY_PATH?)".into()));
        }
        cs.context().bind_to_thread().ctx(|| "making the context current for cuBLASLt".into())?;
        let GemmShape { m, n, k } = shape;
        // Our W is cuBLAS's A and our X its B (see ColMajorGemm::row_times_transposed).
        let x = filled(cs, math, operand_bytes(args.len_b(), math), 8)?;
        let w = filled(cs, math, operand_bytes(args.len_a(), math), 9)?;
        let bias = filled(cs, math, operand_bytes(n, math), 10)?;
        let d = filled(cs, math, operand_bytes(args.len_c(), math), 11)?;
        let workspace = cs.alloc_zeros::<u8>(WORKSPACE_BYTES).ctx(|| "allocating the cuBLASLt workspace".into())?;

        let handle = Handle(lt::create_handle().map_err(lt_error("creating a cuBLASLt handle"))?);
        let desc = MatmulDesc(
            lt::create_matmul_desc(cublasComputeType_t::CUBLAS_COMPUTE_32F, cudaDataType_t::CUDA_R_32F)
                .map_err(lt_error("creating the matmul descriptor"))?,
        );
        {
            let (bias_ptr, _rb) = bias.device_ptr(cs);
            // SAFETY: TRANSA/TRANSB are cublasOperation_t (int32), EPILOGUE a cublasLtEpilogue_t
            // (uint32), BIAS_POINTER a device pointer (CUdeviceptr, 8 bytes) to `bias`, n elements
            // of `ty` (the default bias type for an f16/bf16 D), owned by the returned value
            // alongside the descriptor, so it outlives every matmul that reads it.
            unsafe {
                desc.set(
                    Attr::CUBLASLT_MATMUL_DESC_TRANSA,
                    &(cublasOperation_t::CUBLAS_OP_T as i32),
                    "setting TRANSA",
                )?;
                desc.set(
                    Attr::CUBLASLT_MATMUL_DESC_TRANSB,
                    &(cublasOperation_t::CUBLAS_OP_N as i32),
                    "setting TRANSB",
                )?;
                desc.set(
                    Attr::CUBLASLT_MATMUL_DESC_EPILOGUE,
                    &cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_BIAS,
                    "setting GELU_BIAS",
                )?;
                desc.set(Attr::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, "setting the bias pointer")?;
            }
        }
        let layout_a = Layout::new(ty, args.a_stored(), args.lda, "describing W")?;
        let layout_b = Layout::new(ty, args.b_stored(), args.ldb, "describing X")?;
        let layout_d = Layout::new(ty, (args.m, args.n), args.ldc, "describing D")?;
        let pref = Preference(lt::create_matmul_pref().map_err(lt_error("creating the preference"))?);
        let ws = WORKSPACE_BYTES as u64;
        // SAFETY: the preference is live; MAX_WORKSPACE_BYTES is a uint64_t.
        unsafe {
            lt::set_matmul_pref_attribute(
                pref.0,
                cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&ws as *const u64).cast(),
                size_of::<u64>(),
            )
        }
        .map_err(lt_error("setting the workspace size"))?;
        // SAFETY: handle, descriptor, layouts (C and D share one) and preference are live.
        let heuristic = unsafe {
            lt::get_matmul_algo_heuristic(handle.0, desc.0, layout_a.0, layout_b.0, layout_d.0, layout_d.0, pref.0)
        }
        .map_err(lt_error(&format!("finding an algorithm for {}x{}x{} {}", m, n, k, math.name())))?;
        Ok(CublasLtGeluBias {
            stream: cs.clone(),
            math,
            shape,
            desc,
            layout_a,
            layout_b,
            layout_d,
            algo: heuristic.algo,
            handle,
            workspace,
            x,
            w,
            bias,
            d,
        })
    }

    pub fn math(&self) -> GemmMath {
        self.math
    }

    pub fn shape(&self) -> GemmShape {
        self.shape
    }

    /// Enqueues `D = gelu_tanh(X Wᵀ + bias)` on the stream; does not wait.
    pub fn launch(&mut self) -> Result<(), PeerError> {
        self.stream.context().bind_to_thread().ctx(|| "making the context current for cuBLASLt".into())?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (w, _rw) = self.w.device_ptr(&self.stream);
        let (x, _rx) = self.x.device_ptr(&self.stream);
        let (_bias, _rbias) = self.bias.device_ptr(&self.stream);
        let (d, _rd) = self.d.device_ptr_mut(&self.stream);
        let (ws, _rws) = self.workspace.device_ptr_mut(&self.stream);
        // SAFETY: the layouts describe exactly the allocations made in `new` (W: k x n, ld k;
        // X: k x m, ld k; D: n x m, ld n, in elements of the math's type), the bias pointer in
        // the descriptor is `self.bias`, alive as long as self; C aliases D with beta = 0 (allowed:
        // same layout); `algo` came from the heuristic for these very descriptors and needs at
        // most the WORKSPACE_BYTES offered; alpha and beta are f32 host values as the f32 scale
        // type requires; the stream is this context's.
        unsafe {
            lt::matmul(
                self.handle.0,
                self.desc.0,
                (&alpha as *const f32).cast(),
                (&beta as *const f32).cast(),
                w as *const c_void,
                self.layout_a.0,
                x as *const c_void,
                self.layout_b.0,
                d as *const c_void,
                self.layout_d.0,
                d as *mut c_void,
                self.layout_d.0,
                &self.algo,
                ws as *mut c_void,
                WORKSPACE_BYTES,
                self.stream.cu_stream() as _,
            )
        }
        .map_err(lt_error("cublasLtMatmul with GELU_BIAS"))
    }

    /// Runs once and checks `samples` elements of D against `gelu_tanh(Σ x·w + bias)` in f64
    /// from the operands read back; returns the worst error relative to
    /// `|d| + sqrt(Σ (x·w)² + bias²)`, or `Mismatch` above the math's tolerance.
    pub fn verify(&mut self, samples: usize) -> Result<f64, PeerError> {
        self.launch()?;
        let back = |buf: &CudaSlice<u8>| self.stream.clone_dtoh(buf).ctx(|| "reading a GEMM operand back".into());
        let (x, w, bias, d) = (back(&self.x)?, back(&self.w)?, back(&self.bias)?, back(&self.d)?);
        let GemmShape { m, n, k } = self.shape;
        let e = self.math.element_bytes();
        let at = |v: &[u8], idx: usize| self.math.decode(&v[idx * e..idx * e + e]);
        let mut worst = 0.0f64;
        for s in 0..samples {
            let (i, j) = ((s * 7919 + s / 3) % m, (s * 104_729 + 17) % n);
            let b = at(&bias, j);
            let (mut acc, mut sq) = (b, b * b);
            for p in 0..k {
                let t = at(&x, i * k + p) * at(&w, j * k + p);
                acc += t;
                sq += t * t;
            }
            worst = worst.max(sample_error(at(&d, i * n + j), gelu_tanh(acc), sq));
        }
        if worst > self.math.tolerance() {
            return Err(PeerError::Mismatch { math: self.math.name(), error: worst, tolerance: self.math.tolerance() });
        }
        Ok(worst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_tanh_has_its_known_values() {
        assert_eq!(gelu_tanh(0.0), 0.0);
        assert!((gelu_tanh(1.0) - 0.841_192).abs() < 1e-6, "{}", gelu_tanh(1.0));
        assert!((gelu_tanh(-1.0) + 0.158_808).abs() < 1e-6, "{}", gelu_tanh(-1.0));
        assert!((gelu_tanh(8.0) - 8.0).abs() < 1e-12 && gelu_tanh(-8.0).abs() < 1e-12);
    }

    #[test]
    fn the_cpu_backend_and_f32_get_typed_errors() {
        let backend = crate::Backend::new(crate::BackendChoice::Cpu).unwrap();
        let s = backend.stream();
        let shape = GemmShape { m: 64, n: 48, k: 32 };
        let err = CublasLtGeluBias::new(&s, GemmMath::Bf16, shape).unwrap_err();
        assert!(matches!(err, PeerError::NeedsCuda { got: "cpu", .. }), "{err}");
        let err = CublasLtGeluBias::new(&s, GemmMath::F32, shape).unwrap_err();
        assert!(matches!(err, PeerError::Unsupported { .. }), "{err}");
        let err = CublasLtGeluBias::new(&s, GemmMath::Bf16, GemmShape { k: 0, ..shape }).unwrap_err();
        assert!(matches!(err, PeerError::InvalidShape { .. }), "{err}");
    }
}
