//! Claim metadata: the labels and annotations that tie a template (and its binding) to the policy
//! that propagates it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::well_known::{
    CLUSTER_PROPAGATION_POLICY_ANNOTATION, CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    PROPAGATION_POLICY_NAME_ANNOTATION, PROPAGATION_POLICY_NAMESPACE_ANNOTATION,
    PROPAGATION_POLICY_PERMANENT_ID_LABEL,
};

/// Which kind of policy a claim refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    /// A namespaced PropagationPolicy.
    PropagationPolicy,
    /// A ClusterPropagationPolicy.
    ClusterPropagationPolicy,
}

impl PolicyKind {
    /// The permanent-id label of this kind of policy.
    pub fn id_label(self) -> &'static str {
        match self {
            PolicyKind::PropagationPolicy => PROPAGATION_POLICY_PERMANENT_ID_LABEL,
            PolicyKind::ClusterPropagationPolicy => CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
        }
    }

    /// The claim annotations of this kind of policy.
    pub fn annotations(self) -> &'static [&'static str] {
        match self {
            PolicyKind::PropagationPolicy => &[
                PROPAGATION_POLICY_NAMESPACE_ANNOTATION,
                PROPAGATION_POLICY_NAME_ANNOTATION,
            ],
            PolicyKind::ClusterPropagationPolicy => &[CLUSTER_PROPAGATION_POLICY_ANNOTATION],
        }
    }
}

/// A policy that claims templates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRef {
    /// PropagationPolicy or ClusterPropagationPolicy.
    pub kind: PolicyKind,
    /// Namespace of a PropagationPolicy (empty for a ClusterPropagationPolicy).
    pub namespace: String,
    /// Name of the policy.
    pub name: String,
    /// The policy's permanent id.
    pub id: String,
}

impl std::fmt::Display for PolicyRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            PolicyKind::PropagationPolicy => write!(f, "policy({}/{})", self.namespace, self.name),
            PolicyKind::ClusterPropagationPolicy => write!(f, "cluster policy({})", self.name),
        }
    }
}

/// Adds the claim label and annotations of `policy` (Karmada's `AddPPClaimMetadata` /
/// `AddCPPClaimMetadata`).
pub fn add_claim(meta: &mut ObjectMeta, policy: &PolicyRef) {
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .insert(policy.kind.id_label().to_owned(), policy.id.clone());
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    match policy.kind {
        PolicyKind::PropagationPolicy => {
            annotations.insert(
                PROPAGATION_POLICY_NAMESPACE_ANNOTATION.to_owned(),
                policy.namespace.clone(),
            );
            annotations.insert(
                PROPAGATION_POLICY_NAME_ANNOTATION.to_owned(),
                policy.name.clone(),
            );
        }
        PolicyKind::ClusterPropagationPolicy => {
            annotations.insert(
                CLUSTER_PROPAGATION_POLICY_ANNOTATION.to_owned(),
                policy.name.clone(),
            );
        }
    }
}

/// Removes the claim label and annotations of a kind of policy. Returns true if anything changed.
pub fn remove_claim(meta: &mut ObjectMeta, kind: PolicyKind) -> bool {
    let mut changed = false;
    if let Some(labels) = meta.labels.as_mut() {
        changed |= labels.remove(kind.id_label()).is_some();
    }
    if let Some(annotations) = meta.annotations.as_mut() {
        for a in kind.annotations() {
            changed |= annotations.remove(*a).is_some();
        }
    }
    changed
}

/// Whether `meta` carries the claim label of `kind` with value `id` (Karmada's
/// `NeedCleanupClaimMetadata`: only the claimer's own metadata may be removed).
pub fn claimed_by_id(meta: &ObjectMeta, kind: PolicyKind, id: &str) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(kind.id_label()))
        .is_some_and(|v| v == id)
}

/// Whether a template is already claimed by `policy` (and, for a PropagationPolicy, carries no
/// ClusterPropagationPolicy claim that would have to be dropped).
pub fn is_claimed_by(meta: &ObjectMeta, policy: &PolicyRef) -> bool {
    let labels = meta.labels.as_ref();
    let annotations = meta.annotations.as_ref();
    let ann = |k: &str| annotations.and_then(|a| a.get(k)).map(String::as_str);
    if !claimed_by_id(meta, policy.kind, &policy.id) {
        return false;
    }
    match policy.kind {
        PolicyKind::PropagationPolicy => {
            labels.is_none_or(|l| !l.contains_key(CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL))
                && ann(PROPAGATION_POLICY_NAMESPACE_ANNOTATION) == Some(policy.namespace.as_str())
                && ann(PROPAGATION_POLICY_NAME_ANNOTATION) == Some(policy.name.as_str())
        }
        PolicyKind::ClusterPropagationPolicy => {
            ann(CLUSTER_PROPAGATION_POLICY_ANNOTATION) == Some(policy.name.as_str())
        }
    }
}

/// Claims `meta` for `policy`: a PropagationPolicy claim replaces a ClusterPropagationPolicy claim
/// (Karmada's `excludeClusterPolicy`). Returns true if anything changed.
pub fn claim(meta: &mut ObjectMeta, policy: &PolicyRef) -> bool {
    if is_claimed_by(meta, policy) {
        return false;
    }
    if policy.kind == PolicyKind::PropagationPolicy {
        remove_claim(meta, PolicyKind::ClusterPropagationPolicy);
    }
    add_claim(meta, policy);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pp() -> PolicyRef {
        PolicyRef {
            kind: PolicyKind::PropagationPolicy,
            namespace: "ns".into(),
            name: "p".into(),
            id: "id-1".into(),
        }
    }

    fn cpp() -> PolicyRef {
        PolicyRef {
            kind: PolicyKind::ClusterPropagationPolicy,
            namespace: String::new(),
            name: "c".into(),
            id: "id-2".into(),
        }
    }

    #[test]
    fn claim_adds_label_and_annotations_once() {
        let mut meta = ObjectMeta::default();
        assert!(claim(&mut meta, &pp()));
        let labels = meta.labels.clone().unwrap();
        let annotations = meta.annotations.clone().unwrap();
        assert_eq!(labels[PROPAGATION_POLICY_PERMANENT_ID_LABEL], "id-1");
        assert_eq!(annotations[PROPAGATION_POLICY_NAMESPACE_ANNOTATION], "ns");
        assert_eq!(annotations[PROPAGATION_POLICY_NAME_ANNOTATION], "p");
        assert!(!claim(&mut meta, &pp()));
    }

    #[test]
    fn propagation_policy_claim_replaces_cluster_claim() {
        let mut meta = ObjectMeta::default();
        claim(&mut meta, &cpp());
        assert!(claimed_by_id(
            &meta,
            PolicyKind::ClusterPropagationPolicy,
            "id-2"
        ));
        assert!(claim(&mut meta, &pp()));
        assert!(!claimed_by_id(
            &meta,
            PolicyKind::ClusterPropagationPolicy,
            "id-2"
        ));
        assert!(
            meta.annotations
                .as_ref()
                .unwrap()
                .get(CLUSTER_PROPAGATION_POLICY_ANNOTATION)
                .is_none()
        );
        assert!(remove_claim(&mut meta, PolicyKind::PropagationPolicy));
        assert!(meta.labels.unwrap().is_empty());
        assert!(meta.annotations.unwrap().is_empty());
    }
}
