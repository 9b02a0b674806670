//! What wakes a Work up and where it runs: the Work and Cluster handlers, the member registry's
//! connect events, and the member queues' entry point.

use std::sync::Arc;

use karmada_apis::names::{cluster_name, execution_space_name};
use karmada_apis::{Cluster, Work};
use karmada_controllers_common::members::{self, MemberEvent};
use karmada_controllers_common::work_index;
use lariat::{HandlerResult, ObjectKey, Priority};

use super::ExecutionController;
use super::error::ExecutionError;

impl ExecutionController {
    /// Handles a member registry event; false once the registry is gone.
    pub(super) fn member_event(
        &self,
        event: Result<MemberEvent, tokio::sync::broadcast::error::RecvError>,
    ) -> bool {
        use tokio::sync::broadcast::error::RecvError;
        match event {
            // A (re)connected member has a fresh queue: requeue its Works so nothing that waited
            // on the old connection, or found none yet, is lost.
            Ok(MemberEvent::Connected(name)) => self.enqueue_cluster(&name),
            Ok(MemberEvent::Disconnected(_)) => {}
            Err(RecvError::Lagged(_)) => {
                for name in self.inner.ctx.members.registry().names() {
                    self.enqueue_cluster(&name);
                }
            }
            Err(RecvError::Closed) => return false,
        }
        true
    }

    /// Queues every Work of `cluster` on the shared Work queue, by key (nothing is decoded) and at
    /// low priority: a resync, which must not go ahead of live changes (a restart's fresh Works).
    pub(super) fn enqueue_cluster(&self, cluster: &str) {
        let ns = execution_space_name(cluster);
        let store = self.inner.works.cache().peek_store();
        for key in work_index::keys_in(store, &ns) {
            self.inner
                .works
                .enqueue_key_with_priority(key, Priority::Low);
        }
    }

    /// Requeues a cluster's Works when it becomes Ready.
    pub(super) fn cluster_changed(&self, key: &ObjectKey, cluster: Option<&Cluster>) {
        let name = key.name().to_owned();
        let now = cluster.is_some_and(Cluster::is_ready);
        let before = self.inner.ready.lock().insert(name.clone(), now);
        if now && before != Some(true) {
            self.enqueue_cluster(&name);
        }
    }

    pub(super) async fn handle_work(
        &self,
        key: ObjectKey,
        obj: Option<Arc<Work>>,
    ) -> HandlerResult<Work> {
        let Some(work) = obj else {
            return HandlerResult::Success;
        };
        let ns = key.namespace().unwrap_or_default();
        let Ok(cluster) = cluster_name(ns) else {
            return HandlerResult::Success;
        };
        let cluster = cluster.to_owned();
        // Every wake-up reconciles: besides spec changes, the work-status controller re-queues a Work
        // when its member object drifted or was deleted by hand. An up-to-date member object costs no
        // request (the comparison runs against the member cache).
        if let Some(member) = self.inner.ctx.members.get(&cluster) {
            // Member I/O runs on the member's own queue, so a hung member holds only its workers.
            self.inner.queues.add(&member, key);
            return HandlerResult::Success;
        }
        // Not connected: nothing below talks to the member, and errors back off here.
        match self.reconcile(&work, &cluster).await {
            Ok(()) => HandlerResult::Success,
            // Requeued when the member connects (the registry reports why it does not); the
            // periodic look is only a safety net, so it is neither an error nor backed off.
            Err(e @ ExecutionError::NotConnected(_)) => {
                tracing::debug!(cluster = %cluster, namespace = ns, name = key.name(), error = %e, "work waits for its member's connection");
                HandlerResult::RequeueAfter(members::MEMBER_NOT_CONNECTED_RETRY)
            }
            Err(e) => {
                tracing::warn!(cluster = %cluster, namespace = ns, name = key.name(), error = %e, "work not synced");
                HandlerResult::error(e)
            }
        }
    }

    /// Reconciles a Work from the member's queue; `false` retries it with backoff.
    pub(super) async fn reconcile_key(&self, cluster: &str, key: &ObjectKey) -> bool {
        let Some(work) = self.inner.works.cache().peek_store().get(key) else {
            // Deleted; its finalizer kept it until its member objects were handled.
            return true;
        };
        match self.reconcile(&work, cluster).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(cluster, namespace = key.namespace().unwrap_or_default(), name = key.name(), error = %e, "work not synced");
                false
            }
        }
    }
}
