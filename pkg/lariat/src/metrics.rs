//! The process-wide Prometheus registry. Every metric the framework and the controllers define is
//! registered here by default, and the binary serves exactly this registry on `/metrics`. A caller
//! can keep the framework's series in a registry of its own instead ([`FrameworkMetrics::register`],
//! passed in [`crate::ClusterOptions::metrics`]).
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
    pub reconcile_panics: IntCounterVec,
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

/// A metric could not be defined or registered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MetricsError {
    /// Prometheus rejected the definition (name, help or labels).
    #[error("defining metric {name}: {reason}")]
    Define {
        /// The metric name.
        name: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The registry refused the metric, e.g. because one with the same name is registered.
    #[error("registering metric {name}: {reason}")]
    Register {
        /// The metric name.
        name: String,
        /// Why it was refused.
        reason: String,
    },
}

/// Builds a family, naming it in the error.
fn define<T>(name: &str, r: prometheus::Result<T>) -> Result<T, MetricsError> {
    r.map_err(|e| MetricsError::Define {
        name: name.to_string(),
        reason: e.to_string(),
    })
}

/// A labelled counter family.
fn counter_vec(name: &str, help: &str, labels: &[&str]) -> Result<IntCounterVec, MetricsError> {
    define(name, IntCounterVec::new(Opts::new(name, help), labels))
}

/// A labelled integer gauge family.
fn int_gauge_vec(name: &str, help: &str, labels: &[&str]) -> Result<IntGaugeVec, MetricsError> {
    define(name, IntGaugeVec::new(Opts::new(name, help), labels))
}

/// A labelled float gauge family.
fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> Result<GaugeVec, MetricsError> {
    define(name, GaugeVec::new(Opts::new(name, help), labels))
}

/// A labelled histogram family with `buckets`.
fn histogram_vec(
    name: &str,
    help: &str,
    buckets: Vec<f64>,
    labels: &[&str],
) -> Result<HistogramVec, MetricsError> {
    define(
        name,
        HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels),
    )
}

impl Families {
    fn new() -> Result<Self, MetricsError> {
        let wq = workqueue_buckets();
        let c = "cluster";
        let queue = [c, "name", "controller"];
        Ok(Self {
            reconcile_total: counter_vec(
                "controller_runtime_reconcile_total",
                "Total number of reconciliations per controller",
                &[c, "controller", "result"],
            )?,
            reconcile_errors: counter_vec(
                "controller_runtime_reconcile_errors_total",
                "Total number of reconciliation errors per controller",
                &[c, "controller"],
            )?,
            terminal_errors: counter_vec(
                "controller_runtime_terminal_reconcile_errors_total",
                "Total number of terminal reconciliation errors per controller",
                &[c, "controller"],
            )?,
            reconcile_panics: counter_vec(
                "controller_runtime_reconcile_panics_total",
                "Total number of reconciliation panics per controller",
                &[c, "controller"],
            )?,
            reconcile_time: histogram_vec(
                "controller_runtime_reconcile_time_seconds",
                "Length of time per reconciliation per controller",
                RECONCILE_TIME_BUCKETS.to_vec(),
                &[c, "controller"],
            )?,
            max_concurrent: int_gauge_vec(
                "controller_runtime_max_concurrent_reconciles",
                "Maximum number of concurrent reconciles per controller",
                &[c, "controller"],
            )?,
            active_workers: int_gauge_vec(
                "controller_runtime_active_workers",
                "Number of currently used workers per controller",
                &[c, "controller"],
            )?,
            wq_depth: int_gauge_vec(
                "workqueue_depth",
                "Current depth of workqueue by workqueue and priority",
                &[c, "name", "controller", "priority"],
            )?,
            wq_adds: counter_vec(
                "workqueue_adds_total",
                "Total number of adds handled by workqueue",
                &queue,
            )?,
            wq_queue_duration: histogram_vec(
                "workqueue_queue_duration_seconds",
                "How long in seconds an item stays in workqueue before being requested",
                wq.clone(),
                &queue,
            )?,
            wq_work_duration: histogram_vec(
                "workqueue_work_duration_seconds",
                "How long in seconds processing an item from workqueue takes.",
                wq,
                &queue,
            )?,
            wq_unfinished: gauge_vec(
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has been done that is in progress and hasn't been observed by \
                 work_duration. Large values indicate stuck threads. One can deduce the number of stuck \
                 threads by observing the rate at which this increases.",
                &queue,
            )?,
            wq_longest: gauge_vec(
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running.",
                &queue,
            )?,
            wq_retries: counter_vec(
                "workqueue_retries_total",
                "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, \
                 explicit RequeueAfter or AddAfter calls)",
                &queue,
            )?,
            rest_requests: counter_vec(
                "rest_client_requests_total",
                "Number of HTTP requests, partitioned by status code, method, and host.",
                &[c, "code", "method", "host"],
            )?,
            cached_objects: int_gauge_vec(
                "lariat_cached_objects",
                "Number of objects held in the shared caches per cluster and kind",
                &[c, "group", "version", "kind"],
            )?,
        })
    }

    fn register(&self, r: &Registry) -> Result<(), MetricsError> {
        let collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(self.reconcile_total.clone()),
            Box::new(self.reconcile_errors.clone()),
            Box::new(self.terminal_errors.clone()),
            Box::new(self.reconcile_panics.clone()),
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
            let name = c
                .desc()
                .first()
                .map(|d| d.fq_name.clone())
                .unwrap_or_default();
            r.register(c).map_err(|e| MetricsError::Register {
                name,
                reason: e.to_string(),
            })?;
        }
        Ok(())
    }
}

/// The framework's metric families (reconciles, work queues, REST requests, cached objects),
/// registered in one registry. Every cluster's series are created in them. Cheap to clone.
#[derive(Clone)]
pub struct FrameworkMetrics {
    families: Arc<Families>,
}

impl FrameworkMetrics {
    /// Defines the families and registers them in `registry`: for a caller that serves or inspects
    /// a registry of its own. Fails if the registry already holds a metric of the same name.
    pub fn register(registry: &Registry) -> Result<Self, MetricsError> {
        let families = Families::new()?;
        families.register(registry)?;
        Ok(Self {
            families: Arc::new(families),
        })
    }

    /// The families in the process registry ([`registry()`]), registered on first use; clusters
    /// whose options name no registry use these.
    pub fn global() -> Result<Self, MetricsError> {
        static GLOBAL: OnceLock<Result<FrameworkMetrics, MetricsError>> = OnceLock::new();
        GLOBAL.get_or_init(|| Self::register(registry())).clone()
    }
}

impl std::fmt::Debug for FrameworkMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameworkMetrics").finish_non_exhaustive()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Family {
    ReconcileTotal,
    ReconcileErrors,
    TerminalErrors,
    ReconcilePanics,
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
            Family::ReconcilePanics => f.reconcile_panics.remove_label_values(&l),
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
    families: FrameworkMetrics,
    series: Mutex<HashSet<(Family, Vec<String>)>>,
}

impl ClusterMetrics {
    /// Creates the series tracker of a cluster, whose series live in `families`. Use an empty name
    /// for the control-plane cluster.
    pub fn new(cluster: impl Into<String>, families: FrameworkMetrics) -> Arc<Self> {
        Arc::new(Self {
            cluster: cluster.into(),
            families,
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
        v.extend(rest.iter().map(ToString::to_string));
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
        let f = &*self.families.families;
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
        let f = &*self.families.families;
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
            Family::ReconcilePanics,
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
            panics: f.reconcile_panics.with_label_values(&r),
            time: LazyHistogram::new(f.reconcile_time.clone(), l.clone()),
            max_concurrent: f.max_concurrent.with_label_values(&r),
            active_workers: f.active_workers.with_label_values(&r),
        };
        m.errors.inc_by(0);
        m.terminal_errors.inc_by(0);
        m.panics.inc_by(0);
        m
    }

    /// The `rest_client_requests_total` counter of one (code, method, host).
    pub fn rest_request(&self, code: &str, method: &str, host: &str) -> IntCounter {
        let l = self.labels(&[code, method, host]);
        self.track(Family::RestRequests, &l);
        self.families
            .families
            .rest_requests
            .with_label_values(&Self::refs(&l))
    }

    /// The cached-objects gauge of one kind.
    pub fn cached_objects(&self, group: &str, version: &str, kind: &str) -> IntGauge {
        let l = self.labels(&[group, version, kind]);
        self.track(Family::CachedObjects, &l);
        self.families
            .families
            .cached_objects
            .with_label_values(&Self::refs(&l))
    }

    /// Deletes every series this cluster created.
    pub fn remove_all(&self) {
        let series: Vec<_> = self.series.lock().drain().collect();
        let f = &*self.families.families;
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
    pub fn unregistered() -> Result<Self, MetricsError> {
        let h = |name: &str| {
            define(
                name,
                Histogram::with_opts(HistogramOpts::new(name, name).buckets(workqueue_buckets())),
            )
        };
        Ok(Self {
            depth: define("d", IntGauge::new("d", "d"))?,
            adds: define("a", IntCounter::new("a", "a"))?,
            queue_duration: h("q")?,
            work_duration: h("w")?,
            unfinished: define("u", Gauge::new("u", "u"))?,
            longest: define("l", Gauge::new("l", "l"))?,
            retries: define("r", IntCounter::new("r", "r"))?,
        })
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

/// A histogram series created on its first observation: controller-runtime creates a controller's
/// `controller_runtime_reconcile_time_seconds` series on its first reconcile, not at start (its
/// counters and gauges are), so a controller that never reconciled exports no 40-bucket histogram.
/// Clones share the series.
#[derive(Clone, Debug)]
pub(crate) struct LazyHistogram {
    vec: HistogramVec,
    labels: Arc<[String]>,
    series: Arc<OnceLock<Histogram>>,
}

impl LazyHistogram {
    fn new(vec: HistogramVec, labels: Vec<String>) -> Self {
        LazyHistogram {
            vec,
            labels: labels.into(),
            series: Arc::default(),
        }
    }

    /// Observes `v`, creating the series first if needed.
    pub(crate) fn observe(&self, v: f64) {
        self.series
            .get_or_init(|| {
                self.vec
                    .with_label_values(&ClusterMetrics::refs(&self.labels))
            })
            .observe(v);
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
    /// Handler panics, caught and counted as errors too (controller-runtime's `RecoverPanic`).
    pub(crate) panics: IntCounter,
    pub(crate) time: LazyHistogram,
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
        let m = ClusterMetrics::new("metrics-unit-test", FrameworkMetrics::global().unwrap());
        let q = m.queue("ConfigMap");
        q.adds.inc();
        let c = m.controller("ConfigMap");
        c.total_success.inc();
        // Like controller-runtime: no reconcile-time series before the first reconcile.
        let time = "controller_runtime_reconcile_time_seconds";
        assert!(
            !gathered_names_with("metrics-unit-test")
                .iter()
                .any(|n| n == time)
        );
        c.time.observe(0.1);
        m.rest_request("200", "GET", "127.0.0.1:6443").inc();
        m.cached_objects("", "v1", "ConfigMap").set(3);
        let names = gathered_names_with("metrics-unit-test");
        for n in [
            "controller_runtime_reconcile_total",
            "controller_runtime_reconcile_errors_total",
            "controller_runtime_reconcile_panics_total",
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
    fn a_caller_registry_holds_the_series_and_refuses_a_second_registration() {
        let own = Registry::new();
        let families = FrameworkMetrics::register(&own).unwrap();
        let m = ClusterMetrics::new("metrics-own-registry", families);
        m.queue("Secret").adds.inc();
        let in_own = own
            .gather()
            .iter()
            .any(|mf| mf.name() == "workqueue_adds_total" && !mf.get_metric().is_empty());
        assert!(in_own, "series in the caller's registry");
        assert!(gathered_names_with("metrics-own-registry").is_empty());
        match FrameworkMetrics::register(&own) {
            Err(MetricsError::Register { name, .. }) => {
                assert_eq!(name, "controller_runtime_reconcile_total");
            }
            other => panic!("expected a registration error, got {other:?}"),
        }
        assert!(QueueMetrics::unregistered().is_ok());
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
