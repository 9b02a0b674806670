//! The `workloadRebalancer` controller (Karmada's `workload-rebalancer`): for each workload a
//! WorkloadRebalancer lists, sets its binding's `spec.rescheduleTriggeredAt` to the rebalancer's
//! creation time, once, so the scheduler places it afresh (not adjusting the current placement);
//! records each workload's result in `status.observedWorkloads` and, once all have one,
//! `status.finishTime`; and deletes the rebalancer `ttlSecondsAfterFinished` after that.
//!
//! A workload without a binding fails (`ReferencedBindingNotFound`) and is not retried; any other
//! error leaves it pending and the rebalancer is retried with backoff. Triggers: WorkloadRebalancer
//! changes (status writes find nothing left to do).

mod status;

use std::sync::Arc;
use std::time::Duration;

use apimachinery::is_not_found;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karmada_apis::apps::v1alpha1::{
    ObservedWorkload, REBALANCE_FAILED, REBALANCE_OBJECT_NOT_FOUND, REBALANCE_SUCCESSFUL,
    WorkloadRebalancer,
};
use karmada_apis::names::binding_name;
use karmada_apis::{ClusterResourceBinding, ResourceBinding};
use karmada_controllers_common::conditions::now;
use karmada_controllers_common::error::framework;
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::patch::{guarded_merge_patch, merge_diff};
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Client, Resource, ResourceExt};
use lariat::{HandlerResult, ObjectKey, SharedController};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

pub use status::{needs_trigger, observed_for_spec, time_left};

/// The controller's `--controllers` name.
pub const NAME: &str = "workloadRebalancer";
/// Karmada's controller name (User-Agent suffix).
pub const CONTROLLER_NAME: &str = "workload-rebalancer";

/// A failed reconcile, naming the WorkloadRebalancer.
#[derive(Debug, thiserror::Error)]
pub enum RebalancerError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// Some workloads could not be triggered yet; they are retried.
    #[error("WorkloadRebalancer {rebalancer}: {count} workload(s) not rescheduled yet: {first}")]
    Pending {
        /// The rebalancer.
        rebalancer: String,
        /// How many workloads wait for a retry.
        count: usize,
        /// The first of their errors.
        first: String,
    },
    /// Writing the status failed.
    #[error("WorkloadRebalancer {rebalancer}: writing status: {source}")]
    Status {
        /// The rebalancer.
        rebalancer: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Deleting the expired rebalancer failed.
    #[error("WorkloadRebalancer {rebalancer}: deleting after ttlSecondsAfterFinished: {source}")]
    Delete {
        /// The rebalancer.
        rebalancer: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Finished with a TTL but without a finish time (the status was written by someone else).
    #[error("WorkloadRebalancer {0}: ttlSecondsAfterFinished is set but status.finishTime is not")]
    NoFinishTime(String),
}

karmada_controllers_common::core_error_from!(RebalancerError);

struct Inner {
    ctx: ControllerContext,
    client: Client,
    rebalancers: SharedController<WorkloadRebalancer>,
}

/// The controller. Cheap to clone.
#[derive(Clone)]
pub struct WorkloadRebalancerController {
    inner: Arc<Inner>,
}

/// The start function registered under `workloadRebalancer`.
pub fn start_fn() -> StartFn {
    start_fn_of(
        WorkloadRebalancerController::new,
        WorkloadRebalancerController::run,
    )
}

/// What happened to one workload's binding.
enum Outcome {
    Done,
    NoBinding,
    Retry(String),
}

impl WorkloadRebalancerController {
    /// Builds the controller on the shared WorkloadRebalancer controller.
    pub fn new(ctx: ControllerContext) -> Result<Self, RebalancerError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("workloadRebalancer client"))?;
        let rebalancers = shared_controller::<WorkloadRebalancer>(cp)?;
        Ok(Self {
            inner: Arc::new(Inner {
                ctx,
                client,
                rebalancers,
            }),
        })
    }

    /// Registers the handler and serves until the context is cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        inner
            .ctx
            .wiring(NAME, &self)
            .handles(
                &inner.rebalancers,
                CONTROLLER_NAME,
                |c: Self, key, obj| async move { c.handle(key, obj).await },
            )
            .run()
            .await?;
        Ok(())
    }

    async fn handle(
        &self,
        _key: ObjectKey,
        obj: Option<Arc<WorkloadRebalancer>>,
    ) -> HandlerResult<WorkloadRebalancer> {
        let Some(rebalancer) = obj.filter(|r| r.metadata.deletion_timestamp.is_none()) else {
            return HandlerResult::Success;
        };
        match self.reconcile(&rebalancer).await {
            Ok(Some(after)) => HandlerResult::RequeueAfter(after),
            Ok(None) => HandlerResult::Success,
            Err(e) => {
                tracing::warn!(error = %e, "WorkloadRebalancer not reconciled");
                HandlerResult::error(e)
            }
        }
    }

    /// One pass; `Some(delay)` when a finished rebalancer expires later.
    async fn reconcile(
        &self,
        rebalancer: &WorkloadRebalancer,
    ) -> Result<Option<Duration>, RebalancerError> {
        let name = rebalancer.name_any();
        let created = rebalancer.metadata.creation_timestamp.as_ref();
        let mut status = observed_for_spec(rebalancer);
        let mut retry = Vec::new();
        for item in &mut status.observed_workloads {
            if !item.result.is_empty() {
                continue;
            }
            match self.trigger(item, created).await {
                Outcome::Done => item.result = REBALANCE_SUCCESSFUL.into(),
                Outcome::NoBinding => {
                    item.result = REBALANCE_FAILED.into();
                    item.reason = REBALANCE_OBJECT_NOT_FOUND.into();
                }
                Outcome::Retry(e) => retry.push(e),
            }
        }
        let old = rebalancer.status.clone().unwrap_or_default();
        status.finish_time = old.finish_time.clone();
        let mut current = rebalancer.clone();
        if status != old {
            if retry.is_empty() {
                status.finish_time = Some(now());
            }
            let patch = merge_diff(&json!({"status": old}), &json!({"status": status}));
            if let Some(patch) = patch {
                let api: Api<WorkloadRebalancer> = Api::all(self.inner.client.clone());
                current = api
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|source| RebalancerError::Status {
                        rebalancer: name.clone(),
                        source,
                    })?;
                tracing::info!(
                    rebalancer = %name,
                    done = status.observed_workloads.iter().filter(|o| !o.result.is_empty()).count(),
                    pending = retry.len(),
                    "WorkloadRebalancer status updated"
                );
            }
        }
        if let Some(first) = retry.first() {
            return Err(RebalancerError::Pending {
                rebalancer: name,
                count: retry.len(),
                first: first.clone(),
            });
        }
        if current.spec.ttl_seconds_after_finished.is_none() {
            return Ok(None);
        }
        let Some(left) = time_left(&current, &now()) else {
            return Err(RebalancerError::NoFinishTime(name));
        };
        if !left.is_zero() {
            return Ok(Some(left));
        }
        let api: Api<WorkloadRebalancer> = Api::all(self.inner.client.clone());
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: current.metadata.resource_version.clone(),
                uid: None,
            }),
            ..Default::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => {
                tracing::info!(rebalancer = %name, "finished WorkloadRebalancer deleted after its TTL");
                Ok(None)
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(source) => Err(RebalancerError::Delete {
                rebalancer: name,
                source,
            }),
        }
    }

    /// Sets the workload's binding's `rescheduleTriggeredAt` to `created` unless a trigger at or
    /// after it is there already.
    async fn trigger(&self, item: &ObservedWorkload, created: Option<&Time>) -> Outcome {
        let w = &item.workload;
        let binding = binding_name(&w.kind, &w.name);
        let client = self.inner.client.clone();
        let result = if w.namespace.is_empty() {
            trigger_binding::<ClusterResourceBinding>(Api::all(client), &binding, created, |b| {
                &mut b.spec.reschedule_triggered_at
            })
            .await
        } else {
            trigger_binding::<ResourceBinding>(
                Api::namespaced(client, &w.namespace),
                &binding,
                created,
                |b| &mut b.spec.reschedule_triggered_at,
            )
            .await
        };
        let what = format!("{} {}/{} (binding {binding})", w.kind, w.namespace, w.name);
        match result {
            Ok(triggered) => {
                if triggered {
                    tracing::info!(workload = %what, "rescheduling triggered");
                }
                Outcome::Done
            }
            Err(e) if is_not_found(&e) => {
                tracing::info!(workload = %what, "no binding: nothing to rebalance");
                Outcome::NoBinding
            }
            Err(e) => Outcome::Retry(format!("{what}: {e}")),
        }
    }
}

/// Reads the binding and, if it needs this trigger, merge-patches `spec.rescheduleTriggeredAt`
/// guarded by the read `resourceVersion` (a concurrent change is a conflict, retried later).
/// `Ok(false)` when a newer trigger is already there.
async fn trigger_binding<K>(
    api: Api<K>,
    name: &str,
    created: Option<&Time>,
    field: impl Fn(&mut K) -> &mut Option<Time>,
) -> Result<bool, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let mut read = api.get(name).await?;
    if !needs_trigger(created, field(&mut read).as_ref()) {
        return Ok(false);
    }
    let mut updated = read.clone();
    *field(&mut updated) = created.cloned();
    if let Some(patch) = guarded_merge_patch(&read, &updated).map_err(kube::Error::SerdeError)? {
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(true)
}
