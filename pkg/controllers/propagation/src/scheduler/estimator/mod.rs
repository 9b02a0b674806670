//! The accurate estimator client (`--enable-scheduler-estimator`): Karmada's scheduler asks each
//! member's `karmada-scheduler-estimator` (a gRPC server computing from the member's nodes and pods)
//! how many replicas of a binding it can still take, and keeps the smaller of that and the general
//! estimate from the Cluster's resource summary (the combination is in the `karmada-scheduler`
//! crate, [`karmada_scheduler::AccurateEstimates`]).
//!
//! Connections follow Karmada's estimator cache: one per cluster, made when the Cluster is seen
//! (skipped for Pull clusters with `--disable-scheduler-estimator-in-pull-mode`), retried with
//! backoff and on every change of the Cluster until it is made, kept until the Cluster is deleted
//! (the channel reconnects by itself). Where an estimator is is found as in [`dial`].
//!
//! An estimator that is missing, down or slow never fails a schedule: its answer is `None`, and the
//! scheduling algorithm then falls back to the general estimate (for every cluster of that attempt,
//! as Karmada). Each failed call is logged (one warning per binding, as Karmada's
//! `Max cluster available replicas error`) and counted in `scheduler_estimator_requests_total`
//! (karmada-rs's own metric; Karmada v1.16 has none for its estimator client).

pub mod dial;
pub mod proto;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::join_all;
use karmada_apis::Cluster;
use karmada_apis::cluster::v1alpha1::ClusterSyncMode;
use karmada_apis::work::v1alpha2::{Component, ReplicaRequirements};
use karmada_controllers_common::context::SchedulerEstimatorSettings;
use karmada_scheduler::AccurateEstimates;
use parking_lot::Mutex;
use prometheus::{IntCounterVec, Opts};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use proto::{EstimatorClient, MaxAvailableComponentSetsRequest, MaxAvailableReplicasRequest};

/// Why an estimator could not be found or reached.
#[derive(Debug, thiserror::Error)]
pub enum EstimatorError {
    /// Reading the estimator's Service failed.
    #[error("get estimator service {namespace}/{name}: {source}")]
    Service {
        /// Namespace of the Service.
        namespace: String,
        /// Name of the Service.
        name: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The Service exists but does not say where the estimator is.
    #[error("estimator service {namespace}/{name}: {why}")]
    UnusableService {
        /// Namespace of the Service.
        namespace: String,
        /// Name of the Service.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// No address gave a ready connection.
    #[error("{0}")]
    Dial(String),
    /// A certificate or key file could not be used.
    #[error("scheduler estimator TLS file {path}: {why}")]
    File {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// The TLS configuration is invalid.
    #[error("scheduler estimator TLS configuration: {0}")]
    Tls(String),
}

/// Longest wait between two connection attempts (Karmada's workqueue maximum backoff).
const MAX_BACKOFF: Duration = Duration::from_secs(1000);
/// First wait after a failed connection attempt (Karmada's workqueue base backoff).
const BASE_BACKOFF: Duration = Duration::from_millis(5);

/// The `method` label of `MaxAvailableReplicas` calls.
const METHOD_MAX_AVAILABLE_REPLICAS: &str = "MaxAvailableReplicas";
/// The `method` label of `MaxAvailableComponentSets` calls.
const METHOD_MAX_AVAILABLE_COMPONENT_SETS: &str = "MaxAvailableComponentSets";

/// The connections to the members' estimators, and the calls.
pub struct Estimators {
    settings: SchedulerEstimatorSettings,
    /// The Karmada API server client, for the estimators' Services.
    client: kube::Client,
    tls: Option<Arc<rustls::ClientConfig>>,
    connected: Mutex<HashMap<String, EstimatorClient>>,
    /// Clusters whose connection is being made, with the signal that wakes the attempt early.
    pending: Mutex<HashMap<String, Arc<Notify>>>,
    cancel: CancellationToken,
}

impl Estimators {
    /// The estimators client, `None` unless `--enable-scheduler-estimator`.
    pub fn new(
        settings: &SchedulerEstimatorSettings,
        client: kube::Client,
        cancel: CancellationToken,
    ) -> Result<Option<Arc<Self>>, EstimatorError> {
        if !settings.enabled {
            return Ok(None);
        }
        let tls = dial::tls_config(settings)?;
        Ok(Some(Arc::new(Self {
            settings: settings.clone(),
            client,
            tls,
            connected: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            cancel,
        })))
    }

    /// A Cluster was added, changed or deleted (`None`): connects to its estimator if not yet
    /// connected, drops the connection of a deleted cluster.
    pub fn cluster_changed(self: &Arc<Self>, name: &str, cluster: Option<&Cluster>) {
        let Some(cluster) = cluster else {
            self.connected.lock().remove(name);
            self.pending.lock().remove(name);
            return;
        };
        if self.settings.disable_in_pull_mode && cluster.spec.sync_mode == ClusterSyncMode::Pull {
            return;
        }
        if self.connected.lock().contains_key(name) {
            return;
        }
        let notify = {
            let mut pending = self.pending.lock();
            if let Some(notify) = pending.get(name) {
                notify.notify_one();
                return;
            }
            let notify = Arc::new(Notify::new());
            pending.insert(name.to_owned(), notify.clone());
            notify
        };
        let this = self.clone();
        let name = name.to_owned();
        tokio::spawn(async move { this.connect_until_done(name, notify).await });
    }

    /// Whether `cluster`'s estimator is connected.
    pub fn is_connected(&self, cluster: &str) -> bool {
        self.connected.lock().contains_key(cluster)
    }

    async fn connect_until_done(self: Arc<Self>, name: String, notify: Arc<Notify>) {
        let mut failures: u32 = 0;
        loop {
            let still_wanted = self
                .pending
                .lock()
                .get(&name)
                .is_some_and(|n| Arc::ptr_eq(n, &notify));
            if !still_wanted || self.cancel.is_cancelled() {
                return;
            }
            match self.connect(&name).await {
                Ok(client) => {
                    let mut pending = self.pending.lock();
                    if pending.get(&name).is_some_and(|n| Arc::ptr_eq(n, &notify)) {
                        pending.remove(&name);
                        self.connected.lock().insert(name.clone(), client);
                        tracing::info!(cluster = %name, "connection with the scheduler estimator established");
                    }
                    return;
                }
                Err(e) => {
                    tracing::warn!(cluster = %name, error = %e, "failed to connect to the scheduler estimator");
                    let wait = BASE_BACKOFF
                        .saturating_mul(2u32.saturating_pow(failures))
                        .min(MAX_BACKOFF);
                    failures = failures.saturating_add(1);
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = notify.notified() => {}
                        () = self.cancel.cancelled() => return,
                    }
                }
            }
        }
    }

    async fn connect(&self, name: &str) -> Result<EstimatorClient, EstimatorError> {
        let addresses = dial::resolve(&self.client, &self.settings, name).await?;
        tracing::info!(cluster = %name, addresses = %addresses.join(","), "dialling the scheduler estimator");
        let channel = dial::dial(&addresses, self.tls.as_ref()).await?;
        Ok(EstimatorClient::new(channel))
    }

    /// Asks the estimators of `clusters` how many replicas with `requirements` each can still
    /// take, all at once, within `--scheduler-estimator-timeout`. `object` names the binding's
    /// workload (`kind=…, name=ns/name`), sent along as Karmada does.
    pub async fn max_available_replicas(
        &self,
        clusters: &[String],
        requirements: Option<&ReplicaRequirements>,
        object: &str,
    ) -> AccurateEstimates {
        let requirements = requirements.map(convert::replica_requirements);
        self.ask_all(
            clusters,
            object,
            METHOD_MAX_AVAILABLE_REPLICAS,
            |client, cluster, left| {
                let request = MaxAvailableReplicasRequest {
                    cluster: cluster.to_owned(),
                    replica_requirements: Some(requirements.clone().unwrap_or_default()),
                };
                async move {
                    client
                        .max_available_replicas(request, object, left)
                        .await
                        .map(|r| r.max_replicas)
                }
            },
        )
        .await
    }

    /// Asks the estimators of `clusters` how many whole sets of `components` each can still take
    /// (gate `MultiplePodTemplatesScheduling`), as [`Estimators::max_available_replicas`] does;
    /// `namespace` is the workload's, for the estimators' ResourceQuota check.
    pub async fn max_available_component_sets(
        &self,
        clusters: &[String],
        components: &[Component],
        namespace: &str,
        object: &str,
    ) -> AccurateEstimates {
        let components: Vec<proto::Component> = components.iter().map(convert::component).collect();
        self.ask_all(
            clusters,
            object,
            METHOD_MAX_AVAILABLE_COMPONENT_SETS,
            |client, cluster, left| {
                let request = MaxAvailableComponentSetsRequest {
                    cluster: cluster.to_owned(),
                    components: components.clone(),
                    namespace: namespace.to_owned(),
                };
                async move {
                    client
                        .max_available_component_sets(request, object, left)
                        .await
                        .map(|r| r.max_sets)
                }
            },
        )
        .await
    }

    /// Calls `method` on the estimator of every cluster at once, each call made by `call` with
    /// the time left until `--scheduler-estimator-timeout`; counts and logs the failures.
    async fn ask_all<F, Fut>(
        &self,
        clusters: &[String],
        object: &str,
        method: &'static str,
        call: F,
    ) -> AccurateEstimates
    where
        F: Fn(EstimatorClient, &str, Duration) -> Fut,
        Fut: Future<Output = Result<i32, proto::CallError>>,
    {
        let timeout = self.settings.timeout;
        let deadline = Instant::now() + timeout;
        let calls = clusters.iter().map(|cluster| {
            let client = self.connected.lock().get(cluster).cloned();
            let call = client.map(|c| {
                call(
                    c,
                    cluster,
                    deadline.saturating_duration_since(Instant::now()),
                )
            });
            async move {
                let Some(call) = call else {
                    count(cluster, method, "unconnected");
                    return (
                        cluster.clone(),
                        Err(format!(
                            "cluster {cluster} does not exist in estimator cache"
                        )),
                    );
                };
                let answer = call.await;
                count(
                    cluster,
                    method,
                    match &answer {
                        Ok(_) => "success",
                        Err(proto::CallError::Timeout(_)) => "timeout",
                        Err(_) => "error",
                    },
                );
                let answer = answer.map_err(|e| {
                    format!(
                        "gRPC request cluster({cluster}) estimator error when calling {method}: {e}"
                    )
                });
                (cluster.clone(), answer)
            }
        });
        let answers = join_all(calls).await;
        let errors: Vec<&str> = answers
            .iter()
            .filter_map(|(_, a)| a.as_ref().err().map(String::as_str))
            .collect();
        if !errors.is_empty() {
            tracing::warn!(object = %object, method, errors = %errors.join("; "), "max cluster available replicas error; the accurate estimates are ignored");
        }
        answers
            .into_iter()
            .map(|(cluster, answer)| (cluster, answer.ok()))
            .collect()
    }
}

/// `scheduler_estimator_requests_total{member_cluster, method, result}`.
fn requests_total() -> Option<&'static IntCounterVec> {
    static METRIC: OnceLock<Option<IntCounterVec>> = OnceLock::new();
    METRIC
        .get_or_init(|| {
            let metric = IntCounterVec::new(
                Opts::new(
                    "scheduler_estimator_requests_total",
                    "Number of calls of the scheduler to a member's karmada-scheduler-estimator, by member cluster, method and result ('success'; 'error', 'timeout': the call failed; 'unconnected': no connection to that estimator). A call that did not succeed makes the scheduler fall back to the general estimate.",
                ),
                &["member_cluster", "method", "result"],
            );
            match metric {
                Ok(m) => {
                    if let Err(e) = lariat::metrics::registry().register(Box::new(m.clone())) {
                        tracing::warn!(error = %e, "scheduler estimator metric not registered");
                    }
                    Some(m)
                }
                Err(e) => {
                    tracing::error!(error = %e, "invalid scheduler estimator metric definition");
                    None
                }
            }
        })
        .as_ref()
}

fn count(cluster: &str, method: &str, result: &str) {
    if let Some(m) = requests_total() {
        m.with_label_values(&[cluster, method, result]).inc();
    }
}

/// From the binding's types to the protocol's.
mod convert {
    use k8s_openapi::api::core::v1 as core;
    use karmada_apis::work::v1alpha2 as work;

    use super::proto;

    pub(super) fn replica_requirements(
        r: &work::ReplicaRequirements,
    ) -> proto::ReplicaRequirements {
        proto::ReplicaRequirements {
            node_claim: r.node_claim.as_ref().map(node_claim),
            resource_request: quantities(&r.resource_request),
            namespace: r.namespace.clone(),
            priority_class_name: r.priority_class_name.clone(),
        }
    }

    /// Karmada's `toPBReplicaRequirements`: a component without requirements sends empty ones.
    pub(super) fn component(c: &work::Component) -> proto::Component {
        let requirements = c.replica_requirements.as_ref();
        proto::Component {
            name: c.name.clone(),
            replica_requirements: Some(proto::ComponentReplicaRequirements {
                node_claim: requirements
                    .and_then(|r| r.node_claim.as_ref())
                    .map(node_claim),
                resource_request: requirements
                    .map(|r| quantities(&r.resource_request))
                    .unwrap_or_default(),
                priority_class_name: requirements
                    .map(|r| r.priority_class_name.clone())
                    .unwrap_or_default(),
            }),
            replicas: c.replicas,
        }
    }

    fn quantities(
        list: &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    ) -> std::collections::BTreeMap<String, proto::Quantity> {
        list.iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    proto::Quantity {
                        string: v.0.clone(),
                    },
                )
            })
            .collect()
    }

    fn node_claim(c: &work::NodeClaim) -> proto::NodeClaim {
        proto::NodeClaim {
            node_affinity: c.hard_node_affinity.as_ref().map(node_selector),
            node_selector: c.node_selector.clone(),
            tolerations: c.tolerations.iter().map(toleration).collect(),
        }
    }

    fn node_selector(s: &core::NodeSelector) -> proto::NodeSelector {
        proto::NodeSelector {
            node_selector_terms: s
                .node_selector_terms
                .iter()
                .map(|t| proto::NodeSelectorTerm {
                    match_expressions: requirements(t.match_expressions.as_deref()),
                    match_fields: requirements(t.match_fields.as_deref()),
                })
                .collect(),
        }
    }

    fn requirements(
        r: Option<&[core::NodeSelectorRequirement]>,
    ) -> Vec<proto::NodeSelectorRequirement> {
        r.unwrap_or_default()
            .iter()
            .map(|r| proto::NodeSelectorRequirement {
                key: r.key.clone(),
                operator: r.operator.clone(),
                values: r.values.clone().unwrap_or_default(),
            })
            .collect()
    }

    fn toleration(t: &core::Toleration) -> proto::Toleration {
        proto::Toleration {
            key: t.key.clone().unwrap_or_default(),
            operator: t.operator.clone().unwrap_or_default(),
            value: t.value.clone().unwrap_or_default(),
            effect: t.effect.clone().unwrap_or_default(),
            toleration_seconds: t.toleration_seconds,
        }
    }
}
