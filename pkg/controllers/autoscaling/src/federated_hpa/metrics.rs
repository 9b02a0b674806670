//! Reading metrics from the member clusters: `metrics.k8s.io` (resource metrics, e.g. metrics-server)
//! and `custom.metrics.k8s.io` (pods and object metrics, e.g. a Prometheus adapter), in each member the
//! target is scheduled to. Karmada reads them through `karmada-metrics-adapter`, which serves the same
//! APIs on the control plane by asking the members; here the controller asks the members itself.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use lariat::runtime::GoDuration;
use serde::Deserialize;

use super::calculator::{PodMetric, PodMetricsInfo};

/// Kubernetes' window for custom metrics that carry none.
const DEFAULT_CUSTOM_WINDOW: Duration = Duration::from_secs(60);

/// Why metrics could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricsError {
    /// The resource metrics API failed.
    #[error("unable to fetch metrics from resource metrics API: {0}")]
    Resource(String),
    /// The resource metrics API returned nothing.
    #[error("no metrics returned from resource metrics API")]
    NoResourceMetrics,
    /// A container named by a ContainerResource metric is not in a pod's metrics.
    #[error(
        "failed to get container metrics: container {container} not present in metrics for pod {pod}"
    )]
    NoContainer {
        /// The container.
        container: String,
        /// `namespace/name` of the pod.
        pod: String,
    },
    /// The custom metrics API failed.
    #[error("unable to fetch metrics from custom metrics API: {0}")]
    Custom(String),
    /// The custom metrics API returned nothing.
    #[error("no metrics returned from custom metrics API")]
    NoCustomMetrics,
}

#[derive(Deserialize)]
struct PodMetricsList {
    #[serde(default)]
    items: Vec<PodMetrics>,
}

#[derive(Deserialize)]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
}

#[derive(Deserialize)]
struct PodMetrics {
    metadata: Meta,
    timestamp: Timestamp,
    #[serde(default)]
    window: String,
    #[serde(default)]
    containers: Vec<ContainerMetrics>,
}

#[derive(Deserialize)]
struct ContainerMetrics {
    name: String,
    #[serde(default)]
    usage:
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetricValueList {
    #[serde(default)]
    items: Vec<MetricValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetricValue {
    described_object: Described,
    timestamp: Timestamp,
    #[serde(default)]
    window_seconds: Option<u64>,
    value: k8s_openapi::apimachinery::pkg::api::resource::Quantity,
}

#[derive(Deserialize)]
struct Described {
    #[serde(default)]
    name: String,
}

fn milli(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> Option<i64> {
    apimachinery::quantity::Quantity::from_k8s(q)
        .ok()
        .map(|q| q.milli_value())
}

fn query(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (k, v) in pairs.iter().filter(|(_, v)| !v.is_empty()) {
        out.push(if out.is_empty() { '?' } else { '&' });
        out.push_str(k);
        out.push('=');
        out.extend(url_escape(v));
    }
    out
}

/// Percent-encodes a query value (RFC 3986 unreserved characters stay).
fn url_escape(v: &str) -> impl Iterator<Item = char> + '_ {
    v.bytes().flat_map(|b| {
        let plain = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~');
        let s = if plain {
            char::from(b).to_string()
        } else {
            format!("%{b:02X}")
        };
        s.chars().collect::<Vec<_>>()
    })
}

async fn get_text(client: &Client, path: &str) -> Result<String, kube::Error> {
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    client.request_text(request).await
}

/// The resource metric `resource` of the pods matching `selector` in `namespace` of one member, summed
/// over each pod's containers (or only `container`). Pods lacking the resource are left out.
pub async fn resource_metrics(
    client: &Client,
    namespace: &str,
    selector: &str,
    resource: &str,
    container: Option<&str>,
) -> Result<PodMetricsInfo, MetricsError> {
    let path = format!(
        "/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods{}",
        query(&[("labelSelector", selector)])
    );
    let text = get_text(client, &path)
        .await
        .map_err(|e| MetricsError::Resource(e.to_string()))?;
    let list: PodMetricsList =
        serde_json::from_str(&text).map_err(|e| MetricsError::Resource(e.to_string()))?;
    tracing::debug!(path, pods = list.items.len(), "resource metrics listed");
    let mut out = PodMetricsInfo::new();
    for m in list.items {
        let window = m
            .window
            .parse::<GoDuration>()
            .map(|d| d.to_std())
            .unwrap_or_default();
        let value = match container {
            Some(want) => {
                let Some(c) = m.containers.iter().find(|c| c.name == want) else {
                    return Err(MetricsError::NoContainer {
                        container: want.to_owned(),
                        pod: format!("{}/{}", m.metadata.namespace, m.metadata.name),
                    });
                };
                c.usage.get(resource).and_then(milli)
            }
            None if m.containers.is_empty() => None,
            None => m
                .containers
                .iter()
                .map(|c| c.usage.get(resource).and_then(milli))
                .sum::<Option<i64>>(),
        };
        if let Some(value) = value {
            out.insert(
                m.metadata.name,
                PodMetric {
                    timestamp: m.timestamp,
                    window,
                    value,
                },
            );
        }
    }
    Ok(out)
}

fn metric_values(text: &str) -> Result<Vec<MetricValue>, MetricsError> {
    let list: MetricValueList =
        serde_json::from_str(text).map_err(|e| MetricsError::Custom(e.to_string()))?;
    Ok(list.items)
}

/// The custom metric `metric` of the pods matching `selector` in `namespace` of one member.
pub async fn pods_metrics(
    client: &Client,
    namespace: &str,
    selector: &str,
    metric: &str,
    metric_selector: &str,
) -> Result<PodMetricsInfo, MetricsError> {
    let path = format!(
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/{namespace}/pods/*/{}{}",
        url_escape(metric).collect::<String>(),
        query(&[
            ("labelSelector", selector),
            ("metricLabelSelector", metric_selector)
        ])
    );
    let text = get_text(client, &path)
        .await
        .map_err(|e| MetricsError::Custom(e.to_string()))?;
    Ok(metric_values(&text)?
        .into_iter()
        .filter_map(|m| {
            let value = milli(&m.value)?;
            let window = m
                .window_seconds
                .map_or(DEFAULT_CUSTOM_WINDOW, Duration::from_secs);
            Some((
                m.described_object.name,
                PodMetric {
                    timestamp: m.timestamp,
                    window,
                    value,
                },
            ))
        })
        .collect())
}

/// The custom metric `metric` of one object (`resource` is its plural, e.g. `ingresses` or
/// `namespaces` for the namespace itself) in one member: its value (milli-units) and time.
pub async fn object_metric(
    client: &Client,
    namespace: &str,
    group_resource: &str,
    name: &str,
    metric: &str,
    metric_selector: &str,
) -> Result<(i64, Timestamp), MetricsError> {
    let metric = url_escape(metric).collect::<String>();
    let selector = query(&[("metricLabelSelector", metric_selector)]);
    let path = if group_resource == "namespaces" {
        format!(
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/{namespace}/metrics/{metric}{selector}"
        )
    } else {
        format!(
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/{namespace}/{group_resource}/{name}/{metric}{selector}"
        )
    };
    let text = get_text(client, &path)
        .await
        .map_err(|e| MetricsError::Custom(e.to_string()))?;
    let first = metric_values(&text)?
        .into_iter()
        .next()
        .ok_or(MetricsError::NoCustomMetrics)?;
    let value = milli(&first.value)
        .ok_or_else(|| MetricsError::Custom(format!("invalid metric value {:?}", first.value.0)))?;
    Ok((value, first.timestamp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_are_escaped() {
        assert_eq!(
            query(&[("labelSelector", "app=web,tier in (a,b)"), ("x", "")]),
            "?labelSelector=app%3Dweb%2Ctier%20in%20%28a%2Cb%29"
        );
    }

    #[test]
    fn pod_metrics_decode() {
        let list: PodMetricsList = serde_json::from_value(serde_json::json!({
            "items": [{"metadata": {"name": "p", "namespace": "ns"}, "timestamp": "2026-01-01T00:00:00Z",
                       "window": "10.5s", "containers": [{"name": "c", "usage": {"cpu": "250m"}}]}]
        }))
        .unwrap();
        assert_eq!(list.items[0].containers[0].usage["cpu"].0, "250m");
        let d: GoDuration = list.items[0].window.parse().unwrap();
        assert_eq!(d.to_std(), Duration::from_millis(10_500));
    }

    #[test]
    fn metrics_server_values_decode() {
        // What metrics-server serves: nanocores, Ki/Mi, and the whole metadata of a pod.
        let list: PodMetricsList = serde_json::from_str(
            r#"{"kind":"PodMetricsList","apiVersion":"metrics.k8s.io/v1beta1","metadata":{},"items":[{"metadata":{"name":"web-1","namespace":"fhpa","creationTimestamp":"2026-12-02T05:26:09Z","labels":{"app":"web"}},"timestamp":"2026-12-02T05:26:03Z","window":"10.002s","containers":[{"name":"app","usage":{"cpu":"19999510n","memory":"1Mi"}}]}]}"#,
        )
        .unwrap();
        let usage = &list.items[0].containers[0].usage;
        assert_eq!(milli(&usage["cpu"]), Some(20));
        assert_eq!(milli(&usage["memory"]), Some(1_048_576_000));
    }
}
