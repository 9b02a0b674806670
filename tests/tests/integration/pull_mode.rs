//! Pull mode end to end with the real binaries: the controller-manager with `member1` joined in Push
//! mode, and `karmada-agent` serving `member2` in Pull mode. member2's API server audits every
//! request (reads included): every one it received came from the agent's identity (or this test's
//! observer), none from the controller-manager, across registration, propagation, status, drift
//! repair and deletion. A FederatedHPA over both members names member2 as left out. Also: a second agent claiming the Push cluster's name is refused and changes
//! nothing; an agent restarted over applied Works writes nothing to its member; the agent collects
//! member2's EndpointSlices for a ServiceExport and for a MultiClusterService; an agent stopped
//! leaves its Cluster `Ready=Unknown` once the (shortened) grace period passed. The agent holds
//! exactly the RBAC `charts/karmada-agent` renders, on both sides: on the host (`target:
//! karmadaApiServer`) and on member2 (its member ClusterRole), as users outside `system:masters`.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::jiff::Timestamp;
use karmada_apis::autoscaling::v1alpha1::FederatedHPA;
use karmada_apis::cluster::v1alpha1::ClusterSyncMode;
use karmada_apis::multicluster::v1alpha1::ServiceExport;
use karmada_apis::networking::v1alpha1::MultiClusterService;
use karmada_apis::{Cluster, PropagationPolicy, Work};
use karmada_e2e::controller_manager::{Kcm, agent_binary};
use karmada_e2e::tools::{helm_template, kubectl_apply};
use karmada_e2e::wait::eventually_showing;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "pull-mode";
/// The agent's identity on member2 (its client certificate's CN).
const AGENT_USER: &str = "e2e-karmada-agent";
/// This test's own identity on member2, for reading and for playing a user who edits by hand.
const OBSERVER: &str = "e2e-observer";

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        install_crds: true,
        member_audit_logs: true,
        ..Default::default()
    })
}

async fn client_of(kubeconfig: &Path) -> Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

async fn eventually(what: &str, procs: &[&Kcm], check: impl AsyncFnMut() -> bool) {
    let logs = || {
        let logs: Vec<String> = procs.iter().map(|p| p.log_tail(40)).collect();
        format!("logs:\n{}", logs.join("\n---\n"))
    };
    eventually_showing(what, WAIT, Duration::from_millis(250), logs, check).await;
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn ready_status(c: &Cluster) -> Option<String> {
    c.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

/// The agent for member2: member credentials of its own, Karmada credentials of its own, short
/// status and Lease intervals.
fn start_agent(member_kc: &Path, karmada_kc: &Path, name: &str, endpoint: &str) -> Kcm {
    Kcm::start_program(
        agent_binary(),
        member_kc,
        &[
            &format!("--karmada-kubeconfig={}", karmada_kc.display()),
            &format!("--cluster-name={name}"),
            &format!("--cluster-api-endpoint={endpoint}"),
            "--leader-elect=false",
            "--feature-gates=MultiClusterService=true",
            "--cluster-status-update-frequency=1s",
            "--cluster-lease-duration=4s",
            "--cluster-success-threshold=1s",
            "--cluster-failure-threshold=1s",
            "--enable-cluster-resource-modeling=false",
        ],
        &[],
    )
}

/// The agent's credentials, holding only what `charts/karmada-agent` grants: on the host, a user
/// `system:karmada:agent:member2` (group `system:karmada:agents`, as `karmadactl register` makes it)
/// with the chart's Karmada-side RBAC; on member2, [`AGENT_USER`] bound to the chart's member
/// ClusterRole (the chart binds it to its ServiceAccount). Returns (Karmada kubeconfig, member
/// kubeconfig).
fn grant_the_charts_rbac(env: &TestEnv) -> (std::path::PathBuf, std::path::PathBuf) {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/karmada-agent");
    let karmada_side = helm_template(
        &chart,
        "karmada-agent",
        "karmada-system",
        &["clusterName=member2", "target=karmadaApiServer"],
    )
    .unwrap();
    kubectl_apply(env.host().kubeconfig_path(), &karmada_side).unwrap();
    let karmada_kc = env
        .host()
        .user_kubeconfig_in("system:karmada:agent:member2", &["system:karmada:agents"])
        .unwrap();

    let member2 = env.member("member2").unwrap();
    let member_side = helm_template(
        &chart,
        "karmada-agent",
        "karmada-system",
        &["clusterName=member2", "karmadaKubeconfig.content=unused"],
    )
    .unwrap();
    let cluster_role = member_side
        .split("\n---")
        .find(|doc| doc.contains("\nkind: ClusterRole\n"))
        .expect("the chart renders a member ClusterRole");
    let binding = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  \
         name: e2e-karmada-agent\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: \
         ClusterRole\n  name: karmada-agent\nsubjects:\n- apiGroup: rbac.authorization.k8s.io\n  \
         kind: User\n  name: {AGENT_USER}\n"
    );
    kubectl_apply(
        member2.kubeconfig_path(),
        &format!("{cluster_role}\n---\n{binding}"),
    )
    .unwrap();
    let member_kc = member2.user_kubeconfig_in(AGENT_USER, &[]).unwrap();
    (karmada_kc, member_kc)
}

/// The agent's successful writes (create, update, patch, delete) in member2's audit log so far.
fn agent_writes(env: &TestEnv) -> usize {
    env.member("member2")
        .unwrap()
        .audit_events()
        .unwrap()
        .iter()
        .filter(|e| e.user.username == AGENT_USER)
        .filter(|e| matches!(e.verb.as_str(), "create" | "update" | "patch" | "delete"))
        .count()
}

/// `update_resource_to_cluster{operationResult="none"}` summed over the process's metrics.
fn unchanged_applies(p: &Kcm) -> f64 {
    p.metrics()
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            l.starts_with("update_resource_to_cluster{") && l.contains("operationResult=\"none\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn stop(p: &mut Kcm) {
    p.signal(libc::SIGTERM);
    let status = p.wait_exit(Duration::from_secs(40)).await.expect("exits");
    assert_eq!(Kcm::code(status), Some(0), "{}", tail(&p.log(), 40));
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn pull_member_served_by_the_agent_alone() {
    let env = env();
    let host = env.host().client().await;
    let member1 = env.member("member1").unwrap();
    let member2 = env.member("member2").unwrap();
    let cm_kc = env
        .host()
        .user_kubeconfig("e2e-karmada-controller-manager")
        .unwrap();
    let (agent_karmada_kc, agent_member_kc) = grant_the_charts_rbac(env);
    let observer = client_of(&member2.user_kubeconfig(OBSERVER).unwrap()).await;
    // The MCS API's CRDs in member2, as a Karmada user installs them there.
    let mcs_crds: Vec<_> = karmada_apis::crds::all()
        .into_iter()
        .filter(|c| c.spec.group == karmada_apis::multicluster::v1alpha1::GROUP)
        .collect();
    testenv::install_crd_objects(&member2.client().await, &mcs_crds)
        .await
        .unwrap();
    // The audit evidence starts here: the grants above are the admin's, as at install time.
    let started = Timestamp::now();

    let cm = Kcm::start(
        &cm_kc,
        &[
            "--leader-elect=false",
            "--feature-gates=MultiClusterService=true",
            "--cluster-status-update-frequency=1s",
            "--cluster-monitor-period=1s",
            "--cluster-monitor-grace-period=8s",
            "--cluster-startup-grace-period=30s",
        ],
        &[],
    );
    karmada_e2e::karmadactl::join(env.host(), member1, &["--token-wait=1s"])
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let clusters: Api<Cluster> = Api::all(host.clone());

    // A second agent claiming the Push cluster's name is refused; member1's Cluster is unchanged.
    let before = clusters.get("member1").await.unwrap();
    let mut claimer = start_agent(
        &agent_member_kc,
        &agent_karmada_kc,
        "member1",
        member2.url(),
    );
    let status = claimer
        .wait_exit(Duration::from_secs(30))
        .await
        .expect("the claiming agent exits");
    assert_eq!(Kcm::code(status), Some(1), "{}", claimer.log());
    assert!(
        claimer
            .log()
            .contains("the cluster name member1 has been registered"),
        "{}",
        claimer.log()
    );
    let after = clusters.get("member1").await.unwrap();
    assert_eq!(after.spec.sync_mode, ClusterSyncMode::Push);
    // Taints are the cluster controller's (not-ready until member1's first Ready status), not the
    // claiming agent's: compare everything else.
    let untainted = |c: &Cluster| {
        let mut spec = c.spec.clone();
        spec.taints.clear();
        spec
    };
    assert_eq!(untainted(&after), untainted(&before));

    // The agent registers member2 in Pull mode, reports its status and renews its Lease.
    let mut agent = start_agent(
        &agent_member_kc,
        &agent_karmada_kc,
        "member2",
        member2.url(),
    );
    eventually("member1 and member2 Ready", &[&cm, &agent], || async {
        let list = clusters.list(&ListParams::default()).await.unwrap();
        list.items.len() == 2
            && list
                .items
                .iter()
                .all(|c| ready_status(c).as_deref() == Some("True"))
    })
    .await;
    let pulled = clusters.get("member2").await.unwrap();
    assert_eq!(pulled.spec.sync_mode, ClusterSyncMode::Pull);
    assert_eq!(pulled.spec.api_endpoint, member2.url());
    assert!(pulled.spec.secret_ref.is_none());
    let kube_system = Api::<Namespace>::all(observer.clone())
        .get("kube-system")
        .await
        .unwrap();
    assert_eq!(Some(pulled.spec.id.clone()), kube_system.metadata.uid);
    let status = pulled.status.clone().unwrap();
    assert!(!status.kubernetes_version.is_empty(), "{status:?}");
    assert!(!status.api_enablements.is_empty());
    let lease = Api::<Lease>::namespaced(host.clone(), "karmada-cluster")
        .get("member2")
        .await
        .unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("member2"));
    assert_eq!(spec.lease_duration_seconds, Some(4));
    assert_eq!(
        lease.metadata.owner_references.unwrap()[0].uid,
        pulled.metadata.uid.unwrap()
    );

    // A Deployment and a policy land in both members.
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
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
    let templates: Api<Deployment> = Api::namespaced(host.clone(), NS);
    templates
        .create(&PostParams::default(), &deploy)
        .await
        .unwrap();
    let policy: PropagationPolicy = serde_json::from_value(json!({
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
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    let in_member1: Api<Deployment> = Api::namespaced(member1.client().await, NS);
    let in_member2: Api<Deployment> = Api::namespaced(observer.clone(), NS);
    for (name, api) in [("member1", &in_member1), ("member2", &in_member2)] {
        eventually(&format!("{NS}/web in {name}"), &[&cm, &agent], || async {
            api.get_opt("web").await.unwrap().is_some()
        })
        .await;
    }

    // Status comes home: the members' Deployments report (no controllers run there, so the test
    // writes their status) and the template sums them.
    for api in [&in_member1, &in_member2] {
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
        &[&cm, &agent],
        || async {
            let s = templates
                .get("web")
                .await
                .unwrap()
                .status
                .unwrap_or_default();
            s.replicas == Some(4) && s.ready_replicas == Some(4)
        },
    )
    .await;

    // A FederatedHPA over both members cannot read the Pull member's pods (the controller-manager
    // never contacts member2): it says so on a condition and an Event naming member2, instead of
    // silently computing metrics over member1 alone.
    let fhpas: Api<FederatedHPA> = Api::namespaced(host.clone(), NS);
    let fhpa: FederatedHPA = serde_json::from_value(json!({
        "apiVersion": "autoscaling.karmada.io/v1alpha1",
        "kind": "FederatedHPA",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1,
            "maxReplicas": 4,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                         "target": {"type": "Utilization", "averageUtilization": 50}}}],
        },
    }))
    .unwrap();
    fhpas.create(&PostParams::default(), &fhpa).await.unwrap();
    let left_out = "replicas or metrics leave out 1 of 2 target cluster(s): member2 (Pull mode: \
                    pods and metrics not read; replicas as its agent reported them)";
    eventually(
        "the FederatedHPA names member2 as left out",
        &[&cm],
        || async {
            let status = fhpas.get("web").await.unwrap().status.unwrap_or_default();
            status.conditions.unwrap_or_default().iter().any(|c| {
                c.type_ == "MembersObserved"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("MembersNotObserved")
                    && c.message.as_deref() == Some(left_out)
            })
        },
    )
    .await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(host.clone(), NS);
    eventually(
        "a MembersNotObserved Event on the FederatedHPA",
        &[&cm],
        || async {
            events
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .iter()
                .any(|e| {
                    e.involved_object.kind.as_deref() == Some("FederatedHPA")
                        && e.reason.as_deref() == Some("MembersNotObserved")
                        && e.message.as_deref() == Some(left_out)
                })
        },
    )
    .await;
    fhpas.delete("web", &DeleteParams::default()).await.unwrap();

    // A workload only the Pull member runs: its FederatedHPA counts the replicas member2's Work
    // asks for (Karmada reads them in the member) and raises the template to minReplicas.
    let mut only2 = deploy.clone();
    only2.metadata.name = Some("only2".into());
    only2.spec.replicas = Some(1);
    templates
        .create(&PostParams::default(), &only2)
        .await
        .unwrap();
    let mut policy2 = policy.clone();
    policy2.metadata.name = Some("only2".into());
    policy2.spec.resource_selectors[0].name = "only2".into();
    policy2.spec.placement = serde_json::from_value(json!({
        "clusterAffinity": {"clusterNames": ["member2"]},
        "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &policy2)
        .await
        .unwrap();
    eventually(
        &format!("{NS}/only2 in member2"),
        &[&cm, &agent],
        || async { in_member2.get_opt("only2").await.unwrap().is_some() },
    )
    .await;
    let mut fhpa2 = fhpa.clone();
    fhpa2.metadata.name = Some("only2".into());
    fhpa2.spec.scale_target_ref.name = "only2".into();
    fhpa2.spec.min_replicas = Some(2);
    fhpas.create(&PostParams::default(), &fhpa2).await.unwrap();
    eventually(
        "the Pull-only template raised to minReplicas",
        &[&cm],
        || async { templates.get("only2").await.unwrap().spec.replicas == Some(2) },
    )
    .await;
    eventually("AbleToScale=True on the FederatedHPA", &[&cm], || async {
        let status = fhpas.get("only2").await.unwrap().status.unwrap_or_default();
        status.current_replicas.is_some()
            && status
                .conditions
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "AbleToScale" && c.status == "True")
    })
    .await;
    fhpas
        .delete("only2", &DeleteParams::default())
        .await
        .unwrap();

    // Drift in the Pull member is repaired by the agent.
    in_member2
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    eventually("member2's drift repaired", &[&agent], || async {
        in_member2.get("web").await.unwrap().spec.replicas == Some(2)
    })
    .await;

    // An agent restarted over its applied Works finds them all unchanged and writes nothing.
    let works: Api<Work> = Api::namespaced(host.clone(), "karmada-es-member2");
    let applied = works
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len();
    assert!(applied >= 2, "the namespace and the Deployment Works");
    stop(&mut agent).await;
    let writes_before = agent_writes(env);
    let mut agent = start_agent(
        &agent_member_kc,
        &agent_karmada_kc,
        "member2",
        member2.url(),
    );
    eventually(
        "every Work looked at again after the restart",
        &[&agent],
        || async { unchanged_applies(&agent) >= applied as f64 },
    )
    .await;
    assert_eq!(
        agent_writes(env),
        writes_before,
        "the restarted agent wrote to member2"
    );

    // Agent stopped: the Lease stops moving and the Cluster becomes Ready=Unknown.
    stop(&mut agent).await;
    eventually("member2 Ready=Unknown", &[&cm], || async {
        ready_status(&clusters.get("member2").await.unwrap()).as_deref() == Some("Unknown")
    })
    .await;
    let ready = clusters
        .get("member2")
        .await
        .unwrap()
        .status
        .unwrap()
        .conditions;
    let ready = ready.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason, "ClusterStatusUnknown");

    // Back again, it reports Ready; deleting the template removes it from both members.
    let agent = start_agent(
        &agent_member_kc,
        &agent_karmada_kc,
        "member2",
        member2.url(),
    );
    eventually("member2 Ready again", &[&cm, &agent], || async {
        ready_status(&clusters.get("member2").await.unwrap()).as_deref() == Some("True")
    })
    .await;
    templates
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    for (name, api) in [("member1", &in_member1), ("member2", &in_member2)] {
        eventually(
            &format!("{NS}/web gone from {name}"),
            &[&cm, &agent],
            || async { api.get_opt("web").await.unwrap().is_none() },
        )
        .await;
    }

    // serviceExport runs in the agent: a Service exported to member2 has its EndpointSlices
    // (written by hand here, as for a Service without selector) collected by the agent into a Work
    // of member2's execution namespace, which the controller-manager's endpointSlice controller
    // turns into a control-plane EndpointSlice; unexporting removes both.
    let service: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"ports": [{"name": "sql", "port": 5432}]},
    }))
    .unwrap();
    Api::namespaced(observer.clone(), NS)
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "db-1", "labels": {"kubernetes.io/service-name": "db"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.9.0.7"]}],
        "ports": [{"name": "sql", "port": 5432, "protocol": "TCP"}],
    }))
    .unwrap();
    Api::namespaced(observer.clone(), NS)
        .create(&PostParams::default(), &slice)
        .await
        .unwrap();
    let exports: Api<ServiceExport> = Api::namespaced(host.clone(), NS);
    exports
        .create(&PostParams::default(), &ServiceExport::new(NS, "db"))
        .await
        .unwrap();
    let export_policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "db-export"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "multicluster.x-k8s.io/v1alpha1",
                                   "kind": "ServiceExport", "name": "db"}],
            "placement": {"clusterAffinity": {"clusterNames": ["member2"]}},
        },
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &export_policy)
        .await
        .unwrap();
    let collected = ListParams::default().labels("endpointslice.karmada.io/name=db");
    let host_slices: Api<EndpointSlice> = Api::namespaced(host.clone(), NS);
    eventually(
        "member2's EndpointSlice collected by the agent",
        &[&cm, &agent],
        || async {
            let works = works.list(&collected).await.unwrap().items;
            let imported = host_slices.get_opt("imported-member2-db-1").await.unwrap();
            works.len() == 1
                && imported.is_some_and(|s| {
                    s.endpoints
                        .iter()
                        .flatten()
                        .flat_map(|e| e.addresses.iter())
                        .eq(["10.9.0.7"].iter())
                })
        },
    )
    .await;
    exports
        .delete("db", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the collected EndpointSlice released",
        &[&cm, &agent],
        || async {
            works.list(&collected).await.unwrap().items.is_empty()
                && host_slices
                    .get_opt("imported-member2-db-1")
                    .await
                    .unwrap()
                    .is_none()
        },
    )
    .await;

    // endpointsliceCollect runs in the agent too: a MultiClusterService with the Pull member2 as
    // provider and member1 as consumer brings member2's (hand-made) EndpointSlice to member1, through
    // the agent's collected Work and the controller-manager's dispatch.
    let cache: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
        "metadata": {"name": "cache"},
        "spec": {"ports": [{"name": "redis", "port": 6379}]},
    }))
    .unwrap();
    Api::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &cache)
        .await
        .unwrap();
    let provided: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "cache-1", "labels": {"kubernetes.io/service-name": "cache"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.9.0.8"]}],
        "ports": [{"name": "redis", "port": 6379, "protocol": "TCP"}],
    }))
    .unwrap();
    Api::namespaced(observer.clone(), NS)
        .create(&PostParams::default(), &provided)
        .await
        .unwrap();
    let mcs: MultiClusterService = serde_json::from_value(json!({
        "apiVersion": "networking.karmada.io/v1alpha1",
        "kind": "MultiClusterService",
        "metadata": {"name": "cache"},
        "spec": {"types": ["CrossCluster"], "providerClusters": [{"name": "member2"}],
                 "consumerClusters": [{"name": "member1"}]},
    }))
    .unwrap();
    let mcss: Api<MultiClusterService> = Api::namespaced(host.clone(), NS);
    mcss.create(&PostParams::default(), &mcs).await.unwrap();
    let member1_slices: Api<EndpointSlice> = Api::namespaced(member1.client().await, NS);
    let dispatched = ListParams::default().labels("kubernetes.io/service-name=cache");
    eventually(
        "member2's EndpointSlice dispatched to member1",
        &[&cm, &agent],
        || async {
            member1_slices
                .list(&dispatched)
                .await
                .unwrap()
                .items
                .iter()
                .flat_map(|s| {
                    s.endpoints
                        .iter()
                        .flatten()
                        .flat_map(|e| e.addresses.iter())
                })
                .eq(["10.9.0.8"].iter())
        },
    )
    .await;
    mcss.delete("cache", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the dispatched EndpointSlice removed",
        &[&cm, &agent],
        || async {
            member1_slices
                .list(&dispatched)
                .await
                .unwrap()
                .items
                .is_empty()
        },
    )
    .await;

    // The audit evidence: member2 heard only from the agent (and this test's observer); member1,
    // the Push member, heard from the controller-manager (so the log does catch it).
    let since = |e: &testenv::audit::AuditEvent| e.request_received_timestamp >= started;
    let member2_events: Vec<_> = member2
        .audit_events()
        .unwrap()
        .into_iter()
        .filter(since)
        .collect();
    let users: BTreeSet<&str> = member2_events
        .iter()
        .map(|e| e.user.username.as_str())
        .collect();
    let allowed: BTreeSet<&str> = [AGENT_USER, OBSERVER, "system:apiserver"].into();
    assert!(users.is_subset(&allowed), "member2 heard from {users:?}");
    assert!(
        member2_events
            .iter()
            .all(|e| !e.user_agent.contains("karmada-controller-manager")),
        "the controller-manager's User-Agent reached member2"
    );
    // It created, repaired (update or patch), deleted, listed and watched there.
    for verbs in [
        &["create"][..],
        &["update", "patch"],
        &["delete"],
        &["list"],
        &["watch"],
    ] {
        assert!(
            member2_events.iter().any(|e| e.user.username == AGENT_USER
                && verbs.contains(&e.verb.as_str())
                && e.succeeded()),
            "no {verbs:?} by the agent in member2's audit log"
        );
    }
    let member1_users: BTreeSet<String> = member1
        .audit_events()
        .unwrap()
        .into_iter()
        .filter(since)
        .filter(|e| e.user_agent.contains("karmada-controller-manager"))
        .map(|e| e.user.username)
        .collect();
    assert!(
        !member1_users.is_empty(),
        "the controller-manager left no trace in member1's audit log"
    );
    drop(agent);
    drop(cm);
}
