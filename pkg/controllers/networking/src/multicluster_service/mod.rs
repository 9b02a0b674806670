//! The `multiclusterservice` controller (Karmada's `multiclusterservice-controller`): for a
//! `CrossCluster` MultiClusterService, propagates the Service of the same name to the provider and
//! consumer clusters and tells `endpointsliceCollect` which clusters provide its endpoints.
//!
//! For each such MultiClusterService it
//! - gives it a permanent id (`multiclusterservice.karmada.io/permanent-id`; Karmada's mutating
//!   webhook does this on create) and its finalizer;
//! - writes a Work holding the MultiClusterService, dispatching suspended, into every provider
//!   cluster's execution namespace that is known, Ready and serves EndpointSlices (Events
//!   `ClusterNotFound`, `SyncServiceFailed`, `APIIncompatible` otherwise) — the collector's cue —
//!   and removes those of clusters no longer providing, releasing the EndpointSlices collected
//!   there ([`works`]);
//! - claims the Service (`resourcetemplate.karmada.io/claimed-by: MultiClusterService`, so the
//!   resource detector leaves it alone) and creates or updates its ResourceBinding, placed on the
//!   providers and consumers ([`claim`], [`binding`]);
//! - records the outcome as the `ServiceApplied` condition and a `SyncServiceSucceed`/
//!   `SyncServiceFailed` Event.
//!
//! When the MultiClusterService is deleted or stops being `CrossCluster`, the Service and its
//! binding are released, every provider Work is removed and the finalizer dropped.
//!
//! Triggers: the MultiClusterService, the Service of the same name, and Clusters (a change of a
//! Cluster's readiness or EndpointSlice support, its creation or deletion, re-queues the
//! MultiClusterServices naming it, or naming no cluster at all).

pub mod binding;
pub mod claim;
pub mod works;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use karmada_apis::networking::v1alpha1::{MultiClusterService, SERVICE_APPLIED_CONDITION};
use karmada_apis::well_known::{
    MCS_CONTROLLER_FINALIZER, MULTI_CLUSTER_SERVICE_PERMANENT_ID_LABEL, event_reasons,
};
use karmada_apis::{Cluster, Work};
use karmada_controllers_common::conditions::new_condition;
use karmada_controllers_common::error::{ApiError, framework};
use karmada_controllers_common::handlers::{shared_controller, start_fn_of, template_controller};
use karmada_controllers_common::multicluster_service::{
    Fitness, clusters_or_all, fitness, set_mcs_condition,
};
use karmada_controllers_common::patch::update_metadata;
use karmada_controllers_common::work::WorkError;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use karmada_interpreter::Interpreter;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use lariat::events::{EventRecorder, EventType, reference_of};
use lariat::{HandlerResult, ObjectKey, SharedController};
use parking_lot::Mutex;

/// The controller's `--controllers` name.
pub const NAME: &str = "multiclusterservice";
/// Karmada's controller name (User-Agent suffix, Event source, logs).
pub const CONTROLLER_NAME: &str = "multiclusterservice-controller";

/// Message of the `ServiceApplied` condition and Event on success (Karmada's wording).
pub const SERVICE_APPLIED_MESSAGE: &str = "Service is propagated to target clusters.";

/// A `multiclusterservice` failure, naming the object and the cause.
#[derive(Debug, thiserror::Error)]
pub enum McsError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// A Work could not be written.
    #[error(transparent)]
    Work(#[from] Box<WorkError>),
    /// The Service named like the MultiClusterService does not exist (Karmada's message).
    #[error("services \"{name}\" not found")]
    ServiceNotFound {
        /// The Service's name.
        name: String,
    },
    /// The cached Service could not be read as a Service.
    #[error("Service {key}: {source}")]
    ServiceParse {
        /// `namespace/name`.
        key: String,
        /// Why.
        #[source]
        source: kube::core::dynamic::ParseDynamicObjectError,
    },
    /// The Service's ResourceBinding belongs to another (earlier) Service of that name.
    #[error(
        "ResourceBinding {key}: failed to update binding due to different owner reference UID, will try again later after binding is garbage collected"
    )]
    ForeignBinding {
        /// `namespace/name` of the binding.
        key: String,
    },
    /// A binding could not be encoded or decoded.
    #[error("ResourceBinding {key}: {source}")]
    Json {
        /// `namespace/name` of the binding.
        key: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

karmada_controllers_common::core_error_from!(McsError);

/// What makes a Cluster matter to this controller: its readiness and EndpointSlice support.
type ClusterFingerprint = Fitness;

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    interpreter: Interpreter,
    mcses: SharedController<MultiClusterService>,
    services: SharedController<DynamicObject>,
    clusters: SharedController<Cluster>,
    works: SharedController<Work>,
    events: EventRecorder,
    /// The last fitness seen per Cluster: only changes re-queue MultiClusterServices.
    seen_clusters: Mutex<HashMap<String, ClusterFingerprint>>,
    /// The labels, annotations and spec last seen per Service (`namespace/name`): only changes of
    /// those re-queue its MultiClusterService, as Karmada's Service predicate does (a status
    /// change does not).
    seen_services: Mutex<HashMap<String, String>>,
}

/// The controller. Cheap to clone.
#[derive(Clone)]
pub struct McsController {
    inner: Arc<Inner>,
}

/// The start function registered under `multiclusterservice`.
pub fn start_fn() -> StartFn {
    start_fn_of(McsController::new, McsController::run)
}

fn key_of(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// What of a Service matters to its MultiClusterService: labels, annotations and spec.
fn service_fingerprint(svc: &Service) -> String {
    serde_json::json!([svc.metadata.labels, svc.metadata.annotations, svc.spec]).to_string()
}

impl McsController {
    /// Builds the controller on the shared MultiClusterService, Service, Cluster and Work
    /// controllers.
    pub fn new(ctx: ControllerContext) -> Result<Self, McsError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("multiclusterservice client"))?;
        let interpreter = karmada_controllers_common::interpreter::interpreter(
            cp,
            &ctx.events,
            karmada_interpreter::InterpreterOptions::default(),
        );
        let events = ctx.events.recorder(CONTROLLER_NAME);
        Ok(McsController {
            inner: Arc::new(Inner {
                mcses: shared_controller::<MultiClusterService>(cp)?,
                services: template_controller::<Service>(cp)?,
                clusters: shared_controller::<Cluster>(cp)?,
                works: shared_controller::<Work>(cp)?,
                ctx,
                client,
                interpreter,
                events,
                seen_clusters: Mutex::default(),
                seen_services: Mutex::default(),
            }),
        })
    }

    /// Waits for the Cluster, Work and Service caches, registers the handlers, reports synced and
    /// serves until cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        let wiring = inner.ctx.wiring("multiclusterservice controller", &self);
        if !karmada_controllers_common::multicluster_service::gate_enabled(
            &inner.ctx.settings,
            NAME,
        ) {
            wiring.run().await?;
            return Ok(());
        }
        karmada_controllers_common::work_index::index_manifests(&inner.works.store());
        wiring
            .waits_for(&inner.clusters)
            .waits_for(&inner.works)
            .waits_for(&inner.services)
            .handles(
                &inner.mcses,
                CONTROLLER_NAME,
                |c: Self, key, obj: Option<Arc<MultiClusterService>>| async move {
                    c.reconcile(&key, obj).await
                },
            )
            .handles_typed::<Service, _, _>(
                &inner.services,
                CONTROLLER_NAME,
                |c: Self, key: ObjectKey, svc: Option<Arc<Service>>| async move {
                    c.service_changed(&key, svc.as_deref());
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

    /// A Service changed: its MultiClusterService, if a `CrossCluster` one, is synced again when
    /// the Service came, went, or changed its labels, annotations or spec.
    fn service_changed(&self, key: &ObjectKey, svc: Option<&Service>) {
        let namespace = key.namespace().unwrap_or_default();
        let id = key_of(namespace, key.name());
        {
            let mut seen = self.inner.seen_services.lock();
            match svc {
                Some(svc) => {
                    let print = service_fingerprint(svc);
                    if seen.get(&id) == Some(&print) {
                        return;
                    }
                    seen.insert(id, print);
                }
                None => {
                    seen.remove(&id);
                }
            }
        }
        let store = self.inner.mcses.cache().peek_store();
        if store
            .get_named(Some(namespace), key.name())
            .is_some_and(|m| m.spec.is_cross_cluster())
        {
            self.inner.mcses.enqueue(Some(namespace), key.name());
        }
    }

    /// A Cluster changed: when its fitness changed (or it came or went), every `CrossCluster`
    /// MultiClusterService naming it, or naming no provider or no consumer, is synced again.
    fn cluster_changed(&self, name: &str, exists: bool) {
        let now = exists.then(|| fitness(self.inner.clusters.cache().peek_store(), name));
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
            let spec = &mcs.spec;
            if !spec.is_cross_cluster() {
                continue;
            }
            let providers = spec.provider_names();
            let consumers = spec.consumer_names();
            if providers.is_empty()
                || consumers.is_empty()
                || providers.iter().any(|p| p == name)
                || consumers.iter().any(|c| c == name)
            {
                self.inner
                    .mcses
                    .enqueue(mcs.namespace().as_deref(), &mcs.name_any());
            }
        }
    }

    async fn reconcile(
        &self,
        key: &ObjectKey,
        mcs: Option<Arc<MultiClusterService>>,
    ) -> HandlerResult<MultiClusterService> {
        let Some(mcs) = mcs else {
            return HandlerResult::Success;
        };
        if mcs.metadata.deletion_timestamp.is_some() {
            return match self.release(&mcs).await {
                Ok(()) => HandlerResult::Success,
                Err(e) => {
                    self.event(
                        &mcs,
                        EventType::Warning,
                        event_reasons::SYNC_SERVICE_FAILED,
                        format!("failed to delete service work :{e}"),
                    );
                    HandlerResult::error(e)
                }
            };
        }
        if claim::permanent_id(&mcs).is_empty() {
            // Karmada's webhook labels every MultiClusterService on create; the label change
            // brings the MultiClusterService back here.
            return match self.assign_permanent_id(&mcs).await {
                Ok(()) => HandlerResult::Success,
                Err(e) => HandlerResult::error(e),
            };
        }
        if !mcs.spec.is_cross_cluster() {
            return match self.release(&mcs).await {
                Ok(()) => HandlerResult::Success,
                Err(e) => HandlerResult::error(e),
            };
        }
        let result = self.sync(&mcs).await;
        let (status, reason, message) = match &result {
            Ok(()) => (
                "True",
                "ServiceAppliedSucceed",
                SERVICE_APPLIED_MESSAGE.to_owned(),
            ),
            Err(e) => ("False", "ServiceAppliedFailed", e.to_string()),
        };
        let condition = new_condition(SERVICE_APPLIED_CONDITION, status, reason, &message);
        if let Err(e) = set_mcs_condition(&self.inner.client, &mcs, condition).await {
            tracing::warn!(mcs = %key, error = %e, "could not record the ServiceApplied condition");
        }
        match result {
            Ok(()) => {
                self.event(
                    &mcs,
                    EventType::Normal,
                    event_reasons::SYNC_SERVICE_SUCCEED,
                    SERVICE_APPLIED_MESSAGE,
                );
                HandlerResult::Success
            }
            Err(e) => {
                self.event(
                    &mcs,
                    EventType::Warning,
                    event_reasons::SYNC_SERVICE_FAILED,
                    e.to_string(),
                );
                tracing::warn!(mcs = %key, error = %e, "MultiClusterService not synced");
                HandlerResult::error(e)
            }
        }
    }

    fn event(
        &self,
        mcs: &MultiClusterService,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.inner
            .events
            .record_now(&reference_of(mcs), type_, reason, message);
    }

    fn mcs_api(&self, namespace: &str) -> Api<MultiClusterService> {
        Api::namespaced(self.inner.client.clone(), namespace)
    }

    async fn assign_permanent_id(&self, mcs: &MultiClusterService) -> Result<(), McsError> {
        let namespace = mcs.namespace().unwrap_or_default();
        let id = uuid::Uuid::new_v4().to_string();
        update_metadata(&self.mcs_api(&namespace), mcs, |meta| {
            let labels = meta.labels.get_or_insert_with(Default::default);
            labels
                .entry(MULTI_CLUSTER_SERVICE_PERMANENT_ID_LABEL.to_owned())
                .or_insert_with(|| id.clone());
        })
        .await
        .map_err(|e| {
            ApiError::new(
                "label",
                "MultiClusterService",
                key_of(&namespace, &mcs.name_any()),
                e,
            )
        })?;
        tracing::info!(namespace = %namespace, name = %mcs.name_any(), "assigned permanent id to MultiClusterService");
        Ok(())
    }

    /// Karmada's `handleMultiClusterServiceCreateOrUpdate` for a `CrossCluster` one.
    async fn sync(&self, mcs: &MultiClusterService) -> Result<(), McsError> {
        let namespace = mcs.namespace().unwrap_or_default();
        let name = mcs.name_any();
        if !mcs
            .finalizers()
            .iter()
            .any(|f| f == MCS_CONTROLLER_FINALIZER)
        {
            update_metadata(&self.mcs_api(&namespace), mcs, |meta| {
                let finalizers = meta.finalizers.get_or_insert_with(Vec::new);
                if !finalizers.iter().any(|f| f == MCS_CONTROLLER_FINALIZER) {
                    finalizers.push(MCS_CONTROLLER_FINALIZER.to_owned());
                }
            })
            .await
            .map_err(|e| {
                ApiError::new(
                    "add finalizer to",
                    "MultiClusterService",
                    key_of(&namespace, &name),
                    e,
                )
            })?;
        }
        let clusters = self.inner.clusters.cache().peek_store();
        let providers = clusters_or_all(mcs.spec.provider_names(), clusters);
        let consumers = clusters_or_all(mcs.spec.consumer_names(), clusters);

        self.propagate_mcs(mcs, &providers).await?;
        self.remove_mcs_works(mcs, &providers).await?;

        let svc = self.service(&namespace, &name)?;
        update_metadata(&self.svc_api(&namespace), &svc, |meta| {
            claim::claim_service(meta, mcs);
        })
        .await
        .map_err(|e| ApiError::new("claim", "Service", key_of(&namespace, &name), e))?;
        // The claim changed the Service's resourceVersion: the binding names the one it claimed
        // once the watch brings it (the Service's change re-queues this MultiClusterService).
        let svc = self.service(&namespace, &name).unwrap_or(svc);
        let targets: BTreeSet<String> = providers.union(&consumers).cloned().collect();
        self.ensure_binding(&svc, mcs, &targets).await
    }

    fn svc_api(&self, namespace: &str) -> Api<Service> {
        Api::namespaced(self.inner.client.clone(), namespace)
    }

    /// The cached Service `namespace/name`.
    fn service(&self, namespace: &str, name: &str) -> Result<Service, McsError> {
        let obj = self
            .inner
            .services
            .cache()
            .peek_store()
            .get_named(Some(namespace), name)
            .ok_or_else(|| McsError::ServiceNotFound {
                name: name.to_owned(),
            })?;
        Arc::unwrap_or_clone(obj)
            .try_parse::<Service>()
            .map_err(|source| McsError::ServiceParse {
                key: key_of(namespace, name),
                source,
            })
    }

    /// Karmada's `retrieveService` plus `retrieveMultiClusterService(nil)` and the finalizer's
    /// removal: what a deleted, or no longer `CrossCluster`, MultiClusterService leaves behind.
    async fn release(&self, mcs: &MultiClusterService) -> Result<(), McsError> {
        let namespace = mcs.namespace().unwrap_or_default();
        let name = mcs.name_any();
        self.release_service(&namespace, &name).await?;
        self.remove_mcs_works(mcs, &BTreeSet::new()).await?;
        if mcs
            .finalizers()
            .iter()
            .any(|f| f == MCS_CONTROLLER_FINALIZER)
        {
            update_metadata(&self.mcs_api(&namespace), mcs, |meta| {
                if let Some(f) = meta.finalizers.as_mut() {
                    f.retain(|f| f != MCS_CONTROLLER_FINALIZER);
                }
            })
            .await
            .map_err(|e| {
                ApiError::new(
                    "remove finalizer from",
                    "MultiClusterService",
                    key_of(&namespace, &name),
                    e,
                )
            })?;
            tracing::info!(namespace = %namespace, name = %name, "released MultiClusterService");
        }
        Ok(())
    }
}
