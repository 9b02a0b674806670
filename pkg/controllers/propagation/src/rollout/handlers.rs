//! What wakes a workload's rollout up. Everything is keyed by the binding (`namespace/name`, the
//! Rollout's too): the binding itself, its Works (status, revision written), the strategies of
//! its namespace and the Rollout (a user's pause, approval or rollback).

use std::sync::Arc;

use karmada_apis::rollout::{Rollout, RolloutStrategy};
use karmada_apis::well_known::{
    RESOURCE_BINDING_NAME_ANNOTATION, RESOURCE_BINDING_NAMESPACE_ANNOTATION,
};
use karmada_apis::{ResourceBinding, Work};
use kube::ResourceExt;
use lariat::{HandlerResult, ObjectKey, Wiring};

use super::{NAME, RolloutController};

impl RolloutController {
    /// Adds to `wiring` the handlers that queue bindings.
    pub(super) fn handlers(&self, wiring: Wiring<Self>) -> Wiring<Self> {
        let inner = &self.inner;
        wiring
            .handles(
                &inner.works,
                NAME,
                |this: Self, _k, o: Option<Arc<Work>>| async move {
                    if let Some(w) = o {
                        let a = w.annotations();
                        if let (Some(ns), Some(name)) = (
                            a.get(RESOURCE_BINDING_NAMESPACE_ANNOTATION),
                            a.get(RESOURCE_BINDING_NAME_ANNOTATION),
                        ) {
                            this.queue(ns, name);
                        }
                    }
                    HandlerResult::Success
                },
            )
            .handles(
                &inner.rollouts,
                NAME,
                |this: Self, k: ObjectKey, _o: Option<Arc<Rollout>>| async move {
                    this.inner.rb.enqueue_key(k);
                    HandlerResult::Success
                },
            )
            .handles(
                &inner.strategies,
                NAME,
                |this: Self, k: ObjectKey, _o: Option<Arc<RolloutStrategy>>| async move {
                    this.strategy_changed(k.namespace());
                    HandlerResult::Success
                },
            )
    }

    /// Queues the binding `namespace/name` when it has a Rollout (a Work of any other binding
    /// changes nothing here).
    fn queue(&self, namespace: &str, name: &str) {
        let inner = &self.inner;
        if inner
            .rollouts
            .store()
            .get_named(Some(namespace), name)
            .is_some()
        {
            inner.rb.enqueue_key(ObjectKey::new(Some(namespace), name));
        }
    }

    /// Queues every binding of the strategy's namespace: a selector added or removed may start
    /// or end their rollouts.
    fn strategy_changed(&self, namespace: Option<&str>) {
        let inner = &self.inner;
        for b in inner.rb.store().list() {
            if b.metadata.namespace.as_deref() == namespace
                && let Some(k) = ObjectKey::from_object(b.as_ref())
            {
                inner.rb.enqueue_key(k);
            }
        }
    }

    pub(super) async fn handle(
        &self,
        key: ObjectKey,
        obj: Option<Arc<ResourceBinding>>,
    ) -> HandlerResult<ResourceBinding> {
        let Some(b) = obj.filter(|b| b.metadata.deletion_timestamp.is_none()) else {
            // The Rollout is owned by the binding: the garbage collector deletes it.
            return HandlerResult::Success;
        };
        match self.reconcile(&b).await {
            Ok(Some(after)) => HandlerResult::RequeueAfter(after),
            Ok(None) => HandlerResult::Success,
            Err(e) => {
                tracing::warn!(binding = %key, error = %e, "rollout not synced");
                HandlerResult::error(e)
            }
        }
    }
}
