//! The accurate estimator: Karmada's own `karmada-scheduler-estimator` (Go, v1.16, one per member,
//! built by `make karmada-binaries`) answers our scheduler over gRPC (`make
//! test-scheduler-estimator`).
//!
//! Two full members with kwok nodes (32 CPU each); member2's nodes are cordoned. Their Cluster
//! resource summaries still count the cordoned nodes, so the general estimate says both members
//! have room, while member2's estimator, which looks at schedulable nodes, says it has none. With
//! `--enable-scheduler-estimator`, a Divided workload weighted by available replicas:
//!
//! 1. goes entirely to member1 (general alone would split it 3/3): the minimum of the two estimates
//!    wins, which also shows our requests and the Go server's answers are understood both ways;
//! 2. after two schedulable nodes join member2 and a reschedule is requested, is split 3/3 (the
//!    accurate 64 CPU of each member; general alone would say 2/4 from member2's 128 CPU);
//! 3. with member2's nodes cordoned and its pods replaced, so its replicas stay Pending,
//!    Karmada's `karmada-descheduler` takes them off member2 in the binding after its unschedulable
//!    threshold (from member2's estimator, `GetUnschedulableReplicas`), and our scheduler puts them
//!    on member1: 6/0;
//! 4. after member2's estimator is killed and a reschedule is requested, is split 2/4 from the general
//!    estimate alone: an estimator that is down never fails a schedule. The fallback shows in the
//!    controller-manager's log and in `scheduler_estimator_requests_total`.
//!
//! Over mutual TLS (the estimator's `--grpc-auth-cert-file`, `--grpc-client-ca-file`), our client
//! with `--scheduler-estimator-ca-file`, `-cert-file` and `-key-file` settings gets answers
//! (`MaxAvailableReplicas`; `GetUnschedulableReplicas`, whose reference the estimator looks up), and
//! without its client certificate is refused.
//!
//! The estimators are found as Karmada finds them: an `ExternalName` Service
//! `karmada-scheduler-estimator-<cluster>` in `karmada-system` whose port 10352 (the
//! `--scheduler-estimator-port` default) targets the estimator's real port on 127.0.0.1.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::jiff::Timestamp;
use karmada_apis::{Cluster, PropagationPolicy, ResourceBinding};
use karmada_e2e::controller_manager::{Kcm, free_port};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testenv::{ApiServer, EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(120);
const NS: &str = "estimator";
const BINDING: &str = "web-deployment";

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        full_members: 2,
        kwok_nodes: 2,
        install_crds: true,
        ..Default::default()
    })
}

async fn create<K>(api: &Api<K>, object: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let o: K = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &o).await.unwrap();
}

/// Starts Go's `karmada-scheduler-estimator` for `member` and registers it the way Karmada finds
/// estimators: an ExternalName Service on the control plane.
async fn start_estimator(host: &kube::Client, member: &ApiServer) -> Kcm {
    let binary = testenv::binaries::locate_karmada("karmada-scheduler-estimator")
        .unwrap_or_else(|e| panic!("{e} (run `make karmada-binaries`)"));
    let port = free_port();
    let estimator = Kcm::start_program(
        &binary,
        member.kubeconfig_path(),
        &[
            &format!("--cluster-name={}", member.name()),
            &format!("--server-port={port}"),
        ],
        &[],
    );
    let services: Api<Service> = Api::namespaced(host.clone(), "karmada-system");
    create(
        &services,
        json!({
            "metadata": {"name": format!("karmada-scheduler-estimator-{}", member.name())},
            "spec": {
                "type": "ExternalName",
                "externalName": "127.0.0.1",
                "ports": [{"name": "grpc", "port": 10352, "targetPort": port}],
            },
        }),
    )
    .await;
    estimator
}

/// Starts Go's `karmada-descheduler` on the control plane, checking every 2 s for replicas
/// unschedulable for 2 s (Karmada's defaults: 2 min and 5 min).
fn start_descheduler(env: &TestEnv) -> Kcm {
    let binary = testenv::binaries::locate_karmada("karmada-descheduler")
        .unwrap_or_else(|e| panic!("{e} (run `make karmada-binaries`)"));
    Kcm::start_program(
        &binary,
        env.host().kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--descheduling-interval=2s",
            "--unschedulable-threshold=2s",
            "--scheduler-estimator-timeout=3s",
        ],
        &[],
    )
}

/// `member`'s `spec.clusters` replicas of the binding (0 when absent), or why they cannot be read.
async fn placement(bindings: &Api<ResourceBinding>) -> Result<Vec<(String, i32)>, String> {
    let rb = bindings
        .get_opt(BINDING)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no binding yet")?;
    let mut clusters: Vec<(String, i32)> = rb
        .spec
        .clusters
        .iter()
        .map(|c| (c.name.clone(), c.replicas))
        .collect();
    clusters.sort();
    Ok(clusters)
}

fn owned(pairs: &[(&str, i32)]) -> Vec<(String, i32)> {
    pairs.iter().map(|(n, r)| ((*n).to_owned(), *r)).collect()
}

/// Requests a fresh schedule of the binding, as a WorkloadRebalancer does (later than the last
/// schedule, which has a one-second resolution).
async fn trigger_reschedule(bindings: &Api<ResourceBinding>) {
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let now = Timestamp::now().to_string();
    bindings
        .patch(
            BINDING,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"rescheduleTriggeredAt": now}})),
        )
        .await
        .unwrap();
}

async fn set_unschedulable(member: &kube::Client, unschedulable: bool) {
    let nodes: Api<Node> = Api::all(member.clone());
    for node in nodes.list(&ListParams::default()).await.unwrap().items {
        let name = node.metadata.name.unwrap();
        nodes
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"unschedulable": unschedulable}})),
            )
            .await
            .unwrap();
    }
}

/// Adds `count` kwok-managed 32-CPU nodes to `member` (kwok makes them Ready).
async fn add_nodes(member: &kube::Client, prefix: &str, count: usize) {
    let nodes: Api<Node> = Api::all(member.clone());
    for i in 0..count {
        create(
            &nodes,
            json!({
                "metadata": {
                    "name": format!("{prefix}-{i}"),
                    "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                    "labels": {"type": "kwok", "kubernetes.io/os": "linux", "kubernetes.io/hostname": format!("{prefix}-{i}")},
                },
                "status": {
                    "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                    "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                },
            }),
        )
        .await;
    }
}

/// The CPU a Cluster's resource summary says is allocatable (whole cores).
fn summary_cpu(c: &Cluster) -> Option<i64> {
    let q = c
        .status
        .as_ref()?
        .resource_summary
        .as_ref()?
        .allocatable
        .get("cpu")?;
    q.0.parse().ok()
}

/// The sum of `scheduler_estimator_requests_total` samples matching every label in `labels`.
fn estimator_requests(metrics: &str, labels: &[&str]) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("scheduler_estimator_requests_total{"))
        .filter(|l| labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the members and the workload"
)]
async fn accurate_estimates_from_karmadas_estimator_and_fallback() {
    let env = env();
    let host = env.host().client().await;
    let member1 = env.member("member1").unwrap();
    let member2 = env.member("member2").unwrap();
    let member2_client = member2.client().await;

    // member2's nodes take no pods; its resource summary still counts them.
    set_unschedulable(&member2_client, true).await;
    let namespaces = Api::<Namespace>::all(host.clone());
    if namespaces
        .get_opt("karmada-system")
        .await
        .unwrap()
        .is_none()
    {
        create(&namespaces, json!({"metadata": {"name": "karmada-system"}})).await;
    }
    let _estimator1 = start_estimator(&host, member1).await;
    let estimator2 = start_estimator(&host, member2).await;

    let cm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--cluster-status-update-frequency=1s",
            "--enable-scheduler-estimator",
            "--scheduler-estimator-timeout=3s",
        ],
        &[],
    );
    for m in [member1, member2] {
        karmada_e2e::karmadactl::join(env.host(), m, &[])
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
    }
    let clusters: Api<Cluster> = Api::all(host.clone());
    cm.eventually("both members' summaries", WAIT, async || {
        let list = clusters
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let cpu: Vec<Option<i64>> = list.items.iter().map(summary_cpu).collect();
        (cpu == [Some(64), Some(64)])
            .then_some(())
            .ok_or(format!("allocatable cpu {cpu:?}"))
    })
    .await;
    cm.eventually("connections to both estimators", WAIT, async || {
        let log = cm.log();
        let connected = log
            .lines()
            .filter(|l| l.contains("connection with the scheduler estimator established"))
            .count();
        (connected >= 2)
            .then_some(())
            .ok_or(format!("{connected} connected"))
    })
    .await;

    create(
        &Api::<Namespace>::all(host.clone()),
        json!({"metadata": {"name": NS}}),
    )
    .await;
    create(
        &Api::<Deployment>::namespaced(host.clone(), NS),
        json!({
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 6,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "web", "image": "nginx:1.27",
                        "resources": {"requests": {"cpu": "1"}},
                    }]},
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
                    "replicaScheduling": {
                        "replicaSchedulingType": "Divided",
                        "replicaDivisionPreference": "Weighted",
                        "weightPreference": {"dynamicWeight": "AvailableReplicas"},
                    },
                },
            },
        }),
    )
    .await;
    let bindings: Api<ResourceBinding> = Api::namespaced(host.clone(), NS);

    // 1. member2's estimator says 0: everything goes to member1.
    cm.eventually("all replicas on member1", WAIT, async || {
        let got = placement(&bindings).await?;
        (got == owned(&[("member1", 6)]))
            .then_some(())
            .ok_or(format!("{got:?}"))
    })
    .await;

    // 2. Two schedulable nodes join member2: its summary doubles (128 CPU) but its estimator
    //    sees 64 CPU free, as much as member1 has: the minimum splits the workload evenly.
    add_nodes(&member2_client, "member2-extra", 2).await;
    cm.eventually(
        "member2's summary counting the new nodes",
        WAIT,
        async || {
            let c = clusters.get("member2").await.map_err(|e| e.to_string())?;
            (summary_cpu(&c) == Some(128))
                .then_some(())
                .ok_or(format!("{:?}", summary_cpu(&c)))
        },
    )
    .await;
    trigger_reschedule(&bindings).await;
    cm.eventually("3/3 from the accurate estimates", WAIT, async || {
        let got = placement(&bindings).await?;
        (got == owned(&[("member1", 3), ("member2", 3)]))
            .then_some(())
            .ok_or(format!("{got:?}"))
    })
    .await;
    let metrics = cm.metrics().unwrap_or_default();
    assert!(
        estimator_requests(
            &metrics,
            &["member_cluster=\"member2\"", "result=\"success\""]
        ) >= 2,
        "{metrics}"
    );

    // 3. Karmada's descheduler with our scheduler: member2's nodes are cordoned and its pods
    //     replaced, so its 3 replicas stay Pending; after the unschedulable threshold the
    //     descheduler, asking member2's estimator (`GetUnschedulableReplicas`), takes them off
    //     member2 in the binding, and our scheduler places them where the estimators see room.
    let descheduler = start_descheduler(env);
    set_unschedulable(&member2_client, true).await;
    Api::<Pod>::namespaced(member2_client.clone(), NS)
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    cm.eventually(
        "the descheduler moved member2's replicas",
        WAIT,
        async || {
            let got = placement(&bindings).await?;
            let on_member2: i32 = got
                .iter()
                .filter(|(c, _)| c == "member2")
                .map(|(_, r)| r)
                .sum();
            (got.contains(&("member1".to_owned(), 6)) && on_member2 == 0)
                .then_some(())
                .ok_or(format!(
                    "{got:?}; descheduler log:\n{}",
                    descheduler.log_tail(15)
                ))
        },
    )
    .await;
    drop(descheduler);

    // 4. member2's estimator goes away: the general estimate alone decides (64 vs 128 CPU).
    drop(estimator2);
    trigger_reschedule(&bindings).await;
    cm.eventually("2/4 from the general estimate", WAIT, async || {
        let got = placement(&bindings).await?;
        (got == owned(&[("member1", 2), ("member2", 4)]))
            .then_some(())
            .ok_or(format!("{got:?}"))
    })
    .await;
    let metrics = cm.metrics().unwrap_or_default();
    assert!(
        estimator_requests(
            &metrics,
            &["member_cluster=\"member2\"", "result=\"error\""]
        ) >= 1,
        "{metrics}"
    );
    let log = cm.log();
    assert!(
        log.contains("max cluster available replicas error")
            && log.contains("gRPC request cluster(member2) estimator error"),
        "{}",
        cm.log_tail(40)
    );
    let rb = bindings.get(BINDING).await.unwrap();
    let scheduled = rb
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Scheduled"))
        .map(|c| c.status.clone());
    assert_eq!(scheduled.as_deref(), Some("True"));
}

/// MaxAvailableComponentSets (gate MultiplePodTemplatesScheduling) asked of Karmada's estimator of
/// member1 at `address`: it reads our request (cluster, components, namespace) and answers a set
/// count, and refuses a request naming another cluster.
async fn component_sets_are_answered(
    address: &[String],
    tls: Option<&std::sync::Arc<rustls::ClientConfig>>,
    estimator: &Kcm,
) {
    use karmada_controllers::scheduler::estimator::{dial, proto};

    let channel = dial::dial(address, tls).await.unwrap();
    let component = |name: &str, replicas: i32| proto::Component {
        name: name.into(),
        replica_requirements: Some(proto::ComponentReplicaRequirements {
            resource_request: [("cpu".to_owned(), proto::Quantity { string: "1".into() })].into(),
            ..Default::default()
        }),
        replicas,
    };
    let sets = proto::EstimatorClient::new(channel)
        .max_available_component_sets(
            proto::MaxAvailableComponentSetsRequest {
                cluster: "member1".into(),
                components: vec![component("jobmanager", 1), component("taskmanager", 2)],
                namespace: "default".into(),
            },
            "kind=FlinkDeployment, name=default/job",
            Duration::from_secs(3),
        )
        .await;
    let log = estimator.log_tail(20);
    let sets = sets.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert!(sets.max_sets >= 0, "{}", sets.max_sets);
    // A request for another cluster is refused, naming both: the cluster field arrived.
    let channel = dial::dial(address, tls).await.unwrap();
    let other = proto::EstimatorClient::new(channel)
        .max_available_component_sets(
            proto::MaxAvailableComponentSetsRequest {
                cluster: "member9".into(),
                components: vec![component("a", 1), component("b", 1)],
                namespace: "default".into(),
            },
            "kind=Test",
            Duration::from_secs(3),
        )
        .await;
    let why = format!("{other:?}");
    assert!(
        why.contains("got: member9, desire: member1"),
        "{why}\n{}",
        estimator.log_tail(20)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_with_karmadas_estimator() {
    use karmada_controllers::context::SchedulerEstimatorSettings;
    use karmada_controllers::scheduler::estimator::{dial, proto};

    let env = env();
    let member1 = env.member("member1").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pki = testenv::pki::ClusterPki::generate("estimator", dir.path()).unwrap();
    let (server_cert, server_key) = pki
        .issue_serving("estimator-server", &["127.0.0.1"], dir.path())
        .unwrap();
    let (client_cert, client_key) = pki
        .issue_client("karmada-scheduler", &[], dir.path())
        .unwrap();
    let binary = testenv::binaries::locate_karmada("karmada-scheduler-estimator")
        .unwrap_or_else(|e| panic!("{e} (run `make karmada-binaries`)"));
    let port = free_port();
    let estimator = Kcm::start_program(
        &binary,
        member1.kubeconfig_path(),
        &[
            "--cluster-name=member1",
            &format!("--server-port={port}"),
            &format!("--grpc-auth-cert-file={}", server_cert.display()),
            &format!("--grpc-auth-key-file={}", server_key.display()),
            &format!("--grpc-client-ca-file={}", pki.ca_cert.display()),
        ],
        &[],
    );
    let address = vec![format!("127.0.0.1:{port}")];
    let mut settings = SchedulerEstimatorSettings {
        enabled: true,
        ca_file: pki.ca_cert.display().to_string(),
        cert_file: client_cert.display().to_string(),
        key_file: client_key.display().to_string(),
        ..Default::default()
    };
    let tls = dial::tls_config(&settings).unwrap();
    let request = proto::MaxAvailableReplicasRequest {
        cluster: "member1".into(),
        replica_requirements: Some(proto::ReplicaRequirements {
            resource_request: [("cpu".to_owned(), proto::Quantity { string: "1".into() })].into(),
            namespace: "default".into(),
            ..Default::default()
        }),
    };
    let answer = estimator
        .eventually("an answer over mutual TLS", WAIT, async || {
            let channel = dial::dial(&address, tls.as_ref())
                .await
                .map_err(|e| e.to_string())?;
            let client = proto::EstimatorClient::new(channel);
            client
                .max_available_replicas(request.clone(), "kind=Test", Duration::from_secs(3))
                .await
                .map_err(|e| e.to_string())
        })
        .await;
    // Two 32-CPU nodes, less what the other test runs there.
    assert!(
        (1..=64).contains(&answer.max_replicas),
        "{}",
        answer.max_replicas
    );
    let channel = dial::dial(&address, tls.as_ref()).await.unwrap();
    let unschedulable = proto::EstimatorClient::new(channel)
        .get_unschedulable_replicas(
            proto::UnschedulableReplicasRequest {
                cluster: "member1".into(),
                resource: Some(proto::ObjectReference {
                    api_version: "apps/v1".into(),
                    kind: "Deployment".into(),
                    namespace: "default".into(),
                    name: "absent".into(),
                }),
                unschedulable_threshold: 60_000_000_000,
            },
            "kind=Deployment, name=default/absent",
            Duration::from_secs(3),
        )
        .await;
    // The estimator read the reference: it looked the Deployment up by namespace and name.
    let why = format!("{unschedulable:?}");
    assert!(
        why.contains("deployments.apps \\\"default/absent\\\" not found"),
        "{why}\n{}",
        estimator.log_tail(20)
    );

    component_sets_are_answered(&address, tls.as_ref(), &estimator).await;

    // Without the client certificate the estimator refuses the connection.
    settings.cert_file.clear();
    settings.key_file.clear();
    let anonymous = dial::tls_config(&settings).unwrap();
    let refused = match dial::dial(&address, anonymous.as_ref()).await {
        Err(e) => Err(e.to_string()),
        Ok(channel) => proto::EstimatorClient::new(channel)
            .max_available_replicas(request, "kind=Test", Duration::from_secs(3))
            .await
            .map_err(|e| e.to_string()),
    };
    assert!(refused.is_err(), "{refused:?}");
}
