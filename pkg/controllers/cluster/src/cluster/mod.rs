//! The `cluster` controller (Karmada's `cluster-controller`): keeps the finalizer
//! `karmada.io/cluster-controller` on every Cluster, creates its execution namespace
//! `karmada-es-<cluster>` (label `karmada.io/system=true`), sets the NoSchedule taints from the
//! Ready condition, and on deletion cleans up before releasing the Cluster: deletes the Works in
//! the execution namespace and waits for them (their finalizers clean the member), deletes the
//! namespace and waits for it, waits until no ResourceBinding or ClusterResourceBinding lists the
//! cluster in `spec.clusters`, disconnects the member, and removes the finalizer.
//!
//! Pull clusters' health comes from their agent's Lease ([`monitor`]).

pub mod monitor;

use std::sync::Arc;
use std::time::Duration;

use apimachinery::{is_already_exists, is_conflict, is_not_found};
use k8s_openapi::api::core::v1::{Namespace, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karmada_apis::cluster::v1alpha1::ClusterSyncMode;
use karmada_apis::names::execution_space_name;
use karmada_apis::well_known::{
    CLUSTER_CONTROLLER_FINALIZER, EXECUTION_CONTROLLER_FINALIZER, KARMADA_SYSTEM_LABEL,
    KARMADA_SYSTEM_LABEL_VALUE, TAINT_CLUSTER_NOT_READY, TAINT_CLUSTER_UNREACHABLE,
};
use karmada_apis::{Cluster, ClusterResourceBinding, ResourceBinding, Work};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use lariat::{Cache, HandlerResult, ObjectKey};

use karmada_apis::well_known::event_reasons;
use karmada_controllers_common::conditions::now;
use karmada_controllers_common::members::MemberClusters;
use karmada_controllers_common::{BoxError, ControllerContext, ControllerFuture, StartFn};
use lariat::events::{EventRecorder, EventType, reference_of};

/// The controller's `--controllers` name.
pub const NAME: &str = "cluster";
/// Karmada's controller name: logs and User-Agents.
pub const CONTROLLER_NAME: &str = "cluster-controller";

/// How often deletion progress is checked (Karmada's `CleanupCheckInterval`).
pub const CLEANUP_CHECK_INTERVAL: Duration = Duration::from_secs(10);

/// Index of bindings by the clusters in `spec.clusters`.
const BINDING_CLUSTER_INDEX: &str = "spec.clusters";

/// Errors of one reconcile, naming the object and the cause.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// An API call failed.
    #[error("cluster {cluster}: {action} {kind} {name}: {source}")]
    Api {
        /// Cluster name.
        cluster: String,
        /// What was being done.
        action: &'static str,
        /// Kind of the object.
        kind: &'static str,
        /// Name of the object (`namespace/name` for namespaced ones).
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A binding cache did not sync.
    #[error("cluster {cluster}: binding cache: {source}")]
    Cache {
        /// Cluster name.
        cluster: String,
        /// The framework error.
        #[source]
        source: lariat::Error,
    },
}

struct Controller {
    client: kube::Client,
    events: EventRecorder,
    members: Arc<MemberClusters>,
    rbs: Cache<ResourceBinding>,
    crbs: Cache<ClusterResourceBinding>,
    sync_timeout: Duration,
}

/// The start function registered under `cluster`.
pub fn start_fn() -> StartFn {
    Arc::new(start)
}

fn binding_clusters(spec: &karmada_apis::ResourceBindingSpec) -> Vec<String> {
    spec.clusters.iter().map(|c| c.name.clone()).collect()
}

/// Starts the controller on the control plane's shared Cluster controller and runs until
/// `ctx.cancel` fires.
pub fn start(ctx: ControllerContext) -> ControllerFuture {
    Box::pin(async move {
        let plane = &ctx.control_plane;
        let clusters = plane.controllers().for_kind::<Cluster>()?;
        let rbs = plane.caches().for_kind::<ResourceBinding>()?;
        rbs.add_index(
            BINDING_CLUSTER_INDEX,
            Arc::new(|rb: &ResourceBinding| binding_clusters(&rb.spec)),
        );
        let crbs = plane.caches().for_kind::<ClusterResourceBinding>()?;
        crbs.add_index(
            BINDING_CLUSTER_INDEX,
            Arc::new(|crb: &ClusterResourceBinding| binding_clusters(&crb.spec)),
        );
        let client = plane.clients().client_for_controller(CONTROLLER_NAME)?;
        let monitor = monitor::run(
            client.clone(),
            clusters.store(),
            ctx.settings.clone(),
            ctx.cancel.clone(),
        );
        let controller = Arc::new(Controller {
            events: ctx.events.recorder(CONTROLLER_NAME),
            client,
            members: ctx.members.clone(),
            rbs,
            crbs,
            sync_timeout: ctx.settings.cluster_cache_sync_timeout,
        });
        let served = ctx
            .wiring("cluster controller", &controller)
            .handles(
                &clusters,
                CONTROLLER_NAME,
                |c, key, obj: Option<Arc<Cluster>>| async move { c.reconcile(key, obj).await },
            )
            .run();
        let (served, ()) = tokio::join!(served, monitor);
        served?;
        Ok::<(), BoxError>(())
    })
}

/// The taints a Cluster should have given its Ready condition: `not-ready` when False or absent,
/// `unreachable` when Unknown, neither when True. Other taints are kept; a taint that is added
/// gets the current time, and so does a NoExecute taint written without one (Karmada's aggregated
/// API server stamps those on write; served as a CRD, the Cluster gets it here, and the taint
/// manager's toleration seconds count from it).
pub fn desired_taints(cluster: &Cluster) -> Vec<Taint> {
    let (add, remove): (Option<&str>, Vec<&str>) = match cluster.ready_status() {
        Some("True") => (
            None,
            vec![TAINT_CLUSTER_NOT_READY, TAINT_CLUSTER_UNREACHABLE],
        ),
        Some("Unknown") => (
            Some(TAINT_CLUSTER_UNREACHABLE),
            vec![TAINT_CLUSTER_NOT_READY],
        ),
        Some("False") => (
            Some(TAINT_CLUSTER_NOT_READY),
            vec![TAINT_CLUSTER_UNREACHABLE],
        ),
        // No Ready condition yet: only add not-ready.
        _ => (Some(TAINT_CLUSTER_NOT_READY), vec![]),
    };
    let is = |t: &Taint, key: &str| t.key == key && t.effect == "NoSchedule";
    let current = &cluster.spec.taints;
    let mut out: Vec<Taint> = current
        .iter()
        .filter(|t| !remove.iter().any(|k| is(t, k)))
        .cloned()
        .collect();
    if let Some(key) = add
        && !current.iter().any(|t| is(t, key))
    {
        out.push(Taint {
            key: key.to_string(),
            effect: "NoSchedule".to_string(),
            value: None,
            time_added: Some(now()),
        });
    }
    for t in &mut out {
        if t.effect == "NoExecute" && t.time_added.is_none() {
            t.time_added = Some(now());
        }
    }
    out
}

/// Whether two taint lists differ in more than the times added (which alone are no news to record).
fn taints_differ(a: &[Taint], b: &[Taint]) -> bool {
    let strip = |ts: &[Taint]| -> Vec<(String, String, Option<String>)> {
        ts.iter()
            .map(|t| (t.key.clone(), t.effect.clone(), t.value.clone()))
            .collect()
    };
    strip(a) != strip(b)
}

pub use karmada_controllers_common::taints::taints_message;

fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == finalizer))
}

impl Controller {
    fn api_err(
        cluster: &str,
        action: &'static str,
        kind: &'static str,
        name: &str,
    ) -> impl FnOnce(kube::Error) -> ClusterError {
        let cluster = cluster.to_string();
        let name = name.to_string();
        move |source| ClusterError::Api {
            cluster,
            action,
            kind,
            name,
            source,
        }
    }

    async fn reconcile(&self, key: ObjectKey, obj: Option<Arc<Cluster>>) -> HandlerResult<Cluster> {
        let Some(cluster) = obj else {
            // Gone (finalizer removed, or deleted while we were not running).
            self.members.disconnect(key.name()).await;
            return HandlerResult::Success;
        };
        let result = if cluster.metadata.deletion_timestamp.is_some() {
            self.remove(&cluster).await
        } else {
            self.sync(&cluster).await
        };
        match result {
            Ok(r) => r,
            Err(e) => HandlerResult::Error(Box::new(e)),
        }
    }

    async fn sync(&self, cluster: &Cluster) -> Result<HandlerResult<Cluster>, ClusterError> {
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let target = reference_of(cluster);
        match self.ensure_execution_space(&name).await {
            Ok(true) => {
                let msg = format!(
                    "Created execution space({}) for cluster({name}).",
                    execution_space_name(&name)
                );
                self.events
                    .record(
                        &target,
                        EventType::Normal,
                        event_reasons::CREATE_EXECUTION_SPACE_SUCCEED,
                        msg,
                    )
                    .await;
            }
            Ok(false) => {}
            Err(e) => {
                self.events
                    .record(
                        &target,
                        EventType::Warning,
                        event_reasons::CREATE_EXECUTION_SPACE_FAILED,
                        e.to_string(),
                    )
                    .await;
                return Err(e);
            }
        }
        let taints = desired_taints(cluster);
        let needs_finalizer = !has_finalizer(&cluster.metadata, CLUSTER_CONTROLLER_FINALIZER);
        if taints == cluster.spec.taints && !needs_finalizer {
            return Ok(HandlerResult::Success);
        }
        let mut updated = cluster.clone();
        let taints_changed = taints_differ(&taints, &cluster.spec.taints);
        if taints != cluster.spec.taints {
            tracing::info!(cluster = %name, taints = ?taints.iter().map(|t| format!("{}:{}", t.key, t.effect)).collect::<Vec<_>>(), "updating cluster taints");
            updated.spec.taints = taints;
        }
        if needs_finalizer {
            updated
                .metadata
                .finalizers
                .get_or_insert_with(Vec::new)
                .push(CLUSTER_CONTROLLER_FINALIZER.to_string());
        }
        // A patch of just the finalizers and taints, guarded by the resourceVersion read: a stale
        // copy conflicts and is retried, and nothing the cache stripped is lost.
        let written = match self.patch_cluster(cluster, &updated).await {
            Ok(w) => w,
            Err(e) => {
                let err = Self::api_err(&name, "updating", "Cluster", &name)(e);
                if taints_changed {
                    self.events
                        .record(
                            &target,
                            EventType::Warning,
                            event_reasons::TAINT_CLUSTER_FAILED,
                            err.to_string(),
                        )
                        .await;
                }
                return Err(err);
            }
        };
        if taints_changed {
            let msg = format!(
                "Taint cluster succeed: {}.",
                taints_message(&written.spec.taints)
            );
            self.events
                .record(
                    &target,
                    EventType::Normal,
                    event_reasons::TAINT_CLUSTER_SUCCEED,
                    msg,
                )
                .await;
        }
        Ok(HandlerResult::Updated(Arc::new(written)))
    }

    /// Writes what differs between `read` and `updated` (finalizers, taints) as a merge patch
    /// guarded by `read`'s resourceVersion.
    async fn patch_cluster(
        &self,
        read: &Cluster,
        updated: &Cluster,
    ) -> Result<Cluster, kube::Error> {
        let api: Api<Cluster> = Api::all(self.client.clone());
        karmada_controllers_common::patch::patch_changes(&api, read, updated).await
    }

    /// Creates the execution namespace if missing; true if it was created now.
    async fn ensure_execution_space(&self, cluster: &str) -> Result<bool, ClusterError> {
        let ns_name = execution_space_name(cluster);
        let api: Api<Namespace> = Api::all(self.client.clone());
        let existing = api.get_opt(&ns_name).await.map_err(Self::api_err(
            cluster,
            "getting",
            "Namespace",
            &ns_name,
        ))?;
        if existing.is_some() {
            return Ok(false);
        }
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(ns_name.clone()),
                labels: Some(
                    [(
                        KARMADA_SYSTEM_LABEL.to_string(),
                        KARMADA_SYSTEM_LABEL_VALUE.to_string(),
                    )]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => {
                tracing::info!(cluster, namespace = %ns_name, "created execution space");
                Ok(true)
            }
            Err(e) if is_already_exists(&e) => Ok(false),
            Err(e) => Err(Self::api_err(cluster, "creating", "Namespace", &ns_name)(e)),
        }
    }

    #[allow(
        clippy::too_many_lines,
        reason = "the four numbered deletion steps, in the order Karmada runs them"
    )]
    async fn remove(&self, cluster: &Cluster) -> Result<HandlerResult<Cluster>, ClusterError> {
        let name = cluster.metadata.name.clone().unwrap_or_default();
        if !has_finalizer(&cluster.metadata, CLUSTER_CONTROLLER_FINALIZER) {
            return Ok(HandlerResult::Success);
        }
        let ns_name = execution_space_name(&name);
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        if namespaces
            .get_opt(&ns_name)
            .await
            .map_err(Self::api_err(&name, "getting", "Namespace", &ns_name))?
            .is_some()
        {
            // 1. Works first: their finalizers remove what they put on the member.
            let works: Api<Work> = Api::namespaced(self.client.clone(), &ns_name);
            let list = works
                .list(&ListParams::default())
                .await
                .map_err(Self::api_err(&name, "listing", "Work", &ns_name))?;
            if !list.items.is_empty() {
                let ready = cluster.is_ready();
                for w in &list.items {
                    let wname = w.metadata.name.clone().unwrap_or_default();
                    let key = format!("{ns_name}/{wname}");
                    // A Pull cluster that is not ready has nobody to run the execution finalizer.
                    if cluster.spec.sync_mode == ClusterSyncMode::Pull
                        && !ready
                        && has_finalizer(&w.metadata, EXECUTION_CONTROLLER_FINALIZER)
                    {
                        let remaining: Vec<String> = w
                            .metadata
                            .finalizers
                            .iter()
                            .flatten()
                            .filter(|f| *f != EXECUTION_CONTROLLER_FINALIZER)
                            .cloned()
                            .collect();
                        let patch = serde_json::json!({"metadata": {"finalizers": remaining, "resourceVersion": w.metadata.resource_version}});
                        works
                            .patch(&wname, &PatchParams::default(), &Patch::Merge(&patch))
                            .await
                            .map_err(Self::api_err(&name, "removing finalizer of", "Work", &key))?;
                    }
                    if w.metadata.deletion_timestamp.is_none() {
                        match works.delete(&wname, &DeleteParams::default()).await {
                            Ok(_) => {
                                tracing::info!(cluster = %name, namespace = %ns_name, name = %wname, kind = "Work", "deleting work");
                            }
                            Err(e) if is_not_found(&e) => {}
                            Err(e) => {
                                return Err(Self::api_err(&name, "deleting", "Work", &key)(e));
                            }
                        }
                    }
                }
                tracing::info!(cluster = %name, works = list.items.len(), "waiting for works to be deleted");
                return Ok(HandlerResult::RequeueAfter(CLEANUP_CHECK_INTERVAL));
            }
            // 2. Then the namespace itself.
            let target = reference_of(cluster);
            match namespaces.delete(&ns_name, &DeleteParams::default()).await {
                Ok(_) => {}
                // Already gone, or already terminating.
                Err(e) if is_not_found(&e) || is_conflict(&e) => {}
                Err(e) => {
                    let err = Self::api_err(&name, "deleting", "Namespace", &ns_name)(e);
                    self.events
                        .record(
                            &target,
                            EventType::Warning,
                            event_reasons::REMOVE_EXECUTION_SPACE_FAILED,
                            err.to_string(),
                        )
                        .await;
                    return Err(err);
                }
            }
            self.events
                .record(
                    &target,
                    EventType::Normal,
                    event_reasons::REMOVE_EXECUTION_SPACE_SUCCEED,
                    format!("Removed execution space for cluster({name})."),
                )
                .await;
            tracing::info!(cluster = %name, namespace = %ns_name, "waiting for the execution space to be deleted");
            return Ok(HandlerResult::RequeueAfter(CLEANUP_CHECK_INTERVAL));
        }
        // 3. No binding may still be scheduled to the cluster.
        let (rb, crb) = tokio::join!(
            self.rbs.wait_for_sync(self.sync_timeout),
            self.crbs.wait_for_sync(self.sync_timeout)
        );
        rb.and(crb).map_err(|source| ClusterError::Cache {
            cluster: name.clone(),
            source,
        })?;
        let rbs = self
            .rbs
            .store()
            .by_index(BINDING_CLUSTER_INDEX, &name)
            .len();
        let crbs = self
            .crbs
            .store()
            .by_index(BINDING_CLUSTER_INDEX, &name)
            .len();
        if rbs + crbs > 0 {
            tracing::info!(cluster = %name, resource_bindings = rbs, cluster_resource_bindings = crbs, "waiting for bindings to leave the cluster");
            return Ok(HandlerResult::RequeueAfter(CLEANUP_CHECK_INTERVAL));
        }
        // 4. Stop talking to the member, then release the Cluster.
        self.members.disconnect(&name).await;
        let mut updated = cluster.clone();
        if let Some(f) = updated.metadata.finalizers.as_mut() {
            f.retain(|f| f != CLUSTER_CONTROLLER_FINALIZER);
        }
        match self.patch_cluster(cluster, &updated).await {
            Ok(written) => {
                tracing::info!(cluster = %name, "removed the cluster-controller finalizer");
                Ok(HandlerResult::Updated(Arc::new(written)))
            }
            Err(e) if is_not_found(&e) => Ok(HandlerResult::Success),
            Err(e) => Err(Self::api_err(
                &name,
                "removing finalizer of",
                "Cluster",
                &name,
            )(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karmada_apis::ClusterStatus;
    use karmada_controllers_common::conditions::{new_condition, set_condition};

    fn with_ready(status: Option<&str>) -> Cluster {
        let mut c = Cluster::new("c", Default::default());
        if let Some(s) = status {
            let mut conds = vec![];
            set_condition(&mut conds, new_condition("Ready", s, "r", "m"));
            c.status = Some(ClusterStatus {
                conditions: conds,
                ..Default::default()
            });
        }
        c
    }

    #[test]
    fn taint_messages() {
        assert_eq!(taints_message(&[]), "cluster now does not have taints");
        let t = Taint {
            key: "a".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let v = Taint {
            value: Some("x".into()),
            ..t.clone()
        };
        assert_eq!(
            taints_message(&[t, v]),
            "cluster now has taints([{Key:a,Effect:NoSchedule},{Key:a,Value:x,Effect:NoSchedule}])"
        );
    }

    fn keys(ts: &[Taint]) -> Vec<&str> {
        ts.iter().map(|t| t.key.as_str()).collect()
    }

    #[test]
    fn taints_follow_ready() {
        assert_eq!(
            keys(&desired_taints(&with_ready(None))),
            [TAINT_CLUSTER_NOT_READY]
        );
        assert_eq!(
            keys(&desired_taints(&with_ready(Some("False")))),
            [TAINT_CLUSTER_NOT_READY]
        );
        let mut c = with_ready(Some("Unknown"));
        c.spec.taints = desired_taints(&with_ready(Some("False")));
        c.spec.taints.push(Taint {
            key: "user".into(),
            effect: "NoExecute".into(),
            ..Default::default()
        });
        assert_eq!(
            keys(&desired_taints(&c)),
            ["user", TAINT_CLUSTER_UNREACHABLE]
        );
        c.status = with_ready(Some("True")).status;
        assert_eq!(keys(&desired_taints(&c)), ["user"]);
        // Unchanged taints keep their time.
        let mut f = with_ready(Some("False"));
        f.spec.taints = desired_taints(&f);
        assert_eq!(desired_taints(&f), f.spec.taints);
    }

    #[test]
    fn no_execute_taints_get_a_time_added_once() {
        let mut c = with_ready(Some("True"));
        let bare = |effect: &str| Taint {
            key: "not-ready".into(),
            effect: effect.into(),
            ..Default::default()
        };
        c.spec.taints = vec![bare("NoExecute"), bare("NoSchedule")];
        let stamped = desired_taints(&c);
        assert!(stamped[0].time_added.is_some(), "NoExecute gets a time");
        assert!(stamped[1].time_added.is_none(), "NoSchedule is left alone");
        assert!(
            !taints_differ(&stamped, &c.spec.taints),
            "a stamp alone is not a taint change to record"
        );
        c.spec.taints = stamped.clone();
        assert_eq!(desired_taints(&c), stamped, "an existing time is kept");
    }
}
