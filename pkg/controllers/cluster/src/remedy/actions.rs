//! Which remedy actions a Cluster gets: the actions of every Remedy that selects it and whose
//! triggers fire on its conditions, deduplicated and sorted (Karmada's order).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use karmada_apis::remedy::v1alpha1::Remedy;

/// The actions `remedies` ask for on the cluster `cluster` with status `conditions`: the union of
/// the actions of the Remedies that select it ([`RemedySpec::selects`]) and are triggered
/// ([`RemedySpec::triggered_by`]), sorted and without duplicates.
///
/// [`RemedySpec::selects`]: karmada_apis::remedy::v1alpha1::RemedySpec::selects
/// [`RemedySpec::triggered_by`]: karmada_apis::remedy::v1alpha1::RemedySpec::triggered_by
pub fn remedy_actions(
    cluster: &str,
    conditions: &[Condition],
    remedies: &[Arc<Remedy>],
) -> Vec<String> {
    remedies
        .iter()
        .map(|r| &r.spec)
        .filter(|spec| spec.selects(cluster) && spec.triggered_by(conditions))
        .flat_map(|spec| spec.actions.iter().cloned())
        .collect::<BTreeSet<String>>()
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::remedy::v1alpha1::{SERVICE_DOMAIN_NAME_RESOLUTION_READY, TRAFFIC_CONTROL};
    use serde_json::{Value, json};

    fn remedy(name: &str, spec: Value) -> Arc<Remedy> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "remedy.karmada.io/v1alpha1",
                "kind": "Remedy",
                "metadata": {"name": name},
                "spec": spec,
            }))
            .unwrap(),
        )
    }

    fn condition(type_: &str, status: &str) -> Condition {
        karmada_controllers_common::conditions::new_condition(type_, status, "Test", "")
    }

    fn when(type_: &str, status: &str, actions: &[&str]) -> Value {
        json!({
            "decisionMatches": [{"clusterConditionMatch": {
                "conditionType": type_, "operator": "Equal", "conditionStatus": status
            }}],
            "actions": actions,
        })
    }

    #[test]
    fn no_remedies_no_actions() {
        assert!(remedy_actions("member1", &[condition("Ready", "False")], &[]).is_empty());
    }

    #[test]
    fn actions_of_matching_remedies_are_merged_sorted_and_deduplicated() {
        let conditions = [
            condition("Ready", "False"),
            condition(SERVICE_DOMAIN_NAME_RESOLUTION_READY, "False"),
        ];
        let remedies = [
            remedy(
                "dns",
                when(
                    SERVICE_DOMAIN_NAME_RESOLUTION_READY,
                    "False",
                    &[TRAFFIC_CONTROL],
                ),
            ),
            remedy(
                "ready",
                when("Ready", "False", &["IsolateSchedule", TRAFFIC_CONTROL]),
            ),
            remedy("healthy", when("Ready", "True", &["Other"])),
            remedy(
                "elsewhere",
                json!({"clusterAffinity": {"clusterNames": ["member2"]}, "actions": ["Elsewhere"]}),
            ),
        ];
        assert_eq!(
            remedy_actions("member1", &conditions, &remedies),
            ["IsolateSchedule", TRAFFIC_CONTROL]
        );
        assert_eq!(
            remedy_actions("member2", &conditions, &remedies),
            ["Elsewhere", "IsolateSchedule", TRAFFIC_CONTROL]
        );
    }

    #[test]
    fn remedy_without_triggers_always_applies_to_its_clusters() {
        let remedies = [remedy(
            "always",
            json!({"clusterAffinity": {"clusterNames": ["member1"]}, "actions": [TRAFFIC_CONTROL]}),
        )];
        assert_eq!(remedy_actions("member1", &[], &remedies), [TRAFFIC_CONTROL]);
        assert!(remedy_actions("member2", &[], &remedies).is_empty());
    }
}
