//! Scheduling priority from Kubernetes PriorityClasses (`schedulePriority.priorityClassSource:
//! KubePriorityClass`): the one place the detector (the priority value) and the scheduler (whether
//! the binding may preempt) look a PriorityClass up.

use k8s_openapi::api::scheduling::v1::PriorityClass;
use karmada_apis::policy::v1alpha1::{PriorityClassSource, PropagationSpec};

/// Feature gate (karmada-rs's own, under `PriorityBasedScheduling`): a binding that does not fit
/// for lack of capacity takes the room of lower-priority bindings when its PriorityClass allows.
pub const FEATURE_SCHEDULER_PREEMPTION: &str = "SchedulerPreemption";

/// Kubernetes' `preemptionPolicy` that forbids preempting.
pub const PREEMPT_NEVER: &str = "Never";

/// The PriorityClass the policy resolves its bindings' priority from, if it names one.
pub fn kube_priority_class(spec: &PropagationSpec) -> Option<&str> {
    spec.schedule_priority
        .as_ref()
        .filter(|p| p.priority_class_source == PriorityClassSource::KubePriorityClass)
        .map(|p| p.priority_class_name.as_str())
}

/// Reads PriorityClass `name`.
pub async fn priority_class(
    client: &kube::Client,
    name: &str,
) -> Result<PriorityClass, kube::Error> {
    kube::Api::<PriorityClass>::all(client.clone())
        .get(name)
        .await
}

/// Whether a PriorityClass lets its bindings preempt: its `preemptionPolicy` is
/// `PreemptLowerPriority`, Kubernetes' default when unset.
pub fn may_preempt(class: &PriorityClass) -> bool {
    class.preemption_policy.as_deref() != Some(PREEMPT_NEVER)
}
