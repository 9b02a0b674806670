//! `remedy.karmada.io/v1alpha1`: Remedy, which turns Cluster status conditions into the remedy
//! actions (e.g. `TrafficControl`) the `remedy` controller lists in a Cluster's
//! `status.remedyActions` for other components to act on.
//!
//! The CRD has Karmada's shape: cluster-scoped, in the `karmada-io` category, no short name, no
//! printer columns and no status; the only enum the API server checks is the condition operator
//! (actions and condition types are free strings, as in Karmada).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of [`Remedy`].
pub const GROUP: &str = "remedy.karmada.io";
/// The API version of [`Remedy`].
pub const VERSION: &str = "v1alpha1";

/// The action asking for traffic to be steered away from a cluster (the one action Karmada
/// defines).
pub const TRAFFIC_CONTROL: &str = "TrafficControl";

/// The Cluster condition type reporting whether Services' domain names resolve in the member (the
/// condition type Karmada names for Remedies; any type may be matched).
pub const SERVICE_DOMAIN_NAME_RESOLUTION_READY: &str = "ServiceDomainNameResolutionReady";

/// Which clusters a Remedy looks at, what in their conditions triggers it, and which actions it
/// then asks for.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "remedy.karmada.io",
    version = "v1alpha1",
    kind = "Remedy",
    plural = "remedies",
    singular = "remedy",
    category = "karmada-io",
    derive = "PartialEq",
    derive = "Default",
    doc = "A cluster-level remedy: actions requested for the clusters whose status conditions match."
)]
#[serde(rename_all = "camelCase")]
pub struct RemedySpec {
    /// The clusters this Remedy applies to; every cluster when unset (set but without names, it
    /// applies to none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_affinity: Option<ClusterAffinity>,

    /// The triggers: the actions apply while any one of them matches the cluster's conditions.
    /// Unset means the actions always apply; an empty list, as in Karmada, matches nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_matches: Option<Vec<DecisionMatch>>,

    /// The actions requested for a matching cluster, e.g. `TrafficControl`; none when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<String>,
}

/// One trigger of a Remedy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionMatch {
    /// A requirement on one Cluster condition; a trigger without it never matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_condition_match: Option<ClusterConditionRequirement>,
}

string_enum! {
    /// How a Cluster condition's status is compared with `conditionStatus`.
    pub enum ClusterConditionOperator {
        /// The status equals `conditionStatus`.
        Equal = "Equal",
        /// The status differs from `conditionStatus`.
        NotEqual = "NotEqual",
    }
}

/// A requirement on the status of one Cluster condition type.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterConditionRequirement {
    /// The Cluster condition type, e.g. `ServiceDomainNameResolutionReady`.
    pub condition_type: String,
    /// `Equal` or `NotEqual`.
    pub operator: ClusterConditionOperator,
    /// The condition status compared with, e.g. `False`.
    pub condition_status: String,
}

/// The clusters a Remedy applies to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAffinity {
    /// The names of the selected clusters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_names: Vec<String>,
}

impl ClusterConditionRequirement {
    /// Whether `conditions` hold a condition of this type whose status satisfies the operator. A
    /// missing condition type never matches, whatever the operator; an unknown operator neither.
    pub fn matches(&self, conditions: &[Condition]) -> bool {
        let Some(condition) = conditions.iter().find(|c| c.type_ == self.condition_type) else {
            return false;
        };
        match self.operator {
            ClusterConditionOperator::Equal => condition.status == self.condition_status,
            ClusterConditionOperator::NotEqual => condition.status != self.condition_status,
            ClusterConditionOperator::Other(_) => false,
        }
    }
}

impl RemedySpec {
    /// Whether this Remedy applies to the cluster called `cluster`: every cluster without a
    /// `clusterAffinity`, else only the clusters it names.
    pub fn selects(&self, cluster: &str) -> bool {
        self.cluster_affinity
            .as_ref()
            .is_none_or(|a| a.cluster_names.iter().any(|n| n == cluster))
    }

    /// Whether the Remedy's triggers fire on `conditions`: always without `decisionMatches`,
    /// otherwise when any trigger matches.
    pub fn triggered_by(&self, conditions: &[Condition]) -> bool {
        match &self.decision_matches {
            None => true,
            Some(matches) => matches.iter().any(|m| {
                m.cluster_condition_match
                    .as_ref()
                    .is_some_and(|r| r.matches(conditions))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn condition(type_: &str, status: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: String::new(),
            message: String::new(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
            observed_generation: None,
        }
    }

    fn spec(value: serde_json::Value) -> RemedySpec {
        serde_json::from_value(value).expect("parses")
    }

    #[test]
    fn affinity_selects_all_clusters_or_the_named_ones() {
        assert!(spec(json!({})).selects("member1"));
        let named = spec(json!({"clusterAffinity": {"clusterNames": ["member1", "member2"]}}));
        assert!(named.selects("member1"));
        assert!(!named.selects("member3"));
        assert!(!spec(json!({"clusterAffinity": {}})).selects("member1"));
    }

    #[test]
    fn triggers_follow_karmada() {
        let dns_false = [
            condition("Ready", "False"),
            condition(SERVICE_DOMAIN_NAME_RESOLUTION_READY, "False"),
        ];
        // No decisionMatches: always; an empty list: never.
        assert!(spec(json!({})).triggered_by(&[]));
        assert!(!spec(json!({"decisionMatches": []})).triggered_by(&dns_false));
        let one = |op: &str, status: &str| {
            spec(json!({"decisionMatches": [
                {"clusterConditionMatch": {"conditionType": "DoNotCare", "operator": "Equal", "conditionStatus": "True"}},
                {"clusterConditionMatch": {"conditionType": SERVICE_DOMAIN_NAME_RESOLUTION_READY, "operator": op, "conditionStatus": status}},
            ]}))
        };
        assert!(one("Equal", "False").triggered_by(&dns_false));
        assert!(!one("Equal", "True").triggered_by(&dns_false));
        assert!(one("NotEqual", "True").triggered_by(&dns_false));
        assert!(!one("NotEqual", "False").triggered_by(&dns_false));
        // A condition the cluster lacks never matches, whatever the operator.
        assert!(!one("NotEqual", "True").triggered_by(&[condition("Ready", "True")]));
        // Unknown operators and triggers without a requirement never match.
        assert!(!one("Sometimes", "False").triggered_by(&dns_false));
        assert!(!spec(json!({"decisionMatches": [{}]})).triggered_by(&dns_false));
    }

    #[test]
    fn round_trips_karmada_json() {
        let value = json!({
            "clusterAffinity": {"clusterNames": ["member1"]},
            "decisionMatches": [{"clusterConditionMatch": {
                "conditionType": SERVICE_DOMAIN_NAME_RESOLUTION_READY,
                "operator": "Equal",
                "conditionStatus": "False"
            }}],
            "actions": [TRAFFIC_CONTROL]
        });
        assert_eq!(
            serde_json::to_value(spec(value.clone())).expect("json"),
            value
        );
        assert_eq!(
            serde_json::to_value(spec(json!({}))).expect("json"),
            json!({})
        );
    }
}
