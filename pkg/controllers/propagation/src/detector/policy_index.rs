//! Which PropagationPolicies an unclaimed template is offered: the policy cache indexed by what each
//! resource selector can select, so that a template is compared with the policies that name it or
//! select its kind by labels, not with every policy of its namespace.
//!
//! Karmada's shape of one policy per workload makes that matter: 30,000 workloads over 10
//! namespaces are 3,000 policies per namespace, and every unclaimed template (each workload's
//! ConfigMap too, which no policy selects) was compared with all of them. The caller still picks
//! the best among the candidates with the full match (API version, labels, priorities), so the
//! index only has to hold every policy that could match.

use karmada_apis::PropagationPolicy;

/// The index's name in the PropagationPolicy cache.
pub(super) const SELECTS_INDEX: &str = "detector-selects";

/// A policy's index values: `<namespace>/<kind>/<name>` for each selector naming its object,
/// `<namespace>/<kind>/` for each other one; the namespace is the selector's, else the policy's.
pub(super) fn selects(policy: &PropagationPolicy) -> Vec<String> {
    let own = policy.metadata.namespace.as_deref().unwrap_or_default();
    policy
        .spec
        .resource_selectors
        .iter()
        .map(|s| {
            let namespace = if s.namespace.is_empty() {
                own
            } else {
                s.namespace.as_str()
            };
            format!("{namespace}/{}/{}", s.kind, s.name)
        })
        .collect()
}

/// The index values under which a policy that could select the template `namespace/name` of
/// `kind` is found: one naming it, and one selecting its kind by labels or as a whole.
pub(super) fn candidate_values(namespace: &str, kind: &str, name: &str) -> [String; 2] {
    [
        format!("{namespace}/{kind}/{name}"),
        format!("{namespace}/{kind}/"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(selectors: serde_json::Value) -> PropagationPolicy {
        serde_json::from_value(json!({
            "apiVersion": "policy.karmada.io/v1alpha1",
            "kind": "PropagationPolicy",
            "metadata": {"name": "p", "namespace": "team"},
            "spec": {"resourceSelectors": selectors}
        }))
        .unwrap()
    }

    #[test]
    fn a_named_selector_is_found_under_its_template_and_others_under_their_kind() {
        let p = policy(json!([
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            {"apiVersion": "v1", "kind": "ConfigMap", "labelSelector": {"matchLabels": {"a": "b"}}},
            {"apiVersion": "v1", "kind": "Secret", "namespace": "other", "name": "s"}
        ]));
        let values = selects(&p);
        assert_eq!(
            values,
            ["team/Deployment/web", "team/ConfigMap/", "other/Secret/s"]
        );
        // The lookups of the templates each selector can select hit it.
        let hits = |ns: &str, kind: &str, name: &str| {
            candidate_values(ns, kind, name)
                .iter()
                .any(|v| values.contains(v))
        };
        assert!(hits("team", "Deployment", "web"));
        assert!(hits("team", "ConfigMap", "anything"));
        assert!(hits("other", "Secret", "s"));
        assert!(!hits("team", "Deployment", "api"));
        assert!(!hits("elsewhere", "ConfigMap", "anything"));
    }
}
