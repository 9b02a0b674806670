//! The `remedy` controller (Karmada's `remedy-controller`): keeps each Cluster's
//! `status.remedyActions` equal to the actions of the Remedies that select the Cluster (every
//! Cluster without `clusterAffinity`, else the ones it names) and whose `decisionMatches` match the
//! Cluster's status conditions (always without `decisionMatches`), sorted and without duplicates
//! ([`actions`]). Other components read the list; this controller only writes it.
//!
//! Triggers: every Cluster change (the handler compares the computed list with the one the Cluster
//! has, so only a change of conditions, of the list itself or of the Remedies writes anything), and
//! every Remedy creation, change or deletion, which queues the Clusters it selected or selects
//! ([`affected`]). Clusters being deleted are left alone, as in Karmada.
//!
//! Differs from Karmada: the list is written by a merge patch of `status.remedyActions` alone (no
//! read-modify-write of the whole status, so no conflict with the other status writers), and a
//! Cluster whose list was changed by someone else is put back at once (Karmada reacts to condition
//! changes only).

pub mod actions;
pub mod affected;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use apimachinery::is_not_found;
use karmada_apis::Cluster;
use karmada_apis::remedy::v1alpha1::Remedy;
use karmada_controllers_common::error::framework;
use karmada_controllers_common::handlers::{shared_controller, start_fn_of};
use karmada_controllers_common::{BoxError, ControllerContext, StartFn};
use kube::api::{Api, Patch, PatchParams};
use lariat::{HandlerResult, ObjectKey, SharedController};
use serde_json::{Value, json};

use actions::remedy_actions;
use affected::AffinityMemory;

/// The controller's `--controllers` name.
pub const NAME: &str = "remedy";
/// Karmada's controller name (User-Agent suffix, logs).
pub const CONTROLLER_NAME: &str = "remedy-controller";

/// A remedy controller failure, naming the object and the cause.
#[derive(Debug, thiserror::Error)]
pub enum RemedyError {
    /// The framework or an API request failed (the failures every controller shares).
    #[error(transparent)]
    Core(#[from] karmada_controllers_common::error::CoreError),
    /// Writing a Cluster's `status.remedyActions` failed.
    #[error("cluster {cluster}: patching status.remedyActions: {source}")]
    Patch {
        /// The Cluster.
        cluster: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

karmada_controllers_common::core_error_from!(RemedyError);

struct Inner {
    ctx: ControllerContext,
    client: kube::Client,
    clusters: SharedController<Cluster>,
    remedies: SharedController<Remedy>,
    affinities: AffinityMemory,
    /// Set just before the Cluster handler is registered: until then, Remedy changes queue no
    /// Cluster (registering the handler replays every Cluster anyway).
    clusters_handled: AtomicBool,
}

/// The controller. Cheap to clone.
#[derive(Clone)]
pub struct RemedyController {
    inner: Arc<Inner>,
}

/// The start function registered under `remedy`.
pub fn start_fn() -> StartFn {
    start_fn_of(RemedyController::new, RemedyController::run)
}

/// The merge patch setting `status.remedyActions` to `actions` (removing the field when empty, as
/// Karmada's `omitempty` does) and touching nothing else.
pub fn remedy_actions_patch(actions: &[String]) -> Value {
    if actions.is_empty() {
        json!({"status": {"remedyActions": null}})
    } else {
        json!({"status": {"remedyActions": actions}})
    }
}

impl RemedyController {
    /// Builds the controller on the shared Cluster and Remedy controllers.
    pub fn new(ctx: ControllerContext) -> Result<Self, RemedyError> {
        let plane = &ctx.control_plane;
        let clusters = shared_controller::<Cluster>(plane)?;
        let remedies = shared_controller::<Remedy>(plane)?;
        let client = plane
            .clients()
            .client_for_controller(CONTROLLER_NAME)
            .map_err(framework("remedy client"))?;
        Ok(Self {
            inner: Arc::new(Inner {
                ctx,
                client,
                clusters,
                remedies,
                affinities: AffinityMemory::default(),
                clusters_handled: AtomicBool::new(false),
            }),
        })
    }

    /// Registers the handlers and serves until cancelled. The Cluster handler is registered once
    /// the Remedy cache is complete, so that no Cluster loses its actions to a half-filled cache
    /// at start-up (registering it then replays every Cluster).
    pub async fn run(self) -> Result<(), BoxError> {
        let inner = &self.inner;
        inner
            .ctx
            .wiring(NAME, &self)
            .handles(
                &inner.remedies,
                CONTROLLER_NAME,
                |c: Self, key, obj: Option<Arc<Remedy>>| async move {
                    c.remedy_changed(&key, obj.as_deref());
                    HandlerResult::Success
                },
            )
            .waits_for(&inner.remedies)
            .then(|c: &Self| c.inner.clusters_handled.store(true, Ordering::SeqCst))
            .handles(
                &inner.clusters,
                CONTROLLER_NAME,
                |c: Self, key, obj| async move { c.reconcile(key, obj).await },
            )
            .run()
            .await?;
        Ok(())
    }

    /// Queues the Clusters a Remedy change concerns (Karmada's Remedy event handler).
    fn remedy_changed(&self, key: &ObjectKey, remedy: Option<&Remedy>) {
        let affinity = remedy.map(|r| r.spec.cluster_affinity.as_ref());
        let affected = self.inner.affinities.changed(key.name(), affinity);
        if !self.inner.clusters_handled.load(Ordering::SeqCst) {
            return;
        }
        tracing::debug!(
            remedy = key.name(),
            ?affected,
            "remedy changed; queueing clusters"
        );
        for cluster in self.inner.clusters.store().list() {
            let name = cluster.metadata.name.as_deref().unwrap_or_default();
            if affected.contains(name)
                && let Some(k) = ObjectKey::from_object(&*cluster)
            {
                self.inner.clusters.enqueue_key(k);
            }
        }
    }

    /// Brings one Cluster's `status.remedyActions` in line with the Remedies.
    async fn reconcile(&self, key: ObjectKey, obj: Option<Arc<Cluster>>) -> HandlerResult<Cluster> {
        let Some(cluster) = obj else {
            return HandlerResult::Success;
        };
        if cluster.metadata.deletion_timestamp.is_some() {
            return HandlerResult::Success;
        }
        let name = key.name().to_owned();
        let status = cluster.status.as_ref();
        let conditions = status.map(|s| s.conditions.as_slice()).unwrap_or_default();
        let current = status
            .map(|s| s.remedy_actions.as_slice())
            .unwrap_or_default();
        let desired = remedy_actions(&name, conditions, &self.inner.remedies.store().list());
        if desired == current {
            return HandlerResult::Success;
        }
        let api: Api<Cluster> = Api::all(self.inner.client.clone());
        let patch = remedy_actions_patch(&desired);
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => {
                tracing::info!(cluster = %name, actions = ?desired, previous = ?current, "synced cluster remedy actions");
                HandlerResult::Updated(Arc::new(written))
            }
            Err(e) if is_not_found(&e) => HandlerResult::Success,
            Err(source) => {
                let err = RemedyError::Patch {
                    cluster: name,
                    source,
                };
                tracing::warn!(error = %err, "failed to sync cluster remedy actions");
                HandlerResult::error(err)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_names_only_remedy_actions() {
        assert_eq!(
            remedy_actions_patch(&["TrafficControl".to_owned()]),
            json!({"status": {"remedyActions": ["TrafficControl"]}})
        );
        assert_eq!(
            remedy_actions_patch(&[]),
            json!({"status": {"remedyActions": null}})
        );
    }
}
