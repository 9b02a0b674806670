//! `work.karmada.io/v1alpha2`: ResourceBinding / ClusterResourceBinding, a resource template bound to a
//! propagation policy, with the scheduler's result and the aggregated member status.
//!
//! Karmada also serves `v1alpha1` of these kinds through a conversion webhook; karmada-rs serves only
//! `v1alpha2` (Karmada's storage version).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::v1alpha1::{RawExtension, ResourceHealth};
use crate::policy::v1alpha1::{
    self as policy, ConflictResolution, FailoverBehavior, Placement, PurgeMode,
};
use crate::schema::raw_object;

/// The API version of the binding kinds.
pub const VERSION: &str = "v1alpha2";

/// The desired state of a binding: the template, its replica needs, the placement inherited from the
/// policy and the clusters the scheduler chose.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "work.karmada.io",
    version = "v1alpha2",
    kind = "ResourceBinding",
    plural = "resourcebindings",
    singular = "resourcebinding",
    shortname = "rb",
    category = "karmada-io",
    namespaced,
    status = "ResourceBindingStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Binds a namespaced resource template to a propagation policy; named `<name>-<kind>` (lowercase).",
    printcolumn(
        name = "SCHEDULED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Scheduled\")].status"
    ),
    printcolumn(
        name = "FULLYAPPLIED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"FullyApplied\")].status"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceBindingSpec {
    /// The resource template to propagate.
    pub resource: ObjectReference,

    /// Propagate the template's dependencies too (from the policy).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub propagate_deps: bool,

    /// Resource and scheduling requirements of each replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_requirements: Option<ReplicaRequirements>,

    /// The template's replica count.
    #[serde(default, skip_serializing_if = "crate::is_zero_i32")]
    pub replicas: i32,

    /// Requirements of each pod template of a multi-template workload (feature
    /// MultiplePodTemplatesScheduling).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<Component>,

    /// The scheduler's result: target clusters and their replicas.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::compact::vec"
    )]
    pub clusters: Vec<TargetCluster>,

    /// The placement from the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,

    /// Evictions to perform gracefully (after the replacement is healthy or a timeout).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graceful_eviction_tasks: Vec<GracefulEvictionTask>,

    /// Bindings that depend on this resource (PropagateDeps).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_by: Vec<BindingSnapshot>,

    /// The scheduler (from the policy).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scheduler_name: String,

    /// Failover behaviour (from the policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<FailoverBehavior>,

    /// Conflict resolution (from the policy).
    #[serde(default)]
    pub conflict_resolution: ConflictResolution,

    /// When set later than `status.lastScheduledTime`, the scheduler reschedules from scratch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reschedule_triggered_at: Option<Time>,

    /// Suspension of dispatching and scheduling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspension: Option<Suspension>,

    /// Keep member clusters' resources when the binding is deleted (applies to all its Works).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_resources_on_deletion: Option<bool>,

    /// The workload's scheduling priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_priority: Option<SchedulePriority>,

    /// The affinity groups derived from `placement.workloadAffinity` (ResourceBinding only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_affinity_groups: Option<WorkloadAffinityGroups>,
}

cluster_scoped_twin! {
    /// Binds a cluster-scoped resource template to a ClusterPropagationPolicy.
    pub struct ClusterResourceBinding: ResourceBinding {
        group: "work.karmada.io",
        version: "v1alpha2",
        kind: "ClusterResourceBinding",
        singular: "clusterresourcebinding",
        plural: "clusterresourcebindings",
        short_name: "crb",
        spec: ResourceBindingSpec,
        status: ResourceBindingStatus,
    }
}

/// Locates the resource template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// API version of the template.
    pub api_version: String,
    /// Kind of the template.
    pub kind: String,
    /// Namespace of the template (empty for cluster-scoped templates).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name of the template.
    pub name: String,
    /// UID of the template.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The template's resourceVersion when the binding was last refreshed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
}

/// Resource and scheduling requirements of each replica.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaRequirements {
    /// Node affinity, selector and tolerations of each replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_claim: Option<NodeClaim>,
    /// Resources each replica requests.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resource_request: BTreeMap<String, Quantity>,
    /// Namespace of the workload.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The workload's priorityClassName.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub priority_class_name: String,
}

/// One pod template of a multi-template workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Component {
    /// Name of the component, unique within the workload.
    #[schemars(length(max = 32))]
    pub name: String,
    /// Replicas of this component.
    pub replicas: i32,
    /// Requirements of each replica of this component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_requirements: Option<ComponentReplicaRequirements>,
}

/// Resource and scheduling requirements of each replica of a component.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentReplicaRequirements {
    /// Node affinity, selector and tolerations of each replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_claim: Option<NodeClaim>,
    /// Resources each replica requests.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resource_request: BTreeMap<String, Quantity>,
    /// The component's priorityClassName.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub priority_class_name: String,
}

/// The node constraints of each replica.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaim {
    /// Required node affinity of the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_node_affinity: Option<NodeSelector>,
    /// The pods' nodeSelector.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// The pods' tolerations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

/// A target cluster chosen by the scheduler.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetCluster {
    /// Name of the cluster.
    pub name: String,
    /// Replicas assigned to the cluster.
    #[serde(default, skip_serializing_if = "crate::is_zero_i32")]
    pub replicas: i32,
    /// Per-component replicas (multi-template workloads).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<TargetComponent>,
}

/// Replicas of one component assigned to a cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct TargetComponent {
    /// Name of the component (`spec.components[*].name`).
    pub name: String,
    /// Replicas assigned.
    pub replicas: i32,
}

/// An eviction from a cluster performed gracefully.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GracefulEvictionTask {
    /// The cluster evicted from.
    pub from_cluster: String,
    /// How the legacy copy is purged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge_mode: Option<PurgeMode>,
    /// Replicas to evict (for kinds with replicas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Machine-readable reason, CamelCase.
    #[schemars(
        length(min = 1, max = 32),
        pattern(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    )]
    pub reason: String,
    /// Human-readable details.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 1024))]
    pub message: String,
    /// The controller that triggered the eviction.
    pub producer: String,
    /// Maximum wait before deleting the legacy copy. Cannot be combined with `suppressDeletion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<i32>,
    /// Keep the legacy copy until a tool or human removes the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppress_deletion: Option<bool>,
    /// State collected from the old cluster, injected into the new one as labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub preserved_label_state: BTreeMap<String, String>,
    /// When the task was created (server time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<Time>,
    /// Clusters the application ran in before failover.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters_before_failover: Vec<String>,
}

/// A snapshot of a dependent binding.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct BindingSnapshot {
    /// Namespace of the binding (empty for a ClusterResourceBinding).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name of the binding.
    pub name: String,
    /// The binding's scheduling result.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::compact::vec"
    )]
    pub clusters: Vec<TargetCluster>,
}

/// Suspension of dispatching (from the policy) and of scheduling.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Suspension {
    /// Dispatching suspension, as in the policy.
    #[serde(flatten)]
    pub dispatching: policy::Suspension,
    /// `true` pauses scheduling of the binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<bool>,
}

/// The scheduling priority of the binding's workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SchedulePriority {
    /// Higher values schedule first. Defaults to 0.
    #[serde(default, skip_serializing_if = "crate::is_zero_i32")]
    #[schemars(transform = crate::schema::zero_default)]
    pub priority: i32,
}

/// The instantiated workload affinity groups (`<labelKey>=<labelValue>`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadAffinityGroups {
    /// The affinity group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub affinity_group: String,
    /// The anti-affinity group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub anti_affinity_group: String,
}

/// The observed state of a binding.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceBindingStatus {
    /// The generation the scheduler last handled.
    #[serde(default, skip_serializing_if = "crate::is_zero_i64")]
    pub scheduler_observed_generation: i64,
    /// The affinity term the current scheduling result is based on.
    #[serde(
        rename = "schedulerObservingAffinityName",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub scheduler_observed_affinity_name: String,
    /// When the scheduler last scheduled successfully.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scheduled_time: Option<Time>,
    /// Conditions: `Scheduled` and `FullyApplied`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::compact::vec"
    )]
    pub conditions: Vec<Condition>,
    /// Status of the resource in each member cluster.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::compact::vec"
    )]
    pub aggregated_status: Vec<AggregatedStatusItem>,
}

/// The status of the resource in one member cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AggregatedStatusItem {
    /// The member cluster.
    pub cluster_name: String,
    /// The reflected status of the resource there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "raw_object")]
    pub status: Option<RawExtension>,
    /// Whether the resource was applied there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub applied: bool,
    /// Details of the apply result (the error when it failed).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub applied_message: String,
    /// Health of the resource there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<ResourceHealth>,
}

impl ResourceBindingSpec {
    /// Whether `cluster` is among the scheduled target clusters.
    pub fn target_contains(&self, cluster: &str) -> bool {
        self.clusters.iter().any(|c| c.name == cluster)
    }

    /// Replicas the scheduler assigned to `cluster` (0 if not a target).
    pub fn assigned_replicas_for_cluster(&self, cluster: &str) -> i32 {
        self.clusters
            .iter()
            .find(|c| c.name == cluster)
            .map_or(0, |c| c.replicas)
    }

    /// Whether `cluster` has a graceful eviction task.
    pub fn cluster_in_graceful_eviction_tasks(&self, cluster: &str) -> bool {
        self.graceful_eviction_tasks
            .iter()
            .any(|task| task.from_cluster == cluster)
    }

    /// Removes `cluster` from the scheduling result and records a graceful eviction task for it
    /// built from `task` (its `fromCluster` and `replicas` are filled in here), unless the cluster
    /// already has one (Karmada's `GracefulEvictCluster`). Nothing happens if `cluster` is not a
    /// target; returns whether the spec changed.
    pub fn graceful_evict_cluster(&mut self, cluster: &str, task: GracefulEvictionTask) -> bool {
        let Some(i) = self.clusters.iter().position(|c| c.name == cluster) else {
            return false;
        };
        let evicted = self.clusters.remove(i);
        if self.cluster_in_graceful_eviction_tasks(cluster) {
            return true;
        }
        self.graceful_eviction_tasks.push(GracefulEvictionTask {
            from_cluster: evicted.name,
            replicas: (evicted.replicas > 0).then_some(evicted.replicas),
            ..task
        });
        true
    }

    /// Whether scheduling is suspended.
    pub fn scheduling_suspended(&self) -> bool {
        self.suspension
            .as_ref()
            .and_then(|s| s.scheduling)
            .unwrap_or(false)
    }

    /// The scheduling priority (0 when unset).
    pub fn schedule_priority_value(&self) -> i32 {
        self.schedule_priority.as_ref().map_or(0, |p| p.priority)
    }

    /// Whether the template is a workload: it has replicas, replica requirements or components.
    pub fn is_workload(&self) -> bool {
        self.replicas > 0 || self.replica_requirements.is_some() || !self.components.is_empty()
    }
}
