//! Karmada's CronFederatedHPA latency metrics (`pkg/metrics/resource.go`), with its names, help
//! texts, labels and buckets: `cronfederatedhpa_process_duration_seconds{result}` (one reconcile of
//! a changed CronFederatedHPA) and `cronfederatedhpa_rule_process_duration_seconds{result}` (one
//! rule execution: the scale and its history entry).

use std::sync::OnceLock;
use std::time::Instant;

use karmada_controllers_common::metrics::{observe_result, registered_histogram};
use prometheus::HistogramVec;

fn process() -> Option<&'static HistogramVec> {
    static FAMILY: OnceLock<Option<HistogramVec>> = OnceLock::new();
    FAMILY
        .get_or_init(|| {
            registered_histogram(
                "cronfederatedhpa_process_duration_seconds",
                "Duration in seconds to process a CronFederatedHPA. By the result, 'error' means a CronFederatedHPA failed to be processed. Otherwise 'success'.",
                (0.001, 12),
                &["result"],
            )
        })
        .as_ref()
}

fn rule() -> Option<&'static HistogramVec> {
    static FAMILY: OnceLock<Option<HistogramVec>> = OnceLock::new();
    FAMILY
        .get_or_init(|| {
            registered_histogram(
                "cronfederatedhpa_rule_process_duration_seconds",
                "Duration in seconds to process a CronFederatedHPA rule. By the result, 'error' means a CronFederatedHPA rule failed to be processed. Otherwise 'success'.",
                (0.001, 12),
                &["result"],
            )
        })
        .as_ref()
}

/// Records one reconcile (Karmada's `ObserveProcessCronFederatedHPALatency`).
pub(super) fn observe_process(ok: bool, started: Instant) {
    observe_result(process(), ok, &[], started);
}

/// Records one rule execution (Karmada's `ObserveProcessCronFederatedHPARuleLatency`).
pub(super) fn observe_rule(ok: bool, started: Instant) {
    observe_result(rule(), ok, &[], started);
}
