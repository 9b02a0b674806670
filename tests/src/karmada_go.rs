//! Karmada's own Go implementation as the benchmark's peer: its `karmada-controller-manager`,
//! `karmada-scheduler` and `karmada-webhook` (the version pinned in `hack/test-binaries.env`, built by
//! `make karmada-binaries`) run against a `testenv` host the way Karmada's users run them.
//!
//! The webhook is not optional: it stamps the permanent ids on policies, bindings and Works that
//! Karmada's scheduler and binding controller rely on. It serves on loopback with a certificate from
//! the host's CA, and both webhook configurations of Karmada's chart are registered on the host API
//! server pointing at it. The controller-manager runs the controllers we implement (our registry,
//! less `scheduler`, which Karmada runs as its own process). Karmada's CRDs that our `crds/` lacks are
//! installed from Karmada's module (copied into the cache by the build).
//!
//! What the benchmark reads is the sum of the three processes: CPU, memory (peak RSS is the sum of
//! each process's peak), and their client requests, labelled by target like ours.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use karmada_apis::PropagationPolicy;
use kube::Client;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use testenv::TestEnv;

use crate::controller_manager::Kcm;
use crate::process::{ProcessSample, Sample, parse_metrics};

/// The label Karmada's webhook stamps on every PropagationPolicy it admits.
pub const POLICY_PERMANENT_ID: &str = "propagationpolicy.karmada.io/permanent-id";

/// Which implementation of Karmada's controllers a session runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Impl {
    /// This project's `karmada-controller-manager`.
    Rust,
    /// Karmada's own Go controller-manager, scheduler and webhook ([`KarmadaGo`]).
    Karmada,
}

impl Impl {
    /// How reports name it.
    pub fn label(self) -> &'static str {
        match self {
            Impl::Rust => "karmada-rs",
            Impl::Karmada => "Karmada Go",
        }
    }
}

/// The `--controllers` Karmada's controller-manager runs: the ones we implement (our registry), less
/// `scheduler`, which Karmada runs as its own process.
pub fn controllers() -> String {
    karmada_controllers::registry::implemented()
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| *name != "scheduler")
        .collect::<Vec<_>>()
        .join(",")
}

/// The three binaries, or an error naming `make karmada-binaries` when one is missing.
pub fn binaries() -> anyhow::Result<[PathBuf; 3]> {
    Ok([
        testenv::binaries::locate_karmada("karmada-controller-manager")?,
        testenv::binaries::locate_karmada("karmada-scheduler")?,
        testenv::binaries::locate_karmada("karmada-webhook")?,
    ])
}

/// Karmada's Go trio, running. Dropping it kills the processes.
///
/// The controller-manager and the scheduler can be stopped and started again while the webhook keeps
/// serving ([`stop_controllers`](Self::stop_controllers), [`start_controllers`](Self::start_controllers)):
/// the webhook configurations stay registered with failure policy `Fail`, so the host admits
/// Karmada's objects only while the webhook runs, whoever the controllers are.
pub struct KarmadaGo {
    /// `karmada-controller-manager`; `None` while stopped.
    pub controller_manager: Option<Kcm>,
    /// `karmada-scheduler`; `None` while stopped.
    pub scheduler: Option<Kcm>,
    /// `karmada-webhook`.
    pub webhook: Kcm,
    bins: [PathBuf; 3],
    kubeconfig: PathBuf,
    cm_args: Vec<String>,
    scheduler_args: Vec<String>,
    /// `127.0.0.1:<port>` of the host API server: how client metrics tell host requests from member ones.
    host_addr: String,
}

impl KarmadaGo {
    /// Installs what Karmada needs beyond our environment (its CRDs that ours lack, the webhook and
    /// its configurations) and starts the trio with `qps_args` (`--kube-api-*`/`--cluster-api-*`; each
    /// process gets the ones it has) and `extra_args` for the controller-manager. Returns when the
    /// webhook admits through the API server and both controllers answer `/healthz`.
    pub async fn start(
        env: &TestEnv,
        qps_args: &[&str],
        extra_args: &[String],
    ) -> anyhow::Result<KarmadaGo> {
        KarmadaGo::start_with(env, qps_args, extra_args, &[], &[]).await
    }

    /// [`start`](Self::start), with `scheduler_extra` for the scheduler and `webhook_extra` for the
    /// webhook (Karmada's e2e deployment turns feature gates on in all three).
    pub async fn start_with(
        env: &TestEnv,
        qps_args: &[&str],
        extra_args: &[String],
        scheduler_extra: &[String],
        webhook_extra: &[String],
    ) -> anyhow::Result<KarmadaGo> {
        let bins = binaries()?;
        let host = env.host();
        let kube_qps: Vec<&str> = qps_args
            .iter()
            .copied()
            .filter(|a| a.starts_with("--kube-api-"))
            .collect();
        let mut webhook_args: Vec<String> = kube_qps.iter().map(ToString::to_string).collect();
        webhook_args.extend(webhook_extra.iter().cloned());
        let webhook = start_webhook(env, &webhook_args).await?;
        let kubeconfig = host.kubeconfig_path().to_path_buf();

        let mut scheduler_args = vec!["--leader-elect=false".to_string()];
        scheduler_args.extend(kube_qps.iter().map(ToString::to_string));
        scheduler_args.extend(scheduler_extra.iter().cloned());
        let mut cm_args = vec![
            "--leader-elect=false".to_string(),
            format!("--controllers={}", controllers()),
        ];
        cm_args.extend(qps_args.iter().map(ToString::to_string));
        cm_args.extend(extra_args.iter().cloned());
        let mut karmada = KarmadaGo {
            controller_manager: None,
            scheduler: None,
            webhook,
            bins,
            kubeconfig,
            cm_args,
            scheduler_args,
            host_addr: host
                .url()
                .trim_start_matches("https://")
                .trim_end_matches('/')
                .to_string(),
        };
        karmada.start_controllers()?;
        karmada.wait_ready(Duration::from_secs(120)).await?;
        Ok(karmada)
    }

    /// The processes running now, by name.
    fn processes(&self) -> Vec<(&'static str, &Kcm)> {
        [
            (
                "karmada-controller-manager",
                self.controller_manager.as_ref(),
            ),
            ("karmada-scheduler", self.scheduler.as_ref()),
            ("karmada-webhook", Some(&self.webhook)),
        ]
        .into_iter()
        .filter_map(|(name, p)| p.map(|p| (name, p)))
        .collect()
    }

    /// The process ids of the running processes.
    pub fn pids(&self) -> Vec<u32> {
        self.processes().iter().map(|(_, p)| p.pid()).collect()
    }

    /// CPU and memory of the running processes together (peak RSS: the sum of each one's peak).
    pub fn sample(&self) -> anyhow::Result<ProcessSample> {
        let mut sum = ProcessSample::default();
        for (name, p) in self.processes() {
            let s = ProcessSample::read(p.pid())
                .with_context(|| format!("read {name}'s /proc entry (has it exited?)"))?;
            sum.cpu_seconds += s.cpu_seconds;
            sum.rss_mib += s.rss_mib;
            sum.peak_rss_mib += s.peak_rss_mib;
        }
        Ok(sum)
    }

    /// The metrics of the running processes together. client-go's `rest_client_requests_total` carries no
    /// `cluster` label in Karmada: it gets `cluster=""` for requests to the host API server and
    /// `cluster="member"` for the others, so the benchmark's request counts read both alike.
    pub fn metrics(&self) -> anyhow::Result<Vec<Sample>> {
        let mut out = Vec::new();
        for (name, p) in self.processes() {
            let text = p
                .metrics()
                .with_context(|| format!("scrape {name}'s /metrics"))?;
            out.extend(parse_metrics(&text));
        }
        for s in out
            .iter_mut()
            .filter(|s| s.name == "rest_client_requests_total")
        {
            let target = if s.labels.get("host") == Some(&self.host_addr) {
                ""
            } else {
                "member"
            };
            s.labels
                .entry("cluster".to_string())
                .or_insert_with(|| target.to_string());
        }
        Ok(out)
    }

    /// Stops the controller-manager and the scheduler with SIGTERM (each must exit within 30 s) and
    /// starts them again with the same flags; the webhook keeps serving (so its request counters,
    /// reads only, still count from the session's start). Returns when both are spawned.
    pub async fn restart(&mut self) -> anyhow::Result<Instant> {
        self.stop_controllers().await?;
        self.start_controllers()
    }

    /// Stops the controller-manager and the scheduler with SIGTERM (each must exit within 30 s); the
    /// webhook keeps serving. Nothing happens to one already stopped.
    pub async fn stop_controllers(&mut self) -> anyhow::Result<()> {
        for (name, slot) in [
            ("karmada-controller-manager", &mut self.controller_manager),
            ("karmada-scheduler", &mut self.scheduler),
        ] {
            let Some(mut p) = slot.take() else { continue };
            p.signal(libc::SIGTERM);
            if p.wait_exit(Duration::from_secs(30)).await.is_none() {
                bail!(
                    "{name} did not exit within 30 s of SIGTERM; log tail:\n{}",
                    tail(&p.log(), 40)
                );
            }
        }
        Ok(())
    }

    /// Spawns the controller-manager and the scheduler with the flags of [`start`](Self::start);
    /// returns when both are spawned (an error when either still runs).
    pub fn start_controllers(&mut self) -> anyhow::Result<Instant> {
        if self.controller_manager.is_some() || self.scheduler.is_some() {
            bail!("karmada-controller-manager or karmada-scheduler is still running");
        }
        self.scheduler = Some(spawn(&self.bins[1], &self.kubeconfig, &self.scheduler_args));
        let cm = spawn(&self.bins[0], &self.kubeconfig, &self.cm_args);
        let started = cm.started;
        self.controller_manager = Some(cm);
        Ok(started)
    }

    /// Waits until the controller-manager and the scheduler answer `/healthz` (Karmada serves no
    /// `/readyz` on them); an error when they are stopped.
    pub async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let (Some(scheduler), Some(cm)) = (&mut self.scheduler, &mut self.controller_manager)
        else {
            bail!("karmada-controller-manager and karmada-scheduler are stopped");
        };
        wait_healthy("karmada-scheduler", scheduler, timeout).await?;
        wait_healthy("karmada-controller-manager", cm, timeout).await
    }

    /// The last `lines` of each process's log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        self.processes()
            .iter()
            .map(|(name, p)| format!("--- {name} ---\n{}", tail(&p.log(), lines)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Each running process's whole log, by name.
    pub fn logs(&self) -> Vec<(&'static str, String)> {
        self.processes()
            .iter()
            .map(|(name, p)| (*name, p.log()))
            .collect()
    }
}

/// Starts Karmada's `karmada-webhook` alone, as [`KarmadaGo`] runs it: installs Karmada's CRDs
/// the host lacks, serves on loopback with a certificate from the host's CA (`extra_args` added to
/// its flags), registers both webhook configurations of Karmada's chart (`mutating-config`,
/// `validating-config`, failure policy `Fail`) pointing at it, and returns once the host API
/// server admits through it (a dry-run PropagationPolicy comes back with the permanent id the
/// webhook stamps). The configurations stay registered after the process ends: the host then
/// refuses what they match.
pub async fn start_webhook(env: &TestEnv, extra_args: &[String]) -> anyhow::Result<Kcm> {
    let bin = testenv::binaries::locate_karmada("karmada-webhook")?;
    let host = env.host();
    let client = host.try_client().await?;
    install_missing_crds(&client, env.dir()).await?;

    let dir = env.dir().join("karmada-webhook");
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let (cert, key) =
        host.pki()
            .issue_serving("karmada-webhook", &["127.0.0.1", "localhost"], &dir)?;
    let file_name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let port = testenv::process::free_port()?;
    let mut args = vec![
        "--bind-address=127.0.0.1".to_string(),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", dir.display()),
        format!(
            "--tls-cert-file-name={}",
            file_name(&cert).unwrap_or_default()
        ),
        format!(
            "--tls-private-key-file-name={}",
            file_name(&key).unwrap_or_default()
        ),
    ];
    args.extend(extra_args.iter().cloned());
    let mut webhook = spawn(&bin, host.kubeconfig_path(), &args);
    wait_port(
        "karmada-webhook",
        &mut webhook,
        port,
        Duration::from_secs(60),
    )
    .await?;
    register_webhooks(&client, port, &host.ca_pem()?).await?;
    wait_admitting(&client, &webhook, Duration::from_secs(60)).await?;
    Ok(webhook)
}

fn tail(log: &str, lines: usize) -> String {
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn spawn(bin: &Path, kubeconfig: &Path, args: &[String]) -> Kcm {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Kcm::start_program(bin, kubeconfig, &args, &[])
}

/// Applies Karmada's CRDs (from the folder the build copied them to) whose names the host does not
/// serve yet; ours stay as they are.
async fn install_missing_crds(client: &Client, scratch: &Path) -> anyhow::Result<()> {
    let source = testenv::binaries::karmada_dir().join("crds");
    let present: BTreeSet<String> = Api::<CustomResourceDefinition>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("list the host's CRDs")?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let target = scratch.join("karmada-crds");
    std::fs::create_dir_all(&target).with_context(|| format!("create {}", target.display()))?;
    let entries = std::fs::read_dir(&source).with_context(|| {
        format!(
            "read Karmada's CRDs in {} (`make karmada-binaries` copies them there)",
            source.display()
        )
    })?;
    let mut missing = 0;
    for entry in entries {
        let path = entry?.path();
        let Some(file) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        // Files are named `<group>_<plural>.yaml`; the CRD is `<plural>.<group>`.
        let Some((group, plural)) = file.trim_end_matches(".yaml").split_once('_') else {
            continue;
        };
        if !present.contains(&format!("{plural}.{group}")) {
            std::fs::copy(&path, target.join(file))
                .with_context(|| format!("copy {}", path.display()))?;
            missing += 1;
        }
    }
    if missing > 0 {
        testenv::install_crds_from(client, &target)
            .await
            .context("install Karmada's CRDs that ours lack")?;
    }
    Ok(())
}

/// One webhook name of Karmada's chart: served at `/mutate-<path>` when `mutate` lists operations and
/// at `/validate-<path>` when `validate` does, for `resource` of `group` in `scope`.
struct Hook {
    name: &'static str,
    path: &'static str,
    group: &'static str,
    resource: &'static str,
    scope: &'static str,
    mutate: &'static [&'static str],
    validate: &'static [&'static str],
}

const CU: &[&str] = &["CREATE", "UPDATE"];
const C: &[&str] = &["CREATE"];
const NO: &[&str] = &[];
const POLICY: &str = "policy.karmada.io";
const WORK: &str = "work.karmada.io";
const CONFIG: &str = "config.karmada.io";
const NET: &str = "networking.karmada.io";
const NS: &str = "Namespaced";
const CLUSTER: &str = "Cluster";

/// The webhooks Karmada's chart registers (deletion protection is added apart: it has an object
/// selector): name, path, group, resource, scope, mutating operations, validating operations.
#[rustfmt::skip]
const HOOKS: &[Hook] = &[
    Hook { name: "propagationpolicy.karmada.io", path: "propagationpolicy", group: POLICY, resource: "propagationpolicies", scope: NS, mutate: CU, validate: CU },
    Hook { name: "clusterpropagationpolicy.karmada.io", path: "clusterpropagationpolicy", group: POLICY, resource: "clusterpropagationpolicies", scope: CLUSTER, mutate: CU, validate: CU },
    Hook { name: "overridepolicy.karmada.io", path: "overridepolicy", group: POLICY, resource: "overridepolicies", scope: NS, mutate: CU, validate: CU },
    Hook { name: "clusteroverridepolicy.karmada.io", path: "clusteroverridepolicy", group: POLICY, resource: "clusteroverridepolicies", scope: CLUSTER, mutate: NO, validate: CU },
    Hook { name: "resourcebinding.karmada.io", path: "resourcebinding", group: WORK, resource: "resourcebindings", scope: NS, mutate: C, validate: CU },
    Hook { name: "clusterresourcebinding.karmada.io", path: "clusterresourcebinding", group: WORK, resource: "clusterresourcebindings", scope: CLUSTER, mutate: C, validate: NO },
    Hook { name: "work.karmada.io", path: "work", group: WORK, resource: "works", scope: NS, mutate: CU, validate: NO },
    Hook { name: "autoscaling.karmada.io", path: "federatedhpa", group: "autoscaling.karmada.io", resource: "federatedhpas", scope: NS, mutate: CU, validate: NO },
    Hook { name: "multiclusterservice.karmada.io", path: "multiclusterservice", group: NET, resource: "multiclusterservices", scope: NS, mutate: CU, validate: CU },
    Hook { name: "multiclusteringress.karmada.io", path: "multiclusteringress", group: NET, resource: "multiclusteringresses", scope: NS, mutate: NO, validate: CU },
    Hook { name: "config.karmada.io", path: "resourceinterpreterwebhookconfiguration", group: CONFIG, resource: "resourceinterpreterwebhookconfigurations", scope: CLUSTER, mutate: NO, validate: CU },
    Hook { name: "resourceinterpretercustomization.karmada.io", path: "resourceinterpretercustomization", group: CONFIG, resource: "resourceinterpretercustomizations", scope: CLUSTER, mutate: NO, validate: CU },
    Hook { name: "federatedresourcequota.karmada.io", path: "federatedresourcequota", group: POLICY, resource: "federatedresourcequotas", scope: NS, mutate: NO, validate: CU },
];

fn rules(h: &Hook, operations: &[&str]) -> Vec<RuleWithOperations> {
    vec![RuleWithOperations {
        operations: Some(operations.iter().map(ToString::to_string).collect()),
        api_groups: Some(vec![h.group.to_string()]),
        api_versions: Some(vec!["*".to_string()]),
        resources: Some(vec![h.resource.to_string()]),
        scope: Some(h.scope.to_string()),
    }]
}

fn client_config(port: u16, path: &str, ca: &[u8]) -> WebhookClientConfig {
    WebhookClientConfig {
        url: Some(format!("https://127.0.0.1:{port}{path}")),
        ca_bundle: Some(ByteString(ca.to_vec())),
        service: None,
    }
}

/// Registers Karmada's mutating and validating webhook configurations (as its chart does, with the
/// same names, rules, failure policy and timeouts) pointing at `https://127.0.0.1:<port>`.
async fn register_webhooks(client: &Client, port: u16, ca: &[u8]) -> anyhow::Result<()> {
    let v1 = || vec!["v1".to_string()];
    let mutating = MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some("mutating-config".to_string()),
            ..ObjectMeta::default()
        },
        webhooks: Some(
            HOOKS
                .iter()
                .filter(|h| !h.mutate.is_empty())
                .map(|h| MutatingWebhook {
                    name: h.name.to_string(),
                    rules: Some(rules(h, h.mutate)),
                    client_config: client_config(port, &format!("/mutate-{}", h.path), ca),
                    failure_policy: Some("Fail".to_string()),
                    side_effects: "None".to_string(),
                    admission_review_versions: v1(),
                    timeout_seconds: Some(3),
                    ..MutatingWebhook::default()
                })
                .collect(),
        ),
    };
    let mut validating: Vec<ValidatingWebhook> = HOOKS
        .iter()
        .filter(|h| !h.validate.is_empty())
        .map(|h| ValidatingWebhook {
            name: h.name.to_string(),
            rules: Some(rules(h, h.validate)),
            client_config: client_config(port, &format!("/validate-{}", h.path), ca),
            failure_policy: Some("Fail".to_string()),
            side_effects: if h.resource == "resourcebindings" {
                "NoneOnDryRun"
            } else {
                "None"
            }
            .to_string(),
            admission_review_versions: v1(),
            timeout_seconds: Some(if h.resource == "resourceinterpretercustomizations" {
                10
            } else {
                3
            }),
            ..ValidatingWebhook::default()
        })
        .collect();
    validating.push(ValidatingWebhook {
        name: "resourcedeletionprotection.karmada.io".to_string(),
        rules: Some(vec![RuleWithOperations {
            operations: Some(vec!["DELETE".to_string()]),
            api_groups: Some(vec!["*".to_string()]),
            api_versions: Some(vec!["*".to_string()]),
            resources: Some(vec!["*".to_string()]),
            scope: Some("*".to_string()),
        }]),
        client_config: client_config(port, "/validate-resourcedeletionprotection", ca),
        object_selector: Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "resourcetemplate.karmada.io/deletion-protected".to_string(),
                operator: "Exists".to_string(),
                values: None,
            }]),
            match_labels: None,
        }),
        failure_policy: Some("Fail".to_string()),
        side_effects: "None".to_string(),
        admission_review_versions: v1(),
        timeout_seconds: Some(3),
        ..ValidatingWebhook::default()
    });
    let validating = ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some("validating-config".to_string()),
            ..ObjectMeta::default()
        },
        webhooks: Some(validating),
    };
    let params = PatchParams::apply("karmada-rs-bench").force();
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch("mutating-config", &params, &Patch::Apply(&mutating))
        .await
        .context("register MutatingWebhookConfiguration mutating-config")?;
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .patch("validating-config", &params, &Patch::Apply(&validating))
        .await
        .context("register ValidatingWebhookConfiguration validating-config")?;
    Ok(())
}

/// Waits until webhook `name` accepts TCP connections on `port`.
pub(crate) async fn wait_port(
    name: &str,
    p: &mut Kcm,
    port: u16,
    timeout: Duration,
) -> anyhow::Result<()> {
    let what = format!("listen on 127.0.0.1:{port}");
    wait_process(name, p, &what, timeout, move || async move {
        let connect = tokio::time::timeout(
            Duration::from_secs(1),
            tokio::net::TcpStream::connect(("127.0.0.1", port)),
        )
        .await;
        matches!(connect, Ok(Ok(_)))
    })
    .await
}

/// Waits until `p` answers `/healthz` with 200.
async fn wait_healthy(name: &str, p: &mut Kcm, timeout: Duration) -> anyhow::Result<()> {
    let port = p.probe_port;
    wait_process(name, p, "answer /healthz", timeout, move || async move {
        tokio::task::spawn_blocking(move || {
            crate::controller_manager::http_get(port, "/healthz").map(|(c, _)| c)
        })
        .await
        .ok()
        .flatten()
            == Some(200)
    })
    .await
}

/// Polls `up` every 100 ms until it holds; an error naming process `name`, `what` it was to do and
/// its log tail when it exits first or `timeout` passes.
async fn wait_process<F, Fut>(
    name: &str,
    p: &mut Kcm,
    what: &str,
    timeout: Duration,
    mut up: F,
) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if up().await {
            return Ok(());
        }
        if let Some(status) = p.try_exit() {
            bail!(
                "{name} exited ({status}) before it could {what}; log tail:\n{}",
                tail(&p.log(), 60)
            );
        }
        if Instant::now() > deadline {
            bail!(
                "{name} did not {what} within {timeout:?}; log tail:\n{}",
                tail(&p.log(), 60)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the host API server calls the mutating webhook: a dry-run PropagationPolicy comes
/// back with the permanent-id label the webhook stamps.
async fn wait_admitting(client: &Client, webhook: &Kcm, timeout: Duration) -> anyhow::Result<()> {
    let api: Api<PropagationPolicy> = Api::namespaced(client.clone(), "default");
    let policy: PropagationPolicy = serde_json::from_value(serde_json::json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "karmada-webhook-probe", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "probe"}],
            "placement": {},
        },
    }))
    .context("build the webhook probe policy")?;
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = Instant::now() + timeout;
    loop {
        let last = match api.create(&params, &policy).await {
            Ok(p)
                if p.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(POLICY_PERMANENT_ID)) =>
            {
                return Ok(());
            }
            Ok(_) => "the policy came back without the webhook's permanent id".to_string(),
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            bail!(
                "the host API server did not admit through karmada-webhook within {timeout:?} ({last}); \
                 webhook log tail:\n{}",
                tail(&webhook.log(), 40)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
