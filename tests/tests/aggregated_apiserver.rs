//! A control plane set up as Karmada's own installers do it: `cluster.karmada.io/v1alpha1` is served
//! by Karmada's `karmada-aggregated-apiserver` behind the `v1alpha1.cluster.karmada.io` APIService,
//! with no Cluster CRD (testenv's `aggregated_apiserver`; `make test-aggregated-apiserver` builds
//! the Go binary first). The real controller-manager and agent binaries run unchanged against it:
//!
//! - `karmadactl join` makes a Push member: its Cluster (with Secret references) becomes Ready with
//!   the status the controller-manager writes, carries the cluster controller's finalizer, loses
//!   its not-ready taint, keeps a user's taint (NoExecute ones get the `timeAdded` the aggregated
//!   server stamps), and nothing rewrites its spec in a loop against the server's defaulting.
//! - `clusters/proxy` through the host reaches that member as the requesting user: the aggregated
//!   server impersonates them with the impersonator token `karmadactl join` stored, once the
//!   unifiedAuth controller's RBAC in the member lets it; a user the control plane grants
//!   `clusters/proxy` sees only what the member grants that user; one it does not is refused by
//!   the control plane. (As in Karmada, only subjects named in bindings that grant
//!   `clusters/proxy` can be impersonated: a `system:masters` user with no such binding of its own
//!   is refused by the member.)
//! - `karmada-agent` registers a Pull member, reports its status and renews its Lease.
//! - A Deployment and a policy propagate to both members and the template's status sums theirs.
//! - Unjoin, and deleting the Pull member's Cluster while its agent runs, remove the Clusters
//!   (finalizers released).
//! - The controller-manager says at startup that Clusters come through the APIService, and warns
//!   when a Cluster CRD exists beside it (the APIService keeps serving them).
//! - The controller-manager chart refuses to install its Cluster CRD beside the aggregated server,
//!   and installs without it with `clusterCRD.install=false`.
//!
//! In Go Karmada the same Clusters would be served the same way; what differs from a CRD-served
//! group is what the aggregated server does on its own: it validates Clusters, defaults
//! `resourceModels`, stamps `timeAdded` on NoExecute taints, ignores `status` on the main resource
//! and accepts strategic-merge patches.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use karmada_apis::cluster::v1alpha1::ClusterSyncMode;
use karmada_apis::{Cluster, PropagationPolicy};
use karmada_e2e::controller_manager::{Kcm, agent_binary};
use karmada_e2e::wait::eventually_showing;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testenv::{ApiServer, EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(90);
const NS: &str = "aggregated";
const FINALIZER: &str = "karmada.io/cluster-controller";
const NOT_READY_TAINT: &str = "cluster.karmada.io/not-ready";

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        install_crds: true,
        aggregated_apiserver: true,
        ..Default::default()
    })
}

async fn client_of(kubeconfig: &Path) -> Client {
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(kubeconfig).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    Client::try_from(config).unwrap()
}

/// Polls `check` every 250 ms until it returns `Ok`, for at most [`WAIT`]; panics with the last
/// reason and the tails of the processes' logs.
async fn eventually<T>(
    what: &str,
    procs: &[&Kcm],
    check: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let logs = || {
        let logs: Vec<String> = procs.iter().map(|p| p.log_tail(60)).collect();
        let aggregated = testenv::process::log_tail(
            &env().host().dir().join("karmada-aggregated-apiserver.log"),
        );
        format!(
            "logs (tails):\n{}\n--- karmada-aggregated-apiserver:\n{aggregated}",
            logs.join("\n---\n")
        )
    };
    eventually_showing(what, WAIT, Duration::from_millis(250), logs, check).await
}

fn condition(c: &Cluster, type_: &str) -> Option<String> {
    c.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

fn taint_keys(c: &Cluster) -> Vec<String> {
    c.spec.taints.iter().map(|t| t.key.clone()).collect()
}

async fn karmadactl(command: &str, member: &ApiServer, extra: &[&str]) {
    let mut args = vec![
        "karmadactl".to_string(),
        command.to_string(),
        member.name().to_string(),
        format!("--kubeconfig={}", env().host().kubeconfig_path().display()),
        format!(
            "--cluster-kubeconfig={}",
            member.kubeconfig_path().display()
        ),
    ];
    args.extend(extra.iter().map(ToString::to_string));
    karmadactl::run(args)
        .await
        .unwrap_or_else(|e| panic!("karmadactl {command} {}: {e:#}", member.name()));
}

/// `GET <path>` through `client`: the body, or the HTTP status code and message of the refusal.
async fn get(client: &Client, path: &str) -> Result<String, (u16, String)> {
    let req = http::Request::get(path).body(Vec::new()).unwrap();
    client.request_text(req).await.map_err(|e| match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("GET {path}: {other}"),
    })
}

/// A ClusterRoleBinding of the ClusterRole `role` to the user `user`.
fn binding(name: &str, role: &str, user: &str) -> Value {
    json!({"metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]})
}

/// The names in a `NamespaceList` body.
fn namespace_names(body: &str) -> Vec<String> {
    let list: Value = serde_json::from_str(body).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str().map(ToString::to_string))
        .collect()
}

async fn create<K>(api: &Api<K>, object: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let o: K = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &o).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the members it joins"
)]
async fn clusters_served_by_the_aggregated_apiserver() {
    let env = env();
    let host = env.host().client().await;
    let member1 = env.member("member1").unwrap();
    let member2 = env.member("member2").unwrap();

    // The group is the APIService's: no CRD serves it.
    let api_service = Api::<APIService>::all(host.clone())
        .get(testenv::CLUSTER_API_SERVICE)
        .await
        .unwrap();
    assert!(api_service.spec.unwrap().service.is_some());
    assert!(
        Api::<CustomResourceDefinition>::all(host.clone())
            .get_opt(testenv::CLUSTER_CRD)
            .await
            .unwrap()
            .is_none()
    );

    let cm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--cluster-status-update-frequency=1s",
            "--cluster-monitor-period=1s",
            "--cluster-monitor-grace-period=20s",
            "--cluster-startup-grace-period=30s",
        ],
        &[],
    );
    let procs = [&cm];
    // It says where Clusters come from.
    cm.eventually("the startup line naming the APIService", WAIT, async || {
        cm.log()
            .lines()
            .find(|l| {
                l.contains("served through the APIService v1alpha1.cluster.karmada.io")
                    && l.contains("karmada-system/karmada-aggregated-apiserver")
            })
            .map(|_| ())
            .ok_or("not yet".to_string())
    })
    .await;

    // --- Push member: join. ---
    karmadactl("join", member1, &["--token-wait=3s"]).await;
    let clusters: Api<Cluster> = Api::all(host.clone());
    let joined = eventually("member1 Ready", &procs, async || {
        let c = clusters.get("member1").await.map_err(|e| e.to_string())?;
        let ready = condition(&c, "Ready");
        let untainted = !taint_keys(&c).contains(&NOT_READY_TAINT.to_string());
        (ready.as_deref() == Some("True") && untainted)
            .then_some(c.clone())
            .ok_or(format!("Ready {ready:?}, taints {:?}", c.spec.taints))
    })
    .await;
    assert_eq!(joined.spec.sync_mode, ClusterSyncMode::Push);
    assert_eq!(joined.spec.api_endpoint, member1.url());
    assert!(joined.spec.secret_ref.is_some());
    assert!(joined.spec.impersonator_secret_ref.is_some());
    assert!(joined.finalizers().contains(&FINALIZER.to_string()));
    let status = joined.status.clone().unwrap();
    assert!(!status.kubernetes_version.is_empty(), "{status:?}");
    assert!(!status.api_enablements.is_empty(), "{status:?}");
    Api::<Namespace>::all(host.clone())
        .get("karmada-es-member1")
        .await
        .unwrap();

    // --- Taints: a user's NoSchedule and NoExecute taints stay; the aggregated server stamps the
    // NoExecute one's timeAdded, and nothing writes the spec again afterwards. ---
    let taints = json!({"spec": {"taints": [
        {"key": "dedicated", "value": "ops", "effect": "NoSchedule"},
        {"key": "maintenance", "effect": "NoExecute"},
    ]}});
    clusters
        .patch("member1", &PatchParams::default(), &Patch::Merge(&taints))
        .await
        .unwrap();
    let tainted = clusters.get("member1").await.unwrap();
    let maintenance = tainted
        .spec
        .taints
        .iter()
        .find(|t| t.key == "maintenance")
        .unwrap();
    assert!(
        maintenance.time_added.is_some(),
        "{:?}",
        tainted.spec.taints
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let later = clusters.get("member1").await.unwrap();
    assert_eq!(
        later.metadata.generation, tainted.metadata.generation,
        "the spec was written again: {:?}",
        later.spec
    );
    assert_eq!(taint_keys(&later), ["dedicated", "maintenance"]);
    // The controllers keep the status fresh under the user's taints.
    assert_eq!(condition(&later, "Ready").as_deref(), Some("True"));
    clusters
        .patch(
            "member1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"taints": null}})),
        )
        .await
        .unwrap();

    // --- clusters/proxy: alice may use member1's proxy on the control plane, bob may not. ---
    let proxy = "/apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy";
    let member1_client = member1.client().await;
    create(
        &Api::<Namespace>::all(member1_client.clone()),
        json!({"metadata": {"name": "only-in-member1"}}),
    )
    .await;
    create(
        &Api::<ClusterRole>::all(host.clone()),
        json!({"metadata": {"name": "proxy-member1"}, "rules": [{
            "apiGroups": ["cluster.karmada.io"], "resources": ["clusters/proxy"],
            "resourceNames": ["member1"], "verbs": ["get"]}]}),
    )
    .await;
    create(
        &Api::<ClusterRoleBinding>::all(host.clone()),
        binding("proxy-member1", "proxy-member1", "alice"),
    )
    .await;
    let alice = client_of(&env.host().user_kubeconfig_in("alice", &[]).unwrap()).await;
    let bob = client_of(&env.host().user_kubeconfig_in("bob", &[]).unwrap()).await;
    let namespaces = format!("{proxy}/api/v1/namespaces");
    let (code, message) = get(&bob, &namespaces).await.unwrap_err();
    assert_eq!(code, 403, "the control plane refuses bob: {message}");
    assert!(message.contains("clusters/proxy"), "{message}");
    // alice reaches member1 as herself once the unifiedAuth controller lets the impersonator act
    // as her there; member1 grants her nothing yet, so member1 refuses her (not the impersonator).
    eventually(
        "member1 refusing alice herself",
        &procs,
        async || match get(&alice, &namespaces).await {
            Err((403, m)) if m.contains("User \"alice\"") => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    // member1 lets alice list namespaces: through the proxy she sees member1's, and nothing else.
    create(
        &Api::<ClusterRole>::all(member1_client.clone()),
        json!({"metadata": {"name": "alice-namespaces"}, "rules": [{
            "apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list"]}]}),
    )
    .await;
    create(
        &Api::<ClusterRoleBinding>::all(member1_client.clone()),
        binding("alice-namespaces", "alice-namespaces", "alice"),
    )
    .await;
    let names = eventually("alice listing member1's namespaces", &procs, async || {
        get(&alice, &namespaces)
            .await
            .map(|body| namespace_names(&body))
            .map_err(|e| format!("{e:?}"))
    })
    .await;
    assert!(names.contains(&"only-in-member1".to_string()), "{names:?}");
    assert!(
        !names.contains(&"karmada-es-member1".to_string()),
        "{names:?}"
    );
    let (code, message) = get(
        &alice,
        &format!("{proxy}/api/v1/namespaces/kube-system/configmaps"),
    )
    .await
    .unwrap_err();
    assert_eq!(
        code, 403,
        "member1 lets alice read namespaces only: {message}"
    );
    assert!(message.contains("User \"alice\""), "{message}");
    // Her control-plane grant names member1 only.
    let (code, _) = get(
        &alice,
        "/apis/cluster.karmada.io/v1alpha1/clusters/member2/proxy/api/v1/namespaces",
    )
    .await
    .unwrap_err();
    assert_eq!(code, 403);

    // --- Pull member: karmada-agent registers member2, reports status, renews its Lease. ---
    let mut agent = Kcm::start_program(
        agent_binary(),
        member2.kubeconfig_path(),
        &[
            &format!(
                "--karmada-kubeconfig={}",
                env.host().kubeconfig_path().display()
            ),
            "--cluster-name=member2",
            &format!("--cluster-api-endpoint={}", member2.url()),
            "--leader-elect=false",
            "--cluster-status-update-frequency=1s",
            "--cluster-lease-duration=4s",
            "--cluster-success-threshold=1s",
            "--cluster-failure-threshold=1s",
        ],
        &[],
    );
    let procs = [&cm, &agent];
    let pulled = eventually("member2 registered and Ready", &procs, async || {
        let c = clusters
            .get_opt("member2")
            .await
            .map_err(|e| e.to_string())?
            .ok_or("no Cluster yet")?;
        let ready = condition(&c, "Ready");
        (ready.as_deref() == Some("True"))
            .then_some(c)
            .ok_or(format!("Ready {ready:?}"))
    })
    .await;
    assert_eq!(pulled.spec.sync_mode, ClusterSyncMode::Pull);
    assert!(pulled.spec.secret_ref.is_none());
    assert!(!pulled.status.unwrap().kubernetes_version.is_empty());
    let lease = Api::<Lease>::namespaced(host.clone(), "karmada-cluster")
        .get("member2")
        .await
        .unwrap();
    assert_eq!(
        lease.metadata.owner_references.unwrap()[0].uid,
        pulled.metadata.uid.unwrap()
    );
    let renewed = lease.spec.unwrap().renew_time;
    eventually("member2's Lease renewed", &procs, async || {
        let now = Api::<Lease>::namespaced(host.clone(), "karmada-cluster")
            .get("member2")
            .await
            .map_err(|e| e.to_string())?
            .spec
            .and_then(|s| s.renew_time);
        (now != renewed).then_some(()).ok_or("not yet".to_string())
    })
    .await;

    // --- A Deployment and a policy reach both members; their status comes back. ---
    create(
        &Api::<Namespace>::all(host.clone()),
        json!({"metadata": {"name": NS}}),
    )
    .await;
    let templates: Api<Deployment> = Api::namespaced(host.clone(), NS);
    create(
        &templates,
        json!({
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
                },
            },
        }),
    )
    .await;
    create(
        &Api::<PropagationPolicy>::namespaced(host.clone(), NS),
        json!({
            "apiVersion": "policy.karmada.io/v1alpha1",
            "kind": "PropagationPolicy",
            "metadata": {"name": "web"},
            "spec": {
                "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
                "placement": {
                    "clusterAffinity": {"clusterNames": ["member1", "member2"]},
                    "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
                },
            },
        }),
    )
    .await;
    let in_members: Vec<Api<Deployment>> = vec![
        Api::namespaced(member1.client().await, NS),
        Api::namespaced(member2.client().await, NS),
    ];
    for (api, name) in in_members.iter().zip(["member1", "member2"]) {
        eventually(&format!("{NS}/web in {name}"), &procs, async || {
            api.get_opt("web")
                .await
                .map_err(|e| e.to_string())?
                .map(|_| ())
                .ok_or("not yet".to_string())
        })
        .await;
    }
    // No controllers run in the members: the test writes their Deployments' status.
    for api in &in_members {
        let generation = api.get("web").await.unwrap().metadata.generation;
        let status = json!({"status": {
            "observedGeneration": generation, "replicas": 2, "updatedReplicas": 2,
            "readyReplicas": 2, "availableReplicas": 2,
        }});
        api.patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
    }
    eventually(
        "the template's status sums both members",
        &procs,
        async || {
            let s = templates
                .get("web")
                .await
                .map_err(|e| e.to_string())?
                .status
                .unwrap_or_default();
            (s.replicas == Some(4) && s.ready_replicas == Some(4))
                .then_some(())
                .ok_or(format!("{s:?}"))
        },
    )
    .await;

    // --- Unjoin member1: its Cluster goes (the finalizer is released). Deleting member2's Cluster
    // while its agent runs (the agent releases its Works) removes it too. ---
    karmadactl("unjoin", member1, &["--wait=120s"]).await;
    assert!(clusters.get_opt("member1").await.unwrap().is_none());
    clusters
        .delete("member2", &DeleteParams::default())
        .await
        .unwrap();
    eventually("member2's Cluster gone", &procs, async || {
        match clusters.get_opt("member2").await {
            Ok(None) => Ok(()),
            Ok(Some(c)) => {
                // What it waits for: the execution namespace's deletion and the Works in it.
                let space = Api::<Namespace>::all(host.clone())
                    .get_opt("karmada-es-member2")
                    .await
                    .map_err(|e| e.to_string())?
                    .map(|n| serde_json::to_string(&n.status).unwrap());
                let works: Vec<String> =
                    Api::<karmada_apis::Work>::namespaced(host.clone(), "karmada-es-member2")
                        .list(&ListParams::default())
                        .await
                        .map_err(|e| e.to_string())?
                        .items
                        .iter()
                        .map(|w| format!("{} {:?}", w.name_any(), w.finalizers()))
                        .collect();
                Err(format!(
                    "finalizers {:?}; execution space {space:?}; Works {works:?}",
                    c.finalizers()
                ))
            }
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    agent.signal(libc::SIGTERM);
    agent.wait_exit(Duration::from_secs(40)).await.unwrap();

    // --- A Cluster CRD beside the APIService: the APIService still serves Clusters, and a
    // controller-manager starting then warns that both claim the group. ---
    let cluster_crd: Vec<_> = karmada_apis::crds::all()
        .into_iter()
        .filter(|c| c.metadata.name.as_deref() == Some(testenv::CLUSTER_CRD))
        .collect();
    testenv::install_crd_objects(&host, &cluster_crd)
        .await
        .unwrap();
    let served_by = |a: APIService| a.spec.and_then(|s| s.service).and_then(|s| s.name);
    let api_services = Api::<APIService>::all(host.clone());
    assert_eq!(
        served_by(
            api_services
                .get(testenv::CLUSTER_API_SERVICE)
                .await
                .unwrap()
        )
        .as_deref(),
        Some("karmada-aggregated-apiserver")
    );
    let mut second = Kcm::start(env.host().kubeconfig_path(), &["--leader-elect=false"], &[]);
    second
        .eventually("the warning that both serve Clusters", WAIT, async || {
            second
                .log()
                .lines()
                .find(|l| l.contains("WARN") && l.contains("both the APIService"))
                .map(|_| ())
                .ok_or("not yet".to_string())
        })
        .await;
    second.signal(libc::SIGTERM);
    second.wait_exit(Duration::from_secs(40)).await.unwrap();
    Api::<CustomResourceDefinition>::all(host.clone())
        .delete(testenv::CLUSTER_CRD, &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Cluster CRD gone", &[&cm], async || {
        match Api::<CustomResourceDefinition>::all(host.clone())
            .get_opt(testenv::CLUSTER_CRD)
            .await
        {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|c| c.map(|c| c.status)))),
        }
    })
    .await;
    assert_eq!(
        served_by(
            api_services
                .get(testenv::CLUSTER_API_SERVICE)
                .await
                .unwrap()
        )
        .as_deref(),
        Some("karmada-aggregated-apiserver")
    );
    assert!(
        clusters
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

/// `helm install --dry-run=server` of the controller-manager chart against the host, with `sets`:
/// the rendered manifests, or helm's error.
fn helm_install_dry_run(sets: &[&str]) -> Result<String, String> {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/karmada-controller-manager");
    let home = std::env::temp_dir().join(format!("karmada-rs-helm-{}", std::process::id()));
    let mut cmd = std::process::Command::new(karmada_e2e::tools::tool("helm"));
    cmd.args(["install", "kcm"])
        .arg(&chart)
        .args(["-n", "default", "--dry-run=server", "--kubeconfig"])
        .arg(env().host().kubeconfig_path())
        .env_remove("KUBECONFIG");
    for (var, sub) in [
        ("HELM_CACHE_HOME", "cache"),
        ("HELM_CONFIG_HOME", "config"),
        ("HELM_DATA_HOME", "data"),
    ] {
        cmd.env(var, home.join(sub));
    }
    for s in sets {
        cmd.args(["--set", s]);
    }
    let out = cmd.output().unwrap();
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The controller-manager chart installs the Cluster CRD by default: where the aggregated server
/// serves the group, it refuses to, naming the APIService and the value that installs without it;
/// with `clusterCRD.install=false` it installs, without any CRD among its templates.
#[tokio::test]
async fn the_chart_refuses_a_cluster_crd_beside_the_aggregated_apiserver() {
    let refused = helm_install_dry_run(&[]).unwrap_err();
    assert!(
        refused.contains("APIService v1alpha1.cluster.karmada.io")
            && refused.contains("karmada-system/karmada-aggregated-apiserver")
            && refused.contains("clusterCRD.install=false"),
        "{refused}"
    );
    let rendered = helm_install_dry_run(&["clusterCRD.install=false"]).unwrap();
    assert!(rendered.contains("kind: Deployment"), "{rendered}");
    assert!(
        !rendered.contains("kind: CustomResourceDefinition"),
        "{rendered}"
    );
}
