//! Run-time use of tuning profiles, across crates: a profile written in the format is found
//! by the host's lookup (exact, nearest bucket, heuristic; elementwise and GEMM), each fallback
//! says why, and files
//! that are malformed, of an unknown version or for another device are reported, not used.
//! (Spaces, strategies, isolation and resume are tested in autotune/; the format in profile/.)

use std::path::{Path, PathBuf};

use ferrotune::config::GemmConfig;
use ferrotune::ops::gemm::{Gemm, Layout, Precision};
use ferrotune::profile::{Entry, Match, Profile, ProfileSet};
use ferrotune::tuned::{Source, explain_in, fingerprint, from_params, gemm_explain_in, gemm_to_params, to_params};
use ferrotune::{DType, ElemConfig, ElemOp, ElemVariant};

use ferrotune_testkit::cpu_backend;

pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ferrotune-tests-tune-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub(crate) fn entry_for(s: &ferrotune::Stream, op: ElemOp, n: u64, cfg: &ElemConfig) -> Entry {
    let (device, build) = fingerprint(s, op.name()).unwrap();
    Entry {
        op: op.name().into(),
        dtype: "f32".into(),
        layout: "contiguous".into(),
        shape: vec![ferrotune::profile::bucket(n)],
        measured_shape: vec![n],
        build,
        median_ms: 1.0,
        mad_ms: 0.0,
        throughput_gbps: 1.0,
        tflops: None,
        default_ms: Some(2.0),
        strategy: "exhaustive".into(),
        evaluations: 1,
        date: ferrotune::profile::utc_now(),
        tool_version: "test".into(),
        device,
        config: to_params(cfg),
        runners_up: vec![],
        line: None,
    }
}

pub(crate) fn write(dir: &Path, name: &str, p: &Profile) -> PathBuf {
    let path = dir.join(name);
    p.save_atomic(&path).unwrap();
    path
}

#[test]
fn the_host_uses_profile_entries_in_lookup_order_and_says_why() {
    let b = cpu_backend();
    let s = b.stream();
    let dir = temp_dir("lookup");
    let tuned = ElemConfig { cpu_chunk: 4096, ..ElemConfig::heuristic(ElemOp::Add, DType::F32, None) };
    let p = Profile { source: None, entries: vec![entry_for(&s, ElemOp::Add, 1 << 20, &tuned)], journal: vec![] };
    let path = write(&dir, "cpu.toml", &p);
    let set = ProfileSet::load(&dir);
    assert!(set.problems.is_empty(), "{:?}", set.problems);

    let (cfg, src) = explain_in(&set, ElemOp::Add, DType::F32, (1 << 20) + 100, &s);
    assert_eq!(cfg, tuned);
    match &src {
        Source::Profile { path: p, line, how: Match::Exact } => {
            assert_eq!(p, &path);
            assert!(line.is_some());
        }
        other => panic!("expected the exact entry, got {other}"),
    }
    let (cfg, src) = explain_in(&set, ElemOp::Add, DType::F32, 1 << 16, &s);
    assert_eq!(cfg, tuned);
    assert!(matches!(src, Source::Profile { how: Match::NearestBucket { distance: 4, .. }, .. }), "{src}");
    // Another op, or another dtype: the heuristic, with the reason.
    let (cfg, src) = explain_in(&set, ElemOp::Relu, DType::F32, 1 << 20, &s);
    assert_eq!(cfg, ElemConfig::heuristic(ElemOp::Relu, DType::F32, None));
    assert!(src.to_string().contains("built-in heuristic: no entry for relu f32"), "{src}");
    let (_, src) = explain_in(&ProfileSet::default(), ElemOp::Add, DType::F32, 10, &s);
    assert!(src.to_string().contains("no tuning profile loaded"), "{src}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_entry_with_an_uncompiled_variant_falls_back_to_the_heuristic() {
    let b = cpu_backend();
    let s = b.stream();
    let dir = temp_dir("badcfg");
    let bad = ElemConfig {
        variant: ElemVariant { vec16: true, unroll: 3 },
        ..ElemConfig::heuristic(ElemOp::Add, DType::F32, None)
    };
    let p = Profile { source: None, entries: vec![entry_for(&s, ElemOp::Add, 1024, &bad)], journal: vec![] };
    write(&dir, "p.toml", &p);
    let (cfg, src) = explain_in(&ProfileSet::load(&dir), ElemOp::Add, DType::F32, 1024, &s);
    assert_eq!(cfg, ElemConfig::heuristic(ElemOp::Add, DType::F32, None));
    assert!(src.to_string().contains("invalid config"), "{src}");
    assert_eq!(from_params(&to_params(&bad)), Some(bad), "the params themselves round-trip");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_files_are_reported_with_file_and_line_and_never_used() {
    let b = cpu_backend();
    let s = b.stream();
    let dir = temp_dir("bad");
    let good = ElemConfig { cpu_chunk: 2048, ..ElemConfig::heuristic(ElemOp::Add, DType::F32, None) };
    let p = Profile { source: None, entries: vec![entry_for(&s, ElemOp::Add, 1024, &good)], journal: vec![] };
    let text = p.to_toml().unwrap();
    std::fs::write(dir.join("a_syntax.toml"), text.replacen("op = \"add\"", "op = add", 1)).unwrap();
    std::fs::write(dir.join("b_version.toml"), text.replace("version = 2", "version = 99")).unwrap();
    let set = ProfileSet::load(&dir);
    assert!(set.profiles.is_empty());
    assert_eq!(set.problems.len(), 2, "{:?}", set.problems);
    let line = text.lines().position(|l| l == "op = \"add\"").unwrap() + 1;
    assert!(set.problems[0].contains(&format!("a_syntax.toml:{line}:")), "{}", set.problems[0]);
    assert!(set.problems[1].contains("b_version.toml:") && set.problems[1].contains("unknown profile version 99"));
    let (cfg, _) = explain_in(&set, ElemOp::Add, DType::F32, 1024, &s);
    assert_eq!(cfg, ElemConfig::heuristic(ElemOp::Add, DType::F32, None), "a bad file is never used");

    // A profile from another device: loads, is warned about by line, never matches.
    let mut foreign = p.clone();
    foreign.entries[0].device.arch = "sm_90".into();
    foreign.entries[0].device.backend = "cuda".into();
    let path = write(&dir, "foreign.toml.d", &foreign);
    let loaded = Profile::load(&path).unwrap();
    let (device, build) = fingerprint(&s, "add").unwrap();
    let w = loaded.foreign(&device, &|_| build.clone());
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].line, loaded.entries[0].line);
    assert!(w[0].to_string().contains("foreign.toml.d:"), "{}", w[0]);
    let set = ProfileSet { profiles: vec![loaded], problems: vec![] };
    assert!(matches!(explain_in(&set, ElemOp::Add, DType::F32, 1024, &s).1, Source::Heuristic { .. }));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A GEMM entry for this machine: `[m, n, k, batch]` measured, bucketed per dimension.
pub(crate) fn gemm_entry_for(
    s: &ferrotune::Stream,
    dtype: &str,
    layout: &str,
    mnkb: [u64; 4],
    cfg: &GemmConfig,
) -> Entry {
    Entry {
        op: "gemm".into(),
        build: fingerprint(s, "gemm").unwrap().1,
        dtype: dtype.into(),
        layout: layout.into(),
        shape: ferrotune::profile::bucket_shape(&mnkb),
        measured_shape: mnkb.to_vec(),
        tflops: Some(1.0),
        config: gemm_to_params(cfg),
        ..entry_for(s, ElemOp::Add, 1, &ElemConfig::heuristic(ElemOp::Add, DType::F32, None))
    }
}

#[test]
fn gemm_calls_use_profile_entries_in_lookup_order_and_say_why() {
    let b = cpu_backend();
    let s = b.stream();
    let dir = temp_dir("gemm");
    let tuned = GemmConfig { tile: 3, cpu_rows: 4, split_k: 1, ..GemmConfig::DEFAULT };
    let p = Profile {
        source: None,
        entries: vec![gemm_entry_for(&s, "bf16", "rc", [1000, 3000, 700, 1], &tuned)],
        journal: vec![],
    };
    write(&dir, "gemm.toml", &p);
    let set = ProfileSet::load(&dir);
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    let g = |m, n, k, a| Gemm::new(m, n, k).layouts(a, Layout::Col).resolved();
    // Same bucket ([512, 2048, 512, 1]): exact.
    let (cfg, src) = gemm_explain_in(&set, &g(600, 2100, 520, Layout::Row), DType::Bf16, &s);
    assert_eq!(cfg, tuned);
    assert!(matches!(src, Source::Profile { how: Match::Exact, .. }), "{src}");
    // One octave away in m: the nearest bucket on this device.
    let (cfg, src) = gemm_explain_in(&set, &g(1100, 2100, 520, Layout::Row), DType::Bf16, &s);
    assert_eq!(cfg, tuned);
    assert!(matches!(src, Source::Profile { how: Match::NearestBucket { distance: 1, .. }, .. }), "{src}");
    // Another layout, dtype or precision: the heuristic, with the reason.
    let (cfg, src) = gemm_explain_in(&set, &g(600, 2100, 520, Layout::Col), DType::Bf16, &s);
    assert_eq!(
        cfg,
        GemmConfig { cpu_rows: GemmConfig::cpu_band_rows(600), ..GemmConfig::heuristic(600, 2100, 520, 1) }
    );
    assert!(src.to_string().contains("no entry for gemm bf16 cc"), "{src}");
    let (_, src) = gemm_explain_in(&set, &g(600, 2100, 520, Layout::Row), DType::F32, &s);
    assert!(src.to_string().contains("no entry for gemm tf32 rc"), "{src}");
    let strict = g(600, 2100, 520, Layout::Row).precision(Precision::Strict);
    assert!(gemm_explain_in(&set, &strict, DType::F32, &s).1.to_string().contains("gemm f32 rc"));
    // An entry whose tile is not compiled falls back to the heuristic, saying so.
    let mut bad = gemm_to_params(&tuned);
    bad.insert("tile".into(), ferrotune::profile::Param::Int(999));
    let mut p2 = p.clone();
    p2.entries[0].config = bad;
    write(&dir, "gemm.toml", &p2);
    let (cfg, src) = gemm_explain_in(&ProfileSet::load(&dir), &g(600, 2100, 520, Layout::Row), DType::Bf16, &s);
    assert_eq!(
        cfg,
        GemmConfig { cpu_rows: GemmConfig::cpu_band_rows(600), ..GemmConfig::heuristic(600, 2100, 520, 1) }
    );
    assert!(src.to_string().contains("invalid config"), "{src}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A profile with `split_k` round-trips through the file; an entry written before split-K
/// existed (no `split_k`) still loads, as no split.
#[test]
fn gemm_profiles_round_trip_split_k_and_read_old_entries_as_unsplit() {
    let b = cpu_backend();
    let s = b.stream();
    let dir = temp_dir("gemm-split");
    let split = GemmConfig { tile: 0, cpu_rows: 8, split_k: 8, ..GemmConfig::DEFAULT };
    let unsplit = GemmConfig { tile: 5, cpu_rows: 4, split_k: 1, ..GemmConfig::DEFAULT };
    let mut old = gemm_entry_for(&s, "f16", "rc", [256, 256, 65536, 1], &unsplit);
    old.config.remove("split_k");
    let p = Profile {
        source: None,
        entries: vec![gemm_entry_for(&s, "bf16", "rc", [256, 256, 65536, 1], &split), old],
        journal: vec![],
    };
    write(&dir, "split.toml", &p);
    let text = std::fs::read_to_string(dir.join("split.toml")).unwrap();
    assert_eq!(text.matches("split_k = ").count(), 1, "{text}");
    assert!(text.contains("split_k = 8"), "{text}");
    let set = ProfileSet::load(&dir);
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    let g = Gemm::new(300, 300, 70000).layouts(Layout::Row, Layout::Col).resolved();
    let (cfg, src) = gemm_explain_in(&set, &g, DType::Bf16, &s);
    assert_eq!(cfg, split);
    assert!(matches!(src, Source::Profile { how: Match::Exact, .. }), "{src}");
    assert_eq!(gemm_explain_in(&set, &g, DType::F16, &s).0, unsplit);
    // An out-of-range split_k makes the entry invalid: the heuristic, saying why.
    let mut bad = p.clone();
    bad.entries[0].config.insert("split_k".into(), ferrotune::profile::Param::Int(65));
    write(&dir, "split.toml", &bad);
    let (cfg, src) = gemm_explain_in(&ProfileSet::load(&dir), &g, DType::Bf16, &s);
    assert_eq!(
        cfg,
        GemmConfig { cpu_rows: GemmConfig::cpu_band_rows(300), ..GemmConfig::heuristic(300, 300, 70000, 1) }
    );
    assert!(src.to_string().contains("invalid config"), "{src}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_cpu_gemm_gives_the_same_result_for_every_rows_per_task() {
    let b = cpu_backend();
    let s = b.stream();
    let (m, n, k) = (37, 19, 23);
    let mut rng = ferrotune_testkit::Rng::new(4);
    let a = ferrotune::Buffer::from_slice(&s, &rng.vec::<f32>(m * k, -1.0, 1.0)).unwrap();
    let w = ferrotune::Buffer::from_slice(&s, &rng.vec::<f32>(k * n, -1.0, 1.0)).unwrap();
    let run = |g: &Gemm| {
        let mut d = ferrotune::Buffer::<f32>::zeros(&s, m * n).unwrap();
        ferrotune::ops::gemm::gemm::<f32, f32>(&s, g, &a.all(), &w.all(), None, None, &mut d.all_mut())
            .map(|_| d.to_vec(&s).unwrap())
    };
    let want = run(&Gemm::new(m, n, k)).unwrap();
    for rows in [1, 3, 16, 64] {
        assert_eq!(run(&Gemm::new(m, n, k).cpu_rows(rows)).unwrap(), want, "{rows} rows per task");
    }
    let e = run(&Gemm::new(m, n, k).cpu_rows(0)).unwrap_err();
    assert!(matches!(e, ferrotune::Error::InvalidConfig { .. }), "{e}");
}
