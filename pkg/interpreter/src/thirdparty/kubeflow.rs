//! Kubeflow (`kubeflow.org`): PyTorchJob and TFJob (v1), MPIJob (v2beta1), Notebook (v1).
//!
//! The training jobs are multi-component workloads: one component per replica type with its pod
//! requirements (InterpretComponent); they are healthy until a `Failed=True` condition; their
//! aggregate sums the per-type replica counters, keeps the earliest start and the latest
//! completion and reconcile times, and writes its own `Succeeded` / `Failed` condition from the
//! members' finish states (times of those conditions are the aggregation's time, as Karmada's
//! scripts stamp them). A Notebook is one replica, healthy by its container state.

use std::collections::{BTreeMap, HashMap};

use karmada_apis::config::v1alpha1::DependentObjectReference;
use serde_json::{Map, Value, json};

use super::kruise::list;
use super::value::{self, Omit, get, lua_lt, number, number_or, omit_empty, shape, to_num};
use super::{
    Ctx, KindInterpretation, components, pod_template_dependencies, replicas_with_template,
};
use crate::error::Result;

/// A training job kind: where its replica specs are, its replica types (key, component name) and
/// its name in condition reasons and messages.
struct Training {
    specs: &'static str,
    types: &'static [(&'static str, &'static str)],
    label: &'static str,
}

const PYTORCH: Training = Training {
    specs: "pytorchReplicaSpecs",
    types: &[("Master", "master"), ("Worker", "worker")],
    label: "PyTorchJob",
};

const TENSORFLOW: Training = Training {
    specs: "tfReplicaSpecs",
    types: &[
        ("PS", "ps"),
        ("Worker", "worker"),
        ("Chief", "chief"),
        ("Master", "master"),
        ("Evaluator", "evaluator"),
    ],
    label: "TFJob",
};

pub(super) fn register(table: &mut HashMap<(&'static str, &'static str), KindInterpretation>) {
    table.insert(
        ("kubeflow.org/v1", "PyTorchJob"),
        KindInterpretation {
            components: Some(|o, ctx| training_components(o, &PYTORCH, ctx)),
            aggregate: Some(|d, items, ctx| training_aggregate(d, items, &PYTORCH, ctx)),
            health: Some(|o, _| Ok(training_health(o))),
            dependencies: Some(|o, _| Ok(training_dependencies(o, &PYTORCH))),
            ..Default::default()
        },
    );
    table.insert(
        ("kubeflow.org/v1", "TFJob"),
        KindInterpretation {
            components: Some(|o, ctx| training_components(o, &TENSORFLOW, ctx)),
            aggregate: Some(|d, items, ctx| training_aggregate(d, items, &TENSORFLOW, ctx)),
            health: Some(|o, _| Ok(training_health(o))),
            dependencies: Some(|o, _| Ok(training_dependencies(o, &TENSORFLOW))),
            ..Default::default()
        },
    );
    table.insert(
        ("kubeflow.org/v2beta1", "MPIJob"),
        KindInterpretation {
            components: Some(mpi_components),
            aggregate: Some(mpi_aggregate),
            reflect: Some(|o, _| Ok(mpi_reflect(o))),
            health: Some(|o, _| Ok(mpi_health(o))),
            ..Default::default()
        },
    );
    table.insert(
        ("kubeflow.org/v1", "Notebook"),
        KindInterpretation {
            replicas: Some(|o, ctx| {
                value::index(o, &["spec", "template"], &ctx.id)?;
                replicas_with_template(1.0, get(o, &["spec", "template"]), ctx)
            }),
            aggregate: Some(notebook_aggregate),
            reflect: Some(|o, _| Ok(notebook_reflect(o))),
            health: Some(|o, _| Ok(notebook_health(o))),
            ..Default::default()
        },
    );
}

/// The requirements of a component's pod template as the scripts compute them.
pub(super) fn template_requirements(template: &Value, ctx: &Ctx<'_>) -> Result<Value> {
    if !template.is_object() {
        return Err(value::wrong(&["template"], "an object", &ctx.id));
    }
    let found = crate::pod_template_requirements(template, ctx.options)?;
    Ok(found
        .and_then(|r| serde_json::to_value(r).ok())
        .unwrap_or(Value::Null))
}

fn training_components(
    object: &Value,
    job: &Training,
    ctx: &Ctx<'_>,
) -> Result<Vec<karmada_apis::work::v1alpha2::Component>> {
    let mut out = Vec::new();
    for (key, name) in job.types {
        let Some(spec) = get(object, &["spec", job.specs, key]) else {
            continue;
        };
        let replicas = to_num(get(spec, &["replicas"]), Some(1.0)).unwrap_or(1.0);
        let requirements = match get(spec, &["template"]) {
            Some(t) => template_requirements(t, ctx)?,
            None => Value::Null,
        };
        out.push(json!({"name": name, "replicas": number(replicas),
            "replicaRequirements": requirements}));
    }
    components(out, ctx)
}

fn training_health(object: &Value) -> bool {
    if get(object, &["status", "conditions"]).is_none() {
        return false;
    }
    !list(object, &["status", "conditions"]).any(|c| {
        get(c, &["type"]).and_then(Value::as_str) == Some("Failed")
            && get(c, &["status"]).and_then(Value::as_str) == Some("True")
    })
}

fn training_dependencies(object: &Value, job: &Training) -> Vec<DependentObjectReference> {
    let namespace = get(object, &["metadata", "namespace"]);
    let mut deps = Vec::new();
    for (key, _) in job.types {
        if let Some(template) = get(object, &["spec", job.specs, key, "template"]) {
            deps.extend(pod_template_dependencies(Some(template), namespace));
        }
    }
    deps
}

/// Keeps in `slot` the earliest (`earliest`) or latest value of `field` seen.
fn extreme(
    slot: &mut Option<Value>,
    status: &Value,
    field: &str,
    earliest: bool,
    skip_empty: bool,
    ctx: &Ctx<'_>,
) -> Result<()> {
    let Some(v) = get(status, &[field]) else {
        return Ok(());
    };
    if skip_empty && v.as_str() == Some("") {
        return Ok(());
    }
    let replace = match slot.as_ref() {
        None => true,
        Some(current) if earliest => lua_lt(v, current, &["status", field], &ctx.id)?,
        Some(current) => lua_lt(current, v, &["status", field], &ctx.id)?,
    };
    if replace {
        *slot = Some(v.clone());
    }
    Ok(())
}

fn training_aggregate(
    desired: &Value,
    items: &[Value],
    job: &Training,
    ctx: &Ctx<'_>,
) -> Result<Value> {
    let mut object = desired.clone();
    let mut status = get(&object, &["status"])
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let (mut start, mut completion, mut reconcile) = (None, None, None);
    let mut counters: BTreeMap<&str, [f64; 3]> =
        job.types.iter().map(|(key, _)| (*key, [0.0; 3])).collect();
    let mut successful = 0usize;
    let mut failed_clusters: Vec<String> = Vec::new();
    for item in items {
        let Some(s) = get(item, &["status"]) else {
            continue;
        };
        extreme(&mut start, s, "startTime", true, false, ctx)?;
        extreme(&mut completion, s, "completionTime", false, false, ctx)?;
        extreme(&mut reconcile, s, "lastReconcileTime", false, false, ctx)?;
        if let Some(replica_statuses) = get(s, &["replicaStatuses"]) {
            for (key, _) in job.types {
                if let Some(r) = get(replica_statuses, &[key]) {
                    let c = counters.entry(key).or_default();
                    for (i, f) in ["active", "failed", "succeeded"].iter().enumerate() {
                        c[i] += number_or(r, &[f], 0.0, &ctx.id)?;
                    }
                }
            }
        }
        let mut finished = None;
        for c in list(s, &["conditions"]) {
            let t = get(c, &["type"]).and_then(Value::as_str);
            if matches!(t, Some("Succeeded" | "Failed"))
                && get(c, &["status"]).and_then(Value::as_str) == Some("True")
            {
                finished = t;
            }
        }
        match finished {
            Some("Succeeded") => successful += 1,
            Some("Failed") => failed_clusters.push(cluster_name(item)),
            _ => {}
        }
    }
    let mut conditions = Vec::new();
    if !failed_clusters.is_empty() {
        conditions.push(json!({"type": "Failed", "status": "True",
            "lastProbeTime": value::now_utc(), "lastTransitionTime": value::now_utc(),
            "reason": format!("{}Failed", job.label),
            "message": format!("{} executed failed in member clusters: {}", job.label,
                failed_clusters.join(", "))}));
    }
    if successful == items.len() && successful > 0 {
        conditions.push(json!({"type": "Succeeded", "status": "True",
            "lastProbeTime": value::now_utc(), "lastTransitionTime": value::now_utc(),
            "reason": "Completed",
            "message": format!("{} completed successfully", job.label)}));
        set_opt(&mut status, "completionTime", completion);
    }
    set_opt(&mut status, "startTime", start);
    set_opt(&mut status, "lastReconcileTime", reconcile);
    let replica_statuses: Map<String, Value> = counters
        .into_iter()
        .map(|(key, c)| {
            (
                key.to_owned(),
                json!({"active": number(c[0]), "failed": number(c[1]), "succeeded": number(c[2])}),
            )
        })
        .collect();
    status.insert("replicaStatuses".into(), Value::Object(replica_statuses));
    status.insert("conditions".into(), Value::Array(conditions));
    let status = omit_empty(&Value::Object(status), Omit::ZeroValues, &ctx.id)?;
    set_status(&mut object, status, ctx)?;
    Ok(value::shaped_status(object))
}

fn cluster_name(item: &Value) -> String {
    get(item, &["clusterName"])
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn set_opt(status: &mut Map<String, Value>, field: &str, v: Option<Value>) {
    match v {
        Some(v) => status.insert(field.to_owned(), v),
        None => status.remove(field),
    };
}

/// Replaces the object's status (`None`: removes it).
pub(super) fn set_status(object: &mut Value, status: Option<Value>, ctx: &Ctx<'_>) -> Result<()> {
    let fields = object
        .as_object_mut()
        .ok_or_else(|| crate::error::Cause::NotAnObject.at(&ctx.id))?;
    match status {
        Some(s) if !s.is_null() => fields.insert("status".into(), s),
        _ => fields.remove("status"),
    };
    Ok(())
}

fn mpi_health(object: &Value) -> bool {
    if list(object, &["status", "conditions"]).next().is_none() {
        return false;
    }
    training_health(object)
}

fn mpi_components(
    object: &Value,
    ctx: &Ctx<'_>,
) -> Result<Vec<karmada_apis::work::v1alpha2::Component>> {
    let Some(specs) = get(object, &["spec", "mpiReplicaSpecs"]).and_then(Value::as_object) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (task, spec) in specs {
        let Some(template) = get(spec, &["template"]) else {
            continue;
        };
        let default = if task.to_lowercase() == "worker" {
            0.0
        } else {
            1.0
        };
        let replicas = to_num(get(spec, &["replicas"]), Some(default)).unwrap_or(default);
        out.push(json!({"name": task, "replicas": number(replicas),
            "replicaRequirements": template_requirements(template, ctx)?}));
    }
    components(out, ctx)
}

/// The time a condition last changed (`lastUpdateTime`, else `lastTransitionTime`).
fn changed_at(condition: &Value) -> Option<&Value> {
    get(condition, &["lastUpdateTime"]).or_else(|| get(condition, &["lastTransitionTime"]))
}

fn mpi_aggregate(desired: &Value, items: &[Value], ctx: &Ctx<'_>) -> Result<Value> {
    let mut object = desired.clone();
    if items.is_empty() {
        return Ok(value::shaped_status(object));
    }
    if items.len() == 1 {
        set_status(&mut object, get(&items[0], &["status"]).cloned(), ctx)?;
        return Ok(value::shaped_status(object));
    }
    let mut replica_statuses: BTreeMap<String, [f64; 3]> = BTreeMap::new();
    let (mut start, mut completion, mut reconcile) = (None, None, None);
    // Latest condition per type; listed by type (Karmada's order is its table order).
    let mut latest: BTreeMap<String, Value> = BTreeMap::new();
    for item in items {
        let Some(s) = get(item, &["status"]) else {
            continue;
        };
        if let Some(r) = get(s, &["replicaStatuses"]).and_then(Value::as_object) {
            for (kind, counts) in r {
                let c = replica_statuses.entry(kind.clone()).or_default();
                for (i, f) in ["active", "succeeded", "failed"].iter().enumerate() {
                    c[i] += number_or(counts, &[f], 0.0, &ctx.id)?;
                }
            }
        }
        extreme(&mut start, s, "startTime", true, true, ctx)?;
        extreme(&mut completion, s, "completionTime", false, true, ctx)?;
        extreme(&mut reconcile, s, "lastReconcileTime", false, true, ctx)?;
        for c in list(s, &["conditions"]) {
            let Some(new_time) = changed_at(c).filter(|t| t.as_str() != Some("")) else {
                continue;
            };
            let key = get(c, &["type"])
                .map(|t| t.as_str().map_or_else(|| t.to_string(), str::to_owned))
                .ok_or_else(|| value::missing(&["status", "conditions", "type"], &ctx.id))?;
            let replace = match latest.get(&key) {
                None => true,
                Some(existing) => match changed_at(existing) {
                    Some(old) => lua_lt(old, new_time, &["status", "conditions"], &ctx.id)?,
                    None => {
                        return Err(value::wrong(
                            &["status", "conditions"],
                            "a time to compare",
                            &ctx.id,
                        ));
                    }
                },
            };
            if replace {
                latest.insert(key, c.clone());
            }
        }
    }
    let mut status = Map::new();
    status.insert(
        "replicaStatuses".into(),
        Value::Object(
            replica_statuses
                .into_iter()
                .map(|(k, c)| {
                    (
                        k,
                        json!({"active": number(c[0]), "succeeded": number(c[1]), "failed": number(c[2])}),
                    )
                })
                .collect(),
        ),
    );
    status.insert(
        "conditions".into(),
        Value::Array(latest.into_values().collect()),
    );
    set_opt(&mut status, "startTime", start);
    set_opt(&mut status, "completionTime", completion);
    set_opt(&mut status, "lastReconcileTime", reconcile);
    let status = omit_empty(&Value::Object(status), Omit::EmptyTables, &ctx.id)?;
    set_status(&mut object, Some(status.unwrap_or_else(|| json!({}))), ctx)?;
    Ok(value::shaped_status(object))
}

fn mpi_reflect(object: &Value) -> Value {
    let Some(s) = get(object, &["status"]) else {
        return json!({});
    };
    let mut status = Map::new();
    let mut replica_statuses = Map::new();
    if let Some(r) = get(s, &["replicaStatuses"]).and_then(Value::as_object) {
        for (k, v) in r.iter().filter(|(_, v)| !v.is_null()) {
            let mut entry = Map::new();
            for f in ["active", "succeeded", "failed", "selector"] {
                if let Some(x) = get(v, &[f]) {
                    entry.insert(f.to_owned(), x.clone());
                }
            }
            replica_statuses.insert(k.clone(), Value::Object(entry));
        }
    }
    status.insert("replicaStatuses".into(), Value::Object(replica_statuses));
    let conditions: Vec<Value> = match get(s, &["conditions"]) {
        Some(Value::Array(_) | Value::Object(_)) => list(s, &["conditions"]).cloned().collect(),
        _ => Vec::new(),
    };
    status.insert("conditions".into(), Value::Array(conditions));
    for f in ["startTime", "completionTime", "lastReconcileTime"] {
        if let Some(v) = get(s, &[f]) {
            status.insert(f.to_owned(), v.clone());
        }
    }
    shape(Value::Object(status), true, &[])
}

fn notebook_health(object: &Value) -> bool {
    let Some(state) = get(object, &["status", "containerState"]) else {
        return false;
    };
    if get(state, &["running"]).is_some() {
        return true;
    }
    if let Some(waiting) = get(state, &["waiting"]) {
        return get(waiting, &["reason"]).and_then(Value::as_str) == Some("ContainerCreating");
    }
    if let Some(terminated) = get(state, &["terminated"]) {
        let reason = get(terminated, &["reason"]).and_then(Value::as_str);
        let exit_code = get(terminated, &["exitCode"]).cloned().unwrap_or(json!(0));
        let failed = matches!(reason, Some("Error" | "OOMKilled" | "ContainerCannotRun"))
            || !value::lua_eq(Some(&exit_code), Some(&json!(0)));
        return !failed;
    }
    false
}

fn is_empty_table(v: Option<&Value>) -> bool {
    match v {
        None => true,
        Some(Value::Object(o)) => o.values().all(Value::is_null),
        Some(Value::Array(a)) => a.iter().all(Value::is_null),
        Some(_) => false,
    }
}

fn notebook_aggregate(desired: &Value, items: &[Value], ctx: &Ctx<'_>) -> Result<Value> {
    let mut object = desired.clone();
    if items.len() == 1 {
        set_status(&mut object, get(&items[0], &["status"]).cloned(), ctx)?;
        return Ok(value::shaped_status(object));
    }
    let mut ready = 0.0;
    let mut successful = 0usize;
    let mut failed_clusters: Vec<String> = Vec::new();
    let mut state: Option<Value> = None;
    let mut latest_start: Option<Value> = None;
    for item in items {
        let Some(s) = get(item, &["status"]) else {
            continue;
        };
        ready += number_or(s, &["readyReplicas"], 0.0, &ctx.id)?;
        let cs = get(s, &["containerState"]);
        let failed = is_empty_table(cs)
            || cs.is_some_and(|c| {
                get(c, &["terminated"]).is_some() || get(c, &["waiting"]).is_some()
            });
        if failed {
            failed_clusters.push(cluster_name(item));
            state = Some(match cs {
                Some(c) if !is_empty_table(Some(c)) => c.clone(),
                _ => json!({"waiting": {"reason": "Unschedulable"}}),
            });
            continue;
        }
        let Some(cs) = cs else { continue };
        if get(cs, &["running"]).is_some() && failed_clusters.is_empty() {
            successful += 1;
            let started = get(cs, &["running", "startedAt"]).cloned();
            match state.as_mut() {
                None => {
                    state = Some(json!({"running": {"startedAt": started.clone()}}));
                    latest_start = started;
                }
                Some(current) => {
                    if let Some(started) = started {
                        let later = match &latest_start {
                            None => true,
                            Some(l) => lua_lt(l, &started, &["status", "containerState"], &ctx.id)?,
                        };
                        if later {
                            latest_start = Some(started.clone());
                            value::set(
                                current,
                                &["running"],
                                json!({"startedAt": started}),
                                &ctx.id,
                            )?;
                        }
                    }
                }
            }
        }
    }
    let mut conditions = Vec::new();
    if !failed_clusters.is_empty() {
        conditions.push(json!({"type": "Failed", "status": "True",
            "lastProbeTime": value::now_utc(), "lastTransitionTime": value::now_utc(),
            "reason": "NotebookFailed",
            "message": format!("Notebook executed failed in member clusters: {}",
                failed_clusters.join(", "))}));
    }
    if successful == items.len() && successful > 0 {
        conditions.push(json!({"type": "Ready", "status": "True",
            "lastProbeTime": value::now_utc(), "lastTransitionTime": value::now_utc(),
            "reason": "Ready", "message": "All notebooks are ready"}));
    }
    let mut status = json!({"readyReplicas": number(ready), "conditions": conditions});
    if let Some(state) = state {
        status["containerState"] = state;
    }
    set_status(&mut object, Some(status), ctx)?;
    Ok(value::shaped_status(object))
}

fn notebook_reflect(object: &Value) -> Value {
    let Some(s) = get(object, &["status"]) else {
        return json!({});
    };
    let mut status = json!({
        "readyReplicas": get(s, &["readyReplicas"]).cloned().unwrap_or(json!(0)),
        "containerState": get(s, &["containerState"]).cloned().unwrap_or(json!({})),
    });
    if let Some(c @ (Value::Array(_) | Value::Object(_))) = get(s, &["conditions"]) {
        status["conditions"] = c.clone();
    }
    shape(status, true, &[])
}
