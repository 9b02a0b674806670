//! MultiClusterService end to end (`multiclusterservice`, `endpointsliceCollect`,
//! `endpointsliceDispatch`): the real `karmada-controller-manager` with every default controller and
//! the `MultiClusterService` gate, two members joined with `karmadactl join`. member1 runs
//! kube-controller-manager, kube-scheduler and kwok, so a Deployment's pods there get Ready with IPs
//! and member1's own EndpointSlice controller builds the Service's slices; member2 is an API server.
//!
//! A `CrossCluster` MultiClusterService providing `web` from member1 to member2 propagates the
//! Service to both and hands member1's endpoints to member2 as EndpointSlices named
//! `member1-<slice>`; scaling the Deployment changes them; a consumer leaving the list loses them
//! (and gets them back when it returns); deleting the MultiClusterService removes the dispatched
//! slices and every Work that carried them. Invalid MultiClusterServices are refused
//! by the API server, naming the field.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use karmada_apis::networking::v1alpha1::MultiClusterService;
use karmada_apis::{PropagationPolicy, ResourceBinding, Work};
use karmada_e2e::controller_manager::{Kcm, start_joined};
use karmada_e2e::wait::eventually_showing;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use testenv::{EnvOptions, TestEnv};

const NS: &str = "mcs";
const WAIT: Duration = Duration::from_secs(180);
const DISPATCHED_BY: &str = "endpointslice-dispatch-controller.karmada.io";

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        full_members: 1,
        kwok_nodes: 1,
        install_crds: true,
        ..Default::default()
    })
}

/// Polls `check` every 500 ms until it returns `Ok`; panics with the last reason and the
/// controller-manager's log on timeout.
async fn eventually<T>(what: &str, kcm: &Kcm, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    let every = Duration::from_millis(500);
    let log = || format!("controller-manager log (tail):\n{}", kcm.log_tail(80));
    eventually_showing(what, WAIT, every, log, check).await
}

/// The IPs of the Ready, not deleting pods of `app` in member1.
async fn ready_pod_ips(member1: &Client, app: &str) -> BTreeSet<String> {
    Api::<Pod>::namespaced(member1.clone(), NS)
        .list(&ListParams::default().labels(&format!("app={app}")))
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

/// `(slice names, ready endpoint addresses)` of the EndpointSlices dispatched to member2 for
/// Service `svc`.
async fn dispatched(member2: &Client, svc: &str) -> (Vec<String>, BTreeSet<String>) {
    let slices = Api::<EndpointSlice>::namespaced(member2.clone(), NS)
        .list(&ListParams::default().labels(&format!(
            "kubernetes.io/service-name={svc},endpointslice.kubernetes.io/managed-by={DISPATCHED_BY}"
        )))
        .await
        .unwrap()
        .items;
    let names = slices.iter().map(ResourceExt::name_any).collect();
    let addresses = slices
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
        .flat_map(|e| e.addresses.iter().cloned())
        .collect();
    (names, addresses)
}

/// The MultiClusterService's condition `type_` as `(status, reason)`.
fn condition(mcs: &MultiClusterService, type_: &str) -> Option<(String, String)> {
    mcs.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// Event reasons recorded about MultiClusterService `name`.
async fn event_reasons(host: &Client, name: &str) -> BTreeSet<String> {
    Api::<Event>::namespaced(host.clone(), NS)
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.kind.as_deref() == Some("MultiClusterService"))
        .filter_map(|e| e.reason)
        .collect()
}

/// Works in `namespace` labelled with MultiClusterService `mcs/web`.
async fn mcs_works(host: &Client, namespace: &str, name: &str) -> Vec<Work> {
    Api::<Work>::namespaced(host.clone(), namespace)
        .list(&ListParams::default().labels(&format!("multiclusterservice.karmada.io/name={name}")))
        .await
        .unwrap()
        .items
}

/// Creates Deployment `name` (2 replicas) propagated to member1 by a PropagationPolicy, and the
/// Service `name` selecting its pods (left to the MultiClusterService).
async fn deploy(host: &Client, name: &str) {
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                         "ports": [{"containerPort": 8080}]}]},
            },
        },
    }))
    .unwrap();
    Api::<Deployment>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &deploy)
        .await
        .unwrap();
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
            "placement": {"clusterAffinity": {"clusterNames": ["member1"]}},
        },
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"selector": {"app": name},
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
    }))
    .unwrap();
    Api::<Service>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
}

fn mcs(name: &str, spec: serde_json::Value) -> MultiClusterService {
    serde_json::from_value(json!({
        "apiVersion": "networking.karmada.io/v1alpha1",
        "kind": "MultiClusterService",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn a_cross_cluster_service_hands_the_providers_endpoints_to_the_consumers() {
    let started = Instant::now();
    let env = env();
    let host = env.host().client().await;
    let kcm = start_joined(
        env,
        &[
            "--leader-elect=false",
            "--cluster-status-update-frequency=2s",
            "--feature-gates=MultiClusterService=true",
        ],
        &[],
        WAIT,
    )
    .await;
    let member1 = env.members()[0].client().await;
    let member2 = env.members()[1].client().await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(host.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();

    deploy(&host, "web").await;
    let pods = eventually("2 Ready pods of web in member1", &kcm, async || {
        let ips = ready_pod_ips(&member1, "web").await;
        if ips.len() == 2 {
            Ok(ips)
        } else {
            Err(format!("ready pod IPs {ips:?}"))
        }
    })
    .await;

    let mcses: Api<MultiClusterService> = Api::namespaced(host.clone(), NS);
    mcses
        .create(
            &PostParams::default(),
            &mcs(
                "web",
                json!({
                    "types": ["CrossCluster"],
                    "providerClusters": [{"name": "member1"}],
                    "consumerClusters": [{"name": "member2"}],
                }),
            ),
        )
        .await
        .unwrap();

    // The Service reaches both clusters through the binding the MultiClusterService claims it by.
    eventually("Service web in member2", &kcm, async || {
        Api::<Service>::namespaced(member2.clone(), NS)
            .get_opt("web")
            .await
            .unwrap()
            .map(|_| ())
            .ok_or_else(|| "absent".to_owned())
    })
    .await;
    let svc = Api::<Service>::namespaced(host.clone(), NS)
        .get("web")
        .await
        .unwrap();
    assert_eq!(
        svc.labels()
            .get("resourcetemplate.karmada.io/claimed-by")
            .map(String::as_str),
        Some("MultiClusterService")
    );
    let rb = Api::<ResourceBinding>::namespaced(host.clone(), NS)
        .get("web-service")
        .await
        .unwrap();
    assert_eq!(
        rb.labels()
            .get("binding.karmada.io/managed-by")
            .map(String::as_str),
        Some("MultiClusterService")
    );
    let mcs_id = mcses
        .get("web")
        .await
        .unwrap()
        .labels()
        .get("multiclusterservice.karmada.io/permanent-id")
        .cloned()
        .unwrap_or_default();
    assert!(
        !mcs_id.is_empty(),
        "MultiClusterService has no permanent id"
    );
    assert_eq!(
        rb.labels()
            .get("multiclusterservice.karmada.io/permanent-id"),
        Some(&mcs_id)
    );

    // member1's endpoints, as member1's kube-controller-manager built them, land in member2.
    eventually("member1's pod IPs in member2's slices", &kcm, async || {
        let (names, addresses) = dispatched(&member2, "web").await;
        if addresses == pods && names.iter().all(|n| n.starts_with("member1-web-")) {
            Ok(())
        } else {
            Err(format!(
                "slices {names:?} list {addresses:?}, pods {pods:?}"
            ))
        }
    })
    .await;
    let collected = mcs_works(&host, "karmada-es-member1", "web").await;
    assert!(
        collected
            .iter()
            .any(|w| w.spec.suspend_dispatching == Some(true)
                && w.labels()
                    .get("endpointslice.karmada.io/managed-by")
                    .map(String::as_str)
                    == Some("MultiClusterService")),
        "no collected EndpointSlice Work in karmada-es-member1: {:?}",
        collected
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>()
    );

    eventually("both conditions True and the Events", &kcm, async || {
        let m = mcses.get("web").await.unwrap();
        let applied = condition(&m, "ServiceApplied");
        let dispatched = condition(&m, "EndpointSliceDispatched");
        let reasons = event_reasons(&host, "web").await;
        if applied == Some(("True".into(), "ServiceAppliedSucceed".into()))
            && dispatched == Some(("True".into(), "EndpointSliceDispatchedSucceed".into()))
            && reasons.contains("SyncServiceSucceed")
            && reasons.contains("DispatchEndpointSliceSucceed")
        {
            Ok(())
        } else {
            Err(format!("{applied:?} {dispatched:?} {reasons:?}"))
        }
    })
    .await;

    // Scaling changes member1's slices, and so member2's.
    Api::<Deployment>::namespaced(host.clone(), NS)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    let pods = eventually("3 Ready pods of web in member1", &kcm, async || {
        let ips = ready_pod_ips(&member1, "web").await;
        if ips.len() == 3 {
            Ok(ips)
        } else {
            Err(format!("ready pod IPs {ips:?}"))
        }
    })
    .await;
    eventually("3 endpoints in member2's slices", &kcm, async || {
        let (names, addresses) = dispatched(&member2, "web").await;
        if addresses == pods {
            Ok(())
        } else {
            Err(format!(
                "slices {names:?} list {addresses:?}, pods {pods:?}"
            ))
        }
    })
    .await;

    // member2 leaves the consumers: what was dispatched to it goes; back in, it comes again.
    let consumers =
        |name: &str| Patch::Merge(json!({"spec": {"consumerClusters": [{"name": name}]}}));
    mcses
        .patch("web", &PatchParams::default(), &consumers("member1"))
        .await
        .unwrap();
    eventually("member2's slices and Works gone", &kcm, async || {
        let (names, _) = dispatched(&member2, "web").await;
        let works = mcs_works(&host, "karmada-es-member2", "web").await;
        if names.is_empty() && works.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "slices {names:?}, Works {:?}",
                works.iter().map(ResourceExt::name_any).collect::<Vec<_>>()
            ))
        }
    })
    .await;
    mcses
        .patch("web", &PatchParams::default(), &consumers("member2"))
        .await
        .unwrap();
    eventually("member2's slices back", &kcm, async || {
        let (names, addresses) = dispatched(&member2, "web").await;
        if addresses == pods {
            Ok(())
        } else {
            Err(format!(
                "slices {names:?} list {addresses:?}, pods {pods:?}"
            ))
        }
    })
    .await;

    // Deleting the MultiClusterService removes what it dispatched and collected.
    mcses.delete("web", &DeleteParams::default()).await.unwrap();
    eventually(
        "the MultiClusterService and its Works gone",
        &kcm,
        async || {
            let left = mcses.get_opt("web").await.unwrap().is_some();
            let (names, _) = dispatched(&member2, "web").await;
            let consumer = mcs_works(&host, "karmada-es-member2", "web").await;
            let provider = mcs_works(&host, "karmada-es-member1", "web").await;
            if !left && names.is_empty() && consumer.is_empty() && provider.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "mcs left: {left}, slices {names:?}, consumer Works {:?}, provider Works {:?}",
                    consumer
                        .iter()
                        .map(ResourceExt::name_any)
                        .collect::<Vec<_>>(),
                    provider
                        .iter()
                        .map(ResourceExt::name_any)
                        .collect::<Vec<_>>()
                ))
            }
        },
    )
    .await;
    // Released: the detector may claim the Service again.
    let svc = Api::<Service>::namespaced(host.clone(), NS)
        .get("web")
        .await
        .unwrap();
    assert!(
        !svc.labels()
            .contains_key("resourcetemplate.karmada.io/claimed-by"),
        "{:?}",
        svc.labels()
    );
    eprintln!("multicluster service scenario took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_multicluster_services_are_refused_naming_the_field() {
    let env = env();
    let host = env.host().client().await;
    let namespace = karmada_e2e::controller_manager::fresh_namespace(&host, "mcs-invalid").await;
    let api: Api<MultiClusterService> = Api::namespaced(host.clone(), &namespace);
    for (spec, field, message) in [
        (
            json!({"types": ["CrossCluster", "LoadBalancer"]}),
            "spec.types",
            "should not contain more than one type",
        ),
        (
            json!({"types": ["CrossCluster"], "ports": [{"port": 70000}]}),
            "spec.ports[0].port",
            "65535",
        ),
    ] {
        let err = api
            .create(&PostParams::default(), &mcs("bad", spec.clone()))
            .await
            .expect_err(&format!("{spec} accepted"));
        let kube::Error::Api(status) = err else {
            panic!("{spec}: {err}");
        };
        assert_eq!(status.code, 422, "{spec}: {status:?}");
        assert!(
            status.message.contains(field) && status.message.contains(message),
            "{spec}: {}",
            status.message
        );
    }
}
