//! The replicas the metrics call for: one proposal per metric, the largest wins; a metric that
//! cannot be computed sets the condition that says why.

use std::collections::BTreeSet;

use k8s_openapi::api::autoscaling::v2::{
    HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerCondition, MetricSpec, MetricStatus,
    MetricTarget, ResourceMetricSource,
};
use karmada_apis::autoscaling::v1alpha1::FederatedHPA;
use karmada_controllers_common::context::HpaSettings;
use kube::ResourceExt;
use lariat::ObjectKey;
use lariat::events::EventType;

use super::members::MultiClusterScale;
use super::normalize::default_behavior;
use super::status::set_condition;
use super::{DEFAULT_CPU_UTILIZATION, FederatedHpaController};

/// One metric's proposal.
pub(super) struct Proposed {
    pub(super) replicas: i32,
    pub(super) name: String,
    pub(super) status: MetricStatus,
}

/// One metric's failure: the condition to set and the error.
pub(super) struct Invalid {
    pub(super) condition: HorizontalPodAutoscalerCondition,
    pub(super) error: String,
}

impl FederatedHpaController {
    /// The largest proposal of the metrics, its metric's description, the statuses and, when some
    /// metrics failed but others scale, the error to report after scaling. An error when no metric
    /// can be used (or some failed and the rest would scale down): the condition of the first
    /// failure is set.
    pub(super) async fn compute_replicas(
        &self,
        key: &ObjectKey,
        read: &FederatedHPA,
        hpa: &mut FederatedHPA,
        specs: &[MetricSpec],
        scale: &MultiClusterScale,
        template_replicas: i32,
    ) -> Result<(i32, String, Vec<MetricStatus>, Option<String>), String> {
        self.check_selector_unambiguous(key, read, hpa, scale)
            .await?;
        let calibration = f64::from(scale.spec_replicas) / f64::from(template_replicas);
        let mut replicas = 0;
        let mut metric = String::new();
        let mut statuses = Vec::with_capacity(specs.len());
        let mut first_invalid: Option<Invalid> = None;
        let mut invalid = 0;
        for spec in specs {
            match self
                .compute_metric(read, spec, template_replicas, scale, calibration)
                .await
            {
                Ok(p) => {
                    if replicas == 0 || p.replicas > replicas {
                        replicas = p.replicas;
                        metric = p.name;
                    }
                    statuses.push(p.status);
                }
                Err(i) => {
                    invalid += 1;
                    if first_invalid.is_none() {
                        first_invalid = Some(i);
                    }
                }
            }
        }
        let error = first_invalid.as_ref().map(|i| {
            format!(
                "invalid metrics ({invalid} invalid out of {}), first error is: {}",
                specs.len(),
                i.error
            )
        });
        if let Some(i) = &first_invalid
            && (invalid >= specs.len() || replicas < template_replicas)
        {
            let c = &i.condition;
            set_condition(
                hpa,
                "ScalingActive",
                &c.status,
                c.reason.as_deref().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            );
            return Err(error.unwrap_or_default());
        }
        set_condition(
            hpa,
            "ScalingActive",
            "True",
            "ValidMetricFound",
            format!("the HPA was able to successfully calculate a replica count from {metric}"),
        );
        Ok((replicas, metric, statuses, error))
    }

    /// Fails (Event and `ScalingActive=False`, reason `AmbiguousSelector`) when another
    /// FederatedHPA counted one of the same pods (Karmada's ambiguous selector check).
    async fn check_selector_unambiguous(
        &self,
        key: &ObjectKey,
        read: &FederatedHPA,
        hpa: &mut FederatedHPA,
        scale: &MultiClusterScale,
    ) -> Result<(), String> {
        let pod_keys: BTreeSet<String> = scale
            .pods
            .iter()
            .map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()))
            .collect();
        let others: Vec<String> = match self.inner.pods_of.lock() {
            Ok(mut map) => {
                map.insert(key.to_string(), pod_keys.clone());
                map.iter()
                    .filter(|(k, pods)| k.as_str() != key.as_str() && !pods.is_disjoint(&pod_keys))
                    .map(|(k, _)| k.clone())
                    .collect()
            }
            Err(_) => Vec::new(),
        };
        if !others.is_empty() {
            let mut all = others;
            all.push(key.to_string());
            all.sort();
            let selector = scale
                .members
                .first()
                .map(|m| m.selector.as_str())
                .unwrap_or_default();
            let message = format!(
                "pods by selector {selector} are controlled by multiple HPAs: [{}]",
                all.join(" ")
            );
            self.event(
                read,
                EventType::Warning,
                "AmbiguousSelector",
                message.clone(),
            )
            .await;
            set_condition(
                hpa,
                "ScalingActive",
                "False",
                "AmbiguousSelector",
                message.clone(),
            );
            return Err(message);
        }
        Ok(())
    }

    pub(super) async fn unable(&self, hpa: &FederatedHPA, reason: &str, error: String) -> Invalid {
        self.event(hpa, EventType::Warning, reason, error.clone())
            .await;
        Invalid {
            condition: HorizontalPodAutoscalerCondition {
                type_: "ScalingActive".to_owned(),
                status: "False".to_owned(),
                reason: Some(reason.to_owned()),
                message: Some(format!(
                    "the HPA was unable to compute the replica count: {error}"
                )),
                ..Default::default()
            },
            error,
        }
    }
}

/// The spec's metrics, or Karmada's default (80% average CPU utilization) when there are none.
pub(super) fn metric_specs(hpa: &FederatedHPA) -> Vec<MetricSpec> {
    if !hpa.spec.metrics.is_empty() {
        return hpa.spec.metrics.clone();
    }
    vec![MetricSpec {
        type_: "Resource".to_owned(),
        resource: Some(ResourceMetricSource {
            name: "cpu".to_owned(),
            target: MetricTarget {
                type_: "Utilization".to_owned(),
                average_utilization: Some(DEFAULT_CPU_UTILIZATION),
                ..Default::default()
            },
        }),
        ..Default::default()
    }]
}

/// `spec.behavior` with Kubernetes' defaults filled in, or `None` without one.
pub(super) fn effective_behavior(
    hpa: &FederatedHPA,
    settings: &HpaSettings,
) -> Option<HorizontalPodAutoscalerBehavior> {
    hpa.spec
        .behavior
        .as_ref()
        .map(|b| default_behavior(b, settings.downscale_stabilization_window))
}
