//! The Hopper GEMM family on the host: whether a call can take it (sm_90a module, f16/bf16,
//! `rc` layout, operands TMA can describe) and why not, its tile choice, and the launch (two
//! tensor maps encoded per call, passed by value).

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use ferrotune_kernels::gemm_sm90::{self as k90, Sm90Variant};

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

/// The Hopper variant for this call, or why the call cannot take the Hopper path (the caller
/// then runs the `mma.sync` tiles). `arch` is the loaded PTX module's architecture; the tile
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
) -> std::result::Result<Sm90Variant, String> {
    if std::env::var("FERROTUNE_SM90").is_ok_and(|v| v == "0") {
        return Err("FERROTUNE_SM90=0 turns the Hopper path off".into());
    }
    let path = g.path.unwrap_or(cfg.path);
    if let GemmPath::Sm90(t) = path
        && t as usize >= k90::TILES.len()
    {
        return Err(format!("Hopper tile {t} is not compiled (0..{})", k90::TILES.len()));
    }
    if path == GemmPath::Mma {
        let by = if g.path.is_some() { "the call" } else { "the chosen config (a tuned profile)" };
        return Err(format!("{by} asks for the mma.sync tiles"));
    }
    if arch != "sm_90a" {
        return Err(format!("the loaded PTX is {arch}; the wgmma kernels need sm_90a (compute capability 9.0)"));
    }
    if !matches!(dtype, DType::F16 | DType::Bf16) {
        return Err(format!("{} inputs have no wgmma kernel yet", dtype.name()));
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
    let tile = tile_for(g, sm_count, path);
    let v = Sm90Variant { dtype, out_f32: out == DType::F32, tile };
    if v.out_dtype() != out {
        return Err(format!("output {} for {} inputs", out.name(), dtype.name()));
    }
    let (ma, mb) = maps(g, v, pa, pb);
    ma.validate().map_err(|e| format!("TMA cannot load A: {e}"))?;
    mb.validate().map_err(|e| format!("TMA cannot load B: {e}"))?;
    let tiles = g.m.div_ceil(v.tile().bm()) * g.n.div_ceil(v.tile().bn);
    if tiles > i32::MAX as usize || g.batch > 65_535 {
        return Err(format!("{tiles} tiles x batch {} exceed the grid", g.batch));
    }
    Ok(v)
}

/// The tile: forced (the call's path, `FERROTUNE_SM90_TILE`) or tuned (the config's path), else
/// from the H100 sweep of every tile (bench/results/hopper-run3/sweep-tile*.txt):
/// 128 x 256 one block per tile whenever it gives at least half a wave of blocks (fastest on
/// 8192³, 4096³, 2048³ and 8192x3072x768), else 128 x 128 (twice the blocks; fastest on
/// 512x3072x768). The persistent tiles lost on every shape there (with an epilogue since
/// reworked) and are chosen only when forced or tuned; so are the ping-pong tiles, which lost
/// to tile 0 on every shape but 512x3072x768 (bench/results/hopper-run5/sweep-tile*.txt).
fn tile_for(g: &Gemm, sm_count: u32, path: GemmPath) -> u8 {
    let forced = g.path.and_then(|p| if let GemmPath::Sm90(t) = p { Some(t) } else { None });
    let env = std::env::var("FERROTUNE_SM90_TILE").ok().and_then(|v| v.parse::<u8>().ok());
    let tuned = if let GemmPath::Sm90(t) = path { Some(t) } else { None };
    if let Some(t) = forced.or(env).or(tuned)
        && (t as usize) < k90::TILES.len()
    {
        return t;
    }
    let big = k90::TILES[0];
    let tiles = g.m.div_ceil(big.bm()) * g.n.div_ceil(big.bn) * g.batch;
    if 2 * tiles >= sm_count.max(1) as usize { 0 } else { 1 }
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

/// Launches `v` on `ptrs` = (a, b, c, d, bias).
///
/// # Safety
/// The pointers cover their (batch of) matrices as `g` describes them (as `check` proves for
/// a call's views) and stay alive until the launch completes; `v` came from [`choose`] for
/// this call.
pub unsafe fn launch(cs: &Arc<CudaStream>, gpu: &Gpu, g: &Gemm, v: Sm90Variant, ptrs: [u64; 5]) -> Result<()> {
    let [pa, pb, pc, pd, pbias] = ptrs;
    let name = v.entry_name();
    let t = v.tile();
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
    let tiles = (g.m.div_ceil(t.bm()) * g.n.div_ceil(t.bn)) as u32;
    // Persistent: one block per SM at most, walking every tile of every batch matrix.
    let grid = if t.persistent {
        (persistent_blocks(tiles as u64 * g.batch as u64, gpu.info.sm_count), 1, 1)
    } else {
        (tiles, 1, g.batch as u32)
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
    lb.arg(&stride_c).arg(&e.alpha).arg(&e.beta).arg(&flags);
    // SAFETY: the arguments match `sm90_entry!` in kernels-gpu/src/entry/gemm_sm90.rs (two
    // 128-byte maps by value, 3 pointers, 5 u32, 1 u64, 2 f32, 1 u32); the maps describe A and B as the kernel loads them (boxes of the tile); the
    // caller vouches for the pointers; block size and shared memory are the tile's.
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
