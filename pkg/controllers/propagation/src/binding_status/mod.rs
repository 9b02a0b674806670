//! The binding-status controller (`--controllers` name `bindingStatus`, Karmada's
//! `pkg/controllers/status/{rb,crb}_status_controller.go`, `common.go` and
//! `pkg/util/helper/workstatus.go`): folds the Works' status into the ResourceBinding /
//! ClusterResourceBinding (`status.aggregatedStatus` and the `FullyApplied` condition), then into
//! the resource template's `.status`.
//!
//! Triggers, as in Karmada: a scheduled binding when first seen (so every binding is handled once
//! after a restart) and whenever its template's resourceVersion changes (`spec.resource`) — here
//! also when its generation changes, so a re-scheduled binding's `FullyApplied` follows at once; a
//! Work whose status changed, or that was deleted, re-queues the binding named by its annotations.
//!
//! Writes go through the status subresource and only when something changed: the binding's status
//! is compared with the cached one (a conflict re-reads it from the API server), the template is
//! read from the API server (not the cache, Karmada issue #5285) and written only when the
//! interpreter's aggregation yields a new `.status`.
//!
//! # Who calls what
//!
//! - [`BindingStatusController::run`] (here) registers the Work handler, waits for the Work cache,
//!   then registers the binding handlers ([`handlers`]).
//! - `handle_binding` decides whether a binding needs work and calls `sync`, which folds the
//!   binding's Works into status items ([`aggregate`]), writes them on the binding ([`binding`]),
//!   then aggregates them into the template's `.status` ([`template_status`]).
//! - Errors are in [`error`].

mod aggregate;
mod binding;
mod error;
mod handlers;
mod template_status;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use karmada_apis::well_known::{
    CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL, RESOURCE_BINDING_PERMANENT_ID_LABEL,
};
use karmada_apis::{ClusterResourceBinding, ResourceBinding, ResourceBindingStatus, Work};
use karmada_interpreter::Interpreter;
use lariat::{SharedController, Store};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use handlers::SeenWorks;
use karmada_controllers_common::binding::BindingObject;
use karmada_controllers_common::error::framework;
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use lariat::events::EventRecorder;

pub use aggregate::{aggregated_item, binding_clusters, fully_applied, fully_applied_condition};
pub use error::BindingStatusError;

/// How long a Work's status change waits before its binding is aggregated (see `handle_work`).
const WORK_COALESCE: std::time::Duration = std::time::Duration::from_millis(100);

/// The controller's `--controllers` name.
pub const NAME: &str = "bindingStatus";

/// Handler name on ResourceBindings and Works, User-Agent suffix and Event source (Karmada's
/// `RBStatusControllerName`).
pub const RB_CONTROLLER_NAME: &str = "resource-binding-status-controller";

/// Handler name on ClusterResourceBindings (Karmada's `CRBStatusControllerName`).
pub const CRB_CONTROLLER_NAME: &str = "cluster-resource-binding-status-controller";

/// A binding's status controllers can handle: the binding kinds plus their status and names.
trait StatusBinding: BindingObject {
    /// Status, mutably (created empty if missing).
    fn status_mut(&mut self) -> &mut ResourceBindingStatus;
    /// Queue-key prefix (`rb` / `crb`).
    const PREFIX: &'static str;
}

impl StatusBinding for ResourceBinding {
    const PREFIX: &'static str = "rb";
    fn status_mut(&mut self) -> &mut ResourceBindingStatus {
        self.status.get_or_insert_with(Default::default)
    }
}

impl StatusBinding for ClusterResourceBinding {
    const PREFIX: &'static str = "crb";
    fn status_mut(&mut self) -> &mut ResourceBindingStatus {
        self.status.get_or_insert_with(Default::default)
    }
}

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    interpreter: Interpreter,
    recorder: EventRecorder,
    rb: SharedController<ResourceBinding>,
    crb: SharedController<ClusterResourceBinding>,
    works: SharedController<Work>,
    /// Fingerprint of each binding (`rb/ns/name`, `crb/name`) when it was last handled.
    handled: Mutex<HashMap<String, u64>>,
    /// Bindings to handle regardless of their fingerprint (a Work of theirs changed, a retry).
    forced: Mutex<HashSet<String>>,
    /// Each Work's binding and status fingerprint when last seen.
    seen_works: Mutex<SeenWorks>,
    cancel: CancellationToken,
}

/// The binding-status controller. Cheap to clone.
#[derive(Clone)]
pub struct BindingStatusController {
    inner: Arc<Inner>,
}

impl BindingStatusController {
    /// Builds the controller on the context's control plane (nothing is watched until
    /// [`BindingStatusController::run`]).
    pub fn new(ctx: ControllerContext) -> Result<Self, BindingStatusError> {
        let interpreter = karmada_controllers_common::interpreter::interpreter(
            &ctx.control_plane,
            &ctx.events,
            karmada_interpreter::InterpreterOptions::default(),
        );
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(RB_CONTROLLER_NAME)
            .map_err(framework("binding-status client"))?;
        let rb = shared_controller::<ResourceBinding>(cp)?;
        let crb = shared_controller::<ClusterResourceBinding>(cp)?;
        let works = shared_controller::<Work>(cp)?;
        let recorder = ctx.events.recorder(RB_CONTROLLER_NAME);
        let cancel = ctx.cancel.child_token();
        Ok(BindingStatusController {
            inner: Arc::new(Inner {
                ctx,
                client,
                interpreter,
                recorder,
                rb,
                crb,
                works,
                handled: Mutex::new(HashMap::new()),
                forced: Mutex::new(HashSet::new()),
                seen_works: Mutex::new(SeenWorks::default()),
                cancel,
            }),
        })
    }

    fn work_store(&self) -> Store<Work> {
        self.inner.works.cache().peek_store().clone()
    }

    /// Registers the handlers, reports synced once the caches have synced, and runs until the
    /// context is cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        {
            let works = inner.works.cache();
            let store = works.peek_store();
            store.index_by_label(RESOURCE_BINDING_PERMANENT_ID_LABEL);
            store.index_by_label(CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL);
        }
        // Bindings are aggregated from the Work cache: their handlers start only once it has
        // synced, or a restart would write an empty aggregatedStatus (and FullyApplied=False) for
        // every binding before putting it back. Late registration replays every cached binding.
        inner
            .ctx
            .wiring("binding-status controller", &self)
            .cancelled_by(&inner.cancel)
            .handles(
                &inner.works,
                RB_CONTROLLER_NAME,
                |this: Self, k, o: Option<Arc<Work>>| async move { this.handle_work(k, o) },
            )
            .waits_for(&inner.works)
            .handles(
                &inner.rb,
                RB_CONTROLLER_NAME,
                |this: Self, k, o: Option<Arc<ResourceBinding>>| async move {
                    this.handle_binding(k, o).await
                },
            )
            .handles(
                &inner.crb,
                CRB_CONTROLLER_NAME,
                |this: Self, k, o: Option<Arc<ClusterResourceBinding>>| async move {
                    this.handle_binding(k, o).await
                },
            )
            .run()
            .await?;
        Ok(())
    }
}

/// Starts the controller: the [`StartFn`] the registry holds.
pub fn start_fn() -> StartFn {
    start_fn_of(BindingStatusController::new, BindingStatusController::run)
}

#[cfg(test)]
mod tests;
