//! `status.nodeSummary` and `status.resourceSummary` from a member's Nodes and Pods, computed as
//! Karmada computes them, plus the transforms that slim cached Nodes and Pods down to the fields
//! read here (the caches are unfiltered, so every byte counts on large members).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodSpec, PodStatus,
    ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::cluster::v1alpha1::{
    AllocatableModeling, NodeSummary, ResourceModel, ResourceSummary,
};

use apimachinery::quantity::{Format, Quantity};

fn slim_meta(meta: &ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        resource_version: meta.resource_version.clone(),
        uid: meta.uid.clone(),
        ..ObjectMeta::default()
    }
}

/// Keeps a Node's name, allocatable resources and Ready condition status.
pub fn slim_node(node: &mut Node) {
    let status = node.status.take().unwrap_or_default();
    node.metadata = slim_meta(&node.metadata);
    node.spec = Some(NodeSpec::default());
    node.status = Some(NodeStatus {
        allocatable: status.allocatable,
        conditions: status.conditions.map(|cs| {
            cs.into_iter()
                .filter(|c| c.type_ == "Ready")
                .map(|c| NodeCondition {
                    type_: c.type_,
                    status: c.status,
                    ..NodeCondition::default()
                })
                .collect()
        }),
        ..NodeStatus::default()
    });
}

fn slim_containers(cs: Vec<Container>) -> Vec<Container> {
    cs.into_iter()
        .map(|c| Container {
            name: c.name,
            resources: c.resources.map(|r| ResourceRequirements {
                requests: r.requests,
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        })
        .collect()
}

/// Keeps a Pod's name, node, phase, overhead and container resource requests.
pub fn slim_pod(pod: &mut Pod) {
    let spec = pod.spec.take().unwrap_or_default();
    let phase = pod.status.take().and_then(|s| s.phase);
    pod.metadata = slim_meta(&pod.metadata);
    pod.spec = Some(PodSpec {
        node_name: spec.node_name,
        overhead: spec.overhead,
        containers: slim_containers(spec.containers),
        init_containers: spec.init_containers.map(slim_containers),
        ..PodSpec::default()
    });
    pod.status = Some(PodStatus {
        phase,
        ..PodStatus::default()
    });
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Total and Ready node counts.
pub fn node_summary(nodes: &[Arc<Node>]) -> NodeSummary {
    NodeSummary {
        total_num: i32::try_from(nodes.len()).unwrap_or(i32::MAX),
        ready_num: i32::try_from(nodes.iter().filter(|n| node_ready(n)).count())
            .unwrap_or(i32::MAX),
    }
}

/// Whether a resource is one Kubernetes counts as a scalar (extended, hugepages, attachable
/// volumes, or a prefixed native resource).
fn is_scalar(name: &str) -> bool {
    name.starts_with("hugepages-") || name.starts_with("attachable-volumes-") || name.contains('/')
}

/// Karmada's `util.Resource`: resource requests accumulated across pods.
#[derive(Debug, Default)]
struct Resource {
    milli_cpu: i128,
    memory: i128,
    ephemeral_storage: i128,
    pods: i128,
    scalars: HashMap<String, i128>,
}

impl Resource {
    fn add(&mut self, list: &BTreeMap<String, K8sQuantity>) {
        for (name, q) in list {
            let Ok(q) = Quantity::from_k8s(q) else {
                continue;
            };
            match name.as_str() {
                "cpu" => self.milli_cpu += i128::from(q.milli_value()),
                "memory" => self.memory += i128::from(q.value()),
                "pods" => self.pods += i128::from(q.value()),
                "ephemeral-storage" => self.ephemeral_storage += i128::from(q.value()),
                n if is_scalar(n) => {
                    *self.scalars.entry(n.to_string()).or_default() += i128::from(q.value());
                }
                _ => {}
            }
        }
    }

    fn set_max(&mut self, list: &BTreeMap<String, K8sQuantity>) {
        for (name, q) in list {
            let Ok(q) = Quantity::from_k8s(q) else {
                continue;
            };
            match name.as_str() {
                "cpu" => self.milli_cpu = self.milli_cpu.max(i128::from(q.milli_value())),
                "memory" => self.memory = self.memory.max(i128::from(q.value())),
                "pods" => self.pods = self.pods.max(i128::from(q.value())),
                "ephemeral-storage" => {
                    self.ephemeral_storage = self.ephemeral_storage.max(i128::from(q.value()));
                }
                n if is_scalar(n) => {
                    let e = self.scalars.entry(n.to_string()).or_default();
                    *e = (*e).max(i128::from(q.value()));
                }
                _ => {}
            }
        }
    }

    /// Adds one pod's requests: containers summed, then (as Karmada does, against the running
    /// total) the largest init-container request, then the pod overhead.
    fn add_pod(&mut self, spec: &PodSpec) {
        for c in &spec.containers {
            if let Some(r) = c.resources.as_ref().and_then(|r| r.requests.as_ref()) {
                self.add(r);
            }
        }
        for c in spec.init_containers.iter().flatten() {
            if let Some(r) = c.resources.as_ref().and_then(|r| r.requests.as_ref()) {
                self.set_max(r);
            }
        }
        if let Some(o) = &spec.overhead {
            self.add(o);
        }
    }

    fn into_list(self) -> BTreeMap<String, K8sQuantity> {
        let mut out = BTreeMap::new();
        let mut put = |name: &str, q: Quantity| {
            out.insert(name.to_string(), q.to_k8s());
        };
        if self.milli_cpu > 0 {
            put(
                "cpu",
                Quantity::from_milli(self.milli_cpu, Format::DecimalSi),
            );
        }
        if self.memory > 0 {
            put(
                "memory",
                Quantity::from_value(self.memory, Format::BinarySi),
            );
        }
        if self.ephemeral_storage > 0 {
            put(
                "ephemeral-storage",
                Quantity::from_value(self.ephemeral_storage, Format::BinarySi),
            );
        }
        if self.pods > 0 {
            put("pods", Quantity::from_value(self.pods, Format::DecimalSi));
        }
        for (name, v) in self.scalars {
            if v > 0 {
                let format = if name.starts_with("hugepages-") {
                    Format::BinarySi
                } else {
                    Format::DecimalSi
                };
                put(&name, Quantity::from_value(v, format));
            }
        }
        out
    }
}

impl Resource {
    /// The accumulated requests as exact milli values by resource name (what
    /// [`Resource::into_list`] would print).
    fn milli_values(&self) -> Vec<(String, i128)> {
        let mut out = Vec::new();
        if self.milli_cpu > 0 {
            out.push(("cpu".to_string(), self.milli_cpu));
        }
        for (name, v) in [
            ("memory", self.memory),
            ("ephemeral-storage", self.ephemeral_storage),
            ("pods", self.pods),
        ] {
            if v > 0 {
                out.push((name.to_string(), v * 1000));
            }
        }
        for (name, v) in &self.scalars {
            if *v > 0 {
                out.push((name.clone(), v * 1000));
            }
        }
        out
    }
}

/// How many nodes fall into each grade of the cluster's resource models (Karmada's
/// `getAllocatableModelings` with `pkg/modeling`): a node's free resources (allocatable minus the
/// requests of its scheduled, non-terminal pods) land in the highest grade whose minimum every
/// modelled resource reaches. As in Karmada, a node with no room for another pod ends the count.
pub fn allocatable_modelings(
    models: &[ResourceModel],
    nodes: &[Arc<Node>],
    pods: &[Arc<Pod>],
) -> Vec<AllocatableModeling> {
    let Some(first) = models.first() else {
        return Vec::new();
    };
    // The modelled resources, in the order of the first model's ranges.
    let names: Vec<&str> = first.ranges.iter().map(|r| r.name.as_str()).collect();
    // mins[i][g]: minimum of resource names[i] in grade g.
    let mut mins: Vec<Vec<i128>> = vec![Vec::new(); names.len()];
    for m in models {
        if m.ranges.len() != names.len() {
            tracing::warn!("resource models have different resources per grade; skipping modeling");
            return Vec::new();
        }
        for (i, name) in names.iter().enumerate() {
            let min = m
                .ranges
                .iter()
                .find(|r| r.name == *name)
                .and_then(|r| Quantity::from_k8s(&r.min).ok())
                .map_or(0, |q| i128::from(q.milli_value()));
            mins[i].push(min);
        }
    }
    let mut per_node: HashMap<&str, Resource> = HashMap::new();
    for pod in pods {
        let Some(spec) = pod.spec.as_ref() else {
            continue;
        };
        if let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty())
            && !terminal(pod)
        {
            let r = per_node.entry(node).or_default();
            r.add_pod(spec);
            r.pods += 1;
        }
    }
    let mut counts = vec![0i64; models.len()];
    for node in nodes {
        let mut available: HashMap<String, i128> = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|(k, q)| {
                Some((
                    k.clone(),
                    i128::from(Quantity::from_k8s(q).ok()?.milli_value()),
                ))
            })
            .collect();
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if let Some(used) = per_node.get(name) {
            let used = used.milli_values();
            let used_pods = used
                .iter()
                .find(|(k, _)| k == "pods")
                .map_or(0, |(_, v)| *v);
            let allowed = available.get("pods").copied().unwrap_or(0) / 1000 - used_pods / 1000;
            if allowed <= 0 {
                break;
            }
            for (k, v) in used {
                if let Some(a) = available.get_mut(&k) {
                    *a -= v;
                }
            }
        }
        // The grade: for each resource the last grade whose minimum is <= the node's value; the
        // node counts in the lowest of those.
        let grade = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let v = available.get(*n).copied().unwrap_or(0);
                mins[i].iter().rposition(|min| *min <= v)
            })
            .try_fold(usize::MAX, |acc, g| g.map(|g| acc.min(g)));
        match grade {
            Some(g) if g < counts.len() => counts[g] += 1,
            _ => tracing::debug!(node = name, "node fits no resource model grade"),
        }
    }
    models
        .iter()
        .zip(counts)
        .map(|(m, count)| AllocatableModeling {
            grade: m.grade,
            count,
        })
        .collect()
}

fn scheduled(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

fn terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Allocatable (sum over nodes), allocating (requests of unscheduled pods) and allocated
/// (requests of scheduled, non-terminal pods), each with its pod count.
pub fn resource_summary(nodes: &[Arc<Node>], pods: &[Arc<Pod>]) -> ResourceSummary {
    let mut allocatable: BTreeMap<String, Quantity> = BTreeMap::new();
    for node in nodes {
        for (name, q) in node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .into_iter()
            .flatten()
        {
            let Ok(q) = Quantity::from_k8s(q) else {
                continue;
            };
            allocatable
                .entry(name.clone())
                .and_modify(|sum| sum.add(&q))
                .or_insert(q);
        }
    }
    let mut allocating = Resource::default();
    let mut allocated = Resource::default();
    for pod in pods {
        let Some(spec) = pod.spec.as_ref() else {
            continue;
        };
        if !scheduled(pod) {
            allocating.add_pod(spec);
            allocating.pods += 1;
        } else if !terminal(pod) {
            allocated.add_pod(spec);
            allocated.pods += 1;
        }
    }
    ResourceSummary {
        allocatable: allocatable
            .into_iter()
            .map(|(k, q)| (k, q.to_k8s()))
            .collect(),
        allocating: allocating.into_list(),
        allocated: allocated.into_list(),
        allocatable_modelings: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summaries_match_karmada() {
        let node = |name: &str, ready: &str| -> Arc<Node> {
            Arc::new(
                serde_json::from_value(json!({
                    "metadata": {"name": name, "labels": {"a": "b"}},
                    "status": {
                        "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                        "conditions": [{"type": "Ready", "status": ready}, {"type": "MemoryPressure", "status": "False"}]
                    }
                }))
                .unwrap(),
            )
        };
        let pod = |node: Option<&str>, phase: &str, cpu: &str| -> Arc<Pod> {
            let mut p: Pod = serde_json::from_value(json!({
                "metadata": {"name": "p", "namespace": "n"},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
                "status": {"phase": phase}
            }))
            .unwrap();
            slim_pod(&mut p);
            Arc::new(p)
        };
        let mut n1 = (*node("n1", "True")).clone();
        slim_node(&mut n1);
        assert!(n1.metadata.labels.is_none());
        assert_eq!(
            n1.status
                .as_ref()
                .unwrap()
                .conditions
                .as_ref()
                .unwrap()
                .len(),
            1
        );
        let nodes = vec![Arc::new(n1), node("n2", "False")];
        let pods = vec![
            pod(Some("n1"), "Running", "500m"),
            pod(Some("n1"), "Running", "500m"),
            pod(Some("n2"), "Succeeded", "1"),
            pod(None, "Pending", "250m"),
        ];
        assert_eq!(
            node_summary(&nodes),
            NodeSummary {
                total_num: 2,
                ready_num: 1
            }
        );
        let rs = resource_summary(&nodes, &pods);
        assert_eq!(rs.allocatable["cpu"].0, "8");
        assert_eq!(rs.allocatable["memory"].0, "32Gi");
        assert_eq!(rs.allocatable["pods"].0, "220");
        assert_eq!(rs.allocated["cpu"].0, "1");
        assert_eq!(rs.allocated["memory"].0, "2Gi");
        assert_eq!(rs.allocated["pods"].0, "2");
        assert_eq!(rs.allocating["cpu"].0, "250m");
        assert_eq!(rs.allocating["pods"].0, "1");

        let models: Vec<ResourceModel> = serde_json::from_value(json!([
            {"grade": 0, "ranges": [{"name": "cpu", "min": "0", "max": "1"}, {"name": "memory", "min": "0", "max": "4Gi"}]},
            {"grade": 1, "ranges": [{"name": "cpu", "min": "1", "max": "4"}, {"name": "memory", "min": "4Gi", "max": "16Gi"}]},
            {"grade": 2, "ranges": [{"name": "cpu", "min": "4", "max": "100"}, {"name": "memory", "min": "16Gi", "max": "1Ti"}]}
        ]))
        .unwrap();
        // n1 runs 1 cpu / 2Gi (3 cpu, 14Gi free: grade 1); n2 is idle (4 cpu, 16Gi: grade 2).
        let m = allocatable_modelings(&models, &nodes, &pods);
        let counts: Vec<(u32, i64)> = m.iter().map(|a| (a.grade, a.count)).collect();
        assert_eq!(counts, [(0, 0), (1, 1), (2, 1)]);
        assert!(allocatable_modelings(&[], &nodes, &pods).is_empty());
    }
}
