//! Creating and updating Works the way Karmada's `CreateOrUpdateWork` does, shared by the binding
//! and namespace controllers: the manifest is decorated (`karmada.io/managed=true`, the template
//! uid, the Work's name and namespace, the conflict-resolution value, the permanent ids and the
//! managed-keys records) and pruned, and the Work is written only when something changed.
//!
//! What Karmada's mutating webhook does for Works (a `work.karmada.io/permanent-id` label on the
//! Work and in its manifest) is done here: a new Work gets a fresh id, an existing one keeps its id.

use std::collections::BTreeMap;

use apimachinery::{ConflictRetry, DEFAULT_RETRY, is_already_exists, is_conflict};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use karmada_apis::Work;
use karmada_apis::well_known::{
    APPLIED_CLUSTER_OVERRIDES_ANNOTATION, APPLIED_OVERRIDES_ANNOTATION,
    CLUSTER_RESOURCE_BINDING_ANNOTATION, CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL,
    CONFLICT_RESOLUTION_ANNOTATION, MANAGED_ANNOTATIONS_ANNOTATION, MANAGED_BY_KARMADA_LABEL,
    MANAGED_BY_KARMADA_LABEL_VALUE, MANAGED_LABELS_ANNOTATION, RESOURCE_BINDING_NAME_ANNOTATION,
    RESOURCE_BINDING_NAMESPACE_ANNOTATION, RESOURCE_BINDING_PERMANENT_ID_LABEL,
    RESOURCE_TEMPLATE_GENERATION_ANNOTATION, RESOURCE_TEMPLATE_UID_ANNOTATION,
    WORK_NAME_ANNOTATION, WORK_NAMESPACE_ANNOTATION, WORK_PERMANENT_ID_LABEL,
};
use karmada_apis::work::v1alpha1::{Manifest, WorkSpec, WorkloadTemplate};
use karmada_interpreter::{Interpreter, record_managed_annotations, record_managed_labels};
use kube::api::{Api, PostParams};
use lariat::Store;
use serde_json::Value;

/// Labels and annotations the propagation path puts on a manifest whatever its template says:
/// the Work builder's decorations ([`decorate`], [`finish_manifest`]) and the binding controller's
/// references (binding permanent id, binding name, template generation). Every other label and
/// annotation of a manifest comes from its template (or an override), so comparing those tells
/// whether a Work still carries its template's metadata.
pub const MANIFEST_DECORATION_KEYS: &[&str] = &[
    MANAGED_BY_KARMADA_LABEL,
    WORK_PERMANENT_ID_LABEL,
    RESOURCE_BINDING_PERMANENT_ID_LABEL,
    CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL,
    RESOURCE_TEMPLATE_UID_ANNOTATION,
    WORK_NAME_ANNOTATION,
    WORK_NAMESPACE_ANNOTATION,
    CONFLICT_RESOLUTION_ANNOTATION,
    MANAGED_ANNOTATIONS_ANNOTATION,
    MANAGED_LABELS_ANNOTATION,
    RESOURCE_TEMPLATE_GENERATION_ANNOTATION,
    RESOURCE_BINDING_NAMESPACE_ANNOTATION,
    RESOURCE_BINDING_NAME_ANNOTATION,
    CLUSTER_RESOURCE_BINDING_ANNOTATION,
];

/// Annotations of a Work that only describe the last sync: dropped when the new sync does not set
/// them (Karmada keeps stale values; we do not, so removing an override also clears its record).
const SYNC_RECORD_ANNOTATIONS: &[&str] = &[
    APPLIED_OVERRIDES_ANNOTATION,
    APPLIED_CLUSTER_OVERRIDES_ANNOTATION,
];

/// A Work could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WorkError {
    /// The manifest could not be prepared.
    #[error("work {namespace}/{name}: cannot prepare manifest: {source}")]
    Manifest {
        /// Work namespace.
        namespace: String,
        /// Work name.
        name: String,
        /// Why.
        #[source]
        source: karmada_interpreter::InterpretError,
    },
    /// The Work is being deleted.
    #[error("work {namespace}/{name} is being deleted")]
    Deleting {
        /// Work namespace.
        namespace: String,
        /// Work name.
        name: String,
    },
    /// An API request failed.
    #[error("{action} work {namespace}/{name}: {source}")]
    Api {
        /// What was attempted.
        action: &'static str,
        /// Work namespace.
        namespace: String,
        /// Work name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

impl WorkError {
    /// Whether the API server refused the Work for its size: `413 Request Entity Too Large` from
    /// the API server, or etcd's `request is too large` (its `--max-request-bytes`, 1.5 MiB by
    /// default). Retrying cannot help until the template shrinks.
    pub fn is_too_large(&self) -> bool {
        let WorkError::Api { source, .. } = self else {
            return false;
        };
        match source {
            kube::Error::Api(s) => {
                s.code == 413
                    || s.reason == "RequestEntityTooLarge"
                    || s.message.contains("request is too large")
            }
            _ => false,
        }
    }
}

/// What [`create_or_update_work`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkOutcome {
    /// The Work was created.
    Created,
    /// The Work was updated.
    Updated,
    /// The Work was already up to date; nothing was written.
    Unchanged,
}

/// The Work to write: its metadata (name, namespace, labels, annotations, finalizers, owners) and
/// the spec switches.
#[derive(Debug, Clone, Default)]
pub struct WorkTarget {
    /// Name (Karmada's `GenerateWorkName`).
    pub name: String,
    /// Namespace (`karmada-es-<cluster>`).
    pub namespace: String,
    /// Labels merged into the Work's labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations merged into the Work's annotations.
    pub annotations: BTreeMap<String, String>,
    /// Finalizers merged into the Work's finalizers.
    pub finalizers: Vec<String>,
    /// Owner references (set when non-empty).
    pub owner_references: Vec<OwnerReference>,
    /// `spec.suspendDispatching`; `None` leaves it unset, as Karmada's callers that pass no option
    /// (the namespace and quota controllers) do.
    pub suspend_dispatching: Option<bool>,
    /// `spec.preserveResourcesOnDeletion`; `None` leaves it unset.
    pub preserve_resources_on_deletion: Option<bool>,
}

fn string_map_mut<'a>(
    obj: &'a mut Value,
    field: &str,
) -> Option<&'a mut serde_json::Map<String, Value>> {
    let meta = obj
        .as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    let meta = meta.as_object_mut()?;
    let map = meta
        .entry(field)
        .or_insert_with(|| Value::Object(Default::default()));
    if !map.is_object() {
        *map = Value::Object(Default::default());
    }
    map.as_object_mut()
}

/// Sets a label on an unstructured object (no-op on a non-object).
pub fn set_label(obj: &mut Value, key: &str, value: &str) {
    if let Some(m) = string_map_mut(obj, "labels") {
        m.insert(key.to_owned(), Value::String(value.to_owned()));
    }
}

/// Sets an annotation on an unstructured object (no-op on a non-object).
pub fn set_annotation(obj: &mut Value, key: &str, value: &str) {
    if let Some(m) = string_map_mut(obj, "annotations") {
        m.insert(key.to_owned(), Value::String(value.to_owned()));
    }
}

/// A string field of `metadata`.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// A label or annotation value.
pub fn meta_map_value<'a>(obj: &'a Value, map: &str, key: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(map)?.get(key)?.as_str()
}

/// Decorates and prunes the workload for the Work `target` (Karmada's first half of
/// `CreateOrUpdateWork`): managed label, template uid, Work name/namespace, conflict resolution.
fn decorate(
    interpreter: &Interpreter,
    target: &WorkTarget,
    mut workload: Value,
) -> Result<Value, karmada_interpreter::InterpretError> {
    set_label(
        &mut workload,
        MANAGED_BY_KARMADA_LABEL,
        MANAGED_BY_KARMADA_LABEL_VALUE,
    );
    let uid = meta_str(&workload, "uid").unwrap_or_default().to_owned();
    set_annotation(&mut workload, RESOURCE_TEMPLATE_UID_ANNOTATION, &uid);
    set_annotation(&mut workload, WORK_NAME_ANNOTATION, &target.name);
    set_annotation(&mut workload, WORK_NAMESPACE_ANNOTATION, &target.namespace);
    if let Some(cr) = target.annotations.get(CONFLICT_RESOLUTION_ANNOTATION) {
        set_annotation(&mut workload, CONFLICT_RESOLUTION_ANNOTATION, cr);
    }
    interpreter.prune(&mut workload)?;
    Ok(workload)
}

/// The manifest as stored in the Work: the managed annotations recorded, the Work's permanent id
/// added, then the managed labels recorded (Karmada's `SetLabelsAndAnnotationsForWorkload` order).
fn finish_manifest(
    mut workload: Value,
    work_id: Option<&str>,
) -> Result<Value, karmada_interpreter::InterpretError> {
    record_managed_annotations(&mut workload)?;
    if let Some(id) = work_id.filter(|id| !id.is_empty()) {
        set_label(&mut workload, WORK_PERMANENT_ID_LABEL, id);
    }
    record_managed_labels(&mut workload)?;
    Ok(workload)
}

/// The Work `existing` should become (or a new Work when `None`).
fn desired_work(existing: Option<&Work>, target: &WorkTarget, manifest: Value) -> Work {
    let mut meta = existing.map_or_else(
        || ObjectMeta {
            name: Some(target.name.clone()),
            namespace: Some(target.namespace.clone()),
            ..Default::default()
        },
        |w| w.metadata.clone(),
    );
    let mut labels = meta.labels.take().unwrap_or_default();
    labels.extend(target.labels.clone());
    let mut annotations = meta.annotations.take().unwrap_or_default();
    for key in SYNC_RECORD_ANNOTATIONS {
        if !target.annotations.contains_key(*key) {
            annotations.remove(*key);
        }
    }
    annotations.extend(target.annotations.clone());
    let mut finalizers = meta.finalizers.take().unwrap_or_default();
    for f in &target.finalizers {
        if !finalizers.contains(f) {
            finalizers.push(f.clone());
        }
    }
    meta.labels = (!labels.is_empty()).then_some(labels);
    meta.annotations = (!annotations.is_empty()).then_some(annotations);
    meta.finalizers = (!finalizers.is_empty()).then_some(finalizers);
    if !target.owner_references.is_empty() {
        meta.owner_references = Some(target.owner_references.clone());
    }
    Work {
        metadata: meta,
        spec: WorkSpec {
            workload: WorkloadTemplate {
                manifests: vec![Manifest::from(manifest)],
            },
            suspend_dispatching: target.suspend_dispatching,
            preserve_resources_on_deletion: target.preserve_resources_on_deletion,
        },
        status: existing.and_then(|w| w.status.clone()),
    }
}

/// Creates the Work `target` holding `workload`, or updates it when it exists and differs; nothing
/// is written when it is up to date. `cached` is the Work cache (synced), read first: on a miss the
/// Work is created at once, and the API server is read only when that create finds it exists (a
/// Work the cache has not seen yet) or an update conflicts. Without a cache it is read first.
pub async fn create_or_update_work(
    client: &kube::Client,
    cached: Option<&Store<Work>>,
    interpreter: &Interpreter,
    target: &WorkTarget,
    workload: Value,
) -> Result<WorkOutcome, WorkError> {
    let manifest_err = |source| WorkError::Manifest {
        namespace: target.namespace.clone(),
        name: target.name.clone(),
        source,
    };
    let api_err = |action: &'static str, source| WorkError::Api {
        action,
        namespace: target.namespace.clone(),
        name: target.name.clone(),
        source,
    };
    let base = decorate(interpreter, target, workload).map_err(manifest_err)?;
    let api: Api<Work> = Api::namespaced(client.clone(), &target.namespace);
    let mut existing: Option<Work> = cached
        .and_then(|s| s.get_named(Some(&target.namespace), &target.name))
        .map(|w| (*w).clone());
    let mut fresh = existing.is_none();
    if existing.is_none() && cached.is_none() {
        existing = api
            .get_opt(&target.name)
            .await
            .map_err(|e| api_err("get", e))?;
    }
    let mut retry = ConflictRetry::new(DEFAULT_RETRY);
    while retry.next().await {
        match existing.take() {
            None => {
                let id = uuid::Uuid::new_v4().to_string();
                let manifest = finish_manifest(base.clone(), Some(&id)).map_err(manifest_err)?;
                let mut work = desired_work(None, target, manifest);
                work.metadata
                    .labels
                    .get_or_insert_with(Default::default)
                    .insert(WORK_PERMANENT_ID_LABEL.to_owned(), id);
                match api.create(&PostParams::default(), &work).await {
                    Ok(_) => return Ok(WorkOutcome::Created),
                    Err(e) if is_already_exists(&e) => {
                        existing = api
                            .get_opt(&target.name)
                            .await
                            .map_err(|e| api_err("get", e))?;
                        fresh = true;
                    }
                    Err(e) => return Err(api_err("create", e)),
                }
            }
            Some(current) => {
                if current.metadata.deletion_timestamp.is_some() {
                    return Err(WorkError::Deleting {
                        namespace: target.namespace.clone(),
                        name: target.name.clone(),
                    });
                }
                let id = current
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(WORK_PERMANENT_ID_LABEL))
                    .cloned()
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
                let manifest = finish_manifest(base.clone(), Some(&id)).map_err(manifest_err)?;
                let mut work = desired_work(Some(&current), target, manifest);
                work.metadata
                    .labels
                    .get_or_insert_with(Default::default)
                    .insert(WORK_PERMANENT_ID_LABEL.to_owned(), id);
                if work.metadata == current.metadata && work.spec == current.spec {
                    return Ok(WorkOutcome::Unchanged);
                }
                match api
                    .replace(&target.name, &PostParams::default(), &work)
                    .await
                {
                    Ok(_) => return Ok(WorkOutcome::Updated),
                    Err(e) if is_conflict(&e) || !fresh => {
                        if !is_conflict(&e) {
                            tracing::debug!(namespace = %target.namespace, name = %target.name, error = %e, "work update from cache failed; rereading");
                        }
                        existing = api
                            .get_opt(&target.name)
                            .await
                            .map_err(|e| api_err("get", e))?;
                        fresh = true;
                    }
                    Err(e) => return Err(api_err("update", e)),
                }
            }
        }
    }
    Err(WorkError::Api {
        action: "update",
        namespace: target.namespace.clone(),
        name: target.name.clone(),
        source: kube::Error::Api(Box::new(
            kube::core::Status::failure("too many conflicts", "Conflict").with_code(409),
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn manifest_decoration_matches_karmada() {
        let interpreter = Interpreter::default();
        let target = WorkTarget {
            name: "nginx-687f7fb96f".into(),
            namespace: "karmada-es-member1".into(),
            annotations: [(
                CONFLICT_RESOLUTION_ANNOTATION.to_owned(),
                "abort".to_owned(),
            )]
            .into(),
            ..Default::default()
        };
        let workload = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "default", "name": "nginx", "uid": "u-1", "resourceVersion": "5",
                         "labels": {"app": "nginx"}},
            "data": {"a": "b"}
        });
        let base = decorate(&interpreter, &target, workload).unwrap();
        let manifest = finish_manifest(base, Some("wid")).unwrap();
        let meta = &manifest["metadata"];
        assert_eq!(meta.get("resourceVersion"), None);
        assert_eq!(meta.get("uid"), None);
        assert_eq!(meta["labels"]["karmada.io/managed"], "true");
        assert_eq!(meta["labels"]["work.karmada.io/permanent-id"], "wid");
        assert_eq!(
            meta["labels"].as_object().unwrap().len(),
            3,
            "app, managed, work id"
        );
        assert_eq!(
            meta["annotations"]["resourcetemplate.karmada.io/uid"],
            "u-1"
        );
        assert_eq!(
            meta["annotations"]["work.karmada.io/name"],
            "nginx-687f7fb96f"
        );
        assert_eq!(
            meta["annotations"]["work.karmada.io/namespace"],
            "karmada-es-member1"
        );
        assert_eq!(
            meta["annotations"]["work.karmada.io/conflict-resolution"],
            "abort"
        );
        assert_eq!(
            meta["annotations"]["resourcetemplate.karmada.io/managed-labels"],
            "app,karmada.io/managed,work.karmada.io/permanent-id"
        );
        // Every key the builder adds is listed as a decoration; the workload's own are not.
        for field in ["labels", "annotations"] {
            for key in meta[field].as_object().unwrap().keys() {
                assert_eq!(
                    MANIFEST_DECORATION_KEYS.contains(&key.as_str()),
                    key != "app",
                    "{field} {key}"
                );
            }
        }
    }

    #[test]
    fn stale_override_records_are_dropped() {
        let mut existing = desired_work(None, &WorkTarget::default(), json!({}));
        existing.metadata.annotations = Some(
            [
                (APPLIED_OVERRIDES_ANNOTATION.to_owned(), "[]".to_owned()),
                ("user".to_owned(), "x".to_owned()),
            ]
            .into(),
        );
        let w = desired_work(Some(&existing), &WorkTarget::default(), json!({}));
        let a = w.metadata.annotations.unwrap();
        assert!(!a.contains_key(APPLIED_OVERRIDES_ANNOTATION));
        assert_eq!(a["user"], "x");
    }
}
