//! The scheduler's Karmada metrics, scraped from a running `karmada-controller-manager` after it
//! scheduled bindings: `karmada_scheduler_schedule_attempts_total` counts each attempt by result
//! (`scheduled` includes "no cluster fits", which Karmada does not retry; `error` is a failure it
//! retries) and schedule type (`ScaleSchedule` after a replica change), the latency histograms
//! have observations in Karmada's buckets, and the algorithm's steps, extension points and plugins
//! are timed under Karmada's label values.
#![allow(
    clippy::unwrap_used,
    reason = "a test harness file: its helpers build fixed objects and panic on a broken fixture"
)]

use std::collections::BTreeMap;
use std::time::Duration;

use karmada_apis::ResourceBinding;
use karmada_e2e::controller_manager::*;
use karmada_e2e::in_process::{create_ready_cluster, resource_binding};
use karmada_e2e::process::{Sample, parse_metrics};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

fn env() -> &'static testenv::TestEnv {
    testenv::shared(testenv::EnvOptions {
        host_controller_manager: false,
        install_crds: true,
        ..testenv::EnvOptions::default()
    })
}

/// Creates a Push Cluster no one serves, reporting Deployments and ConfigMaps as its APIs.
async fn create_cluster(client: &kube::Client, name: &str) {
    let apis = json!({"apiEnablements": [
        {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
        {"groupVersion": "v1", "resources": [{"name": "configmaps", "kind": "ConfigMap"}]},
    ]});
    create_ready_cluster(client, name, apis).await;
}

/// A ResourceBinding for a Deployment of `replicas`, as the detector writes one for `placement`.
fn deployment_binding(
    ns: &str,
    name: &str,
    replicas: i32,
    placement: serde_json::Value,
) -> ResourceBinding {
    resource_binding(
        ns,
        name,
        ("apps/v1", "Deployment"),
        json!({"replicas": replicas, "placement": placement}),
    )
}

/// The `Scheduled` condition's reason.
fn scheduled_reason(rb: &ResourceBinding) -> Option<String> {
    rb.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Scheduled")
        .map(|c| c.reason.clone())
}

/// The sum of the samples named `name` whose labels include every pair of `filter`.
fn sum(samples: &[Sample], name: &str, filter: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            filter
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
        .sum()
}

/// The `le` bounds of histogram `name`'s first series, `+Inf` left out.
fn bucket_bounds(samples: &[Sample], name: &str) -> Vec<f64> {
    let bucket = format!("{name}_bucket");
    let Some(first) = samples.iter().find(|s| s.name == bucket) else {
        return Vec::new();
    };
    let series: BTreeMap<_, _> = first.labels.iter().filter(|(k, _)| *k != "le").collect();
    samples
        .iter()
        .filter(|s| s.name == bucket)
        .filter(|s| {
            s.labels
                .iter()
                .filter(|(k, _)| *k != "le")
                .collect::<BTreeMap<_, _>>()
                == series
        })
        .filter_map(|s| s.labels.get("le").and_then(|v| v.parse::<f64>().ok()))
        .filter(|v| v.is_finite())
        .collect()
}

fn exponential(start: f64, factor: f64, count: i32) -> Vec<f64> {
    (0..count).map(|i| start * factor.powi(i)).collect()
}

fn assert_bounds(samples: &[Sample], name: &str, expected: &[f64]) {
    let got = bucket_bounds(samples, name);
    assert_eq!(got.len(), expected.len(), "{name} buckets: {got:?}");
    for (g, e) in got.iter().zip(expected) {
        assert!(
            (g - e).abs() <= e * 1e-6,
            "{name} buckets: {got:?}, Karmada's {expected:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: its steps share the bindings it creates"
)]
async fn scheduling_moves_karmadas_scheduler_metrics() {
    let env = env();
    let client = env.host().client().await;
    let ns = fresh_namespace(&client, "sched-metrics").await;
    let kcm = Kcm::start(
        env.host().kubeconfig_path(),
        &["--leader-elect=false", "--controllers=scheduler"],
        &[],
    );
    for name in ["metrics-m1", "metrics-m2"] {
        create_cluster(&client, name).await;
    }
    let bindings: Api<ResourceBinding> = Api::namespaced(client.clone(), &ns);
    let names = json!({"clusterNames": ["metrics-m1", "metrics-m2"]});
    let divided = json!({
        "clusterAffinity": names,
        "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
            "weightPreference": {"staticWeightList": [
                {"targetCluster": {"clusterNames": ["metrics-m1"]}, "weight": 1},
                {"targetCluster": {"clusterNames": ["metrics-m2"]}, "weight": 1}]}},
    });
    // Two placed, one that fits no cluster (Karmada counts it `scheduled`: it is not retried),
    // one whose spread constraint cannot be met (an `error`, retried).
    let cases = [
        ("placed-a", divided.clone(), "Success"),
        ("placed-b", divided.clone(), "Success"),
        (
            "fits-none",
            json!({"clusterAffinity": {"clusterNames": ["metrics-none"]}}),
            "NoClusterFit",
        ),
        (
            "unspreadable",
            json!({"clusterAffinity": names, "spreadConstraints": [
                {"spreadByField": "cluster", "minGroups": 3, "maxGroups": 3}]}),
            "SchedulerError",
        ),
    ];
    for (name, placement, _) in &cases {
        bindings
            .create(
                &PostParams::default(),
                &deployment_binding(&ns, name, 4, placement.clone()),
            )
            .await
            .unwrap_or_else(|e| panic!("create ResourceBinding {name}: {e}"));
    }
    for (name, _, reason) in &cases {
        kcm.eventually(&format!("{name} handled with {reason}"), WAIT, async || {
            let rb = bindings.get(name).await.map_err(|e| e.to_string())?;
            match scheduled_reason(&rb) {
                Some(r) if r == *reason => Ok(()),
                other => Err(format!("Scheduled reason {other:?}")),
            }
        })
        .await;
    }
    // A replica change is a scale.
    bindings
        .patch(
            "placed-a",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 6}})),
        )
        .await
        .unwrap();
    kcm.eventually("placed-a rescheduled for 6 replicas", WAIT, async || {
        let rb = bindings.get("placed-a").await.map_err(|e| e.to_string())?;
        let total: i32 = rb.spec.clusters.iter().map(|c| c.replicas).sum();
        (total == 6 && scheduled_reason(&rb).is_some())
            .then_some(())
            .ok_or(format!("clusters {:?}", rb.spec.clusters))
    })
    .await;

    let attempts = "karmada_scheduler_schedule_attempts_total";
    let samples = kcm
        .eventually("the scale attempt counted", WAIT, async || {
            let samples = parse_metrics(&kcm.metrics().ok_or("no /metrics")?);
            let scale = sum(
                &samples,
                attempts,
                &[("result", "scheduled"), ("schedule_type", "ScaleSchedule")],
            );
            let failed = sum(
                &samples,
                attempts,
                &[("result", "error"), ("schedule_type", "ReconcileSchedule")],
            );
            (scale >= 1.0 && failed >= 1.0)
                .then_some(samples)
                .ok_or(format!("scale {scale}, errors {failed}"))
        })
        .await;
    let scheduled = sum(
        &samples,
        attempts,
        &[
            ("result", "scheduled"),
            ("schedule_type", "ReconcileSchedule"),
        ],
    );
    assert!(
        scheduled >= 3.0,
        "placed-a, placed-b and fits-none scheduled: {scheduled}"
    );
    let e2e = "karmada_scheduler_e2e_scheduling_duration_seconds";
    let e2e_count = sum(&samples, &format!("{e2e}_count"), &[]);
    assert!(
        (e2e_count - sum(&samples, attempts, &[])).abs() < f64::EPSILON,
        "one latency per attempt: {e2e_count}"
    );
    let incoming = "karmada_scheduler_queue_incoming_bindings_total";
    assert!(sum(&samples, incoming, &[("event", "BindingAdd")]) >= 4.0);
    assert!(sum(&samples, incoming, &[("event", "BindingUpdate")]) >= 1.0);
    assert!(sum(&samples, incoming, &[("event", "ScheduleAttemptFailure")]) >= 1.0);
    let algorithm = "karmada_scheduler_scheduling_algorithm_duration_seconds_count";
    for step in ["Filter", "Score", "Select", "AssignReplicas"] {
        assert!(
            sum(&samples, algorithm, &[("schedule_step", step)]) >= 1.0,
            "step {step}"
        );
    }
    let points = "karmada_scheduler_framework_extension_point_duration_seconds_count";
    assert!(
        sum(
            &samples,
            points,
            &[("extension_point", "Filter"), ("result", "Success")]
        ) >= 1.0
    );
    assert!(
        sum(
            &samples,
            points,
            &[("extension_point", "Filter"), ("result", "Unschedulable")]
        ) >= 1.0
    );
    assert!(
        sum(
            &samples,
            points,
            &[("extension_point", "Score"), ("result", "Success")]
        ) >= 1.0
    );
    let plugins = "karmada_scheduler_plugin_execution_duration_seconds_count";
    for (plugin, point, result) in [
        ("APIEnablement", "Filter", "Success"),
        ("ClusterAffinity", "Filter", "Unschedulable"),
        ("ClusterLocality", "Score", "Success"),
        ("ClusterAffinity", "ScoreExtensionNormalize", "Success"),
    ] {
        let n = sum(
            &samples,
            plugins,
            &[
                ("plugin", plugin),
                ("extension_point", point),
                ("result", result),
            ],
        );
        assert!(n >= 1.0, "{plugin} at {point} with {result}: {n}");
    }
    assert_bounds(&samples, e2e, &exponential(0.001, 2.0, 15));
    assert_bounds(
        &samples,
        "karmada_scheduler_scheduling_algorithm_duration_seconds",
        &exponential(0.001, 2.0, 15),
    );
    assert_bounds(
        &samples,
        "karmada_scheduler_framework_extension_point_duration_seconds",
        &exponential(0.0001, 2.0, 12),
    );
    assert_bounds(
        &samples,
        "karmada_scheduler_plugin_execution_duration_seconds",
        &exponential(0.00001, 1.5, 20),
    );
}
