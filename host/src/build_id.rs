//! Kernel build ids per op: the hash of the PTX an op's kernels are made of — its family's
//! entries plus everything in the module that is not an entry (the header, every function and
//! global, which any entry may use) — so a profile entry tuned for `add` stays valid when a
//! GEMM kernel changes, and goes stale when `add`'s own code (or shared code) does. Profiles
//! key entries by it (`build` in docs/profile-format.md).
//!
//! Shared items are not traced to the entries that use them: that needs every identifier of
//! the module looked up (0.3 s on the 52 MB sm_90a module, measured) where this costs one
//! pass; the price is that a change to a shared function or table goes stale everywhere.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use ferrotune_kernels::DType;
use ferrotune_kernels::elementwise::ElemOp;
use ferrotune_profile::Device;

use crate::error::Result;
use crate::stream::Stream;

/// One top-level PTX item: a directive, a declaration, a global or a function/entry body.
#[derive(Debug)]
struct Item<'a> {
    text: &'a str,
    /// What it defines (an entry, function or variable name), if anything.
    name: Option<&'a str>,
    entry: bool,
}

/// Splits PTX text into its top-level items (brace depth 0; braces in `//` comments do not
/// count). One pass over the bytes: the modules are tens of megabytes.
fn items(ptx: &str) -> Vec<Item<'_>> {
    let mut out = Vec::new();
    let (mut depth, mut start, mut seen_code) = (0i64, 0usize, false);
    let mut pos = 0;
    for line in ptx.as_bytes().split_inclusive(|&b| b == b'\n') {
        // The code part of the line, trimmed, and the braces in it.
        let mut code_end = line.len();
        let (mut first, mut last) = (None, None);
        let mut k = 0;
        while k < line.len() {
            match line[k] {
                b'/' if line.get(k + 1) == Some(&b'/') => {
                    code_end = k;
                    break;
                }
                b'{' => depth += 1,
                b'}' => depth -= 1,
                _ => {}
            }
            if !line[k].is_ascii_whitespace() {
                first.get_or_insert(k);
                last = Some(k);
            }
            k += 1;
        }
        pos += line.len();
        let Some(first) = first.filter(|&f| f < code_end) else { continue };
        seen_code = true;
        let t = &line[first..=last.unwrap_or(first)];
        let ends_item = t.ends_with(b";") || t.ends_with(b"}") || is_header_directive(t);
        if seen_code && depth <= 0 && ends_item {
            out.push(item(&ptx[start..pos]));
            (start, seen_code, depth) = (pos, false, 0);
        }
    }
    if start < ptx.len() {
        // Trailing blank lines and comments join the last item; code without an end is one.
        match out.pop() {
            Some(last) if !seen_code => {
                let from = start - last.text.len();
                out.push(item(&ptx[from..]));
            }
            last => {
                out.extend(last);
                out.push(item(&ptx[start..]));
            }
        }
    }
    out
}

/// `.version 8.0`, `.target sm_90a`, `.address_size 64`: one line each, no `;`.
fn is_header_directive(t: &[u8]) -> bool {
    [&b".version"[..], b".target", b".address_size"].iter().any(|d| t.starts_with(d))
}

fn item(text: &str) -> Item<'_> {
    // The head: up to the body or the initialiser.
    let head = text.split(['{', '=']).next().unwrap_or(text);
    let entry = head.split_whitespace().any(|w| w == ".entry");
    let is_fn = entry || head.split_whitespace().any(|w| w == ".func");
    let mut rest = head;
    if is_fn {
        // Skip to after `.entry`/`.func` and over a return-parameter list `(...)`.
        let at = rest.find(".entry").or_else(|| rest.find(".func")).unwrap_or(0);
        rest = rest[at..].split_once(char::is_whitespace).map_or("", |(_, r)| r).trim_start();
        if rest.starts_with('(') {
            rest = rest.split_once(')').map_or("", |(_, r)| r);
        }
        let name = identifiers(rest).next();
        return Item { text, name, entry };
    }
    let named = head.trim_start().starts_with(".global")
        || head.trim_start().starts_with(".const")
        || head.trim_start().starts_with(".shared")
        || head.trim_start().starts_with(".extern")
        || head.trim_start().starts_with(".visible")
        || head.trim_start().starts_with(".weak");
    // A variable: its name is the last identifier of the head (before `[`, `=` or `;`).
    let name = if named { identifiers(head.split('[').next().unwrap_or(head)).last() } else { None };
    Item { text, name, entry: false }
}

/// PTX identifiers in `s` (letters, digits, `_`, `$`; not starting with a digit or `.`).
fn identifiers(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '.'))
        .filter(|w| w.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$'))
}

/// The text an op's kernels are made of: every non-entry item (header, functions, globals)
/// and every entry `wanted` accepts, in file order.
fn family_text(all: &[Item<'_>], wanted: &dyn Fn(&str) -> bool) -> String {
    all.iter().filter(|i| !i.entry || i.name.is_none_or(wanted)).map(|i| i.text).collect()
}

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
    let id = ferrotune_profile::build_hash(&family_text(&all, &*family_of(op)));
    ids.lock().unwrap_or_else(|p| p.into_inner()).entry((arch, family)).or_insert(id).clone()
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

    #[test]
    fn items_split_at_top_level_and_are_named() {
        let it = items(PTX);
        let names: Vec<_> = it.iter().filter_map(|i| i.name).collect();
        assert_eq!(
            names,
            [
                "TABLE",
                "OTHER",
                "helper",
                "ft_add_f32_v1_u1",
                "ft_add_mul_gelu_erf_bf16_v1_u2",
                "ft_gemm_tc_f16",
                "ft_clifford_bwd_d2_f32_4"
            ]
        );
        assert_eq!(it.iter().filter(|i| i.entry).count(), 4);
        assert_eq!(it.iter().map(|i| i.text).collect::<String>(), PTX, "items cover the text exactly");
        let tail = format!("{PTX}\n// trailing comment {{\n\n");
        let it = items(&tail);
        assert_eq!(it.len(), 10, "a trailing comment joins the last item");
        assert_eq!(it.iter().map(|i| i.text).collect::<String>(), tail);
    }

    fn text(ptx: &str, op: &str) -> String {
        family_text(&items(ptx), &*family_of(op))
    }

    #[test]
    fn a_family_takes_its_entries_and_every_shared_item() {
        let add = text(PTX, "add");
        assert!(add.contains("ft_add_f32_v1_u1") && add.contains("helper(") && add.contains("TABLE[8]"));
        assert!(add.contains(".target sm_90a") && add.contains("OTHER[4]"));
        assert!(!add.contains("ft_add_mul_gelu") && !add.contains("ft_gemm") && !add.contains("ft_clifford"));
        let gemm = text(PTX, "gemm");
        assert!(gemm.contains("ft_gemm_tc_f16") && gemm.contains("OTHER[4]") && gemm.contains("helper("));
        assert!(!gemm.contains("ft_add_") && !gemm.contains("ft_clifford"));
        let cl = text(PTX, "clifford_fwd");
        assert!(cl.contains("ft_clifford_bwd_d2_f32_4") && !cl.contains("ft_gemm"));
        assert_eq!(text(PTX, "something_else"), PTX);
    }

    #[test]
    fn an_op_build_changes_with_its_own_entries_and_shared_code_only() {
        let h = |ptx: &str, op: &str| ferrotune_profile::build_hash(&text(ptx, op));
        let gemm_changed = PTX.replace("[OTHER]", "[OTHER+4]");
        assert_eq!(h(PTX, "add"), h(&gemm_changed, "add"));
        assert_eq!(h(PTX, "clifford_bwd"), h(&gemm_changed, "clifford_bwd"));
        assert_ne!(h(PTX, "gemm"), h(&gemm_changed, "gemm"));
        let add_changed = PTX.replace("call.uni (r), helper, (a);", "call.uni (r), helper, (b);");
        assert_ne!(h(PTX, "add"), h(&add_changed, "add"));
        assert_eq!(h(PTX, "gemm"), h(&add_changed, "gemm"));
        assert_eq!(h(PTX, "add_mul_gelu_erf"), h(&add_changed, "add_mul_gelu_erf"));
        let table_changed = PTX.replace("{1, 0, 0, 0, 2", "{3, 0, 0, 0, 2");
        for op in ["add", "gemm", "clifford_fwd"] {
            assert_ne!(h(PTX, op), h(&table_changed, op), "{op}: shared globals belong to every family");
        }
        let target_changed = PTX.replace("sm_90a", "sm_80");
        assert_ne!(h(PTX, "gemm"), h(&target_changed, "gemm"), "the header belongs to every family");
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
                assert!(family_text(&all, &*family_of(op)).len() < ptx.len(), "{arch}: {op} is the whole module");
            }
        }
    }
}
