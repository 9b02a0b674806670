//! FederatedHPA end to end, with real metrics: two full members, each running metrics-server that
//! scrapes kwok's emulated kubelet resource metrics (each pod's CPU use comes from its
//! `kwok.x-k8s.io/usage-cpu` annotation), the real `karmada-controller-manager` with every default
//! controller, members joined with `karmadactl join`.
//!
//! A Deployment divided over both members scales up when its pods' CPU use rises (the new replicas
//! are divided again) and back down once it falls, after the FederatedHPA's short scale-down
//! stabilization window. A FederatedHPA on a metric no member serves is reported by condition and
//! Event, and its Deployment keeps its replicas.
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use karmada_apis::autoscaling::v1alpha1::FederatedHPA;
use karmada_apis::{PropagationPolicy, ResourceBinding};
use karmada_e2e::controller_manager::{Kcm, start_joined};
use karmada_e2e::process::parse_metrics;
use karmada_e2e::wait::eventually_showing;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testenv::{EnvOptions, TestEnv};

const NS: &str = "fhpa";
const WAIT: Duration = Duration::from_secs(150);
/// The CPU use of an idle pod: 20% of its 100m request.
const IDLE: &str = "20m";
/// The CPU use of a busy pod: 200% of its request.
const BUSY: &str = "200m";

fn env() -> &'static TestEnv {
    testenv::shared(EnvOptions {
        members: 2,
        full_members: 2,
        kwok_nodes: 1,
        install_crds: true,
        host_controller_manager: false,
        metrics_server: true,
        ..Default::default()
    })
}

/// Polls `check` every 500 ms until it returns `Ok`; panics with the last reason and the
/// controller-manager's log on timeout.
async fn eventually<T>(what: &str, kcm: &Kcm, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    let every = Duration::from_millis(500);
    let log = || format!("controller-manager log (tail):\n{}", kcm.log_tail(60));
    eventually_showing(what, WAIT, every, log, check).await
}

/// A Deployment `name` of 2 replicas requesting 100m CPU each and using [`IDLE`], divided over both
/// members with equal weights.
async fn propagate(host: &Client, name: &str) {
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name},
                             "annotations": {"kwok.x-k8s.io/usage-cpu": IDLE}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                         "resources": {"requests": {"cpu": "100m"}}}]},
            },
        },
    }))
    .unwrap();
    Api::<Deployment>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &deploy)
        .await
        .unwrap();
    let policy: PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
            "placement": {
                "clusterAffinity": {"clusterNames": ["member1", "member2"]},
                "replicaScheduling": {
                    "replicaSchedulingType": "Divided",
                    "replicaDivisionPreference": "Weighted",
                    "weightPreference": {"staticWeightList": [
                        {"targetCluster": {"clusterNames": ["member1"]}, "weight": 1},
                        {"targetCluster": {"clusterNames": ["member2"]}, "weight": 1},
                    ]},
                },
            },
        },
    }))
    .unwrap();
    Api::<PropagationPolicy>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
}

async fn create_fhpa(host: &Client, name: &str, spec: Value) {
    let fhpa: FederatedHPA = serde_json::from_value(json!({
        "apiVersion": "autoscaling.karmada.io/v1alpha1",
        "kind": "FederatedHPA",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap();
    Api::<FederatedHPA>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &fhpa)
        .await
        .unwrap();
}

/// `(cluster, replicas)` the binding of Deployment `name` schedules.
async fn scheduled(host: &Client, name: &str) -> Vec<(String, i32)> {
    Api::<ResourceBinding>::namespaced(host.clone(), NS)
        .get_opt(&format!("{name}-deployment"))
        .await
        .unwrap()
        .map(|rb| {
            rb.spec
                .clusters
                .iter()
                .map(|c| (c.name.clone(), c.replicas))
                .collect()
        })
        .unwrap_or_default()
}

async fn template_replicas(host: &Client, name: &str) -> i32 {
    Api::<Deployment>::namespaced(host.clone(), NS)
        .get(name)
        .await
        .unwrap()
        .spec
        .replicas
        .unwrap_or_default()
}

/// Sets the emulated CPU use of every pod of Deployment `name` in both members (patching the pods,
/// not the template, so nothing rolls out); returns how many pods were patched.
async fn set_usage(name: &str, cpu: &str) -> usize {
    let mut patched = 0;
    for m in env().members() {
        let pods: Api<Pod> = Api::namespaced(m.client().await, NS);
        let list = pods
            .list(&ListParams::default().labels(&format!("app={name}")))
            .await
            .unwrap();
        for p in list.items {
            let patch = json!({"metadata": {"annotations": {"kwok.x-k8s.io/usage-cpu": cpu}}});
            match pods
                .patch(
                    &p.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => patched += 1,
                // A pod deleted meanwhile needs no patch.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => panic!("patch pod {}: {e}", p.name_any()),
            }
        }
    }
    patched
}

/// The pods of Deployment `name` each member's `metrics.k8s.io` serves metrics for.
async fn pods_with_metrics(name: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for m in env().members() {
        let request = http::Request::get(format!(
            "/apis/metrics.k8s.io/v1beta1/namespaces/{NS}/pods?labelSelector=app%3D{name}"
        ))
        .body(Vec::new())
        .unwrap();
        let count = match m.client().await.request::<Value>(request).await {
            Ok(list) => list["items"].as_array().map_or(0, Vec::len),
            Err(_) => 0,
        };
        out.push(count);
    }
    out
}

/// `member: pod phase ready deleting` of each pod of Deployment `name`, for failure messages.
async fn pod_states(name: &str) -> String {
    let mut out = Vec::new();
    for (i, m) in env().members().iter().enumerate() {
        let pods: Api<Pod> = Api::namespaced(m.client().await, NS);
        let list = pods
            .list(&ListParams::default().labels(&format!("app={name}")))
            .await
            .unwrap();
        for p in list.items {
            let status = p.status.clone().unwrap_or_default();
            let ready: Vec<String> = status
                .conditions
                .iter()
                .flatten()
                .map(|c| format!("{}={}", c.type_, c.status))
                .collect();
            out.push(format!(
                "member{}: {} {:?} {ready:?} deleting={}",
                i + 1,
                p.name_any(),
                status.phase,
                p.metadata.deletion_timestamp.is_some()
            ));
        }
    }
    out.join("; ")
}

/// The pods of Deployment `name` that are Running and Ready in each member.
async fn ready_pods(name: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for m in env().members() {
        let pods: Api<Pod> = Api::namespaced(m.client().await, NS);
        let list = pods
            .list(&ListParams::default().labels(&format!("app={name}")))
            .await
            .unwrap();
        out.push(
            list.items
                .iter()
                .filter(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && p.status.as_ref().is_some_and(|s| {
                            s.conditions
                                .iter()
                                .flatten()
                                .any(|c| c.type_ == "Ready" && c.status == "True")
                        })
                })
                .count(),
        );
    }
    out
}

/// The FederatedHPA's condition `type_` as `(status, reason, message)`.
fn condition(fhpa: &FederatedHPA, type_: &str) -> Option<(String, String, String)> {
    fhpa.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

/// Event reasons recorded about FederatedHPA `name`.
async fn event_reasons(host: &Client, name: &str) -> Vec<String> {
    Api::<Event>::namespaced(host.clone(), NS)
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.kind.as_deref() == Some("FederatedHPA"))
        .filter_map(|e| e.reason)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the objects it creates"
)]
async fn a_divided_deployment_scales_with_the_cpu_use_of_its_pods_in_all_members() {
    let started = Instant::now();
    let env = env();
    let host = env.host().client().await;
    let kcm = start_joined(
        env,
        &[
            "--leader-elect=false",
            "--cluster-status-update-frequency=2s",
            "--horizontal-pod-autoscaler-sync-period=2s",
            // kwok's pods are Ready at once: their first samples count after one metrics window.
            "--horizontal-pod-autoscaler-cpu-initialization-period=15s",
        ],
        &[],
        WAIT,
    )
    .await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(host.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();

    propagate(&host, "web").await;
    propagate(&host, "api").await;
    for name in ["web", "api"] {
        eventually(
            &format!("{name}: one Ready pod per member"),
            &kcm,
            async || match ready_pods(name).await {
                r if r == [1, 1] => Ok(()),
                r => Err(format!("ready pods {r:?}")),
            },
        )
        .await;
    }
    // metrics-server needs two scrapes (10 s apart) of a pod before it serves the pod's CPU rate;
    // a FederatedHPA created earlier fails and backs off exponentially, as Karmada's does.
    eventually(
        "web: each member serves its pod's metrics",
        &kcm,
        async || match pods_with_metrics("web").await {
            r if r == [1, 1] => Ok(()),
            r => Err(format!("pods with metrics {r:?}")),
        },
    )
    .await;
    println!("workloads running after {:?}", started.elapsed());

    create_fhpa(
        &host,
        "web",
        json!({
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2,
            "maxReplicas": 6,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                         "target": {"type": "Utilization", "averageUtilization": 50}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 10}},
        }),
    )
    .await;
    // A metric no member serves (there is no custom metrics API anywhere).
    create_fhpa(
        &host,
        "api",
        json!({
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
            "maxReplicas": 5,
            "metrics": [{"type": "Pods", "pods": {"metric": {"name": "requests-per-second"},
                         "target": {"type": "AverageValue", "averageValue": "10"}}}],
        }),
    )
    .await;
    let fhpas: Api<FederatedHPA> = Api::namespaced(host.clone(), NS);

    // Idle pods (20% of the request, target 50%): the metrics are read and the minimum is kept.
    let status = eventually("web: a valid CPU metric at the minimum", &kcm, async || {
        let f = fhpas.get("web").await.unwrap();
        match condition(&f, "ScalingActive") {
            Some((s, r, _)) if s == "True" && r == "ValidMetricFound" => Ok(f.status.unwrap()),
            c => Err(format!("ScalingActive {c:?}")),
        }
    })
    .await;
    assert_eq!(status.current_replicas, Some(2));
    assert_eq!(status.desired_replicas, 2);
    let current = serde_json::to_value(&status.current_metrics).unwrap();
    assert_eq!(current[0]["type"], "Resource", "{current}");
    assert_eq!(current[0]["resource"]["name"], "cpu", "{current}");
    assert_eq!(template_replicas(&host, "web").await, 2);

    // The unknown metric: ScalingActive=False with the failure, Events, replicas untouched.
    let (status, reason, message) =
        eventually("api: the metric reported missing", &kcm, async || {
            let f = fhpas.get("api").await.unwrap();
            match condition(&f, "ScalingActive") {
                Some(c) if c.0 == "False" => Ok(c),
                c => Err(format!("ScalingActive {c:?}")),
            }
        })
        .await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "FailedGetPodsMetric")
    );
    assert!(
        message.starts_with("the HPA was unable to compute the replica count: unable to get metric requests-per-second: unable to fetch metrics from custom metrics API"),
        "{message}"
    );
    eventually("api: Events about the metric", &kcm, async || {
        let reasons = event_reasons(&host, "api").await;
        if reasons.iter().any(|r| r == "FailedGetPodsMetric")
            && reasons.iter().any(|r| r == "FailedComputeMetricsReplicas")
        {
            Ok(())
        } else {
            Err(format!("events {reasons:?}"))
        }
    })
    .await;
    assert_eq!(template_replicas(&host, "api").await, 2);

    // Busy pods (200%): up to the maximum, divided over both members again.
    assert_eq!(set_usage("web", BUSY).await, 2);
    let up = Instant::now();
    eventually("web scaled up to 6, 3 per member", &kcm, async || {
        let replicas = template_replicas(&host, "web").await;
        let mut on = scheduled(&host, "web").await;
        on.sort();
        if replicas == 6 && on == [("member1".to_owned(), 3), ("member2".to_owned(), 3)] {
            Ok(())
        } else {
            Err(format!("replicas {replicas}, scheduled {on:?}"))
        }
    })
    .await;
    println!("scaled up {:?} after the CPU use rose", up.elapsed());
    let f = fhpas.get("web").await.unwrap();
    assert!(f.status.as_ref().unwrap().last_scale_time.is_some());
    assert!(
        event_reasons(&host, "web")
            .await
            .iter()
            .any(|r| r == "SuccessfulRescale")
    );
    eventually(
        "web: 3 Ready pods per member",
        &kcm,
        async || match ready_pods("web").await {
            r if r == [3, 3] => Ok(()),
            r => Err(format!(
                "ready pods {r:?}; pods: {}",
                pod_states("web").await
            )),
        },
    )
    .await;

    // Idle again: after the 10 s stabilization window, back down to the minimum.
    set_usage("web", IDLE).await;
    let down = Instant::now();
    eventually("web scaled down to 2, 1 per member", &kcm, async || {
        let replicas = template_replicas(&host, "web").await;
        let mut on = scheduled(&host, "web").await;
        on.sort();
        if replicas == 2 && on == [("member1".to_owned(), 1), ("member2".to_owned(), 1)] {
            Ok(())
        } else {
            Err(format!("replicas {replicas}, scheduled {on:?}"))
        }
    })
    .await;
    println!("scaled down {:?} after the CPU use fell", down.elapsed());
    assert_eq!(template_replicas(&host, "api").await, 2);

    // Karmada's latency families moved: syncs, and metric reads by type and result (the Pods
    // metric of `api` is missing, so its reads failed), with Karmada's buckets (from 10 ms).
    let samples = parse_metrics(&kcm.metrics().expect("scrape the controller-manager"));
    let count = |name: &str, labels: &[(&str, &str)]| -> f64 {
        samples
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
            .sum()
    };
    let pull = "federatedhpa_pull_metrics_duration_seconds_count";
    for (labels, what) in [
        (
            vec![("result", "success"), ("metricType", "ResourceMetric")],
            "CPU reads",
        ),
        (
            vec![("result", "error"), ("metricType", "RawMetric")],
            "failed Pods-metric reads",
        ),
    ] {
        assert!(count(pull, &labels) >= 1.0, "no {what} in {pull}");
    }
    assert!(
        count(
            "federatedhpa_process_duration_seconds_count",
            &[("result", "success")]
        ) >= 1.0
    );
    let bounds: Vec<&str> = samples
        .iter()
        .filter(|s| s.name == "federatedhpa_process_duration_seconds_bucket")
        .filter(|s| s.labels.get("result").map(String::as_str) == Some("success"))
        .filter_map(|s| s.labels.get("le").map(String::as_str))
        .collect();
    assert_eq!(
        bounds,
        [
            "0.01", "0.02", "0.04", "0.08", "0.16", "0.32", "0.64", "1.28", "2.56", "5.12",
            "10.24", "20.48", "+Inf"
        ],
        "Karmada's buckets: from 10 ms, doubling, 12 of them"
    );
    println!("test took {:?}", started.elapsed());
}
