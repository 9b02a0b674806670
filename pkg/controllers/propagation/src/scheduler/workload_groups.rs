//! Karmada's `WorkloadAffinity` gate in the scheduler: where the other ResourceBindings of a
//! binding's workload affinity and anti-affinity groups are (the input of the `WorkloadAffinity`
//! and `WorkloadAntiAffinity` filters of `karmada-scheduler`), gathered from the binding cache.
//!
//! Why the lock and the written results: the binding cache learns a result only when its watch
//! brings the write back, and the scheduler runs several bindings at once. Two bindings of one
//! anti-affinity group scheduled side by side would both see the other unplaced and could land
//! together. So bindings that name a group are scheduled one at a time (Karmada's scheduler
//! schedules every binding one at a time), and each result written is remembered until the cache
//! holds it (Karmada's "assigning bindings").
//! ClusterResourceBindings never name a group (the detector writes groups only for namespaced
//! templates, as Karmada's does); groups are per namespace.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use karmada_apis::ResourceBinding;
use karmada_apis::work::v1alpha2::{ResourceBindingSpec, WorkloadAffinityGroups};
use karmada_controllers_common::binding::BindingObject;
use karmada_scheduler::WorkloadGroupPeers;
use lariat::cache::Store;
use parking_lot::Mutex;

/// Index of the binding cache: `namespace/affinityGroup`.
const AFFINITY_INDEX: &str = "workload-affinity-group";
/// Index of the binding cache: `namespace/antiAffinityGroup`.
const ANTI_AFFINITY_INDEX: &str = "workload-anti-affinity-group";

/// The scheduler's view of the workload affinity groups.
#[derive(Default)]
pub(super) struct WorkloadGroups {
    /// Held while a binding that names a group is scheduled and its result written.
    serial: tokio::sync::Mutex<()>,
    /// Results written and maybe not in the cache yet, by `namespace/name`: the resourceVersion
    /// the write produced and the clusters it set.
    assigning: Mutex<HashMap<String, (u64, BTreeSet<String>)>>,
}

/// The groups a binding names, if any (both empty counts as none).
fn named_groups(spec: &ResourceBindingSpec) -> Option<&WorkloadAffinityGroups> {
    spec.workload_affinity_groups
        .as_ref()
        .filter(|g| !g.affinity_group.is_empty() || !g.anti_affinity_group.is_empty())
}

fn resource_version(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or_default()
}

fn index_value(namespace: &str, group: &str) -> String {
    format!("{namespace}/{group}")
}

/// Indexes the ResourceBinding cache by group (once per process; adding it again does nothing).
pub(super) fn index(store: &Store<ResourceBinding>) {
    let by = |pick: fn(&WorkloadAffinityGroups) -> &str| {
        Arc::new(move |rb: &ResourceBinding| -> Vec<String> {
            let namespace = rb.metadata.namespace.as_deref().unwrap_or_default();
            rb.spec
                .workload_affinity_groups
                .as_ref()
                .map(pick)
                .filter(|g| !g.is_empty())
                .map(|g| index_value(namespace, g))
                .into_iter()
                .collect()
        })
    };
    store.add_index(AFFINITY_INDEX, by(|g| g.affinity_group.as_str()));
    store.add_index(ANTI_AFFINITY_INDEX, by(|g| g.anti_affinity_group.as_str()));
}

impl WorkloadGroups {
    /// Waits for the turn of a binding that names a group; `None` (no wait) for any other.
    pub(super) async fn turn<B: BindingObject>(
        &self,
        b: &B,
    ) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        if b.meta().namespace.is_none() || named_groups(b.binding_spec()).is_none() {
            return None;
        }
        Some(self.serial.lock().await)
    }

    /// Where the other bindings of `b`'s groups are; `None` when `b` names no group (or is
    /// cluster-scoped).
    pub(super) fn peers<B: BindingObject>(
        &self,
        b: &B,
        store: &Store<ResourceBinding>,
    ) -> Option<WorkloadGroupPeers> {
        let namespace = b.meta().namespace.as_deref()?;
        let name = b.meta().name.as_deref().unwrap_or_default();
        let groups = named_groups(b.binding_spec())?;
        let others = |index: &str, group: &str| -> Vec<BTreeSet<String>> {
            if group.is_empty() {
                return Vec::new();
            }
            store
                .by_index(index, &index_value(namespace, group))
                .into_iter()
                .filter(|rb| rb.metadata.name.as_deref() != Some(name))
                .map(|rb| self.clusters_of(namespace, &rb))
                .collect()
        };
        Some(WorkloadGroupPeers {
            affinity: others(AFFINITY_INDEX, &groups.affinity_group)
                .into_iter()
                .filter(|clusters| !clusters.is_empty())
                .collect(),
            anti_affinity: others(ANTI_AFFINITY_INDEX, &groups.anti_affinity_group)
                .into_iter()
                .flatten()
                .collect(),
        })
    }

    /// A peer's clusters: what this scheduler wrote last, while the cache has not caught up.
    fn clusters_of(&self, namespace: &str, rb: &ResourceBinding) -> BTreeSet<String> {
        let key = index_value(namespace, rb.metadata.name.as_deref().unwrap_or_default());
        let cached = resource_version(&rb.metadata);
        let mut assigning = self.assigning.lock();
        match assigning.get(&key) {
            Some((written, clusters)) if *written > cached => clusters.clone(),
            Some(_) => {
                assigning.remove(&key);
                cached_clusters(rb)
            }
            None => cached_clusters(rb),
        }
    }

    /// Remembers a result written to `updated` (a binding that names a group).
    pub(super) fn written<B: BindingObject>(&self, updated: &B) {
        let Some(namespace) = updated.meta().namespace.as_deref() else {
            return;
        };
        if named_groups(updated.binding_spec()).is_none() {
            return;
        }
        let key = index_value(
            namespace,
            updated.meta().name.as_deref().unwrap_or_default(),
        );
        let clusters = updated
            .binding_spec()
            .clusters
            .iter()
            .map(|c| c.name.clone())
            .collect();
        self.assigning
            .lock()
            .insert(key, (resource_version(updated.meta()), clusters));
    }

    /// Forgets a deleted binding.
    pub(super) fn forget(&self, namespace: Option<&str>, name: &str) {
        if let Some(namespace) = namespace {
            self.assigning.lock().remove(&index_value(namespace, name));
        }
    }
}

fn cached_clusters(rb: &ResourceBinding) -> BTreeSet<String> {
    rb.spec.clusters.iter().map(|c| c.name.clone()).collect()
}
