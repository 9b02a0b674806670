//! The FederatedHPA controller (`--controllers` name `federatedHorizontalPodAutoscaler`, Karmada's
//! `federatedHPA-controller`): Kubernetes' HPA algorithm over a resource template whose pods run in
//! several member clusters.
//!
//! Each sync (on a spec change, then every `--horizontal-pod-autoscaler-sync-period`) it finds the
//! template's ResourceBinding (by the policy permanent-id label) and the Ready clusters it is
//! scheduled to; in each of them it reads the workload's scale subresource (replicas, selector), the
//! pods of that selector and their metrics (`metrics.k8s.io`, `custom.metrics.k8s.io`, see
//! [`metrics`]). The replica calculator ([`calculator`]) turns them into a proposal per metric (the
//! largest wins), calibrated by template replicas / member replicas; [`normalize`] applies the
//! stabilization windows, `spec.behavior`'s policies and min/max. A change is written to the
//! template's `scale` subresource (the scheduler then divides the new count among the clusters).
//!
//! Status (`currentReplicas`, `desiredReplicas`, `currentMetrics`, `lastScaleTime`, conditions
//! `AbleToScale`, `ScalingActive`, `ScalingLimited`) and Events carry Karmada's reasons and
//! messages. Karmada's admission defaults (minReplicas 1, 80% CPU, the behavior's defaults) are
//! applied in memory when the object lacks them.

pub mod calculator;
pub mod metrics;
pub mod normalize;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use apimachinery::gvk::gvk_of;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, HorizontalPodAutoscalerBehavior,
    HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerStatus, MetricIdentifier, MetricSpec,
    MetricStatus, MetricTarget, MetricValueStatus, ObjectMetricStatus, PodsMetricStatus,
    ResourceMetricSource, ResourceMetricStatus,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::jiff::Timestamp;
use karmada_apis::autoscaling::v1alpha1::FederatedHPA;
use karmada_apis::well_known::{
    CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL, PROPAGATION_POLICY_PERMANENT_ID_LABEL,
};
use karmada_apis::{Cluster, ResourceBinding};
use karmada_controllers_common::context::HpaSettings;
use karmada_controllers_common::error::framework;
use karmada_controllers_common::events::{EventRecorder, EventType, reference_of};
use karmada_controllers_common::handlers::{
    register, serve_until_cancelled, shared_controller, start_fn_of,
};
use karmada_controllers_common::patch::guarded_merge_patch;
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use lariat::{HandlerResult, ObjectKey, SharedController, SyncWait};
use tokio_util::sync::CancellationToken;

use calculator::{CalcError, Calculator, PodMetricsInfo};
use metrics::MetricsError;
use normalize::{Histories, Proposal, default_behavior};

/// The controller's `--controllers` name.
pub const NAME: &str = "federatedHorizontalPodAutoscaler";
/// Karmada's controller name (User-Agent suffix, Event source).
pub const CONTROLLER_NAME: &str = "federatedHPA-controller";

/// Karmada's default target when a FederatedHPA lists no metric: 80% average CPU utilization.
pub const DEFAULT_CPU_UTILIZATION: i32 = 80;

/// A FederatedHPA controller failure (what the sync returns; Events carry the details).
#[derive(Debug, thiserror::Error)]
pub enum FhpaError {
    /// The framework failed.
    #[error(transparent)]
    Framework(#[from] karmada_controllers_common::error::FrameworkError),
    /// One step of the sync failed; the message names the FederatedHPA's target and the cause.
    #[error("{0}")]
    Sync(String),
}

/// One member cluster the target runs in, as seen this sync.
struct MemberTarget {
    cluster: String,
    client: Client,
    selector: String,
}

/// The scale of the target summed over the member clusters, and their pods.
struct MultiClusterScale {
    spec_replicas: i32,
    status_replicas: i32,
    members: Vec<MemberTarget>,
    pods: Vec<Pod>,
}

/// One metric's proposal.
struct Proposed {
    replicas: i32,
    name: String,
    status: MetricStatus,
}

/// One metric's failure: the condition to set and the error.
struct Invalid {
    condition: HorizontalPodAutoscalerCondition,
    error: String,
}

struct Inner {
    ctx: ControllerContext,
    client: Client,
    hpas: SharedController<FederatedHPA>,
    bindings: SharedController<ResourceBinding>,
    clusters: SharedController<Cluster>,
    events: EventRecorder,
    calculator: Calculator,
    settings: HpaSettings,
    histories: Mutex<Histories>,
    /// Per FederatedHPA: the generation last synced and when the next periodic sync is due, so the
    /// controller's own status writes do not trigger syncs (Karmada filters on generation changes).
    due: Mutex<HashMap<String, (Option<i64>, Instant)>>,
    /// Per FederatedHPA: the pods it counted last, to find pods claimed by two of them.
    pods_of: Mutex<HashMap<String, BTreeSet<String>>>,
    cancel: CancellationToken,
}

/// The FederatedHPA controller. Cheap to clone.
#[derive(Clone)]
pub struct FederatedHpaController {
    inner: Arc<Inner>,
}

impl FederatedHpaController {
    /// Builds the controller on the context's control plane.
    pub fn new(ctx: ControllerContext) -> Result<Self, FhpaError> {
        let cp = &ctx.control_plane;
        let client = cp
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("federatedHorizontalPodAutoscaler client"))?;
        let hpas = shared_controller::<FederatedHPA>(cp)?;
        let bindings = shared_controller::<ResourceBinding>(cp)?;
        let clusters = shared_controller::<Cluster>(cp)?;
        let cancel = ctx.cancel.child_token();
        let events = ctx.events.recorder(CONTROLLER_NAME);
        let settings = ctx.settings.hpa.clone();
        let calculator = Calculator {
            tolerance: settings.tolerance,
            cpu_initialization_period: settings.cpu_initialization_period,
            delay_of_initial_readiness_status: settings.initial_readiness_delay,
        };
        Ok(FederatedHpaController {
            inner: Arc::new(Inner {
                ctx,
                client,
                hpas,
                bindings,
                clusters,
                events,
                calculator,
                settings,
                histories: Mutex::new(Histories::default()),
                due: Mutex::new(HashMap::new()),
                pods_of: Mutex::new(HashMap::new()),
                cancel,
            }),
        })
    }

    /// Registers the handler and runs until the context is cancelled.
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        let timeout = inner.ctx.settings.cluster_cache_sync_timeout;
        for synced in [
            inner.bindings.wait_synced(&inner.cancel, timeout).await?,
            inner.clusters.wait_synced(&inner.cancel, timeout).await?,
        ] {
            let SyncWait::Synced = synced else {
                return Ok(());
            };
        }
        register(
            &inner.hpas,
            NAME,
            &inner.cancel,
            &self,
            |this: Self, k, o: Option<Arc<FederatedHPA>>| async move { this.handle(k, o).await },
        );
        let SyncWait::Synced = inner.hpas.wait_synced(&inner.cancel, timeout).await? else {
            return Ok(());
        };
        serve_until_cancelled(&inner.ctx.synced, &inner.cancel, NAME).await;
        Ok(())
    }

    async fn handle(
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
        match self.reconcile(&key, &hpa).await {
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

    async fn event(&self, hpa: &FederatedHPA, type_: EventType, reason: &str, message: String) {
        self.inner
            .events
            .record(&reference_of(hpa), type_, reason, message)
            .await;
    }

    /// Writes the status when it differs from what was read; a failure is an Event
    /// (`FailedUpdateStatus`) and the error.
    async fn update_status(
        &self,
        read: &FederatedHPA,
        updated: &FederatedHPA,
    ) -> Result<(), FhpaError> {
        let name = read.name_any();
        let namespace = read.namespace().unwrap_or_default();
        let err = |m: String| FhpaError::Sync(format!("failed to update status for {name}: {m}"));
        let Some(patch) = guarded_merge_patch(read, updated).map_err(|e| err(e.to_string()))?
        else {
            return Ok(());
        };
        let api: Api<FederatedHPA> = Api::namespaced(self.inner.client.clone(), &namespace);
        if let Err(e) = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            self.event(
                read,
                EventType::Warning,
                "FailedUpdateStatus",
                e.to_string(),
            )
            .await;
            return Err(err(e.to_string()));
        }
        Ok(())
    }

    /// Records a failure before the scale is known: Event `reason`, `AbleToScale=False` with
    /// `condition_reason` and `message`, the status written, and the error returned.
    async fn fail_able_to_scale(
        &self,
        read: &FederatedHPA,
        updated: &mut FederatedHPA,
        (reason, condition_reason, message): (&str, &str, String),
        event_message: String,
        error: String,
    ) -> FhpaError {
        self.event(read, EventType::Warning, reason, event_message)
            .await;
        set_condition(updated, "AbleToScale", "False", condition_reason, message);
        if let Err(e) = self.update_status(read, updated).await {
            tracing::warn!(error = %e, "FederatedHPA status not written");
        }
        FhpaError::Sync(error)
    }

    #[allow(clippy::too_many_lines)]
    async fn reconcile(&self, key: &ObjectKey, read: &FederatedHPA) -> Result<(), FhpaError> {
        let inner = &self.inner;
        let mut hpa = read.clone();
        let namespace = read.namespace().unwrap_or_default();
        let target = read.spec.scale_target_ref.clone();
        let reference = format!("{}/{namespace}/{}", target.kind, target.name);
        let api_version = target.api_version.clone().unwrap_or_default();

        if api_version.matches('/').count() > 1 {
            let e = format!("unexpected GroupVersion string: {api_version}");
            return Err(self
                .fail_able_to_scale(
                    read,
                    &mut hpa,
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

        // The template on the control plane.
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
        let (template_api, template) = match (template_api, template) {
            (Ok(api), Ok(t)) => (api, t),
            (_, Err(e)) => {
                return Err(self
                    .fail_able_to_scale(
                        read,
                        &mut hpa,
                        (
                            "FailedGetScaleTargetRef",
                            "FailedGetScaleTargetRef",
                            format!("the HPA controller was unable to get the target reference object: {e}"),
                        ),
                        e.clone(),
                        format!("failed to get scale target reference: {e} "),
                    )
                    .await);
            }
            (Err(e), Ok(_)) => return Err(FhpaError::Sync(e)),
        };

        let clusters = match self.binding_of(&template, &target, &namespace) {
            Ok(b) => match self.target_clusters(&b) {
                Ok(c) => c,
                Err(e) => {
                    return Err(self
                        .fail_able_to_scale(
                            read,
                            &mut hpa,
                            (
                                "FailedGetTargetClusters",
                                "FailedGetTargetClusters",
                                format!("the HPA controller was unable to get the target clusters from binding: {e}"),
                            ),
                            e.clone(),
                            e,
                        )
                        .await);
                }
            },
            Err(e) => {
                return Err(self
                    .fail_able_to_scale(
                        read,
                        &mut hpa,
                        (
                            "FailedGetBindings",
                            "FailedGetBinding",
                            format!("the HPA controller was unable to get the binding by scaleTargetRef: {e}"),
                        ),
                        e.clone(),
                        e,
                    )
                    .await);
            }
        };

        let scale = match self
            .scale_of_members(&clusters, &mut hpa, &gvk, &namespace)
            .await
        {
            Ok(s) => s,
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

        let template_scale: Scale = template_api.get_scale(&target.name).await.map_err(|e| {
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

        let min_replicas = read.spec.min_replicas.unwrap_or(1);
        let max_replicas = read.spec.max_replicas;
        let mut metric_statuses = Vec::new();
        let mut desired = 0;
        let mut rescale_reason = String::new();
        let mut sync_error = None;
        let rescale;
        if scale.spec_replicas == 0 && min_replicas != 0 {
            rescale = false;
            set_condition(
                &mut hpa,
                "ScalingActive",
                "False",
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero".to_owned(),
            );
        } else if current > max_replicas {
            rescale_reason = "Current number of replicas above Spec.MaxReplicas".to_owned();
            desired = max_replicas;
            rescale = desired != current;
        } else if current < min_replicas {
            rescale_reason = "Current number of replicas below Spec.MinReplicas".to_owned();
            desired = min_replicas;
            rescale = desired != current;
        } else {
            let specs = metric_specs(read);
            match self
                .compute_replicas(key, read, &mut hpa, &specs, &scale, current)
                .await
            {
                Err(e) => {
                    set_current_replicas(&mut hpa, current);
                    if let Err(e) = self.update_status(read, &hpa).await {
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
                        "failed to compute desired number of replicas based on listed metrics for {reference}: {e}"
                    )));
                }
                Ok((proposal, metric, statuses, partial_error)) => {
                    sync_error = partial_error;
                    metric_statuses = statuses;
                    let mut rescale_metric = String::new();
                    if proposal > desired {
                        desired = proposal;
                        rescale_metric = metric;
                    }
                    if desired > current {
                        rescale_reason = format!("{rescale_metric} above target");
                    }
                    if desired < current {
                        rescale_reason = "All metrics below target".to_owned();
                    }
                    let p = Proposal {
                        current,
                        desired,
                        min: min_replicas,
                        max: max_replicas,
                    };
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
                        set_condition(&mut hpa, t, s, r, m.to_owned());
                    }
                    desired = normalized;
                    rescale = desired != current;
                }
            }
        }

        let mut last_scale_time = hpa.status.as_ref().and_then(|s| s.last_scale_time.clone());
        if rescale {
            let patch = serde_json::json!({"spec": {"replicas": desired}});
            if let Err(e) = template_api
                .patch_scale(&target.name, &PatchParams::default(), &Patch::Merge(&patch))
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
                    &mut hpa,
                    "AbleToScale",
                    "False",
                    "FailedUpdateScale",
                    format!("the HPA controller was unable to update the target scale: {e}"),
                );
                set_current_replicas(&mut hpa, current);
                if let Err(e) = self.update_status(read, &hpa).await {
                    tracing::warn!(error = %e, "FederatedHPA status not written");
                }
                return Err(FhpaError::Sync(format!(
                    "failed to rescale {reference}: {e}"
                )));
            }
            set_condition(
                &mut hpa,
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
            last_scale_time = Some(Time(now));
        } else {
            desired = current;
        }
        let conditions = hpa.status.as_ref().and_then(|s| s.conditions.clone());
        hpa.status = Some(HorizontalPodAutoscalerStatus {
            current_replicas: Some(current),
            desired_replicas: desired,
            last_scale_time,
            current_metrics: Some(metric_statuses).filter(|m| !m.is_empty()),
            conditions,
            observed_generation: None,
        });
        self.update_status(read, &hpa).await?;
        match sync_error {
            Some(e) => Err(FhpaError::Sync(e)),
            None => Ok(()),
        }
    }

    /// The template's ResourceBinding: among the bindings carrying the template's policy
    /// permanent-id label, the one whose resource is the target.
    fn binding_of(
        &self,
        template: &DynamicObject,
        target: &k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference,
        namespace: &str,
    ) -> Result<Arc<ResourceBinding>, String> {
        let labels = template.labels();
        if labels.is_empty() {
            return Err("target resource has no label".to_owned());
        }
        let (label, id) = if let Some(id) = labels.get(PROPAGATION_POLICY_PERMANENT_ID_LABEL) {
            (PROPAGATION_POLICY_PERMANENT_ID_LABEL, id)
        } else if let Some(id) = labels.get(CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL) {
            (CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL, id)
        } else {
            return Err("no label of policy permanent-id found".to_owned());
        };
        let bindings: Vec<_> = self
            .inner
            .bindings
            .store()
            .list()
            .into_iter()
            .filter(|b| b.labels().get(label) == Some(id))
            .collect();
        if bindings.is_empty() {
            return Err("length of binding list is zero".to_owned());
        }
        let api_version = target.api_version.as_deref().unwrap_or_default();
        bindings
            .into_iter()
            .find(|b| {
                let r = &b.spec.resource;
                r.name == target.name
                    && r.api_version == api_version
                    && r.kind == target.kind
                    && b.namespace().as_deref() == Some(namespace)
            })
            .ok_or_else(|| "no binding matches the target resource".to_owned())
    }

    /// The Ready clusters the binding schedules to.
    fn target_clusters(&self, binding: &ResourceBinding) -> Result<Vec<String>, String> {
        if binding.spec.clusters.is_empty() {
            return Err("binding has no schedulable clusters".to_owned());
        }
        let store = self.inner.clusters.store();
        let mut out = Vec::new();
        for target in &binding.spec.clusters {
            let Some(cluster) = store.get_named(None, &target.name) else {
                return Err(format!(
                    "clusters.cluster.karmada.io \"{}\" not found",
                    target.name
                ));
            };
            if cluster.is_ready() {
                out.push(target.name.clone());
            }
        }
        Ok(out)
    }

    /// The target's scale summed over `clusters`, and the pods of each cluster's selector. A cluster
    /// that cannot be read is skipped (logged); none readable is an error.
    async fn scale_of_members(
        &self,
        clusters: &[String],
        hpa: &mut FederatedHPA,
        gvk: &kube::api::GroupVersionKind,
        namespace: &str,
    ) -> Result<MultiClusterScale, String> {
        let name = hpa.spec.scale_target_ref.name.clone();
        let mut out = MultiClusterScale {
            spec_replicas: 0,
            status_replicas: 0,
            members: Vec::new(),
            pods: Vec::new(),
        };
        for cluster in clusters {
            let Some(member) = self.inner.ctx.members.get(cluster) else {
                tracing::warn!(cluster, "Failed to get cluster client of cluster");
                continue;
            };
            let client = match member.clients().client_for_controller(CONTROLLER_NAME) {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(cluster, error = %e, "Failed to get cluster client of cluster");
                    continue;
                }
            };
            let ar = match member.clients().resolve(gvk).await {
                Ok((ar, _)) => ar,
                Err(e) => {
                    tracing::warn!(cluster, error = %e, "Failed to map the target's kind in cluster");
                    continue;
                }
            };
            let api = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &ar);
            let scale = match api.get_scale(&name).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(cluster, resource = %name, error = %e, "Failed to get scale subResource of resource in cluster");
                    continue;
                }
            };
            out.spec_replicas += scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
            let status = scale.status.unwrap_or_default();
            out.status_replicas += status.replicas;
            let selector = status.selector.unwrap_or_default();
            if selector.is_empty() {
                self.event(
                    hpa,
                    EventType::Warning,
                    "SelectorRequired",
                    "selector is required".to_owned(),
                )
                .await;
                set_condition(
                    hpa,
                    "ScalingActive",
                    "False",
                    "InvalidSelector",
                    "the HPA target's scale is missing a selector".to_owned(),
                );
                continue;
            }
            let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
            match pods.list(&ListParams::default().labels(&selector)).await {
                Ok(list) => out.pods.extend(list.items),
                Err(e) => {
                    if is_bad_selector(&e) {
                        let message = format!(
                            "couldn't convert selector into a corresponding internal selector object: {e}"
                        );
                        self.event(hpa, EventType::Warning, "InvalidSelector", message.clone())
                            .await;
                        set_condition(hpa, "ScalingActive", "False", "InvalidSelector", message);
                    } else {
                        tracing::warn!(cluster, error = %e, "Failed to get podList for cluster");
                    }
                    continue;
                }
            }
            out.members.push(MemberTarget {
                cluster: cluster.clone(),
                client,
                selector,
            });
        }
        if out.spec_replicas == 0 {
            return Err(
                "failed to get replicas in any of clusters, possibly because all of clusters are not ready"
                    .to_owned(),
            );
        }
        Ok(out)
    }

    /// The largest proposal of the metrics, its metric's description, the statuses and, when some
    /// metrics failed but others scale, the error to report after scaling. An error when no metric
    /// can be used (or some failed and the rest would scale down): the condition of the first
    /// failure is set.
    async fn compute_replicas(
        &self,
        key: &ObjectKey,
        read: &FederatedHPA,
        hpa: &mut FederatedHPA,
        specs: &[MetricSpec],
        scale: &MultiClusterScale,
        template_replicas: i32,
    ) -> Result<(i32, String, Vec<MetricStatus>, Option<String>), String> {
        // Pods counted by another FederatedHPA too (Karmada's ambiguous selector check).
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

    async fn unable(&self, hpa: &FederatedHPA, reason: &str, error: String) -> Invalid {
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

    async fn compute_metric(
        &self,
        hpa: &FederatedHPA,
        spec: &MetricSpec,
        spec_replicas: i32,
        scale: &MultiClusterScale,
        calibration: f64,
    ) -> Result<Proposed, Invalid> {
        let namespace = hpa.namespace().unwrap_or_default();
        let now = Timestamp::now();
        let calc = &self.inner.calculator;
        match spec.type_.as_str() {
            "Resource" | "ContainerResource" => {
                let (resource, target, container) = match (&spec.resource, &spec.container_resource)
                {
                    (Some(r), _) if spec.type_ == "Resource" => {
                        (r.name.clone(), r.target.clone(), None)
                    }
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
            "Pods" => {
                let Some(source) = &spec.pods else {
                    let e = format!("unknown metric source type {:?}", spec.type_);
                    return Err(self.unable(hpa, "InvalidMetricSourceType", e).await);
                };
                let metric_name = source.metric.name.clone();
                let metric_selector = selector_string(source.metric.selector.as_ref());
                let target = milli_of(source.target.average_value.as_ref());
                let mut merged = PodMetricsInfo::new();
                let mut first_error = None;
                let mut any_ok = false;
                for m in &scale.members {
                    match metrics::pods_metrics(
                        &m.client,
                        &namespace,
                        &m.selector,
                        &metric_name,
                        &metric_selector,
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
                let fetched = match (any_ok, first_error) {
                    (false, Some(e)) => Err(e),
                    _ if merged.is_empty() => Err(MetricsError::NoCustomMetrics),
                    _ => Ok(merged),
                };
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
                        invalid.error =
                            format!("failed to get pods metric value: {}", invalid.error);
                        Err(invalid)
                    }
                }
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

    /// A Resource or ContainerResource metric: replicas, description and current value.
    #[allow(clippy::too_many_arguments)]
    async fn resource_status(
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
        let fetched = self
            .resource_metrics(namespace, resource, container, scale)
            .await;
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
    async fn resource_metrics(
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
    async fn object_status(
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
        let metric_selector = selector_string(source.metric.selector.as_ref());
        let unable = |e: &dyn std::fmt::Display| {
            // Karmada's message puts the arguments in this order.
            format!(
                "unable to get metric {metric_name}: {} on {namespace} {}/{e}",
                described.kind, described.name
            )
        };
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
                &namespace,
                &plural,
                &described.name,
                &metric_name,
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
            let e = first_error.unwrap_or_else(|| MetricsError::NoCustomMetrics.to_string());
            return Err(unable(&e));
        }
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
}

/// Whether the API server rejected a label selector.
fn is_bad_selector(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 400)
}

/// The spec's metrics, or Karmada's default (80% average CPU utilization) when there are none.
fn metric_specs(hpa: &FederatedHPA) -> Vec<MetricSpec> {
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
fn effective_behavior(
    hpa: &FederatedHPA,
    settings: &HpaSettings,
) -> Option<HorizontalPodAutoscalerBehavior> {
    hpa.spec
        .behavior
        .as_ref()
        .map(|b| default_behavior(b, settings.downscale_stabilization_window))
}

fn set_current_replicas(hpa: &mut FederatedHPA, current: i32) {
    let status = hpa.status.get_or_insert_default();
    status.current_replicas = Some(current);
}

/// Sets condition `type_` (added when absent); its transition time moves only when the status does.
fn set_condition(hpa: &mut FederatedHPA, type_: &str, status: &str, reason: &str, message: String) {
    let conditions = hpa
        .status
        .get_or_insert_default()
        .conditions
        .get_or_insert_default();
    let index = match conditions.iter().position(|c| c.type_ == type_) {
        Some(i) => i,
        None => {
            conditions.push(HorizontalPodAutoscalerCondition {
                type_: type_.to_owned(),
                ..Default::default()
            });
            conditions.len() - 1
        }
    };
    let c = &mut conditions[index];
    if c.status != status {
        c.last_transition_time = Some(Time(Timestamp::now()));
    }
    c.status = status.to_owned();
    c.reason = Some(reason.to_owned());
    c.message = Some(message);
}

fn milli_of(q: Option<&K8sQuantity>) -> i64 {
    q.and_then(|q| apimachinery::quantity::Quantity::from_k8s(q).ok())
        .map_or(0, |q| q.milli_value())
}

/// A milli-value as a decimal quantity (`250m`, `2`), as Go's `NewMilliQuantity(v, DecimalSI)`.
fn milli_quantity(milli: i64) -> K8sQuantity {
    apimachinery::quantity::Quantity::from_milli(
        i128::from(milli),
        apimachinery::quantity::Format::DecimalSi,
    )
    .to_k8s()
}

/// A label selector in the query-string syntax (`a=b,c in (d,e),!f`); empty for none.
fn selector_string(selector: Option<&LabelSelector>) -> String {
    let Some(s) = selector else {
        return String::new();
    };
    let mut parts: Vec<String> = s
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in s.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            _ => format!("!{}", e.key),
        });
    }
    parts.join(",")
}

/// The start function registered as `federatedHorizontalPodAutoscaler`.
pub fn start_fn() -> StartFn {
    start_fn_of(FederatedHpaController::new, FederatedHpaController::run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_render_as_query_strings() {
        let s: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                 {"key": "x", "operator": "DoesNotExist"}]
        }))
        .unwrap();
        assert_eq!(selector_string(Some(&s)), "app=web,tier in (a,b),!x");
        assert_eq!(selector_string(None), "");
    }

    #[test]
    fn milli_quantities_are_decimal() {
        assert_eq!(milli_quantity(250).0, "250m");
        assert_eq!(milli_quantity(2000).0, "2");
    }

    #[test]
    fn conditions_keep_their_transition_time_while_the_status_holds() {
        let mut hpa = FederatedHPA::new("h", Default::default());
        set_condition(&mut hpa, "AbleToScale", "True", "A", "m".into());
        let first = hpa.status.as_ref().unwrap().conditions.as_ref().unwrap()[0]
            .last_transition_time
            .clone();
        set_condition(&mut hpa, "AbleToScale", "True", "B", "n".into());
        let c = &hpa.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
        assert_eq!(c.last_transition_time, first);
        assert_eq!(c.reason.as_deref(), Some("B"));
    }
}
