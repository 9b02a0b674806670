//! Volcano (`batch.volcano.sh/v1alpha1` Job): one component per task (`minAvailable` replicas,
//! default 1, named by the task or `task-<index>`); healthy in every known phase but `Failed` and
//! the pending ones; the aggregate sums the pod counters and the per-task phase counts, keeps the
//! longest running duration and the highest version, and sets the Job's state from the members'
//! (failed anywhere: `Failed`; completed everywhere: `Completed`).

use std::collections::{BTreeMap, HashMap};

use karmada_apis::work::v1alpha2::Component;
use serde_json::{Map, Value, json};

use super::kruise::list;
use super::kubeflow::{set_status, template_requirements};
use super::value::{self, Omit, get, lua_lt, number, number_or, omit_empty, shape, to_num};
use super::{Ctx, KindInterpretation, components};
use crate::error::Result;

pub(super) fn register(table: &mut HashMap<(&'static str, &'static str), KindInterpretation>) {
    table.insert(
        ("batch.volcano.sh/v1alpha1", "Job"),
        KindInterpretation {
            components: Some(volcano_components),
            aggregate: Some(aggregate),
            reflect: Some(|o, _| Ok(reflect(o))),
            health: Some(|o, _| Ok(health(o))),
            ..Default::default()
        },
    );
}

fn health(object: &Value) -> bool {
    let phase = get(object, &["status", "state", "phase"]).and_then(Value::as_str);
    matches!(
        phase,
        Some(
            "Running"
                | "Completed"
                | "Pending"
                | "Aborting"
                | "Aborted"
                | "Restarting"
                | "Completing"
                | "Terminating"
                | "Terminated"
        )
    )
}

fn volcano_components(object: &Value, ctx: &Ctx<'_>) -> Result<Vec<Component>> {
    let mut out = Vec::new();
    for (i, task) in list(object, &["spec", "tasks"]).enumerate() {
        let replicas = to_num(get(task, &["minAvailable"]), Some(1.0)).unwrap_or(1.0);
        let template = get(task, &["template"])
            .ok_or_else(|| value::missing(&["spec", "tasks", "template"], &ctx.id))?;
        let requirements = template_requirements(template, ctx)?;
        let name = match get(task, &["name"]) {
            None => format!("task-{i}"),
            Some(Value::String(s)) if s.is_empty() => format!("task-{i}"),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        out.push(json!({"name": name, "replicas": number(replicas),
            "replicaRequirements": requirements}));
    }
    components(out, ctx)
}

/// A running duration in seconds: numbers as they are; text as the sum of its `<n>h`, `<n>m`,
/// `<n>s` parts, else as a number, else 0.
fn duration(v: Option<&Value>, ctx: &Ctx<'_>) -> Result<f64> {
    let text = match v {
        Some(Value::Number(n)) => return Ok(n.as_f64().unwrap_or_default()),
        Some(Value::String(s)) => s,
        _ => return Ok(0.0),
    };
    let bytes = text.as_bytes();
    let mut total = 0.0;
    let mut i = 0;
    while i < bytes.len() {
        let run = bytes[i..]
            .iter()
            .take_while(|b| b.is_ascii_digit() || **b == b'.')
            .count();
        if run > 0
            && let Some(unit) = bytes
                .get(i + run)
                .filter(|b| matches!(b, b'h' | b'm' | b's'))
        {
            let n = value::to_number(&text[i..i + run]).ok_or_else(|| {
                value::wrong(&["status", "runningDuration"], "a duration", &ctx.id)
            })?;
            total += n * match unit {
                b'h' => 3600.0,
                b'm' => 60.0,
                _ => 1.0,
            };
            i += run + 1;
        } else {
            i += 1;
        }
    }
    if total > 0.0 {
        return Ok(total);
    }
    Ok(value::to_number(text).unwrap_or_default())
}

const SUMMED: [&str; 8] = [
    "minAvailable",
    "pending",
    "running",
    "succeeded",
    "failed",
    "terminating",
    "unknown",
    "retryCount",
];

#[allow(
    clippy::too_many_lines,
    reason = "one pass over the members' statuses folding every field the aggregation keeps; split, the accumulators would travel as one struct"
)]
fn aggregate(desired: &Value, items: &[Value], ctx: &Ctx<'_>) -> Result<Value> {
    let mut object = desired.clone();
    if items.len() == 1 {
        set_status(&mut object, get(&items[0], &["status"]).cloned(), ctx)?;
        return Ok(value::shaped_status(object));
    }
    let mut sums = [0.0; 8];
    let mut version = 0.0f64;
    let mut running_duration = json!("0s");
    let mut tasks: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    let mut controlled = Map::new();
    let mut latest: BTreeMap<String, Value> = BTreeMap::new();
    let mut has_failed = false;
    let mut failed_conditions: Vec<Value> = Vec::new();
    let (mut successful, mut failed_clusters) = (0usize, Vec::<String>::new());
    for item in items {
        let Some(s) = get(item, &["status"]) else {
            continue;
        };
        for (sum, field) in sums.iter_mut().zip(SUMMED) {
            *sum += number_or(s, &[field], 0.0, &ctx.id)?;
        }
        version = version.max(number_or(s, &["version"], 0.0, &ctx.id)?);
        if duration(get(s, &["runningDuration"]), ctx)? > duration(Some(&running_duration), ctx)? {
            running_duration = get(s, &["runningDuration"]).cloned().unwrap_or(Value::Null);
        }
        if let Some(counts) = get(s, &["taskStatusCount"]).and_then(Value::as_object) {
            for (task, task_status) in counts.iter().filter(|(_, v)| !v.is_null()) {
                let phases = tasks.entry(task.clone()).or_default();
                if let Some(p) = get(task_status, &["phase"]).and_then(Value::as_object) {
                    for (phase, count) in p.iter().filter(|(_, v)| !v.is_null()) {
                        let before = phases.get(phase).and_then(value::as_number).unwrap_or(0.0);
                        let add = value::as_number(count).ok_or_else(|| {
                            value::wrong(
                                &["status", "taskStatusCount", "phase"],
                                "a number",
                                &ctx.id,
                            )
                        })?;
                        phases.insert(phase.clone(), number(before + add));
                    }
                }
            }
        }
        if let Some(resources) = get(s, &["controlledResources"]).and_then(Value::as_object) {
            for (k, v) in resources.iter().filter(|(_, v)| !v.is_null()) {
                controlled.insert(k.clone(), v.clone());
            }
        }
        if get(s, &["conditions"]).is_some() {
            let mut cluster_failed = false;
            for c in list(s, &["conditions"]) {
                let status = get(c, &["status"]).and_then(Value::as_str);
                if matches!(
                    status,
                    Some("Failed" | "Aborted" | "Aborting" | "Terminated" | "Terminating")
                ) {
                    cluster_failed = true;
                    has_failed = true;
                }
                if !cluster_failed {
                    let key = get(c, &["status"])
                        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                        .ok_or_else(|| {
                            value::missing(&["status", "conditions", "status"], &ctx.id)
                        })?;
                    let replace = match latest.get(&key) {
                        None => true,
                        Some(existing) => {
                            let new_time = get(c, &["lastTransitionTime"])
                                .cloned()
                                .unwrap_or(Value::Null);
                            let old_time = get(existing, &["lastTransitionTime"])
                                .cloned()
                                .unwrap_or(Value::Null);
                            lua_lt(
                                &old_time,
                                &new_time,
                                &["status", "conditions", "lastTransitionTime"],
                                &ctx.id,
                            )?
                        }
                    };
                    if replace {
                        latest.insert(key, c.clone());
                    }
                }
            }
            if cluster_failed && failed_conditions.is_empty() {
                failed_conditions = list(s, &["conditions"]).cloned().collect();
            }
        }
        if get(s, &["state"]).is_some() {
            match get(s, &["state", "phase"]).and_then(Value::as_str) {
                Some("Completed") => successful += 1,
                Some("Failed" | "Aborted") => failed_clusters.push(
                    get(item, &["clusterName"])
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                ),
                _ => {}
            }
        }
    }
    let mut state = Map::new();
    if !failed_clusters.is_empty() {
        state.insert("phase".into(), json!("Failed"));
        state.insert("reason".into(), json!("VolcanoJobFailed"));
        state.insert(
            "message".into(),
            json!(format!(
                "Job failed in clusters: {}",
                failed_clusters.join(",")
            )),
        );
        state.insert("lastTransitionTime".into(), value::now_utc());
    }
    if successful == items.len() && successful > 0 {
        state.insert("phase".into(), json!("Completed"));
        state.insert("reason".into(), json!("Completed"));
        state.insert("message".into(), json!("Job completed successfully"));
        state.insert("lastTransitionTime".into(), value::now_utc());
    }
    let conditions = if has_failed {
        failed_conditions
    } else {
        latest.into_values().collect()
    };
    let mut status = Map::new();
    for (sum, field) in sums.into_iter().zip(SUMMED) {
        status.insert(field.to_owned(), number(sum));
    }
    status.insert("version".into(), number(version));
    if !running_duration.is_null() {
        status.insert("runningDuration".into(), running_duration);
    }
    status.insert("state".into(), Value::Object(state));
    status.insert(
        "taskStatusCount".into(),
        Value::Object(
            tasks
                .into_iter()
                .map(|(k, phases)| (k, json!({"phase": phases})))
                .collect(),
        ),
    );
    status.insert("controlledResources".into(), Value::Object(controlled));
    status.insert("conditions".into(), Value::Array(conditions));
    let status = omit_empty(&Value::Object(status), Omit::ZeroValues, &ctx.id)?;
    set_status(&mut object, Some(status.unwrap_or_else(|| json!({}))), ctx)?;
    Ok(value::shaped_status(object))
}

fn reflect(object: &Value) -> Value {
    let Some(s) = get(object, &["status"]) else {
        return json!({});
    };
    let mut status = Map::new();
    for field in [
        "minAvailable",
        "pending",
        "running",
        "succeeded",
        "failed",
        "terminating",
        "unknown",
        "version",
        "retryCount",
        "runningDuration",
        "taskStatusCount",
        "controlledResources",
        "state",
    ] {
        if let Some(v) = get(s, &[field]) {
            status.insert(field.to_owned(), v.clone());
        }
    }
    let conditions: Vec<Value> = match get(s, &["conditions"]) {
        Some(Value::Array(_) | Value::Object(_)) => list(s, &["conditions"]).cloned().collect(),
        _ => Vec::new(),
    };
    status.insert("conditions".into(), Value::Array(conditions));
    shape(Value::Object(status), true, &[])
}
