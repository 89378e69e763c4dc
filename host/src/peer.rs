//! Vendor peers for the bench's compute ceilings and comparisons: one cuBLAS GEMM per call on
//! device operands of the stream, so the best GEMM rate per dtype is measured in the same run as
//! our kernels; a strided-batched cuBLAS GEMM (`batched`) and a cuBLASLt GEMM with the GELU_BIAS
//! epilogue (`lt`) on the layouts of our batched and fused ops (`colmajor`: how those map onto
//! cuBLAS's arguments). cuBLAS and cuBLASLt are loaded at run time; where they (or a device) are
//! missing the answer is a typed `PeerError`, never a panic.

use std::sync::Arc;

use cudarc::cublas::CudaBlas;
use cudarc::cublas::result::{CublasError, gemm_ex};
use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType_t};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

use crate::device::driver_present;
use crate::error::{DriverContext, Error};
use crate::stream::Stream;

mod batched;
mod colmajor;
mod lt;

pub use batched::CublasBatchedGemm;
pub use lt::{CublasLtGeluBias, cublaslt_present, gelu_tanh};

/// What a GEMM peer computes in: operand types and whether tensor cores may round to TF32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmMath {
    /// f32 operands, f32 products (SGEMM: the CUDA cores, no tensor cores).
    F32,
    /// f32 operands, products on tensor cores with inputs rounded to TF32.
    Tf32,
    /// f16 operands and result, f32 accumulation.
    F16,
    /// bf16 operands and result, f32 accumulation.
    Bf16,
}

impl GemmMath {
    pub const ALL: [GemmMath; 4] = [GemmMath::F32, GemmMath::Tf32, GemmMath::F16, GemmMath::Bf16];

    /// The name used in bench rows and JSON (`f32`, `tf32`, `f16`, `bf16`).
    pub const fn name(self) -> &'static str {
        match self {
            GemmMath::F32 => "f32",
            GemmMath::Tf32 => "tf32",
            GemmMath::F16 => "f16",
            GemmMath::Bf16 => "bf16",
        }
    }

    pub fn from_name(s: &str) -> Option<GemmMath> {
        GemmMath::ALL.into_iter().find(|m| m.name() == s)
    }

    /// Bytes of one operand element.
    pub const fn element_bytes(self) -> usize {
        match self {
            GemmMath::F32 | GemmMath::Tf32 => 4,
            GemmMath::F16 | GemmMath::Bf16 => 2,
        }
    }

    /// Largest error [`CublasGemm::verify`] accepts, relative to `|c| + sqrt(Σ (a·b)²)`: the
    /// rounding of the inputs (TF32, bf16) or of the output (f16, bf16) sets it.
    pub const fn tolerance(self) -> f64 {
        match self {
            GemmMath::F32 => 1e-4,
            GemmMath::Tf32 | GemmMath::F16 => 1e-2,
            GemmMath::Bf16 => 2e-2,
        }
    }

    /// One element of this math's type, little-endian, widened to f64.
    fn decode(self, bytes: &[u8]) -> f64 {
        match self {
            GemmMath::F32 | GemmMath::Tf32 => f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as f64,
            GemmMath::F16 => half::f16::from_le_bytes([bytes[0], bytes[1]]).to_f64(),
            GemmMath::Bf16 => half::bf16::from_le_bytes([bytes[0], bytes[1]]).to_f64(),
        }
    }

    fn data_type(self) -> cudaDataType_t {
        match self {
            GemmMath::F32 | GemmMath::Tf32 => cudaDataType_t::CUDA_R_32F,
            GemmMath::F16 => cudaDataType_t::CUDA_R_16F,
            GemmMath::Bf16 => cudaDataType_t::CUDA_R_16BF,
        }
    }

    fn compute_type(self) -> cublasComputeType_t {
        match self {
            GemmMath::Tf32 => cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            _ => cublasComputeType_t::CUBLAS_COMPUTE_32F,
        }
    }
}

/// `C (m x n) = A (m x k) · B (k x n)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmShape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

impl GemmShape {
    pub const fn cube(size: usize) -> GemmShape {
        GemmShape { m: size, n: size, k: size }
    }

    /// Multiply-adds counted as two FLOPs: `2 m n k`.
    pub const fn flops(&self) -> u64 {
        2 * self.m as u64 * self.n as u64 * self.k as u64
    }

    /// Fewest bytes through memory: A and B read once, C written once.
    pub const fn min_bytes(&self, element_bytes: usize) -> u64 {
        ((self.m * self.k + self.k * self.n + self.m * self.n) * element_bytes) as u64
    }

    /// Every dimension positive and within cuBLAS's 32-bit sizes.
    fn check(&self) -> Result<(), PeerError> {
        for (what, v) in [("m", self.m), ("n", self.n), ("k", self.k)] {
            if v == 0 || v > i32::MAX as usize {
                return Err(PeerError::InvalidShape {
                    shape: *self,
                    why: format!("{what} = {v} is not in 1..=2^31-1"),
                });
            }
        }
        Ok(())
    }
}

/// Why a peer could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PeerError {
    /// The library (or the driver under it) cannot be loaded on this machine.
    #[error("cuBLAS unavailable: {0}")]
    Unavailable(String),
    /// The peer runs on CUDA device memory; the stream is the CPU backend's.
    #[error("{what} needs a CUDA stream, got the {got} backend")]
    NeedsCuda { what: &'static str, got: &'static str },
    #[error("invalid GEMM shape {}x{}x{}: {why}", shape.m, shape.n, shape.k)]
    InvalidShape { shape: GemmShape, why: String },
    /// The GEMM's result does not match an f64 product of its operands: not a ceiling.
    #[error("cuBLAS {math} GEMM does not match the f64 reference: error {error:.2e} > {tolerance:.0e}")]
    Mismatch { math: &'static str, error: f64, tolerance: f64 },
    /// cuBLAS returned a failure status.
    #[error("cuBLAS error during {context}: {source}")]
    Cublas { context: String, source: CublasError },
    /// cuBLASLt returned a failure status (NOT_SUPPORTED from its heuristic: no algorithm for
    /// this shape, type and epilogue).
    #[error("cuBLASLt error during {context}: {source}")]
    CublasLt { context: String, source: cudarc::cublaslt::result::CublasError },
    /// The peer does not run this configuration (e.g. the GELU_BIAS peer with f32 operands).
    #[error("{what}: unsupported {why}")]
    Unsupported { what: &'static str, why: String },
    /// The runtime failed around the call (allocation, copy).
    #[error(transparent)]
    Runtime(#[from] Error),
}

/// Whether cuBLAS (and the driver) can be loaded: cudarc panics on first use otherwise, so
/// every entry goes through this check first.
pub fn cublas_present() -> bool {
    // SAFETY: only tries to dlopen libcublas; no cuBLAS call is made.
    driver_present() && unsafe { cudarc::cublas::sys::is_culib_present() }
}

/// A cuBLAS GEMM ready to launch: a handle bound to the stream and its three operands,
/// filled with values in [-1, 1) so the timing sees realistic data.
pub struct CublasGemm {
    blas: CudaBlas,
    stream: Arc<CudaStream>,
    math: GemmMath,
    shape: GemmShape,
    a: CudaSlice<u8>,
    b: CudaSlice<u8>,
    c: CudaSlice<u8>,
}

impl std::fmt::Debug for CublasGemm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CublasGemm({} {}x{}x{})", self.math.name(), self.shape.m, self.shape.n, self.shape.k)
    }
}

impl CublasGemm {
    /// Creates the handle on `stream` and allocates and fills A, B and C.
    pub fn new(stream: &Stream, math: GemmMath, shape: GemmShape) -> Result<CublasGemm, PeerError> {
        shape.check()?;
        let Some(cs) = stream.cuda_stream() else {
            return Err(PeerError::NeedsCuda { what: "cuBLAS GEMM", got: stream.backend_name() });
        };
        if !cublas_present() {
            return Err(PeerError::Unavailable("libcublas could not be loaded (is it on LD_LIBRARY_PATH?)".into()));
        }
        let blas = CudaBlas::new(cs.clone())
            .map_err(|source| PeerError::Cublas { context: "creating a handle".into(), source })?;
        let e = math.element_bytes();
        let a = filled(cs, math, shape.m * shape.k * e, 1)?;
        let b = filled(cs, math, shape.k * shape.n * e, 2)?;
        let c = filled(cs, math, shape.m * shape.n * e, 3)?;
        Ok(CublasGemm { blas, stream: cs.clone(), math, shape, a, b, c })
    }

    pub fn math(&self) -> GemmMath {
        self.math
    }

    pub fn shape(&self) -> GemmShape {
        self.shape
    }

    /// Device bytes held by the three operands.
    pub fn operand_bytes(&self) -> usize {
        self.a.len() + self.b.len() + self.c.len()
    }

    /// Enqueues `C = A · B` (column-major, no transposes) on the stream; does not wait.
    pub fn launch(&mut self) -> Result<(), PeerError> {
        let (m, n, k) = (self.shape.m as i32, self.shape.n as i32, self.shape.k as i32);
        let (alpha, beta) = (1.0f32, 0.0f32);
        let ty = self.math.data_type();
        let (a, _ra) = self.a.device_ptr(&self.stream);
        let (b, _rb) = self.b.device_ptr(&self.stream);
        let (c, _rc) = self.c.device_ptr_mut(&self.stream);
        // SAFETY: A, B and C are live allocations of m*k, k*n and m*n elements of `ty` (sized
        // in `new`), the leading dimensions match a column-major layout without transposes,
        // and alpha/beta are f32 host values as the f32 compute types require.
        unsafe {
            gemm_ex(
                *self.blas.handle(),
                cublasOperation_t::CUBLAS_OP_N,
                cublasOperation_t::CUBLAS_OP_N,
                m,
                n,
                k,
                (&alpha as *const f32).cast(),
                a as *const _,
                ty,
                m,
                b as *const _,
                ty,
                k,
                (&beta as *const f32).cast(),
                c as *mut _,
                ty,
                m,
                self.math.compute_type(),
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|source| PeerError::Cublas { context: format!("{} GEMM {}x{}x{}", self.math.name(), m, n, k), source })
    }
}

impl CublasGemm {
    /// Runs the GEMM once and checks `samples` entries of C against an f64 product of A and B
    /// (read back from the device); returns the worst error relative to
    /// `|c| + sqrt(Σ (a·b)²)`, or `Mismatch` above the math's tolerance.
    pub fn verify(&mut self, samples: usize) -> Result<f64, PeerError> {
        self.launch()?;
        let back = |buf: &CudaSlice<u8>| self.stream.clone_dtoh(buf).ctx(|| "reading a GEMM operand back".into());
        let (a, b, c) = (back(&self.a)?, back(&self.b)?, back(&self.c)?);
        let GemmShape { m, n, k } = self.shape;
        let e = self.math.element_bytes();
        let at = |v: &[u8], idx: usize| self.math.decode(&v[idx * e..idx * e + e]);
        let mut worst = 0.0f64;
        for s in 0..samples {
            // Column-major: A[i + p m], B[p + j k], C[i + j m]; samples spread over C.
            let (i, j) = ((s * 7919 + s / 3) % m, (s * 104_729 + 17) % n);
            let (mut want, mut sq) = (0.0f64, 0.0f64);
            for p in 0..k {
                let t = at(&a, i + p * m) * at(&b, p + j * k);
                want += t;
                sq += t * t;
            }
            worst = worst.max(sample_error(at(&c, i + j * m), want, sq));
        }
        if worst > self.math.tolerance() {
            return Err(PeerError::Mismatch { math: self.math.name(), error: worst, tolerance: self.math.tolerance() });
        }
        Ok(worst)
    }
}

/// `|got - want| / (|want| + sqrt(sq))`, `sq` the sum of the squared terms of `want` (so
/// cancellation does not inflate it); NaN counts as infinitely wrong.
fn sample_error(got: f64, want: f64, sq: f64) -> f64 {
    let scale = want.abs() + sq.sqrt();
    let err = if scale > 0.0 { (got - want).abs() / scale } else { got.abs() };
    if err.is_nan() { f64::INFINITY } else { err }
}

/// Bytes of `elements` operands of `math` (bounded by the callers' shape checks).
fn operand_bytes(elements: usize, math: GemmMath) -> usize {
    elements * math.element_bytes()
}

/// A device buffer of `bytes` filled with pseudo-random elements of `math`'s type: a 1 MiB
/// host tile repeated, so filling 8192² operands takes milliseconds, not seconds.
fn filled(cs: &Arc<CudaStream>, math: GemmMath, bytes: usize, seed: u64) -> Result<CudaSlice<u8>, PeerError> {
    let mut dev = cs.alloc_zeros::<u8>(bytes).ctx(|| format!("allocating {bytes} bytes for a GEMM operand"))?;
    let tile = random_tile(math, (1 << 20).min(bytes), seed);
    let mut off = 0;
    while off < bytes {
        let len = tile.len().min(bytes - off);
        cs.memcpy_htod(&tile[..len], &mut dev.slice_mut(off..off + len))
            .ctx(|| format!("filling a GEMM operand ({bytes} bytes)"))?;
        off += len;
    }
    Ok(dev)
}

/// `bytes` bytes of elements uniform in [-1, 1) (xorshift), encoded as `math`'s type.
fn random_tile(math: GemmMath, bytes: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    };
    let e = math.element_bytes();
    let mut out = Vec::with_capacity(bytes);
    for _ in 0..bytes / e {
        let x = next();
        match math {
            GemmMath::F32 | GemmMath::Tf32 => out.extend_from_slice(&x.to_le_bytes()),
            GemmMath::F16 => out.extend_from_slice(&half::f16::from_f32(x).to_le_bytes()),
            GemmMath::Bf16 => out.extend_from_slice(&half::bf16::from_f32(x).to_le_bytes()),
        }
    }
    out.resize(bytes, 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_count_flops_and_bytes() {
        let s = GemmShape { m: 2, n: 3, k: 4 };
        assert_eq!(s.flops(), 48);
        assert_eq!(s.min_bytes(2), (8 + 12 + 6) * 2);
        assert!(GemmShape { m: 0, n: 1, k: 1 }.check().is_err());
        assert!(GemmShape::cube(8192).check().is_ok());
    }

    #[test]
    fn names_round_trip_and_tiles_stay_in_range() {
        for m in GemmMath::ALL {
            assert_eq!(GemmMath::from_name(m.name()), Some(m));
            let t = random_tile(m, 1000, 7);
            assert_eq!(t.len(), 1000);
        }
        let t = random_tile(GemmMath::F32, 4096, 1);
        let vals: Vec<f32> = t.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert!(vals.iter().all(|v| (-1.0..1.0).contains(v)));
        assert!(vals.iter().any(|v| *v < -0.5) && vals.iter().any(|v| *v > 0.5));
    }

    #[test]
    fn sample_errors_are_relative_and_nan_is_infinite() {
        assert_eq!(sample_error(1.0, 1.0, 1.0), 0.0);
        assert!((sample_error(1.1, 1.0, 1.0) - 0.05).abs() < 1e-12);
        assert_eq!(sample_error(f64::NAN, 1.0, 1.0), f64::INFINITY);
        assert_eq!(sample_error(0.25, 0.0, 0.0), 0.25);
    }

    #[test]
    fn elements_decode_by_math() {
        assert_eq!(GemmMath::F32.decode(&1.5f32.to_le_bytes()), 1.5);
        assert_eq!(GemmMath::Tf32.decode(&(-2.0f32).to_le_bytes()), -2.0);
        assert_eq!(GemmMath::F16.decode(&half::f16::from_f32(0.25).to_le_bytes()), 0.25);
        assert_eq!(GemmMath::Bf16.decode(&half::bf16::from_f32(-3.0).to_le_bytes()), -3.0);
    }

    #[test]
    fn the_cpu_backend_gets_a_typed_error() {
        let backend = crate::Backend::new(crate::BackendChoice::Cpu).unwrap();
        let err = CublasGemm::new(&backend.stream(), GemmMath::F32, GemmShape::cube(64)).unwrap_err();
        assert!(matches!(err, PeerError::NeedsCuda { got: "cpu", .. }), "{err}");
    }
}
