//! InterpretHealth: whether a member object is healthy, per kind as Karmada judges it.

use serde_json::Value;

use crate::error::{AtObject, Result};
use crate::object;
use crate::reflect::SERVICE_TYPE_LOAD_BALANCER;
use crate::rules::RuleContext;

fn int(object: &Value, path: &[&str], ctx: &RuleContext<'_>) -> Result<i64> {
    Ok(object::opt_i64(object, path).at(ctx.object)?.unwrap_or(0))
}

fn status_int(object: &Value, field: &str, ctx: &RuleContext<'_>) -> Result<i64> {
    int(object, &["status", field], ctx)
}

fn observed_current_generation(object: &Value, ctx: &RuleContext<'_>) -> Result<bool> {
    let generation = object::generation(object).at(ctx.object)?;
    Ok(status_int(object, "observedGeneration", ctx)? == generation)
}

/// Rolled out: the controller saw the current spec, every desired replica is updated and every
/// updated replica is available. Shared by Deployment and StatefulSet.
fn rolled_out(object: &Value, ctx: &RuleContext<'_>) -> Result<bool> {
    if !observed_current_generation(object, ctx)? {
        return Ok(false);
    }
    let updated = status_int(object, "updatedReplicas", ctx)?;
    if let Some(desired) = object::opt_i64(object, &["spec", "replicas"]).at(ctx.object)?
        && updated < desired
    {
        return Ok(false);
    }
    Ok(status_int(object, "availableReplicas", ctx)? >= updated)
}

/// Deployment: see `rolled_out`.
pub(crate) fn deployment(object: &Value, ctx: &RuleContext<'_>) -> Result<bool> {
    rolled_out(object, ctx)
}

/// StatefulSet: see `rolled_out`.
pub(crate) fn stateful_set(object: &Value, ctx: &RuleContext<'_>) -> Result<bool> {
    rolled_out(object, ctx)
}

/// ReplicaSet: current generation observed and every desired replica available.
pub(crate) fn replica_set(object: &Value, ctx: &RuleContext<'_>) -> Result<bool> {
    if !observed_current_generation(object, ctx)? {
        return Ok(false);
    }
    match object::opt_i64(object, &["spec", "replicas"]).at(ctx.object)? {
        Some(desired) => Ok(status_int(object, "availableReplicas", ctx)? >= desired),
        None => Ok(true),
    }
}

/// DaemonSet: current generation observed, every scheduled node updated and available.
pub(crate) fn daemon_set(object: &Value, ctx: &RuleContext<'_>) -> Result<bool> {
    if !observed_current_generation(object, ctx)? {
        return Ok(false);
    }
    let updated = status_int(object, "updatedNumberScheduled", ctx)?;
    if updated < status_int(object, "desiredNumberScheduled", ctx)? {
        return Ok(false);
    }
    Ok(status_int(object, "numberAvailable", ctx)? >= updated)
}

/// Whether a load balancer status lists an ingress point with an IP or hostname.
fn has_load_balancer_address(object: &Value, ctx: &RuleContext<'_>) -> Result<bool> {
    let ingress =
        object::opt_array(object, &["status", "loadBalancer", "ingress"]).at(ctx.object)?;
    for point in ingress.into_iter().flatten() {
        let ip = object::opt_str(point, &["ip"]).at(ctx.object)?;
        let hostname = object::opt_str(point, &["hostname"]).at(ctx.object)?;
        if ip.is_some_and(|s| !s.is_empty()) || hostname.is_some_and(|s| !s.is_empty()) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Service: healthy unless it is a LoadBalancer without an assigned address.
pub(crate) fn service(object: &Value, ctx: &RuleContext<'_>) -> Result<bool> {
    if object::opt_str(object, &["spec", "type"]).at(ctx.object)?
        != Some(SERVICE_TYPE_LOAD_BALANCER)
    {
        return Ok(true);
    }
    has_load_balancer_address(object, ctx)
}

/// Ingress: healthy once the load balancer has an address.
pub(crate) fn ingress(object: &Value, ctx: &RuleContext<'_>) -> Result<bool> {
    has_load_balancer_address(object, ctx)
}

/// PersistentVolumeClaim: healthy when Bound.
pub(crate) fn persistent_volume_claim(object: &Value, ctx: &RuleContext<'_>) -> Result<bool> {
    Ok(object::opt_str(object, &["status", "phase"]).at(ctx.object)? == Some("Bound"))
}

/// Pod: healthy when Succeeded, or Running with the Ready condition True.
pub(crate) fn pod(object: &Value, ctx: &RuleContext<'_>) -> Result<bool> {
    let phase = object::opt_str(object, &["status", "phase"]).at(ctx.object)?;
    if phase == Some("Succeeded") {
        return Ok(true);
    }
    if phase != Some("Running") {
        return Ok(false);
    }
    let conditions = object::opt_array(object, &["status", "conditions"]).at(ctx.object)?;
    for condition in conditions.into_iter().flatten() {
        if object::opt_str(condition, &["type"]).at(ctx.object)? == Some("Ready") {
            return Ok(object::opt_str(condition, &["status"]).at(ctx.object)? == Some("True"));
        }
    }
    Ok(false)
}

/// PodDisruptionBudget: healthy when at least the desired number of pods are healthy.
pub(crate) fn pod_disruption_budget(object: &Value, ctx: &RuleContext<'_>) -> Result<bool> {
    Ok(status_int(object, "currentHealthy", ctx)? >= status_int(object, "desiredHealthy", ctx)?)
}
