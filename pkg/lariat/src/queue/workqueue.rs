//! The deduplicating, rate-limited, delaying work queue (client-go's `workqueue` semantics):
//!
//! * a key added several times before a worker takes it is processed once (dirty set);
//! * a key is never handed to two workers at once; a key added while it is being processed is
//!   processed once more after [`WorkQueue::done`] (processing set);
//! * [`WorkQueue::add_after`] delays a key, the earliest requested time winning;
//! * [`WorkQueue::add_rate_limited`] delays by the [`RateLimiter`], [`WorkQueue::forget`] resets it;
//! * [`WorkQueue::shut_down`] stops handing out keys, [`WorkQueue::drain`] waits for running ones;
//! * two priorities (controller-runtime's priority queue, reduced to what a restart needs): keys
//!   added at [`Priority::Low`] (a cache's first list replayed after a start, except objects
//!   created since the cache was made, which are new and so live) are handed out only
//!   when no [`Priority::Normal`] key is ready, so a live change does not wait behind thousands of
//!   replayed objects; adding a queued low key at normal priority raises it;
//! * ranks (priorities users give their objects): with a [`Ranker`] set, a key of a higher rank is
//!   handed out before any key of a lower rank, replayed or not; within one rank the two priorities
//!   above apply, each first in, first out. A key's rank is read when it is added (a key added again with
//!   another rank moves), so the ranker is never called with the queue locked.
//!
//! There is no background task: a worker waiting in [`WorkQueue::get`] sleeps until the earliest
//! delayed key is due and promotes it itself.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ahash::AHashMap;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::rate_limiter::RateLimiter;
use crate::metrics::QueueMetrics;

/// Bounds needed of a queue item.
pub trait QueueItem: Hash + Eq + Clone + Send + Sync + 'static {}
impl<T: Hash + Eq + Clone + Send + Sync + 'static> QueueItem for T {}

/// How urgently a key is wanted (within one rank, see [`Ranker`]). Ordered: `Normal` first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Priority {
    /// A change seen live, a retry, an explicit enqueue.
    #[default]
    Normal,
    /// A replay: an object of a cache's first list, or the cache handed to a new handler.
    Low,
}

/// Ranks a queue's keys: keys of a higher rank are handed out first. Called when a key is added,
/// never with the queue locked, so it may read a cache. Keys rank 0 when no ranker is set.
pub type Ranker<T> = Arc<dyn Fn(&T) -> i32 + Send + Sync>;

/// A cloneable handle on a shared work queue.
pub struct WorkQueue<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<T> {
    name: String,
    state: Mutex<State<T>>,
    /// Signalled when a key becomes available, a delayed key is scheduled, or on shutdown.
    available: Notify,
    /// Signalled when the processing set becomes empty.
    idle: Notify,
    limiter: Box<dyn RateLimiter<T>>,
    metrics: QueueMetrics,
    /// Set once, by the queue's owner ([`WorkQueue::set_ranker`]).
    ranker: OnceLock<Ranker<T>>,
}

struct Delayed<T> {
    ready: Instant,
    seq: u64,
    item: T,
    /// The key's rank when it was delayed.
    rank: i32,
}

impl<T> PartialEq for Delayed<T> {
    fn eq(&self, other: &Self) -> bool {
        self.ready == other.ready && self.seq == other.seq
    }
}
impl<T> Eq for Delayed<T> {}
impl<T> PartialOrd for Delayed<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Delayed<T> {
    // reversed: BinaryHeap is a max-heap and we want the earliest first
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .ready
            .cmp(&self.ready)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// A key that needs processing.
struct Dirty {
    /// When it was first added.
    added: Instant,
    priority: Priority,
    rank: i32,
}

struct State<T> {
    /// Normal-priority keys ready to be handed out, in order.
    queue: VecDeque<T>,
    /// Low-priority keys ready to be handed out, in order. A key raised to normal priority stays
    /// here too; entries whose key is no longer queued at low priority are skipped.
    low: VecDeque<T>,
    /// Keys of a rank other than 0, by rank (highest first) then priority, in order; `queue` and
    /// `low` hold rank 0. Like `low`, entries whose key moved are skipped. Never holds an empty
    /// deque.
    ranked: BTreeMap<(Reverse<i32>, Priority), VecDeque<T>>,
    /// How many keys are ready to be handed out (each counted once, whichever deque holds it).
    ready: usize,
    /// Keys that need processing.
    dirty: AHashMap<T, Dirty>,
    /// Keys being processed, with the time processing started.
    processing: AHashMap<T, Instant>,
    /// Delayed keys; entries whose time no longer matches `waiting` are stale and skipped.
    delayed: BinaryHeap<Delayed<T>>,
    /// Earliest ready time of each delayed key.
    waiting: AHashMap<T, Instant>,
    seq: u64,
    shutting_down: bool,
}

impl<T: QueueItem> State<T> {
    /// Adds a key; returns true if a worker should be woken.
    fn add(
        &mut self,
        item: T,
        priority: Priority,
        rank: i32,
        now: Instant,
        m: &QueueMetrics,
    ) -> bool {
        let running = self.processing.contains_key(&item);
        if let Some(d) = self.dirty.get_mut(&item) {
            // A priority is only ever raised; the rank is the latest one read.
            let priority = priority.min(d.priority);
            if (priority, rank) != (d.priority, d.rank) {
                // Moved: queued again where it now belongs (its old entry goes stale).
                d.priority = priority;
                d.rank = rank;
                if !running {
                    self.push_entry(item, priority, rank);
                }
            }
            return false;
        }
        m.adds.inc();
        self.dirty.insert(
            item.clone(),
            Dirty {
                added: now,
                priority,
                rank,
            },
        );
        if running {
            return false;
        }
        self.push_ready(item, priority, rank, m);
        true
    }

    fn push_ready(&mut self, item: T, priority: Priority, rank: i32, m: &QueueMetrics) {
        self.push_entry(item, priority, rank);
        self.ready += 1;
        m.depth.inc();
    }

    /// Appends an entry for `item` to the deque of its rank and priority.
    fn push_entry(&mut self, item: T, priority: Priority, rank: i32) {
        match (rank, priority) {
            (0, Priority::Normal) => self.queue.push_back(item),
            (0, Priority::Low) => self.low.push_back(item),
            _ => self
                .ranked
                .entry((Reverse(rank), priority))
                .or_default()
                .push_back(item),
        }
    }

    /// Pops the next entry (live or stale) in hand-out order: ranks above 0, rank 0's normal then
    /// low keys, ranks below 0.
    fn pop_entry(&mut self) -> Option<(T, Priority, i32)> {
        if let Some(next) = self.pop_ranked(|rank| rank > 0) {
            return Some(next);
        }
        if let Some(item) = self.queue.pop_front() {
            return Some((item, Priority::Normal, 0));
        }
        if let Some(item) = self.low.pop_front() {
            return Some((item, Priority::Low, 0));
        }
        self.pop_ranked(|_| true)
    }

    /// Pops the front of the highest-ranked deque, if its rank passes `wanted`.
    fn pop_ranked(&mut self, wanted: impl Fn(i32) -> bool) -> Option<(T, Priority, i32)> {
        let mut entry = self.ranked.first_entry()?;
        let (Reverse(rank), priority) = *entry.key();
        if !wanted(rank) {
            return None;
        }
        let item = entry.get_mut().pop_front();
        if entry.get().is_empty() {
            entry.remove();
        }
        item.map(|item| (item, priority, rank))
    }

    /// Moves due delayed keys into the queue; returns how many workers should be woken.
    fn promote_due(&mut self, now: Instant, m: &QueueMetrics) -> usize {
        let mut woken = 0;
        while let Some(top) = self.delayed.peek() {
            if top.ready > now {
                break;
            }
            let Some(d) = self.delayed.pop() else { break };
            if self.waiting.get(&d.item) == Some(&d.ready) {
                self.waiting.remove(&d.item);
                if self.add(d.item, Priority::Normal, d.rank, now, m) {
                    woken += 1;
                }
            }
        }
        woken
    }

    /// Hands out the next queued key: it leaves the dirty set (its time there is observed as
    /// queue duration) and enters the processing set.
    fn take(&mut self, now: Instant, m: &QueueMetrics) -> Option<(T, Priority)> {
        loop {
            let (item, from, rank) = self.pop_entry()?;
            // An entry is live when its key is queued at the priority and rank of the deque it
            // came from and is not running (a key added while running is queued again by `done`).
            let live = !self.processing.contains_key(&item)
                && self
                    .dirty
                    .get(&item)
                    .is_some_and(|d| d.priority == from && d.rank == rank);
            if !live {
                continue;
            }
            self.ready -= 1;
            m.depth.dec();
            if let Some(d) = self.dirty.remove(&item) {
                m.queue_duration
                    .observe(now.saturating_duration_since(d.added).as_secs_f64());
            }
            self.processing.insert(item.clone(), now);
            return Some((item, from));
        }
    }

    fn next_ready(&self) -> Option<Instant> {
        self.delayed.peek().map(|d| d.ready)
    }
}

impl<T: QueueItem> WorkQueue<T> {
    /// Creates a queue called `name` (the `name` label of its metrics).
    pub fn new(
        name: impl Into<String>,
        limiter: Box<dyn RateLimiter<T>>,
        metrics: QueueMetrics,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                name: name.into(),
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    low: VecDeque::new(),
                    ranked: BTreeMap::new(),
                    ready: 0,
                    dirty: AHashMap::new(),
                    processing: AHashMap::new(),
                    delayed: BinaryHeap::new(),
                    waiting: AHashMap::new(),
                    seq: 0,
                    shutting_down: false,
                }),
                available: Notify::new(),
                idle: Notify::new(),
                limiter,
                metrics,
                ranker: OnceLock::new(),
            }),
        }
    }

    /// Ranks this queue's keys from now on (keys already queued move when added again). Only one
    /// ranker per queue: returns false, changing nothing, if one was set before.
    pub fn set_ranker(&self, ranker: Ranker<T>) -> bool {
        self.inner.ranker.set(ranker).is_ok()
    }

    /// Whether a ranker orders this queue.
    pub fn is_ranked(&self) -> bool {
        self.inner.ranker.get().is_some()
    }

    /// The rank of `item` (0 without a ranker).
    fn rank(&self, item: &T) -> i32 {
        self.inner.ranker.get().map_or(0, |rank| rank(item))
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The queue's metric handles.
    pub fn metrics(&self) -> &QueueMetrics {
        &self.inner.metrics
    }

    /// Marks `item` as needing processing. Ignored after shutdown.
    pub fn add(&self, item: T) {
        self.add_with_priority(item, Priority::Normal);
    }

    /// Marks `item` as needing processing at `priority` (a key already queued keeps the higher of
    /// the two). Ignored after shutdown.
    pub fn add_with_priority(&self, item: T, priority: Priority) {
        let rank = self.rank(&item);
        let wake = {
            let mut st = self.inner.state.lock();
            if st.shutting_down {
                return;
            }
            st.add(item, priority, rank, Instant::now(), &self.inner.metrics)
        };
        if wake {
            self.inner.available.notify_one();
        }
    }

    /// [`add_with_priority`](Self::add_with_priority) for many keys at once: no worker takes one
    /// of them before all are queued, so the first handed out is the best of them all (a replay
    /// onto a ranked queue whose workers already run).
    pub fn add_all_with_priority(&self, items: impl IntoIterator<Item = (T, Priority)>) {
        // Ranked before the lock is taken, as one key at a time would be.
        let ranked: Vec<(T, Priority, i32)> = items
            .into_iter()
            .map(|(item, priority)| {
                let rank = self.rank(&item);
                (item, priority, rank)
            })
            .collect();
        let woken = {
            let mut st = self.inner.state.lock();
            if st.shutting_down {
                return;
            }
            let now = Instant::now();
            let mut woken = 0;
            for (item, priority, rank) in ranked {
                if st.add(item, priority, rank, now, &self.inner.metrics) {
                    woken += 1;
                }
            }
            woken
        };
        for _ in 0..woken {
            self.inner.available.notify_one();
        }
    }

    /// Adds `item` once `delay` has passed; an earlier pending time for the same key wins.
    pub fn add_after(&self, item: T, delay: Duration) {
        if delay.is_zero() {
            return self.add(item);
        }
        let now = Instant::now();
        let ready = now + delay;
        let rank = self.rank(&item);
        {
            let mut st = self.inner.state.lock();
            if st.shutting_down {
                return;
            }
            self.inner.metrics.retries.inc();
            if let Some(existing) = st.waiting.get(&item)
                && *existing <= ready
            {
                return;
            }
            st.waiting.insert(item.clone(), ready);
            st.seq += 1;
            let seq = st.seq;
            st.delayed.push(Delayed {
                ready,
                seq,
                item,
                rank,
            });
        }
        // a waiting worker must re-arm its timer for the new earliest time
        self.inner.available.notify_one();
    }

    /// Adds `item` after the rate limiter's delay for it.
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.inner.limiter.when(&item);
        self.add_after(item, delay);
    }

    /// Clears the rate-limiter history of `item`.
    pub fn forget(&self, item: &T) {
        self.inner.limiter.forget(item);
    }

    /// How many rate-limited retries `item` has had since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.inner.limiter.num_requeues(item)
    }

    /// Waits for the next key. Returns `None` once the queue is shut down. The caller must call
    /// [`done`](Self::done) with the key when it has finished with it.
    pub async fn get(&self) -> Option<T> {
        self.get_with_priority().await.map(|(item, _)| item)
    }

    /// [`get`](Self::get), with the priority the key was queued at.
    pub async fn get_with_priority(&self) -> Option<(T, Priority)> {
        loop {
            let notified = self.inner.available.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next = {
                let mut st = self.inner.state.lock();
                if st.shutting_down {
                    return None;
                }
                let now = Instant::now();
                let promoted = st.promote_due(now, &self.inner.metrics);
                if let Some(item) = st.take(now, &self.inner.metrics) {
                    drop(st);
                    // more keys may have become due than this worker can take
                    for _ in 1..promoted {
                        self.inner.available.notify_one();
                    }
                    return Some(item);
                }
                st.next_ready()
            };
            match next {
                Some(at) => {
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Takes the next key without waiting, if one is ready (for benchmarks and synchronous callers).
    pub fn try_get(&self) -> Option<T> {
        let mut st = self.inner.state.lock();
        if st.shutting_down {
            return None;
        }
        let now = Instant::now();
        st.promote_due(now, &self.inner.metrics);
        st.take(now, &self.inner.metrics).map(|(item, _)| item)
    }

    /// Marks `item` as finished; if it was added again meanwhile it goes back into the queue.
    pub fn done(&self, item: &T) {
        let (wake, idle) = {
            let mut st = self.inner.state.lock();
            if let Some(started) = st.processing.remove(item) {
                self.inner
                    .metrics
                    .work_duration
                    .observe(started.elapsed().as_secs_f64());
            }
            let wake = match st.dirty.get(item).map(|d| (d.priority, d.rank)) {
                Some((priority, rank)) => {
                    st.push_ready(item.clone(), priority, rank, &self.inner.metrics);
                    true
                }
                None => false,
            };
            (wake, st.processing.is_empty())
        };
        if wake {
            self.inner.available.notify_one();
        }
        if idle {
            self.inner.idle.notify_waiters();
        }
    }

    /// Number of keys ready to be handed out.
    pub fn len(&self) -> usize {
        self.inner.state.lock().ready
    }

    /// True when no key is ready to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of keys being processed.
    pub fn processing(&self) -> usize {
        self.inner.state.lock().processing.len()
    }

    /// Number of keys waiting for a delay to pass.
    pub fn delayed(&self) -> usize {
        self.inner.state.lock().waiting.len()
    }

    /// Stops handing out keys and ignores new ones; waiting [`get`](Self::get) calls return `None`.
    pub fn shut_down(&self) {
        self.inner.state.lock().shutting_down = true;
        self.inner.available.notify_waiters();
    }

    /// True once [`shut_down`](Self::shut_down) was called.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.state.lock().shutting_down
    }

    /// Shuts the queue down and waits until no key is being processed, at most `timeout`.
    /// Returns true if every running key finished in time.
    pub async fn drain(&self, timeout: Duration) -> bool {
        self.shut_down();
        let deadline = Instant::now() + timeout;
        loop {
            let idle = self.inner.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.inner.state.lock().processing.is_empty() {
                return true;
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                return self.inner.state.lock().processing.is_empty();
            }
        }
    }

    /// Updates `workqueue_unfinished_work_seconds` and `workqueue_longest_running_processor_seconds`.
    pub fn update_unfinished_work(&self) {
        let now = Instant::now();
        let (sum, max) = {
            let st = self.inner.state.lock();
            st.processing
                .values()
                .fold((0.0f64, 0.0f64), |(s, m), started| {
                    let d = now.saturating_duration_since(*started).as_secs_f64();
                    (s + d, m.max(d))
                })
        };
        self.inner.metrics.unfinished.set(sum);
        self.inner.metrics.longest.set(max);
    }
}
