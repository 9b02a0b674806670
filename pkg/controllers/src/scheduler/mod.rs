//! The scheduler controller (`--controllers` name `scheduler`): Karmada's karmada-scheduler run
//! inside the controller-manager. It fills `spec.clusters` of ResourceBindings and
//! ClusterResourceBindings from their placement and the Cluster objects, and writes the `Scheduled`
//! condition, `schedulerObservedGeneration`, `lastScheduledTime` and the
//! `policy.karmada.io/applied-placement` annotation.
//!
//! When a binding is (re)scheduled (Karmada's `doScheduleBinding`): its placement differs from
//! the applied one, its replica count differs from the scheduled sum, a reschedule was requested
//! (`rescheduleTriggeredAt`), it is `Duplicated` or not a workload, one of its clusters is being
//! deleted or gone, or — after a Cluster change — the set of clusters that fit it changed.
//! Otherwise only `schedulerObservedGeneration` is brought up to date, so replicas are never
//! reshuffled without a reason.

pub mod algorithm;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use karmada_apis::policy::v1alpha1::{ClusterAffinity, Placement};
use karmada_apis::well_known::{
    BINDING_MANAGED_BY_LABEL, CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    DEFAULT_SCHEDULER_NAME, POLICY_PLACEMENT_ANNOTATION, PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    event_reasons,
};
use karmada_apis::work::v1alpha2::{ResourceBindingSpec, ResourceBindingStatus, TargetCluster};
use karmada_apis::{Cluster, ClusterResourceBinding, ResourceBinding};
use kube::Resource;
use kube::api::{Patch, PatchParams};
use lariat::{HandlerResult, ObjectKey, SharedController};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::context::{ControllerContext, ControllerFuture, StartFn};
use crate::detector::binding::BindingObject;
use crate::detector::events::{EventRecorder, EventType};
use algorithm::{Outcome, ScheduleError};

/// The controller's `--controllers` name.
pub const NAME: &str = "scheduler";

/// The scheduler name this controller serves (`spec.schedulerName`, empty means this one); also
/// the `source.component` of its Events, as in Karmada.
pub const SCHEDULER_NAME: &str = DEFAULT_SCHEDULER_NAME;

/// The `Scheduled` condition type.
pub const CONDITION_SCHEDULED: &str = "Scheduled";
/// Reason: scheduled.
pub const REASON_SUCCESS: &str = "Success";
/// Reason: no cluster fits the placement.
pub const REASON_NO_CLUSTER_FIT: &str = "NoClusterFit";
/// Reason: clusters fit but cannot take the replicas.
pub const REASON_UNSCHEDULABLE: &str = "Unschedulable";
/// Reason: any other failure.
pub const REASON_SCHEDULER_ERROR: &str = "SchedulerError";
/// Message of a successful `Scheduled` condition.
pub const SUCCESS_MESSAGE: &str = "Binding has been scheduled successfully.";

/// A scheduler failure.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// An API request failed.
    #[error("{action} {kind} {key}: {source}")]
    Api {
        /// What was attempted.
        action: &'static str,
        /// Kind of the object.
        kind: String,
        /// `namespace/name` or `name`.
        key: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Scheduling failed in a way that is retried.
    #[error("schedule {kind} {key}: {source}")]
    Schedule {
        /// Binding kind.
        kind: String,
        /// Binding key.
        key: String,
        /// Why.
        #[source]
        source: ScheduleError,
    },
    /// The framework could not provide a controller.
    #[error("{what}: {source}")]
    Framework {
        /// What was being set up.
        what: &'static str,
        /// The framework error.
        #[source]
        source: lariat::Error,
    },
}

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    recorder: EventRecorder,
    rb: SharedController<ResourceBinding>,
    crb: SharedController<ClusterResourceBinding>,
    clusters: SharedController<Cluster>,
    /// Generation of each binding when it was last handled (`Kind/key`).
    handled: Mutex<HashMap<String, i64>>,
    /// Bindings to handle even if their generation did not change (Cluster changes, retries).
    forced: Mutex<HashSet<String>>,
    /// The clusters that fit each binding when it was last scheduled.
    feasible: Mutex<HashMap<String, BTreeSet<String>>>,
    /// Fingerprint of each Cluster's scheduling-relevant fields.
    cluster_fingerprints: Mutex<HashMap<String, u64>>,
    cancel: CancellationToken,
}

/// The scheduler controller. Cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

fn binding_key<B: Resource<DynamicType = ()>>(key: &ObjectKey) -> String {
    format!("{}/{key}", B::kind(&()))
}

/// Whether this scheduler handles a binding (Karmada's `resourceBindingEventFilter`).
fn responsible(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: &ResourceBindingSpec,
) -> bool {
    let name = if spec.scheduler_name.is_empty() {
        DEFAULT_SCHEDULER_NAME
    } else {
        spec.scheduler_name.as_str()
    };
    if name != SCHEDULER_NAME || spec.scheduling_suspended() {
        return false;
    }
    let labels = meta.labels.as_ref();
    [
        PROPAGATION_POLICY_PERMANENT_ID_LABEL,
        CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
        BINDING_MANAGED_BY_LABEL,
    ]
    .iter()
    .any(|l| {
        labels
            .and_then(|m| m.get(*l))
            .is_some_and(|v| !v.is_empty())
    })
}

/// Karmada's `placementChanged`: whether the placement differs from the applied one (an
/// unparsable annotation counts as unchanged; a missing one as changed).
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
    if observed_affinity.is_empty() {
        return true;
    }
    let find = |p: &Placement| {
        p.cluster_affinities
            .iter()
            .find(|t| t.affinity_name == observed_affinity)
            .cloned()
    };
    match (find(placement), find(&applied)) {
        (Some(a), Some(b)) => a != b,
        _ => true,
    }
}

/// Karmada's `IsBindingReplicasChanged`.
pub fn replicas_changed(spec: &ResourceBindingSpec) -> bool {
    let Some(strategy) = spec
        .placement
        .as_ref()
        .and_then(|p| p.replica_scheduling.as_ref())
    else {
        return false;
    };
    use karmada_apis::policy::v1alpha1::ReplicaSchedulingType as T;
    match strategy.replica_scheduling_type {
        T::Duplicated => spec.clusters.iter().any(|c| c.replicas != spec.replicas),
        T::Divided => spec.clusters.iter().map(|c| c.replicas).sum::<i32>() != spec.replicas,
        T::Other(_) => false,
    }
}

/// Karmada's `RescheduleRequired`.
pub fn reschedule_required(
    spec: &ResourceBindingSpec,
    status: Option<&ResourceBindingStatus>,
) -> bool {
    match (
        spec.reschedule_triggered_at.as_ref(),
        status.and_then(|s| s.last_scheduled_time.as_ref()),
    ) {
        (Some(t), Some(last)) => t.0 > last.0,
        _ => false,
    }
}

/// `member1:2, member2:1`, Karmada's `targetClustersToString`.
pub fn targets_string(targets: &[TargetCluster]) -> String {
    targets
        .iter()
        .map(|t| format!("{}:{}", t.name, t.replicas))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Sets a condition like apimachinery's `meta.SetStatusCondition`: the transition time changes only
/// when the status does.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == new.type_) {
        if existing.status == new.status {
            new.last_transition_time = existing.last_transition_time.clone();
        }
        *existing = new;
    } else {
        conditions.push(new);
    }
}

/// The fields of a Cluster that affect scheduling decisions (not its resource usage).
fn cluster_fingerprint(c: &Cluster) -> u64 {
    let mut h = DefaultHasher::new();
    c.metadata.labels.hash(&mut h);
    c.metadata.deletion_timestamp.is_some().hash(&mut h);
    serde_json::to_string(&c.spec)
        .unwrap_or_default()
        .hash(&mut h);
    if let Some(s) = &c.status {
        serde_json::to_string(&s.api_enablements)
            .unwrap_or_default()
            .hash(&mut h);
    }
    h.finish()
}

/// The affinity in force for a binding (the observed `clusterAffinities` term, else `clusterAffinity`).
fn current_affinity<'a>(
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
        .get(algorithm::affinity_index(placement, observed))
        .map(|t| &t.cluster_affinity)
}

fn template_reference(spec: &ResourceBindingSpec) -> ObjectReference {
    let r = &spec.resource;
    ObjectReference {
        api_version: Some(r.api_version.clone()),
        kind: Some(r.kind.clone()),
        namespace: (!r.namespace.is_empty()).then(|| r.namespace.clone()),
        name: Some(r.name.clone()),
        uid: (!r.uid.is_empty()).then(|| r.uid.clone()),
        resource_version: None,
        field_path: None,
    }
}

impl Scheduler {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, SchedulerError> {
        let cp = &ctx.control_plane;
        let client = cp.clients().client_for_controller(NAME).map_err(|source| {
            SchedulerError::Framework {
                what: "scheduler client",
                source,
            }
        })?;
        let rb = cp
            .controllers()
            .for_kind::<ResourceBinding>()
            .map_err(|source| SchedulerError::Framework {
                what: "ResourceBinding controller",
                source,
            })?;
        let crb = cp
            .controllers()
            .for_kind::<ClusterResourceBinding>()
            .map_err(|source| SchedulerError::Framework {
                what: "ClusterResourceBinding controller",
                source,
            })?;
        let clusters =
            cp.controllers()
                .for_kind::<Cluster>()
                .map_err(|source| SchedulerError::Framework {
                    what: "Cluster controller",
                    source,
                })?;
        let recorder = EventRecorder::new(client.clone(), SCHEDULER_NAME);
        let cancel = ctx.cancel.child_token();
        Ok(Scheduler {
            inner: Arc::new(Inner {
                ctx,
                client,
                recorder,
                rb,
                crb,
                clusters,
                handled: Mutex::new(HashMap::new()),
                forced: Mutex::new(HashSet::new()),
                feasible: Mutex::new(HashMap::new()),
                cluster_fingerprints: Mutex::new(HashMap::new()),
                cancel,
            }),
        })
    }

    /// Registers the handlers and runs until the context is cancelled.
    pub async fn run(self) -> Result<(), crate::context::BoxError> {
        let inner = &self.inner;
        // Clusters first, so bindings are scheduled against a synced cluster list.
        let cluster_store = inner.clusters.store();
        let timeout = inner.ctx.settings.cluster_cache_sync_timeout;
        tokio::select! {
            _ = inner.cancel.cancelled() => return Ok(()),
            r = inner.clusters.cache().wait_for_sync(timeout) => r?,
        }
        let _ = cluster_store;
        let this = self.clone();
        inner.clusters.register_handler(
            NAME,
            inner.cancel.clone(),
            move |k: ObjectKey, o: Option<Arc<Cluster>>| {
                let this = this.clone();
                async move { this.handle_cluster(k, o).await }
            },
        );
        let this = self.clone();
        inner.rb.register_handler(
            NAME,
            inner.cancel.clone(),
            move |k: ObjectKey, o: Option<Arc<ResourceBinding>>| {
                let this = this.clone();
                async move { this.handle_binding(k, o).await }
            },
        );
        let this = self.clone();
        inner.crb.register_handler(
            NAME,
            inner.cancel.clone(),
            move |k: ObjectKey, o: Option<Arc<ClusterResourceBinding>>| {
                let this = this.clone();
                async move { this.handle_binding(k, o).await }
            },
        );
        tokio::select! {
            _ = inner.cancel.cancelled() => return Ok(()),
            r = inner.rb.cache().wait_for_sync(timeout) => r?,
        }
        tokio::select! {
            _ = inner.cancel.cancelled() => return Ok(()),
            r = inner.crb.cache().wait_for_sync(timeout) => r?,
        }
        inner.ctx.synced.synced();
        tracing::info!("scheduler synced");
        inner.cancel.cancelled().await;
        tracing::info!("scheduler stopped");
        Ok(())
    }

    async fn handle_cluster(
        &self,
        key: ObjectKey,
        obj: Option<Arc<Cluster>>,
    ) -> HandlerResult<Cluster> {
        let inner = &self.inner;
        let name = key.name().to_owned();
        let fp = obj.as_deref().map(cluster_fingerprint);
        {
            let mut fps = inner.cluster_fingerprints.lock();
            let old = fps.get(&name).copied();
            if old == fp {
                return HandlerResult::Success;
            }
            match fp {
                Some(f) => fps.insert(name.clone(), f),
                None => fps.remove(&name),
            };
        }
        tracing::debug!(cluster = %name, "cluster changed; requeueing affected bindings");
        let affected = |meta_spec: (&ResourceBindingSpec, Option<&ResourceBindingStatus>)| {
            let (spec, status) = meta_spec;
            if spec.target_contains(&name) {
                return true;
            }
            let Some(placement) = spec.placement.as_ref() else {
                return false;
            };
            match (current_affinity(placement, status), obj.as_deref()) {
                (None, _) => true,
                (Some(a), Some(c)) => karmada_policy::selector::cluster_matches(c, a),
                (Some(_), None) => false,
            }
        };
        for rb in inner.rb.store().list() {
            if responsible(&rb.metadata, &rb.spec) && affected((&rb.spec, rb.status.as_ref())) {
                let key = ObjectKey::from_object(&*rb);
                if let Some(key) = key {
                    inner
                        .forced
                        .lock()
                        .insert(binding_key::<ResourceBinding>(&key));
                    inner.rb.enqueue_key(key);
                }
            }
        }
        for crb in inner.crb.store().list() {
            if responsible(&crb.metadata, &crb.spec) && affected((&crb.spec, crb.status.as_ref())) {
                let key = ObjectKey::from_object(&*crb);
                if let Some(key) = key {
                    inner
                        .forced
                        .lock()
                        .insert(binding_key::<ClusterResourceBinding>(&key));
                    inner.crb.enqueue_key(key);
                }
            }
        }
        HandlerResult::Success
    }

    async fn handle_binding<B: BindingObject>(
        &self,
        key: ObjectKey,
        obj: Option<Arc<B>>,
    ) -> HandlerResult<B> {
        let inner = &self.inner;
        let k = binding_key::<B>(&key);
        let Some(b) = obj else {
            inner.handled.lock().remove(&k);
            inner.forced.lock().remove(&k);
            inner.feasible.lock().remove(&k);
            return HandlerResult::Success;
        };
        if !responsible(b.meta(), b.binding_spec()) || b.meta().deletion_timestamp.is_some() {
            return HandlerResult::Success;
        }
        let forced = inner.forced.lock().remove(&k);
        let generation = b.meta().generation.unwrap_or_default();
        if !forced && inner.handled.lock().get(&k) == Some(&generation) {
            return HandlerResult::Success;
        }
        match self.do_schedule(&k, &*b, forced).await {
            Ok(handled_generation) => {
                inner.handled.lock().insert(k, handled_generation);
                HandlerResult::Success
            }
            Err(e) => {
                inner.forced.lock().insert(k);
                HandlerResult::Error(Box::new(e))
            }
        }
    }

    /// Decides whether to schedule and does it. Returns the binding generation now handled.
    async fn do_schedule<B: BindingObject>(
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
        let clusters: Vec<Cluster> = inner
            .clusters
            .store()
            .list()
            .iter()
            .map(|c| (**c).clone())
            .collect();
        let Some(placement) = spec.placement.as_ref() else {
            return self
                .finish::<B>(b, Err(ScheduleError::NoPlacement), false)
                .await
                .map(|_| generation);
        };
        let applied = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(POLICY_PLACEMENT_ANNOTATION))
            .map(String::as_str);
        let observed_affinity = status
            .map(|s| s.scheduler_observed_affinity_name.as_str())
            .unwrap_or_default();
        let feasible_now = algorithm::feasible_names(spec, status, &clusters);
        let targets: BTreeSet<String> = spec.clusters.iter().map(|c| c.name.clone()).collect();
        let existing: HashSet<String> = clusters
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        let duplicated = !spec.is_workload()
            || placement.replica_scheduling_type()
                == karmada_apis::policy::v1alpha1::ReplicaSchedulingType::Duplicated;
        let from_first = reschedule_required(spec, status);
        let reason = if placement_changed(placement, applied, observed_affinity) {
            Some("placement changed")
        } else if replicas_changed(spec) {
            Some("replicas changed")
        } else if from_first {
            Some("reschedule triggered")
        } else if targets.iter().any(|t| !existing.contains(t)) {
            Some("scheduled clusters are deleted")
        } else if cluster_triggered {
            if duplicated {
                (targets != feasible_now).then_some("fitting clusters changed")
            } else {
                let last = inner.feasible.lock().get(k).cloned();
                match last {
                    Some(last) if last != feasible_now => Some("fitting clusters changed"),
                    _ => None,
                }
            }
        } else if duplicated {
            Some("scheduling type is duplicated")
        } else {
            None
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
        let result = algorithm::schedule(spec, status, &clusters, from_first);
        if let Ok(outcome) = &result {
            inner
                .feasible
                .lock()
                .insert(k.to_owned(), outcome.feasible.clone());
        }
        self.finish::<B>(b, result, true).await
    }

    /// Writes the result: `spec.clusters` and the applied placement (on success and on a fit
    /// error, which clears the clusters as Karmada does), the status and the Events.
    async fn finish<B: BindingObject>(
        &self,
        b: &B,
        result: Result<Outcome, ScheduleError>,
        write_result: bool,
    ) -> Result<i64, SchedulerError> {
        let meta = b.meta();
        let spec = b.binding_spec();
        let kind = B::kind(&()).into_owned();
        let namespace = meta.namespace.clone().unwrap_or_default();
        let name = meta.name.clone().unwrap_or_default();
        let key = karmada_apis::names::namespaced_key(&namespace, &name);
        let mut generation = meta.generation.unwrap_or_default();
        let placement_json = spec
            .placement
            .as_ref()
            .and_then(|p| serde_json::to_string(p).ok())
            .unwrap_or_default();
        let new_targets: Option<Vec<TargetCluster>> = match &result {
            Ok(o) => Some(o.clusters.clone()),
            Err(ScheduleError::NoClusterFit { .. })
                if spec
                    .placement
                    .as_ref()
                    .is_some_and(|p| p.cluster_affinities.is_empty()) =>
            {
                Some(Vec::new())
            }
            Err(ScheduleError::NoClusterFit { .. }) => Some(Vec::new()),
            Err(_) => None,
        };
        let mut patch_err = None;
        if write_result && let Some(targets) = &new_targets {
            let applied = meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(POLICY_PLACEMENT_ANNOTATION));
            if *targets != spec.clusters || applied != Some(&placement_json) {
                let clusters = if targets.is_empty() {
                    serde_json::Value::Null
                } else {
                    serde_json::to_value(targets).unwrap_or(serde_json::Value::Null)
                };
                let patch = json!({
                    "metadata": {"annotations": {POLICY_PLACEMENT_ANNOTATION: placement_json}},
                    "spec": {"clusters": clusters},
                });
                match B::api(self.inner.client.clone(), &namespace)
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(updated) => generation = updated.meta().generation.unwrap_or(generation),
                    Err(e) => {
                        patch_err = Some(SchedulerError::Api {
                            action: "patch schedule result of",
                            kind: kind.clone(),
                            key: key.clone(),
                            source: e,
                        })
                    }
                }
            }
        }
        let now = Time(Timestamp::now());
        let (status_value, reason, message) = match (&result, &patch_err) {
            (_, Some(e)) => ("False", REASON_SCHEDULER_ERROR, e.to_string()),
            (Ok(_), None) => ("True", REASON_SUCCESS, SUCCESS_MESSAGE.to_owned()),
            (Err(e @ ScheduleError::NoClusterFit { .. }), None) => {
                ("False", REASON_NO_CLUSTER_FIT, e.to_string())
            }
            (Err(e @ ScheduleError::Unschedulable(_)), None) => {
                ("False", REASON_UNSCHEDULABLE, e.to_string())
            }
            (Err(e), None) => ("False", REASON_SCHEDULER_ERROR, e.to_string()),
        };
        let mut conditions = b
            .binding_status()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        set_condition(
            &mut conditions,
            Condition {
                type_: CONDITION_SCHEDULED.to_owned(),
                status: status_value.to_owned(),
                reason: reason.to_owned(),
                message: message.clone(),
                last_transition_time: now.clone(),
                observed_generation: None,
            },
        );
        let mut status_patch = json!({"conditions": conditions});
        if status_value == "True" {
            status_patch["schedulerObservedGeneration"] = json!(generation);
            status_patch["lastScheduledTime"] = json!(now);
            if let Ok(o) = &result {
                let name = if o.affinity_name.is_empty() {
                    serde_json::Value::Null
                } else {
                    json!(o.affinity_name)
                };
                status_patch["schedulerObservingAffinityName"] = name;
            }
        }
        self.patch_status::<B>(&namespace, &name, &json!({"status": status_patch}))
            .await?;
        let template = template_reference(spec);
        let binding_ref = crate::detector::events::reference_of(b);
        let recorder = &self.inner.recorder;
        match (&result, &patch_err) {
            (Ok(o), None) => {
                let sep = if namespace.is_empty() { "" } else { ":" };
                let msg = format!(
                    "{SUCCESS_MESSAGE} Result{sep} {{{}}}",
                    targets_string(&o.clusters)
                );
                recorder
                    .record(
                        &binding_ref,
                        EventType::Normal,
                        event_reasons::SCHEDULE_BINDING_SUCCEED,
                        msg.clone(),
                    )
                    .await;
                recorder
                    .record(
                        &template,
                        EventType::Normal,
                        event_reasons::SCHEDULE_BINDING_SUCCEED,
                        msg,
                    )
                    .await;
                tracing::info!(kind = %kind, namespace = %namespace, name = %name, result = %targets_string(&o.clusters), "scheduled binding");
            }
            _ => {
                recorder
                    .record(
                        &binding_ref,
                        EventType::Warning,
                        event_reasons::SCHEDULE_BINDING_FAILED,
                        message.clone(),
                    )
                    .await;
                recorder
                    .record(
                        &template,
                        EventType::Warning,
                        event_reasons::SCHEDULE_BINDING_FAILED,
                        message.clone(),
                    )
                    .await;
                tracing::warn!(kind = %kind, namespace = %namespace, name = %name, reason, message = %message, "scheduling failed");
            }
        }
        if let Some(e) = patch_err {
            return Err(e);
        }
        match result {
            Ok(_) | Err(ScheduleError::NoClusterFit { .. }) => Ok(generation),
            Err(source) => Err(SchedulerError::Schedule { kind, key, source }),
        }
    }

    async fn patch_status<B: BindingObject>(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), SchedulerError> {
        B::api(self.inner.client.clone(), namespace)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(|_| ())
            .map_err(|e| SchedulerError::Api {
                action: "patch status of",
                kind: B::kind(&()).into_owned(),
                key: karmada_apis::names::namespaced_key(namespace, name),
                source: e,
            })
    }
}

/// Starts the scheduler controller on `ctx`.
pub fn start(ctx: ControllerContext) -> ControllerFuture {
    Box::pin(async move {
        let s = Scheduler::new(ctx)?;
        s.run().await
    })
}

/// [`start`] as a [`StartFn`].
pub fn start_fn() -> StartFn {
    Arc::new(start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::policy::v1alpha1::{ReplicaSchedulingStrategy, ReplicaSchedulingType};

    #[test]
    fn placement_change_detection() {
        let p = Placement::default();
        assert!(placement_changed(&p, None, ""));
        let applied = serde_json::to_string(&p).unwrap();
        assert!(!placement_changed(&p, Some(&applied), ""));
        let mut q = p.clone();
        q.cluster_affinity = Some(ClusterAffinity {
            cluster_names: vec!["m1".into()],
            ..Default::default()
        });
        assert!(placement_changed(&q, Some(&applied), ""));
        assert!(!placement_changed(&q, Some("not json"), ""));
    }

    #[test]
    fn replica_change_detection() {
        let mut spec = ResourceBindingSpec {
            replicas: 3,
            placement: Some(Placement {
                replica_scheduling: Some(ReplicaSchedulingStrategy {
                    replica_scheduling_type: ReplicaSchedulingType::Divided,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            clusters: vec![TargetCluster {
                name: "a".into(),
                replicas: 1,
                components: vec![],
            }],
            ..Default::default()
        };
        assert!(replicas_changed(&spec));
        spec.clusters[0].replicas = 3;
        assert!(!replicas_changed(&spec));
        spec.placement = Some(Placement::default());
        assert!(!replicas_changed(&spec));
    }

    #[test]
    fn condition_transition_time_kept_when_status_unchanged() {
        let t0 = Time(Timestamp::from_second(1).unwrap());
        let t1 = Time(Timestamp::from_second(2).unwrap());
        let cond = |status: &str, t: &Time| Condition {
            type_: CONDITION_SCHEDULED.into(),
            status: status.into(),
            reason: REASON_SUCCESS.into(),
            message: String::new(),
            last_transition_time: t.clone(),
            observed_generation: None,
        };
        let mut cs = vec![cond("True", &t0)];
        set_condition(&mut cs, cond("True", &t1));
        assert_eq!(cs[0].last_transition_time, t0);
        set_condition(&mut cs, cond("False", &t1));
        assert_eq!(cs[0].last_transition_time, t1);
        assert_eq!(cs.len(), 1);
        assert_eq!(
            targets_string(&[TargetCluster {
                name: "m1".into(),
                replicas: 2,
                components: vec![]
            }]),
            "m1:2"
        );
    }
}
