//! GEMM maths shared by the PTX kernels and the CPU backend: operand layouts, the fused
//! epilogue (`act(alpha * acc + beta * c + bias)`), its launch-ABI encoding, the compiled
//! variants, and the CPU row-panel kernel.

use crate::element::{DType, Element};
use crate::elementwise::Activation;

/// How a matrix is stored. `Row`: element (i, j) at `i * ld + j`; `Col`: at `j * ld + i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    Row,
    Col,
}

impl Layout {
    pub const fn code(self) -> char {
        match self {
            Layout::Row => 'r',
            Layout::Col => 'c',
        }
    }

    /// Index of element `(i, j)` of a matrix with leading dimension `ld`.
    #[inline(always)]
    pub fn index(self, i: usize, j: usize, ld: usize) -> usize {
        match self {
            Layout::Row => i * ld + j,
            Layout::Col => j * ld + i,
        }
    }
}

/// What happens to each accumulator before it is stored: `act(alpha * acc + beta * c + bias[n])`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Epilogue {
    pub alpha: f32,
    /// 0 means C is not read at all (so it may hold anything, NaN included).
    pub beta: f32,
    pub bias: bool,
    pub act: Activation,
}

impl Epilogue {
    pub const PLAIN: Epilogue = Epilogue { alpha: 1.0, beta: 0.0, bias: false, act: Activation::None };

    /// The bits the kernels receive: bit 0 bias, bits 1-2 activation, bit 3 read C (beta != 0).
    pub fn flags(&self) -> u32 {
        let act = match self.act {
            Activation::None => 0,
            Activation::Relu => 1,
            Activation::GeluErf => 2,
            Activation::GeluTanh => 3,
        };
        (self.bias as u32) | (act << 1) | (((self.beta != 0.0) as u32) << 3)
    }

    /// Applies the epilogue to one accumulator; `c` and `bias` are only used when enabled.
    /// The activation is computed as for results stored in `out`.
    #[inline(always)]
    pub fn apply_flags(flags: u32, alpha: f32, beta: f32, acc: f32, c: f32, bias: f32, out: DType) -> f32 {
        let mut v = alpha * acc;
        if flags & 8 != 0 {
            v = crate::arch::fmaf(beta, c, v);
        }
        if flags & 1 != 0 {
            v += bias;
        }
        let act = match (flags >> 1) & 3 {
            0 => Activation::None,
            1 => Activation::Relu,
            2 => Activation::GeluErf,
            _ => Activation::GeluTanh,
        };
        act.apply_for(out, v)
    }
}

/// A compiled GEMM entry point: input dtype, operand layouts, whether global loads are 16
/// bytes wide (needs aligned pointers and leading dimensions), and the output dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmVariant {
    pub dtype: DType,
    pub a: Layout,
    pub b: Layout,
    pub vec: bool,
    /// f32 output (16-bit inputs only; f32 inputs always give f32).
    pub out_f32: bool,
}

impl GemmVariant {
    pub fn out_dtype(&self) -> DType {
        if self.out_f32 { DType::F32 } else { self.dtype }
    }

    /// Elements of the input dtype in one 16-byte global load.
    pub fn vec_elems(&self) -> usize {
        16 / self.dtype.size_bytes()
    }

    /// The entry point name: `ft_gemm_<dtype>_<a><b>_<v16|v1>_<out>`.
    pub fn entry_name(&self) -> EntryName {
        let mut buf = [0u8; 40];
        let mut len = 0;
        let mut push = |s: &str| {
            buf[len..len + s.len()].copy_from_slice(s.as_bytes());
            len += s.len();
        };
        push("ft_gemm_");
        push(self.dtype.name());
        push("_");
        push(if self.a == Layout::Row { "r" } else { "c" });
        push(if self.b == Layout::Row { "r" } else { "c" });
        push(if self.vec { "_v16_" } else { "_v1_" });
        push(self.out_dtype().name());
        EntryName { buf, len }
    }

    /// Every variant instantiated in the PTX (see `entry/gemm.rs`).
    pub fn all() -> impl Iterator<Item = GemmVariant> {
        let layouts = [Layout::Row, Layout::Col];
        DType::ALL.into_iter().flat_map(move |dtype| {
            layouts.into_iter().flat_map(move |a| {
                layouts.into_iter().flat_map(move |b| {
                    [true, false].into_iter().flat_map(move |vec| {
                        let outs: &[bool] = if dtype == DType::F32 { &[true] } else { &[false, true] };
                        outs.iter().map(move |&out_f32| GemmVariant { dtype, a, b, vec, out_f32 })
                    })
                })
            })
        })
    }
}

/// A short entry-point name without allocation (`no_std`).
#[derive(Clone, Copy)]
pub struct EntryName {
    buf: [u8; 40],
    len: usize,
}

impl Default for EntryName {
    fn default() -> EntryName {
        EntryName::new()
    }
}

impl EntryName {
    /// An empty name.
    pub const fn new() -> EntryName {
        EntryName { buf: [0; 40], len: 0 }
    }

    /// Appends `s` (ASCII; what does not fit in the 40 bytes is dropped).
    pub fn push(&mut self, s: &str) {
        for &b in s.as_bytes() {
            if self.len < self.buf.len() {
                self.buf[self.len] = b;
                self.len += 1;
            }
        }
    }

    pub fn as_str(&self) -> &str {
        // The buffer only ever receives ASCII pieces.
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

/// Tile shape of the tensor-core kernel (16-bit inputs): block 128 x 128 x 32, 8 warps as
/// 2 (M) x 4 (N), each warp 64 x 32 made of 4 x 4 `m16n8k16` tiles.
pub mod tc {
    pub const BM: usize = 128;
    pub const BN: usize = 128;
    pub const BK: usize = 32;
    pub const THREADS: u32 = 256;
    /// Shared-memory row pitch in elements: BK plus 8 (16 bytes) so the eight 16-byte rows an
    /// `ldmatrix` reads fall in different bank groups.
    pub const PITCH: usize = BK + 8;
    /// Depth of the `cp.async` ring used for k-contiguous aligned operands (A row-major,
    /// B column-major); its stages live in dynamic shared memory.
    pub const CP_STAGES: usize = 4;
    /// Dynamic shared memory the `cp.async` kernel needs: each stage one A and one B tile.
    pub const CP_SMEM_BYTES: usize = CP_STAGES * 2 * BM * PITCH * 2;

    /// Whether a variant runs the `cp.async` body (and needs `CP_SMEM_BYTES` of dynamic
    /// shared memory at launch).
    pub fn uses_cp_async(v: &super::GemmVariant) -> bool {
        v.dtype != crate::DType::F32 && v.vec && v.a == super::Layout::Row && v.b == super::Layout::Col
    }
}

/// Tile shape of the FFMA kernel (f32): block 128 x 128 x 8, 256 threads of 8 x 8 outputs.
pub mod ffma {
    pub const BM: usize = 128;
    pub const BN: usize = 128;
    pub const BK: usize = 8;
    pub const THREADS: u32 = 256;
    /// Row pitch of the K-major tiles (floats): BM plus 4 keeps 16-byte alignment.
    pub const PITCH: usize = BM + 4;
}

/// Operands of the CPU kernel: f32 copies, A row-major `m x k`, B row-major `k x n`.
pub struct CpuOperands<'a> {
    pub a: &'a [f32],
    pub b: &'a [f32],
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

/// CPU path: rows `row0 .. row0 + out.len() / n` of `act(alpha A B + beta C + bias)`, written
/// to `out` (row-major, `n` columns) in `O`. `c` holds the same rows of C (ignored unless the
/// epilogue reads it). Accumulates in f32 like the GPU kernels; `acc` is scratch of `n` floats.
#[allow(clippy::too_many_arguments)]
pub fn cpu_rows<O: Element>(
    ops: &CpuOperands<'_>,
    row0: usize,
    epi: &Epilogue,
    c: &[O],
    bias: &[O],
    out: &mut [O],
    acc: &mut [f32],
) {
    let n = ops.n;
    let flags = epi.flags();
    for (r, out_row) in out.chunks_exact_mut(n).enumerate() {
        let i = row0 + r;
        acc.iter_mut().for_each(|v| *v = 0.0);
        let a_row = &ops.a[i * ops.k..(i + 1) * ops.k];
        for (kk, &aik) in a_row.iter().enumerate() {
            let b_row = &ops.b[kk * n..(kk + 1) * n];
            for (v, &bkj) in acc.iter_mut().zip(b_row) {
                *v = crate::arch::fmaf(aik, bkj, *v);
            }
        }
        for (j, o) in out_row.iter_mut().enumerate() {
            let cv = if flags & 8 != 0 { c[r * n + j].to_f32() } else { 0.0 };
            let bv = if flags & 1 != 0 { bias[j].to_f32() } else { 0.0 };
            *o = O::from_f32(Epilogue::apply_flags(flags, epi.alpha, epi.beta, acc[j], cv, bv, O::DTYPE));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names_are_unique_and_well_formed() {
        let all: alloc_free::Names = GemmVariant::all().collect();
        assert_eq!(all.len, 40);
        for i in 0..all.len {
            for j in 0..i {
                assert!(all.get(i) != all.get(j), "duplicate {}", all.get(i));
            }
        }
        let v = GemmVariant { dtype: DType::Bf16, a: Layout::Row, b: Layout::Col, vec: true, out_f32: false };
        assert_eq!(v.entry_name().as_str(), "ft_gemm_bf16_rc_v16_bf16");
    }

    #[test]
    fn epilogue_flags_round_trip_through_apply() {
        let e = Epilogue { alpha: 2.0, beta: 0.5, bias: true, act: Activation::Relu };
        assert_eq!(Epilogue::apply_flags(e.flags(), 2.0, 0.5, 3.0, 4.0, -1.0, DType::F32), 7.0);
        assert_eq!(Epilogue::apply_flags(e.flags(), 2.0, 0.5, -3.0, 4.0, -1.0, DType::F32), 0.0);
        // beta = 0 never reads C, even if it is NaN.
        let p = Epilogue::PLAIN;
        assert_eq!(Epilogue::apply_flags(p.flags(), 1.0, 0.0, 1.5, f32::NAN, f32::NAN, DType::F32), 1.5);
    }

    #[test]
    fn cpu_rows_multiplies() {
        // [1 2; 3 4] x [5 6; 7 8] = [19 22; 43 50]
        let ops = CpuOperands { a: &[1.0, 2.0, 3.0, 4.0], b: &[5.0, 6.0, 7.0, 8.0], m: 2, n: 2, k: 2 };
        let mut out = [0.0f32; 4];
        let mut acc = [0.0f32; 2];
        cpu_rows(&ops, 0, &Epilogue::PLAIN, &[], &[], &mut out, &mut acc);
        assert_eq!(out, [19.0, 22.0, 43.0, 50.0]);
    }

    /// A fixed-capacity list of names, since the crate has no allocator.
    mod alloc_free {
        use super::super::GemmVariant;
        pub struct Names {
            pub names: [[u8; 40]; 64],
            pub lens: [usize; 64],
            pub len: usize,
        }
        impl Names {
            pub fn get(&self, i: usize) -> &str {
                core::str::from_utf8(&self.names[i][..self.lens[i]]).unwrap()
            }
        }
        impl FromIterator<GemmVariant> for Names {
            fn from_iter<I: IntoIterator<Item = GemmVariant>>(it: I) -> Self {
                let mut n = Names { names: [[0; 40]; 64], lens: [0; 64], len: 0 };
                for v in it {
                    let e = v.entry_name();
                    let s = e.as_str().as_bytes();
                    n.names[n.len][..s.len()].copy_from_slice(s);
                    n.lens[n.len] = s.len();
                    n.len += 1;
                }
                n
            }
        }
    }
}
