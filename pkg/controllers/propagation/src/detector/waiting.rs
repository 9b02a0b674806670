//! Karmada's waiting list: the templates no policy matched, indexed by group, kind, namespace and
//! name so that a policy looks only at the templates its selectors could select.
//!
//! Every policy reconcile offers the waiting templates to the policy. Scanning the whole list made
//! a start over N policies and N templates quadratic, each step decoding a template from its
//! cache: with 1,000 workloads and their policies, that scan was a third of the controller-manager's
//! CPU. A selector names its kind and usually its namespace and name, so the candidates are a
//! lookup; the caller still checks each candidate against the full selector (labels included).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use apimachinery::split_api_version;
use karmada_apis::policy::v1alpha1::ResourceSelector;

use super::TemplateRef;

/// Names by namespace, of one kind.
type Namespaces = BTreeMap<String, BTreeSet<String>>;

/// The templates waiting for a policy.
#[derive(Default)]
pub(crate) struct Waiting {
    /// group → kind → namespace → names (nested so that lookups borrow, never allocate: the
    /// template handler removes every template it reconciles).
    by_group: HashMap<String, HashMap<String, Namespaces>>,
}

impl Waiting {
    /// Adds `t`; false when it was already waiting.
    pub(crate) fn insert(&mut self, t: TemplateRef) -> bool {
        self.by_group
            .entry(t.group)
            .or_default()
            .entry(t.kind)
            .or_default()
            .entry(t.namespace)
            .or_default()
            .insert(t.name)
    }

    /// Removes `t`; false when it was not waiting. Emptied maps are dropped.
    pub(crate) fn remove(&mut self, t: &TemplateRef) -> bool {
        let Some(kinds) = self.by_group.get_mut(&t.group) else {
            return false;
        };
        let Some(namespaces) = kinds.get_mut(&t.kind) else {
            return false;
        };
        let Some(names) = namespaces.get_mut(&t.namespace) else {
            return false;
        };
        let removed = names.remove(&t.name);
        if names.is_empty() {
            namespaces.remove(&t.namespace);
            if namespaces.is_empty() {
                kinds.remove(&t.kind);
                if kinds.is_empty() {
                    self.by_group.remove(&t.group);
                }
            }
        }
        removed
    }

    /// Whether `t` is waiting.
    pub(crate) fn contains(&self, t: &TemplateRef) -> bool {
        self.namespaces(&t.group, &t.kind)
            .and_then(|n| n.get(&t.namespace))
            .is_some_and(|names| names.contains(&t.name))
    }

    /// The waiting templates of one kind, by namespace.
    fn namespaces(&self, group: &str, kind: &str) -> Option<&Namespaces> {
        self.by_group.get(group).and_then(|kinds| kinds.get(kind))
    }

    /// Every waiting template, sorted.
    pub(crate) fn all(&self) -> Vec<TemplateRef> {
        let mut all: Vec<TemplateRef> = self
            .by_group
            .iter()
            .flat_map(|(group, kinds)| kinds.iter().map(move |(kind, n)| (group, kind, n)))
            .flat_map(|(group, kind, namespaces)| {
                namespaces.iter().flat_map(move |(namespace, names)| {
                    names.iter().map(move |name| TemplateRef {
                        group: group.clone(),
                        kind: kind.clone(),
                        namespace: namespace.clone(),
                        name: name.clone(),
                    })
                })
            })
            .collect();
        all.sort();
        all
    }

    /// The waiting templates some selector of `selectors` could select by group, kind, namespace
    /// and name (an empty namespace or name in a selector matches any), each once, sorted. Versions
    /// and label selectors are left to the caller.
    pub(crate) fn candidates(&self, selectors: &[ResourceSelector]) -> Vec<TemplateRef> {
        let mut out = BTreeSet::new();
        for s in selectors {
            let (group, _) = split_api_version(&s.api_version);
            let Some(namespaces) = self.namespaces(group, &s.kind) else {
                continue;
            };
            let in_scope: Box<dyn Iterator<Item = (&String, &BTreeSet<String>)>> =
                if s.namespace.is_empty() {
                    Box::new(namespaces.iter())
                } else {
                    Box::new(namespaces.get_key_value(&s.namespace).into_iter())
                };
            for (namespace, names) in in_scope {
                let template = |name: &String| TemplateRef {
                    group: group.to_owned(),
                    kind: s.kind.clone(),
                    namespace: namespace.clone(),
                    name: name.clone(),
                };
                if s.name.is_empty() {
                    out.extend(names.iter().map(template));
                } else if let Some(name) = names.get(&s.name) {
                    out.insert(template(name));
                }
            }
        }
        out.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(group: &str, kind: &str, namespace: &str, name: &str) -> TemplateRef {
        TemplateRef {
            group: group.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn selector(api_version: &str, kind: &str, namespace: &str, name: &str) -> ResourceSelector {
        ResourceSelector {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    fn waiting() -> Waiting {
        let mut w = Waiting::default();
        for x in [
            t("apps", "Deployment", "a", "web"),
            t("apps", "Deployment", "a", "api"),
            t("apps", "Deployment", "b", "web"),
            t("", "ConfigMap", "a", "web"),
            t("rbac.authorization.k8s.io", "ClusterRole", "", "reader"),
        ] {
            assert!(w.insert(x));
        }
        w
    }

    #[test]
    fn a_named_selector_finds_its_template_alone() {
        let w = waiting();
        assert_eq!(
            w.candidates(&[selector("apps/v1", "Deployment", "a", "web")]),
            vec![t("apps", "Deployment", "a", "web")]
        );
        assert!(
            w.candidates(&[selector("apps/v1", "Deployment", "c", "web")])
                .is_empty()
        );
        assert!(
            w.candidates(&[selector("batch/v1", "Deployment", "a", "web")])
                .is_empty()
        );
    }

    #[test]
    fn empty_namespace_or_name_match_any_and_results_are_unique() {
        let w = waiting();
        assert_eq!(
            w.candidates(&[
                selector("apps/v1", "Deployment", "", "web"),
                selector("apps/v1", "Deployment", "a", ""),
            ]),
            vec![
                t("apps", "Deployment", "a", "api"),
                t("apps", "Deployment", "a", "web"),
                t("apps", "Deployment", "b", "web"),
            ]
        );
        assert_eq!(
            w.candidates(&[selector("v1", "ConfigMap", "", "")]),
            vec![t("", "ConfigMap", "a", "web")]
        );
        assert_eq!(
            w.candidates(&[selector(
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                "",
                ""
            )]),
            vec![t("rbac.authorization.k8s.io", "ClusterRole", "", "reader")]
        );
    }

    #[test]
    fn insert_remove_contains_and_all() {
        let mut w = waiting();
        let web = t("apps", "Deployment", "a", "web");
        assert!(!w.insert(web.clone()));
        assert!(w.contains(&web));
        assert!(w.remove(&web));
        assert!(!w.remove(&web));
        assert!(!w.contains(&web));
        assert_eq!(w.all().len(), 4);
        for x in w.all() {
            assert!(w.remove(&x));
        }
        assert!(w.by_group.is_empty(), "empty maps are dropped");
        assert!(w.all().is_empty());
    }
}
