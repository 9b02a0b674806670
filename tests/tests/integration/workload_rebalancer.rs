//! The workloadRebalancer controller with the built-in scheduler against a real API server.
//!
//! A Deployment's binding is divided 1:1 over member1 and member2 (static weights), scheduled 2/2;
//! the test then writes a skewed result (4/0), as an earlier failover would have left it, and shows
//! the scheduler keeps it. A WorkloadRebalancer listing that workload, a cluster-scoped one
//! and one without a binding makes the scheduler place the first afresh (2/2 again), stamps both
//! bindings' `rescheduleTriggeredAt` with its creation time, reports `Successful`, `Successful` and
//! `Failed`/`ReferencedBindingNotFound`, sets `finishTime`, and deletes itself after
//! `ttlSecondsAfterFinished`. A second rebalancer without a TTL stays; adding a workload to its spec
//! triggers only that one (the first keeps its result and its binding is not stamped again).
//!
//! A second test makes the scheduler's two writes of a result (spec, then status) straddle another
//! writer's change and checks the status still lands.
//!
//! No member API server is needed: the scheduler places bindings on Cluster objects whose status the
//! test writes, as the cluster and clusterStatus controllers would.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use karmada_apis::apps::v1alpha1::{WorkloadRebalancer, WorkloadRebalancerStatus};
use karmada_apis::well_known::KARMADA_CONTROLLER_MANAGER_NAME;
use karmada_apis::{Cluster, ClusterResourceBinding, ResourceBinding, names};
use karmada_controllers::common::template::control_plane_cache_options;
use karmada_e2e::in_process::{self, Harness, create_namespace, ensure_namespace, serial};
use karmada_e2e::quiet::{Watched, assert_holds_for};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use lariat::{ClientOptions, ClusterOptions};
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(60);
const MEMBERS: [&str; 2] = ["member1", "member2"];
const NS: &str = "rebalance";
/// `ttlSecondsAfterFinished` of the first rebalancer: long enough for the test to read its status
/// on a loaded machine.
const TTL_SECONDS: i64 = 10;

fn env() -> &'static TestEnv {
    in_process::init_tracing();
    testenv::shared(EnvOptions {
        members: 0,
        install_crds: true,
        ..Default::default()
    })
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    karmada_e2e::wait::eventually(what, WAIT, Duration::from_millis(200), check).await
}

/// Cluster objects for both members, Ready and serving Deployments and ClusterRoles.
async fn clusters_ready(client: &Client) {
    let api: Api<Cluster> = Api::all(client.clone());
    for name in MEMBERS {
        create_namespace(
            client,
            &names::execution_space_name(name),
            json!({"karmada.io/system": "true"}),
        )
        .await;
        let c: Cluster = serde_json::from_value(json!({
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name},
            "spec": {"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:1"}
        }))
        .unwrap();
        match api.create(&PostParams::default(), &c).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("create Cluster {name}: {e}"),
        }
        let apis = json!({"apiEnablements": [
            {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
            {"groupVersion": "rbac.authorization.k8s.io/v1",
             "resources": [{"name": "clusterroles", "kind": "ClusterRole"}]},
        ]});
        in_process::set_cluster_ready(client, name, true, "ready", apis).await;
    }
}

fn workload(api_version: &str, kind: &str, namespace: &str, name: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "namespace": namespace, "name": name})
}

/// `spec.clusters` as name → replicas.
fn placement(clusters: &[karmada_apis::work::v1alpha2::TargetCluster]) -> BTreeMap<String, i32> {
    clusters
        .iter()
        .map(|c| (c.name.clone(), c.replicas))
        .collect()
}

fn expect(pairs: &[(&str, i32)]) -> BTreeMap<String, i32> {
    pairs.iter().map(|(c, r)| ((*c).to_owned(), *r)).collect()
}

/// `(kind/name, result, reason)` of each observed workload, in status order.
fn results(status: &WorkloadRebalancerStatus) -> Vec<(String, String, String)> {
    status
        .observed_workloads
        .iter()
        .map(|o| {
            (
                format!("{}/{}", o.workload.kind, o.workload.name),
                o.result.clone(),
                o.reason.clone(),
            )
        })
        .collect()
}

/// The ResourceBinding of Deployment `deployment`: 4 replicas divided 1:1 over both members by
/// static weights (a Cluster change or a binding change that leaves the spec alone reschedules
/// nothing).
fn divided_binding(deployment: &str) -> ResourceBinding {
    serde_json::from_value(json!({
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": names::binding_name("Deployment", deployment), "namespace": NS,
            "labels": {"propagationpolicy.karmada.io/permanent-id": "rebalance-test"}},
        "spec": {
            "resource": workload("apps/v1", "Deployment", NS, deployment),
            "replicas": 4,
            "placement": {
                "clusterAffinity": {"clusterNames": MEMBERS},
                "replicaScheduling": {"replicaSchedulingType": "Divided",
                    "replicaDivisionPreference": "Weighted",
                    "weightPreference": {"staticWeightList": [
                        {"targetCluster": {"clusterNames": ["member1"]}, "weight": 1},
                        {"targetCluster": {"clusterNames": ["member2"]}, "weight": 1}]}},
            },
        }
    }))
    .unwrap()
}

async fn create_rebalancer(client: &Client, name: &str, spec: Value) -> WorkloadRebalancer {
    let r: WorkloadRebalancer = serde_json::from_value(json!({
        "apiVersion": "apps.karmada.io/v1alpha1", "kind": "WorkloadRebalancer",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap();
    Api::<WorkloadRebalancer>::all(client.clone())
        .create(&PostParams::default(), &r)
        .await
        .unwrap()
}

/// Waits until the rebalancer's status has observed its current generation and reports `want`.
async fn finished(
    api: &Api<WorkloadRebalancer>,
    name: &str,
    want: &[(&str, &str, &str)],
) -> WorkloadRebalancer {
    let want: Vec<(String, String, String)> = want
        .iter()
        .map(|(w, r, why)| ((*w).to_owned(), (*r).to_owned(), (*why).to_owned()))
        .collect();
    eventually(&format!("WorkloadRebalancer {name} finished"), || {
        let api = api.clone();
        let want = want.clone();
        async move {
            let r = api.get(name).await.map_err(|e| e.to_string())?;
            let status = r.status.clone().unwrap_or_default();
            let generation = r.metadata.generation.unwrap_or_default();
            if status.observed_generation == generation
                && results(&status) == want
                && status.finish_time.is_some()
            {
                Ok(r)
            } else {
                Err(format!("generation {generation}, status {status:?}"))
            }
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn listed_workloads_are_rescheduled_afresh_once_and_the_rebalancer_expires() {
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    ensure_namespace(&client, NS).await;
    clusters_ready(&client).await;
    let controllers = Harness::new(in_process::implemented(&[
        "scheduler",
        "workloadRebalancer",
    ]))
    .start(env())
    .await;

    // A Deployment's binding, divided 1:1 by static weights, and a ClusterRole's, duplicated.
    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), NS);
    let rb_name = names::binding_name("Deployment", "web");
    rbs.create(&PostParams::default(), &divided_binding("web"))
        .await
        .unwrap();
    let crbs: Api<ClusterResourceBinding> = Api::all(client.clone());
    let crb_name = names::binding_name("ClusterRole", "rebalance-reader");
    let crb: ClusterResourceBinding = serde_json::from_value(json!({
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ClusterResourceBinding",
        "metadata": {"name": crb_name,
            "labels": {"clusterpropagationpolicy.karmada.io/permanent-id": "rebalance-test"}},
        "spec": {
            "resource": workload("rbac.authorization.k8s.io/v1", "ClusterRole", "", "rebalance-reader"),
            "placement": {"clusterAffinity": {"clusterNames": MEMBERS}},
        }
    }))
    .unwrap();
    crbs.create(&PostParams::default(), &crb).await.unwrap();

    let scheduled = async |want: BTreeMap<String, i32>| {
        let rbs = rbs.clone();
        eventually(&format!("binding placed {want:?}"), || {
            let rbs = rbs.clone();
            let want = want.clone();
            let name = rb_name.clone();
            async move {
                let rb = rbs.get(&name).await.map_err(|e| e.to_string())?;
                let got = placement(&rb.spec.clusters);
                (got == want).then_some(rb).ok_or(format!("placed {got:?}"))
            }
        })
        .await
    };
    scheduled(expect(&[("member1", 2), ("member2", 2)])).await;
    eventually("ClusterResourceBinding placed", || {
        let crbs = crbs.clone();
        let name = crb_name.clone();
        async move {
            let crb = crbs.get(&name).await.map_err(|e| e.to_string())?;
            let got = placement(&crb.spec.clusters);
            (got.len() == 2)
                .then_some(())
                .ok_or(format!("placed {got:?}"))
        }
    })
    .await;

    // The result an earlier failover would leave: everything on member1. Nothing reschedules it.
    let skewed = rbs
        .patch(
            &rb_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"clusters": [{"name": "member1", "replicas": 4}]}})),
        )
        .await
        .unwrap();
    // (The scheduler records that it saw the new generation; the placement stays.)
    assert_holds_for(
        &rbs,
        Watched::Name(&rb_name),
        &skewed.resource_version().unwrap(),
        Duration::from_secs(3),
        |rb: &ResourceBinding| {
            let got = placement(&rb.spec.clusters);
            (got == expect(&[("member1", 4)]))
                .then_some(())
                .ok_or(format!("placed {got:?}"))
        },
    )
    .await;

    // The rebalancer: the scheduler places the Deployment afresh, both bindings are stamped with
    // its creation time, and the missing workload fails.
    let rebalancers: Api<WorkloadRebalancer> = Api::all(client.clone());
    let created = create_rebalancer(
        &client,
        "once",
        json!({"ttlSecondsAfterFinished": TTL_SECONDS, "workloads": [
            workload("apps/v1", "Deployment", NS, "web"),
            workload("rbac.authorization.k8s.io/v1", "ClusterRole", "", "rebalance-reader"),
            workload("apps/v1", "Deployment", NS, "absent"),
        ]}),
    )
    .await;
    let stamp = created.metadata.creation_timestamp.clone().unwrap();
    let done = finished(
        &rebalancers,
        "once",
        // Sorted by API version, kind, namespace and name.
        &[
            ("Deployment/absent", "Failed", "ReferencedBindingNotFound"),
            ("Deployment/web", "Successful", ""),
            ("ClusterRole/rebalance-reader", "Successful", ""),
        ],
    )
    .await;
    let finish_time = done.status.unwrap().finish_time.unwrap();
    assert!(finish_time.0 >= stamp.0);
    let rb = scheduled(expect(&[("member1", 2), ("member2", 2)])).await;
    assert_eq!(rb.spec.reschedule_triggered_at.as_ref(), Some(&stamp));
    let last_scheduled = rb.status.and_then(|s| s.last_scheduled_time).unwrap();
    assert!(
        last_scheduled.0 >= stamp.0,
        "{last_scheduled:?} < {stamp:?}"
    );
    let crb = crbs.get(&crb_name).await.unwrap();
    assert_eq!(crb.spec.reschedule_triggered_at.as_ref(), Some(&stamp));
    eventually("WorkloadRebalancer deleted after its TTL", || {
        let rebalancers = rebalancers.clone();
        async move {
            match rebalancers
                .get_opt("once")
                .await
                .map_err(|e| e.to_string())?
            {
                None => {
                    let lived =
                        k8s_openapi::jiff::Timestamp::now().as_second() - finish_time.0.as_second();
                    assert!(lived >= TTL_SECONDS, "deleted {lived} s after finishing");
                    Ok(())
                }
                Some(_) => Err("still there".to_owned()),
            }
        }
    })
    .await;

    // Without a TTL the rebalancer stays. Adding a workload triggers only that one.
    let kept = create_rebalancer(
        &client,
        "kept",
        json!({"workloads": [workload("apps/v1", "Deployment", NS, "web")]}),
    )
    .await;
    let kept_stamp = kept.metadata.creation_timestamp.clone().unwrap();
    finished(
        &rebalancers,
        "kept",
        &[("Deployment/web", "Successful", "")],
    )
    .await;
    let rb = rbs.get(&rb_name).await.unwrap();
    // Created seconds after the first (its TTL passed): a newer trigger.
    let web_triggered = rb.spec.reschedule_triggered_at.clone().unwrap();
    assert_eq!(web_triggered, kept_stamp);
    rebalancers
        .patch(
            "kept",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"workloads": [
                workload("apps/v1", "Deployment", NS, "web"),
                workload("rbac.authorization.k8s.io/v1", "ClusterRole", "", "rebalance-reader"),
            ]}})),
        )
        .await
        .unwrap();
    let kept = finished(
        &rebalancers,
        "kept",
        &[
            ("Deployment/web", "Successful", ""),
            ("ClusterRole/rebalance-reader", "Successful", ""),
        ],
    )
    .await;
    assert_eq!(kept.status.unwrap().observed_generation, 2);
    assert_eq!(
        rbs.get(&rb_name)
            .await
            .unwrap()
            .spec
            .reschedule_triggered_at,
        Some(web_triggered),
        "the web binding is not stamped again"
    );
    let crb = crbs.get(&crb_name).await.unwrap();
    assert_eq!(crb.spec.reschedule_triggered_at, Some(kept_stamp));
    assert!(rebalancers.get_opt("kept").await.unwrap().is_some());

    rebalancers
        .delete("kept", &Default::default())
        .await
        .unwrap();
    controllers.stop().await;
}

/// The scheduler writes a result in two steps: `spec.clusters`, then the status. A binding changed
/// in between (here a label, as any controller or user may write) still gets the status —
/// `Scheduled` and `lastScheduledTime` — without which a WorkloadRebalancer's trigger is ignored
/// (Karmada reschedules only when `rescheduleTriggeredAt` is later than `lastScheduledTime`). The
/// scheduler's client is limited to one request per second so the test's write lands between the
/// two; the test checks that it did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_changed_between_the_schedulers_two_writes_still_gets_its_status() {
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    ensure_namespace(&client, NS).await;
    clusters_ready(&client).await;
    let one_request_a_second = ClusterOptions {
        clients: ClientOptions {
            qps: 1.0,
            burst: 1,
            user_agent: KARMADA_CONTROLLER_MANAGER_NAME.to_owned(),
            ..ClientOptions::default()
        },
        caches: control_plane_cache_options(),
        ..ClusterOptions::default()
    };
    let controllers = Harness::new(in_process::implemented(&["scheduler"]))
        .host_options(one_request_a_second)
        .start(env())
        .await;
    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), NS);
    let touched = json!({"metadata": {"labels": {"test.karmada.io/touched": "true"}}});
    let mut between = None;
    for attempt in 0..3 {
        let deployment = format!("between-{attempt}");
        let name = names::binding_name("Deployment", &deployment);
        rbs.create(&PostParams::default(), &divided_binding(&deployment))
            .await
            .unwrap();
        karmada_e2e::wait::eventually(
            &format!("{name}: result in the spec"),
            WAIT,
            Duration::from_millis(10),
            || {
                let rbs = rbs.clone();
                let name = name.clone();
                async move {
                    let rb = rbs.get(&name).await.map_err(|e| e.to_string())?;
                    (!rb.spec.clusters.is_empty())
                        .then_some(())
                        .ok_or("not scheduled yet".to_owned())
                }
            },
        )
        .await;
        let rb = rbs
            .patch(&name, &PatchParams::default(), &Patch::Merge(&touched))
            .await
            .unwrap();
        let conditions = rb.status.map(|s| s.conditions).unwrap_or_default();
        if in_process::condition(&conditions, "Scheduled").is_none() {
            between = Some(name);
            break;
        }
    }
    let name = between.expect(
        "in 3 tries the test's write never landed between the scheduler's spec and status writes",
    );
    let rb = eventually(&format!("{name}: schedule status written"), || {
        let rbs = rbs.clone();
        let name = name.clone();
        async move {
            let rb = rbs.get(&name).await.map_err(|e| e.to_string())?;
            let status = rb.status.clone().unwrap_or_default();
            let scheduled = in_process::condition(&status.conditions, "Scheduled");
            match (&scheduled, &status.last_scheduled_time) {
                (Some((s, reason, _)), Some(_)) if s == "True" && reason == "Success" => Ok(rb),
                _ => Err(format!(
                    "Scheduled {scheduled:?}, lastScheduledTime {:?}",
                    status.last_scheduled_time
                )),
            }
        }
    })
    .await;
    assert_eq!(
        placement(&rb.spec.clusters),
        expect(&[("member1", 2), ("member2", 2)])
    );
    assert_eq!(
        rb.labels()
            .get("test.karmada.io/touched")
            .map(String::as_str),
        Some("true"),
        "the label written between the two writes is kept"
    );
    controllers.stop().await;
}
