//! One API server (host or member) and the components that may run beside it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, ServiceAccount};
use kube::Client;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::Error;
use crate::balancer::Balancer;
use crate::binaries;
use crate::kubeconfig;
use crate::pki::ClusterPki;
use crate::process::{self, ManagedProcess};

/// A kube-apiserver on a loopback port, with its own PKI and admin kubeconfig.
#[derive(Debug)]
pub struct ApiServer {
    name: String,
    dir: PathBuf,
    port: u16,
    url: String,
    pki: ClusterPki,
    args: Vec<String>,
    pid_file: PathBuf,
    kubeconfig: Kubeconfig,
    kubeconfig_path: PathBuf,
    audit_log: Option<PathBuf>,
    /// Where its kube-apiserver replicas listen: `[port]`, or one port each behind `balancer`.
    replica_ports: Vec<u16>,
    processes: Mutex<Vec<ManagedProcess>>,
    balancer: Mutex<Option<Balancer>>,
    components: Mutex<Vec<ManagedProcess>>,
    metrics_server_port: Mutex<Option<u16>>,
    aggregated_apiserver_port: Mutex<Option<u16>>,
}

/// The front-proxy client's name: the identity an aggregating API server proxies with.
const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

/// Karmada's aggregated API server: its binary, log and Service name.
pub(crate) const AGGREGATED_APISERVER: &str = "karmada-aggregated-apiserver";

/// The APIService that makes the host serve `cluster.karmada.io/v1alpha1` through it.
pub const CLUSTER_API_SERVICE: &str = "v1alpha1.cluster.karmada.io";

/// An extension API server behind an APIService: an ExternalName Service `localhost` on its port, so
/// the aggregator proxies to the loopback port, with this cluster's CA as the CA bundle.
struct Extension<'a> {
    api_service: &'a str,
    group: &'a str,
    version: &'a str,
    namespace: &'a str,
    service: &'a str,
    port: u16,
    group_priority_minimum: i32,
    version_priority: i32,
    /// The extension server's log, quoted when it does not become Available.
    log: PathBuf,
}

impl ApiServer {
    /// Creates its folder, PKI and kubeconfig; does not start it.
    pub(crate) fn prepare(
        name: &str,
        env_dir: &Path,
        etcd_url: &str,
        pid_file: &Path,
    ) -> Result<Self, Error> {
        let dir = env_dir.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let pki = ClusterPki::generate(name, &dir)?;
        let port = process::free_port()?;
        let url = format!("https://127.0.0.1:{port}");
        let args = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--etcd-prefix=/{name}"),
            "--bind-address=127.0.0.1".to_string(),
            "--advertise-address=127.0.0.1".to_string(),
            format!("--cert-dir={}", dir.join("certs").display()),
            format!("--tls-cert-file={}", pki.serving_cert.display()),
            format!("--tls-private-key-file={}", pki.serving_key.display()),
            format!("--client-ca-file={}", pki.ca_cert.display()),
            format!("--service-account-key-file={}", pki.sa_public_key.display()),
            format!(
                "--service-account-signing-key-file={}",
                pki.sa_private_key.display()
            ),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_string(),
            "--authorization-mode=RBAC".to_string(),
            // Bootstrap tokens authenticate (Pull-mode registration's TLS bootstrap, as in Karmada).
            "--enable-bootstrap-token-auth=true".to_string(),
            "--service-cluster-ip-range=10.96.0.0/16".to_string(),
            "--allow-privileged=true".to_string(),
            "--profiling=false".to_string(),
            // Loopback test servers: no need to announce endpoints or hold per-server leases.
            "--endpoint-reconciler-type=none".to_string(),
            "--v=1".to_string(),
        ];
        let mut server = ApiServer {
            name: name.to_string(),
            dir: dir.clone(),
            port,
            url,
            pki,
            args,
            pid_file: pid_file.to_path_buf(),
            kubeconfig: Kubeconfig::default(),
            kubeconfig_path: dir.join("kubeconfig"),
            audit_log: None,
            replica_ports: vec![port],
            processes: Mutex::new(Vec::new()),
            balancer: Mutex::new(None),
            components: Mutex::new(Vec::new()),
            metrics_server_port: Mutex::new(None),
            aggregated_apiserver_port: Mutex::new(None),
        };
        server.kubeconfig = kubeconfig::for_server(&server)?;
        kubeconfig::write(&server.kubeconfig_path, &server.kubeconfig)?;
        Ok(server)
    }

    /// Makes it `replicas` kube-apiservers over the same etcd prefix (before it is started), each on a
    /// port of its own behind a balancer on [`Self::port`], as an HA control plane sits behind one
    /// load-balanced endpoint. They share certificates and service-account keys.
    pub(crate) fn replicate(&mut self, replicas: usize) -> Result<(), Error> {
        if replicas > 1 && self.audit_log.is_some() {
            return Err(Error::Config(format!(
                "{}: an audit log is written by one kube-apiserver; it cannot be replicated",
                self.name
            )));
        }
        self.replica_ports = if replicas > 1 {
            (0..replicas)
                .map(|_| process::free_port())
                .collect::<Result<_, _>>()?
        } else {
            vec![self.port]
        };
        Ok(())
    }

    /// Makes it serve Go's profiles on `/debug/pprof/` (before it is started).
    pub(crate) fn enable_profiling(&mut self) {
        for arg in &mut self.args {
            if arg.starts_with("--profiling=") {
                *arg = "--profiling=true".to_string();
            }
        }
    }

    /// Makes it write an audit log of every write (before it is started).
    pub(crate) fn enable_audit_log(&mut self) -> Result<(), Error> {
        self.enable_audit_log_of(crate::audit::WRITE_POLICY)
    }

    /// Makes it write an audit log under `policy` (before it is started).
    pub(crate) fn enable_audit_log_of(&mut self, policy: &str) -> Result<(), Error> {
        let (flags, log) = crate::audit::flags(&self.dir, policy)?;
        self.args.extend(flags);
        self.audit_log = Some(log);
        Ok(())
    }

    /// Makes it an aggregating API server (before it is started): it proxies to extension API servers
    /// (metrics-server) with a front-proxy client certificate, which they authenticate through the
    /// request-header CA (the cluster CA here) that it publishes in `kube-system/extension-apiserver-authentication`.
    pub(crate) fn enable_front_proxy(&mut self) -> Result<(), Error> {
        let (cert, key) = self.pki.issue_client(FRONT_PROXY_CLIENT, &[], &self.dir)?;
        self.args.extend([
            format!(
                "--requestheader-client-ca-file={}",
                self.pki.ca_cert.display()
            ),
            format!("--requestheader-allowed-names={FRONT_PROXY_CLIENT}"),
            "--requestheader-username-headers=X-Remote-User".to_string(),
            "--requestheader-group-headers=X-Remote-Group".to_string(),
            "--requestheader-extra-headers-prefix=X-Remote-Extra-".to_string(),
            format!("--proxy-client-cert-file={}", cert.display()),
            format!("--proxy-client-key-file={}", key.display()),
        ]);
        Ok(())
    }

    /// Its audit log, when the environment asked for one ([`crate::EnvOptions::host_audit_log`]).
    pub fn audit_log_path(&self) -> Option<&Path> {
        self.audit_log.as_deref()
    }

    /// Every write recorded in its audit log so far (across restarts).
    pub fn audit_events(&self) -> Result<Vec<crate::audit::AuditEvent>, Error> {
        match &self.audit_log {
            Some(path) => crate::audit::read_events(path),
            None => Err(Error::Config(format!(
                "{}: no audit log (start the environment with host_audit_log)",
                self.name
            ))),
        }
    }

    /// Its name: `host`, `member1`, ….
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The loopback port it serves on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its certificates and keys.
    pub fn pki(&self) -> &ClusterPki {
        &self.pki
    }

    /// Its CA certificate (PEM), e.g. for a Cluster secret's `caBundle`.
    pub fn ca_pem(&self) -> Result<Vec<u8>, Error> {
        std::fs::read(&self.pki.ca_cert).map_err(|e| Error::io(&self.pki.ca_cert, e))
    }

    /// Its admin kubeconfig file (context named after the server).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// Its admin kubeconfig.
    pub fn kubeconfig(&self) -> &Kubeconfig {
        &self.kubeconfig
    }

    /// Writes a kubeconfig whose user is `user` in group `system:masters` (a client certificate of its
    /// own, so the API server's audit log tells it apart from the admin) and returns its path.
    pub fn user_kubeconfig(&self, user: &str) -> Result<PathBuf, Error> {
        self.user_kubeconfig_in(user, &["system:masters"])
    }

    /// Like [`Self::user_kubeconfig`], with `groups` as the user's groups instead: with no
    /// `system:masters` among them, the user has only what RBAC grants it (to test a role).
    pub fn user_kubeconfig_in(&self, user: &str, groups: &[&str]) -> Result<PathBuf, Error> {
        let (cert, key) = self.pki.issue_client(user, groups, &self.dir)?;
        let path = self.dir.join(format!("kubeconfig-{user}"));
        kubeconfig::write(&path, &kubeconfig::for_client_cert(self, &cert, &key)?)?;
        Ok(path)
    }

    /// Its folder (logs, certificates).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The kube-apiserver log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("kube-apiserver.log")
    }

    /// A client configuration with the admin identity.
    pub async fn kube_config(&self) -> Result<kube::Config, Error> {
        kube::Config::from_custom_kubeconfig(self.kubeconfig.clone(), &KubeConfigOptions::default())
            .await
            .map_err(|e| Error::Kubeconfig(format!("{}: {e}", self.name)))
    }

    /// An admin client, or an error naming the server.
    pub async fn try_client(&self) -> Result<Client, Error> {
        let config = self.kube_config().await?;
        Client::try_from(config).map_err(|e| Error::kube(format!("client for {}", self.name), e))
    }

    /// An admin client. Panics with the cause if one cannot be built from the kubeconfig this
    /// environment wrote (a broken environment, which should fail the test).
    pub async fn client(&self) -> Client {
        match self.try_client().await {
            Ok(c) => c,
            Err(e) => panic!("testenv: {e}"),
        }
    }

    /// Pid of its (first) kube-apiserver, if running.
    pub fn pid(&self) -> Option<u32> {
        self.pids().first().copied()
    }

    /// Pids of its running kube-apiserver replicas (one unless the environment replicated it:
    /// [`crate::EnvOptions::host_replicas`]).
    pub fn pids(&self) -> Vec<u32> {
        self.processes
            .lock()
            .map(|p| p.iter().map(ManagedProcess::pid).collect())
            .unwrap_or_default()
    }

    /// An admin client of each replica directly, bypassing the balancer (e.g. to sum their metrics);
    /// the one client of [`Self::try_client`] when it is not replicated.
    pub async fn replica_clients(&self) -> Result<Vec<Client>, Error> {
        let mut clients = Vec::new();
        for port in &self.replica_ports {
            let mut config = self.kube_config().await?;
            config.cluster_url = format!("https://127.0.0.1:{port}")
                .parse()
                .map_err(|e| Error::Kubeconfig(format!("{}: replica url: {e}", self.name)))?;
            clients.push(
                Client::try_from(config)
                    .map_err(|e| Error::kube(format!("client for {}", self.name), e))?,
            );
        }
        Ok(clients)
    }

    /// The log of replica `index` (the first one's is [`Self::log_path`]).
    fn replica_log_path(&self, index: usize) -> PathBuf {
        if index == 0 {
            self.log_path()
        } else {
            self.dir.join(format!("kube-apiserver-{}.log", index + 1))
        }
    }

    pub(crate) fn spawn(&self) -> Result<(), Error> {
        let mut guard = self
            .processes
            .lock()
            .map_err(|_| Error::Process(format!("{}: lock poisoned", self.name)))?;
        guard.retain_mut(ManagedProcess::is_running);
        if guard.len() == self.replica_ports.len() {
            return Ok(());
        }
        for p in guard.iter_mut() {
            p.stop(Duration::from_secs(10));
        }
        guard.clear();
        let program = binaries::locate("kube-apiserver")?;
        for (i, port) in self.replica_ports.iter().enumerate() {
            let mut args = self.args.clone();
            args.push(format!("--secure-port={port}"));
            let label = if i == 0 {
                format!("{}/kube-apiserver", self.name)
            } else {
                format!("{}/kube-apiserver-{}", self.name, i + 1)
            };
            guard.push(ManagedProcess::spawn(
                &label,
                &program,
                &args,
                &self.replica_log_path(i),
                &self.pid_file,
            )?);
        }
        drop(guard);
        if self.replica_ports.len() > 1 {
            let mut balancer = self
                .balancer
                .lock()
                .map_err(|_| Error::Process(format!("{}: lock poisoned", self.name)))?;
            if balancer.is_none() {
                *balancer = Some(Balancer::start(
                    &self.name,
                    self.port,
                    self.replica_ports.clone(),
                )?);
            }
        }
        Ok(())
    }

    fn check_running(&self) -> Result<(), Error> {
        let mut guard = self
            .processes
            .lock()
            .map_err(|_| Error::Process(format!("{}: lock poisoned", self.name)))?;
        if guard.is_empty() {
            return Err(Error::Process(format!(
                "{}: kube-apiserver is stopped",
                self.name
            )));
        }
        guard.iter_mut().try_for_each(ManagedProcess::check_running)
    }

    /// Waits until every replica's `/readyz` answers 200 and the `default` namespace exists.
    pub(crate) async fn wait_ready(&self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        for (i, client) in self.replica_clients().await?.into_iter().enumerate() {
            loop {
                self.check_running()?;
                let req = http::Request::get("/readyz")
                    .body(Vec::new())
                    .map_err(|e| Error::Process(e.to_string()))?;
                let ready = client
                    .request_text(req)
                    .await
                    .is_ok_and(|body| body.trim() == "ok");
                // The default namespace appears shortly after readyz; tests create objects in it.
                let namespaces: Api<Namespace> = Api::all(client.clone());
                if ready && namespaces.get_opt("default").await.ok().flatten().is_some() {
                    break;
                }
                if Instant::now() > deadline {
                    let log = self.replica_log_path(i);
                    return Err(Error::Timeout(format!(
                        "{} kube-apiserver not ready within {timeout:?}; last lines of {}:\n{}",
                        self.name,
                        log.display(),
                        process::log_tail(&log)
                    )));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }

    /// Takes its running kube-apiservers out of its care.
    fn take_processes(&self) -> Vec<ManagedProcess> {
        self.processes
            .lock()
            .map(|mut g| std::mem::take(&mut *g))
            .unwrap_or_default()
    }

    /// Signals each of its running kube-apiservers.
    fn signal_all(&self, signal: i32) {
        if let Ok(mut g) = self.processes.lock() {
            for p in g.iter_mut() {
                p.signal(signal);
            }
        }
    }

    /// Stops its kube-apiserver (SIGTERM, then SIGKILL), e.g. to test recovery. Components keep running.
    pub fn stop(&self) {
        for mut p in self.take_processes() {
            p.stop(Duration::from_secs(10));
        }
    }

    /// Kills its kube-apiserver with SIGKILL, as a crash would.
    pub fn kill(&self) {
        for mut p in self.take_processes() {
            p.kill();
        }
    }

    /// Freezes its kube-apiserver with SIGSTOP: the kernel still accepts connections on its port,
    /// but nothing is answered, as with a hung or overloaded server. [`ApiServer::resume`] (or a
    /// stop) continues it.
    pub fn pause(&self) {
        self.signal_all(libc::SIGSTOP);
    }

    /// Continues a paused kube-apiserver (SIGCONT).
    pub fn resume(&self) {
        self.signal_all(libc::SIGCONT);
    }

    /// Starts its kube-apiserver again on the same port and waits until it is ready.
    pub async fn start(&self) -> Result<(), Error> {
        self.spawn()?;
        self.wait_ready(Duration::from_secs(90)).await
    }

    /// Stops its components, then the API server.
    pub(crate) fn stop_all(&self) {
        if let Ok(mut comps) = self.components.lock() {
            for c in comps.iter_mut() {
                c.stop(Duration::from_secs(5));
            }
            comps.clear();
        }
        self.stop();
    }

    fn start_component(&self, binary: &str, args: Vec<String>) -> Result<(), Error> {
        self.start_component_from(binary, &binaries::locate(binary)?, args)
    }

    /// Like [`Self::start_component`], with the executable at `program`.
    fn start_component_from(
        &self,
        binary: &str,
        program: &Path,
        args: Vec<String>,
    ) -> Result<(), Error> {
        let proc = ManagedProcess::spawn(
            &format!("{}/{binary}", self.name),
            program,
            &args,
            &self.dir.join(format!("{binary}.log")),
            &self.pid_file,
        )?;
        self.components
            .lock()
            .map_err(|_| Error::Process(format!("{}: lock poisoned", self.name)))?
            .push(proc);
        Ok(())
    }

    /// Pids of the components running beside it (kube-controller-manager, kube-scheduler, kwok).
    pub fn component_pids(&self) -> Vec<u32> {
        self.components
            .lock()
            .map(|c| c.iter().map(ManagedProcess::pid).collect())
            .unwrap_or_default()
    }

    /// Pid of the component `binary` running beside it (e.g. `karmada-aggregated-apiserver`), if any.
    pub fn component_pid(&self, binary: &str) -> Option<u32> {
        let suffix = format!("/{binary}");
        self.components.lock().ok().and_then(|c| {
            c.iter()
                .find(|p| p.name().ends_with(&suffix))
                .map(ManagedProcess::pid)
        })
    }

    /// Runs kube-controller-manager against it with `controllers` (its `--controllers` value).
    pub(crate) fn start_controller_manager(&self, controllers: &str) -> Result<(), Error> {
        let mut args = self.component_args()?;
        args.extend([
            format!("--controllers={controllers}"),
            format!("--cluster-name={}", self.name),
            format!("--root-ca-file={}", self.pki.ca_cert.display()),
            format!(
                "--service-account-private-key-file={}",
                self.pki.sa_private_key.display()
            ),
            format!("--cluster-signing-cert-file={}", self.pki.ca_cert.display()),
            format!("--cluster-signing-key-file={}", self.pki.ca_key.display()),
            "--use-service-account-credentials=false".to_string(),
            "--kube-api-qps=200".to_string(),
            "--kube-api-burst=400".to_string(),
            "--v=1".to_string(),
        ]);
        self.start_component("kube-controller-manager", args)
    }

    /// The flags kube-controller-manager and kube-scheduler share: this cluster's kubeconfig for
    /// everything, a free loopback port, no leader election.
    fn component_args(&self) -> Result<Vec<String>, Error> {
        let kc = self.kubeconfig_path.display().to_string();
        Ok(vec![
            format!("--kubeconfig={kc}"),
            format!("--authentication-kubeconfig={kc}"),
            format!("--authorization-kubeconfig={kc}"),
            "--bind-address=127.0.0.1".to_string(),
            format!("--secure-port={}", process::free_port()?),
            "--leader-elect=false".to_string(),
        ])
    }

    /// Waits until kube-controller-manager has created the `default` ServiceAccount (it is working).
    pub(crate) async fn wait_controller_manager(&self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        let client = self.try_client().await?;
        let sas: Api<ServiceAccount> = Api::namespaced(client, "default");
        loop {
            if sas.get_opt("default").await.ok().flatten().is_some() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let log = self.dir.join("kube-controller-manager.log");
                return Err(Error::Timeout(format!(
                    "{}: kube-controller-manager did not create the default ServiceAccount within \
                     {timeout:?}; last lines of {}:\n{}",
                    self.name,
                    log.display(),
                    process::log_tail(&log)
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Runs kube-scheduler against it.
    pub(crate) fn start_scheduler(&self) -> Result<(), Error> {
        let mut args = self.component_args()?;
        args.push("--v=1".to_string());
        self.start_component("kube-scheduler", args)
    }

    /// Runs kwok against it, managing the nodes annotated `kwok.x-k8s.io/node=fake`. With `metrics`, kwok
    /// also emulates resource usage and serves it as each node's kubelet `/metrics/resource`, and the nodes
    /// point at it (InternalIP 127.0.0.1, kubelet port = kwok's), so metrics-server can scrape them.
    /// `extra_stages` (Stage YAML) are written beside this cluster's files and applied too.
    pub(crate) fn start_kwok(&self, metrics: bool, extra_stages: &[String]) -> Result<(), Error> {
        let port = process::free_port()?;
        let mut args = vec![
            format!("--kubeconfig={}", self.kubeconfig_path.display()),
            "--manage-all-nodes=false".to_string(),
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake".to_string(),
            "--cidr=10.244.0.0/16".to_string(),
            format!("--server-address=127.0.0.1:{port}"),
            // Renew each node's Lease (the node-heartbeat-with-lease stage needs it): without it the
            // member's node lifecycle controller marks the node unhealthy after its grace period, and
            // every pod on it unready.
            "--node-lease-duration-seconds=40".to_string(),
        ];
        let mut configs = binaries::kwok_stages()?;
        if metrics {
            args.push("--node-ip=127.0.0.1".to_string());
            args.push(format!("--node-port={port}"));
            configs.extend(binaries::kwok_metrics()?);
        } else {
            args.push("--node-ip=10.0.0.1".to_string());
        }
        for (i, stage) in extra_stages.iter().enumerate() {
            let path = self.dir.join(format!("kwok-extra-stage-{i}.yaml"));
            std::fs::write(&path, stage).map_err(|e| Error::io(&path, e))?;
            configs.push(path);
        }
        for config in configs {
            args.push(format!("--config={}", config.display()));
        }
        self.start_component("kwok", args)
    }

    /// Runs metrics-server against it on a loopback port, scraping the kwok nodes' kubelet endpoint every
    /// 10 s (its minimum), with a serving certificate from this cluster's CA.
    pub(crate) fn start_metrics_server(&self) -> Result<(), Error> {
        let port = process::free_port()?;
        let (cert, key) = self.pki.issue_serving(
            "metrics-server",
            &["localhost", "127.0.0.1", "metrics-server.kube-system.svc"],
            &self.dir,
        )?;
        let kc = self.kubeconfig_path.display().to_string();
        let args = vec![
            format!("--kubeconfig={kc}"),
            format!("--authentication-kubeconfig={kc}"),
            format!("--authorization-kubeconfig={kc}"),
            "--bind-address=127.0.0.1".to_string(),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", cert.display()),
            format!("--tls-private-key-file={}", key.display()),
            // kwok's kubelet endpoint serves a self-signed test certificate.
            "--kubelet-insecure-tls".to_string(),
            "--kubelet-preferred-address-types=InternalIP".to_string(),
            "--kubelet-use-node-status-port".to_string(),
            "--kubelet-request-timeout=5s".to_string(),
            "--metric-resolution=10s".to_string(),
            "--v=1".to_string(),
        ];
        self.start_component("metrics-server", args)?;
        *self
            .metrics_server_port
            .lock()
            .map_err(|_| Error::Process(format!("{}: lock poisoned", self.name)))? = Some(port);
        Ok(())
    }

    /// Registers the `v1beta1.metrics.k8s.io` APIService and waits until the API server reports it
    /// Available.
    pub(crate) async fn register_metrics_api(&self, timeout: Duration) -> Result<(), Error> {
        let port = self
            .metrics_server_port
            .lock()
            .map_err(|_| Error::Process(format!("{}: lock poisoned", self.name)))?
            .ok_or_else(|| Error::Process(format!("{}: metrics-server not started", self.name)))?;
        self.register_extension(
            &Extension {
                api_service: "v1beta1.metrics.k8s.io",
                group: "metrics.k8s.io",
                version: "v1beta1",
                namespace: "kube-system",
                service: "metrics-server",
                port,
                group_priority_minimum: 100,
                version_priority: 100,
                log: self.dir.join("metrics-server.log"),
            },
            timeout,
        )
        .await
    }

    /// Runs Karmada's `karmada-aggregated-apiserver` (built by `make karmada-binaries`) against it on a
    /// loopback port, as Karmada's installers deploy it: this server's kubeconfig for its clients and
    /// for delegated authentication and authorization, its own prefix on the shared etcd, and a serving
    /// certificate from this cluster's CA. The API server must be an aggregator
    /// ([`Self::enable_front_proxy`]): the extension server trusts its front-proxy client.
    pub(crate) fn start_aggregated_apiserver(&self, etcd_url: &str) -> Result<(), Error> {
        let program = binaries::locate_karmada(AGGREGATED_APISERVER)?;
        let port = process::free_port()?;
        let (cert, key) = self.pki.issue_serving(
            AGGREGATED_APISERVER,
            &[
                "localhost",
                "127.0.0.1",
                "karmada-aggregated-apiserver.karmada-system.svc",
            ],
            &self.dir,
        )?;
        let kc = self.kubeconfig_path.display().to_string();
        let args = vec![
            format!("--kubeconfig={kc}"),
            format!("--authentication-kubeconfig={kc}"),
            format!("--authorization-kubeconfig={kc}"),
            format!("--etcd-servers={etcd_url}"),
            format!("--etcd-prefix=/{}-{AGGREGATED_APISERVER}", self.name),
            "--bind-address=127.0.0.1".to_string(),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", cert.display()),
            format!("--tls-private-key-file={}", key.display()),
            "--v=1".to_string(),
        ];
        self.start_component_from(AGGREGATED_APISERVER, &program, args)?;
        *self
            .aggregated_apiserver_port
            .lock()
            .map_err(|_| Error::Process(format!("{}: lock poisoned", self.name)))? = Some(port);
        Ok(())
    }

    /// Registers the `v1alpha1.cluster.karmada.io` APIService (Service
    /// `karmada-system/karmada-aggregated-apiserver`, Karmada's priorities) and waits until the API
    /// server reports it Available.
    pub(crate) async fn register_cluster_api(&self, timeout: Duration) -> Result<(), Error> {
        let port = self
            .aggregated_apiserver_port
            .lock()
            .map_err(|_| Error::Process(format!("{}: lock poisoned", self.name)))?
            .ok_or_else(|| {
                Error::Process(format!("{}: {AGGREGATED_APISERVER} not started", self.name))
            })?;
        self.register_extension(
            &Extension {
                api_service: CLUSTER_API_SERVICE,
                group: "cluster.karmada.io",
                version: "v1alpha1",
                namespace: "karmada-system",
                service: AGGREGATED_APISERVER,
                port,
                group_priority_minimum: 2000,
                version_priority: 10,
                log: self.dir.join(format!("{AGGREGATED_APISERVER}.log")),
            },
            timeout,
        )
        .await
    }

    /// Creates the Service and APIService of `ext` (and the Service's namespace) and waits until the
    /// APIService is Available.
    async fn register_extension(
        &self,
        ext: &Extension<'_>,
        timeout: Duration,
    ) -> Result<(), Error> {
        use k8s_openapi::api::core::v1::Service;
        use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
        let client = self.try_client().await?;
        let namespace: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": ext.namespace}}))
                .map_err(|e| Error::Process(format!("namespace manifest: {e}")))?;
        let service: Service = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": ext.service, "namespace": ext.namespace},
            "spec": {"type": "ExternalName", "externalName": "localhost",
                     "ports": [{"name": "https", "port": ext.port}]},
        }))
        .map_err(|e| Error::Process(format!("{} Service manifest: {e}", ext.service)))?;
        let ca = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, self.ca_pem()?);
        let api_service: APIService = serde_json::from_value(serde_json::json!({
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": ext.api_service},
            "spec": {
                "service": {"name": ext.service, "namespace": ext.namespace, "port": ext.port},
                "group": ext.group,
                "version": ext.version,
                "caBundle": ca,
                "groupPriorityMinimum": ext.group_priority_minimum,
                "versionPriority": ext.version_priority,
            },
        }))
        .map_err(|e| Error::Process(format!("{} APIService manifest: {e}", ext.api_service)))?;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let services: Api<Service> = Api::namespaced(client.clone(), ext.namespace);
        let api_services: Api<APIService> = Api::all(client);
        for result in [
            namespaces
                .create(&PostParams::default(), &namespace)
                .await
                .map(|_| ()),
            services
                .create(&PostParams::default(), &service)
                .await
                .map(|_| ()),
            api_services
                .create(&PostParams::default(), &api_service)
                .await
                .map(|_| ()),
        ] {
            match result {
                Ok(()) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => {
                    return Err(Error::kube(
                        format!("{}: registering {}", self.name, ext.api_service),
                        e,
                    ));
                }
            }
        }
        let deadline = Instant::now() + timeout;
        loop {
            let conditions = api_services
                .get_opt(ext.api_service)
                .await
                .ok()
                .flatten()
                .and_then(|a| a.status)
                .and_then(|s| s.conditions)
                .unwrap_or_default();
            if conditions
                .iter()
                .any(|c| c.type_ == "Available" && c.status == "True")
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                let why = conditions
                    .iter()
                    .find(|c| c.type_ == "Available")
                    .map(|c| {
                        format!(
                            " ({}: {})",
                            c.reason.as_deref().unwrap_or(""),
                            c.message.as_deref().unwrap_or("")
                        )
                    })
                    .unwrap_or_default();
                return Err(Error::Timeout(format!(
                    "{}: the {} APIService was not Available within {timeout:?}{why}; last lines \
                     of {}:\n{}",
                    self.name,
                    ext.api_service,
                    ext.log.display(),
                    process::log_tail(&ext.log)
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Creates `count` fake nodes (32 CPU, 256Gi, 110 pods each) and waits until kwok reports them Ready.
    /// Each names its resource-metrics path on kwok's server for metrics-server.
    pub(crate) async fn add_kwok_nodes(
        &self,
        count: usize,
        timeout: Duration,
    ) -> Result<(), Error> {
        let client = self.try_client().await?;
        let nodes: Api<Node> = Api::all(client);
        for i in 0..count {
            let name = format!("{}-kwok-node-{i}", self.name);
            let node: Node = serde_json::from_value(serde_json::json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {
                        "kwok.x-k8s.io/node": "fake",
                        "node.alpha.kubernetes.io/ttl": "0",
                        // Where metrics-server finds this node's resource metrics on kwok's server
                        // (one server for every node; used only when metrics-server runs).
                        "metrics.k8s.io/resource-metrics-path":
                            format!("/metrics/nodes/{name}/metrics/resource"),
                    },
                    "labels": {
                        "type": "kwok",
                        "kubernetes.io/arch": "amd64",
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/hostname": name,
                        "node-role.kubernetes.io/agent": "",
                    },
                },
                "status": {
                    "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                    "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                    "nodeInfo": {
                        "architecture": "amd64",
                        "operatingSystem": "linux",
                        "kubeletVersion": "fake",
                        "kubeProxyVersion": "fake",
                    },
                },
            }))
            .map_err(|e| Error::Process(format!("node manifest: {e}")))?;
            match nodes.create(&PostParams::default(), &node).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => {
                    return Err(Error::kube(
                        format!("{}: creating node {name}", self.name),
                        e,
                    ));
                }
            }
        }
        let deadline = Instant::now() + timeout;
        loop {
            let list = nodes
                .list(&Default::default())
                .await
                .map_err(|e| Error::kube(format!("{}: listing nodes", self.name), e))?;
            let ready = list
                .items
                .iter()
                .filter(|n| {
                    n.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|cs| {
                            cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                        })
                })
                .count();
            if ready >= count {
                return Ok(());
            }
            if Instant::now() > deadline {
                let log = self.dir.join("kwok.log");
                return Err(Error::Timeout(format!(
                    "{}: {ready}/{count} kwok nodes Ready after {timeout:?}; last lines of {}:\n{}",
                    self.name,
                    log.display(),
                    process::log_tail(&log)
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop_all();
    }
}
