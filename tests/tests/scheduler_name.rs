//! `--scheduler-name` with Karmada's semantics: Karmada's own Go `karmada-scheduler`, started with
//! `--scheduler-name=other`, runs beside our controller-manager; a binding whose `spec.schedulerName`
//! is `other` is placed by Karmada's and never written by ours (the host API server's audit log
//! shows every write and its User-Agent), and a binding with the default (empty) name is placed by
//! ours and never written by Karmada's.
//!
//! Needs the binaries `make karmada-binaries` builds; runs with `make test-karmada-peer`.

#![allow(
    clippy::unwrap_used,
    reason = "a test harness file: its helpers build fixed objects and panic on a broken fixture"
)]

use std::time::Duration;

use karmada_apis::ResourceBinding;
use karmada_e2e::controller_manager::*;
use karmada_e2e::in_process::{create_ready_cluster, resource_binding};
use kube::api::{Api, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);

fn env() -> &'static testenv::TestEnv {
    testenv::shared(testenv::EnvOptions {
        host_controller_manager: false,
        install_crds: true,
        host_audit_log: true,
        ..testenv::EnvOptions::default()
    })
}

/// Creates a Push Cluster no one serves, reporting ConfigMaps as its API.
async fn create_cluster(client: &kube::Client, name: &str) {
    let apis = json!({"apiEnablements": [
        {"groupVersion": "v1", "resources": [{"name": "configmaps", "kind": "ConfigMap"}]},
    ]});
    create_ready_cluster(client, name, apis).await;
}

/// A ResourceBinding for a ConfigMap, as the detector writes one for a policy naming
/// `scheduler_name`.
fn binding(ns: &str, name: &str, scheduler_name: &str) -> ResourceBinding {
    resource_binding(
        ns,
        name,
        ("v1", "ConfigMap"),
        json!({
            "placement": {"clusterAffinity": {"clusterNames": ["name-m1", "name-m2"]}},
            "schedulerName": scheduler_name,
        }),
    )
}

fn scheduled(rb: &ResourceBinding) -> bool {
    rb.spec.clusters.len() == 2
        && rb.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Scheduled" && c.status == "True")
        })
}

/// The User-Agents of the successful writes to ResourceBinding `ns/name` (spec and status).
fn writers(env: &testenv::TestEnv, ns: &str, name: &str) -> Vec<String> {
    env.host()
        .audit_events()
        .unwrap_or_else(|e| panic!("read the host's audit log: {e}"))
        .into_iter()
        .filter(|e| e.succeeded() && e.verb != "create")
        .filter(|e| {
            e.object_ref.resource == "resourcebindings"
                && e.object_ref.namespace.as_deref() == Some(ns)
                && e.object_ref.name.as_deref() == Some(name)
        })
        .map(|e| e.user_agent)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_naming_another_scheduler_is_left_to_it() {
    let env = env();
    let client = env.host().client().await;
    let go_scheduler = testenv::binaries::locate_karmada("karmada-scheduler")
        .unwrap_or_else(|e| panic!("{e} (make karmada-binaries builds it)"));
    let ns = fresh_namespace(&client, "sched-name").await;
    // The Clusters exist before either scheduler starts: both list them before scheduling. (Created
    // while Karmada's scheduler starts, a binding can reach it before its Cluster cache has them,
    // and it does not retry a "no cluster exists" fit when they arrive.)
    for name in ["name-m1", "name-m2"] {
        create_cluster(&client, name).await;
    }
    let ours = Kcm::start(
        env.host().kubeconfig_path(),
        &["--leader-elect=false", "--controllers=scheduler"],
        &[],
    );
    let theirs = Kcm::start_program(
        &go_scheduler,
        env.host().kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--scheduler-name=other",
            "--enable-scheduler-estimator=false",
        ],
        &[],
    );
    let bindings: Api<ResourceBinding> = Api::namespaced(client.clone(), &ns);
    for (name, scheduler_name) in [("for-other", "other"), ("for-default", "")] {
        bindings
            .create(&PostParams::default(), &binding(&ns, name, scheduler_name))
            .await
            .unwrap_or_else(|e| panic!("create ResourceBinding {name}: {e}"));
    }
    for (name, by) in [("for-other", &theirs), ("for-default", &ours)] {
        by.eventually(&format!("{name} scheduled"), WAIT, async || {
            let rb = bindings.get(name).await.map_err(|e| e.to_string())?;
            scheduled(&rb).then_some(()).ok_or(format!(
                "clusters {:?}, status {:?}",
                rb.spec.clusters, rb.status
            ))
        })
        .await;
    }
    // One more binding per scheduler, scheduled after both saw the first two, so that a write
    // either made to the first two in reaction to them is in the audit log read below.
    for (name, scheduler_name, by) in [
        ("late-other", "other", &theirs),
        ("late-default", "", &ours),
    ] {
        bindings
            .create(&PostParams::default(), &binding(&ns, name, scheduler_name))
            .await
            .unwrap_or_else(|e| panic!("create ResourceBinding {name}: {e}"));
        by.eventually(&format!("{name} scheduled"), WAIT, async || {
            let rb = bindings.get(name).await.map_err(|e| e.to_string())?;
            scheduled(&rb).then_some(()).ok_or("not yet".to_owned())
        })
        .await;
    }
    let go = |ua: &String| ua.starts_with("karmada-scheduler");
    let rust = |ua: &String| ua.starts_with("karmada-controller-manager");
    for name in ["for-other", "late-other"] {
        let w = writers(env, &ns, name);
        assert!(
            w.iter().any(go),
            "{name}: Karmada's scheduler wrote it: {w:?}"
        );
        assert!(!w.iter().any(rust), "{name}: ours never writes it: {w:?}");
    }
    for name in ["for-default", "late-default"] {
        let w = writers(env, &ns, name);
        assert!(w.iter().any(rust), "{name}: ours wrote it: {w:?}");
        assert!(
            !w.iter().any(go),
            "{name}: Karmada's never writes it: {w:?}"
        );
    }
    drop(theirs);
    drop(ours);
}
