//! Pull-mode registration end to end, as a user does it: `karmadactl token create
//! --print-register-command` on the control plane, `karmadactl register` against the member with
//! that command line; the agent's CSRs are approved by the controller-manager's
//! `agentcsrapproving` and signed by the host's kube-controller-manager; the agent (a real process)
//! runs with the resulting kubeconfig, its Cluster becomes Ready and a Deployment + policy land in
//! it. Refused, with nothing changed: an expired token, a CSR with the wrong organization, a second
//! registration of the same name. The agent's effective rights on the control plane (access
//! reviews as the agent) are confined to its own cluster. `karmadactl unregister` removes it all.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{Event, Namespace, Secret};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::jiff::Timestamp;
use karmada_apis::cluster::v1alpha1::ClusterSyncMode;
use karmada_apis::{Cluster, PropagationPolicy, Work};
use karmada_e2e::controller_manager::{Kcm, agent_binary};
use karmada_e2e::wait::eventually_showing;
use karmadactl::bootstrap::{Token, certificate_request, client_of, kubeconfig};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "pull-register";

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 1,
        install_crds: true,
        ..Default::default()
    })
}

async fn eventually(what: &str, procs: &[&Kcm], check: impl AsyncFnMut() -> bool) {
    let logs = || {
        let logs: Vec<String> = procs.iter().map(|p| p.log()).collect();
        format!("logs:\n{}", logs.join("\n---\n"))
    };
    eventually_showing(what, WAIT, Duration::from_millis(250), logs, check).await;
}

async fn karmadactl(args: &[String]) -> anyhow::Result<()> {
    let mut all = vec!["karmadactl".to_string()];
    all.extend(args.iter().cloned());
    karmadactl::run(all).await
}

/// `karmadactl register …` as printed by `token create`, against member1, plus `extra`.
async fn register(printed: &str, member_kc: &Path, extra: &[&str]) -> anyhow::Result<()> {
    let mut args: Vec<String> = printed
        .split_whitespace()
        .skip(1)
        .map(str::to_owned)
        .collect();
    args.push(format!("--kubeconfig={}", member_kc.display()));
    args.push("--cluster-name=member1".into());
    args.push("--skip-agent-deployment".into());
    args.extend(extra.iter().map(|s| (*s).to_string()));
    karmadactl(&args).await
}

/// Whether the agent may `verb` `resource` (`group/resource[/sub]`) named `name` in `namespace`.
async fn can_i(agent: &Client, verb: &str, resource: &str, namespace: &str, name: &str) -> bool {
    let (group, rest) = resource.split_once('/').unwrap();
    let (resource, sub) = rest
        .split_once('/')
        .map_or((rest, None), |(r, s)| (r, Some(s)));
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.into()),
                resource: Some(resource.into()),
                subresource: sub.map(Into::into),
                verb: Some(verb.into()),
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<SelfSubjectAccessReview>::all(agent.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap()
        .allowed
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn register_a_pull_cluster_with_a_bootstrap_token() {
    let env = env();
    let host = env.host().client().await;
    let member1 = env.member("member1").unwrap();
    let member = member1.client().await;
    let host_kc = env.host().kubeconfig_path().to_path_buf();
    let member_kc = member1.kubeconfig_path().to_path_buf();
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
    // What Karmada's init sets up for tokens (the cluster-info ConfigMap and RBAC).
    karmadactl::bootstrap::ensure_control_plane_bootstrap(
        &host,
        env.host().url(),
        &env.host().ca_pem().unwrap(),
    )
    .await
    .unwrap();
    let printed = karmadactl::create_token(karmadactl::TokenCreateArgs {
        control_plane: karmadactl_cli_cp(&host_kc),
        print_register_command: true,
        ttl: Duration::from_secs(600),
        usages: vec!["signing".into(), "authentication".into()],
        groups: vec![karmadactl::bootstrap::DEFAULT_TOKEN_GROUP.into()],
        description: String::new(),
    })
    .await
    .unwrap();
    assert!(
        printed.starts_with("karmadactl register 127.0.0.1:"),
        "{printed}"
    );
    assert!(
        printed.contains("--discovery-token-ca-cert-hash sha256:"),
        "{printed}"
    );
    let token = Token::parse(printed.split_whitespace().nth(4).unwrap()).unwrap();

    let agent_role = "system:karmada:member1:agent";
    let roles: Api<ClusterRole> = Api::all(host.clone());
    let member_secrets: Api<Secret> = Api::namespaced(member.clone(), "karmada-system");

    // An expired token: never signed into cluster-info, refused at discovery; nothing changes.
    let expired = Token::generate().unwrap();
    let secret = expired.to_secret(
        Some("2020-01-01T00:00:00Z"),
        "",
        &["signing".into(), "authentication".into()],
        &[karmadactl::bootstrap::DEFAULT_TOKEN_GROUP.into()],
    );
    Api::<Secret>::namespaced(host.clone(), "kube-system")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let with_expired = printed.replace(&token.to_string(), &expired.to_string());
    let err = register(&with_expired, &member_kc, &["--discovery-timeout=3s"])
        .await
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("is invalid for this cluster or it has expired"),
        "{err:#}"
    );
    assert!(roles.get_opt(agent_role).await.unwrap().is_none());
    assert!(
        member_secrets
            .get_opt("karmada-kubeconfig")
            .await
            .unwrap()
            .is_none()
    );

    // A CSR with the wrong organization, posted with the valid token: not approved, and an Event
    // says why.
    let bootstrap = client_of(
        kubeconfig(
            env.host().url(),
            "karmada-apiserver",
            Some(&env.host().ca_pem().unwrap()),
            Some(("bootstrap", json!({"token": token.to_string()}))),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    let (request, _) = certificate_request("system:karmada:agent:member1", "system:wrong").unwrap();
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"name": "wrong-organization"},
        "spec": {
            "request": k8s_openapi::ByteString(request.into_bytes()),
            "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["digital signature", "key encipherment", "client auth"],
        },
    }))
    .unwrap();
    Api::<CertificateSigningRequest>::all(bootstrap.clone())
        .create(&PostParams::default(), &csr)
        .await
        .unwrap();
    let events: Api<Event> = Api::namespaced(host.clone(), "default");
    eventually("the wrong-organization CSR's event", &[&cm], || async {
        events
            .list(&ListParams::default().fields("involvedObject.name=wrong-organization"))
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("AgentCSRNotApproved")
                    && e.message
                        .as_deref()
                        .unwrap_or_default()
                        .contains("subject organization is not system:karmada:agents")
            })
    })
    .await;
    let refused = Api::<CertificateSigningRequest>::all(host.clone())
        .get("wrong-organization")
        .await
        .unwrap();
    let status = refused.status.unwrap_or_default();
    assert!(status.conditions.unwrap_or_default().is_empty());
    assert!(status.certificate.is_none());

    // Register: discovery, the RBAC generator's and the agent's certificates, the agent's RBAC.
    register(&printed, &member_kc, &["--discovery-timeout=60s"])
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{}", cm.log()));
    assert!(roles.get_opt(agent_role).await.unwrap().is_some());
    let csrs = Api::<CertificateSigningRequest>::all(host.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let agent_csr = csrs
        .items
        .iter()
        .find(|c| c.metadata.name.as_deref().unwrap().starts_with("member1-"))
        .expect("the agent's CSR");
    let approved = agent_csr
        .status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap();
    assert_eq!(approved[0].type_, "Approved");
    assert_eq!(approved[0].reason.as_deref(), Some("AutoApproved"));
    assert!(
        csrs.items.iter().all(|c| !c
            .metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("agent-rbac-generator-")),
        "the RBAC generator's CSR is deleted"
    );
    let secret = member_secrets.get("karmada-kubeconfig").await.unwrap();
    let agent_kc_text = secret.data.unwrap()["karmada-kubeconfig"].0.clone();
    let agent_kc = env.dir().join("agent-karmada-kubeconfig");
    std::fs::write(&agent_kc, &agent_kc_text).unwrap();
    let agent_client = client_of(
        kube::config::Kubeconfig::from_yaml(std::str::from_utf8(&agent_kc_text).unwrap()).unwrap(),
    )
    .await
    .unwrap();

    // The agent, with that kubeconfig, registers member1 in Pull mode.
    let start_agent = |extra: &[&str]| {
        let mut args = vec![
            format!("--karmada-kubeconfig={}", agent_kc.display()),
            "--cluster-name=member1".into(),
            format!("--cluster-api-endpoint={}", member1.url()),
            "--leader-elect=false".into(),
            "--cluster-status-update-frequency=1s".into(),
            "--enable-cluster-resource-modeling=false".into(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Kcm::start_program(agent_binary(), &member_kc, &args, &[])
    };
    let mut agent = start_agent(&[]);
    let clusters: Api<Cluster> = Api::all(host.clone());
    eventually("member1 Ready", &[&cm, &agent], || async {
        clusters.get_opt("member1").await.unwrap().is_some_and(|c| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        })
    })
    .await;
    assert_eq!(
        clusters.get("member1").await.unwrap().spec.sync_mode,
        ClusterSyncMode::Pull
    );

    // A Deployment and a policy land in it.
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(host.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let deploy: Deployment = serde_json::from_value(json!({
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
        .create(&PostParams::default(), &deploy)
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
    let in_member: Api<Deployment> = Api::namespaced(member.clone(), NS);
    eventually("web in member1", &[&cm, &agent], || async {
        in_member.get_opt("web").await.unwrap().is_some()
    })
    .await;

    // The agent's rights on the control plane: its own cluster, Lease, Secrets and execution
    // namespace; not another cluster's, not other namespaces' Works or Secrets.
    let es = "karmada-es-member1";
    for (verb, resource, ns, name) in [
        ("get", "cluster.karmada.io/clusters", "", "member1"),
        ("patch", "cluster.karmada.io/clusters/status", "", "member1"),
        (
            "patch",
            "coordination.k8s.io/leases",
            "karmada-cluster",
            "member1",
        ),
        (
            "update",
            "coordination.k8s.io/leases",
            "karmada-system",
            "karmada-agent-member1",
        ),
        ("list", "work.karmada.io/works", es, ""),
        ("update", "work.karmada.io/works/status", es, "any"),
    ] {
        assert!(
            can_i(&agent_client, verb, resource, ns, name).await,
            "{verb} {resource} {ns}/{name}"
        );
    }
    for (verb, resource, ns, name) in [
        ("get", "cluster.karmada.io/clusters", "", "member2"),
        ("delete", "cluster.karmada.io/clusters", "", "member2"),
        (
            "update",
            "cluster.karmada.io/clusters/status",
            "",
            "member2",
        ),
        ("update", "cluster.karmada.io/clusters", "", "member1"),
        ("list", "work.karmada.io/works", "karmada-es-member2", ""),
        ("create", "work.karmada.io/works", NS, "x"),
        ("get", "/secrets", "karmada-cluster", "member2"),
        ("get", "/secrets", "karmada-cluster", "member1"),
        ("list", "/secrets", "kube-system", ""),
        (
            "update",
            "coordination.k8s.io/leases",
            "karmada-system",
            "karmada-controller-manager",
        ),
        (
            "patch",
            "coordination.k8s.io/leases",
            "karmada-cluster",
            "member2",
        ),
        ("create", "/events", "default", ""),
        ("create", "policy.karmada.io/propagationpolicies", NS, "x"),
        (
            "approve",
            "certificates.k8s.io/certificatesigningrequests/approval",
            "",
            "x",
        ),
    ] {
        assert!(
            !can_i(&agent_client, verb, resource, ns, name).await,
            "the agent may {verb} {resource} {ns}/{name}"
        );
    }

    // A second registration of the same name (another namespace in the member) is refused and
    // changes nothing.
    let err = register(
        &printed,
        &member_kc,
        &["--discovery-timeout=60s", "--namespace=karmada-two"],
    )
    .await
    .unwrap_err();
    assert!(
        format!("{err:#}").contains("member1 already exists"),
        "{err:#}"
    );
    assert!(roles.get_opt(agent_role).await.unwrap().is_some());
    assert!(
        Api::<Secret>::namespaced(member.clone(), "karmada-two")
            .get_opt("karmada-kubeconfig")
            .await
            .unwrap()
            .is_none()
    );

    // certRotation (off by default): an agent run with it renews its certificate in the Secret
    // (threshold 1: due at once) through a CSR of its own that the controller-manager approves and
    // the host signs; the new certificate has the same subject and works.
    agent.signal(libc::SIGTERM);
    agent
        .wait_exit(Duration::from_secs(20))
        .await
        .expect("agent stops");
    let old_cert = AgentCert::of(&agent_kc_text);
    let rotating = start_agent(&[
        "--controllers=*,certRotation",
        "--cert-rotation-checking-interval=2s",
        "--cert-rotation-remaining-time-threshold=1",
    ]);
    let current = || async {
        let secret = member_secrets.get("karmada-kubeconfig").await.unwrap();
        secret.data.unwrap()["karmada-kubeconfig"].0.clone()
    };
    eventually(
        "the agent's certificate renewed in its Secret",
        &[&cm, &rotating],
        || async { AgentCert::of(&current().await) != old_cert },
    )
    .await;
    drop(rotating);
    let renewed = current().await;
    let new_cert = AgentCert::of(&renewed);
    assert_eq!(new_cert.subject, old_cert.subject);
    let renewal = Api::<CertificateSigningRequest>::all(host.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|c| {
            c.status
                .as_ref()
                .and_then(|s| s.certificate.as_ref())
                .is_some_and(|pem| AgentCert::of_pem(&pem.0) == new_cert)
        })
        .expect("the renewal's CSR");
    assert!(
        renewal
            .metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("member1-")
    );
    assert_eq!(
        renewal.spec.username.as_deref(),
        Some("system:karmada:agent:member1"),
        "the agent asked as itself"
    );
    let renewed_client = client_of(
        kube::config::Kubeconfig::from_yaml(std::str::from_utf8(&renewed).unwrap()).unwrap(),
    )
    .await
    .unwrap();
    assert!(
        can_i(
            &renewed_client,
            "get",
            "cluster.karmada.io/clusters",
            "",
            "member1"
        )
        .await
    );
    std::fs::write(&agent_kc, &renewed).unwrap();
    let agent = start_agent(&[]);

    // Unregister: Works (the agent removes what they applied), the Cluster, the RBAC, the member's
    // objects.
    let started = Timestamp::now();
    karmadactl(&[
        "unregister".into(),
        "member1".into(),
        format!("--cluster-kubeconfig={}", member_kc.display()),
        format!("--karmada-config={}", host_kc.display()),
    ])
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", agent.log()));
    assert!(clusters.get_opt("member1").await.unwrap().is_none());
    assert!(roles.get_opt(agent_role).await.unwrap().is_none());
    assert!(
        member_secrets
            .get_opt("karmada-kubeconfig")
            .await
            .unwrap()
            .is_none()
    );
    assert!(in_member.get_opt("web").await.unwrap().is_none());
    assert!(
        Api::<Work>::namespaced(host.clone(), es)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    eprintln!(
        "unregister took {}",
        Timestamp::now().duration_since(started)
    );
    drop(agent);
    drop(cm);
}

/// The client certificate of a kubeconfig's current user: its PEM and subject.
#[derive(Debug, PartialEq, Eq)]
struct AgentCert {
    pem: Vec<u8>,
    subject: String,
}

impl AgentCert {
    fn of(kubeconfig: &[u8]) -> Self {
        let kc =
            kube::config::Kubeconfig::from_yaml(std::str::from_utf8(kubeconfig).unwrap()).unwrap();
        let data = kc.auth_infos[0]
            .auth_info
            .as_ref()
            .unwrap()
            .client_certificate_data
            .clone()
            .unwrap();
        use base64::Engine;
        Self::of_pem(
            &base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap(),
        )
    }

    fn of_pem(pem: &[u8]) -> Self {
        let der = karmadactl::bootstrap::pem_certificates(pem)
            .unwrap()
            .remove(0);
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        Self {
            pem: pem.to_vec(),
            subject: cert.subject().to_string(),
        }
    }
}

fn karmadactl_cli_cp(kubeconfig: &Path) -> karmadactl::ControlPlaneArgs {
    karmadactl::ControlPlaneArgs {
        kubeconfig: Some(kubeconfig.to_path_buf()),
        karmada_context: None,
    }
}
