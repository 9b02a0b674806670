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

/// The condition type naming the target clusters left out of the replica and metric sums (a
/// karmada-rs addition: Karmada leaves them out silently). Present only while some are.
pub(super) const MEMBERS_OBSERVED: &str = "MembersObserved";

/// Reason of the [`MEMBERS_OBSERVED`] condition and of its Warning Event.
pub(super) const MEMBERS_NOT_OBSERVED: &str = "MembersNotObserved";

/// Sets or clears the [`MEMBERS_OBSERVED`] condition from the clusters `left_out` of the sums
/// (`total` target clusters); returns the message when it is new, for a Warning Event.
pub(super) fn set_left_out(
    hpa: &mut FederatedHPA,
    left_out: &[String],
    total: usize,
) -> Option<String> {
    if left_out.is_empty() {
        if let Some(conditions) = hpa.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            conditions.retain(|c| c.type_ != MEMBERS_OBSERVED);
        }
        return None;
    }
    let message = format!(
        "replicas or metrics leave out {} of {total} target cluster(s): {}",
        left_out.len(),
        left_out.join(", ")
    );
    let previous = hpa
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == MEMBERS_OBSERVED))
        .and_then(|c| c.message.clone());
    set_condition(
        hpa,
        MEMBERS_OBSERVED,
        "False",
        MEMBERS_NOT_OBSERVED,
        message.clone(),
    );
    (previous.as_deref() != Some(message.as_str())).then_some(message)
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
    fn clusters_left_out_are_named_until_none_is() {
        let mut hpa = FederatedHPA::new("h", Default::default());
        let left = vec!["member2 (Pull mode)".to_owned()];
        let message = set_left_out(&mut hpa, &left, 2).unwrap();
        assert_eq!(
            message,
            "replicas or metrics leave out 1 of 2 target cluster(s): member2 (Pull mode)"
        );
        assert_eq!(set_left_out(&mut hpa, &left, 2), None, "no Event twice");
        let c = &hpa.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
        assert_eq!(
            (c.type_.as_str(), c.status.as_str()),
            (MEMBERS_OBSERVED, "False")
        );
        assert_eq!(c.reason.as_deref(), Some(MEMBERS_NOT_OBSERVED));
        assert_eq!(set_left_out(&mut hpa, &[], 2), None);
        assert!(hpa.status.unwrap().conditions.unwrap().is_empty());
    }

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
