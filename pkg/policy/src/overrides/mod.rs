//! Applying OverridePolicies and ClusterOverridePolicies to a manifest for one member cluster
//! (Karmada's `pkg/util/overridemanager`).
//!
//! Order: all matching ClusterOverridePolicies, then (for namespaced resources) the matching
//! OverridePolicies of the resource's namespace. Within each group, policies are sorted by how
//! specifically they select the resource (match-all, then label selector, then name) and then by
//! name; each policy contributes the overriders of every rule whose `targetCluster` selects the
//! cluster (or is unset). A rule's overriders run in the order images, commands, args, labels,
//! annotations, fields, plaintext.
//!
//! Everything is applied to a copy: on any failure the caller gets an [`OverrideError`] naming the
//! policy, rule, overrider, path and cause, and no manifest at all.

mod doc;
mod image;
mod overriders;
mod patch;
mod yaml;

use std::collections::BTreeMap;
use std::fmt;

use karmada_apis::policy::v1alpha1::{
    CommandArgsOverrider, FieldOverrider, ImageOverrider, LabelAnnotationOverrider,
    OverriderOperator, Overriders, RuleWithCluster,
};
use karmada_apis::well_known::{
    APPLIED_CLUSTER_OVERRIDES_ANNOTATION, APPLIED_OVERRIDES_ANNOTATION,
};
use karmada_apis::{Cluster, ClusterOverridePolicy, OverridePolicy, OverrideSpec};
use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

use apimachinery::go_escape_json;

use crate::selector::{
    ImplicitPriority, ResourceIdentity, ResourceRef, cluster_matches, cluster_name,
    resource_selectors_priority,
};
use doc::Doc;

/// Which kind of override policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OverridePolicyKind {
    /// A cluster-scoped ClusterOverridePolicy.
    ClusterOverridePolicy,
    /// A namespaced OverridePolicy.
    OverridePolicy,
}

impl fmt::Display for OverridePolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ClusterOverridePolicy => "ClusterOverridePolicy",
            Self::OverridePolicy => "OverridePolicy",
        })
    }
}

/// An override that could not be applied. No manifest is produced in that case.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error(
    "cannot apply {policy_kind} {policy} (overrideRules[{rule}], {overrider}) to {resource} for cluster {cluster}: path {path:?}: {cause}"
)]
pub struct OverrideError {
    /// The kind of the failing policy.
    pub policy_kind: OverridePolicyKind,
    /// The failing policy: `namespace/name` for an OverridePolicy, `name` for a
    /// ClusterOverridePolicy.
    pub policy: String,
    /// Index of the rule in `spec.overrideRules` (0 for the deprecated `spec.overriders`).
    pub rule: usize,
    /// The failing overrider, e.g. `plaintext[1]` or `imageOverrider[0]`.
    pub overrider: String,
    /// The path the overrider addressed.
    pub path: String,
    /// Why it failed.
    pub cause: String,
    /// The resource, e.g. `apps/v1 Deployment default/nginx`.
    pub resource: String,
    /// The target cluster.
    pub cluster: String,
}

/// One applied policy, as recorded in the `applied-overrides` annotations.
#[derive(Debug, Clone, PartialEq)]
pub struct AppliedOverride {
    /// Name of the policy (without namespace).
    pub policy_name: String,
    /// The overriders of the rule that was applied.
    pub overriders: Overriders,
}

/// The policies applied from one group (ClusterOverridePolicies or OverridePolicies), in
/// application order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppliedOverrides {
    /// The applied items, one per applied rule.
    pub items: Vec<AppliedOverride>,
}

impl AppliedOverrides {
    /// Whether nothing was applied.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The annotation value Karmada writes: a JSON array of `{"policyName", "overriders"}` sorted
    /// by policy name, byte-compatible with Go's `encoding/json`. `None` when nothing was applied
    /// (Karmada then leaves the annotation out).
    pub fn annotation_value(&self) -> Option<String> {
        if self.items.is_empty() {
            return None;
        }
        let mut items: Vec<&AppliedOverride> = self.items.iter().collect();
        items.sort_by(|a, b| a.policy_name.cmp(&b.policy_name));
        let shadow: Vec<ShadowItem<'_>> = items
            .into_iter()
            .map(|item| ShadowItem {
                policy_name: &item.policy_name,
                overriders: ShadowOverriders::new(&item.overriders),
            })
            .collect();
        // Serializing plain data into a String cannot fail; fall back to "[]" defensively.
        let json = serde_json::to_string(&shadow).unwrap_or_else(|_| "[]".to_owned());
        Some(go_escape_json(&json))
    }
}

/// The outcome of applying override policies to a manifest for one cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct OverrideResult {
    /// The overridden manifest.
    pub manifest: Value,
    /// The ClusterOverridePolicies applied (annotation `policy.karmada.io/applied-cluster-overrides`).
    pub applied_cluster_overrides: AppliedOverrides,
    /// The OverridePolicies applied (annotation `policy.karmada.io/applied-overrides`).
    pub applied_overrides: AppliedOverrides,
}

impl OverrideResult {
    /// Writes the applied-overrides annotations as Karmada's binding controller does (only the
    /// non-empty ones; existing values are replaced).
    pub fn record_annotations(&self, annotations: &mut BTreeMap<String, String>) {
        if let Some(value) = self.applied_cluster_overrides.annotation_value() {
            annotations.insert(APPLIED_CLUSTER_OVERRIDES_ANNOTATION.to_owned(), value);
        }
        if let Some(value) = self.applied_overrides.annotation_value() {
            annotations.insert(APPLIED_OVERRIDES_ANNOTATION.to_owned(), value);
        }
    }
}

/// Whether an override policy applies to the resource at all (ignoring clusters): an empty
/// selector list selects everything. The binding controller uses this to find the bindings a
/// changed override policy affects.
pub fn override_spec_matches(spec: &OverrideSpec, resource: ResourceRef<'_>) -> bool {
    spec.resource_selectors.is_empty()
        || resource_selectors_priority(resource, &spec.resource_selectors)
            > ImplicitPriority::Mismatch
}

/// Whether an OverridePolicy applies to the resource (ignoring clusters): it must be in the
/// resource's namespace, and its selectors (with an empty namespace meaning the policy's own, as
/// Karmada's webhook defaults it) must match, an empty list matching everything.
pub fn override_policy_matches(policy: &OverridePolicy, resource: ResourceRef<'_>) -> bool {
    let namespace = policy.metadata.namespace.as_deref().unwrap_or_default();
    if resource.namespace.is_empty() || namespace != resource.namespace {
        return false;
    }
    let spec = OverrideSpec {
        resource_selectors: crate::matching::defaulted_selectors(
            &policy.spec.resource_selectors,
            namespace,
        ),
        ..OverrideSpec::default()
    };
    override_spec_matches(&spec, resource)
}

/// Whether a ClusterOverridePolicy applies to the resource (ignoring clusters).
pub fn cluster_override_policy_matches(
    policy: &ClusterOverridePolicy,
    resource: ResourceRef<'_>,
) -> bool {
    override_spec_matches(&policy.spec, resource)
}

/// One rule to apply, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchedRule<'a> {
    /// The policy's kind.
    pub policy_kind: OverridePolicyKind,
    /// The policy's namespace (empty for ClusterOverridePolicies).
    pub policy_namespace: &'a str,
    /// The policy's name.
    pub policy_name: &'a str,
    /// Index of the rule in `spec.overrideRules` (0 for the deprecated form).
    pub rule_index: usize,
    /// The rule's overriders.
    pub overriders: &'a Overriders,
}

/// The rules of `policies` that apply to the resource on `cluster`, in Karmada's order.
fn matched_rules<'a>(
    kind: OverridePolicyKind,
    policies: impl Iterator<Item = (&'a str, &'a str, &'a OverrideSpec)>,
    resource: ResourceRef<'_>,
    cluster: &Cluster,
) -> Vec<MatchedRule<'a>> {
    let mut matching: Vec<(ImplicitPriority, &'a str, &'a str, &'a OverrideSpec)> = policies
        .filter_map(|(namespace, name, spec)| {
            if spec.resource_selectors.is_empty() {
                return Some((ImplicitPriority::MatchAll, namespace, name, spec));
            }
            let priority = resource_selectors_priority(resource, &spec.resource_selectors);
            (priority > ImplicitPriority::Mismatch).then_some((priority, namespace, name, spec))
        })
        .collect();
    matching.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.2.cmp(b.2)));

    let mut rules = Vec::new();
    for (_, namespace, name, spec) in matching {
        if spec.override_rules.is_empty() {
            let applies = spec
                .target_cluster
                .as_ref()
                .is_none_or(|target| cluster_matches(cluster, target));
            if applies {
                rules.push(MatchedRule {
                    policy_kind: kind,
                    policy_namespace: namespace,
                    policy_name: name,
                    rule_index: 0,
                    overriders: &spec.overriders,
                });
            }
            continue;
        }
        for (
            index,
            RuleWithCluster {
                target_cluster,
                overriders,
            },
        ) in spec.override_rules.iter().enumerate()
        {
            if target_cluster
                .as_ref()
                .is_none_or(|target| cluster_matches(cluster, target))
            {
                rules.push(MatchedRule {
                    policy_kind: kind,
                    policy_namespace: namespace,
                    policy_name: name,
                    rule_index: index,
                    overriders,
                });
            }
        }
    }
    rules
}

/// The rules that apply to `resource` on `cluster`, in application order: ClusterOverridePolicies
/// first, then (namespaced resources only) the OverridePolicies of the resource's namespace.
/// `override_policies` may hold policies of any namespace; others are ignored.
pub fn matching_rules<'a>(
    resource: ResourceRef<'_>,
    cluster: &Cluster,
    cluster_override_policies: &'a [ClusterOverridePolicy],
    override_policies: &'a [OverridePolicy],
) -> Vec<MatchedRule<'a>> {
    let mut rules = matched_rules(
        OverridePolicyKind::ClusterOverridePolicy,
        cluster_override_policies
            .iter()
            .map(|p| ("", p.metadata.name.as_deref().unwrap_or_default(), &p.spec)),
        resource,
        cluster,
    );
    if !resource.namespace.is_empty() {
        rules.extend(matched_rules(
            OverridePolicyKind::OverridePolicy,
            override_policies
                .iter()
                .filter(|p| p.metadata.namespace.as_deref() == Some(resource.namespace))
                .map(|p| {
                    (
                        p.metadata.namespace.as_deref().unwrap_or_default(),
                        p.metadata.name.as_deref().unwrap_or_default(),
                        &p.spec,
                    )
                }),
            resource,
            cluster,
        ));
    }
    rules
}

/// Applies the override policies matching `manifest` for `cluster` and returns the overridden
/// manifest with the records of what was applied. The input is never modified; on error no
/// manifest is returned (the error is boxed: it carries the policy, rule, overrider, path, cause,
/// resource and cluster).
pub fn apply_overrides(
    manifest: &Value,
    cluster: &Cluster,
    cluster_override_policies: &[ClusterOverridePolicy],
    override_policies: &[OverridePolicy],
) -> Result<OverrideResult, Box<OverrideError>> {
    let identity = ResourceIdentity::from_manifest(manifest);
    let resource = identity.as_ref();
    let rules = matching_rules(
        resource,
        cluster,
        cluster_override_policies,
        override_policies,
    );
    let describe_resource = || {
        let key = if identity.namespace.is_empty() {
            identity.name.clone()
        } else {
            format!("{}/{}", identity.namespace, identity.name)
        };
        format!("{} {} {key}", identity.api_version, identity.kind)
    };

    let mut doc = Doc::from_value(manifest);
    let mut result = OverrideResult {
        manifest: Value::Null,
        applied_cluster_overrides: AppliedOverrides::default(),
        applied_overrides: AppliedOverrides::default(),
    };
    for rule in rules {
        doc = overriders::apply_overriders(&doc, rule.overriders).map_err(|failure| {
            let policy = if rule.policy_namespace.is_empty() {
                rule.policy_name.to_owned()
            } else {
                format!("{}/{}", rule.policy_namespace, rule.policy_name)
            };
            Box::new(OverrideError {
                policy_kind: rule.policy_kind,
                policy,
                rule: rule.rule_index,
                overrider: failure.overrider,
                path: failure.path,
                cause: failure.cause,
                resource: describe_resource(),
                cluster: cluster_name(cluster).to_owned(),
            })
        })?;
        let applied = AppliedOverride {
            policy_name: rule.policy_name.to_owned(),
            overriders: rule.overriders.clone(),
        };
        match rule.policy_kind {
            OverridePolicyKind::ClusterOverridePolicy => {
                result.applied_cluster_overrides.items.push(applied);
            }
            OverridePolicyKind::OverridePolicy => result.applied_overrides.items.push(applied),
        }
    }
    result.manifest = doc.to_value().map_err(|cause| {
        Box::new(OverrideError {
            policy_kind: OverridePolicyKind::OverridePolicy,
            policy: String::new(),
            rule: 0,
            overrider: String::new(),
            path: String::new(),
            cause,
            resource: describe_resource(),
            cluster: cluster_name(cluster).to_owned(),
        })
    })?;
    Ok(result)
}

// ---------------------------------------------------------------------------------------------
// The annotation's JSON shape, mirroring Karmada's Go types (field order, omitempty, and
// `value` always present on patch operations, `null` when unset).
// ---------------------------------------------------------------------------------------------

#[derive(Serialize)]
struct ShadowItem<'a> {
    #[serde(rename = "policyName")]
    policy_name: &'a str,
    overriders: ShadowOverriders<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ShadowOverriders<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    plaintext: Vec<ShadowOperation<'a>>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    image_overrider: &'a [ImageOverrider],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    command_overrider: &'a [CommandArgsOverrider],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    args_overrider: &'a [CommandArgsOverrider],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    labels_overrider: &'a [LabelAnnotationOverrider],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    annotations_overrider: &'a [LabelAnnotationOverrider],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    field_overrider: Vec<ShadowField<'a>>,
}

impl<'a> ShadowOverriders<'a> {
    fn new(o: &'a Overriders) -> Self {
        Self {
            plaintext: o
                .plaintext
                .iter()
                .map(|p| ShadowOperation::new("path", &p.path, &p.operator, p.value.as_ref()))
                .collect(),
            image_overrider: &o.image_overrider,
            command_overrider: &o.command_overrider,
            args_overrider: &o.args_overrider,
            labels_overrider: &o.labels_overrider,
            annotations_overrider: &o.annotations_overrider,
            field_overrider: o.field_overrider.iter().map(ShadowField::new).collect(),
        }
    }
}

/// A patch operation: `{"path"|"subPath", "operator", "value"}` with `value` always written.
struct ShadowOperation<'a> {
    path_key: &'static str,
    path: &'a str,
    operator: &'a OverriderOperator,
    value: Option<&'a Value>,
}

impl<'a> ShadowOperation<'a> {
    fn new(
        path_key: &'static str,
        path: &'a str,
        operator: &'a OverriderOperator,
        value: Option<&'a Value>,
    ) -> Self {
        Self {
            path_key,
            path,
            operator,
            value,
        }
    }
}

impl Serialize for ShadowOperation<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry(self.path_key, self.path)?;
        map.serialize_entry("operator", self.operator)?;
        map.serialize_entry("value", &self.value)?;
        map.end()
    }
}

#[derive(Serialize)]
struct ShadowField<'a> {
    #[serde(rename = "fieldPath")]
    field_path: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    json: Vec<ShadowOperation<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    yaml: Vec<ShadowOperation<'a>>,
}

impl<'a> ShadowField<'a> {
    fn new(o: &'a FieldOverrider) -> Self {
        Self {
            field_path: &o.field_path,
            json: o
                .json
                .iter()
                .map(|p| {
                    ShadowOperation::new("subPath", &p.sub_path, &p.operator, p.value.as_ref())
                })
                .collect(),
            yaml: o
                .yaml
                .iter()
                .map(|p| {
                    ShadowOperation::new("subPath", &p.sub_path, &p.operator, p.value.as_ref())
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests;
