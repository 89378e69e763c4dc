//! Unit tests of the pool's bookkeeping (no GPU): size classes, best fit, splitting,
//! coalescing, ownership, deferred reuse, limits and `empty_cache` accounting.

use super::*;
use proptest::prelude::*;

const A: Owner = Owner(1);
const B: Owner = Owner(2);

/// Allocates through the arena, creating segments at fake addresses as the driver would.
struct Fake {
    arena: Arena<bool>,
    next_base: Addr,
}

impl Fake {
    fn new() -> Fake {
        Fake { arena: Arena::default(), next_base: 1 << 40 }
    }
    fn alloc(&mut self, owner: Owner, bytes: usize) -> Grant {
        match self.arena.allocate(owner, bytes).unwrap() {
            Plan::Hit(g) => g,
            Plan::Reown { segment, .. } => self.arena.take_reowned(owner, segment, bytes).unwrap(),
            Plan::NewSegment { size } => {
                let base = self.next_base;
                self.next_base += size as u64 + (1 << 30);
                self.arena.take_new_segment(owner, base, size, bytes)
            }
        }
    }
}

#[test]
fn sizes_round_to_blocks_and_segments_by_class() {
    assert_eq!(round_size(0), Some(512));
    assert_eq!(round_size(1), Some(512));
    assert_eq!(round_size(513), Some(1024));
    assert_eq!(round_size(usize::MAX), None);
    assert_eq!(segment_size(512), Some(SMALL_SEGMENT));
    assert_eq!(segment_size(SMALL_REQUEST), Some(SMALL_SEGMENT));
    assert_eq!(segment_size(SMALL_REQUEST + 512), Some(MID_SEGMENT));
    assert_eq!(segment_size(MID_REQUEST + 512), Some(12 << 20));
    assert_eq!(kind_of(SMALL_REQUEST), Kind::Small);
    assert_eq!(kind_of(SMALL_REQUEST + 512), Kind::Large);
}

#[test]
fn small_blocks_split_one_segment_and_coalesce_back() {
    let mut f = Fake::new();
    let a = f.alloc(A, 1000);
    let b = f.alloc(A, 3000);
    let c = f.alloc(A, 100);
    assert_eq!((a.size, b.size, c.size), (1024, 3072, 512));
    assert_eq!(b.addr, a.addr + 1024, "carved one after the other from one segment");
    assert_eq!(c.addr, b.addr + 3072);
    let st = f.arena.stats();
    assert_eq!((st.driver_allocs, st.segments, st.cache_hits), (1, 1, 2));
    assert_eq!(st.allocated_bytes, 1024 + 3072 + 512);
    assert_eq!(st.requested_bytes, 4100);
    assert_eq!(f.arena.blocks_in(a.addr), 4, "three used blocks and the free rest");
    // Free the middle, then its neighbours: everything merges into one block again.
    assert_eq!(f.arena.free(b.addr, A), Ok(Freed::Now));
    assert_eq!(f.arena.free(a.addr, A), Ok(Freed::Now));
    assert_eq!(f.arena.blocks_in(a.addr), 3);
    assert_eq!(f.arena.free(c.addr, A), Ok(Freed::Now));
    assert_eq!(f.arena.blocks_in(a.addr), 1, "coalesced to the whole segment");
    let st = f.arena.stats();
    assert_eq!((st.allocated_bytes, st.requested_bytes, st.active_blocks, st.reserved_bytes), (0, 0, 0, SMALL_SEGMENT));
    assert_eq!(st.peak_allocated_bytes, 1024 + 3072 + 512);
}

#[test]
fn best_fit_takes_the_smallest_free_block_that_fits() {
    let mut f = Fake::new();
    let big = f.alloc(A, 8192);
    let _sep1 = f.alloc(A, 512);
    let small = f.alloc(A, 2048);
    let _sep2 = f.alloc(A, 512);
    f.arena.free(big.addr, A).unwrap();
    f.arena.free(small.addr, A).unwrap();
    let g = f.alloc(A, 1500);
    assert_eq!(g.addr, small.addr, "the 2 KiB hole, not the 8 KiB one");
    let g2 = f.alloc(A, 4000);
    assert_eq!(g2.addr, big.addr);
}

#[test]
fn large_blocks_split_only_when_the_rest_is_large() {
    let mut f = Fake::new();
    let a = f.alloc(A, 2 << 20);
    assert_eq!(f.arena.stats().reserved_bytes, MID_SEGMENT);
    assert_eq!(a.size, 2 << 20, "18 MiB left: split");
    f.arena.free(a.addr, A).unwrap();
    let b = f.alloc(A, MID_SEGMENT - (1 << 20) + 512);
    assert_eq!(b.size, MID_SEGMENT, "less than 1 MiB left: the whole block");
    let st = f.arena.stats();
    assert_eq!((st.driver_allocs, st.cache_hits), (1, 1));
}

#[test]
fn small_and_large_requests_never_share_segments() {
    let mut f = Fake::new();
    let s = f.alloc(A, 512);
    let l = f.alloc(A, 4 << 20);
    assert_eq!(f.arena.stats().segments, 2);
    assert_ne!(f.arena.blocks_in(s.addr), 0);
    f.arena.free(l.addr, A).unwrap();
    let s2 = f.alloc(A, 4096);
    assert_eq!(s2.addr, s.addr + 512, "small request from the small segment");
}

#[test]
fn steady_state_loop_makes_no_driver_allocations() {
    let mut f = Fake::new();
    let sizes = [4096usize, 1 << 20, 3 << 20, 100, 40 << 20, 777];
    for it in 0..50 {
        let gs: Vec<Grant> = sizes.iter().map(|&s| f.alloc(A, s)).collect();
        for g in gs.iter().rev() {
            f.arena.free(g.addr, A).unwrap();
        }
        if it == 0 {
            assert!(f.arena.stats().driver_allocs > 0);
        }
    }
    let st = f.arena.stats();
    assert_eq!(st.driver_allocs, 3, "one segment per class, all in the first iteration");
    assert_eq!(st.cache_hits, st.allocations - 3);
    assert_eq!(st.allocated_bytes, 0);
}

#[test]
fn freeing_on_a_foreign_owner_is_refused_and_the_block_stays_usable() {
    let mut f = Fake::new();
    let g = f.alloc(A, 1024);
    assert_eq!(f.arena.free(g.addr, B), Err(ArenaError::ForeignOwner { addr: g.addr, owner: A, by: B }));
    assert_eq!(f.arena.free(g.addr + 512, A), Err(ArenaError::UnknownBlock(g.addr + 512)));
    assert_eq!(f.arena.free(g.addr, A), Ok(Freed::Now));
    assert_eq!(f.arena.free(g.addr, A), Err(ArenaError::UnknownBlock(g.addr)), "double free");
}

#[test]
fn a_block_used_on_another_stream_waits_for_its_events() {
    let mut f = Fake::new();
    let g = f.alloc(A, 4096);
    f.arena.record_use(g.addr, B).unwrap();
    // Either the owner or the recorded stream may free it; both wait for B's event.
    assert_eq!(f.arena.free(g.addr, B), Ok(Freed::AfterEvents(vec![B])));
    f.arena.park(g.addr, vec![false]);
    assert_eq!(f.arena.stats().pending_blocks, 1);
    let other = f.alloc(A, 4096);
    assert_ne!(other.addr, g.addr, "not reused while B's event is pending");
    f.arena.poll(|done| *done);
    assert_eq!(f.arena.stats().pending_blocks, 1);
    f.arena.poll(|_| true);
    assert_eq!(f.arena.stats().pending_blocks, 0);
    let again = f.alloc(A, 4096);
    assert_eq!(again.addr, g.addr, "reused once the event completed");
}

#[test]
fn a_fully_free_segment_moves_to_another_stream_through_reown() {
    let mut f = Fake::new();
    let g = f.alloc(A, 4096);
    f.arena.free(g.addr, A).unwrap();
    match f.arena.allocate(B, 1024).unwrap() {
        Plan::Reown { segment, from } => {
            assert_eq!((segment, from), (g.addr, A));
            let got = f.arena.take_reowned(B, segment, 1024).unwrap();
            assert_eq!(got.owner, B);
        }
        other => panic!("expected a reown, got {other:?}"),
    }
    let st = f.arena.stats();
    assert_eq!((st.driver_allocs, st.reowned), (1, 1));
    // A busy segment is never taken over.
    let mut f = Fake::new();
    let _held = f.alloc(A, 4096);
    assert!(matches!(f.arena.allocate(B, 1024).unwrap(), Plan::NewSegment { .. }));
}

#[test]
fn private_pools_are_kept_apart_until_transferred() {
    let mut f = Fake::new();
    let p = Owner::private(7);
    assert!(p.is_private() && !A.is_private());
    let g = f.alloc(p, 4096);
    f.arena.free(g.addr, p).unwrap();
    assert!(matches!(f.arena.allocate(A, 1024).unwrap(), Plan::NewSegment { .. }), "not reowned");
    assert!(f.arena.release_free_segments(None).is_empty(), "empty_cache keeps a live graph's pool");
    f.arena.transfer(p, A);
    assert_eq!(f.alloc(A, 1024).addr, g.addr);
}

#[test]
fn empty_cache_returns_reserved_bytes_to_zero() {
    let mut f = Fake::new();
    let a = f.alloc(A, 100);
    let b = f.alloc(B, 30 << 20);
    let c = f.alloc(A, 5 << 20);
    assert_eq!(f.arena.release_free_segments(None).len(), 0, "busy segments stay");
    f.arena.free(a.addr, A).unwrap();
    f.arena.free(b.addr, B).unwrap();
    let mut released = f.arena.release_free_segments(None);
    released.sort();
    let mut want = vec![(b.addr, 30 << 20), (a.addr, SMALL_SEGMENT)];
    want.sort();
    assert_eq!(released, want);
    f.arena.free(c.addr, A).unwrap();
    assert_eq!(f.arena.release_free_segments(Some(A)).len(), 1);
    let st = f.arena.stats();
    assert_eq!((st.reserved_bytes, st.segments, st.allocated_bytes), (0, 0, 0));
    assert_eq!(st.driver_frees, 3);
}

#[test]
fn limits_count_reserved_bytes() {
    let mut f = Fake::new();
    assert!(f.arena.fits(SMALL_SEGMENT, Some(SMALL_SEGMENT)));
    f.alloc(A, 100);
    assert!(!f.arena.fits(SMALL_SEGMENT, Some(SMALL_SEGMENT)));
    assert!(f.arena.fits(SMALL_SEGMENT, None));
}

#[test]
fn watches_see_the_peak_inside_their_scope() {
    let mut f = Fake::new();
    let a = f.alloc(A, 4096);
    let w = f.arena.open_watch();
    let b = f.alloc(A, 8192);
    f.arena.free(b.addr, A).unwrap();
    let inner = f.arena.open_watch();
    assert_eq!(f.arena.close_watch(inner), Some(4096));
    assert_eq!(f.arena.close_watch(w), Some(4096 + 8192));
    assert_eq!(f.arena.close_watch(w), None, "closed once");
    f.arena.free(a.addr, A).unwrap();
}

proptest! {
    /// Random allocate/free sequences: blocks never overlap, every block lies in a segment,
    /// the counters match a model, and freeing everything coalesces each segment to one block.
    #[test]
    fn random_sequences_keep_the_books(ops in prop::collection::vec((0usize..3, 0usize..(3 << 20), any::<bool>()), 1..120)) {
        let mut f = Fake::new();
        let mut live: Vec<Grant> = Vec::new();
        for (who, bytes, free_one) in ops {
            if free_one && !live.is_empty() {
                let g = live.swap_remove(bytes % live.len());
                prop_assert_eq!(f.arena.free(g.addr, g.owner), Ok(Freed::Now));
            } else {
                let owner = Owner(who as u64 + 1);
                let g = f.alloc(owner, bytes);
                prop_assert!(g.size >= bytes && g.size.is_multiple_of(MIN_BLOCK) && g.addr.is_multiple_of(MIN_BLOCK as u64));
                live.push(g);
            }
            let mut sorted = live.clone();
            sorted.sort_by_key(|g| g.addr);
            for w in sorted.windows(2) {
                prop_assert!(w[0].addr + w[0].size as u64 <= w[1].addr, "overlap {:?}", w);
            }
            let st = f.arena.stats();
            prop_assert_eq!(st.allocated_bytes, live.iter().map(|g| g.size).sum::<usize>());
            prop_assert_eq!(st.active_blocks, live.len());
            prop_assert!(st.allocated_bytes <= st.reserved_bytes);
            prop_assert_eq!(st.allocations, st.cache_hits + st.driver_allocs);
        }
        for g in live.drain(..) {
            prop_assert_eq!(f.arena.free(g.addr, g.owner), Ok(Freed::Now));
        }
        let segs: Vec<Addr> = f.arena.segments.keys().copied().collect();
        for s in segs {
            prop_assert_eq!(f.arena.blocks_in(s), 1);
        }
        f.arena.release_free_segments(None);
        prop_assert_eq!(f.arena.stats().reserved_bytes, 0);
    }
}
