//! FederatedResourceQuota against real API servers: the CRD refuses bad input; static assignments
//! become ResourceQuotas in the members (through Works the execution controller applies), usage
//! comes home as pods are created, removing an assignment removes its quota, deleting the quota
//! removes them all; assignments to unknown clusters or beyond `overall` are reported by Warning
//! Events; with `FederatedQuotaEnforcement` the bindings' placements are accounted and an excess is
//! reported and the scheduler refuses a placement beyond `overall`.
//!
//! member1 is a full member (kube-controller-manager's resourcequota controller computes `used`;
//! pods are created there directly, their requests count while they wait for a node); member2 is
//! an API server only. The test writes the Cluster objects and execution namespaces the cluster
//! controller would; the host runs without kube-controller-manager.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod, ResourceQuota};
use karmada_apis::policy::v1alpha1::FederatedResourceQuota;
use karmada_apis::{Cluster, ResourceBinding, Work, names};
use karmada_controllers::members::member_cluster_options;
use karmada_e2e::in_process::{
    self, Controllers, Harness, create_namespace, ensure_namespace, gone, serial,
};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use lariat::runtime::features::{FeatureGates, FeatureSpec, PreRelease};
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(90);
const MEMBERS: [&str; 2] = ["member1", "member2"];

static GATES: &[FeatureSpec] = &[FeatureSpec {
    name: "FederatedQuotaEnforcement",
    default: false,
    pre_release: PreRelease::Alpha,
    lock_to_default: false,
}];

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        full_members: 1,
        kwok_nodes: 1,
        install_crds: true,
        host_controller_manager: false,
        ..Default::default()
    })
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    karmada_e2e::wait::eventually(what, WAIT, Duration::from_millis(200), check).await
}

async fn host() -> Client {
    env().host().client().await
}

async fn member(i: usize) -> Client {
    env().members()[i].client().await
}

/// Cluster objects for both members, Ready, with their execution namespaces.
async fn clusters_ready(client: &Client) {
    let api: Api<Cluster> = Api::all(client.clone());
    for (i, name) in MEMBERS.iter().enumerate() {
        create_namespace(
            client,
            &names::execution_space_name(name),
            json!({"karmada.io/system": "true"}),
        )
        .await;
        let c: Cluster = serde_json::from_value(json!({
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name},
            "spec": {"syncMode": "Push", "apiEndpoint": env().members()[i].url()}
        }))
        .unwrap();
        match api.create(&PostParams::default(), &c).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("create Cluster {name}: {e}"),
        }
        let apis = json!({"apiEnablements": [{"groupVersion": "apps/v1",
            "resources": [{"name": "deployments", "kind": "Deployment"}]}]});
        in_process::set_cluster_ready(client, name, true, "ready", apis).await;
    }
}

fn quota_object(ns: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "FederatedResourceQuota",
        "metadata": {"namespace": ns, "name": name},
        "spec": spec,
    })
}

async fn create_quota(client: &Client, ns: &str, name: &str, spec: Value) -> Result<(), String> {
    // Untyped, so that what the typed client could not even encode reaches the API server.
    let q: DynamicObject = serde_json::from_value(quota_object(ns, name, spec)).unwrap();
    let resource = ApiResource::erase::<FederatedResourceQuota>(&());
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource)
        .create(&PostParams::default(), &q)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The Warning Events with `reason` about object `name` in `ns`, as messages.
async fn warnings(client: &Client, ns: &str, name: &str, reason: &str) -> Vec<String> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason) && e.type_.as_deref() == Some("Warning"))
        .map(|e| e.message.unwrap_or_default())
        .collect()
}

fn status_of(q: &FederatedResourceQuota) -> Value {
    serde_json::to_value(q.status.clone().unwrap_or_default()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crd_refuses_bad_input() {
    let _serial = serial().lock().await;
    let client = host().await;
    let ns = "frq-invalid";
    ensure_namespace(&client, ns).await;
    let bad = [
        ("not a quantity", json!({"overall": {"cpu": "2x"}})),
        ("negative", json!({"overall": {"cpu": "-1"}})),
        ("negative integer", json!({"overall": {"pods": -1}})),
        (
            "invalid cluster name",
            json!({"overall": {"cpu": "2"}, "staticAssignments": [
                {"clusterName": "Member_1", "hard": {"cpu": "1"}}]}),
        ),
        ("no overall", json!({})),
    ];
    for (i, (what, spec)) in bad.into_iter().enumerate() {
        let err = create_quota(&client, ns, &format!("bad-{i}"), spec)
            .await
            .expect_err(what);
        assert!(
            err.contains("Invalid") || err.contains("invalid"),
            "{what}: {err}"
        );
    }
    create_quota(
        &client,
        ns,
        "good",
        json!({"overall": {"cpu": "2", "memory": 1_073_741_824_i64}, "staticAssignments": [
            {"clusterName": "member1", "hard": {"cpu": "500m"}}]}),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn assignments_become_member_quotas_and_usage_comes_home() {
    let _serial = serial().lock().await;
    let client = host().await;
    let ns = "frq-sync";
    clusters_ready(&client).await;
    ensure_namespace(&client, ns).await;
    for i in 0..MEMBERS.len() {
        ensure_namespace(&member(i).await, ns).await;
    }
    let controllers: Controllers = Harness::new(in_process::implemented(&[
        "execution",
        "workStatus",
        "federatedResourceQuotaSync",
        "federatedResourceQuotaStatus",
        "federatedResourceQuotaEnforcement",
    ]))
    .members(&MEMBERS, member_cluster_options())
    .start(env())
    .await;

    let name = "team";
    create_quota(
        &client,
        ns,
        name,
        json!({"overall": {"cpu": "4", "pods": "10"}, "staticAssignments": [
            {"clusterName": "member1", "hard": {"cpu": "2", "pods": "5"}},
            {"clusterName": "member2", "hard": {"cpu": "1000m", "pods": "2"}},
            {"clusterName": "member9", "hard": {"cpu": "1"}},
        ]}),
    )
    .await
    .unwrap();

    // Each assigned, existing cluster gets a labelled Work and, through it, a ResourceQuota.
    let work = names::work_name("ResourceQuota", name, ns);
    for (i, cluster) in MEMBERS.iter().enumerate() {
        let works: Api<Work> =
            Api::namespaced(client.clone(), &names::execution_space_name(cluster));
        let w = eventually(&format!("Work in {cluster}"), || {
            let works = works.clone();
            let work = work.clone();
            async move {
                works
                    .get_opt(&work)
                    .await
                    .unwrap()
                    .ok_or("no Work yet".to_owned())
            }
        })
        .await;
        assert_eq!(
            w.labels()["federatedresourcequota.karmada.io/namespace"],
            ns
        );
        assert_eq!(w.labels()["federatedresourcequota.karmada.io/name"], name);
        assert!(
            w.finalizers()
                .contains(&"karmada.io/execution-controller".to_owned())
        );
        let rqs: Api<ResourceQuota> = Api::namespaced(member(i).await, ns);
        let rq = eventually(&format!("ResourceQuota in {cluster}"), || {
            let rqs = rqs.clone();
            async move { rqs.get_opt(name).await.unwrap().ok_or("not yet".to_owned()) }
        })
        .await;
        let hard = rq.spec.unwrap().hard.unwrap();
        let expected = if i == 0 { ("2", "5") } else { ("1", "2") };
        assert_eq!((hard["cpu"].0.as_str(), hard["pods"].0.as_str()), expected);
    }
    let unknown = eventually("Warning about the unknown cluster", || {
        let client = client.clone();
        async move {
            let w = warnings(&client, ns, name, "AssignmentClusterNotFound").await;
            w.into_iter().next().ok_or("no Event yet".to_owned())
        }
    })
    .await;
    assert!(unknown.contains("member9"), "{unknown}");

    // Pods in member1 count against its quota; the usage comes home.
    let pods: Api<Pod> = Api::namespaced(member(0).await, ns);
    for p in ["p1", "p2"] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": p},
            "spec": {"containers": [{"name": "c", "image": "fake",
                     "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "500m"}}}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let quotas: Api<FederatedResourceQuota> = Api::namespaced(client.clone(), ns);
    let status = eventually("usage of two pods in status", || {
        let quotas = quotas.clone();
        async move {
            let s = status_of(&quotas.get(name).await.unwrap());
            let member1 = s["aggregatedStatus"]
                .as_array()
                .and_then(|a| a.iter().find(|c| c["clusterName"] == "member1").cloned());
            match member1 {
                Some(m) if m["used"] == json!({"cpu": "1", "pods": "2"}) => Ok(s),
                _ => Err(format!("status: {s}")),
            }
        }
    })
    .await;
    assert_eq!(status["overall"], json!({"cpu": "4", "pods": "10"}));
    assert_eq!(status["overallUsed"], json!({"cpu": "1", "pods": "2"}));
    let member1 = status["aggregatedStatus"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["clusterName"] == "member1")
        .unwrap();
    assert_eq!(member1["hard"], json!({"cpu": "2", "pods": "5"}));

    // Assignments beyond overall, or of resources overall does not name, are reported (Karmada's
    // webhook refuses them).
    quotas
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"overall": {"cpu": "2500m", "pods": "10"},
            "staticAssignments": [
                {"clusterName": "member1", "hard": {"cpu": "2", "pods": "5"}},
                {"clusterName": "member2", "hard": {"cpu": "1000m", "pods": "2", "memory": "1Gi"}},
                {"clusterName": "member9", "hard": {"cpu": "1"}},
            ]}})),
        )
        .await
        .unwrap();
    let over = eventually("Warning about assignments beyond overall", || {
        let client = client.clone();
        async move {
            let w = warnings(&client, ns, name, "InvalidStaticAssignments").await;
            w.into_iter().next().ok_or("no Event yet".to_owned())
        }
    })
    .await;
    assert!(
        over.contains("cpu: spec.overall (2500m) is less than the assignments (4)"),
        "{over}"
    );
    assert!(
        over.contains("[1].hard.memory: not in spec.overall"),
        "{over}"
    );

    // Removing member2's assignment removes its Work and its ResourceQuota.
    quotas
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"staticAssignments": [
                {"clusterName": "member1", "hard": {"cpu": "2", "pods": "5"}}]}})),
        )
        .await
        .unwrap();
    let m2_works: Api<Work> =
        Api::namespaced(client.clone(), &names::execution_space_name("member2"));
    eventually("member2's Work gone", || async {
        gone(&m2_works, &work).await.ok_or("still there".to_owned())
    })
    .await;
    let m2_rqs: Api<ResourceQuota> = Api::namespaced(member(1).await, ns);
    eventually("member2's ResourceQuota gone", || async {
        gone(&m2_rqs, name).await.ok_or("still there".to_owned())
    })
    .await;
    eventually("member2 gone from the status", || {
        let quotas = quotas.clone();
        async move {
            let s = status_of(&quotas.get(name).await.unwrap());
            let clusters: Vec<&str> = s["aggregatedStatus"]
                .as_array()
                .map(|a| a.iter().filter_map(|c| c["clusterName"].as_str()).collect())
                .unwrap_or_default();
            (clusters == ["member1"])
                .then_some(())
                .ok_or(format!("status: {s}"))
        }
    })
    .await;

    // Deleting the quota removes the rest.
    quotas.delete(name, &DeleteParams::default()).await.unwrap();
    let m1_rqs: Api<ResourceQuota> = Api::namespaced(member(0).await, ns);
    eventually("member1's ResourceQuota gone", || async {
        gone(&m1_rqs, name).await.ok_or("still there".to_owned())
    })
    .await;
    for p in ["p1", "p2"] {
        pods.delete(p, &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
    }
    controllers.stop().await;
}

/// A ResourceBinding placing `replicas` of a workload requesting `cpu` each, as the scheduler
/// leaves it.
fn binding(ns: &str, name: &str, cpu: &str, clusters: &[(&str, i32)]) -> ResourceBinding {
    serde_json::from_value(json!({
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"namespace": ns, "name": name},
        "spec": {
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": name},
            "replicaRequirements": {"resourceRequest": {"cpu": cpu, "memory": "64Mi"}},
            "clusters": clusters.iter().map(|(c, r)| json!({"name": c, "replicas": r})).collect::<Vec<_>>(),
        }
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn enforcement_accounts_placements_and_reports_an_excess() {
    let _serial = serial().lock().await;
    let client = host().await;
    let ns = "frq-enforce";
    ensure_namespace(&client, ns).await;
    let mut gates = FeatureGates::new(GATES);
    gates
        .set_from_str("FederatedQuotaEnforcement=true")
        .unwrap();
    clusters_ready(&client).await;
    let controllers = Harness::new(in_process::implemented(&[
        "scheduler",
        "federatedResourceQuotaStatus",
        "federatedResourceQuotaEnforcement",
    ]))
    .settings(karmada_controllers::Settings {
        feature_gates: gates,
        ..in_process::settings()
    })
    .start(env())
    .await;

    let name = "limits";
    create_quota(&client, ns, name, json!({"overall": {"cpu": "2"}}))
        .await
        .unwrap();
    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    rbs.create(
        &PostParams::default(),
        &binding(ns, "a", "250m", &[("member1", 2), ("member2", 2)]),
    )
    .await
    .unwrap();
    let quotas: Api<FederatedResourceQuota> = Api::namespaced(client.clone(), ns);
    let used = async |expected: Value| {
        let quotas = quotas.clone();
        eventually(&format!("overallUsed {expected}"), || {
            let quotas = quotas.clone();
            let expected = expected.clone();
            async move {
                let s = status_of(&quotas.get(name).await.unwrap());
                (s["overallUsed"] == expected && s["overall"] == json!({"cpu": "2"}))
                    .then_some(())
                    .ok_or(format!("status: {s}"))
            }
        })
        .await;
    };
    // Only what overall names is counted: memory is not.
    used(json!({"cpu": "1"})).await;
    rbs.create(
        &PostParams::default(),
        &binding(ns, "b", "1500m", &[("member1", 1)]),
    )
    .await
    .unwrap();
    used(json!({"cpu": "2500m"})).await;
    let excess = eventually("QuotaExceeded Warning", || {
        let client = client.clone();
        async move {
            let w = warnings(&client, ns, name, "QuotaExceeded").await;
            w.into_iter().next().ok_or("no Event yet".to_owned())
        }
    })
    .await;
    assert!(excess.contains("cpu: used 2500m, limited 2"), "{excess}");
    rbs.delete("b", &DeleteParams::default()).await.unwrap();
    used(json!({"cpu": "1"})).await;

    // The scheduler refuses a placement beyond overall: 1 (a) + 2 × 600m > 2.
    rbs.create(
        &PostParams::default(),
        &scheduled_binding(ns, "c", "600m", 2),
    )
    .await
    .unwrap();
    let (reason, message) = eventually("Scheduled=False, QuotaExceeded", || {
        let rbs = rbs.clone();
        async move {
            let rb = rbs.get("c").await.unwrap();
            let conditions = rb.status.map(|s| s.conditions).unwrap_or_default();
            match in_process::condition(&conditions, "Scheduled") {
                Some((status, reason, message)) if status == "False" => Ok((reason, message)),
                other => Err(format!("Scheduled: {other:?}")),
            }
        }
    })
    .await;
    assert_eq!(reason, "QuotaExceeded");
    assert!(
        message.contains(&format!("FederatedResourceQuota({ns}/{name}) exceeded for resource cpu: requested sum 2200m, limit 2")),
        "{message}"
    );
    assert!(rbs.get("c").await.unwrap().spec.clusters.is_empty());
    // One replica fits (1 + 600m): the retried schedule places it.
    rbs.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    eventually("c scheduled within the quota", || {
        let rbs = rbs.clone();
        async move {
            let rb = rbs.get("c").await.unwrap();
            let clusters: Vec<(String, i32)> = rb
                .spec
                .clusters
                .iter()
                .map(|c| (c.name.clone(), c.replicas))
                .collect();
            (clusters == [("member1".to_owned(), 1)])
                .then_some(())
                .ok_or(format!("{clusters:?}"))
        }
    })
    .await;
    used(json!({"cpu": "1600m"})).await;
    controllers.stop().await;
}

/// A ResourceBinding the scheduler places: `replicas` Duplicated to member1.
fn scheduled_binding(ns: &str, name: &str, cpu: &str, replicas: i32) -> ResourceBinding {
    serde_json::from_value(json!({
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"namespace": ns, "name": name,
                     "labels": {"propagationpolicy.karmada.io/permanent-id": "quota-test"}},
        "spec": {
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": name},
            "replicas": replicas,
            "replicaRequirements": {"resourceRequest": {"cpu": cpu}},
            "placement": {"clusterAffinity": {"clusterNames": ["member1"]},
                          "replicaScheduling": {"replicaSchedulingType": "Duplicated"}},
        }
    }))
    .unwrap()
}
