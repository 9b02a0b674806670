//! Who may reach a cluster through Karmada's proxies, and the impersonation RBAC that follows, without
//! I/O.
//!
//! A control-plane ClusterRole grants cluster access when one of its rules covers `clusters/proxy`
//! in `cluster.karmada.io` for that cluster (no `resourceNames` means every cluster) or
//! `proxying/proxy` in `search.karmada.io` (every cluster). The subjects of the ClusterRoleBindings
//! to such roles may be impersonated in the member by Karmada's impersonator ServiceAccount: the
//! member gets a ClusterRole `karmada-impersonator` allowing `impersonate` on exactly those users,
//! ServiceAccounts and groups, bound to that ServiceAccount.

use std::collections::BTreeSet;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::well_known::{
    IMPERSONATOR_SERVICE_ACCOUNT, KARMADA_SYSTEM_LABEL, KARMADA_SYSTEM_LABEL_VALUE,
};

/// Name of the ClusterRole and ClusterRoleBinding written to members.
pub const IMPERSONATOR_NAME: &str = "karmada-impersonator";
/// The API group of Karmada's Cluster objects.
const CLUSTER_API_GROUP: &str = "cluster.karmada.io";
/// The cluster proxy subresource.
const CLUSTER_PROXY_RESOURCE: &str = "clusters/proxy";
/// The API group of karmada-search.
const SEARCH_API_GROUP: &str = "search.karmada.io";
/// karmada-search's proxying subresource.
const PROXYING_PROXY_RESOURCE: &str = "proxying/proxy";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Which clusters a ClusterRole opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// None.
    Nothing,
    /// Every cluster.
    All,
    /// These clusters.
    Named(BTreeSet<String>),
}

fn any_or(values: &[String], wanted: &str) -> bool {
    values.iter().any(|v| v == "*" || v == wanted)
}

fn covers(rule: &PolicyRule, group: &str, resource: &str) -> bool {
    rule.api_groups
        .as_deref()
        .is_some_and(|groups| any_or(groups, group))
        && rule
            .resources
            .as_deref()
            .is_some_and(|resources| any_or(resources, resource))
}

/// The clusters `role` opens (Karmada's mapping of a ClusterRole event to Cluster requests).
pub fn reach(role: &ClusterRole) -> Reach {
    let mut named = BTreeSet::new();
    for rule in role.rules.iter().flatten() {
        if covers(rule, CLUSTER_API_GROUP, CLUSTER_PROXY_RESOURCE) {
            match rule.resource_names.as_deref() {
                None | Some([]) => return Reach::All,
                Some(names) => named.extend(names.iter().cloned()),
            }
        }
        if covers(rule, SEARCH_API_GROUP, PROXYING_PROXY_RESOURCE) {
            return Reach::All;
        }
    }
    if named.is_empty() {
        Reach::Nothing
    } else {
        Reach::Named(named)
    }
}

/// Whether `role` opens the cluster called `cluster`.
pub fn opens(role: &ClusterRole, cluster: &str) -> bool {
    role.rules.iter().flatten().any(|rule| {
        (covers(rule, CLUSTER_API_GROUP, CLUSTER_PROXY_RESOURCE)
            && rule
                .resource_names
                .as_deref()
                .is_none_or(|names| names.is_empty() || names.iter().any(|n| n == cluster)))
            || covers(rule, SEARCH_API_GROUP, PROXYING_PROXY_RESOURCE)
    })
}

/// The subjects of `bindings` to any of the ClusterRoles named in `roles`.
pub fn subjects<'a>(
    roles: &BTreeSet<String>,
    bindings: impl IntoIterator<Item = &'a ClusterRoleBinding>,
) -> Vec<Subject> {
    bindings
        .into_iter()
        .filter(|b| b.role_ref.kind == "ClusterRole" && roles.contains(&b.role_ref.name))
        .flat_map(|b| b.subjects.iter().flatten().cloned())
        .collect()
}

/// The `impersonate` rules for `subjects`: one rule per subject kind present (users, service
/// accounts, groups, in that order), names sorted and unique. Empty when there are no subjects.
pub fn impersonation_rules(subjects: &[Subject]) -> Vec<PolicyRule> {
    let names = |kind: &str| -> BTreeSet<String> {
        subjects
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.name.clone())
            .collect()
    };
    [
        ("User", "users"),
        ("ServiceAccount", "serviceaccounts"),
        ("Group", "groups"),
    ]
    .into_iter()
    .filter_map(|(kind, resource)| {
        let names = names(kind);
        (!names.is_empty()).then(|| PolicyRule {
            verbs: vec!["impersonate".to_owned()],
            api_groups: Some(vec![String::new()]),
            resources: Some(vec![resource.to_owned()]),
            resource_names: Some(names.into_iter().collect()),
            non_resource_urls: None,
        })
    })
    .collect()
}

fn system_meta() -> ObjectMeta {
    ObjectMeta {
        name: Some(IMPERSONATOR_NAME.to_owned()),
        labels: Some(
            [(
                KARMADA_SYSTEM_LABEL.to_owned(),
                KARMADA_SYSTEM_LABEL_VALUE.to_owned(),
            )]
            .into(),
        ),
        ..Default::default()
    }
}

/// The member ClusterRole allowing `rules`.
pub fn impersonator_role(rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: system_meta(),
        rules: Some(rules),
        aggregation_rule: None,
    }
}

/// The member ClusterRoleBinding of [`impersonator_role`] to the impersonator ServiceAccount
/// `karmada-impersonator` in `namespace` (the namespace of the Cluster's `impersonatorSecretRef`).
pub fn impersonator_binding(namespace: &str) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: system_meta(),
        role_ref: RoleRef {
            api_group: Some(RBAC_GROUP.to_owned()),
            kind: "ClusterRole".to_owned(),
            name: IMPERSONATOR_NAME.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            namespace: Some(namespace.to_owned()),
            name: IMPERSONATOR_SERVICE_ACCOUNT.to_owned(),
            api_group: None,
        }]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(groups: &[&str], resources: &[&str], names: Option<&[&str]>) -> PolicyRule {
        let v = |s: &[&str]| s.iter().map(ToString::to_string).collect::<Vec<_>>();
        PolicyRule {
            verbs: vec!["*".into()],
            api_groups: Some(v(groups)),
            resources: Some(v(resources)),
            resource_names: names.map(v),
            non_resource_urls: None,
        }
    }

    fn role(rules: Vec<PolicyRule>) -> ClusterRole {
        ClusterRole {
            metadata: ObjectMeta {
                name: Some("r".into()),
                ..Default::default()
            },
            rules: Some(rules),
            aggregation_rule: None,
        }
    }

    fn subject(kind: &str, name: &str) -> Subject {
        Subject {
            kind: kind.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn proxy_rules_open_clusters() {
        let named = role(vec![rule(
            &["cluster.karmada.io"],
            &["clusters/proxy"],
            Some(&["member1", "member2"]),
        )]);
        assert_eq!(
            reach(&named),
            Reach::Named(["member1".to_owned(), "member2".to_owned()].into())
        );
        assert!(opens(&named, "member1") && !opens(&named, "member3"));
        let all = role(vec![rule(&["*"], &["clusters/proxy"], None)]);
        assert_eq!(reach(&all), Reach::All);
        assert!(opens(&all, "anything"));
        let search = role(vec![rule(&["search.karmada.io"], &["*"], None)]);
        assert_eq!(reach(&search), Reach::All);
        assert!(opens(&search, "member9"));
        let other = role(vec![
            rule(&["cluster.karmada.io"], &["clusters"], None),
            rule(&[""], &["clusters/proxy"], None),
        ]);
        assert_eq!(reach(&other), Reach::Nothing);
        assert!(!opens(&other, "member1"));
    }

    #[test]
    fn impersonation_rules_group_sorted_unique_names_by_kind() {
        let rules = impersonation_rules(&[
            subject("Group", "devs"),
            subject("User", "bob"),
            subject("User", "alice"),
            subject("User", "bob"),
            subject("ServiceAccount", "ci"),
        ]);
        let names: Vec<(String, Vec<String>)> = rules
            .iter()
            .map(|r| {
                (
                    r.resources.clone().unwrap_or_default().join(","),
                    r.resource_names.clone().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![
                ("users".into(), vec!["alice".into(), "bob".into()]),
                ("serviceaccounts".into(), vec!["ci".into()]),
                ("groups".into(), vec!["devs".into()]),
            ]
        );
        assert!(rules.iter().all(|r| r.verbs == ["impersonate"]));
        assert!(impersonation_rules(&[]).is_empty());
    }

    #[test]
    fn only_bindings_to_matched_cluster_roles_count() {
        let binding = |role_kind: &str, role: &str, who: &str| ClusterRoleBinding {
            metadata: ObjectMeta::default(),
            role_ref: RoleRef {
                api_group: Some(RBAC_GROUP.into()),
                kind: role_kind.into(),
                name: role.into(),
            },
            subjects: Some(vec![subject("User", who)]),
        };
        let bindings = [
            binding("ClusterRole", "proxy", "alice"),
            binding("ClusterRole", "other", "bob"),
            binding("Role", "proxy", "carol"),
        ];
        let got = subjects(&["proxy".to_owned()].into(), &bindings);
        assert_eq!(got, vec![subject("User", "alice")]);
    }
}
