//! Every GEMM family is a point a profile can record and the plan honours: a tuned small-M
//! entry (`path = "small-m"`, `split_k` its K split), a tuned Hopper split (`sm90:<t>` with
//! `split_k`), and `pack` on or off survive the TOML round trip, and `gemm_plan::plan` runs
//! them, saying so; an entry the call cannot take falls back to the built-in rules with the
//! reason, a foreign or out-of-range value makes the entry invalid (heuristic, with the
//! reason), a call that forces a family it cannot take is a typed error — never a panic. CPU
//! only: the plan is a pure function of the problem, the architecture and the config.

use ferrotune::config::{GemmConfig, GemmPath, PackChoice};
use ferrotune::ops::gemm::{Gemm, Layout};
use ferrotune::ops::gemm_plan::{Family, GemmPlan, Launch, plan};
use ferrotune::profile::{Param, Profile, ProfileSet};
use ferrotune::tuned::{Source, gemm_explain_in, gemm_from_params, gemm_to_params};
use ferrotune::{DType, Error};
use ferrotune_testkit::{cpu_backend, cuda_backend};
use proptest::prelude::*;

use crate::tune::{gemm_entry_for, temp_dir, write};

/// `x wᵀ` (A row-major, B column-major), tight.
fn rc(m: usize, n: usize, k: usize) -> Gemm {
    Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).resolved()
}

/// The plan on an H100-like device (sm_90a module, 132 SMs), operands 256-byte aligned.
fn h100(g: &Gemm, cfg: GemmConfig) -> ferrotune::Result<GemmPlan> {
    plan(g, DType::Bf16, DType::Bf16, "sm_90a", 132, cfg, [256, 256])
}

/// The environment variables that override the rules under test.
fn overridden() -> bool {
    ["FERROTUNE_SM90", "FERROTUNE_SM90_SPLIT", "FERROTUNE_SM90_TILE", "FERROTUNE_SMALL_M", "FERROTUNE_PACK"]
        .iter()
        .chain(&["FERROTUNE_SMALL_M_KSPLIT", "FERROTUNE_SMALL_M_BESIDE_HOPPER"])
        .any(|v| std::env::var(v).is_ok())
}

const SMALL_M: GemmConfig = GemmConfig { split_k: 8, path: GemmPath::SmallM, ..GemmConfig::DEFAULT };

#[test]
fn tuned_family_entries_round_trip_through_a_profile_and_reach_the_plan() {
    if overridden() {
        return;
    }
    let b = cpu_backend();
    let s = b.stream();
    let dir = temp_dir("families");
    let small_packed = GemmConfig { pack: PackChoice::On, ..SMALL_M };
    let hopper = GemmConfig { split_k: 8, path: GemmPath::Sm90(9), ..GemmConfig::DEFAULT };
    let unpacked = GemmConfig { path: GemmPath::Mma, pack: PackChoice::Off, ..GemmConfig::DEFAULT };
    let p = Profile {
        source: None,
        entries: vec![
            gemm_entry_for(&s, "bf16", "rc", [16, 11008, 4096, 1], &SMALL_M),
            gemm_entry_for(&s, "bf16", "rc", [33, 8191, 4099, 1], &small_packed),
            gemm_entry_for(&s, "bf16", "rc", [256, 256, 65536, 1], &hopper),
            gemm_entry_for(&s, "bf16", "rc", [4097, 1023, 777, 1], &unpacked),
        ],
        journal: vec![],
    };
    let path = write(&dir, "families.toml", &p);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("path = \"small-m\"") && text.contains("pack = true") && text.contains("pack = false"));
    let set = ProfileSet::load(&dir);
    assert!(set.problems.is_empty(), "{:?}", set.problems);

    // Small-M with its tuned K split: the family, the split, and the reason says where from.
    let g = rc(16, 11008, 4096);
    let (cfg, src) = gemm_explain_in(&set, &g, DType::Bf16, &s);
    assert!(matches!(src, Source::Profile { .. }), "{src}");
    assert_eq!(cfg, SMALL_M);
    let pl = h100(&g, cfg).unwrap();
    assert_eq!(pl.family, Family::SmallM);
    assert_eq!((pl.small_m_tuned(), pl.path().as_str()), (Some((8, 1)), "small-m:w1:splitk8"));
    assert!(pl.reason.contains("K split 8, width 1 from the tuned config"), "{}", pl.reason);
    assert!(pl.reason.contains("8 K slices") && pl.reason.contains("_g2_v,"), "{}", pl.reason);
    // Without the entry the built-in choice: for 16 rows the Hopper streaming tile (9 to 16
    // rows against a weight of 2^25+ elements); for 8 the streaming small-M kernel, whole
    // slabs per block (688 slabs over 132 blocks).
    let own = h100(&g, GemmConfig::heuristic(16, 11008, 4096, 1)).unwrap();
    assert!(matches!(own.family, Family::Launch(Launch::Hopper(v, _)) if v.tile == 10), "{own:?}");
    let g8 = rc(8, 11008, 4096);
    let own = h100(&g8, GemmConfig::heuristic(8, 11008, 4096, 1)).unwrap();
    assert_eq!((own.family, own.small_m_tuned()), (Family::SmallM, None));
    assert!(own.reason.contains("ft_gemvs_bf16_bf16_g1") && own.reason.contains("688 slabs"), "{}", own.reason);

    // Packed first, then small-M (K = 4099: rows of 8198 bytes).
    let g = rc(33, 8191, 4099);
    let (cfg, _) = gemm_explain_in(&set, &g, DType::Bf16, &s);
    assert_eq!(cfg, small_packed);
    let pl = h100(&g, cfg).unwrap();
    assert_eq!(pl.family, Family::Pack);
    assert!(pl.reason.contains("pack = true") && pl.reason.contains("then small-m"), "{}", pl.reason);

    // The Hopper kernel's own split, 8 slices as tuned (the plan alone would cut 32).
    let g = rc(256, 256, 65536);
    let (cfg, _) = gemm_explain_in(&set, &g, DType::Bf16, &s);
    assert_eq!(cfg, hopper);
    let pl = h100(&g, cfg).unwrap();
    assert!(matches!(pl.family, Family::Launch(Launch::Hopper(v, sp)) if v.tile == 9 && sp.slices == 8), "{pl:?}");
    assert!(pl.reason.contains("from the tuned config (split_k = 8)"), "{}", pl.reason);
    // Off sm_90a the same entry runs the mma.sync split-K and says why.
    let a100 = plan(&g, DType::Bf16, DType::Bf16, "sm_80", 108, cfg, [256, 256]).unwrap();
    assert!(matches!(a100.family, Family::Launch(Launch::SplitK(_))), "{a100:?}");
    assert!(a100.reason.contains("tuned Hopper split cannot run"), "{}", a100.reason);

    // Packing off: the tiles on the operands as given (the plan alone packs this shape).
    let g = rc(4097, 1023, 777);
    let (cfg, _) = gemm_explain_in(&set, &g, DType::Bf16, &s);
    assert_eq!(cfg, unpacked);
    let pl = h100(&g, cfg).unwrap();
    assert!(matches!(pl.family, Family::Launch(Launch::Tiles(_))), "{pl:?}");
    assert!(pl.reason.starts_with("the tuned config does not pack"), "{}", pl.reason);
    assert_eq!(h100(&g, GemmConfig::heuristic(4097, 1023, 777, 1)).unwrap().family, Family::Pack);
}

#[test]
fn a_tuned_family_the_call_cannot_take_falls_back_with_the_reason() {
    if overridden() {
        return;
    }
    // Small-M asked of 100 rows: the plan's own rules (Hopper here), saying why.
    let pl = h100(&rc(100, 4096, 4096), SMALL_M).unwrap();
    assert!(matches!(pl.family, Family::Launch(Launch::Hopper(..))), "{pl:?}");
    assert!(pl.reason.starts_with("the tuned config asks for the small-M family, which this call cannot take"));
    // ... and of f32 inputs (TF32 on the Hopper path; the small-M K split is not taken for a
    // split-K of the tiles).
    let g = rc(8, 4096, 4096);
    let pl = plan(&g, DType::F32, DType::F32, "sm_90a", 132, SMALL_M, [256, 256]).unwrap();
    assert!(matches!(pl.family, Family::Launch(Launch::Hopper(..) | Launch::Tiles(_))), "{pl:?}");
    assert!(pl.reason.contains("cannot take"), "{}", pl.reason);
    // A tuned `mma` path keeps a small-M shape on the tiles (what the tuner measured).
    let mma = GemmConfig { tile: 7, path: GemmPath::Mma, ..GemmConfig::DEFAULT };
    let pl = h100(&rc(16, 4096, 4096), mma).unwrap();
    assert!(matches!(pl.family, Family::Launch(Launch::Tiles(v)) if v.tile == 7), "{pl:?}");
    // Pack asked of aligned operands: nothing to pack, the family runs as given.
    let on = GemmConfig { pack: PackChoice::On, ..GemmConfig::DEFAULT };
    assert_ne!(h100(&rc(512, 512, 512), on).unwrap().family, Family::Pack);
    // ... but of a small unaligned problem (below the plan's own size rule), it packs.
    let g = rc(64, 64, 77);
    assert_ne!(h100(&g, GemmConfig::DEFAULT).unwrap().family, Family::Pack);
    assert_eq!(h100(&g, GemmConfig { path: GemmPath::Mma, ..on }).unwrap().family, Family::Pack);
}

#[test]
fn forcing_a_family_the_call_cannot_take_is_a_typed_error() {
    if overridden() {
        return;
    }
    let e = h100(&rc(100, 4096, 4096).path(GemmPath::SmallM), GemmConfig::DEFAULT).unwrap_err();
    assert!(matches!(&e, Error::InvalidConfig { why, .. } if why.contains("small-M")), "{e}");
    // Forced where it applies: small-M with the built-in split.
    let pl = h100(&rc(8, 4096, 4096).path(GemmPath::SmallM), GemmConfig::DEFAULT).unwrap();
    assert_eq!(pl.family, Family::SmallM);
    // A config given to the call is checked like a profile's.
    let bad = GemmConfig { split_k: 65, ..SMALL_M };
    assert!(matches!(bad.validate(), Err(Error::InvalidConfig { .. })));
    // The persistent 128 x 256 (tile 8) walks whole tiles: it never splits K.
    let hopper0 = GemmConfig { split_k: 4, path: GemmPath::Sm90(8), ..GemmConfig::DEFAULT };
    let e = hopper0.validate().unwrap_err();
    assert!(e.to_string().contains("does not split K"), "{e}");
}

/// A config given to the call (`Gemm::with_config`, the tuner's points) is checked before
/// anything runs: a bad one is a typed error of the call; a good one runs (on the CPU backend,
/// which has one family, with its rows per band).
#[test]
fn a_call_with_a_bad_config_is_a_typed_error() {
    let b = cpu_backend();
    let g = Gemm::new(8, 16, 40).layouts(Layout::Row, Layout::Col);
    for bad in [
        GemmConfig { split_k: 0, ..SMALL_M },
        GemmConfig { split_k: 65, ..SMALL_M },
        GemmConfig { tile: 99, ..GemmConfig::DEFAULT },
        GemmConfig { split_k: 2, path: GemmPath::Sm90(8), ..GemmConfig::DEFAULT },
    ] {
        let e = crate::gemm::dispatch(&b, DType::Bf16, false, g.with_config(bad), 1).unwrap_err();
        assert!(e.contains("invalid config"), "{bad:?}: {e}");
    }
    let ok = GemmConfig { cpu_rows: 3, pack: PackChoice::On, ..SMALL_M };
    crate::gemm::dispatch(&b, DType::Bf16, true, g.with_config(ok), 2).unwrap();
}

#[test]
fn foreign_family_values_in_a_profile_make_the_entry_invalid_not_a_panic() {
    let ok = gemm_to_params(&GemmConfig { pack: PackChoice::On, ..SMALL_M });
    assert_eq!(gemm_from_params(&ok), Some(GemmConfig { pack: PackChoice::On, ..SMALL_M }));
    let with = |k: &str, v: Param| {
        let mut m = ok.clone();
        m.insert(k.into(), v);
        gemm_from_params(&m)
    };
    for bad in ["small-m:3", "small_m", "SMALL-M", "gemv"] {
        assert_eq!(with("path", Param::Text(bad.into())), None, "{bad}");
    }
    assert_eq!(with("pack", Param::Text("yes".into())), None);
    assert_eq!(with("pack", Param::Int(1)), None);
    assert_eq!(with("split_k", Param::Int(65)), None, "small-M splits at most 64 ways");
    let mut h = gemm_to_params(&GemmConfig { path: GemmPath::Sm90(8), ..GemmConfig::DEFAULT });
    h.insert("split_k".into(), Param::Int(4));
    assert_eq!(gemm_from_params(&h), None, "Hopper tile 8 (persistent) does not split K");
    // Written before these keys existed: no `pack` reads as the plan's own rule.
    let mut old = gemm_to_params(&GemmConfig::DEFAULT);
    old.remove("pack");
    assert_eq!(gemm_from_params(&old).map(|c| c.pack), Some(PackChoice::Auto));

    // In a file: the lookup falls back to the heuristic and says which entry and why.
    let b = cpu_backend();
    let s = b.stream();
    let dir = temp_dir("families-bad");
    let mut e = gemm_entry_for(&s, "bf16", "rc", [16, 4096, 4096, 1], &SMALL_M);
    e.config.insert("path".into(), Param::Text("small-m:3".into()));
    write(&dir, "bad.toml", &Profile { source: None, entries: vec![e], journal: vec![] });
    let set = ProfileSet::load(&dir);
    let (cfg, src) = gemm_explain_in(&set, &rc(16, 4096, 4096), DType::Bf16, &s);
    assert!(matches!(&src, Source::Heuristic { why } if why.contains("invalid config")), "{src}");
    assert_eq!(cfg.path, GemmPath::Auto);
}

/// The tuned points run on the GPU as their plan says and match the float64 reference
/// (outputs poisoned first): small-M at several K splits (1, odd, the most K allows, beyond it),
/// small-M after a tuned pack, a pack the plan alone would skip, and a tuned Hopper split
/// (on sm_90a; elsewhere its fallback, the mma.sync split-K).
#[test]
fn gpu_tuned_family_points_match_f64_reference() {
    let Some(gpu) = cuda_backend("gpu_tuned_family_points_match_f64_reference") else { return };
    if overridden() {
        println!("gpu_tuned_family_points_match_f64_reference: skipped: a FERROTUNE_ variable overrides the plan");
        return;
    }
    let s = gpu.stream();
    let small = |ks| GemmConfig { split_k: ks, ..SMALL_M };
    let packed = |c: GemmConfig| GemmConfig { pack: PackChoice::On, ..c };
    let cases: [(Gemm, GemmConfig); 10] = [
        (rc(1, 16, 20000), small(1)),
        (rc(1, 16, 20000), small(7)),
        (rc(1, 16, 20000), small(64)),
        (rc(33, 100, 4099), small(3)),
        (rc(33, 100, 4099), packed(small(16))),
        (rc(64, 17, 30000), small(64)),
        (rc(8, 1023, 777), packed(small(4))),
        (rc(300, 200, 777), packed(GemmConfig { path: GemmPath::Mma, tile: 4, ..GemmConfig::DEFAULT })),
        (rc(128, 256, 16384), GemmConfig { split_k: 8, path: GemmPath::Sm90(9), ..GemmConfig::DEFAULT }),
        (rc(200, 136, 8192), GemmConfig { split_k: 5, path: GemmPath::Sm90(1), ..GemmConfig::DEFAULT }),
    ];
    for (i, (g, cfg)) in cases.into_iter().enumerate() {
        let g = g.epilogue(crate::gemm::epilogue(i)).with_config(cfg);
        let dt = if i % 2 == 0 { DType::Bf16 } else { DType::F16 };
        let p = ferrotune::ops::gemm_plan::explain(&s, &g, dt, dt).unwrap().expect("a CUDA stream");
        match cfg.path {
            GemmPath::SmallM if cfg.pack == PackChoice::On => assert_eq!(p.family, Family::Pack, "{p:?}"),
            GemmPath::SmallM => assert_eq!(p.small_m_tuned().map(|t| t.0), Some(cfg.split_k), "{p:?}"),
            GemmPath::Sm90(_) if matches!(p.family, Family::Launch(Launch::Hopper(..))) => {
                assert!(p.reason.contains("from the tuned config"), "{}", p.reason)
            }
            _ => {}
        }
        if let Err(e) = crate::gemm::dispatch(&gpu, dt, i % 3 == 0, g, 900 + i as u64) {
            panic!("case {i} ({}): {e}", p.path());
        }
    }
}

proptest! {
    /// Every config survives the profile's named parameters exactly when it is valid; an
    /// invalid one reads back as no config (the lookup then reports the entry and falls back).
    #[test]
    fn configs_round_trip_through_named_parameters_iff_valid(
        path in 0usize..14, split_k in 0usize..80, pack in 0usize..3, tile in 0usize..10, cpu_rows in 0usize..70,
    ) {
        let path = match path {
            0 => GemmPath::Auto,
            1 => GemmPath::Mma,
            2 => GemmPath::SmallM,
            t => GemmPath::Sm90((t - 3) as u8),
        };
        let pack = [PackChoice::Auto, PackChoice::On, PackChoice::Off][pack];
        let c = GemmConfig { tile, cpu_rows, split_k, path, pack };
        let back = std::panic::catch_unwind(|| gemm_from_params(&gemm_to_params(&c)));
        prop_assert!(back.is_ok(), "{:?} panicked", c);
        let back = back.unwrap();
        if c.validate().is_ok() {
            prop_assert_eq!(back, Some(c));
        } else {
            prop_assert_eq!(back, None);
        }
    }

    /// Any config (valid or not) on any shape and architecture: the plan answers with a plan
    /// or a typed error, never a panic; a valid small-M config the call can take runs small-M
    /// with exactly its K split.
    #[test]
    fn any_config_gives_a_plan_or_a_typed_error(
        m in 0usize..300, n in 1usize..5000, k in 1usize..70_000, batch in 1usize..3,
        dt in 0usize..3, arch in 0usize..3, path in 0usize..14, split_k in 0usize..80, pack in 0usize..3,
        tile in 0usize..10, odd_ptr: bool,
    ) {
        prop_assume!(!overridden());
        let dtype = [DType::F32, DType::F16, DType::Bf16][dt];
        let path = match path {
            0 => GemmPath::Auto,
            1 => GemmPath::Mma,
            2 => GemmPath::SmallM,
            t => GemmPath::Sm90((t - 3) as u8),
        };
        let pack = [PackChoice::Auto, PackChoice::On, PackChoice::Off][pack];
        let cfg = GemmConfig { tile, cpu_rows: 16, split_k, path, pack };
        let g = Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).batched(batch).resolved();
        let ptrs = if odd_ptr { [258, 256] } else { [256, 256] };
        let arch = ["sm_80", "sm_90", "sm_90a"][arch];
        // The plan sees validated configs (profiles and `with_config` check them first).
        if cfg.validate().is_err() {
            return Ok(());
        }
        match plan(&g, dtype, dtype, arch, 132, cfg, ptrs) {
            Ok(p) => {
                let small_m_ok = ferrotune::ops::gemv::small_m_applies(&g, dtype).is_some();
                if path == GemmPath::SmallM && small_m_ok && p.family != Family::Pack {
                    prop_assert_eq!(p.family, Family::SmallM);
                    // One past the widths names the streaming kernel, two past the row kernel
                    // (their widths are the STREAM_WIDTH and ROWS_WIDTH markers).
                    let width = match tile {
                        t if t == ferrotune::ops::gemv_stream::STREAM_TILE => ferrotune::ops::gemv_stream::STREAM_WIDTH,
                        t if t == ferrotune::ops::gemv_rows::ROWS_TILE => ferrotune::ops::gemv_rows::ROWS_WIDTH,
                        t => ferrotune_kernels::gemv::WIDTHS[t],
                    };
                    prop_assert_eq!(p.small_m_tuned(), Some((split_k, width)));
                }
                prop_assert!(!p.reason.is_empty());
            }
            Err(e) => prop_assert!(matches!(e, Error::InvalidConfig { .. } | Error::UnsupportedDtype { .. }), "{}", e),
        }
    }
}
