//! Split-K GEMM maths shared by the reduce kernel (`entry/splitk.rs`), the host's launch
//! planning and the tests: how K is cut into slices, and the per-element reduction of the
//! slices' f32 partial products followed by the fused epilogue.

use crate::element::{DType, Element};
use crate::gemm::Epilogue;

/// K elements every slice but the last is a multiple of: 8 elements keep each slice's start
/// 16-byte aligned for 16-bit data (and 32-byte for f32), so the partial GEMMs can use the
/// same load width as the whole problem would.
pub const K_ALIGN: usize = 8;

/// The largest number of slices a call may ask for.
pub const MAX_SLICES: usize = 64;

/// How K is cut: `slices` slices of `kc` elements, the last one `last_k` (1..=kc) long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitPlan {
    pub slices: usize,
    pub kc: usize,
    pub last_k: usize,
}

impl SplitPlan {
    /// The plan for `requested` slices of `k`: `kc = ceil(k / requested)` rounded up to
    /// [`K_ALIGN`], then as many slices as that `kc` needs (fewer than asked when the rounding
    /// would leave some empty). One slice (no split) when `k <= K_ALIGN` or `requested <= 1`.
    pub const fn new(k: usize, requested: usize) -> SplitPlan {
        if requested <= 1 || k <= K_ALIGN {
            return SplitPlan { slices: 1, kc: k, last_k: k };
        }
        let kc = k.div_ceil(requested).div_ceil(K_ALIGN) * K_ALIGN;
        let slices = k.div_ceil(kc);
        SplitPlan { slices, kc, last_k: k - (slices - 1) * kc }
    }

    /// Whether the plan splits at all.
    pub const fn is_split(&self) -> bool {
        self.slices > 1
    }

    /// f32 elements of the workspace for an `m x n` output (one partial product per slice),
    /// `None` if that overflows.
    pub const fn workspace_elems_checked(&self, m: usize, n: usize) -> Option<usize> {
        match m.checked_mul(n) {
            Some(mn) => self.slices.checked_mul(mn),
            None => None,
        }
    }
}

/// One output element: `epilogue(sum over slices of load(s))`, slices added in order 0, 1, ...
/// (the GPU kernel and the CPU reference use this same function, so they round alike).
/// `c` and `bias` are only used when `flags` enables them (see [`Epilogue::flags`]).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn reduce_element(
    load: impl Fn(usize) -> f32,
    slices: usize,
    flags: u32,
    alpha: f32,
    beta: f32,
    c: f32,
    bias: f32,
    out: DType,
) -> f32 {
    let mut acc = 0.0f32;
    for s in 0..slices {
        acc += load(s);
    }
    finish_element(acc, flags, alpha, beta, c, bias, out)
}

/// The epilogue of one reduced element: the GEMM's own (`act(alpha acc + beta c + bias)`), so
/// a split call rounds its epilogue exactly as the unsplit kernel does.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn finish_element(acc: f32, flags: u32, alpha: f32, beta: f32, c: f32, bias: f32, out: DType) -> f32 {
    Epilogue::apply_flags(flags, alpha, beta, acc, c, bias, out)
}

/// CPU form of the reduce kernel: `d[i * ldc + j] = epilogue(sum_s w[s * m * n + i * n + j])`
/// for an `m x n` output; `c` is read with the same `ldc` (only when the epilogue reads C),
/// `bias` has `n` entries (only when enabled). Elements between `n` and `ldc` are untouched.
#[allow(clippy::too_many_arguments)]
pub fn cpu_reduce<O: Element>(
    w: &[f32],
    slices: usize,
    m: usize,
    n: usize,
    epi: &Epilogue,
    c: &[O],
    bias: &[O],
    d: &mut [O],
    ldc: usize,
) {
    let flags = epi.flags();
    for i in 0..m {
        for j in 0..n {
            let cv = if flags & 8 != 0 { c[i * ldc + j].to_f32() } else { 0.0 };
            let bv = if flags & 1 != 0 { bias[j].to_f32() } else { 0.0 };
            let v = reduce_element(|s| w[s * m * n + i * n + j], slices, flags, epi.alpha, epi.beta, cv, bv, O::DTYPE);
            d[i * ldc + j] = O::from_f32(v);
        }
    }
}

/// The reduce entry point for outputs of `out`: `ft_gemm_splitk_reduce_<out>`.
pub const fn reduce_entry(out: DType) -> &'static str {
    match out {
        DType::F32 => "ft_gemm_splitk_reduce_f32",
        DType::F16 => "ft_gemm_splitk_reduce_f16",
        DType::Bf16 => "ft_gemm_splitk_reduce_bf16",
    }
}

/// Threads per block of the reduce kernel; each thread handles 4 adjacent outputs of a row
/// per grid-stride step.
pub const REDUCE_THREADS: u32 = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_keep_slices_aligned_and_non_empty() {
        assert_eq!(SplitPlan::new(4097, 4), SplitPlan { slices: 4, kc: 1032, last_k: 4097 - 3 * 1032 });
        // 9 elements in 16 slices: kc rounds up to 8, so only 2 slices remain.
        assert_eq!(SplitPlan::new(9, 16), SplitPlan { slices: 2, kc: 8, last_k: 1 });
        assert_eq!(SplitPlan::new(8, 16), SplitPlan { slices: 1, kc: 8, last_k: 8 });
        assert_eq!(SplitPlan::new(1000, 1), SplitPlan { slices: 1, kc: 1000, last_k: 1000 });
        assert_eq!(SplitPlan::new(0, 4), SplitPlan { slices: 1, kc: 0, last_k: 0 });
        for k in 0..600 {
            for s in 1..=MAX_SLICES {
                let p = SplitPlan::new(k, s);
                assert!(p.slices >= 1 && p.slices <= s.max(1), "{k} {s} {p:?}");
                if p.is_split() {
                    assert_eq!(p.kc % K_ALIGN, 0);
                    assert!(p.last_k >= 1 && p.last_k <= p.kc, "{k} {s} {p:?}");
                    assert_eq!((p.slices - 1) * p.kc + p.last_k, k);
                }
            }
        }
    }

    #[test]
    fn the_reduction_adds_slices_then_applies_the_epilogue() {
        let w = [1.0f32, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0]; // 2 slices of 2 x 2
        let epi = Epilogue { alpha: 2.0, beta: 1.0, bias: true, act: crate::elementwise::Activation::Relu };
        let c = [0.5f32, 0.5, 7.0, -100.0, 9.0, 7.0];
        let bias = [1.0f32, -1.0];
        let mut d = [f32::NAN; 6];
        cpu_reduce(&w, 2, 2, 2, &epi, &c, &bias, &mut d, 3);
        assert_eq!(d[0], 2.0 * 11.0 + 0.5 + 1.0);
        assert_eq!(d[1], 2.0 * 22.0 + 0.5 - 1.0);
        assert!(d[2].is_nan(), "the padding between n and ldc is not written");
        assert_eq!(d[3], 0.0, "relu of 2 * 33 - 100 + 1");
        assert_eq!(d[4], 2.0 * 44.0 + 9.0 - 1.0);
    }
}
