//! The write fence: once a leader can no longer prove it still holds its lease, nothing it sends
//! reaches an API server.
//!
//! A standby takes a lease over no sooner than `lease_duration` after it saw the leader's last renewal,
//! and that renewal was written after the leader *sent* it. So the leader is safe to write until
//! `sent + renew_deadline` on its own monotonic clock (`renew_deadline < lease_duration`); the elector
//! moves the fence there after every successful renewal ([`WriteFence::hold_until`]), and closes it for
//! good when leadership ends ([`WriteFence::close`]). The clock check needs no task to run: a process
//! resumed after SIGSTOP (its clock kept running) sees the fence expired on its very first poll, before
//! the renew loop has even noticed.
//!
//! Every client of [`ClientFactory`](super::ClientFactory) (control plane and members alike) enforces
//! the process's fence ([`WriteFence::process`]) at two depths:
//! - [`FenceLayer`] refuses mutating requests (anything but GET/HEAD/OPTIONS) with a clear error
//!   naming the request;
//! - [`FencedConnector`] wraps every TCP connection under TLS, and [`FencedIo`] checks the fence in
//!   `poll_write`, immediately before bytes go to the socket. That catches everything that passed the
//!   layer before a stop and would otherwise be written after it: a request queued for a connection,
//!   a connection task stopped halfway through a poll, kube's own retries of a 429/503 (they run below
//!   the layer). A check at the connection *task* (an earlier design) missed the second case: a
//!   process stopped mid-poll resumed in the middle of that poll and wrote.
//!
//! What remains: bytes handed to the kernel before expiry (they reach the server within the
//! `lease_duration − renew_deadline` margin), and a stop landing in the few instructions between the
//! check and the `write(2)` call, which no user-space check can close.
//!
//! A fence that was never armed is open: a process that does not elect writes freely.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use futures::future::BoxFuture;
use http::{Method, Request, Uri};
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use tower::{Layer, Service};

/// Never armed: writes allowed.
const OPEN: u64 = u64::MAX;
/// Closed for good.
const CLOSED: u64 = 0;

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds since [`epoch`], plus one so that no instant encodes as [`CLOSED`].
fn encode(at: Instant) -> u64 {
    let nanos = at.saturating_duration_since(epoch()).as_nanos();
    u64::try_from(nanos)
        .unwrap_or(OPEN - 1)
        .saturating_add(1)
        .min(OPEN - 1)
}

/// Whether a process may still write; see the module docs. Cheap to clone (clones share the state).
#[derive(Clone)]
pub struct WriteFence {
    until: Arc<AtomicU64>,
}

impl Default for WriteFence {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for WriteFence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.until.load(Ordering::Acquire) {
            OPEN => f.write_str("WriteFence(open)"),
            CLOSED => f.write_str("WriteFence(closed)"),
            _ => write!(f, "WriteFence(admits: {})", self.admits()),
        }
    }
}

impl WriteFence {
    /// A fence that is open until armed.
    pub fn new() -> Self {
        Self {
            until: Arc::new(AtomicU64::new(OPEN)),
        }
    }

    /// The process's fence: every [`ClientFactory`](super::ClientFactory) client enforces it, and the
    /// [`Manager`](crate::runtime::Manager) arms it when this process leads.
    pub fn process() -> &'static WriteFence {
        static FENCE: OnceLock<WriteFence> = OnceLock::new();
        FENCE.get_or_init(WriteFence::new)
    }

    /// Admits writes until `until` (monotonic clock), unless closed. Arms an open fence.
    pub fn hold_until(&self, until: Instant) {
        let value = encode(until);
        let _ = self
            .until
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                (cur != CLOSED).then_some(value)
            });
    }

    /// Refuses every write from now on.
    pub fn close(&self) {
        self.until.store(CLOSED, Ordering::Release);
    }

    /// Whether a write may be sent now.
    pub fn admits(&self) -> bool {
        match self.until.load(Ordering::Acquire) {
            OPEN => true,
            CLOSED => false,
            until => encode(Instant::now()) < until,
        }
    }
}

/// A mutating request refused because the fence is shut.
#[derive(Debug, thiserror::Error)]
#[error(
    "write fence: refusing {method} {path}: leadership is no longer confirmed (lease not renewed within the renew deadline)"
)]
pub struct FenceError {
    /// The request method.
    pub method: Method,
    /// The request path.
    pub path: String,
}

/// Refuses mutating requests while the fence is shut; see the module docs.
#[derive(Clone, Debug)]
pub struct FenceLayer {
    fence: WriteFence,
}

impl FenceLayer {
    /// A layer enforcing `fence`.
    pub fn new(fence: WriteFence) -> Self {
        Self { fence }
    }
}

impl<S> Layer<S> for FenceLayer {
    type Service = Fence<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Fence {
            inner,
            fence: self.fence.clone(),
        }
    }
}

/// The service of [`FenceLayer`].
#[derive(Clone, Debug)]
pub struct Fence<S> {
    inner: S,
    fence: WriteFence,
}

use crate::error::BoxError;

fn is_read(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

impl<S, B> Service<Request<B>> for Fence<S>
where
    S: Service<Request<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if !is_read(req.method()) && !self.fence.admits() {
            let err = FenceError {
                method: req.method().clone(),
                path: req.uri().path().to_string(),
            };
            return Box::pin(async move { Err(err.into()) });
        }
        let fut = self.inner.call(req);
        Box::pin(async move { fut.await.map_err(Into::into) })
    }
}

/// Wraps a connector (the TCP one, under TLS) so that every connection it makes refuses socket
/// writes once the fence is shut; see the module docs.
#[derive(Clone, Debug)]
pub struct FencedConnector<C> {
    inner: C,
    fence: WriteFence,
}

impl<C> FencedConnector<C> {
    /// `inner`'s connections, fenced by `fence`.
    pub fn new(inner: C, fence: WriteFence) -> Self {
        Self { inner, fence }
    }
}

impl<C> Service<Uri> for FencedConnector<C>
where
    C: Service<Uri>,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
    C::Error: Send + 'static,
{
    type Response = FencedIo<C::Response>;
    type Error = C::Error;
    type Future = BoxFuture<'static, Result<Self::Response, C::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let fence = self.fence.clone();
        let connecting = self.inner.call(uri);
        Box::pin(async move {
            Ok(FencedIo {
                inner: connecting.await?,
                fence,
            })
        })
    }
}

/// A connection whose writes fail once the fence is shut: the check runs in `poll_write`, right
/// before the bytes are handed to the socket.
#[derive(Debug)]
pub struct FencedIo<T> {
    inner: T,
    fence: WriteFence,
}

impl<T> FencedIo<T> {
    fn refused() -> io::Error {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            "write fence: leadership is no longer confirmed (lease not renewed within the renew deadline)",
        )
    }
}

impl<T: Read + Unpin> Read for FencedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for FencedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !self.fence.admits() {
            return Poll::Ready(Err(Self::refused()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if !self.fence.admits() {
            return Poll::Ready(Err(Self::refused()));
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<T: Connection> Connection for FencedIo<T> {
    fn connected(&self) -> Connected {
        self.inner.connected()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tower::ServiceExt;

    #[test]
    fn open_until_armed_then_follows_the_clock_and_stays_closed() {
        let f = WriteFence::new();
        assert!(f.admits());
        f.hold_until(Instant::now() + Duration::from_secs(60));
        assert!(f.admits());
        f.hold_until(
            Instant::now()
                .checked_sub(Duration::from_millis(1))
                .unwrap(),
        );
        assert!(!f.admits());
        f.hold_until(Instant::now() + Duration::from_secs(60));
        assert!(f.admits());
        f.close();
        assert!(!f.admits());
        f.hold_until(Instant::now() + Duration::from_secs(60));
        assert!(!f.admits(), "a closed fence never reopens");
    }

    #[tokio::test]
    async fn layer_refuses_writes_but_not_reads_once_shut() {
        let fence = WriteFence::new();
        let svc = FenceLayer::new(fence.clone()).layer(tower::service_fn(|_: Request<()>| async {
            Ok::<_, BoxError>("sent")
        }));
        let req = |m: Method| {
            Request::builder()
                .method(m)
                .uri("/api/v1/x")
                .body(())
                .unwrap()
        };
        assert!(svc.clone().oneshot(req(Method::POST)).await.is_ok());
        fence.close();
        assert!(svc.clone().oneshot(req(Method::GET)).await.is_ok());
        for m in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            let err = svc.clone().oneshot(req(m)).await.unwrap_err();
            assert!(err.to_string().contains("write fence"), "{err}");
        }
    }

    #[tokio::test]
    async fn connections_refuse_writes_after_expiry() {
        use hyper_util::rt::TokioIo;
        use tokio::io::AsyncReadExt;

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let fence = WriteFence::new();
        fence.hold_until(Instant::now() + Duration::from_millis(100));
        let connector = FencedConnector::new(
            tower::service_fn(move |_: Uri| async move {
                tokio::net::TcpStream::connect(addr).await.map(TokioIo::new)
            }),
            fence.clone(),
        );
        let mut io = connector
            .oneshot(Uri::from_static("http://127.0.0.1/"))
            .await
            .unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        async fn write(
            io: &mut FencedIo<TokioIo<tokio::net::TcpStream>>,
            bytes: &[u8],
        ) -> io::Result<usize> {
            futures::future::poll_fn(|cx| Pin::new(&mut *io).poll_write(cx, bytes)).await
        }
        assert_eq!(write(&mut io, b"before").await.unwrap(), 6);
        std::thread::sleep(Duration::from_millis(120));
        let err = write(&mut io, b"after").await.unwrap_err();
        assert!(err.to_string().contains("write fence"), "{err}");
        drop(io);
        let mut got = Vec::new();
        server.read_to_end(&mut got).await.unwrap();
        assert_eq!(
            got, b"before",
            "nothing written after the fence expired reached the peer"
        );
    }
}
