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
use karmada_apis::work::v1alpha2::{Component, ReplicaRequirements};

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

/// A quantity as Karmada's component-set estimate counts it (`quantityAsInt64`): millis when
/// written in decimal (`1`, `500m`, `1G`, `1e3`), units when binary (`1Gi`), whatever the
/// resource.
fn set_units(q: &Amount) -> i64 {
    match q.format() {
        Format::BinarySi => q.value(),
        Format::DecimalSi | Format::DecimalExponent => q.milli_value(),
    }
}

/// `allocatable − allocated − allocating` of every allocatable resource, in [`set_units`].
fn available_set_units(summary: &ResourceSummary) -> BTreeMap<String, i64> {
    summary
        .allocatable
        .keys()
        .map(|key| {
            let mut available = amount(&summary.allocatable, key).unwrap_or(ZERO);
            if let Some(allocated) = amount(&summary.allocated, key) {
                available.sub(&allocated);
            }
            if let Some(allocating) = amount(&summary.allocating, key) {
                available.sub(&allocating);
            }
            (key.clone(), set_units(&available))
        })
        .collect()
}

/// One replica's requests in [`set_units`].
fn demand_units(request: &BTreeMap<String, Quantity>) -> BTreeMap<String, i64> {
    request
        .iter()
        .map(|(k, v)| (k.clone(), set_units(&Amount::from_k8s(v).unwrap_or(ZERO))))
        .collect()
}

/// The maximum number of whole component sets (every component with its replicas) `cluster`
/// can still take (Karmada's general estimator, `MaxAvailableComponentSets`): the allowed pods
/// divided by the pods of one set, capped for every requested resource by what is available
/// divided by what one set requests; with resource models, also by how many sets fit when
/// packed onto the modelled nodes.
pub fn max_available_component_sets(cluster: &Cluster, components: &[Component]) -> i32 {
    let Some(summary) = cluster
        .status
        .as_ref()
        .and_then(|s| s.resource_summary.as_ref())
    else {
        return 0;
    };
    let mut per_set: BTreeMap<String, i64> = BTreeMap::new();
    for c in components {
        let Some(requirements) = &c.replica_requirements else {
            continue;
        };
        for (name, units) in demand_units(&requirements.resource_request) {
            let slot = per_set.entry(name).or_default();
            *slot = slot.saturating_add(units.saturating_mul(i64::from(c.replicas)));
        }
    }
    let allowed = allowed_pods(summary);
    if allowed <= 0 {
        return 0;
    }
    let pods_per_set: i64 = components.iter().map(|c| i64::from(c.replicas)).sum();
    if pods_per_set <= 0 {
        return clamp_i32(allowed);
    }
    let pod_bound = allowed / pods_per_set;
    if per_set.values().all(|v| *v == 0) {
        return clamp_i32(pod_bound);
    }
    let available = available_set_units(summary);
    let mut sets = pod_bound;
    for (name, request) in &per_set {
        if *request <= 0 {
            continue;
        }
        let have = available.get(name).copied().unwrap_or(0);
        if have <= 0 {
            return 0;
        }
        sets = sets.min(have / request);
    }
    // Models that cannot be used (none defined, a negative node count) are skipped, as Karmada
    // does (it logs a warning).
    if !summary.allocatable_modelings.is_empty()
        && let Some(by_models) = sets_by_resource_models(cluster, summary, components, pod_bound)
    {
        sets = sets.min(by_models);
    }
    clamp_i32(sets)
}

/// One kind of replica of a set: what each replica requests and how many a set has.
struct ReplicaKind {
    demand: BTreeMap<String, i64>,
    count: i64,
    score: f64,
}

/// How many whole sets fit on the modelled nodes (each node of a grade with the grade's minimum
/// resources), up to `upper_bound`: the set's replica kinds, most demanding first, are placed
/// first-fit, one set after the other, until one no longer fits. `None` when the models cannot be
/// used.
fn sets_by_resource_models(
    cluster: &Cluster,
    summary: &ResourceSummary,
    components: &[Component],
    upper_bound: i64,
) -> Option<i64> {
    if upper_bound <= 0 {
        return Some(0);
    }
    let mut kinds: Vec<ReplicaKind> = components
        .iter()
        .filter_map(|c| {
            let requirements = c.replica_requirements.as_ref()?;
            let demand = demand_units(&requirements.resource_request);
            (c.replicas > 0 && demand.values().any(|v| *v != 0)).then(|| ReplicaKind {
                demand,
                count: i64::from(c.replicas),
                score: 0.0,
            })
        })
        .collect();
    if kinds.is_empty() {
        return Some(upper_bound);
    }
    let totals = available_set_units(summary);
    for kind in &mut kinds {
        kind.score = kind
            .demand
            .iter()
            .filter(|(_, request)| **request > 0)
            .map(
                |(name, request)| match totals.get(name).copied().unwrap_or(0) {
                    total if total <= 0 => f64::MAX,
                    #[allow(
                        clippy::cast_precision_loss,
                        reason = "a ratio, as Karmada computes it"
                    )]
                    total => *request as f64 / total as f64,
                },
            )
            .fold(0.0, f64::max);
    }
    let demand_sum = |k: &ReplicaKind| -> i64 { k.demand.values().filter(|v| **v > 0).sum() };
    kinds.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| demand_sum(b).cmp(&demand_sum(a)))
    });
    let mut nodes = model_nodes(cluster, summary)?;
    if nodes.is_empty() {
        return Some(0);
    }
    let mut sets = 0;
    while sets < upper_bound && place_one_set(&kinds, &mut nodes) {
        sets += 1;
    }
    Some(sets)
}

/// The modelled nodes: `count` nodes of each grade both modelled and counted, grade by grade,
/// each with the grade's minimum of every resource. `None` without models or with a negative
/// count.
fn model_nodes(cluster: &Cluster, summary: &ResourceSummary) -> Option<Vec<BTreeMap<String, i64>>> {
    let models = &cluster.spec.resource_models;
    if models.is_empty() {
        return None;
    }
    let mut capacity_by_grade: BTreeMap<u32, BTreeMap<String, i64>> = BTreeMap::new();
    for model in models {
        let capacity = model
            .ranges
            .iter()
            .map(|r| {
                (
                    r.name.clone(),
                    set_units(&Amount::from_k8s(&r.min).unwrap_or(ZERO)),
                )
            })
            .collect();
        capacity_by_grade.insert(model.grade, capacity);
    }
    let mut count_by_grade: BTreeMap<u32, i64> = BTreeMap::new();
    for modeling in &summary.allocatable_modelings {
        if modeling.count < 0 {
            return None;
        }
        let slot = count_by_grade.entry(modeling.grade).or_default();
        *slot = slot.saturating_add(modeling.count);
    }
    let mut nodes = Vec::new();
    for (grade, capacity) in &capacity_by_grade {
        let count = count_by_grade.get(grade).copied().unwrap_or(0);
        for _ in 0..count {
            nodes.push(capacity.clone());
        }
    }
    Some(nodes)
}

/// Places one whole set onto `nodes` (first fit, each kind in turn), consuming their capacity.
/// False when a kind does not fit.
fn place_one_set(kinds: &[ReplicaKind], nodes: &mut [BTreeMap<String, i64>]) -> bool {
    for kind in kinds {
        let mut remaining = kind.count;
        for node in nodes.iter_mut() {
            if remaining <= 0 {
                break;
            }
            let fit = max_fit(node, &kind.demand);
            if fit <= 0 {
                continue;
            }
            let place = fit.min(remaining);
            for (name, request) in &kind.demand {
                if *request > 0 {
                    let slot = node.entry(name.clone()).or_default();
                    *slot = slot.saturating_sub(request.saturating_mul(place));
                }
            }
            remaining -= place;
        }
        if remaining > 0 {
            return false;
        }
    }
    true
}

/// How many replicas demanding `demand` fit in `capacity` at once (0 when nothing is demanded).
fn max_fit(capacity: &BTreeMap<String, i64>, demand: &BTreeMap<String, i64>) -> i64 {
    let mut limit = i64::MAX;
    for (name, request) in demand {
        if *request <= 0 {
            continue;
        }
        let have = capacity.get(name).copied().unwrap_or(0);
        if have <= 0 {
            return 0;
        }
        limit = limit.min(have / request);
    }
    if limit == i64::MAX { 0 } else { limit }
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

    /// 1,000 pods and 100 CPUs allocatable, modelled as 5 nodes of 0–2 CPUs and 3 of 2–4.
    fn modeled_cluster() -> Cluster {
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
        c
    }

    #[test]
    fn resource_model_estimation() {
        let mut c = modeled_cluster();
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

    fn component(name: &str, replicas: i32, request: &[(&str, &str)]) -> Component {
        Component {
            name: name.into(),
            replicas,
            replica_requirements: Some(
                karmada_apis::work::v1alpha2::ComponentReplicaRequirements {
                    resource_request: map(request),
                    ..Default::default()
                },
            ),
        }
    }

    #[test]
    fn component_sets_by_summary() {
        let c = cluster(
            &[("pods", "110"), ("cpu", "8"), ("memory", "16Gi")],
            &[("cpu", "2"), ("memory", "8Gi")],
            &[],
        );
        // One set: 2 CPUs (1 + 2 × 500m) and 5Gi (1Gi + 2 × 2Gi), 3 pods.
        let set = [
            component("jobmanager", 1, &[("cpu", "1"), ("memory", "1Gi")]),
            component("taskmanager", 2, &[("cpu", "500m"), ("memory", "2Gi")]),
        ];
        // cpu 6 / 2 = 3, memory 8Gi / 5Gi = 1, pods 110 / 3 = 36.
        assert_eq!(max_available_component_sets(&c, &set), 1);
        let roomy = cluster(
            &[("pods", "110"), ("cpu", "8"), ("memory", "16Gi")],
            &[],
            &[],
        );
        assert_eq!(max_available_component_sets(&roomy, &set), 3);
        // Without requests: free pods per set's pods.
        let bare = [component("a", 1, &[]), component("b", 2, &[])];
        assert_eq!(max_available_component_sets(&roomy, &bare), 36);
        // No replicas at all: the free pods.
        let empty = [component("a", 0, &[("cpu", "1")])];
        assert_eq!(max_available_component_sets(&roomy, &empty), 110);
        // A resource the cluster does not have: nothing fits.
        let gpu = [component("a", 1, &[("nvidia.com/gpu", "1")])];
        assert_eq!(max_available_component_sets(&roomy, &gpu), 0);
        // As in Karmada, a decimal quantity counts in millis and a binary one in units, whatever
        // the resource: a request of 1G of memory (10^12 millis) against 16Gi (about 1.7 × 10^10
        // bytes) fits no set.
        let decimal_memory = [component("a", 1, &[("memory", "1G")])];
        assert_eq!(max_available_component_sets(&roomy, &decimal_memory), 0);
        // No summary, no free pods: zero.
        assert_eq!(
            max_available_component_sets(&Cluster::new("x", Default::default()), &set),
            0
        );
        let full = cluster(&[("pods", "5"), ("cpu", "8")], &[("pods", "5")], &[]);
        assert_eq!(max_available_component_sets(&full, &set), 0);
    }

    #[test]
    fn component_sets_by_resource_models() {
        let mut c = modeled_cluster();
        // Three nodes of 2 CPUs hold two sets of 1 + 2 one-CPU replicas (the summary alone,
        // 100 CPUs, would allow 33).
        let set = [
            component("jobmanager", 1, &[("cpu", "1")]),
            component("taskmanager", 2, &[("cpu", "1")]),
        ];
        assert_eq!(max_available_component_sets(&c, &set), 2);
        // A replica larger than any node fits nowhere.
        let big = [component("a", 1, &[("cpu", "3")]), component("b", 1, &[])];
        assert_eq!(max_available_component_sets(&c, &big), 0);
        // Unusable models (a negative count) are skipped: the summary decides.
        if let Some(summary) = c.status.as_mut().and_then(|s| s.resource_summary.as_mut()) {
            summary.allocatable_modelings[0].count = -1;
        }
        assert_eq!(max_available_component_sets(&c, &set), 33);
    }
}
