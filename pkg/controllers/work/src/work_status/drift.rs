//! Drift detection: does a managed member object still say what its Work's manifest says?
//!
//! The manifest first goes through the interpreter's retain step against the member object (so
//! member-owned fields — retained replicas, Service cluster IPs, member-added labels, ... — are
//! taken from the member and never count as drift). Then every field the manifest sets must be in
//! the member object with the same value; fields only the member has (API-server defaults,
//! `status`, server metadata) are ignored. Lists must have the same length and match element by
//! element. That tells a hand edit (another image, other replicas) from our own writes and from
//! defaulting, without a record of what was written.

use karmada_interpreter::Interpreter;
use serde_json::Value;

/// Where `observed` (the member object) first differs from `manifest` (the Work's manifest): a
/// dotted path such as `spec.replicas` or `spec.template.spec.containers[0]`, or `None` when it
/// still matches. Also `None` when the comparison cannot be made (malformed manifest).
pub fn drifted_at(interpreter: &Interpreter, manifest: &Value, observed: &Value) -> Option<String> {
    let mut desired = manifest.clone();
    if interpreter.retain(&mut desired, observed).is_err() {
        return None;
    }
    desired
        .as_object()?
        .iter()
        .filter(|(k, _)| k.as_str() != "status")
        .find_map(|(k, v)| difference(v, observed.get(k), k.clone()))
}

/// The path (below `at`) of the first field of `desired` that `observed` lacks or holds with
/// another value; `None` when [`contained`].
fn difference(desired: &Value, observed: Option<&Value>, at: String) -> Option<String> {
    match (desired, observed) {
        (Value::Object(d), Some(Value::Object(o))) => d
            .iter()
            .find_map(|(k, v)| difference(v, o.get(k), format!("{at}.{k}"))),
        (Value::Array(d), Some(Value::Array(o))) if d.len() == o.len() => d
            .iter()
            .zip(o)
            .enumerate()
            .find_map(|(i, (d, o))| difference(d, Some(o), format!("{at}[{i}]"))),
        _ => (!contained(desired, observed)).then_some(at),
    }
}

/// Whether every field of `desired` is in `observed` with the same value.
pub fn contained(desired: &Value, observed: Option<&Value>) -> bool {
    match (desired, observed) {
        (Value::Null, _) => true,
        (Value::Object(d), None) => d.values().all(|v| contained(v, None)),
        (Value::Array(d), None) => d.is_empty(),
        (_, None) => false,
        (Value::Object(d), Some(Value::Object(o))) => d.iter().all(|(k, v)| contained(v, o.get(k))),
        (Value::Array(d), Some(Value::Array(o))) => {
            d.len() == o.len() && d.iter().zip(o).all(|(d, o)| contained(d, Some(o)))
        }
        (Value::Number(d), Some(Value::Number(o))) => match (d.as_f64(), o.as_f64()) {
            (Some(a), Some(b)) => a == b,
            _ => d == o,
        },
        (d, Some(o)) => d == o,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn drifts(interpreter: &Interpreter, manifest: &Value, observed: &Value) -> bool {
        drifted_at(interpreter, manifest, observed).is_some()
    }

    fn manifest() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "default",
                "labels": {"karmada.io/managed": "true", "app": "nginx"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "nginx"}},
                "template": {"metadata": {"labels": {"app": "nginx"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}})
    }

    /// The manifest as a member API server returns it: defaults, server metadata, status.
    fn member() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "default", "uid": "u", "resourceVersion": "42",
                "generation": 3, "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"karmada.io/managed": "true", "app": "nginx", "member-side": "x"},
                "annotations": {"deployment.kubernetes.io/revision": "2"}},
            "spec": {"replicas": 2, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                "selector": {"matchLabels": {"app": "nginx"}},
                "strategy": {"type": "RollingUpdate"},
                "template": {"metadata": {"labels": {"app": "nginx"}},
                    "spec": {"restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
                        "containers": [{"name": "nginx", "image": "nginx:1.27",
                            "imagePullPolicy": "IfNotPresent", "resources": {}}]}}},
            "status": {"replicas": 2, "readyReplicas": 1}})
    }

    #[test]
    fn defaults_and_status_are_not_drift() {
        assert!(!drifts(&Interpreter::default(), &manifest(), &member()));
    }

    #[test]
    fn hand_edits_are_drift() {
        let i = Interpreter::default();
        let mut m = member();
        m["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox");
        assert_eq!(
            drifted_at(&i, &manifest(), &m).as_deref(),
            Some("spec.template.spec.containers[0].image")
        );
        let mut m = member();
        m["spec"]["replicas"] = json!(5);
        assert!(drifts(&i, &manifest(), &m));
        let mut m = member();
        m["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "sidecar", "image": "x"}));
        assert_eq!(
            drifted_at(&i, &manifest(), &m).as_deref(),
            Some("spec.template.spec.containers")
        );
    }

    #[test]
    fn retained_replicas_are_not_drift() {
        let i = Interpreter::default();
        let mut manifest = manifest();
        manifest["metadata"]["labels"]["resourcetemplate.karmada.io/retain-replicas"] =
            json!("true");
        let mut m = member();
        m["metadata"]["labels"]["resourcetemplate.karmada.io/retain-replicas"] = json!("true");
        m["spec"]["replicas"] = json!(7);
        assert!(!drifts(&i, &manifest, &m));
    }

    #[test]
    fn contained_rules() {
        assert!(contained(&json!({"a": {}}), Some(&json!({}))));
        assert!(contained(&json!({"a": []}), Some(&json!({}))));
        assert!(contained(&json!({"a": null}), Some(&json!({"a": 1}))));
        assert!(contained(&json!(1), Some(&json!(1.0))));
        assert!(!contained(&json!({"a": 1}), Some(&json!({}))));
        assert!(!contained(&json!([1]), Some(&json!([1, 2]))));
    }
}
