//! The FederatedHPA's status and Events: conditions whose transition time moves only with their
//! status, and a status write only when something changed.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use karmada_apis::autoscaling::v1alpha1::FederatedHPA;
use karmada_controllers_common::patch::guarded_merge_patch;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use lariat::events::{EventType, reference_of};

use super::FederatedHpaController;
use super::error::FhpaError;

impl FederatedHpaController {
    pub(super) async fn event(
        &self,
        hpa: &FederatedHPA,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        self.inner
            .events
            .record(&reference_of(hpa), type_, reason, message)
            .await;
    }

    /// Writes the status when it differs from what was read; a failure is an Event
    /// (`FailedUpdateStatus`) and the error.
    pub(super) async fn update_status(
        &self,
        read: &FederatedHPA,
        updated: &FederatedHPA,
    ) -> Result<(), FhpaError> {
        let name = read.name_any();
        let namespace = read.namespace().unwrap_or_default();
        let err = |m: String| FhpaError::Sync(format!("failed to update status for {name}: {m}"));
        let Some(patch) = guarded_merge_patch(read, updated).map_err(|e| err(e.to_string()))?
        else {
            return Ok(());
        };
        let api: Api<FederatedHPA> = Api::namespaced(self.inner.client.clone(), &namespace);
        if let Err(e) = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            self.event(
                read,
                EventType::Warning,
                "FailedUpdateStatus",
                e.to_string(),
            )
            .await;
            return Err(err(e.to_string()));
        }
        Ok(())
    }

    /// Records a failure before the scale is known: Event `reason`, `AbleToScale=False` with
    /// `condition_reason` and `message`, the status written, and the error returned.
    pub(super) async fn fail_able_to_scale(
        &self,
        read: &FederatedHPA,
        updated: &mut FederatedHPA,
        (reason, condition_reason, message): (&str, &str, String),
        event_message: String,
        error: String,
    ) -> FhpaError {
        self.event(read, EventType::Warning, reason, event_message)
            .await;
        set_condition(updated, "AbleToScale", "False", condition_reason, message);
        if let Err(e) = self.update_status(read, updated).await {
            tracing::warn!(error = %e, "FederatedHPA status not written");
        }
        FhpaError::Sync(error)
    }
}

pub(super) fn set_current_replicas(hpa: &mut FederatedHPA, current: i32) {
    let status = hpa.status.get_or_insert_default();
    status.current_replicas = Some(current);
}

/// Sets condition `type_` (added when absent); its transition time moves only when the status does.
pub(super) fn set_condition(
    hpa: &mut FederatedHPA,
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
) {
    let conditions = hpa
        .status
        .get_or_insert_default()
        .conditions
        .get_or_insert_default();
    let index = match conditions.iter().position(|c| c.type_ == type_) {
        Some(i) => i,
        None => {
            conditions.push(HorizontalPodAutoscalerCondition {
                type_: type_.to_owned(),
                ..Default::default()
            });
            conditions.len() - 1
        }
    };
    let c = &mut conditions[index];
    if c.status != status {
        c.last_transition_time = Some(Time(Timestamp::now()));
    }
    c.status = status.to_owned();
    c.reason = Some(reason.to_owned());
    c.message = Some(message);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_keep_their_transition_time_while_the_status_holds() {
        let mut hpa = FederatedHPA::new("h", Default::default());
        set_condition(&mut hpa, "AbleToScale", "True", "A", "m".into());
        let first = hpa.status.as_ref().unwrap().conditions.as_ref().unwrap()[0]
            .last_transition_time
            .clone();
        set_condition(&mut hpa, "AbleToScale", "True", "B", "n".into());
        let c = &hpa.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
        assert_eq!(c.last_transition_time, first);
        assert_eq!(c.reason.as_deref(), Some("B"));
    }
}
