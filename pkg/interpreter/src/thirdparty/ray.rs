//! KubeRay (`ray.io/v1`): RayCluster and RayJob. Both are multi-component workloads (the head,
//! one replica, and each worker group with its replicas); a RayCluster is healthy when its head
//! pod is ready and it is provisioned without replica failures, a RayJob while it runs or once
//! it succeeded. A RayCluster's aggregate sums the worker counters and desired resources across
//! members; a RayJob's keeps the worst deployment and job states.

use std::collections::{BTreeSet, HashMap};

use karmada_apis::config::v1alpha1::DependentObjectReference;
use karmada_apis::work::v1alpha2::Component;
use serde_json::{Value, json};

use super::argo::{SECRET_REF_PLUGINS, name_at};
use super::kruise::list;
use super::kubeflow::{set_status, template_requirements};
use super::value::{self, get, lua_lt, number, status_mut};
use super::{Ctx, KindInterpretation, components, named_dependencies};
use crate::error::Result;

pub(super) fn register(table: &mut HashMap<(&'static str, &'static str), KindInterpretation>) {
    table.insert(
        ("ray.io/v1", "RayCluster"),
        KindInterpretation {
            components: Some(|o, ctx| match get(o, &["spec"]) {
                Some(spec) => cluster_components(spec, ctx),
                None => Ok(Vec::new()),
            }),
            aggregate: Some(cluster_aggregate),
            health: Some(|o, _| Ok(cluster_health(o))),
            ..Default::default()
        },
    );
    table.insert(
        ("ray.io/v1", "RayJob"),
        KindInterpretation {
            components: Some(|o, ctx| match get(o, &["spec", "rayClusterSpec"]) {
                Some(spec) => cluster_components(spec, ctx),
                None => Ok(Vec::new()),
            }),
            aggregate: Some(job_aggregate),
            health: Some(|o, _| Ok(job_health(o))),
            dependencies: Some(job_dependencies),
            ..Default::default()
        },
    );
}

/// The head (one replica) and each worker group of a RayCluster spec.
fn cluster_components(spec: &Value, ctx: &Ctx<'_>) -> Result<Vec<Component>> {
    let mut out = Vec::new();
    if let Some(template) = get(spec, &["headGroupSpec", "template"]) {
        out.push(json!({"name": "ray-head", "replicas": 1,
            "replicaRequirements": template_requirements(template, ctx)?}));
    }
    for (i, group) in list(spec, &["workerGroupSpecs"]).enumerate() {
        let name = match get(group, &["groupName"]) {
            None => format!("worker-{}", i + 1),
            Some(Value::String(s)) if s.is_empty() => format!("worker-{}", i + 1),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        let replicas = get(group, &["replicas"]).cloned().unwrap_or(json!(0));
        let requirements = match get(group, &["template"]) {
            Some(t) => template_requirements(t, ctx)?,
            None => Value::Null,
        };
        out.push(json!({"name": name, "replicas": replicas, "replicaRequirements": requirements}));
    }
    components(out, ctx)
}

fn is_true(condition: &Value, kind: &str) -> bool {
    get(condition, &["type"]).and_then(Value::as_str) == Some(kind)
        && get(condition, &["status"]).and_then(Value::as_str) == Some("True")
}

fn cluster_health(object: &Value) -> bool {
    if get(object, &["status", "conditions"]).is_none() {
        return false;
    }
    let conditions: Vec<&Value> = list(object, &["status", "conditions"]).collect();
    let any = |kind: &str| conditions.iter().any(|c| is_true(c, kind));
    any("HeadPodReady") && any("RayClusterProvisioned") && !any("RayClusterReplicaFailure")
}

/// Lua's `tostring` of a number (`%.14g`).
fn lua_tostring(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        return format!("{}", n as i64);
    }
    if n == 0.0 || !n.is_finite() {
        return n.to_string();
    }
    let exponent = n.abs().log10().floor() as i32;
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s
        }
    };
    if !(-4..14).contains(&exponent) {
        let text = format!("{n:.13e}");
        let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
        let exp: i32 = exp.parse().unwrap_or_default();
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa.to_owned()), exp.abs())
    } else {
        let decimals = usize::try_from(13 - exponent).unwrap_or_default();
        trim(format!("{n:.decimals$}"))
    }
}

/// A counter from a member (numbers, or strings Lua reads as numbers in arithmetic).
fn arithmetic(v: &Value, path: &[&str], ctx: &Ctx<'_>) -> Result<f64> {
    value::as_number(v).ok_or_else(|| value::wrong(path, "a number", &ctx.id))
}

#[allow(
    clippy::too_many_lines,
    reason = "one pass over the members' statuses folding every field the aggregation keeps; split, the accumulators would travel as one struct"
)]
fn cluster_aggregate(desired: &Value, items: &[Value], ctx: &Ctx<'_>) -> Result<Value> {
    let mut object = desired.clone();
    if items.len() == 1 {
        set_status(&mut object, get(&items[0], &["status"]).cloned(), ctx)?;
        return Ok(value::shaped_status(object));
    }
    const COUNTERS: [&str; 5] = [
        "readyWorkerReplicas",
        "availableWorkerReplicas",
        "maxWorkerReplicas",
        "minWorkerReplicas",
        "desiredWorkerReplicas",
    ];
    const RESOURCES: [&str; 3] = ["desiredCPU", "desiredGPU", "desiredTPU"];
    let mut conditions = Vec::new();
    let mut counters = [0.0; 5];
    let mut resources = [0.0; 3];
    let mut memory = 0.0;
    let mut last_update: Option<Value> = None;
    let (mut endpoints, mut head, mut state, mut transitions) = (None, None, None, None);
    for item in items {
        let Some(s) = get(item, &["status"]) else {
            continue;
        };
        conditions.extend(list(s, &["conditions"]).cloned());
        for (c, field) in counters.iter_mut().zip(COUNTERS) {
            if let Some(v) = get(s, &[field]) {
                *c += arithmetic(v, &["status", field], ctx)?;
            }
        }
        for (r, field) in resources.iter_mut().zip(RESOURCES) {
            if let Some(v) = get(s, &[field]).filter(|v| v.as_str() != Some("")) {
                let n = match v {
                    Value::Number(n) => n.as_f64(),
                    Value::String(text) => value::to_number(text),
                    _ => None,
                };
                *r += n.ok_or_else(|| value::wrong(&["status", field], "a number", &ctx.id))?;
            }
        }
        if let Some(v) = get(s, &["desiredMemory"]).filter(|v| v.as_str() != Some("")) {
            let text = match v {
                Value::String(t) => t.clone(),
                Value::Number(n) => n.to_string(),
                _ => {
                    return Err(value::wrong(
                        &["status", "desiredMemory"],
                        "a string",
                        &ctx.id,
                    ));
                }
            };
            let digits: String = text
                .chars()
                .skip_while(|c| !c.is_ascii_digit())
                .take_while(char::is_ascii_digit)
                .collect();
            if let Some(n) = value::to_number(&digits) {
                memory += n;
            }
        }
        if let Some(t) = get(s, &["lastUpdateTime"]) {
            let later = match &last_update {
                None => true,
                Some(current) => lua_lt(current, t, &["status", "lastUpdateTime"], &ctx.id)?,
            };
            if later {
                last_update = Some(t.clone());
            }
        }
        if endpoints.is_none() {
            endpoints = get(s, &["endpoints"]).cloned();
        }
        if head.is_none() {
            head = get(s, &["head"]).cloned();
        }
        if state.is_none() && get(s, &["state"]).is_some() {
            state = get(s, &["state"]).cloned();
            transitions = get(s, &["stateTransitionTimes"]).cloned();
        }
    }
    let status = status_mut(&mut object, &ctx.id)?;
    status.insert("conditions".into(), Value::Array(conditions));
    for (c, field) in counters.into_iter().zip(COUNTERS) {
        status.insert(field.to_owned(), number(c));
    }
    for (r, field) in resources.into_iter().zip(RESOURCES) {
        status.insert(field.to_owned(), Value::from(lua_tostring(r)));
    }
    if memory > 0.0 {
        status.insert(
            "desiredMemory".into(),
            Value::from(format!("{}G", lua_tostring(memory))),
        );
    }
    for (field, v) in [
        ("lastUpdateTime", last_update),
        ("endpoints", endpoints),
        ("head", head),
        ("state", state),
        ("stateTransitionTimes", transitions),
    ] {
        match v {
            Some(v) => status.insert(field.to_owned(), v),
            None => status.remove(field),
        };
    }
    Ok(value::shaped_status(object))
}

fn job_health(object: &Value) -> bool {
    let Some(status) = get(object, &["status"]) else {
        return false;
    };
    let deployment = get(status, &["jobDeploymentStatus"]).and_then(Value::as_str);
    let job = get(status, &["jobStatus"]).and_then(Value::as_str);
    deployment == Some("Running") || (deployment == Some("Complete") && job == Some("SUCCEEDED"))
}

fn deployment_priority(state: &Value) -> i32 {
    match state.as_str() {
        Some("Initializing") => 1,
        Some("Waiting") => 2,
        Some("Suspending" | "Suspended") => 3,
        Some("Retrying") => 4,
        Some("Running") => 5,
        Some("Complete") => 6,
        Some("ValidationFailed") => 7,
        Some("Failed") => 8,
        _ => 0,
    }
}

fn job_status_priority(state: &Value) -> i32 {
    match state.as_str() {
        Some("PENDING") => 1,
        Some("RUNNING") => 2,
        Some("SUCCEEDED") => 3,
        Some("STOPPED") => 4,
        Some("FAILED") => 5,
        _ => 0,
    }
}

fn job_aggregate(desired: &Value, items: &[Value], ctx: &Ctx<'_>) -> Result<Value> {
    let mut object = desired.clone();
    if items.len() == 1 {
        set_status(&mut object, get(&items[0], &["status"]).cloned(), ctx)?;
        return Ok(value::shaped_status(object));
    }
    let (mut worst_deployment, mut worst_job) = (-1, -1);
    let (mut deployment, mut job, mut reason, mut message) = (None, None, None, None);
    for item in items {
        let Some(s) = get(item, &["status"]) else {
            continue;
        };
        if let Some(d) = get(s, &["jobDeploymentStatus"]) {
            let p = deployment_priority(d);
            if p > worst_deployment {
                worst_deployment = p;
                deployment = Some(d.clone());
                reason = get(s, &["reason"]).cloned();
                message = get(s, &["message"]).cloned();
            }
        }
        if let Some(j) = get(s, &["jobStatus"]).filter(|j| j.as_str() != Some("")) {
            let p = job_status_priority(j);
            if p > worst_job {
                worst_job = p;
                job = Some(j.clone());
            }
        }
    }
    let status = status_mut(&mut object, &ctx.id)?;
    for (field, v) in [
        ("jobStatus", job),
        ("jobDeploymentStatus", deployment),
        ("reason", reason),
        ("message", message),
    ] {
        match v {
            Some(v) => status.insert(field.to_owned(), v),
            None => status.remove(field),
        };
    }
    Ok(value::shaped_status(object))
}

#[derive(Default)]
struct Found {
    config_maps: BTreeSet<String>,
    secrets: BTreeSet<String>,
    accounts: BTreeSet<String>,
    claims: BTreeSet<String>,
}

impl Found {
    fn pod_spec(&mut self, spec: &Value) {
        self.accounts
            .extend(name_at(spec, &["serviceAccountName"]).filter(|n| n != "default"));
        for pull in list(spec, &["imagePullSecrets"]) {
            self.secrets.extend(name_at(pull, &["name"]));
        }
        for volume in list(spec, &["volumes"]) {
            self.config_maps
                .extend(name_at(volume, &["configMap", "name"]));
            self.secrets
                .extend(name_at(volume, &["secret", "secretName"]));
            for source in list(volume, &["projected", "sources"]) {
                self.config_maps
                    .extend(name_at(source, &["configMap", "name"]));
                self.secrets.extend(name_at(source, &["secret", "name"]));
            }
            self.claims
                .extend(name_at(volume, &["persistentVolumeClaim", "claimName"]));
            self.secrets
                .extend(name_at(volume, &["azureFile", "secretName"]));
            for plugin in SECRET_REF_PLUGINS {
                self.secrets
                    .extend(name_at(volume, &[plugin, "secretRef", "name"]));
            }
            self.secrets
                .extend(name_at(volume, &["csi", "nodePublishSecretRef", "name"]));
        }
        for containers in ["containers", "initContainers"] {
            for container in list(spec, &[containers]) {
                for from in list(container, &["envFrom"]) {
                    self.config_maps
                        .extend(name_at(from, &["configMapRef", "name"]));
                    self.secrets.extend(name_at(from, &["secretRef", "name"]));
                }
                for env in list(container, &["env"]) {
                    self.config_maps
                        .extend(name_at(env, &["valueFrom", "configMapKeyRef", "name"]));
                    self.secrets
                        .extend(name_at(env, &["valueFrom", "secretKeyRef", "name"]));
                }
            }
        }
    }
}

fn job_dependencies(object: &Value, _ctx: &Ctx<'_>) -> Result<Vec<DependentObjectReference>> {
    let mut found = Found::default();
    if let Some(cluster) = get(object, &["spec", "rayClusterSpec"]) {
        if let Some(spec) = get(cluster, &["headGroupSpec", "template", "spec"]) {
            found.pod_spec(spec);
        }
        for group in list(cluster, &["workerGroupSpecs"]) {
            if let Some(spec) = get(group, &["template", "spec"]) {
                found.pod_spec(spec);
            }
        }
    }
    if let Some(spec) = get(object, &["spec", "submitterPodTemplate", "spec"]) {
        found.pod_spec(spec);
    }
    Ok(named_dependencies(
        get(object, &["metadata", "namespace"]),
        &[
            ("ConfigMap", found.config_maps),
            ("Secret", found.secrets),
            ("ServiceAccount", found.accounts),
            ("PersistentVolumeClaim", found.claims),
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::lua_tostring;

    #[test]
    fn numbers_print_as_lua_prints_them() {
        assert_eq!(lua_tostring(3.0), "3");
        assert_eq!(lua_tostring(0.5), "0.5");
        assert_eq!(lua_tostring(0.1 + 0.2), "0.3");
        assert_eq!(lua_tostring(1e20), "1e+20");
        assert_eq!(lua_tostring(0.0), "0");
    }
}
