//! InterpretDependency: the native rules return what Karmada's `GetDependencies` returns.

use karmada_interpreter::DependentObjectReference;
use serde_json::{Value, json};

use super::interpreter;

fn deps(object: &Value) -> Option<Vec<(String, String)>> {
    interpreter()
        .get_dependencies(object)
        .unwrap()
        .map(|v| v.into_iter().map(|d| (d.kind, d.name)).collect())
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, n)| ((*k).to_owned(), (*n).to_owned()))
        .collect()
}

/// A pod spec using every kind of reference.
fn pod_spec() -> Value {
    json!({
        "serviceAccountName": "runner",
        "imagePullSecrets": [{"name": "pull"}, {"name": ""}],
        "initContainers": [{"name": "init", "envFrom": [{"configMapRef": {"name": "init-env"}}]}],
        "containers": [{
            "name": "app",
            "envFrom": [{"secretRef": {"name": "app-secret-env"}}],
            "env": [
                {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "app-cm", "key": "a"}}},
                {"name": "B", "valueFrom": {"secretKeyRef": {"name": "app-secret", "key": "b"}}},
                {"name": "C", "value": "plain"}
            ]
        }],
        "ephemeralContainers": [{"name": "debug", "env": [
            {"name": "D", "valueFrom": {"configMapKeyRef": {"name": "debug-cm", "key": "d"}}}]}],
        "volumes": [
            {"name": "v1", "configMap": {"name": "vol-cm"}},
            {"name": "v2", "secret": {"secretName": "vol-secret"}},
            {"name": "v3", "projected": {"sources": [
                {"configMap": {"name": "proj-cm"}}, {"secret": {"name": "proj-secret"}},
                {"serviceAccountToken": {"path": "t"}}]}},
            {"name": "v4", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "v5", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi-secret"}}},
            {"name": "v6", "cephfs": {"monitors": ["m"], "secretRef": {"name": "ceph-secret"}}},
            {"name": "v7", "azureFile": {"secretName": "azure-secret", "shareName": "s"}},
            {"name": "v8", "persistentVolumeClaim": {"claimName": "www"}}
        ]
    })
}

fn all_deps() -> Vec<(String, String)> {
    pairs(&[
        ("ConfigMap", "app-cm"),
        ("ConfigMap", "debug-cm"),
        ("ConfigMap", "init-env"),
        ("ConfigMap", "proj-cm"),
        ("ConfigMap", "vol-cm"),
        ("Secret", "app-secret"),
        ("Secret", "app-secret-env"),
        ("Secret", "azure-secret"),
        ("Secret", "ceph-secret"),
        ("Secret", "csi-secret"),
        ("Secret", "proj-secret"),
        ("Secret", "pull"),
        ("Secret", "vol-secret"),
        ("ServiceAccount", "runner"),
        ("PersistentVolumeClaim", "data"),
        ("PersistentVolumeClaim", "www"),
    ])
}

fn workload(api_version: &str, kind: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"namespace": "ns", "name": "w"}, "spec": spec})
}

#[test]
fn pod_template_workloads_depend_on_everything_their_pods_reference() {
    let template = json!({"template": {"spec": pod_spec()}});
    for (api_version, kind) in [
        ("apps/v1", "Deployment"),
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "DaemonSet"),
        ("batch/v1", "Job"),
    ] {
        let object = workload(api_version, kind, template.clone());
        assert_eq!(deps(&object), Some(all_deps()), "{kind}");
    }
    let cron = workload(
        "batch/v1",
        "CronJob",
        json!({"jobTemplate": {"spec": template}}),
    );
    assert_eq!(deps(&cron), Some(all_deps()));
    let pod = workload("v1", "Pod", pod_spec());
    assert_eq!(deps(&pod), Some(all_deps()));
}

#[test]
fn dependencies_are_in_the_workload_namespace_as_v1_objects() {
    let object = workload(
        "apps/v1",
        "Deployment",
        json!({"template": {"spec": {"containers": [{"name": "a",
            "envFrom": [{"configMapRef": {"name": "cm"}}]}]}}}),
    );
    let got = interpreter().get_dependencies(&object).unwrap().unwrap();
    assert_eq!(
        got,
        vec![DependentObjectReference::named(
            "v1",
            "ConfigMap",
            "ns",
            "cm"
        )]
    );
    assert_eq!(
        serde_json::to_string(&got).unwrap(),
        r#"[{"apiVersion":"v1","kind":"ConfigMap","namespace":"ns","name":"cm"}]"#
    );
}

#[test]
fn stateful_set_leaves_out_claims_of_its_volume_claim_templates() {
    let object = workload(
        "apps/v1",
        "StatefulSet",
        json!({"template": {"spec": pod_spec()},
            "volumeClaimTemplates": [{"metadata": {"name": "www"}}]}),
    );
    let mut expected = all_deps();
    expected.retain(|(k, n)| !(k == "PersistentVolumeClaim" && n == "www"));
    assert_eq!(deps(&object), Some(expected));
}

#[test]
fn default_service_account_and_empty_names_are_no_dependencies() {
    let object = workload(
        "apps/v1",
        "Deployment",
        json!({"template": {"spec": {"serviceAccountName": "default", "containers": [{"name": "a",
            "envFrom": [{"configMapRef": {"name": ""}}, {"secretRef": {}}]}]}}}),
    );
    assert_eq!(deps(&object), Some(vec![]));
    let bare = workload("apps/v1", "Deployment", json!({}));
    assert_eq!(deps(&bare), Some(vec![]));
}

#[test]
fn a_volume_names_the_secret_of_its_first_source_only() {
    // A (malformed) volume with both an Azure File and a Secret source: Karmada's switch takes the
    // first.
    let object = workload(
        "v1",
        "Pod",
        json!({"volumes": [{"name": "v", "azureFile": {"secretName": "a"},
            "secret": {"secretName": "b"}}]}),
    );
    assert_eq!(deps(&object), Some(pairs(&[("Secret", "a")])));
}

#[test]
fn ingress_and_service_import_rules() {
    let ingress = workload(
        "networking.k8s.io/v1",
        "Ingress",
        json!({"tls": [{"secretName": "tls-a"}, {"hosts": ["x"]}]}),
    );
    assert_eq!(
        deps(&ingress),
        Some(pairs(&[("Secret", "tls-a"), ("Secret", "")]))
    );
    let import = workload("multicluster.x-k8s.io/v1alpha1", "ServiceImport", json!({}));
    let got = interpreter().get_dependencies(&import).unwrap().unwrap();
    assert_eq!(
        serde_json::to_value(&got).unwrap(),
        json!([
            {"apiVersion": "v1", "kind": "Service", "namespace": "ns", "name": "derived-w"},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "namespace": "ns",
             "labelSelector": {"matchLabels": {"kubernetes.io/service-name": "derived-w"}}}
        ])
    );
}

#[test]
fn other_kinds_and_versions_have_no_rule() {
    for (api_version, kind) in [
        ("v1", "ConfigMap"),
        ("apps/v1beta1", "Deployment"),
        ("example.io/v1", "Widget"),
    ] {
        assert_eq!(
            deps(&workload(api_version, kind, json!({}))),
            None,
            "{kind}"
        );
    }
}

#[test]
fn a_malformed_pod_template_is_an_error_naming_the_object() {
    let object = workload(
        "apps/v1",
        "Deployment",
        json!({"template": {"spec": {"containers": "nope"}}}),
    );
    let err = interpreter().get_dependencies(&object).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Deployment ns/w: field `spec.template.spec`"),
        "{err}"
    );
}
