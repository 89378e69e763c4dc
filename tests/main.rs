//! All of ferrotune's cross-crate tests, in one binary.

mod bench;
mod clifford;
mod elementwise;
mod elementwise_range;
mod errors;
mod gemm;
mod gemm_sm90;
mod gemv;
mod multigpu;
mod pack;
mod profile_warnings;
mod ptx;
mod runtime;
mod splitk;
mod tidy;
mod tune;
