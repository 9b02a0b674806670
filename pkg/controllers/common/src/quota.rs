//! FederatedResourceQuota accounting shared by the enforcement controller (which writes
//! `overallUsed`) and the scheduler (which refuses a placement beyond `overall`, as Karmada's
//! ResourceBinding webhook does), with the `FederatedQuotaEnforcement` gate on.

use std::sync::Arc;

use apimachinery::Quantity;
use apimachinery::resource_list::{ResourceList, add_into, times};
use karmada_apis::policy::v1alpha1::FederatedResourceQuota;
use karmada_apis::well_known::{
    FEDERATED_RESOURCE_QUOTA_NAME_LABEL, FEDERATED_RESOURCE_QUOTA_NAMESPACE_LABEL,
};
use karmada_apis::work::v1alpha2::{ResourceBindingSpec, TargetCluster};
use karmada_apis::{ResourceBinding, Work};
use kube::ResourceExt;

/// Karmada's feature gate for FederatedResourceQuota enforcement (off by default in v1.16).
pub const FEDERATED_QUOTA_ENFORCEMENT: &str = "FederatedQuotaEnforcement";

/// The Works the sync controller wrote for the quota `namespace/name`, by their labels (`works`
/// must be indexed by [`FEDERATED_RESOURCE_QUOTA_NAME_LABEL`]).
pub fn quota_works(works: &lariat::Store<Work>, namespace: &str, name: &str) -> Vec<Arc<Work>> {
    works
        .list_by_label(FEDERATED_RESOURCE_QUOTA_NAME_LABEL, name)
        .into_iter()
        .filter(|w| {
            w.labels()
                .get(FEDERATED_RESOURCE_QUOTA_NAMESPACE_LABEL)
                .map(String::as_str)
                == Some(namespace)
        })
        .collect()
}

/// What a binding's placement uses (Karmada's `CalculateResourceUsage`): with components, their
/// requests times their replicas, per scheduled cluster; otherwise each replica's request times
/// the replicas scheduled in all clusters. Nothing while unscheduled.
pub fn resource_usage(spec: &ResourceBindingSpec) -> ResourceList {
    if !spec.components.is_empty() {
        let clusters = i64::try_from(spec.clusters.len()).unwrap_or(i64::MAX);
        if clusters == 0 {
            return ResourceList::new();
        }
        let mut per_set = ResourceList::new();
        for c in &spec.components {
            let Some(req) = c.replica_requirements.as_ref() else {
                continue;
            };
            if c.replicas == 0 {
                continue;
            }
            add_into(
                &mut per_set,
                &times(&req.resource_request, i64::from(c.replicas)),
            );
        }
        return times(&per_set, clusters);
    }
    let Some(req) = spec.replica_requirements.as_ref() else {
        return ResourceList::new();
    };
    let replicas: i64 = spec.clusters.iter().map(|c| i64::from(c.replicas)).sum();
    if replicas == 0 {
        return ResourceList::new();
    }
    times(&req.resource_request, replicas)
}

/// Why placing the ResourceBinding `name` (now `spec`) on `clusters` would exceed one of `quotas`
/// (those of its namespace), given the namespace's `bindings`: the first resource of a quota's
/// `overall` whose use the placement increases beyond the limit, counting every other binding's
/// current placement. `None` when it fits.
pub fn placement_exceeds(
    quotas: &[Arc<FederatedResourceQuota>],
    bindings: &[Arc<ResourceBinding>],
    name: &str,
    spec: &ResourceBindingSpec,
    clusters: &[TargetCluster],
) -> Option<String> {
    if quotas.is_empty() {
        return None;
    }
    let old = resource_usage(spec);
    let new = resource_usage(&ResourceBindingSpec {
        clusters: clusters.to_vec(),
        ..spec.clone()
    });
    let mut others = ResourceList::new();
    for b in bindings.iter().filter(|b| b.name_any() != name) {
        add_into(&mut others, &resource_usage(&b.spec));
    }
    let value = |list: &ResourceList, resource: &str| {
        list.get(resource)
            .and_then(|q| Quantity::from_k8s(q).ok())
            .unwrap_or_else(|| Quantity::from_value(0, apimachinery::Format::DecimalSi))
    };
    for quota in quotas {
        for (resource, limit) in &quota.spec.overall {
            let (n, o) = (value(&new, resource), value(&old, resource));
            if n.cmp_value(&o).is_le() {
                continue;
            }
            let Ok(limit) = Quantity::from_k8s(limit) else {
                continue;
            };
            let mut total = value(&others, resource);
            total.add(&n);
            if total.cmp_value(&limit).is_gt() {
                return Some(format!(
                    "FederatedResourceQuota({}/{}) exceeded for resource {resource}: requested \
                     sum {total}, limit {limit}.",
                    quota.namespace().unwrap_or_default(),
                    quota.name_any()
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> ResourceBindingSpec {
        serde_json::from_value(v).unwrap()
    }

    fn rb(name: &str, cpu: &str, replicas: i32) -> Arc<ResourceBinding> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
                "metadata": {"namespace": "ns", "name": name},
                "spec": {
                    "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                    "replicaRequirements": {"resourceRequest": {"cpu": cpu}},
                    "clusters": [{"name": "m1", "replicas": replicas}],
                }
            }))
            .unwrap(),
        )
    }

    #[test]
    fn replicas_times_request() {
        let s = spec(json!({
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
            "replicaRequirements": {"resourceRequest": {"cpu": "250m", "memory": "0"}},
            "clusters": [{"name": "m1", "replicas": 3}, {"name": "m2", "replicas": 1}],
        }));
        let u = resource_usage(&s);
        assert_eq!(u.len(), 1);
        assert_eq!(u["cpu"].0, "1");
        let unscheduled = spec(json!({
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
            "replicaRequirements": {"resourceRequest": {"cpu": "250m"}},
        }));
        assert!(resource_usage(&unscheduled).is_empty());
    }

    #[test]
    fn components_per_cluster() {
        let s = spec(json!({
            "resource": {"apiVersion": "x/v1", "kind": "Job", "name": "j"},
            "components": [
                {"name": "a", "replicas": 2, "replicaRequirements": {"resourceRequest": {"cpu": "1"}}},
                {"name": "b", "replicas": 1, "replicaRequirements": {"resourceRequest": {"cpu": "500m", "memory": "1Gi"}}},
                {"name": "c", "replicas": 0, "replicaRequirements": {"resourceRequest": {"cpu": "9"}}},
            ],
            "clusters": [{"name": "m1"}, {"name": "m2"}],
        }));
        let u = resource_usage(&s);
        assert_eq!(u["cpu"].0, "5");
        assert_eq!(u["memory"].0, "2Gi");
    }

    #[test]
    fn refuses_only_an_increase_beyond_overall() {
        let quota: Arc<FederatedResourceQuota> = Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "policy.karmada.io/v1alpha1", "kind": "FederatedResourceQuota",
                "metadata": {"namespace": "ns", "name": "q"},
                "spec": {"overall": {"cpu": "2"}},
            }))
            .unwrap(),
        );
        let bindings = [rb("a", "500m", 2), rb("b", "500m", 1)];
        let target = |replicas| {
            vec![TargetCluster {
                name: "m1".into(),
                replicas,
                ..Default::default()
            }]
        };
        let quotas = [quota];
        // b from 1 to 2 replicas: 1 + 1 = 2 fits; to 3: 2.5 does not.
        assert_eq!(
            placement_exceeds(&quotas, &bindings, "b", &bindings[1].spec, &target(2)),
            None
        );
        assert_eq!(
            placement_exceeds(&quotas, &bindings, "b", &bindings[1].spec, &target(3)).unwrap(),
            "FederatedResourceQuota(ns/q) exceeded for resource cpu: requested sum 2500m, limit 2."
        );
        // Already over (a at 4 replicas): scaling b down is never refused.
        let over = [rb("a", "500m", 4), rb("b", "500m", 1)];
        assert_eq!(
            placement_exceeds(&quotas, &over, "b", &over[1].spec, &target(0)),
            None
        );
        assert_eq!(
            placement_exceeds(&[], &bindings, "b", &bindings[1].spec, &target(9)),
            None
        );
    }

    /// A multi-component binding's first placement counts one whole set per cluster (Karmada's
    /// `CalculateResourceUsage` with components, as its webhook checks it).
    #[test]
    fn a_component_set_is_checked_once_per_cluster() {
        let quota: Arc<FederatedResourceQuota> = Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "policy.karmada.io/v1alpha1", "kind": "FederatedResourceQuota",
                "metadata": {"namespace": "ns", "name": "q"},
                "spec": {"overall": {"cpu": "4"}},
            }))
            .unwrap(),
        );
        let job = spec(json!({
            "resource": {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment", "name": "f"},
            "components": [
                {"name": "jobmanager", "replicas": 1, "replicaRequirements": {"resourceRequest": {"cpu": "1"}}},
                {"name": "taskmanager", "replicas": 2, "replicaRequirements": {"resourceRequest": {"cpu": "1"}}},
            ],
        }));
        let on = |names: &[&str]| -> Vec<TargetCluster> {
            names
                .iter()
                .map(|n| TargetCluster {
                    name: (*n).into(),
                    ..Default::default()
                })
                .collect()
        };
        let quotas = [quota];
        let others = [rb("a", "500m", 2)];
        // 1 (a) + 3 (one set) = 4 fits; on two clusters 1 + 6 does not.
        assert_eq!(
            placement_exceeds(&quotas, &others, "f", &job, &on(&["m1"])),
            None
        );
        assert_eq!(
            placement_exceeds(&quotas, &others, "f", &job, &on(&["m1", "m2"])).unwrap(),
            "FederatedResourceQuota(ns/q) exceeded for resource cpu: requested sum 7, limit 4."
        );
    }
}
