//! Client-side QPS/burst limiting as a tower layer (client-go's `rest.Config.QPS/Burst`).
//!
//! The layer holds an `Arc<TokenBucket>`; every client of one cluster is built with the same bucket,
//! so the limit is per cluster, not per client. A request waits for its token in `poll_ready`: a
//! foreground one reserves the next token in line (client-go's limiter), a background one takes only
//! spare tokens ([`TokenBucket::try_spare`]), so background traffic never delays foreground.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::time::Sleep;
use tower::{Layer, Service};

use crate::queue::TokenBucket;

/// How a client's requests take tokens from its bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Priority {
    /// Reserve the next token in line.
    #[default]
    Foreground,
    /// Take only tokens the foreground leaves spare.
    Background,
}

/// Adds a shared token bucket in front of a service.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    bucket: Arc<TokenBucket>,
    priority: Priority,
}

impl RateLimitLayer {
    /// A layer taking tokens from `bucket` in line ([`Priority::Foreground`]).
    pub fn new(bucket: Arc<TokenBucket>) -> Self {
        Self::with_priority(bucket, Priority::Foreground)
    }

    /// A layer taking tokens from `bucket` at `priority`.
    pub fn with_priority(bucket: Arc<TokenBucket>, priority: Priority) -> Self {
        Self { bucket, priority }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
            priority: self.priority,
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
    priority: Priority,
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
        while !self.permitted {
            if let Some(sleep) = self.sleep.as_mut() {
                ready!(sleep.as_mut().poll(cx));
                self.sleep = None;
                // A foreground token was reserved before sleeping; a background one is tried again.
                self.permitted = self.priority == Priority::Foreground;
                continue;
            }
            let wait = match self.priority {
                Priority::Foreground => self.bucket.reserve(),
                Priority::Background => self.bucket.try_spare().err().unwrap_or_default(),
            };
            if wait.is_zero() {
                self.permitted = true;
            } else {
                self.sleep = Some(Box::pin(tokio::time::sleep(wait)));
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

    #[tokio::test(start_paused = true)]
    async fn background_waits_for_spare_tokens() {
        let bucket = Arc::new(TokenBucket::new(10.0, 2));
        let mut fg = RateLimitLayer::new(bucket.clone())
            .layer(tower::service_fn(|_: ()| async { Ok::<_, ()>(()) }));
        let mut bg = RateLimitLayer::with_priority(bucket, Priority::Background)
            .layer(tower::service_fn(|_: ()| async { Ok::<_, ()>(()) }));
        let start = tokio::time::Instant::now();
        // the foreground spends the burst and 3 refills (300 ms), leaving the bucket empty
        for _ in 0..5 {
            fg.ready().await.unwrap().call(()).await.unwrap();
        }
        // the background waits until 2 tokens (burst/2 + 1) are back
        bg.ready().await.unwrap().call(()).await.unwrap();
        let elapsed = start.elapsed();
        assert!(
            elapsed >= Duration::from_millis(500) && elapsed < Duration::from_millis(550),
            "{elapsed:?}"
        );
    }
}
