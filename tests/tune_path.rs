//! A tuned GEMM path reaches the plan: a profile entry's `path` (the `mma.sync` tiles or a
//! Hopper tile) is what `gemm_plan::plan` runs on an sm_90a device, an entry without one
//! (every profile before the Hopper path was tunable) leaves the choice to the plan, and a call
//! that forces a Hopper tile it cannot take is a typed error. CPU only: the plan is a pure
//! function of the problem, the module's architecture and the chosen config.

use ferrotune::config::{GemmConfig, GemmPath};
use ferrotune::ops::gemm::{Gemm, Layout};
use ferrotune::ops::gemm_plan::{Family, Launch, plan};
use ferrotune::profile::{Profile, ProfileSet};
use ferrotune::tuned::{Source, gemm_explain_in};
use ferrotune::{DType, Error};
use ferrotune_testkit::cpu_backend;

use crate::tune::{gemm_entry_for, temp_dir, write};

/// The plan on an H100-like device (sm_90a module, 132 SMs), operands 256-byte aligned.
fn plan_h100(g: &Gemm, cfg: GemmConfig) -> ferrotune::Result<ferrotune::ops::gemm_plan::GemmPlan> {
    plan(g, DType::Bf16, DType::Bf16, "sm_90a", 132, cfg, [256, 256])
}

#[test]
fn a_tuned_hopper_path_is_what_the_plan_runs() {
    let b = cpu_backend();
    let s = b.stream();
    let dir = temp_dir("path");
    let hopper = GemmConfig { path: GemmPath::Sm90(4), ..GemmConfig::DEFAULT };
    let mma = GemmConfig { tile: 1, path: GemmPath::Mma, ..GemmConfig::DEFAULT };
    let p = Profile {
        source: None,
        entries: vec![
            gemm_entry_for(&s, "bf16", "rc", [8192, 3072, 768, 1], &hopper),
            gemm_entry_for(&s, "bf16", "rc", [512, 512, 512, 1], &mma),
        ],
        journal: vec![],
    };
    write(&dir, "gemm.toml", &p);
    let set = ProfileSet::load(&dir);
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    let g = |m, n, k| Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).resolved();

    let (cfg, src) = gemm_explain_in(&set, &g(8192, 3072, 768), DType::Bf16, &s);
    assert!(matches!(src, Source::Profile { .. }), "{src}");
    assert_eq!(cfg.path, GemmPath::Sm90(4));
    let pl = plan_h100(&g(8192, 3072, 768), cfg).unwrap();
    assert_eq!(pl.path(), "sm90:ft_gemm90_bf16_rc_bf16_64x256x64s4pp", "{pl:?}");
    // The same config on a module without wgmma: the tiles, saying why.
    let other = plan(&g(8192, 3072, 768), DType::Bf16, DType::Bf16, "sm_90", 132, cfg, [256, 256]).unwrap();
    assert!(matches!(other.family, Family::Launch(Launch::Tiles(_))), "{other:?}");
    assert!(other.reason.contains("sm_90a"), "{}", other.reason);

    let (cfg, _) = gemm_explain_in(&set, &g(512, 512, 512), DType::Bf16, &s);
    assert_eq!(cfg.path, GemmPath::Mma);
    let pl = plan_h100(&g(512, 512, 512), cfg).unwrap();
    assert!(matches!(pl.family, Family::Launch(Launch::Tiles(v)) if v.tile == 1), "{pl:?}");
    assert!(pl.reason.contains("asks for the mma.sync tiles"), "{}", pl.reason);

    // No entry (f16: the heuristic, `Auto`): the plan's own choice, the persistent 128 x 256
    // with the TMA store (D rows of whole 16-byte chunks, no C read), and why.
    let (cfg, src) = gemm_explain_in(&set, &g(4096, 4096, 4096), DType::F16, &s);
    assert!(matches!(src, Source::Heuristic { .. }), "{src}");
    assert_eq!(cfg.path, GemmPath::Auto);
    let pl = plan(&g(4096, 4096, 4096), DType::F16, DType::F16, "sm_90a", 132, cfg, [256, 256]).unwrap();
    assert_eq!(pl.path(), "sm90:ft_gemm90_f16_rc_f16_128x256x64s4p", "{pl:?}");
    assert!(pl.reason.contains("TMA-store epilogue"), "{}", pl.reason);
    // D rows of 4100 halves (not whole 16-byte chunks): the one-tile 128 x 256.
    let pl = plan(&g(4096, 4100, 4096), DType::F16, DType::F16, "sm_90a", 132, cfg, [256, 256]).unwrap();
    assert_eq!(pl.path(), "sm90:ft_gemm90_f16_rc_f16_128x256x64s4", "{pl:?}");
}

#[test]
fn a_forced_path_wins_over_the_config_and_a_hopper_tile_the_call_cannot_take_is_an_error() {
    let g = Gemm::new(1024, 1024, 1024).layouts(Layout::Row, Layout::Col).resolved();
    let tuned = GemmConfig { path: GemmPath::Sm90(4), ..GemmConfig::DEFAULT };
    let pl = plan_h100(&g.path(GemmPath::Sm90(6)), tuned).unwrap();
    assert_eq!(pl.path(), "sm90:ft_gemm90_bf16_rc_bf16_128x128x64s5pp");
    let pl = plan_h100(&g.path(GemmPath::Mma), tuned).unwrap();
    assert!(matches!(pl.family, Family::Launch(Launch::Tiles(_))), "{pl:?}");
    // A tuned split-K gives way to a forced Hopper tile (split-K runs the mma.sync tiles).
    let split = GemmConfig { split_k: 4, ..GemmConfig::DEFAULT };
    let pl = plan_h100(&g.path(GemmPath::Sm90(0)), split).unwrap();
    assert_eq!(pl.path(), "sm90:ft_gemm90_bf16_rc_bf16_128x256x64s4");
    // Column-major A: TMA path impossible; forced, it is an error, not a silent fallback.
    let cc = Gemm::new(1024, 1024, 1024).layouts(Layout::Col, Layout::Col).resolved();
    let e = plan_h100(&cc.path(GemmPath::Sm90(0)), GemmConfig::DEFAULT).unwrap_err();
    assert!(matches!(&e, Error::InvalidConfig { why, .. } if why.contains("layout")), "{e}");
    // A tile that is not compiled.
    let n = ferrotune_kernels::gemm_sm90::TILES.len() as u8;
    let e = plan_h100(&g.path(GemmPath::Sm90(n)), GemmConfig::DEFAULT).unwrap_err();
    assert!(matches!(&e, Error::InvalidConfig { why, .. } if why.contains("not compiled")), "{e}");
    // As a tuned config (not forced) the same call falls back to the tiles.
    let pl = plan_h100(&cc, tuned).unwrap();
    assert!(matches!(pl.family, Family::Launch(Launch::Tiles(_))), "{pl:?}");
}

#[test]
fn a_tuned_exact_f32_entry_picks_the_ffma_tile_and_split() {
    use ferrotune::ops::gemm::Precision;
    let b = cpu_backend();
    let s = b.stream();
    let dir = temp_dir("path-f32");
    let big = GemmConfig { tile: 1, path: GemmPath::Mma, ..GemmConfig::DEFAULT };
    let split = GemmConfig { split_k: 4, path: GemmPath::Mma, ..GemmConfig::DEFAULT };
    let p = Profile {
        source: None,
        entries: vec![
            gemm_entry_for(&s, "f32", "rc", [3072, 3072, 3072, 1], &big),
            gemm_entry_for(&s, "f32", "rc", [512, 3072, 768, 1], &split),
        ],
        journal: vec![],
    };
    write(&dir, "gemm.toml", &p);
    let set = ProfileSet::load(&dir);
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    let g = |m, n, k| Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).precision(Precision::Strict).resolved();
    let f32_plan = |g: &Gemm, cfg| plan(g, DType::F32, DType::F32, "sm_90a", 132, cfg, [256, 256]).unwrap();

    // 3072^3: the built-in rule runs the 128-row tile (ragged waves); the entry's 256-row wins.
    let (cfg, src) = gemm_explain_in(&set, &g(3072, 3072, 3072), DType::F32, &s);
    assert!(matches!(src, Source::Profile { .. }), "{src}");
    let pl = f32_plan(&g(3072, 3072, 3072), cfg);
    assert_eq!(pl.path(), "ffma:ft_gemm_f32_rc_v16_f32_256x128x8", "{pl:?}");
    assert!(pl.reason.contains("chosen config's tile 1"), "{}", pl.reason);
    let own = f32_plan(&g(3072, 3072, 3072), GemmConfig::heuristic(3072, 3072, 3072, 1));
    assert_eq!(own.path(), "ffma:ft_gemm_f32_rc_v16_f32_128x128x8", "{own:?}");
    // The same entry on rows that are not 16-byte aligned: packed, then the entry's tile on
    // the aligned copy; with the pack off, the 128-row tile of 4-byte loads, saying why.
    let (cfg, _) = gemm_explain_in(&set, &g(3072, 3072, 3071), DType::F32, &s);
    let pl = f32_plan(&g(3072, 3072, 3071), cfg);
    assert_eq!(pl.path(), "pack", "{pl:?}");
    assert!(pl.reason.contains("then ffma:ft_gemm_f32_rc_v16_f32_256x128x8"), "{}", pl.reason);
    let unpacked = GemmConfig { pack: ferrotune::config::PackChoice::Off, ..cfg };
    let pl = f32_plan(&g(3072, 3072, 3071), unpacked);
    assert!(pl.path().starts_with("ffma:ft_gemm_f32_rc_v4_f32_128x128x8"), "{pl:?}");
    assert!(pl.reason.contains("16-byte"), "{}", pl.reason);

    // A tuned split: the mma.sync split-K, its partial products on FFMA tiles.
    let (cfg, _) = gemm_explain_in(&set, &g(512, 3072, 768), DType::F32, &s);
    assert_eq!(cfg.split_k, 4);
    let pl = f32_plan(&g(512, 3072, 768), cfg);
    assert!(matches!(pl.family, Family::Launch(Launch::SplitK(sp)) if sp.slices == 4), "{pl:?}");

    // f32 calls that allow TF32 look up `tf32` entries, not these.
    let tf32 = Gemm::new(3072, 3072, 3072).layouts(Layout::Row, Layout::Col).resolved();
    if tf32.precision.uses_tf32() {
        let (_, src) = gemm_explain_in(&set, &tf32, DType::F32, &s);
        assert!(matches!(src, Source::Heuristic { .. }), "{src}");
    }
}
