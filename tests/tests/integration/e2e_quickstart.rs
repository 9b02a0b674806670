//! The quickstart, end to end through the real binaries: `karmadactl join` two members, run
//! `karmada-controller-manager`, create a Deployment and a PropagationPolicy on the host, and watch the
//! Deployment land in both members, report status back, and go away again when it is deleted.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use karmada_apis::{PropagationPolicy, ResourceBinding, Work};
use karmada_e2e::controller_manager::{Kcm, start_joined};
use karmada_e2e::wait::eventually_showing;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::{EnvOptions, TestEnv};

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        full_members: 1,
        install_crds: true,
        ..Default::default()
    })
}

async fn eventually(what: &str, timeout: Duration, kcm: &Kcm, check: impl AsyncFnMut() -> bool) {
    let every = Duration::from_millis(250);
    let log = || format!("controller-manager log (tail):\n{}", kcm.log_tail(60));
    eventually_showing(what, timeout, every, log, check).await;
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn a_deployment_and_a_policy_propagate_to_both_members_and_back() {
    let env = env();
    let host = env.host().client().await;
    let mut kcm = start_joined(
        env,
        &[
            "--leader-elect=false",
            "--cluster-status-update-frequency=1s",
        ],
        &[],
        Duration::from_secs(60),
    )
    .await;

    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "quickstart"}})).unwrap();
    Api::<Namespace>::all(host.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "nginx", "labels": {"app": "nginx"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]},
            },
        },
    }))
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(host.clone(), "quickstart");
    deployments
        .create(&PostParams::default(), &deploy)
        .await
        .unwrap();
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "nginx"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
            "placement": {
                "clusterAffinity": {"clusterNames": ["member1", "member2"]},
                "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
            },
        },
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(host.clone(), "quickstart")
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();

    // The Deployment lands in both members, marked as managed by Karmada.
    let mut member_clients: Vec<Client> = Vec::new();
    for m in env.members() {
        member_clients.push(m.client().await);
    }
    for (m, client) in env.members().iter().zip(&member_clients) {
        let api: Api<Deployment> = Api::namespaced(client.clone(), "quickstart");
        eventually(
            &format!("quickstart/nginx in {}", m.name()),
            Duration::from_secs(60),
            &kcm,
            || async { api.get_opt("nginx").await.ok().flatten().is_some() },
        )
        .await;
        let d = api.get("nginx").await.unwrap();
        let labels = d.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels.get("karmada.io/managed").map(String::as_str),
            Some("true")
        );
        assert_eq!(d.spec.replicas, Some(2));
    }

    // Karmada's object names: binding `nginx-deployment`, Work `nginx-687f7fb96f` in each
    // execution namespace (the Work name hashes namespace/name/kind: see karmada-apis' tests).
    let rbs: Api<ResourceBinding> = Api::namespaced(host.clone(), "quickstart");
    eventually(
        "binding FullyApplied",
        Duration::from_secs(60),
        &kcm,
        || async {
            rbs.get_opt("nginx-deployment")
                .await
                .ok()
                .flatten()
                .and_then(|rb| rb.status)
                .is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "FullyApplied" && c.status == "True")
                })
        },
    )
    .await;
    for m in env.members() {
        let works: Api<Work> = Api::namespaced(host.clone(), &format!("karmada-es-{}", m.name()));
        let names: Vec<String> = works
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|w| w.metadata.name)
            .collect();
        assert!(
            names.iter().any(|n| n.starts_with("nginx-")),
            "Work for nginx in karmada-es-{}: {names:?}",
            m.name()
        );
    }

    // Status comes home: member1 is full (its Deployment controller reports 2 replicas, updated);
    // member2 has no controllers, so its copy reports no status. The template's status is the sum of
    // the members' real values. (Readiness of kwok pods can flap on a loaded machine, so the stable
    // counters are asserted.)
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let d = deployments.get("nginx").await.unwrap();
        let status = d.status.unwrap_or_default();
        if status.replicas == Some(2) && status.updated_replicas == Some(2) {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            let rb = rbs.get("nginx-deployment").await.unwrap();
            let mut members = String::new();
            for (m, client) in env.members().iter().zip(&member_clients) {
                let api: Api<Deployment> = Api::namespaced(client.clone(), "quickstart");
                let d = api.get("nginx").await.unwrap();
                members.push_str(&format!("{}: {:?}\n", m.name(), d.status));
            }
            panic!(
                "template status never showed the members' 2 (updated) replicas\nbinding status: {}\nmembers:\n{members}\nlog tail:\n{}",
                serde_json::to_string(&rb.status).unwrap(),
                tail(&kcm.log(), 40)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Drift repair: a managed object deleted by hand in a member comes back, and one edited by hand is
    // put back to the template's spec.
    let member2: Api<Deployment> = Api::namespaced(member_clients[1].clone(), "quickstart");
    let before = member2.get("nginx").await.unwrap().metadata.uid;
    member2
        .delete("nginx", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "quickstart/nginx recreated in member2",
        Duration::from_secs(60),
        &kcm,
        || async {
            member2
                .get_opt("nginx")
                .await
                .ok()
                .flatten()
                .is_some_and(|d| {
                    d.metadata.uid != before && d.metadata.deletion_timestamp.is_none()
                })
        },
    )
    .await;
    // A patch, as `kubectl edit` would do: execution may be writing the object concurrently.
    let edit = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "nginx", "image": "nginx:hand-edited"}]}}}});
    member2
        .patch("nginx", &PatchParams::default(), &Patch::Strategic(edit))
        .await
        .unwrap();
    eventually(
        "hand-edited image in member2 put back",
        Duration::from_secs(60),
        &kcm,
        || async {
            member2.get("nginx").await.ok().is_some_and(|d| {
                d.spec
                    .template
                    .spec
                    .and_then(|s| s.containers.first().and_then(|c| c.image.clone()))
                    .as_deref()
                    == Some("nginx:1.27")
            })
        },
    )
    .await;

    // Deleting the template removes it from every member and leaves no binding behind.
    deployments
        .delete("nginx", &DeleteParams::default())
        .await
        .unwrap();
    for (m, client) in env.members().iter().zip(&member_clients) {
        let api: Api<Deployment> = Api::namespaced(client.clone(), "quickstart");
        eventually(
            &format!("quickstart/nginx gone from {}", m.name()),
            Duration::from_secs(60),
            &kcm,
            || async { api.get_opt("nginx").await.ok().flatten().is_none() },
        )
        .await;
    }
    eventually("binding gone", Duration::from_secs(60), &kcm, || async {
        rbs.get_opt("nginx-deployment")
            .await
            .ok()
            .flatten()
            .is_none()
    })
    .await;

    kcm.signal(libc::SIGTERM);
    let status = kcm.wait_exit(Duration::from_secs(30)).await;
    assert_eq!(
        status.and_then(Kcm::code),
        Some(0),
        "controller-manager exit; log tail:\n{}",
        tail(&kcm.log(), 40)
    );
}
