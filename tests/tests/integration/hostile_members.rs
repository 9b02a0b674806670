//! Members whose API servers answer maliciously, next to a real member, against the real
//! controller-manager binary. Four misbehaving HTTPS endpoints (written here: rustls, a CA of the
//! test's own given as the Cluster Secret's `caBundle`) are registered as Push members beside the
//! testenv member `member1`:
//! - `hostile-garbage` answers every API request with bytes that are not JSON;
//! - `hostile-endless` answers with a body that never ends (no length, chunked);
//! - `hostile-huge` declares an 8 GiB list and streams it;
//! - `hostile-slow` trickles its response one byte a second (slowloris), health checks included.
//!
//! The first three answer health checks (`/readyz`) properly, so they look Ready and the
//! controllers really talk to them (status collection, Works applied). What is asserted:
//! - the controller-manager's peak resident memory (VmHWM of the real process) stays bounded;
//! - a ConfigMap propagated to every member reaches `member1` in normal time;
//! - each hostile Cluster says why: discovery failed with the cause (garbage, the response
//!   limit) in `CompleteAPIEnablements`, or `Ready=False` with `ClusterNotReachable`.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use karmada_apis::{Cluster, PropagationPolicy};
use karmada_e2e::controller_manager::Kcm;
use karmada_e2e::tls::localhost as tls;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;
use testenv::{EnvOptions, TestEnv};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 1,
        install_crds: true,
        ..Default::default()
    })
}

/// The peak resident memory the controller-manager may reach. Its caps (64 MiB per list page,
/// 16 MiB per object or watch event) and a few requests at once keep it far below this; without
/// them an endless body grows by hundreds of MiB a second until the 32 s request deadline.
const RSS_BOUND: u64 = 512 << 20;

/// How a hostile member misbehaves.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Garbage,
    Endless,
    Huge,
    Slowloris,
}

/// Answers one request (one per connection) as `mode` misbehaves.
async fn misbehave<S>(mut s: S, mode: Mode)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&head);
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let health = ["/readyz", "/healthz", "/livez"]
        .iter()
        .any(|p| path.starts_with(p));
    if health && !matches!(mode, Mode::Slowloris) {
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            .await;
        let _ = s.shutdown().await;
        return;
    }
    let item = br#"{"metadata":{"name":"x","namespace":"y"},"data":{"k":"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"}},"#;
    let many: Vec<u8> = item
        .iter()
        .copied()
        .cycle()
        .take(item.len() * 512)
        .collect();
    match mode {
        Mode::Garbage => {
            let body = b"{\"kind\":\"APIVersions\",\"versions\":[\x00\xff garbage }}]{";
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes()).await;
            let _ = s.write_all(body).await;
            let _ = s.shutdown().await;
        }
        Mode::Endless => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
            if s.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let start = br#"{"kind":"List","apiVersion":"v1","items":["#;
            let framed = |b: &[u8]| [format!("{:x}\r\n", b.len()).as_bytes(), b, b"\r\n"].concat();
            if s.write_all(&framed(start)).await.is_err() {
                return;
            }
            let chunk = framed(&many);
            while s.write_all(&chunk).await.is_ok() {}
        }
        Mode::Huge => {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                8u64 << 30
            );
            if s.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let _ = s
                .write_all(br#"{"kind":"List","apiVersion":"v1","items":["#)
                .await;
            while s.write_all(&many).await.is_ok() {}
        }
        Mode::Slowloris => {
            for b in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                .iter()
                .cycle()
            {
                if s.write_all(&[*b]).await.is_err() || s.flush().await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Starts a hostile member: its URL and CA PEM.
async fn hostile(mode: Mode) -> (String, String) {
    let (config, ca_pem) = tls();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    misbehave(tls, mode).await;
                }
            });
        }
    });
    (url, ca_pem)
}

/// Registers the hostile member `name` at `url` as a Push Cluster with a Secret of its own (owned by
/// the Cluster, as `karmadactl join` writes it: the controller-manager uses no other).
async fn register(host: &Client, name: &str, url: &str, ca_pem: &str) {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let cluster: Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"apiEndpoint": url, "syncMode": "Push",
            "secretRef": {"namespace": "karmada-cluster", "name": name}},
    }))
    .unwrap();
    let cluster = Api::<Cluster>::all(host.clone())
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "karmada-cluster", "ownerReferences": [{
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "name": name,
            "uid": cluster.metadata.uid, "controller": true}]},
        "data": {"token": b64("hostile-token"), "caBundle": b64(ca_pem)},
    }))
    .unwrap();
    Api::<Secret>::namespaced(host.clone(), "karmada-cluster")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

/// A kilobyte figure of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in bytes.
fn proc_status(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| {
            v.trim_start_matches(':')
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .unwrap_or(0)
        * 1024
}

fn condition(c: &Cluster, type_: &str) -> Option<(String, String, String)> {
    c.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    })
}

/// Waits up to `timeout` for `check`, failing with `what`, the controller-manager's log tail, and
/// whenever its memory passes [`RSS_BOUND`].
async fn eventually<F, Fut>(kcm: &Kcm, what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let peak = proc_status(kcm.pid(), "VmHWM");
        assert!(
            peak < RSS_BOUND,
            "controller-manager peak RSS {} MiB passed {} MiB while waiting for {what}",
            peak >> 20,
            RSS_BOUND >> 20
        );
        if check().await {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}\ncontroller-manager log (tail):\n{}",
            kcm.log_tail(60)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn hostile_members_cost_bounded_memory_stall_nobody_and_are_reported() {
    let env = env();
    let host = env.host().client().await;
    let kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--cluster-status-update-frequency=2s",
            // The hostile members' Node caches never sync: report them after 20s, not 2 min.
            "--cluster-cache-sync-timeout=20s",
        ],
        &[],
    );
    let member = &env.members()[0];
    karmada_e2e::karmadactl::join(env.host(), member, &[])
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let modes = [
        ("hostile-garbage", Mode::Garbage),
        ("hostile-endless", Mode::Endless),
        ("hostile-huge", Mode::Huge),
        ("hostile-slow", Mode::Slowloris),
    ];
    for (name, mode) in modes {
        let (url, ca) = hostile(mode).await;
        register(&host, name, &url, &ca).await;
    }
    let clusters: Api<Cluster> = Api::all(host.clone());
    eventually(&kcm, "member1 Ready", Duration::from_secs(60), || async {
        clusters
            .get_opt(member.name())
            .await
            .ok()
            .flatten()
            .and_then(|c| condition(&c, "Ready"))
            .is_some_and(|(s, _, _)| s == "True")
    })
    .await;

    // A ConfigMap for every member: it reaches the good one in normal time.
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "hostile"}})).unwrap();
    Api::<Namespace>::all(host.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "probe"}, "data": {"a": "b"}})).unwrap();
    let mut names: Vec<&str> = modes.iter().map(|(n, _)| *n).collect();
    names.push(member.name());
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "probe"},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "probe"}],
            "placement": {"clusterAffinity": {"clusterNames": names}}},
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(host.clone(), "hostile")
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    let started = Instant::now();
    Api::<ConfigMap>::namespaced(host.clone(), "hostile")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let in_member: Api<ConfigMap> = Api::namespaced(member.client().await, "hostile");
    eventually(
        &kcm,
        "the ConfigMap in member1",
        Duration::from_secs(30),
        || async { in_member.get_opt("probe").await.ok().flatten().is_some() },
    )
    .await;
    eprintln!("ConfigMap reached member1 after {:?}", started.elapsed());

    // Each hostile member is reported with the cause.
    let expect = [
        (
            "hostile-garbage",
            "CompleteAPIEnablements",
            "collected empty APIEnablements from the cluster: ",
        ),
        (
            "hostile-endless",
            "CompleteAPIEnablements",
            "exceeds the 67108864-byte list limit",
        ),
        (
            "hostile-huge",
            "CompleteAPIEnablements",
            "exceeds the 67108864-byte list limit",
        ),
        ("hostile-slow", "Ready", "ClusterNotReachable"),
    ];
    for (name, type_, says) in expect {
        eventually(
            &kcm,
            &format!("{name}'s {type_} condition saying {says:?}"),
            Duration::from_secs(120),
            || async {
                let c = clusters.get_opt(name).await.ok().flatten();
                c.and_then(|c| condition(&c, type_))
                    .is_some_and(|(status, reason, message)| {
                        status == "False" && (reason == says || message.contains(says))
                    })
            },
        )
        .await;
        let c = clusters.get(name).await.unwrap();
        eprintln!("{name}: {:?}", condition(&c, type_));
    }
    // Keep the hostile members busy a little longer, then check memory once more.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let peak = proc_status(kcm.pid(), "VmHWM");
    eprintln!("controller-manager peak RSS {} MiB", peak >> 20);
    assert!(peak < RSS_BOUND, "peak RSS {} MiB", peak >> 20);
}
