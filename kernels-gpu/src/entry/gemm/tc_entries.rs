//! Tensor-core GEMM entry points `ft_gemm_<in>_<a><b>_v<align>_<out>_<tile>`: one instantiation
//! of `tc::tc_gemm` per (input, layout, load width, output type, tile of `gemm::tc::TILES`).

use super::Problem;
use super::tc::tc_gemm;
use crate::arch::nvptx::block_idx_z;
use half::{bf16, f16};

// Tensor cores. A tile group is (WM, WN, MT, NT, KB, ST, BM, BN, threads, name for 16-bit
// inputs, name for tf32) and must match `gemm::tc::TILES` (the PTX test checks every name).
macro_rules! tc_entry {
    ($in:literal, $ab:literal, $akc:literal, $bkc:literal, $E:ty, $out:literal, $O:ty, $al:literal, $kind:ident,
     ($wm:literal, $wn:literal, $mt:literal, $nt:literal, $kb:literal, $st:literal, $bm:literal, $bn:literal,
      $th:literal, $n16:literal, $n32:literal)) => {
        gemm_entry!(
            concat!("ft_gemm_", $in, "_", $ab, "_v", $al, "_", $out, "_", tc_entry!(@name $kind, $n16, $n32)),
            $E,
            $O,
            |a, b, c, d, bias, pr| tc_gemm::<$E, $O, $akc, $bkc, $al, $wm, $wn, $mt, $nt, $kb, $st, $bm, $bn, $th>(
                a as *const u8,
                b as *const u8,
                c,
                d,
                bias,
                pr
            )
        );
    };
    (@name half, $n16:literal, $n32:literal) => { $n16 };
    (@name tf32, $n16:literal, $n32:literal) => { $n32 };
}

/// The four layouts of one (input, output, load width, tile).
macro_rules! tc_layouts {
    ($in:literal, $E:ty, $out:literal, $O:ty, $al:literal, $kind:ident, $tile:tt) => {
        tc_entry!($in, "rr", true, false, $E, $out, $O, $al, $kind, $tile);
        tc_entry!($in, "rc", true, true, $E, $out, $O, $al, $kind, $tile);
        tc_entry!($in, "cr", false, false, $E, $out, $O, $al, $kind, $tile);
        tc_entry!($in, "cc", false, true, $E, $out, $O, $al, $kind, $tile);
    };
}

/// Calls `$m!(args..., tile)` with the default tile (`TILES[0]`).
macro_rules! default_tile {
    ($m:ident!($($a:tt)*)) => {
        $m!($($a)* (2, 4, 4, 4, 64, 4, 128, 128, 256, "128x128x32w2x4s4", "128x128x16w2x4s4"));
    };
}

/// Calls `$m!(args..., tile)` for `TILES[1..]`, in order.
macro_rules! tuned_tiles {
    ($m:ident!($($a:tt)*)) => {
        $m!($($a)* (2, 4, 4, 8, 64, 3, 128, 256, 256, "128x256x32w2x4s3", "128x256x16w2x4s3"));
        $m!($($a)* (4, 2, 4, 8, 64, 3, 256, 128, 256, "256x128x32w4x2s3", "256x128x16w4x2s3"));
        $m!($($a)* (2, 2, 4, 8, 64, 4, 128, 128, 128, "128x128x32w2x2s4", "128x128x16w2x2s4"));
        $m!($($a)* (2, 4, 4, 8, 128, 3, 128, 256, 256, "128x256x64w2x4s3", "128x256x32w2x4s3"));
        $m!($($a)* (2, 2, 4, 4, 64, 4, 128, 64, 128, "128x64x32w2x2s4", "128x64x16w2x2s4"));
        $m!($($a)* (2, 2, 2, 8, 64, 4, 64, 128, 128, "64x128x32w2x2s4", "64x128x16w2x2s4"));
        $m!($($a)* (2, 2, 2, 4, 64, 4, 64, 64, 128, "64x64x32w2x2s4", "64x64x16w2x2s4"));
    };
}

/// Calls `$m!(args..., tile)` for `gemm::tc::NARROW_TILES` (tile 4), in order.
macro_rules! narrow_tiles {
    ($m:ident!($($a:tt)*)) => {
        $m!($($a)* (2, 4, 4, 8, 128, 3, 128, 256, 256, "128x256x64w2x4s3", "128x256x32w2x4s3"));
    };
}

/// Default tile at every load width and output type; the other tiles at 16-byte loads with
/// the input's own output type, the narrow tiles also at 8-byte loads (see
/// `GemmVariant::all`).
macro_rules! tc_family {
    ($in:literal, $E:ty, $kind:ident, [$($al:literal)*], $outs:tt, $own:literal, $OwnO:ty) => {
        $(tc_family!(@outs $in, $E, $kind, $al, $outs);)*
        tuned_tiles!(tc_layouts!($in, $E, $own, $OwnO, 16, $kind,));
        narrow_tiles!(tc_layouts!($in, $E, $own, $OwnO, 8, $kind,));
    };
    (@outs $in:literal, $E:ty, $kind:ident, $al:literal, [$(($out:literal, $O:ty)),*]) => {
        $(default_tile!(tc_layouts!($in, $E, $out, $O, $al, $kind,));)*
    };
}

tc_family!("tf32", f32, tf32, [16 8 4], [("f32", f32)], "f32", f32);
tc_family!("f16", f16, half, [16 8 4 2], [("f16", f16), ("f32", f32)], "f16", f16);
tc_family!("bf16", bf16, half, [16 8 4 2], [("bf16", bf16), ("f32", f32)], "bf16", bf16);
