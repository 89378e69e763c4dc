//! The op families the tuner knows (elementwise, GEMM, the Clifford SGP layer): the one place
//! that dispatches on the family, so the tuning loop, the strategies and the journal stay
//! family-agnostic. Each family brings its space and cost model (`elem.rs`, `gemm.rs`,
//! `clifford.rs`) and its worker bench.

use ferrotune::config::GemmConfig;
use ferrotune::tuned;
use ferrotune_profile::Config;

use crate::protocol::{ConfigJson, Description, Shape};
use crate::space::Pruned;
use crate::{clifford, elem, gemm};

/// The config the tuned one is compared against: the built-in heuristic for elementwise ops
/// (from the worker, since it depends on the device); for GEMM the kernels' default config
/// (tile 0, no split, `path` auto: the plan picks the family as it does untuned); for the
/// Clifford layer what the op runs untuned (the heuristic fitted to the kernels' registers,
/// from the worker).
pub fn default_config(d: &Description, s: &Shape) -> Option<ConfigJson> {
    match s {
        Shape::Elem(e) => d.default_of(e.op, e.dtype).map(Into::into),
        Shape::Gemm(_) => Some(GemmConfig::DEFAULT.into()),
        Shape::Clifford(c) => d.clifford_default_of(c).map(Into::into),
    }
}

/// The built-in heuristic's config where it is not the default (GEMM tiles on the GPU:
/// `GemmConfig::heuristic`), reported beside the tuned result so that the heuristic's rules
/// can be checked against the measurements.
pub fn heuristic_config(d: &Description, s: &Shape) -> Option<ConfigJson> {
    match s {
        Shape::Gemm(g) if d.limits.is_some() => Some(GemmConfig::heuristic(g.m, g.n, g.k, g.batch).into()),
        _ => None,
    }
}

/// The candidates to measure (deduplicated, in space order) and the pruned points.
pub fn candidates(d: &Description, s: &Shape, base: &ConfigJson) -> (Vec<ConfigJson>, Vec<Pruned>) {
    match (s, base) {
        (Shape::Elem(e), ConfigJson::Elem(b)) => {
            let (c, p) = elem::candidates(d, e, (*b).into());
            (c.into_iter().map(Into::into).collect(), p)
        }
        (Shape::Gemm(g), ConfigJson::Gemm(b)) => {
            let (c, p) = gemm::candidates(d, g, (*b).into());
            let mut c: Vec<ConfigJson> = c.into_iter().map(Into::into).collect();
            // The built-in plan itself (`path` auto: its family, K split and packing rules) is
            // measured too, so the report compares the tuned point with what runs untuned.
            if let Some(h) = heuristic_config(d, s).filter(|h| !c.contains(h)) {
                c.push(h);
            }
            (c, p)
        }
        (Shape::Clifford(s), ConfigJson::Clifford(b)) => {
            let (c, p) = clifford::candidates(d, s, (*b).into());
            (c.into_iter().map(Into::into).collect(), p)
        }
        _ => (Vec::new(), Vec::new()),
    }
}

/// The cost model's predicted time (ms) of `c` on `s`; infinite for a config of another family.
pub fn predict_ms(d: &Description, s: &Shape, c: &ConfigJson) -> f64 {
    match (s, c) {
        (Shape::Elem(e), ConfigJson::Elem(c)) => elem::predict_ms(d, e, &(*c).into()),
        (Shape::Gemm(g), ConfigJson::Gemm(c)) => gemm::predict_ms(d, g, &(*c).into()),
        (Shape::Clifford(s), ConfigJson::Clifford(c)) => clifford::predict_ms(d, s, &(*c).into()),
        _ => f64::INFINITY,
    }
}

/// The config's named parameters for shape `s`, as profiles and journals store them (an
/// exact-f32 GEMM's `tile_shape` names its FFMA tile).
pub fn to_params(s: &Shape, c: &ConfigJson) -> Config {
    match c {
        ConfigJson::Elem(c) => tuned::to_params(&(*c).into()),
        ConfigJson::Gemm(c) => {
            let mut p = tuned::gemm_to_params(&(*c).into());
            if matches!(s, Shape::Gemm(g) if g.dtype == crate::protocol::GemmDtype::F32) {
                match tuned::ffma_tile_label(c.tile as usize) {
                    Some(l) => p.insert("tile_shape".into(), ferrotune_profile::Param::Text(l)),
                    None => p.remove("tile_shape"),
                };
            }
            p
        }
        ConfigJson::Clifford(c) => tuned::clifford_to_params(&(*c).into()),
    }
}

/// How the tune table shows `c`: as `ConfigJson`'s `Display`, with the tile of an exact-f32
/// GEMM (`exact_f32`: op `gemm`, dtype `f32`) named as its FFMA tile.
pub fn describe(c: &ConfigJson, exact_f32: bool) -> String {
    let text = c.to_string();
    match c {
        ConfigJson::Gemm(gc) if exact_f32 => {
            let tc = tuned::tile_label(gc.tile as usize).unwrap_or_else(|| "not compiled".into());
            let ffma = tuned::ffma_tile_label(gc.tile as usize).unwrap_or_else(|| "no FFMA tile".into());
            text.replacen(&format!("({tc})"), &format!("({ffma})"), 1)
        }
        _ => text,
    }
}

/// The config of `s`'s family from named parameters; `None` when they do not make one.
pub fn from_params(s: &Shape, p: &Config) -> Option<ConfigJson> {
    match s {
        Shape::Elem(_) => tuned::from_params(p).map(Into::into),
        Shape::Gemm(_) => tuned::gemm_from_params(p).map(Into::into),
        Shape::Clifford(_) => tuned::clifford_from_params(p).map(Into::into),
    }
}

/// Bytes the op must move at least (for GB/s).
pub fn min_bytes(s: &Shape) -> f64 {
    match s {
        Shape::Elem(e) => e.op.min_bytes(e.n, e.dtype.size_bytes(), 0) as f64,
        Shape::Gemm(g) => g.min_bytes(),
        Shape::Clifford(c) => c.min_bytes(),
    }
}

/// Floating-point operations of the op, where that is its measure of work (GEMM).
pub fn flops(s: &Shape) -> Option<f64> {
    match s {
        Shape::Elem(_) | Shape::Clifford(_) => None,
        Shape::Gemm(g) => Some(g.flops()),
    }
}
