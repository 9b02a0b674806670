//! The detector's metrics, with Karmada's names, help texts and buckets, registered in the process
//! registry ([`lariat::metrics::registry`]).

use std::sync::OnceLock;
use std::time::Instant;

use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounterVec, Opts};

/// The detector's metric families.
pub struct DetectorMetrics {
    /// `resource_match_policy_duration_seconds`.
    pub match_policy: Histogram,
    /// `resource_apply_policy_duration_seconds{result}`.
    pub apply_policy: HistogramVec,
    /// `policy_apply_attempts_total{result}`.
    pub apply_attempts: IntCounterVec,
    /// `policy_preemption_total{result}`.
    pub preemption: IntCounterVec,
}

/// Karmada's `ExponentialBuckets(0.001, 2, 12)`.
fn buckets() -> Vec<f64> {
    (0..12).map(|i| 0.001 * 2f64.powi(i)).collect()
}

/// `success` or `error`, Karmada's `GetResultByError`.
pub fn result_label<T, E>(r: &Result<T, E>) -> &'static str {
    if r.is_ok() { "success" } else { "error" }
}

fn build() -> prometheus::Result<DetectorMetrics> {
    let match_policy = Histogram::with_opts(
        HistogramOpts::new(
            "resource_match_policy_duration_seconds",
            "Duration in seconds to find a matched PropagationPolicy or ClusterPropagationPolicy for the resource templates.",
        )
        .buckets(buckets()),
    )?;
    let apply_policy = HistogramVec::new(
        HistogramOpts::new(
            "resource_apply_policy_duration_seconds",
            "Duration in seconds to apply a PropagationPolicy or ClusterPropagationPolicy for the resource templates. By the result, 'error' means a resource template failed to apply the policy. Otherwise 'success'.",
        )
        .buckets(buckets()),
        &["result"],
    )?;
    let apply_attempts = IntCounterVec::new(
        Opts::new(
            "policy_apply_attempts_total",
            "Number of attempts to be applied for a PropagationPolicy or ClusterPropagationPolicy. By the result, 'error' means a resource template failed to apply the policy. Otherwise 'success'.",
        ),
        &["result"],
    )?;
    let preemption = IntCounterVec::new(
        Opts::new(
            "policy_preemption_total",
            "Number of preemption for the resource template. By the result, 'error' means a resource template failed to be preempted by other propagation policies. Otherwise 'success'.",
        ),
        &["result"],
    )?;
    let registry = lariat::metrics::registry();
    for collector in [
        Box::new(match_policy.clone()) as Box<dyn prometheus::core::Collector>,
        Box::new(apply_policy.clone()),
        Box::new(apply_attempts.clone()),
        Box::new(preemption.clone()),
    ] {
        if let Err(e) = registry.register(collector) {
            tracing::warn!(error = %e, "detector metric not registered");
        }
    }
    Ok(DetectorMetrics {
        match_policy,
        apply_policy,
        apply_attempts,
        preemption,
    })
}

/// The detector's metrics, registered on first use. `None` only if a definition is invalid.
pub fn metrics() -> Option<&'static DetectorMetrics> {
    static METRICS: OnceLock<Option<DetectorMetrics>> = OnceLock::new();
    METRICS
        .get_or_init(|| match build() {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::error!(error = %e, "invalid detector metric definition");
                None
            }
        })
        .as_ref()
}

/// Records one policy application (Karmada's `ObserveApplyPolicyAttemptAndLatency`).
pub fn observe_apply<T, E>(result: &Result<T, E>, started: Instant) {
    if let Some(m) = metrics() {
        let label = result_label(result);
        m.apply_policy
            .with_label_values(&[label])
            .observe(started.elapsed().as_secs_f64());
        m.apply_attempts.with_label_values(&[label]).inc();
    }
}

/// Records the time it took to find a matching policy.
pub fn observe_match(started: Instant) {
    if let Some(m) = metrics() {
        m.match_policy.observe(started.elapsed().as_secs_f64());
    }
}

/// Counts one preemption attempt.
pub fn count_preemption<T, E>(result: &Result<T, E>) {
    if let Some(m) = metrics() {
        m.preemption
            .with_label_values(&[result_label(result)])
            .inc();
    }
}
