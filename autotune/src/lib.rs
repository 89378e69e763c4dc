//! ferrotune's autotuner. Today: the measurement every timing in the project goes through
//! (the bench uses it too, so there is one timing loop). Search spaces, strategies and TOML
//! profiles build on it.

pub mod measure;
