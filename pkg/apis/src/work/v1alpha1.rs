//! `work.karmada.io/v1alpha1`: Work, the manifests to apply to one member cluster.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::raw::{ManifestIdentity, ManifestName, RawExtension};
use crate::schema::raw_object;

/// The API version of [`Work`].
pub const VERSION: &str = "v1alpha1";

/// The desired state of a Work: the manifests to apply in its cluster (the one its namespace
/// `karmada-es-<cluster>` names).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "work.karmada.io",
    version = "v1alpha1",
    kind = "Work",
    plural = "works",
    singular = "work",
    shortname = "wk",
    category = "karmada-io",
    namespaced,
    status = "WorkStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "The resources to apply to one member cluster; lives in that cluster's execution namespace.",
    printcolumn(
        name = "WORKLOAD-KIND",
        type_ = "string",
        json_path = ".spec.workload.manifests[*].kind"
    ),
    printcolumn(
        name = "APPLIED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Applied\")].status"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct WorkSpec {
    /// The manifests to apply.
    #[serde(default)]
    #[schemars(transform = crate::schema::no_default)]
    pub workload: WorkloadTemplate,

    /// `true` stops applying to the member cluster (status is still collected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend_dispatching: Option<bool>,

    /// Keep the member cluster's resources when the Work is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_resources_on_deletion: Option<bool>,
}

/// The manifests of a Work.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct WorkloadTemplate {
    /// Kubernetes objects to apply to the member cluster.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::compact::vec"
    )]
    pub manifests: Vec<Manifest>,
}

/// One Kubernetes object, kept verbatim (Go's `runtime.RawExtension`); see [`RawExtension`].
pub type Manifest = RawExtension;

/// The observed state of a Work.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkStatus {
    /// Conditions; Karmada sets `Applied` and `Dispatching`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::compact::vec"
    )]
    pub conditions: Vec<Condition>,

    /// Status of each applied manifest as observed in the member cluster.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::compact::vec"
    )]
    pub manifest_statuses: Vec<ManifestStatus>,
}

/// The status of one manifest in the member cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManifestStatus {
    /// Which manifest this is.
    pub identifier: ResourceIdentifier,
    /// The object's reflected status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "raw_object")]
    pub status: Option<RawExtension>,
    /// The object's health.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<ResourceHealth>,
}

/// Identifies a manifest and the object it became.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ResourceIdentifier {
    /// Index in `spec.workload.manifests`.
    pub ordinal: i64,
    /// API group (empty for the core group).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name.
    pub resource: String,
    /// Namespace (empty for cluster-scoped objects).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    pub name: String,
}

string_enum! {
    /// The health of a resource in a member cluster.
    pub enum ResourceHealth {
        /// The resource is healthy.
        Healthy = "Healthy",
        /// The resource is unhealthy.
        Unhealthy = "Unhealthy",
        /// Health can't be determined.
        Unknown = "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> serde_json::Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}})
    }

    #[test]
    fn a_work_serialises_its_manifests_inline() {
        let work = Work::new(
            "w",
            WorkSpec {
                workload: WorkloadTemplate {
                    manifests: vec![deployment().into()],
                },
                ..Default::default()
            },
        );
        let v = serde_json::to_value(&work).unwrap();
        assert_eq!(v["spec"]["workload"]["manifests"][0], deployment());
        let back: Work = serde_json::from_value(v).unwrap();
        assert_eq!(back.spec, work.spec);
    }
}
