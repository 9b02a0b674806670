//! ClusterTaintPolicy: taints added to and removed from Cluster objects as their conditions change.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ClusterAffinity;
use crate::schema::{LABEL_VALUE_PATTERN, QUALIFIED_NAME_MAX_LENGTH, QUALIFIED_NAME_PATTERN};

/// Which clusters a ClusterTaintPolicy watches, when it adds its taints and when it removes them.
/// `addOnConditions` are evaluated before `removeOnConditions`; deleting the policy removes no taint.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "policy.karmada.io",
    version = "v1alpha1",
    kind = "ClusterTaintPolicy",
    plural = "clustertaintpolicies",
    singular = "clustertaintpolicy",
    derive = "PartialEq",
    derive = "Default",
    doc = "Adds taints to and removes them from the Cluster objects it targets, as their status conditions match."
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterTaintPolicySpec {
    /// The clusters the policy applies to; every cluster when unset. A cluster that stops matching
    /// keeps its taints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_clusters: Option<ClusterAffinity>,
    /// Conditions (ANDed) under which the taints are added; none adds nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add_on_conditions: Vec<MatchCondition>,
    /// Conditions (ANDed) under which the taints are removed; none removes nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove_on_conditions: Vec<MatchCondition>,
    /// The taints added or removed (at least one; unique by key and effect, which Karmada's webhook
    /// checks and the API server enforces here for a list of type `map`).
    #[schemars(length(min = 1), transform = crate::schema::list_map(&["key", "effect"]))]
    pub taints: Vec<PolicyTaint>,
}

string_enum! {
    /// How a condition's status is compared with `statusValues`.
    pub enum MatchConditionOperator {
        /// The status is one of the values.
        In = "In",
        /// The status is none of the values.
        NotIn = "NotIn",
    }
}

/// One cluster condition to match: its type, and its status compared with a set of values.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MatchCondition {
    /// The Cluster condition type, e.g. `Ready`.
    pub condition_type: String,
    /// `In` or `NotIn`.
    pub operator: MatchConditionOperator,
    /// Condition statuses (`True`, `False`, `Unknown`).
    pub status_values: Vec<String>,
}

/// A taint the policy puts on a cluster (Cluster taints' key and value rules apply).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PolicyTaint {
    /// The taint key.
    #[schemars(length(max = QUALIFIED_NAME_MAX_LENGTH), pattern(QUALIFIED_NAME_PATTERN))]
    pub key: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    #[schemars(transform = crate::schema::only_values(&["NoSchedule", "PreferNoSchedule", "NoExecute"]))]
    pub effect: String,
    /// The taint value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 63), pattern(LABEL_VALUE_PATTERN))]
    pub value: String,
}

impl MatchCondition {
    /// Whether `status` (the status of the condition of this type) satisfies the operator.
    pub fn status_matches(&self, status: &str) -> bool {
        let listed = self.status_values.iter().any(|v| v == status);
        match self.operator {
            MatchConditionOperator::In => listed,
            MatchConditionOperator::NotIn => !listed,
            MatchConditionOperator::Other(_) => false,
        }
    }
}
