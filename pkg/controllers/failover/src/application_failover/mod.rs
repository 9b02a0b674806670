//! The `applicationFailover` controller (Karmada's `resource-binding-application-failover-controller`
//! and `cluster-resource-binding-application-failover-controller`): a binding whose policy sets
//! `failover.application` is evicted from every cluster where the workload has been `Unhealthy`
//! (its `status.aggregatedStatus[].health`, which `bindingStatus` writes) for the policy's
//! `decisionConditions.tolerationSeconds`. The cluster leaves `spec.clusters` and a graceful
//! eviction task is recorded (reason `ApplicationFailure`, producer the controller's name, the
//! policy's `purgeMode`; `gracePeriodSeconds` with `Gracefully`, which needs the `GracefulEviction`
//! gate; `suppressDeletion` with `Never`); the scheduler then places the workload elsewhere. With
//! the `StatefulFailoverInjection` gate, the policy's `statePreservation` rules are read from the
//! workload's status in that cluster into the task's `preservedLabelState` (the `binding`
//! controller puts them on the workload in its new cluster).
//!
//! As in Karmada: only bindings with a collected status, of a kind whose health the interpreter
//! reads, and — ResourceBindings — with `propagateDeps` are considered; when the workload was
//! first seen unhealthy in a cluster is kept in memory (a restart starts the count again); a
//! failed write is recorded as `EvictWorkloadFromClusterFailed` on the binding and its template
//! (the success is recorded by `gracefulEviction` when it drops the task).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use karmada_apis::policy::v1alpha1::ApplicationFailoverBehavior;
use karmada_apis::well_known::EVICTION_REASON_APPLICATION_FAILURE;
use karmada_apis::work::v1alpha1::ResourceHealth;
use karmada_apis::work::v1alpha2::{
    AggregatedStatusItem, GracefulEvictionTask, ResourceBindingSpec,
};
use karmada_apis::{ClusterResourceBinding, ResourceBinding};
use karmada_interpreter::{Interpreter, Operation};
use lariat::cache::CacheObject;
use lariat::{HandlerResult, ObjectKey, SharedController};
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::binding::{BindingObject, record_cluster_eviction};
use karmada_controllers_common::failover::{
    FEATURE_STATEFUL_FAILOVER_INJECTION, StatePreservationError, preserved_state_for,
};
use karmada_controllers_common::handlers::start_fn_of;
use karmada_controllers_common::patch::patch_changes;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use lariat::events::EventRecorder;

/// The controller's `--controllers` name.
pub const NAME: &str = "applicationFailover";
/// Karmada's name of the ResourceBinding half (Event source, eviction task producer).
pub const RB_CONTROLLER_NAME: &str = "resource-binding-application-failover-controller";
/// Karmada's name of the ClusterResourceBinding half.
pub const CRB_CONTROLLER_NAME: &str = "cluster-resource-binding-application-failover-controller";
/// The gate `purgeMode: Gracefully` needs.
pub const FEATURE_GRACEFUL_EVICTION: &str = "GracefulEviction";
/// `decisionConditions.tolerationSeconds` when unset (Karmada's default).
pub const DEFAULT_TOLERATION_SECONDS: i32 = 300;

/// A failed reconcile, naming the binding.
#[derive(Debug, thiserror::Error)]
pub enum ApplicationFailoverError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// The eviction task could not be built.
    #[error("{kind} {key}: evicting from cluster {cluster}: {reason}")]
    Task {
        /// The binding kind.
        kind: &'static str,
        /// `namespace/name` or `name`.
        key: String,
        /// The cluster.
        cluster: String,
        /// Why.
        reason: TaskError,
    },
    /// Writing the eviction failed.
    #[error("{kind} {key}: evicting from clusters {clusters:?}: {source}")]
    Evict {
        /// The binding kind.
        kind: &'static str,
        /// `namespace/name` or `name`.
        key: String,
        /// The clusters.
        clusters: Vec<String>,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
}

karmada_controllers_common::core_error_from!(ApplicationFailoverError);

/// Why an eviction task could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The preserved state could not be read.
    #[error(transparent)]
    State(#[from] StatePreservationError),
    /// `Gracefully` without the `GracefulEviction` gate.
    #[error("GracefulEviction featureGate must be enabled when purgeMode is {0}")]
    GracefulEvictionDisabled(String),
}

/// Karmada's `distinguishUnhealthyClustersWithOthers`: the clusters where the workload is
/// `Unhealthy` and not already being evicted, and those where it is `Healthy` or `Unknown`.
pub fn unhealthy_and_others(
    items: &[AggregatedStatusItem],
    spec: &ResourceBindingSpec,
) -> (Vec<String>, Vec<String>) {
    let mut unhealthy = Vec::new();
    let mut others = Vec::new();
    for item in items {
        match item.health {
            Some(ResourceHealth::Unhealthy)
                if !spec.cluster_in_graceful_eviction_tasks(&item.cluster_name) =>
            {
                unhealthy.push(item.cluster_name.clone());
            }
            Some(ResourceHealth::Healthy | ResourceHealth::Unknown) => {
                others.push(item.cluster_name.clone());
            }
            _ => {}
        }
    }
    (unhealthy, others)
}

/// Karmada's `buildTaskOptions`: the eviction task for `cluster` (its `fromCluster` and replicas
/// are filled in by `graceful_evict_cluster`).
pub fn build_task(
    behavior: &ApplicationFailoverBehavior,
    aggregated: &[AggregatedStatusItem],
    cluster: &str,
    producer: &str,
    clusters_before: &[String],
    gates: &dyn Fn(&str) -> bool,
) -> Result<GracefulEvictionTask, TaskError> {
    let mut task = GracefulEvictionTask {
        producer: producer.to_owned(),
        reason: EVICTION_REASON_APPLICATION_FAILURE.to_owned(),
        purge_mode: Some(behavior.purge_mode.clone()),
        ..Default::default()
    };
    if gates(FEATURE_STATEFUL_FAILOVER_INJECTION)
        && let Some(state) =
            preserved_state_for(behavior.state_preservation.as_ref(), aggregated, cluster)?
    {
        task.preserved_label_state = state;
        task.clusters_before_failover = clusters_before.to_vec();
    }
    match behavior.purge_mode.as_str() {
        "Graciously" | "Gracefully" => {
            if !gates(FEATURE_GRACEFUL_EVICTION) {
                return Err(TaskError::GracefulEvictionDisabled(
                    behavior.purge_mode.as_str().to_owned(),
                ));
            }
            task.grace_period_seconds = behavior.effective_grace_period_seconds();
        }
        "Never" => task.suppress_deletion = Some(true),
        _ => {}
    }
    Ok(task)
}

/// When the workload was first seen unhealthy, per binding and cluster (Karmada's
/// `workloadUnhealthyMap`).
#[derive(Default)]
pub struct UnhealthySince {
    map: Mutex<SinceByBinding>,
}

/// Per (binding kind, binding key), per cluster: when the workload was first seen unhealthy.
type SinceByBinding = HashMap<(&'static str, ObjectKey), HashMap<String, Timestamp>>;

impl UnhealthySince {
    fn with<T>(&self, f: impl FnOnce(&mut SinceByBinding) -> T) -> T {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut map)
    }

    /// Forgets the binding.
    pub fn forget(&self, kind: &'static str, key: &ObjectKey) {
        self.with(|m| m.remove(&(kind, key.clone())));
    }

    /// Karmada's `detectFailure`: records `now` for the clusters seen unhealthy for the first time
    /// and returns the clusters unhealthy for longer than `toleration`, with how long until the
    /// next one is (`None`: none is waiting).
    pub fn detect(
        &self,
        kind: &'static str,
        key: &ObjectKey,
        unhealthy: &[String],
        toleration: Duration,
        now: Timestamp,
    ) -> (Vec<String>, Option<Duration>) {
        self.with(|m| {
            let since = m.entry((kind, key.clone())).or_default();
            let mut evict = Vec::new();
            let mut next: Option<Duration> = None;
            for cluster in unhealthy {
                let first = *since.entry(cluster.clone()).or_insert(now);
                let elapsed = Duration::from_millis(
                    u64::try_from(now.as_millisecond() - first.as_millisecond()).unwrap_or(0),
                );
                if elapsed > toleration {
                    evict.push(cluster.clone());
                } else {
                    // At least a millisecond, so a workload unhealthy for exactly the toleration
                    // is looked at again.
                    let left = toleration
                        .saturating_sub(elapsed)
                        .max(Duration::from_millis(1));
                    next = Some(next.map_or(left, |n| n.min(left)));
                }
            }
            (evict, next)
        })
    }

    /// Karmada's `deleteIrrelevantClusters`: forgets clusters no longer scheduled and those where
    /// the workload is no longer unhealthy.
    pub fn retain(
        &self,
        kind: &'static str,
        key: &ObjectKey,
        scheduled: &BTreeSet<String>,
        others: &[String],
    ) {
        self.with(|m| {
            if let Some(since) = m.get_mut(&(kind, key.clone())) {
                since.retain(|c, _| scheduled.contains(c) && !others.contains(c));
            }
        });
    }
}

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    interpreter: Interpreter,
    rb_events: EventRecorder,
    crb_events: EventRecorder,
    rbs: SharedController<ResourceBinding>,
    crbs: SharedController<ClusterResourceBinding>,
    unhealthy: UnhealthySince,
    cancel: CancellationToken,
}

/// The controller. Cheap to clone.
#[derive(Clone)]
pub struct ApplicationFailoverController {
    inner: Arc<Inner>,
}

/// The start function registered under `applicationFailover`.
pub fn start_fn() -> StartFn {
    start_fn_of(
        ApplicationFailoverController::new,
        ApplicationFailoverController::run,
    )
}

trait Kind: BindingObject + CacheObject {
    const KIND: &'static str;
    /// The controller name: Event source and task producer.
    const PRODUCER: &'static str;
    /// Whether the kind needs `propagateDeps` (ResourceBindings do, as in Karmada).
    const NEEDS_PROPAGATE_DEPS: bool;
    fn controller(inner: &Inner) -> &SharedController<Self>;
    fn events(inner: &Inner) -> &EventRecorder;
}

impl Kind for ResourceBinding {
    const KIND: &'static str = "ResourceBinding";
    const PRODUCER: &'static str = RB_CONTROLLER_NAME;
    const NEEDS_PROPAGATE_DEPS: bool = true;
    fn controller(inner: &Inner) -> &SharedController<Self> {
        &inner.rbs
    }
    fn events(inner: &Inner) -> &EventRecorder {
        &inner.rb_events
    }
}

impl Kind for ClusterResourceBinding {
    const KIND: &'static str = "ClusterResourceBinding";
    const PRODUCER: &'static str = CRB_CONTROLLER_NAME;
    const NEEDS_PROPAGATE_DEPS: bool = false;
    fn controller(inner: &Inner) -> &SharedController<Self> {
        &inner.crbs
    }
    fn events(inner: &Inner) -> &EventRecorder {
        &inner.crb_events
    }
}

impl ApplicationFailoverController {
    /// Builds the controller on the shared binding controllers.
    pub fn new(ctx: ControllerContext) -> Result<Self, ApplicationFailoverError> {
        let plane = &ctx.control_plane;
        let rbs = plane.controllers().for_kind::<ResourceBinding>()?;
        let crbs = plane.controllers().for_kind::<ClusterResourceBinding>()?;
        let client = plane.clients().client_for_controller(RB_CONTROLLER_NAME)?;
        let interpreter = karmada_controllers_common::interpreter::interpreter(
            plane,
            &ctx.events,
            karmada_interpreter::InterpreterOptions::default(),
        );
        Ok(Self {
            inner: Arc::new(Inner {
                rb_events: ctx.events.recorder(RB_CONTROLLER_NAME),
                crb_events: ctx.events.recorder(CRB_CONTROLLER_NAME),
                client,
                interpreter,
                rbs,
                crbs,
                unhealthy: UnhealthySince::default(),
                cancel: ctx.cancel.clone(),
                ctx,
            }),
        })
    }

    /// Registers the handlers and serves until cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        inner
            .ctx
            .wiring(NAME, &self)
            .cancelled_by(&inner.cancel)
            .handles(&inner.rbs, RB_CONTROLLER_NAME, |c: Self, k, o| async move {
                c.reconcile::<ResourceBinding>(k, o).await
            })
            .handles(
                &inner.crbs,
                CRB_CONTROLLER_NAME,
                |c: Self, k, o| async move { c.reconcile::<ClusterResourceBinding>(k, o).await },
            )
            .run()
            .await?;
        Ok(())
    }

    /// Karmada's `bindingFilter`: the failover behaviour of a binding this controller acts on.
    fn behavior<'b, B: Kind>(&self, binding: &'b B) -> Option<&'b ApplicationFailoverBehavior> {
        let spec = binding.binding_spec();
        let behavior = spec.failover.as_ref()?.application.as_ref()?;
        let collected = binding
            .binding_status()
            .is_some_and(|s| !s.aggregated_status.is_empty());
        let r = &spec.resource;
        let health_known = self.inner.interpreter.hook_enabled_for(
            &r.api_version,
            &r.kind,
            Operation::InterpretHealth,
        );
        (collected && health_known && (spec.propagate_deps || !B::NEEDS_PROPAGATE_DEPS))
            .then_some(behavior)
    }

    async fn reconcile<B: Kind>(&self, key: ObjectKey, obj: Option<Arc<B>>) -> HandlerResult<B> {
        let inner = &self.inner;
        let behavior = obj.as_deref().and_then(|b| self.behavior(b));
        let (Some(binding), Some(behavior)) = (obj.as_deref(), behavior) else {
            inner.unhealthy.forget(B::KIND, &key);
            return HandlerResult::Success;
        };
        let spec = binding.binding_spec();
        let aggregated = binding
            .binding_status()
            .map(|s| s.aggregated_status.as_slice())
            .unwrap_or_default();
        let toleration = behavior
            .decision_conditions
            .toleration_seconds
            .unwrap_or(DEFAULT_TOLERATION_SECONDS);
        let toleration = Duration::from_secs(u64::try_from(toleration).unwrap_or(0));
        let (unhealthy, others) = unhealthy_and_others(aggregated, spec);
        let (evict, next) =
            inner
                .unhealthy
                .detect(B::KIND, &key, &unhealthy, toleration, Timestamp::now());
        let mut scheduled: BTreeSet<String> =
            spec.clusters.iter().map(|c| c.name.clone()).collect();
        let mut written = None;
        if !evict.is_empty() {
            match self.evict(&key, binding, behavior, &evict).await {
                Ok(w) => {
                    for cluster in &evict {
                        scheduled.remove(cluster);
                    }
                    written = Some(w);
                }
                Err(e) => return HandlerResult::error(e),
            }
        }
        inner.unhealthy.retain(B::KIND, &key, &scheduled, &others);
        match (written, next) {
            (Some(w), Some(d)) => {
                B::controller(inner).enqueue_after(key.namespace(), key.name(), d);
                HandlerResult::Updated(Arc::new(w))
            }
            (Some(w), None) => HandlerResult::Updated(Arc::new(w)),
            (None, Some(d)) => HandlerResult::RequeueAfter(d),
            (None, None) => HandlerResult::Success,
        }
    }

    /// Evicts the binding from `clusters` in one write.
    async fn evict<B: Kind>(
        &self,
        key: &ObjectKey,
        binding: &B,
        behavior: &ApplicationFailoverBehavior,
        clusters: &[String],
    ) -> Result<B, ApplicationFailoverError> {
        let inner = &self.inner;
        let spec = binding.binding_spec();
        let aggregated = binding
            .binding_status()
            .map(|s| s.aggregated_status.as_slice())
            .unwrap_or_default();
        let before: Vec<String> = spec.clusters.iter().map(|c| c.name.clone()).collect();
        let gates = |g: &str| inner.ctx.settings.feature_gates.enabled(g);
        let mut updated = binding.clone();
        for cluster in clusters {
            let task = build_task(behavior, aggregated, cluster, B::PRODUCER, &before, &gates)
                .map_err(|reason| ApplicationFailoverError::Task {
                    kind: B::KIND,
                    key: key.to_string(),
                    cluster: cluster.clone(),
                    reason,
                })?;
            updated.parts_mut().1.graceful_evict_cluster(cluster, task);
        }
        let ns = binding.meta().namespace.clone().unwrap_or_default();
        let api = B::api(inner.client.clone(), &ns);
        match patch_changes(&api, binding, &updated).await {
            Ok(written) => {
                tracing::info!(kind = B::KIND, binding = %key, clusters = ?clusters, "evicted unhealthy application from clusters");
                Ok(written)
            }
            Err(source) => {
                for cluster in clusters {
                    record_cluster_eviction(B::events(inner), binding, cluster, false).await;
                }
                Err(ApplicationFailoverError::Evict {
                    kind: B::KIND,
                    key: key.to_string(),
                    clusters: clusters.to_vec(),
                    source: Box::new(source),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests;
