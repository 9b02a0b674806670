//! Hostile selectors: a policy author writes the label selectors of resource selectors and
//! cluster affinities and the field selectors (`provider`, `region`, `zone`) of cluster
//! affinities; a member's Cluster carries the labels and fields they are matched against. Random
//! and adversarial selectors must compile or be refused with an error that names the key, and
//! matching must never panic.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use karmada_apis::policy::v1alpha1::{ClusterAffinity, FieldSelector};
use karmada_apis::{Cluster, ClusterSpec};
use karmada_policy::selector::{
    Selector, SelectorError, cluster_matches, is_qualified_name, is_valid_label_value,
    label_selector_matches,
};
use proptest::prelude::*;

const CASES: u32 = 256;

/// Keys and values: valid ones, near misses, long and non-ASCII ones.
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]([a-z0-9._-]{0,10}[a-z0-9])?",
        "([a-z0-9.-]{1,20}/)?[A-Za-z0-9._-]{0,12}",
        Just(String::new()),
        Just("a".repeat(64)),
        Just(format!("{}/x", "a".repeat(254))),
        Just("/".to_owned()),
        Just("a//b".to_owned()),
        Just("-1".to_owned()),
        Just("9223372036854775808".to_owned()),
        Just("\u{0}".to_owned()),
        Just("é".to_owned()),
        "\\PC{0,8}",
    ]
}

fn operator() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("In".to_owned()),
        Just("NotIn".to_owned()),
        Just("Exists".to_owned()),
        Just("DoesNotExist".to_owned()),
        Just("Gt".to_owned()),
        Just("Lt".to_owned()),
        Just("in".to_owned()),
        Just(String::new()),
        "\\PC{0,6}",
    ]
}

fn values() -> impl Strategy<Value = Option<Vec<String>>> {
    proptest::option::of(proptest::collection::vec(word(), 0..4))
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::btree_map(word(), word(), 0..6)
}

fn label_selector() -> impl Strategy<Value = LabelSelector> {
    (
        proptest::option::of(labels()),
        proptest::option::of(proptest::collection::vec(
            (word(), operator(), values()).prop_map(|(key, operator, values)| {
                LabelSelectorRequirement {
                    key,
                    operator,
                    values,
                }
            }),
            0..4,
        )),
    )
        .prop_map(|(match_labels, match_expressions)| LabelSelector {
            match_labels,
            match_expressions,
        })
}

fn node_requirements() -> impl Strategy<Value = Vec<NodeSelectorRequirement>> {
    let key = prop_oneof![
        Just("provider".to_owned()),
        Just("region".to_owned()),
        Just("zone".to_owned()),
        word(),
    ];
    proptest::collection::vec(
        (key, operator(), values()).prop_map(|(key, operator, values)| NodeSelectorRequirement {
            key,
            operator,
            values,
        }),
        0..4,
    )
}

fn cluster() -> impl Strategy<Value = Cluster> {
    (
        word(),
        labels(),
        word(),
        word(),
        proptest::collection::vec(word(), 0..3),
    )
        .prop_map(|(name, labels, provider, region, zones)| Cluster {
            metadata: ObjectMeta {
                name: Some(name),
                labels: Some(labels),
                ..Default::default()
            },
            spec: ClusterSpec {
                provider,
                region,
                zones,
                ..Default::default()
            },
            status: None,
        })
}

/// An error names the offending key, so the author can find the requirement.
fn names_the_key(error: &SelectorError) -> bool {
    let text = error.to_string();
    !text.is_empty()
        && match error {
            SelectorError::InvalidKey(key)
            | SelectorError::InvalidOperator { key, .. }
            | SelectorError::WrongValueCount { key, .. }
            | SelectorError::InvalidValue { key, .. }
            | SelectorError::NotAnInteger { key, .. } => text.contains(&format!("{key:?}")),
        }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn label_selectors_compile_or_name_the_key(selector in label_selector(), labels in labels()) {
        match Selector::from_label_selector(&selector) {
            Ok(compiled) => {
                prop_assert_eq!(compiled.matches(&labels), label_selector_matches(&selector, &labels));
                // Every compiled key is one apimachinery accepts.
                for key in selector.match_labels.iter().flatten().map(|(k, _)| k) {
                    prop_assert!(is_qualified_name(key), "{key:?} accepted");
                }
            }
            Err(e) => {
                prop_assert!(names_the_key(&e), "{e}");
                prop_assert!(!label_selector_matches(&selector, &labels), "an invalid selector matches nothing");
            }
        }
    }

    #[test]
    fn match_labels_select_what_they_name(labels in labels()) {
        let valid: BTreeMap<String, String> = labels
            .into_iter()
            .filter(|(k, v)| is_qualified_name(k) && is_valid_label_value(v))
            .collect();
        let selector = LabelSelector { match_labels: Some(valid.clone()), match_expressions: None };
        prop_assert!(label_selector_matches(&selector, &valid));
    }

    #[test]
    fn field_selectors_compile_or_name_the_key(exprs in node_requirements(), fields in labels()) {
        match Selector::from_node_selector_requirements(&exprs) {
            Ok(compiled) => { let _ = compiled.matches(&fields); }
            Err(e) => prop_assert!(names_the_key(&e), "{e}"),
        }
    }

    #[test]
    fn cluster_affinities_never_panic(
        cluster in cluster(),
        label_selector in proptest::option::of(label_selector()),
        fields in proptest::option::of(node_requirements()),
        names in proptest::collection::vec(word(), 0..3),
        excluded in proptest::collection::vec(word(), 0..3),
    ) {
        let affinity = ClusterAffinity {
            label_selector,
            field_selector: fields.map(|match_expressions| FieldSelector { match_expressions }),
            cluster_names: names,
            exclude_clusters: excluded.clone(),
        };
        let matched = cluster_matches(&cluster, &affinity);
        if excluded.iter().any(|e| Some(e) == cluster.metadata.name.as_ref()) {
            prop_assert!(!matched);
        }
    }
}

#[test]
fn many_requirements_and_long_values_are_cheap() {
    let values: Vec<String> = (0..10_000).map(|i| format!("v{i}")).collect();
    let selector = LabelSelector {
        match_labels: None,
        match_expressions: Some(
            (0..100)
                .map(|i| LabelSelectorRequirement {
                    key: format!("k{i}"),
                    operator: "NotIn".into(),
                    values: Some(values.clone()),
                })
                .collect(),
        ),
    };
    let labels: BTreeMap<String, String> =
        (0..100).map(|i| (format!("k{i}"), "x".into())).collect();
    assert!(label_selector_matches(&selector, &labels));
    let huge = LabelSelector {
        match_labels: Some([("k".to_owned(), "v".repeat(1 << 20))].into()),
        match_expressions: None,
    };
    assert!(matches!(
        Selector::from_label_selector(&huge),
        Err(SelectorError::InvalidValue { .. })
    ));
}
