//! PTX intrinsics: thread indices, barriers, shared memory, warp shuffles, 16-byte global
//! vector accesses and f16/bf16 conversions, each a thin safe-as-possible wrapper over one
//! instruction. Only the GPU build compiles this file.

use core::arch::asm;
use core::arch::nvptx as nv;

/// `threadIdx.x`.
#[inline(always)]
pub fn thread_idx_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nv::_thread_idx_x() as u32 }
}

/// `blockIdx.x`.
#[inline(always)]
pub fn block_idx_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nv::_block_idx_x() as u32 }
}

/// `blockDim.x`.
#[inline(always)]
pub fn block_dim_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nv::_block_dim_x() as u32 }
}

/// `blockIdx.y`.
#[inline(always)]
pub fn block_idx_y() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nv::_block_idx_y() as u32 }
}

/// `v` through a register move the compiler cannot look through, issued where it is called:
/// what is computed from it is not hoisted out of the loop that calls it. The split Clifford
/// backward's row loop takes its plane stride this way, so the 40 component addresses of a row
/// are recomputed (two additions each) instead of held in 80 registers for the whole loop.
#[inline(always)]
pub fn opaque_u64(v: u64) -> u64 {
    let o: u64;
    // SAFETY: a register move; no memory is touched.
    unsafe { asm!("mov.b64 {o}, {v};", o = out(reg64) o, v = in(reg64) v, options(nomem, nostack)) };
    o
}

/// `blockIdx.z`.
#[inline(always)]
pub fn block_idx_z() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nv::_block_idx_z() as u32 }
}

/// `gridDim.x`.
#[inline(always)]
pub fn grid_dim_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nv::_grid_dim_x() as u32 }
}

/// Lane index inside the warp (0..32).
#[inline(always)]
pub fn lane_id() -> u32 {
    let l: u32;
    // SAFETY: reads the %laneid special register.
    unsafe { asm!("mov.u32 {l}, %laneid;", l = out(reg32) l) };
    l
}

/// Block-wide barrier (`bar.sync 0`).
///
/// # Safety
/// Every thread of the block must reach the same barrier (no divergent call sites), or the
/// block deadlocks.
#[inline(always)]
pub unsafe fn sync_threads() {
    // SAFETY: the caller upholds the convergence requirement.
    unsafe { nv::_syncthreads() }
}

/// Butterfly shuffle across the full warp (`shfl.sync.bfly.b32`, all 32 lanes participate).
///
/// # Safety
/// All 32 lanes of the warp must execute this call together.
#[inline(always)]
pub unsafe fn shfl_xor_f32(v: f32, lane_mask: u32) -> f32 {
    let r: f32;
    // SAFETY: the caller guarantees full-warp convergence, which the 0xffffffff mask states.
    unsafe {
        asm!("shfl.sync.bfly.b32 {r}, {v}, {m}, 0x1f, 0xffffffff;",
             r = out(reg32) r, v = in(reg32) v, m = in(reg32) lane_mask)
    };
    r
}

/// Lane `src`'s value to every lane of the warp (`shfl.sync.idx.b32`).
///
/// # Safety
/// All 32 lanes of the warp must execute this call together.
#[inline(always)]
pub unsafe fn shfl_idx_f32(v: f32, src: u32) -> f32 {
    let r: f32;
    // SAFETY: the caller guarantees full-warp convergence, which the 0xffffffff mask states.
    unsafe {
        asm!("shfl.sync.idx.b32 {r}, {v}, {s}, 0x1f, 0xffffffff;",
             r = out(reg32) r, v = in(reg32) v, s = in(reg32) src)
    };
    r
}

/// Shuffle down across the full warp (`shfl.sync.down.b32`).
///
/// # Safety
/// All 32 lanes of the warp must execute this call together.
#[inline(always)]
pub unsafe fn shfl_down_f32(v: f32, delta: u32) -> f32 {
    let r: f32;
    // SAFETY: the caller guarantees full-warp convergence, which the 0xffffffff mask states.
    unsafe {
        asm!("shfl.sync.down.b32 {r}, {v}, {d}, 0x1f, 0xffffffff;",
             r = out(reg32) r, v = in(reg32) v, d = in(reg32) delta)
    };
    r
}

// Module-scope shared memory. Declaring `.shared` inside a function's `asm!` fails (the
// declaration is duplicated wherever the function is inlined), so it lives here.
core::arch::global_asm!(".extern .shared .align 16 .b8 ft_dyn_smem[];", ".shared .align 16 .b8 ft_reduce_smem[128];",);

/// Shared-space address of the dynamic shared memory (size set at launch).
#[inline(always)]
pub fn dyn_smem_addr() -> u32 {
    let a: u32;
    // SAFETY: takes the address of a module-scope symbol.
    unsafe { asm!("mov.u32 {a}, ft_dyn_smem;", a = out(reg32) a) };
    a
}

/// Shared-space address of a static 128-byte scratch area (32 floats: one per warp), used by
/// block reductions.
#[inline(always)]
pub fn reduce_smem_addr() -> u32 {
    let a: u32;
    // SAFETY: takes the address of a module-scope symbol.
    unsafe { asm!("mov.u32 {a}, ft_reduce_smem;", a = out(reg32) a) };
    a
}

/// Stores an f32 into shared memory.
///
/// # Safety
/// `addr` must be a 4-byte aligned shared-space address inside a declared shared array.
#[inline(always)]
pub unsafe fn st_shared_f32(addr: u32, v: f32) {
    // SAFETY: the caller guarantees the address is valid shared memory.
    unsafe { asm!("st.shared.f32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) v) };
}

/// Loads an f32 from shared memory.
///
/// # Safety
/// `addr` must be a 4-byte aligned shared-space address inside a declared shared array.
#[inline(always)]
pub unsafe fn ld_shared_f32(addr: u32) -> f32 {
    let v: f32;
    // SAFETY: the caller guarantees the address is valid shared memory.
    unsafe { asm!("ld.shared.f32 {v}, [{a}];", v = out(reg32) v, a = in(reg32) addr) };
    v
}

/// 16-byte global load (`ld.global.v4.b32`).
///
/// # Safety
/// `p` must point to 16 readable, 16-byte aligned bytes of global memory.
#[inline(always)]
pub unsafe fn ld_global_v4(p: *const u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees alignment and validity.
    unsafe {
        asm!("ld.global.v4.b32 {{{a}, {b}, {c}, {d}}}, [{p}];",
             p = in(reg64) p, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c,
             d = out(reg32) d, options(readonly, nostack))
    };
    [a, b, c, d]
}

/// 16-byte global store (`st.global.v4.b32`).
///
/// # Safety
/// `p` must point to 16 writable, 16-byte aligned bytes of global memory.
#[inline(always)]
pub unsafe fn st_global_v4(p: *mut u32, v: [u32; 4]) {
    // SAFETY: the caller guarantees alignment and validity.
    unsafe {
        asm!("st.global.v4.b32 [{p}], {{{a}, {b}, {c}, {d}}};",
             p = in(reg64) p, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2],
             d = in(reg32) v[3], options(nostack))
    };
}

/// f16 bits → f32 (`cvt.f32.f16`, exact).
#[inline(always)]
pub fn f16_to_f32(h: u16) -> f32 {
    let f: f32;
    // SAFETY: a register-to-register conversion.
    unsafe { asm!("cvt.f32.f16 {f}, {h};", f = out(reg32) f, h = in(reg16) h, options(pure, nomem, nostack)) };
    f
}

/// f32 → f16 bits, round to nearest even (`cvt.rn.f16.f32`).
#[inline(always)]
pub fn f32_to_f16(f: f32) -> u16 {
    let h: u16;
    // SAFETY: a register-to-register conversion.
    unsafe { asm!("cvt.rn.f16.f32 {h}, {f};", h = out(reg16) h, f = in(reg32) f, options(pure, nomem, nostack)) };
    h
}

/// f32 → bf16 bits, round to nearest even (`cvt.rn.bf16.f32`, sm_80+).
#[inline(always)]
pub fn f32_to_bf16(f: f32) -> u16 {
    let h: u16;
    // SAFETY: a register-to-register conversion.
    unsafe { asm!("cvt.rn.bf16.f32 {h}, {f};", h = out(reg16) h, f = in(reg32) f, options(pure, nomem, nostack)) };
    h
}

/// Two f32 → one word of two bf16, round to nearest even, `lo` in the low half
/// (`cvt.rn.bf16x2.f32`, sm_80+: one instruction for the pair).
#[inline(always)]
pub fn f32x2_to_bf16x2(lo: f32, hi: f32) -> u32 {
    let w: u32;
    // SAFETY: a register-to-register conversion (the first source goes to the upper half).
    unsafe {
        asm!("cvt.rn.bf16x2.f32 {w}, {h}, {l};", w = out(reg32) w, h = in(reg32) hi, l = in(reg32) lo,
            options(pure, nomem, nostack))
    };
    w
}

/// Two f32 → one word of two f16, round to nearest even, `lo` in the low half
/// (`cvt.rn.f16x2.f32`, sm_80+).
#[inline(always)]
pub fn f32x2_to_f16x2(lo: f32, hi: f32) -> u32 {
    let w: u32;
    // SAFETY: a register-to-register conversion (the first source goes to the upper half).
    unsafe {
        asm!("cvt.rn.f16x2.f32 {w}, {h}, {l};", w = out(reg32) w, h = in(reg32) hi, l = in(reg32) lo,
            options(pure, nomem, nostack))
    };
    w
}

// Operand tiles of the GEMM kernels: two pipeline stages of A and B, 40 KiB (fits the 48 KiB
// of static shared memory every block gets without opting in).
/// Bytes of the module-scope shared buffer the `mma.sync` and FFMA GEMM entries use.
pub const GEMM_SMEM_BYTES: usize = 40960;
core::arch::global_asm!(".shared .align 16 .b8 ft_gemm_smem[40960];");

/// Shared-space address of the GEMM tile buffers (40960 bytes).
#[inline(always)]
pub fn gemm_smem_addr() -> u32 {
    let a: u32;
    // SAFETY: takes the address of a module-scope symbol.
    unsafe { asm!("mov.u32 {a}, ft_gemm_smem;", a = out(reg32) a) };
    a
}

/// 16-byte shared store.
///
/// # Safety
/// `addr` is a 16-byte aligned shared-space address inside a declared shared array.
#[inline(always)]
pub unsafe fn st_shared_v4(addr: u32, v: [u32; 4]) {
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("st.shared.v4.b32 [{p}], {{{a}, {b}, {c}, {d}}};", p = in(reg32) addr,
             a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2], d = in(reg32) v[3], options(nostack))
    };
}

/// 2-byte shared store.
///
/// # Safety
/// `addr` is a 2-byte aligned shared-space address inside a declared shared array.
#[inline(always)]
pub unsafe fn st_shared_b16(addr: u32, v: u16) {
    // SAFETY: the caller guarantees the address.
    unsafe { asm!("st.shared.b16 [{p}], {v};", p = in(reg32) addr, v = in(reg16) v, options(nostack)) };
}

/// 16-byte shared load as four f32.
///
/// # Safety
/// `addr` is a 16-byte aligned shared-space address inside a declared shared array.
#[inline(always)]
pub unsafe fn ld_shared_v4_f32(addr: u32) -> [f32; 4] {
    let (a, b, c, d): (f32, f32, f32, f32);
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("ld.shared.v4.f32 {{{a}, {b}, {c}, {d}}}, [{p}];", p = in(reg32) addr,
             a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, options(readonly, nostack))
    };
    [a, b, c, d]
}

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16` (sm_75+): four 8x8 b16 matrices; lane `l`
/// supplies the address of row `l % 8` of matrix `l / 8`, and receives in register `i` the
/// two elements of matrix `i` at row `l / 4`, columns `2 (l % 4)` and `2 (l % 4) + 1`.
///
/// # Safety
/// All 32 lanes execute it together; each address is a 16-byte aligned shared-space row.
#[inline(always)]
pub unsafe fn ldmatrix_x4(addr: u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees convergence and addresses.
    unsafe {
        asm!("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{a}, {b}, {c}, {d}}}, [{p}];", p = in(reg32) addr,
             a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, options(readonly, nostack))
    };
    [a, b, c, d]
}

macro_rules! mma_16816 {
    ($name:ident, $ty:literal) => {
        /// `mma.sync.aligned.m16n8k16.row.col.f32` on 16-bit inputs with f32 accumulators
        /// (sm_80+), fragment layouts as in the PTX ISA: `a` = A rows `l/4` and `l/4 + 8`,
        /// `b` = B columns `l/4`, `c`/result = rows `l/4`, `l/4 + 8`, columns `2(l%4) + {0,1}`.
        ///
        /// # Safety
        /// All 32 lanes of the warp execute it together.
        #[inline(always)]
        pub unsafe fn $name(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
            let (d0, d1, d2, d3): (f32, f32, f32, f32);
            // SAFETY: the caller guarantees warp convergence; registers only.
            unsafe {
                asm!(concat!("mma.sync.aligned.m16n8k16.row.col.f32.", $ty, ".", $ty, ".f32 ",
                             "{{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, ",
                             "{{{c0}, {c1}, {c2}, {c3}}};"),
                     d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
                     a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                     b0 = in(reg32) b[0], b1 = in(reg32) b[1],
                     c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
                     options(pure, nomem, nostack))
            };
            [d0, d1, d2, d3]
        }
    };
}
mma_16816!(mma_m16n8k16_bf16, "bf16");
mma_16816!(mma_m16n8k16_f16, "f16");

/// `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32` (sm_80+): f32 bit patterns are read as
/// TF32 (the low 13 mantissa bits are ignored). Fragments: `a` = A (row `l/4`, col `l%4`),
/// (row `l/4 + 8`, col `l%4`), (row `l/4`, col `l%4 + 4`), (row `l/4 + 8`, col `l%4 + 4`);
/// `b` = B (k `l%4`, n `l/4`), (k `l%4 + 4`, n `l/4`); `c` as for `m16n8k16`.
///
/// # Safety
/// All 32 lanes of the warp execute it together.
#[inline(always)]
pub unsafe fn mma_m16n8k8_tf32(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let (d0, d1, d2, d3): (f32, f32, f32, f32);
    // SAFETY: the caller guarantees warp convergence; registers only.
    unsafe {
        asm!("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{{d0}, {d1}, {d2}, {d3}}}, \
              {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};",
             d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
             a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
             b0 = in(reg32) b[0], b1 = in(reg32) b[1],
             c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
             options(pure, nomem, nostack))
    };
    [d0, d1, d2, d3]
}

/// `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`: as [`ldmatrix_x4`], but each 8x8 matrix
/// is transposed on the way: lane `l` receives row `2 (l % 4)` and `2 (l % 4) + 1` of column
/// `l / 4` as stored. Feeds `mma` fragments from tiles stored M- or N-contiguous.
///
/// # Safety
/// All 32 lanes execute it together; each address is a 16-byte aligned shared-space row.
#[inline(always)]
pub unsafe fn ldmatrix_x4_trans(addr: u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees convergence and addresses.
    unsafe {
        asm!("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{a}, {b}, {c}, {d}}}, [{p}];", p = in(reg32) addr,
             a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, options(readonly, nostack))
    };
    [a, b, c, d]
}

/// Waits for every lane of the warp (`bar.warp.sync`): orders their shared-memory accesses.
#[inline(always)]
pub fn sync_warp() {
    // SAFETY: a warp-level barrier with a full mask; all lanes call it together.
    unsafe { asm!("bar.warp.sync -1;", options(nostack)) };
}

/// 8-byte shared store of two f32.
///
/// # Safety
/// `addr` is an 8-byte aligned shared-space address inside a declared shared array.
#[inline(always)]
pub unsafe fn st_shared_v2_f32(addr: u32, a: f32, b: f32) {
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("st.shared.v2.f32 [{p}], {{{a}, {b}}};", p = in(reg32) addr, a = in(reg32) a, b = in(reg32) b, options(nostack))
    };
}

/// 4-byte shared load.
///
/// # Safety
/// `addr` is a 4-byte aligned shared-space address inside a declared shared array.
#[inline(always)]
pub unsafe fn ld_shared_b32(addr: u32) -> u32 {
    let v: u32;
    // SAFETY: the caller guarantees the address.
    unsafe { asm!("ld.shared.b32 {v}, [{p}];", v = out(reg32) v, p = in(reg32) addr, options(readonly, nostack)) };
    v
}

/// `cp.async.cg.shared.global` of 16 bytes (sm_80+): copies `src_bytes` (0..=16) bytes from
/// global memory to shared memory without passing through registers and zero-fills the rest.
///
/// # Safety
/// `dst` is a 16-byte aligned shared address inside a declared array; `src` is 16-byte
/// aligned and its first `src_bytes` bytes are readable (with 0 nothing is read).
#[inline(always)]
pub unsafe fn cp_async_16(dst: u32, src: *const u8, src_bytes: u32) {
    // SAFETY: the caller guarantees both addresses.
    unsafe {
        asm!("cp.async.cg.shared.global [{d}], [{s}], 16, {n};", d = in(reg32) dst, s = in(reg64) src,
             n = in(reg32) src_bytes, options(nostack))
    };
}

/// `cp.async.ca.shared.global` of 8 bytes, zero-filling beyond `src_bytes` (0..=8).
///
/// # Safety
/// As [`cp_async_16`] with 8-byte alignment.
#[inline(always)]
pub unsafe fn cp_async_8(dst: u32, src: *const u8, src_bytes: u32) {
    // SAFETY: the caller guarantees both addresses.
    unsafe {
        asm!("cp.async.ca.shared.global [{d}], [{s}], 8, {n};", d = in(reg32) dst, s = in(reg64) src,
             n = in(reg32) src_bytes, options(nostack))
    };
}

/// `cp.async.ca.shared.global` of 4 bytes, zero-filling beyond `src_bytes` (0..=4).
///
/// # Safety
/// As [`cp_async_16`] with 4-byte alignment.
#[inline(always)]
pub unsafe fn cp_async_4(dst: u32, src: *const u8, src_bytes: u32) {
    // SAFETY: the caller guarantees both addresses.
    unsafe {
        asm!("cp.async.ca.shared.global [{d}], [{s}], 4, {n};", d = in(reg32) dst, s = in(reg64) src,
             n = in(reg32) src_bytes, options(nostack))
    };
}

/// Closes the group of `cp.async` copies issued so far by this thread.
#[inline(always)]
pub fn cp_async_commit() {
    // SAFETY: bookkeeping only.
    unsafe { asm!("cp.async.commit_group;", options(nostack)) };
}

/// Waits until at most `N` of this thread's committed `cp.async` groups are still pending.
#[inline(always)]
pub fn cp_async_wait<const N: u32>() {
    // SAFETY: waits; no memory is touched by the instruction itself.
    unsafe { asm!("cp.async.wait_group {n};", n = const N, options(nostack)) };
}

/// 8-byte global load (`ld.global.v2.b32`).
///
/// # Safety
/// `p` must point to 8 readable, 8-byte aligned bytes of global memory.
#[inline(always)]
pub unsafe fn ld_global_v2(p: *const u32) -> [u32; 2] {
    let (a, b): (u32, u32);
    // SAFETY: the caller guarantees alignment and validity.
    unsafe {
        asm!("ld.global.v2.b32 {{{a}, {b}}}, [{p}];", p = in(reg64) p, a = out(reg32) a, b = out(reg32) b,
             options(readonly, nostack))
    };
    [a, b]
}

/// 8-byte global store (`st.global.v2.b32`).
///
/// # Safety
/// `p` must point to 8 writable, 8-byte aligned bytes of global memory.
#[inline(always)]
pub unsafe fn st_global_v2(p: *mut u32, v: [u32; 2]) {
    // SAFETY: the caller guarantees alignment and validity.
    unsafe {
        asm!("st.global.v2.b32 [{p}], {{{a}, {b}}};", p = in(reg64) p, a = in(reg32) v[0], b = in(reg32) v[1],
             options(nostack))
    };
}

/// Atomic `*addr += v` in shared memory (`red.shared.add.f32`, no result).
///
/// # Safety
/// `addr` must be a 4-byte aligned shared-space address inside a declared shared array.
#[inline(always)]
pub unsafe fn red_shared_add_f32(addr: u32, v: f32) {
    // SAFETY: the caller guarantees the address is valid shared memory.
    unsafe { asm!("red.shared.add.f32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) v, options(nostack)) };
}

/// Atomic `*p += v` in global memory (`red.global.add.f32`, no result).
///
/// # Safety
/// `p` must point to a 4-byte aligned, writable f32 of global memory.
#[inline(always)]
pub unsafe fn red_global_add_f32(p: *mut f32, v: f32) {
    // SAFETY: the caller guarantees the address is valid global memory.
    unsafe { asm!("red.global.add.f32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack)) };
}

/// Atomic `*p += v` in global memory, returning the old value (`atom.global.add.u32`).
///
/// # Safety
/// `p` must point to a 4-byte aligned, writable u32 of global memory.
#[inline(always)]
pub unsafe fn atom_add_global_u32(p: *mut u32, v: u32) -> u32 {
    let old: u32;
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("atom.global.add.u32 {o}, [{p}], {v};", o = out(reg32) old, p = in(reg64) p, v = in(reg32) v,
             options(nostack))
    };
    old
}

/// Memory fence at GPU scope (`membar.gl`): this thread's earlier writes are seen by every
/// thread of the grid before its later ones.
#[inline(always)]
pub fn fence_gpu() {
    // SAFETY: a fence has no operands and no preconditions.
    unsafe { asm!("membar.gl;", options(nostack)) };
}

/// f32 global load cached in L2 only (`ld.global.cg.f32`): sees other blocks' fenced writes
/// even where this SM's L1 holds an older copy.
///
/// # Safety
/// `p` must point to a readable, 4-byte aligned f32 of global memory.
#[inline(always)]
pub unsafe fn ld_global_cg_f32(p: *const f32) -> f32 {
    let v: f32;
    // SAFETY: the caller guarantees the address.
    unsafe { asm!("ld.global.cg.f32 {v}, [{p}];", v = out(reg32) v, p = in(reg64) p, options(readonly, nostack)) };
    v
}

/// 16-byte f32 global load cached in L2 only (`ld.global.cg.v4.f32`): sees other blocks'
/// fenced writes even where this SM's L1 holds an older copy.
///
/// # Safety
/// `p` must point to 4 readable, 16-byte aligned f32 of global memory.
#[inline(always)]
pub unsafe fn ld_global_cg_v4_f32(p: *const f32) -> [f32; 4] {
    let (a, b, c, d): (f32, f32, f32, f32);
    // SAFETY: the caller guarantees alignment and validity.
    unsafe {
        asm!("ld.global.cg.v4.f32 {{{a}, {b}, {c}, {d}}}, [{p}];",
             p = in(reg64) p, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c,
             d = out(reg32) d, options(readonly, nostack))
    };
    [a, b, c, d]
}

/// 16-byte global load through the read-only (non-coherent) path (`ld.global.nc.v4.b32`).
///
/// # Safety
/// `p` must point to 16 readable, 16-byte aligned bytes that no thread writes during the kernel.
#[inline(always)]
pub unsafe fn ld_global_nc_v4(p: *const u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees alignment, validity and that the data is read-only.
    unsafe {
        asm!("ld.global.nc.v4.b32 {{{a}, {b}, {c}, {d}}}, [{p}];",
             p = in(reg64) p, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c,
             d = out(reg32) d, options(readonly, nostack))
    };
    [a, b, c, d]
}
