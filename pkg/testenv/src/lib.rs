//! `testenv`: real Kubernetes control planes on this machine, for tests and for `make local-up`.
//!
//! One etcd serves a host API server and N member API servers (each under its own etcd prefix, with its
//! own CA, serving certificate, admin identity and service-account signing keys, so TokenRequest works).
//! Optionally kube-controller-manager runs beside an API server (garbage collector, namespace and
//! service-account controllers), and a *full* member adds kube-scheduler and kwok with fake nodes, so a
//! Deployment there really gets Running, Ready pods. Optionally a full member also runs metrics-server,
//! scraping kwok's emulated kubelet resource metrics, behind the `metrics.k8s.io` APIService.
//! Optionally the host serves `cluster.karmada.io` through Karmada's own `karmada-aggregated-apiserver`
//! behind the `v1alpha1.cluster.karmada.io` APIService, instead of the Cluster CRD, as Karmada's
//! installers set a control plane up.
//!
//! Every process is started from the official binaries built by `hack/build-test-binaries.sh` (or found
//! in `$KUBEBUILDER_ASSETS`) and can never outlive the process that started it; see [`process`].
//! Tests share one environment per test binary through [`shared`], because an API server takes seconds
//! to start: use unique namespaces and names per test.

pub mod audit;
mod balancer;
pub mod binaries;
mod cluster;
mod crds;
mod error;
mod kubeconfig;
pub mod pki;
pub mod process;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use cluster::{ApiServer, CLUSTER_API_SERVICE};
pub use crds::{
    CLUSTER_CRD, install_crd_objects, install_crds, install_crds_except, install_crds_from,
    workspace_crds_dir,
};
pub use error::Error;

use process::ManagedProcess;

/// API servers started at once. Each spends a few CPU-seconds starting and they share one etcd:
/// fifty-one started together on 2 cores kept the host from being ready within 90 s, so larger
/// environments start in waves, each ready before the next (smaller ones start as before).
const START_WAVE: usize = 8;

/// kube-controller-manager's controllers on the host: Karmada's list for its control plane (no workload
/// controllers, so nothing but karmada-rs writes a template's status), plus `serviceaccount` so every
/// namespace gets its `default` ServiceAccount as in a real cluster.
pub const HOST_CONTROLLERS: &str = "namespace,garbagecollector,serviceaccount-token,serviceaccount,\
ttl-after-finished,bootstrapsigner,tokencleaner,csrcleaner,csrsigning,clusterrole-aggregation";

/// kube-controller-manager's controllers in a full member: all of them, as in a real cluster.
pub const MEMBER_CONTROLLERS: &str = "*";

/// What to start. Members are named `member1`, `member2`, …; the first `full_members` of them are full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvOptions {
    /// Number of member API servers.
    pub members: usize,
    /// How many of the members (the first ones) also run kube-controller-manager, kube-scheduler and kwok.
    pub full_members: usize,
    /// Fake (kwok) nodes per full member.
    pub kwok_nodes: usize,
    /// Run kube-controller-manager beside the host API server (namespace deletion, garbage collection).
    pub host_controller_manager: bool,
    /// Install the project's CRDs (`crds/`) into the host and wait until they are established.
    pub install_crds: bool,
    /// The host API server writes an audit log of every write ([`audit::WRITE_POLICY`]); read it with
    /// [`ApiServer::audit_events`].
    pub host_audit_log: bool,
    /// Every member API server writes an audit log of every request, reads included
    /// ([`audit::ALL_REQUESTS_POLICY`]), to show who contacted a member at all.
    pub member_audit_logs: bool,
    /// Full members also run metrics-server, registered as the `metrics.k8s.io` APIService: kwok emulates
    /// each pod's usage from its `kwok.x-k8s.io/usage-cpu` / `usage-memory` annotations and serves it as
    /// the kubelet's resource metrics, which metrics-server scrapes every 10 s.
    pub metrics_server: bool,
    /// The host serves `cluster.karmada.io/v1alpha1` (Clusters, their `status` and `proxy`) through
    /// Karmada's `karmada-aggregated-apiserver` (built by `make karmada-binaries`), registered as the
    /// `v1alpha1.cluster.karmada.io` APIService, as in a control plane Karmada's own tools installed:
    /// the host becomes an aggregator (front-proxy client certificate, request-header CA), the
    /// aggregated server keeps Clusters under its own prefix of the shared etcd, and
    /// [`Self::install_crds`] leaves the Cluster CRD out.
    pub aggregated_apiserver: bool,
    /// kwok Stage configs (YAML documents) every full member's kwok applies beside kwok's own
    /// (`kwok-stages`), e.g. a stage that keeps some pods from becoming Ready.
    pub kwok_extra_stages: Vec<String>,
    /// Where to keep data, certificates, kubeconfigs and logs; a fresh temporary folder when `None`.
    pub dir: Option<PathBuf>,
    /// How many kube-apiservers serve the host over its etcd prefix (0 or 1: one; more behind a
    /// loopback TCP balancer on the host's port, as an HA control plane sits behind one
    /// load-balanced endpoint); not with [`Self::host_audit_log`].
    pub host_replicas: usize,
    /// The host's kube-apiservers serve Go's CPU and heap profiles on `/debug/pprof/` (to users
    /// allowed that non-resource URL), to see where its CPU goes under a benchmark's load.
    pub host_profiling: bool,
}

impl Default for EnvOptions {
    fn default() -> Self {
        EnvOptions {
            members: 0,
            full_members: 0,
            kwok_nodes: 3,
            host_controller_manager: true,
            install_crds: false,
            host_audit_log: false,
            member_audit_logs: false,
            metrics_server: false,
            aggregated_apiserver: false,
            kwok_extra_stages: Vec::new(),
            dir: None,
            host_replicas: 1,
            host_profiling: false,
        }
    }
}

/// A running host plus member clusters. Dropping it stops every process it started.
#[derive(Debug)]
pub struct TestEnv {
    options: EnvOptions,
    dir: PathBuf,
    host: ApiServer,
    members: Vec<ApiServer>,
    // Declared last so API servers stop before their storage.
    etcd: ManagedProcess,
    remove_dir_on_drop: bool,
}

impl TestEnv {
    /// Starts etcd, the API servers and the requested components, and waits until all are ready.
    #[allow(
        clippy::too_many_lines,
        reason = "the start-up sequence reads in order: binaries, etcd, API servers, members, components, waits"
    )]
    pub async fn start(options: EnvOptions) -> Result<TestEnv, Error> {
        if options.full_members > options.members {
            return Err(Error::Config(format!(
                "full_members ({}) cannot exceed members ({})",
                options.full_members, options.members
            )));
        }
        let started = Instant::now();
        let (dir, remove_dir_on_drop) = match &options.dir {
            Some(d) => (d.clone(), false),
            None => (fresh_dir()?, true),
        };
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let pid_file = dir.join("pids");

        // Find every binary first, so a missing one fails before anything starts.
        let needs_kcm = options.host_controller_manager || options.full_members > 0;
        let mut names = vec!["etcd", "kube-apiserver"];
        if needs_kcm {
            names.push("kube-controller-manager");
        }
        let metrics_server = options.metrics_server && options.full_members > 0;
        if options.full_members > 0 {
            names.extend(["kube-scheduler", "kwok"]);
        }
        if metrics_server {
            names.push("metrics-server");
        }
        for name in names {
            binaries::locate(name)?;
        }
        if options.aggregated_apiserver {
            binaries::locate_karmada(cluster::AGGREGATED_APISERVER)?;
        }
        if options.full_members > 0 {
            binaries::kwok_stages()?;
        }
        if metrics_server {
            binaries::kwok_metrics()?;
        }

        let etcd_port = process::free_port()?;
        let etcd = start_etcd(&dir, etcd_port, &pid_file)?;
        wait_tcp("etcd", etcd_port, Duration::from_secs(30)).await?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");

        let mut servers = Vec::new();
        servers.push(ApiServer::prepare("host", &dir, &etcd_url, &pid_file)?);
        if options.host_audit_log {
            servers[0].enable_audit_log()?;
        }
        if options.aggregated_apiserver {
            servers[0].enable_front_proxy()?;
        }
        if options.host_profiling {
            servers[0].enable_profiling();
        }
        servers[0].replicate(options.host_replicas)?;
        for i in 1..=options.members {
            let mut member = ApiServer::prepare(&format!("member{i}"), &dir, &etcd_url, &pid_file)?;
            if options.member_audit_logs {
                member.enable_audit_log_of(audit::ALL_REQUESTS_POLICY)?;
            }
            if metrics_server && i <= options.full_members {
                member.enable_front_proxy()?;
            }
            servers.push(member);
        }
        for wave in servers.chunks(START_WAVE) {
            for s in wave {
                s.spawn()?;
            }
            futures::future::try_join_all(
                wave.iter().map(|s| s.wait_ready(Duration::from_secs(90))),
            )
            .await?;
        }

        let mut members = servers.split_off(1);
        let host = servers.remove(0);
        if options.host_controller_manager {
            host.start_controller_manager(HOST_CONTROLLERS)?;
        }
        for m in members.iter_mut().take(options.full_members) {
            m.start_controller_manager(MEMBER_CONTROLLERS)?;
            m.start_scheduler()?;
            m.start_kwok(metrics_server, &options.kwok_extra_stages)?;
        }
        let mut waits = Vec::new();
        if options.host_controller_manager {
            waits.push(host.wait_controller_manager(Duration::from_secs(60)));
        }
        for m in members.iter().take(options.full_members) {
            waits.push(m.wait_controller_manager(Duration::from_secs(60)));
        }
        futures::future::try_join_all(waits).await?;
        futures::future::try_join_all(
            members
                .iter()
                .take(options.full_members)
                .map(|m| m.add_kwok_nodes(options.kwok_nodes, Duration::from_secs(60))),
        )
        .await?;
        if metrics_server {
            for m in members.iter().take(options.full_members) {
                m.start_metrics_server()?;
            }
            futures::future::try_join_all(
                members
                    .iter()
                    .take(options.full_members)
                    .map(|m| m.register_metrics_api(Duration::from_secs(60))),
            )
            .await?;
        }
        if options.aggregated_apiserver {
            host.start_aggregated_apiserver(&etcd_url)?;
            host.register_cluster_api(Duration::from_secs(90)).await?;
        }
        if options.install_crds {
            let client = host.try_client().await?;
            if options.aggregated_apiserver {
                install_crds_except(&client, &[CLUSTER_CRD]).await?;
            } else {
                install_crds(&client).await?;
            }
        }
        kubeconfig::write_combined(
            &dir.join("kubeconfig"),
            std::iter::once(&host).chain(members.iter()),
        )?;
        tracing::info!(
            dir = %dir.display(),
            members = options.members,
            full_members = options.full_members,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "test environment ready"
        );
        Ok(TestEnv {
            options,
            dir,
            host,
            members,
            etcd,
            remove_dir_on_drop,
        })
    }

    /// The host (Karmada control plane) API server.
    pub fn host(&self) -> &ApiServer {
        &self.host
    }

    /// The member API servers, `member1` first.
    pub fn members(&self) -> &[ApiServer] {
        &self.members
    }

    /// The member named `name`, if any.
    pub fn member(&self, name: &str) -> Option<&ApiServer> {
        self.members.iter().find(|m| m.name() == name)
    }

    /// The options it was started with.
    pub fn options(&self) -> &EnvOptions {
        &self.options
    }

    /// Its folder: data, certificates, logs, per-cluster kubeconfigs, and `kubeconfig` with every context.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A kubeconfig with one context per cluster (`host`, `member1`, …), current context `host`.
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// The file listing the pid and name of every process this environment started.
    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("pids")
    }

    /// Pid of the shared etcd.
    pub fn etcd_pid(&self) -> u32 {
        self.etcd.pid()
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        // Components and API servers stop in their own Drop; etcd after them (field order).
        self.host.stop_all();
        for m in &self.members {
            m.stop_all();
        }
        self.etcd.stop(Duration::from_secs(5));
        if self.remove_dir_on_drop {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The environment shared by all tests of one test process, started on first use with `options`.
///
/// Panics (failing the test) with what is missing and the command that fixes it when the environment
/// cannot start; every test of the process then fails the same way. All tests of a process must pass
/// the same options: a test binary made of modules that each want their own environment (karmada-e2e's
/// `integration`) runs one module per process, as `make test` does. Its processes are killed by the
/// kernel when the test process exits.
pub fn shared(options: EnvOptions) -> &'static TestEnv {
    static SHARED: OnceLock<Result<TestEnv, String>> = OnceLock::new();
    let result = SHARED.get_or_init(|| {
        let opts = options.clone();
        // Started on its own thread and runtime: the caller is usually inside a test's runtime.
        let started = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot build a tokio runtime: {e}"))?;
            rt.block_on(TestEnv::start(opts)).map_err(|e| e.to_string())
        })
        .join();
        match started {
            Ok(r) => r.map(|mut env| {
                // A shared environment lives until the process exits; keep its folder for the logs.
                env.remove_dir_on_drop = false;
                env
            }),
            Err(_) => Err("the thread starting the environment panicked".to_string()),
        }
    });
    match result {
        Ok(env) => {
            assert_eq!(
                env.options, options,
                "testenv::shared: all tests in one process must ask for the same environment; run one \
                 module of a binary made of modules at a time (`cargo test --test integration drift::`), \
                 or all of them with `make test`"
            );
            env
        }
        Err(msg) => panic!("testenv: cannot start the test environment: {msg}"),
    }
}

fn fresh_dir() -> Result<PathBuf, Error> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let base = std::env::temp_dir().join("karmada-rs-testenv");
    std::fs::create_dir_all(&base).map_err(|e| Error::io(&base, e))?;
    // Remove what earlier runs left behind (their processes died with them; the folders did not).
    if let Ok(entries) = std::fs::read_dir(&base) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let pid = name.split('-').next().and_then(|p| p.parse::<u32>().ok());
            if let Some(pid) = pid
                && pid != std::process::id()
                && !process::pid_alive(pid)
            {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    let dir = base.join(format!(
        "{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    Ok(dir)
}

fn start_etcd(dir: &Path, port: u16, pid_file: &Path) -> Result<ManagedProcess, Error> {
    let peer = process::free_port()?;
    let data = dir.join("etcd");
    let args = vec![
        "--name=testenv".to_string(),
        format!("--data-dir={}", data.display()),
        format!("--listen-client-urls=http://127.0.0.1:{port}"),
        format!("--advertise-client-urls=http://127.0.0.1:{port}"),
        format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
        format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
        format!("--initial-cluster=testenv=http://127.0.0.1:{peer}"),
        // Test data is disposable: skip fsync, which dominates etcd latency on shared disks.
        "--unsafe-no-fsync=true".to_string(),
        "--quota-backend-bytes=8589934592".to_string(),
        "--log-level=warn".to_string(),
    ];
    ManagedProcess::spawn(
        "etcd",
        &binaries::locate("etcd")?,
        &args,
        &dir.join("etcd.log"),
        pid_file,
    )
}

async fn wait_tcp(what: &str, port: u16, timeout: Duration) -> Result<(), Error> {
    let deadline = Instant::now() + timeout;
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::Timeout(format!(
                "{what} did not listen on 127.0.0.1:{port}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
