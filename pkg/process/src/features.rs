//! Karmada's feature gates and their defaults, as Karmada's `pkg/features` has them on its master
//! after v1.19.0-rc.0: newer than the v1.16 reference, so some differ from v1.16's (listed in
//! docs/compatibility.md, "Which Karmada version").

use lariat::runtime::features::{FeatureSpec, PreRelease};

const fn gate(name: &'static str, default: bool, pre_release: PreRelease) -> FeatureSpec {
    FeatureSpec {
        name,
        default,
        pre_release,
        lock_to_default: false,
    }
}

/// Cluster failover (migrating workloads off failed clusters).
pub const FAILOVER: &str = "Failover";
/// Graceful eviction during failover.
pub const GRACEFUL_EVICTION: &str = "GracefulEviction";
/// Propagating dependencies (ConfigMaps, Secrets, …) along with workloads.
pub const PROPAGATE_DEPS: &str = "PropagateDeps";
/// Multi-cluster Service controllers.
pub const MULTI_CLUSTER_SERVICE: &str = "MultiClusterService";
/// FederatedResourceQuota enforcement in the control plane.
pub const FEDERATED_QUOTA_ENFORCEMENT: &str = "FederatedQuotaEnforcement";
/// Priority queue for controllers.
pub const CONTROLLER_PRIORITY_QUEUE: &str = "ControllerPriorityQueue";

/// Preemption by the scheduler (karmada-rs's own gate; Karmada has no such feature): a binding whose
/// PriorityClass allows it takes the room of lower-priority bindings.
pub const SCHEDULER_PREEMPTION: &str = "SchedulerPreemption";

/// Every gate Karmada's controller-manager accepts, then karmada-rs's own.
pub static KARMADA_FEATURES: &[FeatureSpec] = &[
    gate(FAILOVER, false, PreRelease::Beta),
    gate(GRACEFUL_EVICTION, true, PreRelease::Beta),
    gate(PROPAGATE_DEPS, true, PreRelease::Beta),
    gate("CustomizedClusterResourceModeling", true, PreRelease::Beta),
    gate("PropagationPolicyPreemption", false, PreRelease::Alpha),
    gate(MULTI_CLUSTER_SERVICE, false, PreRelease::Alpha),
    gate("ResourceQuotaEstimate", false, PreRelease::Alpha),
    gate("StatefulFailoverInjection", false, PreRelease::Alpha),
    gate("PriorityBasedScheduling", true, PreRelease::Beta),
    gate(FEDERATED_QUOTA_ENFORCEMENT, false, PreRelease::Alpha),
    gate("LoggingAlphaOptions", false, PreRelease::Alpha),
    gate("LoggingBetaOptions", true, PreRelease::Beta),
    gate("ContextualLogging", true, PreRelease::Beta),
    gate("MultiplePodTemplatesScheduling", false, PreRelease::Alpha),
    gate(CONTROLLER_PRIORITY_QUEUE, true, PreRelease::Beta),
    gate("WorkloadAffinity", false, PreRelease::Alpha),
    gate("SchedulingOvercommitProtection", false, PreRelease::Alpha),
    // karmada-rs's own (docs/compatibility.md, "Beyond Karmada").
    gate(SCHEDULER_PREEMPTION, false, PreRelease::Alpha),
];
