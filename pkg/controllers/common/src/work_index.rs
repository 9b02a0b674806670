//! The index of the control plane's Work cache by what each Work holds: for every manifest, the
//! Work's namespace (its cluster's execution space), the manifest's `apiVersion` and `kind`.
//!
//! The Work cache is kept packed (see [`crate::template::control_plane_cache_options`]): a full
//! list decodes every Work, thousands per pass. The passes that look for a few Works — those
//! holding a MultiClusterService, the ServiceExports applied in members, the kinds whose member
//! watches a resync checks — go through this index and decode only what they need.
//!
//! Who calls what: a controller that reads it calls [`index_manifests`] once on the shared Work
//! store (adding it again is a no-op), then [`holding`] / [`holding_in`] for objects, or
//! [`entries`] and [`keys`] to act on keys without decoding (the workStatus member resync), or
//! [`keys_in`] for every Work of one execution space (the execution controller, when a member
//! connects or becomes Ready).

use std::collections::HashSet;
use std::sync::Arc;

use karmada_apis::Work;
use lariat::{ObjectKey, Store};

/// Name of the index.
pub const MANIFESTS_INDEX: &str = "work:manifests";

/// What an index value says: one manifest kind in one namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The Work's namespace.
    pub namespace: String,
    /// The manifest's `apiVersion`.
    pub api_version: String,
    /// The manifest's `kind`.
    pub kind: String,
}

impl Entry {
    /// The index value (`namespace|apiVersion|kind`; none of the three can hold a `|`).
    fn value(&self) -> String {
        format!("{}|{}|{}", self.namespace, self.api_version, self.kind)
    }

    fn parse(value: &str) -> Option<Entry> {
        let mut parts = value.splitn(3, '|');
        Some(Entry {
            namespace: parts.next()?.to_owned(),
            api_version: parts.next()?.to_owned(),
            kind: parts.next()?.to_owned(),
        })
    }
}

/// The index values of a Work: one per distinct manifest kind (manifests that do not decode are
/// not indexed).
fn values(work: &Work) -> Vec<String> {
    let namespace = work.metadata.namespace.clone().unwrap_or_default();
    let mut values: Vec<String> = work
        .spec
        .workload
        .manifests
        .iter()
        .filter_map(|m| m.identity().ok())
        .filter(|id| !id.kind.is_empty())
        .map(|id| {
            Entry {
                namespace: namespace.clone(),
                api_version: id.api_version,
                kind: id.kind,
            }
            .value()
        })
        .collect();
    values.sort_unstable();
    values.dedup();
    values
}

/// Adds the index to the Work store (once; later calls do nothing).
pub fn index_manifests(store: &Store<Work>) {
    store.add_index(MANIFESTS_INDEX, Arc::new(values));
}

/// The distinct (namespace, apiVersion, kind) the indexed Works hold.
pub fn entries(store: &Store<Work>) -> Vec<Entry> {
    store
        .index_values(MANIFESTS_INDEX)
        .iter()
        .filter_map(|v| Entry::parse(v))
        .collect()
}

/// The keys of the Works holding a manifest described by `entry` (no decode).
pub fn keys(store: &Store<Work>, entry: &Entry) -> Vec<ObjectKey> {
    store.keys_by_index(MANIFESTS_INDEX, &entry.value())
}

/// The Works holding a manifest of `kind` (and `api_version`, when given), in any namespace.
pub fn holding(store: &Store<Work>, api_version: Option<&str>, kind: &str) -> Vec<Arc<Work>> {
    matching(store, |e| {
        e.kind == kind && api_version.is_none_or(|v| e.api_version == v)
    })
}

/// The Works in `namespace` holding a manifest of `kind`.
pub fn holding_in(store: &Store<Work>, namespace: &str, kind: &str) -> Vec<Arc<Work>> {
    matching(store, |e| e.kind == kind && e.namespace == namespace)
}

/// The keys of the Works in `namespace` that hold at least one manifest (no decode): a member's
/// Works, by its execution space.
pub fn keys_in(store: &Store<Work>, namespace: &str) -> HashSet<ObjectKey> {
    matching_keys(store, |e| e.namespace == namespace)
}

fn matching(store: &Store<Work>, wanted: impl Fn(&Entry) -> bool) -> Vec<Arc<Work>> {
    let found = matching_keys(store, wanted);
    found.iter().filter_map(|k| store.get(k)).collect()
}

/// A Work holding two matching kinds is under both values: its key is returned once.
fn matching_keys(store: &Store<Work>, wanted: impl Fn(&Entry) -> bool) -> HashSet<ObjectKey> {
    entries(store)
        .iter()
        .filter(|e| wanted(e))
        .flat_map(|e| keys(store, e))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn work(namespace: &str, name: &str, manifests: &[(&str, &str)]) -> Work {
        serde_json::from_value(json!({
            "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"namespace": namespace, "name": name, "resourceVersion": "1"},
            "spec": {"workload": {"manifests": manifests.iter().map(|(v, k)| json!({
                "apiVersion": v, "kind": k, "metadata": {"name": name}
            })).collect::<Vec<_>>()}},
        }))
        .unwrap()
    }

    fn names(works: &[Arc<Work>]) -> Vec<String> {
        let mut n: Vec<String> = works
            .iter()
            .map(|w| w.metadata.name.clone().unwrap_or_default())
            .collect();
        n.sort();
        n
    }

    #[test]
    fn works_are_found_by_the_kinds_they_hold() {
        let store = Store::<Work>::new(None);
        store.apply(work("karmada-es-m1", "web", &[("apps/v1", "Deployment")]));
        index_manifests(&store);
        store.apply(work(
            "karmada-es-m1",
            "mcs",
            &[("networking.karmada.io/v1alpha1", "MultiClusterService")],
        ));
        store.apply(work(
            "karmada-es-m2",
            "both",
            &[
                ("networking.karmada.io/v1alpha1", "MultiClusterService"),
                ("networking.karmada.io/v1beta1", "MultiClusterService"),
            ],
        ));
        assert_eq!(
            names(&holding(&store, None, "MultiClusterService")),
            ["both", "mcs"]
        );
        assert_eq!(
            names(&holding(
                &store,
                Some("networking.karmada.io/v1beta1"),
                "MultiClusterService"
            )),
            ["both"]
        );
        assert_eq!(
            names(&holding_in(&store, "karmada-es-m1", "Deployment")),
            ["web"]
        );
        let deployments = Entry {
            namespace: "karmada-es-m1".into(),
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
        };
        assert!(entries(&store).contains(&deployments));
        assert_eq!(keys(&store, &deployments).len(), 1);
        // A Work's new manifests move it in the index.
        let mut changed = work("karmada-es-m1", "web", &[("v1", "ConfigMap")]);
        changed.metadata.resource_version = Some("2".into());
        store.apply(changed);
        assert!(keys(&store, &deployments).is_empty());
        assert_eq!(
            names(&holding_in(&store, "karmada-es-m1", "ConfigMap")),
            ["web"]
        );
    }

    #[test]
    fn a_members_works_are_found_by_its_execution_space_once_each() {
        let store = Store::<Work>::new(None);
        index_manifests(&store);
        store.apply(work(
            "karmada-es-m1",
            "two-kinds",
            &[("apps/v1", "Deployment"), ("v1", "ConfigMap")],
        ));
        store.apply(work("karmada-es-m1", "one", &[("v1", "ConfigMap")]));
        store.apply(work("karmada-es-m2", "other", &[("v1", "ConfigMap")]));
        let mut found: Vec<String> = keys_in(&store, "karmada-es-m1")
            .into_iter()
            .map(|k| k.name().to_owned())
            .collect();
        found.sort();
        assert_eq!(found, ["one", "two-kinds"]);
        assert!(keys_in(&store, "karmada-es-m3").is_empty());
    }
}
