//! Proof that the environment is real: watches, namespace termination, garbage collection, scheduling
//! onto kwok nodes, and TokenRequest + RBAC all behave as in a real cluster.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use testenv::{EnvOptions, TestEnv};

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        full_members: 1,
        ..Default::default()
    })
}

async fn create_namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_watch_on_a_member_sees_an_object_created_by_another_client() {
    let member = &env().members()[1];
    let watching = member.client().await;
    let writing = member.client().await;
    create_namespace(&writing, "watch-test").await;

    let cms: Api<ConfigMap> = Api::namespaced(watching, "watch-test");
    let mut events = watcher(cms, watcher::Config::default()).boxed();
    // Wait for the initial list to finish before writing.
    loop {
        if let Some(watcher::Event::InitDone) = events.try_next().await.unwrap() {
            break;
        }
    }
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "seen"}, "data": {"k": "v"}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(writing, "watch-test")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(ev) = events.try_next().await.unwrap() {
            if let watcher::Event::Apply(cm) = ev {
                return cm;
            }
        }
        panic!("watch ended");
    })
    .await
    .expect("the watch did not deliver the new ConfigMap within 10s");
    assert_eq!(seen.metadata.name.as_deref(), Some("seen"));
    assert_eq!(seen.data.unwrap().get("k").map(String::as_str), Some("v"));
}

#[tokio::test]
async fn deleting_a_namespace_on_the_host_completes() {
    let client = env().host().client().await;
    create_namespace(&client, "ns-deletion").await;
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "content"}})).unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "ns-deletion")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(client);
    namespaces
        .delete("ns-deletion", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "namespace ns-deletion gone",
        Duration::from_secs(60),
        || async { namespaces.get_opt("ns-deletion").await.unwrap().is_none() },
    )
    .await;
}

#[tokio::test]
async fn deleting_an_owner_removes_its_dependents() {
    let client = env().host().client().await;
    create_namespace(&client, "gc-test").await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "gc-test");
    let owner: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap();
    let owner = cms.create(&PostParams::default(), &owner).await.unwrap();
    let dependent: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": "dependent",
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                "uid": owner.metadata.uid.unwrap(),
            }],
        },
    }))
    .unwrap();
    cms.create(&PostParams::default(), &dependent)
        .await
        .unwrap();
    cms.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually(
        "the garbage collector deletes the dependent",
        Duration::from_secs(60),
        || async { cms.get_opt("dependent").await.unwrap().is_none() },
    )
    .await;
}

#[tokio::test]
async fn a_deployment_in_a_full_member_gets_ready_pods() {
    let member = &env().members()[0];
    let client = member.client().await;
    create_namespace(&client, "full-member").await;
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "nginx"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]},
            },
        },
    }))
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client, "full-member");
    deployments
        .create(&PostParams::default(), &deploy)
        .await
        .unwrap();
    eventually("3 ready replicas", Duration::from_secs(90), || async {
        let d = deployments.get("nginx").await.unwrap();
        d.status.and_then(|s| s.ready_replicas) == Some(3)
    })
    .await;
}

#[tokio::test]
async fn a_requested_token_authenticates_with_exactly_its_rbac() {
    let member = &env().members()[1];
    let admin = member.client().await;
    create_namespace(&admin, "token-test").await;
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "reader"}})).unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "token-test");
    sas.create(&PostParams::default(), &sa).await.unwrap();
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "cm-reader"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
    }))
    .unwrap();
    Api::<Role>::namespaced(admin.clone(), "token-test")
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "cm-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "token-test"}],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), "token-test")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}}))
            .unwrap();
    let token = sas
        .create_token_request("reader", &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token
        .expect("TokenRequest returned no token");
    assert!(!token.is_empty());

    let mut config = member.kube_config().await.unwrap();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.into()),
        ..Default::default()
    };
    let as_reader = Client::try_from(config).unwrap();

    let allowed: Api<ConfigMap> = Api::namespaced(as_reader.clone(), "token-test");
    allowed
        .list(&Default::default())
        .await
        .expect("the token must be allowed to list configmaps in its namespace");

    let secrets: Api<Secret> = Api::namespaced(as_reader.clone(), "token-test");
    match secrets.list(&Default::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("listing secrets must be forbidden, got {other:?}"),
    }
    let elsewhere: Api<ConfigMap> = Api::namespaced(as_reader, "default");
    match elsewhere.list(&Default::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("listing configmaps in another namespace must be forbidden, got {other:?}"),
    }
}
