//! The small-M family's plan (`gemm_plan`'s arm for M <= 64): which of its kernels runs a call,
//! with what, and why, in words for `explain` — the streaming kernel (`ops::gemv_stream`)
//! where it applies, else the register-fed one (`ops::gemv`) with its width and K split.

use crate::DType;
use crate::config::{GemmConfig, GemmPath};
use crate::ops::gemm::Gemm;

/// The reason of the small-M plan of `g` (for which `small_m_applies` gave `why`): the tuned config's K
/// split where it names the family, else the built-in one.
#[allow(clippy::too_many_arguments)]
pub(super) fn small_m_reason(
    g: &Gemm,
    dtype: DType,
    out: DType,
    arch: &str,
    ptrs: [u64; 2],
    sm_count: u32,
    cfg: GemmConfig,
    why: &str,
) -> String {
    let tuned = (cfg.path == GemmPath::SmallM).then(|| small_m_of(&cfg));
    let stream = crate::ops::gemv_stream::applies(g, dtype, arch, ptrs, tuned);
    if let Ok(how) = stream {
        let detail = crate::ops::gemv_stream::describe(g, dtype, out, sm_count.max(1) as usize)
            .map(|(name, p, r)| {
                format!(
                    "; {name}: {how}: {} slabs x {} K chunks of {} over {} blocks, {} stages",
                    p.slabs, p.kchunks, r.kc, p.blocks, r.stages
                )
            })
            .unwrap_or_default();
        return format!("{why}{detail}");
    }
    let detail = crate::ops::gemv::describe(g, dtype, out, ptrs, sm_count.max(1) as usize, tuned)
        .map(|(name, p)| {
            let frame = match crate::ops::gemv::interleaved(g, ptrs) {
                true if crate::ops::gemv::x_in_place(g) => {
                    " of rows 8 apart (weight rows not 16-byte aligned: read in place, in their aligned frame; \
                     x too, with funnel shifts)"
                }
                true => {
                    " of rows 8 apart (weight rows not 16-byte aligned: read in place, in their aligned frame; \
                     x from its 8 shifted copies)"
                }
                false => "",
            };
            let blocks = if p.width > 1 {
                format!("{} blocks of {} slabs", p.slabs, p.width)
            } else {
                format!("{} slabs", p.slabs)
            };
            format!("; {name}, {blocks}{frame} x {} K slices", p.ksplit)
        })
        .unwrap_or_default();
    let from = match tuned {
        Some((_, crate::ops::gemv_stream::STREAM_WIDTH)) => {
            " (the tuned config asks for the streaming kernel, path = \"small-m\", tile 3)".to_string()
        }
        Some((s, w)) => format!(" (K split {s}, width {w} from the tuned config, path = \"small-m\")"),
        None => String::new(),
    };
    let not_stream = match stream {
        Err(w) if ferrotune_kernels::gemv_stream::MAX_M >= g.m => format!(" (not the streaming kernel: {w})"),
        _ => String::new(),
    };
    format!("{why}{from}{detail}{not_stream}")
}

/// (K split, width) of a config naming the small-M family: `split_k`, and the width
/// `gemv::WIDTHS[tile]` (tile 0 is the one-slab block every earlier profile measured).
pub(super) fn small_m_of(cfg: &GemmConfig) -> (usize, usize) {
    let widths = ferrotune_kernels::gemv::WIDTHS;
    if cfg.tile == crate::ops::gemv_stream::STREAM_TILE {
        return (cfg.split_k, crate::ops::gemv_stream::STREAM_WIDTH);
    }
    (cfg.split_k, widths[cfg.tile.min(widths.len() - 1)])
}
