//! Preemption (`SchedulerPreemption`, karmada-rs's own gate, off by default): a binding that does
//! not fit for lack of room takes the placement of a lower-priority binding when its priority comes
//! from a PriorityClass that allows preempting.
//!
//! Only the scheduler runs. One Cluster, no member behind it: its `resourceSummary` (4 CPUs) is
//! written by the test, so "full" is what the test says. A priority-0 workload of 4 × 1 CPU is
//! placed there, then the summary shows its 4 CPUs allocated. A workload of 2 × 1 CPU whose policy
//! takes priority 1000 from a PriorityClass (`preemptionPolicy` unset, Kubernetes' default
//! `PreemptLowerPriority`) arrives:
//!
//! 1. gate off: it is `Unschedulable`, the low one keeps its placement and gets no eviction task;
//! 2. gate on (a new controller-manager): the low one loses the cluster (a graceful eviction task,
//!    reason `Preempted`, producer `Scheduler`), the high one is placed there; Events `Preempted`
//!    (on the low binding and its template) and `PreemptionSucceeded` (on the high binding); the
//!    victims metric counts one;
//! 3. a workload at priority 2000 from a PriorityClass with `preemptionPolicy: Never` stays
//!    `Unschedulable` and the priority-1000 one keeps its placement.

#![allow(
    clippy::unwrap_used,
    reason = "a test harness file: its helpers build fixed objects and panic on a broken fixture"
)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use karmada_apis::{Cluster, PropagationPolicy, ResourceBinding};
use karmada_e2e::controller_manager::*;
use karmada_e2e::in_process::{create_ready_cluster, resource_binding};
use karmada_e2e::quiet::{Watched, assert_holds_for};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);

fn env() -> &'static testenv::TestEnv {
    testenv::shared(testenv::EnvOptions {
        host_controller_manager: false,
        install_crds: true,
        ..testenv::EnvOptions::default()
    })
}

/// Writes Cluster `name`'s resource summary: 4 CPUs, `cpu` and `pods` allocated.
async fn set_summary(client: &kube::Client, name: &str, cpu: u32, pods: u32) {
    let status = json!({"status": {"resourceSummary": {
        "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        "allocated": {"cpu": cpu.to_string(), "memory": "0", "pods": pods.to_string()},
    }}});
    Api::<Cluster>::all(client.clone())
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("patch the summary of Cluster {name}: {e}"));
}

async fn create_priority_class(
    client: &kube::Client,
    name: &str,
    value: i32,
    policy: Option<&str>,
) {
    let mut pc = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name}, "value": value});
    if let Some(p) = policy {
        pc["preemptionPolicy"] = json!(p);
    }
    let pc: PriorityClass = serde_json::from_value(pc).unwrap();
    match Api::<PriorityClass>::all(client.clone())
        .create(&PostParams::default(), &pc)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create PriorityClass {name}: {e}"),
    }
}

/// A PropagationPolicy `name` taking its priority from PriorityClass `class`.
async fn create_policy(client: &kube::Client, ns: &str, name: &str, class: &str) {
    let pp: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
            "schedulePriority": {"priorityClassSource": "KubePriorityClass",
                "priorityClassName": class},
        },
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pp)
        .await
        .unwrap_or_else(|e| panic!("create PropagationPolicy {ns}/{name}: {e}"));
}

/// A ResourceBinding for Deployment `ns/name`: `replicas` × 1 CPU, Divided (Aggregated) over
/// `cluster`, at `priority` as the detector resolved it from the policy of the same name.
fn binding(
    ns: &str,
    name: &str,
    cluster: &str,
    replicas: i32,
    priority: Option<i32>,
) -> ResourceBinding {
    let mut spec = json!({
        "replicas": replicas,
        "replicaRequirements": {"resourceRequest": {"cpu": "1"}},
        "placement": {
            "clusterAffinity": {"clusterNames": [cluster]},
            "replicaScheduling": {"replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "Aggregated"},
        },
    });
    let mut rb = if let Some(p) = priority {
        spec["schedulePriority"] = json!({"priority": p});
        let mut rb = resource_binding(ns, name, ("apps/v1", "Deployment"), spec);
        rb.metadata.annotations = Some(
            [
                (
                    "propagationpolicy.karmada.io/namespace".to_owned(),
                    ns.to_owned(),
                ),
                (
                    "propagationpolicy.karmada.io/name".to_owned(),
                    name.to_owned(),
                ),
            ]
            .into(),
        );
        rb
    } else {
        resource_binding(ns, name, ("apps/v1", "Deployment"), spec)
    };
    rb.metadata.resource_version = None;
    rb
}

/// `(cluster, replicas)` of a binding, and its `Scheduled` condition reason.
fn placement(rb: &ResourceBinding) -> (Vec<(String, i32)>, Option<String>) {
    let clusters = rb
        .spec
        .clusters
        .iter()
        .map(|c| (c.name.clone(), c.replicas))
        .collect();
    let reason = rb
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Scheduled"))
        .map(|c| c.reason.clone());
    (clusters, reason)
}

/// `(kind, name, reason)` of the Events in `ns`.
async fn events(client: &kube::Client, ns: &str) -> Vec<(String, String, String)> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| {
            (
                e.involved_object.kind.unwrap_or_default(),
                e.involved_object.name.unwrap_or_default(),
                e.reason.unwrap_or_default(),
            )
        })
        .collect()
}

fn start(env: &testenv::TestEnv, gate: bool) -> Kcm {
    let gates = format!("--feature-gates=SchedulerPreemption={gate}");
    Kcm::start(
        env.host().kubeconfig_path(),
        &["--leader-elect=false", "--controllers=scheduler", &gates],
        &[],
    )
}

async fn wait_for(
    kcm: &Kcm,
    bindings: &Api<ResourceBinding>,
    name: &str,
    what: &str,
    want: impl Fn(&(Vec<(String, i32)>, Option<String>)) -> bool,
) -> ResourceBinding {
    kcm.eventually(&format!("{name}: {what}"), WAIT, async || {
        let rb = bindings.get(name).await.map_err(|e| e.to_string())?;
        let p = placement(&rb);
        if want(&p) {
            Ok(rb)
        } else {
            Err(format!("{p:?}"))
        }
    })
    .await
}

/// Waits until the scheduler's cache has `cluster` full: a probe binding of one replica comes out
/// `Unschedulable`. The summary write and a binding created after it reach the scheduler on two
/// watches, in either order; without this, a binding created right after the write can be placed
/// on room the scheduler has not yet seen taken. A probe placed on that room is deleted and tried
/// again.
async fn scheduler_sees_full(kcm: &Kcm, bindings: &Api<ResourceBinding>, ns: &str, cluster: &str) {
    for attempt in 0..PROBES {
        let name = format!("probe-{attempt}");
        bindings
            .create(
                &PostParams::default(),
                &binding(ns, &name, cluster, 1, None),
            )
            .await
            .unwrap_or_else(|e| panic!("create ResourceBinding {name}: {e}"));
        let rb = wait_for(kcm, bindings, &name, "scheduled", |p| p.1.is_some()).await;
        bindings
            .delete(&name, &Default::default())
            .await
            .unwrap_or_else(|e| panic!("delete ResourceBinding {name}: {e}"));
        if placement(&rb).1.as_deref() == Some("Unschedulable") {
            return;
        }
    }
    panic!(
        "the scheduler still placed a probe on {cluster} after {PROBES} tries: its cache never saw the cluster full"
    );
}

/// Probes [`scheduler_sees_full`] tries before it gives up.
const PROBES: usize = 20;

/// How long a placement must stay as it is to show nothing preempted it.
const QUIET: Duration = Duration::from_secs(3);

/// `Ok` while `b` keeps `placed` and has no eviction task.
fn untouched(b: &ResourceBinding, placed: &[(String, i32)]) -> Result<(), String> {
    if placement(b).0 != placed {
        return Err(format!("placement changed to {:?}", placement(b).0));
    }
    if !b.spec.graceful_eviction_tasks.is_empty() {
        return Err("an eviction task was added".to_string());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario in three phases on the same cluster and bindings"
)]
async fn a_higher_priority_binding_preempts_a_lower_one_when_its_class_allows() {
    let env = env();
    let client = env.host().client().await;
    let ns = fresh_namespace(&client, "preempt").await;
    let cluster = format!("preempt-{}", std::process::id());
    let apis = json!({"apiEnablements": [{"groupVersion": "apps/v1",
        "resources": [{"name": "deployments", "kind": "Deployment"}]}]});
    create_ready_cluster(&client, &cluster, apis).await;
    set_summary(&client, &cluster, 0, 0).await;
    create_priority_class(&client, "preempt-high", 1000, None).await;
    create_priority_class(&client, "preempt-never", 2000, Some("Never")).await;
    create_policy(&client, &ns, "high", "preempt-high").await;
    create_policy(&client, &ns, "never", "preempt-never").await;
    let bindings: Api<ResourceBinding> = Api::namespaced(client.clone(), &ns);
    let create = async |rb: ResourceBinding| {
        bindings
            .create(&PostParams::default(), &rb)
            .await
            .unwrap_or_else(|e| panic!("create ResourceBinding: {e}"));
    };
    let on = |replicas: i32| vec![(cluster.clone(), replicas)];

    // 1. Gate off: the low one is placed, then the cluster is full; the high one does not fit.
    let kcm = start(env, false);
    create(binding(&ns, "low", &cluster, 4, None)).await;
    wait_for(&kcm, &bindings, "low", "placed", |p| p.0 == on(4)).await;
    set_summary(&client, &cluster, 4, 4).await;
    scheduler_sees_full(&kcm, &bindings, &ns, &cluster).await;
    create(binding(&ns, "high", &cluster, 2, Some(1000))).await;
    wait_for(&kcm, &bindings, "high", "Unschedulable", |p| {
        p.1.as_deref() == Some("Unschedulable")
    })
    .await;
    let low = bindings.get("low").await.unwrap();
    assert_eq!(
        placement(&low).0,
        on(4),
        "gate off: the low one keeps its placement"
    );
    assert!(
        low.spec.graceful_eviction_tasks.is_empty(),
        "gate off: nothing is evicted"
    );
    // And keeps it for long enough that a retry would have preempted, were the gate on.
    let rv = low.metadata.resource_version.clone().unwrap_or_default();
    assert_holds_for(&bindings, Watched::Name("low"), &rv, QUIET, |b| {
        untouched(b, &on(4))
    })
    .await;
    drop(kcm);

    // 2. Gate on: the high one takes the low one's room.
    let kcm = start(env, true);
    let high = wait_for(&kcm, &bindings, "high", "placed", |p| {
        p.0 == on(2) && p.1.as_deref() == Some("Success")
    })
    .await;
    assert_eq!(placement(&high).0, on(2));
    let low = bindings.get("low").await.unwrap();
    assert!(
        !low.spec.clusters.iter().any(|c| c.name == cluster),
        "the low one lost the cluster: {:?}",
        low.spec.clusters
    );
    let task = low
        .spec
        .graceful_eviction_tasks
        .iter()
        .find(|t| t.from_cluster == cluster)
        .unwrap_or_else(|| panic!("no eviction task: {:?}", low.spec.graceful_eviction_tasks));
    assert_eq!(task.reason, "Preempted");
    assert_eq!(task.producer, "Scheduler");
    assert_eq!(task.replicas, Some(4));
    assert!(
        task.message.contains(&format!("ResourceBinding {ns}/high")),
        "{}",
        task.message
    );
    let seen = kcm
        .eventually("the preemption Events", WAIT, async || {
            let seen = events(&client, &ns).await;
            let has = |kind: &str, name: &str, reason: &str| {
                seen.iter()
                    .any(|e| e.0 == kind && e.1 == name && e.2 == reason)
            };
            (has("ResourceBinding", "low", "Preempted")
                && has("Deployment", "low", "Preempted")
                && has("ResourceBinding", "high", "PreemptionSucceeded"))
            .then_some(seen.clone())
            .ok_or(format!("{seen:?}"))
        })
        .await;
    assert!(
        !seen.iter().any(|e| e.2 == "PreemptionFailed"),
        "no failure recorded: {seen:?}"
    );
    let metrics = kcm.metrics().unwrap_or_default();
    assert!(
        metrics.contains("karmada_rs_scheduler_preemption_victims_total 1"),
        "victims counted: {}",
        metrics
            .lines()
            .filter(|l| l.contains("preemption"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The victim is scheduled again and finds no room (the cluster it left is being evicted).
    wait_for(&kcm, &bindings, "low", "rescheduled", |p| {
        p.1.as_deref().is_some_and(|r| r != "Success")
    })
    .await;

    // 3. A PriorityClass with preemptionPolicy Never only orders the queue.
    create(binding(&ns, "never", &cluster, 2, Some(2000))).await;
    wait_for(&kcm, &bindings, "never", "Unschedulable", |p| {
        p.1.as_deref() == Some("Unschedulable")
    })
    .await;
    let high = bindings.get("high").await.unwrap();
    assert_eq!(placement(&high).0, on(2), "Never does not preempt");
    assert!(high.spec.graceful_eviction_tasks.is_empty());
    let rv = high.metadata.resource_version.clone().unwrap_or_default();
    assert_holds_for(&bindings, Watched::Name("high"), &rv, QUIET, |b| {
        untouched(b, &on(2))
    })
    .await;
    let never = bindings.get("never").await.unwrap();
    assert!(never.spec.clusters.is_empty());
}
