//! CronFederatedHPA: rules that, on a cron schedule, set a workload's replicas (through its scale
//! subresource) or a FederatedHPA's replica bounds, with each rule's execution history in status.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::{Cel, cel};

/// Karmada's webhook checks, as CRD rules: an `autoscaling.karmada.io/v1alpha1` target must be a
/// FederatedHPA; rules scaling a FederatedHPA set a positive `targetMinReplicas` and/or
/// `targetMaxReplicas` (min ≤ max); rules scaling anything else set `targetReplicas` ≥ 0.
const SPEC_RULES: &[Cel] = &[
    Cel::at(
        ".scaleTargetRef.kind",
        "!has(self.scaleTargetRef.apiVersion) || self.scaleTargetRef.apiVersion != 'autoscaling.karmada.io/v1alpha1' || self.scaleTargetRef.kind == 'FederatedHPA'",
        "invalid scaleTargetRef kind, only support FederatedHPA",
    ),
    Cel::at(
        ".rules",
        "!has(self.scaleTargetRef.apiVersion) || self.scaleTargetRef.apiVersion != 'autoscaling.karmada.io/v1alpha1' || self.rules.all(r, (has(r.targetMinReplicas) || has(r.targetMaxReplicas)) && (!has(r.targetMinReplicas) || r.targetMinReplicas > 0) && (!has(r.targetMaxReplicas) || r.targetMaxReplicas > 0) && (!has(r.targetMinReplicas) || !has(r.targetMaxReplicas) || r.targetMinReplicas <= r.targetMaxReplicas))",
        "a rule scaling a FederatedHPA needs targetMinReplicas and/or targetMaxReplicas, both larger than 0 and targetMinReplicas <= targetMaxReplicas",
    ),
    Cel::at(
        ".rules",
        "(has(self.scaleTargetRef.apiVersion) && self.scaleTargetRef.apiVersion == 'autoscaling.karmada.io/v1alpha1') || self.rules.all(r, has(r.targetReplicas) && r.targetReplicas >= 0)",
        "a rule scaling a workload needs targetReplicas, larger than or equal to 0",
    ),
];

/// What Karmada's webhook accepts as a cron expression (gronx's grammar): one of its descriptors,
/// or 5 to 7 fields of digits, names, `*`, `?`, `/`, `,`, `-`, `#`, `L` and `W`. Out-of-range values
/// pass here and are reported by the controller when it cannot schedule the rule.
pub const SCHEDULE_PATTERN: &str = r"^\s*((?i)@(yearly|annually|monthly|weekly|daily|hourly|always|5minutes|10minutes|15minutes|30minutes|everysecond)|[0-9A-Za-z*?/,#-]+(\s+[0-9A-Za-z*?/,#-]+){4,6})\s*$";

/// Repeating schedules that scale a workload (anything with a scale subresource, e.g. a
/// Deployment) or the replica bounds of a FederatedHPA.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "autoscaling.karmada.io",
    version = "v1alpha1",
    kind = "CronFederatedHPA",
    plural = "cronfederatedhpas",
    singular = "cronfederatedhpa",
    shortname = "cronfhpa",
    category = "karmada-io",
    namespaced,
    status = "CronFederatedHPAStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "A collection of repeating schedules scaling a workload's replicas or a FederatedHPA's bounds.",
    printcolumn(
        name = "REFERENCE-KIND",
        type_ = "string",
        json_path = ".spec.scaleTargetRef.kind"
    ),
    printcolumn(
        name = "REFERENCE-NAME",
        type_ = "string",
        json_path = ".spec.scaleTargetRef.name"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = cel(SPEC_RULES))]
pub struct CronFederatedHPASpec {
    /// The resource to scale: a workload with a scale subresource, or a FederatedHPA.
    pub scale_target_ref: CrossVersionObjectReference,

    /// When and how the target is scaled; rule names are unique.
    #[schemars(transform = crate::schema::list_map(&["name"]))]
    pub rules: Vec<CronFederatedHPARule>,
}

/// A reference to the scaled object (`autoscalingv2.CrossVersionObjectReference`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrossVersionObjectReference {
    /// The referent's kind.
    pub kind: String,
    /// The referent's name.
    pub name: String,
    /// The referent's API version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
}

/// One schedule and what it sets.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronFederatedHPARule {
    /// The rule's name, unique in the object; execution history is kept by it, so renaming a rule
    /// discards its history.
    #[schemars(length(min = 1, max = 32))]
    pub name: String,

    /// The cron expression (Kubernetes CronJob syntax).
    #[schemars(regex(pattern = SCHEDULE_PATTERN))]
    pub schedule: String,

    /// The replicas set on a workload target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_replicas: Option<i32>,

    /// The `minReplicas` set on a FederatedHPA target; unset leaves it alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_min_replicas: Option<i32>,

    /// The `maxReplicas` set on a FederatedHPA target; unset leaves it alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_max_replicas: Option<i32>,

    /// Suspends subsequent executions. Defaults to false.
    #[serde(default = "default_suspend", skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,

    /// The IANA time zone of the schedule; the controller's own time zone when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,

    /// How many successful executions are kept (1 to 32, default 3).
    #[serde(
        default = "default_history_limit",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 32))]
    pub successful_history_limit: Option<i32>,

    /// How many failed executions are kept (0 to 32, default 3).
    #[serde(
        default = "default_history_limit",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 32))]
    pub failed_history_limit: Option<i32>,
}

fn default_suspend() -> Option<bool> {
    Some(false)
}

fn default_history_limit() -> Option<i32> {
    Some(3)
}

impl CronFederatedHPARule {
    /// Whether the rule is suspended (`suspend: true`).
    pub fn is_suspended(&self) -> bool {
        self.suspend.unwrap_or(false)
    }

    /// How many successful executions to keep (Karmada's default 3 when unset).
    pub fn successful_history_limit(&self) -> usize {
        usize::try_from(self.successful_history_limit.unwrap_or(3)).unwrap_or(0)
    }

    /// How many failed executions to keep (Karmada's default 3 when unset).
    pub fn failed_history_limit(&self) -> usize {
        usize::try_from(self.failed_history_limit.unwrap_or(3)).unwrap_or(0)
    }
}

/// The rules' execution histories.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronFederatedHPAStatus {
    /// One entry per rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub execution_histories: Vec<ExecutionHistory>,
}

/// The execution history of one rule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionHistory {
    /// The rule's name.
    pub rule_name: String,
    /// When the rule runs next; unset while it is suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_execution_time: Option<Time>,
    /// Successful executions, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub successful_executions: Vec<SuccessfulExecution>,
    /// Failed executions, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_executions: Vec<FailedExecution>,
}

/// A successful execution.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuccessfulExecution {
    /// When the execution was scheduled.
    pub schedule_time: Time,
    /// When it actually ran.
    pub execution_time: Time,
    /// The replicas applied to a workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_replicas: Option<i32>,
    /// The `maxReplicas` applied to a FederatedHPA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_max_replicas: Option<i32>,
    /// The `minReplicas` applied to a FederatedHPA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_min_replicas: Option<i32>,
}

/// A failed execution.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedExecution {
    /// When the execution was scheduled.
    pub schedule_time: Time,
    /// When it actually ran.
    pub execution_time: Time,
    /// Why it failed.
    pub message: String,
}
