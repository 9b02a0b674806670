//! One benchmark environment: a fresh host + members from `testenv`, the real controller-manager with
//! the members joined through `karmadactl join`, the benchmark's namespaces and policies, and the
//! observer's watches. The controllers are ours or Karmada's Go peer ([`Impl`]).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, Namespace};
use karmada_apis::PropagationPolicy;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use testenv::{EnvOptions, TestEnv};

pub use karmada_e2e::controller_manager::{wait_clusters_ready, wait_ready};
pub use karmada_e2e::karmada_go::Impl;

use super::karmada_go::KarmadaGo;
use super::observer::Observer;
use super::process::{ProcessSample, Sample, connections_to, parse_metrics};
use super::workload::{create_namespace, policy};
use karmada_e2e::controller_manager::Kcm;

/// How the members are connected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum Mode {
    /// Joined: the controller-manager talks to each member.
    #[default]
    Push,
    /// Each member served by its own `karmada-agent` (with the same client rate limits); the
    /// controller-manager never talks to a member.
    Pull,
}

/// How a session's control plane is laid out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Layout {
    /// How the members are connected.
    pub mode: Mode,
    /// `cluster.karmada.io` served by Karmada's `karmada-aggregated-apiserver` through an APIService
    /// (as Karmada's installers set it up; `make karmada-binaries` builds it) instead of the Cluster
    /// CRD.
    pub aggregated_apiserver: bool,
    /// kube-apiservers serving the host over one etcd behind one balanced endpoint (0 and 1: one).
    pub host_replicas: usize,
    /// The host's kube-apiservers serve Go's profiles on `/debug/pprof/`.
    pub host_profiling: bool,
}

/// Client rate limits the controller-manager runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Qps {
    /// `--kube-api-qps`/`--cluster-api-qps` 1000 (bursts 2000): what the controllers themselves cost.
    Raised,
    /// Karmada's defaults (host 40/60, members 40/60): what users get out of the box.
    KarmadaDefaults,
}

impl Qps {
    /// The controller-manager flags (Karmada's names, so both implementations take them).
    pub fn args(self) -> &'static [&'static str] {
        match self {
            Qps::Raised => &[
                "--kube-api-qps=1000",
                "--kube-api-burst=2000",
                "--cluster-api-qps=1000",
                "--cluster-api-burst=2000",
            ],
            Qps::KarmadaDefaults => &[],
        }
    }

    /// How reports name it.
    pub fn label(self) -> &'static str {
        match self {
            Qps::Raised => "QPS 1000",
            Qps::KarmadaDefaults => "Karmada default QPS",
        }
    }
}

/// CPU seconds of the servers the controller-manager talks to.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct ServerCpu {
    /// The host kube-apiserver.
    pub host_apiserver: f64,
    /// All member kube-apiservers together.
    pub member_apiservers: f64,
    /// The etcd they share.
    pub etcd: f64,
    /// Karmada's aggregated API server, when it serves Clusters (0 otherwise).
    pub aggregated_apiserver: f64,
}

impl ServerCpu {
    /// What was used between `before` and `self`.
    pub fn since(&self, before: &ServerCpu) -> ServerCpu {
        ServerCpu {
            host_apiserver: self.host_apiserver - before.host_apiserver,
            member_apiservers: self.member_apiservers - before.member_apiservers,
            etcd: self.etcd - before.etcd,
            aggregated_apiserver: self.aggregated_apiserver - before.aggregated_apiserver,
        }
    }
}

/// Watches the benchmark's own [`Observer`] keeps open on each member (its Deployments and
/// ConfigMaps).
pub const OBSERVER_WATCHES_PER_MEMBER: u64 = 2;

/// How many times [`Session::metrics`] asks our controller-manager before the run fails.
const SCRAPE_ATTEMPTS: u32 = 3;

/// What the controllers hold open on one member's API server.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct MemberLoad {
    /// Watches open on it (`apiserver_longrunning_requests{verb="WATCH"}`), the benchmark's own
    /// left out.
    pub watches: u64,
    /// Established TCP connections to it from the controllers' processes.
    pub connections: usize,
}

/// A running environment.
pub struct Session {
    /// Member names, `member1` first.
    pub member_names: Vec<String>,
    /// Host client.
    pub host: Client,
    /// Member clients, by name.
    pub members: Vec<(String, Client)>,
    /// The benchmark's namespaces.
    pub namespaces: Vec<String>,
    /// The controller-manager, when this session runs ours.
    pub kcm: Option<Kcm>,
    /// Karmada's Go trio, when this session runs it or ran it (after [`swap_to`](Self::swap_to) ours,
    /// only its webhook runs).
    pub karmada: Option<KarmadaGo>,
    /// In Pull mode, one `karmada-agent` per member, in member order.
    pub agents: Vec<Kcm>,
    running: Option<Impl>,
    qps: Qps,
    extra_args: Vec<String>,
    /// Watches on host and members.
    pub observer: Observer,
    /// Each member API server's open watches before anyone connected (its own informers'), by name.
    member_watch_baseline: BTreeMap<String, u64>,
    env: TestEnv,
}

impl Session {
    /// Starts `members` members and the host. With `qps`, runs the controller-manager, joins the
    /// members and creates one policy per namespace; without, creates the namespaces everywhere and
    /// the `karmada-es-*` namespaces by hand (for the minimal-writes floor).
    pub async fn start(
        members: usize,
        namespaces: usize,
        qps: Option<Qps>,
    ) -> anyhow::Result<Session> {
        Session::start_with(members, namespaces, qps, &[]).await
    }

    /// [`start`](Self::start), with `extra_args` for the controller-manager.
    pub async fn start_with(
        members: usize,
        namespaces: usize,
        qps: Option<Qps>,
        extra_args: &[&str],
    ) -> anyhow::Result<Session> {
        Session::start_impl(Impl::Rust, members, namespaces, qps, extra_args).await
    }

    /// [`start_with`](Self::start_with) running the controllers of `imp` (with `qps`; without,
    /// none run and `imp` does not matter).
    pub async fn start_impl(
        imp: Impl,
        members: usize,
        namespaces: usize,
        qps: Option<Qps>,
        extra_args: &[&str],
    ) -> anyhow::Result<Session> {
        Session::start_laid_out(imp, members, namespaces, qps, extra_args, Layout::default()).await
    }

    /// [`start_impl`](Self::start_impl) laid out as `layout` says: the members joined (Push) or each
    /// served by a `karmada-agent` process (Pull; ours only), Clusters served by the Cluster CRD or by
    /// Karmada's aggregated API server.
    pub async fn start_laid_out(
        imp: Impl,
        members: usize,
        namespaces: usize,
        qps: Option<Qps>,
        extra_args: &[&str],
        layout: Layout,
    ) -> anyhow::Result<Session> {
        let mode = layout.mode;
        if mode == Mode::Pull && imp != Impl::Rust {
            bail!("Pull mode is measured with karmada-rs's agent only");
        }
        if imp == Impl::Karmada && qps.is_some() {
            // Fail before any environment starts when Karmada's binaries are not built.
            super::karmada_go::binaries()?;
        }
        let extra_args: Vec<String> = extra_args.iter().map(ToString::to_string).collect();
        let env = TestEnv::start(EnvOptions {
            members,
            install_crds: true,
            aggregated_apiserver: layout.aggregated_apiserver,
            host_replicas: layout.host_replicas,
            host_profiling: layout.host_profiling,
            ..Default::default()
        })
        .await
        .context("start the test environment (hack/build-test-binaries.sh builds what it needs)")?;
        let host = env.host().client().await;
        let mut member_clients = Vec::new();
        for m in env.members() {
            member_clients.push((m.name().to_string(), m.client().await));
        }
        let member_names: Vec<String> = member_clients.iter().map(|(n, _)| n.clone()).collect();
        // The API servers' own loopback informers watch too: counted before anyone else connects.
        let mut member_watch_baseline = BTreeMap::new();
        for (name, client) in &member_clients {
            member_watch_baseline.insert(name.clone(), open_watches(name, client).await?);
        }
        let namespaces: Vec<String> = (0..namespaces).map(|i| format!("bench-{i}")).collect();
        let mut kcm = None;
        let mut karmada = None;
        let mut agents = Vec::new();
        if let Some(qps) = qps {
            match imp {
                Impl::Rust => kcm = Some(start_kcm(&env, qps, &extra_args).await?),
                Impl::Karmada => {
                    karmada = Some(KarmadaGo::start(&env, qps.args(), &extra_args).await?);
                }
            }
            match mode {
                // API-server-only members run no token controller: do not wait for one.
                Mode::Push => {
                    futures::future::try_join_all(env.members().iter().map(|m| {
                        karmada_e2e::karmadactl::join(env.host(), m, &["--token-wait=1s"])
                    }))
                    .await?;
                }
                Mode::Pull => {
                    agents = env
                        .members()
                        .iter()
                        .map(|m| spawn_agent(&env, m, qps))
                        .collect();
                }
            }
            wait_clusters_ready(&host, members, Duration::from_secs(120)).await?;
            for ns in &namespaces {
                create_namespace(&host, ns).await?;
                Api::<PropagationPolicy>::namespaced(host.clone(), ns)
                    .create(&PostParams::default(), &policy(ns, &member_names)?)
                    .await
                    .with_context(|| format!("create policy {ns}/bench"))?;
            }
            // The namespace controller propagates them; templates must not race their namespace.
            for (name, client) in &member_clients {
                for ns in &namespaces {
                    wait_namespace(client, name, ns, Duration::from_secs(120)).await?;
                }
            }
        } else {
            for ns in &namespaces {
                create_namespace(&host, ns).await?;
                for (_, client) in &member_clients {
                    create_namespace(client, ns).await?;
                }
            }
            for name in &member_names {
                create_namespace(&host, &format!("karmada-es-{name}")).await?;
            }
        }
        let observer = Observer::start(&host, &member_clients);
        observer.wait_synced(Duration::from_secs(60)).await?;
        Ok(Session {
            member_names,
            host,
            members: member_clients,
            namespaces,
            kcm,
            karmada,
            agents,
            running: qps.map(|_| imp),
            qps: qps.unwrap_or(Qps::Raised),
            extra_args,
            observer,
            member_watch_baseline,
            env,
        })
    }

    /// The test environment (to inject faults into its API servers).
    pub fn env(&self) -> &TestEnv {
        &self.env
    }

    /// Whose controllers run; `None` in a session without controllers or between
    /// [`stop_controllers`](Self::stop_controllers) and [`start_controllers`](Self::start_controllers).
    pub fn running(&self) -> Option<Impl> {
        self.running
    }

    /// Karmada's trio; an error for a session that never ran it.
    pub fn karmada(&self) -> anyhow::Result<&KarmadaGo> {
        self.karmada
            .as_ref()
            .context("this session runs no Karmada Go processes")
    }

    /// Stops the running controllers and starts those of `to` on the same control plane, with the
    /// session's QPS and extra flags; returns when they are ready. Karmada's webhook keeps serving
    /// while ours runs: its webhook configurations stay registered, as a user moving between the two
    /// would leave them (they also validate policies, and Karmada's controllers cannot run without
    /// them); ours keeps the permanent ids it finds. A session that started with ours installs
    /// Karmada's webhook on the first swap to Karmada.
    pub async fn swap_to(&mut self, to: Impl) -> anyhow::Result<()> {
        self.stop_controllers().await?;
        self.start_controllers(to).await
    }

    /// Stops the running controllers (ours, or Karmada's controller-manager and scheduler; its
    /// webhook keeps serving) with SIGTERM; each must exit within 30 s. Nothing to do when none run.
    pub async fn stop_controllers(&mut self) -> anyhow::Result<()> {
        match self.running.take() {
            None => {}
            Some(Impl::Rust) => self.stop_kcm().await?,
            Some(Impl::Karmada) => {
                self.karmada
                    .as_mut()
                    .context("this session runs no Karmada Go processes")?
                    .stop_controllers()
                    .await?;
            }
        }
        Ok(())
    }

    /// Starts the controllers of `imp` (see [`swap_to`](Self::swap_to)); an error while others run.
    pub async fn start_controllers(&mut self, imp: Impl) -> anyhow::Result<()> {
        if let Some(running) = self.running {
            bail!("{} still runs", running.label());
        }
        match imp {
            Impl::Rust => {
                self.kcm = Some(start_kcm(&self.env, self.qps, &self.extra_args).await?);
            }
            Impl::Karmada => match &mut self.karmada {
                Some(k) => {
                    k.start_controllers()?;
                    k.wait_ready(Duration::from_secs(120)).await?;
                }
                None => {
                    self.karmada =
                        Some(KarmadaGo::start(&self.env, self.qps.args(), &self.extra_args).await?);
                }
            },
        }
        self.running = Some(imp);
        Ok(())
    }

    /// The controller-manager; an error for a session without one.
    pub fn kcm(&self) -> anyhow::Result<&Kcm> {
        self.kcm
            .as_ref()
            .context("this session runs no controller-manager")
    }

    /// CPU and memory of the controller-manager now (Karmada's: of its three processes together).
    pub fn sample(&self) -> anyhow::Result<ProcessSample> {
        if self.running == Some(Impl::Karmada) {
            return self.karmada()?.sample();
        }
        let kcm = self.kcm()?;
        ProcessSample::read(kcm.pid()).context("read the controller-manager's /proc entry")
    }

    /// CPU and memory of the agents together (CPU, RSS and peak RSS summed); `None` without agents.
    pub fn agents_sample(&self) -> anyhow::Result<Option<ProcessSample>> {
        if self.agents.is_empty() {
            return Ok(None);
        }
        let mut total = ProcessSample::default();
        for agent in &self.agents {
            let s = ProcessSample::read(agent.pid()).context("read an agent's /proc entry")?;
            total.cpu_seconds += s.cpu_seconds;
            total.rss_mib += s.rss_mib;
            total.peak_rss_mib += s.peak_rss_mib;
        }
        Ok(Some(total))
    }

    /// CPU seconds used so far by the API servers and etcd.
    pub fn server_cpu(&self) -> ServerCpu {
        let cpu = |pid: Option<u32>| {
            pid.and_then(ProcessSample::read)
                .map_or(0.0, |s| s.cpu_seconds)
        };
        ServerCpu {
            host_apiserver: self
                .env
                .host()
                .pids()
                .into_iter()
                .map(|p| cpu(Some(p)))
                .sum(),
            member_apiservers: self.env.members().iter().map(|m| cpu(m.pid())).sum(),
            etcd: cpu(Some(self.env.etcd_pid())),
            aggregated_apiserver: cpu(self
                .env
                .host()
                .component_pid("karmada-aggregated-apiserver")),
        }
    }

    /// The processes that may talk to the members: ours (the controller-manager and, in Pull mode,
    /// the agents) or Karmada's three.
    fn controller_pids(&self) -> anyhow::Result<Vec<u32>> {
        if self.running == Some(Impl::Karmada) {
            return Ok(self.karmada()?.pids());
        }
        let mut pids = vec![self.kcm()?.pid()];
        pids.extend(self.agents.iter().map(Kcm::pid));
        Ok(pids)
    }

    /// Each member API server's load now, by member name: the watches open on it (less those it
    /// held before anyone connected, and the [`OBSERVER_WATCHES_PER_MEMBER`] of the benchmark's
    /// own [`Observer`]) and the TCP connections the controllers hold to it.
    pub async fn member_load(&self) -> anyhow::Result<BTreeMap<String, MemberLoad>> {
        let pids = self.controller_pids()?;
        let ports: Vec<u16> = self
            .env
            .members()
            .iter()
            .map(testenv::ApiServer::port)
            .collect();
        let connections = connections_to(&pids, &ports);
        let mut out = BTreeMap::new();
        for ((name, client), port) in self.members.iter().zip(&ports) {
            let baseline = self.member_watch_baseline.get(name).copied().unwrap_or(0);
            let watches = open_watches(name, client)
                .await?
                .saturating_sub(baseline + OBSERVER_WATCHES_PER_MEMBER);
            out.insert(
                name.clone(),
                MemberLoad {
                    watches,
                    connections: connections.get(port).copied().unwrap_or(0),
                },
            );
        }
        Ok(out)
    }

    /// The controller-manager's metrics now (Karmada's: of its three processes together).
    pub fn metrics(&self) -> anyhow::Result<Vec<Sample>> {
        if self.running == Some(Impl::Karmada) {
            return self.karmada()?.metrics();
        }
        let kcm = self.kcm()?;
        // Right after a burst a debug build on a loaded machine may take longer than one
        // scrape's read timeout (5 s) to answer: it is asked again (a dead process fails each try at once).
        let text = (0..SCRAPE_ATTEMPTS)
            .find_map(|_| kcm.metrics())
            .with_context(|| {
                format!(
                    "scrape the controller-manager's /metrics ({SCRAPE_ATTEMPTS} tries); its log \
                     ends:\n{}",
                    kcm.log_tail(20)
                )
            })?;
        Ok(parse_metrics(&text))
    }

    /// The Events on the host, counted by reason (each Event's `count`, so a repeat patched into
    /// an existing Event counts too): what the recorders reported.
    pub async fn events_by_reason(&self) -> anyhow::Result<BTreeMap<String, u64>> {
        let events: Api<Event> = Api::all(self.host.clone());
        let mut out = BTreeMap::new();
        for e in events.list(&ListParams::default()).await?.items {
            let reason = e.reason.unwrap_or_default();
            let count = u64::try_from(e.count.unwrap_or(1).max(1)).unwrap_or(1);
            *out.entry(reason).or_default() += count;
        }
        Ok(out)
    }

    /// The host API server's metrics now: every replica's samples, one after another (their users
    /// sum them).
    pub async fn host_apiserver_metrics(&self) -> anyhow::Result<Vec<Sample>> {
        let mut samples = Vec::new();
        for client in self.env.host().replica_clients().await? {
            samples.extend(apiserver_metrics("the host", &client).await?);
        }
        Ok(samples)
    }

    /// Stops the controller-manager with SIGTERM (it must exit within 30 s) and starts a new one with
    /// the same flags (Karmada's: its controller-manager and scheduler). Returns when the new process
    /// is spawned.
    pub async fn restart_kcm(&mut self) -> anyhow::Result<Instant> {
        if self.running == Some(Impl::Karmada) {
            let k = self
                .karmada
                .as_mut()
                .context("this session runs no Karmada Go processes")?;
            return k.restart().await;
        }
        self.stop_kcm().await?;
        let kcm = spawn_kcm(&self.env, self.qps, &self.extra_args);
        let spawned = kcm.started;
        self.kcm = Some(kcm);
        Ok(spawned)
    }

    /// Stops our controller-manager with SIGTERM; it must exit within 30 s.
    async fn stop_kcm(&mut self) -> anyhow::Result<()> {
        let Some(mut old) = self.kcm.take() else {
            bail!("this session runs no controller-manager")
        };
        old.signal(libc::SIGTERM);
        if old.wait_exit(Duration::from_secs(30)).await.is_none() {
            bail!(
                "the controller-manager did not exit within 30 s of SIGTERM; log:\n{}",
                old.log()
            );
        }
        Ok(())
    }

    /// Waits until the controllers are ready again (after [`restart_kcm`](Self::restart_kcm)).
    pub async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        if self.running == Some(Impl::Karmada) {
            let k = self
                .karmada
                .as_mut()
                .context("this session runs no Karmada Go processes")?;
            return k.wait_ready(timeout).await;
        }
        wait_ready(self.kcm()?, timeout).await
    }

    /// The tail of the controller-manager's log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        if let (Some(Impl::Karmada), Some(k)) = (self.running, &self.karmada) {
            return k.log_tail(lines);
        }
        let log = self.kcm.as_ref().map(Kcm::log).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// A `karmada-agent` serving `member` (registering it in Pull mode) with the rate limits of `qps`,
/// talking to the host with the admin's kubeconfig.
fn spawn_agent(env: &TestEnv, member: &testenv::ApiServer, qps: Qps) -> Kcm {
    let mut args = vec![
        format!(
            "--karmada-kubeconfig={}",
            env.host().kubeconfig_path().display()
        ),
        format!("--cluster-name={}", member.name()),
        format!("--cluster-api-endpoint={}", member.url()),
        "--leader-elect=false".to_owned(),
    ];
    args.extend(qps.args().iter().map(|a| (*a).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Kcm::start_program(
        karmada_e2e::controller_manager::agent_binary(),
        member.kubeconfig_path(),
        &args,
        &[],
    )
}

fn spawn_kcm(env: &TestEnv, qps: Qps, extra_args: &[String]) -> Kcm {
    let mut args = vec!["--leader-elect=false"];
    args.extend_from_slice(qps.args());
    args.extend(extra_args.iter().map(String::as_str));
    Kcm::start(env.host().kubeconfig_path(), &args, &[])
}

async fn start_kcm(env: &TestEnv, qps: Qps, extra_args: &[String]) -> anyhow::Result<Kcm> {
    let kcm = spawn_kcm(env, qps, extra_args);
    wait_ready(&kcm, Duration::from_secs(120)).await?;
    Ok(kcm)
}

/// The metrics of the API server behind `client` (`name` says whose, in errors) now.
async fn apiserver_metrics(name: &str, client: &Client) -> anyhow::Result<Vec<Sample>> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .context("build the /metrics request")?;
    let text = client
        .request_text(request)
        .await
        .with_context(|| format!("scrape {name} API server's /metrics"))?;
    Ok(parse_metrics(&text))
}

/// The watches open on the API server behind `client` now (`apiserver_longrunning_requests`
/// with `verb="WATCH"`, summed over resources).
async fn open_watches(name: &str, client: &Client) -> anyhow::Result<u64> {
    let watches: f64 = apiserver_metrics(name, client)
        .await?
        .iter()
        .filter(|s| {
            s.name == "apiserver_longrunning_requests"
                && s.labels.get("verb").map(String::as_str) == Some("WATCH")
        })
        .map(|s| s.value)
        .sum();
    Ok(watches as u64)
}

/// Waits until namespace `ns` exists in `member` (through `client`); an error after `timeout`.
pub async fn wait_namespace(
    client: &Client,
    member: &str,
    ns: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let deadline = Instant::now() + timeout;
    while api.get_opt(ns).await?.is_none() {
        if Instant::now() > deadline {
            bail!("namespace {ns} did not reach {member} within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}
