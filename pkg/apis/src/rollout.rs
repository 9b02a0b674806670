//! `apps.karmada-rs.io/v1alpha1`: staged rollout across member clusters (a karmada-rs addition;
//! Karmada has no such API).
//!
//! A [`RolloutStrategy`] (namespaced, written by users) selects workload templates the way a
//! PropagationPolicy does (`resourceSelectors`) and lists the stages a new revision of a selected
//! template goes through: each stage a set of member clusters (by label selector or by name),
//! updated at most `maxConcurrency` at a time, promoted once every cluster of the stage has reported
//! the workload healthy for `minSuccessSeconds`, optionally after a wait or a user's approval
//! (KubeFleet's `afterStageTasks`). A cluster that does not become healthy within
//! `progressDeadlineSeconds` fails; more than `maxFailures` failures halt the rollout.
//!
//! The state of one workload's rollout lives in a [`Rollout`] object of its own, named after the
//! workload's ResourceBinding, in its namespace, owned by it (garbage-collected with it), and
//! written by the rollout controller: per-workload state in the strategy's status would grow with
//! every workload selected and be written by every rollout at once. Users act on a Rollout through
//! its spec (`paused`, `approvals`, `rollbackRevision`; `karmadactl rollout`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apps::v1alpha1::ObjectReference;
use crate::policy::v1alpha1::ResourceSelector;
use crate::raw::RawExtension;
use crate::schema::Cel;

/// The API group of this project's own kinds that are about applications.
pub const GROUP: &str = "apps.karmada-rs.io";
/// `apiVersion` of [`RolloutStrategy`] and [`Rollout`].
pub const API_VERSION: &str = "apps.karmada-rs.io/v1alpha1";
/// Annotation on a Work (and its manifest) naming the template revision it carries, written only
/// for workloads with a [`Rollout`].
pub const REVISION_ANNOTATION: &str = "apps.karmada-rs.io/revision";

/// How a new revision of the selected workloads reaches the member clusters: stage after stage.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "apps.karmada-rs.io",
    version = "v1alpha1",
    kind = "RolloutStrategy",
    plural = "rolloutstrategies",
    singular = "rolloutstrategy",
    namespaced,
    category = "karmada-io",
    derive = "PartialEq",
    derive = "Default",
    doc = "Rolls a new revision of the selected workloads out to member clusters stage by stage, promoting a stage once its clusters report the workload healthy."
)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStrategySpec {
    /// The workload templates this strategy applies to, as a PropagationPolicy selects them (an
    /// empty namespace means the strategy's own; other namespaces are not selected).
    #[schemars(length(min = 1, max = 64))]
    pub resource_selectors: Vec<ResourceSelector>,
    /// The stages, in order. A target cluster belongs to the first stage that selects it; clusters
    /// no stage selects are updated with the last stage.
    #[schemars(length(min = 1, max = 16), transform = crate::schema::cel(STAGE_RULES))]
    pub stages: Vec<RolloutStage>,
    /// How long every cluster of a stage must report the workload healthy before the stage
    /// succeeds (OCM's `minSuccessTime`). Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 86400))]
    pub min_success_seconds: Option<i32>,
    /// How long a cluster may take to report the new revision healthy before it fails (OCM's
    /// `progressDeadline`). Default 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub progress_deadline_seconds: Option<i32>,
    /// How many clusters may fail before the rollout halts (OCM's `maxFailures`). Default 0: the
    /// first failure halts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_failures: Option<i32>,
}

const STAGE_RULES: &[Cel] = &[Cel::new(
    "self.all(s, self.exists_one(t, t.name == s.name))",
    "stage names must be unique",
)];

/// One stage: which clusters, how many at a time, and what happens before the next stage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::cel(STAGE_SELECTION_RULES))]
pub struct RolloutStage {
    /// The stage's name, unique in the strategy (a DNS label).
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,
    /// The clusters of this stage, by their labels (KubeFleet's `labelSelector`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crate::schema::label_selector)]
    pub label_selector: Option<LabelSelector>,
    /// The clusters of this stage, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub cluster_names: Vec<String>,
    /// How many clusters of the stage are updated at once (OCM's `maxConcurrency`); all at once
    /// when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_concurrency: Option<i32>,
    /// What must happen after the stage succeeded before the next one starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 2))]
    pub after_stage_tasks: Vec<AfterStageTask>,
}

const STAGE_SELECTION_RULES: &[Cel] = &[Cel::new(
    "has(self.labelSelector) != has(self.clusterNames)",
    "a stage selects its clusters by exactly one of labelSelector or clusterNames",
)];

/// A task between two stages (KubeFleet's `afterStageTasks`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::cel(TASK_RULES))]
pub struct AfterStageTask {
    /// `TimedWait` (wait `waitSeconds`) or `Approval` (wait until the Rollout's `approvals` name
    /// this stage for the revision being rolled out).
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["TimedWait", "Approval"]))]
    pub type_: String,
    /// Seconds to wait, for a `TimedWait`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub wait_seconds: Option<i32>,
}

const TASK_RULES: &[Cel] = &[Cel::new(
    "(self.type == 'TimedWait') == has(self.waitSeconds)",
    "waitSeconds is set for a TimedWait task and only for one",
)];

/// `type` of an [`AfterStageTask`]: wait some time.
pub const TASK_TIMED_WAIT: &str = "TimedWait";
/// `type` of an [`AfterStageTask`]: wait for a user's approval.
pub const TASK_APPROVAL: &str = "Approval";

/// One workload's rollout across its clusters: which revision is stable, which one is being rolled
/// out, and where each stage and cluster stands. Created and updated by the rollout controller;
/// users set `spec.paused`, `spec.approvals` and `spec.rollbackRevision`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "apps.karmada-rs.io",
    version = "v1alpha1",
    kind = "Rollout",
    plural = "rollouts",
    singular = "rollout",
    namespaced,
    status = "RolloutStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "The staged rollout of one workload: stable and target revision, and the state of each stage and member cluster.",
    category = "karmada-io",
    printcolumn(name = "STRATEGY", type_ = "string", json_path = ".spec.strategy"),
    printcolumn(name = "PHASE", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "STAGE", type_ = "string", json_path = ".status.currentStage"),
    printcolumn(
        name = "TARGET-REVISION",
        type_ = "string",
        json_path = ".status.targetRevision"
    ),
    printcolumn(
        name = "STABLE-REVISION",
        type_ = "string",
        json_path = ".status.stableRevision"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    /// The RolloutStrategy (same namespace) that applies.
    pub strategy: String,
    /// The workload template.
    pub resource: ObjectReference,
    /// No cluster gets the target revision while set (clusters updating carry on).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Stages a user approved, per revision (their `Approval` task is done).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub approvals: Vec<StageApproval>,
    /// When equal to `status.targetRevision`: every cluster goes back to the stable revision and
    /// the rollout stops (`RolledBack`) until the template changes again.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rollback_revision: String,
}

/// A user's approval of one stage of one revision.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageApproval {
    /// The revision (`status.targetRevision`).
    pub revision: String,
    /// The stage's name.
    pub stage: String,
}

/// Where the rollout stands.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// The revision every cluster had before the current rollout: the one clusters not yet
    /// updated keep getting. Revisions are hashes of the template without its metadata, status and
    /// replica count.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stable_revision: String,
    /// The stable revision's template content (everything but `apiVersion`, `kind`, `metadata`
    /// and `status`), rendered for clusters not yet updated and after a rollback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_template: Option<RawExtension>,
    /// The revision being rolled out (equal to the stable one when nothing is).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target_revision: String,
    /// `Progressing`, `Paused`, `AwaitingApproval`, `Halted`, `RolledBack` or `Completed`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    /// The stage being rolled out or waited on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_stage: String,
    /// Why the phase is what it is, for a person.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// One entry per stage, in the strategy's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageStatus>,
    /// One entry per target cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<ClusterRolloutStatus>,
    /// `Completed` (the target revision is everywhere) and `Halted`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

string_enum! {
    /// The state of a stage or of one cluster in a rollout.
    #[derive(Default)]
    pub enum RolloutState {
        /// Not started.
        #[default]
        Pending = "Pending",
        /// Given the target revision, not healthy for long enough yet.
        Progressing = "Progressing",
        /// Healthy with the target revision for the soak time (a stage: every cluster).
        Succeeded = "Succeeded",
        /// Not healthy within the progress deadline.
        Failed = "Failed",
        /// Stopped: the rollout halted or was rolled back before this finished.
        Halted = "Halted",
    }
}

/// One stage's state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageStatus {
    /// The stage's name.
    pub name: String,
    /// Its state.
    pub state: RolloutState,
    /// Since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// Why, for a stage waiting after it succeeded: `TimedWait` or `AwaitingApproval`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The target clusters in this stage.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<String>,
}

/// One cluster's state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRolloutStatus {
    /// The member cluster.
    pub name: String,
    /// Its stage.
    pub stage: String,
    /// The revision it may get: the stable one until its turn, then the target one.
    pub revision: String,
    /// Its state.
    pub state: RolloutState,
    /// Since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// Since when it has reported the target revision healthy without a break.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_since: Option<Time>,
    /// Why: `Healthy`, `Unhealthy`, `NotApplied`, `ProgressDeadlineExceeded`, `RolledBack`…
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

impl Rollout {
    /// The status, or an empty one.
    pub fn status_or_default(&self) -> RolloutStatus {
        self.status.clone().unwrap_or_default()
    }
}

/// Phase: clusters are being updated.
pub const PHASE_PROGRESSING: &str = "Progressing";
/// Phase: a user paused the rollout.
pub const PHASE_PAUSED: &str = "Paused";
/// Phase: a stage succeeded and waits for a user's approval.
pub const PHASE_AWAITING_APPROVAL: &str = "AwaitingApproval";
/// Phase: too many clusters failed; nothing more is updated.
pub const PHASE_HALTED: &str = "Halted";
/// Phase: a user rolled the target revision back; every cluster has the stable one.
pub const PHASE_ROLLED_BACK: &str = "RolledBack";
/// Phase: every cluster has the target revision, now the stable one.
pub const PHASE_COMPLETED: &str = "Completed";
