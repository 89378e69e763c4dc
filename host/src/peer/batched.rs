//! cuBLAS strided-batched GEMM as the peer of our one-launch batched GEMM: the same row-major
//! operands stored back to back, one `cublasGemmStridedBatchedEx` call.

use std::sync::Arc;

use cudarc::cublas::CudaBlas;
use cudarc::cublas::result::gemm_strided_batched_ex;
use cudarc::cublas::sys::{cublasGemmAlgo_t, cublasOperation_t};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

use super::colmajor::ColMajorGemm;
use super::{GemmMath, GemmShape, PeerError, cublas_present, filled, operand_bytes, sample_error};
use crate::error::DriverContext;
use crate::stream::Stream;

/// `batch` row-major products `C_z (m x n) = A_z (m x k) · B_z (k x n)`, A, B and C each stored
/// back to back (`batch x m x k`, `batch x k x n`, `batch x m x n`) as our `batched_matmul`
/// takes them, filled with values in [-1, 1).
pub struct CublasBatchedGemm {
    blas: CudaBlas,
    stream: Arc<CudaStream>,
    math: GemmMath,
    shape: GemmShape,
    args: ColMajorGemm,
    a: CudaSlice<u8>,
    b: CudaSlice<u8>,
    c: CudaSlice<u8>,
}

impl std::fmt::Debug for CublasBatchedGemm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let GemmShape { m, n, k } = self.shape;
        write!(f, "CublasBatchedGemm({} {} x {m}x{n}x{k})", self.math.name(), self.args.batch)
    }
}

impl CublasBatchedGemm {
    /// Checks the sizes, creates the handle on `stream`, allocates and fills A, B and C.
    pub fn new(
        stream: &Stream,
        math: GemmMath,
        shape: GemmShape,
        batch: usize,
    ) -> Result<CublasBatchedGemm, PeerError> {
        let args = ColMajorGemm::row_major_batched(shape, batch)?;
        let Some(cs) = stream.cuda_stream() else {
            return Err(PeerError::NeedsCuda { what: "cuBLAS strided-batched GEMM", got: stream.backend_name() });
        };
        if !cublas_present() {
            return Err(PeerError::Unavailable("libcublas could not be loaded (is it on LD_LIBRARY_PATH?)".into()));
        }
        let blas = CudaBlas::new(cs.clone())
            .map_err(|source| PeerError::Cublas { context: "creating a handle".into(), source })?;
        // Our A is cuBLAS's B and our B its A (see ColMajorGemm::row_major_batched).
        let a = filled(cs, math, operand_bytes(args.len_b(), math), 5)?;
        let b = filled(cs, math, operand_bytes(args.len_a(), math), 6)?;
        let c = filled(cs, math, operand_bytes(args.len_c(), math), 7)?;
        Ok(CublasBatchedGemm { blas, stream: cs.clone(), math, shape, args, a, b, c })
    }

    pub fn math(&self) -> GemmMath {
        self.math
    }

    pub fn shape(&self) -> GemmShape {
        self.shape
    }

    pub fn batch(&self) -> usize {
        self.args.batch
    }

    /// `2 m n k` per product, over the batch.
    pub fn flops(&self) -> u64 {
        self.shape.flops() * self.args.batch as u64
    }

    /// Enqueues the `batch` products on the stream; does not wait.
    pub fn launch(&mut self) -> Result<(), PeerError> {
        let g = self.args;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let ty = self.math.data_type();
        let (a, _ra) = self.a.device_ptr(&self.stream);
        let (b, _rb) = self.b.device_ptr(&self.stream);
        let (c, _rc) = self.c.device_ptr_mut(&self.stream);
        // SAFETY: cuBLAS's A is our B (len_a elements of `ty`), its B our A (len_b), C holds
        // len_c, all allocated in `new` from these same arguments; ColMajorGemm::check bounded
        // every count by i32::MAX and every operand (so every stride) by i64::MAX bytes, so the
        // casts are exact and cuBLAS stays inside the allocations; alpha and beta are f32 host
        // values as the f32 compute types require.
        unsafe {
            gemm_strided_batched_ex(
                *self.blas.handle(),
                cublasOperation_t::CUBLAS_OP_N,
                cublasOperation_t::CUBLAS_OP_N,
                g.m as i32,
                g.n as i32,
                g.k as i32,
                (&alpha as *const f32).cast(),
                b as *const _,
                ty,
                g.lda as i32,
                g.stride_a as i64,
                a as *const _,
                ty,
                g.ldb as i32,
                g.stride_b as i64,
                (&beta as *const f32).cast(),
                c as *mut _,
                ty,
                g.ldc as i32,
                g.stride_c as i64,
                g.batch as i32,
                self.math.compute_type(),
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|source| PeerError::Cublas {
            context: format!("{} strided-batched GEMM {} x {}x{}x{}", self.math.name(), g.batch, g.n, g.m, g.k),
            source,
        })
    }

    /// Runs the products once and checks `samples` elements of C (spread over the batch)
    /// against an f64 product of A and B read back from the device; returns the worst error
    /// relative to `|c| + sqrt(Σ (a·b)²)`, or `Mismatch` above the math's tolerance.
    pub fn verify(&mut self, samples: usize) -> Result<f64, PeerError> {
        self.launch()?;
        let back = |buf: &CudaSlice<u8>| self.stream.clone_dtoh(buf).ctx(|| "reading a GEMM operand back".into());
        let (a, b, c) = (back(&self.a)?, back(&self.b)?, back(&self.c)?);
        let GemmShape { m, n, k } = self.shape;
        let e = self.math.element_bytes();
        let at = |v: &[u8], idx: usize| self.math.decode(&v[idx * e..idx * e + e]);
        let mut worst = 0.0f64;
        for s in 0..samples {
            // Row-major: A[z][i][p], B[z][p][j], C[z][i][j].
            let (z, i, j) = (s % self.args.batch, (s * 7919 + s / 3) % m, (s * 104_729 + 17) % n);
            let (mut want, mut sq) = (0.0f64, 0.0f64);
            for p in 0..k {
                let t = at(&a, z * m * k + i * k + p) * at(&b, z * k * n + p * n + j);
                want += t;
                sq += t * t;
            }
            worst = worst.max(sample_error(at(&c, z * m * n + i * n + j), want, sq));
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
    fn the_cpu_backend_and_bad_batches_get_typed_errors() {
        let backend = crate::Backend::new(crate::BackendChoice::Cpu).unwrap();
        let s = backend.stream();
        let shape = GemmShape { m: 32, n: 256, k: 256 };
        let err = CublasBatchedGemm::new(&s, GemmMath::Bf16, shape, 40).unwrap_err();
        assert!(matches!(err, PeerError::NeedsCuda { got: "cpu", .. }), "{err}");
        let err = CublasBatchedGemm::new(&s, GemmMath::Bf16, shape, 0).unwrap_err();
        assert!(matches!(err, PeerError::InvalidShape { .. }), "{err}");
    }
}
