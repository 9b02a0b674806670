//! Drift: does a managed member object still say what its Work's manifest says, where not, and
//! who changed it? Shared by the work-status controller (which reports drift and re-queues the
//! Work) and the execution controller (which decides about pre-existing objects with a
//! DriftPolicy's `takeover: IfNoDiff`).
//!
//! The manifest first goes through the interpreter's retain step against the member object (so
//! member-owned fields — retained replicas, Service cluster IPs, member-added labels, ... — are
//! taken from the member and never count as drift). Then every field the manifest sets must be in
//! the member object with the same value; fields only the member has (API-server defaults,
//! `status`, server metadata) are ignored. Lists must have the same length and match element by
//! element. That tells a hand edit (another image, other replicas) from our own writes and from
//! defaulting, without a record of what was written.
//!
//! Who changed a drifted field is read from the member object's `managedFields`: the managers
//! whose `fieldsV1` set holds the field (or an atomic parent of it), other than karmada-rs's own.

use std::fmt::Write as _;

use karmada_interpreter::Interpreter;
use serde_json::Value;

/// At most this many drifted paths are reported per object.
pub const MAX_DRIFTED_PATHS: usize = 16;

/// Field managers of karmada-rs's own writes to member objects (the User-Agent names of the
/// binaries, which the API server uses as the manager of a PUT).
pub const OWN_FIELD_MANAGERS: &[&str] = &["karmada-controller-manager", "karmada-agent"];

/// One step of a path into an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A field of an object.
    Field(String),
    /// An element of a list.
    Index(usize),
}

/// A path into an object, e.g. `spec.template.spec.containers[0].image`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldPath(pub Vec<Segment>);

impl FieldPath {
    fn child(&self, segment: Segment) -> FieldPath {
        let mut segments = self.0.clone();
        segments.push(segment);
        FieldPath(segments)
    }
}

impl std::fmt::Display for FieldPath {
    /// Dotted fields and `[i]` indexes; a field name that is not a plain word (a label key such
    /// as `app.kubernetes.io/name`) is written `["..."]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = String::new();
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Field(name)
                    if !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
                {
                    if i > 0 {
                        out.push('.');
                    }
                    out.push_str(name);
                }
                Segment::Field(name) => {
                    let _ = write!(out, "[{}]", Value::String(name.clone()));
                }
                Segment::Index(n) => {
                    let _ = write!(out, "[{n}]");
                }
            }
        }
        f.write_str(&out)
    }
}

/// Where `observed` (the member object) differs from `manifest` (the Work's manifest): up to
/// [`MAX_DRIFTED_PATHS`] paths such as `spec.replicas` or `spec.template.spec.containers` (a
/// list whose length differs), in the manifest's field order; empty when it still matches, or
/// when the comparison cannot be made (malformed manifest).
pub fn drifted_at(interpreter: &Interpreter, manifest: &Value, observed: &Value) -> Vec<FieldPath> {
    let mut desired = manifest.clone();
    if interpreter.retain(&mut desired, observed).is_err() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(fields) = desired.as_object() {
        for (k, v) in fields.iter().filter(|(k, _)| k.as_str() != "status") {
            let at = FieldPath(vec![Segment::Field(k.clone())]);
            differences(v, observed.get(k), &at, &mut out);
        }
    }
    out
}

/// Adds to `out` the paths (below `at`) of the fields of `desired` that `observed` lacks or holds
/// with another value, until it has [`MAX_DRIFTED_PATHS`].
fn differences(
    desired: &Value,
    observed: Option<&Value>,
    at: &FieldPath,
    out: &mut Vec<FieldPath>,
) {
    if out.len() >= MAX_DRIFTED_PATHS {
        return;
    }
    match (desired, observed) {
        (Value::Object(d), Some(Value::Object(o))) => {
            for (k, v) in d {
                differences(v, o.get(k), &at.child(Segment::Field(k.clone())), out);
            }
        }
        (Value::Array(d), Some(Value::Array(o))) if d.len() == o.len() => {
            for (i, (d, o)) in d.iter().zip(o).enumerate() {
                differences(d, Some(o), &at.child(Segment::Index(i)), out);
            }
        }
        _ => {
            if !contained(desired, observed) {
                out.push(at.clone());
            }
        }
    }
}

/// The Work and binding condition type (karmada-rs's own): True while a member object differs
/// from its manifest.
pub const CONDITION_DRIFTED: &str = "Drifted";
/// `Drifted=True` reason, and the Warning Event's reason on the Work.
pub const REASON_DRIFT_DETECTED: &str = "DriftDetected";
/// `Drifted=False` reason: the member objects match their manifests again.
pub const REASON_NO_DRIFT: &str = "NoDrift";
/// The `Drifted=False` message on a Work.
pub const MESSAGE_NO_DRIFT: &str = "The member objects match their manifests.";

/// `karmada_rs_work_drift_total{cluster,kind}`: drifts found, one per member object version that
/// differs from its manifest (karmada-rs's own).
pub fn count_drift(cluster: &str, kind: &str) {
    static COUNTER: std::sync::OnceLock<Option<prometheus::IntCounterVec>> =
        std::sync::OnceLock::new();
    let counter = COUNTER.get_or_init(|| {
        let counter = prometheus::IntCounterVec::new(
            prometheus::Opts::new(
                "karmada_rs_work_drift_total",
                "Number of times a member object was found differing from its Work's manifest (once per object version), by member cluster and kind.",
            ),
            &["cluster", "kind"],
        )
        .map_err(|e| tracing::error!(error = %e, "invalid drift metric definition"))
        .ok()?;
        if let Err(e) = lariat::metrics::registry().register(Box::new(counter.clone())) {
            tracing::warn!(error = %e, "drift metric not registered");
        }
        Some(counter)
    });
    if let Some(c) = counter {
        c.with_label_values(&[cluster, kind]).inc();
    }
}

/// Who last set a field: a field manager of the member object and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldOwner {
    /// The field manager (`kubectl-edit`, `kubectl-client-side-apply`, a `?fieldManager=`).
    pub manager: String,
    /// The `managedFields` entry's time (RFC 3339), empty when it has none.
    pub time: String,
}

/// The managers (other than [`OWN_FIELD_MANAGERS`]) whose `fieldsV1` in `object`'s
/// `metadata.managedFields` hold `path`, or an atomic parent of it; status subresource entries
/// are ignored. List elements are matched to the `k:`/`v:`/`i:` keys through `object`'s values.
pub fn field_owners(object: &Value, path: &FieldPath) -> Vec<FieldOwner> {
    let Some(entries) = object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let mut owners: Vec<FieldOwner> = Vec::new();
    for entry in entries {
        let manager = entry
            .get("manager")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let subresource = entry
            .get("subresource")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if manager.is_empty() || !subresource.is_empty() || OWN_FIELD_MANAGERS.contains(&manager) {
            continue;
        }
        let Some(fields) = entry.get("fieldsV1") else {
            continue;
        };
        if owns(fields, Some(object), &path.0) && !owners.iter().any(|o| o.manager == manager) {
            owners.push(FieldOwner {
                manager: manager.to_owned(),
                time: entry
                    .get("time")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            });
        }
    }
    owners
}

/// Whether the `fieldsV1` node `fields` (for the value `observed`) holds `path`.
fn owns(fields: &Value, observed: Option<&Value>, path: &[Segment]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return true;
    };
    let Some(map) = fields.as_object() else {
        return false;
    };
    if map.is_empty() {
        // A leaf: the manager owns this value whole (an atomic list or map).
        return true;
    }
    match first {
        Segment::Field(name) => map
            .get(&format!("f:{name}"))
            .is_some_and(|f| owns(f, observed.and_then(|o| o.get(name)), rest)),
        Segment::Index(i) => {
            let element = observed.and_then(|o| o.get(*i));
            map.iter()
                .any(|(key, f)| element_key_matches(key, *i, element) && owns(f, element, rest))
        }
    }
}

/// Whether a `fieldsV1` list key names the `i`-th element, `element`.
fn element_key_matches(key: &str, i: usize, element: Option<&Value>) -> bool {
    if let Some(fields) = key.strip_prefix("k:") {
        let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(fields) else {
            return false;
        };
        return element.is_some_and(|e| fields.iter().all(|(k, v)| e.get(k) == Some(v)));
    }
    if let Some(value) = key.strip_prefix("v:") {
        return serde_json::from_str::<Value>(value).is_ok_and(|v| Some(&v) == element);
    }
    key.strip_prefix("i:").and_then(|n| n.parse::<usize>().ok()) == Some(i)
}

/// A stable hash of a manifest (FNV-1a over its JSON text), as 16 hex digits: what the execution
/// controller records on member objects of a `ReportOnly` workload to tell a manifest change from
/// a drift.
pub fn manifest_hash(manifest: &Value) -> String {
    let text = serde_json::to_string(manifest).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
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
        !drifted_at(interpreter, manifest, observed).is_empty()
    }

    fn paths(interpreter: &Interpreter, manifest: &Value, observed: &Value) -> Vec<String> {
        drifted_at(interpreter, manifest, observed)
            .iter()
            .map(ToString::to_string)
            .collect()
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
            paths(&i, &manifest(), &m),
            ["spec.template.spec.containers[0].image"]
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
            paths(&i, &manifest(), &m),
            ["spec.template.spec.containers"]
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

    #[test]
    fn every_drifted_path_is_reported_up_to_the_bound() {
        let i = Interpreter::default();
        let mut m = member();
        m["spec"]["replicas"] = json!(5);
        m["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox");
        m["metadata"]["labels"]["app"] = json!("other");
        assert_eq!(
            paths(&i, &manifest(), &m),
            [
                "metadata.labels.app",
                "spec.replicas",
                "spec.template.spec.containers[0].image"
            ]
        );
        let mut many = manifest();
        let mut observed = member();
        for n in 0..40 {
            many["metadata"]["labels"][format!("k{n}")] = json!("a");
            observed["metadata"]["labels"][format!("k{n}")] = json!("b");
        }
        assert_eq!(drifted_at(&i, &many, &observed).len(), MAX_DRIFTED_PATHS);
    }

    #[test]
    fn paths_quote_keys_that_are_not_words() {
        let p = FieldPath(vec![
            Segment::Field("metadata".into()),
            Segment::Field("labels".into()),
            Segment::Field("app.kubernetes.io/name".into()),
        ]);
        assert_eq!(
            p.to_string(),
            r#"metadata.labels["app.kubernetes.io/name"]"#
        );
    }

    #[test]
    fn owners_come_from_managed_fields() {
        let mut m = member();
        m["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox");
        m["metadata"]["managedFields"] = json!([
            {"manager": "karmada-controller-manager", "operation": "Update", "time": "2026-01-01T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {
                "f:containers": {"k:{\"name\":\"nginx\"}": {".": {}, "f:name": {}}}}}}}},
            {"manager": "hand-edit", "operation": "Apply", "time": "2026-01-02T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {"f:spec": {
                "f:containers": {"k:{\"name\":\"nginx\"}": {"f:image": {}}}}}}}},
            {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:replicas": {}}}}
        ]);
        let paths = drifted_at(&Interpreter::default(), &manifest(), &m);
        assert_eq!(paths.len(), 1);
        let owners = field_owners(&m, &paths[0]);
        assert_eq!(
            owners,
            [FieldOwner {
                manager: "hand-edit".into(),
                time: "2026-01-02T00:00:00Z".into()
            }]
        );
        let replicas = FieldPath(vec![
            Segment::Field("spec".into()),
            Segment::Field("replicas".into()),
        ]);
        assert!(field_owners(&m, &replicas).is_empty());
    }

    #[test]
    fn list_keys_match_elements() {
        let element = json!({"name": "nginx", "containerPort": 80});
        assert!(element_key_matches(
            r#"k:{"name":"nginx"}"#,
            3,
            Some(&element)
        ));
        assert!(!element_key_matches(
            r#"k:{"name":"other"}"#,
            3,
            Some(&element)
        ));
        assert!(element_key_matches(r#"v:"a""#, 0, Some(&json!("a"))));
        assert!(element_key_matches("i:2", 2, None));
        assert!(!element_key_matches("i:2", 1, None));
    }

    #[test]
    fn manifest_hash_is_stable() {
        assert_eq!(
            manifest_hash(&json!({"a": 1})),
            manifest_hash(&json!({"a": 1}))
        );
        assert_ne!(
            manifest_hash(&json!({"a": 1})),
            manifest_hash(&json!({"a": 2}))
        );
        assert_eq!(manifest_hash(&json!({"a": 1})).len(), 16);
    }
}
