//! Karmada's cluster metrics (`pkg/metrics/cluster.go`): same names, types, help and labels
//! (`member_cluster` and, as in Karmada v1.16, the deprecated `cluster_name` with the same value),
//! registered in the process registry the binary serves on `/metrics`.

use std::sync::OnceLock;

use karmada_apis::Cluster;
use prometheus::{GaugeVec, HistogramOpts, HistogramVec, Opts};

use apimachinery::quantity::Quantity;

/// The label every cluster metric carries.
pub const MEMBER_CLUSTER_LABEL: &str = "member_cluster";

/// The deprecated label Karmada v1.16 still writes beside [`MEMBER_CLUSTER_LABEL`], with the same
/// value (Karmada plans its removal for v1.18): dashboards built on it keep working.
pub const CLUSTER_NAME_LABEL: &str = "cluster_name";

/// What Karmada v1.16 appends to the help of every family carrying [`CLUSTER_NAME_LABEL`].
const CLUSTER_NAME_DEPRECATION: &str = " [Label deprecation: cluster_name deprecated in 1.16; use member_cluster. Removal planned 1.18.]";

/// The label names of every cluster metric.
const LABELS: [&str; 2] = [MEMBER_CLUSTER_LABEL, CLUSTER_NAME_LABEL];

/// The cluster metric families.
pub struct ClusterMetrics {
    /// `cluster_ready_state`: 1 if Ready, 0 otherwise.
    pub ready: GaugeVec,
    /// `cluster_node_number`.
    pub node_number: GaugeVec,
    /// `cluster_ready_node_number`.
    pub ready_node_number: GaugeVec,
    /// `cluster_memory_allocatable_bytes`.
    pub memory_allocatable: GaugeVec,
    /// `cluster_cpu_allocatable_number`.
    pub cpu_allocatable: GaugeVec,
    /// `cluster_pod_allocatable_number`.
    pub pod_allocatable: GaugeVec,
    /// `cluster_memory_allocated_bytes`.
    pub memory_allocated: GaugeVec,
    /// `cluster_cpu_allocated_number`.
    pub cpu_allocated: GaugeVec,
    /// `cluster_pod_allocated_number`.
    pub pod_allocated: GaugeVec,
    /// `cluster_sync_status_duration_seconds` (default Prometheus buckets).
    pub sync_status_duration: HistogramVec,
}

fn gauge(name: &str, help: &str) -> prometheus::Result<GaugeVec> {
    GaugeVec::new(
        Opts::new(name, format!("{help}{CLUSTER_NAME_DEPRECATION}")),
        &LABELS,
    )
}

impl ClusterMetrics {
    fn new() -> prometheus::Result<Self> {
        let sync_status_duration = HistogramVec::new(
            HistogramOpts::new(
                "cluster_sync_status_duration_seconds",
                format!(
                    "Duration in seconds for syncing the status of the cluster once.{CLUSTER_NAME_DEPRECATION}"
                ),
            ),
            &LABELS,
        )?;
        Ok(ClusterMetrics {
            ready: gauge(
                "cluster_ready_state",
                "State of the cluster (1 if ready, 0 otherwise).",
            )?,
            node_number: gauge("cluster_node_number", "Number of nodes in the cluster.")?,
            ready_node_number: gauge(
                "cluster_ready_node_number",
                "Number of ready nodes in the cluster.",
            )?,
            memory_allocatable: gauge(
                "cluster_memory_allocatable_bytes",
                "Allocatable cluster memory resource in bytes.",
            )?,
            cpu_allocatable: gauge(
                "cluster_cpu_allocatable_number",
                "Number of allocatable CPU in the cluster.",
            )?,
            pod_allocatable: gauge(
                "cluster_pod_allocatable_number",
                "Number of allocatable pods in the cluster.",
            )?,
            memory_allocated: gauge(
                "cluster_memory_allocated_bytes",
                "Allocated cluster memory resource in bytes.",
            )?,
            cpu_allocated: gauge(
                "cluster_cpu_allocated_number",
                "Number of allocated CPU in the cluster.",
            )?,
            pod_allocated: gauge(
                "cluster_pod_allocated_number",
                "Number of allocated pods in the cluster.",
            )?,
            sync_status_duration,
        })
    }

    fn gauges(&self) -> [&GaugeVec; 9] {
        [
            &self.ready,
            &self.node_number,
            &self.ready_node_number,
            &self.memory_allocatable,
            &self.cpu_allocatable,
            &self.pod_allocatable,
            &self.memory_allocated,
            &self.cpu_allocated,
            &self.pod_allocated,
        ]
    }

    /// Records a cluster's readiness, node counts and resources from its status.
    pub fn record_status(&self, cluster: &Cluster) {
        let name = cluster.metadata.name.as_deref().unwrap_or_default();
        let labels = [name, name];
        self.ready
            .with_label_values(&labels)
            .set(if cluster.is_ready() { 1.0 } else { 0.0 });
        let Some(status) = cluster.status.as_ref() else {
            return;
        };
        if let Some(nodes) = &status.node_summary {
            self.node_number
                .with_label_values(&labels)
                .set(f64::from(nodes.total_num));
            self.ready_node_number
                .with_label_values(&labels)
                .set(f64::from(nodes.ready_num));
        }
        if let Some(rs) = &status.resource_summary {
            let get = |m: &std::collections::BTreeMap<
                String,
                k8s_openapi::apimachinery::pkg::api::resource::Quantity,
            >,
                       k: &str| {
                m.get(k)
                    .and_then(|q| Quantity::from_k8s(q).ok())
                    .map_or(0.0, |q| q.as_approximate_f64())
            };
            if !rs.allocatable.is_empty() {
                self.memory_allocatable
                    .with_label_values(&labels)
                    .set(get(&rs.allocatable, "memory"));
                self.cpu_allocatable
                    .with_label_values(&labels)
                    .set(get(&rs.allocatable, "cpu"));
                self.pod_allocatable
                    .with_label_values(&labels)
                    .set(get(&rs.allocatable, "pods"));
            }
            if !rs.allocated.is_empty() {
                self.memory_allocated
                    .with_label_values(&labels)
                    .set(get(&rs.allocated, "memory"));
                self.cpu_allocated
                    .with_label_values(&labels)
                    .set(get(&rs.allocated, "cpu"));
                self.pod_allocated
                    .with_label_values(&labels)
                    .set(get(&rs.allocated, "pods"));
            }
        }
    }

    /// Records how long one status sync of `cluster` took.
    pub fn record_sync_duration(&self, cluster: &str, seconds: f64) {
        self.sync_status_duration
            .with_label_values(&[cluster, cluster])
            .observe(seconds);
    }

    /// Deletes every series of `cluster` (it was removed).
    pub fn cleanup(&self, cluster: &str) {
        for g in self.gauges() {
            let _ = g.remove_label_values(&[cluster, cluster]);
        }
        let _ = self
            .sync_status_duration
            .remove_label_values(&[cluster, cluster]);
    }
}

/// The cluster metrics, registered in [`lariat::metrics::registry`] on first use; `None` (with
/// one error logged) if a definition is invalid, in which case nothing is recorded.
pub fn cluster_metrics() -> Option<&'static ClusterMetrics> {
    static METRICS: OnceLock<Option<ClusterMetrics>> = OnceLock::new();
    METRICS.get_or_init(|| {
        let m = match ClusterMetrics::new() {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(error = %e, "cannot define the cluster metrics; they are not recorded");
                return None;
            }
        };
        let registry = lariat::metrics::registry();
        for g in m.gauges() {
            if let Err(e) = registry.register(Box::new(g.clone())) {
                tracing::warn!(error = %e, "cannot register a cluster metric");
            }
        }
        if let Err(e) = registry.register(Box::new(m.sync_status_duration.clone())) {
            tracing::warn!(error = %e, "cannot register cluster_sync_status_duration_seconds");
        }
        Some(m)
    })
    .as_ref()
}
