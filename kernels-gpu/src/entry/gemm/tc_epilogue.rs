//! Tensor-core GEMM epilogue: accumulators staged through shared memory so each lane stores
//! 4 consecutive outputs of a row (bias, activation, alpha/beta, 4-wide stores).

use super::{OutArgs, Problem};
use crate::arch::nvptx::{ld_shared_v4_f32, st_global_v4, st_shared_v2_f32, sync_warp};
use crate::element::Element;
use crate::gemm::Epilogue;

/// Stores a warp's `MT*16 x NT*8` accumulators (rows from `m0`, columns from `n0`) through
/// the warp's own `16 x NT*8` f32 region of shared memory at `scratch`, one m-tile at a time,
/// so that each lane then writes 4 consecutive outputs of a row (coalesced, one 8- or 16-byte
/// store where aligned) instead of scattered pairs. A lane keeps the same 4 columns in every
/// row it writes, so their bias is read once.
///
/// # Safety
/// The output pointers cover the problem; `scratch` holds `16 * (NT * 8 + 8) * 4` bytes that
/// no other warp uses; all 32 lanes call it.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn tc_epilogue<O: Element, const MT: usize, const NT: usize>(
    c: *const O,
    d: *mut O,
    bias: *const O,
    pr: Problem,
    m0: usize,
    n0: usize,
    lane: usize,
    acc: &[[[f32; 4]; NT]; MT],
    scratch: u32,
) {
    let width = NT * 8;
    // 8 floats of padding: a half-warp's 8-byte writes (rows g, columns 2t) hit distinct banks.
    let pitch = (width + 8) * 4;
    let size = core::mem::size_of::<O>();
    let quads = pr.ldc % 4 == 0 && (d as usize) % (4 * size) == 0;
    let (g, t) = (lane / 4, lane % 4);
    let lanes_per_row = width / 4;
    let rows_per_pass = 32 / lanes_per_row;
    let (r0, cc) = (lane / lanes_per_row, (lane % lanes_per_row) * 4);
    let gn = n0 + cc;
    let mut bv = [0.0f32; 4];
    if pr.flags & 1 != 0 {
        for (j, b) in bv.iter_mut().enumerate() {
            if gn + j < pr.n {
                // SAFETY: column gn + j exists and the bias covers every column.
                *b = unsafe { *bias.add(gn + j) }.to_f32();
            }
        }
    }
    let rows = Rows { m0: 0, gn, src: scratch + (r0 * pitch + cc * 4) as u32, step: (rows_per_pass * pitch) as u32 };
    for (mt, row) in acc.iter().enumerate() {
        for (nt, cell) in row.iter().enumerate() {
            let col = ((nt * 8 + 2 * t) * 4) as u32;
            // SAFETY: rows g and g + 8 of the warp's region, 8-byte aligned.
            unsafe {
                st_shared_v2_f32(scratch + (g * pitch) as u32 + col, cell[0], cell[1]);
                st_shared_v2_f32(scratch + ((g + 8) * pitch) as u32 + col, cell[2], cell[3]);
            }
        }
        sync_warp();
        let rows = Rows { m0: m0 + mt * 16 + r0, ..rows };
        // SAFETY: the rows are in the warp's region, written above; outputs predicated inside.
        unsafe { tc_drain(c, d, pr.out(), rows, rows_per_pass, 16 / rows_per_pass, bv, quads) };
        sync_warp();
    }
}

/// Where a lane's epilogue rows are: output rows `m0`, `m0 + rs`, ... at columns `gn..gn+4`,
/// staged in shared memory at `src`, `src + step`, ...
#[derive(Clone, Copy)]
struct Rows {
    m0: usize,
    gn: usize,
    src: u32,
    step: u32,
}

/// Applies the epilogue to `passes` staged rows of 4 outputs and stores them (4-wide where
/// `quads` says the output allows it). One call per m-tile, not per output: the activation is
/// a compile-time choice here, so the loop carries no per-element flag tests, and `bias`
/// holds the lane's 4 bias values (0 where unused).
///
/// # Safety
/// The staged rows are in shared memory; the output pointers cover the problem.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
unsafe fn tc_drain<O: Element>(
    c: *const O,
    d: *mut O,
    out: OutArgs,
    rows: Rows,
    rs: usize,
    passes: usize,
    bias: [f32; 4],
    quads: bool,
) {
    // SAFETY (each arm): forwarded.
    unsafe {
        match (out.flags >> 1) & 3 {
            0 => drain_rows::<O, 0>(c, d, out, rows, rs, passes, bias, quads),
            1 => drain_rows::<O, 1>(c, d, out, rows, rs, passes, bias, quads),
            2 => drain_rows::<O, 2>(c, d, out, rows, rs, passes, bias, quads),
            _ => drain_rows::<O, 3>(c, d, out, rows, rs, passes, bias, quads),
        }
    }
}

/// `tc_drain` for activation `ACT` (the flags' bits 1-2).
///
/// # Safety
/// As `tc_drain`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn drain_rows<O: Element, const ACT: u32>(
    c: *const O,
    d: *mut O,
    out: OutArgs,
    rows: Rows,
    rs: usize,
    passes: usize,
    bias: [f32; 4],
    quads: bool,
) {
    let gn = rows.gn;
    if gn >= out.n {
        return;
    }
    let flags = (out.flags & !6) | (ACT << 1);
    let full = quads && gn + 3 < out.n;
    for pass in 0..passes {
        let gm = rows.m0 + pass * rs;
        if gm >= out.m {
            break;
        }
        // SAFETY: the staged row, 16-byte aligned.
        let v = unsafe { ld_shared_v4_f32(rows.src + pass as u32 * rows.step) };
        let idx = gm * out.ldc + gn;
        let epi = |x: f32, j: usize| {
            // SAFETY: (gm, gn + j) is inside the output; C is read only when enabled.
            let cv = if flags & 8 != 0 { unsafe { (*c.add(idx + j)).to_f32() } } else { 0.0 };
            O::from_f32(Epilogue::apply_flags(flags, out.alpha, out.beta, x, cv, bias[j], O::DTYPE))
        };
        if full {
            let o = [epi(v[0], 0), epi(v[1], 1), epi(v[2], 2), epi(v[3], 3)];
            // SAFETY: the 4 elements are inside the output and `quads` aligns the address to
            // their total size.
            unsafe { store_quad(d.add(idx), o) };
        } else {
            for (j, &x) in v.iter().enumerate() {
                if gn + j < out.n {
                    // SAFETY: (gm, gn + j) is inside the output.
                    unsafe { *d.add(idx + j) = epi(x, j) };
                }
            }
        }
    }
}

/// Stores four adjacent output elements with one 8- (16-bit) or 16-byte (f32) access.
///
/// # Safety
/// The 4 elements at `p` are writable and `p` is aligned to 4 times the element size.
#[inline(always)]
pub(crate) unsafe fn store_quad<O: Element>(p: *mut O, o: [O; 4]) {
    // SAFETY: the caller guarantees alignment and bounds; the element types are plain 2- or
    // 4-byte values.
    unsafe {
        if core::mem::size_of::<O>() == 2 {
            let b: [u16; 4] = core::mem::transmute_copy(&o);
            *(p as *mut u64) = b[0] as u64 | (b[1] as u64) << 16 | (b[2] as u64) << 32 | (b[3] as u64) << 48;
        } else {
            let b: [u32; 4] = core::mem::transmute_copy(&o);
            st_global_v4(p as *mut u32, b);
        }
    }
}
