//! Hopper (sm_90a) `wgmma.mma_async` wrappers, one per shape and input type: the warpgroup's
//! f32 accumulators as in/out registers, A and B through shared-memory descriptors
//! (`sm90::desc_k_sw128`). Asynchronous: `sm90::wgmma_fence` before, commit and wait after.
//! Only the sm_90a PTX build compiles this file.

use core::arch::asm;

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
