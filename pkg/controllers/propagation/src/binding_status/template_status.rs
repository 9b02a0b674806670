//! Writing the template's `.status`: the interpreter aggregates the binding's items, and the
//! change is written as a merge patch of the status alone, with an Event on the template.

use apimachinery::{ConflictRetry, DEFAULT_RETRY, is_conflict, is_not_found, split_api_version};
use k8s_openapi::api::core::v1::ObjectReference;
use karmada_apis::names;
use karmada_apis::well_known::event_reasons;
use karmada_apis::work::v1alpha2::{AggregatedStatusItem, ObjectReference as TemplateReference};
use karmada_controllers_common::error::{ApiError, framework};
use karmada_controllers_common::patch::merge_diff;
use karmada_controllers_common::template;
use karmada_interpreter::Operation;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use lariat::events::EventType;
use serde_json::Value;

use super::error::BindingStatusError;
use super::{BindingStatusController, StatusBinding};

impl BindingStatusController {
    /// Aggregates `items` into the template's `.status` (read from the cache, or the API server
    /// after a conflict) and writes it when it changed.
    pub(super) async fn update_template_status<B: StatusBinding>(
        &self,
        binding: &B,
        items: &[AggregatedStatusItem],
    ) -> Result<(), BindingStatusError> {
        let r = &binding.binding_spec().resource;
        let Some((api, ar)) = self.template_api(r).await? else {
            return Ok(());
        };
        let mut retry = ConflictRetry::new(DEFAULT_RETRY);
        // The first attempt reads the detector's cache of the kind (as Karmada reads its informer's
        // lister); after a conflict the cached copy is known to be behind, so retries read the API
        // server.
        let mut cached = template::cached(
            &self.inner.ctx.control_plane,
            &ar,
            &r.namespace,
            &r.name,
            &r.resource_version,
        );
        while retry.next().await {
            let template = match cached.take() {
                Some(t) => t,
                None => match api.get(&r.name).await {
                    Ok(t) => t,
                    // The template is gone and the binding waits for garbage collection.
                    Err(e) if is_not_found(&e) => return Ok(()),
                    Err(source) => {
                        let key = names::namespaced_key(&r.namespace, &r.name);
                        return Err(ApiError::new("get", r.kind.clone(), key, source).into());
                    }
                },
            };
            if let Attempt::Done = self
                .sync_template_status(&api, &template, &ar, r, items)
                .await?
            {
                return Ok(());
            }
        }
        Err(BindingStatusError::Conflicts {
            kind: r.kind.clone(),
            key: names::namespaced_key(&r.namespace, &r.name),
            attempts: retry.attempts(),
        })
    }

    /// The API of the template's kind in its scope, or `None` when the interpreter does not
    /// aggregate that kind's status (then the template is left alone).
    pub(super) async fn template_api(
        &self,
        r: &TemplateReference,
    ) -> Result<Option<(Api<DynamicObject>, ApiResource)>, BindingStatusError> {
        let (group, version) = split_api_version(&r.api_version);
        if !self.inner.interpreter.hook_enabled_for(
            &r.api_version,
            &r.kind,
            Operation::AggregateStatus,
        ) {
            return Ok(None);
        }
        let gvk = GroupVersionKind::gvk(group, version, &r.kind);
        let (ar, caps) = self
            .inner
            .ctx
            .control_plane
            .clients()
            .resolve(&gvk)
            .await
            .map_err(framework(format!("resolve {}.{}", r.kind, group)))?;
        let api: Api<DynamicObject> = match caps.scope {
            kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(self.inner.client.clone(), &r.namespace, &ar)
            }
            kube::discovery::Scope::Cluster => Api::all_with(self.inner.client.clone(), &ar),
        };
        Ok(Some((api, ar)))
    }

    /// One round of aggregating the template's status and writing the change.
    /// [`Attempt::Conflict`] when the template changed between the read and the write.
    pub(super) async fn sync_template_status(
        &self,
        api: &Api<DynamicObject>,
        template: &DynamicObject,
        ar: &ApiResource,
        r: &TemplateReference,
        items: &[AggregatedStatusItem],
    ) -> Result<Attempt, BindingStatusError> {
        match self.template_status_patch(template, ar, r, items).await? {
            Some(status_patch) => {
                self.patch_template_status(api, template, ar, r, status_patch)
                    .await
            }
            None => Ok(Attempt::Done),
        }
    }

    /// The merge patch that brings the template's status to the aggregate of `items`; `None`
    /// when there is nothing to write. A failed aggregation is also recorded as a Warning Event
    /// on the template.
    pub(super) async fn template_status_patch(
        &self,
        template: &DynamicObject,
        ar: &ApiResource,
        r: &TemplateReference,
        items: &[AggregatedStatusItem],
    ) -> Result<Option<Value>, BindingStatusError> {
        let value = template_value(template, ar);
        let aggregated = self
            .inner
            .interpreter
            .aggregate_status(&value, items)
            .map_err(|source| BindingStatusError::Aggregate {
                template: template_name(r),
                source,
            });
        let new_status = match aggregated {
            Ok(Some(s)) => s,
            Ok(None) => return Ok(None),
            Err(e) => {
                self.record_template_event(template, ar, EventType::Warning, e.to_string())
                    .await;
                return Err(e);
            }
        };
        if value.get("status") == Some(&new_status) {
            return Ok(None);
        }
        let old_status = value.get("status").unwrap_or(&Value::Null);
        Ok(merge_diff(old_status, &new_status))
    }

    /// Writes `status_patch` as a merge patch of the status alone, guarded by the resourceVersion
    /// read: the rest of the template (the user's metadata, kubectl's annotation) is not ours to
    /// write. The outcome is recorded as an Event on the template.
    pub(super) async fn patch_template_status(
        &self,
        api: &Api<DynamicObject>,
        template: &DynamicObject,
        ar: &ApiResource,
        r: &TemplateReference,
        status_patch: Value,
    ) -> Result<Attempt, BindingStatusError> {
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": template.metadata.resource_version},
            "status": status_patch,
        });
        match api
            .patch_status(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(template = %template_name(r), "template status updated");
                self.record_template_event(
                    template,
                    ar,
                    EventType::Normal,
                    "Update Resource with AggregatedStatus successfully.".to_owned(),
                )
                .await;
                Ok(Attempt::Done)
            }
            Err(e) if is_conflict(&e) => Ok(Attempt::Conflict),
            Err(e) if is_not_found(&e) => Ok(Attempt::Done),
            Err(source) => {
                self.record_template_event(template, ar, EventType::Warning, source.to_string())
                    .await;
                let key = names::namespaced_key(&r.namespace, &r.name);
                Err(ApiError::new("update status of", r.kind.clone(), key, source).into())
            }
        }
    }

    pub(super) async fn record_template_event(
        &self,
        template: &DynamicObject,
        ar: &ApiResource,
        type_: EventType,
        message: String,
    ) {
        let reason = match type_ {
            EventType::Normal => event_reasons::AGGREGATE_STATUS_SUCCEED,
            EventType::Warning => event_reasons::AGGREGATE_STATUS_FAILED,
        };
        let target = ObjectReference {
            api_version: Some(ar.api_version.clone()),
            kind: Some(ar.kind.clone()),
            namespace: template.metadata.namespace.clone(),
            name: template.metadata.name.clone(),
            uid: template.metadata.uid.clone(),
            resource_version: template.metadata.resource_version.clone(),
            field_path: None,
        };
        self.inner
            .recorder
            .record(&target, type_, reason, message)
            .await;
    }
}

/// Whether one read-and-write round finished or lost a race with another writer.
pub(super) enum Attempt {
    /// Written, or nothing to write.
    Done,
    /// The object changed since it was read; read it again.
    Conflict,
}

/// `Kind namespace/name` of a template, for logs and errors.
pub(super) fn template_name(r: &TemplateReference) -> String {
    format!(
        "{} {}",
        r.kind,
        names::namespaced_key(&r.namespace, &r.name)
    )
}

/// The unstructured form of a template with its `apiVersion` and `kind` set.
pub(super) fn template_value(template: &DynamicObject, ar: &ApiResource) -> Value {
    let mut value = serde_json::to_value(template).unwrap_or(Value::Null);
    if let Some(o) = value.as_object_mut() {
        o.insert("apiVersion".into(), Value::String(ar.api_version.clone()));
        o.insert("kind".into(), Value::String(ar.kind.clone()));
    }
    value
}
