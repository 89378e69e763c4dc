//! ferrotune: GPU kernels written in Rust, compiled to PTX and launched from here, with a CPU
//! backend running the same kernel maths. This crate is what users depend on: devices,
//! streams, buffers, events, module loading, and the op API.
//!
//! ```no_run
//! use ferrotune::{Backend, BackendChoice, Buffer, ops};
//! let backend = Backend::new(BackendChoice::Auto)?; // CUDA if present, else the CPU
//! let s = backend.stream();
//! let a = Buffer::from_slice(&s, &[1.0f32, 2.0, 3.0])?;
//! let b = Buffer::from_slice(&s, &[0.5f32, 0.5, 0.5])?;
//! let mut out = Buffer::<f32>::zeros(&s, 3)?;
//! ops::add(&s, &a.all(), &b.all(), &mut out.all_mut())?;
//! assert_eq!(out.to_vec(&s)?, [1.5, 2.5, 3.5]);
//! # Ok::<(), ferrotune::Error>(())
//! ```

pub mod backend;
pub mod buffer;
pub mod build_id;
pub mod cluster;
pub mod collective;
pub mod config;
pub mod device;
pub mod device_split;
pub mod devices;
pub mod error;
pub mod event;
pub mod graph;
pub mod module;
pub mod nccl;
mod nccl_call;
pub mod ops;
pub mod overlap;
pub mod peer;
pub mod peer_access;
pub mod pinned;
pub mod pool;
pub mod profiler;
mod ptx_items;
pub mod split;
pub mod staging;
pub mod stream;
pub mod tma;
pub mod tuned;
mod tuned_clifford;
pub mod workspace;

pub use backend::{Backend, BackendChoice, Cpu, Gpu};
pub use buffer::{Buffer, Scalar, View, ViewMut};
pub use collective::{Communicator, Reduce};
pub use config::ElemConfig;
pub use device::{DeviceInfo, device_count, devices, driver_present};
pub use devices::{CopyMode, CopyPath, DeviceSet, Topology, parse_device_list};
pub use error::{Error, Result};
pub use event::{Event, EventTimer};
pub use ferrotune_kernels::{DType, elementwise::ElemOp, elementwise::ElemVariant};
/// The tuning-profile format (re-exported for tools and tests).
pub use ferrotune_profile as profile;
pub use graph::{Graph, Updated};
pub use half::{bf16, f16};
pub use pinned::PinnedBuffer;
pub use pool::{DevicePool, PoolStats, Pooled};
pub use split::WorkSplit;
pub use staging::{StagingPool, StagingStats};
pub use stream::Stream;
pub use tuned::Source;
