//! The failover scenario: Deployments divided over every member, the last member's kube-apiserver
//! killed, and the time until every workload runs whole on the members left.
//!
//! Set-up (not timed): a ClusterTaintPolicy puts a NoExecute taint on any Cluster whose `Ready` is
//! `False` or `Unknown`; each namespace's policy divides its Deployments over the members with equal
//! static weights, and each Deployment asks for one replica per member, so every workload has a
//! replica on the member that dies. The controller-manager runs with [`KCM_ARGS`] (both
//! implementations: Karmada's `Failover` gate is off by default and NoExecute eviction is opt-in).
//!
//! Timed from the kill: the taint on the Cluster (detection: `--cluster-failure-threshold` after the
//! last good probe), no binding placing replicas on the lost member (the taint manager's
//! evictions), and every Deployment's replicas whole again on the members left, read from their
//! API servers (the scheduler's new placement, the binding controller's Works, the execution
//! controller's member writes).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use karmada_apis::{Cluster, ClusterTaintPolicy, PropagationPolicy, ResourceBinding};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde_json::json;

use super::process::{request_counts, request_delta, writes};
use super::session::Session;
use super::workload::{Template, create_manifest, templates};

/// The taint the scenario's ClusterTaintPolicy manages.
const TAINT: &str = "bench.karmada-rs.io/not-ready";

/// Controller-manager flags of the failover run, the same for both implementations: failover on,
/// NoExecute taints evict, evictions unpaced (Karmada's default `--resource-eviction-rate` is 0.5/s,
/// which alone would make a few hundred workloads take minutes: the point is the machinery, not the
/// configured pace), and a lost member noticed within seconds (probes every 1 s, 3 s threshold).
pub const KCM_ARGS: &[&str] = &[
    "--feature-gates=Failover=true",
    "--enable-no-execute-taint-eviction=true",
    "--resource-eviction-rate=1000",
    "--cluster-status-update-frequency=1s",
    "--cluster-failure-threshold=3s",
];

/// How long a lost member took to be failed over.
#[derive(Clone, Debug, Serialize)]
pub struct FailoverResult {
    /// Deployments, each with a replica on every member.
    pub templates: usize,
    /// Members before the loss.
    pub members: usize,
    /// Kill → the NoExecute taint on the lost member's Cluster (s).
    pub taint_seconds: f64,
    /// Kill → no binding places replicas on the lost member (s).
    pub evicted_seconds: f64,
    /// Kill → every Deployment's replicas whole on the members left (s).
    pub whole_seconds: f64,
    /// Bindings that recorded a graceful eviction task from the lost member.
    pub eviction_tasks: usize,
    /// Controller CPU from the kill until whole (s).
    pub cpu_seconds: f64,
    /// The controllers' host writes from the kill until whole.
    pub host_writes: u64,
    /// The controllers' writes to the members left, from the kill until whole.
    pub member_writes: u64,
}

/// Runs the scenario on `s` (a fresh session started with [`KCM_ARGS`]) with `deployments`
/// Deployments.
pub async fn failover(
    s: &Session,
    deployments: usize,
    concurrency: usize,
    timeout: Duration,
) -> anyhow::Result<FailoverResult> {
    let members = s.member_names.len();
    if members < 2 {
        bail!("the failover scenario needs at least 2 members, not {members}");
    }
    let lost = s.member_names[members - 1].clone();
    set_up(s).await?;
    let templates = templates("failover", deployments, 0, &s.namespaces);
    let replicas = i32::try_from(members)?;
    futures::stream::iter(templates.iter().map(|t| {
        let mut manifest = t.manifest();
        manifest["spec"]["replicas"] = json!(replicas);
        create_manifest(&s.host, t, manifest)
    }))
    .buffer_unordered(concurrency)
    .try_collect::<Vec<()>>()
    .await?;
    let everywhere: Vec<&(String, kube::Client)> = s.members.iter().collect();
    wait_replicas(
        &templates,
        &everywhere,
        // One replica on each member.
        |r, objects| objects == members && r == replicas,
        timeout,
    )
    .await
    .context("before the kill: one replica of every Deployment on every member")?;

    let before = request_counts(&s.metrics()?);
    let cpu_before = s.sample()?.cpu_seconds;
    let killed = Instant::now();
    s.env().members()[members - 1].kill();
    let clusters: Api<Cluster> = Api::all(s.host.clone());
    let bindings: Api<ResourceBinding> = Api::all(s.host.clone());
    let deadline = killed + timeout;
    let mut tainted = None;
    let mut evicted = None;
    while tainted.is_none() || evicted.is_none() {
        if Instant::now() > deadline {
            bail!(
                "{lost} lost {timeout:?} ago: tainted {}, evicted {}",
                tainted.is_some(),
                evicted.is_some()
            );
        }
        if tainted.is_none() {
            let c = clusters.get(&lost).await?;
            if c.spec
                .taints
                .iter()
                .any(|t| t.key == TAINT && t.effect == "NoExecute")
            {
                tainted = Some(killed.elapsed());
            }
        }
        if evicted.is_none() {
            let list = bindings.list(&ListParams::default()).await?;
            let on_lost = list
                .items
                .iter()
                .filter(|rb| rb.spec.clusters.iter().any(|c| c.name == lost))
                .count();
            if on_lost == 0 {
                evicted = Some(killed.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let left: Vec<&(String, kube::Client)> = s.members[..members - 1].iter().collect();
    wait_replicas(&templates, &left, |r, _| r == replicas, timeout)
        .await
        .context("after the kill: every Deployment whole on the members left")?;
    let whole = killed.elapsed();
    let requests = request_delta(&before, &request_counts(&s.metrics()?));
    let cpu_seconds = s.sample()?.cpu_seconds - cpu_before;
    let eviction_tasks = bindings
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|rb| {
            rb.spec
                .graceful_eviction_tasks
                .iter()
                .any(|t| t.from_cluster == lost)
        })
        .count();
    Ok(FailoverResult {
        templates: templates.len(),
        members,
        taint_seconds: tainted.unwrap_or_default().as_secs_f64(),
        evicted_seconds: evicted.unwrap_or_default().as_secs_f64(),
        whole_seconds: whole.as_secs_f64(),
        eviction_tasks,
        cpu_seconds,
        host_writes: writes(&requests, "host"),
        member_writes: writes(&requests, "members"),
    })
}

/// The ClusterTaintPolicy, and every namespace's policy switched to Divided with equal weights.
async fn set_up(s: &Session) -> anyhow::Result<()> {
    let ctp: ClusterTaintPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "ClusterTaintPolicy",
        "metadata": {"name": "bench-not-ready"},
        "spec": {
            "addOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["False", "Unknown"]}],
            "removeOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["True"]}],
            "taints": [{"key": TAINT, "effect": "NoExecute"}],
        },
    }))?;
    Api::<ClusterTaintPolicy>::all(s.host.clone())
        .create(&PostParams::default(), &ctp)
        .await
        .context("create the failover ClusterTaintPolicy")?;
    let weights: Vec<_> = s
        .member_names
        .iter()
        .map(|m| json!({"targetCluster": {"clusterNames": [m]}, "weight": 1}))
        .collect();
    let patch = json!({"spec": {"placement": {"replicaScheduling": {
        "replicaSchedulingType": "Divided",
        "replicaDivisionPreference": "Weighted",
        "weightPreference": {"staticWeightList": weights},
    }}}});
    for ns in &s.namespaces {
        Api::<PropagationPolicy>::namespaced(s.host.clone(), ns)
            .patch("bench", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("divide policy {ns}/bench"))?;
    }
    Ok(())
}

/// Waits until `done(replicas, objects)` holds for every template, summed over its Deployments
/// in `members`.
async fn wait_replicas(
    templates: &[Template],
    members: &[&(String, kube::Client)],
    done: impl Fn(i32, usize) -> bool,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let lp = ListParams::default().labels("karmada.io/managed=true");
    loop {
        let mut sums: BTreeMap<(String, String), (i32, usize)> = BTreeMap::new();
        for (name, client) in members {
            let list = Api::<Deployment>::all(client.clone())
                .list(&lp)
                .await
                .with_context(|| format!("list Deployments in {name}"))?;
            for d in list.items {
                let key = (
                    d.metadata.namespace.unwrap_or_default(),
                    d.metadata.name.unwrap_or_default(),
                );
                let e = sums.entry(key).or_default();
                e.0 += d.spec.replicas.unwrap_or(1);
                e.1 += 1;
            }
        }
        let missing = templates
            .iter()
            .filter(|t| {
                let (replicas, objects) = sums
                    .get(&(t.namespace.clone(), t.name.clone()))
                    .copied()
                    .unwrap_or_default();
                !done(replicas, objects)
            })
            .count();
        if missing == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{missing} of {} Deployments not as expected after {timeout:?}",
                templates.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
