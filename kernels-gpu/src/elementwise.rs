//! The memory-bound family: per-element maths (written once, used by the PTX entry points and
//! by the CPU backend), the variant list the PTX contains, and the slice loops of the CPU path.

use crate::arch::{MulAdd, Portable};
use crate::element::{DType, Element};
use crate::math;

/// A map from `K` input elements to one output element. The GPU entry points and the CPU
/// backend both call `apply`; this is the only place an op's maths is written.
pub trait Map<const K: usize>: Copy + Send + Sync {
    /// The op on f32 values (what f16/bf16 inputs are widened to).
    fn map_f32(self, x: [f32; K]) -> f32;

    /// The op on f32 values whose result is stored in `dtype`: [`Map::map_f32`], except where a
    /// cheaper form is exact enough for 16-bit results (GELU, see [`Activation::apply_for`]).
    #[inline(always)]
    fn map_for(self, dtype: DType, x: [f32; K]) -> f32 {
        let _ = dtype;
        self.map_f32(x)
    }

    /// [`Map::map_for`] with the maths' multiply-adds done by `f` (the host's FMA loops pass a
    /// fused one); the ops whose maths has multiply-adds worth fusing (GELU) override it.
    #[inline(always)]
    fn map_with<F: MulAdd>(self, f: F, dtype: DType, x: [f32; K]) -> f32 {
        let _ = f;
        self.map_for(dtype, x)
    }

    /// The op on storage values: widen, compute in f32, round back (nearest even).
    #[inline(always)]
    fn apply<T: Element>(self, x: [T; K]) -> T {
        T::from_f32(self.map_for(T::DTYPE, x.map(T::to_f32)))
    }
}

/// `y = x`: a bit copy (no conversion), the bandwidth probe.
#[derive(Clone, Copy, Debug, Default)]
pub struct CopyBits;
impl Map<1> for CopyBits {
    #[inline(always)]
    fn map_f32(self, x: [f32; 1]) -> f32 {
        x[0]
    }
    #[inline(always)]
    fn apply<T: Element>(self, x: [T; 1]) -> T {
        x[0]
    }
}

/// `y = alpha * x`.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    pub alpha: f32,
}
impl Map<1> for Scale {
    #[inline(always)]
    fn map_f32(self, x: [f32; 1]) -> f32 {
        self.alpha * x[0]
    }
}

/// `y = max(x, 0)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Relu;
impl Map<1> for Relu {
    #[inline(always)]
    fn map_f32(self, x: [f32; 1]) -> f32 {
        math::relu(x[0])
    }
}

/// `y = x Φ(x)` (exact GELU, erf form).
#[derive(Clone, Copy, Debug, Default)]
pub struct GeluErf;
impl Map<1> for GeluErf {
    #[inline(always)]
    fn map_f32(self, x: [f32; 1]) -> f32 {
        math::gelu_erf(x[0])
    }
    #[inline(always)]
    fn map_for(self, dtype: DType, x: [f32; 1]) -> f32 {
        Activation::GeluErf.apply_for(dtype, x[0])
    }
    #[inline(always)]
    fn map_with<F: MulAdd>(self, f: F, dtype: DType, x: [f32; 1]) -> f32 {
        Activation::GeluErf.apply_with(f, dtype, x[0])
    }
}

/// `y = 0.5 x (1 + tanh(√(2/π)(x + 0.044715 x³)))` (tanh approximation of GELU).
#[derive(Clone, Copy, Debug, Default)]
pub struct GeluTanh;
impl Map<1> for GeluTanh {
    #[inline(always)]
    fn map_f32(self, x: [f32; 1]) -> f32 {
        math::gelu_tanh(x[0])
    }
    #[inline(always)]
    fn map_for(self, dtype: DType, x: [f32; 1]) -> f32 {
        Activation::GeluTanh.apply_for(dtype, x[0])
    }
    #[inline(always)]
    fn map_with<F: MulAdd>(self, f: F, dtype: DType, x: [f32; 1]) -> f32 {
        Activation::GeluTanh.apply_with(f, dtype, x[0])
    }
}

/// `out = a + b`; with a broadcast row of `b` this is also `bias_add`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Add;
impl Map<2> for Add {
    #[inline(always)]
    fn map_f32(self, x: [f32; 2]) -> f32 {
        x[0] + x[1]
    }
}

/// `y = alpha * x + y` (inputs `[x, y]`, output written over `y`).
#[derive(Clone, Copy, Debug)]
pub struct Axpy {
    pub alpha: f32,
}
impl Map<2> for Axpy {
    #[inline(always)]
    fn map_f32(self, x: [f32; 2]) -> f32 {
        crate::arch::fmaf(self.alpha, x[0], x[1])
    }
}

/// The activation at the end of the fused chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Activation {
    None,
    Relu,
    GeluErf,
    GeluTanh,
}

impl Activation {
    pub const ALL: [Activation; 4] = [Activation::None, Activation::Relu, Activation::GeluErf, Activation::GeluTanh];

    /// The activation of a 2-bit code (0 none, 1 relu, 2 GELU erf, 3 GELU tanh; higher bits
    /// ignored): the GEMM epilogue flags' bits 1-2.
    #[inline(always)]
    pub const fn from_code(code: u32) -> Activation {
        match code & 3 {
            0 => Activation::None,
            1 => Activation::Relu,
            2 => Activation::GeluErf,
            _ => Activation::GeluTanh,
        }
    }

    #[inline(always)]
    pub fn apply(self, x: f32) -> f32 {
        self.apply_with(Portable, DType::F32, x)
    }

    /// The activation as computed for results stored in `dtype`: 16-bit results use the
    /// cheaper GELU forms, whose error (about 1e-5) is far below their rounding. On 16-bit
    /// data GELU costs more instructions per byte than the memory system allows otherwise.
    #[inline(always)]
    pub fn apply_for(self, dtype: DType, x: f32) -> f32 {
        self.apply_with(Portable, dtype, x)
    }

    /// [`Activation::apply_for`] with the GELU maths' multiply-adds done by `f`.
    #[inline(always)]
    pub fn apply_with<F: MulAdd>(self, f: F, dtype: DType, x: f32) -> f32 {
        let small = matches!(dtype, DType::F16 | DType::Bf16);
        match self {
            Activation::None => x,
            Activation::Relu => math::relu(x),
            Activation::GeluErf if small => math::gelu_erf_fast_with(f, x),
            Activation::GeluTanh if small => math::gelu_tanh_fast_with(f, x),
            Activation::GeluErf => math::gelu_erf_with(f, x),
            Activation::GeluTanh => math::gelu_tanh_with(f, x),
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Activation::None => "none",
            Activation::Relu => "relu",
            Activation::GeluErf => "gelu_erf",
            Activation::GeluTanh => "gelu_tanh",
        }
    }
}

/// The fused chain `out = act((a + b) * c)` in one pass. Each PTX entry point fixes `act` at
/// compile time (the match folds away); the CPU backend passes it at run time.
#[derive(Clone, Copy, Debug)]
pub struct AddMulAct {
    pub act: Activation,
}
impl Map<3> for AddMulAct {
    #[inline(always)]
    fn map_f32(self, x: [f32; 3]) -> f32 {
        self.act.apply((x[0] + x[1]) * x[2])
    }
    #[inline(always)]
    fn map_for(self, dtype: DType, x: [f32; 3]) -> f32 {
        self.act.apply_for(dtype, (x[0] + x[1]) * x[2])
    }
    #[inline(always)]
    fn map_with<F: MulAdd>(self, f: F, dtype: DType, x: [f32; 3]) -> f32 {
        self.act.apply_with(f, dtype, (x[0] + x[1]) * x[2])
    }
}

/// The ops of this family, as named in entry points, profiles and on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemOp {
    Copy,
    Scale,
    Relu,
    GeluErf,
    GeluTanh,
    Add,
    Axpy,
    BiasAdd,
    Chain(Activation),
}

impl ElemOp {
    pub const ALL: [ElemOp; 12] = [
        ElemOp::Copy,
        ElemOp::Scale,
        ElemOp::Relu,
        ElemOp::GeluErf,
        ElemOp::GeluTanh,
        ElemOp::Add,
        ElemOp::Axpy,
        ElemOp::BiasAdd,
        ElemOp::Chain(Activation::None),
        ElemOp::Chain(Activation::Relu),
        ElemOp::Chain(Activation::GeluErf),
        ElemOp::Chain(Activation::GeluTanh),
    ];

    /// The name used in entry points (`ft_<name>_<dtype>_...`) and on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            ElemOp::Copy => "copy",
            ElemOp::Scale => "scale",
            ElemOp::Relu => "relu",
            ElemOp::GeluErf => "gelu_erf",
            ElemOp::GeluTanh => "gelu_tanh",
            ElemOp::Add => "add",
            ElemOp::Axpy => "axpy",
            ElemOp::BiasAdd => "bias_add",
            ElemOp::Chain(Activation::None) => "add_mul",
            ElemOp::Chain(Activation::Relu) => "add_mul_relu",
            ElemOp::Chain(Activation::GeluErf) => "add_mul_gelu_erf",
            ElemOp::Chain(Activation::GeluTanh) => "add_mul_gelu_tanh",
        }
    }

    pub fn from_name(s: &str) -> Option<ElemOp> {
        ElemOp::ALL.into_iter().find(|op| op.name() == s)
    }

    /// Number of tensors read (bias counts as one: it is read once per row but stays cached).
    pub const fn inputs(self) -> usize {
        match self {
            ElemOp::Copy | ElemOp::Scale | ElemOp::Relu | ElemOp::GeluErf | ElemOp::GeluTanh => 1,
            ElemOp::Add | ElemOp::Axpy | ElemOp::BiasAdd => 2,
            ElemOp::Chain(_) => 3,
        }
    }

    /// Fewest bytes the op must move through device memory for `n` output elements of `elem`
    /// bytes: every full-size input read once, the output written once (bias: one row read).
    pub const fn min_bytes(self, n: usize, elem: usize, bias_cols: usize) -> usize {
        match self {
            ElemOp::BiasAdd => (2 * n + bias_cols) * elem,
            _ => (self.inputs() + 1) * n * elem,
        }
    }
}

/// A compile-time variant of an elementwise entry point: 16-byte vector accesses or scalar
/// ones, and how many vectors each thread has in flight per loop step. Threads per block and
/// the grid size are launch-time parameters and need no variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ElemVariant {
    /// 16-byte vector loads/stores (needs 16-byte aligned pointers); else one element each.
    pub vec16: bool,
    /// Vectors per thread per loop step (independent loads in flight).
    pub unroll: u32,
}

/// Every variant instantiated in the PTX for every elementwise op and dtype (see `entry/`).
/// Adding one here and in the `variants!` list of `entry/elementwise.rs` makes it tunable.
pub const ELEM_VARIANTS: [ElemVariant; 6] = [
    ElemVariant { vec16: true, unroll: 1 },
    ElemVariant { vec16: true, unroll: 2 },
    ElemVariant { vec16: true, unroll: 4 },
    ElemVariant { vec16: false, unroll: 1 },
    ElemVariant { vec16: false, unroll: 2 },
    ElemVariant { vec16: false, unroll: 4 },
];

impl ElemVariant {
    /// The suffix of the entry point: `v16_u2`, `v1_u4`, ...
    pub fn suffix(self) -> (&'static str, u32) {
        (if self.vec16 { "v16" } else { "v1" }, self.unroll)
    }
}

/// CPU path: `out[i] = op(inputs[0][i], ..)`. All slices have `out.len()` elements (checked by
/// the caller, asserted here). Every input is re-sliced to exactly `out.len()` first, so the
/// loop has no bounds checks and LLVM turns the (branch-free, see `math`) maths into SIMD over
/// the elements; the host compiles it once per instruction set it dispatches to.
#[inline(always)]
pub fn map_into<T: Element, const K: usize, Op: Map<K>>(op: Op, inputs: [&[T]; K], out: &mut [T]) {
    for x in &inputs {
        assert_eq!(x.len(), out.len(), "map_into: length mismatch");
    }
    let n = out.len();
    let ins: [&[T]; K] = inputs.map(|x| &x[..n]);
    for i in 0..n {
        out[i] = op.apply(ins.map(|x| x[i]));
    }
}

/// CPU path for ops that overwrite their last input (`axpy`): `io[i] = op(.., io[i])`; the
/// loop vectorises like [`map_into`]'s.
#[inline(always)]
pub fn map_inplace<T: Element, Op: Map<2>>(op: Op, x: &[T], io: &mut [T]) {
    assert_eq!(x.len(), io.len(), "map_inplace: length mismatch");
    for (o, &xi) in io.iter_mut().zip(x) {
        *o = op.apply([xi, *o]);
    }
}

/// Elements per block of the widened CPU path ([`map_into_widened`]): the inputs' and the
/// result's f32 copies stay in L1 (at most 4 KiB) and the conversion and lane loops are long
/// enough that their set-up does not show (64 took 10% longer for bf16 GELU on AVX-512, 512
/// and 1024 no less than 256).
pub const WIDEN_BLOCK: usize = 256;

/// Converts blocks of storage values to f32 and back, for [`map_into_widened`]: the host gives
/// hardware conversions (x86 F16C, AVX512-BF16) where the CPU has them; [`PortableWiden`]
/// otherwise.
pub trait Widen<T: Element>: Copy {
    /// `dst[i] = src[i]` widened, exactly; equal lengths.
    fn widen(self, src: &[T], dst: &mut [f32]);
    /// `dst[i] = src[i]` rounded to nearest even; equal lengths.
    fn narrow(self, src: &[f32], dst: &mut [T]);
}

/// [`Widen`] by the element's own conversions (branch-free, so the loops vectorise).
#[derive(Clone, Copy, Debug, Default)]
pub struct PortableWiden;
impl<T: Element> Widen<T> for PortableWiden {
    #[inline(always)]
    fn widen(self, src: &[T], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = s.to_f32();
        }
    }
    #[inline(always)]
    fn narrow(self, src: &[f32], dst: &mut [T]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = T::from_f32(s);
        }
    }
}

/// CPU path for 16-bit storage: [`map_into`] in blocks of [`WIDEN_BLOCK`] elements; each block's
/// inputs are widened by `conv` into f32 lanes, the op runs over the lanes
/// ([`Map::map_for`] `T::DTYPE`, the same maths as [`Map::apply`]) and the results are narrowed
/// back. Conversion runs as whole-block loops, so hardware conversions can do 8 or 16 at once,
/// and the lane loop always runs the whole block (a fixed trip count, no bounds checks: it
/// vectorises); in the last, partial block the lanes past the end compute on stale values and
/// are not stored.
#[inline(always)]
pub fn map_into_widened<T: Element, const K: usize, Op: Map<K>, C: Widen<T>>(
    op: Op,
    conv: C,
    inputs: [&[T]; K],
    out: &mut [T],
) {
    for x in &inputs {
        assert_eq!(x.len(), out.len(), "map_into_widened: length mismatch");
    }
    let mut xs = [[0f32; WIDEN_BLOCK]; K];
    let mut ys = [0f32; WIDEN_BLOCK];
    for (b, o) in out.chunks_mut(WIDEN_BLOCK).enumerate() {
        let (start, m) = (b * WIDEN_BLOCK, o.len());
        for (x, input) in xs.iter_mut().zip(&inputs) {
            conv.widen(&input[start..start + m], &mut x[..m]);
        }
        map_lanes(op, T::DTYPE, &xs, &mut ys);
        conv.narrow(&ys[..m], o);
    }
}

/// `ys[i] = op(xs[0][i], ..)` over a whole block.
#[inline(always)]
fn map_lanes<const K: usize, Op: Map<K>>(
    op: Op,
    dtype: DType,
    xs: &[[f32; WIDEN_BLOCK]; K],
    ys: &mut [f32; WIDEN_BLOCK],
) {
    for (i, y) in ys.iter_mut().enumerate() {
        *y = op.map_for(dtype, core::array::from_fn(|k| xs[k][i]));
    }
}

/// [`map_inplace`] by blocks, as [`map_into_widened`]: `io[i] = op(x[i], io[i])`.
#[inline(always)]
pub fn map_inplace_widened<T: Element, Op: Map<2>, C: Widen<T>>(op: Op, conv: C, x: &[T], io: &mut [T]) {
    assert_eq!(x.len(), io.len(), "map_inplace_widened: length mismatch");
    let mut xs = [[0f32; WIDEN_BLOCK]; 2];
    let mut ys = [0f32; WIDEN_BLOCK];
    for (b, o) in io.chunks_mut(WIDEN_BLOCK).enumerate() {
        let (start, m) = (b * WIDEN_BLOCK, o.len());
        conv.widen(&x[start..start + m], &mut xs[0][..m]);
        conv.widen(o, &mut xs[1][..m]);
        map_lanes(op, T::DTYPE, &xs, &mut ys);
        conv.narrow(&ys[..m], o);
    }
}

/// CPU path of `bias_add_inplace` for whole rows: `rows[r * cols + c] += bias[c]`.
#[inline(always)]
pub fn bias_add_rows<T: Element>(rows: &mut [T], bias: &[T]) {
    assert!(!bias.is_empty() && rows.len().is_multiple_of(bias.len()), "bias_add_rows: partial row");
    for row in rows.chunks_exact_mut(bias.len()) {
        map_inplace(Add, bias, row);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_names_round_trip() {
        for op in ElemOp::ALL {
            assert_eq!(ElemOp::from_name(op.name()), Some(op));
        }
        assert_eq!(ElemOp::from_name("nope"), None);
    }

    #[test]
    fn min_bytes_counts_inputs_and_output() {
        assert_eq!(ElemOp::Copy.min_bytes(10, 4, 0), 80);
        assert_eq!(ElemOp::Chain(Activation::Relu).min_bytes(10, 2, 0), 80);
        assert_eq!(ElemOp::BiasAdd.min_bytes(12, 4, 3), (24 + 3) * 4);
    }

    #[test]
    fn the_widened_paths_are_the_per_element_paths() {
        // Every length around the block size, 16-bit types, ops with 1, 2 and 3 inputs: the
        // blocked loops give the same bits as the per-element ones (tails included).
        fn check<T: Element + core::fmt::Debug>(n: usize) {
            let v = |seed: u32| -> [T; 200] {
                core::array::from_fn(|i| {
                    T::from_f32((((i as u32).wrapping_mul(2654435761) ^ seed) % 2001) as f32 / 125.0 - 8.0)
                })
            };
            let (a, b, c) = (v(1), v(7), v(13));
            let (mut want, mut got) = ([T::from_f32(0.0); 200], [T::from_f32(f32::NAN); 200]);
            let same = |x: &[T], y: &[T]| x.iter().zip(y).all(|(p, q)| p.to_f32().to_bits() == q.to_f32().to_bits());
            let chain = AddMulAct { act: Activation::GeluErf };
            map_into(chain, [&a[..n], &b[..n], &c[..n]], &mut want[..n]);
            map_into_widened(chain, PortableWiden, [&a[..n], &b[..n], &c[..n]], &mut got[..n]);
            assert!(same(&want[..n], &got[..n]), "chain n={n}");
            map_into(GeluTanh, [&a[..n]], &mut want[..n]);
            map_into_widened(GeluTanh, PortableWiden, [&a[..n]], &mut got[..n]);
            assert!(same(&want[..n], &got[..n]), "gelu_tanh n={n}");
            let (mut y1, mut y2) = (b, b);
            map_inplace(Axpy { alpha: 0.5 }, &a[..n], &mut y1[..n]);
            map_inplace_widened(Axpy { alpha: 0.5 }, PortableWiden, &a[..n], &mut y2[..n]);
            assert!(same(&y1, &y2), "axpy n={n}");
        }
        for n in [0, 1, 63, 64, 65, 127, 128, 129, 200] {
            check::<half::f16>(n);
            check::<half::bf16>(n);
        }
    }

    #[test]
    fn copy_is_a_bit_copy() {
        // A signalling-NaN payload survives: no conversion happens.
        let x = [half::f16::from_bits(0x7d01)];
        assert_eq!(CopyBits.apply(x).to_bits(), 0x7d01);
    }
}
