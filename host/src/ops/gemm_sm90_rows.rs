//! The Hopper row split: a single large problem whose 128 x 256 output tiles fill one or two
//! whole waves of the SMs and at most a quarter of another (3072x3072: 288 tiles on 132 SMs,
//! 2 waves and 24 tiles) runs as two launches on the same stream — the rows whose tiles
//! fill the whole waves on the large tile (the head), then the remaining rows (the tail)
//! planned as a problem of their own, whose smaller tiles (or the streaming tile) spread over
//! every SM instead of leaving most of them idle for a whole tile's time. Only the plan's own
//! choice: a forced or tuned tile, a forced split, and batches run as one launch.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ferrotune_kernels::gemm_sm90::Sm90Variant;
use ferrotune_kernels::gemm_sm90_split::Sm90Split;

use crate::DType;
use crate::backend::Gpu;
use crate::config::{GemmConfig, GemmPath};
use crate::error::Result;
use crate::ops::gemm::Gemm;
use crate::ops::gemm_sm90;

/// A problem cut into a head of whole waves and a tail planned on its own.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowSplit {
    /// Rows of the head (whole tile rows of `head`).
    pub head_rows: usize,
    pub head: Sm90Variant,
    /// The tail's variant and K split, as `gemm_sm90::choose` picked them for its rows.
    pub tail: Sm90Variant,
    pub tail_split: Sm90Split,
}

/// The split applies when the last wave holds at most this fraction of the SMs (1/4) after at
/// most [`MAX_WHOLE_WAVES`] whole ones: the tail then costs a fraction of a wave of smaller
/// tiles instead of a wave of large ones, and that wave is a large share of the time. On the
/// H100 (bench/results/rows-n192-6e4f02207e62/) it paid there (3072x3072x4096 1.19x,
/// 1664x3072x1536 1.13x, 3000x3070x1536 1.04x) and not beyond (2560x4096x1024, 42% in the
/// last wave: 0.97x; 4096x4100x4096, 4 whole waves: 0.96x; 5120x5120x1024, 6: 1.00x).
const MAX_LAST_WAVE: (usize, usize) = (1, 4);
const MAX_WHOLE_WAVES: usize = 2;

/// The head and the tail as problems of their own (the tail's rows start at `head_rows`).
pub fn parts(g: &Gemm, head_rows: usize) -> (Gemm, Gemm) {
    (Gemm { m: head_rows, ..*g }, Gemm { m: g.m - head_rows, ..*g })
}

/// The row split of `g` on the unsplit Hopper variant `v` the plan chose, if it applies (see
/// the module), with the tail planned by `gemm_sm90::choose` at its own operand addresses;
/// `FERROTUNE_SM90_ROWS=0` turns it off.
#[allow(clippy::too_many_arguments)]
pub fn row_split(
    g: &Gemm,
    dtype: DType,
    out: DType,
    arch: &str,
    sm_count: u32,
    cfg: GemmConfig,
    v: Sm90Variant,
    [pa, pb]: [u64; 2],
) -> Option<RowSplit> {
    if std::env::var("FERROTUNE_SM90_ROWS").is_ok_and(|x| x == "0") {
        return None;
    }
    let own_choice = g.batch == 1
        && g.path.is_none()
        && g.split_k.is_none()
        && cfg.path == GemmPath::Auto
        && gemm_sm90::forced_tile(g, cfg.path).is_none();
    let t = v.tile();
    if !own_choice || (t.bm(), t.bn) != (128, 256) {
        return None;
    }
    let head_rows = head_rows(g.m, g.n, t.bm(), t.bn, sm_count as usize)?;
    let (_, tail) = parts(g, head_rows);
    let pa_tail = pa + (head_rows * g.lda * dtype.size_bytes()) as u64;
    let (tv, tsp) = gemm_sm90::choose(&tail, dtype, out, arch, sm_count, cfg, [pa_tail, pb]).ok()?;
    Some(RowSplit { head_rows, head: v, tail: tv, tail_split: tsp })
}

/// Rows of the head of an `m x n` output in `bm x bn` tiles on `sms` SMs: the most whole tile
/// rows whose tiles fit the whole waves, when there are 1 to [`MAX_WHOLE_WAVES`] whole waves,
/// the last wave is at most [`MAX_LAST_WAVE`] full, and rows remain for the tail.
pub fn head_rows(m: usize, n: usize, bm: usize, bn: usize, sms: usize) -> Option<usize> {
    let (tiles_m, tiles_n) = (m.div_ceil(bm), n.div_ceil(bn));
    let tiles = tiles_m * tiles_n;
    let (waves, last) = (tiles / sms.max(1), tiles % sms.max(1));
    let sparse = last > 0 && last * MAX_LAST_WAVE.1 <= sms * MAX_LAST_WAVE.0;
    // Fewer than all the tile rows: the head's tiles fit the whole waves, and `last` > 0 tiles
    // remain beyond them.
    let rows = waves * sms / tiles_n.max(1);
    ((1..=MAX_WHOLE_WAVES).contains(&waves) && sparse && rows > 0).then_some(rows * bm)
}

/// Why the plan split the rows, and what runs each part.
pub fn reason(g: &Gemm, r: &RowSplit, sm_count: u32) -> String {
    let t = r.head.tile();
    let tiles = g.m.div_ceil(t.bm()) * g.n.div_ceil(t.bn);
    let sms = sm_count.max(1) as usize;
    format!(
        "Hopper row split: {tiles} output tiles of {}x{} fill {} waves of {sms} SMs and {} more tiles ({}% of \
         another): rows 0..{} on {}, then rows {}..{} planned on their own: {}",
        t.bm(),
        t.bn,
        tiles / sms,
        tiles % sms,
        100 * (tiles % sms) / sms,
        r.head_rows,
        r.head.entry_name().as_str(),
        r.head_rows,
        g.m,
        tail_path(r)
    )
}

/// `sm90:<head entry>+rows<head rows>+sm90:<tail entry>[:splitk<s>]`.
pub fn path(r: &RowSplit) -> String {
    format!("sm90:{}+rows{}+{}", r.head.entry_name().as_str(), r.head_rows, tail_path(r))
}

fn tail_path(r: &RowSplit) -> String {
    let split = if r.tail_split.is_split() { format!(":splitk{}", r.tail_split.slices) } else { String::new() };
    format!("sm90:{}{split}", r.tail.entry_name().as_str())
}

/// Launches the head, then the tail, on `cs` (`ptrs` = a, b, c, d, bias of the whole problem).
///
/// # Safety
/// As `gemm_sm90::launch` for `g` and `ptrs`; `r` came from [`row_split`] for this call.
pub unsafe fn launch(cs: &Arc<CudaStream>, gpu: &Gpu, g: &Gemm, r: RowSplit, ptrs: [u64; 5]) -> Result<()> {
    let (in_bytes, out_bytes) = (r.head.dtype.size_bytes(), r.head.out_dtype().size_bytes());
    let (head, tail) = parts(g, r.head_rows);
    let [pa, pb, pc, pd, pbias] = ptrs;
    let (a_off, c_off) = ((r.head_rows * g.lda * in_bytes) as u64, (r.head_rows * g.ldc * out_bytes) as u64);
    // SAFETY: the head is the first `head_rows` rows of A, C and D at the same leading
    // dimensions, the tail the rest (A, C and D advanced by `head_rows` rows; B and the bias
    // are the whole problem's): both lie inside the operands the caller vouches for. C's
    // pointer is D's when there is no C (never read), so advancing it is harmless.
    unsafe {
        gemm_sm90::launch(cs, gpu, &head, r.head, Sm90Split::NONE, ptrs)?;
        gemm_sm90::launch(cs, gpu, &tail, r.tail, r.tail_split, [pa + a_off, pb, pc + c_off, pd + c_off, pbias])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On 132 SMs: 3072x3072 (288 tiles: 2 waves and 24) keeps 22 tile rows (264 tiles) in the
    /// head; a last wave over a quarter full, more than two whole waves, a single partial
    /// wave, or a whole number of waves does not split.
    #[test]
    fn head_rows_fill_whole_waves() {
        assert_eq!(head_rows(3072, 3072, 128, 256, 132), Some(22 * 128));
        // 1664x3072: 156 tiles (1 wave and 24): 11 of 13 rows of 12 tiles.
        assert_eq!(head_rows(1664, 3072, 128, 256, 132), Some(11 * 128));
        // 4096x2560: 320 tiles (2 waves and 56, 42%); 5120x5120: 800 (6 waves and 8).
        assert_eq!(head_rows(4096, 2560, 128, 256, 132), None);
        assert_eq!(head_rows(5120, 5120, 128, 256, 132), None);
        for (m, n) in [(4096, 4096), (8192, 8192), (2048, 2048), (1024, 1024), (8192, 3072), (128, 65536), (4096, 4100)]
        {
            assert_eq!(head_rows(m, n, 128, 256, 132), None, "{m}x{n}");
        }
        // The head's tiles never exceed the whole waves, and the tail keeps at least a row.
        for m in (128..6000).step_by(97) {
            for n in (256..9000).step_by(331) {
                if let Some(h) = head_rows(m, n, 128, 256, 132) {
                    let tiles = m.div_ceil(128) * n.div_ceil(256);
                    assert!(h % 128 == 0 && h < m && (h / 128) * n.div_ceil(256) <= tiles / 132 * 132, "{m}x{n}");
                }
            }
        }
    }

    /// The plan's own choice only: forced paths, splits and batches keep one launch.
    #[test]
    fn only_the_plans_own_choice_splits_rows() {
        if ["FERROTUNE_SM90_ROWS", "FERROTUNE_SM90_TILE", "FERROTUNE_SM90"].iter().any(|v| std::env::var(v).is_ok()) {
            return; // the variables override the rule under test
        }
        use crate::ops::gemm::Layout;
        // A C read: the one-tile 128 x 256 (a plain epilogue takes the persistent 128 x 192,
        // which fills these SMs better whole).
        let beta = crate::ops::gemm::Epilogue { beta: 1.0, ..crate::ops::gemm::Epilogue::PLAIN };
        let g = Gemm::new(3072, 3072, 1536).layouts(Layout::Row, Layout::Col).epilogue(beta).resolved();
        let cfg = GemmConfig::heuristic(g.m, g.n, g.k, g.batch);
        let (v, _) = gemm_sm90::choose(&g, DType::Bf16, DType::Bf16, "sm_90a", 132, cfg, [256, 256]).unwrap();
        let rs = |g: &Gemm, cfg| row_split(g, DType::Bf16, DType::Bf16, "sm_90a", 132, cfg, v, [256, 256]);
        let r = rs(&g, cfg).expect("3072x3072 splits");
        assert_eq!(r.head_rows, 2816);
        assert_eq!(r.tail.tile, gemm_sm90::STREAM_TILE, "256 rows: 96 streaming tiles, one wave");
        assert!(reason(&g, &r, 132).contains("2 waves of 132 SMs and 24 more tiles"), "{}", reason(&g, &r, 132));
        assert!(path(&r).starts_with("sm90:ft_gemm90_bf16_rc_bf16_128x256x64s4+rows2816+sm90:"), "{}", path(&r));
        assert_eq!(rs(&g.path(GemmPath::Sm90(8)), cfg), None);
        assert_eq!(rs(&g.split_k(1), cfg), None);
        assert_eq!(rs(&g.batched(2).resolved(), cfg), None);
        assert_eq!(rs(&g, GemmConfig { path: GemmPath::Sm90(8), ..cfg }), None);
        // The 128 x 192 tile runs whole.
        let n192 = Sm90Variant { tile: crate::ops::gemm_sm90_fill::N192_TILE, ..v };
        assert_eq!(row_split(&g, DType::Bf16, DType::Bf16, "sm_90a", 132, cfg, n192, [256, 256]), None);
        let (h, t) = parts(&g, 2816);
        assert_eq!((h.m, t.m, t.n, t.k, t.lda, t.ldc), (2816, 256, 3072, 1536, 1536, 3072));
    }
}
