//! CronFederatedHPA, hpaScaleTargetMarker and deploymentReplicasSyncer against real API servers.
//!
//! A CronFederatedHPA rule scheduled (in a time zone) at the minute after the test starts scales a
//! Deployment template through its scale subresource and records the run in status; invalid rules
//! are refused by the CRD or reported by a Warning Event. With the propagation controllers running,
//! a propagated HPA marks its Deployment template `retain-replicas`; member1 is a full member whose
//! kube-controller-manager runs the real HPA controller, which raises the member Deployment to the
//! HPA's `minReplicas` (no metrics are needed for that: below `minReplicas` the HPA controller
//! scales without reading any), and the syncer carries the member's replicas back into the
//! template, once per change (the template's generation counts its writes). Deleting the HPA
//! removes the mark. The host runs without kube-controller-manager, as Karmada's API server does.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Event;
use karmada_apis::autoscaling::v1alpha1::CronFederatedHPA;
use karmada_apis::{Cluster, Work, names};
use karmada_controllers::members::member_cluster_options;
use karmada_e2e::in_process::{
    self, Controllers, Harness, create_namespace, ensure_namespace, histogram_bounds,
    histogram_count, serial,
};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const WAIT: Duration = Duration::from_secs(150);

fn env() -> &'static TestEnv {
    in_process::init_tracing();
    testenv::shared(EnvOptions {
        members: 1,
        full_members: 1,
        kwok_nodes: 1,
        install_crds: true,
        host_controller_manager: false,
        ..Default::default()
    })
}

async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    karmada_e2e::wait::eventually(what, WAIT, Duration::from_millis(250), check).await
}

async fn create(
    client: &Client,
    ns: &str,
    resource: &ApiResource,
    object: Value,
) -> Result<(), String> {
    let o: DynamicObject = serde_json::from_value(object).unwrap();
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, resource)
        .create(&PostParams::default(), &o)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn cron_resource() -> ApiResource {
    ApiResource::erase::<CronFederatedHPA>(&())
}

fn cron(name: &str, target: Value, rules: Value) -> Value {
    json!({
        "apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "CronFederatedHPA",
        "metadata": {"name": name},
        "spec": {"scaleTargetRef": target, "rules": rules},
    })
}

fn deployment(name: &str, replicas: i32) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "fake",
                    "resources": {"requests": {"cpu": "10m"}}}]}}},
    })
}

async fn warnings(client: &Client, ns: &str, name: &str, reason: &str) -> Vec<String> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason) && e.type_.as_deref() == Some("Warning"))
        .map(|e| e.message.unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn a_rule_fires_at_its_minute_and_bad_rules_are_refused_or_reported() {
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    let ns = "cron-fhpa";
    ensure_namespace(&client, ns).await;
    let controllers: Controllers = Harness::new(in_process::implemented(&[
        "cronFederatedHorizontalPodAutoscaler",
    ]))
    .start(env())
    .await;
    let deployments = ApiResource::erase::<Deployment>(&());
    create(&client, ns, &deployments, deployment("web", 1))
        .await
        .unwrap();
    let to_web = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"});

    // The CRD refuses what Karmada's webhook refuses and a schema can tell.
    let to_fhpa = json!({"apiVersion": "autoscaling.karmada.io/v1alpha1", "kind": "FederatedHPA", "name": "f"});
    let refused = [
        (
            "not a cron",
            cron(
                "bad-0",
                to_web.clone(),
                json!([{"name": "r", "schedule": "every day", "targetReplicas": 1}]),
            ),
        ),
        (
            "no targetReplicas",
            cron(
                "bad-1",
                to_web.clone(),
                json!([{"name": "r", "schedule": "0 * * * *"}]),
            ),
        ),
        (
            "no FederatedHPA bounds",
            cron(
                "bad-2",
                to_fhpa.clone(),
                json!([{"name": "r", "schedule": "0 * * * *", "targetReplicas": 1}]),
            ),
        ),
        (
            "min above max",
            cron(
                "bad-3",
                to_fhpa,
                json!([{"name": "r", "schedule": "0 * * * *", "targetMinReplicas": 3, "targetMaxReplicas": 2}]),
            ),
        ),
        (
            "duplicate rule",
            cron(
                "bad-4",
                to_web.clone(),
                json!([
            {"name": "r", "schedule": "0 * * * *", "targetReplicas": 1},
            {"name": "r", "schedule": "1 * * * *", "targetReplicas": 1}]),
            ),
        ),
        (
            "zero history",
            cron(
                "bad-5",
                to_web.clone(),
                json!([{"name": "r", "schedule": "0 * * * *", "targetReplicas": 1, "successfulHistoryLimit": 0}]),
            ),
        ),
    ];
    for (what, object) in refused {
        let err = create(&client, ns, &cron_resource(), object)
            .await
            .expect_err(what);
        assert!(
            err.contains("Invalid") || err.contains("invalid") || err.contains("Duplicate"),
            "{what}: {err}"
        );
    }

    // What the CRD cannot tell is reported by an Event and retried.
    let reported = [
        (
            "out-of-range",
            "61 * * * *",
            None,
            "end of range (61) above maximum (59)",
        ),
        (
            "no-such-zone",
            "0 * * * *",
            Some("Mars/Olympus_Mons"),
            "invalid time zone",
        ),
    ];
    for (name, schedule, zone, _) in reported {
        let rule =
            json!({"name": "r", "schedule": schedule, "targetReplicas": 1, "timeZone": zone});
        create(
            &client,
            ns,
            &cron_resource(),
            cron(name, to_web.clone(), json!([rule])),
        )
        .await
        .unwrap();
    }
    for (name, _, _, message) in reported {
        let got = eventually(&format!("StartRuleFailed for {name}"), || {
            let client = client.clone();
            async move {
                warnings(&client, ns, name, "StartRuleFailed")
                    .await
                    .into_iter()
                    .next()
                    .ok_or_else(|| "no Event yet".to_owned())
            }
        })
        .await;
        assert!(got.contains(message), "{name}: {got}");
    }

    // A rule at the coming minute, written in Asia/Kolkata (UTC+05:30, no daylight saving time).
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let lead = if now % 60 > 40 { 2 } else { 1 };
    let at = (now / 60 + lead) * 60;
    let local_minutes = (at / 60 + 330) % (24 * 60);
    let schedule = format!("{} {} * * *", local_minutes % 60, local_minutes / 60);
    let at_text = k8s_openapi::jiff::Timestamp::from_second(at as i64)
        .unwrap()
        .to_string();
    create(&client, ns, &cron_resource(), cron("nightly", to_web.clone(), json!([
        {"name": "scale-up", "schedule": schedule, "timeZone": "Asia/Kolkata", "targetReplicas": 3,
         "successfulHistoryLimit": 1},
        {"name": "paused", "schedule": "0 0 * * *", "targetReplicas": 9, "suspend": true},
    ])))
    .await
    .unwrap();
    let crons: Api<CronFederatedHPA> = Api::namespaced(client.clone(), ns);
    let status =
        |c: &CronFederatedHPA| serde_json::to_value(c.status.clone().unwrap_or_default()).unwrap();
    let before = eventually("next execution times in status", || {
        let crons = crons.clone();
        async move {
            let s = status(&crons.get("nightly").await.unwrap());
            let h = &s["executionHistories"];
            if h.as_array().map(Vec::len) == Some(2) {
                Ok(s)
            } else {
                Err(format!("{s}"))
            }
        }
    })
    .await;
    assert_eq!(before["executionHistories"][0]["ruleName"], "scale-up");
    assert_eq!(
        before["executionHistories"][0]["nextExecutionTime"],
        at_text.as_str(),
        "{before}"
    );
    assert_eq!(
        before["executionHistories"][1],
        json!({"ruleName": "paused"}),
        "{before}"
    );

    let after = eventually("the rule's run in status", || {
        let crons = crons.clone();
        async move {
            let s = status(&crons.get("nightly").await.unwrap());
            let runs = &s["executionHistories"][0]["successfulExecutions"];
            if runs.as_array().is_some_and(|r| !r.is_empty()) {
                Ok(s)
            } else {
                Err(format!("{s}"))
            }
        }
    })
    .await;
    let history = &after["executionHistories"][0];
    let run = &history["successfulExecutions"][0];
    assert_eq!(run["scheduleTime"], at_text.as_str(), "{after}");
    assert_eq!(run["appliedReplicas"], 3, "{after}");
    assert!(
        run["executionTime"].as_str().unwrap() >= at_text.as_str(),
        "{after}"
    );
    assert_eq!(
        history["nextExecutionTime"],
        k8s_openapi::jiff::Timestamp::from_second(at as i64 + 86_400)
            .unwrap()
            .to_string()
            .as_str(),
        "{after}"
    );
    assert!(history.get("failedExecutions").is_none(), "{after}");
    let web: Api<Deployment> = Api::namespaced(client.clone(), ns);
    assert_eq!(web.get("web").await.unwrap().spec.replicas, Some(3));

    // Karmada's latency families (the controllers run in this process, so its registry has them):
    // reconciles, and the rule's run, with Karmada's buckets (from 1 ms, doubling, 12 of them).
    let success = [("result", "success")];
    let process = "cronfederatedhpa_process_duration_seconds";
    assert!(
        histogram_count(process, &success) >= 1,
        "no successful reconcile observed"
    );
    let bounds = histogram_bounds(process, &success);
    assert_eq!(bounds.len(), 12);
    assert!(
        (bounds[0] - 0.001).abs() < 1e-12 && (bounds[11] - 2.048).abs() < 1e-9,
        "{bounds:?}"
    );
    // The run is observed after its history entry is written: wait for it rather than race it.
    eventually(
        "the rule's run in cronfederatedhpa_rule_process_duration_seconds",
        || async {
            let runs = histogram_count("cronfederatedhpa_rule_process_duration_seconds", &success);
            if runs >= 1 {
                Ok(())
            } else {
                Err(format!("{runs} runs observed"))
            }
        },
    )
    .await;
    controllers.stop().await;
}

/// member1 Ready, serving Deployments and HPAs, with its execution namespace.
async fn cluster_ready(client: &Client) {
    create_namespace(
        client,
        &names::execution_space_name("member1"),
        json!({"karmada.io/system": "true"}),
    )
    .await;
    let c: Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": "member1"},
        "spec": {"syncMode": "Push", "apiEndpoint": env().members()[0].url()}
    }))
    .unwrap();
    match Api::<Cluster>::all(client.clone())
        .create(&PostParams::default(), &c)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create Cluster member1: {e}"),
    }
    let apis = json!({"apiEnablements": [
        {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
        {"groupVersion": "autoscaling/v2", "resources": [
            {"name": "horizontalpodautoscalers", "kind": "HorizontalPodAutoscaler"}]}
    ]});
    in_process::set_cluster_ready(client, "member1", true, "ready", apis).await;
}

/// Whether the Work of Deployment `web` carries the retain-replicas mark in its manifest.
async fn mark_in_work(works: &Api<Work>) -> bool {
    let list = works.list(&ListParams::default()).await.unwrap();
    list.items
        .iter()
        .filter(|w| {
            w.annotations()
                .get("resourcebinding.karmada.io/name")
                .is_some_and(|n| n == "web-deployment")
        })
        .flat_map(|w| &w.spec.workload.manifests)
        .filter_map(|m| m.decode::<Value>().ok())
        .any(|m| m["metadata"]["labels"]["resourcetemplate.karmada.io/retain-replicas"] == "true")
}

async fn template(api: &Api<Deployment>) -> (Option<i32>, i64, bool) {
    let d = api.get("web").await.unwrap();
    let marked = d
        .labels()
        .get("resourcetemplate.karmada.io/retain-replicas")
        .map(String::as_str)
        == Some("true");
    (
        d.spec.replicas,
        d.metadata.generation.unwrap_or_default(),
        marked,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn member_hpas_own_the_replicas_and_the_template_follows_once() {
    let _serial = serial().lock().await;
    let client = env().host().client().await;
    let member = env().members()[0].client().await;
    let ns = "replicas-syncer";
    cluster_ready(&client).await;
    ensure_namespace(&client, ns).await;
    ensure_namespace(&member, ns).await;
    let mut started = in_process::implemented(&[
        "scheduler",
        "binding",
        "execution",
        "workStatus",
        "bindingStatus",
        "hpaScaleTargetMarker",
        "deploymentReplicasSyncer",
    ]);
    started.push((
        "resource-detector",
        karmada_controllers::detector::start_fn(),
    ));
    let controllers = Harness::new(started)
        .members(&["member1"], member_cluster_options())
        .start(env())
        .await;

    let deployments = ApiResource::erase::<Deployment>(&());
    let hpas = ApiResource::erase::<HorizontalPodAutoscaler>(&());
    create(&client, ns, &deployments, deployment("web", 2))
        .await
        .unwrap();
    let hpa = |min: i32| {
        json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": min, "maxReplicas": 10,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 80}}}]},
        })
    };
    // Its floor starts at the Deployment's 2 replicas: the member's HPA changes nothing until the
    // mark has reached the member (raising it earlier races the marker: the member's HPA would
    // scale an unmarked member object, which the execution controller puts back, as in Karmada).
    create(&client, ns, &hpas, hpa(2)).await.unwrap();
    let pp = json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web"},
        "spec": {"resourceSelectors": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "name": "web"}],
            "placement": {"clusterAffinity": {"clusterNames": ["member1"]},
                // Static weights: the Cluster here reports no resource summary to divide by.
                "replicaScheduling": {"replicaSchedulingType": "Divided",
                    "replicaDivisionPreference": "Weighted",
                    "weightPreference": {"staticWeightList": [
                        {"targetCluster": {"clusterNames": ["member1"]}, "weight": 1}]}}}},
    });
    let policies = ApiResource::erase::<karmada_apis::PropagationPolicy>(&());
    create(&client, ns, &policies, pp).await.unwrap();

    let templates: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let works: Api<Work> = Api::namespaced(client.clone(), "karmada-es-member1");
    eventually("the template and its Work marked", || {
        let (templates, works) = (templates.clone(), works.clone());
        async move {
            let marked_template = template(&templates).await.2;
            let marked_work = mark_in_work(&works).await;
            if marked_template && marked_work {
                Ok(())
            } else {
                Err(format!("template {marked_template}, Work {marked_work}"))
            }
        }
    })
    .await;
    let hpa_api = Api::<HorizontalPodAutoscaler>::namespaced(client.clone(), ns);
    hpa_api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minReplicas": 3}})),
        )
        .await
        .unwrap();
    // The member's HPA raises the member to 3; the template follows.
    let (replicas, at_three, marked) = eventually("template marked and at 3 replicas", || {
        let templates = templates.clone();
        async move {
            let t = template(&templates).await;
            if t.0 == Some(3) && t.2 {
                Ok(t)
            } else {
                Err(format!("{t:?}"))
            }
        }
    })
    .await;
    assert!(marked && replicas == Some(3));
    let in_member: Api<Deployment> = Api::namespaced(member.clone(), ns);
    let member_replicas = in_member.get("web").await.unwrap().spec.replicas;
    assert_eq!(
        member_replicas,
        Some(3),
        "the member keeps what its HPA decided"
    );

    // Raising the HPA's floor again reaches the member's HPA; the template follows again.
    hpa_api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minReplicas": 4}})),
        )
        .await
        .unwrap();
    eventually("template at 4 replicas", || {
        let templates = templates.clone();
        async move {
            let t = template(&templates).await;
            if t.0 == Some(4) {
                Ok(())
            } else {
                Err(format!("{t:?}"))
            }
        }
    })
    .await;
    // Settled: the binding carries 4 and the member reports 4 (so nothing is left to sync), and the
    // template was written exactly twice: 2 → 3 → 4, no fight.
    let bindings = ApiResource::erase::<karmada_apis::ResourceBinding>(&());
    let rb_api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &bindings);
    let rb_name = names::binding_name("Deployment", "web");
    eventually("binding settled at 4", || {
        let rb_api = rb_api.clone();
        let rb_name = rb_name.clone();
        async move {
            let rb = rb_api.get(&rb_name).await.unwrap();
            let spec = rb.data["spec"]["replicas"].as_i64();
            let observed = rb.data["status"]["schedulerObservedGeneration"].as_i64();
            let reported = rb.data["status"]["aggregatedStatus"][0]["status"]["replicas"].as_i64();
            if spec == Some(4) && observed == rb.metadata.generation && reported == Some(4) {
                Ok(())
            } else {
                Err(format!("{spec:?} {observed:?} {reported:?}"))
            }
        }
    })
    .await;
    let (replicas, settled, _) = template(&templates).await;
    // One spec write between 3 and 4 (a Deployment's generation counts spec and annotation
    // changes; the detector's claim annotations were written before the first sync).
    assert_eq!((replicas, settled), (Some(4), at_three + 1));

    // Deleting the HPA removes the mark.
    hpa_api
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("mark removed", || {
        let templates = templates.clone();
        async move {
            let t = template(&templates).await;
            if t.2 { Err(format!("{t:?}")) } else { Ok(()) }
        }
    })
    .await;
    controllers.stop().await;
}
