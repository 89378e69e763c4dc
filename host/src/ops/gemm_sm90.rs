//! The Hopper GEMM family on the host: whether a call can take it (sm_90a module, f16/bf16 or
//! f32 with TF32 math allowed, `rc` layout, operands TMA can describe) and why not, its tile and split-K choice (the
//! long-K, few-tile rules live in `gemm_sm90_class`), and the launch (the tensor maps of A, B and, for the
//! TMA-store epilogue, D encoded per call and passed by value; the split's workspace from the
//! stream's cache).

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use ferrotune_kernels::gemm_sm90::{self as k90, Sm90Variant};
use ferrotune_kernels::gemm_sm90_split::Sm90Split;

use crate::DType;
use crate::backend::Gpu;
use crate::cluster::{self, ClusterArgs};
use crate::config::{GemmConfig, GemmPath};
use crate::error::{DriverContext, Error, Result};
use crate::ops::gemm::{Gemm, Layout};
pub use crate::ops::gemm_sm90_class::{
    MIN_KT_PER_SLICE, SMALL_M_TILE, SPLIT_TILE, STREAM_C2_TILE, STREAM_C4_TILE, STREAM_SPLIT_MN, STREAM_TILE,
    is_streaming, mid_class, split_fill, split_for, split_reason, split_shape, split_tile, stream_tiles, streams,
    tuned_split,
};
use crate::ops::gemm_sm90_fill::{
    N160_TILE, N192_TILE, NARROW_TILE, n160_fills_as_fast, n160_no_more_tiles_than_n192, n192_fills_better, narrow_n,
    wave_fill, waves,
};
use crate::ops::gemm_sm90_store as store;
use crate::tma::{TensorMap, TileMap};

const OP: &str = "gemm";

impl Gemm {
    /// Forces a kernel family: `GemmPath::Mma` (the `mma.sync` tiles), `GemmPath::Sm90(t)`
    /// (Hopper tile `t`: an `InvalidConfig` error where the call cannot take it), or `Auto`.
    pub fn path(mut self, p: GemmPath) -> Gemm {
        self.path = Some(p);
        self
    }
}

/// The Hopper variant for this call and its split of K, or why the call cannot take the
/// Hopper path (the caller then runs the `mma.sync` tiles). `arch` is the loaded PTX module's architecture; the tile
/// comes from the call's forced path, else `FERROTUNE_SM90_TILE`, else the chosen config's
/// path (a tuned profile's), else the heuristic.
pub fn choose(
    g: &Gemm,
    dtype: DType,
    out: DType,
    arch: &str,
    sm_count: u32,
    cfg: GemmConfig,
    [pa, pb]: [u64; 2],
) -> std::result::Result<(Sm90Variant, Sm90Split), String> {
    if std::env::var("FERROTUNE_SM90").is_ok_and(|v| v == "0") {
        return Err("FERROTUNE_SM90=0 turns the Hopper path off".into());
    }
    let path = g.path.unwrap_or(cfg.path);
    if let GemmPath::Sm90(t) = path
        && t as usize >= k90::TILES.len()
    {
        return Err(format!("Hopper tile {t} is not compiled (0..{})", k90::TILES.len()));
    }
    if path == GemmPath::SmallM {
        return Err("the chosen config asks for the small-M family".into());
    }
    if path == GemmPath::Mma {
        let by = if g.path.is_some() { "the call" } else { "the chosen config (a tuned profile)" };
        return Err(format!("{by} asks for the mma.sync tiles"));
    }
    if arch != "sm_90a" {
        return Err(format!("the loaded PTX is {arch}; the wgmma kernels need sm_90a (compute capability 9.0)"));
    }
    if dtype == DType::F32 && !g.precision.uses_tf32() {
        return Err("exact f32 (Precision::Strict or FERROTUNE_ALLOW_TF32=0) runs on FFMA: wgmma rounds f32 \
                    inputs to TF32"
            .into());
    }
    if (g.a_layout, g.b_layout) != (Layout::Row, Layout::Col) {
        return Err(format!(
            "layout {}{}: the wgmma kernels take A row-major and B column-major (x·wᵀ, `rc`) only",
            g.a_layout.code(),
            g.b_layout.code()
        ));
    }
    if g.tile.is_some() {
        return Err("a tile of the mma.sync kernels is forced".into());
    }
    let forced = forced_tile(g, path);
    let st = split_tile(g, sm_count, forced);
    let split = match (tuned_split(g, cfg), st) {
        // The tuned config's split on its tile (`validate` checked that the tile splits).
        (Some(s), Some(t)) if forced.is_some() => {
            Sm90Split::new(g.k.div_ceil(k90::TILES[t as usize].bk(dtype.size_bytes())), s)
        }
        (Some(s), _) => return Err(format!("split_k {s}: the Hopper tile {forced:?} does not split K")),
        (None, st) => st.map_or(Sm90Split::NONE, |t| split_for(g, sm_count, t, dtype)),
    };
    let tile = match st {
        Some(t) if split.is_split() => t,
        _ => tile_for(g, sm_count, path, dtype, out),
    };
    let v = Sm90Variant { dtype, out_f32: out == DType::F32 && dtype != DType::F32, tile };
    if v.out_dtype() != out {
        return Err(format!("output {} for {} inputs", out.name(), dtype.name()));
    }
    if !v.is_compiled() {
        return Err(format!("Hopper tile {tile} is not compiled for tf32 (tiles {:?} are)", k90::TF32_TILES));
    }
    let (ma, mb) = maps(g, v, pa, pb);
    ma.validate().map_err(|e| format!("TMA cannot load A: {e}"))?;
    mb.validate().map_err(|e| format!("TMA cannot load B: {e}"))?;
    let tiles = g.m.div_ceil(v.tile().bm()) * g.n.div_ceil(v.tile().bn);
    if tiles > i32::MAX as usize || g.batch > 65_535 {
        return Err(format!("{tiles} tiles x batch {} exceed the grid", g.batch));
    }
    Ok((v, split))
}

/// The tile: forced (the call's path, `FERROTUNE_SM90_TILE`) or tuned (the config's path), else
/// the 128 x 128 tile in the compute-bound part of the streaming class ([`mid_class`]), the
/// streaming tile in the rest of it ([`streams`]), the 128 x 128 tile for N <= 128
/// ([`narrow_n`]), else from the H100 sweep of every tile (bench/results/hopper-run3/sweep-tile*.txt):
/// 128 x 256 one block per tile whenever it gives at least half a wave of blocks (fastest on
/// 8192³, 4096³, 2048³ and 8192x3072x768), else 128 x 128 (twice the blocks; fastest on
/// 512x3072x768). Of those large problems, the ones whose D the TMA-store epilogue can write
/// take the persistent 128 x 256 tile instead ([`store::PERSIST_TILE`]); with
/// the staged epilogue the persistent tiles lost everywhere. The ping-pong tiles lost to tile
/// 0 on every shape but 512x3072x768 (bench/results/hopper-run5/sweep-tile*.txt): tuner points.
fn tile_for(g: &Gemm, sm_count: u32, path: GemmPath, dtype: DType, out: DType) -> u8 {
    if let Some(t) = forced_tile(g, path) {
        return t;
    }
    if mid_class(g, sm_count) {
        return SPLIT_TILE;
    }
    if streams(g, sm_count) {
        return STREAM_TILE;
    }
    if narrow_n(g) {
        return NARROW_TILE;
    }
    let big = k90::TILES[0];
    let tiles = g.m.div_ceil(big.bm()) * g.n.div_ceil(big.bn) * g.batch;
    if 2 * tiles < sm_count.max(1) as usize {
        return 1;
    }
    let persists = store::persists(g, dtype, out);
    if persists && store::pingpong_gelu(g, dtype, out) {
        return store::PINGPONG_TILE;
    }
    let wide = match (persists, n192_fills_better(g, dtype, sm_count)) {
        (false, _) => 0,
        (true, true) => N192_TILE,
        (true, false) => store::PERSIST_TILE,
    };
    // The persistent 128 x 192 keeps problems where the 128 x 160 would run more tiles.
    let keeps = wide == N192_TILE && !n160_no_more_tiles_than_n192(g);
    if !keeps && n160_fills_as_fast(g, dtype, sm_count) { N160_TILE } else { wide }
}

/// Why the heuristic took `tile` (unsplit) for `g`, for the plan's reason: the streaming class
/// and the persistent tile say so, and whether D leaves through TMA; the large-tile rule adds
/// nothing.
pub fn tile_reason(g: &Gemm, tile: u8, path: GemmPath, sm_count: u32, out: DType) -> String {
    let by_tma = if store::stores_d(g, tile, out.size_bytes()) {
        "; D stored by TMA (where its base is 16-byte aligned)"
    } else {
        ""
    };
    if forced_tile(g, path).is_some() {
        return by_tma.to_string();
    }
    if tile == store::PERSIST_TILE {
        return format!(
            "; persistent 128x256 tile with the TMA-store epilogue (no C read, rows of D whole 16-byte chunks){by_tma}"
        );
    }
    if tile == store::PINGPONG_TILE {
        return format!(
            "; ping-pong 64x256 tile (one warpgroup's tanh-GELU epilogue beside the other's main loop; K <= {}){by_tma}",
            store::PINGPONG_GELU_MAX_K
        );
    }
    if tile == N192_TILE {
        return format!(
            "; persistent 128x192 tile with the TMA-store epilogue: its tiles fill {:.0}% of {sm_count} SMs' tile \
             slots over their waves, 128x256 tiles {:.0}%{by_tma}",
            100.0 * wave_fill(g, 128, 192, sm_count),
            100.0 * wave_fill(g, 128, 256, sm_count)
        );
    }
    if tile == N160_TILE {
        return format!(
            "; one-tile 128x160 tile: its {} tiles take {} wave(s) of {sm_count} SMs, as the 128x256's {} do{by_tma}",
            g.m.div_ceil(128) * g.n.div_ceil(160) * g.batch,
            waves(g, 128, 160, sm_count),
            g.m.div_ceil(128) * g.n.div_ceil(256) * g.batch
        );
    }
    if tile == NARROW_TILE && narrow_n(g) && !streams(g, sm_count) && !mid_class(g, sm_count) {
        return format!(
            "; 128x128 tile, six stages: N = {} fits one column of 128-wide tiles (a 128x256 tile would load B rows \
             that are not there){by_tma}",
            g.n
        );
    }
    if tile != STREAM_TILE {
        return by_tma.to_string();
    }
    let t = k90::TILES[STREAM_TILE as usize];
    format!(
        "; streaming tile {}x{}, {} stages, one block per SM: its {} tiles fit one wave of {sm_count} SMs{by_tma}",
        t.bm(),
        t.bn,
        t.stages,
        stream_tiles(g)
    )
}

/// The tile the call's forced path, else `FERROTUNE_SM90_TILE`, else the chosen config's
/// (tuned) path names, if any.
pub(crate) fn forced_tile(g: &Gemm, path: GemmPath) -> Option<u8> {
    let forced = g.path.and_then(|p| if let GemmPath::Sm90(t) = p { Some(t) } else { None });
    let env = std::env::var("FERROTUNE_SM90_TILE").ok().and_then(|v| v.parse::<u8>().ok());
    let tuned = if let GemmPath::Sm90(t) = path { Some(t) } else { None };
    forced.or(env).or(tuned).filter(|&t| (t as usize) < k90::TILES.len())
}

/// The maps of A (M x K row-major) and B (N x K row-major, i.e. K x N column-major).
fn maps(g: &Gemm, v: Sm90Variant, pa: u64, pb: u64) -> (TileMap, TileMap) {
    let t = v.tile();
    let bk = t.bk(v.dtype.size_bytes()) as u32;
    let a = TileMap {
        dtype: v.dtype,
        base: pa,
        rows: g.m,
        cols: g.k,
        ld: g.lda,
        batch: g.batch,
        stride: g.stride_a,
        box_rows: t.bm() as u32,
        box_cols: bk,
    };
    // In a cluster each block loads (and multicasts) its share of the B tile.
    let b = TileMap { base: pb, rows: g.n, ld: g.ldb, stride: g.stride_b, box_rows: t.b_box_rows() as u32, ..a };
    (a, b)
}

/// Launches `v` (with `split` of K) on `ptrs` = (a, b, c, d, bias).
///
/// # Safety
/// The pointers cover their (batch of) matrices as `g` describes them (as `check` proves for
/// a call's views) and stay alive until the launch completes; `v` and `split` came from
/// [`choose`] for this call.
pub unsafe fn launch(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    g: &Gemm,
    v: Sm90Variant,
    split: Sm90Split,
    ptrs: [u64; 5],
) -> Result<()> {
    let name = v.entry_name();
    let t = v.tile();
    let tiles = (g.m.div_ceil(t.bm()) * g.n.div_ceil(t.bn)) as u32;
    let ktiles = g.k.div_ceil(t.bk(v.dtype.size_bytes()));
    if split.is_split()
        && (!t.splits_k()
            || g.batch != 1
            || split.slices > ferrotune_kernels::gemm_sm90_split::MAX_SLICES
            || split.range(split.slices - 1, ktiles).0 >= ktiles)
    {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!("{split:?} of {ktiles} k-tiles on {} (batch {})", name.as_str(), g.batch),
        });
    }
    // The split's workspace: counters (left at zero by every launch), then the partials.
    if split.is_split() {
        let bytes = split.workspace_bytes(tiles as usize, t.bm() * t.bn);
        let counters = 4 * split.counter_words(tiles as usize);
        let slot = crate::workspace::Slot::Sm90Split;
        // SAFETY: as this function's; the workspace is the split's, counters zeroed.
        return crate::workspace::with_counters(gpu, cs, slot, bytes, counters, |ws| unsafe {
            launch_on(cs, gpu, g, v, split, ptrs, ws)
        });
    }
    // SAFETY: as this function's; no split, so no workspace.
    unsafe { launch_on(cs, gpu, g, v, split, ptrs, 0) }
}

/// [`k90::MAP_PREFETCH`] unless `FERROTUNE_SM90_PREFETCH=0` (read once per process).
fn map_prefetch() -> u32 {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let on = *ON.get_or_init(|| std::env::var("FERROTUNE_SM90_PREFETCH").map_or(true, |v| v != "0"));
    if on { k90::MAP_PREFETCH } else { 0 }
}

/// [`launch`] with the split's workspace at `ws` (counters at zero; 0 without a split).
///
/// # Safety
/// As [`launch`]; with a split, `ws` holds `split.workspace_bytes` bytes, counters zero.
unsafe fn launch_on(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    g: &Gemm,
    v: Sm90Variant,
    split: Sm90Split,
    ptrs: [u64; 5],
    ws: u64,
) -> Result<()> {
    let [pa, pb, pc, pd, pbias] = ptrs;
    let name = v.entry_name();
    let t = v.tile();
    let tiles = (g.m.div_ceil(t.bm()) * g.n.div_ceil(t.bn)) as u32;
    let (slices, kt_per) = (split.slices as u32, split.kt_per.min(u32::MAX as usize) as u32);
    let smem = t.smem_bytes() as u32;
    if smem > gpu.info.shared_mem_per_block_optin {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!(
                "{} needs {smem} bytes of shared memory, the device allows {}",
                name.as_str(),
                gpu.info.shared_mem_per_block_optin
            ),
        });
    }
    let (ma, mb) = maps(g, v, pa, pb);
    let enc = |m: TileMap, what: &str| {
        m.encode().map_err(|e| Error::InvalidConfig { op: OP, why: format!("tensor map of {what}: {e}") })
    };
    let (map_a, map_b) = (enc(ma, "A")?, enc(mb, "B")?);
    let map_d = store::store_map(g, v, pd).map(|m| enc(m, "D")).transpose()?;
    let kernel = gpu.kernels()?.function_with_smem(name.as_str(), smem)?;
    if t.threads() > kernel.max_threads {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!("{} allows {} threads per block, needs {}", name.as_str(), kernel.max_threads, t.threads()),
        });
    }
    // Persistent: one block per SM at most, walking every tile of every batch matrix; in
    // clusters, one cluster per pair of vertically adjacent tiles (one-tile form) or as many
    // clusters as the GPU holds at once (persistent).
    let cl = t.cluster as u32;
    let units = (g.m.div_ceil(t.bm()).div_ceil(t.cluster) * g.n.div_ceil(t.bn)) as u32;
    let block = (t.threads(), 1, 1);
    let grid = match (t.persistent, cl) {
        (true, 1) => (persistent_blocks(tiles as u64 * g.batch as u64, gpu.info.sm_count), 1, 1),
        (true, _) => {
            let probe = LaunchConfig { grid_dim: (cl, 1, 1), block_dim: block, shared_mem_bytes: smem };
            let fit = cluster::max_active_clusters_cached(cs, &kernel.func, probe, cl)
                .ctx(|| format!("querying the clusters of {} the device holds", name.as_str()))?;
            if fit == 0 {
                return Err(Error::InvalidConfig {
                    op: OP,
                    why: format!("no cluster of {cl} blocks of {} ({smem} bytes of shared memory) fits", name.as_str()),
                });
            }
            let want = persistent_blocks(units as u64 * g.batch as u64 * cl as u64, fit * cl);
            ((want / cl).max(1) * cl, 1, 1)
        }
        (false, _) => (units * cl, slices, g.batch as u32),
    };
    let cfg = LaunchConfig { grid_dim: grid, block_dim: block, shared_mem_bytes: smem };
    // m, n, k, ldc, batch: the entry's five u32 parameters.
    let dims = [g.m, g.n, g.k, g.ldc, g.batch].map(|x| x as u32);
    let stride_c = g.stride_c as u64;
    let e = g.epilogue;
    let flags = e.flags() | if map_d.is_some() { k90::TMA_STORE } else { 0 } | map_prefetch();
    // Without the TMA store the kernel never reads the third map.
    let map_d = map_d.unwrap_or(TensorMap { opaque: [0; 16] });
    let what = || format!("launching {} ({}x{}x{}, batch {})", name.as_str(), g.m, g.n, g.k, g.batch);
    if cl > 1 {
        let mut args = ClusterArgs::new();
        args.arg(&map_a).arg(&map_b).arg(&map_d).arg(&pc).arg(&pd).arg(&pbias);
        for x in &dims {
            args.arg(x);
        }
        args.arg(&stride_c).arg(&e.alpha).arg(&e.beta).arg(&flags).arg(&ws).arg(&slices).arg(&kt_per);
        // SAFETY: as the builder's launch below (the same arguments); the grid's x is a
        // multiple of the cluster, whose blocks walk the same tile pairs (`raster_cluster`),
        // and B's map boxes are the tile's share (`b_box_rows`).
        unsafe { cluster::launch(cs, &kernel.func, cfg, cl, &mut args) }.ctx(what)?;
        return Ok(());
    }
    let mut lb = cs.launch_builder(&kernel.func);
    lb.arg(&map_a).arg(&map_b).arg(&map_d).arg(&pc).arg(&pd).arg(&pbias);
    for x in &dims {
        lb.arg(x);
    }
    lb.arg(&stride_c).arg(&e.alpha).arg(&e.beta).arg(&flags).arg(&ws).arg(&slices).arg(&kt_per);
    // SAFETY: the arguments match `sm90_entry!` in kernels-gpu/src/entry/gemm_sm90.rs (three
    // 128-byte maps by value, 3 pointers, 5 u32, 1 u64, 2 f32, 1 u32, 1 pointer, 2 u32); the
    // maps describe A and B as the kernel loads them (boxes of the tile) and, with
    // `TMA_STORE` in the flags, D as the epilogue stores it (no C read then); the caller vouches
    // for the pointers; block size and shared memory are the tile's; a split runs one-tile
    // blocks of a single matrix, one per (tile, slice), every slice non-empty, on a workspace
    // of the size `gemm_sm90_split` lays out, its counters at zero.
    unsafe { lb.launch(cfg) }.ctx(what)?;
    Ok(())
}

/// Blocks of a persistent launch: one per SM at most, no more than the tiles, and no more than
/// `FERROTUNE_SM90_MAX_BLOCKS` where set (tests and the sanitizer runs use it to make every
/// block walk several tiles, so the ping-pong hand-over runs on small problems too).
fn persistent_blocks(tiles: u64, sm_count: u32) -> u32 {
    let cap = std::env::var("FERROTUNE_SM90_MAX_BLOCKS").ok().and_then(|v| v.parse::<u64>().ok()).filter(|&c| c > 0);
    tiles.min(sm_count.max(1) as u64).min(cap.unwrap_or(u64::MAX)).max(1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    const BF: DType = DType::Bf16;

    fn rc(m: usize, n: usize, k: usize) -> Gemm {
        Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).resolved()
    }

    /// Large problems take the persistent tile where the TMA store writes D (16-bit or TF32
    /// inputs, no C read, D rows whole 16-byte chunks; GELU included), else the one-tile
    /// 128 x 256; fewer tiles than half a wave take 128 x 128.
    #[test]
    fn large_tile_rule() {
        if std::env::var("FERROTUNE_SM90_TMA_STORE").is_ok() || std::env::var("FERROTUNE_SM90_TILE").is_ok() {
            return; // the variables override the rules under test
        }
        use crate::ops::gemm::Epilogue;
        use ferrotune_kernels::elementwise::Activation;
        let t = |g: &Gemm, dt: DType, out: DType| tile_for(g, 132, GemmPath::Auto, dt, out);
        for g in [rc(8192, 3072, 768), rc(4096, 4096, 4096), rc(8192, 8192, 512), rc(2048, 2048, 2048)] {
            assert_eq!(t(&g, BF, BF), store::PERSIST_TILE, "{g:?}");
            assert_eq!(t(&g, DType::F16, DType::F32), store::PERSIST_TILE, "{g:?}");
            assert_eq!(t(&g, DType::F32, DType::F32), store::PERSIST_TILE, "TF32: {g:?}");
            let beta = Epilogue { beta: 1.0, ..Epilogue::PLAIN };
            assert_eq!(t(&g.epilogue(beta), BF, BF), 0, "C read: {g:?}");
            let gelu = Epilogue { bias: true, act: Activation::GeluErf, ..Epilogue::PLAIN };
            assert_eq!(t(&g.epilogue(gelu), BF, BF), store::PERSIST_TILE, "GELU: {g:?}");
            // The tanh GELU on the ping-pong tile up to K = 1024 (16-bit only).
            let tanh = Epilogue { bias: true, act: Activation::GeluTanh, ..Epilogue::PLAIN };
            let want = if g.k <= store::PINGPONG_GELU_MAX_K { store::PINGPONG_TILE } else { store::PERSIST_TILE };
            assert_eq!(t(&g.epilogue(tanh), BF, BF), want, "tanh GELU: {g:?}");
            assert_eq!(t(&g.epilogue(tanh), DType::F32, DType::F32), store::PERSIST_TILE, "TF32 tanh GELU: {g:?}");
            let relu = Epilogue { bias: true, act: Activation::Relu, ..Epilogue::PLAIN };
            assert_eq!(t(&g.epilogue(relu), BF, BF), store::PERSIST_TILE, "bias + ReLU: {g:?}");
            let reason = tile_reason(&g, store::PERSIST_TILE, GemmPath::Auto, 132, BF);
            assert!(reason.contains("persistent 128x256") && reason.contains("TMA"), "{reason}");
        }
        // The persistent 128 x 192 where its tiles fill the SMs better (3072x3072: 384 tiles of
        // 128 x 192 in 3 waves of 132, against 288 of 128 x 256 in 2.2): 16-bit only.
        let g = rc(3072, 3072, 1536);
        assert_eq!((t(&g, BF, BF), t(&g, DType::F32, DType::F32)), (N192_TILE, store::PERSIST_TILE));
        // ... unless the one-tile 128 x 160 takes no more waves than 128 x 256 (6000x600: 188
        // tiles against 141, two waves; 11000x480: 258 against 172) with no more tiles than
        // the 128 x 192 (both 188, 258; 1664x3072: 260 against 208 keeps the 128 x 192), and
        // ahead of the row split (with a C read 1664x3072 is one whole wave of one-tile
        // 128 x 256 and 24 more, 1664x3072: 260 tiles of 128 x 160 in two).
        for g in [rc(6000, 600, 4096), rc(11000, 480, 1536), rc(9000, 304, 2048).batched(2)] {
            assert_eq!(t(&g, BF, BF), N160_TILE, "{g:?}");
            assert_eq!(t(&g, DType::F32, DType::F32), store::PERSIST_TILE, "TF32: {g:?}");
        }
        for g in [rc(1664, 3072, 1536), rc(1100, 2048, 264), rc(3072, 768, 3072)] {
            assert_eq!(t(&g, BF, BF), N192_TILE, "{g:?}");
        }
        let c_read = Epilogue { beta: 0.5, ..Epilogue::PLAIN };
        assert_eq!(t(&rc(1664, 3072, 200).epilogue(c_read), BF, BF), N160_TILE);
        assert_eq!(t(&rc(3072, 3072, 72).epilogue(c_read), BF, BF), 0);
        let tanh = Epilogue { bias: true, act: Activation::GeluTanh, ..Epilogue::PLAIN };
        let why = tile_reason(&rc(8192, 3072, 768).epilogue(tanh), store::PINGPONG_TILE, GemmPath::Auto, 132, BF);
        assert!(why.contains("ping-pong 64x256") && why.contains("TMA"), "{why}");
        // A ragged D row (not whole 16-byte chunks) keeps the one-tile form.
        assert_eq!(t(&rc(4096, 4100, 768).epilogue(tanh), BF, BF), 0);
        let why = tile_reason(&rc(3072, 3072, 1536), N192_TILE, GemmPath::Auto, 132, BF);
        assert!(why.contains("fill 97% of 132 SMs' tile slots over their waves, 128x256 tiles 73%"), "{why}");
        for g in [rc(5120, 5120, 1024), rc(4096, 2560, 2048), rc(6144, 4096, 1024), rc(8192, 8192, 8192)] {
            assert_eq!(t(&g, BF, BF), store::PERSIST_TILE, "{g:?}");
        }
        // N at most 128 outside the streaming class: the 128 x 128 tile, any input type.
        for g in [rc(16_384, 64, 8192), rc(10_000, 120, 5120), rc(65_536, 32, 1024)] {
            assert_eq!(t(&g, BF, BF), NARROW_TILE, "{g:?}");
            assert_eq!(t(&g, DType::F32, DType::F32), NARROW_TILE, "TF32: {g:?}");
            assert!(tile_reason(&g, NARROW_TILE, GemmPath::Auto, 132, BF).contains("fits one column"), "{g:?}");
        }
        assert_eq!(t(&rc(8192, 128, 8192), BF, BF), STREAM_TILE);
        // D rows that are not whole 16-byte chunks: the one-tile form and its staged epilogue.
        assert_eq!(t(&rc(4096, 4100, 4096), BF, BF), 0);
        assert_eq!(t(&rc(512, 3072, 768), BF, BF), 1);
        // ... the one-tile 128 x 160 where its grid takes no more waves (N = 300: 600-byte rows,
        // 80 tiles either way; a C read on 8000 x 620: 252 tiles against 189, two waves each);
        // TF32 (1200-byte rows, whole chunks) persists.
        let beta = Epilogue { beta: 1.0, ..Epilogue::PLAIN };
        assert_eq!(t(&rc(5000, 300, 4000), BF, BF), N160_TILE);
        assert_eq!(t(&rc(8000, 620, 2000).epilogue(beta), DType::F16, DType::F16), N160_TILE);
        assert_eq!(t(&rc(8000, 624, 2000), BF, BF), N160_TILE, "D leaves through TMA: the same rule");
        assert_eq!(t(&rc(6500, 904, 2048), BF, BF), N192_TILE, "204 tiles of 128 x 256, 306 of 128 x 160");
        assert_eq!(t(&rc(5000, 300, 4000), DType::F32, DType::F32), store::PERSIST_TILE);
        assert_eq!(t(&rc(7000, 330, 2048), BF, BF), 0, "a second wave");
        let why = tile_reason(&rc(5000, 300, 4000), N160_TILE, GemmPath::Auto, 132, BF);
        assert!(
            why.contains("one-tile 128x160 tile: its 80 tiles take 1 wave(s) of 132 SMs, as the 128x256's 80"),
            "{why}"
        );
    }

    /// The rules on the H100's 132 SMs: the streaming class (64 x 128 tiles in one wave) takes
    /// the streaming tile, split where its tiles fill at most a quarter of the SMs (or more
    /// with M + N at most 5120) and K gives slices of 64 k-tiles, or the 128 x 128 tile where
    /// it is compute bound ([`mid_class`]); a full wave, a short K, batches and a call's own `split_k` do not
    /// split.
    #[test]
    fn split_rule_shape_classes() {
        if std::env::var("FERROTUNE_SM90_SPLIT").is_ok() || std::env::var("FERROTUNE_SM90_TILE").is_ok() {
            return; // the variables override the rules under test
        }
        let s = |g: Gemm| split_tile(&g, 132, None).map_or(Sm90Split::NONE, |t| split_for(&g, 132, t, DType::Bf16));
        // 8 tiles: 16 slices of 64 k-tiles; 32 tiles: 4 slices.
        assert_eq!(s(rc(256, 256, 65_536)), Sm90Split { slices: 16, kt_per: 64 });
        assert_eq!(s(rc(512, 512, 32_768)), Sm90Split { slices: 4, kt_per: 128 });
        assert_eq!(s(rc(256, 1024, 16_384)), Sm90Split { slices: 4, kt_per: 64 });
        // One tile: capped at 64 slices.
        assert_eq!(s(rc(64, 128, 1 << 20)).slices, 64);
        for g in [
            // 32 tiles but 64 k-tiles; 64 tiles of a weight-bound shape (M + N above 5120);
            // a short K: the streaming tile unsplit.
            rc(64, 4096, 4096),
            rc(40, 8192, 8192),
            rc(128, 8192, 1024),
            rc(1024, 1024, 1024),
            // Outside the streaming class: no split.
            rc(4096, 4096, 4096),
            rc(512, 3072, 768),
            rc(128, 14_336, 4096),
            rc(256, 256, 960),
            rc(256, 256, 65_536).split_k(1),
            rc(256, 256, 65_536).split_k(8),
            rc(256, 256, 65_536).batched(2).resolved(),
        ] {
            assert!(!s(g).is_split(), "{g:?}");
        }
        for g in [rc(64, 4096, 4096), rc(128, 8192, 1024), rc(1024, 1024, 1024), rc(129, 257, 4099)] {
            assert!(streams(&g, 132) && tile_for(&g, 132, GemmPath::Auto, BF, BF) == STREAM_TILE, "{g:?}");
            assert!(tile_reason(&g, STREAM_TILE, GemmPath::Auto, 132, BF).contains("fit one wave"), "{g:?}");
        }
        for g in [rc(128, 14_336, 4096), rc(512, 3072, 768), rc(64, 128, 64).batched(2).resolved()] {
            assert!(!streams(&g, 132) && tile_for(&g, 132, GemmPath::Auto, BF, BF) != STREAM_TILE, "{g:?}");
        }
        // Past a quarter of the SMs, M + N at most 5120: the streaming tile in 2 or 3 slices.
        assert_eq!(s(rc(128, 4096, 8192)), Sm90Split { slices: 2, kt_per: 64 });
        assert_eq!(s(rc(96, 3072, 16_384)), Sm90Split { slices: 2, kt_per: 128 });
        assert_eq!(s(rc(256, 2048, 8192)), Sm90Split { slices: 2, kt_per: 64 });
        let why = split_reason(&rc(96, 3072, 16_384), STREAM_TILE, s(rc(96, 3072, 16_384)), 132);
        assert!(why.contains("leave 84 of 132 SMs idle") && why.contains("M + N = 3168"), "{why}");
        // At most a third of the SMs whatever M + N: 40 tiles in 3 slices; 48 stay whole.
        assert_eq!(s(rc(12, 5120, 13_824)).slices, 3);
        assert!(!s(rc(48, 6144, 12_288)).is_split());
        let why = split_reason(&rc(12, 5120, 13_824), STREAM_TILE, s(rc(12, 5120, 13_824)), 132);
        assert!(why.contains("fill at most 1/3 of 132 SMs"), "{why}");
        // The compute-bound part (sides of 384 and more, M + N at most 2048, K long): the
        // 128 x 128 tile, split by its own rule.
        for (g, slices) in [
            (rc(768, 512, 24_576), 5),
            (rc(640, 640, 32_768), 5),
            (rc(1000, 1000, 20_000), 2),
            (rc(1024, 1024, 16_384), 2),
            (rc(384, 1024, 20_000), 5),
        ] {
            assert!(mid_class(&g, 132), "{g:?}");
            assert_eq!(split_tile(&g, 132, None), Some(SPLIT_TILE), "{g:?}");
            assert_eq!(tile_for(&g, 132, GemmPath::Auto, BF, BF), SPLIT_TILE, "{g:?}");
            assert_eq!(s(g).slices, slices, "{g:?}");
        }
        let why = split_reason(&rc(768, 512, 24_576), SPLIT_TILE, s(rc(768, 512, 24_576)), 132);
        assert!(why.contains("5 K slices") && why.contains("the 128x128 tile, not the streaming tile"), "{why}");
        for g in [rc(256, 2048, 8192), rc(1024, 1024, 1024), rc(200, 600, 30_000), rc(2048, 1024, 16_384)] {
            assert!(!mid_class(&g, 132), "{g:?}");
        }
        // The uneven last slice is never empty and K is covered.
        let sp = s(rc(129, 257, 40_999));
        let kt = 40_999usize.div_ceil(64);
        assert!(sp.is_split() && sp.range(sp.slices - 1, kt).1 == kt && sp.range(sp.slices - 1, kt).0 < kt);
        let why = split_reason(&rc(256, 256, 65_536), STREAM_TILE, s(rc(256, 256, 65_536)), 132);
        assert!(why.contains("16 K slices") && why.contains("64x128") && why.contains("1/4"), "{why}");
        // A forced tile splits only where it can, by the rule it was measured with.
        assert_eq!(split_tile(&rc(64, 4096, 4096), 132, Some(2)), None);
        assert_eq!(split_tile(&rc(256, 256, 65_536), 132, Some(0)), Some(0));
        assert_eq!(split_for(&rc(256, 256, 65_536), 132, 0, DType::Bf16).slices, 64);
        assert_eq!(split_tile(&rc(640, 4096, 4096), 132, Some(1)), Some(1));
        assert_eq!(
            split_for(&rc(256, 256, 65_536), 132, SPLIT_TILE, DType::Bf16),
            Sm90Split { slices: 32, kt_per: 32 }
        );
        assert_eq!(split_for(&rc(64, 4096, 4096), 132, SMALL_M_TILE, DType::Bf16), Sm90Split { slices: 4, kt_per: 16 });
    }
}
