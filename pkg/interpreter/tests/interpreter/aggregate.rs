//! AggregateStatus.

use karmada_apis::work::v1alpha2::AggregatedStatusItem;
use serde_json::{Value, json};

use crate::{NOW, interpreter, item};

fn template(api_version: &str, kind: &str, generation: i64, extra: Value) -> Value {
    let mut o = json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": "t", "namespace": "n", "generation": generation}});
    if let (Value::Object(map), Value::Object(extra)) = (&mut o, extra) {
        map.extend(extra);
    }
    o
}

fn aggregate(t: &Value, items: &[AggregatedStatusItem]) -> Option<Value> {
    interpreter().aggregate_status(t, items).unwrap()
}

fn member_deploy(replicas: i64, ready: i64, og: i64, generation: i64, rtg: i64) -> Option<Value> {
    Some(
        json!({"replicas": replicas, "readyReplicas": ready, "updatedReplicas": replicas,
        "availableReplicas": ready, "unavailableReplicas": replicas - ready,
        "observedGeneration": og, "generation": generation, "resourceTemplateGeneration": rtg}),
    )
}

#[test]
fn deployment_sums_counters_and_keeps_other_status_fields() {
    let t = template(
        "apps/v1",
        "Deployment",
        2,
        json!({"status": {"conditions": [{"type": "Available"}]}}),
    );
    let items = [
        item("m1", member_deploy(2, 2, 1, 1, 2)),
        item("m2", member_deploy(1, 0, 3, 3, 2)),
    ];
    assert_eq!(
        aggregate(&t, &items),
        Some(
            json!({"conditions": [{"type": "Available"}], "observedGeneration": 2, "replicas": 3,
            "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2, "unavailableReplicas": 1})
        )
    );
}

#[test]
fn deployment_observed_generation_moves_only_when_every_member_caught_up() {
    let base = json!({"status": {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3,
        "updatedReplicas": 3, "availableReplicas": 3}});
    let t = template("apps/v1", "Deployment", 2, base);
    // m2 still runs a manifest of template generation 1.
    let lagging = [
        item("m1", member_deploy(2, 2, 4, 4, 2)),
        item("m2", member_deploy(1, 1, 4, 4, 1)),
    ];
    assert_eq!(
        aggregate(&t, &lagging),
        None,
        "counters equal and generation held back: no change"
    );
    // m2's controller has not observed its own latest spec.
    let unobserved = [
        item("m1", member_deploy(2, 2, 4, 4, 2)),
        item("m2", member_deploy(1, 1, 3, 4, 2)),
    ];
    assert_eq!(aggregate(&t, &unobserved), None);
    // A member without status yet also holds it back.
    let missing = [item("m1", member_deploy(3, 3, 4, 4, 2)), item("m2", None)];
    assert_eq!(aggregate(&t, &missing), None);
    let all = [
        item("m1", member_deploy(2, 2, 4, 4, 2)),
        item("m2", member_deploy(1, 1, 5, 5, 3)),
    ];
    assert_eq!(aggregate(&t, &all).unwrap()["observedGeneration"], json!(2));
}

#[test]
fn deployment_without_members_reports_zero_at_current_generation() {
    let t = template(
        "apps/v1",
        "Deployment",
        3,
        json!({"status": {"replicas": 2, "observedGeneration": 2}}),
    );
    assert_eq!(aggregate(&t, &[]), Some(json!({"observedGeneration": 3})));
}

#[test]
fn unchanged_status_yields_none_property() {
    // Aggregating twice, with the first result written back, never asks for a second write.
    let mut seed = 7_u64;
    let mut next = |m: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % m
    };
    for kind in ["Deployment", "StatefulSet", "ReplicaSet", "DaemonSet"] {
        for _ in 0..50 {
            let items: Vec<_> = (0..next(4))
                .map(|i| {
                    let mut status = serde_json::Map::new();
                    for field in [
                        "replicas",
                        "readyReplicas",
                        "updatedReplicas",
                        "availableReplicas",
                        "currentReplicas",
                        "currentNumberScheduled",
                        "desiredNumberScheduled",
                        "numberReady",
                        "numberAvailable",
                        "updatedNumberScheduled",
                        "numberMisscheduled",
                        "numberUnavailable",
                    ] {
                        status.insert(field.into(), json!(next(5)));
                    }
                    status.insert("observedGeneration".into(), json!(next(3)));
                    status.insert("generation".into(), json!(next(3)));
                    status.insert("resourceTemplateGeneration".into(), json!(next(3)));
                    item(
                        &format!("m{i}"),
                        (next(5) > 0).then_some(Value::Object(status)),
                    )
                })
                .collect();
            let mut t = template("apps/v1", kind, 1 + next(2) as i64, json!({}));
            if let Some(status) = aggregate(&t, &items) {
                t["status"] = status;
            }
            assert_eq!(aggregate(&t, &items), None, "{kind} {items:?}");
        }
    }
}

#[test]
fn statefulset_replicaset_daemonset_sum_their_counters() {
    let sts = template("apps/v1", "StatefulSet", 1, json!({}));
    let m = |r: i64| {
        Some(
            json!({"replicas": r, "readyReplicas": r, "currentReplicas": r, "updatedReplicas": r,
        "availableReplicas": r, "observedGeneration": 1, "generation": 1, "resourceTemplateGeneration": 1}),
        )
    };
    assert_eq!(
        aggregate(&sts, &[item("a", m(1)), item("b", m(2))]),
        Some(
            json!({"observedGeneration": 1, "availableReplicas": 3, "currentReplicas": 3, "readyReplicas": 3,
            "replicas": 3, "updatedReplicas": 3})
        )
    );
    let rs = template("apps/v1", "ReplicaSet", 1, json!({}));
    assert_eq!(
        aggregate(&rs, &[item("a", m(1)), item("b", m(2))]),
        Some(
            json!({"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "availableReplicas": 3})
        )
    );
    let ds = template("apps/v1", "DaemonSet", 1, json!({}));
    let d = |n: i64| {
        Some(
            json!({"currentNumberScheduled": n, "desiredNumberScheduled": n, "numberReady": n,
        "numberAvailable": n, "updatedNumberScheduled": n, "numberMisscheduled": 0, "numberUnavailable": 0,
        "observedGeneration": 1, "generation": 1, "resourceTemplateGeneration": 1}),
        )
    };
    assert_eq!(
        aggregate(&ds, &[item("a", d(2)), item("b", d(3))]),
        Some(
            json!({"observedGeneration": 1, "currentNumberScheduled": 5, "desiredNumberScheduled": 5,
            "numberAvailable": 5, "numberMisscheduled": 0, "numberReady": 5, "updatedNumberScheduled": 5})
        )
    );
}

fn job_status(
    active: i64,
    succeeded: i64,
    condition: Option<&str>,
    start: Option<&str>,
    done: Option<&str>,
) -> Option<Value> {
    let mut s = json!({"active": active, "succeeded": succeeded});
    if let Some(c) = condition {
        s["conditions"] = json!([{"type": c, "status": "True"}]);
    }
    if let Some(t) = start {
        s["startTime"] = json!(t);
    }
    if let Some(t) = done {
        s["completionTime"] = json!(t);
    }
    Some(s)
}

#[test]
fn job_sums_counts_and_reports_completion_when_every_member_completed() {
    let t = template("batch/v1", "Job", 1, json!({}));
    let running = [
        item(
            "a",
            job_status(1, 2, None, Some("2026-01-01T00:00:10Z"), None),
        ),
        item(
            "b",
            job_status(
                0,
                3,
                Some("Complete"),
                Some("2026-01-01T00:00:05Z"),
                Some("2026-01-01T00:01:00Z"),
            ),
        ),
    ];
    assert_eq!(
        aggregate(&t, &running),
        Some(json!({"active": 1, "succeeded": 5, "startTime": "2026-01-01T00:00:05Z"}))
    );
    let done = [
        item(
            "a",
            job_status(
                0,
                3,
                Some("Complete"),
                Some("2026-01-01T00:00:10Z"),
                Some("2026-01-01T00:02:00Z"),
            ),
        ),
        item(
            "b",
            job_status(
                0,
                3,
                Some("Complete"),
                Some("2026-01-01T00:00:05Z"),
                Some("2026-01-01T00:01:00Z"),
            ),
        ),
    ];
    let status = aggregate(&t, &done).unwrap();
    assert_eq!(status["succeeded"], json!(6));
    assert_eq!(status["completionTime"], json!("2026-01-01T00:02:00Z"));
    assert_eq!(
        status["conditions"],
        json!([{"type": "Complete", "status": "True", "reason": "Completed",
        "message": "Job completed", "lastProbeTime": NOW, "lastTransitionTime": NOW}])
    );

    // Once finished, the template's status is never touched again.
    let finished = template("batch/v1", "Job", 1, json!({"status": status}));
    assert_eq!(aggregate(&finished, &running), None);
}

#[test]
fn job_failure_names_the_clusters_and_success_criteria_need_every_member() {
    let t = template("batch/v1", "Job", 1, json!({}));
    let failed = [
        item("a", job_status(0, 0, Some("Failed"), None, None)),
        item("b", job_status(1, 0, None, None, None)),
        item("c", job_status(0, 0, Some("Failed"), None, None)),
    ];
    let status = aggregate(&t, &failed).unwrap();
    assert_eq!(status["conditions"][0]["type"], json!("Failed"));
    assert_eq!(status["conditions"][0]["reason"], json!("JobFailed"));
    assert_eq!(
        status["conditions"][0]["message"],
        json!("Job executed failed in member clusters a,c")
    );

    let criteria = |met: bool| {
        let mut s = job_status(0, 1, Some("Complete"), None, None).unwrap();
        if met {
            s["conditions"]
                .as_array_mut()
                .unwrap()
                .push(json!({"type": "SuccessCriteriaMet", "status": "True"}));
        }
        Some(s)
    };
    let all = aggregate(&t, &[item("a", criteria(true)), item("b", criteria(true))]).unwrap();
    assert_eq!(all["conditions"][1]["type"], json!("SuccessCriteriaMet"));
    assert_eq!(all["conditions"][1]["reason"], json!("CompletionsReached"));
    let some = aggregate(&t, &[item("a", criteria(true)), item("b", criteria(false))]).unwrap();
    assert_eq!(some["conditions"].as_array().unwrap().len(), 1);
}

#[test]
fn job_start_time_waits_for_every_member_and_is_kept_once_set() {
    let t = template("batch/v1", "Job", 1, json!({}));
    let partial = [
        item(
            "a",
            job_status(1, 0, None, Some("2026-01-01T00:00:10Z"), None),
        ),
        item("b", None),
    ];
    assert_eq!(aggregate(&t, &partial), Some(json!({"active": 1})));
    let kept = template(
        "batch/v1",
        "Job",
        1,
        json!({"status": {"startTime": "2025-12-31T00:00:00Z", "active": 1}}),
    );
    let both = [
        item(
            "a",
            job_status(1, 0, None, Some("2026-01-01T00:00:10Z"), None),
        ),
        item(
            "b",
            job_status(0, 0, None, Some("2026-01-01T00:00:05Z"), None),
        ),
    ];
    assert_eq!(aggregate(&kept, &both), None);
}

#[test]
fn cron_job_lists_active_jobs_and_latest_times() {
    let t = template("batch/v1", "CronJob", 1, json!({"status": {}}));
    let items = [
        item(
            "a",
            Some(json!({"active": [{"name": "j1"}], "lastScheduleTime": "2026-01-01T00:00:00Z"})),
        ),
        item(
            "b",
            Some(
                json!({"active": [{"name": "j2"}], "lastScheduleTime": "2026-01-01T01:00:00Z",
            "lastSuccessfulTime": "2026-01-01T00:30:00Z"}),
            ),
        ),
    ];
    let status = aggregate(&t, &items).unwrap();
    assert_eq!(
        status,
        json!({"active": [{"name": "j1"}, {"name": "j2"}],
        "lastScheduleTime": "2026-01-01T01:00:00Z", "lastSuccessfulTime": "2026-01-01T00:30:00Z"})
    );
    let written = template("batch/v1", "CronJob", 1, json!({"status": status}));
    assert_eq!(aggregate(&written, &items), None);
}

#[test]
fn service_merges_load_balancer_ingress() {
    let t = template(
        "v1",
        "Service",
        1,
        json!({"spec": {"type": "LoadBalancer"}}),
    );
    let items = [
        item(
            "a",
            Some(json!({"loadBalancer": {"ingress": [
            {"ip": "2.2.2.2", "ports": [{"port": 80, "protocol": "TCP"}]},
            {"hostname": "b.example"}]}})),
        ),
        item(
            "b",
            Some(json!({"loadBalancer": {"ingress": [
            {"ip": "2.2.2.2", "ports": [{"port": 443, "protocol": "TCP"}, {"port": 80, "protocol": "TCP"}]},
            {"ip": "1.1.1.1", "ipMode": "VIP"}, {"hostname": "a.example"}]}})),
        ),
        item("c", None),
    ];
    let status = aggregate(&t, &items).unwrap();
    assert_eq!(
        status,
        json!({"loadBalancer": {"ingress": [
            {"hostname": "a.example"},
            {"hostname": "b.example"},
            {"ip": "1.1.1.1", "ipMode": "VIP"},
            {"ip": "2.2.2.2", "ports": [{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}]}
        ]}})
    );
    let written = template(
        "v1",
        "Service",
        1,
        json!({"spec": {"type": "LoadBalancer"}, "status": status}),
    );
    assert_eq!(aggregate(&written, &items), None);

    let cluster_ip = template("v1", "Service", 1, json!({"spec": {"type": "ClusterIP"}}));
    assert_eq!(aggregate(&cluster_ip, &items), None);
    let no_points = template(
        "v1",
        "Service",
        1,
        json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {}}}),
    );
    assert_eq!(
        aggregate(&no_points, &[item("a", Some(json!({"loadBalancer": {}})))]),
        None
    );
}

#[test]
fn ingress_merges_load_balancer_ingress() {
    let t = template("networking.k8s.io/v1", "Ingress", 1, json!({}));
    let items = [
        item(
            "a",
            Some(json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.2"}]}})),
        ),
        item(
            "b",
            Some(json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]}})),
        ),
    ];
    assert_eq!(
        aggregate(&t, &items),
        Some(json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]}}))
    );
}

#[test]
fn pod_phase_and_container_states() {
    let t = template("v1", "Pod", 1, json!({}));
    let running = |ready: bool| {
        Some(json!({"phase": "Running", "containerStatuses": [
        {"name": "c", "ready": ready, "restartCount": 2, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}))
    };
    let status = aggregate(&t, &[item("a", running(true)), item("b", running(false))]).unwrap();
    assert_eq!(
        status,
        json!({"phase": "Running", "containerStatuses": [
        {"ready": true, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}},
        {"ready": false, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]})
    );
    let phase = |items: &[AggregatedStatusItem]| aggregate(&t, items).unwrap()["phase"].clone();
    assert_eq!(
        phase(&[item("a", running(true)), item("b", None)]),
        json!("Pending")
    );
    assert_eq!(
        phase(&[item("a", Some(json!({"phase": "Failed"}))), item("b", None)]),
        json!("Failed")
    );
    assert_eq!(
        phase(&[
            item("a", Some(json!({"phase": "Succeeded"}))),
            item("b", running(true))
        ]),
        json!("Running")
    );
    assert_eq!(
        phase(&[item("a", Some(json!({"phase": "Succeeded"})))]),
        json!("Succeeded")
    );
    assert_eq!(aggregate(&t, &[]), None);
}

#[test]
fn volumes_pick_the_most_telling_phase() {
    let pv = template("v1", "PersistentVolume", 1, json!({}));
    let phase = |items: &[AggregatedStatusItem]| aggregate(&pv, items).map(|s| s["phase"].clone());
    let p = |s: &str| Some(json!({"phase": s}));
    assert_eq!(
        phase(&[item("a", p("Bound")), item("b", p("Available"))]),
        Some(json!("Available"))
    );
    assert_eq!(
        phase(&[item("a", p("Bound")), item("b", None)]),
        Some(json!("Pending"))
    );
    assert_eq!(
        phase(&[item("a", p("Released")), item("b", p("Failed"))]),
        Some(json!("Failed"))
    );

    let pvc = template(
        "v1",
        "PersistentVolumeClaim",
        1,
        json!({"status": {"phase": "Bound"}}),
    );
    assert_eq!(
        aggregate(&pvc, &[item("a", p("Bound")), item("b", None)]),
        None
    );
    assert_eq!(
        aggregate(&pvc, &[item("a", p("Pending")), item("b", p("Bound"))]),
        Some(json!({"phase": "Pending"}))
    );
    assert_eq!(
        aggregate(&pvc, &[item("a", p("Lost")), item("b", p("Pending"))]),
        Some(json!({"phase": "Lost"}))
    );
}

#[test]
fn pdb_and_hpa_sum_their_counters() {
    let pdb = template("policy/v1", "PodDisruptionBudget", 1, json!({}));
    let m = |n: i64, pod: &str| {
        Some(
            json!({"currentHealthy": n, "desiredHealthy": n, "expectedPods": n,
        "disruptionsAllowed": 0, "disruptedPods": {pod: "2026-01-01T00:00:00Z"}}),
        )
    };
    assert_eq!(
        aggregate(&pdb, &[item("a", m(1, "p1")), item("b", m(2, "p2"))]),
        Some(
            json!({"currentHealthy": 3, "desiredHealthy": 3, "expectedPods": 3, "disruptionsAllowed": 0,
            "disruptedPods": {"a/p1": "2026-01-01T00:00:00Z", "b/p2": "2026-01-01T00:00:00Z"}})
        )
    );
    let hpa = template("autoscaling/v2", "HorizontalPodAutoscaler", 1, json!({}));
    let h = |c: i64, d: i64| Some(json!({"currentReplicas": c, "desiredReplicas": d}));
    assert_eq!(
        aggregate(&hpa, &[item("a", h(1, 2)), item("b", h(2, 2))]),
        Some(json!({"currentReplicas": 3, "desiredReplicas": 4}))
    );
}

#[test]
fn kinds_without_a_rule_are_not_aggregated() {
    let cm = template("v1", "ConfigMap", 1, json!({}));
    assert_eq!(aggregate(&cm, &[item("a", Some(json!({"x": 1})))]), None);
}

#[test]
fn malformed_member_status_names_the_cluster() {
    let t = template("apps/v1", "Deployment", 1, json!({}));
    let err = interpreter()
        .aggregate_status(&t, &[item("m1", Some(json!({"replicas": "x"})))])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Deployment n/t: status reported by cluster \"m1\": field `replicas` must be an integer"
    );
    let err = interpreter()
        .aggregate_status(&t, &[item("m2", Some(json!([1])))])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Deployment n/t: status reported by cluster \"m2\": field `status` must be an object"
    );
    let job = template("batch/v1", "Job", 1, json!({}));
    let err = interpreter()
        .aggregate_status(&job, &[item("m3", Some(json!({"startTime": "yesterday"})))])
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Job n/t: status reported by cluster \"m3\": field `startTime`"),
        "{err}"
    );
}
