//! Preemption (gate `SchedulerPreemption`, karmada-rs's own, under `PriorityBasedScheduling`).
//!
//! A binding that is `Unschedulable` for lack of room (Karmada's capacity failure: a Divided
//! workload whose clusters cannot hold its replicas) takes the placements of strictly
//! lower-priority bindings on clusters that pass its filters, when its priority comes from a
//! Kubernetes PriorityClass (its policy's `schedulePriority.priorityClassSource:
//! KubePriorityClass`) whose `preemptionPolicy` is `PreemptLowerPriority` (Kubernetes' default;
//! `Never` only orders the queue). As in Kubernetes, bindings of any namespace may be victims.
//! The victims are chosen by `karmada_scheduler::preempt`, evicted from those clusters as
//! Karmada's failover evicts (a graceful eviction task, reason `Preempted`, producer `Scheduler`,
//! purge mode `Gracefully`: the graceful eviction controller and `--graceful-eviction-timeout`
//! apply) and so scheduled again, after the preemptor, whose result counts the freed room at once.
//!
//! The room stays claimed for the preemptor (like kube-scheduler's nominated node) until the
//! clusters' resource summaries show its replicas, or `--graceful-eviction-timeout` passes, or it
//! is deleted: bindings of its priority or lower see the claimed part not yet in the summary as
//! allocated, so the victims are not scheduled back into the room once they have left.
//!
//! Events: `Preempted` on each victim binding and its template, `PreemptionSucceeded` (Normal) or
//! `PreemptionFailed` (Warning) on the preemptor and its template.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::scheduling::v1::PriorityClass;
use karmada_apis::policy::v1alpha1::PurgeMode;
use karmada_apis::well_known::{
    CLUSTER_PROPAGATION_POLICY_ANNOTATION, PROPAGATION_POLICY_NAME_ANNOTATION,
    PROPAGATION_POLICY_NAMESPACE_ANNOTATION,
};
use karmada_apis::work::v1alpha2::{GracefulEvictionTask, ResourceBindingSpec};
use karmada_apis::{
    Cluster, ClusterPropagationPolicy, ClusterResourceBinding, PropagationPolicy, ResourceBinding,
};
use karmada_controllers_common::binding::BindingObject;
use karmada_controllers_common::error::ApiError;
use karmada_controllers_common::patch::patch_changes;
use karmada_controllers_common::priority::{kube_priority_class, may_preempt, priority_class};
use karmada_scheduler::preempt::{self, Claim, Occupant, Resources};
use karmada_scheduler::{ScheduleOptions, ScheduleResult};
use kube::Resource;
use lariat::events::{EventType, reference_of};
use parking_lot::Mutex;

use super::Scheduler;
use super::events::template_reference;
use super::handlers::responsible;
use super::write::key_of;

/// The graceful eviction reason of a victim, and the Event reason on it and its template.
pub const REASON_PREEMPTED: &str = "Preempted";
/// The graceful eviction producer of a victim's task.
pub const EVICTION_PRODUCER_SCHEDULER: &str = "Scheduler";
/// Event on the preemptor: victims were evicted and it was scheduled with their room.
pub const REASON_PREEMPTION_SUCCEEDED: &str = "PreemptionSucceeded";
/// Warning Event on the preemptor: no set of lower-priority placements makes it fit, or evicting
/// them failed.
pub const REASON_PREEMPTION_FAILED: &str = "PreemptionFailed";

/// One preemptor's claim on one cluster.
struct Entry {
    preemptor: String,
    priority: i32,
    cluster: String,
    claim: Claim,
    made: Instant,
}

/// The room claimed by preemptors.
pub(super) struct Claims {
    entries: Mutex<Vec<Entry>>,
    ttl: Duration,
}

impl Claims {
    /// Claims that last at most `ttl`.
    pub(super) fn new(ttl: Duration) -> Self {
        Claims {
            entries: Mutex::new(Vec::new()),
            ttl,
        }
    }

    /// Drops the claims of `preemptor` (deleted, or its preemption failed).
    pub(super) fn forget(&self, preemptor: &str) {
        self.entries.lock().retain(|e| e.preemptor != preemptor);
    }

    /// `clusters` as binding `key` of `priority` sees them: what preemptors of its priority or
    /// higher claimed and the summaries do not show yet counts as allocated.
    pub(super) fn view(
        &self,
        key: &str,
        priority: i32,
        clusters: Vec<Arc<Cluster>>,
    ) -> Vec<Arc<Cluster>> {
        let mut entries = self.entries.lock();
        entries.retain(|e| e.made.elapsed() < self.ttl);
        if entries.is_empty() {
            return clusters;
        }
        clusters
            .into_iter()
            .map(|c| {
                let name = c.metadata.name.as_deref().unwrap_or_default();
                let mut held = Resources::new();
                for e in entries
                    .iter()
                    .filter(|e| e.cluster == name && e.preemptor != key && e.priority >= priority)
                {
                    preempt::add(&mut held, &e.claim.outstanding(&c));
                }
                if held.is_empty() {
                    c
                } else {
                    Arc::new(preempt::with_allocated(&c, &held))
                }
            })
            .collect()
    }

    fn add(&self, entry: Entry) {
        self.entries.lock().push(entry);
    }
}

/// A victim binding, of either kind.
enum Victim {
    Rb(Arc<ResourceBinding>),
    Crb(Arc<ClusterResourceBinding>),
}

/// `karmada_rs_scheduler_preemption_attempts_total{result}` and
/// `karmada_rs_scheduler_preemption_victims_total`, registered at the first attempt.
struct PreemptionMetrics {
    attempts: prometheus::IntCounterVec,
    victims: prometheus::IntCounter,
}

fn metrics() -> Option<&'static PreemptionMetrics> {
    static METRICS: OnceLock<Option<PreemptionMetrics>> = OnceLock::new();
    METRICS
        .get_or_init(|| {
            let attempts = prometheus::IntCounterVec::new(
                prometheus::Opts::new(
                    "karmada_rs_scheduler_preemption_attempts_total",
                    "Number of preemption attempts of bindings that did not fit, by result (preempted, unresolvable, error).",
                ),
                &["result"],
            )
            .map_err(|e| tracing::error!(error = %e, "invalid preemption metric definition"))
            .ok()?;
            let victims = prometheus::IntCounter::new(
                "karmada_rs_scheduler_preemption_victims_total",
                "Number of placements (a binding on a cluster) evicted by preemption.",
            )
            .map_err(|e| tracing::error!(error = %e, "invalid preemption metric definition"))
            .ok()?;
            let registry = lariat::metrics::registry();
            for c in [
                Box::new(attempts.clone()) as Box<dyn prometheus::core::Collector>,
                Box::new(victims.clone()),
            ] {
                if let Err(e) = registry.register(c) {
                    tracing::warn!(error = %e, "preemption metric not registered");
                }
            }
            Some(PreemptionMetrics { attempts, victims })
        })
        .as_ref()
}

fn count_attempt(result: &str, victims: usize) {
    if let Some(m) = metrics() {
        m.attempts.with_label_values(&[result]).inc();
        m.victims.inc_by(u64::try_from(victims).unwrap_or(u64::MAX));
    }
}

fn created_millis(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> i64 {
    meta.creation_timestamp
        .as_ref()
        .map_or(0, |t| t.0.as_millisecond())
}

/// Claims for `preemptor` the room its result takes on the clusters its victims leave.
fn claim_room(
    claims: &Claims,
    preemptor: &str,
    spec: &ResourceBindingSpec,
    clusters: &[&Cluster],
    chosen: &preempt::Preemption,
) {
    let mut freed: BTreeMap<&str, Resources> = BTreeMap::new();
    for v in &chosen.victims {
        preempt::add(freed.entry(v.cluster.as_str()).or_default(), &v.usage());
    }
    for target in &chosen.result.clusters {
        let (Some(room), Some(cluster)) = (
            freed.get(target.name.as_str()),
            clusters
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(&target.name)),
        ) else {
            continue;
        };
        let new = target
            .replicas
            .saturating_sub(spec.assigned_replicas_for_cluster(&target.name));
        claims.add(Entry {
            preemptor: preemptor.to_owned(),
            priority: spec.schedule_priority_value(),
            cluster: target.name.clone(),
            claim: Claim::new(
                cluster,
                preempt::usage(new, spec.replica_requirements.as_ref()),
                room,
            ),
            made: Instant::now(),
        });
    }
}

impl Scheduler {
    /// Tries to make `b` fit by preempting lower-priority placements; the result counting the room
    /// they freed, or `None` (nothing written) when it may not or cannot.
    pub(super) async fn preempt<B: BindingObject>(
        &self,
        k: &str,
        b: &B,
        clusters: &[Arc<Cluster>],
        options: &ScheduleOptions,
    ) -> Option<ScheduleResult> {
        let claims = self.inner.preemption.as_ref()?;
        let spec = b.binding_spec();
        let priority = spec.schedule_priority_value();
        let (occupants, victims) = self.occupants(k, priority);
        if occupants.is_empty() {
            return None;
        }
        let class = match self.preemptor_class(b).await {
            Ok(Some(class)) if may_preempt(&class) => class,
            Ok(_) => return None,
            Err(e) => {
                tracing::warn!(binding = %k, error = %e, "cannot tell whether the binding may preempt");
                count_attempt("error", 0);
                return None;
            }
        };
        let class_name = class.metadata.name.unwrap_or_default();
        let refs: Vec<&Cluster> = clusters.iter().map(|c| &**c).collect();
        let Some(chosen) =
            preempt::select_victims(spec, b.binding_status(), &refs, options, &occupants)
        else {
            count_attempt("unresolvable", 0);
            self.record_on(
                b,
                EventType::Warning,
                REASON_PREEMPTION_FAILED,
                format!(
                    "Preemption is not helpful: evicting every lower-priority binding from the clusters that fit would not make room (priority {priority}, PriorityClass {class_name})."
                ),
            )
            .await;
            return None;
        };
        // Claim the room first, so the victims rescheduled by the eviction do not take it.
        claim_room(claims, k, spec, &refs, &chosen);
        let by = format!("{} {} (priority {priority})", B::kind(&()), key_of(b));
        let mut by_binding: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for v in &chosen.victims {
            by_binding
                .entry(v.binding.as_str())
                .or_default()
                .push(v.cluster.as_str());
        }
        for (victim, from) in &by_binding {
            let evicted = match victims.get(*victim) {
                Some(Victim::Rb(v)) => self.evict(&**v, from, &by).await,
                Some(Victim::Crb(v)) => self.evict(&**v, from, &by).await,
                None => Ok(()),
            };
            if let Err(e) = evicted {
                claims.forget(k);
                count_attempt("error", 0);
                tracing::warn!(binding = %k, victim = %victim, error = %e, "preemption failed");
                self.record_on(
                    b,
                    EventType::Warning,
                    REASON_PREEMPTION_FAILED,
                    format!("Preemption failed: {e}"),
                )
                .await;
                return None;
            }
        }
        count_attempt("preempted", chosen.victims.len());
        let list: Vec<String> = chosen
            .victims
            .iter()
            .map(|v| format!("{} on {}", v.binding, v.cluster))
            .collect();
        tracing::info!(binding = %k, victims = ?list, "preempted lower-priority bindings");
        self.record_on(
            b,
            EventType::Normal,
            REASON_PREEMPTION_SUCCEEDED,
            format!(
                "Preempted {} lower-priority placement(s) (PriorityClass {class_name}): {}.",
                list.len(),
                list.join(", ")
            ),
        )
        .await;
        Some(chosen.result)
    }

    /// The placements of bindings this scheduler handles with a priority below `priority` (other
    /// than `k`), and those bindings by key.
    fn occupants(&self, k: &str, priority: i32) -> (Vec<Occupant>, BTreeMap<String, Victim>) {
        let inner = &self.inner;
        let mut occupants = Vec::new();
        let mut victims = BTreeMap::new();
        let mut take = |key: String,
                        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
                        spec: &ResourceBindingSpec|
         -> bool {
            if key == k
                || spec.schedule_priority_value() >= priority
                || meta.deletion_timestamp.is_some()
                || !responsible(inner.name(), meta, spec)
            {
                return false;
            }
            let before = occupants.len();
            for t in spec.clusters.iter().filter(|t| t.replicas > 0) {
                occupants.push(Occupant {
                    binding: key.clone(),
                    cluster: t.name.clone(),
                    priority: spec.schedule_priority_value(),
                    created: created_millis(meta),
                    replicas: t.replicas,
                    requirements: spec.replica_requirements.clone(),
                });
            }
            occupants.len() > before
        };
        for rb in inner.rb.store().list() {
            let key = format!("{}/{}", ResourceBinding::kind(&()), key_of(&*rb));
            if take(key.clone(), &rb.metadata, &rb.spec) {
                victims.insert(key, Victim::Rb(rb));
            }
        }
        for crb in inner.crb.store().list() {
            let key = format!("{}/{}", ClusterResourceBinding::kind(&()), key_of(&*crb));
            if take(key.clone(), &crb.metadata, &crb.spec) {
                victims.insert(key, Victim::Crb(crb));
            }
        }
        (occupants, victims)
    }

    /// The PriorityClass `b`'s priority was resolved from (through its policy), if any.
    async fn preemptor_class<B: BindingObject>(
        &self,
        b: &B,
    ) -> Result<Option<PriorityClass>, ApiError> {
        let client = &self.inner.client;
        let annotations = b.meta().annotations.clone().unwrap_or_default();
        let spec = if let Some(name) = annotations.get(CLUSTER_PROPAGATION_POLICY_ANNOTATION) {
            kube::Api::<ClusterPropagationPolicy>::all(client.clone())
                .get(name)
                .await
                .map_err(|e| ApiError::new("get", "ClusterPropagationPolicy", name, e))?
                .spec
        } else if let (Some(ns), Some(name)) = (
            annotations.get(PROPAGATION_POLICY_NAMESPACE_ANNOTATION),
            annotations.get(PROPAGATION_POLICY_NAME_ANNOTATION),
        ) {
            kube::Api::<PropagationPolicy>::namespaced(client.clone(), ns)
                .get(name)
                .await
                .map_err(|e| ApiError::new("get", "PropagationPolicy", format!("{ns}/{name}"), e))?
                .spec
        } else {
            return Ok(None);
        };
        let Some(class) = kube_priority_class(&spec) else {
            return Ok(None);
        };
        priority_class(client, class)
            .await
            .map(Some)
            .map_err(|e| ApiError::new("get", "PriorityClass", class, e))
    }

    /// Evicts `victim` from `from` (graceful eviction tasks, reason `Preempted`) and records
    /// `Preempted` on it and its template.
    async fn evict<V: BindingObject>(
        &self,
        victim: &V,
        from: &[&str],
        by: &str,
    ) -> Result<(), ApiError> {
        let mut updated = victim.clone();
        let (_, spec) = updated.parts_mut();
        for cluster in from {
            spec.graceful_evict_cluster(
                cluster,
                GracefulEvictionTask {
                    purge_mode: Some(PurgeMode::Gracefully),
                    reason: REASON_PREEMPTED.to_owned(),
                    message: format!("Preempted by {by}"),
                    producer: EVICTION_PRODUCER_SCHEDULER.to_owned(),
                    ..Default::default()
                },
            );
        }
        let namespace = victim.meta().namespace.clone().unwrap_or_default();
        let api = V::api(self.inner.client.clone(), &namespace);
        patch_changes(&api, victim, &updated)
            .await
            .map_err(|e| ApiError::new("evict", V::kind(&()), key_of(victim), e))?;
        for cluster in from {
            self.record_on(
                victim,
                EventType::Normal,
                REASON_PREEMPTED,
                format!("Evicted from cluster {cluster}: preempted by {by}."),
            )
            .await;
        }
        Ok(())
    }

    /// Records an Event on a binding and on its template.
    async fn record_on<B: BindingObject>(
        &self,
        b: &B,
        type_: EventType,
        reason: &'static str,
        message: String,
    ) {
        let recorder = &self.inner.recorder;
        recorder
            .record(&reference_of(b), type_, reason, message.clone())
            .await;
        recorder
            .record(
                &template_reference(b.binding_spec()),
                type_,
                reason,
                message,
            )
            .await;
    }
}
