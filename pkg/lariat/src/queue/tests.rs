use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::*;
use crate::metrics::QueueMetrics;

fn queue(opts: RateLimiterOptions) -> WorkQueue<String> {
    WorkQueue::new("test", opts.build(), QueueMetrics::unregistered().unwrap())
}

fn no_bucket() -> RateLimiterOptions {
    RateLimiterOptions {
        bucket: None,
        ..Default::default()
    }
}

#[tokio::test]
async fn dedupes_pending_keys() {
    let q = queue(no_bucket());
    q.add("a".into());
    q.add("a".into());
    q.add("b".into());
    assert_eq!(q.len(), 2);
    assert_eq!(q.get().await.as_deref(), Some("a"));
    assert_eq!(q.get().await.as_deref(), Some("b"));
    assert!(q.is_empty());
    assert_eq!(q.metrics().adds(), 2);
}

#[tokio::test]
async fn key_added_while_processing_runs_again_after_done() {
    let q = queue(no_bucket());
    q.add("a".into());
    let a = q.get().await.unwrap();
    q.add("a".into());
    q.add("a".into());
    // not handed out while it is processing
    assert!(q.try_get().is_none());
    assert_eq!(q.processing(), 1);
    q.done(&a);
    assert_eq!(q.try_get().as_deref(), Some("a"));
    q.done(&a);
    assert!(q.try_get().is_none());
    assert_eq!(q.processing(), 0);
}

#[tokio::test(start_paused = true)]
async fn add_after_fires_after_delay_and_earliest_wins() {
    let q = queue(no_bucket());
    let start = tokio::time::Instant::now();
    q.add_after("a".into(), Duration::from_secs(10));
    q.add_after("a".into(), Duration::from_secs(3));
    q.add_after("a".into(), Duration::from_secs(20));
    assert_eq!(q.delayed(), 1);
    let got = q.get().await.unwrap();
    assert_eq!(got, "a");
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    q.done(&got);
    // the later requests were superseded
    let r = tokio::time::timeout(Duration::from_secs(60), q.get()).await;
    assert!(r.is_err(), "stale delayed entries must not fire");
}

#[tokio::test(start_paused = true)]
async fn rate_limited_requeue_grows_and_forget_resets() {
    let q = queue(RateLimiterOptions {
        base_delay: Duration::from_millis(100),
        max_delay: Duration::from_secs(10),
        bucket: None,
    });
    let mut delays = vec![];
    for _ in 0..4 {
        let t = tokio::time::Instant::now();
        q.add_rate_limited("a".into());
        let k = q.get().await.unwrap();
        delays.push(t.elapsed());
        q.done(&k);
    }
    assert_eq!(
        delays,
        vec![
            Duration::from_millis(100),
            Duration::from_millis(200),
            Duration::from_millis(400),
            Duration::from_millis(800)
        ]
    );
    assert_eq!(q.num_requeues(&"a".to_string()), 4);
    q.forget(&"a".to_string());
    assert_eq!(q.num_requeues(&"a".to_string()), 0);
    assert_eq!(q.metrics().retries(), 4);
}

#[tokio::test]
async fn shutdown_stops_handing_out_and_drain_waits() {
    let q = queue(no_bucket());
    q.add("a".into());
    q.add("b".into());
    let a = q.get().await.unwrap();
    let q2 = q.clone();
    let finisher = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        q2.done(&a);
    });
    assert!(q.drain(Duration::from_secs(5)).await);
    assert!(q.get().await.is_none(), "no new keys after shutdown");
    q.add("c".into());
    assert!(q.try_get().is_none());
    finisher.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn drain_gives_up_at_deadline() {
    let q = queue(no_bucket());
    q.add("a".into());
    let _a = q.get().await.unwrap();
    assert!(!q.drain(Duration::from_secs(1)).await);
}

#[tokio::test]
async fn waiting_workers_wake_on_shutdown() {
    let q = queue(no_bucket());
    let mut hs = vec![];
    for _ in 0..4 {
        let q = q.clone();
        hs.push(tokio::spawn(async move { q.get().await }));
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    q.shut_down();
    for h in hs {
        assert!(h.await.unwrap().is_none());
    }
}

/// Property: under many workers and a random burst of adds, no key is ever processed by two
/// workers at once, and every add is followed by a processing run that started after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn property_no_key_runs_concurrently_and_no_add_is_lost() {
    for seed in 0..8u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let keys = 1 + rng.usize(..24);
        let workers = 2 + rng.usize(..30);
        let adds = 2_000 + rng.usize(..3_000);
        let q = queue(no_bucket());
        let running: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let added: Arc<Vec<AtomicUsize>> =
            Arc::new((0..keys).map(|_| AtomicUsize::new(0)).collect());
        let seen: Arc<Vec<AtomicUsize>> =
            Arc::new((0..keys).map(|_| AtomicUsize::new(0)).collect());
        let max_parallel = Arc::new(AtomicUsize::new(0));
        let violations = Arc::new(AtomicUsize::new(0));
        let mut hs = vec![];
        for w in 0..workers {
            let (q, running, added, seen) =
                (q.clone(), running.clone(), added.clone(), seen.clone());
            let (max_parallel, violations) = (max_parallel.clone(), violations.clone());
            hs.push(tokio::spawn(async move {
                let mut rng = fastrand::Rng::with_seed(seed * 1000 + w as u64);
                while let Some(k) = q.get().await {
                    let idx: usize = k[1..].parse().unwrap();
                    {
                        let mut r = running.lock();
                        let n = r.entry(k.clone()).or_default();
                        *n += 1;
                        if *n > 1 {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                        max_parallel
                            .fetch_max(r.values().filter(|v| **v > 0).count(), Ordering::SeqCst);
                    }
                    seen[idx].store(added[idx].load(Ordering::SeqCst), Ordering::SeqCst);
                    if rng.bool() {
                        tokio::task::yield_now().await;
                    }
                    if rng.u8(..10) == 0 {
                        tokio::time::sleep(Duration::from_micros(rng.u64(..300))).await;
                    }
                    *running.lock().get_mut(&k).unwrap() -= 1;
                    q.done(&k);
                }
            }));
        }
        for _ in 0..adds {
            let idx = rng.usize(..keys);
            added[idx].fetch_add(1, Ordering::SeqCst);
            q.add(format!("k{idx}"));
            if rng.u8(..50) == 0 {
                tokio::task::yield_now().await;
            }
        }
        // quiesce
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !(q.is_empty() && q.processing() == 0) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "seed {seed}: queue never drained"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        q.shut_down();
        for h in hs {
            h.await.unwrap();
        }
        assert_eq!(
            violations.load(Ordering::SeqCst),
            0,
            "seed {seed}: a key ran on two workers"
        );
        for i in 0..keys {
            let (a, s) = (
                added[i].load(Ordering::SeqCst),
                seen[i].load(Ordering::SeqCst),
            );
            if a > 0 {
                assert_eq!(
                    s, a,
                    "seed {seed}: key k{i} was added after its last run started"
                );
            }
        }
        assert!(max_parallel.load(Ordering::SeqCst) <= workers);
    }
}

#[tokio::test]
async fn delayed_key_wakes_idle_workers_on_time() {
    let q = queue(RateLimiterOptions {
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_secs(5),
        bucket: None,
    });
    let times: Arc<Mutex<Vec<tokio::time::Instant>>> = Arc::default();
    let mut hs = vec![];
    for _ in 0..5 {
        let (q, times) = (q.clone(), times.clone());
        hs.push(tokio::spawn(async move {
            while let Some(k) = q.get().await {
                let n = {
                    let mut t = times.lock();
                    t.push(tokio::time::Instant::now());
                    t.len()
                };
                if n < 4 {
                    q.add_rate_limited(k.clone());
                }
                q.done(&k);
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    q.add("a".into());
    tokio::time::sleep(Duration::from_millis(400)).await;
    q.shut_down();
    for h in hs {
        h.await.unwrap();
    }
    let t = times.lock().clone();
    assert_eq!(t.len(), 4);
    let gaps: Vec<Duration> = t.windows(2).map(|w| w[1] - w[0]).collect();
    for (i, g) in gaps.iter().enumerate() {
        let expect = Duration::from_millis(20 << i);
        assert!(
            *g >= expect && *g < expect + Duration::from_millis(30),
            "gap {i}: {g:?} (all {gaps:?})"
        );
    }
}

#[tokio::test]
async fn normal_keys_go_before_low_ones() {
    let q = queue(no_bucket());
    q.add_with_priority("replay-1".into(), Priority::Low);
    q.add_with_priority("replay-2".into(), Priority::Low);
    q.add("live".into());
    assert_eq!(q.len(), 3);
    assert_eq!(
        q.get_with_priority().await,
        Some(("live".into(), Priority::Normal))
    );
    assert_eq!(
        q.get_with_priority().await,
        Some(("replay-1".into(), Priority::Low))
    );
    assert_eq!(q.try_get().as_deref(), Some("replay-2"));
    assert!(q.is_empty());
    assert_eq!(q.metrics().adds(), 3);
}

#[tokio::test]
async fn a_low_key_added_again_at_normal_priority_is_raised_once() {
    let q = queue(no_bucket());
    for k in ["a", "b", "c"] {
        q.add_with_priority(k.into(), Priority::Low);
    }
    q.add("c".into());
    // Adding at low priority never lowers a key.
    q.add_with_priority("c".into(), Priority::Low);
    assert_eq!(q.len(), 3);
    let order: Vec<String> = std::iter::from_fn(|| {
        let k = q.try_get()?;
        q.done(&k);
        Some(k)
    })
    .collect();
    // "c" is handed out first and only once: its stale low entry is skipped.
    assert_eq!(order, ["c", "a", "b"]);
    assert!(q.is_empty());
}

#[tokio::test]
async fn a_key_added_while_processing_keeps_the_higher_priority() {
    let q = queue(no_bucket());
    q.add_with_priority("a".into(), Priority::Low);
    q.add_with_priority("b".into(), Priority::Low);
    let a = q.try_get().unwrap();
    assert_eq!(a, "a");
    q.add_with_priority("a".into(), Priority::Low);
    q.add("a".into());
    q.done(&a);
    // Requeued by `done` at normal priority: ahead of "b".
    assert_eq!(q.try_get().as_deref(), Some("a"));
    q.done(&a);
    assert_eq!(q.try_get().as_deref(), Some("b"));
    assert!(q.try_get().is_none());
    assert_eq!(q.len(), 0);
}

/// A queue whose keys rank as a table the test changes says (0 when absent), as a ranker reads a
/// cache.
fn ranked_queue() -> (WorkQueue<String>, Arc<Mutex<HashMap<String, i32>>>) {
    let q = queue(no_bucket());
    let ranks: Arc<Mutex<HashMap<String, i32>>> = Arc::default();
    let table = ranks.clone();
    assert!(q.set_ranker(Arc::new(move |k: &String| {
        table.lock().get(k).copied().unwrap_or_default()
    })));
    assert!(
        !q.set_ranker(Arc::new(|_: &String| 1)),
        "one ranker per queue"
    );
    (q, ranks)
}

fn drain(q: &WorkQueue<String>) -> Vec<String> {
    std::iter::from_fn(|| {
        let k = q.try_get()?;
        q.done(&k);
        Some(k)
    })
    .collect()
}

#[tokio::test]
async fn higher_ranks_go_first_and_each_rank_is_fifo() {
    let (q, ranks) = ranked_queue();
    ranks.lock().extend([
        ("high-1".to_owned(), 10),
        ("high-2".to_owned(), 10),
        ("top".to_owned(), 100),
        ("below".to_owned(), -5),
    ]);
    q.add("zero-1".into());
    q.add("below".into());
    q.add("high-1".into());
    q.add_with_priority("replay".into(), Priority::Low);
    q.add("zero-2".into());
    q.add("high-2".into());
    q.add_with_priority("top".into(), Priority::Low);
    assert_eq!(q.len(), 7);
    // A replayed key of a higher rank goes before live keys of lower ranks; within rank 0 live
    // keys go before replayed ones; negative ranks come last.
    assert_eq!(
        drain(&q),
        [
            "top", "high-1", "high-2", "zero-1", "zero-2", "replay", "below"
        ]
    );
    assert!(q.is_empty());
}

#[tokio::test]
async fn a_key_added_again_with_another_rank_moves_once() {
    let (q, ranks) = ranked_queue();
    for k in ["a", "b", "c"] {
        q.add(k.into());
    }
    ranks.lock().insert("c".into(), 5);
    q.add("c".into());
    ranks.lock().insert("a".into(), -1);
    q.add("a".into());
    assert_eq!(q.len(), 3);
    // Each key once: the stale entries of "a" and "c" at rank 0 are skipped.
    assert_eq!(drain(&q), ["c", "b", "a"]);
    assert!(q.is_empty());
}

#[tokio::test]
async fn delayed_and_requeued_keys_keep_their_rank() {
    let (q, ranks) = ranked_queue();
    ranks.lock().insert("late".into(), 7);
    q.add("first".into());
    let first = q.try_get().unwrap();
    // Added while running: queued again by `done`, at its rank.
    ranks.lock().insert("first".into(), 3);
    q.add("first".into());
    q.add_after("late".into(), Duration::from_millis(5));
    q.add("plain".into());
    q.done(&first);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(drain(&q), ["late", "first", "plain"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_worker_takes_the_best_of_keys_added_at_once() {
    let (q, ranks) = ranked_queue();
    ranks.lock().insert("top".into(), 9);
    let worker = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    // The worker is parked in `get` before the keys come.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let keys = (0..2000).map(|i| (format!("k{i:04}"), Priority::Low));
    q.add_all_with_priority(keys.chain([("top".to_owned(), Priority::Low)]));
    // One key at a time, the parked worker would wake at the first and take it.
    assert_eq!(worker.await.unwrap().as_deref(), Some("top"));
    assert_eq!(q.len(), 2000);
}
