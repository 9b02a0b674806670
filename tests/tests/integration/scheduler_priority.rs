//! Karmada's priority queue (`PriorityBasedScheduling`, on by default here): bindings waiting to be
//! scheduled are taken by `spec.schedulePriority.priority`, highest first, whatever order they
//! were listed in. Bindings made while no scheduler runs are all waiting when one starts; with one
//! worker, the host API server's audit log orders its first write to each, and that order follows
//! the priorities (names are chosen so that the list order, by name, is the opposite).

#![allow(
    clippy::unwrap_used,
    reason = "a test harness file: its helpers build fixed objects and panic on a broken fixture"
)]

use std::time::Duration;

use karmada_apis::ResourceBinding;
use karmada_e2e::controller_manager::*;
use karmada_e2e::in_process::{create_ready_cluster, resource_binding};
use kube::api::{Api, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);
/// Bindings of priority 0 between the high and the negative one. (Their order among themselves is
/// the order the cache hands them over in, not the list's: the queue's unit tests check first in,
/// first out within a priority.)
const PLAIN: usize = 40;

fn env() -> &'static testenv::TestEnv {
    testenv::shared(testenv::EnvOptions {
        host_controller_manager: false,
        install_crds: true,
        host_audit_log: true,
        ..testenv::EnvOptions::default()
    })
}

/// A ResourceBinding for a ConfigMap placed on both clusters, at scheduling `priority`.
fn binding(ns: &str, name: &str, priority: Option<i32>) -> ResourceBinding {
    let mut spec =
        json!({"placement": {"clusterAffinity": {"clusterNames": ["prio-m1", "prio-m2"]}}});
    if let Some(p) = priority {
        spec["schedulePriority"] = json!({"priority": p});
    }
    resource_binding(ns, name, ("v1", "ConfigMap"), spec)
}

/// The ResourceBindings of `ns` in the order of the first successful write each got after its
/// creation (the scheduler's).
fn first_writes(env: &testenv::TestEnv, ns: &str) -> Vec<String> {
    let mut events: Vec<_> = env
        .host()
        .audit_events()
        .unwrap_or_else(|e| panic!("read the host's audit log: {e}"))
        .into_iter()
        .filter(|e| e.succeeded() && e.verb != "create")
        .filter(|e| {
            e.object_ref.resource == "resourcebindings"
                && e.object_ref.namespace.as_deref() == Some(ns)
        })
        .collect();
    events.sort_by_key(|e| e.request_received_timestamp);
    let mut order: Vec<String> = Vec::new();
    for e in events {
        let name = e.object_ref.name.unwrap_or_default();
        if !order.contains(&name) {
            order.push(name);
        }
    }
    order
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_bindings_are_scheduled_highest_priority_first() {
    let env = env();
    let client = env.host().client().await;
    let ns = fresh_namespace(&client, "sched-prio").await;
    let apis = json!({"apiEnablements": [
        {"groupVersion": "v1", "resources": [{"name": "configmaps", "kind": "ConfigMap"}]},
    ]});
    for name in ["prio-m1", "prio-m2"] {
        create_ready_cluster(&client, name, apis.clone()).await;
    }
    // Listed by name: "a-negative" first, "z-high" last. Taken by priority: the reverse.
    let mut wanted: Vec<(String, Option<i32>)> = vec![("a-negative".into(), Some(-10))];
    wanted.extend((0..PLAIN).map(|i| (format!("m-plain-{i:02}"), None)));
    wanted.push(("y-medium".into(), Some(5)));
    wanted.push(("z-high".into(), Some(100)));
    let bindings: Api<ResourceBinding> = Api::namespaced(client.clone(), &ns);
    for (name, priority) in &wanted {
        bindings
            .create(&PostParams::default(), &binding(&ns, name, *priority))
            .await
            .unwrap_or_else(|e| panic!("create ResourceBinding {name}: {e}"));
    }
    let kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--controllers=scheduler",
            "--concurrent-resourcebinding-syncs=1",
        ],
        &[],
    );
    kcm.eventually("every binding scheduled", WAIT, async || {
        let list = bindings
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let waiting: Vec<_> = list
            .items
            .iter()
            .filter(|rb| rb.spec.clusters.len() != 2)
            .filter_map(|rb| rb.metadata.name.clone())
            .collect();
        waiting
            .is_empty()
            .then_some(())
            .ok_or(format!("not scheduled yet: {waiting:?}"))
    })
    .await;
    let order = kcm
        .eventually(
            "a write to every binding in the audit log",
            WAIT,
            async || {
                let order = first_writes(env, &ns);
                (order.len() == wanted.len())
                    .then(|| order.clone())
                    .ok_or(format!("written so far: {order:?}"))
            },
        )
        .await;
    assert_eq!(
        &order[..2],
        ["z-high", "y-medium"],
        "highest priorities first; order of first writes: {order:?}"
    );
    assert_eq!(
        order.last().map(String::as_str),
        Some("a-negative"),
        "a negative priority goes after priority 0; order of first writes: {order:?}"
    );
}
