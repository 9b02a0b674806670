//! The generated CRDs against a real kube-apiserver: they install, every sample in `examples/` is
//! accepted and reads back unchanged (nothing pruned, defaults as the Rust types expect), the Table
//! output (what `kubectl get` prints) shows Karmada's columns, and invalid objects are rejected with a
//! message naming the offending field.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Namespace;
use karmada_apis::{
    Cluster, ClusterOverridePolicy, ClusterPropagationPolicy, ClusterResourceBinding,
    OverridePolicy, PropagationPolicy, ResourceBinding, Work,
};
use kube::api::{Api, DynamicObject, GetParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

fn env() -> &'static testenv::TestEnv {
    testenv::shared(testenv::EnvOptions {
        members: 0,
        host_controller_manager: false,
        ..Default::default()
    })
}

/// A client of the host API server with the CRDs installed (once per test binary).
async fn client() -> Client {
    static INSTALLED: OnceCell<()> = OnceCell::const_new();
    let client = env().host().client().await;
    INSTALLED
        .get_or_init(|| async {
            testenv::install_crds(&client)
                .await
                .expect("the generated CRDs install and become Established");
        })
        .await;
    client
}

async fn namespace(client: &Client, name: &str) -> String {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace");
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("creating namespace {name}: {e}"),
    }
    name.to_owned()
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Every document of every `examples/*.yaml`, with its file name.
fn samples() -> Vec<(String, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .expect("examples/ exists")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable");
        let values: Vec<Value> = serde_saphyr::from_str_multiple(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        docs.extend(values.into_iter().map(|v| (name.clone(), v)));
    }
    docs
}

/// Asserts everything in `expected` is in `actual` unchanged; `actual` may have more (defaults,
/// server-populated metadata). Names the JSON path of the first difference.
fn assert_contains(expected: &Value, actual: &Value, path: &str) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (key, value) in e {
                let child = format!("{path}.{key}");
                match a.get(key) {
                    Some(found) => assert_contains(value, found, &child),
                    // Go's `omitempty`: an empty value and an absent field are the same.
                    None => assert!(
                        is_empty(value),
                        "{child} was dropped by the API server (was {value})"
                    ),
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            assert_eq!(e.len(), a.len(), "{path}: list length changed");
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                assert_contains(ev, av, &format!("{path}[{i}]"));
            }
        }
        (Value::Number(e), Value::Number(a)) => assert_eq!(e.as_f64(), a.as_f64(), "{path}"),
        _ => assert_eq!(expected, actual, "{path}: value changed"),
    }
}

/// Whether Go's `omitempty` drops `value`.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// The text of a Table cell.
fn cell_text(cell: &Value) -> String {
    match cell {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// GETs one object as a `meta.k8s.io/v1` Table, as kubectl does, and returns column name → cell text.
async fn table_row(
    client: &Client,
    ar: &ApiResource,
    namespace: Option<&str>,
    name: &str,
) -> Vec<(String, String, i64)> {
    let path = if ar.group.is_empty() {
        format!("/api/{}", ar.version)
    } else {
        format!("/apis/{}/{}", ar.group, ar.version)
    };
    let path = match namespace {
        Some(ns) => format!("{path}/namespaces/{ns}/{}", ar.plural),
        None => format!("{path}/{}", ar.plural),
    };
    let mut request = kube::core::Request::new(path)
        .get(name, &GetParams::default())
        .expect("request");
    request.headers_mut().insert(
        "accept",
        "application/json;as=Table;v=v1;g=meta.k8s.io"
            .parse()
            .expect("header value"),
    );
    let table: Value = client.request(request).await.expect("Table output");
    assert_eq!(table["kind"], "Table", "{table}");
    let columns = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .clone();
    let cells = table["rows"][0]["cells"]
        .as_array()
        .expect("one row")
        .clone();
    assert_eq!(columns.len(), cells.len());
    columns
        .iter()
        .zip(cells.iter())
        .map(|(c, v)| {
            (
                c["name"].as_str().unwrap_or_default().to_owned(),
                cell_text(v),
                c["priority"].as_i64().unwrap_or(0),
            )
        })
        .collect()
}

/// Creates a sample through its Rust type (so the server sees what our serializer writes), sets its
/// status through the status subresource if it has one, reads it back and checks that nothing was lost
/// and that the Rust type parses the server's object to the same spec and status.
async fn create_sample<K>(
    client: &Client,
    namespace: Option<&str>,
    file: &str,
    mut doc: Value,
) -> Value
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
{
    if let Some(ns) = namespace {
        doc["metadata"]["namespace"] = json!(ns);
    }
    let typed: K = serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{file}: {e}"));
    let ours = serde_json::to_value(&typed).expect("serializes");
    let ar = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let name = doc["metadata"]["name"].as_str().expect("name").to_owned();
    let object: DynamicObject = serde_json::from_value(ours.clone()).expect("dynamic object");
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("{file}: creating {} {name}: {e}", ar.kind));
    if let Some(status) = ours.get("status") {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap_or_else(|e| panic!("{file}: writing the status of {name}: {e}"));
    }
    let server = serde_json::to_value(api.get(&name).await.expect("reads back")).expect("json");
    assert_contains(&doc, &server, file);
    let parsed: K = serde_json::from_value(server.clone())
        .unwrap_or_else(|e| panic!("{file}: the Rust type cannot parse the server's object: {e}"));
    // Karmada kinds: the server's defaults are exactly the ones the Rust types apply when parsing.
    // (Built-in kinds get server defaults the sample does not spell out.)
    if K::group(&()).ends_with("karmada.io") {
        let parsed = serde_json::to_value(&parsed).expect("serializes");
        assert_eq!(
            parsed["spec"], ours["spec"],
            "{file}: spec differs after the round trip"
        );
        assert_eq!(
            parsed.get("status"),
            ours.get("status"),
            "{file}: status differs"
        );
    }
    server
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn samples_are_accepted_and_read_back_unchanged_with_karmada_columns() {
    let client = client().await;
    let ns = namespace(&client, "crd-samples").await;
    let ns = Some(ns.as_str());
    let mut created = Vec::new();
    for (file, doc) in samples() {
        let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let (ar, scope) = match kind.as_str() {
            "Cluster" => {
                create_sample::<Cluster>(&client, None, &file, doc).await;
                (ApiResource::erase::<Cluster>(&()), None)
            }
            "PropagationPolicy" => {
                create_sample::<PropagationPolicy>(&client, ns, &file, doc).await;
                (ApiResource::erase::<PropagationPolicy>(&()), ns)
            }
            "ClusterPropagationPolicy" => {
                create_sample::<ClusterPropagationPolicy>(&client, None, &file, doc).await;
                (ApiResource::erase::<ClusterPropagationPolicy>(&()), None)
            }
            "OverridePolicy" => {
                create_sample::<OverridePolicy>(&client, ns, &file, doc).await;
                (ApiResource::erase::<OverridePolicy>(&()), ns)
            }
            "ClusterOverridePolicy" => {
                create_sample::<ClusterOverridePolicy>(&client, None, &file, doc).await;
                (ApiResource::erase::<ClusterOverridePolicy>(&()), None)
            }
            "Work" => {
                create_sample::<Work>(&client, ns, &file, doc).await;
                (ApiResource::erase::<Work>(&()), ns)
            }
            "ResourceBinding" => {
                create_sample::<ResourceBinding>(&client, ns, &file, doc).await;
                (ApiResource::erase::<ResourceBinding>(&()), ns)
            }
            "ClusterResourceBinding" => {
                create_sample::<ClusterResourceBinding>(&client, None, &file, doc).await;
                (ApiResource::erase::<ClusterResourceBinding>(&()), None)
            }
            "DriftPolicy" => {
                type K = karmada_apis::policy_rs::v1alpha1::DriftPolicy;
                create_sample::<K>(&client, ns, &file, doc).await;
                (ApiResource::erase::<K>(&()), ns)
            }
            "ClusterDriftPolicy" => {
                type K = karmada_apis::policy_rs::v1alpha1::ClusterDriftPolicy;
                create_sample::<K>(&client, None, &file, doc).await;
                (ApiResource::erase::<K>(&()), None)
            }
            "RolloutStrategy" => {
                type K = karmada_apis::rollout::RolloutStrategy;
                create_sample::<K>(&client, ns, &file, doc).await;
                (ApiResource::erase::<K>(&()), ns)
            }
            "Rollout" => {
                type K = karmada_apis::rollout::Rollout;
                create_sample::<K>(&client, ns, &file, doc).await;
                (ApiResource::erase::<K>(&()), ns)
            }
            "ResourceInterpreterWebhookConfiguration" => {
                type K = karmada_apis::config::v1alpha1::ResourceInterpreterWebhookConfiguration;
                create_sample::<K>(&client, None, &file, doc).await;
                (ApiResource::erase::<K>(&()), None)
            }
            "WorkloadRebalancer" => {
                type K = karmada_apis::apps::v1alpha1::WorkloadRebalancer;
                create_sample::<K>(&client, None, &file, doc).await;
                (ApiResource::erase::<K>(&()), None)
            }
            "FederatedHPA" => {
                type K = karmada_apis::autoscaling::v1alpha1::FederatedHPA;
                create_sample::<K>(&client, ns, &file, doc).await;
                (ApiResource::erase::<K>(&()), ns)
            }
            "CronFederatedHPA" => {
                type K = karmada_apis::autoscaling::v1alpha1::CronFederatedHPA;
                create_sample::<K>(&client, ns, &file, doc).await;
                (ApiResource::erase::<K>(&()), ns)
            }
            "Remedy" => {
                type K = karmada_apis::remedy::v1alpha1::Remedy;
                create_sample::<K>(&client, None, &file, doc).await;
                (ApiResource::erase::<K>(&()), None)
            }
            "ServiceExport" => {
                type K = karmada_apis::multicluster::v1alpha1::ServiceExport;
                create_sample::<K>(&client, ns, &file, doc).await;
                (ApiResource::erase::<K>(&()), ns)
            }
            "ServiceImport" => {
                type K = karmada_apis::multicluster::v1alpha1::ServiceImport;
                create_sample::<K>(&client, ns, &file, doc).await;
                (ApiResource::erase::<K>(&()), ns)
            }
            "Deployment" => {
                create_sample::<k8s_openapi::api::apps::v1::Deployment>(&client, ns, &file, doc)
                    .await;
                continue;
            }
            other => panic!("{file}: unexpected kind {other}"),
        };
        let row = table_row(&client, &ar, scope, &name).await;
        created.push((kind, name, row));
    }

    let cell = |kind: &str, name: &str, column: &str| -> (String, i64) {
        let (_, _, row) = created
            .iter()
            .find(|(k, n, _)| k == kind && n == name)
            .unwrap_or_else(|| panic!("no {kind} {name} created"));
        row.iter().find(|(c, _, _)| c == column).map_or_else(
            || panic!("{kind} table has no column {column}: {row:?}"),
            |(_, v, p)| (v.clone(), *p),
        )
    };
    let columns = |kind: &str| -> Vec<String> {
        let (_, _, row) = created.iter().find(|(k, _, _)| k == kind).expect("created");
        row.iter().map(|(c, _, _)| c.clone()).collect()
    };

    assert_eq!(
        columns("Cluster"),
        [
            "Name",
            "VERSION",
            "MODE",
            "READY",
            "AGE",
            "ZONES",
            "REGION",
            "PROVIDER",
            "API-ENDPOINT",
            "PROXY-URL"
        ]
    );
    assert_eq!(cell("Cluster", "member1", "Name").0, "member1");
    assert_eq!(
        columns("CronFederatedHPA"),
        ["Name", "REFERENCE-KIND", "REFERENCE-NAME", "AGE"]
    );
    assert_eq!(
        cell("CronFederatedHPA", "nginx-cron", "REFERENCE-KIND").0,
        "Deployment"
    );
    assert_eq!(
        cell("CronFederatedHPA", "nginx-cron", "REFERENCE-NAME").0,
        "nginx"
    );
    assert_eq!(
        columns("FederatedHPA"),
        [
            "Name",
            "REFERENCE-KIND",
            "REFERENCE-NAME",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE"
        ]
    );
    assert_eq!(
        cell("FederatedHPA", "nginx", "REFERENCE-KIND").0,
        "Deployment"
    );
    assert_eq!(cell("FederatedHPA", "nginx", "MINPODS").0, "2");
    assert_eq!(cell("FederatedHPA", "nginx", "MAXPODS").0, "10");
    assert_eq!(cell("Cluster", "member1", "VERSION").0, "v1.37.2");
    assert_eq!(cell("Cluster", "member1", "MODE").0, "Push");
    assert_eq!(cell("Cluster", "member1", "READY").0, "True");
    assert_eq!(
        cell("Cluster", "member1", "REGION"),
        ("eu-west-1".into(), 1)
    );
    assert_eq!(cell("Cluster", "member1", "PROVIDER"), ("aws".into(), 1));
    assert_eq!(
        cell("Cluster", "member1", "API-ENDPOINT"),
        ("https://172.18.0.3:6443".into(), 1)
    );
    assert!(cell("Cluster", "member1", "ZONES").0.contains("eu-west-1a"));

    assert_eq!(columns("DriftPolicy"), ["Name", "DRIFT", "TAKEOVER", "AGE"]);
    assert_eq!(cell("DriftPolicy", "nginx", "DRIFT").0, "ReportOnly");
    assert_eq!(cell("DriftPolicy", "nginx", "TAKEOVER").0, "IfNoDiff");
    assert_eq!(
        cell("ClusterDriftPolicy", "deployments", "TAKEOVER").0,
        "Never"
    );
    // karmada-rs's own kinds name their columns as Karmada's do: upper case, words joined by '-'.
    assert_eq!(
        columns("Rollout"),
        [
            "Name",
            "STRATEGY",
            "PHASE",
            "STAGE",
            "TARGET-REVISION",
            "STABLE-REVISION",
            "AGE"
        ]
    );
    assert_eq!(
        cell("Rollout", "nginx-deployment", "PHASE").0,
        "AwaitingApproval"
    );
    assert_eq!(cell("Rollout", "nginx-deployment", "STAGE").0, "canary");
    assert_eq!(
        cell("Rollout", "nginx-deployment", "TARGET-REVISION").0,
        "9b2e61f0c4d8a713"
    );
    assert_eq!(columns("RolloutStrategy"), ["Name", "Age"]);
    for kind in ["PropagationPolicy", "ClusterPropagationPolicy"] {
        assert_eq!(
            columns(kind),
            ["Name", "CONFLICT-RESOLUTION", "PRIORITY", "AGE"]
        );
    }
    assert_eq!(
        cell(
            "PropagationPolicy",
            "nginx-propagation",
            "CONFLICT-RESOLUTION"
        )
        .0,
        "Abort"
    );
    assert_eq!(
        cell("PropagationPolicy", "nginx-propagation", "PRIORITY").0,
        "0"
    );
    assert_eq!(
        cell("PropagationPolicy", "web-weighted", "CONFLICT-RESOLUTION").0,
        "Overwrite"
    );
    assert_eq!(
        cell("PropagationPolicy", "web-weighted", "PRIORITY").0,
        "10"
    );
    assert_eq!(
        cell(
            "ClusterPropagationPolicy",
            "platform-roles",
            "CONFLICT-RESOLUTION"
        )
        .0,
        "Abort"
    );

    assert_eq!(columns("Work"), ["Name", "WORKLOAD-KIND", "APPLIED", "AGE"]);
    assert_eq!(
        cell("Work", "nginx-687f7fb96f", "WORKLOAD-KIND").0,
        "Deployment"
    );
    assert_eq!(cell("Work", "nginx-687f7fb96f", "APPLIED").0, "True");

    for kind in ["ResourceBinding", "ClusterResourceBinding"] {
        assert_eq!(columns(kind), ["Name", "SCHEDULED", "FULLYAPPLIED", "AGE"]);
    }
    assert_eq!(
        cell("ResourceBinding", "nginx-deployment", "SCHEDULED").0,
        "True"
    );
    assert_eq!(
        cell("ResourceBinding", "nginx-deployment", "FULLYAPPLIED").0,
        "True"
    );
    assert_eq!(
        cell(
            "ClusterResourceBinding",
            "platform-viewer-clusterrole",
            "SCHEDULED"
        )
        .0,
        ""
    );

    // Kinds without printer columns get the server's default Name/Created At table.
    assert_eq!(columns("OverridePolicy")[0], "Name");
    assert_eq!(columns("ClusterOverridePolicy")[0], "Name");
    // Remedy declares no printer columns, as in Karmada: the API server's default for a CRD.
    assert_eq!(columns("Remedy"), ["Name", "Age"]);
    assert_eq!(
        cell("Remedy", "dns-traffic-control", "Name").0,
        "dns-traffic-control"
    );

    // The MCS API's columns, as in the mcs-api CRDs Karmada ships.
    assert_eq!(columns("ServiceExport"), ["Name", "Age"]);
    assert_eq!(columns("ServiceImport"), ["Name", "Type", "IP", "Age"]);
    assert_eq!(cell("ServiceImport", "web", "Type").0, "ClusterSetIP");

    // Short names and the karmada-io category are discoverable, as kubectl uses them.
    let mut names = Vec::new();
    for group_version in [
        "apps.karmada.io/v1alpha1",
        "apps.karmada-rs.io/v1alpha1",
        "autoscaling.karmada.io/v1alpha1",
        "cluster.karmada.io/v1alpha1",
        "multicluster.x-k8s.io/v1alpha1",
        "networking.karmada.io/v1alpha1",
        "policy.karmada.io/v1alpha1",
        "policy.karmada-rs.io/v1alpha1",
        "remedy.karmada.io/v1alpha1",
        "work.karmada.io/v1alpha1",
        "work.karmada.io/v1alpha2",
    ] {
        let list = client
            .list_api_group_resources(group_version)
            .await
            .unwrap_or_else(|e| panic!("discovery of {group_version}: {e}"));
        for resource in list.resources.iter().filter(|r| !r.name.contains('/')) {
            names.push((
                resource.name.clone(),
                resource.short_names.clone().unwrap_or_default().join(","),
                resource.categories.clone().unwrap_or_default().join(","),
            ));
        }
    }
    names.sort();
    let expected: Vec<(String, String, String)> = [
        ("clusterdriftpolicies", "cdp", "karmada-io"),
        ("clusteroverridepolicies", "cop", "karmada-io"),
        ("clusterpropagationpolicies", "cpp", "karmada-io"),
        ("clusterresourcebindings", "crb", "karmada-io"),
        ("clusters", "", ""),
        ("clustertaintpolicies", "", ""),
        ("cronfederatedhpas", "cronfhpa", "karmada-io"),
        ("driftpolicies", "dp", "karmada-io"),
        ("federatedhpas", "fhpa", "karmada-io"),
        ("federatedresourcequotas", "", "karmada-io"),
        ("multiclusteringresses", "mci", "karmada-io"),
        ("multiclusterservices", "mcs", "karmada-io"),
        ("overridepolicies", "op", "karmada-io"),
        ("propagationpolicies", "pp", "karmada-io"),
        ("remedies", "", "karmada-io"),
        ("resourcebindings", "rb", "karmada-io"),
        ("rollouts", "", "karmada-io"),
        ("rolloutstrategies", "", "karmada-io"),
        ("serviceexports", "svcex", ""),
        ("serviceimports", "svcim", ""),
        ("workloadrebalancers", "", ""),
        ("works", "wk", "karmada-io"),
    ]
    .iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    .collect();
    assert_eq!(names, expected);
}

/// One object the API server must reject, and the texts its error must contain (the field path first).
struct Invalid {
    what: &'static str,
    kind: &'static str,
    object: Value,
    expect: &'static [&'static str],
}

fn pp(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name},
        "spec": spec,
    })
}

fn deployments() -> Value {
    json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}])
}

fn drift_policy(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "policy.karmada-rs.io/v1alpha1",
        "kind": "DriftPolicy",
        "metadata": {"name": name},
        "spec": spec,
    })
}

#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
fn invalid_objects() -> Vec<Invalid> {
    vec![
        Invalid {
            what: "a DriftPolicy without selectors",
            kind: "DriftPolicy",
            object: drift_policy("dp-empty", json!({"resourceSelectors": []})),
            expect: &["spec.resourceSelectors", "at least 1 items"],
        },
        Invalid {
            what: "an unknown drift action",
            kind: "DriftPolicy",
            object: drift_policy(
                "dp-bad-drift",
                json!({"resourceSelectors": deployments(), "drift": "Ignore"}),
            ),
            expect: &["spec.drift", "Unsupported value: \"Ignore\""],
        },
        Invalid {
            what: "an unknown takeover",
            kind: "DriftPolicy",
            object: drift_policy(
                "dp-bad-takeover",
                json!({"resourceSelectors": deployments(), "takeover": "Sometimes"}),
            ),
            expect: &["spec.takeover", "Unsupported value: \"Sometimes\""],
        },
        Invalid {
            what: "a DriftPolicy selector without a kind",
            kind: "DriftPolicy",
            object: drift_policy(
                "dp-no-kind",
                json!({"resourceSelectors": [{"apiVersion": "apps/v1", "kind": ""}]}),
            ),
            expect: &[
                "spec.resourceSelectors",
                "every resource selector needs apiVersion and kind",
            ],
        },
        Invalid {
            what: "an empty resourceSelectors list",
            kind: "PropagationPolicy",
            object: pp("empty-selectors", json!({"resourceSelectors": []})),
            expect: &["spec.resourceSelectors", "at least 1 items"],
        },
        Invalid {
            what: "missing resourceSelectors",
            kind: "PropagationPolicy",
            object: pp("no-selectors", json!({"placement": {}})),
            expect: &["spec.resourceSelectors", "Required value"],
        },
        Invalid {
            what: "an unknown replicaSchedulingType",
            kind: "PropagationPolicy",
            object: pp(
                "bad-scheduling-type",
                json!({"resourceSelectors": deployments(), "placement": {"replicaScheduling": {"replicaSchedulingType": "Sideways"}}}),
            ),
            expect: &[
                "spec.placement.replicaScheduling.replicaSchedulingType",
                "Unsupported value: \"Sideways\"",
            ],
        },
        Invalid {
            what: "a negative weight",
            kind: "PropagationPolicy",
            object: pp(
                "negative-weight",
                json!({"resourceSelectors": deployments(), "placement": {"replicaScheduling": {
                    "replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                    "weightPreference": {"staticWeightList": [{"targetCluster": {"clusterNames": ["member1"]}, "weight": -1}]}}}}),
            ),
            expect: &[
                "spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight",
                "greater than or equal to 1",
            ],
        },
        Invalid {
            what: "a zero weight",
            kind: "PropagationPolicy",
            object: pp(
                "zero-weight",
                json!({"resourceSelectors": deployments(), "placement": {"replicaScheduling": {
                    "replicaSchedulingType": "Divided",
                    "weightPreference": {"staticWeightList": [{"targetCluster": {"clusterNames": ["member1"]}, "weight": 0}]}}}}),
            ),
            expect: &["staticWeightList[0].weight", "greater than or equal to 1"],
        },
        Invalid {
            what: "minGroups > maxGroups",
            kind: "PropagationPolicy",
            object: pp(
                "min-over-max",
                json!({"resourceSelectors": deployments(), "placement": {"spreadConstraints": [
                    {"spreadByField": "cluster", "minGroups": 3, "maxGroups": 2}]}}),
            ),
            expect: &[
                "spec.placement.spreadConstraints[0].maxGroups",
                "maxGroups lower than minGroups is not allowed",
            ],
        },
        Invalid {
            what: "negative minGroups",
            kind: "PropagationPolicy",
            object: pp(
                "negative-min-groups",
                json!({"resourceSelectors": deployments(), "placement": {"spreadConstraints": [
                    {"spreadByField": "cluster", "minGroups": -1}]}}),
            ),
            expect: &[
                "spec.placement.spreadConstraints[0].minGroups",
                "greater than or equal to 0",
            ],
        },
        Invalid {
            what: "spreadByField with spreadByLabel",
            kind: "PropagationPolicy",
            object: pp(
                "field-and-label",
                json!({"resourceSelectors": deployments(), "placement": {"spreadConstraints": [
                    {"spreadByField": "cluster", "spreadByLabel": "topology"}]}}),
            ),
            expect: &[
                "spec.placement.spreadConstraints[0]",
                "spreadByLabel should not co-exist with spreadByField",
            ],
        },
        Invalid {
            what: "a region constraint without a cluster constraint",
            kind: "PropagationPolicy",
            object: pp(
                "region-without-cluster",
                json!({"resourceSelectors": deployments(), "placement": {"spreadConstraints": [
                    {"spreadByField": "region", "minGroups": 2}]}}),
            ),
            expect: &[
                "spec.placement.spreadConstraints",
                "the cluster spread constraint must be enabled",
            ],
        },
        Invalid {
            what: "two constraints by the same field",
            kind: "PropagationPolicy",
            object: pp(
                "duplicate-field",
                json!({"resourceSelectors": deployments(), "placement": {"spreadConstraints": [
                    {"spreadByField": "cluster"}, {"minGroups": 1}]}}),
            ),
            expect: &[
                "spec.placement.spreadConstraints",
                "multiple spread constraints by the same spreadByField",
            ],
        },
        Invalid {
            what: "clusterAffinity with clusterAffinities",
            kind: "PropagationPolicy",
            object: pp(
                "both-affinities",
                json!({"resourceSelectors": deployments(), "placement": {
                    "clusterAffinity": {"clusterNames": ["member1"]},
                    "clusterAffinities": [{"affinityName": "primary", "clusterNames": ["member1"]}]}}),
            ),
            expect: &[
                "spec.placement",
                "clusterAffinities cannot co-exist with clusterAffinity",
            ],
        },
        Invalid {
            what: "duplicate affinity names",
            kind: "PropagationPolicy",
            object: pp(
                "duplicate-affinity-names",
                json!({"resourceSelectors": deployments(), "placement": {"clusterAffinities": [
                    {"affinityName": "group", "clusterNames": ["member1"]},
                    {"affinityName": "group", "clusterNames": ["member2"]}]}}),
            ),
            expect: &["spec.placement.clusterAffinities", "unique name"],
        },
        Invalid {
            what: "overflow affinities without aggregated or dynamic-weight division",
            kind: "PropagationPolicy",
            object: pp(
                "overflow-static",
                json!({"resourceSelectors": deployments(), "placement": {"clusterAffinities": [
                    {"affinityName": "primary", "clusterNames": ["member1"],
                     "overflowAffinities": [{"affinityName": "burst", "clusterNames": ["member2"]}]}]}}),
            ),
            expect: &[
                "spec.placement.clusterAffinities",
                "overflowAffinities can only be used together with dynamic weight or aggregated scheduling",
            ],
        },
        Invalid {
            what: "an overflow affinity named like its primary group",
            kind: "PropagationPolicy",
            object: pp(
                "overflow-same-name",
                json!({"resourceSelectors": deployments(), "placement": {
                    "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"},
                    "clusterAffinities": [{"affinityName": "primary", "clusterNames": ["member1"],
                        "overflowAffinities": [{"affinityName": "primary", "clusterNames": ["member2"]}]}]}}),
            ),
            expect: &[
                "spec.placement.clusterAffinities[0].overflowAffinities",
                "must be unique",
            ],
        },
        Invalid {
            what: "a cluster toleration with operator Lt",
            kind: "PropagationPolicy",
            object: pp(
                "toleration-lt",
                json!({"resourceSelectors": deployments(), "placement": {"clusterTolerations": [
                    {"key": "capacity", "operator": "Lt", "value": "10", "effect": "NoSchedule"}]}}),
            ),
            expect: &[
                "spec.placement.clusterTolerations",
                "Lt and Gt are not supported",
            ],
        },
        Invalid {
            what: "workload affinity and anti-affinity on the same label key",
            kind: "PropagationPolicy",
            object: pp(
                "same-group-key",
                json!({"resourceSelectors": deployments(), "placement": {"workloadAffinity": {
                    "affinity": {"groupByLabelKey": "app.group"}, "antiAffinity": {"groupByLabelKey": "app.group"}}}}),
            ),
            expect: &[
                "spec.placement.workloadAffinity",
                "must not use the same groupByLabelKey",
            ],
        },
        Invalid {
            what: "an unsupported field selector key",
            kind: "PropagationPolicy",
            object: pp(
                "bad-field-selector",
                json!({"resourceSelectors": deployments(), "placement": {"clusterAffinity": {"fieldSelector": {
                    "matchExpressions": [{"key": "color", "operator": "In", "values": ["blue"]}]}}}}),
            ),
            expect: &[
                "spec.placement.clusterAffinity.fieldSelector.matchExpressions[0].key",
                "Unsupported value: \"color\"",
            ],
        },
        Invalid {
            what: "a label selector operator Karmada cannot compile",
            kind: "PropagationPolicy",
            object: pp(
                "bad-label-operator",
                json!({"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {
                    "matchExpressions": [{"key": "app", "operator": "in", "values": ["web"]}]}}]}),
            ),
            expect: &[
                "spec.resourceSelectors[0].labelSelector.matchExpressions[0].operator",
                "Unsupported value: \"in\"",
            ],
        },
        Invalid {
            what: "a label selector In without values",
            kind: "PropagationPolicy",
            object: pp(
                "in-without-values",
                json!({"resourceSelectors": deployments(), "placement": {"clusterAffinity": {"labelSelector": {
                    "matchExpressions": [{"key": "env", "operator": "In"}]}}}}),
            ),
            expect: &[
                "spec.placement.clusterAffinity.labelSelector.matchExpressions[0].values",
                "Required value",
            ],
        },
        Invalid {
            what: "a label selector Exists with values",
            kind: "PropagationPolicy",
            object: pp(
                "exists-with-values",
                json!({"resourceSelectors": deployments(), "placement": {"clusterAffinities": [{"affinityName": "a",
                    "labelSelector": {"matchExpressions": [{"key": "env", "operator": "Exists", "values": ["x"]}]}}]}}),
            ),
            expect: &[
                "spec.placement.clusterAffinities[0].labelSelector.matchExpressions[0]",
                "must validate one and only one schema",
            ],
        },
        Invalid {
            what: "a label selector key that is not a qualified name",
            kind: "ClusterPropagationPolicy",
            object: json!({
                "apiVersion": "policy.karmada.io/v1alpha1",
                "kind": "ClusterPropagationPolicy",
                "metadata": {"name": "bad-label-key"},
                "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Namespace", "labelSelector": {
                    "matchExpressions": [{"key": "not a key", "operator": "Exists"}]}}]},
            }),
            expect: &[
                "spec.resourceSelectors[0].labelSelector.matchExpressions[0].key",
                "should match",
            ],
        },
        Invalid {
            what: "a matchLabels value that is not a label value",
            kind: "OverridePolicy",
            object: json!({
                "apiVersion": "policy.karmada.io/v1alpha1",
                "kind": "OverridePolicy",
                "metadata": {"name": "bad-match-labels"},
                "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                    "labelSelector": {"matchLabels": {"app": "web server"}}}],
                    "overrideRules": [{"targetCluster": {"clusterNames": ["member1"]},
                        "overriders": {"labelsOverrider": [{"operator": "add", "value": {"a": "b"}}]}}]},
            }),
            expect: &[
                "spec.resourceSelectors[0].labelSelector.matchLabels.app",
                "should match",
            ],
        },
        Invalid {
            what: "a field selector In without values",
            kind: "PropagationPolicy",
            object: pp(
                "field-in-without-values",
                json!({"resourceSelectors": deployments(), "placement": {"clusterAffinity": {"fieldSelector": {
                    "matchExpressions": [{"key": "region", "operator": "In"}]}}}}),
            ),
            expect: &[
                "spec.placement.clusterAffinity.fieldSelector.matchExpressions[0].values",
                "Required value",
            ],
        },
        Invalid {
            what: "a field selector with an empty values list",
            kind: "ClusterOverridePolicy",
            object: json!({
                "apiVersion": "policy.karmada.io/v1alpha1",
                "kind": "ClusterOverridePolicy",
                "metadata": {"name": "field-empty-values"},
                "spec": {"resourceSelectors": deployments(),
                    "overrideRules": [{"targetCluster": {"fieldSelector": {"matchExpressions": [
                        {"key": "zone", "operator": "NotIn", "values": []}]}},
                        "overriders": {"labelsOverrider": [{"operator": "add", "value": {"a": "b"}}]}}]},
            }),
            expect: &[
                "spec.overrideRules[0].targetCluster.fieldSelector.matchExpressions[0].values",
                "at least 1 items",
            ],
        },
        Invalid {
            what: "application failover without propagateDeps",
            kind: "PropagationPolicy",
            object: pp(
                "failover-without-deps",
                json!({"resourceSelectors": deployments(), "failover": {"application": {
                    "decisionConditions": {}, "gracePeriodSeconds": 60}}}),
            ),
            expect: &[
                "spec.propagateDeps",
                "application failover is set, propagateDeps must be true",
            ],
        },
        Invalid {
            what: "a grace period with purgeMode Directly",
            kind: "PropagationPolicy",
            object: pp(
                "grace-with-directly",
                json!({"resourceSelectors": deployments(), "propagateDeps": true, "failover": {"application": {
                    "decisionConditions": {}, "purgeMode": "Directly", "gracePeriodSeconds": 60}}}),
            ),
            expect: &[
                "spec.failover.application.gracePeriodSeconds",
                "only takes effect when purgeMode is Gracefully",
            ],
        },
        Invalid {
            what: "cluster failover purgeMode Never",
            kind: "PropagationPolicy",
            object: pp(
                "cluster-purge-never",
                json!({"resourceSelectors": deployments(), "failover": {"cluster": {"purgeMode": "Never"}}}),
            ),
            expect: &[
                "spec.failover.cluster.purgeMode",
                "Unsupported value: \"Never\"",
            ],
        },
        Invalid {
            what: "preemption Always with an unnamed selector",
            kind: "PropagationPolicy",
            object: pp(
                "preempt-all",
                json!({"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}], "preemption": "Always"}),
            ),
            expect: &[
                "spec.resourceSelectors",
                "name cannot be empty if preemption is Always",
            ],
        },
        Invalid {
            what: "suspending all and some clusters",
            kind: "PropagationPolicy",
            object: pp(
                "suspension-conflict",
                json!({"resourceSelectors": deployments(), "suspension": {"dispatching": true,
                    "dispatchingOnClusters": {"clusterNames": ["member1"]}}}),
            ),
            expect: &[
                "spec.suspension",
                "suspension dispatching cannot co-exist with dispatchingOnClusters.clusterNames",
            ],
        },
        Invalid {
            what: "an unknown conflictResolution",
            kind: "ClusterPropagationPolicy",
            object: json!({
                "apiVersion": "policy.karmada.io/v1alpha1",
                "kind": "ClusterPropagationPolicy",
                "metadata": {"name": "bad-conflict-resolution"},
                "spec": {"resourceSelectors": deployments(), "conflictResolution": "Merge"},
            }),
            expect: &["spec.conflictResolution", "Unsupported value: \"Merge\""],
        },
        Invalid {
            what: "a plaintext overrider with an unknown operator",
            kind: "OverridePolicy",
            object: json!({
                "apiVersion": "policy.karmada.io/v1alpha1",
                "kind": "OverridePolicy",
                "metadata": {"name": "bad-plaintext"},
                "spec": {"overrideRules": [{"overriders": {"plaintext": [
                    {"path": "/spec/replicas", "operator": "merge", "value": 1}]}}]},
            }),
            expect: &[
                "spec.overrideRules[0].overriders.plaintext[0].operator",
                "Unsupported value: \"merge\"",
            ],
        },
        Invalid {
            what: "overrideRules with targetCluster",
            kind: "OverridePolicy",
            object: json!({
                "apiVersion": "policy.karmada.io/v1alpha1",
                "kind": "OverridePolicy",
                "metadata": {"name": "rules-and-target"},
                "spec": {"targetCluster": {"clusterNames": ["member1"]},
                    "overrideRules": [{"overriders": {"labelsOverrider": [{"operator": "add", "value": {"a": "b"}}]}}]},
            }),
            expect: &[
                "spec.targetCluster",
                "overrideRules and targetCluster can't co-exist",
            ],
        },
        Invalid {
            what: "overrideRules with the deprecated overriders",
            kind: "OverridePolicy",
            object: json!({
                "apiVersion": "policy.karmada.io/v1alpha1",
                "kind": "OverridePolicy",
                "metadata": {"name": "rules-and-overriders"},
                "spec": {"overriders": {"plaintext": [{"path": "/spec/replicas", "operator": "remove"}]},
                    "overrideRules": [{"overriders": {"labelsOverrider": [{"operator": "add", "value": {"a": "b"}}]}}]},
            }),
            expect: &[
                "spec.overriders",
                "overrideRules and overriders can't co-exist",
            ],
        },
        Invalid {
            what: "a field overrider with both JSON and YAML",
            kind: "OverridePolicy",
            object: json!({
                "apiVersion": "policy.karmada.io/v1alpha1",
                "kind": "OverridePolicy",
                "metadata": {"name": "json-and-yaml"},
                "spec": {"overrideRules": [{"overriders": {"fieldOverrider": [{"fieldPath": "/data/c",
                    "json": [{"subPath": "/a", "operator": "remove"}],
                    "yaml": [{"subPath": "/a", "operator": "remove"}]}]}}]},
            }),
            expect: &[
                "spec.overrideRules[0].overriders.fieldOverrider[0]",
                "must validate one and only one schema",
            ],
        },
        Invalid {
            what: "an image predicate that is not a JSON pointer",
            kind: "OverridePolicy",
            object: json!({
                "apiVersion": "policy.karmada.io/v1alpha1",
                "kind": "OverridePolicy",
                "metadata": {"name": "bad-predicate"},
                "spec": {"overrideRules": [{"overriders": {"imageOverrider": [{"component": "Tag",
                    "operator": "replace", "value": "v2", "predicate": {"path": "spec.containers"}}]}}]},
            }),
            expect: &[
                "spec.overrideRules[0].overriders.imageOverrider[0].predicate.path",
                "should match",
            ],
        },
        Invalid {
            what: "a Cluster with an unknown syncMode",
            kind: "Cluster",
            object: json!({
                "apiVersion": "cluster.karmada.io/v1alpha1",
                "kind": "Cluster",
                "metadata": {"name": "bad-mode"},
                "spec": {"syncMode": "Sync"},
            }),
            expect: &["spec.syncMode", "Unsupported value: \"Sync\""],
        },
        Invalid {
            what: "a Cluster name longer than 48 characters",
            kind: "Cluster",
            object: json!({
                "apiVersion": "cluster.karmada.io/v1alpha1",
                "kind": "Cluster",
                "metadata": {"name": "a-cluster-name-that-is-far-too-long-for-karmada-0123"},
                "spec": {"syncMode": "Push"},
            }),
            expect: &["metadata.name", "at most 48 characters"],
        },
        Invalid {
            what: "a Cluster secretRef without a name",
            kind: "Cluster",
            object: json!({
                "apiVersion": "cluster.karmada.io/v1alpha1",
                "kind": "Cluster",
                "metadata": {"name": "no-secret-name"},
                "spec": {"syncMode": "Push", "secretRef": {"namespace": "karmada-cluster", "name": ""}},
            }),
            expect: &["spec.secretRef.name"],
        },
        Invalid {
            what: "a Cluster proxy with an unsupported scheme",
            kind: "Cluster",
            object: json!({
                "apiVersion": "cluster.karmada.io/v1alpha1",
                "kind": "Cluster",
                "metadata": {"name": "ftp-proxy"},
                "spec": {"syncMode": "Push", "proxyURL": "ftp://proxy:21"},
            }),
            expect: &["spec.proxyURL", "must be http, https, or socks5"],
        },
        Invalid {
            what: "a Cluster apiEndpoint without a scheme",
            kind: "Cluster",
            object: json!({
                "apiVersion": "cluster.karmada.io/v1alpha1",
                "kind": "Cluster",
                "metadata": {"name": "no-scheme"},
                "spec": {"syncMode": "Push", "apiEndpoint": "10.0.0.1:6443"},
            }),
            expect: &["spec.apiEndpoint", "apiEndpoint must be a URL"],
        },
        Invalid {
            what: "a Cluster with zone and zones",
            kind: "Cluster",
            object: json!({
                "apiVersion": "cluster.karmada.io/v1alpha1",
                "kind": "Cluster",
                "metadata": {"name": "zone-and-zones"},
                "spec": {"syncMode": "Push", "zone": "a", "zones": ["b"]},
            }),
            expect: &["spec", "zone and zones cannot co-exist"],
        },
        Invalid {
            what: "a Cluster with two taints of the same key and effect",
            kind: "Cluster",
            object: json!({
                "apiVersion": "cluster.karmada.io/v1alpha1",
                "kind": "Cluster",
                "metadata": {"name": "duplicate-taints"},
                "spec": {"syncMode": "Pull", "taints": [
                    {"key": "example.com/a", "value": "1", "effect": "NoSchedule"},
                    {"key": "example.com/a", "value": "2", "effect": "NoSchedule"}]},
            }),
            expect: &["spec.taints[1]", "Duplicate value"],
        },
        Invalid {
            what: "a Cluster taint with an unknown effect",
            kind: "Cluster",
            object: json!({
                "apiVersion": "cluster.karmada.io/v1alpha1",
                "kind": "Cluster",
                "metadata": {"name": "bad-taint-effect"},
                "spec": {"syncMode": "Push", "taints": [{"key": "example.com/a", "effect": "Evict"}]},
            }),
            expect: &["spec.taints[0].effect", "Unsupported value: \"Evict\""],
        },
        Invalid {
            what: "a ResourceBinding eviction task with an invalid reason",
            kind: "ResourceBinding",
            object: json!({
                "apiVersion": "work.karmada.io/v1alpha2",
                "kind": "ResourceBinding",
                "metadata": {"name": "bad-eviction"},
                "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"},
                    "gracefulEvictionTasks": [{"fromCluster": "member1", "producer": "test", "reason": "not camel case"}]},
            }),
            expect: &["spec.gracefulEvictionTasks[0].reason"],
        },
        Invalid {
            what: "a WorkloadRebalancer without workloads",
            kind: "WorkloadRebalancer",
            object: json!({
                "apiVersion": "apps.karmada.io/v1alpha1",
                "kind": "WorkloadRebalancer",
                "metadata": {"name": "no-workloads"},
                "spec": {"workloads": []},
            }),
            expect: &["spec.workloads", "at least 1 items"],
        },
        Invalid {
            what: "a WorkloadRebalancer workload without a kind",
            kind: "WorkloadRebalancer",
            object: json!({
                "apiVersion": "apps.karmada.io/v1alpha1",
                "kind": "WorkloadRebalancer",
                "metadata": {"name": "no-kind"},
                "spec": {"workloads": [{"apiVersion": "apps/v1", "name": "nginx"}]},
            }),
            expect: &["spec.workloads[0].kind", "Required value"],
        },
        Invalid {
            what: "a Remedy decision match with an unknown operator",
            kind: "Remedy",
            object: json!({
                "apiVersion": "remedy.karmada.io/v1alpha1",
                "kind": "Remedy",
                "metadata": {"name": "bad-operator"},
                "spec": {"decisionMatches": [{"clusterConditionMatch": {
                    "conditionType": "Ready", "operator": "In", "conditionStatus": "False"}}],
                    "actions": ["TrafficControl"]},
            }),
            expect: &[
                "spec.decisionMatches[0].clusterConditionMatch.operator",
                "Unsupported value: \"In\"",
            ],
        },
        Invalid {
            what: "a MultiClusterService with two kinds of exposure",
            kind: "MultiClusterService",
            object: json!({
                "apiVersion": "networking.karmada.io/v1alpha1",
                "kind": "MultiClusterService",
                "metadata": {"name": "two-types"},
                "spec": {"types": ["CrossCluster", "LoadBalancer"]},
            }),
            expect: &["spec.types", "should not contain more than one type"],
        },
        Invalid {
            what: "a MultiClusterService with an unknown exposure type",
            kind: "MultiClusterService",
            object: json!({
                "apiVersion": "networking.karmada.io/v1alpha1",
                "kind": "MultiClusterService",
                "metadata": {"name": "node-port"},
                "spec": {"types": ["NodePort"]},
            }),
            expect: &["spec.types[0]", "Unsupported value: \"NodePort\""],
        },
        Invalid {
            what: "a MultiClusterService port out of range",
            kind: "MultiClusterService",
            object: json!({
                "apiVersion": "networking.karmada.io/v1alpha1",
                "kind": "MultiClusterService",
                "metadata": {"name": "big-port"},
                "spec": {"types": ["CrossCluster"], "ports": [{"port": 70000}]},
            }),
            expect: &["spec.ports[0].port", "65535"],
        },
        Invalid {
            what: "a MultiClusterService with duplicate port names",
            kind: "MultiClusterService",
            object: json!({
                "apiVersion": "networking.karmada.io/v1alpha1",
                "kind": "MultiClusterService",
                "metadata": {"name": "dup-ports"},
                "spec": {"types": ["CrossCluster"], "ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}]},
            }),
            expect: &["spec.ports", "port names must be unique"],
        },
        Invalid {
            what: "a MultiClusterService naming an invalid cluster",
            kind: "MultiClusterService",
            object: json!({
                "apiVersion": "networking.karmada.io/v1alpha1",
                "kind": "MultiClusterService",
                "metadata": {"name": "bad-cluster"},
                "spec": {"types": ["CrossCluster"], "consumerClusters": [{"name": "Member_2"}]},
            }),
            expect: &["spec.consumerClusters[0].name"],
        },
        Invalid {
            what: "a MultiClusterService whose name is not a DNS-1035 label",
            kind: "MultiClusterService",
            object: json!({
                "apiVersion": "networking.karmada.io/v1alpha1",
                "kind": "MultiClusterService",
                "metadata": {"name": "1web"},
                "spec": {"types": ["CrossCluster"]},
            }),
            expect: &["DNS-1035"],
        },
        Invalid {
            what: "a ServiceImport of an unknown type",
            kind: "ServiceImport",
            object: json!({
                "apiVersion": "multicluster.x-k8s.io/v1alpha1",
                "kind": "ServiceImport",
                "metadata": {"name": "anycast"},
                "spec": {"type": "Anycast", "ports": []},
            }),
            expect: &["spec.type", "Unsupported value: \"Anycast\""],
        },
    ]
}

#[tokio::test]
async fn invalid_objects_are_rejected_naming_the_field() {
    let client = client().await;
    let ns = namespace(&client, "crd-invalid").await;
    let mut failures = Vec::new();
    for case in invalid_objects() {
        let (ar, namespaced) = match case.kind {
            "PropagationPolicy" => (ApiResource::erase::<PropagationPolicy>(&()), true),
            "ClusterPropagationPolicy" => {
                (ApiResource::erase::<ClusterPropagationPolicy>(&()), false)
            }
            "OverridePolicy" => (ApiResource::erase::<OverridePolicy>(&()), true),
            "ClusterOverridePolicy" => (ApiResource::erase::<ClusterOverridePolicy>(&()), false),
            "Cluster" => (ApiResource::erase::<Cluster>(&()), false),
            "ResourceBinding" => (ApiResource::erase::<ResourceBinding>(&()), true),
            "WorkloadRebalancer" => (
                ApiResource::erase::<karmada_apis::apps::v1alpha1::WorkloadRebalancer>(&()),
                false,
            ),
            "Remedy" => (
                ApiResource::erase::<karmada_apis::remedy::v1alpha1::Remedy>(&()),
                false,
            ),
            "MultiClusterService" => (
                ApiResource::erase::<karmada_apis::networking::v1alpha1::MultiClusterService>(&()),
                true,
            ),
            "ServiceImport" => (
                ApiResource::erase::<karmada_apis::multicluster::v1alpha1::ServiceImport>(&()),
                true,
            ),
            "DriftPolicy" => (
                ApiResource::erase::<karmada_apis::policy_rs::v1alpha1::DriftPolicy>(&()),
                true,
            ),
            other => panic!("unexpected kind {other}"),
        };
        let api: Api<DynamicObject> = if namespaced {
            Api::namespaced_with(client.clone(), &ns, &ar)
        } else {
            Api::all_with(client.clone(), &ar)
        };
        let object: DynamicObject = serde_json::from_value(case.object.clone()).expect("object");
        match api.create(&PostParams::default(), &object).await {
            Ok(_) => failures.push(format!("{}: accepted", case.what)),
            Err(kube::Error::Api(e)) => {
                if e.code != 422 || !case.expect.iter().all(|text| e.message.contains(text)) {
                    failures.push(format!(
                        "{}: expected 422 mentioning {:?}, got {}: {}",
                        case.what, case.expect, e.code, e.message
                    ));
                }
            }
            Err(e) => failures.push(format!("{}: {e}", case.what)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn scheduler_name_is_immutable() {
    let client = client().await;
    let ns = namespace(&client, "crd-immutable").await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::erase::<PropagationPolicy>(&()),
    );
    let object: DynamicObject = serde_json::from_value(pp(
        "fixed-scheduler",
        json!({"resourceSelectors": deployments()}),
    ))
    .expect("object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("created");
    // Other spec changes are fine.
    api.patch(
        "fixed-scheduler",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"priority": 5}})),
    )
    .await
    .expect("priority can change");
    match api
        .patch(
            "fixed-scheduler",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"schedulerName": "other-scheduler"}})),
        )
        .await
    {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422);
            assert!(
                e.message.contains("spec.schedulerName")
                    && e.message
                        .contains("the schedulerName should not be updated"),
                "{}",
                e.message
            );
        }
        other => panic!("changing schedulerName was not rejected: {other:?}"),
    }
}

/// The `karmada-policy-permanent-id` admission policy (in `crds/`, installed with the CRDs): a
/// policy's permanent id may be set where missing (the controller-manager does it after the create)
/// but never changed or removed, with Karmada's message; other labels change freely.
#[tokio::test]
async fn a_policy_permanent_id_cannot_change_once_set() {
    const ID: &str = "propagationpolicy.karmada.io/permanent-id";
    let client = client().await;
    let ns = namespace(&client, "crd-permanent-id").await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::erase::<PropagationPolicy>(&()),
    );
    let object: DynamicObject =
        serde_json::from_value(pp("with-id", json!({"resourceSelectors": deployments()})))
            .expect("object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("created");
    let labels = |value: Value| Patch::Merge(json!({"metadata": {"labels": value}}));
    api.patch(
        "with-id",
        &PatchParams::default(),
        &labels(json!({ID: "first"})),
    )
    .await
    .expect("the id can be set where missing");
    // The admission policy is loaded moments after it is installed: wait until a dry run is refused.
    let dry = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while api
        .patch("with-id", &dry, &labels(json!({ID: "second"})))
        .await
        .is_ok()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the permanent-id admission policy never became active"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    for (what, change) in [
        ("changed", json!({ID: "second"})),
        ("removed", json!({ID: null})),
    ] {
        match api
            .patch("with-id", &PatchParams::default(), &labels(change))
            .await
        {
            Err(kube::Error::Api(e)) => {
                assert_eq!(e.code, 403, "{what}: {}", e.message);
                assert!(
                    e.message.contains(&format!(
                        "label {ID} is immutable, it can only be set by the system during creation"
                    )) && e.message.contains("karmada-policy-permanent-id"),
                    "{what}: {}",
                    e.message
                );
            }
            other => panic!("the permanent id was {what}: {other:?}"),
        }
    }
    api.patch(
        "with-id",
        &PatchParams::default(),
        &labels(json!({"team": "a", ID: "first"})),
    )
    .await
    .expect("other labels change freely");
}

/// Creates `object` with `api`, which an admission policy named `policy` must refuse with 403 and
/// a message containing each of `texts`. The first call waits until the policy is enforced (the API
/// server loads a policy moments after it is installed), dry runs until one is refused.
async fn assert_refused_by(api: &Api<DynamicObject>, policy: &str, object: Value, texts: &[&str]) {
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let object: DynamicObject = serde_json::from_value(object).expect("object");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while api.create(&dry, &object).await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: admission policy {policy} never refused it"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    match api.create(&PostParams::default(), &object).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 403, "{name}: {}", e.message);
            assert!(
                e.message.contains(&format!(
                    "ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request: "
                )),
                "{name}: {}",
                e.message
            );
            for text in texts {
                assert!(
                    e.message.contains(text),
                    "{name}: no {text:?} in {}",
                    e.message
                );
            }
        }
        other => panic!("{name} was not refused: {other:?}"),
    }
}

/// Creates each object with `api`; every one must be accepted.
async fn assert_accepted(api: &Api<DynamicObject>, objects: Vec<Value>) {
    for object in objects {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let object: DynamicObject = serde_json::from_value(object).expect("object");
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("{name} was refused: {e}"));
    }
}

fn op(kind: &str, name: &str, overriders: Value) -> Value {
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"resourceSelectors": deployments(), "overrideRules": [{"overriders": overriders}]},
    })
}

/// The `karmada-override-policy` admission policy (in `crds/`, installed with the CRDs) checks what
/// Karmada's OverridePolicy webhook checks in each override rule and CRD rules cannot see, with
/// Karmada's messages: a field overrider's `value` follows its operator, label keys and values
/// and annotation keys are valid. What Karmada accepts is accepted, also on ClusterOverridePolicies.
#[tokio::test]
async fn override_policy_overriders_are_checked_at_admission() {
    const POLICY: &str = "karmada-override-policy";
    let client = client().await;
    let ns = namespace(&client, "crd-override-values").await;
    let ops: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::erase::<OverridePolicy>(&()),
    );
    let cops: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<ClusterOverridePolicy>(&()),
    );
    let kind = "OverridePolicy";
    assert_refused_by(
        &ops,
        POLICY,
        op(kind, "add-without-value", json!({"fieldOverrider": [{"fieldPath": "/data/config",
            "json": [{"subPath": "/a", "operator": "replace", "value": 1},
                     {"subPath": "/b", "operator": "add"}]}]})),
        &["spec.overrideRules[0].overriders.fieldOverrider[0].json[1].value: Invalid value: null: value is required for add or replace operation"],
    )
    .await;
    assert_refused_by(
        &ops,
        POLICY,
        op(kind, "remove-with-value", json!({"fieldOverrider": [{"fieldPath": "/data/config",
            "yaml": [{"subPath": "/a", "operator": "remove", "value": "x"}]}]})),
        &["spec.overrideRules[0].overriders.fieldOverrider[0].yaml[0].value: Invalid value: \"x\": value is not allowed for remove operation"],
    )
    .await;
    // Two errors: Karmada's aggregate, `[a, b]`.
    assert_refused_by(
        &ops,
        POLICY,
        op(kind, "bad-label", json!({"labelsOverrider": [{"operator": "add",
            "value": {"bad key": "bad value!"}}]})),
        &[
            "[spec.overrideRules[0].overriders.labelsOverrider[0].value: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), ",
            "spec.overrideRules[0].overriders.labelsOverrider[0].value: Invalid value: \"bad value!\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')]",
        ],
    )
    .await;
    assert_refused_by(
        &ops,
        POLICY,
        op(kind, "bad-annotation", json!({"annotationsOverrider": [{"operator": "add",
            "value": {"a/b/c": "anything"}}]})),
        &["spec.overrideRules[0].overriders.annotationsOverrider[0].value: Invalid value: \"a/b/c\": a qualified name must consist of"],
    )
    .await;
    assert_refused_by(
        &ops,
        POLICY,
        op(kind, "empty-prefix", json!({"labelsOverrider": [{"operator": "add",
            "value": {"/app": "web"}}]})),
        &["spec.overrideRules[0].overriders.labelsOverrider[0].value: Invalid value: \"/app\": prefix part must be non-empty"],
    )
    .await;
    assert_refused_by(
        &cops,
        POLICY,
        op(
            "ClusterOverridePolicy",
            "cluster-add-without-value",
            json!({"fieldOverrider": [
            {"fieldPath": "/data/config", "yaml": [{"subPath": "/a", "operator": "add"}]}]}),
        ),
        &["value is required for add or replace operation"],
    )
    .await;
    let good = json!({
        "labelsOverrider": [{"operator": "add", "value": {"example.com/team": "a", "tier": ""}}],
        // Annotation keys are checked lower-cased; values are free.
        "annotationsOverrider": [{"operator": "replace", "value": {"Example.com/Note": "anything, really!"}}],
        "fieldOverrider": [
            {"fieldPath": "/data/config", "json": [
                {"subPath": "/a", "operator": "add", "value": {"b": [1, 2]}},
                {"subPath": "/c", "operator": "replace", "value": 0},
                {"subPath": "/d", "operator": "remove"}]},
            {"fieldPath": "/data/other", "yaml": [{"subPath": "/e", "operator": "replace", "value": "x"}]}],
    });
    assert_accepted(
        &ops,
        vec![
            op(kind, "good", good.clone()),
            // As Karmada: the deprecated top-level `overriders` are not checked.
            json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": kind,
                "metadata": {"name": "deprecated-overriders"},
                "spec": {"resourceSelectors": deployments(),
                    "overriders": {"labelsOverrider": [{"operator": "add", "value": {"bad key": "v"}}]}}}),
        ],
    )
    .await;
    assert_accepted(
        &cops,
        vec![op("ClusterOverridePolicy", "cluster-good", good)],
    )
    .await;
}

fn mci(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "networking.karmada.io/v1alpha1",
        "kind": "MultiClusterIngress",
        "metadata": {"name": name},
        "spec": spec,
    })
}

/// The `karmada-multicluster-ingress` admission policy (in `crds/`, installed with the CRDs) checks
/// a MultiClusterIngress's spec as Karmada's webhook does (as Kubernetes checks an Ingress), with
/// its messages; a valid one is accepted.
#[tokio::test]
async fn multicluster_ingress_spec_is_checked_at_admission() {
    const POLICY: &str = "karmada-multicluster-ingress";
    let client = client().await;
    let ns = namespace(&client, "crd-mci").await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::erase::<karmada_apis::networking::v1alpha1::MultiClusterIngress>(&()),
    );
    let web = json!({"service": {"name": "web", "port": {"number": 80}}});
    assert_refused_by(
        &api,
        POLICY,
        mci("empty", json!({})),
        &["spec: Invalid value: null: either `defaultBackend` or `rules` must be specified"],
    )
    .await;
    assert_refused_by(
        &api,
        POLICY,
        mci("ip-host", json!({"rules": [{"host": "10.0.0.1", "http": {"paths": [
            {"path": "/a//b", "pathType": "Prefix", "backend": web}]}}]})),
        &[
            "[spec.rules[0].host: Invalid value: \"10.0.0.1\": must be a DNS name, not an IP address, ",
            "spec.rules[0].http.paths[0].path: Invalid value: \"/a//b\": must not contain '//']",
        ],
    )
    .await;
    assert_refused_by(
        &api,
        POLICY,
        mci(
            "two-ports",
            json!({"defaultBackend": {"service": {"name": "web",
            "port": {"name": "http", "number": 80}}}}),
        ),
        &["spec.defaultBackend: Invalid value: \"\": cannot set both port name & port number"],
    )
    .await;
    assert_refused_by(
        &api,
        POLICY,
        mci("bad-service", json!({"defaultBackend": {"service": {"name": "9web",
            "port": {"number": 70000}}}})),
        &[
            "spec.defaultBackend.service.name: Invalid value: \"9web\": a DNS-1035 label must consist of",
            "spec.defaultBackend.service.port.number: Invalid value: 70000: must be between 1 and 65535, inclusive",
        ],
    )
    .await;
    assert_refused_by(
        &api,
        POLICY,
        mci("bad-tls", json!({"defaultBackend": web, "tls": [{"hosts": ["*.example.com"],
            "secretName": "bad_secret"}]})),
        &["spec.tls[0].secretName: Invalid value: \"bad_secret\": a lowercase RFC 1123 subdomain must consist of"],
    )
    .await;
    assert_accepted(
        &api,
        vec![
            mci("default-backend", json!({"defaultBackend": web})),
            mci("rules", json!({"ingressClassName": "nginx",
                "rules": [{"host": "*.example.com", "http": {"paths": [
                    {"path": "/api", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"name": "http"}}}},
                    {"pathType": "ImplementationSpecific", "backend": {"resource": {
                        "apiGroup": "k8s.example.com", "kind": "StorageBucket", "name": "static"}}}]}},
                    {"host": "example.com"}],
                "tls": [{"hosts": ["example.com", "*.example.com"], "secretName": "tls-cert"}]})),
        ],
    )
    .await;
}

fn webhook_configuration(name: &str, webhooks: Value) -> Value {
    json!({
        "apiVersion": "config.karmada.io/v1alpha1",
        "kind": "ResourceInterpreterWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": webhooks,
    })
}

/// The `karmada-resource-interpreter-webhook` admission policy (in `crds/`, installed with the
/// CRDs) checks a ResourceInterpreterWebhookConfiguration's webhooks as Karmada's webhook does,
/// with its messages; valid ones (a URL or a Service, a wildcard rule) are accepted.
#[tokio::test]
async fn interpreter_webhook_configurations_are_checked_at_admission() {
    const POLICY: &str = "karmada-resource-interpreter-webhook";
    let client = client().await;
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<
            karmada_apis::config::v1alpha1::ResourceInterpreterWebhookConfiguration,
        >(&()),
    );
    let rules = json!([{"operations": ["InterpretReplica"], "apiGroups": ["apps"],
        "apiVersions": ["v1"], "kinds": ["Deployment"]}]);
    let hook = |name: &str, client_config: Value| {
        json!({"name": name, "clientConfig": client_config, "rules": rules,
            "interpreterContextVersions": ["v1alpha1"]})
    };
    assert_refused_by(
        &api,
        POLICY,
        webhook_configuration("plain-http", json!([hook("a.example.io",
            json!({"url": "http://interpreter.example.io/interpret"}))])),
        &["webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]"],
    )
    .await;
    assert_refused_by(
        &api,
        POLICY,
        webhook_configuration("url-parts", json!([hook("a.example.io",
            json!({"url": "https://user@interpreter.example.io/x?a=b"}))])),
        &[
            "[webhooks[0].clientConfig.url: Invalid value: \"user\": user information is not permitted in the URL, ",
            "webhooks[0].clientConfig.url: Invalid value: \"a=b\": query parameters are not permitted in the URL]",
        ],
    )
    .await;
    assert_refused_by(
        &api,
        POLICY,
        webhook_configuration("names", json!([
            hook("interpreter", json!({"url": "https://interpreter.example.io"})),
            hook("interpreter", json!({"url": "https://interpreter.example.io"}))])),
        &[
            "webhooks[0].name: Invalid value: \"interpreter\": should be a domain with at least two segments separated by dots",
            "webhooks[1].name: Duplicate value: \"interpreter\"",
        ],
    )
    .await;
    assert_refused_by(
        &api,
        POLICY,
        webhook_configuration("rules-timeout-versions", json!([{"name": "a.example.io",
            "clientConfig": {"service": {"name": "interpreter", "namespace": "karmada-system", "path": "/a//b"}},
            "rules": [{"operations": ["*", "Retain"], "apiGroups": ["apps"], "apiVersions": ["v1"], "kinds": ["Deployment", ""]}],
            "timeoutSeconds": 31,
            "interpreterContextVersions": ["v1beta1"]}])),
        &[
            "webhooks[0].rules[0].operations: Invalid value: [\"*\",\"Retain\"]: if '*' is present, must not specify other operations",
            "webhooks[0].rules[0].kinds[1]: Required value",
            "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
            "webhooks[0].clientConfig.service.path: Invalid value: \"/a//b\": segment[1] may not be empty",
            "webhooks[0].interpreterContextVersions: Invalid value: [\"v1beta1\"]: must include at least one of v1alpha1",
        ],
    )
    .await;
    assert_refused_by(
        &api,
        POLICY,
        webhook_configuration(
            "both-clients",
            json!([hook(
                "a.example.io",
                json!({
            "url": "https://interpreter.example.io",
            "service": {"name": "interpreter", "namespace": "karmada-system"}})
            )]),
        ),
        &["webhooks[0].clientConfig: Required value: exactly one of url or service is required"],
    )
    .await;
    assert_accepted(
        &api,
        vec![webhook_configuration("valid-webhooks", json!([
            hook("a.example.io", json!({"url": "https://127.0.0.1:8443/interpret"})),
            {"name": "b.example.io.",
                "clientConfig": {"service": {"name": "interpreter", "namespace": "karmada-system",
                    "port": 8443, "path": "/interpret/v1"}},
                "rules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["*"], "kinds": ["*"]}],
                "timeoutSeconds": 30,
                "interpreterContextVersions": ["v1alpha1", "v1beta1"]}]))],
    )
    .await;
}

#[tokio::test]
async fn multicluster_service_types_are_immutable() {
    let client = client().await;
    let ns = namespace(&client, "crd-mcs-types").await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::erase::<karmada_apis::networking::v1alpha1::MultiClusterService>(&()),
    );
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "networking.karmada.io/v1alpha1",
        "kind": "MultiClusterService",
        "metadata": {"name": "web"},
        "spec": {"types": ["CrossCluster"], "consumerClusters": [{"name": "member2"}]},
    }))
    .expect("object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("created");
    // Other spec changes are fine.
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"consumerClusters": [{"name": "member3"}]}})),
    )
    .await
    .expect("consumers can change");
    match api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"types": ["LoadBalancer"]}})),
        )
        .await
    {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422);
            assert!(
                e.message.contains("spec.types")
                    && e.message
                        .contains("MultiClusterService types are immutable"),
                "{}",
                e.message
            );
        }
        other => panic!("changing types was not rejected: {other:?}"),
    }
}

#[tokio::test]
async fn edge_cases_karmada_accepts_are_accepted() {
    let client = client().await;
    let ns = namespace(&client, "crd-valid").await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::erase::<PropagationPolicy>(&()),
    );
    let valid = [
        // A constraint with neither field nor label counts as `cluster` (Karmada's webhook default).
        pp(
            "implicit-cluster-constraint",
            json!({"resourceSelectors": deployments(), "placement": {"spreadConstraints": [
                {"minGroups": 1, "maxGroups": 2}, {"spreadByField": "region", "minGroups": 1}]}}),
        ),
        // Label-only constraints need no cluster constraint; maxGroups 0 means no maximum.
        pp(
            "label-constraint",
            json!({"resourceSelectors": deployments(), "placement": {"spreadConstraints": [
                {"spreadByLabel": "topology.example.com/rack", "minGroups": 2}]}}),
        ),
        // Overflow affinities with aggregated division.
        pp(
            "overflow",
            json!({"resourceSelectors": deployments(), "placement": {
                "clusterAffinities": [{"affinityName": "primary", "clusterNames": ["member1"],
                    "overflowAffinities": [{"affinityName": "burst", "clusterNames": ["member2"]}]}],
                "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}}}),
        ),
        // Application failover with the default purge mode and no explicit grace period (Karmada's
        // webhook fills in 600 s; the controllers do the same).
        pp(
            "app-failover",
            json!({"resourceSelectors": deployments(), "propagateDeps": true,
                "failover": {"application": {"decisionConditions": {"tolerationSeconds": 0}}}}),
        ),
        // Application failover of a ServiceImport without propagateDeps: Karmada's webhook sets
        // propagateDeps for ServiceImport selectors before validating; the detector forces it.
        pp(
            "service-import-failover",
            json!({"resourceSelectors": [{"apiVersion": "multicluster.x-k8s.io/v1alpha1",
                    "kind": "ServiceImport", "name": "web"}],
                "failover": {"application": {"decisionConditions": {"tolerationSeconds": 0}}}}),
        ),
        // Every label selector operator with the values it takes, and a field selector.
        pp(
            "every-selector-operator",
            json!({"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {
                "matchLabels": {"app.kubernetes.io/name": "web", "tier": ""},
                "matchExpressions": [
                    {"key": "a", "operator": "In", "values": ["x", "y"]},
                    {"key": "example.com/b", "operator": "NotIn", "values": ["z"]},
                    {"key": "c", "operator": "Exists"},
                    {"key": "d", "operator": "DoesNotExist", "values": []}]}}],
                "placement": {"clusterAffinity": {
                    "labelSelector": {"matchExpressions": [{"key": "env", "operator": "Exists"}]},
                    "fieldSelector": {"matchExpressions": [{"key": "region", "operator": "NotIn", "values": ["cn-north-1"]}]}}}}),
        ),
        // Preemption with named selectors.
        pp(
            "preempt-named",
            json!({"resourceSelectors": deployments(), "preemption": "Always", "priority": 100}),
        ),
    ];
    for object in valid {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let object: DynamicObject = serde_json::from_value(object).expect("object");
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("{name} was rejected: {e}"));
        let back: PropagationPolicy = serde_json::from_value(
            serde_json::to_value(api.get(&name).await.expect("get")).expect("json"),
        )
        .expect("parses");
        assert_eq!(
            back.spec.conflict_resolution.as_str(),
            "Abort",
            "{name}: defaulted"
        );
    }
}
