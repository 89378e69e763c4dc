//! All of ferrotune's cross-crate tests, in one binary.

mod bench;
mod elementwise;
mod errors;
mod ptx;
mod tidy;
mod tune;
