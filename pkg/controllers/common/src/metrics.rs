//! Karmada's propagation metrics (`pkg/metrics/resource.go`), with its names, help texts, labels and
//! buckets, registered in the process registry ([`lariat::metrics::registry`]):
//! `binding_sync_work_duration_seconds{result}`, `work_sync_workload_duration_seconds{result}`,
//! `create_resource_to_cluster{result,apiversion,kind,member_cluster,cluster,recreate}`,
//! `update_resource_to_cluster{result,apiversion,kind,member_cluster,cluster,operationResult}` and
//! `delete_resource_from_cluster{result,apiversion,kind,member_cluster,cluster}`; `cluster` is the
//! label Karmada v1.16 deprecated for `member_cluster` and still writes, with the same value.

use std::sync::OnceLock;
use std::time::Instant;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};

/// The propagation metric families.
pub struct PropagationMetrics {
    /// `binding_sync_work_duration_seconds{result}`.
    pub sync_work: HistogramVec,
    /// `work_sync_workload_duration_seconds{result}`.
    pub sync_workload: HistogramVec,
    /// `create_resource_to_cluster`.
    pub create: IntCounterVec,
    /// `update_resource_to_cluster`.
    pub update: IntCounterVec,
    /// `delete_resource_from_cluster`.
    pub delete: IntCounterVec,
}

/// `operationResult` of an update that was skipped (nothing differed).
pub const OPERATION_NONE: &str = "none";
/// `operationResult` of an update the API server accepted without a change.
pub const OPERATION_UNCHANGED: &str = "unchanged";
/// `operationResult` of an update that changed the object.
pub const OPERATION_UPDATED: &str = "updated";

fn buckets() -> Vec<f64> {
    (0..12).map(|i| 0.001 * 2f64.powi(i)).collect()
}

/// `success` or `error` (Karmada's `GetResultByError`).
pub fn result_label(ok: bool) -> &'static str {
    if ok { "success" } else { "error" }
}

fn build() -> prometheus::Result<PropagationMetrics> {
    let sync_work = HistogramVec::new(
        HistogramOpts::new(
            "binding_sync_work_duration_seconds",
            "Duration in seconds to sync works for ResourceBinding and ClusterResourceBinding objects. By the result, 'error' means a binding failed to sync works. Otherwise 'success'.",
        )
        .buckets(buckets()),
        &["result"],
    )?;
    let sync_workload = HistogramVec::new(
        HistogramOpts::new(
            "work_sync_workload_duration_seconds",
            "Duration in seconds to sync the workload to a target cluster. By the result, 'error' means a work failed to sync workloads. Otherwise 'success'.",
        )
        .buckets(buckets()),
        &["result"],
    )?;
    let create = IntCounterVec::new(
        Opts::new(
            "create_resource_to_cluster",
            "Number of creation operations against a target member cluster. The 'result' label indicates outcome ('success' or 'error'), 'recreate' indicates whether the operation is recreated (true/false). Labels 'apiversion', 'kind', and 'cluster' specify the resource type, API version, and target cluster respectively. [Label deprecation: cluster deprecated in 1.16; use member_cluster. Removal planned 1.18.]",
        ),
        &[
            "result",
            "apiversion",
            "kind",
            "member_cluster",
            "cluster",
            "recreate",
        ],
    )?;
    let update = IntCounterVec::new(
        Opts::new(
            "update_resource_to_cluster",
            "Number of updating operation of the resource to a target member cluster. By the result, 'error' means a resource updated failed. Otherwise 'success'. Cluster means the target member cluster. operationResult means the result of the update operation. [Label deprecation: cluster deprecated in 1.16; use member_cluster. Removal planned 1.18.]",
        ),
        &[
            "result",
            "apiversion",
            "kind",
            "member_cluster",
            "cluster",
            "operationResult",
        ],
    )?;
    let delete = IntCounterVec::new(
        Opts::new(
            "delete_resource_from_cluster",
            "Number of deletion operations against a target member cluster. The 'result' label indicates outcome ('success' or 'error'). Labels 'apiversion', 'kind', and 'cluster' specify the resource's API version, type, and source cluster respectively. [Label deprecation: cluster deprecated in 1.16; use member_cluster. Removal planned 1.18.]",
        ),
        &["result", "apiversion", "kind", "member_cluster", "cluster"],
    )?;
    let registry = lariat::metrics::registry();
    for collector in [
        Box::new(sync_work.clone()) as Box<dyn prometheus::core::Collector>,
        Box::new(sync_workload.clone()),
        Box::new(create.clone()),
        Box::new(update.clone()),
        Box::new(delete.clone()),
    ] {
        if let Err(e) = registry.register(collector) {
            tracing::warn!(error = %e, "propagation metric not registered");
        }
    }
    Ok(PropagationMetrics {
        sync_work,
        sync_workload,
        create,
        update,
        delete,
    })
}

/// The propagation metrics, registered on first use. `None` only if a definition is invalid.
pub fn metrics() -> Option<&'static PropagationMetrics> {
    static METRICS: OnceLock<Option<PropagationMetrics>> = OnceLock::new();
    METRICS
        .get_or_init(|| match build() {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::error!(error = %e, "invalid propagation metric definition");
                None
            }
        })
        .as_ref()
}

/// Records one binding sync (Karmada's `ObserveSyncWorkLatency`).
pub fn observe_sync_work(ok: bool, started: Instant) {
    if let Some(m) = metrics() {
        m.sync_work
            .with_label_values(&[result_label(ok)])
            .observe(started.elapsed().as_secs_f64());
    }
}

/// Records one Work sync (Karmada's `ObserveSyncWorkloadLatency`).
pub fn observe_sync_workload(ok: bool, started: Instant) {
    if let Some(m) = metrics() {
        m.sync_workload
            .with_label_values(&[result_label(ok)])
            .observe(started.elapsed().as_secs_f64());
    }
}

/// Counts a create in a member (Karmada's `CountCreateResourceToCluster`).
pub fn count_create(ok: bool, api_version: &str, kind: &str, cluster: &str, recreate: bool) {
    if let Some(m) = metrics() {
        let recreate = if recreate { "true" } else { "false" };
        m.create
            .with_label_values(&[
                result_label(ok),
                api_version,
                kind,
                cluster,
                cluster,
                recreate,
            ])
            .inc();
    }
}

/// Counts an update in a member (Karmada's `CountUpdateResourceToCluster`).
pub fn count_update(ok: bool, api_version: &str, kind: &str, cluster: &str, operation: &str) {
    if let Some(m) = metrics() {
        m.update
            .with_label_values(&[
                result_label(ok),
                api_version,
                kind,
                cluster,
                cluster,
                operation,
            ])
            .inc();
    }
}

/// Counts a delete in a member (Karmada's `CountDeleteResourceFromCluster`).
pub fn count_delete(ok: bool, api_version: &str, kind: &str, cluster: &str) {
    if let Some(m) = metrics() {
        m.delete
            .with_label_values(&[result_label(ok), api_version, kind, cluster, cluster])
            .inc();
    }
}

/// A histogram family with Karmada's exponential buckets (`start`, doubling, `count` of them),
/// registered in the process registry on first use. A family that cannot be registered (its name
/// taken) is logged and still records, unexported; `None` only if the definition is invalid.
pub fn registered_histogram(
    name: &str,
    help: &str,
    (start, count): (f64, usize),
    labels: &[&str],
) -> Option<HistogramVec> {
    let built = prometheus::exponential_buckets(start, 2.0, count)
        .and_then(|b| HistogramVec::new(HistogramOpts::new(name, help).buckets(b), labels));
    match built {
        Ok(h) => {
            if let Err(e) = lariat::metrics::registry().register(Box::new(h.clone())) {
                tracing::warn!(metric = name, error = %e, "metric not registered");
            }
            Some(h)
        }
        Err(e) => {
            tracing::error!(metric = name, error = %e, "invalid metric definition");
            None
        }
    }
}

/// Observes the time since `started` in `histogram` under `result` (`success`/`error`, Karmada's
/// `GetResultByError`) followed by `labels`.
pub fn observe_result(
    histogram: Option<&HistogramVec>,
    ok: bool,
    labels: &[&str],
    started: Instant,
) {
    if let Some(h) = histogram {
        let mut values = Vec::with_capacity(labels.len() + 1);
        values.push(result_label(ok));
        values.extend_from_slice(labels);
        h.with_label_values(&values)
            .observe(started.elapsed().as_secs_f64());
    }
}
