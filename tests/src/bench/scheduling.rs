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
//! `cargo bench -p karmada-e2e --bench scheduling -- --help`; results in `docs/benchmarks.md`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt, stream};
use karmada_apis::{Cluster, ResourceBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde::Serialize;
use serde_json::json;

use super::process::ProcessSample;
use super::report::Percentiles;
use super::session::Impl;
use crate::controller_manager::{Kcm, fresh_namespace};
use crate::in_process::resource_binding;

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
}

/// The benchmark's report.
#[derive(Clone, Debug, Serialize)]
pub struct SchedulingReport {
    /// The sizes it ran.
    pub config: SchedulingConfig,
    /// One entry per implementation and cluster count.
    pub runs: Vec<SchedulingRun>,
}

impl SchedulingReport {
    /// The results as a Markdown table.
    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "| scheduler | clusters | backlog | backlog placed (s) | bindings/s | live p50/p90/p99/max (ms) | CPU (s) | peak RSS (MiB) |\n|---|---:|---:|---:|---:|---|---:|---:|\n",
        );
        for r in &self.runs {
            let l = &r.live_latency;
            out.push_str(&format!(
                "| {} | {} | {} | {:.1} | {:.1} | {:.0}/{:.0}/{:.0}/{:.0} ({} live) | {:.1} | {:.0} |\n",
                r.implementation,
                r.clusters,
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
            ));
        }
        out
    }
}

/// Runs the benchmark for `impls` on a fresh host.
pub async fn run(config: &SchedulingConfig, impls: &[Impl]) -> anyhow::Result<SchedulingReport> {
    let env = testenv::TestEnv::start(testenv::EnvOptions {
        host_controller_manager: false,
        install_crds: true,
        ..testenv::EnvOptions::default()
    })
    .await
    .context("start the host API server")?;
    let client = env.host().client().await;
    let mut runs = Vec::new();
    for &clusters in &config.clusters {
        for &which in impls {
            let run = run_one(&env, &client, config, which, clusters)
                .await
                .with_context(|| format!("{} with {clusters} clusters", which.label()))?;
            eprintln!("scheduling bench: {run:?}");
            runs.push(run);
        }
    }
    Ok(SchedulingReport {
        config: config.clone(),
        runs,
    })
}

/// Creates `count` Ready Clusters that can take plenty of replicas; returns their names.
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
        let status = json!({"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "ClusterReady",
                "message": "cluster is healthy and ready to accept workloads",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "apiEnablements": [{"groupVersion": "apps/v1",
                "resources": [{"name": "deployments", "kind": "Deployment"}]}],
            "resourceSummary": {
                "allocatable": {"cpu": "10000", "memory": "40000Gi", "pods": "100000"},
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

/// When each binding of a namespace was first seen placed, by a watch.
#[derive(Clone, Default)]
struct Placements(Arc<Mutex<HashMap<String, Instant>>>);

impl Placements {
    /// Watches `api` until `stop` fires, recording first placements.
    fn follow(&self, api: Api<ResourceBinding>, stop: tokio_util::sync::CancellationToken) {
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
                    seen.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .entry(name)
                        .or_insert_with(Instant::now);
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
            .copied()
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
        Impl::Rust => Ok(crate::controller_manager::binary().to_path_buf()),
        Impl::Karmada => testenv::binaries::locate_karmada("karmada-scheduler")
            .map_err(|e| anyhow::anyhow!("{e} (make karmada-binaries builds it)")),
    }
}

fn start_scheduler(
    env: &testenv::TestEnv,
    which: Impl,
    program: &std::path::Path,
    qps: (f64, u32),
) -> Kcm {
    let qps_flag = format!("--kube-api-qps={}", qps.0);
    let burst_flag = format!("--kube-api-burst={}", qps.1);
    let args: Vec<&str> = match which {
        Impl::Rust => vec!["--leader-elect=false", "--controllers=scheduler"],
        Impl::Karmada => vec!["--leader-elect=false", "--enable-scheduler-estimator=false"],
    };
    let args: Vec<&str> = args
        .into_iter()
        .chain([qps_flag.as_str(), burst_flag.as_str()])
        .collect();
    Kcm::start_program(program, env.host().kubeconfig_path(), &args, &[])
}

async fn run_one(
    env: &testenv::TestEnv,
    client: &kube::Client,
    config: &SchedulingConfig,
    which: Impl,
    cluster_count: usize,
) -> anyhow::Result<SchedulingRun> {
    let ns = fresh_namespace(client, "sched-bench").await;
    let clusters = create_clusters(client, &ns, cluster_count).await?;
    let api: Api<ResourceBinding> = Api::namespaced(client.clone(), &ns);
    // The backlog, written while no scheduler runs.
    let names: Vec<String> = (0..config.bindings)
        .map(|i| format!("backlog-{i:05}"))
        .collect();
    stream::iter(names.iter().map(|n| binding(&ns, n, &clusters)))
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
    let placements = Placements::default();
    let stop = tokio_util::sync::CancellationToken::new();
    let _stop_watch = stop.clone().drop_guard();
    placements.follow(api.clone(), stop.clone());

    let program = program(which)?;
    let started = Instant::now();
    let scheduler = start_scheduler(env, which, &program, config.qps);
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
    })
}
