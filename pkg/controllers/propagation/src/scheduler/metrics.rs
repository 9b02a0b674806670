//! Karmada's scheduler metrics (`pkg/scheduler/metrics` at v1.16), with its names, help texts,
//! labels and buckets, registered in the process registry ([`lariat::metrics::registry`]):
//! `karmada_scheduler_schedule_attempts_total{result,schedule_type}`,
//! `karmada_scheduler_e2e_scheduling_duration_seconds{result,schedule_type}`,
//! `karmada_scheduler_scheduling_algorithm_duration_seconds{schedule_step}`,
//! `karmada_scheduler_queue_incoming_bindings_total{event}`,
//! `karmada_scheduler_framework_extension_point_duration_seconds{extension_point,result}` and
//! `karmada_scheduler_plugin_execution_duration_seconds{plugin,extension_point,result}`. The
//! algorithm reports its steps and plugin runs through [`Recorder`].

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use karmada_scheduler::observe::{Code, ExtensionPoint, Observer, Step};
use karmada_scheduler::plugins::Plugin;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};

/// `event` of a binding added to the queue for the first time (or at start).
pub(super) const BINDING_ADD: &str = "BindingAdd";
/// `event` of a binding whose generation changed.
pub(super) const BINDING_UPDATE: &str = "BindingUpdate";
/// `event` of a binding requeued after a failed attempt.
pub(super) const SCHEDULE_ATTEMPT_FAILURE: &str = "ScheduleAttemptFailure";
/// `event` of a binding requeued because a Cluster changed.
pub(super) const CLUSTER_CHANGED: &str = "ClusterChanged";

/// The scheduler's metric families.
pub(super) struct SchedulerMetrics {
    attempts: IntCounterVec,
    e2e: HistogramVec,
    algorithm: HistogramVec,
    incoming: IntCounterVec,
    extension_point: HistogramVec,
    plugin: HistogramVec,
}

/// Prometheus' `ExponentialBuckets(start, factor, count)`.
fn exponential(start: f64, factor: f64, count: i32) -> Vec<f64> {
    (0..count).map(|i| start * factor.powi(i)).collect()
}

fn build() -> prometheus::Result<SchedulerMetrics> {
    let attempts = IntCounterVec::new(
        Opts::new(
            "karmada_scheduler_schedule_attempts_total",
            "Number of attempts to schedule a ResourceBinding or ClusterResourceBinding",
        ),
        &["result", "schedule_type"],
    )?;
    let e2e = HistogramVec::new(
        HistogramOpts::new(
            "karmada_scheduler_e2e_scheduling_duration_seconds",
            "E2e scheduling latency in seconds",
        )
        .buckets(exponential(0.001, 2.0, 15)),
        &["result", "schedule_type"],
    )?;
    let algorithm = HistogramVec::new(
        HistogramOpts::new(
            "karmada_scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds(exclude scale scheduler)",
        )
        .buckets(exponential(0.001, 2.0, 15)),
        &["schedule_step"],
    )?;
    let incoming = IntCounterVec::new(
        Opts::new(
            "karmada_scheduler_queue_incoming_bindings_total",
            "Number of ResourceBinding and ClusterResourceBinding objects added to scheduling queues by event type.",
        ),
        &["event"],
    )?;
    let extension_point = HistogramVec::new(
        HistogramOpts::new(
            "karmada_scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
        )
        .buckets(exponential(0.0001, 2.0, 12)),
        &["extension_point", "result"],
    )?;
    let plugin = HistogramVec::new(
        HistogramOpts::new(
            "karmada_scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
        )
        .buckets(exponential(0.00001, 1.5, 20)),
        &["plugin", "extension_point", "result"],
    )?;
    let registry = lariat::metrics::registry();
    for collector in [
        Box::new(attempts.clone()) as Box<dyn prometheus::core::Collector>,
        Box::new(e2e.clone()),
        Box::new(algorithm.clone()),
        Box::new(incoming.clone()),
        Box::new(extension_point.clone()),
        Box::new(plugin.clone()),
    ] {
        if let Err(e) = registry.register(collector) {
            tracing::warn!(error = %e, "scheduler metric not registered");
        }
    }
    Ok(SchedulerMetrics {
        attempts,
        e2e,
        algorithm,
        incoming,
        extension_point,
        plugin,
    })
}

/// The scheduler's metrics, registered on first use. `None` only if a definition is invalid.
fn metrics() -> Option<&'static SchedulerMetrics> {
    static METRICS: OnceLock<Option<SchedulerMetrics>> = OnceLock::new();
    METRICS
        .get_or_init(|| match build() {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::error!(error = %e, "invalid scheduler metric definition");
                None
            }
        })
        .as_ref()
}

/// Registers the families, so that they are served before the first binding is scheduled.
pub(super) fn register() {
    let _ = metrics();
}

/// Records one scheduling attempt (Karmada's `BindingSchedule`): `scheduled` unless it ended in an
/// error the binding is retried for.
pub(super) fn observe_attempt(schedule_type: &str, ok: bool, started: Instant) {
    if let Some(m) = metrics() {
        let result = if ok { "scheduled" } else { "error" };
        m.e2e
            .with_label_values(&[result, schedule_type])
            .observe(started.elapsed().as_secs_f64());
        m.attempts.with_label_values(&[result, schedule_type]).inc();
    }
}

/// Counts a binding handed to the scheduler (Karmada's `CountSchedulerBindings`).
pub(super) fn count_incoming(event: &str) {
    if let Some(m) = metrics() {
        m.incoming.with_label_values(&[event]).inc();
    }
}

/// Records what the algorithm reports.
pub(super) struct Recorder;

impl Observer for Recorder {
    fn step(&mut self, step: Step, took: Duration) {
        if let Some(m) = metrics() {
            m.algorithm
                .with_label_values(&[step.as_str()])
                .observe(took.as_secs_f64());
        }
    }

    fn extension_point(&mut self, point: ExtensionPoint, code: Code, took: Duration) {
        if let Some(m) = metrics() {
            m.extension_point
                .with_label_values(&[point.as_str(), code.as_str()])
                .observe(took.as_secs_f64());
        }
    }

    fn plugin(&mut self, plugin: Plugin, point: ExtensionPoint, code: Code, took: Duration) {
        if let Some(m) = metrics() {
            m.plugin
                .with_label_values(&[plugin.name(), point.as_str(), code.as_str()])
                .observe(took.as_secs_f64());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_karmadas() {
        let b = exponential(0.001, 2.0, 15);
        assert_eq!(b.len(), 15);
        assert!((b[14] - 16.384).abs() < 1e-9);
        let p = exponential(0.00001, 1.5, 20);
        assert!((p[1] - 0.000_015).abs() < 1e-12);
    }
}
