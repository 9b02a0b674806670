//! Failover: the `clustertaintpolicy` controller (taints from cluster conditions), the taint manager
//! (evicting bindings from clusters with NoExecute taints they do not tolerate; it runs with the
//! `cluster` controller, as in Karmada) and the `gracefulEviction` controller (dropping eviction
//! tasks once the workload is healthy elsewhere or the grace period passed), and the
//! `applicationFailover` controller (evicting a workload from clusters where it stays unhealthy).

pub mod application_failover;
pub mod cluster_taint_policy;
pub mod graceful_eviction;
pub mod taint_manager;

/// The `Failover` feature gate: the taint manager and ClusterTaintPolicy run only when it is on.
pub const FEATURE_FAILOVER: &str = "Failover";
