//! The controllers this crate implements, by their Karmada `--controllers` name: the one source of
//! truth for what is implemented. The process (`karmada-controller-manager`) starts these; Karmada
//! names not listed here never run (`*` leaves them out with a warning, naming one is an error).

use crate::StartFn;

/// `(name, start)` for every implemented controller.
pub fn implemented() -> Vec<(&'static str, StartFn)> {
    vec![
        (
            "cluster",
            crate::taint_manager::alongside(crate::cluster::start_fn()),
        ),
        ("clusterStatus", crate::cluster_status::start_fn()),
        ("agentcsrapproving", crate::agent_csr_approving::start_fn()),
        ("unifiedAuth", crate::unified_auth::start_fn()),
        ("remedy", crate::remedy::start_fn()),
        (
            "multiclusterservice",
            crate::multicluster_service::start_fn(),
        ),
        (
            "endpointsliceCollect",
            crate::endpointslice_collect::start_fn(),
        ),
        (
            "endpointsliceDispatch",
            crate::endpointslice_dispatch::start_fn(),
        ),
        ("scheduler", crate::scheduler::start_fn()),
        (
            "binding",
            crate::rollout::alongside(crate::binding::start_fn()),
        ),
        ("execution", crate::execution::start_fn()),
        ("namespace", crate::namespace::start_fn()),
        ("workStatus", crate::work_status::start_fn()),
        ("bindingStatus", crate::binding_status::start_fn()),
        ("workloadRebalancer", crate::workload_rebalancer::start_fn()),
        ("serviceExport", crate::service_export::start_fn()),
        ("endpointSlice", crate::endpoint_slice::start_fn()),
        ("serviceImport", crate::service_import::start_fn()),
        (
            "federatedResourceQuotaSync",
            crate::federated_resource_quota_sync::start_fn(),
        ),
        (
            "federatedResourceQuotaStatus",
            crate::federated_resource_quota_status::start_fn(),
        ),
        (
            "federatedResourceQuotaEnforcement",
            crate::federated_resource_quota_enforcement::start_fn(),
        ),
        (
            "cronFederatedHorizontalPodAutoscaler",
            crate::cron_federated_hpa::start_fn(),
        ),
        (
            "hpaScaleTargetMarker",
            crate::hpa_scale_target_marker::start_fn(),
        ),
        (
            "deploymentReplicasSyncer",
            crate::deployment_replicas_syncer::start_fn(),
        ),
        (
            "federatedHorizontalPodAutoscaler",
            crate::federated_hpa::start_fn(),
        ),
        ("gracefulEviction", crate::graceful_eviction::start_fn()),
        (
            "applicationFailover",
            crate::application_failover::start_fn(),
        ),
        (
            "clustertaintpolicy",
            crate::cluster_taint_policy::start_fn(),
        ),
    ]
}
