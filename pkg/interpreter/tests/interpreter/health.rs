//! InterpretHealth.

use karmada_apis::work::v1alpha1::ResourceHealth::{self, Healthy, Unhealthy, Unknown};
use serde_json::{Value, json};

use crate::interpreter;

fn health(o: &Value) -> ResourceHealth {
    interpreter().interpret_health(o)
}

fn workload(kind: &str, generation: i64, replicas: Option<i64>, status: Value) -> Value {
    let mut spec = json!({});
    if let Some(r) = replicas {
        spec["replicas"] = json!(r);
    }
    json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "w", "generation": generation},
        "spec": spec, "status": status})
}

#[test]
fn deployment_and_statefulset_need_a_complete_rollout() {
    for kind in ["Deployment", "StatefulSet"] {
        let ok = json!({"observedGeneration": 2, "updatedReplicas": 3, "availableReplicas": 3});
        assert_eq!(
            health(&workload(kind, 2, Some(3), ok.clone())),
            Healthy,
            "{kind}"
        );
        assert_eq!(
            health(&workload(kind, 3, Some(3), ok)),
            Unhealthy,
            "{kind}: stale generation"
        );
        let behind = json!({"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 2});
        assert_eq!(
            health(&workload(kind, 2, Some(3), behind)),
            Unhealthy,
            "{kind}: not updated"
        );
        let unavailable =
            json!({"observedGeneration": 2, "updatedReplicas": 3, "availableReplicas": 1});
        assert_eq!(
            health(&workload(kind, 2, Some(3), unavailable)),
            Unhealthy,
            "{kind}: not available"
        );
        let unset = json!({"observedGeneration": 2, "updatedReplicas": 1, "availableReplicas": 1});
        assert_eq!(
            health(&workload(kind, 2, None, unset)),
            Healthy,
            "{kind}: replicas unset"
        );
    }
}

#[test]
fn replicaset_needs_every_replica_available() {
    let ok = json!({"observedGeneration": 1, "availableReplicas": 2});
    assert_eq!(health(&workload("ReplicaSet", 1, Some(2), ok)), Healthy);
    let short = json!({"observedGeneration": 1, "availableReplicas": 1});
    assert_eq!(
        health(&workload("ReplicaSet", 1, Some(2), short)),
        Unhealthy
    );
    assert_eq!(
        health(&workload(
            "ReplicaSet",
            2,
            Some(0),
            json!({"observedGeneration": 1})
        )),
        Unhealthy
    );
}

#[test]
fn daemonset_needs_every_node_updated_and_available() {
    let ds = |status: Value| workload("DaemonSet", 4, None, status);
    assert_eq!(
        health(&ds(
            json!({"observedGeneration": 4, "desiredNumberScheduled": 3,
        "updatedNumberScheduled": 3, "numberAvailable": 3})
        )),
        Healthy
    );
    assert_eq!(
        health(&ds(
            json!({"observedGeneration": 4, "desiredNumberScheduled": 3,
        "updatedNumberScheduled": 2, "numberAvailable": 3})
        )),
        Unhealthy
    );
    assert_eq!(
        health(&ds(
            json!({"observedGeneration": 4, "desiredNumberScheduled": 3,
        "updatedNumberScheduled": 3, "numberAvailable": 2})
        )),
        Unhealthy
    );
    assert_eq!(health(&ds(json!({"observedGeneration": 3}))), Unhealthy);
}

#[test]
fn services_and_ingresses_need_a_load_balancer_address() {
    let svc = |kind: &str, status: Value| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"type": kind}, "status": status})
    };
    assert_eq!(health(&svc("ClusterIP", json!({}))), Healthy);
    assert_eq!(
        health(&svc("LoadBalancer", json!({"loadBalancer": {}}))),
        Unhealthy
    );
    assert_eq!(
        health(&svc(
            "LoadBalancer",
            json!({"loadBalancer": {"ingress": [{"ip": ""}]}})
        )),
        Unhealthy
    );
    assert_eq!(
        health(&svc(
            "LoadBalancer",
            json!({"loadBalancer": {"ingress": [{"hostname": "lb.example"}]}})
        )),
        Healthy
    );
    let ing = |status: Value| json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i"}, "status": status});
    assert_eq!(health(&ing(json!({}))), Unhealthy);
    assert_eq!(
        health(&ing(
            json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}})
        )),
        Healthy
    );
}

#[test]
fn pvc_pod_and_pdb() {
    let pvc = |phase: &str| json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "status": {"phase": phase}});
    assert_eq!(health(&pvc("Bound")), Healthy);
    assert_eq!(health(&pvc("Pending")), Unhealthy);

    let pod = |phase: &str, ready: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "status": {"phase": phase, "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": ready}]}})
    };
    assert_eq!(health(&pod("Succeeded", "False")), Healthy);
    assert_eq!(health(&pod("Running", "True")), Healthy);
    assert_eq!(health(&pod("Running", "False")), Unhealthy);
    assert_eq!(health(&pod("Pending", "True")), Unhealthy);

    let pdb = |current: i64, desired: i64| {
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "b"}, "status": {"currentHealthy": current, "desiredHealthy": desired}})
    };
    assert_eq!(health(&pdb(2, 2)), Healthy);
    assert_eq!(health(&pdb(1, 2)), Unhealthy);
}

#[test]
fn kinds_without_a_rule_are_healthy_and_malformed_objects_unknown() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert_eq!(health(&cm), Healthy);
    assert_eq!(interpreter().try_interpret_health(&cm).unwrap(), None);
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "status": {"failed": 3}});
    assert_eq!(health(&job), Healthy);

    let bad = workload(
        "Deployment",
        1,
        Some(1),
        json!({"observedGeneration": 1, "updatedReplicas": "all"}),
    );
    assert_eq!(health(&bad), Unknown);
    let err = interpreter().try_interpret_health(&bad).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Deployment w: field `status.updatedReplicas` must be an integer"
    );
    assert_eq!(health(&json!("not an object")), Unknown);
    let bad_conditions = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "status": {"phase": "Running", "conditions": "Ready"}});
    assert_eq!(health(&bad_conditions), Unknown);
}
