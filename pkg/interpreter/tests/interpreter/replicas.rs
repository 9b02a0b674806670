//! InterpretReplica and ReviseReplica.

use karmada_interpreter::{GroupKind, InterpreterOptions, Operation};
use serde_json::{Value, json};

use crate::{interpreter, interpreter_with};

fn workload(api_version: &str, kind: &str, spec: Value) -> Value {
    json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"namespace": "default", "name": "web", "uid": "u-1"}, "spec": spec})
}

fn pod_template(pod_spec: Value) -> Value {
    json!({"metadata": {"labels": {"app": "web"}}, "spec": pod_spec})
}

fn requesting(cpu: &str, memory: &str) -> Value {
    json!({"containers": [{"name": "c", "image": "nginx",
        "resources": {"requests": {"cpu": cpu, "memory": memory}}}]})
}

fn requirements_json(object: &Value) -> Value {
    let replicas = interpreter().get_replicas(object).unwrap().unwrap();
    serde_json::to_value(replicas.requirements).unwrap()
}

#[test]
fn deployment_statefulset_replicaset_read_replicas_and_pod_template() {
    for (api_version, kind) in [
        ("apps/v1", "Deployment"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "ReplicaSet"),
    ] {
        let object = workload(
            api_version,
            kind,
            json!({"replicas": 3, "template": pod_template(requesting("250m", "64Mi"))}),
        );
        let replicas = interpreter().get_replicas(&object).unwrap().unwrap();
        assert_eq!(replicas.replicas, 3, "{kind}");
        assert_eq!(
            serde_json::to_value(&replicas.requirements).unwrap(),
            json!({"resourceRequest": {"cpu": "250m", "memory": "64Mi"}}),
            "{kind}"
        );
    }
}

#[test]
fn unset_replicas_count_as_zero_and_empty_pods_have_no_requirements() {
    let object = workload(
        "apps/v1",
        "Deployment",
        json!({"template": pod_template(json!({"containers": [{"name": "c"}]}))}),
    );
    let replicas = interpreter().get_replicas(&object).unwrap().unwrap();
    assert_eq!(replicas.replicas, 0);
    assert_eq!(replicas.requirements, None);
}

#[test]
fn requirements_wire_shape_matches_karmada() {
    let object = workload(
        "apps/v1",
        "Deployment",
        json!({"replicas": 2, "template": pod_template(json!({
            "nodeSelector": {"disktype": "ssd"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]
            }}},
            "priorityClassName": "high",
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                {"name": "b", "resources": {"limits": {"cpu": "500m", "nvidia.com/gpu": "2"}}}
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3", "ephemeral-storage": "1Gi"}}}]
        }))}),
    );
    assert_eq!(
        requirements_json(&object),
        json!({
            "nodeClaim": {
                "hardNodeAffinity": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["z1"]}]}]},
                "nodeSelector": {"disktype": "ssd"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
            },
            "resourceRequest": {"cpu": "3", "ephemeral-storage": "1Gi", "memory": "1Gi", "nvidia.com/gpu": "2"}
        })
    );
}

#[test]
fn quota_estimate_option_adds_namespace_and_priority_class() {
    let object = workload(
        "apps/v1",
        "Deployment",
        json!({"replicas": 1, "template": pod_template(json!({
            "priorityClassName": "high",
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]
        }))}),
    );
    let on = interpreter_with(InterpreterOptions {
        resource_quota_estimate: true,
    });
    let requirements = on
        .get_replicas(&object)
        .unwrap()
        .unwrap()
        .requirements
        .unwrap();
    assert_eq!(requirements.namespace, "default");
    assert_eq!(requirements.priority_class_name, "high");
    let off = interpreter()
        .get_replicas(&object)
        .unwrap()
        .unwrap()
        .requirements
        .unwrap();
    assert_eq!(off.namespace, "");
    assert_eq!(off.priority_class_name, "");
}

#[test]
fn job_replicas_are_parallelism_capped_by_completions() {
    let job = |spec: Value| workload("batch/v1", "Job", spec);
    let cases = [
        (json!({"parallelism": 5, "completions": 3}), 3),
        (json!({"parallelism": 2, "completions": 10}), 2),
        (json!({"parallelism": 4}), 4),
        (json!({"completions": 4}), 0),
        (json!({}), 0),
    ];
    for (spec, expected) in cases {
        let replicas = interpreter()
            .get_replicas(&job(spec.clone()))
            .unwrap()
            .unwrap();
        assert_eq!(replicas.replicas, expected, "{spec}");
    }
}

#[test]
fn pod_is_one_replica_with_its_own_spec() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"},
        "spec": requesting("100m", "10Mi")});
    let replicas = interpreter().get_replicas(&pod).unwrap().unwrap();
    assert_eq!(replicas.replicas, 1);
    assert_eq!(
        serde_json::to_value(replicas.requirements).unwrap(),
        json!({"resourceRequest": {"cpu": "100m", "memory": "10Mi"}})
    );
}

#[test]
fn kinds_without_a_replica_rule_have_none() {
    for object in [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}}),
        json!({"apiVersion": "example.io/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {"replicas": 3}}),
    ] {
        assert_eq!(
            interpreter().get_replicas(&object).unwrap(),
            None,
            "{object}"
        );
    }
}

#[test]
fn malformed_workloads_are_errors_naming_the_object() {
    let cases = [
        (
            workload("apps/v1", "Deployment", json!({"replicas": "3"})),
            "Deployment default/web: field `spec.replicas` must be an integer",
        ),
        (
            workload(
                "apps/v1",
                "Deployment",
                json!({"replicas": 1, "template": {"spec": []}}),
            ),
            "Deployment default/web: field `spec.template.spec` must be an object",
        ),
        (
            workload(
                "apps/v1",
                "Deployment",
                json!({"replicas": 1, "template": pod_template(requesting("x1", "1"))}),
            ),
            "Deployment default/web: field `spec.template.spec.containers[0].resources.requests.cpu`: invalid quantity \"x1\": no digits",
        ),
        (
            workload("batch/v1", "Job", json!({"parallelism": 3_000_000_000_i64})),
            "Job default/web: field `spec.parallelism` must be a 32-bit integer",
        ),
        (
            json!([1, 2]),
            "object <unnamed>: manifest is not a JSON object",
        ),
        (
            json!({"kind": "Deployment", "metadata": {"name": "a"}}),
            "Deployment a: field `apiVersion` is missing",
        ),
    ];
    for (object, message) in cases {
        let err = interpreter().get_replicas(&object).unwrap_err();
        assert_eq!(err.to_string(), message);
    }
}

#[test]
fn property_requests_follow_sum_then_init_max_then_overhead() {
    let mut seed = 0x9e37_79b9_u64;
    let mut next = |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    for _ in 0..200 {
        let containers: Vec<u64> = (0..=next(4)).map(|_| next(5000)).collect();
        let inits: Vec<u64> = (0..next(3)).map(|_| next(8000)).collect();
        let overhead = next(3) * 100;
        let spec = json!({
            "containers": containers.iter().enumerate().map(|(i, m)| json!({
                "name": format!("c{i}"), "resources": {"requests": {"cpu": format!("{m}m"), "memory": format!("{m}Ki")}}
            })).collect::<Vec<_>>(),
            "initContainers": inits.iter().enumerate().map(|(i, m)| json!({
                "name": format!("i{i}"), "resources": {"limits": {"cpu": format!("{m}m")}}
            })).collect::<Vec<_>>(),
            "overhead": {"cpu": format!("{overhead}m")}
        });
        let object = workload(
            "apps/v1",
            "ReplicaSet",
            json!({"replicas": 1, "template": pod_template(spec)}),
        );
        let expected_cpu = containers
            .iter()
            .sum::<u64>()
            .max(inits.iter().copied().max().unwrap_or(0))
            + overhead;
        let expected_memory: u64 = containers.iter().sum::<u64>() * 1024;
        let requirements = interpreter()
            .get_replicas(&object)
            .unwrap()
            .unwrap()
            .requirements;
        let list = requirements.map(|r| r.resource_request).unwrap_or_default();
        let cpu = list.get("cpu").map(|q| q.0.clone());
        let memory = list.get("memory").map(|q| q.0.clone());
        assert_eq!(
            cpu.map(|q| milli(&q)),
            (expected_cpu > 0).then_some(expected_cpu)
        );
        assert_eq!(
            memory.map(|q| bytes(&q)),
            (expected_memory > 0).then_some(expected_memory)
        );
    }
}

/// Milli-units of a canonical cpu quantity ("1500m", "2", "1k").
fn milli(q: &str) -> u64 {
    if let Some(m) = q.strip_suffix('m') {
        return m.parse().unwrap();
    }
    if let Some(k) = q.strip_suffix('k') {
        return k.parse::<u64>().unwrap() * 1_000_000;
    }
    q.parse::<u64>().unwrap() * 1000
}

/// Bytes of a canonical memory quantity ("3Ki", "1Mi", "512", "1k").
fn bytes(q: &str) -> u64 {
    for (suffix, factor) in [
        ("Ki", 1u64 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("k", 1000),
    ] {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<u64>().unwrap() * factor;
        }
    }
    q.parse().unwrap()
}

#[test]
fn revise_sets_replicas_only_when_the_field_exists() {
    let i = interpreter();
    for kind in ["Deployment", "StatefulSet", "ReplicaSet"] {
        let mut object = workload("apps/v1", kind, json!({"replicas": 5}));
        assert!(i.revise_replica(&mut object, 2).unwrap());
        assert_eq!(object["spec"]["replicas"], json!(2), "{kind}");
        let mut without = workload("apps/v1", kind, json!({}));
        assert!(i.revise_replica(&mut without, 2).unwrap());
        assert_eq!(without["spec"], json!({}), "{kind}");
    }
    let mut job = workload(
        "batch/v1",
        "Job",
        json!({"parallelism": 4, "completions": 8}),
    );
    assert!(i.revise_replica(&mut job, 1).unwrap());
    assert_eq!(job["spec"], json!({"parallelism": 1, "completions": 8}));
}

#[test]
fn revise_is_a_no_op_for_other_kinds_and_rejects_bad_fields() {
    let i = interpreter();
    let mut daemon = workload("apps/v1", "DaemonSet", json!({"replicas": 3}));
    let before = daemon.clone();
    assert!(!i.revise_replica(&mut daemon, 1).unwrap());
    assert_eq!(daemon, before);
    assert!(!i.hook_enabled(&GroupKind::new("", "Pod"), Operation::ReviseReplica));
    assert!(i.hook_enabled(&GroupKind::new("batch", "Job"), Operation::ReviseReplica));

    let mut bad = workload("apps/v1", "Deployment", json!({"replicas": "many"}));
    let err = i.revise_replica(&mut bad, 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Deployment default/web: field `spec.replicas` must be an integer"
    );
}
