//! Cluster failover against the real controller-manager binary and real API servers: a
//! ClusterTaintPolicy puts a NoExecute taint on a member whose kube-apiserver was killed, and the
//! taint manager moves the workloads that do not tolerate it.
//!
//! member1 is a full member (kube-controller-manager, kube-scheduler, kwok nodes: its Deployments
//! become really available); member2 is an API server only (its Deployments never report status, so
//! never become healthy); member3 is killed. One kill serves every case, each a Deployment divided
//! over two members:
//! - `graceful` (member1, member3; purge mode from `--no-execute-taint-eviction-purge-mode`,
//!   Gracefully): all replicas move to member1; member3's Work stays until member1 reports the
//!   workload healthy (as in Karmada, the health last reported, which may still be that of the old
//!   replica count), then its eviction task is dropped and the Work deleted, never before;
//! - `direct` (member2, member3; the policy's `failover.cluster.purgeMode: Directly`): the replicas
//!   move to member2 and member3's Work is deleted at once, while the task stays (member2 never
//!   becomes healthy);
//! - `tolerating` (a toleration with `tolerationSeconds`): evicted, but not before the taint is that
//!   old;
//! - `tolerant` (a toleration without `tolerationSeconds`): never evicted.
//!
//! The time from the kill to `graceful` being whole again is printed
//! (`cargo test -p karmada-e2e --test failover -- --nocapture`).
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Taint};
use karmada_apis::{Cluster, ClusterTaintPolicy, PropagationPolicy, ResourceBinding, Work};
use karmada_e2e::controller_manager::Kcm;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const NS: &str = "failover";
/// The taint the ClusterTaintPolicy manages.
const TAINT: &str = "failover.karmada-rs.io/not-ready";
/// `tolerationSeconds` of the `tolerating` Deployment.
const TOLERATION_SECONDS: i64 = 15;
const WAIT: Duration = Duration::from_secs(120);

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 3,
        full_members: 1,
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
async fn eventually<T>(
    what: &str,
    kcm: &Kcm,
    mut check: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        match check().await {
            Ok(v) => return v,
            Err(why) if Instant::now() > deadline => panic!(
                "timed out after {WAIT:?} waiting for {what}: {why}\ncontroller-manager log (tail):\n{}",
                tail(&kcm.log(), 80)
            ),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

fn ready(c: &Cluster) -> bool {
    c.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
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
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 2,
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
async fn a_killed_member_is_tainted_and_its_workloads_move_unless_tolerated() {
    let env = env();
    let host = env.host().client().await;
    let kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--cluster-status-update-frequency=1s",
            "--cluster-failure-threshold=2s",
            "--cluster-success-threshold=1s",
            "--feature-gates=Failover=true",
            "--enable-no-execute-taint-eviction=true",
            "--resource-eviction-rate=20",
        ],
        &[],
    );
    for m in env.members() {
        // API-server-only members have no token controller: do not wait long for it.
        karmada_e2e::karmadactl::join(env.host(), m, &["--token-wait=2s"])
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
    }
    let clusters: Api<Cluster> = Api::all(host.clone());
    eventually("three members Ready", &kcm, async || {
        let list = clusters.list(&ListParams::default()).await.unwrap();
        let ready: Vec<String> = list
            .items
            .iter()
            .filter(|c| ready(c))
            .map(ResourceExt::name_any)
            .collect();
        if ready.len() == 3 {
            Ok(())
        } else {
            Err(format!("ready: {ready:?}"))
        }
    })
    .await;

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

    let rbs: Api<ResourceBinding> = Api::namespaced(host.clone(), NS);
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

    // direct: member3's Work is deleted while the eviction task stays (member2 never gets healthy).
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

    // tolerating: evicted, not before the taint is TOLERATION_SECONDS old.
    let task = eventually("tolerating evicted", &kcm, async || {
        let rb = rbs.get(&binding_name("tolerating")).await.unwrap();
        task_from_member3(&rb)
            .and_then(|t| t.creation_timestamp.clone())
            .ok_or_else(|| format!("scheduled {:?}", scheduled(&rb)))
    })
    .await;
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
