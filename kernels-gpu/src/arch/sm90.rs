//! Hopper (sm_90a) intrinsics for the TMA + wgmma GEMM: mbarriers, bulk tensor copies, the
//! wgmma fences and shared-memory matrix descriptors, `setmaxnreg`, named barriers. Each is a
//! thin wrapper over one instruction; only the sm_90a PTX build compiles this file.

use core::arch::asm;

// The Hopper kernels' dynamic shared memory, declared 1024-byte aligned (the 128-byte swizzle
// repeats every 1024 bytes and the descriptors assume tiles start on that boundary).
core::arch::global_asm!(".extern .shared .align 1024 .b8 ft_sm90_smem[];");

/// Shared-space address of the dynamic shared memory, rounded up to 1024 bytes (the launch
/// asks for 1024 bytes of slack).
#[inline(always)]
pub fn smem_base_1024() -> u32 {
    let a: u32;
    // SAFETY: takes the address of a module-scope symbol.
    unsafe { asm!("mov.u32 {a}, ft_sm90_smem;", a = out(reg32) a) };
    (a + 1023) & !1023
}

/// `mbarrier.init.shared::cta.b64`: a barrier at `bar` expecting `count` arrivals per phase.
///
/// # Safety
/// `bar` is an 8-byte aligned shared address that no other thread uses until a barrier
/// (block-wide sync plus [`fence_barrier_init`]) orders the init before them.
#[inline(always)]
pub unsafe fn mbar_init(bar: u32, count: u32) {
    // SAFETY: as the caller guarantees.
    unsafe { asm!("mbarrier.init.shared::cta.b64 [{b}], {c};", b = in(reg32) bar, c = in(reg32) count) };
}

/// Makes mbarrier initialisations visible to the async proxy (TMA) and the cluster.
#[inline(always)]
pub fn fence_barrier_init() {
    // SAFETY: a fence has no operands.
    unsafe { asm!("fence.mbarrier_init.release.cluster;") };
}

/// `fence.proxy.async.shared::cta`: orders this thread's ordinary shared-memory accesses
/// before later async-proxy (TMA, wgmma) accesses.
#[inline(always)]
pub fn fence_proxy_async() {
    // SAFETY: a fence has no operands.
    unsafe { asm!("fence.proxy.async.shared::cta;") };
}

/// `stmatrix.sync.aligned.m8n8.x4.shared.b16`: the warp stores four 8 x 8 matrices of 16-bit
/// elements; lane `l` gives the shared address of row `l % 8` of matrix `l / 8` (16 bytes,
/// 16-byte aligned) and holds, in `r[i]`, row `l / 4`, columns `2 (l % 4)` and `+ 1` of matrix
/// `i` (the layout of an mma or wgmma accumulator fragment pair, packed).
///
/// # Safety
/// The whole warp calls it together; every lane's row lies in this block's shared memory and
/// no other thread accesses it until a barrier orders them.
#[inline(always)]
pub unsafe fn stmatrix_x4(addr: u32, r: [u32; 4]) {
    // SAFETY: as the caller guarantees.
    unsafe {
        asm!(
            "stmatrix.sync.aligned.m8n8.x4.shared.b16 [{a}], {{{r0}, {r1}, {r2}, {r3}}};",
            a = in(reg32) addr, r0 = in(reg32) r[0], r1 = in(reg32) r[1], r2 = in(reg32) r[2], r3 = in(reg32) r[3],
        )
    }
}

/// One arrival on the barrier that also expects `bytes` more transaction bytes this phase.
///
/// # Safety
/// `bar` is an initialised mbarrier in this block's shared memory.
#[inline(always)]
pub unsafe fn mbar_arrive_expect_tx(bar: u32, bytes: u32) {
    // SAFETY: as the caller guarantees.
    unsafe { asm!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{b}], {n};", b = in(reg32) bar, n = in(reg32) bytes) };
}

/// One arrival on the barrier.
///
/// # Safety
/// `bar` is an initialised mbarrier in this block's shared memory.
#[inline(always)]
pub unsafe fn mbar_arrive(bar: u32) {
    // SAFETY: as the caller guarantees.
    unsafe { asm!("mbarrier.arrive.shared::cta.b64 _, [{b}];", b = in(reg32) bar) };
}

/// Waits until the phase of parity `parity` of the barrier has completed (a Rust loop around
/// `try_wait`: `asm!` allows no labels).
///
/// # Safety
/// `bar` is an initialised mbarrier in this block's shared memory.
#[inline(always)]
pub unsafe fn mbar_wait(bar: u32, parity: u32) {
    loop {
        let done: u32;
        // SAFETY: as the caller guarantees; the predicate lives in the asm's own scope.
        unsafe {
            asm!(
                "{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [{b}], {ph}; selp.u32 {d}, 1, 0, p; }}",
                b = in(reg32) bar, ph = in(reg32) parity, d = out(reg32) done,
            )
        };
        if done != 0 {
            break;
        }
    }
}

/// `cp.async.bulk` global to shared: `bytes` (a multiple of 16) from `src` to `dst` (both
/// 16-byte aligned), completing as transactions on the mbarrier `bar`.
///
/// # Safety
/// `src..src + bytes` is readable global memory, `dst..dst + bytes` lies in this block's
/// shared memory and nothing else touches it until `bar`'s phase completes; `bar` expects the
/// bytes (`mbar_arrive_expect_tx`).
#[inline(always)]
pub unsafe fn bulk_load(dst: u32, src: u64, bytes: u32, bar: u32) {
    // SAFETY: as the caller guarantees.
    unsafe {
        asm!(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{s}], {n}, [{b}];",
            d = in(reg32) dst, s = in(reg64) src, n = in(reg32) bytes, b = in(reg32) bar,
        )
    };
}

/// Loads the box at coordinates (`c0`, `c1`, `c2`) (innermost first) of the tensor map at the
/// generic address `map` into shared memory at `dst`, completing `box bytes` of transactions
/// on the mbarrier `bar`. Out-of-range elements are filled with zeros.
///
/// # Safety
/// `map` is a valid 64-byte aligned `CUtensorMap` in param, const or global memory; `dst` is a
/// shared buffer of the box's size, aligned as the map's swizzle needs (1024 for 128 bytes).
#[inline(always)]
pub unsafe fn tma_load_3d(dst: u32, map: u64, c0: i32, c1: i32, c2: i32, bar: u32) {
    // SAFETY: as the caller guarantees.
    unsafe {
        asm!(
            "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{m}, {{{c0}, {c1}, {c2}}}], [{b}];",
            d = in(reg32) dst, m = in(reg64) map, c0 = in(reg32) c0, c1 = in(reg32) c1, c2 = in(reg32) c2,
            b = in(reg32) bar,
        )
    };
}

/// As [`tma_load_3d`], but the box lands at the same shared offset `dst` in every CTA of the
/// cluster whose bit is set in `mask`, and completes its bytes on the mbarrier at the same
/// offset `bar` in each of them (one global read, several copies).
///
/// # Safety
/// As [`tma_load_3d`], for every CTA of `mask`: each has initialised its barrier at `bar`
/// (ordered before this call by a cluster barrier) and expects these bytes on it.
#[inline(always)]
pub unsafe fn tma_load_3d_multicast(dst: u32, map: u64, c0: i32, c1: i32, c2: i32, bar: u32, mask: u16) {
    // SAFETY: as the caller guarantees.
    unsafe {
        asm!(
            "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [{d}], [{m}, {{{c0}, {c1}, {c2}}}], [{b}], {k};",
            d = in(reg32) dst, m = in(reg64) map, c0 = in(reg32) c0, c1 = in(reg32) c1, c2 = in(reg32) c2,
            b = in(reg32) bar, k = in(reg16) mask,
        )
    };
}

/// This block's rank in its cluster (`%cluster_ctarank`; 0 without a cluster).
#[inline(always)]
pub fn cluster_ctarank() -> u32 {
    let r: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {r}, %cluster_ctarank;", r = out(reg32) r) };
    r
}

/// Blocks in this block's cluster (`%cluster_nctarank`; 1 without a cluster).
#[inline(always)]
pub fn cluster_nctarank() -> u32 {
    let r: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {r}, %cluster_nctarank;", r = out(reg32) r) };
    r
}

/// This block's cluster along the grid's x (`%clusterid.x`; the block index without a cluster).
#[inline(always)]
pub fn cluster_id_x() -> u32 {
    let r: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {r}, %clusterid.x;", r = out(reg32) r) };
    r
}

/// Clusters along the grid's x (`%nclusterid.x`).
#[inline(always)]
pub fn n_cluster_id_x() -> u32 {
    let r: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {r}, %nclusterid.x;", r = out(reg32) r) };
    r
}

/// The f32 at the shared offset `addr` of the cluster's block `rank` (`mapa`, then
/// `ld.shared::cluster`).
///
/// # Safety
/// Block `rank` exists, has not exited, and wrote `addr` before a cluster barrier that this
/// thread has passed; nothing writes it until the next one.
#[inline(always)]
pub unsafe fn ld_shared_cluster_f32(addr: u32, rank: u32) -> f32 {
    let v: f32;
    // SAFETY: as the caller guarantees.
    unsafe {
        asm!(
            "{{ .reg .b32 ra; mapa.shared::cluster.u32 ra, {a}, {r}; ld.shared::cluster.f32 {v}, [ra]; }}",
            a = in(reg32) addr, r = in(reg32) rank, v = out(reg32) v,
        )
    };
    v
}

/// A barrier over every thread of the cluster (`barrier.cluster.arrive` then `wait`, release
/// and acquire: shared-memory writes and mbarrier initialisations before it are visible to the
/// other blocks of the cluster after it).
///
/// # Safety
/// Every thread of every block of the cluster reaches it the same number of times (none exits
/// first).
#[inline(always)]
pub unsafe fn cluster_sync() {
    // SAFETY: as the caller guarantees.
    unsafe { asm!("barrier.cluster.arrive.release;", "barrier.cluster.wait.acquire;") };
}

/// One arrival on the mbarrier at the shared offset `bar` of the cluster's block `rank`
/// (`mapa` then a remote `mbarrier.arrive`; the default `.release.cta` semantics, as a local
/// arrive: a cluster-scope release would wait for this thread's in-flight wgmma reads).
///
/// # Safety
/// Block `rank` of the cluster has initialised an mbarrier at `bar` and has not exited.
#[inline(always)]
pub unsafe fn mbar_arrive_cluster(bar: u32, rank: u32) {
    // SAFETY: as the caller guarantees.
    unsafe {
        asm!(
            "{{ .reg .b32 ra; mapa.shared::cluster.u32 ra, {b}, {r}; mbarrier.arrive.shared::cluster.b64 _, [ra]; }}",
            b = in(reg32) bar, r = in(reg32) rank,
        )
    };
}

/// Stores the shared-memory box at `src` (laid out as the map's swizzle says) to coordinates
/// (`c0`, `c1`, `c2`) (innermost first) of the tensor map at the generic address `map`, as one
/// bulk-async operation of this thread's current bulk group. Elements outside the tensor are
/// not written.
///
/// # Safety
/// `map` is a valid 64-byte aligned `CUtensorMap` of global memory the kernel may write; `src`
/// is a shared box of the map's box size, aligned as its swizzle needs (1024 for 128 bytes),
/// written by this block and made visible to the async proxy ([`fence_proxy_async`] and a
/// barrier) before the call; it stays untouched until [`bulk_wait_read`] returns.
#[inline(always)]
pub unsafe fn tma_store_3d(map: u64, c0: i32, c1: i32, c2: i32, src: u32) {
    // SAFETY: as the caller guarantees.
    unsafe {
        asm!(
            "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [{m}, {{{c0}, {c1}, {c2}}}], [{s}];",
            m = in(reg64) map, c0 = in(reg32) c0, c1 = in(reg32) c1, c2 = in(reg32) c2, s = in(reg32) src,
        )
    };
}

/// Closes this thread's current bulk-async group (the TMA stores issued since the last one).
#[inline(always)]
pub fn bulk_commit() {
    // SAFETY: no operands; only groups this thread issued are affected.
    unsafe { asm!("cp.async.bulk.commit_group;") };
}

/// Waits until at most `N` of the most recent bulk-async groups of this thread are still
/// reading their shared memory (a ring of `N + 1` store buffers: the oldest may be rewritten).
#[inline(always)]
pub fn bulk_wait_read_n<const N: u32>() {
    // SAFETY: no operands.
    unsafe { asm!("cp.async.bulk.wait_group.read {n};", n = const N) };
}

/// Waits until every bulk-async group of this thread has finished reading its shared memory
/// (the source may then be reused or the block may exit).
#[inline(always)]
pub fn bulk_wait_read() {
    // SAFETY: no operands.
    unsafe { asm!("cp.async.bulk.wait_group.read 0;") };
}

/// Shared-memory matrix descriptor of a K-major tile with the 128-byte swizzle: rows of 128
/// bytes, 8-row groups 1024 bytes apart (the layout TMA writes with `SWIZZLE_128B`). Adding
/// `32 >> 4 = 2` to the descriptor steps 32 bytes of K inside the row: one wgmma's K, 16
/// elements of a 16-bit type (k16) or 8 of f32 (tf32, k8).
#[inline(always)]
pub fn desc_k_sw128(addr: u32) -> u64 {
    ((addr as u64 & 0x3_ffff) >> 4) | (1u64 << 16) | ((1024u64 >> 4) << 32) | (1u64 << 62)
}

/// `wgmma.fence.sync.aligned`: orders earlier register accesses before the next wgmma.
#[inline(always)]
pub fn wgmma_fence() {
    // SAFETY: a fence; the warpgroup executes it together (as every wgmma call site does).
    unsafe { asm!("wgmma.fence.sync.aligned;") };
}

/// `wgmma.commit_group.sync.aligned`: closes the group of wgmmas issued since the last one.
#[inline(always)]
pub fn wgmma_commit() {
    // SAFETY: as `wgmma_fence`.
    unsafe { asm!("wgmma.commit_group.sync.aligned;") };
}

/// `wgmma.wait_group.sync.aligned N`: waits until at most `N` committed groups are pending.
#[inline(always)]
pub fn wgmma_wait<const N: u32>() {
    // SAFETY: as `wgmma_fence`.
    unsafe { asm!("wgmma.wait_group.sync.aligned {n};", n = const N) };
}

/// `setmaxnreg.inc.sync.aligned.u32 N`: raises this warpgroup's registers per thread.
#[inline(always)]
pub fn setmaxnreg_inc<const N: u32>() {
    // SAFETY: the whole warpgroup executes it (one branch per warpgroup role).
    unsafe { asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const N) };
}

/// `setmaxnreg.dec.sync.aligned.u32 N`: releases registers of this warpgroup.
#[inline(always)]
pub fn setmaxnreg_dec<const N: u32>() {
    // SAFETY: as `setmaxnreg_inc`.
    unsafe { asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const N) };
}

/// `bar.sync id, threads`: a named barrier among `threads` threads (a multiple of 32).
///
/// # Safety
/// Exactly `threads` threads reach barrier `id` (not 0, the block-wide one) each round.
#[inline(always)]
pub unsafe fn named_barrier(id: u32, threads: u32) {
    // SAFETY: as the caller guarantees.
    unsafe { asm!("bar.sync {i}, {t};", i = in(reg32) id, t = in(reg32) threads) };
}

/// Arrives at named barrier `id` without waiting (`bar.arrive`): the signalling half of a
/// producer/consumer handshake whose other side calls [`named_barrier`] with the same count.
///
/// # Safety
/// As [`named_barrier`]: `threads` counts the arriving and the waiting threads together.
#[inline(always)]
pub unsafe fn named_barrier_arrive(id: u32, threads: u32) {
    // SAFETY: as the caller guarantees.
    unsafe { asm!("bar.arrive {i}, {t};", i = in(reg32) id, t = in(reg32) threads) };
}

/// The generic address of a tensor map from its param-space address
/// (`cvta.param`): for maps passed by value to the kernel.
#[inline(always)]
pub fn param_to_generic(param: u64) -> u64 {
    let g: u64;
    // SAFETY: an address conversion.
    unsafe { asm!("cvta.param.u64 {g}, {p};", g = out(reg64) g, p = in(reg64) param) };
    g
}

/// `prefetch.tensormap [map]`: starts fetching a tensor map (its generic address, as
/// [`param_to_generic`] gives for a map passed by value) into the descriptor cache, so the
/// first TMA copy through it does not wait for that fetch.
///
/// # Safety
/// `map` is the generic address of a valid `CUtensorMap`.
#[inline(always)]
pub unsafe fn prefetch_tensormap(map: u64) {
    // SAFETY: as the caller guarantees; a prefetch has no other effect.
    unsafe { asm!("prefetch.tensormap [{m}];", m = in(reg64) map) };
}

// The wgmma instructions themselves (one wrapper per shape and type) live in `wgmma.rs`.
pub use super::wgmma::*;
