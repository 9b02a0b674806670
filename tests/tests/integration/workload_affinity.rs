//! Karmada's `WorkloadAffinity` gate in the built-in scheduler: ResourceBindings of one
//! anti-affinity group land on different clusters, even when created together and scheduled by
//! several workers at once, and one that finds every cluster taken is not placed (Karmada's fit
//! error, naming the plugin's reason); bindings of one affinity group follow the first one placed.
//! The bindings are written as the detector writes them for a policy's `workloadAffinity`.

#![allow(
    clippy::unwrap_used,
    reason = "a test harness file: its helpers build fixed objects and panic on a broken fixture"
)]

use std::collections::BTreeSet;
use std::time::Duration;

use karmada_apis::ResourceBinding;
use karmada_e2e::controller_manager::*;
use karmada_e2e::in_process::{create_ready_cluster, resource_binding};
use kube::api::{Api, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);
const CLUSTERS: [&str; 3] = ["wa-m1", "wa-m2", "wa-m3"];

fn env() -> &'static testenv::TestEnv {
    testenv::shared(testenv::EnvOptions {
        host_controller_manager: false,
        install_crds: true,
        ..testenv::EnvOptions::default()
    })
}

/// A ResourceBinding for a ConfigMap placed on exactly one of the clusters, in the groups given.
fn binding(ns: &str, name: &str, affinity: &str, anti_affinity: &str) -> ResourceBinding {
    resource_binding(
        ns,
        name,
        ("v1", "ConfigMap"),
        json!({
            "placement": {
                "clusterAffinity": {"clusterNames": CLUSTERS},
                "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
            },
            "workloadAffinityGroups": {"affinityGroup": affinity, "antiAffinityGroup": anti_affinity},
        }),
    )
}

/// The `Scheduled` condition: (status, reason, message).
fn scheduled(rb: &ResourceBinding) -> Option<(String, String, String)> {
    rb.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Scheduled")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Waits until `name` is placed on one cluster; returns it.
async fn placed(kcm: &Kcm, bindings: &Api<ResourceBinding>, name: &str) -> String {
    kcm.eventually(&format!("{name} placed"), WAIT, async || {
        let rb = bindings.get(name).await.map_err(|e| e.to_string())?;
        match (rb.spec.clusters.as_slice(), scheduled(&rb)) {
            ([one], Some((status, ..))) if status == "True" => Ok(one.name.clone()),
            (clusters, condition) => Err(format!("clusters {clusters:?}, Scheduled {condition:?}")),
        }
    })
    .await
}

async fn create(bindings: &Api<ResourceBinding>, rb: &ResourceBinding) {
    bindings
        .create(&PostParams::default(), rb)
        .await
        .unwrap_or_else(|e| panic!("create ResourceBinding {:?}: {e}", rb.metadata.name));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_keep_bindings_apart_and_together() {
    let env = env();
    let client = env.host().client().await;
    let ns = fresh_namespace(&client, "workload-affinity").await;
    let apis = json!({"apiEnablements": [
        {"groupVersion": "v1", "resources": [{"name": "configmaps", "kind": "ConfigMap"}]},
    ]});
    for name in CLUSTERS {
        create_ready_cluster(&client, name, apis.clone()).await;
    }
    let kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--controllers=scheduler",
            "--feature-gates=WorkloadAffinity=true",
        ],
        &[],
    );
    let bindings: Api<ResourceBinding> = Api::namespaced(client.clone(), &ns);

    // Anti-affinity: three created at once spread over the three clusters.
    let apart = ["apart-1", "apart-2", "apart-3"];
    for name in apart {
        create(&bindings, &binding(&ns, name, "", "replicas-of-db")).await;
    }
    let mut taken = BTreeSet::new();
    for name in apart {
        taken.insert(placed(&kcm, &bindings, name).await);
    }
    assert_eq!(taken.len(), 3, "one cluster each: {taken:?}");
    // A fourth finds every cluster taken: not placed, with Karmada's fit error.
    create(&bindings, &binding(&ns, "apart-4", "", "replicas-of-db")).await;
    kcm.eventually("apart-4 unschedulable", WAIT, async || {
        let rb = bindings.get("apart-4").await.map_err(|e| e.to_string())?;
        match scheduled(&rb) {
            Some((status, reason, message))
                if status == "False"
                    && reason == "NoClusterFit"
                    && message.contains(
                        "3 cluster already has workload with the same anti-affinity group",
                    )
                    && rb.spec.clusters.is_empty() =>
            {
                Ok(())
            }
            other => Err(format!(
                "Scheduled {other:?}, clusters {:?}",
                rb.spec.clusters
            )),
        }
    })
    .await;

    // Affinity: created at once, all follow whichever was placed first.
    let together = ["together-1", "together-2", "together-3"];
    for name in together {
        create(&bindings, &binding(&ns, name, "frontend-and-cache", "")).await;
    }
    let mut homes = BTreeSet::new();
    for name in together {
        homes.insert(placed(&kcm, &bindings, name).await);
    }
    assert_eq!(homes.len(), 1, "one cluster for the group: {homes:?}");
}
