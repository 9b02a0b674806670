//! ResourceInterpreterWebhookConfiguration: interpreter webhooks called over HTTPS with a
//! [`ResourceInterpreterContext`], and the context itself (the request the control plane sends
//! and the response a webhook returns).
//!
//! The configuration has no `spec`: its webhooks sit at the top level, as in Karmada, so the
//! [`kube::Resource`] impl and the CRD are written here rather than derived.

use std::borrow::Cow;

use k8s_openapi::ByteString;
use k8s_openapi::ClusterResourceScope;
use k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceValidation,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::DependentObjectReference;
use crate::work::v1alpha2::{AggregatedStatusItem, Component, ReplicaRequirements};

/// The kind of [`ResourceInterpreterWebhookConfiguration`].
pub const WEBHOOK_CONFIGURATION_KIND: &str = "ResourceInterpreterWebhookConfiguration";
/// The kind of [`ResourceInterpreterContext`].
pub const INTERPRETER_CONTEXT_KIND: &str = "ResourceInterpreterContext";

/// Webhooks that interpret resources (replicas, status, health, dependencies...) for the kinds
/// their rules match. Cluster-scoped.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInterpreterWebhookConfiguration {
    /// APIVersion of the object (`config.karmada.io/v1alpha1`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Kind of the object (`ResourceInterpreterWebhookConfiguration`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    #[schemars(transform = crate::schema::object_meta)]
    pub metadata: ObjectMeta,
    /// The webhooks, each with the rules selecting what it interprets.
    pub webhooks: Vec<ResourceInterpreterWebhook>,
}

/// One webhook: where it is, what it interprets and how long to wait for it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInterpreterWebhook {
    /// The webhook's name; with the configuration's name it identifies the webhook
    /// (`<configuration>/<webhook>`), which orders webhooks matching the same request.
    pub name: String,
    /// How to reach the webhook: a URL, or a Service (which wins when both are set), and the CA
    /// bundle its serving certificate is checked against.
    pub client_config: WebhookClientConfig,
    /// The operations and resources the webhook interprets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleWithOperations>,
    /// How long to wait for the webhook, 1 to 30 seconds (10 when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// The ResourceInterpreterContext versions the webhook accepts, preferred first; only
    /// `v1alpha1` exists.
    pub interpreter_context_versions: Vec<String>,
}

/// Operations and the resources they apply to; `*` matches any value in each list.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuleWithOperations {
    /// The operations (`InterpretReplica`, `ReviseReplica`, `InterpretStatus`, `Retain`,
    /// `AggregateStatus`, `InterpretHealth`, `InterpretDependency`, `InterpretComponent`,
    /// `Prune`, or `*`).
    pub operations: Vec<String>,
    /// API groups of the resources (`""` is the core group).
    pub api_groups: Vec<String>,
    /// API versions of the resources.
    pub api_versions: Vec<String>,
    /// Kinds of the resources.
    pub kinds: Vec<String>,
}

/// Karmada's interpreter operation names, as they appear in rules and requests.
pub mod operations {
    /// Every operation.
    pub const ALL: &str = "*";
    /// Replicas and per-replica requirements.
    pub const INTERPRET_REPLICA: &str = "InterpretReplica";
    /// Replicas and requirements per component.
    pub const INTERPRET_COMPONENT: &str = "InterpretComponent";
    /// Set the replicas of a cluster's share.
    pub const REVISE_REPLICA: &str = "ReviseReplica";
    /// The status to collect from a member object.
    pub const INTERPRET_STATUS: &str = "InterpretStatus";
    /// Remove server-set fields.
    pub const PRUNE: &str = "Prune";
    /// Keep member-owned fields.
    pub const RETAIN: &str = "Retain";
    /// Fold member statuses into the template.
    pub const AGGREGATE_STATUS: &str = "AggregateStatus";
    /// Whether a member object is healthy.
    pub const INTERPRET_HEALTH: &str = "InterpretHealth";
    /// The objects a resource depends on.
    pub const INTERPRET_DEPENDENCY: &str = "InterpretDependency";
}

impl RuleWithOperations {
    /// Whether the rule matches `operation` on group/version/kind (exact values or `*`).
    pub fn matches(&self, group: &str, version: &str, kind: &str, operation: &str) -> bool {
        fn any(items: &[String], wanted: &str) -> bool {
            items.iter().any(|i| i == "*" || i == wanted)
        }
        any(&self.operations, operation)
            && any(&self.api_groups, group)
            && any(&self.api_versions, version)
            && any(&self.kinds, kind)
    }
}

impl kube::Resource for ResourceInterpreterWebhookConfiguration {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        WEBHOOK_CONFIGURATION_KIND.into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        crate::config::GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        super::VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "resourceinterpreterwebhookconfigurations".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl ResourceInterpreterWebhookConfiguration {
    /// The CRD, shaped as the derived ones (`crds::tidy` finishes it).
    pub fn crd() -> CustomResourceDefinition {
        let schema = crate::schema::crd_root_schema::<Self>();
        CustomResourceDefinition {
            metadata: ObjectMeta {
                name: Some(format!(
                    "resourceinterpreterwebhookconfigurations.{}",
                    crate::config::GROUP
                )),
                ..Default::default()
            },
            spec: CustomResourceDefinitionSpec {
                group: crate::config::GROUP.into(),
                names: CustomResourceDefinitionNames {
                    categories: Some(vec!["karmada-io".into()]),
                    kind: WEBHOOK_CONFIGURATION_KIND.into(),
                    plural: "resourceinterpreterwebhookconfigurations".into(),
                    singular: Some("resourceinterpreterwebhookconfiguration".into()),
                    ..Default::default()
                },
                scope: "Cluster".into(),
                versions: vec![CustomResourceDefinitionVersion {
                    name: super::VERSION.into(),
                    schema: Some(CustomResourceValidation {
                        open_api_v3_schema: schema,
                    }),
                    served: true,
                    storage: true,
                    ..Default::default()
                }],
                ..Default::default()
            },
            ..Default::default()
        }
    }
}

/// What is sent to an interpreter webhook (`request`) and what it answers (`response`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInterpreterContext {
    /// `config.karmada.io/v1alpha1` on requests; webhooks may leave it out of responses.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// `ResourceInterpreterContext` on requests.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<ResourceInterpreterRequest>,
    /// The response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ResourceInterpreterResponse>,
}

/// The object to interpret and the operation's inputs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInterpreterRequest {
    /// Identifies this call; the response must carry it back.
    pub uid: String,
    /// The object's group, version and kind.
    pub kind: GroupVersionKind,
    /// The object's name.
    pub name: String,
    /// The object's namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The operation.
    pub operation: String,
    /// The object (the template, or the member object for InterpretStatus/InterpretHealth).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub object: Value,
    /// The member's object, for Retain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_object: Option<Value>,
    /// The desired replicas, for ReviseReplica (0 otherwise, as Karmada sends).
    #[serde(default, rename = "replicas", skip_serializing_if = "Option::is_none")]
    pub desired_replicas: Option<i32>,
    /// The member statuses, for AggregateStatus.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aggregated_status: Vec<AggregatedStatusItem>,
}

/// A group, version and kind (metav1's `GroupVersionKind`; the group is empty for the core group).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupVersionKind {
    /// API group.
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
}

/// A webhook's answer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInterpreterResponse {
    /// The request's uid.
    #[serde(default)]
    pub uid: String,
    /// Whether interpretation succeeded; when not, `status` says why.
    #[serde(default)]
    pub successful: bool,
    /// Why the webhook failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RequestStatus>,
    /// A JSON patch (RFC 6902) to the request's object, base64 in JSON (Go's `[]byte`), for
    /// ReviseReplica, Retain, AggregateStatus and Prune.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<ByteString>,
    /// The patch's type; only `JSONPatch` exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    /// Per-replica requirements, for InterpretReplica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_requirements: Option<ReplicaRequirements>,
    /// The replicas, for InterpretReplica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The components, for InterpretComponent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Vec<Component>>,
    /// The dependencies, for InterpretDependency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<Vec<DependentObjectReference>>,
    /// The status to collect, for InterpretStatus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_status: Option<Value>,
    /// Health, for InterpretHealth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
}

/// Why a webhook did not interpret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RequestStatus {
    /// The webhook's message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// An HTTP-like status code.
    #[serde(default)]
    pub code: i32,
}

/// `JSONPatch`, the only patch type.
pub const PATCH_TYPE_JSON_PATCH: &str = "JSONPatch";
