//! lariat's multi-cluster registry against real member API servers: removing a member stops its
//! watches and drops its metric series; an API server restarted mid-watch is recovered from.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use lariat::{ClusterRegistry, HandlerResult, ObjectKey};
use serde_json::json;
use support::*;
use testenv::{EnvOptions, TestEnv};
use tokio_util::sync::CancellationToken;

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        ..Default::default()
    })
}

fn managed_cm(ns: &str, name: &str, v: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": name, "labels": {MANAGED_LABEL: "true"}},
        "data": {"v": v}
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_member_stops_its_watches_and_drops_its_series() {
    let member = &env().members()[0];
    let admin = member.client().await;
    let ns = "it-removal";
    namespace(&admin, ns).await;
    let baseline = open_watches(&admin, "", "configmaps").await;

    let registry = ClusterRegistry::new(CancellationToken::new());
    registry.start();
    let cluster = registry
        .add(
            "it-member-removal",
            member.kube_config().await.unwrap(),
            member_options(),
        )
        .unwrap();
    let ctrl = cluster.controllers().for_kind::<ConfigMap>().unwrap();
    let seen: Arc<parking_lot_free::Mutex<Vec<String>>> = Arc::default();
    let s = seen.clone();
    ctrl.register_handler(
        "seen",
        CancellationToken::new(),
        move |k: ObjectKey, _o: Option<Arc<ConfigMap>>| {
            let s = s.clone();
            async move {
                s.lock().push(k.to_string());
                HandlerResult::Success
            }
        },
    );
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
    cms.create(&PostParams::default(), &managed_cm(ns, "one", "1"))
        .await
        .unwrap();
    eventually(
        "handler saw the member object",
        Duration::from_secs(20),
        || {
            let s = seen.clone();
            async move { s.lock().iter().any(|k| k == "it-removal/one") }
        },
    )
    .await;
    // The handler may have seen the object in the initial list, before the watch request opened.
    eventually(
        "one watch is open on the member",
        Duration::from_secs(10),
        || {
            let admin = admin.clone();
            async move { open_watches(&admin, "", "configmaps").await == baseline + 1.0 }
        },
    )
    .await;
    let store = ctrl.cache().peek_store().clone();
    assert_eq!(
        store.len(),
        1,
        "only managed objects are cached on members ({MANAGED_SELECTOR})"
    );
    let series = framework_series("it-member-removal");
    for name in [
        "rest_client_requests_total",
        "workqueue_adds_total",
        "controller_runtime_reconcile_total",
        "lariat_cached_objects",
    ] {
        assert!(
            series.iter().any(|s| s.starts_with(name)),
            "missing {name} in {series:?}"
        );
    }

    assert!(
        registry
            .remove("it-member-removal", Duration::from_secs(10))
            .await
            .unwrap()
    );
    assert!(registry.get("it-member-removal").is_none());
    eventually(
        "the member's watch is closed",
        Duration::from_secs(10),
        || {
            let admin = admin.clone();
            async move { open_watches(&admin, "", "configmaps").await == baseline }
        },
    )
    .await;
    assert!(
        framework_series("it-member-removal").is_empty(),
        "metric series dropped"
    );
    assert!(store.is_empty(), "cached objects freed");
    // no further requests: nothing reacts to new objects, and no series reappears
    let handled = seen.lock().len();
    cms.create(&PostParams::default(), &managed_cm(ns, "two", "2"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(seen.lock().len(), handled);
    assert_eq!(rest_requests("it-member-removal"), 0);
    assert!(framework_series("it-member-removal").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_restart_mid_watch_recovers_and_handlers_see_final_state() {
    let member = &env().members()[1];
    let admin = member.client().await;
    let ns = "it-restart";
    namespace(&admin, ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
    for name in ["keep", "change", "remove"] {
        cms.create(&PostParams::default(), &managed_cm(ns, name, "before"))
            .await
            .unwrap();
    }

    let registry = ClusterRegistry::new(CancellationToken::new());
    registry.start();
    let cluster = registry
        .add(
            "it-member-restart",
            member.kube_config().await.unwrap(),
            member_options(),
        )
        .unwrap();
    let ctrl = cluster.controllers().for_kind::<ConfigMap>().unwrap();
    // last state each key was handled with: Some(v) or None (deleted)
    let state: Arc<parking_lot_free::Mutex<BTreeMap<String, Option<String>>>> = Arc::default();
    let s = state.clone();
    ctrl.register_handler(
        "state",
        CancellationToken::new(),
        move |k: ObjectKey, o: Option<Arc<ConfigMap>>| {
            let s = s.clone();
            async move {
                let v = o.and_then(|o| o.data.as_ref().and_then(|d| d.get("v").cloned()));
                s.lock().insert(k.name().to_string(), v);
                HandlerResult::Success
            }
        },
    );
    eventually("initial state handled", Duration::from_secs(20), || {
        let s = state.clone();
        async move { s.lock().len() == 3 }
    })
    .await;

    member.stop();
    // the watch breaks and backs off while the server is down
    tokio::time::sleep(Duration::from_secs(3)).await;
    member.start().await.unwrap();
    let admin = member.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
    let patch = json!({"data": {"v": "after"}});
    cms.patch("change", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    cms.delete("remove", &DeleteParams::default())
        .await
        .unwrap();
    cms.create(&PostParams::default(), &managed_cm(ns, "new", "after"))
        .await
        .unwrap();

    let want: BTreeMap<String, Option<String>> = [
        ("change", Some("after")),
        ("keep", Some("before")),
        ("new", Some("after")),
        ("remove", None),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
    .collect();
    eventually(
        "handlers see the final state after the restart",
        Duration::from_secs(60),
        || {
            let s = state.clone();
            let want = want.clone();
            async move { *s.lock() == want }
        },
    )
    .await;
    let store = ctrl.cache().peek_store();
    assert_eq!(store.len(), 3);
    assert!(store.get_named(Some(ns), "remove").is_none());
    assert_eq!(
        store
            .get_named(Some(ns), "change")
            .unwrap()
            .data
            .as_ref()
            .unwrap()["v"],
        "after"
    );
    registry.shutdown(Duration::from_secs(10)).await;
}
