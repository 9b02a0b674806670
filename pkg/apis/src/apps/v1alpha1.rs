//! WorkloadRebalancer: a one-shot request to reschedule listed workloads from scratch.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The workloads to rebalance and how long the finished object lives.
///
/// The controller sets each workload's binding `spec.rescheduleTriggeredAt` to this object's
/// creation time once, which makes the scheduler compute a fresh placement instead of adjusting the
/// current one; the per-workload outcome is recorded in `status.observedWorkloads`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "apps.karmada.io",
    version = "v1alpha1",
    kind = "WorkloadRebalancer",
    plural = "workloadrebalancers",
    singular = "workloadrebalancer",
    status = "WorkloadRebalancerStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Triggers one fresh rescheduling of the listed workloads and reports the result per workload."
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadRebalancerSpec {
    /// The workloads to rebalance (at least one).
    #[schemars(length(min = 1))]
    pub workloads: Vec<ObjectReference>,
    /// Seconds after every workload finished (Successful or Failed) before the object is deleted;
    /// kept forever when unset, deleted right away when 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
}

/// A workload template on the control plane.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// Its API version, e.g. `apps/v1`.
    pub api_version: String,
    /// Its kind, e.g. `Deployment`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its namespace; empty for a cluster-scoped resource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

impl ObjectReference {
    /// The key Karmada sorts observed workloads by: API version, kind, namespace, name.
    pub fn sort_key(&self) -> String {
        format!(
            "{} {} {} {}",
            self.api_version, self.kind, self.namespace, self.name
        )
    }
}

/// What the controller did so far.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadRebalancerStatus {
    /// One entry per workload, sorted by API version, kind, namespace and name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observed_workloads: Vec<ObservedWorkload>,
    /// The generation these results are for.
    #[serde(default, skip_serializing_if = "crate::is_zero_i64")]
    pub observed_generation: i64,
    /// When every workload got its result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_time: Option<Time>,
}

/// One workload's outcome.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedWorkload {
    /// The workload.
    pub workload: ObjectReference,
    /// `Successful` or `Failed`; empty while pending.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub result: String,
    /// Why it failed, e.g. `ReferencedBindingNotFound`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// `result` of a rebalanced workload.
pub const REBALANCE_SUCCESSFUL: &str = "Successful";
/// `result` of a workload that cannot be rebalanced.
pub const REBALANCE_FAILED: &str = "Failed";
/// `reason` when the workload has no ResourceBinding/ClusterResourceBinding.
pub const REBALANCE_OBJECT_NOT_FOUND: &str = "ReferencedBindingNotFound";
