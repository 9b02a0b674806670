//! Reading resource templates the way Karmada's `FetchResourceTemplate` does: from the control
//! plane's cache of the template's kind (the detector watches every kind a policy selects), falling
//! back to the API server when that cache is not watching yet, has not synced, lacks the object,
//! or holds a copy older than the binding's. That last case is real: the detector builds a binding
//! from the response to its claim of the template, and a controller may meet the binding before the
//! cache has seen that claim; a Work rendered from the older copy would keep it, since nothing
//! changes the binding again. A caller that writes with the template's resourceVersion and meets a
//! conflict reads the API server.

use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject, TypeMeta};
use lariat::CacheOptions;

/// The control plane's cache settings for every process running the controllers: kubectl's
/// last-applied annotation is kept (the framework drops it by default), because Works are built
/// from cached templates ([`cached`]) and Karmada's manifests carry it; Works are kept packed
/// (one per template and member, each a whole manifest: most of the process's memory at scale),
/// read one at a time or through indexes ([`crate::work_index`], label indexes), never listed
/// whole on a hot path.
pub fn control_plane_cache_options() -> CacheOptions {
    CacheOptions {
        strip_last_applied: false,
        ..CacheOptions::default()
    }
    .pack::<karmada_apis::Work>()
}

/// The template `namespace/name` (empty namespace: cluster-scoped) of resource `ar` as the control
/// plane's cache holds it, with its `apiVersion` and `kind` (the items of a list response of a
/// built-in kind carry neither, so a cache filled by its initial list lacks them); `None` sends
/// the caller to the API server, also when the cached copy is older than `at_least` (the
/// binding's `spec.resource.resourceVersion`; resourceVersions that do not compare are taken as
/// current).
pub fn cached(
    control_plane: &lariat::Cluster,
    ar: &ApiResource,
    namespace: &str,
    name: &str,
    at_least: &str,
) -> Option<DynamicObject> {
    let cache = control_plane.caches().for_resource(ar).ok()?;
    if !(cache.is_started() && cache.has_synced()) {
        return None;
    }
    let namespace = (!namespace.is_empty()).then_some(namespace);
    let obj = cache.peek_store().get_named(namespace, name)?;
    if behind(obj.metadata.resource_version.as_deref(), at_least) {
        return None;
    }
    Some(Arc::unwrap_or_clone(with_type_meta(
        obj,
        &ar.api_version,
        &ar.kind,
    )))
}

/// Whether a cached copy at resourceVersion `cached` is provably older than `at_least`.
fn behind(cached: Option<&str>, at_least: &str) -> bool {
    apimachinery::resource_version::compare(cached.unwrap_or_default(), at_least)
        == Some(std::cmp::Ordering::Less)
}

/// A cached object with its `apiVersion` and `kind`, set from its kind when it lacks them: the
/// items of a list response of a built-in kind carry neither, so an object a cache only listed
/// lacks them until a watch event replaces it, and the interpreters match on both (a Deployment
/// without them has no dependencies, no replicas).
pub fn with_type_meta(
    obj: Arc<DynamicObject>,
    api_version: &str,
    kind: &str,
) -> Arc<DynamicObject> {
    if obj.types.is_some() {
        return obj;
    }
    let mut obj = Arc::unwrap_or_clone(obj);
    obj.types = Some(TypeMeta {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
    });
    Arc::new(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_older_than_the_binding_is_behind_and_others_are_not() {
        // The claim's response (the binding's version) has not reached the cache yet.
        assert!(behind(Some("1041"), "1052"));
        assert!(behind(Some("999"), "1000"));
        // The cache has the binding's version, or a later one (a status write the binding
        // does not follow).
        assert!(!behind(Some("1052"), "1052"));
        assert!(!behind(Some("1060"), "1052"));
        // Nothing to compare: the cache is used, as before.
        assert!(!behind(Some("1041"), ""));
        assert!(!behind(None, "1052"));
    }
}
