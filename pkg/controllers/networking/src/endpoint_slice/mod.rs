//! The `endpointSlice` controller (Karmada's `endpointslice-controller`): turns the Works holding
//! EndpointSlices the `serviceExport` controller collected from members into EndpointSlices of the
//! derived Service on the control plane, `imported-<cluster>-<slice>` labelled
//! `kubernetes.io/service-name: derived-<service>` ([`derive`]); the derived Service's ServiceImport
//! takes them to the importing clusters as dependencies.
//!
//! Triggers: Works with the `endpointslice.karmada.io/name` label or this controller's finalizer
//! (`karmada.io/endpointslice-controller`, put there by the collector). When such a Work is being
//! deleted, or loses the label because its ServiceExport went while another collector still wants
//! it, the EndpointSlices built from it (found by the Work's permanent id) are deleted and the
//! finalizer removed.
//!
//! Differs from Karmada: existing EndpointSlices are corrected by merge patches of the fields built
//! here (labels and annotations named, address type, endpoints, ports), and only when they differ,
//! instead of an update of the whole object.

pub mod derive;

use std::sync::Arc;

use apimachinery::is_not_found;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use karmada_apis::Work;
use karmada_apis::names::cluster_name;
use karmada_apis::well_known::{
    ENDPOINT_SLICE_CONTROLLER_FINALIZER, SERVICE_NAME_LABEL, WORK_PERMANENT_ID_LABEL,
};
use karmada_controllers_common::error::{ApiError, framework};
use karmada_controllers_common::handlers::{shared_controller, start_fn_of, template_controller};
use karmada_controllers_common::patch::guarded_metadata_patch;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use lariat::{HandlerResult, ObjectKey, SharedController};
use serde_json::Value;

use derive::{Origin, derive_slice, slice_patch};

/// The controller's `--controllers` name.
pub const NAME: &str = "endpointSlice";
/// Karmada's controller name (User-Agent suffix, logs).
pub const CONTROLLER_NAME: &str = "endpointslice-controller";

/// An endpointSlice failure, naming the object and the cause.
#[derive(Debug, thiserror::Error)]
pub enum EndpointSliceError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// The Work is not in an execution namespace.
    #[error("Work {work}: not in an execution namespace (karmada-es-<cluster>)")]
    NotExecutionSpace {
        /// `namespace/name` of the Work.
        work: String,
    },
}

karmada_controllers_common::core_error_from!(EndpointSliceError);

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    works: SharedController<Work>,
    /// The control plane's dynamic view of EndpointSlices, shared with the resource detector;
    /// indexed by the Work permanent id.
    slices: SharedController<DynamicObject>,
}

/// The controller. Cheap to clone.
#[derive(Clone)]
pub struct EndpointSliceController {
    inner: Arc<Inner>,
}

/// The start function registered under `endpointSlice`.
pub fn start_fn() -> StartFn {
    start_fn_of(EndpointSliceController::new, EndpointSliceController::run)
}

/// Whether the Work is one this controller looks at.
fn is_collected_slice_work(work: &Work) -> bool {
    work.labels().contains_key(SERVICE_NAME_LABEL)
        || work
            .finalizers()
            .iter()
            .any(|f| f == ENDPOINT_SLICE_CONTROLLER_FINALIZER)
}

impl EndpointSliceController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, EndpointSliceError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("endpointSlice client"))?;
        let works = shared_controller::<Work>(cp)?;
        let slices = template_controller::<EndpointSlice>(cp)?;
        slices.store().index_by_label(WORK_PERMANENT_ID_LABEL);
        Ok(Self {
            inner: Arc::new(Inner {
                ctx,
                client,
                works,
                slices,
            }),
        })
    }

    /// Registers the Work handler, waits for the caches and serves until cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        inner
            .ctx
            .wiring(NAME, &self)
            // The slice cache must be complete before Works are compared with it.
            .waits_for(&inner.slices)
            .handles(
                &inner.works,
                CONTROLLER_NAME,
                |c: Self, key, work| async move { c.reconcile(key, work).await },
            )
            .run()
            .await?;
        Ok(())
    }

    async fn reconcile(&self, key: ObjectKey, work: Option<Arc<Work>>) -> HandlerResult<Work> {
        let Some(work) = work.filter(|w| is_collected_slice_work(w)) else {
            return HandlerResult::Success;
        };
        let result = if work.metadata.deletion_timestamp.is_some()
            || !work.labels().contains_key(SERVICE_NAME_LABEL)
        {
            self.clean_up(&work).await
        } else {
            self.collect(&work).await
        };
        if let Err(e) = &result {
            tracing::warn!(work = %key, error = %e, "collected EndpointSlices not synced");
        }
        result.into()
    }

    /// Deletes the EndpointSlices built from `work`, then removes this controller's finalizer.
    async fn clean_up(&self, work: &Work) -> Result<(), EndpointSliceError> {
        let id = work
            .labels()
            .get(WORK_PERMANENT_ID_LABEL)
            .cloned()
            .unwrap_or_default();
        if !id.is_empty() {
            for slice in self
                .inner
                .slices
                .store()
                .list_by_label(WORK_PERMANENT_ID_LABEL, &id)
            {
                let namespace = slice.namespace().unwrap_or_default();
                let name = slice.name_any();
                let api: Api<EndpointSlice> =
                    Api::namespaced(self.inner.client.clone(), &namespace);
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {
                        tracing::info!(namespace, endpoint_slice = %name, work = %work.name_any(), "collected EndpointSlice deleted");
                    }
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => {
                        return Err(ApiError::new(
                            "delete",
                            "EndpointSlice",
                            format!("{namespace}/{name}"),
                            e,
                        )
                        .into());
                    }
                }
            }
        }
        self.remove_finalizer(work).await
    }

    async fn remove_finalizer(&self, work: &Work) -> Result<(), EndpointSliceError> {
        if !work
            .finalizers()
            .iter()
            .any(|f| f == ENDPOINT_SLICE_CONTROLLER_FINALIZER)
        {
            return Ok(());
        }
        let mut meta = work.metadata.clone();
        if let Some(f) = meta.finalizers.as_mut() {
            f.retain(|f| f != ENDPOINT_SLICE_CONTROLLER_FINALIZER);
        }
        let namespace = work.namespace().unwrap_or_default();
        let key = format!("{namespace}/{}", work.name_any());
        let Ok(Some(patch)) = guarded_metadata_patch(&work.metadata, &meta) else {
            return Ok(());
        };
        let api: Api<Work> = Api::namespaced(self.inner.client.clone(), &namespace);
        match api
            .patch(
                &work.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(ApiError::new("remove finalizer of", "Work", key, e).into()),
        }
    }

    /// Creates or corrects the control-plane EndpointSlice of every manifest of `work`.
    async fn collect(&self, work: &Work) -> Result<(), EndpointSliceError> {
        let work_namespace = work.namespace().unwrap_or_default();
        let work_name = work.name_any();
        let cluster =
            cluster_name(&work_namespace).map_err(|_| EndpointSliceError::NotExecutionSpace {
                work: format!("{work_namespace}/{work_name}"),
            })?;
        let labels = work.labels();
        let origin = Origin {
            cluster,
            work_namespace: &work_namespace,
            work_name: &work_name,
            work_id: labels
                .get(WORK_PERMANENT_ID_LABEL)
                .map_or("", String::as_str),
            service: labels.get(SERVICE_NAME_LABEL).map_or("", String::as_str),
        };
        for manifest in &work.spec.workload.manifests {
            let manifest = match manifest.to_value() {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(work = %work_name, namespace = %work_namespace, error = %e, "manifest does not decode; skipping");
                    continue;
                }
            };
            let Some(desired) = derive_slice(&manifest, &origin) else {
                tracing::warn!(work = %work_name, namespace = %work_namespace, "manifest without a name; skipping");
                continue;
            };
            self.write(&desired).await?;
        }
        Ok(())
    }

    /// Creates `desired`, or patches the existing slice where it differs.
    async fn write(&self, desired: &Value) -> Result<(), EndpointSliceError> {
        let namespace = desired
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = desired
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let key = format!("{namespace}/{name}");
        let api: Api<EndpointSlice> = Api::namespaced(self.inner.client.clone(), namespace);
        let cached = self.inner.slices.store().get_named(Some(namespace), name);
        let current = match cached {
            Some(obj) => serde_json::to_value(&*obj).ok(),
            None => api
                .get_opt(name)
                .await
                .map_err(|e| ApiError::new("get", "EndpointSlice", key.clone(), e))?
                .and_then(|s| serde_json::to_value(s).ok()),
        };
        match current {
            None => {
                let slice: EndpointSlice = match serde_json::from_value(desired.clone()) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(endpoint_slice = %key, error = %e, "collected EndpointSlice does not parse; skipping");
                        return Ok(());
                    }
                };
                match api.create(&PostParams::default(), &slice).await {
                    Ok(_) => {
                        tracing::info!(endpoint_slice = %key, "collected EndpointSlice created");
                        Ok(())
                    }
                    // Already there (created meanwhile, not yet in the cache): the retry compares.
                    Err(e) => Err(ApiError::new("create", "EndpointSlice", key, e).into()),
                }
            }
            Some(current) => {
                let Some(patch) = slice_patch(&current, desired) else {
                    return Ok(());
                };
                api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|e| ApiError::new("patch", "EndpointSlice", key.clone(), e))?;
                tracing::info!(endpoint_slice = %key, "collected EndpointSlice updated");
                Ok(())
            }
        }
    }
}
