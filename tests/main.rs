//! All of ferrotune's cross-crate tests, in one binary.

mod bench;
mod clifford;
mod elementwise;
mod errors;
mod gemm;
mod gemm_sm90;
mod ptx;
mod splitk;
mod tidy;
mod tune;
