//! `cluster.karmada.io/v1alpha1`: the member clusters Karmada propagates to.
//!
//! Karmada serves `Cluster` from its aggregated API server; karmada-rs serves it as a CRD with the same
//! group, version, fields, status subresource and table columns, and puts the aggregated server's
//! validation into the schema.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::{Cel, LABEL_VALUE_PATTERN, cel};

/// The API group of [`Cluster`].
pub const GROUP: &str = "cluster.karmada.io";
/// The API version of [`Cluster`].
pub const VERSION: &str = "v1alpha1";

/// Maximum length of a cluster name: the execution namespace `karmada-es-<name>` must stay a valid
/// namespace name (63 characters), so Karmada reserves room for the prefix.
pub const CLUSTER_NAME_MAX_LENGTH: usize = 48;

/// What is wrong with `name` as a Cluster name (Karmada's rule: a DNS-1123 label of at most
/// [`CLUSTER_NAME_MAX_LENGTH`] characters); `None` when it is fine.
pub fn cluster_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("cluster name is required".to_owned());
    }
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    let ok_ends = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if name.len() > CLUSTER_NAME_MAX_LENGTH || !ok_chars || !ok_ends {
        return Some(format!(
            "invalid cluster name({name}): must be a DNS-1123 label (lowercase alphanumerics and '-', \
             starting and ending with an alphanumeric) of at most {CLUSTER_NAME_MAX_LENGTH} characters"
        ));
    }
    None
}

/// The desired state of a member cluster: how to reach it and how to schedule onto it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.karmada.io",
    version = "v1alpha1",
    kind = "Cluster",
    plural = "clusters",
    singular = "cluster",
    status = "ClusterStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A member cluster: its credentials, location and taints (spec) and its health and capacity (status).",
    printcolumn(name = "VERSION", type_ = "string", json_path = ".status.kubernetesVersion"),
    printcolumn(name = "MODE", type_ = "string", json_path = ".spec.syncMode"),
    printcolumn(
        name = "READY",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "AGE", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "ZONES", type_ = "string", priority = 1, json_path = ".spec.zones"),
    printcolumn(name = "REGION", type_ = "string", priority = 1, json_path = ".spec.region"),
    printcolumn(name = "PROVIDER", type_ = "string", priority = 1, json_path = ".spec.provider"),
    printcolumn(name = "API-ENDPOINT", type_ = "string", priority = 1, json_path = ".spec.apiEndpoint"),
    printcolumn(name = "PROXY-URL", type_ = "string", priority = 1, json_path = ".spec.proxyURL"),
    validation = Rule::new(
        "self.metadata.name.size() <= 48 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')"
    )
    .message("metadata.name must be a DNS-1123 label of at most 48 characters")
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = cel(CLUSTER_SPEC_RULES))]
pub struct ClusterSpec {
    /// Unique identifier of the cluster (not the object's uid), usually collected at registration
    /// from the member's `kube-system` namespace uid or its ClusterProperty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 128_000))]
    pub id: String,

    /// How resources reach the cluster: `Push` (the control plane applies them) or `Pull` (an agent in
    /// the member cluster fetches them).
    pub sync_mode: ClusterSyncMode,

    /// The member API server address: `https://host[:port]`.
    #[serde(
        rename = "apiEndpoint",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub api_endpoint: String,

    /// Secret holding the credentials for the member cluster (`token` and `caBundle` keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalSecretReference>,

    /// Secret holding the impersonator's `token` for the cluster proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impersonator_secret_ref: Option<LocalSecretReference>,

    /// Skip verifying the member API server's serving certificate (insecure).
    #[serde(
        rename = "insecureSkipTLSVerification",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub insecure_skip_tls_verification: bool,

    /// Proxy (`http`, `https` or `socks5`) used to talk to the member cluster.
    #[serde(rename = "proxyURL", default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 4096))]
    pub proxy_url: String,

    /// HTTP headers sent to the proxy; multiple values for one header are comma-separated.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub proxy_header: BTreeMap<String, String>,

    /// Cloud provider name of the member cluster (a label value).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 63), pattern(LABEL_VALUE_PATTERN))]
    pub provider: String,

    /// Region the member cluster runs in (a label value).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 63), pattern(LABEL_VALUE_PATTERN))]
    pub region: String,

    /// Deprecated single zone, never used by Karmada; use `zones`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 63), pattern(LABEL_VALUE_PATTERN))]
    pub zone: String,

    /// Failure zones the member cluster spans (label values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(length(max = 63), pattern(LABEL_VALUE_PATTERN)))]
    pub zones: Vec<String>,

    /// Taints on the cluster; workloads that don't tolerate them aren't scheduled (or are evicted) here.
    /// Unique by key and effect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = cluster_taints)]
    pub taints: Vec<Taint>,

    /// Resource models (grades of node sizes) used to estimate how many replicas fit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_models: Vec<ResourceModel>,
}

/// What the aggregated API server checks on a Cluster's spec, as CEL.
const CLUSTER_SPEC_RULES: &[Cel] = &[
    Cel::at(
        ".apiEndpoint",
        "!has(self.apiEndpoint) || self.apiEndpoint == '' || self.apiEndpoint.matches('^[A-Za-z][-A-Za-z0-9+.]*://[^/?#@]+([/][^?#]*)?$')",
        "apiEndpoint must be a URL with a scheme and a host, without user information, query or fragment; desired format: https://hostname[:port] or https://IP[:port]",
    ),
    Cel::at(
        ".proxyURL",
        "!has(self.proxyURL) || self.proxyURL == '' || self.proxyURL.matches('^(http|https|socks5)://')",
        "proxyURL has an unsupported scheme, must be http, https, or socks5",
    ),
    Cel::new(
        "!(has(self.zone) && self.zone != '' && has(self.zones) && size(self.zones) > 0)",
        "zone and zones cannot co-exist",
    ),
];

/// What the aggregated API server checks on taints: the key is a qualified name, the value a label
/// value, the effect one of the three Kubernetes effects, and (key, effect) pairs are unique, which
/// the API server enforces for a list of type `map`.
fn cluster_taints(schema: &mut schemars::Schema) {
    use crate::schema::{QUALIFIED_NAME_MAX_LENGTH, QUALIFIED_NAME_PATTERN, set_item_property};
    use serde_json::json;
    set_item_property(schema, "key", "maxLength", json!(QUALIFIED_NAME_MAX_LENGTH));
    set_item_property(schema, "key", "pattern", json!(QUALIFIED_NAME_PATTERN));
    set_item_property(schema, "value", "maxLength", json!(63));
    set_item_property(schema, "value", "pattern", json!(LABEL_VALUE_PATTERN));
    set_item_property(
        schema,
        "effect",
        "enum",
        json!(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
    );
    let object = schema.ensure_object();
    object.insert("x-kubernetes-list-type".into(), json!("map"));
    object.insert(
        "x-kubernetes-list-map-keys".into(),
        json!(["key", "effect"]),
    );
}

string_enum! {
    /// How a member cluster receives resources from the control plane.
    #[derive(Default)]
    pub enum ClusterSyncMode {
        /// The control plane's controllers apply resources to the member cluster.
        #[default]
        Push = "Push",
        /// An agent in the member cluster pulls resources from the control plane.
        Pull = "Pull",
    }
}

/// A reference to a Secret by namespace and name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct LocalSecretReference {
    /// Namespace of the Secret.
    #[schemars(length(min = 1))]
    pub namespace: String,
    /// Name of the Secret.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// One grade of the cluster's resource model: nodes whose allocatable resources fall into `ranges`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ResourceModel {
    /// Index of this grade (0 is the smallest).
    pub grade: u32,
    /// The interval `[min, max)` of each resource for this grade.
    pub ranges: Vec<ResourceModelRange>,
}

/// The interval `[min, max)` of one resource within a [`ResourceModel`] grade.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ResourceModelRange {
    /// Resource name, e.g. `cpu` or `memory`.
    pub name: String,
    /// Inclusive lower bound.
    pub min: Quantity,
    /// Exclusive upper bound (unbounded for the last grade).
    pub max: Quantity,
}

/// The observed state of a member cluster, written by the cluster status controller (Push) or the
/// agent (Pull).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// The member's Kubernetes version (`GitVersion`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubernetes_version: String,

    /// The group-versions and resources the member serves.
    #[serde(
        rename = "apiEnablements",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub api_enablements: Vec<ApiEnablement>,

    /// Conditions: `Ready` and `CompleteAPIEnablements`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// Node counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_summary: Option<NodeSummary>,

    /// Allocatable/allocating/allocated resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_summary: Option<ResourceSummary>,

    /// Remedy actions (from Remedy objects) to perform on the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remedy_actions: Vec<String>,
}

/// The resources served in one group-version of a member cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiEnablement {
    /// The group-version, e.g. `apps/v1`.
    pub group_version: String,
    /// The resources in that group-version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ApiResource>,
}

/// A resource served by a member cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ApiResource {
    /// Plural resource name, e.g. `deployments`.
    pub name: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
}

/// Node counts of a member cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSummary {
    /// Number of nodes.
    #[serde(default, skip_serializing_if = "crate::is_zero_i32")]
    pub total_num: i32,
    /// Number of Ready nodes.
    #[serde(default, skip_serializing_if = "crate::is_zero_i32")]
    pub ready_num: i32,
}

/// Resource totals of a member cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSummary {
    /// Sum of the nodes' allocatable resources.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, Quantity>,
    /// Requests of Pods waiting to be scheduled.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocating: BTreeMap<String, Quantity>,
    /// Requests of Pods scheduled to nodes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocated: BTreeMap<String, Quantity>,
    /// Number of nodes per resource-model grade.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocatable_modelings: Vec<AllocatableModeling>,
}

/// How many nodes fall into one resource-model grade.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct AllocatableModeling {
    /// The grade (index into the cluster's resource models).
    pub grade: u32,
    /// Number of nodes in that grade.
    pub count: i64,
}

/// Key in the cluster Secret holding the bearer token.
pub const SECRET_TOKEN_KEY: &str = "token";
/// Key in the cluster Secret holding the CA bundle.
pub const SECRET_CA_DATA_KEY: &str = "caBundle";

impl Cluster {
    /// The status of the `Ready` condition (`"True"`, `"False"`, `"Unknown"`), `None` if absent.
    pub fn ready_status(&self) -> Option<&str> {
        self.status.as_ref().and_then(|status| {
            status
                .conditions
                .iter()
                .find(|c| c.type_ == crate::well_known::CLUSTER_CONDITION_READY)
                .map(|c| c.status.as_str())
        })
    }

    /// Whether the `Ready` condition is `True`.
    pub fn is_ready(&self) -> bool {
        self.ready_status() == Some("True")
    }
}
