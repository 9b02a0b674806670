//! Round trips of the sample objects in `examples/`: every Karmada object parses into its Rust type,
//! serializes back without losing or renaming a field, and parses again to the same value; objects
//! carrying fields or enum values from a newer Karmada still parse.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use karmada_apis::policy::v1alpha1::{ConflictResolution, ReplicaSchedulingType};
use karmada_apis::{
    Cluster, ClusterOverridePolicy, ClusterPropagationPolicy, ClusterResourceBinding,
    OverridePolicy, PropagationPolicy, ResourceBinding, Work,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Every document of every `examples/*.yaml`, with the file it came from.
fn documents() -> Vec<(String, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .expect("examples/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable example");
        let values: Vec<Value> = serde_saphyr::from_str_multiple(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
        for value in values {
            docs.push((name.clone().unwrap_or_default(), value));
        }
    }
    docs
}

/// Asserts that everything in `expected` is in `actual` with the same value (`actual` may have more,
/// e.g. defaults). Reports the JSON path of the first difference.
fn assert_contains(expected: &Value, actual: &Value, path: &str) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (key, value) in e {
                let child = format!("{path}.{key}");
                let Some(found) = a.get(key) else {
                    // Go's `omitempty`: an empty value and an absent field are the same.
                    assert!(
                        is_empty(value),
                        "{child} is missing after the round trip (was {value})"
                    );
                    continue;
                };
                assert_contains(value, found, &child);
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            assert_eq!(e.len(), a.len(), "{path}: list length changed");
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                assert_contains(ev, av, &format!("{path}[{i}]"));
            }
        }
        (Value::Number(e), Value::Number(a)) => {
            assert_eq!(e.as_f64(), a.as_f64(), "{path}: number changed");
        }
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

/// Parses `doc` as `T`, checks nothing is lost or renamed and that a second round trip is stable.
fn round_trip<T>(file: &str, doc: &Value) -> T
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let typed: T = serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{file}: {e}"));
    let serialized = serde_json::to_value(&typed).expect("serializes");
    assert_contains(doc, &serialized, file);
    let again: T = serde_json::from_value(serialized.clone()).expect("parses its own output");
    assert_eq!(typed, again, "{file}: second round trip differs");
    // YAML too: what crdgen and the tests write.
    let yaml = serde_saphyr::to_string(&typed).expect("serializes to YAML");
    let from_yaml: T = serde_saphyr::from_str(&yaml).expect("parses its own YAML");
    assert_eq!(typed, from_yaml, "{file}: YAML round trip differs");
    typed
}

fn kind_of(doc: &Value) -> (&str, &str) {
    (
        doc["apiVersion"].as_str().unwrap_or_default(),
        doc["kind"].as_str().unwrap_or_default(),
    )
}

#[test]
fn every_example_round_trips() {
    let mut seen = std::collections::BTreeSet::new();
    for (file, doc) in documents() {
        let (api_version, kind) = kind_of(&doc);
        match (api_version, kind) {
            ("cluster.karmada.io/v1alpha1", "Cluster") => {
                round_trip::<Cluster>(&file, &doc);
            }
            ("policy.karmada.io/v1alpha1", "PropagationPolicy") => {
                round_trip::<PropagationPolicy>(&file, &doc);
            }
            ("policy.karmada.io/v1alpha1", "ClusterPropagationPolicy") => {
                round_trip::<ClusterPropagationPolicy>(&file, &doc);
            }
            ("policy.karmada.io/v1alpha1", "OverridePolicy") => {
                round_trip::<OverridePolicy>(&file, &doc);
            }
            ("policy.karmada.io/v1alpha1", "ClusterOverridePolicy") => {
                round_trip::<ClusterOverridePolicy>(&file, &doc);
            }
            ("work.karmada.io/v1alpha1", "Work") => {
                round_trip::<Work>(&file, &doc);
            }
            ("work.karmada.io/v1alpha2", "ResourceBinding") => {
                round_trip::<ResourceBinding>(&file, &doc);
            }
            ("work.karmada.io/v1alpha2", "ClusterResourceBinding") => {
                round_trip::<ClusterResourceBinding>(&file, &doc);
            }
            ("remedy.karmada.io/v1alpha1", "Remedy") => {
                round_trip::<karmada_apis::remedy::v1alpha1::Remedy>(&file, &doc);
            }
            _ => continue,
        }
        seen.insert(kind.to_owned());
    }
    let all: std::collections::BTreeSet<String> = [
        "Cluster",
        "ClusterOverridePolicy",
        "ClusterPropagationPolicy",
        "ClusterResourceBinding",
        "OverridePolicy",
        "PropagationPolicy",
        "Remedy",
        "ResourceBinding",
        "Work",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(seen, all, "examples/ should hold one object of every kind");
}

#[test]
fn serialized_objects_carry_api_version_and_kind() {
    for (file, doc) in documents() {
        let (api_version, kind) = kind_of(&doc);
        let value = match kind {
            "ClusterPropagationPolicy" => {
                serde_json::to_value(round_trip::<ClusterPropagationPolicy>(&file, &doc))
            }
            "ClusterResourceBinding" => {
                serde_json::to_value(round_trip::<ClusterResourceBinding>(&file, &doc))
            }
            "Work" => serde_json::to_value(round_trip::<Work>(&file, &doc)),
            _ => continue,
        }
        .expect("serializes");
        assert_eq!(value["apiVersion"], api_version, "{file}");
        assert_eq!(value["kind"], kind, "{file}");
    }
}

#[test]
fn defaults_match_the_crd_defaults() {
    let pp: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
            "placement": {"replicaScheduling": {}},
            "failover": {"application": {"decisionConditions": {}}}
        }
    }))
    .expect("parses");
    assert_eq!(pp.spec.conflict_resolution, ConflictResolution::Abort);
    assert_eq!(pp.spec.priority, Some(0));
    assert_eq!(pp.spec.scheduler_name, "default-scheduler");
    let strategy = pp.spec.placement.replica_scheduling.as_ref().expect("set");
    assert_eq!(
        strategy.replica_scheduling_type,
        ReplicaSchedulingType::Divided
    );
    let app = pp
        .spec
        .failover
        .as_ref()
        .and_then(|f| f.application.as_ref())
        .expect("set");
    assert_eq!(app.decision_conditions.toleration_seconds, Some(300));
    assert_eq!(app.effective_grace_period_seconds(), Some(600));

    // No replicaScheduling at all means Duplicated.
    let mut plain = pp.spec.placement.clone();
    plain.replica_scheduling = None;
    assert_eq!(
        plain.replica_scheduling_type(),
        ReplicaSchedulingType::Duplicated
    );
}

#[test]
fn objects_from_a_newer_karmada_parse() {
    let doc = json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "future", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "futureSelectorField": 1}],
            "futureSpecField": {"nested": [1, 2, 3]},
            "conflictResolution": "Merge",
            "placement": {
                "futurePlacementField": "x",
                "replicaScheduling": {"replicaSchedulingType": "Spread", "replicaDivisionPreference": "Balanced"},
                "spreadConstraints": [{"spreadByField": "rack", "minGroups": 1}]
            }
        },
        "status": {"futureStatus": true}
    });
    let pp: PropagationPolicy =
        serde_json::from_value(doc).expect("unknown fields and values parse");
    assert_eq!(
        pp.spec.conflict_resolution,
        ConflictResolution::Other("Merge".into())
    );
    let strategy = pp.spec.placement.replica_scheduling.as_ref().expect("set");
    assert_eq!(
        strategy.replica_scheduling_type,
        ReplicaSchedulingType::Other("Spread".into())
    );
    // Unknown enum values are written back verbatim.
    let back = serde_json::to_value(&pp).expect("serializes");
    assert_eq!(back["spec"]["conflictResolution"], "Merge");
    assert_eq!(
        back["spec"]["placement"]["replicaScheduling"]["replicaDivisionPreference"],
        "Balanced"
    );
    assert_eq!(
        back["spec"]["placement"]["spreadConstraints"][0]["spreadByField"],
        "rack"
    );

    let work: Work = serde_json::from_value(json!({
        "apiVersion": "work.karmada.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": "w", "namespace": "karmada-es-m1"},
        "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "anything": {"goes": [null, 1.5]}}]}, "futureWorkField": 3},
        "status": {"manifestStatuses": [{"identifier": {"ordinal": 0, "version": "v1", "kind": "ConfigMap", "resource": "configmaps", "name": "c", "futureId": "x"}, "health": "Degraded", "status": {"x": 1}}]}
    }))
    .expect("unknown fields and values parse");
    let status = work.status.expect("status");
    assert_eq!(
        status.manifest_statuses[0]
            .health
            .as_ref()
            .map(karmada_apis::work::v1alpha1::ResourceHealth::as_str),
        Some("Degraded")
    );
    assert_eq!(
        work.spec.workload.manifests[0].to_value().unwrap()["anything"]["goes"][1],
        json!(1.5)
    );

    let cluster: Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "m1"},
        "spec": {"syncMode": "Hybrid", "futureClusterField": {}},
        "status": {"conditions": [], "futureSummary": {"a": 1}}
    }))
    .expect("unknown fields and values parse");
    assert_eq!(cluster.spec.sync_mode.as_str(), "Hybrid");
}
