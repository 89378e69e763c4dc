//! Builds `kernels-gpu` into PTX: rustc's `nvptx64-nvidia-cuda` target, `-Z build-std=core`,
//! fat LTO and `--emit=asm` (the emitted `.s` is the whole post-LTO module, one loadable PTX
//! file), then optionally checks it with `ptxas -v`. Used by `host/build.rs` (to embed the
//! PTX) and by `cargo xtask ptx` (to print entries and resources), so both build the same way.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// GPU architectures the PTX is built for. The host loads the newest one the device runs;
/// `sm_90a` (wgmma, setmaxnreg: Hopper only, compute capability 9.0 exactly) adds the Hopper
/// GEMM entries (`cfg(target_feature = "sm_90a")` in kernels-gpu) to everything sm_90 has.
pub const ARCHS: [&str; 3] = ["sm_80", "sm_90", "sm_90a"];

/// Extra `-C target-feature` for an architecture: sm_90a's instructions need PTX ISA 8.0.
fn arch_features(arch: &str) -> Option<&'static str> {
    (arch == "sm_90a").then_some("-Ctarget-feature=+ptx80")
}

/// Why the PTX could not be built.
#[derive(Debug)]
pub enum PtxBuildError {
    /// `rustup` or the nightly toolchain is not installed.
    NightlyMissing(String),
    /// The nightly toolchain lacks `rust-src` (needed by `-Z build-std=core`).
    RustSrcMissing,
    /// rustc failed on the kernels; the text is its output.
    Compile { arch: String, output: String },
    /// Reading or writing a file failed.
    Io(String),
}

impl fmt::Display for PtxBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PtxBuildError::NightlyMissing(why) => {
                write!(f, "the nightly toolchain is not available ({why}); run `rustup toolchain install nightly`")
            }
            PtxBuildError::RustSrcMissing => write!(
                f,
                "the nightly toolchain has no rust-src; run `rustup component add rust-src --toolchain nightly` (or `cargo xtask ptx`, which does)"
            ),
            PtxBuildError::Compile { arch, output } => write!(f, "compiling the kernels for {arch} failed:\n{output}"),
            PtxBuildError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PtxBuildError {}

/// What to build and where.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// The workspace root (holds `kernels-gpu/`).
    pub workspace: PathBuf,
    /// Where the nested builds and the final `.ptx` files go (e.g. `target/ptx`).
    pub out_dir: PathBuf,
    pub archs: Vec<String>,
    /// Install `rust-src` for nightly when it is missing (xtask does; a build script must not).
    pub install_rust_src: bool,
}

/// One built PTX module.
#[derive(Clone, Debug)]
pub struct PtxArtifact {
    pub arch: String,
    pub path: PathBuf,
    pub entries: Vec<String>,
}

/// A command that runs the nightly toolchain with the environment a parent cargo leaves behind
/// removed: inherited `RUSTC`, `CARGO`, `RUSTUP_TOOLCHAIN`... would silently select stable.
fn nightly(program: &str) -> Command {
    let mut c = Command::new(program);
    for var in [
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTUP_TOOLCHAIN",
        "CARGO",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTDOC",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
    ] {
        c.env_remove(var);
    }
    c
}

fn run(cmd: &mut Command) -> Result<Output, String> {
    cmd.output().map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))
}

/// Checks for nightly and `rust-src`, installing `rust-src` when asked.
pub fn check_toolchain(install_rust_src: bool) -> Result<String, PtxBuildError> {
    let out =
        run(nightly("rustup").args(["run", "nightly", "rustc", "--version"])).map_err(PtxBuildError::NightlyMissing)?;
    if !out.status.success() {
        return Err(PtxBuildError::NightlyMissing(String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let comps = run(nightly("rustup").args(["component", "list", "--installed", "--toolchain", "nightly"]))
        .map_err(PtxBuildError::NightlyMissing)?;
    let has_src = String::from_utf8_lossy(&comps.stdout).lines().any(|l| l.trim() == "rust-src");
    if !has_src {
        if !install_rust_src {
            return Err(PtxBuildError::RustSrcMissing);
        }
        let st = nightly("rustup")
            .args(["component", "add", "rust-src", "--toolchain", "nightly"])
            .status()
            .map_err(|e| PtxBuildError::Io(format!("rustup: {e}")))?;
        if !st.success() {
            return Err(PtxBuildError::RustSrcMissing);
        }
    }
    Ok(version)
}

/// Builds the PTX for every requested architecture; returns one artifact per architecture,
/// written to `<out_dir>/ferrotune_kernels.<arch>.ptx`.
pub fn build(opts: &BuildOptions) -> Result<Vec<PtxArtifact>, PtxBuildError> {
    check_toolchain(opts.install_rust_src)?;
    let manifest = opts.workspace.join("kernels-gpu").join("Cargo.toml");
    let mut out = Vec::new();
    for arch in &opts.archs {
        // One target dir per architecture: a different target-cpu would otherwise rebuild
        // `core` on every switch.
        let target_dir = opts.out_dir.join("build").join(arch);
        let output = run(nightly("cargo")
            .current_dir(&opts.workspace)
            .args(["+nightly", "rustc", "--manifest-path"])
            .arg(&manifest)
            .args([
                "--lib",
                "--crate-type",
                "cdylib",
                "--profile",
                "ptx",
                "--target",
                "nvptx64-nvidia-cuda",
                "-Z",
                "build-std=core",
                "--target-dir",
            ])
            .arg(&target_dir)
            .args(["--", "--emit=asm", "-C", "linker=/bin/true"])
            .arg(format!("-Ctarget-cpu={arch}"))
            .args(arch_features(arch))
            // Full unrolling of the per-lane loops keeps vector arrays in registers (without
            // it the 16-bit, 4-deep variants spill their arrays to local memory).
            .args(["-C", "llvm-args=-unroll-threshold=8000"]))
        .map_err(PtxBuildError::NightlyMissing)?;
        if !output.status.success() {
            return Err(PtxBuildError::Compile {
                arch: arch.clone(),
                output: String::from_utf8_lossy(&output.stderr).into_owned(),
            });
        }
        let asm = target_dir.join("nvptx64-nvidia-cuda").join("ptx").join("deps").join("ferrotune_kernels.s");
        let text = std::fs::read_to_string(&asm).map_err(|e| PtxBuildError::Io(format!("{}: {e}", asm.display())))?;
        let text = add_launch_bounds(&text, |e| {
            ferrotune_kernels::gemm::launch_bounds(e)
                .or_else(|| ferrotune_kernels::gemv::launch_bounds(e))
                .or_else(|| ferrotune_kernels::gemv_rows::launch_bounds(e))
                .or_else(|| ferrotune_kernels::gemv_stream::launch_bounds(e))
                .or_else(|| ferrotune_kernels::gemm_sm90::launch_bounds(e))
                .or_else(|| ferrotune_kernels::clifford::launch_bounds(e))
        });
        let text = align_tensor_map_params(&text, ferrotune_kernels::gemm_sm90::TMAP_PARAMS);
        let path = opts.out_dir.join(format!("ferrotune_kernels.{arch}.ptx"));
        write_if_changed(&path, &text)?;
        out.push(PtxArtifact { arch: arch.clone(), path, entries: entries(&text) });
    }
    Ok(out)
}

/// Rewrites a file only when its contents change, so dependants are not rebuilt needlessly.
fn write_if_changed(path: &Path, text: &str) -> Result<(), PtxBuildError> {
    if std::fs::read_to_string(path).ok().as_deref() == Some(text) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| PtxBuildError::Io(format!("{}: {e}", dir.display())))?;
    }
    std::fs::write(path, text).map_err(|e| PtxBuildError::Io(format!("{}: {e}", path.display())))
}

/// Adds `.maxntid T, 1, 1` and `.minnctapersm B` after the parameter list of every entry for
/// which `bounds` gives `(T, B)`: rustc has no launch-bounds attribute, and without them ptxas
/// may spend registers that cost a tile its designed residency (blocks per SM).
pub fn add_launch_bounds(ptx: &str, bounds: impl Fn(&str) -> Option<(u32, u32)>) -> String {
    let mut out = String::with_capacity(ptx.len() + 4096);
    let mut pending: Option<(u32, u32)> = None;
    for line in ptx.split_inclusive('\n') {
        if let Some(rest) = line.trim_start().strip_prefix(".visible .entry ") {
            pending = bounds(rest.split('(').next().unwrap_or(rest).trim());
        }
        // The body's opening brace ends the entry's header.
        if line.trim_end() == "{"
            && let Some((threads, blocks)) = pending.take()
        {
            out.push_str(&format!(".maxntid {threads}, 1, 1\n.minnctapersm {blocks}\n"));
        }
        out.push_str(line);
    }
    out
}

/// Raises the alignment of the first `count` parameters of the entries whose name starts with
/// `prefix` from 16 to 64 bytes where they are 128-byte aggregates (`CUtensorMap`s passed by
/// value): rustc cannot declare a by-value parameter aligned above 16 (it panics), and the
/// copy engine wants the map 64-byte aligned, as nvcc declares `__grid_constant__` maps.
pub fn align_tensor_map_params(ptx: &str, (prefix, count): (&str, usize)) -> String {
    let mut out = String::with_capacity(ptx.len());
    let mut entry: Option<String> = None;
    for line in ptx.split_inclusive('\n') {
        if let Some(rest) = line.trim_start().strip_prefix(".visible .entry ") {
            let name = rest.split('(').next().unwrap_or(rest).trim();
            entry = name.starts_with(prefix).then(|| name.to_string());
        }
        if let Some(name) = &entry {
            let hit = (0..count)
                .any(|i| line.trim_start().starts_with(&format!(".param .align 16 .b8 {name}_param_{i}[128]")));
            if hit {
                out.push_str(&line.replacen(".align 16", ".align 64", 1));
                continue;
            }
        }
        out.push_str(line);
    }
    out
}

/// Names of the `.entry` functions in a PTX module, in file order.
pub fn entries(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|l| l.trim_start().strip_prefix(".visible .entry "))
        .map(|rest| rest.split('(').next().unwrap_or(rest).trim().to_string())
        .collect()
}

/// One entry's resources as `ptxas -v` reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EntryResources {
    pub name: String,
    pub registers: u32,
    pub stack_bytes: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
    pub shared_bytes: u32,
}

/// Finds `ptxas`: `$PTXAS`, then `PATH`, then the CUDA toolkit, then the pip package
/// `nvidia-cuda-nvcc` (`nvidia/cu13/bin/ptxas` inside python3's site-packages).
pub fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PTXAS") {
        return Some(PathBuf::from(p));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("ptxas");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let cuda = PathBuf::from("/usr/local/cuda/bin/ptxas");
    if cuda.is_file() {
        return Some(cuda);
    }
    let out = Command::new("python3")
        .args(["-c", "import nvidia, os; print('\\n'.join(os.path.join(p, d, 'bin', 'ptxas') for p in nvidia.__path__ for d in sorted(os.listdir(p))))"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).lines().map(PathBuf::from).find(|p| p.is_file())
}

/// Assembles `ptx` for `arch` into a cubin (SASS) at `out` with ptxas, so a device of that
/// architecture loads the kernels without JIT-compiling the PTX (tens of seconds per context
/// for this module). Skipped when `out` is newer than `ptx`. Returns ptxas's text on failure.
pub fn assemble_cubin(ptxas: &Path, ptx: &Path, arch: &str, out: &Path) -> Result<(), String> {
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if matches!((mtime(out), mtime(ptx)), (Some(o), Some(i)) if o > i) {
        return Ok(());
    }
    let tmp = out.with_extension("cubin.tmp");
    let res = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg(ptx)
        .arg("-o")
        .arg(&tmp)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", ptxas.display()))?;
    if !res.status.success() {
        return Err(String::from_utf8_lossy(&res.stderr).into_owned());
    }
    std::fs::rename(&tmp, out).map_err(|e| format!("cannot write {}: {e}", out.display()))
}

/// Assembles `ptx` for `arch` with `ptxas -v`; returns each entry's resources, or ptxas's
/// error text when it rejects the module.
pub fn ptxas_check(ptxas: &Path, ptx: &Path, arch: &str) -> Result<Vec<EntryResources>, String> {
    let out = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg("-v")
        .arg(ptx)
        .args(["-o", "/dev/null"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", ptxas.display()))?;
    let log = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(log);
    }
    Ok(parse_ptxas_report(&log))
}

/// Parses `ptxas -v` output into per-entry resources.
pub fn parse_ptxas_report(log: &str) -> Vec<EntryResources> {
    let mut res: Vec<EntryResources> = Vec::new();
    // Whose "Function properties" block the next stack/spill line belongs to: ptxas also
    // reports non-entry `.func`s (between entries), which must not overwrite an entry's.
    let mut props_for = String::new();
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            res.push(EntryResources { name, ..Default::default() });
            continue;
        }
        if let Some(rest) = line.split("Function properties for ").nth(1) {
            props_for = rest.trim().to_string();
            continue;
        }
        let Some(cur) = res.last_mut() else { continue };
        let num_before = |key: &str| -> Option<u32> {
            let idx = line.find(key)?;
            line[..idx].split_whitespace().last()?.parse().ok()
        };
        if line.contains("bytes stack frame") && props_for == cur.name {
            cur.stack_bytes = num_before("bytes stack frame").unwrap_or(0);
            cur.spill_stores = num_before("bytes spill stores").unwrap_or(0);
            cur.spill_loads = num_before("bytes spill loads").unwrap_or(0);
        }
        if line.contains("registers") {
            cur.registers = num_before("registers").unwrap_or(0);
            cur.shared_bytes = num_before("bytes smem").unwrap_or(0);
        }
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_bounds_go_between_header_and_body() {
        let ptx = ".visible .entry a(\n\t.param .u32 x\n)\n{\n\tret;\n}\n.visible .entry b()\n{\n\tret;\n}\n";
        let out = add_launch_bounds(ptx, |n| (n == "a").then_some((256, 2)));
        assert_eq!(
            out,
            ".visible .entry a(\n\t.param .u32 x\n)\n.maxntid 256, 1, 1\n.minnctapersm 2\n{\n\tret;\n}\n.visible .entry b()\n{\n\tret;\n}\n"
        );
    }

    #[test]
    fn tensor_map_params_get_64_byte_alignment() {
        let ptx = ".visible .entry ft_gemm90_x(\n\t.param .align 16 .b8 ft_gemm90_x_param_0[128],\n\t.param .align 16 .b8 ft_gemm90_x_param_1[128],\n\t.param .align 16 .b8 ft_gemm90_x_param_2[128],\n\t.param .align 16 .b8 ft_gemm90_x_param_3[128]\n)\n.visible .entry ft_other(\n\t.param .align 16 .b8 ft_other_param_0[128]\n)\n";
        let out = align_tensor_map_params(ptx, ("ft_gemm90_", 3));
        assert!(out.contains(".align 64 .b8 ft_gemm90_x_param_0[128]"));
        assert!(out.contains(".align 64 .b8 ft_gemm90_x_param_1[128]"));
        assert!(out.contains(".align 64 .b8 ft_gemm90_x_param_2[128]"));
        assert!(out.contains(".align 16 .b8 ft_gemm90_x_param_3[128]"));
        assert!(out.contains(".align 16 .b8 ft_other_param_0[128]"));
    }

    #[test]
    fn entries_are_listed_in_order() {
        let ptx = ".version 7.8\n.visible .entry ft_a(\n.param .u64 x\n)\n.visible .entry ft_b()\n.func helper()\n";
        assert_eq!(entries(ptx), ["ft_a", "ft_b"]);
    }

    #[test]
    fn ptxas_report_is_parsed_per_entry() {
        let log = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'ft_add_f32_v16_u4' for 'sm_90'\n\
ptxas info    : Function properties for ft_add_f32_v16_u4\n\
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
ptxas info    : Used 30 registers, used 0 barriers, 384 bytes smem\n\
ptxas info    : Compiling entry function 'ft_sum_f32' for 'sm_90'\n\
ptxas info    : Function properties for ft_sum_f32\n\
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 16 registers, used 1 barriers, 128 bytes smem, 380 bytes cmem[0]\n\
ptxas info    : Function properties for helper_func\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
        let r = parse_ptxas_report(log);
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0],
            EntryResources {
                name: "ft_add_f32_v16_u4".into(),
                registers: 30,
                stack_bytes: 8,
                spill_stores: 4,
                spill_loads: 12,
                shared_bytes: 384
            }
        );
        assert_eq!(r[1].registers, 16);
        // A `.func` reported after an entry leaves the entry's numbers alone.
        assert_eq!(r[1].stack_bytes, 16);
        assert_eq!(r[1].shared_bytes, 128);
    }
}
