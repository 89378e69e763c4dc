//! Hopper GEMM entry points (sm_90a PTX only): one block per output tile, a producer warp that
//! loads A and B tiles with TMA (128-byte swizzle) into a `stages`-deep shared-memory ring
//! guarded by full/empty mbarriers, and consumer warpgroups that multiply them with `wgmma`
//! (one group kept in flight) and run the fused epilogue through a shared-memory staging so
//! the stores are coalesced. Strided batches walk `blockIdx.z` (the maps' third dimension).

use core::arch::asm;

use crate::arch::nvptx::{block_idx_x, block_idx_z, ld_shared_v4_f32, st_shared_v2_f32, sync_threads, thread_idx_x};
use crate::arch::sm90::{
    desc_k_sw128, fence_barrier_init, mbar_arrive, mbar_arrive_expect_tx, mbar_init, mbar_wait, named_barrier,
    param_to_generic, setmaxnreg_dec, setmaxnreg_inc, smem_base_1024, tma_load_3d, wgmma_commit, wgmma_fence,
    wgmma_m64n128k16_bf16, wgmma_m64n128k16_f16, wgmma_m64n256k16_bf16, wgmma_m64n256k16_f16, wgmma_wait,
};
use crate::element::Element;
use crate::gemm::Epilogue;
use crate::gemm_sm90::{BK_BYTES, CONSUMER_REGS, EPI_PAD, PRODUCER_REGS, WG_THREADS, raster};
use half::{bf16, f16};

/// A `CUtensorMap` passed by value: 128 opaque bytes. Declared align(16) (rustc cannot pass
/// more); the PTX build raises the parameter's alignment to 64, as TMA needs.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub struct TensorMap([u64; 16]);

/// What the epilogue needs.
#[derive(Clone, Copy)]
struct Out {
    m: usize,
    n: usize,
    ldc: usize,
    alpha: f32,
    beta: f32,
    flags: u32,
}

/// A 16-bit input type and its wgmma (K-major A and B).
trait WgmmaElem: Element {
    /// # Safety
    /// As the `wgmma_*` wrappers.
    unsafe fn mma<const NACC: usize>(d: &mut [f32; NACC], da: u64, db: u64);
}

macro_rules! wgmma_elem {
    ($E:ty, $n128:ident, $n256:ident) => {
        impl WgmmaElem for $E {
            #[inline(always)]
            unsafe fn mma<const NACC: usize>(d: &mut [f32; NACC], da: u64, db: u64) {
                // SAFETY: NACC selects the matching array type (the casts are identities);
                // the wgmma preconditions are forwarded.
                unsafe {
                    if NACC == 128 {
                        $n256::<0>(&mut *(d as *mut [f32; NACC] as *mut [f32; 128]), da, db)
                    } else if NACC == 64 {
                        $n128::<0>(&mut *(d as *mut [f32; NACC] as *mut [f32; 64]), da, db)
                    }
                }
            }
        }
    };
}
wgmma_elem!(bf16, wgmma_m64n128k16_bf16, wgmma_m64n256k16_bf16);
wgmma_elem!(f16, wgmma_m64n128k16_f16, wgmma_m64n256k16_f16);

/// The kernel body. `NACC` = BN / 2 accumulators per consumer thread, `CONS` consumer
/// warpgroups (BM = 64 CONS), `ST` stages.
///
/// # Safety
/// `map_a` / `map_b` are the generic addresses of valid maps of A (dims K, M, batch) and B
/// (dims K, N, batch) with boxes (64, BM, 1) and (64, BN, 1) and the 128-byte swizzle; C, D
/// and bias cover the batch of M x N outputs at `ldc`; the launch has `128 (1 + CONS)` threads
/// and the tile's shared memory.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn sm90_gemm<E: WgmmaElem, O: Element, const NACC: usize, const CONS: usize, const ST: usize>(
    map_a: u64,
    map_b: u64,
    c: *const O,
    d: *mut O,
    bias: *const O,
    k: usize,
    out: Out,
) {
    let bn = 2 * NACC;
    let bm = 64 * CONS;
    let bk = BK_BYTES / 2;
    let a_bytes = bm * BK_BYTES;
    let stage = (bm + bn) * BK_BYTES;
    let base = smem_base_1024();
    let bars = base + (ST * stage) as u32;
    let full = |s: usize| bars + 8 * s as u32;
    let empty = |s: usize| bars + 8 * (ST + s) as u32;
    let tid = thread_idx_x() as usize;
    let wg = tid / WG_THREADS as usize;
    let (tm, tn) = raster(block_idx_x() as usize, out.m.div_ceil(bm), out.n.div_ceil(bn));
    let z = block_idx_z() as i32;
    let ktiles = k.div_ceil(bk);
    if tid == 0 {
        for s in 0..ST {
            // SAFETY: the barriers lie past the ring, 8-byte aligned; the sync below orders
            // the initialisation before every other use.
            unsafe {
                mbar_init(full(s), 1);
                mbar_init(empty(s), CONS as u32);
            }
        }
        fence_barrier_init();
    }
    // SAFETY: every thread reaches it.
    unsafe { sync_threads() };
    if wg == 0 {
        if CONS == 2 {
            setmaxnreg_dec::<PRODUCER_REGS>();
        }
        if tid == 0 {
            for kt in 0..ktiles {
                let s = kt % ST;
                let sa = base + (s * stage) as u32;
                // SAFETY: the barriers are initialised; the stage is free once its empty
                // barrier completed the previous round; the maps describe A and B (caller).
                unsafe {
                    if kt >= ST {
                        mbar_wait(empty(s), ((kt / ST - 1) & 1) as u32);
                    }
                    mbar_arrive_expect_tx(full(s), stage as u32);
                    let k0 = (kt * bk) as i32;
                    tma_load_3d(sa, map_a, k0, (tm * bm) as i32, z, full(s));
                    tma_load_3d(sa + a_bytes as u32, map_b, k0, (tn * bn) as i32, z, full(s));
                }
            }
        }
        return;
    }
    if CONS == 2 {
        setmaxnreg_inc::<CONSUMER_REGS>();
    }
    let cw = wg - 1;
    let lt = tid % WG_THREADS as usize;
    let mut acc = [0.0f32; NACC];
    for kt in 0..ktiles {
        let s = kt % ST;
        let sa = base + (s * stage + cw * 64 * BK_BYTES) as u32;
        let sb = base + (s * stage + a_bytes) as u32;
        // SAFETY: the full barrier says the stage landed; the warpgroup issues together; the
        // stage is released (empty barrier) only after its wgmma group completed.
        unsafe {
            mbar_wait(full(s), ((kt / ST) & 1) as u32);
            wgmma_fence();
            let (da, db) = (desc_k_sw128(sa), desc_k_sw128(sb));
            for kk in 0..(bk / 16) as u64 {
                E::mma::<NACC>(&mut acc, da + 2 * kk, db + 2 * kk);
            }
            wgmma_commit();
            wgmma_wait::<1>();
            if kt > 0 && lt == 0 {
                mbar_arrive(empty((kt - 1) % ST));
            }
        }
    }
    wgmma_wait::<0>();
    // SAFETY: the consumers (and only they) reach both barriers; after the first no wgmma
    // reads the ring, so it holds the f32 staging of each warpgroup's 64 rows.
    unsafe {
        named_barrier(1, WG_THREADS * CONS as u32);
        let pitch = (bn + EPI_PAD) * 4;
        let region = base + (cw * 64 * pitch) as u32;
        let (w, lane) = (lt / 32, lt % 32);
        let (g, t) = (lane / 4, lane % 4);
        for j in 0..bn / 8 {
            let col = ((j * 8 + 2 * t) * 4) as u32;
            let row = (w * 16 + g) * pitch;
            st_shared_v2_f32(region + row as u32 + col, acc[4 * j], acc[4 * j + 1]);
            st_shared_v2_f32(region + (row + 8 * pitch) as u32 + col, acc[4 * j + 2], acc[4 * j + 3]);
        }
        named_barrier(2 + cw as u32, WG_THREADS);
        drain::<O>(c, d, bias, out, region, pitch, bn, tm * bm + cw * 64, tn * bn, lt);
    }
}

/// Applies the epilogue to the warpgroup's 64 staged rows of `bn` floats and stores them:
/// each thread 4 adjacent columns, a row's threads adjacent (coalesced), 4-wide stores where
/// the output allows.
///
/// # Safety
/// The staged rows are in shared memory at `region` with row pitch `pitch`; the output
/// pointers cover M x N at `ldc`.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
unsafe fn drain<O: Element>(
    c: *const O,
    d: *mut O,
    bias: *const O,
    out: Out,
    region: u32,
    pitch: usize,
    bn: usize,
    m0: usize,
    n0: usize,
    lt: usize,
) {
    let lanes_per_row = bn / 4;
    let rows_per_pass = WG_THREADS as usize / lanes_per_row;
    let (r0, cc) = (lt / lanes_per_row, (lt % lanes_per_row) * 4);
    let gn = n0 + cc;
    if gn >= out.n {
        return;
    }
    let size = core::mem::size_of::<O>();
    let full = out.ldc.is_multiple_of(4) && (d as usize).is_multiple_of(4 * size) && gn + 3 < out.n;
    let mut bv = [0.0f32; 4];
    if out.flags & 1 != 0 {
        for (j, b) in bv.iter_mut().enumerate() {
            if gn + j < out.n {
                // SAFETY: column gn + j exists and the bias covers every column.
                *b = unsafe { *bias.add(gn + j) }.to_f32();
            }
        }
    }
    let mut r = r0;
    while r < 64 && m0 + r < out.m {
        // SAFETY: a staged row, 16-byte aligned.
        let v = unsafe { ld_shared_v4_f32(region + (r * pitch + cc * 4) as u32) };
        let idx = (m0 + r) * out.ldc + gn;
        let epi = |x: f32, j: usize| {
            // SAFETY: (row, gn + j) is inside the output; C is read only when enabled.
            let cv = if out.flags & 8 != 0 { unsafe { (*c.add(idx + j)).to_f32() } } else { 0.0 };
            O::from_f32(Epilogue::apply_flags(out.flags, out.alpha, out.beta, x, cv, bv[j], O::DTYPE))
        };
        if full {
            let o = [epi(v[0], 0), epi(v[1], 1), epi(v[2], 2), epi(v[3], 3)];
            // SAFETY: the 4 elements are inside the output, aligned to their total size.
            unsafe { store4(d.add(idx), o) };
        } else {
            for (j, &x) in v.iter().enumerate() {
                if gn + j < out.n {
                    // SAFETY: (row, gn + j) is inside the output.
                    unsafe { *d.add(idx + j) = epi(x, j) };
                }
            }
        }
        r += rows_per_pass;
    }
}

/// Stores 4 adjacent elements with one 8- (16-bit) or 16-byte (f32) access.
///
/// # Safety
/// `p` is writable for 4 elements and aligned to their total size.
#[inline(always)]
unsafe fn store4<O: Element>(p: *mut O, o: [O; 4]) {
    // SAFETY: as the caller guarantees; the element types are plain 2- or 4-byte values.
    unsafe {
        if core::mem::size_of::<O>() == 2 {
            let b: [u16; 4] = core::mem::transmute_copy(&o);
            *(p as *mut u64) = b[0] as u64 | (b[1] as u64) << 16 | (b[2] as u64) << 32 | (b[3] as u64) << 48;
        } else {
            let b: [u32; 4] = core::mem::transmute_copy(&o);
            crate::arch::nvptx::st_global_v4(p as *mut u32, b);
        }
    }
}

// Entry points `ft_gemm90_<in>_rc_<out>_<BM>x<BN>x64s<ST>` (see `Sm90Variant::entry_name`).
// ABI: (map_a, map_b, c, d, bias, m, n, k, ldc, stride_c, alpha, beta, flags); the maps by
// value (`_gm` entries: one pointer to both maps in global memory instead).
macro_rules! sm90_entry {
    ($name:expr, $E:ty, $O:ty, $nacc:literal, $cons:literal, $st:literal) => {
        const _: () = {
            #[unsafe(export_name = $name)]
            #[allow(clippy::too_many_arguments)]
            unsafe extern "ptx-kernel" fn entry(
                _map_a: TensorMap,
                _map_b: TensorMap,
                c: *const $O,
                d: *mut $O,
                bias: *const $O,
                m: u32,
                n: u32,
                k: u32,
                ldc: u32,
                stride_c: u64,
                alpha: f32,
                beta: f32,
                flags: u32,
            ) {
                let (pa, pb): (u64, u64);
                // SAFETY: takes the param-space addresses of the first two parameters.
                unsafe {
            asm!(concat!("mov.u64 {a}, ", $name, "_param_0;"), a = out(reg64) pa);
            asm!(concat!("mov.u64 {b}, ", $name, "_param_1;"), b = out(reg64) pb);
                }
                let z = block_idx_z() as usize * stride_c as usize;
                let out = Out { m: m as usize, n: n as usize, ldc: ldc as usize, alpha, beta, flags };
                // SAFETY: the host encoded the maps for this variant's boxes and checked the
                // outputs, the block size and the shared memory.
                unsafe {
                    sm90_gemm::<$E, $O, $nacc, $cons, $st>(
                        param_to_generic(pa),
                        param_to_generic(pb),
                        c.add(z),
                        d.add(z),
                        bias,
                        k as usize,
                        out,
                    )
                }
            }
        };
    };
}

/// The global-memory-maps form of one entry (`_gm`).
macro_rules! sm90_entry_gm {
    ($name:expr, $E:ty, $O:ty, $nacc:literal, $cons:literal, $st:literal) => {
        const _: () = {
            #[unsafe(export_name = $name)]
            #[allow(clippy::too_many_arguments)]
            unsafe extern "ptx-kernel" fn entry(
                maps: *const TensorMap,
                c: *const $O,
                d: *mut $O,
                bias: *const $O,
                m: u32,
                n: u32,
                k: u32,
                ldc: u32,
                stride_c: u64,
                alpha: f32,
                beta: f32,
                flags: u32,
            ) {
                let z = block_idx_z() as usize * stride_c as usize;
                let out = Out { m: m as usize, n: n as usize, ldc: ldc as usize, alpha, beta, flags };
                // SAFETY: as `sm90_entry`; `maps` holds A's then B's map, 64-byte aligned.
                unsafe {
                    sm90_gemm::<$E, $O, $nacc, $cons, $st>(
                        maps as u64,
                        maps.add(1) as u64,
                        c.add(z),
                        d.add(z),
                        bias,
                        k as usize,
                        out,
                    )
                }
            }
        };
    };
}

/// Every tile of `gemm_sm90::TILES` for one (input, output): (NACC = BN / 2, consumers,
/// stages, name suffix).
macro_rules! sm90_tiles {
    ($in:literal, $E:ty, $out:literal, $O:ty) => {
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_128x256x64s4"), $E, $O, 128, 2, 4);
        sm90_entry!(concat!("ft_gemm90_", $in, "_rc_", $out, "_128x128x64s6"), $E, $O, 64, 2, 6);
    };
}

sm90_tiles!("bf16", bf16, "bf16", bf16);
sm90_tiles!("bf16", bf16, "f32", f32);
sm90_tiles!("f16", f16, "f16", f16);
sm90_tiles!("f16", f16, "f32", f32);
sm90_entry_gm!("ft_gemm90_bf16_rc_bf16_128x256x64s4_gm", bf16, bf16, 128, 2, 4);
