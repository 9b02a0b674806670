//! Client-side QPS/burst limiting as a tower layer (client-go's `rest.Config.QPS/Burst`).
//!
//! The layer holds an `Arc<TokenBucket>`; every client of one cluster is built with the same bucket,
//! so the limit is per cluster, not per client. A request waits for its token in `poll_ready`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::time::Sleep;
use tower::{Layer, Service};

use crate::queue::TokenBucket;

/// Adds a shared token bucket in front of a service.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    bucket: Arc<TokenBucket>,
}

impl RateLimitLayer {
    /// A layer taking tokens from `bucket`.
    pub fn new(bucket: Arc<TokenBucket>) -> Self {
        Self { bucket }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
            sleep: None,
            permitted: false,
        }
    }
}

/// The service of [`RateLimitLayer`].
#[derive(Debug)]
pub struct RateLimit<S> {
    inner: S,
    bucket: Arc<TokenBucket>,
    sleep: Option<Pin<Box<Sleep>>>,
    permitted: bool,
}

impl<S, R> Service<R> for RateLimit<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.permitted {
            if self.sleep.is_none() {
                let wait = self.bucket.reserve();
                if wait.is_zero() {
                    self.permitted = true;
                } else {
                    self.sleep = Some(Box::pin(tokio::time::sleep(wait)));
                }
            }
            if let Some(sleep) = self.sleep.as_mut() {
                ready!(sleep.as_mut().poll(cx));
                self.sleep = None;
                self.permitted = true;
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        self.permitted = false;
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tower::ServiceExt;

    #[tokio::test(start_paused = true)]
    async fn requests_wait_for_tokens() {
        let bucket = Arc::new(TokenBucket::new(10.0, 2));
        let mut svc =
            RateLimitLayer::new(bucket).layer(tower::service_fn(|_: ()| async { Ok::<_, ()>(()) }));
        let start = tokio::time::Instant::now();
        for _ in 0..4 {
            svc.ready().await.unwrap().call(()).await.unwrap();
        }
        // 2 from the burst, then 2 more at 10/s
        let elapsed = start.elapsed();
        assert!(
            elapsed >= Duration::from_millis(200) && elapsed < Duration::from_millis(250),
            "{elapsed:?}"
        );
    }
}
