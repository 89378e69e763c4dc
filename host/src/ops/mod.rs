//! The op API. Every op takes a stream (CUDA or CPU), checks its operands, then launches the
//! PTX entry point or runs the same maths on the CPU pool.

#[cfg(target_arch = "x86_64")]
mod bf16_avx512;
pub mod clifford;
pub mod elementwise;
pub(crate) mod elementwise_cpu;
#[cfg(target_arch = "x86_64")]
mod f16c;
pub mod gemm;
pub(crate) mod gemm_cpu;
pub(crate) mod gemm_ffma;
mod gemm_operands;
pub mod gemm_plan;
mod gemm_plan_small_m;
mod gemm_ptr_array;
pub mod gemm_sm90;
pub mod gemm_sm90_class;
pub mod gemm_sm90_fill;
pub mod gemm_sm90_rows;
pub mod gemm_sm90_store;
mod gemm_splitk;
pub mod gemv;
pub mod gemv_rows;
pub mod gemv_stream;
pub mod pack;
pub mod reduce;

pub use clifford::{
    Clifford, CliffordConfig, FcgpWorkspace, fused_gelu_fcgp_norm, fused_gelu_fcgp_norm_backward, fused_gelu_sgp_norm,
    fused_gelu_sgp_norm_backward,
};
pub use elementwise::{
    Activation, GeluForm, add, add_mul_act, axpy, bias_add_inplace, copy, gelu, relu, run_elementwise, scale,
};
pub use gemm::{
    Epilogue, Gemm, Layout, Precision, batched_matmul, gemm, gemm_ptr_array, linear_bias_gelu, matmul, matmul_bias_relu,
};
pub use reduce::sum;
