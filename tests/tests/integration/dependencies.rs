//! The dependencies distributor with the detector, scheduler, binding, execution and namespace
//! controllers against real API servers (a host and two members): a Deployment under a policy
//! with `propagateDeps: true` lands in its member with the ConfigMap, Secret and ServiceAccount it
//! uses; moving it (a policy change) moves them; deleting it removes them; a ConfigMap two
//! Deployments share stays until both are gone. The same pipeline propagates Namespaces a
//! ClusterPropagationPolicy selects, beside the namespace controller, as Karmada does.
//!
//! Cluster objects are written by the test (Ready, with the APIs they serve), as the cluster and
//! clusterStatus controllers would. The tests share one environment and run one at a time, each
//! in its own namespace.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service, ServiceAccount};
use karmada_apis::multicluster::v1alpha1::ServiceImport;
use karmada_apis::names::work_name;
use karmada_apis::{
    Cluster, ClusterPropagationPolicy, ClusterResourceBinding, PropagationPolicy, ResourceBinding,
    Work,
};
use karmada_controllers::members::member_cluster_options;
use karmada_e2e::in_process::{self, Controllers, Harness, create_namespace, gone, serial};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use lariat::ClusterOptions;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(90);
const MEMBERS: [&str; 2] = ["member1", "member2"];

fn env() -> &'static TestEnv {
    in_process::init_tracing();
    testenv::shared(EnvOptions {
        members: 2,
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
        .members(&MEMBERS, fast(member_cluster_options()))
        .start(env())
        .await
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    karmada_e2e::wait::eventually(what, WAIT, Duration::from_millis(200), check).await
}

/// Ready Cluster objects serving the kinds the tests use, and their execution namespaces.
async fn clusters_ready(client: &Client) {
    let api: Api<Cluster> = Api::all(client.clone());
    let apis = json!({"apiEnablements": [
        {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
        {"groupVersion": "v1", "resources": [
            {"name": "configmaps", "kind": "ConfigMap"}, {"name": "secrets", "kind": "Secret"},
            {"name": "serviceaccounts", "kind": "ServiceAccount"},
            {"name": "services", "kind": "Service"},
            {"name": "namespaces", "kind": "Namespace"}]},
        {"groupVersion": "multicluster.x-k8s.io/v1alpha1", "resources": [
            {"name": "serviceimports", "kind": "ServiceImport"}]}
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
            "metadata": {"name": name},
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
}

/// Clusters, a namespace on the host (propagated to both members by the namespace controller)
/// and the controllers.
async fn setup(ns: &str) -> (Client, Controllers) {
    let client = env().host().client().await;
    clusters_ready(&client).await;
    create_namespace(&client, ns, json!({})).await;
    let controllers = start_controllers().await;
    for (i, member) in MEMBERS.iter().enumerate() {
        let m = env().members()[i].client().await;
        eventually(&format!("namespace {ns} in {member}"), || {
            let api: Api<Namespace> = Api::all(m.clone());
            async move { api.get_opt(ns).await.unwrap().map(|_| ()) }
        })
        .await;
    }
    (client, controllers)
}

async fn create<K>(client: &Client, ns: &str, object: Value)
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let o: K = serde_json::from_value(object).unwrap();
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &o)
        .await
        .unwrap();
}

/// A Deployment using ConfigMap `cm` (envFrom), and, when given, Secret `secret` (a volume) and
/// ServiceAccount `sa`.
async fn deployment(client: &Client, ns: &str, name: &str, cm: &str, secret: &str, sa: &str) {
    let mut pod = json!({"containers": [{"name": "c", "image": "nginx",
        "envFrom": [{"configMapRef": {"name": cm}}]}]});
    if !secret.is_empty() {
        pod["volumes"] = json!([{"name": "s", "secret": {"secretName": secret}}]);
    }
    if !sa.is_empty() {
        pod["serviceAccountName"] = json!(sa);
    }
    create::<Deployment>(
        client,
        ns,
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": pod}}
        }),
    )
    .await;
}

/// A PropagationPolicy with `propagateDeps: true` sending the Deployments `names` to `cluster`.
async fn policy(client: &Client, ns: &str, names: &[&str], cluster: &str) {
    let selectors: Vec<Value> = names
        .iter()
        .map(|n| json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": n}))
        .collect();
    create::<PropagationPolicy>(
        client,
        ns,
        json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "deps", "namespace": ns},
            "spec": {"propagateDeps": true, "resourceSelectors": selectors,
                "placement": {"clusterAffinity": {"clusterNames": [cluster]}}}
        }),
    )
    .await;
}

async fn member(cluster: &str) -> Client {
    let i = MEMBERS.iter().position(|m| *m == cluster).unwrap();
    env().members()[i].client().await
}

/// Whether `kind/name` exists in `cluster`'s namespace `ns`.
async fn in_member<K>(cluster: &str, ns: &str, name: &str) -> bool
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(member(cluster).await, ns)
        .get_opt(name)
        .await
        .unwrap()
        .is_some()
}

/// The Deployment, ConfigMap, Secret and ServiceAccount of the first test, present or not.
async fn all_four(cluster: &str, ns: &str) -> [bool; 4] {
    [
        in_member::<Deployment>(cluster, ns, "web").await,
        in_member::<ConfigMap>(cluster, ns, "config").await,
        in_member::<Secret>(cluster, ns, "creds").await,
        in_member::<ServiceAccount>(cluster, ns, "runner").await,
    ]
}

#[tokio::test]
async fn dependencies_follow_their_workload_in_out_and_across_members() {
    let _serial = serial().lock().await;
    let ns = "deps-follow";
    let (client, controllers) = setup(ns).await;
    create::<ConfigMap>(
        &client,
        ns,
        json!({"metadata": {"name": "config"}, "data": {"k": "v"}}),
    )
    .await;
    create::<Secret>(
        &client,
        ns,
        json!({"metadata": {"name": "creds"}, "stringData": {"p": "x"}}),
    )
    .await;
    create::<ServiceAccount>(&client, ns, json!({"metadata": {"name": "runner"}})).await;
    deployment(&client, ns, "web", "config", "creds", "runner").await;
    policy(&client, ns, &["web"], "member1").await;

    eventually("the Deployment and its dependencies in member1", || async {
        (all_four("member1", ns).await == [true; 4]).then_some(())
    })
    .await;
    // The attached binding is Karmada's: named after the dependency, requiredBy the Deployment's.
    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    let cm_binding = rbs.get("config-configmap").await.unwrap();
    assert_eq!(cm_binding.spec.required_by.len(), 1);
    assert_eq!(cm_binding.spec.required_by[0].name, "web-deployment");
    assert!(cm_binding.spec.placement.is_none());
    assert_eq!(all_four("member2", ns).await, [false; 4]);

    // The policy moves the Deployment to member2: the dependencies go with it.
    Api::<PropagationPolicy>::namespaced(client.clone(), ns)
        .patch(
            "deps",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"placement":
                {"clusterAffinity": {"clusterNames": ["member2"]}}}})),
        )
        .await
        .unwrap();
    eventually("everything moved from member1 to member2", || async {
        (all_four("member2", ns).await == [true; 4] && all_four("member1", ns).await == [false; 4])
            .then_some(())
    })
    .await;

    // Deleting the Deployment releases its dependencies: nothing requires them any more.
    Api::<Deployment>::namespaced(client.clone(), ns)
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the Deployment and its dependencies gone from member2",
        || async { (all_four("member2", ns).await == [false; 4]).then_some(()) },
    )
    .await;
    let released = rbs.get("config-configmap").await.unwrap();
    assert!(released.spec.required_by.is_empty(), "{released:?}");
    eventually("the Deployment's binding gone", || {
        gone(&rbs, "web-deployment")
    })
    .await;
    controllers.stop().await;
}

/// Karmada's webhook writes `propagateDeps: true` into a policy selecting a ServiceImport; here
/// the policy stays as written and its bindings get it: a ServiceImport under a policy without
/// `propagateDeps` still takes its derived Service along (requiredBy, as Karmada's would).
#[tokio::test]
async fn a_service_import_policy_propagates_dependencies_unasked() {
    let _serial = serial().lock().await;
    let ns = "deps-import";
    // The members serve the MCS API, as a Karmada user installs it there.
    let mcs: Vec<_> = karmada_apis::crds::all()
        .into_iter()
        .filter(|c| c.spec.group == karmada_apis::multicluster::v1alpha1::GROUP)
        .collect();
    for m in env().members() {
        testenv::install_crd_objects(&m.client().await, &mcs)
            .await
            .unwrap();
    }
    let (client, controllers) = setup(ns).await;
    create::<ServiceImport>(
        &client,
        ns,
        json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {"type": "ClusterSetIP", "ports": [{"name": "http", "protocol": "TCP", "port": 80}]}}),
    )
    .await;
    // What the serviceImport controller derives from it on the control plane.
    create::<Service>(
        &client,
        ns,
        json!({"metadata": {"name": "derived-web", "namespace": ns},
            "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80}]}}),
    )
    .await;
    create::<PropagationPolicy>(
        &client,
        ns,
        json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "import", "namespace": ns},
            "spec": {"resourceSelectors": [{"apiVersion": "multicluster.x-k8s.io/v1alpha1",
                    "kind": "ServiceImport", "name": "web"}],
                "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}
        }),
    )
    .await;

    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    eventually("the derived Service in member1", || async {
        in_member::<Service>("member1", ns, "derived-web")
            .await
            .then_some(())
    })
    .await;
    let import = rbs.get("web-serviceimport").await.unwrap();
    assert!(import.spec.propagate_deps, "{:?}", import.spec);
    let derived = rbs.get("derived-web-service").await.unwrap();
    let required: Vec<&str> = derived
        .spec
        .required_by
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(required, ["web-serviceimport"], "{:?}", derived.spec);
    assert!(derived.spec.placement.is_none());
    assert!(!in_member::<Service>("member2", ns, "derived-web").await);
    // The user's policy is left as written.
    let policy = Api::<PropagationPolicy>::namespaced(client.clone(), ns)
        .get("import")
        .await
        .unwrap();
    assert!(!policy.spec.propagate_deps);
    controllers.stop().await;
}

#[tokio::test]
async fn a_shared_config_map_stays_until_both_workloads_are_gone() {
    let _serial = serial().lock().await;
    let ns = "deps-shared";
    let (client, controllers) = setup(ns).await;
    create::<ConfigMap>(
        &client,
        ns,
        json!({"metadata": {"name": "shared"}, "data": {"k": "v"}}),
    )
    .await;
    deployment(&client, ns, "a", "shared", "", "").await;
    deployment(&client, ns, "b", "shared", "", "").await;
    policy(&client, ns, &["a", "b"], "member1").await;

    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    let required_by = |rbs: Api<ResourceBinding>| async move {
        let b = rbs.get_opt("shared-configmap").await.unwrap()?;
        let mut names: Vec<String> = b.spec.required_by.iter().map(|s| s.name.clone()).collect();
        names.sort();
        Some(names)
    };
    eventually(
        "the ConfigMap required by both Deployments, in member1",
        || async {
            let names = required_by(rbs.clone()).await?;
            (names == ["a-deployment", "b-deployment"]
                && in_member::<ConfigMap>("member1", ns, "shared").await)
                .then_some(())
        },
    )
    .await;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    deployments
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the ConfigMap required by b only", || async {
        (required_by(rbs.clone()).await? == ["b-deployment"]).then_some(())
    })
    .await;
    eventually("Deployment a gone from member1", || async {
        (!in_member::<Deployment>("member1", ns, "a").await).then_some(())
    })
    .await;
    assert!(in_member::<ConfigMap>("member1", ns, "shared").await);

    deployments
        .delete("b", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the ConfigMap gone from member1", || async {
        (!in_member::<ConfigMap>("member1", ns, "shared").await).then_some(())
    })
    .await;
    controllers.stop().await;
}

/// A dependency created after its workload was propagated still follows it: its creation
/// re-queues the binding that records it (found through the bindings' dependency index).
#[tokio::test]
async fn a_dependency_created_after_its_workload_follows_it() {
    let _serial = serial().lock().await;
    let ns = "deps-late";
    let (client, controllers) = setup(ns).await;
    deployment(&client, ns, "late", "late-config", "", "").await;
    policy(&client, ns, &["late"], "member1").await;
    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    eventually(
        "the Deployment in member1, its missing ConfigMap recorded",
        || async {
            let b = rbs.get_opt("late-deployment").await.unwrap()?;
            let recorded = b
                .annotations()
                .get("resourcebinding.karmada.io/dependencies")?
                .contains("late-config");
            (recorded && in_member::<Deployment>("member1", ns, "late").await).then_some(())
        },
    )
    .await;
    assert!(
        rbs.get_opt("late-config-configmap")
            .await
            .unwrap()
            .is_none()
    );

    create::<ConfigMap>(
        &client,
        ns,
        json!({"metadata": {"name": "late-config"}, "data": {"k": "v"}}),
    )
    .await;
    eventually(
        "the late ConfigMap in member1, required by the Deployment",
        || async {
            let b = rbs.get_opt("late-config-configmap").await.unwrap()?;
            let names: Vec<&str> = b.spec.required_by.iter().map(|s| s.name.as_str()).collect();
            (names == ["late-deployment"]
                && in_member::<ConfigMap>("member1", ns, "late-config").await)
                .then_some(())
        },
    )
    .await;
    assert!(!in_member::<ConfigMap>("member2", ns, "late-config").await);
    controllers.stop().await;
}

/// A workload its cache only listed (a cold start: no watch event has replaced it since, so it
/// lacks `apiVersion` and `kind`, as every item of a list response of a built-in kind does) still
/// has its dependencies read and distributed. Only the distributor runs: nothing else writes the
/// Deployment, and the binding is written by the test as the detector would.
#[tokio::test]
async fn a_workload_its_cache_only_listed_gets_its_dependencies() {
    let _serial = serial().lock().await;
    let ns = "deps-listed";
    let client = env().host().client().await;
    clusters_ready(&client).await;
    create_namespace(&client, ns, json!({})).await;
    create::<ConfigMap>(
        &client,
        ns,
        json!({"metadata": {"name": "listed-config"}, "data": {"k": "v"}}),
    )
    .await;
    deployment(&client, ns, "listed", "listed-config", "", "").await;
    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    let mut rb = in_process::resource_binding(
        ns,
        "listed-deployment",
        ("apps/v1", "Deployment"),
        json!({"propagateDeps": true, "clusters": [{"name": "member1"}],
            "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}),
    );
    rb.spec.resource.name = "listed".into();
    rbs.create(&PostParams::default(), &rb).await.unwrap();
    let controllers = Harness::new(vec![(
        karmada_controllers::dependencies_distributor::NAME,
        karmada_controllers::dependencies_distributor::start_fn(),
    )])
    .settings(in_process::settings())
    .host_options(fast(ClusterOptions::default()))
    .start(env())
    .await;
    eventually(
        "the ConfigMap's attached binding, required by the Deployment's",
        || async {
            let b = rbs.get_opt("listed-config-configmap").await.unwrap()?;
            b.spec
                .required_by
                .iter()
                .any(|s| s.name == "listed-deployment")
                .then_some(())
        },
    )
    .await;
    controllers.stop().await;
}

/// The namespace `name` in `cluster`, unless it is gone or being deleted.
async fn member_namespace(cluster: &str, name: &str) -> Option<Namespace> {
    Api::<Namespace>::all(member(cluster).await)
        .get_opt(name)
        .await
        .unwrap()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
}

/// The clusters of ClusterResourceBinding `name` once it is scheduled.
async fn scheduled_clusters(crbs: &Api<ClusterResourceBinding>, name: &str) -> Option<Vec<String>> {
    karmada_e2e::in_process::scheduled_cluster_names(&crbs.get_opt(name).await.unwrap()?)
}

#[tokio::test]
async fn namespaces_a_cluster_policy_selects_land_in_its_clusters_beside_auto_propagation() {
    let _serial = serial().lock().await;
    let (client, controllers) = setup("deps-nsp").await;
    let cpps: Api<ClusterPropagationPolicy> = Api::all(client.clone());
    let crbs: Api<ClusterResourceBinding> = Api::all(client.clone());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let o: ClusterPropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
        "metadata": {"name": "deps-nsp"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "v1", "kind": "Namespace",
                "labelSelector": {"matchLabels": {"team": "nsp"}}}],
            "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}
        }
    }))
    .unwrap();
    cpps.create(&PostParams::default(), &o).await.unwrap();
    // Skipped by the namespace controller: the policy alone places it.
    create_namespace(
        &client,
        "deps-nsp-only",
        json!({"team": "nsp", "tier": "web", "namespace.karmada.io/skip-auto-propagation": "true"}),
    )
    .await;
    // Not skipped: the namespace controller still sends it everywhere (Karmada does not let a
    // policy claim stop auto-propagation).
    create_namespace(&client, "deps-nsp-both", json!({"team": "nsp"})).await;

    let only = eventually("deps-nsp-only in member1", || {
        member_namespace("member1", "deps-nsp-only")
    })
    .await;
    assert_eq!(only.labels()["team"], "nsp");
    assert_eq!(only.labels()["tier"], "web");
    assert_eq!(only.labels()["karmada.io/managed"], "true");
    assert!(
        only.labels()
            .contains_key("clusterresourcebinding.karmada.io/permanent-id")
    );
    let clusters = eventually("deps-nsp-only's binding scheduled", || {
        scheduled_clusters(&crbs, "deps-nsp-only-namespace")
    })
    .await;
    assert_eq!(clusters, ["member1"]);
    // member1 got it, so both handlers of its namespace key have run: no Work in member2.
    let member2_works: Api<Work> = Api::namespaced(client.clone(), "karmada-es-member2");
    let wname = work_name("Namespace", "deps-nsp-only", "");
    assert!(member2_works.get_opt(&wname).await.unwrap().is_none());
    assert!(member_namespace("member2", "deps-nsp-only").await.is_none());

    for cluster in MEMBERS {
        eventually(&format!("deps-nsp-both in {cluster}"), || {
            member_namespace(cluster, "deps-nsp-both")
        })
        .await;
    }
    let clusters = eventually("deps-nsp-both's binding scheduled", || {
        scheduled_clusters(&crbs, "deps-nsp-both-namespace")
    })
    .await;
    assert_eq!(clusters, ["member1"]);

    // Deleting the policy releases the namespaces and keeps their bindings and member copies.
    cpps.delete("deps-nsp", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the policy gone", || gone(&cpps, "deps-nsp")).await;
    eventually("deps-nsp-only released", || async {
        let n = namespaces.get("deps-nsp-only").await.unwrap();
        (!n.labels()
            .contains_key("clusterpropagationpolicy.karmada.io/permanent-id"))
        .then_some(())
    })
    .await;
    assert!(
        crbs.get_opt("deps-nsp-only-namespace")
            .await
            .unwrap()
            .is_some()
    );
    assert!(member_namespace("member1", "deps-nsp-only").await.is_some());

    // Deleting the namespace deletes its binding, its Work and its member copy.
    for name in ["deps-nsp-only", "deps-nsp-both"] {
        namespaces
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    eventually("deps-nsp-only's binding gone", || {
        gone(&crbs, "deps-nsp-only-namespace")
    })
    .await;
    let member1_works: Api<Work> = Api::namespaced(client.clone(), "karmada-es-member1");
    eventually("deps-nsp-only's Work gone", || gone(&member1_works, &wname)).await;
    eventually("deps-nsp-only gone from member1", || async {
        member_namespace("member1", "deps-nsp-only")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    controllers.stop().await;
}
