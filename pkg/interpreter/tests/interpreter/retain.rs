//! Retain (generic and per kind), managed-key records, and the no-op update check.

use karmada_interpreter::{record_managed_annotations, record_managed_labels};
use serde_json::{Value, json};

use crate::interpreter;

fn retained(mut desired: Value, observed: &Value) -> Value {
    interpreter().retain(&mut desired, observed).unwrap();
    desired
}

fn meta(labels: Value, annotations: Value) -> Value {
    json!({"name": "o", "namespace": "n", "labels": labels, "annotations": annotations})
}

#[test]
fn member_metadata_is_kept() {
    let desired = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "o", "finalizers": ["mine"]}});
    let observed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "o",
        "resourceVersion": "42", "finalizers": ["member/f"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u"}]}});
    let out = retained(desired, &observed);
    assert_eq!(out["metadata"]["resourceVersion"], json!("42"));
    assert_eq!(out["metadata"]["finalizers"], json!(["member/f"]));
    assert_eq!(out["metadata"]["ownerReferences"][0]["name"], json!("x"));

    let bare = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "o"}});
    let out = retained(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "o", "finalizers": ["mine"], "resourceVersion": "1"}}),
        &bare,
    );
    assert_eq!(out["metadata"], json!({"name": "o"}));
}

#[test]
fn member_labels_are_kept_unless_karmada_managed_and_removed() {
    let desired = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": meta(json!({"app": "web", "tier": "new"}), json!({"a": "1"}))});
    let observed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(
        json!({"app": "web", "tier": "old", "dropped": "x", "member-added": "y"}),
        json!({
            "resourcetemplate.karmada.io/managed-labels": "app,dropped,tier",
            "resourcetemplate.karmada.io/managed-annotations": "a,gone,resourcetemplate.karmada.io/managed-annotations,resourcetemplate.karmada.io/managed-labels",
            "a": "0", "gone": "g", "member-note": "m"
        })
    )});
    let out = retained(desired, &observed);
    assert_eq!(
        out["metadata"]["labels"],
        json!({"app": "web", "tier": "new", "member-added": "y"})
    );
    assert_eq!(
        out["metadata"]["annotations"],
        json!({"a": "1", "member-note": "m"})
    );
}

#[test]
fn without_a_managed_list_every_member_key_is_kept() {
    let desired = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "o"}});
    let observed = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": meta(json!({"x": "1"}), json!({"y": "2"}))});
    let out = retained(desired, &observed);
    assert_eq!(out["metadata"]["labels"], json!({"x": "1"}));
    assert_eq!(out["metadata"]["annotations"], json!({"y": "2"}));
}

#[test]
fn managed_key_records_are_sorted_lists() {
    let mut manifest = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": meta(json!({"b": "1", "a": "2"}), json!({"z": "1", "k": "2"}))});
    record_managed_annotations(&mut manifest).unwrap();
    record_managed_labels(&mut manifest).unwrap();
    assert_eq!(
        manifest["metadata"]["annotations"]["resourcetemplate.karmada.io/managed-annotations"],
        json!(
            "k,resourcetemplate.karmada.io/managed-annotations,resourcetemplate.karmada.io/managed-labels,z"
        )
    );
    assert_eq!(
        manifest["metadata"]["annotations"]["resourcetemplate.karmada.io/managed-labels"],
        json!("a,b")
    );
    let mut empty = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "o"}});
    record_managed_labels(&mut empty).unwrap();
    assert_eq!(
        empty["metadata"]["annotations"]["resourcetemplate.karmada.io/managed-labels"],
        json!("")
    );
}

fn deployment(labels: Value, replicas: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": labels},
        "spec": {"replicas": replicas}})
}

#[test]
fn deployment_replicas_are_retained_only_with_the_label() {
    let observed = deployment(json!({}), json!(7));
    let with = retained(
        deployment(
            json!({"resourcetemplate.karmada.io/retain-replicas": "true"}),
            json!(2),
        ),
        &observed,
    );
    assert_eq!(with["spec"]["replicas"], json!(7));
    let without = retained(deployment(json!({}), json!(2)), &observed);
    assert_eq!(without["spec"]["replicas"], json!(2));
    let other_value = retained(
        deployment(
            json!({"resourcetemplate.karmada.io/retain-replicas": "yes"}),
            json!(2),
        ),
        &observed,
    );
    assert_eq!(other_value["spec"]["replicas"], json!(2));

    let mut desired = deployment(
        json!({"resourcetemplate.karmada.io/retain-replicas": "true"}),
        json!(2),
    );
    let no_replicas = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {}});
    let err = interpreter()
        .retain(&mut desired, &no_replicas)
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Deployment d: field `spec.replicas"),
        "{err}"
    );
}

#[test]
fn pod_keeps_node_service_account_and_volumes() {
    let desired = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "nodeName": "", "containers": [{"name": "a", "image": "new", "volumeMounts": [{"name": "cfg", "mountPath": "/c"}]}, {"name": "b"}],
        "initContainers": [{"name": "i"}], "volumes": [{"name": "cfg"}]}});
    let observed = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "nodeName": "node-1", "serviceAccountName": "default",
        "containers": [{"name": "a", "image": "old", "volumeMounts": [{"name": "cfg", "mountPath": "/c"}, {"name": "token", "mountPath": "/var/run"}]},
                       {"name": "b"}],
        "initContainers": [{"name": "i", "volumeMounts": [{"name": "token", "mountPath": "/t"}]}],
        "volumes": [{"name": "cfg"}, {"name": "token"}]}});
    let out = retained(desired, &observed);
    assert_eq!(out["spec"]["nodeName"], json!("node-1"));
    assert_eq!(out["spec"]["serviceAccountName"], json!("default"));
    assert_eq!(out["spec"]["volumes"], observed["spec"]["volumes"]);
    assert_eq!(out["spec"]["containers"][0]["image"], json!("new"));
    assert_eq!(
        out["spec"]["containers"][0]["volumeMounts"],
        observed["spec"]["containers"][0]["volumeMounts"]
    );
    assert!(out["spec"]["containers"][1].get("volumeMounts").is_none());
    assert_eq!(
        out["spec"]["initContainers"][0]["volumeMounts"][0]["name"],
        json!("token")
    );
}

#[test]
fn service_keeps_cluster_ip_and_health_check_node_port() {
    let desired = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}});
    let observed = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"type": "LoadBalancer", "clusterIP": "10.1.2.3", "clusterIPs": ["10.1.2.3"],
            "healthCheckNodePort": 31000, "ports": [{"port": 80, "nodePort": 30001}]}});
    let out = retained(desired, &observed);
    assert_eq!(out["spec"]["clusterIP"], json!("10.1.2.3"));
    assert_eq!(out["spec"]["healthCheckNodePort"], json!(31000));
    // Like Karmada, node ports and clusterIPs are left to the API server's own retention.
    assert_eq!(out["spec"]["ports"], json!([{"port": 80}]));
    assert!(out["spec"].get("clusterIPs").is_none());
}

#[test]
fn service_account_secrets_are_merged() {
    let desired = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"},
        "secrets": [{"name": "a"}], "imagePullSecrets": []});
    let observed = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"},
        "secrets": [{"name": "sa-token-x"}, {"name": "a"}], "imagePullSecrets": [{"name": "reg"}]});
    let out = retained(desired, &observed);
    assert_eq!(
        out["secrets"],
        json!([{"name": "a"}, {"name": "sa-token-x"}])
    );
    assert_eq!(out["imagePullSecrets"], json!([{"name": "reg"}]));
    let none = retained(
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}, "secrets": []}),
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}}),
    );
    assert!(none.get("secrets").is_none());
}

#[test]
fn storage_job_and_token_secret_fields_are_kept() {
    let pvc = retained(
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "spec": {}}),
        &json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "spec": {"volumeName": "pv-1"}}),
    );
    assert_eq!(pvc["spec"]["volumeName"], json!("pv-1"));

    let claim = json!({"kind": "PersistentVolumeClaim", "name": "c", "namespace": "n"});
    let pv = retained(
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "v"}, "spec": {}}),
        &json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "v"}, "spec": {"claimRef": claim}}),
    );
    assert_eq!(pv["spec"]["claimRef"], claim);

    let job = retained(
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"template": {"metadata": {"labels": {"app": "x"}}}}}),
        &json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "m"}},
                "template": {"metadata": {"labels": {"app": "x", "batch.kubernetes.io/controller-uid": "m", "batch.kubernetes.io/job-name": "j"}}}}}),
    );
    assert_eq!(
        job["spec"]["selector"]["matchLabels"],
        json!({"batch.kubernetes.io/controller-uid": "m"})
    );
    assert_eq!(
        job["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"],
        json!("j")
    );

    let secret = |kind: &str| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"}, "type": kind});
    let observed = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"},
        "type": "kubernetes.io/service-account-token", "data": {"token": "bWVtYmVy"}});
    assert_eq!(
        retained(secret("kubernetes.io/service-account-token"), &observed)["data"],
        json!({"token": "bWVtYmVy"})
    );
    assert!(retained(secret("Opaque"), &observed).get("data").is_none());
}

#[test]
fn retain_is_idempotent() {
    let desired = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "labels": {"a": "1"}},
        "spec": {"ports": [{"port": 80}]}});
    let observed = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "resourceVersion": "9",
        "labels": {"b": "2"}}, "spec": {"clusterIP": "10.0.0.9", "ports": [{"port": 80}]}});
    let once = retained(desired, &observed);
    assert_eq!(retained(once.clone(), &observed), once);
}

#[test]
fn matches_member_tells_whether_an_update_would_change_anything() {
    let i = interpreter();
    let manifest = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "s", "namespace": "n", "labels": {"karmada.io/managed": "true"}},
        "spec": {"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP"}]}});
    let member = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "s", "namespace": "n", "uid": "m-uid", "resourceVersion": "77", "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"karmada.io/managed": "true", "member": "x"}, "finalizers": ["member/f"]},
        "spec": {"type": "ClusterIP", "clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"], "ports": [{"port": 80, "protocol": "TCP"}]},
        "status": {"loadBalancer": {}}});
    let mut desired = manifest.clone();
    i.retain(&mut desired, &member).unwrap();
    assert!(i.matches_member(&desired, &member).unwrap());

    let mut changed = manifest.clone();
    changed["spec"]["ports"][0]["port"] = json!(8080);
    i.retain(&mut changed, &member).unwrap();
    assert!(!i.matches_member(&changed, &member).unwrap());
}

#[test]
fn retain_rejects_non_objects() {
    let mut desired = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert!(interpreter().retain(&mut desired, &json!("nope")).is_err());
    let mut bad_labels = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": 1}}});
    let err = interpreter()
        .retain(&mut bad_labels, &json!({"metadata": {}}))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "ConfigMap c: field `metadata.labels` must be a map of strings"
    );
}

/// What a member API server and its controllers add to an applied manifest.
fn as_applied(manifest: &Value, member_side: Value) -> Value {
    let mut member = manifest.clone();
    let metadata = member["metadata"].as_object_mut().unwrap();
    metadata.insert("uid".into(), json!("member-uid"));
    metadata.insert("resourceVersion".into(), json!("1001"));
    metadata.insert("generation".into(), json!(1));
    metadata.insert("creationTimestamp".into(), json!("2026-01-01T00:00:00Z"));
    metadata.insert("managedFields".into(), json!([{"manager": "karmada"}]));
    merge(&mut member, member_side);
    member
}

fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p,
    }
}

#[test]
fn applied_objects_match_their_manifests_so_restarts_write_nothing() {
    let i = interpreter();
    let managed = json!({"karmada.io/managed": "true"});
    let cases = [
        (
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n",
                "labels": managed.clone(), "annotations": {"deployment.kubernetes.io/revision": "1"}},
                "spec": {"replicas": 2}, "status": {"replicas": 2}}),
            json!({"metadata": {"annotations": {"deployment.kubernetes.io/revision": "4"}},
                "status": {"replicas": 2, "readyReplicas": 2}}),
        ),
        (
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "n", "labels": managed.clone()},
                "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"], "ports": [{"port": 80, "nodePort": 30080}]}}),
            json!({"spec": {"clusterIP": "10.1.0.9", "clusterIPs": ["10.1.0.9"], "healthCheckNodePort": 32000},
                "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}),
        ),
        (
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": "n", "labels": managed.clone()}}),
            json!({"secrets": [{"name": "sa-token-abcde"}], "imagePullSecrets": [{"name": "member-registry"}]}),
        ),
        (
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "n", "labels": managed.clone()},
                "spec": {"ttlSecondsAfterFinished": 60, "template": {"metadata": {"labels": {"app": "j"}}, "spec": {"restartPolicy": "Never"}}}}),
            json!({"spec": {"selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "member-uid"}},
                "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "member-uid",
                    "batch.kubernetes.io/job-name": "j", "controller-uid": "member-uid", "job-name": "j"}}}},
                "status": {"active": 1}}),
        ),
        (
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                "metadata": {"name": "t", "namespace": "n", "labels": managed.clone(),
                    "annotations": {"kubernetes.io/service-account.name": "sa"}}}),
            json!({"metadata": {"annotations": {"kubernetes.io/service-account.uid": "member-sa-uid"}},
                "data": {"token": "dG9rZW4=", "ca.crt": "Y2E="}}),
        ),
        (
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "n", "labels": managed.clone()},
                "spec": {"resources": {"requests": {"storage": "1Gi"}}}}),
            json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "node-7", "pv.kubernetes.io/bind-completed": "yes"}},
                "spec": {"volumeName": "pvc-123"}, "status": {"phase": "Bound"}}),
        ),
        (
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n", "labels": managed.clone()},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
            json!({"metadata": {"finalizers": ["member/finalizer"]},
                "spec": {"nodeName": "node-1", "serviceAccountName": "default",
                "volumes": [{"name": "kube-api-access"}],
                "containers": [{"name": "c", "image": "nginx", "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run"}]}]},
                "status": {"phase": "Running"}}),
        ),
    ];
    for (template, member_side) in cases {
        let mut manifest = template.clone();
        i.prune(&mut manifest).unwrap();
        let member = as_applied(&manifest, member_side);
        let mut desired = manifest.clone();
        i.retain(&mut desired, &member).unwrap();
        assert!(
            i.matches_member(&desired, &member).unwrap(),
            "{}: desired {desired:#} vs member {member:#}",
            template["kind"]
        );
        // A real template change is still seen.
        let mut edited = manifest.clone();
        edited["metadata"]["labels"]["edited"] = json!("yes");
        i.retain(&mut edited, &member).unwrap();
        assert!(
            !i.matches_member(&edited, &member).unwrap(),
            "{}",
            template["kind"]
        );
    }
}
