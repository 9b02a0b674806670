//! Multi-cluster Services with the Kubernetes MCS API (`serviceExport`, `endpointSlice`,
//! `serviceImport`) against the real controller-manager binary and real API servers.
//!
//! member1 is a full member: its kube-controller-manager, kube-scheduler and kwok run the
//! Deployment's pods (Ready, with IPs) and build the Service's EndpointSlices. member2 is an API
//! server only. Both have the MCS CRDs (as a Karmada user installs them in members) and are joined
//! with `karmadactl join`; the controller-manager runs every default controller.
//!
//! Checked: a Deployment, Service and ServiceExport propagated to member1 and a ServiceImport
//! propagated to member2 (`propagateDeps`) give member2 the derived Service `derived-web` and
//! EndpointSlices listing exactly member1's pod IPs, managed by Karmada's EndpointSlice controller;
//! scaling the Deployment updates them; deleting the ServiceExport removes them (and the collected
//! Works), deleting the ServiceImport removes the derived Service; the ServiceImport gets a
//! `SyncDerivedServiceSucceed` Event; invalid ServiceImports are refused naming the field.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karmada_apis::multicluster::v1alpha1::{ServiceExport, ServiceImport};
use karmada_apis::{PropagationPolicy, Work};
use karmada_e2e::controller_manager::{Kcm, start_joined};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use testenv::{EnvOptions, TestEnv};

const NS: &str = "mcs-api";
const WAIT: Duration = Duration::from_secs(150);

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        full_members: 1,
        kwok_nodes: 1,
        install_crds: true,
        host_controller_manager: false,
        ..Default::default()
    })
}

/// [`Kcm::eventually`] with this file's wait.
async fn eventually<T>(what: &str, kcm: &Kcm, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    kcm.eventually(what, WAIT, check).await
}

/// Installs the MCS API's CRDs (generated from the Rust types, as in `crds/`) into `client`.
async fn install_mcs_crds(client: &Client) {
    let mcs: Vec<CustomResourceDefinition> = karmada_apis::crds::all()
        .into_iter()
        .filter(|c| c.spec.group == karmada_apis::multicluster::v1alpha1::GROUP)
        .collect();
    assert_eq!(mcs.len(), 2);
    testenv::install_crd_objects(client, &mcs).await.unwrap();
}

async fn create<K>(api: &Api<K>, value: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

/// The IPs of member1's Ready pods of the Deployment.
async fn ready_pod_ips(member1: &Client) -> BTreeSet<String> {
    Api::<Pod>::namespaced(member1.clone(), NS)
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            let status = p.status?;
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            ready.then_some(status.pod_ip).flatten()
        })
        .collect()
}

/// The EndpointSlices of the derived Service in `client`, and the addresses they list.
async fn derived_slices(client: &Client) -> (Vec<EndpointSlice>, BTreeSet<String>) {
    let slices = Api::<EndpointSlice>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels("kubernetes.io/service-name=derived-web"))
        .await
        .unwrap()
        .items;
    let addresses = slices
        .iter()
        .flat_map(|s| {
            s.endpoints
                .iter()
                .flatten()
                .flat_map(|e| e.addresses.iter().cloned())
        })
        .collect();
    (slices, addresses)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn exported_endpoints_reach_the_importing_cluster_and_follow_the_pods() {
    let env = env();
    let host = env.host().client().await;
    let member1 = env.members()[0].client().await;
    let member2 = env.members()[1].client().await;
    for m in [&member1, &member2] {
        install_mcs_crds(m).await;
    }
    let kcm = start_joined(
        env,
        &[
            "--leader-elect=false",
            "--cluster-status-update-frequency=2s",
        ],
        &[],
        WAIT,
    )
    .await;

    create(
        &Api::<Namespace>::all(host.clone()),
        json!({"metadata": {"name": NS}}),
    )
    .await;
    create(
        &Api::<Deployment>::namespaced(host.clone(), NS),
        json!({
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
                },
            },
        }),
    )
    .await;
    create(
        &Api::<Service>::namespaced(host.clone(), NS),
        json!({
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"},
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        }),
    )
    .await;
    let exports: Api<ServiceExport> = Api::namespaced(host.clone(), NS);
    create(
        &exports,
        json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceExport",
               "metadata": {"name": "web"}}),
    )
    .await;
    let policies: Api<PropagationPolicy> = Api::namespaced(host.clone(), NS);
    create(
        &policies,
        json!({
            "apiVersion": "policy.karmada.io/v1alpha1",
            "kind": "PropagationPolicy",
            "metadata": {"name": "web"},
            "spec": {
                "resourceSelectors": [
                    {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    {"apiVersion": "v1", "kind": "Service", "name": "web"},
                    {"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceExport", "name": "web"},
                ],
                "placement": {"clusterAffinity": {"clusterNames": ["member1"]}},
            },
        }),
    )
    .await;
    let imports: Api<ServiceImport> = Api::namespaced(host.clone(), NS);
    create(
        &imports,
        json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1",
            "kind": "ServiceImport",
            "metadata": {"name": "web"},
            "spec": {"type": "ClusterSetIP", "ports": [{"name": "http", "protocol": "TCP", "port": 80}]},
        }),
    )
    .await;
    create(
        &policies,
        json!({
            "apiVersion": "policy.karmada.io/v1alpha1",
            "kind": "PropagationPolicy",
            "metadata": {"name": "web-import"},
            "spec": {
                "propagateDeps": true,
                "resourceSelectors": [
                    {"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport", "name": "web"},
                ],
                "placement": {"clusterAffinity": {"clusterNames": ["member2"]}},
            },
        }),
    )
    .await;

    // member2 gets the derived Service and EndpointSlices listing member1's pods.
    let ips = eventually(
        "two Ready pods in member1",
        &kcm,
        async || match ready_pod_ips(&member1).await {
            ips if ips.len() == 2 => Ok(ips),
            ips => Err(format!("ready pod IPs {ips:?}")),
        },
    )
    .await;
    eventually("member2 lists member1's endpoints", &kcm, async || {
        let (slices, addresses) = derived_slices(&member2).await;
        if addresses == ips {
            Ok(slices)
        } else {
            Err(format!("member2 addresses {addresses:?}, want {ips:?}"))
        }
    })
    .await;
    let (slices, _) = derived_slices(&member2).await;
    for s in &slices {
        assert_eq!(
            s.labels()
                .get("endpointslice.kubernetes.io/managed-by")
                .map(String::as_str),
            Some("endpointslice-controller.karmada.io"),
            "{s:?}"
        );
        assert!(s.name_any().starts_with("imported-member1-"), "{s:?}");
        assert_eq!(s.ports.as_ref().map(|p| p[0].port), Some(Some(8080)));
    }
    let derived = Api::<Service>::namespaced(member2.clone(), NS)
        .get("derived-web")
        .await
        .unwrap();
    let spec = derived.spec.unwrap();
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(spec.ports.unwrap()[0].port, 80);
    eventually("a SyncDerivedServiceSucceed Event", &kcm, async || {
        let events = Api::<Event>::namespaced(host.clone(), NS)
            .list(&ListParams::default().fields("involvedObject.name=web"))
            .await
            .unwrap();
        events
            .items
            .iter()
            .any(|e| {
                e.involved_object.kind.as_deref() == Some("ServiceImport")
                    && e.reason.as_deref() == Some("SyncDerivedServiceSucceed")
            })
            .then_some(())
            .ok_or_else(|| "no Event yet".to_owned())
    })
    .await;

    // Scaling the Deployment changes member1's pods, and member2's endpoints follow.
    Api::<Deployment>::namespaced(host.clone(), NS)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    let ips = eventually(
        "three Ready pods in member1",
        &kcm,
        async || match ready_pod_ips(&member1).await {
            ips if ips.len() == 3 => Ok(ips),
            ips => Err(format!("ready pod IPs {ips:?}")),
        },
    )
    .await;
    eventually("member2 lists the three endpoints", &kcm, async || {
        let (_, addresses) = derived_slices(&member2).await;
        if addresses == ips {
            Ok(())
        } else {
            Err(format!("member2 addresses {addresses:?}, want {ips:?}"))
        }
    })
    .await;

    // Invalid ServiceImports are refused, naming the field, and change nothing.
    for (what, spec, field) in [
        (
            "an unknown type",
            json!({"type": "Anycast", "ports": []}),
            "spec.type",
        ),
        (
            "two IPs",
            json!({"type": "ClusterSetIP", "ports": [], "ips": ["10.0.0.1", "10.0.0.2"]}),
            "spec.ips",
        ),
    ] {
        let bad: ServiceImport = serde_json::from_value(json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1",
            "kind": "ServiceImport",
            "metadata": {"name": "bad"},
            "spec": spec,
        }))
        .unwrap();
        match imports.create(&PostParams::default(), &bad).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 422, "{what}: {s:?}");
                assert!(s.message.contains(field), "{what}: {}", s.message);
            }
            other => panic!("{what}: accepted: {other:?}"),
        }
    }

    // Unexporting removes the endpoints from member2, the collected Works and the control
    // plane's slices.
    exports
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("member2 lists no endpoints", &kcm, async || {
        let (slices, _) = derived_slices(&member2).await;
        let (host_slices, _) = derived_slices(&host).await;
        let works = Api::<Work>::namespaced(host.clone(), "karmada-es-member1")
            .list(&ListParams::default().labels("endpointslice.karmada.io/name=web"))
            .await
            .unwrap()
            .items;
        if slices.is_empty() && host_slices.is_empty() && works.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "member2 slices {}, host slices {}, collected Works {}",
                slices.len(),
                host_slices.len(),
                works.len()
            ))
        }
    })
    .await;

    // Deleting the ServiceImport deletes the derived Service, on the control plane and in member2.
    imports
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the derived Service gone", &kcm, async || {
        let on_host = Api::<Service>::namespaced(host.clone(), NS)
            .get_opt("derived-web")
            .await
            .unwrap();
        let in_member2 = Api::<Service>::namespaced(member2.clone(), NS)
            .get_opt("derived-web")
            .await
            .unwrap();
        if on_host.is_none() && in_member2.is_none() {
            Ok(())
        } else {
            Err(format!(
                "on host: {}, in member2: {}",
                on_host.is_some(),
                in_member2.is_some()
            ))
        }
    })
    .await;
}
