//! The `endpointsliceDispatch` controller (Karmada's `endpointslice-dispatch-controller`): hands
//! the EndpointSlices `endpointsliceCollect` brought home from a MultiClusterService's provider
//! clusters to its consumer clusters.
//!
//! For each collected Work (an EndpointSlice Work of a provider's execution namespace labelled
//! with the MultiClusterService) it writes, into every consumer cluster's execution namespace
//! other than the provider's, a Work of the same name holding the slice renamed
//! `<provider>-<slice>`, labelled `kubernetes.io/service-name: <service>` and
//! `endpointslice.kubernetes.io/managed-by: endpointslice-dispatch-controller.karmada.io`, and
//! annotated with its provider (`endpointslice.karmada.io/provision-cluster`); the execution
//! controller then applies it to the consumer. Consumers that are unknown, not Ready or without
//! EndpointSlices get an Event (`ClusterNotFound`, `SyncServiceFailed`, `APIIncompatible`) and are
//! skipped; dispatched Works of clusters that stopped consuming are deleted. The outcome is the
//! MultiClusterService's `EndpointSliceDispatched` condition and a `DispatchEndpointSliceSucceed`/
//! `DispatchEndpointSliceFailed` Event.
//!
//! A collected Work being deleted, or no longer collected for a MultiClusterService, has its
//! dispatched copies deleted, then this controller's finalizer removed from it.
//!
//! Triggers: collected Works, MultiClusterServices (their collected Works are re-queued), and
//! Clusters whose fitness changed (the collected Works of the MultiClusterServices they consume).

pub mod slice;

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use karmada_apis::names::{cluster_name, execution_space_name};
use karmada_apis::networking::v1alpha1::{
    ENDPOINT_SLICE_DISPATCHED_CONDITION, MultiClusterService,
};
use karmada_apis::well_known::{
    ENDPOINT_SLICE_PROVISION_CLUSTER_ANNOTATION, EXECUTION_CONTROLLER_FINALIZER,
    MCS_ENDPOINT_SLICE_DISPATCH_CONTROLLER_FINALIZER, MULTI_CLUSTER_SERVICE_NAME_LABEL,
    MULTI_CLUSTER_SERVICE_NAMESPACE_LABEL, event_reasons,
};
use karmada_apis::{Cluster, Work};
use karmada_controllers_common::collected_slices::ENDPOINT_SLICE_KIND;
use karmada_controllers_common::conditions::new_condition;
use karmada_controllers_common::error::{ApiError, framework};
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::manifest::manifest_gvk;
use karmada_controllers_common::multicluster_service::{
    Fitness, clusters_or_all, fitness, set_mcs_condition,
};
use karmada_controllers_common::patch::update_metadata;
use karmada_controllers_common::work::{WorkError, WorkTarget, create_or_update_work};
use karmada_controllers_common::work_index;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use karmada_interpreter::Interpreter;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use lariat::events::{EventRecorder, EventType, reference_of};
use lariat::{HandlerResult, ObjectKey, SharedController};
use parking_lot::Mutex;

pub use slice::dispatched_slice;

/// The controller's `--controllers` name.
pub const NAME: &str = "endpointsliceDispatch";
/// Karmada's controller name (User-Agent suffix, Event source, logs).
pub const CONTROLLER_NAME: &str = "endpointslice-dispatch-controller";
/// Message of the `EndpointSliceDispatched` condition and Event on success (Karmada's wording).
pub const DISPATCHED_MESSAGE: &str = "EndpointSlice are dispatched successfully";

/// An `endpointsliceDispatch` failure, naming the object and the cause.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// A dispatched Work could not be written.
    #[error(transparent)]
    Work(#[from] Box<WorkError>),
    /// The collected Work's manifest is not an EndpointSlice.
    #[error("Work {key}: manifest is not an EndpointSlice: {source}")]
    Manifest {
        /// `namespace/name` of the collected Work.
        key: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

karmada_controllers_common::core_error_from!(DispatchError);

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    interpreter: Interpreter,
    works: SharedController<Work>,
    mcses: SharedController<MultiClusterService>,
    clusters: SharedController<Cluster>,
    events: EventRecorder,
    /// The last fitness seen per Cluster: only changes re-queue Works.
    seen_clusters: Mutex<HashMap<String, Fitness>>,
}

/// The controller. Cheap to clone.
#[derive(Clone)]
pub struct DispatchController {
    inner: Arc<Inner>,
}

/// The start function registered under `endpointsliceDispatch`.
pub fn start_fn() -> StartFn {
    start_fn_of(DispatchController::new, DispatchController::run)
}

fn label<'a>(work: &'a Work, key: &str) -> &'a str {
    work.labels()
        .get(key)
        .map(String::as_str)
        .unwrap_or_default()
}

fn provision_cluster(work: &Work) -> &str {
    work.annotations()
        .get(ENDPOINT_SLICE_PROVISION_CLUSTER_ANNOTATION)
        .map(String::as_str)
        .unwrap_or_default()
}

/// Whether the Work holds an EndpointSlice collected from a provider (not one dispatched to a
/// consumer).
fn is_collected_slice_work(work: &Work) -> bool {
    provision_cluster(work).is_empty()
        && work
            .spec
            .workload
            .manifests
            .iter()
            .any(|m| manifest_gvk(m).is_some_and(|g| g.kind == ENDPOINT_SLICE_KIND))
}

impl DispatchController {
    /// Builds the controller on the shared Work, MultiClusterService and Cluster controllers.
    pub fn new(ctx: ControllerContext) -> Result<Self, DispatchError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("endpointslice-dispatch client"))?;
        let interpreter = karmada_controllers_common::interpreter::interpreter(
            cp,
            &ctx.events,
            karmada_interpreter::InterpreterOptions::default(),
        );
        let events = ctx.events.recorder(CONTROLLER_NAME);
        Ok(DispatchController {
            inner: Arc::new(Inner {
                works: shared_controller::<Work>(cp)?,
                mcses: shared_controller::<MultiClusterService>(cp)?,
                clusters: shared_controller::<Cluster>(cp)?,
                ctx,
                client,
                interpreter,
                events,
                seen_clusters: Mutex::default(),
            }),
        })
    }

    /// Waits for the caches it reads, registers the handlers, reports synced and serves until
    /// cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        let wiring = inner.ctx.wiring("endpointslice-dispatch controller", &self);
        if !karmada_controllers_common::multicluster_service::gate_enabled(
            &inner.ctx.settings,
            NAME,
        ) {
            wiring.run().await?;
            return Ok(());
        }
        let works = inner.works.store();
        works.index_by_label(MULTI_CLUSTER_SERVICE_NAME_LABEL);
        work_index::index_manifests(&works);
        wiring
            .waits_for(&inner.clusters)
            .waits_for(&inner.mcses)
            .handles(
                &inner.works,
                CONTROLLER_NAME,
                |c: Self, key, work: Option<Arc<Work>>| async move { c.reconcile(&key, work).await },
            )
            .handles(
                &inner.mcses,
                CONTROLLER_NAME,
                |c: Self, key: ObjectKey, _mcs: Option<Arc<MultiClusterService>>| async move {
                    c.enqueue_collected(key.namespace().unwrap_or_default(), key.name());
                    HandlerResult::Success
                },
            )
            .handles(
                &inner.clusters,
                CONTROLLER_NAME,
                |c: Self, key: ObjectKey, cluster: Option<Arc<Cluster>>| async move {
                    c.cluster_changed(key.name(), cluster.is_some());
                    HandlerResult::Success
                },
            )
            .run()
            .await?;
        Ok(())
    }

    /// Re-queues the collected Works of MultiClusterService `namespace/name`.
    fn enqueue_collected(&self, namespace: &str, name: &str) {
        let store = self.inner.works.cache().peek_store();
        for work in store.list_by_label(MULTI_CLUSTER_SERVICE_NAME_LABEL, name) {
            if label(&work, MULTI_CLUSTER_SERVICE_NAMESPACE_LABEL) == namespace
                && provision_cluster(&work).is_empty()
            {
                self.inner
                    .works
                    .enqueue(work.namespace().as_deref(), &work.name_any());
            }
        }
    }

    /// A Cluster changed: when its fitness changed (or it came or went), the collected Works of
    /// the MultiClusterServices it consumes are dispatched again.
    fn cluster_changed(&self, name: &str, exists: bool) {
        let store = self.inner.clusters.cache().peek_store();
        let now = exists.then(|| fitness(store, name));
        {
            let mut seen = self.inner.seen_clusters.lock();
            let before = match now {
                Some(f) => seen.insert(name.to_owned(), f),
                None => seen.remove(name),
            };
            if before == now {
                return;
            }
        }
        for mcs in self.inner.mcses.cache().peek_store().list() {
            if clusters_or_all(mcs.spec.consumer_names(), store).contains(name) {
                self.enqueue_collected(&mcs.namespace().unwrap_or_default(), &mcs.name_any());
            }
        }
    }

    async fn reconcile(&self, key: &ObjectKey, work: Option<Arc<Work>>) -> HandlerResult<Work> {
        let Some(work) = work else {
            return HandlerResult::Success;
        };
        if !is_collected_slice_work(&work) {
            return HandlerResult::Success;
        }
        let mcs_name = label(&work, MULTI_CLUSTER_SERVICE_NAME_LABEL);
        if work.metadata.deletion_timestamp.is_some() || mcs_name.is_empty() {
            if !work
                .finalizers()
                .iter()
                .any(|f| f == MCS_ENDPOINT_SLICE_DISPATCH_CONTROLLER_FINALIZER)
            {
                return HandlerResult::Success;
            }
            return match self.cleanup(&work).await {
                Ok(()) => HandlerResult::Success,
                Err(e) => {
                    tracing::warn!(work = %key, error = %e, "dispatched EndpointSlices not cleaned up");
                    HandlerResult::error(e)
                }
            };
        }
        let mcs_ns = label(&work, MULTI_CLUSTER_SERVICE_NAMESPACE_LABEL);
        let Some(mcs) = self
            .inner
            .mcses
            .cache()
            .peek_store()
            .get_named(Some(mcs_ns), mcs_name)
        else {
            tracing::debug!(work = %key, mcs_namespace = mcs_ns, mcs_name, "MultiClusterService not found");
            return HandlerResult::Success;
        };
        let result = match self.remove_orphans(&mcs).await {
            Ok(()) => self.dispatch(&work, &mcs).await,
            Err(e) => Err(e),
        };
        let (status, reason, message, event_type, event_reason) = match &result {
            Ok(()) => (
                "True",
                "EndpointSliceDispatchedSucceed",
                DISPATCHED_MESSAGE.to_owned(),
                EventType::Normal,
                event_reasons::DISPATCH_ENDPOINT_SLICE_SUCCEED,
            ),
            Err(e) => (
                "False",
                "EndpointSliceDispatchedFailed",
                e.to_string(),
                EventType::Warning,
                event_reasons::DISPATCH_ENDPOINT_SLICE_FAILED,
            ),
        };
        let condition = new_condition(
            ENDPOINT_SLICE_DISPATCHED_CONDITION,
            status,
            reason,
            &message,
        );
        if let Err(e) = set_mcs_condition(&self.inner.client, &mcs, condition).await {
            tracing::warn!(work = %key, error = %e, "could not record the EndpointSliceDispatched condition");
        }
        self.inner.events.record_now(
            &reference_of(mcs.as_ref()),
            event_type,
            event_reason,
            message,
        );
        match result {
            Ok(()) => HandlerResult::Success,
            Err(e) => {
                tracing::warn!(work = %key, error = %e, "EndpointSlice not dispatched");
                HandlerResult::error(e)
            }
        }
    }

    /// Deletes the dispatched Works of the MultiClusterService in clusters no longer consuming it
    /// (Karmada's `cleanOrphanDispatchedEndpointSlice`).
    async fn remove_orphans(&self, mcs: &MultiClusterService) -> Result<(), DispatchError> {
        let namespace = mcs.namespace().unwrap_or_default();
        let name = mcs.name_any();
        let consumers = clusters_or_all(
            mcs.spec.consumer_names(),
            self.inner.clusters.cache().peek_store(),
        );
        let store = self.inner.works.cache().peek_store();
        for work in store.list_by_label(MULTI_CLUSTER_SERVICE_NAME_LABEL, &name) {
            if label(&work, MULTI_CLUSTER_SERVICE_NAMESPACE_LABEL) != namespace
                || provision_cluster(&work).is_empty()
            {
                continue;
            }
            let ns = work.namespace().unwrap_or_default();
            let Ok(cluster) = cluster_name(&ns) else {
                continue;
            };
            if consumers.contains(cluster) {
                continue;
            }
            self.delete_work(&work).await?;
            tracing::info!(cluster, work = %work.name_any(), mcs = %name, "removed EndpointSlice Work of a former consumer");
        }
        Ok(())
    }

    async fn delete_work(&self, work: &Work) -> Result<(), DispatchError> {
        let ns = work.namespace().unwrap_or_default();
        let api: Api<Work> = Api::namespaced(self.inner.client.clone(), &ns);
        match api.delete(&work.name_any(), &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) if apimachinery::is_not_found(&e) => Ok(()),
            Err(e) => {
                Err(ApiError::new("delete", "Work", format!("{ns}/{}", work.name_any()), e).into())
            }
        }
    }

    /// Writes the collected slice's Work into every fit consumer other than its provider.
    async fn dispatch(&self, work: &Work, mcs: &MultiClusterService) -> Result<(), DispatchError> {
        let work_ns = work.namespace().unwrap_or_default();
        let Ok(provider) = cluster_name(&work_ns) else {
            return Ok(());
        };
        let Some(manifest) = work.spec.workload.manifests.first() else {
            return Ok(());
        };
        let collected: EndpointSlice =
            manifest
                .decode()
                .map_err(|source| DispatchError::Manifest {
                    key: format!("{work_ns}/{}", work.name_any()),
                    source,
                })?;
        let mcs_ns = mcs.namespace().unwrap_or_default();
        let mcs_name = mcs.name_any();
        let slice = dispatched_slice(&collected, provider, &mcs_name);
        let manifest = serde_json::to_value(&slice).map_err(|source| DispatchError::Manifest {
            key: format!("{work_ns}/{}", work.name_any()),
            source,
        })?;
        let clusters = self.inner.clusters.cache().peek_store();
        let works = self.inner.works.store();
        for consumer in clusters_or_all(mcs.spec.consumer_names(), clusters) {
            if consumer == provider {
                continue;
            }
            let (reason, message) = match fitness(clusters, &consumer) {
                Fitness::Fit => ("", String::new()),
                Fitness::NotFound => (
                    event_reasons::CLUSTER_NOT_FOUND,
                    format!("Consumer cluster {consumer} is not found"),
                ),
                Fitness::NotReady => (
                    event_reasons::SYNC_SERVICE_FAILED,
                    format!(
                        "Consumer cluster {consumer} is not ready, skip to propagate EndpointSlice"
                    ),
                ),
                Fitness::NoEndpointSlices => (
                    event_reasons::API_INCOMPATIBLE,
                    format!("Consumer cluster {consumer} does not support EndpointSlice"),
                ),
            };
            if !reason.is_empty() {
                self.inner.events.record_now(
                    &reference_of(mcs),
                    EventType::Warning,
                    reason,
                    message,
                );
                continue;
            }
            let target = WorkTarget {
                name: work.name_any(),
                namespace: execution_space_name(&consumer),
                labels: [
                    (
                        MULTI_CLUSTER_SERVICE_NAME_LABEL.to_owned(),
                        mcs_name.clone(),
                    ),
                    (
                        MULTI_CLUSTER_SERVICE_NAMESPACE_LABEL.to_owned(),
                        mcs_ns.clone(),
                    ),
                ]
                .into(),
                annotations: [(
                    ENDPOINT_SLICE_PROVISION_CLUSTER_ANNOTATION.to_owned(),
                    provider.to_owned(),
                )]
                .into(),
                finalizers: vec![EXECUTION_CONTROLLER_FINALIZER.to_owned()],
                ..Default::default()
            };
            create_or_update_work(
                &self.inner.client,
                Some(&works),
                &self.inner.interpreter,
                &target,
                manifest.clone(),
            )
            .await
            .map_err(Box::new)?;
        }
        Ok(())
    }

    /// Deletes the copies of the collected Work dispatched to consumers, then removes this
    /// controller's finalizer from it (Karmada's `cleanupEndpointSliceFromConsumerClusters`).
    async fn cleanup(&self, work: &Work) -> Result<(), DispatchError> {
        let work_ns = work.namespace().unwrap_or_default();
        let Ok(provider) = cluster_name(&work_ns) else {
            return Ok(());
        };
        let name = work.name_any();
        let store = self.inner.works.cache().peek_store();
        for copy in work_index::holding(store, None, ENDPOINT_SLICE_KIND) {
            if copy.name_any() == name && provision_cluster(&copy) == provider {
                self.delete_work(&copy).await?;
                tracing::info!(provider, consumer_namespace = %copy.namespace().unwrap_or_default(), work = %name, "removed dispatched EndpointSlice Work");
            }
        }
        let api: Api<Work> = Api::namespaced(self.inner.client.clone(), &work_ns);
        update_metadata(&api, work, |meta| {
            if let Some(f) = meta.finalizers.as_mut() {
                f.retain(|f| f != MCS_ENDPOINT_SLICE_DISPATCH_CONTROLLER_FINALIZER);
            }
        })
        .await
        .map_err(|e| {
            ApiError::new(
                "remove finalizer from",
                "Work",
                format!("{work_ns}/{name}"),
                e,
            )
        })?;
        Ok(())
    }
}
