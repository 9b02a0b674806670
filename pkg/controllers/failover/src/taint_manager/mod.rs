//! The taint manager (Karmada's `taint-manager`, started with the `cluster` controller when
//! `--enable-taint-manager` and the `Failover` gate are on). With
//! `--enable-no-execute-taint-eviction`, every ResourceBinding and ClusterResourceBinding scheduled
//! to a Cluster with NoExecute taints is checked against the tolerations of its applied placement:
//! one that does not tolerate them all, or whose `tolerationSeconds` ran out, is evicted — the
//! cluster leaves `spec.clusters` and a graceful eviction task (producer `TaintManager`, reason
//! `TaintUntolerated`, purge mode from the policy's `failover.cluster` or
//! `--no-execute-taint-eviction-purge-mode`) is recorded; the scheduler then places the replicas
//! elsewhere. With the `StatefulFailoverInjection` gate, the policy's
//! `failover.cluster.statePreservation` rules are read from the workload's status in that cluster
//! into the task's `preservedLabelState`. A tainted cluster is rechecked every 10 s.
//!
//! Evictions go through two queues (bindings, cluster bindings) of three workers each; after each
//! item a worker waits `1 / --resource-eviction-rate` seconds (at least the default rate limiter's
//! delay), so many failing clusters are evicted at a bounded rate (Karmada's eviction worker and
//! dynamic rate limiter).

mod metrics;
mod rate;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::jiff::Timestamp;
use karmada_apis::policy::v1alpha1::{FailoverBehavior, Placement, PurgeMode};
use karmada_apis::well_known::{
    EVICTION_PRODUCER_TAINT_MANAGER, EVICTION_REASON_TAINT_UNTOLERATED, POLICY_PLACEMENT_ANNOTATION,
};
use karmada_apis::work::v1alpha2::GracefulEvictionTask;
use karmada_apis::{Cluster, ClusterResourceBinding, ResourceBinding};
use lariat::queue::RateLimiter;
use lariat::{Cache, HandlerResult, ObjectKey, SharedController, WorkQueue};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::binding::{BindingObject, record_cluster_eviction};
use karmada_controllers_common::failover::{
    FEATURE_STATEFUL_FAILOVER_INJECTION, StatePreservationError, preserved_state_for,
};
use karmada_controllers_common::patch::patch_changes;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use lariat::events::EventRecorder;

pub use rate::DynamicRateLimiter;

/// Karmada's name for the taint manager (User-Agent suffix, Event source).
pub const CONTROLLER_NAME: &str = "taint-manager";
/// How often a cluster with NoExecute taints is checked again (Karmada's
/// `ClusterTaintEvictionRetryFrequency`).
pub const RETRY_FREQUENCY: Duration = Duration::from_secs(10);
/// Workers per eviction queue (Karmada's `ConcurrentReconciles` of the taint manager).
pub const WORKERS: usize = 3;

const INDEX: &str = "taint-manager.spec.clusters";

/// A failed eviction check, naming the binding and the cluster.
#[derive(Debug, thiserror::Error)]
pub enum TaintManagerError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// The binding has no (readable) applied placement.
    #[error("{kind} {key}: the applied placement can not be empty or invalid")]
    NoPlacement {
        /// The binding kind.
        kind: &'static str,
        /// `namespace/name` or `name`.
        key: String,
    },
    /// The policy's `failover.cluster.statePreservation` could not be read.
    #[error("{kind} {key}: preserving state from cluster {cluster}: {source}")]
    State {
        /// The binding kind.
        kind: &'static str,
        /// `namespace/name` or `name`.
        key: String,
        /// The cluster.
        cluster: String,
        /// Why.
        #[source]
        source: StatePreservationError,
    },
    /// Writing the eviction failed.
    #[error("{kind} {key}: evicting from cluster {cluster}: {source}")]
    Evict {
        /// The binding kind.
        kind: &'static str,
        /// `namespace/name` or `name`.
        key: String,
        /// The cluster.
        cluster: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
}

karmada_controllers_common::core_error_from!(TaintManagerError);

/// One queued check: a binding on a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EvictionKey {
    /// The cluster.
    pub cluster: String,
    /// The binding.
    pub binding: ObjectKey,
}

/// The key the pacer's rate limiter is asked about after every item (Karmada's `pacerKey`).
fn pacer_key() -> EvictionKey {
    EvictionKey {
        cluster: String::new(),
        binding: ObjectKey::new(None, ""),
    }
}

/// The NoExecute taints of `taints`.
pub fn no_execute_taints(taints: &[Taint]) -> Vec<&Taint> {
    taints.iter().filter(|t| t.effect == "NoExecute").collect()
}

/// Karmada's `GetMatchingTolerations`: whether every taint is tolerated, and for each taint the
/// first toleration that tolerates it.
pub fn matching_tolerations<'t>(
    taints: &[&Taint],
    tolerations: &'t [Toleration],
) -> Option<Vec<&'t Toleration>> {
    taints
        .iter()
        .map(|taint| {
            tolerations
                .iter()
                .find(|t| karmada_scheduler::filter::tolerates(t, taint))
        })
        .collect()
}

/// Karmada's `GetMinTolerationTimeWithCurrentTime`: how long until the earliest
/// `timeAdded + tolerationSeconds` over the used tolerations and the taints they tolerate. `None`
/// means forever (no taint, or no bounded toleration); zero means evict now (no toleration used,
/// or the time has passed).
pub fn min_toleration_time(
    taints: &[&Taint],
    used: &[&Toleration],
    now: Timestamp,
) -> Option<Duration> {
    if taints.is_empty() {
        return None;
    }
    if used.is_empty() {
        return Some(Duration::ZERO);
    }
    let earliest = used
        .iter()
        .filter_map(|t| t.toleration_seconds.map(|s| (t, s)))
        .flat_map(|(toleration, seconds)| {
            taints.iter().filter_map(move |taint| {
                let added = taint.time_added.as_ref()?.0;
                karmada_scheduler::filter::tolerates(toleration, taint)
                    .then(|| added.as_millisecond() + seconds.saturating_mul(1000))
            })
        })
        .min()?;
    let left = earliest - now.as_millisecond();
    Some(Duration::from_millis(u64::try_from(left).unwrap_or(0)))
}

/// The purge mode of an eviction: the policy's `failover.cluster.purgeMode`, else the flag's
/// (`Directly` or, for anything else, `Gracefully`).
pub fn purge_mode(failover: Option<&FailoverBehavior>, flag: &str) -> PurgeMode {
    if let Some(cluster) = failover.and_then(|f| f.cluster.as_ref()) {
        return match &cluster.purge_mode {
            PurgeMode::Other(v) if v.is_empty() => PurgeMode::Gracefully,
            mode => mode.clone(),
        };
    }
    if flag == "Directly" {
        PurgeMode::Directly
    } else {
        PurgeMode::Gracefully
    }
}

/// One eviction queue and the limiter that both retries its items and paces its workers.
struct EvictionWorker {
    name: &'static str,
    kind: &'static str,
    queue: WorkQueue<EvictionKey>,
    limiter: Arc<dyn RateLimiter<EvictionKey>>,
}

impl EvictionWorker {
    fn new(name: &'static str, kind: &'static str, ctx: &ControllerContext) -> Self {
        let limiter = rate::graceful_eviction_limiter(
            ctx.settings.failover.resource_eviction_rate,
            &ctx.settings.rate_limiter,
        );
        let queue = WorkQueue::new(
            name,
            Box::new(rate::Shared(limiter.clone())),
            ctx.control_plane.metrics().queue(name),
        );
        Self {
            name,
            kind,
            queue,
            limiter,
        }
    }

    fn add(&self, key: EvictionKey, after: Option<Duration>) {
        metrics::kind(&key.cluster, self.kind, true);
        match after {
            Some(d) => self.queue.add_after(key, d),
            None => self.queue.add(key),
        }
        metrics::queue_depth(self.name, self.queue.len());
    }
}

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    events: EventRecorder,
    clusters: SharedController<Cluster>,
    rbs: Cache<ResourceBinding>,
    crbs: Cache<ClusterResourceBinding>,
    rb_worker: EvictionWorker,
    crb_worker: EvictionWorker,
    cancel: CancellationToken,
}

/// The taint manager. Cheap to clone.
#[derive(Clone)]
pub struct TaintManager {
    inner: Arc<Inner>,
}

/// Wraps the `cluster` controller's start function so the taint manager runs alongside it when
/// `--enable-taint-manager` and the `Failover` gate are on (Karmada starts both together).
pub fn alongside(cluster: StartFn) -> StartFn {
    Arc::new(move |ctx: ControllerContext| {
        let cluster = cluster(ctx.clone());
        Box::pin(async move {
            let settings = &ctx.settings;
            if !(settings.failover.enable_taint_manager
                && settings.feature_gates.enabled(crate::FEATURE_FAILOVER))
            {
                tracing::info!(
                    "taint manager not started: it needs --enable-taint-manager and the Failover feature gate"
                );
                return cluster.await;
            }
            // The cluster controller reports readiness; the taint manager gets its own reporter.
            let (synced, _) = karmada_controllers_common::SyncReporter::new();
            let tm_ctx = ControllerContext { synced, ..ctx };
            let manager = TaintManager::new(tm_ctx)?;
            let (a, b) = tokio::join!(cluster, manager.run());
            a.and(b)
        })
    })
}

/// The two binding kinds the taint manager evicts, and their caches.
trait Evictable: BindingObject + lariat::cache::CacheObject {
    const KIND: &'static str;
    fn cache(inner: &Inner) -> &Cache<Self>;
}

impl Evictable for ResourceBinding {
    const KIND: &'static str = "ResourceBinding";
    fn cache(inner: &Inner) -> &Cache<Self> {
        &inner.rbs
    }
}

impl Evictable for ClusterResourceBinding {
    const KIND: &'static str = "ClusterResourceBinding";
    fn cache(inner: &Inner) -> &Cache<Self> {
        &inner.crbs
    }
}

fn binding_clusters(spec: &karmada_apis::ResourceBindingSpec) -> Vec<String> {
    spec.clusters.iter().map(|c| c.name.clone()).collect()
}

impl TaintManager {
    /// Builds the taint manager on the shared Cluster controller and the binding caches.
    pub fn new(ctx: ControllerContext) -> Result<Self, TaintManagerError> {
        let plane = &ctx.control_plane;
        let clusters = plane.controllers().for_kind::<Cluster>()?;
        let rbs = plane.caches().for_kind::<ResourceBinding>()?;
        rbs.add_index(
            INDEX,
            Arc::new(|b: &ResourceBinding| binding_clusters(&b.spec)),
        );
        let crbs = plane.caches().for_kind::<ClusterResourceBinding>()?;
        crbs.add_index(
            INDEX,
            Arc::new(|b: &ClusterResourceBinding| binding_clusters(&b.spec)),
        );
        let client = plane.clients().client_for_controller(CONTROLLER_NAME)?;
        Ok(Self {
            inner: Arc::new(Inner {
                events: ctx.events.recorder(CONTROLLER_NAME),
                client,
                clusters,
                rbs,
                crbs,
                rb_worker: EvictionWorker::new("binding-eviction", "ResourceBinding", &ctx),
                crb_worker: EvictionWorker::new(
                    "cluster-binding-eviction",
                    "ClusterResourceBinding",
                    &ctx,
                ),
                cancel: ctx.cancel.clone(),
                ctx,
            }),
        })
    }

    /// Runs the workers and the Cluster handler until cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        let mut workers = JoinSet::new();
        for _ in 0..WORKERS {
            let rb = self.clone();
            workers.spawn(async move {
                rb.work::<ResourceBinding>(&rb.inner.rb_worker).await;
            });
            let crb = self.clone();
            workers.spawn(async move {
                crb.work::<ClusterResourceBinding>(&crb.inner.crb_worker)
                    .await;
            });
        }
        // Its own serving: the workers run, and are shut down, whether or not the cache syncs.
        let mut synced = inner
            .ctx
            .wiring("taint manager", &self)
            .cancelled_by(&inner.cancel)
            .handles(&inner.clusters, CONTROLLER_NAME, |c, key, obj| async move {
                c.reconcile(key, obj).await
            })
            .sync()
            .await;
        if let Ok(Some(synced)) = &mut synced {
            synced.report();
        }
        inner.cancel.cancelled().await;
        inner.rb_worker.queue.shut_down();
        inner.crb_worker.queue.shut_down();
        while workers.join_next().await.is_some() {}
        tracing::info!("taint manager stopped");
        synced.map(|_| ()).map_err(Into::into)
    }

    /// Queues every binding scheduled to a cluster with NoExecute taints, and checks again in 10 s.
    async fn reconcile(&self, key: ObjectKey, obj: Option<Arc<Cluster>>) -> HandlerResult<Cluster> {
        let inner = &self.inner;
        let Some(cluster) = obj else {
            return HandlerResult::Success;
        };
        if !inner.ctx.settings.failover.enable_no_execute_taint_eviction
            || no_execute_taints(&cluster.spec.taints).is_empty()
        {
            return HandlerResult::Success;
        }
        let name = key.name();
        let timeout = inner.ctx.settings.cluster_cache_sync_timeout;
        let (rb, crb) = tokio::join!(
            inner.rbs.wait_for_sync(timeout),
            inner.crbs.wait_for_sync(timeout)
        );
        if let Err(e) = rb.and(crb) {
            return HandlerResult::error(e);
        }
        for binding in inner.rbs.store().keys_by_index(INDEX, name) {
            inner.rb_worker.add(
                EvictionKey {
                    cluster: name.to_owned(),
                    binding,
                },
                None,
            );
        }
        for binding in inner.crbs.store().keys_by_index(INDEX, name) {
            inner.crb_worker.add(
                EvictionKey {
                    cluster: name.to_owned(),
                    binding,
                },
                None,
            );
        }
        HandlerResult::RequeueAfter(RETRY_FREQUENCY)
    }

    /// One worker of `worker`'s queue: checks each item, then waits for the pacer.
    async fn work<B>(&self, worker: &EvictionWorker)
    where
        B: Evictable,
    {
        let pacer = pacer_key();
        while let Some(key) = worker.queue.get().await {
            metrics::queue_depth(worker.name, worker.queue.len());
            let started = Instant::now();
            let result = self.sync::<B>(&key).await;
            metrics::processed(worker.name, result.is_ok(), started);
            match result {
                Ok(after) => {
                    worker.queue.forget(&key);
                    metrics::kind(&key.cluster, worker.kind, false);
                    if let Some(after) = after {
                        worker.add(key.clone(), Some(after));
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "taint eviction failed; retrying");
                    worker.queue.add_rate_limited(key.clone());
                }
            }
            worker.queue.done(&key);
            let delay = worker.limiter.when(&pacer);
            if !delay.is_zero() {
                tokio::select! {
                    _ = self.inner.cancel.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
            worker.limiter.forget(&pacer);
        }
    }

    /// Checks one binding on one cluster: evicts it, or returns when to check again.
    #[allow(
        clippy::too_many_lines,
        reason = "one eviction decision: binding, placement, taints, tolerations, then the eviction itself"
    )]
    async fn sync<B>(&self, key: &EvictionKey) -> Result<Option<Duration>, TaintManagerError>
    where
        B: Evictable,
    {
        let inner = &self.inner;
        let kind = B::KIND;
        let binding = B::cache(inner).store().get(&key.binding);
        let Some(binding) = binding else {
            return Ok(None);
        };
        let spec = binding.binding_spec();
        if binding.meta().deletion_timestamp.is_some() || !spec.target_contains(&key.cluster) {
            return Ok(None);
        }
        let placement: Option<Placement> = binding
            .meta()
            .annotations
            .as_ref()
            .and_then(|a| a.get(POLICY_PLACEMENT_ANNOTATION))
            .and_then(|p| serde_json::from_str(p).ok());
        let Some(placement) = placement else {
            return Err(TaintManagerError::NoPlacement {
                kind,
                key: key.binding.to_string(),
            });
        };
        let Some(cluster) = inner
            .clusters
            .store()
            .get(&ObjectKey::new(None, &key.cluster))
        else {
            return Ok(None);
        };
        let taints = no_execute_taints(&cluster.spec.taints);
        if !inner.ctx.settings.failover.enable_no_execute_taint_eviction || taints.is_empty() {
            return Ok(None);
        }
        let wait = match matching_tolerations(&taints, &placement.cluster_tolerations) {
            None => Some(Duration::ZERO),
            Some(used) => min_toleration_time(&taints, &used, Timestamp::now()),
        };
        match wait {
            Some(d) if d.is_zero() => {}
            other => return Ok(other),
        }
        let mode = purge_mode(
            spec.failover.as_ref(),
            &inner
                .ctx
                .settings
                .failover
                .no_execute_taint_eviction_purge_mode,
        );
        // With StatefulFailoverInjection, the policy's `failover.cluster.statePreservation`
        // (Karmada's `extractStateForEviction`; no `clustersBeforeFailover` here, as in Karmada).
        let preserved = match spec.failover.as_ref().and_then(|f| f.cluster.as_ref()) {
            Some(cluster_failover)
                if inner
                    .ctx
                    .settings
                    .feature_gates
                    .enabled(FEATURE_STATEFUL_FAILOVER_INJECTION) =>
            {
                let aggregated = binding
                    .binding_status()
                    .map(|s| s.aggregated_status.as_slice())
                    .unwrap_or_default();
                preserved_state_for(
                    cluster_failover.state_preservation.as_ref(),
                    aggregated,
                    &key.cluster,
                )
                .map_err(|source| TaintManagerError::State {
                    kind,
                    key: key.binding.to_string(),
                    cluster: key.cluster.clone(),
                    source,
                })?
                .unwrap_or_default()
            }
            _ => Default::default(),
        };
        let mut updated = (*binding).clone();
        let (_, new_spec) = updated.parts_mut();
        new_spec.graceful_evict_cluster(
            &key.cluster,
            GracefulEvictionTask {
                purge_mode: Some(mode),
                producer: EVICTION_PRODUCER_TAINT_MANAGER.to_owned(),
                reason: EVICTION_REASON_TAINT_UNTOLERATED.to_owned(),
                preserved_label_state: preserved,
                ..Default::default()
            },
        );
        let write = async {
            let ns = binding.meta().namespace.clone().unwrap_or_default();
            let api = B::api(inner.client.clone(), &ns);
            patch_changes(&api, &*binding, &updated).await
        };
        match write.await {
            Ok(_) => {
                tracing::info!(cluster = %key.cluster, kind, binding = %key.binding, "evicted cluster from binding");
                Ok(None)
            }
            Err(source) => {
                record_cluster_eviction(&inner.events, &*binding, &key.cluster, false).await;
                Err(TaintManagerError::Evict {
                    kind,
                    key: key.binding.to_string(),
                    cluster: key.cluster.clone(),
                    source: Box::new(source),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests;
