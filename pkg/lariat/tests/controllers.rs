//! lariat against a real API server: shared watches, lazy start, deletes, late and removed
//! handlers, error/ignore/requeue-after results, per-key exclusivity and per-GroupKind workers.
// test-runner: alone. Requeue gaps are checked against wall-clock windows (800 ms to 2.5 s): a
// second test binary beside it on 2 cores stretches them.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use lariat::{
    CacheScope, ClusterOptions, HandlerResult, ObjectKey, RateLimiterOptions, WorkerOptions,
};
use serde_json::json;
use support::*;
use testenv::{EnvOptions, TestEnv};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions::default())
}

async fn host_config() -> kube::Config {
    env().host().kube_config().await.unwrap()
}

fn cm(ns: &str, name: &str, data: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": name},
        "data": {"v": data}
    }))
    .unwrap()
}

fn scoped(ns: &str) -> CacheScope {
    CacheScope {
        namespace: Some(ns.to_string()),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_controllers_on_one_kind_share_one_watch_and_new_crds_are_discovered() {
    let client = env().host().client().await;
    let c = cluster(
        "it-shared-watch",
        host_config().await,
        ClusterOptions::default(),
    );
    let gvk = kube::api::GroupVersionKind::gvk("shared.lariat.test", "v1", "Widget");
    // unknown before the CRD exists; found afterwards without restarting anything
    assert!(c.clients().resolve(&gvk).await.is_err());
    crd(&client, "shared.lariat.test", "Widget").await;
    eventually("kind discovered", Duration::from_secs(20), || {
        let c = c.clone();
        let gvk = gvk.clone();
        async move { c.clients().resolve(&gvk).await.is_ok() }
    })
    .await;
    namespace(&client, "it-shared-watch").await;

    c.controllers().start();
    let seen_a = Arc::new(AtomicUsize::new(0));
    let seen_b = Arc::new(AtomicUsize::new(0));
    // "controller A" and "controller B" each look the kind up and register a handler
    for seen in [seen_a.clone(), seen_b.clone()] {
        let ctrl = c.controllers().for_gvk(&gvk).unwrap();
        ctrl.register_handler(
            "h",
            CancellationToken::new(),
            move |_k, o: Option<Arc<DynamicObject>>| {
                let seen = seen.clone();
                async move {
                    if o.is_some() {
                        seen.fetch_add(1, Ordering::SeqCst);
                    }
                    HandlerResult::Success
                }
            },
        );
    }
    // a third consumer reads the store of the same kind
    let store = c.caches().for_gvk(&gvk).unwrap().store();
    c.caches()
        .wait_for_sync(Duration::from_secs(30))
        .await
        .unwrap();

    let (ar, _) = c.clients().resolve(&gvk).await.unwrap();
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "it-shared-watch", &ar);
    let w: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "shared.lariat.test/v1", "kind": "Widget",
        "metadata": {"name": "w1"}, "spec": {"size": 3}
    }))
    .unwrap();
    widgets.create(&PostParams::default(), &w).await.unwrap();
    eventually("both handlers and the store see the widget", Duration::from_secs(20), || {
        let (a, b, s) = (seen_a.clone(), seen_b.clone(), store.clone());
        async move { a.load(Ordering::SeqCst) >= 1 && b.load(Ordering::SeqCst) >= 1 && s.len() == 1 }
    })
    .await;

    assert_eq!(
        open_watches(&client, "shared.lariat.test", "widgets").await,
        1.0,
        "exactly one WATCH"
    );
    assert_eq!(
        lists(&client, "shared.lariat.test", "widgets").await,
        1.0,
        "exactly one LIST"
    );
    assert_eq!(c.caches().started().len(), 1);
    // our own client metrics counted the traffic for this cluster
    assert!(rest_requests("it-shared-watch") >= 3);
    c.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_only_looked_up_opens_no_watch() {
    let client = env().host().client().await;
    let gvk = crd(&client, "lookup.lariat.test", "Gadget").await;
    let c = cluster("it-lookup", host_config().await, ClusterOptions::default());
    c.controllers().start();
    let ctrl = c.controllers().for_gvk(&gvk).unwrap();
    let _typed = c.controllers().for_kind::<ConfigMap>().unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!ctrl.is_initialized());
    assert!(c.caches().started().is_empty());
    assert_eq!(
        open_watches(&client, "lookup.lariat.test", "gadgets").await,
        0.0
    );
    assert_eq!(lists(&client, "lookup.lariat.test", "gadgets").await, 0.0);
    c.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_deliver_none_late_handlers_see_everything_removed_handlers_stop() {
    let client = env().host().client().await;
    let ns = "it-handlers";
    namespace(&client, ns).await;
    let c = cluster(
        "it-handlers",
        host_config().await,
        ClusterOptions::default(),
    );
    c.controllers().start();
    let ctrl = c
        .controllers()
        .for_kind_in::<ConfigMap>(scoped(ns))
        .unwrap();
    let log: CallLog = Arc::default();
    let record = |name: &'static str, log: CallLog| {
        move |k: ObjectKey, o: Option<Arc<ConfigMap>>| {
            let log = log.clone();
            async move {
                log.lock()
                    .push((name.to_string(), k.to_string(), o.is_some()));
                HandlerResult::Success
            }
        }
    };
    ctrl.register_handler(
        "early",
        CancellationToken::new(),
        record("early", log.clone()),
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for i in 0..3 {
        cms.create(&PostParams::default(), &cm(ns, &format!("cm{i}"), "x"))
            .await
            .unwrap();
    }
    let saw = |log: &CallLog, handler: &str, key: &str, present: bool| {
        log.lock()
            .iter()
            .any(|(h, k, p)| h == handler && k == key && *p == present)
    };
    eventually(
        "early handler saw 3 objects",
        Duration::from_secs(20),
        || {
            let log = log.clone();
            async move { (0..3).all(|i| saw(&log, "early", &format!("{ns}/cm{i}"), true)) }
        },
    )
    .await;

    // late registration replays every key in the store
    let late_cancel = CancellationToken::new();
    ctrl.register_handler("late", late_cancel.clone(), record("late", log.clone()));
    eventually(
        "late handler saw all 3 existing objects",
        Duration::from_secs(20),
        || {
            let log = log.clone();
            async move { (0..3).all(|i| saw(&log, "late", &format!("{ns}/cm{i}"), true)) }
        },
    )
    .await;

    // delete → None for every handler
    cms.delete("cm1", &DeleteParams::default()).await.unwrap();
    eventually(
        "both handlers saw the delete as None",
        Duration::from_secs(20),
        || {
            let log = log.clone();
            async move {
                saw(&log, "early", &format!("{ns}/cm1"), false)
                    && saw(&log, "late", &format!("{ns}/cm1"), false)
            }
        },
    )
    .await;

    // removed handler: no more calls; the remaining one proves events still flow
    late_cancel.cancel();
    eventually("handler removed", Duration::from_secs(5), || {
        let ctrl = ctrl.clone();
        async move { ctrl.handler_names() == vec!["early".to_string()] }
    })
    .await;
    let late_calls = log.lock().iter().filter(|(h, _, _)| h == "late").count();
    cms.create(&PostParams::default(), &cm(ns, "after", "x"))
        .await
        .unwrap();
    eventually(
        "early handler saw the new object",
        Duration::from_secs(20),
        || {
            let log = log.clone();
            async move { saw(&log, "early", &format!("{ns}/after"), true) }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        log.lock().iter().filter(|(h, _, _)| h == "late").count(),
        late_calls
    );
    c.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_backs_off_ignore_does_not_requeue_requeue_after_fires() {
    let client = env().host().client().await;
    let ns = "it-results";
    namespace(&client, ns).await;
    let mut opts = ClusterOptions::default();
    opts.controllers.rate_limiter = RateLimiterOptions {
        base_delay: Duration::from_millis(50),
        max_delay: Duration::from_secs(10),
        bucket: None,
    };
    let c = cluster("it-results", host_config().await, opts);
    c.controllers().start();
    let ctrl = c
        .controllers()
        .for_kind_in::<ConfigMap>(scoped(ns))
        .unwrap();
    let runs: Arc<parking_lot_free::Mutex<HashMap<String, Vec<Instant>>>> = Arc::default();
    let r = runs.clone();
    ctrl.register_handler(
        "results",
        CancellationToken::new(),
        move |k: ObjectKey, o: Option<Arc<ConfigMap>>| {
            let r = r.clone();
            async move {
                let n = {
                    let mut r = r.lock();
                    let v = r.entry(k.name().to_string()).or_default();
                    v.push(Instant::now());
                    v.len()
                };
                if o.is_none() {
                    return HandlerResult::Success;
                }
                match k.name() {
                    "fail" if n <= 5 => HandlerResult::error(format!("transient failure {n}")),
                    "ignore" => HandlerResult::ignore("cannot be fixed by retrying"),
                    "later" if n == 1 => HandlerResult::RequeueAfter(Duration::from_millis(800)),
                    "panic" if n == 1 => panic!("a handler bug"),
                    _ => HandlerResult::Success,
                }
            }
        },
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for name in ["fail", "ignore", "later", "panic"] {
        cms.create(&PostParams::default(), &cm(ns, name, "x"))
            .await
            .unwrap();
    }
    eventually(
        "fail retried until it succeeded",
        Duration::from_secs(20),
        || {
            let runs = runs.clone();
            async move { runs.lock().get("fail").is_some_and(|v| v.len() >= 6) }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let runs = runs.lock().clone();
    let fail = &runs["fail"];
    assert_eq!(fail.len(), 6, "stops after the first success");
    let gaps: Vec<Duration> = fail.windows(2).map(|w| w[1] - w[0]).collect();
    for (i, g) in gaps.iter().enumerate() {
        let expect = Duration::from_millis(50 << i);
        assert!(
            *g >= expect,
            "retry {i} came after {g:?}, expected ≥ {expect:?} ({gaps:?})"
        );
    }
    assert_eq!(runs["ignore"].len(), 1, "ignored errors are not retried");
    let later = &runs["later"];
    assert_eq!(later.len(), 2);
    let gap = later[1] - later[0];
    assert!(
        gap >= Duration::from_millis(800) && gap < Duration::from_millis(2500),
        "requeue-after fired after {gap:?}"
    );

    let panic = &runs["panic"];
    assert_eq!(
        panic.len(),
        2,
        "a panicking handler is retried like a failing one"
    );

    // controller-runtime's series were counted, the panic among them
    assert_eq!(
        counter_sum("controller_runtime_reconcile_panics_total", "it-results"),
        1.0
    );
    let series = framework_series("it-results");
    assert!(series.iter().any(
        |s| s.starts_with("controller_runtime_reconcile_total{") && s.contains("result=error")
    ));
    assert!(
        series
            .iter()
            .any(|s| s.starts_with("workqueue_retries_total{"))
    );
    c.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_runs_twice_at_once_under_bursts_and_final_state_is_seen() {
    let client = env().host().client().await;
    let ns = "it-exclusive";
    namespace(&client, ns).await;
    let mut opts = ClusterOptions::default();
    opts.controllers.workers = WorkerOptions {
        default_workers: 16,
        ..Default::default()
    };
    let c = cluster("it-exclusive", host_config().await, opts);
    c.controllers().start();
    let ctrl = c
        .controllers()
        .for_kind_in::<ConfigMap>(scoped(ns))
        .unwrap();
    let running: Arc<parking_lot_free::Mutex<HashSet<String>>> = Arc::default();
    let violations = Arc::new(AtomicUsize::new(0));
    let last: Arc<parking_lot_free::Mutex<BTreeMap<String, String>>> = Arc::default();
    let (run, viol, lst) = (running.clone(), violations.clone(), last.clone());
    ctrl.register_handler(
        "exclusive",
        CancellationToken::new(),
        move |k: ObjectKey, o: Option<Arc<ConfigMap>>| {
            let (run, viol, lst) = (run.clone(), viol.clone(), lst.clone());
            async move {
                if !run.lock().insert(k.to_string()) {
                    viol.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(fastrand_ms(k.name()))).await;
                if let Some(v) = o.and_then(|o| o.data.as_ref().and_then(|d| d.get("v").cloned())) {
                    lst.lock().insert(k.name().to_string(), v);
                }
                run.lock().remove(k.as_str());
                HandlerResult::Success
            }
        },
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let keys = 6;
    for i in 0..keys {
        cms.create(&PostParams::default(), &cm(ns, &format!("k{i}"), "0"))
            .await
            .unwrap();
    }
    let rounds = 25;
    let mut writers = vec![];
    for i in 0..keys {
        let cms = cms.clone();
        writers.push(tokio::spawn(async move {
            for r in 1..=rounds {
                let patch = json!({"data": {"v": r.to_string()}});
                cms.patch(
                    &format!("k{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .unwrap();
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    eventually(
        "every key's final value handled",
        Duration::from_secs(30),
        || {
            let last = last.clone();
            async move {
                let l = last.lock();
                (0..keys).all(|i| {
                    l.get(&format!("k{i}")).map(String::as_str) == Some(&*rounds.to_string())
                })
            }
        },
    )
    .await;
    assert_eq!(
        violations.load(Ordering::SeqCst),
        0,
        "a key ran on two workers at once"
    );
    c.stop(Duration::from_secs(10)).await;
}

/// A deterministic per-key pause of 1–15 ms.
fn fastrand_ms(name: &str) -> u64 {
    1 + name.bytes().map(u64::from).sum::<u64>() % 15
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_group_kind_worker_limits_hold() {
    let client = env().host().client().await;
    let ns = "it-workers";
    namespace(&client, ns).await;
    let mut opts = ClusterOptions::default();
    opts.controllers.workers = WorkerOptions {
        default_workers: 4,
        ..Default::default()
    }
    .with("ConfigMap", 2);
    let c = cluster("it-workers", host_config().await, opts);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    for i in 0..12 {
        cms.create(&PostParams::default(), &cm(ns, &format!("c{i}"), "x"))
            .await
            .unwrap();
        let s: Secret =
            serde_json::from_value(json!({"metadata": {"name": format!("s{i}")}})).unwrap();
        secrets.create(&PostParams::default(), &s).await.unwrap();
    }
    fn measure<K: lariat::cache::CacheObject>(
        ctrl: &lariat::SharedController<K>,
    ) -> (Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let active = Arc::new(AtomicUsize::new(0));
        let max = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let (a, m, d) = (active, max.clone(), done.clone());
        ctrl.register_handler(
            "measure",
            CancellationToken::new(),
            move |_k, o: Option<Arc<K>>| {
                let (a, m, d) = (a.clone(), m.clone(), d.clone());
                async move {
                    let now = a.fetch_add(1, Ordering::SeqCst) + 1;
                    m.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    a.fetch_sub(1, Ordering::SeqCst);
                    if o.is_some() {
                        d.fetch_add(1, Ordering::SeqCst);
                    }
                    HandlerResult::Success
                }
            },
        );
        (max, done)
    }
    let cm_ctrl = c
        .controllers()
        .for_kind_in::<ConfigMap>(scoped(ns))
        .unwrap();
    let secret_ctrl = c.controllers().for_kind_in::<Secret>(scoped(ns)).unwrap();
    let (cm_max, cm_done) = measure(&cm_ctrl);
    let (s_max, s_done) = measure(&secret_ctrl);
    c.caches()
        .wait_for_sync(Duration::from_secs(30))
        .await
        .unwrap();
    c.controllers().start();
    eventually("all handled", Duration::from_secs(30), || {
        let (a, b) = (cm_done.clone(), s_done.clone());
        async move { a.load(Ordering::SeqCst) >= 12 && b.load(Ordering::SeqCst) >= 12 }
    })
    .await;
    assert_eq!(
        cm_max.load(Ordering::SeqCst),
        2,
        "ConfigMap.\"\" limited to 2 workers"
    );
    assert_eq!(
        s_max.load(Ordering::SeqCst),
        4,
        "default of 4 workers for Secret"
    );
    let series = framework_series("it-workers");
    assert!(
        series.iter().any(
            |s| s.starts_with("controller_runtime_max_concurrent_reconciles{")
                && s.contains("controller=ConfigMap[")
        ),
        "{series:?}"
    );
    c.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_scope_metadata_only_and_indexes() {
    let client = env().host().client().await;
    let ns = "it-scope";
    namespace(&client, ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for (name, managed) in [("a", true), ("b", false), ("c", true)] {
        let mut o = cm(ns, name, &"x".repeat(100));
        if managed {
            o.metadata.labels = Some([(MANAGED_LABEL.to_string(), "true".to_string())].into());
        }
        o.metadata.annotations = Some(
            [(
                lariat::cache::LAST_APPLIED_ANNOTATION.to_string(),
                "{\"big\":true}".to_string(),
            )]
            .into(),
        );
        cms.create(&PostParams::default(), &o).await.unwrap();
    }
    let c = cluster("it-scope", host_config().await, member_options());
    // member defaults: only managed objects
    let managed = c.caches().for_kind::<ConfigMap>().unwrap();
    managed.add_index(
        "app",
        Arc::new(|o: &ConfigMap| o.metadata.name.iter().cloned().collect()),
    );
    let store = managed.store();
    store.index_by_namespace();
    managed
        .wait_for_sync(Duration::from_secs(30))
        .await
        .unwrap();
    let mine: Vec<_> = store.list_namespace(ns);
    let mut names: Vec<_> = mine
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, vec!["a", "c"]);
    let a = store.get_named(Some(ns), "a").unwrap();
    assert!(
        a.metadata.managed_fields.is_none(),
        "managedFields stripped"
    );
    assert!(
        a.metadata.annotations.is_none(),
        "last-applied annotation stripped"
    );
    assert_eq!(store.by_index("app", "c").len(), 1);

    // metadata-only cache of the same namespace: no data, but names and labels
    let meta = c
        .caches()
        .for_kind_in::<PartialObjectMeta<ConfigMap>>(scoped(ns))
        .unwrap();
    meta.wait_for_sync(Duration::from_secs(30)).await.unwrap();
    // (plus kube-root-ca.crt, which kube-controller-manager publishes into every namespace)
    for name in ["a", "b", "c"] {
        let m = meta.peek_store().get_named(Some(ns), name).unwrap();
        assert!(m.metadata.labels.is_some() || name == "b");
    }
    // asking for the same kind and scope in another representation is refused
    assert!(c.caches().for_kind_in::<ConfigMap>(scoped(ns)).is_err());

    // dynamic cache through a known ApiResource
    let ar = ApiResource::erase::<ConfigMap>(&());
    let dynamic = c
        .caches()
        .for_gvk_in(
            &kube::api::GroupVersionKind::gvk("", "v1", "ConfigMap"),
            CacheScope {
                namespace: Some(ns.to_string()),
                label_selector: Some(MANAGED_SELECTOR.to_string()),
                field_selector: None,
            },
        )
        .unwrap();
    assert_eq!(ar.kind, "ConfigMap");
    dynamic
        .wait_for_sync(Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(dynamic.peek_store().len(), 2);
    c.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_has_a_qps_bucket_of_its_own() {
    // One token per 100 s: whoever shares a bucket with a client that spent it waits that long.
    let mut opts = ClusterOptions::default();
    opts.clients.qps = 0.01;
    opts.clients.burst = 1;
    let c = cluster("it-component-qps", host_config().await, opts);
    c.clients().client().apiserver_version().await.unwrap();
    let scheduler = c.clients().client_for_component("scheduler").unwrap();
    tokio::time::timeout(Duration::from_secs(30), scheduler.apiserver_version())
        .await
        .expect("the component waited for the cluster's shared bucket")
        .unwrap();
    // The same component again: the same bucket, now empty.
    let again = c.clients().client_for_component("scheduler").unwrap();
    assert!(
        tokio::time::timeout(Duration::from_secs(2), again.apiserver_version())
            .await
            .is_err(),
        "a second client of the same component got a fresh bucket"
    );
    c.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_qps_limit_is_shared_by_every_client_of_a_cluster() {
    let mut opts = ClusterOptions::default();
    opts.clients.qps = 5.0;
    opts.clients.burst = 1;
    let c = cluster("it-qps", host_config().await, opts);
    let a = c.clients().client();
    let b = c.clients().client_for_controller("other").unwrap();
    let start = Instant::now();
    for i in 0..6 {
        let client = if i % 2 == 0 { a.clone() } else { b.clone() };
        client.apiserver_version().await.unwrap();
    }
    let elapsed = start.elapsed();
    // 1 token at once, then 5 more at 5/s across both clients
    assert!(
        elapsed >= Duration::from_millis(950),
        "6 requests at 5 qps took only {elapsed:?}"
    );
    assert_eq!(rest_requests("it-qps"), 6);
    c.stop(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_change_goes_before_the_rest_of_the_first_list() {
    let ns = "it-priority";
    let (cms, c, ctrl) = old_configmaps_then_one_worker(ns, None).await;
    // Created after the cache was made but before its watch starts: in the first list, yet new.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    cms.create(&PostParams::default(), &cm(ns, "zz-new", "x"))
        .await
        .unwrap();
    // The first replayed key holds the only worker until the live object is in the cache, so the
    // new and the live keys are queued while 19 replayed keys still wait.
    let (order, live_cached) = record_order(&ctrl, "h");
    eventually(
        "first replayed key handled",
        Duration::from_secs(20),
        || {
            let order = order.clone();
            async move { !order.lock().is_empty() }
        },
    )
    .await;
    cms.create(&PostParams::default(), &cm(ns, "live", "x"))
        .await
        .unwrap();
    eventually("live object cached", Duration::from_secs(20), || {
        let ctrl = ctrl.clone();
        async move {
            ctrl.cache()
                .peek_store()
                .get(&ObjectKey::new(Some(ns), "live"))
                .is_some()
        }
    })
    .await;
    live_cached.notify_one();
    all_handled(&order, 22).await;
    // The worker takes zz-new first, or one replayed key that was ready before it: either way,
    // zz-new and then live come before the remaining replayed keys.
    let order = order.lock().clone();
    assert_eq!(order.len(), 22, "a key was handled twice: {order:?}");
    let pos = |name: &str| order.iter().position(|k| k == name).unwrap();
    assert!(
        pos("zz-new") <= 1 && pos("live") == pos("zz-new") + 1,
        "the new object of the first list or the live change waited behind the replay: {order:?}"
    );
    c.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_handler_gets_objects_created_since_the_cache_was_made_before_the_replay() {
    let ns = "it-late-priority";
    let (cms, c, ctrl) = old_configmaps_then_one_worker(ns, None).await;
    ctrl.start_watch();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    cms.create(&PostParams::default(), &cm(ns, "zz-new", "x"))
        .await
        .unwrap();
    // The watch's own keys (handled by no handler yet) must be done first: a key still being handled
    // when the handler registers would be handled again after the replay, out of the order tested.
    eventually(
        "new object cached and the queue idle",
        Duration::from_secs(20),
        || {
            let ctrl = ctrl.clone();
            async move {
                ctrl.cache().has_synced()
                    && ctrl
                        .cache()
                        .peek_store()
                        .get(&ObjectKey::new(Some(ns), "zz-new"))
                        .is_some()
                    && ctrl.queue().is_empty()
                    && ctrl.queue().processing() == 0
            }
        },
    )
    .await;
    // A handler registered now gets the store replayed. Its first key holds the only worker until
    // registration returned, so every replayed key is queued before the second one is taken.
    let (order, registered) = record_order(&ctrl, "late");
    registered.notify_one();
    all_handled(&order, 21).await;
    let order = order.lock().clone();
    assert_eq!(order.len(), 21, "a key was handled twice: {order:?}");
    let pos = order.iter().position(|k| k == "zz-new").unwrap();
    assert!(
        pos <= 1,
        "the object created since the cache was made waited behind the replay: {order:?}"
    );
    c.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ranked_queue_hears_of_every_object_its_cache_listed_before_it_subscribed() {
    let ns = "it-ranked-early";
    let (cms, c, ctrl) = old_configmaps_then_one_worker(ns, None).await;
    cms.create(&PostParams::default(), &cm(ns, "high", "100"))
        .await
        .unwrap();
    // Ranked by the number in the data: "high" first.
    assert!(rank_by_v(&ctrl));
    assert!(
        !ctrl.cache().is_started(),
        "setting a ranker started the watch before any queue subscribed to it"
    );
    // Another user of the cache starts the watch before the queue subscribes (the way a
    // controller reading the store does): what it lists before the handler comes is replayed.
    let store = ctrl.cache().store();
    let (order, gate) = record_order(&ctrl, "ranked");
    gate.notify_one();
    all_handled(&order, 21).await;
    assert!(store.has_synced());
    let order = order.lock().clone();
    let names: HashSet<&str> = order.iter().map(String::as_str).collect();
    assert_eq!(
        names.len(),
        21,
        "an object never reached the handler: {order:?}"
    );
    c.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_ranked_after_its_workers_started_hands_out_its_first_list_by_rank() {
    let ns = "it-ranked-late";
    // Listed 5 to a page: the list takes several round trips, and "zz-high" comes last.
    let (cms, c, ctrl) = old_configmaps_then_one_worker(ns, Some(5)).await;
    cms.create(&PostParams::default(), &cm(ns, "zz-high", "100"))
        .await
        .unwrap();
    // The handler first: the workers start unranked and the watch starts listing; the ranker
    // comes a moment later, as when a controller made after another sets it.
    let (order, gate) = record_order(&ctrl, "late-ranked");
    assert!(rank_by_v(&ctrl));
    gate.notify_one();
    all_handled(&order, 21).await;
    let order = order.lock().clone();
    assert_eq!(
        order.first().map(String::as_str),
        Some("zz-high"),
        "the highest rank waited behind a key of the first page: {order:?}"
    );
    c.stop(Duration::from_secs(10)).await;
}

/// 20 ConfigMaps `old00`…`old19` in `ns`, then (a second later, so they are older than its cache)
/// a started cluster named `ns` with one worker per controller and its ConfigMap controller for `ns`
/// (listing `page_size` objects per page when given).
async fn old_configmaps_then_one_worker(
    ns: &str,
    page_size: Option<u32>,
) -> (
    Api<ConfigMap>,
    lariat::Cluster,
    lariat::SharedController<ConfigMap>,
) {
    let client = env().host().client().await;
    namespace(&client, ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for i in 0..20 {
        cms.create(&PostParams::default(), &cm(ns, &format!("old{i:02}"), "x"))
            .await
            .unwrap();
    }
    // creationTimestamp has whole seconds: the cache is made in a later second than the old objects.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut opts = ClusterOptions::default();
    opts.controllers.workers = WorkerOptions {
        default_workers: 1,
        ..Default::default()
    };
    if page_size.is_some() {
        opts.caches.page_size = page_size;
    }
    let c = cluster(ns, host_config().await, opts);
    c.controllers().start();
    let ctrl = c
        .controllers()
        .for_kind_in::<ConfigMap>(scoped(ns))
        .unwrap();
    (cms, c, ctrl)
}

/// Ranks `ctrl`'s queue by the number in each ConfigMap's `v` (0 without one); true if it was
/// not ranked yet.
fn rank_by_v(ctrl: &lariat::SharedController<ConfigMap>) -> bool {
    ctrl.set_ranker(|o: &ConfigMap| {
        o.data
            .as_ref()
            .and_then(|d| d.get("v"))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    })
}

/// Waits until `order` (from [`record_order`]) holds `n` keys.
async fn all_handled(order: &Arc<parking_lot_free::Mutex<Vec<String>>>, n: usize) {
    eventually("every key handled", Duration::from_secs(30), || {
        let order = order.clone();
        async move { order.lock().len() >= n }
    })
    .await;
}

/// Registers handler `name` on `ctrl` that records the names of the keys it handles, in order; the
/// first key holds its worker until the returned `Notify` is notified.
fn record_order(
    ctrl: &lariat::SharedController<ConfigMap>,
    name: &str,
) -> (
    Arc<parking_lot_free::Mutex<Vec<String>>>,
    Arc<tokio::sync::Notify>,
) {
    let order: Arc<parking_lot_free::Mutex<Vec<String>>> = Arc::default();
    let gate = Arc::new(tokio::sync::Notify::new());
    {
        let order = order.clone();
        let gate = gate.clone();
        ctrl.register_handler(
            name,
            CancellationToken::new(),
            move |k: ObjectKey, _o: Option<Arc<ConfigMap>>| {
                let order = order.clone();
                let gate = gate.clone();
                async move {
                    let first = {
                        let mut o = order.lock();
                        o.push(k.name().to_string());
                        o.len() == 1
                    };
                    if first {
                        gate.notified().await;
                    }
                    HandlerResult::Success
                }
            },
        );
    }
    (order, gate)
}
