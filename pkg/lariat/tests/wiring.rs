//! A controller wired with lariat's `Wiring` against a real API server: the cache it waits for is
//! complete before its handler sees the first key, it reports synced once, and cancelling it
//! returns `Ok` and removes its handler.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};
use lariat::{ClusterOptions, HandlerResult, ObjectKey, Store, Wiring};
use parking_lot::Mutex;
use serde_json::json;
use support::*;
use testenv::{EnvOptions, TestEnv};
use tokio_util::sync::CancellationToken;

const NS: &str = "it-wiring";

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions::default())
}

/// The controller under test: notes, for each ConfigMap it handles, whether the Secret it reads
/// was in the cache already.
#[derive(Clone)]
struct Mirror {
    secrets: Store<Secret>,
    seen: Arc<Mutex<Vec<(String, bool)>>>,
}

impl Mirror {
    async fn handle(self, key: ObjectKey, obj: Option<Arc<ConfigMap>>) -> HandlerResult<ConfigMap> {
        if obj.is_some() && key.namespace() == Some(NS) {
            let secret_listed = self.secrets.get_named(Some(NS), "s1").is_some();
            self.seen.lock().push((key.to_string(), secret_listed));
        }
        HandlerResult::Success
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wired_controller_reads_complete_caches_reports_synced_and_stops_cleanly() {
    let client = env().host().client().await;
    namespace(&client, NS).await;
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s1"}, "stringData": {"k": "v"}}))
            .unwrap();
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "cm1"}, "data": {"k": "v"}})).unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();

    let config = env().host().kube_config().await.unwrap();
    let c = cluster("it-wiring", config, ClusterOptions::default());
    c.controllers().start();
    let secrets = c.controllers().for_kind::<Secret>().unwrap();
    let configmaps = c.controllers().for_kind::<ConfigMap>().unwrap();
    let mirror = Mirror {
        secrets: secrets.cache().peek_store().clone(),
        seen: Arc::default(),
    };
    let cancel = CancellationToken::new();
    let reported = Arc::new(AtomicUsize::new(0));
    let r = reported.clone();
    let running = tokio::spawn(
        Wiring::new(
            "mirror controller",
            mirror.clone(),
            &cancel,
            Duration::from_secs(60),
        )
        .waits_for(&secrets)
        .handles(&configmaps, "mirror", Mirror::handle)
        .on_synced(move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .run(),
    );

    eventually(
        "synced and the ConfigMap handled",
        Duration::from_secs(60),
        || {
            let (reported, seen) = (reported.clone(), mirror.seen.clone());
            async move { reported.load(Ordering::SeqCst) == 1 && !seen.lock().is_empty() }
        },
    )
    .await;
    assert_eq!(
        mirror.seen.lock()[0],
        (format!("{NS}/cm1"), true),
        "the Secret cache was complete before the first ConfigMap was handled"
    );
    assert_eq!(configmaps.handler_names(), vec!["mirror"]);

    cancel.cancel();
    running
        .await
        .unwrap()
        .expect("cancelled after synced is Ok");
    eventually("handler removed", Duration::from_secs(10), || {
        let configmaps = configmaps.clone();
        async move { configmaps.handler_names().is_empty() }
    })
    .await;
    assert_eq!(reported.load(Ordering::SeqCst), 1, "reported once");
    c.stop(Duration::from_secs(10)).await;
}
