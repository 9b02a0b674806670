//! `kubectl apply` keeps working on objects the controllers write to: the resource detector and the
//! cluster controller patch only the labels, annotations, finalizers and taints they own, so the
//! `kubectl.kubernetes.io/last-applied-configuration` annotation (which member caches strip; the
//! control plane's keep it) survives a claim, a preemption and a release of a Deployment, the
//! permanent id on its policies, and the finalizer and taints on a Cluster; and a second `kubectl apply` without a
//! label prunes it, without kubectl's "missing the last-applied annotation" warning.
//!
//! The real `kubectl` (from `hack/install-helm.sh`) against a real API server; the detector and the
//! cluster controller run in-process. The host runs without kube-controller-manager.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use karmada_apis::{Cluster, PropagationPolicy};
use karmada_controllers::StartFn;
use karmada_e2e::in_process::{self, Controllers, Harness, create_namespace, serial};
use karmada_e2e::tools::tool;
use kube::api::Api;
use kube::{Client, ResourceExt};
use lariat::runtime::features::{FeatureGates, FeatureSpec, PreRelease};
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(30);
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
const PP_NAME_ANNOTATION: &str = "propagationpolicy.karmada.io/name";
const PP_ID_LABEL: &str = "propagationpolicy.karmada.io/permanent-id";
const NS: &str = "kubectl-apply";
const CLUSTER: &str = "ka-member";

fn env() -> &'static TestEnv {
    in_process::init_tracing();
    testenv::shared(EnvOptions {
        members: 0,
        install_crds: true,
        host_controller_manager: false,
        ..Default::default()
    })
}

static GATES: &[FeatureSpec] = &[FeatureSpec {
    name: "PropagationPolicyPreemption",
    default: false,
    pre_release: PreRelease::Alpha,
    lock_to_default: false,
}];

/// `controllers` in-process, with `PropagationPolicyPreemption` on.
async fn start(controllers: Vec<(&'static str, StartFn)>) -> Controllers {
    let mut feature_gates = FeatureGates::new(GATES);
    feature_gates
        .set_from_str("PropagationPolicyPreemption=true")
        .unwrap();
    Harness::new(controllers)
        .settings(karmada_controllers::Settings {
            feature_gates,
            ..in_process::settings()
        })
        .start(env())
        .await
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    karmada_e2e::wait::eventually(what, WAIT, Duration::from_millis(100), check).await
}

/// Runs `kubectl <args>` against the host with `stdin`; returns stderr, failing on a non-zero exit.
fn kubectl(args: &[&str], stdin: &str) -> String {
    let kubeconfig = env().host().kubeconfig_path().display().to_string();
    tokio::task::block_in_place(|| {
        let mut child = Command::new(tool("kubectl"))
            .args(["--kubeconfig", &kubeconfig])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_bytes())
            .expect("write manifest");
        let out = child.wait_with_output().expect("kubectl output");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {stderr}{}",
            String::from_utf8_lossy(&out.stdout)
        );
        stderr
    })
}

/// `kubectl apply -f -` of `manifest`; fails if kubectl warns that the last-applied annotation is
/// missing (it then cannot prune).
fn apply(manifest: &Value) {
    let stderr = kubectl(&["apply", "-f", "-"], &manifest.to_string());
    assert!(
        !stderr.contains(LAST_APPLIED),
        "kubectl apply warned about the annotation: {stderr}"
    );
}

/// Asserts `obj` carries kubectl's annotation and that it records the manifest last applied with
/// `labels`.
fn assert_last_applied(obj: &impl ResourceExt, labels: &Value, after: &str) {
    let name = obj.name_any();
    let raw = obj.annotations().get(LAST_APPLIED).unwrap_or_else(|| {
        panic!(
            "{name}: {LAST_APPLIED} gone after {after}; annotations: {:?}",
            obj.annotations()
        )
    });
    let applied: Value = serde_json::from_str(raw).expect("annotation is JSON");
    assert_eq!(applied["metadata"]["name"], json!(name), "{after}");
    assert_eq!(&applied["metadata"]["labels"], labels, "{name}: {after}");
}

fn deployment(labels: &Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}
            }
        }
    })
}

fn policy(name: &str, labels: &Value, priority: i32, preemption: &str) -> Value {
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "priority": priority,
            "preemption": preemption,
            "placement": {"clusterAffinity": {"clusterNames": [CLUSTER]}}
        }
    })
}

fn cluster(labels: &Value) -> Value {
    json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": CLUSTER, "labels": labels},
        "spec": {"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:1"}
    })
}

/// The Deployment once it is claimed by policy `name` (`None`: by no policy).
async fn claimed(deployments: &Api<Deployment>, name: Option<&str>) -> Deployment {
    eventually(&format!("template claimed by {name:?}"), || async {
        let d = deployments.get("web").await.unwrap();
        (d.annotations().get(PP_NAME_ANNOTATION).map(String::as_str) == name
            && d.labels().contains_key(PP_ID_LABEL) == name.is_some())
        .then_some(d)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_keeps_working_on_a_cluster_the_cluster_controller_writes() {
    let _serial = serial().lock().await;
    let client: Client = env().host().client().await;
    let ctrl = start(vec![("cluster", karmada_controllers::cluster::start_fn())]).await;

    // --- A Cluster applied with kubectl gets the controller's finalizer and not-ready taint. ---
    let cluster_labels = json!({"env": "test", "tier": "edge"});
    apply(&cluster(&cluster_labels));
    let clusters: Api<Cluster> = Api::all(client.clone());
    let has_taint = |c: &Cluster| {
        c.spec
            .taints
            .iter()
            .any(|t| t.key == "cluster.karmada.io/not-ready")
    };
    let c = eventually("cluster finalizer and not-ready taint", || async {
        let c = clusters.get(CLUSTER).await.unwrap();
        (c.finalizers()
            .iter()
            .any(|f| f == "karmada.io/cluster-controller")
            && has_taint(&c))
        .then_some(c)
    })
    .await;
    assert_last_applied(
        &c,
        &cluster_labels,
        "the cluster controller's finalizer and taint",
    );
    // Ready: the controller removes the taint again.
    in_process::set_cluster_ready(&client, CLUSTER, true, "set by test", json!({})).await;
    let c = eventually("not-ready taint removed", || async {
        let c = clusters.get(CLUSTER).await.unwrap();
        (!has_taint(&c)).then_some(c)
    })
    .await;
    assert_last_applied(&c, &cluster_labels, "the taint's removal");

    // --- A second apply without the `tier` label prunes it; the finalizer stays. ---
    let pruned = json!({"env": "test"});
    apply(&cluster(&pruned));
    let c = clusters.get(CLUSTER).await.unwrap();
    assert!(
        !c.labels().contains_key("tier"),
        "tier pruned: {:?}",
        c.labels()
    );
    assert!(
        c.finalizers()
            .iter()
            .any(|f| f == "karmada.io/cluster-controller")
    );
    assert_last_applied(&c, &pruned, "the second apply");
    ctrl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_survives_claim_preemption_release_and_still_prunes() {
    let _serial = serial().lock().await;
    let client: Client = env().host().client().await;
    create_namespace(&client, NS, json!({})).await;
    let ctrl = start(vec![(
        "resource-detector",
        karmada_controllers::detector::start_fn(),
    )])
    .await;

    // --- Claim: a Deployment and its policy, both applied with kubectl. ---
    let labels = json!({"app": "web", "tier": "frontend"});
    apply(&deployment(&labels));
    let low_labels = json!({"owner": "team-a"});
    apply(&policy("low", &low_labels, 1, "Never"));
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let d = claimed(&deployments, Some("low")).await;
    assert_last_applied(&d, &labels, "the claim");
    let pps: Api<PropagationPolicy> = Api::namespaced(client.clone(), NS);
    let low = pps.get("low").await.unwrap();
    assert!(low.labels().contains_key(PP_ID_LABEL), "low has its id");
    assert_last_applied(&low, &low_labels, "the policy's permanent id and finalizer");

    // --- Preemption by a higher-priority policy. ---
    apply(&policy("high", &low_labels, 5, "Always"));
    let d = claimed(&deployments, Some("high")).await;
    assert_last_applied(&d, &labels, "the preemption");

    // --- Release: deleting the claiming policy hands the template back to `low`, then to none. ---
    kubectl(
        &[
            "delete",
            "propagationpolicy",
            "high",
            "-n",
            NS,
            "--wait=true",
        ],
        "",
    );
    let d = claimed(&deployments, Some("low")).await;
    assert_last_applied(&d, &labels, "the release by high and the new claim by low");
    kubectl(
        &[
            "delete",
            "propagationpolicy",
            "low",
            "-n",
            NS,
            "--wait=true",
        ],
        "",
    );
    let d = claimed(&deployments, None).await;
    assert_last_applied(&d, &labels, "the release by low");

    // --- A second apply without the `tier` label prunes it. ---
    let pruned = json!({"app": "web"});
    apply(&deployment(&pruned));
    let d = deployments.get("web").await.unwrap();
    assert!(
        !d.labels().contains_key("tier"),
        "tier pruned: {:?}",
        d.labels()
    );
    assert_last_applied(&d, &pruned, "the second apply");
    ctrl.stop().await;
}
