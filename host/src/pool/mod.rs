//! The caching memory pool: every device buffer, view-backed workspace and op scratch comes
//! from here (`host` is the CPU backend's buffer cache). `arena` decides (pure bookkeeping), `device` makes the driver calls, `pooled`
//! is the slice type buffers hold, `stats` what the pool reports.

pub mod arena;
pub mod baseline;
pub mod device;
pub mod host;
pub mod pooled;
pub mod stats;

pub use device::DevicePool;
pub use pooled::Pooled;
pub use stats::PoolStats;
