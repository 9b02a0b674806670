//! Spark on Kubernetes (`sparkoperator.k8s.io/v1beta2` SparkApplication): two components, the
//! driver (one replica) and the executors (`executor.instances`, raised to the dynamic allocation's
//! initial and minimum executors), each requesting its cores and its memory plus the JVM overhead
//! (the larger of the overhead factor's share and 384m unless `memoryOverhead` is set). Unhealthy
//! only in state `FAILED`; the aggregate keeps the most severe application state.

use std::collections::HashMap;

use karmada_apis::work::v1alpha2::Component;
use serde_json::{Map, Value, json};

use super::flink::apply_pod_template;
use super::value::{self, get, lua_lt, number, number_or, status_mut, to_num};
use super::{Ctx, KindInterpretation, components};
use crate::error::{ObjectRef, Result};

const REFLECTED: [&str; 9] = [
    "applicationState",
    "driverInfo",
    "executorState",
    "sparkApplicationId",
    "lastSubmissionAttemptTime",
    "submissionAttempts",
    "executionAttempts",
    "submissionID",
    "terminationTime",
];

pub(super) fn register(table: &mut HashMap<(&'static str, &'static str), KindInterpretation>) {
    table.insert(
        ("sparkoperator.k8s.io/v1beta2", "SparkApplication"),
        KindInterpretation {
            components: Some(spark_components),
            aggregate: Some(aggregate),
            reflect: Some(|o, ctx| super::kruise::reflect_workload_plain(o, &REFLECTED, ctx)),
            health: Some(|o, _| Ok(health(o))),
            ..Default::default()
        },
    );
}

fn health(object: &Value) -> bool {
    let truthy = |v: Option<&Value>| !matches!(v, None | Some(Value::Bool(false)));
    let state = get(object, &["status", "applicationState", "state"]);
    if !truthy(get(object, &["status"]))
        || !truthy(get(object, &["status", "applicationState"]))
        || !truthy(state)
    {
        return false;
    }
    state.and_then(Value::as_str) != Some("FAILED")
}

/// Binary memory units by size.
const UNITS: [(&str, i32); 6] = [
    ("B", 0),
    ("Ki", 1),
    ("Mi", 2),
    ("Gi", 3),
    ("Ti", 4),
    ("Pi", 5),
];

fn unit_order(unit: &str) -> Option<i32> {
    UNITS.iter().find(|(u, _)| *u == unit).map(|(_, o)| *o)
}

/// A Java memory setting (`512m`, `2g`, `1024`...): its number and binary unit.
fn parse_java_memory(text: &str) -> (Option<f64>, Option<&'static str>) {
    let lower = text.to_lowercase();
    let digits_end = lower
        .char_indices()
        .find(|(_, c)| !c.is_ascii_digit())
        .map_or(lower.len(), |(i, _)| i);
    if digits_end == 0 {
        return (None, None);
    }
    let mut end = digits_end;
    if lower[end..].starts_with('.') {
        end += 1;
        end += lower[end..]
            .chars()
            .take_while(char::is_ascii_digit)
            .count();
    }
    let (number_text, unit) = lower.split_at(end);
    if !unit.chars().all(|c| c.is_ascii_lowercase()) {
        return (None, None);
    }
    let unit = match unit {
        "b" => Some("B"),
        "kb" | "k" => Some("Ki"),
        "mb" | "m" => Some("Mi"),
        "gb" | "g" => Some("Gi"),
        "tb" | "t" => Some("Ti"),
        "pb" | "p" => Some("Pi"),
        _ => None,
    };
    (value::to_number(number_text), unit)
}

fn scale(unit: &str) -> f64 {
    1024f64.powi(unit_order(unit).unwrap_or_default())
}

fn convert(v: f64, from: &str, to: &str) -> f64 {
    if from == to {
        v
    } else {
        v * (scale(from) / scale(to))
    }
}

fn smaller(a: &'static str, b: &'static str) -> &'static str {
    if unit_order(a) < unit_order(b) { a } else { b }
}

/// The text of a memory setting as Lua's `tostring` gives it.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// Memory plus overhead, as `"<value with 6 decimals><unit>"`.
fn total_memory(
    memory: &Value,
    overhead: Option<&Value>,
    factor: f64,
    path: &[&str],
    id: &ObjectRef,
) -> Result<String> {
    let invalid = || value::wrong(path, "a memory setting such as 512m or 2g", id);
    let (memory_value, memory_unit) = parse_java_memory(&text_of(memory));
    let memory_unit = memory_unit.ok_or_else(invalid)?;
    let (overhead_value, overhead_unit) = match overhead {
        Some(o) => {
            let (v, u) = parse_java_memory(&text_of(o));
            (v.ok_or_else(invalid)?, u.ok_or_else(invalid)?)
        }
        None => {
            let computed = memory_value.ok_or_else(invalid)? * factor;
            let unit = smaller(memory_unit, "Mi");
            let computed = convert(computed, memory_unit, unit);
            let minimum = convert(384.0, "Mi", unit);
            (computed.max(minimum), unit)
        }
    };
    let memory_value = memory_value.ok_or_else(invalid)?;
    let unit = smaller(memory_unit, overhead_unit);
    let total =
        convert(memory_value, memory_unit, unit) + convert(overhead_value, overhead_unit, unit);
    Ok(format!("{total:.6}{unit}"))
}

fn spark_components(object: &Value, ctx: &Ctx<'_>) -> Result<Vec<Component>> {
    let id = &ctx.id;
    let job = get(object, &["spec", "type"])
        .and_then(Value::as_str)
        .ok_or_else(|| value::wrong(&["spec", "type"], "a string", id))?
        .to_lowercase();
    let default_factor = if job == "java" || job == "scala" {
        0.10
    } else {
        0.40
    };
    let factor = to_num(
        get(object, &["spec", "memoryOverheadFactor"]),
        Some(default_factor),
    )
    .unwrap_or(default_factor);
    let role = |key: &str, replicas: f64| -> Result<Value> {
        let cpu = get(object, &["spec", key, "cores"])
            .cloned()
            .unwrap_or(json!(1));
        let memory = get(object, &["spec", key, "memory"])
            .cloned()
            .unwrap_or(json!("1g"));
        let overhead = get(object, &["spec", key, "memoryOverhead"]);
        let mut request = Map::new();
        request.insert("cpu".into(), cpu);
        request.insert(
            "memory".into(),
            Value::from(total_memory(
                &memory,
                overhead,
                factor,
                &["spec", key, "memory"],
                id,
            )?),
        );
        if let Some(gpu) = get(object, &["spec", key, "gpu"]) {
            let name = get(gpu, &["name"]);
            let quantity = to_num(get(gpu, &["quantity"]), Some(0.0)).unwrap_or_default();
            if let Some(name) = name.filter(|n| n.as_str() != Some(""))
                && quantity > 0.0
            {
                let name = name
                    .as_str()
                    .map_or_else(|| name.to_string(), str::to_owned);
                request.insert(name, number(quantity));
            }
        }
        let mut requires = json!({"resourceRequest": request});
        apply_pod_template(get(object, &["spec", key]), &mut requires, true);
        let name = if key == "driver" {
            "driver"
        } else {
            "executor"
        };
        Ok(json!({"name": name, "replicas": number(replicas), "replicaRequirements": requires}))
    };
    let mut executors =
        to_num(get(object, &["spec", "executor", "instances"]), Some(1.0)).unwrap_or(1.0);
    let dynamic = get(object, &["spec", "dynamicAllocation", "enabled"]);
    if !matches!(dynamic, None | Some(Value::Bool(false))) {
        for field in ["initialExecutors", "minExecutors"] {
            let n = to_num(
                get(object, &["spec", "dynamicAllocation", field]),
                Some(1.0),
            )
            .unwrap_or(1.0);
            if n > executors {
                executors = n;
            }
        }
    }
    components(
        vec![role("driver", 1.0)?, role("executor", executors)?],
        ctx,
    )
}

fn state_priority(state: Option<&Value>) -> Option<i32> {
    Some(match state?.as_str()? {
        "UNKNOWN" | "" => 0,
        "SUBMITTED" | "PENDING_RERUN" => 1,
        "COMPLETED" => 2,
        "SUSPENDING" | "SUSPENDED" => 3,
        "RUNNING" | "RESUMING" | "SUCCEEDING" => 4,
        "INVALIDATING" => 5,
        "FAILING" | "FAILED" | "SUBMISSION_FAILED" => 6,
        _ => return None,
    })
}

fn aggregate(desired: &Value, items: &[Value], ctx: &Ctx<'_>) -> Result<Value> {
    let mut object = desired.clone();
    if items.len() == 1 {
        super::kubeflow::set_status(&mut object, get(&items[0], &["status"]).cloned(), ctx)?;
        return Ok(value::shaped_status(object));
    }
    let mut application_state = json!({});
    let mut worst = -1;
    let (mut executions, mut submissions) = (0.0, 0.0);
    let mut last_submission = json!("");
    let mut termination = json!("");
    let mut executor_state = Map::new();
    for item in items {
        let Some(s) = get(item, &["status"]) else {
            continue;
        };
        if let Some(app) = get(s, &["applicationState"]) {
            let p = state_priority(get(app, &["state"])).ok_or_else(|| {
                value::wrong(
                    &["status", "applicationState", "state"],
                    "a known SparkApplication state",
                    &ctx.id,
                )
            })?;
            if p > worst {
                worst = p;
                application_state = app.clone();
            }
        }
        executions += number_or(s, &["executionAttempts"], 0.0, &ctx.id)?;
        submissions += number_or(s, &["submissionAttempts"], 0.0, &ctx.id)?;
        for (field, slot) in [
            ("lastSubmissionAttemptTime", &mut last_submission),
            ("terminationTime", &mut termination),
        ] {
            if let Some(t) = get(s, &[field]).filter(|t| !matches!(t, Value::Bool(false)))
                && (slot.as_str() == Some("") || lua_lt(slot, t, &["status", field], &ctx.id)?)
            {
                *slot = t.clone();
            }
        }
        if let Some(states) = get(s, &["executorState"]).and_then(Value::as_object) {
            for (k, v) in states.iter().filter(|(_, v)| !v.is_null()) {
                executor_state.insert(k.clone(), v.clone());
            }
        }
    }
    let status = status_mut(&mut object, &ctx.id)?;
    status.insert("applicationState".into(), application_state);
    status.insert("executionAttempts".into(), number(executions));
    status.insert("executorState".into(), Value::Object(executor_state));
    status.insert("submissionAttempts".into(), number(submissions));
    status.insert("lastSubmissionAttemptTime".into(), last_submission);
    status.insert("terminationTime".into(), termination);
    Ok(value::shaped_status(object))
}

#[cfg(test)]
mod tests {
    use super::parse_java_memory;

    #[test]
    fn java_memory_settings_read_as_binary_units() {
        assert_eq!(parse_java_memory("512m"), (Some(512.0), Some("Mi")));
        assert_eq!(parse_java_memory("2G"), (Some(2.0), Some("Gi")));
        assert_eq!(parse_java_memory("1.5g"), (Some(1.5), Some("Gi")));
        assert_eq!(parse_java_memory("1024"), (Some(1024.0), None));
        assert_eq!(parse_java_memory("x"), (None, None));
    }
}
