//! Retain: when the execution controller updates a member object, keep what the member cluster
//! owns. [`retain_cluster_fields`] is the part common to every kind; the per-kind rules follow.

use std::collections::{BTreeMap, BTreeSet};

use karmada_apis::well_known::{
    MANAGED_ANNOTATIONS_ANNOTATION, MANAGED_LABELS_ANNOTATION, RETAIN_REPLICAS_LABEL,
    RETAIN_REPLICAS_VALUE,
};
use serde_json::Value;

use crate::error::{AtObject, Cause, ObjectRef, Result};
use crate::object::{self, CResult};
use crate::prune::SERVICE_ACCOUNT_TOKEN_SECRET_TYPE;
use crate::rules::RuleContext;

/// Keeps, in `desired`, what every member object owns: `metadata.resourceVersion` (needed for the
/// update), `finalizers` and `ownerReferences` (set by member controllers), and the labels and
/// annotations the member added. A member label/annotation is dropped only when Karmada propagated
/// it before (it is listed in the member's `resourcetemplate.karmada.io/managed-labels` /
/// `managed-annotations`) and the template no longer has it; keys in both keep the desired value.
pub fn retain_cluster_fields(desired: &mut Value, observed: &Value) -> Result<()> {
    let id = ObjectRef::of(desired);
    retain_metadata(desired, observed).at(&id)
}

fn retain_metadata(desired: &mut Value, observed: &Value) -> CResult<()> {
    for field in ["resourceVersion", "finalizers", "ownerReferences"] {
        let path = ["metadata", field];
        match object::get(observed, &path)? {
            Some(Value::String(s)) if s.is_empty() => {
                object::remove(desired, &path);
            }
            Some(value) => object::set(desired, &path, value.clone())?,
            None => {
                object::remove(desired, &path);
            }
        }
    }
    let observed_annotations = object::annotations(observed)?;
    let kept_annotations = merge_member_keys(
        object::annotations(desired)?,
        &observed_annotations,
        observed_annotations.get(MANAGED_ANNOTATIONS_ANNOTATION),
    );
    if !kept_annotations.is_empty() {
        object::set_string_map(desired, &["metadata", "annotations"], &kept_annotations)?;
    }
    let kept_labels = merge_member_keys(
        object::labels(desired)?,
        &object::labels(observed)?,
        observed_annotations.get(MANAGED_LABELS_ANNOTATION),
    );
    if !kept_labels.is_empty() {
        object::set_string_map(desired, &["metadata", "labels"], &kept_labels)?;
    }
    Ok(())
}

/// `desired` plus the observed keys that are neither in `desired` nor previously managed.
fn merge_member_keys(
    mut desired: BTreeMap<String, String>,
    observed: &BTreeMap<String, String>,
    previously_managed: Option<&String>,
) -> BTreeMap<String, String> {
    let deleted: BTreeSet<&str> = previously_managed
        .map(|list| {
            list.split(',')
                .filter(|k| !desired.contains_key(*k))
                .collect()
        })
        .unwrap_or_default();
    for (key, value) in observed {
        if !deleted.contains(key.as_str()) && !desired.contains_key(key) {
            desired.insert(key.clone(), value.clone());
        }
    }
    desired
}

/// Records the manifest's label keys in `resourcetemplate.karmada.io/managed-labels` (sorted,
/// comma-separated), as the binding controller does before writing a Work, so later updates can
/// tell Karmada's labels from member-added ones.
pub fn record_managed_labels(manifest: &mut Value) -> Result<()> {
    let id = ObjectRef::of(manifest);
    let keys: Vec<String> = object::labels(manifest).at(&id)?.into_keys().collect();
    let mut annotations = object::annotations(manifest).at(&id)?;
    annotations.insert(MANAGED_LABELS_ANNOTATION.to_owned(), keys.join(","));
    object::set_string_map(manifest, &["metadata", "annotations"], &annotations).at(&id)
}

/// Records the manifest's annotation keys (including the two managed-keys annotations themselves)
/// in `resourcetemplate.karmada.io/managed-annotations`, sorted and comma-separated.
pub fn record_managed_annotations(manifest: &mut Value) -> Result<()> {
    let id = ObjectRef::of(manifest);
    let mut annotations = object::annotations(manifest).at(&id)?;
    let mut keys: BTreeSet<&str> = annotations.keys().map(String::as_str).collect();
    keys.insert(MANAGED_ANNOTATIONS_ANNOTATION);
    keys.insert(MANAGED_LABELS_ANNOTATION);
    let list = keys.into_iter().collect::<Vec<_>>().join(",");
    annotations.insert(MANAGED_ANNOTATIONS_ANNOTATION.to_owned(), list);
    object::set_string_map(manifest, &["metadata", "annotations"], &annotations).at(&id)
}

/// Copies a field from `observed` into `desired`, removing it from `desired` when the member has
/// none.
fn mirror(desired: &mut Value, observed: &Value, path: &[&str]) -> CResult<()> {
    match object::get(observed, path)? {
        Some(value) => object::set(desired, path, value.clone()),
        None => {
            object::remove(desired, path);
            Ok(())
        }
    }
}

/// Deployment: with the template label `resourcetemplate.karmada.io/retain-replicas=true`, keep the
/// member's `spec.replicas` (an HPA in the member scales it).
pub(crate) fn deployment(
    desired: &mut Value,
    observed: &Value,
    ctx: &RuleContext<'_>,
) -> Result<()> {
    let labels = object::labels(desired).at(ctx.object)?;
    if labels.get(RETAIN_REPLICAS_LABEL).map(String::as_str) != Some(RETAIN_REPLICAS_VALUE) {
        return Ok(());
    }
    let replicas = object::opt_i64(observed, &["spec", "replicas"])
        .at(ctx.object)?
        .ok_or_else(|| {
            ctx.error(Cause::Missing {
                path: "spec.replicas (of the member object)".into(),
            })
        })?;
    object::set(desired, &["spec", "replicas"], Value::from(replicas)).at(ctx.object)
}

/// Pod: keep the member's `nodeName`, `serviceAccountName`, `volumes` and every (init) container's
/// `volumeMounts` (the member injects service-account token volumes and binds the pod to a node).
pub(crate) fn pod(desired: &mut Value, observed: &Value, ctx: &RuleContext<'_>) -> Result<()> {
    for field in ["nodeName", "serviceAccountName", "volumes"] {
        mirror(desired, observed, &["spec", field]).at(ctx.object)?;
    }
    for list in ["containers", "initContainers"] {
        let Some(members) = object::opt_array(observed, &["spec", list]).at(ctx.object)? else {
            continue;
        };
        let members = members.clone();
        let Some(Value::Array(wanted)) = object::get_mut(desired, &["spec", list]) else {
            continue;
        };
        for member in &members {
            let Some(name) = member.get("name").and_then(Value::as_str) else {
                continue;
            };
            if let Some(container) = wanted
                .iter_mut()
                .find(|c| c.get("name").and_then(Value::as_str) == Some(name))
            {
                mirror(container, member, &["volumeMounts"]).at(ctx.object)?;
            }
        }
    }
    Ok(())
}

/// Service: keep the member-allocated `clusterIP` and `healthCheckNodePort`.
pub(crate) fn service(desired: &mut Value, observed: &Value, ctx: &RuleContext<'_>) -> Result<()> {
    let port = object::opt_i64(observed, &["spec", "healthCheckNodePort"]).at(ctx.object)?;
    if let Some(port) = port.filter(|p| *p > 0) {
        object::set(desired, &["spec", "healthCheckNodePort"], Value::from(port)).at(ctx.object)?;
    }
    let cluster_ip = object::opt_str(observed, &["spec", "clusterIP"]).at(ctx.object)?;
    if let Some(ip) = cluster_ip.filter(|ip| !ip.is_empty()) {
        object::set(desired, &["spec", "clusterIP"], Value::from(ip)).at(ctx.object)?;
    }
    Ok(())
}

/// ServiceAccount: merge `secrets` and `imagePullSecrets`: the template's entries, then the
/// member's entries with other names (so the member's token controller is not fought).
pub(crate) fn service_account(
    desired: &mut Value,
    observed: &Value,
    ctx: &RuleContext<'_>,
) -> Result<()> {
    let name_of = |entry: &Value| {
        entry
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    for field in ["secrets", "imagePullSecrets"] {
        let mut merged = object::opt_array(desired, &[field])
            .at(ctx.object)?
            .cloned()
            .unwrap_or_default();
        let mut names: BTreeSet<String> = merged.iter().map(name_of).collect();
        if let Some(member) = object::opt_array(observed, &[field]).at(ctx.object)? {
            for entry in member {
                if names.insert(name_of(entry)) {
                    merged.push(entry.clone());
                }
            }
        }
        if merged.is_empty() {
            object::remove(desired, &[field]);
        } else {
            object::set(desired, &[field], Value::Array(merged)).at(ctx.object)?;
        }
    }
    Ok(())
}

/// PersistentVolumeClaim: keep the bound `spec.volumeName`.
pub(crate) fn persistent_volume_claim(
    desired: &mut Value,
    observed: &Value,
    ctx: &RuleContext<'_>,
) -> Result<()> {
    let name = object::opt_str(observed, &["spec", "volumeName"]).at(ctx.object)?;
    if let Some(name) = name.filter(|n| !n.is_empty()) {
        object::set(desired, &["spec", "volumeName"], Value::from(name)).at(ctx.object)?;
    }
    Ok(())
}

/// PersistentVolume: keep `spec.claimRef` (set by the member's volume binder).
pub(crate) fn persistent_volume(
    desired: &mut Value,
    observed: &Value,
    ctx: &RuleContext<'_>,
) -> Result<()> {
    if let Some(claim) = object::get(observed, &["spec", "claimRef"]).at(ctx.object)? {
        object::set(desired, &["spec", "claimRef"], claim.clone()).at(ctx.object)?;
    }
    Ok(())
}

/// Job: keep the member's `spec.selector.matchLabels` and pod template labels (the member's Job
/// controller generated them; they are immutable).
pub(crate) fn job(desired: &mut Value, observed: &Value, ctx: &RuleContext<'_>) -> Result<()> {
    for path in [
        &["spec", "selector", "matchLabels"][..],
        &["spec", "template", "metadata", "labels"][..],
    ] {
        if object::string_map(observed, path).at(ctx.object)?.is_some()
            && let Some(value) = object::get(observed, path).at(ctx.object)?
        {
            object::set(desired, path, value.clone()).at(ctx.object)?;
        }
    }
    Ok(())
}

/// Secret of type `kubernetes.io/service-account-token`: keep the member's token `data`.
pub(crate) fn secret(desired: &mut Value, observed: &Value, ctx: &RuleContext<'_>) -> Result<()> {
    if object::opt_str(desired, &["type"]).at(ctx.object)?
        != Some(SERVICE_ACCOUNT_TOKEN_SECRET_TYPE)
    {
        return Ok(());
    }
    if object::string_map(observed, &["data"])
        .at(ctx.object)?
        .is_some()
        && let Some(data) = object::get(observed, &["data"]).at(ctx.object)?
    {
        object::set(desired, &["data"], data.clone()).at(ctx.object)?;
    }
    Ok(())
}
