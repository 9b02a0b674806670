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
//!
//! With the `FederatedQuotaEnforcement` gate, a ResourceBinding result that would raise a
//! resource beyond a FederatedResourceQuota's `overall` (counting the namespace's other bindings)
//! is not written: `Scheduled=False`, reason `QuotaExceeded`, retried with backoff (Karmada's
//! webhook refuses the scheduler's write, with the same outcome).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use apimachinery::{ConflictRetry, DEFAULT_RETRY};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use karmada_apis::policy::v1alpha1::{ClusterAffinity, FederatedResourceQuota, Placement};
use karmada_apis::well_known::{
    BINDING_MANAGED_BY_LABEL, CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    DEFAULT_SCHEDULER_NAME, POLICY_PLACEMENT_ANNOTATION, PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    event_reasons,
};
use karmada_apis::work::v1alpha2::{ResourceBindingSpec, ResourceBindingStatus, TargetCluster};
use karmada_apis::{Cluster, ClusterResourceBinding, ResourceBinding};
use kube::Resource;
use kube::api::{Patch, PatchParams};
use lariat::{HandlerResult, ObjectKey, SharedController, SyncWait};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::binding::BindingObject;
use karmada_controllers_common::error::{ApiError, FrameworkError, framework};
use karmada_controllers_common::events::{EventRecorder, EventType};
use karmada_controllers_common::handlers::{
    register, serve_until_cancelled, shared_controller, start_fn_of,
};
use karmada_controllers_common::quota::{FEDERATED_QUOTA_ENFORCEMENT, placement_exceeds};
use karmada_controllers_common::{ControllerContext, StartFn};
use karmada_scheduler::{
    self as scheduler, ScheduleError, ScheduleOptions, ScheduleResult, ScheduleTrigger,
};

/// The controller's `--controllers` name.
pub const NAME: &str = "scheduler";

/// The scheduler name this controller serves (`spec.schedulerName`, empty means this one); also
/// the `source.component` of its Events, as in Karmada.
pub const SCHEDULER_NAME: &str = DEFAULT_SCHEDULER_NAME;

/// A scheduler failure.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// An API request failed.
    #[error(transparent)]
    Api(#[from] ApiError),
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
    /// The framework could not provide a controller, cache or client.
    #[error(transparent)]
    Framework(#[from] FrameworkError),
}

impl SchedulerError {
    /// Whether the API server refused a write because the binding changed meanwhile (409).
    pub fn is_conflict(&self) -> bool {
        matches!(self, SchedulerError::Api(e) if apimachinery::is_conflict(&e.source))
    }
}

/// How soon a binding whose write conflicted is scheduled again.
const CONFLICT_RETRY: std::time::Duration = std::time::Duration::from_millis(50);

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    recorder: EventRecorder,
    rb: SharedController<ResourceBinding>,
    crb: SharedController<ClusterResourceBinding>,
    clusters: SharedController<Cluster>,
    /// FederatedResourceQuotas, with the `FederatedQuotaEnforcement` gate on: a ResourceBinding
    /// placement that would exceed one is refused (`QuotaExceeded`), as Karmada's webhook does.
    quotas: Option<SharedController<FederatedResourceQuota>>,
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
        .get(scheduler::affinity_index(placement, observed))
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
        // Karmada's scheduler is a process of its own with its own `--kube-api-qps`/`--kube-api-burst`
        // bucket; this one gets a bucket of its own at the same values, so the same flags give the
        // same request budget as Karmada's controller-manager and scheduler together.
        let client = cp
            .clients()
            .client_for_component(NAME)
            .map_err(framework("scheduler client"))?;
        let rb = shared_controller::<ResourceBinding>(cp)?;
        let crb = shared_controller::<ClusterResourceBinding>(cp)?;
        let clusters = shared_controller::<Cluster>(cp)?;
        let quotas = if ctx
            .settings
            .feature_gates
            .enabled(FEDERATED_QUOTA_ENFORCEMENT)
        {
            Some(shared_controller::<FederatedResourceQuota>(cp)?)
        } else {
            None
        };
        // Its Events spend the same bucket's spare tokens, as its own process's recorder would.
        let events_client = cp
            .clients()
            .background_client_for_component(NAME)
            .map_err(framework("scheduler events client"))?;
        let recorder = EventRecorder::new(events_client, SCHEDULER_NAME, &ctx.cancel);
        let cancel = ctx.cancel.child_token();
        Ok(Scheduler {
            inner: Arc::new(Inner {
                ctx,
                client,
                recorder,
                rb,
                crb,
                clusters,
                quotas,
                handled: Mutex::new(HashMap::new()),
                forced: Mutex::new(HashSet::new()),
                feasible: Mutex::new(HashMap::new()),
                cluster_fingerprints: Mutex::new(HashMap::new()),
                cancel,
            }),
        })
    }

    /// Registers the handlers and runs until the context is cancelled.
    pub async fn run(self) -> Result<(), karmada_controllers_common::BoxError> {
        let inner = &self.inner;
        // Clusters first, so bindings are scheduled against a synced cluster list.
        let timeout = inner.ctx.settings.cluster_cache_sync_timeout;
        let SyncWait::Synced = inner.clusters.wait_synced(&inner.cancel, timeout).await? else {
            return Ok(());
        };
        register(
            &inner.clusters,
            NAME,
            &inner.cancel,
            &self,
            |this: Self, k, o: Option<Arc<Cluster>>| async move { this.handle_cluster(k, o).await },
        );
        register(
            &inner.rb,
            NAME,
            &inner.cancel,
            &self,
            |this: Self, k, o: Option<Arc<ResourceBinding>>| async move {
                this.handle_binding(k, o).await
            },
        );
        register(
            &inner.crb,
            NAME,
            &inner.cancel,
            &self,
            |this: Self, k, o: Option<Arc<ClusterResourceBinding>>| async move {
                this.handle_binding(k, o).await
            },
        );
        let SyncWait::Synced = inner.rb.wait_synced(&inner.cancel, timeout).await? else {
            return Ok(());
        };
        let SyncWait::Synced = inner.crb.wait_synced(&inner.cancel, timeout).await? else {
            return Ok(());
        };
        if let Some(quotas) = &inner.quotas {
            let SyncWait::Synced = quotas.wait_synced(&inner.cancel, timeout).await? else {
                return Ok(());
            };
        }
        serve_until_cancelled(&inner.ctx.synced, &inner.cancel, "scheduler").await;
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
        let handled = inner.handled.lock().get(&k) == Some(&generation);
        if !forced && handled {
            return HandlerResult::Success;
        }
        // Only a Cluster change is new when the binding's generation was already handled. A
        // binding change the scheduler has not handled yet (an eviction that just removed a
        // cluster, say) gets the full decision even if a Cluster change forced the same key:
        // judged as a Cluster change only, a Duplicated binding evicted from its only cluster
        // would look already placed and be marked observed without a new placement.
        match self.do_schedule(&k, &*b, forced && handled).await {
            Ok(handled_generation) => {
                inner.handled.lock().insert(k, handled_generation);
                HandlerResult::Success
            }
            Err(e) if e.is_conflict() => {
                // Another controller wrote the binding since it was cached: schedule again from
                // the fresh copy the watch is about to deliver. Routine, so no error is logged.
                tracing::debug!(binding = %k, "binding changed while scheduling; retrying");
                inner.forced.lock().insert(k);
                HandlerResult::RequeueAfter(CONFLICT_RETRY)
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
        let clusters: Vec<Arc<Cluster>> = inner.clusters.store().list();
        if spec.placement.is_none() {
            let result = scheduler::schedule(spec, status, &clusters, &ScheduleOptions::default());
            return self.finish::<B>(b, result).await;
        }
        let feasible_now = scheduler::feasible_cluster_names(spec, status, &clusters);
        let targets: BTreeSet<String> = spec.clusters.iter().map(|c| c.name.clone()).collect();
        let existing: HashSet<&str> = clusters
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .filter_map(|c| c.metadata.name.as_deref())
            .collect();
        let trigger =
            scheduler::schedule_trigger(meta.annotations.as_ref(), spec, status, &clusters);
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
        let result = scheduler::schedule(spec, status, &clusters, &ScheduleOptions::default());
        if let Ok(outcome) = &result {
            inner
                .feasible
                .lock()
                .insert(k.to_owned(), outcome.feasible.clone());
        }
        self.finish::<B>(b, result).await
    }

    /// Writes the result: `spec.clusters` and the applied placement (on success, and on a fit
    /// error, which clears the clusters as Karmada does), the status and the Events. Returns the
    /// binding generation the result belongs to.
    async fn finish<B: BindingObject>(
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
    fn within_quota<B: BindingObject>(
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

    /// Patches `spec.clusters` and the applied-placement annotation when the result changes them
    /// (a fit error clears the clusters, as in Karmada; other errors leave them). The patch
    /// carries the resourceVersion the result was computed from: a binding that changed meanwhile
    /// (another controller wrote its status) conflicts and is scheduled again from the fresh copy
    /// instead of being overwritten with stale conditions.
    async fn write_clusters<B: BindingObject>(
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

    /// Records the result as Events on the binding and on its template (both, as Karmada does) and
    /// logs it.
    async fn announce_result<B: BindingObject>(
        &self,
        b: &B,
        result: &Result<ScheduleResult, ScheduleError>,
        succeeded: bool,
        message: &str,
    ) {
        let kind = B::kind(&());
        let (namespace, name) = namespace_and_name(b);
        let success = match (result, succeeded) {
            (Ok(o), true) => Some(o),
            _ => None,
        };
        let (event_type, reason, event_message) = match success {
            Some(o) => (
                EventType::Normal,
                event_reasons::SCHEDULE_BINDING_SUCCEED,
                scheduler::success_event_message(&o.clusters, namespace.is_empty()),
            ),
            None => (
                EventType::Warning,
                event_reasons::SCHEDULE_BINDING_FAILED,
                message.to_owned(),
            ),
        };
        let recorder = &self.inner.recorder;
        recorder
            .record(
                &karmada_controllers_common::events::reference_of(b),
                event_type,
                reason,
                event_message.clone(),
            )
            .await;
        recorder
            .record(
                &template_reference(b.binding_spec()),
                event_type,
                reason,
                event_message,
            )
            .await;
        match success {
            Some(o) => {
                tracing::info!(kind = %kind, namespace = %namespace, name = %name, result = ?o.clusters.iter().map(|c| (c.name.as_str(), c.replicas)).collect::<Vec<_>>(), "scheduled binding");
            }
            None => {
                tracing::warn!(kind = %kind, namespace = %namespace, name = %name, message = %message, "scheduling failed");
            }
        }
    }

    /// Writes a result's status, guarded by `resource_version` (the copy whose conditions
    /// `status` carries, so another controller's condition set meanwhile is not overwritten).
    /// After a conflict the condition is merged into a fresh read and the write is tried again
    /// (client-go's `RetryOnConflict`): the result is in the spec by now, and a status lost here
    /// would never be written later — the next pass sees nothing to schedule — leaving no
    /// `Scheduled` condition and no `lastScheduledTime`, without which `rescheduleTriggeredAt`
    /// is ignored for good.
    async fn write_status<B: BindingObject>(
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
struct SpecWrite {
    generation: i64,
    resource_version: Option<String>,
    patched: bool,
    /// The patch failed; the status still records the failure.
    error: Option<SchedulerError>,
}

/// The binding's namespace (empty for a ClusterResourceBinding) and name.
fn namespace_and_name<B: BindingObject>(b: &B) -> (String, String) {
    let meta = b.meta();
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// `namespace/name` or `name` of a binding.
fn key_of<B: BindingObject>(b: &B) -> String {
    let (namespace, name) = namespace_and_name(b);
    karmada_apis::names::namespaced_key(&namespace, &name)
}

/// Whether a successful result is the one already recorded (a Duplicated binding re-evaluated
/// after a restart or a template change): then nothing is written and nothing announced, and
/// `lastScheduledTime` keeps the time of the last result that changed something.
fn result_unchanged<B: BindingObject>(
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
fn with_condition(status: Option<&ResourceBindingStatus>, condition: &Condition) -> Vec<Condition> {
    let mut conditions = status.map(|s| s.conditions.clone()).unwrap_or_default();
    karmada_controllers_common::set_condition(&mut conditions, condition.clone());
    conditions
}

/// The status merge patch of a result: the conditions always; on success also the observed
/// generation, `lastScheduledTime` and the observed affinity name.
fn status_patch(
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

/// Starts the controller: the [`StartFn`] the registry holds.
pub fn start_fn() -> StartFn {
    start_fn_of(Scheduler::new, Scheduler::run)
}
