//! One place decides how a GEMM call runs on the GPU: problem → plan (kernel family, its
//! config, the split-K workspace) from the chosen config (a tuned profile's, else the built-in
//! heuristic's) and the call's operands, with the reason. `ops::gemm` resolves the plan and
//! launches it. Families in the order they are tried: pack (unaligned 16-bit operands of a
//! large enough problem copied into an aligned workspace, then the packed problem planned
//! again, `ops::pack`), small-M (M <= 64 against a large weight, `ops::gemv`), Hopper with a
//! split of K joined in the kernel (few output tiles, long K: `ops::gemm_sm90::split_for`),
//! the `mma.sync` split-K (forced by the call, or off the Hopper path), Hopper (`ops::gemm_sm90`;
//! the persistent 128 x 192 where it fills the waves better, `ops::gemm_sm90_fill`; a large
//! problem whose tiles fill one or two whole waves and at most a quarter of another in two
//! launches, whole waves then the remaining rows: `ops::gemm_sm90_rows`),
//! the `mma.sync`/FFMA tiles. A tuned config (a profile entry, or the tuner's point through
//! `Gemm::with_config`) may name the family (`path`: `mma`, `sm90:<t>` with its K split,
//! `small-m` with its K split) and whether to pack: the plan honours it where the call can
//! take it and says so in the reason, else falls back to its own rule and says why.
//! Adding a family: one `Family` variant, one arm in [`plan`].

use ferrotune_kernels::gemm::GemmVariant;
use ferrotune_kernels::gemm_sm90::Sm90Variant;
use ferrotune_kernels::gemm_sm90_split::Sm90Split;
use ferrotune_kernels::splitk::SplitPlan;

use crate::DType;
use crate::config::{GemmConfig, GemmPath, PackChoice};
use crate::error::Result;
use crate::ops::gemm::{Gemm, variant_chosen};
use crate::ops::gemm_plan_small_m::{hopper_shape, packed_for_hopper, small_m_of, small_m_reason};
use crate::ops::gemm_sm90;
use crate::ops::gemm_sm90_rows::{self, RowSplit};

/// A kernel family and what it runs with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Family {
    /// M <= 64: the weight streamed once over all SMs (`ops::gemv`).
    SmallM,
    /// Unaligned 16-bit (or f32 on TF32) operands packed into the stream's aligned workspace,
    /// then the packed problem planned again (`ops::pack`).
    Pack,
    /// One of the launches below.
    Launch(Launch),
}

/// The families `ops::gemm` launches on the operands as given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Launch {
    /// sm_90a: TMA + wgmma, warp-specialised (`gemm_sm90`), K split over blocks and joined in
    /// the kernel when the split has more than one slice.
    Hopper(Sm90Variant, Sm90Split),
    /// sm_90a, two launches: the rows whose large tiles fill whole waves, then the remaining
    /// rows on their own plan (`ops::gemm_sm90_rows`).
    HopperRows(RowSplit),
    /// One launch of the `mma.sync` tensor-core tiles (f16, bf16, tf32) or the FFMA kernel.
    Tiles(GemmVariant),
    /// K cut into slices (partial GEMMs on the tiles into an f32 workspace, then a reduce).
    SplitK(SplitPlan),
}

/// How one call runs, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmPlan {
    pub family: Family,
    /// The chosen config (split-K's tile choice, CPU rows).
    pub cfg: GemmConfig,
    pub reason: String,
}

impl Gemm {
    /// Runs the call with `cfg` instead of the tuned or built-in config (what the tuner's
    /// worker measures: exactly what a profile entry with this config runs). Checked at launch.
    pub fn with_config(mut self, cfg: GemmConfig) -> Gemm {
        self.config = Some(cfg);
        self
    }
}

/// The config a call of `g` (resolved) runs with: its own (`Gemm::with_config`, checked), else
/// a tuned profile's for this machine and shape, else the built-in heuristic.
pub(crate) fn chosen_config(s: &crate::stream::Stream, g: &Gemm, dtype: DType) -> Result<GemmConfig> {
    match g.config {
        Some(c) => c.validate().map(|_| c),
        None => crate::tuned::gemm_config_for(s, g, dtype),
    }
}

impl GemmPlan {
    /// The kernel family in words (what `profile explain` prints).
    pub fn family_name(&self) -> &'static str {
        match &self.family {
            Family::SmallM => "small-M (the weight streamed once, ops::gemv)",
            Family::Pack => "pack, then the packed problem's family",
            Family::Launch(Launch::Hopper(_, sp)) if sp.is_split() => "Hopper wgmma with an in-kernel K split",
            Family::Launch(Launch::Hopper(..)) => "Hopper wgmma + TMA",
            Family::Launch(Launch::HopperRows(_)) => "Hopper wgmma + TMA, whole waves then the remaining rows",
            Family::Launch(Launch::Tiles(v)) if v.math == ferrotune_kernels::gemm::Math::Ffma => "FFMA tiles",
            Family::Launch(Launch::Tiles(_)) => "mma.sync tiles",
            Family::Launch(Launch::SplitK(_)) => "mma.sync split-K (partials, then a reduce)",
        }
    }

    /// What the plan launches, exactly (kernels, tiles, K split, row split), where the plan
    /// fixes it: two configs whose keys are equal run the same launches on this problem, so a
    /// tuner can treat them as one point. `None` for the small-M family and the pack, whose
    /// kernels are chosen at launch.
    pub fn kernel_key(&self) -> Option<String> {
        match &self.family {
            Family::Launch(l) => Some(format!("{l:?}")),
            Family::SmallM | Family::Pack => None,
        }
    }

    /// The small-M family's (K split, width) the chosen config asks for (`path = "small-m"`:
    /// `split_k`, and `tile` as the index of the width in `gemv::WIDTHS`), `None` for the
    /// built-in ones.
    pub fn small_m_tuned(&self) -> Option<(usize, usize)> {
        (self.family == Family::SmallM && self.cfg.path == GemmPath::SmallM).then(|| small_m_of(&self.cfg))
    }

    /// A short name of the path: `sm90:<entry>[:splitk<s>]`, `mma:<entry>`, `ffma:<entry>`,
    /// `splitk:<slices>`, `small-m[:w<width>:splitk<s>]` (a tuned width and K split) or `pack`.
    pub fn path(&self) -> String {
        match &self.family {
            Family::SmallM => match self.small_m_tuned() {
                Some((_, crate::ops::gemv_stream::STREAM_WIDTH)) => "small-m:stream".into(),
                Some((_, crate::ops::gemv_rows::ROWS_WIDTH)) => "small-m:rows".into(),
                Some((s, w)) => format!("small-m:w{w}:splitk{s}"),
                None => "small-m".into(),
            },
            Family::Pack => "pack".into(),
            Family::Launch(Launch::Hopper(v, sp)) if sp.is_split() => {
                format!("sm90:{}:splitk{}", v.entry_name().as_str(), sp.slices)
            }
            Family::Launch(Launch::Hopper(v, _)) => format!("sm90:{}", v.entry_name().as_str()),
            Family::Launch(Launch::HopperRows(r)) => gemm_sm90_rows::path(r),
            Family::Launch(Launch::Tiles(v)) if v.math == ferrotune_kernels::gemm::Math::Ffma => {
                format!("ffma:{}", v.entry_name().as_str())
            }
            Family::Launch(Launch::Tiles(v)) => format!("mma:{}", v.entry_name().as_str()),
            Family::Launch(Launch::SplitK(p)) => format!("splitk:{}", p.slices),
        }
    }
}

/// The plan of the resolved GEMM `g` with inputs of `dtype` at `pa`, `pb`, output `out`, on a
/// device running the PTX module `arch` with `sm_count` SMs; `cfg` is the chosen config.
pub fn plan(
    g: &Gemm,
    dtype: DType,
    out: DType,
    arch: &str,
    sm_count: u32,
    cfg: GemmConfig,
    ptrs: [u64; 2],
) -> Result<GemmPlan> {
    let mut p = plan_families(g, dtype, out, arch, sm_count, cfg, ptrs)?;
    if cfg.pack == PackChoice::Off && crate::ops::pack::pack_possible(g, dtype, ptrs) {
        p.reason = format!("the tuned config does not pack the unaligned operands (pack = false); {}", p.reason);
    }
    Ok(p)
}

/// [`plan`] without the note on a tuned `pack = false`.
fn plan_families(
    g: &Gemm,
    dtype: DType,
    out: DType,
    arch: &str,
    sm_count: u32,
    cfg: GemmConfig,
    [pa, pb]: [u64; 2],
) -> Result<GemmPlan> {
    // The family the call or the chosen config names (`Auto`: the rules below).
    let asked = g.path.unwrap_or(cfg.path);
    // A small-M call reads unaligned weights in place rather than packing them (`gemv`), and so
    // does a tuned config naming the row kernel where that kernel can run the call.
    let in_place = || {
        matches!(asked, GemmPath::Auto | GemmPath::SmallM)
            && ((crate::ops::gemv::reads_unaligned_in_place(g, dtype, [pa, pb])
                && !(asked == GemmPath::Auto && packed_for_hopper(g, dtype, out, arch, sm_count, cfg, [pa, pb])))
                || (asked == GemmPath::SmallM
                    && cfg.tile == crate::ops::gemv_rows::ROWS_TILE
                    && crate::ops::gemv::small_m_applies(g, dtype).is_some()
                    && crate::ops::gemv_rows::applies(g, dtype, pb, Some(small_m_of(&cfg))).is_ok()))
    };
    let pack = match cfg.pack {
        PackChoice::Auto => {
            crate::ops::pack::pack_applies(g, dtype, [pa, pb]).filter(|_| !in_place()).map(str::to_string)
        }
        PackChoice::Off => None,
        // `FERROTUNE_PACK=0` (A/B runs) wins over a tuned `pack = true`.
        PackChoice::On => (crate::ops::pack::pack_possible(g, dtype, [pa, pb])
            && !std::env::var("FERROTUNE_PACK").is_ok_and(|v| v == "0"))
        .then(|| "the tuned config packs the unaligned operands (pack = true)".to_string()),
    };
    if let Some(why) = pack {
        // What the packed copy then runs (the workspace is 16-byte aligned).
        let packed = crate::ops::pack::packed_gemm(g, dtype, [pa, pb]);
        let then = plan(&packed, dtype, out, arch, sm_count, cfg, [256, 256])?;
        return Ok(GemmPlan {
            family: Family::Pack,
            cfg,
            reason: format!("{why}; then {} ({})", then.path(), then.reason),
        });
    }
    if asked == GemmPath::SmallM {
        match crate::ops::gemv::small_m_applies(g, dtype) {
            Some(why) => return Ok(small_m_plan(g, dtype, out, arch, [pa, pb], sm_count, cfg, why)),
            None if g.path.is_some() => {
                return Err(crate::error::Error::InvalidConfig {
                    op: "gemm",
                    why: format!(
                        "the call forces the small-M family, which takes 16-bit single matrices of 1..={} rows \
                         with no tile or split forced (M = {}, batch {})",
                        ferrotune_kernels::gemv::MAX_M,
                        g.m,
                        g.batch
                    ),
                });
            }
            None => {
                // A tuned small-M point this call cannot take: the plan's own rules, saying so.
                // (Its split_k is small-M's K split: the heuristic's tile and split instead.)
                let own = GemmConfig {
                    cpu_rows: cfg.cpu_rows,
                    pack: cfg.pack,
                    ..GemmConfig::heuristic(g.m, g.n, g.k, g.batch)
                };
                let mut p = plan_families(g, dtype, out, arch, sm_count, own, [pa, pb])?;
                p.reason = format!(
                    "the tuned config asks for the small-M family, which this call cannot take \
                     (16-bit, 1..={} rows, one matrix); {}",
                    ferrotune_kernels::gemv::MAX_M,
                    p.reason
                );
                return Ok(p);
            }
        }
    }
    // Shapes `hopper_shape` names that the Hopper path can load go there (tiles of 64 or 128
    // rows, K split when the tiles are few) instead of the small-M family, which reads x once
    // per 16 weight rows.
    let hopper_first = hopper_shape(g) && gemm_sm90::choose(g, dtype, out, arch, sm_count, cfg, [pa, pb]).is_ok();
    // A family named by the call or the tuned config (`mma`, `sm90:<t>`) is not small-M's.
    let small_m = crate::ops::gemv::small_m_applies(g, dtype).filter(|_| !hopper_first && asked == GemmPath::Auto);
    if let Some(why) = small_m {
        return Ok(small_m_plan(g, dtype, out, arch, [pa, pb], sm_count, cfg, why));
    }
    let hopper = gemm_sm90::choose(g, dtype, out, arch, sm_count, cfg, [pa, pb]);
    if let Ok((v, sp)) = hopper
        && sp.is_split()
    {
        let reason = if gemm_sm90::tuned_split(g, cfg).is_some() {
            format!(
                "Hopper split-K from the tuned config (split_k = {}): {}",
                cfg.split_k,
                gemm_sm90::split_shape(g, v.tile, sp)
            )
        } else {
            gemm_sm90::split_reason(g, v.tile, sp, sm_count)
        };
        return Ok(GemmPlan { family: Family::Launch(Launch::Hopper(v, sp)), cfg, reason });
    }
    let split = SplitPlan::new(g.k, split_k_for(g, cfg));
    // On the Hopper path only a split the call forces runs on the mma.sync tiles.
    if split.is_split() && (g.split_k.is_some() || hopper.is_err()) {
        let why = match &hopper {
            _ if g.split_k.is_some() => "forced by the call".to_string(),
            Err(why) if matches!(cfg.path, GemmPath::Sm90(_)) => format!("the tuned Hopper split cannot run: {why}"),
            _ => "the chosen config splits K".to_string(),
        };
        return Ok(GemmPlan { family: Family::Launch(Launch::SplitK(split)), cfg, reason: format!("split-K: {why}") });
    }
    // A config whose tile was chosen for a split this call does not run gives way to the
    // unsplit heuristic.
    let cfg = if cfg.split_k > 1 { GemmConfig::heuristic_unsplit(g.m, g.n, g.batch) } else { cfg };
    match hopper {
        Ok((v, _)) if let Some(r) = gemm_sm90_rows::row_split(g, dtype, out, arch, sm_count, cfg, v, [pa, pb]) => {
            Ok(GemmPlan {
                family: Family::Launch(Launch::HopperRows(r)),
                cfg,
                reason: gemm_sm90_rows::reason(g, &r, sm_count),
            })
        }
        Ok((v, sp)) => Ok(GemmPlan {
            family: Family::Launch(Launch::Hopper(v, sp)),
            cfg,
            reason: format!(
                "{}{}",
                if dtype == DType::F32 {
                    "Hopper wgmma + TMA on TF32: sm_90a module, f32 rc operands TMA can describe, TF32 math \
                     allowed (Precision::AllowTf32)"
                } else {
                    "Hopper wgmma + TMA: sm_90a module, 16-bit rc operands TMA can describe"
                },
                gemm_sm90::tile_reason(g, v.tile, g.path.unwrap_or(cfg.path), sm_count, out)
            ),
        }),
        Err(why) if matches!(g.path, Some(GemmPath::Sm90(_))) => Err(crate::error::Error::InvalidConfig {
            op: "gemm",
            why: format!("the call forces Hopper path {:?}, which it cannot take: {why}", g.path),
        }),
        Err(why) => {
            let (v, tile_why) =
                crate::ops::gemm_ffma::with_tile(variant_chosen(g, dtype, out, pa, pb, cfg)?, g, &cfg, sm_count)?;
            Ok(GemmPlan {
                family: Family::Launch(Launch::Tiles(v)),
                cfg,
                reason: format!("not the Hopper path: {why}{tile_why}"),
            })
        }
    }
}

/// The small-M plan of `g` (for which `small_m_applies` gave `why`).
#[allow(clippy::too_many_arguments)]
fn small_m_plan(
    g: &Gemm,
    dtype: DType,
    out: DType,
    arch: &str,
    ptrs: [u64; 2],
    sm_count: u32,
    cfg: GemmConfig,
    why: &str,
) -> GemmPlan {
    GemmPlan { family: Family::SmallM, cfg, reason: small_m_reason(g, dtype, out, arch, ptrs, sm_count, cfg, why) }
}

/// The split-K factor a call runs with: the call's own (checked in `check`), else the chosen
/// config's for single matrices without a forced tile; a profile's split-K for a batch is
/// ignored (and logged).
pub(crate) fn split_k_for(g: &Gemm, cfg: GemmConfig) -> usize {
    match g.split_k {
        Some(s) => s,
        None if g.batch > 1 && cfg.split_k > 1 => {
            log::debug!(
                "gemm {}x{}x{} batch {}: split_k {} of the chosen config ignored (single matrices only)",
                g.m,
                g.n,
                g.k,
                g.batch,
                cfg.split_k
            );
            1
        }
        // A forced tile asks for that kernel: the chosen config's split (whose partial
        // products may need another tile) applies only when split_k is forced too.
        None if (g.tile.is_some() || matches!(g.path, Some(GemmPath::Sm90(_)))) && cfg.split_k > 1 => {
            log::debug!(
                "gemm {}x{}x{}: split_k {} of the chosen config ignored for the forced tile {:?}",
                g.m,
                g.n,
                g.k,
                cfg.split_k,
                g.tile
            );
            1
        }
        None => cfg.split_k,
    }
}

/// The plan a call of this shape gets on `s` (operands at fresh, 256-byte aligned
/// allocations): what `bench` rows and `profile explain` report. CPU streams have no plan.
pub fn explain(s: &crate::stream::Stream, g: &Gemm, dtype: DType, out: DType) -> Result<Option<GemmPlan>> {
    let cfg = chosen_config(s, &g.resolved(), dtype)?;
    explain_with(s, g, dtype, out, cfg)
}

/// As [`explain`], with the chosen config given (`profile explain` passes its own profiles').
pub fn explain_with(
    s: &crate::stream::Stream,
    g: &Gemm,
    dtype: DType,
    out: DType,
    cfg: GemmConfig,
) -> Result<Option<GemmPlan>> {
    explain_at(s, g, dtype, out, cfg, [256, 256])
}

/// As [`explain_with`], for operands at `ptrs` (A, B): alignment decides packing and the path.
pub fn explain_at(
    s: &crate::stream::Stream,
    g: &Gemm,
    dtype: DType,
    out: DType,
    cfg: GemmConfig,
    ptrs: [u64; 2],
) -> Result<Option<GemmPlan>> {
    let crate::stream::Stream::Cuda { gpu, .. } = s else { return Ok(None) };
    let g = g.resolved();
    let arch = gpu.kernels()?.arch;
    plan(&g, dtype, out, arch, gpu.info.sm_count, cfg, ptrs).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::{Layout, Precision};

    /// The plan's family for a bf16 `x wᵀ` of this shape on a 132-SM device running `arch`.
    fn fam(arch: &str, g: Gemm) -> Family {
        let g = g.layouts(Layout::Row, Layout::Col).resolved();
        let cfg = GemmConfig::heuristic(g.m, g.n, g.k, g.batch);
        plan(&g, DType::Bf16, DType::Bf16, arch, 132, cfg, [256, 256]).unwrap().family
    }

    /// f32 inputs on TF32 with rows TMA cannot step (K not a multiple of 4, or a view at an
    /// odd offset) are packed for the Hopper path when the work pays for it, exact f32 for the
    /// FFMA kernel's 16-byte form; aligned rows are not, nor small problems.
    #[test]
    fn f32_on_tf32_packs_unaligned_rows() {
        if overridden(&["FERROTUNE_PACK", "FERROTUNE_ALLOW_TF32", "FERROTUNE_SM90", "FERROTUNE_SM90_TILE"]) {
            return;
        }
        let f32_plan = |g: Gemm, ptrs: [u64; 2]| {
            let g = g.layouts(Layout::Row, Layout::Col).resolved();
            let cfg = GemmConfig::heuristic(g.m, g.n, g.k, g.batch);
            plan(&g, DType::F32, DType::F32, "sm_90a", 132, cfg, ptrs).unwrap()
        };
        let p = f32_plan(Gemm::new(4097, 1023, 777), [256, 256]);
        assert_eq!(p.family, Family::Pack);
        assert!(p.reason.contains("then sm90:ft_gemm90_tf32"), "{}", p.reason);
        assert_eq!(f32_plan(Gemm::new(1024, 1024, 1023), [256, 256]).family, Family::Pack);
        // A at an offset of one float: its rows are not 16-byte aligned though K is.
        assert_eq!(f32_plan(Gemm::new(1024, 1024, 1024), [260, 256]).family, Family::Pack);
        assert!(matches!(f32_plan(Gemm::new(1024, 1024, 1024), [256, 256]).family, Family::Launch(_)));
        assert!(matches!(f32_plan(Gemm::new(100, 100, 77), [256, 256]).family, Family::Launch(_)), "small");
        // Exact f32: packed for the FFMA kernel's 16-byte form; rows of whole 16 bytes are not.
        let strict = |g: Gemm| f32_plan(g.precision(Precision::Strict), [256, 256]);
        for (m, n, k) in [(4097, 1023, 777), (257, 300, 777), (600, 130, 1025), (1000, 333, 4099), (1536, 1536, 4099)] {
            assert_eq!(strict(Gemm::new(m, n, k)).family, Family::Pack, "{m}x{n}x{k}");
        }
        assert!(strict(Gemm::new(4097, 1023, 777)).reason.contains("then ffma:ft_gemm_f32_rc_v16_f32_"));
        assert!(matches!(strict(Gemm::new(4096, 1024, 772)).family, Family::Launch(_)), "aligned exact f32");
    }

    /// Whether any of `vars` is set: the variables override the rules under test.
    fn overridden(vars: &[&str]) -> bool {
        vars.iter().any(|v| std::env::var(v).is_ok())
    }

    fn hopper_slices(f: Family) -> Option<usize> {
        match f {
            Family::Launch(Launch::Hopper(_, sp)) => Some(sp.slices),
            _ => None,
        }
    }

    /// The shape classes of the irregular suite get the family the H100 measurements chose
    /// (bench/results/irregular/): long K with few tiles the Hopper split on the streaming
    /// tile, M > 32 against a large weight the Hopper tiles (the streaming tile while its tiles
    /// fit one wave), other small M the small-M family; off sm_90a, the mma.sync split-K; a
    /// call's own split_k keeps it.
    #[test]
    fn plan_families_by_shape_class() {
        if overridden(&[
            "FERROTUNE_SM90",
            "FERROTUNE_SM90_SPLIT",
            "FERROTUNE_SMALL_M",
            "FERROTUNE_SMALL_M_BESIDE_HOPPER",
            "FERROTUNE_SMALL_M_SHORT_K_HOPPER",
            "FERROTUNE_SMALL_M_ALIGNED_HOPPER",
        ]) {
            return;
        }
        let a = "sm_90a";
        assert_eq!(hopper_slices(fam(a, Gemm::new(256, 256, 65_536))), Some(16));
        assert_eq!(hopper_slices(fam(a, Gemm::new(512, 512, 32_768))), Some(4));
        assert_eq!(hopper_slices(fam(a, Gemm::new(1024, 1024, 16_384))), Some(2));
        assert_eq!(hopper_slices(fam(a, Gemm::new(128, 8192, 1024))), Some(1));
        assert_eq!(hopper_slices(fam(a, Gemm::new(64, 4096, 4096))), Some(1));
        // Those are the streaming class: the streaming tile, split or not.
        for g in [Gemm::new(256, 256, 65_536), Gemm::new(64, 4096, 4096), Gemm::new(128, 8192, 1024)] {
            let f = fam(a, g);
            assert!(matches!(f, Family::Launch(Launch::Hopper(v, _)) if v.tile == gemm_sm90::STREAM_TILE), "{f:?}");
        }
        let f = fam(a, Gemm::new(128, 14_336, 4096));
        assert!(matches!(f, Family::Launch(Launch::Hopper(v, _)) if v.tile == 1), "{f:?}");
        assert_eq!(fam(a, Gemm::new(8, 11008, 4096)), Family::SmallM);
        assert_eq!(fam(a, Gemm::new(16, 4096, 4096)), Family::SmallM);
        // 9 to 16 rows against a weight of 2^25 elements or more: the Hopper streaming tile.
        let f = fam(a, Gemm::new(16, 11008, 4096));
        assert!(matches!(f, Family::Launch(Launch::Hopper(v, _)) if v.tile == gemm_sm90::STREAM_TILE), "{f:?}");
        assert_eq!(fam(a, Gemm::new(17, 33, 9000)), Family::SmallM);
        // 17 to 64 rows of aligned operands with K up to 1024, any N: the Hopper tiles.
        for (m, n, k) in [(64, 8000, 200), (33, 4096, 64), (64, 1000, 512), (17, 64, 1024), (32, 8000, 8)] {
            assert!(matches!(fam(a, Gemm::new(m, n, k)), Family::Launch(Launch::Hopper(..))), "{m}x{n}x{k}");
        }
        for (m, n, k) in [(48, 128, 4096), (32, 2048, 1025), (16, 8000, 120), (16, 4096, 512)] {
            assert_eq!(fam(a, Gemm::new(m, n, k)), Family::SmallM, "{m}x{n}x{k}");
        }
        assert_eq!(fam("sm_80", Gemm::new(64, 8000, 200)), Family::SmallM);
        // 17 to 32 rows: Hopper past 3 x 2^23 weight elements, small-M below.
        assert_eq!(fam(a, Gemm::new(32, 4096, 4096)), Family::SmallM);
        assert_eq!(fam(a, Gemm::new(24, 2048, 8192)), Family::SmallM);
        for (m, n, k) in [(24, 5120, 5120), (17, 8192, 8192), (32, 14_336, 4096)] {
            assert!(matches!(fam(a, Gemm::new(m, n, k)), Family::Launch(Launch::Hopper(..))), "{m}x{n}x{k}");
        }
        assert!(matches!(fam("sm_80", Gemm::new(256, 256, 65_536)), Family::Launch(Launch::SplitK(_))));
        assert!(matches!(fam(a, Gemm::new(256, 256, 65_536).split_k(4)), Family::Launch(Launch::SplitK(_))));
        assert_eq!(hopper_slices(fam(a, Gemm::new(256, 256, 65_536).split_k(1))), Some(1));
    }

    /// f32 inputs with TF32 math allowed take the Hopper path where TMA can load them (rows of
    /// whole 16 bytes: K a multiple of 4), on the tiles compiled for TF32 (K split on the
    /// split tiles); exact f32 (`Precision::Strict`) stays on FFMA, unaligned rows (packed
    /// first above `pack::MIN_MACS`) and other layouts on the mma.sync TF32 tiles, and a forced
    /// tile not compiled for TF32 is an error.
    #[test]
    fn tf32_routes_to_hopper_exact_f32_to_ffma() {
        if overridden(&["FERROTUNE_SM90", "FERROTUNE_SM90_SPLIT", "FERROTUNE_SM90_TILE", "FERROTUNE_ALLOW_TF32"]) {
            return;
        }
        use crate::ops::gemm::Precision;
        use ferrotune_kernels::gemm::Math;
        let p = |g: Gemm| {
            let g = g.resolved();
            let cfg = GemmConfig::heuristic(g.m, g.n, g.k, g.batch);
            plan(&g, DType::F32, DType::F32, "sm_90a", 132, cfg, [256, 256])
        };
        let rc = |m, n, k| Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col);
        let hopper = |g: Gemm| match p(g).unwrap().family {
            Family::Launch(Launch::Hopper(v, sp)) => {
                assert_eq!((v.dtype, v.out_dtype()), (DType::F32, DType::F32));
                Some((v.tile, sp.slices))
            }
            _ => None,
        };
        // Large, D stored by TMA: the persistent 128 x 256; with a C read: the one-tile one.
        assert_eq!(hopper(rc(4096, 4096, 4096)), Some((8, 1)));
        assert_eq!(hopper(rc(8192, 3072, 768)), Some((8, 1)));
        let beta = crate::ops::gemm::Epilogue { beta: 1.0, ..crate::ops::gemm::Epilogue::PLAIN };
        assert_eq!(hopper(rc(8192, 3072, 768).epilogue(beta)), Some((0, 1)));
        assert_eq!(hopper(rc(512, 3072, 768)), Some((1, 1)));
        assert_eq!(hopper(rc(256, 256, 65_536)), Some((10, 16)));
        assert_eq!(hopper(rc(64, 4096, 4096)), Some((10, 2)));
        assert_eq!(hopper(rc(128, 8192, 1024)), Some((10, 1)));
        let r = p(rc(4096, 4096, 4096)).unwrap();
        assert!(r.reason.contains("TF32") && r.path() == "sm90:ft_gemm90_tf32_rc_f32_128x256x32s4p", "{r:?}");
        // Exact f32: FFMA; K = 1001 (rows of 4004 bytes) on a problem too small to pack, other
        // layouts, pre-Hopper: mma.sync TF32. Larger, the unaligned rows are packed first.
        let tiles = |g: Gemm| match p(g).unwrap().family {
            Family::Launch(Launch::Tiles(v)) => v.math,
            f => panic!("{f:?}"),
        };
        assert_eq!(tiles(rc(4096, 4096, 4096).precision(Precision::Strict)), Math::Ffma);
        assert!(p(rc(4096, 4096, 4096).precision(Precision::Strict)).unwrap().reason.contains("exact f32"));
        assert_eq!(tiles(rc(100, 100, 1001)), Math::Tf32);
        assert!(p(rc(100, 100, 1001)).unwrap().reason.contains("TMA cannot load"));
        assert_eq!(p(rc(1000, 1000, 1001)).unwrap().family, Family::Pack);
        assert_eq!(tiles(Gemm::new(1024, 1024, 1024)), Math::Tf32);
        let g = rc(1024, 1024, 1024).resolved();
        let cfg = GemmConfig::heuristic(g.m, g.n, g.k, g.batch);
        let f = plan(&g, DType::F32, DType::F32, "sm_80", 108, cfg, [256, 256]).unwrap().family;
        assert!(matches!(f, Family::Launch(Launch::Tiles(v)) if v.math == Math::Tf32), "{f:?}");
        // A forced tile that TF32 does not compile is an error; one it does is taken.
        let e = p(rc(1024, 1024, 1024).path(GemmPath::Sm90(2))).unwrap_err();
        assert!(e.to_string().contains("not compiled for tf32"), "{e}");
        assert_eq!(hopper(rc(1024, 1024, 1024).path(GemmPath::Sm90(1))), Some((1, 2)));
    }

    /// Unaligned weights of small-M calls up to 40 rows are read in place (interleaved slabs),
    /// not packed: the pack would copy the whole weight first. Larger M still packs for the
    /// Hopper tiles.
    #[test]
    fn small_m_reads_unaligned_weights_in_place() {
        if overridden(&[
            "FERROTUNE_SMALL_M",
            "FERROTUNE_SMALL_M_UNALIGNED",
            "FERROTUNE_PACK",
            "FERROTUNE_SMALL_M_BESIDE_HOPPER",
            "FERROTUNE_SMALL_M_SHORT_K_HOPPER",
        ]) {
            return;
        }
        let a = "sm_90a";
        // Up to 40 rows whatever the weight's size (24 rows against 8191 x 4099: past the
        // aligned rule's Hopper threshold).
        for (m, n, k) in [
            (1, 8193, 4099),
            (8, 12288, 4099),
            (32, 5000, 3001),
            (1, 4097, 777),
            (24, 8191, 4099),
            (33, 8191, 4099),
            (40, 999, 777),
        ] {
            assert_eq!(fam(a, Gemm::new(m, n, k)), Family::SmallM, "{m}x{n}x{k}");
        }
        for (m, n, k) in [(41, 8191, 4099), (64, 3001, 4097), (65, 8191, 4099)] {
            assert_eq!(fam(a, Gemm::new(m, n, k)), Family::Pack, "{m}x{n}x{k}");
        }
        assert_eq!(fam(a, Gemm::new(4097, 1023, 777)), Family::Pack);
        // x alone unaligned (B's rows aligned: K = 4096 with A at an odd element offset) above
        // 40 rows: packed for the Hopper path.
        let g = Gemm::new(64, 4096, 4096).layouts(Layout::Row, Layout::Col).resolved();
        let cfg = GemmConfig::heuristic(g.m, g.n, g.k, g.batch);
        let f = plan(&g, DType::Bf16, DType::Bf16, a, 132, cfg, [258, 256]).unwrap().family;
        assert_eq!(f, Family::Pack);
        let g = Gemm::new(8, 4096, 4096).layouts(Layout::Row, Layout::Col).resolved();
        let f = plan(&g, DType::Bf16, DType::Bf16, a, 132, cfg, [258, 256]).unwrap().family;
        assert_eq!(f, Family::SmallM);
    }
}
