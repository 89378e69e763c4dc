//! The PTX built into the host library holds every entry point the host can ask for (the
//! Hopper GEMM entries in the sm_90a module only).

use ferrotune::module::embedded_ptx;
use ferrotune::ops::elementwise::entry_name;
use ferrotune::{DType, ElemOp};
use ferrotune_kernels::elementwise::ELEM_VARIANTS;

#[test]
fn every_entry_the_host_launches_is_in_the_ptx() {
    let modules = match embedded_ptx() {
        Ok(m) => m,
        Err(e) => {
            println!("every_entry_the_host_launches_is_in_the_ptx: skipped: {e}");
            return;
        }
    };
    for (arch, ptx) in modules {
        let entries: std::collections::HashSet<_> = ferrotune_ptx_entries(ptx);
        let mut wanted = vec!["ft_sum_f32".to_string()];
        wanted.extend(ferrotune::ops::clifford::all_entries());
        for v in ferrotune_kernels::gemm::GemmVariant::all() {
            wanted.push(v.entry_name().as_str().to_string());
        }
        // The Hopper entries exist only in the sm_90a module, and the .param of their maps is
        // 64-byte aligned there (the PTX build raises rustc's 16).
        if arch == "sm_90a" {
            for v in ferrotune_kernels::gemm_sm90::Sm90Variant::all() {
                let name = v.entry_name().as_str().to_string();
                let decl = format!(".param .align 64 .b8 {name}_param_0[128]");
                assert!(ptx.contains(&decl), "{arch}: {name}: no `{decl}`");
                wanted.push(name);
            }
            // The streaming small-M kernel's bulk copies and the Clifford backward's clusters
            // exist on sm_90a only.
            wanted.extend(ferrotune_kernels::gemv_stream::NAMES.iter().map(|n| n.to_string()));
            wanted.extend(ferrotune::ops::clifford::cluster_entries());
        }
        for out in DType::ALL {
            wanted.push(ferrotune_kernels::splitk::reduce_entry(out).to_string());
        }
        // The small-M family and the pack of unaligned operands (every module).
        wanted.extend(ferrotune_kernels::gemv::NAMES.iter().map(|n| n.to_string()));
        wanted.extend(ferrotune_kernels::gemv_rows::NAMES.iter().map(|n| n.to_string()));
        wanted.extend(
            ["ft_pack_k_bf16", "ft_pack_k_f16", "ft_pack_k_f32", "ft_pack_shift_bf16", "ft_pack_shift_f16"]
                .map(String::from),
        );
        for op in ElemOp::ALL {
            for dt in DType::ALL {
                for v in ELEM_VARIANTS {
                    wanted.push(entry_name(op, dt, v));
                }
            }
        }
        for w in &wanted {
            assert!(entries.contains(w.as_str()), "{arch}: entry {w} missing from the PTX");
        }
        assert_eq!(entries.len(), wanted.len(), "{arch}: the PTX has entries the host never launches");
    }
}

fn ferrotune_ptx_entries(ptx: &str) -> std::collections::HashSet<&str> {
    ptx.lines()
        .filter_map(|l| l.trim_start().strip_prefix(".visible .entry "))
        .map(|r| r.split('(').next().unwrap_or(r).trim())
        .collect()
}
