//! GEMM entry points on `mma.sync` tensor cores (f16/bf16/tf32) and FFMA (f32): the problem
//! every entry receives, the shared ABI macro, and one file per kernel family below
//! (`gemm/tc_load.rs`, `gemm/tc.rs`, `gemm/tc_epilogue.rs`, `gemm/tc_entries.rs`,
//! `gemm/ffma.rs`). All predicate every edge (any M, N, K >= 1 in the same kernel), fuse the
//! epilogue, and walk a strided or pointer-array batch with `blockIdx.z`.

/// Problem description every GEMM entry receives (one struct keeps the 17 parameters in one
/// place; it is passed field by field in the ABI).
#[derive(Clone, Copy)]
struct Problem {
    m: usize,
    n: usize,
    k: usize,
    lda: usize,
    ldb: usize,
    ldc: usize,
    alpha: f32,
    beta: f32,
    flags: u32,
}

#[inline(always)]
fn sat_sub(a: usize, b: usize) -> usize {
    if a > b { a - b } else { 0 }
}

/// What the epilogue needs, small enough to travel in registers to the non-inlined store.
#[derive(Clone, Copy)]
struct OutArgs {
    m: usize,
    n: usize,
    ldc: usize,
    alpha: f32,
    beta: f32,
    flags: u32,
}

impl Problem {
    #[inline(always)]
    fn out(&self) -> OutArgs {
        OutArgs { m: self.m, n: self.n, ldc: self.ldc, alpha: self.alpha, beta: self.beta, flags: self.flags }
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points: `ft_gemm_<in>_<a><b>_v<align>_<out>_<tile>` (see `GemmVariant::entry_name`).
// ABI: (a, b, c, d, bias, m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, alpha, beta,
// flags); strides are in elements, blockIdx.z is the batch index. With flag bit 4 set, a, b,
// c and d are device arrays of per-batch pointers (pointer-array batches) and strides unused.

macro_rules! gemm_entry {
    ($name:expr, $T:ty, $O:ty, |$a:ident, $b:ident, $c:ident, $d:ident, $bias:ident, $pr:ident| $body:expr) => {
        const _: () = {
            #[unsafe(export_name = $name)]
            #[allow(clippy::too_many_arguments)]
            unsafe extern "ptx-kernel" fn entry(
                a: *const $T,
                b: *const $T,
                c: *const $O,
                d: *mut $O,
                $bias: *const $O,
                m: u32,
                n: u32,
                k: u32,
                lda: u32,
                ldb: u32,
                ldc: u32,
                stride_a: u64,
                stride_b: u64,
                stride_c: u64,
                alpha: f32,
                beta: f32,
                flags: u32,
            ) {
                let z = block_idx_z() as usize;
                let $pr = Problem {
                    m: m as usize,
                    n: n as usize,
                    k: k as usize,
                    lda: lda as usize,
                    ldb: ldb as usize,
                    ldc: ldc as usize,
                    alpha,
                    beta,
                    flags,
                };
                // SAFETY: the host checked every pointer (or pointer array) covers its batch of
                // matrices, the alignment the variant needs, and the block size and shared
                // memory of the variant.
                unsafe {
                    let ($a, $b, $c, $d) = if flags & crate::gemm::PTR_ARRAY != 0 {
                        (
                            *(a as *const *const $T).add(z),
                            *(b as *const *const $T).add(z),
                            *(c as *const *const $O).add(z),
                            *(d as *const *mut $O).add(z),
                        )
                    } else {
                        (
                            a.add(z * stride_a as usize),
                            b.add(z * stride_b as usize),
                            c.add(z * stride_c as usize),
                            d.add(z * stride_c as usize),
                        )
                    };
                    $body
                }
            }
        };
    };
}

mod ffma;
mod tc;
mod tc_entries;
mod tc_epilogue;
pub(crate) use tc_epilogue::store_quad;
mod tc_load;
