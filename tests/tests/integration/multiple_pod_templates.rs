//! The `MultiplePodTemplatesScheduling` gate against real API servers (Karmada v1.16's detector
//! `applyReplicaInterpretation` and scheduler `calAvailableReplicas`):
//! - with the gate on, a FlinkDeployment (interpreted by the built-in third-party rule) gets a
//!   binding with its two components and no replicas, and is placed on the one cluster where a
//!   whole set of components fits, not on the one with more free pods;
//! - a component interpretation that fails (a customization's `componentResource` script) is
//!   reported on its template by a Warning `GetComponentsFailed`, and components with a repeated name
//!   leave the binding unwritten (`ApplyPolicyFailed` with Karmada's webhook message); a kind with
//!   components and a `replicaRevision` keeps its replicas in the Work (Karmada revises only a
//!   binding with replicas);
//! - with the gate off, the same FlinkDeployment's binding carries replicas, as before.
//!
//! The detector, the scheduler and the binding controller run in-process; the Cluster objects,
//! their status (resource summaries included) and execution namespaces are written by the test,
//! nothing is applied to members.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karmada_apis::config::v1alpha1::ResourceInterpreterCustomization;
use karmada_apis::well_known::event_reasons;
use karmada_apis::{Cluster, PropagationPolicy, ResourceBinding, Work, names};
use karmada_e2e::in_process::{
    self, Controllers, Harness, create_namespace, ensure_namespace, serial,
};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use lariat::runtime::features::{FeatureGates, FeatureSpec, PreRelease};
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(90);
const GATE: &str = "MultiplePodTemplatesScheduling";
/// Many free pods, one CPU: no set of the FlinkDeployment (two one-CPU managers) fits.
const PODS_RICH: &str = "mpt-pods-rich";
/// Ten free pods, eight CPUs: four sets fit.
const CPU_RICH: &str = "mpt-cpu-rich";

static GATES: &[FeatureSpec] = &[FeatureSpec {
    name: GATE,
    default: false,
    pre_release: PreRelease::Alpha,
    lock_to_default: false,
}];

fn env() -> &'static TestEnv {
    in_process::init_tracing();
    testenv::shared(EnvOptions {
        members: 0,
        install_crds: true,
        host_controller_manager: false,
        ..Default::default()
    })
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    karmada_e2e::wait::eventually(what, WAIT, Duration::from_millis(200), check).await
}

fn flink_deployments() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("flink.apache.org", "v1beta1", "FlinkDeployment"),
        "flinkdeployments",
    )
}

fn pipelines() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.io", "v1", "Pipeline"),
        "pipelines",
    )
}

/// A namespaced CRD for `resource` that keeps any field; waits until served.
async fn install_crd(client: &Client, resource: &ApiResource) {
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
            &PatchParams::apply("multiple-pod-templates-test").force(),
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

/// A Ready Cluster serving the test kinds, with `pods` and `cpu` allocatable.
async fn ready_cluster(client: &Client, name: &str, pods: &str, cpu: &str) {
    let api: Api<Cluster> = Api::all(client.clone());
    let c: Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:1"}
    }))
    .unwrap();
    match api.create(&PostParams::default(), &c).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create Cluster {name}: {e}"),
    }
    let status = json!({
        "apiEnablements": [
            {"groupVersion": "flink.apache.org/v1beta1",
                "resources": [{"name": "flinkdeployments", "kind": "FlinkDeployment"}]},
            {"groupVersion": "example.io/v1",
                "resources": [{"name": "pipelines", "kind": "Pipeline"}]}],
        "resourceSummary": {"allocatable": {"pods": pods, "cpu": cpu, "memory": "100Gi"}},
    });
    in_process::set_cluster_ready(client, name, true, "set by test", status).await;
}

async fn start_controllers(gate: bool) -> Controllers {
    let mut gates = FeatureGates::new(GATES);
    gates.set_from_str(&format!("{GATE}={gate}")).unwrap();
    let mut controllers = in_process::implemented(&["scheduler", "binding"]);
    controllers.push((
        "resource-detector",
        karmada_controllers::detector::start_fn(),
    ));
    Harness::new(controllers)
        .settings(karmada_controllers::Settings {
            skipped_propagating_namespaces: vec![],
            feature_gates: gates,
            ..in_process::settings()
        })
        .start(env())
        .await
}

/// Everything both tests need: the CRDs, the Cluster objects and `ns`.
async fn prepare(client: &Client, ns: &str) {
    install_crd(client, &flink_deployments()).await;
    install_crd(client, &pipelines()).await;
    for (name, pods, cpu) in [(PODS_RICH, "100", "1"), (CPU_RICH, "10", "8")] {
        ready_cluster(client, name, pods, cpu).await;
        create_namespace(
            client,
            &names::execution_space_name(name),
            json!({"karmada.io/system": "true"}),
        )
        .await;
    }
    ensure_namespace(client, ns).await;
}

/// Karmada's e2e FlinkDeployment (`test/e2e/suites/base/manifest/flinkdeployment-cr.yaml`): one
/// job manager and, from parallelism 2 over 2 slots, one task manager, each of 1 CPU.
async fn create_flink_deployment(client: &Client, ns: &str, name: &str) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment",
        "metadata": {"namespace": ns, "name": name},
        "spec": {
            "flinkConfiguration": {"taskmanager.numberOfTaskSlots": "2"},
            "flinkVersion": "v1_17", "image": "flink:1.17",
            "job": {"jarURI": "local:///opt/flink/examples/streaming/StateMachineExample.jar",
                "parallelism": 2, "state": "running", "upgradeMode": "stateless"},
            "jobManager": {"replicas": 1, "resource": {"cpu": 1, "memory": "100m"}},
            "serviceAccount": "flink",
            "taskManager": {"resource": {"cpu": 1, "memory": "100m"}},
        }
    }))
    .unwrap();
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &flink_deployments())
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
}

/// A policy placing `kind` objects of `ns` on exactly one of the two clusters, Aggregated.
async fn one_cluster_policy(client: &Client, ns: &str, name: &str, api_version: &str, kind: &str) {
    let pp: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"namespace": ns, "name": name},
        "spec": {
            "resourceSelectors": [{"apiVersion": api_version, "kind": kind}],
            "placement": {
                "clusterAffinity": {"clusterNames": [PODS_RICH, CPU_RICH]},
                "spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}],
                "replicaScheduling": {"replicaSchedulingType": "Divided",
                    "replicaDivisionPreference": "Aggregated"},
            }
        }
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pp)
        .await
        .unwrap();
}

async fn binding(
    client: &Client,
    ns: &str,
    kind: &str,
    name: &str,
) -> Result<ResourceBinding, String> {
    let rb_name = names::binding_name(kind, name);
    Api::<ResourceBinding>::namespaced(client.clone(), ns)
        .get_opt(&rb_name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no binding {rb_name}"))
}

/// The Warning Events with `reason` about object `name` in `ns`, as messages.
async fn warnings(client: &Client, ns: &str, name: &str, reason: &str) -> Vec<String> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason) && e.type_.as_deref() == Some("Warning"))
        .map(|e| e.message.unwrap_or_default())
        .collect()
}

/// A `componentResource` script that fails records `GetComponentsFailed` on its template; one that
/// repeats a component name leaves the binding unwritten with Karmada's webhook message.
async fn bad_components_are_reported(client: &Client, ns: &str) {
    // A componentResource script that fails, and one that repeats a name.
    let ric: ResourceInterpreterCustomization = serde_json::from_value(json!({
        "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
        "metadata": {"name": "pipeline-components"},
        "spec": {"target": {"apiVersion": "example.io/v1", "kind": "Pipeline"},
            "customizations": {"componentResource": {"luaScript": r#"
function GetComponents(desiredObj)
  if desiredObj.spec.mode == "fail" then
    error("no components for this pipeline")
  end
  if desiredObj.spec.mode == "repeat" then
    return {{name = "stage", replicas = 1}, {name = "stage", replicas = 2}}
  end
  return {{name = "fetch", replicas = 1}, {name = "build", replicas = 2}}
end"#},
            "replicaRevision": {"luaScript": "
function ReviseReplica(obj, desiredReplica)
  obj.spec.replicas = desiredReplica
  return obj
end"}}}
    }))
    .unwrap();
    Api::<ResourceInterpreterCustomization>::all(client.clone())
        .patch(
            &ric.name_any(),
            &PatchParams::apply("multiple-pod-templates-test").force(),
            &Patch::Apply(&ric),
        )
        .await
        .unwrap();
    one_cluster_policy(client, ns, "pipelines", "example.io/v1", "Pipeline").await;
    let pipelines = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &pipelines());
    for (name, mode) in [("failing", "fail"), ("repeating", "repeat"), ("fine", "ok")] {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "example.io/v1", "kind": "Pipeline",
            "metadata": {"namespace": ns, "name": name},
            "spec": {"mode": mode, "replicas": 3},
        }))
        .unwrap();
        pipelines
            .create(&PostParams::default(), &obj)
            .await
            .unwrap();
    }
    eventually(
        "a GetComponentsFailed event on the failing Pipeline",
        async || {
            let found = warnings(client, ns, "failing", event_reasons::GET_COMPONENTS_FAILED).await;
            found
                .iter()
                .any(|m| m.contains("no components for this pipeline"))
                .then_some(())
                .ok_or_else(|| format!("events: {found:?}"))
        },
    )
    .await;
    eventually("an ApplyPolicyFailed event on the repeating Pipeline", async || {
        let found = warnings(client, ns, "repeating", event_reasons::APPLY_POLICY_FAILED).await;
        found
            .iter()
            .any(|m| {
                m.contains(r#"spec.components[1].name: Invalid value: "stage": component names must be unique"#)
            })
            .then_some(())
            .ok_or_else(|| format!("events: {found:?}"))
    })
    .await;
    for name in ["failing", "repeating"] {
        assert!(
            binding(client, ns, "Pipeline", name).await.is_err(),
            "{name}: no binding"
        );
    }
    // Components and a replicaRevision: the binding has no replicas, so the manifest keeps the
    // template's (Karmada's needReviseReplicas).
    let manifest = eventually("the fine Pipeline's Work", async || {
        for cluster in [PODS_RICH, CPU_RICH] {
            let works =
                Api::<Work>::namespaced(client.clone(), &names::execution_space_name(cluster))
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
            for w in works.items {
                for m in &w.spec.workload.manifests {
                    let v = m.to_value().map_err(|e| e.to_string())?;
                    if v["kind"] == "Pipeline" && v["metadata"]["name"] == "fine" {
                        return Ok(v);
                    }
                }
            }
        }
        Err("no Work with the fine Pipeline".to_owned())
    })
    .await;
    assert_eq!(manifest["spec"]["replicas"], json!(3), "{manifest}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_gate_a_flink_deployment_gets_components_and_the_cluster_a_set_fits() {
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    let ns = "mpt-on";
    prepare(&client, ns).await;
    let controllers = start_controllers(true).await;
    one_cluster_policy(
        &client,
        ns,
        "flink",
        "flink.apache.org/v1beta1",
        "FlinkDeployment",
    )
    .await;
    create_flink_deployment(&client, ns, "job").await;

    let rb = eventually("a scheduled binding with components", async || {
        let rb = binding(&client, ns, "FlinkDeployment", "job").await?;
        if rb.spec.components.is_empty() || rb.spec.clusters.is_empty() {
            return Err(format!(
                "components {:?}, replicas {}, clusters {:?}",
                rb.spec.components, rb.spec.replicas, rb.spec.clusters
            ));
        }
        Ok(rb)
    })
    .await;
    let components: Vec<Value> = rb
        .spec
        .components
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    assert_eq!(
        components,
        vec![
            json!({"name": "jobmanager", "replicas": 1,
                "replicaRequirements": {"resourceRequest": {"cpu": "1", "memory": "100m"}}}),
            json!({"name": "taskmanager", "replicas": 1,
                "replicaRequirements": {"resourceRequest": {"cpu": "1", "memory": "100m"}}}),
        ]
    );
    assert_eq!(rb.spec.replicas, 0);
    assert_eq!(rb.spec.replica_requirements, None);
    // Two free CPUs a set: the cluster with 100 free pods but one CPU takes none, the one with ten
    // pods and eight CPUs four. The components go there whole.
    let clusters: Vec<(String, i32)> = rb
        .spec
        .clusters
        .iter()
        .map(|c| (c.name.clone(), c.replicas))
        .collect();
    assert_eq!(clusters, vec![(CPU_RICH.to_owned(), 0)]);

    bad_components_are_reported(&client, ns).await;
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_gate_a_flink_deployment_binding_carries_replicas() {
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    let ns = "mpt-off";
    prepare(&client, ns).await;
    let controllers = start_controllers(false).await;
    one_cluster_policy(
        &client,
        ns,
        "flink",
        "flink.apache.org/v1beta1",
        "FlinkDeployment",
    )
    .await;
    create_flink_deployment(&client, ns, "job").await;
    let rb = eventually("a scheduled binding with replicas", async || {
        let rb = binding(&client, ns, "FlinkDeployment", "job").await?;
        if rb.spec.replicas == 0 || rb.spec.clusters.is_empty() {
            return Err(format!(
                "replicas {}, clusters {:?}",
                rb.spec.replicas, rb.spec.clusters
            ));
        }
        Ok(rb)
    })
    .await;
    assert!(rb.spec.components.is_empty(), "{:?}", rb.spec.components);
    assert!(rb.spec.replica_requirements.is_some());
    controllers.stop().await;
}
