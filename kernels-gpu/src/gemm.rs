//! GEMM maths shared by the PTX kernels and the CPU backend: operand layouts, the fused
//! epilogue (`act(alpha * acc + beta * c + bias)`), its launch-ABI encoding, the compiled
//! variants, and the CPU backend's epilogue pass over rows of f32 accumulators.

use crate::element::DType;
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
        Activation::from_code(flags >> 1).apply_for(out, v)
    }
}

/// Flag bit: the a, b, c, d arguments are device arrays of per-batch pointers.
pub const PTR_ARRAY: u32 = 16;

/// Which arithmetic a GEMM entry uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Math {
    /// f32 inputs, exact f32 FFMA.
    Ffma,
    /// f32 inputs rounded to TF32 by the tensor cores (`mma.sync.m16n8k8`), f32 accumulators.
    Tf32,
    /// f16 or bf16 inputs on tensor cores (`mma.sync.m16n8k16`), f32 accumulators.
    Half,
}

/// A compiled GEMM entry point: input dtype and arithmetic, operand layouts, the width of
/// its global loads, the output dtype and the block tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmVariant {
    pub dtype: DType,
    pub math: Math,
    pub a: Layout,
    pub b: Layout,
    /// Bytes per global load: 16, 8 or 4 (tensor cores: `cp.async` of that size, so both
    /// operand bases and leading dimensions must be aligned to it), or the element size (16-bit
    /// types: plain loads, any alignment). The FFMA kernel has 16 and 4.
    pub align: u8,
    /// f32 output (16-bit inputs only; f32 inputs always give f32).
    pub out_f32: bool,
    /// Index into [`tc::TILES`] (tensor cores) or [`ffma::TILES`] (FFMA).
    pub tile: u8,
}

impl GemmVariant {
    pub fn out_dtype(&self) -> DType {
        if self.out_f32 { DType::F32 } else { self.dtype }
    }

    /// The input name in entry points: `f32` (FFMA), `tf32`, `f16`, `bf16`.
    pub fn input_name(&self) -> &'static str {
        match self.math {
            Math::Tf32 => "tf32",
            _ => self.dtype.name(),
        }
    }

    /// Block tile rows, columns and threads of this variant.
    pub fn block(&self) -> (usize, usize, u32) {
        match self.math {
            Math::Ffma => (ffma::TILES[self.tile as usize], ffma::BN, ffma::THREADS),
            _ => {
                let t = tc::TILES[self.tile as usize];
                (t.bm(), t.bn(), t.threads())
            }
        }
    }

    /// Dynamic shared memory the launch needs (bytes).
    pub fn smem_bytes(&self) -> usize {
        match self.math {
            Math::Ffma => 0,
            _ => tc::TILES[self.tile as usize].smem_bytes(
                self.dtype.size_bytes(),
                self.a == Layout::Row,
                self.b == Layout::Col,
            ),
        }
    }

    /// The entry point name: `ft_gemm_<in>_<a><b>_v<align>_<out>_<tile>`, e.g.
    /// `ft_gemm_bf16_rc_v16_bf16_128x128x32w2x4s4` (tile = BMxBNxBK, warps in M x N, stages).
    pub fn entry_name(&self) -> EntryName {
        let mut n = EntryName { buf: [0u8; 64], len: 0 };
        n.push("ft_gemm_");
        n.push(self.input_name());
        n.push("_");
        n.push(if self.a == Layout::Row { "r" } else { "c" });
        n.push(if self.b == Layout::Row { "r" } else { "c" });
        n.push("_v");
        n.push_num(self.align as usize);
        n.push("_");
        n.push(self.out_dtype().name());
        n.push("_");
        match self.math {
            Math::Ffma => {
                n.push_num(ffma::TILES[self.tile as usize]);
                n.push("x128x8");
            }
            _ => tc::TILES[self.tile as usize].push_name(&mut n, self.dtype.size_bytes()),
        }
        n
    }

    /// Load widths compiled for an input: the cp.async sizes, plus scalar loads for 16-bit.
    pub fn aligns(math: Math) -> &'static [u8] {
        match math {
            Math::Ffma => &[16, 4],
            Math::Tf32 => &[16, 8, 4],
            Math::Half => &[16, 8, 4, 2],
        }
    }

    /// Every variant instantiated in the PTX (see `entry/gemm/tc_entries.rs` and
    /// `entry/gemm/ffma.rs`): for each input, layout and
    /// load width the default tile with each output type, and for 16-byte loads with the
    /// input's own output type every other tile of [`tc::TILES`] (the tuner's space).
    pub fn all() -> impl Iterator<Item = GemmVariant> {
        let inputs =
            [(DType::F32, Math::Ffma), (DType::F32, Math::Tf32), (DType::F16, Math::Half), (DType::Bf16, Math::Half)];
        let layouts = [
            (Layout::Row, Layout::Row),
            (Layout::Row, Layout::Col),
            (Layout::Col, Layout::Row),
            (Layout::Col, Layout::Col),
        ];
        inputs.into_iter().flat_map(move |(dtype, math)| {
            layouts.into_iter().flat_map(move |(a, b)| {
                let outs: &'static [bool] = if math == Math::Half { &[false, true] } else { &[true] };
                let defaults = Self::aligns(math).iter().flat_map(move |&align| {
                    outs.iter().map(move |&out_f32| GemmVariant { dtype, math, a, b, align, out_f32, tile: 0 })
                });
                let tiles = if math == Math::Ffma { 1..ffma::TILES.len() } else { 1..tc::TILES.len() };
                let own = GemmVariant { dtype, math, a, b, align: 16, out_f32: dtype == DType::F32, tile: 0 };
                let tuned = tiles.map(move |t| GemmVariant { tile: t as u8, ..own });
                let narrow: &'static [usize] = if math == Math::Ffma { &[] } else { &tc::NARROW_TILES };
                let narrow = narrow.iter().map(move |&t| GemmVariant { tile: t as u8, align: 8, ..own });
                defaults.chain(tuned).chain(narrow)
            })
        })
    }

    /// Whether this variant is compiled into the PTX (the set `all` lists): tile 0 at every
    /// load width and output type; the other tiles with the input's own output type at
    /// 16-byte loads, and the `tc::NARROW_TILES` also at 8-byte loads.
    pub fn is_compiled(&self) -> bool {
        // f32 inputs always give f32 (the flag is not part of their names).
        let own_out = self.dtype == DType::F32 || !self.out_f32;
        match self.math {
            Math::Ffma => self.tile == 0 || ((self.tile as usize) < ffma::TILES.len() && self.align == 16),
            _ if self.tile == 0 => true,
            _ => {
                (self.tile as usize) < tc::TILES.len()
                    && own_out
                    && (self.align == 16 || (self.align == 8 && tc::NARROW_TILES.contains(&(self.tile as usize))))
            }
        }
    }

    /// Whether this variant may run a problem: the load width must divide both base
    /// addresses (bytes), the leading dimensions and batch strides (bytes).
    pub fn fits_alignment(&self, ptrs: [u64; 2], lds_and_strides_elems: [usize; 4]) -> bool {
        let al = self.align as u64;
        let es = self.dtype.size_bytes() as u64;
        ptrs.iter().all(|p| p.is_multiple_of(al))
            && lds_and_strides_elems.iter().all(|&x| (x as u64 * es).is_multiple_of(al))
    }
}

/// A short entry-point name without allocation (`no_std`).
#[derive(Clone, Copy)]
pub struct EntryName {
    buf: [u8; 64],
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
        EntryName { buf: [0; 64], len: 0 }
    }

    /// Appends `s` (ASCII; what does not fit in the 64 bytes is dropped).
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

    /// Appends `x` in decimal.
    pub fn push_num(&mut self, mut x: usize) {
        let mut digits = [0u8; 20];
        let mut i = 0;
        loop {
            digits[i] = b'0' + (x % 10) as u8;
            i += 1;
            x /= 10;
            if x == 0 {
                break;
            }
        }
        while i > 0 {
            i -= 1;
            if self.len < self.buf.len() {
                self.buf[self.len] = digits[i];
                self.len += 1;
            }
        }
    }
}

/// Tensor-core kernel tiles (f16, bf16, tf32). The block tile is `BM x BN` with `BK` bytes of
/// K per pipeline stage (32 f16/bf16 or 16 tf32 for 64 bytes); warps are laid out `wm x wn`,
/// each owning `mt x nt` tiles of 16 x 8 outputs.
pub mod tc {
    /// One compiled tile configuration.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Tile {
        pub wm: usize,
        pub wn: usize,
        pub mt: usize,
        pub nt: usize,
        /// Bytes of K per stage (64 or 128).
        pub kb: usize,
        pub stages: usize,
        /// Blocks per SM the tile is designed for: the PTX declares it (`.minnctapersm`), so
        /// ptxas keeps registers within `65536 / (threads * min_blocks)`.
        pub min_blocks: usize,
    }

    impl Tile {
        pub const fn bm(&self) -> usize {
            self.wm * self.mt * 16
        }
        pub const fn bn(&self) -> usize {
            self.wn * self.nt * 8
        }
        pub const fn threads(&self) -> u32 {
            (self.wm * self.wn * 32) as u32
        }
        /// K elements per stage for inputs of `elem` bytes.
        pub const fn bk(&self, elem: usize) -> usize {
            self.kb / elem
        }

        /// Bytes of one stage's tile of `rows` (BM or BN) rows: k-contiguous tiles are `rows`
        /// rows of `kb` bytes plus 16 (so the 8 rows an `ldmatrix` reads hit distinct banks);
        /// M/N-contiguous tiles are `kb / elem` rows of `rows * elem` bytes plus 16 (16-bit,
        /// `ldmatrix.trans`) or 32 (tf32, whose scalar fragment reads then hit distinct banks).
        pub const fn operand_bytes(&self, rows: usize, elem: usize, kcontig: bool) -> usize {
            if kcontig { rows * self.pitch_k() } else { self.bk(elem) * pitch_mn(rows, elem) }
        }

        /// Row pitch of a k-contiguous tile (bytes).
        pub const fn pitch_k(&self) -> usize {
            self.kb + 16
        }

        /// Dynamic shared memory for all stages.
        pub const fn smem_bytes(&self, elem: usize, a_kcontig: bool, b_kcontig: bool) -> usize {
            self.stages
                * (self.operand_bytes(self.bm(), elem, a_kcontig) + self.operand_bytes(self.bn(), elem, b_kcontig))
        }

        pub(crate) fn push_name(&self, n: &mut super::EntryName, elem: usize) {
            n.push_num(self.bm());
            n.push("x");
            n.push_num(self.bn());
            n.push("x");
            n.push_num(self.bk(elem));
            n.push("w");
            n.push_num(self.wm);
            n.push("x");
            n.push_num(self.wn);
            n.push("s");
            n.push_num(self.stages);
        }
    }

    /// Row pitch of an M/N-contiguous tile of `rows` elements of `elem` bytes.
    pub const fn pitch_mn(rows: usize, elem: usize) -> usize {
        rows * elem + if elem == 4 { 32 } else { 16 }
    }

    const fn t(wm: usize, wn: usize, mt: usize, nt: usize, kb: usize, stages: usize, min_blocks: usize) -> Tile {
        Tile { wm, wn, mt, nt, kb, stages, min_blocks }
    }

    /// Tiles also compiled for 8-byte loads (16-bit operands whose rows are 8- but not
    /// 16-byte aligned, such as K = 700): the 128 x 256 tile, which beats tile 0 on mid-sized
    /// shapes that fill about one wave.
    pub const NARROW_TILES: [usize; 1] = [4];

    /// The compiled tiles; index 0 is the default of every variant. To add one, append it
    /// here and to the `tuned_tiles!` list in `entry/gemm/tc_entries.rs` (same order); the constraints its
    /// loads rely on are checked at compile time there, and the tuner picks it up.
    pub const TILES: [Tile; 8] = [
        t(2, 4, 4, 4, 64, 4, 2),  // 128 x 128, warp 64 x 32
        t(2, 4, 4, 8, 64, 3, 1),  // 128 x 256, warp 64 x 64
        t(4, 2, 4, 8, 64, 3, 1),  // 256 x 128, warp 64 x 64
        t(2, 2, 4, 8, 64, 4, 2),  // 128 x 128, warp 64 x 64, 4 warps
        t(2, 4, 4, 8, 128, 3, 1), // 128 x 256, 128 bytes of K per stage
        t(2, 2, 4, 4, 64, 4, 3),  // 128 x 64
        t(2, 2, 2, 8, 64, 4, 3),  // 64 x 128
        t(2, 2, 2, 4, 64, 4, 4),  // 64 x 64
    ];
}

/// Launch bounds of a GEMM entry (threads per block, designed blocks per SM), for the PTX
/// build to declare; `None` for names that are not tensor-core GEMM entries.
pub fn launch_bounds(entry: &str) -> Option<(u32, u32)> {
    if !entry.starts_with("ft_gemm_") {
        return None;
    }
    GemmVariant::all().filter(|v| v.math != Math::Ffma).find(|v| v.entry_name().as_str() == entry).map(|v| {
        let t = tc::TILES[v.tile as usize];
        // Narrower loads keep more of them in flight in registers: no residency promise there.
        let blocks = if v.align == 16 { t.min_blocks } else { 1 };
        (t.threads(), blocks as u32)
    })
}

/// Tile shapes of the FFMA kernel (f32): blocks of `TILES[t]` x 128 x 8, 256 threads of
/// `TILES[t] / 16` x 8 outputs each.
pub mod ffma {
    /// Block rows of each FFMA tile: tile 0 (128, 64 accumulators a thread, two blocks an SM)
    /// and tile 1 (256, 128 accumulators, one block an SM, half the shared-memory reads per
    /// multiply-add: the shape cuBLAS's exact-f32 kernel has on Hopper).
    pub const TILES: [usize; 2] = [128, 256];
    pub const BN: usize = 128;
    pub const BK: usize = 8;
    pub const THREADS: u32 = 256;
    /// Row pitch of a K-major tile of `rows` rows (floats): plus 4 keeps 16-byte alignment.
    pub const fn pitch(rows: usize) -> usize {
        rows + 4
    }
    /// Bytes of one shared-memory stage (the A and B tiles) of a block of `bm` rows.
    pub const fn stage_bytes(bm: usize) -> usize {
        BK * (pitch(bm) + pitch(BN)) * 4
    }
    /// The built-in tile for an exact-f32 problem: the 256-row tile (one block an SM) for a
    /// long K ([`K_MIN`] and up) where its blocks keep the SMs busy, at least [`WAVE_TENTHS`]
    /// tenths of them in one wave and on average three quarters over its waves; else the
    /// 128-row one (two blocks an SM: one block's start and epilogue overlap the other's main
    /// loop, and its smaller blocks even out a ragged last wave).
    ///
    /// Measured on the H200 with fragments double-buffered (bench/results/ffma-7eada27ec71e/,
    /// ours / cuBLAS, 256-row against 128-row, run 2):
    /// - long K, full waves: 4096^3 0.871x / 0.859x, 8192^3 0.904x / 0.875x, 2048x4096x6144
    ///   0.886x / 0.862x, 2000x6000x4000 0.887x / 0.872x; ties at 4000^3 and 4096x4096x3072;
    /// - ragged waves: 2560x2560x5000 (200 blocks on 132 SMs, 0.76 of two waves) 0.769x /
    ///   0.742x, 3072^3 (288 blocks, 0.73 of three waves) 0.729x / 0.851x;
    /// - K of 2048 and below, the 128-row tile ahead whatever the block count: 2048^3 0.790x /
    ///   0.797x, 6144x2048x1536 0.776x / 0.806x, 3000x5000x1000 0.764x / 0.800x, 8192x3072x768
    ///   0.729x / 0.765x, 4096x4096x2048 0.814x / 0.826x.
    ///
    /// Before the double buffer, the 256-row tile had won from 112 blocks up
    /// (bench/results/ffma-097966e9a9d9/, runs 3-6).
    pub fn tile_for(m: usize, n: usize, k: usize, batch: usize, sms: usize) -> u8 {
        let sms = sms.max(1);
        let blocks = m.div_ceil(TILES[1]) * n.div_ceil(BN) * batch.max(1);
        let slots = blocks.div_ceil(sms) * sms;
        let busy = blocks * 10 >= WAVE_TENTHS * sms && blocks * 4 >= 3 * slots;
        if k >= K_MIN && busy { 1 } else { 0 }
    }
    /// See [`tile_for`]: between the measured 2048 (the 128-row tile ahead) and 3072 (a tie).
    pub const K_MIN: usize = 3072;
    /// See [`tile_for`].
    pub const WAVE_TENTHS: usize = 8;
}

/// CPU path: one row of f32 accumulators becomes `act(alpha * acc + beta * c + bias)` in
/// place, with the activation as computed for results stored in `out` (the CPU backend then
/// narrows 16-bit outputs in bulk). `c` and `bias` (f32, the row's part) are only read when
/// the epilogue uses them and may be empty otherwise.
#[inline]
pub fn epilogue_row_in_place(epi: &Epilogue, c: &[f32], bias: &[f32], row: &mut [f32], out: DType) {
    let flags = epi.flags();
    let (reads_c, adds_bias) = (flags & 8 != 0, flags & 1 != 0);
    for (j, o) in row.iter_mut().enumerate() {
        let cv = if reads_c { c[j] } else { 0.0 };
        let bv = if adds_bias { bias[j] } else { 0.0 };
        *o = Epilogue::apply_flags(flags, epi.alpha, epi.beta, *o, cv, bv, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names_are_unique_and_well_formed() {
        let all: alloc_free::Names = GemmVariant::all().collect();
        // FFMA: 4 layouts x (2 widths + the 256-row tile); tf32: 4 layouts x (3 widths of tile 0 + 7 tiles + the
        // narrow tiles at 8 bytes); f16/bf16: 4 layouts x (4 widths x 2 outputs + 7 + narrow).
        let narrow = tc::NARROW_TILES.len();
        assert_eq!(all.len, 8 + 4 + 4 * (3 + 7 + narrow) + 2 * 4 * (4 * 2 + 7 + narrow));
        assert!(GemmVariant::all().all(|v| v.is_compiled()));
        for i in 0..all.len {
            for j in 0..i {
                assert!(all.get(i) != all.get(j), "duplicate {}", all.get(i));
            }
        }
        let v = GemmVariant {
            dtype: DType::Bf16,
            math: Math::Half,
            a: Layout::Row,
            b: Layout::Col,
            align: 16,
            out_f32: false,
            tile: 0,
        };
        assert_eq!(v.entry_name().as_str(), "ft_gemm_bf16_rc_v16_bf16_128x128x32w2x4s4");
        let t = GemmVariant { math: Math::Tf32, dtype: DType::F32, out_f32: true, tile: 1, align: 8, ..v };
        assert_eq!(t.entry_name().as_str(), "ft_gemm_tf32_rc_v8_f32_128x256x16w2x4s3");
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
    fn epilogue_rows_apply_alpha_beta_bias_and_act() {
        let e = Epilogue { alpha: 2.0, beta: 0.5, bias: true, act: Activation::Relu };
        let mut row = [3.0f32, -3.0];
        epilogue_row_in_place(&e, &[4.0, 4.0], &[-1.0, -1.0], &mut row, DType::F32);
        assert_eq!(row, [7.0, 0.0]);
        // beta = 0 and no bias: C and bias are never read (empty here).
        let mut plain = [1.5f32];
        epilogue_row_in_place(&Epilogue::PLAIN, &[], &[], &mut plain, DType::Bf16);
        assert_eq!(plain, [1.5]);
    }

    /// A fixed-capacity list of names, since the crate has no allocator.
    mod alloc_free {
        use super::super::GemmVariant;
        pub struct Names {
            pub names: [[u8; 64]; 256],
            pub lens: [usize; 256],
            pub len: usize,
        }
        impl Names {
            pub fn get(&self, i: usize) -> &str {
                core::str::from_utf8(&self.names[i][..self.lens[i]]).unwrap()
            }
        }
        impl FromIterator<GemmVariant> for Names {
            fn from_iter<I: IntoIterator<Item = GemmVariant>>(it: I) -> Self {
                let mut n = Names { names: [[0; 64]; 256], lens: [0; 256], len: 0 };
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
