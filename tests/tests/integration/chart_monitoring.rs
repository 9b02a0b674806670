//! The chart's monitoring (`monitoring.grafanaDashboard`, `monitoring.prometheusRule`), rendered with
//! `helm template`: `promtool check rules` accepts the PrometheusRule's groups and `promtool test
//! rules` runs one unit test per alert (`tests/monitoring/alerts.test.yaml`); and every metric a
//! dashboard panel or an alert reads is served by the real controller-manager once it has propagated
//! one ConfigMap to a member, updated and deleted it (the families that count only evictions and Lua
//! failures are checked against the reference instead, see [`EVENT_ONLY`]).
//!
//! `promtool` comes from `make test-binaries` (hack/tools/promtool), `helm` from `make test-tools`.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a test harness file: its helpers panic on a broken fixture"
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use karmada_apis::{Cluster, PropagationPolicy};
use karmada_e2e::controller_manager::*;
use karmada_e2e::tools::helm_template;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

/// Families that get a series only when what they count happens (a taint eviction, a failing Lua
/// script): not provoked here, so checked against docs/reference.md's metrics table instead.
const EVENT_ONLY: &[&str] = &[
    "eviction_queue_depth",
    "eviction_processing_total",
    "resource_interpreter_script_failures_total",
];

fn env() -> &'static testenv::TestEnv {
    testenv::shared(testenv::EnvOptions {
        members: 1,
        host_controller_manager: false,
        install_crds: true,
        ..testenv::EnvOptions::default()
    })
}

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/karmada-controller-manager")
}

fn render(sets: &[&str]) -> Vec<serde_json::Value> {
    let out = helm_template(&chart(), "kcm", "karmada-system", sets)
        .unwrap_or_else(|e| panic!("helm template failed: {e}"));
    out.split("\n---")
        .filter_map(|doc| serde_saphyr::from_str::<serde_json::Value>(doc).ok())
        .filter(serde_json::Value::is_object)
        .collect()
}

fn one_of_kind(docs: &[serde_json::Value], kind: &str) -> serde_json::Value {
    let found: Vec<_> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind} rendered");
    found[0].clone()
}

/// The PrometheusRule's `spec` (its rule groups), rendered with `job="kcm"` as the selector.
fn rule_groups() -> serde_json::Value {
    let docs = render(&[
        "monitoring.prometheusRule.enabled=true",
        "monitoring.selector=job=\"kcm\"",
    ]);
    one_of_kind(&docs, "PrometheusRule")["spec"].clone()
}

/// The dashboard's JSON, from the rendered ConfigMap.
fn dashboard() -> serde_json::Value {
    let docs = render(&["monitoring.grafanaDashboard.enabled=true"]);
    let cm = one_of_kind(&docs, "ConfigMap");
    let text = cm["data"]["karmada-controller-manager.json"]
        .as_str()
        .expect("the dashboard's JSON in the ConfigMap");
    serde_json::from_str(text).expect("the dashboard is JSON")
}

fn promtool() -> PathBuf {
    testenv::binaries::locate("promtool").unwrap_or_else(|e| panic!("{e}"))
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

fn alert_names(groups: &serde_json::Value) -> BTreeSet<String> {
    groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn promtool_checks_the_rules_and_every_alert_has_a_unit_test() {
    let groups = rule_groups();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rules.yaml"),
        serde_json::to_string_pretty(&groups).unwrap(),
    )
    .unwrap();
    let tests_src = Path::new(env!("CARGO_MANIFEST_DIR")).join("monitoring/alerts.test.yaml");
    let tests_text = std::fs::read_to_string(&tests_src).unwrap();
    std::fs::write(dir.path().join("alerts.test.yaml"), &tests_text).unwrap();

    let promtool = promtool();
    let checked = run(Command::new(&promtool)
        .args(["check", "rules", "rules.yaml"])
        .current_dir(dir.path()));
    eprintln!("{checked}");
    let tested = run(Command::new(&promtool)
        .args(["test", "rules", "alerts.test.yaml"])
        .current_dir(dir.path()));
    eprintln!("{tested}");
    assert!(tested.contains("SUCCESS"), "{tested}");

    let alerts = alert_names(&groups);
    assert_eq!(alerts.len(), 7, "{alerts:?}");
    let tests: serde_json::Value = serde_saphyr::from_str(&tests_text).unwrap();
    let tested: BTreeSet<String> = tests["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().unwrap())
        .filter(|a| !a["exp_alerts"].as_array().unwrap().is_empty())
        .filter_map(|a| a["alertname"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        alerts, tested,
        "every alert has a unit test in which it fires"
    );
}

/// Every metric name a PromQL expression selects (`name{...}`; all of ours carry a selector).
fn metric_names(expr: &str, into: &mut BTreeSet<String>) {
    let re = regex::Regex::new(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{").unwrap();
    for c in re.captures_iter(expr) {
        into.insert(c[1].to_string());
    }
}

fn used_metrics() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for g in rule_groups()["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            metric_names(r["expr"].as_str().unwrap(), &mut names);
        }
    }
    let d = dashboard();
    let mut panels = 0;
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            metric_names(t["expr"].as_str().unwrap(), &mut names);
            panels += 1;
        }
    }
    assert!(panels > 20, "{panels} dashboard queries");
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn every_metric_the_dashboard_and_alerts_use_is_served() {
    let used = used_metrics();
    let env = env();
    let host = env.host().client().await;
    let ns = fresh_namespace(&host, "monitoring").await;
    let mut kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            &format!("--leader-elect-resource-namespace={ns}"),
            "--cluster-status-update-frequency=1s",
        ],
        &[],
    );
    let member = &env.members()[0];
    karmada_e2e::karmadactl::join(env.host(), member, &[])
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let clusters: Api<Cluster> = Api::all(host.clone());
    kcm.eventually("the member Ready", Duration::from_secs(60), async || {
        let list = clusters
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let ready = list.items.iter().any(|c| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        });
        if ready {
            Ok(())
        } else {
            Err("not Ready yet".to_string())
        }
    })
    .await;

    // One ConfigMap propagated, updated, deleted: creates, updates and deletes in the member.
    let cms: Api<ConfigMap> = Api::namespaced(host.clone(), &ns);
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "watched"}, "data": {"k": "1"}
    }))
    .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "watched"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "watched"}],
            "placement": {"clusterAffinity": {"clusterNames": [member.name()]}},
        },
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(host.clone(), &ns)
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    let member_cms: Api<ConfigMap> = Api::namespaced(member.client().await, &ns);
    let data_is = |v: &'static str| {
        let member_cms = member_cms.clone();
        async move || {
            let got = member_cms
                .get_opt("watched")
                .await
                .map_err(|e| e.to_string())?;
            match got.and_then(|c| c.data).and_then(|d| d.get("k").cloned()) {
                Some(k) if k == v => Ok(()),
                other => Err(format!("k is {other:?}")),
            }
        }
    };
    kcm.eventually(
        "the ConfigMap in the member",
        Duration::from_secs(60),
        data_is("1"),
    )
    .await;
    cms.patch(
        "watched",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    kcm.eventually(
        "the update in the member",
        Duration::from_secs(60),
        data_is("2"),
    )
    .await;
    cms.delete("watched", &DeleteParams::default())
        .await
        .unwrap();
    kcm.eventually(
        "the deletion in the member",
        Duration::from_secs(60),
        async || match member_cms.get_opt("watched").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;

    // Every family then has samples (counters are scraped after the deletion was counted).
    let reference =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reference.md"))
            .unwrap();
    let mut missing = Vec::new();
    kcm.eventually(
        "every used metric served",
        Duration::from_secs(30),
        async || {
            let text = kcm.metrics().ok_or_else(|| "no /metrics".to_string())?;
            let served: BTreeSet<&str> = text
                .lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| l.split(['{', ' ']).next())
                .collect();
            missing = used
                .iter()
                .filter(|n| !EVENT_ONLY.contains(&n.as_str()) && !served.contains(n.as_str()))
                .cloned()
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!("not served: {missing:?}"))
            }
        },
    )
    .await;
    for name in EVENT_ONLY {
        assert!(used.contains(*name), "{name} is no longer used: drop it");
        assert!(
            reference.contains(&format!("`{name}`")),
            "{name} is not in docs/reference.md's metrics"
        );
    }
    eprintln!("{} metrics used, all served: {used:?}", used.len());

    kcm.signal(libc::SIGTERM);
    kcm.wait_exit(Duration::from_secs(10)).await.expect("exits");
}
