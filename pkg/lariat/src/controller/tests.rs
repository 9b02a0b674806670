//! Controller logic tests that need no API server: keys are enqueued directly, the cache's watch
//! points at a closed port and simply keeps backing off.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::cluster::{Cluster, ClusterOptions};
use crate::queue::RateLimiterOptions;

fn cluster(name: &str, workers: WorkerOptions) -> Cluster {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let mut opts = ClusterOptions::default();
    opts.controllers.workers = workers;
    opts.controllers.rate_limiter = RateLimiterOptions {
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_secs(5),
        bucket: None,
    };
    Cluster::new(name, config, opts, &CancellationToken::new()).unwrap()
}

#[tokio::test]
async fn for_kind_is_deferred_and_shared() {
    let c = cluster("unit-deferred", WorkerOptions::default());
    let a = c.controllers().for_kind::<ConfigMap>().unwrap();
    let b = c.controllers().for_kind::<ConfigMap>().unwrap();
    assert!(!a.is_initialized());
    assert!(
        c.caches().started().is_empty(),
        "for_kind must not open a watch"
    );
    a.enqueue(Some("ns"), "x");
    assert!(b.is_initialized(), "both handles are the same controller");
    assert_eq!(c.caches().started().len(), 1);
    c.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn keys_enqueued_before_start_are_processed_after() {
    let c = cluster("unit-buffered", WorkerOptions::default());
    let ctrl = c.controllers().for_kind::<ConfigMap>().unwrap();
    let seen = Arc::new(Mutex::new(vec![]));
    let s = seen.clone();
    ctrl.register_handler(
        "rec",
        CancellationToken::new(),
        move |k: crate::ObjectKey, o: Option<Arc<ConfigMap>>| {
            let s = s.clone();
            async move {
                s.lock().push((k.to_string(), o.is_none()));
                HandlerResult::Success
            }
        },
    );
    ctrl.enqueue(Some("ns"), "a");
    ctrl.enqueue_key("ns/b".into());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(seen.lock().is_empty(), "workers must not run before start");
    c.controllers().start();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut got = seen.lock().clone();
    got.sort();
    assert_eq!(
        got,
        vec![("ns/a".to_string(), true), ("ns/b".to_string(), true)]
    );
    c.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_requeues_with_growing_delay_ignore_does_not() {
    let c = cluster("unit-errors", WorkerOptions::default());
    c.controllers().start();
    let ctrl = c.controllers().for_kind::<ConfigMap>().unwrap();
    let times: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let t = times.clone();
    ctrl.register_handler(
        "fail",
        CancellationToken::new(),
        move |k: crate::ObjectKey, _o: Option<Arc<ConfigMap>>| {
            let t = t.clone();
            async move {
                t.lock().push((k.to_string(), Instant::now()));
                if k.name() == "ignored" {
                    HandlerResult::ignore("permanent")
                } else {
                    HandlerResult::error("transient")
                }
            }
        },
    );
    ctrl.enqueue(Some("ns"), "failing");
    ctrl.enqueue(Some("ns"), "ignored");
    tokio::time::sleep(Duration::from_millis(900)).await;
    let times = times.lock().clone();
    let ignored = times.iter().filter(|(k, _)| k == "ns/ignored").count();
    assert_eq!(ignored, 1, "ignored errors are not requeued");
    let failing: Vec<Instant> = times
        .iter()
        .filter(|(k, _)| k == "ns/failing")
        .map(|(_, t)| *t)
        .collect();
    assert!(
        failing.len() >= 4,
        "expected several retries, got {}",
        failing.len()
    );
    let gaps: Vec<Duration> = failing.windows(2).map(|w| w[1] - w[0]).collect();
    // 20ms, 40ms, 80ms, ...
    for (i, g) in gaps.iter().enumerate().take(4) {
        let expect = Duration::from_millis(20 << i);
        assert!(
            *g >= expect,
            "retry {i} after {g:?}, expected at least {expect:?}"
        );
    }
    c.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_after_fires_after_delay_and_handlers_chain() {
    let c = cluster("unit-requeue", WorkerOptions::default());
    c.controllers().start();
    let ctrl = c.controllers().for_kind::<ConfigMap>().unwrap();
    let runs: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let seen_updated = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    ctrl.register_handler(
        "first",
        CancellationToken::new(),
        move |_k, _o: Option<Arc<ConfigMap>>| {
            let r = r.clone();
            async move {
                let n = {
                    let mut r = r.lock();
                    r.push(Instant::now());
                    r.len()
                };
                if n == 1 {
                    HandlerResult::RequeueAfter(Duration::from_millis(300))
                } else {
                    HandlerResult::Updated(Arc::new(ConfigMap::default()))
                }
            }
        },
    );
    let s = seen_updated.clone();
    ctrl.register_handler(
        "second",
        CancellationToken::new(),
        move |_k, o: Option<Arc<ConfigMap>>| {
            let s = s.clone();
            async move {
                if o.is_some() {
                    s.fetch_add(1, Ordering::SeqCst);
                }
                HandlerResult::Success
            }
        },
    );
    ctrl.enqueue(None, "x");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let runs = runs.lock().clone();
    assert_eq!(runs.len(), 2, "one requeue after the delay");
    let gap = runs[1] - runs[0];
    assert!(
        gap >= Duration::from_millis(300) && gap < Duration::from_secs(1),
        "{gap:?}"
    );
    assert_eq!(
        seen_updated.load(Ordering::SeqCst),
        1,
        "second handler sees the first one's object"
    );
    c.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn removed_handler_is_not_called() {
    let c = cluster("unit-remove", WorkerOptions::default());
    c.controllers().start();
    let ctrl = c.controllers().for_kind::<ConfigMap>().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let cancel = CancellationToken::new();
    let n = calls.clone();
    ctrl.register_handler(
        "temp",
        cancel.clone(),
        move |_k, _o: Option<Arc<ConfigMap>>| {
            let n = n.clone();
            async move {
                n.fetch_add(1, Ordering::SeqCst);
                HandlerResult::Success
            }
        },
    );
    ctrl.enqueue(None, "a");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    cancel.cancel();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(ctrl.handler_names().is_empty());
    ctrl.enqueue(None, "b");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    c.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_group_kind_worker_limits_hold() {
    let workers = WorkerOptions {
        default_workers: 7,
        ..Default::default()
    }
    .with("ConfigMap", 3);
    let c = cluster("unit-workers", workers);
    c.controllers().start();
    let cms = c.controllers().for_kind::<ConfigMap>().unwrap();
    let secrets = c
        .controllers()
        .for_kind::<k8s_openapi::api::core::v1::Secret>()
        .unwrap();
    assert_eq!(cms.workers(), 3);
    assert_eq!(secrets.workers(), 7);
    for (ctrl_workers, limit) in [(cms.workers(), 3usize), (secrets.workers(), 7)] {
        assert_eq!(ctrl_workers, limit);
    }
    async fn measure<K: crate::cache::CacheObject>(ctrl: &SharedController<K>) -> usize {
        let active = Arc::new(AtomicUsize::new(0));
        let max = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let (a, m, d) = (active.clone(), max.clone(), done.clone());
        ctrl.register_handler(
            "measure",
            CancellationToken::new(),
            move |_k, _o: Option<Arc<K>>| {
                let (a, m, d) = (a.clone(), m.clone(), d.clone());
                async move {
                    let now = a.fetch_add(1, Ordering::SeqCst) + 1;
                    m.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    a.fetch_sub(1, Ordering::SeqCst);
                    d.fetch_add(1, Ordering::SeqCst);
                    HandlerResult::Success
                }
            },
        );
        for i in 0..60 {
            ctrl.enqueue(Some("ns"), &format!("k{i}"));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while done.load(Ordering::SeqCst) < 60 {
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        max.load(Ordering::SeqCst)
    }
    let (m1, m2) = tokio::join!(measure(&cms), measure(&secrets));
    assert_eq!(m1, 3, "ConfigMap limited to 3 concurrent handlers");
    assert_eq!(m2, 7, "default of 7 for Secret");
    c.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn graceful_shutdown_waits_for_running_handler() {
    let c = cluster("unit-shutdown", WorkerOptions::default());
    c.controllers().start();
    let ctrl = c.controllers().for_kind::<ConfigMap>().unwrap();
    let finished = Arc::new(AtomicUsize::new(0));
    let f = finished.clone();
    ctrl.register_handler(
        "slow",
        CancellationToken::new(),
        move |_k, _o: Option<Arc<ConfigMap>>| {
            let f = f.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                f.fetch_add(1, Ordering::SeqCst);
                HandlerResult::Success
            }
        },
    );
    ctrl.enqueue(None, "a");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(c.controllers().shutdown(Duration::from_secs(2)).await);
    assert_eq!(
        finished.load(Ordering::SeqCst),
        1,
        "running handler finished before shutdown returned"
    );
    assert!(c.stop(Duration::from_secs(2)).await);
}

#[tokio::test]
async fn wait_for_sync_times_out_naming_kind_and_cause() {
    let c = cluster("unit-sync-timeout", WorkerOptions::default());
    let cache = c.caches().for_kind::<ConfigMap>().unwrap();
    let err = cache
        .wait_for_sync(Duration::from_millis(1500))
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("v1, Kind=ConfigMap"), "{msg}");
    assert!(msg.contains("unit-sync-timeout"), "{msg}");
    assert!(
        msg.contains("last error"),
        "the watch error is reported: {msg}"
    );
    c.stop(Duration::from_secs(5)).await;
    assert!(cache.wait_for_sync(Duration::from_secs(1)).await.is_err());
}
