//! One step of a workload's rollout, without I/O: from the Rollout's status, its strategy, the
//! user's requests (`spec`) and what the clusters report, the next status, the Events to record
//! and when to look again.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use karmada_apis::rollout::{
    ClusterRolloutStatus, PHASE_AWAITING_APPROVAL, PHASE_COMPLETED, PHASE_HALTED, PHASE_PAUSED,
    PHASE_PROGRESSING, PHASE_ROLLED_BACK, RolloutSpec, RolloutState, RolloutStatus,
    RolloutStrategySpec, StageApproval, StageStatus, TASK_APPROVAL, TASK_TIMED_WAIT,
};
use karmada_controllers_common::conditions::new_condition;
use karmada_controllers_common::set_condition;
use serde_json::Value;

use super::stages::assign_stages;

/// Default `progressDeadlineSeconds`.
pub const DEFAULT_PROGRESS_DEADLINE: i64 = 600;
/// Condition: the target revision is on every cluster.
pub const CONDITION_COMPLETED: &str = "Completed";
/// Condition: the rollout halted.
pub const CONDITION_HALTED: &str = "Halted";

/// How one cluster reports the target revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// Its Work does not carry the target revision applied yet.
    NotApplied,
    /// Applied and reported healthy.
    Healthy,
    /// Applied, not (yet) healthy.
    Unhealthy,
}

/// What the controller sees of one workload.
pub struct Observation {
    /// The current template's revision.
    pub revision: String,
    /// The current template's content (the stable template once rolled out).
    pub content: Value,
    /// The binding's target clusters.
    pub targets: Vec<String>,
    /// Each target cluster's labels.
    pub labels: BTreeMap<String, BTreeMap<String, String>>,
    /// Each cluster's report of the target revision (missing: [`Health::NotApplied`]).
    pub health: BTreeMap<String, Health>,
    /// Now.
    pub now: Timestamp,
}

/// An Event to record on the Rollout.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    /// Warning, not Normal.
    pub warning: bool,
    /// Its reason.
    pub reason: &'static str,
    /// Its message.
    pub message: String,
}

/// The outcome of [`step`].
#[derive(Debug)]
pub struct Step {
    /// The status to write.
    pub status: RolloutStatus,
    /// Events to record.
    pub notes: Vec<Note>,
    /// Look again after this long (a soak, a deadline or a wait ends).
    pub requeue: Option<Duration>,
}

/// Event reasons.
pub mod reasons {
    /// A new revision starts rolling out.
    pub const STARTED: &str = "RolloutStarted";
    /// A cluster gets the target revision.
    pub const CLUSTER_UPDATING: &str = "ClusterUpdating";
    /// A cluster reported the target revision healthy for the soak time.
    pub const CLUSTER_SUCCEEDED: &str = "ClusterSucceeded";
    /// A cluster missed its progress deadline.
    pub const CLUSTER_FAILED: &str = "ClusterFailed";
    /// Every cluster of a stage succeeded.
    pub const STAGE_SUCCEEDED: &str = "StageSucceeded";
    /// A stage waits for a user's approval.
    pub const AWAITING_APPROVAL: &str = "AwaitingApproval";
    /// Too many failures: nothing more is updated.
    pub const HALTED: &str = "RolloutHalted";
    /// A user rolled the target revision back.
    pub const ROLLED_BACK: &str = "RolledBack";
    /// Every cluster has the target revision.
    pub const COMPLETED: &str = "RolloutCompleted";
}

struct Ctx<'a> {
    spec: &'a RolloutSpec,
    strategy: &'a RolloutStrategySpec,
    obs: &'a Observation,
    now: Time,
    notes: Vec<Note>,
    requeue: Option<Duration>,
}

impl Ctx<'_> {
    fn note(&mut self, warning: bool, reason: &'static str, message: String) {
        self.notes.push(Note {
            warning,
            reason,
            message,
        });
    }

    fn again_in(&mut self, seconds: i64) {
        let d = Duration::from_secs(u64::try_from(seconds.max(1)).unwrap_or(1));
        self.requeue = Some(self.requeue.map_or(d, |r| r.min(d)));
    }

    fn elapsed(&self, since: Option<&Time>) -> i64 {
        since.map_or(0, |t| self.obs.now.as_second() - t.0.as_second())
    }
}

/// The next status of a rollout.
pub fn step(
    spec: &RolloutSpec,
    strategy: &RolloutStrategySpec,
    status: &RolloutStatus,
    obs: &Observation,
) -> Step {
    let mut cx = Ctx {
        spec,
        strategy,
        obs,
        now: Time(Timestamp::from_second(obs.now.as_second()).unwrap_or(obs.now)),
        notes: Vec::new(),
        requeue: None,
    };
    let mut st = status.clone();
    if st.stable_revision.is_empty() || st.target_revision.is_empty() {
        // First sight (the first placement is not gated): the current revision is stable.
        complete(&mut cx, &mut st, false);
    } else if st.target_revision != obs.revision {
        start(&mut cx, &mut st);
    }
    sync_membership(&cx, &mut st);
    advance(&mut cx, &mut st);
    set_conditions(&mut st);
    Step {
        status: st,
        notes: cx.notes,
        requeue: cx.requeue,
    }
}

/// A new target revision: every cluster back to Pending on the stable revision (a revert to the
/// stable revision completes at once).
fn start(cx: &mut Ctx<'_>, st: &mut RolloutStatus) {
    let revision = cx.obs.revision.clone();
    if revision == st.stable_revision {
        complete(cx, st, false);
        return;
    }
    st.target_revision.clone_from(&revision);
    st.phase = PHASE_PROGRESSING.into();
    st.current_stage.clear();
    st.message.clear();
    st.stages.clear();
    for c in &mut st.clusters {
        c.revision.clone_from(&st.stable_revision);
        c.state = RolloutState::Pending;
        c.since = Some(cx.now.clone());
        c.healthy_since = None;
        c.reason.clear();
    }
    let msg = format!(
        "rolling out revision {revision} (stable {}) in {} stage(s)",
        st.stable_revision,
        cx.strategy.stages.len()
    );
    cx.note(false, reasons::STARTED, msg);
}

/// The target revision becomes the stable one, on every cluster.
fn complete(cx: &mut Ctx<'_>, st: &mut RolloutStatus, announce: bool) {
    st.stable_revision.clone_from(&cx.obs.revision);
    st.target_revision.clone_from(&cx.obs.revision);
    st.stable_template = Some((&cx.obs.content).into());
    st.phase = PHASE_COMPLETED.into();
    st.current_stage.clear();
    st.message.clear();
    for c in &mut st.clusters {
        c.revision.clone_from(&cx.obs.revision);
        if c.state != RolloutState::Succeeded {
            c.state = RolloutState::Succeeded;
            c.since = Some(cx.now.clone());
        }
    }
    if announce {
        let msg = format!("revision {} is on every cluster", cx.obs.revision);
        cx.note(false, reasons::COMPLETED, msg);
    }
}

/// Cluster and stage entries for the binding's current clusters: new clusters start on the
/// stable revision (Succeeded when nothing is rolling out, else Pending), clusters no longer
/// targeted are dropped, each cluster is in the first stage that selects it.
fn sync_membership(cx: &Ctx<'_>, st: &mut RolloutStatus) {
    let assigned = assign_stages(cx.strategy, &cx.obs.targets, &cx.obs.labels);
    let rolling = st.target_revision != st.stable_revision;
    let mut old: BTreeMap<String, ClusterRolloutStatus> =
        st.clusters.drain(..).map(|c| (c.name.clone(), c)).collect();
    let mut stages: Vec<StageStatus> = Vec::new();
    for (stage, clusters) in &assigned {
        let previous = st.stages.iter().find(|s| &s.name == stage).cloned();
        let mut s = previous.unwrap_or_else(|| StageStatus {
            name: stage.clone(),
            since: Some(cx.now.clone()),
            ..Default::default()
        });
        s.clusters.clone_from(clusters);
        stages.push(s);
        for name in clusters {
            let mut c = old.remove(name).unwrap_or_else(|| ClusterRolloutStatus {
                name: name.clone(),
                revision: st.stable_revision.clone(),
                state: if rolling {
                    RolloutState::Pending
                } else {
                    RolloutState::Succeeded
                },
                since: Some(cx.now.clone()),
                ..Default::default()
            });
            c.stage.clone_from(stage);
            st.clusters.push(c);
        }
    }
    st.stages = stages;
}

/// Rollback, failures, then the stages in order: admit, wait, promote.
fn advance(cx: &mut Ctx<'_>, st: &mut RolloutStatus) {
    if st.target_revision == st.stable_revision {
        if st.phase != PHASE_COMPLETED {
            complete(cx, st, false);
        }
        return;
    }
    if !cx.spec.rollback_revision.is_empty()
        && cx.spec.rollback_revision == st.target_revision
        && st.phase != PHASE_ROLLED_BACK
    {
        roll_back(cx, st);
        return;
    }
    if st.phase == PHASE_HALTED || st.phase == PHASE_ROLLED_BACK {
        return;
    }
    evaluate(cx, st);
    let failures = st
        .clusters
        .iter()
        .filter(|c| c.state == RolloutState::Failed)
        .count();
    let allowed = usize::try_from(cx.strategy.max_failures.unwrap_or(0).max(0)).unwrap_or(0);
    if failures > allowed {
        halt(cx, st, failures, allowed);
        return;
    }
    for i in 0..st.stages.len() {
        if !stage_done(cx, st, i) {
            return;
        }
    }
    complete(cx, st, true);
}

/// Soak and deadline of every cluster updating.
fn evaluate(cx: &mut Ctx<'_>, st: &mut RolloutStatus) {
    let soak = i64::from(cx.strategy.min_success_seconds.unwrap_or(0));
    let deadline = cx
        .strategy
        .progress_deadline_seconds
        .map_or(DEFAULT_PROGRESS_DEADLINE, i64::from);
    for i in 0..st.clusters.len() {
        if st.clusters[i].state != RolloutState::Progressing {
            continue;
        }
        let name = st.clusters[i].name.clone();
        let health = cx
            .obs
            .health
            .get(&name)
            .copied()
            .unwrap_or(Health::NotApplied);
        let c = &mut st.clusters[i];
        if health == Health::Healthy {
            c.healthy_since.get_or_insert_with(|| cx.now.clone());
            c.reason = "Healthy".into();
            let healthy_for = cx.elapsed(c.healthy_since.as_ref());
            if healthy_for >= soak {
                c.state = RolloutState::Succeeded;
                c.since = Some(cx.now.clone());
                let msg = format!(
                    "cluster {name} ({} stage) healthy with revision {} for {healthy_for}s",
                    c.stage, c.revision
                );
                super::metrics::cluster_transition("Succeeded");
                cx.note(false, reasons::CLUSTER_SUCCEEDED, msg);
            } else {
                cx.again_in(soak - healthy_for);
            }
            continue;
        }
        c.healthy_since = None;
        c.reason = match health {
            Health::NotApplied => "NotApplied".into(),
            _ => "Unhealthy".into(),
        };
        let waited = cx.elapsed(c.since.as_ref());
        if waited >= deadline {
            c.state = RolloutState::Failed;
            c.since = Some(cx.now.clone());
            c.reason = "ProgressDeadlineExceeded".into();
            let msg = format!(
                "cluster {name} ({} stage) did not report revision {} healthy within {deadline}s",
                c.stage, c.revision
            );
            super::metrics::cluster_transition("Failed");
            cx.note(true, reasons::CLUSTER_FAILED, msg);
        } else {
            cx.again_in(deadline - waited);
        }
    }
}

/// Whether stage `i` is done; otherwise admits its next clusters (unless paused) or waits.
fn stage_done(cx: &mut Ctx<'_>, st: &mut RolloutStatus, i: usize) -> bool {
    let name = st.stages[i].name.clone();
    let members: Vec<usize> = (0..st.clusters.len())
        .filter(|j| st.clusters[*j].stage == name)
        .collect();
    let busy = |s: &RolloutState| matches!(s, RolloutState::Pending | RolloutState::Progressing);
    if members.iter().any(|j| busy(&st.clusters[*j].state)) {
        st.current_stage.clone_from(&name);
        set_stage_state(cx, &mut st.stages[i], RolloutState::Progressing, "");
        st.phase = if cx.spec.paused {
            PHASE_PAUSED
        } else {
            PHASE_PROGRESSING
        }
        .into();
        if !cx.spec.paused {
            admit(cx, st, &members, i);
        }
        return false;
    }
    if st.stages[i].state != RolloutState::Succeeded {
        set_stage_state(cx, &mut st.stages[i], RolloutState::Succeeded, "");
        super::metrics::stage_promoted();
        let msg = format!(
            "stage {name} succeeded with revision {}",
            st.target_revision
        );
        cx.note(false, reasons::STAGE_SUCCEEDED, msg);
    }
    let Some(stage) = cx.strategy.stages.iter().find(|s| s.name == name) else {
        return true;
    };
    for task in &stage.after_stage_tasks {
        if task.type_ == TASK_TIMED_WAIT {
            let wait = i64::from(task.wait_seconds.unwrap_or(0));
            let waited = cx.elapsed(st.stages[i].since.as_ref());
            if waited < wait {
                st.current_stage.clone_from(&name);
                st.stages[i].reason = TASK_TIMED_WAIT.into();
                st.phase = PHASE_PROGRESSING.into();
                cx.again_in(wait - waited);
                return false;
            }
        } else if task.type_ == TASK_APPROVAL {
            let approval = StageApproval {
                revision: st.target_revision.clone(),
                stage: name.clone(),
            };
            if !cx.spec.approvals.contains(&approval) {
                st.current_stage.clone_from(&name);
                if st.phase != PHASE_AWAITING_APPROVAL {
                    let msg = format!(
                        "stage {name} succeeded; approve it to go on: karmadactl rollout approve"
                    );
                    cx.note(false, reasons::AWAITING_APPROVAL, msg);
                }
                st.stages[i].reason = "AwaitingApproval".into();
                st.phase = PHASE_AWAITING_APPROVAL.into();
                return false;
            }
        }
    }
    st.stages[i].reason.clear();
    true
}

fn set_stage_state(cx: &Ctx<'_>, stage: &mut StageStatus, state: RolloutState, reason: &str) {
    if stage.state != state {
        stage.state = state;
        stage.since = Some(cx.now.clone());
    }
    reason.clone_into(&mut stage.reason);
}

/// Gives the target revision to the stage's next Pending clusters, up to `maxConcurrency`
/// updating at once.
fn admit(cx: &mut Ctx<'_>, st: &mut RolloutStatus, members: &[usize], stage: usize) {
    let limit = cx
        .strategy
        .stages
        .iter()
        .find(|s| s.name == st.stages[stage].name)
        .and_then(|s| s.max_concurrency)
        .map_or(usize::MAX, |m| usize::try_from(m.max(1)).unwrap_or(1));
    let updating = members
        .iter()
        .filter(|j| st.clusters[**j].state == RolloutState::Progressing)
        .count();
    let mut room = limit.saturating_sub(updating);
    for j in members {
        if room == 0 {
            break;
        }
        let c = &mut st.clusters[*j];
        if c.state != RolloutState::Pending {
            continue;
        }
        c.state = RolloutState::Progressing;
        c.revision.clone_from(&st.target_revision);
        c.since = Some(cx.now.clone());
        c.healthy_since = None;
        c.reason = "NotApplied".into();
        room -= 1;
        let msg = format!(
            "cluster {} ({} stage) gets revision {}",
            c.name, c.stage, st.target_revision
        );
        super::metrics::cluster_transition("Progressing");
        cx.note(false, reasons::CLUSTER_UPDATING, msg);
        cx.again_in(1);
    }
}

fn halt(cx: &mut Ctx<'_>, st: &mut RolloutStatus, failures: usize, allowed: usize) {
    st.phase = PHASE_HALTED.into();
    st.message = format!(
        "{failures} cluster(s) failed, {allowed} allowed: no further cluster gets revision {}",
        st.target_revision
    );
    for s in &mut st.stages {
        if s.state == RolloutState::Progressing {
            s.state = RolloutState::Halted;
            s.since = Some(cx.now.clone());
        }
    }
    super::metrics::cluster_transition("Halted");
    let msg = st.message.clone();
    cx.note(true, reasons::HALTED, msg);
}

fn roll_back(cx: &mut Ctx<'_>, st: &mut RolloutStatus) {
    let mut returned = Vec::new();
    for c in &mut st.clusters {
        if c.revision != st.stable_revision {
            returned.push(c.name.clone());
        }
        if c.revision != st.stable_revision || c.state == RolloutState::Pending {
            c.revision.clone_from(&st.stable_revision);
            c.state = RolloutState::Halted;
            c.since = Some(cx.now.clone());
            c.healthy_since = None;
            c.reason = "RolledBack".into();
        }
    }
    for s in &mut st.stages {
        if s.state != RolloutState::Succeeded || s.clusters.iter().any(|c| returned.contains(c)) {
            s.state = RolloutState::Halted;
            s.since = Some(cx.now.clone());
        }
    }
    st.phase = PHASE_ROLLED_BACK.into();
    st.current_stage.clear();
    st.message = format!(
        "revision {} rolled back: clusters {returned:?} returned to revision {}",
        st.target_revision, st.stable_revision
    );
    let msg = st.message.clone();
    cx.note(false, reasons::ROLLED_BACK, msg);
}

fn set_conditions(st: &mut RolloutStatus) {
    let completed = st.phase == PHASE_COMPLETED;
    let halted = st.phase == PHASE_HALTED;
    let reason = if st.phase.is_empty() {
        PHASE_PROGRESSING
    } else {
        st.phase.as_str()
    };
    let c = new_condition(
        CONDITION_COMPLETED,
        if completed { "True" } else { "False" },
        reason,
        &st.message,
    );
    set_condition(&mut st.conditions, c);
    let h = new_condition(
        CONDITION_HALTED,
        if halted { "True" } else { "False" },
        reason,
        &st.message,
    );
    set_condition(&mut st.conditions, h);
}

#[cfg(test)]
mod tests;
