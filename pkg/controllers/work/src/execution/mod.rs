//! The execution controller (`--controllers` name `execution`): applies the manifests of Works in
//! `karmada-es-<cluster>` to the Push-mode member `<cluster>`, and deletes (or releases) them when
//! the Work is deleted, as Karmada's `execution-controller` does.
//!
//! # Create/update (PUT), not server-side apply
//!
//! Member objects are written with `create` when absent and a full `update` (PUT) when present,
//! after keeping what the member owns (resourceVersion, finalizers, ownerReferences, member-added
//! labels and annotations, and the interpreter's retain rules such as Service `clusterIP` or
//! retained replicas). We chose this over server-side apply with field manager `karmada` because:
//!
//! - **Ownership of fields.** Karmada's contract is "the template is the truth, except for the
//!   fields the member owns", and the member-owned fields are known per kind (the retain rules).
//!   Server-side apply would instead leave every field some other manager once set in place when
//!   the template drops it (SSA only removes fields *we* own), so a field removed from the
//!   template could linger on the member, and objects taken over with `overwrite` would keep the
//!   previous owner's fields. PUT-with-retain gives exactly Karmada's result, which users of a
//!   swapped-in binary expect.
//! - **Conflicts.** With SSA, another manager owning a field makes our apply fail (or, forced,
//!   silently steal the field); with PUT the only conflict is the optimistic-lock one
//!   (resourceVersion), which we retry on a fresh read. Taking over unmanaged objects stays an
//!   explicit decision (`karmada.io/managed=true` or `work.karmada.io/conflict-resolution=overwrite`).
//! - **Write volume.** Before any write the desired object is compared with the member object
//!   ([`karmada_interpreter::Interpreter::matches_member`]); equal means no request at all, so a
//!   restart over already-propagated objects writes nothing. SSA would need a request per object
//!   per resync (the server decides whether anything changed) and stores `managedFields` entries
//!   on every object.
//!
//! # Drift policies (karmada-rs's own)
//!
//! A DriftPolicy or ClusterDriftPolicy (`policy.karmada-rs.io`) covering a manifest changes two
//! decisions ([`apply`]): with `takeover` set, whether an object that exists in the member without
//! being managed is taken over (`Always`, `IfNoDiff`: only when it already matches, `Never`)
//! instead of `conflictResolution`; with `drift: ReportOnly`, a managed object that differs from
//! its manifest is written only when the manifest changed since it was last written (the hash of
//! the manifest is kept in the object's `policy.karmada-rs.io/manifest-hash` annotation). Without
//! a covering policy nothing differs from Karmada's behaviour.
//!
//! # Member reads
//!
//! Member objects are read from the member's shared, label-filtered caches
//! (`karmada.io/managed=true`, found by the manifest's GVK through the member's REST mapping), so
//! memory follows what we propagate. Objects outside that scope (a same-name object not managed by
//! Karmada) are found by a direct GET when a create reports that the object exists; a cache hit
//! that looks different is confirmed with a GET before writing (the cache strips fields such as
//! the last-applied annotation).
//!
//! # Conditions and Events
//!
//! `Dispatching` is True/`Dispatching` or False/`SuspendDispatching` (suspended Works are not
//! applied). `Applied` is True/`AppliedSuccessful` or False/`AppliedFailed` with
//! `Failed to apply all manifests (n/m): <member API error>`; conditions are written only when they
//! change. Warning `SyncFailed` Events are recorded on every failure, Normal `SyncSucceed` only
//! when a member object was written (Karmada records one per sync; we avoid a host write per
//! Work on every restart).
//!
//! A cluster that is not Ready is an error (per-key exponential backoff); when it becomes Ready
//! its Works are requeued at once.
//!
//! # One member cannot stall the others
//!
//! Member I/O runs on a queue per member ([`member_queues`]), not on the shared Work workers, and
//! every member request has a deadline ([`karmada_controllers_common::members::REQUEST_TIMEOUT`]). A member that hangs
//! holds only its own workers; the others keep their usual latency.
//!
//! # Who calls what
//!
//! - [`ExecutionController::run`] (here) registers the Cluster and Work handlers ([`handlers`]) and
//!   listens to the member registry; a Work of a connected member goes to that member's queue
//!   ([`member_queues`]), which calls `reconcile_key`.
//! - [`reconcile`] decides per Work: deleting → [`cleanup`]; suspended, cluster not Ready or not
//!   connected → only the Dispatching condition; else every manifest is applied ([`apply`], on the
//!   member objects found by [`target`], never one [`ownership`] says is another Work's) and the
//!   outcome recorded ([`status`], with the writes the cache has not caught up with in [`written`]).
//! - Errors are in [`error`].

mod apply;
mod cleanup;
mod error;
mod handlers;
mod member_queues;
pub mod ownership;
mod reconcile;
mod status;
mod target;
mod written;

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use karmada_apis::{Cluster, Work};
use karmada_interpreter::Interpreter;
use lariat::{HandlerResult, ObjectKey, SharedController};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use karmada_controllers_common::drift_policy::DriftPolicies;
use karmada_controllers_common::handlers::start_fn_of;
use karmada_controllers_common::work_index;
use karmada_controllers_common::{ControllerContext, StartFn};
use lariat::events::EventRecorder;
use member_queues::MemberQueues;
use written::WrittenStatuses;

pub use error::{ApplyError, ExecutionError};

/// The controller's `--controllers` name.
pub const NAME: &str = "execution";
/// Karmada's controller name: User-Agent suffix and Events' `source.component`.
pub const CONTROLLER_NAME: &str = "execution-controller";

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    recorder: EventRecorder,
    interpreter: Interpreter,
    works: SharedController<Work>,
    clusters: SharedController<Cluster>,
    /// Ready state of each cluster as last seen.
    ready: Mutex<HashMap<String, bool>>,
    /// Where member I/O runs: one queue per member.
    queues: MemberQueues,
    /// Status writes the Work cache has not caught up with yet.
    written: WrittenStatuses,
    /// The drift policies (set when the controller runs; none until then).
    policies: std::sync::OnceLock<DriftPolicies>,
    cancel: CancellationToken,
}

/// The execution controller. Cheap to clone.
#[derive(Clone)]
pub struct ExecutionController {
    inner: Arc<Inner>,
}

impl ExecutionController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, ExecutionError> {
        let interpreter = karmada_controllers_common::interpreter::interpreter(
            &ctx.control_plane,
            &ctx.events,
            karmada_interpreter::InterpreterOptions::default(),
        );
        let cp = &ctx.control_plane;
        let client = cp.clients().client_for_controller(CONTROLLER_NAME)?;
        let works = cp.controllers().for_kind::<Work>()?;
        // A member's Works are re-queued through it when the member connects or becomes Ready.
        work_index::index_manifests(works.cache().peek_store());
        let clusters = cp.controllers().for_kind::<Cluster>()?;
        let recorder = ctx.events.recorder(CONTROLLER_NAME);
        let cancel = ctx.cancel.child_token();
        let workers = ctx.settings.concurrent_work_syncs;
        let rate_limiter = ctx.settings.rate_limiter.clone();
        let inner = Arc::new_cyclic(|me: &Weak<Inner>| {
            let me = me.clone();
            let queues = MemberQueues::new(
                CONTROLLER_NAME,
                workers,
                rate_limiter,
                move |cluster: String, key: ObjectKey| {
                    let me = me.clone();
                    async move {
                        match me.upgrade() {
                            Some(inner) => {
                                ExecutionController { inner }
                                    .reconcile_key(&cluster, &key)
                                    .await
                            }
                            None => true,
                        }
                    }
                },
            );
            Inner {
                ctx,
                client,
                recorder,
                interpreter,
                works,
                clusters,
                ready: Mutex::new(HashMap::new()),
                queues,
                written: WrittenStatuses::default(),
                policies: std::sync::OnceLock::new(),
                cancel,
            }
        });
        Ok(ExecutionController { inner })
    }

    /// Registers the handlers and runs until the context is cancelled. Unlike the other
    /// controllers it serves in a loop of its own: it listens to member connections from before
    /// the first Work is handled until it stops.
    pub async fn run(self) -> Result<(), karmada_controllers_common::BoxError> {
        let inner = &self.inner;
        let wiring = || {
            inner
                .ctx
                .wiring("execution controller", &self)
                .cancelled_by(&inner.cancel)
        };
        let Some(_clusters_listed) = wiring().waits_for(&inner.clusters).sync().await? else {
            return Ok(());
        };
        // Subscribed before the first Work is handled: a member connecting while the first list
        // comes in re-queues the Works that found it not connected yet, instead of leaving them
        // to their backoff.
        let mut events = inner.ctx.members.subscribe();
        let timeout = inner.ctx.settings.cluster_cache_sync_timeout;
        let policies = DriftPolicies::start(&inner.ctx.control_plane, &inner.cancel, timeout).await;
        // A policy change may change what a Work's objects should get (repair, takeover): every
        // Work is looked at again, at low priority (an up-to-date object costs no request).
        let this = self.clone();
        policies.on_change(NAME, &inner.cancel, move || {
            for name in this.inner.ctx.members.registry().names() {
                this.enqueue_cluster(&name);
            }
        });
        let _ = inner.policies.set(policies);
        let works_synced = wiring()
            .handles(
                &inner.clusters,
                NAME,
                |this: Self, k, o: Option<Arc<Cluster>>| async move {
                    this.cluster_changed(&k, o.as_deref());
                    HandlerResult::Success
                },
            )
            .handles(
                &inner.works,
                NAME,
                |this: Self, k, o: Option<Arc<Work>>| async move { this.handle_work(k, o).await },
            )
            .sync();
        tokio::pin!(works_synced);
        let synced = loop {
            tokio::select! {
                synced = &mut works_synced => break synced?,
                e = events.recv() => if !self.member_event(e) {
                    break (&mut works_synced).await?;
                },
            }
        };
        let Some(mut synced) = synced else {
            return Ok(());
        };
        synced.report();
        loop {
            tokio::select! {
                _ = inner.cancel.cancelled() => break,
                e = events.recv() => if !self.member_event(e) {
                    inner.cancel.cancelled().await;
                    break;
                },
            }
        }
        tracing::info!("execution controller stopped");
        Ok(())
    }
}

/// The start function registered as `execution`.
pub fn start_fn() -> StartFn {
    start_fn_of(ExecutionController::new, ExecutionController::run)
}
