//! Karmada's resource deletion protection without Karmada's webhook: the
//! `karmada-resource-deletion-protection` ValidatingAdmissionPolicy installed with the CRDs
//! (`crds/`) makes the real kube-apiserver refuse `kubectl delete` of any object labelled
//! `resourcetemplate.karmada.io/deletion-protected: Always`, with Karmada's message; any other
//! value, or removing the label, lets the delete through, and unlabelled objects delete freely.
//! A namespace whose deletion was accepted keeps a protected Deployment inside it (the namespace
//! controller's own deletes are refused too), as with Karmada's webhook.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use karmada_apis::well_known::{DELETION_PROTECTION_ALWAYS, DELETION_PROTECTION_LABEL};
use karmada_e2e::tools::tool;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(60);
/// Karmada's webhook's message (`pkg/webhook/resourcedeletionprotection`).
const MESSAGE: &str = "This resource is protected, please make sure to remove the label: resourcetemplate.karmada.io/deletion-protected";
const POLICY: &str = "karmada-resource-deletion-protection";

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 0,
        install_crds: true,
        // The namespace controller, whose deletes inside a deleted namespace are refused too.
        host_controller_manager: true,
        ..Default::default()
    })
}

/// `kubectl delete <args>` against the host: Ok(stdout) or Err(stderr).
fn kubectl_delete(args: &[&str]) -> Result<String, String> {
    let kubeconfig = env().host().kubeconfig_path().display().to_string();
    tokio::task::block_in_place(|| {
        let out = Command::new(tool("kubectl"))
            .args(["--kubeconfig", &kubeconfig, "delete", "--wait=false"])
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .expect("run kubectl");
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    })
}

/// `kubectl delete <args>` is refused by the policy with Karmada's message.
fn refused(args: &[&str]) {
    let err = kubectl_delete(args).expect_err(&format!("kubectl delete {args:?} must be refused"));
    assert!(err.contains(MESSAGE), "kubectl delete {args:?}: {err}");
    assert!(err.contains(POLICY), "kubectl delete {args:?}: {err}");
    assert!(err.contains("forbidden"), "kubectl delete {args:?}: {err}");
}

async fn eventually(what: &str, check: impl AsyncFnMut() -> bool) {
    karmada_e2e::wait::eventually(what, WAIT, Duration::from_millis(200), check).await;
}

async fn namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

async fn deployment(client: &Client, ns: &str, name: &str) {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
}

/// Sets (or, with `None`, removes) the protection label.
fn label(value: Option<&str>) -> Patch<serde_json::Value> {
    Patch::Merge(json!({"metadata": {"labels": {DELETION_PROTECTION_LABEL: value}}}))
}

/// Waits until the policy refuses a server-side dry-run delete of `name` in `ns` (the API server
/// loads a new policy within moments of its type check).
async fn wait_active(deployments: &Api<Deployment>, name: &str) {
    let dry = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    eventually("the deletion protection policy is active", || async {
        deployments.delete(name, &dry).await.is_err()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn protected_objects_are_not_deleted_until_the_label_goes() {
    let host = env().host().client().await;
    let ns = "protected";
    namespace(&host, ns).await;
    let namespaces: Api<Namespace> = Api::all(host.clone());
    let deployments: Api<Deployment> = Api::namespaced(host.clone(), ns);
    let patch = PatchParams::default();
    assert_eq!(DELETION_PROTECTION_ALWAYS, "Always");

    // A protected Deployment: `kubectl delete` is refused with Karmada's message, and it stays.
    deployment(&host, ns, "kept").await;
    deployments
        .patch("kept", &patch, &label(Some("Always")))
        .await
        .unwrap();
    wait_active(&deployments, "kept").await;
    refused(&["deployment", "kept", "-n", ns]);
    assert!(deployments.get_opt("kept").await.unwrap().is_some());

    // Only `Always` protects: another value, or no label at all, deletes freely.
    deployment(&host, ns, "other-value").await;
    deployments
        .patch("other-value", &patch, &label(Some("Never")))
        .await
        .unwrap();
    kubectl_delete(&["deployment", "other-value", "-n", ns]).unwrap();
    deployment(&host, ns, "unlabelled").await;
    kubectl_delete(&["deployment", "unlabelled", "-n", ns]).unwrap();
    eventually("the unprotected Deployments are gone", || async {
        deployments.get_opt("other-value").await.unwrap().is_none()
            && deployments.get_opt("unlabelled").await.unwrap().is_none()
    })
    .await;

    // A protected Namespace (cluster-scoped): refused too, then deleted once the label is removed.
    namespace(&host, "protected-ns").await;
    namespaces
        .patch("protected-ns", &patch, &label(Some("Always")))
        .await
        .unwrap();
    refused(&["namespace", "protected-ns"]);
    assert!(
        namespaces
            .get("protected-ns")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    namespaces
        .patch("protected-ns", &patch, &label(None))
        .await
        .unwrap();
    kubectl_delete(&["namespace", "protected-ns"]).unwrap();
    eventually("namespace protected-ns is gone", || async {
        namespaces.get_opt("protected-ns").await.unwrap().is_none()
    })
    .await;

    // Deleting the unprotected namespace is accepted, but the namespace controller cannot delete
    // the protected Deployment: both stay until the label is removed.
    kubectl_delete(&["namespace", ns]).unwrap();
    eventually("namespace protected is Terminating", || async {
        namespaces
            .get(ns)
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(deployments.get_opt("kept").await.unwrap().is_some());
    assert!(namespaces.get_opt(ns).await.unwrap().is_some());
    // Removing the label from the Deployment lets the namespace controller finish.
    deployments
        .patch("kept", &patch, &label(None))
        .await
        .unwrap();
    eventually("namespace protected is gone", || async {
        namespaces.get_opt(ns).await.unwrap().is_none()
    })
    .await;
}
