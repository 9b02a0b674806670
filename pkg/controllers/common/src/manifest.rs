//! Reading Works' manifests: the GVK of a manifest, the index of an object among a
//! Work's manifests (Karmada's `GetManifestIndex`), and the status entry a member object earns in
//! its Work (`status.manifestStatuses`).

use apimachinery::split_api_version;
use karmada_apis::Work;
use karmada_apis::work::v1alpha1::{
    Manifest, ManifestIdentity, ManifestStatus, RawExtension, ResourceIdentifier,
};
use karmada_interpreter::{InterpretError, Interpreter};
use kube::api::GroupVersionKind;
use serde_json::Value;

/// The GVK of a Work's manifest, if it decodes and has `apiVersion` and `kind`.
pub fn manifest_gvk(manifest: &Manifest) -> Option<GroupVersionKind> {
    identity_gvk(&manifest.identity().ok()?)
}

/// The group/version/kind of a decoded manifest identity; `None` without `apiVersion` or `kind`.
pub fn identity_gvk(id: &ManifestIdentity) -> Option<GroupVersionKind> {
    if id.api_version.is_empty() || id.kind.is_empty() {
        return None;
    }
    let (group, version) = split_api_version(&id.api_version);
    Some(GroupVersionKind::gvk(group, version, &id.kind))
}

/// The string at `path` in an unstructured object; empty when absent or not a string.
pub fn text<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(next) => cur = next,
            None => return "",
        }
    }
    cur.as_str().unwrap_or_default()
}

/// The index of the manifest that is the object `api_version`/`kind`/`namespace`/`name`
/// (Karmada's `GetManifestIndex`).
pub fn manifest_index(
    work: &Work,
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Option<usize> {
    work.spec.workload.manifests.iter().position(|m| {
        m.identity().is_ok_and(|id| {
            id.api_version == api_version
                && id.kind == kind
                && id.metadata.namespace == namespace
                && id.metadata.name == name
        })
    })
}

/// The `status.manifestStatuses` entry of the member object `observed` (with `apiVersion` and
/// `kind`), the `ordinal`-th manifest of its Work: its reflected status and health, as Karmada's
/// work-status controller records them (its identifier leaves `resource` empty, as Karmada's does). The
/// execution controller writes it with `Applied` after a create or update (one status write per
/// Work instead of two); the work-status controller writes it when the object changes later.
pub fn manifest_status(
    interpreter: &Interpreter,
    observed: &Value,
    ordinal: usize,
    gvk: &GroupVersionKind,
) -> Result<ManifestStatus, InterpretError> {
    Ok(ManifestStatus {
        identifier: ResourceIdentifier {
            ordinal: i64::try_from(ordinal).unwrap_or(i64::MAX),
            group: gvk.group.clone(),
            version: gvk.version.clone(),
            kind: gvk.kind.clone(),
            resource: String::new(),
            namespace: text(observed, &["metadata", "namespace"]).to_owned(),
            name: text(observed, &["metadata", "name"]).to_owned(),
        },
        status: interpreter
            .reflect_status(observed)?
            .map(RawExtension::from),
        health: Some(interpreter.interpret_health(observed)),
    })
}
