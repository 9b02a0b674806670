//! The staged-rollout benchmark: what rolling a new revision of many workloads out stage by stage
//! costs beyond the soak time the strategy asks for.
//!
//! One fresh environment (host + 3 API-server-only members, the real controller-manager at QPS
//! 1000, the members joined): `workloads` ConfigMap templates over `namespaces` namespaces, each
//! Duplicated to the 3 members and selected by a RolloutStrategy of three one-cluster stages
//! (stage i = member i) with `minSuccessSeconds` = the soak time. ConfigMaps because their health
//! needs no pods (Karmada's interpreter has no health rule for them: an applied ConfigMap is
//! healthy), so the members need no nodes and what is measured is the rollout machinery: the
//! template change reaching the binding, the gate admitting each stage's cluster, the Work
//! applied, its status reflected, the rollout controller's promotion.
//!
//! Once every Rollout has recorded the first revision as stable, every template is changed at
//! once; a watch on the Rollouts records when each workload's stage i is first `Succeeded` with
//! the new revision. Per stage: the time from the previous stage's completion (the template's
//! update for the first stage) to this one's, minus the soak time, per workload and for the whole
//! batch (last workload to last workload). Writes: the host API server's own
//! `apiserver_request_total` by resource and verb, scraped before the change and after the last
//! Rollout completed (the benchmark's 1,000 template updates included and shown apart), and the
//! controller-manager's own `rest_client_requests_total` to the host and to the members.
//!
//! `cargo bench -p karmada-bench --bench rollout -- --help`; results in `docs/benchmarks.md`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use karmada_apis::rollout::{PHASE_COMPLETED, Rollout, RolloutState};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::runtime::watcher;
use serde::Serialize;
use serde_json::json;

use super::process::{count_delta, host_writes_by_resource, request_counts, request_delta, writes};
use super::report::Percentiles;
use super::session::{Qps, Session};
use super::workload::{Template, create_all, templates};

/// Sizes and switches.
#[derive(Clone, Debug, Serialize)]
pub struct RolloutConfig {
    /// Workloads (ConfigMap templates), each rolled out to 3 members in 3 stages.
    pub workloads: usize,
    /// Namespaces they spread over (one policy and one strategy each).
    pub namespaces: usize,
    /// `minSuccessSeconds` of every stage (s).
    pub soak_seconds: u32,
    /// Template writes in flight while creating and changing them.
    pub concurrency: usize,
    /// Longest wait for any one convergence (s).
    pub timeout_seconds: f64,
}

impl RolloutConfig {
    /// The size `make bench-rollout` runs: 1,000 workloads over 10 namespaces, a 5 s soak.
    pub fn full() -> Self {
        Self {
            workloads: 1000,
            namespaces: 10,
            soak_seconds: 5,
            concurrency: 32,
            timeout_seconds: 900.0,
        }
    }

    /// The size the test suite runs, so the harness cannot rot.
    pub fn smoke() -> Self {
        Self {
            workloads: 12,
            namespaces: 2,
            soak_seconds: 2,
            concurrency: 8,
            timeout_seconds: 180.0,
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_seconds)
    }
}

/// The members, in stage order: stage i updates member i.
pub const STAGES: usize = 3;

/// One stage of the rollout of every workload.
#[derive(Clone, Debug, Serialize)]
pub struct StageResult {
    /// `stage-1` … `stage-3`.
    pub stage: String,
    /// Workloads seen completing this stage with the new revision.
    pub completed: usize,
    /// Per workload: from the previous stage's completion (the template's update for the first
    /// stage) to this stage's, minus the soak time.
    pub beyond_soak: Percentiles,
    /// For the whole batch: from the last workload completing the previous stage (the last
    /// template update for the first) to the last completing this one, minus the soak time (s).
    pub batch_beyond_soak_seconds: f64,
}

/// The benchmark's report.
#[derive(Clone, Debug, Serialize)]
pub struct RolloutReport {
    /// The sizes it ran.
    pub config: RolloutConfig,
    /// Time to create the 1,000 templates and see every one placed on 3 members with its first
    /// revision stable (s): the ungated first placement.
    pub first_placement_seconds: f64,
    /// Time to send every template update (s).
    pub change_seconds: f64,
    /// From the first template update to the last Rollout `Completed` with the new revision (s).
    pub total_seconds: f64,
    /// One entry per stage.
    pub stages: Vec<StageResult>,
    /// Writes the host API server served from the change to the end, by resource (its own
    /// `apiserver_request_total`, verbs POST, PUT, PATCH, DELETE), the benchmark's template
    /// updates included.
    pub host_writes_by_resource: BTreeMap<String, u64>,
    /// Their sum.
    pub host_writes: u64,
    /// Writes by the controller-manager to the host over the same span (its own
    /// `rest_client_requests_total`).
    pub kcm_host_writes: u64,
    /// Writes by the controller-manager to the members over the same span.
    pub kcm_member_writes: u64,
    /// CPU the controller-manager used from the change to the end (s).
    pub cpu_seconds: f64,
    /// Its resident memory before the change (MiB).
    pub rss_before_mib: f64,
    /// Its peak resident memory over the whole run (`VmHWM`, first placement included) (MiB).
    pub peak_rss_mib: f64,
}

impl RolloutReport {
    /// Host writes per workload: all, and without the benchmark's own template update.
    pub fn host_writes_per_workload(&self) -> (f64, f64) {
        let n = self.config.workloads.max(1) as f64;
        let all = self.host_writes as f64 / n;
        (all, all - 1.0)
    }

    /// The results as Markdown.
    pub fn markdown(&self) -> String {
        let c = &self.config;
        let mut out = format!(
            "{} workloads (ConfigMaps) × {STAGES} stages × 1 member each, soak {} s; first placement {:.1} s, \
             change sent in {:.1} s, every Rollout Completed {:.1} s after the first update.\n\n\
             | stage | completed | beyond soak per workload p50/p90/p99/max (ms) | batch beyond soak (s) |\n|---|---:|---|---:|\n",
            c.workloads,
            c.soak_seconds,
            self.first_placement_seconds,
            self.change_seconds,
            self.total_seconds,
        );
        for s in &self.stages {
            let p = &s.beyond_soak;
            out.push_str(&format!(
                "| {} | {} | {:.0}/{:.0}/{:.0}/{:.0} | {:.1} |\n",
                s.stage,
                s.completed,
                p.p50_ms,
                p.p90_ms,
                p.p99_ms,
                p.max_ms,
                s.batch_beyond_soak_seconds
            ));
        }
        let (all, own) = self.host_writes_per_workload();
        out.push_str(&format!(
            "\nHost writes per workload (host API server's apiserver_request_total): {all:.1} ({own:.1} \
             without the template update); controller-manager writes per workload: host {:.1}, \
             members {:.1}. Controller-manager CPU {:.1} s, RSS before the change {:.0} MiB, peak RSS {:.0} MiB.\n\n\
             | host resource | writes | per workload |\n|---|---:|---:|\n",
            self.kcm_host_writes as f64 / c.workloads.max(1) as f64,
            self.kcm_member_writes as f64 / c.workloads.max(1) as f64,
            self.cpu_seconds,
            self.rss_before_mib,
            self.peak_rss_mib,
        ));
        for (resource, n) in self.host_writes_by_resource.iter().filter(|(_, n)| **n > 0) {
            out.push_str(&format!(
                "| {resource} | {n} | {:.2} |\n",
                *n as f64 / c.workloads.max(1) as f64
            ));
        }
        out
    }
}

/// When each Rollout (`namespace/name`) was first seen with stage i `Succeeded` for a revision
/// other than its stable one before the change, and `Completed` with it.
#[derive(Clone, Default)]
struct Progress(Arc<Mutex<Sightings>>);

#[derive(Default)]
struct Sightings {
    /// The stable revision of each Rollout before the change.
    before: HashMap<String, String>,
    /// Per Rollout, the first time each stage was seen done with another revision.
    stages: HashMap<String, [Option<Instant>; STAGES]>,
    /// Per Rollout, when it was first seen `Completed` with another revision.
    completed: HashMap<String, Instant>,
    /// Rollouts whose first revision is stable (first placement done), by key.
    stable: HashMap<String, String>,
}

fn key(r: &Rollout) -> String {
    format!(
        "{}/{}",
        r.metadata.namespace.as_deref().unwrap_or_default(),
        r.metadata.name.as_deref().unwrap_or_default()
    )
}

impl Progress {
    fn lock(&self) -> std::sync::MutexGuard<'_, Sightings> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn record(&self, r: &Rollout) {
        let now = Instant::now();
        let key = key(r);
        let status = r.status_or_default();
        let mut seen = self.lock();
        if status.phase == PHASE_COMPLETED && !status.stable_revision.is_empty() {
            seen.stable
                .insert(key.clone(), status.stable_revision.clone());
        }
        let Some(before) = seen.before.get(&key).cloned() else {
            return;
        };
        if status.target_revision.is_empty() || status.target_revision == before {
            return;
        }
        let entry = seen.stages.entry(key.clone()).or_default();
        for (i, stage) in status.stages.iter().enumerate().take(STAGES) {
            if stage.state == RolloutState::Succeeded && entry[i].is_none() {
                entry[i] = Some(now);
            }
        }
        if status.phase == PHASE_COMPLETED && status.stable_revision == status.target_revision {
            // Completed: every stage is done, even one whose Succeeded state the watch skipped.
            for slot in entry.iter_mut() {
                slot.get_or_insert(now);
            }
            seen.completed.entry(key).or_insert(now);
        }
    }

    fn follow(&self, api: Api<Rollout>, stop: tokio_util::sync::CancellationToken) {
        let this = self.clone();
        tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default()).boxed();
            loop {
                let event = tokio::select! {
                    () = stop.cancelled() => return,
                    e = events.try_next() => e,
                };
                match event {
                    Ok(Some(watcher::Event::Apply(r) | watcher::Event::InitApply(r))) => {
                        this.record(&r);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => return,
                    Err(e) => eprintln!("rollout bench: Rollout watch error: {e}"),
                }
            }
        });
    }
}

/// The strategy of namespace `ns`: every ConfigMap, stage i = member i, soak `soak` seconds.
fn strategy(ns: &str, members: &[String], soak: u32) -> anyhow::Result<DynamicObject> {
    let stages: Vec<_> = members
        .iter()
        .enumerate()
        .map(|(i, m)| json!({"name": format!("stage-{}", i + 1), "clusterNames": [m]}))
        .collect();
    let value = json!({
        "apiVersion": karmada_apis::rollout::API_VERSION,
        "kind": "RolloutStrategy",
        "metadata": {"name": "bench", "namespace": ns},
        "spec": {
            "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
            "stages": stages,
            "minSuccessSeconds": soak,
            "progressDeadlineSeconds": 600,
        },
    });
    serde_json::from_value(value).context("build a RolloutStrategy")
}

fn strategy_ar() -> ApiResource {
    ApiResource::erase::<karmada_apis::rollout::RolloutStrategy>(&())
}

async fn wait_until(
    what: &str,
    timeout: Duration,
    session: &Session,
    mut done: impl FnMut() -> (usize, usize),
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let (have, want) = done();
        if have >= want {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{what}: {have} of {want} after {timeout:?}; controller-manager log:\n{}",
                session.log_tail(40)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs the benchmark on a fresh environment.
#[allow(
    clippy::too_many_lines,
    reason = "the benchmark's steps in the order they run, sharing the objects they create"
)]
pub async fn run(config: &RolloutConfig, progress: impl Fn(&str)) -> anyhow::Result<RolloutReport> {
    progress("starting host, 3 members and the controller-manager");
    let session = Session::start(STAGES, config.namespaces, Some(Qps::Raised)).await?;
    let client = session.host.clone();
    for ns in &session.namespaces {
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &strategy_ar())
            .create(
                &PostParams::default(),
                &strategy(ns, &session.member_names, config.soak_seconds)?,
            )
            .await
            .with_context(|| format!("create RolloutStrategy {ns}/bench"))?;
    }
    let rollouts: Api<Rollout> = Api::all(client.clone());
    let sightings = Progress::default();
    let stop = tokio_util::sync::CancellationToken::new();
    let stop_watch = stop.clone().drop_guard();
    sightings.follow(rollouts, stop.clone());

    progress("first placement (not gated)");
    let all = templates("ro", 0, config.workloads, &session.namespaces);
    let started = Instant::now();
    create_all(&client, &all, config.concurrency).await?;
    wait_until(
        "Rollouts with their first revision stable",
        config.timeout(),
        &session,
        || (sightings.lock().stable.len(), all.len()),
    )
    .await?;
    // Every member has every ConfigMap (the first placement reached them all).
    for (member, member_client) in &session.members {
        for ns in &session.namespaces {
            let deadline = Instant::now() + config.timeout();
            loop {
                let have = Api::<ConfigMap>::namespaced(member_client.clone(), ns)
                    .list(&kube::api::ListParams::default().labels(super::workload::TEMPLATE_LABEL))
                    .await?
                    .items
                    .len();
                let want = all.iter().filter(|t| &t.namespace == ns).count();
                if have >= want {
                    break;
                }
                if Instant::now() > deadline {
                    bail!("{member}: {have} of {want} ConfigMaps in {ns}");
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    let first_placement_seconds = started.elapsed().as_secs_f64();
    {
        let mut seen = sightings.lock();
        seen.before = seen.stable.clone();
    }

    let host_before = session.host_apiserver_metrics().await?;
    let kcm_before = request_counts(&session.metrics()?);
    let usage_before = session.sample()?;

    progress("changing every template at once");
    let change_start = Instant::now();
    let updated = change_all(&client, &all, config.concurrency).await?;
    let change_seconds = change_start.elapsed().as_secs_f64();
    wait_until(
        "Rollouts Completed with the new revision",
        config.timeout(),
        &session,
        || (sightings.lock().completed.len(), all.len()),
    )
    .await?;
    let total_seconds = change_start.elapsed().as_secs_f64();
    let usage_after = session.sample()?;
    let kcm_after = request_counts(&session.metrics()?);
    let host_after = session.host_apiserver_metrics().await?;
    drop(stop_watch);

    let soak = Duration::from_secs(u64::from(config.soak_seconds));
    let seen = sightings.lock();
    let mut stages = Vec::new();
    let mut batch_prev = updated.values().copied().max().unwrap_or(change_start);
    for i in 0..STAGES {
        let mut beyond = Vec::new();
        let mut last = None::<Instant>;
        for (key, done) in &seen.stages {
            let Some(at) = done[i] else { continue };
            let prev = if i == 0 {
                updated.get(key).copied()
            } else {
                done[i - 1]
            };
            if let Some(prev) = prev {
                beyond.push(at.saturating_duration_since(prev).saturating_sub(soak));
            }
            last = Some(last.map_or(at, |l: Instant| l.max(at)));
        }
        let last = last.unwrap_or(batch_prev);
        stages.push(StageResult {
            stage: format!("stage-{}", i + 1),
            completed: beyond.len(),
            beyond_soak: Percentiles::of(beyond),
            batch_beyond_soak_seconds: last.saturating_duration_since(batch_prev).as_secs_f64()
                - soak.as_secs_f64(),
        });
        batch_prev = last;
    }
    drop(seen);

    let by_resource = count_delta(
        &host_writes_by_resource(&host_before),
        &host_writes_by_resource(&host_after),
    );
    let kcm = request_delta(&kcm_before, &kcm_after);
    Ok(RolloutReport {
        config: config.clone(),
        first_placement_seconds,
        change_seconds,
        total_seconds,
        stages,
        host_writes: by_resource.values().sum(),
        host_writes_by_resource: by_resource,
        kcm_host_writes: writes(&kcm, "host"),
        kcm_member_writes: writes(&kcm, "members"),
        cpu_seconds: usage_after.cpu_seconds - usage_before.cpu_seconds,
        rss_before_mib: usage_before.rss_mib,
        // The kernel records VmHWM only at some points (unmaps, exit), not when the allocator hands
        // pages back with madvise, so it can read below a VmRSS sampled earlier: the peak is at
        // least what the start measured.
        peak_rss_mib: usage_after.peak_rss_mib.max(usage_before.rss_mib),
    })
}

/// Changes every template's content (a new revision), `concurrency` at a time; returns when each
/// update was answered, by Rollout key (`namespace/<binding name>`).
async fn change_all(
    client: &kube::Client,
    all: &[Template],
    concurrency: usize,
) -> anyhow::Result<HashMap<String, Instant>> {
    futures::stream::iter(all.iter().cloned())
        .map(|t| async move {
            Api::<ConfigMap>::namespaced(client.clone(), &t.namespace)
                .patch(
                    &t.name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"revision": "2"}})),
                )
                .await
                .with_context(|| format!("update ConfigMap {}/{}", t.namespace, t.name))?;
            Ok::<_, anyhow::Error>((
                format!("{}/{}", t.namespace, t.binding_name()),
                Instant::now(),
            ))
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect()
        .await
}
