//! Packing as a dimension of the GEMM space: where a tuned shape's 16-bit operands (or f32 ones
//! on TF32) have rows that are not 16-byte aligned (odd K or leading dimension) and the call
//! can be packed,
//! `Param::Pack` offers both choices (0: every family on the operands as given, 1: packed into
//! an aligned copy first, `ops::pack`), so the profile records which one won. Elsewhere the
//! parameter is absent and the plan's own rule stays (`PackChoice::Auto`). Also the problem a
//! point's kernels then see, and the pack pass's cost.

use ferrotune::config::{GemmConfig, PackChoice};
use ferrotune::ops::gemm::Gemm;
use ferrotune::ops::pack::{pack_possible, packed_gemm};

use crate::protocol::{Description, GemmShape};
use crate::space::{Domain, Param};

/// The worker's operands start 256-byte aligned: only leading dimensions decide alignment.
const BUFFERS: [u64; 2] = [256, 256];

/// The `Param::Pack` domain of `shape`: both choices where the call can be packed, else none.
pub fn pack_domain(shape: &GemmShape) -> Option<Domain> {
    pack_possible(&shape.gemm(), shape.dtype.dtype(), BUFFERS)
        .then(|| Domain { param: Param::Pack, values: vec![0, 1] })
}

/// The choice a `Param::Pack` value stands for.
pub fn pack_of(v: u64) -> PackChoice {
    if v == 0 { PackChoice::Off } else { PackChoice::On }
}

/// The problem `cfg`'s kernels run on `shape`: the packed copy's (K-contiguous, aligned
/// leading dimensions) where `cfg` packs and the call can be packed, else the shape's own.
pub fn planned_gemm(shape: &GemmShape, cfg: &GemmConfig) -> Gemm {
    let g = shape.gemm();
    if cfg.pack == PackChoice::On && pack_possible(&g, shape.dtype.dtype(), BUFFERS) {
        packed_gemm(&g, shape.dtype.dtype(), BUFFERS)
    } else {
        g
    }
}

/// The shape the cost model prices after packing: K-contiguous operands (A row-major, B
/// column-major) with K rounded up to whole 16-byte rows.
pub fn packed_shape(shape: &GemmShape) -> GemmShape {
    use ferrotune::ops::gemm::Layout;
    GemmShape { k: shape.k.next_multiple_of(8), a: Layout::Row, b: Layout::Col, ..*shape }
}

/// Predicted time (ms) of the pack pass: each unaligned operand read and its padded copy
/// written at DRAM speed, one launch per operand.
pub fn pack_ms(d: &Description, shape: &GemmShape) -> f64 {
    let g = shape.gemm();
    let elem = shape.dtype.dtype().size_bytes() as f64;
    let p = packed_gemm(&g, shape.dtype.dtype(), BUFFERS);
    let (k, kp) = (shape.k as f64, shape.k.next_multiple_of(8) as f64);
    let mut bytes = 0.0;
    let mut launches = 0.0;
    for (rows, before, after) in [(g.m, g.lda, p.lda), (g.n, g.ldb, p.ldb)] {
        if before != after {
            bytes += rows as f64 * (k + kp) * elem;
            launches += 1.0;
        }
    }
    bytes / (0.8 * d.peak_gbps.max(1.0) * 1e9) * 1e3 + launches * 0.004
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::tests::shape;
    use crate::gemm::{candidates, predict_ms};
    use crate::protocol::GemmDtype;

    #[test]
    fn pack_is_searched_only_for_unaligned_single_matrices() {
        let d = crate::gemm_small_m::tests::small_m_description();
        // K = 777 bf16: rows of 1554 bytes. Both choices, and packing opens the 16-byte tiles.
        let s = shape(GemmDtype::Bf16, 4097, 1023, 777);
        assert!(pack_domain(&s).is_some());
        let (cands, _) = candidates(&d, &s, GemmConfig::DEFAULT);
        assert!(cands.iter().any(|c| c.pack == PackChoice::Off) && cands.iter().any(|c| c.pack == PackChoice::On));
        let wide = |c: &&GemmConfig| c.path == ferrotune::config::GemmPath::Mma && c.tile == 4;
        assert!(cands.iter().filter(wide).all(|c| c.pack == PackChoice::On), "{cands:?}");
        assert!(
            cands.iter().any(|c| matches!(c.path, ferrotune::config::GemmPath::Sm90(_)) && c.pack == PackChoice::On)
        );
        // The model charges the pack pass but prices the packed tiles: on this large problem
        // the packed 128 x 256 tile beats every unpacked mma.sync point.
        assert!(pack_ms(&d, &s) > 0.0);
        let best_off = cands
            .iter()
            .filter(|c| c.pack == PackChoice::Off && c.path == ferrotune::config::GemmPath::Mma)
            .map(|c| predict_ms(&d, &s, c))
            .fold(f64::INFINITY, f64::min);
        let packed =
            GemmConfig { tile: 4, path: ferrotune::config::GemmPath::Mma, pack: PackChoice::On, ..GemmConfig::DEFAULT };
        assert!(predict_ms(&d, &s, &packed) < best_off, "{} vs {best_off}", predict_ms(&d, &s, &packed));
        // f32 on TF32 with odd K: searched too (its packed copy takes the Hopper TF32 path).
        assert!(pack_domain(&shape(GemmDtype::Tf32, 4097, 1023, 777)).is_some());
        // Aligned, or a batch: no Pack parameter at all.
        for s in [
            shape(GemmDtype::Bf16, 4096, 1024, 768),
            shape(GemmDtype::Tf32, 4096, 1024, 772),
            GemmShape { batch: 2, ..shape(GemmDtype::Bf16, 4097, 1023, 777) },
        ] {
            assert!(pack_domain(&s).is_none(), "{s:?}");
            let (cands, _) = candidates(&d, &s, GemmConfig::DEFAULT);
            assert!(cands.iter().all(|c| c.pack == PackChoice::Auto), "{s:?}");
        }
    }
}
