//! Cluster failover against the real controller-manager binary and real API servers: a
//! ClusterTaintPolicy puts a NoExecute taint on a member whose kube-apiserver was killed, and the
//! taint manager moves the workloads that do not tolerate it.
//!
//! member1 and member2 are full members (kube-controller-manager, kube-scheduler, kwok nodes: their
//! Deployments become really available, or really never do: an OverridePolicy gives a Deployment a
//! node selector no node matches in one member, so the member's kube-scheduler leaves its pods
//! Pending); member3 is an API server only and is killed. One kill serves every case, each a
//! Deployment divided over two members:
//! - `graceful` (member1, member3; purge mode from `--no-execute-taint-eviction-purge-mode`,
//!   Gracefully): all replicas move to member1; member3's Work stays until member1 reports the
//!   workload healthy (as in Karmada, the health last reported, which may still be that of the old
//!   replica count), then its eviction task is dropped and the Work deleted, never before;
//! - `direct` (member2, member3; the policy's `failover.cluster.purgeMode: Directly`; never ready in
//!   member2): the replicas move to member2 and member3's Work is deleted at once, while the task
//!   stays (the replacement never becomes healthy);
//! - `tolerating` (a toleration with `tolerationSeconds`): evicted, but not before the taint is that
//!   old; its replicas become healthy in member2, so member3's Work goes too;
//! - `tolerant` (a toleration without `tolerationSeconds`): never evicted.
//!
//! Beside it, application failover (`failover.application`, `StatefulFailoverInjection` on):
//! `unhealthy` runs in member1 first (the policy's first cluster affinity), where its pods never get
//! a node; after `tolerationSeconds` it is evicted (`Directly`) and moves to member2 (the second
//! affinity), created there with the label its statePreservation rule read from member1's status,
//! and becomes healthy there.
//!
//! Then member3 comes back: its taint is removed, the objects of the Works deleted meanwhile go,
//! nothing moves back and no object is recreated (the UIDs stay). Last, with a controller-manager running only `cluster` (and so the taint
//! manager), twelve bindings on four Clusters the test taints NoExecute at once are evicted at
//! `--resource-eviction-rate`, not all at once.
//!
//! The time from the kill to `graceful` being whole again is printed
//! (`cargo test -p karmada-e2e --test integration failover:: -- --nocapture`).
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Taint};
use karmada_apis::{
    Cluster, ClusterTaintPolicy, OverridePolicy, PropagationPolicy, ResourceBinding, Work,
};
use karmada_e2e::controller_manager::{Kcm, start_joined};
use karmada_e2e::wait::eventually_showing;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const NS: &str = "failover";
/// The taint the ClusterTaintPolicy manages.
const TAINT: &str = "failover.karmada-rs.io/not-ready";
/// `tolerationSeconds` of the `tolerating` Deployment.
const TOLERATION_SECONDS: i64 = 15;
const WAIT: Duration = Duration::from_secs(120);
/// `decisionConditions.tolerationSeconds` of the `unhealthy` Deployment. It applies in member2 too,
/// from the moment the failover creates it there: long enough for member2's kube-controller-manager
/// and kwok to roll it out on a loaded machine, or it fails over from member2 as well.
const APP_TOLERATION_SECONDS: i64 = 15;
/// The label `unhealthy`'s statePreservation rule fills from member1's status.
const STATE_LABEL: &str = "failover.karmada.io/updated-replicas";
/// `--resource-eviction-rate` of the pacing case (per eviction worker; three workers).
const PACED_RATE: f64 = 2.0;

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 3,
        full_members: 2,
        kwok_nodes: 1,
        install_crds: true,
        host_controller_manager: false,
        ..Default::default()
    })
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Polls `check` every 250 ms until it returns `Ok`; panics with the last reason and the
/// controller-manager's log on timeout.
async fn eventually<T>(what: &str, kcm: &Kcm, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    let every = Duration::from_millis(250);
    let log = || format!("controller-manager log (tail):\n{}", kcm.log_tail(80));
    eventually_showing(what, WAIT, every, log, check).await
}

/// A Deployment `name` with `replicas`, and a PropagationPolicy dividing it over `clusters` with
/// equal weights, tolerating `tolerations`, with `failover` as the policy's failover behaviour.
async fn propagate(
    host: &Client,
    name: &str,
    clusters: [&str; 2],
    tolerations: Value,
    failover: Value,
) {
    create_deployment(host, name, 2).await;
    let weights: Vec<Value> = clusters
        .iter()
        .map(|c| json!({"targetCluster": {"clusterNames": [c]}, "weight": 1}))
        .collect();
    let mut spec = json!({
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
        "placement": {
            "clusterAffinity": {"clusterNames": clusters},
            "clusterTolerations": tolerations,
            "replicaScheduling": {
                "replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "Weighted",
                "weightPreference": {"staticWeightList": weights},
            },
        },
    });
    if !failover.is_null() {
        spec["failover"] = failover;
    }
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
}

/// Creates Deployment `name` with `replicas` in the host's `NS`.
async fn create_deployment(host: &Client, name: &str, replicas: i32) {
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
            },
        },
    }))
    .unwrap();
    Api::<Deployment>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &deploy)
        .await
        .unwrap();
}

/// `unhealthy`: one replica, member1 first and member2 as the fallback affinity, failing over
/// `Directly` after `APP_TOLERATION_SECONDS` and preserving `.updatedReplicas` as `STATE_LABEL`.
async fn propagate_unhealthy(host: &Client) {
    create_deployment(host, "unhealthy", 1).await;
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "unhealthy"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "unhealthy"}],
            // Karmada's application failover acts only on bindings that propagate dependencies.
            "propagateDeps": true,
            "placement": {
                "clusterAffinities": [
                    {"affinityName": "primary", "clusterNames": ["member1"]},
                    {"affinityName": "backup", "clusterNames": ["member2"]},
                ],
                "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
            },
            "failover": {"application": {
                "decisionConditions": {"tolerationSeconds": APP_TOLERATION_SECONDS},
                "purgeMode": "Directly",
                "statePreservation": {"rules": [
                    {"aliasLabelName": STATE_LABEL, "jsonPath": "{.updatedReplicas}"},
                ]},
            }},
        },
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
}

/// An OverridePolicy giving Deployment `name` in `cluster` (only) a node selector no node matches:
/// the member's kube-scheduler leaves its pods Pending, so it never becomes available there.
async fn never_ready_in(host: &Client, name: &str, cluster: &str) {
    let policy: OverridePolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "OverridePolicy",
        "metadata": {"name": format!("{name}-never-ready-in-{cluster}")},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
            "overrideRules": [{
                "targetCluster": {"clusterNames": [cluster]},
                "overriders": {"plaintext": [{
                    "path": "/spec/template/spec/nodeSelector",
                    "operator": "add",
                    "value": {"failover.karmada-rs.io/no-such-node": "true"},
                }]},
            }],
        },
    }))
    .unwrap();
    Api::<OverridePolicy>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
}

/// Watches `name` in `api` from before it exists and returns (once awaited) the first version
/// `matches` accepts: every version is seen, so a state the controllers pass through quickly is
/// not missed.
async fn first_version<K>(
    api: &Api<K>,
    name: &str,
    matches: impl Fn(&K) -> bool + Send + 'static,
) -> tokio::task::JoinHandle<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let wp = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut stream = api.watch(&wp, "0").await.unwrap().boxed();
    tokio::spawn(async move {
        let found = async move {
            while let Some(ev) = stream.next().await {
                match ev.unwrap() {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) if matches(&o) => return o,
                    WatchEvent::Error(e) => panic!("watch error: {e:?}"),
                    _ => {}
                }
            }
            panic!("watch ended early");
        };
        tokio::time::timeout(WAIT, found)
            .await
            .expect("no matching version in time")
    })
}

/// The UID of Deployment `name` in `member`, once it is there: a Work that exists may not be
/// applied yet.
async fn uid_in(kcm: &Kcm, member: &Client, name: &str) -> String {
    let api = Api::<Deployment>::namespaced(member.clone(), NS);
    eventually(
        &format!("Deployment {name} in the member"),
        kcm,
        async || {
            api.get_opt(name)
                .await
                .unwrap()
                .and_then(|d| d.uid())
                .ok_or_else(|| "not there yet".to_owned())
        },
    )
    .await
}

fn binding_name(name: &str) -> String {
    format!("{name}-deployment")
}

fn scheduled(rb: &ResourceBinding) -> Vec<(String, i32)> {
    rb.spec
        .clusters
        .iter()
        .map(|c| (c.name.clone(), c.replicas))
        .collect()
}

/// The member3 Work of Deployment `name`: `None` when gone, else whether it is being deleted.
async fn member3_work(host: &Client, name: &str) -> Option<bool> {
    let works: Api<Work> = Api::namespaced(host.clone(), "karmada-es-member3");
    let work = karmada_apis::names::work_name("Deployment", name, NS);
    works
        .get_opt(&work)
        .await
        .unwrap()
        .map(|w| w.metadata.deletion_timestamp.is_some())
}

fn task_from_member3(
    rb: &ResourceBinding,
) -> Option<&karmada_apis::work::v1alpha2::GracefulEvictionTask> {
    rb.spec
        .graceful_eviction_tasks
        .iter()
        .find(|t| t.from_cluster == "member3")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn a_killed_member_is_tainted_and_its_workloads_move_unless_tolerated() {
    let env = env();
    let host = env.host().client().await;
    let kcm = start_joined(
        env,
        &[
            "--leader-elect=false",
            "--cluster-status-update-frequency=1s",
            "--cluster-failure-threshold=2s",
            "--cluster-success-threshold=1s",
            "--feature-gates=Failover=true,StatefulFailoverInjection=true",
            "--enable-no-execute-taint-eviction=true",
            "--resource-eviction-rate=20",
        ],
        // API-server-only members have no token controller: do not wait long for it.
        &["--token-wait=2s"],
        WAIT,
    )
    .await;
    let clusters: Api<Cluster> = Api::all(host.clone());

    let policy: ClusterTaintPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "ClusterTaintPolicy",
        "metadata": {"name": "not-ready"},
        "spec": {
            "targetClusters": {"clusterNames": ["member3"]},
            "addOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["False", "Unknown"]}],
            "removeOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["True"]}],
            "taints": [{"key": TAINT, "effect": "NoExecute"}],
        },
    }))
    .unwrap();
    Api::<ClusterTaintPolicy>::all(host.clone())
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();

    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(host.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let toleration = |seconds: Option<i64>| {
        let mut t = json!({"key": TAINT, "operator": "Exists", "effect": "NoExecute"});
        if let Some(s) = seconds {
            t["tolerationSeconds"] = json!(s);
        }
        json!([t])
    };
    // Before the Deployments, so their first version in those members is already the unready one.
    never_ready_in(&host, "direct", "member2").await;
    never_ready_in(&host, "unhealthy", "member1").await;
    propagate(
        &host,
        "graceful",
        ["member1", "member3"],
        json!([]),
        Value::Null,
    )
    .await;
    propagate(
        &host,
        "direct",
        ["member2", "member3"],
        json!([]),
        json!({"cluster": {"purgeMode": "Directly"}}),
    )
    .await;
    propagate(
        &host,
        "tolerating",
        ["member2", "member3"],
        toleration(Some(TOLERATION_SECONDS)),
        Value::Null,
    )
    .await;
    propagate(
        &host,
        "tolerant",
        ["member2", "member3"],
        toleration(None),
        Value::Null,
    )
    .await;

    // Application failover: watched from the start, so the short-lived states are seen.
    let rbs: Api<ResourceBinding> = Api::namespaced(host.clone(), NS);
    let member1_client = env.members()[0].client().await;
    let member2_client = env.members()[1].client().await;
    let member3_client = env.members()[2].client().await;
    let evicted_from_member1 = first_version(&rbs, &binding_name("unhealthy"), |rb| {
        rb.spec
            .graceful_eviction_tasks
            .iter()
            .any(|t| t.from_cluster == "member1")
    })
    .await;
    let created_in_member2 = first_version(
        &Api::<Deployment>::namespaced(member2_client.clone(), NS),
        "unhealthy",
        |_| true,
    )
    .await;
    propagate_unhealthy(&host).await;

    let names = ["graceful", "direct", "tolerating", "tolerant"];
    for name in names {
        eventually(&format!("{name} on member3"), &kcm, async || {
            let rb = rbs.get_opt(&binding_name(name)).await.unwrap();
            let on = rb.as_ref().map(scheduled).unwrap_or_default();
            match member3_work(&host, name).await {
                Some(false) if on.iter().any(|(c, r)| c == "member3" && *r == 1) => Ok(()),
                work => Err(format!("scheduled {on:?}, member3 Work {work:?}")),
            }
        })
        .await;
    }
    // No NoExecute taint while member3 is healthy.
    let member3 = clusters.get("member3").await.unwrap();
    assert!(
        member3.spec.taints.iter().all(|t| t.key != TAINT),
        "{:?}",
        member3.spec.taints
    );

    let in_member1 = eventually("unhealthy in member1", &kcm, async || {
        Api::<Deployment>::namespaced(member1_client.clone(), NS)
            .get_opt("unhealthy")
            .await
            .unwrap()
            .ok_or_else(|| "not yet".to_owned())
    })
    .await;
    // What must not be recreated by the failover or by member3's return.
    let uids_before = [
        (
            "member1",
            "graceful",
            uid_in(&kcm, &member1_client, "graceful").await,
        ),
        (
            "member2",
            "direct",
            uid_in(&kcm, &member2_client, "direct").await,
        ),
        (
            "member3",
            "tolerant",
            uid_in(&kcm, &member3_client, "tolerant").await,
        ),
    ];

    // The graceful eviction controller stamps a new task before it judges it, so the stamped
    // version is always written.
    let tolerating_evicted = first_version(&rbs, &binding_name("tolerating"), |rb| {
        task_from_member3(rb).is_some_and(|t| t.creation_timestamp.is_some())
    })
    .await;
    let killed = Instant::now();
    env.members()[2].kill();

    let taint: Taint = eventually("the NoExecute taint on member3", &kcm, async || {
        let c = clusters.get("member3").await.unwrap();
        c.spec
            .taints
            .iter()
            .find(|t| t.key == TAINT && t.effect == "NoExecute")
            .cloned()
            .ok_or_else(|| {
                format!(
                    "taints {:?}, status {:?}",
                    c.spec.taints,
                    c.status.map(|s| s.conditions)
                )
            })
    })
    .await;
    let tainted_at = taint.time_added.clone().expect("timeAdded").0;
    println!("member3 tainted {:?} after the kill", killed.elapsed());

    // graceful: every replica on member1; member3's Work is deleted only once its task is gone.
    eventually("graceful on member1 only", &kcm, async || {
        let rb = rbs.get(&binding_name("graceful")).await.unwrap();
        let on = scheduled(&rb);
        if on == [("member1".to_owned(), 2)] {
            Ok(())
        } else {
            Err(format!("scheduled {on:?}"))
        }
    })
    .await;
    eventually(
        "graceful: member3's Work deleted after its task",
        &kcm,
        async || {
            let work = member3_work(&host, "graceful").await;
            // Read after the Work: a deletion seen there must already be reflected in the binding.
            let rb = rbs.get(&binding_name("graceful")).await.unwrap();
            match work {
                Some(false) => Err(format!("Work kept; task {:?}", task_from_member3(&rb))),
                _ => {
                    assert!(
                        task_from_member3(&rb).is_none(),
                        "member3's Work deleted while its graceful eviction task remains: {:?}",
                        rb.spec.graceful_eviction_tasks
                    );
                    Ok(())
                }
            }
        },
    )
    .await;
    // Whole again: member1 runs both replicas, ready (kwok makes its pods ready).
    let member1: Api<Deployment> = Api::namespaced(env.members()[0].client().await, NS);
    eventually("graceful: 2 ready replicas in member1", &kcm, async || {
        let d = member1.get_opt("graceful").await.unwrap();
        let (spec, ready) = d
            .map(|d| (d.spec.replicas, d.status.and_then(|s| s.ready_replicas)))
            .unwrap_or_default();
        if (spec, ready) == (Some(2), Some(2)) {
            Ok(())
        } else {
            Err(format!("replicas {spec:?}, ready {ready:?}"))
        }
    })
    .await;
    println!(
        "graceful whole on member1 {:?} after the kill",
        killed.elapsed()
    );

    // direct: member3's Work is deleted while the eviction task stays (never healthy in member2).
    eventually("direct: member3's Work deleted at once", &kcm, async || {
        let rb = rbs.get(&binding_name("direct")).await.unwrap();
        let on = scheduled(&rb);
        let work = member3_work(&host, "direct").await;
        match (on.as_slice(), work) {
            ([(c, 2)], None | Some(true)) if c == "member2" => Ok(()),
            _ => Err(format!("scheduled {on:?}, member3 Work {work:?}")),
        }
    })
    .await;
    let rb = rbs.get(&binding_name("direct")).await.unwrap();
    let task = task_from_member3(&rb)
        .expect("direct keeps its eviction task while member2 is not healthy");
    assert_eq!(
        task.purge_mode
            .as_ref()
            .map(karmada_apis::policy::v1alpha1::PurgeMode::as_str),
        Some("Directly")
    );
    assert_eq!(
        (task.producer.as_str(), task.reason.as_str()),
        ("TaintManager", "TaintUntolerated")
    );

    // tolerating: evicted, not before the taint is TOLERATION_SECONDS old (its task lives only until
    // the replicas are healthy in member2, so it was watched for).
    let rb = tolerating_evicted.await.unwrap();
    let task = task_from_member3(&rb)
        .and_then(|t| t.creation_timestamp.clone())
        .unwrap();
    let waited = task.0.as_second() - tainted_at.as_second();
    assert!(
        waited >= TOLERATION_SECONDS,
        "evicted {waited}s after the taint, tolerationSeconds is {TOLERATION_SECONDS}"
    );

    // tolerant: still on member3, with no eviction task, after tolerating was evicted.
    let rb = rbs.get(&binding_name("tolerant")).await.unwrap();
    assert!(
        scheduled(&rb).iter().any(|(c, _)| c == "member3") && task_from_member3(&rb).is_none(),
        "tolerant moved: {:?}, tasks {:?}",
        scheduled(&rb),
        rb.spec.graceful_eviction_tasks
    );

    // unhealthy: evicted from member1 with its state, created in member2 carrying it.
    let rb = evicted_from_member1.await.unwrap();
    let task = rb
        .spec
        .graceful_eviction_tasks
        .iter()
        .find(|t| t.from_cluster == "member1")
        .unwrap();
    assert!(
        !scheduled(&rb).iter().any(|(c, _)| c == "member1"),
        "{:?}",
        scheduled(&rb)
    );
    assert_eq!(
        (task.reason.as_str(), task.producer.as_str()),
        (
            "ApplicationFailure",
            "resource-binding-application-failover-controller"
        )
    );
    assert_eq!(
        task.purge_mode
            .as_ref()
            .map(karmada_apis::policy::v1alpha1::PurgeMode::as_str),
        Some("Directly")
    );
    assert_eq!(
        task.preserved_label_state
            .get(STATE_LABEL)
            .map(String::as_str),
        Some("1"),
        "{task:?}"
    );
    assert_eq!(task.clusters_before_failover, ["member1"]);
    let in_member2 = created_in_member2.await.unwrap();
    assert_eq!(
        in_member2.labels().get(STATE_LABEL).map(String::as_str),
        Some("1"),
        "unhealthy created in member2 without the preserved state: {:?}",
        in_member2.labels()
    );
    // Not before tolerationSeconds (server times, whole seconds).
    let created = |d: &Deployment| d.metadata.creation_timestamp.clone().unwrap().0.as_second();
    let waited = created(&in_member2) - created(&in_member1);
    assert!(
        waited >= APP_TOLERATION_SECONDS,
        "moved {waited}s after it was created in member1; tolerationSeconds is {APP_TOLERATION_SECONDS}"
    );
    eventually("unhealthy: member1's Work deleted", &kcm, async || {
        let works: Api<Work> = Api::namespaced(host.clone(), "karmada-es-member1");
        let name = karmada_apis::names::work_name("Deployment", "unhealthy", NS);
        match works.get_opt(&name).await.unwrap() {
            None => Ok(()),
            Some(w) => Err(format!(
                "deleting: {}",
                w.metadata.deletion_timestamp.is_some()
            )),
        }
    })
    .await;

    // Whole again in member2: its pod ready (kwok), the binding's aggregated health Healthy, and
    // the eviction task dropped (Directly keeps it only until the replacement is healthy).
    let member2: Api<Deployment> = Api::namespaced(member2_client.clone(), NS);
    eventually("unhealthy: ready in member2", &kcm, async || {
        let ready = member2
            .get_opt("unhealthy")
            .await
            .unwrap()
            .and_then(|d| d.status)
            .and_then(|s| s.ready_replicas);
        let rb = rbs.get(&binding_name("unhealthy")).await.unwrap();
        let tasks = rb.spec.graceful_eviction_tasks.len();
        if ready == Some(1) && tasks == 0 {
            Ok(())
        } else {
            Err(format!("ready {ready:?}, {tasks} eviction tasks"))
        }
    })
    .await;

    member_comes_back(env, &host, &kcm, &uids_before, &in_member2).await;
    drop(kcm);
    evictions_are_paced(env, &host).await;
}

/// member3 returns: its taint goes, nothing moves back, and nothing was recreated.
async fn member_comes_back(
    env: &TestEnv,
    host: &Client,
    kcm: &Kcm,
    uids_before: &[(&str, &str, String)],
    unhealthy_in_member2: &Deployment,
) {
    let returned = Instant::now();
    env.members()[2].start().await.unwrap();
    let clusters: Api<Cluster> = Api::all(host.clone());
    eventually("member3 Ready and untainted", kcm, async || {
        let c = clusters.get("member3").await.unwrap();
        if c.is_ready() && c.spec.taints.iter().all(|t| t.key != TAINT) {
            Ok(())
        } else {
            Err(format!("taints {:?}", c.spec.taints))
        }
    })
    .await;
    println!(
        "member3 untainted {:?} after its return",
        returned.elapsed()
    );
    // The Works deleted while member3 was away are finished now: their objects go (tolerating's
    // once its replicas are healthy in member2, which may be before or after the return).
    let member3 = env.members()[2].client().await;
    let member3_deploys: Api<Deployment> = Api::namespaced(member3.clone(), NS);
    for name in ["graceful", "direct", "tolerating"] {
        eventually(
            &format!("{name} removed from member3"),
            kcm,
            async || match (
                member3_deploys.get_opt(name).await.unwrap(),
                member3_work(host, name).await,
            ) {
                (None, None) => Ok(()),
                (d, w) => Err(format!("object there: {}, Work {w:?}", d.is_some())),
            },
        )
        .await;
    }
    // Nothing moved back, and every binding's placement is the scheduler's latest.
    let rbs: Api<ResourceBinding> = Api::namespaced(host.clone(), NS);
    for (name, want) in [
        ("graceful", vec![("member1".to_owned(), 2)]),
        ("direct", vec![("member2".to_owned(), 2)]),
        ("unhealthy", vec![("member2".to_owned(), 1)]),
    ] {
        let rb = rbs.get(&binding_name(name)).await.unwrap();
        assert_eq!(scheduled(&rb), want, "{name} moved");
    }
    let rb = rbs.get(&binding_name("tolerating")).await.unwrap();
    assert!(
        !scheduled(&rb).iter().any(|(c, _)| c == "member3"),
        "tolerating moved back: {:?}",
        scheduled(&rb)
    );
    let rb = rbs.get(&binding_name("tolerant")).await.unwrap();
    assert!(
        scheduled(&rb).iter().any(|(c, _)| c == "member3"),
        "tolerant left member3: {:?}",
        scheduled(&rb)
    );
    // No member object was recreated.
    let members = [("member1", 0), ("member2", 1), ("member3", 2)];
    for (member, name, uid) in uids_before {
        let i = members.iter().find(|(m, _)| m == member).unwrap().1;
        let client = env.members()[i].client().await;
        assert_eq!(
            &uid_in(kcm, &client, name).await,
            uid,
            "{name} recreated in {member}"
        );
    }
    let member2 = env.members()[1].client().await;
    assert_eq!(
        uid_in(kcm, &member2, "unhealthy").await,
        unhealthy_in_member2.uid().unwrap(),
        "unhealthy recreated in member2"
    );
}

/// Twelve bindings on four Clusters tainted NoExecute at once: the taint manager (alone, with
/// `--resource-eviction-rate`) evicts them in rounds of its three workers, not all at once.
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn evictions_are_paced(env: &TestEnv, host: &Client) {
    const CLUSTERS: usize = 4;
    const BINDINGS: usize = 12;
    const PACED_NS: &str = "paced";
    let rate = PACED_RATE.to_string();
    let kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--controllers=cluster",
            "--feature-gates=Failover=true",
            "--enable-no-execute-taint-eviction=true",
            &format!("--resource-eviction-rate={rate}"),
        ],
        &[],
    );
    let clusters: Api<Cluster> = Api::all(host.clone());
    for i in 0..CLUSTERS {
        let c: Cluster = serde_json::from_value(json!({
            "apiVersion": "cluster.karmada.io/v1alpha1",
            "kind": "Cluster",
            "metadata": {"name": format!("paced-{i}")},
            "spec": {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push"},
        }))
        .unwrap();
        clusters.create(&PostParams::default(), &c).await.unwrap();
    }
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": PACED_NS}})).unwrap();
    Api::<Namespace>::all(host.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let rbs: Api<ResourceBinding> = Api::namespaced(host.clone(), PACED_NS);
    let placement = karmada_apis::well_known::POLICY_PLACEMENT_ANNOTATION;
    for i in 0..BINDINGS {
        let rb: ResourceBinding = serde_json::from_value(json!({
            "apiVersion": "work.karmada.io/v1alpha2",
            "kind": "ResourceBinding",
            "metadata": {"name": format!("rb-{i}"), "annotations": {placement: "{}"}},
            "spec": {
                "resource": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": PACED_NS, "name": format!("cm-{i}")},
                "clusters": [{"name": format!("paced-{}", i % CLUSTERS)}],
            },
        }))
        .unwrap();
        rbs.create(&PostParams::default(), &rb).await.unwrap();
    }
    // Every binding version from now on, stamped when seen.
    let mut stream = rbs
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let evicted_at = tokio::spawn(async move {
        let mut at: std::collections::BTreeMap<String, Instant> = Default::default();
        let all = async {
            while let Some(ev) = stream.next().await {
                if let WatchEvent::Added(rb) | WatchEvent::Modified(rb) = ev.unwrap()
                    && rb.spec.clusters.is_empty()
                    && rb
                        .spec
                        .graceful_eviction_tasks
                        .iter()
                        .any(|t| t.producer == "TaintManager")
                {
                    at.entry(rb.name_any()).or_insert_with(Instant::now);
                    if at.len() == BINDINGS {
                        return;
                    }
                }
            }
            panic!("watch ended early");
        };
        tokio::time::timeout(WAIT, all)
            .await
            .expect("every binding evicted in time");
        at
    });
    // The taint manager is up: the cluster controller gave the new Clusters their finalizer.
    eventually("the paced Clusters handled", &kcm, async || {
        let list = clusters.list(&ListParams::default()).await.unwrap();
        let waiting = list
            .items
            .iter()
            .filter(|c| c.name_any().starts_with("paced-") && c.finalizers().is_empty())
            .count();
        if waiting == 0 {
            Ok(())
        } else {
            Err(format!("{waiting} without finalizer"))
        }
    })
    .await;
    for i in 0..CLUSTERS {
        let name = format!("paced-{i}");
        // Patch over the read version (the cluster controller may taint it too): retry on conflict.
        loop {
            let c = clusters.get(&name).await.unwrap();
            let mut taints = c.spec.taints.clone();
            taints.push(
                serde_json::from_value(json!({"key": "paced.test/down", "effect": "NoExecute"}))
                    .unwrap(),
            );
            let patch = json!({
                "metadata": {"resourceVersion": c.resource_version()},
                "spec": {"taints": taints},
            });
            match clusters
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => break,
                Err(e) if apimachinery::is_conflict(&e) => continue,
                Err(e) => panic!("tainting {name}: {e}"),
            }
        }
    }
    let at = evicted_at.await.unwrap();
    let mut times: Vec<Instant> = at.values().copied().collect();
    times.sort();
    let first = times[0];
    let offsets: Vec<f64> = times.iter().map(|t| (*t - first).as_secs_f64()).collect();
    println!("paced evictions (s after the first): {offsets:.2?}");
    // Three workers, each waiting 1/rate after an eviction: the last is at least
    // (BINDINGS/3 - 1)/rate after the first (less an allowance for when the watch delivers).
    let rounds = BINDINGS.div_ceil(3) as f64;
    let least = (rounds - 1.0) / PACED_RATE - 0.5;
    let span = offsets.last().copied().unwrap_or_default();
    assert!(
        span >= least,
        "{BINDINGS} evictions within {span:.2}s at --resource-eviction-rate={rate}: {offsets:.2?}\n{}",
        tail(&kcm.log(), 40)
    );
}

#[tokio::test]
async fn invalid_cluster_taint_policies_are_rejected() {
    let host = env().host().client().await;
    let api: Api<ClusterTaintPolicy> = Api::all(host);
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let policy = |spec: Value| -> ClusterTaintPolicy {
        serde_json::from_value(json!({
            "apiVersion": "policy.karmada.io/v1alpha1",
            "kind": "ClusterTaintPolicy",
            "metadata": {"name": "bad"},
            "spec": spec,
        }))
        .unwrap()
    };
    let cond = json!([{"conditionType": "Ready", "operator": "In", "statusValues": ["False"]}]);
    let good =
        policy(json!({"addOnConditions": cond, "taints": [{"key": "a", "effect": "NoExecute"}]}));
    api.create(&dry, &good)
        .await
        .expect("a valid policy is accepted");
    for (spec, field) in [
        (json!({"taints": []}), "spec.taints"),
        (
            json!({"taints": [{"key": "a", "effect": "Sometimes"}]}),
            "spec.taints[0].effect",
        ),
        (
            json!({"taints": [{"key": "a", "effect": "NoExecute"}, {"key": "a", "effect": "NoExecute"}]}),
            "spec.taints[1]",
        ),
        (
            json!({"taints": [{"key": "bad key", "effect": "NoExecute"}]}),
            "spec.taints[0].key",
        ),
        (
            json!({"addOnConditions": [{"conditionType": "Ready", "operator": "Maybe", "statusValues": ["False"]}], "taints": [{"key": "a", "effect": "NoSchedule"}]}),
            "spec.addOnConditions[0].operator",
        ),
    ] {
        let bad: Value = serde_json::to_value(policy(spec.clone())).unwrap();
        let obj: ClusterTaintPolicy = match serde_json::from_value(bad) {
            Ok(o) => o,
            Err(e) => panic!("{spec}: {e}"),
        };
        match api.create(&dry, &obj).await {
            Err(kube::Error::Api(e)) => {
                assert_eq!(e.code, 422, "{spec}: {e:?}");
                assert!(
                    e.message.contains(field),
                    "{spec}: {} does not name {field}",
                    e.message
                );
            }
            other => panic!("{spec} accepted: {other:?}"),
        }
    }
}
