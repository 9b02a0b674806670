//! The rollout controller (karmada-rs's own; Karmada has none): staged rollout of a new template
//! revision across member clusters, driven by `apps.karmada-rs.io/v1alpha1` RolloutStrategies.
//!
//! For each ResourceBinding whose template a RolloutStrategy of its namespace selects, the
//! controller keeps a Rollout object (same namespace and name as the binding, owned by it) and
//! moves it along: a new template revision is given to the clusters of the first stage (at most
//! `maxConcurrency` at a time), a cluster succeeds once its Work carries the revision, applied,
//! and reports the workload healthy for `minSuccessSeconds`, fails when that takes longer than
//! `progressDeadlineSeconds`; a stage whose clusters all succeeded is promoted (after its
//! `TimedWait`/`Approval` tasks), more than `maxFailures` failures halt the rollout, and
//! `spec.rollbackRevision` returns every cluster to the stable revision. The binding controller
//! renders each cluster's Work from the revision the Rollout admits it to
//! (`karmada_controllers_common::rollout`); the two never call each other. Without a strategy the
//! Rollout is deleted and the binding renders as Karmada's does.
//!
//! It runs beside the binding controller (it has no Karmada `--controllers` name), and only when
//! the control plane serves `apps.karmada-rs.io/v1alpha1` (the CRDs are installed at start-up).
//!
//! # Who calls what
//!
//! - [`alongside`] starts it with the binding controller; [`RolloutController::run`] registers
//!   the handlers ([`handlers`]): bindings, their Works, strategies and Rollouts all queue the
//!   binding's key.
//! - `handle` calls [`reconcile`], which reads what the rollout depends on ([`observe`]), takes
//!   one step ([`progress`], pure; stage membership in [`stages`]) and writes the Rollout and
//!   its Events ([`write`]). Metrics in [`metrics`], errors in [`error`].

mod error;
mod handlers;
mod metrics;
mod observe;
pub mod progress;
mod reconcile;
pub mod stages;
mod write;

use std::sync::Arc;

use karmada_apis::rollout::{Rollout, RolloutStrategy};
use karmada_apis::{Cluster, ResourceBinding, Work};
use karmada_controllers_common::error::framework;
use karmada_controllers_common::handlers::shared_controller;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use lariat::SharedController;
use lariat::events::EventRecorder;

pub use error::RolloutError;

/// The controller's name in logs and its handler name.
pub const NAME: &str = "rollout";
/// The User-Agent suffix and the Events' `source.component`.
pub const CONTROLLER_NAME: &str = "rollout-controller";

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    recorder: EventRecorder,
    rb: SharedController<ResourceBinding>,
    works: SharedController<Work>,
    clusters: SharedController<Cluster>,
    strategies: SharedController<RolloutStrategy>,
    rollouts: SharedController<Rollout>,
}

/// The rollout controller. Cheap to clone.
#[derive(Clone)]
pub struct RolloutController {
    inner: Arc<Inner>,
}

impl RolloutController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, RolloutError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("rollout client"))?;
        let recorder = ctx.events.recorder(CONTROLLER_NAME);
        Ok(Self {
            inner: Arc::new(Inner {
                rb: shared_controller::<ResourceBinding>(cp)?,
                works: shared_controller::<Work>(cp)?,
                clusters: shared_controller::<Cluster>(cp)?,
                strategies: shared_controller::<RolloutStrategy>(cp)?,
                rollouts: shared_controller::<Rollout>(cp)?,
                ctx,
                client,
                recorder,
            }),
        })
    }

    /// Waits for the caches a sync reads, registers the handlers and serves until cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        let wiring = inner
            .ctx
            .wiring("rollout controller", &self)
            .waits_for(&inner.works)
            .waits_for(&inner.clusters)
            .waits_for(&inner.strategies)
            .waits_for(&inner.rollouts);
        self.handlers(wiring)
            .handles(
                &inner.rb,
                NAME,
                |this: Self, k, o: Option<Arc<ResourceBinding>>| async move { this.handle(k, o).await },
            )
            .run()
            .await?;
        Ok(())
    }
}

/// Runs the rollout controller beside `binding` (the binding controller's start function) when
/// the control plane serves Rollouts; `binding` alone otherwise. The binding controller reports
/// readiness; the rollout controller gets its own reporter.
pub fn alongside(binding: StartFn) -> StartFn {
    Arc::new(move |ctx: ControllerContext| {
        let binding = binding(ctx.clone());
        Box::pin(async move {
            let client = ctx
                .control_plane
                .clients()
                .client_for_controller(CONTROLLER_NAME)
                .map_err(framework("rollout client"))?;
            if !karmada_controllers_common::rollout::rollouts_served(&client)
                .await
                .map_err(|e| format!("rollout controller: discovery of rollouts: {e}"))?
            {
                return binding.await;
            }
            let (synced, _) = karmada_controllers_common::SyncReporter::new();
            let rollout_ctx = ControllerContext { synced, ..ctx };
            let controller = RolloutController::new(rollout_ctx)?;
            let (a, b) = tokio::join!(binding, controller.run());
            a.and(b)
        })
    })
}
