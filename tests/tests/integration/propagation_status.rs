//! Status comes home: the workStatus and bindingStatus controllers against real API servers.
//!
//! member1 is a full member (kube-controller-manager, kube-scheduler, kwok nodes), so its
//! Deployments get really ready pods and its Jobs really complete; member2 is an API server only,
//! so the test plays its controllers by writing the status of objects there. The test also plays
//! the execution controller: it puts the member objects in place with the labels and annotations
//! execution writes, and sets the Works' `Applied` condition. The host runs without
//! kube-controller-manager, so nothing but our controllers writes template status.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use karmada_apis::well_known::{
    MANAGED_BY_KARMADA_LABEL, RESOURCE_BINDING_NAME_ANNOTATION,
    RESOURCE_BINDING_NAMESPACE_ANNOTATION, RESOURCE_BINDING_PERMANENT_ID_LABEL,
    RESOURCE_TEMPLATE_GENERATION_ANNOTATION, WORK_NAME_ANNOTATION, WORK_NAMESPACE_ANNOTATION,
    WORK_PERMANENT_ID_LABEL,
};
use karmada_apis::work::v1alpha1::ResourceHealth;
use karmada_apis::{ResourceBinding, Work, names};
use karmada_controllers::members::member_cluster_options;
use karmada_e2e::in_process::{self, Controllers, Harness, ensure_namespace, serial};
use karmada_e2e::quiet::{Watched, assert_holds_for, assert_no_change_for, changes_within, names};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(90);
const MEMBERS: [&str; 2] = ["member1", "member2"];

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        full_members: 1,
        install_crds: true,
        host_controller_manager: false,
        ..Default::default()
    })
}

/// workStatus and bindingStatus running in-process, with both members connected.
async fn start_controllers() -> Controllers {
    Harness::new(in_process::implemented(&["workStatus", "bindingStatus"]))
        .settings(karmada_controllers::Settings {
            skipped_propagating_namespaces: vec![],
            ..in_process::settings()
        })
        .members(&MEMBERS, member_cluster_options())
        .start(env())
        .await
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    karmada_e2e::wait::eventually(what, WAIT, Duration::from_millis(300), check).await
}

/// Creates the execution namespaces of `clusters` (`MEMBERS[..clusters]`) and `ns` on the host
/// and in those members, then starts the controllers.
async fn setup(ns: &str, clusters: usize) -> (Client, Controllers) {
    let h = host().await;
    for c in &MEMBERS[..clusters] {
        ensure_namespace(&h, &names::execution_space_name(c)).await;
    }
    ensure_namespace(&h, ns).await;
    for i in 0..clusters {
        ensure_namespace(&member(i).await, ns).await;
    }
    (h, start_controllers().await)
}

async fn host() -> Client {
    env().host().client().await
}

async fn member(i: usize) -> Client {
    env().members()[i].client().await
}

/// What the test needs to know about one propagated template.
struct Propagation {
    namespace: String,
    name: String,
    kind: String,
    api_version: String,
    binding: String,
    work: String,
}

impl Propagation {
    fn new(namespace: &str, name: &str, kind: &str, api_version: &str) -> Self {
        Propagation {
            namespace: namespace.into(),
            name: name.into(),
            kind: kind.into(),
            api_version: api_version.into(),
            binding: names::binding_name(kind, name),
            work: names::work_name(kind, name, namespace),
        }
    }

    /// The member object as the execution controller writes it (also the Work's manifest).
    fn manifest(&self, cluster: &str, template: &Value, generation: i64, rb_id: &str) -> Value {
        let mut m = template.clone();
        let o = m.as_object_mut().unwrap();
        o.remove("status");
        let meta = o["metadata"].as_object_mut().unwrap();
        for k in [
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
        ] {
            meta.remove(k);
        }
        meta.insert(
            "labels".into(),
            json!({
                MANAGED_BY_KARMADA_LABEL: "true",
                RESOURCE_BINDING_PERMANENT_ID_LABEL: rb_id,
                WORK_PERMANENT_ID_LABEL: format!("{rb_id}-{cluster}"),
            }),
        );
        meta.insert(
            "annotations".into(),
            json!({
                WORK_NAMESPACE_ANNOTATION: names::execution_space_name(cluster),
                WORK_NAME_ANNOTATION: self.work,
                RESOURCE_BINDING_NAMESPACE_ANNOTATION: self.namespace,
                RESOURCE_BINDING_NAME_ANNOTATION: self.binding,
                RESOURCE_TEMPLATE_GENERATION_ANNOTATION: generation.to_string(),
            }),
        );
        m
    }

    fn work_api(client: &Client, cluster: &str) -> Api<Work> {
        Api::namespaced(client.clone(), &names::execution_space_name(cluster))
    }

    /// Creates or replaces the Work of `cluster` holding `manifest`.
    async fn put_work(&self, cluster: &str, manifest: &Value, rb_id: &str) {
        let api = Self::work_api(&host().await, cluster);
        let work: Work = serde_json::from_value(json!({
            "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": self.work, "namespace": names::execution_space_name(cluster),
                "labels": {RESOURCE_BINDING_PERMANENT_ID_LABEL: rb_id,
                    WORK_PERMANENT_ID_LABEL: format!("{rb_id}-{cluster}")},
                "annotations": {RESOURCE_BINDING_NAMESPACE_ANNOTATION: self.namespace,
                    RESOURCE_BINDING_NAME_ANNOTATION: self.binding}},
            "spec": {"workload": {"manifests": [manifest]}}
        }))
        .unwrap();
        match api.get_opt(&self.work).await.unwrap() {
            None => {
                api.create(&PostParams::default(), &work).await.unwrap();
            }
            Some(_) => {
                api.patch(
                    &self.work,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": work.spec})),
                )
                .await
                .unwrap();
            }
        }
    }

    /// Sets the Work's `Applied` condition as the execution controller does.
    async fn set_applied(&self, cluster: &str, ok: bool, message: &str) {
        set_work_applied(
            &Self::work_api(&host().await, cluster),
            &self.work,
            ok,
            message,
        )
        .await;
    }

    /// Puts `manifest` in place in `MEMBERS[i]` and marks its Work applied, as execution does.
    async fn apply_in_member(&self, i: usize, kind: &str, manifest: &Value) {
        create_member_object(i, kind, manifest).await;
        self.set_applied(MEMBERS[i], true, "Manifest has been successfully applied")
            .await;
    }

    /// Creates the binding (scheduled onto `clusters`) and marks it scheduled.
    async fn create_binding(&self, uid: &str, rb_id: &str, clusters: &[(&str, i32)]) {
        let api: Api<ResourceBinding> = Api::namespaced(host().await, &self.namespace);
        let rb: ResourceBinding = serde_json::from_value(json!({
            "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
            "metadata": {"name": self.binding, "namespace": self.namespace,
                "labels": {RESOURCE_BINDING_PERMANENT_ID_LABEL: rb_id}},
            "spec": {"resource": {"apiVersion": self.api_version, "kind": self.kind,
                    "namespace": self.namespace, "name": self.name, "uid": uid},
                "clusters": clusters.iter().map(|(c, r)| json!({"name": c, "replicas": r})).collect::<Vec<_>>()}
        }))
        .unwrap();
        api.create(&PostParams::default(), &rb).await.unwrap();
        mark_scheduled(&api, &self.binding).await;
    }

    async fn binding(&self) -> ResourceBinding {
        Api::<ResourceBinding>::namespaced(host().await, &self.namespace)
            .get(&self.binding)
            .await
            .unwrap()
    }
}

/// Sets Work `name`'s `Applied` condition as the execution controller does. The work-status
/// controller writes the same status concurrently: a fresh read, written with its
/// resourceVersion, retried on conflicts.
async fn set_work_applied(api: &Api<Work>, name: &str, ok: bool, message: &str) {
    let (status, reason) = if ok {
        ("True", "AppliedSuccessful")
    } else {
        ("False", "AppliedFailed")
    };
    for _ in 0..20 {
        let mut work = api.get(name).await.unwrap();
        let mut s = work.status.clone().unwrap_or_default();
        s.conditions.retain(|c| c.type_ != "Applied");
        s.conditions.push(
            serde_json::from_value(json!({"type": "Applied", "status": status,
                "reason": reason, "message": message,
                "lastTransitionTime": "2026-01-01T00:00:00Z"}))
            .unwrap(),
        );
        work.status = Some(s);
        match api
            .replace_status(name, &PostParams::default(), &work)
            .await
        {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => panic!("set Applied on Work {name}: {e}"),
        }
    }
    panic!("set Applied on Work {name}: 20 conflicts in a row");
}

/// Marks a binding scheduled as the scheduler does: a patch of the one status field it owns
/// (the binding-status controller writes the rest of the status concurrently).
async fn mark_scheduled<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"lastScheduledTime": "2026-01-01T00:00:00Z"}})),
    )
    .await
    .unwrap();
}

fn fully_applied(rb: &ResourceBinding) -> Option<(String, String, String)> {
    in_process::condition(&rb.status.as_ref()?.conditions, "FullyApplied")
}

fn deployment(ns: &str, name: &str, replicas: i64, image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": image}]}}}})
}

async fn create_member_object(i: usize, ar_kind: &str, manifest: &Value) -> DynamicObject {
    let gvk = match ar_kind {
        "Deployment" => kube::api::GroupVersionKind::gvk("apps", "v1", "Deployment"),
        _ => kube::api::GroupVersionKind::gvk("batch", "v1", "Job"),
    };
    let ar = kube::api::ApiResource::from_gvk(&gvk);
    let ns = manifest["metadata"]["namespace"].as_str().unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(member(i).await, ns, &ar);
    let obj: DynamicObject = serde_json::from_value(manifest.clone()).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

/// Resource versions of the objects whose status the controllers write.
async fn versions(p: &Propagation) -> BTreeMap<String, String> {
    let h = host().await;
    let mut out = BTreeMap::new();
    let d: Deployment = Api::namespaced(h.clone(), &p.namespace)
        .get(&p.name)
        .await
        .unwrap();
    out.insert("template".into(), d.resource_version().unwrap_or_default());
    out.insert(
        "binding".into(),
        p.binding().await.resource_version().unwrap_or_default(),
    );
    for (i, c) in MEMBERS.iter().enumerate() {
        let w = Propagation::work_api(&h, c).get(&p.work).await.unwrap();
        out.insert(
            format!("work/{c}"),
            w.resource_version().unwrap_or_default(),
        );
        let d: Deployment = Api::namespaced(member(i).await, &p.namespace)
            .get(&p.name)
            .await
            .unwrap();
        out.insert(
            format!("member object/{c}"),
            d.resource_version().unwrap_or_default(),
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn deployment_status_comes_home() {
    let _serial = serial().lock().await;
    let ns = "status-deploy";
    let (h, controllers) = setup(ns, 2).await;

    // The template on the host: 3 replicas, divided 2 (full member1) + 1 (API-server-only member2).
    let p = Propagation::new(ns, "nginx", "Deployment", "apps/v1");
    let deployments: Api<Deployment> = Api::namespaced(h.clone(), ns);
    let template: Deployment = deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(deployment(ns, "nginx", 3, "nginx:1.27")).unwrap(),
        )
        .await
        .unwrap();
    let generation = template.metadata.generation.unwrap();
    let template_value = serde_json::to_value(&template).unwrap();
    let rb_id = "0f4bd5a3-7c1e-4a55-9d5e-1a2b3c4d5e6f";
    // Both Works exist before the binding is scheduled: an aggregation over no cluster at all
    // would (as in Karmada) take the template's generation as observed.
    let mut manifests = Vec::new();
    for (cluster, replicas) in [("member1", 2), ("member2", 1)] {
        let mut manifest = p.manifest(cluster, &template_value, generation, rb_id);
        manifest["spec"]["replicas"] = json!(replicas);
        p.put_work(cluster, &manifest, rb_id).await;
        manifests.push(manifest);
    }
    p.create_binding(
        &template.uid().unwrap(),
        rb_id,
        &[("member1", 2), ("member2", 1)],
    )
    .await;
    for (i, manifest) in manifests.iter().enumerate() {
        p.apply_in_member(i, "Deployment", manifest).await;
    }

    // member1's pods become ready for real; member2 has no controllers, so its Deployment has
    // no status yet and is not rolled out: Unhealthy.
    let m1: Api<Deployment> = Api::namespaced(member(0).await, ns);
    let m2: Api<Deployment> = Api::namespaced(member(1).await, ns);
    let rb = eventually("aggregated status of both clusters", || async {
        let rb = p.binding().await;
        let items = rb
            .status
            .as_ref()
            .map(|s| s.aggregated_status.clone())
            .unwrap_or_default();
        let m1_ready = m1
            .get("nginx")
            .await
            .unwrap()
            .status
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        match items.as_slice() {
            [a, b]
                if a.cluster_name == "member1"
                    && b.cluster_name == "member2"
                    && m1_ready == 2
                    && a.status
                        .as_ref()
                        .and_then(|s| s.to_value().ok())
                        .and_then(|s| s["readyReplicas"].as_i64())
                        == Some(2)
                    && a.health == Some(ResourceHealth::Healthy)
                    && b.health == Some(ResourceHealth::Unhealthy) =>
            {
                Ok(rb)
            }
            _ => Err(format!("member1 ready {m1_ready}, items {items:?}")),
        }
    })
    .await;
    assert!(rb.status.as_ref().unwrap().aggregated_status[0].applied);
    assert_eq!(
        fully_applied(&rb),
        Some((
            "True".into(),
            "FullyAppliedSuccess".into(),
            "All works have been successfully applied".into()
        ))
    );
    // The Work carries Karmada's identifier.
    let w1 = Propagation::work_api(&h, "member1")
        .get(&p.work)
        .await
        .unwrap();
    let ms = &w1.status.as_ref().unwrap().manifest_statuses;
    assert_eq!(ms.len(), 1);
    let id = &ms[0].identifier;
    assert_eq!(
        (
            id.ordinal,
            id.group.as_str(),
            id.version.as_str(),
            id.kind.as_str(),
            id.resource.as_str(),
            id.namespace.as_str(),
            id.name.as_str()
        ),
        // Karmada leaves `resource` empty.
        (0, "apps", "v1", "Deployment", "", ns, "nginx")
    );

    // The template's readyReplicas is the sum of the members' real values: 2 + 0.
    let sum_ready = || async {
        let a = m1
            .get("nginx")
            .await
            .unwrap()
            .status
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        let b = m2
            .get("nginx")
            .await
            .unwrap()
            .status
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        a + b
    };
    eventually("template readyReplicas = members' sum", || async {
        let want = sum_ready().await;
        let got = deployments
            .get("nginx")
            .await
            .unwrap()
            .status
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        if got == want && want == 2 {
            Ok(())
        } else {
            Err(format!("template {got}, members {want}"))
        }
    })
    .await;
    // Not every member observed the template generation yet (member2 has no status).
    let t = deployments.get("nginx").await.unwrap();
    assert_eq!(t.status.as_ref().and_then(|s| s.observed_generation), None);

    // member2's pod becomes ready (its "controllers" report it): the sum moves to 3, member2
    // turns Healthy, and now that every member observed generation 1 the template follows.
    let m2_status = |generation: i64| {
        json!({"status": {"observedGeneration": generation, "replicas": 1, "updatedReplicas": 1,
            "readyReplicas": 1, "availableReplicas": 1}})
    };
    let m2_gen = m2.get("nginx").await.unwrap().metadata.generation.unwrap();
    m2.patch_status(
        "nginx",
        &PatchParams::default(),
        &Patch::Merge(m2_status(m2_gen)),
    )
    .await
    .unwrap();
    eventually(
        "template readyReplicas 3 and observedGeneration 1",
        || async {
            let s = deployments
                .get("nginx")
                .await
                .unwrap()
                .status
                .unwrap_or_default();
            let want = sum_ready().await;
            if s.ready_replicas == Some(want)
                && want == 3
                && s.observed_generation == Some(generation)
            {
                Ok(())
            } else {
                Err(format!("template status {s:?}, members {want}"))
            }
        },
    )
    .await;
    let rb = p.binding().await;
    assert_eq!(
        rb.status.as_ref().unwrap().aggregated_status[1].health,
        Some(ResourceHealth::Healthy)
    );

    // A template change (generation 2): observedGeneration stays until the members observe it.
    let t = deployments
        .patch(
            "nginx",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"metadata": {"labels": {"rev": "2"}}}}})),
        )
        .await
        .unwrap();
    let generation2 = t.metadata.generation.unwrap();
    assert!(generation2 > generation);
    // The binding controller would record the template's new resourceVersion.
    Api::<ResourceBinding>::namespaced(h.clone(), ns)
        .patch(
            &p.binding,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resource": {"resourceVersion": t.resource_version()}}})),
        )
        .await
        .unwrap();
    assert_holds_for(
        &deployments,
        Watched::Name("nginx"),
        &t.resource_version().unwrap(),
        Duration::from_secs(3),
        |d| {
            let observed = d.status.as_ref().and_then(|s| s.observed_generation);
            if observed == Some(generation) {
                Ok(())
            } else {
                Err(format!(
                    "observedGeneration {observed:?} before the members observed {generation2}"
                ))
            }
        },
    )
    .await;
    // Execution applies the new manifests (generation annotation 2); member1's controllers
    // observe it for real, member2's status is reported by the test.
    for (i, cluster) in MEMBERS.iter().enumerate() {
        let api: Api<Deployment> = Api::namespaced(member(i).await, ns);
        let d = api
            .patch(
                "nginx",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {
                    RESOURCE_TEMPLATE_GENERATION_ANNOTATION: generation2.to_string()}},
                    "spec": {"template": {"metadata": {"labels": {"rev": "2"}}}}})),
            )
            .await
            .unwrap();
        if *cluster == "member2" {
            api.patch_status(
                "nginx",
                &PatchParams::default(),
                &Patch::Merge(m2_status(d.metadata.generation.unwrap())),
            )
            .await
            .unwrap();
        }
    }
    eventually("template observedGeneration follows", || async {
        let s = deployments
            .get("nginx")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        if s.observed_generation == Some(generation2) && s.ready_replicas == Some(3) {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;

    // A cluster that failed to apply: FULLYAPPLIED False with Karmada's reason and message.
    p.set_applied("member2", false, "boom: quota exceeded")
        .await;
    let rb = eventually("FullyApplied False", || async {
        let rb = p.binding().await;
        match fully_applied(&rb) {
            Some((s, _, _)) if s == "False" => Ok(rb),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(
        fully_applied(&rb),
        Some((
            "False".into(),
            "FullyAppliedFailed".into(),
            "Failed to apply all works, see status.aggregatedStatus for details".into()
        ))
    );
    let item = &rb.status.as_ref().unwrap().aggregated_status[1];
    assert_eq!(
        (
            item.cluster_name.as_str(),
            item.applied,
            item.applied_message.as_str(),
            item.health.clone()
        ),
        (
            "member2",
            false,
            "boom: quota exceeded",
            Some(ResourceHealth::Unknown)
        )
    );
    p.set_applied("member2", true, "Manifest has been successfully applied")
        .await;
    eventually("FullyApplied True again", || async {
        match fully_applied(&p.binding().await) {
            Some((s, _, _)) if s == "True" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // member2 is connected again (new caches, as after a credential rotation): its status
    // still comes home. Its pod stops being ready: the template's sum drops back to 2.
    controllers
        .members
        .registry()
        .remove("member2", Duration::from_secs(10))
        .await
        .unwrap();
    let config = env().members()[1].kube_config().await.unwrap();
    controllers
        .members
        .registry()
        .add("member2", config, member_cluster_options())
        .unwrap();
    let d2 = m2.get("nginx").await.unwrap();
    m2.patch_status(
        "nginx",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"observedGeneration": d2.metadata.generation,
            "replicas": 1, "updatedReplicas": 1, "readyReplicas": 0, "availableReplicas": 0,
            "unavailableReplicas": 1}}),
        ),
    )
    .await
    .unwrap();
    eventually(
        "template readyReplicas back to 2 after reconnect",
        || async {
            let s = deployments
                .get("nginx")
                .await
                .unwrap()
                .status
                .unwrap_or_default();
            let want = sum_ready().await;
            if s.ready_replicas == Some(want) && want == 2 {
                Ok(())
            } else {
                Err(format!("template {s:?}, members {want}"))
            }
        },
    )
    .await;

    // A quiet minute: once member1's rollout of the template change has settled nothing changes
    // in the members, so nothing is written (template, binding, Works).
    eventually("member1 rollout settled", || async {
        let d = m1.get("nginx").await.unwrap();
        let s = d.status.clone().unwrap_or_default();
        let settled = s.observed_generation == d.metadata.generation
            && s.replicas == Some(2)
            && s.updated_replicas == Some(2)
            && s.ready_replicas == Some(2)
            && s.available_replicas == Some(2)
            && s.unavailable_replicas.unwrap_or(0) == 0;
        if settled {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;
    // The full member is a real cluster on a shared machine: its nodes may flap (kwok heartbeats
    // late) and change the member's status, which must then be written. A window is quiet when
    // no member object changed; in a quiet window nothing of ours may change.
    let rbs: Api<ResourceBinding> = Api::namespaced(h.clone(), ns);
    let (w1, w2) = (
        Propagation::work_api(&h, "member1"),
        Propagation::work_api(&h, "member2"),
    );
    let mut quiet = false;
    for attempt in 1..=3 {
        // Settle: the status write following the members' last change lands first.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let v = versions(&p).await;
        let minute = Duration::from_secs(60);
        let watch = |key: &str| v[key].as_str();
        let (template, binding, work1, work2, member1, member2) = tokio::join!(
            changes_within(
                &deployments,
                Watched::Name("nginx"),
                watch("template"),
                minute
            ),
            changes_within(&rbs, Watched::Name(&p.binding), watch("binding"), minute),
            changes_within(&w1, Watched::Name(&p.work), watch("work/member1"), minute),
            changes_within(&w2, Watched::Name(&p.work), watch("work/member2"), minute),
            changes_within(
                &m1,
                Watched::Name("nginx"),
                watch("member object/member1"),
                minute
            ),
            changes_within(
                &m2,
                Watched::Name("nginx"),
                watch("member object/member2"),
                minute
            ),
        );
        let members = [names(member1), names(member2)].concat();
        if !members.is_empty() {
            eprintln!(
                "attempt {attempt}: a member object changed, not a quiet minute: {members:?}"
            );
            // Our status follows the member's change.
            eventually("template readyReplicas follows the members", || async {
                let got = deployments
                    .get("nginx")
                    .await
                    .unwrap()
                    .status
                    .and_then(|s| s.ready_replicas)
                    .unwrap_or(0);
                let want = sum_ready().await;
                if got == want {
                    Ok(())
                } else {
                    Err(format!("template {got}, members {want}"))
                }
            })
            .await;
            continue;
        }
        let ours = [names(template), names(binding), names(work1), names(work2)].concat();
        assert!(
            ours.is_empty(),
            "status writes during a quiet minute: {ours:?}"
        );
        quiet = true;
        break;
    }
    assert!(quiet, "no quiet minute in the members in three attempts");

    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn job_in_two_clusters_aggregates_and_completes() {
    let _serial = serial().lock().await;
    let ns = "status-job";
    let (h, controllers) = setup(ns, 2).await;

    let p = Propagation::new(ns, "pi", "Job", "batch/v1");
    let jobs: Api<Job> = Api::namespaced(h.clone(), ns);
    let template: Job = jobs
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "pi", "namespace": ns},
                "spec": {"template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "pi", "image": "perl:5.34"}]}}}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let generation = template.metadata.generation.unwrap_or(1);
    let mut template_value = serde_json::to_value(&template).unwrap();
    // The API server fills in the selector and its labels; the manifest leaves them out, as
    // the binding controller's pruning does.
    template_value["spec"]
        .as_object_mut()
        .unwrap()
        .remove("selector");
    template_value["spec"]["template"]
        .as_object_mut()
        .unwrap()
        .remove("metadata");
    let rb_id = "5b0f2c44-1111-4e6b-8c3e-0a9b8c7d6e5f";
    p.create_binding(
        &template.uid().unwrap(),
        rb_id,
        &[("member1", 1), ("member2", 1)],
    )
    .await;
    let mut manifests = Vec::new();
    for cluster in MEMBERS {
        let manifest = p.manifest(cluster, &template_value, generation, rb_id);
        p.put_work(cluster, &manifest, rb_id).await;
        manifests.push(manifest);
    }
    for (i, manifest) in manifests.iter().enumerate() {
        p.apply_in_member(i, "Job", manifest).await;
    }

    // member1's Job really runs to completion (kwok completes Job pods); only then member2's.
    let m1: Api<Job> = Api::namespaced(member(0).await, ns);
    eventually("member1 Job completes", || async {
        let s = m1.get("pi").await.unwrap().status.unwrap_or_default();
        if s.succeeded == Some(1) && s.completion_time.is_some() {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;
    eventually("template succeeded 1 while member2 still runs", || async {
        let s = jobs.get("pi").await.unwrap().status.unwrap_or_default();
        let complete = s
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Complete");
        if s.succeeded == Some(1) && !complete {
            Ok(())
        } else {
            Err(format!("succeeded {:?} complete {complete}", s.succeeded))
        }
    })
    .await;
    let m2: Api<Job> = Api::namespaced(member(1).await, ns);
    m2.patch_status(
        "pi",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "startTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T00:00:05Z",
            "succeeded": 1, "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                 "lastTransitionTime": "2026-01-01T00:00:05Z", "lastProbeTime": "2026-01-01T00:00:05Z"},
                {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                 "lastTransitionTime": "2026-01-01T00:00:05Z", "lastProbeTime": "2026-01-01T00:00:05Z"}]}})),
    )
    .await
    .unwrap();
    eventually("template succeeded 2 and Complete", || async {
        let s = jobs.get("pi").await.unwrap().status.unwrap_or_default();
        let complete = s
            .conditions
            .clone()
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True");
        if s.succeeded == Some(2) && complete && s.completion_time.is_some() {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;
    let rb = p.binding().await;
    let items = &rb.status.as_ref().unwrap().aggregated_status;
    assert_eq!(items.len(), 2);
    assert!(items.iter().all(|i| i.applied));
    assert_eq!(fully_applied(&rb).unwrap().0, "True");

    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unschedulable_pods_make_the_deployment_unhealthy() {
    let _serial = serial().lock().await;
    let ns = "status-unhealthy";
    let (h, controllers) = setup(ns, 1).await;

    // Its pod can never be scheduled (no node has the label it asks for), so it never becomes
    // ready: a Deployment that does not roll out.
    let p = Propagation::new(ns, "stuck", "Deployment", "apps/v1");
    let mut spec = deployment(ns, "stuck", 1, "nginx:1.27");
    spec["spec"]["template"]["spec"]["nodeSelector"] = json!({"status-e2e/no-such-node": "true"});
    let deployments: Api<Deployment> = Api::namespaced(h.clone(), ns);
    let template = deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(spec).unwrap(),
        )
        .await
        .unwrap();
    let generation = template.metadata.generation.unwrap();
    let rb_id = "8d3c1f0e-2222-4b7a-9c1d-3e4f5a6b7c8d";
    let manifest = p.manifest(
        "member1",
        &serde_json::to_value(&template).unwrap(),
        generation,
        rb_id,
    );
    p.put_work("member1", &manifest, rb_id).await;
    p.create_binding(&template.uid().unwrap(), rb_id, &[("member1", 1)])
        .await;
    p.apply_in_member(0, "Deployment", &manifest).await;

    // The member's controllers observed the Deployment and its pod is there, failing.
    let m1: Api<Deployment> = Api::namespaced(member(0).await, ns);
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(member(0).await, ns);
    eventually(
        "member1 observed the Deployment and its pod is unschedulable",
        || async {
            let d = m1.get("stuck").await.unwrap();
            let s = d.status.clone().unwrap_or_default();
            let pending = pods
                .list(&kube::api::ListParams::default().labels("app=stuck"))
                .await
                .unwrap()
                .items
                .iter()
                .any(|p| {
                    p.status.as_ref().is_some_and(|s| {
                        s.phase.as_deref() == Some("Pending")
                            && s.conditions.as_ref().is_some_and(|c| {
                                c.iter()
                                    .any(|c| c.type_ == "PodScheduled" && c.status == "False")
                            })
                    })
                });
            if s.observed_generation == d.metadata.generation && pending {
                Ok(())
            } else {
                Err(format!("status {s:?}, unschedulable pod {pending}"))
            }
        },
    )
    .await;
    let rb = eventually("aggregated health Unhealthy", || async {
        let rb = p.binding().await;
        let items = rb
            .status
            .as_ref()
            .map(|s| s.aggregated_status.clone())
            .unwrap_or_default();
        match items.as_slice() {
            [i] if i.status.is_some() && i.health == Some(ResourceHealth::Unhealthy) => Ok(rb),
            _ => Err(format!("{items:?}")),
        }
    })
    .await;
    // Applied, so FULLYAPPLIED is True even though the workload is unhealthy.
    assert_eq!(fully_applied(&rb).unwrap().0, "True");
    let w = Propagation::work_api(&h, "member1")
        .get(&p.work)
        .await
        .unwrap();
    assert_eq!(
        w.status.unwrap().manifest_statuses[0].health,
        Some(ResourceHealth::Unhealthy)
    );
    // It stays unhealthy: the pod never becomes available.
    let rbs: Api<ResourceBinding> = Api::namespaced(h.clone(), ns);
    assert_holds_for(
        &rbs,
        Watched::Name(&p.binding),
        &rb.resource_version().unwrap(),
        Duration::from_secs(5),
        |rb| match rb.status.as_ref().map(|s| &s.aggregated_status[..]) {
            Some([i]) if i.health == Some(ResourceHealth::Unhealthy) => Ok(()),
            other => Err(format!("not Unhealthy: {other:?}")),
        },
    )
    .await;

    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn cluster_resource_binding_aggregates_without_touching_the_template() {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    use karmada_apis::ClusterResourceBinding;
    use karmada_apis::well_known::{
        CLUSTER_RESOURCE_BINDING_ANNOTATION, CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL,
    };

    let _serial = serial().lock().await;
    let h = host().await;
    for c in MEMBERS {
        ensure_namespace(&h, &names::execution_space_name(c)).await;
    }
    let controllers = start_controllers().await;

    let name = "status-reader";
    let crb_name = names::binding_name("ClusterRole", name);
    let work_name = names::work_name("ClusterRole", name, "");
    let crb_id = "c0ffee00-3333-4c5d-8e9f-0a1b2c3d4e5f";
    let roles: Api<ClusterRole> = Api::all(h.clone());
    let template = roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole", "metadata": {"name": name},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}))
            .unwrap(),
        )
        .await
        .unwrap();
    let template_rv = template.resource_version();
    let ar = kube::api::ApiResource::erase::<ClusterRole>(&());
    for (i, cluster) in MEMBERS.iter().enumerate() {
        let manifest = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name,
                "labels": {MANAGED_BY_KARMADA_LABEL: "true",
                    CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL: crb_id},
                "annotations": {WORK_NAMESPACE_ANNOTATION: names::execution_space_name(cluster),
                    WORK_NAME_ANNOTATION: work_name,
                    CLUSTER_RESOURCE_BINDING_ANNOTATION: crb_name}},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
        let works: Api<Work> = Api::namespaced(h.clone(), &names::execution_space_name(cluster));
        let work: Work = serde_json::from_value(json!({
            "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
            "metadata": {"name": work_name, "namespace": names::execution_space_name(cluster),
                "labels": {CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL: crb_id},
                "annotations": {CLUSTER_RESOURCE_BINDING_ANNOTATION: crb_name}},
            "spec": {"workload": {"manifests": [manifest]}}}))
        .unwrap();
        works.create(&PostParams::default(), &work).await.unwrap();
        let api: Api<DynamicObject> = Api::all_with(member(i).await, &ar);
        api.create(
            &PostParams::default(),
            &serde_json::from_value(manifest).unwrap(),
        )
        .await
        .unwrap();
        // Applied, as the execution controller reports it.
        set_work_applied(
            &works,
            &work_name,
            true,
            "Manifest has been successfully applied",
        )
        .await;
    }
    let crbs: Api<ClusterResourceBinding> = Api::all(h.clone());
    let crb: ClusterResourceBinding = serde_json::from_value(json!({
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ClusterResourceBinding",
        "metadata": {"name": crb_name, "labels": {CLUSTER_RESOURCE_BINDING_PERMANENT_ID_LABEL: crb_id}},
        "spec": {"resource": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "name": name, "uid": template.uid()},
            "clusters": [{"name": "member1"}, {"name": "member2"}]}}))
    .unwrap();
    crbs.create(&PostParams::default(), &crb).await.unwrap();
    mark_scheduled(&crbs, &crb_name).await;

    let crb = eventually("CRB aggregated status and FullyApplied", || async {
        let crb = crbs.get(&crb_name).await.unwrap();
        let s = crb.status.clone().unwrap_or_default();
        let names: Vec<_> = s
            .aggregated_status
            .iter()
            .map(|i| i.cluster_name.as_str())
            .collect();
        let full = s
            .conditions
            .iter()
            .any(|c| c.type_ == "FullyApplied" && c.status == "True");
        // Health follows once the work-status controller has reported the member objects.
        let healthy = s
            .aggregated_status
            .iter()
            .all(|i| i.health == Some(ResourceHealth::Healthy));
        if names == ["member1", "member2"] && full && healthy {
            Ok(crb)
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;
    for item in &crb.status.unwrap().aggregated_status {
        // No status to reflect for a ClusterRole; no health rule: Healthy.
        assert!(item.applied);
        assert_eq!(item.health, Some(ResourceHealth::Healthy));
        assert_eq!(item.status, None);
    }
    // No aggregation rule for ClusterRoles: the template is never written.
    assert_no_change_for(
        &roles,
        Watched::Name(name),
        &template_rv.unwrap(),
        Duration::from_secs(3),
    )
    .await;

    controllers.stop().await;
}
