//! All of ferrotune's cross-crate tests, in one binary.

mod bench;
mod clifford;
mod elementwise;
mod errors;
mod gemm;
mod multigpu;
mod profile_warnings;
mod ptx;
mod runtime;
mod splitk;
mod tidy;
mod tune;
