//! The row small-M kernel on the host (`kernels-gpu/src/gemv_rows.rs`): whether a small-M
//! call takes it and why, and its launch. It can serve 1 to 64 rows of x (f16 or bf16) when a
//! config asks for it; the built-in plan gives it the calls of [`built_in_rows`] against a
//! weight whose rows are not 16-byte aligned and whose K is short, where the slab kernel
//! (`ops::gemv`) spends its time on funnel shifts or on copies of x: a block reads 8 weight
//! rows in their shared aligned frame, its rows of x (up to 16; more in slices of 16 along y:
//! [`block_rows`]) staged once in shared memory, and its warps add the products on tensor
//! cores.

use std::sync::Arc;

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};
use ferrotune_kernels::gemv_rows as kr;

use super::gemm::{Gemm, Layout};
use crate::DType;
use crate::backend::Gpu;
use crate::error::{DriverContext, Error, Result};

const OP: &str = "gemm";

/// The small-M config's `tile` that names this kernel (after the streaming kernel's).
pub const ROWS_TILE: usize = crate::ops::gemv_stream::STREAM_TILE + 1;

/// The width `gemm_plan` reports for a config naming this kernel (no slab kernel's width).
pub const ROWS_WIDTH: usize = usize::MAX;

/// K up to which the built-in plan gives unaligned weights of 2 to 8 rows of x to this
/// kernel (one row of x takes it at any K that fits).
pub const MAX_K: usize = 1024;
/// K up to which the built-in plan gives it 9 to 64 rows of x (x's share of the traffic grows
/// with the rows; above, the slab kernel in place up to 40 rows, the packed Hopper tiles beyond,
/// are faster).
pub const MAX_K_MANY: usize = 800;
/// Fewest weight rows the built-in plan gives it (one block's rows: below, the slab kernel's
/// single launch is as fast).
pub const MIN_N: usize = 64;

/// Whether the built-in plan gives the row kernel an unaligned call of `m` x `n` x `k`, with
/// why not. On the H200, both 16-bit types, forced against the slab kernel in the same call
/// (bench/results/rows-mma-c4ce179b6376/run1-*, µs): 1x4097x777 7.4-8.9 against 11.2-11.3,
/// 1x50000x255 34.5-34.8 against 50.8-51.3, 5x777x333 6.7-6.8 against 12.4-12.8, 8x3000x65
/// 7.1-8.2 against 10.8-11.2, 1x8193x4099 27.1-27.4 against 32.4-32.9, 16x2049x513 9.8-10.7
/// against 12.8-13.1; but 5x3000x1999 14.8-15.1 against 13.9-14.3, 3x7000x2047 23.3-23.6
/// against 22.3-22.9 and 16x4097x1023 17.9-18.2 against 14.0-14.4 (the longer rows, more rows
/// of x), and 3x5x7 5.4-6.6 against 4.9-5.4.
pub fn built_in_rows(m: usize, n: usize, k: usize) -> std::result::Result<(), &'static str> {
    if n < MIN_N {
        return Err("fewer than 64 weight rows (one block: the slab kernel is as fast)");
    }
    match m {
        1 => Ok(()),
        2..=8 if k <= MAX_K => Ok(()),
        2..=8 => Err("K above 1024 with 2 to 8 rows of x (the slab kernel splits long rows over warps)"),
        9..=64 if k > MAX_K_MANY => Err(
            "K above 800 with 9 to 64 rows of x (x staged per block costs more than the slab kernel's copies or the \
             packed tiles)",
        ),
        9..=16 => Ok(()),
        17..=32 if k >= SLAB_MIN_K_17_32 && n >= SLAB_MIN_N_17_32 && !wide_k_asked() => Err(
            "17 to 32 rows of x (two slices) with K of 640 or more against 2048 weight rows or more (the slab kernel \
             reads the weight once, the slices twice)",
        ),
        _ if kr::x_fits(16, k) => Ok(()),
        _ => Err("x staged for 16 rows would take more than 40 KiB of shared memory"),
    }
}

/// K from which 17 to 32 rows of x against at least [`SLAB_MIN_N_17_32`] weight rows go to the
/// slab kernel in place ([`built_in_rows`]): there the row kernel's two slices of 16 rows each
/// read the whole weight, the slab kernel once. On the H200, in one call each
/// (bench/results/aligned-shortk-*/, bf16 µs, slab against rows): 30x6001x700 18.8-19.5
/// against 23.4-23.5, 17x4097x777 13.3 against 15.9, 32x3000x700 12.3 against 13.6; but the row
/// kernel ahead on shorter K or fewer weight rows: 18x1200x700 11.4 against 14.5, 24x5000x500
/// 12.9 against 15.1, 20x8000x300 11.9 against 15.0, 20x2000x500 10.9 against 13.5.
/// `FERROTUNE_SMALL_M_ROWS_WIDE_K=1` gives such calls back to the row kernel (A/B runs).
pub const SLAB_MIN_K_17_32: usize = 640;
/// Weight rows from which [`SLAB_MIN_K_17_32`] applies.
pub const SLAB_MIN_N_17_32: usize = 2048;

/// Whether `FERROTUNE_SMALL_M_ROWS_WIDE_K=1` asks for the row kernel on 17 to 32 rows of long
/// K against large weights too (the plan before [`SLAB_MIN_K_17_32`]).
fn wide_k_asked() -> bool {
    std::env::var("FERROTUNE_SMALL_M_ROWS_WIDE_K").is_ok_and(|v| v == "1")
}

/// A launch of the row kernel: its entry, blocks along x (weight rows) and y (slices of the
/// rows of x), the team (warps per 8-row group) and the rows of x per block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowsLaunch {
    pub name: &'static str,
    pub blocks: usize,
    pub slices: usize,
    pub team: usize,
    pub rows: usize,
}

/// Rows of x per block (a compiled count, `kr::ROWS`) for `m` rows of x and K = `k`, `None`
/// where not even a slice of 16 rows fits its shared memory: up to 16 rows one block's count
/// (`kr::rows_for`), above slices of 16 rows along y (more blocks, each staging less x, the
/// weight read once per slice, the later ones from L2). The entries of 32, 48 and 64 rows per
/// block (each weight vector meets every row of x, x staged once per block) lost to the slices
/// on the H200 wherever both ran (`bench/NOTES.md`, "The row kernel's slices of 16"): they stay for A/B runs,
/// `FERROTUNE_SMALL_M_ROWS_R=16|32|48|64` asks for that many per block where it fits.
pub fn block_rows(m: usize, k: usize) -> Option<usize> {
    if m > kr::MAX_M {
        return None;
    }
    let whole = kr::rows_for(m)?;
    let asked = std::env::var("FERROTUNE_SMALL_M_ROWS_R").ok().and_then(|v| v.parse::<usize>().ok());
    if let Some(r) = asked.filter(|r| kr::ROWS.contains(r) && *r >= 16 && m > 16) {
        let r = r.min(whole);
        if kr::x_fits(r, k) {
            return Some(r);
        }
    }
    let rows = whole.min(16);
    kr::x_fits(rows, k).then_some(rows)
}

/// Why the row kernel serves the small-M call `g` (resolved) with `dtype` inputs with the
/// weight at `pb`, or why not (`Err`). `tuned`: the (K split, width) a tuned config names;
/// [`ROWS_WIDTH`] asks for this kernel wherever it can run, another width keeps the slab
/// kernel. `FERROTUNE_SMALL_M_ROWS=0` (never) or `=1` (wherever it can) overrides the plan.
pub fn applies(
    g: &Gemm,
    dtype: DType,
    pb: u64,
    tuned: Option<(usize, usize)>,
) -> std::result::Result<&'static str, &'static str> {
    let env = std::env::var("FERROTUNE_SMALL_M_ROWS").ok();
    if env.as_deref() == Some("0") {
        return Err("FERROTUNE_SMALL_M_ROWS=0");
    }
    let asked = tuned.is_some_and(|t| t.1 == ROWS_WIDTH);
    if tuned.is_some() && !asked {
        return Err("the tuned config names another small-M kernel");
    }
    if !matches!(dtype, DType::Bf16 | DType::F16) || g.m == 0 || g.m > kr::MAX_M || g.batch != 1 {
        return Err("the row kernel takes 1..=64 rows of 16-bit data, one matrix");
    }
    if g.b_layout != Layout::Col {
        return Err("the row kernel reads K-contiguous weight rows (B column-major)");
    }
    if block_rows(g.m, g.k).is_none() {
        return Err("x staged in shared memory would take more than 40 KiB");
    }
    if asked || env.as_deref() == Some("1") {
        return Ok("8 weight rows per block in their aligned frame, x staged in shared memory, tensor cores");
    }
    if pb.is_multiple_of(16) && g.ldb.is_multiple_of(8) {
        return Err("weight rows 16-byte aligned (the slab kernel reads them whole)");
    }
    built_in_rows(g.m, g.n, g.k)?;
    Ok("weight rows not 16-byte aligned: 8 per block in their aligned frame, x staged in shared memory, tensor \
        cores")
}

/// Batches per warp and row for `rows` compiled rows of x: `kr::batches_for`, or
/// `FERROTUNE_SMALL_M_ROWS_BATCHES=1|2` (A/B runs).
fn batches(rows: usize) -> usize {
    match std::env::var("FERROTUNE_SMALL_M_ROWS_BATCHES").ok().as_deref() {
        Some("1") => 1,
        Some("2") => 2,
        _ => kr::batches_for(rows),
    }
}

/// Vectors per thread in flight while a block of `rows` compiled rows stages x:
/// `kr::stage_for`, or `FERROTUNE_SMALL_M_ROWS_STAGE=d` (1 to the entry's depth; A/B runs: 2 is
/// the depth before the 8- and 16-row entries staged 4).
fn stage_depth(rows: usize) -> usize {
    let asked = std::env::var("FERROTUNE_SMALL_M_ROWS_STAGE").ok().and_then(|v| v.parse::<usize>().ok());
    kr::stage_for(rows, asked)
}

/// The launch of a call `applies` accepted, on a device of `sms` SMs: rows of x per block
/// ([`block_rows`]), the team (warps per 8-row group, `kr::team_for`) and the blocks.
pub fn describe(g: &Gemm, dtype: DType, out: DType, sms: usize) -> Option<RowsLaunch> {
    let rows = block_rows(g.m, g.k)?;
    let name = kr::entry_name(dtype, out, rows)?;
    let slices = kr::slices(g.m, rows);
    // The blocks of all slices share the SMs.
    let team = kr::team_for(g.n, g.k, sms.div_ceil(slices), batches(rows));
    Some(RowsLaunch { name, blocks: kr::blocks(g.n, team), slices, team, rows })
}

/// Launches the row kernel on `ptrs` = (a, b, c, d, bias).
///
/// # Safety
/// `applies` accepted `g` (resolved) at these pointers; they cover their matrices as `g`
/// describes them and stay alive until the launch completes.
pub(crate) unsafe fn launch(
    cs: &Arc<CudaStream>,
    gpu: &Gpu,
    g: &Gemm,
    dtype: DType,
    out: DType,
    ptrs: [u64; 5],
) -> Result<()> {
    let [pa, pb, pc, pd, pbias] = ptrs;
    let Some(RowsLaunch { name, blocks, slices, team, rows }) =
        describe(g, dtype, out, gpu.info.sm_count.max(1) as usize)
    else {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!(
                "the row kernel: no {} entry for {} rows of x whose x staged in shared memory fits (K = {})",
                dtype.name(),
                g.m,
                g.k
            ),
        });
    };
    let smem = Some(rows).filter(|&r| kr::x_fits(r, g.k)).and_then(|r| kr::smem_bytes(r, g.k)).ok_or_else(|| {
        Error::InvalidConfig {
            op: OP,
            why: format!("{name}: x of {rows}x{} staged in shared memory exceeds {} bytes", g.k, kr::max_x_bytes(rows)),
        }
    })? as u32;
    if g.n == 0 || blocks > u32::MAX as usize || slices > 65_535 {
        return Err(Error::InvalidConfig { op: OP, why: format!("{name}: {} weight rows", g.n) });
    }
    let kernel = gpu.kernels()?.function_with_smem(name, smem)?;
    if kr::THREADS > kernel.max_threads {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!("{name} allows {} threads per block, needs {}", kernel.max_threads, kr::THREADS),
        });
    }
    let cfg = LaunchConfig {
        grid_dim: (blocks as u32, slices as u32, 1),
        block_dim: (kr::THREADS, 1, 1),
        shared_mem_bytes: smem,
    };
    let dims = [g.m, g.n, g.k, g.lda, g.ldb, g.ldc].map(|x| x as u32);
    let strides = [g.stride_a, g.stride_b, g.stride_c].map(|x| x as u64);
    let e = g.epilogue;
    let flags = e.flags();
    let layout = if g.a_layout == Layout::Col { ferrotune_kernels::gemv::A_COL } else { 0 };
    let mut lb = cs.launch_builder(&kernel.func);
    for p in [&pa, &pb, &pc, &pd, &pbias] {
        lb.arg(p);
    }
    for x in &dims {
        lb.arg(x);
    }
    for x in &strides {
        lb.arg(x);
    }
    let team = team as u32;
    let stage = stage_depth(rows) as u32;
    lb.arg(&e.alpha).arg(&e.beta).arg(&flags).arg(&layout).arg(&team).arg(&stage);
    // SAFETY: the arguments match `gemvr_entry!` in kernels-gpu/src/entry/gemv_rows.rs (5
    // pointers, 6 u32, 3 u64, 2 f32, 4 u32; the kernel clamps the staging depth to its own); the caller vouches for the operands; `applies`
    // checked the rows of x (at most 64: `slices` blocks of the entry's rows along y), the
    // weight's K-contiguous layout and the staged x's size; the shared memory given here is x's
    // and the warps' sums; the grid is `blocks(n, team)` by `slices(m, rows)` for the team and
    // rows `describe` chose (one of `kr::TEAMS`, `kr::ROWS`).
    unsafe { lb.launch(cfg) }.ctx(|| format!("launching {name} ({}x{}x{}, {blocks} blocks)", g.m, g.n, g.k))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rc(m: usize, n: usize, k: usize) -> Gemm {
        Gemm::new(m, n, k).layouts(Layout::Row, Layout::Col).resolved()
    }

    #[test]
    fn takes_up_to_64_rows_of_x_against_unaligned_rows_by_k() {
        if std::env::var("FERROTUNE_SMALL_M_ROWS").is_ok() {
            eprintln!("skipped: FERROTUNE_SMALL_M_ROWS is set");
            return;
        }
        let ok = |g: &Gemm, pb: u64| applies(g, DType::Bf16, pb, None).is_ok();
        assert!(ok(&rc(1, 4097, 777), 256), "odd K");
        assert!(!ok(&rc(1, 5, 7), 256), "5 weight rows");
        assert!(ok(&rc(1, 64, 7), 256));
        assert!(ok(&rc(8, 3000, 65), 256), "8 rows");
        assert!(applies(&rc(1, 4097, 777), DType::F16, 256, None).is_ok(), "f16");
        assert!(!ok(&rc(1, 4096, 768), 256), "aligned rows");
        assert!(ok(&rc(1, 4096, 768), 258), "a view at an odd offset");
        assert!(ok(&rc(9, 4097, 777), 256), "9 rows");
        assert!(!ok(&rc(16, 4097, 1023), 256), "16 rows, K above 800");
        assert!(ok(&rc(17, 2000, 777), 256), "17 rows");
        assert!(!ok(&rc(17, 4097, 777), 256), "17 rows, K 640 or more against 2048 weight rows: the slab kernel");
        assert!(ok(&rc(32, 4097, 639), 256), "32 rows, K below 640");
        assert!(!ok(&rc(32, 2048, 640), 256), "32 rows, K 640, 2048 weight rows");
        assert!(ok(&rc(33, 4097, 777), 256), "33 rows: slices of 16 again");
        assert!(ok(&rc(33, 1023, 777), 256), "33 rows");
        assert!(ok(&rc(64, 5000, 799), 256), "64 rows in slices of 16");
        assert!(!ok(&rc(64, 5000, 801), 256), "64 rows, K above 800");
        assert!(!ok(&rc(28, 3001, 1201), 256), "28 rows, K above 800");
        assert!(!ok(&rc(40, 700, 1001), 256), "40 rows, K above 800");
        assert!(!ok(&rc(33, 8191, 4099), 256), "33 rows, K past a 16-row slice's shared memory");
        assert!(!ok(&rc(65, 4097, 777), 256), "65 rows");
        assert!(applies(&rc(4, 4097, 1025), DType::Bf16, 256, Some((1, ROWS_WIDTH))).is_ok(), "asked for");
        assert!(!ok(&rc(4, 4097, 1025), 256), "K above 1024 from 2 rows");
        assert!(ok(&rc(1, 8193, 4099), 256), "one row, long K");
        assert!(!ok(&Gemm::new(1, 4097, 777).resolved(), 256), "row-major weight");
        assert!(!ok(&Gemm { batch: 2, ..rc(1, 4097, 777) }, 256), "batched");
        assert!(applies(&rc(1, 4097, 777), DType::F32, 256, None).is_err());
        // A tuned config: another small-M kernel keeps it, this one's width asks for it even
        // on aligned rows, but not past the shared memory x needs.
        assert!(applies(&rc(1, 4097, 777), DType::F16, 256, Some((1, 1))).is_err());
        assert!(applies(&rc(4, 4096, 1024), DType::F16, 256, Some((1, ROWS_WIDTH))).is_ok());
        let big = applies(&rc(8, 4096, 4096), DType::F16, 256, Some((1, ROWS_WIDTH)));
        assert!(big.is_err_and(|w| w.contains("40 KiB")));
        assert!(applies(&rc(16, 4096, 1000), DType::F16, 256, Some((1, ROWS_WIDTH))).is_ok());
        assert!(applies(&rc(17, 4096, 100), DType::F16, 256, Some((1, ROWS_WIDTH))).is_ok());
        assert!(applies(&rc(64, 5000, 1201), DType::F16, 256, Some((1, ROWS_WIDTH))).is_ok(), "asked, long K");
        assert!(applies(&rc(65, 4096, 100), DType::F16, 256, Some((1, ROWS_WIDTH))).is_err());
    }

    #[test]
    fn describes_the_entry_for_the_rows_of_x() {
        if std::env::var("FERROTUNE_SMALL_M_ROWS_R").is_ok() {
            eprintln!("skipped: FERROTUNE_SMALL_M_ROWS_R is set");
            return;
        }
        let d = |m, n, k, dt, out| {
            describe(&rc(m, n, k), dt, out, 132).map(|l| (l.name, l.blocks, l.slices, l.team, l.rows))
        };
        assert_eq!(d(1, 4097, 777, DType::Bf16, DType::Bf16), Some(("ft_gemvr_bf16_bf16_m1", 520, 1, 8, 1)));
        assert_eq!(d(3, 5, 7, DType::F16, DType::F32), Some(("ft_gemvr_f16_f32_m4", 8, 1, 8, 4)));
        assert_eq!(d(9, 5, 7, DType::F16, DType::F16), Some(("ft_gemvr_f16_f16_m16", 8, 1, 8, 16)));
        assert_eq!(d(1, 50_000, 100, DType::F16, DType::F16), Some(("ft_gemvr_f16_f16_m1", 784, 1, 1, 1)));
        // Few weight rows: slices of 16 rows of x (here 3), whose blocks share the SMs.
        assert_eq!(d(33, 1023, 777, DType::Bf16, DType::Bf16), Some(("ft_gemvr_bf16_bf16_m16", 64, 3, 4, 16)));
        assert_eq!(d(17, 5, 7, DType::F16, DType::F16), Some(("ft_gemvr_f16_f16_m16", 8, 2, 8, 16)));
        // Weight groups for every SM: slices of 16 rows all the same.
        assert_eq!(
            d(36, 5000, 300, DType::Bf16, DType::Bf16).map(|l| (l.0, l.2, l.4)),
            Some(("ft_gemvr_bf16_bf16_m16", 3, 16))
        );
        assert_eq!(d(64, 50_000, 700, DType::F16, DType::F32).map(|l| (l.0, l.2)), Some(("ft_gemvr_f16_f32_m16", 4)));
        assert_eq!(d(65, 5000, 7, DType::F16, DType::F16), None);
        assert_eq!(d(16, 5000, 2000, DType::F16, DType::F16), None);
        for m in 1..=64 {
            for (n, k) in [(1usize, 1usize), (100, 63), (1023, 777), (5000, 300), (20_000, 1200)] {
                let l = describe(&rc(m, n, k), DType::Bf16, DType::Bf16, 132).unwrap();
                assert!(l.rows * l.slices >= m && (l.slices - 1) * l.rows < m, "{m}x{n}x{k}: {l:?}");
                assert!(ferrotune_kernels::gemv_rows::x_fits(l.rows, k), "{m}x{n}x{k}: {l:?}");
                assert!(l.name.ends_with(&format!("_m{}", l.rows)));
            }
        }
    }
}
