//! Response size limits as a tower layer, so a server that answers with an endless body, a
//! multi-GiB list or one endless watch event costs bounded memory: the request fails once the body
//! passes its limit (at once when its declared `Content-Length` does).
//!
//! A request's kind picks its limit, from its method and path alone: a collection `GET` (a list,
//! discovery or OpenAPI) gets the list limit, a watch the per-event limit
//! (bytes between two newlines of its JSON stream), everything else the object limit. Error
//! responses (4xx/5xx) are limited as objects are.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Method, Request, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use tower::{BoxError, Layer, Service};

/// Response size limits of one cluster's clients; `None` leaves that kind unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponseLimits {
    /// The largest body of a request for one object (get, create, update, patch, delete, status).
    pub object_bytes: Option<u64>,
    /// The largest body of a list (one page of it) or a non-resource `GET` (discovery).
    pub list_bytes: Option<u64>,
    /// The longest watch event (one line of the watch stream).
    pub watch_event_bytes: Option<u64>,
}

impl ResponseLimits {
    /// Whether no kind is limited.
    pub fn is_unlimited(&self) -> bool {
        *self == Self::default()
    }
}

/// What a request asks for, as far as its size limit goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RequestKind {
    Object,
    List,
    Watch,
}

impl RequestKind {
    fn name(self) -> &'static str {
        match self {
            RequestKind::Object => "object",
            RequestKind::List => "list",
            RequestKind::Watch => "watch event",
        }
    }
}

/// A request's kind: a watch (`watch=true|1`), a list (a `GET` of a collection path, or of
/// discovery or OpenAPI) or an object request (anything else, health and version included).
fn request_kind(method: &Method, uri: &Uri) -> RequestKind {
    if super::timeout::is_watch(uri) {
        return RequestKind::Watch;
    }
    if method != Method::GET {
        return RequestKind::Object;
    }
    let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    // The resource part after `/api/<version>` or `/apis/<group>/<version>`.
    let rest = match segments.as_slice() {
        ["api", _, rest @ ..] | ["apis", _, _, rest @ ..] => rest,
        // Discovery and OpenAPI documents can be large; health and version answers are small.
        ["api" | "apis" | "openapi", ..] => return RequestKind::List,
        _ => return RequestKind::Object,
    };
    let rest = match rest {
        ["namespaces", _, resource @ ..] if !resource.is_empty() => resource,
        other => other,
    };
    if rest.len() <= 1 {
        RequestKind::List
    } else {
        RequestKind::Object
    }
}

/// The error of a response larger than its limit.
#[derive(Debug, thiserror::Error)]
#[error("response to {method} {path} exceeds the {limit}-byte {kind} limit")]
pub struct ResponseTooLarge {
    method: Method,
    path: String,
    kind: &'static str,
    limit: u64,
}

/// Limits every response body (see the module doc).
#[derive(Clone, Debug)]
pub struct ResponseLimitLayer {
    limits: ResponseLimits,
}

impl ResponseLimitLayer {
    /// A layer enforcing `limits`.
    pub fn new(limits: ResponseLimits) -> Self {
        Self { limits }
    }
}

impl<S> Layer<S> for ResponseLimitLayer {
    type Service = ResponseLimit<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ResponseLimit {
            inner,
            limits: self.limits,
        }
    }
}

/// The service of [`ResponseLimitLayer`].
#[derive(Clone, Debug)]
pub struct ResponseLimit<S> {
    inner: S,
    limits: ResponseLimits,
}

impl<S, B, RB> Service<Request<B>> for ResponseLimit<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    RB: Body,
    RB::Error: Into<BoxError>,
{
    type Response = Response<LimitedBody<RB>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let kind = request_kind(req.method(), req.uri());
        let limit = match kind {
            RequestKind::Object => self.limits.object_bytes,
            RequestKind::List => self.limits.list_bytes,
            RequestKind::Watch => self.limits.watch_event_bytes,
        };
        let method = req.method().clone();
        let path = req.uri().path().to_owned();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let resp = fut.await.map_err(Into::into)?;
            let Some(limit) = limit else {
                return Ok(resp.map(|inner| LimitedBody {
                    inner,
                    limit: None,
                    seen: 0,
                    watch: false,
                }));
            };
            let too_large = || ResponseTooLarge {
                method: method.clone(),
                path: path.clone(),
                kind: kind.name(),
                limit,
            };
            // A declared length over the limit fails before any byte is read (a watch's
            // length is its whole stream, so it is not judged by it).
            if kind != RequestKind::Watch && resp.body().size_hint().lower() > limit {
                return Err(Box::new(too_large()) as BoxError);
            }
            let error = too_large();
            Ok(resp.map(|inner| LimitedBody {
                inner,
                limit: Some((limit, Box::new(error))),
                seen: 0,
                watch: kind == RequestKind::Watch,
            }))
        })
    }
}

pin_project_lite::pin_project! {
    /// A response body failing once it passes its limit (for a watch: once one event does).
    pub struct LimitedBody<B> {
        #[pin]
        inner: B,
        limit: Option<(u64, Box<ResponseTooLarge>)>,
        // Bytes so far (for a watch: since the last newline).
        seen: u64,
        watch: bool,
    }
}

impl<B> Body for LimitedBody<B>
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
        use bytes::Buf as _;
        let this = self.project();
        let frame = match this.inner.poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        let Some((limit, error)) = this.limit.as_ref() else {
            return Poll::Ready(Some(Ok(frame)));
        };
        if let Some(data) = frame.data_ref() {
            let chunk = data.chunk();
            let len = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
            // Bytes past the first contiguous chunk (none for hyper's `Bytes` frames) count as
            // part of the current line.
            let rest = len(data.remaining().saturating_sub(chunk.len()));
            if *this.watch {
                let mut parts = chunk.split(|b| *b == b'\n');
                let first = parts.next().map_or(0, <[u8]>::len);
                let mut line = this.seen.saturating_add(len(first));
                for part in parts {
                    if line > *limit {
                        return Poll::Ready(Some(Err(error_of(error))));
                    }
                    line = len(part.len());
                }
                *this.seen = line.saturating_add(rest);
            } else {
                *this.seen = this
                    .seen
                    .saturating_add(len(chunk.len()))
                    .saturating_add(rest);
            }
            if *this.seen > *limit {
                return Poll::Ready(Some(Err(error_of(error))));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

fn error_of(error: &ResponseTooLarge) -> BoxError {
    Box::new(ResponseTooLarge {
        method: error.method.clone(),
        path: error.path.clone(),
        kind: error.kind,
        limit: error.limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full, StreamBody};
    use tower::ServiceExt;

    fn kind(method: Method, uri: &str) -> RequestKind {
        request_kind(&method, &uri.parse().unwrap())
    }

    #[test]
    fn request_kinds() {
        use RequestKind::*;
        assert_eq!(kind(Method::GET, "/api/v1/pods?limit=500"), List);
        assert_eq!(kind(Method::GET, "/api/v1/namespaces/a/pods"), List);
        assert_eq!(kind(Method::GET, "/api/v1/namespaces"), List);
        assert_eq!(kind(Method::GET, "/api/v1/namespaces/a"), Object);
        assert_eq!(kind(Method::GET, "/api/v1/namespaces/a/pods/p"), Object);
        assert_eq!(
            kind(Method::GET, "/api/v1/namespaces/a/pods/p/status"),
            Object
        );
        assert_eq!(kind(Method::GET, "/apis/apps/v1/deployments"), List);
        assert_eq!(
            kind(Method::GET, "/apis/apps/v1/namespaces/a/deployments/d"),
            Object
        );
        assert_eq!(kind(Method::GET, "/apis/apps/v1"), List);
        assert_eq!(kind(Method::GET, "/apis"), List);
        assert_eq!(kind(Method::GET, "/api"), List);
        assert_eq!(kind(Method::GET, "/openapi/v2"), List);
        assert_eq!(kind(Method::GET, "/readyz"), Object);
        assert_eq!(kind(Method::GET, "/version"), Object);
        assert_eq!(kind(Method::PATCH, "/api/v1/namespaces/a/pods/p"), Object);
        assert_eq!(kind(Method::POST, "/api/v1/namespaces/a/pods"), Object);
        assert_eq!(kind(Method::GET, "/api/v1/pods?watch=true"), Watch);
    }

    fn limits() -> ResponseLimits {
        ResponseLimits {
            object_bytes: Some(10),
            list_bytes: Some(100),
            watch_event_bytes: Some(8),
        }
    }

    async fn body_of(uri: &str, chunks: Vec<&'static [u8]>) -> Result<Vec<u8>, BoxError> {
        let svc =
            ResponseLimitLayer::new(limits()).layer(tower::service_fn(move |_: Request<()>| {
                let chunks = chunks.clone();
                async move {
                    let frames = chunks
                        .into_iter()
                        .map(|c| Ok::<_, BoxError>(Frame::data(bytes::Bytes::from_static(c))));
                    Ok::<_, BoxError>(Response::new(StreamBody::new(futures::stream::iter(
                        frames,
                    ))))
                }
            }));
        let req = Request::get(uri).body(()).unwrap();
        let body = svc.oneshot(req).await?.into_body();
        Ok(body.collect().await?.to_bytes().to_vec())
    }

    #[tokio::test]
    async fn bodies_fail_past_their_kind_limit() {
        assert!(
            body_of("/api/v1/namespaces/a/pods/p", vec![b"12345", b"67890"])
                .await
                .is_ok()
        );
        let err = body_of("/api/v1/namespaces/a/pods/p", vec![b"12345", b"678901"])
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("GET /api/v1/namespaces/a/pods/p exceeds the 10-byte object limit"),
            "{err}"
        );
        assert!(
            body_of("/api/v1/pods", vec![&[b'x'; 60], &[b'x'; 40]])
                .await
                .is_ok()
        );
        let err = body_of("/api/v1/pods", vec![&[b'x'; 60], &[b'x'; 41]])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("100-byte list limit"), "{err}");
    }

    #[tokio::test]
    async fn watch_events_are_limited_one_by_one() {
        let w = "/api/v1/pods?watch=true";
        // Many short events: fine however long the stream.
        assert!(
            body_of(w, vec![b"1234\n567", b"8\n12345678\n", b"1\n"])
                .await
                .is_ok()
        );
        // One event split over frames.
        let err = body_of(w, vec![b"1\n12345", b"6789\n"]).await.unwrap_err();
        assert!(
            err.to_string().contains("8-byte watch event limit"),
            "{err}"
        );
        // A long event inside one frame.
        assert!(body_of(w, vec![b"1\n123456789\n1\n"]).await.is_err());
        // An endless event without newline.
        assert!(body_of(w, vec![b"12345", b"12345"]).await.is_err());
    }

    #[tokio::test]
    async fn a_declared_length_past_the_limit_fails_at_once() {
        let svc =
            ResponseLimitLayer::new(limits()).layer(tower::service_fn(|_: Request<()>| async {
                Ok::<_, BoxError>(Response::new(Full::new(bytes::Bytes::from_static(
                    b"12345678901",
                ))))
            }));
        let req = Request::get("/api/v1/namespaces/a/pods/p")
            .body(())
            .unwrap();
        let err = svc.oneshot(req).await.err().unwrap();
        assert!(err.to_string().contains("object limit"), "{err}");
    }
}
