//! The row small-M kernel on the host (`kernels-gpu/src/gemv_rows.rs`): whether a small-M
//! call takes it and why, and its launch. It can serve 1 to 16 rows of x (f16 or bf16) when a
//! config asks for it; the built-in plan gives it the calls of [`built_in_rows`] against a
//! weight whose rows are not 16-byte aligned and whose K is short, where the slab kernel
//! (`ops::gemv`) spends its time on funnel shifts or on copies of x: a block reads 8 weight
//! rows in their shared aligned frame, x staged once in shared memory, and its warps add the
//! products on tensor cores.

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

/// K up to which the built-in plan gives unaligned weights to this kernel: a row's vectors are
/// then one or two batches of a warp's loads, all in flight at once.
pub const MAX_K: usize = 1024;

/// Whether the built-in plan gives the row kernel a call of `m` rows of `dtype`: one row of
/// bf16. On the H200 (bench/results/rows-6ff05c69824b/run2-*, two repeats each) it took
/// 1x4097x777 in 8.5 µs against the slab kernel's 11.2-11.5, 1x5000x801 11.8 against 14.1,
/// 1x50000x255 46 against 51; but from 2 rows of x it lost (4x4097x777 15.2 against 11.8,
/// 7x12001x513 47 against 19), and every f16 row lost (1x4097x777 14.0 against 11.4-12.1:
/// each element's `cvt.f32.f16` costs where bf16 widens with a shift).
pub const fn built_in_rows(dtype: DType, m: usize) -> bool {
    matches!(dtype, DType::Bf16) && m == 1
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
        return Err("the row kernel takes 1..=16 rows of 16-bit data, one matrix");
    }
    if g.b_layout != Layout::Col {
        return Err("the row kernel reads K-contiguous weight rows (B column-major)");
    }
    let rows = kr::rows_for(g.m).unwrap_or(kr::MAX_M);
    if kr::x_bytes(rows, g.k).is_none_or(|b| b > kr::MAX_X_BYTES) {
        return Err("x staged in shared memory would take more than 40 KiB");
    }
    if asked || env.as_deref() == Some("1") {
        return Ok("8 weight rows per block in their aligned frame, x staged in shared memory, tensor cores");
    }
    if pb.is_multiple_of(16) && g.ldb.is_multiple_of(8) {
        return Err("weight rows 16-byte aligned (the slab kernel reads them whole)");
    }
    if g.k > MAX_K {
        return Err("K above 1024 (long rows: the slab kernel splits them over warps)");
    }
    if !built_in_rows(dtype, g.m) {
        return Err("the built-in plan takes it for one row of bf16 only (it lost on more rows and on f16)");
    }
    Ok("one row of bf16 against weight rows not 16-byte aligned, K short: a warp per weight row in its aligned \
        frame, x staged in shared memory")
}

/// The entry and blocks of a call `applies` accepted.
pub fn describe(g: &Gemm, dtype: DType, out: DType) -> Option<(&'static str, usize)> {
    let name = kr::entry_name(dtype, out, kr::rows_for(g.m)?)?;
    Some((name, kr::blocks(g.n)))
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
    let Some((name, blocks)) = describe(g, dtype, out) else {
        return Err(Error::UnsupportedDtype { op: OP, dtype: dtype.name() });
    };
    let rows = kr::rows_for(g.m).unwrap_or(kr::MAX_M);
    let smem = kr::x_bytes(rows, g.k)
        .filter(|&b| b <= kr::MAX_X_BYTES)
        .and_then(|_| kr::smem_bytes(rows, g.k))
        .ok_or_else(|| Error::InvalidConfig {
            op: OP,
            why: format!("{name}: x of {}x{} staged in shared memory exceeds {} bytes", g.m, g.k, kr::MAX_X_BYTES),
        })? as u32;
    if g.n == 0 || blocks > u32::MAX as usize {
        return Err(Error::InvalidConfig { op: OP, why: format!("{name}: {} weight rows", g.n) });
    }
    let kernel = gpu.kernels()?.function_with_smem(name, smem)?;
    if kr::THREADS > kernel.max_threads {
        return Err(Error::InvalidConfig {
            op: OP,
            why: format!("{name} allows {} threads per block, needs {}", kernel.max_threads, kr::THREADS),
        });
    }
    let cfg = LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (kr::THREADS, 1, 1), shared_mem_bytes: smem };
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
    lb.arg(&e.alpha).arg(&e.beta).arg(&flags).arg(&layout);
    // SAFETY: the arguments match `gemvr_entry!` in kernels-gpu/src/entry/gemv_rows.rs (5
    // pointers, 6 u32, 3 u64, 2 f32, 2 u32); the caller vouches for the operands; `applies`
    // checked the rows of x (at most the entry's), the weight's K-contiguous layout and the
    // staged x's size; the shared memory given here is x's and the warps' sums; the grid is
    // `blocks(n)` (8 rows per block, 8 apart).
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
    fn takes_one_row_of_bf16_against_short_unaligned_rows() {
        if std::env::var("FERROTUNE_SMALL_M_ROWS").is_ok() {
            eprintln!("skipped: FERROTUNE_SMALL_M_ROWS is set");
            return;
        }
        let ok = |g: &Gemm, pb: u64| applies(g, DType::Bf16, pb, None).is_ok();
        assert!(ok(&rc(1, 4097, 777), 256), "odd K");
        assert!(ok(&rc(1, 5, 7), 256));
        assert!(!ok(&rc(8, 3000, 65), 256), "8 rows: the slab kernel");
        assert!(applies(&rc(1, 4097, 777), DType::F16, 256, None).is_err(), "f16: the slab kernel");
        assert!(!ok(&rc(1, 4096, 768), 256), "aligned rows");
        assert!(ok(&rc(1, 4096, 768), 258), "a view at an odd offset");
        assert!(!ok(&rc(9, 4097, 777), 256), "9 rows");
        assert!(applies(&rc(4, 4097, 777), DType::Bf16, 256, Some((1, ROWS_WIDTH))).is_ok(), "asked for");
        assert!(!ok(&rc(1, 4097, 1025), 256), "K above 1024");
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
        assert!(applies(&rc(17, 4096, 100), DType::F16, 256, Some((1, ROWS_WIDTH))).is_err());
    }

    #[test]
    fn describes_the_entry_for_the_rows_of_x() {
        assert_eq!(describe(&rc(1, 4097, 777), DType::Bf16, DType::Bf16), Some(("ft_gemvr_bf16_bf16_m1", 520)));
        assert_eq!(describe(&rc(3, 5, 7), DType::F16, DType::F32), Some(("ft_gemvr_f16_f32_m4", 8)));
        assert_eq!(describe(&rc(9, 5, 7), DType::F16, DType::F16), Some(("ft_gemvr_f16_f16_m16", 8)));
        assert_eq!(describe(&rc(17, 5, 7), DType::F16, DType::F16), None);
    }
}
