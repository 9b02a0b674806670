//! Writing a result: `spec.clusters` and the applied-placement annotation, then the status
//! (`Scheduled`, observed generation, `lastScheduledTime`), each guarded by the resourceVersion
//! the result was computed from.

use apimachinery::{ConflictRetry, DEFAULT_RETRY};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use karmada_apis::well_known::POLICY_PLACEMENT_ANNOTATION;
use karmada_apis::work::v1alpha2::{ResourceBindingStatus, TargetCluster};
use karmada_controllers_common::binding::BindingObject;
use karmada_controllers_common::error::ApiError;
use karmada_scheduler::{self as scheduler, ScheduleError, ScheduleResult};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::Scheduler;
use super::error::SchedulerError;

impl Scheduler {
    /// Patches `spec.clusters` and the applied-placement annotation when the result changes them
    /// (a fit error clears the clusters, as in Karmada; other errors leave them). The patch
    /// carries the resourceVersion the result was computed from: a binding that changed meanwhile
    /// (another controller wrote its status) conflicts and is scheduled again from the fresh copy
    /// instead of being overwritten with stale conditions.
    pub(super) async fn write_clusters<B: BindingObject>(
        &self,
        b: &B,
        result: &Result<ScheduleResult, ScheduleError>,
    ) -> SpecWrite {
        let meta = b.meta();
        let spec = b.binding_spec();
        let mut written = SpecWrite {
            generation: meta.generation.unwrap_or_default(),
            resource_version: meta.resource_version.clone(),
            patched: false,
            error: None,
        };
        let new_targets: Option<Vec<TargetCluster>> = match result {
            Ok(o) => Some(o.clusters.clone()),
            Err(e) if e.clears_clusters() => Some(Vec::new()),
            Err(_) => None,
        };
        let (Some(targets), Some(placement)) = (&new_targets, spec.placement.as_ref()) else {
            return written;
        };
        let placement_json = scheduler::applied_placement_annotation(placement);
        let applied = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(POLICY_PLACEMENT_ANNOTATION));
        if *targets == spec.clusters && applied == Some(&placement_json) {
            return written;
        }
        let clusters = if targets.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::to_value(targets).unwrap_or(serde_json::Value::Null)
        };
        let patch = json!({
            "metadata": {
                "annotations": {POLICY_PLACEMENT_ANNOTATION: placement_json},
                "resourceVersion": written.resource_version,
            },
            "spec": {"clusters": clusters},
        });
        let (namespace, name) = namespace_and_name(b);
        match B::api(self.inner.client.clone(), &namespace)
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(updated) => {
                if let Some(groups) = &self.inner.workload_groups {
                    groups.written(&updated);
                }
                written.generation = updated.meta().generation.unwrap_or(written.generation);
                written.resource_version = updated.meta().resource_version.clone();
                written.patched = true;
            }
            Err(e) => {
                written.error = Some(SchedulerError::from(ApiError::new(
                    "patch schedule result of",
                    B::kind(&()),
                    key_of(b),
                    e,
                )));
            }
        }
        written
    }

    /// Writes a result's status, guarded by `resource_version` (the copy whose conditions
    /// `status` carries, so another controller's condition set meanwhile is not overwritten).
    /// After a conflict the condition is merged into a fresh read and the write is tried again
    /// (client-go's `RetryOnConflict`): the result is in the spec by now, and a status lost here
    /// would never be written later — the next pass sees nothing to schedule — leaving no
    /// `Scheduled` condition and no `lastScheduledTime`, without which `rescheduleTriggeredAt`
    /// is ignored for good.
    pub(super) async fn write_status<B: BindingObject>(
        &self,
        namespace: &str,
        name: &str,
        mut resource_version: Option<String>,
        mut status: serde_json::Value,
        condition: &Condition,
    ) -> Result<(), SchedulerError> {
        let api = B::api(self.inner.client.clone(), namespace);
        let key = karmada_apis::names::namespaced_key(namespace, name);
        let failed = |verb: &'static str, e: kube::Error| -> SchedulerError {
            ApiError::new(verb, B::kind(&()), key.clone(), e).into()
        };
        let mut retry = ConflictRetry::new(DEFAULT_RETRY);
        let mut conflict = None;
        while retry.next().await {
            if conflict.is_some() {
                let fresh = api.get(name).await.map_err(|e| failed("get", e))?;
                status["conditions"] = json!(with_condition(fresh.binding_status(), condition));
                resource_version = fresh.meta().resource_version.clone();
            }
            let patch =
                json!({"metadata": {"resourceVersion": resource_version}, "status": status});
            match api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if apimachinery::is_conflict(&e) => {
                    tracing::debug!(kind = %B::kind(&()), binding = %key, "binding changed before its schedule status was written; merging into a fresh read");
                    conflict = Some(e);
                }
                Err(e) => return Err(failed("patch status of", e)),
            }
        }
        match conflict {
            Some(e) => Err(failed("patch status of", e)),
            None => Ok(()),
        }
    }

    pub(super) async fn patch_status<B: BindingObject>(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), SchedulerError> {
        B::api(self.inner.client.clone(), namespace)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(|_| ())
            .map_err(|e| {
                ApiError::new(
                    "patch status of",
                    B::kind(&()),
                    karmada_apis::names::namespaced_key(namespace, name),
                    e,
                )
                .into()
            })
    }
}

/// What writing the result into the binding's spec left: the generation and resourceVersion the
/// status write must carry, and whether (or why not) the spec was patched.
pub(super) struct SpecWrite {
    pub(super) generation: i64,
    pub(super) resource_version: Option<String>,
    pub(super) patched: bool,
    /// The patch failed; the status still records the failure.
    pub(super) error: Option<SchedulerError>,
}

/// The binding's namespace (empty for a ClusterResourceBinding) and name.
pub(super) fn namespace_and_name<B: BindingObject>(b: &B) -> (String, String) {
    let meta = b.meta();
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// `namespace/name` or `name` of a binding.
pub(super) fn key_of<B: BindingObject>(b: &B) -> String {
    let (namespace, name) = namespace_and_name(b);
    karmada_apis::names::namespaced_key(&namespace, &name)
}

/// Whether a successful result is the one already recorded (a Duplicated binding re-evaluated
/// after a restart or a template change): then nothing is written and nothing announced, and
/// `lastScheduledTime` keeps the time of the last result that changed something.
pub(super) fn result_unchanged<B: BindingObject>(
    b: &B,
    result: &Result<ScheduleResult, ScheduleError>,
    spec_write: &SpecWrite,
    conditions: &[Condition],
) -> bool {
    match (result, b.binding_status()) {
        (Ok(o), Some(old)) => {
            !spec_write.patched
                && spec_write.error.is_none()
                && old.conditions == conditions
                && old.scheduler_observed_generation == spec_write.generation
                && old.scheduler_observed_affinity_name
                    == o.affinity_name.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// The binding's conditions with `condition` set (Karmada's `SetStatusCondition`).
pub(super) fn with_condition(
    status: Option<&ResourceBindingStatus>,
    condition: &Condition,
) -> Vec<Condition> {
    let mut conditions = status.map(|s| s.conditions.clone()).unwrap_or_default();
    karmada_controllers_common::set_condition(&mut conditions, condition.clone());
    conditions
}

/// The status merge patch of a result: the conditions always; on success also the observed
/// generation, `lastScheduledTime` and the observed affinity name.
pub(super) fn status_patch(
    result: &Result<ScheduleResult, ScheduleError>,
    succeeded: bool,
    conditions: Vec<Condition>,
    generation: i64,
    now: Time,
) -> serde_json::Value {
    let mut patch = json!({"conditions": conditions});
    if succeeded {
        patch["schedulerObservedGeneration"] = json!(generation);
        patch["lastScheduledTime"] = json!(now);
        if let Ok(o) = result {
            patch["schedulerObservingAffinityName"] = match &o.affinity_name {
                Some(n) => json!(n),
                None => serde_json::Value::Null,
            };
        }
    }
    patch
}
