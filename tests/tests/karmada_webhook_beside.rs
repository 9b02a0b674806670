//! A team that keeps Karmada's own `karmada-webhook` installed beside karmada-rs's admission
//! policies (the ValidatingAdmissionPolicies and CRD rules in `crds/`): nothing conflicts. On one
//! host, Karmada v1.16's webhook (started and registered as the propagation benchmark's peer runs
//! it, both webhook configurations of its chart with failure policy `Fail`), our CRDs and
//! admission policies, and our controller-manager binary with one member joined:
//!
//! - a Deployment and its policy propagate end to end, and nothing loops: the webhook re-prunes
//!   and re-labels every Work write, ours are already pruned and labelled, so the Work settles;
//! - the permanent ids agree: the webhook stamps the policy's in the create, the detector keeps
//!   it, our `karmada-policy-permanent-id` policy admits every later write that keeps it (the
//!   detector's, a user's), and a write that drops it is refused (the webhook would give a new
//!   one; both layers refuse a change) with Karmada's message;
//! - deleting a deletion-protected template is refused, by whichever layer answers first, with
//!   Karmada's message; without the label it deletes;
//! - a policy selecting a ServiceImport gets `propagateDeps: true` from the webhook, and the
//!   derived Service follows the ServiceImport to the member;
//! - an OverridePolicy, a MultiClusterIngress and a ResourceInterpreterWebhookConfiguration that
//!   Karmada accepts pass both layers, and invalid ones are refused with Karmada's message,
//!   whichever layer answers first.
//!
//! Needs the binaries `make karmada-binaries` builds; without them it fails saying so. It only
//! compiles with the `karmada-go` feature: `make test-karmada-webhook` builds them and runs it
//! (not part of `make test`).
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use karmada_apis::multicluster::v1alpha1::ServiceImport;
use karmada_apis::{PropagationPolicy, ResourceBinding, Work};
use karmada_e2e::controller_manager::Kcm;
use karmada_e2e::karmada_go;
use karmada_e2e::wait::eventually_showing;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(90);
const NS: &str = "webhook-beside";
const MEMBER: &str = "member1";
const POLICY_ID: &str = "propagationpolicy.karmada.io/permanent-id";
const PROTECTED: &str = "resourcetemplate.karmada.io/deletion-protected";
const PROTECTED_MESSAGE: &str = "This resource is protected, please make sure to remove the label: \
     resourcetemplate.karmada.io/deletion-protected";

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 1,
        install_crds: true,
        host_controller_manager: false,
        ..Default::default()
    })
}

/// Polls `check` every 250 ms until it returns `Ok`, for at most [`WAIT`]; panics with the last
/// reason and the tails of the processes' logs.
async fn eventually<T>(
    what: &str,
    procs: &[&Kcm],
    check: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let logs = || {
        let logs: Vec<String> = procs.iter().map(|p| p.log_tail(60)).collect();
        format!("logs (tails):\n{}", logs.join("\n---\n"))
    };
    eventually_showing(what, WAIT, Duration::from_millis(250), logs, check).await
}

/// Creates the namespaced `object` (in [`NS`]).
async fn create<K>(client: &Client, object: Value) -> K
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).unwrap();
    let api: Api<K> = Api::namespaced(client.clone(), NS);
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating {} {}: {e}", K::kind(&()), object.name_any()))
}

fn policy(name: &str, selectors: Value) -> Value {
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"resourceSelectors": selectors,
            "placement": {"clusterAffinity": {"clusterNames": [MEMBER]}}},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the control plane it sets up"
)]
async fn karmada_webhook_beside_our_admission_policies_conflicts_with_nothing() {
    let env = env();
    let host = env.host().client().await;
    let member = env.members()[0].client().await;
    // The members serve the MCS API, as a Karmada user installs it there.
    let mcs: Vec<_> = karmada_apis::crds::all()
        .into_iter()
        .filter(|c| c.spec.group == karmada_apis::multicluster::v1alpha1::GROUP)
        .collect();
    testenv::install_crd_objects(&member, &mcs).await.unwrap();
    let webhook = karmada_go::start_webhook(env, &[])
        .await
        .unwrap_or_else(|e| panic!("start Karmada's webhook: {e:#}"));
    let cm = Kcm::start(env.host().kubeconfig_path(), &["--leader-elect=false"], &[]);
    karmada_e2e::karmadactl::join(env.host(), &env.members()[0], &[])
        .await
        .unwrap_or_else(|e| panic!("karmadactl join {MEMBER}: {e:#}"));
    let procs = [&cm, &webhook];
    Api::<Namespace>::all(host.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap(),
        )
        .await
        .unwrap();

    // --- A Deployment propagates; the webhook stamped the policy's permanent id in the create. ---
    let created: PropagationPolicy = create(
        &host,
        policy(
            "web",
            json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]),
        ),
    )
    .await;
    let id = created
        .labels()
        .get(POLICY_ID)
        .cloned()
        .unwrap_or_else(|| panic!("Karmada's webhook set no {POLICY_ID}: {created:?}"));
    create::<Deployment>(
        &host,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}),
    )
    .await;
    let in_member: Api<Deployment> = Api::namespaced(member.clone(), NS);
    eventually("the Deployment in member1", &procs, async || {
        in_member
            .get_opt("web")
            .await
            .map_err(|e| e.to_string())?
            .map(|_| ())
            .ok_or_else(|| "not there yet".to_owned())
    })
    .await;
    let rb = Api::<ResourceBinding>::namespaced(host.clone(), NS)
        .get("web-deployment")
        .await
        .unwrap();
    assert_eq!(rb.labels().get(POLICY_ID), Some(&id), "{:?}", rb.metadata);
    let policies: Api<PropagationPolicy> = Api::namespaced(host.clone(), NS);
    let kept = policies.get("web").await.unwrap();
    assert_eq!(
        kept.labels().get(POLICY_ID),
        Some(&id),
        "the detector kept the webhook's id"
    );

    // The Work settles: the webhook's pruning and labelling of each Work write leaves ours as
    // written, so the execution controller has nothing to rewrite.
    let works: Api<Work> = Api::namespaced(host.clone(), &format!("karmada-es-{MEMBER}"));
    let work_versions = async || -> Vec<(String, String)> {
        let mut versions: Vec<(String, String)> = works
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|w| w.name_any().starts_with("web-"))
            .map(|w| (w.name_any(), w.resource_version().unwrap_or_default()))
            .collect();
        versions.sort();
        versions
    };
    eventually("the Work applied", &procs, async || {
        let applied = works
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .filter(|w| w.name_any().starts_with("web-"))
            .any(|w| {
                w.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Applied" && c.status == "True")
                })
            });
        applied
            .then_some(())
            .ok_or_else(|| "not applied yet".to_owned())
    })
    .await;
    let before = work_versions().await;
    assert_eq!(before.len(), 1, "{before:?}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        work_versions().await,
        before,
        "the Work keeps being rewritten"
    );

    // --- The permanent ids agree: writes that keep the id pass both layers, dropping it fails. ---
    policies
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}, "spec": {"priority": 1}})),
        )
        .await
        .unwrap_or_else(|e| panic!("an update keeping the permanent id was refused: {e}"));
    match policies
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {POLICY_ID: null}}})),
        )
        .await
    {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 403, "{}", e.message);
            assert!(
                e.message.contains(&format!(
                    "label {POLICY_ID} is immutable, it can only be set by the system during creation"
                )),
                "{}",
                e.message
            );
        }
        other => panic!("dropping the permanent id was not refused: {other:?}"),
    }
    assert_eq!(
        policies.get("web").await.unwrap().labels().get(POLICY_ID),
        Some(&id)
    );

    // --- Deletion protection: refused with Karmada's message, whoever answers. ---
    let deployments: Api<Deployment> = Api::namespaced(host.clone(), NS);
    let label = |value: Value| Patch::Merge(json!({"metadata": {"labels": {PROTECTED: value}}}));
    deployments
        .patch("web", &PatchParams::default(), &label(json!("Always")))
        .await
        .unwrap();
    match deployments.delete("web", &DeleteParams::default()).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 403, "{}", e.message);
            assert!(e.message.contains(PROTECTED_MESSAGE), "{}", e.message);
        }
        other => panic!("deleting a protected Deployment was not refused: {other:?}"),
    }
    deployments
        .patch("web", &PatchParams::default(), &label(Value::Null))
        .await
        .unwrap();
    deployments
        .delete("web", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting the unprotected Deployment: {e}"));
    eventually(
        "the Deployment gone from member1",
        &procs,
        async || match in_member.get_opt("web").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".to_owned()),
        },
    )
    .await;

    // --- A ServiceImport policy: the webhook writes propagateDeps, the derived Service follows. ---
    create::<ServiceImport>(
        &host,
        json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport",
            "metadata": {"name": "db", "namespace": NS},
            "spec": {"type": "ClusterSetIP", "ports": [{"name": "sql", "protocol": "TCP", "port": 5432}]}}),
    )
    .await;
    let import: PropagationPolicy = create(
        &host,
        policy(
            "import",
            json!([{"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport", "name": "db"}]),
        ),
    )
    .await;
    assert!(
        import.spec.propagate_deps,
        "Karmada's webhook sets propagateDeps for ServiceImport selectors: {:?}",
        import.spec
    );
    let member_services: Api<Service> = Api::namespaced(member.clone(), NS);
    eventually("the derived Service in member1", &procs, async || {
        member_services
            .get_opt("derived-db")
            .await
            .map_err(|e| e.to_string())?
            .map(|_| ())
            .ok_or_else(|| "not there yet".to_owned())
    })
    .await;
    let derived = Api::<ResourceBinding>::namespaced(host.clone(), NS)
        .get("derived-db-service")
        .await
        .unwrap();
    let required: Vec<&str> = derived
        .spec
        .required_by
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(required, ["db-serviceimport"], "{:?}", derived.spec);
    // --- Both layers accept what Karmada accepts and refuse what it refuses, with its message. ---
    let both = |object: Value, refused: Option<&'static str>| {
        let host = host.clone();
        async move {
            let kind = object["kind"].as_str().unwrap_or_default().to_owned();
            let (group, version) = object["apiVersion"]
                .as_str()
                .and_then(|v| v.split_once('/'))
                .unwrap();
            let gvk = kube::core::GroupVersionKind::gvk(group, version, &kind);
            let (resource, caps) = kube::discovery::pinned_kind(&host, &gvk).await.unwrap();
            let object: kube::api::DynamicObject = serde_json::from_value(object).unwrap();
            let api: Api<kube::api::DynamicObject> =
                if caps.scope == kube::discovery::Scope::Namespaced {
                    Api::namespaced_with(host.clone(), NS, &resource)
                } else {
                    Api::all_with(host.clone(), &resource)
                };
            let name = object.name_any();
            match (api.create(&PostParams::default(), &object).await, refused) {
                (Ok(_), None) => {}
                (Err(kube::Error::Api(e)), Some(message)) => {
                    assert_eq!(e.code, 403, "{kind} {name}: {}", e.message);
                    assert!(e.message.contains(message), "{kind} {name}: {}", e.message);
                }
                (other, _) => panic!("{kind} {name}: expected refused: {refused:?}, got {other:?}"),
            }
        }
    };
    let override_policy = |name: &str, json_patch: Value| {
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                "overrideRules": [{"overriders": {
                    "labelsOverrider": [{"operator": "add", "value": {"example.com/team": "a"}}],
                    "fieldOverrider": [{"fieldPath": "/data/config", "json": [json_patch]}]}}]}})
    };
    both(
        override_policy(
            "valid",
            json!({"subPath": "/a", "operator": "add", "value": 1}),
        ),
        None,
    )
    .await;
    both(
        override_policy("add-without-value", json!({"subPath": "/a", "operator": "add"})),
        Some("spec.overrideRules[0].overriders.fieldOverrider[0].json[0].value: Invalid value: null: value is required for add or replace operation"),
    )
    .await;
    let ingress = |name: &str, spec: Value| {
        json!({"apiVersion": "networking.karmada.io/v1alpha1", "kind": "MultiClusterIngress",
            "metadata": {"name": name, "namespace": NS}, "spec": spec})
    };
    both(
        ingress(
            "valid",
            json!({"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}),
        ),
        None,
    )
    .await;
    both(
        ingress("empty", json!({})),
        Some("spec: Invalid value: null: either `defaultBackend` or `rules` must be specified"),
    )
    .await;
    let interpreter_webhook = |name: &str, url: &str| {
        json!({"apiVersion": "config.karmada.io/v1alpha1",
            "kind": "ResourceInterpreterWebhookConfiguration", "metadata": {"name": name},
            "webhooks": [{"name": "interpreter.example.io", "clientConfig": {"url": url},
                "rules": [{"operations": ["InterpretHealth"], "apiGroups": ["example.io"],
                    "apiVersions": ["v1"], "kinds": ["Gadget"]}],
                "interpreterContextVersions": ["v1alpha1"]}]})
    };
    both(
        interpreter_webhook("valid", "https://127.0.0.1:1/interpret"),
        None,
    )
    .await;
    both(
        interpreter_webhook("plain-http", "http://127.0.0.1:1/interpret"),
        Some("webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]"),
    )
    .await;

    let log = cm.log();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("denied request") || l.contains("denied the request"))
        .collect();
    assert!(
        refused.is_empty(),
        "writes of the controller-manager were refused at admission:\n{}",
        refused.join("\n")
    );
}
