//! What wakes a binding up: its own changes (when this scheduler is responsible for it) and
//! Cluster changes that may change which clusters fit it.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use karmada_apis::well_known::{
    BINDING_MANAGED_BY_LABEL, CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
    DEFAULT_SCHEDULER_NAME, PROPAGATION_POLICY_PERMANENT_ID_LABEL,
};
use karmada_apis::work::v1alpha2::{ResourceBindingSpec, ResourceBindingStatus};
use karmada_apis::{Cluster, ClusterResourceBinding, ResourceBinding};
use karmada_controllers_common::binding::BindingObject;
use kube::Resource;
use lariat::{HandlerResult, ObjectKey};

use super::Scheduler;
use super::metrics::{
    BINDING_ADD, BINDING_UPDATE, CLUSTER_CHANGED, SCHEDULE_ATTEMPT_FAILURE, count_incoming,
};
use super::schedule::current_affinity;

/// How soon a binding whose write conflicted is scheduled again.
pub(super) const CONFLICT_RETRY: std::time::Duration = std::time::Duration::from_millis(50);

pub(super) fn binding_key<B: Resource<DynamicType = ()>>(key: &ObjectKey) -> String {
    format!("{}/{key}", B::kind(&()))
}

/// Whether the scheduler named `scheduler_name` handles a binding (Karmada's
/// `resourceBindingEventFilter`).
pub(super) fn responsible(
    scheduler_name: &str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: &ResourceBindingSpec,
) -> bool {
    let name = if spec.scheduler_name.is_empty() {
        DEFAULT_SCHEDULER_NAME
    } else {
        spec.scheduler_name.as_str()
    };
    if name != scheduler_name || spec.scheduling_suspended() {
        return false;
    }
    let labels = meta.labels.as_ref();
    [
        PROPAGATION_POLICY_PERMANENT_ID_LABEL,
        CLUSTER_PROPAGATION_POLICY_PERMANENT_ID_LABEL,
        BINDING_MANAGED_BY_LABEL,
    ]
    .iter()
    .any(|l| {
        labels
            .and_then(|m| m.get(*l))
            .is_some_and(|v| !v.is_empty())
    })
}

/// The fields of a Cluster that affect scheduling decisions (not its resource usage).
pub(super) fn cluster_fingerprint(c: &Cluster) -> u64 {
    let mut h = DefaultHasher::new();
    c.metadata.labels.hash(&mut h);
    c.metadata.deletion_timestamp.is_some().hash(&mut h);
    serde_json::to_string(&c.spec)
        .unwrap_or_default()
        .hash(&mut h);
    if let Some(s) = &c.status {
        serde_json::to_string(&s.api_enablements)
            .unwrap_or_default()
            .hash(&mut h);
    }
    h.finish()
}

impl Scheduler {
    pub(super) async fn handle_cluster(
        &self,
        key: ObjectKey,
        obj: Option<Arc<Cluster>>,
    ) -> HandlerResult<Cluster> {
        let inner = &self.inner;
        let name = key.name().to_owned();
        if let Some(estimators) = &inner.estimators {
            estimators.cluster_changed(&name, obj.as_deref());
        }
        let fp = obj.as_deref().map(cluster_fingerprint);
        {
            let mut fps = inner.cluster_fingerprints.lock();
            let old = fps.get(&name).copied();
            if old == fp {
                return HandlerResult::Success;
            }
            match fp {
                Some(f) => fps.insert(name.clone(), f),
                None => fps.remove(&name),
            };
        }
        tracing::debug!(cluster = %name, "cluster changed; requeueing affected bindings");
        let affected = |meta_spec: (&ResourceBindingSpec, Option<&ResourceBindingStatus>)| {
            let (spec, status) = meta_spec;
            if spec.target_contains(&name) {
                return true;
            }
            let Some(placement) = spec.placement.as_ref() else {
                return false;
            };
            match (current_affinity(placement, status), obj.as_deref()) {
                (None, _) => true,
                (Some(a), Some(c)) => karmada_policy::selector::cluster_matches(c, a),
                (Some(_), None) => false,
            }
        };
        for rb in inner.rb.store().list() {
            if responsible(inner.name(), &rb.metadata, &rb.spec)
                && affected((&rb.spec, rb.status.as_ref()))
            {
                let key = ObjectKey::from_object(&*rb);
                if let Some(key) = key {
                    inner
                        .forced
                        .lock()
                        .insert(binding_key::<ResourceBinding>(&key));
                    count_incoming(CLUSTER_CHANGED);
                    inner.rb.enqueue_key(key);
                }
            }
        }
        for crb in inner.crb.store().list() {
            if responsible(inner.name(), &crb.metadata, &crb.spec)
                && affected((&crb.spec, crb.status.as_ref()))
            {
                let key = ObjectKey::from_object(&*crb);
                if let Some(key) = key {
                    inner
                        .forced
                        .lock()
                        .insert(binding_key::<ClusterResourceBinding>(&key));
                    count_incoming(CLUSTER_CHANGED);
                    inner.crb.enqueue_key(key);
                }
            }
        }
        HandlerResult::Success
    }

    pub(super) async fn handle_binding<B: BindingObject>(
        &self,
        key: ObjectKey,
        obj: Option<Arc<B>>,
    ) -> HandlerResult<B> {
        let inner = &self.inner;
        let k = binding_key::<B>(&key);
        let Some(b) = obj else {
            if let Some(groups) = &inner.workload_groups {
                groups.forget(key.namespace(), key.name());
            }
            inner.handled.lock().remove(&k);
            inner.forced.lock().remove(&k);
            inner.feasible.lock().remove(&k);
            if let Some(claims) = &inner.preemption {
                claims.forget(&k);
            }
            return HandlerResult::Success;
        };
        if !responsible(inner.name(), b.meta(), b.binding_spec())
            || b.meta().deletion_timestamp.is_some()
        {
            return HandlerResult::Success;
        }
        let forced = inner.forced.lock().remove(&k);
        let generation = b.meta().generation.unwrap_or_default();
        let last_handled = inner.handled.lock().get(&k).copied();
        let handled = last_handled == Some(generation);
        if !forced && handled {
            return HandlerResult::Success;
        }
        if !handled {
            count_incoming(if last_handled.is_none() {
                BINDING_ADD
            } else {
                BINDING_UPDATE
            });
        }
        // Only a Cluster change is new when the binding's generation was already handled. A
        // binding change the scheduler has not handled yet (an eviction that just removed a
        // cluster, say) gets the full decision even if a Cluster change forced the same key:
        // judged as a Cluster change only, a Duplicated binding evicted from its only cluster
        // would look already placed and be marked observed without a new placement.
        match self.do_schedule(&k, &*b, forced && handled).await {
            Ok(handled_generation) => {
                inner.handled.lock().insert(k, handled_generation);
                HandlerResult::Success
            }
            Err(e) if e.is_conflict() => {
                // Another controller wrote the binding since it was cached: schedule again from
                // the fresh copy the watch is about to deliver. Routine, so no error is logged.
                tracing::debug!(binding = %k, "binding changed while scheduling; retrying");
                inner.forced.lock().insert(k);
                count_incoming(SCHEDULE_ATTEMPT_FAILURE);
                HandlerResult::RequeueAfter(CONFLICT_RETRY)
            }
            Err(e) => {
                inner.forced.lock().insert(k);
                count_incoming(SCHEDULE_ATTEMPT_FAILURE);
                HandlerResult::Error(Box::new(e))
            }
        }
    }
}
