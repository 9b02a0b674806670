//! The agent Deployments a user gets, run exactly as written ([`karmada_e2e::pod_run`]: the
//! container's command line, environment, mounts, ServiceAccount and probes; only mount paths are
//! rewritten to the folders standing in for them):
//!
//! - `karmadactl register` without `--skip-agent-deployment`: register creates the `karmada-agent`
//!   Deployment in member1 and waits for its rollout; this test plays the kubelet meanwhile (reads the
//!   Deployment back from member1, runs its container, and writes the rollout status once the
//!   readiness probe answers), so register completes as it does for a user. The agent then registers
//!   member1 (Ready on the host, its leader-election Lease held), serves its probes and every port
//!   the manifest declares, and applies a Work in member1.
//! - `charts/karmada-agent` with the values its README gives (`clusterName`, `--set-file
//!   karmadaKubeconfig.content`): the Karmada side applied to the host, the member side to member2,
//!   its Deployment run the same way: probes answer, member2 is Ready.
// test-runner: alone. The Deployments run as written bind their fixed ports (8080, 10357) on every
// address of this machine; the other file that does so must not run beside this one.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use karmada_apis::{Cluster, PropagationPolicy};
use karmada_e2e::controller_manager::Kcm;
use karmada_e2e::pod_run::{Pod, ProbeKind};
use karmada_e2e::tools::{helm_template, helm_template_args, kubectl_apply};
use karmada_e2e::wait::eventually_showing;
use kube::api::{Api, PostParams};
use serde_json::json;
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "agent-deployments";

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        install_crds: true,
        ..Default::default()
    })
}

fn chart(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../charts")
        .join(name)
}

async fn eventually(what: &str, cm: &Kcm, pod: &Pod, check: impl AsyncFnMut() -> bool) {
    let logs = || {
        format!(
            "controller-manager log:\n{}\n--- agent log:\n{}",
            cm.log_tail(40),
            pod.log_tail(60)
        )
    };
    eventually_showing(what, WAIT, Duration::from_millis(250), logs, check).await;
}

fn ready(c: &Cluster) -> bool {
    c.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// The Deployment `name` in `namespace`, once it exists (`None` after [`WAIT`]).
async fn deployment_when_created(api: &Api<Deployment>, name: &str) -> Option<Deployment> {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if let Some(d) = api.get_opt(name).await.unwrap() {
            return Some(d);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

/// Probes, ports and metrics of a running agent, as its manifest names them.
async fn assert_serves(pod: &mut Pod) {
    let readiness = pod.wait_probe(ProbeKind::Readiness, WAIT).await;
    let liveness = pod.wait_probe(ProbeKind::Liveness, WAIT).await;
    eprintln!(
        "{}: readiness {} {} and liveness {} {} answer",
        pod.name, readiness.addr, readiness.path, liveness.addr, liveness.path
    );
    pod.assert_ports_served();
    let metrics = pod.resolve_port(
        &k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("metrics".into()),
    );
    let (status, body) = pod
        .get(metrics, "/metrics")
        .unwrap_or_else(|| panic!("{}: nothing answers /metrics on {metrics}", pod.name));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("# TYPE"), "{body}");
}

/// The agent's leader-election Lease on the host is held.
async fn assert_leader(host: &kube::Client, namespace: &str, cluster: &str, cm: &Kcm, pod: &Pod) {
    let leases: Api<Lease> = Api::namespaced(host.clone(), namespace);
    let name = format!("karmada-agent-{cluster}");
    eventually(
        &format!("Lease {namespace}/{name} held"),
        cm,
        pod,
        || async {
            leases
                .get_opt(&name)
                .await
                .unwrap()
                .and_then(|l| l.spec?.holder_identity)
                .is_some_and(|h| !h.is_empty())
        },
    )
    .await;
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: both agents share the controller-manager"
)]
async fn register_and_chart_agent_deployments_run_as_written() {
    // Built before register starts its rollout clock.
    karmada_e2e::controller_manager::agent_binary();
    let started = Instant::now();
    let env = env();
    let host = env.host().client().await;
    let host_kc = env.host().kubeconfig_path().to_path_buf();
    let member1 = env.member("member1").unwrap();
    let member2 = env.member("member2").unwrap();
    let cm_kc = env
        .host()
        .user_kubeconfig("e2e-karmada-controller-manager")
        .unwrap();
    let cm = Kcm::start(
        &cm_kc,
        &[
            "--leader-elect=false",
            "--cluster-status-update-frequency=1s",
            "--controllers=*",
        ],
        &[],
    );
    let clusters: Api<Cluster> = Api::all(host.clone());

    // --- karmadactl register, agent Deployment included ------------------------------------------
    karmadactl::bootstrap::ensure_control_plane_bootstrap(
        &host,
        env.host().url(),
        &env.host().ca_pem().unwrap(),
    )
    .await
    .unwrap();
    let printed = karmadactl::create_token(karmadactl::TokenCreateArgs {
        control_plane: karmadactl::ControlPlaneArgs {
            kubeconfig: Some(host_kc.clone()),
            karmada_context: None,
        },
        print_register_command: true,
        ttl: Duration::from_secs(600),
        usages: vec!["signing".into(), "authentication".into()],
        groups: vec![karmadactl::bootstrap::DEFAULT_TOKEN_GROUP.into()],
        description: String::new(),
    })
    .await
    .unwrap();
    let mut argv: Vec<String> = printed.split_whitespace().map(str::to_owned).collect();
    argv.extend([
        format!("--kubeconfig={}", member1.kubeconfig_path().display()),
        "--cluster-name=member1".into(),
        "--discovery-timeout=60s".into(),
    ]);
    let member1_client = member1.client().await;
    let member1_deployments: Api<Deployment> =
        Api::namespaced(member1_client.clone(), "karmada-system");
    // register waits for the rollout; the kubelet's part runs beside it.
    let (registered, pod) = tokio::join!(karmadactl::run(argv), async {
        let d = deployment_when_created(&member1_deployments, "karmada-agent").await?;
        let mut pod = Pod::start(member1, &d, "karmada-agent").await;
        pod.wait_probe(ProbeKind::Readiness, WAIT).await;
        pod.report_available(&member1_client).await;
        Some(pod)
    });
    registered.unwrap_or_else(|e| panic!("karmadactl register: {e:#}\n{}", cm.log_tail(40)));
    let mut pod = pod.expect("register created the karmada-agent Deployment in member1");
    eprintln!("register, agent running: {:?}", started.elapsed());
    eventually("member1 Ready", &cm, &pod, || async {
        clusters
            .get_opt("member1")
            .await
            .unwrap()
            .is_some_and(|c| ready(&c))
    })
    .await;
    assert_serves(&mut pod).await;
    assert_leader(&host, "karmada-system", "member1", &cm, &pod).await;

    // A Work is applied in member1.
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(host.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let web: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }))
    .unwrap();
    Api::<Deployment>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &web)
        .await
        .unwrap();
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "placement": {"clusterAffinity": {"clusterNames": ["member1"]}},
        },
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    let in_member1: Api<Deployment> = Api::namespaced(member1_client.clone(), NS);
    eventually("web applied in member1", &cm, &pod, || async {
        in_member1.get_opt("web").await.unwrap().is_some()
    })
    .await;
    // It stops cleanly on SIGTERM, as on the pod's deletion; it must also give its ports back:
    // outside a pod the next agent shares this network namespace, and register's manifest binds
    // every address.
    pod.signal(libc::SIGTERM);
    let status = pod.wait_exit(Duration::from_secs(30)).await.expect("exits");
    assert_eq!(Kcm::code(status), Some(0), "{}", pod.log_tail(40));
    drop(pod);
    eprintln!("register's agent done: {:?}", started.elapsed());

    // --- charts/karmada-agent, as its README installs it --------------------------------------
    let karmada_side = helm_template(
        &chart("karmada-agent"),
        "karmada-agent",
        "karmada-system",
        &["clusterName=member2", "target=karmadaApiServer"],
    )
    .unwrap();
    kubectl_apply(&host_kc, &karmada_side).unwrap();
    let agent_kc = env
        .host()
        .user_kubeconfig_in("system:karmada:agent:member2", &["system:karmada:agents"])
        .unwrap();
    let set_file = format!("karmadaKubeconfig.content={}", agent_kc.display());
    let member_side = helm_template_args(
        &chart("karmada-agent"),
        "karmada-agent",
        "karmada-system",
        &["--set", "clusterName=member2", "--set-file", &set_file],
    )
    .unwrap();
    // helm install --create-namespace
    let system: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "karmada-system"}})).unwrap();
    let member2_client = member2.client().await;
    Api::<Namespace>::all(member2_client.clone())
        .create(&PostParams::default(), &system)
        .await
        .unwrap();
    kubectl_apply(member2.kubeconfig_path(), &member_side).unwrap();
    let d = Api::<Deployment>::namespaced(member2_client.clone(), "karmada-system")
        .get("karmada-agent")
        .await
        .unwrap();
    let mut chart_pod = Pod::start(member2, &d, "karmada-agent").await;
    assert_serves(&mut chart_pod).await;
    eventually("member2 Ready", &cm, &chart_pod, || async {
        clusters
            .get_opt("member2")
            .await
            .unwrap()
            .is_some_and(|c| ready(&c))
    })
    .await;
    assert_leader(&host, "karmada-system", "member2", &cm, &chart_pod).await;

    chart_pod.signal(libc::SIGTERM);
    let status = chart_pod
        .wait_exit(Duration::from_secs(30))
        .await
        .expect("exits");
    assert_eq!(Kcm::code(status), Some(0), "{}", chart_pod.log_tail(40));
    eprintln!("total: {:?}", started.elapsed());
    drop(cm);
}
