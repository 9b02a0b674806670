//! How many more replicas a cluster can run, from its `status.resourceSummary` (Karmada's
//! "general estimator", `pkg/estimator/client/general.go`).
//!
//! Without resource models: the allowed pod count (`allocatable − allocated − allocating` pods) is
//! capped, for every requested resource, by `(allocatable − allocated − allocating) / request`
//! (CPU in millicores, everything else in whole units). With resource models (`spec.resourceModels`
//! and `status.resourceSummary.allocatableModelings`, Karmada's default-on
//! `CustomizedClusterResourceModeling` feature): every modelled node is given its grade's minimum
//! resources and 110 pods, replicas are packed first-fit onto those nodes, and the result is capped
//! by the allowed pod count.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karmada_apis::Cluster;
use karmada_apis::cluster::v1alpha1::ResourceSummary;
use karmada_apis::work::v1alpha2::ReplicaRequirements;

use apimachinery::quantity::{Format, Quantity as Amount};

/// What an unparsable quantity counts as.
const ZERO: Amount = Amount::zero(Format::DecimalSi);

/// Pods per modelled node, Kubernetes' default maximum.
const MAX_PODS_PER_NODE: i64 = 110;

fn amount(map: &BTreeMap<String, Quantity>, key: &str) -> Option<Amount> {
    map.get(key).map(|q| Amount::from_k8s(q).unwrap_or(ZERO))
}

fn value_of(map: &BTreeMap<String, Quantity>, key: &str) -> i64 {
    amount(map, key).map_or(0, |a| a.value())
}

/// `allocatable − allocated − allocating` pods, never negative.
fn allowed_pods(summary: &ResourceSummary) -> i64 {
    let allowed = value_of(&summary.allocatable, "pods")
        .saturating_sub(value_of(&summary.allocated, "pods"))
        .saturating_sub(value_of(&summary.allocating, "pods"));
    allowed.max(0)
}

/// The maximum number of replicas with `requirements` that `cluster` can still take.
pub fn max_available_replicas(
    cluster: &Cluster,
    requirements: Option<&ReplicaRequirements>,
) -> i32 {
    let Some(summary) = cluster
        .status
        .as_ref()
        .and_then(|s| s.resource_summary.as_ref())
    else {
        return 0;
    };
    let mut maximum = allowed_pods(summary);
    if maximum <= 0 {
        return 0;
    }
    let Some(requirements) = requirements else {
        return clamp_i32(maximum);
    };
    if !summary.allocatable_modelings.is_empty()
        && let Some(by_models) = replicas_by_resource_models(cluster, summary, requirements)
    {
        return clamp_i32(maximum.min(by_models));
    }
    maximum = maximum.min(replicas_by_summary(summary, requirements));
    clamp_i32(maximum)
}

fn clamp_i32(v: i64) -> i32 {
    i32::try_from(v.max(0)).unwrap_or(i32::MAX)
}

fn replicas_by_summary(summary: &ResourceSummary, requirements: &ReplicaRequirements) -> i64 {
    let mut maximum = i64::MAX;
    for (key, request) in &requirements.resource_request {
        let request = Amount::from_k8s(request).unwrap_or(ZERO);
        if request.value() <= 0 {
            continue;
        }
        let Some(allocatable) = amount(&summary.allocatable, key) else {
            return 0;
        };
        let mut available = allocatable;
        if let Some(allocated) = amount(&summary.allocated, key) {
            available.sub(&allocated);
        }
        if let Some(allocating) = amount(&summary.allocating, key) {
            available.sub(&allocating);
        }
        if available.value() <= 0 {
            return 0;
        }
        let (available, requested) = if key == "cpu" {
            (available.milli_value(), request.milli_value())
        } else {
            (available.value(), request.value())
        };
        maximum = maximum.min(available / requested.max(1));
    }
    maximum
}

/// Whether Kubernetes counts a resource name as a "scalar" resource (extended resources, hugepages,
/// attachable volumes, prefixed native resources).
fn is_scalar_resource(name: &str) -> bool {
    name.contains('/') || name.starts_with("hugepages-") || name.starts_with("attachable-volumes-")
}

/// A modelled node's (or a replica's) resources in the units Karmada's estimator divides.
#[derive(Debug, Clone, Default)]
struct NodeResources {
    milli_cpu: i64,
    memory: i64,
    ephemeral_storage: i64,
    pods: i64,
    scalar: BTreeMap<String, i64>,
}

impl NodeResources {
    fn add(&mut self, name: &str, quantity: &Quantity) {
        let q = Amount::from_k8s(quantity).unwrap_or(ZERO);
        match name {
            "cpu" => self.milli_cpu = self.milli_cpu.saturating_add(q.milli_value()),
            "memory" => self.memory = self.memory.saturating_add(q.value()),
            "pods" => self.pods = self.pods.saturating_add(q.value()),
            "ephemeral-storage" => {
                self.ephemeral_storage = self.ephemeral_storage.saturating_add(q.value());
            }
            other if is_scalar_resource(other) => {
                let slot = self.scalar.entry(other.to_owned()).or_default();
                *slot = slot.saturating_add(q.value());
            }
            _ => {}
        }
    }

    /// How many replicas requesting `request` fit (apimachinery `Resource.MaxDivided`).
    fn max_divided(&self, request: &BTreeMap<String, Quantity>) -> i64 {
        let mut result = i64::MAX;
        for (name, quantity) in request {
            let q = Amount::from_k8s(quantity).unwrap_or(ZERO);
            let (have, need) = match name.as_str() {
                "cpu" => (self.milli_cpu, q.milli_value()),
                "memory" => (self.memory, q.value()),
                "ephemeral-storage" => (self.ephemeral_storage, q.value()),
                other if is_scalar_resource(other) => {
                    (self.scalar.get(other).copied().unwrap_or(0), q.value())
                }
                _ => continue,
            };
            if need > 0 {
                result = result.min(have / need);
            }
        }
        result.min(self.pods)
    }
}

/// First-fit packing of single replicas onto the modelled nodes; `None` when the models cannot be
/// used (Karmada then falls back to the summary).
fn replicas_by_resource_models(
    cluster: &Cluster,
    summary: &ResourceSummary,
    requirements: &ReplicaRequirements,
) -> Option<i64> {
    let models = &cluster.spec.resource_models;
    if models.is_empty() {
        return None;
    }
    let mut capacity_by_grade: BTreeMap<u32, NodeResources> = BTreeMap::new();
    for model in models {
        let mut node = NodeResources::default();
        for range in &model.ranges {
            node.add(&range.name, &range.min);
        }
        node.pods = MAX_PODS_PER_NODE;
        capacity_by_grade.insert(model.grade, node);
    }
    let mut count_by_grade: BTreeMap<u32, i64> = BTreeMap::new();
    for modeling in &summary.allocatable_modelings {
        if modeling.count < 0 {
            return None;
        }
        let slot = count_by_grade.entry(modeling.grade).or_default();
        *slot = slot.saturating_add(modeling.count);
    }
    // Identical replicas packed first-fit fill each node to its capacity in turn, so the total is
    // the sum of the per-node capacities (bounded like Karmada's simulation by i32::MAX).
    let mut total: i64 = 0;
    for (grade, node) in &capacity_by_grade {
        let count = count_by_grade.get(grade).copied().unwrap_or(0);
        if count == 0 {
            continue;
        }
        let per_node = node.max_divided(&requirements.resource_request).max(0);
        total = total.saturating_add(per_node.saturating_mul(count));
    }
    Some(total.min(i64::from(i32::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::ClusterStatus;
    use karmada_apis::cluster::v1alpha1::{AllocatableModeling, ResourceModel, ResourceModelRange};

    fn q(s: &str) -> Quantity {
        Quantity(s.to_owned())
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), q(v))).collect()
    }

    fn cluster(
        allocatable: &[(&str, &str)],
        allocated: &[(&str, &str)],
        allocating: &[(&str, &str)],
    ) -> Cluster {
        let mut c = Cluster::new("c", Default::default());
        c.status = Some(ClusterStatus {
            resource_summary: Some(ResourceSummary {
                allocatable: map(allocatable),
                allocated: map(allocated),
                allocating: map(allocating),
                allocatable_modelings: vec![],
            }),
            ..Default::default()
        });
        c
    }

    fn requests(pairs: &[(&str, &str)]) -> ReplicaRequirements {
        ReplicaRequirements {
            resource_request: map(pairs),
            ..Default::default()
        }
    }

    #[test]
    fn summary_estimation() {
        let c = cluster(
            &[("pods", "110"), ("cpu", "8"), ("memory", "16Gi")],
            &[("pods", "10"), ("cpu", "2500m"), ("memory", "4Gi")],
            &[("cpu", "500m")],
        );
        // No requirements: allowed pods.
        assert_eq!(max_available_replicas(&c, None), 100);
        // cpu: 5000m / 500m = 10; memory: 12Gi / 1Gi = 12.
        assert_eq!(
            max_available_replicas(&c, Some(&requests(&[("cpu", "500m"), ("memory", "1Gi")]))),
            10
        );
        // Unknown resource: nothing fits.
        assert_eq!(
            max_available_replicas(&c, Some(&requests(&[("nvidia.com/gpu", "1")]))),
            0
        );
        // Zero requests are ignored.
        assert_eq!(
            max_available_replicas(&c, Some(&requests(&[("cpu", "0")]))),
            100
        );
        // Exhausted memory.
        let full = cluster(
            &[("pods", "10"), ("memory", "1Gi")],
            &[("memory", "1Gi")],
            &[],
        );
        assert_eq!(
            max_available_replicas(&full, Some(&requests(&[("memory", "1")]))),
            0
        );
        // No summary or no pods: zero.
        assert_eq!(
            max_available_replicas(&Cluster::new("x", Default::default()), None),
            0
        );
        let no_pods = cluster(&[("cpu", "8")], &[], &[]);
        assert_eq!(max_available_replicas(&no_pods, None), 0);
        let over = cluster(&[("pods", "5")], &[("pods", "10")], &[]);
        assert_eq!(max_available_replicas(&over, None), 0);
    }

    #[test]
    fn resource_model_estimation() {
        let mut c = cluster(&[("pods", "1000"), ("cpu", "100")], &[], &[]);
        c.spec.resource_models = vec![
            ResourceModel {
                grade: 0,
                ranges: vec![ResourceModelRange {
                    name: "cpu".into(),
                    min: q("0"),
                    max: q("2"),
                }],
            },
            ResourceModel {
                grade: 1,
                ranges: vec![ResourceModelRange {
                    name: "cpu".into(),
                    min: q("2"),
                    max: q("4"),
                }],
            },
        ];
        if let Some(summary) = c.status.as_mut().and_then(|s| s.resource_summary.as_mut()) {
            summary.allocatable_modelings = vec![
                AllocatableModeling { grade: 0, count: 5 },
                AllocatableModeling { grade: 1, count: 3 },
            ];
        }
        // Grade 0 nodes have 0 cpu; grade 1 nodes 2 cpu → 4 replicas of 500m each, 3 nodes.
        assert_eq!(
            max_available_replicas(&c, Some(&requests(&[("cpu", "500m")]))),
            12
        );
        // Without cpu requests the per-node pod limit (110) applies, capped by allowed pods.
        assert_eq!(max_available_replicas(&c, Some(&requests(&[]))), 880);
        // Negative counts make the models unusable: fall back to the summary (100 cpu / 500m).
        if let Some(summary) = c.status.as_mut().and_then(|s| s.resource_summary.as_mut()) {
            summary.allocatable_modelings[0].count = -1;
        }
        assert_eq!(
            max_available_replicas(&c, Some(&requests(&[("cpu", "500m")]))),
            200
        );
    }
}
