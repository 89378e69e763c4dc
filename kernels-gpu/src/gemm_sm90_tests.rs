//! Unit tests of `gemm_sm90.rs`: the shared-memory swizzles (128- and 64-byte, over several
//! atoms) and the fragment stores' banks, the entry names and tile bounds (16-bit, TF32,
//! ping-pong), and the rasters (plain and in clusters) covering every tile once.

use super::*;

#[test]
fn swizzle_is_a_permutation_and_the_fragment_stores_hit_distinct_banks() {
    // Within each 8-row group, every (row, 16-byte chunk) lands on a distinct chunk.
    let mut seen = [false; 64];
    for row in 0..8 {
        for chunk in 0..8 {
            let o = sw128_offset(row, chunk * 16);
            assert_eq!(o % 16, 0);
            assert!(!seen[o / 16], "row {row} chunk {chunk} collides");
            seen[o / 16] = true;
        }
    }
    // Row 9 (9 mod 8 = 1), byte 17 (chunk 1): chunk 1 ^ 1 = 0, byte 1 of it.
    assert_eq!(sw128_offset(9, 17), 1153);
    assert_eq!(sw128_offset(10, 17), 10 * 128 + 3 * 16 + 1);
    // A warp's 16-bit pair store of fragment column group j (lane g = row, t = pair):
    // 32 lanes, 32 distinct banks.
    for j in 0..8 {
        let mut banks = [false; 32];
        for lane in 0..32 {
            let (g, t) = (lane / 4, lane % 4);
            let bank = (sw128_offset(g, (j * 8 + 2 * t) * 2) / 4) % 32;
            assert!(!banks[bank], "j {j} lane {lane} conflicts");
            banks[bank] = true;
        }
    }
    assert_eq!((store_box_cols(2, 256), store_box_cols(4, 256)), (64, 32));
    assert_eq!((store_box_cols(2, 192), store_box_cols(2, 128)), (64, 64));
    // 16-bit 128 x 160: boxes of 32 columns (64-byte rows, 5 a tile row); f32 keeps 128 bytes.
    assert_eq!((store_box_cols(2, 160), store_box_cols(4, 160)), (32, 32));
    assert_eq!((store_box_row_bytes(2, 160), store_box_row_bytes(4, 160)), (64, 128));
}

/// The 64-byte swizzle: within each 512-byte atom (8 rows of 64 bytes) every (row, chunk)
/// lands on a distinct chunk of the atom, a row's chunks stay in its own 64 bytes, and a
/// warp's `stmatrix` (8 rows x 16 bytes per matrix) hits 32 distinct banks.
#[test]
fn swizzle_64_is_a_permutation_and_stmatrix_is_conflict_free() {
    let mut seen = [false; 32];
    for row in 0..8 {
        for chunk in 0..4 {
            let o = sw_offset(row, chunk * 16 + 5, 64);
            assert_eq!(o % 16, 5);
            assert_eq!(o / 64, row, "row {row} chunk {chunk} leaves its row");
            assert!(!seen[o / 16], "row {row} chunk {chunk} collides");
            seen[o / 16] = true;
        }
    }
    // The pattern repeats every atom (8 rows, 512 bytes), rows staying whole.
    for row in 0..24 {
        for byte in 0..64 {
            let o = sw_offset(row, byte, 64);
            assert_eq!((o / 64, o - (row / 8) * 512), (row, sw_offset(row % 8, byte, 64)), "row {row} byte {byte}");
        }
    }
    // Row 2 (128-byte line 1): chunk 0 goes to chunk 1; row 7 (line 3): chunk 1 to 2.
    assert_eq!(sw_offset(2, 0, 64), 128 + 16);
    assert_eq!(sw_offset(7, 16, 64), 7 * 64 + 2 * 16);
    for chunk in 0..4 {
        let mut banks = [false; 32];
        for row in 0..8 {
            let first = sw_offset(row, chunk * 16, 64) / 4;
            for b in first..first + 4 {
                assert!(!banks[b % 32], "chunk {chunk} row {row} conflicts");
                banks[b % 32] = true;
            }
        }
    }
}

#[test]
fn names_and_bounds() {
    let v = Sm90Variant { dtype: DType::Bf16, out_f32: false, tile: 0 };
    assert_eq!(v.entry_name().as_str(), "ft_gemm90_bf16_rc_bf16_128x256x64s4");
    assert_eq!(launch_bounds("ft_gemm90_bf16_rc_bf16_128x256x64s4"), Some((384, 1)));
    assert_eq!(launch_bounds("ft_gemm_bf16_rc_v16_bf16_128x128x32w2x4s4"), None);
    assert_eq!(Sm90Variant::all().count(), 4 * TILES.len() + TF32_TILES.len());
    assert!(Sm90Variant::all().all(|v| v.is_compiled()));
    let p = Sm90Variant { tile: 2, ..v };
    assert_eq!(p.entry_name().as_str(), "ft_gemm90_bf16_rc_bf16_128x256x64s3p");
    let pp = Sm90Variant { tile: 4, ..v };
    assert_eq!(pp.entry_name().as_str(), "ft_gemm90_bf16_rc_bf16_64x256x64s4pp");
    assert_eq!(launch_bounds(pp.entry_name().as_str()), Some((384, 1)));
    assert_eq!(Sm90Variant { tile: 5, ..v }.entry_name().as_str(), "ft_gemm90_bf16_rc_bf16_64x128x64s7pp");
    assert_eq!(Sm90Variant { tile: 6, ..v }.entry_name().as_str(), "ft_gemm90_bf16_rc_bf16_128x128x64s5pp");
    let small = Sm90Variant { tile: 9, ..v };
    assert_eq!(small.entry_name().as_str(), "ft_gemm90_bf16_rc_bf16_64x128x64s4");
    assert_eq!(launch_bounds(small.entry_name().as_str()), Some((256, 2)));
    // Every one-tile form splits K (the 128 x 256 ones too); the persistent forms never.
    assert!(small.tile().splits_k() && TILES[1].splits_k() && TILES[0].splits_k() && TILES[13].splits_k());
    assert!(TILES.iter().all(|t| t.splits_k() != t.persistent) && !TILES[3].splits_k());
    // The streaming tiles: one consumer, one block per SM, both split K.
    let deep = Sm90Variant { tile: 10, ..v };
    assert_eq!(deep.entry_name().as_str(), "ft_gemm90_bf16_rc_bf16_64x128x64s8");
    assert_eq!(launch_bounds(deep.entry_name().as_str()), Some((256, 1)));
    assert!(deep.tile().splits_k() && !deep.tile().paired());
    // The paired tile: two blocks per SM, 2 x 128 consumers + one producer warp.
    assert_eq!(Sm90Variant { tile: 15, ..v }.entry_name().as_str(), "ft_gemm90_bf16_rc_bf16_128x256x64s3pb4");
    assert_eq!(Sm90Variant { tile: 16, ..v }.entry_name().as_str(), "ft_gemm90_bf16_rc_bf16_128x192x64s4pb3");
    // A whole 16-bit 128 x 256 tile of buffers (2 x 4 boxes) beside a three-stage ring.
    assert_eq!(TILES[15].smem_bytes(), 3 * 384 * 128 + 1024 + 8 * STORE_BOX_BYTES + 1024);
    let pair = Sm90Variant { tile: 11, ..v };
    assert_eq!(pair.entry_name().as_str(), "ft_gemm90_bf16_rc_bf16_128x128x64s3");
    assert_eq!(launch_bounds(pair.entry_name().as_str()), Some((288, 2)));
    assert!(pair.tile().paired() && pair.tile().splits_k() && paired(64, 2, 3) && !paired(64, 2, 6));
    assert!(TILES.iter().filter(|t| t.paired()).all(|t| t.epilogue_bytes() <= t.barrier_offset()));
    // The cluster tiles: 8 and 0 in pairs of blocks, half a B tile each; the one-tile form splits.
    let cp = Sm90Variant { tile: 12, ..v };
    assert_eq!(cp.entry_name().as_str(), "ft_gemm90_bf16_rc_bf16_128x256x64s4pc2");
    assert_eq!(Sm90Variant { tile: 13, ..v }.entry_name().as_str(), "ft_gemm90_bf16_rc_bf16_128x256x64s4c2");
    assert_eq!(launch_bounds(cp.entry_name().as_str()), Some((384, 1)));
    assert!(TILES[12].b_box_rows() == 128 && !TILES[12].splits_k() && TILES[13].splits_k());
    assert_eq!((TILES[12].smem_bytes(), TILES[13].smem_bytes()), (TILES[8].smem_bytes(), TILES[0].smem_bytes()));
    // The persistent 128 x 192: wgmma N 192, 40 KiB stages, the TMA-store buffers fit.
    let n192 = Sm90Variant { tile: 14, ..v };
    assert_eq!(n192.entry_name().as_str(), "ft_gemm90_bf16_rc_bf16_128x192x64s4p");
    assert_eq!((TILES[14].stage_bytes(), launch_bounds(n192.entry_name().as_str())), (40_960, Some((384, 1))));
    assert!(TILES[14].store_buffers() && !TILES[14].splits_k());
    // The one-tile 128 x 160: wgmma N 160, 36 KiB stages, six, splits K.
    let n160 = Sm90Variant { tile: 19, ..v }.entry_name();
    assert_eq!(n160.as_str(), "ft_gemm90_bf16_rc_bf16_128x160x64s6");
    assert_eq!(TILES[19].stage_bytes(), 36_864);
    assert!(TILES[19].splits_k() && !TILES[19].persistent);
    assert_eq!(launch_bounds(n160.as_str()), Some((384, 1)));
}

/// The TF32 entries: K 32 per stage (a 128-byte row of f32), f32 output, the tiles that
/// the heuristic and the split choose; the others are not compiled.
#[test]
fn tf32_names_and_tiles() {
    let v = |tile| Sm90Variant { dtype: DType::F32, out_f32: false, tile };
    assert_eq!(v(0).entry_name().as_str(), "ft_gemm90_tf32_rc_f32_128x256x32s4");
    assert_eq!(v(1).entry_name().as_str(), "ft_gemm90_tf32_rc_f32_128x128x32s6");
    assert_eq!(v(9).entry_name().as_str(), "ft_gemm90_tf32_rc_f32_64x128x32s4");
    assert_eq!(v(10).entry_name().as_str(), "ft_gemm90_tf32_rc_f32_64x128x32s8");
    assert_eq!(v(0).out_dtype(), DType::F32);
    assert_eq!(launch_bounds("ft_gemm90_tf32_rc_f32_64x128x32s4"), Some((256, 2)));
    assert!(!v(2).is_compiled() && !Sm90Variant { out_f32: true, ..v(0) }.is_compiled());
    assert_eq!(TILES[0].bk(4), 32);
    assert_eq!(v(8).entry_name().as_str(), "ft_gemm90_tf32_rc_f32_128x256x32s4p");
    assert!(TF32_TILES.iter().all(|&t| !TILES[t as usize].pingpong()));
    assert!(TILES[1].splits_k() && TILES[9].splits_k() && TILES[10].splits_k());
}

#[test]
fn pingpong_tiles_are_persistent_with_two_consumers() {
    for t in TILES.iter().filter(|t| t.pingpong()) {
        assert!(t.persistent && t.consumers == 2 && matches!(t.bm(), 64 | 128), "{t:?}");
        // Room for both warpgroups' epilogue staging past the ring and barriers.
        assert!(t.smem_bytes() >= t.barrier_offset() + 16 * t.stages + 8 * 16 * STAGE_PITCH_BYTES);
        // The kernel's own bound on the TMA-store buffers (`pingpong.rs`) agrees.
        let kernel_fits = t.stages * t.stage_bytes() + 2048 + 2 * t.store_bufs * STORE_BOX_BYTES <= SMEM_MAX;
        assert_eq!(t.store_buffers(), kernel_fits, "{t:?}");
        if t.store_buffers() {
            assert!(t.smem_bytes() >= t.store_buffers_offset() + 2 * t.store_bufs * STORE_BOX_BYTES);
            assert_eq!(t.store_box_rows(), WARP_BOX_ROWS);
        }
    }
    // The 64 x 256 ring of 5 stages leaves no room for the buffers; the others have it.
    let pp_tma = [4, 5, 6, 7].map(|i| TILES[i].store_buffers());
    assert_eq!(pp_tma, [true, true, true, false]);
}

#[test]
fn cluster_raster_pairs_vertical_neighbours_and_covers_every_tile_once() {
    for (tm, tn) in [(1usize, 1usize), (2, 3), (3, 5), (17, 9), (64, 24)] {
        let mut seen = [[false; 64]; 64];
        let pairs = tm.div_ceil(2) * tn;
        for c in 0..pairs {
            let ((i0, j0), (i1, j1)) = (raster_cluster(c, 0, 2, tm, tn), raster_cluster(c, 1, 2, tm, tn));
            assert!(j0 == j1 && i1 == i0 + 1 && i0 % 2 == 0 && j0 < tn, "{tm}x{tn}: {c}");
            for (i, j) in [(i0, j0), (i1, j1)].into_iter().filter(|&(i, _)| i < tm) {
                assert!(!seen[i][j], "{tm}x{tn}: {c} -> ({i}, {j}) twice");
                seen[i][j] = true;
            }
        }
        assert_eq!(seen.iter().flatten().filter(|&&x| x).count(), tm * tn);
        // One block per cluster is the plain raster.
        assert!((0..tm * tn).all(|b| raster_cluster(b, 0, 1, tm, tn) == raster(b, tm, tn)));
    }
}

#[test]
fn raster_covers_every_tile_once() {
    for (tm, tn) in [(1, 1), (3, 5), (8, 2), (17, 9), (64, 24)] {
        let mut seen = [[false; 64]; 64];
        for bid in 0..tm * tn {
            let (i, j) = raster(bid, tm, tn);
            assert!(i < tm && j < tn && !seen[i][j], "{tm}x{tn}: {bid} -> ({i}, {j})");
            seen[i][j] = true;
        }
    }
}
