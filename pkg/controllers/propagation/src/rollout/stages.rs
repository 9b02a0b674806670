//! Which stage each target cluster is in: the first stage that selects it (by name or by its
//! labels); clusters no stage selects go with the last stage.

use std::collections::BTreeMap;

use karmada_apis::rollout::RolloutStrategySpec;
use karmada_policy::selector::label_selector_matches;

/// `(stage, clusters)` for every stage of `strategy`, in order; `targets` keep their order within
/// a stage.
pub fn assign_stages(
    strategy: &RolloutStrategySpec,
    targets: &[String],
    labels: &BTreeMap<String, BTreeMap<String, String>>,
) -> Vec<(String, Vec<String>)> {
    let none = BTreeMap::new();
    let mut out: Vec<(String, Vec<String>)> = strategy
        .stages
        .iter()
        .map(|s| (s.name.clone(), Vec::new()))
        .collect();
    for cluster in targets {
        let cluster_labels = labels.get(cluster).unwrap_or(&none);
        let chosen = strategy.stages.iter().position(|s| {
            s.cluster_names.contains(cluster)
                || s.label_selector
                    .as_ref()
                    .is_some_and(|sel| label_selector_matches(sel, cluster_labels))
        });
        let index = chosen.unwrap_or(out.len().saturating_sub(1));
        if let Some((_, clusters)) = out.get_mut(index) {
            clusters.push(cluster.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use karmada_apis::rollout::RolloutStage;

    #[test]
    fn first_matching_stage_wins_and_the_rest_go_last() {
        let strategy = RolloutStrategySpec {
            stages: vec![
                RolloutStage {
                    name: "canary".into(),
                    cluster_names: vec!["m1".into()],
                    ..Default::default()
                },
                RolloutStage {
                    name: "prod".into(),
                    label_selector: Some(LabelSelector {
                        match_labels: Some([("env".to_owned(), "prod".to_owned())].into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let labels: BTreeMap<_, _> = [
            (
                "m1".to_owned(),
                [("env".to_owned(), "prod".to_owned())].into(),
            ),
            (
                "m2".to_owned(),
                [("env".to_owned(), "prod".to_owned())].into(),
            ),
        ]
        .into();
        let targets = ["m1", "m2", "m3"].map(String::from);
        let got = assign_stages(&strategy, &targets, &labels);
        assert_eq!(
            got,
            vec![
                ("canary".to_owned(), vec!["m1".to_owned()]),
                ("prod".to_owned(), vec!["m2".to_owned(), "m3".to_owned()]),
            ]
        );
    }
}
