//! Lazy activation against a real API server: a policy with `activationPreference: Lazy` reaches
//! a template's binding only when the template next changes. The detector runs alone (bindings
//! are checked for the placement they carry, not scheduled).
//!
//! Not tested here: a template older than its Lazy policy is claimed without a binding, which
//! cannot be checked without racing the detector's first look at the template (the unit tests of
//! `detector::lazy` cover it).
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use karmada_apis::well_known::PROPAGATION_POLICY_PERMANENT_ID_LABEL;
use karmada_apis::{PropagationPolicy, ResourceBinding};
use karmada_e2e::in_process::{self, Controllers, Harness, create_namespace, serial};
use karmada_e2e::quiet::{Watched, assert_holds_for};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(30);
/// How long a binding must stay as it is after a Lazy policy changed.
const QUIET: Duration = Duration::from_secs(2);

fn env() -> &'static TestEnv {
    in_process::init_tracing();
    testenv::shared(EnvOptions {
        members: 0,
        install_crds: true,
        host_controller_manager: false,
        ..Default::default()
    })
}

async fn setup(ns: &str) -> (Client, Controllers) {
    let client = env().host().client().await;
    create_namespace(&client, ns, json!({})).await;
    let controllers = Harness::new(vec![(
        "resource-detector",
        karmada_controllers::detector::start_fn(),
    )])
    .start(env())
    .await;
    (client, controllers)
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    karmada_e2e::wait::eventually(what, WAIT, Duration::from_millis(100), check).await
}

async fn create_deployment(client: &Client, ns: &str) {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
}

async fn create_lazy_policy(client: &Client, ns: &str, cluster: &str) {
    let p: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "lazy", "namespace": ns},
        "spec": {"activationPreference": "Lazy",
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "placement": {"clusterAffinity": {"clusterNames": [cluster]}}}
    }))
    .unwrap();
    let pps = Api::<PropagationPolicy>::namespaced(client.clone(), ns);
    pps.create(&PostParams::default(), &p).await.unwrap();
    // The detector labels a policy it has seen with its permanent id. A template it reconciles
    // before that is claimed by no policy and, once the policy comes, counts as older than it (the
    // Lazy policy leaves its binding alone): Karmada's detector does the same, so wait for it.
    eventually("the detector to see PropagationPolicy lazy", || async {
        let p = pps.get("lazy").await.unwrap();
        p.labels()
            .contains_key(PROPAGATION_POLICY_PERMANENT_ID_LABEL)
            .then_some(())
    })
    .await;
}

async fn patch<K>(api: &Api<K>, name: &str, patch: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// The cluster names of a binding's placement.
fn placed_on(rb: &ResourceBinding) -> Vec<String> {
    rb.spec
        .placement
        .as_ref()
        .and_then(|p| p.cluster_affinity.as_ref())
        .map(|a| a.cluster_names.clone())
        .unwrap_or_default()
}

async fn binding_placed_on(rbs: &Api<ResourceBinding>, cluster: &str) -> ResourceBinding {
    eventually(
        &format!("binding web-deployment placed on {cluster}"),
        || async {
            let rb = rbs.get_opt("web-deployment").await.unwrap()?;
            (placed_on(&rb) == [cluster]).then_some(rb)
        },
    )
    .await
}

#[tokio::test]
async fn a_lazy_policy_change_waits_for_the_template_to_change() {
    let _serial = serial().lock().await;
    let ns = "lazy-change";
    let (client, controllers) = setup(ns).await;
    create_lazy_policy(&client, ns, "lazy-a").await;
    // A new template is a user change: the Lazy policy applies at once.
    create_deployment(&client, ns).await;
    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    let rb = binding_placed_on(&rbs, "lazy-a").await;

    // The policy moves to lazy-b: the binding keeps lazy-a.
    let pps: Api<PropagationPolicy> = Api::namespaced(client.clone(), ns);
    patch(
        &pps,
        "lazy",
        json!({"spec": {"placement": {"clusterAffinity": {"clusterNames": ["lazy-b"]}}}}),
    )
    .await;
    assert_holds_for(
        &rbs,
        Watched::Name("web-deployment"),
        &rb.resource_version().unwrap(),
        QUIET,
        |rb| {
            (placed_on(rb) == ["lazy-a"]).then_some(()).ok_or(format!(
                "placement followed the Lazy policy: {:?}",
                placed_on(rb)
            ))
        },
    )
    .await;

    // The template changes: now the binding takes the policy's placement.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    patch(&deployments, "web", json!({"spec": {"replicas": 2}})).await;
    let rb = binding_placed_on(&rbs, "lazy-b").await;
    assert_eq!(rb.spec.replicas, 2);
    controllers.stop().await;
}
