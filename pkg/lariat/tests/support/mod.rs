//! Helpers shared by the `framework_*` integration tests: real API servers from `testenv`, CRDs
//! created per test so counts of watches are never disturbed by other tests, and readers of the
//! API server's own `/metrics`.
#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, GroupVersionKind, PostParams};
use lariat::{Cluster, ClusterOptions};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Polls `check` every 50 ms until it is true, failing after `timeout`.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates a namespace.
pub async fn namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// Creates a namespaced CRD `<plural>.<group>` with kind `kind` (v1, any fields), waits until it is
/// established, and returns its GVK.
pub async fn crd(client: &Client, group: &str, kind: &str) -> GroupVersionKind {
    let plural = format!("{}s", kind.to_lowercase());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .unwrap();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.create(&PostParams::default(), &crd).await.unwrap();
    let name = format!("{plural}.{group}");
    eventually("CRD established", Duration::from_secs(30), || {
        let api = api.clone();
        let name = name.clone();
        async move {
            api.get(&name)
                .await
                .ok()
                .and_then(|c| c.status)
                .and_then(|s| s.conditions)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                })
        }
    })
    .await;
    GroupVersionKind::gvk(group, "v1", kind)
}

/// Sums the samples of `metric` on the API server whose labels contain every `label="value"` pair.
pub async fn apiserver_metric(client: &Client, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let req = http::Request::get("/metrics").body(vec![]).unwrap();
    let text = client.request_text(req).await.unwrap();
    let prefix = format!("{metric}{{");
    text.lines()
        .filter(|l| l.starts_with(&prefix))
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Open WATCH requests for a resource, as the API server counts them.
pub async fn open_watches(client: &Client, group: &str, resource: &str) -> f64 {
    apiserver_metric(
        client,
        "apiserver_longrunning_requests",
        &[("verb", "WATCH"), ("group", group), ("resource", resource)],
    )
    .await
}

/// LIST requests served for a resource so far.
pub async fn lists(client: &Client, group: &str, resource: &str) -> f64 {
    apiserver_metric(
        client,
        "apiserver_request_total",
        &[("verb", "LIST"), ("group", group), ("resource", resource)],
    )
    .await
}

/// The label the tests put on the objects a member cache should see.
pub const MANAGED_LABEL: &str = "lariat.test/managed";

/// The label selector of member caches in these tests: [`MANAGED_LABEL`]`=true`.
pub const MANAGED_SELECTOR: &str = "lariat.test/managed=true";

/// Options of a member cluster whose caches only see objects labelled [`MANAGED_SELECTOR`].
pub fn member_options() -> ClusterOptions {
    ClusterOptions::with_label_scope(MANAGED_SELECTOR)
}

/// A framework cluster named `name` over the API server `config` points at.
pub fn cluster(name: &str, config: kube::Config, options: ClusterOptions) -> Cluster {
    Cluster::new(name, config, options, &CancellationToken::new()).unwrap()
}

/// Series in the framework registry carrying `cluster="<name>"`, as `metric{labels} value` lines.
pub fn framework_series(cluster: &str) -> Vec<String> {
    let mut out = vec![];
    for mf in lariat::metrics::registry().gather() {
        for m in mf.get_metric() {
            let labels = m.get_label();
            if labels
                .iter()
                .any(|l| l.name() == "cluster" && l.value() == cluster)
            {
                let ls: Vec<String> = labels
                    .iter()
                    .map(|l| format!("{}={}", l.name(), l.value()))
                    .collect();
                out.push(format!("{}{{{}}}", mf.name(), ls.join(",")));
            }
        }
    }
    out
}

/// Counter `family` summed over the series of one cluster.
pub fn counter_sum(family: &str, cluster: &str) -> f64 {
    lariat::metrics::registry()
        .gather()
        .iter()
        .filter(|mf| mf.name() == family)
        .flat_map(prometheus::proto::MetricFamily::get_metric)
        .filter(|m| {
            m.get_label()
                .iter()
                .any(|l| l.name() == "cluster" && l.value() == cluster)
        })
        .map(|m| m.get_counter().value())
        .sum()
}

/// Value of `rest_client_requests_total` summed over codes and methods for one cluster.
pub fn rest_requests(cluster: &str) -> u64 {
    lariat::metrics::registry()
        .gather()
        .into_iter()
        .filter(|mf| mf.name() == "rest_client_requests_total")
        .flat_map(|mf| mf.get_metric().to_vec())
        .filter(|m| {
            m.get_label()
                .iter()
                .any(|l| l.name() == "cluster" && l.value() == cluster)
        })
        .map(|m| m.get_counter().value() as u64)
        .sum()
}

/// A shared log of handler calls: `(handler, key, present)`.
pub type CallLog = Arc<parking_lot_free::Mutex<Vec<(String, String, bool)>>>;

/// Minimal mutex wrapper so tests need no extra dependency.
pub mod parking_lot_free {
    /// `std::sync::Mutex` that panics on poison (tests only).
    #[derive(Default, Debug)]
    pub struct Mutex<T>(std::sync::Mutex<T>);
    impl<T> Mutex<T> {
        /// Locks.
        pub fn lock(&self) -> std::sync::MutexGuard<'_, T> {
            self.0.lock().unwrap()
        }
    }
}
