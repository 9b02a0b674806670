//! Clients: the per-cluster client factory, its REST mapper, and the tower layers every client is
//! built with (write fence, proxy tunnels, QPS/burst limit, request deadline, response size limits, request metrics).

pub mod factory;
pub mod fence;
pub mod limit;
pub mod mapper;
pub mod metrics_layer;
pub mod proxy;
pub mod ratelimit;
pub mod timeout;

pub use factory::{ClientFactory, ClientOptions};
pub use fence::{FenceLayer, FencedConnector, FencedIo, WriteFence};
pub use limit::{ResponseLimitLayer, ResponseLimits, ResponseTooLarge};
pub use mapper::{RestMapper, resource_served};
pub use metrics_layer::RequestMetricsLayer;
pub use proxy::{Proxy, ProxyConfigError, ProxyConnector, ProxyError, ProxyErrorKind};
pub use ratelimit::{Priority, RateLimitLayer};
pub use timeout::{RequestTimedOut, RequestTimeoutLayer};
