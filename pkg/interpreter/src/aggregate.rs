//! AggregateStatus: fold the per-cluster statuses of a binding (`status.aggregatedStatus`) into the
//! resource template's `.status`. Every rule returns the template's new status, or `None` when it
//! would not change (the binding-status controller then skips the write).

use std::cmp::Ordering;
use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karmada_apis::work::v1alpha2::AggregatedStatusItem;
use serde_json::{Map, Value, json};

use crate::error::{AtObject, Cause, Result};
use crate::object::{self, CResult, go_semantic_eq};
use crate::reflect::{SERVICE_TYPE_LOAD_BALANCER, put_int};
use crate::rules::RuleContext;

/// The template's current `.status` (empty when absent).
fn template_status(template: &Value, ctx: &RuleContext<'_>) -> Result<Map<String, Value>> {
    Ok(object::opt_object(template, &["status"])
        .at(ctx.object)?
        .cloned()
        .unwrap_or_default())
}

/// A member's reported status, decoded and checked to be an object.
fn member_status(item: &AggregatedStatusItem, ctx: &RuleContext<'_>) -> Result<Option<Value>> {
    let wrong = || member_error(item, Cause::wrong_type(&["status"], "an object"), ctx);
    let Some(raw) = &item.status else {
        return Ok(None);
    };
    match raw.to_value().map_err(|_| wrong())? {
        Value::Null => Ok(None),
        status @ Value::Object(_) => Ok(Some(status)),
        _ => Err(wrong()),
    }
}

fn member_error(
    item: &AggregatedStatusItem,
    cause: Cause,
    ctx: &RuleContext<'_>,
) -> crate::error::InterpretError {
    ctx.error(Cause::MemberStatus {
        cluster: item.cluster_name.clone(),
        cause: Box::new(cause),
    })
}

/// Reads an integer field of a member status (0 when absent).
fn member_int(status: &Value, field: &str) -> CResult<i64> {
    Ok(object::opt_i64(status, &[field])?.unwrap_or(0))
}

/// The new status, unless it equals the old one under Go's zero-value rules.
fn changed(old: &Map<String, Value>, new: Map<String, Value>) -> Option<Value> {
    let new = Value::Object(new);
    (!go_semantic_eq(&Value::Object(old.clone()), &new)).then_some(new)
}

/// A summed counter of a workload status: its name and whether Go omits it when zero.
type Counter = (&'static str, bool);

/// Sums counters over the members and moves `observedGeneration` to the template's generation
/// only when every member has a status that observed its own current generation and was made
/// from the current template generation. Other status fields of the template are kept.
fn sum_counters(
    template: &Value,
    items: &[AggregatedStatusItem],
    counters: &[Counter],
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    let generation = object::generation(template).at(ctx.object)?;
    let old = template_status(template, ctx)?;
    let old_int = |field: &str| object::opt_i64(&Value::Object(old.clone()), &[field]);

    let mut sums = vec![0_i64; counters.len()];
    let mut caught_up = 0;
    for item in items {
        let Some(status) = member_status(item, ctx)? else {
            continue;
        };
        let status = &status;
        let read = |field: &str| member_int(status, field).map_err(|c| member_error(item, c, ctx));
        if read("observedGeneration")? >= read("generation")?
            && read("resourceTemplateGeneration")? >= generation
        {
            caught_up += 1;
        }
        for (sum, (field, _)) in sums.iter_mut().zip(counters) {
            *sum = sum.saturating_add(read(field)?);
        }
    }

    let old_observed = old_int("observedGeneration").at(ctx.object)?.unwrap_or(0);
    let observed = if caught_up == items.len() {
        generation
    } else {
        old_observed
    };
    let mut unchanged = observed == old_observed;
    for (sum, (field, _)) in sums.iter().zip(counters) {
        unchanged &= old_int(field).at(ctx.object)?.unwrap_or(0) == *sum;
    }
    if unchanged {
        return Ok(None);
    }

    let mut new = old;
    let mut write = |field: &str, value: i64, omit_zero: bool| {
        new.remove(field);
        put_int(&mut new, field, value, omit_zero);
    };
    write("observedGeneration", observed, true);
    for (sum, (field, omit_zero)) in sums.iter().zip(counters) {
        write(field, *sum, *omit_zero);
    }
    Ok(Some(Value::Object(new)))
}

/// Deployment: replicas, readyReplicas, updatedReplicas, availableReplicas, unavailableReplicas
/// summed; observedGeneration as in `sum_counters`.
pub(crate) fn deployment(
    template: &Value,
    items: &[AggregatedStatusItem],
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    const COUNTERS: [Counter; 5] = [
        ("replicas", true),
        ("readyReplicas", true),
        ("updatedReplicas", true),
        ("availableReplicas", true),
        ("unavailableReplicas", true),
    ];
    sum_counters(template, items, &COUNTERS, ctx)
}

/// ReplicaSet: replicas, readyReplicas, availableReplicas summed.
pub(crate) fn replica_set(
    template: &Value,
    items: &[AggregatedStatusItem],
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    const COUNTERS: [Counter; 3] = [
        ("replicas", false),
        ("readyReplicas", true),
        ("availableReplicas", true),
    ];
    sum_counters(template, items, &COUNTERS, ctx)
}

/// StatefulSet: availableReplicas, currentReplicas, readyReplicas, replicas, updatedReplicas
/// summed. (Karmada compares a member's template generation with the member's own generation
/// here, a slip; karmada-rs uses the template's generation as for the other workloads.)
pub(crate) fn stateful_set(
    template: &Value,
    items: &[AggregatedStatusItem],
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    const COUNTERS: [Counter; 5] = [
        ("availableReplicas", false),
        ("currentReplicas", true),
        ("readyReplicas", true),
        ("replicas", false),
        ("updatedReplicas", true),
    ];
    sum_counters(template, items, &COUNTERS, ctx)
}

/// DaemonSet: the seven scheduling counters summed.
pub(crate) fn daemon_set(
    template: &Value,
    items: &[AggregatedStatusItem],
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    const COUNTERS: [Counter; 7] = [
        ("currentNumberScheduled", false),
        ("desiredNumberScheduled", false),
        ("numberAvailable", true),
        ("numberMisscheduled", false),
        ("numberReady", false),
        ("updatedNumberScheduled", true),
        ("numberUnavailable", true),
    ];
    sum_counters(template, items, &COUNTERS, ctx)
}

fn parse_time(value: &Value, path: &str) -> CResult<Time> {
    object::decode(value, &[path])
}

fn time_value(time: &Time) -> Value {
    serde_json::to_value(time).unwrap_or(Value::Null)
}

fn job_finished(status: &Value) -> CResult<Option<String>> {
    for condition in object::opt_array(status, &["conditions"])?
        .into_iter()
        .flatten()
    {
        let kind = object::opt_str(condition, &["type"])?;
        let state = object::opt_str(condition, &["status"])?;
        if matches!(kind, Some("Complete" | "Failed")) && state == Some("True") {
            return Ok(kind.map(str::to_owned));
        }
    }
    Ok(None)
}

fn has_true_condition(status: &Value, kind: &str) -> CResult<bool> {
    for condition in object::opt_array(status, &["conditions"])?
        .into_iter()
        .flatten()
    {
        if object::opt_str(condition, &["type"])? == Some(kind)
            && object::opt_str(condition, &["status"])? == Some("True")
        {
            return Ok(true);
        }
    }
    Ok(false)
}

fn job_condition(kind: &str, reason: &str, message: String, now: &Value) -> Value {
    json!({
        "type": kind,
        "status": "True",
        "lastProbeTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    })
}

/// Job: active/succeeded/failed summed; a `Failed` condition naming the clusters where it failed;
/// `Complete` (and `SuccessCriteriaMet` when every member met it) once every member completed;
/// the earliest start time once every member started (kept once set); the latest completion time
/// once every member completed. A template that already finished is never updated again.
pub(crate) fn job(
    template: &Value,
    items: &[AggregatedStatusItem],
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    let old = template_status(template, ctx)?;
    if job_finished(&Value::Object(old.clone()))
        .at(ctx.object)?
        .is_some()
    {
        return Ok(None);
    }
    let (mut active, mut succeeded, mut failed) = (0_i64, 0_i64, 0_i64);
    let mut failed_clusters = Vec::new();
    let (mut completed, mut criteria_met, mut started, mut finished_at) = (0, 0, 0, 0);
    let mut start: Option<Time> = None;
    let mut completion: Option<Time> = None;
    for item in items {
        let Some(status) = member_status(item, ctx)? else {
            continue;
        };
        let status = &status;
        let wrap = |c| member_error(item, c, ctx);
        active = active.saturating_add(member_int(status, "active").map_err(wrap)?);
        succeeded = succeeded.saturating_add(member_int(status, "succeeded").map_err(wrap)?);
        failed = failed.saturating_add(member_int(status, "failed").map_err(wrap)?);
        match job_finished(status).map_err(wrap)?.as_deref() {
            Some("Complete") => completed += 1,
            Some(_) => failed_clusters.push(item.cluster_name.clone()),
            None => {}
        }
        if has_true_condition(status, "SuccessCriteriaMet").map_err(wrap)? {
            criteria_met += 1;
        }
        if let Some(value) = object::get(status, &["startTime"]).map_err(wrap)? {
            let time = parse_time(value, "startTime").map_err(wrap)?;
            started += 1;
            if start.as_ref().is_none_or(|s| time.0 < s.0) {
                start = Some(time);
            }
        }
        if let Some(value) = object::get(status, &["completionTime"]).map_err(wrap)? {
            let time = parse_time(value, "completionTime").map_err(wrap)?;
            finished_at += 1;
            if completion.as_ref().is_none_or(|c| c.0 < time.0) {
                completion = Some(time);
            }
        }
    }

    let now = time_value(&ctx.now());
    let mut conditions = Vec::new();
    if !failed_clusters.is_empty() {
        conditions.push(job_condition(
            "Failed",
            "JobFailed",
            format!(
                "Job executed failed in member clusters {}",
                failed_clusters.join(",")
            ),
            &now,
        ));
    }
    if completed == items.len() && completed > 0 {
        conditions.push(job_condition(
            "Complete",
            "Completed",
            "Job completed".into(),
            &now,
        ));
        if criteria_met == items.len() {
            conditions.push(job_condition(
                "SuccessCriteriaMet",
                "CompletionsReached",
                "All member clusters have met success criteria".into(),
                &now,
            ));
        }
    }

    let mut new = Map::new();
    if !conditions.is_empty() {
        new.insert("conditions".into(), Value::Array(conditions));
    }
    let old_start = match old.get("startTime") {
        None | Some(Value::Null) => None,
        Some(value) => Some(parse_time(value, "status.startTime").at(ctx.object)?),
    };
    let start = old_start.or_else(|| (started == items.len()).then_some(start).flatten());
    if let Some(start) = start {
        new.insert("startTime".into(), time_value(&start));
    }
    if let Some(completion) = completion.filter(|_| finished_at == items.len()) {
        new.insert("completionTime".into(), time_value(&completion));
    }
    put_int(&mut new, "active", active, true);
    put_int(&mut new, "succeeded", succeeded, true);
    put_int(&mut new, "failed", failed, true);
    Ok(changed(&old, new))
}

/// CronJob: the members' active Jobs listed together, the latest schedule and success times.
pub(crate) fn cron_job(
    template: &Value,
    items: &[AggregatedStatusItem],
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    let old = template_status(template, ctx)?;
    let mut active = Vec::new();
    let mut latest: [Option<Time>; 2] = [None, None];
    const TIMES: [&str; 2] = ["lastScheduleTime", "lastSuccessfulTime"];
    for item in items {
        let Some(status) = member_status(item, ctx)? else {
            continue;
        };
        let status = &status;
        let wrap = |c| member_error(item, c, ctx);
        if let Some(jobs) = object::opt_array(status, &["active"]).map_err(wrap)? {
            active.extend(jobs.iter().cloned());
        }
        for (slot, field) in latest.iter_mut().zip(TIMES) {
            if let Some(value) = object::get(status, &[field]).map_err(wrap)? {
                let time = parse_time(value, field).map_err(wrap)?;
                if slot.as_ref().is_none_or(|t| t.0 < time.0) {
                    *slot = Some(time);
                }
            }
        }
    }
    let mut new = old.clone();
    new.remove("active");
    if !active.is_empty() {
        new.insert("active".into(), Value::Array(active));
    }
    for (slot, field) in latest.iter().zip(TIMES) {
        new.remove(field);
        if let Some(time) = slot {
            new.insert(field.into(), time_value(time));
        }
    }
    Ok(changed(&old, new))
}

/// Pod: the most telling phase over the members (Failed, then Pending — also for members that
/// have not reported —, Running, Succeeded) and every member's container readiness and state.
pub(crate) fn pod(
    template: &Value,
    items: &[AggregatedStatusItem],
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    if items.is_empty() {
        return Ok(None);
    }
    let old = template_status(template, ctx)?;
    let mut phases = BTreeSet::new();
    let mut containers = Vec::new();
    let mut init_containers = Vec::new();
    for item in items {
        let Some(status) = member_status(item, ctx)? else {
            phases.insert("Pending".to_owned());
            continue;
        };
        let status = &status;
        let wrap = |c| member_error(item, c, ctx);
        phases.insert(
            object::opt_str(status, &["phase"])
                .map_err(wrap)?
                .unwrap_or_default()
                .to_owned(),
        );
        for (field, out) in [
            ("containerStatuses", &mut containers),
            ("initContainerStatuses", &mut init_containers),
        ] {
            for container in object::opt_array(status, &[field])
                .map_err(wrap)?
                .into_iter()
                .flatten()
            {
                let ready = object::opt_bool(container, &["ready"])
                    .map_err(wrap)?
                    .unwrap_or(false);
                let state = object::get(container, &["state"])
                    .map_err(wrap)?
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                out.push(json!({"ready": ready, "state": state}));
            }
        }
    }
    let phase = ["Failed", "Pending", "Running", "Succeeded"]
        .into_iter()
        .find(|p| phases.contains(*p));
    let mut new = Map::new();
    if let Some(phase) = phase {
        new.insert("phase".into(), Value::from(phase));
    }
    if !containers.is_empty() {
        new.insert("containerStatuses".into(), Value::Array(containers));
    }
    if !init_containers.is_empty() {
        new.insert(
            "initContainerStatuses".into(),
            Value::Array(init_containers),
        );
    }
    Ok(changed(&old, new))
}

/// PersistentVolume: the most telling phase (Failed, Pending — also for members that have not
/// reported —, Available, Bound, Released).
pub(crate) fn persistent_volume(
    template: &Value,
    items: &[AggregatedStatusItem],
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    let old = template_status(template, ctx)?;
    let mut phases = BTreeSet::new();
    for item in items {
        match member_status(item, ctx)? {
            None => {
                phases.insert("Pending".to_owned());
            }
            Some(ref status) => {
                let phase = object::opt_str(status, &["phase"])
                    .map_err(|c| member_error(item, c, ctx))?
                    .unwrap_or_default();
                phases.insert(phase.to_owned());
            }
        }
    }
    let mut new = Map::new();
    if let Some(phase) = ["Failed", "Pending", "Available", "Bound", "Released"]
        .into_iter()
        .find(|p| phases.contains(*p))
    {
        new.insert("phase".into(), Value::from(phase));
    }
    Ok(changed(&old, new))
}

/// PersistentVolumeClaim: Bound unless a member reports otherwise; Lost wins over everything.
pub(crate) fn persistent_volume_claim(
    template: &Value,
    items: &[AggregatedStatusItem],
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    let old = template_status(template, ctx)?;
    let mut phase = "Bound".to_owned();
    for item in items {
        let Some(status) = member_status(item, ctx)? else {
            continue;
        };
        let status = &status;
        let member = object::opt_str(status, &["phase"])
            .map_err(|c| member_error(item, c, ctx))?
            .unwrap_or_default();
        if member == "Lost" {
            phase = member.to_owned();
            break;
        }
        if member != "Bound" {
            phase = member.to_owned();
        }
    }
    let mut new = Map::new();
    if !phase.is_empty() {
        new.insert("phase".into(), Value::from(phase));
    }
    Ok(changed(&old, new))
}

/// PodDisruptionBudget: the counters summed; disrupted pods keyed `<cluster>/<pod>`.
pub(crate) fn pod_disruption_budget(
    template: &Value,
    items: &[AggregatedStatusItem],
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    const COUNTERS: [&str; 4] = [
        "currentHealthy",
        "desiredHealthy",
        "expectedPods",
        "disruptionsAllowed",
    ];
    let old = template_status(template, ctx)?;
    let mut sums = [0_i64; 4];
    let mut disrupted = Map::new();
    for item in items {
        let Some(status) = member_status(item, ctx)? else {
            continue;
        };
        let status = &status;
        let wrap = |c| member_error(item, c, ctx);
        for (sum, field) in sums.iter_mut().zip(COUNTERS) {
            *sum = sum.saturating_add(member_int(status, field).map_err(wrap)?);
        }
        if let Some(pods) = object::opt_object(status, &["disruptedPods"]).map_err(wrap)? {
            for (pod, time) in pods {
                disrupted.insert(format!("{}/{pod}", item.cluster_name), time.clone());
            }
        }
    }
    let mut new = Map::new();
    for (sum, field) in sums.iter().zip(COUNTERS) {
        put_int(&mut new, field, *sum, false);
    }
    if !disrupted.is_empty() {
        new.insert("disruptedPods".into(), Value::Object(disrupted));
    }
    Ok(changed(&old, new))
}

/// HorizontalPodAutoscaler: current and desired replicas summed.
pub(crate) fn horizontal_pod_autoscaler(
    template: &Value,
    items: &[AggregatedStatusItem],
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    let old = template_status(template, ctx)?;
    let (mut current, mut desired) = (0_i64, 0_i64);
    for item in items {
        let Some(status) = member_status(item, ctx)? else {
            continue;
        };
        let status = &status;
        let wrap = |c| member_error(item, c, ctx);
        current = current.saturating_add(member_int(status, "currentReplicas").map_err(wrap)?);
        desired = desired.saturating_add(member_int(status, "desiredReplicas").map_err(wrap)?);
    }
    let mut new = Map::new();
    put_int(&mut new, "currentReplicas", current, true);
    put_int(&mut new, "desiredReplicas", desired, false);
    Ok(changed(&old, new))
}

/// One load-balancer ingress point being merged.
struct IngressPoint {
    hostname: String,
    ip: String,
    ip_mode: Option<String>,
    fields: Map<String, Value>,
    ports: BTreeSet<PortStatus>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct PortStatus {
    port: i64,
    protocol: String,
    error: Option<String>,
}

/// Merges the members' `status.loadBalancer.ingress` lists: entries with the same hostname, IP
/// (and IP mode, for Services) become one with the union of their ports; the result is sorted
/// (hostnames first, then by IP, then IP mode), ports by port, protocol and error.
fn merge_load_balancer_ingress(
    items: &[AggregatedStatusItem],
    with_ip_mode: bool,
    ctx: &RuleContext<'_>,
) -> Result<Vec<Value>> {
    let mut points: Vec<IngressPoint> = Vec::new();
    for item in items {
        let Some(status) = member_status(item, ctx)? else {
            continue;
        };
        let status = &status;
        let wrap = |c| member_error(item, c, ctx);
        let list = object::opt_array(status, &["loadBalancer", "ingress"]).map_err(wrap)?;
        for entry in list.into_iter().flatten() {
            let Value::Object(fields) = entry else {
                return Err(wrap(Cause::wrong_type(
                    &["loadBalancer", "ingress[]"],
                    "an object",
                )));
            };
            let text = |f: &str| -> CResult<String> {
                Ok(object::opt_str(entry, &[f])?.unwrap_or_default().to_owned())
            };
            let hostname = text("hostname").map_err(wrap)?;
            let ip = text("ip").map_err(wrap)?;
            let ip_mode = if with_ip_mode {
                object::opt_str(entry, &["ipMode"])
                    .map_err(wrap)?
                    .map(str::to_owned)
            } else {
                None
            };
            let mut ports = BTreeSet::new();
            for port in object::opt_array(entry, &["ports"])
                .map_err(wrap)?
                .into_iter()
                .flatten()
            {
                ports.insert(PortStatus {
                    port: object::opt_i64(port, &["port"]).map_err(wrap)?.unwrap_or(0),
                    protocol: object::opt_str(port, &["protocol"])
                        .map_err(wrap)?
                        .unwrap_or_default()
                        .to_owned(),
                    error: object::opt_str(port, &["error"])
                        .map_err(wrap)?
                        .map(str::to_owned),
                });
            }
            let mut fields = fields.clone();
            fields.remove("ports");
            match points
                .iter_mut()
                .find(|p| p.hostname == hostname && p.ip == ip && p.ip_mode == ip_mode)
            {
                Some(point) => {
                    point.fields = fields;
                    point.ports.extend(ports);
                }
                None => points.push(IngressPoint {
                    hostname,
                    ip,
                    ip_mode,
                    fields,
                    ports,
                }),
            }
        }
    }
    points.sort_by(|a, b| {
        let by_hostname = match (a.hostname.is_empty(), b.hostname.is_empty()) {
            (false, true) => Ordering::Less,
            (true, false) => Ordering::Greater,
            _ => a.hostname.cmp(&b.hostname),
        };
        let by_mode = match (&a.ip_mode, &b.ip_mode) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
        by_hostname.then_with(|| a.ip.cmp(&b.ip)).then(by_mode)
    });
    Ok(points
        .into_iter()
        .map(|point| {
            let mut fields = point.fields;
            if !point.ports.is_empty() {
                let ports = point
                    .ports
                    .into_iter()
                    .map(|p| {
                        let mut port = json!({"port": p.port, "protocol": p.protocol});
                        if let (Some(error), Value::Object(map)) = (p.error, &mut port) {
                            map.insert("error".into(), Value::from(error));
                        }
                        port
                    })
                    .collect();
                fields.insert("ports".into(), Value::Array(ports));
            }
            Value::Object(fields)
        })
        .collect())
}

fn load_balancer_status(ingress: Vec<Value>) -> Map<String, Value> {
    let mut load_balancer = Map::new();
    if !ingress.is_empty() {
        load_balancer.insert("ingress".into(), Value::Array(ingress));
    }
    let mut status = Map::new();
    status.insert("loadBalancer".into(), Value::Object(load_balancer));
    status
}

/// Service: for LoadBalancer Services, the members' load-balancer ingress points merged.
pub(crate) fn service(
    template: &Value,
    items: &[AggregatedStatusItem],
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    if object::opt_str(template, &["spec", "type"]).at(ctx.object)?
        != Some(SERVICE_TYPE_LOAD_BALANCER)
    {
        return Ok(None);
    }
    let old = template_status(template, ctx)?;
    let ingress = merge_load_balancer_ingress(items, true, ctx)?;
    Ok(changed(&old, load_balancer_status(ingress)))
}

/// Ingress: the members' load-balancer ingress points merged.
pub(crate) fn ingress(
    template: &Value,
    items: &[AggregatedStatusItem],
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    let old = template_status(template, ctx)?;
    let ingress = merge_load_balancer_ingress(items, false, ctx)?;
    Ok(changed(&old, load_balancer_status(ingress)))
}
