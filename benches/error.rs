//! The bench library's error type: the runtime's and the peers' errors, plus reading and
//! writing result files, comparing them and plotting.

use std::path::PathBuf;

use ferrotune::peer::PeerError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    #[error(transparent)]
    Runtime(#[from] ferrotune::Error),
    #[error(transparent)]
    Peer(#[from] PeerError),
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: not a bench report: {source}", path.display())]
    Json { path: PathBuf, source: serde_json::Error },
    /// A result file written by an incompatible version of the bench.
    #[error("{}: schema '{found}', this build reads '{expected}' (re-run the bench to refresh it)", path.display())]
    Schema { path: PathBuf, found: String, expected: &'static str },
    /// Options that cannot run (no ops, a zero size...).
    #[error("invalid bench options: {0}")]
    Options(String),
    /// The baseline was measured on another device; gating against it would compare machines.
    #[error(
        "baseline is from {baseline}, this run is on {current}: refusing to gate on another device's numbers \
         (refresh the baseline on this device, see bench/baselines/README.md)"
    )]
    DeviceMismatch { baseline: String, current: String },
    #[error("roofline plot: {0}")]
    Plot(String),
}

pub type Result<T, E = BenchError> = std::result::Result<T, E>;
