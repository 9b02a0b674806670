//! The Work's status: conditions and manifest statuses, merged with what this controller last
//! wrote and patched only when something changed.

use apimachinery::{is_not_found, set_status_condition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use karmada_apis::Work;
use karmada_apis::work::v1alpha1::{ManifestStatus, WorkStatus};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::ExecutionController;
use super::error::ExecutionError;

/// Sets a condition like apimachinery's `meta.SetStatusCondition`; returns whether it changed
/// (status, reason or message).
pub(super) fn condition(type_: &str, ok: bool, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: if ok { "True" } else { "False" }.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        last_transition_time: Time(Timestamp::now()),
        observed_generation: None,
    }
}

impl ExecutionController {
    /// Sets conditions on the Work's status, and with `statuses` its manifest statuses (written only
    /// if something changed, in one write).
    pub(super) async fn set_status(
        &self,
        work: &Work,
        conditions: Vec<Condition>,
        statuses: Option<Vec<ManifestStatus>>,
    ) -> Result<(), ExecutionError> {
        let ns = work.namespace().unwrap_or_default();
        let name = work.name_any();
        let key = format!("{ns}/{name}");
        // The execution controller writes Karmada's conditions of a Work as a merge patch of the
        // whole list computed from the cached Work: it never conflicts with the work-status
        // controller's writes the way a resourceVersion-checked update would. `manifestStatuses`
        // has two writers: this one right after it wrote the objects, and the work-status
        // controller, which compares every Work update with the member objects it caches and
        // corrects an entry written from an older object.
        let current = self.inner.written.status(work);
        let current = current.as_deref();
        let mut merged = current.map(|s| s.conditions.clone()).unwrap_or_default();
        let mut changed = false;
        for c in conditions {
            changed |= set_status_condition(&mut merged, c);
        }
        let statuses = statuses.filter(|new| current.is_none_or(|s| s.manifest_statuses != *new));
        if !changed && statuses.is_none() {
            // The cached Work already says so.
            return Ok(());
        }
        let api: Api<Work> = Api::namespaced(self.inner.client.clone(), &ns);
        // The list is sent only when one of this controller's conditions changed: a list computed
        // from a cache that lags can drop a condition another controller has just added (the
        // work-status controller's `Drifted`), which that controller then writes again.
        let patch = match (&statuses, changed) {
            (Some(statuses), true) => {
                json!({"status": {"conditions": merged, "manifestStatuses": statuses}})
            }
            (Some(statuses), false) => json!({"status": {"manifestStatuses": statuses}}),
            (None, _) => json!({"status": {"conditions": merged}}),
        };
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                let manifest_statuses = statuses
                    .or_else(|| current.map(|s| s.manifest_statuses.clone()))
                    .unwrap_or_default();
                self.inner.written.wrote(
                    work,
                    WorkStatus {
                        conditions: merged,
                        manifest_statuses,
                    },
                );
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(source) => Err(ExecutionError::Api {
                action: "update status of",
                key,
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_change_only_when_different() {
        let mut cs = vec![];
        assert!(set_status_condition(
            &mut cs,
            condition("Applied", true, "A", "m")
        ));
        assert!(!set_status_condition(
            &mut cs,
            condition("Applied", true, "A", "m")
        ));
        assert!(set_status_condition(
            &mut cs,
            condition("Applied", false, "B", "x")
        ));
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0].status, "False");
    }
}
