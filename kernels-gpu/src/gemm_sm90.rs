//! The Hopper GEMM family (sm_90a): TMA loads into a swizzled shared-memory ring, one producer
//! warp and consumer warpgroups issuing `wgmma` (f16, bf16; f32 inputs on TF32). Its tiles, entry names, shared-memory budget
//! and launch bounds, shared by the PTX entries (`entry/gemm_sm90.rs`) and the host launcher.

use crate::element::DType;
use crate::gemm::EntryName;

/// Bytes of K per pipeline stage: one 128-byte swizzle row (64 f16/bf16, 32 f32).
pub const BK_BYTES: usize = 128;
/// Threads per warpgroup.
pub const WG_THREADS: u32 = 128;
/// Registers per thread the producer warpgroup keeps, and the consumers take, with
/// `setmaxnreg` (3 warpgroups: 128 x 40 + 256 x 232 <= 65536).
pub const PRODUCER_REGS: u32 = 40;
pub const CONSUMER_REGS: u32 = 232;
/// Output tile rows per raster group (tiles walk M first inside a group of this many tile
/// rows, so consecutive blocks share B panels and nearby A panels in L2).
pub const RASTER_GROUP: usize = 8;
/// Floats of padding per staged epilogue row (8-byte fragment writes hit distinct banks).
pub const EPI_PAD: usize = 8;
/// Columns of a persistent warp's epilogue chunk (16 rows x this many floats staged at once):
/// 32 keeps the staging at 20 KiB per block, room for a fifth 64 x 256 stage.
pub const STAGE_COLS: usize = 32;
/// Row pitch (bytes) of the persistent form's per-warp epilogue staging: a chunk + padding.
pub const STAGE_PITCH_BYTES: usize = (STAGE_COLS + EPI_PAD) * 4;

/// Dynamic shared memory one block may take on the H100 (227 KiB).
pub const SMEM_MAX: usize = 232_448;

/// One compiled Hopper tile: `64 * consumers` x `bn` outputs per block, `stages` deep ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sm90Tile {
    /// wgmma N: 128, 160, 192 or 256.
    pub bn: usize,
    /// Consumer warpgroups, each owning 64 rows of the tile.
    pub consumers: usize,
    pub stages: usize,
    /// One block per SM walking the tiles (epilogue staged per warp through a small area of
    /// its own), else one block per tile (epilogue staged through the ring); stores coalesced.
    pub persistent: bool,
    /// Persistent ping-pong when non-zero: each consumer warpgroup owns a whole tile of
    /// `64 * pp_slabs` x `bn` (1 or 2 slabs of 64 rows) and the two alternate, one's
    /// epilogue overlapping the other's mainloop. 0: the consumers share each tile.
    pub pp_slabs: usize,
    /// Blocks per thread-block cluster (1, 2 or 4), along M: the blocks of a cluster compute
    /// vertically adjacent tiles of the same B panel, each loads `1 / cluster` of the B tile
    /// and TMA multicasts it to all of them (`1 / cluster` of the L2 reads of B).
    pub cluster: usize,
    /// TMA-store box buffers per consumer warpgroup of the persistent cooperative form
    /// ([`Sm90Tile::store_buffers`]): 2 double-buffers the boxes; as many as a tile has boxes
    /// stages the whole tile, so its stores drain during the next tile's main loop instead of
    /// holding up this tile's epilogue.
    pub store_bufs: usize,
}

impl Sm90Tile {
    /// Rows of each block's B box: the B tile split over the cluster's blocks.
    pub const fn b_box_rows(&self) -> usize {
        self.bn / self.cluster
    }
    /// Rows of the block's output tile (a ping-pong tile is one warpgroup's).
    pub const fn bm(&self) -> usize {
        if self.pp_slabs > 0 { 64 * self.pp_slabs } else { 64 * self.consumers }
    }
    /// Whether the consumer warpgroups take turns on whole tiles (ping-pong).
    pub const fn pingpong(&self) -> bool {
        self.pp_slabs > 0
    }
    /// K elements per stage for inputs of `elem` bytes.
    pub const fn bk(&self, elem: usize) -> usize {
        BK_BYTES / elem
    }
    /// One producer warpgroup plus the consumers; a paired tile ([`Sm90Tile::paired`]) has
    /// its consumers first and one producer warp after them.
    pub const fn threads(&self) -> u32 {
        if self.paired() { WG_THREADS * self.consumers as u32 + 32 } else { WG_THREADS * (1 + self.consumers as u32) }
    }
    /// A two-consumer tile two of whose blocks share an SM: 2 x 384 threads cannot hold the
    /// 90 registers a 64 x 128 wgmma needs, so it runs 288 (two consumer warpgroups and one
    /// producer warp, 112 registers each) and no `setmaxnreg`.
    pub const fn paired(&self) -> bool {
        self.consumers == 2 && self.blocks_per_sm() == 2
    }
    /// Bytes one stage's A and B tiles take (both 1024-byte multiples).
    pub const fn stage_bytes(&self) -> usize {
        (self.bm() + self.bn) * BK_BYTES
    }
    /// Offset of the mbarriers (full then empty, 8 bytes each) from the 1024-aligned base.
    pub const fn barrier_offset(&self) -> usize {
        self.stages * self.stage_bytes()
    }
    /// Bytes the f32 epilogue staging takes (it reuses the ring after the main loop).
    pub const fn epilogue_bytes(&self) -> usize {
        self.bm() * (self.bn + EPI_PAD) * 4
    }
    /// Blocks one SM holds: two of a one-block-per-tile form with one consumer, or with two
    /// on 128 columns (64 accumulators each), whose shared memory fits twice in the H100's
    /// 227 KiB (their launch bounds cap registers for it: one block's epilogue then runs
    /// beside the other's main loop), else one.
    pub const fn blocks_per_sm(&self) -> usize {
        let fits = 2 * self.smem_bytes() <= SMEM_MAX && !self.persistent;
        if fits && (self.consumers == 1 || self.bn == 128) { 2 } else { 1 }
    }
    /// Whether K may be split over blocks on this tile: one block per tile (not persistent,
    /// in clusters or not), the forms the in-kernel join is compiled for.
    pub const fn splits_k(&self) -> bool {
        !self.persistent
    }
    /// Whether the form keeps TMA-store box buffers per consumer warpgroup: the persistent
    /// forms, whose ring is busy with the next tile while a tile is stored — the ping-pong
    /// tiles where the buffers fit beside their ring (`entry/gemm_sm90/pingpong.rs` checks
    /// the same bound).
    pub const fn store_buffers(&self) -> bool {
        let fits = self.barrier_offset() + self.buffer_bytes() + 1024 <= SMEM_MAX;
        self.persistent && (self.pp_slabs == 0 || fits)
    }
    /// Bytes of the TMA-store buffers with their 1024-byte alignment gap past the barriers.
    const fn buffer_bytes(&self) -> usize {
        1024 + self.store_bufs * self.consumers * STORE_BOX_BYTES
    }
    /// Rows of the D boxes this tile's TMA-store epilogue writes: a warp's ([`WARP_BOX_ROWS`])
    /// on the persistent cooperative form, a warpgroup's ([`STORE_BOX_ROWS`]) on the one-tile
    /// forms.
    pub const fn store_box_rows(&self) -> usize {
        if self.store_buffers() { WARP_BOX_ROWS } else { STORE_BOX_ROWS }
    }
    /// Offset of those buffers from the 1024-aligned base: past the barriers, 1024-aligned.
    pub const fn store_buffers_offset(&self) -> usize {
        self.barrier_offset() + 1024
    }
    /// Dynamic shared memory a launch asks for: the ring, then the barriers and the persistent
    /// form's per-warp epilogue staging (16 rows each) or the one-tile form's split-K flag
    /// word — or, where larger, the persistent cooperative form's TMA-store buffers, which
    /// share that space (a launch uses one or the other) — and 1024 bytes of slack to align
    /// the base.
    pub const fn smem_bytes(&self) -> usize {
        let staging = if self.persistent { 4 * self.consumers * 16 * STAGE_PITCH_BYTES } else { 16 };
        let mut tail = 16 * self.stages + staging;
        let buffers = self.buffer_bytes();
        if self.store_buffers() && buffers > tail {
            tail = buffers;
        }
        self.barrier_offset() + tail + 1024
    }
}

/// Whether the one-tile kernel of (`nacc` accumulators, `consumers`, `stages`) is a paired
/// tile ([`Sm90Tile::paired`]: consumers first, one producer warp last).
pub const fn paired(nacc: usize, consumers: usize, stages: usize) -> bool {
    t(2 * nacc, consumers, stages, false).paired()
}

const fn t(bn: usize, consumers: usize, stages: usize, persistent: bool) -> Sm90Tile {
    Sm90Tile { bn, consumers, stages, persistent, pp_slabs: 0, cluster: 1, store_bufs: 2 }
}

/// A persistent cooperative tile with `bufs` TMA-store box buffers per consumer warpgroup.
const fn sb(bn: usize, stages: usize, bufs: usize) -> Sm90Tile {
    Sm90Tile { bn, consumers: 2, stages, persistent: true, pp_slabs: 0, cluster: 1, store_bufs: bufs }
}

/// A cooperative tile run in clusters of 2 blocks along M, B multicast.
const fn c2(bn: usize, consumers: usize, stages: usize, persistent: bool) -> Sm90Tile {
    Sm90Tile { bn, consumers, stages, persistent, pp_slabs: 0, cluster: 2, store_bufs: 2 }
}

/// The streaming tile (64 x 128, one consumer, eight stages, one block per tile) in clusters
/// of `cluster` blocks along M, B multicast.
const fn sc(cluster: usize) -> Sm90Tile {
    Sm90Tile { bn: 128, consumers: 1, stages: 8, persistent: false, pp_slabs: 0, cluster, store_bufs: 2 }
}

/// A persistent ping-pong tile: two consumer warpgroups, each owning a `64 slabs` x `bn` tile.
const fn pp(slabs: usize, bn: usize, stages: usize) -> Sm90Tile {
    Sm90Tile { bn, consumers: 2, stages, persistent: true, pp_slabs: slabs, cluster: 1, store_bufs: 2 }
}

/// The compiled tiles (index 0 is the default). Adding one: append here and to the tile list
/// in `entry/gemm_sm90.rs`.
pub const TILES: [Sm90Tile; 20] = [
    t(256, 2, 4, false),
    t(128, 2, 6, false),
    t(256, 2, 3, true),
    t(128, 2, 5, true),
    pp(1, 256, 4),
    pp(1, 128, 7),
    pp(2, 128, 5),
    pp(1, 256, 5),
    t(256, 2, 4, true),
    // 64 x 128, one consumer, two blocks per SM: M <= 64 (no half-empty wgmma rows), split K.
    t(128, 1, 4, false),
    // The streaming tile: 64 x 128, one consumer, one block per SM, eight stages (192 KiB in
    // flight): for shapes whose 64 x 128 tiles fit in one wave (few rows, or few tiles and a
    // long K), where the bytes in flight per SM, not the tensor cores, set the rate (cuBLAS
    // runs 32x64 and 64x64 tiles 13 to 16 stages deep there: bench/results/irregular/run12-*/).
    t(128, 1, 8, false),
    // 128 x 128, three stages, two blocks per SM (one's epilogue beside the other's main
    // loop): a tuner point; on the H100 it did not beat the 128 x 256 tile on K = 512 to 1536
    // (run12-*/sweep-table.md), so the heuristic does not pick it.
    t(128, 2, 3, false),
    // Tiles 8 and 0 in clusters of two blocks along M: each block loads half of the shared
    // 256-row B tile and multicasts it to both (`cp.async.bulk.tensor … multicast::cluster`),
    // and frees a stage only when the consumers of both blocks have (remote mbarrier arrivals).
    c2(256, 2, 4, true),
    c2(256, 2, 4, false),
    // The persistent 128 x 192 (wgmma N 192), four stages: a quarter more tiles than 128 x 256,
    // for problems whose 128 x 256 tiles leave the last wave mostly empty (3072 x 3072: 288
    // tiles on 132 SMs, 2.2 waves; 384 tiles of 128 x 192, 2.9).
    t(192, 2, 4, true),
    // Tiles 2 and 14 with a whole 16-bit tile of TMA-store buffers (`b4`: 4 boxes of 64 x 64
    // per warpgroup for BN 256, one stage fewer to fit; `b3`: 3 for BN 192): the warpgroups
    // write the tile into shared memory and go back to the main loop while TMA drains it, for
    // short K, where the epilogue is a large share of each tile.
    sb(256, 3, 4),
    sb(192, 4, 3),
    // The streaming tile in clusters of 2 and of 4 blocks along M, each block loading its
    // share of the 128-row B tile and multicasting it (split K or not): the long-K shapes with
    // few tiles read each B panel once per cluster instead of once per row tile.
    sc(2),
    sc(4),
    // The one-tile 128 x 160 (wgmma N 160), six stages: 5/8 of a 128 x 256 tile's work, for
    // problems where that many more tiles take no more waves (N = 300: two tiles of 160 as of
    // 256; 8000 x 620: 252 tiles against 189, two waves of 132 either way). Its 16-bit D
    // leaves in 64-byte boxes ([`store_box_row_bytes`]). The persistent 128 x 160 (five
    // stages, alone and in clusters of two) was slower than the 128 x 256 and 128 x 192 on
    // every large problem measured (bench/NOTES.md, "The 128 x 160 Hopper tiles") and is not
    // compiled.
    t(160, 2, 6, false),
];

// Every tile's epilogue staging fits in its ring (the f32 staging, so the TMA-store slabs too)
// and its shared memory in the H100's 227 KiB.
const _: () = {
    let mut i = 0;
    while i < TILES.len() {
        assert!(TILES[i].epilogue_bytes() <= TILES[i].barrier_offset());
        assert!(TILES[i].smem_bytes() <= SMEM_MAX);
        // The TMA-store epilogue writes out at most 32 fragment column groups (BN 256), in
        // whole store boxes of 16-bit and f32 outputs.
        assert!(TILES[i].bn <= 256);
        assert!((TILES[i].bn * 2).is_multiple_of(store_box_row_bytes(2, TILES[i].bn)));
        assert!((TILES[i].bn * 4).is_multiple_of(store_box_row_bytes(4, TILES[i].bn)));
        // A cluster splits the B tile into whole 8-row swizzle groups, and is cooperative.
        assert!(TILES[i].cluster == 1 || (TILES[i].b_box_rows().is_multiple_of(8) && TILES[i].pp_slabs == 0));
        // The store-buffer ring's wait is compiled for 2 to 4 buffers.
        assert!(TILES[i].store_bufs >= 2 && TILES[i].store_bufs <= 4);
        i += 1;
    }
};

/// The tiles compiled for f32 inputs on TF32 (f32 output only): the two one-tile shapes the
/// heuristic picks (128 x 256, 128 x 128, which also splits K), the persistent 128 x 256 it
/// takes with the TMA-store epilogue, the small-M split tile and the streaming tile. The other
/// persistent and the ping-pong tiles lost to these on every large 16-bit shape, so they are
/// not compiled for TF32 (PTX size and ptxas time).
pub const TF32_TILES: [u8; 5] = [0, 1, 8, 9, 10];

/// A compiled Hopper GEMM entry: f16/bf16 inputs (f32 or same-type output) or f32 inputs on
/// TF32 (`dtype` F32, f32 output, `out_f32` false), A row-major (M x K) and B column-major
/// (K x N, i.e. N x K row-major: `x wᵀ`), both K-contiguous.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sm90Variant {
    pub dtype: DType,
    pub out_f32: bool,
    /// Index into [`TILES`].
    pub tile: u8,
}

/// The entry-name prefix of the family and the number of by-value map parameters (A, B and
/// D), for the PTX build to align them (see `ferrotune-ptx-build`).
pub const TMAP_PARAMS: (&str, usize) = ("ft_gemm90_", 3);

/// Epilogue flag bit (beside [`crate::gemm::Epilogue::flags`]'s): the cooperative forms store
/// D with TMA through the third map, the epilogue applied in registers — the one-tile form
/// stages each warpgroup's 64-row slab in the idle ring, the persistent form each warp's 16 rows
/// box by box through buffers of its own ([`Sm90Tile::store_buffers`]), both in the 128-byte
/// swizzle. The host
/// sets it only without a C read, on a tile that is not ping-pong, when TMA can describe D
/// (16-byte aligned base, leading dimension and batch stride).
pub const TMA_STORE: u32 = 32;

/// Epilogue flag bit: thread 0 prefetches the tensor maps (`prefetch.tensormap`: A's and B's,
/// and D's with [`TMA_STORE`]) as the block starts, so its first TMA copies do not wait for
/// the descriptor fetch. The host sets it unless `FERROTUNE_SM90_PREFETCH=0` (an A/B switch).
pub const MAP_PREFETCH: u32 = 64;

/// Rows of a D box the TMA-store epilogue writes (one consumer warpgroup's rows).
pub const STORE_BOX_ROWS: usize = 64;

/// Bytes of one D box of the one-tile form (64 rows of 128 bytes): a warpgroup's slab holds
/// `BN / box_cols` of them.
pub const STORE_BOX_BYTES: usize = STORE_BOX_ROWS * BK_BYTES;

/// Rows of a D box the persistent cooperative form writes: one warp's 16 rows, so each warp
/// stores its own boxes and its epilogue never waits on the warpgroup's other warps.
pub const WARP_BOX_ROWS: usize = 16;

/// Bytes of one of a warp's TMA-store buffers (16 rows of 128 bytes, two swizzle atoms). A
/// warpgroup's `store_bufs` buffers of [`STORE_BOX_BYTES`] hold `store_bufs` of these per warp.
pub const WARP_BOX_BYTES: usize = WARP_BOX_ROWS * BK_BYTES;

/// Bytes per row of a D box of a tile `bn` outputs wide: one 128-byte swizzle row, or 64 bytes
/// (the 64-byte swizzle) where the tile's rows are not whole 128-byte rows (16-bit 128 x 160:
/// 320 bytes), so that no box reaches into the next tile's columns.
pub const fn store_box_row_bytes(out_bytes: usize, bn: usize) -> usize {
    if (bn * out_bytes).is_multiple_of(BK_BYTES) { BK_BYTES } else { BK_BYTES / 2 }
}

/// Output elements per row of a D box of a tile `bn` wide ([`store_box_row_bytes`]).
pub const fn store_box_cols(out_bytes: usize, bn: usize) -> usize {
    store_box_row_bytes(out_bytes, bn) / out_bytes
}

/// Byte offset, inside a box of `row_bytes`-byte rows (128 or 64) stored with the swizzle of
/// that width (1024-aligned), of byte `byte` of row `row`: the layout TMA reads and writes with
/// `SWIZZLE_128B` (a row's eight 16-byte chunks permuted by the row's index modulo 8) or
/// `SWIZZLE_64B` (four chunks, by the index of the 128-byte line modulo 4): address bits 4-6
/// (4-5) exchanged with bits 7-9 (7-8).
#[inline(always)]
pub const fn sw_offset(row: usize, byte: usize, row_bytes: usize) -> usize {
    let a = row * row_bytes + byte;
    let mask = if row_bytes == BK_BYTES { 7 } else { 3 };
    a ^ (((a >> 7) & mask) << 4)
}

/// [`sw_offset`] in 128-byte rows.
#[inline(always)]
pub const fn sw128_offset(row: usize, byte: usize) -> usize {
    sw_offset(row, byte, BK_BYTES)
}

impl Sm90Variant {
    pub fn out_dtype(&self) -> DType {
        if self.out_f32 { DType::F32 } else { self.dtype }
    }

    pub fn tile(&self) -> Sm90Tile {
        TILES[self.tile as usize]
    }

    /// `ft_gemm90_<in>_rc_<out>_<BM>x<BN>x<BK>s<stages>[p|pp][c2|c4][b<n>]` (`p`: persistent, `pp`:
    /// persistent ping-pong, `c2`/`c4`: clusters of 2 or 4, `b<n>`: n TMA-store buffers per warpgroup
    /// where not 2; `<in>` is `tf32` for f32 inputs), e.g.
    /// `ft_gemm90_bf16_rc_bf16_128x256x64s4`, `ft_gemm90_tf32_rc_f32_128x256x32s4`.
    pub fn entry_name(&self) -> EntryName {
        let t = self.tile();
        let mut n = EntryName::new();
        n.push("ft_gemm90_");
        n.push(if self.dtype == DType::F32 { "tf32" } else { self.dtype.name() });
        n.push("_rc_");
        n.push(self.out_dtype().name());
        n.push("_");
        n.push_num(t.bm());
        n.push("x");
        n.push_num(t.bn);
        n.push("x");
        n.push_num(t.bk(self.dtype.size_bytes()));
        n.push("s");
        n.push_num(t.stages);
        if t.persistent {
            n.push("p");
        }
        if t.pingpong() {
            n.push("p");
        }
        if t.cluster > 1 {
            n.push("c");
            n.push_num(t.cluster);
        }
        if t.store_buffers() && t.store_bufs != 2 {
            n.push("b");
            n.push_num(t.store_bufs);
        }
        n
    }

    /// Every compiled variant: f16 and bf16, each output, each tile; f32 (TF32) on
    /// [`TF32_TILES`].
    pub fn all() -> impl Iterator<Item = Sm90Variant> {
        let half = [DType::F16, DType::Bf16].into_iter().flat_map(|dtype| {
            [false, true]
                .into_iter()
                .flat_map(move |out_f32| (0..TILES.len() as u8).map(move |tile| Sm90Variant { dtype, out_f32, tile }))
        });
        half.chain(TF32_TILES.into_iter().map(|tile| Sm90Variant { dtype: DType::F32, out_f32: false, tile }))
    }

    /// Whether this variant has an entry (see [`Sm90Variant::all`]).
    pub fn is_compiled(&self) -> bool {
        match self.dtype {
            DType::F32 => !self.out_f32 && TF32_TILES.contains(&self.tile),
            _ => (self.tile as usize) < TILES.len(),
        }
    }
}

/// Launch bounds (threads, 1 block per SM) of a Hopper GEMM entry, for the PTX build:
/// `setmaxnreg` only takes effect under a register cap set at entry.
pub fn launch_bounds(entry: &str) -> Option<(u32, u32)> {
    if !entry.starts_with(TMAP_PARAMS.0) {
        return None;
    }
    Sm90Variant::all()
        .find(|v| v.entry_name().as_str() == entry)
        .map(|v| (v.tile().threads(), v.tile().blocks_per_sm() as u32))
}

/// The output tile (row, column) block `bid` of a `tiles_m x tiles_n` grid computes: tiles walk
/// M first inside groups of [`RASTER_GROUP`] tile rows, the groups left to right.
#[inline(always)]
pub fn raster(bid: usize, tiles_m: usize, tiles_n: usize) -> (usize, usize) {
    let per_group = RASTER_GROUP * tiles_n;
    let group = bid / per_group;
    let first = group * RASTER_GROUP;
    let rows = if tiles_m - first < RASTER_GROUP { tiles_m - first } else { RASTER_GROUP };
    let r = bid % per_group;
    (first + r % rows, r / rows)
}

/// The output tile (row, column) that block `rank` of cluster `c` computes, with clusters of
/// `cl` blocks along M: cluster `c` takes the `cl` vertically adjacent tiles of pair row `pm`
/// in column `tn`, walked as [`raster`] walks `ceil(tiles_m / cl) x tiles_n`. With an odd
/// `tiles_m` the last pair's second row lies past the last tile: that block still loads (zeros)
/// and multiplies alongside its partner, whose B half it supplies, and stores nothing.
#[inline(always)]
pub fn raster_cluster(c: usize, rank: usize, cl: usize, tiles_m: usize, tiles_n: usize) -> (usize, usize) {
    let (pm, tn) = raster(c, tiles_m.div_ceil(cl), tiles_n);
    (pm * cl + rank, tn)
}

#[cfg(test)]
#[path = "gemm_sm90_tests.rs"]
mod tests;
