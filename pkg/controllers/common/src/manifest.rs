//! Reading Works' manifests: the GVK of an unstructured manifest and the index of an object among a
//! Work's manifests (Karmada's `GetManifestIndex`).

use apimachinery::split_api_version;
use karmada_apis::Work;
use kube::api::GroupVersionKind;
use serde_json::Value;

/// The GVK of an unstructured manifest, if it has `apiVersion` and `kind`.
pub fn manifest_gvk(manifest: &Value) -> Option<GroupVersionKind> {
    let api_version = manifest.get("apiVersion")?.as_str()?;
    let kind = manifest.get("kind")?.as_str()?;
    if api_version.is_empty() || kind.is_empty() {
        return None;
    }
    let (group, version) = split_api_version(api_version);
    Some(GroupVersionKind::gvk(group, version, kind))
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
        text(&m.0, &["apiVersion"]) == api_version
            && text(&m.0, &["kind"]) == kind
            && text(&m.0, &["metadata", "namespace"]) == namespace
            && text(&m.0, &["metadata", "name"]) == name
    })
}
