//! `config.karmada.io/v1alpha1`: ResourceInterpreterCustomization, per-kind interpreter rules
//! written in Lua (run by `karmada-luavm`), and DependentObjectReference, what a dependency rule
//! returns.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API version of [`ResourceInterpreterCustomization`].
pub const VERSION: &str = "v1alpha1";

/// What a customization applies to and its rules. Customizations take precedence over the
/// built-in rules of a kind, for the operations they define.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "config.karmada.io",
    version = "v1alpha1",
    kind = "ResourceInterpreterCustomization",
    plural = "resourceinterpretercustomizations",
    singular = "resourceinterpretercustomization",
    shortname = "ric",
    category = "karmada-io",
    derive = "PartialEq",
    derive = "Default",
    doc = "Lua rules that tell Karmada how to interpret one resource kind (replicas, status, health, dependencies...).",
    printcolumn(
        name = "TARGET-API-VERSION",
        type_ = "string",
        json_path = ".spec.target.apiVersion"
    ),
    printcolumn(
        name = "TARGET-KIND",
        type_ = "string",
        json_path = ".spec.target.kind"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceInterpreterCustomizationSpec {
    /// The kind the rules apply to.
    pub target: CustomizationTarget,
    /// The rules.
    pub customizations: CustomizationRules,
}

/// The resource type a customization applies to (an exact apiVersion and kind).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomizationTarget {
    /// API version of the target, e.g. `apps/v1`.
    pub api_version: String,
    /// Kind of the target.
    pub kind: String,
}

/// The interpretation rules, one optional Lua script per operation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomizationRules {
    /// `Retain(desiredObj, observedObj)`: keep values member-cluster components own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<LuaScript>,
    /// `GetReplicas(desiredObj)`: the replica count and per-replica requirements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_resource: Option<LuaScript>,
    /// `GetComponents(desiredObj)`: replicas and requirements of each component (multi-template
    /// workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component_resource: Option<LuaScript>,
    /// `ReviseReplica(desiredObj, desiredReplica)`: set a cluster's share of replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_revision: Option<LuaScript>,
    /// `ReflectStatus(observedObj)`: the status to collect from a member object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_reflection: Option<LuaScript>,
    /// `AggregateStatus(desiredObj, statusItems)`: fold member statuses into the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_aggregation: Option<LuaScript>,
    /// `InterpretHealth(observedObj)`: whether a member object is healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_interpretation: Option<LuaScript>,
    /// `GetDependencies(desiredObj)`: the objects the resource depends on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency_interpretation: Option<LuaScript>,
}

/// A Lua script defining the operation's function (Karmada's `LocalValueRetention`,
/// `ReplicaResourceRequirement`, `StatusReflection`, ... all have this one field).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LuaScript {
    /// The whole function, declaration and body, e.g.
    /// `function InterpretHealth(observedObj) return true end`.
    pub lua_script: String,
}

impl LuaScript {
    /// A script.
    pub fn new(lua_script: impl Into<String>) -> Self {
        Self {
            lua_script: lua_script.into(),
        }
    }
}

/// An object a resource depends on: one object by name, or every object of the kind in the
/// namespace matching `label_selector` when `name` is empty.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependentObjectReference {
    /// API version of the referent, e.g. `v1`.
    pub api_version: String,
    /// Kind of the referent.
    pub kind: String,
    /// Namespace of the referent; empty for cluster-scoped kinds.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name of the referent; when empty, `label_selector` selects the referents.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Selects the referents when `name` is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
}

impl DependentObjectReference {
    /// A namespaced object by name.
    pub fn named(api_version: &str, kind: &str, namespace: &str, name: &str) -> Self {
        Self {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            label_selector: None,
        }
    }
}

mod webhook;
pub use webhook::*;
