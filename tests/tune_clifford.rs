//! Tuned Clifford SGP configs at run time, across crates: entries keyed `clifford_fwd` /
//! `clifford_bwd`, `cl<dim>_<norm|plain>`, bucket of `[B, N]` round-trip through a profile and
//! are what the forward and the backward choose (exact, then nearest bucket); entries for
//! another device or build, malformed ones and ones that do not suit the call are reported and
//! never used; any config runs or is a typed error; on a GPU a tuned non-heuristic config runs
//! and matches the CPU.

use ferrotune::ops::clifford::{self as cl, Clifford, CliffordConfig, CliffordVariant};
use ferrotune::profile::{Entry, Match, Param, Profile, ProfileSet};
use ferrotune::tuned::{
    CliffordPass, Source, clifford_dims, clifford_from_params, clifford_layout, clifford_to_params, unusable_profiles,
};
use ferrotune::{Backend, Buffer, DType, ElemConfig, ElemOp, Error};
use ferrotune_kernels::clifford::{BWD_VARIANTS, fwd_variants};
use ferrotune_testkit::{Rng, cpu_backend, cuda_backend, poison};
use proptest::prelude::*;

use crate::tune::{entry_for, temp_dir, write};

/// An entry for the `pass` of `p` (f32) on the machine behind `s` with `cfg`.
fn clifford_entry(s: &ferrotune::Stream, pass: CliffordPass, p: &Clifford, cfg: &CliffordConfig) -> Entry {
    let dims = clifford_dims(p);
    Entry {
        op: pass.op_name().into(),
        build: ferrotune::tuned::fingerprint(s, pass.op_name()).unwrap().1,
        dtype: "f32".into(),
        layout: clifford_layout(p),
        shape: ferrotune::profile::bucket_shape(&dims),
        measured_shape: dims.to_vec(),
        config: clifford_to_params(cfg),
        ..entry_for(s, ElemOp::Add, 1, &ElemConfig::heuristic(ElemOp::Add, DType::F32, None))
    }
}

fn choose(set: &ProfileSet, pass: CliffordPass, s: &ferrotune::Stream, p: &Clifford) -> (CliffordConfig, Source) {
    cl::choice_in::<f32>(set, pass, s, p).unwrap()
}

fn heuristic(pass: CliffordPass, p: &Clifford) -> CliffordConfig {
    match pass {
        CliffordPass::Forward => CliffordConfig::heuristic(p, DType::F32, None),
        CliffordPass::Backward => CliffordConfig::backward_heuristic(p, DType::F32, None),
    }
}

#[test]
fn tuned_clifford_entries_round_trip_and_are_what_the_ops_choose() {
    let b = cpu_backend();
    let s = b.stream();
    let dir = temp_dir("clifford");
    let p = Clifford::new(3, 300, 40, true);
    let tuned = |pass, rows| CliffordConfig { cpu_rows: rows, ..heuristic(pass, &p) };
    let file = Profile {
        source: None,
        entries: vec![
            clifford_entry(&s, CliffordPass::Forward, &p, &tuned(CliffordPass::Forward, 3)),
            clifford_entry(&s, CliffordPass::Backward, &p, &tuned(CliffordPass::Backward, 5)),
        ],
        journal: vec![],
    };
    let path = write(&dir, "clifford.toml", &file);
    let set = ProfileSet::load(&dir);
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    let read: Vec<Entry> = set.profiles[0].entries.iter().map(|e| Entry { line: None, ..e.clone() }).collect();
    assert_eq!(read, file.entries, "the entries round-trip through the file");
    for (pass, rows) in [(CliffordPass::Forward, 3), (CliffordPass::Backward, 5)] {
        let (c, src) = choose(&set, pass, &s, &p);
        assert_eq!(c, tuned(pass, rows), "{pass}");
        match &src {
            Source::Profile { path: f, line: Some(_), how: Match::Exact } => assert_eq!(f, &path),
            other => panic!("{pass}: expected the exact entry, got {other}"),
        }
        // B = 1100 (bucket 1024) is two octaves from the entry's bucket [256, 32]: the nearest bucket.
        let (c, src) = choose(&set, pass, &s, &Clifford::new(3, 1100, 40, true));
        assert_eq!(c.cpu_rows, rows);
        assert!(matches!(src, Source::Profile { how: Match::NearestBucket { distance: 2, .. }, .. }), "{src}");
        // Without the norm, or in 2D, another key: the heuristic, saying why.
        for q in [Clifford::new(3, 300, 40, false), Clifford::new(2, 300, 40, true)] {
            let (c, src) = choose(&set, pass, &s, &q);
            assert_eq!(c, heuristic(pass, &q));
            let want = format!("no entry for {pass} f32 {}", clifford_layout(&q));
            assert!(src.to_string().contains(&want), "{src}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn foreign_malformed_or_unsuitable_clifford_entries_are_reported_and_never_used() {
    let b = cpu_backend();
    let s = b.stream();
    let dir = temp_dir("clifford-bad");
    let p = Clifford::new(2, 64, 30, true);
    let pass = CliffordPass::Forward;
    let good = CliffordConfig { cpu_rows: 7, ..heuristic(pass, &p) };

    // Another device (architecture): the file is reported, the entry never matches.
    let mut foreign = clifford_entry(&s, pass, &p, &good);
    foreign.device.arch = "sm_90".into();
    foreign.device.backend = "cuda".into();
    let foreign_path = write(&dir, "foreign.toml", &Profile { source: None, entries: vec![foreign], journal: vec![] });
    let set = ProfileSet::load(&foreign_path);
    let problems = unusable_profiles(&set, &s);
    assert!(problems.iter().any(|w| w.contains("foreign.toml") && w.contains("another device")), "{problems:?}");
    let (c, src) = choose(&set, pass, &s, &p);
    assert_eq!(c, heuristic(pass, &p));
    assert!(src.to_string().contains("no entry for clifford_fwd"), "{src}");

    // Another kernel build: never used either.
    let mut stale = clifford_entry(&s, pass, &p, &good);
    stale.build = "fnv1a64:0000000000000000".into();
    let set =
        ProfileSet::load(&write(&dir, "stale.toml", &Profile { source: None, entries: vec![stale], journal: vec![] }));
    assert!(unusable_profiles(&set, &s).iter().any(|w| w.contains("another kernel build")));
    assert_eq!(choose(&set, pass, &s, &p).0, heuristic(pass, &p));

    // Malformed configs: a missing or mistyped parameter, a variant label that is not the
    // fields', zero rows per task.
    let malformed: [(&str, Option<Param>); 4] = [
        ("threads", None),
        ("vec", Some(Param::Text("yes".into()))),
        ("variant", Some(Param::Text("v4_p1".into()))),
        ("cpu_rows", Some(Param::Int(0))),
    ];
    for (k, v) in malformed {
        let mut e = clifford_entry(&s, pass, &p, &good);
        match &v {
            Some(v) => e.config.insert(k.into(), v.clone()),
            None => e.config.remove(k),
        };
        let set =
            ProfileSet::load(&write(&dir, "bad.toml", &Profile { source: None, entries: vec![e], journal: vec![] }));
        assert!(set.problems.is_empty(), "the file itself is fine: {:?}", set.problems);
        let (c, src) = choose(&set, pass, &s, &p);
        assert_eq!(c, heuristic(pass, &p), "{k} = {v:?}");
        assert!(src.to_string().contains("invalid config"), "{k} = {v:?}: {src}");
    }

    // Well-formed but not for this call: 4-feature accesses with N = 30, a one-pass backward
    // team of 4 that covers 8 features, a variant that is not compiled.
    let vec4 = CliffordConfig { variant: CliffordVariant { vec: true, vpt: 1, stream_w: false }, ..good };
    let small = CliffordConfig {
        threads: 64,
        rows_per_block: 16,
        variant: CliffordVariant { vec: false, vpt: 2, stream_w: false },
        ..good
    };
    let absent = CliffordConfig { variant: CliffordVariant { vec: false, vpt: 3, stream_w: false }, ..good };
    for (pass, cfg, why) in [
        (CliffordPass::Forward, vec4, "N % 4 == 0"),
        (CliffordPass::Backward, small, "cover 8 features"),
        (CliffordPass::Forward, absent, "not compiled"),
    ] {
        let e = clifford_entry(&s, pass, &p, &cfg);
        let set = ProfileSet::load(&write(
            &dir,
            "unsuitable.toml",
            &Profile { source: None, entries: vec![e], journal: vec![] },
        ));
        let (c, src) = choose(&set, pass, &s, &p);
        assert_eq!(c, heuristic(pass, &p), "{pass} {cfg:?}");
        let text = src.to_string();
        assert!(text.contains("does not suit B = 64, N = 30") && text.contains(why), "{pass}: {text}");
    }
    // Teams far wider than N (tuned for longer rows) are refused on a GPU only: the CPU backend
    // has no teams and takes the entry (its `cpu_rows` is what it tunes).
    let wide = CliffordConfig {
        threads: 512,
        rows_per_block: 1,
        variant: CliffordVariant { vec: false, vpt: 2, stream_w: false },
        ..good
    };
    let e = clifford_entry(&s, pass, &p, &wide);
    let set = ProfileSet::load(&write(&dir, "wide.toml", &Profile { source: None, entries: vec![e], journal: vec![] }));
    let (c, src) = choose(&set, pass, &s, &p);
    assert_eq!(c, wide, "{src}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs the forward and the backward of `p` with `cfg` on the CPU (inputs of ones).
fn run_both(p: &Clifford, cfg: &CliffordConfig) -> [ferrotune::Result<()>; 2] {
    let b = cpu_backend();
    let s = b.stream();
    let (len, wl) = (p.mv_len().unwrap(), p.sgp_weights_len().unwrap());
    let x = Buffer::from_slice(&s, &vec![0.5f32; len]).unwrap();
    let w = Buffer::from_slice(&s, &vec![0.25f32; wl]).unwrap();
    let mut out = Buffer::<f32>::zeros(&s, len).unwrap();
    let mut dx = Buffer::<f32>::zeros(&s, len).unwrap();
    let mut dy = Buffer::<f32>::zeros(&s, len).unwrap();
    let mut dw = Buffer::<f32>::zeros(&s, wl).unwrap();
    let mut ws = Buffer::<f32>::zeros(&s, 0).unwrap();
    let (xv, wv) = (x.all(), w.all());
    let f = cl::run_sgp_forward(&s, p, cfg, &xv, &xv, &wv, &mut out.all_mut());
    let g = cl::run_sgp_backward(
        &s,
        p,
        cfg,
        &xv,
        &xv,
        &wv,
        &xv,
        &mut dx.all_mut(),
        &mut dy.all_mut(),
        &mut dw.all_mut(),
        &mut ws,
    );
    [f, g]
}

/// Every compiled forward and backward variant, and two that are not compiled.
fn variants() -> Vec<CliffordVariant> {
    let mut v: Vec<CliffordVariant> = fwd_variants().chain(BWD_VARIANTS).collect();
    v.push(CliffordVariant { vec: false, vpt: 3, stream_w: false });
    v.push(CliffordVariant { vec: true, vpt: 4, stream_w: true });
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    // Whatever a profile (or a caller) holds, a config runs or is a typed error, never a
    // panic; its named parameters read back as the same config.
    #[test]
    fn any_clifford_config_runs_or_is_a_typed_error(
        dim in 2u32..=3,
        b in 1usize..12,
        n in 1usize..70,
        normalize: bool,
        threads in prop::sample::select(vec![32u32, 64, 256, 1024, 0, 48, 2048]),
        rows in prop::sample::select(vec![1u32, 2, 8, 0, 3, 4096]),
        variant in prop::sample::select(variants()),
        blocks_per_sm in 0u32..9,
        cpu_rows in 0usize..12,
    ) {
        let p = Clifford::new(dim, b, n, normalize);
        let cfg = CliffordConfig { threads, rows_per_block: rows, variant, blocks_per_sm, cpu_rows, cluster: 1 };
        for (pass, r) in CliffordPass::ALL.into_iter().zip(run_both(&p, &cfg)) {
            match r {
                Ok(()) => prop_assert!(pass.validate(&cfg, &p, None).is_ok(), "{pass} ran an invalid {cfg:?}"),
                Err(Error::InvalidConfig { .. }) => prop_assert!(pass.validate(&cfg, &p, None).is_err()),
                Err(e) => prop_assert!(false, "{pass} {cfg:?}: not a typed config error: {e}"),
            }
        }
        let back = clifford_from_params(&clifford_to_params(&cfg));
        prop_assert_eq!(back, (cpu_rows > 0).then_some(cfg));
    }
}

#[test]
fn gpu_tuned_clifford_configs_run_and_match_the_cpu() {
    let Some(gpu) = cuda_backend("gpu_tuned_clifford_configs_run_and_match_the_cpu") else { return };
    let s = gpu.stream();
    let dir = temp_dir("clifford-gpu");
    let p = Clifford::new(3, 257, 200, true);
    let dev = gpu.device();
    // A valid forward config that is not the heuristic's (another variant, two rows per
    // block), and a one-pass backward with four features per thread.
    let fwd = CliffordConfig::gpu_space(&p)
        .into_iter()
        .find(|c| c.variant.vpt == 2 && c.rows_per_block == 2 && c.blocks_per_sm == 2 && c.threads <= 256)
        .expect("a two-feature config covers N = 200");
    let bwd = CliffordConfig {
        threads: 128,
        rows_per_block: 2,
        variant: CliffordVariant { vec: false, vpt: 4, stream_w: false },
        blocks_per_sm: 2,
        cpu_rows: 8,
        cluster: 1,
    };
    assert!(bwd.validate_backward(&p, dev).is_ok());
    let file = Profile {
        source: None,
        entries: vec![
            clifford_entry(&s, CliffordPass::Forward, &p, &fwd),
            clifford_entry(&s, CliffordPass::Backward, &p, &bwd),
        ],
        journal: vec![],
    };
    let set = ProfileSet::load(&write(&dir, "gpu.toml", &file));
    let (f, fsrc) = choose(&set, CliffordPass::Forward, &s, &p);
    let (g, gsrc) = choose(&set, CliffordPass::Backward, &s, &p);
    assert_eq!((f, g), (fwd, bwd), "{fsrc} / {gsrc}");
    // Both tuned configs against the CPU's heuristic run.
    let cpu = cpu_backend();
    let (len, wl) = (p.mv_len().unwrap(), p.sgp_weights_len().unwrap());
    let mut rng = Rng::new(9);
    let (hx, hy, hw, hg): (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) =
        (rng.vec(len, -2.0, 2.0), rng.vec(len, -2.0, 2.0), rng.vec(wl, -1.0, 1.0), rng.vec(len, -1.0, 1.0));
    let run = |b: &Backend, fc: Option<&CliffordConfig>, gc: Option<&CliffordConfig>| {
        let s = b.stream();
        let up = |v: &[f32]| Buffer::from_slice(&s, v).unwrap();
        let (x, y, w, go) = (up(&hx), up(&hy), up(&hw), up(&hg));
        let mut out = up(&vec![poison::<f32>(); len]);
        let (mut dx, mut dy, mut dw) = (up(&vec![poison(); len]), up(&vec![poison(); len]), up(&vec![poison(); wl]));
        let mut ws = Buffer::<f32>::zeros(&s, 0).unwrap();
        match fc {
            Some(c) => cl::run_sgp_forward(&s, &p, c, &x.all(), &y.all(), &w.all(), &mut out.all_mut()).unwrap(),
            None => cl::fused_gelu_sgp_norm(&s, &p, &x.all(), &y.all(), &w.all(), &mut out.all_mut()).unwrap(),
        }
        {
            let (xv, yv, wv, gv) = (x.all(), y.all(), w.all(), go.all());
            let (mut dxv, mut dyv, mut dwv) = (dx.all_mut(), dy.all_mut(), dw.all_mut());
            match gc {
                Some(c) => cl::run_sgp_backward(&s, &p, c, &xv, &yv, &wv, &gv, &mut dxv, &mut dyv, &mut dwv, &mut ws),
                None => {
                    cl::fused_gelu_sgp_norm_backward(&s, &p, &xv, &yv, &wv, &gv, &mut dxv, &mut dyv, &mut dwv, &mut ws)
                }
            }
            .unwrap();
        }
        [out.to_vec(&s).unwrap(), dx.to_vec(&s).unwrap(), dy.to_vec(&s).unwrap(), dw.to_vec(&s).unwrap()]
    };
    let want = run(&cpu, None, None);
    let got = run(&gpu, Some(&f), Some(&g));
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let scale = w.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-12);
        let rel = if k == 0 { 1e-5 } else { 1e-4 };
        for (i, (a, b)) in g.iter().zip(w).enumerate() {
            let allowed = if k == 0 { rel * (b.abs() + 1.0) } else { rel * scale };
            assert!((a - b).abs() <= allowed, "tensor {k} element {i}: GPU {a} CPU {b}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
