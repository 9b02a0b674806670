//! Argo Workflows (`argoproj.io/v1alpha1` Workflow): one replica per parallel step
//! (`spec.parallelism`, else 1) with the workflow's node constraints; healthy once it has a phase
//! other than `Failed`; keeps the member's `spec.suspend` and `status`; depends on the
//! ConfigMaps, Secrets, ServiceAccounts and PersistentVolumeClaims its spec names.

use std::collections::{BTreeSet, HashMap};

use karmada_apis::config::v1alpha1::DependentObjectReference;
use serde_json::{Value, json};

use super::kruise::{list, revise_field};
use super::value::{self, get, index, shape};
use super::{Ctx, KindInterpretation, named_dependencies, replica_count};
use crate::error::Result;
use crate::rules::Replicas;

pub(super) fn register(table: &mut HashMap<(&'static str, &'static str), KindInterpretation>) {
    table.insert(
        ("argoproj.io/v1alpha1", "Workflow"),
        KindInterpretation {
            replicas: Some(replicas),
            revise: Some(|o, r, ctx| revise_field(o, "parallelism", r, ctx)),
            retain: Some(retain),
            health: Some(health),
            dependencies: Some(dependencies),
            ..Default::default()
        },
    );
}

fn replicas(object: &Value, ctx: &Ctx<'_>) -> Result<Replicas> {
    let replicas = match index(object, &["spec", "parallelism"], &ctx.id)? {
        Some(v) => value::as_number(v)
            .ok_or_else(|| value::wrong(&["spec", "parallelism"], "a number", &ctx.id))?,
        None => 1.0,
    };
    let mut spec = serde_json::Map::new();
    for field in ["affinity", "nodeSelector", "tolerations"] {
        if let Some(v) = get(object, &["spec", field]) {
            spec.insert(field.to_owned(), v.clone());
        }
    }
    let template = json!({ "spec": spec });
    Ok(Replicas {
        replicas: replica_count(replicas, ctx)?,
        requirements: crate::pod_template_requirements(&template, ctx.options)?,
    })
}

fn health(object: &Value, _ctx: &Ctx<'_>) -> Result<bool> {
    let Some(status) = get(object, &["status"]) else {
        return Ok(false);
    };
    let phase = get(status, &["phase"]);
    let failed = phase.is_none()
        || matches!(phase, Some(Value::String(p)) if p.is_empty() || p == "Failed")
        || get(status, &["failed"]).and_then(Value::as_str) == Some("Error");
    Ok(!failed)
}

fn retain(desired: &Value, observed: &Value, ctx: &Ctx<'_>) -> Result<Value> {
    let mut retained = desired.clone();
    if let Some(suspend) = index(observed, &["spec", "suspend"], &ctx.id)? {
        value::set(
            &mut retained,
            &["spec", "suspend"],
            suspend.clone(),
            &ctx.id,
        )?;
    }
    if let Some(status) = get(observed, &["status"]) {
        value::set(&mut retained, &["status"], status.clone(), &ctx.id)?;
    }
    Ok(shape(retained, true, &[desired, observed]))
}

/// The string at `path` when present and not empty.
pub(super) fn name_at(value: &Value, path: &[&str]) -> Option<String> {
    match get(value, path)? {
        Value::String(s) if s.is_empty() => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// Volume plugins whose `secretRef.name` names a Secret.
pub(super) const SECRET_REF_PLUGINS: [&str; 7] = [
    "cephfs",
    "cinder",
    "flexVolume",
    "rbd",
    "scaleIO",
    "iscsi",
    "storageos",
];

fn dependencies(object: &Value, ctx: &Ctx<'_>) -> Result<Vec<DependentObjectReference>> {
    let mut config_maps = BTreeSet::new();
    let mut secrets = BTreeSet::new();
    let mut accounts = BTreeSet::new();
    let mut claims = BTreeSet::new();
    let spec = index(object, &["spec"], &ctx.id)?
        .cloned()
        .unwrap_or(Value::Null);
    accounts.extend(name_at(&spec, &["executor", "serviceAccountName"]));
    for claim in list(&spec, &["volumeClaimTemplates"]) {
        index(claim, &["metadata", "name"], &ctx.id)?;
        claims.extend(name_at(claim, &["metadata", "name"]));
    }
    for volume in list(&spec, &["volumes"]) {
        config_maps.extend(name_at(volume, &["configMap", "name"]));
        for source in list(volume, &["projected", "sources"]) {
            config_maps.extend(name_at(source, &["configMap", "name"]));
            secrets.extend(name_at(source, &["secret", "name"]));
        }
        secrets.extend(name_at(volume, &["azureFile", "secretName"]));
        for plugin in SECRET_REF_PLUGINS {
            secrets.extend(name_at(volume, &[plugin, "secretRef", "name"]));
        }
        secrets.extend(name_at(volume, &["secret", "name"]));
        secrets.extend(name_at(volume, &["csi", "nodePublishSecretRef", "name"]));
        claims.extend(name_at(volume, &["persistentVolumeClaim", "claimName"]));
    }
    for pull in list(&spec, &["imagePullSecrets"]) {
        secrets.extend(name_at(pull, &["name"]));
    }
    accounts.extend(name_at(&spec, &["serviceAccountName"]).filter(|n| n != "default"));
    Ok(named_dependencies(
        get(object, &["metadata", "namespace"]),
        &[
            ("ConfigMap", config_maps),
            ("Secret", secrets),
            ("ServiceAccount", accounts),
            ("PersistentVolumeClaim", claims),
        ],
    ))
}
