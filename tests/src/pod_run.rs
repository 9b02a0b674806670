//! Runs one container of a Deployment, as rendered (a chart's `helm template`) or as stored in an API
//! server (what `karmadactl register` created), as a local process started the way the kubelet starts
//! it, so that a test exercises exactly the manifest's command line, environment, mounts and probes.
//!
//! What the process gets, and from where:
//! - **Program**: this workspace's binary named by the basename of the container's `command[0]`
//!   (`/karmada-agent` → the built `karmada-agent`, found as [`crate::controller_manager`] finds it).
//! - **Arguments**: `command[1..]` then `args`, with `$(VAR)` references expanded from the container's
//!   environment as the kubelet expands them (`$$` is a literal `$`, unknown references stay as
//!   written).
//! - **Environment**: only the container's `env` and `envFrom` (no inherited variables): literal values,
//!   `secretKeyRef` / `configMapKeyRef` read from the API server, `fieldRef` resolved for this pod
//!   (`status.podIP` is the pod's own loopback address, see below); plus `PATH`, and `HOME` pointing
//!   to an empty folder so that no user kubeconfig is ever found.
//! - **Volumes**: every `volumeMount` is a folder of its own holding what the kubelet would project:
//!   a Secret's or ConfigMap's keys (or its `items`) read from the API server, an empty folder for
//!   `emptyDir`. Since a process outside a pod cannot have its files at the manifest's paths, every
//!   argument naming a mount path (the path itself or a file under it) is rewritten to that folder.
//!   **This is the only rewrite of the manifest**: flags, ports and every other value are used as
//!   rendered, so a wrong flag name, port or mount path fails the run.
//! - **Service account**: a pod's in-cluster configuration is a token, `ca.crt` and `namespace` at
//!   `/var/run/secrets/kubernetes.io/serviceaccount` plus `KUBERNETES_SERVICE_HOST/PORT`; kube-rs reads
//!   the token from that fixed path, which a process outside a pod does not have. So when the pod
//!   automounts its token (`automountServiceAccountToken`, pod then ServiceAccount, default true) the
//!   runner mints a token for the pod's `serviceAccountName` with the TokenRequest API, writes those
//!   three files into a folder of its own, and hands them over as a kubeconfig (that server, that CA,
//!   that token) in `KUBECONFIG`, which our binaries read before the in-cluster configuration (the
//!   order of `lariat::runtime::client::load_config`). The process then talks to the API server as the
//!   Deployment's ServiceAccount, with its RBAC and nothing more. Without automount it gets none.
//! - **Network**: a pod has an address of its own; here each pod gets a distinct loopback address
//!   `127.x.y.z` (all of 127/8 is loopback on Linux) as `status.podIP`, and probes are sent to it, as
//!   the kubelet sends them to the pod IP. A process binding only 127.0.0.1 therefore fails its probes
//!   as it would in a pod. A manifest binding a fixed port on every address (`:8080`, `0.0.0.0:10357`)
//!   takes that port of this machine: another process holding it fails the run, with a message saying
//!   so.
//!
//! No kubelet, so no container status or Deployment status: [`Pod::report_available`] writes the
//! Deployment's rollout status once the readiness probe answers, as the kubelet and the deployment
//! controller would.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, Probe, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, Patch, PatchParams};

use crate::controller_manager::{agent_binary, binary, http_get_at, karmadactl_binary};

/// Which probe of the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    /// `livenessProbe`.
    Liveness,
    /// `readinessProbe`.
    Readiness,
    /// `startupProbe`.
    Startup,
}

impl ProbeKind {
    fn field(self) -> &'static str {
        match self {
            ProbeKind::Liveness => "livenessProbe",
            ProbeKind::Readiness => "readinessProbe",
            ProbeKind::Startup => "startupProbe",
        }
    }
}

/// Where a probe (or a declared port) is served: the pod's address, the port (resolved from its
/// name), the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `ip:port` the kubelet would connect to.
    pub addr: SocketAddr,
    /// The HTTP path.
    pub path: String,
    /// How the manifest names the port (`healthz`, `10357`), for messages.
    pub port_as_written: String,
}

/// One container of a Deployment, running as a local process. Killed (SIGKILL) when dropped; the
/// kernel kills it if the test thread dies. Its log is printed when dropped during a panic.
pub struct Pod {
    /// `<deployment>-<n>`, as `metadata.name` of the pod.
    pub name: String,
    /// Namespace of the Deployment.
    pub namespace: String,
    /// This pod's address (`status.podIP`).
    pub ip: Ipv4Addr,
    /// The program spawned.
    pub program: PathBuf,
    /// Its arguments, as spawned (expanded, mount paths rewritten).
    pub args: Vec<String>,
    /// Its environment, as spawned.
    pub env: BTreeMap<String, String>,
    /// Each mount path of the manifest and the folder standing in for it.
    pub mounts: Vec<(String, PathBuf)>,
    deployment: String,
    container: Container,
    child: Child,
    log: PathBuf,
    exit: Option<ExitStatus>,
    dir: PathBuf,
}

/// A distinct loopback address per pod of this test process.
fn pod_ip() -> Ipv4Addr {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let pid = std::process::id();
    loop {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let ip = Ipv4Addr::new(
            127,
            u8::try_from(1 + pid % 250).unwrap(),
            u8::try_from((pid / 250 + n / 250) % 250).unwrap(),
            u8::try_from(1 + n % 250).unwrap(),
        );
        if ip != Ipv4Addr::LOCALHOST {
            return ip;
        }
    }
}

/// Kubernetes' `$(VAR)` expansion: `$$` is `$`, `$(NAME)` is the value of NAME when defined, else it
/// stays as written.
pub fn expand(input: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            match vars.get(name) {
                Some(v) => out.push_str(v),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `arg` with every occurrence of a mount path (as a whole path component sequence: the path itself or
/// a file under it) replaced by its folder; longer mount paths first.
pub fn rewrite_mount_paths(arg: &str, mounts: &[(String, PathBuf)]) -> String {
    let mut sorted: Vec<&(String, PathBuf)> = mounts.iter().collect();
    sorted.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    let path_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/');
    // One pass over the original text, so a folder put in never matches another mount path.
    let mut out = String::new();
    let mut i = 0;
    'scan: while i < arg.len() {
        let before_ok = arg[..i].chars().last().is_none_or(|c| !path_char(c));
        if before_ok {
            for (mount, dir) in &sorted {
                let mount = mount.trim_end_matches('/');
                if mount.is_empty() || !arg[i..].starts_with(mount) {
                    continue;
                }
                let end = i + mount.len();
                if arg[end..]
                    .chars()
                    .next()
                    .is_none_or(|c| c == '/' || !path_char(c))
                {
                    out.push_str(&dir.display().to_string());
                    i = end;
                    continue 'scan;
                }
            }
        }
        let c = arg[i..].chars().next().unwrap_or_default();
        out.push(c);
        i += c.len_utf8();
    }
    out
}

fn pod_spec(deployment: &Deployment) -> &PodSpec {
    deployment
        .spec
        .template
        .spec
        .as_ref()
        .expect("the Deployment has a pod template spec")
}

/// The built binary the container's `command[0]` names.
fn program_of(container: &Container) -> PathBuf {
    let command = container.command.clone().unwrap_or_default();
    let first = command.first().unwrap_or_else(|| {
        panic!(
            "container {}: no command; the image's entrypoint would run, and this runner needs the \
             manifest to name the program",
            container.name
        )
    });
    let base = Path::new(first)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match base.as_str() {
        "karmada-agent" => agent_binary().to_path_buf(),
        "karmada-controller-manager" => binary().to_path_buf(),
        "karmadactl" => karmadactl_binary().to_path_buf(),
        other => panic!(
            "container {}: command[0] {first:?} names {other:?}, which is not a binary of this \
             workspace (the image holds /karmada-controller-manager, /karmada-agent, /karmadactl)",
            container.name
        ),
    }
}

fn secret_key(secret: &Secret, key: &str) -> Option<Vec<u8>> {
    secret.data.as_ref()?.get(key).map(|v| v.0.clone())
}

impl Pod {
    /// Starts `container` of `deployment` (namespace from its metadata) against `cluster`, the API
    /// server holding its Secrets, ConfigMaps and ServiceAccount. Panics, naming what and why, when
    /// something the kubelet would need is missing (a Secret, a key, an unsupported field).
    #[allow(
        clippy::too_many_lines,
        reason = "the pod's start in the kubelet's order: volumes, service account, env, command"
    )]
    pub async fn start(
        cluster: &testenv::ApiServer,
        deployment: &Deployment,
        container: &str,
    ) -> Pod {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let client = cluster.client().await;
        let namespace = deployment
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let deployment_name = deployment.metadata.name.clone().unwrap_or_default();
        let spec = pod_spec(deployment).clone();
        let c = spec
            .containers
            .iter()
            .find(|c| c.name == container)
            .unwrap_or_else(|| {
                panic!("Deployment {namespace}/{deployment_name} has no container {container}")
            })
            .clone();
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("{deployment_name}-{seq}");
        let ip = pod_ip();
        let dir = std::env::temp_dir().join(format!(
            "pod-run-{}-{}-{name}",
            std::process::id(),
            ip.octets()[3]
        ));
        std::fs::create_dir_all(dir.join("home")).unwrap();
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
        let what = format!("pod {namespace}/{name} (container {container})");

        // Volumes, as the kubelet projects them.
        let mut mounts = Vec::new();
        for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
            assert!(
                m.sub_path.as_deref().unwrap_or_default().is_empty()
                    && m.sub_path_expr.as_deref().unwrap_or_default().is_empty(),
                "{what}: volumeMount {} uses subPath, which this runner does not project",
                m.name
            );
            let volume = spec
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == m.name)
                .unwrap_or_else(|| {
                    panic!(
                        "{what}: volumeMount {} names no volume of the pod spec",
                        m.name
                    )
                });
            let folder = dir.join(format!("volume-{i}-{}", m.name));
            std::fs::create_dir_all(&folder).unwrap();
            let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
            let items;
            if let Some(s) = &volume.secret {
                let secret_name = s.secret_name.clone().unwrap_or_default();
                items = s.items.clone();
                match secrets.get_opt(&secret_name).await.unwrap() {
                    Some(secret) => {
                        for (k, v) in secret.data.unwrap_or_default() {
                            files.insert(k, v.0);
                        }
                    }
                    None => assert!(
                        s.optional == Some(true),
                        "{what}: volume {} needs Secret {namespace}/{secret_name}, which does not \
                         exist (the pod would stay ContainerCreating)",
                        m.name
                    ),
                }
            } else if let Some(cm) = &volume.config_map {
                let cm_name = cm.name.clone();
                items = cm.items.clone();
                match config_maps.get_opt(&cm_name).await.unwrap() {
                    Some(found) => {
                        for (k, v) in found.data.unwrap_or_default() {
                            files.insert(k, v.into_bytes());
                        }
                        for (k, v) in found.binary_data.unwrap_or_default() {
                            files.insert(k, v.0);
                        }
                    }
                    None => assert!(
                        cm.optional == Some(true),
                        "{what}: volume {} needs ConfigMap {namespace}/{cm_name}, which does not \
                         exist (the pod would stay ContainerCreating)",
                        m.name
                    ),
                }
            } else if volume.empty_dir.is_some() {
                items = None;
            } else {
                panic!(
                    "{what}: volume {} is neither a Secret, a ConfigMap nor an emptyDir, which this \
                     runner does not project",
                    m.name
                );
            }
            let selected: Vec<(String, Vec<u8>)> = match items {
                Some(items) => items
                    .iter()
                    .map(|item| {
                        let data = files.get(&item.key).cloned().unwrap_or_else(|| {
                            panic!(
                                "{what}: volume {} lists key {}, absent from its source",
                                m.name, item.key
                            )
                        });
                        (item.path.clone(), data)
                    })
                    .collect(),
                None => files.into_iter().collect(),
            };
            for (path, data) in selected {
                let file = folder.join(&path);
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, data).unwrap();
            }
            mounts.push((m.mount_path.clone(), folder));
        }

        // The service account, handed over as a kubeconfig in KUBECONFIG.
        let service_account = spec
            .service_account_name
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "default".into());
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
        let sa = sas.get_opt(&service_account).await.unwrap().unwrap_or_else(|| {
            panic!(
                "{what}: ServiceAccount {namespace}/{service_account} does not exist (the pod would \
                 not be created)"
            )
        });
        let automount = spec
            .automount_service_account_token
            .or(sa.automount_service_account_token)
            .unwrap_or(true);
        let mut env = BTreeMap::new();
        env.insert("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned());
        env.insert("HOME".to_owned(), dir.join("home").display().to_string());
        if automount {
            let request: TokenRequest = serde_json::from_value(serde_json::json!({
                "spec": {"audiences": [], "expirationSeconds": 3600}
            }))
            .unwrap();
            let token = sas
                .create_token_request(&service_account, &Default::default(), &request)
                .await
                .unwrap_or_else(|e| {
                    panic!("{what}: TokenRequest for ServiceAccount {service_account}: {e}")
                })
                .status
                .and_then(|s| s.token)
                .unwrap_or_default();
            let sa_dir = dir.join("serviceaccount");
            std::fs::create_dir_all(&sa_dir).unwrap();
            std::fs::write(sa_dir.join("token"), &token).unwrap();
            std::fs::copy(&cluster.pki().ca_cert, sa_dir.join("ca.crt")).unwrap();
            std::fs::write(sa_dir.join("namespace"), &namespace).unwrap();
            let kubeconfig = sa_dir.join("kubeconfig");
            std::fs::write(
                &kubeconfig,
                format!(
                    "apiVersion: v1\nkind: Config\nclusters:\n- name: in-cluster\n  cluster:\n    \
                     server: {}\n    certificate-authority: {}\nusers:\n- name: {service_account}\n  \
                     user:\n    tokenFile: {}\ncontexts:\n- name: in-cluster\n  context:\n    \
                     cluster: in-cluster\n    user: {service_account}\n    namespace: {namespace}\n\
                     current-context: in-cluster\n",
                    cluster.url(),
                    sa_dir.join("ca.crt").display(),
                    sa_dir.join("token").display(),
                ),
            )
            .unwrap();
            env.insert("KUBECONFIG".to_owned(), kubeconfig.display().to_string());
        }

        // The container's environment, in order (a value may refer to those before it).
        let mut defined: BTreeMap<String, String> = BTreeMap::new();
        for from in c.env_from.iter().flatten() {
            let prefix = from.prefix.clone().unwrap_or_default();
            if let Some(r) = &from.secret_ref {
                if let Some(secret) = secrets.get_opt(&r.name).await.unwrap() {
                    for (k, v) in secret.data.unwrap_or_default() {
                        defined.insert(
                            format!("{prefix}{k}"),
                            String::from_utf8_lossy(&v.0).into_owned(),
                        );
                    }
                } else {
                    assert!(
                        r.optional == Some(true),
                        "{what}: envFrom Secret {} does not exist",
                        r.name
                    );
                }
            }
            if let Some(r) = &from.config_map_ref {
                if let Some(cm) = config_maps.get_opt(&r.name).await.unwrap() {
                    for (k, v) in cm.data.unwrap_or_default() {
                        defined.insert(format!("{prefix}{k}"), v);
                    }
                } else {
                    assert!(
                        r.optional == Some(true),
                        "{what}: envFrom ConfigMap {} does not exist",
                        r.name
                    );
                }
            }
        }
        for var in c.env.iter().flatten() {
            let value = if let Some(from) = &var.value_from {
                if let Some(r) = &from.secret_key_ref {
                    let secret = secrets.get_opt(&r.name).await.unwrap();
                    match secret.as_ref().and_then(|s| secret_key(s, &r.key)) {
                        Some(v) => String::from_utf8_lossy(&v).into_owned(),
                        None if r.optional == Some(true) => continue,
                        None => panic!(
                            "{what}: env {} needs key {} of Secret {namespace}/{}, absent",
                            var.name, r.key, r.name
                        ),
                    }
                } else if let Some(r) = &from.config_map_key_ref {
                    let cm = config_maps.get_opt(&r.name).await.unwrap();
                    match cm.and_then(|c| c.data.unwrap_or_default().remove(&r.key)) {
                        Some(v) => v,
                        None if r.optional == Some(true) => continue,
                        None => panic!(
                            "{what}: env {} needs key {} of ConfigMap {namespace}/{}, absent",
                            var.name, r.key, r.name
                        ),
                    }
                } else if let Some(f) = &from.field_ref {
                    match f.field_path.as_str() {
                        "metadata.name" => name.clone(),
                        "metadata.namespace" => namespace.clone(),
                        "spec.serviceAccountName" => service_account.clone(),
                        "spec.nodeName" => "testenv-node".to_owned(),
                        "status.podIP" | "status.podIPs" => ip.to_string(),
                        "status.hostIP" | "status.hostIPs" => "127.0.0.1".to_owned(),
                        other => panic!(
                            "{what}: env {} has fieldRef {other}, which this runner does not resolve",
                            var.name
                        ),
                    }
                } else {
                    panic!(
                        "{what}: env {} has a valueFrom this runner does not resolve",
                        var.name
                    );
                }
            } else {
                expand(var.value.as_deref().unwrap_or_default(), &defined)
            };
            defined.insert(var.name.clone(), value);
        }
        env.extend(defined.clone());

        // The command line: command[1..] + args, expanded, mount paths rewritten.
        let program = program_of(&c);
        let args: Vec<String> = c
            .command
            .iter()
            .flatten()
            .skip(1)
            .chain(c.args.iter().flatten())
            .map(|a| rewrite_mount_paths(&expand(a, &defined), &mounts))
            .collect();

        let log = dir.join("container.log");
        let out = File::create(&log).unwrap();
        let err = out.try_clone().unwrap();
        let mut cmd = Command::new(&program);
        cmd.args(&args)
            .env_clear()
            .envs(&env)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        // SAFETY: prctl is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: spawn {}: {e}", program.display()));
        eprintln!("{what} at {ip}: {} {}", program.display(), args.join(" "));
        Pod {
            name,
            namespace,
            ip,
            program,
            args,
            env,
            mounts,
            deployment: deployment_name,
            container: c,
            child,
            log,
            exit: None,
            dir,
        }
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `sig` (e.g. `libc::SIGTERM`).
    pub fn signal(&self, sig: i32) {
        // SAFETY: plain kill(2) on our own child.
        unsafe {
            libc::kill(i32::try_from(self.child.id()).unwrap(), sig);
        }
    }

    /// Whether it has exited (and its status).
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit
    }

    /// Waits for it to exit, up to `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.try_exit() {
                return Some(s);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The container's port `port` (a number, or a name of its `ports`), as a number. Panics when a
    /// name matches none of them (the kubelet would fail the probe).
    pub fn resolve_port(&self, port: &IntOrString) -> u16 {
        match port {
            IntOrString::Int(n) => u16::try_from(*n).unwrap_or_else(|_| {
                panic!("container {}: port {n} out of range", self.container.name)
            }),
            IntOrString::String(name) => {
                let found = self
                    .container
                    .ports
                    .iter()
                    .flatten()
                    .find(|p| p.name.as_deref() == Some(name.as_str()));
                match found {
                    Some(p) => u16::try_from(p.container_port).unwrap(),
                    None => name.parse().unwrap_or_else(|_| {
                        panic!(
                            "container {}: port {name:?} is the name of none of its ports {:?}",
                            self.container.name, self.container.ports
                        )
                    }),
                }
            }
        }
    }

    fn probe(&self, kind: ProbeKind) -> Option<&Probe> {
        match kind {
            ProbeKind::Liveness => self.container.liveness_probe.as_ref(),
            ProbeKind::Readiness => self.container.readiness_probe.as_ref(),
            ProbeKind::Startup => self.container.startup_probe.as_ref(),
        }
    }

    /// Where the container's `kind` probe is sent, `None` when it has none. Panics on a probe other
    /// than `httpGet` over HTTP (none of our manifests has one).
    pub fn probe_endpoint(&self, kind: ProbeKind) -> Option<Endpoint> {
        let probe = self.probe(kind)?;
        let get = probe.http_get.as_ref().unwrap_or_else(|| {
            panic!(
                "container {}: {} is not an httpGet probe",
                self.container.name,
                kind.field()
            )
        });
        let scheme = get.scheme.as_deref().unwrap_or("HTTP");
        assert_eq!(
            scheme,
            "HTTP",
            "container {}: {} scheme {scheme} is not supported by this runner",
            self.container.name,
            kind.field()
        );
        let host: IpAddr = match get.host.as_deref().filter(|h| !h.is_empty()) {
            Some(h) => h
                .parse()
                .unwrap_or_else(|_| panic!("{}: probe host {h:?} is not an address", kind.field())),
            None => IpAddr::V4(self.ip),
        };
        Some(Endpoint {
            addr: SocketAddr::new(host, self.resolve_port(&get.port)),
            path: get.path.clone().unwrap_or_else(|| "/".into()),
            port_as_written: match &get.port {
                IntOrString::Int(n) => n.to_string(),
                IntOrString::String(s) => s.clone(),
            },
        })
    }

    /// `GET path` on the pod's address, port `port`: (status, body), `None` when nothing answers.
    pub fn get(&self, port: u16, path: &str) -> Option<(u16, String)> {
        http_get_at(SocketAddr::new(IpAddr::V4(self.ip), port), path)
    }

    /// The TCP addresses the process listens on (from `/proc`).
    pub fn listening(&self) -> Vec<SocketAddr> {
        listening_sockets(self.child.id())
    }

    /// Whether this process listens on `port` at the pod's address (on it, or on every address).
    pub fn listens_at(&self, port: u16) -> bool {
        self.listening().iter().any(|a| {
            a.port() == port
                && (a.ip() == IpAddr::V4(self.ip)
                    || a.ip().is_unspecified()
                    || a.ip() == IpAddr::V6(self.ip.to_ipv6_mapped()))
        })
    }

    /// Polls the container's `kind` probe as the kubelet does (success: a status in 200..400) until it
    /// succeeds, for at most `timeout`, and returns the endpoint. Panics when the manifest has no such
    /// probe, when the process exits, or on timeout: saying whether anything listens on the probe's
    /// port at all, or another process does (with the addresses this one listens on), or what it
    /// answered, and its log. An answer counts only when this process holds the port.
    pub async fn wait_probe(&mut self, kind: ProbeKind, timeout: Duration) -> Endpoint {
        let endpoint = self.probe_endpoint(kind).unwrap_or_else(|| {
            panic!(
                "Deployment {}/{}, container {}: no {}",
                self.namespace,
                self.deployment,
                self.container.name,
                kind.field()
            )
        });
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_exit() {
                panic!(
                    "{}: the process exited ({status}) before its {} answered; log:\n{}",
                    self.describe(),
                    kind.field(),
                    self.log_tail(60)
                );
            }
            let answer = http_get_at(endpoint.addr, &endpoint.path);
            // The answer counts only when this process holds the port (another process binding
            // every address could answer on this pod's address too).
            let own = self.listens_at(endpoint.addr.port());
            if let Some((status, _)) = answer
                && (200..400).contains(&status)
                && own
            {
                return endpoint;
            }
            if Instant::now() > deadline {
                let why = match answer {
                    Some(_) if !own => format!(
                        "another process answers on {} (port {} in the manifest); this one \
                         listens on {:?}",
                        endpoint.addr,
                        endpoint.port_as_written,
                        self.listening()
                    ),
                    Some((status, body)) => {
                        format!("it answered {status}: {}", body.trim())
                    }
                    None => format!(
                        "nothing listens on {} (port {} in the manifest); the process listens on \
                         {:?}",
                        endpoint.addr,
                        endpoint.port_as_written,
                        self.listening()
                    ),
                };
                panic!(
                    "{}: {} GET http://{}{} did not succeed within {timeout:?}: {why}\nlog:\n{}",
                    self.describe(),
                    kind.field(),
                    endpoint.addr,
                    endpoint.path,
                    self.log_tail(60)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Every `containerPort` the manifest declares is one the process listens on, at the pod's address
    /// (on it, or on every address). Panics naming the first one that is not.
    pub fn assert_ports_served(&mut self) {
        if let Some(status) = self.try_exit() {
            panic!(
                "{}: the process exited ({status}); log:\n{}",
                self.describe(),
                self.log_tail(60)
            );
        }
        let listening = self.listening();
        for p in self.container.ports.iter().flatten() {
            let port = u16::try_from(p.container_port).unwrap();
            assert!(
                self.listens_at(port),
                "{}: the manifest declares port {port} ({}) but the process does not listen on \
                 it at the pod's address {}; it listens on {listening:?}",
                self.describe(),
                p.name.as_deref().unwrap_or("unnamed"),
                self.ip
            );
        }
    }

    /// Writes the rollout status of the Deployment (`name` in `namespace` of `client`) the kubelet and
    /// the deployment controller would report once every replica's readiness probe succeeded: call it
    /// after [`Self::wait_probe`] of the readiness probe (this checks it once more).
    pub async fn report_available(&self, client: &kube::Client) {
        if let Some(endpoint) = self.probe_endpoint(ProbeKind::Readiness) {
            let answer = http_get_at(endpoint.addr, &endpoint.path);
            assert!(
                answer.as_ref().is_some_and(|(s, _)| (200..400).contains(s)),
                "{}: not ready ({answer:?}), no rollout status to report",
                self.describe()
            );
        }
        let api: Api<Deployment> = Api::namespaced(client.clone(), &self.namespace);
        let current = api.get(&self.deployment).await.unwrap();
        let replicas = current.spec.replicas.unwrap_or(1);
        let status = serde_json::json!({
            "status": {
                "observedGeneration": current.metadata.generation.unwrap_or(1),
                "replicas": replicas,
                "updatedReplicas": replicas,
                "readyReplicas": replicas,
                "availableReplicas": replicas,
                "conditions": [{
                    "type": "Available",
                    "status": "True",
                    "reason": "MinimumReplicasAvailable",
                    "message": "Deployment has minimum availability.",
                }],
            }
        });
        api.patch_status(
            &self.deployment,
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .unwrap_or_else(|e| panic!("{}: writing the Deployment status: {e}", self.describe()));
    }

    fn describe(&self) -> String {
        format!(
            "Deployment {}/{} container {} (pod {} at {})",
            self.namespace, self.deployment, self.container.name, self.name, self.ip
        )
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        if self.try_exit().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "--- {} log ({}) ---\n{}",
                self.describe(),
                self.log.display(),
                self.log_tail(200)
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The addresses process `pid` listens on over TCP: its socket inodes (`/proc/<pid>/fd`) matched
/// against the LISTEN entries of `/proc/<pid>/net/tcp` and `tcp6`.
pub fn listening_sockets(pid: u32) -> Vec<SocketAddr> {
    let inodes: std::collections::HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| {
            l.to_string_lossy()
                .strip_prefix("socket:[")
                .and_then(|s| s.strip_suffix(']'))
                .map(str::to_owned)
        })
        .collect();
    let mut out = Vec::new();
    for (file, v6) in [("tcp", false), ("tcp6", true)] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{file}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 || f[3] != "0A" || !inodes.contains(f[9]) {
                continue;
            }
            let Some((addr, port)) = f[1].split_once(':') else {
                continue;
            };
            let Ok(port) = u16::from_str_radix(port, 16) else {
                continue;
            };
            let ip = if v6 {
                let mut bytes = [0u8; 16];
                for (i, chunk) in addr.as_bytes().chunks(8).enumerate().take(4) {
                    let word = u32::from_str_radix(std::str::from_utf8(chunk).unwrap_or("0"), 16)
                        .unwrap_or(0);
                    bytes[i * 4..i * 4 + 4].copy_from_slice(&word.to_le_bytes());
                }
                IpAddr::V6(Ipv6Addr::from(bytes))
            } else {
                let word = u32::from_str_radix(addr, 16).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(word.to_le_bytes()))
            };
            out.push(SocketAddr::new(ip, port));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_like_the_kubelet() {
        let vars: BTreeMap<String, String> = [("POD_IP".to_owned(), "127.1.2.3".to_owned())].into();
        assert_eq!(
            expand("--bind=$(POD_IP):8080", &vars),
            "--bind=127.1.2.3:8080"
        );
        assert_eq!(expand("$$(POD_IP)", &vars), "$(POD_IP)");
        assert_eq!(expand("$(NOPE) $", &vars), "$(NOPE) $");
    }

    #[test]
    fn rewrites_only_whole_mount_paths() {
        let mounts = vec![
            ("/etc/kubeconfig".to_owned(), PathBuf::from("/tmp/v0")),
            ("/etc/kubeconfig/deep".to_owned(), PathBuf::from("/tmp/v1")),
        ];
        assert_eq!(
            rewrite_mount_paths(
                "--karmada-kubeconfig=/etc/kubeconfig/karmada-kubeconfig",
                &mounts
            ),
            "--karmada-kubeconfig=/tmp/v0/karmada-kubeconfig"
        );
        assert_eq!(
            rewrite_mount_paths("/etc/kubeconfig/deep/x", &mounts),
            "/tmp/v1/x"
        );
        assert_eq!(
            rewrite_mount_paths("--x=/etc/kubeconfig2/y,/var/etc/kubeconfig", &mounts),
            "--x=/etc/kubeconfig2/y,/var/etc/kubeconfig"
        );
        assert_eq!(rewrite_mount_paths("/etc/kubeconfig", &mounts), "/tmp/v0");
    }

    #[test]
    fn reads_its_own_listening_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        assert!(listening_sockets(std::process::id()).contains(&addr));
    }
}
