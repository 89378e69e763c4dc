//! The built-in plan as a point of the GEMM space: the family, tile, K split and packing a
//! config with `path` auto resolves to (`gemm_plan::plan` for the device's architecture, on
//! the worker's 256-byte aligned buffers), so the cost model prices the untuned call (the
//! tuner's baseline and the heuristic's config) as what it runs.

use ferrotune::config::{GemmConfig, GemmPath, PackChoice};
use ferrotune::ops::gemm::Gemm;
use ferrotune::ops::gemm_plan::{Family, GemmPlan, Launch, plan};
use ferrotune::ops::gemv::describe;
use ferrotune::ops::pack::packed_gemm;

use crate::protocol::{Description, GemmShape};

/// The worker's operands start 256-byte aligned.
const BUFFERS: [u64; 2] = [256, 256];

/// The point `cfg` (with `path` auto, on the GPU) runs on `shape`; `None` for any other config
/// or a call the plan refuses.
pub fn resolved(d: &Description, shape: &GemmShape, cfg: &GemmConfig) -> Option<GemmConfig> {
    let l = d.limits?;
    if cfg.path != GemmPath::Auto {
        return None;
    }
    let dt = shape.dtype.dtype();
    let arch = if d.device.arch == "sm_90" { "sm_90a" } else { d.device.arch.as_str() };
    let g = shape.gemm();
    let p = plan(&g, dt, dt, arch, l.sm_count, *cfg, BUFFERS).ok()?;
    point_of(&p, &g, shape, arch, l.sm_count)
}

/// The point of the space that plan `p` of `g` is.
fn point_of(p: &GemmPlan, g: &Gemm, shape: &GemmShape, arch: &str, sms: u32) -> Option<GemmConfig> {
    let dt = shape.dtype.dtype();
    let base = GemmConfig { tile: 0, split_k: 1, ..p.cfg };
    match p.family {
        Family::SmallM => {
            let (_, sp) = describe(g, dt, dt, BUFFERS, sms.max(1) as usize, p.small_m_tuned())?;
            let tile = ferrotune_kernels::gemv::WIDTHS.iter().position(|&w| w == sp.width)?;
            Some(GemmConfig { path: GemmPath::SmallM, split_k: sp.ksplit, tile, ..base })
        }
        Family::Pack => {
            let packed = packed_gemm(g, dt, BUFFERS);
            let q = plan(&packed, dt, dt, arch, sms, p.cfg, BUFFERS).ok()?;
            let c = point_of(&q, &packed, shape, arch, sms)?;
            Some(GemmConfig { pack: PackChoice::On, ..c })
        }
        // A split the plan chose itself is what `split_k` 1 of a Hopper point stands for.
        Family::Launch(Launch::Hopper(v, sp)) => {
            let split_k =
                if sp.is_split() && ferrotune::ops::gemm_sm90::tuned_split(g, p.cfg).is_some() { sp.slices } else { 1 };
            Some(GemmConfig { path: GemmPath::Sm90(v.tile), split_k, ..base })
        }
        // The row split runs the head's tile on most of the problem (a tuned tile runs whole).
        Family::Launch(Launch::HopperRows(r)) => Some(GemmConfig { path: GemmPath::Sm90(r.head.tile), ..base }),
        Family::Launch(Launch::Tiles(v)) => Some(GemmConfig { path: GemmPath::Mma, tile: v.tile as usize, ..base }),
        Family::Launch(Launch::SplitK(sp)) => {
            // Exact f32 runs the partial products on FFMA tile 0 (the point with tile 0).
            let tile = if shape.dtype == crate::protocol::GemmDtype::F32 { 0 } else { p.cfg.tile };
            Some(GemmConfig { path: GemmPath::Mma, tile, split_k: sp.slices, ..base })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::predict_ms;
    use crate::gemm::tests::shape;
    use crate::gemm_small_m::tests::small_m_description;
    use crate::protocol::GemmDtype;

    /// The untuned plan's point on an H100, by shape class; the model prices the heuristic's
    /// config exactly as that point.
    #[test]
    fn the_built_in_plan_is_priced_as_the_family_it_runs() {
        if ["FERROTUNE_SM90", "FERROTUNE_SM90_SPLIT", "FERROTUNE_SMALL_M", "FERROTUNE_PACK", "FERROTUNE_SMALL_M_KSPLIT"]
            .iter()
            .any(|v| std::env::var(v).is_ok())
        {
            return; // the variables override the plan's rules
        }
        let d = small_m_description();
        let point = |m, n, k| {
            let s = shape(GemmDtype::Bf16, m, n, k);
            let h = GemmConfig::heuristic(m, n, k, 1);
            let p = resolved(&d, &s, &h).unwrap();
            assert_eq!(predict_ms(&d, &s, &h), predict_ms(&d, &s, &p), "{m}x{n}x{k}: {p:?}");
            p
        };
        let gemv = point(1, 4096, 4096);
        assert_eq!((gemv.path, gemv.split_k), (GemmPath::SmallM, 1));
        let long = point(17, 33, 9000);
        assert_eq!(long.path, GemmPath::SmallM);
        assert!(long.split_k > 1, "{long:?}");
        // The persistent 128 x 256 (tile 8): a large problem whose D the TMA store writes.
        assert!(matches!(point(8192, 3072, 768).path, GemmPath::Sm90(8)));
        assert!(matches!(point(256, 256, 65536), GemmConfig { path: GemmPath::Sm90(_), split_k: 1, .. }));
        let packed = point(4097, 1023, 777);
        assert_eq!(packed.pack, PackChoice::On);
        // Off sm_90: the tiles, and the mma.sync split-K for long K.
        let mut a100 = d.clone();
        a100.device.arch = "sm_80".into();
        let s = shape(GemmDtype::Bf16, 256, 256, 65536);
        let p = resolved(&a100, &s, &GemmConfig::heuristic(256, 256, 65536, 1)).unwrap();
        assert_eq!((p.path, p.split_k), (GemmPath::Mma, 16));
        // Configs that name their family are their own points.
        assert_eq!(resolved(&d, &s, &GemmConfig { path: GemmPath::Mma, ..GemmConfig::DEFAULT }), None);
    }
}
