//! `karmadactl promote` against real API servers: a host with the detector, scheduler, binding,
//! execution, namespace controllers and the dependencies distributor running in-process, and one
//! full member (kube-controller-manager, kube-scheduler, kwok nodes) where the objects already run.
//!
//! - A Deployment with a ConfigMap dependency (`-d`): `--dry-run` and `-o yaml` write nothing;
//!   promote creates the templates and Karmada's PropagationPolicy, the Works are Applied, and the
//!   member's Deployment, ConfigMap, ReplicaSet and pods keep their UIDs (taken over in place).
//! - A ClusterRole (cluster-scoped: a ClusterPropagationPolicy), the member reached through the
//!   Cluster object's Secret (Push mode) instead of a kubeconfig.
//!
//! Cluster objects are written by the test (Ready, with the APIs they serve), as the cluster and
//! clusterStatus controllers would.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use karmada_apis::names::{policy_name, work_name};
use karmada_apis::{Cluster, ClusterPropagationPolicy, PropagationPolicy, Work};
use karmada_controllers::members::member_cluster_options;
use karmada_e2e::in_process::{self, Controllers, Harness, create_namespace, serial};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use lariat::ClusterOptions;
use serde_json::json;
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(120);
const MEMBER: &str = "member1";

fn env() -> &'static TestEnv {
    in_process::init_tracing();
    testenv::shared(EnvOptions {
        members: 1,
        full_members: 1,
        kwok_nodes: 2,
        install_crds: true,
        ..Default::default()
    })
}

fn fast(mut options: ClusterOptions) -> ClusterOptions {
    options.clients.qps = 200.0;
    options.clients.burst = 400;
    options
}

async fn start_controllers() -> Controllers {
    let mut controllers =
        in_process::implemented(&["scheduler", "binding", "execution", "namespace"]);
    controllers.push((
        "resource-detector",
        karmada_controllers::detector::start_fn(),
    ));
    controllers.push((
        karmada_controllers::dependencies_distributor::NAME,
        karmada_controllers::dependencies_distributor::start_fn(),
    ));
    Harness::new(controllers)
        .settings(karmada_controllers::Settings {
            cluster_api_qps: 200.0,
            cluster_api_burst: 400,
            ..in_process::settings()
        })
        .host_options(fast(ClusterOptions::default()))
        .members(&[MEMBER], fast(member_cluster_options()))
        .start(env())
        .await
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    karmada_e2e::wait::eventually(what, WAIT, Duration::from_millis(200), check).await
}

/// A token for a cluster-admin ServiceAccount of the member, as `karmadactl join` stores one.
async fn member_token(member: &Client) -> String {
    let sa_name = "promote-e2e";
    let sas: Api<ServiceAccount> = Api::namespaced(member.clone(), "kube-system");
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": sa_name}})).unwrap();
    match sas.create(&PostParams::default(), &sa).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create ServiceAccount: {e}"),
    }
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": sa_name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": sa_name, "namespace": "kube-system"}]
    }))
    .unwrap();
    match Api::<ClusterRoleBinding>::all(member.clone())
        .create(&PostParams::default(), &binding)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create ClusterRoleBinding: {e}"),
    }
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}}))
            .unwrap();
    let token: TokenRequest = sas
        .create_subresource("token", sa_name, &PostParams::default(), &request)
        .await
        .unwrap();
    token.status.unwrap().token.unwrap()
}

/// The Cluster object of the member (Push, its credentials in a Secret as join writes them),
/// Ready with the APIs the tests use, and its execution namespace.
async fn cluster_ready(host: &Client) {
    let member = env().members()[0].client().await;
    let token = member_token(&member).await;
    create_namespace(host, "karmada-cluster", json!({})).await;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": MEMBER, "namespace": "karmada-cluster"},
        "stringData": {"token": token,
                       "caBundle": String::from_utf8(env().members()[0].ca_pem().unwrap()).unwrap()}
    }))
    .unwrap();
    match Api::<Secret>::namespaced(host.clone(), "karmada-cluster")
        .create(&PostParams::default(), &secret)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create Secret: {e}"),
    }
    create_namespace(
        host,
        &format!("karmada-es-{MEMBER}"),
        json!({"karmada.io/system": "true"}),
    )
    .await;
    let c: Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": MEMBER},
        "spec": {"syncMode": "Push", "apiEndpoint": env().members()[0].url(),
                 "secretRef": {"namespace": "karmada-cluster", "name": MEMBER}}
    }))
    .unwrap();
    match Api::<Cluster>::all(host.clone())
        .create(&PostParams::default(), &c)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create Cluster: {e}"),
    }
    let apis = json!({"apiEnablements": [
        {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
        {"groupVersion": "v1", "resources": [
            {"name": "configmaps", "kind": "ConfigMap"}, {"name": "namespaces", "kind": "Namespace"}]},
        {"groupVersion": "rbac.authorization.k8s.io/v1", "resources": [
            {"name": "clusterroles", "kind": "ClusterRole"}]}
    ]});
    in_process::set_cluster_ready(host, MEMBER, true, "ready", apis).await;
}

/// `karmadactl promote <args>` against the host; what it prints, or its error.
async fn promote(args: &[&str]) -> Result<String, String> {
    let kubeconfig = env().kubeconfig_path().display().to_string();
    let mut all = vec![
        "karmadactl".to_owned(),
        "promote".to_owned(),
        format!("--kubeconfig={kubeconfig}"),
        "--karmada-context=host".to_owned(),
    ];
    all.extend(args.iter().map(ToString::to_string));
    karmadactl::run_output(all)
        .await
        .map_err(|e| format!("{e:#}"))
}

fn member_kubeconfig_flag() -> String {
    format!("--cluster-kubeconfig={}", env().kubeconfig_path().display())
}

fn applied(w: &Work) -> bool {
    in_process::condition(
        &w.status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default(),
        "Applied",
    )
    .is_some_and(|(status, _, _)| status == "True")
}

async fn work_applied(host: &Client, kind: &str, ns: &str, name: &str) {
    let api: Api<Work> = Api::namespaced(host.clone(), &format!("karmada-es-{MEMBER}"));
    let wname = work_name(kind, name, ns);
    eventually(&format!("Work {wname} Applied"), || {
        let api = api.clone();
        let wname = wname.clone();
        async move {
            api.get_opt(&wname)
                .await
                .unwrap()
                .filter(applied)
                .map(|_| ())
        }
    })
    .await;
}

fn uid<K: ResourceExt>(o: &K) -> String {
    o.uid().unwrap()
}

/// The UIDs of the ReplicaSets and pods of `app` in the member.
async fn replicasets_and_pods(
    member: &Client,
    ns: &str,
    app: &str,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let lp = ListParams::default().labels(&format!("app={app}"));
    let rs = Api::<ReplicaSet>::namespaced(member.clone(), ns)
        .list(&lp)
        .await
        .unwrap()
        .items
        .iter()
        .map(uid)
        .collect();
    let pods = Api::<Pod>::namespaced(member.clone(), ns)
        .list(&lp)
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(uid)
        .collect();
    (rs, pods)
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn promote_takes_over_a_deployment_and_its_configmap_in_place() {
    let _serial = serial().lock().await;
    let host = env().host().client().await;
    cluster_ready(&host).await;
    let ns = "promote-deploy";
    let member = env().members()[0].client().await;
    create_namespace(&member, ns, json!({})).await;
    create_namespace(&host, ns, json!({})).await;

    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "web-config", "namespace": ns}, "data": {"MODE": "legacy"}
    }))
    .unwrap();
    let cm = Api::<ConfigMap>::namespaced(member.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "c", "image": "nginx", "envFrom": [{"configMapRef": {"name": "web-config"}}]}]}}}
    }))
    .unwrap();
    let deploy = Api::<Deployment>::namespaced(member.clone(), ns)
        .create(&PostParams::default(), &deploy)
        .await
        .unwrap();
    let (rs_before, pods_before) = eventually("the member runs 2 pods of web", || {
        let member = member.clone();
        async move {
            let (rs, pods) = replicasets_and_pods(&member, ns, "web").await;
            (rs.len() == 1 && pods.len() == 2).then_some((rs, pods))
        }
    })
    .await;

    let controllers = start_controllers().await;
    let kubeconfig = member_kubeconfig_flag();
    let base = [
        "deployment",
        "web",
        "-n",
        ns,
        "-C",
        MEMBER,
        kubeconfig.as_str(),
        "-d",
    ];
    let pp_name = policy_name(ns, "web", "apps/v1, Kind=Deployment");

    // Dry run and -o print or do nothing, and write nothing.
    assert_eq!(
        promote(&[&base[..], &["--dry-run"]].concat())
            .await
            .unwrap(),
        ""
    );
    let printed = promote(&[&base[..], &["-o", "yaml"]].concat())
        .await
        .unwrap();
    assert!(printed.starts_with("apiVersion: apps/v1\n"), "{printed}");
    assert!(
        printed.contains("work.karmada.io/conflict-resolution: overwrite"),
        "{printed}"
    );
    assert!(
        printed
            .contains("\n---\napiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\n"),
        "{printed}"
    );
    assert!(
        printed.contains(&format!("  name: {pp_name}\n")),
        "{printed}"
    );
    assert!(
        !printed.contains("uid:") && !printed.contains("resourceVersion:"),
        "pruned: {printed}"
    );
    let printed = promote(&[&base[..], &["-o", "json"]].concat())
        .await
        .unwrap();
    assert!(
        printed.starts_with("{\n    \"apiVersion\": \"apps/v1\","),
        "{printed}"
    );
    assert!(
        Api::<Deployment>::namespaced(host.clone(), ns)
            .get_opt("web")
            .await
            .unwrap()
            .is_none()
            && Api::<ConfigMap>::namespaced(host.clone(), ns)
                .get_opt("web-config")
                .await
                .unwrap()
                .is_none()
            && Api::<PropagationPolicy>::namespaced(host.clone(), ns)
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty(),
        "dry run and -o wrote nothing"
    );

    let out = promote(&base).await.unwrap();
    assert_eq!(
        out,
        format!(
            "Dependency resource \"/v1, Resource=configmaps\"({ns}/web-config) is promoted successfully\n\
             ResourceTemplate ({ns}/web) is created successfully\n\
             PropagationPolicy ({ns}/{pp_name}) is created successfully\n\
             Resource \"apps/v1, Resource=deployments\"({ns}/web) is promoted successfully"
        )
    );
    let template = Api::<Deployment>::namespaced(host.clone(), ns)
        .get("web")
        .await
        .unwrap();
    assert_eq!(
        template
            .annotations()
            .get("work.karmada.io/conflict-resolution")
            .map(String::as_str),
        Some("overwrite")
    );
    let pp = Api::<PropagationPolicy>::namespaced(host.clone(), ns)
        .get(&pp_name)
        .await
        .unwrap();
    let pp = serde_json::to_value(&pp.spec).unwrap();
    assert_eq!(pp["propagateDeps"], true);
    assert_eq!(pp["conflictResolution"], "Overwrite");
    assert_eq!(
        pp["placement"]["clusterAffinity"]["clusterNames"],
        json!([MEMBER])
    );

    work_applied(&host, "Deployment", ns, "web").await;
    work_applied(&host, "ConfigMap", ns, "web-config").await;

    // Taken over in place: same objects, same ReplicaSet, same pods; now managed by Karmada.
    let deploy_after = Api::<Deployment>::namespaced(member.clone(), ns)
        .get("web")
        .await
        .unwrap();
    assert_eq!(uid(&deploy_after), uid(&deploy));
    assert!(
        deploy_after
            .labels()
            .keys()
            .any(|k| k.starts_with("work.karmada.io/") || k.contains("karmada.io")),
        "the execution controller wrote the member Deployment: {:?}",
        deploy_after.labels()
    );
    let cm_after = Api::<ConfigMap>::namespaced(member.clone(), ns)
        .get("web-config")
        .await
        .unwrap();
    assert_eq!(uid(&cm_after), uid(&cm));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        replicasets_and_pods(&member, ns, "web").await,
        (rs_before, pods_before),
        "no new ReplicaSet, no pod replaced"
    );

    // Promoting again changes nothing and says so.
    assert_eq!(
        promote(&base).await.unwrap(),
        "Dependency resource \"/v1, Resource=configmaps\"(promote-deploy/web-config) already exist in karmada control plane, you can edit PropagationPolicy and OverridePolicy to propagate it"
    );
    controllers.stop().await;
}

#[tokio::test]
async fn promote_a_cluster_scoped_kind_through_the_cluster_secret() {
    let _serial = serial().lock().await;
    let host = env().host().client().await;
    cluster_ready(&host).await;
    let member = env().members()[0].client().await;
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "promoted:viewer"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    }))
    .unwrap();
    let role = Api::<ClusterRole>::all(member.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let controllers = start_controllers().await;

    // No --cluster-kubeconfig: the member is reached with the Cluster's Secret.
    assert_eq!(
        promote(&["clusterrole", "promoted:viewer", "-C", MEMBER, "--dry-run"])
            .await
            .unwrap(),
        ""
    );
    assert!(
        Api::<ClusterRole>::all(host.clone())
            .get_opt("promoted:viewer")
            .await
            .unwrap()
            .is_none()
    );
    let cpp_name = policy_name(
        "",
        "promoted:viewer",
        "rbac.authorization.k8s.io/v1, Kind=ClusterRole",
    );
    assert!(cpp_name.starts_with("promoted.viewer-"), "{cpp_name}");
    let out = promote(&["clusterrole", "promoted:viewer", "-C", MEMBER])
        .await
        .unwrap();
    assert_eq!(
        out,
        format!(
            "ResourceTemplate (promoted:viewer) is created successfully\n\
             ClusterPropagationPolicy {cpp_name} is created successfully\n\
             Resource \"rbac.authorization.k8s.io/v1, Resource=clusterroles\"(promoted:viewer) is promoted successfully"
        )
    );
    let cpp = Api::<ClusterPropagationPolicy>::all(host.clone())
        .get(&cpp_name)
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&cpp.spec).unwrap()["conflictResolution"],
        "Overwrite"
    );
    work_applied(&host, "ClusterRole", "", "promoted:viewer").await;
    let after = Api::<ClusterRole>::all(member.clone())
        .get("promoted:viewer")
        .await
        .unwrap();
    assert_eq!(uid(&after), uid(&role));

    let err = promote(&["clusterrole", "no-such-role", "-C", MEMBER])
        .await
        .unwrap_err();
    assert!(err.contains("don't exist in cluster(member1)"), "{err}");
    let err = promote(&["clusterrole", "x", "-C", "no-such-cluster"])
        .await
        .unwrap_err();
    assert!(err.contains("no-such-cluster"), "{err}");
    controllers.stop().await;
}
