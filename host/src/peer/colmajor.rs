//! How the row-major problems of our ops map onto cuBLAS's column-major GEMM arguments: written
//! once, used by the batched and cuBLASLt peers, and checked on the CPU by emulating what cuBLAS
//! computes with them.

use super::{GemmShape, PeerError};

/// The arguments of one column-major (strided-batched) GEMM call, as cuBLAS reads them:
/// `C[i + j ldc + z stride_c] = Σ_p op(A)[i, p] · op(B)[p, j]` for `i < m`, `j < n`, `z < batch`,
/// with `op(A)[i, p] = A[i + p lda]` (N) or `A[p + i lda]` (T), `op(B)[p, j] = B[p + j ldb]` (N)
/// or `B[j + p ldb]` (T), each operand offset by `z` times its stride.
///
/// Both mappings below hand cuBLAS our right-hand operand (B, or the weights W) as its A and our
/// left-hand one (A, or X) as its B: a row-major product is the transposed column-major one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ColMajorGemm {
    pub transa: bool,
    pub transb: bool,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
    pub stride_a: usize,
    pub stride_b: usize,
    pub stride_c: usize,
    pub batch: usize,
}

impl ColMajorGemm {
    /// `batch` row-major products `C_z (m x n) = A_z (m x k) · B_z (k x n)` stored back to back,
    /// as our `batched_matmul` takes them. Row-major `C_z` read column-major is `C_zᵀ (n x m, ld
    /// n)`, and `C_zᵀ = B_zᵀ · A_zᵀ`: row-major `B_z` read column-major is `B_zᵀ (n x k, ld n)`,
    /// row-major `A_z` is `A_zᵀ (k x m, ld k)`. So cuBLAS gets no transposes, `m' = n`, `n' = m`,
    /// `k' = k`, A' = our B (ld n, stride k n), B' = our A (ld k, stride m k), C (ld n, stride m n).
    pub fn row_major_batched(shape: GemmShape, batch: usize) -> Result<ColMajorGemm, PeerError> {
        let GemmShape { m, n, k } = shape;
        let g = ColMajorGemm {
            transa: false,
            transb: false,
            m: n,
            n: m,
            k,
            lda: n,
            ldb: k,
            ldc: n,
            stride_a: checked(shape, k, n)?,
            stride_b: checked(shape, m, k)?,
            stride_c: checked(shape, m, n)?,
            batch,
        };
        g.check(shape)?;
        Ok(g)
    }

    /// `D (m x n, row-major) = X (m x k, row-major) · Wᵀ`, W `n x k` row-major (our
    /// `linear_bias_gelu` layout). D read column-major is `Dᵀ (n x m, ld n) = W · Xᵀ`: row-major W
    /// read column-major is `Wᵀ (k x n, ld k)`, so op(A') = T; row-major X is `Xᵀ (k x m, ld
    /// k)`, op(B') = N. A bias per column of D is a bias per row of Dᵀ: the cuBLASLt bias vector,
    /// `n` long (= cuBLAS's m).
    pub fn row_times_transposed(shape: GemmShape) -> Result<ColMajorGemm, PeerError> {
        let GemmShape { m, n, k } = shape;
        let g = ColMajorGemm {
            transa: true,
            transb: false,
            m: n,
            n: m,
            k,
            lda: k,
            ldb: k,
            ldc: n,
            stride_a: checked(shape, n, k)?,
            stride_b: checked(shape, m, k)?,
            stride_c: checked(shape, m, n)?,
            batch: 1,
        };
        g.check(shape)?;
        Ok(g)
    }

    /// (rows, columns) of A as stored, before op: what a cuBLASLt layout describes.
    pub fn a_stored(&self) -> (usize, usize) {
        if self.transa { (self.k, self.m) } else { (self.m, self.k) }
    }

    /// (rows, columns) of B as stored, before op.
    pub fn b_stored(&self) -> (usize, usize) {
        if self.transb { (self.n, self.k) } else { (self.k, self.n) }
    }

    /// Elements of all of A, B and C over the batch (checked in the constructors).
    pub fn len_a(&self) -> usize {
        self.stride_a * self.batch
    }

    pub fn len_b(&self) -> usize {
        self.stride_b * self.batch
    }

    pub fn len_c(&self) -> usize {
        self.stride_c * self.batch
    }

    /// Everything cuBLAS takes as a 32-bit int fits one, the strides fit 64 bits and the whole
    /// operands fit memory sizes: after this, the `as i32` / `as i64` casts of the call are exact.
    fn check(&self, shape: GemmShape) -> Result<(), PeerError> {
        let bad = |why: String| Err(PeerError::InvalidShape { shape, why });
        for (what, v) in [("m", shape.m), ("n", shape.n), ("k", shape.k), ("batch", self.batch)] {
            if v == 0 || v > i32::MAX as usize {
                return bad(format!("{what} = {v} is not in 1..=2^31-1"));
            }
        }
        for (what, stride) in [("A", self.stride_a), ("B", self.stride_b), ("C", self.stride_c)] {
            // Elements of the largest type (4 bytes) over the batch must fit an i64 and a usize.
            match stride.checked_mul(self.batch).and_then(|e| e.checked_mul(4)) {
                Some(bytes) if bytes <= i64::MAX as usize => {}
                _ => return bad(format!("{what} over the batch of {} overflows 64-bit sizes", self.batch)),
            }
        }
        Ok(())
    }
}

fn checked(shape: GemmShape, a: usize, b: usize) -> Result<usize, PeerError> {
    a.checked_mul(b).ok_or_else(|| PeerError::InvalidShape { shape, why: format!("{a} x {b} overflows usize") })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What cuBLAS computes with `g`, by its column-major definition (f64, no shortcuts).
    fn emulate(g: &ColMajorGemm, a: &[f64], b: &[f64]) -> Vec<f64> {
        let mut c = vec![f64::NAN; g.len_c()];
        for z in 0..g.batch {
            for j in 0..g.n {
                for i in 0..g.m {
                    let mut acc = 0.0;
                    for p in 0..g.k {
                        let av = if g.transa {
                            a[z * g.stride_a + p + i * g.lda]
                        } else {
                            a[z * g.stride_a + i + p * g.lda]
                        };
                        let bv = if g.transb {
                            b[z * g.stride_b + j + p * g.ldb]
                        } else {
                            b[z * g.stride_b + p + j * g.ldb]
                        };
                        acc += av * bv;
                    }
                    c[z * g.stride_c + i + j * g.ldc] = acc;
                }
            }
        }
        c
    }

    fn values(len: usize, seed: usize) -> Vec<f64> {
        (0..len).map(|i| ((i * 37 + seed * 11) % 23) as f64 - 11.0).collect()
    }

    #[test]
    fn the_batched_mapping_computes_the_row_major_product() {
        // No two dimensions equal, so a swapped m/n/k or leading dimension cannot pass.
        let (shape, batch) = (GemmShape { m: 3, n: 5, k: 4 }, 2);
        let g = ColMajorGemm::row_major_batched(shape, batch).unwrap();
        let GemmShape { m, n, k } = shape;
        let a = values(batch * m * k, 1); // ours: batch x m x k, row-major
        let b = values(batch * k * n, 2); // ours: batch x k x n, row-major
        assert_eq!((g.len_a(), g.len_b(), g.len_c()), (b.len(), a.len(), batch * m * n));
        let c = emulate(&g, &b, &a); // cuBLAS's A is our B
        for z in 0..batch {
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k).map(|p| a[z * m * k + i * k + p] * b[z * k * n + p * n + j]).sum();
                    assert_eq!(c[z * m * n + i * n + j], want, "C[{z}][{i}][{j}]");
                }
            }
        }
    }

    #[test]
    fn the_linear_mapping_computes_x_times_w_transposed_with_a_bias_per_row() {
        let shape = GemmShape { m: 3, n: 5, k: 4 };
        let g = ColMajorGemm::row_times_transposed(shape).unwrap();
        let GemmShape { m, n, k } = shape;
        let x = values(m * k, 3); // m x k, row-major
        let w = values(n * k, 4); // n x k, row-major
        // cuBLASLt layouts describe the stored matrices: W as k x n, X as k x m, D as n x m.
        assert_eq!((g.a_stored(), g.b_stored(), (g.m, g.n)), ((k, n), (k, m), (n, m)));
        let d = emulate(&g, &w, &x);
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k).map(|p| x[i * k + p] * w[j * k + p]).sum();
                // D[i][j] is row j of the column-major result: the bias index is cuBLAS's row.
                assert_eq!(d[j + i * g.ldc], want, "D[{i}][{j}]");
                assert_eq!(j + i * g.ldc, i * n + j);
            }
        }
    }

    #[test]
    fn shapes_cublas_cannot_take_are_typed_errors() {
        let s = GemmShape { m: 8, n: 8, k: 8 };
        assert!(ColMajorGemm::row_major_batched(s, 0).is_err());
        assert!(ColMajorGemm::row_major_batched(GemmShape { m: 0, ..s }, 1).is_err());
        assert!(ColMajorGemm::row_times_transposed(GemmShape { k: 1 << 31, ..s }).is_err());
        let err = ColMajorGemm::row_major_batched(GemmShape { m: 1 << 30, n: 1 << 30, k: 4 }, 1 << 20).unwrap_err();
        assert!(matches!(err, PeerError::InvalidShape { .. }), "{err}");
        assert!(ColMajorGemm::row_major_batched(GemmShape { m: 32, n: 256, k: 256 }, 40).is_ok());
    }
}
