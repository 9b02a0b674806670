//! Writing the binding's `aggregatedStatus` and `FullyApplied` condition when they changed, with
//! an Event on the binding.

use apimachinery::{ConflictRetry, DEFAULT_RETRY, is_conflict, is_not_found};
use k8s_openapi::api::core::v1::ObjectReference;
use karmada_apis::names;
use karmada_apis::well_known::event_reasons;
use karmada_apis::work::v1alpha2::AggregatedStatusItem;
use karmada_controllers_common::error::ApiError;
use karmada_controllers_common::set_condition;
use kube::ResourceExt;
use kube::api::PostParams;
use lariat::events::EventType;

use super::aggregate::{drifted_condition, fully_applied_condition, now};
use super::error::BindingStatusError;
use super::{BindingStatusController, StatusBinding};

impl BindingStatusController {
    /// Writes `aggregatedStatus` and `FullyApplied` when they changed.
    pub(super) async fn update_binding_status<B: StatusBinding>(
        &self,
        cached: &B,
        items: &[AggregatedStatusItem],
    ) -> Result<(), BindingStatusError> {
        let namespace = cached.namespace().unwrap_or_default();
        let name = cached.name_any();
        let kind = B::kind(&()).into_owned();
        let key = names::namespaced_key(&namespace, &name);
        let api = B::api(self.inner.client.clone(), &namespace);
        let drifted = self.drifted_clusters(cached);
        let mut current = cached.clone();
        let mut retry = ConflictRetry::new(DEFAULT_RETRY);
        while retry.next().await {
            let old = current.binding_status().cloned().unwrap_or_default();
            let mut new = old.clone();
            new.aggregated_status = items.to_vec();
            let cond = fully_applied_condition(current.binding_spec(), items, now());
            set_condition(&mut new.conditions, cond);
            if let Some(cond) = drifted_condition(&new.conditions, &drifted, now()) {
                set_condition(&mut new.conditions, cond);
            }
            if new == old {
                tracing::debug!(binding = %key, kind, "aggregated status up to date");
                return Ok(());
            }
            *current.status_mut() = new;
            current.meta_mut().managed_fields = None;
            match api
                .replace_status(&name, &PostParams::default(), &current)
                .await
            {
                Ok(_) => {
                    tracing::info!(binding = %key, kind, "aggregated status updated");
                    let message = if namespace.is_empty() {
                        format!("Update {kind}({name}) with AggregatedStatus successfully.")
                    } else {
                        format!(
                            "Update {kind}({namespace}/{name}) with AggregatedStatus successfully."
                        )
                    };
                    self.inner
                        .recorder
                        .record(
                            &object_reference(cached, &kind),
                            EventType::Normal,
                            event_reasons::AGGREGATE_STATUS_SUCCEED,
                            message,
                        )
                        .await;
                    return Ok(());
                }
                Err(e) if is_conflict(&e) => {
                    current = match api.get(&name).await {
                        Ok(b) => b,
                        Err(e) if is_not_found(&e) => return Ok(()),
                        Err(source) => {
                            return Err(ApiError::new("get", kind, key, source).into());
                        }
                    };
                }
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(source) => {
                    self.inner
                        .recorder
                        .record(
                            &object_reference(cached, &kind),
                            EventType::Warning,
                            event_reasons::AGGREGATE_STATUS_FAILED,
                            source.to_string(),
                        )
                        .await;
                    return Err(ApiError::new("update status of", kind, key, source).into());
                }
            }
        }
        Err(BindingStatusError::Conflicts {
            kind,
            key,
            attempts: retry.attempts(),
        })
    }
}

pub(super) fn object_reference<B: StatusBinding>(b: &B, kind: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(B::api_version(&()).into_owned()),
        kind: Some(kind.to_owned()),
        namespace: b.namespace(),
        name: Some(b.name_any()),
        uid: b.meta().uid.clone(),
        resource_version: b.meta().resource_version.clone(),
        field_path: None,
    }
}
