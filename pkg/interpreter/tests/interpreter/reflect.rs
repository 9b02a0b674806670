//! ReflectStatus.

use serde_json::{Value, json};

use crate::interpreter;

fn object(api_version: &str, kind: &str, extra: Value) -> Value {
    let mut o = json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": "o", "namespace": "n", "generation": 3,
            "annotations": {"resourcetemplate.karmada.io/generation": "5"}}});
    if let (Value::Object(map), Value::Object(extra)) = (&mut o, extra) {
        map.extend(extra);
    }
    o
}

fn reflect(o: &Value) -> Option<Value> {
    interpreter().reflect_status(o).unwrap()
}

#[test]
fn deployment_carries_counters_and_generations() {
    let d = object(
        "apps/v1",
        "Deployment",
        json!({"status": {
        "replicas": 3, "updatedReplicas": 3, "readyReplicas": 2, "availableReplicas": 2,
        "unavailableReplicas": 1, "observedGeneration": 3, "conditions": [{"type": "Available"}]}}),
    );
    assert_eq!(
        reflect(&d),
        Some(
            json!({"generation": 3, "resourceTemplateGeneration": 5, "replicas": 3, "updatedReplicas": 3,
            "readyReplicas": 2, "availableReplicas": 2, "unavailableReplicas": 1, "observedGeneration": 3})
        )
    );
    // Zero counters are omitted as Go does.
    let fresh = object("apps/v1", "Deployment", json!({"status": {"replicas": 0}}));
    assert_eq!(
        reflect(&fresh),
        Some(json!({"generation": 3, "resourceTemplateGeneration": 5}))
    );
    // No status yet: nothing to report.
    assert_eq!(reflect(&object("apps/v1", "Deployment", json!({}))), None);
    // A status with nothing in it and no generations is "not collected yet".
    let empty = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "o"}, "status": {}});
    assert_eq!(reflect(&empty), None);
}

#[test]
fn missing_template_generation_counts_as_zero_and_garbage_is_an_error() {
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "o", "generation": 1},
        "status": {"replicas": 1}});
    assert_eq!(reflect(&d), Some(json!({"generation": 1, "replicas": 1})));
    let bad = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "o", "annotations": {"resourcetemplate.karmada.io/generation": "x"}},
        "status": {"replicas": 1}});
    let err = interpreter().reflect_status(&bad).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Deployment o: annotation resourcetemplate.karmada.io/generation = \"x\" is not an integer"
    );
}

#[test]
fn statefulset_replicaset_daemonset_shapes() {
    let sts = object(
        "apps/v1",
        "StatefulSet",
        json!({"status": {
        "replicas": 2, "readyReplicas": 2, "currentReplicas": 2, "updatedReplicas": 2, "availableReplicas": 2,
        "observedGeneration": 3, "currentRevision": "r1"}}),
    );
    assert_eq!(
        reflect(&sts),
        Some(
            json!({"generation": 3, "resourceTemplateGeneration": 5, "replicas": 2,
        "readyReplicas": 2, "currentReplicas": 2, "updatedReplicas": 2, "availableReplicas": 2, "observedGeneration": 3})
        )
    );
    let sts_zero = object("apps/v1", "StatefulSet", json!({"status": {"replicas": 0}}));
    assert_eq!(
        reflect(&sts_zero),
        Some(
            json!({"generation": 3, "resourceTemplateGeneration": 5, "replicas": 0, "availableReplicas": 0})
        )
    );

    let rs = object(
        "apps/v1",
        "ReplicaSet",
        json!({"status": {"replicas": 0, "fullyLabeledReplicas": 0}}),
    );
    assert_eq!(
        reflect(&rs),
        Some(json!({"generation": 3, "resourceTemplateGeneration": 5, "replicas": 0}))
    );

    let ds = object(
        "apps/v1",
        "DaemonSet",
        json!({"status": {"currentNumberScheduled": 2, "desiredNumberScheduled": 2,
        "numberReady": 1, "numberAvailable": 1, "numberUnavailable": 1, "updatedNumberScheduled": 2, "observedGeneration": 3}}),
    );
    assert_eq!(
        reflect(&ds),
        Some(json!({"generation": 3, "resourceTemplateGeneration": 5,
        "currentNumberScheduled": 2, "numberMisscheduled": 0, "desiredNumberScheduled": 2, "numberReady": 1,
        "observedGeneration": 3, "updatedNumberScheduled": 2, "numberAvailable": 1, "numberUnavailable": 1}))
    );
}

#[test]
fn service_reports_only_load_balancers() {
    let lb = |status: Value| {
        object(
            "v1",
            "Service",
            json!({"spec": {"type": "LoadBalancer"}, "status": status}),
        )
    };
    assert_eq!(
        reflect(&lb(
            json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}, "conditions": []})
        )),
        Some(json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}))
    );
    assert_eq!(reflect(&lb(json!({}))), Some(json!({"loadBalancer": {}})));
    let cluster_ip = object(
        "v1",
        "Service",
        json!({"spec": {"type": "ClusterIP"}, "status": {"loadBalancer": {}}}),
    );
    assert_eq!(reflect(&cluster_ip), None);
    assert_eq!(
        reflect(&object("v1", "Service", json!({"status": {}}))),
        None
    );
}

#[test]
fn job_pdb_hpa_pick_their_fields() {
    let job = object(
        "batch/v1",
        "Job",
        json!({"status": {"active": 1, "succeeded": 2, "failed": 0, "ready": 1,
        "startTime": "2026-01-01T00:00:00Z", "conditions": [{"type": "Complete", "status": "True"}],
        "uncountedTerminatedPods": {}}}),
    );
    assert_eq!(
        reflect(&job),
        Some(
            json!({"active": 1, "succeeded": 2, "startTime": "2026-01-01T00:00:00Z",
        "conditions": [{"type": "Complete", "status": "True"}]})
        )
    );

    let pdb = object(
        "policy/v1",
        "PodDisruptionBudget",
        json!({"status": {"currentHealthy": 2, "desiredHealthy": 1,
        "disruptionsAllowed": 1, "expectedPods": 2, "observedGeneration": 3,
        "disruptedPods": {"p1": "2026-01-01T00:00:00Z"}}}),
    );
    assert_eq!(
        reflect(&pdb),
        Some(
            json!({"currentHealthy": 2, "desiredHealthy": 1, "disruptionsAllowed": 1,
        "expectedPods": 2, "disruptedPods": {"p1": "2026-01-01T00:00:00Z"}})
        )
    );

    let hpa = object(
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        json!({"status": {"currentReplicas": 0,
        "desiredReplicas": 0, "currentMetrics": []}}),
    );
    assert_eq!(reflect(&hpa), Some(json!({"desiredReplicas": 0})));
}

#[test]
fn other_kinds_and_ingress_reflect_the_whole_status() {
    let status = json!({"phase": "Bound", "capacity": {"storage": "1Gi"}});
    assert_eq!(
        reflect(&object(
            "v1",
            "PersistentVolumeClaim",
            json!({"status": status.clone()})
        )),
        Some(status)
    );
    let ing = json!({"loadBalancer": {"ingress": [{"hostname": "a.example"}]}});
    assert_eq!(
        reflect(&object(
            "networking.k8s.io/v1",
            "Ingress",
            json!({"status": ing.clone()})
        )),
        Some(ing)
    );
    assert_eq!(reflect(&object("example.io/v1", "Widget", json!({}))), None);
}

#[test]
fn malformed_status_is_an_error() {
    let bad = object("example.io/v1", "Widget", json!({"status": "broken"}));
    assert!(interpreter().reflect_status(&bad).is_err());
    let bad_counter = object(
        "apps/v1",
        "Deployment",
        json!({"status": {"replicas": "three"}}),
    );
    assert_eq!(
        interpreter()
            .reflect_status(&bad_counter)
            .unwrap_err()
            .to_string(),
        "Deployment n/o: field `status.replicas` must be an integer"
    );
}
