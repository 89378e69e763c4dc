//! ferrotune's autotuner: the measurement every timing in the project goes through (the bench
//! uses it too, so there is one timing loop); typed search spaces with constraints and
//! device-aware pruning; strategies and budgets; verified, fault-isolated evaluation in a
//! worker process; and the tuning loop that writes TOML profiles (through `ferrotune-profile`).

pub mod clifford;
pub mod confirm;
pub mod elem;
pub mod family;
pub mod gemm;
pub mod gemm_auto;
pub mod gemm_ffma;
pub mod gemm_pack;
pub mod gemm_sm90;
pub mod gemm_small_m;
pub mod gemm_splitk;
pub mod inject;
pub mod measure;
pub mod parallel;
pub mod process;
pub mod protocol;
mod protocol_clifford;
pub mod queue;
pub mod shard;
pub mod space;
pub mod strategy;
pub mod tuner;
pub mod worker;
mod worker_clifford;
mod worker_gemm;

pub use process::{ProcessEvaluator, Timeouts, WorkerCommand};
pub use protocol::{CliffordShape, ConfigJson, EvalOutcome, GemmDtype, GemmShape, Shape};
pub use shard::Shard;
pub use strategy::{Budget, Strategy};
pub use tuner::{Control, Event, TuneError, TuneOptions, TuneReport, tune};
