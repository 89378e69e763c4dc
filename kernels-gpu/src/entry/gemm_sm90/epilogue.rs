//! The Hopper GEMM's fused epilogue (`act(alpha * acc + beta * c + bias)`): staged f32 rows in
//! shared memory leave through coalesced, 4-wide stores. The activation and the C read are
//! fixed once per drain (one monomorph each), so the row loop is straight-line code in which
//! the four elements of a lane, and consecutive rows, overlap their latencies: with the choice
//! made per element, a GELU epilogue cost as much as the K = 768 mainloop.

use crate::arch::fmaf;
use crate::arch::nvptx::{ld_shared_v4_f32, st_shared_v2_f32, sync_warp};
use crate::element::Element;
use crate::elementwise::Activation;
use crate::entry::gemm::store_quad;
use crate::gemm_sm90::STAGE_COLS;
use crate::gemm_sm90::STAGE_PITCH_BYTES as STG_PITCH;

/// What the epilogue needs.
#[derive(Clone, Copy)]
pub(super) struct Out {
    pub m: usize,
    pub n: usize,
    pub ldc: usize,
    pub alpha: f32,
    pub beta: f32,
    pub flags: u32,
}

/// The persistent form's epilogue (the ring is busy with the next tile): each warp stages its
/// 16 rows in chunks of `STAGE_COLS` columns through its own small area and drains them
/// coalesced. The staging loops use constant indices only, so the accumulators stay in
/// registers.
///
/// # Safety
/// C, D and bias cover the M x N output at `ldc`; `stg` is the warp's staging area of
/// 16 x [`STG_PITCH`] bytes; all 32 lanes call it.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn store_staged<O: Element, const NACC: usize>(
    c: *const O,
    d: *mut O,
    bias: *const O,
    out: Out,
    acc: &[f32; NACC],
    stg: u32,
    (m0, n0): (usize, usize),
    lt: usize,
) {
    let (w, lane) = (lt / 32, lt % 32);
    let (g, t) = (lane / 4, lane % 4);
    // Each j covers 8 columns (the wgmma fragment layout); a chunk is STAGE_COLS of them.
    const JC: usize = STAGE_COLS / 8;
    for ch in 0..2 * NACC / STAGE_COLS {
        for jj in 0..JC {
            let j = ch * JC + jj;
            let col = ((jj * 8 + 2 * t) * 4) as u32;
            // SAFETY: rows g and g + 8 of the warp's area, 8-byte aligned.
            unsafe {
                st_shared_v2_f32(stg + (g * STG_PITCH) as u32 + col, acc[4 * j], acc[4 * j + 1]);
                st_shared_v2_f32(stg + ((g + 8) * STG_PITCH) as u32 + col, acc[4 * j + 2], acc[4 * j + 3]);
            }
        }
        sync_warp();
        let shape = (STAGE_COLS, 16, 32);
        // SAFETY: the chunk is staged; the outputs are predicated inside.
        unsafe { drain::<O>(c, d, bias, out, stg, STG_PITCH, shape, m0 + w * 16, n0 + ch * STAGE_COLS, lane) };
        sync_warp();
    }
}

/// Where a lane's part of a drain lies: staged rows at `region` (row pitch `pitch` bytes),
/// `(cols, rows, threads)` their shape and the threads sharing them, `(m0, n0)` the output
/// position of the first staged element, `lt` the lane's index among the threads.
#[derive(Clone, Copy)]
pub(super) struct Staged {
    pub region: u32,
    pub pitch: usize,
    pub shape: (usize, usize, usize),
    pub origin: (usize, usize),
    pub lt: usize,
}

/// Applies the epilogue to `rows` staged rows of `cols` floats (a warpgroup's 64 x BN, or a
/// warp's 16 x 64 chunk) and stores them with `threads` threads: each thread 4 adjacent
/// columns, a row's threads adjacent (coalesced), 4-wide stores where the output allows.
///
/// # Safety
/// The staged rows are in shared memory at `region` with row pitch `pitch`; the output
/// pointers cover M x N at `ldc`.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
pub(super) unsafe fn drain<O: Element>(
    c: *const O,
    d: *mut O,
    bias: *const O,
    out: Out,
    region: u32,
    pitch: usize,
    shape: (usize, usize, usize),
    m0: usize,
    n0: usize,
    lt: usize,
) {
    let st = Staged { region, pitch, shape, origin: (m0, n0), lt };
    let read_c = out.flags & 8 != 0;
    // SAFETY (each arm): forwarded.
    unsafe {
        match ((out.flags >> 1) & 3, read_c) {
            (0, false) => drain_as::<O, 0, false>(c, d, bias, out, st),
            (0, true) => drain_as::<O, 0, true>(c, d, bias, out, st),
            (1, false) => drain_as::<O, 1, false>(c, d, bias, out, st),
            (1, true) => drain_as::<O, 1, true>(c, d, bias, out, st),
            (2, false) => drain_as::<O, 2, false>(c, d, bias, out, st),
            (2, true) => drain_as::<O, 2, true>(c, d, bias, out, st),
            (_, false) => drain_as::<O, 3, false>(c, d, bias, out, st),
            (_, true) => drain_as::<O, 3, true>(c, d, bias, out, st),
        }
    }
}

/// [`drain`] with activation `ACT` and the C read (`READ_C`) fixed.
///
/// # Safety
/// As [`drain`]; with `READ_C`, C covers the output.
#[inline(always)]
unsafe fn drain_as<O: Element, const ACT: u32, const READ_C: bool>(
    c: *const O,
    d: *mut O,
    bias: *const O,
    out: Out,
    st: Staged,
) {
    let (cols, rows, threads) = st.shape;
    let lanes_per_row = cols / 4;
    let rows_per_pass = threads / lanes_per_row;
    let (r0, cc) = (st.lt / lanes_per_row, (st.lt % lanes_per_row) * 4);
    let (m0, gn) = (st.origin.0, st.origin.1 + cc);
    if gn >= out.n {
        return;
    }
    let size = core::mem::size_of::<O>();
    let full = out.ldc.is_multiple_of(4) && (d as usize).is_multiple_of(4 * size) && gn + 3 < out.n;
    let has_bias = out.flags & 1 != 0;
    let mut bv = [0.0f32; 4];
    if has_bias {
        for (j, b) in bv.iter_mut().enumerate() {
            if gn + j < out.n {
                // SAFETY: column gn + j exists and the bias covers every column.
                *b = unsafe { *bias.add(gn + j) }.to_f32();
            }
        }
    }
    let act = Activation::from_code(ACT);
    // One element: the bias add is a select (no branch), so -0.0 stays -0.0 without a bias.
    let epi = |x: f32, cv: f32, b: f32| {
        let mut v = out.alpha * x;
        if READ_C {
            v = fmaf(out.beta, cv, v);
        }
        let vb = v + b;
        O::from_f32(act.apply_for(O::DTYPE, if has_bias { vb } else { v }))
    };
    let mut r = r0;
    while r < rows && m0 + r < out.m {
        // SAFETY: a staged row, 16-byte aligned.
        let v = unsafe { ld_shared_v4_f32(st.region + (r * st.pitch + cc * 4) as u32) };
        let idx = (m0 + r) * out.ldc + gn;
        if full {
            let mut cv = [0.0f32; 4];
            if READ_C {
                for (j, x) in cv.iter_mut().enumerate() {
                    // SAFETY: the 4 elements are inside the output, which C covers.
                    *x = unsafe { (*c.add(idx + j)).to_f32() };
                }
            }
            let o =
                [epi(v[0], cv[0], bv[0]), epi(v[1], cv[1], bv[1]), epi(v[2], cv[2], bv[2]), epi(v[3], cv[3], bv[3])];
            // SAFETY: the 4 elements are inside the output, aligned to their total size.
            unsafe { store_quad(d.add(idx), o) };
        } else {
            for (j, &x) in v.iter().enumerate() {
                if gn + j < out.n {
                    // SAFETY: (row, gn + j) is inside the output, which C covers when read.
                    let cv = if READ_C { unsafe { (*c.add(idx + j)).to_f32() } } else { 0.0 };
                    // SAFETY: (row, gn + j) is inside the output.
                    unsafe { *d.add(idx + j) = epi(x, cv, bv[j]) };
                }
            }
        }
        r += rows_per_pass;
    }
}
