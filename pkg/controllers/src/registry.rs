//! The controllers this crate implements, by their Karmada `--controllers` name: the one source of
//! truth for what is implemented. The process (`karmada-controller-manager`) starts these; Karmada
//! names not listed here never run (`*` leaves them out with a warning, naming one is an error).

use crate::StartFn;

/// `(name, start)` for every implemented controller.
pub fn implemented() -> Vec<(&'static str, StartFn)> {
    vec![
        (
            crate::cluster::NAME,
            crate::taint_manager::alongside(crate::cluster::start_fn()),
        ),
        (
            crate::cluster_status::NAME,
            crate::cluster_status::start_fn(),
        ),
        (
            crate::agent_csr_approving::NAME,
            crate::agent_csr_approving::start_fn(),
        ),
        (crate::unified_auth::NAME, crate::unified_auth::start_fn()),
        (crate::remedy::NAME, crate::remedy::start_fn()),
        (
            crate::multicluster_service::NAME,
            crate::multicluster_service::start_fn(),
        ),
        (
            crate::endpointslice_collect::NAME,
            crate::endpointslice_collect::start_fn(),
        ),
        (
            crate::endpointslice_dispatch::NAME,
            crate::endpointslice_dispatch::start_fn(),
        ),
        (crate::scheduler::NAME, crate::scheduler::start_fn()),
        (
            crate::binding::NAME,
            crate::rollout::alongside(crate::binding::start_fn()),
        ),
        (crate::execution::NAME, crate::execution::start_fn()),
        (crate::namespace::NAME, crate::namespace::start_fn()),
        (crate::work_status::NAME, crate::work_status::start_fn()),
        (
            crate::binding_status::NAME,
            crate::binding_status::start_fn(),
        ),
        (
            crate::workload_rebalancer::NAME,
            crate::workload_rebalancer::start_fn(),
        ),
        (
            crate::service_export::NAME,
            crate::service_export::start_fn(),
        ),
        (
            crate::endpoint_slice::NAME,
            crate::endpoint_slice::start_fn(),
        ),
        (
            crate::service_import::NAME,
            crate::service_import::start_fn(),
        ),
        (
            crate::federated_resource_quota_sync::NAME,
            crate::federated_resource_quota_sync::start_fn(),
        ),
        (
            crate::federated_resource_quota_status::NAME,
            crate::federated_resource_quota_status::start_fn(),
        ),
        (
            crate::federated_resource_quota_enforcement::NAME,
            crate::federated_resource_quota_enforcement::start_fn(),
        ),
        (
            crate::cron_federated_hpa::NAME,
            crate::cron_federated_hpa::start_fn(),
        ),
        (
            crate::hpa_scale_target_marker::NAME,
            crate::hpa_scale_target_marker::start_fn(),
        ),
        (
            crate::deployment_replicas_syncer::NAME,
            crate::deployment_replicas_syncer::start_fn(),
        ),
        (crate::federated_hpa::NAME, crate::federated_hpa::start_fn()),
        (
            crate::graceful_eviction::NAME,
            crate::graceful_eviction::start_fn(),
        ),
        (
            crate::application_failover::NAME,
            crate::application_failover::start_fn(),
        ),
        (
            crate::cluster_taint_policy::NAME,
            crate::cluster_taint_policy::start_fn(),
        ),
    ]
}
