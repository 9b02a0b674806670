//! Karmada's own end-to-end suite (`test/e2e/suites/base` of the pinned Karmada module) run against
//! this project's controllers or, as the baseline, Karmada's Go controller-manager, scheduler and
//! webhook, on the same environment (`make test-karmada-e2e`).
//!
//! Who calls what:
//! - [`Environment::start`] brings up a host (with Karmada's aggregated API server serving
//!   `cluster.karmada.io`) and three full members (kube-scheduler,
//!   kube-controller-manager and one kwok node each, so pods become Ready), starts the chosen
//!   controllers, lets the admin use `clusters/proxy` as Karmada's setup does, joins
//!   `member1`/`member2` with `karmadactl join` (Push) and serves `member3` with a
//!   `karmada-agent` (Pull: ours for karmada-rs, Karmada's for the baseline), and writes the
//!   kubeconfig the suite expects (contexts `karmada-apiserver` and `karmada-host`). Pods whose
//!   image is in the registry `fake` stay unready (`ErrImagePull`), as the failover specs expect.
//! - [`run_suite`] runs the Ginkgo binary (`hack/build-test-binaries.sh karmada-e2e` builds it) with
//!   the suite's environment variables and writes its JSON report.
//! - [`Summary::from_report`] turns a Ginkgo JSON report into per-file counts and the failures, and
//!   [`Summary::markdown`] / [`compare`] into the tables `docs/compatibility.md` records.
//!
//! The suite finds Karmada's Go `karmadactl` at `$(go env GOPATH)/bin/karmadactl`: the run points
//! `GOPATH` at a folder of the output holding a link to the one built beside the suite.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::Value;
use testenv::{EnvOptions, TestEnv};

use crate::controller_manager::{Kcm, agent_binary};
use crate::controller_manager::{wait_clusters_ready, wait_ready};
use crate::karmada_go::{Impl, KarmadaGo};
use karmada_apis::config::v1alpha1::ResourceInterpreterWebhookConfiguration as WebhookConfiguration;

/// The Go binaries the suite run needs beyond Karmada's trio, in Karmada's cache folder.
pub const SUITE_BINARY: &str = "karmada-e2e-base.test";
/// Karmada's Go `karmadactl` (the suite's karmadactl specs run it).
pub const GO_KARMADACTL: &str = "karmadactl";
/// Karmada's Go `karmada-agent` (serves the Pull member of the baseline).
pub const GO_AGENT: &str = "karmada-agent";
/// Karmada's interpreter webhook example (`examples/customresourceinterpreter/webhook`), which
/// interprets the example's `Workload` for the suite's resource-interpreter specs.
pub const INTERPRETER_EXAMPLE: &str = "karmada-interpreter-webhook-example";

/// The flags Karmada's e2e deployment (`artifacts/deploy/` of its module) gives each component, less
/// those about its pods (addresses, kubeconfig paths, logging format): every alpha and beta feature
/// on, the two controllers off by default on, NoExecute taint eviction allowed.
const CONTROLLER_MANAGER_FLAGS: &[&str] = &[
    "--controllers=*,hpaScaleTargetMarker,deploymentReplicasSyncer",
    "--feature-gates=AllAlpha=true,AllBeta=true",
    "--enable-no-execute-taint-eviction=true",
    "--cluster-status-update-frequency=10s",
];
const SCHEDULER_FLAGS: &[&str] = &["--feature-gates=AllAlpha=true,AllBeta=true"];
const WEBHOOK_FLAGS: &[&str] = &[
    "--feature-gates=AllAlpha=true,AllBeta=true",
    "--allow-no-execute-taint-policy=true",
];
/// `artifacts/agent/karmada-agent.yaml`'s feature gates and status frequency.
const AGENT_FLAGS: &[&str] = &[
    "--feature-gates=CustomizedClusterResourceModeling=true,MultiClusterService=true",
    "--cluster-status-update-frequency=10s",
];

/// A kwok Stage standing in for a container runtime's failed image pull: a pod with a container
/// whose image is in the registry `fake` (the suite's failover specs use `fake/nginx:1.19.0`, or
/// override the registry to `fake`, to make a workload unhealthy) stays Pending and unready with
/// `ErrImagePull`, as on Karmada's kind members, instead of becoming Ready like every other kwok
/// pod. Its weight puts it before kwok's `pod-ready`; its status has no timestamps, so applying it
/// again changes nothing.
const IMAGE_PULL_FAILED_STAGE: &str = r#"apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-image-pull-failed
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.spec.containers.[] | select(.image | startswith("fake/")) | .name'
      operator: 'Exists'
  weight: 1
  next:
    statusTemplate: |
      phase: Pending
      conditions:
      - status: "False"
        type: Ready
        reason: ContainersNotReady
      - status: "False"
        type: ContainersReady
        reason: ContainersNotReady
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          waiting:
            reason: ErrImagePull
            message: "image cannot be pulled (kwok stage of the e2e harness)"
      {{ end }}
"#;

/// The members: the first two joined in Push mode, the last served by an agent (Pull).
const PUSH_MEMBERS: [&str; 2] = ["member1", "member2"];
const PULL_MEMBER: &str = "member3";

/// A running environment for one suite run.
pub struct Environment {
    env: TestEnv,
    imp: Impl,
    /// Our controller-manager (karmada-rs runs).
    kcm: Option<Kcm>,
    /// Karmada's Go trio (baseline runs).
    karmada: Option<KarmadaGo>,
    /// The Pull member's agent.
    agent: Option<Kcm>,
    /// Karmada's interpreter webhook example.
    interpreter_example: Kcm,
    /// The kubeconfig the suite reads (`KUBECONFIG`).
    pub kubeconfig: PathBuf,
}

impl Environment {
    /// Starts the environment under `dir` with the controllers of `imp`; returns once the three
    /// Clusters are Ready.
    pub async fn start(imp: Impl, dir: &Path) -> anyhow::Result<Environment> {
        let go_agent = match imp {
            Impl::Karmada => Some(testenv::binaries::locate_karmada(GO_AGENT)?),
            Impl::Rust => None,
        };
        let env = TestEnv::start(EnvOptions {
            members: 3,
            full_members: 3,
            // One node per member, as the kind clusters of Karmada's own e2e setup: specs count a
            // DaemonSet's pods as one per cluster.
            kwok_nodes: 1,
            install_crds: true,
            // As Karmada's own setup: Clusters served by karmada-aggregated-apiserver (which stamps
            // taints' timeAdded and serves clusters/proxy), not by a CRD.
            aggregated_apiserver: true,
            // Images of the registry `fake` fail to pull, as on a real member.
            kwok_extra_stages: vec![IMAGE_PULL_FAILED_STAGE.to_owned()],
            dir: Some(dir.join("env")),
            ..Default::default()
        })
        .await
        .context("start the test environment (make test-binaries builds what it needs)")?;
        let host = env.host().client().await;
        let (kcm, karmada) = match imp {
            Impl::Rust => {
                let mut args = vec!["--leader-elect=false", "--v=2"];
                args.extend_from_slice(CONTROLLER_MANAGER_FLAGS);
                let kcm = Kcm::start(env.host().kubeconfig_path(), &args, &[]);
                wait_ready(&kcm, Duration::from_secs(120)).await?;
                (Some(kcm), None)
            }
            Impl::Karmada => {
                let owned = |flags: &[&str]| -> Vec<String> {
                    flags.iter().map(ToString::to_string).collect()
                };
                let karmada = KarmadaGo::start_with(
                    &env,
                    &[],
                    &owned(CONTROLLER_MANAGER_FLAGS),
                    &owned(SCHEDULER_FLAGS),
                    &owned(WEBHOOK_FLAGS),
                )
                .await?;
                (None, Some(karmada))
            }
        };
        grant_cluster_proxy(&host).await?;
        for name in PUSH_MEMBERS {
            let member = env
                .member(name)
                .with_context(|| format!("the environment has no {name}"))?;
            crate::karmadactl::join(env.host(), member, &[]).await?;
        }
        let pull = env
            .member(PULL_MEMBER)
            .with_context(|| format!("the environment has no {PULL_MEMBER}"))?;
        let agent_args = [
            format!(
                "--karmada-kubeconfig={}",
                env.host().kubeconfig_path().display()
            ),
            format!("--cluster-name={PULL_MEMBER}"),
            format!("--cluster-api-endpoint={}", pull.url()),
            "--leader-elect=false".to_owned(),
            "--v=2".to_owned(),
        ];
        let mut agent_args: Vec<&str> = agent_args.iter().map(String::as_str).collect();
        agent_args.extend_from_slice(AGENT_FLAGS);
        let agent_bin = go_agent.unwrap_or_else(|| agent_binary().to_path_buf());
        let agent = Kcm::start_program(&agent_bin, pull.kubeconfig_path(), &agent_args, &[]);
        wait_clusters_ready(&host, 3, Duration::from_secs(180))
            .await
            .with_context(|| format!("agent log:\n{}", agent.log_tail(40)))?;
        let interpreter_example = start_interpreter_example(&env).await?;
        let kubeconfig = dir.join("kubeconfig");
        write_suite_kubeconfig(&env.kubeconfig_path(), &kubeconfig)?;
        Ok(Environment {
            env,
            imp,
            kcm,
            karmada,
            agent: Some(agent),
            interpreter_example,
            kubeconfig,
        })
    }

    /// `PULL_BASED_CLUSTERS` as the suite parses it: `<cluster>:<kubeconfig with that context>`.
    pub fn pull_based_clusters(&self) -> String {
        format!("{PULL_MEMBER}:{}", self.env.kubeconfig_path().display())
    }

    /// Writes the logs of the controllers and the agent into `dir`.
    pub fn save_logs(&self, dir: &Path) -> anyhow::Result<()> {
        let label = match self.imp {
            Impl::Rust => "karmada-rs",
            Impl::Karmada => "karmada-go",
        };
        let mut logs: Vec<(String, String)> = Vec::new();
        if let Some(kcm) = &self.kcm {
            logs.push(("controller-manager".into(), kcm.log()));
        }
        if let Some(k) = &self.karmada {
            for (name, log) in k.logs() {
                logs.push((name.to_owned(), log));
            }
        }
        if let Some(agent) = &self.agent {
            logs.push(("agent".into(), agent.log()));
        }
        logs.push((INTERPRETER_EXAMPLE.into(), self.interpreter_example.log()));
        for (name, log) in logs {
            let path = dir.join(format!("{label}-{name}.log"));
            std::fs::write(&path, log).with_context(|| format!("write {}", path.display()))?;
        }
        Ok(())
    }
}

/// What Karmada's e2e setup applies from `artifacts/deploy/cluster-proxy-admin-rbac.yaml`: the
/// ClusterRole `cluster-proxy-admin` (every verb on `cluster.karmada.io` `clusters/proxy`) bound to
/// the admin user (Karmada's is `system:admin`, this environment's [`testenv::pki::ADMIN_USER`]).
/// The `unifiedAuth` controller turns the binding into impersonation rights in the members, which
/// the suite's `karmadactl` specs use through `clusters/proxy`.
async fn grant_cluster_proxy(host: &kube::Client) -> anyhow::Result<()> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let name = "cluster-proxy-admin";
    let role: ClusterRole = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "rules": [{"apiGroups": ["cluster.karmada.io"], "resources": ["clusters/proxy"],
                   "verbs": ["*"]}],
    }))?;
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": testenv::pki::ADMIN_USER}],
    }))?;
    let params = kube::api::PostParams::default();
    kube::Api::<ClusterRole>::all(host.clone())
        .create(&params, &role)
        .await
        .context("create ClusterRole cluster-proxy-admin")?;
    kube::Api::<ClusterRoleBinding>::all(host.clone())
        .create(&params, &binding)
        .await
        .context("create ClusterRoleBinding cluster-proxy-admin")?;
    Ok(())
}

/// Karmada's interpreter webhook example as Karmada's e2e setup deploys it: the example's Workload
/// CRD on the host and every member, the example serving on loopback with a certificate of the
/// host's CA, and its ResourceInterpreterWebhookConfiguration `examples` (every operation of
/// `workload.example.io/v1alpha1` Workloads, 3 s timeout) pointing at it. Both implementations get
/// the same.
async fn start_interpreter_example(env: &TestEnv) -> anyhow::Result<Kcm> {
    let bin = testenv::binaries::locate_karmada(INTERPRETER_EXAMPLE)
        .context("make karmada-e2e-binaries builds it")?;
    let crds = testenv::binaries::karmada_dir().join("e2e-crds");
    let host = env.host();
    let mut clusters = vec![("host".to_owned(), host.try_client().await?)];
    for name in PUSH_MEMBERS.iter().chain([&PULL_MEMBER]) {
        let member = env
            .member(name)
            .with_context(|| format!("the environment has no {name}"))?;
        clusters.push(((*name).to_owned(), member.try_client().await?));
    }
    for (name, client) in &clusters {
        testenv::install_crds_from(client, &crds)
            .await
            .with_context(|| {
                format!(
                    "install the Workload CRD of {} on {name} (make karmada-e2e-binaries copies it)",
                    crds.display()
                )
            })?;
    }
    let dir = env.dir().join(INTERPRETER_EXAMPLE);
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let (cert, key) =
        host.pki()
            .issue_serving(INTERPRETER_EXAMPLE, &["127.0.0.1", "localhost"], &dir)?;
    // The example reads `tls.crt` and `tls.key` from its --cert-dir.
    std::fs::rename(&cert, dir.join("tls.crt")).context("name the serving certificate tls.crt")?;
    std::fs::rename(&key, dir.join("tls.key")).context("name the serving key tls.key")?;
    let port = testenv::process::free_port()?;
    let mut example = Kcm::start_plain(
        &bin,
        &[
            format!("--kubeconfig={}", host.kubeconfig_path().display()),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", dir.display()),
            "--v=4".to_owned(),
        ],
    );
    crate::karmada_go::wait_port(
        INTERPRETER_EXAMPLE,
        &mut example,
        port,
        Duration::from_secs(60),
    )
    .await?;
    let mut config: WebhookConfiguration = serde_json::from_value(serde_json::json!({
        "apiVersion": "config.karmada.io/v1alpha1",
        "kind": "ResourceInterpreterWebhookConfiguration",
        "metadata": {"name": "examples"},
        "webhooks": [{
            "name": "workloads.example.com",
            "rules": [{
                "operations": ["InterpretReplica", "ReviseReplica", "Retain", "AggregateStatus",
                    "InterpretHealth", "InterpretStatus", "InterpretDependency"],
                "apiGroups": ["workload.example.io"],
                "apiVersions": ["v1alpha1"],
                "kinds": ["Workload"]
            }],
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/interpreter-workload")},
            "interpreterContextVersions": ["v1alpha1"],
            "timeoutSeconds": 3
        }]
    }))
    .context("build the ResourceInterpreterWebhookConfiguration `examples`")?;
    for webhook in &mut config.webhooks {
        webhook.client_config.ca_bundle = Some(k8s_openapi::ByteString(host.ca_pem()?));
    }
    kube::Api::<WebhookConfiguration>::all(clusters[0].1.clone())
        .patch(
            "examples",
            &kube::api::PatchParams::apply("karmada-e2e-suite").force(),
            &kube::api::Patch::Apply(&config),
        )
        .await
        .context("register ResourceInterpreterWebhookConfiguration examples")?;
    Ok(example)
}

/// Copies the environment's kubeconfig (contexts `host`, `member1`…) and adds the two contexts the
/// suite reads: `karmada-apiserver` (the Karmada API server) and `karmada-host` (where Karmada's
/// components would run; here the same API server). Written as JSON, which kubeconfig readers accept.
fn write_suite_kubeconfig(from: &Path, to: &Path) -> anyhow::Result<()> {
    let mut config = kube::config::Kubeconfig::read_from(from)
        .with_context(|| format!("read {}", from.display()))?;
    let host = config
        .contexts
        .iter()
        .find(|c| c.name == "host")
        .cloned()
        .with_context(|| format!("{} has no context named host", from.display()))?;
    for name in ["karmada-apiserver", "karmada-host"] {
        let mut c = host.clone();
        c.name = name.to_owned();
        config.contexts.push(c);
    }
    config.current_context = Some("karmada-apiserver".to_owned());
    let text = serde_json::to_string_pretty(&config)?;
    std::fs::write(to, text).with_context(|| format!("write {}", to.display()))
}

/// What to run of the suite.
#[derive(Debug, Clone, Default)]
pub struct SuiteOptions {
    /// Ginkgo `--focus` (a regular expression over the spec's full text).
    pub focus: Option<String>,
    /// Ginkgo `--skip`.
    pub skip: Option<String>,
    /// Ginkgo `--focus-file` (e.g. `propagationpolicy_test.go`).
    pub focus_file: Vec<String>,
    /// The whole run's deadline.
    pub timeout: Duration,
    /// The suite's own `--poll-timeout` (how long each wait lasts before a spec fails).
    pub poll_timeout: Duration,
}

/// Runs the suite binary against `env`; the JSON report goes to `report`, the output to `log`.
/// A failing spec is not an error here (the report says which); a suite that cannot run is.
pub fn run_suite(
    env: &Environment,
    options: &SuiteOptions,
    report: &Path,
    log: &Path,
) -> anyhow::Result<()> {
    let suite = testenv::binaries::locate_karmada(SUITE_BINARY)?;
    let karmadactl = testenv::binaries::locate_karmada(GO_KARMADACTL)?;
    // The suite runs `go env GOPATH` and expects `<GOPATH>/bin/karmadactl`.
    let gopath = report
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("gopath");
    std::fs::create_dir_all(gopath.join("bin"))?;
    let link = gopath.join("bin").join("karmadactl");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&karmadactl, &link)
        .with_context(|| format!("link {}", link.display()))?;
    let mut cmd = Command::new(&suite);
    cmd.arg(format!("-ginkgo.json-report={}", report.display()))
        .arg("-ginkgo.no-color")
        .arg("-ginkgo.v")
        .arg(format!("-ginkgo.timeout={}s", options.timeout.as_secs()))
        .arg(format!("-test.timeout={}s", options.timeout.as_secs() + 60))
        .arg(format!("-poll-timeout={}s", options.poll_timeout.as_secs()));
    if let Some(f) = &options.focus {
        cmd.arg(format!("-ginkgo.focus={f}"));
    }
    if let Some(s) = &options.skip {
        cmd.arg(format!("-ginkgo.skip={s}"));
    }
    for f in &options.focus_file {
        cmd.arg(format!("-ginkgo.focus-file={f}"));
    }
    let out = std::fs::File::create(log).with_context(|| format!("create {}", log.display()))?;
    let err = out.try_clone()?;
    let status = cmd
        .env("KUBECONFIG", &env.kubeconfig)
        .env("PULL_BASED_CLUSTERS", env.pull_based_clusters())
        .env("GOPATH", &gopath)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .with_context(|| format!("run {}", suite.display()))?;
    if !report.is_file() {
        bail!(
            "the suite wrote no report ({status}); its output: {}",
            log.display()
        );
    }
    Ok(())
}

/// The outcome of one spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Spec {
    /// The spec's file (base name).
    pub file: String,
    /// Containers and leaf text, joined by spaces (Ginkgo's full text).
    pub text: String,
    /// `passed`, `failed`, `skipped`, `pending`, `panicked`, `timedout`, `interrupted`, `aborted`.
    pub state: String,
    /// The failure's message, first line, when it failed.
    pub failure: Option<String>,
}

/// Per-file counts of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FileCounts {
    /// Specs in the file.
    pub specs: usize,
    /// Passed.
    pub passed: usize,
    /// Failed (failed, panicked, timed out, interrupted, aborted).
    pub failed: usize,
    /// Skipped or pending (including those outside the focus).
    pub skipped: usize,
}

/// A run's specs, grouped.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Every spec (`It`) of the report.
    pub specs: Vec<Spec>,
}

impl Summary {
    /// Reads a Ginkgo JSON report (an array of suite reports, each with `SpecReports`).
    pub fn from_report(text: &str) -> anyhow::Result<Summary> {
        let suites: Vec<Value> = serde_json::from_str(text).context("parse the Ginkgo report")?;
        let mut specs = Vec::new();
        for suite in &suites {
            let reports = suite
                .get("SpecReports")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            for r in reports {
                if r.get("LeafNodeType").and_then(Value::as_str) != Some("It") {
                    continue;
                }
                let file = r
                    .pointer("/LeafNodeLocation/FileName")
                    .and_then(Value::as_str)
                    .unwrap_or("?");
                let file = file.rsplit('/').next().unwrap_or(file).to_owned();
                let mut parts: Vec<&str> = r
                    .get("ContainerHierarchyTexts")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                parts.extend(r.get("LeafNodeText").and_then(Value::as_str));
                let state = r
                    .get("State")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_owned();
                let failure = r
                    .pointer("/Failure/Message")
                    .and_then(Value::as_str)
                    .filter(|m| !m.is_empty())
                    .map(|m| m.lines().next().unwrap_or_default().to_owned());
                specs.push(Spec {
                    file,
                    text: parts.join(" "),
                    state,
                    failure,
                });
            }
        }
        Ok(Summary { specs })
    }

    /// Counts per file, files in name order.
    pub fn by_file(&self) -> BTreeMap<String, FileCounts> {
        let mut out: BTreeMap<String, FileCounts> = BTreeMap::new();
        for s in &self.specs {
            let c = out.entry(s.file.clone()).or_default();
            c.specs += 1;
            match s.state.as_str() {
                "passed" => c.passed += 1,
                "skipped" | "pending" => c.skipped += 1,
                _ => c.failed += 1,
            }
        }
        out
    }

    /// The table (file, specs, passed, failed, skipped) and the failed specs, in Markdown.
    pub fn markdown(&self, title: &str) -> String {
        let mut out = format!(
            "## {title}\n\n| file | specs | passed | failed | skipped |\n|---|---:|---:|---:|---:|\n"
        );
        let mut total = FileCounts::default();
        for (file, c) in self.by_file() {
            out.push_str(&format!(
                "| {file} | {} | {} | {} | {} |\n",
                c.specs, c.passed, c.failed, c.skipped
            ));
            total.specs += c.specs;
            total.passed += c.passed;
            total.failed += c.failed;
            total.skipped += c.skipped;
        }
        out.push_str(&format!(
            "| **total** | {} | {} | {} | {} |\n",
            total.specs, total.passed, total.failed, total.skipped
        ));
        let failed: Vec<&Spec> = self
            .specs
            .iter()
            .filter(|s| !matches!(s.state.as_str(), "passed" | "skipped" | "pending"))
            .collect();
        if !failed.is_empty() {
            out.push_str("\nFailed:\n");
            for s in failed {
                out.push_str(&format!(
                    "- `{}` {} ({}): {}\n",
                    s.file,
                    s.text,
                    s.state,
                    s.failure.as_deref().unwrap_or("-")
                ));
            }
        }
        out
    }
}

/// Ours next to Karmada's Go, per file (passed of run specs), and the specs that pass for Karmada's
/// Go controllers but fail for ours (a spec ours did not run is not listed).
pub fn compare(ours: &Summary, karmada: &Summary) -> String {
    let (a, b) = (ours.by_file(), karmada.by_file());
    let mut files: Vec<&String> = a.keys().chain(b.keys()).collect();
    files.sort();
    files.dedup();
    let cell = |m: &BTreeMap<String, FileCounts>, f: &String| {
        m.get(f).map_or("-".to_owned(), |c| {
            format!("{}/{}", c.passed, c.passed + c.failed)
        })
    };
    let mut out =
        String::from("| file | karmada-rs passed/run | Karmada Go passed/run |\n|---|---:|---:|\n");
    let ran = |m: &BTreeMap<String, FileCounts>, f: &String| {
        m.get(f).is_some_and(|c| c.passed + c.failed > 0)
    };
    // Files outside the focus (every spec skipped on both sides) are left out.
    for f in files.into_iter().filter(|f| ran(&a, f) || ran(&b, f)) {
        out.push_str(&format!("| {f} | {} | {} |\n", cell(&a, f), cell(&b, f)));
    }
    let passed_for_karmada: std::collections::BTreeSet<&str> = karmada
        .specs
        .iter()
        .filter(|s| s.state == "passed")
        .map(|s| s.text.as_str())
        .collect();
    let behind: Vec<&Spec> = ours
        .specs
        .iter()
        .filter(|s| {
            !matches!(s.state.as_str(), "passed" | "skipped" | "pending")
                && passed_for_karmada.contains(s.text.as_str())
        })
        .collect();
    if !behind.is_empty() {
        out.push_str("\nPass with Karmada's Go controllers, not with karmada-rs:\n");
        for s in behind {
            out.push_str(&format!("- `{}` {} ({})\n", s.file, s.text, s.state));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = r#"[{"SuiteDescription":"E2E Suite","SpecReports":[
      {"LeafNodeType":"SynchronizedBeforeSuite","State":"passed"},
      {"LeafNodeType":"It","ContainerHierarchyTexts":["[BasicPropagation] propagation testing","Deployment propagation testing"],
       "LeafNodeText":"deployment propagation testing","LeafNodeLocation":{"FileName":"/m/test/e2e/suites/base/propagationpolicy_test.go"},
       "State":"passed"},
      {"LeafNodeType":"It","ContainerHierarchyTexts":["override"],"LeafNodeText":"applies",
       "LeafNodeLocation":{"FileName":"/m/test/e2e/suites/base/overridepolicy_test.go"},
       "State":"failed","Failure":{"Message":"Timed out after 300s.\nmore"}},
      {"LeafNodeType":"It","ContainerHierarchyTexts":["override"],"LeafNodeText":"other",
       "LeafNodeLocation":{"FileName":"/m/test/e2e/suites/base/overridepolicy_test.go"},"State":"skipped"}
    ]}]"#;

    #[test]
    fn report_is_counted_per_file() {
        let s = Summary::from_report(REPORT).unwrap();
        assert_eq!(s.specs.len(), 3, "only It nodes are specs");
        let by = s.by_file();
        assert_eq!(
            by["overridepolicy_test.go"],
            FileCounts {
                specs: 2,
                passed: 0,
                failed: 1,
                skipped: 1
            }
        );
        assert_eq!(by["propagationpolicy_test.go"].passed, 1);
        let md = s.markdown("karmada-rs");
        assert!(md.contains("| **total** | 3 | 1 | 1 | 1 |"), "{md}");
        assert!(
            md.contains("override applies (failed): Timed out after 300s."),
            "{md}"
        );
    }

    #[test]
    fn comparison_names_specs_only_karmada_passes() {
        let ours = Summary::from_report(REPORT).unwrap();
        let mut theirs = ours.clone();
        for s in &mut theirs.specs {
            s.state = "passed".into();
        }
        let table = compare(&ours, &theirs);
        assert!(
            table.contains("| overridepolicy_test.go | 0/1 | 2/2 |"),
            "{table}"
        );
        assert!(table.contains("- `overridepolicy_test.go` override applies (failed)"));
        assert!(
            !table.contains("override other"),
            "a spec ours skipped is no regression: {table}"
        );
        let mut none_ran = ours.clone();
        none_ran
            .specs
            .retain(|s| s.file == "overridepolicy_test.go");
        for s in &mut none_ran.specs {
            s.state = "skipped".into();
        }
        let table = compare(&none_ran, &none_ran);
        assert!(
            !table.contains("overridepolicy_test.go"),
            "a file neither side ran is left out: {table}"
        );
    }
}
