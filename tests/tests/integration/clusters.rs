//! Member clusters end to end against real API servers: `karmadactl join` / `unjoin` and the
//! `cluster` and `clusterStatus` controllers running in-process on the host.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use apimachinery::quantity::Quantity;
use k8s_openapi::api::core::v1::{Namespace, Node, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use karmada_apis::{Cluster, Work};
use karmada_controllers::cluster_status::metrics::cluster_metrics;
use karmada_controllers::members::MemberEvent;
use karmada_e2e::in_process::{self, Controllers, Harness, has_series, metric_sum};
use kube::api::{Api, Patch, PatchParams, PostParams};
use lariat::runtime::features::{FeatureGates, FeatureSpec, PreRelease};
use serde_json::json;
use testenv::{ApiServer, EnvOptions, TestEnv};

/// The feature gates the controllers read here, at Karmada's defaults.
static GATES: &[FeatureSpec] = &[FeatureSpec {
    name: "CustomizedClusterResourceModeling",
    default: true,
    pre_release: PreRelease::Beta,
    lock_to_default: false,
}];

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        full_members: 1,
        install_crds: true,
        ..Default::default()
    })
}

/// Polls `check` every 200 ms until it returns `Some`, failing after `timeout`.
async fn eventually<T>(what: &str, timeout: Duration, check: impl AsyncFnMut() -> Option<T>) -> T {
    karmada_e2e::wait::eventually(what, timeout, Duration::from_millis(200), check).await
}

/// The cluster and clusterStatus controllers, running in this process against the host, with
/// short status intervals and resource modeling on.
async fn start_control_plane(env: &TestEnv) -> Controllers {
    Harness::new(in_process::implemented(&["cluster", "clusterStatus"]))
        .settings(karmada_controllers::Settings {
            cluster_status_update_frequency: Duration::from_secs(1),
            cluster_success_threshold: Duration::from_secs(2),
            cluster_failure_threshold: Duration::from_secs(2),
            cluster_cache_sync_timeout: Duration::from_secs(30),
            enable_cluster_resource_modeling: true,
            skipped_propagating_namespaces: Vec::new(),
            feature_gates: FeatureGates::new(GATES),
            ..in_process::settings()
        })
        .start(env)
        .await
}

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// `karmadactl <command> <name>` against the host (context `host` of the environment's kubeconfig).
fn karmadactl_args(command: &str, name: &str) -> Vec<String> {
    vec![
        "karmadactl".to_string(),
        command.into(),
        name.into(),
        format!("--kubeconfig={}", path(&env().kubeconfig_path())),
        "--karmada-context=host".into(),
    ]
}

async fn join(member: &ApiServer, name: &str, extra: &[&str]) -> anyhow::Result<()> {
    let mut args = karmadactl_args("join", name);
    args.extend([
        format!("--cluster-kubeconfig={}", path(member.kubeconfig_path())),
        format!("--cluster-context={}", member.name()),
        "--token-wait=3s".into(),
    ]);
    args.extend(extra.iter().map(ToString::to_string));
    karmadactl::run(args).await
}

/// The error (as `{:#}` text) of `karmadactl join <name>` with the member kubeconfig `kubeconfig`.
async fn join_error(name: &str, kubeconfig: &std::path::Path) -> String {
    let mut args = karmadactl_args("join", name);
    args.push(format!("--cluster-kubeconfig={}", path(kubeconfig)));
    let err = karmadactl::run(args).await.unwrap_err();
    format!("{err:#}")
}

async fn unjoin(name: &str, member: Option<&ApiServer>) -> anyhow::Result<()> {
    let mut args = karmadactl_args("unjoin", name);
    args.push("--wait=120s".into());
    if let Some(m) = member {
        args.push(format!(
            "--cluster-kubeconfig={}",
            path(m.kubeconfig_path())
        ));
        args.push(format!("--cluster-context={}", m.name()));
    }
    karmadactl::run(args).await
}

fn ready(c: &Cluster) -> Option<(String, String)> {
    in_process::condition(&c.status.as_ref()?.conditions, "Ready").map(|(s, r, _)| (s, r))
}

fn taint_keys(c: &Cluster) -> Vec<String> {
    c.spec.taints.iter().map(|t| t.key.clone()).collect()
}

async fn wait_ready(
    api: &Api<Cluster>,
    name: &str,
    status: &str,
    reason: &str,
    timeout: Duration,
) -> Cluster {
    eventually(
        &format!("cluster {name} Ready={status} ({reason})"),
        timeout,
        || async {
            let c = api.get(name).await.ok()?;
            (ready(&c) == Some((status.to_string(), reason.to_string()))).then_some(c)
        },
    )
    .await
}

/// Waits for `name` to be Ready and untainted, then checks `cluster_ready_state` is 1.
async fn wait_ready_untainted(api: &Api<Cluster>, name: &str) {
    wait_ready(api, name, "True", "ClusterReady", Duration::from_secs(90)).await;
    eventually(
        &format!("{name} untainted"),
        Duration::from_secs(30),
        || async {
            api.get(name)
                .await
                .ok()
                .filter(|c| c.spec.taints.is_empty())
        },
    )
    .await;
    assert_eq!(ready_metric(name), 1.0);
}

fn ready_metric(cluster: &str) -> f64 {
    cluster_metrics()
        .expect("cluster metrics defined")
        .ready
        .with_label_values(&[cluster, cluster])
        .get()
}

/// Whether `metric{member_cluster="<cluster>"}` exists in the process registry.
fn has_cluster_series(metric: &str, cluster: &str) -> bool {
    has_series(metric, &[("member_cluster", cluster)])
}

/// Reasons of the Events recorded about Cluster `name`.
async fn cluster_event_reasons(host: &kube::Client, name: &str) -> Vec<String> {
    Api::<k8s_openapi::api::core::v1::Event>::namespaced(host.clone(), "default")
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("Cluster")
                && e.involved_object.name.as_deref() == Some(name)
        })
        .filter_map(|e| e.reason)
        .collect()
}

/// Requests this process sent to a member (lariat's `rest_client_requests_total{cluster=...}`).
fn member_requests(cluster: &str) -> f64 {
    metric_sum("rest_client_requests_total", &[("cluster", cluster)])
}

fn sum_allocatable(nodes: &[Node], resource: &str) -> i128 {
    nodes
        .iter()
        .filter_map(|n| n.status.as_ref()?.allocatable.as_ref()?.get(resource))
        .map(|q| i128::from(Quantity::from_k8s(q).unwrap().milli_value()))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn member_cluster_lifecycle() {
    let env = env();
    let host = env.host().client().await;
    let (m1, m2) = (&env.members()[0], &env.members()[1]);
    let plane = start_control_plane(env).await;
    let clusters: Api<Cluster> = Api::all(host.clone());

    // --- join the full member: Ready with version, APIs, node and resource summaries. ---
    join(
        m1,
        "member1",
        &[
            "--cluster-provider=kwok",
            "--cluster-region=local",
            "--cluster-zones=z1,z2",
        ],
    )
    .await
    .unwrap();
    wait_ready(
        &clusters,
        "member1",
        "True",
        "ClusterReady",
        Duration::from_secs(90),
    )
    .await;
    let m1_client = m1.client().await;
    let version = m1_client.apiserver_version().await.unwrap().git_version;
    let c = eventually(
        "member1 status collected, untainted",
        Duration::from_secs(60),
        || {
            let clusters = clusters.clone();
            let version = version.clone();
            async move {
                let c = clusters.get("member1").await.ok()?;
                let s = c.status.as_ref()?;
                (s.kubernetes_version == version
                    && s.node_summary.is_some()
                    && c.spec.taints.is_empty())
                .then_some(c)
            }
        },
    )
    .await;
    let _ = c.metadata.uid;
    assert_eq!(
        c.spec.sync_mode,
        karmada_apis::cluster::v1alpha1::ClusterSyncMode::Push
    );
    assert_eq!(c.spec.api_endpoint, m1.url());
    assert_eq!(c.spec.provider, "kwok");
    assert_eq!(c.spec.region, "local");
    assert_eq!(c.spec.zones, ["z1", "z2"]);
    assert!(
        c.metadata
            .finalizers
            .as_ref()
            .unwrap()
            .contains(&"karmada.io/cluster-controller".to_string())
    );
    let status = c.status.clone().unwrap();
    let gvs: Vec<&str> = status
        .api_enablements
        .iter()
        .map(|e| e.group_version.as_str())
        .collect();
    let mut sorted = gvs.clone();
    sorted.sort_unstable();
    assert_eq!(gvs, sorted, "apiEnablements sorted by group-version");
    let apps = status
        .api_enablements
        .iter()
        .find(|e| e.group_version == "apps/v1")
        .expect("apps/v1");
    assert!(
        apps.resources
            .iter()
            .any(|r| r.name == "deployments" && r.kind == "Deployment")
    );
    assert!(
        apps.resources.iter().all(|r| !r.name.contains('/')),
        "no subresources"
    );
    let core = status
        .api_enablements
        .iter()
        .find(|e| e.group_version == "v1")
        .expect("v1");
    assert!(
        core.resources
            .iter()
            .any(|r| r.name == "pods" && r.kind == "Pod")
    );
    let complete = status
        .conditions
        .iter()
        .find(|c| c.type_ == "CompleteAPIEnablements")
        .unwrap();
    assert_eq!(
        (complete.status.as_str(), complete.reason.as_str()),
        ("True", "Complete")
    );
    // Node and resource summaries match the kwok nodes.
    let nodes = Api::<Node>::all(m1_client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    assert!(!nodes.is_empty());
    let ready_nodes = nodes
        .iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count();
    let ns = status.node_summary.clone().unwrap();
    assert_eq!(ns.total_num as usize, nodes.len());
    assert_eq!(ns.ready_num as usize, ready_nodes);
    let rs = status.resource_summary.clone().unwrap();
    for r in ["cpu", "memory", "pods"] {
        let got = i128::from(
            Quantity::from_k8s(&rs.allocatable[r])
                .unwrap()
                .milli_value(),
        );
        assert_eq!(got, sum_allocatable(&nodes, r), "allocatable {r}");
    }
    // Execution namespace, member-side objects, host Secret.
    let es = Api::<Namespace>::all(host.clone())
        .get("karmada-es-member1")
        .await
        .unwrap();
    assert_eq!(es.metadata.labels.unwrap()["karmada.io/system"], "true");
    Api::<ServiceAccount>::namespaced(m1_client.clone(), "karmada-cluster")
        .get("karmada-member1")
        .await
        .unwrap();
    Api::<ClusterRole>::all(m1_client.clone())
        .get("karmada-controller-manager:karmada-member1")
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(m1_client.clone())
        .get("karmada-controller-manager:karmada-member1")
        .await
        .unwrap();
    let secret = Api::<Secret>::namespaced(host.clone(), "karmada-cluster")
        .get("member1")
        .await
        .unwrap();
    let data = secret.data.unwrap();
    assert!(!data["token"].0.is_empty() && !data["caBundle"].0.is_empty());
    assert_eq!(secret.metadata.owner_references.unwrap()[0].kind, "Cluster");
    assert_eq!(ready_metric("member1"), 1.0);
    let nodes_metric = cluster_metrics()
        .expect("cluster metrics defined")
        .node_number
        .with_label_values(&["member1", "member1"])
        .get();
    assert_eq!(nodes_metric as usize, nodes.len());

    // Resource models: every node lands in a grade (CustomizedClusterResourceModeling).
    let models = json!({"spec": {"resourceModels": [
        {"grade": 0, "ranges": [{"name": "cpu", "min": "0", "max": "1"}]},
        {"grade": 1, "ranges": [{"name": "cpu", "min": "1", "max": "1000000"}]}
    ]}});
    clusters
        .patch("member1", &PatchParams::default(), &Patch::Merge(&models))
        .await
        .unwrap();
    let node_count = nodes.len() as i64;
    eventually("allocatableModelings", Duration::from_secs(30), || async {
        let c = clusters.get("member1").await.ok()?;
        let m = c.status?.resource_summary?.allocatable_modelings;
        (m.len() == 2 && m.iter().map(|a| a.count).sum::<i64>() == node_count).then_some(())
    })
    .await;

    let reasons = cluster_event_reasons(&host, "member1").await;
    for r in ["CreateExecutionSpaceSucceed", "TaintClusterSucceed"] {
        assert!(
            reasons.iter().any(|x| x == r),
            "no {r} event in {reasons:?}"
        );
    }
    assert!(has_cluster_series(
        "cluster_sync_status_duration_seconds",
        "member1"
    ));

    // --- a second join of the same cluster is refused. ---
    let err = join(m1, "member1", &[]).await.unwrap_err().to_string();
    assert!(err.contains("has been registered"), "{err}");

    // The namespace join created in member1 is marked as created by join.
    let m1_namespace = Api::<Namespace>::all(m1_client.clone())
        .get("karmada-cluster")
        .await
        .unwrap();
    assert_eq!(
        m1_namespace.metadata.annotations.unwrap_or_default()["karmada-rs.io/created-by"],
        "karmadactl-join"
    );

    // --- member2 (no token controller: TokenRequest fallback), whose namespace exists already. ---
    in_process::ensure_namespace(&m2.client().await, "karmada-cluster").await;
    join(m2, "member2", &[]).await.unwrap();
    wait_ready_untainted(&clusters, "member2").await;

    // --- stop member2's API server: not ready after the threshold, tainted, metric 0. ---
    tokio::task::block_in_place(|| m2.stop());
    let c = wait_ready(
        &clusters,
        "member2",
        "False",
        "ClusterNotReachable",
        Duration::from_secs(60),
    )
    .await;
    let c =
        if taint_keys(&c).contains(&"cluster.karmada.io/not-ready".to_string()) {
            c
        } else {
            eventually(
                "member2 not-ready taint",
                Duration::from_secs(30),
                || async {
                    clusters.get("member2").await.ok().filter(|c| {
                        taint_keys(c).contains(&"cluster.karmada.io/not-ready".to_string())
                    })
                },
            )
            .await
        };
    assert_eq!(c.spec.taints[0].effect, "NoSchedule");
    eventually(
        "cluster_ready_state{member2} = 0",
        Duration::from_secs(10),
        || async { (ready_metric("member2") == 0.0).then_some(()) },
    )
    .await;
    // Bounded request rate to the dead endpoint (status every 1s here, watches back off).
    let before = member_requests("member2");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let sent = member_requests("member2") - before;
    eprintln!("requests to the stopped member2 in 10s: {sent}");
    assert!(sent < 60.0, "{sent} requests to a dead member in 10s");

    // --- start it again: Ready, taint removed. ---
    m2.start().await.unwrap();
    wait_ready_untainted(&clusters, "member2").await;

    // --- wrong token: authentication failed; fixed without restart (a reconnect, announced). ---
    let mut member_events = plane.members.subscribe();
    let secrets: Api<Secret> = Api::namespaced(host.clone(), "karmada-cluster");
    let good = secrets.get("member2").await.unwrap().data.unwrap()["token"].clone();
    let bogus = json!({"data": {"token": k8s_openapi::ByteString(b"not-a-valid-token".to_vec())}});
    secrets
        .patch("member2", &PatchParams::default(), &Patch::Merge(&bogus))
        .await
        .unwrap();
    let c = wait_ready(
        &clusters,
        "member2",
        "False",
        "ClusterAuthenticationFailed",
        Duration::from_secs(60),
    )
    .await;
    let msg = &c
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap()
        .message;
    assert!(msg.contains("authentication"), "{msg}");
    let fixed = json!({"data": {"token": good}});
    secrets
        .patch("member2", &PatchParams::default(), &Patch::Merge(&fixed))
        .await
        .unwrap();
    wait_ready(
        &clusters,
        "member2",
        "True",
        "ClusterReady",
        Duration::from_secs(60),
    )
    .await;
    let mut seen = Vec::new();
    while let Ok(e) = member_events.try_recv() {
        seen.push(e);
    }
    assert!(
        seen.contains(&MemberEvent::Disconnected("member2".into()))
            && seen.contains(&MemberEvent::Connected("member2".into())),
        "reconnects announced: {seen:?}"
    );

    // --- unjoin member1: Works and execution namespace gone, finalizer released, watches stopped. ---
    let works: Api<Work> = Api::namespaced(host.clone(), "karmada-es-member1");
    let work: Work = serde_json::from_value(json!({
        "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
        "metadata": {"name": "cm-work", "namespace": "karmada-es-member1"},
        "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}]}}
    }))
    .unwrap();
    works.create(&PostParams::default(), &work).await.unwrap();
    let member1 = plane.members.get("member1").expect("member1 connected");
    assert!(
        !member1.caches().started().is_empty(),
        "member1 has watches"
    );
    unjoin("member1", Some(m1)).await.unwrap();
    assert!(clusters.get_opt("member1").await.unwrap().is_none());
    assert!(
        Api::<Namespace>::all(host.clone())
            .get_opt("karmada-es-member1")
            .await
            .unwrap()
            .is_none()
    );
    assert!(works.get_opt("cm-work").await.unwrap().is_none());
    assert!(
        plane.members.get("member1").is_none(),
        "member1 disconnected"
    );
    assert!(
        member1.context().token().is_cancelled(),
        "member1 watches stopped"
    );
    assert!(secrets.get_opt("member1").await.unwrap().is_none());
    assert!(
        !has_cluster_series("cluster_ready_state", "member1"),
        "member1 series dropped"
    );
    assert!(!has_cluster_series(
        "cluster_sync_status_duration_seconds",
        "member1"
    ));
    let reasons = cluster_event_reasons(&host, "member1").await;
    assert!(
        reasons.iter().any(|x| x == "RemoveExecutionSpaceSucceed"),
        "{reasons:?}"
    );
    assert!(
        Api::<ServiceAccount>::namespaced(m1_client.clone(), "karmada-cluster")
            .get_opt("karmada-member1")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<ClusterRole>::all(m1_client.clone())
            .get_opt("karmada-controller-manager:karmada-member1")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<ClusterRoleBinding>::all(m1_client.clone())
            .get_opt("karmada-controller-manager:karmada-member1")
            .await
            .unwrap()
            .is_none()
    );
    // The namespace join created is deleted (terminating until its contents are gone).
    let m1_namespace = Api::<Namespace>::all(m1_client.clone())
        .get_opt("karmada-cluster")
        .await
        .unwrap();
    assert!(
        m1_namespace.is_none_or(|ns| ns.metadata.deletion_timestamp.is_some()),
        "member1's karmada-cluster namespace deleted"
    );

    // --- unjoin member2 without its kubeconfig. ---
    unjoin("member2", None).await.unwrap();
    assert!(clusters.get_opt("member2").await.unwrap().is_none());
    assert!(plane.members.get("member2").is_none());

    // --- join member2 again and unjoin it with its kubeconfig: the namespace that existed before
    // the first join stays. ---
    join(m2, "member2", &[]).await.unwrap();
    unjoin("member2", Some(m2)).await.unwrap();
    assert!(clusters.get_opt("member2").await.unwrap().is_none());
    let m2_client = m2.client().await;
    let m2_namespace = Api::<Namespace>::all(m2_client.clone())
        .get("karmada-cluster")
        .await
        .unwrap();
    assert!(
        m2_namespace.metadata.deletion_timestamp.is_none(),
        "member2's own karmada-cluster namespace kept"
    );
    assert!(
        Api::<ServiceAccount>::namespaced(m2_client.clone(), "karmada-cluster")
            .get_opt("karmada-member2")
            .await
            .unwrap()
            .is_none(),
        "what join created in it is gone"
    );
    plane.stop().await;
}

#[tokio::test]
async fn join_explains_an_unreachable_member() {
    let env = env();
    let dir = tempfile_dir("unreachable");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kc = dir.join("kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: dead\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\nusers:\n- name: dead\n  user:\n    token: x\ncontexts:\n- name: dead\n  context:\n    cluster: dead\n    user: dead\ncurrent-context: dead\n"
        ),
    )
    .unwrap();
    let msg = join_error("dead", &kc).await;
    assert!(
        msg.contains("cannot reach the member cluster dead"),
        "{msg}"
    );
    assert!(msg.contains(&port.to_string()), "{msg}");
    let host = env.host().client().await;
    assert!(
        Api::<Cluster>::all(host)
            .get_opt("dead")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn join_explains_missing_permissions_and_bad_names() {
    let env = env();
    let m2 = &env.members()[1];
    let admin = m2.client().await;
    // A member identity with no rights at all.
    let ns = "perm-test";
    let _ = Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await;
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), ns);
    let _ = sas
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "nobody"}})).unwrap(),
        )
        .await;
    let tr: k8s_openapi::api::authentication::v1::TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": []}})).unwrap();
    let token = sas
        .create_token_request("nobody", &PostParams::default(), &tr)
        .await
        .unwrap()
        .status
        .unwrap()
        .token
        .unwrap();
    let dir = tempfile_dir("noperm");
    let kc = dir.join("kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: m\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: m\n  user:\n    token: {token}\ncontexts:\n- name: m\n  context:\n    cluster: m\n    user: m\ncurrent-context: m\n",
            m2.url(),
            m2.pki().ca_cert.display()
        ),
    )
    .unwrap();
    let msg = join_error("noperm", &kc).await;
    assert!(msg.contains("permission denied"), "{msg}");

    let err = karmadactl::run([
        "karmadactl",
        "join",
        "Bad_Name",
        "--cluster-kubeconfig=/nonexistent",
    ])
    .await
    .unwrap_err();
    assert!(
        format!("{err:#}").contains("invalid cluster name"),
        "{err:#}"
    );
}

fn tempfile_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("karmadactl-test-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
