//! Karmada's scheduling algorithm as pure functions: given a binding (placement, replicas, replica
//! requirements, previous result) and the Cluster objects, compute the target clusters and their
//! replicas, or a failure with Karmada's `Scheduled` condition reason.
//!
//! The steps follow `karmada-scheduler` (`pkg/scheduler/core`):
//!
//! 1. **Filter** every cluster not being deleted: API enablement, taints vs `clusterTolerations`
//!    (`NoSchedule`/`NoExecute`; clusters already scheduled pass both), cluster affinity, the
//!    properties spread constraints group by, graceful eviction, and where the other bindings of
//!    its workload (anti-)affinity groups are, when the caller passes them ([`filter`]).
//! 2. **Score**: 100 for clusters the binding already runs on, else 0.
//! 3. **Select** with spread constraints ([`spread`]), after estimating the replicas each cluster can
//!    still take from its resource summary ([`estimate`]), lowered by what the member's
//!    `karmada-scheduler-estimator` answered when the caller passes those answers
//!    ([`AccurateEstimates`]).
//! 4. **Assign** replicas: `Duplicated`, `Divided` by static weights (Webster method), or by
//!    available replicas (`Aggregated`, dynamic weights) keeping the previous result stable
//!    ([`divide`]), with overflow affinity groups filled in order.
//!
//! With ordered `clusterAffinities` each term is tried in turn (from the observed one, or the first
//! after a reschedule request) and the first that yields a result wins.
//!
//! [`preempt`] (karmada-rs's own) chooses the lower-priority placements whose room makes a binding
//! that does not fit fit.
//!
//! [`trigger`] holds the "should this binding be scheduled now" decisions and the condition and
//! event texts the controller writes.

pub mod divide;
pub mod estimate;
pub mod filter;
pub mod observe;
pub mod plugins;
pub mod preempt;
mod spread;
pub mod trigger;

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use karmada_apis::Cluster;
use karmada_apis::policy::v1alpha1::Placement;
use karmada_apis::well_known::{
    BINDING_REASON_NO_CLUSTER_FIT, BINDING_REASON_QUOTA_EXCEEDED, BINDING_REASON_SCHEDULER_ERROR,
    BINDING_REASON_UNSCHEDULABLE,
};
use karmada_apis::work::v1alpha2::{ResourceBindingSpec, ResourceBindingStatus, TargetCluster};
use karmada_policy::selector::{cluster_matches, cluster_name};
use thiserror::Error;

use crate::divide::{AssignError, AssignInput, Strategy, assign_to_clusters, strategy_of};
use crate::observe::{Code, ExtensionPoint, Observer, Step, Unobserved};
use crate::plugins::{Plugin, PluginSet};
use crate::spread::{ClusterDetail, compare_clusters, select_best_clusters};

pub use crate::divide::{TieBreak, allocate_webster_seats, divide_by_weight};
pub use crate::filter::WorkloadGroupPeers;
pub use crate::trigger::{
    SUCCESS_MESSAGE, ScheduleTrigger, applied_placement_annotation, placement_changed,
    replicas_changed, reschedule_required, schedule_trigger, scheduled_condition,
    success_event_message,
};

/// Scheduler options (Karmada's scheduler flags that change results) and the answers of the
/// accurate estimators.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScheduleOptions {
    /// `--enable-empty-workload-propagation`: keep selected clusters that got 0 replicas in the
    /// result (with 0 replicas) instead of dropping them.
    pub enable_empty_workload_propagation: bool,
    /// `--plugins`: the filter and score plugins that run.
    pub plugins: PluginSet,
    /// With `--enable-scheduler-estimator`: what each cluster's `karmada-scheduler-estimator`
    /// answered for this binding (see [`AccurateEstimates`]); `None` when the accurate estimator is
    /// off, and then only the general estimate counts.
    pub accurate_estimates: Option<AccurateEstimates>,
    /// With the `WorkloadAffinity` gate: where the other bindings of this binding's workload
    /// affinity groups are; `None` when the gate is off or the binding names no group.
    pub workload_groups: Option<WorkloadGroupPeers>,
    /// The `MultiplePodTemplatesScheduling` gate: a binding for which
    /// [`multi_template_applicable`] holds is estimated in whole component sets
    /// ([`estimate::max_available_component_sets`], and the accurate estimators'
    /// `MaxAvailableComponentSets`) instead of replicas.
    pub multiple_pod_templates: bool,
}

impl ScheduleOptions {
    /// Whether `spec` is estimated in whole component sets: the gate is on and
    /// [`multi_template_applicable`] holds.
    pub fn counts_component_sets(&self, spec: &ResourceBindingSpec) -> bool {
        self.multiple_pod_templates && multi_template_applicable(spec)
    }
}

/// Whether a binding is estimated in whole component sets under the `MultiplePodTemplatesScheduling`
/// gate (Karmada's `isMultiTemplateSchedulingApplicable`): it has two or more components and a
/// spread constraint by cluster asks for exactly one cluster (`minGroups` = `maxGroups` = 1).
pub fn multi_template_applicable(spec: &ResourceBindingSpec) -> bool {
    if spec.components.len() < 2 {
        return false;
    }
    let Some(placement) = &spec.placement else {
        return false;
    };
    spread::defaulted_constraints(placement).iter().any(|c| {
        c.spread_by_field == Some(karmada_apis::policy::v1alpha1::SpreadFieldValue::Cluster)
            && c.min_groups == 1
            && c.max_groups == 1
    })
}

/// The answers of Karmada's accurate estimator (`karmada-scheduler-estimator`,
/// `MaxAvailableReplicas`, or `MaxAvailableComponentSets` for a binding estimated in component
/// sets) by cluster name: `Some(n)` the replicas (sets) the member can still take
/// ([`UNAUTHENTIC_REPLICA`] when the estimator could not tell), `None` when it gave no answer (no
/// estimator connected, unreachable, timed out, failed).
///
/// They combine with the general estimate as in Karmada's `calAvailableReplicas`: each cluster
/// takes the smaller of the two, an [`UNAUTHENTIC_REPLICA`] answer is ignored, and when any cluster
/// that passed the filters has no answer, every accurate answer is ignored for that attempt (Karmada
/// discards an estimator's whole result when one of its calls fails).
pub type AccurateEstimates = BTreeMap<String, Option<i32>>;

/// Karmada's `UnauthenticReplica`: the estimator's "cannot tell", never a limit.
pub const UNAUTHENTIC_REPLICA: i32 = -1;

/// A successful scheduling decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleResult {
    /// The new `spec.clusters`.
    pub clusters: Vec<TargetCluster>,
    /// With `clusterAffinities`: the term that produced the result, for
    /// `status.schedulerObservingAffinityName`. `None` otherwise.
    pub affinity_name: Option<String>,
    /// The clusters that passed the filters (for that term), for noticing changes later.
    pub feasible: BTreeSet<String>,
}

/// Why a binding could not be scheduled; the variant is the `Scheduled` condition reason and the
/// message is Karmada's.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ScheduleError {
    /// No cluster passed the filters (`NoClusterFit`). Karmada clears `spec.clusters`.
    #[error("{message}")]
    NoClusterFit {
        /// `0/N clusters are available: …`.
        message: String,
        /// Why each cluster was filtered out (cluster name → reason).
        diagnosis: BTreeMap<String, String>,
    },
    /// Clusters fit but cannot hold the replicas (`Unschedulable`). `spec.clusters` is kept.
    #[error("{0}")]
    Unschedulable(String),
    /// Any other failure, e.g. unsatisfiable spread constraints (`SchedulerError`).
    #[error("{0}")]
    SchedulerError(String),
    /// The placement would exceed a FederatedResourceQuota (`QuotaExceeded`; Karmada's
    /// ResourceBinding webhook refuses it). `spec.clusters` is kept; retried.
    #[error("{0}")]
    QuotaExceeded(String),
}

impl ScheduleError {
    /// The `Scheduled` condition reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NoClusterFit { .. } => BINDING_REASON_NO_CLUSTER_FIT,
            Self::Unschedulable(_) => BINDING_REASON_UNSCHEDULABLE,
            Self::SchedulerError(_) => BINDING_REASON_SCHEDULER_ERROR,
            Self::QuotaExceeded(_) => BINDING_REASON_QUOTA_EXCEEDED,
        }
    }

    /// Whether Karmada writes an empty `spec.clusters` (and the applied placement) for this
    /// failure: it does for `NoClusterFit` only.
    pub fn clears_clusters(&self) -> bool {
        matches!(self, Self::NoClusterFit { .. })
    }

    /// Whether Karmada retries the binding after this failure (it does not for `NoClusterFit`,
    /// which waits for a cluster or policy change).
    pub fn should_retry(&self) -> bool {
        !matches!(self, Self::NoClusterFit { .. })
    }
}

/// A `clusterAffinities` term that was tried and failed before the final outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedTerm {
    /// Index of the term in `placement.clusterAffinities`.
    pub index: usize,
    /// The term's `affinityName`.
    pub affinity_name: String,
    /// Why it failed.
    pub error: ScheduleError,
}

/// The outcome of [`schedule_detailed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleReport {
    /// The decision, or the failure (for `clusterAffinities`: the failure of the first term tried).
    pub result: Result<ScheduleResult, ScheduleError>,
    /// Terms tried and failed, in order (Karmada records a warning Event for each).
    pub failed_terms: Vec<FailedTerm>,
}

/// Schedules a binding over `clusters` (every Cluster object, including ones being deleted).
pub fn schedule<C: Borrow<Cluster>>(
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
    clusters: &[C],
    options: &ScheduleOptions,
) -> Result<ScheduleResult, ScheduleError> {
    schedule_detailed(spec, status, clusters, options).result
}

/// Like [`schedule`], also reporting the `clusterAffinities` terms that failed on the way.
pub fn schedule_detailed<C: Borrow<Cluster>>(
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
    clusters: &[C],
    options: &ScheduleOptions,
) -> ScheduleReport {
    schedule_observed(spec, status, clusters, options, &mut Unobserved)
}

/// Like [`schedule_detailed`], reporting each step, extension point and plugin run to `observer`.
pub fn schedule_observed<C: Borrow<Cluster>>(
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
    clusters: &[C],
    options: &ScheduleOptions,
    observer: &mut dyn Observer,
) -> ScheduleReport {
    let clusters: Vec<&Cluster> = clusters.iter().map(Borrow::borrow).collect();
    let Some(placement) = spec.placement.as_ref() else {
        return ScheduleReport {
            result: Err(ScheduleError::SchedulerError(
                "failed to get placement from the binding".to_owned(),
            )),
            failed_terms: Vec::new(),
        };
    };
    let fresh = reschedule_required(spec, status);
    let observed = status
        .map(|s| s.scheduler_observed_affinity_name.as_str())
        .unwrap_or_default();

    if placement.cluster_affinities.is_empty() {
        let run = Run {
            spec,
            placement,
            fresh,
            clusters: &clusters,
            options,
        };
        let result = run
            .once(observed, observer)
            .map(|(clusters, feasible)| ScheduleResult {
                clusters,
                affinity_name: None,
                feasible,
            });
        return ScheduleReport {
            result,
            failed_terms: Vec::new(),
        };
    }

    let start = if fresh {
        0
    } else {
        affinity_index(placement, observed)
    };
    let mut failed_terms = Vec::new();
    let run = Run {
        spec,
        placement,
        fresh,
        clusters: &clusters,
        options,
    };
    for (index, term) in placement.cluster_affinities.iter().enumerate().skip(start) {
        match run.once(&term.affinity_name, observer) {
            Ok((targets, feasible)) => {
                return ScheduleReport {
                    result: Ok(ScheduleResult {
                        clusters: targets,
                        affinity_name: Some(term.affinity_name.clone()),
                        feasible,
                    }),
                    failed_terms,
                };
            }
            Err(error) => failed_terms.push(FailedTerm {
                index,
                affinity_name: term.affinity_name.clone(),
                error,
            }),
        }
    }
    let first = failed_terms.first().map_or_else(
        || ScheduleError::SchedulerError("no cluster affinity term to schedule with".to_owned()),
        |t| t.error.clone(),
    );
    ScheduleReport {
        result: Err(first),
        failed_terms,
    }
}

/// Karmada's `getAffinityIndex`: the index of the observed term, 0 when unknown.
pub fn affinity_index(placement: &Placement, observed: &str) -> usize {
    if observed.is_empty() {
        return 0;
    }
    placement
        .cluster_affinities
        .iter()
        .position(|t| t.affinity_name == observed)
        .unwrap_or(0)
}

/// The names of the clusters that currently pass the filters for the binding (for the observed
/// `clusterAffinities` term), e.g. to notice clusters joining, leaving or getting tainted.
pub fn feasible_cluster_names<C: Borrow<Cluster>>(
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
    clusters: &[C],
    options: &ScheduleOptions,
) -> BTreeSet<String> {
    let Some(placement) = spec.placement.as_ref() else {
        return BTreeSet::new();
    };
    let observed = if placement.cluster_affinities.is_empty() {
        ""
    } else {
        let name = status
            .map(|s| s.scheduler_observed_affinity_name.as_str())
            .unwrap_or_default();
        placement
            .cluster_affinities
            .get(affinity_index(placement, name))
            .map_or("", |t| t.affinity_name.as_str())
    };
    let clusters: Vec<&Cluster> = clusters.iter().map(Borrow::borrow).collect();
    filter_clusters(
        spec,
        placement,
        observed,
        &clusters,
        options,
        &mut Unobserved,
    )
    .0
    .into_iter()
    .map(|c| cluster_name(c).to_owned())
    .collect()
}

/// The clusters that pass the filters for any `clusterAffinities` term (or for the placement when
/// it has none): the ones whose accurate estimate a scheduling attempt may use.
pub fn candidate_cluster_names<C: Borrow<Cluster>>(
    spec: &ResourceBindingSpec,
    clusters: &[C],
    options: &ScheduleOptions,
) -> BTreeSet<String> {
    let Some(placement) = spec.placement.as_ref() else {
        return BTreeSet::new();
    };
    let clusters: Vec<&Cluster> = clusters.iter().map(Borrow::borrow).collect();
    let terms: Vec<&str> = if placement.cluster_affinities.is_empty() {
        vec![""]
    } else {
        placement
            .cluster_affinities
            .iter()
            .map(|t| t.affinity_name.as_str())
            .collect()
    };
    terms
        .into_iter()
        .flat_map(|term| {
            filter_clusters(spec, placement, term, &clusters, options, &mut Unobserved).0
        })
        .map(|c| cluster_name(c).to_owned())
        .collect()
}

/// Runs the filters; returns the feasible clusters and, for the others, why they were rejected.
fn filter_clusters<'c>(
    spec: &ResourceBindingSpec,
    placement: &Placement,
    observed_affinity: &str,
    clusters: &[&'c Cluster],
    options: &ScheduleOptions,
    observer: &mut dyn Observer,
) -> (Vec<&'c Cluster>, BTreeMap<String, String>) {
    let started = Instant::now();
    let affinities = filter::effective_affinities(placement, observed_affinity, spec.is_workload());
    let mut feasible = Vec::new();
    let mut diagnosis = BTreeMap::new();
    for &cluster in clusters {
        if cluster.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match filter::filter_cluster(
            spec,
            placement,
            affinities.as_deref(),
            options.workload_groups.as_ref(),
            cluster,
            options.plugins,
            observer,
        ) {
            Ok(()) => feasible.push(cluster),
            Err(reason) => {
                diagnosis.insert(cluster_name(cluster).to_owned(), reason);
            }
        }
    }
    observer.step(Step::Filter, started.elapsed());
    (feasible, diagnosis)
}

/// Karmada's `getClusterOverflowOrder`.
fn overflow_order(cluster: &Cluster, placement: &Placement, observed_affinity: &str) -> i32 {
    if placement.cluster_affinity.is_some() || placement.cluster_affinities.is_empty() {
        return 0;
    }
    let Some(term) = placement
        .cluster_affinities
        .iter()
        .find(|t| t.affinity_name == observed_affinity)
    else {
        return 1000;
    };
    if cluster_matches(cluster, &term.cluster_affinity) {
        return 0;
    }
    term.overflow_affinities
        .iter()
        .position(|o| cluster_matches(cluster, &o.cluster_affinity))
        .map_or(1000, |i| i32::try_from(i + 1).unwrap_or(1000))
}

/// Karmada's `calAvailableReplicas`: the general estimate, lowered by the accurate one when it
/// counts (see [`accurate_answers`]); in whole component sets when `sets` (see
/// [`ScheduleOptions::multiple_pod_templates`]).
fn available_replicas(
    cluster: &Cluster,
    spec: &ResourceBindingSpec,
    accurate: Option<i32>,
    sets: bool,
) -> i32 {
    if spec.replicas == 0 && spec.components.is_empty() {
        return i32::MAX;
    }
    let mut estimated = if sets {
        estimate::max_available_component_sets(cluster, &spec.components)
    } else {
        estimate::max_available_replicas(cluster, spec.replica_requirements.as_ref())
    };
    if let Some(accurate) = accurate
        && accurate != UNAUTHENTIC_REPLICA
    {
        estimated = estimated.min(accurate);
    }
    if estimated == i32::MAX {
        spec.replicas
    } else {
        estimated
    }
}

/// The accurate answers that count for one attempt over `feasible`: all of them when every
/// feasible cluster has one, none otherwise (Karmada ignores an estimator whose call failed for any
/// of the clusters it was asked about).
fn accurate_answers<'a>(
    estimates: Option<&'a AccurateEstimates>,
    feasible: &[&Cluster],
) -> Option<&'a AccurateEstimates> {
    estimates.filter(|answers| {
        feasible
            .iter()
            .all(|c| matches!(answers.get(cluster_name(c)), Some(Some(_))))
    })
}

/// Whether the observed term has overflow groups (Karmada's `enableOverflow`).
fn overflow_enabled(placement: &Placement, observed_affinity: &str) -> bool {
    placement.cluster_affinity.is_none()
        && !observed_affinity.is_empty()
        && placement
            .cluster_affinities
            .iter()
            .any(|t| t.affinity_name == observed_affinity && !t.overflow_affinities.is_empty())
}

/// Karmada's score plugins over the feasible clusters: `ClusterLocality` gives 100 to a cluster
/// the binding is already scheduled to, `ClusterAffinity` 0 to every cluster (then normalizes).
fn score_clusters(
    spec: &ResourceBindingSpec,
    feasible: &[&Cluster],
    plugins: PluginSet,
    observer: &mut dyn Observer,
) -> Vec<i64> {
    let started = Instant::now();
    let mut scores = vec![0; feasible.len()];
    for plugin in plugins.iter().filter(|p| p.scores()) {
        for (score, cluster) in scores.iter_mut().zip(feasible) {
            let ran = Instant::now();
            if plugin == Plugin::ClusterLocality
                && !spec.clusters.is_empty()
                && spec.target_contains(cluster_name(cluster))
            {
                *score += 100;
            }
            observer.plugin(plugin, ExtensionPoint::Score, Code::Success, ran.elapsed());
        }
        if plugin == Plugin::ClusterAffinity {
            observer.plugin(
                plugin,
                ExtensionPoint::ScoreExtensionNormalize,
                Code::Success,
                Duration::ZERO,
            );
        }
    }
    observer.extension_point(ExtensionPoint::Score, Code::Success, started.elapsed());
    observer.step(Step::Score, started.elapsed());
    scores
}

/// What one binding is scheduled with, for every affinity term tried.
struct Run<'a, 'c> {
    spec: &'a ResourceBindingSpec,
    placement: &'a Placement,
    fresh: bool,
    clusters: &'a [&'c Cluster],
    options: &'a ScheduleOptions,
}

impl Run<'_, '_> {
    /// One run of the algorithm with a fixed affinity term (Karmada's `genericScheduler.Schedule`).
    fn once(
        &self,
        observed_affinity: &str,
        observer: &mut dyn Observer,
    ) -> Result<(Vec<TargetCluster>, BTreeSet<String>), ScheduleError> {
        let Run {
            spec,
            placement,
            fresh,
            clusters,
            options,
        } = *self;
        let (feasible, diagnosis) = filter_clusters(
            spec,
            placement,
            observed_affinity,
            clusters,
            options,
            observer,
        );
        if feasible.is_empty() {
            return Err(ScheduleError::NoClusterFit {
                message: filter::fit_error_message(clusters.len(), &diagnosis),
                diagnosis,
            });
        }
        let feasible_names: BTreeSet<String> = feasible
            .iter()
            .map(|c| cluster_name(c).to_owned())
            .collect();
        let scores = score_clusters(spec, &feasible, options.plugins, observer);

        let started = Instant::now();
        let accurate = accurate_answers(options.accurate_estimates.as_ref(), &feasible);
        let sets = options.counts_component_sets(spec);
        let mut details: Vec<ClusterDetail<'_>> = feasible
            .iter()
            .zip(scores)
            .map(|(&cluster, score)| {
                let name = cluster_name(cluster).to_owned();
                let answer = accurate.and_then(|a| a.get(&name).copied().flatten());
                let allocatable = available_replicas(cluster, spec, answer, sets);
                let available =
                    i64::from(allocatable) + i64::from(spec.assigned_replicas_for_cluster(&name));
                ClusterDetail {
                    overflow_order: overflow_order(cluster, placement, observed_affinity),
                    name,
                    score,
                    available_replicas: available,
                    allocatable_replicas: allocatable,
                    cluster,
                }
            })
            .collect();
        details.sort_by(compare_clusters);
        let selected = select_best_clusters(placement, spec, &details, spec.replicas);
        observer.step(Step::Select, started.elapsed());
        let selected = selected.map_err(|e| {
            ScheduleError::SchedulerError(format!("failed to select clusters: {e}"))
        })?;

        let started = Instant::now();
        let targets = assign_replicas(spec, placement, observed_affinity, fresh, &selected);
        observer.step(Step::AssignReplicas, started.elapsed());
        let mut targets = targets?;
        if options.enable_empty_workload_propagation {
            for c in &selected {
                if !targets.iter().any(|t| t.name == c.name) {
                    targets.push(TargetCluster {
                        name: c.name.clone(),
                        replicas: 0,
                        components: Vec::new(),
                    });
                }
            }
        }
        Ok((targets, feasible_names))
    }
}

/// Karmada's `AssignReplicas`.
fn assign_replicas(
    spec: &ResourceBindingSpec,
    placement: &Placement,
    observed_affinity: &str,
    fresh: bool,
    selected: &[ClusterDetail<'_>],
) -> Result<Vec<TargetCluster>, ScheduleError> {
    let wrap = |e: AssignError| match e {
        AssignError::Unschedulable(m) => {
            ScheduleError::Unschedulable(format!("failed to assign replicas: {m}"))
        }
        AssignError::Other(m) => {
            ScheduleError::SchedulerError(format!("failed to assign replicas: {m}"))
        }
    };
    if selected.is_empty() {
        return Err(wrap(AssignError::Other(
            "no clusters available to schedule".to_owned(),
        )));
    }
    let is_workload =
        (spec.replicas > 0 || spec.replica_requirements.is_some()) && spec.components.len() <= 1;
    if !is_workload {
        // Non-workloads (and multi-component workloads) go to every selected cluster.
        return Ok(selected
            .iter()
            .map(|c| TargetCluster {
                name: c.name.clone(),
                replicas: 0,
                components: Vec::new(),
            })
            .collect());
    }
    let strategy: Strategy = strategy_of(placement.replica_scheduling.as_ref())
        .map_err(|m| wrap(AssignError::Other(m)))?;
    let tie = TieBreak::for_uid(&spec.resource.uid);
    let input = |candidates, replicas| AssignInput {
        candidates,
        spec,
        replicas,
        strategy,
        fresh,
        tie,
    };
    if !overflow_enabled(placement, observed_affinity) {
        return assign_to_clusters(&input(selected, spec.replicas)).map_err(wrap);
    }
    // Overflow: fill the primary group first, then each overflow group in order.
    let mut tiers: BTreeMap<i32, Vec<ClusterDetail<'_>>> = BTreeMap::new();
    for c in selected {
        tiers.entry(c.overflow_order).or_default().push(c.clone());
    }
    let mut remaining = i64::from(spec.replicas);
    let mut results = Vec::new();
    for tier in tiers.values() {
        let capacity: i64 = tier.iter().map(|c| c.available_replicas).sum();
        let share = i32::try_from(remaining.min(capacity).max(0)).unwrap_or(i32::MAX);
        let assigned = assign_to_clusters(&input(tier, share)).map_err(wrap)?;
        results.extend(assigned);
        remaining -= i64::from(share);
        if remaining <= 0 {
            break;
        }
    }
    if remaining > 0 {
        return Err(ScheduleError::Unschedulable(
            "failed to assign replicas: Clusters available replicas are not enough to schedule."
                .to_owned(),
        ));
    }
    Ok(results)
}

#[cfg(test)]
mod tests;
