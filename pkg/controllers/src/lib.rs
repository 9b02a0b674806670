//! Every Karmada controller this project implements, as one dependency for the processes that run
//! them: the [`registry`] of `--controllers` names, and the domain crates re-exported under the
//! module paths callers use (`karmada_controllers::detector`, `karmada_controllers::common`, …).
//!
//! The controllers live in one crate per domain, over a shared crate: a controller is found in one
//! hop, and touching one controller recompiles only its domain (then relinks the binaries). Both
//! binaries depend on this crate; the agent runs only its own controllers (`clusterStatus`,
//! `execution`, `workStatus`, `serviceExport`, `endpointsliceCollect`, `certRotation`), chosen at
//! run time. See the README's architecture section.
//!
//! | crate | controllers |
//! |---|---|
//! | `karmada-controllers-common` | none: the context, member clusters, Events, patches, the Work writer |
//! | `karmada-controllers-cluster` | `cluster`, `clusterStatus`, `agentcsrapproving`, `unifiedAuth`, `remedy` |
//! | `karmada-controllers-work` | `execution`, `workStatus` |
//! | `karmada-controllers-propagation` | `detector`, `scheduler`, `binding` (with karmada-rs's own rollout controller beside it), `bindingStatus`, `namespace`, `workloadRebalancer` |
//! | `karmada-controllers-autoscaling` | `federatedResourceQuotaSync`, `federatedResourceQuotaStatus`, `federatedResourceQuotaEnforcement`, `federatedHorizontalPodAutoscaler`, `cronFederatedHorizontalPodAutoscaler`, `hpaScaleTargetMarker`, `deploymentReplicasSyncer` |
//! | `karmada-controllers-dependencies` | the dependencies distributor (no `--controllers` name, like the detector) |
//! | `karmada-controllers-networking` | `serviceExport`, `endpointSlice`, `serviceImport`, `multiclusterservice`, `endpointsliceCollect`, `endpointsliceDispatch` |
//! | `karmada-controllers-failover` | `gracefulEviction`, `applicationFailover`, `clustertaintpolicy`, the taint manager (runs with `cluster`) |

pub mod registry;

pub use karmada_controllers_autoscaling::{
    cron_federated_hpa, deployment_replicas_syncer, federated_hpa,
    federated_resource_quota_enforcement, federated_resource_quota_status,
    federated_resource_quota_sync, hpa_scale_target_marker,
};
pub use karmada_controllers_cluster::{
    agent_csr_approving, cert_rotation, cluster, cluster_status, remedy, unified_auth,
};
pub use karmada_controllers_common as common;
pub use karmada_controllers_common::{
    BoxError, ControllerContext, ControllerFuture, MemberClusters, Settings, StartFn, SyncReporter,
    context, members,
};
pub use karmada_controllers_dependencies::distributor as dependencies_distributor;
pub use karmada_controllers_failover::{
    application_failover, cluster_taint_policy, graceful_eviction, taint_manager,
};
pub use karmada_controllers_networking::{
    endpoint_slice, endpointslice_collect, endpointslice_dispatch, multicluster_service,
    service_export, service_import,
};
pub use karmada_controllers_propagation::{
    binding, binding_status, detector, namespace, rollout, scheduler, workload_rebalancer,
};
pub use karmada_controllers_work::{execution, work_status};

/// The feature gates the controllers read, by the constants they read them with. The
/// controller-manager's tests check that every other gate it accepts is listed as having no
/// effect, so a gate is never accepted silently.
pub const READ_GATES: &[&str] = &[
    karmada_controllers_failover::FEATURE_FAILOVER,
    application_failover::FEATURE_GRACEFUL_EVICTION,
    common::failover::FEATURE_STATEFUL_FAILOVER_INJECTION,
    common::multicluster_service::FEATURE_GATE,
    common::quota::FEDERATED_QUOTA_ENFORCEMENT,
    common::binding::FEATURE_PRIORITY_BASED_SCHEDULING,
    common::binding::FEATURE_WORKLOAD_AFFINITY,
    common::binding::FEATURE_MULTIPLE_POD_TEMPLATES_SCHEDULING,
    common::priority::FEATURE_SCHEDULER_PREEMPTION,
    detector::FEATURE_POLICY_PREEMPTION,
    detector::FEATURE_RESOURCE_QUOTA_ESTIMATE,
    cluster_status::CUSTOMIZED_CLUSTER_RESOURCE_MODELING,
];
