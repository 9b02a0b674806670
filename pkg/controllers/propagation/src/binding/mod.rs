//! The binding controller (`--controllers` name `binding`): turns each ResourceBinding and
//! ClusterResourceBinding into one Work per target cluster, in `karmada-es-<cluster>`, as
//! Karmada's `binding-controller` does.
//!
//! Per target cluster (`spec.clusters` plus the clusters of `spec.requiredBy`) the template is
//! read from the API server, copied, its replicas revised to the cluster's share (workload kinds
//! with a revise rule), a Job's `completions` divided when replicas are divided, then
//! ClusterOverridePolicies and OverridePolicies applied. The Work gets Karmada's name, labels,
//! annotations (binding back-pointers, conflict resolution, applied-overrides records), finalizer
//! `karmada.io/execution-controller` and a decorated manifest ([`work`]); it is written only when
//! it changed. Works of clusters no longer targeted are deleted (clusters with a graceful eviction
//! task keep theirs unless its purge mode is `Directly`).
//!
//! An override that cannot be applied leaves that cluster's Work as it was: the binding gets a
//! `SyncWorkFailed`/`ApplyOverridePolicyFailed` Warning Event and the condition
//! [`CONDITION_OVERRIDE_APPLIED`]`=False` naming the policy, rule, path and cause. The binding is
//! not retried on a timer for that (nothing would change); a change of an override policy, of the
//! binding or of the template brings it back.
//!
//! A Work the API server refuses for its size (`413`, or etcd's `request is too large`: the
//! template embedded in a Work exceeds etcd's 1.5 MiB request limit) gets the same treatment: a
//! `SyncWorkFailed` Warning Event on the binding and the template, the condition
//! [`CONDITION_WORKS_SYNCED`]`=False` with reason [`REASON_WORK_TOO_LARGE`], no retry on a timer;
//! other bindings are not held up.
//!
//! Deleting a binding deletes its Works; the binding's finalizer is released once they are gone
//! (their own finalizer is held by the execution controller until the member objects are gone).
//!
//! Only generation changes of bindings are synced (Karmada's `GenerationChangedPredicate`), plus
//! bindings an OverridePolicy/ClusterOverridePolicy change may affect and retries of failures.
//!
//! # Who calls what
//!
//! - [`BindingController::run`] (here) waits for the caches a sync reads and registers the
//!   handlers ([`handlers`]): binding changes go to `handle_binding`, override policy changes
//!   re-queue the bindings they may affect.
//! - `handle_binding` sends a deleted binding to [`cleanup`] and a changed one to [`sync`], which
//!   deletes the Works of clusters no longer targeted ([`clusters`] says which), writes a Work per
//!   target cluster ([`works`]) and reports the outcome as Events and conditions ([`status`]).
//! - Errors are in [`error`].

mod cleanup;
mod clusters;
mod error;
mod handlers;
mod status;
mod sync;
mod works;
mod written;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use karmada_apis::policy::v1alpha1::ResourceSelector;
use karmada_apis::rollout::Rollout;
use karmada_apis::{
    Cluster, ClusterOverridePolicy, ClusterResourceBinding, OverridePolicy, ResourceBinding, Work,
};
use karmada_interpreter::Interpreter;
use lariat::{HandlerResult, SharedController};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::binding::BindingObject;
use karmada_controllers_common::error::framework;
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::{ControllerContext, StartFn};
use lariat::events::EventRecorder;
use written::WrittenClusters;

pub use clusters::{conflict_resolution, existing_clusters, suspend_dispatching, target_clusters};
pub use error::BindingError;

/// The controller's `--controllers` name.
pub const NAME: &str = "binding";
/// Karmada's controller name: the User-Agent suffix and the Events' `source.component`.
pub const CONTROLLER_NAME: &str = "binding-controller";
/// Condition on a binding telling whether the override policies could be applied for every
/// target cluster (karmada-rs addition; Karmada only reports this in Events).
pub const CONDITION_OVERRIDE_APPLIED: &str = "OverrideApplied";
/// Condition on a binding telling whether every Work could be stored; `False` with reason
/// [`REASON_WORK_TOO_LARGE`] when the API server refused a Work for its size (karmada-rs
/// addition; Karmada only reports this in a `SyncWorkFailed` Event and retries forever).
pub const CONDITION_WORKS_SYNCED: &str = "WorksSynced";
/// Reason of [`CONDITION_WORKS_SYNCED`]`=False`: a Work exceeds the API server's request size.
pub const REASON_WORK_TOO_LARGE: &str = "WorkTooLarge";
/// How long to wait before looking again at Works being purged `Directly` (Karmada's 5 s).
pub const DIRECT_PURGE_REQUEUE: Duration = Duration::from_secs(5);
/// How long to wait before checking again whether a deleted binding's Works are gone.
pub const WORKS_GONE_REQUEUE: Duration = Duration::from_secs(2);

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    recorder: EventRecorder,
    interpreter: Interpreter,
    rb: SharedController<ResourceBinding>,
    crb: SharedController<ClusterResourceBinding>,
    works: SharedController<Work>,
    clusters: SharedController<Cluster>,
    ops: SharedController<OverridePolicy>,
    cops: SharedController<ClusterOverridePolicy>,
    /// `(uid, generation)` of each binding when it was last synced (`Kind/key`).
    handled: Mutex<HashMap<String, (String, i64)>>,
    /// Bindings to sync even if their generation did not change.
    forced: Mutex<HashSet<String>>,
    /// The clusters this process has written a Work to, per binding (`Kind/key`): with the Work
    /// cache, a complete view of a binding's Works even before the cache has seen the newest.
    written: Mutex<WrittenClusters>,
    /// The resource selectors of each override policy as last seen (`Kind/key`), so a deleted
    /// policy still finds the bindings it affected.
    policy_selectors: Mutex<HashMap<String, Vec<ResourceSelector>>>,
    /// The staged-rollout objects, when the control plane serves them (see
    /// `karmada_controllers_common::rollout`): a Rollout holds its binding's clusters back.
    rollouts: OnceLock<SharedController<Rollout>>,
    cancel: CancellationToken,
}

/// The binding controller. Cheap to clone.
#[derive(Clone)]
pub struct BindingController {
    inner: Arc<Inner>,
}

impl BindingController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, BindingError> {
        let interpreter = karmada_controllers_common::interpreter::interpreter(
            &ctx.control_plane,
            &ctx.events,
            karmada_interpreter::InterpreterOptions::default(),
        );
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("binding client"))?;
        let rb = shared_controller::<ResourceBinding>(cp)?;
        let crb = shared_controller::<ClusterResourceBinding>(cp)?;
        let works = shared_controller::<Work>(cp)?;
        works.store().index_by_label(ResourceBinding::ID_LABEL);
        works
            .store()
            .index_by_label(ClusterResourceBinding::ID_LABEL);
        let clusters = shared_controller::<Cluster>(cp)?;
        let ops = shared_controller::<OverridePolicy>(cp)?;
        let cops = shared_controller::<ClusterOverridePolicy>(cp)?;
        let recorder = ctx.events.recorder(CONTROLLER_NAME);
        let cancel = ctx.cancel.child_token();
        Ok(BindingController {
            inner: Arc::new(Inner {
                ctx,
                client,
                recorder,
                interpreter,
                rb,
                crb,
                works,
                clusters,
                ops,
                cops,
                handled: Mutex::new(HashMap::new()),
                forced: Mutex::new(HashSet::new()),
                written: Mutex::new(WrittenClusters::default()),
                policy_selectors: Mutex::new(HashMap::new()),
                rollouts: OnceLock::new(),
                cancel,
            }),
        })
    }

    /// Registers the handlers and runs until the context is cancelled.
    pub async fn run(self) -> Result<(), karmada_controllers_common::BoxError> {
        let inner = &self.inner;
        // Caches read while syncing: wait for them first so no Work is built from a partial view.
        let wiring = inner
            .ctx
            .wiring("binding controller", &self)
            .cancelled_by(&inner.cancel)
            .waits_for(&inner.works)
            .waits_for(&inner.clusters)
            .waits_for(&inner.ops)
            .waits_for(&inner.cops);
        self.watch_rollouts(wiring)
            .await?
            .handles(
                &inner.rb,
                NAME,
                |this: Self, k, o: Option<Arc<ResourceBinding>>| async move {
                    this.handle_binding(k, o).await
                },
            )
            .handles(
                &inner.crb,
                NAME,
                |this: Self, k, o: Option<Arc<ClusterResourceBinding>>| async move {
                    this.handle_binding(k, o).await
                },
            )
            .handles(
                &inner.ops,
                NAME,
                |this: Self, k, o: Option<Arc<OverridePolicy>>| async move {
                    let selectors = o.map(|p| p.spec.resource_selectors.clone());
                    this.policy_changed("OverridePolicy", &k, selectors);
                    HandlerResult::Success
                },
            )
            .handles(
                &inner.cops,
                NAME,
                |this: Self, k, o: Option<Arc<ClusterOverridePolicy>>| async move {
                    let selectors = o.map(|p| p.spec.resource_selectors.clone());
                    this.policy_changed("ClusterOverridePolicy", &k, selectors);
                    HandlerResult::Success
                },
            )
            .run()
            .await?;
        Ok(())
    }
}

/// The start function registered as `binding`.
pub fn start_fn() -> StartFn {
    start_fn_of(BindingController::new, BindingController::run)
}
