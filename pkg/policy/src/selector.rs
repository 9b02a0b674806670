//! Label selectors, cluster affinities and resource selectors, evaluated as Karmada evaluates them
//! (`pkg/util/selector.go`, apimachinery's `LabelSelectorAsSelector` and the lifted
//! `NodeSelectorRequirementsAsSelector`).
//!
//! A selector that apimachinery would reject (unknown operator, `In` without values, an invalid key
//! or value) never matches anything: Karmada treats the conversion error as "no match", and so do we.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use karmada_apis::Cluster;
use karmada_apis::policy::v1alpha1::{ClusterAffinity, ResourceSelector};
use karmada_apis::well_known::{PROVIDER_FIELD, REGION_FIELD, ZONE_FIELD};
use serde_json::Value;
use thiserror::Error;

/// Why a selector cannot be evaluated (apimachinery would refuse to build it).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SelectorError {
    /// The operator is not one the selector kind supports.
    #[error("{operator:?} is not a valid selector operator (key {key:?})")]
    InvalidOperator {
        /// The requirement's key.
        key: String,
        /// The rejected operator.
        operator: String,
    },
    /// The operator needs a different number of values.
    #[error("operator {operator} on key {key:?} {expected}, got {got} value(s)")]
    WrongValueCount {
        /// The requirement's key.
        key: String,
        /// The operator.
        operator: String,
        /// What the operator expects, in words.
        expected: &'static str,
        /// How many values were given.
        got: usize,
    },
    /// The key is not a qualified name.
    #[error("invalid label key {0:?}: must be a qualified name ([prefix/]name)")]
    InvalidKey(String),
    /// A value is not a valid label value.
    #[error("invalid label value {value:?} for key {key:?}")]
    InvalidValue {
        /// The requirement's key.
        key: String,
        /// The rejected value.
        value: String,
    },
    /// `Gt`/`Lt` with a value that is not an integer.
    #[error("value {value:?} for key {key:?} must be an integer for operator {operator}")]
    NotAnInteger {
        /// The requirement's key.
        key: String,
        /// The operator.
        operator: String,
        /// The rejected value.
        value: String,
    },
}

/// One compiled requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    Gt(String, i64),
    Lt(String, i64),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Self::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
            Self::Exists(key) => labels.contains_key(key),
            Self::DoesNotExist(key) => !labels.contains_key(key),
            Self::Gt(key, bound) => labels
                .get(key)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *bound),
            Self::Lt(key, bound) => labels
                .get(key)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *bound),
        }
    }
}

/// A compiled label (or field) selector: all requirements must hold. No requirement selects
/// everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether the selector has no requirement (selects everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Compiles a `metav1.LabelSelector` (`matchLabels` and `matchExpressions` with `In`, `NotIn`,
    /// `Exists`, `DoesNotExist`), validating keys and values like apimachinery.
    pub fn from_label_selector(selector: &LabelSelector) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            validate_key(key)?;
            validate_value(key, value)?;
            requirements.push(Requirement::In(key.clone(), vec![value.clone()]));
        }
        for expr in selector.match_expressions.iter().flatten() {
            requirements.push(label_requirement(expr)?);
        }
        Ok(Self { requirements })
    }

    /// Compiles node-selector style requirements (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`,
    /// `Lt`), as Karmada's lifted `NodeSelectorRequirementsAsSelector` does for field selectors.
    pub fn from_node_selector_requirements(
        exprs: &[NodeSelectorRequirement],
    ) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for expr in exprs {
            let values = expr.values.clone().unwrap_or_default();
            requirements.push(build_requirement(&expr.key, &expr.operator, values, true)?);
        }
        Ok(Self { requirements })
    }
}

fn label_requirement(expr: &LabelSelectorRequirement) -> Result<Requirement, SelectorError> {
    let values = expr.values.clone().unwrap_or_default();
    build_requirement(&expr.key, &expr.operator, values, false)
}

fn build_requirement(
    key: &str,
    operator: &str,
    values: Vec<String>,
    allow_comparison: bool,
) -> Result<Requirement, SelectorError> {
    validate_key(key)?;
    let count = |expected: &'static str, ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(SelectorError::WrongValueCount {
                key: key.to_owned(),
                operator: operator.to_owned(),
                expected,
                got: values.len(),
            })
        }
    };
    let requirement = match operator {
        "In" => {
            count("needs at least one value", !values.is_empty())?;
            Requirement::In(key.to_owned(), values.clone())
        }
        "NotIn" => {
            count("needs at least one value", !values.is_empty())?;
            Requirement::NotIn(key.to_owned(), values.clone())
        }
        "Exists" => {
            count("takes no value", values.is_empty())?;
            Requirement::Exists(key.to_owned())
        }
        "DoesNotExist" => {
            count("takes no value", values.is_empty())?;
            Requirement::DoesNotExist(key.to_owned())
        }
        "Gt" | "Lt" if allow_comparison => {
            count("needs exactly one value", values.len() == 1)?;
            let raw = values.first().cloned().unwrap_or_default();
            let bound = raw
                .parse::<i64>()
                .map_err(|_| SelectorError::NotAnInteger {
                    key: key.to_owned(),
                    operator: operator.to_owned(),
                    value: raw.clone(),
                })?;
            if operator == "Gt" {
                Requirement::Gt(key.to_owned(), bound)
            } else {
                Requirement::Lt(key.to_owned(), bound)
            }
        }
        other => {
            return Err(SelectorError::InvalidOperator {
                key: key.to_owned(),
                operator: other.to_owned(),
            });
        }
    };
    if let Requirement::In(_, vs) | Requirement::NotIn(_, vs) = &requirement {
        for value in vs {
            validate_value(key, value)?;
        }
    }
    Ok(requirement)
}

/// apimachinery's `IsQualifiedName`: `[prefix/]name`, prefix a DNS-1123 subdomain, name at most 63
/// characters of `[A-Za-z0-9_.-]` starting and ending alphanumeric.
pub fn is_qualified_name(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if prefix.is_some_and(|prefix| prefix.is_empty() || !is_dns1123_subdomain(prefix)) {
        return false;
    }
    !name.is_empty() && name.len() <= 63 && is_name_part(name)
}

/// apimachinery's `IsValidLabelValue`: empty, or at most 63 characters of `[A-Za-z0-9_.-]`
/// starting and ending alphanumeric.
pub fn is_valid_label_value(value: &str) -> bool {
    value.is_empty() || (value.len() <= 63 && is_name_part(value))
}

fn is_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|label| {
            let bytes = label.as_bytes();
            let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
            !bytes.is_empty()
                && bytes.first().is_some_and(edge)
                && bytes.last().is_some_and(edge)
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        })
}

fn validate_key(key: &str) -> Result<(), SelectorError> {
    if is_qualified_name(key) {
        Ok(())
    } else {
        Err(SelectorError::InvalidKey(key.to_owned()))
    }
}

fn validate_value(key: &str, value: &str) -> Result<(), SelectorError> {
    if is_valid_label_value(value) {
        Ok(())
    } else {
        Err(SelectorError::InvalidValue {
            key: key.to_owned(),
            value: value.to_owned(),
        })
    }
}

/// Whether `labels` match `selector`; an invalid selector matches nothing (Karmada's behaviour).
pub fn label_selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    Selector::from_label_selector(selector).is_ok_and(|s| s.matches(labels))
}

fn empty_labels() -> &'static BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    &EMPTY
}

/// The labels of a Cluster (empty when unset).
pub fn cluster_labels(cluster: &Cluster) -> &BTreeMap<String, String> {
    cluster.metadata.labels.as_ref().unwrap_or(empty_labels())
}

/// The name of a Cluster (empty when unset).
pub fn cluster_name(cluster: &Cluster) -> &str {
    cluster.metadata.name.as_deref().unwrap_or_default()
}

/// Karmada's `util.ClusterMatches`: whether a cluster is selected by an affinity. Exclusions win;
/// then the label selector, the field selector (`provider`, `region`, `zone`) and the names must all
/// match (each only when set).
pub fn cluster_matches(cluster: &Cluster, affinity: &ClusterAffinity) -> bool {
    let name = cluster_name(cluster);
    if affinity.exclude_clusters.iter().any(|c| c == name) {
        return false;
    }
    if let Some(selector) = &affinity.label_selector
        && !label_selector_matches(selector, cluster_labels(cluster))
    {
        return false;
    }
    if let Some(field_selector) = &affinity.field_selector {
        let mut other_fields = Vec::new();
        for expr in &field_selector.match_expressions {
            if expr.key == ZONE_FIELD {
                if !zones_match(expr, &cluster.spec.zones) {
                    return false;
                }
            } else {
                other_fields.push(expr.clone());
            }
        }
        if !other_fields.is_empty() {
            let Ok(selector) = Selector::from_node_selector_requirements(&other_fields) else {
                return false;
            };
            if !selector.matches(&cluster_fields(cluster)) {
                return false;
            }
        }
    }
    affinity.cluster_names.is_empty() || affinity.cluster_names.iter().any(|c| c == name)
}

/// The cluster's `provider` and `region` as a label set (empty values are left out).
fn cluster_fields(cluster: &Cluster) -> BTreeMap<String, String> {
    let mut fields = BTreeMap::new();
    if !cluster.spec.provider.is_empty() {
        fields.insert(PROVIDER_FIELD.to_owned(), cluster.spec.provider.clone());
    }
    if !cluster.spec.region.is_empty() {
        fields.insert(REGION_FIELD.to_owned(), cluster.spec.region.clone());
    }
    fields
}

/// Karmada's `matchZones`: `In` needs one overlapping zone, `NotIn` none, `Exists` some zone,
/// `DoesNotExist` no zone; any other operator never matches.
fn zones_match(expr: &NodeSelectorRequirement, zones: &[String]) -> bool {
    let values = expr.values.as_deref().unwrap_or_default();
    match expr.operator.as_str() {
        "In" => zones.iter().any(|z| values.contains(z)),
        "NotIn" => !zones.iter().any(|z| values.contains(z)),
        "Exists" => !zones.is_empty(),
        "DoesNotExist" => zones.is_empty(),
        _ => false,
    }
}

/// How specifically a resource selector matches a resource (Karmada's `ImplicitPriority`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ImplicitPriority {
    /// The selector does not match.
    Mismatch = 0,
    /// The selector has neither name nor label selector: it matches every resource of the kind.
    MatchAll = 1,
    /// The selector's label selector matches.
    MatchLabelSelector = 2,
    /// The selector's name matches.
    MatchName = 3,
}

/// The identifying parts of a resource template that selectors look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceRef<'a> {
    /// `apiVersion`, e.g. `apps/v1`.
    pub api_version: &'a str,
    /// `kind`, e.g. `Deployment`.
    pub kind: &'a str,
    /// `metadata.namespace` (empty for cluster-scoped resources).
    pub namespace: &'a str,
    /// `metadata.name`.
    pub name: &'a str,
    /// `metadata.labels`.
    pub labels: &'a BTreeMap<String, String>,
}

/// The identifying parts of a resource manifest, owned (see [`ResourceRef`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceIdentity {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels` (non-string values are ignored).
    pub labels: BTreeMap<String, String>,
}

impl ResourceIdentity {
    /// Reads the identity of a manifest; missing fields are empty.
    pub fn from_manifest(manifest: &Value) -> Self {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        let metadata = manifest.get("metadata");
        let labels = metadata
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .map(|labels| {
                labels
                    .iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            api_version: text(manifest.get("apiVersion")),
            kind: text(manifest.get("kind")),
            namespace: text(metadata.and_then(|m| m.get("namespace"))),
            name: text(metadata.and_then(|m| m.get("name"))),
            labels,
        }
    }

    /// Borrows this identity as a [`ResourceRef`].
    pub fn as_ref(&self) -> ResourceRef<'_> {
        ResourceRef {
            api_version: &self.api_version,
            kind: &self.kind,
            namespace: &self.namespace,
            name: &self.name,
            labels: &self.labels,
        }
    }
}

/// Karmada's `ResourceSelectorPriority`: how a single selector matches the resource. The API
/// version, kind and (when set) namespace must be equal; then a name matches by name only (the
/// label selector is ignored), a label selector by labels, and a selector with neither matches all.
pub fn resource_selector_priority(
    resource: ResourceRef<'_>,
    selector: &ResourceSelector,
) -> ImplicitPriority {
    if resource.api_version != selector.api_version
        || resource.kind != selector.kind
        || (!selector.namespace.is_empty() && resource.namespace != selector.namespace)
    {
        return ImplicitPriority::Mismatch;
    }
    if !selector.name.is_empty() {
        return if selector.name == resource.name {
            ImplicitPriority::MatchName
        } else {
            ImplicitPriority::Mismatch
        };
    }
    match &selector.label_selector {
        None => ImplicitPriority::MatchAll,
        Some(label_selector) if label_selector_matches(label_selector, resource.labels) => {
            ImplicitPriority::MatchLabelSelector
        }
        Some(_) => ImplicitPriority::Mismatch,
    }
}

/// Karmada's `ResourceMatchSelectorsPriority`: the best priority among the selectors.
pub fn resource_selectors_priority(
    resource: ResourceRef<'_>,
    selectors: &[ResourceSelector],
) -> ImplicitPriority {
    selectors
        .iter()
        .map(|s| resource_selector_priority(resource, s))
        .max()
        .unwrap_or(ImplicitPriority::Mismatch)
}

/// Whether any selector matches the resource (Karmada's `ResourceMatchSelectors`).
pub fn resource_matches_selectors(
    resource: ResourceRef<'_>,
    selectors: &[ResourceSelector],
) -> bool {
    resource_selectors_priority(resource, selectors) > ImplicitPriority::Mismatch
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use karmada_apis::ClusterSpec;
    use karmada_apis::policy::v1alpha1::FieldSelector;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.to_owned(),
            operator: op.to_owned(),
            values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    fn node_expr(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.to_owned(),
            operator: op.to_owned(),
            values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    fn cluster(
        name: &str,
        l: &[(&str, &str)],
        provider: &str,
        region: &str,
        zones: &[&str],
    ) -> Cluster {
        Cluster {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(labels(l)),
                ..Default::default()
            },
            spec: ClusterSpec {
                provider: provider.to_owned(),
                region: region.to_owned(),
                zones: zones.iter().map(|z| (*z).to_owned()).collect(),
                ..Default::default()
            },
            status: None,
        }
    }

    #[test]
    fn label_selector_operators() {
        let l = labels(&[("env", "prod"), ("tier", "web")]);
        let sel = |exprs: Vec<LabelSelectorRequirement>| LabelSelector {
            match_expressions: Some(exprs),
            match_labels: None,
        };
        assert!(label_selector_matches(
            &sel(vec![expr("env", "In", &["prod", "dev"])]),
            &l
        ));
        assert!(!label_selector_matches(
            &sel(vec![expr("env", "In", &["dev"])]),
            &l
        ));
        assert!(label_selector_matches(
            &sel(vec![expr("env", "NotIn", &["dev"])]),
            &l
        ));
        assert!(label_selector_matches(
            &sel(vec![expr("missing", "NotIn", &["dev"])]),
            &l
        ));
        assert!(label_selector_matches(
            &sel(vec![expr("tier", "Exists", &[])]),
            &l
        ));
        assert!(label_selector_matches(
            &sel(vec![expr("x", "DoesNotExist", &[])]),
            &l
        ));
        assert!(!label_selector_matches(
            &sel(vec![expr("tier", "DoesNotExist", &[])]),
            &l
        ));
        // Invalid selectors match nothing.
        assert!(!label_selector_matches(
            &sel(vec![expr("env", "In", &[])]),
            &l
        ));
        assert!(!label_selector_matches(
            &sel(vec![expr("env", "Gt", &["1"])]),
            &l
        ));
        assert!(!label_selector_matches(
            &sel(vec![expr("env", "Exists", &["a"])]),
            &l
        ));
        assert!(!label_selector_matches(
            &sel(vec![expr("bad key!", "Exists", &[])]),
            &l
        ));
        // Empty selector matches everything.
        assert!(label_selector_matches(&LabelSelector::default(), &l));
        let ml = LabelSelector {
            match_labels: Some(labels(&[("env", "prod")])),
            match_expressions: None,
        };
        assert!(label_selector_matches(&ml, &l));
        assert!(!label_selector_matches(&ml, &labels(&[("env", "dev")])));
    }

    #[test]
    fn qualified_names() {
        assert!(is_qualified_name("app"));
        assert!(is_qualified_name("karmada.io/managed"));
        assert!(!is_qualified_name("Karmada.io/managed"));
        assert!(!is_qualified_name("/x"));
        assert!(!is_qualified_name("-x"));
        assert!(!is_qualified_name(&"a".repeat(64)));
        assert!(is_valid_label_value(""));
        assert!(!is_valid_label_value("a b"));
    }

    #[test]
    fn cluster_affinity_rules() {
        let c = cluster("member1", &[("env", "prod")], "aws", "us-east", &["a", "b"]);
        let all = ClusterAffinity::default();
        assert!(cluster_matches(&c, &all));
        let names = ClusterAffinity {
            cluster_names: vec!["member2".into()],
            ..Default::default()
        };
        assert!(!cluster_matches(&c, &names));
        let excluded = ClusterAffinity {
            exclude_clusters: vec!["member1".into()],
            cluster_names: vec!["member1".into()],
            ..Default::default()
        };
        assert!(!cluster_matches(&c, &excluded));
        let field = |exprs: Vec<NodeSelectorRequirement>| ClusterAffinity {
            field_selector: Some(FieldSelector {
                match_expressions: exprs,
            }),
            ..Default::default()
        };
        assert!(cluster_matches(
            &c,
            &field(vec![node_expr("provider", "In", &["aws"])])
        ));
        assert!(!cluster_matches(
            &c,
            &field(vec![node_expr("provider", "NotIn", &["aws"])])
        ));
        assert!(cluster_matches(
            &c,
            &field(vec![node_expr("region", "NotIn", &["eu"])])
        ));
        assert!(cluster_matches(
            &c,
            &field(vec![node_expr("zone", "In", &["b", "z"])])
        ));
        assert!(!cluster_matches(
            &c,
            &field(vec![node_expr("zone", "NotIn", &["b"])])
        ));
        assert!(!cluster_matches(
            &c,
            &field(vec![node_expr("zone", "Bogus", &["b"])])
        ));
        let bare = cluster("member2", &[], "", "", &[]);
        assert!(!cluster_matches(
            &bare,
            &field(vec![node_expr("zone", "In", &["a"])])
        ));
        assert!(cluster_matches(
            &bare,
            &field(vec![node_expr("zone", "NotIn", &["a"])])
        ));
        assert!(!cluster_matches(
            &bare,
            &field(vec![node_expr("provider", "In", &["aws"])])
        ));
        assert!(cluster_matches(
            &bare,
            &field(vec![node_expr("provider", "NotIn", &["aws"])])
        ));
        // Invalid field selector never matches.
        assert!(!cluster_matches(
            &c,
            &field(vec![node_expr("provider", "In", &[])])
        ));
        let label = ClusterAffinity {
            label_selector: Some(LabelSelector {
                match_labels: Some(labels(&[("env", "dev")])),
                match_expressions: None,
            }),
            ..Default::default()
        };
        assert!(!cluster_matches(&c, &label));
    }

    #[test]
    fn resource_selector_priorities() {
        let l = labels(&[("app", "nginx")]);
        let r = ResourceRef {
            api_version: "apps/v1",
            kind: "Deployment",
            namespace: "default",
            name: "nginx",
            labels: &l,
        };
        let base = ResourceSelector {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            ..Default::default()
        };
        assert_eq!(
            resource_selector_priority(r, &base),
            ImplicitPriority::MatchAll
        );
        let by_name = ResourceSelector {
            name: "nginx".into(),
            label_selector: Some(LabelSelector {
                match_labels: Some(labels(&[("app", "other")])),
                match_expressions: None,
            }),
            ..base.clone()
        };
        assert_eq!(
            resource_selector_priority(r, &by_name),
            ImplicitPriority::MatchName
        );
        let by_label = ResourceSelector {
            label_selector: Some(LabelSelector {
                match_labels: Some(labels(&[("app", "nginx")])),
                match_expressions: None,
            }),
            ..base.clone()
        };
        assert_eq!(
            resource_selector_priority(r, &by_label),
            ImplicitPriority::MatchLabelSelector
        );
        let other_ns = ResourceSelector {
            namespace: "kube-system".into(),
            ..base.clone()
        };
        assert_eq!(
            resource_selector_priority(r, &other_ns),
            ImplicitPriority::Mismatch
        );
        let other_kind = ResourceSelector {
            kind: "StatefulSet".into(),
            ..base.clone()
        };
        assert_eq!(
            resource_selector_priority(r, &other_kind),
            ImplicitPriority::Mismatch
        );
        assert_eq!(
            resource_selectors_priority(r, &[base.clone(), by_label.clone(), other_kind]),
            ImplicitPriority::MatchLabelSelector
        );
        assert!(!resource_matches_selectors(r, &[]));
    }

    #[test]
    fn identity_from_manifest() {
        let m = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "ns", "labels": {"a": "b", "n": 1}}
        });
        let id = ResourceIdentity::from_manifest(&m);
        assert_eq!(id.kind, "ConfigMap");
        assert_eq!(id.namespace, "ns");
        assert_eq!(id.labels, labels(&[("a", "b")]));
    }
}
