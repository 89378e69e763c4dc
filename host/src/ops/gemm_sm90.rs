//! The Hopper GEMM family on the host: whether a call can take it (sm_90a module, f16/bf16 or
//! f32 with TF32 math allowed, `rc` layout, operands TMA can describe) and why not, its tile and split-K choice (the cost
//! rule for few output tiles and a long K), and the launch (two tensor maps encoded per call,
//! passed by value; the split's workspace from the stream's cache).

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use ferrotune_kernels::gemm_sm90::{self as k90, Sm90Variant};
use ferrotune_kernels::gemm_sm90_split::Sm90Split;

use crate::DType;
use crate::backend::Gpu;
use crate::config::{GemmConfig, GemmPath};
use crate::error::{DriverContext, Error, Result};
use crate::ops::gemm::{Gemm, Layout};
use crate::tma::TileMap;

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
        _ => tile_for(g, sm_count, path),
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

/// The tile split-K runs on above 64 rows (128 x 128, one block per tile: the finer grain of
/// output tiles).
pub const SPLIT_TILE: u8 = 1;
/// The tile for M <= 64 (64 x 128, one consumer, two blocks per SM): the 128-row tiles would
/// spend half their wgmma rows on nothing.
pub const SMALL_M_TILE: u8 = 9;
/// Least k-tiles (of 64) per K slice: shorter slices spend more on the join than they save
/// (on the H100, 128x8192x1024 ran 0.026 ms in 2 slices of 8, 0.024 ms unsplit).
pub const MIN_KT_PER_SLICE: usize = 16;

/// The tile a K split of `g` would run on: a forced tile that can split, none for a forced
/// tile that cannot, else [`SMALL_M_TILE`] up to 64 rows when the 128 x 128 tiles would fill
/// at most a quarter of the SMs, and [`SPLIT_TILE`] otherwise. On the H100 (bf16, committed in
/// bench/results/irregular/run7-*): the 64-row tile won at 32 and 24 tiles of 128 x 128
/// (64x4096x4096 0.032 ms against 0.035, 50x3000x2999 0.040 against 0.048) and lost from 64
/// on (64x11008x4096 0.057 against 0.051, 64x16384x4096 0.068 against 0.063).
fn split_tile(g: &Gemm, sm_count: u32, forced: Option<u8>) -> Option<u8> {
    let tiles128 = g.m.div_ceil(128) * g.n.div_ceil(128);
    match forced {
        Some(t) => k90::TILES[t as usize].splits_k().then_some(t),
        None if g.m <= 64 && 4 * tiles128 <= sm_count.max(1) as usize => Some(SMALL_M_TILE),
        None => Some(SPLIT_TILE),
    }
}

/// The split-K cost rule: a single matrix whose output tiles (of `tile`) fill at most half the
/// block slots (SMs x blocks per SM) leaves the others idle for the whole of a long K; cut K
/// into up to `slots / tiles` slices (at most 64) of at least [`MIN_KT_PER_SLICE`] k-tiles, so
/// the grid is about one wave. Not when the call forces `split_k` (1: no split; above 1: the
/// `mma.sync` split-K) or is a batch. `FERROTUNE_SM90_SPLIT=s` forces `s` slices (1: off).
/// A k-tile is 128 bytes of K for every input type (64 of f16/bf16, 32 of f32 on TF32, at half
/// the rate), so the least slice is the same number of k-tiles, i.e. about the same time.
pub fn split_for(g: &Gemm, sm_count: u32, tile: u8, dtype: DType) -> Sm90Split {
    if g.batch != 1 || g.split_k.is_some() {
        return Sm90Split::NONE;
    }
    let t = k90::TILES[tile as usize];
    let tiles = g.m.div_ceil(t.bm()) * g.n.div_ceil(t.bn);
    let ktiles = g.k.div_ceil(t.bk(dtype.size_bytes()));
    if let Some(s) = std::env::var("FERROTUNE_SM90_SPLIT").ok().and_then(|v| v.parse::<usize>().ok()) {
        return Sm90Split::new(ktiles, s);
    }
    let slots = sm_count.max(1) as usize * t.blocks_per_sm();
    if tiles == 0 || 2 * tiles > slots {
        return Sm90Split::NONE;
    }
    Sm90Split::new(ktiles, (slots / tiles).min(ktiles / MIN_KT_PER_SLICE))
}

/// The K slices a tuned config asks of its Hopper tile (`path = "sm90:<t>"` with `split_k`
/// above 1), where they apply: a single matrix, no path or split forced by the call.
pub fn tuned_split(g: &Gemm, cfg: GemmConfig) -> Option<usize> {
    let tuned = matches!(cfg.path, GemmPath::Sm90(_)) && cfg.split_k > 1;
    (tuned && g.path.is_none() && g.split_k.is_none() && g.batch == 1).then_some(cfg.split_k)
}

/// What a split of `g` on `tile` is: slices, k-tiles each, workspace.
pub fn split_shape(g: &Gemm, tile: u8, split: Sm90Split) -> String {
    let t = k90::TILES[tile as usize];
    let tiles = g.m.div_ceil(t.bm()) * g.n.div_ceil(t.bn);
    format!(
        "{tiles} output tiles of {}x{}, {} K slices of {} k-tiles joined in the kernel, {} KiB workspace",
        t.bm(),
        t.bn,
        split.slices,
        split.kt_per,
        split.workspace_bytes(tiles, t.bm() * t.bn).div_ceil(1024)
    )
}

/// Why `split` was chosen, for the plan's reason.
pub fn split_reason(g: &Gemm, tile: u8, split: Sm90Split, sm_count: u32) -> String {
    let t = k90::TILES[tile as usize];
    let tiles = g.m.div_ceil(t.bm()) * g.n.div_ceil(t.bn);
    format!(
        "Hopper split-K: {tiles} output tiles of {}x{} fill at most half of {sm_count} SMs x {} blocks and K = {} \
         is long: {} K slices of {} k-tiles, joined in the kernel by a fixed tree (deterministic), {} KiB workspace",
        t.bm(),
        t.bn,
        t.blocks_per_sm(),
        g.k,
        split.slices,
        split.kt_per,
        split.workspace_bytes(tiles, t.bm() * t.bn).div_ceil(1024)
    )
}

/// The tile: forced (the call's path, `FERROTUNE_SM90_TILE`) or tuned (the config's path), else
/// from the H100 sweep of every tile (bench/results/hopper-run3/sweep-tile*.txt):
/// 128 x 256 one block per tile whenever it gives at least half a wave of blocks (fastest on
/// 8192³, 4096³, 2048³ and 8192x3072x768), else 128 x 128 (twice the blocks; fastest on
/// 512x3072x768). The persistent tiles lost on every shape there (with an epilogue since
/// reworked) and are chosen only when forced or tuned; so are the ping-pong tiles, which lost
/// to tile 0 on every shape but 512x3072x768 (bench/results/hopper-run5/sweep-tile*.txt).
fn tile_for(g: &Gemm, sm_count: u32, path: GemmPath) -> u8 {
    if let Some(t) = forced_tile(g, path) {
        return t;
    }
    let big = k90::TILES[0];
    let tiles = g.m.div_ceil(big.bm()) * g.n.div_ceil(big.bn) * g.batch;
    if 2 * tiles >= sm_count.max(1) as usize { 0 } else { 1 }
}

/// The tile the call's forced path, else `FERROTUNE_SM90_TILE`, else the chosen config's
/// (tuned) path names, if any.
fn forced_tile(g: &Gemm, path: GemmPath) -> Option<u8> {
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
    let b = TileMap { base: pb, rows: g.n, ld: g.ldb, stride: g.stride_b, box_rows: t.bn as u32, ..a };
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
    let kernel = gpu.kernels()?.function_with_smem(name.as_str(), smem)?;
    if t.threads() > kernel.max_threads {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!("{} allows {} threads per block, needs {}", name.as_str(), kernel.max_threads, t.threads()),
        });
    }
    // Persistent: one block per SM at most, walking every tile of every batch matrix.
    let grid = if t.persistent {
        (persistent_blocks(tiles as u64 * g.batch as u64, gpu.info.sm_count), 1, 1)
    } else {
        (tiles, slices, g.batch as u32)
    };
    let cfg = LaunchConfig { grid_dim: grid, block_dim: (t.threads(), 1, 1), shared_mem_bytes: smem };
    // m, n, k, ldc, batch: the entry's five u32 parameters.
    let dims = [g.m, g.n, g.k, g.ldc, g.batch].map(|x| x as u32);
    let stride_c = g.stride_c as u64;
    let e = g.epilogue;
    let flags = e.flags();
    let mut lb = cs.launch_builder(&kernel.func);
    lb.arg(&map_a).arg(&map_b).arg(&pc).arg(&pd).arg(&pbias);
    for x in &dims {
        lb.arg(x);
    }
    lb.arg(&stride_c).arg(&e.alpha).arg(&e.beta).arg(&flags).arg(&ws).arg(&slices).arg(&kt_per);
    // SAFETY: the arguments match `sm90_entry!` in kernels-gpu/src/entry/gemm_sm90.rs (two
    // 128-byte maps by value, 3 pointers, 5 u32, 1 u64, 2 f32, 1 u32, 1 pointer, 2 u32); the
    // maps describe A and B as the kernel loads them (boxes of the tile); the caller vouches
    // for the pointers; block size and shared memory are the tile's; a split runs one-tile
    // blocks of a single matrix, one per (tile, slice), every slice non-empty, on a workspace
    // of the size `gemm_sm90_split` lays out, its counters at zero.
    unsafe { lb.launch(cfg) }
        .ctx(|| format!("launching {} ({}x{}x{}, batch {})", name.as_str(), g.m, g.n, g.k, g.batch))?;
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

    fn rc(m: usize, n: usize, k: usize) -> Gemm {
        Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).resolved()
    }

    /// The cost rule on the H100's 132 SMs: few 128 x 128 tiles and a long K split into about
    /// a wave of blocks; a full wave, a short K, batches and a call's own `split_k` do not.
    #[test]
    fn split_rule_shape_classes() {
        if std::env::var("FERROTUNE_SM90_SPLIT").is_ok() {
            return; // the variable overrides the rule under test
        }
        let s = |g: Gemm| split_for(&g, 132, split_tile(&g, 132, None).unwrap(), DType::Bf16);
        assert_eq!(s(rc(256, 256, 65_536)), Sm90Split { slices: 32, kt_per: 32 });
        assert_eq!(s(rc(512, 512, 32_768)), Sm90Split { slices: 8, kt_per: 64 });
        assert_eq!(s(rc(1024, 1024, 16_384)), Sm90Split { slices: 2, kt_per: 128 });
        // 64 tiles, 32 k-tiles: two slices of the least length; 16 k-tiles: none.
        assert_eq!(s(rc(128, 8192, 2048)), Sm90Split { slices: 2, kt_per: 16 });
        assert!(!s(rc(128, 8192, 1024)).is_split());
        // One tile: capped at 64 slices.
        assert_eq!(s(rc(128, 128, 1 << 20)).slices, 64);
        for g in [
            rc(4096, 4096, 4096),
            rc(512, 3072, 768),
            rc(256, 256, 960),
            rc(256, 256, 65_536).split_k(1),
            rc(256, 256, 65_536).split_k(8),
            rc(256, 256, 65_536).batched(2).resolved(),
        ] {
            assert!(!s(g).is_split(), "{g:?}");
        }
        // The uneven last slice is never empty and K is covered.
        let sp = s(rc(129, 257, 4099));
        let kt = 4099usize.div_ceil(64);
        assert!(sp.is_split() && sp.range(sp.slices - 1, kt).1 == kt && sp.range(sp.slices - 1, kt).0 < kt);
        assert!(split_reason(&rc(256, 256, 65_536), SPLIT_TILE, s(rc(256, 256, 65_536)), 132).contains("32 K slices"));
        // Up to 64 rows and few tiles the 64 x 128 tile, two blocks per SM: 32 tiles of 64x4096
        // leave room for 8 slices, 64 k-tiles allow 4. 33x8191 (64 tiles of 128 x 128) stays on
        // the 128 x 128 tile (2 slices), 64x11008 (86) does not split.
        assert_eq!(split_tile(&rc(64, 4096, 4096), 132, None), Some(SMALL_M_TILE));
        assert_eq!(s(rc(64, 4096, 4096)), Sm90Split { slices: 4, kt_per: 16 });
        assert_eq!(split_tile(&rc(33, 8191, 4099), 132, None), Some(SPLIT_TILE));
        assert_eq!(split_tile(&rc(64, 11008, 4096), 132, None), Some(SPLIT_TILE));
        assert!(!s(rc(64, 11008, 4096)).is_split());
        assert!(split_reason(&rc(64, 4096, 4096), SMALL_M_TILE, s(rc(64, 4096, 4096)), 132).contains("64x128"));
        // A forced tile splits only where it can.
        assert_eq!(split_tile(&rc(64, 4096, 4096), 132, Some(0)), None);
        assert_eq!(split_tile(&rc(640, 4096, 4096), 132, Some(1)), Some(1));
    }
}
