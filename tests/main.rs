//! All of ferrotune's cross-crate tests, in one binary.

mod elementwise;
mod errors;
mod ptx;
mod tidy;
