//! Split-K of the Hopper GEMM (long K, few output tiles): K is cut into slices of whole
//! k-tiles, one block per (output tile, slice), and the slices' f32 accumulators are added in
//! the same kernel by a fixed tree of radix [`RADIX`]: the children of a node publish their
//! partials, count their arrival at the node's counter, and the last to arrive (which also
//! resets the counter) adds all of them in child order and carries the node up. The sum's
//! order is the tree's, whatever the arrival order, so results are deterministic; the root
//! block runs the ordinary epilogue. Radix 8 keeps the chain of joins (each a store, a fence,
//! an atomic and a load the blocks wait on) at 1 level up to 8 slices and 2 up to 64: with
//! radix 2, 16 slices took 4 levels and left the SMs idle a third of the kernel
//! (bench/results/ncu-stream-fc7474928a0e). Shared by the PTX entry
//! (`entry/gemm_sm90_split.rs`), the host launcher (workspace size) and the CPU tests.

/// Most K slices (the tree has at most [`LEVELS`] levels of joins).
pub const MAX_SLICES: usize = 64;
/// Counter rows per output tile: one per tree level of joins (64 slices: 6).
pub const LEVELS: usize = 8;

/// How K is cut: `slices` slices of `kt_per` k-tiles (the last may be shorter, none empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sm90Split {
    pub slices: usize,
    pub kt_per: usize,
}

impl Sm90Split {
    /// No split: one slice of every k-tile.
    pub const NONE: Sm90Split = Sm90Split { slices: 1, kt_per: usize::MAX };

    /// At most `want` slices (1 to [`MAX_SLICES`]) of `ktiles` k-tiles, every slice non-empty.
    pub fn new(ktiles: usize, want: usize) -> Sm90Split {
        let want = want.clamp(1, MAX_SLICES).min(ktiles.max(1));
        if want <= 1 {
            return Self::NONE;
        }
        let kt_per = ktiles.div_ceil(want);
        Sm90Split { slices: ktiles.div_ceil(kt_per), kt_per }
    }

    pub fn is_split(&self) -> bool {
        self.slices > 1
    }

    /// The k-tiles `[first, end)` of slice `s` of `ktiles`.
    #[inline(always)]
    pub fn range(&self, s: usize, ktiles: usize) -> (usize, usize) {
        if self.slices <= 1 {
            return (0, ktiles);
        }
        let first = s * self.kt_per;
        let end = first + self.kt_per;
        (first, if end < ktiles { end } else { ktiles })
    }

    /// u32 counters at the start of the workspace (`tiles` output tiles), padded to 256 bytes
    /// so the f32 partials after them stay 16-byte aligned.
    #[inline(always)]
    pub fn counter_words(&self, tiles: usize) -> usize {
        (tiles * LEVELS * self.slices).next_multiple_of(64)
    }

    /// Index of the counter of a tree node's join (`counter` of [`TreeStep::Join`]) for `tile`.
    #[inline(always)]
    pub fn counter_index(&self, tile: usize, counter: usize) -> usize {
        tile * LEVELS * self.slices + counter
    }

    /// Floats of the partials area: one `tile_floats` slot per (slice, tile).
    #[inline(always)]
    pub fn partial_offset(&self, slot: usize, tile: usize, tiles: usize, tile_floats: usize) -> usize {
        (slot * tiles + tile) * tile_floats
    }

    /// Bytes of workspace a launch with `tiles` output tiles of `tile_floats` outputs needs.
    pub fn workspace_bytes(&self, tiles: usize, tile_floats: usize) -> usize {
        4 * (self.counter_words(tiles) + self.slices * tiles * tile_floats)
    }
}

/// Children per node of the join tree.
pub const RADIX: usize = 8;

/// What the block carrying tree node `node` of level `level` does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeStep {
    /// The node is the whole sum: run the epilogue.
    Root,
    /// The node is its parent's only child: it is its own parent.
    Up,
    /// Publish the node's value in slot `mine` and count the arrival at counter `counter`;
    /// the last of the `count` siblings to arrive adds the slots `first + i * stride`
    /// (`i` in `0..count`, in that order; its own among them) and carries the parent.
    Join { mine: usize, first: usize, stride: usize, count: usize, counter: usize },
}

/// The step of node `node` at `level` (leaves: level 0, node = slice) of the radix-[`RADIX`]
/// tree over `slices` leaves. A node's slot is its first leaf (so a parent's slot is its first
/// child's); its join counter is unique per (level, parent).
#[inline(always)]
pub fn tree_step(node: usize, level: usize, slices: usize) -> TreeStep {
    let mut span = 1;
    for _ in 0..level {
        span *= RADIX;
    }
    let nodes = slices.div_ceil(span);
    if nodes <= 1 {
        return TreeStep::Root;
    }
    let parent = node / RADIX;
    let first_child = parent * RADIX;
    let count = if nodes - first_child < RADIX { nodes - first_child } else { RADIX };
    if count == 1 {
        TreeStep::Up
    } else {
        TreeStep::Join {
            mine: node * span,
            first: first_child * span,
            stride: span,
            count,
            counter: level * slices + parent,
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    #[test]
    fn slices_cover_k_and_none_is_empty() {
        for ktiles in [1, 2, 3, 7, 16, 63, 64, 65, 1000, 1024] {
            for want in [0, 1, 2, 3, 5, 8, 32, 64, 100] {
                let s = Sm90Split::new(ktiles, want);
                assert!(s.slices >= 1 && s.slices <= MAX_SLICES.min(want.max(1)));
                let mut next = 0;
                for i in 0..s.slices {
                    let (a, b) = s.range(i, ktiles);
                    assert_eq!(a, next);
                    assert!(b > a, "{ktiles} {want}: slice {i} empty");
                    next = b;
                }
                assert_eq!(next, ktiles);
            }
        }
    }

    /// Every arrival order: one root, every counter back at zero, a result bit-identical to the
    /// fixed tree's (f32 sums of values whose order matters).
    #[test]
    fn tree_joins_in_a_fixed_order_whatever_the_arrival() {
        let mut seed = 12345u64;
        let mut rnd = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        for slices in 2..=MAX_SLICES {
            let vals: Vec<f32> = (0..slices).map(|i| 1.0 + (i as f32) * 1.0e-3 + (i * i) as f32 * 7.0e3).collect();
            let mut expect = None;
            for _ in 0..20 {
                let mut order: Vec<usize> = (0..slices).collect();
                for i in (1..slices).rev() {
                    order.swap(i, rnd() % (i + 1));
                }
                let mut counters = vec![0u32; LEVELS * slices];
                let mut slots = vec![f32::NAN; slices];
                let mut roots = vec![];
                for &leaf in &order {
                    let (mut node, mut level, mut acc) = (leaf, 0, vals[leaf]);
                    loop {
                        match tree_step(node, level, slices) {
                            TreeStep::Root => {
                                roots.push(acc);
                                break;
                            }
                            TreeStep::Up => {}
                            TreeStep::Join { mine, first, stride, count, counter } => {
                                assert!(level < LEVELS && counter < LEVELS * slices);
                                slots[mine] = acc;
                                let old = counters[counter];
                                counters[counter] += 1;
                                if old as usize + 1 < count {
                                    break;
                                }
                                counters[counter] = 0;
                                acc = slots[first];
                                for i in 1..count {
                                    acc += slots[first + i * stride];
                                }
                            }
                        }
                        node /= RADIX;
                        level += 1;
                    }
                }
                assert_eq!(roots.len(), 1, "{slices} slices");
                assert!(counters.iter().all(|&c| c == 0));
                let e = *expect.get_or_insert(roots[0]);
                assert_eq!(e.to_bits(), roots[0].to_bits(), "{slices} slices: order changed the sum");
                let exact: f64 = vals.iter().map(|&v| v as f64).sum();
                assert!((roots[0] as f64 - exact).abs() <= 1e-6 * exact);
            }
        }
    }

    /// Every leaf is added exactly once (small integers: f32 sums are exact), and the chain of
    /// joins is 1 level deep up to RADIX slices and 2 up to RADIX².
    #[test]
    fn each_leaf_counts_once_and_the_tree_is_shallow() {
        for slices in 2..=MAX_SLICES {
            let mut counters = vec![0u32; LEVELS * slices];
            let mut slots = vec![f32::NAN; slices];
            let (mut roots, mut depth) = (vec![], 0);
            for leaf in (0..slices).rev() {
                let (mut node, mut level, mut acc) = (leaf, 0, (leaf + 1) as f32);
                loop {
                    match tree_step(node, level, slices) {
                        TreeStep::Root => {
                            roots.push(acc);
                            depth = level;
                            break;
                        }
                        TreeStep::Up => {}
                        TreeStep::Join { mine, first, stride, count, counter } => {
                            assert!((first..first + count * stride).step_by(stride).any(|x| x == mine));
                            slots[mine] = acc;
                            counters[counter] += 1;
                            if (counters[counter] as usize) < count {
                                break;
                            }
                            counters[counter] = 0;
                            acc = (0..count).map(|i| slots[first + i * stride]).sum();
                        }
                    }
                    node /= RADIX;
                    level += 1;
                }
            }
            assert_eq!(roots, vec![(slices * (slices + 1) / 2) as f32], "{slices} slices");
            assert_eq!(depth, if slices <= RADIX { 1 } else { 2 }, "{slices} slices");
        }
    }
}
