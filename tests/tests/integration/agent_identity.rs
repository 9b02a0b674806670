//! A compromised member or karmada-agent must never act as another cluster, another user or the
//! controller-manager. Every attack is made with the agent's real identity on a real API server (a
//! client certificate signed by the API server's CA: `O=system:karmada:agents`,
//! `CN=system:karmada:agent:member1`) under exactly what `karmadactl register` grants (its RBAC and
//! the `karmada-agent-restriction` admission policy), and is refused by the API server; the
//! agent's own operations still work. The controller-manager (the real binary) approves the
//! agent's own renewal CSR only, and never uses a Secret that belongs to another Cluster: no
//! connection reaches the endpoint a Cluster names with it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Secret};
use karmada_apis::Cluster;
use karmada_e2e::controller_manager::Kcm;
use karmada_e2e::wait::eventually_showing;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(60);
const AGENT: &str = "system:karmada:agent:member1";
const AGENTS: &str = "system:karmada:agents";

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 0,
        install_crds: true,
        ..Default::default()
    })
}

async fn client_of(path: &std::path::Path) -> Client {
    let kc = kube::config::Kubeconfig::read_from(path).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    Client::try_from(config).unwrap()
}

async fn eventually(what: &str, kcm: &Kcm, check: impl AsyncFnMut() -> bool) {
    let every = Duration::from_millis(200);
    eventually_showing(what, WAIT, every, || kcm.log_tail(80), check).await;
}

/// The API server refused `result` with 403; `layer` (when given) is in the message.
fn refused<T: std::fmt::Debug>(what: &str, result: Result<T, kube::Error>, layer: Option<&str>) {
    match result {
        Err(kube::Error::Api(s)) if s.code == 403 => {
            if let Some(layer) = layer {
                assert!(s.message.contains(layer), "{what}: {}", s.message);
            }
        }
        other => panic!("{what}: expected 403, got {other:?}"),
    }
}

/// The admin's setup: what `karmadactl register` creates for member1 (RBAC and the admission
/// policy) and what Karmada's init creates for agents (the renewal approval right).
async fn setup(host: &Client) {
    karmadactl::bootstrap::ensure_control_plane_bootstrap(
        host,
        env().host().url(),
        &env().host().ca_pem().unwrap(),
    )
    .await
    .unwrap();
    karmadactl::RbacResources::new("member1", "karmada-cluster", "karmada-system")
        .ensure(host)
        .await
        .unwrap();
}

fn cluster(name: &str, spec: serde_json::Value) -> Cluster {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn lease(ns: &str, name: &str) -> Lease {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns},
        "spec": {"holderIdentity": "attacker"}}))
    .unwrap()
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn the_agent_cannot_act_as_another_cluster_or_the_controller_manager() {
    let env = env();
    let host = env.host().client().await;
    setup(&host).await;
    let agent = client_of(&env.host().user_kubeconfig_in(AGENT, &[AGENTS]).unwrap()).await;
    let clusters: Api<Cluster> = Api::all(agent.clone());
    let admin_clusters: Api<Cluster> = Api::all(host.clone());

    // The policy takes a moment to become active: wait until a dry run of an attack is refused.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let other = cluster("member2", json!({"syncMode": "Pull"}));
    let deadline = tokio::time::Instant::now() + WAIT;
    while clusters.create(&dry, &other).await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "policy never active"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The controller-manager's leader Lease: neither created (before it exists), read nor updated.
    let system_leases: Api<Lease> = Api::namespaced(agent.clone(), "karmada-system");
    refused(
        "create the controller-manager's Lease",
        system_leases
            .create(
                &PostParams::default(),
                &lease("karmada-system", "karmada-controller-manager"),
            )
            .await,
        Some("karmada-agent-restriction"),
    );
    let held = Api::<Lease>::namespaced(host.clone(), "karmada-system")
        .create(
            &PostParams::default(),
            &lease("karmada-system", "karmada-controller-manager"),
        )
        .await
        .unwrap();
    refused(
        "get the controller-manager's Lease",
        system_leases.get("karmada-controller-manager").await,
        None,
    );
    let mut taken = held.clone();
    taken.spec.as_mut().unwrap().holder_identity = Some(AGENT.into());
    refused(
        "update the controller-manager's Lease",
        system_leases
            .replace("karmada-controller-manager", &PostParams::default(), &taken)
            .await,
        None,
    );
    // Its own leader-election Lease works.
    system_leases
        .create(
            &PostParams::default(),
            &lease("karmada-system", "karmada-agent-member1"),
        )
        .await
        .unwrap();
    let mine = system_leases.get("karmada-agent-member1").await.unwrap();
    system_leases
        .replace("karmada-agent-member1", &PostParams::default(), &mine)
        .await
        .unwrap();

    // Another cluster's heartbeat: not patched, not created.
    let cluster_leases: Api<Lease> = Api::namespaced(agent.clone(), "karmada-cluster");
    Api::<Lease>::namespaced(host.clone(), "karmada-cluster")
        .create(&PostParams::default(), &lease("karmada-cluster", "member2"))
        .await
        .unwrap();
    let renew = json!({"spec": {"renewTime": "2030-01-01T00:00:00.000000Z"}});
    refused(
        "patch member2's Lease",
        cluster_leases
            .patch("member2", &PatchParams::default(), &Patch::Merge(&renew))
            .await,
        None,
    );
    refused(
        "create member3's Lease",
        cluster_leases
            .create(&PostParams::default(), &lease("karmada-cluster", "member3"))
            .await,
        Some("karmada-agent-restriction"),
    );
    // Its own heartbeat works.
    cluster_leases
        .create(&PostParams::default(), &lease("karmada-cluster", "member1"))
        .await
        .unwrap();
    cluster_leases
        .patch("member1", &PatchParams::default(), &Patch::Merge(&renew))
        .await
        .unwrap();

    // A Cluster of another name.
    refused(
        "create Cluster member2",
        clusters.create(&PostParams::default(), &other).await,
        Some("karmada-agent-restriction"),
    );
    // Its own Cluster as Push with a secretRef (to another member's Secret), or Pull with one.
    let secret_ref = json!({"namespace": "karmada-cluster", "name": "member2"});
    for spec in [
        json!({"syncMode": "Push", "apiEndpoint": "https://attacker.example:6443", "secretRef": secret_ref}),
        json!({"syncMode": "Pull", "secretRef": secret_ref}),
        json!({"syncMode": "Pull", "impersonatorSecretRef": secret_ref}),
        json!({"syncMode": "Push", "apiEndpoint": "https://attacker.example:6443"}),
    ] {
        refused(
            &format!("create own Cluster {spec}"),
            clusters
                .create(&PostParams::default(), &cluster("member1", spec.clone()))
                .await,
            Some("karmada-agent-restriction"),
        );
    }
    // As Pull without secret references (what the agent does): allowed; then not turned Push.
    clusters
        .create(
            &PostParams::default(),
            &cluster(
                "member1",
                json!({"syncMode": "Pull", "apiEndpoint": "https://member1.example:6443"}),
            ),
        )
        .await
        .unwrap();
    for patch in [
        json!({"spec": {"syncMode": "Push"}}),
        json!({"spec": {"secretRef": secret_ref}}),
        json!({"spec": {"impersonatorSecretRef": secret_ref}}),
    ] {
        refused(
            &format!("patch own Cluster {patch}"),
            clusters
                .patch("member1", &PatchParams::default(), &Patch::Merge(&patch))
                .await,
            Some("karmada-agent-restriction"),
        );
    }
    clusters
        .patch(
            "member1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"apiEndpoint": "https://member1.example:7443"}})),
        )
        .await
        .unwrap();
    clusters
        .patch_status(
            "member1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"kubernetesVersion": "v1.37.0"}})),
        )
        .await
        .unwrap();

    // Another Cluster's endpoint and its Secret.
    admin_clusters
        .create(
            &PostParams::default(),
            &cluster(
                "member2",
                json!({"syncMode": "Pull", "apiEndpoint": "https://member2.example:6443"}),
            ),
        )
        .await
        .unwrap();
    refused(
        "patch member2's apiEndpoint",
        clusters
            .patch(
                "member2",
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"apiEndpoint": "https://attacker.example:6443"}})),
            )
            .await,
        None,
    );
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "member2", "namespace": "karmada-cluster"},
        "stringData": {"token": "member2-token"},
    }))
    .unwrap();
    Api::<Secret>::namespaced(host.clone(), "karmada-cluster")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    refused(
        "read member2's Secret",
        Api::<Secret>::namespaced(agent.clone(), "karmada-cluster")
            .get("member2")
            .await,
        None,
    );
    refused(
        "delete member2",
        clusters.delete("member2", &Default::default()).await,
        None,
    );
}

/// A PEM CSR made by openssl for `subject` (which may repeat attributes, as an attacker would).
fn openssl_request(subject: &str) -> Vec<u8> {
    let dir = tempfile_dir();
    let key = dir.join(format!("key-{}.pem", subject.len()));
    let out = std::process::Command::new("openssl")
        .args([
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-subj", subject, "-keyout"])
        .arg(&key)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = env().dir().join("agent-identity-csr");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn csr(name: &str, request: Vec<u8>) -> CertificateSigningRequest {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "request": k8s_openapi::ByteString(request),
            "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["digital signature", "key encipherment", "client auth"],
        },
    }))
    .unwrap()
}

fn approved(c: &CertificateSigningRequest) -> bool {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Approved" && c.status == "True")
        })
}

#[tokio::test]
async fn only_the_agents_own_renewal_is_approved() {
    let env = env();
    let host = env.host().client().await;
    setup(&host).await;
    let agent = client_of(&env.host().user_kubeconfig_in(AGENT, &[AGENTS]).unwrap()).await;
    let cm_kc = env
        .host()
        .user_kubeconfig("e2e-csr-controller-manager")
        .unwrap();
    let kcm = Kcm::start(
        &cm_kc,
        &["--leader-elect=false", "--controllers=agentcsrapproving"],
        &[],
    );
    let csrs: Api<CertificateSigningRequest> = Api::all(agent.clone());
    let admin_csrs: Api<CertificateSigningRequest> = Api::all(host.clone());
    let attacks = [
        (
            "two-cn-own-first",
            "/O=system:karmada:agents/CN=system:karmada:agent:member1/CN=system:karmada:agent:rbac-generator",
        ),
        (
            "two-cn-own-last",
            "/O=system:karmada:agents/CN=system:karmada:agent:rbac-generator/CN=system:karmada:agent:member1",
        ),
        (
            "other-cluster",
            "/O=system:karmada:agents/CN=system:karmada:agent:member2",
        ),
        (
            "extra-organization",
            "/O=system:karmada:agents/O=karmada:admins/CN=system:karmada:agent:member1",
        ),
    ];
    // system:masters is refused by the API server itself for this signer.
    refused(
        "a CSR with organization system:masters",
        csrs.create(
            &PostParams::default(),
            &csr(
                "masters",
                openssl_request(
                    "/O=system:karmada:agents/O=system:masters/CN=system:karmada:agent:member1",
                ),
            ),
        )
        .await,
        Some("system:masters"),
    );
    for (name, subject) in attacks {
        csrs.create(&PostParams::default(), &csr(name, openssl_request(subject)))
            .await
            .unwrap();
    }
    // Its own renewal, made last: approved.
    csrs.create(
        &PostParams::default(),
        &csr(
            "own-renewal",
            openssl_request("/O=system:karmada:agents/CN=system:karmada:agent:member1"),
        ),
    )
    .await
    .unwrap();
    eventually("the agent's own renewal approved", &kcm, || async {
        approved(&admin_csrs.get("own-renewal").await.unwrap())
    })
    .await;
    // Each attack: a Warning Event says why, and the CSR stays unapproved and unsigned.
    let events: Api<Event> = Api::namespaced(host.clone(), "default");
    for (name, _) in attacks {
        eventually(
            &format!("the refusal Event of CSR {name}"),
            &kcm,
            || async {
                events
                    .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
                    .await
                    .unwrap()
                    .items
                    .iter()
                    .any(|e| e.reason.as_deref() == Some("AgentCSRNotApproved"))
            },
        )
        .await;
        let c = admin_csrs.get(name).await.unwrap();
        assert!(!approved(&c), "CSR {name} approved: {:?}", c.status);
        assert!(
            c.status.and_then(|s| s.certificate).is_none(),
            "CSR {name} signed"
        );
    }
}

/// Counts TCP connections to a local listener (closing each at once).
async fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            drop(conn);
        }
    });
    (port, count)
}

fn ready_message(c: &Cluster) -> Option<(String, String)> {
    c.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| (c.status.clone(), c.message.clone()))
    })
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn a_cluster_never_uses_another_clusters_secret() {
    let env = env();
    let host = env.host().client().await;
    let cm_kc = env
        .host()
        .user_kubeconfig("e2e-owner-controller-manager")
        .unwrap();
    let kcm = Kcm::start(
        &cm_kc,
        &[
            "--leader-elect=false",
            "--controllers=cluster,clusterStatus",
            "--cluster-status-update-frequency=1s",
        ],
        &[],
    );
    let clusters: Api<Cluster> = Api::all(host.clone());
    let secrets: Api<Secret> = Api::namespaced(host.clone(), "karmada-cluster");
    let _ = karmadactl::bootstrap::apply(
        &Api::<k8s_openapi::api::core::v1::Namespace>::all(host.clone()),
        "karmada-cluster",
        &serde_json::from_value(json!({"metadata": {"name": "karmada-cluster"}})).unwrap(),
    )
    .await;
    // The victim: a Cluster (Pull: never contacted) and its Secret, owned by it as join does.
    let victim = clusters
        .create(
            &PostParams::default(),
            &cluster(
                "victim",
                json!({"syncMode": "Pull", "apiEndpoint": "https://victim.example"}),
            ),
        )
        .await
        .unwrap();
    let owned_by = |c: &Cluster| {
        json!([{
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "name": c.metadata.name, "uid": c.metadata.uid,
            "controller": true, "blockOwnerDeletion": true,
        }])
    };
    let secret = |name: &str, owners: serde_json::Value| -> Secret {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "karmada-cluster", "ownerReferences": owners},
            "stringData": {"token": format!("{name}-token")},
        }))
        .unwrap()
    };
    secrets
        .create(&PostParams::default(), &secret("victim", owned_by(&victim)))
        .await
        .unwrap();

    // An admin-made (or compromised) Push Cluster naming the victim's Secret, with an endpoint the
    // attacker listens on; and a legitimate one with its own Secret, as the control.
    let (evil_port, evil_count) = counting_listener().await;
    let (good_port, good_count) = counting_listener().await;
    clusters
        .create(
            &PostParams::default(),
            &cluster(
                "evil",
                json!({"syncMode": "Push", "apiEndpoint": format!("https://127.0.0.1:{evil_port}"),
                    "insecureSkipTLSVerification": true,
                    "secretRef": {"namespace": "karmada-cluster", "name": "victim"}}),
            ),
        )
        .await
        .unwrap();
    let good = clusters
        .create(
            &PostParams::default(),
            &cluster(
                "good",
                json!({"syncMode": "Push", "apiEndpoint": format!("https://127.0.0.1:{good_port}"),
                    "insecureSkipTLSVerification": true,
                    "secretRef": {"namespace": "karmada-cluster", "name": "good"}}),
            ),
        )
        .await
        .unwrap();
    secrets
        .create(&PostParams::default(), &secret("good", owned_by(&good)))
        .await
        .unwrap();

    eventually("the evil Cluster's Ready condition", &kcm, || async {
        clusters
            .get("evil")
            .await
            .ok()
            .and_then(|c| ready_message(&c))
            .is_some_and(|(status, message)| {
                status == "False"
                    && message.contains("secret karmada-cluster/victim does not belong to it")
            })
    })
    .await;
    eventually("the control Cluster's endpoint contacted", &kcm, || async {
        good_count.load(Ordering::SeqCst) > 0
    })
    .await;
    // Several status periods later, still not one connection to the evil endpoint.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        evil_count.load(Ordering::SeqCst),
        0,
        "the evil endpoint was contacted\n{}",
        kcm.log_tail(60)
    );
    drop(kcm);
}
