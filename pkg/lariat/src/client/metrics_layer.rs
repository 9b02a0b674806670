//! `rest_client_requests_total{cluster,code,method,host}` as a tower layer, counted like client-go:
//! `code` is the HTTP status code (or `<error>` when no response came back), `method` the HTTP method,
//! `host` the API server's `host:port`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower::{Layer, Service};

use crate::metrics::ClusterMetrics;

/// Counts every request of a client.
#[derive(Clone, Debug)]
pub struct RequestMetricsLayer {
    metrics: Arc<ClusterMetrics>,
    host: Arc<str>,
}

impl RequestMetricsLayer {
    /// Counts into `metrics` with the given `host` label.
    pub fn new(metrics: Arc<ClusterMetrics>, host: impl Into<String>) -> Self {
        Self {
            metrics,
            host: Arc::from(host.into()),
        }
    }
}

impl<S> Layer<S> for RequestMetricsLayer {
    type Service = RequestMetrics<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RequestMetrics {
            inner,
            metrics: self.metrics.clone(),
            host: self.host.clone(),
        }
    }
}

/// The service of [`RequestMetricsLayer`].
#[derive(Clone, Debug)]
pub struct RequestMetrics<S> {
    inner: S,
    metrics: Arc<ClusterMetrics>,
    host: Arc<str>,
}

impl<S, B, RB> Service<Request<B>> for RequestMetrics<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let method = req.method().clone();
        let fut = self.inner.call(req);
        let metrics = self.metrics.clone();
        let host = self.host.clone();
        Box::pin(async move {
            let res = fut.await;
            let code = match &res {
                Ok(resp) => resp.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            metrics.rest_request(&code, method.as_str(), &host).inc();
            res
        })
    }
}
