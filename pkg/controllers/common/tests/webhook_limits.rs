//! Interpreter webhooks that answer maliciously or never: an `http://` URL is refused before any
//! connection, a response past the size cap (endless, or declared huge) fails at the cap with
//! bounded memory, and a webhook that never answers fails at its deadline. The webhooks are
//! misbehaving HTTPS endpoints written here (rustls, a self-signed CA given as `caBundle`).
// test-runner: alone. A slow webhook must be cut off between 2 s and 4 s (wall clock): a second
// test binary beside it on 2 cores stretches that.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use karmada_apis::config::v1alpha1::ResourceInterpreterWebhookConfiguration;
use karmada_controllers_common::interpreter::webhook::{MAX_RESPONSE_BYTES, Webhooks};
use karmada_interpreter::InterpreterLayer;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A CA and a serving certificate for 127.0.0.1 signed by it: the server's TLS config and the
/// CA's PEM.
fn tls() -> (Arc<rustls::ServerConfig>, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
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
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    (Arc::new(config), ca_cert.pem())
}

/// How the test webhook misbehaves once it has read a request's head.
#[derive(Clone, Copy)]
enum Misbehaviour {
    /// 200 with a chunked body that never ends.
    Endless,
    /// 200 declaring a 64 GiB body, then sending bytes as fast as it can.
    Huge,
    /// Never answers (keeps the connection open).
    Silent,
}

/// A misbehaving HTTPS webhook on loopback: its URL, CA PEM and the bytes it has sent.
struct Server {
    url: String,
    ca_pem: String,
    sent: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
}

async fn serve(misbehaviour: Misbehaviour) -> Server {
    let (config, ca_pem) = tls();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/interpret", listener.local_addr().unwrap());
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let sent = Arc::new(AtomicUsize::new(0));
    let connections = Arc::new(AtomicUsize::new(0));
    let (counter, accepted) = (sent.clone(), connections.clone());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            accepted.fetch_add(1, Ordering::SeqCst);
            let acceptor = acceptor.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let chunk = vec![b' '; 64 * 1024];
                match misbehaviour {
                    Misbehaviour::Silent => {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                    }
                    Misbehaviour::Endless => {
                        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
                        if tls.write_all(head.as_bytes()).await.is_err() {
                            return;
                        }
                        let framed = [
                            format!("{:x}\r\n", chunk.len()).into_bytes(),
                            chunk,
                            b"\r\n".to_vec(),
                        ]
                        .concat();
                        while tls.write_all(&framed).await.is_ok() {
                            counter.fetch_add(framed.len(), Ordering::SeqCst);
                        }
                    }
                    Misbehaviour::Huge => {
                        let head = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                            64u64 << 30
                        );
                        if tls.write_all(head.as_bytes()).await.is_err() {
                            return;
                        }
                        while tls.write_all(&chunk).await.is_ok() {
                            counter.fetch_add(chunk.len(), Ordering::SeqCst);
                        }
                    }
                }
            });
        }
    });
    Server {
        url,
        ca_pem,
        sent,
        connections,
    }
}

/// The layer with one configuration `limits` holding one webhook `hook.example.io` for every
/// operation on `example.io` Widgets, at `url`.
fn layer(url: &str, ca_pem: &str, timeout_seconds: i32) -> Webhooks {
    use base64::Engine;
    let config: ResourceInterpreterWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterWebhookConfiguration",
        "metadata": {"name": "limits"},
        "webhooks": [{"name": "hook.example.io",
            "clientConfig": {"url": url,
                "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem)},
            "rules": [{"operations": ["*"], "apiGroups": ["example.io"], "apiVersions": ["*"], "kinds": ["Widget"]}],
            "timeoutSeconds": timeout_seconds,
            "interpreterContextVersions": ["v1alpha1"]}]
    }))
    .unwrap();
    let configs = vec![Arc::new(config)];
    Webhooks::new(Box::new(move || Some(configs.clone())), None)
}

fn widget() -> Value {
    json!({"apiVersion": "example.io/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 3}})
}

/// The webhook's answer to InterpretReplica on a Widget: its error text and how long it took.
fn ask(layer: &Webhooks) -> (String, Duration) {
    let started = Instant::now();
    let answer = tokio::task::block_in_place(|| layer.get_replicas(&widget()));
    let err = answer
        .expect("the webhook matches Widgets")
        .expect_err("a misbehaving webhook must fail the call");
    (format!("{err:#}"), started.elapsed())
}

/// Resident memory of this process, from /proc (bytes).
fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_url_is_refused_without_connecting() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/interpret", listener.local_addr().unwrap());
    let (err, _) = ask(&layer(&url, "", 5));
    assert!(
        err.contains("limits/hook.example.io")
            && err.contains(
                "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]"
            ),
        "{err}"
    );
    let connected = tokio::time::timeout(Duration::from_millis(500), listener.accept()).await;
    assert!(
        connected.is_err(),
        "no connection may be made to an http URL"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_body_is_cut_at_the_cap_with_bounded_memory() {
    let server = serve(Misbehaviour::Endless).await;
    let before = rss();
    let (err, took) = ask(&layer(&server.url, &server.ca_pem, 30));
    assert!(
        err.contains("limits/hook.example.io")
            && err.contains(&format!(
                "the response is larger than the {MAX_RESPONSE_BYTES}-byte limit"
            )),
        "{err}"
    );
    assert!(
        took < Duration::from_secs(25),
        "cut at the cap, not the deadline: {took:?}"
    );
    assert!(server.sent.load(Ordering::SeqCst) >= MAX_RESPONSE_BYTES);
    let grown = rss().saturating_sub(before);
    assert!(
        grown < 4 * MAX_RESPONSE_BYTES,
        "memory grew by {grown} bytes reading a capped response"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_huge_body_is_refused_at_once() {
    let server = serve(Misbehaviour::Huge).await;
    let (err, took) = ask(&layer(&server.url, &server.ca_pem, 30));
    assert!(
        err.contains(&format!(
            "the response is larger than the {MAX_RESPONSE_BYTES}-byte limit"
        )),
        "{err}"
    );
    assert!(took < Duration::from_secs(25), "{took:?}");
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_that_never_answers_fails_at_its_deadline() {
    let server = serve(Misbehaviour::Silent).await;
    let (err, took) = ask(&layer(&server.url, &server.ca_pem, 2));
    assert!(
        err.contains("limits/hook.example.io") && err.contains("no answer within 2s"),
        "{err}"
    );
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(4),
        "{took:?}"
    );
}
