//! The `serviceImport` controller (Karmada's `service-import-controller`): for every ServiceImport
//! of type `ClusterSetIP` on the control plane, keeps the derived Service `derived-<name>` in the
//! same namespace: type `ClusterIP`, the import's ports, and the import's `spec.ips` as the
//! Service's load-balancer ingress. Propagating the ServiceImport (with `propagateDeps`) takes the
//! derived Service and the EndpointSlices the `endpointSlice` controller labels with it to the
//! importing clusters, through the ServiceImport's dependencies ([`karmada_interpreter`]).
//!
//! Triggers: ServiceImport changes, and changes or deletion of a `derived-*` Service (so a derived
//! Service someone deleted or edited is put back). When the ServiceImport goes, its derived Service
//! is deleted.
//!
//! Differs from Karmada: the derived Service is written by merge patches of `spec.type`,
//! `spec.ports` and `status.loadBalancer` only (Karmada PUTs a rebuilt Service, dropping labels or
//! annotations others added), nothing is written when it already matches, and the
//! `SyncDerivedServiceSucceed` Event is recorded when something was written rather than on every
//! reconcile.

mod derived;

use std::sync::Arc;

use apimachinery::{is_already_exists, is_not_found};
use k8s_openapi::api::core::v1::Service;
use karmada_apis::multicluster::v1alpha1::{ServiceImport, ServiceImportType};
use karmada_apis::names::derived_service_name;
use karmada_apis::well_known::{DERIVED_SERVICE_PREFIX, event_reasons};
use karmada_controllers_common::error::ApiError;
use karmada_controllers_common::handlers::{start_fn_of, template_controller};
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use lariat::events::{EventRecorder, EventType, reference_of};
use lariat::{HandlerResult, ObjectKey, SharedController};

use derived::desired_service;

/// The controller's `--controllers` name.
pub const NAME: &str = "serviceImport";
/// Karmada's controller name (User-Agent suffix, Event source).
pub const CONTROLLER_NAME: &str = "service-import-controller";

/// A serviceImport failure, naming the object and the cause.
#[derive(Debug, thiserror::Error)]
pub enum ServiceImportError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// The derived Service could not be encoded (not expected).
    #[error("ServiceImport {key}: encoding the derived Service: {source}")]
    Encode {
        /// `namespace/name` of the ServiceImport.
        key: String,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
}

karmada_controllers_common::core_error_from!(ServiceImportError);

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    events: EventRecorder,
    /// The control plane's dynamic view of ServiceImports, shared with the resource detector.
    imports: SharedController<kube::api::DynamicObject>,
    /// The control plane's dynamic view of Services, shared with the resource detector.
    services: SharedController<kube::api::DynamicObject>,
}

/// The controller. Cheap to clone.
#[derive(Clone)]
pub struct ServiceImportController {
    inner: Arc<Inner>,
}

/// The start function registered under `serviceImport`.
pub fn start_fn() -> StartFn {
    start_fn_of(ServiceImportController::new, ServiceImportController::run)
}

impl ServiceImportController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, ServiceImportError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(karmada_controllers_common::error::framework(
                "serviceImport client",
            ))?;
        let imports = template_controller::<ServiceImport>(cp)?;
        let services = template_controller::<Service>(cp)?;
        Ok(Self {
            inner: Arc::new(Inner {
                events: ctx.events.recorder(CONTROLLER_NAME),
                client,
                imports,
                services,
                ctx,
            }),
        })
    }

    /// Registers the handlers, waits for the caches and serves until cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        inner
            .ctx
            .wiring(NAME, &self)
            .handles_typed(
                &inner.imports,
                CONTROLLER_NAME,
                |c: Self, key, import: Option<Arc<ServiceImport>>| async move {
                    c.reconcile(key, import).await
                },
            )
            .handles_typed(
                &inner.services,
                CONTROLLER_NAME,
                |c: Self, key: ObjectKey, _svc: Option<Arc<Service>>| async move {
                    c.derived_service_changed(&key);
                    HandlerResult::Success
                },
            )
            .run()
            .await?;
        Ok(())
    }

    /// A Service changed: if it is a derived one, look at its ServiceImport again.
    fn derived_service_changed(&self, key: &ObjectKey) {
        let Some(import) = key
            .name()
            .strip_prefix(DERIVED_SERVICE_PREFIX)
            .and_then(|n| n.strip_prefix('-'))
        else {
            return;
        };
        let namespace = key.namespace().unwrap_or_default();
        if self
            .inner
            .imports
            .store()
            .get_named(Some(namespace), import)
            .is_some()
        {
            self.inner.imports.enqueue(Some(namespace), import);
        }
    }

    async fn reconcile(
        &self,
        key: ObjectKey,
        import: Option<Arc<ServiceImport>>,
    ) -> HandlerResult<kube::api::DynamicObject> {
        let namespace = key.namespace().unwrap_or_default().to_owned();
        let Some(import) = import else {
            return self.delete_derived(&namespace, key.name()).await.into();
        };
        if import.meta().deletion_timestamp.is_some()
            || import.spec.type_ != ServiceImportType::ClusterSetIP
        {
            return HandlerResult::Success;
        }
        let target = reference_of(&*import);
        match self.sync(&import).await {
            Ok(false) => HandlerResult::Success,
            Ok(true) => {
                tracing::info!(service_import = %key, "derived service synced");
                self.inner.events.record_now(
                    &target,
                    EventType::Normal,
                    event_reasons::SYNC_DERIVED_SERVICE_SUCCEED,
                    format!(
                        "Sync derived service for serviceImport({}) succeed.",
                        import.name_any()
                    ),
                );
                HandlerResult::Success
            }
            Err(e) => {
                tracing::warn!(service_import = %key, error = %e, "derived service not synced");
                self.inner.events.record_now(
                    &target,
                    EventType::Warning,
                    event_reasons::SYNC_DERIVED_SERVICE_FAILED,
                    e.to_string(),
                );
                HandlerResult::error(e)
            }
        }
    }

    /// Deletes the Service derived from the ServiceImport `namespace/name`, if any.
    async fn delete_derived(&self, namespace: &str, name: &str) -> Result<(), ServiceImportError> {
        let derived = derived_service_name(name);
        if self
            .inner
            .services
            .store()
            .get_named(Some(namespace), &derived)
            .is_none()
        {
            return Ok(());
        }
        let api: Api<Service> = Api::namespaced(self.inner.client.clone(), namespace);
        match api.delete(&derived, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(namespace, service = %derived, "derived service deleted with its ServiceImport");
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => {
                Err(ApiError::new("delete", "Service", format!("{namespace}/{derived}"), e).into())
            }
        }
    }

    /// Creates or corrects the derived Service; `true` when something was written.
    async fn sync(&self, import: &ServiceImport) -> Result<bool, ServiceImportError> {
        let namespace = import.namespace().unwrap_or_default();
        let name = derived_service_name(&import.name_any());
        let key = format!("{namespace}/{name}");
        let api: Api<Service> = Api::namespaced(self.inner.client.clone(), &namespace);
        let desired = desired_service(import);
        let existing: Option<Service> = self
            .inner
            .services
            .store()
            .get_named(Some(&namespace), &name)
            .and_then(|o| Arc::unwrap_or_clone(o).try_parse::<Service>().ok());
        let mut written = false;
        let current = match existing {
            Some(svc) => svc,
            None => match api.create(&PostParams::default(), &desired.create()).await {
                Ok(svc) => {
                    written = true;
                    svc
                }
                Err(e) if is_already_exists(&e) => api
                    .get(&name)
                    .await
                    .map_err(|e| ApiError::new("get", "Service", key.clone(), e))?,
                Err(e) => return Err(ApiError::new("create", "Service", key, e).into()),
            },
        };
        let encode = |source| ServiceImportError::Encode {
            key: format!("{namespace}/{}", import.name_any()),
            source,
        };
        if let Some(patch) = desired.spec_patch(&current).map_err(encode)? {
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| ApiError::new("patch", "Service", key.clone(), e))?;
            written = true;
        }
        if let Some(patch) = desired.status_patch(&current).map_err(encode)? {
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| ApiError::new("patch status of", "Service", key.clone(), e))?;
            written = true;
        }
        Ok(written)
    }
}
