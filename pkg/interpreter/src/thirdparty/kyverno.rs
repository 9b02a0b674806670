//! Kyverno (`kyverno.io/v1`): ClusterPolicy and Policy. Healthy when `status.ready` says so (or,
//! without it, a `Ready=True` condition with reason `Succeeded`); the aggregate adds up the rule
//! counts, takes `ready` and `autogen` from the last member reporting them and merges conditions
//! as Flux kinds do.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::flux::merge_conditions;
use super::kruise::{list, reflect_workload_plain};
use super::value::{self, get, number};
use super::{Ctx, KindInterpretation};
use crate::error::Result;

const RULE_KINDS: [&str; 4] = ["validate", "generate", "mutate", "verifyimages"];

pub(super) fn register(table: &mut HashMap<(&'static str, &'static str), KindInterpretation>) {
    for kind in ["ClusterPolicy", "Policy"] {
        table.insert(
            ("kyverno.io/v1", kind),
            KindInterpretation {
                aggregate: Some(aggregate),
                reflect: Some(|o, ctx| {
                    reflect_workload_plain(o, &["ready", "conditions", "autogen", "rulecount"], ctx)
                }),
                health: Some(health),
                ..Default::default()
            },
        );
    }
}

fn health(object: &Value, ctx: &Ctx<'_>) -> Result<bool> {
    if let Some(ready) = get(object, &["status", "ready"]) {
        return ready
            .as_bool()
            .ok_or_else(|| value::wrong(&["status", "ready"], "a boolean", &ctx.id));
    }
    Ok(list(object, &["status", "conditions"]).any(|c| {
        get(c, &["type"]).and_then(Value::as_str) == Some("Ready")
            && get(c, &["status"]).and_then(Value::as_str) == Some("True")
            && get(c, &["reason"]).and_then(Value::as_str) == Some("Succeeded")
    }))
}

fn aggregate(desired: &Value, items: &[Value], ctx: &Ctx<'_>) -> Result<Value> {
    let mut object = desired.clone();
    let mut status = Map::new();
    let mut counts = [0.0; 4];
    for item in items {
        let Some(reported) = get(item, &["status"]) else {
            continue;
        };
        for field in ["autogen", "ready"] {
            if let Some(v) = get(reported, &[field]) {
                status.insert(field.to_owned(), v.clone());
            }
        }
        if get(reported, &["rulecount"]).is_some() {
            for (count, kind) in counts.iter_mut().zip(RULE_KINDS) {
                *count += value::number_at(reported, &["rulecount", kind], &ctx.id)?;
            }
        }
    }
    let conditions = merge_conditions(items, &ctx.id)?;
    status.insert(
        "rulecount".into(),
        json!({
            "validate": number(counts[0]),
            "generate": number(counts[1]),
            "mutate": number(counts[2]),
            "verifyimages": number(counts[3]),
        }),
    );
    status.insert("conditions".into(), Value::Array(conditions));
    let fields = object
        .as_object_mut()
        .ok_or_else(|| crate::error::Cause::NotAnObject.at(&ctx.id))?;
    fields.insert("status".into(), Value::Object(status));
    Ok(value::shaped_status(object))
}
