//! FederatedHPA: a HorizontalPodAutoscaler for a resource template, computed from the metrics of the
//! template's pods in every member cluster it is scheduled to, scaling the template's replicas (which
//! the scheduler then divides among the clusters).

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerStatus,
    MetricSpec,
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The desired autoscaling of one resource template (Go's `FederatedHPASpec`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "autoscaling.karmada.io",
    version = "v1alpha1",
    kind = "FederatedHPA",
    plural = "federatedhpas",
    singular = "federatedhpa",
    shortname = "fhpa",
    category = "karmada-io",
    namespaced,
    status = "HorizontalPodAutoscalerStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A centralized HPA that aggregates the metrics of a workload's pods in multiple clusters and scales the workload's replicas.",
    printcolumn(
        name = "REFERENCE-KIND",
        type_ = "string",
        json_path = ".spec.scaleTargetRef.kind"
    ),
    printcolumn(
        name = "REFERENCE-NAME",
        type_ = "string",
        json_path = ".spec.scaleTargetRef.name"
    ),
    printcolumn(name = "MINPODS", type_ = "integer", json_path = ".spec.minReplicas"),
    printcolumn(name = "MAXPODS", type_ = "integer", json_path = ".spec.maxReplicas"),
    printcolumn(
        name = "REPLICAS",
        type_ = "integer",
        json_path = ".status.currentReplicas"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    validation = Rule::new("!has(self.spec.minReplicas) || self.spec.minReplicas >= 1")
        .message("spec.minReplicas: must be greater than or equal to 1"),
    validation = Rule::new("self.spec.maxReplicas >= 1")
        .message("spec.maxReplicas: must be greater than 0"),
    validation = Rule::new("!has(self.spec.minReplicas) || self.spec.maxReplicas >= self.spec.minReplicas")
        .message("spec.maxReplicas: must be greater than or equal to `minReplicas`")
)]
#[serde(rename_all = "camelCase")]
pub struct FederatedHPASpec {
    /// The resource template to scale: its pods' metrics are collected and its replicas changed.
    pub scale_target_ref: CrossVersionObjectReference,

    /// The lower limit of replicas the autoscaler scales down to (1 when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,

    /// The upper limit of replicas the autoscaler scales up to; not less than `minReplicas`.
    pub max_replicas: i32,

    /// The metrics to compute the desired replicas from (the largest proposal wins); 80% average CPU
    /// utilization when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<MetricSpec>,

    /// The scaling behavior up and down (stabilization windows, rate policies); Kubernetes' defaults
    /// when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<HorizontalPodAutoscalerBehavior>,
}
