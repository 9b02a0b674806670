//! The `clusterStatus` controller (Karmada's `cluster-status-controller`): for every Push-mode
//! Cluster with a `spec.secretRef` it connects the member through [`MemberClusters`], probes its
//! health every `--cluster-status-update-frequency`, and writes `Cluster.status`: the `Ready`
//! condition (with flap suppression by `--cluster-success-threshold` / `--cluster-failure-threshold`),
//! `kubernetesVersion`, `apiEnablements` with the `CompleteAPIEnablements` condition, and, with
//! `--enable-cluster-resource-modeling`, `nodeSummary` and `resourceSummary` from slimmed member
//! Node and Pod caches. Status is written only when it changed.
//!
//! The same controller runs in `karmada-agent` for the agent's own (Pull) cluster, reached with the
//! agent's credentials instead of a Secret ([`MemberClusters::serves`]); there it also renews the
//! cluster [`lease`] once the member is healthy, as Karmada's agent does.
//!
//! One deliberate difference from Karmada: a member that rejects the credentials (HTTP 401) is
//! reported with reason [`REASON_AUTHENTICATION_FAILED`] instead of `ClusterNotReachable`, so an
//! operator can tell a bad token from a dead endpoint.
//!
//! [`MemberClusters`]: karmada_controllers_common::members::MemberClusters

pub mod conditions;
pub mod discovery;
pub mod lease;
pub mod metrics;
pub mod summary;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apimachinery::{ConflictRetry, DEFAULT_RETRY, is_conflict};
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use karmada_apis::cluster::v1alpha1::{
    ApiEnablement, ClusterSyncMode, NodeSummary, ResourceSummary,
};
use karmada_apis::well_known::{
    API_ENABLEMENTS_COMPLETE, API_ENABLEMENTS_EMPTY, API_ENABLEMENTS_PARTIAL,
    CLUSTER_CONDITION_COMPLETE_API_ENABLEMENTS, CLUSTER_CONDITION_READY,
    CLUSTER_CONTROLLER_FINALIZER, CLUSTER_MESSAGE_HEALTHY, CLUSTER_MESSAGE_NOT_REACHABLE,
    CLUSTER_MESSAGE_UNHEALTHY, CLUSTER_REASON_NOT_REACHABLE, CLUSTER_REASON_NOT_READY,
    CLUSTER_REASON_READY, CLUSTER_REASON_STATUS_COLLECTION_FAILED,
};
use karmada_apis::{Cluster, ClusterStatus};
use kube::api::{Api, Patch, PatchParams};
use lariat::{CacheScope, HandlerResult, ObjectKey};

use conditions::ConditionCache;
use karmada_controllers_common::conditions::{new_condition, set_condition};
use karmada_controllers_common::members::{ConnectError, MemberClusters};
use karmada_controllers_common::patch::guarded_merge_patch;
use karmada_controllers_common::{
    BoxError, ControllerContext, ControllerFuture, Settings, StartFn,
};

/// The controller's `--controllers` name.
pub const NAME: &str = "clusterStatus";
/// Karmada's controller name: Events, logs and User-Agents.
pub const CONTROLLER_NAME: &str = "cluster-status-controller";

/// Ready reason (karmada-rs only): the member rejected the credentials from the Secret.
pub const REASON_AUTHENTICATION_FAILED: &str = "ClusterAuthenticationFailed";

/// Feature gate: fill `resourceSummary.allocatableModelings` from `spec.resourceModels`.
pub const CUSTOMIZED_CLUSTER_RESOURCE_MODELING: &str = "CustomizedClusterResourceModeling";

/// How long one health or discovery request to a member may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Errors of one status sync.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The Secret `spec.secretRef` names does not belong to the Cluster (reported in its Ready
    /// condition; retried with backoff, as `karmadactl join` sets the owner just after creating it).
    #[error("{0}")]
    SecretNotOwned(String),
    /// Writing the Cluster status failed.
    #[error("cluster {cluster}: updating status: {source}")]
    UpdateStatus {
        /// Cluster name.
        cluster: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The member's Node or Pod cache could not be built or did not sync.
    #[error("cluster {cluster}: member {kind} cache: {source}")]
    Cache {
        /// Cluster name.
        cluster: String,
        /// `Node` or `Pod`.
        kind: &'static str,
        /// The framework error.
        #[source]
        source: lariat::Error,
    },
}

/// What one health probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// The health endpoint answered 200.
    Healthy,
    /// The member answered, but not 200.
    Unhealthy,
    /// The member rejected the credentials (401).
    Unauthorized(String),
    /// The member could not be reached.
    Offline(String),
}

/// Probes `GET /readyz`, falling back to `/healthz` when `/readyz` is not served (404).
pub async fn probe_health(client: &kube::Client) -> Health {
    match get_status(client, "/readyz").await {
        Ok(404) => match get_status(client, "/healthz").await {
            Ok(code) => health_of(code),
            Err(e) => Health::Offline(e),
        },
        Ok(code) => health_of(code),
        Err(e) => Health::Offline(e),
    }
}

fn health_of(code: u16) -> Health {
    match code {
        200 => Health::Healthy,
        401 => Health::Unauthorized(format!(
            "the member API server answered {code} Unauthorized"
        )),
        _ => Health::Unhealthy,
    }
}

async fn get_status(client: &kube::Client, path: &str) -> Result<u16, String> {
    let req = http::Request::get(path)
        .body(kube::client::Body::from(Vec::new()))
        .map_err(|e| e.to_string())?;
    match tokio::time::timeout(REQUEST_TIMEOUT, client.send(req)).await {
        Ok(Ok(resp)) => Ok(resp.status().as_u16()),
        Ok(Err(e)) => Err(error_chain(&e)),
        Err(_) => Err(format!("GET {path} timed out after {REQUEST_TIMEOUT:?}")),
    }
}

/// `e` and its causes (a connection error's cause is only in its source chain), each once; from
/// the proxy's error on when a proxy failed, as that names the proxy, the target and the cause.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(proxy) = c.downcast_ref::<lariat::client::ProxyError>() {
            return proxy.to_string();
        }
        cause = c.source();
    }
    lariat::error::error_chain(e)
}

/// The observed Ready condition of a member reached through `proxy` (credentials removed): as
/// [`observed_ready_condition`], but an unreachable member's message (Karmada's `cluster is not
/// reachable`) goes on to name the proxy and the cause, so a wrong or unreachable proxy shows on
/// the Cluster.
pub fn observed_ready_condition_through_proxy(health: &Health, proxy: &str) -> Condition {
    let mut condition = observed_ready_condition(health);
    if let Health::Offline(cause) = health {
        // The proxy's own error starts with the proxy: say it once.
        let cause = cause
            .strip_prefix(&format!("proxy {proxy}: "))
            .unwrap_or(cause);
        condition.message =
            format!("{CLUSTER_MESSAGE_NOT_REACHABLE} through proxy {proxy}: {cause}");
    }
    condition
}

/// The observed Ready condition for a probe result (before flap suppression).
pub fn observed_ready_condition(health: &Health) -> Condition {
    match health {
        Health::Healthy => new_condition(
            CLUSTER_CONDITION_READY,
            "True",
            CLUSTER_REASON_READY,
            CLUSTER_MESSAGE_HEALTHY,
        ),
        Health::Unhealthy => new_condition(
            CLUSTER_CONDITION_READY,
            "False",
            CLUSTER_REASON_NOT_READY,
            CLUSTER_MESSAGE_UNHEALTHY,
        ),
        Health::Unauthorized(detail) => new_condition(
            CLUSTER_CONDITION_READY,
            "False",
            REASON_AUTHENTICATION_FAILED,
            &format!("authentication to the cluster failed: {detail}"),
        ),
        Health::Offline(_) => new_condition(
            CLUSTER_CONDITION_READY,
            "False",
            CLUSTER_REASON_NOT_REACHABLE,
            CLUSTER_MESSAGE_NOT_REACHABLE,
        ),
    }
}

/// What a full collection found, written into the status.
#[derive(Debug, Default)]
struct Collected {
    kubernetes_version: String,
    api_enablements: Vec<ApiEnablement>,
    node_summary: Option<NodeSummary>,
    resource_summary: Option<ResourceSummary>,
}

/// The controller's state.
struct Controller {
    client: kube::Client,
    members: Arc<MemberClusters>,
    settings: Arc<Settings>,
    conditions: ConditionCache,
    /// Per cluster: generation and time of the last sync (Karmada's GenerationChangedPredicate
    /// plus periodic requeue, on a queue shared with the cluster controller).
    last_sync: Mutex<HashMap<String, (Option<i64>, Instant)>>,
    /// The Lease renewers of Pull clusters (only ever started in the agent).
    leases: lease::Renewers,
}

/// The start function registered under `clusterStatus`.
pub fn start_fn() -> StartFn {
    Arc::new(start)
}

/// Starts the controller: registers its handler on the control plane's Cluster controller, reports
/// synced once the Cluster cache has synced, and runs until `ctx.cancel` fires.
pub fn start(ctx: ControllerContext) -> ControllerFuture {
    Box::pin(async move {
        let clusters = ctx.control_plane.controllers().for_kind::<Cluster>()?;
        let client = ctx
            .control_plane
            .clients()
            .client_for_controller(CONTROLLER_NAME)?;
        let controller = Arc::new(Controller {
            client: client.clone(),
            members: ctx.members.clone(),
            conditions: ConditionCache::new(
                ctx.settings.cluster_success_threshold,
                ctx.settings.cluster_failure_threshold,
            ),
            settings: ctx.settings.clone(),
            last_sync: Mutex::new(HashMap::new()),
            leases: lease::Renewers::new(client.clone(), &ctx.settings, &ctx.cancel),
        });
        metrics::cluster_metrics();
        ctx.wiring("cluster-status controller", &controller)
            .handles(
                &clusters,
                CONTROLLER_NAME,
                |c, key, obj: Option<Arc<Cluster>>| async move { c.reconcile(key, obj).await },
            )
            .run()
            .await?;
        Ok::<(), BoxError>(())
    })
}

fn has_finalizer(cluster: &Cluster) -> bool {
    cluster
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == CLUSTER_CONTROLLER_FINALIZER))
}

impl Controller {
    fn lock_last_sync(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Option<i64>, Instant)>> {
        self.last_sync
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Forgets a cluster that is gone: member connection, flap state, metric series.
    async fn forget(&self, name: &str) {
        self.leases.stop(name);
        self.members.disconnect(name).await;
        self.conditions.delete(name);
        self.lock_last_sync().remove(name);
        if let Some(m) = metrics::cluster_metrics() {
            m.cleanup(name);
        }
    }

    async fn reconcile(&self, key: ObjectKey, obj: Option<Arc<Cluster>>) -> HandlerResult<Cluster> {
        let name = key.name().to_string();
        let Some(cluster) = obj else {
            self.forget(&name).await;
            return HandlerResult::Success;
        };
        // The controller-manager reports Push clusters (Pull clusters report their own status
        // through their agent); the agent reports its own cluster.
        if !self.members.serves(&cluster) {
            return HandlerResult::Success;
        }
        let own = self.members.own_cluster().is_some();
        let secret_ref = cluster.spec.secret_ref.clone();
        if secret_ref.is_none() && !own {
            return HandlerResult::Success;
        }
        // Start only once the cluster controller owns the object, as Karmada does.
        if !has_finalizer(&cluster) {
            tracing::debug!(cluster = %name, "waiting for the cluster-controller finalizer");
            return HandlerResult::RequeueAfter(Duration::from_secs(1));
        }
        let frequency = self.settings.cluster_status_update_frequency;
        let generation = cluster.metadata.generation;
        {
            let mut last = self.lock_last_sync();
            if let Some((g, at)) = last.get(&name)
                && *g == generation
                && at.elapsed() < frequency
            {
                return HandlerResult::RequeueAfter(frequency.saturating_sub(at.elapsed()));
            }
            last.insert(name.clone(), (generation, Instant::now()));
        }
        let started = Instant::now();
        let result = self.sync(&cluster, secret_ref.as_ref()).await;
        let m = metrics::cluster_metrics();
        if let Some(m) = m {
            m.record_sync_duration(&name, started.elapsed().as_secs_f64());
        }
        match result {
            Ok(updated) => {
                if let Some(m) = m {
                    m.record_status(&updated);
                }
                // Probe every `frequency` from start to start, so a probe that waited for its
                // timeout does not stretch the interval (and the time to notice a hung member).
                HandlerResult::RequeueAfter(frequency.saturating_sub(started.elapsed()))
            }
            Err(e) => {
                if let Some(m) = m {
                    m.record_status(&cluster);
                }
                self.lock_last_sync().remove(&name);
                HandlerResult::Error(Box::new(e))
            }
        }
    }

    #[allow(
        clippy::too_many_lines,
        reason = "one status pass in Karmada's order: connection, health, version and APIs, summaries, Lease"
    )]
    async fn sync(
        &self,
        cluster: &Cluster,
        secret_ref: Option<&karmada_apis::cluster::v1alpha1::LocalSecretReference>,
    ) -> Result<Cluster, SyncError> {
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let member = match self.members.own_cluster() {
            // The agent: its own cluster, connected at start-up.
            Some(_) => self
                .members
                .get(&name)
                .ok_or_else(|| (format!("cluster {name} is not connected"), false)),
            None => self.connect(cluster, secret_ref).await,
        };
        let member = match member {
            Ok(m) => m,
            Err((message, not_owned)) => {
                tracing::warn!(cluster = %name, error = %message, "cannot build a client for the member");
                let observed = new_condition(
                    CLUSTER_CONDITION_READY,
                    "False",
                    CLUSTER_REASON_STATUS_COLLECTION_FAILED,
                    &format!("failed to create a ClusterClient: {message}"),
                );
                let ready = self.conditions.threshold_adjusted(cluster, observed);
                let updated = self.update_status(cluster, None, vec![ready]).await?;
                if not_owned {
                    return Err(SyncError::SecretNotOwned(message));
                }
                return Ok(updated);
            }
        };
        let client = member.clients().client();
        let probed_at = Instant::now();
        let health = probe_health(&client).await;
        match &health {
            Health::Offline(e) | Health::Unauthorized(e) => {
                tracing::info!(cluster = %name, error = %e, "member health check failed");
            }
            Health::Unhealthy => tracing::info!(cluster = %name, "member is not healthy"),
            Health::Healthy => {}
        }
        let online = !matches!(health, Health::Offline(_) | Health::Unauthorized(_));
        let observed = match &member.clients().config().proxy_url {
            Some(proxy) => observed_ready_condition_through_proxy(
                &health,
                &lariat::client::proxy::redact(proxy),
            ),
            None => observed_ready_condition(&health),
        };
        let ready = self
            .conditions
            .threshold_adjusted_at(cluster, observed, probed_at);
        if !online || health != Health::Healthy || ready.status != "True" {
            return self.update_status(cluster, None, vec![ready]).await;
        }
        if cluster.spec.sync_mode == ClusterSyncMode::Pull {
            // As Karmada's agent: renew the cluster Lease once the member is known healthy.
            self.leases.ensure(cluster);
        }

        let mut collected = Collected::default();
        match tokio::time::timeout(REQUEST_TIMEOUT, client.apiserver_version()).await {
            Ok(Ok(info)) => collected.kubernetes_version = info.git_version,
            Ok(Err(e)) => {
                tracing::warn!(cluster = %name, error = %e, "cannot get the member's Kubernetes version");
            }
            Err(_) => {
                tracing::warn!(cluster = %name, "getting the member's Kubernetes version timed out");
            }
        }
        let (enablements, partial) = discovery::api_enablements(&client).await;
        // Karmada's messages, followed by the cause when there is one (a member answering
        // garbage, or past the response limits, says so on its Cluster).
        let cause = partial
            .as_deref()
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        let api_condition = if enablements.is_empty() {
            tracing::warn!(cluster = %name, error = ?partial, "collected no API enablements");
            new_condition(
                CLUSTER_CONDITION_COMPLETE_API_ENABLEMENTS,
                "False",
                API_ENABLEMENTS_EMPTY,
                &format!("collected empty APIEnablements from the cluster{cause}"),
            )
        } else if let Some(e) = partial {
            tracing::warn!(cluster = %name, error = %e, count = enablements.len(), "collected partial API enablements");
            new_condition(
                CLUSTER_CONDITION_COMPLETE_API_ENABLEMENTS,
                "False",
                API_ENABLEMENTS_PARTIAL,
                &format!(
                    "might collect partial APIEnablements({}) from the cluster{cause}",
                    enablements.len()
                ),
            )
        } else {
            new_condition(
                CLUSTER_CONDITION_COMPLETE_API_ENABLEMENTS,
                "True",
                API_ENABLEMENTS_COMPLETE,
                "collected complete APIEnablements from the cluster",
            )
        };
        collected.api_enablements = enablements;

        if self.settings.enable_cluster_resource_modeling {
            let (nodes, pods) = match self.node_and_pod_stores(&name, &member).await {
                Ok(stores) => stores,
                Err(e) => {
                    // Karmada returns here without a status; the version and API enablements
                    // (whose condition names what went wrong with a member answering garbage or
                    // past the response limits) are written first, the summaries kept.
                    let previous = cluster.status.clone().unwrap_or_default();
                    collected.node_summary = previous.node_summary;
                    collected.resource_summary = previous.resource_summary;
                    if let Err(write) = self
                        .update_status(cluster, Some(collected), vec![api_condition, ready])
                        .await
                    {
                        tracing::warn!(cluster = %name, error = %write, "cannot write the collected status");
                    }
                    return Err(e);
                }
            };
            let nodes = nodes.list();
            let pods = pods.list();
            collected.node_summary = Some(summary::node_summary(&nodes));
            let mut resources = summary::resource_summary(&nodes, &pods);
            if self
                .settings
                .feature_gates
                .enabled(CUSTOMIZED_CLUSTER_RESOURCE_MODELING)
            {
                resources.allocatable_modelings =
                    summary::allocatable_modelings(&cluster.spec.resource_models, &nodes, &pods);
            }
            collected.resource_summary = Some(resources);
        }
        self.update_status(cluster, Some(collected), vec![api_condition, ready])
            .await
    }

    /// Connects a Push member with the credentials in the Secret `secret_ref` names.
    async fn connect(
        &self,
        cluster: &Cluster,
        secret_ref: Option<&karmada_apis::cluster::v1alpha1::LocalSecretReference>,
    ) -> Result<lariat::Cluster, (String, bool)> {
        let Some(secret_ref) = secret_ref else {
            return Err(("spec.secretRef is empty".to_owned(), false));
        };
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &secret_ref.namespace);
        match secrets.get(&secret_ref.name).await {
            Ok(secret) => self.members.connect(cluster, &secret).await.map_err(|e| {
                let not_owned = matches!(e, ConnectError::SecretNotOwned { .. });
                (e.to_string(), not_owned)
            }),
            Err(e) => Err((
                format!(
                    "cannot get secret {}/{}: {e}",
                    secret_ref.namespace, secret_ref.name
                ),
                false,
            )),
        }
    }

    /// The member's Node and Pod stores: unfiltered (every node and pod counts) but slimmed to the
    /// fields the summaries read before insert.
    async fn node_and_pod_stores(
        &self,
        name: &str,
        member: &lariat::Cluster,
    ) -> Result<(lariat::Store<Node>, lariat::Store<Pod>), SyncError> {
        let timeout = self.settings.cluster_cache_sync_timeout;
        let nodes = member
            .caches()
            .for_kind_in::<Node>(CacheScope::all())
            .map_err(|source| SyncError::Cache {
                cluster: name.to_string(),
                kind: "Node",
                source,
            })?;
        let pods = member
            .caches()
            .for_kind_in::<Pod>(CacheScope::all())
            .map_err(|source| SyncError::Cache {
                cluster: name.to_string(),
                kind: "Pod",
                source,
            })?;
        if !nodes.is_started() {
            nodes.set_transform(Arc::new(summary::slim_node));
        }
        if !pods.is_started() {
            pods.set_transform(Arc::new(summary::slim_pod));
        }
        nodes
            .wait_for_sync(timeout)
            .await
            .map_err(|source| SyncError::Cache {
                cluster: name.to_string(),
                kind: "Node",
                source,
            })?;
        pods.wait_for_sync(timeout)
            .await
            .map_err(|source| SyncError::Cache {
                cluster: name.to_string(),
                kind: "Pod",
                source,
            })?;
        Ok((nodes.store(), pods.store()))
    }

    /// Applies `collected` (if any) and `conditions` to the status and writes it through the
    /// status subresource if anything changed, retrying conflicts on a fresh copy. Returns the
    /// Cluster as it now is.
    async fn update_status(
        &self,
        cluster: &Cluster,
        collected: Option<Collected>,
        conditions: Vec<Condition>,
    ) -> Result<Cluster, SyncError> {
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let apply = |status: &mut ClusterStatus| {
            if let Some(c) = &collected {
                status.kubernetes_version = c.kubernetes_version.clone();
                status.api_enablements = c.api_enablements.clone();
                status.node_summary = c.node_summary.clone();
                status.resource_summary = c.resource_summary.clone();
            }
            for cond in &conditions {
                set_condition(&mut status.conditions, cond.clone());
            }
        };
        let current = cluster.status.clone().unwrap_or_default();
        let mut desired = current.clone();
        apply(&mut desired);
        if desired == current {
            return Ok(cluster.clone());
        }
        let api: Api<Cluster> = Api::all(self.client.clone());
        // A merge patch of what changed in the status, guarded by the resourceVersion read.
        let mut read = cluster.clone();
        let mut obj = cluster.clone();
        obj.status = Some(desired);
        // A conflicting write is retried with a fresh copy (client-go's `retry.DefaultRetry`); the
        // first attempt starts at once.
        let mut retry = ConflictRetry::new(DEFAULT_RETRY);
        retry.next().await;
        loop {
            let patch = match guarded_merge_patch(&read, &obj) {
                Ok(Some(patch)) => patch,
                Ok(None) => return Ok(read),
                Err(e) => {
                    return Err(SyncError::UpdateStatus {
                        cluster: name,
                        source: kube::Error::SerdeError(e),
                    });
                }
            };
            match api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(updated) => {
                    tracing::debug!(cluster = %name, "cluster status updated");
                    return Ok(updated);
                }
                Err(source) if is_conflict(&source) => {
                    if !retry.next().await {
                        return Err(SyncError::UpdateStatus {
                            cluster: name,
                            source,
                        });
                    }
                    let fresh = api
                        .get(&name)
                        .await
                        .map_err(|source| SyncError::UpdateStatus {
                            cluster: name.clone(),
                            source,
                        })?;
                    let mut status = fresh.status.clone().unwrap_or_default();
                    apply(&mut status);
                    if Some(&status) == fresh.status.as_ref() {
                        return Ok(fresh);
                    }
                    obj = fresh.clone();
                    obj.status = Some(status);
                    read = fresh;
                }
                Err(source) => {
                    return Err(SyncError::UpdateStatus {
                        cluster: name,
                        source,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod proxy_message_tests {
    use super::*;

    #[test]
    fn an_unreachable_proxied_member_names_the_proxy_once() {
        let health = Health::Offline(
            "proxy http://10.0.0.5:3128: tunnel to m1:6443: the proxy answered CONNECT with 403 Forbidden"
                .to_owned(),
        );
        let c = observed_ready_condition_through_proxy(&health, "http://10.0.0.5:3128");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
            (
                "False",
                CLUSTER_REASON_NOT_REACHABLE,
                "cluster is not reachable through proxy http://10.0.0.5:3128: tunnel to m1:6443: \
                 the proxy answered CONNECT with 403 Forbidden"
            )
        );
        let timeout = Health::Offline("GET /readyz timed out after 10s".to_owned());
        let c = observed_ready_condition_through_proxy(&timeout, "socks5://p:1080");
        assert_eq!(
            c.message,
            "cluster is not reachable through proxy socks5://p:1080: GET /readyz timed out after 10s"
        );
        let c = observed_ready_condition_through_proxy(&Health::Healthy, "socks5://p:1080");
        assert_eq!(c.message, CLUSTER_MESSAGE_HEALTHY);
    }
}
