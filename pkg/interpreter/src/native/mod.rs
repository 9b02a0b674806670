//! The native rules: Karmada's built-in knowledge of Kubernetes kinds, as one table.
//!
//! | kind | replicas | revise | prune | retain | reflect | health | aggregate |
//! |---|---|---|---|---|---|---|---|
//! | apps Deployment | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ |
//! | apps StatefulSet | ✓ | ✓ | | | ✓ | ✓ | ✓ |
//! | apps ReplicaSet | ✓ | ✓ | | | ✓ | ✓ | ✓ |
//! | apps DaemonSet | | | | | ✓ | ✓ | ✓ |
//! | batch Job | ✓ | ✓ | ✓ | ✓ | ✓ | | ✓ |
//! | batch CronJob | | | | | | | ✓ |
//! | Pod | ✓ | | | ✓ | | ✓ | ✓ |
//! | Service | | | ✓ | ✓ | ✓ | ✓ | ✓ |
//! | ServiceAccount | | | ✓ | ✓ | | | |
//! | Secret | | | ✓ | ✓ | | | |
//! | PersistentVolumeClaim | | | ✓ | ✓ | | ✓ | ✓ |
//! | PersistentVolume | | | | ✓ | | | ✓ |
//! | networking.k8s.io Ingress | | | | | ✓ | ✓ | ✓ |
//! | policy PodDisruptionBudget | | | | | ✓ | ✓ | ✓ |
//! | autoscaling HorizontalPodAutoscaler | | | | | ✓ | | ✓ |

use std::collections::HashMap;

use crate::rules::{GroupKind, KindRules};
use crate::{aggregate, health, prune, reflect, replicas, retain};

/// The group and kind of the native workload and service kinds.
pub mod kinds {
    use crate::rules::GroupKind;

    /// `apps/Deployment`.
    pub fn deployment() -> GroupKind {
        GroupKind::new("apps", "Deployment")
    }
    /// `apps/StatefulSet`.
    pub fn stateful_set() -> GroupKind {
        GroupKind::new("apps", "StatefulSet")
    }
    /// `apps/ReplicaSet`.
    pub fn replica_set() -> GroupKind {
        GroupKind::new("apps", "ReplicaSet")
    }
    /// `apps/DaemonSet`.
    pub fn daemon_set() -> GroupKind {
        GroupKind::new("apps", "DaemonSet")
    }
    /// `batch/Job`.
    pub fn job() -> GroupKind {
        GroupKind::new("batch", "Job")
    }
    /// `batch/CronJob`.
    pub fn cron_job() -> GroupKind {
        GroupKind::new("batch", "CronJob")
    }
    /// Core `Pod`.
    pub fn pod() -> GroupKind {
        GroupKind::new("", "Pod")
    }
    /// Core `Service`.
    pub fn service() -> GroupKind {
        GroupKind::new("", "Service")
    }
    /// Core `ServiceAccount`.
    pub fn service_account() -> GroupKind {
        GroupKind::new("", "ServiceAccount")
    }
    /// Core `Secret`.
    pub fn secret() -> GroupKind {
        GroupKind::new("", "Secret")
    }
    /// Core `PersistentVolumeClaim`.
    pub fn persistent_volume_claim() -> GroupKind {
        GroupKind::new("", "PersistentVolumeClaim")
    }
    /// Core `PersistentVolume`.
    pub fn persistent_volume() -> GroupKind {
        GroupKind::new("", "PersistentVolume")
    }
    /// `networking.k8s.io/Ingress`.
    pub fn ingress() -> GroupKind {
        GroupKind::new("networking.k8s.io", "Ingress")
    }
    /// `policy/PodDisruptionBudget`.
    pub fn pod_disruption_budget() -> GroupKind {
        GroupKind::new("policy", "PodDisruptionBudget")
    }
    /// `autoscaling/HorizontalPodAutoscaler`.
    pub fn horizontal_pod_autoscaler() -> GroupKind {
        GroupKind::new("autoscaling", "HorizontalPodAutoscaler")
    }
}

/// The native rule table.
#[allow(
    clippy::too_many_lines,
    reason = "one table entry per native kind, read as a list"
)]
pub(crate) fn rules() -> HashMap<GroupKind, KindRules> {
    HashMap::from([
        (
            kinds::deployment(),
            KindRules::default()
                .with_replicas(replicas::deployment)
                .with_revise_replica(replicas::revise_replicas_field)
                .with_prune(prune::deployment)
                .with_retain(retain::deployment)
                .with_reflect_status(reflect::deployment)
                .with_health(health::deployment)
                .with_aggregate_status(aggregate::deployment),
        ),
        (
            kinds::stateful_set(),
            KindRules::default()
                .with_replicas(replicas::stateful_set)
                .with_revise_replica(replicas::revise_replicas_field)
                .with_reflect_status(reflect::stateful_set)
                .with_health(health::stateful_set)
                .with_aggregate_status(aggregate::stateful_set),
        ),
        (
            kinds::replica_set(),
            KindRules::default()
                .with_replicas(replicas::replica_set)
                .with_revise_replica(replicas::revise_replicas_field)
                .with_reflect_status(reflect::replica_set)
                .with_health(health::replica_set)
                .with_aggregate_status(aggregate::replica_set),
        ),
        (
            kinds::daemon_set(),
            KindRules::default()
                .with_reflect_status(reflect::daemon_set)
                .with_health(health::daemon_set)
                .with_aggregate_status(aggregate::daemon_set),
        ),
        (
            kinds::job(),
            KindRules::default()
                .with_replicas(replicas::job)
                .with_revise_replica(replicas::revise_job)
                .with_prune(prune::job)
                .with_retain(retain::job)
                .with_reflect_status(reflect::job)
                .with_aggregate_status(aggregate::job),
        ),
        (
            kinds::cron_job(),
            KindRules::default().with_aggregate_status(aggregate::cron_job),
        ),
        (
            kinds::pod(),
            KindRules::default()
                .with_replicas(replicas::pod)
                .with_retain(retain::pod)
                .with_health(health::pod)
                .with_aggregate_status(aggregate::pod),
        ),
        (
            kinds::service(),
            KindRules::default()
                .with_prune(prune::service)
                .with_retain(retain::service)
                .with_reflect_status(reflect::service)
                .with_health(health::service)
                .with_aggregate_status(aggregate::service),
        ),
        (
            kinds::service_account(),
            KindRules::default()
                .with_prune(prune::service_account)
                .with_retain(retain::service_account),
        ),
        (
            kinds::secret(),
            KindRules::default()
                .with_prune(prune::secret)
                .with_retain(retain::secret),
        ),
        (
            kinds::persistent_volume_claim(),
            KindRules::default()
                .with_prune(prune::persistent_volume_claim)
                .with_retain(retain::persistent_volume_claim)
                .with_health(health::persistent_volume_claim)
                .with_aggregate_status(aggregate::persistent_volume_claim),
        ),
        (
            kinds::persistent_volume(),
            KindRules::default()
                .with_retain(retain::persistent_volume)
                .with_aggregate_status(aggregate::persistent_volume),
        ),
        (
            kinds::ingress(),
            KindRules::default()
                .with_reflect_status(reflect::whole_status)
                .with_health(health::ingress)
                .with_aggregate_status(aggregate::ingress),
        ),
        (
            kinds::pod_disruption_budget(),
            KindRules::default()
                .with_reflect_status(reflect::pod_disruption_budget)
                .with_health(health::pod_disruption_budget)
                .with_aggregate_status(aggregate::pod_disruption_budget),
        ),
        (
            kinds::horizontal_pod_autoscaler(),
            KindRules::default()
                .with_reflect_status(reflect::horizontal_pod_autoscaler)
                .with_aggregate_status(aggregate::horizontal_pod_autoscaler),
        ),
    ])
}
