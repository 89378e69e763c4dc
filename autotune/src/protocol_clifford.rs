//! The Clifford SGP layer on the tuner's wire: a problem to tune (forward or backward, dtype,
//! algebra, B, N, norm) and a `CliffordConfig` as JSON. Kept beside `protocol.rs`, which holds
//! the messages themselves.

use ferrotune::DType;
use ferrotune::ops::clifford::{Clifford, CliffordConfig, CliffordVariant};
use ferrotune::tuned::{CliffordPass, clifford_layout};
use serde::{Deserialize, Serialize};

/// A `CliffordConfig` on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CliffordConfigJson {
    pub threads: u32,
    pub rows_per_block: u32,
    pub vec: bool,
    pub vpt: u32,
    pub stream_w: bool,
    pub blocks_per_sm: u32,
    pub cpu_rows: usize,
    /// Blocks per cluster (the backward's cluster form); absent on the wire means 1.
    #[serde(default = "one")]
    pub cluster: u32,
}

fn one() -> u32 {
    1
}

impl From<CliffordConfig> for CliffordConfigJson {
    fn from(c: CliffordConfig) -> Self {
        CliffordConfigJson {
            threads: c.threads,
            rows_per_block: c.rows_per_block,
            vec: c.variant.vec,
            vpt: c.variant.vpt,
            stream_w: c.variant.stream_w,
            blocks_per_sm: c.blocks_per_sm,
            cpu_rows: c.cpu_rows,
            cluster: c.cluster,
        }
    }
}

impl From<CliffordConfigJson> for CliffordConfig {
    fn from(c: CliffordConfigJson) -> Self {
        CliffordConfig {
            threads: c.threads,
            rows_per_block: c.rows_per_block,
            variant: CliffordVariant { vec: c.vec, vpt: c.vpt, stream_w: c.stream_w },
            blocks_per_sm: c.blocks_per_sm,
            cpu_rows: c.cpu_rows,
            cluster: c.cluster,
        }
    }
}

/// One Clifford problem to tune: the forward (`fused_gelu_sgp_norm`) or the backward of
/// `problem` with tensors of `dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CliffordShape {
    pub pass: CliffordPass,
    pub dtype: DType,
    pub problem: Clifford,
}

impl CliffordShape {
    /// `clifford_fwd f32 cl3_norm B=4096 N=512`.
    pub fn label(&self) -> String {
        let p = &self.problem;
        format!("{} {} {} B={} N={}", self.pass, self.dtype.name(), clifford_layout(p), p.b, p.n)
    }

    /// Bytes the pass must move at least: the forward reads x and y and writes the output
    /// (`C * B * N` each) and reads the weights (`N * W`); the backward reads x, y and the
    /// output's gradient, writes dx and dy, and reads w and writes dw.
    pub fn min_bytes(&self) -> f64 {
        let p = &self.problem;
        let (mv, w) = (p.mv_len().unwrap_or(0) as f64, p.sgp_weights_len().unwrap_or(0) as f64);
        let elems = match self.pass {
            CliffordPass::Forward => 3.0 * mv + w,
            CliffordPass::Backward => 5.0 * mv + 2.0 * w,
        };
        elems * self.dtype.size_bytes() as f64
    }
}

/// The built-in config of a Clifford shape on the worker's machine (what the op runs untuned:
/// on the GPU the heuristic fitted to the compiled kernel's registers).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CliffordDefaultJson {
    /// The shape's label ([`CliffordShape::label`]).
    pub shape: String,
    pub config: CliffordConfigJson,
}
