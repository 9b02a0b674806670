//! The `serviceExport` controller (Karmada's `service-export-controller`): collects the
//! EndpointSlices of exported Services from the member clusters into the control plane, as Works
//! in the member's execution namespace with dispatching suspended
//! (`karmada_controllers_common::collected_slices`); the `endpointSlice` controller turns them into
//! the derived Service's EndpointSlices.
//!
//! How it is put together:
//! - a handler on the control plane's Work controller ([`works`]) starts watching a member's
//!   ServiceExports and EndpointSlices (every one, not only Karmada-managed ones: a member's
//!   EndpointSlices are built by its own kube-controller-manager) once a Work holding a
//!   ServiceExport has been applied there, so only members that export something are watched. The
//!   same handler releases a collected Work whose ServiceExport or EndpointSlice is gone from the
//!   member (what happened while this process was not running);
//! - handlers on those member watches ([`member`]): a ServiceExport appearing collects its
//!   Service's EndpointSlices and releases collected Works of slices that no longer exist; one
//!   going releases them all; an EndpointSlice appearing or changing is collected when its Service
//!   is exported, one going is released. Slices Karmada itself put into the member are never
//!   collected;
//! - every 15 s, members that were connected anew (new caches, no handlers) get their watches back.
//!
//! Differs from Karmada: a member is watched while it is connected (the clusterStatus and cluster
//! controllers connect and disconnect members by the Cluster's health) rather than by re-reading
//! the Cluster's Ready condition; collected Works are relabelled by guarded merge patches instead
//! of updates of the whole Work.
//!
//! In Pull mode `karmada-agent` runs this controller for its own cluster (its members are its one
//! cluster, its Works those of its execution namespace); the controller-manager never connects to
//! a Pull member, so it never watches one.

mod member;
mod works;

use std::sync::Arc;
use std::time::Duration;

use karmada_apis::Work;
use karmada_apis::well_known::SERVICE_NAME_LABEL;
use karmada_controllers_common::error::framework;
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::work::WorkError;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use karmada_interpreter::Interpreter;
use lariat::SharedController;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// The controller's `--controllers` name.
pub const NAME: &str = "serviceExport";
/// Karmada's controller name (User-Agent suffix, logs).
pub const CONTROLLER_NAME: &str = "service-export-controller";
/// The name of this controller's handlers on member watches (Karmada's worker `service-export`).
pub const MEMBER_HANDLER: &str = "service-export";

/// How often members are checked for watches that lost this controller's handlers.
const MEMBER_RESYNC_PERIOD: Duration = Duration::from_secs(15);
/// How long a handler waits for a member cache that has not synced yet.
const MEMBER_CACHE_RETRY: Duration = Duration::from_secs(1);

/// A serviceExport failure, naming the object and the cause.
#[derive(Debug, thiserror::Error)]
pub enum ServiceExportError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// A collected EndpointSlice could not be written into its Work.
    #[error("cluster {cluster}: collecting EndpointSlice {slice}: {source}")]
    Report {
        /// The member cluster.
        cluster: String,
        /// `namespace/name` of the member EndpointSlice.
        slice: String,
        /// What failed (boxed: a Work error is large).
        #[source]
        source: Box<WorkError>,
    },
    /// A member EndpointSlice could not be encoded (not expected).
    #[error("cluster {cluster}: encoding EndpointSlice {slice}: {source}")]
    Encode {
        /// The member cluster.
        cluster: String,
        /// `namespace/name` of the member EndpointSlice.
        slice: String,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
    /// Several collected EndpointSlices failed; the first error is kept.
    #[error("{count} collected EndpointSlices failed, first: {first}")]
    Several {
        /// How many failed.
        count: usize,
        /// The first failure.
        #[source]
        first: Box<ServiceExportError>,
    },
}

karmada_controllers_common::core_error_from!(ServiceExportError);

impl ServiceExportError {
    /// One error out of several (`None` when there were none).
    fn aggregate(mut errors: Vec<ServiceExportError>) -> Result<(), ServiceExportError> {
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            count => Err(ServiceExportError::Several {
                count,
                first: Box::new(errors.remove(0)),
            }),
        }
    }
}

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    interpreter: Interpreter,
    /// The control plane's Works, indexed by the collected Service's name.
    works: SharedController<Work>,
    /// Serialises "are the member handlers registered? register them" per process.
    registering: Mutex<()>,
    cancel: CancellationToken,
}

/// The controller. Cheap to clone.
#[derive(Clone)]
pub struct ServiceExportController {
    inner: Arc<Inner>,
}

/// The start function registered under `serviceExport`.
pub fn start_fn() -> StartFn {
    start_fn_of(ServiceExportController::new, ServiceExportController::run)
}

impl ServiceExportController {
    /// Builds the controller on the context's control plane (members are watched on demand).
    pub fn new(ctx: ControllerContext) -> Result<Self, ServiceExportError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("serviceExport client"))?;
        let works = shared_controller::<Work>(cp)?;
        works.store().index_by_label(SERVICE_NAME_LABEL);
        karmada_controllers_common::work_index::index_manifests(&works.store());
        let interpreter = karmada_controllers_common::interpreter::interpreter(
            cp,
            &ctx.events,
            karmada_interpreter::InterpreterOptions::default(),
        );
        let cancel = ctx.cancel.child_token();
        Ok(Self {
            inner: Arc::new(Inner {
                ctx,
                client,
                interpreter,
                works,
                registering: Mutex::new(()),
                cancel,
            }),
        })
    }

    /// Registers the Work handler, reports synced once the Work cache has, and re-arms member
    /// watches until cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        inner
            .ctx
            .wiring("serviceExport", &self)
            .cancelled_by(&inner.cancel)
            .handles(
                &inner.works,
                CONTROLLER_NAME,
                |c: Self, key, work| async move { c.handle_work(key, work).await },
            )
            .resync_every(MEMBER_RESYNC_PERIOD, Self::resync_members)
            .run()
            .await?;
        Ok(())
    }
}
