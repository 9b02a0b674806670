//! The `gracefulEviction` controller (Karmada's `resource-binding-graceful-eviction-controller` and
//! `cluster-resource-binding-graceful-eviction-controller`): drops a binding's graceful eviction
//! tasks once the workload no longer needs the cluster it is leaving, so the binding controller
//! removes the Work there. A task is first stamped with its creation time; then it is dropped when
//! `suppressDeletion` is false, when its `gracePeriodSeconds` (else `--graceful-eviction-timeout`)
//! has passed, or when the binding is scheduled (`schedulerObservedGeneration` is current) and every
//! scheduled cluster reports the workload `Healthy`; `suppressDeletion: true` keeps it. Each dropped
//! task is recorded as `EvictWorkloadFromClusterSucceed` on the binding and its template.
//!
//! As in Karmada, a task's `gracePeriodSeconds` also becomes the timeout of the tasks after it that
//! have none.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use karmada_apis::work::v1alpha1::ResourceHealth;
use karmada_apis::work::v1alpha2::{AggregatedStatusItem, GracefulEvictionTask, TargetCluster};
use karmada_apis::{ClusterResourceBinding, ResourceBinding};
use lariat::cache::CacheObject;
use lariat::{HandlerResult, ObjectKey, SharedController};
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::binding::{BindingObject, record_cluster_eviction};
use karmada_controllers_common::conditions::now;
use karmada_controllers_common::handlers::start_fn_of;
use karmada_controllers_common::patch::patch_changes;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use lariat::events::EventRecorder;

/// The controller's `--controllers` name.
pub const NAME: &str = "gracefulEviction";
/// Karmada's name of the ResourceBinding half.
pub const RB_CONTROLLER_NAME: &str = "resource-binding-graceful-eviction-controller";
/// Karmada's name of the ClusterResourceBinding half.
pub const CRB_CONTROLLER_NAME: &str = "cluster-resource-binding-graceful-eviction-controller";

/// A failed reconcile, naming the binding.
#[derive(Debug, thiserror::Error)]
pub enum GracefulEvictionError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// Writing the tasks failed.
    #[error("{kind} {key}: updating graceful eviction tasks: {source}")]
    Patch {
        /// The binding kind.
        kind: &'static str,
        /// `namespace/name` or `name`.
        key: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

karmada_controllers_common::core_error_from!(GracefulEvictionError);

/// What the assessment of a binding's tasks looks at.
#[derive(Debug, Clone)]
pub struct Assessment<'a> {
    /// `--graceful-eviction-timeout`.
    pub timeout: Duration,
    /// `spec.clusters`.
    pub schedule_result: &'a [TargetCluster],
    /// `status.aggregatedStatus`.
    pub observed_status: &'a [AggregatedStatusItem],
    /// Whether the scheduler observed the binding's current generation.
    pub has_scheduled: bool,
    /// The time the tasks' timeouts are checked against, to the millisecond (Karmada's
    /// `metav1.Now()`). Not the stamp given to new tasks, which is whole seconds: compared with
    /// that, a task is not yet past its deadline when its requeue fires, and is then not requeued.
    pub now: Timestamp,
}

fn elapsed_past(created: &Time, timeout: Duration, now: Timestamp) -> bool {
    let deadline = created
        .0
        .as_millisecond()
        .saturating_add(i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX));
    now.as_millisecond() > deadline
}

fn all_healthy(opt: &Assessment<'_>) -> bool {
    opt.schedule_result.iter().all(|target| {
        opt.observed_status
            .iter()
            .find(|s| s.cluster_name == target.name)
            .is_some_and(|s| s.health == Some(ResourceHealth::Healthy))
    })
}

/// Karmada's `assessEvictionTasks`: the tasks to keep (new ones stamped with `stamp`) and the
/// clusters whose tasks are dropped (timeouts checked against `opt.now`).
pub fn assess(
    tasks: &[GracefulEvictionTask],
    stamp: &Time,
    mut opt: Assessment<'_>,
) -> (Vec<GracefulEvictionTask>, Vec<String>) {
    let mut kept = Vec::new();
    let mut evicted = Vec::new();
    let now = opt.now;
    for task in tasks {
        let Some(created) = &task.creation_timestamp else {
            kept.push(GracefulEvictionTask {
                creation_timestamp: Some(stamp.clone()),
                ..task.clone()
            });
            continue;
        };
        if let Some(seconds) = task.grace_period_seconds {
            opt.timeout = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
        }
        let keep = match task.suppress_deletion {
            Some(suppress) => suppress,
            None => {
                !(elapsed_past(created, opt.timeout, now)
                    || (opt.has_scheduled && all_healthy(&opt)))
            }
        };
        if keep {
            kept.push(task.clone());
        } else {
            evicted.push(task.from_cluster.clone());
        }
    }
    (kept, evicted)
}

/// Karmada's `nextRetry`: how long until the earliest task times out (`None`: no timed task).
pub fn next_retry(
    tasks: &[GracefulEvictionTask],
    timeout: Duration,
    now: Timestamp,
) -> Option<Duration> {
    tasks
        .iter()
        .filter(|t| t.suppress_deletion.is_none())
        .filter_map(|t| {
            let timeout = t.grace_period_seconds.map_or(timeout, |s| {
                Duration::from_secs(u64::try_from(s).unwrap_or(0))
            });
            let created = t.creation_timestamp.as_ref()?.0.as_millisecond();
            let due =
                created.saturating_add(i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX));
            Some(due - now.as_millisecond())
        })
        .min()
        .filter(|ms| *ms > 0)
        .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    rb_events: EventRecorder,
    crb_events: EventRecorder,
    rbs: SharedController<ResourceBinding>,
    crbs: SharedController<ClusterResourceBinding>,
    cancel: CancellationToken,
}

/// The controller. Cheap to clone.
#[derive(Clone)]
pub struct GracefulEvictionController {
    inner: Arc<Inner>,
}

/// The start function registered under `gracefulEviction`.
pub fn start_fn() -> StartFn {
    start_fn_of(
        GracefulEvictionController::new,
        GracefulEvictionController::run,
    )
}

trait Kind: BindingObject + CacheObject {
    const KIND: &'static str;
    fn controller(inner: &Inner) -> &SharedController<Self>;
    fn events(inner: &Inner) -> &EventRecorder;
}

impl Kind for ResourceBinding {
    const KIND: &'static str = "ResourceBinding";
    fn controller(inner: &Inner) -> &SharedController<Self> {
        &inner.rbs
    }
    fn events(inner: &Inner) -> &EventRecorder {
        &inner.rb_events
    }
}

impl Kind for ClusterResourceBinding {
    const KIND: &'static str = "ClusterResourceBinding";
    fn controller(inner: &Inner) -> &SharedController<Self> {
        &inner.crbs
    }
    fn events(inner: &Inner) -> &EventRecorder {
        &inner.crb_events
    }
}

impl GracefulEvictionController {
    /// Builds the controller on the shared binding controllers.
    pub fn new(ctx: ControllerContext) -> Result<Self, GracefulEvictionError> {
        let plane = &ctx.control_plane;
        let rbs = plane.controllers().for_kind::<ResourceBinding>()?;
        let crbs = plane.controllers().for_kind::<ClusterResourceBinding>()?;
        let client = plane.clients().client_for_controller(RB_CONTROLLER_NAME)?;
        Ok(Self {
            inner: Arc::new(Inner {
                rb_events: ctx.events.recorder(RB_CONTROLLER_NAME),
                crb_events: ctx.events.recorder(CRB_CONTROLLER_NAME),
                client,
                rbs,
                crbs,
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
            .wiring("gracefulEviction", &self)
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

    async fn reconcile<B: Kind>(&self, key: ObjectKey, obj: Option<Arc<B>>) -> HandlerResult<B> {
        let Some(binding) = obj else {
            return HandlerResult::Success;
        };
        let spec = binding.binding_spec();
        if binding.meta().deletion_timestamp.is_some() || spec.graceful_eviction_tasks.is_empty() {
            return HandlerResult::Success;
        }
        let inner = &self.inner;
        let timeout = inner.ctx.settings.failover.graceful_eviction_timeout;
        let status = binding.binding_status();
        let stamp = now();
        let (kept, evicted) = assess(
            &spec.graceful_eviction_tasks,
            &stamp,
            Assessment {
                timeout,
                schedule_result: &spec.clusters,
                observed_status: status
                    .map(|s| s.aggregated_status.as_slice())
                    .unwrap_or_default(),
                has_scheduled: status.map(|s| s.scheduler_observed_generation)
                    == binding.meta().generation,
                now: Timestamp::now(),
            },
        );
        let retry = |tasks: &[GracefulEvictionTask]| next_retry(tasks, timeout, Timestamp::now());
        if kept == spec.graceful_eviction_tasks {
            return match retry(&kept) {
                Some(d) => HandlerResult::RequeueAfter(d),
                None => HandlerResult::Success,
            };
        }
        let mut updated = (*binding).clone();
        updated.parts_mut().1.graceful_eviction_tasks = kept.clone();
        let written = async {
            let ns = binding.meta().namespace.clone().unwrap_or_default();
            let api = B::api(inner.client.clone(), &ns);
            patch_changes(&api, &*binding, &updated).await
        };
        let written = match written.await {
            Ok(w) => w,
            Err(source) => {
                return HandlerResult::error(GracefulEvictionError::Patch {
                    kind: B::KIND,
                    key: key.to_string(),
                    source,
                });
            }
        };
        for cluster in &evicted {
            tracing::info!(cluster = %cluster, kind = B::KIND, binding = %key, "evicted cluster from the binding's graceful eviction tasks");
            record_cluster_eviction(B::events(inner), &*binding, cluster, true).await;
        }
        if let Some(d) = retry(&kept) {
            B::controller(inner).enqueue_after(key.namespace(), key.name(), d);
        }
        HandlerResult::Updated(Arc::new(written))
    }
}

#[cfg(test)]
mod tests;
