//! What wakes a binding up: a Work whose status changed or that went away (its binding is
//! re-queued a moment later, so Works reporting together cost one write), and the binding's own
//! changes of template resourceVersion or generation.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use karmada_apis::Work;
use karmada_apis::well_known::{
    CLUSTER_RESOURCE_BINDING_ANNOTATION, RESOURCE_BINDING_NAME_ANNOTATION,
    RESOURCE_BINDING_NAMESPACE_ANNOTATION,
};
use karmada_controllers_common::binding::BindingObject;
use kube::ResourceExt;
use lariat::{HandlerResult, ObjectKey};

use super::aggregate::never_aggregated;
use super::error::BindingStatusError;
use super::{BindingStatusController, StatusBinding, WORK_COALESCE};

/// What decides whether an update of a binding is handled: its template's resourceVersion and
/// its generation.
pub(super) fn binding_fingerprint<B: BindingObject>(b: &B) -> u64 {
    let mut h = DefaultHasher::new();
    b.binding_spec().resource.resource_version.hash(&mut h);
    b.meta().generation.hash(&mut h);
    h.finish()
}

/// What decides whether a Work change concerns the binding: its status.
pub(super) fn work_fingerprint(w: &Work) -> u64 {
    let mut h = DefaultHasher::new();
    serde_json::to_string(&w.status)
        .unwrap_or_default()
        .hash(&mut h);
    w.metadata.deletion_timestamp.is_some().hash(&mut h);
    h.finish()
}

/// The binding a Work belongs to, as a queue target.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Target {
    Rb { namespace: String, name: String },
    Crb { name: String },
}

impl Target {
    fn of(work: &Work) -> Option<Target> {
        let a = work.annotations();
        if let (Some(namespace), Some(name)) = (
            a.get(RESOURCE_BINDING_NAMESPACE_ANNOTATION),
            a.get(RESOURCE_BINDING_NAME_ANNOTATION),
        ) {
            return Some(Target::Rb {
                namespace: namespace.clone(),
                name: name.clone(),
            });
        }
        a.get(CLUSTER_RESOURCE_BINDING_ANNOTATION)
            .map(|name| Target::Crb { name: name.clone() })
    }
}

impl BindingStatusController {
    /// A Work changed: re-queue its binding when the Work's status changed or it went away. The
    /// binding is aggregated [`WORK_COALESCE`] later, so the Works of one binding that report at
    /// about the same time (each member applies, then reports health) cost one status write.
    pub(super) fn handle_work(
        &self,
        key: ObjectKey,
        work: Option<Arc<Work>>,
    ) -> HandlerResult<Work> {
        let target = match work {
            Some(w) => {
                let t = Target::of(&w);
                let fp = work_fingerprint(&w);
                let previous = self.inner.seen_works.lock().insert(key, (t.clone(), fp));
                if previous.is_some_and(|(_, old)| old == fp) {
                    return HandlerResult::Success;
                }
                t
            }
            None => self
                .inner
                .seen_works
                .lock()
                .remove(&key)
                .and_then(|(t, _)| t),
        };
        match target {
            Some(Target::Rb { namespace, name }) => {
                self.inner
                    .forced
                    .lock()
                    .insert(format!("rb/{namespace}/{name}"));
                self.inner
                    .rb
                    .enqueue_after(Some(&namespace), &name, WORK_COALESCE);
            }
            Some(Target::Crb { name }) => {
                self.inner.forced.lock().insert(format!("crb/{name}"));
                self.inner.crb.enqueue_after(None, &name, WORK_COALESCE);
            }
            None => {}
        }
        HandlerResult::Success
    }

    /// A binding changed (or was queued by one of its Works).
    pub(super) async fn handle_binding<B: StatusBinding>(
        &self,
        key: ObjectKey,
        obj: Option<Arc<B>>,
    ) -> HandlerResult<B> {
        let id = format!("{}/{}", B::PREFIX, key);
        let Some(binding) = obj else {
            self.inner.handled.lock().remove(&id);
            self.inner.forced.lock().remove(&id);
            return HandlerResult::Success;
        };
        if binding.meta().deletion_timestamp.is_some() {
            return HandlerResult::Success;
        }
        let fp = binding_fingerprint(binding.as_ref());
        let forced = self.inner.forced.lock().remove(&id);
        let scheduled = binding
            .binding_status()
            .is_some_and(|s| s.last_scheduled_time.is_some());
        let changed = self.inner.handled.lock().get(&id) != Some(&fp);
        if !(forced || scheduled && changed) {
            return HandlerResult::Success;
        }
        match self.sync(binding.as_ref()).await {
            Ok(()) => {
                self.inner.handled.lock().insert(id, fp);
                HandlerResult::Success
            }
            Err(e) => {
                // Retried with backoff; the retry must not be filtered out.
                self.inner.forced.lock().insert(id);
                HandlerResult::error(e)
            }
        }
    }

    /// Aggregates the Works into the binding's status, then the binding's status into the
    /// template's. A binding that has no Work yet and was never aggregated (just scheduled, its
    /// Works not written) is left alone: there is nothing to report, and, as in Karmada — whose
    /// aggregation runs on Work status changes — the first aggregation waits for a Work. (Written
    /// now, it would be an empty `aggregatedStatus`, `FullyApplied=False` and a template
    /// `observedGeneration` that no member has observed, each rewritten moments later.)
    pub(super) async fn sync<B: StatusBinding>(
        &self,
        binding: &B,
    ) -> Result<(), BindingStatusError> {
        let items = self.aggregate_works(binding)?;
        if items.is_empty() && never_aggregated(binding) {
            return Ok(());
        }
        self.update_binding_status(binding, &items).await?;
        self.update_template_status(binding, &items).await
    }
}
