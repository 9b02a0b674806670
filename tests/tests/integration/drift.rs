//! Drift, made visible and choosable (karmada-rs's own), through the real controller-manager
//! against real API servers: two members joined with `karmadactl join`, Deployments propagated to
//! them, then edited by hand in a member with another field manager (`?fieldManager=hand-edit`).
//!
//! - Repair (no DriftPolicy, Karmada's behaviour): the edit is put back; the Work's Warning
//!   `DriftDetected` Event names the field and the manager, `karmada_rs_work_drift_total` counts
//!   it on the metrics endpoint, and the Work's `Drifted` condition ends False/`NoDrift`.
//! - ReportOnly (a DriftPolicy): the edit stays; the Work says `Drifted=True` naming the field and
//!   the manager, the binding says `Drifted=True` naming the cluster; a template change is still
//!   applied over the drift.
//! - takeover on objects that exist in the member before propagation: `Never` leaves one alone,
//!   `IfNoDiff` takes over only the one that already matches, `Always` overwrites.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Namespace};
use karmada_apis::policy_rs::v1alpha1::DriftPolicy;
use karmada_apis::{PropagationPolicy, ResourceBinding, Work, names};
use karmada_e2e::controller_manager::{Kcm, start_joined};
use karmada_e2e::in_process::condition;
use karmada_e2e::quiet::{Watched, assert_holds_for};
use karmada_e2e::wait::eventually_showing;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "drift";
/// How long a ReportOnly member object must stay as edited.
const QUIET: Duration = Duration::from_secs(5);

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        install_crds: true,
        ..Default::default()
    })
}

async fn eventually<T>(what: &str, kcm: &Kcm, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    let every = Duration::from_millis(250);
    let log = || format!("controller-manager log (tail):\n{}", kcm.log_tail(60));
    eventually_showing(what, WAIT, every, log, check).await
}

fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
        },
    }))
    .unwrap()
}

async fn propagate(host: &Client, name: &str, clusters: &[&str]) {
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
            "placement": {
                "clusterAffinity": {"clusterNames": clusters},
                "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
            },
        },
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    Api::<Deployment>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &deployment(name, 2, "nginx:1.27"))
        .await
        .unwrap();
}

async fn drift_policy(host: &Client, name: &str, selected: &[&str], spec: Value) {
    let selectors: Vec<Value> = selected
        .iter()
        .map(|n| json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": n}))
        .collect();
    let mut spec = spec;
    spec["resourceSelectors"] = json!(selectors);
    let policy: DriftPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada-rs.io/v1alpha1",
        "kind": "DriftPolicy",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }))
    .unwrap();
    Api::<DriftPolicy>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
}

/// A hand edit in a member by field manager `hand-edit` (a merge patch, as `kubectl edit` is).
async fn hand_edit(api: &Api<Deployment>, name: &str, patch: Value) {
    let params = PatchParams {
        field_manager: Some("hand-edit".into()),
        ..PatchParams::default()
    };
    api.patch(name, &params, &Patch::Merge(patch))
        .await
        .unwrap();
}

fn replicas(d: &Deployment) -> Option<i32> {
    d.spec.replicas
}

fn image(d: &Deployment) -> Option<String> {
    d.spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
}

fn managed(d: &Deployment) -> bool {
    d.labels().get("karmada.io/managed").map(String::as_str) == Some("true")
}

fn work_api(host: &Client, cluster: &str) -> Api<Work> {
    Api::namespaced(host.clone(), &names::execution_space_name(cluster))
}

fn work_name(name: &str) -> String {
    names::work_name("Deployment", name, NS)
}

/// The Work's condition `type_` as (status, reason, message).
async fn work_condition(
    host: &Client,
    cluster: &str,
    name: &str,
    type_: &str,
) -> Result<(String, String, String), String> {
    let work = work_api(host, cluster)
        .get_opt(&work_name(name))
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no Work yet")?;
    let conditions = work.status.map(|s| s.conditions).unwrap_or_default();
    condition(&conditions, type_).ok_or_else(|| format!("no {type_} condition: {conditions:?}"))
}

/// The Warning `DriftDetected` Events' messages on the Work of `name` in `cluster`.
async fn drift_events(host: &Client, cluster: &str, name: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(host.clone(), &names::execution_space_name(cluster));
    let params = ListParams::default().fields(&format!("involvedObject.name={}", work_name(name)));
    events
        .list(&params)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("DriftDetected"))
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter_map(|e| e.message)
        .collect()
}

/// `karmada_rs_work_drift_total{cluster="<cluster>",kind="Deployment"}` as the metrics endpoint
/// serves it (0 when absent).
fn drift_total(kcm: &Kcm, cluster: &str) -> f64 {
    let text = kcm.metrics().unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("karmada_rs_work_drift_total{"))
        .filter(|l| {
            l.contains(&format!("cluster=\"{cluster}\"")) && l.contains("kind=\"Deployment\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn start(host: &Client) -> Kcm {
    let env = env();
    let kcm = start_joined(
        env,
        &[
            "--leader-elect=false",
            "--cluster-status-update-frequency=1s",
        ],
        &[],
        WAIT,
    )
    .await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(host.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    kcm
}

async fn in_member(
    kcm: &Kcm,
    api: &Api<Deployment>,
    name: &str,
    what: &str,
    holds: impl Fn(&Deployment) -> bool,
) -> Deployment {
    eventually(what, kcm, async || {
        let d = api.get_opt(name).await.map_err(|e| e.to_string())?;
        match d {
            Some(d) if holds(&d) => Ok(d),
            Some(d) => Err(format!(
                "replicas {:?}, image {:?}, managed {}",
                replicas(&d),
                image(&d),
                managed(&d)
            )),
            None => Err("absent".into()),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: the steps share one controller-manager and its members"
)]
async fn drift_is_reported_and_repaired_or_left_as_the_policy_says() {
    let env = env();
    let host = env.host().client().await;
    let kcm = start(&host).await;
    let member1: Api<Deployment> = Api::namespaced(env.members()[0].client().await, NS);

    // --- Repair (no DriftPolicy): reported, then put back.
    propagate(&host, "repaired", &["member1", "member2"]).await;
    in_member(&kcm, &member1, "repaired", "repaired in member1", |d| {
        replicas(d) == Some(2)
    })
    .await;
    let before = drift_total(&kcm, "member1");
    hand_edit(&member1, "repaired", json!({"spec": {"replicas": 5}})).await;
    in_member(
        &kcm,
        &member1,
        "repaired",
        "hand-edited replicas put back",
        |d| replicas(d) == Some(2),
    )
    .await;
    let events = eventually("a DriftDetected Event on the Work", &kcm, async || {
        let events = drift_events(&host, "member1", "repaired").await;
        events
            .iter()
            .any(|m| m.contains("spec.replicas") && m.contains("hand-edit"))
            .then_some(events.clone())
            .ok_or(format!("{events:?}"))
    })
    .await;
    assert!(
        events
            .iter()
            .any(|m| m.contains("repaired from the manifest")),
        "{events:?}"
    );
    eventually("the drift counted on /metrics", &kcm, async || {
        let now = drift_total(&kcm, "member1");
        (now > before)
            .then_some(())
            .ok_or(format!("{now} (before: {before})"))
    })
    .await;
    eventually(
        "Work Drifted=False/NoDrift once repaired",
        &kcm,
        async || {
            let (status, reason, message) =
                work_condition(&host, "member1", "repaired", "Drifted").await?;
            (status == "False" && reason == "NoDrift")
                .then_some(())
                .ok_or(format!("{status} {reason}: {message}"))
        },
    )
    .await;
    // member2 never drifted: its Work has no Drifted condition at all.
    assert!(
        work_condition(&host, "member2", "repaired", "Drifted")
            .await
            .is_err()
    );

    // --- ReportOnly: reported, left as edited; a template change still applies.
    drift_policy(
        &host,
        "report-only",
        &["reported"],
        json!({"drift": "ReportOnly"}),
    )
    .await;
    propagate(&host, "reported", &["member1", "member2"]).await;
    in_member(
        &kcm,
        &member1,
        "reported",
        "reported in member1 with the manifest hash",
        |d| {
            replicas(d) == Some(2)
                && d.annotations()
                    .contains_key("policy.karmada-rs.io/manifest-hash")
        },
    )
    .await;
    hand_edit(&member1, "reported", json!({"spec": {"replicas": 5}})).await;
    let (_, _, message) = eventually(
        "Work Drifted=True naming the field and the manager",
        &kcm,
        async || {
            let c = work_condition(&host, "member1", "reported", "Drifted").await?;
            (c.0 == "True" && c.1 == "DriftDetected")
                .then_some(c.clone())
                .ok_or(format!("{c:?}"))
        },
    )
    .await;
    assert!(message.contains("spec.replicas"), "{message}");
    assert!(message.contains("hand-edit"), "{message}");
    assert!(message.contains("ReportOnly"), "{message}");
    let rbs: Api<ResourceBinding> = Api::namespaced(host.clone(), NS);
    eventually("binding Drifted=True naming member1", &kcm, async || {
        let rb = rbs
            .get("reported-deployment")
            .await
            .map_err(|e| e.to_string())?;
        let conditions = rb.status.map(|s| s.conditions).unwrap_or_default();
        match condition(&conditions, "Drifted") {
            Some((s, _, m)) if s == "True" && m.contains("member1") && !m.contains("member2") => {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let edited = member1.get("reported").await.unwrap();
    assert_eq!(replicas(&edited), Some(5));
    assert_holds_for(
        &member1,
        Watched::Name("reported"),
        &edited.resource_version().unwrap(),
        QUIET,
        |d| {
            (replicas(d) == Some(5)).then_some(()).ok_or(format!(
                "replicas {:?}: the drift was overwritten",
                replicas(d)
            ))
        },
    )
    .await;
    assert_eq!(replicas(&member1.get("reported").await.unwrap()), Some(5));
    // The template changes: the new manifest is applied, over the drift.
    Api::<Deployment>::namespaced(host.clone(), NS)
        .patch(
            "reported",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.28"}]}}}})),
        )
        .await
        .unwrap();
    in_member(
        &kcm,
        &member1,
        "reported",
        "the template change applied",
        |d| image(d).as_deref() == Some("nginx:1.28") && replicas(d) == Some(2),
    )
    .await;
    eventually(
        "Work Drifted=False after the template change",
        &kcm,
        async || {
            let c = work_condition(&host, "member1", "reported", "Drifted").await?;
            (c.0 == "False").then_some(()).ok_or(format!("{c:?}"))
        },
    )
    .await;

    // --- takeover of objects that exist in member1 before propagation.
    for (name, replicas) in [("never", 2), ("same", 2), ("differs", 3), ("always", 3)] {
        member1
            .create(
                &PostParams::default(),
                &deployment(name, replicas, "nginx:1.27"),
            )
            .await
            .unwrap();
    }
    drift_policy(
        &host,
        "takeover-never",
        &["never"],
        json!({"takeover": "Never"}),
    )
    .await;
    drift_policy(
        &host,
        "takeover-ifnodiff",
        &["same", "differs"],
        json!({"takeover": "IfNoDiff"}),
    )
    .await;
    drift_policy(
        &host,
        "takeover-always",
        &["always"],
        json!({"takeover": "Always"}),
    )
    .await;
    for name in ["never", "same", "differs", "always"] {
        propagate(&host, name, &["member1"]).await;
    }
    in_member(
        &kcm,
        &member1,
        "same",
        "IfNoDiff takes over a matching object",
        managed,
    )
    .await;
    in_member(
        &kcm,
        &member1,
        "always",
        "Always takes over and overwrites",
        |d| managed(d) && replicas(d) == Some(2),
    )
    .await;
    for (name, says) in [
        ("never", vec!["not taken over", "takeover is Never"]),
        (
            "differs",
            vec!["not taken over", "takeover is IfNoDiff", "spec.replicas"],
        ),
    ] {
        eventually(
            &format!("{name}: Applied=False saying why"),
            &kcm,
            async || {
                let c = work_condition(&host, "member1", name, "Applied").await?;
                (c.0 == "False" && says.iter().all(|s| c.2.contains(s)))
                    .then_some(())
                    .ok_or(format!("{c:?}"))
            },
        )
        .await;
        let d = member1.get(name).await.unwrap();
        assert!(!managed(&d), "{name} was taken over");
    }
    assert_eq!(replicas(&member1.get("differs").await.unwrap()), Some(3));
}
