//! The Helm chart `charts/karmada-controller-manager` against a real API server: `helm lint`, `helm
//! template` output accepted by a server-side dry-run apply, `helm install` (CRDs established, the
//! Deployment and RBAC as rendered), the installed Deployment's container run as written
//! ([`karmada_e2e::pod_run`]: its command line, `$(POD_IP)`, probes and ports; the chart's
//! ServiceAccount's token, so exactly the chart's RBAC) answers its probes, becomes leader and does its
//! job, then `helm upgrade` and `helm uninstall`. Both charts' `appVersion` and default image tag are
//! the crate version.
//!
//! `helm` and `kubectl` come from `hack/install-helm.sh` (`make test-tools`, run by `make test`), or from
//! `$HELM` / `$KUBECTL`. A missing one fails the tests with the command that installs it.
// test-runner: alone. The Deployments run as written bind their fixed ports (8080, 10357) on every
// address of this machine; the other file that does so must not run beside this one.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use karmada_e2e::controller_manager::*;
use karmada_e2e::pod_run::{Pod, ProbeKind};
use karmada_e2e::tools::tool;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};

/// `--set` for the controllers the run-as-ServiceAccount test enables.
/// (Not `namespace`: it would propagate the test's namespaces as Works, which only the execution
/// controller could finalize, and the Cluster's deletion waits for its Works.)
const RUN_CONTROLLERS: &str = "controllers={cluster,clusterStatus,binding}";

fn env() -> &'static testenv::TestEnv {
    testenv::shared(testenv::EnvOptions {
        install_crds: false,
        ..testenv::EnvOptions::default()
    })
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn chart_dir() -> PathBuf {
    workspace().join("charts/karmada-controller-manager")
}

/// A folder for helm's cache/config/data, so tests never touch the user's helm settings.
fn helm_home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let p = std::env::temp_dir().join(format!("karmada-rs-helm-{}", std::process::id()));
        std::fs::create_dir_all(&p).expect("create helm home");
        p
    })
}

/// Runs `program args` (stdin from `input`), returns stdout; panics with stderr on failure.
fn run(program: &Path, args: &[&str], input: Option<&str>) -> String {
    let (ok, out, err) = try_run(program, args, input);
    assert!(
        ok,
        "{} {} failed:\n{err}\n{out}",
        program.display(),
        args.join(" ")
    );
    out
}

fn try_run(program: &Path, args: &[&str], input: Option<&str>) -> (bool, String, String) {
    try_run_with(program, args, input, &[])
}

fn try_run_with(
    program: &Path,
    args: &[&str],
    input: Option<&str>,
    envs: &[(&str, &std::ffi::OsStr)],
) -> (bool, String, String) {
    let home = helm_home();
    let mut child = Command::new(program)
        .args(args)
        .envs(envs.iter().copied())
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env_remove("KUBECONFIG")
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    if let Some(text) = input {
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(text.as_bytes()).expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn helm(args: &[&str]) -> String {
    run(&tool("helm"), args, None)
}

fn host_kubeconfig() -> String {
    env().host().kubeconfig_path().display().to_string()
}

/// Every CRD file name in `dir`, sorted.
fn yaml_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(std::result::Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| Path::new(n).extension().is_some_and(|e| e == "yaml"))
        .collect()
}

/// `[workspace.package] version` in the root `Cargo.toml`: the version of every crate.
fn crate_version() -> String {
    let manifest =
        std::fs::read_to_string(workspace().join("Cargo.toml")).expect("read Cargo.toml");
    manifest
        .split("[workspace.package]")
        .nth(1)
        .and_then(|section| {
            section
                .lines()
                .take_while(|l| !l.starts_with('['))
                .find_map(|l| l.trim().strip_prefix("version = "))
        })
        .map(|v| v.trim_matches('"').to_owned())
        .expect("Cargo.toml has [workspace.package] version")
}

/// Each chart's `appVersion` is the crate version, and the image its Deployment renders with the
/// default values is tagged with it (`image.tag` empty, defaulting to `appVersion`), as the image
/// `make image` builds (`IMAGE_TAG` from `Cargo.toml`): a release bumps one number.
#[test]
fn chart_app_version_and_image_tag_follow_the_crate_version() {
    let version = crate_version();
    let charts: [(&str, &[&str]); 2] = [
        ("karmada-controller-manager", &[]),
        (
            "karmada-agent",
            &[
                "--set",
                "clusterName=m3",
                "--set",
                "karmadaKubeconfig.content=x",
            ],
        ),
    ];
    for (name, sets) in charts {
        let chart = workspace().join("charts").join(name).display().to_string();
        let meta = helm(&["show", "chart", &chart]);
        let app_version = meta
            .lines()
            .find_map(|l| l.strip_prefix("appVersion: "))
            .map(|v| v.trim().trim_matches('"'));
        assert_eq!(app_version, Some(version.as_str()), "{name}: {meta}");
        let mut args = vec!["template", &chart];
        args.extend(sets);
        let rendered = helm(&args);
        let images: Vec<&str> = rendered
            .lines()
            .filter_map(|l| l.trim().strip_prefix("image: "))
            .map(|i| i.trim_matches('"'))
            .collect();
        assert!(!images.is_empty(), "{name} renders no image:\n{rendered}");
        for image in images {
            assert!(
                image.ends_with(&format!(":{version}")),
                "{name} renders {image}, not tagged {version}"
            );
        }
    }
    // What `make image` tags the image with, evaluated by make itself.
    let tag = Command::new("make")
        .current_dir(workspace())
        .args([
            "--no-print-directory",
            "--eval=print-image-tag: ; @echo $(IMAGE_TAG)",
            "print-image-tag",
        ])
        .env_remove("IMAGE_TAG")
        .output()
        .expect("run make");
    assert!(
        tag.status.success(),
        "{}",
        String::from_utf8_lossy(&tag.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&tag.stdout).trim(),
        version,
        "make image's IMAGE_TAG"
    );
}

/// Whether a file of `crds/` is one of the admission policies kept beside the CRDs (the chart holds
/// them in `files/` and renders them from a template: Helm's `crds/` takes CRDs only).
fn is_admission_policy(name: &str) -> bool {
    name.starts_with("admissionregistration.k8s.io_")
}

/// The chart's CRDs are the workspace's: in its `crds/` every CRD but the Cluster CRD, which is in
/// `files/crds/` (a template installs it unless `clusterCRD.install=false`); the admission policies in
/// `files/` (rendered from a template).
#[test]
fn chart_crds_are_the_workspace_crds() {
    let top = workspace().join("crds");
    let fix = "run `make chart-crds` (or `make crds`) to copy crds/ into the chart";
    let cluster = "cluster.karmada.io_clusters.yaml";
    let crd = |n: &str| !is_admission_policy(n) && n != cluster;
    type Belongs<'a> = &'a dyn Fn(&str) -> bool;
    let places: [(&str, Belongs); 3] = [
        ("crds", &crd),
        ("files/crds", &|n: &str| n == cluster),
        ("files", &is_admission_policy),
    ];
    for (folder, belongs) in places {
        let chart = chart_dir().join(folder);
        let expected: BTreeSet<String> = yaml_files(&top)
            .into_iter()
            .filter(|n| belongs(n))
            .collect();
        // files/ holds other templates' inputs too: only the policies are compared there.
        let found: BTreeSet<String> = yaml_files(&chart)
            .into_iter()
            .filter(|n| folder != "files" || is_admission_policy(n))
            .collect();
        assert!(!expected.is_empty(), "no {folder} files in crds/");
        assert_eq!(
            expected, found,
            "charts/karmada-controller-manager/{folder}/ lists other files than crds/: {fix}"
        );
        for name in &expected {
            let a = std::fs::read(top.join(name)).expect("read crd");
            let b = std::fs::read(chart.join(name)).expect("read chart copy");
            assert!(
                a == b,
                "charts/karmada-controller-manager/{folder}/{name} differs from crds/{name}: {fix}"
            );
        }
    }
}

#[test]
fn helm_lint_is_clean_and_bad_values_fail() {
    let chart = chart_dir().display().to_string();
    let out = helm(&["lint", "--strict", &chart]);
    assert!(out.contains("0 chart(s) failed"), "{out}");
    let out = helm(&[
        "lint",
        "--strict",
        &chart,
        "--set",
        "karmadaApiServer.mode=kubeconfig",
        "--set",
        "karmadaApiServer.kubeconfig.content=x",
        "--set",
        "metrics.serviceMonitor.enabled=true",
    ]);
    assert!(out.contains("0 chart(s) failed"), "{out}");
    // values.schema.json rejects bad values before anything renders.
    for bad in [
        "controllers[0]=clusterStatuz",
        "log.format=xml",
        "karmadaApiServer.mode=incluster",
        "concurrency.workSyncs=0",
        "leaderElection.leaseDuration=15",
        "nope=1",
        "rbac.memberSecretsNamespace=karmada-cluster",
    ] {
        let (ok, _, err) = try_run(
            &tool("helm"),
            &["template", "t", &chart, "--set", bad],
            None,
        );
        assert!(!ok, "helm template accepted --set {bad}");
        assert!(
            err.contains("schema") || err.contains("values don't meet"),
            "--set {bad}: {err}"
        );
    }
    // kubeconfig mode without a kubeconfig says what is missing.
    let (ok, _, err) = try_run(
        &tool("helm"),
        &[
            "template",
            "t",
            &chart,
            "--set",
            "karmadaApiServer.mode=kubeconfig",
        ],
        None,
    );
    assert!(!ok && err.contains("existingSecret"), "{err}");
}

/// The scheduler and estimator values render their flags only when set (a default install renders
/// none, so the binary's defaults, which are Karmada's, hold), a TLS Secret is mounted where the
/// file flags point, the binary knows every rendered flag, and bad values are refused by the schema.
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: every value set, then the defaults and bad values"
)]
fn scheduler_and_estimator_values_render_their_flags_only_when_set() {
    let chart = chart_dir().display().to_string();
    let args_of = |sets: &[&str]| -> (Vec<String>, Deployment) {
        let mut args = vec![
            "template",
            "t",
            &chart,
            "--show-only",
            "templates/deployment.yaml",
        ];
        args.extend(sets);
        let rendered = helm(&args);
        let deployment: Deployment = serde_saphyr::from_str(&rendered).expect("a Deployment");
        let pod = deployment.spec.template.spec.clone().unwrap();
        (
            pod.containers[0].args.clone().unwrap_or_default(),
            deployment,
        )
    };
    let scheduler_flag = |a: &String| {
        a.starts_with("--scheduler-") || a.starts_with("--plugins") || a.contains("estimator")
    };
    let (defaults, _) = args_of(&[]);
    let rendered: Vec<&String> = defaults.iter().filter(|a| scheduler_flag(a)).collect();
    assert!(rendered.is_empty(), "{rendered:?}");

    let (args, deployment) = args_of(&[
        "--set",
        "scheduler.name=second-scheduler",
        "--set",
        "scheduler.plugins={*,-ClusterLocality}",
        "--set",
        "scheduler.estimator.enabled=true",
        "--set",
        "scheduler.estimator.disableInPullMode=true",
        "--set",
        "scheduler.estimator.timeout=5s",
        "--set",
        "scheduler.estimator.port=10353",
        "--set",
        "scheduler.estimator.serviceNamespace=estimators",
        "--set",
        "scheduler.estimator.servicePrefix=estimator",
        "--set",
        "scheduler.estimator.tls.existingSecret=estimator-client",
        "--set",
        "scheduler.estimator.tls.caFile=ca.crt",
        "--set",
        "scheduler.estimator.tls.certFile=tls.crt",
        "--set",
        "scheduler.estimator.tls.keyFile=tls.key",
        "--set",
        "scheduler.estimator.tls.insecureSkipVerify=true",
    ]);
    let rendered: Vec<&str> = args
        .iter()
        .filter(|a| scheduler_flag(a))
        .map(String::as_str)
        .collect();
    assert_eq!(
        rendered,
        [
            "--scheduler-name=second-scheduler",
            "--plugins=*,-ClusterLocality",
            "--enable-scheduler-estimator=true",
            "--disable-scheduler-estimator-in-pull-mode=true",
            "--scheduler-estimator-timeout=5s",
            "--scheduler-estimator-port=10353",
            "--scheduler-estimator-service-namespace=estimators",
            "--scheduler-estimator-service-prefix=estimator",
            "--scheduler-estimator-ca-file=/etc/karmada/scheduler-estimator-tls/ca.crt",
            "--scheduler-estimator-cert-file=/etc/karmada/scheduler-estimator-tls/tls.crt",
            "--scheduler-estimator-key-file=/etc/karmada/scheduler-estimator-tls/tls.key",
            "--insecure-skip-estimator-verify=true",
        ]
    );
    let pod = deployment.spec.template.spec.unwrap();
    let mount = pod.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == "scheduler-estimator-tls")
        .expect("the TLS Secret's mount");
    assert_eq!(
        (mount.mount_path.as_str(), mount.read_only),
        ("/etc/karmada/scheduler-estimator-tls", Some(true))
    );
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "scheduler-estimator-tls")
        .expect("the TLS Secret's volume");
    assert_eq!(
        volume
            .secret
            .as_ref()
            .and_then(|s| s.secret_name.as_deref()),
        Some("estimator-client")
    );
    // Without the Secret the file values are paths, verbatim.
    let (args, _) = args_of(&["--set", "scheduler.estimator.tls.caFile=/pki/ca.crt"]);
    assert!(
        args.iter()
            .any(|a| a == "--scheduler-estimator-ca-file=/pki/ca.crt"),
        "{args:?}"
    );
    // The binary knows every flag rendered (clap refuses an unknown one before it prints help).
    let mut known: Vec<&str> = rendered;
    known.push("--help");
    let (ok, out, err) = try_run(binary(), &known, None);
    assert!(
        ok && out.contains("Scheduler estimator flags"),
        "{err}{out}"
    );

    for bad in [
        "scheduler.estimator.enabled=yes",
        "scheduler.estimator.timeout=3x",
        "scheduler.estimator.port=70000",
        "scheduler.estimator.tls.caFile=1",
        "scheduler.plugins={Cluster Locality}",
        "scheduler.estimator.tls.nope=x",
    ] {
        let (ok, _, err) = try_run(
            &tool("helm"),
            &["template", "t", &chart, "--set", bad],
            None,
        );
        assert!(!ok, "helm template accepted --set {bad}");
        assert!(err.contains("values don't meet"), "--set {bad}: {err}");
    }
}

/// `charts/karmada-agent`: lint-clean for both targets, values.schema.json rejects bad values, a
/// missing cluster name or kubeconfig is named, and each target renders only its own objects (the
/// agent with the controller-manager chart's security context; the Karmada-side RBAC confined to the
/// cluster's own names). `pull_mode.rs` runs the real agent with exactly these rules.
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
fn agent_chart_lints_renders_both_targets_and_rejects_bad_values() {
    let chart = workspace()
        .join("charts/karmada-agent")
        .display()
        .to_string();
    let member = [
        "--set",
        "clusterName=m3",
        "--set",
        "karmadaKubeconfig.content=x",
    ];
    let karmada = [
        "--set",
        "clusterName=m3",
        "--set",
        "target=karmadaApiServer",
    ];
    for sets in [&member[..], &karmada[..]] {
        let mut args = vec!["lint", "--strict", &chart];
        args.extend(sets);
        let out = helm(&args);
        assert!(out.contains("0 chart(s) failed"), "{out}");
    }
    for bad in [
        "controllers[0]=clusterStatuz",
        "target=member",
        "clusterName=Bad_Name",
        "log.format=xml",
        "clusterLease.duration=40",
        "workSyncs=0",
        "nope=1",
    ] {
        let mut args = vec!["template", "t", &chart];
        args.extend(member);
        args.extend(["--set", bad]);
        let (ok, _, err) = try_run(&tool("helm"), &args, None);
        assert!(!ok, "helm template accepted --set {bad}");
        assert!(
            err.contains("schema") || err.contains("values don't meet"),
            "--set {bad}: {err}"
        );
    }
    let (ok, _, err) = try_run(
        &tool("helm"),
        &[
            "template",
            "t",
            &chart,
            "--set",
            "karmadaKubeconfig.content=x",
        ],
        None,
    );
    assert!(!ok && err.contains("clusterName is required"), "{err}");
    let (ok, _, err) = try_run(
        &tool("helm"),
        &["template", "t", &chart, "--set", "clusterName=m3"],
        None,
    );
    assert!(!ok && err.contains("karmadaKubeconfig"), "{err}");

    let kinds = |out: &str| -> BTreeSet<String> {
        out.lines()
            .filter_map(|l| l.strip_prefix("kind: "))
            .map(ToString::to_string)
            .collect()
    };
    let mut args = vec!["template", "agent", &chart];
    args.extend(member);
    let out = helm(&args);
    assert_eq!(
        kinds(&out),
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "Secret",
            "ServiceAccount"
        ]
        .map(String::from)
        .into(),
        "{out}"
    );
    assert!(out.contains("- --cluster-name=m3"), "{out}");
    let kcm_values = std::fs::read_to_string(chart_dir().join("values.yaml")).unwrap();
    let agent_values =
        std::fs::read_to_string(workspace().join("charts/karmada-agent/values.yaml")).unwrap();
    let section = |v: &str, key: &str| -> String {
        v.split(&format!("\n{key}:\n"))
            .nth(1)
            .and_then(|rest| rest.split("\n\n").next())
            .unwrap_or_default()
            .to_owned()
    };
    for key in ["podSecurityContext", "securityContext"] {
        assert_eq!(
            section(&agent_values, key),
            section(&kcm_values, key),
            "{key}"
        );
        assert!(!section(&agent_values, key).is_empty(), "{key}");
    }
    let mut args = vec!["template", "agent", &chart];
    args.extend(karmada);
    let out = helm(&args);
    assert_eq!(
        kinds(&out),
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "Namespace",
            "Role",
            "RoleBinding",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"
        ]
        .map(String::from)
        .into(),
        "{out}"
    );
    assert!(out.contains("name: system:karmada:agent:m3"), "{out}");
    assert!(
        !out.contains("\"*\""),
        "no wildcard on the Karmada API server:\n{out}"
    );
}

/// The schema's controller names are exactly the binary's (from its `--help`): `*`, the implemented
/// ones, and `-name` for every Karmada name.
#[test]
fn schema_knows_the_binarys_controllers() {
    let (code, help, _) = run_to_exit(&["--help"], Duration::from_secs(60));
    assert_eq!(code, Some(0));
    // A line absent from --help lists nothing (`Not implemented yet` is left out when empty).
    let listed = |prefix: &str| -> BTreeSet<String> {
        let Some(line) = help.lines().find_map(|l| l.trim().strip_prefix(prefix)) else {
            return BTreeSet::new();
        };
        line.split_once(": ")
            .map_or(line, |(_, names)| names)
            .trim_end_matches('.')
            .split(", ")
            .map(str::to_string)
            .collect()
    };
    let binary = listed("All controllers: ");
    let missing = listed("Not implemented yet");
    assert!(
        binary.contains("cluster") && missing.is_subset(&binary) && !missing.contains("cluster"),
        "{binary:?} {missing:?}"
    );
    let implemented: BTreeSet<String> = binary.difference(&missing).cloned().collect();
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(chart_dir().join("values.schema.json")).expect("read schema"),
    )
    .expect("schema is JSON");
    let entries: Vec<&str> = schema["properties"]["controllers"]["items"]["enum"]
        .as_array()
        .expect("controllers enum")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    let mut fix: Vec<String> = vec!["*".into()];
    fix.extend(implemented.iter().cloned());
    fix.extend(binary.iter().map(|n| format!("-{n}")));
    let mut expected = fix.clone();
    expected.sort();
    let mut got: Vec<String> = entries.iter().map(ToString::to_string).collect();
    got.sort();
    assert_eq!(
        got,
        expected,
        "values.schema.json's controllers enum differs from the binary's; set \
         properties.controllers.items.enum in charts/karmada-controller-manager/values.schema.json to\n{}",
        serde_json::to_string(&fix).unwrap_or_default()
    );
    // The chart's default list is accepted by the schema: it only asks for implemented controllers.
    let values = std::fs::read_to_string(chart_dir().join("values.yaml")).expect("values.yaml");
    let defaults: serde_json::Value = serde_saphyr::from_str(&values).expect("values.yaml is YAML");
    for entry in defaults["controllers"]
        .as_array()
        .expect("controllers list")
    {
        let name = entry.as_str().unwrap_or_default();
        assert!(
            entries.contains(&name),
            "default controller entry {name:?} is not available in the binary"
        );
    }
}

#[tokio::test]
async fn helm_template_passes_server_side_dry_run() {
    let env = env();
    let client = env.host().client().await;
    // The ServiceMonitor kind must be known for the dry run of the optional ServiceMonitor.
    install_minimal_crd(
        &client,
        "monitoring.coreos.com",
        "v1",
        "ServiceMonitor",
        "servicemonitors",
        true,
    )
    .await;
    // And the PrometheusRule kind, for the optional alerts.
    install_minimal_crd(
        &client,
        "monitoring.coreos.com",
        "v1",
        "PrometheusRule",
        "prometheusrules",
        true,
    )
    .await;
    let ns = fresh_namespace(&client, "chart-dry").await;
    let chart = chart_dir().display().to_string();
    let kubeconfig = host_kubeconfig();
    for extra in [
        vec![],
        vec![
            "--set",
            "karmadaApiServer.mode=kubeconfig",
            "--set",
            "karmadaApiServer.kubeconfig.content=apiVersion: v1",
            "--set",
            "metrics.serviceMonitor.enabled=true",
            "--set",
            "featureGates.PropagateDeps=true",
            "--set",
            "monitoring.grafanaDashboard.enabled=true",
            "--set",
            "monitoring.prometheusRule.enabled=true",
            "--set",
            "profiling.enabled=true",
        ],
        vec![
            "--set",
            "podDisruptionBudget.enabled=false",
            "--set",
            "leaderElection.enabled=false",
            "--set",
            "replicaCount=1",
            "--set",
            "profiling.enabled=true",
        ],
    ] {
        let mut args = vec!["template", "dry", &chart, "-n", &ns, "--include-crds"];
        args.extend(extra.iter().copied());
        let manifests = helm(&args);
        assert!(manifests.contains("kind: CustomResourceDefinition"));
        assert!(manifests.contains("kind: Deployment"));
        // The Cluster CRD belongs on the Karmada API server: rendered in inCluster mode only.
        let kubeconfig_mode = extra.contains(&"karmadaApiServer.mode=kubeconfig");
        assert_eq!(
            manifests.contains("  name: clusters.cluster.karmada.io\n"),
            !kubeconfig_mode,
            "the Cluster CRD rendered in the wrong mode ({extra:?})"
        );
        let out = run(
            &tool("kubectl"),
            &[
                "--kubeconfig",
                &kubeconfig,
                "apply",
                "--server-side",
                "--dry-run=server",
                "--field-manager=chart-test",
                // Another test's release may own the cluster-scoped agent-restriction policy on this
                // API server: a dry run checks the manifests, not who owns their fields.
                "--force-conflicts",
                "-f",
                "-",
            ],
            Some(&manifests),
        );
        assert!(
            out.contains(
                "deployment.apps/dry-karmada-controller-manager serverside-applied (server dry run)"
            ),
            "{out}"
        );
    }
    // Nothing was created.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    assert!(
        deployments
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until every CRD of crds/ is established.
async fn wait_for_crds(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for file in yaml_files(&workspace().join("crds"))
        .into_iter()
        .filter(|f| !is_admission_policy(f))
    {
        let name = file
            .split_once('_')
            .map(|(group, rest)| format!("{}.{group}", rest.trim_end_matches(".yaml")))
            .expect("crd file name <group>_<plural>.yaml");
        wait_until(
            &format!("CRD {name} established"),
            Duration::from_secs(30),
            || {
                let crds = crds.clone();
                let name = name.clone();
                async move {
                    crds.get_opt(&name)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|c| c.status)
                        .and_then(|s| s.conditions)
                        .is_some_and(|c| {
                            c.iter()
                                .any(|c| c.type_ == "Established" && c.status == "True")
                        })
                }
            },
        )
        .await;
    }
}

/// The chart's ServiceAccount has the rights the controllers use and no others, as the API server
/// decides them (`kubectl auth can-i` impersonating the account, not a reading of the rendered rules).
#[tokio::test]
async fn service_account_has_only_the_rights_the_code_uses() {
    let client = env().host().client().await;
    let ns = fresh_namespace(&client, "chart-rights").await;
    let chart = chart_dir().display().to_string();
    let kubeconfig = host_kubeconfig();
    // With the CRDs (helm skips those another release already installed), so that kubectl resolves
    // Karmada's kinds to their real groups.
    helm(&[
        "install",
        "rights",
        &chart,
        "-n",
        &ns,
        "--kubeconfig",
        &kubeconfig,
    ]);
    wait_for_crds(&client).await;
    assert_effective_rights(&kubeconfig, &ns, "rights-karmada-controller-manager");
    helm(&[
        "uninstall",
        "rights",
        "-n",
        &ns,
        "--kubeconfig",
        &kubeconfig,
    ]);
}

/// What `service_account` in `ns` may and may not do, asked of the API server as that account.
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
fn assert_effective_rights(kubeconfig: &str, ns: &str, service_account: &str) {
    let user = format!("system:serviceaccount:{ns}:{service_account}");
    let can = |verb: &str, resource: &str, namespace: Option<&str>| -> bool {
        let (resource, subresource) = match resource.split_once('/') {
            // `leases/<name>` names one object; `<kind>/<subresource>` otherwise.
            Some((r, name)) if r.starts_with("leases") => (format!("{r}/{name}"), None),
            Some((r, sub)) => (r.to_string(), Some(sub)),
            None => (resource.to_string(), None),
        };
        let mut args = vec![
            "--kubeconfig",
            kubeconfig,
            "auth",
            "can-i",
            verb,
            &resource,
            "--as",
            &user,
        ];
        if let Some(sub) = subresource {
            args.extend(["--subresource", sub]);
        }
        match namespace {
            Some(n) => args.extend(["-n", n]),
            None => args.push("--all-namespaces"),
        }
        let (ok, out, err) = try_run(&tool("kubectl"), &args, None);
        assert!(
            !err.contains("doesn't have a resource type"),
            "kubectl {}: {err}",
            args.join(" ")
        );
        let answer = out.trim();
        assert!(
            answer.starts_with("yes") || answer.starts_with("no"),
            "kubectl {}: {out}{err}",
            args.join(" ")
        );
        ok && answer.starts_with("yes")
    };
    let other = Some("default");
    let allowed: &[(&str, &str, Option<&str>)] = &[
        // The detector reads and patches every propagatable kind (Secrets are one of them).
        ("get", "deployments.apps", other),
        ("list", "deployments.apps", None),
        ("watch", "deployments.apps", None),
        ("patch", "deployments.apps", other),
        ("list", "secrets", None),
        ("patch", "propagationpolicies.policy.karmada.io", other),
        (
            "patch",
            "clusterpropagationpolicies.policy.karmada.io",
            None,
        ),
        ("patch", "clusters.cluster.karmada.io", None),
        // Status: templates' (bindingStatus) and Clusters' (clusterStatus) are patched; bindings' and
        // Works' written in full.
        ("patch", "deployments.apps/status", other),
        ("patch", "clusters.cluster.karmada.io/status", None),
        // remedy: watches Remedies (and patches Clusters' status, above).
        ("list", "remedies.remedy.karmada.io", None),
        ("watch", "remedies.remedy.karmada.io", None),
        ("update", "resourcebindings.work.karmada.io/status", other),
        (
            "update",
            "clusterresourcebindings.work.karmada.io/status",
            None,
        ),
        ("update", "works.work.karmada.io/status", other),
        // Its own objects.
        ("create", "resourcebindings.work.karmada.io", other),
        ("update", "resourcebindings.work.karmada.io", other),
        ("delete", "resourcebindings.work.karmada.io", other),
        ("create", "clusterresourcebindings.work.karmada.io", None),
        ("delete", "clusterresourcebindings.work.karmada.io", None),
        ("create", "works.work.karmada.io", other),
        ("update", "works.work.karmada.io", other),
        ("delete", "works.work.karmada.io", other),
        ("create", "namespaces", None),
        ("delete", "namespaces", None),
        ("create", "events", other),
        // agentcsrapproving: access reviews, approvals of agent CSRs.
        ("create", "subjectaccessreviews.authorization.k8s.io", None),
        (
            "patch",
            "certificatesigningrequests.certificates.k8s.io/approval",
            None,
        ),
        ("create", "leases.coordination.k8s.io", Some(ns)),
        (
            "get",
            "leases.coordination.k8s.io/karmada-controller-manager",
            Some(ns),
        ),
        (
            "update",
            "leases.coordination.k8s.io/karmada-controller-manager",
            Some(ns),
        ),
    ];
    let denied: &[(&str, &str, Option<&str>)] = &[
        // Templates are the users': patched (claims), never rewritten, created or deleted.
        ("update", "deployments.apps", other),
        ("update", "deployments.apps/status", other),
        ("create", "deployments.apps", other),
        ("delete", "deployments.apps", other),
        ("update", "configmaps", other),
        ("create", "secrets", other),
        ("update", "secrets", other),
        ("delete", "secrets", other),
        // Policies and Clusters are patched, never rewritten, created or deleted.
        ("update", "propagationpolicies.policy.karmada.io", other),
        ("delete", "propagationpolicies.policy.karmada.io", other),
        (
            "update",
            "clusterpropagationpolicies.policy.karmada.io",
            None,
        ),
        ("update", "overridepolicies.policy.karmada.io", other),
        ("update", "clusters.cluster.karmada.io", None),
        ("update", "clusters.cluster.karmada.io/status", None),
        ("create", "clusters.cluster.karmada.io", None),
        ("delete", "clusters.cluster.karmada.io", None),
        ("deletecollection", "works.work.karmada.io", other),
        ("update", "namespaces", None),
        ("update", "events", other),
        (
            "delete",
            "leases.coordination.k8s.io/karmada-controller-manager",
            Some(ns),
        ),
        ("update", "leases.coordination.k8s.io/other", Some(ns)),
        ("create", "leases.coordination.k8s.io", other),
        ("create", "pods/exec", other),
        ("update", "deployments.apps/scale", other),
        ("bind", "clusterroles.rbac.authorization.k8s.io", None),
        ("escalate", "clusterroles.rbac.authorization.k8s.io", None),
        ("impersonate", "users", None),
        ("create", "serviceaccounts/token", other),
    ];
    let mut wrong = Vec::new();
    for (verb, resource, namespace) in allowed {
        if !can(verb, resource, *namespace) {
            wrong.push(format!(
                "denied but needed: {verb} {resource} in {namespace:?}"
            ));
        }
    }
    for (verb, resource, namespace) in denied {
        if can(verb, resource, *namespace) {
            wrong.push(format!(
                "allowed but not needed: {verb} {resource} in {namespace:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{user}:\n{}", wrong.join("\n"));
    // Nothing anywhere with a wildcard verb.
    let (_, list, err) = try_run(
        &tool("kubectl"),
        &[
            "--kubeconfig",
            kubeconfig,
            "auth",
            "can-i",
            "--list",
            "--as",
            &user,
            "-n",
            "default",
        ],
        None,
    );
    assert!(
        list.contains("deployments") || list.contains("*.*"),
        "{list}{err}"
    );
    assert!(
        !list.lines().any(|l| l.contains("[*]")),
        "a wildcard verb:\n{list}"
    );
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn install_run_as_service_account_upgrade_uninstall() {
    let env = env();
    let client = env.host().client().await;
    let ns = fresh_namespace(&client, "chart").await;
    let chart = chart_dir().display().to_string();
    let kubeconfig = host_kubeconfig();
    let release = "kcm";
    let full = "kcm-karmada-controller-manager";

    // --- install --------------------------------------------------------------------------------
    let started = Instant::now();
    // Controllers that write through the ClusterRole (cluster: namespaces, Cluster finalizers and
    // taints, events, Work deletion; clusterStatus: Cluster status, Secrets; binding: bindings, Works).
    helm(&[
        "install",
        release,
        &chart,
        "-n",
        &ns,
        "--kubeconfig",
        &kubeconfig,
        "--set",
        RUN_CONTROLLERS,
    ]);
    eprintln!("helm install took {:?}", started.elapsed());

    // The CRDs from crds/ and the templated Cluster CRD are installed and established.
    wait_for_crds(&client).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());

    // The Deployment as the chart renders it.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let deploy = deployments.get(full).await.expect("deployment installed");
    let spec = deploy.spec.clone();
    assert_eq!(spec.replicas, Some(2));
    let strategy = spec.strategy.clone().expect("strategy");
    assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
    let rolling = strategy.rolling_update.expect("rollingUpdate");
    assert_eq!(
        rolling.max_unavailable,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0))
    );
    let pod = spec.template.spec.clone().expect("pod spec");
    assert_eq!(pod.service_account_name.as_deref(), Some(full));
    assert_eq!(pod.automount_service_account_token, Some(true));
    let psc = pod.security_context.clone().expect("pod securityContext");
    assert_eq!(psc.run_as_non_root, Some(true));
    assert_eq!(
        psc.seccomp_profile.map(|s| s.type_),
        Some("RuntimeDefault".to_string())
    );
    let container = &pod.containers[0];
    let sc = container.security_context.clone().expect("securityContext");
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(
        sc.capabilities.and_then(|c| c.drop),
        Some(vec!["ALL".to_string()])
    );
    let liveness = container.liveness_probe.clone().expect("liveness");
    assert_eq!(
        liveness.http_get.map(|h| h.path),
        Some(Some("/healthz".to_string()))
    );
    let readiness = container.readiness_probe.clone().expect("readiness");
    assert_eq!(
        readiness.http_get.map(|h| h.path),
        Some(Some("/readyz".to_string()))
    );
    assert!(container.resources.is_some());
    let args = container.args.clone().expect("args");
    for expected in [
        "--metrics-bind-address=$(POD_IP):8080",
        "--health-probe-bind-address=$(POD_IP):10357",
        "--leader-elect=true",
        &format!("--leader-elect-resource-namespace={ns}"),
        "--v=2",
    ] {
        assert!(
            args.iter().any(|a| a == expected),
            "{expected} not in {args:?}"
        );
    }
    assert!(
        container.env.iter().flatten().any(|e| e.name == "POD_IP"
            && e.value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map(|f| f.field_path.as_str())
                == Some("status.podIP")),
        "POD_IP env from status.podIP"
    );

    // ServiceAccount, RBAC, PDB, metrics Service.
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    sas.get(full).await.expect("service account");
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    let role = cluster_roles.get(full).await.expect("cluster role");
    let rules = role.rules.unwrap_or_default();
    assert!(
        rules.iter().all(|r| !r.verbs.iter().any(|v| v == "*")),
        "no wildcard verbs: {rules:?}"
    );
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let binding = bindings.get(full).await.expect("cluster role binding");
    assert_eq!(binding.role_ref.name, full);
    let roles: Api<Role> = Api::namespaced(client.clone(), &ns);
    roles
        .get(&format!("{full}-leader-election"))
        .await
        .expect("leader-election role");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    pdbs.get(full).await.expect("pdb");
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), &ns);
    services
        .get(&format!("{full}-metrics"))
        .await
        .expect("metrics service");

    // --- run the chart's container as written, as the chart's ServiceAccount --------------------
    // (pod_run: its command line with $(POD_IP) the pod's own address, a TokenRequest token of its
    // ServiceAccount as the in-cluster configuration, its probes polled at the pod's address.)
    let mut kcm = Pod::start(env.host(), &deploy, "karmada-controller-manager").await;
    kcm.wait_probe(ProbeKind::Readiness, Duration::from_secs(60))
        .await;
    kcm.wait_probe(ProbeKind::Liveness, Duration::from_secs(60))
        .await;
    kcm.assert_ports_served();
    let metrics = kcm.resolve_port(&IntOrString::String("metrics".into()));
    wait_until("leadership (metrics)", Duration::from_secs(60), || {
        let served = kcm.get(metrics, "/metrics").map(|(_, b)| b);
        async move {
            served.unwrap_or_default().lines().any(|l| {
                l.starts_with("leader_election_master_status{")
                    && l.contains(&format!("name=\"{LEASE}\""))
                    && l.ends_with(" 1")
            })
        }
    })
    .await;
    assert!(
        lease_holder(&client, &ns).await.is_some(),
        "lease held in {ns}"
    );

    // It does its job with exactly these rights: a new Cluster gets its execution namespace.
    let cluster_name = format!("chart-{}", std::process::id());
    let gvk = GroupVersionKind::gvk("cluster.karmada.io", "v1alpha1", "Cluster");
    let clusters: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "clusters"),
    );
    let cluster: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "cluster.karmada.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": cluster_name},
        "spec": {"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:1"}
    }))
    .expect("cluster");
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .expect("create cluster");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let es = format!("karmada-es-{cluster_name}");
    wait_until(&format!("namespace {es}"), Duration::from_secs(60), || {
        let namespaces = namespaces.clone();
        let es = es.clone();
        async move { namespaces.get_opt(&es).await.ok().flatten().is_some() }
    })
    .await;
    clusters
        .delete(&cluster_name, &DeleteParams::default())
        .await
        .expect("delete cluster");
    wait_until(
        &format!("cluster {cluster_name} gone (finalizer removed)"),
        Duration::from_secs(90),
        || {
            let clusters = clusters.clone();
            let name = cluster_name.clone();
            async move { clusters.get_opt(&name).await.ok().flatten().is_none() }
        },
    )
    .await;
    let log = kcm.log();
    assert!(
        !log.to_lowercase().contains("forbidden"),
        "the chart's RBAC denied something:\n{log}"
    );
    kcm.signal(libc::SIGTERM);
    let status = kcm.wait_exit(Duration::from_secs(40)).await.expect("exits");
    assert_eq!(Kcm::code(status), Some(0), "{}", kcm.log());
    drop(kcm);

    // --- upgrade ---------------------------------------------------------------------------------
    helm(&[
        "upgrade",
        release,
        &chart,
        "-n",
        &ns,
        "--kubeconfig",
        &kubeconfig,
        "--reuse-values",
        "--set",
        "replicaCount=3",
        "--set",
        "log.verbosity=4",
    ]);
    let deploy = deployments.get(full).await.expect("deployment");
    let spec = deploy.spec;
    assert_eq!(spec.replicas, Some(3));
    let args = spec.template.spec.expect("pod").containers[0]
        .args
        .clone()
        .unwrap_or_default();
    assert!(args.iter().any(|a| a == "--v=4"), "{args:?}");
    let history = helm(&["history", release, "-n", &ns, "--kubeconfig", &kubeconfig]);
    assert_eq!(
        history.lines().count(),
        3,
        "header + 2 revisions:\n{history}"
    );

    // --- uninstall -------------------------------------------------------------------------------
    helm(&[
        "uninstall",
        release,
        "-n",
        &ns,
        "--kubeconfig",
        &kubeconfig,
        "--wait",
    ]);
    wait_until("release objects gone", Duration::from_secs(60), || {
        let (deployments, cluster_roles, bindings, sas) = (
            deployments.clone(),
            cluster_roles.clone(),
            bindings.clone(),
            sas.clone(),
        );
        async move {
            deployments.get_opt(full).await.ok().flatten().is_none()
                && cluster_roles.get_opt(full).await.ok().flatten().is_none()
                && bindings.get_opt(full).await.ok().flatten().is_none()
                && sas.get_opt(full).await.ok().flatten().is_none()
        }
    })
    .await;
    // Helm keeps CRDs from crds/ (deleting them would delete every policy, binding and Work), and
    // the templated Cluster CRD (`helm.sh/resource-policy: keep`; deleting it would delete every
    // Cluster).
    for name in ["works.work.karmada.io", "clusters.cluster.karmada.io"] {
        assert!(
            crds.get_opt(name).await.unwrap().is_some(),
            "CRD {name} survives uninstall"
        );
    }
}

/// docs/reference.md's flags reference is what `--help` says (hack/readme-flags.sh --check).
#[test]
fn readme_flags_reference_matches_help() {
    let (ok, out, err) = try_run_with(
        Path::new("bash"),
        &[
            &workspace()
                .join("hack/readme-flags.sh")
                .display()
                .to_string(),
            "--check",
        ],
        None,
        &[("KCM_BIN", binary().as_os_str())],
    );
    assert!(ok, "{err}{out}");
}
