//! OverridePolicy / ClusterOverridePolicy: per-cluster changes applied to propagated resources.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ClusterAffinity, ResourceSelector};
use crate::schema::{Cel, JSON_POINTER_PATTERN, any_json, cel, exactly_one_of};

/// The desired behaviour of an OverridePolicy or ClusterOverridePolicy: which resources it applies to
/// and the override rules per target cluster.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "policy.karmada.io",
    version = "v1alpha1",
    kind = "OverridePolicy",
    plural = "overridepolicies",
    singular = "overridepolicy",
    shortname = "op",
    category = "karmada-io",
    namespaced,
    derive = "PartialEq",
    derive = "Default",
    doc = "Overrides fields of the resources (in its own namespace) propagated to the matching clusters."
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = cel(OVERRIDE_SPEC_RULES))]
pub struct OverrideSpec {
    /// The resources this policy applies to; empty matches all resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_selectors: Vec<ResourceSelector>,

    /// Override rules, each for a set of target clusters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub override_rules: Vec<RuleWithCluster>,

    /// Deprecated (use `overrideRules`): the clusters `overriders` apply to; `None` means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_cluster: Option<ClusterAffinity>,

    /// Deprecated (use `overrideRules`): the overriders applied to `targetCluster`.
    #[serde(default)]
    #[schemars(transform = crate::schema::no_default)]
    pub overriders: Overriders,
}

/// What Karmada's OverridePolicy webhook checks on the spec, as CEL.
const OVERRIDE_SPEC_RULES: &[Cel] = &[
    Cel::at(
        ".targetCluster",
        "!(has(self.targetCluster) && has(self.overrideRules))",
        "overrideRules and targetCluster can't co-exist",
    ),
    Cel::at(
        ".overriders",
        "!has(self.overrideRules) || !has(self.overriders) || !((has(self.overriders.plaintext) && size(self.overriders.plaintext) > 0) || (has(self.overriders.imageOverrider) && size(self.overriders.imageOverrider) > 0) || (has(self.overriders.commandOverrider) && size(self.overriders.commandOverrider) > 0) || (has(self.overriders.argsOverrider) && size(self.overriders.argsOverrider) > 0) || (has(self.overriders.labelsOverrider) && size(self.overriders.labelsOverrider) > 0) || (has(self.overriders.annotationsOverrider) && size(self.overriders.annotationsOverrider) > 0))",
        "overrideRules and overriders can't co-exist",
    ),
];

cluster_scoped_twin! {
    /// Overrides fields of the resources (in any namespace, or cluster-scoped) propagated to the
    /// matching clusters.
    pub struct ClusterOverridePolicy: OverridePolicy {
        group: "policy.karmada.io",
        version: "v1alpha1",
        kind: "ClusterOverridePolicy",
        singular: "clusteroverridepolicy",
        plural: "clusteroverridepolicies",
        short_name: "cop",
        spec: OverrideSpec,
    }
}

/// Overriders applied to resources propagated to the clusters `targetCluster` selects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuleWithCluster {
    /// The clusters this rule applies to; `None` means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_cluster: Option<ClusterAffinity>,
    /// The overriders of this rule.
    pub overriders: Overriders,
}

/// The overriders of a rule, applied in this order: image, command, args, labels, annotations,
/// field, plaintext.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Overriders {
    /// JSON-patch style overrides of arbitrary fields.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plaintext: Vec<PlaintextOverrider>,
    /// Overrides of container images.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_overrider: Vec<ImageOverrider>,
    /// Overrides of container commands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command_overrider: Vec<CommandArgsOverrider>,
    /// Overrides of container args.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args_overrider: Vec<CommandArgsOverrider>,
    /// Overrides of the resource's labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels_overrider: Vec<LabelAnnotationOverrider>,
    /// Overrides of the resource's annotations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub annotations_overrider: Vec<LabelAnnotationOverrider>,
    /// Patches of structured (JSON or YAML) documents embedded in string fields, e.g. ConfigMap data.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub field_overrider: Vec<FieldOverrider>,
}

impl Overriders {
    /// Whether no overrider of any kind is set.
    pub fn is_empty(&self) -> bool {
        self.plaintext.is_empty()
            && self.image_overrider.is_empty()
            && self.command_overrider.is_empty()
            && self.args_overrider.is_empty()
            && self.labels_overrider.is_empty()
            && self.annotations_overrider.is_empty()
            && self.field_overrider.is_empty()
    }
}

string_enum! {
    /// An overrider operation.
    #[derive(Default)]
    pub enum OverriderOperator {
        /// Add the value.
        #[default]
        Add = "add",
        /// Remove the value.
        Remove = "remove",
        /// Replace with the value.
        Replace = "replace",
    }
}

/// Adds, removes or replaces labels or annotations.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct LabelAnnotationOverrider {
    /// The operation.
    pub operator: OverriderOperator,
    /// The keys and values to add, remove (keys matter) or replace.
    pub value: BTreeMap<String, String>,
}

/// Changes one component of container images.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ImageOverrider {
    /// Which image field to change; `None` detects images of Pods and the common workload kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicate: Option<ImagePredicate>,
    /// The part of `[registry/]repository[:tag]` to change.
    pub component: ImageComponent,
    /// The operation.
    pub operator: OverriderOperator,
    /// The new value (required for `add` and `replace`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
}

/// Selects the image field an [`ImageOverrider`] changes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ImagePredicate {
    /// JSON pointer (RFC 6901) to the image field.
    #[schemars(regex(pattern = JSON_POINTER_PATTERN))]
    pub path: String,
}

string_enum! {
    /// A component of an image reference `[registry/]repository[:tag]`.
    #[derive(Default)]
    pub enum ImageComponent {
        /// The registry, e.g. `registry.k8s.io`.
        #[default]
        Registry = "Registry",
        /// The repository, e.g. `fictional/nginx`.
        Repository = "Repository",
        /// The tag or digest, e.g. `v1.19.1` or `@sha256:…`.
        Tag = "Tag",
    }
}

/// Adds or removes entries of a container's command or args.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandArgsOverrider {
    /// The container's name.
    pub container_name: String,
    /// `add` or `remove`.
    #[schemars(transform = crate::schema::only_values(&["add", "remove"]))]
    pub operator: OverriderOperator,
    /// Entries appended (`add`) or deleted (`remove`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub value: Vec<String>,
}

/// Overrides the field at `path` with `operator` and `value`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PlaintextOverrider {
    /// JSON pointer to the target field.
    pub path: String,
    /// The operation.
    pub operator: OverriderOperator,
    /// The value to apply (must be empty for `remove`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_json")]
    pub value: Option<serde_json::Value>,
}

/// Patches a JSON or YAML document held in a string field (exactly one of `json` or `yaml`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = exactly_one_of(&["json", "yaml"]))]
pub struct FieldOverrider {
    /// JSON pointer (RFC 6901) to the string field holding the document, e.g. `/data/config.yaml`.
    #[schemars(regex(pattern = JSON_POINTER_PATTERN))]
    pub field_path: String,
    /// Operations on a JSON document.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub json: Vec<JsonPatchOperation>,
    /// Operations on a YAML document.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub yaml: Vec<YamlPatchOperation>,
}

/// One operation on the JSON document of a [`FieldOverrider`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JsonPatchOperation {
    /// JSON pointer (RFC 6901) inside the document.
    #[schemars(regex(pattern = JSON_POINTER_PATTERN))]
    pub sub_path: String,
    /// The operation.
    pub operator: OverriderOperator,
    /// The value for `add` and `replace` (not allowed for `remove`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_json")]
    pub value: Option<serde_json::Value>,
}

/// One operation on the YAML document of a [`FieldOverrider`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct YamlPatchOperation {
    /// JSON pointer (RFC 6901) inside the document.
    #[schemars(regex(pattern = JSON_POINTER_PATTERN))]
    pub sub_path: String,
    /// The operation.
    pub operator: OverriderOperator,
    /// The value for `add` and `replace` (not allowed for `remove`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_json")]
    pub value: Option<serde_json::Value>,
}
