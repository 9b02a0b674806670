//! One metric's proposal and status, by source type (Resource, ContainerResource, Pods, Object,
//! External), from the members' metrics APIs through the replica calculator.

use apimachinery::gvk::gvk_of;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, MetricIdentifier, MetricSpec, MetricStatus, MetricTarget,
    MetricValueStatus, ObjectMetricStatus, PodsMetricStatus, ResourceMetricStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::jiff::Timestamp;
use karmada_apis::autoscaling::v1alpha1::FederatedHPA;
use kube::ResourceExt;

use super::FederatedHpaController;
use super::calculator::{CalcError, PodMetricsInfo};
use super::durations;
use super::members::{MultiClusterScale, selector_string};
use super::metrics::{self, MetricsError};
use super::replicas::{Invalid, Proposed};

impl FederatedHpaController {
    /// One metric's proposal and status, by its source type; a failure sets the condition and
    /// Event that say why (see `unable`).
    pub(super) async fn compute_metric(
        &self,
        hpa: &FederatedHPA,
        spec: &MetricSpec,
        spec_replicas: i32,
        scale: &MultiClusterScale,
        calibration: f64,
    ) -> Result<Proposed, Invalid> {
        let now = Timestamp::now();
        match spec.type_.as_str() {
            "Resource" | "ContainerResource" => {
                self.resource_metric(hpa, spec, spec_replicas, scale, calibration, now)
                    .await
            }
            "Pods" => {
                self.pods_metric(hpa, spec, spec_replicas, scale, calibration, now)
                    .await
            }
            "Object" => {
                let Some(source) = &spec.object else {
                    let e = format!("unknown metric source type {:?}", spec.type_);
                    return Err(self.unable(hpa, "InvalidMetricSourceType", e).await);
                };
                let result = self
                    .object_status(hpa, source, spec_replicas, scale, calibration)
                    .await;
                match result {
                    Ok(p) => Ok(p),
                    Err(e) => {
                        let mut invalid = self.unable(hpa, "FailedGetObjectMetric", e).await;
                        invalid.error =
                            format!("failed to get object metric value: {}", invalid.error);
                        Err(invalid)
                    }
                }
            }
            other => {
                let e = format!("unknown metric source type {other:?}");
                Err(self.unable(hpa, "InvalidMetricSourceType", e).await)
            }
        }
    }

    /// A Resource or ContainerResource metric's proposal and status.
    async fn resource_metric(
        &self,
        hpa: &FederatedHPA,
        spec: &MetricSpec,
        spec_replicas: i32,
        scale: &MultiClusterScale,
        calibration: f64,
        now: Timestamp,
    ) -> Result<Proposed, Invalid> {
        let namespace = hpa.namespace().unwrap_or_default();
        let (resource, target, container) = match (&spec.resource, &spec.container_resource) {
            (Some(r), _) if spec.type_ == "Resource" => (r.name.clone(), r.target.clone(), None),
            (_, Some(c)) if spec.type_ == "ContainerResource" => {
                (c.name.clone(), c.target.clone(), Some(c.container.clone()))
            }
            _ => {
                let e = format!("unknown metric source type {:?}", spec.type_);
                return Err(self.unable(hpa, "InvalidMetricSourceType", e).await);
            }
        };
        let (event_reason, what) = match &container {
            None => (
                "FailedGetResourceMetric",
                format!("{resource} resource metric value"),
            ),
            Some(c) => (
                "FailedGetContainerResourceMetric",
                format!("{c} container metric value"),
            ),
        };
        let result = self
            .resource_status(
                &namespace,
                spec_replicas,
                &resource,
                &target,
                container.as_deref(),
                scale,
                calibration,
                now,
            )
            .await;
        match result {
            Ok((replicas, name, current)) => {
                let status = match container {
                    None => MetricStatus {
                        type_: "Resource".to_owned(),
                        resource: Some(ResourceMetricStatus {
                            name: resource,
                            current,
                        }),
                        ..Default::default()
                    },
                    Some(container) => MetricStatus {
                        type_: "ContainerResource".to_owned(),
                        container_resource: Some(ContainerResourceMetricStatus {
                            name: resource,
                            container,
                            current,
                        }),
                        ..Default::default()
                    },
                };
                Ok(Proposed {
                    replicas,
                    name,
                    status,
                })
            }
            Err(e) => {
                let mut invalid = self.unable(hpa, event_reason, e).await;
                invalid.error = format!("failed to get {what}: {}", invalid.error);
                Err(invalid)
            }
        }
    }

    /// A Pods metric's proposal and status: the pods' custom metric from every member.
    async fn pods_metric(
        &self,
        hpa: &FederatedHPA,
        spec: &MetricSpec,
        spec_replicas: i32,
        scale: &MultiClusterScale,
        calibration: f64,
        now: Timestamp,
    ) -> Result<Proposed, Invalid> {
        let namespace = hpa.namespace().unwrap_or_default();
        let calc = &self.inner.calculator;
        let Some(source) = &spec.pods else {
            let e = format!("unknown metric source type {:?}", spec.type_);
            return Err(self.unable(hpa, "InvalidMetricSourceType", e).await);
        };
        let metric_name = source.metric.name.clone();
        let metric_selector = selector_string(source.metric.selector.as_ref());
        let target = milli_of(source.target.average_value.as_ref());
        let started = std::time::Instant::now();
        let fetched = pods_metric_values(scale, &namespace, &metric_name, &metric_selector).await;
        durations::observe_pull(fetched.is_ok(), durations::RAW_METRIC, started);
        let result = fetched
            .map_err(|e| format!("unable to get metric {metric_name}: {e}"))
            .and_then(|metrics| {
                calc.plain_replicas(
                    spec_replicas,
                    target,
                    None,
                    metrics,
                    &scale.pods,
                    calibration,
                    now,
                )
                .map_err(|e| e.to_string())
            });
        match result {
            Ok((replicas, usage)) => Ok(Proposed {
                replicas,
                name: format!("pods metric {metric_name}"),
                status: MetricStatus {
                    type_: "Pods".to_owned(),
                    pods: Some(PodsMetricStatus {
                        metric: MetricIdentifier {
                            name: metric_name,
                            selector: source.metric.selector.clone(),
                        },
                        current: MetricValueStatus {
                            average_value: Some(milli_quantity(usage)),
                            ..Default::default()
                        },
                    }),
                    ..Default::default()
                },
            }),
            Err(e) => {
                let mut invalid = self.unable(hpa, "FailedGetPodsMetric", e).await;
                invalid.error = format!("failed to get pods metric value: {}", invalid.error);
                Err(invalid)
            }
        }
    }

    /// A Resource or ContainerResource metric: replicas, description and current value.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn resource_status(
        &self,
        namespace: &str,
        spec_replicas: i32,
        resource: &str,
        target: &MetricTarget,
        container: Option<&str>,
        scale: &MultiClusterScale,
        calibration: f64,
        now: Timestamp,
    ) -> Result<(i32, String, MetricValueStatus), String> {
        let calc = &self.inner.calculator;
        let started = std::time::Instant::now();
        let fetched = self
            .resource_metrics(namespace, resource, container, scale)
            .await;
        durations::observe_pull(fetched.is_ok(), durations::RESOURCE_METRIC, started);
        let unable =
            |e: MetricsError| format!("unable to get metrics for resource {resource}: {e}");
        if let Some(average) = &target.average_value {
            let metrics = fetched
                .map_err(unable)
                .map_err(|e| format!("failed to get {resource} utilization: {e}"))?;
            let (replicas, usage) = calc
                .plain_replicas(
                    spec_replicas,
                    milli_of(Some(average)),
                    Some(resource),
                    metrics,
                    &scale.pods,
                    calibration,
                    now,
                )
                .map_err(|e: CalcError| format!("failed to get {resource} utilization: {e}"))?;
            return Ok((
                replicas,
                format!("{resource} resource"),
                MetricValueStatus {
                    average_value: Some(milli_quantity(usage)),
                    ..Default::default()
                },
            ));
        }
        let Some(utilization) = target.average_utilization else {
            return Err("invalid resource metric source: neither an average utilization target nor an average value target was set".to_owned());
        };
        let metrics = fetched
            .map_err(unable)
            .map_err(|e| format!("failed to get {resource} utilization: {e}"))?;
        let u = calc
            .resource_replicas(
                spec_replicas,
                utilization,
                resource,
                container,
                metrics,
                &scale.pods,
                calibration,
                now,
            )
            .map_err(|e| format!("failed to get {resource} utilization: {e}"))?;
        let name = if container.is_some() {
            format!("{resource} container resource utilization (percentage of request)")
        } else {
            format!("{resource} resource utilization (percentage of request)")
        };
        Ok((
            u.replicas,
            name,
            MetricValueStatus {
                average_utilization: Some(u.utilization),
                average_value: Some(milli_quantity(u.raw)),
                ..Default::default()
            },
        ))
    }

    /// The resource metric of the target's pods, merged over the member clusters that answered.
    pub(super) async fn resource_metrics(
        &self,
        namespace: &str,
        resource: &str,
        container: Option<&str>,
        scale: &MultiClusterScale,
    ) -> Result<PodMetricsInfo, MetricsError> {
        let mut merged = PodMetricsInfo::new();
        let mut first_error = None;
        let mut any_ok = false;
        for m in &scale.members {
            match metrics::resource_metrics(&m.client, namespace, &m.selector, resource, container)
                .await
            {
                Ok(values) => {
                    any_ok = true;
                    merged.extend(values);
                }
                Err(e @ MetricsError::NoContainer { .. }) => return Err(e),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match (any_ok, first_error) {
            (false, Some(e)) => Err(e),
            _ if merged.is_empty() => Err(MetricsError::NoResourceMetrics),
            _ => Ok(merged),
        }
    }

    /// An Object metric: the object's value summed over the member clusters that answered.
    // Over 80 lines: one branch per target type (Value, AverageValue), each building its status.
    pub(super) async fn object_status(
        &self,
        hpa: &FederatedHPA,
        source: &k8s_openapi::api::autoscaling::v2::ObjectMetricSource,
        spec_replicas: i32,
        scale: &MultiClusterScale,
        calibration: f64,
    ) -> Result<Proposed, String> {
        let namespace = hpa.namespace().unwrap_or_default();
        let described = &source.described_object;
        let metric_name = source.metric.name.clone();
        let unable = |e: &dyn std::fmt::Display| {
            // Karmada's message puts the arguments in this order.
            format!(
                "unable to get metric {metric_name}: {} on {namespace} {}/{e}",
                described.kind, described.name
            )
        };
        let started = std::time::Instant::now();
        let total = self.object_metric_total(&namespace, source, scale).await;
        durations::observe_pull(total.is_ok(), durations::OBJECT_METRIC, started);
        let total = total.map_err(|e| unable(&e))?;
        let target = &source.target;
        let calc = &self.inner.calculator;
        if target.type_ == "Value" && target.value.is_some() {
            let replicas = calc
                .object_replicas(
                    spec_replicas,
                    total,
                    milli_of(target.value.as_ref()),
                    &scale.pods,
                    calibration,
                )
                .map_err(|e| e.to_string())?;
            return Ok(Proposed {
                replicas,
                name: format!("{} metric {metric_name}", described.kind),
                status: MetricStatus {
                    type_: "Object".to_owned(),
                    object: Some(ObjectMetricStatus {
                        described_object: described.clone(),
                        metric: MetricIdentifier {
                            name: metric_name.clone(),
                            selector: source.metric.selector.clone(),
                        },
                        current: MetricValueStatus {
                            value: Some(milli_quantity(total)),
                            ..Default::default()
                        },
                    }),
                    ..Default::default()
                },
            });
        }
        if target.type_ == "AverageValue" && target.average_value.is_some() {
            let (replicas, per_pod) = calc.object_per_pod_replicas(
                scale.status_replicas,
                total,
                milli_of(target.average_value.as_ref()),
                calibration,
            );
            return Ok(Proposed {
                replicas,
                name: format!(
                    "external metric {metric_name}({:?})",
                    source.metric.selector
                ),
                status: MetricStatus {
                    type_: "Object".to_owned(),
                    object: Some(ObjectMetricStatus {
                        described_object: Default::default(),
                        metric: MetricIdentifier {
                            name: metric_name,
                            selector: source.metric.selector.clone(),
                        },
                        current: MetricValueStatus {
                            average_value: Some(milli_quantity(per_pod)),
                            ..Default::default()
                        },
                    }),
                    ..Default::default()
                },
            });
        }
        Err("invalid object metric source: neither a value target nor an average value target was set".to_owned())
    }

    /// An Object metric's value summed over the members that answer; the first error when none
    /// does.
    async fn object_metric_total(
        &self,
        namespace: &str,
        source: &k8s_openapi::api::autoscaling::v2::ObjectMetricSource,
        scale: &MultiClusterScale,
    ) -> Result<i64, String> {
        let described = &source.described_object;
        let metric_name = &source.metric.name;
        let metric_selector = selector_string(source.metric.selector.as_ref());
        let gvk = gvk_of(
            described.api_version.as_deref().unwrap_or_default(),
            &described.kind,
        );
        let mut total = 0i64;
        let mut any_ok = false;
        let mut first_error: Option<String> = None;
        for target in &scale.members {
            let Some(member) = self.inner.ctx.members.get(&target.cluster) else {
                continue;
            };
            let plural = if described.kind == "Namespace" && gvk.group.is_empty() {
                "namespaces".to_owned()
            } else {
                match member.clients().resolve(&gvk).await {
                    Ok((ar, _)) if ar.group.is_empty() => ar.plural,
                    Ok((ar, _)) => format!("{}.{}", ar.plural, ar.group),
                    Err(e) => {
                        first_error.get_or_insert(e.to_string());
                        continue;
                    }
                }
            };
            match metrics::object_metric(
                &target.client,
                namespace,
                &plural,
                &described.name,
                metric_name,
                &metric_selector,
            )
            .await
            {
                Ok((value, _)) => {
                    any_ok = true;
                    total += value;
                }
                Err(e) => {
                    first_error.get_or_insert(e.to_string());
                }
            }
        }
        if !any_ok {
            return Err(first_error.unwrap_or_else(|| MetricsError::NoCustomMetrics.to_string()));
        }
        Ok(total)
    }
}

pub(super) fn milli_of(q: Option<&K8sQuantity>) -> i64 {
    q.and_then(|q| apimachinery::quantity::Quantity::from_k8s(q).ok())
        .map_or(0, |q| q.milli_value())
}

/// A milli-value as a decimal quantity (`250m`, `2`), as Go's `NewMilliQuantity(v, DecimalSI)`.
pub(super) fn milli_quantity(milli: i64) -> K8sQuantity {
    apimachinery::quantity::Quantity::from_milli(
        i128::from(milli),
        apimachinery::quantity::Format::DecimalSi,
    )
    .to_k8s()
}

/// A Pods metric's values for the target's pods in every member; an error only when no member
/// answered (or none has the metric).
async fn pods_metric_values(
    scale: &MultiClusterScale,
    namespace: &str,
    metric_name: &str,
    metric_selector: &str,
) -> Result<PodMetricsInfo, MetricsError> {
    let mut merged = PodMetricsInfo::new();
    let mut first_error = None;
    let mut any_ok = false;
    for m in &scale.members {
        match metrics::pods_metrics(
            &m.client,
            namespace,
            &m.selector,
            metric_name,
            metric_selector,
        )
        .await
        {
            Ok(values) => {
                any_ok = true;
                merged.extend(values);
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match (any_ok, first_error) {
        (false, Some(e)) => Err(e),
        _ if merged.is_empty() => Err(MetricsError::NoCustomMetrics),
        _ => Ok(merged),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milli_quantities_are_decimal() {
        assert_eq!(milli_quantity(250).0, "250m");
        assert_eq!(milli_quantity(2000).0, "2");
    }
}
