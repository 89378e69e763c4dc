//! Unit tests of the format: round trip, bucketing, lookup order, merge, and the malformed
//! files that must be clear errors naming file and line.

use super::*;

pub(crate) fn h100() -> Device {
    Device {
        backend: "cuda".into(),
        name: "NVIDIA H100".into(),
        arch: "sm_90".into(),
        sm_count: 132,
        driver: "13.0".into(),
    }
}

fn cfg(threads: i64) -> Config {
    let mut c = Config::new();
    c.insert("threads".into(), Param::Int(threads));
    c.insert("vec16".into(), Param::Bool(true));
    c
}

fn entry(device: Device, n: u64, threads: i64) -> Entry {
    Entry {
        op: "add".into(),
        dtype: "f32".into(),
        layout: "contiguous".into(),
        shape: vec![bucket(n)],
        measured_shape: vec![n],
        build: "fnv1a64:1".into(),
        median_ms: 1.5,
        mad_ms: 0.01,
        throughput_gbps: 1000.0,
        tflops: None,
        default_ms: Some(2.0),
        strategy: "exhaustive".into(),
        evaluations: 10,
        date: "2026-01-01T00:00:00Z".into(),
        tool_version: "0.1.0".into(),
        device,
        config: cfg(threads),
        runners_up: vec![Ranked { median_ms: 1.6, config: cfg(128) }],
        line: None,
    }
}

fn journal(outcome: Outcome) -> JournalRecord {
    JournalRecord {
        op: "add".into(),
        dtype: "f32".into(),
        layout: "contiguous".into(),
        measured_shape: vec![1000],
        build: "fnv1a64:1".into(),
        role: "search".into(),
        outcome,
        median_ms: (outcome == Outcome::Ok).then_some(1.0),
        mad_ms: None,
        detail: Some("why".into()),
        kernel: None,
        device: h100(),
        config: cfg(64),
    }
}

fn parse(text: &str) -> Result<Profile> {
    Profile::parse(text, Path::new("p.toml"))
}

#[test]
fn round_trip_keeps_everything() {
    let p = Profile {
        source: None,
        entries: vec![entry(h100(), 1 << 20, 256), entry(h100(), 3 << 24, 1024)],
        journal: vec![
            JournalRecord { kernel: Some("Hopper(Sm90Variant { tile: 8 }, NONE)".into()), ..journal(Outcome::Ok) },
            journal(Outcome::Timeout),
        ],
    };
    let text = p.to_toml().unwrap();
    // A record without a kernel (every file written before the GEMM worker named them) writes
    // no key, and one with it keeps it.
    assert_eq!(text.matches("kernel = ").count(), 1, "{text}");
    let mut back = parse(&text).unwrap();
    assert!(back.entries.iter().all(|e| e.line.is_some()), "lines are recorded");
    for e in &mut back.entries {
        e.line = None;
    }
    back.source = None;
    assert_eq!(back, p, "{text}");
}

#[test]
fn buckets_are_powers_of_two_below() {
    assert_eq!(bucket(0), 0);
    assert_eq!(bucket(1), 1);
    assert_eq!(bucket(1000), 512);
    assert_eq!(bucket(1024), 1024);
    assert_eq!(bucket(u64::MAX), 1 << 63);
    assert_eq!(bucket_shape(&[4096, 3000, 129]), vec![4096, 2048, 128]);
}

#[test]
fn lookup_order_exact_then_bucket_then_arch() {
    let other = Device { name: "NVIDIA H200".into(), sm_count: 132, ..h100() };
    let newer_driver = Device { driver: "13.1".into(), ..h100() };
    let set = |entries: Vec<Entry>| ProfileSet {
        profiles: vec![Profile { source: Some("x.toml".into()), entries, journal: vec![] }],
        problems: vec![],
    };
    let q = |dev: &Device, n: u64| {
        let shape = [n];
        let q = Query { device: dev, build: "fnv1a64:1", op: "add", dtype: "f32", layout: "contiguous", shape: &shape };
        let s = set(vec![entry(h100(), 1 << 20, 256), entry(h100(), 1 << 10, 64), entry(other.clone(), 1 << 26, 512)]);
        s.lookup(&q).map(|f| (f.how, f.entry.config))
    };
    assert_eq!(q(&h100(), (1 << 20) + 5), Some((Match::Exact, cfg(256))));
    let (how, c) = q(&h100(), 1 << 18).unwrap();
    assert_eq!((how, c), (Match::NearestBucket { bucket: vec![1 << 20], distance: 2 }, cfg(256)));
    let (how, _) = q(&newer_driver, 1 << 20).unwrap();
    assert_eq!(how, Match::NearestBucket { bucket: vec![1 << 20], distance: 0 }, "driver change: same device");
    let third = Device { name: "GH200".into(), sm_count: 144, ..h100() };
    let (how, c) = q(&third, 1 << 26).unwrap();
    assert!(matches!(how, Match::SameArch { ref device, .. } if device == "NVIDIA H200"), "{how:?}");
    assert_eq!(c, cfg(512));
    let a100 = Device { arch: "sm_80".into(), name: "A100".into(), ..h100() };
    assert_eq!(q(&a100, 1 << 20), None, "another architecture never matches");
    // Another kernel build never matches, even on the same device.
    let shape = [1u64 << 20];
    let stale =
        Query { device: &h100(), build: "fnv1a64:2", op: "add", dtype: "f32", layout: "contiguous", shape: &shape };
    assert!(set(vec![entry(h100(), 1 << 20, 256)]).lookup(&stale).is_none());
}

fn gemm_cfg(tile: i64) -> Config {
    let mut c = Config::new();
    c.insert("tile".into(), Param::Int(tile));
    c.insert("tile_shape".into(), Param::Text(format!("shape{tile}")));
    c.insert("cpu_rows".into(), Param::Int(16));
    c
}

/// A GEMM entry: `[m, n, k, batch]` measured, bucketed per dimension.
fn gemm_entry(device: Device, dtype: &str, layout: &str, mnkb: [u64; 4], tile: i64) -> Entry {
    let flops = 2.0 * mnkb.iter().map(|&d| d as f64).product::<f64>();
    Entry {
        op: "gemm".into(),
        dtype: dtype.into(),
        layout: layout.into(),
        shape: bucket_shape(&mnkb),
        measured_shape: mnkb.to_vec(),
        median_ms: 0.5,
        tflops: Some(flops / 0.5e-3 / 1e12),
        runners_up: vec![Ranked { median_ms: 0.6, config: gemm_cfg(0) }],
        config: gemm_cfg(tile),
        ..entry(device, 1, 1)
    }
}

#[test]
fn gemm_entries_round_trip_with_their_tflops() {
    let p = Profile {
        source: None,
        entries: vec![
            gemm_entry(h100(), "bf16", "rc", [1000, 3000, 700, 1], 3),
            gemm_entry(h100(), "tf32", "rr", [8192, 8192, 8192, 4], 1),
        ],
        journal: vec![],
    };
    let text = p.to_toml().unwrap();
    assert!(text.contains("version = 2") && text.contains("tflops = "), "{text}");
    let mut back = parse(&text).unwrap();
    for e in &mut back.entries {
        e.line = None;
    }
    back.source = None;
    assert_eq!(back, p, "{text}");
    assert_eq!(back.entries[0].shape, vec![512, 2048, 512, 1]);
    // A version 1 file (no `tflops`) still reads; a bad `tflops` is refused.
    let v1 = entry_text().replace("version = 2", "version = 1");
    assert_eq!(parse(&v1).unwrap().entries.len(), 1);
    let mut bad = p.clone();
    bad.entries[0].tflops = Some(f64::NAN);
    assert!(parse(&bad.to_toml().unwrap()).unwrap_err().to_string().contains("tflops"));
}

#[test]
fn gemm_lookup_buckets_each_dimension_and_keys_dtype_and_layout() {
    let set = ProfileSet {
        profiles: vec![Profile {
            source: Some("g.toml".into()),
            entries: vec![
                gemm_entry(h100(), "bf16", "rc", [4096, 4096, 4096, 1], 1),
                gemm_entry(h100(), "bf16", "rc", [128, 8192, 1024, 1], 7),
                gemm_entry(h100(), "bf16", "rr", [128, 8192, 1024, 1], 6),
                gemm_entry(h100(), "f16", "rc", [128, 8192, 1024, 1], 5),
            ],
            journal: vec![],
        }],
        problems: vec![],
    };
    let q = |dtype: &str, layout: &str, shape: [u64; 4]| {
        let dev = h100();
        let q = Query { device: &dev, build: "fnv1a64:1", op: "gemm", dtype, layout, shape: &shape };
        set.lookup(&q).map(|f| (f.how, f.entry.config))
    };
    // 5000 x 6000 x 4100 shares 4096³'s bucket in every dimension.
    assert_eq!(q("bf16", "rc", [5000, 6000, 4100, 1]), Some((Match::Exact, gemm_cfg(1))));
    assert_eq!(q("bf16", "rc", [200, 9000, 1500, 1]), Some((Match::Exact, gemm_cfg(7))));
    assert_eq!(q("bf16", "rr", [200, 9000, 1500, 1]), Some((Match::Exact, gemm_cfg(6))), "layout is a key");
    assert_eq!(q("f16", "rc", [200, 9000, 1500, 1]), Some((Match::Exact, gemm_cfg(5))), "dtype is a key");
    // 256 x 8192 x 1024 is one octave from the skinny entry and 9 from 4096³.
    let (how, c) = q("bf16", "rc", [256, 8192, 1024, 1]).unwrap();
    assert_eq!((how, c), (Match::NearestBucket { bucket: vec![128, 8192, 1024, 1], distance: 1 }, gemm_cfg(7)));
    // The batch is a dimension too: 8 x 4096³ is three octaves from 4096³.
    let (how, _) = q("bf16", "rc", [4096, 4096, 4096, 8]).unwrap();
    assert_eq!(how, Match::NearestBucket { bucket: vec![4096, 4096, 4096, 1], distance: 3 });
    assert_eq!(q("tf32", "rc", [4096, 4096, 4096, 1]), None, "no tf32 entry");
    assert_eq!(q("bf16", "cc", [4096, 4096, 4096, 1]), None, "no cc entry");
}

#[test]
fn syntax_errors_name_file_line_and_column() {
    let text = "format = \"ferrotune-profile\"\nversion = 1\n\n[[entry]]\nop = \"add\nx = 1\n";
    let e = parse(text).unwrap_err();
    match &e {
        ProfileError::Syntax { path, line, .. } => {
            assert_eq!(path, Path::new("p.toml"));
            assert_eq!(*line, 5, "{e}");
        }
        other => panic!("expected a syntax error, got {other}"),
    }
    assert!(e.to_string().starts_with("p.toml:5:"), "{e}");
}

#[test]
fn unknown_version_and_format_are_refused_with_their_line() {
    let e = parse("# c\nformat = \"ferrotune-profile\"\nversion = 7\n").unwrap_err();
    assert!(matches!(e, ProfileError::UnknownVersion { line: 3, .. }), "{e}");
    assert!(e.to_string().contains("p.toml:3: unknown profile version 7"), "{e}");
    let e = parse("format = \"something-else\"\nversion = 1\n").unwrap_err();
    assert!(matches!(e, ProfileError::WrongFormat { line: 1, .. }), "{e}");
    let e = parse("[tool]\nx = 1\n").unwrap_err();
    assert!(matches!(e, ProfileError::NotAProfile { .. }), "{e}");
    let e = parse("format = \"ferrotune-profile\"\n").unwrap_err();
    assert!(e.to_string().contains("missing `version`"), "{e}");
}

#[test]
fn bad_entries_are_refused_with_their_line() {
    let mut p = Profile { source: None, entries: vec![entry(h100(), 1000, 256)], journal: vec![] };
    p.entries[0].median_ms = -1.0;
    let text = p.to_toml().unwrap();
    let e = parse(&text).unwrap_err();
    let line = text.lines().position(|l| l.trim() == "[[entry]]").unwrap() + 1;
    assert!(matches!(&e, ProfileError::Invalid { line: l, .. } if *l == line), "{e} (entry at line {line})");
    // An unknown field is a typo, not silently ignored.
    let text = entry_text().replace("strategy =", "strategee =");
    assert!(matches!(parse(&text).unwrap_err(), ProfileError::Syntax { .. }));
    // A shape that is not a bucket.
    let text = entry_text().replace("shape = [512]", "shape = [1000]");
    assert!(parse(&text).unwrap_err().to_string().contains("not a bucket"));
}

fn entry_text() -> String {
    Profile { source: None, entries: vec![entry(h100(), 1000, 256)], journal: vec![] }.to_toml().unwrap()
}

#[test]
fn foreign_devices_and_stale_builds_are_warned_about_by_line() {
    let a100 = Device { arch: "sm_80".into(), name: "A100".into(), ..h100() };
    let text =
        Profile { source: None, entries: vec![entry(a100, 1000, 256), entry(h100(), 1000, 256)], journal: vec![] }
            .to_toml()
            .unwrap();
    let p = parse(&text).unwrap();
    let w = p.foreign(&h100(), &|_| "fnv1a64:1".into());
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].line, p.entries[0].line);
    assert!(w[0].to_string().starts_with("p.toml:"), "{}", w[0]);
    assert!(w[0].msg.contains("A100"));
    let w = p.foreign(&h100(), &|_| "fnv1a64:other".into());
    assert_eq!(w.len(), 2, "{w:?}");
}

/// Each op's entries are judged by that op's kernel build: a GEMM entry goes stale when the
/// GEMM kernels change, an `add` entry of the same file does not.
#[test]
fn builds_are_per_op() {
    let mut gemm = entry(h100(), 1000, 256);
    gemm.op = "gemm".into();
    gemm.build = "fnv1a64:2".into();
    let text =
        Profile { source: None, entries: vec![entry(h100(), 1000, 256), gemm], journal: vec![] }.to_toml().unwrap();
    let p = parse(&text).unwrap();
    let builds = |op: &str| if op == "gemm" { "fnv1a64:3".to_string() } else { "fnv1a64:1".to_string() };
    let w = p.foreign(&h100(), &builds);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].msg.contains("entry gemm f32 is for kernel build fnv1a64:2, not the current fnv1a64:3"), "{}", w[0]);
    let set = ProfileSet { profiles: vec![p], problems: vec![] };
    assert!(set.unusable_for(&h100(), &builds, None).is_empty(), "one usable op keeps the file in use");
    let w = set.unusable_for(&h100(), &|_| "fnv1a64:9".into(), None);
    assert!(w.len() == 1 && w[0].contains("add fnv1a64:1, gemm fnv1a64:2"), "{w:?}");
}

/// A file is reported as unusable only when none of its entries can serve this machine:
/// all for another architecture, or all for another kernel build.
#[test]
fn sets_name_files_that_cannot_serve_this_machine() {
    let a100 = Device { arch: "sm_80".into(), name: "A100".into(), ..h100() };
    let file = |entries: Vec<Entry>, name: &str| Profile {
        source: Some(std::path::PathBuf::from(name)),
        entries,
        journal: vec![],
    };
    let set = ProfileSet {
        profiles: vec![
            file(vec![entry(a100.clone(), 1000, 256)], "a100.toml"),
            file(vec![entry(a100, 1000, 256), entry(h100(), 1000, 256)], "mixed.toml"),
            file(vec![], "empty.toml"),
        ],
        problems: vec![],
    };
    let w = set.unusable_for(&h100(), &|_| "fnv1a64:1".into(), None);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with("a100.toml: tuned for another device") && w[0].contains("A100"), "{}", w[0]);
    // Shipped profiles for other devices are expected: not reported.
    let shipped = Some(std::path::Path::new("a100.toml"));
    assert!(set.unusable_for(&h100(), &|_| "fnv1a64:1".into(), shipped).is_empty());
    let w = set.unusable_for(&h100(), &|_| "fnv1a64:new".into(), None);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[1].starts_with("mixed.toml: tuned for another kernel build (add fnv1a64:1)"), "{}", w[1]);
    assert!(w[1].contains("this binary has add fnv1a64:new"), "{}", w[1]);
}

#[test]
fn merge_keeps_the_newer_entry_and_adds_the_rest() {
    let mut a = Profile { source: None, entries: vec![entry(h100(), 1000, 256)], journal: vec![] };
    let mut newer = entry(h100(), 1000, 512);
    newer.date = "2026-02-01T00:00:00Z".into();
    let b = Profile { source: None, entries: vec![newer.clone(), entry(h100(), 1 << 24, 1024)], journal: vec![] };
    let r = a.merge(&b);
    assert_eq!(r, MergeReport { added: 1, replaced: 1, kept: 0 });
    assert_eq!(a.entries[0], newer);
    let r = a.merge(&Profile { source: None, entries: vec![entry(h100(), 1000, 64)], journal: vec![] });
    assert_eq!(r, MergeReport { added: 0, replaced: 0, kept: 1 }, "older entry does not win");
}

#[test]
fn save_is_atomic_and_loads_back() {
    let dir = std::env::temp_dir().join(format!("ferrotune-profile-test-{}", std::process::id()));
    let path = dir.join("sub/p.toml");
    let p = Profile { source: None, entries: vec![entry(h100(), 1000, 256)], journal: vec![journal(Outcome::Failed)] };
    p.save_atomic(&path).unwrap();
    let back = Profile::load(&path).unwrap();
    assert_eq!(back.entries.len(), 1);
    assert_eq!(back.journal, p.journal);
    let leftovers: Vec<_> = std::fs::read_dir(dir.join("sub")).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(leftovers.len(), 1, "no temporary file is left behind: {leftovers:?}");
    let set = ProfileSet::load(&dir.join("sub"));
    assert_eq!(set.profiles.len(), 1);
    std::fs::write(dir.join("sub/bad.toml"), "format = \"ferrotune-profile\"\nversion = 3\n").unwrap();
    let set = ProfileSet::load(&dir.join("sub"));
    assert_eq!(set.profiles.len(), 1);
    assert_eq!(set.problems.len(), 1);
    assert!(set.problems[0].contains("bad.toml:2"), "{:?}", set.problems);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn build_hash_is_stable() {
    assert_eq!(build_hash(""), "fnv1a64:cbf29ce484222325");
    assert_ne!(build_hash("a"), build_hash("b"));
    assert_eq!(utc_now().len(), 20);
}
