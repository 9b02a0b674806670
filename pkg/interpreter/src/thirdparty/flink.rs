//! Apache Flink (`flink.apache.org/v1beta1` FlinkDeployment): replicas are the JobManagers plus
//! the TaskManagers (given, else the job's parallelism over the task slots per TaskManager), each
//! requesting the larger of the two CPU and memory settings; as components, the JobManager and the
//! TaskManager with their own resources. Healthy once the job left its ephemeral states, or while
//! in one with an error published; the aggregate takes the last member's status fields.

use std::collections::HashMap;

use karmada_apis::work::v1alpha2::Component;
use serde_json::{Map, Value, json};

use super::value::{self, get, index, number, shape, status_mut, to_num};
use super::{Ctx, KindInterpretation, components, replica_count};
use crate::error::Result;
use crate::rules::Replicas;

const REFLECTED: [&str; 8] = [
    "clusterInfo",
    "error",
    "jobManagerDeploymentStatus",
    "jobStatus",
    "observedGeneration",
    "lifecycleState",
    "reconciliationStatus",
    "taskManager",
];

pub(super) fn register(table: &mut HashMap<(&'static str, &'static str), KindInterpretation>) {
    table.insert(
        ("flink.apache.org/v1beta1", "FlinkDeployment"),
        KindInterpretation {
            replicas: Some(replicas),
            components: Some(flink_components),
            aggregate: Some(aggregate),
            reflect: Some(|o, ctx| super::kruise::reflect_workload_plain(o, &REFLECTED, ctx)),
            health: Some(health),
            ..Default::default()
        },
    );
}

fn health(object: &Value, ctx: &Ctx<'_>) -> Result<bool> {
    if let Some(state) = get(object, &["status", "jobStatus", "state"]) {
        let ephemeral = matches!(
            state.as_str(),
            Some("CREATED" | "INITIALIZING" | "RECONCILING")
        );
        if !ephemeral {
            return Ok(true);
        }
        return Ok(get(object, &["status", "error"]).is_some()
            || get(object, &["status", "jobManagerDeploymentStatus"]).and_then(Value::as_str)
                == Some("ERROR"));
    }
    Ok(index(object, &["status", "error"], &ctx.id)?.is_some())
}

/// `s == nil or s == ''`.
fn is_empty(v: Option<&Value>) -> bool {
    v.is_none() || v.and_then(Value::as_str) == Some("")
}

/// The scripts' `kube.getResourceQuantity`: a quantity's approximate value (absent: 0).
pub(super) fn quantity_value(v: Option<&Value>, path: &[&str], ctx: &Ctx<'_>) -> Result<f64> {
    let n = match v {
        None => 0.0,
        Some(Value::String(s)) => apimachinery::Quantity::parse(s)
            .map_err(|e| {
                crate::error::Cause::Quantity {
                    path: path.join("."),
                    value: s.clone(),
                    reason: e,
                }
                .at(&ctx.id)
            })?
            .as_approximate_f64(),
        Some(_) => return Err(value::wrong(path, "a quantity string", &ctx.id)),
    };
    if n < 0.0 || n.is_infinite() {
        return Err(value::wrong(path, "a positive finite quantity", &ctx.id));
    }
    Ok(n)
}

fn arithmetic(v: Option<&Value>, path: &[&str], ctx: &Ctx<'_>) -> Result<f64> {
    v.and_then(value::as_number)
        .ok_or_else(|| value::wrong(path, "a number", &ctx.id))
}

fn replicas(object: &Value, ctx: &Ctx<'_>) -> Result<Replicas> {
    let id = &ctx.id;
    let spec = |path: &[&str]| -> Result<Option<Value>> {
        let mut full = vec!["spec"];
        full.extend_from_slice(path);
        Ok(index(object, &full, id)?.cloned())
    };
    let jm = spec(&["jobManager", "replicas"])?;
    let jm = if is_empty(jm.as_ref()) {
        1.0
    } else {
        arithmetic(jm.as_ref(), &["spec", "jobManager", "replicas"], ctx)?
    };
    let tm = spec(&["taskManager", "replicas"])?;
    let tm = if is_empty(tm.as_ref()) {
        let parallelism = spec(&["job", "parallelism"])?;
        let slots = spec(&["flinkConfiguration", "taskmanager.numberOfTaskSlots"])?;
        if is_empty(parallelism.as_ref()) || is_empty(slots.as_ref()) {
            1.0
        } else {
            let p = arithmetic(parallelism.as_ref(), &["spec", "job", "parallelism"], ctx)?;
            let s = arithmetic(slots.as_ref(), &["spec", "flinkConfiguration"], ctx)?;
            (p / s).ceil()
        }
    } else {
        arithmetic(tm.as_ref(), &["spec", "taskManager", "replicas"], ctx)?
    };
    let tm_cpu = arithmetic(
        spec(&["taskManager", "resource", "cpu"])?.as_ref(),
        &["spec", "taskManager", "resource", "cpu"],
        ctx,
    )?;
    let jm_cpu = arithmetic(
        spec(&["jobManager", "resource", "cpu"])?.as_ref(),
        &["spec", "jobManager", "resource", "cpu"],
        ctx,
    )?;
    let jm_memory = spec(&["jobManager", "resource", "memory"])?;
    let tm_memory = spec(&["taskManager", "resource", "memory"])?;
    let jm_value = quantity_value(
        jm_memory.as_ref(),
        &["spec", "jobManager", "resource", "memory"],
        ctx,
    )?;
    let tm_value = quantity_value(
        tm_memory.as_ref(),
        &["spec", "taskManager", "resource", "memory"],
        ctx,
    )?;
    let memory = if jm_value > tm_value {
        jm_memory
    } else {
        tm_memory
    };
    let mut request = Map::new();
    request.insert("cpu".into(), number(tm_cpu.max(jm_cpu)));
    if let Some(memory) = memory {
        request.insert("memory".into(), memory);
    }
    let mut requirements = json!({"resourceRequest": request, "nodeClaim": {}});
    if let Some(pod) = get(object, &["spec", "podTemplate", "spec"]) {
        for field in ["nodeSelector", "tolerations"] {
            if let Some(v) = get(pod, &[field]) {
                requirements["nodeClaim"][field] = v.clone();
            }
        }
        if !is_empty(get(pod, &["priorityClassName"])) {
            requirements["priorityClassName"] = get(pod, &["priorityClassName"])
                .cloned()
                .unwrap_or_default();
        }
    }
    if !is_empty(get(object, &["metadata", "namespace"])) {
        requirements["namespace"] = get(object, &["metadata", "namespace"])
            .cloned()
            .unwrap_or_default();
    }
    let mut requirements = shape(requirements, true, &[]);
    if let Some(Value::Object(requests)) = requirements.get_mut("resourceRequest") {
        for q in requests.values_mut() {
            if let Value::Number(n) = q {
                *q = Value::String(n.to_string());
            }
        }
    }
    let requirements = serde_json::from_value(requirements).map_err(|e| {
        crate::error::Cause::Decode {
            path: "replicaRequirements".into(),
            source: e,
        }
        .at(id)
    })?;
    Ok(Replicas {
        replicas: replica_count(jm + tm, ctx)?,
        requirements: Some(requirements),
    })
}

/// Node constraints and priority of a pod template spec, into `requires` (the scripts'
/// `apply_pod_template`); `hard_affinity` also takes the required node affinity.
pub(super) fn apply_pod_template(pod: Option<&Value>, requires: &mut Value, hard_affinity: bool) {
    let Some(pod) = pod else {
        return;
    };
    let node_selector = get(pod, &["nodeSelector"]);
    let tolerations = get(pod, &["tolerations"]);
    let affinity = if hard_affinity {
        get(
            pod,
            &[
                "affinity",
                "nodeAffinity",
                "requiredDuringSchedulingIgnoredDuringExecution",
            ],
        )
    } else {
        None
    };
    if node_selector.is_some() || tolerations.is_some() || affinity.is_some() {
        let claim = &mut requires["nodeClaim"];
        if !claim.is_object() {
            *claim = json!({});
        }
        for (field, v) in [
            ("nodeSelector", node_selector),
            ("tolerations", tolerations),
            ("hardNodeAffinity", affinity),
        ] {
            if let Some(v) = v {
                claim[field] = v.clone();
            }
        }
    }
    if let Some(p) = get(pod, &["priorityClassName"]).filter(|p| p.as_str() != Some("")) {
        requires["priorityClassName"] = p.clone();
    }
}

fn flink_components(object: &Value, ctx: &Ctx<'_>) -> Result<Vec<Component>> {
    let pod = get(object, &["spec", "podTemplate", "spec"]);
    let manager = |name: &str, key: &str, replicas: f64| -> Result<Value> {
        let cpu = get(object, &["spec", key, "resource", "cpu"]).cloned();
        let memory = quantity_value(
            get(object, &["spec", key, "resource", "memory"]),
            &["spec", key, "resource", "memory"],
            ctx,
        )?;
        let mut requires = json!({"resourceRequest": {"memory": number(memory)}});
        if let Some(cpu) = cpu {
            requires["resourceRequest"]["cpu"] = cpu;
        }
        apply_pod_template(pod, &mut requires, false);
        Ok(json!({"name": name, "replicas": number(replicas), "replicaRequirements": requires}))
    };
    let jm = to_num(get(object, &["spec", "jobManager", "replicas"]), Some(1.0)).unwrap_or(1.0);
    let tm = match to_num(get(object, &["spec", "taskManager", "replicas"]), None) {
        Some(n) => n,
        None => {
            let parallelism = to_num(get(object, &["spec", "job", "parallelism"]), None);
            let slots = to_num(
                get(
                    object,
                    &[
                        "spec",
                        "flinkConfiguration",
                        "taskmanager.numberOfTaskSlots",
                    ],
                ),
                None,
            );
            match (parallelism, slots) {
                (Some(p), Some(s)) if s != 0.0 => (p / s).ceil(),
                _ => 1.0,
            }
        }
    };
    components(
        vec![
            manager("jobmanager", "jobManager", jm)?,
            manager("taskmanager", "taskManager", tm)?,
        ],
        ctx,
    )
}

fn aggregate(desired: &Value, items: &[Value], ctx: &Ctx<'_>) -> Result<Value> {
    let mut object = desired.clone();
    let mut fields: Vec<Option<Value>> = vec![
        Some(json!({})),
        Some(json!("")),
        Some(json!("")),
        Some(json!({})),
        Some(json!(0)),
        Some(json!("")),
        Some(json!({})),
        Some(json!({})),
    ];
    const ORDER: [&str; 8] = [
        "clusterInfo",
        "error",
        "jobManagerDeploymentStatus",
        "jobStatus",
        "observedGeneration",
        "lifecycleState",
        "reconciliationStatus",
        "taskManager",
    ];
    for item in items {
        if let Some(s) = get(item, &["status"]) {
            for (slot, field) in fields.iter_mut().zip(ORDER) {
                *slot = get(s, &[field]).cloned();
            }
        }
    }
    let status = status_mut(&mut object, &ctx.id)?;
    for (v, field) in fields.into_iter().zip(ORDER) {
        match v {
            Some(v) => status.insert(field.to_owned(), v),
            None => status.remove(field),
        };
    }
    Ok(value::shaped_status(object))
}
