//! The FederatedHPA controller (`--controllers` name `federatedHorizontalPodAutoscaler`, Karmada's
//! `federatedHPA-controller`): Kubernetes' HPA algorithm over a resource template whose pods run in
//! several member clusters.
//!
//! Each sync (on a spec change, then every `--horizontal-pod-autoscaler-sync-period`) it finds the
//! template's ResourceBinding (by the policy permanent-id label) and the Ready clusters it is
//! scheduled to; in each of them it reads the workload's scale subresource (replicas, selector), the
//! pods of that selector and their metrics (`metrics.k8s.io`, `custom.metrics.k8s.io`, see
//! [`metrics`]). A Pull member is never contacted: its scale comes from its Work ([`reported`]),
//! and its pods are left out. The replica calculator ([`calculator`]) turns them into a proposal per metric (the
//! largest wins), calibrated by template replicas / member replicas; [`normalize`] applies the
//! stabilization windows, `spec.behavior`'s policies and min/max. A change is written to the
//! template's `scale` subresource (the scheduler then divides the new count among the clusters).
//!
//! Status (`currentReplicas`, `desiredReplicas`, `currentMetrics`, `lastScaleTime`, conditions
//! `AbleToScale`, `ScalingActive`, `ScalingLimited`) and Events carry Karmada's reasons and
//! messages. Karmada's admission defaults (minReplicas 1, 80% CPU, the behavior's defaults) are
//! applied in memory when the object lacks them.
//!
//! # Who calls what
//!
//! - [`FederatedHpaController::run`] (here) registers `handle` ([`reconcile`]), which syncs a
//!   FederatedHPA when its spec changed or its period is due.
//! - `reconcile` finds the target's binding and members ([`members`], Pull members through
//!   [`reported`]), computes the replicas the metrics call for ([`replicas`], one [`proposal`] per
//!   metric, through [`metrics`] and [`calculator`]), normalizes them ([`normalize`]), writes the
//!   scale and records the status and Events ([`status`]).
//! - Errors are in [`error`].

pub mod calculator;
mod durations;
mod error;
mod members;
pub mod metrics;
pub mod normalize;
mod proposal;
mod reconcile;
mod replicas;
mod reported;
mod status;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use karmada_apis::autoscaling::v1alpha1::FederatedHPA;
use karmada_apis::{Cluster, ResourceBinding};
use karmada_controllers_common::context::HpaSettings;
use karmada_controllers_common::error::framework;
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use kube::Client;
use lariat::SharedController;
use lariat::events::EventRecorder;
use tokio_util::sync::CancellationToken;

use calculator::Calculator;
use normalize::Histories;

pub use error::FhpaError;

/// The controller's `--controllers` name.
pub const NAME: &str = "federatedHorizontalPodAutoscaler";
/// Karmada's controller name (User-Agent suffix, Event source).
pub const CONTROLLER_NAME: &str = "federatedHPA-controller";

/// Karmada's default target when a FederatedHPA lists no metric: 80% average CPU utilization.
pub const DEFAULT_CPU_UTILIZATION: i32 = 80;

struct Inner {
    ctx: ControllerContext,
    client: Client,
    hpas: SharedController<FederatedHPA>,
    bindings: SharedController<ResourceBinding>,
    clusters: SharedController<Cluster>,
    events: EventRecorder,
    calculator: Calculator,
    settings: HpaSettings,
    histories: Mutex<Histories>,
    /// Per FederatedHPA: the generation last synced and when the next periodic sync is due, so the
    /// controller's own status writes do not trigger syncs (Karmada filters on generation changes).
    due: Mutex<HashMap<String, (Option<i64>, Instant)>>,
    /// Per FederatedHPA: the pods it counted last, to find pods claimed by two of them.
    pods_of: Mutex<HashMap<String, BTreeSet<String>>>,
    cancel: CancellationToken,
}

/// The FederatedHPA controller. Cheap to clone.
#[derive(Clone)]
pub struct FederatedHpaController {
    inner: Arc<Inner>,
}

impl FederatedHpaController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, FhpaError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("federatedHorizontalPodAutoscaler client"))?;
        let hpas = shared_controller::<FederatedHPA>(cp)?;
        let bindings = shared_controller::<ResourceBinding>(cp)?;
        let clusters = shared_controller::<Cluster>(cp)?;
        let cancel = ctx.cancel.child_token();
        let events = ctx.events.recorder(CONTROLLER_NAME);
        let settings = ctx.settings.hpa.clone();
        let calculator = Calculator {
            tolerance: settings.tolerance,
            cpu_initialization_period: settings.cpu_initialization_period,
            delay_of_initial_readiness_status: settings.initial_readiness_delay,
        };
        Ok(FederatedHpaController {
            inner: Arc::new(Inner {
                ctx,
                client,
                hpas,
                bindings,
                clusters,
                events,
                calculator,
                settings,
                histories: Mutex::new(Histories::default()),
                due: Mutex::new(HashMap::new()),
                pods_of: Mutex::new(HashMap::new()),
                cancel,
            }),
        })
    }

    /// Registers the handler and runs until the context is cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        inner
            .ctx
            .wiring(NAME, &self)
            .cancelled_by(&inner.cancel)
            .waits_for(&inner.bindings)
            .waits_for(&inner.clusters)
            .handles(
                &inner.hpas,
                NAME,
                |this: Self, k, o: Option<Arc<FederatedHPA>>| async move { this.handle(k, o).await },
            )
            .run()
            .await?;
        Ok(())
    }
}

/// The start function registered as `federatedHorizontalPodAutoscaler`.
pub fn start_fn() -> StartFn {
    start_fn_of(FederatedHpaController::new, FederatedHpaController::run)
}
