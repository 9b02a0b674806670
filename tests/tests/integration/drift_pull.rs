//! Drift in a Pull cluster (karmada-rs's own reporting), through the real binaries: the
//! controller-manager on the host and `karmada-agent` serving `member1` in Pull mode, so the
//! agent's work-status and execution controllers are the ones that see the member object and put
//! it back. A hand edit in the member by field manager `hand-edit` is repaired, the Work gets a
//! Warning `DriftDetected` Event naming the field and the manager, the agent's own `/metrics`
//! counts it in `karmada_rs_work_drift_total` (the controller-manager's does not: it never talks
//! to a Pull member), and the Work's `Drifted` condition ends False/`NoDrift`.
//!
//! Its own file (not a second test in `drift.rs`): that file's members are joined in Push mode
//! by `karmadactl join`, and a separate test binary runs beside it.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Namespace};
use karmada_apis::cluster::v1alpha1::ClusterSyncMode;
use karmada_apis::{Cluster, PropagationPolicy, Work, names};
use karmada_e2e::controller_manager::{Kcm, agent_binary};
use karmada_e2e::in_process::condition;
use karmada_e2e::wait::eventually_showing;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "drift-pull";
const NAME: &str = "web";
const MEMBER: &str = "member1";

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 1,
        install_crds: true,
        ..Default::default()
    })
}

async fn eventually<T>(
    what: &str,
    procs: &[&Kcm],
    check: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let logs = || {
        let logs: Vec<String> = procs.iter().map(|p| p.log_tail(40)).collect();
        format!("logs (tail):\n{}", logs.join("\n---\n"))
    };
    eventually_showing(what, WAIT, Duration::from_millis(250), logs, check).await
}

/// `karmada_rs_work_drift_total{cluster="member1",kind="Deployment"}` on `p`'s metrics endpoint
/// (0 when absent).
fn drift_total(p: &Kcm) -> f64 {
    let text = p.metrics().unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("karmada_rs_work_drift_total{"))
        .filter(|l| {
            l.contains(&format!("cluster=\"{MEMBER}\"")) && l.contains("kind=\"Deployment\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn replicas(d: &Deployment) -> Option<i32> {
    d.spec.replicas
}

/// The Warning `DriftDetected` Events on the Work, as (message, reporting component).
async fn drift_events(host: &Client) -> Vec<(String, String)> {
    let events: Api<Event> = Api::namespaced(host.clone(), &names::execution_space_name(MEMBER));
    let work = names::work_name("Deployment", NAME, NS);
    let params = ListParams::default().fields(&format!("involvedObject.name={work}"));
    events
        .list(&params)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("DriftDetected"))
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| {
            let component = e
                .source
                .and_then(|s| s.component)
                .or(e.reporting_component)
                .unwrap_or_default();
            (e.message.unwrap_or_default(), component)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: the steps share the agent and its member"
)]
async fn drift_in_a_pull_member_is_reported_by_the_agent_and_repaired() {
    let env = env();
    let host = env.host().client().await;
    let member = env.member(MEMBER).unwrap();
    let kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &[
            "--leader-elect=false",
            "--cluster-status-update-frequency=1s",
        ],
        &[],
    );
    let agent = Kcm::start_program(
        agent_binary(),
        member.kubeconfig_path(),
        &[
            &format!(
                "--karmada-kubeconfig={}",
                env.host().kubeconfig_path().display()
            ),
            &format!("--cluster-name={MEMBER}"),
            &format!("--cluster-api-endpoint={}", member.url()),
            "--leader-elect=false",
            "--cluster-status-update-frequency=1s",
        ],
        &[],
    );
    let procs = [&kcm, &agent];
    let clusters: Api<Cluster> = Api::all(host.clone());
    let cluster = eventually(
        "member1 registered by the agent and Ready",
        &procs,
        async || {
            let c = clusters
                .get_opt(MEMBER)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("no Cluster yet")?;
            c.is_ready()
                .then_some(c)
                .ok_or_else(|| "not Ready yet".to_owned())
        },
    )
    .await;
    assert_eq!(cluster.spec.sync_mode, ClusterSyncMode::Pull);

    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(host.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": NAME}],
            "placement": {"clusterAffinity": {"clusterNames": [MEMBER]}},
        },
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    let template: Deployment = serde_json::from_value(json!({
        "metadata": {"name": NAME, "namespace": NS, "labels": {"app": NAME}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
            },
        },
    }))
    .unwrap();
    Api::<Deployment>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &template)
        .await
        .unwrap();

    let in_member: Api<Deployment> = Api::namespaced(member.client().await, NS);
    let with_replicas = async |what: &str, want: i32| {
        eventually(what, &procs, async || {
            let d = in_member
                .get_opt(NAME)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("absent")?;
            (replicas(&d) == Some(want))
                .then_some(())
                .ok_or(format!("replicas {:?}", replicas(&d)))
        })
        .await;
    };
    with_replicas("the Deployment applied by the agent", 2).await;
    let before = drift_total(&agent);

    // A hand edit in the member, as `kubectl edit` with its own field manager.
    let params = PatchParams {
        field_manager: Some("hand-edit".into()),
        ..PatchParams::default()
    };
    in_member
        .patch(
            NAME,
            &params,
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    with_replicas("the hand edit put back by the agent", 2).await;

    let events = eventually("a DriftDetected Event on the Work", &procs, async || {
        let events = drift_events(&host).await;
        events
            .iter()
            .any(|(m, _)| m.contains("spec.replicas") && m.contains("hand-edit"))
            .then_some(events.clone())
            .ok_or(format!("{events:?}"))
    })
    .await;
    assert!(
        events.iter().any(|(m, _)| m.contains(&format!(
            "Deployment {NS}/{NAME} in cluster {MEMBER} differs from its manifest"
        )) && m.contains("repaired from the manifest")),
        "{events:?}"
    );
    eventually(
        "the drift counted on the agent's /metrics",
        &procs,
        async || {
            let now = drift_total(&agent);
            (now > before)
                .then_some(())
                .ok_or(format!("{now} (before: {before})"))
        },
    )
    .await;
    // The controller-manager runs no work-status controller for a Pull member.
    assert_eq!(drift_total(&kcm), 0.0, "{}", kcm.log_tail(40));

    let works: Api<Work> = Api::namespaced(host.clone(), &names::execution_space_name(MEMBER));
    let work = names::work_name("Deployment", NAME, NS);
    eventually(
        "Work Drifted=False/NoDrift once repaired",
        &procs,
        async || {
            let w = works
                .get_opt(&work)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("no Work")?;
            let conditions = w.status.map(|s| s.conditions).unwrap_or_default();
            let (status, reason, message) = condition(&conditions, "Drifted")
                .ok_or_else(|| format!("no Drifted condition: {conditions:?}"))?;
            (status == "False" && reason == "NoDrift")
                .then_some(())
                .ok_or(format!("{status} {reason}: {message}"))
        },
    )
    .await;
    // Repaired once: the member object stays as the manifest says.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let d = in_member.get(NAME).await.unwrap();
    assert_eq!(replicas(&d), Some(2));
}
