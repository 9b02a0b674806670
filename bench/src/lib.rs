//! The benchmark harness (`karmada-bench`): `make bench`'s propagation, scheduling and rollout
//! benchmarks, and the sessions and workloads the fault tests of `karmada-e2e` reuse.
//!
//! The propagation benchmark: how fast templates reach the members, what it costs in requests, CPU
//! and memory, what a restart costs, and how that compares with the minimal writes the job needs.
//!
//! Everything runs for real: fresh `testenv` environments (host + API-server-only members), the
//! `karmada-controller-manager` binary with the members joined through `karmadactl join` (or, in
//! the Pull run, each served by a `karmada-agent` process), and watches
//! on every API server that timestamp arrivals ([`observer`]). `make bench` runs the full sizes
//! ([`BenchConfig::full`]), the failover run ([`failover`]) included; the smoke test runs [`BenchConfig::smoke`] in `make test` so the harness
//! cannot rot. Results: `docs/benchmarks.md`.

pub use karmada_e2e::{karmada_go, process};

pub mod audit;
pub mod coldstart;
pub mod failover;
pub mod floor;
pub mod observer;
pub mod report;
pub mod rollout;
pub mod scenarios;
pub mod scheduling;
pub mod session;
pub mod workload;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;

use report::{Machine, Report, Run};
use session::{Impl, Layout, Mode, Qps, Session};

/// One controller-manager configuration the benchmark runs on a fresh environment.
#[derive(Clone, Copy)]
struct Plan {
    qps: Qps,
    members: usize,
    /// (Deployments, ConfigMaps) in the burst.
    templates: (usize, usize),
    restart: bool,
    steady: bool,
    /// With [`workload::deployment_customization`] installed.
    customized: bool,
    /// Members served by agents (Pull) instead of joined.
    pull: bool,
    /// The failover scenario instead of the burst ([`failover`]).
    failover: bool,
    /// Clusters served by Karmada's aggregated API server instead of the Cluster CRD.
    aggregated: bool,
}

/// Sizes and switches.
#[derive(Clone, Debug, Serialize)]
pub struct BenchConfig {
    /// Members in the main runs.
    pub members: usize,
    /// The main run: a burst at the raised QPS on `members` members, then the restart and the
    /// steady rate. Off, only the other runs asked for (so a test can measure them apart).
    pub main_run: bool,
    /// Deployments per burst.
    pub deployments: usize,
    /// ConfigMaps per burst.
    pub configmaps: usize,
    /// Namespaces the templates spread over (one policy each).
    pub namespaces: usize,
    /// Template creates in flight during a burst.
    pub create_concurrency: usize,
    /// Templates per second in the steady run.
    pub steady_rate: f64,
    /// Length of the steady run (s).
    pub steady_seconds: f64,
    /// Member counts of the scale-out bursts (the main member count is measured by the main run).
    pub scale_out: Vec<usize>,
    /// Also run a burst with Karmada's default client QPS.
    pub karmada_default_qps: bool,
    /// Templates in that run's burst (at 40 QPS every host write waits for the rate limiter, so
    /// the full size would take most of an hour; the time per template is what it shows).
    pub default_qps_templates: usize,
    /// Also run a burst with a Lua ResourceInterpreterCustomization for Deployments installed
    /// ([`workload::deployment_customization`]), beside the native main run.
    pub customization: bool,
    /// Also run a burst with every member in Pull mode, each served by its own `karmada-agent`
    /// (karmada-rs only): the controller-manager's member requests (none) and the agents' CPU and
    /// memory beside the Push numbers.
    pub pull: bool,
    /// Also run a burst with `cluster.karmada.io` served by Karmada's `karmada-aggregated-apiserver`
    /// (as on a control plane Karmada's installers set up) instead of the Cluster CRD: every
    /// Cluster read and status write goes through the host's aggregation layer.
    pub aggregated: bool,
    /// Deployments of the failover run ([`failover`]; 0: no failover run).
    pub failover_templates: usize,
    /// Also measure the minimal-writes floor.
    pub floor: bool,
    /// Worker count per stage of the floor: the controller-manager's default `--concurrent-*-syncs`.
    pub floor_syncs: usize,
    /// Longest wait for any one convergence (s).
    pub timeout_seconds: f64,
    /// The implementations measured, each on its own fresh environments with the same flags (`Karmada`
    /// needs `make karmada-binaries`).
    pub impls: Vec<Impl>,
    /// Deployments of the cold start ([`coldstart`]; each with its own ConfigMap and policy, spread
    /// over `namespaces`, on `members` members; 0: no cold start).
    pub cold_start: usize,
    /// After the cold start settles, restart the controllers and measure a fresh workload.
    pub cold_start_restart: bool,
    /// Extra flags for the controller-manager of the cold-start runs, ours or Karmada's (e.g. a
    /// longer `--cluster-cache-sync-timeout` at the largest shapes).
    pub cold_start_args: Vec<String>,
    /// Run the cold start alone: none of the burst runs, no floor.
    pub only_cold_start: bool,
    /// Where to write a heap profile of our controller-manager after each Push burst (it runs with
    /// `--enable-pprof`; `go tool pprof` reads the files), with its `lariat_cached_objects` series
    /// beside each; `None`: no profiling.
    pub heap_profiles: Option<PathBuf>,
    /// Where to write CPU profiles of our controller-manager and the host API server over the
    /// cold start (from ready,
    /// [`coldstart::CPU_PROFILE_SECONDS`] at most) and its restart (from the spawn,
    /// [`coldstart::RESTART_PROFILE_SECONDS`]); `go tool pprof` reads them; `None`: none.
    pub cpu_profile: Option<PathBuf>,
    /// kube-apiservers serving the host over one etcd behind one balanced endpoint, in every run
    /// (0 or 1: one, as usual).
    pub host_replicas: usize,
}

impl BenchConfig {
    /// The sizes `make bench` runs: 1,000 Deployments + 1,000 ConfigMaps over 10 namespaces, 3
    /// members, 20 templates/s for 60 s, scale-out to 1, 2 and 4 members, failover of 300
    /// Deployments.
    pub fn full() -> Self {
        BenchConfig {
            members: 3,
            main_run: true,
            deployments: 1000,
            configmaps: 1000,
            namespaces: 10,
            create_concurrency: 32,
            steady_rate: 20.0,
            steady_seconds: 60.0,
            scale_out: vec![1, 2, 4],
            karmada_default_qps: true,
            default_qps_templates: 400,
            customization: true,
            pull: true,
            aggregated: true,
            failover_templates: 300,
            floor: true,
            floor_syncs: 5,
            timeout_seconds: 1800.0,
            impls: vec![Impl::Rust],
            cold_start: 0,
            cold_start_restart: false,
            cold_start_args: Vec::new(),
            only_cold_start: false,
            host_replicas: 1,
            heap_profiles: None,
            cpu_profile: None,
        }
    }

    /// A size small enough for `make test` that still runs every scenario.
    pub fn smoke() -> Self {
        BenchConfig {
            members: 2,
            main_run: true,
            deployments: 10,
            configmaps: 10,
            namespaces: 2,
            create_concurrency: 8,
            steady_rate: 10.0,
            steady_seconds: 2.0,
            scale_out: vec![1],
            karmada_default_qps: true,
            default_qps_templates: 20,
            customization: true,
            pull: true,
            // Needs `make karmada-binaries`, which `make test` does not build.
            aggregated: false,
            failover_templates: 6,
            floor: true,
            floor_syncs: 5,
            timeout_seconds: 180.0,
            impls: vec![Impl::Rust],
            cold_start: 0,
            cold_start_restart: false,
            cold_start_args: Vec::new(),
            only_cold_start: false,
            host_replicas: 1,
            heap_profiles: None,
            cpu_profile: None,
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_seconds)
    }
}

/// Runs every scenario `config` asks for, each controller-manager configuration on a fresh
/// environment (per implementation, one after the other), reporting progress through `progress`.
#[allow(
    clippy::too_many_lines,
    reason = "the benchmark's scenarios in the order they run, each with its environment"
)]
pub async fn run(config: &BenchConfig, progress: impl Fn(&str)) -> anyhow::Result<Report> {
    let started = Instant::now();
    let timeout = config.timeout();
    let mut runs = Vec::new();
    // The main run does everything, the default-QPS, customization and scale-out runs only the burst
    // (at Karmada's 40 QPS a steady 20 templates/s is beyond what the client limit allows: the
    // burst's throughput says so).
    let full = (config.deployments, config.configmaps);
    let plan = |qps, members, templates| Plan {
        qps,
        members,
        templates,
        restart: false,
        steady: false,
        customized: false,
        pull: false,
        failover: false,
        aggregated: false,
    };
    let mut plans = Vec::new();
    if config.main_run {
        plans.push(Plan {
            restart: true,
            steady: true,
            ..plan(Qps::Raised, config.members, full)
        });
    }
    if config.karmada_default_qps {
        let n = config.default_qps_templates;
        plans.push(plan(
            Qps::KarmadaDefaults,
            config.members,
            (n.div_ceil(2), n / 2),
        ));
    }
    if config.customization {
        plans.push(Plan {
            customized: true,
            ..plan(Qps::Raised, config.members, full)
        });
    }
    if config.pull {
        plans.push(Plan {
            pull: true,
            ..plan(Qps::Raised, config.members, full)
        });
    }
    if config.aggregated {
        plans.push(Plan {
            aggregated: true,
            ..plan(Qps::Raised, config.members, full)
        });
    }
    for &k in config.scale_out.iter().filter(|&&k| k != config.members) {
        plans.push(plan(Qps::Raised, k, full));
    }
    if config.failover_templates > 0 {
        plans.push(Plan {
            failover: true,
            ..plan(Qps::Raised, config.members, (config.failover_templates, 0))
        });
    }
    let runs_of = plans
        .into_iter()
        .flat_map(|plan| config.impls.iter().map(move |&imp| (imp, plan)))
        // Karmada's Go agent is not built here: Pull is measured for karmada-rs alone.
        .filter(|(imp, plan)| !plan.pull || *imp == Impl::Rust)
        .filter(|_| !config.only_cold_start);
    for (imp, p) in runs_of {
        let (qps, members, (deployments, configmaps)) = (p.qps, p.members, p.templates);
        let mut label = format!(
            "{}, {members} member{}",
            qps.label(),
            if members == 1 { "" } else { "s" }
        );
        if p.customized {
            label.push_str(", Lua customization");
        }
        if p.pull {
            label.push_str(", Pull (agents)");
        }
        if p.aggregated {
            label.push_str(", aggregated Cluster API");
        }
        if p.failover {
            label.push_str(", failover");
        }
        label.push_str(&host_replicas_label(config.host_replicas));
        if config.impls != [Impl::Rust] {
            label = format!("{}, {label}", imp.label());
        }
        progress(&format!("{label}: starting a fresh environment"));
        let layout = Layout {
            mode: if p.pull { Mode::Pull } else { Mode::Push },
            aggregated_apiserver: p.aggregated,
            host_replicas: config.host_replicas,
            host_profiling: false,
        };
        let mut extra_args: Vec<String> = if p.failover { failover::KCM_ARGS } else { &[] }
            .iter()
            .map(ToString::to_string)
            .collect();
        let profiling_port = config
            .heap_profiles
            .as_ref()
            .filter(|_| imp == Impl::Rust && !p.pull && !p.failover)
            .map(|_| karmada_e2e::controller_manager::free_port());
        if let Some(port) = profiling_port {
            extra_args.extend(profiling_args(port));
        }
        let extra_args: Vec<&str> = extra_args.iter().map(String::as_str).collect();
        let mut s = Session::start_laid_out(
            imp,
            members,
            config.namespaces,
            Some(qps),
            &extra_args,
            layout,
        )
        .await?;
        if p.failover {
            progress(&format!(
                "{label}: {deployments} Deployments, then {} lost",
                s.member_names.last().map_or("", String::as_str)
            ));
            let result =
                failover::failover(&s, deployments, config.create_concurrency, timeout).await?;
            runs.push(Run {
                label,
                implementation: imp,
                qps,
                members,
                customization: false,
                pull: false,
                aggregated: false,
                healthy_deployment_bindings: 0,
                burst: None,
                heap_profile: None,
                restart: None,
                steady: None,
                failover: Some(result),
            });
            continue;
        }
        if p.customized {
            let ric: kube::api::DynamicObject =
                serde_json::from_value(workload::deployment_customization())?;
            let ar = kube::api::ApiResource::erase::<
                karmada_apis::config::v1alpha1::ResourceInterpreterCustomization,
            >(&());
            kube::Api::<kube::api::DynamicObject>::all_with(s.host.clone(), &ar)
                .create(&Default::default(), &ric)
                .await
                .context("create the benchmark's ResourceInterpreterCustomization")?;
        }
        progress(&format!(
            "{label}: burst of {} templates",
            deployments + configmaps
        ));
        let burst = scenarios::burst(
            &s,
            "burst",
            deployments,
            configmaps,
            config.create_concurrency,
            timeout,
        )
        .await?;
        let heap_profile = match (&config.heap_profiles, profiling_port) {
            (Some(dir), Some(port)) => {
                let name = file_name(&label);
                let path = dir.join(format!("{name}.pb.gz"));
                write_heap_profile(port, &path).await?;
                // What the caches hold beside it (`lariat_cached_objects` by cluster and kind).
                let counts = dir.join(format!("{name}.cached-objects.txt"));
                let metrics = s
                    .kcm
                    .as_ref()
                    .and_then(karmada_e2e::controller_manager::Kcm::metrics)
                    .unwrap_or_default();
                let cached: Vec<&str> = metrics
                    .lines()
                    .filter(|l| l.starts_with("lariat_cached_objects{"))
                    .collect();
                std::fs::write(&counts, cached.join("\n"))
                    .with_context(|| format!("write {}", counts.display()))?;
                progress(&format!("{label}: heap profile in {}", path.display()));
                Some(path)
            }
            _ => None,
        };
        let healthy_deployment_bindings =
            workload::healthy_deployment_bindings(&s.host, &s.namespaces).await?;
        let restart = if p.restart {
            progress(&format!("{label}: restart"));
            Some(scenarios::restart(&mut s, timeout).await?)
        } else {
            None
        };
        let steady = if p.steady {
            progress(&format!(
                "{label}: steady {} templates/s for {} s",
                config.steady_rate, config.steady_seconds
            ));
            Some(
                scenarios::steady(
                    &s,
                    "steady",
                    config.steady_rate,
                    Duration::from_secs_f64(config.steady_seconds),
                    timeout,
                )
                .await?,
            )
        } else {
            None
        };
        runs.push(Run {
            label,
            implementation: imp,
            qps,
            members,
            customization: p.customized,
            pull: p.pull,
            aggregated: p.aggregated,
            healthy_deployment_bindings,
            burst: Some(burst),
            heap_profile,
            restart,
            steady,
            failover: None,
        });
    }
    let mut cold_starts = Vec::new();
    if config.cold_start > 0 {
        for &imp in &config.impls {
            cold_starts.push(cold_start_run(config, imp, &progress).await?);
        }
    }
    let floor = if config.floor && !config.only_cold_start {
        progress("minimal-writes floor: starting a fresh environment");
        let s = Session::start(config.members, config.namespaces, None).await?;
        progress("minimal-writes floor: running");
        Some(
            floor::floor(
                &s,
                config.deployments,
                config.configmaps,
                config.create_concurrency,
                config.floor_syncs,
                timeout,
            )
            .await?,
        )
    } else {
        None
    };
    Ok(Report {
        machine: Machine::read(),
        config: config.clone(),
        runs,
        cold_starts,
        floor,
        wall_seconds: started.elapsed().as_secs_f64(),
    })
}

/// `label` as a file name: lowercase ASCII letters and digits, other runs of characters as one `-`.
fn file_name(label: &str) -> String {
    let mut name = String::new();
    for c in label.chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c.to_ascii_lowercase());
        } else if !name.is_empty() && !name.ends_with('-') {
            name.push('-');
        }
    }
    name.trim_end_matches('-').to_owned()
}

/// Fetches the live heap profile the controller-manager serves on `port` (gzipped pprof) into
/// `path`.
async fn write_heap_profile(port: u16, path: &Path) -> anyhow::Result<()> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        fetch_profile(port, "/debug/pprof/heap", Duration::from_secs(120), &path)
    })
    .await?
}

/// Reads the profile the controller-manager's profiling endpoint on `port` serves at `endpoint`
/// (waiting up to `timeout`) into `path`. Blocking.
pub(crate) fn fetch_profile(
    port: u16,
    endpoint: &str,
    timeout: Duration,
    path: &Path,
) -> anyhow::Result<()> {
    let (status, body) = karmada_e2e::controller_manager::http_get_bytes(port, endpoint, timeout)
        .with_context(|| {
        format!("no answer from 127.0.0.1:{port}{endpoint} within {timeout:?}")
    })?;
    if status != 200 {
        bail!(
            "127.0.0.1:{port}{endpoint}: HTTP {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    write_file(path, &body)
}

/// Writes `body` to `path`, creating its folder (profiles, the benchmarks' reports).
pub fn write_file(path: &Path, body: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    std::fs::write(path, body).with_context(|| format!("write {}", path.display()))
}

/// The controller-manager flags that serve its profiling endpoints on `port`.
fn profiling_args(port: u16) -> [String; 2] {
    [
        "--enable-pprof".to_owned(),
        format!("--profiling-bind-address=127.0.0.1:{port}"),
    ]
}

/// How a run's label names `host_replicas` host API servers (nothing for one).
fn host_replicas_label(host_replicas: usize) -> String {
    if host_replicas > 1 {
        format!(", {host_replicas} host API servers")
    } else {
        String::new()
    }
}

/// The cold start of `config.cold_start` workloads for `imp` on a fresh environment, and with
/// `config.cold_start_restart` the restart after it.
async fn cold_start_run(
    config: &BenchConfig,
    imp: Impl,
    progress: &impl Fn(&str),
) -> anyhow::Result<report::ColdStartRun> {
    let members = config.members;
    let mut label = format!(
        "cold start, {} Deployments + ConfigMaps + policies, {members} member{}",
        config.cold_start,
        if members == 1 { "" } else { "s" }
    );
    label.push_str(&host_replicas_label(config.host_replicas));
    if config.impls != [Impl::Rust] {
        label = format!("{}, {label}", imp.label());
    }
    progress(&format!("{label}: starting a fresh environment"));
    // Ours is profiled through its own endpoint; the host API server through the API, for both.
    let profiling_port = (config.cpu_profile.is_some() && imp == Impl::Rust)
        .then(karmada_e2e::controller_manager::free_port);
    let profiles = |run: &str| {
        let dir = config.cpu_profile.as_ref()?;
        let file = |what: &str| dir.join(format!("{}{run}.{what}", file_name(&label)));
        Some(coldstart::Profiles {
            controller: profiling_port.map(|port| (port, file("cpu.pb.gz"))),
            host_apiserver: Some(file("host-apiserver.cpu")),
        })
    };
    let cold_profiles = profiles("").unwrap_or_default();
    let restart_profiles = profiles(".restart").unwrap_or_default();
    let extra_args: Vec<String> = cold_profiles
        .controller
        .iter()
        .flat_map(|(port, _)| profiling_args(*port))
        .chain(config.cold_start_args.iter().cloned())
        .collect();
    let extra_args: Vec<&str> = extra_args.iter().map(String::as_str).collect();
    let layout = Layout {
        host_replicas: config.host_replicas,
        host_profiling: config.cpu_profile.is_some(),
        ..Layout::default()
    };
    let mut s =
        Session::start_laid_out(imp, members, 0, Some(Qps::Raised), &extra_args, layout).await?;
    progress(&format!(
        "{label}: creating everything with the controllers stopped, then starting them"
    ));
    let cold = coldstart::cold_start(
        &mut s,
        imp,
        config.cold_start,
        config.namespaces,
        config.create_concurrency,
        config.timeout(),
        &cold_profiles,
    )
    .await
    .with_context(|| format!("{label}: cold start"))?;
    let restart = if config.cold_start_restart {
        progress(&format!("{label}: restart under that load"));
        Some(
            coldstart::restart(&mut s, config.timeout(), &restart_profiles)
                .await
                .with_context(|| format!("{label}: restart"))?,
        )
    } else {
        None
    };
    Ok(report::ColdStartRun {
        label,
        implementation: imp,
        qps: Qps::Raised,
        cold,
        restart,
    })
}
