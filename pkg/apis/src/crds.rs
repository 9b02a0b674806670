//! The CustomResourceDefinitions of the Karmada kinds karmada-rs serves, generated from the types.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;

use crate::{
    Cluster, ClusterOverridePolicy, ClusterPropagationPolicy, ClusterResourceBinding,
    ClusterTaintPolicy, OverridePolicy, PropagationPolicy, ResourceBinding, Work,
};

/// Every CRD, in a stable order, with schemas tidied to Karmada's conventions (see [`tidy`]).
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        Cluster::crd(),
        PropagationPolicy::crd(),
        ClusterPropagationPolicy::crd(),
        OverridePolicy::crd(),
        ClusterOverridePolicy::crd(),
        crate::policy::v1alpha1::FederatedResourceQuota::crd(),
        ClusterTaintPolicy::crd(),
        crate::autoscaling::v1alpha1::CronFederatedHPA::crd(),
        Work::crd(),
        ResourceBinding::crd(),
        ClusterResourceBinding::crd(),
        crate::config::v1alpha1::ResourceInterpreterCustomization::crd(),
        crate::config::v1alpha1::ResourceInterpreterWebhookConfiguration::crd(),
        crate::autoscaling::v1alpha1::FederatedHPA::crd(),
        crate::apps::v1alpha1::WorkloadRebalancer::crd(),
        crate::remedy::v1alpha1::Remedy::crd(),
        crate::networking::v1alpha1::MultiClusterService::crd(),
        crate::networking::v1alpha1::MultiClusterIngress::crd(),
        crate::multicluster::v1alpha1::ServiceExport::crd(),
        crate::multicluster::v1alpha1::ServiceImport::crd(),
        crate::rollout::RolloutStrategy::crd(),
        crate::rollout::Rollout::crd(),
        crate::policy_rs::v1alpha1::DriftPolicy::crd(),
        crate::policy_rs::v1alpha1::ClusterDriftPolicy::crd(),
    ]
    .into_iter()
    .map(tidy)
    .collect()
}

/// Karmada's file name for a CRD: `<group>_<plural>.yaml`, e.g. `policy.karmada.io_propagationpolicies.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// Brings a derived schema in line with Karmada's (controller-gen) CRDs: optional fields are plain
/// optional properties (no `nullable: true`, so explicit nulls are pruned instead of stored), enums
/// list only real values, the root carries no `title`, label selector requirements
/// get their values-per-operator rule ([`crate::schema::label_requirement_values`]), and unsigned integers carry no `uint*` format
/// (the API server only knows signed ones).
pub fn tidy(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        let Ok(mut value) = serde_json::to_value(&*schema) else {
            continue;
        };
        if let Some(root) = value.as_object_mut() {
            root.remove("title");
        }
        tidy_schema(&mut value);
        if let Ok(tidied) = serde_json::from_value(value) {
            *schema = tidied;
        }
    }
    crd
}

fn tidy_schema(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    object.remove("nullable");
    crate::schema::label_requirement_values(object);
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if matches!(
        object.get("format").and_then(Value::as_str),
        Some("uint8" | "uint16" | "uint32" | "uint64" | "uint")
    ) {
        object.remove("format");
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.values_mut().for_each(tidy_schema);
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(child) = object.get_mut(key) {
            tidy_schema(child);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(children)) = object.get_mut(key) {
            children.iter_mut().for_each(tidy_schema);
        }
    }
}
