//! All of ferrotune's cross-crate tests, in one binary.

mod bench;
mod clifford;
mod elementwise;
mod errors;
mod gemm;
mod gemv;
mod pack;
mod ptx;
mod splitk;
mod tidy;
mod tune;
