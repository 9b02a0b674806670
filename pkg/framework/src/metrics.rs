//! The process-wide Prometheus registry. Every metric the framework and the controllers define is
//! registered here, and the binary serves exactly this registry on `/metrics`.
//!
//! Framework metrics use controller-runtime's names, labels and buckets so existing dashboards keep
//! working, with one extra `cluster` label (empty for the control-plane cluster, which Prometheus
//! treats as an absent label). Every series of a member cluster is created through that cluster's
//! [`ClusterMetrics`], which remembers it and deletes it when the cluster is removed.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry,
};

/// The one registry the binary exposes.
pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::new)
}

/// controller-runtime's `controller_runtime_reconcile_time_seconds` buckets.
pub const RECONCILE_TIME_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// controller-runtime's workqueue latency buckets: `ExponentialBuckets(10e-9, 10, 12)`.
pub fn workqueue_buckets() -> Vec<f64> {
    (0..12).map(|i| 10e-9 * 10f64.powi(i)).collect()
}

/// Reconcile result label values, as in controller-runtime.
pub(crate) const RESULT_LABELS: [&str; 4] = ["error", "requeue_after", "requeue", "success"];

/// All metric families of the framework.
pub(crate) struct Families {
    pub reconcile_total: IntCounterVec,
    pub reconcile_errors: IntCounterVec,
    pub terminal_errors: IntCounterVec,
    pub reconcile_time: HistogramVec,
    pub max_concurrent: IntGaugeVec,
    pub active_workers: IntGaugeVec,
    pub wq_depth: IntGaugeVec,
    pub wq_adds: IntCounterVec,
    pub wq_queue_duration: HistogramVec,
    pub wq_work_duration: HistogramVec,
    pub wq_unfinished: GaugeVec,
    pub wq_longest: GaugeVec,
    pub wq_retries: IntCounterVec,
    pub rest_requests: IntCounterVec,
    pub cached_objects: IntGaugeVec,
}

/// Builds a family; the names and label sets are compile-time constants, so failure is a bug.
fn must<T>(r: prometheus::Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("invalid metric definition: {e}"),
    }
}

impl Families {
    fn new() -> Self {
        let wq = workqueue_buckets();
        let c = "cluster";
        Self {
            reconcile_total: must(IntCounterVec::new(
                Opts::new(
                    "controller_runtime_reconcile_total",
                    "Total number of reconciliations per controller",
                ),
                &[c, "controller", "result"],
            )),
            reconcile_errors: must(IntCounterVec::new(
                Opts::new(
                    "controller_runtime_reconcile_errors_total",
                    "Total number of reconciliation errors per controller",
                ),
                &[c, "controller"],
            )),
            terminal_errors: must(IntCounterVec::new(
                Opts::new(
                    "controller_runtime_terminal_reconcile_errors_total",
                    "Total number of terminal reconciliation errors per controller",
                ),
                &[c, "controller"],
            )),
            reconcile_time: must(HistogramVec::new(
                HistogramOpts::new(
                    "controller_runtime_reconcile_time_seconds",
                    "Length of time per reconciliation per controller",
                )
                .buckets(RECONCILE_TIME_BUCKETS.to_vec()),
                &[c, "controller"],
            )),
            max_concurrent: must(IntGaugeVec::new(
                Opts::new(
                    "controller_runtime_max_concurrent_reconciles",
                    "Maximum number of concurrent reconciles per controller",
                ),
                &[c, "controller"],
            )),
            active_workers: must(IntGaugeVec::new(
                Opts::new(
                    "controller_runtime_active_workers",
                    "Number of currently used workers per controller",
                ),
                &[c, "controller"],
            )),
            wq_depth: must(IntGaugeVec::new(
                Opts::new(
                    "workqueue_depth",
                    "Current depth of workqueue by workqueue and priority",
                ),
                &[c, "name", "controller", "priority"],
            )),
            wq_adds: must(IntCounterVec::new(
                Opts::new(
                    "workqueue_adds_total",
                    "Total number of adds handled by workqueue",
                ),
                &[c, "name", "controller"],
            )),
            wq_queue_duration: must(HistogramVec::new(
                HistogramOpts::new(
                    "workqueue_queue_duration_seconds",
                    "How long in seconds an item stays in workqueue before being requested",
                )
                .buckets(wq.clone()),
                &[c, "name", "controller"],
            )),
            wq_work_duration: must(HistogramVec::new(
                HistogramOpts::new(
                    "workqueue_work_duration_seconds",
                    "How long in seconds processing an item from workqueue takes.",
                )
                .buckets(wq),
                &[c, "name", "controller"],
            )),
            wq_unfinished: must(GaugeVec::new(
                Opts::new(
                    "workqueue_unfinished_work_seconds",
                    "How many seconds of work has been done that is in progress and hasn't been observed by \
                     work_duration. Large values indicate stuck threads. One can deduce the number of stuck \
                     threads by observing the rate at which this increases.",
                ),
                &[c, "name", "controller"],
            )),
            wq_longest: must(GaugeVec::new(
                Opts::new(
                    "workqueue_longest_running_processor_seconds",
                    "How many seconds has the longest running processor for workqueue been running.",
                ),
                &[c, "name", "controller"],
            )),
            wq_retries: must(IntCounterVec::new(
                Opts::new(
                    "workqueue_retries_total",
                    "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, \
                     explicit RequeueAfter or AddAfter calls)",
                ),
                &[c, "name", "controller"],
            )),
            rest_requests: must(IntCounterVec::new(
                Opts::new(
                    "rest_client_requests_total",
                    "Number of HTTP requests, partitioned by status code, method, and host.",
                ),
                &[c, "code", "method", "host"],
            )),
            cached_objects: must(IntGaugeVec::new(
                Opts::new(
                    "lariat_cached_objects",
                    "Number of objects held in the shared caches per cluster and kind",
                ),
                &[c, "group", "version", "kind"],
            )),
        }
    }

    fn register(&self, r: &Registry) {
        let collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(self.reconcile_total.clone()),
            Box::new(self.reconcile_errors.clone()),
            Box::new(self.terminal_errors.clone()),
            Box::new(self.reconcile_time.clone()),
            Box::new(self.max_concurrent.clone()),
            Box::new(self.active_workers.clone()),
            Box::new(self.wq_depth.clone()),
            Box::new(self.wq_adds.clone()),
            Box::new(self.wq_queue_duration.clone()),
            Box::new(self.wq_work_duration.clone()),
            Box::new(self.wq_unfinished.clone()),
            Box::new(self.wq_longest.clone()),
            Box::new(self.wq_retries.clone()),
            Box::new(self.rest_requests.clone()),
            Box::new(self.cached_objects.clone()),
        ];
        for c in collectors {
            if let Err(e) = r.register(c) {
                tracing::error!(error = %e, "registering framework metric failed");
            }
        }
    }
}

/// The framework's families, registered in [`registry()`] on first use.
pub(crate) fn families() -> &'static Families {
    static FAMILIES: OnceLock<Families> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        let f = Families::new();
        f.register(registry());
        f
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Family {
    ReconcileTotal,
    ReconcileErrors,
    TerminalErrors,
    ReconcileTime,
    MaxConcurrent,
    ActiveWorkers,
    WqDepth,
    WqAdds,
    WqQueueDuration,
    WqWorkDuration,
    WqUnfinished,
    WqLongest,
    WqRetries,
    RestRequests,
    CachedObjects,
}

impl Family {
    fn remove(self, f: &Families, labels: &[String]) {
        let l: Vec<&str> = labels.iter().map(String::as_str).collect();
        // A series that was never touched is simply absent: ignore "not found".
        let _ = match self {
            Family::ReconcileTotal => f.reconcile_total.remove_label_values(&l),
            Family::ReconcileErrors => f.reconcile_errors.remove_label_values(&l),
            Family::TerminalErrors => f.terminal_errors.remove_label_values(&l),
            Family::ReconcileTime => f.reconcile_time.remove_label_values(&l),
            Family::MaxConcurrent => f.max_concurrent.remove_label_values(&l),
            Family::ActiveWorkers => f.active_workers.remove_label_values(&l),
            Family::WqDepth => f.wq_depth.remove_label_values(&l),
            Family::WqAdds => f.wq_adds.remove_label_values(&l),
            Family::WqQueueDuration => f.wq_queue_duration.remove_label_values(&l),
            Family::WqWorkDuration => f.wq_work_duration.remove_label_values(&l),
            Family::WqUnfinished => f.wq_unfinished.remove_label_values(&l),
            Family::WqLongest => f.wq_longest.remove_label_values(&l),
            Family::WqRetries => f.wq_retries.remove_label_values(&l),
            Family::RestRequests => f.rest_requests.remove_label_values(&l),
            Family::CachedObjects => f.cached_objects.remove_label_values(&l),
        };
    }
}

/// The metric series of one cluster. Every series created through it is remembered so that
/// [`remove_all`](Self::remove_all) can delete them when the cluster is detached.
#[derive(Debug)]
pub struct ClusterMetrics {
    cluster: String,
    series: Mutex<HashSet<(Family, Vec<String>)>>,
}

impl ClusterMetrics {
    /// Creates the series tracker of a cluster. Use an empty name for the control-plane cluster.
    pub fn new(cluster: impl Into<String>) -> Arc<Self> {
        Arc::new(Self {
            cluster: cluster.into(),
            series: Mutex::new(HashSet::new()),
        })
    }

    /// The value of the `cluster` label.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    fn labels(&self, rest: &[&str]) -> Vec<String> {
        let mut v = Vec::with_capacity(rest.len() + 1);
        v.push(self.cluster.clone());
        v.extend(rest.iter().map(|s| s.to_string()));
        v
    }

    fn track(&self, family: Family, labels: &[String]) {
        self.series.lock().insert((family, labels.to_vec()));
    }

    fn refs(labels: &[String]) -> Vec<&str> {
        labels.iter().map(String::as_str).collect()
    }

    /// Work-queue series for the queue called `name`.
    pub fn queue(&self, name: &str) -> QueueMetrics {
        let f = families();
        let l = self.labels(&[name, name]);
        let mut depth_l = l.clone();
        depth_l.push(String::new());
        for fam in [
            Family::WqAdds,
            Family::WqQueueDuration,
            Family::WqWorkDuration,
            Family::WqUnfinished,
            Family::WqLongest,
            Family::WqRetries,
        ] {
            self.track(fam, &l);
        }
        self.track(Family::WqDepth, &depth_l);
        let r = Self::refs(&l);
        QueueMetrics {
            depth: f.wq_depth.with_label_values(&Self::refs(&depth_l)),
            adds: f.wq_adds.with_label_values(&r),
            queue_duration: f.wq_queue_duration.with_label_values(&r),
            work_duration: f.wq_work_duration.with_label_values(&r),
            unfinished: f.wq_unfinished.with_label_values(&r),
            longest: f.wq_longest.with_label_values(&r),
            retries: f.wq_retries.with_label_values(&r),
        }
    }

    /// Reconcile series for the controller called `name`, pre-initialised like controller-runtime's.
    pub fn controller(&self, name: &str) -> ReconcileMetrics {
        let f = families();
        let l = self.labels(&[name]);
        let r = Self::refs(&l);
        let mut total = Vec::with_capacity(RESULT_LABELS.len());
        for result in RESULT_LABELS {
            let tl = self.labels(&[name, result]);
            self.track(Family::ReconcileTotal, &tl);
            let c = f.reconcile_total.with_label_values(&Self::refs(&tl));
            c.inc_by(0);
            total.push(c);
        }
        for fam in [
            Family::ReconcileErrors,
            Family::TerminalErrors,
            Family::ReconcileTime,
            Family::MaxConcurrent,
            Family::ActiveWorkers,
        ] {
            self.track(fam, &l);
        }
        let m = ReconcileMetrics {
            total_error: total[0].clone(),
            total_requeue_after: total[1].clone(),
            total_success: total[3].clone(),
            errors: f.reconcile_errors.with_label_values(&r),
            terminal_errors: f.terminal_errors.with_label_values(&r),
            time: f.reconcile_time.with_label_values(&r),
            max_concurrent: f.max_concurrent.with_label_values(&r),
            active_workers: f.active_workers.with_label_values(&r),
        };
        m.errors.inc_by(0);
        m.terminal_errors.inc_by(0);
        m
    }

    /// The `rest_client_requests_total` counter of one (code, method, host).
    pub fn rest_request(&self, code: &str, method: &str, host: &str) -> IntCounter {
        let l = self.labels(&[code, method, host]);
        self.track(Family::RestRequests, &l);
        families().rest_requests.with_label_values(&Self::refs(&l))
    }

    /// The cached-objects gauge of one kind.
    pub fn cached_objects(&self, group: &str, version: &str, kind: &str) -> IntGauge {
        let l = self.labels(&[group, version, kind]);
        self.track(Family::CachedObjects, &l);
        families().cached_objects.with_label_values(&Self::refs(&l))
    }

    /// Deletes every series this cluster created.
    pub fn remove_all(&self) {
        let series: Vec<_> = self.series.lock().drain().collect();
        let f = families();
        for (fam, labels) in series {
            fam.remove(f, &labels);
        }
    }

    /// Number of series currently tracked (for tests).
    pub fn tracked_series(&self) -> usize {
        self.series.lock().len()
    }
}

/// Handles on one work queue's series.
#[derive(Clone, Debug)]
pub struct QueueMetrics {
    pub(crate) depth: IntGauge,
    pub(crate) adds: IntCounter,
    pub(crate) queue_duration: Histogram,
    pub(crate) work_duration: Histogram,
    pub(crate) unfinished: Gauge,
    pub(crate) longest: Gauge,
    pub(crate) retries: IntCounter,
}

impl QueueMetrics {
    /// Series that belong to no registry: for queues used outside a controller (tests, benchmarks).
    pub fn unregistered() -> Self {
        let h = || {
            must(Histogram::with_opts(
                HistogramOpts::new("h", "h").buckets(workqueue_buckets()),
            ))
        };
        Self {
            depth: must(IntGauge::new("d", "d")),
            adds: must(IntCounter::new("a", "a")),
            queue_duration: h(),
            work_duration: h(),
            unfinished: must(Gauge::new("u", "u")),
            longest: must(Gauge::new("l", "l")),
            retries: must(IntCounter::new("r", "r")),
        }
    }

    /// Total adds so far.
    pub fn adds(&self) -> u64 {
        self.adds.get()
    }

    /// Total delayed (retried) adds so far.
    pub fn retries(&self) -> u64 {
        self.retries.get()
    }

    /// Current depth.
    pub fn depth(&self) -> i64 {
        self.depth.get()
    }
}

/// Handles on one controller's reconcile series.
#[derive(Clone, Debug)]
pub struct ReconcileMetrics {
    pub(crate) total_error: IntCounter,
    pub(crate) total_requeue_after: IntCounter,
    pub(crate) total_success: IntCounter,
    pub(crate) errors: IntCounter,
    pub(crate) terminal_errors: IntCounter,
    pub(crate) time: Histogram,
    pub(crate) max_concurrent: IntGauge,
    pub(crate) active_workers: IntGauge,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gathered_names_with(cluster: &str) -> Vec<String> {
        registry()
            .gather()
            .into_iter()
            .filter(|mf| {
                mf.get_metric().iter().any(|m| {
                    m.get_label()
                        .iter()
                        .any(|l| l.name() == "cluster" && l.value() == cluster)
                })
            })
            .map(|mf| mf.name().to_string())
            .collect()
    }

    #[test]
    fn cluster_series_are_created_and_removed() {
        let m = ClusterMetrics::new("metrics-unit-test");
        let q = m.queue("ConfigMap");
        q.adds.inc();
        let c = m.controller("ConfigMap");
        c.total_success.inc();
        m.rest_request("200", "GET", "127.0.0.1:6443").inc();
        m.cached_objects("", "v1", "ConfigMap").set(3);
        let names = gathered_names_with("metrics-unit-test");
        for n in [
            "controller_runtime_reconcile_total",
            "controller_runtime_reconcile_errors_total",
            "controller_runtime_reconcile_time_seconds",
            "controller_runtime_max_concurrent_reconciles",
            "controller_runtime_active_workers",
            "workqueue_depth",
            "workqueue_adds_total",
            "workqueue_queue_duration_seconds",
            "workqueue_work_duration_seconds",
            "workqueue_retries_total",
            "workqueue_unfinished_work_seconds",
            "workqueue_longest_running_processor_seconds",
            "rest_client_requests_total",
            "lariat_cached_objects",
        ] {
            assert!(names.iter().any(|x| x == n), "missing {n} in {names:?}");
        }
        m.remove_all();
        assert!(gathered_names_with("metrics-unit-test").is_empty());
        assert_eq!(m.tracked_series(), 0);
    }

    #[test]
    fn buckets_match_controller_runtime() {
        let b = workqueue_buckets();
        assert_eq!(b.len(), 12);
        assert!((b[0] - 1e-8).abs() < 1e-20);
        assert!((b[11] - 1e3).abs() < 1e-6);
        assert_eq!(RECONCILE_TIME_BUCKETS.len(), 40);
    }
}
