//! The `endpointsliceCollect` controller (Karmada's `endpointslice-collect-controller`): brings the
//! EndpointSlices of a MultiClusterService's Service home from its provider clusters, each into a
//! Work of the provider's execution namespace (dispatching suspended), for `endpointsliceDispatch`
//! to hand to the consumers.
//!
//! Its cue is the Work `multiclusterservice` writes into a provider's execution namespace holding
//! the MultiClusterService: on such a Work, the provider's EndpointSlices are watched (every
//! slice, not only Karmada-managed objects: the member's own kube-controller-manager builds them)
//! and those of the Service collected. From then on every change of a provider's slice updates its
//! Work, and a deleted slice releases it. Slices Karmada itself put into the member (dispatched or
//! derived ones) are never collected. The Works are shared with the `serviceExport` collector
//! through `karmada_controllers_common::collected_slices`.
//!
//! Releasing the slices of a cluster that stops providing is `multiclusterservice`'s job (it
//! removes the MultiClusterService's Work there), as in Karmada.
//!
//! In Pull mode `karmada-agent` runs this controller for its own cluster (its Works are those of its
//! execution namespace, its one member its own cluster), as Karmada's agent does.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use karmada_apis::Work;
use karmada_apis::names::{cluster_name, execution_space_name};
use karmada_apis::networking::v1alpha1::MULTI_CLUSTER_SERVICE_KIND;
use karmada_apis::well_known::{
    MULTI_CLUSTER_SERVICE_NAME_LABEL, MULTI_CLUSTER_SERVICE_NAMESPACE_LABEL,
};
use karmada_controllers_common::collected_slices::{
    self, MULTI_CLUSTER_SERVICE, SERVICE_NAME_OF_SLICE_LABEL, is_managed_by_karmada,
    slice_work_name,
};
use karmada_controllers_common::error::{ApiError, framework};
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::manifest::manifest_gvk;
use karmada_controllers_common::work::WorkError;
use karmada_controllers_common::work_index;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn, members};
use karmada_interpreter::Interpreter;
use kube::ResourceExt;
use lariat::{HandlerResult, ObjectKey, SharedController, SyncWait};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// The controller's `--controllers` name.
pub const NAME: &str = "endpointsliceCollect";
/// Karmada's controller name (User-Agent suffix, handler name on the Work controller).
pub const CONTROLLER_NAME: &str = "endpointslice-collect-controller";
/// Name of the handler on the members' EndpointSlice controllers (Karmada's async worker).
pub const MEMBER_HANDLER: &str = "endpointslice-collect";
/// How often provider Works are checked for members that lost the member handler (reconnects).
pub const MEMBER_RESYNC_PERIOD: Duration = Duration::from_secs(15);

/// An `endpointsliceCollect` failure, naming the object and the cause.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// A collected slice's Work could not be written.
    #[error("report EndpointSlice {key} of cluster {cluster}: {source}")]
    Report {
        /// The provider cluster.
        cluster: String,
        /// `namespace/name` of the slice.
        key: String,
        /// Why.
        #[source]
        source: Box<WorkError>,
    },
    /// A slice could not be encoded.
    #[error("encode EndpointSlice {key} of cluster {cluster}: {source}")]
    Encode {
        /// The provider cluster.
        cluster: String,
        /// `namespace/name` of the slice.
        key: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The member's EndpointSlice cache did not sync in time.
    #[error("EndpointSlice cache of cluster {cluster} not synced")]
    NotSynced {
        /// The provider cluster.
        cluster: String,
    },
}

karmada_controllers_common::core_error_from!(CollectError);

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    interpreter: Interpreter,
    works: SharedController<Work>,
    /// Serialises "is the member handler registered? register it".
    registering: Mutex<()>,
    cancel: CancellationToken,
}

/// The controller. Cheap to clone.
#[derive(Clone)]
pub struct CollectController {
    inner: Arc<Inner>,
}

/// The start function registered under `endpointsliceCollect`.
pub fn start_fn() -> StartFn {
    start_fn_of(CollectController::new, CollectController::run)
}

/// Whether the Work holds a MultiClusterService (a provider's cue).
fn holds_mcs(work: &Work) -> bool {
    work.spec
        .workload
        .manifests
        .iter()
        .any(|m| manifest_gvk(m).is_some_and(|g| g.kind == MULTI_CLUSTER_SERVICE_KIND))
}

impl CollectController {
    /// Builds the controller on the shared Work controller.
    pub fn new(ctx: ControllerContext) -> Result<Self, CollectError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("endpointslice-collect client"))?;
        let interpreter = karmada_controllers_common::interpreter::interpreter(
            cp,
            &ctx.events,
            karmada_interpreter::InterpreterOptions::default(),
        );
        let works = shared_controller::<Work>(cp)?;
        let cancel = ctx.cancel.child_token();
        Ok(CollectController {
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

    /// Registers the Work handler, reports synced once the Work cache has synced, and re-checks
    /// the members' handlers periodically until cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        let wiring = inner
            .ctx
            .wiring("endpointslice-collect controller", &self)
            .cancelled_by(&inner.cancel);
        if !karmada_controllers_common::multicluster_service::gate_enabled(
            &inner.ctx.settings,
            NAME,
        ) {
            wiring.run().await?;
            return Ok(());
        }
        work_index::index_manifests(&inner.works.store());
        wiring
            .handles(
                &inner.works,
                CONTROLLER_NAME,
                |c: Self, key, work: Option<Arc<Work>>| async move { c.handle_work(&key, work).await },
            )
            .resync_every(MEMBER_RESYNC_PERIOD, Self::resync_members)
            .run()
            .await?;
        Ok(())
    }

    /// Re-queues the provider Works of connected members whose EndpointSlice controller lacks the
    /// member handler (a member connected again has new caches).
    fn resync_members(&self) {
        let store = self.inner.works.cache().peek_store();
        for work in work_index::holding(store, None, MULTI_CLUSTER_SERVICE_KIND) {
            if work.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let namespace = work.namespace().unwrap_or_default();
            let Ok(cluster) = cluster_name(&namespace) else {
                continue;
            };
            let Some(member) = self.inner.ctx.members.get(cluster) else {
                continue;
            };
            let missing = collected_slices::member_slices(&member)
                .is_ok_and(|c| !c.handler_names().iter().any(|n| n == MEMBER_HANDLER));
            if missing {
                self.inner.works.enqueue(Some(&namespace), &work.name_any());
            }
        }
    }

    /// A Work changed: for a provider's MultiClusterService Work, watch the provider's slices and
    /// collect those of the Service.
    async fn handle_work(&self, key: &ObjectKey, work: Option<Arc<Work>>) -> HandlerResult<Work> {
        let Some(work) = work else {
            return HandlerResult::Success;
        };
        if work.metadata.deletion_timestamp.is_some() || !holds_mcs(&work) {
            return HandlerResult::Success;
        }
        let namespace = work.namespace().unwrap_or_default();
        let Ok(cluster) = cluster_name(&namespace) else {
            return HandlerResult::Success;
        };
        let Some(member) = self.inner.ctx.members.get(cluster) else {
            tracing::debug!(work = %key, cluster, "provider cluster not connected; retrying later");
            return HandlerResult::RequeueAfter(members::MEMBER_NOT_CONNECTED_RETRY);
        };
        match self.collect_all(&member, &work).await {
            Ok(()) => HandlerResult::Success,
            Err(e) => {
                tracing::warn!(work = %key, cluster, error = %e, "collecting EndpointSlices failed");
                HandlerResult::error(e)
            }
        }
    }

    /// The member's EndpointSlice controller (every slice), with the member handler on it.
    fn member_slices(
        &self,
        member: &lariat::Cluster,
    ) -> Result<SharedController<EndpointSlice>, CollectError> {
        let cluster = member.name().to_owned();
        let ctrl = collected_slices::member_slices(member)?;
        let _guard = self.inner.registering.lock();
        if !ctrl.handler_names().iter().any(|n| n == MEMBER_HANDLER) {
            tracing::info!(cluster = %cluster, "watching EndpointSlices of provider cluster");
            let this = self.clone();
            ctrl.register_handler(
                MEMBER_HANDLER,
                self.inner.cancel.child_token(),
                move |k: ObjectKey, o: Option<Arc<EndpointSlice>>| {
                    let this = this.clone();
                    let cluster = cluster.clone();
                    async move { this.handle_slice(&cluster, &k, o).await }
                },
            );
        }
        Ok(ctrl)
    }

    /// Collects every slice of the Service named by the provider Work (Karmada's
    /// `collectTargetEndpointSlice`).
    async fn collect_all(&self, member: &lariat::Cluster, work: &Work) -> Result<(), CollectError> {
        let cluster = member.name().to_owned();
        let ctrl = self.member_slices(member)?;
        let timeout = self.inner.ctx.settings.cluster_cache_sync_timeout;
        match ctrl
            .wait_synced(&self.inner.cancel, timeout)
            .await
            .map_err(framework(format!(
                "EndpointSlice cache of cluster {cluster}"
            )))? {
            SyncWait::Synced => {}
            SyncWait::Cancelled => return Err(CollectError::NotSynced { cluster }),
        }
        let labels = work.labels();
        let svc_ns = labels
            .get(MULTI_CLUSTER_SERVICE_NAMESPACE_LABEL)
            .cloned()
            .unwrap_or_default();
        let svc_name = labels
            .get(MULTI_CLUSTER_SERVICE_NAME_LABEL)
            .cloned()
            .unwrap_or_default();
        for slice in ctrl.cache().peek_store().list() {
            if slice.namespace().as_deref() != Some(svc_ns.as_str())
                || slice.labels().get(SERVICE_NAME_OF_SLICE_LABEL) != Some(&svc_name)
                || is_managed_by_karmada(slice.labels())
            {
                continue;
            }
            self.report(&cluster, &slice).await?;
        }
        Ok(())
    }

    /// A provider's slice changed or was deleted (Karmada's `handleEndpointSliceEvent`).
    async fn handle_slice(
        &self,
        cluster: &str,
        key: &ObjectKey,
        slice: Option<Arc<EndpointSlice>>,
    ) -> HandlerResult<EndpointSlice> {
        let result = match slice {
            None => self.release(cluster, key).await,
            Some(slice) => {
                if is_managed_by_karmada(slice.labels()) || !self.is_provided(cluster, &slice) {
                    return HandlerResult::Success;
                }
                self.report(cluster, &slice).await
            }
        };
        match result {
            Ok(()) => HandlerResult::Success,
            Err(e) => {
                tracing::warn!(cluster, slice = %key, error = %e, "EndpointSlice not collected");
                HandlerResult::error(e)
            }
        }
    }

    /// Whether a MultiClusterService Work in the cluster's execution namespace names the slice's
    /// Service.
    fn is_provided(&self, cluster: &str, slice: &EndpointSlice) -> bool {
        let Some(service) = slice.labels().get(SERVICE_NAME_OF_SLICE_LABEL) else {
            return false;
        };
        let namespace = slice.namespace().unwrap_or_default();
        let exec = execution_space_name(cluster);
        work_index::holding_in(
            self.inner.works.cache().peek_store(),
            &exec,
            MULTI_CLUSTER_SERVICE_KIND,
        )
        .iter()
        .any(|w| {
            w.labels().get(MULTI_CLUSTER_SERVICE_NAMESPACE_LABEL) == Some(&namespace)
                && w.labels().get(MULTI_CLUSTER_SERVICE_NAME_LABEL) == Some(service)
                && w.metadata.deletion_timestamp.is_none()
        })
    }

    async fn report(&self, cluster: &str, slice: &EndpointSlice) -> Result<(), CollectError> {
        let key = format!(
            "{}/{}",
            slice.namespace().unwrap_or_default(),
            slice.name_any()
        );
        let value = serde_json::to_value(slice).map_err(|source| CollectError::Encode {
            cluster: cluster.to_owned(),
            key: key.clone(),
            source,
        })?;
        let works = self.inner.works.store();
        let outcome = collected_slices::report(
            &self.inner.client,
            Some(&works),
            &self.inner.interpreter,
            MULTI_CLUSTER_SERVICE,
            cluster,
            value,
        )
        .await
        .map_err(|source| CollectError::Report {
            cluster: cluster.to_owned(),
            key: key.clone(),
            source: Box::new(source),
        })?;
        tracing::debug!(cluster, slice = %key, ?outcome, "collected EndpointSlice");
        Ok(())
    }

    /// A provider's slice is gone: release its Work (Karmada's `cleanupWorkWithEndpointSliceDelete`).
    async fn release(&self, cluster: &str, key: &ObjectKey) -> Result<(), CollectError> {
        let exec = execution_space_name(cluster);
        let name = slice_work_name(key.namespace().unwrap_or_default(), key.name());
        let Some(work) = self
            .inner
            .works
            .cache()
            .peek_store()
            .get_named(Some(&exec), &name)
        else {
            return Ok(());
        };
        let released = collected_slices::release(&self.inner.client, &work, MULTI_CLUSTER_SERVICE)
            .await
            .map_err(|e| ApiError::new("release", "Work", format!("{exec}/{name}"), e))?;
        tracing::debug!(cluster, slice = %key, ?released, "released collected EndpointSlice");
        Ok(())
    }
}
