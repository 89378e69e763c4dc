//! All of ferrotune's cross-crate tests, in one binary.

mod bench;
mod clifford;
mod clifford_cpu_bwd;
mod clifford_fcgp;
mod clifford_long;
mod elementwise;
mod elementwise_range;
mod errors;
mod gemm;
mod gemm_graph;
mod gemm_sm90;
mod gemm_sm90_split;
mod gemm_sm90_tf32;
mod gemv;
mod gemv_stream;
mod multigpu;
mod pack;
mod profile_warnings;
mod ptx;
mod runtime;
mod splitk;
mod tidy;
mod tune;
mod tune_clifford;
mod tune_families;
mod tune_path;
