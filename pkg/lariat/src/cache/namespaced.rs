//! Watching one namespace on the namespace's own path.
//!
//! A cache scoped to a namespace lists and watches `/…/namespaces/<ns>/<plural>`, so a client that
//! may read that namespace only (a Role, e.g. a Pull-mode agent's Works in its execution space) can
//! run it; a field selector on the cluster-wide path would need cluster-wide `list`. kube-rs builds
//! a namespaced [`kube::Api`] only for kinds whose scope type says "namespaced", while a cache is
//! generic over every kind: [`InNamespace`] wraps an object as a kind of dynamic scope, which kube
//! lets [`kube::Api::constrain`] to a namespace, and [`unwrap_event`] takes the wrapper off again.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::DynamicResourceScope;
use kube::runtime::watcher::Event;
use serde::Deserialize;

/// `K`, seen by kube-rs as a kind of dynamic scope (so its `Api` can be constrained to a
/// namespace). Same wire form, same URL parts, same metadata.
#[derive(Clone, Debug, Deserialize)]
#[serde(transparent)]
pub(crate) struct InNamespace<K>(pub K);

impl<K: Resource> Resource for InNamespace<K> {
    type DynamicType = K::DynamicType;
    type Scope = DynamicResourceScope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn metadata_api() -> bool {
        K::metadata_api()
    }
    fn url_path(dt: &Self::DynamicType, namespace: Option<&str>) -> String {
        K::url_path(dt, namespace)
    }
    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

/// The watch event of the wrapped object.
pub(crate) fn unwrap_event<K>(event: Event<InNamespace<K>>) -> Event<K> {
    match event {
        Event::Apply(o) => Event::Apply(o.0),
        Event::Delete(o) => Event::Delete(o.0),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(o.0),
        Event::InitDone => Event::InitDone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;

    #[tokio::test]
    async fn namespaced_path_for_any_kind() {
        // Only builds the URL; the client is never used.
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let api: Api<InNamespace<ConfigMap>> = Api::all_with(client, &()).constrain("team-a");
        assert_eq!(api.resource_url(), "/api/v1/namespaces/team-a/configmaps");
    }
}
