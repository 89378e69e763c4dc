//! Hopper (sm_90a) `wgmma.mma_async` wrappers, one per shape and input type: the warpgroup's
//! f32 accumulators as in/out registers, A and B through shared-memory descriptors
//! (`sm90::desc_k_sw128`). Asynchronous: `sm90::wgmma_fence` before, commit and wait after.
//! Only the sm_90a PTX build compiles this file. Each wrapper is one [`wgmma!`] line: the
//! instruction, the accumulator count and the operand indices ([`with_regs!`]).

use core::arch::asm;

/// Calls `$m!(args.. [0 1 .. n-1])`: the accumulator indices of an `n`-register wrapper, written
/// once per count (a macro cannot count).
macro_rules! with_regs {
    (64, $m:ident!($($a:tt)*)) => {
        $m!($($a)* [
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
        ]);
    };
    (80, $m:ident!($($a:tt)*)) => {
        $m!($($a)* [
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
            64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79
        ]);
    };
    (96, $m:ident!($($a:tt)*)) => {
        $m!($($a)* [
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
            64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95
        ]);
    };
    (128, $m:ident!($($a:tt)*)) => {
        $m!($($a)* [
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
            64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95
            96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127
        ]);
    };
}

/// A wrapper of `wgmma.mma_async.sync.aligned.<shape>`: `d = A B + d` (`+ 0` when `scale_d` is
/// 0: the first k-step of a tile, no zeroing needed) for the warpgroup's f32 accumulators `d`
/// (the fragment layout of the PTX ISA), A and B read from shared memory through the
/// descriptors. 16-bit inputs (`trans`) take `TRANS_B` (B K-major unless set); TF32 has no
/// transpose (both K-major; the tensor cores use the top 19 bits of each f32).
macro_rules! wgmma {
    ($name:ident, $shape:literal, $n:tt, trans) => {
        with_regs!($n, wgmma!(@emit $name, $shape, $n, [<const TRANS_B: u32>], ", 1, 1, 0, {tb}", [tb = const TRANS_B],));
    };
    ($name:ident, $shape:literal, $n:tt) => {
        with_regs!($n, wgmma!(@emit $name, $shape, $n, [], ", 1, 1", [],));
    };
    (@emit $name:ident, $shape:literal, $n:tt, [$($gen:tt)*], $tail:literal, [$($tb:tt)*], [$i0:literal $($i:literal)*]) => {
        #[doc = concat!("`wgmma.mma_async.sync.aligned.", $shape, "`: `d = A B + d` on the warpgroup's ")]
        #[doc = concat!(stringify!($n), " accumulators per thread (see [`wgmma!`]). Asynchronous: fence before,")]
        /// commit and wait after (`sm90::wgmma_fence`).
        ///
        /// # Safety
        /// All 128 threads of a warpgroup call it together with the same descriptors, which
        /// describe tiles in this block's shared memory that stay unchanged until the group is
        /// waited for.
        #[inline(always)]
        pub unsafe fn $name $($gen)* (d: &mut [f32; $n], desc_a: u64, desc_b: u64, scale_d: u32) {
            // SAFETY: the caller upholds the warpgroup and shared-memory requirements.
            unsafe {
                asm!(
                    concat!(
                        "{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; wgmma.mma_async.sync.aligned.", $shape, " {{{",
                        stringify!($i0), "}" $(, ", {", stringify!($i), "}")*, "}}, {da}, {db}, p", $tail, "; }}"
                    ),
                    inout(reg32) d[$i0], $(inout(reg32) d[$i],)*
                    da = in(reg64) desc_a,
                    db = in(reg64) desc_b,
                    sd = in(reg32) scale_d,
                    $($tb)*
                )
            }
        }
    };
}

wgmma!(wgmma_m64n128k16_bf16, "m64n128k16.f32.bf16.bf16", 64, trans);
wgmma!(wgmma_m64n128k16_f16, "m64n128k16.f32.f16.f16", 64, trans);
wgmma!(wgmma_m64n160k16_bf16, "m64n160k16.f32.bf16.bf16", 80, trans);
wgmma!(wgmma_m64n160k16_f16, "m64n160k16.f32.f16.f16", 80, trans);
wgmma!(wgmma_m64n192k16_bf16, "m64n192k16.f32.bf16.bf16", 96, trans);
wgmma!(wgmma_m64n192k16_f16, "m64n192k16.f32.f16.f16", 96, trans);
wgmma!(wgmma_m64n256k16_bf16, "m64n256k16.f32.bf16.bf16", 128, trans);
wgmma!(wgmma_m64n256k16_f16, "m64n256k16.f32.f16.f16", 128, trans);
wgmma!(wgmma_m64n128k8_tf32, "m64n128k8.f32.tf32.tf32", 64);
wgmma!(wgmma_m64n256k8_tf32, "m64n256k8.f32.tf32.tf32", 128);
