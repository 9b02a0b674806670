//! The per-cluster client factory: one `kube::Client` per User-Agent, all sharing the cluster's
//! transport (one connection pool and TLS configuration, as client-go's transport cache gives every
//! client built from the same config), token bucket (a component's clients excepted: each has its
//! own) and request metrics, plus the cluster's cached REST mapping. Every client enforces the
//! process's [`WriteFence`] (see [`super::fence`]).

use std::sync::Arc;
use std::time::Duration;

use ahash::AHashMap;
use http::HeaderValue;
use http::header::USER_AGENT;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::client::{ClientBuilder, DynBody};
use kube::discovery::ApiCapabilities;
use kube::{Api, Client, Config, Resource};
use parking_lot::Mutex;

use super::fence::{FenceLayer, FencedConnector, WriteFence};
use super::limit::{ResponseLimitLayer, ResponseLimits};
use super::mapper::RestMapper;
use super::metrics_layer::RequestMetricsLayer;
use super::proxy::{Proxy, ProxyConnector};
use super::ratelimit::{Priority, RateLimitLayer};
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
    /// Response body size limits by request kind (default: none), so a hostile or broken server
    /// costs bounded memory (see [`super::limit`]).
    pub response_limits: ResponseLimits,
    /// Headers sent on every CONNECT request to the cluster's HTTP(S) proxy (the config's
    /// `proxy_url`), as Go's `http.Transport.ProxyConnectHeader`; never sent to the API server,
    /// and unused without a proxy or with a SOCKS5 one. Values are marked sensitive (they are
    /// often credentials) so `Debug` hides them. Default: none.
    pub proxy_headers: http::HeaderMap,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            qps: 40.0,
            burst: 60,
            user_agent: DEFAULT_USER_AGENT.to_string(),
            request_timeout: None,
            response_limits: ResponseLimits::default(),
            proxy_headers: http::HeaderMap::new(),
        }
    }
}

/// Hands out the clients of one cluster. Cheap to clone.
#[derive(Clone)]
pub struct ClientFactory {
    inner: Arc<Inner>,
}

struct Inner {
    base: Base,
    bucket: Arc<TokenBucket>,
    default: Client,
    clients: Mutex<AHashMap<String, Client>>,
    /// The token buckets of [components](ClientFactory::client_for_component), by component.
    component_buckets: Mutex<AHashMap<String, Arc<TokenBucket>>>,
    mapper: RestMapper,
}

/// What every client of a cluster is built from.
struct Base {
    cluster: String,
    config: Config,
    options: ClientOptions,
    /// The `host` metric label.
    host: String,
    metrics: Arc<ClusterMetrics>,
    transport: Transport,
}

/// How one client is limited.
struct Limit<'a> {
    bucket: &'a Arc<TokenBucket>,
    priority: Priority,
}

impl Base {
    /// A client sending User-Agent `ua`, limited by `limit`, over the cluster's transport.
    fn client(&self, ua: &str, limit: Limit<'_>) -> Result<Client> {
        let value = HeaderValue::from_str(ua).map_err(|_| Error::InvalidHeader {
            cluster: self.cluster.clone(),
            value: ua.to_string(),
        })?;
        let mut cfg = self.config.clone();
        cfg.headers.retain(|(name, _)| name != USER_AGENT);
        cfg.headers.push((USER_AGENT, value));
        let builder =
            client_stack(cfg, self.transport.clone()).map_err(|source| Error::Client {
                cluster: self.cluster.clone(),
                source,
            })?;
        // Innermost first: the deadline starts when the request leaves the QPS limiter, and the
        // fence is checked after the limiter's wait, as late as a layer can.
        // The size limit sits under the deadline, so a body cut at its limit fails at once.
        Ok(builder
            .with_layer(&ResponseLimitLayer::new(self.options.response_limits))
            .with_layer(&RequestTimeoutLayer::new(self.options.request_timeout))
            .with_layer(&FenceLayer::new(WriteFence::process().clone()))
            .with_layer(&RateLimitLayer::with_priority(
                limit.bucket.clone(),
                limit.priority,
            ))
            .with_layer(&RequestMetricsLayer::new(self.metrics.clone(), &self.host))
            .build())
    }
}

/// The HTTP transport of one cluster: hyper's pooled client over TLS over connections (direct or
/// tunnelled through the cluster's proxy, see [`super::proxy`]) whose TCP socket enforces the
/// process's [`WriteFence`] (see [`super::fence`]). Cheap to clone; clones share the pool.
type Transport = hyper_util::client::legacy::Client<
    hyper_timeout::TimeoutConnector<
        hyper_rustls::HttpsConnector<
            ProxyConnector<FencedConnector<hyper_util::client::legacy::connect::HttpConnector>>,
        >,
    >,
    kube::client::Body,
>;

/// Idle connections kept per API server, as client-go's transport keeps (`idleConnsPerHost`).
const IDLE_CONNECTIONS_PER_HOST: usize = 25;

/// TCP keep-alive probe period, as client-go's dialer sets it: a peer that vanished without closing
/// is noticed on an idle connection (a quiet watch) too.
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

/// Builds the transport of `config`'s cluster: kube's connector (TLS, connect/read/write timeouts)
/// over the proxy tunnel of `config.proxy_url` (HTTP CONNECT with `proxy_headers`, or SOCKS5; see
/// [`super::proxy`]) or a direct connection, over a TCP connector whose connections enforce the
/// process's fence. kube builds its connector internally, so it is assembled here.
///
/// One transport serves every client of a cluster, as client-go's transport cache makes clients
/// built from one config share one `http.Transport`: one pool of connections and one TLS
/// configuration (and session cache) instead of one per User-Agent, so a controller's request
/// reuses a connection another controller left idle.
fn transport(cluster: &str, config: &Config, proxy_headers: &http::HeaderMap) -> Result<Transport> {
    use hyper_util::client::legacy::connect::HttpConnector;
    use kube::client::ConfigExt as _;

    let kube_err = |source| Error::Client {
        cluster: cluster.to_owned(),
        source,
    };
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_keepalive(Some(TCP_KEEPALIVE));
    let fenced = FencedConnector::new(tcp, WriteFence::process().clone());
    let tunnel = match &config.proxy_url {
        None => ProxyConnector::direct(fenced),
        Some(url) => {
            let proxy_err = |source| Error::Proxy {
                cluster: cluster.to_owned(),
                source,
            };
            let proxy = Proxy::new(url, proxy_headers.clone()).map_err(proxy_err)?;
            // As Go's transport: the TLS session with an https:// proxy uses the cluster's TLS
            // settings (CA bundle, skip-verify, client certificate).
            let tls = match proxy.scheme() {
                super::proxy::ProxyScheme::Https => {
                    Some(Arc::new(config.rustls_client_config().map_err(kube_err)?))
                }
                _ => None,
            };
            ProxyConnector::new(fenced, proxy, tls)
                .map_err(proxy_err)?
                .with_handshake_timeout(
                    config
                        .connect_timeout
                        .unwrap_or(super::proxy::DEFAULT_HANDSHAKE_TIMEOUT),
                )
        }
    };
    let tls = config
        .rustls_https_connector_with_connector(tunnel)
        .map_err(kube_err)?;
    let mut connector = hyper_timeout::TimeoutConnector::new(tls);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    Ok(
        hyper_util::client::legacy::Builder::new(hyper_util::rt::TokioExecutor::new())
            .pool_max_idle_per_host(IDLE_CONNECTIONS_PER_HOST)
            .build(connector),
    )
}

/// kube's default client stack (`ClientBuilder::try_from`: base URI, kube's 429/503/504 retries,
/// authentication, extra headers) over `transport`. What is left out of kube's stack: the exec
/// plugin's client-certificate expiry (`Client::valid_until`, unused here) and the per-request
/// tracing span.
fn client_stack(
    config: Config,
    transport: Transport,
) -> std::result::Result<ClientBuilder<GenericService>, kube::Error> {
    use kube::client::ConfigExt as _;
    use kube::client::retry::RetryPolicy;
    use tower::ServiceBuilder;
    use tower::retry::RetryLayer;

    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(tower::BoxError::from)
        .map_response(|res: http::Response<hyper::body::Incoming>| {
            res.map(|body| {
                Box::new(http_body_util::BodyExt::map_err(
                    body,
                    tower::BoxError::from,
                )) as Box<DynBody>
            })
        })
        .service(transport);
    Ok(ClientBuilder::new(
        tower::util::BoxService::new(service),
        config.default_namespace.clone(),
    ))
}

/// The boxed service [`client_stack`] returns (kube's default stack has the same type).
type GenericService = tower::util::BoxService<
    http::Request<kube::client::Body>,
    http::Response<Box<DynBody>>,
    tower::BoxError,
>;

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
        let transport = transport(&cluster, &config, &options.proxy_headers)?;
        let base = Base {
            cluster,
            config,
            options,
            host,
            metrics,
            transport,
        };
        let default = base.client(
            &base.options.user_agent,
            Limit {
                bucket: &bucket,
                priority: Priority::Foreground,
            },
        )?;
        Ok(Self {
            inner: Arc::new(Inner {
                base,
                bucket,
                default,
                clients: Mutex::new(AHashMap::new()),
                component_buckets: Mutex::new(AHashMap::new()),
                mapper: RestMapper::new(),
            }),
        })
    }

    /// The cluster name.
    pub fn cluster(&self) -> &str {
        &self.inner.base.cluster
    }

    /// The `host:port` of the cluster's API server (the `host` metric label).
    pub fn host(&self) -> &str {
        &self.inner.base.host
    }

    /// The client config this factory was built from.
    pub fn config(&self) -> &Config {
        &self.inner.base.config
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
        let ua = format!("{}/{}", self.inner.base.options.user_agent, controller);
        self.client_for_agent(&ua)
    }

    /// The client of a component that would be a process of its own elsewhere (e.g. a scheduler
    /// beside a controller-manager): User-Agent `<prefix>/<component>`, with a token bucket of its
    /// own at the factory's QPS and burst, as a separate process built from the same flags would
    /// have. Every call for the same component returns the same client (and bucket).
    pub fn client_for_component(&self, component: &str) -> Result<Client> {
        let ua = format!("{}/{}", self.inner.base.options.user_agent, component);
        let bucket = self.component_bucket(component);
        self.cached_client(
            format!("component:{ua}"),
            &ua,
            &bucket,
            Priority::Foreground,
        )
    }

    /// A client for background requests (Events) on the cluster's shared bucket: User-Agent = the
    /// factory's prefix, and it takes only tokens the other clients leave spare
    /// ([`Priority::Background`]), so background work never slows the controllers' requests.
    pub fn background_client(&self) -> Result<Client> {
        let ua = self.inner.base.options.user_agent.clone();
        let bucket = self.inner.bucket.clone();
        self.cached_client(
            format!("background:{ua}"),
            &ua,
            &bucket,
            Priority::Background,
        )
    }

    /// [`Self::background_client`] on the bucket of a [component](Self::client_for_component).
    pub fn background_client_for_component(&self, component: &str) -> Result<Client> {
        let ua = format!("{}/{}", self.inner.base.options.user_agent, component);
        let bucket = self.component_bucket(component);
        self.cached_client(
            format!("background:{ua}"),
            &ua,
            &bucket,
            Priority::Background,
        )
    }

    /// The token bucket of `component`, made at the factory's QPS and burst on first use.
    fn component_bucket(&self, component: &str) -> Arc<TokenBucket> {
        let o = &self.inner.base.options;
        self.inner
            .component_buckets
            .lock()
            .entry(component.to_owned())
            .or_insert_with(|| Arc::new(TokenBucket::new(o.qps, o.burst)))
            .clone()
    }

    fn client_for_agent(&self, ua: &str) -> Result<Client> {
        let bucket = self.inner.bucket.clone();
        self.cached_client(ua.to_string(), ua, &bucket, Priority::Foreground)
    }

    /// Builds a client sending `ua` and limited by `bucket` at `priority`, cached under `key`
    /// (the first one cached wins a race).
    fn cached_client(
        &self,
        key: String,
        ua: &str,
        bucket: &Arc<TokenBucket>,
        priority: Priority,
    ) -> Result<Client> {
        let i = &self.inner;
        if let Some(c) = i.clients.lock().get(&key) {
            return Ok(c.clone());
        }
        let client = i.base.client(ua, Limit { bucket, priority })?;
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
            .resolve(&self.inner.base.cluster, &client, gvk)
            .await
    }

    /// A dynamic client for `gvk` across all namespaces.
    pub async fn dynamic_api(&self, gvk: &GroupVersionKind) -> Result<Api<DynamicObject>> {
        let (ar, _) = self.resolve(gvk).await?;
        Ok(Api::all_with(self.client(), &ar))
    }
}
