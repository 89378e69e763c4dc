//! Kernel build ids per op: the hash of the PTX an op's kernels are made of, so a profile
//! entry tuned for `add` stays valid when a GEMM kernel changes and goes stale when `add`'s own
//! code does. Elementwise and Clifford families hash their entries and only the shared
//! functions and globals those reach, renamed canonically (`ptx_items::traced_text`): LLVM
//! numbers anonymous globals (panic locations) module-wide, so names alone would leak other
//! families' edits in. The GEMM family, most of the module, hashes its entries with every
//! shared item (`ptx_items::shared_text`, one pass instead of a lookup of each of its
//! identifiers). Profiles key entries by the id (`build` in docs/profile-format.md).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use ferrotune_kernels::DType;
use ferrotune_kernels::elementwise::ElemOp;
use ferrotune_profile::Device;

use crate::error::Result;
use crate::ptx_items::{Item, items, shared_text, traced_text};
use crate::stream::Stream;

/// Which entries make up `op`'s kernels: an elementwise op's `ft_<op>_<dtype>_…` entries;
/// `clifford…` ops the `ft_clifford_` entries; `gemm` every entry that is neither (the tensor-
/// core, Hopper, split-K, GEMV and packing kernels); any other op the whole module.
fn family_of(op: &str) -> Box<dyn Fn(&str) -> bool + Send + Sync> {
    fn is_elementwise(name: &str, op: &str) -> bool {
        name.strip_prefix("ft_")
            .and_then(|r| r.strip_prefix(op))
            .and_then(|r| r.strip_prefix('_'))
            .is_some_and(|r| DType::ALL.iter().any(|d| r.starts_with(d.name()) && r[d.name().len()..].starts_with('_')))
    }
    if let Some(e) = ElemOp::from_name(op) {
        let op = e.name();
        return Box::new(move |n: &str| is_elementwise(n, op));
    }
    if op.starts_with("clifford") {
        return Box::new(|n: &str| n.starts_with("ft_clifford_"));
    }
    if op == "gemm" {
        return Box::new(|n: &str| {
            !n.starts_with("ft_clifford_") && !ElemOp::ALL.iter().any(|e| is_elementwise(n, e.name()))
        });
    }
    Box::new(|_: &str| true)
}

/// The text `op`'s build id hashes (see the module's doc).
fn family_text(all: &[Item<'_>], op: &str) -> String {
    let wanted = family_of(op);
    if ElemOp::from_name(op).is_some() || op.starts_with("clifford") {
        traced_text(all, &*wanted)
    } else {
        shared_text(all, &*wanted)
    }
}

/// The family key of `op` (what [`family_of`] distinguishes).
fn family_key(op: &str) -> String {
    match ElemOp::from_name(op) {
        Some(_) => op.to_string(),
        None if op.starts_with("clifford") => "clifford".into(),
        None if op == "gemm" => "gemm".into(),
        None => "*".into(),
    }
}

/// One embedded module split into items (shared between the families' hashes).
type ModuleItems = std::sync::Arc<Vec<Item<'static>>>;

/// The build id of `op`'s kernels in the PTX of `arch` (hashed once per arch and family).
pub fn ptx_build_of(arch: &'static str, ptx: &'static str, op: &str) -> String {
    static IDS: OnceLock<Mutex<HashMap<(&'static str, String), String>>> = OnceLock::new();
    static ITEMS: OnceLock<Mutex<HashMap<&'static str, ModuleItems>>> = OnceLock::new();
    let family = family_key(op);
    let ids = IDS.get_or_init(Default::default);
    if let Some(id) = ids.lock().unwrap_or_else(|p| p.into_inner()).get(&(arch, family.clone())) {
        return id.clone();
    }
    let all = {
        let mut m = ITEMS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
        m.entry(arch).or_insert_with(|| std::sync::Arc::new(items(ptx))).clone()
    };
    let id = ferrotune_profile::build_hash(&family_text(&all, op));
    ids.lock().unwrap_or_else(|p| p.into_inner()).entry((arch, family)).or_insert(id).clone()
}

/// One module's build ids: its arch and `(op family, id)` pairs.
pub type ModuleBuilds = (&'static str, Vec<(String, String)>);

/// Every embedded module's build ids for `gemm`, `clifford` and each elementwise op (what
/// `cargo xtask info` prints; an error without embedded PTX).
pub fn embedded_builds() -> Result<Vec<ModuleBuilds>> {
    let mut fams: Vec<String> = vec!["gemm".into(), "clifford".into()];
    fams.extend(ElemOp::ALL.iter().map(|o| o.name().to_string()));
    let modules = crate::module::embedded_ptx()?;
    Ok(modules
        .into_iter()
        .map(|(arch, ptx)| (arch, fams.iter().map(|f| (f.clone(), ptx_build_of(arch, ptx, f))).collect()))
        .collect())
}

/// The kernel builds of one machine, from which each op's build id is derived: on CUDA the
/// PTX of the module this device loads (hashed per op family, see [`crate::build_id`]), on
/// the CPU the crate version and worker threads.
#[derive(Clone, Debug)]
pub enum Builds {
    Ptx { arch: &'static str, ptx: &'static str },
    Cpu(String),
}

impl Builds {
    /// The build id profile entries of `op` are keyed by.
    pub fn of(&self, op: &str) -> String {
        match self {
            Builds::Ptx { arch, ptx } => ptx_build_of(arch, ptx, op),
            Builds::Cpu(b) => b.clone(),
        }
    }
}

/// The device fingerprint and kernel builds of the machine behind `s`: what profile entries
/// are keyed by. CPU: architecture and worker threads; build = crate version + threads.
pub fn machine(s: &Stream) -> Result<(Device, Builds)> {
    match s {
        Stream::Cuda { gpu, .. } => {
            let d = gpu.info();
            let (arch, ptx) = crate::module::select_ptx(d.compute_capability)?;
            let device = Device {
                backend: "cuda".into(),
                name: d.name.clone(),
                arch: d.arch(),
                sm_count: d.sm_count,
                driver: format!("{}.{}", d.driver_version / 1000, d.driver_version % 1000 / 10),
            };
            Ok((device, Builds::Ptx { arch, ptx }))
        }
        Stream::Cpu(cpu) => {
            let threads = cpu.threads();
            let device = Device {
                backend: "cpu".into(),
                name: "cpu".into(),
                arch: std::env::consts::ARCH.into(),
                sm_count: threads as u32,
                driver: "rayon".into(),
            };
            let build =
                ferrotune_profile::build_hash(&format!("ferrotune-cpu {} {threads}", env!("CARGO_PKG_VERSION")));
            Ok((device, Builds::Cpu(build)))
        }
    }
}

/// The device fingerprint of the machine behind `s` and the build id of `op`'s kernels on it.
pub fn fingerprint(s: &Stream, op: &str) -> Result<(Device, String)> {
    let (device, builds) = machine(s)?;
    Ok((device, builds.of(op)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "//\n// Generated\n//\n\n.version 8.0\n.target sm_90a\n.address_size 64\n\n\
        .global .align 4 .b8 TABLE[8] = {1, 0, 0, 0, 2, 0, 0, 0};\n\
        .global .align 4 .b8 OTHER[4] = {7, 0, 0, 0};\n\n\
        .func (.param .b32 func_retval0) helper(\n\t.param .b32 helper_param_0\n)\n{\n\tld.global.u32 %r1, [TABLE];\n\tret;\n}\n\n\
        .visible .entry ft_add_f32_v1_u1(\n\t.param .u64 p0\n)\n.maxntid 256, 1, 1\n{\n\t{\n\tcall.uni (r), helper, (a);\n\t}\n\tret;\n}\n\n\
        .visible .entry ft_add_mul_gelu_erf_bf16_v1_u2(\n\t.param .u64 p0\n)\n{\n\tret;\n}\n\n\
        .visible .entry ft_gemm_tc_f16(\n\t.param .u64 p0\n)\n{\n\tld.global.u32 %r1, [OTHER];\n\tret;\n}\n\n\
        .visible .entry ft_clifford_bwd_d2_f32_4(\n\t.param .u64 p0\n)\n{\n\tret;\n}\n";

    fn text(ptx: &str, op: &str) -> String {
        family_text(&items(ptx), op)
    }

    #[test]
    fn a_family_takes_its_entries_and_the_shared_items_it_reaches() {
        let add = text(PTX, "add");
        assert!(add.contains("ft_add_f32_v1_u1") && add.contains(".target sm_90a"));
        assert!(add.contains("$S0(") && add.contains("$S1[8]"), "helper and TABLE, renamed: {add}");
        assert!(!add.contains("ft_add_mul_gelu") && !add.contains("ft_gemm") && !add.contains("ft_clifford"));
        assert!(!add.contains("OTHER"), "a shared item no add entry reaches");
        let gemm = text(PTX, "gemm");
        assert!(gemm.contains("ft_gemm_tc_f16") && gemm.contains("OTHER[4]") && gemm.contains("helper("));
        assert!(!gemm.contains("ft_add_") && !gemm.contains("ft_clifford"));
        let cl = text(PTX, "clifford_fwd");
        assert!(cl.contains("ft_clifford_bwd_d2_f32_4") && !cl.contains("ft_gemm") && !cl.contains("TABLE"));
        assert_eq!(text(PTX, "something_else"), crate::ptx_items::without_module_numbering(PTX));
    }

    #[test]
    fn an_op_build_changes_with_its_own_code_only() {
        let h = |ptx: &str, op: &str| ferrotune_profile::build_hash(&text(ptx, op));
        let gemm_changed = PTX.replace("[OTHER]", "[OTHER+4]");
        assert_eq!(h(PTX, "add"), h(&gemm_changed, "add"));
        assert_eq!(h(PTX, "clifford_bwd"), h(&gemm_changed, "clifford_bwd"));
        assert_ne!(h(PTX, "gemm"), h(&gemm_changed, "gemm"));
        let add_changed = PTX.replace("call.uni (r), helper, (a);", "call.uni (r), helper, (b);");
        assert_ne!(h(PTX, "add"), h(&add_changed, "add"));
        assert_eq!(h(PTX, "gemm"), h(&add_changed, "gemm"));
        assert_eq!(h(PTX, "add_mul_gelu_erf"), h(&add_changed, "add_mul_gelu_erf"));
        // A table add reaches (through helper): add and gemm (every shared item) change.
        let table_changed = PTX.replace("{1, 0, 0, 0, 2", "{3, 0, 0, 0, 2");
        assert_ne!(h(PTX, "add"), h(&table_changed, "add"));
        assert_ne!(h(PTX, "gemm"), h(&table_changed, "gemm"));
        assert_eq!(h(PTX, "clifford_fwd"), h(&table_changed, "clifford_fwd"));
        // A GEMM-only global renamed (LLVM renumbers anonymous globals): add is unchanged.
        let renamed = PTX.replace("OTHER", "OTHER2");
        assert_eq!(h(PTX, "add"), h(&renamed, "add"));
        // add's own shared items renamed consistently: still the same code.
        let add_renamed = PTX.replace("TABLE", "anon_$_7").replace("helper", "_RNvhelper");
        assert_eq!(h(PTX, "add"), h(&add_renamed, "add"));
        let target_changed = PTX.replace("sm_90a", "sm_80");
        assert_ne!(h(PTX, "add"), h(&target_changed, "add"), "the header belongs to every family");
    }

    /// On the PTX this build embeds (the CI and GPU builds have it): the items cover each
    /// module exactly, every elementwise op and both other families own entries, and the
    /// families split the entries between them with none left over or shared.
    #[test]
    fn the_embedded_modules_split_into_families() {
        let Ok(modules) = crate::module::embedded_ptx() else {
            eprintln!("skipped: this build embeds no PTX (FERROTUNE_NO_PTX or no nvptx target)");
            return;
        };
        let mut ops: Vec<String> = ElemOp::ALL.iter().map(|o| o.name().to_string()).collect();
        ops.extend(["gemm".to_string(), "clifford_fwd".to_string()]);
        for (arch, ptx) in modules {
            let all = items(ptx);
            assert_eq!(all.iter().map(|i| i.text).collect::<String>(), ptx, "{arch}: items cover the module");
            let entries: Vec<&str> = all.iter().filter(|i| i.entry).filter_map(|i| i.name).collect();
            assert_eq!(entries.len(), all.iter().filter(|i| i.entry).count(), "{arch}: every entry is named");
            for name in &entries {
                let owners: Vec<&String> = ops.iter().filter(|op| family_of(op)(name)).collect();
                assert_eq!(owners.len(), 1, "{arch}: entry {name} belongs to {owners:?}");
            }
            for op in &ops {
                assert!(entries.iter().any(|n| family_of(op)(n)), "{arch}: no entry for {op}");
                assert!(family_text(&all, op).len() < ptx.len(), "{arch}: {op} is the whole module");
            }
        }
    }
}
