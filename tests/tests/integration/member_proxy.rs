//! Members behind proxies, against the real controller-manager binary and real proxy processes
//! (`test-proxy`, built from hack/tools/test-proxy: elazarl/goproxy for HTTP CONNECT, armon/go-socks5
//! for SOCKS5; it logs one JSON line per tunnel it opens).
//!
//! Each member is reachable **only through its proxy**: its Cluster's `apiEndpoint` is
//! `https://localhost:<port>` where `<port>` is a free port nothing listens on, and the proxy maps
//! that `host:port` (`--map`) to the member's real API server. A direct connection is refused; only a tunnel reaches the member, with TLS still verified against the
//! member's CA (its serving certificate names `localhost`). So a Ready member, a propagated
//! Deployment and its status coming back prove the controller-manager's member clients (health
//! checks, caches and watches, Work application, status collection) all went through the proxy,
//! and the proxy's log names each tunnel's target.
//!
//! - `member2` is joined by `karmadactl join` with a kubeconfig whose `server` is that endpoint and
//!   whose `proxy-url` names the SOCKS5 proxy: karmadactl itself goes through the proxy, and the
//!   Cluster gets the URL as `spec.proxyURL` (as Karmada's karmadactl does); member1 is joined
//!   directly and then patched to its endpoint and proxy;
//! - `member1` through an HTTP proxy, with `spec.proxyHeader` `X-Proxy-Token: t1,t2`: the proxy
//!   saw the header on the CONNECT requests (two values, as Karmada splits on commas);
//! - `member2` through a SOCKS5 proxy that requires a username and password (from the proxy
//!   URL's userinfo): the proxy saw the user;
//! - `member1-via-https` (member1 again) through an `https://` proxy whose certificate comes from
//!   member1's CA (the Cluster's TLS settings apply to the proxy, as in Go): Ready;
//! - `wrong-proxy` (a proxy port nothing listens on) and `socks-no-credentials` (the SOCKS5 proxy
//!   without the credentials it requires): `Ready=False`, `ClusterNotReachable`, with a message
//!   naming the proxy and what failed.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use karmada_apis::{Cluster, PropagationPolicy};
use karmada_e2e::controller_manager::{Kcm, free_port};
use karmada_e2e::wait::eventually_showing;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testenv::process::ManagedProcess;
use testenv::{ApiServer, EnvOptions, TestEnv};

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        full_members: 1,
        install_crds: true,
        ..Default::default()
    })
}

/// A running `test-proxy` and its log.
struct TestProxy {
    _process: ManagedProcess,
    log: PathBuf,
    port: u16,
}

impl TestProxy {
    fn start(env: &TestEnv, name: &str, args: &[String]) -> TestProxy {
        let bin = testenv::binaries::locate("test-proxy").unwrap_or_else(|e| {
            panic!("{e} (run hack/build-test-binaries.sh, or `make test-binaries`)")
        });
        let port = free_port();
        let log = env.dir().join(format!("test-proxy-{name}.log"));
        let mut all = vec![format!("--listen=127.0.0.1:{port}")];
        all.extend_from_slice(args);
        let process = ManagedProcess::spawn(name, &bin, &all, &log, &env.pid_file())
            .unwrap_or_else(|e| panic!("start test-proxy {name}: {e}"));
        let proxy = TestProxy {
            _process: process,
            log,
            port,
        };
        // Listening once its first log line is out.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !proxy.text().contains("listening on") {
            assert!(
                std::time::Instant::now() < deadline,
                "test-proxy {name} did not start:\n{}",
                proxy.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        proxy
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The tunnels it logged.
    fn tunnels(&self) -> Vec<Value> {
        self.text()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect()
    }
}

/// `https://localhost:<port>` with nothing listening on the port, and the `--map` argument that
/// sends a tunnel for it to `member`'s API server.
fn proxy_only_endpoint(member: &ApiServer) -> (String, String, String) {
    let port = free_port();
    let target = format!("localhost:{port}");
    let map = format!("--map={target}=127.0.0.1:{}", member.port());
    (format!("https://{target}"), target, map)
}

async fn eventually(what: &str, timeout: Duration, kcm: &Kcm, check: impl AsyncFnMut() -> bool) {
    let log = || format!("controller-manager log (tail):\n{}", kcm.log_tail(60));
    eventually_showing(what, timeout, Duration::from_millis(250), log, check).await;
}

fn ready(c: &Cluster) -> Option<(String, String, String)> {
    c.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    })
}

/// Points the joined Cluster `name` at `endpoint` through `proxy_url` with `headers`.
async fn route_through(host: &Client, name: &str, endpoint: &str, proxy_url: &str, headers: Value) {
    let patch = json!({"spec": {"apiEndpoint": endpoint, "proxyURL": proxy_url,
        "proxyHeader": headers}});
    Api::<Cluster>::all(host.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patch Cluster {name}: {e}"));
}

/// Registers Cluster `name` reaching `member` (credentials copied from its joined Secret) at
/// `endpoint` through `proxy_url`, with a Secret of its own owned by it.
async fn register_copy(host: &Client, name: &str, member: &str, endpoint: &str, proxy_url: &str) {
    let secrets: Api<Secret> = Api::namespaced(host.clone(), "karmada-cluster");
    let joined = secrets.get(member).await.unwrap();
    let cluster: Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"apiEndpoint": endpoint, "syncMode": "Push", "proxyURL": proxy_url,
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
        "data": joined.data,
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

/// A copy of `member`'s kubeconfig whose cluster entry has `server` and `proxy-url`.
fn proxied_kubeconfig(member: &ApiServer, server: &str, proxy_url: &str, dir: &Path) -> PathBuf {
    let mut kc = kube::config::Kubeconfig::read_from(member.kubeconfig_path()).unwrap();
    for named in &mut kc.clusters {
        let cluster = named.cluster.as_mut().unwrap();
        cluster.server = Some(server.to_string());
        cluster.proxy_url = Some(proxy_url.to_string());
    }
    let path = dir.join(format!("{}-through-proxy.kubeconfig", member.name()));
    std::fs::write(&path, serde_json::to_vec(&kc).unwrap()).unwrap();
    path
}

fn issue_proxy_cert(member: &ApiServer, dir: &Path) -> (PathBuf, PathBuf) {
    member
        .pki()
        .issue_serving("test-proxy", &["127.0.0.1"], dir)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn members_behind_http_https_and_socks5_proxies_join_propagate_and_report() {
    let env = env();
    let host = env.host().client().await;
    let (m1, m2) = (&env.members()[0], &env.members()[1]);

    let (m1_endpoint, m1_target, m1_map) = proxy_only_endpoint(m1);
    let http = TestProxy::start(env, "http-proxy", &["--mode=http".into(), m1_map]);
    let (m2_endpoint, m2_target, m2_map) = proxy_only_endpoint(m2);
    let socks = TestProxy::start(
        env,
        "socks5-proxy",
        &[
            "--mode=socks5".into(),
            "--user=karmada".into(),
            "--password=p@ss:word".into(),
            m2_map,
        ],
    );
    let (https_endpoint, https_target, https_map) = proxy_only_endpoint(m1);
    let (cert, key) = issue_proxy_cert(m1, env.dir());
    let https = TestProxy::start(
        env,
        "https-proxy",
        &[
            "--mode=http".into(),
            format!("--tls-cert={}", cert.display()),
            format!("--tls-key={}", key.display()),
            https_map,
        ],
    );

    karmada_e2e::karmadactl::join(env.host(), m1, &[])
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    // member2 is joined as a user whose kubeconfig reaches it only through the SOCKS5 proxy:
    // karmadactl itself goes through it, and the Cluster gets the kubeconfig's proxy-url.
    let m2_proxy_url = format!("socks5://karmada:p%40ss%3Aword@127.0.0.1:{}", socks.port);
    let m2_kubeconfig = proxied_kubeconfig(m2, &m2_endpoint, &m2_proxy_url, env.dir());
    karmada_e2e::karmadactl::join_with(env.host(), m2.name(), &m2_kubeconfig, &[])
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let joined = Api::<Cluster>::all(host.clone())
        .get(m2.name())
        .await
        .unwrap();
    assert_eq!(joined.spec.api_endpoint, m2_endpoint);
    assert_eq!(joined.spec.proxy_url, m2_proxy_url);
    assert!(
        socks
            .tunnels()
            .iter()
            .any(|t| t["user"] == "karmada" && t["target"] == m2_target.as_str()),
        "karmadactl join did not go through the SOCKS5 proxy:\n{}",
        socks.text()
    );
    // Before the controller-manager starts: its first connection already goes through the proxy.
    route_through(
        &host,
        m1.name(),
        &m1_endpoint,
        &format!("http://127.0.0.1:{}", http.port),
        json!({"X-Proxy-Token": "t1,t2"}),
    )
    .await;
    route_through(
        &host,
        m2.name(),
        &m2_endpoint,
        &m2_proxy_url,
        json!({"X-Not-For-Socks": "x"}),
    )
    .await;
    register_copy(
        &host,
        "member1-via-https",
        m1.name(),
        &https_endpoint,
        &format!("https://127.0.0.1:{}", https.port),
    )
    .await;
    let closed = free_port();
    register_copy(
        &host,
        "wrong-proxy",
        m2.name(),
        &m2_endpoint,
        &format!("http://127.0.0.1:{closed}"),
    )
    .await;
    register_copy(
        &host,
        "socks-no-credentials",
        m2.name(),
        &m2_endpoint,
        &format!("socks5://127.0.0.1:{}", socks.port),
    )
    .await;

    let kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--cluster-status-update-frequency=1s",
        ],
        &[],
    );
    let clusters: Api<Cluster> = Api::all(host.clone());
    for name in [m1.name(), m2.name(), "member1-via-https"] {
        eventually(
            &format!("{name} Ready through its proxy"),
            Duration::from_secs(90),
            &kcm,
            || async {
                clusters
                    .get_opt(name)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|c| ready(&c))
                    .is_some_and(|(s, _, _)| s == "True")
            },
        )
        .await;
    }

    // Wrong proxies: Ready=False, ClusterNotReachable, naming the proxy and the failure.
    let expect = [
        (
            "wrong-proxy",
            format!("cluster is not reachable through proxy http://127.0.0.1:{closed}: "),
            "cannot connect to the proxy: ",
        ),
        (
            "socks-no-credentials",
            format!(
                "cluster is not reachable through proxy socks5://127.0.0.1:{}: ",
                socks.port
            ),
            "SOCKS5 proxy refused: no acceptable authentication method",
        ),
    ];
    for (name, prefix, cause) in &expect {
        let cause = *cause;
        eventually(
            &format!("{name} Ready=False saying {cause:?}"),
            Duration::from_secs(60),
            &kcm,
            || async {
                clusters
                    .get_opt(name)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|c| ready(&c))
                    .is_some_and(|(status, reason, message)| {
                        status == "False"
                            && reason == "ClusterNotReachable"
                            && message.starts_with(prefix.as_str())
                            && message.contains(cause)
                            && !message.contains("ServiceError")
                    })
            },
        )
        .await;
        let c = clusters.get(name).await.unwrap();
        let (_, _, message) = ready(&c).unwrap();
        eprintln!("{name}: {message}");
        assert!(
            message.contains(&format!("tunnel to {m2_target}: ")),
            "{message}"
        );
        assert!(
            !message[prefix.len()..].starts_with("proxy "),
            "the proxy is named once: {message}"
        );
        if *name == "wrong-proxy" {
            assert!(message.contains("Connection refused"), "{message}");
        }
    }

    // A Deployment propagated to both members lands in both and its status comes home (member1
    // runs the Deployment controller; member2 has none, so only member1's replicas count).
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "proxied"}})).unwrap();
    Api::<Namespace>::all(host.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }))
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(host.clone(), "proxied");
    deployments
        .create(&PostParams::default(), &deploy)
        .await
        .unwrap();
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "placement": {
                "clusterAffinity": {"clusterNames": [m1.name(), m2.name()]},
                "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
            },
        },
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(host.clone(), "proxied")
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    for m in env.members() {
        let api: Api<Deployment> = Api::namespaced(m.client().await, "proxied");
        eventually(
            &format!("proxied/web in {}", m.name()),
            Duration::from_secs(60),
            &kcm,
            || async { api.get_opt("web").await.ok().flatten().is_some() },
        )
        .await;
    }
    eventually(
        "the template's status showing member1's 2 updated replicas",
        Duration::from_secs(90),
        &kcm,
        || async {
            deployments.get("web").await.ok().is_some_and(|d| {
                let s = d.status.unwrap_or_default();
                s.replicas == Some(2) && s.updated_replicas == Some(2)
            })
        },
    )
    .await;

    // The proxies' logs: every tunnel went to the proxy-only endpoint, with the headers.
    let http_tunnels = http.tunnels();
    assert!(!http_tunnels.is_empty(), "no tunnel through the HTTP proxy");
    for t in &http_tunnels {
        assert_eq!(t["target"], m1_target.as_str(), "{t}");
        assert_eq!(t["dialed"], format!("127.0.0.1:{}", m1.port()), "{t}");
        assert_eq!(t["headers"]["X-Proxy-Token"], json!(["t1", "t2"]), "{t}");
    }
    let socks_tunnels = socks.tunnels();
    let (mine, refused): (Vec<_>, Vec<_>) =
        socks_tunnels.iter().partition(|t| t["user"] == "karmada");
    assert!(!mine.is_empty(), "no tunnel through the SOCKS5 proxy");
    for t in &mine {
        assert_eq!(t["target"], m2_target.as_str(), "{t}");
    }
    assert!(
        refused.is_empty(),
        "the SOCKS5 proxy opened tunnels without credentials: {refused:?}"
    );
    let https_tunnels = https.tunnels();
    assert!(
        !https_tunnels.is_empty(),
        "no tunnel through the https proxy"
    );
    for t in &https_tunnels {
        assert_eq!(t["target"], https_target.as_str(), "{t}");
    }
    eprintln!(
        "tunnels: http {}, socks5 {}, https {}",
        http_tunnels.len(),
        mine.len(),
        https_tunnels.len()
    );
}
