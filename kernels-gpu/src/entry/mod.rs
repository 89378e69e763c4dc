//! PTX entry points (GPU build only): each `extern "ptx-kernel"` function instantiates a kernel
//! body for one op, dtype and compile-time variant. The host validates every launch (lengths,
//! alignment, grid) before it reaches these, so kernels never fail at run time.

mod clifford;
mod clifford_bwd;
#[cfg(target_feature = "sm_90a")]
mod clifford_bwd_cluster;
mod clifford_bwd_split;
mod clifford_fcgp;
mod clifford_fwd;
mod clifford_io;
mod elementwise;
mod gemm;
#[cfg(target_feature = "sm_90a")]
mod gemm_sm90;
#[cfg(target_feature = "sm_90a")]
mod gemm_sm90_split;
mod gemv;
mod gemv_rows;
#[cfg(target_feature = "sm_90a")]
mod gemv_stream;
mod pack;
mod reduce;
mod splitk;
