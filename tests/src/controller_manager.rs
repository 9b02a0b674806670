//! Run the real `karmada-controller-manager` binary against a real API server: build it, start it,
//! signal it, read its probes, metrics, log and Lease. Used by the end-to-end tests and the benchmark.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karmada_apis::Cluster;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

/// The lease name Karmada uses.
pub const LEASE: &str = "karmada-controller-manager";

/// The built binary, with the `test-hooks` feature (test hooks read from the environment, absent
/// from release builds; `karmada-e2e` enables it). `KARMADA_CONTROLLER_MANAGER_BIN` names it: `make
/// test`'s runner sets it to the binary its `cargo test --workspace --no-run` built. Unset, the binary
/// is built once per process by [`build`], and located from cargo's own report, so it is never stale.
pub fn binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        build(
            "karmada-controller-manager",
            "KARMADA_CONTROLLER_MANAGER_BIN",
        )
    })
}

/// The built `karmada-agent`, as [`binary`] (`KARMADA_AGENT_BIN` names it).
pub fn agent_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| build("karmada-agent", "KARMADA_AGENT_BIN"))
}

/// The built `karmadactl` binary, as [`binary`] (`KARMADACTL_BIN` names it). Most tests run
/// karmadactl in process; the image test packs the binary itself.
pub fn karmadactl_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| build("karmadactl", "KARMADACTL_BIN"))
}

/// The built `testenv` binary (`hack/local-up.sh` runs it), as [`binary`] (`TESTENV_BIN` names it).
pub fn testenv_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| build("testenv", "TESTENV_BIN"))
}

/// The integration test of each binary's own package: cargo builds a package's binaries for its
/// integration tests, so building that test builds the binary.
fn own_test(package: &str) -> &'static str {
    match package {
        "karmada-controller-manager" => "controller_manager_binary",
        "karmada-agent" => "agent_binary",
        "karmadactl" => "cli",
        "testenv" => "environment",
        other => panic!("no integration test builds the {other} binary"),
    }
}

/// `cargo`, without the variables cargo sets for the test process it runs (`CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_NAME`, …). Some build scripts ask to rerun when those change (ring's watches
/// `CARGO_MANIFEST_DIR` and `CARGO_PKG_*`), and cargo compares the values in its own environment: a
/// cargo started with the test's values reruns ring's build script, rebuilds everything above it
/// (rustls, kube, the whole workspace), and the next `cargo test` from a shell does it all again.
pub fn cargo_command() -> Command {
    let mut cargo = Command::new(env!("CARGO"));
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if set_by_cargo_for_tests(key) {
            cargo.env_remove(key);
        }
    }
    cargo
}

/// Whether cargo sets `key` for the processes it runs (tests, build scripts), as opposed to a
/// variable that configures cargo itself (`CARGO_HOME`, `CARGO_TARGET_DIR`, `CARGO_BUILD_*`, …).
fn set_by_cargo_for_tests(key: &str) -> bool {
    key == "OUT_DIR"
        || key == "CARGO_CRATE_NAME"
        || key == "CARGO_PRIMARY_PACKAGE"
        || key == "CARGO_TARGET_TMPDIR"
        || [
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "CARGO_BIN_",
            "CARGO_CFG_",
            "CARGO_FEATURE_",
        ]
        .iter()
        .any(|p| key.starts_with(p))
}

/// Builds the binary `package` (same name) and returns its path; the variable `env` overrides it.
///
/// Debug (`cargo test`): `cargo test --workspace --no-run --test <the package's own test>`, which
/// builds the binary exactly as `cargo test --workspace` does (the whole workspace's features,
/// dev-dependencies' included): the same artifacts, so after a change nothing is compiled twice. A
/// `cargo build -p` resolves features for that one package, without the dev-dependencies' (tokio's
/// `test-util`), and so compiled every changed crate a second time. Release (`cargo bench`): `cargo
/// build --release -p`, the optimised binary the benchmark measures.
fn build(package: &str, env: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut cargo = cargo_command();
    if cfg!(debug_assertions) {
        cargo.args([
            "test",
            "-q",
            "--workspace",
            "--no-run",
            "--test",
            own_test(package),
        ]);
    } else {
        cargo.args(["build", "-q", "--release", "-p", package, "--bin", package]);
        // The controller-manager's test hooks (environment variables a test sets) exist only with
        // this feature.
        if package == "karmada-controller-manager" {
            cargo.args(["--features", "test-hooks"]);
        }
    }
    let out = cargo
        .current_dir(&workspace)
        .arg("--message-format=json")
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo");
    assert!(out.status.success(), "cargo building {package} failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in stdout.lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] == "compiler-artifact"
            && msg["target"]["name"] == package
            && msg["target"]["kind"][0] == "bin"
            && msg["profile"]["test"] == false
            && let Some(exe) = msg["executable"].as_str()
        {
            return PathBuf::from(exe);
        }
    }
    panic!("cargo did not report the {package} executable");
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    testenv::process::free_port().expect("free port")
}

/// The set-up most end-to-end files share: the controller-manager on `env`'s host with `args`,
/// every member joined with `karmadactl join` (`join_args` added), and every member's Cluster
/// schedulable, waited for at most `wait`: `Ready`, its API enablements reported, and no
/// `not-ready`/`unreachable` taint (the cluster controller removes it just after `Ready`; a Divided
/// workload scheduled in between lands on the other members only, and Karmada does not reschedule
/// it when the taint goes). Panics naming what did not happen (with the controller-manager's log).
pub async fn start_joined(
    env: &testenv::TestEnv,
    args: &[&str],
    join_args: &[&str],
    wait: Duration,
) -> Kcm {
    let kcm = Kcm::start(env.host().kubeconfig_path(), args, &[]);
    for m in env.members() {
        crate::karmadactl::join(env.host(), m, join_args)
            .await
            .unwrap_or_else(|e| panic!("join {}: {e:#}", m.name()));
    }
    let clusters: Api<Cluster> = Api::all(env.host().client().await);
    let members: Vec<&str> = env.members().iter().map(testenv::ApiServer::name).collect();
    kcm.eventually("every member schedulable", wait, async || {
        let list = clusters
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let schedulable: Vec<String> = list
            .items
            .iter()
            .filter(|c| schedulable(c))
            .map(ResourceExt::name_any)
            .collect();
        if members.iter().all(|m| schedulable.iter().any(|r| r == m)) {
            Ok(())
        } else {
            Err(format!(
                "Ready, with API enablements and untainted: {schedulable:?} of {members:?}"
            ))
        }
    })
    .await;
    kcm
}

/// Whether a Cluster is `Ready`, has reported its API enablements and carries neither the
/// `not-ready` nor the `unreachable` taint: what the scheduler needs to place work on it.
pub fn schedulable(cluster: &Cluster) -> bool {
    use karmada_apis::well_known::{TAINT_CLUSTER_NOT_READY, TAINT_CLUSTER_UNREACHABLE};
    cluster.is_ready()
        && cluster
            .status
            .as_ref()
            .is_some_and(|s| !s.api_enablements.is_empty())
        && cluster
            .spec
            .taints
            .iter()
            .all(|t| t.key != TAINT_CLUSTER_NOT_READY && t.key != TAINT_CLUSTER_UNREACHABLE)
}

/// A fresh namespace on the host (leases of different tests never meet).
pub async fn fresh_namespace(client: &kube::Client, prefix: &str) -> String {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let name = format!(
        "{prefix}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name}
    }))
    .unwrap();
    api.create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    name
}

/// The lease's holder, if any.
pub async fn lease_holder(client: &kube::Client, ns: &str) -> Option<String> {
    let api: Api<Lease> = Api::namespaced(client.clone(), ns);
    api.get_opt(LEASE)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

/// A running `karmada-controller-manager`, killed (SIGKILL) when dropped. Its stdout and stderr go to a
/// log file; the kernel kills it if the test thread dies (PR_SET_PDEATHSIG).
pub struct Kcm {
    child: Child,
    log: PathBuf,
    /// The port of its health probes (`/healthz`, `/readyz`).
    pub probe_port: u16,
    /// The port of its `/metrics`.
    pub metrics_port: u16,
    exit: Option<ExitStatus>,
    /// When the process was spawned.
    pub started: Instant,
    _dir: tempfile_dir::TempDir,
}

mod tempfile_dir {
    //! A temporary folder removed on drop.
    use std::path::{Path, PathBuf};

    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new(tag: &str) -> Self {
            static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let p = std::env::temp_dir().join(format!(
                "kcm-test-{tag}-{}-{}",
                std::process::id(),
                SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p).expect("create temp dir");
            TempDir(p)
        }
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}

/// Runs the binary to completion with `args` and returns (exit code, stdout, stderr).
pub fn run_to_exit(args: &[&str], timeout: Duration) -> (Option<i32>, String, String) {
    let dir = tempfile_dir::TempDir::new("oneshot");
    let out_path = dir.path().join("stdout");
    let err_path = dir.path().join("stderr");
    let mut child = Command::new(binary())
        .args(args)
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .spawn()
        .expect("spawn karmada-controller-manager");
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "karmada-controller-manager {args:?} did not exit within {timeout:?}; stderr:\n{}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status.code(),
        std::fs::read_to_string(&out_path).unwrap_or_default(),
        std::fs::read_to_string(&err_path).unwrap_or_default(),
    )
}

impl Kcm {
    /// Starts the binary with probe and metrics on fresh local ports plus `args`; `env` adds variables.
    pub fn start(kubeconfig: &Path, args: &[&str], env: &[(&str, &str)]) -> Kcm {
        Kcm::start_program(binary(), kubeconfig, args, env)
    }

    /// [`start`](Self::start) for another program that takes the same `--kubeconfig`,
    /// `--health-probe-bind-address` and `--metrics-bind-address` flags (Karmada's Go components).
    pub fn start_program(
        binary: &Path,
        kubeconfig: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Kcm {
        let probe_port = free_port();
        let metrics_port = free_port();
        let mut all = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--health-probe-bind-address=127.0.0.1:{probe_port}"),
            format!("--metrics-bind-address=127.0.0.1:{metrics_port}"),
        ];
        all.extend(args.iter().map(ToString::to_string));
        Kcm::spawn(binary, &all, env, probe_port, metrics_port)
    }

    /// Starts a program with exactly `args` (no probe or metrics flags: both ports are 0), its
    /// output in the log, killed when dropped or when the test process dies.
    pub fn start_plain(binary: &Path, args: &[String]) -> Kcm {
        Kcm::spawn(binary, args, &[], 0, 0)
    }

    fn spawn(
        binary: &Path,
        args: &[String],
        env: &[(&str, &str)],
        probe_port: u16,
        metrics_port: u16,
    ) -> Kcm {
        let dir = tempfile_dir::TempDir::new("kcm");
        let log = dir.path().join("kcm.log");
        let out = File::create(&log).expect("create log");
        let err = out.try_clone().expect("clone log");
        let mut cmd = Command::new(binary);
        cmd.args(args)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
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
            .unwrap_or_else(|e| panic!("spawn {}: {e}", binary.display()));
        Kcm {
            child,
            log,
            probe_port,
            metrics_port,
            exit: None,
            started: Instant::now(),
            _dir: dir,
        }
    }

    /// Process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
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

    /// Polls `check` every 500 ms until it succeeds, for at most `wait`; panics naming `what`,
    /// the last reason and the tail of this process's log on timeout.
    pub async fn eventually<R: crate::wait::Outcome>(
        &self,
        what: &str,
        wait: Duration,
        check: impl AsyncFnMut() -> R,
    ) -> R::Output {
        let every = Duration::from_millis(500);
        let log = || format!("log (tail):\n{}", self.log_tail(80));
        crate::wait::eventually_showing(what, wait, every, log, check).await
    }

    /// Sends `sig` (e.g. `libc::SIGTERM`).
    pub fn signal(&self, sig: i32) {
        // SAFETY: plain kill(2) on our own child.
        unsafe {
            libc::kill(self.child.id() as i32, sig);
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

    /// `GET path` on the probe port: (status, body), or `None` when nothing answers.
    pub fn probe(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.probe_port, path)
    }

    /// `GET /metrics` body.
    pub fn metrics(&self) -> Option<String> {
        http_get(self.metrics_port, "/metrics").map(|(_, b)| b)
    }

    /// `leader_election_master_status{name="karmada-controller-manager"}` as served now.
    pub fn is_master(&self) -> Option<bool> {
        let text = self.metrics()?;
        text.lines()
            .find(|l| {
                l.starts_with("leader_election_master_status{")
                    && l.contains(&format!("name=\"{LEASE}\""))
            })
            .and_then(|l| l.rsplit(' ').next())
            .map(|v| v.trim() == "1")
    }

    /// The identity it elects with, from its log.
    pub fn identity(&self) -> Option<String> {
        let log = self.log();
        let line = log
            .lines()
            .find(|l| l.contains("attempting to acquire leader lease"))?;
        let start = line.find("identity=")? + "identity=".len();
        Some(
            line[start..]
                .split_whitespace()
                .next()?
                .trim_matches('"')
                .to_string(),
        )
    }

    /// Polls `cond` every 50 ms until true or `timeout`; panics with the log on timeout.
    pub async fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        mut cond: impl FnMut(&Kcm) -> bool,
    ) {
        let deadline = Instant::now() + timeout;
        loop {
            if cond(self) {
                return;
            }
            if let Some(s) = self.try_exit() {
                panic!(
                    "karmada-controller-manager exited ({s:?}) while waiting for {what}; log:\n{}",
                    self.log()
                );
            }
            assert!(
                Instant::now() <= deadline,
                "timed out after {timeout:?} waiting for {what}; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Exit code (`None` when killed by a signal).
    pub fn code(status: ExitStatus) -> Option<i32> {
        status.code().or_else(|| status.signal().map(|s| 128 + s))
    }
}

impl Drop for Kcm {
    fn drop(&mut self) {
        if self.try_exit().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "--- karmada-controller-manager log ({}) ---\n{}",
                self.log.display(),
                self.log()
            );
        }
    }
}

/// A minimal HTTP/1.1 GET (the probe and metrics servers are plain HTTP on loopback).
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    http_get_at(std::net::SocketAddr::from(([127, 0, 0, 1], port)), path)
}

/// [`http_get`] at any address (a pod's address in [`crate::pod_run`]).
pub fn http_get_at(addr: std::net::SocketAddr, path: &str) -> Option<(u16, String)> {
    let (status, body) = http_get_raw(addr, path, Duration::from_secs(5))?;
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

/// A GET on loopback whose body may be binary and slow to come (a profile): status and body, or
/// `None` when there is no answer within `timeout`.
pub fn http_get_bytes(port: u16, path: &str, timeout: Duration) -> Option<(u16, Vec<u8>)> {
    http_get_raw(
        std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        path,
        timeout,
    )
}

fn http_get_raw(
    addr: std::net::SocketAddr,
    path: &str,
    timeout: Duration,
) -> Option<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let status: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
    let body = &raw[split + 4..];
    let body = if head.contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_vec()
    };
    Some((status, body))
}

fn dechunk(mut s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = s.windows(2).position(|w| w == b"\r\n") {
        let size = String::from_utf8_lossy(&s[..line_end]);
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        let rest = &s[line_end + 2..];
        if n == 0 || rest.len() < n {
            break;
        }
        out.extend_from_slice(&rest[..n]);
        s = rest[n..].strip_prefix(b"\r\n").unwrap_or(&rest[n..]);
    }
    out
}

/// Checks that `text` is well-formed Prometheus text exposition: every non-comment line is
/// `name{labels} value` with a valid metric name and a float value; every sample's family has # TYPE.
pub fn assert_prometheus_text(text: &str) {
    let mut typed = std::collections::HashSet::new();
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            let name = parts.next().expect("TYPE name");
            let kind = parts.next().expect("TYPE kind");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "bad TYPE line: {line}"
            );
            typed.insert(name.to_string());
            continue;
        }
        if line.starts_with('#') {
            assert!(line.starts_with("# HELP "), "bad comment line: {line}");
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad sample line: {line}"));
        let value = value.trim();
        assert!(
            value.parse::<f64>().is_ok() || ["+Inf", "-Inf", "NaN"].contains(&value),
            "bad value in: {line}"
        );
        let name = series.split('{').next().unwrap();
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                && !name.starts_with(|c: char| c.is_ascii_digit()),
            "bad metric name in: {line}"
        );
        if let Some(labels) = series.strip_prefix(name)
            && !labels.is_empty()
        {
            assert!(
                labels.starts_with('{') && labels.ends_with('}'),
                "bad labels in: {line}"
            );
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| typed.contains(*f)))
            .unwrap_or(name);
        assert!(typed.contains(family), "sample without # TYPE: {line}");
    }
}

/// Writes a kubeconfig pointing at `server` (nothing needs to listen there).
pub fn kubeconfig_for(dir: &Path, server: &str) -> PathBuf {
    let path = dir.join(format!("kubeconfig-{}", free_port()));
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    insecure-skip-tls-verify: true\n\
             users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    path
}

/// Installs a minimal (schema-less) CRD for `plural.group` and waits until it is served.
pub async fn install_minimal_crd(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
) {
    let name = format!("{plural}.{group}");
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {
            "group": group,
            "scope": if namespaced { "Namespaced" } else { "Cluster" },
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "versions": [{
                "name": version, "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}}
            }]
        }
    }))
    .unwrap();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        &name,
        &PatchParams::apply("kcm-tests").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("apply CRD");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let established = api
            .get(&name)
            .await
            .ok()
            .and_then(|c| c.status)
            .and_then(|s| s.conditions)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        if established {
            return;
        }
        assert!(Instant::now() < deadline, "CRD {name} not established");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `/readyz` answers 200.
pub async fn wait_ready(kcm: &Kcm, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while kcm.probe("/readyz").map(|(code, _)| code) != Some(200) {
        if Instant::now() > deadline {
            anyhow::bail!(
                "the controller-manager was not ready within {timeout:?}; log:\n{}",
                kcm.log()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Waits until `count` Clusters on the host are `Ready=True`; an error after `timeout`.
pub async fn wait_clusters_ready(
    host: &kube::Client,
    count: usize,
    timeout: Duration,
) -> anyhow::Result<()> {
    let api: Api<Cluster> = Api::all(host.clone());
    let deadline = Instant::now() + timeout;
    loop {
        let list = api.list(&ListParams::default()).await?;
        let ready = list.items.iter().filter(|c| c.is_ready()).count();
        if ready == count {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!("{ready} of {count} clusters Ready after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
