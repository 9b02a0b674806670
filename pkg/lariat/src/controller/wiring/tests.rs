//! The wiring's order of steps, its cancellation and its timeout, without an API server: the
//! caches' watches point at a closed port, so they never sync.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::cluster::{Cluster, ClusterOptions};

fn cluster(name: &str) -> Cluster {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    Cluster::new(
        name,
        config,
        ClusterOptions::default(),
        &CancellationToken::new(),
    )
    .unwrap()
}

async fn ok(_: (), _: ObjectKey, _: Option<Arc<ConfigMap>>) -> HandlerResult<ConfigMap> {
    HandlerResult::Success
}

#[tokio::test]
async fn without_steps_it_reports_synced_and_serves_until_cancelled() {
    let cancel = CancellationToken::new();
    let reported = Arc::new(AtomicUsize::new(0));
    let r = reported.clone();
    let run = Wiring::new("idle", (), &cancel, Duration::from_secs(1))
        .on_synced(move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .run();
    let served = tokio::spawn(run);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(reported.load(Ordering::SeqCst), 1);
    assert!(!served.is_finished(), "serves until cancelled");
    cancel.cancel();
    served.await.unwrap().unwrap();
    assert_eq!(reported.load(Ordering::SeqCst), 1, "reported once");
}

#[tokio::test]
async fn steps_run_in_order_and_stop_at_a_wait_that_is_cancelled() {
    let c = cluster("unit-wiring-order");
    let secrets = c.controllers().for_kind::<Secret>().unwrap();
    let configmaps = c.controllers().for_kind::<ConfigMap>().unwrap();
    let cancel = CancellationToken::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (before, after) = (seen.clone(), seen.clone());
    let reported = Arc::new(AtomicUsize::new(0));
    let r = reported.clone();
    let run = Wiring::new("ordered", (), &cancel, Duration::from_secs(30))
        .then(move |()| before.lock().push("before"))
        .handles(&configmaps, "early", ok)
        .waits_for(&secrets) // never syncs: the closed port
        .then(move |()| after.lock().push("after"))
        .handles(&configmaps, "late", ok)
        .on_synced(move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .run();
    let running = tokio::spawn(run);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(*seen.lock(), vec!["before"]);
    assert_eq!(configmaps.handler_names(), vec!["early"]);
    cancel.cancel();
    running
        .await
        .unwrap()
        .expect("cancelled before synced is Ok");
    assert_eq!(*seen.lock(), vec!["before"], "nothing after the wait ran");
    assert_eq!(
        reported.load(Ordering::SeqCst),
        0,
        "not synced: not reported"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        configmaps.handler_names().is_empty(),
        "handlers removed on cancel"
    );
    c.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_handled_cache_that_does_not_sync_in_time_is_an_error_naming_it() {
    let c = cluster("unit-wiring-timeout");
    let configmaps = c.controllers().for_kind::<ConfigMap>().unwrap();
    let cancel = CancellationToken::new();
    let reported = Arc::new(AtomicUsize::new(0));
    let r = reported.clone();
    let err = Wiring::new("slow", (), &cancel, Duration::from_millis(200))
        .handles(&configmaps, "h", ok)
        .on_synced(move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .run()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ConfigMap"), "{err}");
    assert_eq!(
        configmaps.handler_names(),
        vec!["h"],
        "registered before the wait"
    );
    assert_eq!(reported.load(Ordering::SeqCst), 0);
    cancel.cancel();
    c.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn cancelled_by_replaces_the_token() {
    let outer = CancellationToken::new();
    let own = CancellationToken::new();
    let run = tokio::spawn(
        Wiring::new("own token", (), &outer, Duration::from_secs(1))
            .cancelled_by(&own)
            .run(),
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!run.is_finished());
    own.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn resync_is_called_once_synced_then_every_period() {
    let cancel = CancellationToken::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let n = calls.clone();
    let served = tokio::spawn(
        Wiring::new("resyncing", (), &cancel, Duration::from_secs(1))
            .resync_every(Duration::from_secs(15), move |()| {
                n.fetch_add(1, Ordering::SeqCst);
            })
            .run(),
    );
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "at once");
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 3, "then every period");
    cancel.cancel();
    served.await.unwrap().unwrap();
}

#[test]
fn typed_parsing_names_the_object_that_does_not_parse() {
    let obj: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"namespace": "ns", "name": "cm"},
        "data": {"k": 3}
    }))
    .unwrap();
    let e = parse::<ConfigMap>(Some(Arc::new(obj))).unwrap_err();
    assert!(e.starts_with("ConfigMap ns/cm: "), "{e}");
    assert!(parse::<ConfigMap>(None).unwrap().is_none());
}
