//! Prune: remove what the API server sets, and member-cluster specific fields, before a template
//! becomes a Work manifest (and before a member object is compared with one).

use serde_json::Value;

use crate::error::{AtObject, Result};
use crate::object;
use crate::rules::RuleContext;

/// Metadata fields the API server owns.
const SERVER_SET_METADATA: [&str; 10] = [
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "managedFields",
    "resourceVersion",
    "selfLink",
    "uid",
    "ownerReferences",
    "finalizers",
];

/// Kubernetes: annotations the Deployment controller keeps on a Deployment.
const DEPLOYMENT_REVISION_ANNOTATIONS: [&str; 2] = [
    "deployment.kubernetes.io/revision",
    "deployment.kubernetes.io/revision-history",
];
/// Kubernetes: labels the Job controller generates for its selector (legacy and prefixed forms).
const JOB_CONTROLLER_UID_LABELS: [&str; 2] =
    ["controller-uid", "batch.kubernetes.io/controller-uid"];
/// Kubernetes: labels the Job controller adds to the pod template.
const JOB_TEMPLATE_LABELS: [&str; 4] = [
    "controller-uid",
    "job-name",
    "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-name",
];
/// Kubernetes: the type of Secrets holding a ServiceAccount token.
pub(crate) const SERVICE_ACCOUNT_TOKEN_SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// Kubernetes: annotation naming the ServiceAccount uid on a token Secret.
const SERVICE_ACCOUNT_UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";
/// Kubernetes: annotation the scheduler puts on a PVC waiting for first consumer.
const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
/// Kubernetes: the headless Service clusterIP.
const CLUSTER_IP_NONE: &str = "None";

/// Removes the server-set metadata fields and `status` (every kind).
pub fn prune_common(object: &mut Value) {
    for field in SERVER_SET_METADATA {
        object::remove(object, &["metadata", field]);
    }
    object::remove(object, &["status"]);
}

/// Deployment: the controller's revision annotations.
pub(crate) fn deployment(object: &mut Value, _ctx: &RuleContext<'_>) -> Result<()> {
    for key in DEPLOYMENT_REVISION_ANNOTATIONS {
        object::remove(object, &["metadata", "annotations", key]);
    }
    Ok(())
}

/// Job: `spec.ttlSecondsAfterFinished` (the member's TTL controller would delete the Job and
/// Karmada would recreate it), and unless `spec.manualSelector` is true, the labels the Job
/// controller generated for the selector and pod template.
pub(crate) fn job(object: &mut Value, ctx: &RuleContext<'_>) -> Result<()> {
    object::remove(object, &["spec", "ttlSecondsAfterFinished"]);
    let manual = object::opt_bool(object, &["spec", "manualSelector"])
        .at(ctx.object)?
        .unwrap_or(false);
    if manual {
        return Ok(());
    }
    remove_map_keys(
        object,
        &["spec", "selector", "matchLabels"],
        &JOB_CONTROLLER_UID_LABELS,
        ctx,
    )?;
    remove_map_keys(
        object,
        &["spec", "template", "metadata", "labels"],
        &JOB_TEMPLATE_LABELS,
        ctx,
    )
}

fn remove_map_keys(
    object: &mut Value,
    path: &[&str],
    keys: &[&str],
    ctx: &RuleContext<'_>,
) -> Result<()> {
    // Validate the map like apimachinery's NestedStringMap, then drop the keys in place.
    if object::string_map(object, path).at(ctx.object)?.is_none() {
        return Ok(());
    }
    if let Some(Value::Object(map)) = object::get_mut(object, path) {
        for key in keys {
            map.remove(*key);
        }
    }
    Ok(())
}

/// Service: the cluster-assigned `clusterIP` / `clusterIPs`, unless the Service is headless.
pub(crate) fn service(object: &mut Value, ctx: &RuleContext<'_>) -> Result<()> {
    let cluster_ip = object::opt_str(object, &["spec", "clusterIP"]).at(ctx.object)?;
    if cluster_ip.is_some_and(|ip| ip != CLUSTER_IP_NONE) {
        object::remove(object, &["spec", "clusterIP"]);
        object::remove(object, &["spec", "clusterIPs"]);
    }
    Ok(())
}

/// ServiceAccount: the token Secrets generated for it (`<name>-token-*`) from `secrets`.
pub(crate) fn service_account(object: &mut Value, ctx: &RuleContext<'_>) -> Result<()> {
    let prefix = format!("{}-token-", ctx.object.name);
    if let Some(Value::Array(secrets)) = object::get_mut(object, &["secrets"]) {
        secrets.retain(|secret| {
            !secret
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(|name| name.starts_with(&prefix))
        });
    }
    Ok(())
}

/// Secret of type `kubernetes.io/service-account-token`: the token data and the ServiceAccount uid
/// annotation, both filled in by the member cluster.
pub(crate) fn secret(object: &mut Value, ctx: &RuleContext<'_>) -> Result<()> {
    if object::opt_str(object, &["type"]).at(ctx.object)? == Some(SERVICE_ACCOUNT_TOKEN_SECRET_TYPE)
    {
        object::remove(
            object,
            &["metadata", "annotations", SERVICE_ACCOUNT_UID_ANNOTATION],
        );
        object::remove(object, &["data"]);
    }
    Ok(())
}

/// PersistentVolumeClaim: the scheduler's selected-node annotation (node names are per cluster).
pub(crate) fn persistent_volume_claim(object: &mut Value, ctx: &RuleContext<'_>) -> Result<()> {
    let path = ["metadata", "annotations", SELECTED_NODE_ANNOTATION];
    if object::opt_str(object, &path)
        .at(ctx.object)?
        .is_some_and(|node| !node.is_empty())
    {
        object::remove(object, &path);
    }
    Ok(())
}
