//! The Hopper GEMM's TMA-store epilogue (one-tile form, no C read): each consumer thread applies
//! `act(alpha * acc + bias)` to its accumulators in registers (nothing for the plain product),
//! converts them and writes them into its warpgroup's 64-row slab of the (idle) ring in the
//! 128-byte swizzle (16-bit outputs: one `stmatrix` per two fragment column groups); one thread
//! then stores the slab with TMA, box by box. The warps spend a few dozen shared stores per tile
//! instead of a staged f32 round trip and a row loop of global stores, and the copy engine
//! writes D (clipping the ragged edge) while the block retires. The persistent form, whose
//! ring is busy with the next tile, does the same per warp: each warp's 16 rows box by box
//! through buffers of its own, stored by its lane 0, no barrier across the warpgroup. There
//! the epilogue runs a box at a time in place before the box is written (`box_bias.rs`);
//! the one-tile form applies it a pair of column groups at a time as it writes ([`epi4`]).

use crate::arch::fmaf;
use crate::arch::nvptx::{st_shared_v2_f32, sync_warp};
use crate::arch::sm90::{
    bulk_commit, bulk_wait_read, bulk_wait_read_n, fence_proxy_async, named_barrier, stmatrix_x4, tma_store_3d,
};
use crate::element::Element;
use crate::elementwise::Activation;
use crate::gemm_sm90::{STORE_BOX_BYTES, WARP_BOX_BYTES, WG_THREADS, store_box_cols, store_box_row_bytes, sw_offset};

use super::box_bias::{BoxBias, PLAIN, activate_box, box_bias};
use super::epilogue::Out;

/// Where a warpgroup's slab goes: its shared staging, the D map, and the slab's output origin.
#[derive(Clone, Copy)]
pub(super) struct Slab {
    /// 1024-aligned shared address of `BN / box_cols` boxes of 64 rows x 128 bytes.
    pub region: u32,
    /// Generic address of D's tensor map (dims N, M, batch; boxes of 128 bytes x 64 rows).
    pub map_d: u64,
    /// Output row and column of the slab's first element, and the batch matrix.
    pub m0: usize,
    pub n0: usize,
    pub z: i32,
    /// Named barrier of this warpgroup (its 128 threads only).
    pub bar: u32,
}

/// Stores a warpgroup's 64 x `2 NACC` accumulators (wgmma fragment layout) through TMA.
///
/// # Safety
/// The whole warpgroup calls it (`lt` its thread index) after its last wgmma completed and no
/// other thread reads or writes `s.region` (the ring after the main loop); the bias covers
/// every column when `out.flags` has bit 0; the map describes D for this launch.
#[inline(always)]
pub(super) unsafe fn store_tma<O: Element, const NACC: usize>(
    acc: &[f32; NACC],
    bias: *const O,
    out: Out,
    s: Slab,
    lt: usize,
) {
    // One monomorph per activation (and the plain product), so each unrolled body carries
    // one epilogue's code.
    // SAFETY (each arm): forwarded.
    unsafe {
        match code(&out) {
            0 => store_as::<O, NACC, 0>(acc, bias, out, s, lt),
            1 => store_as::<O, NACC, 1>(acc, bias, out, s, lt),
            2 => store_as::<O, NACC, 2>(acc, bias, out, s, lt),
            3 => store_as::<O, NACC, 3>(acc, bias, out, s, lt),
            _ => store_as::<O, NACC, PLAIN>(acc, bias, out, s, lt),
        }
    }
}

/// The code a launch's stores run with: [`PLAIN`], else the activation's (0..=3).
#[inline(always)]
fn code(out: &Out) -> u32 {
    let act = (out.flags >> 1) & 3;
    if act == 0 && out.flags & 1 == 0 && out.alpha == 1.0 { PLAIN } else { act }
}

/// Calls `$f(j, [acc[4j], .., acc[4j + 3]])` for every `j < NACC / 4` with constant indices
/// (written out: a loop the compiler declines to unroll would index the accumulators
/// dynamically and move them to local memory). The modulo keeps the dead indices in range.
macro_rules! each_fragment {
    ($f:ident, $acc:ident, $nacc:expr; $($j:literal)*) => {
        $(
            if $j < $nacc / 4 {
                let i = (4 * $j) % $nacc;
                $f($j, [$acc[i], $acc[(i + 1) % $nacc], $acc[(i + 2) % $nacc], $acc[(i + 3) % $nacc]]);
            }
        )*
    };
}

/// As [`each_fragment`] two column groups at a time: `$f(j, [acc[4j], .., acc[4j + 7]])` for
/// every even `j < NACC / 4` (`NACC / 4` is even for every tile).
macro_rules! each_pair {
    ($f:ident, $acc:ident, $nacc:expr; $($j:literal)*) => {
        $(
            if $j < $nacc / 4 {
                let i = (4 * $j) % $nacc;
                $f($j, [
                    $acc[i], $acc[(i + 1) % $nacc], $acc[(i + 2) % $nacc], $acc[(i + 3) % $nacc],
                    $acc[(i + 4) % $nacc], $acc[(i + 5) % $nacc], $acc[(i + 6) % $nacc], $acc[(i + 7) % $nacc],
                ]);
            }
        )*
    };
}

/// Calls `$f(j)` for every listed `j < NACC / 4` with a constant `j`, so that the closure's
/// accumulator indices are constants (written out: a loop the compiler declines to unroll
/// would index the accumulators dynamically and move them to local memory).
macro_rules! each_group {
    ($f:ident, $nacc:expr; $($j:literal)*) => {
        $(
            if $j < $nacc / 4 {
                $f($j);
            }
        )*
    };
}

/// Accumulators `4 j .. 4 j + N` (group `j` and the next `N / 4 - 1`; the modulo keeps a dead
/// group's indices in range).
#[inline(always)]
fn groups<const NACC: usize, const N: usize>(acc: &[f32; NACC], j: usize) -> [f32; N] {
    let mut a = [0.0f32; N];
    for (e, v) in a.iter_mut().enumerate() {
        *v = acc[(4 * j + e) % NACC];
    }
    a
}

/// [`store_tma`] with activation `ACT` fixed.
///
/// # Safety
/// As [`store_tma`].
#[inline(always)]
unsafe fn store_as<O: Element, const NACC: usize, const ACT: u32>(
    acc: &[f32; NACC],
    bias: *const O,
    out: Out,
    s: Slab,
    lt: usize,
) {
    let size = core::mem::size_of::<O>();
    let (box_cols, rb) = (store_box_cols(size, 2 * NACC), store_box_row_bytes(size, 2 * NACC));
    let t = lt % 4;
    let buf = |col: usize| s.region + ((col / box_cols) * STORE_BOX_BYTES) as u32;
    if size == 4 {
        // Fragment column group j covers 8 columns: this thread's pair at 2t, rows g and g + 8.
        let one = |j: usize, a: [f32; 4]| {
            // SAFETY: the box lies in the warpgroup's slab; forwarded.
            unsafe {
                write_fragment::<O, ACT>(a, j * 8 + 2 * t, lt, out, bias, s.n0, (buf(j * 8), rb), (lt / 32) * 16)
            };
        };
        each_fragment!(one, acc, NACC; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15
            16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
    } else {
        let two = |j: usize, a: [f32; 8]| {
            // SAFETY: groups j and j + 1 share a box, in the warpgroup's slab; forwarded.
            unsafe { write_pair::<O, ACT>(a, j, lt, out, bias, s.n0, (buf(j * 8), rb), (lt / 32) * 16) };
        };
        each_pair!(two, acc, NACC; 0 2 4 6 8 10 12 14 16 18 20 22 24 26 28 30);
    }
    // SAFETY: the warpgroup's 128 threads (and only they) reach the barrier; the fence makes
    // their shared writes visible to the copy engine first.
    unsafe {
        fence_proxy_async();
        named_barrier(s.bar, WG_THREADS);
    }
    if lt == 0 && s.m0 < out.m {
        for bx in 0..2 * NACC / box_cols {
            let c0 = s.n0 + bx * box_cols;
            if c0 < out.n {
                // SAFETY: the box is staged and fenced (above); the map is D's (caller).
                unsafe { tma_store_3d(s.map_d, c0 as i32, s.m0 as i32, s.z, s.region + (bx * STORE_BOX_BYTES) as u32) };
            }
        }
        bulk_commit();
        bulk_wait_read();
    }
}

/// The epilogue (`act(alpha x + bias)`, activation `ACT`; nothing for [`PLAIN`]) of one
/// fragment column group of a thread: `a`, its accumulators of rows g, g (columns `col`,
/// `col + 1` of the tile, `col` = 8 j + 2t), then g + 8, g + 8.
///
/// # Safety
/// The bias covers every column when `out.flags` has bit 0; `n0` is the tile's first column.
#[inline(always)]
unsafe fn epi4<O: Element, const ACT: u32>(a: [f32; 4], col: usize, out: Out, bias: *const O, n0: usize) -> [f32; 4] {
    if ACT == PLAIN {
        return a;
    }
    let has_bias = out.flags & 1 != 0;
    let act = Activation::from_code(ACT);
    // Without a bias (or past the edge) -0.0, which leaves `alpha x` as it is (-0.0 included).
    let mut b = [-0.0f32; 2];
    if has_bias {
        for (i, bv) in b.iter_mut().enumerate() {
            if n0 + col + i < out.n {
                // SAFETY: the column exists and the bias covers every column (caller).
                *bv = unsafe { *bias.add(n0 + col + i) }.to_f32();
            }
        }
    }
    // One multiply-add: `alpha x + (-0.0)` is `alpha x` exactly.
    let epi = |x: f32, b: f32| act.apply_for(O::DTYPE, fmaf(out.alpha, x, b));
    [epi(a[0], b[0]), epi(a[1], b[1]), epi(a[2], b[0]), epi(a[3], b[1])]
}

/// Writes one fragment column group of thread `lt` of a warpgroup (f32 outputs) — `a`: its
/// accumulators of rows g and g + 8 at tile columns `col`, `col + 1` — after the epilogue, as
/// two pairs into the swizzled box `(address, row bytes)` that holds those columns, at box
/// rows `row0 + g` and `row0 + g + 8` (`row0`: the warp's first row in the box).
///
/// # Safety
/// The box is 1024-aligned shared memory of rows of its row bytes (128 or 64) holding rows
/// `row0 .. row0 + 16`, which this thread may write; as [`epi4`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn write_fragment<O: Element, const ACT: u32>(
    a: [f32; 4],
    col: usize,
    lt: usize,
    out: Out,
    bias: *const O,
    n0: usize,
    (buf, rb): (u32, usize),
    row0: usize,
) {
    let g = (lt % 32) / 4;
    // SAFETY: forwarded.
    let v = unsafe { epi4::<O, ACT>(a, col, out, bias, n0) };
    for h in 0..2 {
        let row = row0 + g + 8 * h;
        let addr = buf + sw_offset(row, (col % (rb / 4)) * 4, rb) as u32;
        // SAFETY: inside the box (row < 64, byte < rb), aligned to the pair.
        unsafe { st_shared_v2_f32(addr, v[2 * h], v[2 * h + 1]) };
    }
}

/// Writes fragment column groups `j` and `j + 1` (`j` even) of a warp of a warpgroup (16-bit
/// outputs) after the epilogue: each thread converts its pairs (`Element::pack2_f32`) and the
/// warp stores the four 8 x 8 matrices (rows 0-7 and 8-15 of its 16, each group) with one
/// `stmatrix` into the swizzled box `(address, row bytes)` (box rows `row0 ..`), lane `l`
/// addressing row `l % 8` of matrix `l / 8`.
///
/// # Safety
/// The whole warp calls it; the box is 1024-aligned shared memory of rows of its row bytes
/// (128 or 64) holding both groups' columns and rows `row0 .. row0 + 16`, which this warp may
/// write; as [`epi4`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn write_pair<O: Element, const ACT: u32>(
    a: [f32; 8],
    j: usize,
    lt: usize,
    out: Out,
    bias: *const O,
    n0: usize,
    (buf, rb): (u32, usize),
    row0: usize,
) {
    let (lane, t) = (lt % 32, lt % 4);
    // SAFETY: forwarded.
    let (lo, hi) = unsafe {
        (
            epi4::<O, ACT>([a[0], a[1], a[2], a[3]], j * 8 + 2 * t, out, bias, n0),
            epi4::<O, ACT>([a[4], a[5], a[6], a[7]], j * 8 + 8 + 2 * t, out, bias, n0),
        )
    };
    let r = [
        O::pack2_f32(lo[0], lo[1]),
        O::pack2_f32(lo[2], lo[3]),
        O::pack2_f32(hi[0], hi[1]),
        O::pack2_f32(hi[2], hi[3]),
    ];
    let mi = lane / 8;
    let row = row0 + lane % 8 + 8 * (mi % 2);
    let col = (j + mi / 2) * 8;
    let addr = buf + sw_offset(row, (col % (rb / 2)) * 2, rb) as u32;
    // SAFETY: every lane's row (16 bytes, 16-byte aligned: col is a multiple of 8) lies in
    // the box; the warp calls it together (caller).
    unsafe { stmatrix_x4(addr, r) };
}

/// Where a persistent warp's 16 rows of a tile go box by box: `SB` buffers of its own, the D
/// map, the rows' output origin, and how many boxes the warp stored before (which buffer is
/// next).
#[derive(Clone, Copy)]
pub(super) struct Boxes {
    /// 1024-aligned shared address of `SB` [`WARP_BOX_BYTES`] buffers.
    pub bufs: u32,
    pub map_d: u64,
    /// Output row of the warp's first row, first column of the tile, batch matrix.
    pub m0: usize,
    pub n0: usize,
    pub z: i32,
    /// Boxes stored so far by this warp (box `i` used buffer `i % SB`).
    pub done: usize,
}

/// The persistent form's TMA-store epilogue: each warp's 16 x `2 NACC` share of the tile leaves
/// one box (16 rows x 128 bytes) at a time through a ring of `SB` buffers (2 to 4) of its own,
/// stored by its lane 0: the warps of a warpgroup never wait for one another. A buffer is
/// rewritten only once the store issued from it `SB` boxes before has read it, and the last
/// stores are left in flight (the ring meanwhile fills with the next tile). The epilogue is
/// applied to the accumulators in place. Returns the boxes stored so far.
///
/// # Safety
/// The whole warpgroup calls it (`lt` its thread index) after its last wgmma of the tile
/// completed; only this warp uses `s.bufs`; the bias covers every column when `out.flags` has
/// bit 0; the map describes D with boxes of [`WARP_BOX_BYTES`]. Lane 0 of each warp calls
/// [`bulk_wait_read`] before it exits.
#[inline(always)]
pub(super) unsafe fn store_boxes<O: Element, const NACC: usize, const SB: usize>(
    acc: &mut [f32; NACC],
    bias: *const O,
    out: Out,
    s: Boxes,
    lt: usize,
    first: BoxBias,
) -> usize {
    // SAFETY (each arm): forwarded.
    unsafe {
        match code(&out) {
            0 => boxes_as::<O, NACC, SB, 0>(acc, bias, out, s, lt, first),
            1 => boxes_as::<O, NACC, SB, 1>(acc, bias, out, s, lt, first),
            2 => boxes_as::<O, NACC, SB, 2>(acc, bias, out, s, lt, first),
            3 => boxes_as::<O, NACC, SB, 3>(acc, bias, out, s, lt, first),
            _ => boxes_as::<O, NACC, SB, PLAIN>(acc, bias, out, s, lt, first),
        }
    }
}

/// The bias of a persistent warp's first store box of a tile ([`box_bias`] of group 0), to be
/// loaded before the tile's last wgmmas are waited for and passed to [`store_boxes`]; nothing
/// is loaded for the plain product.
///
/// # Safety
/// The bias covers every column when `out.flags` has bit 0; `n0` is the tile's first column.
#[inline(always)]
pub(super) unsafe fn first_box_bias<O: Element, const NACC: usize>(
    bias: *const O,
    out: Out,
    n0: usize,
    lt: usize,
) -> BoxBias {
    // SAFETY: forwarded.
    unsafe { box_bias(bias, out, n0, lt % 4, 0, 2 * NACC) }
}

/// [`store_boxes`] with activation `ACT` fixed ([`PLAIN`]: none).
///
/// # Safety
/// As [`store_boxes`].
#[inline(always)]
unsafe fn boxes_as<O: Element, const NACC: usize, const SB: usize, const ACT: u32>(
    acc: &mut [f32; NACC],
    bias: *const O,
    out: Out,
    s: Boxes,
    lt: usize,
    first: BoxBias,
) -> usize {
    let size = core::mem::size_of::<O>();
    let (box_cols, rb) = (store_box_cols(size, 2 * NACC), store_box_row_bytes(size, 2 * NACC));
    // Fragment column groups (8 columns each) per box: 8 for 16-bit outputs (4 in the 64-byte
    // boxes of the 128 x 160), 4 for f32.
    let per_box = box_cols / 8;
    let t = lt % 4;
    let lane = lt % 32;
    // Before group j is written: its box's buffer, waited for at the box's first group.
    let open = |j: usize| {
        if j % per_box == 0 {
            // The buffer's last store (`SB` boxes back) has read it once at most `SB - 1`
            // groups (the other buffers') are still reading.
            if lane == 0 {
                match SB {
                    2 => bulk_wait_read_n::<1>(),
                    3 => bulk_wait_read_n::<2>(),
                    _ => bulk_wait_read_n::<3>(),
                }
            }
            sync_warp();
        }
        s.bufs + (((s.done + j / per_box) % SB) * WARP_BOX_BYTES) as u32
    };
    // After group j (the last one written) is: at the box's last group, the box is stored.
    let close = |j: usize, buf: u32| {
        if j % per_box == per_box - 1 {
            // The fence makes every lane's writes visible to the copy engine first.
            fence_proxy_async();
            sync_warp();
            if lane == 0 {
                let c0 = s.n0 + (j / per_box) * box_cols;
                if s.m0 < out.m && c0 < out.n {
                    // SAFETY: the box is staged and fenced; the map is D's (caller).
                    unsafe { tma_store_3d(s.map_d, c0 as i32, s.m0 as i32, s.z, buf) };
                }
                // One group per box, empty or not, so the buffer arithmetic above holds.
                bulk_commit();
            }
        }
    };
    // Box by box: its epilogue before the wait for its buffer (which it overlaps), with its
    // bias loaded one box ahead, then its groups' stores. Written out per group with constant
    // indices; the epilogue stays outside the store closures, which the compiler then inlines
    // (inside them, the GELU's bulk made it call one out of line, the accumulators on the stack).
    let mut next = first;
    macro_rules! box_by_box {
        ($store:ident; $($j:literal)*) => {
            $(
                if $j < NACC / 4 {
                    if $j % per_box == 0 {
                        // SAFETY: forwarded.
                        unsafe { activate_next::<O, NACC, ACT>(acc, &mut next, bias, out, s.n0, t, $j) };
                    }
                    $store(acc, $j);
                }
            )*
        };
    }
    if size == 4 {
        let one = |acc: &[f32; NACC], j: usize| {
            let buf = open(j);
            // SAFETY: the buffer is free (above) and holds the box of column j * 8 + 2t.
            unsafe {
                write_fragment::<O, PLAIN>(groups::<NACC, 4>(acc, j), j * 8 + 2 * t, lt, out, bias, s.n0, (buf, rb), 0)
            };
            close(j, buf);
        };
        box_by_box!(one; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15
            16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
    } else {
        let two = |acc: &[f32; NACC], j: usize| {
            let buf = open(j);
            // SAFETY: the buffer is free (above) and holds the box of groups j and j + 1.
            unsafe { write_pair::<O, PLAIN>(groups::<NACC, 8>(acc, j), j, lt, out, bias, s.n0, (buf, rb), 0) };
            close(j + 1, buf);
        };
        box_by_box!(two; 0 2 4 6 8 10 12 14 16 18 20 22 24 26 28 30);
    }
    s.done + 2 * NACC / box_cols
}

/// [`activate_box`] on the store box starting at group `j` with its bias `next`, after issuing
/// the next box's bias loads into `next` (a function, not a closure: a closure the compiler
/// declined to inline moved the accumulators to the stack).
///
/// # Safety
/// The bias covers every column when `out.flags` has bit 0; `n0` is the tile's first column;
/// `t` is the thread's index in its quad.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn activate_next<O: Element, const NACC: usize, const ACT: u32>(
    acc: &mut [f32; NACC],
    next: &mut BoxBias,
    bias: *const O,
    out: Out,
    n0: usize,
    t: usize,
    j: usize,
) {
    if ACT == PLAIN {
        return;
    }
    let b = *next;
    let per_box = store_box_cols(core::mem::size_of::<O>(), 2 * NACC) / 8;
    if j + per_box < NACC / 4 {
        // SAFETY: forwarded.
        *next = unsafe { box_bias(bias, out, n0, t, j + per_box, 2 * NACC) };
    }
    activate_box::<O, NACC, ACT>(acc, b, out.alpha, j);
}
