//! A host served by two kube-apiservers over one etcd behind one endpoint (`host_replicas`): the
//! endpoint spreads connections over both, both serve the same objects, and a watch through the
//! endpoint sees what is written through either replica.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use testenv::{EnvOptions, TestEnv};

/// Connections made through the endpoint, each by a fresh client (one connection each).
const PROBES: usize = 4;

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}})).unwrap()
}

/// POSTs of ConfigMaps this replica served, from its own `apiserver_request_total`.
async fn config_map_creates(replica: &Client) -> f64 {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = replica.request_text(request).await.unwrap();
    text.lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains("resource=\"configmaps\"")
                && l.contains("verb=\"POST\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn two_replicas_behind_one_endpoint_share_the_work_and_the_objects() {
    let env = TestEnv::start(EnvOptions {
        host_replicas: 2,
        host_controller_manager: false,
        ..Default::default()
    })
    .await
    .expect("start a host with two kube-apiservers (hack/build-test-binaries.sh builds them)");
    let host = env.host();
    assert_eq!(host.pids().len(), 2, "two kube-apiserver processes");
    let replicas = host.replica_clients().await.unwrap();
    assert_eq!(replicas.len(), 2);

    // A watch through the endpoint, listed (empty) before anything is written.
    let endpoint = host.client().await;
    let mut watched = watcher(
        Api::<ConfigMap>::namespaced(endpoint, "default"),
        watcher::Config::default().fields("metadata.name=through-replica-2"),
    )
    .boxed();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), watched.try_next())
            .await
            .expect("the watch through the endpoint did not list within 30 s")
            .unwrap()
            .expect("the watch ended");
        if matches!(event, watcher::Event::InitDone) {
            break;
        }
    }

    // Each probe is a new connection: the endpoint hands them to the replicas in turn.
    for i in 0..PROBES {
        let client = host.client().await;
        Api::<ConfigMap>::namespaced(client, "default")
            .create(&PostParams::default(), &config_map(&format!("probe-{i}")))
            .await
            .unwrap();
    }
    for (i, replica) in replicas.iter().enumerate() {
        let creates = config_map_creates(replica).await;
        assert!(
            creates >= 1.0,
            "replica {} served {creates} of the {PROBES} creates made through the endpoint",
            i + 1
        );
        // Both serve the same storage: every probe is readable from each replica directly.
        let api = Api::<ConfigMap>::namespaced(replica.clone(), "default");
        for p in 0..PROBES {
            assert!(
                api.get_opt(&format!("probe-{p}")).await.unwrap().is_some(),
                "replica {} does not serve probe-{p}",
                i + 1
            );
        }
    }

    // A write through the second replica reaches the watch opened through the endpoint, whichever
    // replica serves it.
    Api::<ConfigMap>::namespaced(replicas[1].clone(), "default")
        .create(&PostParams::default(), &config_map("through-replica-2"))
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(30), watched.try_next())
        .await
        .expect("the watch through the endpoint saw nothing within 30 s")
        .unwrap()
        .expect("the watch ended");
    match event {
        watcher::Event::Apply(cm) => {
            assert_eq!(cm.metadata.name.as_deref(), Some("through-replica-2"));
        }
        other => panic!("expected the new ConfigMap, got {other:?}"),
    }
}
