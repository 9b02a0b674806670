//! OpenKruise (`apps.kruise.io`): CloneSet, Advanced StatefulSet, Advanced DaemonSet,
//! BroadcastJob, AdvancedCronJob, SidecarSet, UnitedDeployment.
//!
//! The replicated workloads (CloneSet, StatefulSet, UnitedDeployment) divide `spec.replicas`,
//! report their replica counters with the member's `generation` and the template generation it
//! was made from (`resourcetemplate.karmada.io/generation`), sum the counters across members and
//! advance the template's `observedGeneration` only when every member has caught up with the
//! template's generation; they are healthy when the member has observed its generation and
//! every desired replica is updated and available.

use std::collections::{BTreeMap, HashMap};

use karmada_apis::config::v1alpha1::DependentObjectReference;
use serde_json::{Map, Value, json};

use super::value::{
    self, get, index, less, lua_eq, non_empty, number, number_at, number_or, shape, status_mut,
};
use super::{Ctx, KindInterpretation, pod_template_dependencies, replicas_with_template};
use crate::error::Result;
use crate::rules::Replicas;

const GROUP_V1ALPHA1: &str = "apps.kruise.io/v1alpha1";
const GROUP_V1BETA1: &str = "apps.kruise.io/v1beta1";

pub(super) fn register(table: &mut HashMap<(&'static str, &'static str), KindInterpretation>) {
    table.insert(
        (GROUP_V1ALPHA1, "CloneSet"),
        KindInterpretation {
            replicas: Some(spec_replicas),
            revise: Some(revise_spec_replicas),
            aggregate: Some(|d, items, ctx| aggregate_workload(d, items, &CLONE_SET, ctx)),
            reflect: Some(|o, ctx| reflect_workload(o, CLONE_SET.reflected, ctx)),
            health: Some(replicated_health),
            dependencies: Some(template_dependencies),
            ..Default::default()
        },
    );
    table.insert(
        (GROUP_V1BETA1, "StatefulSet"),
        KindInterpretation {
            replicas: Some(spec_replicas),
            revise: Some(revise_spec_replicas),
            aggregate: Some(|d, items, ctx| aggregate_workload(d, items, &STATEFUL_SET, ctx)),
            reflect: Some(|o, ctx| reflect_workload(o, STATEFUL_SET.reflected, ctx)),
            health: Some(replicated_health),
            dependencies: Some(template_dependencies),
            ..Default::default()
        },
    );
    table.insert(
        (GROUP_V1ALPHA1, "DaemonSet"),
        KindInterpretation {
            aggregate: Some(|d, items, ctx| aggregate_workload(d, items, &DAEMON_SET, ctx)),
            reflect: Some(|o, ctx| reflect_workload(o, DAEMON_SET.reflected, ctx)),
            health: Some(daemon_set_health),
            dependencies: Some(template_dependencies),
            ..Default::default()
        },
    );
    table.insert(
        (GROUP_V1ALPHA1, "UnitedDeployment"),
        KindInterpretation {
            replicas: Some(spec_replicas),
            revise: Some(revise_spec_replicas),
            aggregate: Some(united_deployment_aggregate),
            reflect: Some(|o, ctx| reflect_workload(o, UNITED_DEPLOYMENT_REFLECTED, ctx)),
            health: Some(united_deployment_health),
            dependencies: Some(template_dependencies),
            ..Default::default()
        },
    );
    table.insert(
        (GROUP_V1ALPHA1, "BroadcastJob"),
        KindInterpretation {
            replicas: Some(broadcast_job_replicas),
            revise: Some(revise_parallelism),
            retain: Some(broadcast_job_retain),
            aggregate: Some(broadcast_job_aggregate),
            reflect: Some(broadcast_job_reflect),
            health: Some(broadcast_job_health),
            dependencies: Some(template_dependencies),
            ..Default::default()
        },
    );
    table.insert(
        (GROUP_V1ALPHA1, "AdvancedCronJob"),
        KindInterpretation {
            aggregate: Some(advanced_cron_job_aggregate),
            dependencies: Some(advanced_cron_job_dependencies),
            ..Default::default()
        },
    );
    table.insert(
        (GROUP_V1ALPHA1, "SidecarSet"),
        KindInterpretation {
            replicas: Some(|_, _| {
                Ok(Replicas {
                    replicas: 0,
                    requirements: None,
                })
            }),
            retain: Some(|desired, observed, _| {
                Ok(shape(desired.clone(), true, &[desired, observed]))
            }),
            aggregate: Some(sidecar_set_aggregate),
            reflect: Some(sidecar_set_reflect),
            health: Some(sidecar_set_health),
            dependencies: Some(sidecar_set_dependencies),
            ..Default::default()
        },
    );
}

/// How a replicated workload's member statuses are folded together.
pub(super) struct Workload {
    /// Counters summed across members.
    pub(super) summed: &'static [&'static str],
    /// Fields taken from the last member that reports them non-empty, and their initial value.
    pub(super) last: &'static [(&'static str, Initial)],
    /// Status fields reported from members (besides `generation` and
    /// `resourceTemplateGeneration`).
    pub(super) reflected: &'static [&'static str],
}

/// The value a "last reported" field has when no member reports it.
#[derive(Clone, Copy)]
pub(super) enum Initial {
    Empty,
    Zero,
}

const CLONE_SET: Workload = Workload {
    summed: &[
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
        "updatedReadyReplicas",
        "expectedUpdatedReplicas",
    ],
    last: &[
        ("updateRevision", Initial::Empty),
        ("currentRevision", Initial::Empty),
        ("labelSelector", Initial::Empty),
    ],
    reflected: &[
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
        "updatedReadyReplicas",
        "expectedUpdatedReplicas",
        "updateRevision",
        "currentRevision",
        "observedGeneration",
        "labelSelector",
    ],
};

const STATEFUL_SET: Workload = Workload {
    summed: &[
        "replicas",
        "readyReplicas",
        "currentReplicas",
        "updatedReplicas",
        "availableReplicas",
        "updatedReadyReplicas",
    ],
    last: &[
        ("updateRevision", Initial::Empty),
        ("currentRevision", Initial::Empty),
    ],
    reflected: &[
        "replicas",
        "readyReplicas",
        "currentReplicas",
        "updatedReplicas",
        "availableReplicas",
        "updateRevision",
        "currentRevision",
        "updatedReadyReplicas",
        "observedGeneration",
    ],
};

const DAEMON_SET: Workload = Workload {
    summed: &[
        "currentNumberScheduled",
        "numberMisscheduled",
        "desiredNumberScheduled",
        "numberReady",
        "updatedNumberScheduled",
        "numberAvailable",
        "numberUnavailable",
    ],
    last: &[("daemonSetHash", Initial::Zero)],
    reflected: &[
        "observedGeneration",
        "currentNumberScheduled",
        "numberMisscheduled",
        "desiredNumberScheduled",
        "numberReady",
        "updatedNumberScheduled",
        "numberAvailable",
        "numberUnavailable",
        "daemonSetHash",
    ],
};

const UNITED_DEPLOYMENT_REFLECTED: &[&str] = &[
    "replicas",
    "updatedReplicas",
    "readyReplicas",
    "availableReplicas",
    "unavailableReplicas",
    "observedGeneration",
    "conditions",
];

const UNITED_DEPLOYMENT_SUMMED: &[&str] = &[
    "replicas",
    "updatedReplicas",
    "readyReplicas",
    "availableReplicas",
    "unavailableReplicas",
];

fn spec_replicas(object: &Value, ctx: &Ctx<'_>) -> Result<Replicas> {
    let replicas = number_at(object, &["spec", "replicas"], &ctx.id)?;
    replicas_with_template(replicas, get(object, &["spec", "template"]), ctx)
}

/// Sets `spec.<field>` to the cluster's share.
pub(super) fn revise_field(
    object: &Value,
    field: &str,
    replicas: i64,
    ctx: &Ctx<'_>,
) -> Result<Value> {
    let mut revised = object.clone();
    value::set(
        &mut revised,
        &["spec", field],
        Value::from(replicas),
        &ctx.id,
    )?;
    Ok(shape(revised, true, &[object]))
}

fn revise_spec_replicas(object: &Value, replicas: i64, ctx: &Ctx<'_>) -> Result<Value> {
    revise_field(object, "replicas", replicas, ctx)
}

fn revise_parallelism(object: &Value, replicas: i64, ctx: &Ctx<'_>) -> Result<Value> {
    revise_field(object, "parallelism", replicas, ctx)
}

fn template_dependencies(object: &Value, ctx: &Ctx<'_>) -> Result<Vec<DependentObjectReference>> {
    index(object, &["spec", "template"], &ctx.id)?;
    Ok(pod_template_dependencies(
        get(object, &["spec", "template"]),
        get(object, &["metadata", "namespace"]),
    ))
}

/// The member's generation and the template generation it was made from, into `status`.
pub(super) fn report_generations(object: &Value, status: &mut Map<String, Value>) {
    if get(object, &["metadata"]).is_none() {
        return;
    }
    if let Some(generation) = get(object, &["metadata", "generation"]) {
        status.insert("generation".into(), generation.clone());
    }
    let annotation = get(
        object,
        &[
            "metadata",
            "annotations",
            "resourcetemplate.karmada.io/generation",
        ],
    );
    if let Some(n) = annotation
        .and_then(Value::as_str)
        .and_then(value::to_number)
    {
        status.insert("resourceTemplateGeneration".into(), number(n));
    } else if let Some(n) = annotation.filter(|a| a.is_number()) {
        status.insert("resourceTemplateGeneration".into(), n.clone());
    }
}

/// The named status fields of a member, with its generations.
pub(super) fn reflect_workload(object: &Value, fields: &[&str], _ctx: &Ctx<'_>) -> Result<Value> {
    let mut status = Map::new();
    let Some(observed) = get(object, &["status"]) else {
        return Ok(json!({}));
    };
    for field in fields {
        if let Some(v) = get(observed, &[field]) {
            status.insert((*field).to_owned(), v.clone());
        }
    }
    report_generations(object, &mut status);
    Ok(shape(Value::Object(status), true, &[]))
}

/// `metadata.generation` made 0 when absent, and `status.observedGeneration` likewise; returns
/// the template's generation and observed generation.
pub(super) fn init_generations(object: &mut Value, ctx: &Ctx<'_>) -> Result<(Value, Value)> {
    let metadata = object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| value::missing(&["metadata"], &ctx.id))?;
    let generation = metadata
        .entry("generation")
        .or_insert_with(|| Value::from(0))
        .clone();
    let status = status_mut(object, &ctx.id)?;
    let observed = status
        .entry("observedGeneration")
        .or_insert_with(|| Value::from(0))
        .clone();
    Ok((generation, observed))
}

/// Whether a member's status says it has caught up with the template's `generation`.
pub(super) fn caught_up(status: Option<&Value>, generation: &Value) -> bool {
    let read = |field: &str| {
        status
            .and_then(|s| get(s, &[field]))
            .cloned()
            .unwrap_or_else(|| Value::from(0))
    };
    lua_eq(Some(&read("resourceTemplateGeneration")), Some(generation))
        && lua_eq(Some(&read("generation")), Some(&read("observedGeneration")))
}

fn add(total: &mut f64, item_status: &Value, field: &str, ctx: &Ctx<'_>) -> Result<()> {
    if let Some(v) = get(item_status, &[field]) {
        *total += value::as_number(v)
            .ok_or_else(|| value::wrong(&["statusItems", "status", field], "a number", &ctx.id))?;
    }
    Ok(())
}

fn aggregate_workload(
    desired: &Value,
    items: &[Value],
    workload: &Workload,
    ctx: &Ctx<'_>,
) -> Result<Value> {
    let mut object = desired.clone();
    let (generation, observed_generation) = init_generations(&mut object, ctx)?;
    let mut sums = vec![0.0; workload.summed.len()];
    let mut last: Vec<Value> = workload
        .last
        .iter()
        .map(|(_, initial)| match initial {
            Initial::Empty => Value::from(""),
            Initial::Zero => Value::from(0),
        })
        .collect();
    let mut caught = 0;
    for item in items {
        let status = get(item, &["status"]);
        if let Some(status) = status {
            for (sum, field) in sums.iter_mut().zip(workload.summed) {
                add(sum, status, field, ctx)?;
            }
            for (slot, (field, _)) in last.iter_mut().zip(workload.last) {
                if let Some(v) = non_empty(status, &[field]) {
                    *slot = v.clone();
                }
            }
        }
        if caught_up(status, &generation) {
            caught += 1;
        }
    }
    let status = status_mut(&mut object, &ctx.id)?;
    let observed = if caught == items.len() {
        generation
    } else {
        observed_generation
    };
    status.insert("observedGeneration".into(), observed);
    for (sum, field) in sums.into_iter().zip(workload.summed) {
        status.insert((*field).to_owned(), number(sum));
    }
    for (v, (field, _)) in last.into_iter().zip(workload.last) {
        status.insert((*field).to_owned(), v);
    }
    Ok(value::shaped_status(object))
}

fn replicated_health(object: &Value, ctx: &Ctx<'_>) -> Result<bool> {
    let id = &ctx.id;
    if !lua_eq(
        index(object, &["status", "observedGeneration"], id)?,
        index(object, &["metadata", "generation"], id)?,
    ) {
        return Ok(false);
    }
    if index(object, &["spec", "replicas"], id)?.is_some()
        && less(
            object,
            &["status", "updatedReplicas"],
            &["spec", "replicas"],
            id,
        )?
    {
        return Ok(false);
    }
    Ok(!less(
        object,
        &["status", "availableReplicas"],
        &["status", "updatedReplicas"],
        id,
    )?)
}

fn united_deployment_health(object: &Value, ctx: &Ctx<'_>) -> Result<bool> {
    if ["status", "metadata", "spec"]
        .iter()
        .any(|f| get(object, &[f]).is_none())
    {
        return Ok(false);
    }
    replicated_health(object, ctx)
}

fn daemon_set_health(object: &Value, ctx: &Ctx<'_>) -> Result<bool> {
    let id = &ctx.id;
    if !lua_eq(
        index(object, &["status", "observedGeneration"], id)?,
        index(object, &["metadata", "generation"], id)?,
    ) {
        return Ok(false);
    }
    if less(
        object,
        &["status", "updatedNumberScheduled"],
        &["status", "desiredNumberScheduled"],
        id,
    )? {
        return Ok(false);
    }
    Ok(!less(
        object,
        &["status", "numberAvailable"],
        &["status", "updatedNumberScheduled"],
        id,
    )?)
}

fn united_deployment_aggregate(desired: &Value, items: &[Value], ctx: &Ctx<'_>) -> Result<Value> {
    let mut object = desired.clone();
    let (generation, observed_generation) = init_generations(&mut object, ctx)?;
    let mut sums = [0.0; 5];
    // Conditions by type, the last member's winning; listed by type.
    let mut conditions: BTreeMap<String, Value> = BTreeMap::new();
    let mut caught = 0;
    for item in items {
        let Some(status) = get(item, &["status"]) else {
            continue;
        };
        for (sum, field) in sums.iter_mut().zip(UNITED_DEPLOYMENT_SUMMED) {
            *sum += number_or(status, &[field], 0.0, &ctx.id)?;
        }
        if let Some(list) = get(status, &["conditions"]).and_then(Value::as_array) {
            for condition in list.iter().filter(|c| !c.is_null()) {
                let key = match get(condition, &["type"]) {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => {
                        return Err(value::missing(
                            &["statusItems", "status", "conditions", "type"],
                            &ctx.id,
                        ));
                    }
                };
                conditions.insert(key, condition.clone());
            }
        }
        if caught_up(Some(status), &generation) {
            caught += 1;
        }
    }
    let status = status_mut(&mut object, &ctx.id)?;
    let observed = if caught == items.len() {
        generation
    } else {
        observed_generation
    };
    status.insert("observedGeneration".into(), observed);
    for (sum, field) in sums.into_iter().zip(UNITED_DEPLOYMENT_SUMMED) {
        status.insert((*field).to_owned(), number(sum));
    }
    if !conditions.is_empty() {
        status.insert(
            "conditions".into(),
            Value::Array(conditions.into_values().collect()),
        );
    }
    Ok(value::shaped_status(object))
}

fn broadcast_job_replicas(object: &Value, ctx: &Ctx<'_>) -> Result<Replicas> {
    let replicas = match index(object, &["spec", "parallelism"], &ctx.id)? {
        Some(v) => value::as_number(v)
            .ok_or_else(|| value::wrong(&["spec", "parallelism"], "a number", &ctx.id))?,
        None => 1.0,
    };
    replicas_with_template(replicas, get(object, &["spec", "template"]), ctx)
}

fn broadcast_job_retain(desired: &Value, observed: &Value, ctx: &Ctx<'_>) -> Result<Value> {
    let mut retained = desired.clone();
    index(observed, &["spec", "template", "metadata"], &ctx.id)?;
    if let Some(labels) = get(observed, &["spec", "template", "metadata", "labels"]) {
        value::set(
            &mut retained,
            &["spec", "template", "metadata", "labels"],
            labels.clone(),
            &ctx.id,
        )?;
    }
    Ok(shape(retained, true, &[desired, observed]))
}

fn broadcast_job_health(object: &Value, ctx: &Ctx<'_>) -> Result<bool> {
    let id = &ctx.id;
    let is = |field: &str, n: f64| -> Result<bool> {
        Ok(index(object, &["status", field], id)?
            .and_then(value::as_number_strict)
            .is_some_and(|v| v == n))
    };
    if is("desired", 0.0)? || !is_zero_or_absent_ne(object, "failed", id)? {
        return Ok(false);
    }
    if is("succeeded", 0.0)? && is("active", 0.0)? {
        return Ok(false);
    }
    Ok(true)
}

/// `status.<field> ~= 0` is false: the field is the number 0.
fn is_zero_or_absent_ne(object: &Value, field: &str, id: &crate::error::ObjectRef) -> Result<bool> {
    Ok(index(object, &["status", field], id)?
        .and_then(value::as_number_strict)
        .is_some_and(|v| v == 0.0))
}

fn broadcast_job_reflect(object: &Value, ctx: &Ctx<'_>) -> Result<Value> {
    reflect_workload_plain(
        object,
        &[
            "conditions",
            "startTime",
            "completionTime",
            "active",
            "succeeded",
            "failed",
            "desired",
            "phase",
        ],
        ctx,
    )
}

/// The named status fields of a member, nothing else.
pub(super) fn reflect_workload_plain(
    object: &Value,
    fields: &[&str],
    _ctx: &Ctx<'_>,
) -> Result<Value> {
    let Some(observed) = get(object, &["status"]) else {
        return Ok(json!({}));
    };
    let mut status = Map::new();
    for field in fields {
        if let Some(v) = get(observed, &[field]) {
            status.insert((*field).to_owned(), v.clone());
        }
    }
    Ok(shape(Value::Object(status), true, &[]))
}

fn broadcast_job_aggregate(desired: &Value, items: &[Value], ctx: &Ctx<'_>) -> Result<Value> {
    let mut object = desired.clone();
    let mut counters = [0.0; 4];
    const COUNTED: [&str; 4] = ["active", "succeeded", "failed", "desired"];
    let mut phase = Value::from("");
    let mut kind = String::new();
    let mut successful = 0usize;
    let mut failed_clusters: Vec<String> = Vec::new();
    for item in items {
        let status = get(item, &["status"]);
        if let Some(status) = status {
            for (c, field) in counters.iter_mut().zip(COUNTED) {
                add(c, status, field, ctx)?;
            }
            if let Some(p) = get(status, &["phase"]) {
                phase = p.clone();
            }
            if let Some(list) = get(status, &["conditions"]).and_then(Value::as_array) {
                for condition in list.iter().filter(|c| !c.is_null()) {
                    let t = get(condition, &["type"]).and_then(Value::as_str);
                    let true_ = get(condition, &["status"]).and_then(Value::as_str) == Some("True");
                    if true_ && matches!(t, Some("Complete" | "Failed")) {
                        kind = t.unwrap_or_default().to_owned();
                        break;
                    }
                }
            }
        }
        // The verdict carries over from the previous member when this one has none.
        match kind.as_str() {
            "Complete" => successful += 1,
            "Failed" => failed_clusters.push(
                get(item, &["clusterName"])
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            ),
            _ => {}
        }
    }
    let mut conditions = Vec::new();
    if !failed_clusters.is_empty() {
        conditions.push(json!({
            "type": "Failed",
            "status": "True",
            "reason": "JobFailed",
            "message": format!(
                "Job executed failed in member clusters: {}",
                failed_clusters.join(", ")
            ),
        }));
    }
    if successful == items.len() && successful > 0 {
        conditions.push(json!({
            "type": "Completed",
            "status": "True",
            "reason": "Completed",
            "message": "Job completed",
        }));
    }
    let status = status_mut(&mut object, &ctx.id)?;
    for (c, field) in counters.into_iter().zip(COUNTED) {
        status.insert(field.to_owned(), number(c));
    }
    status.insert("phase".into(), phase);
    status.insert("conditions".into(), Value::Array(conditions));
    Ok(value::shaped_status(object))
}

fn advanced_cron_job_aggregate(desired: &Value, items: &[Value], ctx: &Ctx<'_>) -> Result<Value> {
    let mut object = desired.clone();
    let mut active = Vec::new();
    let mut kind = Value::from("");
    let mut last_schedule = Value::Array(Vec::new());
    for item in items {
        let Some(status) = get(item, &["status"]) else {
            continue;
        };
        if let Some(list) = get(status, &["active"]).and_then(Value::as_array) {
            active.extend(list.iter().filter(|v| !v.is_null()).cloned());
        }
        if let Some(t) = get(status, &["type"]) {
            kind = t.clone();
        }
        if let Some(t) = get(status, &["lastScheduleTime"]) {
            last_schedule = t.clone();
        }
    }
    let status = status_mut(&mut object, &ctx.id)?;
    status.insert("active".into(), Value::Array(active));
    status.insert("type".into(), kind);
    status.insert("lastScheduleTime".into(), last_schedule);
    Ok(value::shaped_status(object))
}

fn advanced_cron_job_dependencies(
    object: &Value,
    ctx: &Ctx<'_>,
) -> Result<Vec<DependentObjectReference>> {
    index(object, &["spec", "template", "jobTemplate"], &ctx.id)?;
    let mut template = None;
    if get(object, &["spec", "template", "jobTemplate"]).is_some() {
        index(
            object,
            &["spec", "template", "jobTemplate", "spec", "template"],
            &ctx.id,
        )?;
        template = get(
            object,
            &["spec", "template", "jobTemplate", "spec", "template"],
        );
    }
    if get(object, &["spec", "template", "broadcastJobTemplate"]).is_some() {
        index(
            object,
            &[
                "spec",
                "template",
                "broadcastJobTemplate",
                "spec",
                "template",
            ],
            &ctx.id,
        )?;
        template = get(
            object,
            &[
                "spec",
                "template",
                "broadcastJobTemplate",
                "spec",
                "template",
            ],
        );
    }
    Ok(pod_template_dependencies(
        template,
        get(object, &["metadata", "namespace"]),
    ))
}

const SIDECAR_COUNTERS: [&str; 3] = ["matchedPods", "updatedPods", "readyPods"];

fn sidecar_set_reflect(object: &Value, ctx: &Ctx<'_>) -> Result<Value> {
    let Some(status) = get(object, &["status"]) else {
        return Ok(json!({}));
    };
    let mut reflected = Map::new();
    for field in SIDECAR_COUNTERS {
        let v = get(status, &[field])
            .cloned()
            .unwrap_or_else(|| Value::from(0));
        reflected.insert(field.to_owned(), v);
    }
    let _ = ctx;
    Ok(shape(Value::Object(reflected), true, &[]))
}

fn sidecar_set_aggregate(desired: &Value, items: &[Value], ctx: &Ctx<'_>) -> Result<Value> {
    let mut sums = [0.0; 3];
    for item in items {
        let status = get(item, &["status"]).cloned().unwrap_or_else(|| json!({}));
        for (sum, field) in sums.iter_mut().zip(SIDECAR_COUNTERS) {
            *sum += number_or(&status, &[field], 0.0, &ctx.id)?;
        }
    }
    let mut result = json!({
        "apiVersion": GROUP_V1ALPHA1,
        "kind": "SidecarSet",
        "status": {
            "matchedPods": number(sums[0]),
            "updatedPods": number(sums[1]),
            "readyPods": number(sums[2]),
        },
    });
    if let Some(metadata) = get(desired, &["metadata"]) {
        result["metadata"] = metadata.clone();
    }
    Ok(value::shaped_status(result))
}

fn sidecar_set_health(object: &Value, ctx: &Ctx<'_>) -> Result<bool> {
    let Some(status) = get(object, &["status"]) else {
        return Ok(false);
    };
    let matched = get(status, &["matchedPods"])
        .cloned()
        .unwrap_or_else(|| Value::from(0));
    let updated = get(status, &["updatedPods"])
        .cloned()
        .unwrap_or_else(|| Value::from(0));
    let _ = ctx;
    if lua_eq(Some(&matched), Some(&Value::from(0))) {
        return Ok(true);
    }
    Ok(lua_eq(Some(&updated), Some(&matched)))
}

fn sidecar_set_dependencies(
    object: &Value,
    _ctx: &Ctx<'_>,
) -> Result<Vec<DependentObjectReference>> {
    let Some(spec) = get(object, &["spec"]) else {
        return Ok(Vec::new());
    };
    let namespace = get(object, &["metadata", "namespace"])
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut deps = Vec::new();
    let mut add = |kind: &str, name: Option<&Value>| {
        deps.push(DependentObjectReference::named(
            "v1",
            kind,
            namespace,
            name.and_then(Value::as_str).unwrap_or_default(),
        ));
    };
    for container in list(spec, &["containers"]) {
        for env in list(container, &["env"]) {
            if let Some(from) = get(env, &["valueFrom"]) {
                if let Some(r) = get(from, &["configMapKeyRef"]) {
                    add("ConfigMap", get(r, &["name"]));
                }
                if let Some(r) = get(from, &["secretKeyRef"]) {
                    add("Secret", get(r, &["name"]));
                }
            }
        }
        for env_from in list(container, &["envFrom"]) {
            if let Some(r) = get(env_from, &["configMapRef"]) {
                add("ConfigMap", get(r, &["name"]));
            }
            if let Some(r) = get(env_from, &["secretRef"]) {
                add("Secret", get(r, &["name"]));
            }
        }
    }
    for volume in list(spec, &["volumes"]) {
        if let Some(r) = get(volume, &["configMap"]) {
            add("ConfigMap", get(r, &["name"]));
        }
        if let Some(r) = get(volume, &["secret"]) {
            add("Secret", get(r, &["secretName"]));
        }
        for source in list(volume, &["projected", "sources"]) {
            if let Some(r) = get(source, &["configMap"]) {
                add("ConfigMap", get(r, &["name"]));
            }
            if let Some(r) = get(source, &["secret"]) {
                add("Secret", get(r, &["name"]));
            }
        }
    }
    Ok(deps)
}

/// The non-null elements of the list at `path` (none when absent).
pub(super) fn list<'a>(value: &'a Value, path: &[&str]) -> impl Iterator<Item = &'a Value> {
    get(value, path)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| !v.is_null())
}
