//! Indexes on the ResourceBinding cache that answer the distributor's two lookups without a scan
//! of the namespace: which bindings depend on an object that changed, and which attached bindings
//! a requirer is recorded in. A scan costs one decoded binding per binding in the namespace for
//! every dependency event and every distribution: at thousands of bindings per namespace (a start
//! or restart over tens of thousands of workloads) that was the distributor's main cost, growing
//! with the square of the workloads.
//!
//! Both are pure functions of one binding, computed when the cache stores it, so a lookup costs
//! only the bindings it returns; callers still check each with [`super::attached::satisfies`] (a
//! selector bucket holds every binding selecting that kind) or by the depended-by label's value.

use karmada_apis::ResourceBinding;
use karmada_interpreter::DependentObjectReference;

use super::attached::{Candidate, DEPENDED_BY_LABEL_PREFIX, recorded_dependencies};

/// Index of the bindings by what their dependencies name or select ([`dependency_values`]).
pub const DEPENDENCIES_INDEX: &str = "dependencies";

/// Index of the attached bindings by their depended-by label keys ([`depended_by_values`]).
pub const DEPENDED_BY_INDEX: &str = "depended-by";

/// One index value: the object a dependency names (`name` non-empty) or, with an empty `name`,
/// every object of that kind in that namespace (a selector). Space-separated: no field holds one.
fn value(namespace: &str, api_version: &str, kind: &str, name: &str) -> String {
    format!("{namespace} {api_version} {kind} {name}")
}

/// The [`DEPENDENCIES_INDEX`] values of `binding`: one per recorded dependency, the named object or
/// the selector's bucket; a dependency with neither selects nothing and is left out.
pub fn dependency_values(binding: &ResourceBinding) -> Vec<String> {
    let mut values: Vec<String> = recorded_dependencies(binding)
        .iter()
        .filter(|d| !d.name.is_empty() || d.label_selector.is_some())
        .map(|d: &DependentObjectReference| value(&d.namespace, &d.api_version, &d.kind, &d.name))
        .collect();
    values.sort_unstable();
    values.dedup();
    values
}

/// The [`DEPENDENCIES_INDEX`] values under which the bindings that may depend on `object` are
/// found: those naming it, and those selecting its kind in its namespace.
pub fn candidate_values(object: &Candidate<'_>) -> [String; 2] {
    [
        value(
            object.namespace,
            object.api_version,
            object.kind,
            object.name,
        ),
        value(object.namespace, object.api_version, object.kind, ""),
    ]
}

/// The [`DEPENDED_BY_INDEX`] values of `binding`: the keys of its depended-by labels (each names
/// one requirer by a hash of its namespace and name).
pub fn depended_by_values(binding: &ResourceBinding) -> Vec<String> {
    binding
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(DEPENDED_BY_LABEL_PREFIX))
        .map(|(k, _)| k.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use karmada_apis::well_known::DEPENDENCIES_ANNOTATION;

    use super::*;
    use crate::distributor::attached::{depended_by_label, dependencies_annotation, satisfies};

    fn binding(dependencies: &[DependentObjectReference]) -> ResourceBinding {
        let mut b = ResourceBinding::new("web-deployment", Default::default());
        b.metadata.namespace = Some("ns".into());
        b.metadata.annotations = Some(BTreeMap::from([(
            DEPENDENCIES_ANNOTATION.to_owned(),
            dependencies_annotation(dependencies).unwrap(),
        )]));
        b
    }

    fn selecting(kind: &str) -> DependentObjectReference {
        DependentObjectReference {
            label_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                ..Default::default()
            }),
            ..DependentObjectReference::named("v1", kind, "ns", "")
        }
    }

    /// Every binding whose recorded dependencies an object satisfies is under one of the
    /// object's candidate values, and a binding depending on other objects is not.
    #[test]
    fn an_object_finds_the_bindings_that_name_or_select_it() {
        let names = binding(&[
            DependentObjectReference::named("v1", "ConfigMap", "ns", "web-config"),
            DependentObjectReference::named("v1", "Secret", "ns", "web-config"),
        ]);
        let selects = binding(&[selecting("ConfigMap")]);
        let other = binding(&[
            DependentObjectReference::named("v1", "ConfigMap", "ns", "db-config"),
            DependentObjectReference::named("v1", "ConfigMap", "other", "web-config"),
            selecting("Secret"),
        ]);
        let labels = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
        let object = Candidate {
            api_version: "v1",
            kind: "ConfigMap",
            namespace: "ns",
            name: "web-config",
            labels: Some(&labels),
        };
        let under = candidate_values(&object);
        for (b, expected) in [(&names, true), (&selects, true), (&other, false)] {
            let found = dependency_values(b).iter().any(|v| under.contains(v));
            let satisfied = recorded_dependencies(b)
                .iter()
                .any(|d| satisfies(d, &object));
            assert_eq!(found, expected, "{:?}", dependency_values(b));
            assert_eq!(satisfied, expected);
        }
    }

    #[test]
    fn a_binding_without_dependencies_is_not_indexed() {
        let mut b = binding(&[]);
        assert!(dependency_values(&b).is_empty());
        b.metadata.annotations = None;
        assert!(dependency_values(&b).is_empty());
        // Neither a name nor a selector: selects nothing.
        let b = binding(&[DependentObjectReference::named("v1", "ConfigMap", "ns", "")]);
        assert!(dependency_values(&b).is_empty());
    }

    #[test]
    fn an_attached_binding_is_indexed_by_each_requirer() {
        let mut b = binding(&[]);
        b.metadata.labels = Some(BTreeMap::from([
            (depended_by_label("ns", "a-deployment"), "id-a".to_owned()),
            (depended_by_label("ns", "b-deployment"), "id-b".to_owned()),
            ("app".to_owned(), "web".to_owned()),
        ]));
        let mut values = depended_by_values(&b);
        values.sort();
        let mut expected = vec![
            depended_by_label("ns", "a-deployment"),
            depended_by_label("ns", "b-deployment"),
        ];
        expected.sort();
        assert_eq!(values, expected);
    }
}
