//! The Hopper GEMM's TMA-store epilogue on the host: whether a call's D leaves through TMA
//! (`gemm_sm90::TMA_STORE`: the epilogue in registers, D written box by box by the copy engine)
//! and D's map, and the persistent tile that epilogue makes the fastest on large problems.

use ferrotune_kernels::elementwise::Activation;
use ferrotune_kernels::gemm_sm90::{self as k90, Sm90Variant};

use crate::DType;
use crate::ops::gemm::Gemm;
use crate::tma::TileMap;

/// The persistent cooperative 128 x 256 tile (four stages; the TMA store's two box buffers per
/// warpgroup beside its ring): the heuristic's tile for large 16-bit problems whose D the TMA
/// store writes. On the H100 (bench/results/hopper-tmastore-*/ab-quick.txt), bf16 ms against
/// the one-tile 128 x 256 with the same epilogue: 8192x3072x768 0.075 / 0.083, 4096³ 0.185 /
/// 0.194, 8192x8192x512 0.140 / 0.163, 8192³ 1.416 / 1.427; with the staged epilogue the
/// persistent tile lost everywhere (8192x3072x768 0.115 against 0.092).
pub const PERSIST_TILE: u8 = 8;

/// Whether `g`'s shape lets TMA store D on `tile` (D's base address is checked at launch,
/// [`store_map`]): no C read, a ping-pong tile only where its buffers fit
/// (`Sm90Tile::store_buffers`), every row of D whole 16-byte chunks of
/// `out_bytes` elements (N, the leading dimension and the batch stride: on the H100 a store
/// whose last chunk was partly past N wrote the whole chunk, an f32 D of N = 1 at ldc 4 got 4
/// elements, tests/gemm_sm90_tf32.rs on bc71ec3), and on the one-tile forms no GELU (their
/// staged epilogue's compact row loop ran it faster than the unrolled register epilogue:
/// linear_bias_gelu 8192x3072x768 0.109 ms against 0.118-0.124). `FERROTUNE_SM90_TMA_STORE=0`
/// turns the TMA store off.
pub fn stores_d(g: &Gemm, tile: u8, out_bytes: usize) -> bool {
    let Some(t) = k90::TILES.get(tile as usize) else { return false };
    let off = std::env::var("FERROTUNE_SM90_TMA_STORE").is_ok_and(|x| x == "0");
    let gelu = matches!(g.epilogue.act, Activation::GeluErf | Activation::GeluTanh);
    let whole = |elems: usize| (elems * out_bytes).is_multiple_of(16);
    !off && (!t.pingpong() || t.store_buffers())
        && g.epilogue.flags() & 8 == 0
        && (t.persistent || !gelu)
        && whole(g.n)
        && whole(g.ldc)
        && (g.batch == 1 || whole(g.stride_c))
}

/// Whether the heuristic should run a large problem on [`PERSIST_TILE`]: the tile is compiled
/// for the inputs (16-bit, or f32 on TF32) and the TMA store applies. GELU included since the
/// lean epilogue (stmatrix, per-warp boxes): linear_bias_gelu 8192x3072x768 bf16 ran 0.1050 to
/// 0.1077 ms on it against 0.1084 to 0.1110 on the one-tile form's staged epilogue, and the
/// tanh form 0.0994 to 0.1017 against 0.1044 to 0.1238, in three calls
/// (bench/results/epilogue-4835b34f9b92/, warpbox-7b23a44c7ed7/; before it, 0.113 against 0.109).
pub fn persists(g: &Gemm, dtype: DType, out: DType) -> bool {
    let compiled = dtype != DType::F32 || k90::TF32_TILES.contains(&PERSIST_TILE);
    compiled && stores_d(g, PERSIST_TILE, out.size_bytes())
}

/// The ping-pong 64 x 256 tile (tile 4): two consumer warpgroups on alternate tiles, so one's
/// epilogue runs beside the other's main loop.
pub const PINGPONG_TILE: u8 = 4;

/// Longest K for which [`pingpong_gelu`] takes [`PINGPONG_TILE`]: past it the main loop is long
/// enough that the cooperative 128 x 256 tile's epilogue weighs little.
pub const PINGPONG_GELU_MAX_K: usize = 1024;

/// Whether a large 16-bit problem that [`persists`] should run on [`PINGPONG_TILE`] instead: a
/// tanh GELU epilogue and K of at most [`PINGPONG_GELU_MAX_K`]. There the cooperative tile's
/// tensor cores wait through a long epilogue after a short main loop; the ping-pong tile hides
/// it behind the other warpgroup's main loop. H100, bf16, against the persistent 128 x 256 in
/// the same call (bench/results/gelu-ahead-2382fd421cb6/2-bias-ahead-h100/): K 768-1024 6-8%
/// faster (8192x3072x768 0.0808 against 0.0861 ms, cuBLASLt's GELU_BIAS 0.0767), K 1536 and
/// 4096 2-10% slower. The erf form (more instructions an element) was within 2% either way.
pub fn pingpong_gelu(g: &Gemm, dtype: DType, out: DType) -> bool {
    dtype != DType::F32
        && g.epilogue.act == Activation::GeluTanh
        && g.k <= PINGPONG_GELU_MAX_K
        && stores_d(g, PINGPONG_TILE, out.size_bytes())
}

/// D's map for the TMA-store epilogue of variant `v` at `pd`, or `None` where it does not
/// apply ([`stores_d`], or a base address TMA cannot take): the kernel then runs the staged
/// epilogue of coalesced stores.
pub fn store_map(g: &Gemm, v: Sm90Variant, pd: u64) -> Option<TileMap> {
    let out = v.out_dtype();
    if !stores_d(g, v.tile, out.size_bytes()) {
        return None;
    }
    let m = TileMap {
        dtype: out,
        base: pd,
        rows: g.m,
        cols: g.n,
        ld: g.ldc,
        batch: g.batch,
        stride: g.stride_c,
        box_rows: v.tile().store_box_rows() as u32,
        box_cols: k90::store_box_cols(out.size_bytes(), v.tile().bn) as u32,
    };
    m.validate().is_ok().then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::gemm::{Epilogue, Layout};

    fn rc(m: usize, n: usize, k: usize) -> Gemm {
        Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).resolved()
    }

    /// D goes through TMA only where TMA can describe it as whole 16-byte chunks, never with a C
    /// read or on a ping-pong tile without room for its buffers, and with GELU only on the persistent forms; its boxes are
    /// one warpgroup's rows (one warp's on the persistent cooperative form) by 128 bytes.
    #[test]
    fn tma_store_only_where_d_is_describable() {
        if std::env::var("FERROTUNE_SM90_TMA_STORE").is_ok() {
            return; // the variable overrides the rule under test
        }
        let v = |tile: u8, out_f32: bool| Sm90Variant { dtype: DType::Bf16, out_f32, tile };
        let g = rc(100, 264, 64);
        let m = store_map(&g, v(0, false), 0x10000).expect("aligned D");
        assert_eq!((m.rows, m.cols, m.ld, m.box_rows, m.box_cols), (100, 264, 264, 64, 64));
        assert_eq!(store_map(&g, v(0, true), 0x10000).map(|m| (m.dtype, m.box_cols)), Some((DType::F32, 32)));
        assert!(store_map(&g, v(0, false), 0x10008).is_none(), "base not 16-byte aligned");
        assert!(store_map(&rc(100, 257, 64), v(0, false), 0x10000).is_none(), "row of 514 bytes");
        assert!(store_map(&rc(100, 260, 64), v(0, true), 0x10000).is_some(), "row of 1040 bytes");
        let mut padded = rc(100, 260, 64);
        padded.ldc = 264;
        assert!(store_map(&padded, v(0, false), 0x10000).is_none(), "N of 520 bytes, a partial chunk");
        padded.ldc = 4;
        assert!(store_map(&Gemm { n: 1, ..padded }, v(0, true), 0x10000).is_none(), "N = 1 f32 at ldc 4");
        assert!(store_map(&Gemm { n: 4, ..padded }, v(0, true), 0x10000).is_some(), "N = 4 f32 at ldc 4");
        let p = store_map(&g, v(8, false), 0x10000).expect("persistent cooperative tile");
        assert_eq!((p.box_rows, p.box_cols), (16, 64), "one warp's rows");
        let pp = store_map(&g, v(4, false), 0x10000).expect("ping-pong tile with room for the buffers");
        assert_eq!((pp.box_rows, pp.box_cols), (16, 64), "one warp's rows");
        assert!(store_map(&g, v(7, false), 0x10000).is_none(), "ping-pong tile without room for the buffers");
        // The one-tile 128 x 160 (tile 19): 16-bit D in boxes of 32 columns (64-byte rows) of a
        // 64-row slab; f32 keeps 128-byte rows, 32 columns too.
        let n160 = store_map(&g, v(19, false), 0x10000).expect("one-tile 128 x 160");
        assert_eq!((n160.box_rows, n160.box_cols), (64, 32), "64-byte rows");
        assert_eq!(store_map(&g, v(19, true), 0x10000).map(|m| m.box_cols), Some(32));
        let beta = Epilogue { beta: 0.5, ..Epilogue::PLAIN };
        assert!(store_map(&g.epilogue(beta), v(0, false), 0x10000).is_none(), "C read");
        let gelu = Epilogue { bias: true, act: Activation::GeluTanh, ..Epilogue::PLAIN };
        assert!(store_map(&g.epilogue(gelu), v(1, false), 0x10000).is_none(), "GELU on a one-tile form");
        assert!(store_map(&g.epilogue(gelu), v(8, false), 0x10000).is_some(), "GELU on the persistent form");
        let relu = Epilogue { bias: true, act: Activation::Relu, ..Epilogue::PLAIN };
        assert!(store_map(&g.epilogue(relu), v(1, false), 0x10000).is_some(), "bias + ReLU in registers");
        let mut batch = rc(100, 264, 64).batched(3).resolved();
        batch.stride_c = 100 * 264 + 4;
        assert!(store_map(&batch, v(0, false), 0x10000).is_none(), "batch stride of 8 bytes past a chunk");
        batch.stride_c = 100 * 264 + 8;
        assert!(store_map(&batch, v(0, false), 0x10000).is_some(), "batch stride of whole chunks");
    }
}
