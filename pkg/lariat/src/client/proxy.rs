//! Connections through a proxy: an HTTP CONNECT tunnel through an `http://` or `https://` proxy
//! (with extra headers on the CONNECT request, as Go's `http.Transport.ProxyConnectHeader` sends
//! them), or a SOCKS5 tunnel through a `socks5://` (or `socks5h://`) proxy. Credentials in the proxy
//! URL's userinfo are sent as `Proxy-Authorization: Basic` (HTTP) or by username/password
//! authentication (SOCKS5), as Go's transport does.
//!
//! [`ProxyConnector`] sits between TLS and the [`FencedConnector`](super::FencedConnector): the TCP
//! connection to the proxy is the fenced one, so the write fence gates the proxy handshake and every
//! byte tunnelled afterwards, exactly as it gates a direct connection. The API server's TLS runs
//! inside the tunnel (for an `https://` proxy, inside the TLS session with the proxy).
//!
//! The proxy is treated as hostile input: the whole handshake (TCP connect, TLS with the proxy,
//! CONNECT or SOCKS exchange) has a deadline, the CONNECT response head is read up to
//! [`MAX_RESPONSE_HEAD`] bytes, and what the proxy answers is quoted in errors only after being cut
//! to printable ASCII of bounded length.
//!
//! Differences from Go's transport: an `http://` API server is reached through a CONNECT tunnel
//! too (Go forwards plain-HTTP requests to the proxy in absolute form); any 2xx answer to CONNECT
//! opens the tunnel (Go wants exactly 200).

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{HeaderMap, HeaderValue, Uri};
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tower::Service;

use crate::error::BoxError;

/// The largest CONNECT response head (status line and headers) read from a proxy.
pub const MAX_RESPONSE_HEAD: usize = 8 << 10;

/// The handshake deadline when the caller gives none.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// How many characters of a proxy's answer an error quotes.
const MAX_QUOTED: usize = 120;

/// The kind of proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyScheme {
    /// `http://`: CONNECT over plain TCP.
    Http,
    /// `https://`: CONNECT over TLS with the proxy.
    Https,
    /// `socks5://` or `socks5h://`: SOCKS5 CONNECT; the target's host name is resolved by the proxy.
    Socks5,
}

/// A proxy URL that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ProxyConfigError {
    /// The scheme is none of http, https, socks5, socks5h.
    #[error(
        "proxy URL {url}: unsupported scheme {scheme:?}, must be http, https, socks5 or socks5h"
    )]
    Scheme {
        /// The proxy URL, credentials removed.
        url: String,
        /// The scheme found.
        scheme: String,
    },
    /// No host.
    #[error("proxy URL {url}: no host")]
    NoHost {
        /// The proxy URL, credentials removed.
        url: String,
    },
    /// SOCKS5 credentials longer than 255 bytes.
    #[error("proxy URL {url}: SOCKS5 username and password must be at most 255 bytes each")]
    CredentialsTooLong {
        /// The proxy URL, credentials removed.
        url: String,
    },
    /// A proxy header that is not valid HTTP.
    #[error("proxy URL {url}: proxy header {name:?} is not a valid HTTP header")]
    Header {
        /// The proxy URL, credentials removed.
        url: String,
        /// The header name.
        name: String,
    },
    /// TLS settings for an `https://` proxy could not be built.
    #[error("proxy URL {url}: TLS configuration for the proxy: {message}")]
    Tls {
        /// The proxy URL, credentials removed.
        url: String,
        /// What went wrong.
        message: String,
    },
}

/// A proxy every connection of a transport goes through.
#[derive(Clone)]
pub struct Proxy {
    scheme: ProxyScheme,
    /// Host without IPv6 brackets.
    host: String,
    port: u16,
    /// `scheme://host:port`, without credentials: what errors and logs show.
    display: String,
    /// Username and password from the URL's userinfo (percent-decoded).
    credentials: Option<(String, String)>,
    /// Headers of the CONNECT request (HTTP proxies only), `Proxy-Authorization` included.
    headers: HeaderMap,
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Proxy")
            .field("url", &self.display)
            .field(
                "credentials",
                &self.credentials.as_ref().map(|_| "<redacted>"),
            )
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// `url` without its userinfo (credentials), for errors and logs.
pub fn redact(url: &Uri) -> String {
    let scheme = url.scheme_str().unwrap_or("");
    let authority = url.authority().map_or("", |a| a.as_str());
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    format!("{scheme}://{host_port}")
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h << 4 | l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

impl Proxy {
    /// The proxy at `url`, sending `headers` on every CONNECT request (HTTP proxies; a SOCKS5
    /// proxy has no headers, they are not used there, as in Go).
    pub fn new(url: &Uri, headers: HeaderMap) -> Result<Self, ProxyConfigError> {
        let display = redact(url);
        let scheme = match url.scheme_str().map(str::to_ascii_lowercase).as_deref() {
            Some("http") => ProxyScheme::Http,
            Some("https") => ProxyScheme::Https,
            Some("socks5" | "socks5h") => ProxyScheme::Socks5,
            other => {
                return Err(ProxyConfigError::Scheme {
                    url: display,
                    scheme: other.unwrap_or("").to_owned(),
                });
            }
        };
        let Some(authority) = url.authority() else {
            return Err(ProxyConfigError::NoHost { url: display });
        };
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if host.is_empty() {
            return Err(ProxyConfigError::NoHost { url: display });
        }
        let port = authority.port_u16().unwrap_or(match scheme {
            ProxyScheme::Http => 80,
            ProxyScheme::Https => 443,
            ProxyScheme::Socks5 => 1080,
        });
        let credentials = authority.as_str().rsplit_once('@').map(|(userinfo, _)| {
            match userinfo.split_once(':') {
                Some((u, p)) => (percent_decode(u), percent_decode(p)),
                None => (percent_decode(userinfo), String::new()),
            }
        });
        let mut headers = headers;
        for value in headers.values_mut() {
            value.set_sensitive(true);
        }
        if scheme == ProxyScheme::Socks5 {
            if let Some((u, p)) = &credentials
                && (u.len() > 255 || p.len() > 255)
            {
                return Err(ProxyConfigError::CredentialsTooLong { url: display });
            }
        } else if let Some((u, p)) = &credentials {
            use base64::Engine as _;
            let token = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
            let mut value = HeaderValue::from_str(&format!("Basic {token}")).map_err(|_| {
                ProxyConfigError::Header {
                    url: display.clone(),
                    name: "Proxy-Authorization".to_owned(),
                }
            })?;
            value.set_sensitive(true);
            // As Go: the URL's credentials win over a Proxy-Authorization among the headers.
            headers.insert(http::header::PROXY_AUTHORIZATION, value);
        }
        Ok(Self {
            scheme,
            host: host.to_owned(),
            port,
            display,
            credentials,
            headers,
        })
    }

    /// The kind of proxy.
    pub fn scheme(&self) -> ProxyScheme {
        self.scheme
    }

    /// `scheme://host:port`, credentials removed.
    pub fn url(&self) -> &str {
        &self.display
    }

    /// The URI the inner (TCP) connector dials to reach the proxy.
    fn dial_uri(&self) -> Result<Uri, ProxyErrorKind> {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("http://{host}:{}/", self.port)
            .parse()
            .map_err(|_| ProxyErrorKind::Malformed("the proxy address is not a valid URI".into()))
    }
}

/// A connection through the proxy failed.
#[derive(Debug, thiserror::Error)]
#[error("proxy {proxy}: tunnel to {target}: {kind}")]
pub struct ProxyError {
    /// The proxy URL, credentials removed.
    pub proxy: String,
    /// The `host:port` the tunnel was to reach.
    pub target: String,
    /// What failed.
    #[source]
    pub kind: ProxyErrorKind,
}

/// What failed in a proxy handshake.
#[derive(Debug, thiserror::Error)]
pub enum ProxyErrorKind {
    /// The TCP connection to the proxy failed.
    #[error("cannot connect to the proxy: {}", crate::error::error_chain(.0.as_ref()))]
    Connect(BoxError),
    /// The TLS handshake with an `https://` proxy failed.
    #[error("TLS handshake with the proxy failed: {0}")]
    Tls(io::Error),
    /// Reading or writing the handshake failed.
    #[error("proxy handshake failed: {0}")]
    Io(io::Error),
    /// The proxy closed the connection during the handshake.
    #[error("the proxy closed the connection during the handshake")]
    Closed,
    /// The handshake did not finish in time.
    #[error("the proxy handshake did not finish within {0:?}")]
    Timeout(Duration),
    /// The proxy refused the CONNECT request.
    #[error("the proxy answered CONNECT with {status} {reason}")]
    Refused {
        /// The status code.
        status: u16,
        /// The reason phrase (printable ASCII, cut short).
        reason: String,
    },
    /// The CONNECT response head is larger than [`MAX_RESPONSE_HEAD`].
    #[error("the proxy's CONNECT response head exceeds {MAX_RESPONSE_HEAD} bytes")]
    ResponseTooLarge,
    /// The proxy answered something that is not a valid handshake.
    #[error("malformed proxy answer: {0}")]
    Malformed(String),
    /// A SOCKS5 proxy refused.
    #[error("SOCKS5 proxy refused: {0}")]
    Socks(String),
    /// The request has no target host.
    #[error("the request URI has no host")]
    NoTarget,
}

/// A connector that reaches every destination through `proxy` (or directly without one); see the
/// module docs.
#[derive(Clone)]
pub struct ProxyConnector<C> {
    inner: C,
    proxy: Option<Arc<Proxy>>,
    tls: Option<tokio_rustls::TlsConnector>,
    handshake_timeout: Duration,
}

impl<C> fmt::Debug for ProxyConnector<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyConnector")
            .field("proxy", &self.proxy)
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

impl<C> ProxyConnector<C> {
    /// Connects directly with `inner`.
    pub fn direct(inner: C) -> Self {
        Self {
            inner,
            proxy: None,
            tls: None,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        }
    }

    /// Connects through `proxy`, dialling it with `inner`. `tls` is the client configuration
    /// for the TLS session with an `https://` proxy (required for one, unused otherwise).
    pub fn new(
        inner: C,
        proxy: Proxy,
        tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
    ) -> Result<Self, ProxyConfigError> {
        let tls = match (proxy.scheme, tls) {
            (ProxyScheme::Https, Some(config)) => Some(tokio_rustls::TlsConnector::from(config)),
            (ProxyScheme::Https, None) => {
                return Err(ProxyConfigError::Tls {
                    url: proxy.display.clone(),
                    message: "no TLS client configuration".to_owned(),
                });
            }
            _ => None,
        };
        Ok(Self {
            inner,
            proxy: Some(Arc::new(proxy)),
            tls,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        })
    }

    /// The deadline of a proxied connection: TCP connect to the proxy and the whole handshake.
    #[must_use]
    pub fn with_handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }
}

impl<C> Service<Uri> for ProxyConnector<C>
where
    C: Service<Uri>,
    C::Future: Send + 'static,
    C::Response: Read + Write + Connection + Unpin + Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = ProxyStream<C::Response>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let Some(proxy) = self.proxy.clone() else {
            let connecting = self.inner.call(dst);
            return Box::pin(async move {
                Ok(ProxyStream::Direct(connecting.await.map_err(Into::into)?))
            });
        };
        let target = Target::of(&dst);
        let fail = {
            let proxy = proxy.display.clone();
            let target = target.as_ref().map(Target::to_string).unwrap_or_default();
            move |kind| -> BoxError {
                Box::new(ProxyError {
                    proxy: proxy.clone(),
                    target: target.clone(),
                    kind,
                })
            }
        };
        let Some(target) = target else {
            return Box::pin(async move { Err(fail(ProxyErrorKind::NoTarget)) });
        };
        let dial = match proxy.dial_uri() {
            Ok(uri) => uri,
            Err(kind) => return Box::pin(async move { Err(fail(kind)) }),
        };
        let connecting = self.inner.call(dial);
        let tls = self.tls.clone();
        let timeout = self.handshake_timeout;
        Box::pin(async move {
            let handshake = async {
                let tcp = connecting
                    .await
                    .map_err(|e| ProxyErrorKind::Connect(e.into()))?;
                let mut io = TokioIo::new(tcp);
                match (proxy.scheme, tls) {
                    (ProxyScheme::Https, Some(tls)) => {
                        let name = tokio_rustls::rustls::pki_types::ServerName::try_from(
                            proxy.host.clone(),
                        )
                        .map_err(|e| ProxyErrorKind::Tls(io::Error::other(e)))?;
                        let mut stream =
                            tls.connect(name, io).await.map_err(ProxyErrorKind::Tls)?;
                        http_connect(&mut stream, &target, &proxy.headers).await?;
                        Ok(ProxyStream::Tls(Box::new(TokioIo::new(stream))))
                    }
                    (ProxyScheme::Https, None) => Err(ProxyErrorKind::Tls(io::Error::other(
                        "no TLS client configuration for the proxy",
                    ))),
                    (ProxyScheme::Http, _) => {
                        http_connect(&mut io, &target, &proxy.headers).await?;
                        Ok(ProxyStream::Direct(io.into_inner()))
                    }
                    (ProxyScheme::Socks5, _) => {
                        socks5_connect(&mut io, &target, proxy.credentials.as_ref()).await?;
                        Ok(ProxyStream::Direct(io.into_inner()))
                    }
                }
            };
            match tokio::time::timeout(timeout, handshake).await {
                Ok(Ok(stream)) => Ok(stream),
                Ok(Err(kind)) => Err(fail(kind)),
                Err(_) => Err(fail(ProxyErrorKind::Timeout(timeout))),
            }
        })
    }
}

/// Where a tunnel leads.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Target {
    /// Host without IPv6 brackets.
    host: String,
    port: u16,
}

impl Target {
    fn of(uri: &Uri) -> Option<Self> {
        let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return None;
        }
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("http") {
                80
            } else {
                443
            });
        Some(Self {
            host: host.to_owned(),
            port,
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// `s` cut to printable ASCII of bounded length, for quoting a proxy's answer.
fn quote(s: &[u8]) -> String {
    let mut out: String = s
        .iter()
        .take(MAX_QUOTED)
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                char::from(b)
            } else {
                '?'
            }
        })
        .collect();
    if s.len() > MAX_QUOTED {
        out.push('…');
    }
    out
}

/// Sends CONNECT for `target` with `headers` and reads the proxy's answer head (byte by byte, so
/// nothing after it is consumed: the tunnel's first bytes belong to TLS).
async fn http_connect<S>(
    io: &mut S,
    target: &Target,
    headers: &HeaderMap,
) -> Result<(), ProxyErrorKind>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut req = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n").into_bytes();
    for (name, value) in headers {
        req.extend_from_slice(name.as_str().as_bytes());
        req.extend_from_slice(b": ");
        req.extend_from_slice(value.as_bytes());
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"\r\n");
    io.write_all(&req).await.map_err(ProxyErrorKind::Io)?;
    io.flush().await.map_err(ProxyErrorKind::Io)?;

    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && !head.ends_with(b"\n\n") {
        if head.len() >= MAX_RESPONSE_HEAD {
            return Err(ProxyErrorKind::ResponseTooLarge);
        }
        match io.read(&mut byte).await.map_err(ProxyErrorKind::Io)? {
            0 => return Err(ProxyErrorKind::Closed),
            _ => head.push(byte[0]),
        }
    }
    let line_end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    let line = head[..line_end]
        .strip_suffix(b"\r")
        .unwrap_or(&head[..line_end]);
    let mut parts = line.splitn(3, |&b| b == b' ');
    let version = parts.next().unwrap_or_default();
    let code = parts.next().unwrap_or_default();
    let reason = parts.next().unwrap_or_default();
    if !version.starts_with(b"HTTP/1.") {
        return Err(ProxyErrorKind::Malformed(format!(
            "status line {:?}",
            quote(line)
        )));
    }
    let status = std::str::from_utf8(code)
        .ok()
        .filter(|c| c.len() == 3)
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| ProxyErrorKind::Malformed(format!("status line {:?}", quote(line))))?;
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(ProxyErrorKind::Refused {
            status,
            reason: quote(reason),
        })
    }
}

/// The SOCKS5 reply codes (RFC 1928 §6).
fn socks5_reply(code: u8) -> String {
    match code {
        1 => "general SOCKS server failure".to_owned(),
        2 => "connection not allowed by ruleset".to_owned(),
        3 => "network unreachable".to_owned(),
        4 => "host unreachable".to_owned(),
        5 => "connection refused".to_owned(),
        6 => "TTL expired".to_owned(),
        7 => "command not supported".to_owned(),
        8 => "address type not supported".to_owned(),
        other => format!("unknown reply code {other}"),
    }
}

/// The SOCKS5 exchange (RFC 1928, username/password by RFC 1929): CONNECT to `target`, its host
/// name sent to the proxy to resolve (an IP address sent as one).
async fn socks5_connect<S>(
    io: &mut S,
    target: &Target,
    credentials: Option<&(String, String)>,
) -> Result<(), ProxyErrorKind>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let io_err = ProxyErrorKind::Io;
    let read_exact = async |io: &mut S, buf: &mut [u8]| -> Result<(), ProxyErrorKind> {
        match io.read_exact(buf).await {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(ProxyErrorKind::Closed),
            Err(e) => Err(ProxyErrorKind::Io(e)),
        }
    };
    let greeting: &[u8] = if credentials.is_some() {
        &[5, 2, 0, 2]
    } else {
        &[5, 1, 0]
    };
    io.write_all(greeting).await.map_err(io_err)?;
    let mut choice = [0u8; 2];
    read_exact(io, &mut choice).await?;
    if choice[0] != 5 {
        return Err(ProxyErrorKind::Malformed(format!(
            "SOCKS version {} in the method selection",
            choice[0]
        )));
    }
    match (choice[1], credentials) {
        (0, _) => {}
        (2, Some((user, pass))) => {
            let (u, p) = (user.as_bytes(), pass.as_bytes());
            let (Ok(ulen), Ok(plen)) = (u8::try_from(u.len()), u8::try_from(p.len())) else {
                return Err(ProxyErrorKind::Socks("credentials too long".to_owned()));
            };
            let mut auth = vec![1, ulen];
            auth.extend_from_slice(u);
            auth.push(plen);
            auth.extend_from_slice(p);
            io.write_all(&auth).await.map_err(io_err)?;
            let mut status = [0u8; 2];
            read_exact(io, &mut status).await?;
            if status[1] != 0 {
                return Err(ProxyErrorKind::Socks(
                    "username/password authentication failed".to_owned(),
                ));
            }
        }
        (0xff, _) => {
            return Err(ProxyErrorKind::Socks(
                "no acceptable authentication method (credentials required?)".to_owned(),
            ));
        }
        (other, _) => {
            return Err(ProxyErrorKind::Malformed(format!(
                "SOCKS5 authentication method {other} was not offered"
            )));
        }
    }
    let mut req = vec![5, 1, 0];
    socks5_address(&mut req, target)?;
    req.extend_from_slice(&target.port.to_be_bytes());
    io.write_all(&req).await.map_err(io_err)?;
    let mut reply = [0u8; 4];
    read_exact(io, &mut reply).await?;
    if reply[0] != 5 {
        return Err(ProxyErrorKind::Malformed(format!(
            "SOCKS version {} in the CONNECT reply",
            reply[0]
        )));
    }
    if reply[1] != 0 {
        return Err(ProxyErrorKind::Socks(socks5_reply(reply[1])));
    }
    // The bound address, which nothing here needs.
    let addr_len = match reply[3] {
        1 => 4,
        4 => 16,
        3 => {
            let mut len = [0u8; 1];
            read_exact(io, &mut len).await?;
            usize::from(len[0])
        }
        other => {
            return Err(ProxyErrorKind::Malformed(format!(
                "SOCKS5 address type {other} in the CONNECT reply"
            )));
        }
    };
    let mut bound = vec![0u8; addr_len + 2];
    read_exact(io, &mut bound).await?;
    Ok(())
}

/// Appends `target`'s host (SOCKS5 address type and address) to `req`.
fn socks5_address(req: &mut Vec<u8>, target: &Target) -> Result<(), ProxyErrorKind> {
    if let Ok(ip) = target.host.parse::<Ipv4Addr>() {
        req.push(1);
        req.extend_from_slice(&ip.octets());
    } else if let Ok(ip) = target.host.parse::<Ipv6Addr>() {
        req.push(4);
        req.extend_from_slice(&ip.octets());
    } else {
        let name = target.host.as_bytes();
        let Ok(len) = u8::try_from(name.len()) else {
            return Err(ProxyErrorKind::Socks(
                "target host name longer than 255 bytes".to_owned(),
            ));
        };
        req.push(3);
        req.push(len);
        req.extend_from_slice(name);
    }
    Ok(())
}

/// A connection a [`ProxyConnector`] made: the inner connection (direct, or a tunnel through an
/// HTTP or SOCKS5 proxy) or a tunnel inside TLS with an `https://` proxy.
#[derive(Debug)]
pub enum ProxyStream<T> {
    /// Bytes go straight over the inner connection.
    Direct(T),
    /// Bytes go through the TLS session with the proxy.
    Tls(Box<TokioIo<tokio_rustls::client::TlsStream<TokioIo<T>>>>),
}

impl<T: Read + Write + Unpin> Read for ProxyStream<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Direct(io) => Pin::new(io).poll_read(cx, buf),
            Self::Tls(io) => Pin::new(&mut **io).poll_read(cx, buf),
        }
    }
}

impl<T: Read + Write + Unpin> Write for ProxyStream<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Direct(io) => Pin::new(io).poll_write(cx, buf),
            Self::Tls(io) => Pin::new(&mut **io).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Direct(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            Self::Tls(io) => Pin::new(&mut **io).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Direct(io) => io.is_write_vectored(),
            Self::Tls(io) => io.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Direct(io) => Pin::new(io).poll_flush(cx),
            Self::Tls(io) => Pin::new(&mut **io).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Direct(io) => Pin::new(io).poll_shutdown(cx),
            Self::Tls(io) => Pin::new(&mut **io).poll_shutdown(cx),
        }
    }
}

impl<T: Connection + Read + Write + Unpin> Connection for ProxyStream<T> {
    fn connected(&self) -> Connected {
        match self {
            Self::Direct(io) => io.connected(),
            Self::Tls(io) => io.inner().get_ref().0.inner().connected(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::fence::{FencedConnector, WriteFence};
    use hyper_util::client::legacy::connect::HttpConnector;
    use tokio::net::{TcpListener, TcpStream};
    use tower::ServiceExt;

    type Fenced = FencedConnector<HttpConnector>;

    fn connector(url: &str, headers: HeaderMap, fence: WriteFence) -> ProxyConnector<Fenced> {
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        let proxy = Proxy::new(&url.parse().unwrap(), headers).unwrap();
        ProxyConnector::new(FencedConnector::new(tcp, fence), proxy, None)
            .unwrap()
            .with_handshake_timeout(Duration::from_secs(5))
    }

    /// Reads a request head (up to the blank line) from a scripted proxy's client.
    async fn read_head(s: &mut TcpStream) -> String {
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(s.read(&mut b).await.unwrap(), 1, "client closed mid-head");
            head.push(b[0]);
        }
        String::from_utf8(head).unwrap()
    }

    /// Writes `ping` through a tunnel and expects the scripted proxy's echo.
    async fn ping(io: ProxyStream<crate::client::fence::FencedIo<TokioIo<TcpStream>>>) {
        let mut io = TokioIo::new(io);
        io.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        io.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
    }

    async fn echo(s: &mut TcpStream) {
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).await.unwrap();
        s.write_all(&buf).await.unwrap();
    }

    #[test]
    fn proxy_urls_schemes_ports_and_credentials() {
        let p = |u: &str| Proxy::new(&u.parse().unwrap(), HeaderMap::new());
        let http = p("http://proxy.example").unwrap();
        assert_eq!((http.scheme(), http.port), (ProxyScheme::Http, 80));
        assert_eq!(p("https://proxy.example").unwrap().port, 443);
        let socks = p("socks5://u%40x:p%3Aw@[::1]").unwrap();
        assert_eq!((socks.scheme(), socks.port), (ProxyScheme::Socks5, 1080));
        assert_eq!(socks.host, "::1");
        assert_eq!(
            socks.credentials,
            Some(("u@x".to_owned(), "p:w".to_owned()))
        );
        assert_eq!(socks.url(), "socks5://[::1]");
        assert_eq!(p("socks5h://h:1").unwrap().scheme(), ProxyScheme::Socks5);
        let err = p("ftp://user:secret@h:21").unwrap_err().to_string();
        assert!(err.contains("unsupported scheme \"ftp\""), "{err}");
        assert!(
            !err.contains("secret"),
            "credentials leak into errors: {err}"
        );
        let auth = p("http://user:pass@h:3128").unwrap();
        assert!(format!("{auth:?}").contains("<redacted>"));
        assert!(!format!("{auth:?}").contains("pass"));
        assert_eq!(
            auth.headers[http::header::PROXY_AUTHORIZATION],
            "Basic dXNlcjpwYXNz"
        );
    }

    #[tokio::test]
    async fn connect_sends_headers_and_credentials_then_tunnels() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let head = read_head(&mut s).await;
            s.write_all(b"HTTP/1.1 200 Connection established\r\nVia: test\r\n\r\n")
                .await
                .unwrap();
            echo(&mut s).await;
            head
        });
        let mut headers = HeaderMap::new();
        headers.append("x-proxy-token", HeaderValue::from_static("t1"));
        headers.append("x-proxy-token", HeaderValue::from_static("t2"));
        let c = connector(
            &format!("http://user:pass@{addr}"),
            headers,
            WriteFence::new(),
        );
        let io = c
            .oneshot("https://api.example:6443/readyz".parse().unwrap())
            .await
            .unwrap();
        ping(io).await;
        let head = server.await.unwrap();
        assert!(
            head.starts_with("CONNECT api.example:6443 HTTP/1.1\r\nHost: api.example:6443\r\n"),
            "{head}"
        );
        for line in [
            "proxy-authorization: Basic dXNlcjpwYXNz\r\n",
            "x-proxy-token: t1\r\n",
            "x-proxy-token: t2\r\n",
        ] {
            assert!(head.contains(line), "{line:?} missing from {head:?}");
        }
    }

    #[tokio::test]
    async fn refused_connect_names_the_status_and_hides_credentials() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            read_head(&mut s).await;
            s.write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
                .await
                .unwrap();
        });
        let c = connector(
            &format!("http://user:secret@{addr}"),
            HeaderMap::new(),
            WriteFence::new(),
        );
        let err = c
            .oneshot("https://10.0.0.1:6443/".parse().unwrap())
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "proxy http://{addr}: tunnel to 10.0.0.1:6443: the proxy answered CONNECT with 407 Proxy Authentication Required"
            )
        );
    }

    #[tokio::test]
    async fn endless_or_silent_proxies_fail_within_bounds() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            // First client: an endless response head. Second: silence.
            let (mut s, _) = listener.accept().await.unwrap();
            read_head(&mut s).await;
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\n").await;
            let junk = vec![b'x'; 1024];
            while s.write_all(&junk).await.is_ok() {}
            let (_silent, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(60)).await;
        });
        let c = connector(
            &format!("http://{addr}"),
            HeaderMap::new(),
            WriteFence::new(),
        );
        let err = c
            .clone()
            .oneshot("https://api:443/".parse().unwrap())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.ends_with("response head exceeds 8192 bytes"), "{err}");
        let err = c
            .with_handshake_timeout(Duration::from_millis(200))
            .oneshot("https://api:443/".parse().unwrap())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("the proxy handshake did not finish within 200ms"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn unreachable_proxy_says_so() {
        let addr = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        let c = connector(
            &format!("http://{addr}"),
            HeaderMap::new(),
            WriteFence::new(),
        );
        let err = c
            .oneshot("https://api:443/".parse().unwrap())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!(
                "proxy http://{addr}: tunnel to api:443: cannot connect to the proxy:"
            )) && err.contains("Connection refused"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn socks5_authenticates_and_sends_the_host_name() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut greeting = [0u8; 4];
            s.read_exact(&mut greeting).await.unwrap();
            s.write_all(&[5, 2]).await.unwrap();
            let mut auth = [0u8; 11];
            s.read_exact(&mut auth).await.unwrap();
            s.write_all(&[1, 0]).await.unwrap();
            let mut req = [0u8; 5 + 11 + 2];
            s.read_exact(&mut req).await.unwrap();
            s.write_all(&[5, 0, 0, 1, 127, 0, 0, 1, 0x1f, 0x90])
                .await
                .unwrap();
            echo(&mut s).await;
            (greeting, auth, req)
        });
        let c = connector(
            &format!("socks5://user:pass@{addr}"),
            HeaderMap::new(),
            WriteFence::new(),
        );
        ping(
            c.oneshot("https://api.example:6443/".parse().unwrap())
                .await
                .unwrap(),
        )
        .await;
        let (greeting, auth, req) = server.await.unwrap();
        assert_eq!(greeting, [5, 2, 0, 2]);
        assert_eq!(&auth, b"\x01\x04user\x04pass");
        assert_eq!(&req, b"\x05\x01\x00\x03\x0bapi.example\x19\x2b");
    }

    #[tokio::test]
    async fn socks5_refusal_is_named() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut greeting = [0u8; 3];
            s.read_exact(&mut greeting).await.unwrap();
            s.write_all(&[5, 0]).await.unwrap();
            let mut req = [0u8; 10];
            s.read_exact(&mut req).await.unwrap();
            s.write_all(&[5, 5, 0, 1, 0, 0, 0, 0, 0, 0]).await.unwrap();
        });
        let c = connector(
            &format!("socks5://{addr}"),
            HeaderMap::new(),
            WriteFence::new(),
        );
        let err = c
            .oneshot("https://10.1.2.3:6443/".parse().unwrap())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("tunnel to 10.1.2.3:6443: SOCKS5 proxy refused: connection refused"),
            "{err}"
        );
    }

    /// A CA, and a TLS server config for 127.0.0.1 signed by it, and a client config trusting it.
    fn tls_pair() -> (
        Arc<tokio_rustls::rustls::ServerConfig>,
        Arc<tokio_rustls::rustls::ClientConfig>,
    ) {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        use tokio_rustls::rustls;
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::from_params(&ca, &ca_key);
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca_cert.der().clone()).unwrap();
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        (Arc::new(server), Arc::new(client))
    }

    #[tokio::test]
    async fn an_https_proxy_gets_connect_inside_tls() {
        let (server, client) = tls_pair();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(server);
        let proxy = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut s = acceptor.accept(tcp).await.unwrap();
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                s.read_exact(&mut b).await.unwrap();
                head.push(b[0]);
            }
            s.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .unwrap();
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
            s.flush().await.unwrap();
            String::from_utf8(head).unwrap()
        });
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        let mut headers = HeaderMap::new();
        headers.insert("x-proxy-token", HeaderValue::from_static("t1"));
        let c = ProxyConnector::new(
            FencedConnector::new(tcp, WriteFence::new()),
            Proxy::new(&format!("https://{addr}").parse().unwrap(), headers).unwrap(),
            Some(client),
        )
        .unwrap();
        let io = c
            .oneshot("https://api.example:6443/".parse().unwrap())
            .await
            .unwrap();
        assert!(matches!(io, ProxyStream::Tls(_)));
        ping(io).await;
        let head = proxy.await.unwrap();
        assert!(
            head.starts_with("CONNECT api.example:6443 HTTP/1.1\r\n"),
            "{head}"
        );
        assert!(head.contains("x-proxy-token: t1\r\n"), "{head}");
    }

    #[tokio::test]
    async fn an_https_proxy_with_an_untrusted_certificate_is_refused() {
        let (server, _) = tls_pair();
        let (_, other_client) = tls_pair();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(server);
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let _ = acceptor.accept(tcp).await;
        });
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        let c = ProxyConnector::new(
            FencedConnector::new(tcp, WriteFence::new()),
            Proxy::new(
                &format!("https://{addr}").parse().unwrap(),
                HeaderMap::new(),
            )
            .unwrap(),
            Some(other_client),
        )
        .unwrap();
        let err = c
            .oneshot("https://api:443/".parse().unwrap())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("TLS handshake with the proxy failed") && err.contains("certificate"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_shut_fence_keeps_the_handshake_off_the_wire() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.unwrap();
            got
        });
        let fence = WriteFence::new();
        fence.close();
        let c = connector(&format!("http://{addr}"), HeaderMap::new(), fence);
        let err = c
            .oneshot("https://api:443/".parse().unwrap())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("write fence"), "{err}");
        assert!(
            server.await.unwrap().is_empty(),
            "no byte reached the proxy"
        );
    }
}
