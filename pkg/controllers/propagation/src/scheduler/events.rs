//! Announcing a result: Events on the binding and on its template, and a log line.

use k8s_openapi::api::core::v1::ObjectReference;
use karmada_apis::well_known::event_reasons;
use karmada_apis::work::v1alpha2::ResourceBindingSpec;
use karmada_controllers_common::binding::BindingObject;
use karmada_scheduler::{self as scheduler, ScheduleError, ScheduleResult};
use lariat::events::EventType;

use super::Scheduler;
use super::write::namespace_and_name;

pub(super) fn template_reference(spec: &ResourceBindingSpec) -> ObjectReference {
    let r = &spec.resource;
    ObjectReference {
        api_version: Some(r.api_version.clone()),
        kind: Some(r.kind.clone()),
        namespace: (!r.namespace.is_empty()).then(|| r.namespace.clone()),
        name: Some(r.name.clone()),
        uid: (!r.uid.is_empty()).then(|| r.uid.clone()),
        resource_version: None,
        field_path: None,
    }
}

impl Scheduler {
    /// Records the result as Events on the binding and on its template (both, as Karmada does) and
    /// logs it.
    pub(super) async fn announce_result<B: BindingObject>(
        &self,
        b: &B,
        result: &Result<ScheduleResult, ScheduleError>,
        succeeded: bool,
        message: &str,
    ) {
        let kind = B::kind(&());
        let (namespace, name) = namespace_and_name(b);
        let success = match (result, succeeded) {
            (Ok(o), true) => Some(o),
            _ => None,
        };
        let (event_type, reason, event_message) = match success {
            Some(o) => (
                EventType::Normal,
                event_reasons::SCHEDULE_BINDING_SUCCEED,
                scheduler::success_event_message(&o.clusters, namespace.is_empty()),
            ),
            None => (
                EventType::Warning,
                event_reasons::SCHEDULE_BINDING_FAILED,
                message.to_owned(),
            ),
        };
        let recorder = &self.inner.recorder;
        recorder
            .record(
                &lariat::events::reference_of(b),
                event_type,
                reason,
                event_message.clone(),
            )
            .await;
        recorder
            .record(
                &template_reference(b.binding_spec()),
                event_type,
                reason,
                event_message,
            )
            .await;
        match success {
            Some(o) => {
                tracing::info!(kind = %kind, namespace = %namespace, name = %name, result = ?o.clusters.iter().map(|c| (c.name.as_str(), c.replicas)).collect::<Vec<_>>(), "scheduled binding");
            }
            None => {
                tracing::warn!(kind = %kind, namespace = %namespace, name = %name, message = %message, "scheduling failed");
            }
        }
    }
}
