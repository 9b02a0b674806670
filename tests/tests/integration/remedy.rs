//! The `remedy` controller against the real controller-manager binary and real API servers.
//!
//! Two API-server-only members are joined with `karmadactl join`; the controller-manager runs
//! `cluster`, `clusterStatus` and `remedy`. The test stands in for whatever would detect DNS
//! trouble in a member: it sets the Cluster condition `ServiceDomainNameResolutionReady` through
//! the status subresource with a resourceVersion-guarded merge patch, retried on conflict.
//! clusterStatus writes the same `status.conditions` list, but it sets only its own condition types
//! on the copy it read and writes with a guarded merge patch too, so it keeps a condition type it
//! does not know, and neither writer can overwrite the other's change unseen.
//!
//! Checked: a Remedy triggered by `ServiceDomainNameResolutionReady=False` lists `TrafficControl`
//! in the `status.remedyActions` of the member with that condition only, keeps it through
//! clusterStatus's rewrites of the conditions and, without a moment's gap, through a
//! controller-manager restart, and the list empties when the condition turns `True`; a Remedy
//! without `decisionMatches` applies to the cluster its `clusterAffinity` names, follows it when
//! the affinity changes and leaves when the Remedy is deleted; an invalid Remedy is refused by the
//! API server naming the field, and changes nothing.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use karmada_apis::Cluster;
use karmada_apis::remedy::v1alpha1::{
    Remedy, SERVICE_DOMAIN_NAME_RESOLUTION_READY, TRAFFIC_CONTROL,
};
use karmada_controllers::common::conditions::{
    new_condition, set_condition as set_status_condition,
};
use karmada_e2e::controller_manager::{Kcm, start_joined};
use karmada_e2e::wait::eventually_showing;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(90);

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        install_crds: true,
        host_controller_manager: false,
        ..Default::default()
    })
}

/// Polls `check` every 200 ms until it returns `Ok`; panics with the last reason and the
/// controller-manager's log on timeout.
async fn eventually<T>(what: &str, kcm: &Kcm, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    let every = Duration::from_millis(200);
    let log = || format!("controller-manager log (tail):\n{}", kcm.log_tail(60));
    eventually_showing(what, WAIT, every, log, check).await
}

fn actions_of(c: &Cluster) -> Vec<String> {
    c.status
        .as_ref()
        .map(|s| s.remedy_actions.clone())
        .unwrap_or_default()
}

/// Waits until the Cluster `name` lists exactly `want` in `status.remedyActions`.
async fn wait_actions(clusters: &Api<Cluster>, kcm: &Kcm, name: &str, want: &[&str]) {
    eventually(
        &format!("{name} remedyActions == {want:?}"),
        kcm,
        async || {
            let c = clusters.get(name).await.map_err(|e| e.to_string())?;
            let got = actions_of(&c);
            if got == want {
                Ok(())
            } else {
                Err(format!("remedyActions {got:?}"))
            }
        },
    )
    .await;
}

async fn actions_now(clusters: &Api<Cluster>, name: &str) -> Vec<String> {
    actions_of(&clusters.get(name).await.unwrap())
}

/// Applies `edit` to the conditions of the Cluster `name` as read, and writes them with a merge
/// patch of the status guarded by the resourceVersion read, retried on conflict.
async fn edit_conditions(clusters: &Api<Cluster>, name: &str, edit: impl Fn(&mut Vec<Condition>)) {
    let deadline = Instant::now() + WAIT;
    loop {
        let cluster = clusters.get(name).await.unwrap();
        let mut conditions = cluster
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        edit(&mut conditions);
        let patch = json!({
            "metadata": {"resourceVersion": cluster.resource_version()},
            "status": {"conditions": conditions},
        });
        match clusters
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 && Instant::now() < deadline => continue,
            Err(e) => panic!("editing the conditions of {name}: {e}"),
        }
    }
}

/// Sets the condition `type_` of the Cluster `name` to `status`, keeping every other condition.
async fn set_condition(clusters: &Api<Cluster>, name: &str, type_: &str, status: &str) {
    let reason = if status == "True" {
        "ServiceDomainNameResolved"
    } else {
        "ServiceDomainNameResolutionFailed"
    };
    let condition = new_condition(type_, status, reason, "set by the remedy test");
    edit_conditions(clusters, name, |conditions| {
        set_status_condition(conditions, condition.clone());
    })
    .await;
}

fn condition<'a>(c: &'a Cluster, type_: &str) -> Option<&'a Condition> {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
}

fn remedy(name: &str, spec: Value) -> Remedy {
    serde_json::from_value(json!({
        "apiVersion": "remedy.karmada.io/v1alpha1",
        "kind": "Remedy",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

async fn remedy_names(remedies: &Api<Remedy>) -> Vec<String> {
    let mut names: Vec<String> = remedies
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    names.sort();
    names
}

const KCM_ARGS: &[&str] = &[
    "--leader-elect=false",
    "--controllers=cluster,clusterStatus,remedy",
    "--cluster-status-update-frequency=1s",
];

fn start_kcm(env: &TestEnv) -> Kcm {
    Kcm::start(env.host().kubeconfig_path(), KCM_ARGS, &[])
}

/// Whether the controller-manager is ready and its Cluster queue is empty with no Cluster being
/// handled (every Cluster replayed at start-up has been handled).
fn clusters_quiet(kcm: &Kcm) -> bool {
    let ready = kcm.probe("/readyz").is_some_and(|(code, _)| code == 200);
    let Some(metrics) = kcm.metrics() else {
        return false;
    };
    let cluster_lines: Vec<&str> = metrics
        .lines()
        .filter(|l| {
            (l.starts_with("workqueue_depth{")
                || l.starts_with("controller_runtime_active_workers{"))
                && l.contains("\"Cluster.cluster.karmada.io\"")
        })
        .collect();
    ready
        && !cluster_lines.is_empty()
        && cluster_lines
            .iter()
            .all(|l| l.rsplit(' ').next().is_some_and(|v| v.trim() == "0"))
}

/// Records `status.remedyActions` of every version of the Cluster `name` after `resource_version`.
fn record_actions(
    clusters: &Api<Cluster>,
    name: &str,
    resource_version: &str,
) -> Arc<Mutex<Vec<Vec<String>>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (clusters, seen_by_task) = (clusters.clone(), seen.clone());
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    let resource_version = resource_version.to_owned();
    tokio::spawn(async move {
        let mut stream = clusters
            .watch(&params, &resource_version)
            .await
            .unwrap()
            .boxed();
        while let Some(event) = stream.next().await {
            match event.unwrap() {
                WatchEvent::Added(c) | WatchEvent::Modified(c) => {
                    seen_by_task.lock().unwrap().push(actions_of(&c));
                }
                WatchEvent::Error(e) => panic!("watch error: {e:?}"),
                _ => {}
            }
        }
    });
    seen
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn remedies_set_cluster_remedy_actions() {
    let env = env();
    let host: Client = env.host().client().await;
    // Every member Ready: clusterStatus has written their status once, so the conditions set below
    // are written next to its own.
    let kcm = start_joined(
        env,
        KCM_ARGS,
        // API-server-only members have no token controller: do not wait long for it.
        &["--token-wait=2s"],
        WAIT,
    )
    .await;
    let member1 = env.members()[0].name().to_owned();
    let member2 = env.members()[1].name().to_owned();
    let clusters: Api<Cluster> = Api::all(host.clone());
    let remedies: Api<Remedy> = Api::all(host.clone());

    // 1. A Remedy for every cluster, triggered by ServiceDomainNameResolutionReady=False.
    set_condition(
        &clusters,
        &member1,
        SERVICE_DOMAIN_NAME_RESOLUTION_READY,
        "True",
    )
    .await;
    set_condition(
        &clusters,
        &member2,
        SERVICE_DOMAIN_NAME_RESOLUTION_READY,
        "True",
    )
    .await;
    remedies
        .create(
            &PostParams::default(),
            &remedy(
                "dns",
                json!({
                    "decisionMatches": [{"clusterConditionMatch": {
                        "conditionType": SERVICE_DOMAIN_NAME_RESOLUTION_READY,
                        "operator": "Equal",
                        "conditionStatus": "False",
                    }}],
                    "actions": [TRAFFIC_CONTROL],
                }),
            ),
        )
        .await
        .unwrap();
    set_condition(
        &clusters,
        &member1,
        SERVICE_DOMAIN_NAME_RESOLUTION_READY,
        "False",
    )
    .await;
    wait_actions(&clusters, &kcm, &member1, &[TRAFFIC_CONTROL]).await;
    // The other member has the condition too, True: no action.
    assert_eq!(actions_now(&clusters, &member2).await, Vec::<String>::new());
    // clusterStatus rewrites the conditions list when its Ready condition differs from what it
    // observes: tamper with Ready's message, and once clusterStatus has put it back, the condition
    // it does not own is still there, and so are the actions.
    edit_conditions(&clusters, &member1, |conditions| {
        if let Some(c) = conditions.iter_mut().find(|c| c.type_ == "Ready") {
            c.message = "tampered with by the remedy test".to_owned();
        }
    })
    .await;
    eventually(
        "clusterStatus to rewrite member1's Ready condition",
        &kcm,
        async || {
            let c = clusters.get(&member1).await.unwrap();
            let ready = condition(&c, "Ready").ok_or("no Ready condition")?;
            if ready.message.contains("tampered") {
                return Err(format!("Ready not rewritten yet: {ready:?}"));
            }
            let ours = condition(&c, SERVICE_DOMAIN_NAME_RESOLUTION_READY);
            let actions = actions_of(&c);
            if ours.is_some_and(|o| o.status == "False") && actions == [TRAFFIC_CONTROL] {
                Ok(())
            } else {
                panic!(
                    "clusterStatus's write lost the condition or the actions: {ours:?} {actions:?}"
                )
            }
        },
    )
    .await;
    // A restart does not take the actions away even for a moment: the Cluster handler starts only
    // once the Remedies are all known.
    drop(kcm);
    let rv = clusters
        .get(&member1)
        .await
        .unwrap()
        .resource_version()
        .unwrap();
    let seen = record_actions(&clusters, &member1, &rv);
    let mut kcm = start_kcm(env);
    kcm.wait_for(
        "a quiet Cluster queue after the restart",
        WAIT,
        clusters_quiet,
    )
    .await;
    assert_eq!(actions_now(&clusters, &member1).await, [TRAFFIC_CONTROL]);
    let flaps: Vec<Vec<String>> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|a| *a != &[TRAFFIC_CONTROL])
        .cloned()
        .collect();
    assert!(
        flaps.is_empty(),
        "member1's actions changed during the restart: {flaps:?}"
    );

    set_condition(
        &clusters,
        &member1,
        SERVICE_DOMAIN_NAME_RESOLUTION_READY,
        "True",
    )
    .await;
    wait_actions(&clusters, &kcm, &member1, &[]).await;

    // 2. A Remedy without decisionMatches, pinned to member2 by clusterAffinity.
    remedies
        .create(
            &PostParams::default(),
            &remedy(
                "pinned",
                json!({
                    "clusterAffinity": {"clusterNames": [member2]},
                    "actions": [TRAFFIC_CONTROL],
                }),
            ),
        )
        .await
        .unwrap();
    wait_actions(&clusters, &kcm, &member2, &[TRAFFIC_CONTROL]).await;
    assert_eq!(actions_now(&clusters, &member1).await, Vec::<String>::new());
    // Moving the affinity moves the action: the cluster it no longer names loses it.
    remedies
        .patch(
            "pinned",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"clusterAffinity": {"clusterNames": [member1]}}})),
        )
        .await
        .unwrap();
    wait_actions(&clusters, &kcm, &member1, &[TRAFFIC_CONTROL]).await;
    wait_actions(&clusters, &kcm, &member2, &[]).await;
    remedies
        .delete("pinned", &DeleteParams::default())
        .await
        .unwrap();
    wait_actions(&clusters, &kcm, &member1, &[]).await;

    // 3. An invalid Remedy (an operator Karmada's enum does not have) is refused, naming the
    // field; nothing is created and no cluster changes.
    let before = (
        remedy_names(&remedies).await,
        actions_now(&clusters, &member1).await,
        actions_now(&clusters, &member2).await,
    );
    let bad = remedy(
        "bad-operator",
        json!({
            "decisionMatches": [{"clusterConditionMatch": {
                "conditionType": SERVICE_DOMAIN_NAME_RESOLUTION_READY,
                "operator": "In",
                "conditionStatus": "False",
            }}],
            "actions": [TRAFFIC_CONTROL],
        }),
    );
    match remedies.create(&PostParams::default(), &bad).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "{e:?}");
            assert!(
                e.message
                    .contains("spec.decisionMatches[0].clusterConditionMatch.operator")
                    && e.message.contains("Unsupported value: \"In\""),
                "{}",
                e.message
            );
        }
        other => panic!("invalid Remedy accepted: {other:?}"),
    }
    let after = (
        remedy_names(&remedies).await,
        actions_now(&clusters, &member1).await,
        actions_now(&clusters, &member2).await,
    );
    assert_eq!(before, after);
    assert_eq!(after.0, ["dns"]);

    remedies
        .delete("dns", &DeleteParams::default())
        .await
        .unwrap();
}

/// What the CRD refuses, naming the field: an operator other than `Equal`/`NotEqual`, a
/// requirement without its required fields, a Remedy without `spec`. Dry runs: nothing is stored.
#[tokio::test]
async fn invalid_remedies_are_rejected() {
    let host = env().host().client().await;
    let remedies: Api<Remedy> = Api::all(host);
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let object = |spec: Option<Value>| -> Value {
        let mut o = json!({
            "apiVersion": "remedy.karmada.io/v1alpha1",
            "kind": "Remedy",
            "metadata": {"name": "bad"},
        });
        if let Some(spec) = spec {
            o["spec"] = spec;
        }
        o
    };
    let good = object(Some(json!({
        "decisionMatches": [{"clusterConditionMatch": {"conditionType": "Ready", "operator": "NotEqual", "conditionStatus": "True"}}],
        "actions": [TRAFFIC_CONTROL],
    })));
    let dynamic = |v: Value| -> kube::api::DynamicObject { serde_json::from_value(v).unwrap() };
    let api = Api::<kube::api::DynamicObject>::all_with(
        remedies.clone().into_client(),
        &kube::api::ApiResource::erase::<Remedy>(&()),
    );
    api.create(&dry, &dynamic(good))
        .await
        .expect("a valid Remedy is accepted");
    for (spec, field, text) in [
        (
            Some(
                json!({"decisionMatches": [{"clusterConditionMatch": {"conditionType": "Ready", "operator": "Equals", "conditionStatus": "False"}}]}),
            ),
            "spec.decisionMatches[0].clusterConditionMatch.operator",
            "Unsupported value",
        ),
        (
            Some(
                json!({"decisionMatches": [{"clusterConditionMatch": {"operator": "Equal", "conditionStatus": "False"}}]}),
            ),
            "spec.decisionMatches[0].clusterConditionMatch.conditionType",
            "Required value",
        ),
        (
            Some(
                json!({"decisionMatches": [{"clusterConditionMatch": {"conditionType": "Ready", "operator": "Equal"}}]}),
            ),
            "spec.decisionMatches[0].clusterConditionMatch.conditionStatus",
            "Required value",
        ),
        (None, "spec", "Required value"),
    ] {
        match api.create(&dry, &dynamic(object(spec.clone()))).await {
            Err(kube::Error::Api(e)) => {
                assert_eq!(e.code, 422, "{spec:?}: {e:?}");
                assert!(
                    e.message.contains(field) && e.message.contains(text),
                    "{spec:?}: {} does not name {field} ({text})",
                    e.message
                );
            }
            other => panic!("{spec:?} accepted: {other:?}"),
        }
    }
    assert!(
        remedies.get_opt("bad").await.unwrap().is_none(),
        "a dry run stores nothing"
    );
}
