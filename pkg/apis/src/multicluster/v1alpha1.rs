//! `multicluster.x-k8s.io/v1alpha1`: ServiceExport (a Service in a member offered to the other
//! clusters) and ServiceImport (a Service consumed from the clusters exporting it).
//!
//! The shapes and CRDs follow the mcs-api CRDs Karmada ships (`svcex`/`svcim` short names, their
//! printer columns, no category). ServiceExport has no `spec`, so its [`kube::Resource`] impl and
//! CRD are written here rather than derived.
//!
//! Who uses them: the `serviceExport` controller watches ServiceExports in members and collects the
//! EndpointSlices of exported Services; the `serviceImport` controller turns a ServiceImport on the
//! control plane into the derived Service `derived-<name>`, which (with the collected
//! EndpointSlices) follows the ServiceImport to the clusters it is propagated to.

use std::borrow::Cow;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::SessionAffinityConfig;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceStatus,
    CustomResourceSubresources, CustomResourceValidation,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of [`ServiceExport`] and [`ServiceImport`].
pub const GROUP: &str = "multicluster.x-k8s.io";
/// Their API version.
pub const VERSION: &str = "v1alpha1";
/// `multicluster.x-k8s.io/v1alpha1`.
pub const API_VERSION: &str = "multicluster.x-k8s.io/v1alpha1";
/// The kind of [`ServiceExport`].
pub const SERVICE_EXPORT_KIND: &str = "ServiceExport";
/// The kind of [`ServiceImport`].
pub const SERVICE_IMPORT_KIND: &str = "ServiceImport";

/// Marks the Service of the same name and namespace, in the cluster holding this object, as
/// exported: its EndpointSlices are collected for the clusters importing it. Namespaced, no spec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceExport {
    /// APIVersion of the object (`multicluster.x-k8s.io/v1alpha1`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Kind of the object (`ServiceExport`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Standard object metadata; the name is the exported Service's.
    #[serde(default)]
    #[schemars(transform = crate::schema::object_meta)]
    pub metadata: ObjectMeta,
    /// What the exporting side reports about the export.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ServiceExportStatus>,
}

/// The state of a ServiceExport.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceExportStatus {
    /// Conditions such as `Valid` and `Conflict`, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = crate::schema::list_map(&["type"]))]
    pub conditions: Vec<Condition>,
}

impl ServiceExport {
    /// An empty ServiceExport for the Service `namespace/name`.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            api_version: API_VERSION.into(),
            kind: SERVICE_EXPORT_KIND.into(),
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                ..Default::default()
            },
            status: None,
        }
    }

    /// The CRD, as the mcs-api one Karmada ships (`crds::tidy` finishes it).
    pub fn crd() -> CustomResourceDefinition {
        CustomResourceDefinition {
            metadata: ObjectMeta {
                name: Some(format!("serviceexports.{GROUP}")),
                ..Default::default()
            },
            spec: CustomResourceDefinitionSpec {
                group: GROUP.into(),
                names: CustomResourceDefinitionNames {
                    kind: SERVICE_EXPORT_KIND.into(),
                    plural: "serviceexports".into(),
                    singular: Some("serviceexport".into()),
                    short_names: Some(vec!["svcex".into()]),
                    ..Default::default()
                },
                scope: "Namespaced".into(),
                versions: vec![CustomResourceDefinitionVersion {
                    name: VERSION.into(),
                    schema: Some(CustomResourceValidation {
                        open_api_v3_schema: crate::schema::crd_root_schema::<Self>(),
                    }),
                    served: true,
                    storage: true,
                    subresources: Some(CustomResourceSubresources {
                        status: Some(CustomResourceSubresourceStatus(serde_json::json!({}))),
                        scale: None,
                    }),
                    additional_printer_columns: Some(vec![CustomResourceColumnDefinition {
                        name: "Age".into(),
                        type_: "date".into(),
                        json_path: ".metadata.creationTimestamp".into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }],
                ..Default::default()
            },
            ..Default::default()
        }
    }
}

impl kube::Resource for ServiceExport {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        SERVICE_EXPORT_KIND.into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "serviceexports".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A Service consumed from the clusters exporting it; on the Karmada control plane it yields the
/// derived Service `derived-<name>` with these ports.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "multicluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ServiceImport",
    plural = "serviceimports",
    singular = "serviceimport",
    shortname = "svcim",
    namespaced,
    status = "ServiceImportStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A Service imported from the clusters that export it.",
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(name = "IP", type_ = "string", json_path = ".spec.ips"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceImportSpec {
    /// The ports the imported Service serves.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub ports: Vec<ServicePort>,
    /// The cluster-set IP, at most one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1))]
    pub ips: Vec<String>,
    /// `ClusterSetIP` (a virtual IP; the only type Karmada derives a Service for) or `Headless`.
    #[serde(rename = "type")]
    pub type_: ServiceImportType,
    /// `ClientIP` or `None`, as for a Service.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session_affinity: String,
    /// Session affinity settings, as for a Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity_config: Option<SessionAffinityConfig>,
}

string_enum! {
    /// How an imported Service is reached.
    #[derive(Default)]
    pub enum ServiceImportType {
        /// Through one virtual IP for the whole cluster set.
        #[default]
        ClusterSetIP = "ClusterSetIP",
        /// Through the endpoints directly (no virtual IP).
        Headless = "Headless",
    }
}

/// One port of an imported Service.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    /// The port's name, unique within the import.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `TCP`, `UDP` or `SCTP`; TCP when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    /// The application protocol, e.g. `http`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
    /// The port number.
    pub port: i32,
}

/// The state of a ServiceImport.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceImportStatus {
    /// The clusters the service is imported from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = crate::schema::list_map(&["cluster"]))]
    pub clusters: Vec<ClusterStatus>,
}

/// One cluster a ServiceImport draws from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ClusterStatus {
    /// The cluster's name.
    pub cluster: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn service_import_round_trips_mcs_json() {
        let value = json!({
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "appProtocol": "http"}],
            "ips": ["10.0.0.1"],
            "type": "ClusterSetIP",
            "sessionAffinity": "None",
        });
        let spec: ServiceImportSpec = serde_json::from_value(value.clone()).expect("parses");
        assert_eq!(spec.type_, ServiceImportType::ClusterSetIP);
        assert_eq!(serde_json::to_value(&spec).expect("serializes"), value);
        let headless: ServiceImportSpec =
            serde_json::from_value(json!({"ports": [], "type": "Headless"})).expect("parses");
        assert_eq!(headless.type_, ServiceImportType::Headless);
    }

    #[test]
    fn service_export_has_no_spec() {
        let export = ServiceExport::new("ns", "web");
        assert_eq!(
            serde_json::to_value(&export).expect("serializes"),
            json!({
                "apiVersion": API_VERSION,
                "kind": SERVICE_EXPORT_KIND,
                "metadata": {"namespace": "ns", "name": "web"},
            })
        );
    }
}
