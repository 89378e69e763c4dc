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
    let rows = crate::ops::gemv_rows::applies(g, dtype, ptrs[1], tuned);
    if let Ok(how) = rows {
        let detail = crate::ops::gemv_rows::describe(g, dtype, out, sm_count.max(1) as usize)
            .map(|l| {
                let groups = ferrotune_kernels::gemv_rows::WARPS / l.team;
                let slices = match l.slices {
                    1 => format!("all {} rows of x in each block", g.m),
                    s => format!("{s} slices of {} rows of x", l.rows),
                };
                format!(
                    "; {}: {how}: {} blocks of {groups} x 8 rows, {} warps per 8 rows, {slices}",
                    l.name, l.blocks, l.team
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
        Some((_, crate::ops::gemv_rows::ROWS_WIDTH)) => {
            " (the tuned config asks for the row kernel, path = \"small-m\", tile 4)".to_string()
        }
        Some((s, w)) => format!(" (K split {s}, width {w} from the tuned config, path = \"small-m\")"),
        None => String::new(),
    };
    let not_stream = match stream {
        Err(w) if ferrotune_kernels::gemv_stream::MAX_M >= g.m => format!(" (not the streaming kernel: {w})"),
        _ => String::new(),
    };
    let not_rows = match rows {
        Err(w) if ferrotune_kernels::gemv_rows::MAX_M >= g.m => format!(" (not the row kernel: {w})"),
        _ => String::new(),
    };
    format!("{why}{from}{detail}{not_stream}{not_rows}")
}

/// (K split, width) of a config naming the small-M family: `split_k`, and the width
/// `gemv::WIDTHS[tile]` (tile 0 is the one-slab block every earlier profile measured).
pub(super) fn small_m_of(cfg: &GemmConfig) -> (usize, usize) {
    let widths = ferrotune_kernels::gemv::WIDTHS;
    if cfg.tile == crate::ops::gemv_stream::STREAM_TILE {
        return (cfg.split_k, crate::ops::gemv_stream::STREAM_WIDTH);
    }
    if cfg.tile == crate::ops::gemv_rows::ROWS_TILE {
        return (cfg.split_k, crate::ops::gemv_rows::ROWS_WIDTH);
    }
    (cfg.split_k, widths[cfg.tile.min(widths.len() - 1)])
}

/// Whether `g` has rows enough for the Hopper path rather than the small-M family (where the
/// Hopper path can run it): more than 32 rows, more than 16 against a weight of more than
/// [`HOPPER_WEIGHT_ABOVE_16_ROWS`] elements, or more than 8 against one of at least
/// [`HOPPER_WEIGHT_ABOVE_8_ROWS`]. Measured on the H100 (queued ms): 64x4096x4096
/// 0.032 on the Hopper split vs 0.041 small-M, 33x8191x4099 (packed) 0.094 vs 0.111
/// (bench/results/irregular/run1-0a84591/), but 33x4096x64 and 17x33x9000 faster small-M
/// (hence also K, N >= 1024 in the plan); from 17 rows, three calls each
/// (bench/results/beside-hopper-30e0f9aa3d5c/): Hopper 0.034-0.038 against 0.045-0.047 on
/// 24x5120x5120, 0.057-0.060 against 0.072-0.075 on 20x8192x8192, 0.052-0.057 against
/// 0.072-0.079 on 32x14336x4096, 0.047-0.052 against 0.053-0.057 on 28x4096x11008, but small-M
/// ahead on 4096x4096 and 2048x8192 weights (32x4096x4096 0.023-0.027 against 0.027-0.030,
/// 17x4096x4096, 24x2048x8192); re-measured as built (bench/results/rows17-32-1e4e30fa25e0/).
/// Unaligned weights follow their own limit (`gemv::reads_unaligned_in_place`: read in place
/// up to 40 rows, since packing them for Hopper copies the whole weight first).
/// `FERROTUNE_SMALL_M_BESIDE_HOPPER=n` sets one threshold of n rows for every weight (A/B runs);
/// `FERROTUNE_SM90_FEW_ROWS_SPLIT=1` sends 9 to 32 rows to the Hopper tiles whatever the weight
/// (`gemm_sm90_class::few_rows_split`, a candidate rule).
pub(super) fn hopper_rows(g: &Gemm) -> bool {
    match std::env::var("FERROTUNE_SMALL_M_BESIDE_HOPPER").ok().and_then(|v| v.parse::<usize>().ok()) {
        Some(n) => g.m > n,
        None => {
            let w = g.n.saturating_mul(g.k);
            let few_rows = g.m > 8 && super::gemm_sm90_class::few_rows_split(g);
            g.m > 32
                || few_rows
                || (g.m > 16 && w > HOPPER_WEIGHT_ABOVE_16_ROWS)
                || (g.m > 8 && w >= HOPPER_WEIGHT_ABOVE_8_ROWS)
        }
    }
}

/// Whether `g` goes to the Hopper tiles ahead of the small-M family (where the Hopper path can
/// run it, or its packed copy): rows past [`hopper_rows`] against a weight of at least 1024
/// rows, and K of at least 1024 — or, above [`HOPPER_SHORT_K_ABOVE_ROWS`] rows, K of at least
/// [`HOPPER_SHORT_K_MIN`] — or [`aligned_short_k`]. With 33 to 64 rows of x and K below 1024
/// the small-M kernels stage x again for every few weight rows and the tiles win even when the
/// weight must be packed first (the H200 A/B of this rule against
/// `FERROTUNE_SMALL_M_SHORT_K_HOPPER=0`, with the µs per shape: bench/NOTES.md, "33-64 rows of
/// short K on the Hopper tiles"); from K 1024 the weight's pack costs more than the tiles save
/// (33x8191x4099 in place: `gemv::reads_unaligned_in_place`). With 17 to 32 rows the packed
/// tiles won on some shapes and lost on others (24x3000x300, 20x4097x600): kept on small-M.
/// `FERROTUNE_SMALL_M_SHORT_K_HOPPER=0` turns both short-K rules off (A/B runs).
pub(super) fn hopper_shape(g: &Gemm) -> bool {
    let off = std::env::var("FERROTUNE_SMALL_M_SHORT_K_HOPPER").is_ok_and(|v| v == "0");
    let short_k = g.m > HOPPER_SHORT_K_ABOVE_ROWS && g.k >= HOPPER_SHORT_K_MIN && !off;
    (hopper_rows(g) && g.n >= 1024 && (g.k >= 1024 || short_k)) || (!off && aligned_short_k(g))
}

/// The short-K rule for operands the Hopper path loads as they are (the plan asks
/// `gemm_sm90::choose`, which takes only 16-byte rows): more than
/// [`ALIGNED_SHORT_K_ABOVE_ROWS`] rows of x and K of at most [`ALIGNED_SHORT_K_MAX`], whatever
/// N. On the H200, in one call each (bench/results/aligned-shortk-*/ has every shape, both
/// 16-bit types), the streaming 64 x 128 tile against the small-M slab kernel, bf16 µs:
/// 64x768x768 7.3 against 14.2, 48x512x512 6.0 against 10.1, 64x8192x64 5.1 against 11.2,
/// 64x64x512 6.6 against 10.0, 33x4096x96 5.9 against 7.9, 32x1536x768 7.4 against 9.4,
/// 20x2048x512 6.9 against 9.2, 28x8192x128 6.5 against 8.3, 32x4096x1024 9.9 against 11.9;
/// ties at 24x3000x304 and 32x1024x64. From 9 to 16 rows the two were mixed (16x4096x512 7.9
/// against 7.6, 10x8192x128 6.4 against 7.3): kept on small-M; and a longer K on a narrow
/// weight keeps small-M ahead (48x128x4096 15.3 against 10.3). Unaligned operands keep their
/// own rules (packed from 33 rows only: [`packed_for_hopper`]).
/// `FERROTUNE_SMALL_M_ALIGNED_HOPPER=0` turns this rule off (A/B runs).
pub(super) fn aligned_short_k(g: &Gemm) -> bool {
    g.m > ALIGNED_SHORT_K_ABOVE_ROWS
        && g.k <= ALIGNED_SHORT_K_MAX
        && g.n > 0
        && !std::env::var("FERROTUNE_SMALL_M_ALIGNED_HOPPER").is_ok_and(|v| v == "0")
}

/// Rows of x above which [`aligned_short_k`] sends short K to the Hopper tiles.
pub const ALIGNED_SHORT_K_ABOVE_ROWS: usize = 16;

/// The longest K [`aligned_short_k`] sends to the Hopper tiles.
pub const ALIGNED_SHORT_K_MAX: usize = 1024;

/// Whether unaligned operands of `g` that small-M would read in place are packed instead, for
/// the Hopper tiles [`hopper_shape`] sends the call to by its short-K rule (33 to 64 rows, K
/// from [`HOPPER_SHORT_K_MIN`] to 1023, at least 1024 weight rows): where the pack pays
/// (`pack::pack_applies`) and the packed problem can take the Hopper path.
pub(super) fn packed_for_hopper(
    g: &Gemm,
    dtype: DType,
    out: DType,
    arch: &str,
    sm_count: u32,
    cfg: GemmConfig,
    ptrs: [u64; 2],
) -> bool {
    let short_k = g.m > HOPPER_SHORT_K_ABOVE_ROWS && g.k >= HOPPER_SHORT_K_MIN && g.k < 1024;
    short_k
        && hopper_rows(g)
        && g.n >= 1024
        && !std::env::var("FERROTUNE_SMALL_M_SHORT_K_HOPPER").is_ok_and(|v| v == "0")
        && crate::ops::pack::pack_applies(g, dtype, ptrs).is_some()
        && super::gemm_sm90::choose(
            &crate::ops::pack::packed_gemm(g, dtype, ptrs),
            dtype,
            out,
            arch,
            sm_count,
            cfg,
            [256, 256],
        )
        .is_ok()
}

/// Rows of x above which [`hopper_shape`] sends K below 1024 to the Hopper tiles too.
pub const HOPPER_SHORT_K_ABOVE_ROWS: usize = 32;

/// The least K [`hopper_shape`]'s packed short-K rule sends to the Hopper tiles above
/// [`HOPPER_SHORT_K_ABOVE_ROWS`] rows ([`packed_for_hopper`]): 48x6000x129 was measured there
/// (above); one k-tile of 64 (33x4096x64) ran faster on small-M on the H100
/// (bench/results/irregular/run1-0a84591/). Aligned operands of shorter K take the tiles by
/// [`aligned_short_k`] (on the H200 33x4096x64 ran 5.3 µs there against 6.4 on small-M).
pub const HOPPER_SHORT_K_MIN: usize = 128;

/// Weight elements (N x K) above which calls of 17 to 32 rows take the Hopper path
/// ([`hopper_rows`]): between the 2^24 of 4096 x 4096 (small-M ahead) and the 26.2 M of
/// 5120 x 5120 (Hopper ahead).
pub const HOPPER_WEIGHT_ABOVE_16_ROWS: usize = 3 << 23;

/// Weight elements (N x K) from which calls of 9 to 16 rows take the Hopper path
/// ([`hopper_rows`]): the streaming small-M kernel's own threshold (2^25). Its 16-row form (two
/// groups of 8 rows of x against each weight fragment) streamed 16x11008x4096 at 2.2 TB/s on
/// the H100 (41.7 µs, 0.90x cuBLAS: bench/results/bench-30e0f9aa3d5c/) and 2.0 TB/s on the
/// H200 (44.1 µs), the Hopper streaming tile 30.6 µs on the H200 (16x28672x4096 74.9 against
/// 94.5; 8 rows and weights below 2^25 stay small-M: 8x14336x4096 36.2 against 37.1,
/// 16x4096x4096 18.7 against 16.0; bench/results/longk-h200-a43a8dee8d05/run4-small-m/). Not
/// measured on an H100 (none was lent): there the Hopper tile streamed 64x11008x4096 at
/// 2.25 TB/s (irregular/run12-*), so the two should tie.
pub const HOPPER_WEIGHT_ABOVE_8_ROWS: usize = 1 << 25;
