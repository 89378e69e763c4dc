//! PTX modules as top-level items (header directives, declarations, globals, functions,
//! entries) and the two texts a kernel family's build id hashes: the family's entries with
//! every shared item ([`shared_text`]), or with only the shared items they reach, renamed in
//! the order they are first reached ([`traced_text`]), so that LLVM's module-wide numbering of
//! anonymous globals (panic locations) and other families' shared items do not leak in. Both
//! texts drop what LLVM numbers across the module: comments and the function's index in local
//! names ([`without_module_numbering`]).

use std::collections::HashMap;

/// One top-level PTX item: a directive, a declaration, a global or a function/entry body.
#[derive(Debug)]
pub(crate) struct Item<'a> {
    pub text: &'a str,
    /// What it defines (an entry, function or variable name), if anything.
    pub name: Option<&'a str>,
    pub entry: bool,
}

/// Splits PTX text into its top-level items (brace depth 0; braces in `//` comments do not
/// count). One pass over the bytes: the modules are tens of megabytes.
pub(crate) fn items(ptx: &str) -> Vec<Item<'_>> {
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

/// PTX identifiers in `s` (see [`identifier_spans`]).
fn identifiers(s: &str) -> impl Iterator<Item = &str> {
    identifier_spans(s).map(move |(a, b)| &s[a..b])
}

/// The family's entries (those `wanted` accepts) and every non-entry item, in file order.
pub(crate) fn shared_text(all: &[Item<'_>], wanted: &dyn Fn(&str) -> bool) -> String {
    let text: String = all.iter().filter(|i| !i.entry || i.name.is_none_or(wanted)).map(|i| i.text).collect();
    without_module_numbering(&text)
}

/// `text` without what LLVM numbers across the module: the function's index in the names it
/// derives from it (basic-block labels `$L__BB<f>_<b>` become `$L__BB_<b>`, the local stack
/// `__local_depot<f>` becomes `__local_depot`; both are local to their function, one `<f>` per
/// function, so nothing is merged) and comments (`// callseq <n>` counts calls module-wide).
/// Without this, adding an entry to the module renumbers every function after it and moves
/// the build ids of kernels that did not change.
pub(crate) fn without_module_numbering(text: &str) -> String {
    const MARKS: [(&str, bool); 2] = [("$L__BB", true), ("__local_depot", false)];
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut last, mut k) = (0, 0);
    while let Some(off) = text[k..].find(['$', '_', '/']) {
        k += off;
        if text[k..].starts_with("//") {
            // A comment, up to (not including) the end of its line.
            out.push_str(&text[last..k]);
            k = text[k..].find('\n').map_or(text.len(), |e| k + e);
            last = k;
            continue;
        }
        let Some(&(mark, underscore)) = MARKS.iter().find(|(m, _)| text[k..].starts_with(m)) else {
            k += 1;
            continue;
        };
        let digits_from = k + mark.len();
        let mut d = digits_from;
        while d < b.len() && b[d].is_ascii_digit() {
            d += 1;
        }
        let whole = d > digits_from
            && (!underscore || (b.get(d) == Some(&b'_') && b.get(d + 1).is_some_and(u8::is_ascii_digit)));
        // Only a whole name counts: not `x__local_depot1`.
        let starts_word = k == 0 || !(b[k - 1].is_ascii_alphanumeric() || b[k - 1] == b'_' || b[k - 1] == b'$');
        if whole && starts_word {
            out.push_str(&text[last..digits_from]);
            last = d;
        }
        k = d.max(k + 1);
    }
    out.push_str(&text[last..]);
    out
}

/// The unnamed non-entry items (the header), the family's entries in file order, then the
/// named non-entry items they reach (transitively), each once; every reference to one of
/// those, and its own name, written as `$S<k>` with `k` the order in which the family first
/// reached it (a function's `<name>_param_<n>` too). Two modules give the same text for a
/// family exactly when its entries and what they use are the same up to those names.
pub(crate) fn traced_text(all: &[Item<'_>], wanted: &dyn Fn(&str) -> bool) -> String {
    let shared: HashMap<&str, usize> =
        all.iter().enumerate().filter(|(_, i)| !i.entry).filter_map(|(k, i)| i.name.map(|n| (n, k))).collect();
    // Cheap pre-checks before a hash lookup: the first bytes and lengths shared names have.
    let mut first = [false; 256];
    let (mut min, mut max) = (usize::MAX, 0);
    for n in shared.keys() {
        first[n.as_bytes()[0] as usize] = true;
        (min, max) = (min.min(n.len()), max.max(n.len()));
    }
    let mut order: Vec<usize> = Vec::new();
    let mut canon: HashMap<usize, usize> = HashMap::new();
    let mut out = String::new();
    let mut emit = |text: &str, order: &mut Vec<usize>, out: &mut String| {
        let mut last = 0;
        for (s, e) in identifier_spans(text) {
            // A function's parameters are named after it (`helper_param_0`): the prefix counts.
            let w = &text[s..e];
            let key = match w.rfind("_param_") {
                Some(p) if !shared.contains_key(w) => &w[..p],
                _ => w,
            };
            if key.is_empty() || !first[key.as_bytes()[0] as usize] || key.len() < min || key.len() > max {
                continue;
            }
            if let Some(&k) = shared.get(key) {
                let id = *canon.entry(k).or_insert_with(|| {
                    order.push(k);
                    order.len() - 1
                });
                out.push_str(&text[last..s]);
                out.push_str(&format!("$S{id}"));
                last = s + key.len();
            }
        }
        out.push_str(&text[last..]);
    };
    for i in all.iter().filter(|i| !i.entry && i.name.is_none()) {
        out.push_str(i.text);
    }
    for i in all.iter().filter(|i| i.entry && i.name.is_none_or(wanted)) {
        emit(i.text, &mut order, &mut out);
    }
    let mut k = 0;
    while k < order.len() {
        emit(all[order[k]].text, &mut order, &mut out);
        k += 1;
    }
    without_module_numbering(&out)
}

/// Byte ranges of the PTX identifiers in `s`: maximal runs of letters, digits, `_`, `$` and
/// `.` that start with a letter, `_` or `$` (so `ld.global.u32` is one word and `%r1` gives `r1`).
fn identifier_spans(s: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let b = s.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c == b'.';
    let mut k = 0;
    std::iter::from_fn(move || {
        while k < b.len() {
            if !word(b[k]) {
                k += 1;
                continue;
            }
            let s0 = k;
            while k < b.len() && word(b[k]) {
                k += 1;
            }
            if b[s0].is_ascii_alphabetic() || b[s0] == b'_' || b[s0] == b'$' {
                return Some((s0, k));
            }
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "//\n// Generated\n//\n\n.version 8.0\n.target sm_90a\n.address_size 64\n\n\
        .global .align 4 .b8 TABLE[8] = {1, 0, 0, 0, 2, 0, 0, 0};\n\
        .global .align 8 .u64 PTR[1] = {generic(TABLE)};\n\
        .extern .shared .align 16 .b8 smem[];\n\n\
        .func (.param .b32 func_retval0) helper(\n\t.param .b32 helper_param_0\n)\n{\n\tld.global.u64 %rd1, [PTR];\n\tret;\n}\n\n\
        .visible .entry ft_a(\n\t.param .u64 p0\n)\n.maxntid 256, 1, 1\n{\n\t{ // a comment with a brace }\n\tcall.uni (r), helper, (a);\n\t}\n\tret;\n}\n\n\
        .visible .entry ft_b(\n\t.param .u64 p0\n)\n{\n\tmov.u64 %rd2, smem;\n\tret;\n}\n";

    #[test]
    fn items_split_at_top_level_and_are_named() {
        let it = items(PTX);
        let names: Vec<_> = it.iter().filter_map(|i| i.name).collect();
        assert_eq!(names, ["TABLE", "PTR", "smem", "helper", "ft_a", "ft_b"]);
        assert_eq!(it.iter().filter(|i| i.entry).count(), 2);
        assert_eq!(it.len(), 9, "3 header lines, 3 variables, 1 function, 2 entries");
        assert_eq!(it.iter().map(|i| i.text).collect::<String>(), PTX, "items cover the text exactly");
        let tail = format!("{PTX}\n// trailing comment {{\n\n");
        let it = items(&tail);
        assert_eq!(it.len(), 9, "a trailing comment joins the last item");
        assert_eq!(it.iter().map(|i| i.text).collect::<String>(), tail);
    }

    #[test]
    fn tracing_follows_references_transitively_and_renames_in_first_use_order() {
        let all = items(PTX);
        let a = traced_text(&all, &|n: &str| n == "ft_a");
        // ft_a -> helper ($S0) -> PTR ($S1) -> TABLE ($S2); smem is not reached.
        assert!(a.contains("call.uni (r), $S0, (a);"), "{a}");
        assert!(a.contains("$S0(\n\t.param .b32 $S0_param_0"), "{a}");
        assert!(a.contains("[$S1]") && a.contains("$S1[1] = {generic($S2)}") && a.contains("$S2[8]"), "{a}");
        assert!(!a.contains("smem") && !a.contains("ft_b") && a.trim_start().starts_with(".version 8.0"));
        let b = traced_text(&all, &|n: &str| n == "ft_b");
        assert!(b.contains("mov.u64 %rd2, $S0;") && b.contains(".b8 $S0[];") && !b.contains("TABLE"), "{b}");
        let both = shared_text(&all, &|n: &str| n == "ft_b");
        assert!(both.contains("TABLE[8]") && both.contains("helper(") && !both.contains("ft_a"));
    }

    #[test]
    fn the_function_index_leaves_local_names() {
        let f = |n: usize| {
            format!(
                ".visible .entry ft_a(\n)\n{{\n\t.local .align 8 .b8 __local_depot{n}[16];\n\tmov.u64 %SPL, \
                 __local_depot{n};\n\t@%p1 bra $L__BB{n}_2;\n$L__BB{n}_1:\n\tret;\n$L__BB{n}_2:\n\tret;\n}}\n"
            )
        };
        let (a, b) = (f(36), f(50));
        let ta = traced_text(&items(&a), &|n: &str| n == "ft_a");
        assert_eq!(ta, traced_text(&items(&b), &|n: &str| n == "ft_a"), "only the function index differs");
        assert!(ta.contains("bra $L__BB_2;\n$L__BB_1:") && ta.contains("__local_depot[16]"), "{ta}");
        assert_eq!(shared_text(&items(&a), &|_: &str| true), shared_text(&items(&b), &|_: &str| true));
        // Block numbers and everything else still count; look-alike names are left alone.
        assert_ne!(ta, traced_text(&items(&a.replace("bra $L__BB36_2", "bra $L__BB36_1")), &|n: &str| n == "ft_a"));
        let other = "mov.u32 %r1, my__local_depot7; bra $L__BB12; $L__BB9_x";
        assert_eq!(without_module_numbering(other), other);
        assert_eq!(without_module_numbering("$L__BB0_1 $L__BB123_45;"), "$L__BB_1 $L__BB_45;");
        let calls = |n: usize| format!("\t{{ // callseq {n}, 0\n\tcall.uni f, (p);\n\t}} // callseq {n}\n\tret; //x\n");
        assert_eq!(without_module_numbering(&calls(40)), "\t{ \n\tcall.uni f, (p);\n\t} \n\tret; \n");
        assert_eq!(without_module_numbering(&calls(40)), without_module_numbering(&calls(84)));
    }

    #[test]
    fn identifiers_are_whole_words() {
        let w: Vec<&str> = identifiers("ld.global.u32 %r1, [anon_$_4+8]; 0x1F $L__BB0_1: generic(T)").collect();
        assert_eq!(w, ["ld.global.u32", "r1", "anon_$_4", "$L__BB0_1", "generic", "T"]);
    }
}
