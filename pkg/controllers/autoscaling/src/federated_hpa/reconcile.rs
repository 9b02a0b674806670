//! One FederatedHPA's sync: when it is due (a spec change or the sync period), then the target,
//! its binding and members ([`super::members`]), the replicas the metrics call for
//! ([`super::replicas`]), the scale written and the status recorded ([`super::status`]).

use std::sync::Arc;
use std::time::Instant;

use apimachinery::gvk::gvk_of;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscalerStatus, MetricStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use karmada_apis::autoscaling::v1alpha1::FederatedHPA;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use lariat::events::EventType;
use lariat::{HandlerResult, ObjectKey};

use super::FederatedHpaController;
use super::error::FhpaError;
use super::members::MultiClusterScale;
use super::normalize::Proposal;
use super::replicas::{effective_behavior, metric_specs};
use super::status::{MEMBERS_NOT_OBSERVED, set_condition, set_current_replicas, set_left_out};

impl FederatedHpaController {
    pub(super) async fn handle(
        &self,
        key: ObjectKey,
        obj: Option<Arc<FederatedHPA>>,
    ) -> HandlerResult<FederatedHPA> {
        let inner = &self.inner;
        let Some(hpa) = obj else {
            tracing::info!(fhpa = %key, "FederatedHPA has been deleted");
            if let Ok(mut h) = inner.histories.lock() {
                h.forget(key.as_str());
            }
            if let Ok(mut d) = inner.due.lock() {
                d.remove(key.as_str());
            }
            if let Ok(mut p) = inner.pods_of.lock() {
                p.remove(key.as_str());
            }
            return HandlerResult::Success;
        };
        if hpa.metadata.deletion_timestamp.is_some() {
            return HandlerResult::Success;
        }
        // Only a spec change or the sync period makes a sync (not the controller's status writes).
        let generation = hpa.metadata.generation;
        let now = Instant::now();
        if let Ok(d) = inner.due.lock()
            && let Some((seen, at)) = d.get(key.as_str())
            && *seen == generation
            && *at > now
        {
            return HandlerResult::RequeueAfter(*at - now);
        }
        let period = inner.settings.sync_period;
        let started = Instant::now();
        let synced = self.reconcile(&key, &hpa).await;
        super::durations::observe_process(synced.is_ok(), started);
        match synced {
            Ok(()) => {
                if let Ok(mut d) = inner.due.lock() {
                    d.insert(key.to_string(), (generation, Instant::now() + period));
                }
                HandlerResult::RequeueAfter(period)
            }
            Err(e) => {
                tracing::warn!(fhpa = %key, error = %e, "FederatedHPA sync failed");
                if let Ok(mut d) = inner.due.lock() {
                    d.remove(key.as_str());
                }
                HandlerResult::error(e)
            }
        }
    }

    /// One sync: the target and where it runs, the replicas the metrics call for, the rescale
    /// when they differ from the template's, then the status. A failure before the scale is known
    /// sets `AbleToScale=False` (see [`Self::fail_able_to_scale`]).
    pub(super) async fn reconcile(
        &self,
        key: &ObjectKey,
        read: &FederatedHPA,
    ) -> Result<(), FhpaError> {
        let inner = &self.inner;
        let mut hpa = read.clone();
        let namespace = read.namespace().unwrap_or_default();
        let reference = reference_of(read);
        let (gvk, template_api, template) = self.template_of(read, &mut hpa).await?;
        let clusters = self.clusters_of(read, &mut hpa, &template).await?;
        let scale = match self
            .scale_of_members(&clusters, &mut hpa, &gvk, &namespace)
            .await
        {
            Ok(s) => {
                if let Some(message) = set_left_out(&mut hpa, &s.left_out, clusters.len()) {
                    self.event(read, EventType::Warning, MEMBERS_NOT_OBSERVED, message)
                        .await;
                }
                s
            }
            Err(e) => {
                return Err(self
                    .fail_able_to_scale(
                        read,
                        &mut hpa,
                        (
                            "FailedGetScale",
                            "FailedGetScale",
                            format!("the HPA controller was unable to get the target's current scale: {e}"),
                        ),
                        e.clone(),
                        format!("failed to query scale subresource for {reference}: {e}"),
                    )
                    .await);
            }
        };
        let target_name = &read.spec.scale_target_ref.name;
        let template_scale: Scale = template_api.get_scale(target_name).await.map_err(|e| {
            FhpaError::Sync(format!(
                "failed to get scale subresource for resource template {reference}: {e}"
            ))
        })?;
        set_condition(
            &mut hpa,
            "AbleToScale",
            "True",
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale".to_owned(),
        );
        let current = template_scale.spec.and_then(|s| s.replicas).unwrap_or(0);
        let now = Timestamp::now();
        if let Ok(mut h) = inner.histories.lock() {
            h.record_initial(key.as_str(), current, now);
        }
        let decision = self
            .decide(key, read, &mut hpa, &scale, current, now)
            .await?;
        let mut last_scale_time = hpa.status.as_ref().and_then(|s| s.last_scale_time.clone());
        let desired = if decision.rescale {
            self.rescale(key, read, &mut hpa, &template_api, &decision, now)
                .await?;
            last_scale_time = Some(Time(now));
            decision.desired
        } else {
            current
        };
        let conditions = hpa.status.as_ref().and_then(|s| s.conditions.clone());
        hpa.status = Some(HorizontalPodAutoscalerStatus {
            current_replicas: Some(current),
            desired_replicas: desired,
            last_scale_time,
            current_metrics: Some(decision.metric_statuses).filter(|m| !m.is_empty()),
            conditions,
            observed_generation: None,
        });
        self.update_status(read, &hpa).await?;
        match decision.sync_error {
            Some(e) => Err(FhpaError::Sync(e)),
            None => Ok(()),
        }
    }

    /// The scale target's kind (from `scaleTargetRef`), the API of its kind in its namespace, and
    /// the template itself.
    async fn template_of(
        &self,
        read: &FederatedHPA,
        hpa: &mut FederatedHPA,
    ) -> Result<(GroupVersionKind, Api<DynamicObject>, DynamicObject), FhpaError> {
        let inner = &self.inner;
        let namespace = read.namespace().unwrap_or_default();
        let target = &read.spec.scale_target_ref;
        let api_version = target.api_version.clone().unwrap_or_default();
        if api_version.matches('/').count() > 1 {
            let e = format!("unexpected GroupVersion string: {api_version}");
            return Err(self
                .fail_able_to_scale(
                    read,
                    hpa,
                    (
                        "FailedGetScale",
                        "FailedGetScale",
                        format!(
                            "the HPA controller was unable to get the target's current scale: {e}"
                        ),
                    ),
                    e.clone(),
                    format!("invalid API version in scale target reference: {e}"),
                )
                .await);
        }
        let gvk = gvk_of(&api_version, &target.kind);
        let template_api = match inner.ctx.control_plane.clients().resolve(&gvk).await {
            Ok((ar, _)) => Ok(Api::<DynamicObject>::namespaced_with(
                inner.client.clone(),
                &namespace,
                &ar,
            )),
            Err(e) => Err(format!(
                "no matches for kind {:?} in version {api_version:?}: {e}",
                target.kind
            )),
        };
        let template = match &template_api {
            Ok(api) => api.get(&target.name).await.map_err(|e| e.to_string()),
            Err(e) => Err(e.clone()),
        };
        match (template_api, template) {
            (Ok(api), Ok(t)) => Ok((gvk, api, t)),
            (_, Err(e)) => Err(self
                .fail_able_to_scale(
                    read,
                    hpa,
                    (
                        "FailedGetScaleTargetRef",
                        "FailedGetScaleTargetRef",
                        format!(
                            "the HPA controller was unable to get the target reference object: {e}"
                        ),
                    ),
                    e.clone(),
                    format!("failed to get scale target reference: {e} "),
                )
                .await),
            (Err(e), Ok(_)) => Err(FhpaError::Sync(e)),
        }
    }

    /// The clusters the template's binding schedules it to.
    async fn clusters_of(
        &self,
        read: &FederatedHPA,
        hpa: &mut FederatedHPA,
        template: &DynamicObject,
    ) -> Result<Vec<String>, FhpaError> {
        let namespace = read.namespace().unwrap_or_default();
        let (reason, condition_reason, what, e) =
            match self.binding_of(template, &read.spec.scale_target_ref, &namespace) {
                Ok(b) => match self.target_clusters(&b) {
                    Ok(c) => return Ok(c),
                    Err(e) => (
                        "FailedGetTargetClusters",
                        "FailedGetTargetClusters",
                        "the target clusters from binding",
                        e,
                    ),
                },
                Err(e) => (
                    "FailedGetBindings",
                    "FailedGetBinding",
                    "the binding by scaleTargetRef",
                    e,
                ),
            };
        Err(self
            .fail_able_to_scale(
                read,
                hpa,
                (
                    reason,
                    condition_reason,
                    format!("the HPA controller was unable to get {what}: {e}"),
                ),
                e.clone(),
                e,
            )
            .await)
    }

    /// The replicas to scale to: min/max when the template is outside them, else what the
    /// metrics call for, normalized. Scaling is disabled while the target has no replica (unless
    /// minReplicas is 0).
    // Over 80 lines: the three cases (disabled, outside min/max, metrics) in Kubernetes' order.
    async fn decide(
        &self,
        key: &ObjectKey,
        read: &FederatedHPA,
        hpa: &mut FederatedHPA,
        scale: &MultiClusterScale,
        current: i32,
        now: Timestamp,
    ) -> Result<Decision, FhpaError> {
        let min_replicas = read.spec.min_replicas.unwrap_or(1);
        let max_replicas = read.spec.max_replicas;
        let mut decision = Decision {
            current,
            desired: 0,
            rescale: false,
            reason: String::new(),
            metric_statuses: Vec::new(),
            sync_error: None,
        };
        if scale.spec_replicas == 0 && min_replicas != 0 {
            set_condition(
                hpa,
                "ScalingActive",
                "False",
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero".to_owned(),
            );
            return Ok(decision);
        }
        if current > max_replicas {
            decision.reason = "Current number of replicas above Spec.MaxReplicas".to_owned();
            decision.desired = max_replicas;
        } else if current < min_replicas {
            decision.reason = "Current number of replicas below Spec.MinReplicas".to_owned();
            decision.desired = min_replicas;
        } else {
            let specs = metric_specs(read);
            let (proposal, metric, statuses, partial_error) = match self
                .compute_replicas(key, read, hpa, &specs, scale, current)
                .await
            {
                Ok(computed) => computed,
                Err(e) => {
                    set_current_replicas(hpa, current);
                    if let Err(e) = self.update_status(read, hpa).await {
                        tracing::warn!(error = %e, "FederatedHPA status not written");
                    }
                    self.event(
                        read,
                        EventType::Warning,
                        "FailedComputeMetricsReplicas",
                        e.clone(),
                    )
                    .await;
                    return Err(FhpaError::Sync(format!(
                        "failed to compute desired number of replicas based on listed metrics for {}: {e}",
                        reference_of(read)
                    )));
                }
            };
            decision.sync_error = partial_error;
            decision.metric_statuses = statuses;
            let mut rescale_metric = String::new();
            if proposal > decision.desired {
                decision.desired = proposal;
                rescale_metric = metric;
            }
            if decision.desired > current {
                decision.reason = format!("{rescale_metric} above target");
            }
            if decision.desired < current {
                decision.reason = "All metrics below target".to_owned();
            }
            let p = Proposal {
                current,
                desired: decision.desired,
                min: min_replicas,
                max: max_replicas,
            };
            decision.desired = self.normalize(key, read, hpa, p, now);
        }
        decision.rescale = decision.desired != current;
        Ok(decision)
    }

    /// Applies the stabilization windows and `spec.behavior` to a proposal, setting the
    /// conditions they report.
    fn normalize(
        &self,
        key: &ObjectKey,
        read: &FederatedHPA,
        hpa: &mut FederatedHPA,
        p: Proposal,
        now: Timestamp,
    ) -> i32 {
        let inner = &self.inner;
        let current = p.current;
        let (normalized, conditions) = match inner.histories.lock() {
            Ok(mut h) => match effective_behavior(read, &inner.settings) {
                Some(b) => h.normalize_with_behavior(key.as_str(), p, &b, now),
                None => h.normalize(
                    key.as_str(),
                    p,
                    inner.settings.downscale_stabilization_window,
                    now,
                ),
            },
            Err(_) => (current, Vec::new()),
        };
        for (t, s, r, m) in conditions {
            set_condition(hpa, t, s, r, m.to_owned());
        }
        normalized
    }

    /// Writes the decided replicas to the template's scale subresource, with the condition, Event
    /// and scale history that record it.
    async fn rescale(
        &self,
        key: &ObjectKey,
        read: &FederatedHPA,
        hpa: &mut FederatedHPA,
        template_api: &Api<DynamicObject>,
        decision: &Decision,
        now: Timestamp,
    ) -> Result<(), FhpaError> {
        let inner = &self.inner;
        let Decision {
            current,
            desired,
            reason: rescale_reason,
            ..
        } = decision;
        let (current, desired) = (*current, *desired);
        let patch = serde_json::json!({"spec": {"replicas": desired}});
        if let Err(e) = template_api
            .patch_scale(
                &read.spec.scale_target_ref.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            self.event(
                read,
                EventType::Warning,
                "FailedRescale",
                format!("New size: {desired}; reason: {rescale_reason}; error: {e}"),
            )
            .await;
            set_condition(
                hpa,
                "AbleToScale",
                "False",
                "FailedUpdateScale",
                format!("the HPA controller was unable to update the target scale: {e}"),
            );
            set_current_replicas(hpa, current);
            if let Err(e) = self.update_status(read, hpa).await {
                tracing::warn!(error = %e, "FederatedHPA status not written");
            }
            return Err(FhpaError::Sync(format!(
                "failed to rescale {}: {e}",
                reference_of(read)
            )));
        }
        set_condition(
            hpa,
            "AbleToScale",
            "True",
            "SucceededRescale",
            format!("the HPA controller was able to update the target scale to {desired}"),
        );
        self.event(
            read,
            EventType::Normal,
            "SuccessfulRescale",
            format!("New size: {desired}; reason: {rescale_reason}"),
        )
        .await;
        if let Ok(mut h) = inner.histories.lock() {
            let behavior = effective_behavior(read, &inner.settings);
            h.store_scale_event(key.as_str(), behavior.as_ref(), current, desired, now);
        }
        tracing::info!(fhpa = %key, current, desired, reason = %rescale_reason, "Successfully rescaled FederatedHPA");
        Ok(())
    }
}

/// What one sync decided.
struct Decision {
    /// The template's replicas.
    current: i32,
    /// The replicas to scale to (meaningful when `rescale`).
    desired: i32,
    /// Whether the template's scale is written.
    rescale: bool,
    /// Why, for the Event and the log.
    reason: String,
    /// `status.currentMetrics`.
    metric_statuses: Vec<MetricStatus>,
    /// A metric that failed while others gave a proposal: the sync still fails after the write.
    sync_error: Option<String>,
}

/// `Kind/namespace/name` of the scale target, for errors.
fn reference_of(read: &FederatedHPA) -> String {
    let target = &read.spec.scale_target_ref;
    format!(
        "{}/{}/{}",
        target.kind,
        read.namespace().unwrap_or_default(),
        target.name
    )
}
