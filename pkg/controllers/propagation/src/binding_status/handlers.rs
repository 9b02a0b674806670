//! What wakes a binding up: a Work whose status changed or that went away (its binding is
//! re-queued a moment later, so Works reporting together cost one write), and the binding's own
//! changes of template resourceVersion or generation.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use karmada_apis::Work;
use karmada_apis::well_known::{
    CLUSTER_RESOURCE_BINDING_ANNOTATION, RESOURCE_BINDING_NAME_ANNOTATION,
    RESOURCE_BINDING_NAMESPACE_ANNOTATION,
};
use karmada_controllers_common::binding::BindingObject;
use karmada_controllers_common::shared_values::SharedValues;
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

/// Each Work's binding and status fingerprint when last seen. The Works of one binding share one
/// [`Target`] (at 10 members a binding has ten Works, a map of 100,000 at 10,000 bindings): an
/// entry is a key, a pointer and a fingerprint.
#[derive(Default)]
pub(super) struct SeenWorks {
    works: HashMap<ObjectKey, (Option<Arc<Target>>, u64)>,
    /// The bindings the Works name; none leaves this struct.
    targets: SharedValues<Target>,
}

impl SeenWorks {
    /// Records that the Work `key` names `target` and has `fingerprint`; returns its previous
    /// fingerprint.
    pub(super) fn see(
        &mut self,
        key: ObjectKey,
        target: Option<&Target>,
        fingerprint: u64,
    ) -> Option<u64> {
        let shared = target.map(|t| self.targets.share(t));
        let (old, previous) = self.works.insert(key, (shared, fingerprint))?;
        self.release(old);
        Some(previous)
    }

    /// Forgets the Work `key`; returns the binding it named.
    pub(super) fn forget(&mut self, key: &ObjectKey) -> Option<Target> {
        let (target, _) = self.works.remove(key)?;
        let named = target.as_deref().cloned();
        self.release(target);
        named
    }

    /// Gives a Work's clone of its target back to the pool.
    fn release(&mut self, target: Option<Arc<Target>>) {
        if let Some(t) = target {
            self.targets.release(t);
        }
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
                let previous = self.inner.seen_works.lock().see(key, t.as_ref(), fp);
                if previous == Some(fp) {
                    return HandlerResult::Success;
                }
                t
            }
            None => self.inner.seen_works.lock().forget(&key),
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use lariat::ObjectKey;

    use super::{SeenWorks, Target};

    fn rb(name: &str) -> Target {
        Target::Rb {
            namespace: "default".into(),
            name: name.into(),
        }
    }

    fn work(cluster: usize, binding: &str) -> ObjectKey {
        ObjectKey::new(Some(&format!("karmada-es-member{cluster}")), binding)
    }

    /// The `Arc` the Works of `target` share, and how many hold it beside the set and the clone
    /// returned.
    fn shared(seen: &SeenWorks, target: &Target) -> Option<(Arc<Target>, usize)> {
        let t = seen.targets.get(target)?.clone();
        let holders = Arc::strong_count(&t) - 2;
        Some((t, holders))
    }

    #[test]
    fn the_works_of_a_binding_share_one_target() {
        let mut seen = SeenWorks::default();
        for c in 0..10 {
            assert_eq!(seen.see(work(c, "nginx"), Some(&rb("nginx")), 7), None);
        }
        seen.see(work(0, "redis"), Some(&rb("redis")), 7);
        seen.see(work(0, "orphan"), None, 7);
        assert_eq!(seen.targets.len(), 2);
        let (nginx, holders) = shared(&seen, &rb("nginx")).expect("shared");
        assert_eq!(holders, 10);
        for c in 0..10 {
            let Some((Some(t), _)) = seen.works.get(&work(c, "nginx")) else {
                panic!("not seen");
            };
            assert!(Arc::ptr_eq(t, &nginx));
        }
        drop(nginx);
        // Seen again: the previous fingerprint comes back, the sharing is unchanged.
        assert_eq!(seen.see(work(3, "nginx"), Some(&rb("nginx")), 8), Some(7));
        assert_eq!(shared(&seen, &rb("nginx")).map(|(_, n)| n), Some(10));
        // A Work that names another binding now moves to its target.
        assert_eq!(seen.see(work(3, "nginx"), Some(&rb("redis")), 8), Some(8));
        assert_eq!(shared(&seen, &rb("nginx")).map(|(_, n)| n), Some(9));
        assert_eq!(shared(&seen, &rb("redis")).map(|(_, n)| n), Some(2));
    }

    #[test]
    fn a_target_goes_with_the_last_work_naming_it() {
        let mut seen = SeenWorks::default();
        for c in 0..3 {
            seen.see(work(c, "nginx"), Some(&rb("nginx")), 1);
        }
        let crb = Target::Crb {
            name: "nginx".into(),
        };
        seen.see(work(0, "cluster-nginx"), Some(&crb), 1);
        assert_eq!(seen.forget(&work(0, "nginx")), Some(rb("nginx")));
        assert_eq!(seen.forget(&work(0, "nginx")), None);
        assert_eq!(seen.forget(&work(1, "nginx")), Some(rb("nginx")));
        assert_eq!(shared(&seen, &rb("nginx")).map(|(_, n)| n), Some(1));
        // Re-pointed elsewhere, the last Work releases it as a removal would.
        seen.see(work(2, "nginx"), None, 1);
        assert!(shared(&seen, &rb("nginx")).is_none());
        assert_eq!(seen.targets.len(), 1);
        assert_eq!(seen.forget(&work(2, "nginx")), None);
        assert_eq!(seen.forget(&work(0, "cluster-nginx")), Some(crb));
        assert!(seen.targets.is_empty());
        assert!(seen.works.is_empty());
    }

    #[test]
    fn an_entry_is_a_pointer_and_a_fingerprint() {
        assert_eq!(size_of::<(Option<Arc<Target>>, u64)>(), 16);
    }
}
