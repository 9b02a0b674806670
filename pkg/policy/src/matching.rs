//! Which PropagationPolicy or ClusterPropagationPolicy claims a resource template (Karmada's
//! `pkg/detector/compare.go`, `policy.go` and `preemption.go`).
//!
//! Order of choice: a template already claimed (claim label + annotations present) stays with its
//! PropagationPolicy, else with its ClusterPropagationPolicy; an unclaimed namespaced template is
//! matched against the PropagationPolicies of its namespace first and only then against the
//! ClusterPropagationPolicies. Among matching policies the highest explicit `spec.priority` wins,
//! then the most specific selector (name 3 > label selector 2 > match-all 1), then the
//! lexicographically smaller name. Policies being deleted never match.

use std::collections::BTreeMap;

use karmada_apis::policy::v1alpha1::{PreemptionBehavior, PropagationSpec, ResourceSelector};
use karmada_apis::well_known::{
    CLUSTER_PROPAGATION_POLICY_ANNOTATION, CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    PROPAGATION_POLICY_NAME_ANNOTATION, PROPAGATION_POLICY_NAMESPACE_ANNOTATION,
    PROPAGATION_POLICY_PERMANENT_ID_LABEL,
};
use karmada_apis::{ClusterPropagationPolicy, PropagationPolicy};

use crate::selector::{ImplicitPriority, ResourceRef, resource_selectors_priority};

/// A template's existing claim, read from its labels and annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Claimed by the PropagationPolicy `namespace/name` with permanent id `id`.
    PropagationPolicy {
        /// The policy's namespace.
        namespace: String,
        /// The policy's name.
        name: String,
        /// The policy's permanent id (label value).
        id: String,
    },
    /// Claimed by the ClusterPropagationPolicy `name` with permanent id `id`.
    ClusterPropagationPolicy {
        /// The policy's name.
        name: String,
        /// The policy's permanent id (label value).
        id: String,
    },
}

/// Reads a template's claim as Karmada's detector does: a PropagationPolicy claim needs the
/// namespace and name annotations and the permanent-id label, all non-empty, and is checked first;
/// a ClusterPropagationPolicy claim needs the name annotation and the permanent-id label.
pub fn read_claim(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Option<Claim> {
    let get =
        |map: &BTreeMap<String, String>, key: &str| map.get(key).filter(|v| !v.is_empty()).cloned();
    if let (Some(namespace), Some(name), Some(id)) = (
        get(annotations, PROPAGATION_POLICY_NAMESPACE_ANNOTATION),
        get(annotations, PROPAGATION_POLICY_NAME_ANNOTATION),
        get(labels, PROPAGATION_POLICY_PERMANENT_ID_LABEL),
    ) {
        return Some(Claim::PropagationPolicy {
            namespace,
            name,
            id,
        });
    }
    if let (Some(name), Some(id)) = (
        get(annotations, CLUSTER_PROPAGATION_POLICY_ANNOTATION),
        get(labels, CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL),
    ) {
        return Some(Claim::ClusterPropagationPolicy { name, id });
    }
    None
}

/// What the detector should do with a template.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PolicyChoice<'a> {
    /// The template is claimed: re-apply the claiming policy (the detector fetches it by name and
    /// cleans the claim up if it is gone).
    Claimed(&'a Claim),
    /// No claim; this PropagationPolicy matches best.
    PropagationPolicy(&'a PropagationPolicy),
    /// No claim and no PropagationPolicy matches; this ClusterPropagationPolicy matches best.
    ClusterPropagationPolicy(&'a ClusterPropagationPolicy),
    /// Nothing matches: the template waits for a policy.
    None,
}

/// Karmada's `propagateResource` decision without the I/O. `propagation_policies` may contain
/// policies of any namespace; only those in the template's namespace are considered (and none for a
/// cluster-scoped template).
pub fn choose_policy<'a>(
    resource: ResourceRef<'_>,
    claim: Option<&'a Claim>,
    propagation_policies: &'a [PropagationPolicy],
    cluster_propagation_policies: &'a [ClusterPropagationPolicy],
) -> PolicyChoice<'a> {
    if let Some(claim) = claim {
        return PolicyChoice::Claimed(claim);
    }
    if let Some(policy) = best_propagation_policy(resource, propagation_policies) {
        return PolicyChoice::PropagationPolicy(policy);
    }
    if let Some(policy) = best_cluster_propagation_policy(resource, cluster_propagation_policies) {
        return PolicyChoice::ClusterPropagationPolicy(policy);
    }
    PolicyChoice::None
}

/// Resource selectors of a namespaced policy with Karmada's webhook default applied: an empty
/// selector namespace means the policy's own namespace.
pub fn defaulted_selectors(
    selectors: &[ResourceSelector],
    policy_namespace: &str,
) -> Vec<ResourceSelector> {
    selectors
        .iter()
        .map(|s| {
            let mut s = s.clone();
            if s.namespace.is_empty() {
                s.namespace = policy_namespace.to_owned();
            }
            s
        })
        .collect()
}

/// Whether a policy's bindings propagate dependencies: `propagateDeps`, or forced when a selector
/// selects `multicluster.x-k8s.io/v1alpha1` ServiceImport. Karmada's mutating webhook writes
/// `propagateDeps: true` into such a policy (a ServiceImport is useless without its derived
/// Service and EndpointSlices); here the policy is left as written and the bindings get it.
pub fn propagates_dependencies(spec: &PropagationSpec) -> bool {
    spec.propagate_deps || selects_service_import(&spec.resource_selectors)
}

/// Karmada's `ContainsServiceImport`: a selector of kind ServiceImport in the MCS API's version.
pub fn selects_service_import(selectors: &[ResourceSelector]) -> bool {
    use karmada_apis::multicluster::v1alpha1::{API_VERSION, SERVICE_IMPORT_KIND};
    selectors
        .iter()
        .any(|s| s.kind == SERVICE_IMPORT_KIND && s.api_version == API_VERSION)
}

/// Karmada's `getHighestPriorityPropagationPolicy` over the PropagationPolicies in the template's
/// namespace that are not being deleted. `None` for cluster-scoped templates.
pub fn best_propagation_policy<'a>(
    resource: ResourceRef<'_>,
    policies: impl IntoIterator<Item = &'a PropagationPolicy>,
) -> Option<&'a PropagationPolicy> {
    if resource.namespace.is_empty() {
        return None;
    }
    let candidates = policies.into_iter().filter(|p| {
        p.metadata.deletion_timestamp.is_none()
            && p.metadata.namespace.as_deref() == Some(resource.namespace)
    });
    // The selectors as written: defaulting an empty selector namespace to the policy's (Karmada's
    // webhook) changes nothing here, where the policy's namespace is the template's, and would
    // clone every selector of every candidate.
    best_by_priority(candidates.map(|p| {
        (
            p,
            p.spec.explicit_priority(),
            resource_selectors_priority(resource, &p.spec.resource_selectors),
            p.metadata.name.as_deref().unwrap_or_default(),
        )
    }))
}

/// Karmada's `getHighestPriorityClusterPropagationPolicy` over the ClusterPropagationPolicies that
/// are not being deleted.
pub fn best_cluster_propagation_policy<'a>(
    resource: ResourceRef<'_>,
    policies: impl IntoIterator<Item = &'a ClusterPropagationPolicy>,
) -> Option<&'a ClusterPropagationPolicy> {
    let candidates = policies
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none());
    best_by_priority(candidates.map(|p| {
        (
            p,
            p.spec.explicit_priority(),
            resource_selectors_priority(resource, &p.spec.resource_selectors),
            p.metadata.name.as_deref().unwrap_or_default(),
        )
    }))
}

/// Picks the highest explicit priority, then the highest implicit priority, then the smaller name.
fn best_by_priority<'a, 'n, T>(
    candidates: impl Iterator<Item = (&'a T, i32, ImplicitPriority, &'n str)>,
) -> Option<&'a T> {
    let mut best: Option<(&'a T, i32, ImplicitPriority, &'n str)> = None;
    for candidate in candidates {
        let (_, explicit, implicit, name) = candidate;
        if implicit == ImplicitPriority::Mismatch {
            continue;
        }
        best = match best {
            None => Some(candidate),
            Some(current) => {
                let (_, best_explicit, best_implicit, best_name) = current;
                let better = explicit > best_explicit
                    || (explicit == best_explicit
                        && (implicit > best_implicit
                            || (implicit == best_implicit && name < best_name)));
                if better {
                    Some(candidate)
                } else {
                    Some(current)
                }
            }
        };
    }
    best.map(|(policy, ..)| policy)
}

/// Whether preemption is in effect for a policy: `preemption: Always` and the
/// `PropagationPolicyPreemption` feature gate enabled.
pub fn preemption_enabled(preemption: &PreemptionBehavior, gate_enabled: bool) -> bool {
    gate_enabled && *preemption == PreemptionBehavior::Always
}

/// Whether a PropagationPolicy with `preemption: Always` takes a template from its current
/// claimer (Karmada's rule: a higher-priority PropagationPolicy preempts a lower-priority one, and
/// any ClusterPropagationPolicy). `claimed_priority` is the explicit priority of the claiming
/// PropagationPolicy; `None` when a ClusterPropagationPolicy claims the template. A template already
/// claimed by the preemptor itself is not preempted.
pub fn propagation_policy_preempts(
    preemptor: &PropagationPolicy,
    claim: &Claim,
    claimed_priority: Option<i32>,
) -> bool {
    match claim {
        Claim::PropagationPolicy {
            namespace, name, ..
        } => {
            let itself = preemptor.metadata.namespace.as_deref() == Some(namespace.as_str())
                && preemptor.metadata.name.as_deref() == Some(name.as_str());
            !itself && claimed_priority.is_some_and(|p| preemptor.spec.explicit_priority() > p)
        }
        Claim::ClusterPropagationPolicy { .. } => true,
    }
}

/// Whether a ClusterPropagationPolicy with `preemption: Always` takes a template: only from a
/// lower-priority ClusterPropagationPolicy, never from a PropagationPolicy.
pub fn cluster_propagation_policy_preempts(
    preemptor: &ClusterPropagationPolicy,
    claim: &Claim,
    claimed_priority: i32,
) -> bool {
    match claim {
        Claim::PropagationPolicy { .. } => false,
        Claim::ClusterPropagationPolicy { name, .. } => {
            preemptor.metadata.name.as_deref() != Some(name.as_str())
                && preemptor.spec.explicit_priority() > claimed_priority
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
    use karmada_apis::PropagationSpec;

    fn selector(name: &str, label: Option<(&str, &str)>) -> ResourceSelector {
        ResourceSelector {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: name.into(),
            label_selector: label.map(|(k, v)| LabelSelector {
                match_labels: Some([(k.to_owned(), v.to_owned())].into()),
                match_expressions: None,
            }),
            ..Default::default()
        }
    }

    fn pp(ns: &str, name: &str, priority: i32, sel: ResourceSelector) -> PropagationPolicy {
        PropagationPolicy {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            spec: PropagationSpec {
                resource_selectors: vec![sel],
                priority: Some(priority),
                ..Default::default()
            },
        }
    }

    fn cpp(name: &str, priority: i32, sel: ResourceSelector) -> ClusterPropagationPolicy {
        ClusterPropagationPolicy::new(
            name,
            PropagationSpec {
                resource_selectors: vec![sel],
                priority: Some(priority),
                ..Default::default()
            },
        )
    }

    fn nginx_labels() -> BTreeMap<String, String> {
        [("app".to_owned(), "nginx".to_owned())].into()
    }

    fn nginx(labels: &BTreeMap<String, String>) -> ResourceRef<'_> {
        ResourceRef {
            api_version: "apps/v1",
            kind: "Deployment",
            namespace: "default",
            name: "nginx",
            labels,
        }
    }

    fn name_of(p: Option<&PropagationPolicy>) -> Option<&str> {
        p.and_then(|p| p.metadata.name.as_deref())
    }

    #[test]
    fn explicit_priority_wins() {
        let l = nginx_labels();
        let ps = vec![
            pp("default", "by-name", 0, selector("nginx", None)),
            pp("default", "all-high", 5, selector("", None)),
        ];
        assert_eq!(
            name_of(best_propagation_policy(nginx(&l), &ps)),
            Some("all-high")
        );
    }

    #[test]
    fn implicit_priority_then_name() {
        let l = nginx_labels();
        let ps = vec![
            pp("default", "a-all", 0, selector("", None)),
            pp(
                "default",
                "z-label",
                0,
                selector("", Some(("app", "nginx"))),
            ),
            pp("default", "y-name", 0, selector("nginx", None)),
            pp("default", "b-name", 0, selector("nginx", None)),
        ];
        assert_eq!(
            name_of(best_propagation_policy(nginx(&l), &ps)),
            Some("b-name")
        );
        let ps = vec![
            pp("default", "a-all", 0, selector("", None)),
            pp(
                "default",
                "z-label",
                0,
                selector("", Some(("app", "nginx"))),
            ),
        ];
        assert_eq!(
            name_of(best_propagation_policy(nginx(&l), &ps)),
            Some("z-label")
        );
        let ps = vec![
            pp("default", "b", 0, selector("", None)),
            pp("default", "a", 0, selector("", None)),
        ];
        assert_eq!(name_of(best_propagation_policy(nginx(&l), &ps)), Some("a"));
    }

    #[test]
    fn deleting_and_foreign_policies_ignored() {
        let l = nginx_labels();
        let mut deleting = pp("default", "a", 10, selector("nginx", None));
        deleting.metadata.deletion_timestamp = Some(Time(Default::default()));
        let other_ns = pp("other", "b", 10, selector("nginx", None));
        let explicit_ns = pp(
            "default",
            "c",
            0,
            ResourceSelector {
                namespace: "other".into(),
                ..selector("nginx", None)
            },
        );
        let ok = pp("default", "z", 0, selector("", None));
        let ps = vec![deleting, other_ns, explicit_ns, ok];
        assert_eq!(name_of(best_propagation_policy(nginx(&l), &ps)), Some("z"));
        // Cluster-scoped templates never match PropagationPolicies.
        let cluster_scoped = ResourceRef {
            namespace: "",
            ..nginx(&l)
        };
        assert!(best_propagation_policy(cluster_scoped, &ps).is_none());
    }

    #[test]
    fn pp_before_cpp_and_claims() {
        let l = nginx_labels();
        let ps = vec![pp("default", "low", -5, selector("", None))];
        let cs = vec![cpp("high", 100, selector("nginx", None))];
        match choose_policy(nginx(&l), None, &ps, &cs) {
            PolicyChoice::PropagationPolicy(p) => {
                assert_eq!(p.metadata.name.as_deref(), Some("low"));
            }
            other => panic!("unexpected {other:?}"),
        }
        match choose_policy(nginx(&l), None, &[], &cs) {
            PolicyChoice::ClusterPropagationPolicy(p) => {
                assert_eq!(p.metadata.name.as_deref(), Some("high"));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(choose_policy(nginx(&l), None, &[], &[]), PolicyChoice::None);

        let labels: BTreeMap<String, String> = [
            (
                PROPAGATION_POLICY_PERMANENT_ID_LABEL.to_owned(),
                "id1".to_owned(),
            ),
            (
                CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL.to_owned(),
                "id2".to_owned(),
            ),
        ]
        .into();
        let annotations: BTreeMap<String, String> = [
            (
                PROPAGATION_POLICY_NAMESPACE_ANNOTATION.to_owned(),
                "default".to_owned(),
            ),
            (
                PROPAGATION_POLICY_NAME_ANNOTATION.to_owned(),
                "low".to_owned(),
            ),
            (
                CLUSTER_PROPAGATION_POLICY_ANNOTATION.to_owned(),
                "high".to_owned(),
            ),
        ]
        .into();
        let claim = read_claim(&labels, &annotations);
        assert_eq!(
            claim,
            Some(Claim::PropagationPolicy {
                namespace: "default".into(),
                name: "low".into(),
                id: "id1".into()
            })
        );
        let mut partial = annotations.clone();
        partial.remove(PROPAGATION_POLICY_NAMESPACE_ANNOTATION);
        assert_eq!(
            read_claim(&labels, &partial),
            Some(Claim::ClusterPropagationPolicy {
                name: "high".into(),
                id: "id2".into()
            })
        );
        assert_eq!(read_claim(&BTreeMap::new(), &annotations), None);
        let claim = claim.unwrap_or_else(|| unreachable!());
        assert!(matches!(
            choose_policy(nginx(&l), Some(&claim), &ps, &cs),
            PolicyChoice::Claimed(_)
        ));
    }

    #[test]
    fn cpp_choice_order() {
        let l = nginx_labels();
        let cs = vec![
            cpp("b", 1, selector("", None)),
            cpp("a", 1, selector("", None)),
            cpp("c", 0, selector("nginx", None)),
        ];
        let best = best_cluster_propagation_policy(nginx(&l), &cs);
        assert_eq!(best.and_then(|p| p.metadata.name.as_deref()), Some("a"));
    }

    #[test]
    fn preemption_rules() {
        let high = pp("default", "high", 10, selector("nginx", None));
        let pp_claim = Claim::PropagationPolicy {
            namespace: "default".into(),
            name: "low".into(),
            id: "x".into(),
        };
        let cpp_claim = Claim::ClusterPropagationPolicy {
            name: "c".into(),
            id: "y".into(),
        };
        assert!(propagation_policy_preempts(&high, &pp_claim, Some(5)));
        assert!(!propagation_policy_preempts(&high, &pp_claim, Some(10)));
        assert!(propagation_policy_preempts(&high, &cpp_claim, None));
        let own = Claim::PropagationPolicy {
            namespace: "default".into(),
            name: "high".into(),
            id: "x".into(),
        };
        assert!(!propagation_policy_preempts(&high, &own, Some(0)));
        let c = cpp("d", 3, selector("nginx", None));
        assert!(cluster_propagation_policy_preempts(&c, &cpp_claim, 2));
        assert!(!cluster_propagation_policy_preempts(&c, &cpp_claim, 3));
        assert!(!cluster_propagation_policy_preempts(&c, &pp_claim, -100));
        assert!(preemption_enabled(&PreemptionBehavior::Always, true));
        assert!(!preemption_enabled(&PreemptionBehavior::Always, false));
        assert!(!preemption_enabled(&PreemptionBehavior::Never, true));
    }

    #[test]
    fn a_service_import_selector_forces_propagate_deps() {
        let import = |api_version: &str| ResourceSelector {
            api_version: api_version.into(),
            kind: "ServiceImport".into(),
            name: "web".into(),
            ..Default::default()
        };
        let spec = |propagate_deps, selectors| PropagationSpec {
            propagate_deps,
            resource_selectors: selectors,
            ..Default::default()
        };
        let mcs = import("multicluster.x-k8s.io/v1alpha1");
        assert!(propagates_dependencies(&spec(
            false,
            vec![selector("a", None), mcs.clone()]
        )));
        assert!(propagates_dependencies(&spec(
            true,
            vec![selector("a", None)]
        )));
        assert!(!propagates_dependencies(&spec(
            false,
            vec![selector("a", None)]
        )));
        // Another version of the kind is not the MCS API's: Karmada compares the apiVersion.
        assert!(!propagates_dependencies(&spec(
            false,
            vec![import("multicluster.x-k8s.io/v1beta1")]
        )));
    }
}
