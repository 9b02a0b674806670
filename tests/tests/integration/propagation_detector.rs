//! The resource detector and the scheduler controller against a real API server: a Deployment and a
//! PropagationPolicy produce Karmada's binding with the expected clusters; weights and scaling
//! re-divide; preemption follows its feature gate; template deletion deletes the binding without
//! the garbage collector; NotReady-tainted clusters are left out of new decisions; a placement no
//! cluster fits yields `Scheduled=False/NoClusterFit` and an Event; with the binding controller,
//! templates that exist before the controllers start become Works carrying kubectl's annotation.
//!
//! Member clusters are Cluster objects on the host whose status the test writes (the cluster and
//! clusterStatus controllers are not run). The host runs without kube-controller-manager, so no
//! garbage collector deletes bindings behind the detector's back. Tests run one at a time (each
//! starts its own detector and scheduler) and only use clusters they created, by name or label.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRole;
use karmada_apis::{
    Cluster, ClusterPropagationPolicy, ClusterResourceBinding, PropagationPolicy, ResourceBinding,
    Work,
};
use karmada_e2e::in_process::{self, Controllers, Harness, create_namespace, gone, serial};
use karmada_e2e::quiet::{Watched, assert_holds_for};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use lariat::runtime::features::{FeatureGates, FeatureSpec, PreRelease};
use serde_json::json;
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(30);

fn env() -> &'static TestEnv {
    in_process::init_tracing();
    testenv::shared(EnvOptions {
        members: 0,
        install_crds: true,
        host_controller_manager: false,
        ..Default::default()
    })
}

static GATES: &[FeatureSpec] = &[
    FeatureSpec {
        name: "PropagationPolicyPreemption",
        default: false,
        pre_release: PreRelease::Alpha,
        lock_to_default: false,
    },
    FeatureSpec {
        name: "PriorityBasedScheduling",
        default: true,
        pre_release: PreRelease::Beta,
        lock_to_default: false,
    },
];

/// The detector and the scheduler running in-process against the host, `PropagationPolicyPreemption`
/// as `preemption` says.
async fn start_controllers(preemption: bool) -> Controllers {
    let mut feature_gates = FeatureGates::new(GATES);
    if preemption {
        feature_gates
            .set_from_str("PropagationPolicyPreemption=true")
            .unwrap();
    }
    Harness::new(vec![
        (
            "resource-detector",
            karmada_controllers::detector::start_fn(),
        ),
        ("scheduler", karmada_controllers::scheduler::start_fn()),
    ])
    .settings(karmada_controllers::Settings {
        feature_gates,
        ..in_process::settings()
    })
    .start(env())
    .await
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    karmada_e2e::wait::eventually(what, WAIT, Duration::from_millis(100), check).await
}

/// Creates a Cluster with labels and writes a Ready (or NotReady) status with the APIs it serves.
async fn member(client: &Client, name: &str, labels: serde_json::Value, ready: bool) {
    let api: Api<Cluster> = Api::all(client.clone());
    let c: Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": name, "labels": labels},
        "spec": {"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:1"}
    }))
    .unwrap();
    let _ = api.delete(name, &DeleteParams::default()).await;
    eventually(&format!("old cluster {name} gone"), || gone(&api, name)).await;
    api.create(&PostParams::default(), &c).await.unwrap();
    set_ready(client, name, ready).await;
}

async fn set_ready(client: &Client, name: &str, ready: bool) {
    let apis = json!({"apiEnablements": [
        {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
        {"groupVersion": "v1", "resources": [{"name": "configmaps", "kind": "ConfigMap"}]},
        {"groupVersion": "rbac.authorization.k8s.io/v1", "resources": [{"name": "clusterroles", "kind": "ClusterRole"}]}
    ]});
    in_process::set_cluster_ready(client, name, ready, "set by test", apis).await;
    // What the cluster controller does with the Ready condition.
    let api: Api<Cluster> = Api::all(client.clone());
    let taints = if ready {
        json!([])
    } else {
        json!([{"key": "cluster.karmada.io/not-ready", "effect": "NoSchedule"}])
    };
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"taints": taints}})),
    )
    .await
    .unwrap();
}

async fn deployment(client: &Client, ns: &str, name: &str, replicas: i32) -> Deployment {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx",
                    "resources": {"requests": {"cpu": "100m"}}}]}
            }
        }
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &d)
        .await
        .unwrap()
}

async fn policy(
    client: &Client,
    ns: &str,
    name: &str,
    spec: serde_json::Value,
) -> PropagationPolicy {
    let p: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &p)
        .await
        .unwrap()
}

fn weighted(clusters: &[&str], weights: &[i64]) -> serde_json::Value {
    json!({
        "clusterAffinity": {"clusterNames": clusters},
        "replicaScheduling": {
            "replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Weighted",
            "weightPreference": {"staticWeightList": clusters.iter().zip(weights).map(|(c, w)| json!({
                "targetCluster": {"clusterNames": [c]}, "weight": w
            })).collect::<Vec<_>>()}
        }
    })
}

fn targets(rb: &ResourceBinding) -> Vec<(String, i32)> {
    let mut v: Vec<_> = rb
        .spec
        .clusters
        .iter()
        .map(|c| (c.name.clone(), c.replicas))
        .collect();
    v.sort();
    v
}

fn pairs(v: &[(&str, i32)]) -> Vec<(String, i32)> {
    v.iter().map(|(n, r)| ((*n).to_owned(), *r)).collect()
}

fn scheduled(rb: &ResourceBinding) -> Option<(String, String)> {
    in_process::condition(&rb.status.as_ref()?.conditions, "Scheduled").map(|(s, r, _)| (s, r))
}

async fn binding_with(
    client: &Client,
    ns: &str,
    name: &str,
    want: Vec<(String, i32)>,
) -> ResourceBinding {
    let api: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    eventually(
        &format!("binding {ns}/{name} scheduled to {want:?}"),
        || {
            let api = api.clone();
            let want = want.clone();
            async move {
                let rb = api.get_opt(name).await.unwrap()?;
                let ok = targets(&rb) == want
                    && scheduled(&rb) == Some(("True".into(), "Success".into()))
                    && rb.status.as_ref().map(|s| s.scheduler_observed_generation)
                        == rb.metadata.generation;
                ok.then_some(rb)
            }
        },
    )
    .await
}

async fn events_for(client: &Client, ns: &str, name: &str, reason: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some(name) && e.reason.as_deref() == Some(reason)
        })
        .collect()
}

/// Waits until an Event with `reason` about the object `name` exists in `ns`.
async fn wait_for_event(client: &Client, ns: &str, name: &str, reason: &str) {
    eventually(&format!("{reason} event on {name}"), || async {
        (!events_for(client, ns, name, reason).await.is_empty()).then_some(())
    })
    .await;
}

async fn delete_clusters(client: &Client, names: &[&str]) {
    let api: Api<Cluster> = Api::all(client.clone());
    for n in names {
        let _ = api.delete(n, &DeleteParams::default()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn deployment_and_policy_produce_karmada_binding_then_weights_and_scaling_redivide_and_deletion_removes_it()
 {
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    let ns = "pd-basic";
    create_namespace(&client, ns, json!({})).await;
    member(&client, "pd-basic-m1", json!({}), true).await;
    member(&client, "pd-basic-m2", json!({}), true).await;
    let ctrl = start_controllers(false).await;

    // The template first: it waits until its policy appears.
    let d = deployment(&client, ns, "nginx", 3).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pp = policy(
        &client,
        ns,
        "nginx-pp",
        json!({
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
            "placement": weighted(&["pd-basic-m1", "pd-basic-m2"], &[1, 2])
        }),
    )
    .await;

    let rb = binding_with(
        &client,
        ns,
        "nginx-deployment",
        pairs(&[("pd-basic-m1", 1), ("pd-basic-m2", 2)]),
    )
    .await;

    // The policy got its permanent id and finalizer (Karmada's webhook does that).
    let pp = Api::<PropagationPolicy>::namespaced(client.clone(), ns)
        .get(&pp.name_any())
        .await
        .unwrap();
    let pp_id = pp.labels()["propagationpolicy.karmada.io/permanent-id"].clone();
    assert!(!pp_id.is_empty());
    assert!(
        pp.finalizers()
            .contains(&"karmada.io/propagation-policy-controller".to_string())
    );

    // The template is claimed.
    let d = Api::<Deployment>::namespaced(client.clone(), ns)
        .get(&d.name_any())
        .await
        .unwrap();
    assert_eq!(
        d.labels()["propagationpolicy.karmada.io/permanent-id"],
        pp_id
    );
    assert_eq!(
        d.annotations()["propagationpolicy.karmada.io/namespace"],
        ns
    );
    assert_eq!(
        d.annotations()["propagationpolicy.karmada.io/name"],
        "nginx-pp"
    );

    // The binding looks like Karmada's.
    assert_eq!(
        rb.labels()["propagationpolicy.karmada.io/permanent-id"],
        pp_id
    );
    assert!(!rb.labels()["resourcebinding.karmada.io/permanent-id"].is_empty());
    assert_eq!(
        rb.annotations()["propagationpolicy.karmada.io/namespace"],
        ns
    );
    assert_eq!(
        rb.annotations()["propagationpolicy.karmada.io/name"],
        "nginx-pp"
    );
    assert!(
        rb.annotations()
            .contains_key("policy.karmada.io/applied-placement")
    );
    assert_eq!(
        rb.finalizers(),
        &["karmada.io/binding-controller".to_string()]
    );
    let owner = &rb.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Deployment", "nginx")
    );
    assert_eq!(Some(owner.uid.clone()), d.metadata.uid);
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), Some(true))
    );
    assert_eq!(rb.spec.resource.api_version, "apps/v1");
    assert_eq!(rb.spec.resource.uid, d.metadata.uid.clone().unwrap());
    assert_eq!(
        Some(rb.spec.resource.resource_version.clone()),
        d.metadata.resource_version
    );
    assert_eq!(rb.spec.replicas, 3);
    let req = rb.spec.replica_requirements.as_ref().unwrap();
    assert_eq!(req.resource_request["cpu"].0, "100m");
    assert_eq!(rb.spec.scheduler_name, "default-scheduler");
    assert!(rb.status.as_ref().unwrap().last_scheduled_time.is_some());

    // Events and metrics. Events are written asynchronously, each on its own lane: the detector's may
    // land after the scheduler's.
    wait_for_event(&client, ns, "nginx-deployment", "ScheduleBindingSucceed").await;
    wait_for_event(&client, ns, "nginx", "ApplyPolicySucceed").await;
    let families: Vec<String> = lariat::metrics::registry()
        .gather()
        .iter()
        .map(|f| f.name().to_string())
        .collect();
    for m in [
        "policy_apply_attempts_total",
        "resource_apply_policy_duration_seconds",
        "resource_match_policy_duration_seconds",
    ] {
        assert!(
            families.iter().any(|f| f == m),
            "metric {m} missing from {families:?}"
        );
    }

    // Changing the weights reschedules.
    let pps: Api<PropagationPolicy> = Api::namespaced(client.clone(), ns);
    pps.patch(
        "nginx-pp",
        &PatchParams::default(),
        &Patch::Merge(
            &json!({"spec": {"placement": weighted(&["pd-basic-m1", "pd-basic-m2"], &[2, 1])}}),
        ),
    )
    .await
    .unwrap();
    binding_with(
        &client,
        ns,
        "nginx-deployment",
        pairs(&[("pd-basic-m1", 2), ("pd-basic-m2", 1)]),
    )
    .await;

    // Scaling the Deployment re-divides.
    Api::<Deployment>::namespaced(client.clone(), ns)
        .patch(
            "nginx",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 6}})),
        )
        .await
        .unwrap();
    let rb = binding_with(
        &client,
        ns,
        "nginx-deployment",
        pairs(&[("pd-basic-m1", 4), ("pd-basic-m2", 2)]),
    )
    .await;

    // A status-only change of the template does not touch the binding.
    let generation = rb.metadata.generation;
    Api::<Deployment>::namespaced(client.clone(), ns)
        .patch_status(
            "nginx",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"observedGeneration": 99}})),
        )
        .await
        .unwrap();
    assert_holds_for(
        &Api::<ResourceBinding>::namespaced(client.clone(), ns),
        Watched::Name("nginx-deployment"),
        &rb.resource_version().unwrap(),
        Duration::from_secs(2),
        |rb| {
            (rb.metadata.generation == generation)
                .then_some(())
                .ok_or(format!("binding spec changed: {:?}", rb.spec))
        },
    )
    .await;

    // Deleting the template deletes its binding (no garbage collector runs here). The binding
    // controller would then release its finalizer; the test does that for it.
    Api::<Deployment>::namespaced(client.clone(), ns)
        .delete("nginx", &DeleteParams::default())
        .await
        .unwrap();
    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    eventually("binding marked for deletion", || {
        let rbs = rbs.clone();
        async move {
            match rbs.get_opt("nginx-deployment").await.unwrap() {
                None => Some(()),
                Some(rb) => rb.metadata.deletion_timestamp.is_some().then_some(()),
            }
        }
    })
    .await;
    let _ = rbs
        .patch(
            "nginx-deployment",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
        )
        .await;
    eventually("binding gone", || gone(&rbs, "nginx-deployment")).await;

    // Deleting the policy releases it (finalizer removed by the detector).
    pps.delete("nginx-pp", &DeleteParams::default())
        .await
        .unwrap();
    eventually("policy gone", || gone(&pps, "nginx-pp")).await;

    ctrl.stop().await;
    delete_clusters(&client, &["pd-basic-m1", "pd-basic-m2"]).await;
}

/// `Some(())` once object `name` exists and carries the annotation naming PropagationPolicy
/// `policy`.
async fn claimed_by<K>(api: &Api<K>, name: &str, policy: &str) -> Option<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let o = api.get_opt(name).await.unwrap()?;
    (o.annotations()
        .get("propagationpolicy.karmada.io/name")
        .map(String::as_str)
        == Some(policy))
    .then_some(())
}

/// Waits until the detector processed policy `name`: it carries its permanent id label `id_label`.
async fn wait_processed<K>(api: &Api<K>, name: &str, id_label: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(&format!("{name} processed"), || async {
        let p = api.get(name).await.unwrap();
        p.labels().contains_key(id_label).then_some(())
    })
    .await;
}

/// Creates a template claimed by a low-priority policy, then a high-priority policy with
/// `preemption: Always`; returns the name of the policy that claims the template afterwards.
async fn preemption_scenario(client: &Client, ns: &str, gate: bool) -> String {
    create_namespace(client, ns, json!({})).await;
    let ctrl = start_controllers(gate).await;
    deployment(client, ns, "web", 2).await;
    let placement = json!({"clusterAffinity": {"clusterNames": ["pd-pre-m1"]}});
    policy(
        client,
        ns,
        "low",
        json!({
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "priority": 1,
            "placement": placement
        }),
    )
    .await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    eventually("template claimed by the low-priority policy", || {
        claimed_by(&deployments, "web", "low")
    })
    .await;
    binding_with(client, ns, "web-deployment", pairs(&[("pd-pre-m1", 2)])).await;
    policy(
        client,
        ns,
        "high",
        json!({
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "priority": 5,
            "preemption": "Always",
            "placement": placement
        }),
    )
    .await;
    let pps: Api<PropagationPolicy> = Api::namespaced(client.clone(), ns);
    // Wait until the detector processed the new policy (it gets its permanent id).
    wait_processed(&pps, "high", "propagationpolicy.karmada.io/permanent-id").await;
    if gate {
        eventually("template claimed by the high-priority policy", || {
            claimed_by(&deployments, "web", "high")
        })
        .await;
        let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
        eventually("binding follows the preempting policy", || {
            claimed_by(&rbs, "web-deployment", "high")
        })
        .await;
        wait_for_event(client, ns, "web", "PreemptPolicySucceed").await;
    } else {
        // Without the gate the claim never moves.
        let rv = deployments.get("web").await.unwrap().resource_version();
        assert_holds_for(
            &deployments,
            Watched::Name("web"),
            &rv.unwrap(),
            Duration::from_secs(3),
            |d| {
                let claimer = d.annotations().get("propagationpolicy.karmada.io/name");
                (claimer.map(String::as_str) == Some("low"))
                    .then_some(())
                    .ok_or(format!("claimed by {claimer:?}"))
            },
        )
        .await;
    }
    let d = deployments.get("web").await.unwrap();
    let claimer = d.annotations()["propagationpolicy.karmada.io/name"].clone();
    ctrl.stop().await;
    claimer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn higher_priority_policy_takes_over_only_with_preemption_gate() {
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    member(&client, "pd-pre-m1", json!({}), true).await;
    assert_eq!(
        preemption_scenario(&client, "pd-preempt-off", false).await,
        "low"
    );
    assert_eq!(
        preemption_scenario(&client, "pd-preempt-on", true).await,
        "high"
    );
    delete_clusters(&client, &["pd-pre-m1"]).await;
}

/// Creates (or replaces) a ClusterPropagationPolicy named `name` with `spec`.
async fn cluster_policy(client: &Client, name: &str, spec: serde_json::Value) {
    let api: Api<ClusterPropagationPolicy> = Api::all(client.clone());
    let p: ClusterPropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
        "metadata": {"name": name},
        "spec": spec
    }))
    .unwrap();
    api.create(&PostParams::default(), &p).await.unwrap();
}

/// `Some(())` once the template `name` is claimed by ClusterPropagationPolicy `policy`.
async fn claimed_by_cluster_policy(api: &Api<Deployment>, name: &str, policy: &str) -> Option<()> {
    let o = api.get(name).await.unwrap();
    (o.annotations()
        .get("clusterpropagationpolicy.karmada.io/name")
        .map(String::as_str)
        == Some(policy))
    .then_some(())
}

/// Lowers a policy's `spec.priority` as a user would.
async fn set_priority<K>(api: &Api<K>, name: &str, priority: i32)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"priority": priority}})),
    )
    .await
    .unwrap();
}

/// When the policy that claims a template lowers its priority, a preempting policy whose priority
/// now lies above it takes the template (Karmada's `HandleDeprioritizedPropagationPolicy`), for
/// both kinds; a preempting policy at or below the new priority does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario per policy kind, read top to bottom"
)]
async fn a_policy_that_lowers_its_priority_is_preempted_by_one_now_above_it() {
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    let ns = "pd-deprioritized";
    create_namespace(&client, ns, json!({})).await;
    member(&client, "pd-depri-m1", json!({}), true).await;
    let ctrl = start_controllers(true).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let pps: Api<PropagationPolicy> = Api::namespaced(client.clone(), ns);
    let cpps: Api<ClusterPropagationPolicy> = Api::all(client.clone());
    let placement = json!({"clusterAffinity": {"clusterNames": ["pd-depri-m1"]}});
    let spec = |name: &str, priority: i32| {
        json!({
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": ns, "name": name}],
            "priority": priority,
            "preemption": "Always",
            "placement": placement
        })
    };
    // The policies exist, and are handled, before their template: none of them can be midway
    // through a reconcile (that would see the lowered priority) when the priority falls.
    policy(&client, ns, "high", spec("web", 10)).await;
    policy(&client, ns, "mid", spec("web", 5)).await;
    policy(&client, ns, "low", spec("web", 3)).await;
    for name in ["pd-depri-high", "pd-depri-mid"] {
        let _ = cpps.delete(name, &DeleteParams::default()).await;
        eventually(&format!("old {name} gone"), || gone(&cpps, name)).await;
    }
    cluster_policy(&client, "pd-depri-high", spec("api", 10)).await;
    cluster_policy(&client, "pd-depri-mid", spec("api", 5)).await;
    for p in ["high", "mid", "low"] {
        wait_processed(&pps, p, "propagationpolicy.karmada.io/permanent-id").await;
    }
    for p in ["pd-depri-high", "pd-depri-mid"] {
        wait_processed(&cpps, p, "clusterpropagationpolicy.karmada.io/permanent-id").await;
    }
    deployment(&client, ns, "web", 1).await;
    deployment(&client, ns, "api", 1).await;

    // PropagationPolicies: "high" (10) claims web; once it falls to 4, "mid" (5) takes web and
    // "low" (3) does not.
    eventually("web claimed by high", || {
        claimed_by(&deployments, "web", "high")
    })
    .await;
    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    eventually("web's binding made by high", || {
        claimed_by(&rbs, "web-deployment", "high")
    })
    .await;
    set_priority(&pps, "high", 4).await;
    eventually("web claimed by mid", || {
        claimed_by(&deployments, "web", "mid")
    })
    .await;
    eventually("web's binding follows mid", || {
        claimed_by(&rbs, "web-deployment", "mid")
    })
    .await;
    wait_for_event(&client, ns, "web", "PreemptPolicySucceed").await;

    // ClusterPropagationPolicies: the same with "api".
    eventually("api claimed by pd-depri-high", || {
        claimed_by_cluster_policy(&deployments, "api", "pd-depri-high")
    })
    .await;
    set_priority(&cpps, "pd-depri-high", 4).await;
    eventually("api claimed by pd-depri-mid", || {
        claimed_by_cluster_policy(&deployments, "api", "pd-depri-mid")
    })
    .await;

    for name in ["pd-depri-high", "pd-depri-mid"] {
        cpps.delete(name, &DeleteParams::default()).await.unwrap();
        eventually(&format!("{name} gone"), || gone(&cpps, name)).await;
    }
    ctrl.stop().await;
    delete_clusters(&client, &["pd-depri-m1"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_cluster_is_left_out_of_new_decisions_and_joining_cluster_is_added() {
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    let ns = "pd-notready";
    create_namespace(&client, ns, json!({})).await;
    let group = json!({"pd-group": "notready"});
    member(&client, "pd-nr-m1", group.clone(), true).await;
    member(&client, "pd-nr-m2", group.clone(), true).await;
    let ctrl = start_controllers(false).await;
    let placement =
        json!({"clusterAffinity": {"labelSelector": {"matchLabels": {"pd-group": "notready"}}}});
    policy(
        &client,
        ns,
        "dup",
        json!({
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "placement": placement
        }),
    )
    .await;
    deployment(&client, ns, "first", 2).await;
    binding_with(
        &client,
        ns,
        "first-deployment",
        pairs(&[("pd-nr-m1", 2), ("pd-nr-m2", 2)]),
    )
    .await;

    // m2 turns NotReady (and gets the not-ready taint): new decisions leave it out.
    set_ready(&client, "pd-nr-m2", false).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    deployment(&client, ns, "second", 1).await;
    binding_with(&client, ns, "second-deployment", pairs(&[("pd-nr-m1", 1)])).await;

    // A cluster that joins and fits is added to the existing Duplicated bindings.
    member(&client, "pd-nr-m3", group.clone(), true).await;
    binding_with(
        &client,
        ns,
        "second-deployment",
        pairs(&[("pd-nr-m1", 1), ("pd-nr-m3", 1)]),
    )
    .await;

    ctrl.stop().await;
    delete_clusters(&client, &["pd-nr-m1", "pd-nr-m2", "pd-nr-m3"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_that_fits_no_cluster_reports_no_cluster_fit_with_an_event() {
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    let ns = "pd-nofit";
    create_namespace(&client, ns, json!({})).await;
    member(&client, "pd-nofit-m1", json!({}), true).await;
    let ctrl = start_controllers(false).await;
    policy(&client, ns, "nowhere", json!({
        "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "lonely"}],
        "placement": {"clusterAffinity": {"clusterNames": ["pd-does-not-exist"]}}
    }))
    .await;
    deployment(&client, ns, "lonely", 1).await;
    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    let rb = eventually("Scheduled=False/NoClusterFit", || {
        let rbs = rbs.clone();
        async move {
            let rb = rbs.get_opt("lonely-deployment").await.unwrap()?;
            (scheduled(&rb) == Some(("False".into(), "NoClusterFit".into()))).then_some(rb)
        }
    })
    .await;
    assert!(rb.spec.clusters.is_empty());
    let cond = rb
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Scheduled")
        .unwrap();
    assert!(cond.message.starts_with("0/"), "{}", cond.message);
    assert!(
        cond.message
            .contains("did not match the placement cluster affinity constraint"),
        "{}",
        cond.message
    );
    eventually("ScheduleBindingFailed event", || {
        let client = client.clone();
        async move {
            (!events_for(&client, ns, "lonely-deployment", "ScheduleBindingFailed")
                .await
                .is_empty())
            .then_some(())
        }
    })
    .await;
    ctrl.stop().await;
    delete_clusters(&client, &["pd-nofit-m1"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn cluster_policy_binds_cluster_scoped_and_namespaced_templates_and_deletion_releases_them() {
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    let ns = "pd-cpp";
    create_namespace(&client, ns, json!({})).await;
    member(&client, "pd-cpp-m1", json!({}), true).await;
    let ctrl = start_controllers(false).await;
    let role: ClusterRole =
        serde_json::from_value(json!({"metadata": {"name": "pd-cpp-role"}, "rules": []})).unwrap();
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let _ = roles.delete("pd-cpp-role", &DeleteParams::default()).await;
    roles.create(&PostParams::default(), &role).await.unwrap();
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "cfg", "namespace": ns}, "data": {"a": "b"}}),
    )
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let cpp: ClusterPropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
        "metadata": {"name": "pd-cpp"},
        "spec": {
            "resourceSelectors": [
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "pd-cpp-role"},
                {"apiVersion": "v1", "kind": "ConfigMap", "namespace": ns, "name": "cfg"}
            ],
            "placement": {"clusterAffinity": {"clusterNames": ["pd-cpp-m1"]}}
        }
    }))
    .unwrap();
    let cpps: Api<ClusterPropagationPolicy> = Api::all(client.clone());
    cpps.create(&PostParams::default(), &cpp).await.unwrap();

    let crbs: Api<ClusterResourceBinding> = Api::all(client.clone());
    let crb = eventually("ClusterResourceBinding scheduled", || {
        let crbs = crbs.clone();
        async move {
            let crb = crbs.get_opt("pd-cpp-role-clusterrole").await.unwrap()?;
            (in_process::scheduled_cluster_names(&crb)? == ["pd-cpp-m1"]).then_some(crb)
        }
    })
    .await;
    let cpp = cpps.get("pd-cpp").await.unwrap();
    let id = cpp.labels()["clusterpropagationpolicy.karmada.io/permanent-id"].clone();
    assert!(
        cpp.finalizers()
            .contains(&"karmada.io/cluster-propagation-policy-controller".to_string())
    );
    assert_eq!(
        crb.labels()["clusterpropagationpolicy.karmada.io/permanent-id"],
        id
    );
    assert!(!crb.labels()["clusterresourcebinding.karmada.io/permanent-id"].is_empty());
    assert_eq!(
        crb.annotations()["clusterpropagationpolicy.karmada.io/name"],
        "pd-cpp"
    );
    assert_eq!(
        crb.finalizers(),
        &["karmada.io/cluster-resource-binding-controller".to_string()]
    );
    assert_eq!(crb.owner_references()[0].kind, "ClusterRole");
    assert_eq!(crb.spec.resource.namespace, "");
    // The namespaced template gets a ResourceBinding claimed by the cluster policy.
    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    let rb = eventually("ResourceBinding of the ConfigMap", || {
        let rbs = rbs.clone();
        async move { rbs.get_opt("cfg-configmap").await.unwrap() }
    })
    .await;
    assert_eq!(
        rb.labels()["clusterpropagationpolicy.karmada.io/permanent-id"],
        id
    );

    // Deleting the policy releases the templates and bindings but keeps the bindings.
    cpps.delete("pd-cpp", &DeleteParams::default())
        .await
        .unwrap();
    eventually("cluster policy gone", || gone(&cpps, "pd-cpp")).await;
    let role = roles.get("pd-cpp-role").await.unwrap();
    assert!(
        !role
            .labels()
            .contains_key("clusterpropagationpolicy.karmada.io/permanent-id")
    );
    assert!(
        !role
            .annotations()
            .contains_key("clusterpropagationpolicy.karmada.io/name")
    );
    let crb = crbs.get("pd-cpp-role-clusterrole").await.unwrap();
    assert!(
        !crb.labels()
            .contains_key("clusterpropagationpolicy.karmada.io/permanent-id")
    );
    assert!(rbs.get_opt("cfg-configmap").await.unwrap().is_some());

    ctrl.stop().await;
    let _ = roles.delete("pd-cpp-role", &DeleteParams::default()).await;
    let _ = crbs
        .patch(
            "pd-cpp-role-clusterrole",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
        )
        .await;
    delete_clusters(&client, &["pd-cpp-m1"]).await;
}

/// The binding controller reads templates from the detector's cache, as Karmada's reads its
/// informers: kubectl's last-applied annotation reaches the manifest as in Karmada (the control
/// plane's caches keep it), and a template the restarted controllers meet only in their caches'
/// initial list (whose items carry no `apiVersion`/`kind`) becomes a Work like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_are_built_from_cached_templates_with_kubectls_annotation() {
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    let ns = "pd-listed";
    let cluster = "pd-listed-m1";
    create_namespace(&client, ns, json!({})).await;
    create_namespace(&client, &format!("karmada-es-{cluster}"), json!({})).await;
    member(&client, cluster, json!({}), true).await;
    let last_applied = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}}"#;
    let d = deployment(&client, ns, "web", 1).await;
    Api::<Deployment>::namespaced(client.clone(), ns)
        .patch(
            &d.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": last_applied}}})),
        )
        .await
        .unwrap();
    web_policy(&client, ns, cluster).await;
    let works: Api<Work> = Api::namespaced(client.clone(), &format!("karmada-es-{cluster}"));
    let work_of_web = || {
        let works = works.clone();
        async move { work_of_web(&works).await }
    };
    let check = |work: &Work| {
        let manifest: serde_json::Value = work.spec.workload.manifests[0].decode().unwrap();
        assert_eq!(manifest["apiVersion"], "apps/v1", "{manifest}");
        assert_eq!(manifest["kind"], "Deployment", "{manifest}");
        assert_eq!(
            manifest["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            last_applied,
            "{manifest}"
        );
    };

    let ctrl = detector_scheduler_binding().await;
    let first = eventually("the Work of web", work_of_web).await;
    check(&first);
    ctrl.stop().await;

    // Restarted over the claimed template and its binding, without the Work: the binding
    // controller rebuilds it from what the detector's cache listed.
    let first_name = first.name_any();
    works
        .delete(&first_name, &DeleteParams::default())
        .await
        .unwrap();
    // The execution controller's finalizer (it does not run here).
    works
        .patch(
            &first_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    eventually("the Work deleted", || gone(&works, &first_name)).await;
    let ctrl = detector_scheduler_binding().await;
    let again = eventually("the Work of web again", work_of_web).await;
    assert_ne!(again.metadata.uid, first.metadata.uid);
    check(&again);
    ctrl.stop().await;
}

/// A label change moves no Deployment generation, so the detector's shortcut for templates whose
/// Works already carry their generation must still see it: a Karmada-prefixed label set on the
/// template (hpaScaleTargetMarker's `resourcetemplate.karmada.io/retain-replicas`) reaches the
/// Work's manifest, and so does its removal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_karmada_label_set_or_removed_on_a_template_reaches_its_work() {
    const MARK: &str = "resourcetemplate.karmada.io/retain-replicas";
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    let ns = "pd-mark";
    let cluster = "pd-mark-m1";
    create_namespace(&client, ns, json!({})).await;
    create_namespace(&client, &format!("karmada-es-{cluster}"), json!({})).await;
    member(&client, cluster, json!({}), true).await;
    deployment(&client, ns, "web", 1).await;
    web_policy(&client, ns, cluster).await;
    let ctrl = detector_scheduler_binding().await;
    let works: Api<Work> = Api::namespaced(client.clone(), &format!("karmada-es-{cluster}"));
    // The mark on the manifest of web's Work, once that Work exists.
    let mark_in_work = |works: Api<Work>| async move {
        let work = work_of_web(&works).await?;
        let manifest: serde_json::Value = work.spec.workload.manifests[0].decode().unwrap();
        Some(
            manifest["metadata"]["labels"][MARK]
                .as_str()
                .map(str::to_owned),
        )
    };
    let templates: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let generation = eventually("the Work of web, unmarked", || {
        let works = works.clone();
        let templates = templates.clone();
        async move {
            let None = mark_in_work(works).await? else {
                return None;
            };
            templates.get("web").await.unwrap().metadata.generation
        }
    })
    .await;
    for (value, what) in [
        (json!("true"), "the mark in the Work"),
        (json!(null), "the mark gone"),
    ] {
        let marked = templates
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {MARK: value}}})),
            )
            .await
            .unwrap();
        assert_eq!(
            marked.metadata.generation,
            Some(generation),
            "a label change"
        );
        let want = value.as_str().map(str::to_owned);
        eventually(what, || {
            let works = works.clone();
            let want = want.clone();
            async move { (mark_in_work(works).await? == want).then_some(()) }
        })
        .await;
    }
    ctrl.stop().await;
}

/// PropagationPolicy `web-pp`: Deployment `web` to `cluster`.
async fn web_policy(client: &Client, ns: &str, cluster: &str) {
    policy(
        client,
        ns,
        "web-pp",
        json!({
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "placement": {"clusterAffinity": {"clusterNames": [cluster]}}
        }),
    )
    .await;
}

/// The detector, the scheduler and the binding controller (Works are built, nothing applies them).
async fn detector_scheduler_binding() -> Controllers {
    let mut controllers = in_process::implemented(&["scheduler", "binding"]);
    controllers.push((
        "resource-detector",
        karmada_controllers::detector::start_fn(),
    ));
    Harness::new(controllers).start(env()).await
}

/// The Work built for binding `web-deployment` among `works`, if any.
async fn work_of_web(works: &Api<Work>) -> Option<Work> {
    let list = works.list(&ListParams::default()).await.unwrap();
    list.items.into_iter().find(|w| {
        w.annotations()
            .get("resourcebinding.karmada.io/name")
            .is_some_and(|n| n == "web-deployment")
    })
}

/// A template created after its namespace's policies is claimed by the most specific one that
/// selects it: by name over by label over the whole kind, and never one naming another object or
/// selecting another kind (the detector looks its candidates up by kind and name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unclaimed_template_gets_the_most_specific_policy_that_selects_it() {
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    let ns = "pd-specific";
    create_namespace(&client, ns, json!({})).await;
    let ctrl = start_controllers(false).await;
    let placement = json!({"clusterAffinity": {"clusterNames": ["pd-specific-m1"]}});
    let selects = |selector: serde_json::Value| json!({"resourceSelectors": [selector], "placement": placement});
    for (name, selector) in [
        (
            "by-kind",
            json!({"apiVersion": "apps/v1", "kind": "Deployment"}),
        ),
        (
            "by-label",
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "labelSelector": {"matchLabels": {"app": "api"}}}),
        ),
        (
            "by-name",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}),
        ),
        // Lexically first, so each would win a tie it should not be in.
        (
            "a-other-name",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "db"}),
        ),
        (
            "a-other-kind",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "web"}),
        ),
    ] {
        policy(&client, ns, name, selects(selector)).await;
    }
    let pps: Api<PropagationPolicy> = Api::namespaced(client.clone(), ns);
    for name in [
        "by-kind",
        "by-label",
        "by-name",
        "a-other-name",
        "a-other-kind",
    ] {
        wait_processed(&pps, name, "propagationpolicy.karmada.io/permanent-id").await;
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    for (template, want) in [
        ("web", "by-name"),
        ("api", "by-label"),
        ("cache", "by-kind"),
    ] {
        deployment(&client, ns, template, 1).await;
        eventually(&format!("{template} claimed by {want}"), || {
            claimed_by(&deployments, template, want)
        })
        .await;
    }
    ctrl.stop().await;
}
