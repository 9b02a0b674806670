//! The per-cluster client factory: one `kube::Client` per User-Agent, all sharing the cluster's
//! token bucket (a component's clients excepted: each has its own) and request metrics, plus the
//! cluster's cached REST mapping. Every client enforces the
//! process's [`WriteFence`] (see [`super::fence`]).

use std::sync::Arc;
use std::time::Duration;

use ahash::AHashMap;
use http::HeaderValue;
use http::header::USER_AGENT;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::client::ClientBuilder;
use kube::discovery::ApiCapabilities;
use kube::{Api, Client, Config, Resource};
use parking_lot::Mutex;

use super::fence::{FenceLayer, FencedExecutor, WriteFence};
use super::mapper::RestMapper;
use super::metrics_layer::RequestMetricsLayer;
use super::ratelimit::RateLimitLayer;
use super::timeout::RequestTimeoutLayer;
use crate::error::{Error, Result};
use crate::metrics::ClusterMetrics;
use crate::queue::TokenBucket;

/// The User-Agent prefix of clients whose options name none.
pub const DEFAULT_USER_AGENT: &str = "lariat";

/// Client settings of one cluster (what `--kube-api-qps`/`--kube-api-burst` style flags set).
#[derive(Clone, Debug, PartialEq)]
pub struct ClientOptions {
    /// Sustained requests per second to this cluster, shared by all its clients except those of a
    /// [component](ClientFactory::client_for_component), which get a bucket of their own (default 40).
    /// Zero or less disables the limit.
    pub qps: f64,
    /// Burst above `qps` (default 60).
    pub burst: u32,
    /// User-Agent prefix; a controller's clients send `<user_agent>/<controller>` (default
    /// [`DEFAULT_USER_AGENT`]; a binary sets its own name).
    pub user_agent: String,
    /// Deadline of every request, counted from when it is sent (after the QPS wait); a watch's
    /// deadline covers only its response head. `None`: no deadline (default).
    pub request_timeout: Option<Duration>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            qps: 40.0,
            burst: 60,
            user_agent: DEFAULT_USER_AGENT.to_string(),
            request_timeout: None,
        }
    }
}

/// Hands out the clients of one cluster. Cheap to clone.
#[derive(Clone)]
pub struct ClientFactory {
    inner: Arc<Inner>,
}

struct Inner {
    cluster: String,
    config: Config,
    options: ClientOptions,
    host: String,
    bucket: Arc<TokenBucket>,
    metrics: Arc<ClusterMetrics>,
    default: Client,
    clients: Mutex<AHashMap<String, Client>>,
    mapper: RestMapper,
}

fn build_client(
    cluster: &str,
    config: &Config,
    ua: &str,
    request_timeout: Option<Duration>,
    bucket: &Arc<TokenBucket>,
    metrics: &Arc<ClusterMetrics>,
    host: &str,
) -> Result<Client> {
    let value = HeaderValue::from_str(ua).map_err(|_| Error::InvalidHeader {
        cluster: cluster.to_string(),
        value: ua.to_string(),
    })?;
    let mut cfg = config.clone();
    cfg.headers.retain(|(name, _)| name != USER_AGENT);
    cfg.headers.push((USER_AGENT, value));
    let fence = WriteFence::process();
    let builder =
        ClientBuilder::try_from((cfg, FencedExecutor::new(fence.clone()))).map_err(|source| {
            Error::Client {
                cluster: cluster.to_string(),
                source,
            }
        })?;
    // Innermost first: the deadline starts when the request leaves the QPS limiter, and the fence is
    // checked after the limiter's wait, as late as a layer can.
    Ok(builder
        .with_layer(&RequestTimeoutLayer::new(request_timeout))
        .with_layer(&FenceLayer::new(fence.clone()))
        .with_layer(&RateLimitLayer::new(bucket.clone()))
        .with_layer(&RequestMetricsLayer::new(metrics.clone(), host))
        .build())
}

impl ClientFactory {
    /// Creates the factory of `cluster`; builds its default client at once so a bad config fails here.
    pub fn new(
        cluster: impl Into<String>,
        config: Config,
        options: ClientOptions,
        metrics: Arc<ClusterMetrics>,
    ) -> Result<Self> {
        let host = config
            .cluster_url
            .authority()
            .map(ToString::to_string)
            .unwrap_or_default();
        let cluster = cluster.into();
        let bucket = Arc::new(TokenBucket::new(options.qps, options.burst));
        let default = build_client(
            &cluster,
            &config,
            &options.user_agent,
            options.request_timeout,
            &bucket,
            &metrics,
            &host,
        )?;
        Ok(Self {
            inner: Arc::new(Inner {
                cluster,
                bucket,
                config,
                options,
                host,
                metrics,
                default,
                clients: Mutex::new(AHashMap::new()),
                mapper: RestMapper::new(),
            }),
        })
    }

    /// The cluster name.
    pub fn cluster(&self) -> &str {
        &self.inner.cluster
    }

    /// The `host:port` of the cluster's API server (the `host` metric label).
    pub fn host(&self) -> &str {
        &self.inner.host
    }

    /// The client config this factory was built from.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The token bucket shared by every client of this cluster.
    pub fn bucket(&self) -> &Arc<TokenBucket> {
        &self.inner.bucket
    }

    /// The cluster's cached REST mapping.
    pub fn mapper(&self) -> &RestMapper {
        &self.inner.mapper
    }

    /// The default client (User-Agent = the factory's prefix).
    pub fn client(&self) -> Client {
        self.inner.default.clone()
    }

    /// The client of one controller: User-Agent `<prefix>/<controller>`.
    pub fn client_for_controller(&self, controller: &str) -> Result<Client> {
        let ua = format!("{}/{}", self.inner.options.user_agent, controller);
        self.client_for_agent(&ua)
    }

    /// The client of a component that would be a process of its own elsewhere (e.g. a scheduler
    /// beside a controller-manager): User-Agent `<prefix>/<component>`, with a token bucket of its
    /// own at the factory's QPS and burst, as a separate process built from the same flags would
    /// have. Every call for the same component returns the same client (and bucket).
    pub fn client_for_component(&self, component: &str) -> Result<Client> {
        let ua = format!("{}/{}", self.inner.options.user_agent, component);
        let key = format!("component:{ua}");
        if let Some(c) = self.inner.clients.lock().get(&key) {
            return Ok(c.clone());
        }
        let o = &self.inner.options;
        let bucket = Arc::new(TokenBucket::new(o.qps, o.burst));
        self.cached_client(key, &ua, &bucket)
    }

    fn client_for_agent(&self, ua: &str) -> Result<Client> {
        if let Some(c) = self.inner.clients.lock().get(ua) {
            return Ok(c.clone());
        }
        let bucket = self.inner.bucket.clone();
        self.cached_client(ua.to_string(), ua, &bucket)
    }

    /// Builds a client sending `ua` and limited by `bucket`, cached under `key` (the first one
    /// cached wins a race).
    fn cached_client(&self, key: String, ua: &str, bucket: &Arc<TokenBucket>) -> Result<Client> {
        let i = &self.inner;
        let client = build_client(
            &i.cluster,
            &i.config,
            ua,
            i.options.request_timeout,
            bucket,
            &i.metrics,
            &i.host,
        )?;
        Ok(i.clients.lock().entry(key).or_insert(client).clone())
    }

    /// A typed client for `K` across all namespaces.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource,
        K::DynamicType: Default,
    {
        Api::all(self.client())
    }

    /// Maps `gvk` to its resource through the cached REST mapping (discovery on a miss).
    pub async fn resolve(&self, gvk: &GroupVersionKind) -> Result<(ApiResource, ApiCapabilities)> {
        let client = self.client();
        self.inner
            .mapper
            .resolve(&self.inner.cluster, &client, gvk)
            .await
    }

    /// A dynamic client for `gvk` across all namespaces.
    pub async fn dynamic_api(&self, gvk: &GroupVersionKind) -> Result<Api<DynamicObject>> {
        let (ar, _) = self.resolve(gvk).await?;
        Ok(Api::all_with(self.client(), &ar))
    }
}
