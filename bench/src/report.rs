//! Results: latency percentiles, change counts, the whole report as JSON and as Markdown tables.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::time::Duration;

use serde::Serialize;

use super::coldstart::{ColdRestartResult, ColdStartResult};
use super::floor::FloorResult;
use super::observer::{ObjectKey, Sightings};
use super::process::RequestCounts;
use super::scenarios::{BurstResult, RestartResult, SteadyResult};
use super::session::{Impl, MemberLoad, Qps};

/// Nearest-rank percentiles of a set of durations, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Percentiles {
    /// Number of samples.
    pub count: usize,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

impl Percentiles {
    /// The percentiles of `samples` (all zero when empty).
    pub fn of(mut samples: Vec<Duration>) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_unstable();
        let rank = |p: f64| {
            let i = ((p / 100.0) * samples.len() as f64).ceil() as usize;
            samples[i.clamp(1, samples.len()) - 1].as_secs_f64() * 1000.0
        };
        Percentiles {
            count: samples.len(),
            p50_ms: rank(50.0),
            p90_ms: rank(90.0),
            p99_ms: rank(99.0),
            max_ms: rank(100.0),
        }
    }
}

/// Objects created, modified and deleted in a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    /// Objects that appeared.
    pub created: u32,
    /// resourceVersion changes of objects that existed before.
    pub modified: u32,
    /// Objects that went away.
    pub deleted: u32,
}

impl Changes {
    /// Everything together.
    pub fn total(&self) -> u32 {
        self.created + self.modified + self.deleted
    }
}

/// What changed between `before` (an [`Observer::snapshot`](super::observer::Observer::snapshot)) and
/// `after`, for the objects `include` accepts, by `<host|members>/<kind>`.
pub fn change_counts(
    before: &HashMap<ObjectKey, (u32, bool)>,
    after: &Sightings,
    include: impl Fn(&ObjectKey) -> bool,
) -> BTreeMap<String, Changes> {
    let mut out = BTreeMap::<String, Changes>::new();
    for (key, seen) in after.iter().filter(|(k, _)| include(k)) {
        let target = if key.cluster == "host" {
            "host"
        } else {
            "members"
        };
        let c = out.entry(format!("{target}/{}", key.kind)).or_default();
        match before.get(key) {
            None => {
                c.created += 1;
                c.modified += seen.changes;
            }
            Some(&(changes, deleted)) => {
                c.modified += seen.changes.saturating_sub(changes);
                if seen.deleted && !deleted {
                    c.deleted += 1;
                }
            }
        }
    }
    out
}

/// The machine the numbers come from.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPUs online.
    pub cpus: usize,
    /// CPU model from /proc/cpuinfo.
    pub cpu_model: String,
    /// Total memory (GiB).
    pub memory_gib: f64,
    /// The commit measured (`git rev-parse --short HEAD`), when known.
    pub commit: String,
    /// Whether the controller-manager was an optimised build: one the harness built has the
    /// harness's profile; one `KARMADA_CONTROLLER_MANAGER_BIN` names counts as optimised when it
    /// lies in a `release` folder (cargo's).
    pub release_build: bool,
}

impl Machine {
    /// Reads this machine.
    pub fn read() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        let commit = std::process::Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        Machine {
            cpus: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            cpu_model: cpuinfo
                .lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
                .unwrap_or_default(),
            memory_gib: mem_kib / 1024.0 / 1024.0,
            commit,
            release_build: std::env::var_os("KARMADA_CONTROLLER_MANAGER_BIN").map_or(
                !cfg!(debug_assertions),
                |bin| {
                    std::path::Path::new(&bin)
                        .components()
                        .any(|c| c.as_os_str() == "release")
                },
            ),
        }
    }
}

/// One controller-manager configuration measured on one fresh environment.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// What it is, e.g. `QPS 1000, 3 members` (prefixed with the implementation when several ran).
    pub label: String,
    /// Whose controllers ran.
    pub implementation: super::session::Impl,
    /// With which client rate limits.
    pub qps: super::session::Qps,
    /// Member clusters.
    pub members: usize,
    /// Whether Deployments went through a Lua ResourceInterpreterCustomization.
    pub customization: bool,
    /// Whether the members were in Pull mode, each served by a `karmada-agent`.
    pub pull: bool,
    /// Whether Clusters were served by Karmada's aggregated API server.
    pub aggregated: bool,
    /// Deployment bindings whose member objects were all reported `Healthy` after the burst: none
    /// natively (the API-server-only members never roll a Deployment out), all of them when the
    /// customization's health script ran.
    pub healthy_deployment_bindings: usize,
    /// The burst.
    pub burst: Option<BurstResult>,
    /// Our controller-manager's heap profile right after the burst, when asked for
    /// ([`super::BenchConfig::heap_profiles`]).
    pub heap_profile: Option<std::path::PathBuf>,
    /// The restart after the burst.
    pub restart: Option<RestartResult>,
    /// The steady rate after that.
    pub steady: Option<SteadyResult>,
    /// The failover run's result (that run has no burst).
    pub failover: Option<super::failover::FailoverResult>,
}

/// One cold start ([`super::coldstart`]) on its own fresh environment.
#[derive(Clone, Debug, Serialize)]
pub struct ColdStartRun {
    /// What it is (prefixed with the implementation when several ran).
    pub label: String,
    /// Whose controllers ran.
    pub implementation: Impl,
    /// With which client rate limits.
    pub qps: Qps,
    /// The start over everything created while the controllers were stopped.
    pub cold: ColdStartResult,
    /// The restart after it, when asked for.
    pub restart: Option<ColdRestartResult>,
}

/// Everything one `make bench` measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Where.
    pub machine: Machine,
    /// With what sizes.
    pub config: super::BenchConfig,
    /// The controller-manager runs.
    pub runs: Vec<Run>,
    /// The cold starts, one per implementation (none unless asked for).
    pub cold_starts: Vec<ColdStartRun>,
    /// The minimal-writes floor.
    pub floor: Option<FloorResult>,
    /// Total wall time of the benchmark (s).
    pub wall_seconds: f64,
}

/// For each (ours, peer) pair of runs in which `f` finds a result on both sides: (ours, its result,
/// the peer's).
fn paired<'a, T>(
    pairs: &[(&'a Run, &'a Run)],
    f: impl Fn(&'a Run) -> Option<&'a T>,
) -> Vec<(&'a Run, &'a T, &'a T)> {
    pairs
        .iter()
        .filter_map(|&(ours, peer)| Some((ours, f(ours)?, f(peer)?)))
        .collect()
}

fn requests_cell(r: &RequestCounts, target: &str) -> String {
    r.get(target).map_or_else(
        || "none".into(),
        |m| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        },
    )
}

/// Writes per template the host API server served during each burst, by resource (the columns are
/// every resource any run wrote): where the host's work goes, for either implementation.
fn writes_by_resource_table(o: &mut String, bursts: &[(&Run, &BurstResult)]) {
    per_template_table(
        o,
        bursts,
        "Host API server writes per template, by resource (everyone's: the benchmark's template create is the 1 under its kind)",
        |b| &b.host_writes_by_resource,
    );
    per_template_table(
        o,
        bursts,
        "Host API server reads (GET, LIST) per template, by resource",
        |b| &b.host_reads_by_resource,
    );
    per_template_table(
        o,
        bursts,
        "Events per template, by reason (repeats counted)",
        |b| &b.events_by_reason,
    );
}

/// One row per burst, one column per key any burst counted, each cell the count per template.
fn per_template_table(
    o: &mut String,
    bursts: &[(&Run, &BurstResult)],
    title: &str,
    counts: impl Fn(&BurstResult) -> &BTreeMap<String, u64>,
) {
    let keys: std::collections::BTreeSet<&String> = bursts
        .iter()
        .flat_map(|(_, b)| counts(b).iter())
        .filter(|(_, n)| **n > 0)
        .map(|(k, _)| k)
        .collect();
    if keys.is_empty() {
        return;
    }
    let _ = writeln!(o, "\n{title}:\n");
    let header: Vec<&str> = keys.iter().map(|r| r.as_str()).collect();
    let _ = writeln!(o, "| run | {} | total |", header.join(" | "));
    let _ = writeln!(o, "|---|{}---|", "---|".repeat(header.len()));
    for (r, b) in bursts {
        let per = |n: u64| n as f64 / b.templates.max(1) as f64;
        let cells: Vec<String> = keys
            .iter()
            .map(|k| format!("{:.1}", per(counts(b).get(*k).copied().unwrap_or(0))))
            .collect();
        let total: u64 = counts(b).values().sum();
        let _ = writeln!(
            o,
            "| {} | {} | {:.1} |",
            r.label,
            cells.join(" | "),
            per(total)
        );
    }
}

fn servers(c: &super::session::ServerCpu) -> String {
    let servers = format!(
        "{:.1} / {:.1} / {:.1}",
        c.host_apiserver, c.member_apiservers, c.etcd
    );
    if c.aggregated_apiserver > 0.0 {
        format!("{servers} (+ {:.1} aggregated)", c.aggregated_apiserver)
    } else {
        servers
    }
}

fn ms(p: &Percentiles) -> String {
    format!(
        "{:.0} / {:.0} / {:.0} / {:.0}",
        p.p50_ms, p.p90_ms, p.p99_ms, p.max_ms
    )
}

impl Report {
    /// The report as Markdown tables, one per scenario.
    #[allow(
        clippy::too_many_lines,
        reason = "the whole report's tables, one section per scenario, formatted in place"
    )]
    pub fn markdown(&self) -> String {
        let mut o = String::new();
        let m = &self.machine;
        let _ = writeln!(
            o,
            "Machine: {} CPUs ({}), {:.0} GiB; commit {}; controller-manager {} build; wall time {:.0} s.\n",
            m.cpus,
            m.cpu_model,
            m.memory_gib,
            m.commit,
            if m.release_build { "release" } else { "debug" },
            self.wall_seconds
        );
        let bursts: Vec<_> = self
            .runs
            .iter()
            .filter_map(|r| r.burst.as_ref().map(|b| (r, b)))
            .collect();
        if !bursts.is_empty() {
            let _ = writeln!(o, "#### Burst\n");
            let _ = writeln!(
                o,
                "| run | templates × members | create (s) | member objects (s) | FullyApplied (s) | settled (s) | arrival p50/p90/p99/max (ms) | CPU (s) | servers' CPU: host / members / etcd (s) | peak RSS (MiB) | host writes | member writes |"
            );
            let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|---|---|---|");
            for (r, b) in &bursts {
                let _ = writeln!(
                    o,
                    "| {} | {} × {} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.1} | {} | {:.0} | {} | {} |",
                    r.label,
                    b.templates,
                    b.members,
                    b.create_seconds,
                    b.member_objects_seconds,
                    b.fully_applied_seconds,
                    b.settled_seconds,
                    ms(&b.arrival),
                    b.cpu_seconds,
                    servers(&b.server_cpu),
                    b.peak_rss_mib,
                    b.host_writes,
                    b.member_writes
                );
            }
            let _ = writeln!(
                o,
                "\nRequests by target and method (first create until settled):\n"
            );
            let _ = writeln!(o, "| run | host | members |\n|---|---|---|");
            for (r, b) in &bursts {
                let _ = writeln!(
                    o,
                    "| {} | {} | {} |",
                    r.label,
                    requests_cell(&b.requests, "host"),
                    requests_cell(&b.requests, "members"),
                );
            }
            let _ = writeln!(
                o,
                "\nWhat the controllers held open on each member's API server when settled (the \
                 benchmark's own watches left out), lowest–highest over the members:\n"
            );
            let _ = writeln!(
                o,
                "| run | watches per member | TCP connections per member |\n|---|---|---|"
            );
            for (r, b) in &bursts {
                let range = |f: fn(&MemberLoad) -> u64| {
                    let values = b.member_load.values().map(f);
                    match (values.clone().min(), values.max()) {
                        (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
                        (Some(lo), Some(hi)) => format!("{lo}–{hi}"),
                        _ => "–".to_owned(),
                    }
                };
                let _ = writeln!(
                    o,
                    "| {} | {} | {} |",
                    r.label,
                    range(|l| l.watches),
                    range(|l| l.connections as u64)
                );
            }
            writes_by_resource_table(&mut o, &bursts);
            let _ = writeln!(
                o,
                "\nDeployment bindings whose members all report Healthy after the burst (the Lua \
                 customization's health rule counts a Deployment no controller rolled out as healthy, \
                 the native one does not):\n"
            );
            let _ = writeln!(o, "| run | Healthy Deployment bindings |\n|---|---|");
            for (r, _) in &bursts {
                let _ = writeln!(o, "| {} | {} |", r.label, r.healthy_deployment_bindings);
            }
            let _ = writeln!(o);
            let pulled: Vec<_> = bursts
                .iter()
                .filter_map(|(r, b)| b.agents.map(|a| (r, b, a)))
                .collect();
            if !pulled.is_empty() {
                let _ = writeln!(
                    o,
                    "Pull mode (each member served by its own karmada-agent; the controller-manager's \
                     CPU and memory are in the burst table):\n"
                );
                let _ = writeln!(
                    o,
                    "| run | agents | agents' CPU (s) | agents' peak RSS, summed (MiB) | controller-manager requests to members |\n|---|---|---|---|---|"
                );
                for (r, b, a) in pulled {
                    let to_members: u64 = b.requests.get("members").map_or(0, |m| m.values().sum());
                    let _ = writeln!(
                        o,
                        "| {} | {} | {:.1} | {:.0} | {} |",
                        r.label, a.count, a.cpu_seconds, a.peak_rss_mib, to_members
                    );
                }
                let _ = writeln!(o);
            }
        }
        let restarts: Vec<_> = self
            .runs
            .iter()
            .filter_map(|r| r.restart.as_ref().map(|x| (r, x)))
            .collect();
        if !restarts.is_empty() {
            let _ = writeln!(o, "#### Restart\n");
            let _ = writeln!(
                o,
                "| run | templates | stop (s) | ready (s) | settled (s) | fresh template latency max (ms) | member changes | host changes | writes (new process) | CPU (s) | peak RSS (MiB) |"
            );
            let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|---|---|");
            for (r, x) in &restarts {
                let sum = |target: &str| -> String {
                    let parts: Vec<String> = x
                        .changes
                        .iter()
                        .filter(|(k, c)| k.starts_with(target) && c.total() > 0)
                        .map(|(k, c)| format!("{k}: +{} ~{} -{}", c.created, c.modified, c.deleted))
                        .collect();
                    if parts.is_empty() {
                        "0".into()
                    } else {
                        parts.join(", ")
                    }
                };
                let _ = writeln!(
                    o,
                    "| {} | {} | {:.1} | {:.1} | {:.1} | {:.0} | {} | {} | host {}, members {} | {:.1} | {:.0} |",
                    r.label,
                    x.templates,
                    x.stop_seconds,
                    x.ready_seconds,
                    x.settled_seconds,
                    x.fresh_latency.max_ms,
                    sum("members"),
                    sum("host"),
                    super::process::writes(&x.requests, "host"),
                    super::process::writes(&x.requests, "members"),
                    x.cpu_seconds,
                    x.peak_rss_mib
                );
            }
            let _ = writeln!(o);
        }
        let steadies: Vec<_> = self
            .runs
            .iter()
            .filter_map(|r| r.steady.as_ref().map(|x| (r, x)))
            .collect();
        if !steadies.is_empty() {
            let _ = writeln!(o, "#### Steady rate\n");
            let _ = writeln!(
                o,
                "| run | rate asked / achieved (/s) | templates | latency p50/p90/p99/max (ms) | CPU (s) |"
            );
            let _ = writeln!(o, "|---|---|---|---|---|");
            for (r, x) in &steadies {
                let _ = writeln!(
                    o,
                    "| {} | {:.0} / {:.1} | {} | {} | {:.1} |",
                    r.label,
                    x.rate,
                    x.achieved_rate,
                    x.templates,
                    ms(&x.latency),
                    x.cpu_seconds
                );
            }
            let _ = writeln!(o);
        }
        self.failover_table(&mut o);
        self.cold_start_tables(&mut o);
        self.side_by_side(&mut o);
        if let Some(f) = &self.floor {
            let _ = writeln!(o, "#### Minimal-writes floor\n");
            let _ = writeln!(
                o,
                "| templates × members | concurrency (create / binding / work / member) | writes | member objects (s) | servers' CPU: host / members / etcd (s) | our burst at the same size (s) | ratio |"
            );
            let _ = writeln!(o, "|---|---|---|---|---|---|---|");
            let ours = bursts
                .iter()
                .find(|(r, b)| {
                    r.implementation == Impl::Rust
                        && r.qps == Qps::Raised
                        && b.members == f.members
                        && b.templates == f.templates
                })
                .map(|(_, b)| b.member_objects_seconds);
            let _ = writeln!(
                o,
                "| {} × {} | {} / {} / {} / {} | {} | {:.1} | {} | {} | {} |",
                f.templates,
                f.members,
                f.create_concurrency,
                f.binding_concurrency,
                f.work_concurrency,
                f.member_concurrency,
                f.writes,
                f.seconds,
                servers(&f.server_cpu),
                ours.map_or("n/a".into(), |s| format!("{s:.1}")),
                ours.map_or("n/a".into(), |s| format!("{:.2}×", s / f.seconds.max(1e-9)))
            );
        }
        o
    }

    /// One row per cold start, one column per key any of them counted, each cell the count per
    /// Deployment, and the total.
    fn cold_start_per_deployment(
        &self,
        o: &mut String,
        title: &str,
        counts: impl Fn(&ColdStartResult) -> &BTreeMap<String, u64>,
    ) {
        let keys: std::collections::BTreeSet<&String> = self
            .cold_starts
            .iter()
            .flat_map(|r| counts(&r.cold).iter())
            .filter(|(_, n)| **n > 0)
            .map(|(k, _)| k)
            .collect();
        if keys.is_empty() {
            return;
        }
        let _ = writeln!(o, "\n{title}:\n");
        let header: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
        let _ = writeln!(o, "| run | {} | total |", header.join(" | "));
        let _ = writeln!(o, "|---|{}---|", "---|".repeat(header.len()));
        for r in &self.cold_starts {
            let c = counts(&r.cold);
            let per = |n: u64| n as f64 / r.cold.deployments.max(1) as f64;
            let cells: Vec<String> = keys
                .iter()
                .map(|k| format!("{:.1}", per(c.get(*k).copied().unwrap_or(0))))
                .collect();
            let total: u64 = c.values().sum();
            let _ = writeln!(
                o,
                "| {} | {} | {:.1} |",
                r.label,
                cells.join(" | "),
                per(total)
            );
        }
    }

    /// The cold starts and the restarts after them.
    fn cold_start_tables(&self, o: &mut String) {
        if self.cold_starts.is_empty() {
            return;
        }
        let _ = writeln!(o, "#### Cold start\n");
        let _ = writeln!(
            o,
            "Every Deployment with its own ConfigMap (mounted as a volume) and its own policy \
             (`propagateDeps: true`, Duplicated), all created while the controllers were stopped; \
             times from the controllers' start.\n"
        );
        let _ = writeln!(
            o,
            "| run | Deployments × members | namespaces | ready (s) | member objects (s) | FullyApplied (s) | settled (s) | arrival p50/p90/p99/max (ms) | CPU (s) | servers' CPU: host / members / etcd (s) | peak RSS (MiB) | host writes | member writes |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        for r in &self.cold_starts {
            let c = &r.cold;
            let _ = writeln!(
                o,
                "| {} | {} × {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.1} | {} | {:.0} | {} | {} |",
                r.label,
                c.deployments,
                c.members,
                c.namespaces,
                c.ready_seconds,
                c.member_objects_seconds,
                c.fully_applied_seconds,
                c.settled_seconds,
                ms(&c.arrival),
                c.cpu_seconds,
                servers(&c.server_cpu),
                c.peak_rss_mib,
                c.host_writes,
                c.member_writes
            );
        }
        for r in &self.cold_starts {
            stale_line(
                o,
                &r.label,
                "once the cold start settled",
                r.cold.stale_members,
                &r.cold.stale_examples,
            );
            if let Some(x) = &r.restart {
                stale_line(
                    o,
                    &r.label,
                    "once the restart settled",
                    x.stale_members,
                    &x.stale_examples,
                );
            }
        }
        self.cold_start_per_deployment(
            o,
            "Host API server writes per Deployment during the cold start, by resource (everyone's)",
            |c| &c.host_writes_by_resource,
        );
        self.cold_start_per_deployment(
            o,
            "Events per Deployment during the cold start, by reason (repeats counted)",
            |c| &c.events_by_reason,
        );
        self.cold_restart_table(o);
        let _ = writeln!(o);
    }

    /// The restarts after the cold starts, and the objects each changed.
    fn cold_restart_table(&self, o: &mut String) {
        let restarts: Vec<_> = self
            .cold_starts
            .iter()
            .filter_map(|r| r.restart.as_ref().map(|x| (r, x)))
            .collect();
        if restarts.is_empty() {
            return;
        }
        let _ = writeln!(o, "\n#### Restart under the cold-start load\n");
        let _ = writeln!(
            o,
            "A fresh ConfigMap, policy and Deployment created 1 s after the new processes' spawn; \
             *fresh* is from that create until both objects are in every member.\n"
        );
        let _ = writeln!(
            o,
            "| run | objects | stop (s) | ready (s) | fresh (s) | settled (s) | changes to what existed | writes (new processes) | CPU (s) | peak RSS (MiB) |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|---|");
        for (r, x) in &restarts {
            let changes: Vec<String> = x
                .changes
                .iter()
                .filter(|(_, c)| c.total() > 0)
                .map(|(k, c)| format!("{k}: +{} ~{} -{}", c.created, c.modified, c.deleted))
                .collect();
            let _ = writeln!(
                o,
                "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {} | host {}, members {} | {:.1} | {:.0} |",
                r.label,
                x.objects,
                x.stop_seconds,
                x.ready_seconds,
                x.fresh_seconds,
                x.settled_seconds,
                if changes.is_empty() {
                    "0".to_string()
                } else {
                    changes.join(", ")
                },
                x.host_writes,
                x.member_writes,
                x.cpu_seconds,
                x.peak_rss_mib
            );
        }
        for (r, x) in restarts {
            if !x.changed_objects.is_empty() {
                let _ = writeln!(
                    o,
                    "\n{}: changed by the restart (first {} at most): {}",
                    r.label,
                    super::coldstart::CHANGED_LISTED,
                    x.changed_objects.join(", ")
                );
            }
            if !x.changed_fields.is_empty() {
                let _ = writeln!(
                    o,
                    "\n{}: bindings and Works the restart changed, and how:\n\n- {}",
                    r.label,
                    x.changed_fields.join("\n- ")
                );
            }
        }
    }

    /// The failover runs: kill → taint → evicted → whole.
    fn failover_table(&self, o: &mut String) {
        let runs: Vec<_> = self
            .runs
            .iter()
            .filter_map(|r| r.failover.as_ref().map(|f| (r, f)))
            .collect();
        if runs.is_empty() {
            return;
        }
        let _ = writeln!(o, "#### Failover\n");
        let _ = writeln!(
            o,
            "Deployments with one replica per member; the last member's kube-apiserver killed; times from the kill. Flags: `{}`.\n",
            super::failover::KCM_ARGS.join(" ")
        );
        let _ = writeln!(
            o,
            "| run | Deployments × members | tainted (s) | evicted (s) | whole (s) | eviction tasks | CPU (s) | host writes | member writes |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|");
        for (r, f) in runs {
            let _ = writeln!(
                o,
                "| {} | {} × {} | {:.1} | {:.1} | {:.1} | {} | {:.1} | {} | {} |",
                r.label,
                f.templates,
                f.members,
                f.taint_seconds,
                f.evicted_seconds,
                f.whole_seconds,
                f.eviction_tasks,
                f.cpu_seconds,
                f.host_writes,
                f.member_writes
            );
        }
        let _ = writeln!(o);
    }

    /// Ours and Karmada's Go peer on the same workload (same QPS and member count), with the ratio
    /// Karmada ÷ ours: written only when both ran.
    #[allow(
        clippy::too_many_lines,
        reason = "one table: a row per measure, each formatted in place"
    )]
    fn side_by_side(&self, o: &mut String) {
        let pairs: Vec<(&Run, &Run)> = self
            .runs
            .iter()
            .filter(|r| r.implementation == Impl::Rust)
            .filter_map(|ours| {
                let peer = self.runs.iter().find(|p| {
                    p.implementation == Impl::Karmada
                        && p.qps == ours.qps
                        && p.members == ours.members
                        && p.customization == ours.customization
                        && p.pull == ours.pull
                        && p.aggregated == ours.aggregated
                })?;
                Some((ours, peer))
            })
            .collect();
        if pairs.is_empty() {
            return;
        }
        let base = |r: &Run| -> String {
            let prefix = format!("{}, ", Impl::Rust.label());
            r.label.trim_start_matches(prefix.as_str()).to_string()
        };
        let cell = |ours: f64, peer: f64, digits: usize| {
            format!(
                "{ours:.digits$} / {peer:.digits$} / {}",
                if ours > 0.0 {
                    format!("{:.2}×", peer / ours)
                } else {
                    "n/a".to_string()
                }
            )
        };
        let _ = writeln!(
            o,
            "#### karmada-rs and Karmada Go side by side\n\nEach cell: karmada-rs / Karmada Go (controller-manager + scheduler + webhook) / ratio Karmada ÷ karmada-rs.\n"
        );
        let _ = writeln!(
            o,
            "| burst | templates × members | converged (s) | FullyApplied (s) | arrival p99 (ms) | CPU (s) | peak RSS (MiB) | host writes / template | host API server CPU (s) |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|");
        for (ours, peer) in &pairs {
            let (Some(a), Some(b)) = (&ours.burst, &peer.burst) else {
                continue;
            };
            let per = |x: &BurstResult| x.host_writes as f64 / x.templates.max(1) as f64;
            let _ = writeln!(
                o,
                "| {} | {} × {} | {} | {} | {} | {} | {} | {} | {} |",
                base(ours),
                a.templates,
                a.members,
                cell(a.converged_seconds, b.converged_seconds, 1),
                cell(a.fully_applied_seconds, b.fully_applied_seconds, 1),
                cell(a.arrival.p99_ms, b.arrival.p99_ms, 0),
                cell(a.cpu_seconds, b.cpu_seconds, 1),
                cell(a.peak_rss_mib, b.peak_rss_mib, 0),
                cell(per(a), per(b), 1),
                cell(a.server_cpu.host_apiserver, b.server_cpu.host_apiserver, 1),
            );
        }
        let steady = paired(&pairs, |r| r.steady.as_ref());
        if !steady.is_empty() {
            let _ = writeln!(
                o,
                "\n| steady | rate (/s) | templates × members | latency p50 (ms) | latency p99 (ms) | CPU (s) |\n|---|---|---|---|---|---|"
            );
            for (ours, a, b) in steady {
                let _ = writeln!(
                    o,
                    "| {} | {:.0} | {} × {} | {} | {} | {} |",
                    base(ours),
                    a.rate,
                    a.templates,
                    ours.members,
                    cell(a.latency.p50_ms, b.latency.p50_ms, 0),
                    cell(a.latency.p99_ms, b.latency.p99_ms, 0),
                    cell(a.cpu_seconds, b.cpu_seconds, 1),
                );
            }
        }
        let restart = paired(&pairs, |r| r.restart.as_ref());
        if !restart.is_empty() {
            let _ = writeln!(
                o,
                "\n| restart | templates × members | ready (s) | settled (s) | fresh template max (ms) | host writes | member writes | host objects changed | CPU (s) | peak RSS (MiB) |\n|---|---|---|---|---|---|---|---|---|---|"
            );
            let changed = |x: &RestartResult| -> f64 {
                x.changes
                    .iter()
                    .filter(|(k, _)| k.starts_with("host"))
                    .map(|(_, c)| f64::from(c.total()))
                    .sum()
            };
            let writes = |x: &RestartResult, target: &str| {
                super::process::writes(&x.requests, target) as f64
            };
            for (ours, a, b) in restart {
                let _ = writeln!(
                    o,
                    "| {} | {} × {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    base(ours),
                    a.templates,
                    ours.members,
                    cell(a.ready_seconds, b.ready_seconds, 1),
                    cell(a.settled_seconds, b.settled_seconds, 1),
                    cell(a.fresh_latency.max_ms, b.fresh_latency.max_ms, 0),
                    cell(writes(a, "host"), writes(b, "host"), 0),
                    cell(writes(a, "members"), writes(b, "members"), 0),
                    cell(changed(a), changed(b), 0),
                    cell(a.cpu_seconds, b.cpu_seconds, 1),
                    cell(a.peak_rss_mib, b.peak_rss_mib, 0),
                );
            }
        }
        let _ = writeln!(o);
    }
}

/// One line saying whether the members held every manifest as its Work says at `when`.
fn stale_line(o: &mut String, label: &str, when: &str, stale: usize, examples: &[String]) {
    if stale == 0 {
        let _ = writeln!(
            o,
            "\n{label}: the members held every manifest as its Work says {when}."
        );
    } else {
        let _ = writeln!(
            o,
            "\n{label}: {stale} manifests not held as their Works say {when}; the first: {}",
            examples.join("; ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let p = Percentiles::of((1..=100).map(Duration::from_millis).collect());
        assert_eq!(
            (p.count, p.p50_ms, p.p90_ms, p.p99_ms, p.max_ms),
            (100, 50.0, 90.0, 99.0, 100.0)
        );
        assert_eq!(Percentiles::of(vec![]).count, 0);
        let one = Percentiles::of(vec![Duration::from_millis(7)]);
        assert_eq!((one.p50_ms, one.max_ms), (7.0, 7.0));
    }
}
