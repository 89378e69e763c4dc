//! Profiles that cannot be used are reported: a malformed file, one tuned for another device
//! or for another kernel build gives one warning per process naming the file and the reason
//! (stderr and `log`), and `FERROTUNE_PROFILE_STRICT=1` makes it the op's error. The process
//! behaviour is checked by running this test binary again with the environment set.

use std::path::Path;
use std::process::Command;

use ferrotune::ops;
use ferrotune::profile::{Profile, ProfileSet};
use ferrotune::tuned::unusable_profiles;
use ferrotune::{Buffer, DType, ElemConfig, ElemOp, Error};
use ferrotune_testkit::cpu_backend;

use crate::tune::{entry_for, temp_dir, write};

/// A malformed file, one for a CUDA device, one for another build of this CPU's kernels.
fn bad_profiles(dir: &Path, s: &ferrotune::Stream) -> [std::path::PathBuf; 3] {
    let malformed = dir.join("malformed.toml");
    std::fs::write(&malformed, "this is [not a profile").unwrap();
    let e = entry_for(s, ElemOp::Add, 1000, &ElemConfig::heuristic(ElemOp::Add, DType::F32, None));
    let mut foreign = e.clone();
    foreign.device.backend = "cuda".into();
    foreign.device.arch = "sm_90".into();
    foreign.device.name = "NVIDIA H100".into();
    let mut stale = e;
    stale.build = "fnv1a64:0000000000000000".into();
    let one = |e| Profile { source: None, entries: vec![e], journal: vec![] };
    [malformed, write(dir, "foreign.toml", &one(foreign)), write(dir, "stale.toml", &one(stale))]
}

#[test]
fn unusable_profiles_name_the_file_and_the_reason() {
    let b = cpu_backend();
    let s = b.stream();
    let dir = temp_dir("unusable");
    let files = bad_profiles(&dir, &s);
    let reasons = ["malformed.toml", "tuned for another device (cuda NVIDIA H100", "tuned for another kernel build"];
    for (f, why) in files.iter().zip(reasons) {
        let problems = unusable_profiles(&ProfileSet::load(f), &s);
        assert_eq!(problems.len(), 1, "{f:?}: {problems:?}");
        assert!(problems[0].contains(&*f.file_name().unwrap().to_string_lossy()), "{}", problems[0]);
        assert!(problems[0].contains(why), "{why}: {}", problems[0]);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs two ops with whatever `FERROTUNE_PROFILE` says; with `FERROTUNE_TEST_EXPECT=error`
/// they must fail with the profile's problem, else succeed. (Run on its own it checks that
/// the ops succeed without a bad profile.)
#[test]
fn child_runs_ops_with_the_profile_from_the_environment() {
    let s = cpu_backend().stream();
    let x = Buffer::from_slice(&s, &[1.0f32; 64]).unwrap();
    let mut y = Buffer::<f32>::zeros(&s, 64).unwrap();
    for _ in 0..2 {
        let r = ops::add(&s, &x.all(), &x.all(), &mut y.all_mut());
        let g = ops::matmul::<f32, f32>(&s, &x.all(), &x.all(), &mut y.all_mut(), 8, 8, 8);
        if std::env::var("FERROTUNE_TEST_EXPECT").as_deref() == Ok("error") {
            for e in [r.unwrap_err(), g.unwrap_err()] {
                assert!(matches!(e, Error::InvalidConfig { op: "tuning profile", .. }), "{e}");
                assert!(e.to_string().contains(".toml"), "{e}");
            }
        } else {
            r.unwrap();
            g.unwrap();
            assert_eq!(y.to_vec(&s).unwrap()[0], 8.0);
        }
    }
}

/// This test binary again, running only the child test with `env`; its exit status and stderr.
fn child(env: &[(&str, &Path)], expect_error: bool) -> (bool, String) {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["profile_warnings::child_runs_ops_with_the_profile_from_the_environment", "--exact", "--nocapture"]);
    c.env_remove("FERROTUNE_PROFILE_STRICT").env_remove("FERROTUNE_TEST_EXPECT");
    for (k, v) in env {
        c.env(k, v);
    }
    if expect_error {
        c.env("FERROTUNE_TEST_EXPECT", "error");
    }
    let out = c.output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_bad_profile_warns_once_per_process_and_strict_makes_it_an_error() {
    let s = cpu_backend().stream();
    let dir = temp_dir("warn-once");
    for f in bad_profiles(&dir, &s) {
        let (ok, err) = child(&[("FERROTUNE_PROFILE", &f)], false);
        assert!(ok, "{f:?}: {err}");
        let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: tuning profile not used")).collect();
        assert_eq!(warnings.len(), 1, "{f:?}: {err}");
        assert!(warnings[0].contains(&*f.display().to_string()), "{}", warnings[0]);
        let (ok, err) = child(&[("FERROTUNE_PROFILE", &f), ("FERROTUNE_PROFILE_STRICT", Path::new("1"))], true);
        assert!(ok, "strict {f:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The profiles shipped in `profiles/` are for this commit's kernels: every CUDA entry's build
/// id is its op's build in one of the embedded modules. A kernel change that leaves them stale
/// would make every user of that GPU see "tuned for another kernel build: re-tune" (run
/// `TESTS=0 CLIFFORD=0 NCU=0 NSYS=0 bash bench/device-profile.sh` on that GPU and ship its
/// `h100.toml`; profiles/README.md).
#[test]
fn shipped_profiles_match_the_embedded_kernels() {
    let modules = match ferrotune::module::embedded_ptx() {
        Ok(m) => m,
        Err(e) => return eprintln!("skipped: no embedded PTX ({e})"),
    };
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../profiles"));
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|x| x == "toml"));
    for f in files {
        let p = Profile::load(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for e in p.entries.iter().filter(|e| e.device.backend == "cuda") {
            let known =
                modules.iter().any(|&(arch, ptx)| ferrotune::build_id::ptx_build_of(arch, ptx, &e.op) == e.build);
            assert!(
                known,
                "{}: {} {} was tuned for build {}, which no embedded module has",
                f.display(),
                e.op,
                e.dtype,
                e.build
            );
        }
    }
}
