//! FederatedResourceQuota: an aggregate quota for one namespace across every member cluster, with
//! optional static per-cluster assignments that become ResourceQuotas in the members.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// A resource list (`corev1.ResourceList`): resource name to quantity.
pub type ResourceList = BTreeMap<String, Quantity>;

/// The grammar of a Kubernetes quantity (controller-gen's pattern) without the minus sign: quota
/// quantities must not be negative (Karmada's webhook check).
pub const QUANTITY_PATTERN: &str = r"^(\+)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// The desired hard limits of a FederatedResourceQuota.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "policy.karmada.io",
    version = "v1alpha1",
    kind = "FederatedResourceQuota",
    plural = "federatedresourcequotas",
    singular = "federatedresourcequota",
    category = "karmada-io",
    namespaced,
    status = "FederatedResourceQuotaStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Aggregate quota restrictions enforced per namespace across all clusters.",
    printcolumn(name = "OVERALL", type_ = "string", json_path = ".status.overall"),
    printcolumn(name = "OVERALL_USED", type_ = "string", json_path = ".status.overallUsed"),
    validation = Rule::new("self.metadata.name.size() <= 63")
        .message("metadata.name must be no more than 63 characters")
)]
#[serde(rename_all = "camelCase")]
pub struct FederatedResourceQuotaSpec {
    /// The desired hard limits for each named resource, across all clusters.
    #[schemars(schema_with = "resource_list")]
    pub overall: ResourceList,

    /// Per-cluster hard limits: a ResourceQuota named like this object is created in the namespace
    /// of each cluster listed; clusters not listed get none. The scheduler does not use them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub static_assignments: Vec<StaticClusterAssignment>,
}

/// The hard limits of one cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StaticClusterAssignment {
    /// The cluster the limits apply to.
    #[schemars(
        length(min = 1, max = 48),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub cluster_name: String,

    /// The hard limits for each named resource in that cluster.
    #[schemars(schema_with = "resource_list")]
    pub hard: ResourceList,
}

/// The enforced hard limits and observed use.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FederatedResourceQuotaStatus {
    /// The enforced hard limits for each named resource.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "resource_list")]
    pub overall: ResourceList,

    /// The observed total usage in the namespace, across clusters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "resource_list")]
    pub overall_used: ResourceList,

    /// The observed quota and usage of each cluster, by cluster name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aggregated_status: Vec<ClusterQuotaStatus>,
}

/// One cluster's ResourceQuota status (Go inlines `corev1.ResourceQuotaStatus`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQuotaStatus {
    /// The cluster.
    pub cluster_name: String,

    /// The hard limits enforced in that cluster.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "resource_list")]
    pub hard: ResourceList,

    /// The observed usage in that cluster's namespace.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "resource_list")]
    pub used: ResourceList,
}

/// Schema of a `corev1.ResourceList`: quantities are integers or strings in the quantity grammar,
/// neither negative. (CEL rules over these unbounded maps exceed the API server's cost budget, so
/// the sign is excluded by the pattern and `minimum`.)
fn resource_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "pattern": QUANTITY_PATTERN,
            "minimum": 0,
            "x-kubernetes-int-or-string": true,
        },
    })
}
