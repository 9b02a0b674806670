//! The third-party interpretations reach the controllers, against real API servers, with no
//! ResourceInterpreterCustomization anywhere:
//! - an OpenKruise CloneSet (its CRD installed on the host and both members) propagated Divided
//!   1:1 gets its replicas and pod requirements from the built-in CloneSet interpretation, its
//!   replicas divided in the member CloneSets, and its members' status reflected, judged healthy
//!   and aggregated back into the template's status;
//! - a Flux HelmRelease under a policy with `propagateDeps: true` takes the Secret and ConfigMap
//!   its `valuesFrom` names to its member (InterpretDependency), is Unhealthy there until its
//!   `Ready` condition says `ReconciliationSucceeded`, and its conditions come home prefixed with
//!   the member's name.
//!
//! The detector, scheduler, binding, execution, workStatus, bindingStatus controllers and the
//! dependencies distributor run in-process; the members are API servers only, so the test writes
//! the member objects' status the way the Kruise and Flux controllers would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karmada_apis::work::v1alpha1::ResourceHealth;
use karmada_apis::{Cluster, PropagationPolicy, ResourceBinding, names};
use karmada_controllers::members::member_cluster_options;
use karmada_e2e::in_process::{self, Controllers, Harness, ensure_namespace, serial};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(90);
const MEMBERS: [&str; 2] = ["member1", "member2"];
const NS: &str = "thirdparty-test";
const GROUP: &str = "apps.kruise.io";
const VERSION: &str = "v1alpha1";

fn env() -> &'static TestEnv {
    in_process::init_tracing();
    testenv::shared(EnvOptions {
        members: 2,
        install_crds: true,
        host_controller_manager: false,
        ..Default::default()
    })
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    karmada_e2e::wait::eventually(what, WAIT, Duration::from_millis(200), check).await
}

const FLUX_GROUP: &str = "helm.toolkit.fluxcd.io";
const FLUX_VERSION: &str = "v2beta1";

fn clone_sets() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, VERSION, "CloneSet"),
        "clonesets",
    )
}

fn helm_releases() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(FLUX_GROUP, FLUX_VERSION, "HelmRelease"),
        "helmreleases",
    )
}

/// The CloneSet CRD (schema left open, status subresource); waits until served.
async fn install_crd(client: &Client) {
    install(client, &clone_sets()).await;
}

/// A namespaced CRD for `resource` (schema left open, status subresource); waits until served.
async fn install(client: &Client, resource: &ApiResource) {
    let name = format!("{}.{}", resource.plural, resource.group);
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": resource.group, "scope": "Namespaced",
            "names": {"kind": resource.kind, "plural": resource.plural,
                "singular": resource.kind.to_lowercase()},
            "versions": [{"name": resource.version, "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .patch(
            &name,
            &PatchParams::apply("thirdparty-test").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    eventually(&format!("{name} served"), async || {
        api.list(&ListParams::default().limit(1))
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
}

/// A Ready Cluster object serving CloneSets, HelmReleases, Secrets and ConfigMaps.
async fn ready_cluster(client: &Client, name: &str) {
    let api: Api<Cluster> = Api::all(client.clone());
    let c: Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:1"}
    }))
    .unwrap();
    let _ = api.create(&PostParams::default(), &c).await;
    let apis = json!({"apiEnablements": [
        {"groupVersion": format!("{GROUP}/{VERSION}"),
            "resources": [{"name": "clonesets", "kind": "CloneSet"}]},
        {"groupVersion": format!("{FLUX_GROUP}/{FLUX_VERSION}"),
            "resources": [{"name": "helmreleases", "kind": "HelmRelease"}]},
        {"groupVersion": "v1", "resources": [{"name": "secrets", "kind": "Secret"},
            {"name": "configmaps", "kind": "ConfigMap"}]}]});
    in_process::set_cluster_ready(client, name, true, "set by test", apis).await;
}

async fn start_controllers() -> Controllers {
    let mut controllers = in_process::implemented(&[
        "scheduler",
        "binding",
        "execution",
        "workStatus",
        "bindingStatus",
    ]);
    controllers.push((
        "resource-detector",
        karmada_controllers::detector::start_fn(),
    ));
    controllers.push((
        karmada_controllers::dependencies_distributor::NAME,
        karmada_controllers::dependencies_distributor::start_fn(),
    ));
    Harness::new(controllers)
        .settings(karmada_controllers::Settings {
            skipped_propagating_namespaces: vec![],
            ..in_process::settings()
        })
        .members(&MEMBERS, member_cluster_options())
        .start(env())
        .await
}

async fn binding(client: &Client, name: &str) -> Result<ResourceBinding, String> {
    binding_of(client, NS, "CloneSet", name).await
}

async fn binding_of(
    client: &Client,
    namespace: &str,
    kind: &str,
    name: &str,
) -> Result<ResourceBinding, String> {
    let rb_name = names::binding_name(kind, name);
    Api::<ResourceBinding>::namespaced(client.clone(), namespace)
        .get_opt(&rb_name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no binding {rb_name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn clone_set_is_divided_judged_healthy_and_aggregated_by_the_builtin_interpretation() {
    let _serial = serial().lock().await;
    let host = env().host().client().await;
    let members = [
        env().members()[0].client().await,
        env().members()[1].client().await,
    ];
    install_crd(&host).await;
    for m in &members {
        install_crd(m).await;
        ensure_namespace(m, NS).await;
    }
    ensure_namespace(&host, NS).await;
    for m in MEMBERS {
        ensure_namespace(&host, &names::execution_space_name(m)).await;
        ready_cluster(&host, m).await;
    }
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "clonesets", "namespace": NS},
        "spec": {
            "resourceSelectors": [{"apiVersion": format!("{GROUP}/{VERSION}"), "kind": "CloneSet"}],
            "placement": {
                "clusterAffinity": {"clusterNames": MEMBERS},
                "replicaScheduling": {"replicaSchedulingType": "Divided",
                    "replicaDivisionPreference": "Weighted",
                    "weightPreference": {"staticWeightList": [
                        {"targetCluster": {"clusterNames": ["member1"]}, "weight": 1},
                        {"targetCluster": {"clusterNames": ["member2"]}, "weight": 1}]}}
            }
        }
    }))
    .unwrap();
    let _ = Api::<PropagationPolicy>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &policy)
        .await;
    let controllers = start_controllers().await;

    let templates: Api<DynamicObject> = Api::namespaced_with(host.clone(), NS, &clone_sets());
    let clone_set: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/{VERSION}"), "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"replicas": 4,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx",
                    "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}]}}}
    }))
    .unwrap();
    templates
        .create(&PostParams::default(), &clone_set)
        .await
        .unwrap();

    // Replicas and per-replica requirements come from the CloneSet interpretation.
    let rb = eventually("the CloneSet's binding with 4 replicas", async || {
        let rb = binding(&host, "web").await?;
        (rb.spec.replicas == 4)
            .then_some(rb.clone())
            .ok_or_else(|| format!("binding replicas {}", rb.spec.replicas))
    })
    .await;
    let requirements = serde_json::to_value(&rb.spec.replica_requirements).unwrap();
    assert_eq!(
        requirements["resourceRequest"],
        json!({"cpu": "250m", "memory": "64Mi"}),
        "requirements from the pod template: {requirements}"
    );

    // Divided 2/2: each member's CloneSet revised.
    let member_apis: Vec<Api<DynamicObject>> = members
        .iter()
        .map(|m| Api::namespaced_with(m.clone(), NS, &clone_sets()))
        .collect();
    for (i, api) in member_apis.iter().enumerate() {
        eventually(
            &format!("the CloneSet in member{} with 2 replicas", i + 1),
            async || {
                let c = api.get_opt("web").await.map_err(|e| e.to_string())?;
                match c.map(|c| c.data["spec"]["replicas"].clone()) {
                    Some(r) if r == json!(2) => Ok(()),
                    other => Err(format!("replicas {other:?}")),
                }
            },
        )
        .await;
    }

    // Not yet rolled out in member1: it is reported unhealthy there.
    let report = |c: &DynamicObject, available: i64| -> Value {
        let generation = c.metadata.generation.unwrap_or_default();
        json!({"status": {"replicas": 2, "readyReplicas": available, "availableReplicas": available,
            "updatedReplicas": 2, "updatedReadyReplicas": available, "expectedUpdatedReplicas": 2,
            "observedGeneration": generation, "updateRevision": "web-1",
            "currentRevision": "web-1", "labelSelector": "app=web"}})
    };
    for (api, available) in member_apis.iter().zip([1, 2]) {
        let c = api.get("web").await.unwrap();
        api.patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&report(&c, available)),
        )
        .await
        .unwrap();
    }
    let health = |rb: &ResourceBinding, cluster: &str| {
        rb.status.as_ref().and_then(|s| {
            s.aggregated_status
                .iter()
                .find(|i| i.cluster_name == cluster)
                .and_then(|i| i.health.clone())
        })
    };
    eventually("member1 Unhealthy and member2 Healthy", async || {
        let rb = binding(&host, "web").await?;
        match (health(&rb, "member1"), health(&rb, "member2")) {
            (Some(ResourceHealth::Unhealthy), Some(ResourceHealth::Healthy)) => Ok(()),
            other => Err(format!("health {other:?}")),
        }
    })
    .await;

    // Rolled out everywhere: both healthy, and the template's status sums the members'.
    let c = member_apis[0].get("web").await.unwrap();
    member_apis[0]
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&report(&c, 2)),
        )
        .await
        .unwrap();
    eventually("both members Healthy", async || {
        let rb = binding(&host, "web").await?;
        match (health(&rb, "member1"), health(&rb, "member2")) {
            (Some(ResourceHealth::Healthy), Some(ResourceHealth::Healthy)) => Ok(()),
            other => Err(format!("health {other:?}")),
        }
    })
    .await;
    eventually("the aggregated status on the CloneSet", async || {
        let c = templates.get("web").await.map_err(|e| e.to_string())?;
        let status = c.data.get("status").cloned().unwrap_or_default();
        let generation = c.metadata.generation.unwrap_or_default();
        let expected = json!({"replicas": 4, "readyReplicas": 4, "availableReplicas": 4,
            "updatedReplicas": 4, "updatedReadyReplicas": 4, "expectedUpdatedReplicas": 4,
            "observedGeneration": generation, "updateRevision": "web-1",
            "currentRevision": "web-1", "labelSelector": "app=web"});
        (status == expected)
            .then_some(())
            .ok_or_else(|| format!("status {status}, want {expected}"))
    })
    .await;
    assert_eq!(templates.get("web").await.unwrap().name_any(), "web");

    controllers.stop().await;
}

/// The health member `cluster` reported for a binding.
fn health_in(rb: &ResourceBinding, cluster: &str) -> Option<ResourceHealth> {
    rb.status.as_ref().and_then(|s| {
        s.aggregated_status
            .iter()
            .find(|i| i.cluster_name == cluster)
            .and_then(|i| i.health.clone())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn helm_release_takes_its_values_along_and_reports_flux_health_and_conditions() {
    let _serial = serial().lock().await;
    let host = env().host().client().await;
    let member = env().members()[0].client().await;
    const NAMESPACE: &str = "thirdparty-flux";
    install(&host, &helm_releases()).await;
    install(&member, &helm_releases()).await;
    ensure_namespace(&host, NAMESPACE).await;
    ensure_namespace(&member, NAMESPACE).await;
    for m in MEMBERS {
        ensure_namespace(&host, &names::execution_space_name(m)).await;
        ready_cluster(&host, m).await;
    }
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "podinfo-values", "namespace": NAMESPACE},
        "stringData": {"values.yaml": "replicaCount: 2"}
    }))
    .unwrap();
    Api::<Secret>::namespaced(host.clone(), NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let config_map: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "podinfo-defaults", "namespace": NAMESPACE},
        "data": {"values.yaml": "ui: {color: blue}"}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(host.clone(), NAMESPACE)
        .create(&PostParams::default(), &config_map)
        .await
        .unwrap();
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "helmreleases", "namespace": NAMESPACE},
        "spec": {"propagateDeps": true,
            "resourceSelectors": [{"apiVersion": format!("{FLUX_GROUP}/{FLUX_VERSION}"),
                "kind": "HelmRelease"}],
            "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}
    }))
    .unwrap();
    let _ = Api::<PropagationPolicy>::namespaced(host.clone(), NAMESPACE)
        .create(&PostParams::default(), &policy)
        .await;
    let controllers = start_controllers().await;

    let templates: Api<DynamicObject> =
        Api::namespaced_with(host.clone(), NAMESPACE, &helm_releases());
    let release: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{FLUX_GROUP}/{FLUX_VERSION}"), "kind": "HelmRelease",
        "metadata": {"name": "podinfo", "namespace": NAMESPACE},
        "spec": {"interval": "5m",
            "chart": {"spec": {"chart": "podinfo", "version": "6.x",
                "sourceRef": {"kind": "HelmRepository", "name": "podinfo"}}},
            "valuesFrom": [{"kind": "Secret", "name": "podinfo-values"},
                {"kind": "ConfigMap", "name": "podinfo-defaults"}]}
    }))
    .unwrap();
    templates
        .create(&PostParams::default(), &release)
        .await
        .unwrap();

    // The HelmRelease and the objects it names land in the member.
    let in_member: Api<DynamicObject> =
        Api::namespaced_with(member.clone(), NAMESPACE, &helm_releases());
    eventually("the HelmRelease in member1", async || {
        in_member
            .get_opt("podinfo")
            .await
            .map_err(|e| e.to_string())?
            .map(|_| ())
            .ok_or_else(|| "not yet".to_owned())
    })
    .await;
    eventually("its Secret and ConfigMap in member1", async || {
        let secret = Api::<Secret>::namespaced(member.clone(), NAMESPACE)
            .get_opt("podinfo-values")
            .await
            .map_err(|e| e.to_string())?;
        let config_map = Api::<ConfigMap>::namespaced(member.clone(), NAMESPACE)
            .get_opt("podinfo-defaults")
            .await
            .map_err(|e| e.to_string())?;
        match (secret, config_map) {
            (Some(_), Some(_)) => Ok(()),
            other => Err(format!(
                "secret, config map present: {}, {}",
                other.0.is_some(),
                other.1.is_some()
            )),
        }
    })
    .await;

    // Still reconciling: Unhealthy.
    let report = |reason: &str, status: &str| {
        json!({"status": {"observedGeneration": 1, "lastAppliedRevision": "6.5.0",
            "lastAttemptedRevision": "6.5.0", "helmChart": format!("{NAMESPACE}/podinfo"),
            "conditions": [{"type": "Ready", "status": status, "reason": reason,
                "message": "Release reconciliation succeeded",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    };
    in_member
        .patch_status(
            "podinfo",
            &PatchParams::default(),
            &Patch::Merge(&report("Progressing", "Unknown")),
        )
        .await
        .unwrap();
    eventually("member1 Unhealthy while reconciling", async || {
        let rb = binding_of(&host, NAMESPACE, "HelmRelease", "podinfo").await?;
        match health_in(&rb, "member1") {
            Some(ResourceHealth::Unhealthy) => Ok(()),
            other => Err(format!("health {other:?}")),
        }
    })
    .await;

    // Reconciled: Healthy, and the condition comes home prefixed with the member.
    in_member
        .patch_status(
            "podinfo",
            &PatchParams::default(),
            &Patch::Merge(&report("ReconciliationSucceeded", "True")),
        )
        .await
        .unwrap();
    eventually("member1 Healthy once reconciled", async || {
        let rb = binding_of(&host, NAMESPACE, "HelmRelease", "podinfo").await?;
        match health_in(&rb, "member1") {
            Some(ResourceHealth::Healthy) => Ok(()),
            other => Err(format!("health {other:?}")),
        }
    })
    .await;
    eventually("the aggregated HelmRelease status", async || {
        let r = templates.get("podinfo").await.map_err(|e| e.to_string())?;
        let status = r.data.get("status").cloned().unwrap_or_default();
        let message = status["conditions"][0]["message"].clone();
        let ok = status["lastAppliedRevision"] == json!("6.5.0")
            && status["conditions"][0]["reason"] == json!("ReconciliationSucceeded")
            && message == json!("member1=Release reconciliation succeeded");
        ok.then_some(()).ok_or_else(|| format!("status {status}"))
    })
    .await;

    controllers.stop().await;
}
