//! When Karmada's scheduler (re)schedules a binding (`pkg/scheduler/scheduler.go`, `helper.go`,
//! `pkg/util/binding.go`), and the condition, annotation and event texts it writes.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use apimachinery::go_escape_json;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use karmada_apis::Cluster;
use karmada_apis::policy::v1alpha1::{ClusterAffinityTerm, Placement, ReplicaSchedulingType};
use karmada_apis::well_known::{
    BINDING_REASON_SUCCESS, BINDING_SCHEDULED, POLICY_PLACEMENT_ANNOTATION,
};
use karmada_apis::work::v1alpha2::{ResourceBindingSpec, ResourceBindingStatus, TargetCluster};
use karmada_policy::selector::cluster_name;

use crate::{ScheduleError, ScheduleResult};

/// The `Scheduled` condition message on success.
pub const SUCCESS_MESSAGE: &str = "Binding has been scheduled successfully.";

/// Why a binding is (re)scheduled, in Karmada's order of checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScheduleTrigger {
    /// The placement differs from the applied-placement annotation (or there is none yet).
    PlacementChanged,
    /// The replica count no longer matches the result (scale up/down).
    ReplicasChanged,
    /// `spec.rescheduleTriggeredAt` is later than `status.lastScheduledTime`.
    RescheduleTriggered,
    /// Non-workloads and `Duplicated` placements are scheduled on every reconcile.
    Duplicated,
    /// A cluster of the result is being deleted.
    TerminatingTargetClusters,
}

impl ScheduleTrigger {
    /// The `schedule_type` label Karmada's `schedule_attempts_total` metric uses.
    pub fn schedule_type(self) -> &'static str {
        match self {
            Self::ReplicasChanged => "ScaleSchedule",
            _ => "ReconcileSchedule",
        }
    }

    /// A short description for logs and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PlacementChanged => "placement changed",
            Self::ReplicasChanged => "replicas changed",
            Self::RescheduleTriggered => "reschedule triggered",
            Self::Duplicated => "scheduling type is duplicated",
            Self::TerminatingTargetClusters => "scheduled clusters are being deleted",
        }
    }
}

/// Karmada's `placementChanged`: compares the placement with the applied-placement annotation.
/// Missing annotation → changed; unparsable → unchanged. Changes confined to `clusterAffinities`
/// count only when the observed term itself changed (or no term is observed).
pub fn placement_changed(
    placement: &Placement,
    applied: Option<&str>,
    observed_affinity: &str,
) -> bool {
    let Some(applied) = applied.filter(|a| !a.is_empty()) else {
        return true;
    };
    let Ok(applied) = serde_json::from_str::<Placement>(applied) else {
        return false;
    };
    if *placement == applied {
        return false;
    }
    if placement.cluster_affinity != applied.cluster_affinity
        || placement.cluster_tolerations != applied.cluster_tolerations
        || placement.spread_constraints != applied.spread_constraints
        || placement.replica_scheduling != applied.replica_scheduling
    {
        return true;
    }
    cluster_affinities_changed(
        &placement.cluster_affinities,
        &applied.cluster_affinities,
        observed_affinity,
    )
}

fn cluster_affinities_changed(
    current: &[ClusterAffinityTerm],
    applied: &[ClusterAffinityTerm],
    observed: &str,
) -> bool {
    if observed.is_empty() {
        return true;
    }
    let find =
        |terms: &[ClusterAffinityTerm]| terms.iter().find(|t| t.affinity_name == observed).cloned();
    match (find(current), find(applied)) {
        (Some(a), Some(b)) => a != b,
        _ => true,
    }
}

/// Karmada's `IsBindingReplicasChanged`: `Duplicated` results must carry the replica count on
/// every cluster, `Divided` results must sum to it. Without a replica-scheduling strategy: never.
pub fn replicas_changed(spec: &ResourceBindingSpec) -> bool {
    let Some(strategy) = spec
        .placement
        .as_ref()
        .and_then(|p| p.replica_scheduling.as_ref())
    else {
        return false;
    };
    match strategy.replica_scheduling_type {
        ReplicaSchedulingType::Duplicated => {
            spec.clusters.iter().any(|c| c.replicas != spec.replicas)
        }
        ReplicaSchedulingType::Divided => {
            spec.clusters
                .iter()
                .map(|c| i64::from(c.replicas))
                .sum::<i64>()
                != i64::from(spec.replicas)
        }
        ReplicaSchedulingType::Other(_) => false,
    }
}

/// Karmada's `RescheduleRequired`: `spec.rescheduleTriggeredAt` later than
/// `status.lastScheduledTime` (never before the first successful schedule).
pub fn reschedule_required(
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
) -> bool {
    let (Some(Time(triggered)), Some(Time(last))) = (
        spec.reschedule_triggered_at.as_ref(),
        status.and_then(|s| s.last_scheduled_time.as_ref()),
    ) else {
        return false;
    };
    triggered > last
}

/// Karmada's decision whether to schedule a binding now (`doScheduleBinding`), `None` when nothing
/// relevant changed (the controller then only records `schedulerObservedGeneration`).
/// `annotations` are the binding's annotations; `clusters` every Cluster object.
pub fn schedule_trigger<C: Borrow<Cluster>>(
    annotations: Option<&BTreeMap<String, String>>,
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
    clusters: &[C],
) -> Option<ScheduleTrigger> {
    let placement = spec.placement.as_ref()?;
    let applied = annotations
        .and_then(|a| a.get(POLICY_PLACEMENT_ANNOTATION))
        .map(String::as_str);
    let observed = status
        .map(|s| s.scheduler_observed_affinity_name.as_str())
        .unwrap_or_default();
    if placement_changed(placement, applied, observed) {
        return Some(ScheduleTrigger::PlacementChanged);
    }
    if replicas_changed(spec) {
        return Some(ScheduleTrigger::ReplicasChanged);
    }
    if reschedule_required(spec, status) {
        return Some(ScheduleTrigger::RescheduleTriggered);
    }
    if !spec.is_workload()
        || placement.replica_scheduling_type() == ReplicaSchedulingType::Duplicated
    {
        return Some(ScheduleTrigger::Duplicated);
    }
    let terminating = clusters.iter().map(Borrow::borrow).any(|c: &Cluster| {
        c.metadata.deletion_timestamp.is_some() && spec.target_contains(cluster_name(c))
    });
    terminating.then_some(ScheduleTrigger::TerminatingTargetClusters)
}

/// The value of the `policy.karmada.io/applied-placement` annotation: the placement as compact
/// JSON (with Go's HTML escaping).
pub fn applied_placement_annotation(placement: &Placement) -> String {
    // Serializing plain data into a String cannot fail.
    go_escape_json(&serde_json::to_string(placement).unwrap_or_default())
}

/// The `Scheduled` condition for a result: `True/Success` or `False/<reason>` with Karmada's
/// message. `now` becomes the transition time (see [`apimachinery::set_status_condition`]).
pub fn scheduled_condition(result: &Result<ScheduleResult, ScheduleError>, now: Time) -> Condition {
    let (status, reason, message) = match result {
        Ok(_) => ("True", BINDING_REASON_SUCCESS, SUCCESS_MESSAGE.to_owned()),
        Err(e) => ("False", e.reason(), e.to_string()),
    };
    Condition {
        type_: BINDING_SCHEDULED.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        last_transition_time: now,
        observed_generation: None,
    }
}

/// The `ScheduleBindingSucceed` event message: `Binding has been scheduled successfully. Result:
/// {member1:2, member2:1}` (Karmada writes `Result {…}`, without the colon, for
/// ClusterResourceBindings).
pub fn success_event_message(clusters: &[TargetCluster], cluster_scoped: bool) -> String {
    let result = clusters
        .iter()
        .map(|c| format!("{}:{}", c.name, c.replicas))
        .collect::<Vec<_>>()
        .join(", ");
    if cluster_scoped {
        format!("{SUCCESS_MESSAGE} Result {{{result}}}")
    } else {
        format!("{SUCCESS_MESSAGE} Result: {{{result}}}")
    }
}
