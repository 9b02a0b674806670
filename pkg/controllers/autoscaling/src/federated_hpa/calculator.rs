//! The replica calculator: from the pods of the target (in every cluster it runs in) and their metrics,
//! the replica count that brings the metric to its target, as Kubernetes' HPA computes it (tolerance,
//! unready and missing pods, the CPU initialization period and the initial readiness delay), with
//! Karmada's calibration: the template's replicas may differ from the pods counted in the members.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use apimachinery::quantity::Quantity;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// One pod's metric value (milli-units) and when and over which window it was measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodMetric {
    /// When the sample was taken.
    pub timestamp: Timestamp,
    /// The window the sample covers.
    pub window: Duration,
    /// The value, in milli-units.
    pub value: i64,
}

/// Metrics by pod name.
pub type PodMetricsInfo = BTreeMap<String, PodMetric>;

/// Why no replica count could be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalcError {
    /// No pods matched the target's selector.
    #[error("no pods returned by selector while calculating replica count")]
    NoPods,
    /// Every pod with metrics was unready or ignored.
    #[error("did not receive metrics for any ready pods")]
    NoReadyMetrics,
    /// A container has no request for the resource.
    #[error("missing request for {resource} in container {container} of Pod {pod}")]
    MissingRequest {
        /// The resource.
        resource: String,
        /// The container.
        container: String,
        /// The pod.
        pod: String,
    },
    /// No metric belongs to a known pod.
    #[error("no metrics returned matched known pods")]
    NoMatchingMetrics,
}

/// The `--horizontal-pod-autoscaler-*` knobs the calculation uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calculator {
    /// `--horizontal-pod-autoscaler-tolerance`.
    pub tolerance: f64,
    /// `--horizontal-pod-autoscaler-cpu-initialization-period`.
    pub cpu_initialization_period: Duration,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay`.
    pub delay_of_initial_readiness_status: Duration,
}

/// A utilization computation's result: replicas, utilization (percent of request) and raw average.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utilization {
    /// The proposed replica count.
    pub replicas: i32,
    /// Average utilization, in percent of the pods' requests.
    pub utilization: i32,
    /// Average raw value per pod, in milli-units.
    pub raw: i64,
}

fn add(t: Timestamp, d: Duration) -> Timestamp {
    SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

fn ready_condition(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

/// Pods sorted into: ready (counted), unready, missing metrics, ignored (deleting or failed).
#[derive(Debug, Default)]
struct Groups {
    ready: usize,
    unready: BTreeSet<String>,
    missing: BTreeSet<String>,
    ignored: BTreeSet<String>,
}

impl Calculator {
    fn group_pods(
        &self,
        pods: &[Pod],
        metrics: &PodMetricsInfo,
        cpu: bool,
        now: Timestamp,
    ) -> Groups {
        let mut g = Groups::default();
        for pod in pods {
            let pod_name = name(pod);
            if pod.metadata.deletion_timestamp.is_some() || phase(pod) == "Failed" {
                g.ignored.insert(pod_name);
                continue;
            }
            if phase(pod) == "Pending" {
                g.unready.insert(pod_name);
                continue;
            }
            let Some(metric) = metrics.get(&pod_name) else {
                g.missing.insert(pod_name);
                continue;
            };
            if cpu {
                let condition = ready_condition(pod);
                let start = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.start_time.as_ref())
                    .map(|t| t.0);
                let unready = match (condition, start) {
                    (Some(c), Some(start)) => {
                        let transition = c.last_transition_time.as_ref().map(|t| t.0);
                        if add(start, self.cpu_initialization_period) > now {
                            // Within the initialization period: the sample counts only when the pod
                            // is ready and a full window was collected since it became so.
                            c.status == "False"
                                || transition
                                    .is_some_and(|t| metric.timestamp < add(t, metric.window))
                        } else {
                            // Afterwards: ignored only while unready and never ready yet.
                            c.status == "False"
                                && transition.is_some_and(|t| {
                                    add(start, self.delay_of_initial_readiness_status) > t
                                })
                        }
                    }
                    _ => true,
                };
                if unready {
                    g.unready.insert(pod_name);
                    continue;
                }
            }
            g.ready += 1;
        }
        g
    }

    /// Replicas for a target utilization (percent of request) of `resource`, summed over the
    /// containers (or only `container`).
    #[allow(clippy::too_many_arguments)]
    pub fn resource_replicas(
        &self,
        current_replicas: i32,
        target_utilization: i32,
        resource: &str,
        container: Option<&str>,
        mut metrics: PodMetricsInfo,
        pods: &[Pod],
        calibration: f64,
        now: Timestamp,
    ) -> Result<Utilization, CalcError> {
        if pods.is_empty() {
            return Err(CalcError::NoPods);
        }
        let g = self.group_pods(pods, &metrics, resource == "cpu", now);
        for p in g.ignored.iter().chain(&g.unready) {
            metrics.remove(p);
        }
        let requests = pod_requests(pods, container, resource)?;
        if metrics.is_empty() {
            return Err(CalcError::NoReadyMetrics);
        }
        let (ratio, utilization, raw) = utilization_ratio(&metrics, &requests, target_utilization)?;
        let result = |replicas| Utilization {
            replicas,
            utilization,
            raw,
        };
        let scale_up_with_unready = !g.unready.is_empty() && ratio > 1.0;
        if !scale_up_with_unready && g.missing.is_empty() {
            if (1.0 - ratio).abs() <= self.tolerance {
                return Ok(result(current_replicas));
            }
            return Ok(result(ceil(ratio * g.ready as f64 / calibration)));
        }
        if !g.missing.is_empty() {
            let fallback = i64::from(target_utilization.max(100));
            for p in &g.missing {
                let value = if ratio < 1.0 {
                    requests.get(p).copied().unwrap_or_default() * fallback / 100
                } else {
                    0
                };
                if ratio != 1.0 {
                    metrics.insert(p.clone(), zero_metric(value));
                }
            }
        }
        if scale_up_with_unready {
            for p in &g.unready {
                metrics.insert(p.clone(), zero_metric(0));
            }
        }
        let (new_ratio, _, _) = utilization_ratio(&metrics, &requests, target_utilization)?;
        if (1.0 - new_ratio).abs() <= self.tolerance
            || (ratio < 1.0 && new_ratio > 1.0)
            || (ratio > 1.0 && new_ratio < 1.0)
        {
            return Ok(result(current_replicas));
        }
        let replicas = ceil(new_ratio * metrics.len() as f64 / calibration);
        if (new_ratio < 1.0 && replicas > current_replicas)
            || (new_ratio > 1.0 && replicas < current_replicas)
        {
            return Ok(result(current_replicas));
        }
        Ok(result(replicas))
    }

    /// Replicas for a target average value (milli-units) per pod, for plain metrics (raw resource
    /// values, pods metrics). Returns the replicas and the current average.
    #[allow(clippy::too_many_arguments)]
    pub fn plain_replicas(
        &self,
        current_replicas: i32,
        target: i64,
        resource: Option<&str>,
        mut metrics: PodMetricsInfo,
        pods: &[Pod],
        calibration: f64,
        now: Timestamp,
    ) -> Result<(i32, i64), CalcError> {
        if pods.is_empty() {
            return Err(CalcError::NoPods);
        }
        let g = self.group_pods(pods, &metrics, resource == Some("cpu"), now);
        for p in g.ignored.iter().chain(&g.unready) {
            metrics.remove(p);
        }
        if metrics.is_empty() {
            return Err(CalcError::NoReadyMetrics);
        }
        let (ratio, usage) = usage_ratio(&metrics, target);
        let scale_up_with_unready = !g.unready.is_empty() && ratio > 1.0;
        if !scale_up_with_unready && g.missing.is_empty() {
            if (1.0 - ratio).abs() <= self.tolerance {
                return Ok((current_replicas, usage));
            }
            return Ok((ceil(ratio * g.ready as f64 / calibration), usage));
        }
        if !g.missing.is_empty() && ratio != 1.0 {
            let value = if ratio < 1.0 { target } else { 0 };
            for p in &g.missing {
                metrics.insert(p.clone(), zero_metric(value));
            }
        }
        if scale_up_with_unready {
            for p in &g.unready {
                metrics.insert(p.clone(), zero_metric(0));
            }
        }
        let (new_ratio, _) = usage_ratio(&metrics, target);
        if (1.0 - new_ratio).abs() <= self.tolerance
            || (ratio < 1.0 && new_ratio > 1.0)
            || (ratio > 1.0 && new_ratio < 1.0)
        {
            return Ok((current_replicas, usage));
        }
        let replicas = ceil(new_ratio * metrics.len() as f64 / calibration);
        if (new_ratio < 1.0 && replicas > current_replicas)
            || (new_ratio > 1.0 && replicas < current_replicas)
        {
            return Ok((current_replicas, usage));
        }
        Ok((replicas, usage))
    }

    /// Replicas for an object metric with a target value: the usage ratio times the ready pods.
    pub fn object_replicas(
        &self,
        current_replicas: i32,
        usage: i64,
        target: i64,
        pods: &[Pod],
        calibration: f64,
    ) -> Result<i32, CalcError> {
        let ratio = usage as f64 / target as f64;
        if current_replicas == 0 {
            return Ok(ceil(ratio));
        }
        if (1.0 - ratio).abs() <= self.tolerance {
            return Ok(current_replicas);
        }
        if pods.is_empty() {
            return Err(CalcError::NoPods);
        }
        let ready = pods
            .iter()
            .filter(|p| {
                phase(p) == "Running" && ready_condition(p).is_some_and(|c| c.status == "True")
            })
            .count();
        Ok(ceil(ratio * ready as f64 / calibration))
    }

    /// Replicas for an object metric with a target average value per pod. Returns the replicas and
    /// the usage per pod.
    pub fn object_per_pod_replicas(
        &self,
        status_replicas: i32,
        usage: i64,
        target_average: i64,
        calibration: f64,
    ) -> (i32, i64) {
        let mut replicas = status_replicas;
        let ratio = usage as f64 / (target_average as f64 * f64::from(replicas));
        if (1.0 - ratio).abs() > self.tolerance {
            replicas = ceil(usage as f64 / target_average as f64 / calibration);
        }
        let per_pod = (usage as f64 / f64::from(status_replicas)).ceil() as i64;
        (ceil(f64::from(replicas) / calibration), per_pod)
    }
}

fn zero_metric(value: i64) -> PodMetric {
    PodMetric {
        timestamp: Timestamp::UNIX_EPOCH,
        window: Duration::ZERO,
        value,
    }
}

fn ceil(x: f64) -> i32 {
    // Saturating, as Go's conversion of an out-of-range float is not something to rely on.
    x.ceil().clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
}

/// Each pod's request of `resource` (milli-units), summed over its containers or only `container`.
pub fn pod_requests(
    pods: &[Pod],
    container: Option<&str>,
    resource: &str,
) -> Result<BTreeMap<String, i64>, CalcError> {
    let mut out = BTreeMap::new();
    for pod in pods {
        let mut sum = 0i64;
        for c in pod.spec.iter().flat_map(|s| &s.containers) {
            if container.is_some_and(|want| want != c.name) {
                continue;
            }
            let request = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get(resource))
                .and_then(|q| Quantity::from_k8s(q).ok());
            match request {
                Some(q) => sum += q.milli_value(),
                None => {
                    return Err(CalcError::MissingRequest {
                        resource: resource.to_owned(),
                        container: c.name.clone(),
                        pod: name(pod),
                    });
                }
            }
        }
        out.insert(name(pod), sum);
    }
    Ok(out)
}

/// The ratio of the current to the target utilization, the current utilization (percent) and the
/// raw average per pod, over the pods that have both a metric and a request.
pub fn utilization_ratio(
    metrics: &PodMetricsInfo,
    requests: &BTreeMap<String, i64>,
    target_utilization: i32,
) -> Result<(f64, i32, i64), CalcError> {
    let (mut total, mut requested, mut n) = (0i64, 0i64, 0i64);
    for (pod, metric) in metrics {
        let Some(request) = requests.get(pod) else {
            continue;
        };
        total += metric.value;
        requested += request;
        n += 1;
    }
    if requested == 0 {
        return Err(CalcError::NoMatchingMetrics);
    }
    let utilization = i32::try_from(total * 100 / requested).unwrap_or(i32::MAX);
    Ok((
        f64::from(utilization) / f64::from(target_utilization),
        utilization,
        total / n,
    ))
}

/// The ratio of the average value to the target, and the average.
pub fn usage_ratio(metrics: &PodMetricsInfo, target: i64) -> (f64, i64) {
    let total: i64 = metrics.values().map(|m| m.value).sum();
    let average = total / i64::try_from(metrics.len().max(1)).unwrap_or(1);
    (average as f64 / target as f64, average)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: &str = "2026-01-01T00:10:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    fn pod(name: &str, cpu_request: &str, ready: bool, started: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu_request}}}]},
            "status": {
                "phase": "Running",
                "startTime": started,
                "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"},
                                "lastTransitionTime": started}],
            }
        }))
        .unwrap()
    }

    fn metric(value: i64) -> PodMetric {
        PodMetric {
            timestamp: now(),
            window: Duration::from_secs(30),
            value,
        }
    }

    fn calc() -> Calculator {
        Calculator {
            tolerance: 0.1,
            cpu_initialization_period: Duration::from_secs(300),
            delay_of_initial_readiness_status: Duration::from_secs(30),
        }
    }

    const OLD: &str = "2026-01-01T00:00:00Z";

    #[test]
    fn scales_up_by_the_utilization_ratio() {
        let pods = [pod("a", "100m", true, OLD), pod("b", "100m", true, OLD)];
        let metrics = [("a".into(), metric(200)), ("b".into(), metric(200))].into();
        let got = calc()
            .resource_replicas(2, 50, "cpu", None, metrics, &pods, 1.0, now())
            .unwrap();
        assert_eq!(
            got,
            Utilization {
                replicas: 8,
                utilization: 200,
                raw: 200
            }
        );
    }

    #[test]
    fn within_tolerance_keeps_the_current_count() {
        let pods = [pod("a", "100m", true, OLD)];
        let metrics = [("a".into(), metric(52))].into();
        let got = calc()
            .resource_replicas(3, 50, "cpu", None, metrics, &pods, 1.0, now())
            .unwrap();
        assert_eq!(got.replicas, 3);
    }

    #[test]
    fn calibration_scales_the_member_count_to_the_template() {
        // Members run 2 pods for a template of 4 replicas: calibration 0.5 doubles the result.
        let pods = [pod("a", "100m", true, OLD), pod("b", "100m", true, OLD)];
        let metrics = [("a".into(), metric(100)), ("b".into(), metric(100))].into();
        let got = calc()
            .resource_replicas(4, 50, "cpu", None, metrics, &pods, 0.5, now())
            .unwrap();
        assert_eq!(got.replicas, 8);
    }

    #[test]
    fn a_missing_pod_counts_as_full_use_on_scale_down() {
        let pods = [pod("a", "100m", true, OLD), pod("b", "100m", true, OLD)];
        let metrics = [("a".into(), metric(10))].into();
        // a at 10%, b assumed 100%: average 55% of a 50% target is within no tolerance of 1.1 →
        // ratio 1.1 > 1 while the first ratio was < 1: direction change, keep current.
        let got = calc()
            .resource_replicas(2, 50, "cpu", None, metrics, &pods, 1.0, now())
            .unwrap();
        assert_eq!(got.replicas, 2);
    }

    #[test]
    fn young_unready_cpu_samples_are_ignored() {
        let young = "2026-01-01T00:09:50Z";
        let pods = [pod("a", "100m", true, OLD), pod("b", "100m", false, young)];
        let metrics = [("a".into(), metric(100)), ("b".into(), metric(1000))].into();
        // b is unready: only a counts (200% of a 50% target → 4 ready-pod replicas), and b counts
        // as 0 on a scale-up: (100 + 0) / 200 = 50% of request → ratio 1.0 → keep current.
        let got = calc()
            .resource_replicas(2, 50, "cpu", None, metrics, &pods, 1.0, now())
            .unwrap();
        assert_eq!(got.replicas, 2);
    }

    #[test]
    fn missing_requests_and_no_pods_are_errors() {
        let mut p = pod("a", "100m", true, OLD);
        p.spec.as_mut().unwrap().containers[0].resources = None;
        let metrics: PodMetricsInfo = [("a".into(), metric(100))].into();
        assert!(matches!(
            calc().resource_replicas(1, 50, "cpu", None, metrics.clone(), &[p], 1.0, now()),
            Err(CalcError::MissingRequest { .. })
        ));
        assert_eq!(
            calc().resource_replicas(1, 50, "cpu", None, metrics, &[], 1.0, now()),
            Err(CalcError::NoPods)
        );
    }

    #[test]
    fn plain_metrics_use_the_average() {
        let pods = [pod("a", "100m", true, OLD), pod("b", "100m", true, OLD)];
        let metrics = [("a".into(), metric(3000)), ("b".into(), metric(1000))].into();
        let got = calc()
            .plain_replicas(2, 1000, None, metrics, &pods, 1.0, now())
            .unwrap();
        assert_eq!(got, (4, 2000));
    }
}
