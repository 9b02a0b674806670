//! Staged rollout (karmada-rs's own `apps.karmada-rs.io` RolloutStrategy and Rollout) against
//! real API servers: a host with the detector, scheduler, binding (and the rollout controller
//! beside it), execution, workStatus, bindingStatus and namespace controllers in-process, and
//! three full members (kube-controller-manager, kube-scheduler, kwok nodes) where Deployments
//! really become Available, or never do.
//!
//! One scenario: a Deployment placed on the three members (first placement, not gated); a good
//! image goes through three one-cluster stages in order, each held back until the one before is
//! healthy for the soak time, the first also until `karmadactl rollout approve`; a bad image (its pods can never be scheduled) halts after the
//! first stage with the other members untouched; `karmadactl rollout rollback` returns the first
//! member to the stable revision.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use karmada_apis::Cluster;
use karmada_apis::rollout::{
    PHASE_AWAITING_APPROVAL, PHASE_COMPLETED, PHASE_HALTED, PHASE_PROGRESSING, PHASE_ROLLED_BACK,
    Rollout, RolloutState,
};
use karmada_controllers::members::member_cluster_options;
use karmada_e2e::in_process::{self, Controllers, Harness, create_namespace};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use lariat::ClusterOptions;
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(180);
const MEMBERS: [&str; 3] = ["member1", "member2", "member3"];
const NS: &str = "rollout-e2e";
const ROLLOUT: &str = "web-deployment";

fn env() -> &'static TestEnv {
    in_process::init_tracing();
    testenv::shared(EnvOptions {
        members: 3,
        full_members: 3,
        kwok_nodes: 1,
        install_crds: true,
        host_controller_manager: false,
        ..Default::default()
    })
}

fn fast(mut options: ClusterOptions) -> ClusterOptions {
    options.clients.qps = 200.0;
    options.clients.burst = 400;
    options
}

async fn start_controllers() -> Controllers {
    let mut controllers = in_process::implemented(&[
        "scheduler",
        "binding",
        "execution",
        "namespace",
        "workStatus",
        "bindingStatus",
    ]);
    controllers.push((
        "resource-detector",
        karmada_controllers::detector::start_fn(),
    ));
    Harness::new(controllers)
        .settings(karmada_controllers::Settings {
            cluster_api_qps: 200.0,
            cluster_api_burst: 400,
            ..in_process::settings()
        })
        .host_options(fast(ClusterOptions::default()))
        .members(&MEMBERS, fast(member_cluster_options()))
        .start(env())
        .await
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    karmada_e2e::wait::eventually(what, WAIT, Duration::from_millis(300), check).await
}

/// Ready Cluster objects serving Deployments (member2 labelled for the label-selected stage),
/// their execution namespaces, and the test namespace.
async fn clusters_ready(client: &Client) {
    let api: Api<Cluster> = Api::all(client.clone());
    let apis = json!({"apiEnablements": [
        {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
        {"groupVersion": "v1", "resources": [{"name": "namespaces", "kind": "Namespace"}]},
    ]});
    for (i, name) in MEMBERS.iter().enumerate() {
        create_namespace(
            client,
            &format!("karmada-es-{name}"),
            json!({"karmada.io/system": "true"}),
        )
        .await;
        let c: Cluster = serde_json::from_value(json!({
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name, "labels": {"rollout-e2e/wave": (i + 1).to_string()}},
            "spec": {"syncMode": "Push", "apiEndpoint": env().members()[i].url()}
        }))
        .unwrap();
        match api.create(&PostParams::default(), &c).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("create Cluster {name}: {e}"),
        }
        in_process::set_cluster_ready(client, name, true, "ready", apis.clone()).await;
    }
    create_namespace(client, NS, json!({})).await;
}

/// The Deployment template: `image`, and a node selector no node has when `stuck`.
fn web(image: &str, stuck: bool) -> Value {
    let mut pod = json!({"containers": [{"name": "web", "image": image}]});
    if stuck {
        pod["nodeSelector"] = json!({"rollout-e2e/no-such-node": "true"});
    }
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS, "labels": {"app": "web"}},
        "spec": {
            "replicas": 1,
            // Recreate: a new pod that never runs leaves the Deployment unavailable (with a
            // rolling update the old pod stays available and the health rule calls it healthy).
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod},
        },
    })
}

/// What member `i` runs: the Deployment's image and whether it is Available with every replica
/// updated (`None` while it does not exist).
async fn member_state(i: usize) -> Option<(String, bool, bool)> {
    let api: Api<Deployment> = Api::namespaced(env().members()[i].client().await, NS);
    let d = api.get_opt("web").await.unwrap()?;
    let spec = d.spec.clone();
    let pod = spec.template.spec.clone().unwrap_or_default();
    let image = pod.containers[0].image.clone().unwrap_or_default();
    let stuck = pod.node_selector.is_some_and(|s| !s.is_empty());
    let s = d.status.clone().unwrap_or_default();
    let ready = s.observed_generation == d.meta().generation
        && s.updated_replicas == Some(1)
        && s.available_replicas == Some(1);
    Some((image, stuck, ready))
}

async fn rollout(host: &Client) -> Option<Rollout> {
    Api::<Rollout>::namespaced(host.clone(), NS)
        .get_opt(ROLLOUT)
        .await
        .unwrap()
}

fn summary(r: &Rollout) -> String {
    let s = r.status_or_default();
    let clusters: Vec<String> = s
        .clusters
        .iter()
        .map(|c| {
            format!(
                "{}={}:{}:{}",
                c.name,
                c.revision,
                c.state.as_str(),
                c.reason
            )
        })
        .collect();
    format!(
        "phase {} stage {} target {} stable {} {clusters:?} {}",
        s.phase, s.current_stage, s.target_revision, s.stable_revision, s.message
    )
}

/// Waits until the Rollout is in `phase` with target revision other than `not` and returns it.
async fn rollout_in(host: &Client, phase: &str, not: &str) -> Rollout {
    eventually(&format!("Rollout {phase}"), || async {
        let r = rollout(host).await.ok_or("no Rollout yet")?;
        let s = r.status_or_default();
        if s.phase == phase && s.target_revision != not {
            Ok(r)
        } else {
            Err(summary(&r))
        }
    })
    .await
}

/// Waits until every member in `which` runs `image` (stuck or not), Available when `ready`.
async fn members_run(which: &[usize], image: &str, stuck: bool, ready: bool) {
    for i in which {
        eventually(&format!("{} runs {image}", MEMBERS[*i]), || async {
            match member_state(*i).await {
                Some((got, s, r)) if got == image && s == stuck && (r || !ready) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }
}

async fn set_template(host: &Client, image: &str, stuck: bool) {
    let api: Api<Deployment> = Api::namespaced(host.clone(), NS);
    let node_selector = if stuck {
        json!({"rollout-e2e/no-such-node": "true"})
    } else {
        Value::Null
    };
    let patch = json!({"spec": {"template": {"spec": {
        "containers": [{"name": "web", "image": image}],
        "nodeSelector": node_selector,
    }}}});
    api.patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
}

/// `karmadactl rollout <args> -n NS` against the host; what it prints, or its error.
async fn karmadactl(args: &[&str]) -> Result<String, String> {
    let kubeconfig = env().kubeconfig_path().display().to_string();
    let mut all = vec![
        "karmadactl".to_owned(),
        "rollout".to_owned(),
        format!("--kubeconfig={kubeconfig}"),
        "--karmada-context=host".to_owned(),
        format!("--namespace={NS}"),
    ];
    all.extend(args.iter().map(ToString::to_string));
    karmadactl::run_output(all)
        .await
        .map_err(|e| format!("{e:#}"))
}

async fn create_objects(host: &Client) {
    let strategy = json!({
        "apiVersion": "apps.karmada-rs.io/v1alpha1", "kind": "RolloutStrategy",
        "metadata": {"name": "waves", "namespace": NS},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "stages": [
                {"name": "canary", "clusterNames": ["member1"],
                 "afterStageTasks": [{"type": "Approval"}]},
                {"name": "early", "labelSelector": {"matchLabels": {"rollout-e2e/wave": "2"}}},
                {"name": "rest", "clusterNames": ["member3"], "maxConcurrency": 1},
            ],
            "minSuccessSeconds": 3,
            "progressDeadlineSeconds": 25,
        },
    });
    let policy = json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "placement": {
                "clusterAffinity": {"clusterNames": MEMBERS},
                "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
            },
        },
    });
    for (object, plural) in [
        (strategy, "rolloutstrategies"),
        (policy, "propagationpolicies"),
        (web("registry.example/web:v1", false), "deployments"),
    ] {
        let gvk = apimachinery::gvk_of(
            object["apiVersion"].as_str().unwrap(),
            object["kind"].as_str().unwrap(),
        );
        let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(host.clone(), NS, &ar);
        let o: kube::api::DynamicObject = serde_json::from_value(object).unwrap();
        api.create(&PostParams::default(), &o).await.unwrap();
    }
}

/// The CRDs refuse a stage selecting clusters both ways (CEL).
async fn invalid_strategy_refused(host: &Client) {
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &apimachinery::gvk_of("apps.karmada-rs.io/v1alpha1", "RolloutStrategy"),
        "rolloutstrategies",
    );
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(host.clone(), NS, &ar);
    let bad: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.karmada-rs.io/v1alpha1", "kind": "RolloutStrategy",
        "metadata": {"name": "bad", "namespace": NS},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "none"}],
            "stages": [{"name": "a", "clusterNames": ["member1"],
                        "labelSelector": {"matchLabels": {"x": "y"}}}],
        },
    }))
    .unwrap();
    let err = api.create(&PostParams::default(), &bad).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("exactly one of labelSelector or clusterNames"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn a_revision_goes_stage_by_stage_halts_when_unhealthy_and_rolls_back() {
    let host = env().host().client().await;
    clusters_ready(&host).await;
    let controllers = start_controllers().await;
    for (i, member) in MEMBERS.iter().enumerate() {
        let m = env().members()[i].client().await;
        eventually(&format!("namespace {NS} in {member}"), || async {
            let api: Api<Namespace> = Api::all(m.clone());
            api.get_opt(NS)
                .await
                .unwrap()
                .map(|_| ())
                .ok_or_else(|| "not yet".to_owned())
        })
        .await;
    }
    invalid_strategy_refused(&host).await;
    create_objects(&host).await;

    // First placement: not gated; the Rollout records v1 as stable.
    members_run(&[0, 1, 2], "registry.example/web:v1", false, true).await;
    let first = rollout_in(&host, PHASE_COMPLETED, "").await;
    let v1 = first.status_or_default().stable_revision;
    assert!(!v1.is_empty());

    // A good image: member1 first; member3 keeps v1 until member1 and member2 are healthy.
    set_template(&host, "registry.example/web:v2", false).await;
    let progressing = rollout_in(&host, PHASE_PROGRESSING, &v1).await;
    let v2 = progressing.status_or_default().target_revision;
    members_run(&[0], "registry.example/web:v2", false, false).await;
    let (image3, _, _) = member_state(2).await.unwrap();
    let r = rollout(&host).await.unwrap();
    let s = r.status_or_default();
    let m3 = s.clusters.iter().find(|c| c.name == "member3").unwrap();
    if m3.state == RolloutState::Pending {
        assert_eq!(image3, "registry.example/web:v1", "{}", summary(&r));
    }
    // The canary stage waits for an approval, given with karmadactl.
    rollout_in(&host, PHASE_AWAITING_APPROVAL, &v1).await;
    let status = karmadactl(&["status", "deployment/web"]).await.unwrap();
    assert!(
        status.contains("stage canary: Succeeded (AwaitingApproval)"),
        "{status}"
    );
    assert!(status.contains("member3: Pending revision"), "{status}");
    members_run(&[1, 2], "registry.example/web:v1", false, true).await;
    let approved = karmadactl(&["approve", "deployment/web"]).await.unwrap();
    assert_eq!(approved, "rollout web-deployment approved");
    let done = rollout_in(&host, PHASE_COMPLETED, &v1).await;
    let s = done.status_or_default();
    assert_eq!(s.stable_revision, v2, "{}", summary(&done));
    members_run(&[0, 1, 2], "registry.example/web:v2", false, true).await;
    // The stages succeeded in order, each after the soak time of the one before.
    let since = |stage: &str| {
        s.stages
            .iter()
            .find(|st| st.name == stage)
            .and_then(|st| st.since.clone())
            .unwrap()
            .0
            .as_second()
    };
    assert!(
        since("canary") + 3 <= since("early") && since("early") + 3 <= since("rest"),
        "{:?}",
        s.stages
    );

    // A bad image (pods never scheduled): member1 fails, the rollout halts, the rest keep v2.
    set_template(&host, "registry.example/web:v3", true).await;
    let halted = rollout_in(&host, PHASE_HALTED, &v2).await;
    let v3 = halted.status_or_default().target_revision;
    let hs = halted.status_or_default();
    let state = |name: &str| {
        hs.clusters
            .iter()
            .find(|c| c.name == name)
            .map(|c| (c.revision.clone(), c.state.clone()))
            .unwrap()
    };
    assert_eq!(state("member1"), (v3.clone(), RolloutState::Failed));
    assert_eq!(state("member2"), (v2.clone(), RolloutState::Pending));
    assert_eq!(state("member3"), (v2.clone(), RolloutState::Pending));
    members_run(&[0], "registry.example/web:v3", true, false).await;
    members_run(&[1, 2], "registry.example/web:v2", false, true).await;
    let halted_condition = in_process::condition(&hs.conditions, "Halted").unwrap();
    assert_eq!(halted_condition.0, "True");

    // Rollback: member1 returns to v2 and is Available again.
    let rolled = karmadactl(&["rollback", ROLLOUT]).await.unwrap();
    assert_eq!(rolled, "rollout web-deployment rolled back");
    let back = rollout_in(&host, PHASE_ROLLED_BACK, &v2).await;
    assert!(
        back.status_or_default()
            .clusters
            .iter()
            .all(|c| c.revision == v2),
        "{}",
        summary(&back)
    );
    members_run(&[0, 1, 2], "registry.example/web:v2", false, true).await;

    controllers.stop().await;
}
