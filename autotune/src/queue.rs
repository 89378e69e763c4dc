//! The shared work queue of a device-parallel run: items are handed out in the queue's
//! order, one at a time, to whichever worker asks next, so a device that finishes early
//! takes more and no static split can leave one idle. A worker that fails gives its item
//! back (to the back of the queue) for another worker, a bounded number of times. A worker
//! that finds the queue empty waits only while another still holds an item (which could
//! come back), so the run never hangs when a worker exits early.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

/// Items waiting, plus what the workers hold.
pub struct WorkQueue<T> {
    state: Mutex<State<T>>,
    changed: Condvar,
    retries: usize,
}

struct State<T> {
    /// Waiting items with the number of times a worker failed on each.
    items: VecDeque<(T, usize)>,
    /// Items handed out and not yet finished or given back.
    held: usize,
    closed: bool,
    /// Items whose workers failed more than `retries` times.
    abandoned: Vec<T>,
}

impl<T> WorkQueue<T> {
    /// A queue handing out `items` in this order; an item whose worker fails goes back to
    /// the queue at most `retries` times.
    pub fn new(items: impl IntoIterator<Item = T>, retries: usize) -> WorkQueue<T> {
        let items = items.into_iter().map(|t| (t, 0)).collect();
        WorkQueue {
            state: Mutex::new(State { items, held: 0, closed: false, abandoned: Vec::new() }),
            changed: Condvar::new(),
            retries,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next item; `None` once the queue is closed, or empty with no item held by any
    /// worker. While it is empty but another worker holds an item, this waits.
    pub fn take(&self) -> Option<Taken<'_, T>> {
        let mut s = self.lock();
        loop {
            if s.closed {
                return None;
            }
            if let Some((item, failures)) = s.items.pop_front() {
                s.held += 1;
                return Some(Taken { queue: self, item: Some(item), failures });
            }
            if s.held == 0 {
                return None;
            }
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Hands out nothing more (the run was stopped); waiting workers get `None`.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// What was never finished: items still waiting (a closed queue, or no worker left to
    /// take them), then those abandoned after their retries.
    pub fn into_unfinished(self) -> Vec<T> {
        let s = self.state.into_inner().unwrap_or_else(|p| p.into_inner());
        s.items.into_iter().map(|(t, _)| t).chain(s.abandoned).collect()
    }

    fn release(&self, item: Option<T>, failures: usize) -> bool {
        let mut s = self.lock();
        s.held -= 1;
        let mut again = false;
        if let Some(t) = item {
            if failures <= self.retries && !s.closed {
                s.items.push_back((t, failures));
                again = true;
            } else {
                s.abandoned.push(t);
            }
        }
        drop(s);
        self.changed.notify_all();
        again
    }
}

/// An item a worker holds. Dropping it without [`Taken::done`] counts as a failure.
pub struct Taken<'q, T> {
    queue: &'q WorkQueue<T>,
    item: Option<T>,
    failures: usize,
}

impl<T> Taken<'_, T> {
    pub fn item(&self) -> &T {
        self.item.as_ref().expect("a taken item is held until released")
    }

    /// Finished: the item leaves the queue for good.
    pub fn done(mut self) {
        self.item = None;
        self.queue.release(None, 0);
    }

    /// Its worker failed: the item goes back to the queue while retries are left (true),
    /// otherwise it is abandoned (false).
    pub fn failed(mut self) -> bool {
        let item = self.item.take();
        self.queue.release(item, self.failures + 1)
    }
}

impl<T> Drop for Taken<'_, T> {
    fn drop(&mut self) {
        if let Some(item) = self.item.take() {
            self.queue.release(Some(item), self.failures + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc::channel;

    /// A fake tuner: takes items until the queue says stop, recording what it got.
    fn drain(q: &WorkQueue<usize>, mut work: impl FnMut(usize)) -> Vec<usize> {
        let mut got = Vec::new();
        while let Some(t) = q.take() {
            got.push(*t.item());
            work(*t.item());
            t.done();
        }
        got
    }

    #[test]
    fn every_item_is_taken_once_in_queue_order() {
        let q = WorkQueue::new(0..200, 1);
        let taken: Vec<Vec<usize>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4).map(|_| s.spawn(|| drain(&q, |_| std::thread::yield_now()))).collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for t in &taken {
            assert!(t.windows(2).all(|w| w[0] < w[1]), "each worker sees the queue's order: {t:?}");
        }
        let mut all: Vec<usize> = taken.concat();
        all.sort_unstable();
        assert_eq!(all, (0..200).collect::<Vec<_>>(), "every item exactly once");
        assert!(q.into_unfinished().is_empty());
    }

    #[test]
    fn a_fast_worker_takes_the_work_a_slow_one_would_have_had() {
        // Worker 0 holds the first (costliest) item until worker 1 has finished all the
        // others: with a static split it would have had half of them.
        let q = WorkQueue::new(0..6, 1);
        let finished = AtomicUsize::new(0);
        let (started, wait_started) = channel();
        let (slow, fast) = std::thread::scope(|s| {
            let slow = s.spawn(|| {
                let t = q.take().unwrap();
                started.send(()).unwrap();
                while finished.load(Ordering::SeqCst) < 5 {
                    std::thread::yield_now();
                }
                let first = *t.item();
                t.done();
                (first, q.take().is_none())
            });
            wait_started.recv().unwrap();
            let fast = s.spawn(|| {
                drain(&q, |_| {
                    finished.fetch_add(1, Ordering::SeqCst);
                })
            });
            (slow.join().unwrap(), fast.join().unwrap())
        });
        assert_eq!(slow, (0, true), "the slow worker got only the first item");
        assert_eq!(fast, [1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_failed_item_goes_to_the_back_for_another_worker() {
        let q = WorkQueue::new(['a', 'b', 'c'], 1);
        let t = q.take().unwrap();
        assert_eq!(*t.item(), 'a');
        assert!(t.failed(), "requeued");
        let mut order = Vec::new();
        while let Some(t) = q.take() {
            order.push(*t.item());
            t.done();
        }
        assert_eq!(order, ['b', 'c', 'a']);
        assert!(q.into_unfinished().is_empty());
    }

    #[test]
    fn an_item_that_keeps_failing_is_abandoned_and_reported() {
        let q = WorkQueue::new(['a', 'b'], 1);
        let a = q.take().unwrap();
        drop(a); // a worker that died (panicked) without a word: a failure too
        let b = q.take().unwrap();
        assert_eq!(*b.item(), 'b');
        b.done();
        let a = q.take().unwrap();
        assert_eq!(*a.item(), 'a');
        assert!(!a.failed(), "second failure: no retries left");
        assert!(q.take().is_none());
        assert_eq!(q.into_unfinished(), ['a']);
    }

    #[test]
    fn a_waiting_worker_wakes_when_the_last_holder_fails_or_finishes() {
        for retries in [0, 1] {
            let q = WorkQueue::new([7], retries);
            let held = q.take().unwrap();
            let got = std::thread::scope(|s| {
                // Waits (the queue is empty but an item is held) until it comes back or ends.
                let waiter = s.spawn(|| {
                    q.take().map(|t| {
                        let i = *t.item();
                        t.done();
                        i
                    })
                });
                held.failed();
                waiter.join().unwrap()
            });
            assert_eq!(got, (retries == 1).then_some(7), "retries {retries}");
        }
        let q = WorkQueue::new([1], 0);
        let held = q.take().unwrap();
        let got = std::thread::scope(|s| {
            let waiter = s.spawn(|| q.take().is_none());
            held.done();
            waiter.join().unwrap()
        });
        assert!(got, "nothing left after the holder finished");
    }

    #[test]
    fn a_closed_queue_hands_out_nothing_and_keeps_what_was_left() {
        let q = WorkQueue::new([1, 2], 1);
        let (held, second) = (q.take().unwrap(), q.take().unwrap());
        let woke = std::thread::scope(|s| {
            let waiter = s.spawn(|| q.take().is_none());
            q.close();
            waiter.join().unwrap()
        });
        assert!(woke, "a closed queue answers None");
        assert!(!held.failed(), "a closed queue takes nothing back");
        second.done();
        assert_eq!(q.into_unfinished(), [1], "the failed item, not the finished one");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Workers that die on some items (and stop, like a failed device) never hang the
        /// others, and every item is finished exactly once or reported unfinished.
        #[test]
        fn every_item_ends_done_once_or_unfinished(
            n in 0usize..24,
            workers in 1usize..5,
            fatal in proptest::collection::vec(0usize..24, 0..4),
            retries in 0usize..2,
        ) {
            let q = WorkQueue::new(0..n, retries);
            let done = Mutex::new(Vec::new());
            std::thread::scope(|s| {
                for _ in 0..workers {
                    s.spawn(|| {
                        while let Some(t) = q.take() {
                            if fatal.contains(t.item()) {
                                t.failed();
                                return; // this worker is gone
                            }
                            done.lock().unwrap().push(*t.item());
                            t.done();
                        }
                    });
                }
            });
            let mut all = done.into_inner().unwrap();
            let finished = all.len();
            all.extend(q.into_unfinished());
            all.sort_unstable();
            prop_assert_eq!(all, (0..n).collect::<Vec<_>>());
            let broken = fatal.iter().filter(|&&i| i < n).collect::<std::collections::BTreeSet<_>>().len();
            // Each fatal item kills at most retries + 1 workers; a survivor drains the rest.
            if workers > broken * (retries + 1) {
                prop_assert_eq!(finished, n - broken);
            }
        }
    }
}
