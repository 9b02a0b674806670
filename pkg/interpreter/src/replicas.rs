//! InterpretReplica and ReviseReplica for the workload kinds.

use karmada_apis::work::v1alpha2::ReplicaRequirements;
use serde_json::Value;

use crate::error::{AtObject, Result};
use crate::object;
use crate::resources;
use crate::rules::{Replicas, RuleContext};

const TEMPLATE_SPEC: [&str; 3] = ["spec", "template", "spec"];

/// Requirements of each replica of a pod spec found at `path` (`None`: requests nothing and has
/// no node constraints), Karmada's `GenerateReplicaRequirements`.
fn requirements(
    object: &Value,
    path: &[&str],
    ctx: &RuleContext<'_>,
) -> Result<Option<ReplicaRequirements>> {
    let empty = Value::Null;
    let pod_spec = match object::get(object, path).at(ctx.object)? {
        Some(spec @ Value::Object(_)) => spec,
        Some(_) => {
            return Err(ctx.error(crate::error::Cause::wrong_type(path, "an object")));
        }
        None => &empty,
    };
    let node_claim = resources::node_claim(pod_spec, path).at(ctx.object)?;
    let resource_request = resources::pod_request(pod_spec, path)
        .at(ctx.object)?
        .to_list();
    if node_claim.is_none() && resource_request.is_empty() {
        return Ok(None);
    }
    let priority_class_name = if ctx.options.resource_quota_estimate {
        object::opt_str(pod_spec, &["priorityClassName"])
            .at(ctx.object)?
            .unwrap_or_default()
            .to_owned()
    } else {
        String::new()
    };
    Ok(Some(ReplicaRequirements {
        node_claim,
        resource_request,
        namespace: String::new(),
        priority_class_name,
    }))
}

fn replicated_workload(object: &Value, ctx: &RuleContext<'_>) -> Result<Replicas> {
    let replicas = object::opt_i32(object, &["spec", "replicas"])
        .at(ctx.object)?
        .unwrap_or(0);
    Ok(Replicas {
        replicas,
        requirements: requirements(object, &TEMPLATE_SPEC, ctx)?,
    })
}

/// Deployment: `spec.replicas` (0 when unset) and the pod template's requirements.
pub(crate) fn deployment(object: &Value, ctx: &RuleContext<'_>) -> Result<Replicas> {
    replicated_workload(object, ctx)
}

/// StatefulSet: like Deployment.
pub(crate) fn stateful_set(object: &Value, ctx: &RuleContext<'_>) -> Result<Replicas> {
    replicated_workload(object, ctx)
}

/// ReplicaSet: like Deployment.
pub(crate) fn replica_set(object: &Value, ctx: &RuleContext<'_>) -> Result<Replicas> {
    replicated_workload(object, ctx)
}

/// Job: `spec.parallelism` (0 when unset), capped by `spec.completions` when that is set, since
/// no more pods run at once than completions remain.
pub(crate) fn job(object: &Value, ctx: &RuleContext<'_>) -> Result<Replicas> {
    let parallelism = object::opt_i32(object, &["spec", "parallelism"])
        .at(ctx.object)?
        .unwrap_or(0);
    let completions = object::opt_i32(object, &["spec", "completions"]).at(ctx.object)?;
    let replicas = completions.map_or(parallelism, |c| parallelism.min(c));
    Ok(Replicas {
        replicas,
        requirements: requirements(object, &TEMPLATE_SPEC, ctx)?,
    })
}

/// Pod: always one replica, requirements from its own spec.
pub(crate) fn pod(object: &Value, ctx: &RuleContext<'_>) -> Result<Replicas> {
    Ok(Replicas {
        replicas: 1,
        requirements: requirements(object, &["spec"], ctx)?,
    })
}

/// Sets `spec.<field>` to `value` only when the field is present (Karmada's `ApplyReplica`);
/// a present non-integer is an error.
pub(crate) fn apply_if_present(
    object: &mut Value,
    field: &str,
    value: i64,
    ctx: &RuleContext<'_>,
) -> Result<()> {
    let path = ["spec", field];
    if object::opt_i64(object, &path).at(ctx.object)?.is_some() {
        object::set(object, &path, Value::from(value)).at(ctx.object)?;
    }
    Ok(())
}

/// Deployment, StatefulSet, ReplicaSet: revise `spec.replicas` (when present).
pub(crate) fn revise_replicas_field(
    object: &mut Value,
    replicas: i64,
    ctx: &RuleContext<'_>,
) -> Result<()> {
    apply_if_present(object, "replicas", replicas, ctx)
}

/// Job: revise `spec.parallelism` (when present).
pub(crate) fn revise_job(object: &mut Value, replicas: i64, ctx: &RuleContext<'_>) -> Result<()> {
    apply_if_present(object, "parallelism", replicas, ctx)
}

/// Requirements of each replica of a pod template (Karmada's `GenerateReplicaRequirements`), for
/// the Lua library's `kube.accuratePodRequirements`: `None` when the pods request nothing and have
/// no node constraints; with `ResourceQuotaEstimate` also the template's namespace and
/// priorityClassName.
pub fn pod_template_requirements(
    template: &Value,
    options: &crate::InterpreterOptions,
) -> Result<Option<ReplicaRequirements>> {
    let wrapper = serde_json::json!({"kind": "PodTemplateSpec", "spec": {"template": template}});
    let id = crate::ObjectRef::of(&wrapper);
    let clock: crate::Clock = std::sync::Arc::new(|| {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
    });
    let ctx = RuleContext {
        object: &id,
        options,
        clock: &clock,
    };
    let mut found = requirements(&wrapper, &TEMPLATE_SPEC, &ctx)?;
    if options.resource_quota_estimate
        && let Some(found) = found.as_mut()
    {
        found.namespace = object::opt_str(template, &["metadata", "namespace"])
            .at(&id)?
            .unwrap_or_default()
            .to_owned();
    }
    Ok(found)
}
