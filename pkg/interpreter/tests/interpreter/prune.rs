//! Prune.

use serde_json::{Value, json};

use crate::interpreter;

fn pruned(mut object: Value) -> Value {
    interpreter().prune(&mut object).unwrap();
    object
}

fn server_metadata() -> Value {
    json!({
        "name": "web", "namespace": "default",
        "labels": {"app": "web"}, "annotations": {"note": "x"},
        "creationTimestamp": "2026-01-01T00:00:00Z", "deletionTimestamp": "2026-01-01T00:00:00Z",
        "deletionGracePeriodSeconds": 30, "generation": 4, "resourceVersion": "123",
        "selfLink": "/apis/x", "uid": "abc", "finalizers": ["f"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u"}],
        "managedFields": [{"manager": "kubectl"}]
    })
}

#[test]
fn every_kind_loses_server_set_metadata_and_status() {
    for (api_version, kind) in [
        ("v1", "ConfigMap"),
        ("example.io/v1", "Widget"),
        ("apps/v1", "DaemonSet"),
    ] {
        let object = json!({"apiVersion": api_version, "kind": kind, "metadata": server_metadata(),
            "data": {"k": "v"}, "status": {"x": 1}});
        assert_eq!(
            pruned(object),
            json!({"apiVersion": api_version, "kind": kind,
                "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}, "annotations": {"note": "x"}},
                "data": {"k": "v"}}),
            "{kind}"
        );
    }
}

#[test]
fn deployment_loses_revision_annotations() {
    let object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "annotations": {
        "deployment.kubernetes.io/revision": "3", "deployment.kubernetes.io/revision-history": "1,2", "keep": "me"}}});
    assert_eq!(
        pruned(object)["metadata"]["annotations"],
        json!({"keep": "me"})
    );
}

#[test]
fn job_loses_generated_selector_labels_and_ttl_unless_manual_selector() {
    let job = |manual: Option<bool>| {
        let mut spec = json!({
            "ttlSecondsAfterFinished": 100,
            "selector": {"matchLabels": {"controller-uid": "u", "batch.kubernetes.io/controller-uid": "u", "team": "a"}},
            "template": {"metadata": {"labels": {"controller-uid": "u", "job-name": "j",
                "batch.kubernetes.io/controller-uid": "u", "batch.kubernetes.io/job-name": "j", "app": "x"}}}
        });
        if let Some(m) = manual {
            spec["manualSelector"] = json!(m);
        }
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": spec})
    };
    for manual in [None, Some(false)] {
        let out = pruned(job(manual));
        assert_eq!(out["spec"]["selector"]["matchLabels"], json!({"team": "a"}));
        assert_eq!(
            out["spec"]["template"]["metadata"]["labels"],
            json!({"app": "x"})
        );
        assert!(out["spec"].get("ttlSecondsAfterFinished").is_none());
    }
    let manual = pruned(job(Some(true)));
    assert_eq!(
        manual["spec"]["selector"]["matchLabels"]
            .as_object()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        manual["spec"]["template"]["metadata"]["labels"]
            .as_object()
            .unwrap()
            .len(),
        5
    );
    assert!(manual["spec"].get("ttlSecondsAfterFinished").is_none());
}

#[test]
fn service_loses_cluster_ips_unless_headless() {
    let service = |ip: &str| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"clusterIP": ip, "clusterIPs": [ip], "ports": [{"port": 80, "nodePort": 30080}]}})
    };
    assert_eq!(
        pruned(service("10.0.0.1"))["spec"],
        json!({"ports": [{"port": 80, "nodePort": 30080}]})
    );
    assert_eq!(pruned(service("None"))["spec"]["clusterIP"], json!("None"));
    assert_eq!(
        pruned(service("None"))["spec"]["clusterIPs"],
        json!(["None"])
    );
}

#[test]
fn service_account_loses_generated_token_secrets() {
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "builder"},
        "secrets": [{"name": "builder-token-abc"}, {"name": "builder-token-def"}, {"name": "mine"}, {"name": "other-token-x"}]});
    assert_eq!(
        pruned(sa)["secrets"],
        json!([{"name": "mine"}, {"name": "other-token-x"}])
    );
}

#[test]
fn token_secret_loses_data_and_uid_annotation() {
    let secret = |kind: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": kind,
        "metadata": {"name": "t", "annotations": {"kubernetes.io/service-account.uid": "u", "kubernetes.io/service-account.name": "sa"}},
        "data": {"token": "abc"}})
    };
    let out = pruned(secret("kubernetes.io/service-account-token"));
    assert!(out.get("data").is_none());
    assert_eq!(
        out["metadata"]["annotations"],
        json!({"kubernetes.io/service-account.name": "sa"})
    );
    let opaque = pruned(secret("Opaque"));
    assert_eq!(opaque["data"], json!({"token": "abc"}));
}

#[test]
fn pvc_loses_selected_node() {
    let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "c", "annotations": {"volume.kubernetes.io/selected-node": "node-1", "x": "y"}}});
    assert_eq!(pruned(pvc)["metadata"]["annotations"], json!({"x": "y"}));
}

#[test]
fn prune_is_idempotent_and_tolerates_odd_shapes() {
    let odd = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a"},
        "secrets": [1, {"name": 2}, {"name": "a-token-1"}]});
    let once = pruned(odd);
    assert_eq!(once["secrets"], json!([1, {"name": 2}]));
    assert_eq!(pruned(once.clone()), once);
    let bad = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"manualSelector": "yes"}});
    let mut copy = bad.clone();
    assert_eq!(
        interpreter().prune(&mut copy).unwrap_err().to_string(),
        "Job j: field `spec.manualSelector` must be a boolean"
    );
}
