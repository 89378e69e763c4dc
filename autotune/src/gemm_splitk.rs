//! Why an `mma.sync` split-K point of the GEMM space is not worth measuring (pruned with the
//! reason): batches, slices shorter than `MIN_SLICE_K`, a factor K cannot make, more slices
//! than the reduce pass pays for, or a grid that already fills two waves.

use ferrotune::config::MIN_SLICE_K;
use ferrotune::ops::gemm::SplitPlan;
use ferrotune_kernels::gemm::ffma;
use ferrotune_kernels::gemm::tc::TILES;

use crate::protocol::{GemmDtype, GemmShape};

/// The most slices the `mma.sync` split-K is tried with: its reduce pass reads every slice's
/// f32 partials again.
pub const MMA_SPLIT_MAX: usize = 16;

/// The most slices an exact-f32 (FFMA) split-K is tried with: its partial products run at a
/// tenth of the tensor-core rate, so the reduce's extra reads weigh less beside them, and on
/// few tiles with a long K only more slices fill the SMs (256x256x16384 on 16 slices runs 64
/// blocks on 132 SMs: 0.24x cuBLAS, bench/results/ffma-tune-6e491b224208/run1).
pub const FFMA_SPLIT_MAX: usize = 64;

/// Why split-K factor `s` is not worth measuring on `shape` with tile `tile` on `sms` SMs, if
/// it is not: batches are never split, each slice must be at least `MIN_SLICE_K` long (and
/// the factor must give its own number of slices, not repeat a smaller one), and a grid that
/// already fills two waves has nothing to gain.
pub fn split_pruned(shape: &GemmShape, tile: usize, s: usize, sms: u32) -> Option<String> {
    if s <= 1 {
        return None;
    }
    let max = if shape.dtype == GemmDtype::F32 { FFMA_SPLIT_MAX } else { MMA_SPLIT_MAX };
    if s > max {
        return Some(format!(
            "split_k {s}: the mma.sync split-K is tried with at most {max} slices (its reduce reads every slice)"
        ));
    }
    if shape.batch > 1 {
        return Some(format!("split_k {s}: split-K runs single matrices only (batch {})", shape.batch));
    }
    let plan = SplitPlan::new(shape.k, s);
    if !plan.is_split() || plan.kc < MIN_SLICE_K {
        return Some(format!("split_k {s}: slices of K = {} are shorter than {MIN_SLICE_K}", plan.kc.min(shape.k)));
    }
    if plan.slices != s {
        return Some(format!("split_k {s}: K = {} only makes {} slices of {}", shape.k, plan.slices, plan.kc));
    }
    // 16-bit inputs run the partial products on tile 0 whatever the config's tile says, exact
    // f32 on the 128-row FFMA tile.
    let (bm, bn) = match shape.dtype {
        GemmDtype::Tf32 => TILES.get(tile).map(|t| (t.bm(), t.bn()))?,
        GemmDtype::F32 => (ffma::TILES[0], ffma::BN),
        _ => (TILES[0].bm(), TILES[0].bn()),
    };
    let blocks = shape.m.div_ceil(bm) * shape.n.div_ceil(bn);
    if blocks >= 2 * sms as usize {
        return Some(format!("split_k {s}: {blocks} blocks of {bm}x{bn} already fill two waves of {sms} SMs"));
    }
    None
}
