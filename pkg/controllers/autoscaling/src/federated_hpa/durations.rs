//! Karmada's FederatedHPA latency metrics (`pkg/metrics/resource.go`), with its names, help texts,
//! labels and buckets: `federatedhpa_process_duration_seconds{result}` (one sync) and
//! `federatedhpa_pull_metrics_duration_seconds{result,metricType}` (one metric read over the
//! members; `metricType` is Karmada's `ResourceMetric`, `RawMetric` for Pods metrics, or
//! `ObjectMetric`).

use std::sync::OnceLock;
use std::time::Instant;

use karmada_controllers_common::metrics::{observe_result, registered_histogram};
use prometheus::HistogramVec;

/// `metricType` of a resource metric (metrics.k8s.io).
pub(super) const RESOURCE_METRIC: &str = "ResourceMetric";
/// `metricType` of a Pods metric (custom.metrics.k8s.io, per pod).
pub(super) const RAW_METRIC: &str = "RawMetric";
/// `metricType` of an Object metric (custom.metrics.k8s.io, one object).
pub(super) const OBJECT_METRIC: &str = "ObjectMetric";

fn process() -> Option<&'static HistogramVec> {
    static FAMILY: OnceLock<Option<HistogramVec>> = OnceLock::new();
    FAMILY
        .get_or_init(|| {
            registered_histogram(
                "federatedhpa_process_duration_seconds",
                "Duration in seconds to process a FederatedHPA. By the result, 'error' means a FederatedHPA failed to be processed. Otherwise 'success'.",
                (0.01, 12),
                &["result"],
            )
        })
        .as_ref()
}

fn pull() -> Option<&'static HistogramVec> {
    static FAMILY: OnceLock<Option<HistogramVec>> = OnceLock::new();
    FAMILY
        .get_or_init(|| {
            registered_histogram(
                "federatedhpa_pull_metrics_duration_seconds",
                "Duration in seconds taken by the FederatedHPA to pull metrics. By the result, 'error' means the FederatedHPA failed to pull the metrics. Otherwise 'success'.",
                (0.01, 12),
                &["result", "metricType"],
            )
        })
        .as_ref()
}

/// Records one FederatedHPA sync (Karmada's `ObserveProcessFederatedHPALatency`).
pub(super) fn observe_process(ok: bool, started: Instant) {
    observe_result(process(), ok, &[], started);
}

/// Records one metric read of `metric_type` (Karmada's `ObserveFederatedHPAPullMetricsLatency`).
pub(super) fn observe_pull(ok: bool, metric_type: &str, started: Instant) {
    observe_result(pull(), ok, &[metric_type], started);
}
