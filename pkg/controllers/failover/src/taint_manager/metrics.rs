//! Karmada's eviction metrics (`pkg/metrics/cluster.go`), with its names, help texts and labels:
//! `eviction_queue_depth{name}`, `eviction_kind_total{member_cluster,cluster_name,resource_kind}`,
//! `eviction_processing_latency_seconds{name}` and `eviction_processing_total{name,result}`.

use std::sync::OnceLock;
use std::time::Instant;

use prometheus::{GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, Opts};

/// The eviction metric families.
pub struct EvictionMetrics {
    queue_depth: GaugeVec,
    kind_total: GaugeVec,
    latency: HistogramVec,
    total: IntCounterVec,
}

fn build() -> prometheus::Result<EvictionMetrics> {
    let queue_depth = GaugeVec::new(
        Opts::new(
            "eviction_queue_depth",
            "Current depth of the eviction queue",
        ),
        &["name"],
    )?;
    let kind_total = GaugeVec::new(
        Opts::new(
            "eviction_kind_total",
            "Number of resources in the eviction queue by resource kind [Label deprecation: cluster_name deprecated in 1.16; use member_cluster. Removal planned 1.18.]",
        ),
        &["member_cluster", "cluster_name", "resource_kind"],
    )?;
    let latency = HistogramVec::new(
        HistogramOpts::new(
            "eviction_processing_latency_seconds",
            "Latency of processing an eviction task in seconds",
        )
        .buckets(prometheus::exponential_buckets(0.001, 2.0, 15)?),
        &["name"],
    )?;
    let total = IntCounterVec::new(
        Opts::new(
            "eviction_processing_total",
            "Total number of evictions processed",
        ),
        &["name", "result"],
    )?;
    let registry = lariat::metrics::registry();
    for collector in [
        Box::new(queue_depth.clone()) as Box<dyn prometheus::core::Collector>,
        Box::new(kind_total.clone()),
        Box::new(latency.clone()),
        Box::new(total.clone()),
    ] {
        if let Err(e) = registry.register(collector) {
            tracing::warn!(error = %e, "eviction metric not registered");
        }
    }
    Ok(EvictionMetrics {
        queue_depth,
        kind_total,
        latency,
        total,
    })
}

fn metrics() -> Option<&'static EvictionMetrics> {
    static METRICS: OnceLock<Option<EvictionMetrics>> = OnceLock::new();
    METRICS
        .get_or_init(|| match build() {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::error!(error = %e, "invalid eviction metric definition");
                None
            }
        })
        .as_ref()
}

/// Sets the depth of the eviction queue `name`.
pub fn queue_depth(name: &str, depth: usize) {
    if let Some(m) = metrics() {
        m.queue_depth.with_label_values(&[name]).set(depth as f64);
    }
}

/// Counts an item of `kind` for `cluster` into (`added`) or out of the eviction queue.
pub fn kind(cluster: &str, kind: &str, added: bool) {
    if let Some(m) = metrics() {
        let g = m.kind_total.with_label_values(&[cluster, cluster, kind]);
        if added { g.inc() } else { g.dec() }
    }
}

/// Records one processed eviction item of queue `name`.
pub fn processed(name: &str, ok: bool, started: Instant) {
    if let Some(m) = metrics() {
        m.latency
            .with_label_values(&[name])
            .observe(started.elapsed().as_secs_f64());
        m.total
            .with_label_values(&[name, karmada_controllers_common::metrics::result_label(ok)])
            .inc();
    }
}
