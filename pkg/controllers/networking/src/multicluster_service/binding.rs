//! Writing the Service's ResourceBinding for the MultiClusterService, and letting go of the Service
//! and its binding again (Karmada's `propagateService` and `retrieveService`); what is written is
//! built in [`super::claim`].

use std::collections::BTreeSet;

use apimachinery::is_not_found;
use k8s_openapi::api::core::v1::Service;
use karmada_apis::ResourceBinding;
use karmada_apis::networking::v1alpha1::MultiClusterService;
use karmada_controllers_common::error::ApiError;
use karmada_controllers_common::patch::update_metadata;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};

use super::{McsController, McsError, claim, key_of};

impl McsController {
    /// Creates the Service's ResourceBinding, or brings an existing one to what the
    /// MultiClusterService wants (a guarded merge patch of the differences), retrying conflicts.
    pub(super) async fn ensure_binding(
        &self,
        svc: &Service,
        mcs: &MultiClusterService,
        targets: &BTreeSet<String>,
    ) -> Result<(), McsError> {
        let namespace = svc.namespace().unwrap_or_default();
        let desired = claim::desired_binding(svc, mcs, targets);
        let name = karmada_apis::names::binding_name("Service", &svc.name_any());
        let key = key_of(&namespace, &name);
        let api: Api<ResourceBinding> = Api::namespaced(self.inner.client.clone(), &namespace);
        let uid = svc.uid().unwrap_or_default();
        let json_err = |source| McsError::Json {
            key: key.clone(),
            source,
        };
        let mut attempts = 0;
        loop {
            attempts += 1;
            let existing = api
                .get_opt(&name)
                .await
                .map_err(|e| ApiError::new("get", "ResourceBinding", key.clone(), e))?;
            let result = match existing {
                None => {
                    let created: ResourceBinding =
                        serde_json::from_value(claim::new_binding(desired.clone()))
                            .map_err(json_err)?;
                    match api.create(&PostParams::default(), &created).await {
                        Ok(_) => {
                            tracing::info!(binding = %key, "created ResourceBinding for MultiClusterService");
                            Ok(())
                        }
                        Err(e) => Err(e),
                    }
                }
                Some(existing) => {
                    if claim::controlled_by_other(&existing, &uid) {
                        return Err(McsError::ForeignBinding { key });
                    }
                    let old = serde_json::to_value(&existing).map_err(json_err)?;
                    let new = claim::updated_binding(&old, &desired);
                    match karmada_controllers_common::patch::merge_diff(&old, &new) {
                        None => Ok(()),
                        Some(mut patch) => {
                            if let Some(meta) = patch.as_object_mut().map(|p| p.entry("metadata")) {
                                let meta = meta.or_insert_with(|| serde_json::json!({}));
                                if let Some(m) = meta.as_object_mut() {
                                    m.insert(
                                        "resourceVersion".to_owned(),
                                        serde_json::json!(existing.resource_version()),
                                    );
                                }
                            }
                            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                                .await
                                .map(|_| {
                                    tracing::info!(binding = %key, "updated ResourceBinding for MultiClusterService");
                                })
                        }
                    }
                }
            };
            match result {
                Ok(()) => return Ok(()),
                Err(e)
                    if attempts < 5
                        && (apimachinery::is_conflict(&e)
                            || apimachinery::is_already_exists(&e)) =>
                {
                    continue;
                }
                Err(e) => return Err(ApiError::new("write", "ResourceBinding", key, e).into()),
            }
        }
    }

    /// Removes the MultiClusterService's claim from the Service and its binding.
    pub(super) async fn release_service(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(), McsError> {
        let svc = match self.service(namespace, name) {
            Ok(svc) => svc,
            Err(McsError::ServiceNotFound { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        update_metadata(&self.svc_api(namespace), &svc, claim::release_service)
            .await
            .map_err(|e| ApiError::new("release", "Service", key_of(namespace, name), e))?;
        let rb_name = karmada_apis::names::binding_name("Service", name);
        let api: Api<ResourceBinding> = Api::namespaced(self.inner.client.clone(), namespace);
        let rb = match api.get(&rb_name).await {
            Ok(rb) => rb,
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => {
                return Err(ApiError::new(
                    "get",
                    "ResourceBinding",
                    key_of(namespace, &rb_name),
                    e,
                )
                .into());
            }
        };
        update_metadata(&api, &rb, claim::release_binding)
            .await
            .map_err(|e| {
                ApiError::new("release", "ResourceBinding", key_of(namespace, &rb_name), e)
            })?;
        Ok(())
    }
}
