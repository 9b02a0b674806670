//! Which clusters a binding's spec gives a Work, keeps a Work on or purges at once, and the
//! per-cluster settings the spec decides (dispatch suspension, conflict resolution).

use std::collections::{BTreeSet, HashSet};

use karmada_apis::policy::v1alpha1::{ConflictResolution, PurgeMode};
use karmada_apis::well_known::{
    CONFLICT_RESOLUTION_ABORT, CONFLICT_RESOLUTION_ANNOTATION, CONFLICT_RESOLUTION_OVERWRITE,
};
use karmada_apis::work::v1alpha2::{ResourceBindingSpec, TargetCluster};
use serde_json::Value;

/// The clusters whose Works a binding keeps (Karmada's `ObtainBindingSpecExistingClusters`).
pub fn existing_clusters(spec: &ResourceBindingSpec) -> BTreeSet<String> {
    let mut set: BTreeSet<String> = spec.clusters.iter().map(|c| c.name.clone()).collect();
    for r in &spec.required_by {
        set.extend(r.clusters.iter().map(|c| c.name.clone()));
    }
    for t in &spec.graceful_eviction_tasks {
        if t.purge_mode != Some(PurgeMode::Directly) {
            set.insert(t.from_cluster.clone());
        }
    }
    set
}

/// Clusters evicted with purge mode `Directly`.
pub(super) fn directly_purged_clusters(spec: &ResourceBindingSpec) -> BTreeSet<String> {
    spec.graceful_eviction_tasks
        .iter()
        .filter(|t| t.purge_mode == Some(PurgeMode::Directly))
        .map(|t| t.from_cluster.clone())
        .collect()
}

/// Scheduled clusters plus those of `requiredBy` (Karmada's `mergeTargetClusters`).
pub fn target_clusters(spec: &ResourceBindingSpec) -> Vec<TargetCluster> {
    let mut out = spec.clusters.clone();
    let mut seen: HashSet<String> = out.iter().map(|c| c.name.clone()).collect();
    for r in &spec.required_by {
        for c in &r.clusters {
            if seen.insert(c.name.clone()) {
                out.push(c.clone());
            }
        }
    }
    out
}

/// Karmada's `shouldSuspendDispatching`.
pub fn suspend_dispatching(spec: &ResourceBindingSpec, cluster: &str) -> bool {
    let Some(s) = spec.suspension.as_ref() else {
        return false;
    };
    s.dispatching.dispatching.unwrap_or(false)
        || s.dispatching
            .dispatching_on_clusters
            .as_ref()
            .is_some_and(|c| c.cluster_names.iter().any(|n| n == cluster))
}

/// The Work's conflict-resolution value (Karmada's `mergeConflictResolution`): the template's
/// annotation when it is `overwrite` or `abort`, else the binding's `conflictResolution`.
pub fn conflict_resolution(template: &Value, spec: &ResourceBindingSpec) -> &'static str {
    match karmada_controllers_common::work::meta_map_value(
        template,
        "annotations",
        CONFLICT_RESOLUTION_ANNOTATION,
    ) {
        Some(CONFLICT_RESOLUTION_OVERWRITE) => return CONFLICT_RESOLUTION_OVERWRITE,
        Some(CONFLICT_RESOLUTION_ABORT) => return CONFLICT_RESOLUTION_ABORT,
        Some(other) => {
            tracing::warn!(
                value = other,
                "ignoring invalid conflict-resolution annotation on template"
            );
        }
        None => {}
    }
    if spec.conflict_resolution == ConflictResolution::Overwrite {
        CONFLICT_RESOLUTION_OVERWRITE
    } else {
        CONFLICT_RESOLUTION_ABORT
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use karmada_apis::work::v1alpha2::{BindingSnapshot, GracefulEvictionTask};

    fn tc(name: &str, replicas: i32) -> TargetCluster {
        TargetCluster {
            name: name.into(),
            replicas,
            components: vec![],
        }
    }

    #[test]
    fn targets_and_existing_clusters() {
        let spec = ResourceBindingSpec {
            clusters: vec![tc("a", 1)],
            required_by: vec![BindingSnapshot {
                namespace: "ns".into(),
                name: "x".into(),
                clusters: vec![tc("a", 2), tc("b", 0)],
            }],
            graceful_eviction_tasks: vec![
                GracefulEvictionTask {
                    from_cluster: "c".into(),
                    purge_mode: Some(PurgeMode::Gracefully),
                    ..Default::default()
                },
                GracefulEvictionTask {
                    from_cluster: "d".into(),
                    purge_mode: Some(PurgeMode::Directly),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let names: Vec<_> = target_clusters(&spec).into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            existing_clusters(&spec).into_iter().collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert_eq!(directly_purged_clusters(&spec).len(), 1);
    }

    #[test]
    fn conflict_resolution_prefers_template() {
        let mut spec = ResourceBindingSpec::default();
        let plain = json!({"metadata": {}});
        assert_eq!(conflict_resolution(&plain, &spec), "abort");
        spec.conflict_resolution = ConflictResolution::Overwrite;
        assert_eq!(conflict_resolution(&plain, &spec), "overwrite");
        let t =
            json!({"metadata": {"annotations": {"work.karmada.io/conflict-resolution": "abort"}}});
        assert_eq!(conflict_resolution(&t, &spec), "abort");
        let bad =
            json!({"metadata": {"annotations": {"work.karmada.io/conflict-resolution": "x"}}});
        assert_eq!(conflict_resolution(&bad, &spec), "overwrite");
    }
}
