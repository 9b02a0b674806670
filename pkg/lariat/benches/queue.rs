//! Work-queue throughput: enqueue + dequeue + done with deduplication, on one thread and with
//! several async workers.
//!
//! Run: `cargo bench -p lariat --bench queue`
// A benchmark harness: a failed setup should stop it at once; criterion_group! makes an
// undocumented pub fn.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lariat::ObjectKey;
use lariat::metrics::QueueMetrics;
use lariat::queue::{RateLimiterOptions, WorkQueue};

const KEYS: usize = 10_000;

fn keys() -> Vec<ObjectKey> {
    (0..KEYS)
        .map(|i| ObjectKey::new(Some("default"), &format!("object-{i}")))
        .collect()
}

fn queue() -> WorkQueue<ObjectKey> {
    WorkQueue::new(
        "bench",
        RateLimiterOptions::default().build(),
        QueueMetrics::unregistered().unwrap(),
    )
}

fn single_thread(c: &mut Criterion) {
    let keys = keys();
    let mut g = c.benchmark_group("queue_single_thread");
    g.throughput(Throughput::Elements(KEYS as u64));
    // every key added twice (the second add is deduplicated), then taken and finished once
    g.bench_function(BenchmarkId::new("add_x2_get_done", KEYS), |b| {
        let q = queue();
        b.iter(|| {
            for k in &keys {
                q.add(k.clone());
            }
            for k in &keys {
                q.add(k.clone());
            }
            while let Some(k) = q.try_get() {
                q.done(&k);
            }
        });
    });
    g.finish();
}

fn multi_worker(c: &mut Criterion) {
    let keys = keys();
    let mut g = c.benchmark_group("queue_async_workers");
    g.throughput(Throughput::Elements(KEYS as u64));
    g.measurement_time(Duration::from_secs(8));
    for (threads, workers) in [(1usize, 1usize), (1, 8), (2, 8)] {
        let rt = if threads == 1 {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .enable_all()
                .build()
                .unwrap()
        };
        g.bench_function(
            BenchmarkId::new(format!("threads{threads}_workers{workers}"), KEYS),
            |b| {
                b.iter(|| {
                    rt.block_on(async {
                        let q = queue();
                        let mut hs = vec![];
                        for _ in 0..workers {
                            let q = q.clone();
                            hs.push(tokio::spawn(async move {
                                let mut n = 0usize;
                                while let Some(k) = q.get().await {
                                    q.done(&k);
                                    n += 1;
                                }
                                n
                            }));
                        }
                        for k in &keys {
                            q.add(k.clone());
                            q.add(k.clone());
                        }
                        while !(q.is_empty() && q.processing() == 0) {
                            tokio::task::yield_now().await;
                        }
                        q.shut_down();
                        let mut total = 0;
                        for h in hs {
                            total += h.await.unwrap();
                        }
                        // a second add that lands while the key runs is processed once more
                        assert!((KEYS..=2 * KEYS).contains(&total));
                    });
                });
            },
        );
    }
    g.finish();
}

criterion_group!(benches, single_thread, multi_worker);
criterion_main!(benches);
