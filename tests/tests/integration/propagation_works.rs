//! The binding, execution and namespace controllers against real API servers: bindings become
//! Works in `karmada-es-<cluster>` (with overrides), Works become objects in two member API
//! servers, namespaces propagate, conflicts with unmanaged objects are refused or taken over,
//! a restart writes nothing to members, member rejections are reported per Work, and deleting a
//! binding removes (or, with `preserveResourcesOnDeletion`, releases) the member objects.
//!
//! The detector and scheduler are not run: each test writes the ResourceBindings the way Karmada's
//! detector and scheduler would (template reference, permanent ids, finalizer, `spec.clusters`),
//! plus Cluster objects whose Ready status the test writes and the execution namespaces the cluster
//! controller would create. Tests run one at a time, each with its own controllers.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use karmada_apis::names::work_name;
use karmada_apis::{Cluster, OverridePolicy, ResourceBinding, Work};
use karmada_controllers::members::member_cluster_options;
use karmada_e2e::in_process::{
    self, Controllers, Harness, create_namespace, gone, metric_sum, serial,
};
use karmada_e2e::quiet::{Watched, assert_no_change_for, current_version};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use lariat::ClusterOptions;
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(90);
const MEMBERS: [&str; 2] = ["member1", "member2"];

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        install_crds: true,
        ..Default::default()
    })
}

/// Client limits of 200 QPS, burst 400.
fn fast(mut options: ClusterOptions) -> ClusterOptions {
    options.clients.qps = 200.0;
    options.clients.burst = 400;
    options
}

/// The binding, execution and namespace controllers, in-process, with both members connected.
async fn start_controllers() -> Controllers {
    Harness::new(in_process::implemented(&[
        "binding",
        "execution",
        "namespace",
    ]))
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

async fn host() -> Client {
    env().host().client().await
}

async fn member_client(i: usize) -> Client {
    env().members()[i].client().await
}

/// Cluster objects for both members, Ready, and their execution namespaces (what the cluster and
/// clusterStatus controllers would do).
async fn clusters_ready(client: &Client) {
    let api: Api<Cluster> = Api::all(client.clone());
    for (i, name) in MEMBERS.iter().enumerate() {
        create_namespace(
            client,
            &format!("karmada-es-{name}"),
            json!({"karmada.io/system": "true"}),
        )
        .await;
        let c: Cluster = serde_json::from_value(json!({
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name, "labels": {"member": name}},
            "spec": {"syncMode": "Push", "apiEndpoint": env().members()[i].url()}
        }))
        .unwrap();
        match api.create(&PostParams::default(), &c).await {
            // A cluster left by an earlier test of this file is fine; any other failure is not.
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("create Cluster {name}: {e}"),
        }
        let message = "cluster is healthy and ready to accept workloads";
        in_process::set_cluster_ready(client, name, true, message, json!({})).await;
    }
}

/// Sets up a test: clusters, a test namespace on the host, controllers.
async fn setup(ns: &str) -> (Client, Controllers) {
    let client = host().await;
    clusters_ready(&client).await;
    create_namespace(&client, ns, json!({})).await;
    let controllers = start_controllers().await;
    // The namespace controller propagates the namespace to both members.
    for (i, member) in MEMBERS.iter().enumerate() {
        let m = member_client(i).await;
        eventually(&format!("namespace {ns} in {member}"), || {
            let api: Api<Namespace> = Api::all(m.clone());
            async move { api.get_opt(ns).await.unwrap().map(|_| ()) }
        })
        .await;
    }
    (client, controllers)
}

/// Creates (or replaces) a template on the host and returns it as JSON (with uid and
/// resourceVersion).
async fn template(client: &Client, obj: Value) -> Value {
    let gvk = {
        let av = obj["apiVersion"].as_str().unwrap();
        let (g, v) = av.split_once('/').unwrap_or(("", av));
        kube::api::GroupVersionKind::gvk(g, v, obj["kind"].as_str().unwrap())
    };
    let (ar, _) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
    let api: Api<kube::api::DynamicObject> = if ns.is_empty() {
        Api::all_with(client.clone(), &ar)
    } else {
        Api::namespaced_with(client.clone(), ns, &ar)
    };
    let o: kube::api::DynamicObject = serde_json::from_value(obj).unwrap();
    let created = api.create(&PostParams::default(), &o).await.unwrap();
    serde_json::to_value(created).unwrap()
}

/// A ResourceBinding for `tmpl` as Karmada's detector and scheduler write it.
async fn binding(
    client: &Client,
    tmpl: &Value,
    clusters: &[(&str, i32)],
    extra: Value,
) -> ResourceBinding {
    let kind = tmpl["kind"].as_str().unwrap();
    let name = tmpl["metadata"]["name"].as_str().unwrap();
    let ns = tmpl["metadata"]["namespace"].as_str().unwrap();
    let mut spec = json!({
        "resource": {
            "apiVersion": tmpl["apiVersion"], "kind": kind, "namespace": ns, "name": name,
            "uid": tmpl["metadata"]["uid"], "resourceVersion": tmpl["metadata"]["resourceVersion"],
        },
        "clusters": clusters.iter().map(|(c, r)| json!({"name": c, "replicas": r})).collect::<Vec<_>>(),
    });
    if let Some(replicas) = tmpl.pointer("/spec/replicas") {
        spec["replicas"] = replicas.clone();
    }
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        spec[k] = v;
    }
    let rb: ResourceBinding = serde_json::from_value(json!({
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {
            "name": karmada_apis::names::binding_name(kind, name), "namespace": ns,
            "labels": {
                "resourcebinding.karmada.io/permanent-id": uuid::Uuid::new_v4().to_string(),
                "propagationpolicy.karmada.io/permanent-id": uuid::Uuid::new_v4().to_string(),
            },
            "annotations": {"propagationpolicy.karmada.io/namespace": ns, "propagationpolicy.karmada.io/name": "test-policy"},
            "finalizers": ["karmada.io/binding-controller"],
        },
        "spec": spec,
    }))
    .unwrap();
    Api::<ResourceBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &rb)
        .await
        .unwrap()
}

/// Waits for the condition `type_` with `status` on the ResourceBinding `ns/name`; returns it.
async fn binding_condition(
    client: &Client,
    ns: &str,
    name: &str,
    type_: &str,
    status: &str,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    eventually(&format!("{type_}={status} on binding {name}"), || {
        let rbs = rbs.clone();
        async move {
            let rb = rbs.get(name).await.unwrap();
            rb.status?
                .conditions
                .into_iter()
                .find(|c| c.type_ == type_ && c.status == status)
        }
    })
    .await
}

fn applied(w: &Work) -> Option<(String, String, String)> {
    in_process::condition(&w.status.as_ref()?.conditions, "Applied")
}

/// Waits for the Work of `kind ns/name` in `cluster` to have Applied with `status`; returns it.
async fn work_applied(
    client: &Client,
    cluster: &str,
    kind: &str,
    ns: &str,
    name: &str,
    status: &str,
) -> Work {
    let api: Api<Work> = Api::namespaced(client.clone(), &format!("karmada-es-{cluster}"));
    let wname = work_name(kind, name, ns);
    eventually(
        &format!("work {wname} in {cluster} Applied={status}"),
        || {
            let api = api.clone();
            let wname = wname.clone();
            async move {
                let w = api.get_opt(&wname).await.unwrap()?;
                (applied(&w)?.0 == status).then_some(w)
            }
        },
    )
    .await
}

fn labels_of(v: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(v.pointer("/metadata/labels").cloned().unwrap_or(json!({})))
        .unwrap_or_default()
}

fn annotations_of(v: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(
        v.pointer("/metadata/annotations")
            .cloned()
            .unwrap_or(json!({})),
    )
    .unwrap_or_default()
}

fn histogram_count(name: &str, result: &str) -> u64 {
    in_process::histogram_count(name, &[("result", result)])
}

fn nginx(ns: &str, name: &str, replicas: i32) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"namespace": ns, "name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "nginx", "image": "docker.io/library/nginx:1.25"}]}
            }
        }
    })
}

fn configmap(ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": ns, "name": name},
        "data": {"key": "value"}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn duplicated_deployment_service_configmap_reach_both_members_with_karmada_metadata() {
    let _g = serial().lock().await;
    let ns = "pw-dup";
    let (client, controllers) = setup(ns).await;
    let sync_ok_before = histogram_count("binding_sync_work_duration_seconds", "success");

    let d = template(&client, nginx(ns, "nginx", 2)).await;
    let svc = template(
        &client,
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"namespace": ns, "name": "nginx"},
            "spec": {"selector": {"app": "nginx"}, "ports": [{"port": 80, "targetPort": 80}]}
        }),
    )
    .await;
    let cm = template(&client, configmap(ns, "nginx")).await;
    let rb_d = binding(&client, &d, &[("member1", 2), ("member2", 2)], json!({})).await;
    let rb_s = binding(&client, &svc, &[("member1", 0), ("member2", 0)], json!({})).await;
    binding(&client, &cm, &[("member1", 0), ("member2", 0)], json!({})).await;

    for (i, cluster) in MEMBERS.iter().enumerate() {
        let m = member_client(i).await;
        for (kind, tmpl, rb) in [
            ("Deployment", &d, Some(&rb_d)),
            ("Service", &svc, Some(&rb_s)),
            ("ConfigMap", &cm, None),
        ] {
            let w = work_applied(&client, cluster, kind, ns, "nginx", "True").await;
            let (_, reason, message) = applied(&w).unwrap();
            assert_eq!(reason, "AppliedSuccessful");
            assert_eq!(message, "Manifest has been successfully applied");
            // Work metadata as Karmada writes it.
            assert_eq!(w.finalizers(), ["karmada.io/execution-controller"]);
            let wl = w.labels();
            assert!(wl.contains_key("resourcebinding.karmada.io/permanent-id"));
            assert!(wl.contains_key("work.karmada.io/permanent-id"));
            let wa = w.annotations();
            assert_eq!(wa["resourcebinding.karmada.io/namespace"], ns);
            assert_eq!(
                wa["resourcebinding.karmada.io/name"],
                format!("nginx-{}", kind.to_lowercase())
            );
            assert_eq!(wa["work.karmada.io/conflict-resolution"], "abort");
            assert_eq!(w.spec.suspend_dispatching, Some(false));
            let dispatching = w
                .status
                .as_ref()
                .unwrap()
                .conditions
                .iter()
                .find(|c| c.type_ == "Dispatching")
                .unwrap();
            assert_eq!(
                (dispatching.status.as_str(), dispatching.reason.as_str()),
                ("True", "Dispatching")
            );
            if let Some(rb) = rb {
                assert_eq!(
                    wl["resourcebinding.karmada.io/permanent-id"],
                    rb.labels()["resourcebinding.karmada.io/permanent-id"]
                );
            }

            // The member object.
            let gvk = match kind {
                "Deployment" => kube::api::GroupVersionKind::gvk("apps", "v1", kind),
                _ => kube::api::GroupVersionKind::gvk("", "v1", kind),
            };
            let (ar, _) = kube::discovery::pinned_kind(&m, &gvk).await.unwrap();
            let api: Api<kube::api::DynamicObject> = Api::namespaced_with(m.clone(), ns, &ar);
            let obj = serde_json::to_value(api.get("nginx").await.unwrap()).unwrap();
            let l = labels_of(&obj);
            assert_eq!(l["karmada.io/managed"], "true");
            assert_eq!(
                l["work.karmada.io/permanent-id"],
                wl["work.karmada.io/permanent-id"]
            );
            assert_eq!(
                l["resourcebinding.karmada.io/permanent-id"],
                wl["resourcebinding.karmada.io/permanent-id"]
            );
            let a = annotations_of(&obj);
            assert_eq!(a["work.karmada.io/name"], work_name(kind, "nginx", ns));
            assert_eq!(
                a["work.karmada.io/namespace"],
                format!("karmada-es-{cluster}")
            );
            assert_eq!(
                a["resourcetemplate.karmada.io/uid"],
                tmpl["metadata"]["uid"].as_str().unwrap()
            );
            assert_eq!(
                a["resourcebinding.karmada.io/name"],
                format!("nginx-{}", kind.to_lowercase())
            );
            assert_eq!(a["work.karmada.io/conflict-resolution"], "abort");
            assert!(a["resourcetemplate.karmada.io/managed-labels"].contains("karmada.io/managed"));
            assert!(a.contains_key("resourcetemplate.karmada.io/managed-annotations"));
            if kind == "Deployment" {
                assert_eq!(obj["spec"]["replicas"], 2);
                assert_eq!(a["resourcetemplate.karmada.io/generation"], "1");
            }
        }
    }
    // Karmada's Work name for Deployment default/nginx.
    assert_eq!(
        work_name("Deployment", "nginx", "default"),
        "nginx-687f7fb96f"
    );
    assert!(histogram_count("binding_sync_work_duration_seconds", "success") >= sync_ok_before + 3);
    assert!(
        metric_sum(
            "create_resource_to_cluster",
            &[
                ("result", "success"),
                ("kind", "Deployment"),
                ("member_cluster", "member1"),
                ("recreate", "false")
            ]
        ) >= 1.0
    );
    assert!(histogram_count("work_sync_workload_duration_seconds", "success") >= 6);
    // The namespace Work is Karmada's too.
    let nsw: Api<Work> = Api::namespaced(client.clone(), "karmada-es-member1");
    let w = nsw.get(&work_name("Namespace", ns, "")).await.unwrap();
    assert_eq!(w.owner_references()[0].kind, "Namespace");
    controllers.stop().await;
}

async fn member_replicas(i: usize, ns: &str, name: &str) -> Option<i32> {
    let api: Api<Deployment> = Api::namespaced(member_client(i).await, ns);
    api.get_opt(name)
        .await
        .unwrap()
        .and_then(|d| d.spec.replicas)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn divided_replicas_follow_the_scheduler_result() {
    let _g = serial().lock().await;
    let ns = "pw-div";
    let (client, controllers) = setup(ns).await;
    let d = template(&client, nginx(ns, "web", 3)).await;
    let placement = json!({"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}});
    binding(
        &client,
        &d,
        &[("member1", 2), ("member2", 1)],
        json!({"placement": placement}),
    )
    .await;
    for (i, want) in [(0, 2), (1, 1)] {
        eventually(
            &format!("replicas {want} in member{}", i + 1),
            || async move { (member_replicas(i, ns, "web").await == Some(want)).then_some(()) },
        )
        .await;
    }
    // The scheduler changes the division (weights changed): members follow.
    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    rbs.patch(
        "web-deployment",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"clusters": [
            {"name": "member1", "replicas": 1}, {"name": "member2", "replicas": 2}
        ]}})),
    )
    .await
    .unwrap();
    for (i, want) in [(0, 1), (1, 2)] {
        eventually(
            &format!("replicas {want} in member{}", i + 1),
            || async move { (member_replicas(i, ns, "web").await == Some(want)).then_some(()) },
        )
        .await;
    }
    // Dropping a cluster deletes its Work and the member object.
    rbs.patch(
        "web-deployment",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"clusters": [
            {"name": "member1", "replicas": 3}
        ]}})),
    )
    .await
    .unwrap();
    eventually("member2 object removed", || async move {
        member_replicas(1, ns, "web").await.is_none().then_some(())
    })
    .await;
    eventually("member1 has 3", || async move {
        (member_replicas(0, ns, "web").await == Some(3)).then_some(())
    })
    .await;
    let works: Api<Work> = Api::namespaced(client.clone(), "karmada-es-member2");
    assert!(
        works
            .get_opt(&work_name("Deployment", "web", ns))
            .await
            .unwrap()
            .is_none()
    );
    controllers.stop().await;
}

fn image_of(d: &Deployment) -> String {
    d.spec.template.spec.as_ref().unwrap().containers[0]
        .image
        .clone()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn override_policy_changes_one_member_only_and_removal_reverts() {
    let _g = serial().lock().await;
    let ns = "pw-ovr";
    let (client, controllers) = setup(ns).await;
    let d = template(&client, nginx(ns, "app", 1)).await;
    binding(&client, &d, &[("member1", 1), ("member2", 1)], json!({})).await;
    work_applied(&client, "member1", "Deployment", ns, "app", "True").await;
    work_applied(&client, "member2", "Deployment", ns, "app", "True").await;

    let op: OverridePolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"namespace": ns, "name": "registry"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "app"}],
            "overrideRules": [{
                "targetCluster": {"clusterNames": ["member1"]},
                "overriders": {
                    "imageOverrider": [{"component": "Registry", "operator": "replace", "value": "registry.example.com"}],
                    "labelsOverrider": [{"operator": "add", "value": {"tier": "edge"}}]
                }
            }]
        }
    }))
    .unwrap();
    let ops: Api<OverridePolicy> = Api::namespaced(client.clone(), ns);
    ops.create(&PostParams::default(), &op).await.unwrap();

    let m1: Api<Deployment> = Api::namespaced(member_client(0).await, ns);
    let m2: Api<Deployment> = Api::namespaced(member_client(1).await, ns);
    let overridden = eventually("member1 image overridden", || {
        let m1 = m1.clone();
        async move {
            let d = m1.get("app").await.unwrap();
            (image_of(&d) == "registry.example.com/library/nginx:1.25").then_some(d)
        }
    })
    .await;
    assert_eq!(overridden.labels()["tier"], "edge");
    let plain = m2.get("app").await.unwrap();
    assert_eq!(image_of(&plain), "docker.io/library/nginx:1.25");
    assert!(!plain.labels().contains_key("tier"));
    let works: Api<Work> = Api::namespaced(client.clone(), "karmada-es-member1");
    let w = works
        .get(&work_name("Deployment", "app", ns))
        .await
        .unwrap();
    assert!(
        w.annotations()["policy.karmada.io/applied-overrides"]
            .contains("\"policyName\":\"registry\"")
    );

    ops.delete("registry", &DeleteParams::default())
        .await
        .unwrap();
    let reverted = eventually("member1 image reverted", || {
        let m1 = m1.clone();
        async move {
            let d = m1.get("app").await.unwrap();
            (image_of(&d) == "docker.io/library/nginx:1.25").then_some(d)
        }
    })
    .await;
    assert!(
        !reverted.labels().contains_key("tier"),
        "label added by the override is removed"
    );
    let w = works
        .get(&work_name("Deployment", "app", ns))
        .await
        .unwrap();
    assert!(
        !w.annotations()
            .contains_key("policy.karmada.io/applied-overrides")
    );
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unmanaged_object_is_left_alone_with_abort_and_taken_over_with_overwrite() {
    let _g = serial().lock().await;
    let ns = "pw-conflict";
    let (client, controllers) = setup(ns).await;
    let m1: Api<ConfigMap> = Api::namespaced(member_client(0).await, ns);
    let theirs: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "shared", "labels": {"owner": "someone-else"}}, "data": {"key": "theirs"}
    }))
    .unwrap();
    let _ = m1.delete("shared", &DeleteParams::default()).await;
    let theirs = m1.create(&PostParams::default(), &theirs).await.unwrap();
    let rv = theirs.resource_version();

    let cm = template(&client, configmap(ns, "shared")).await;
    binding(&client, &cm, &[("member1", 0), ("member2", 0)], json!({})).await;
    let w = work_applied(&client, "member1", "ConfigMap", ns, "shared", "False").await;
    let (_, reason, message) = applied(&w).unwrap();
    assert_eq!(reason, "AppliedFailed");
    assert!(
        message.contains("already exists in the cluster member1"),
        "{message}"
    );
    assert!(
        message.contains("Karmada will not manage this resource"),
        "{message}"
    );
    assert!(
        message.starts_with("Failed to apply all manifests (0/1)"),
        "{message}"
    );
    work_applied(&client, "member2", "ConfigMap", ns, "shared", "True").await;
    assert_no_change_for(
        &m1,
        Watched::Name("shared"),
        rv.as_deref().unwrap(),
        Duration::from_secs(2),
    )
    .await;
    let still = m1.get("shared").await.unwrap();
    assert_eq!(
        still.resource_version(),
        rv,
        "the unmanaged object is untouched"
    );
    assert_eq!(still.data.unwrap()["key"], "theirs");

    // Overwrite takes it over.
    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    rbs.patch(
        "shared-configmap",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"conflictResolution": "Overwrite"}})),
    )
    .await
    .unwrap();
    work_applied(&client, "member1", "ConfigMap", ns, "shared", "True").await;
    let taken = m1.get("shared").await.unwrap();
    assert_eq!(taken.labels()["karmada.io/managed"], "true");
    assert_eq!(
        taken.labels()["owner"],
        "someone-else",
        "member-side labels are kept"
    );
    assert_eq!(taken.data.as_ref().unwrap()["key"], "value");
    assert_eq!(
        taken.annotations()["work.karmada.io/conflict-resolution"],
        "overwrite"
    );
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn member_rejection_is_reported_on_its_work_only() {
    let _g = serial().lock().await;
    let ns = "pw-reject";
    let (client, controllers) = setup(ns).await;
    // An override makes member1's manifest invalid (negative replicas); member2's stays valid.
    let op: OverridePolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"namespace": ns, "name": "break-member1"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "bad"}],
            "overrideRules": [{
                "targetCluster": {"clusterNames": ["member1"]},
                "overriders": {"plaintext": [{"path": "/spec/template/spec/containers/0/imagePullPolicy", "operator": "replace", "value": "Sometimes"}]}
            }]
        }
    }))
    .unwrap();
    Api::<OverridePolicy>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &op)
        .await
        .unwrap();
    let d = template(&client, nginx(ns, "bad", 1)).await;
    let cm = template(&client, configmap(ns, "fine")).await;
    binding(&client, &d, &[("member1", 1), ("member2", 1)], json!({})).await;
    binding(&client, &cm, &[("member1", 0), ("member2", 0)], json!({})).await;
    let w = work_applied(&client, "member1", "Deployment", ns, "bad", "False").await;
    let (_, reason, message) = applied(&w).unwrap();
    assert_eq!(reason, "AppliedFailed");
    assert!(
        message.contains("imagePullPolicy"),
        "the member API's message: {message}"
    );
    assert!(
        message.contains("Unsupported value"),
        "the member API's message: {message}"
    );
    work_applied(&client, "member2", "Deployment", ns, "bad", "True").await;
    work_applied(&client, "member1", "ConfigMap", ns, "fine", "True").await;
    assert!(
        metric_sum(
            "create_resource_to_cluster",
            &[
                ("result", "error"),
                ("kind", "Deployment"),
                ("member_cluster", "member1")
            ]
        ) >= 1.0
    );
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn override_that_cannot_apply_leaves_work_alone_and_reports_on_binding() {
    let _g = serial().lock().await;
    let ns = "pw-badovr";
    let (client, controllers) = setup(ns).await;
    let cm = template(&client, configmap(ns, "cfg")).await;
    binding(&client, &cm, &[("member1", 0), ("member2", 0)], json!({})).await;
    let before = work_applied(&client, "member1", "ConfigMap", ns, "cfg", "True").await;
    let op: OverridePolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"namespace": ns, "name": "bad-path"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "cfg"}],
            "overrideRules": [{
                "targetCluster": {"clusterNames": ["member1"]},
                "overriders": {"plaintext": [{"path": "/data/missing/deeper", "operator": "replace", "value": "x"}]}
            }]
        }
    }))
    .unwrap();
    Api::<OverridePolicy>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &op)
        .await
        .unwrap();
    let cond = binding_condition(&client, ns, "cfg-configmap", "OverrideApplied", "False").await;
    assert!(cond.message.contains("bad-path"), "{}", cond.message);
    assert_eq!(cond.reason, "ApplyOverridePolicyFailed");
    let after: Api<Work> = Api::namespaced(client.clone(), "karmada-es-member1");
    let after = after.get(&work_name("ConfigMap", "cfg", ns)).await.unwrap();
    assert_eq!(
        after.resource_version(),
        before.resource_version(),
        "member1's Work is not touched"
    );
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_binding_removes_member_objects_and_works_or_preserves_them_released() {
    let _g = serial().lock().await;
    let ns = "pw-del";
    let (client, controllers) = setup(ns).await;
    let gone = template(&client, configmap(ns, "gone")).await;
    let kept = template(&client, configmap(ns, "kept")).await;
    binding(&client, &gone, &[("member1", 0), ("member2", 0)], json!({})).await;
    binding(
        &client,
        &kept,
        &[("member1", 0), ("member2", 0)],
        json!({"preserveResourcesOnDeletion": true}),
    )
    .await;
    for c in MEMBERS {
        work_applied(&client, c, "ConfigMap", ns, "gone", "True").await;
        let w = work_applied(&client, c, "ConfigMap", ns, "kept", "True").await;
        assert_eq!(w.spec.preserve_resources_on_deletion, Some(true));
    }
    let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
    rbs.delete("gone-configmap", &DeleteParams::default())
        .await
        .unwrap();
    rbs.delete("kept-configmap", &DeleteParams::default())
        .await
        .unwrap();
    for name in ["gone-configmap", "kept-configmap"] {
        eventually(&format!("binding {name} gone"), || {
            in_process::gone(&rbs, name)
        })
        .await;
    }
    for (i, c) in MEMBERS.iter().enumerate() {
        let works: Api<Work> = Api::namespaced(client.clone(), &format!("karmada-es-{c}"));
        for name in ["gone", "kept"] {
            assert!(
                works
                    .get_opt(&work_name("ConfigMap", name, ns))
                    .await
                    .unwrap()
                    .is_none()
            );
        }
        let m: Api<ConfigMap> = Api::namespaced(member_client(i).await, ns);
        assert!(
            m.get_opt("gone").await.unwrap().is_none(),
            "deleted from {c}"
        );
        let k = m.get("kept").await.unwrap();
        for l in [
            "karmada.io/managed",
            "work.karmada.io/permanent-id",
            "resourcebinding.karmada.io/permanent-id",
        ] {
            assert!(!k.labels().contains_key(l), "{l} stripped in {c}");
        }
        for a in [
            "work.karmada.io/name",
            "resourcebinding.karmada.io/name",
            "resourcetemplate.karmada.io/uid",
        ] {
            assert!(!k.annotations().contains_key(a), "{a} stripped in {c}");
        }
        assert_eq!(k.data.unwrap()["key"], "value");
    }
    assert!(
        metric_sum(
            "delete_resource_from_cluster",
            &[("result", "success"), ("kind", "ConfigMap")]
        ) >= 2.0
    );
    controllers.stop().await;
}

async fn member_versions(ns: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (i, c) in MEMBERS.iter().enumerate() {
        let m: Api<ConfigMap> = Api::namespaced(member_client(i).await, ns);
        for cm in m
            .list(&ListParams::default().labels("karmada.io/managed=true"))
            .await
            .unwrap()
        {
            out.insert(
                format!("{c}/{}", cm.name_any()),
                cm.resource_version().unwrap(),
            );
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn restart_over_propagated_objects_writes_nothing_to_members() {
    let _g = serial().lock().await;
    let ns = "pw-restart";
    const N: usize = 50;
    let (client, controllers) = setup(ns).await;
    let svc = template(
        &client,
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"namespace": ns, "name": "svc"},
            "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}
        }),
    )
    .await;
    binding(&client, &svc, &[("member1", 0), ("member2", 0)], json!({})).await;
    for i in 0..N {
        let cm = template(&client, configmap(ns, &format!("cm-{i}"))).await;
        binding(&client, &cm, &[("member1", 0), ("member2", 0)], json!({})).await;
    }
    for c in MEMBERS {
        let works: Api<Work> = Api::namespaced(client.clone(), &format!("karmada-es-{c}"));
        eventually(&format!("all works applied in {c}"), || {
            let works = works.clone();
            async move {
                let n = works
                    .list(&ListParams::default())
                    .await
                    .unwrap()
                    .items
                    .iter()
                    .filter(|w| {
                        w.annotations()
                            .get("resourcebinding.karmada.io/namespace")
                            .map(String::as_str)
                            == Some(ns)
                    })
                    .filter(|w| applied(w).is_some_and(|a| a.0 == "True"))
                    .count();
                (n == N + 1).then_some(())
            }
        })
        .await;
    }
    let before = member_versions(ns).await;
    assert_eq!(before.len(), 2 * N);
    let svc_rv = |c: Client| async move {
        Api::<Service>::namespaced(c, ns)
            .get("svc")
            .await
            .unwrap()
            .resource_version()
    };
    let svc_before = (
        svc_rv(member_client(0).await).await,
        svc_rv(member_client(1).await).await,
    );
    let works_before: BTreeMap<String, Option<String>> = {
        let mut m = BTreeMap::new();
        for c in MEMBERS {
            for w in Api::<Work>::namespaced(client.clone(), &format!("karmada-es-{c}"))
                .list(&ListParams::default())
                .await
                .unwrap()
            {
                m.insert(format!("{c}/{}", w.name_any()), w.resource_version());
            }
        }
        m
    };
    controllers.stop().await;

    // Every applied Work in the execution namespaces (this test's and earlier tests') is looked
    // at again after the restart; each must be found equal to its member object.
    let mut applied_works = 0usize;
    for c in MEMBERS {
        applied_works += Api::<Work>::namespaced(client.clone(), &format!("karmada-es-{c}"))
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|w| applied(w).is_some_and(|a| a.0 == "True"))
            .count();
    }
    let filter_none = [("operationResult", "none"), ("result", "success")];
    let none_before = metric_sum("update_resource_to_cluster", &filter_none);
    let created_before = metric_sum("create_resource_to_cluster", &[("result", "success")]);
    let updated_before = metric_sum(
        "update_resource_to_cluster",
        &[("operationResult", "updated")],
    ) + metric_sum(
        "update_resource_to_cluster",
        &[("operationResult", "unchanged")],
    );

    let controllers = start_controllers().await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let seen = metric_sum("update_resource_to_cluster", &filter_none) - none_before;
        if seen >= applied_works as f64 {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            let series: Vec<String> = lariat::metrics::registry()
                .gather()
                .iter()
                .filter(|mf| {
                    mf.name().ends_with("_to_cluster") || mf.name().ends_with("_from_cluster")
                })
                .flat_map(|mf| {
                    mf.get_metric()
                        .iter()
                        .map(|m| {
                            let l: Vec<String> = m
                                .get_label()
                                .iter()
                                .map(|l| format!("{}={}", l.name(), l.value()))
                                .collect();
                            format!(
                                "{}{{{}}} {}",
                                mf.name(),
                                l.join(","),
                                m.get_counter().value()
                            )
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            let mut failed = Vec::new();
            for c in MEMBERS {
                for w in Api::<Work>::namespaced(client.clone(), &format!("karmada-es-{c}"))
                    .list(&ListParams::default())
                    .await
                    .unwrap()
                {
                    if let Some(a) = applied(&w).filter(|a| a.0 != "True") {
                        failed.push(format!("{c}/{}: {}", w.name_any(), a.2));
                    }
                }
            }
            failed.truncate(5);
            panic!(
                "only {seen} of {applied_works} applied works re-synced; failed: {failed:#?}; series: {series:#?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // No member ConfigMap was written so far, nor in the next two seconds.
    assert_eq!(
        member_versions(ns).await,
        before,
        "no member ConfigMap was written"
    );
    let mut quiet = Vec::new();
    for i in 0..MEMBERS.len() {
        let m: Api<ConfigMap> = Api::namespaced(member_client(i).await, ns);
        let rv = current_version(&m, Watched::All).await;
        quiet.push((m, rv));
    }
    futures::future::join_all(
        quiet
            .iter()
            .map(|(m, rv)| assert_no_change_for(m, Watched::All, rv, Duration::from_secs(2))),
    )
    .await;
    let svc_after = (
        svc_rv(member_client(0).await).await,
        svc_rv(member_client(1).await).await,
    );
    assert_eq!(svc_after, svc_before, "no member Service was written");
    assert_eq!(
        metric_sum("create_resource_to_cluster", &[("result", "success")]),
        created_before
    );
    let updated_after = metric_sum(
        "update_resource_to_cluster",
        &[("operationResult", "updated")],
    ) + metric_sum(
        "update_resource_to_cluster",
        &[("operationResult", "unchanged")],
    );
    assert_eq!(updated_after, updated_before, "no member update request");
    for c in MEMBERS {
        for w in Api::<Work>::namespaced(client.clone(), &format!("karmada-es-{c}"))
            .list(&ListParams::default())
            .await
            .unwrap()
        {
            let key = format!("{c}/{}", w.name_any());
            if let Some(rv) = works_before.get(&key) {
                assert_eq!(&w.resource_version(), rv, "work {key} not rewritten");
            }
        }
    }
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_resource_binding_propagates_cluster_scoped_template() {
    let _g = serial().lock().await;
    let (client, controllers) = setup("pw-crb").await;
    let role = template(
        &client,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "pw-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
        }),
    )
    .await;
    let id = uuid::Uuid::new_v4().to_string();
    let crb: karmada_apis::ClusterResourceBinding = serde_json::from_value(json!({
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ClusterResourceBinding",
        "metadata": {
            "name": "pw-reader-clusterrole",
            "labels": {"clusterresourcebinding.karmada.io/permanent-id": id},
            "finalizers": ["karmada.io/cluster-resource-binding-controller"],
        },
        "spec": {
            "resource": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "pw-reader",
                         "uid": role["metadata"]["uid"], "resourceVersion": role["metadata"]["resourceVersion"]},
            "clusters": [{"name": "member1"}, {"name": "member2"}],
        }
    }))
    .unwrap();
    let crbs: Api<karmada_apis::ClusterResourceBinding> = Api::all(client.clone());
    crbs.create(&PostParams::default(), &crb).await.unwrap();
    for (i, c) in MEMBERS.iter().enumerate() {
        let w = work_applied(&client, c, "ClusterRole", "", "pw-reader", "True").await;
        assert_eq!(
            w.labels()["clusterresourcebinding.karmada.io/permanent-id"],
            id
        );
        assert_eq!(
            w.annotations()["clusterresourcebinding.karmada.io/name"],
            "pw-reader-clusterrole"
        );
        let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(member_client(i).await);
        let r = roles.get("pw-reader").await.unwrap();
        assert_eq!(
            r.labels()["clusterresourcebinding.karmada.io/permanent-id"],
            id
        );
        assert_eq!(r.labels()["karmada.io/managed"], "true");
    }
    crbs.delete("pw-reader-clusterrole", &DeleteParams::default())
        .await
        .unwrap();
    eventually("cluster resource binding gone", || {
        gone(&crbs, "pw-reader-clusterrole")
    })
    .await;
    for i in 0..MEMBERS.len() {
        let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(member_client(i).await);
        assert!(roles.get_opt("pw-reader").await.unwrap().is_none());
    }
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn not_ready_cluster_gets_nothing_until_it_is_ready_again() {
    let _g = serial().lock().await;
    let ns = "pw-notready";
    let (client, controllers) = setup(ns).await;
    in_process::set_cluster_ready(&client, "member2", false, "set by test", json!({})).await;
    let cm = template(&client, configmap(ns, "later")).await;
    binding(&client, &cm, &[("member1", 0), ("member2", 0)], json!({})).await;
    work_applied(&client, "member1", "ConfigMap", ns, "later", "True").await;
    let m2: Api<ConfigMap> = Api::namespaced(member_client(1).await, ns);
    let rv = current_version(&m2, Watched::Name("later")).await;
    assert_no_change_for(&m2, Watched::Name("later"), &rv, Duration::from_secs(3)).await;
    assert!(
        m2.get_opt("later").await.unwrap().is_none(),
        "nothing applied to a NotReady cluster"
    );
    let works: Api<Work> = Api::namespaced(client.clone(), "karmada-es-member2");
    let w = works
        .get(&work_name("ConfigMap", "later", ns))
        .await
        .unwrap();
    assert!(applied(&w).is_none(), "no Applied condition while NotReady");
    in_process::set_cluster_ready(&client, "member2", true, "set by test", json!({})).await;
    work_applied(&client, "member2", "ConfigMap", ns, "later", "True").await;
    assert!(m2.get_opt("later").await.unwrap().is_some());
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn divided_job_gets_parallelism_and_completions_split() {
    let _g = serial().lock().await;
    let ns = "pw-job";
    let (client, controllers) = setup(ns).await;
    let job = template(
        &client,
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"namespace": ns, "name": "pi"},
            "spec": {
                "parallelism": 3, "completions": 6, "suspend": true,
                "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "pi", "image": "docker.io/library/perl:5"}]}}
            }
        }),
    )
    .await;
    let placement = json!({"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}});
    binding(
        &client,
        &job,
        &[("member1", 2), ("member2", 1)],
        json!({"replicas": 3, "placement": placement}),
    )
    .await;
    for (i, (parallelism, completions)) in [(2, 4), (1, 2)].into_iter().enumerate() {
        work_applied(&client, MEMBERS[i], "Job", ns, "pi", "True").await;
        let jobs: Api<k8s_openapi::api::batch::v1::Job> =
            Api::namespaced(member_client(i).await, ns);
        let j = jobs.get("pi").await.unwrap();
        let spec = j.spec.unwrap();
        assert_eq!(spec.parallelism, Some(parallelism), "{}", MEMBERS[i]);
        assert_eq!(spec.completions, Some(completions), "{}", MEMBERS[i]);
    }
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn suspended_dispatching_skip_label_and_sync_events() {
    let _g = serial().lock().await;
    let ns = "pw-suspend";
    let (client, controllers) = setup(ns).await;
    let cm = template(&client, configmap(ns, "held")).await;
    binding(
        &client,
        &cm,
        &[("member1", 0), ("member2", 0)],
        json!({"suspension": {"dispatchingOnClusters": {"clusterNames": ["member2"]}}}),
    )
    .await;
    work_applied(&client, "member1", "ConfigMap", ns, "held", "True").await;
    let works: Api<Work> = Api::namespaced(client.clone(), "karmada-es-member2");
    let wname = work_name("ConfigMap", "held", ns);
    let w = eventually("member2 work suspended", || {
        let works = works.clone();
        let wname = wname.clone();
        async move {
            let w = works.get_opt(&wname).await.unwrap()?;
            let c = w
                .status
                .as_ref()?
                .conditions
                .iter()
                .find(|c| c.type_ == "Dispatching")?
                .clone();
            (c.status == "False").then_some((w, c))
        }
    })
    .await;
    assert_eq!(w.0.spec.suspend_dispatching, Some(true));
    assert_eq!(w.1.reason, "SuspendDispatching");
    let m2: Api<ConfigMap> = Api::namespaced(member_client(1).await, ns);
    let rv = current_version(&m2, Watched::Name("held")).await;
    assert_no_change_for(&m2, Watched::Name("held"), &rv, Duration::from_secs(2)).await;
    assert!(
        m2.get_opt("held").await.unwrap().is_none(),
        "nothing dispatched to member2"
    );

    // SyncWorkSucceed Events on the binding and on the template.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
    let reasons = eventually("SyncWorkSucceed events", || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.unwrap().items;
            let on = |kind: &str, name: &str| {
                list.iter().any(|e| {
                    e.reason.as_deref() == Some("SyncWorkSucceed")
                        && e.involved_object.kind.as_deref() == Some(kind)
                        && e.involved_object.name.as_deref() == Some(name)
                })
            };
            (on("ResourceBinding", "held-configmap") && on("ConfigMap", "held"))
                .then_some(list.len())
        }
    })
    .await;
    assert!(reasons >= 2);

    // A namespace labelled to skip auto-propagation gets no Work.
    create_namespace(
        &client,
        "pw-skipped",
        json!({"namespace.karmada.io/skip-auto-propagation": "true"}),
    )
    .await;
    create_namespace(&client, "pw-propagated", json!({})).await;
    let ns_works: Api<Work> = Api::namespaced(client.clone(), "karmada-es-member1");
    eventually("pw-propagated has a Work", || {
        let ns_works = ns_works.clone();
        async move {
            ns_works
                .get_opt(&work_name("Namespace", "pw-propagated", ""))
                .await
                .unwrap()
                .map(|_| ())
        }
    })
    .await;
    assert!(
        ns_works
            .get_opt(&work_name("Namespace", "pw-skipped", ""))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        ns_works
            .get_opt(&work_name("Namespace", "kube-system", ""))
            .await
            .unwrap()
            .is_none()
    );
    controllers.stop().await;
}

/// Fails if `obj` in the member changes or is deleted before `until` resolves: a watch from its
/// resourceVersion sees every change, unlike a later GET.
async fn untouched_until<T>(
    api: &Api<ConfigMap>,
    obj: &ConfigMap,
    until: impl std::future::Future<Output = T>,
) -> T {
    use futures::StreamExt;
    let wp = kube::api::WatchParams::default().fields(&format!("metadata.name={}", obj.name_any()));
    let mut stream = api
        .watch(&wp, &obj.resource_version().unwrap())
        .await
        .unwrap()
        .boxed();
    let watch = async move {
        while let Some(ev) = stream.next().await {
            match ev.unwrap() {
                kube::api::WatchEvent::Bookmark(_) => {}
                kube::api::WatchEvent::Error(e) => panic!("watch error: {e:?}"),
                other => return other,
            }
        }
        panic!("watch ended early");
    };
    tokio::select! {
        t = until => t,
        change = watch => panic!("the other Work's member object changed: {change:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn member_object_of_another_work_is_never_updated_or_deleted() {
    let _g = serial().lock().await;
    let ns = "pw-owner";
    let (client, controllers) = setup(ns).await;
    // member1 already holds the object, managed by Karmada for another Work.
    let m1: Api<ConfigMap> = Api::namespaced(member_client(0).await, ns);
    let _ = m1.delete("owned", &DeleteParams::default()).await;
    let theirs: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": "owned",
            "labels": {"karmada.io/managed": "true", "work.karmada.io/permanent-id": "other-id"},
            "annotations": {"work.karmada.io/namespace": "karmada-es-member1", "work.karmada.io/name": "other-work"},
        },
        "data": {"key": "theirs"}
    }))
    .unwrap();
    let theirs = m1.create(&PostParams::default(), &theirs).await.unwrap();

    let check = async {
        let cm = template(&client, configmap(ns, "owned")).await;
        // Even Overwrite does not take another Work's object.
        binding(
            &client,
            &cm,
            &[("member1", 0), ("member2", 0)],
            json!({"conflictResolution": "Overwrite"}),
        )
        .await;
        let w = work_applied(&client, "member1", "ConfigMap", ns, "owned", "False").await;
        let (_, reason, message) = applied(&w).unwrap();
        assert_eq!(reason, "OwnedByAnotherWork");
        assert!(
            message.contains("belongs to Work karmada-es-member1/other-work"),
            "{message}"
        );
        work_applied(&client, "member2", "ConfigMap", ns, "owned", "True").await;
        let events: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(client.clone(), "karmada-es-member1");
        let wname = w.name_any();
        eventually("OwnedByAnotherWork event on the Work", || {
            let events = events.clone();
            let wname = wname.clone();
            async move {
                let list = events.list(&ListParams::default()).await.unwrap().items;
                list.into_iter().find(|e| {
                    e.reason.as_deref() == Some("OwnedByAnotherWork")
                        && e.type_.as_deref() == Some("Warning")
                        && e.involved_object.name.as_deref() == Some(wname.as_str())
                        && e.message
                            .as_deref()
                            .is_some_and(|m| m.contains("other-work"))
                })
            }
        })
        .await;
        // Deleting the binding deletes the Works; member1's object is not removed with them.
        let rbs: Api<ResourceBinding> = Api::namespaced(client.clone(), ns);
        rbs.delete("owned-configmap", &DeleteParams::default())
            .await
            .unwrap();
        let works: Api<Work> = Api::namespaced(client.clone(), "karmada-es-member1");
        eventually("member1's Work gone", || in_process::gone(&works, &wname)).await;
        let m2: Api<ConfigMap> = Api::namespaced(member_client(1).await, ns);
        eventually("member2's copy deleted", || in_process::gone(&m2, "owned")).await;
        // Retries had time to run: the rate limiter retries a failing Work within milliseconds.
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    untouched_until(&m1, &theirs, check).await;
    let still = m1.get("owned").await.unwrap();
    assert_eq!(still.data.unwrap()["key"], "theirs");
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn template_too_large_for_a_work_is_reported_and_disturbs_nothing_else() {
    let _g = serial().lock().await;
    let ns = "pw-large";
    let (client, controllers) = setup(ns).await;
    // The API server stores this ConfigMap (1 MiB of binaryData, 250 kB of annotations: inside
    // its limits, ~1.3 MB in etcd as protobuf), but a Work is a custom resource stored as JSON,
    // where the data is base64: ~1.64 MB, beyond etcd's 1.5 MiB request limit.
    let blob = "A".repeat(1_039_998 / 3 * 4);
    let pad = "x".repeat(250_000);
    let big = template(
        &client,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": ns, "name": "big", "annotations": {"example.com/pad": pad}},
            "binaryData": {"blob": blob},
        }),
    )
    .await;
    binding(&client, &big, &[("member1", 0), ("member2", 0)], json!({})).await;
    let cond = binding_condition(&client, ns, "big-configmap", "WorksSynced", "False").await;
    assert_eq!(cond.reason, "WorkTooLarge");
    for text in ["member1", "member2", "too large", "ConfigMap pw-large/big"] {
        assert!(cond.message.contains(text), "{text}: {}", cond.message);
    }
    // A Warning Event on the binding and on the template.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
    let failed_on = |list: &[k8s_openapi::api::core::v1::Event], kind: &str, name: &str| {
        list.iter()
            .filter(|e| {
                e.reason.as_deref() == Some("SyncWorkFailed")
                    && e.type_.as_deref() == Some("Warning")
                    && e.involved_object.kind.as_deref() == Some(kind)
                    && e.involved_object.name.as_deref() == Some(name)
            })
            .map(|e| e.count.unwrap_or(1))
            .sum::<i32>()
    };
    eventually("SyncWorkFailed on the binding and the template", || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.unwrap().items;
            (failed_on(&list, "ResourceBinding", "big-configmap") > 0
                && failed_on(&list, "ConfigMap", "big") > 0)
                .then_some(())
        }
    })
    .await;

    // Nothing else is disturbed: another template propagates to both members meanwhile.
    let small = template(&client, configmap(ns, "small")).await;
    binding(
        &client,
        &small,
        &[("member1", 0), ("member2", 0)],
        json!({}),
    )
    .await;
    for cluster in MEMBERS {
        work_applied(&client, cluster, "ConfigMap", ns, "small", "True").await;
    }
    // ... and the refused binding was not retried in a loop meanwhile (each retry would have
    // recorded one more SyncWorkFailed: a hot loop makes dozens in the time the other template
    // took to propagate).
    let list = events.list(&ListParams::default()).await.unwrap().items;
    let retries = failed_on(&list, "ResourceBinding", "big-configmap");
    assert!(retries <= 2, "the binding was synced {retries} times");
    let works: Api<Work> = Api::namespaced(client.clone(), "karmada-es-member1");
    assert!(
        works
            .get_opt(&work_name("ConfigMap", "big", ns))
            .await
            .unwrap()
            .is_none()
    );

    // Made smaller (and the binding told, as the detector does), it propagates and the
    // condition turns True.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let shrunk = cms
        .patch(
            "big",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"example.com/pad": null}}})),
        )
        .await
        .unwrap();
    Api::<ResourceBinding>::namespaced(client.clone(), ns)
        .patch(
            "big-configmap",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"resource": {"resourceVersion": shrunk.resource_version()}}}),
            ),
        )
        .await
        .unwrap();
    for cluster in MEMBERS {
        work_applied(&client, cluster, "ConfigMap", ns, "big", "True").await;
    }
    binding_condition(&client, ns, "big-configmap", "WorksSynced", "True").await;
    controllers.stop().await;
}
