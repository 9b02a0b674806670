//! Deciding whether a binding is (re)scheduled, running the scheduling algorithm, checking the
//! result against FederatedResourceQuotas, and handing it to [`super::write`].

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use karmada_apis::policy::v1alpha1::{ClusterAffinity, Placement};
use karmada_apis::work::v1alpha2::{ResourceBindingSpec, ResourceBindingStatus};
use karmada_apis::{Cluster, ResourceBinding};
use karmada_controllers_common::binding::{
    BindingObject, FEATURE_MULTIPLE_POD_TEMPLATES_SCHEDULING,
};
use karmada_controllers_common::quota::placement_exceeds;
use karmada_scheduler::{
    self as scheduler, ScheduleError, ScheduleOptions, ScheduleResult, ScheduleTrigger,
};
use kube::Resource;
use serde_json::json;

use super::Scheduler;
use super::error::SchedulerError;
use super::metrics::{Recorder, observe_attempt};
use super::write::{key_of, namespace_and_name, result_unchanged, status_patch, with_condition};

/// The affinity in force for a binding (the observed `clusterAffinities` term, else `clusterAffinity`).
pub(super) fn current_affinity<'a>(
    placement: &'a Placement,
    status: Option<&ResourceBindingStatus>,
) -> Option<&'a ClusterAffinity> {
    if placement.cluster_affinities.is_empty() {
        return placement.cluster_affinity.as_ref();
    }
    let observed = status
        .map(|s| s.scheduler_observed_affinity_name.as_str())
        .unwrap_or_default();
    placement
        .cluster_affinities
        .get(scheduler::affinity_index(placement, observed))
        .map(|t| &t.cluster_affinity)
}

impl Scheduler {
    /// Decides whether to schedule and does it. Returns the binding generation now handled.
    pub(super) async fn do_schedule<B: BindingObject>(
        &self,
        k: &str,
        b: &B,
        cluster_triggered: bool,
    ) -> Result<i64, SchedulerError> {
        let inner = &self.inner;
        let spec = b.binding_spec();
        let status = b.binding_status();
        let meta = b.meta();
        let generation = meta.generation.unwrap_or_default();
        let namespace = meta.namespace.clone().unwrap_or_default();
        let name = meta.name.clone().unwrap_or_default();
        // A binding of a workload (anti-)affinity group waits for the others being scheduled.
        let groups = inner.workload_groups.as_ref();
        let _turn = match groups {
            Some(groups) => groups.turn(b).await,
            None => None,
        };
        let options = ScheduleOptions {
            workload_groups: groups.and_then(|g| g.peers(b, &inner.rb.store())),
            multiple_pod_templates: inner
                .ctx
                .settings
                .feature_gates
                .enabled(FEATURE_MULTIPLE_POD_TEMPLATES_SCHEDULING),
            ..inner.options().clone()
        };
        let mut clusters: Vec<Arc<Cluster>> = inner.clusters.store().list();
        if let Some(claims) = &inner.preemption {
            clusters = claims.view(k, spec.schedule_priority_value(), clusters);
        }
        if spec.placement.is_none() {
            let result = scheduler::schedule(spec, status, &clusters, &options);
            return self.finish::<B>(b, result).await;
        }
        let feasible_now = scheduler::feasible_cluster_names(spec, status, &clusters, &options);
        let targets: BTreeSet<String> = spec.clusters.iter().map(|c| c.name.clone()).collect();
        let existing: HashSet<&str> = clusters
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .filter_map(|c| c.metadata.name.as_deref())
            .collect();
        let trigger =
            scheduler::schedule_trigger(meta.annotations.as_ref(), spec, status, &clusters);
        // Karmada's `schedule_type`: a replica change is a scale, anything else a reconcile.
        let schedule_type = trigger.map_or("ReconcileSchedule", ScheduleTrigger::schedule_type);
        let reason = match trigger {
            // Duplicated results are recomputed on every binding change, as in Karmada; after a
            // Cluster change only when the clusters that fit differ from the result, so a Cluster
            // status flurry does not rewrite every binding.
            Some(ScheduleTrigger::Duplicated) if cluster_triggered => {
                (targets != feasible_now).then_some("fitting clusters changed")
            }
            Some(t) => Some(t.as_str()),
            None if targets.iter().any(|t| !existing.contains(t.as_str())) => {
                Some("scheduled clusters are gone")
            }
            // A placed Divided workload is not moved by a Cluster change (Karmada reschedules it
            // only when one of its clusters is deleted): a member that comes back, is untainted or
            // relabelled takes no running replicas. A binding placed nowhere (no cluster fitted)
            // is tried again when the fitting clusters change.
            None if cluster_triggered && targets.is_empty() => {
                let last = inner.feasible.lock().get(k).cloned();
                match last {
                    Some(last) if last != feasible_now => Some("fitting clusters changed"),
                    _ => None,
                }
            }
            None => None,
        };
        let Some(reason) = reason else {
            inner
                .feasible
                .lock()
                .entry(k.to_owned())
                .or_insert(feasible_now);
            if status.map(|s| s.scheduler_observed_generation) != Some(generation) {
                let patch = json!({"status": {"schedulerObservedGeneration": generation}});
                self.patch_status::<B>(&namespace, &name, &patch).await?;
            }
            return Ok(generation);
        };
        tracing::info!(kind = %B::kind(&()), namespace = %namespace, name = %name, reason, "scheduling binding");
        let started = Instant::now();
        // The estimators' answers count in Karmada's scheduling duration too.
        let options = self.with_estimates(options, spec, &clusters).await;
        let mut result =
            scheduler::schedule_observed(spec, status, &clusters, &options, &mut Recorder).result;
        if matches!(result, Err(ScheduleError::Unschedulable(_)))
            && let Some(preempted) = self.preempt(k, b, &clusters, &options).await
        {
            result = Ok(preempted);
        }
        if let Ok(outcome) = &result {
            inner
                .feasible
                .lock()
                .insert(k.to_owned(), outcome.feasible.clone());
        }
        let handled = self.finish::<B>(b, result).await;
        observe_attempt(schedule_type, handled.is_ok(), started);
        handled
    }

    /// `options` with, under `--enable-scheduler-estimator`, what the estimators of the clusters
    /// that may fit answered (a workload only: Karmada asks nothing for a binding without
    /// replicas).
    async fn with_estimates(
        &self,
        options: ScheduleOptions,
        spec: &ResourceBindingSpec,
        clusters: &[Arc<Cluster>],
    ) -> ScheduleOptions {
        let Some(estimators) = &self.inner.estimators else {
            return options;
        };
        if spec.replicas == 0 && spec.components.is_empty() {
            return options;
        }
        let candidates: Vec<String> = scheduler::candidate_cluster_names(spec, clusters, &options)
            .into_iter()
            .collect();
        let r = &spec.resource;
        let object = format!("kind={}, name={}/{}", r.kind, r.namespace, r.name);
        let answers = if options.counts_component_sets(spec) {
            estimators
                .max_available_component_sets(&candidates, &spec.components, &r.namespace, &object)
                .await
        } else {
            estimators
                .max_available_replicas(&candidates, spec.replica_requirements.as_ref(), &object)
                .await
        };
        ScheduleOptions {
            accurate_estimates: Some(answers),
            ..options
        }
    }

    /// Writes the result: `spec.clusters` and the applied placement (on success, and on a fit
    /// error, which clears the clusters as Karmada does), the status and the Events. Returns the
    /// binding generation the result belongs to.
    pub(super) async fn finish<B: BindingObject>(
        &self,
        b: &B,
        result: Result<ScheduleResult, ScheduleError>,
    ) -> Result<i64, SchedulerError> {
        let result = self.within_quota(b, result);
        let mut spec_write = self.write_clusters(b, &result).await;
        // The binding changed since it was cached: nothing was written, and the next pass
        // schedules from the fresh copy (no failure is recorded for a routine conflict).
        if let Some(e) = spec_write.error.take_if(|e| e.is_conflict()) {
            return Err(e);
        }
        let now = Time(Timestamp::now());
        let condition = match &spec_write.error {
            Some(e) => scheduler::scheduled_condition(
                &Err(ScheduleError::SchedulerError(e.to_string())),
                now.clone(),
            ),
            None => scheduler::scheduled_condition(&result, now.clone()),
        };
        let message = condition.message.clone();
        let succeeded = condition.status == "True";
        let conditions = with_condition(b.binding_status(), &condition);
        let generation = spec_write.generation;
        let (namespace, name) = namespace_and_name(b);
        if succeeded && result_unchanged(b, &result, &spec_write, &conditions) {
            tracing::debug!(kind = %B::kind(&()), namespace = %namespace, name = %name, "schedule result unchanged; nothing written");
            return Ok(generation);
        }
        let status = status_patch(&result, succeeded, conditions, generation, now);
        self.write_status::<B>(
            &namespace,
            &name,
            spec_write.resource_version.clone(),
            status,
            &condition,
        )
        .await?;
        self.announce_result(b, &result, succeeded, &message).await;
        if let Some(e) = spec_write.error {
            return Err(e);
        }
        match result {
            Ok(_) => Ok(generation),
            Err(e) if !e.should_retry() => Ok(generation),
            Err(source) => Err(SchedulerError::Schedule {
                kind: B::kind(&()).into_owned(),
                key: key_of(b),
                source,
            }),
        }
    }

    /// The result, or `QuotaExceeded` when it would place a ResourceBinding beyond a
    /// FederatedResourceQuota of its namespace (gate `FederatedQuotaEnforcement`).
    pub(super) fn within_quota<B: BindingObject>(
        &self,
        b: &B,
        result: Result<ScheduleResult, ScheduleError>,
    ) -> Result<ScheduleResult, ScheduleError> {
        let (Some(quotas), Ok(outcome)) = (&self.inner.quotas, &result) else {
            return result;
        };
        if B::kind(&()) != ResourceBinding::kind(&()) {
            return result;
        }
        let (namespace, name) = namespace_and_name(b);
        let in_namespace = |ns: Option<&str>| ns == Some(namespace.as_str());
        let quotas: Vec<_> = quotas
            .store()
            .list()
            .into_iter()
            .filter(|q| in_namespace(q.metadata.namespace.as_deref()))
            .collect();
        if quotas.is_empty() {
            return result;
        }
        let bindings: Vec<_> = self
            .inner
            .rb
            .store()
            .list()
            .into_iter()
            .filter(|r| in_namespace(r.metadata.namespace.as_deref()))
            .collect();
        match placement_exceeds(
            &quotas,
            &bindings,
            &name,
            b.binding_spec(),
            &outcome.clusters,
        ) {
            Some(why) => Err(ScheduleError::QuotaExceeded(why)),
            None => result,
        }
    }
}
