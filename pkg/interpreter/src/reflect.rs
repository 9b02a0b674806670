//! ReflectStatus: the status the work-status controller records for a member object in
//! `Work.status.manifestStatuses`. The shapes match what Karmada writes (Go's `omitempty` rules),
//! so Go and Rust controllers read each other's reflected statuses.

use karmada_apis::well_known::RESOURCE_TEMPLATE_GENERATION_ANNOTATION;
use serde_json::{Map, Value};

use crate::error::{AtObject, Cause, Result};
use crate::object;
use crate::rules::RuleContext;

/// Kubernetes: the Service type that gets a load balancer.
pub(crate) const SERVICE_TYPE_LOAD_BALANCER: &str = "LoadBalancer";

/// The whole `.status` (kinds without their own rule, and Ingress); `None` when there is none.
pub(crate) fn whole_status(object: &Value, ctx: &RuleContext<'_>) -> Result<Option<Value>> {
    Ok(object::opt_object(object, &["status"])
        .at(ctx.object)?
        .map(|status| Value::Object(status.clone())))
}

/// Copies integer status fields into a new status object.
struct Picker<'a> {
    object: &'a Value,
    out: Map<String, Value>,
}

impl<'a> Picker<'a> {
    fn new(object: &'a Value) -> Self {
        Self {
            object,
            out: Map::new(),
        }
    }

    /// `status.<field>` as an integer, 0 when absent.
    fn read(&self, field: &str) -> Result<i64, Cause> {
        Ok(object::opt_i64(self.object, &["status", field])?.unwrap_or(0))
    }

    /// Copies `status.<field>`; with `omit_zero` (Go's `omitempty`) a zero is left out.
    fn int(mut self, field: &str, omit_zero: bool) -> Result<Self, Cause> {
        let value = self.read(field)?;
        put_int(&mut self.out, field, value, omit_zero);
        Ok(self)
    }

    /// Copies each `(field, omit_zero)` in order, as [`Picker::int`].
    fn ints(self, fields: &[(&str, bool)]) -> Result<Self, Cause> {
        fields.iter().try_fold(self, |picker, &(field, omit_zero)| {
            picker.int(field, omit_zero)
        })
    }

    /// Copies `status.<field>` when present and not empty (Go's `omitempty`).
    fn raw(mut self, field: &str) -> Result<Self, Cause> {
        match object::get(self.object, &["status", field])? {
            None => {}
            Some(Value::Array(a)) if a.is_empty() => {}
            Some(Value::Object(m)) if m.is_empty() => {}
            Some(value) => {
                self.out.insert(field.to_owned(), value.clone());
            }
        }
        Ok(self)
    }

    /// Adds the member's `metadata.generation` and the template generation it was made from.
    fn federated_generation(mut self) -> Result<Self, Cause> {
        let generation = object::generation(self.object)?;
        let template_generation = resource_template_generation(self.object)?;
        put_int(&mut self.out, "generation", generation, true);
        put_int(
            &mut self.out,
            "resourceTemplateGeneration",
            template_generation,
            true,
        );
        Ok(self)
    }

    fn done(self) -> Value {
        Value::Object(self.out)
    }
}

pub(crate) fn put_int(out: &mut Map<String, Value>, field: &str, value: i64, omit_zero: bool) {
    if !(omit_zero && value == 0) {
        out.insert(field.to_owned(), Value::from(value));
    }
}

/// The `resourcetemplate.karmada.io/generation` annotation as an integer (0 when absent).
fn resource_template_generation(object: &Value) -> Result<i64, Cause> {
    let path = [
        "metadata",
        "annotations",
        RESOURCE_TEMPLATE_GENERATION_ANNOTATION,
    ];
    match object::opt_str(object, &path)? {
        None => Ok(0),
        Some(text) => text.parse().map_err(|_| Cause::AnnotationNotInteger {
            key: RESOURCE_TEMPLATE_GENERATION_ANNOTATION,
            value: text.to_owned(),
        }),
    }
}

fn has_status(object: &Value, ctx: &RuleContext<'_>) -> Result<bool> {
    Ok(object::opt_object(object, &["status"])
        .at(ctx.object)?
        .is_some())
}

/// The workloads' shape: the generations, then the integer `(field, omit_zero)` counters in
/// order. `None` while the member has no status.
fn generations_and_counters(
    object: &Value,
    ctx: &RuleContext<'_>,
    counters: &[(&str, bool)],
) -> Result<Option<Value>> {
    if !has_status(object, ctx)? {
        return Ok(None);
    }
    let status = Picker::new(object)
        .federated_generation()
        .and_then(|p| p.ints(counters))
        .at(ctx.object)?
        .done();
    Ok(Some(status))
}

/// Deployment: the replica counters and observedGeneration, plus `generation` and
/// `resourceTemplateGeneration` so aggregation can tell whether the member caught up with the
/// template. `None` while the member has no status.
pub(crate) fn deployment(object: &Value, ctx: &RuleContext<'_>) -> Result<Option<Value>> {
    let status = generations_and_counters(
        object,
        ctx,
        &[
            ("replicas", true),
            ("updatedReplicas", true),
            ("readyReplicas", true),
            ("availableReplicas", true),
            ("unavailableReplicas", true),
            ("observedGeneration", true),
        ],
    )?;
    Ok(status.filter(|s| s.as_object().is_some_and(|m| !m.is_empty())))
}

/// ReplicaSet: replicas, ready, available, observedGeneration and the generations.
pub(crate) fn replica_set(object: &Value, ctx: &RuleContext<'_>) -> Result<Option<Value>> {
    generations_and_counters(
        object,
        ctx,
        &[
            ("replicas", false),
            ("readyReplicas", true),
            ("availableReplicas", true),
            ("observedGeneration", true),
        ],
    )
}

/// StatefulSet: the replica counters and the generations. Karmada leaves out observedGeneration
/// (so its aggregation can never see a member catch up); karmada-rs includes it.
pub(crate) fn stateful_set(object: &Value, ctx: &RuleContext<'_>) -> Result<Option<Value>> {
    generations_and_counters(
        object,
        ctx,
        &[
            ("replicas", false),
            ("readyReplicas", true),
            ("currentReplicas", true),
            ("updatedReplicas", true),
            ("availableReplicas", false),
            ("observedGeneration", true),
        ],
    )
}

/// DaemonSet: the scheduling counters, observedGeneration and the generations.
pub(crate) fn daemon_set(object: &Value, ctx: &RuleContext<'_>) -> Result<Option<Value>> {
    generations_and_counters(
        object,
        ctx,
        &[
            ("currentNumberScheduled", false),
            ("numberMisscheduled", false),
            ("desiredNumberScheduled", false),
            ("numberReady", false),
            ("observedGeneration", true),
            ("updatedNumberScheduled", true),
            ("numberAvailable", true),
            ("numberUnavailable", true),
        ],
    )
}

/// Service: only LoadBalancer Services report, with `status.loadBalancer`.
pub(crate) fn service(object: &Value, ctx: &RuleContext<'_>) -> Result<Option<Value>> {
    let service_type = object::opt_str(object, &["spec", "type"]).at(ctx.object)?;
    if service_type != Some(SERVICE_TYPE_LOAD_BALANCER) || !has_status(object, ctx)? {
        return Ok(None);
    }
    let load_balancer = object::opt_object(object, &["status", "loadBalancer"])
        .at(ctx.object)?
        .cloned()
        .unwrap_or_default();
    Ok(Some(
        serde_json::json!({"loadBalancer": Value::Object(load_balancer)}),
    ))
}

/// Job: active/succeeded/failed counters, conditions, start and completion time.
pub(crate) fn job(object: &Value, ctx: &RuleContext<'_>) -> Result<Option<Value>> {
    if !has_status(object, ctx)? {
        return Ok(None);
    }
    object::opt_array(object, &["status", "conditions"]).at(ctx.object)?;
    let status = Picker::new(object)
        .raw("conditions")
        .and_then(|p| p.raw("startTime"))
        .and_then(|p| p.raw("completionTime"))
        .and_then(|p| p.int("active", true))
        .and_then(|p| p.int("succeeded", true))
        .and_then(|p| p.int("failed", true))
        .at(ctx.object)?
        .done();
    Ok(Some(status))
}

/// PodDisruptionBudget: the disruption counters and disrupted pods.
pub(crate) fn pod_disruption_budget(
    object: &Value,
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    if !has_status(object, ctx)? {
        return Ok(None);
    }
    object::opt_object(object, &["status", "disruptedPods"]).at(ctx.object)?;
    let status = Picker::new(object)
        .raw("disruptedPods")
        .and_then(|p| {
            p.ints(&[
                ("disruptionsAllowed", false),
                ("currentHealthy", false),
                ("desiredHealthy", false),
                ("expectedPods", false),
            ])
        })
        .at(ctx.object)?
        .done();
    Ok(Some(status))
}

/// HorizontalPodAutoscaler: current and desired replicas.
pub(crate) fn horizontal_pod_autoscaler(
    object: &Value,
    ctx: &RuleContext<'_>,
) -> Result<Option<Value>> {
    if !has_status(object, ctx)? {
        return Ok(None);
    }
    let status = Picker::new(object)
        .int("currentReplicas", true)
        .and_then(|p| p.int("desiredReplicas", false))
        .at(ctx.object)?
        .done();
    Ok(Some(status))
}
