//! ResourceInterpreterCustomization end to end against real API servers: a CRD-based workload
//! (`Widget`, replicas in `spec.size`) whose customization defines replicas, revision, status
//! reflection, health and aggregation is divided over two members by the script, and its health and
//! aggregated status come home; Lua scripts with a syntax error, an endless loop or a memory bomb
//! (one kind each) get a clear Warning Event on their template while the Widget keeps propagating.
//!
//! The detector, scheduler, binding, execution, workStatus and bindingStatus controllers run
//! in-process; the members are API servers only, so the test writes the member Widgets' status the
//! way a member operator would. Cluster objects and their Ready status are written by the test.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karmada_apis::config::v1alpha1::ResourceInterpreterCustomization;
use karmada_apis::well_known::event_reasons;
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
const NS: &str = "ric-test";
const GROUP: &str = "example.io";
/// The test kinds: one with a working customization, three with a broken one.
const KINDS: [&str; 4] = ["Widget", "Broken", "Looper", "Hog"];

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
    in_process::eventually(what, WAIT, Duration::from_millis(200), check).await
}

fn plural(kind: &str) -> String {
    format!("{}s", kind.to_lowercase())
}

fn resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", kind), &plural(kind))
}

/// A namespaced CRD of `kind` that keeps any field, with a status subresource; waits until served.
async fn install_crd(client: &Client, kind: &str) {
    let name = format!("{}.{GROUP}", plural(kind));
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural(kind), "singular": kind.to_lowercase()},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .patch(
            &name,
            &PatchParams::apply("interpreter-customization-test").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource(kind));
    eventually(&format!("{name} served"), async || {
        api.list(&ListParams::default().limit(1))
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
}

/// The customization of `kind`: `rules` by field name.
async fn customize(client: &Client, kind: &str, rules: Value) {
    let ric: ResourceInterpreterCustomization = serde_json::from_value(json!({
        "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
        "metadata": {"name": format!("{}-rules", kind.to_lowercase())},
        "spec": {"target": {"apiVersion": format!("{GROUP}/v1"), "kind": kind},
            "customizations": rules}
    }))
    .unwrap();
    Api::<ResourceInterpreterCustomization>::all(client.clone())
        .patch(
            &ric.name_any(),
            &PatchParams::apply("interpreter-customization-test").force(),
            &Patch::Apply(&ric),
        )
        .await
        .unwrap();
}

fn lua(script: &str) -> Value {
    json!({"luaScript": script})
}

/// A Cluster object with a Ready status serving the test kinds.
async fn ready_cluster(client: &Client, name: &str) {
    let api: Api<Cluster> = Api::all(client.clone());
    let c: Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:1"}
    }))
    .unwrap();
    let _ = api.create(&PostParams::default(), &c).await;
    let resources: Vec<Value> = KINDS
        .iter()
        .map(|k| json!({"name": plural(k), "kind": k}))
        .collect();
    let apis = json!({"apiEnablements": [{"groupVersion": format!("{GROUP}/v1"), "resources": resources}]});
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
    Harness::new(controllers)
        .settings(karmada_controllers::Settings {
            skipped_propagating_namespaces: vec![],
            ..in_process::settings()
        })
        .members(&MEMBERS, member_cluster_options())
        .start(env())
        .await
}

/// A policy propagating every object of `kind` in the namespace, replicas divided 1:1.
async fn policy(client: &Client, kind: &str) {
    let p: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": kind.to_lowercase(), "namespace": NS},
        "spec": {
            "resourceSelectors": [{"apiVersion": format!("{GROUP}/v1"), "kind": kind}],
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
    let _ = Api::<PropagationPolicy>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &p)
        .await;
}

async fn create(client: &Client, kind: &str, name: &str, size: i64) -> Api<DynamicObject> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &resource(kind));
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": {"size": size}
    }))
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
    api
}

const WIDGET_RULES: &str = r#"{
  "replicaResource": "function GetReplicas(obj) return obj.spec.size, nil end",
  "replicaRevision": "function ReviseReplica(obj, desired) obj.spec.size = desired return obj end",
  "statusReflection": "function ReflectStatus(obj) if obj.status == nil then return {} end return {ready = obj.status.ready} end",
  "healthInterpretation": "function InterpretHealth(obj) return obj.status ~= nil and obj.status.ready == obj.spec.size end",
  "statusAggregation": "function AggregateStatus(obj, items) local ready = 0 for i = 1, #items do if items[i].status ~= nil and items[i].status.ready ~= nil then ready = ready + items[i].status.ready end end obj.status = {ready = ready, clusters = #items} return obj end"
}"#;

fn widget_rules() -> Value {
    let rules: Value = serde_json::from_str(WIDGET_RULES).unwrap();
    let mut out = serde_json::Map::new();
    for (field, script) in rules.as_object().unwrap() {
        out.insert(field.clone(), lua(script.as_str().unwrap()));
    }
    Value::Object(out)
}

/// The binding of a template, once it exists.
async fn binding(client: &Client, kind: &str, name: &str) -> Result<ResourceBinding, String> {
    let rb_name = names::binding_name(kind, name);
    Api::<ResourceBinding>::namespaced(client.clone(), NS)
        .get_opt(&rb_name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no binding {rb_name}"))
}

/// The Warning events about template `name` with `reason`.
async fn warnings(client: &Client, name: &str, reason: &str) -> Vec<String> {
    Api::<Event>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some(name)
                && e.reason.as_deref() == Some(reason)
                && e.type_.as_deref() == Some("Warning")
        })
        .filter_map(|e| e.message)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn customized_workload_divides_reports_health_and_aggregates_and_bad_scripts_are_reported() {
    let _serial = serial().lock().await;
    let host = env().host().client().await;
    let members = [
        env().members()[0].client().await,
        env().members()[1].client().await,
    ];
    for kind in KINDS {
        install_crd(&host, kind).await;
    }
    for m in &members {
        install_crd(m, "Widget").await;
        ensure_namespace(m, NS).await;
    }
    ensure_namespace(&host, NS).await;
    for m in MEMBERS {
        ensure_namespace(&host, &names::execution_space_name(m)).await;
        ready_cluster(&host, m).await;
    }
    customize(&host, "Widget", widget_rules()).await;
    customize(
        &host,
        "Broken",
        json!({"replicaResource": lua("function GetReplicas(obj) return obj.spec.size")}),
    )
    .await;
    customize(
        &host,
        "Looper",
        json!({"replicaResource": lua("function GetReplicas(obj) while true do end end")}),
    )
    .await;
    customize(
        &host,
        "Hog",
        json!({"replicaResource": lua("function GetReplicas(obj) local s = 'x' for i = 1, 40 do s = s .. s end return 1 end")}),
    )
    .await;
    for kind in KINDS {
        policy(&host, kind).await;
    }
    let controllers = start_controllers().await;

    // The broken kinds first: they must not hold up the Widget.
    for kind in ["Broken", "Looper", "Hog"] {
        create(&host, kind, "bad", 2).await;
    }
    let widgets = create(&host, "Widget", "w", 4).await;

    // Replicas come from the script (spec.size). Should the detector have met the Widget before
    // its cache held the customization, a touch makes it look again.
    let mut touches = 0;
    let rb = eventually(
        "the Widget's binding with the scripted replicas",
        async || {
            let rb = binding(&host, "Widget", "w").await?;
            if rb.spec.replicas != 4 {
                touches += 1;
                let touch =
                    json!({"metadata": {"annotations": {"test/touch": touches.to_string()}}});
                let _ = widgets
                    .patch("w", &PatchParams::default(), &Patch::Merge(&touch))
                    .await;
                return Err(format!("binding replicas {}", rb.spec.replicas));
            }
            Ok(rb)
        },
    )
    .await;
    assert_eq!(rb.spec.replicas, 4);

    // Divided 2/2, and each member's Widget revised by the script.
    for (i, m) in members.iter().enumerate() {
        let api: Api<DynamicObject> = Api::namespaced_with(m.clone(), NS, &resource("Widget"));
        eventually(
            &format!("the Widget in member{} with size 2", i + 1),
            async || {
                let w = api.get_opt("w").await.map_err(|e| e.to_string())?;
                match w.map(|w| w.data["spec"]["size"].clone()) {
                    Some(size) if size == json!(2) => Ok(()),
                    other => Err(format!("size {other:?}")),
                }
            },
        )
        .await;
    }

    // Member operators report readiness; health and status come home.
    for m in &members {
        let api: Api<DynamicObject> = Api::namespaced_with(m.clone(), NS, &resource("Widget"));
        api.patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"ready": 2}})),
        )
        .await
        .unwrap();
    }
    eventually("healthy aggregated statuses on the binding", async || {
        let rb = binding(&host, "Widget", "w").await?;
        let items = rb.status.map(|s| s.aggregated_status).unwrap_or_default();
        let healthy = items
            .iter()
            .filter(|i| {
                i.health == Some(karmada_apis::work::v1alpha1::ResourceHealth::Healthy)
                    && i.status == Some(json!({"ready": 2}))
            })
            .count();
        (healthy == 2)
            .then_some(())
            .ok_or_else(|| format!("{items:?}"))
    })
    .await;
    eventually("the aggregated status on the Widget", async || {
        let w = widgets.get("w").await.map_err(|e| e.to_string())?;
        let status = w.data.get("status").cloned().unwrap_or_default();
        (status == json!({"ready": 4, "clusters": 2}))
            .then_some(())
            .ok_or_else(|| format!("status {status}"))
    })
    .await;

    // Each broken script is reported on its template, naming the cause.
    for (kind, cause) in [
        ("Broken", "syntax error"),
        ("Looper", "stopped after running longer than"),
        ("Hog", "stopped after using more than"),
    ] {
        eventually(&format!("a {kind} GetReplicasFailed event"), async || {
            let found = warnings(&host, "bad", event_reasons::GET_REPLICAS_FAILED).await;
            found
                .iter()
                .any(|m| m.contains(cause) && m.contains(&format!("{}-rules", kind.to_lowercase())))
                .then_some(())
                .ok_or_else(|| format!("events: {found:?}"))
        })
        .await;
        assert!(
            binding(&host, kind, "bad").await.is_err(),
            "{kind}: no binding"
        );
    }

    controllers.stop().await;
}
