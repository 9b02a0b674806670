//! A deadline on every request as a tower layer (client-go's `rest.Config.Timeout`), so a server
//! that accepts connections but never answers (hung, SIGSTOPped, overloaded) fails the request
//! instead of holding the caller forever.
//!
//! The deadline covers the response head, and for ordinary requests the whole body too. A watch
//! (`?watch=true`) streams for as long as the server keeps it open, so only its response head has
//! the deadline; its body may stream until its own `timeoutSeconds` plus
//! [`WATCH_TIMEOUT_MARGIN`] (the server ends it at `timeoutSeconds`; one that trickles on past
//! that fails). A watch that goes quiet is ended by the connection's read timeout and
//! re-established, and that new request has the deadline again.
//! The deadline starts when the request is sent, after any client-side rate-limit wait.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};
use tower::{BoxError, Layer, Service};

/// The error of a request that missed its deadline.
#[derive(Debug, thiserror::Error)]
#[error("request {method} {path} timed out after {timeout:?}")]
pub struct RequestTimedOut {
    method: http::Method,
    path: String,
    timeout: Duration,
}

/// Gives every request a deadline.
#[derive(Clone, Debug)]
pub struct RequestTimeoutLayer {
    timeout: Option<Duration>,
}

impl RequestTimeoutLayer {
    /// A layer failing requests that take longer than `timeout` (`None`: passes requests through
    /// without a deadline).
    pub fn new(timeout: Option<Duration>) -> Self {
        Self { timeout }
    }
}

impl<S> Layer<S> for RequestTimeoutLayer {
    type Service = RequestTimeout<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RequestTimeout {
            inner,
            timeout: self.timeout,
        }
    }
}

/// The service of [`RequestTimeoutLayer`].
#[derive(Clone, Debug)]
pub struct RequestTimeout<S> {
    inner: S,
    timeout: Option<Duration>,
}

/// How long past its `timeoutSeconds` a watch may stream before it fails: the server ends a watch
/// at that time, so one still streaming well after it is broken or hostile (e.g. a trickle of bytes
/// that keeps the connection's read timeout from firing).
pub const WATCH_TIMEOUT_MARGIN: Duration = Duration::from_secs(30);

/// A watch's `timeoutSeconds`, when its query sets one.
fn watch_timeout(uri: &Uri) -> Option<Duration> {
    uri.query()?
        .split('&')
        .find_map(|p| p.strip_prefix("timeoutSeconds="))
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// Whether the request is a watch (`watch=true` or `watch=1` in the query).
pub(super) fn is_watch(uri: &Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

impl<S, B, RB> Service<Request<B>> for RequestTimeout<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    RB: Body,
    RB::Error: Into<BoxError>,
{
    type Response = Response<DeadlineBody<RB>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let Some((timeout, deadline)) = self
            .timeout
            .and_then(|t| Instant::now().checked_add(t).map(|d| (t, d)))
        else {
            let fut = self.inner.call(req);
            return Box::pin(async move {
                let resp = fut.await.map_err(Into::into)?;
                Ok(resp.map(|body| DeadlineBody {
                    inner: body,
                    deadline: None,
                    error: None,
                }))
            });
        };
        let watch = is_watch(req.uri());
        // A watch streams until its own timeoutSeconds (plus a margin), not the request deadline.
        let watch_limit = watch
            .then(|| watch_timeout(req.uri()))
            .flatten()
            .map(|t| t + WATCH_TIMEOUT_MARGIN);
        let body_deadline = if watch {
            watch_limit.and_then(|t| Instant::now().checked_add(t))
        } else {
            Some(deadline)
        };
        let body_timeout = watch_limit.unwrap_or(timeout);
        let error = move |method: http::Method, path: String, timeout: Duration| -> BoxError {
            Box::new(RequestTimedOut {
                method,
                path,
                timeout,
            })
        };
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let fut = self.inner.call(req);
        Box::pin(async move {
            match tokio::time::timeout_at(deadline, fut).await {
                Err(_) => Err(error(method, path, timeout)),
                Ok(Err(e)) => Err(e.into()),
                Ok(Ok(resp)) => Ok(resp.map(|body| DeadlineBody {
                    inner: body,
                    deadline: body_deadline.map(|d| Box::pin(tokio::time::sleep_until(d))),
                    error: Some(error(method, path, body_timeout)),
                })),
            }
        })
    }
}

pin_project_lite::pin_project! {
    /// A response body that fails once the request's deadline has passed (no deadline for watches).
    pub struct DeadlineBody<B> {
        #[pin]
        inner: B,
        deadline: Option<Pin<Box<Sleep>>>,
        error: Option<BoxError>,
    }
}

impl<B> Body for DeadlineBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        if let Poll::Ready(frame) = this.inner.poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if let Some(deadline) = this.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            *this.deadline = None;
            let e = this
                .error
                .take()
                .unwrap_or_else(|| "request timed out".into());
            return Poll::Ready(Some(Err(e)));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full, StreamBody};
    use tower::ServiceExt;

    fn pending_body() -> StreamBody<futures::stream::Pending<Result<Frame<bytes::Bytes>, BoxError>>>
    {
        StreamBody::new(futures::stream::pending())
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_without_answer_fails_at_the_deadline() {
        let svc = RequestTimeoutLayer::new(Some(Duration::from_secs(5))).layer(tower::service_fn(
            |_: Request<()>| async {
                std::future::pending::<()>().await;
                Ok::<_, BoxError>(Response::new(Full::new(bytes::Bytes::new())))
            },
        ));
        let started = Instant::now();
        let req = Request::get("/api/v1/namespaces").body(()).unwrap();
        let err = svc.oneshot(req).await.err().unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        assert!(err.to_string().contains("timed out after 5s"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_fails_but_a_watch_body_may_stream_on() {
        let svc = RequestTimeoutLayer::new(Some(Duration::from_secs(5))).layer(tower::service_fn(
            |_: Request<()>| async { Ok::<_, BoxError>(Response::new(pending_body())) },
        ));
        let req = Request::get("/api/v1/pods").body(()).unwrap();
        let body = svc.clone().oneshot(req).await.unwrap().into_body();
        let err = body.collect().await.err().unwrap();
        assert!(err.to_string().contains("GET /api/v1/pods"), "{err}");

        let req = Request::get("/api/v1/pods?watch=true&timeoutSeconds=290")
            .body(())
            .unwrap();
        let mut body = svc.clone().oneshot(req).await.unwrap().into_body();
        let waited = tokio::time::timeout(Duration::from_secs(60), body.frame()).await;
        assert!(
            waited.is_err(),
            "a quiet watch must not end at the deadline"
        );
        // ... but not past its own timeoutSeconds and the margin.
        let started = Instant::now();
        let req = Request::get("/api/v1/pods?watch=true&timeoutSeconds=290")
            .body(())
            .unwrap();
        let body = svc.oneshot(req).await.unwrap().into_body();
        let err = body.collect().await.err().unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(320));
        assert!(err.to_string().contains("timed out after 320s"), "{err}");
    }

    #[test]
    fn watch_detection() {
        let w = |s: &str| is_watch(&s.parse::<Uri>().unwrap());
        assert!(w("/api/v1/pods?watch=true"));
        assert!(w("/api/v1/pods?labelSelector=a&watch=1"));
        assert!(!w("/api/v1/pods?labelSelector=watch%3Dtrue"));
        assert!(!w("/api/v1/pods"));
    }
}
