//! ResourceInterpreterCustomization end to end against real API servers: a CRD-based workload
//! (`Widget`, replicas in `spec.size`) whose customization defines replicas, revision, status
//! reflection, health and aggregation is divided over two members by the script, and its health and
//! aggregated status come home; Lua scripts with a syntax error, an endless loop or a memory bomb
//! (one kind each) get a clear Warning Event on their template while the Widget keeps propagating.
//!
//! A second workload kind (`Gizmo`) is interpreted by a ResourceInterpreterWebhookConfiguration
//! served by a small HTTPS server in the test (its own self-signed CA in `caBundle`), with one
//! customization rule in front of it (customization wins); a webhook that never answers and one
//! that cannot be reached fail their templates' interpretation with a clear Event within their
//! timeouts (Karmada has no failure policy: every webhook failure fails the operation).
//!
//! The detector, scheduler, binding, execution, workStatus and bindingStatus controllers run
//! in-process; the members are API servers only, so the test writes the member Widgets' status the
//! way a member operator would. Cluster objects and their Ready status are written by the test.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karmada_apis::config::v1alpha1::{
    ResourceInterpreterCustomization, ResourceInterpreterWebhookConfiguration,
};
use karmada_apis::well_known::event_reasons;
use karmada_apis::{Cluster, PropagationPolicy, ResourceBinding, names};
use karmada_controllers::members::member_cluster_options;
use karmada_e2e::in_process::{self, Controllers, Harness, ensure_namespace, serial};
use karmada_e2e::tls::localhost as tls;
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
/// The webhook test kinds: one interpreted by the test's webhook, one whose webhook never
/// answers, one whose webhook cannot be reached.
const WEBHOOK_KINDS: [&str; 3] = ["Gizmo", "Slowpoke", "Unreachable"];

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
        .chain(&WEBHOOK_KINDS)
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
  "replicaResource": "function GetReplicas(obj) return obj.spec.size, {resourceRequest = {cpu = 0.1}} end",
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

/// `Ok` once the binding of `kind` `name` has two Healthy aggregated statuses reporting
/// `{"ready": 2}` (one per member); else the items seen.
async fn healthy_in_both(host: &Client, kind: &str, name: &str) -> Result<(), String> {
    let rb = binding(host, kind, name).await?;
    let items = rb.status.map(|s| s.aggregated_status).unwrap_or_default();
    let healthy = items
        .iter()
        .filter(|i| {
            i.health == Some(karmada_apis::work::v1alpha1::ResourceHealth::Healthy)
                && i.status == Some(json!({"ready": 2}).into())
        })
        .count();
    (healthy == 2)
        .then_some(())
        .ok_or_else(|| format!("{items:?}"))
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
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
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
    // The script's number is written as Karmada's binding carries a quantity: canonically.
    assert_eq!(
        serde_json::to_value(&rb.spec.replica_requirements).unwrap()["resourceRequest"],
        json!({"cpu": "100m"})
    );

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
        healthy_in_both(&host, "Widget", "w").await
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

    // The failing customizations hear about it too.
    eventually(
        "an InterpreterScriptFailed event on broken-rules",
        async || {
            let found: Vec<String> = Api::<Event>::namespaced(host.clone(), "default")
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .into_iter()
                .filter(|e| {
                    e.involved_object.kind.as_deref() == Some("ResourceInterpreterCustomization")
                        && e.involved_object.name.as_deref() == Some("broken-rules")
                        && e.reason.as_deref() == Some(event_reasons::INTERPRETER_SCRIPT_FAILED)
                })
                .filter_map(|e| e.message)
                .collect();
            found
                .iter()
                .any(|m| m.contains("syntax error") && m.contains("Broken"))
                .then_some(())
                .ok_or_else(|| format!("events: {found:?}"))
        },
    )
    .await;

    controllers.stop().await;
}

/// The messages of the Warning Events `InterpreterScriptFailed` on customization `name`.
async fn customization_warnings(client: &Client, name: &str) -> Vec<String> {
    customization_events(client, name, event_reasons::INTERPRETER_SCRIPT_FAILED).await
}

/// The messages of the Warning Events with `reason` on the customization `name`.
async fn customization_events(client: &Client, name: &str, reason: &str) -> Vec<String> {
    Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("ResourceInterpreterCustomization")
                && e.involved_object.name.as_deref() == Some(name)
                && e.reason.as_deref() == Some(reason)
                && e.type_.as_deref() == Some("Warning")
        })
        .filter_map(|e| e.message)
        .collect()
}

/// Karmada's webhook refuses a customization whose Lua does not compile; here it is accepted and
/// reported on itself at once — with no object of its target kind anywhere — naming the field and
/// the cause, once per version; a fixed version gets no new report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_customization_that_does_not_compile_is_reported_when_written() {
    let _serial = serial().lock().await;
    let host = env().host().client().await;
    let controllers = start_controllers().await;
    let name = "unused-rules";
    // No CRD, no object of this kind: only the customization itself can tell.
    let ric: ResourceInterpreterCustomization = serde_json::from_value(json!({
        "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
        "metadata": {"name": name},
        "spec": {"target": {"apiVersion": format!("{GROUP}/v1"), "kind": "Unused"},
            "customizations": {
                "replicaResource": lua("function GetReplicas(obj) return obj.spec.size, nil end"),
                "retention": lua("function Retain(desired, observed) return desired"),
                "healthInterpretation": lua("function Healthy(obj) return true end")}}
    }))
    .unwrap();
    let rics: Api<ResourceInterpreterCustomization> = Api::all(host.clone());
    rics.create(&PostParams::default(), &ric).await.unwrap();
    let found = eventually(
        "InterpreterScriptFailed events on unused-rules",
        async || {
            let found = customization_warnings(&host, name).await;
            (found.len() == 2)
                .then(|| found.clone())
                .ok_or_else(|| format!("events: {found:?}"))
        },
    )
    .await;
    assert!(
        found
            .iter()
            .any(|m| m.contains("unused-rules retention") && m.contains("syntax error")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|m| m.contains("unused-rules healthInterpretation")
                && m.contains("InterpretHealth")),
        "{found:?}"
    );
    assert!(
        !found.iter().any(|m| m.contains("replicaResource")),
        "{found:?}"
    );

    // Fixed: nothing new is reported (the two Events stay as they were).
    rics.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"customizations": {
            "retention": lua("function Retain(desired, observed) return desired end"),
            "healthInterpretation": lua("function InterpretHealth(obj) return true end")}}})),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(customization_warnings(&host, name).await.len(), 2);
    rics.delete(name, &Default::default()).await.unwrap();
    controllers.stop().await;
}

/// Karmada's webhook refuses a customization defining an operation another customization of the
/// same target already defines; here the second is accepted and reported on itself, naming the
/// operation, the other customization and the one whose script is used (the first by name).
/// Dependency scripts, which add up, are no conflict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_customization_of_an_operation_is_reported_when_written() {
    let _serial = serial().lock().await;
    let host = env().host().client().await;
    let controllers = start_controllers().await;
    let rics: Api<ResourceInterpreterCustomization> = Api::all(host.clone());
    let customization = |name: &str, rules: Value| -> ResourceInterpreterCustomization {
        serde_json::from_value(json!({
            "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
            "metadata": {"name": name},
            "spec": {"target": {"apiVersion": format!("{GROUP}/v1"), "kind": "Twice"},
                "customizations": rules}
        }))
        .unwrap()
    };
    let dependencies = lua("function GetDependencies(obj) return {} end");
    rics.create(
        &PostParams::default(),
        &customization(
            "twice-a",
            json!({"healthInterpretation": lua("function InterpretHealth(obj) return true end"),
                "dependencyInterpretation": dependencies}),
        ),
    )
    .await
    .unwrap();
    rics.create(
        &PostParams::default(),
        &customization(
            "twice-b",
            json!({"healthInterpretation": lua("function InterpretHealth(obj) return false end"),
                "replicaResource": lua("function GetReplicas(obj) return 1, nil end"),
                "dependencyInterpretation": dependencies}),
        ),
    )
    .await
    .unwrap();
    let found = eventually(
        "an InterpreterCustomizationConflict event on twice-b",
        async || {
            let found = customization_events(
                &host,
                "twice-b",
                event_reasons::INTERPRETER_CUSTOMIZATION_CONFLICT,
            )
            .await;
            (!found.is_empty())
                .then(|| found.clone())
                .ok_or_else(|| "no event yet".to_owned())
        },
    )
    .await;
    assert_eq!(
        found,
        [format!(
            "conflicting with InterpreterOperation(InterpretHealth) of existing \
             ResourceInterpreterCustomization(twice-a): both customize {GROUP}/v1 Twice; \
             twice-a's script is used (the first by name), this one's is ignored"
        )]
    );
    for name in ["twice-a", "twice-b"] {
        rics.delete(name, &Default::default()).await.unwrap();
    }
    controllers.stop().await;
}

/// The test's interpreter webhook: a TLS listener on loopback answering every
/// ResourceInterpreterContext for Gizmos (spec.size replicas, status.ready), recording the
/// operations it was asked.
struct WebhookServer {
    url: String,
    ca_pem: String,
    asked: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

/// Reads one HTTP/1.1 request's body (Content-Length framed, as kube's client sends).
async fn read_body<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> Option<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + length {
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            return Some(buf[end + 4..end + 4 + length].to_vec());
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The webhook's answer to one request.
fn answer(request: &Value) -> Value {
    use base64::Engine;
    let object = &request["object"];
    let size = object["spec"]["size"].as_i64().unwrap_or(0);
    let patch = |ops: Value| {
        base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&ops).unwrap())
    };
    let mut response = json!({"uid": request["uid"], "successful": true});
    match request["operation"].as_str().unwrap_or_default() {
        "InterpretReplica" => response["replicas"] = json!(size),
        "ReviseReplica" => {
            response["patch"] = json!(patch(
                json!([{"op": "replace", "path": "/spec/size", "value": request["replicas"]}])
            ));
            response["patchType"] = json!("JSONPatch");
        }
        "InterpretStatus" => {
            response["rawStatus"] = match object["status"]["ready"].as_i64() {
                Some(ready) => json!({"ready": ready}),
                None => json!({}),
            };
        }
        "InterpretHealth" => {
            response["healthy"] = json!(object["status"]["ready"].as_i64() == Some(size));
        }
        "AggregateStatus" => {
            let items = request["aggregatedStatus"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let ready: i64 = items
                .iter()
                .filter_map(|i| i["status"]["ready"].as_i64())
                .sum();
            let status = json!({"ready": ready, "clusters": items.len()});
            response["patch"] = json!(patch(
                json!([{"op": "add", "path": "/status", "value": status}])
            ));
            response["patchType"] = json!("JSONPatch");
        }
        // Retain and the rest: nothing to change.
        _ => {}
    }
    json!({"apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterContext", "response": response})
}

impl WebhookServer {
    async fn start() -> Self {
        use tokio::io::AsyncWriteExt;
        let (config, ca_pem) = tls();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}/interpret", listener.local_addr().unwrap());
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let log = log.clone();
                connections.spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Some(body) = read_body(&mut tls).await else {
                        return;
                    };
                    let context: Value = serde_json::from_slice(&body).unwrap_or_default();
                    let request = &context["request"];
                    log.lock()
                        .unwrap()
                        .push(request["operation"].as_str().unwrap_or_default().to_owned());
                    let out = serde_json::to_vec(&answer(request)).unwrap();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        out.len()
                    );
                    let _ = tls.write_all(head.as_bytes()).await;
                    let _ = tls.write_all(&out).await;
                    let _ = tls.shutdown().await;
                });
                while connections.try_join_next().is_some() {}
            }
        });
        WebhookServer {
            url,
            ca_pem,
            asked,
            task,
        }
    }
}

/// A loopback listener that accepts connections and never answers; held open by the task.
async fn silent_server() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    (url, task)
}

/// A ResourceInterpreterWebhookConfiguration `name` with one webhook for `kind`'s every
/// operation at `url`.
async fn webhook_configuration(
    client: &Client,
    name: &str,
    kind: &str,
    url: &str,
    ca_pem: Option<&str>,
    timeout_seconds: i32,
) {
    use base64::Engine;
    let mut client_config = json!({"url": url});
    if let Some(pem) = ca_pem {
        client_config["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(pem));
    }
    let config: ResourceInterpreterWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{"name": "interpreter.example.io", "clientConfig": client_config,
            "rules": [{"operations": ["*"], "apiGroups": [GROUP], "apiVersions": ["v1"], "kinds": [kind]}],
            "timeoutSeconds": timeout_seconds,
            "interpreterContextVersions": ["v1alpha1"]}]
    }))
    .unwrap();
    Api::<ResourceInterpreterWebhookConfiguration>::all(client.clone())
        .patch(
            name,
            &PatchParams::apply("interpreter-customization-test").force(),
            &Patch::Apply(&config),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn webhook_interprets_a_workload_end_to_end_and_failing_webhooks_fail_within_their_timeout() {
    let _serial = serial().lock().await;
    let host = env().host().client().await;
    let members = [
        env().members()[0].client().await,
        env().members()[1].client().await,
    ];
    for kind in WEBHOOK_KINDS {
        install_crd(&host, kind).await;
    }
    for m in &members {
        install_crd(m, "Gizmo").await;
        ensure_namespace(m, NS).await;
    }
    ensure_namespace(&host, NS).await;
    for m in MEMBERS {
        ensure_namespace(&host, &names::execution_space_name(m)).await;
        ready_cluster(&host, m).await;
    }
    let server = WebhookServer::start().await;
    let (silent_url, silent) = silent_server().await;
    webhook_configuration(
        &host,
        "gizmos",
        "Gizmo",
        &server.url,
        Some(&server.ca_pem),
        10,
    )
    .await;
    webhook_configuration(&host, "slowpokes", "Slowpoke", &silent_url, None, 1).await;
    webhook_configuration(
        &host,
        "unreachables",
        "Unreachable",
        "https://127.0.0.1:1/",
        None,
        1,
    )
    .await;
    // A customization in front of the webhook: health comes from Lua, never from the webhook.
    customize(
        &host,
        "Gizmo",
        json!({"healthInterpretation": lua("function InterpretHealth(obj) return obj.status ~= nil and obj.status.ready == obj.spec.size end")}),
    )
    .await;
    for kind in WEBHOOK_KINDS {
        policy(&host, kind).await;
    }
    let controllers = start_controllers().await;

    for kind in ["Slowpoke", "Unreachable"] {
        create(&host, kind, "bad", 2).await;
    }
    let gizmos = create(&host, "Gizmo", "g", 4).await;

    // Replicas from the webhook (spec.size); a touch makes the detector look again should it
    // have met the Gizmo before its cache held the configuration.
    let mut touches = 0;
    eventually(
        "the Gizmo's binding with the webhook's replicas",
        async || {
            let rb = binding(&host, "Gizmo", "g").await?;
            if rb.spec.replicas != 4 {
                touches += 1;
                let touch =
                    json!({"metadata": {"annotations": {"test/touch": touches.to_string()}}});
                let _ = gizmos
                    .patch("g", &PatchParams::default(), &Patch::Merge(&touch))
                    .await;
                return Err(format!("binding replicas {}", rb.spec.replicas));
            }
            Ok(())
        },
    )
    .await;

    // Divided 2/2, each member's Gizmo revised by the webhook's JSON patch.
    for (i, m) in members.iter().enumerate() {
        let api: Api<DynamicObject> = Api::namespaced_with(m.clone(), NS, &resource("Gizmo"));
        eventually(
            &format!("the Gizmo in member{} with size 2", i + 1),
            async || {
                let g = api.get_opt("g").await.map_err(|e| e.to_string())?;
                match g.map(|g| g.data["spec"]["size"].clone()) {
                    Some(size) if size == json!(2) => Ok(()),
                    other => Err(format!("size {other:?}")),
                }
            },
        )
        .await;
        api.patch_status(
            "g",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"ready": 2}})),
        )
        .await
        .unwrap();
    }

    // Status reflected by the webhook, health by the customization, aggregation by the webhook.
    eventually(
        "healthy aggregated statuses on the Gizmo's binding",
        async || healthy_in_both(&host, "Gizmo", "g").await,
    )
    .await;
    eventually("the aggregated status on the Gizmo", async || {
        let g = gizmos.get("g").await.map_err(|e| e.to_string())?;
        let status = g.data.get("status").cloned().unwrap_or_default();
        (status == json!({"ready": 4, "clusters": 2}))
            .then_some(())
            .ok_or_else(|| format!("status {status}"))
    })
    .await;
    let asked = server.asked.lock().unwrap().clone();
    for op in [
        "InterpretReplica",
        "ReviseReplica",
        "InterpretStatus",
        "AggregateStatus",
    ] {
        assert!(asked.iter().any(|a| a == op), "{op} not asked: {asked:?}");
    }
    assert!(
        !asked.iter().any(|a| a == "InterpretHealth"),
        "the customization comes before the webhook: {asked:?}"
    );

    // Failing webhooks fail the interpretation, named, within their 1s timeout.
    for (kind, cause) in [
        ("Slowpoke", "no answer within 1s"),
        ("Unreachable", "failed to call webhook"),
    ] {
        eventually(&format!("a {kind} GetReplicasFailed event"), async || {
            let found = warnings(&host, "bad", event_reasons::GET_REPLICAS_FAILED).await;
            found
                .iter()
                .any(|m| {
                    m.contains(cause)
                        && m.contains(&format!("{}s/interpreter.example.io", kind.to_lowercase()))
                })
                .then_some(())
                .ok_or_else(|| format!("events: {found:?}"))
        })
        .await;
    }

    controllers.stop().await;
    server.task.abort();
    silent.abort();
}
