//! Writes to objects this process does not own (templates, Clusters, policies): JSON merge patches
//! (RFC 7386) of exactly what a controller changed, guarded by the `resourceVersion` it read.
//!
//! A PUT of a cached copy would erase whatever the cache strips (kubectl's
//! `last-applied-configuration` annotation, managedFields) and whatever another writer added
//! since; a merge patch of the changed members leaves every other field alone, and the
//! `resourceVersion` in the patch turns a concurrent change into a 409 the caller retries, as the
//! PUT did (a merge patch replaces lists such as finalizers and taints whole).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::{Map, Value};

/// The merge patch that turns `old` into `new`: changed members, `null` for removed ones, arrays
/// and scalars whole. `None` when they are equal.
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    if old == new {
        return None;
    }
    let (Value::Object(o), Value::Object(n)) = (old, new) else {
        return Some(new.clone());
    };
    let mut patch = Map::new();
    for (k, nv) in n {
        match o.get(k) {
            Some(ov) => {
                if let Some(d) = merge_diff(ov, nv) {
                    patch.insert(k.clone(), d);
                }
            }
            None => {
                patch.insert(k.clone(), nv.clone());
            }
        }
    }
    for k in o.keys() {
        if !n.contains_key(k) {
            patch.insert(k.clone(), Value::Null);
        }
    }
    Some(Value::Object(patch))
}

/// The merge patch that turns `old` into `new`, carrying `old`'s `metadata.resourceVersion` so the
/// write fails with a conflict if the object changed since `old` was read. `None` when nothing
/// changed.
pub fn guarded_merge_patch<T: Serialize>(
    old: &T,
    new: &T,
) -> Result<Option<Value>, serde_json::Error> {
    let old = serde_json::to_value(old)?;
    let new = serde_json::to_value(new)?;
    let Some(mut patch) = merge_diff(&old, &new) else {
        return Ok(None);
    };
    if let Some(rv) = old.pointer("/metadata/resourceVersion").cloned()
        && let Some(p) = patch.as_object_mut()
    {
        let meta = p
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(m) = meta.as_object_mut() {
            m.insert("resourceVersion".to_owned(), rv);
        }
    }
    Ok(Some(patch))
}

/// [`guarded_merge_patch`] of an object whose metadata alone changed from `old` to `new` (the rest
/// of the object is neither read nor written).
pub fn guarded_metadata_patch(
    old: &ObjectMeta,
    new: &ObjectMeta,
) -> Result<Option<Value>, serde_json::Error> {
    #[derive(Serialize)]
    struct Metadata<'a> {
        metadata: &'a ObjectMeta,
    }
    guarded_merge_patch(&Metadata { metadata: old }, &Metadata { metadata: new })
}

/// Writes what differs between `read` and `updated` as a merge patch guarded by `read`'s
/// resourceVersion ([`guarded_merge_patch`]): the object written, or `read` when nothing differs.
pub async fn patch_changes<K>(api: &kube::Api<K>, read: &K, updated: &K) -> Result<K, kube::Error>
where
    K: kube::Resource + Clone + Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let Some(patch) = guarded_merge_patch(read, updated).map_err(kube::Error::SerdeError)? else {
        return Ok(read.clone());
    };
    let name = read.meta().name.clone().unwrap_or_default();
    let params = kube::api::PatchParams::default();
    api.patch(&name, &params, &kube::api::Patch::Merge(&patch))
        .await
}

/// Changes the metadata of `cached` with `mutate` and writes the difference as a guarded merge
/// patch ([`guarded_metadata_patch`]); on a conflict the object is read again and `mutate` applied
/// to the fresh copy. Returns whether something was written (`false` also when the object is
/// gone).
pub async fn update_metadata<K, F>(
    api: &kube::Api<K>,
    cached: &K,
    mutate: F,
) -> Result<bool, kube::Error>
where
    K: kube::Resource + Clone + Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    F: Fn(&mut ObjectMeta),
{
    let name = cached.meta().name.clone().unwrap_or_default();
    let result = apimachinery::retry_on_conflict(
        apimachinery::DEFAULT_RETRY,
        apimachinery::is_conflict,
        |attempt| {
            let first = (attempt == 0).then(|| cached.clone());
            let api = api.clone();
            let name = name.clone();
            let mutate = &mutate;
            async move {
                let read = match first {
                    Some(k) => k,
                    None => match api.get_opt(&name).await? {
                        Some(k) => k,
                        None => return Ok(false),
                    },
                };
                let mut meta = read.meta().clone();
                mutate(&mut meta);
                let Some(patch) =
                    guarded_metadata_patch(read.meta(), &meta).map_err(kube::Error::SerdeError)?
                else {
                    return Ok(false);
                };
                let params = kube::api::PatchParams::default();
                api.patch(&name, &params, &kube::api::Patch::Merge(&patch))
                    .await?;
                Ok(true)
            }
        },
    )
    .await;
    result.map_err(|e| match e {
        apimachinery::RetryError::Conflicts { last, .. }
        | apimachinery::RetryError::Failed(last) => last,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diff_names_only_changes() {
        let old = json!({
            "metadata": {"resourceVersion": "7", "labels": {"a": "1", "gone": "x"},
                         "annotations": {"keep": "k"}, "finalizers": ["f1"]},
            "spec": {"replicas": 2}
        });
        let new = json!({
            "metadata": {"resourceVersion": "7", "labels": {"a": "2", "new": "n"},
                         "annotations": {"keep": "k"}, "finalizers": ["f1", "f2"]},
            "spec": {"replicas": 2}
        });
        assert_eq!(
            merge_diff(&old, &new),
            Some(json!({"metadata": {
                "labels": {"a": "2", "new": "n", "gone": null},
                "finalizers": ["f1", "f2"]
            }}))
        );
        assert_eq!(merge_diff(&old, &old), None);
    }

    #[test]
    fn removed_map_becomes_null_and_added_map_is_whole() {
        let old = json!({"metadata": {"labels": {"a": "1"}}});
        let new = json!({"metadata": {"annotations": {"b": "2"}}});
        assert_eq!(
            merge_diff(&old, &new),
            Some(json!({"metadata": {"labels": null, "annotations": {"b": "2"}}}))
        );
    }

    #[test]
    fn guard_carries_the_read_resource_version() {
        let old = json!({"metadata": {"name": "x", "resourceVersion": "42"}});
        let new = json!({"metadata": {"name": "x", "resourceVersion": "42", "finalizers": ["f"]}});
        assert_eq!(
            guarded_merge_patch(&old, &new).unwrap(),
            Some(json!({"metadata": {"finalizers": ["f"], "resourceVersion": "42"}}))
        );
        assert_eq!(guarded_merge_patch(&old, &old).unwrap(), None);
    }

    #[test]
    fn metadata_patch_removes_labels_with_null() {
        let old: ObjectMeta = serde_json::from_value(json!({
            "name": "x", "resourceVersion": "3", "labels": {"a": "1", "b": "2"}
        }))
        .unwrap();
        let mut new = old.clone();
        new.labels.as_mut().unwrap().remove("b");
        assert_eq!(
            guarded_metadata_patch(&old, &new).unwrap(),
            Some(json!({"metadata": {"labels": {"b": null}, "resourceVersion": "3"}}))
        );
    }
}
