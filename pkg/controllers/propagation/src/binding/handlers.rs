//! What wakes a binding up: its own changes (synced once per generation, unless forced) and
//! changes of the override policies that may select its template.

use std::sync::Arc;

use karmada_apis::policy::v1alpha1::ResourceSelector;
use karmada_apis::rollout::Rollout;
use karmada_apis::work::v1alpha2::ResourceBindingSpec;
use karmada_apis::{ClusterResourceBinding, ResourceBinding};
use karmada_controllers_common::binding::BindingObject;
use karmada_controllers_common::handlers::shared_controller;
use kube::{Resource, ResourceExt};
use lariat::{HandlerResult, ObjectKey, Wiring};

use super::error::BindingError;
use super::sync::Synced;
use super::{BindingController, NAME};

pub(super) fn memo_key<B: Resource<DynamicType = ()>>(key: &ObjectKey) -> String {
    format!("{}/{key}", B::kind(&()))
}

/// Whether a selector may select the template `spec.resource` names (label selectors are assumed
/// to match: the template's labels are not at hand, and an extra sync writes nothing).
pub(super) fn selector_may_match(sel: &ResourceSelector, spec: &ResourceBindingSpec) -> bool {
    let r = &spec.resource;
    sel.api_version == r.api_version
        && sel.kind == r.kind
        && (sel.namespace.is_empty() || sel.namespace == r.namespace)
        && (sel.name.is_empty() || sel.name == r.name)
}

impl BindingController {
    /// Requeues the bindings an override policy (old or new selectors) may affect.
    pub(super) fn policy_changed(
        &self,
        kind: &str,
        key: &ObjectKey,
        selectors: Option<Vec<ResourceSelector>>,
    ) {
        let inner = &self.inner;
        let pkey = format!("{kind}/{key}");
        let previous = {
            let mut map = inner.policy_selectors.lock();
            match &selectors {
                Some(s) => map.insert(pkey, s.clone()),
                None => map.remove(&pkey),
            }
        };
        let mut all: Vec<Vec<ResourceSelector>> = Vec::new();
        all.extend(selectors);
        all.extend(previous);
        if all.is_empty() {
            return;
        }
        let affects = |spec: &ResourceBindingSpec| {
            all.iter()
                .any(|sels| sels.is_empty() || sels.iter().any(|s| selector_may_match(s, spec)))
        };
        let namespace = key.namespace();
        let mut n = 0usize;
        for b in inner.rb.store().list() {
            if namespace.is_some_and(|ns| b.metadata.namespace.as_deref() != Some(ns)) {
                continue;
            }
            if affects(&b.spec)
                && let Some(k) = ObjectKey::from_object(b.as_ref())
            {
                inner.forced.lock().insert(memo_key::<ResourceBinding>(&k));
                inner.rb.enqueue_key(k);
                n += 1;
            }
        }
        if namespace.is_none() {
            for b in inner.crb.store().list() {
                if affects(&b.spec)
                    && let Some(k) = ObjectKey::from_object(b.as_ref())
                {
                    inner
                        .forced
                        .lock()
                        .insert(memo_key::<ClusterResourceBinding>(&k));
                    inner.crb.enqueue_key(k);
                    n += 1;
                }
            }
        }
        tracing::debug!(policy_kind = kind, policy = %key, bindings = n, "override policy changed; requeued bindings");
    }

    /// When the control plane serves Rollouts, adds to `wiring`: a handler re-syncing a binding
    /// whenever its Rollout (same namespace and name) changes, since that may admit a cluster to
    /// a new revision or roll one back, then a wait for their cache, after which the binding
    /// handlers read them.
    pub(super) async fn watch_rollouts(
        &self,
        wiring: Wiring<Self>,
    ) -> Result<Wiring<Self>, karmada_controllers_common::BoxError> {
        let inner = &self.inner;
        if !karmada_controllers_common::rollout::rollouts_served(&inner.client)
            .await
            .map_err(|e| format!("binding controller: discovery of rollouts: {e}"))?
        {
            return Ok(wiring);
        }
        let rollouts = shared_controller::<Rollout>(&inner.ctx.control_plane)?;
        let listed = rollouts.clone();
        Ok(wiring
            .handles(
                &rollouts,
                NAME,
                |this: Self, k: ObjectKey, _o: Option<Arc<Rollout>>| async move {
                    this.inner
                        .forced
                        .lock()
                        .insert(memo_key::<ResourceBinding>(&k));
                    this.inner.rb.enqueue_key(k);
                    HandlerResult::Success
                },
            )
            .waits_for(&rollouts)
            .then(move |this: &Self| {
                let _ = this.inner.rollouts.set(listed);
            }))
    }

    /// The Rollout of binding `b`, if any (only ResourceBindings have one).
    pub(super) fn rollout_of<B: BindingObject>(&self, b: &B) -> Option<Arc<Rollout>> {
        let rollouts = self.inner.rollouts.get()?;
        let namespace = b.namespace()?;
        rollouts.store().get_named(Some(&namespace), &b.name_any())
    }

    pub(super) async fn handle_binding<B: BindingObject>(
        &self,
        key: ObjectKey,
        obj: Option<Arc<B>>,
    ) -> HandlerResult<B> {
        let inner = &self.inner;
        let mkey = memo_key::<B>(&key);
        let Some(b) = obj else {
            inner.handled.lock().remove(&mkey);
            inner.forced.lock().remove(&mkey);
            inner.written.lock().remove(&mkey);
            return HandlerResult::Success;
        };
        let kind = B::kind(&()).into_owned();
        if b.meta().deletion_timestamp.is_some() {
            inner.handled.lock().remove(&mkey);
            return match self.delete_binding(b.as_ref()).await {
                Ok(None) => HandlerResult::Success,
                Ok(Some(d)) => HandlerResult::RequeueAfter(d),
                Err(e) => {
                    tracing::warn!(kind = %kind, binding = %key, error = %e, "failed to clean up works of deleted binding");
                    HandlerResult::error(e)
                }
            };
        }
        let stamp = (
            b.meta().uid.clone().unwrap_or_default(),
            b.meta().generation.unwrap_or_default(),
        );
        let forced = inner.forced.lock().remove(&mkey);
        if !forced && inner.handled.lock().get(&mkey) == Some(&stamp) {
            return HandlerResult::Success;
        }
        match self.sync(b.as_ref(), &mkey).await {
            Ok(Synced::Done) => {
                inner.handled.lock().insert(mkey, stamp);
                HandlerResult::Success
            }
            Ok(Synced::Later(d)) => {
                inner.handled.lock().remove(&mkey);
                HandlerResult::RequeueAfter(d)
            }
            Ok(Synced::Refused(msg)) => {
                inner.handled.lock().insert(mkey, stamp);
                HandlerResult::ignore(BindingError::Clusters(msg))
            }
            Err(e) => {
                inner.handled.lock().remove(&mkey);
                tracing::warn!(kind = %kind, binding = %key, error = %e, "failed to sync works");
                HandlerResult::error(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::work::v1alpha2::ObjectReference;

    #[test]
    fn selector_matching_by_identity() {
        let spec = ResourceBindingSpec {
            resource: ObjectReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: "ns".into(),
                name: "nginx".into(),
                ..Default::default()
            },
            ..Default::default()
        };
        let sel = |name: &str| ResourceSelector {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: name.into(),
            ..Default::default()
        };
        assert!(selector_may_match(&sel("nginx"), &spec));
        assert!(selector_may_match(&sel(""), &spec));
        assert!(!selector_may_match(&sel("other"), &spec));
    }
}
