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

/// `wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16`: `d = A B + d` (`+ 0` when `scale_d` is 0: the
/// first k-step of a tile, no zeroing needed) for the warpgroup's
/// 64 x 128 f32 accumulators (`d`, the fragment layout of the PTX ISA), A (64 x 16) and B
/// (128 x 16, K-major unless `TRANS_B`) read from shared memory through the descriptors.
/// Asynchronous: fence before, commit and wait after (see [`wgmma_fence`]).
///
/// # Safety
/// All 128 threads of a warpgroup call it together with the same descriptors, which describe
/// tiles in this block's shared memory that stay unchanged until the group is waited for.
#[inline(always)]
pub unsafe fn wgmma_m64n128k16_bf16<const TRANS_B: u32>(d: &mut [f32; 64], desc_a: u64, desc_b: u64, scale_d: u32) {
    // SAFETY: the caller upholds the warpgroup and shared-memory requirements.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.b32 p, {66}, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}, {16}, {17}, {18}, {19}, {20}, {21}, {22}, {23}, {24}, {25}, {26}, {27}, {28}, {29}, {30}, {31}, {32}, {33}, {34}, {35}, {36}, {37}, {38}, {39}, {40}, {41}, {42}, {43}, {44}, {45}, {46}, {47}, {48}, {49}, {50}, {51}, {52}, {53}, {54}, {55}, {56}, {57}, {58}, {59}, {60}, {61}, {62}, {63}}}, {64}, {65}, p, 1, 1, 0, {67}; }}",
            inout(reg32) d[0], inout(reg32) d[1], inout(reg32) d[2], inout(reg32) d[3], inout(reg32) d[4], inout(reg32) d[5], inout(reg32) d[6], inout(reg32) d[7],
            inout(reg32) d[8], inout(reg32) d[9], inout(reg32) d[10], inout(reg32) d[11], inout(reg32) d[12], inout(reg32) d[13], inout(reg32) d[14], inout(reg32) d[15],
            inout(reg32) d[16], inout(reg32) d[17], inout(reg32) d[18], inout(reg32) d[19], inout(reg32) d[20], inout(reg32) d[21], inout(reg32) d[22], inout(reg32) d[23],
            inout(reg32) d[24], inout(reg32) d[25], inout(reg32) d[26], inout(reg32) d[27], inout(reg32) d[28], inout(reg32) d[29], inout(reg32) d[30], inout(reg32) d[31],
            inout(reg32) d[32], inout(reg32) d[33], inout(reg32) d[34], inout(reg32) d[35], inout(reg32) d[36], inout(reg32) d[37], inout(reg32) d[38], inout(reg32) d[39],
            inout(reg32) d[40], inout(reg32) d[41], inout(reg32) d[42], inout(reg32) d[43], inout(reg32) d[44], inout(reg32) d[45], inout(reg32) d[46], inout(reg32) d[47],
            inout(reg32) d[48], inout(reg32) d[49], inout(reg32) d[50], inout(reg32) d[51], inout(reg32) d[52], inout(reg32) d[53], inout(reg32) d[54], inout(reg32) d[55],
            inout(reg32) d[56], inout(reg32) d[57], inout(reg32) d[58], inout(reg32) d[59], inout(reg32) d[60], inout(reg32) d[61], inout(reg32) d[62], inout(reg32) d[63],
            in(reg64) desc_a,
            in(reg64) desc_b,
            in(reg32) scale_d,
            const TRANS_B,
        )
    }
}

/// `wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16`: `d = A B + d` (`+ 0` when `scale_d` is 0: the
/// first k-step of a tile, no zeroing needed) for the warpgroup's
/// 64 x 128 f32 accumulators (`d`, the fragment layout of the PTX ISA), A (64 x 16) and B
/// (128 x 16, K-major unless `TRANS_B`) read from shared memory through the descriptors.
/// Asynchronous: fence before, commit and wait after (see [`wgmma_fence`]).
///
/// # Safety
/// All 128 threads of a warpgroup call it together with the same descriptors, which describe
/// tiles in this block's shared memory that stay unchanged until the group is waited for.
#[inline(always)]
pub unsafe fn wgmma_m64n128k16_f16<const TRANS_B: u32>(d: &mut [f32; 64], desc_a: u64, desc_b: u64, scale_d: u32) {
    // SAFETY: the caller upholds the warpgroup and shared-memory requirements.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.b32 p, {66}, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}, {16}, {17}, {18}, {19}, {20}, {21}, {22}, {23}, {24}, {25}, {26}, {27}, {28}, {29}, {30}, {31}, {32}, {33}, {34}, {35}, {36}, {37}, {38}, {39}, {40}, {41}, {42}, {43}, {44}, {45}, {46}, {47}, {48}, {49}, {50}, {51}, {52}, {53}, {54}, {55}, {56}, {57}, {58}, {59}, {60}, {61}, {62}, {63}}}, {64}, {65}, p, 1, 1, 0, {67}; }}",
            inout(reg32) d[0], inout(reg32) d[1], inout(reg32) d[2], inout(reg32) d[3], inout(reg32) d[4], inout(reg32) d[5], inout(reg32) d[6], inout(reg32) d[7],
            inout(reg32) d[8], inout(reg32) d[9], inout(reg32) d[10], inout(reg32) d[11], inout(reg32) d[12], inout(reg32) d[13], inout(reg32) d[14], inout(reg32) d[15],
            inout(reg32) d[16], inout(reg32) d[17], inout(reg32) d[18], inout(reg32) d[19], inout(reg32) d[20], inout(reg32) d[21], inout(reg32) d[22], inout(reg32) d[23],
            inout(reg32) d[24], inout(reg32) d[25], inout(reg32) d[26], inout(reg32) d[27], inout(reg32) d[28], inout(reg32) d[29], inout(reg32) d[30], inout(reg32) d[31],
            inout(reg32) d[32], inout(reg32) d[33], inout(reg32) d[34], inout(reg32) d[35], inout(reg32) d[36], inout(reg32) d[37], inout(reg32) d[38], inout(reg32) d[39],
            inout(reg32) d[40], inout(reg32) d[41], inout(reg32) d[42], inout(reg32) d[43], inout(reg32) d[44], inout(reg32) d[45], inout(reg32) d[46], inout(reg32) d[47],
            inout(reg32) d[48], inout(reg32) d[49], inout(reg32) d[50], inout(reg32) d[51], inout(reg32) d[52], inout(reg32) d[53], inout(reg32) d[54], inout(reg32) d[55],
            inout(reg32) d[56], inout(reg32) d[57], inout(reg32) d[58], inout(reg32) d[59], inout(reg32) d[60], inout(reg32) d[61], inout(reg32) d[62], inout(reg32) d[63],
            in(reg64) desc_a,
            in(reg64) desc_b,
            in(reg32) scale_d,
            const TRANS_B,
        )
    }
}

/// `wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16`: `d = A B + d` (`+ 0` when `scale_d` is 0: the
/// first k-step of a tile, no zeroing needed) for the warpgroup's
/// 64 x 192 f32 accumulators (`d`, the fragment layout of the PTX ISA), A (64 x 16) and B
/// (192 x 16, K-major unless `TRANS_B`) read from shared memory through the descriptors.
/// Asynchronous: fence before, commit and wait after (see [`wgmma_fence`]).
///
/// # Safety
/// All 128 threads of a warpgroup call it together with the same descriptors, which describe
/// tiles in this block's shared memory that stay unchanged until the group is waited for.
#[inline(always)]
pub unsafe fn wgmma_m64n192k16_bf16<const TRANS_B: u32>(d: &mut [f32; 96], desc_a: u64, desc_b: u64, scale_d: u32) {
    // SAFETY: the caller upholds the warpgroup and shared-memory requirements.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.b32 p, {98}, 0; wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}, {16}, {17}, {18}, {19}, {20}, {21}, {22}, {23}, {24}, {25}, {26}, {27}, {28}, {29}, {30}, {31}, {32}, {33}, {34}, {35}, {36}, {37}, {38}, {39}, {40}, {41}, {42}, {43}, {44}, {45}, {46}, {47}, {48}, {49}, {50}, {51}, {52}, {53}, {54}, {55}, {56}, {57}, {58}, {59}, {60}, {61}, {62}, {63}, {64}, {65}, {66}, {67}, {68}, {69}, {70}, {71}, {72}, {73}, {74}, {75}, {76}, {77}, {78}, {79}, {80}, {81}, {82}, {83}, {84}, {85}, {86}, {87}, {88}, {89}, {90}, {91}, {92}, {93}, {94}, {95}}}, {96}, {97}, p, 1, 1, 0, {99}; }}",
            inout(reg32) d[0], inout(reg32) d[1], inout(reg32) d[2], inout(reg32) d[3], inout(reg32) d[4], inout(reg32) d[5], inout(reg32) d[6], inout(reg32) d[7],
            inout(reg32) d[8], inout(reg32) d[9], inout(reg32) d[10], inout(reg32) d[11], inout(reg32) d[12], inout(reg32) d[13], inout(reg32) d[14], inout(reg32) d[15],
            inout(reg32) d[16], inout(reg32) d[17], inout(reg32) d[18], inout(reg32) d[19], inout(reg32) d[20], inout(reg32) d[21], inout(reg32) d[22], inout(reg32) d[23],
            inout(reg32) d[24], inout(reg32) d[25], inout(reg32) d[26], inout(reg32) d[27], inout(reg32) d[28], inout(reg32) d[29], inout(reg32) d[30], inout(reg32) d[31],
            inout(reg32) d[32], inout(reg32) d[33], inout(reg32) d[34], inout(reg32) d[35], inout(reg32) d[36], inout(reg32) d[37], inout(reg32) d[38], inout(reg32) d[39],
            inout(reg32) d[40], inout(reg32) d[41], inout(reg32) d[42], inout(reg32) d[43], inout(reg32) d[44], inout(reg32) d[45], inout(reg32) d[46], inout(reg32) d[47],
            inout(reg32) d[48], inout(reg32) d[49], inout(reg32) d[50], inout(reg32) d[51], inout(reg32) d[52], inout(reg32) d[53], inout(reg32) d[54], inout(reg32) d[55],
            inout(reg32) d[56], inout(reg32) d[57], inout(reg32) d[58], inout(reg32) d[59], inout(reg32) d[60], inout(reg32) d[61], inout(reg32) d[62], inout(reg32) d[63],
            inout(reg32) d[64], inout(reg32) d[65], inout(reg32) d[66], inout(reg32) d[67], inout(reg32) d[68], inout(reg32) d[69], inout(reg32) d[70], inout(reg32) d[71],
            inout(reg32) d[72], inout(reg32) d[73], inout(reg32) d[74], inout(reg32) d[75], inout(reg32) d[76], inout(reg32) d[77], inout(reg32) d[78], inout(reg32) d[79],
            inout(reg32) d[80], inout(reg32) d[81], inout(reg32) d[82], inout(reg32) d[83], inout(reg32) d[84], inout(reg32) d[85], inout(reg32) d[86], inout(reg32) d[87],
            inout(reg32) d[88], inout(reg32) d[89], inout(reg32) d[90], inout(reg32) d[91], inout(reg32) d[92], inout(reg32) d[93], inout(reg32) d[94], inout(reg32) d[95],
            in(reg64) desc_a,
            in(reg64) desc_b,
            in(reg32) scale_d,
            const TRANS_B,
        )
    }
}

/// `wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16`: `d = A B + d` (`+ 0` when `scale_d` is 0: the
/// first k-step of a tile, no zeroing needed) for the warpgroup's
/// 64 x 192 f32 accumulators (`d`, the fragment layout of the PTX ISA), A (64 x 16) and B
/// (192 x 16, K-major unless `TRANS_B`) read from shared memory through the descriptors.
/// Asynchronous: fence before, commit and wait after (see [`wgmma_fence`]).
///
/// # Safety
/// All 128 threads of a warpgroup call it together with the same descriptors, which describe
/// tiles in this block's shared memory that stay unchanged until the group is waited for.
#[inline(always)]
pub unsafe fn wgmma_m64n192k16_f16<const TRANS_B: u32>(d: &mut [f32; 96], desc_a: u64, desc_b: u64, scale_d: u32) {
    // SAFETY: the caller upholds the warpgroup and shared-memory requirements.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.b32 p, {98}, 0; wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 {{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}, {16}, {17}, {18}, {19}, {20}, {21}, {22}, {23}, {24}, {25}, {26}, {27}, {28}, {29}, {30}, {31}, {32}, {33}, {34}, {35}, {36}, {37}, {38}, {39}, {40}, {41}, {42}, {43}, {44}, {45}, {46}, {47}, {48}, {49}, {50}, {51}, {52}, {53}, {54}, {55}, {56}, {57}, {58}, {59}, {60}, {61}, {62}, {63}, {64}, {65}, {66}, {67}, {68}, {69}, {70}, {71}, {72}, {73}, {74}, {75}, {76}, {77}, {78}, {79}, {80}, {81}, {82}, {83}, {84}, {85}, {86}, {87}, {88}, {89}, {90}, {91}, {92}, {93}, {94}, {95}}}, {96}, {97}, p, 1, 1, 0, {99}; }}",
            inout(reg32) d[0], inout(reg32) d[1], inout(reg32) d[2], inout(reg32) d[3], inout(reg32) d[4], inout(reg32) d[5], inout(reg32) d[6], inout(reg32) d[7],
            inout(reg32) d[8], inout(reg32) d[9], inout(reg32) d[10], inout(reg32) d[11], inout(reg32) d[12], inout(reg32) d[13], inout(reg32) d[14], inout(reg32) d[15],
            inout(reg32) d[16], inout(reg32) d[17], inout(reg32) d[18], inout(reg32) d[19], inout(reg32) d[20], inout(reg32) d[21], inout(reg32) d[22], inout(reg32) d[23],
            inout(reg32) d[24], inout(reg32) d[25], inout(reg32) d[26], inout(reg32) d[27], inout(reg32) d[28], inout(reg32) d[29], inout(reg32) d[30], inout(reg32) d[31],
            inout(reg32) d[32], inout(reg32) d[33], inout(reg32) d[34], inout(reg32) d[35], inout(reg32) d[36], inout(reg32) d[37], inout(reg32) d[38], inout(reg32) d[39],
            inout(reg32) d[40], inout(reg32) d[41], inout(reg32) d[42], inout(reg32) d[43], inout(reg32) d[44], inout(reg32) d[45], inout(reg32) d[46], inout(reg32) d[47],
            inout(reg32) d[48], inout(reg32) d[49], inout(reg32) d[50], inout(reg32) d[51], inout(reg32) d[52], inout(reg32) d[53], inout(reg32) d[54], inout(reg32) d[55],
            inout(reg32) d[56], inout(reg32) d[57], inout(reg32) d[58], inout(reg32) d[59], inout(reg32) d[60], inout(reg32) d[61], inout(reg32) d[62], inout(reg32) d[63],
            inout(reg32) d[64], inout(reg32) d[65], inout(reg32) d[66], inout(reg32) d[67], inout(reg32) d[68], inout(reg32) d[69], inout(reg32) d[70], inout(reg32) d[71],
            inout(reg32) d[72], inout(reg32) d[73], inout(reg32) d[74], inout(reg32) d[75], inout(reg32) d[76], inout(reg32) d[77], inout(reg32) d[78], inout(reg32) d[79],
            inout(reg32) d[80], inout(reg32) d[81], inout(reg32) d[82], inout(reg32) d[83], inout(reg32) d[84], inout(reg32) d[85], inout(reg32) d[86], inout(reg32) d[87],
            inout(reg32) d[88], inout(reg32) d[89], inout(reg32) d[90], inout(reg32) d[91], inout(reg32) d[92], inout(reg32) d[93], inout(reg32) d[94], inout(reg32) d[95],
            in(reg64) desc_a,
            in(reg64) desc_b,
            in(reg32) scale_d,
            const TRANS_B,
        )
    }
}

/// `wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16`: `d = A B + d` (`+ 0` when `scale_d` is 0: the
/// first k-step of a tile, no zeroing needed) for the warpgroup's
/// 64 x 256 f32 accumulators (`d`, the fragment layout of the PTX ISA), A (64 x 16) and B
/// (256 x 16, K-major unless `TRANS_B`) read from shared memory through the descriptors.
/// Asynchronous: fence before, commit and wait after (see [`wgmma_fence`]).
///
/// # Safety
/// All 128 threads of a warpgroup call it together with the same descriptors, which describe
/// tiles in this block's shared memory that stay unchanged until the group is waited for.
#[inline(always)]
pub unsafe fn wgmma_m64n256k16_bf16<const TRANS_B: u32>(d: &mut [f32; 128], desc_a: u64, desc_b: u64, scale_d: u32) {
    // SAFETY: the caller upholds the warpgroup and shared-memory requirements.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.b32 p, {130}, 0; wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}, {16}, {17}, {18}, {19}, {20}, {21}, {22}, {23}, {24}, {25}, {26}, {27}, {28}, {29}, {30}, {31}, {32}, {33}, {34}, {35}, {36}, {37}, {38}, {39}, {40}, {41}, {42}, {43}, {44}, {45}, {46}, {47}, {48}, {49}, {50}, {51}, {52}, {53}, {54}, {55}, {56}, {57}, {58}, {59}, {60}, {61}, {62}, {63}, {64}, {65}, {66}, {67}, {68}, {69}, {70}, {71}, {72}, {73}, {74}, {75}, {76}, {77}, {78}, {79}, {80}, {81}, {82}, {83}, {84}, {85}, {86}, {87}, {88}, {89}, {90}, {91}, {92}, {93}, {94}, {95}, {96}, {97}, {98}, {99}, {100}, {101}, {102}, {103}, {104}, {105}, {106}, {107}, {108}, {109}, {110}, {111}, {112}, {113}, {114}, {115}, {116}, {117}, {118}, {119}, {120}, {121}, {122}, {123}, {124}, {125}, {126}, {127}}}, {128}, {129}, p, 1, 1, 0, {131}; }}",
            inout(reg32) d[0], inout(reg32) d[1], inout(reg32) d[2], inout(reg32) d[3], inout(reg32) d[4], inout(reg32) d[5], inout(reg32) d[6], inout(reg32) d[7],
            inout(reg32) d[8], inout(reg32) d[9], inout(reg32) d[10], inout(reg32) d[11], inout(reg32) d[12], inout(reg32) d[13], inout(reg32) d[14], inout(reg32) d[15],
            inout(reg32) d[16], inout(reg32) d[17], inout(reg32) d[18], inout(reg32) d[19], inout(reg32) d[20], inout(reg32) d[21], inout(reg32) d[22], inout(reg32) d[23],
            inout(reg32) d[24], inout(reg32) d[25], inout(reg32) d[26], inout(reg32) d[27], inout(reg32) d[28], inout(reg32) d[29], inout(reg32) d[30], inout(reg32) d[31],
            inout(reg32) d[32], inout(reg32) d[33], inout(reg32) d[34], inout(reg32) d[35], inout(reg32) d[36], inout(reg32) d[37], inout(reg32) d[38], inout(reg32) d[39],
            inout(reg32) d[40], inout(reg32) d[41], inout(reg32) d[42], inout(reg32) d[43], inout(reg32) d[44], inout(reg32) d[45], inout(reg32) d[46], inout(reg32) d[47],
            inout(reg32) d[48], inout(reg32) d[49], inout(reg32) d[50], inout(reg32) d[51], inout(reg32) d[52], inout(reg32) d[53], inout(reg32) d[54], inout(reg32) d[55],
            inout(reg32) d[56], inout(reg32) d[57], inout(reg32) d[58], inout(reg32) d[59], inout(reg32) d[60], inout(reg32) d[61], inout(reg32) d[62], inout(reg32) d[63],
            inout(reg32) d[64], inout(reg32) d[65], inout(reg32) d[66], inout(reg32) d[67], inout(reg32) d[68], inout(reg32) d[69], inout(reg32) d[70], inout(reg32) d[71],
            inout(reg32) d[72], inout(reg32) d[73], inout(reg32) d[74], inout(reg32) d[75], inout(reg32) d[76], inout(reg32) d[77], inout(reg32) d[78], inout(reg32) d[79],
            inout(reg32) d[80], inout(reg32) d[81], inout(reg32) d[82], inout(reg32) d[83], inout(reg32) d[84], inout(reg32) d[85], inout(reg32) d[86], inout(reg32) d[87],
            inout(reg32) d[88], inout(reg32) d[89], inout(reg32) d[90], inout(reg32) d[91], inout(reg32) d[92], inout(reg32) d[93], inout(reg32) d[94], inout(reg32) d[95],
            inout(reg32) d[96], inout(reg32) d[97], inout(reg32) d[98], inout(reg32) d[99], inout(reg32) d[100], inout(reg32) d[101], inout(reg32) d[102], inout(reg32) d[103],
            inout(reg32) d[104], inout(reg32) d[105], inout(reg32) d[106], inout(reg32) d[107], inout(reg32) d[108], inout(reg32) d[109], inout(reg32) d[110], inout(reg32) d[111],
            inout(reg32) d[112], inout(reg32) d[113], inout(reg32) d[114], inout(reg32) d[115], inout(reg32) d[116], inout(reg32) d[117], inout(reg32) d[118], inout(reg32) d[119],
            inout(reg32) d[120], inout(reg32) d[121], inout(reg32) d[122], inout(reg32) d[123], inout(reg32) d[124], inout(reg32) d[125], inout(reg32) d[126], inout(reg32) d[127],
            in(reg64) desc_a,
            in(reg64) desc_b,
            in(reg32) scale_d,
            const TRANS_B,
        )
    }
}

/// `wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16`: `d = A B + d` (`+ 0` when `scale_d` is 0: the
/// first k-step of a tile, no zeroing needed) for the warpgroup's
/// 64 x 256 f32 accumulators (`d`, the fragment layout of the PTX ISA), A (64 x 16) and B
/// (256 x 16, K-major unless `TRANS_B`) read from shared memory through the descriptors.
/// Asynchronous: fence before, commit and wait after (see [`wgmma_fence`]).
///
/// # Safety
/// All 128 threads of a warpgroup call it together with the same descriptors, which describe
/// tiles in this block's shared memory that stay unchanged until the group is waited for.
#[inline(always)]
pub unsafe fn wgmma_m64n256k16_f16<const TRANS_B: u32>(d: &mut [f32; 128], desc_a: u64, desc_b: u64, scale_d: u32) {
    // SAFETY: the caller upholds the warpgroup and shared-memory requirements.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.b32 p, {130}, 0; wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}, {16}, {17}, {18}, {19}, {20}, {21}, {22}, {23}, {24}, {25}, {26}, {27}, {28}, {29}, {30}, {31}, {32}, {33}, {34}, {35}, {36}, {37}, {38}, {39}, {40}, {41}, {42}, {43}, {44}, {45}, {46}, {47}, {48}, {49}, {50}, {51}, {52}, {53}, {54}, {55}, {56}, {57}, {58}, {59}, {60}, {61}, {62}, {63}, {64}, {65}, {66}, {67}, {68}, {69}, {70}, {71}, {72}, {73}, {74}, {75}, {76}, {77}, {78}, {79}, {80}, {81}, {82}, {83}, {84}, {85}, {86}, {87}, {88}, {89}, {90}, {91}, {92}, {93}, {94}, {95}, {96}, {97}, {98}, {99}, {100}, {101}, {102}, {103}, {104}, {105}, {106}, {107}, {108}, {109}, {110}, {111}, {112}, {113}, {114}, {115}, {116}, {117}, {118}, {119}, {120}, {121}, {122}, {123}, {124}, {125}, {126}, {127}}}, {128}, {129}, p, 1, 1, 0, {131}; }}",
            inout(reg32) d[0], inout(reg32) d[1], inout(reg32) d[2], inout(reg32) d[3], inout(reg32) d[4], inout(reg32) d[5], inout(reg32) d[6], inout(reg32) d[7],
            inout(reg32) d[8], inout(reg32) d[9], inout(reg32) d[10], inout(reg32) d[11], inout(reg32) d[12], inout(reg32) d[13], inout(reg32) d[14], inout(reg32) d[15],
            inout(reg32) d[16], inout(reg32) d[17], inout(reg32) d[18], inout(reg32) d[19], inout(reg32) d[20], inout(reg32) d[21], inout(reg32) d[22], inout(reg32) d[23],
            inout(reg32) d[24], inout(reg32) d[25], inout(reg32) d[26], inout(reg32) d[27], inout(reg32) d[28], inout(reg32) d[29], inout(reg32) d[30], inout(reg32) d[31],
            inout(reg32) d[32], inout(reg32) d[33], inout(reg32) d[34], inout(reg32) d[35], inout(reg32) d[36], inout(reg32) d[37], inout(reg32) d[38], inout(reg32) d[39],
            inout(reg32) d[40], inout(reg32) d[41], inout(reg32) d[42], inout(reg32) d[43], inout(reg32) d[44], inout(reg32) d[45], inout(reg32) d[46], inout(reg32) d[47],
            inout(reg32) d[48], inout(reg32) d[49], inout(reg32) d[50], inout(reg32) d[51], inout(reg32) d[52], inout(reg32) d[53], inout(reg32) d[54], inout(reg32) d[55],
            inout(reg32) d[56], inout(reg32) d[57], inout(reg32) d[58], inout(reg32) d[59], inout(reg32) d[60], inout(reg32) d[61], inout(reg32) d[62], inout(reg32) d[63],
            inout(reg32) d[64], inout(reg32) d[65], inout(reg32) d[66], inout(reg32) d[67], inout(reg32) d[68], inout(reg32) d[69], inout(reg32) d[70], inout(reg32) d[71],
            inout(reg32) d[72], inout(reg32) d[73], inout(reg32) d[74], inout(reg32) d[75], inout(reg32) d[76], inout(reg32) d[77], inout(reg32) d[78], inout(reg32) d[79],
            inout(reg32) d[80], inout(reg32) d[81], inout(reg32) d[82], inout(reg32) d[83], inout(reg32) d[84], inout(reg32) d[85], inout(reg32) d[86], inout(reg32) d[87],
            inout(reg32) d[88], inout(reg32) d[89], inout(reg32) d[90], inout(reg32) d[91], inout(reg32) d[92], inout(reg32) d[93], inout(reg32) d[94], inout(reg32) d[95],
            inout(reg32) d[96], inout(reg32) d[97], inout(reg32) d[98], inout(reg32) d[99], inout(reg32) d[100], inout(reg32) d[101], inout(reg32) d[102], inout(reg32) d[103],
            inout(reg32) d[104], inout(reg32) d[105], inout(reg32) d[106], inout(reg32) d[107], inout(reg32) d[108], inout(reg32) d[109], inout(reg32) d[110], inout(reg32) d[111],
            inout(reg32) d[112], inout(reg32) d[113], inout(reg32) d[114], inout(reg32) d[115], inout(reg32) d[116], inout(reg32) d[117], inout(reg32) d[118], inout(reg32) d[119],
            inout(reg32) d[120], inout(reg32) d[121], inout(reg32) d[122], inout(reg32) d[123], inout(reg32) d[124], inout(reg32) d[125], inout(reg32) d[126], inout(reg32) d[127],
            in(reg64) desc_a,
            in(reg64) desc_b,
            in(reg32) scale_d,
            const TRANS_B,
        )
    }
}

/// `wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32`: `d = A B + d` (`+ 0` when `scale_d` is 0: the
/// first k-step of a tile, no zeroing needed) for the warpgroup's
/// 64 x 128 f32 accumulators (`d`, the fragment layout of the PTX ISA), A (64 x 8) and B
/// (128 x 8) read as f32 from shared memory through the descriptors, both K-major (tf32 has
/// no transpose; the tensor cores use the top 19 bits of each f32: 10 mantissa bits).
/// Asynchronous: fence before, commit and wait after (see [`wgmma_fence`]).
///
/// # Safety
/// All 128 threads of a warpgroup call it together with the same descriptors, which describe
/// tiles in this block's shared memory that stay unchanged until the group is waited for.
#[inline(always)]
pub unsafe fn wgmma_m64n128k8_tf32(d: &mut [f32; 64], desc_a: u64, desc_b: u64, scale_d: u32) {
    // SAFETY: the caller upholds the warpgroup and shared-memory requirements.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.b32 p, {66}, 0; wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}, {16}, {17}, {18}, {19}, {20}, {21}, {22}, {23}, {24}, {25}, {26}, {27}, {28}, {29}, {30}, {31}, {32}, {33}, {34}, {35}, {36}, {37}, {38}, {39}, {40}, {41}, {42}, {43}, {44}, {45}, {46}, {47}, {48}, {49}, {50}, {51}, {52}, {53}, {54}, {55}, {56}, {57}, {58}, {59}, {60}, {61}, {62}, {63}}}, {64}, {65}, p, 1, 1; }}",
            inout(reg32) d[0], inout(reg32) d[1], inout(reg32) d[2], inout(reg32) d[3], inout(reg32) d[4], inout(reg32) d[5], inout(reg32) d[6], inout(reg32) d[7],
            inout(reg32) d[8], inout(reg32) d[9], inout(reg32) d[10], inout(reg32) d[11], inout(reg32) d[12], inout(reg32) d[13], inout(reg32) d[14], inout(reg32) d[15],
            inout(reg32) d[16], inout(reg32) d[17], inout(reg32) d[18], inout(reg32) d[19], inout(reg32) d[20], inout(reg32) d[21], inout(reg32) d[22], inout(reg32) d[23],
            inout(reg32) d[24], inout(reg32) d[25], inout(reg32) d[26], inout(reg32) d[27], inout(reg32) d[28], inout(reg32) d[29], inout(reg32) d[30], inout(reg32) d[31],
            inout(reg32) d[32], inout(reg32) d[33], inout(reg32) d[34], inout(reg32) d[35], inout(reg32) d[36], inout(reg32) d[37], inout(reg32) d[38], inout(reg32) d[39],
            inout(reg32) d[40], inout(reg32) d[41], inout(reg32) d[42], inout(reg32) d[43], inout(reg32) d[44], inout(reg32) d[45], inout(reg32) d[46], inout(reg32) d[47],
            inout(reg32) d[48], inout(reg32) d[49], inout(reg32) d[50], inout(reg32) d[51], inout(reg32) d[52], inout(reg32) d[53], inout(reg32) d[54], inout(reg32) d[55],
            inout(reg32) d[56], inout(reg32) d[57], inout(reg32) d[58], inout(reg32) d[59], inout(reg32) d[60], inout(reg32) d[61], inout(reg32) d[62], inout(reg32) d[63],
            in(reg64) desc_a,
            in(reg64) desc_b,
            in(reg32) scale_d,
        )
    }
}

/// `wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32`: `d = A B + d` (`+ 0` when `scale_d` is 0: the
/// first k-step of a tile, no zeroing needed) for the warpgroup's
/// 64 x 256 f32 accumulators (`d`, the fragment layout of the PTX ISA), A (64 x 8) and B
/// (256 x 8) read as f32 from shared memory through the descriptors, both K-major (tf32 has
/// no transpose; the tensor cores use the top 19 bits of each f32: 10 mantissa bits).
/// Asynchronous: fence before, commit and wait after (see [`wgmma_fence`]).
///
/// # Safety
/// All 128 threads of a warpgroup call it together with the same descriptors, which describe
/// tiles in this block's shared memory that stay unchanged until the group is waited for.
#[inline(always)]
pub unsafe fn wgmma_m64n256k8_tf32(d: &mut [f32; 128], desc_a: u64, desc_b: u64, scale_d: u32) {
    // SAFETY: the caller upholds the warpgroup and shared-memory requirements.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.b32 p, {130}, 0; wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}, {16}, {17}, {18}, {19}, {20}, {21}, {22}, {23}, {24}, {25}, {26}, {27}, {28}, {29}, {30}, {31}, {32}, {33}, {34}, {35}, {36}, {37}, {38}, {39}, {40}, {41}, {42}, {43}, {44}, {45}, {46}, {47}, {48}, {49}, {50}, {51}, {52}, {53}, {54}, {55}, {56}, {57}, {58}, {59}, {60}, {61}, {62}, {63}, {64}, {65}, {66}, {67}, {68}, {69}, {70}, {71}, {72}, {73}, {74}, {75}, {76}, {77}, {78}, {79}, {80}, {81}, {82}, {83}, {84}, {85}, {86}, {87}, {88}, {89}, {90}, {91}, {92}, {93}, {94}, {95}, {96}, {97}, {98}, {99}, {100}, {101}, {102}, {103}, {104}, {105}, {106}, {107}, {108}, {109}, {110}, {111}, {112}, {113}, {114}, {115}, {116}, {117}, {118}, {119}, {120}, {121}, {122}, {123}, {124}, {125}, {126}, {127}}}, {128}, {129}, p, 1, 1; }}",
            inout(reg32) d[0], inout(reg32) d[1], inout(reg32) d[2], inout(reg32) d[3], inout(reg32) d[4], inout(reg32) d[5], inout(reg32) d[6], inout(reg32) d[7],
            inout(reg32) d[8], inout(reg32) d[9], inout(reg32) d[10], inout(reg32) d[11], inout(reg32) d[12], inout(reg32) d[13], inout(reg32) d[14], inout(reg32) d[15],
            inout(reg32) d[16], inout(reg32) d[17], inout(reg32) d[18], inout(reg32) d[19], inout(reg32) d[20], inout(reg32) d[21], inout(reg32) d[22], inout(reg32) d[23],
            inout(reg32) d[24], inout(reg32) d[25], inout(reg32) d[26], inout(reg32) d[27], inout(reg32) d[28], inout(reg32) d[29], inout(reg32) d[30], inout(reg32) d[31],
            inout(reg32) d[32], inout(reg32) d[33], inout(reg32) d[34], inout(reg32) d[35], inout(reg32) d[36], inout(reg32) d[37], inout(reg32) d[38], inout(reg32) d[39],
            inout(reg32) d[40], inout(reg32) d[41], inout(reg32) d[42], inout(reg32) d[43], inout(reg32) d[44], inout(reg32) d[45], inout(reg32) d[46], inout(reg32) d[47],
            inout(reg32) d[48], inout(reg32) d[49], inout(reg32) d[50], inout(reg32) d[51], inout(reg32) d[52], inout(reg32) d[53], inout(reg32) d[54], inout(reg32) d[55],
            inout(reg32) d[56], inout(reg32) d[57], inout(reg32) d[58], inout(reg32) d[59], inout(reg32) d[60], inout(reg32) d[61], inout(reg32) d[62], inout(reg32) d[63],
            inout(reg32) d[64], inout(reg32) d[65], inout(reg32) d[66], inout(reg32) d[67], inout(reg32) d[68], inout(reg32) d[69], inout(reg32) d[70], inout(reg32) d[71],
            inout(reg32) d[72], inout(reg32) d[73], inout(reg32) d[74], inout(reg32) d[75], inout(reg32) d[76], inout(reg32) d[77], inout(reg32) d[78], inout(reg32) d[79],
            inout(reg32) d[80], inout(reg32) d[81], inout(reg32) d[82], inout(reg32) d[83], inout(reg32) d[84], inout(reg32) d[85], inout(reg32) d[86], inout(reg32) d[87],
            inout(reg32) d[88], inout(reg32) d[89], inout(reg32) d[90], inout(reg32) d[91], inout(reg32) d[92], inout(reg32) d[93], inout(reg32) d[94], inout(reg32) d[95],
            inout(reg32) d[96], inout(reg32) d[97], inout(reg32) d[98], inout(reg32) d[99], inout(reg32) d[100], inout(reg32) d[101], inout(reg32) d[102], inout(reg32) d[103],
            inout(reg32) d[104], inout(reg32) d[105], inout(reg32) d[106], inout(reg32) d[107], inout(reg32) d[108], inout(reg32) d[109], inout(reg32) d[110], inout(reg32) d[111],
            inout(reg32) d[112], inout(reg32) d[113], inout(reg32) d[114], inout(reg32) d[115], inout(reg32) d[116], inout(reg32) d[117], inout(reg32) d[118], inout(reg32) d[119],
            inout(reg32) d[120], inout(reg32) d[121], inout(reg32) d[122], inout(reg32) d[123], inout(reg32) d[124], inout(reg32) d[125], inout(reg32) d[126], inout(reg32) d[127],
            in(reg64) desc_a,
            in(reg64) desc_b,
            in(reg32) scale_d,
        )
    }
}
