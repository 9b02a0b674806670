//! The scheduling benchmark: how many bindings per second a scheduler places, and how long a binding
//! waits from its creation to its placement, for karmada-rs's built-in scheduler (the
//! controller-manager with `--controllers=scheduler`) and Karmada's `karmada-scheduler`, each on the
//! same host API server with the same client QPS.
//!
//! Only the scheduler runs: ResourceBindings are written as the detector writes them (a Deployment
//! of 10 replicas, Divided by the clusters' available replicas, which the general estimator reads
//! from each Cluster's `resourceSummary`), and the Clusters are Ready objects with a summary but no
//! member behind them (a scheduler reads nothing else). Two measurements per cluster count:
//! - **backlog**: the bindings exist before the scheduler starts; the time from its start until
//!   every one is placed, and the placements per second between the first and the last;
//! - **live**: with the scheduler running, bindings created at a fixed rate; the latency from each
//!   create to the watch event that shows it placed.
//!
//! With the accurate estimator (`--estimator on`), every Cluster also gets Karmada's Go
//! `karmada-scheduler-estimator` (one process per Cluster, found through an ExternalName Service
//! `karmada-scheduler-estimator-<cluster>` in `karmada-system`, as Karmada finds them), and both
//! schedulers run with `--enable-scheduler-estimator`. An estimator needs only a Kubernetes API with
//! Nodes and Pods: one member API server holding [`ESTIMATOR_NODES`] node objects serves all of them
//! (each with its own `--cluster-name`), so every estimator answers the same
//! [`accurate_replicas`]. The Cluster summaries are sized so that it matters for some clusters only:
//! every fifth Cluster's summary has room for ~100,000 replicas, which the accurate estimate cuts to
//! 440, while the others' summaries have room for 390, below the accurate estimate. Without the
//! estimator the large-summary clusters take every replica; with it the others get a share, which the
//! report shows as the share of replicas on small-summary clusters.
//!
//! `cargo bench -p karmada-bench --bench scheduling -- --help`; results in `docs/benchmarks.md`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Node, Service};
use karmada_apis::{Cluster, ResourceBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde::Serialize;
use serde_json::json;

use super::process::{ProcessSample, parse_metrics};
use super::report::{Machine, Percentiles};
use super::session::Impl;
use karmada_e2e::controller_manager::{Kcm, free_port, fresh_namespace};
use karmada_e2e::in_process::resource_binding;

/// Sizes and switches.
#[derive(Clone, Debug, Serialize)]
pub struct SchedulingConfig {
    /// Bindings in the backlog.
    pub bindings: usize,
    /// Cluster counts, one run each.
    pub clusters: Vec<usize>,
    /// Client QPS and burst both schedulers get (`--kube-api-qps`, `--kube-api-burst`).
    pub qps: (f64, u32),
    /// Bindings per second in the live run.
    pub live_rate: f64,
    /// Length of the live run (s).
    pub live_seconds: f64,
    /// Binding creates in flight while the backlog is written.
    pub create_concurrency: usize,
    /// With the accurate estimator or not, one run each (`false`: the general estimate only).
    pub estimator: Vec<bool>,
}

impl SchedulingConfig {
    /// The size `make bench` runs.
    pub fn full() -> Self {
        Self {
            bindings: 5000,
            clusters: vec![3, 20],
            qps: (1000.0, 2000),
            live_rate: 10.0,
            live_seconds: 30.0,
            create_concurrency: 32,
            estimator: vec![false, true],
        }
    }

    /// The size the test suite runs, so the harness cannot rot.
    pub fn smoke() -> Self {
        Self {
            bindings: 40,
            clusters: vec![3],
            qps: (1000.0, 2000),
            live_rate: 5.0,
            live_seconds: 2.0,
            create_concurrency: 8,
            estimator: vec![false],
        }
    }
}

/// One scheduler at one cluster count.
#[derive(Clone, Debug, Serialize)]
pub struct SchedulingRun {
    /// `karmada-rs` or `karmada-go`.
    pub implementation: &'static str,
    /// Ready Clusters every binding may go to.
    pub clusters: usize,
    /// Whether the scheduler asked a `karmada-scheduler-estimator` per Cluster.
    pub estimator: bool,
    /// Bindings in the backlog.
    pub bindings: usize,
    /// From the scheduler's start until the last backlog binding was seen placed (s).
    pub backlog_seconds: f64,
    /// Backlog placements per second, from the first to the last one seen.
    pub bindings_per_second: f64,
    /// Live bindings created.
    pub live_bindings: usize,
    /// Create-to-placed latency of the live bindings.
    pub live_latency: Percentiles,
    /// CPU the scheduler process used in both phases (s).
    pub cpu_seconds: f64,
    /// Its peak resident memory (MiB).
    pub peak_rss_mib: f64,
    /// Share of the backlog's placed replicas on small-summary clusters (%).
    pub backlog_small_share_pct: f64,
    /// Share of the live bindings' placed replicas on small-summary clusters (%).
    pub live_small_share_pct: f64,
    /// `MaxAvailableReplicas` calls the estimators answered in both phases, summed over them
    /// (their `karmada_scheduler_estimator_estimating_request_total`); `None` without estimators.
    pub estimator_requests: Option<f64>,
    /// Of those, the ones an estimator counted as failed.
    pub estimator_request_errors: Option<f64>,
    /// CPU all the estimators used in both phases (s), summed.
    pub estimator_cpu_seconds: Option<f64>,
}

/// The benchmark's report.
#[derive(Clone, Debug, Serialize)]
pub struct SchedulingReport {
    /// The sizes it ran.
    pub config: SchedulingConfig,
    /// One entry per implementation, estimator setting and cluster count.
    pub runs: Vec<SchedulingRun>,
    /// The machine and commit.
    pub machine: Machine,
    /// `/proc/loadavg`'s 1-, 5- and 15-minute load averages when the first run started.
    pub load_average_start: [f64; 3],
    /// The same after the last run.
    pub load_average_end: [f64; 3],
}

/// The machine's 1-, 5- and 15-minute load averages (zeros when unreadable).
fn load_average() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut out = [0.0; 3];
    for (slot, field) in out.iter_mut().zip(text.split_whitespace()) {
        *slot = field.parse().unwrap_or(0.0);
    }
    out
}

impl SchedulingReport {
    /// The results as a Markdown table.
    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "| scheduler | clusters | estimator | backlog | backlog placed (s) | bindings/s | live p50/p90/p99/max (ms) | CPU (s) | peak RSS (MiB) | small-summary share backlog/live (%) | estimator RPCs | estimators' CPU (s) |\n|---|---:|---|---:|---:|---:|---|---:|---:|---|---:|---:|\n",
        );
        for r in &self.runs {
            let l = &r.live_latency;
            out.push_str(&format!(
                "| {} | {} | {} | {} | {:.1} | {:.1} | {:.0}/{:.0}/{:.0}/{:.0} ({} live) | {:.1} | {:.0} | {:.0}/{:.0} | {} | {} |\n",
                r.implementation,
                r.clusters,
                if r.estimator { "on" } else { "off" },
                r.bindings,
                r.backlog_seconds,
                r.bindings_per_second,
                l.p50_ms,
                l.p90_ms,
                l.p99_ms,
                l.max_ms,
                r.live_bindings,
                r.cpu_seconds,
                r.peak_rss_mib,
                r.backlog_small_share_pct,
                r.live_small_share_pct,
                match (r.estimator_requests, r.estimator_request_errors) {
                    (Some(n), Some(e)) if e > 0.0 => format!("{n:.0} ({e:.0} failed)"),
                    (Some(n), _) => format!("{n:.0}"),
                    (None, _) => "–".to_owned(),
                },
                r.estimator_cpu_seconds
                    .map_or_else(|| "–".to_owned(), |c| format!("{c:.1}")),
            ));
        }
        out
    }
}

/// Node objects on the estimators' member API server.
pub const ESTIMATOR_NODES: usize = 4;
/// Pods one of those nodes takes (its CPU and memory take more of the benchmark's replicas).
const NODE_PODS: usize = 110;
/// The gRPC port the estimator Services expose (the schedulers' `--scheduler-estimator-port`
/// default); each targets its estimator's real port on 127.0.0.1.
const ESTIMATOR_SERVICE_PORT: u16 = 10352;

/// What every estimator answers for a benchmark replica (100m CPU, 128Mi): the nodes' pod slots,
/// the tightest of their resources.
pub fn accurate_replicas() -> i32 {
    (ESTIMATOR_NODES * NODE_PODS) as i32
}

/// Whether Cluster `index` has the large summary (every fifth one): the general estimate says
/// ~100,000 replicas, the accurate one [`accurate_replicas`]. The others' summaries have room for
/// 390, below the accurate estimate.
fn large_summary(index: usize) -> bool {
    index.is_multiple_of(5)
}

/// Runs the benchmark for `impls` on a fresh host (and, when some run has the estimator, one
/// member API server holding the estimators' nodes).
pub async fn run(config: &SchedulingConfig, impls: &[Impl]) -> anyhow::Result<SchedulingReport> {
    let with_estimator = config.estimator.contains(&true);
    let env = testenv::TestEnv::start(testenv::EnvOptions {
        host_controller_manager: false,
        install_crds: true,
        members: usize::from(with_estimator),
        ..testenv::EnvOptions::default()
    })
    .await
    .context("start the host API server")?;
    let client = env.host().client().await;
    if with_estimator {
        prepare_estimator_member(&env, &client).await?;
    }
    let load_average_start = load_average();
    let mut runs = Vec::new();
    for &clusters in &config.clusters {
        for &estimator in &config.estimator {
            for &which in impls {
                let run = run_one(&env, &client, config, which, clusters, estimator)
                    .await
                    .with_context(|| {
                        format!(
                            "{} with {clusters} clusters, estimator {}",
                            which.label(),
                            if estimator { "on" } else { "off" }
                        )
                    })?;
                eprintln!("scheduling bench: {run:?}");
                runs.push(run);
            }
        }
    }
    Ok(SchedulingReport {
        config: config.clone(),
        runs,
        machine: Machine::read(),
        load_average_start,
        load_average_end: load_average(),
    })
}

/// The estimators' member: [`ESTIMATOR_NODES`] schedulable 32-CPU nodes (objects only: nothing
/// runs on them, and no pod is ever created there); and `karmada-system` on the host for the
/// estimators' Services.
async fn prepare_estimator_member(
    env: &testenv::TestEnv,
    host: &kube::Client,
) -> anyhow::Result<()> {
    let member = estimator_member(env)?;
    let nodes: Api<Node> = Api::all(member.client().await);
    for i in 0..ESTIMATOR_NODES {
        let name = format!("bench-node-{i}");
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        }))?;
        nodes
            .create(&PostParams::default(), &node)
            .await
            .with_context(|| format!("create node {name}"))?;
        let resources = json!({"cpu": "32", "memory": "256Gi", "pods": NODE_PODS.to_string()});
        let status = json!({"status": {
            "allocatable": resources, "capacity": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "benchmark node", "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        }});
        nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .with_context(|| format!("set node {name}'s status"))?;
        // The API server's TaintNodesByCondition admission taints a new node not-ready; no node
        // lifecycle controller runs on this member to lift it, so the benchmark does.
        nodes
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"taints": null}})),
            )
            .await
            .with_context(|| format!("lift node {name}'s not-ready taint"))?;
    }
    let namespaces: Api<Namespace> = Api::all(host.clone());
    if namespaces.get_opt("karmada-system").await?.is_none() {
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "karmada-system"}}))?;
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .context("create namespace karmada-system")?;
    }
    Ok(())
}

fn estimator_member(env: &testenv::TestEnv) -> anyhow::Result<&testenv::ApiServer> {
    env.members()
        .first()
        .context("no member API server for the estimators")
}

/// One `karmada-scheduler-estimator` per Cluster, all on the same member API server.
struct Estimators {
    processes: Vec<Kcm>,
    services: Vec<String>,
    /// CPU seconds of each when the scheduler started.
    cpu_before: Vec<f64>,
    /// Requests each had answered when the scheduler started (the readiness checks').
    requests_before: Vec<(f64, f64)>,
}

impl Estimators {
    /// Starts them, registers their Services and waits until each answers the expected estimate.
    async fn start(
        env: &testenv::TestEnv,
        host: &kube::Client,
        clusters: &[String],
    ) -> anyhow::Result<Self> {
        let binary = testenv::binaries::locate_karmada("karmada-scheduler-estimator")
            .map_err(|e| anyhow::anyhow!("{e} (make karmada-binaries builds it)"))?;
        let member = estimator_member(env)?;
        let services_api: Api<Service> = Api::namespaced(host.clone(), "karmada-system");
        let mut this = Estimators {
            processes: Vec::new(),
            services: Vec::new(),
            cpu_before: Vec::new(),
            requests_before: Vec::new(),
        };
        let mut ports = Vec::new();
        for cluster in clusters {
            let port = free_port();
            this.processes.push(Kcm::start_program(
                &binary,
                member.kubeconfig_path(),
                &[
                    &format!("--cluster-name={cluster}"),
                    &format!("--server-port={port}"),
                ],
                &[],
            ));
            let name = format!("karmada-scheduler-estimator-{cluster}");
            let service: Service = serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {
                    "type": "ExternalName",
                    "externalName": "127.0.0.1",
                    "ports": [{"name": "grpc", "port": ESTIMATOR_SERVICE_PORT, "targetPort": port}],
                },
            }))?;
            services_api
                .create(&PostParams::default(), &service)
                .await
                .with_context(|| format!("create Service karmada-system/{name}"))?;
            this.services.push(name);
            ports.push(port);
        }
        for ((cluster, port), process) in clusters.iter().zip(&ports).zip(&this.processes) {
            wait_answer(member, cluster, *port, process).await?;
        }
        Ok(this)
    }

    /// Counts requests and CPU from now on.
    fn rebase(mut self) -> anyhow::Result<Self> {
        self.cpu_before = self.cpu_seconds();
        self.requests_before = self.requests()?;
        Ok(self)
    }

    fn cpu_seconds(&self) -> Vec<f64> {
        self.processes
            .iter()
            .map(|p| ProcessSample::read(p.pid()).map_or(0.0, |s| s.cpu_seconds))
            .collect()
    }

    /// `MaxAvailableReplicas` requests each estimator counted: (all, failed).
    fn requests(&self) -> anyhow::Result<Vec<(f64, f64)>> {
        self.processes
            .iter()
            .map(|p| {
                let text = p.metrics().with_context(|| {
                    format!("read an estimator's metrics; its log:\n{}", p.log_tail(10))
                })?;
                let mut all = 0.0;
                let mut failed = 0.0;
                for s in parse_metrics(&text) {
                    if s.name == "karmada_scheduler_estimator_estimating_request_total"
                        && s.labels.get("type").map(String::as_str) == Some("MaxAvailableReplicas")
                    {
                        all += s.value;
                        if s.labels.get("result").map(String::as_str) != Some("success") {
                            failed += s.value;
                        }
                    }
                }
                Ok((all, failed))
            })
            .collect()
    }

    /// (requests, failed requests, CPU seconds) since the scheduler started, summed; stops them
    /// and deletes their Services.
    async fn finish(self, host: &kube::Client) -> anyhow::Result<(f64, f64, f64)> {
        let requests = self.requests()?;
        let cpu = self.cpu_seconds();
        let (mut all, mut failed) = (0.0, 0.0);
        for ((a, f), (a0, f0)) in requests.iter().zip(&self.requests_before) {
            all += a - a0;
            failed += f - f0;
        }
        let cpu: f64 = cpu.iter().zip(&self.cpu_before).map(|(c, c0)| c - c0).sum();
        let services_api: Api<Service> = Api::namespaced(host.clone(), "karmada-system");
        for name in &self.services {
            services_api
                .delete(name, &DeleteParams::default())
                .await
                .with_context(|| format!("delete Service karmada-system/{name}"))?;
        }
        Ok((all, failed, cpu))
    }
}

/// Waits until the estimator of `cluster` (gRPC on `port`) answers [`accurate_replicas`] for a
/// benchmark replica (until its node cache is filled it answers 0).
async fn wait_answer(
    member: &testenv::ApiServer,
    cluster: &str,
    port: u16,
    process: &Kcm,
) -> anyhow::Result<()> {
    use karmada_controllers::scheduler::estimator::{dial, proto};

    let quantity = |q: &str| proto::Quantity { string: q.into() };
    let request = proto::MaxAvailableReplicasRequest {
        cluster: cluster.to_owned(),
        replica_requirements: Some(proto::ReplicaRequirements {
            resource_request: [
                ("cpu".to_owned(), quantity("100m")),
                ("memory".to_owned(), quantity("128Mi")),
            ]
            .into(),
            namespace: "default".into(),
            ..Default::default()
        }),
    };
    let address = vec![format!("127.0.0.1:{port}")];
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = match dial::dial(&address, None).await {
            Ok(channel) => proto::EstimatorClient::new(channel)
                .max_available_replicas(request.clone(), "kind=Benchmark", Duration::from_secs(3))
                .await
                .map(|a| a.max_replicas)
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match answer {
            Ok(n) if n == accurate_replicas() => return Ok(()),
            other if Instant::now() > deadline => {
                let nodes: Vec<String> = Api::<Node>::all(member.client().await)
                    .list(&ListParams::default())
                    .await
                    .map(|l| l.items)
                    .unwrap_or_default()
                    .iter()
                    .map(|n| {
                        format!(
                            "{:?}: {:?}",
                            n.metadata.name,
                            n.status.as_ref().and_then(|s| s.allocatable.as_ref())
                        )
                    })
                    .collect();
                bail!(
                    "the estimator of {cluster} answers {other:?}, not {}; the member's nodes: {nodes:?}; its log:\n{}",
                    accurate_replicas(),
                    process.log_tail(30)
                )
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Creates `count` Ready Clusters; every fifth one's summary has room for plenty of replicas, the
/// others' for 390 (see [`large_summary`]). Returns their names.
async fn create_clusters(
    client: &kube::Client,
    prefix: &str,
    count: usize,
) -> anyhow::Result<Vec<String>> {
    let api: Api<Cluster> = Api::all(client.clone());
    let mut names = Vec::new();
    for i in 0..count {
        let name = format!("{prefix}-{i:02}");
        let c: Cluster = serde_json::from_value(json!({
            "apiVersion": "cluster.karmada.io/v1alpha1",
            "kind": "Cluster",
            "metadata": {"name": name},
            "spec": {"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push"},
        }))?;
        api.create(&PostParams::default(), &c).await?;
        let pods = if large_summary(i) { "100000" } else { "400" };
        let status = json!({"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "ClusterReady",
                "message": "cluster is healthy and ready to accept workloads",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "apiEnablements": [{"groupVersion": "apps/v1",
                "resources": [{"name": "deployments", "kind": "Deployment"}]}],
            "resourceSummary": {
                "allocatable": {"cpu": "10000", "memory": "40000Gi", "pods": pods},
                "allocated": {"cpu": format!("{}", i % 7), "memory": "1Gi", "pods": "10"},
            },
        }});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        names.push(name);
    }
    Ok(names)
}

/// A ResourceBinding as the detector writes one for a 10-replica Deployment, Divided by available
/// replicas over `clusters`.
fn binding(ns: &str, name: &str, clusters: &[String]) -> ResourceBinding {
    resource_binding(
        ns,
        name,
        ("apps/v1", "Deployment"),
        json!({
            "replicas": 10,
            "replicaRequirements": {"resourceRequest": {"cpu": "100m", "memory": "128Mi"}},
            "placement": {
                "clusterAffinity": {"clusterNames": clusters},
                "replicaScheduling": {"replicaSchedulingType": "Divided",
                    "replicaDivisionPreference": "Weighted",
                    "weightPreference": {"dynamicWeight": "AvailableReplicas"}},
            },
        }),
    )
}

fn placed(rb: &ResourceBinding) -> bool {
    !rb.spec.clusters.is_empty()
        && rb.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Scheduled" && c.status == "True")
        })
}

/// When each binding of a namespace was first seen placed, by a watch, and the replicas it then had
/// on small-summary clusters and in all.
#[derive(Clone, Default)]
struct Placements(Arc<Mutex<HashMap<String, Placed>>>);

/// A binding's first placement seen.
#[derive(Clone, Copy)]
struct Placed {
    at: Instant,
    /// Its replicas on small-summary clusters.
    small: i64,
    /// All its replicas.
    all: i64,
}

impl Placements {
    /// Watches `api` until `stop` fires, recording first placements; `small` names the
    /// small-summary clusters.
    fn follow(
        &self,
        api: Api<ResourceBinding>,
        small: Arc<std::collections::HashSet<String>>,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let seen = self.0.clone();
        tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default()).boxed();
            loop {
                let event = tokio::select! {
                    () = stop.cancelled() => return,
                    e = events.try_next() => e,
                };
                let rb = match event {
                    Ok(Some(watcher::Event::Apply(rb) | watcher::Event::InitApply(rb))) => rb,
                    Ok(Some(_)) => continue,
                    Ok(None) => return,
                    Err(e) => {
                        eprintln!("scheduling bench: binding watch error: {e}");
                        continue;
                    }
                };
                if placed(&rb)
                    && let Some(name) = rb.metadata.name
                {
                    let replicas = |only_small: bool| -> i64 {
                        rb.spec
                            .clusters
                            .iter()
                            .filter(|c| !only_small || small.contains(&c.name))
                            .map(|c| i64::from(c.replicas))
                            .sum()
                    };
                    let entry = Placed {
                        at: Instant::now(),
                        small: replicas(true),
                        all: replicas(false),
                    };
                    seen.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .entry(name)
                        .or_insert(entry);
                }
            }
        });
    }

    fn count(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    fn get(&self, name: &str) -> Option<Instant> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .map(|e| e.at)
    }

    /// The share of the replicas of bindings whose name starts with `prefix` placed on
    /// small-summary clusters (%).
    fn small_share_pct(&self, prefix: &str) -> f64 {
        let seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (small, all) = seen
            .iter()
            .filter(|(n, _)| n.starts_with(prefix))
            .fold((0, 0), |(s, a), (_, e)| (s + e.small, a + e.all));
        if all == 0 {
            0.0
        } else {
            100.0 * small as f64 / all as f64
        }
    }
}
async fn wait_placed(
    placements: &Placements,
    expected: usize,
    timeout: Duration,
    scheduler: &Kcm,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while placements.count() < expected {
        if Instant::now() > deadline {
            bail!(
                "{} of {expected} bindings placed after {timeout:?}; scheduler log:\n{}",
                placements.count(),
                scheduler.log_tail(40)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The scheduler's program: built (ours) or located (Karmada's) before any clock starts.
fn program(which: Impl) -> anyhow::Result<std::path::PathBuf> {
    match which {
        Impl::Rust => Ok(karmada_e2e::controller_manager::binary().to_path_buf()),
        Impl::Karmada => testenv::binaries::locate_karmada("karmada-scheduler")
            .map_err(|e| anyhow::anyhow!("{e} (make karmada-binaries builds it)")),
    }
}

fn start_scheduler(
    env: &testenv::TestEnv,
    which: Impl,
    program: &std::path::Path,
    qps: (f64, u32),
    estimator: bool,
) -> Kcm {
    let qps_flag = format!("--kube-api-qps={}", qps.0);
    let burst_flag = format!("--kube-api-burst={}", qps.1);
    // Both find the estimators through `karmada-system/karmada-scheduler-estimator-<cluster>` on
    // port 10352 and wait 3 s for an answer: their defaults.
    let estimator_flag = format!("--enable-scheduler-estimator={estimator}");
    let args: Vec<&str> = match which {
        Impl::Rust => vec!["--leader-elect=false", "--controllers=scheduler"],
        Impl::Karmada => vec!["--leader-elect=false"],
    };
    let args: Vec<&str> = args
        .into_iter()
        .chain([
            estimator_flag.as_str(),
            qps_flag.as_str(),
            burst_flag.as_str(),
        ])
        .collect();
    Kcm::start_program(program, env.host().kubeconfig_path(), &args, &[])
}

/// Creates the backlog's bindings; returns their names.
async fn create_backlog(
    api: &Api<ResourceBinding>,
    config: &SchedulingConfig,
    ns: &str,
    clusters: &[String],
) -> anyhow::Result<Vec<String>> {
    let names: Vec<String> = (0..config.bindings)
        .map(|i| format!("backlog-{i:05}"))
        .collect();
    stream::iter(names.iter().map(|n| binding(ns, n, clusters)))
        .map(|rb| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &rb)
                    .await
                    .map_err(anyhow::Error::from)
            }
        })
        .buffer_unordered(config.create_concurrency)
        .try_collect::<Vec<_>>()
        .await
        .context("create the backlog")?;
    Ok(names)
}

async fn run_one(
    env: &testenv::TestEnv,
    client: &kube::Client,
    config: &SchedulingConfig,
    which: Impl,
    cluster_count: usize,
    estimator: bool,
) -> anyhow::Result<SchedulingRun> {
    let ns = fresh_namespace(client, "sched-bench").await;
    let clusters = create_clusters(client, &ns, cluster_count).await?;
    let small: Arc<std::collections::HashSet<String>> = Arc::new(
        clusters
            .iter()
            .enumerate()
            .filter(|(i, _)| !large_summary(*i))
            .map(|(_, n)| n.clone())
            .collect(),
    );
    let estimators = if estimator {
        Some(Estimators::start(env, client, &clusters).await?)
    } else {
        None
    };
    let api: Api<ResourceBinding> = Api::namespaced(client.clone(), &ns);
    // The backlog, written while no scheduler runs.
    let names = create_backlog(&api, config, &ns, &clusters).await?;
    let placements = Placements::default();
    let stop = tokio_util::sync::CancellationToken::new();
    let _stop_watch = stop.clone().drop_guard();
    placements.follow(api.clone(), small, stop.clone());

    let program = program(which)?;
    let estimators = match estimators {
        // The estimators' counters and CPU count from here.
        Some(e) => Some(e.rebase()?),
        None => None,
    };
    let started = Instant::now();
    let scheduler = start_scheduler(env, which, &program, config.qps, estimator);
    let timeout = Duration::from_secs(60) + Duration::from_millis(100 * config.bindings as u64);
    wait_placed(&placements, names.len(), timeout, &scheduler).await?;
    let times: Vec<Instant> = names.iter().filter_map(|n| placements.get(n)).collect();
    let first = times.iter().min().copied().unwrap_or(started);
    let last = times.iter().max().copied().unwrap_or(started);
    let span = last.saturating_duration_since(first).as_secs_f64();

    // Live: one binding every 1/rate seconds.
    let live = (config.live_rate * config.live_seconds).round() as usize;
    let period = Duration::from_secs_f64(1.0 / config.live_rate.max(0.001));
    let mut created = HashMap::new();
    let mut tick = tokio::time::interval(period);
    for i in 0..live {
        tick.tick().await;
        let name = format!("live-{i:05}");
        let sent = Instant::now();
        api.create(&PostParams::default(), &binding(&ns, &name, &clusters))
            .await
            .with_context(|| format!("create {name}"))?;
        created.insert(name, sent);
    }
    wait_placed(
        &placements,
        names.len() + live,
        Duration::from_secs(120),
        &scheduler,
    )
    .await?;
    let latencies = created
        .iter()
        .filter_map(|(n, sent)| Some(placements.get(n)?.saturating_duration_since(*sent)))
        .collect();
    let usage = ProcessSample::read(scheduler.pid()).unwrap_or_default();
    drop(scheduler);
    let estimated = match estimators {
        Some(e) => Some(e.finish(client).await?),
        None => None,
    };

    // Leave nothing for the next run's scheduler to list.
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .context("delete the bindings")?;
    let cluster_api: Api<Cluster> = Api::all(client.clone());
    for name in &clusters {
        cluster_api.delete(name, &DeleteParams::default()).await?;
    }
    Ok(SchedulingRun {
        implementation: which.label(),
        clusters: cluster_count,
        estimator,
        bindings: names.len(),
        backlog_seconds: last.saturating_duration_since(started).as_secs_f64(),
        bindings_per_second: if span > 0.0 {
            (names.len().saturating_sub(1)) as f64 / span
        } else {
            0.0
        },
        live_bindings: live,
        live_latency: Percentiles::of(latencies),
        cpu_seconds: usage.cpu_seconds,
        peak_rss_mib: usage.peak_rss_mib,
        backlog_small_share_pct: placements.small_share_pct("backlog-"),
        live_small_share_pct: placements.small_share_pct("live-"),
        estimator_requests: estimated.map(|e| e.0),
        estimator_request_errors: estimated.map(|e| e.1),
        estimator_cpu_seconds: estimated.map(|e| e.2),
    })
}
