//! The member clusters the controller-manager is connected to: one `lariat` cluster (clients, caches,
//! controllers, metrics) per joined Push-mode member, shared by every controller that talks to members.
//!
//! The clusterStatus controller connects a member (building its client from `Cluster.spec` and the
//! Secret named by `spec.secretRef`) and reconnects it when its endpoint or credentials change; the
//! cluster controller disconnects it when the Cluster goes. Other controllers only look members up.
//!
//! The same set serves `karmada-agent` (Pull mode): there it holds exactly one member, the agent's
//! own cluster, connected once at start-up with the agent's own credentials
//! ([`MemberClusters::for_own_cluster`]). [`MemberClusters::serves`] is how controllers tell which
//! Clusters are theirs: the controller-manager's are the Push ones, the agent's is its own.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use karmada_apis::Cluster;
use karmada_apis::cluster::v1alpha1::{ClusterSyncMode, SECRET_CA_DATA_KEY, SECRET_TOKEN_KEY};
use karmada_apis::well_known::KARMADA_CONTROLLER_MANAGER_NAME;
use kube::config::{KubeConfigOptions, Kubeconfig};
use lariat::{ClientOptions, ClusterOptions, ClusterRegistry, ControllerOptions};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// How long a member's controllers get to drain when it is disconnected or reconnected.
pub const DISCONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connect timeout of member clients: a dead endpoint fails fast instead of piling up requests.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Deadline of every request to a member (Karmada's member clients use client-go's 32 s
/// `Timeout`): a member that accepts connections but never answers fails the request instead of
/// holding the caller; the deadline covers reading the whole body, so a member trickling bytes
/// fails too. A watch streams until its `timeoutSeconds` plus a margin (see
/// [`lariat::client::timeout`]).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(32);

/// Response size limits of member clients, so a member answering with an endless body, a
/// multi-GiB list or an endless watch event costs bounded memory (Karmada has none):
/// - one object: 16 MiB (etcd stores objects up to 1.5 MiB and the API server takes request
///   bodies up to 3 MiB; five times that is no legitimate answer);
/// - one list page, discovery or OpenAPI document: 64 MiB (member caches list in pages of 500
///   objects, 128 KiB each at the limit; ordinary objects are a few KiB);
/// - one watch event: 16 MiB (one object).
pub const RESPONSE_LIMITS: lariat::client::ResponseLimits = lariat::client::ResponseLimits {
    object_bytes: Some(16 << 20),
    list_bytes: Some(64 << 20),
    watch_event_bytes: Some(16 << 20),
};

/// The label selector of member caches unless a controller asks otherwise: only the objects Karmada
/// manages (`karmada.io/managed=true`).
pub const MANAGED_SELECTOR: &str = "karmada.io/managed=true";

/// The framework options every member starts from: caches select [`MANAGED_SELECTOR`] and clients
/// send the controller-manager's User-Agent.
pub fn member_cluster_options() -> ClusterOptions {
    let mut o = ClusterOptions::with_label_scope(MANAGED_SELECTOR);
    o.clients.user_agent = KARMADA_CONTROLLER_MANAGER_NAME.to_owned();
    o
}

/// Why a member could not be connected.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The Cluster has no `spec.apiEndpoint`.
    #[error("cluster {cluster}: spec.apiEndpoint is empty")]
    NoEndpoint {
        /// Cluster name.
        cluster: String,
    },
    /// The credentials Secret lacks the token.
    #[error("cluster {cluster}: secret {namespace}/{name} has no `{SECRET_TOKEN_KEY}` key")]
    NoToken {
        /// Cluster name.
        cluster: String,
        /// Secret namespace.
        namespace: String,
        /// Secret name.
        name: String,
    },
    /// The client configuration could not be built.
    #[error("cluster {cluster}: invalid client configuration: {message}")]
    Config {
        /// Cluster name.
        cluster: String,
        /// What was wrong.
        message: String,
    },
    /// The Secret was not made for this Cluster (see [`check_secret_owner`]): never used.
    #[error(
        "cluster {cluster}: secret {namespace}/{name} does not belong to it ({why}); its credentials \
         are not used. A cluster's secret must have a controller ownerReference to the Cluster \
         (kind Cluster, apiVersion cluster.karmada.io/v1alpha1, its name and uid), as karmadactl join sets"
    )]
    SecretNotOwned {
        /// Cluster name.
        cluster: String,
        /// Secret namespace.
        namespace: String,
        /// Secret name.
        name: String,
        /// What is missing or different.
        why: String,
    },
    /// The framework refused the cluster.
    #[error("cluster {cluster}: {source}")]
    Framework {
        /// Cluster name.
        cluster: String,
        /// The framework error.
        #[source]
        source: Box<lariat::Error>,
    },
}

/// Whether `secret` was made for `cluster`: its controller ownerReference must name the Cluster
/// (group `cluster.karmada.io`, kind `Cluster`) by name and uid. `karmadactl join` (ours and
/// Karmada's) sets it right after creating the Cluster; a Cluster whose `secretRef` names another
/// cluster's Secret (or any Secret nobody tied to it) therefore never gets those credentials used,
/// whoever created or edited the Cluster.
pub fn check_secret_owner(cluster: &Cluster, secret: &Secret) -> Result<(), ConnectError> {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let uid = cluster.metadata.uid.clone().unwrap_or_default();
    let refused = |why: String| ConnectError::SecretNotOwned {
        cluster: name.clone(),
        namespace: secret.metadata.namespace.clone().unwrap_or_default(),
        name: secret.metadata.name.clone().unwrap_or_default(),
        why,
    };
    let controller = secret
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    let Some(owner) = controller else {
        return Err(refused("it has no controller ownerReference".to_owned()));
    };
    let group = owner.api_version.split_once('/').map_or("", |(g, _)| g);
    if group != "cluster.karmada.io" || owner.kind != "Cluster" {
        return Err(refused(format!(
            "it is controlled by {} {}",
            owner.kind, owner.name
        )));
    }
    if owner.name != name || uid.is_empty() || owner.uid != uid {
        return Err(refused(format!(
            "it is controlled by Cluster {} (uid {})",
            owner.name, owner.uid
        )));
    }
    Ok(())
}

/// What a member connection was built from; a change means the member must be reconnected.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Credentials {
    endpoint: String,
    token: Vec<u8>,
    ca_bundle: Vec<u8>,
    insecure: bool,
    proxy_url: String,
    proxy_header: Vec<(String, String)>,
}

impl Credentials {
    fn from(cluster: &Cluster, secret: &Secret) -> Result<Self, ConnectError> {
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let spec = &cluster.spec;
        if spec.api_endpoint.is_empty() {
            return Err(ConnectError::NoEndpoint { cluster: name });
        }
        let data = secret.data.as_ref();
        let token = data
            .and_then(|d| d.get(SECRET_TOKEN_KEY))
            .map(|b| b.0.clone())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ConnectError::NoToken {
                cluster: name.clone(),
                namespace: secret.metadata.namespace.clone().unwrap_or_default(),
                name: secret.metadata.name.clone().unwrap_or_default(),
            })?;
        let ca_bundle = data
            .and_then(|d| d.get(SECRET_CA_DATA_KEY))
            .map(|b| b.0.clone())
            .unwrap_or_default();
        Ok(Credentials {
            endpoint: spec.api_endpoint.clone(),
            token,
            ca_bundle,
            insecure: spec.insecure_skip_tls_verification,
            proxy_url: spec.proxy_url.clone(),
            proxy_header: spec
                .proxy_header
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
    }

    /// A kube client configuration: endpoint, bearer token, CA bundle (PEM) unless TLS verification
    /// is skipped, and proxy URL (its headers go into the client options, see
    /// [`Self::proxy_headers`]).
    async fn kube_config(&self, cluster: &str) -> Result<kube::Config, ConnectError> {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let token = String::from_utf8(self.token.clone())
            .map_err(|_| ConnectError::Config {
                cluster: cluster.to_string(),
                message: "the token is not UTF-8".to_string(),
            })?
            .trim()
            .to_string();
        let mut c = serde_json::json!({"server": self.endpoint});
        if self.insecure {
            c["insecure-skip-tls-verify"] = serde_json::json!(true);
        } else if !self.ca_bundle.is_empty() {
            c["certificate-authority-data"] = serde_json::json!(b64.encode(&self.ca_bundle));
        }
        let kc = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster, "cluster": c}],
            "users": [{"name": cluster, "user": {"token": token}}],
            "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": cluster}}],
            "current-context": cluster,
        });
        let kc: Kubeconfig = serde_json::from_value(kc).map_err(|e| ConnectError::Config {
            cluster: cluster.to_string(),
            message: e.to_string(),
        })?;
        let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| ConnectError::Config {
                cluster: cluster.to_string(),
                message: e.to_string(),
            })?;
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        // The Cluster alone says whether the member is behind a proxy: kube would otherwise take
        // HTTPS_PROXY from the environment.
        config.proxy_url = if self.proxy_url.is_empty() {
            None
        } else {
            Some(self.proxy_url.parse().map_err(|e| ConnectError::Config {
                cluster: cluster.to_string(),
                message: format!("spec.proxyURL is not a valid URL: {e}"),
            })?)
        };
        Ok(config)
    }

    /// `spec.proxyHeader` as the headers of the proxy's CONNECT requests: as Karmada, a value
    /// holding commas is several values of that header (`'k1': 'v1,v2'` sends `k1: v1` and
    /// `k1: v2`), each trimmed as Go writes them.
    fn proxy_headers(&self, cluster: &str) -> Result<http::HeaderMap, ConnectError> {
        let mut headers = http::HeaderMap::new();
        for (name, values) in &self.proxy_header {
            let invalid = || ConnectError::Config {
                cluster: cluster.to_string(),
                message: format!("spec.proxyHeader {name:?} is not a valid HTTP header"),
            };
            let header = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?;
            for value in values.split(',') {
                let mut value = http::HeaderValue::from_str(value.trim()).map_err(|_| invalid())?;
                value.set_sensitive(true);
                headers.append(header.clone(), value);
            }
        }
        Ok(headers)
    }
}

/// How long a controller waits before looking again at an object whose member cluster is not
/// connected. Only a safety net: controllers that need a member requeue its objects when it
/// connects ([`MemberEvent::Connected`]) or when their member handler is set up.
pub const MEMBER_NOT_CONNECTED_RETRY: Duration = Duration::from_secs(10);

/// How members are connected: per-member client limits, cache and queue settings.
#[derive(Clone, Debug)]
pub struct MemberOptions {
    /// `--cluster-api-qps` (one token bucket per member).
    pub qps: f64,
    /// `--cluster-api-burst`.
    pub burst: u32,
    /// Queue limits of member controllers.
    pub controllers: ControllerOptions,
}

impl Default for MemberOptions {
    fn default() -> Self {
        MemberOptions {
            qps: 40.0,
            burst: 60,
            controllers: ControllerOptions::default(),
        }
    }
}

/// A change of a member's connection. A reconnect (new endpoint or credentials) is a
/// `Disconnected` followed by a `Connected`: the new connection has fresh caches and controllers,
/// so controllers that registered handlers on the old one must register them again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberEvent {
    /// The member called this is now connected.
    Connected(String),
    /// The member called this was disconnected.
    Disconnected(String),
}

/// The registry of connected member clusters.
pub struct MemberClusters {
    registry: ClusterRegistry,
    /// The agent's own cluster; `None` in the controller-manager.
    own: Option<String>,
    options: MemberOptions,
    credentials: Mutex<HashMap<String, Credentials>>,
    events: broadcast::Sender<MemberEvent>,
}

impl MemberClusters {
    /// An empty set; every member's cancellation token is a child of `token`.
    pub fn new(token: CancellationToken) -> Self {
        Self::with_options(token, MemberOptions::default())
    }

    /// An empty set whose members are connected with `options`.
    pub fn with_options(token: CancellationToken, options: MemberOptions) -> Self {
        MemberClusters {
            registry: ClusterRegistry::new(token),
            own: None,
            options,
            credentials: Mutex::new(HashMap::new()),
            events: broadcast::channel(256).0,
        }
    }

    /// An empty set with member client limits and queue settings taken from the flags.
    pub fn from_settings(token: CancellationToken, settings: &crate::Settings) -> Self {
        Self::with_options(
            token,
            MemberOptions {
                qps: f64::from(settings.cluster_api_qps),
                burst: settings.cluster_api_burst,
                controllers: ControllerOptions {
                    rate_limiter: settings.rate_limiter.clone(),
                    ..ControllerOptions::default()
                },
            },
        )
    }

    /// The set of a `karmada-agent`: its own cluster `name`, connected with `config` (the agent's
    /// `--kubeconfig`) and client limits and queue settings from `settings`, as the only member.
    /// It stays connected for the life of the set: [`Self::disconnect`] leaves it alone.
    pub fn for_own_cluster(
        token: CancellationToken,
        settings: &crate::Settings,
        name: &str,
        config: kube::Config,
        user_agent: &str,
    ) -> Result<Self, ConnectError> {
        let mut set = Self::from_settings(token, settings);
        set.own = Some(name.to_owned());
        let mut options = set.cluster_options();
        options.clients.user_agent = user_agent.to_owned();
        set.registry
            .add(name, config, options)
            .map_err(|source| ConnectError::Framework {
                cluster: name.to_owned(),
                source: Box::new(source),
            })?;
        Ok(set)
    }

    /// The agent's own cluster; `None` in the controller-manager.
    pub fn own_cluster(&self) -> Option<&str> {
        self.own.as_deref()
    }

    /// Whether this process acts on `cluster`'s member: the controller-manager on Push clusters
    /// (it never contacts a Pull member), the agent on its own cluster only.
    pub fn serves(&self, cluster: &Cluster) -> bool {
        match &self.own {
            Some(own) => cluster.metadata.name.as_deref() == Some(own.as_str()),
            None => cluster.spec.sync_mode == ClusterSyncMode::Push,
        }
    }

    /// Connection changes from now on (a slow receiver may miss some and sees `Lagged`).
    pub fn subscribe(&self) -> broadcast::Receiver<MemberEvent> {
        self.events.subscribe()
    }

    /// The underlying registry.
    pub fn registry(&self) -> &ClusterRegistry {
        &self.registry
    }

    /// The connected member called `name`, if any.
    pub fn get(&self, name: &str) -> Option<lariat::Cluster> {
        self.registry.get(name)
    }

    /// Starts the controllers of every member, now and as members connect.
    pub fn start(&self) {
        self.registry.start();
    }

    /// Disconnects every member (controllers drained within `timeout`).
    pub async fn shutdown(&self, timeout: Duration) -> bool {
        self.lock_credentials().clear();
        self.registry.shutdown(timeout).await
    }

    fn lock_credentials(&self) -> std::sync::MutexGuard<'_, HashMap<String, Credentials>> {
        self.credentials
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The options a new member is registered with: its own token bucket, and caches that select
    /// only objects Karmada manages (`karmada.io/managed=true`) unless a controller asks otherwise.
    fn cluster_options(&self) -> ClusterOptions {
        let mut o = member_cluster_options();
        o.clients = ClientOptions {
            qps: self.options.qps,
            burst: self.options.burst,
            request_timeout: Some(REQUEST_TIMEOUT),
            response_limits: RESPONSE_LIMITS,
            ..o.clients
        };
        o.controllers = self.options.controllers.clone();
        o
    }

    /// Connects the member described by `cluster` with the credentials in `secret` (keys `token`
    /// and `caBundle`), or returns the existing connection if endpoint and credentials are
    /// unchanged. A member whose endpoint, TLS settings, proxy or credentials changed (e.g. a
    /// rotated token) is disconnected and connected again.
    pub async fn connect(
        &self,
        cluster: &Cluster,
        secret: &Secret,
    ) -> Result<lariat::Cluster, ConnectError> {
        let name = cluster.metadata.name.clone().unwrap_or_default();
        if let Err(e) = check_secret_owner(cluster, secret) {
            // Credentials it no longer may use: drop a connection built from them.
            self.disconnect(&name).await;
            return Err(e);
        }
        let creds = Credentials::from(cluster, secret)?;
        let existing = self.registry.get(&name);
        let same = self.lock_credentials().get(&name) == Some(&creds);
        if let Some(member) = existing {
            if same {
                return Ok(member);
            }
            tracing::info!(
                cluster = %name,
                "member endpoint or credentials changed; reconnecting"
            );
            self.disconnect(&name).await;
        }
        let config = creds.kube_config(&name).await?;
        let mut options = self.cluster_options();
        options.clients.proxy_headers = creds.proxy_headers(&name)?;
        let member = match self.registry.add(&name, config, options) {
            Ok(m) => m,
            Err(lariat::Error::ClusterExists(_)) => {
                // Another task connected it meanwhile; use that connection.
                return self
                    .registry
                    .get(&name)
                    .ok_or_else(|| ConnectError::Framework {
                        cluster: name.clone(),
                        source: Box::new(lariat::Error::ClusterNotFound(name.clone())),
                    });
            }
            Err(source) => {
                return Err(ConnectError::Framework {
                    cluster: name,
                    source: Box::new(source),
                });
            }
        };
        self.lock_credentials().insert(name.clone(), creds);
        tracing::info!(cluster = %name, endpoint = %cluster.spec.api_endpoint, "member connected");
        // Nobody listening is fine.
        let _ = self.events.send(MemberEvent::Connected(name.clone()));
        Ok(member)
    }

    /// Disconnects the member called `name` (stops its watches, workers and metric series). Does
    /// nothing if it is not connected.
    pub async fn disconnect(&self, name: &str) {
        if self.own.as_deref() == Some(name) {
            return;
        }
        self.lock_credentials().remove(name);
        if self.registry.get(name).is_none() {
            return;
        }
        match self.registry.remove(name, DISCONNECT_TIMEOUT).await {
            Ok(clean) => {
                tracing::info!(cluster = name, clean, "member disconnected");
                let _ = self
                    .events
                    .send(MemberEvent::Disconnected(name.to_string()));
            }
            Err(e) => tracing::debug!(cluster = name, error = %e, "member already disconnected"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn secret_owned_by(kind: &str, name: &str, uid: &str, controller: bool) -> Secret {
        let mut s = Secret::default();
        s.metadata.namespace = Some("karmada-cluster".into());
        s.metadata.name = Some("m2".into());
        s.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "cluster.karmada.io/v1alpha1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            controller: Some(controller),
            block_owner_deletion: Some(true),
        }]);
        s
    }

    fn credentials(proxy_url: &str, header: &[(&str, &str)]) -> Credentials {
        Credentials {
            endpoint: "https://10.0.0.1:6443".into(),
            token: b"t".to_vec(),
            ca_bundle: Vec::new(),
            insecure: true,
            proxy_url: proxy_url.into(),
            proxy_header: header
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[tokio::test]
    async fn the_proxy_comes_from_the_cluster_spec_only() {
        let c = credentials("socks5://proxy.example:1080", &[]);
        let config = c.kube_config("m1").await.unwrap();
        assert_eq!(
            config.proxy_url.map(|u| u.to_string()),
            Some("socks5://proxy.example:1080/".to_owned())
        );
        let config = credentials("", &[]).kube_config("m1").await.unwrap();
        assert_eq!(config.proxy_url, None);
    }

    #[test]
    fn proxy_header_values_split_on_commas_as_karmada() {
        let c = credentials(
            "http://p:3128",
            &[("X-Token", "a, b"), ("Proxy-Authorization", "Basic Zm9v")],
        );
        let h = c.proxy_headers("m1").unwrap();
        let tokens: Vec<_> = h.get_all("x-token").iter().collect();
        assert_eq!(tokens, ["a", "b"]);
        assert_eq!(h["proxy-authorization"], "Basic Zm9v");
        assert!(h["proxy-authorization"].is_sensitive());
        let err = credentials("http://p:3128", &[("bad header", "v")])
            .proxy_headers("m1")
            .unwrap_err()
            .to_string();
        assert!(err.contains("spec.proxyHeader \"bad header\""), "{err}");
    }

    #[test]
    fn a_secret_serves_only_the_cluster_that_controls_it() {
        let mut cluster = Cluster::new("m1", Default::default());
        cluster.metadata.uid = Some("u1".into());
        assert!(
            check_secret_owner(&cluster, &secret_owned_by("Cluster", "m1", "u1", true)).is_ok()
        );
        for bad in [
            Secret::default(),
            secret_owned_by("Cluster", "m1", "u1", false),
            secret_owned_by("Cluster", "m2", "u2", true),
            secret_owned_by("Cluster", "m1", "u-old", true),
            secret_owned_by("Deployment", "m1", "u1", true),
        ] {
            let err = check_secret_owner(&cluster, &bad).unwrap_err();
            assert!(matches!(err, ConnectError::SecretNotOwned { .. }), "{err}");
        }
    }
}
