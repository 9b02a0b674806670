//! The scenarios that run against the real controller-manager: burst, restart and steady rate.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde::Serialize;

use super::observer::{ObjectKey, Sightings};
use super::process::{
    RequestCounts, count_delta, host_reads_by_resource, host_writes_by_resource, request_counts,
    request_delta, total, writes,
};
use super::report::{Changes, Percentiles, change_counts};
use super::session::{MemberLoad, ServerCpu, Session};
use super::workload::{Created, Kind, Template, create, create_all, create_at_rate, templates};

/// What a burst cost and how long it took.
#[derive(Clone, Debug, Serialize)]
pub struct BurstResult {
    /// Templates created.
    pub templates: usize,
    /// Member clusters each one went to.
    pub members: usize,
    /// Seconds to create every template (the benchmark's own requests, up to `concurrency` in flight).
    pub create_seconds: f64,
    /// Seconds from the first create until every member object existed.
    pub member_objects_seconds: f64,
    /// Seconds from the first create until every binding was FullyApplied.
    pub fully_applied_seconds: f64,
    /// The larger of the two: convergence.
    pub converged_seconds: f64,
    /// Seconds from the first create until every work queue was empty (status writes done).
    pub settled_seconds: f64,
    /// Per template and member: from its create request to its arrival in the member.
    pub arrival: Percentiles,
    /// The controller-manager's API requests from the first create until settled, by target and method.
    pub requests: RequestCounts,
    /// Of those, writes (POST/PUT/PATCH/DELETE) to the host.
    pub host_writes: u64,
    /// Of those, writes to the members.
    pub member_writes: u64,
    /// Writes the host API server served meanwhile, by resource (`events`, `works/status`, …),
    /// from its own metrics.
    pub host_writes_by_resource: BTreeMap<String, u64>,
    /// Reads (GET, LIST) the host API server served meanwhile, by resource.
    pub host_reads_by_resource: BTreeMap<String, u64>,
    /// Events recorded meanwhile, by reason (repeats included).
    pub events_by_reason: BTreeMap<String, u64>,
    /// CPU seconds the controller-manager used until settled.
    pub cpu_seconds: f64,
    /// CPU seconds the API servers and etcd used until settled.
    pub server_cpu: ServerCpu,
    /// Its peak RSS since it started (MiB).
    pub peak_rss_mib: f64,
    /// Its RSS when settled (MiB).
    pub rss_mib: f64,
    /// In Pull mode, what the agents used.
    pub agents: Option<AgentsUsage>,
    /// What the controllers held open on each member's API server when settled, by member.
    pub member_load: BTreeMap<String, MemberLoad>,
}

/// What the `karmada-agent`s of a Pull-mode session used during a burst, all together.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct AgentsUsage {
    /// How many agents (one per member).
    pub count: usize,
    /// CPU seconds from the first create until settled.
    pub cpu_seconds: f64,
    /// Their peak RSS since they started, summed (MiB).
    pub peak_rss_mib: f64,
    /// Their RSS when settled, summed (MiB).
    pub rss_mib: f64,
}

/// Creates `deployments` + `configmaps` templates at once and waits until they are everywhere.
pub async fn burst(
    s: &Session,
    prefix: &str,
    deployments: usize,
    configmaps: usize,
    concurrency: usize,
    timeout: Duration,
) -> anyhow::Result<BurstResult> {
    let templates = templates(prefix, deployments, configmaps, &s.namespaces);
    let before = request_counts(&s.metrics()?);
    let host_before = s.host_apiserver_metrics().await?;
    let by_resource_before = host_writes_by_resource(&host_before);
    let reads_before = host_reads_by_resource(&host_before);
    let reasons_before = s.events_by_reason().await?;
    let cpu_before = s.sample()?.cpu_seconds;
    let agents_before = s.agents_sample()?;
    let servers_before = s.server_cpu();
    let t0 = Instant::now();
    let created = create_all(&s.host, &templates, concurrency).await?;
    let create_seconds = t0.elapsed().as_secs_f64();
    let conv = wait_arrivals(s, &created, t0, timeout, true).await?;
    let settled = wait_settled(s, timeout).await?;
    let settled_seconds = settled.duration_since(t0).as_secs_f64();
    let member_load = s.member_load().await?;
    let requests = request_delta(&before, &request_counts(&s.metrics()?));
    let host_after = s.host_apiserver_metrics().await?;
    let by_resource = count_delta(&by_resource_before, &host_writes_by_resource(&host_after));
    let reads_by_resource = count_delta(&reads_before, &host_reads_by_resource(&host_after));
    let events_by_reason = count_delta(&reasons_before, &s.events_by_reason().await?);
    let after = s.sample()?;
    let agents = match (agents_before, s.agents_sample()?) {
        (Some(before), Some(now)) => Some(AgentsUsage {
            count: s.agents.len(),
            cpu_seconds: now.cpu_seconds - before.cpu_seconds,
            peak_rss_mib: now.peak_rss_mib,
            rss_mib: now.rss_mib,
        }),
        _ => None,
    };
    Ok(BurstResult {
        templates: templates.len(),
        members: s.members.len(),
        create_seconds,
        member_objects_seconds: conv.member_objects.as_secs_f64(),
        fully_applied_seconds: conv.fully_applied.as_secs_f64(),
        converged_seconds: conv.member_objects.max(conv.fully_applied).as_secs_f64(),
        settled_seconds,
        arrival: conv.arrival,
        host_writes: writes(&requests, "host"),
        member_writes: writes(&requests, "members"),
        host_writes_by_resource: by_resource,
        host_reads_by_resource: reads_by_resource,
        events_by_reason,
        requests,
        cpu_seconds: after.cpu_seconds - cpu_before,
        server_cpu: s.server_cpu().since(&servers_before),
        peak_rss_mib: after.peak_rss_mib,
        rss_mib: after.rss_mib,
        agents,
        member_load,
    })
}

/// How long convergence took, measured from `t0`.
pub struct Convergence {
    /// Until every member object existed.
    pub member_objects: Duration,
    /// Until every binding was FullyApplied (zero when not asked for).
    pub fully_applied: Duration,
    /// Per template and member, from its create to its arrival.
    pub arrival: Percentiles,
}

fn member_key(member: &str, t: &Template) -> ObjectKey {
    ObjectKey {
        cluster: member.to_string(),
        kind: t.kind.name(),
        namespace: t.namespace.clone(),
        name: t.name.clone(),
    }
}

fn binding_key(t: &Template) -> ObjectKey {
    ObjectKey {
        cluster: "host".to_string(),
        kind: "ResourceBinding",
        namespace: t.namespace.clone(),
        name: t.binding_name(),
    }
}

/// Arrival latencies of `created` in every member, and the last arrival; `None` while one is missing.
fn arrivals(
    seen: &Sightings,
    members: &[String],
    created: &[Created],
) -> Result<(Vec<Duration>, Instant), usize> {
    let mut latencies = Vec::with_capacity(created.len() * members.len());
    let mut missing = 0;
    let mut last = None::<Instant>;
    for (t, at) in created {
        for m in members {
            match seen.get(&member_key(m, t)) {
                Some(s) => {
                    latencies.push(s.first.saturating_duration_since(*at));
                    last = Some(last.map_or(s.first, |l| l.max(s.first)));
                }
                None => missing += 1,
            }
        }
    }
    match last {
        Some(last) if missing == 0 => Ok((latencies, last)),
        _ => Err(missing.max(1)),
    }
}

/// Waits until every created template is in every member and, when `bindings`, every binding is
/// FullyApplied. Times count from `t0`.
pub async fn wait_arrivals(
    s: &Session,
    created: &[Created],
    t0: Instant,
    timeout: Duration,
    bindings: bool,
) -> anyhow::Result<Convergence> {
    let deadline = t0 + timeout;
    loop {
        {
            let seen = s.observer.seen();
            let objects = arrivals(&seen, &s.member_names, created);
            let mut unapplied = 0;
            let mut last_applied = t0;
            if bindings {
                for (t, _) in created {
                    match seen.get(&binding_key(t)).and_then(|b| b.fully_applied) {
                        Some(at) => last_applied = last_applied.max(at),
                        None => unapplied += 1,
                    }
                }
            }
            match objects {
                Ok((latencies, last)) if unapplied == 0 => {
                    return Ok(Convergence {
                        member_objects: last.saturating_duration_since(t0),
                        fully_applied: last_applied.saturating_duration_since(t0),
                        arrival: Percentiles::of(latencies),
                    });
                }
                Ok(_) if Instant::now() > deadline => {
                    bail!(
                        "timed out after {timeout:?}: {unapplied} bindings not FullyApplied\nlog tail:\n{}",
                        s.log_tail(40)
                    )
                }
                Err(missing) if Instant::now() > deadline => {
                    bail!(
                        "timed out after {timeout:?}: {missing} member objects missing, {unapplied} bindings not \
                         FullyApplied\nlog tail:\n{}",
                        s.log_tail(40)
                    )
                }
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the controller-manager's work queues are empty on two scrapes 500 ms apart.
pub async fn wait_settled(s: &Session, timeout: Duration) -> anyhow::Result<Instant> {
    let deadline = Instant::now() + timeout;
    let mut empty_since = None;
    loop {
        let depth = total(&s.metrics()?, "workqueue_depth");
        let now = Instant::now();
        if depth == 0.0 {
            let since = *empty_since.get_or_insert(now);
            if now.duration_since(since) >= Duration::from_millis(500) {
                return Ok(since);
            }
        } else {
            empty_since = None;
        }
        if now > deadline {
            bail!("work queues still hold {depth} items after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a restart over propagated templates cost.
#[derive(Clone, Debug, Serialize)]
pub struct RestartResult {
    /// Templates propagated before the restart.
    pub templates: usize,
    /// Seconds from SIGTERM to exit of the old process.
    pub stop_seconds: f64,
    /// Seconds from spawning the new process to `/readyz` 200.
    pub ready_seconds: f64,
    /// Seconds from spawning to empty work queues (the resync done).
    pub settled_seconds: f64,
    /// A template created one second after the spawn: its latency to each member (ms).
    pub fresh_latency: Percentiles,
    /// Changes the observer saw on pre-existing objects from the restart until settled (the fresh
    /// template's own objects excluded), by target and kind.
    pub changes: BTreeMap<String, Changes>,
    /// The new process's API requests until settled (the fresh template's included), by target and
    /// method.
    pub requests: RequestCounts,
    /// CPU seconds the new process used until settled.
    pub cpu_seconds: f64,
    /// Its peak RSS (MiB).
    pub peak_rss_mib: f64,
}

/// Restarts the controller-manager over what is propagated and measures the resync.
pub async fn restart(s: &mut Session, timeout: Duration) -> anyhow::Result<RestartResult> {
    let templates = s
        .observer
        .seen()
        .keys()
        .filter(|k| k.cluster == "host" && (k.kind == "Deployment" || k.kind == "ConfigMap"))
        .count();
    let before = s.observer.snapshot();
    let stop = Instant::now();
    let spawned = s.restart_kcm().await?;
    let stop_seconds = spawned.duration_since(stop).as_secs_f64();
    let fresh = Template {
        kind: Kind::Deployment,
        namespace: s.namespaces[0].clone(),
        name: "fresh-after-restart".to_string(),
    };
    let host = s.host.clone();
    let fresh_create = {
        let fresh = fresh.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until((spawned + Duration::from_secs(1)).into()).await;
            let at = Instant::now();
            create(&host, &fresh).await.map(|()| (fresh, at))
        })
    };
    s.wait_ready(timeout).await?;
    let ready_seconds = spawned.elapsed().as_secs_f64();
    let created = fresh_create.await??;
    let fresh_conv =
        wait_arrivals(s, std::slice::from_ref(&created), created.1, timeout, false).await?;
    let settled = wait_settled(s, timeout).await?;
    // Changes surface through the watches a moment after they are made.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let changes = change_counts(&before, &s.observer.seen(), |k| {
        !k.name.starts_with("fresh-")
    });
    let metrics = s.metrics()?;
    let sample = s.sample()?;
    Ok(RestartResult {
        templates,
        stop_seconds,
        ready_seconds,
        settled_seconds: settled.duration_since(spawned).as_secs_f64(),
        fresh_latency: fresh_conv.arrival,
        changes,
        requests: request_counts(&metrics),
        cpu_seconds: sample.cpu_seconds,
        peak_rss_mib: sample.peak_rss_mib,
    })
}

/// Propagation latency at a fixed template creation rate.
#[derive(Clone, Debug, Serialize)]
pub struct SteadyResult {
    /// Templates per second asked for.
    pub rate: f64,
    /// Templates created.
    pub templates: usize,
    /// Templates per second achieved by the creator.
    pub achieved_rate: f64,
    /// Per template and member: from its create request to its arrival in the member.
    pub latency: Percentiles,
    /// CPU seconds the controller-manager used during the run.
    pub cpu_seconds: f64,
}

/// Creates templates at `rate` per second for `duration` and measures each one's propagation latency.
pub async fn steady(
    s: &Session,
    prefix: &str,
    rate: f64,
    duration: Duration,
    timeout: Duration,
) -> anyhow::Result<SteadyResult> {
    let count = (rate * duration.as_secs_f64()).round().max(1.0) as usize;
    let templates = templates(prefix, count.div_ceil(2), count / 2, &s.namespaces);
    let cpu_before = s.sample()?.cpu_seconds;
    let t0 = Instant::now();
    let created = create_at_rate(&s.host, &templates, rate).await?;
    let achieved_rate = count as f64 / t0.elapsed().as_secs_f64();
    let conv = wait_arrivals(s, &created, t0, timeout, false).await?;
    Ok(SteadyResult {
        rate,
        templates: count,
        achieved_rate,
        latency: conv.arrival,
        cpu_seconds: s.sample()?.cpu_seconds - cpu_before,
    })
}
