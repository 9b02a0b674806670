//! Flux: the sources (`source.toolkit.fluxcd.io` GitRepository, Bucket, HelmChart,
//! HelmRepository, OCIRepository), Kustomization and HelmRelease.
//!
//! All of them are healthy when a `Ready` condition is `True` with the kind's success reason;
//! keep the member's `spec.suspend`; report conditions, their kind's status fields and the
//! generations; and aggregate conditions across members by (type, status, reason), each message
//! prefixed with `<cluster>=` and joined with `, `. Their dependencies are the Secrets,
//! ServiceAccounts and ConfigMaps their spec names.

use std::collections::{BTreeSet, HashMap};

use karmada_apis::config::v1alpha1::DependentObjectReference;
use serde_json::{Map, Value};

use super::kruise::{caught_up, init_generations, list, report_generations};
use super::value::{self, get, index, non_empty, number, shape, status_mut};
use super::{Ctx, KindInterpretation, named_dependencies};
use crate::error::{ObjectRef, Result};

/// How a Flux kind reads and aggregates.
struct Flux {
    /// Reasons of a `Ready=True` condition that mean healthy.
    ready_reasons: &'static [&'static str],
    /// Status fields reported from members (with `generation`, `resourceTemplateGeneration`).
    reflected: &'static [&'static str],
    /// Status fields the aggregate takes from the last member reporting them.
    last: &'static [(&'static str, Last)],
    /// Counters added up across members, kept absent when the template lacks them.
    summed: &'static [&'static str],
    /// Whether the template keeps its `observedGeneration` when members lag (HelmRelease's
    /// aggregation drops it instead: it reads an undefined variable there).
    keeps_observed_generation: bool,
}

/// Where a "last reported" field starts and what a member must report to replace it.
#[derive(Clone, Copy)]
enum Last {
    /// Starts as an empty object; any reported value replaces it.
    AnyFromEmpty,
    /// Starts as `''`; a non-empty value replaces it.
    NonEmptyFromBlank,
    /// Starts as the template's value; a non-empty value replaces it.
    NonEmptyFromTemplate,
    /// Starts as the template's value; any reported value replaces it.
    AnyFromTemplate,
}

const SUCCEEDED: &[&str] = &["Succeeded"];
const RECONCILED: &[&str] = &["ReconciliationSucceeded"];

const GIT_REPOSITORY: Flux = Flux {
    ready_reasons: SUCCEEDED,
    reflected: &[
        "conditions",
        "artifact",
        "observedGeneration",
        "observedIgnore",
        "observedRecurseSubmodules",
    ],
    last: &[("artifact", Last::AnyFromEmpty)],
    summed: &[],
    keeps_observed_generation: true,
};

const BUCKET: Flux = Flux {
    ready_reasons: SUCCEEDED,
    reflected: &[
        "conditions",
        "artifact",
        "observedIgnore",
        "observedGeneration",
        "url",
    ],
    last: &[
        ("artifact", Last::AnyFromEmpty),
        ("url", Last::NonEmptyFromBlank),
    ],
    summed: &[],
    keeps_observed_generation: true,
};

const HELM_CHART: Flux = Flux {
    ready_reasons: &["Succeeded", "ChartPullSucceeded"],
    // Karmada's script assigns an undefined variable to `observedGeneration`: never reported.
    reflected: &[
        "artifact",
        "conditions",
        "observedChartName",
        "observedSourceArtifactRevision",
        "url",
    ],
    last: &[
        ("artifact", Last::AnyFromEmpty),
        ("url", Last::NonEmptyFromBlank),
        ("observedSourceArtifactRevision", Last::NonEmptyFromBlank),
        ("observedChartName", Last::NonEmptyFromBlank),
    ],
    summed: &[],
    keeps_observed_generation: true,
};

const HELM_REPOSITORY: Flux = Flux {
    ready_reasons: SUCCEEDED,
    reflected: &["artifact", "conditions", "observedGeneration", "url"],
    last: &[
        ("artifact", Last::AnyFromEmpty),
        ("url", Last::NonEmptyFromBlank),
    ],
    summed: &[],
    keeps_observed_generation: true,
};

const OCI_REPOSITORY: Flux = Flux {
    ready_reasons: SUCCEEDED,
    reflected: &[
        "artifact",
        "observedGeneration",
        "observedIgnore",
        "conditions",
        "url",
        "observedLayerSelector",
    ],
    last: &[
        ("artifact", Last::AnyFromEmpty),
        ("url", Last::NonEmptyFromBlank),
    ],
    summed: &[],
    keeps_observed_generation: true,
};

const KUSTOMIZATION: Flux = Flux {
    ready_reasons: RECONCILED,
    reflected: &[
        "conditions",
        "lastAppliedRevision",
        "lastAttemptedRevision",
        "observedGeneration",
    ],
    last: &[
        ("lastAttemptedRevision", Last::NonEmptyFromTemplate),
        ("lastAppliedRevision", Last::NonEmptyFromTemplate),
    ],
    summed: &[],
    keeps_observed_generation: true,
};

const HELM_RELEASE: Flux = Flux {
    ready_reasons: RECONCILED,
    reflected: &[
        "conditions",
        "observedGeneration",
        "lastAttemptedRevision",
        "lastAppliedRevision",
        "lastAttemptedValuesChecksum",
        "helmChart",
        "lastReleaseRevision",
        "failures",
        "upgradeFailures",
        "installFailures",
    ],
    last: &[
        ("lastAttemptedRevision", Last::NonEmptyFromTemplate),
        ("lastAppliedRevision", Last::NonEmptyFromTemplate),
        ("lastAttemptedValuesChecksum", Last::NonEmptyFromTemplate),
        ("helmChart", Last::NonEmptyFromTemplate),
        ("lastReleaseRevision", Last::AnyFromTemplate),
    ],
    summed: &["failures", "upgradeFailures", "installFailures"],
    keeps_observed_generation: false,
};

macro_rules! flux_kind {
    ($table:expr, $api_version:expr, $kind:expr, $spec:ident, $deps:expr) => {
        $table.insert(
            ($api_version, $kind),
            KindInterpretation {
                retain: Some(retain_suspend),
                aggregate: Some(|d, items, ctx| aggregate(d, items, &$spec, ctx)),
                reflect: Some(|o, _| Ok(reflect(o, &$spec))),
                health: Some(|o, _| Ok(healthy(o, $spec.ready_reasons))),
                dependencies: Some($deps),
                ..Default::default()
            },
        );
    };
}

pub(super) fn register(table: &mut HashMap<(&'static str, &'static str), KindInterpretation>) {
    const SOURCE_V1: &str = "source.toolkit.fluxcd.io/v1";
    const SOURCE_V1BETA2: &str = "source.toolkit.fluxcd.io/v1beta2";
    flux_kind!(
        table,
        SOURCE_V1,
        "GitRepository",
        GIT_REPOSITORY,
        |o, ctx| {
            secrets(
                o,
                ctx,
                &[&["spec", "secretRef"], &["spec", "verify", "secretRef"]],
            )
        }
    );
    flux_kind!(table, SOURCE_V1BETA2, "Bucket", BUCKET, |o, ctx| {
        secrets(o, ctx, &[&["spec", "secretRef"]])
    });
    flux_kind!(table, SOURCE_V1BETA2, "HelmChart", HELM_CHART, |o, ctx| {
        secrets(o, ctx, &[&["spec", "verify", "secretRef"]])
    });
    flux_kind!(
        table,
        SOURCE_V1BETA2,
        "HelmRepository",
        HELM_REPOSITORY,
        |o, ctx| { secrets(o, ctx, &[&["spec", "secretRef"]]) }
    );
    flux_kind!(
        table,
        SOURCE_V1BETA2,
        "OCIRepository",
        OCI_REPOSITORY,
        oci_dependencies
    );
    flux_kind!(
        table,
        "kustomize.toolkit.fluxcd.io/v1",
        "Kustomization",
        KUSTOMIZATION,
        kustomization_dependencies
    );
    flux_kind!(
        table,
        "helm.toolkit.fluxcd.io/v2beta1",
        "HelmRelease",
        HELM_RELEASE,
        helm_release_dependencies
    );
}

fn healthy(object: &Value, reasons: &[&str]) -> bool {
    list(object, &["status", "conditions"]).any(|c| {
        get(c, &["type"]).and_then(Value::as_str) == Some("Ready")
            && get(c, &["status"]).and_then(Value::as_str) == Some("True")
            && get(c, &["reason"])
                .and_then(Value::as_str)
                .is_some_and(|r| reasons.contains(&r))
    })
}

fn retain_suspend(desired: &Value, observed: &Value, ctx: &Ctx<'_>) -> Result<Value> {
    let mut retained = desired.clone();
    if let Some(suspend) = index(observed, &["spec", "suspend"], &ctx.id)? {
        value::set(
            &mut retained,
            &["spec", "suspend"],
            suspend.clone(),
            &ctx.id,
        )?;
    }
    Ok(shape(retained, true, &[desired, observed]))
}

fn reflect(object: &Value, flux: &Flux) -> Value {
    let Some(observed) = get(object, &["status"]) else {
        return Value::Object(Map::new());
    };
    let mut status = Map::new();
    for field in flux.reflected {
        if let Some(v) = get(observed, &[field]) {
            status.insert((*field).to_owned(), v.clone());
        }
    }
    report_generations(object, &mut status);
    shape(Value::Object(status), true, &[])
}

/// The members' conditions merged by (type, status, reason): each message becomes
/// `<cluster>=<message>`, and the messages of one group are joined with `, `.
pub(super) fn merge_conditions(items: &[Value], id: &ObjectRef) -> Result<Vec<Value>> {
    let mut merged: Vec<Value> = Vec::new();
    for item in items {
        let cluster = lua_text(
            get(item, &["clusterName"]),
            &["statusItems", "clusterName"],
            id,
        )?;
        for condition in list(item, &["status", "conditions"]) {
            let message = lua_text(
                index(condition, &["message"], id)?,
                &["statusItems", "status", "conditions", "message"],
                id,
            )?;
            let mut condition = condition.clone();
            let message = format!("{cluster}={message}");
            let same = |c: &Value| {
                ["type", "status", "reason"]
                    .iter()
                    .all(|f| value::lua_eq(get(c, &[f]), get(&condition, &[f])))
            };
            match merged.iter_mut().find(|c| same(c)) {
                Some(existing) => {
                    let before = lua_text(get(existing, &["message"]), &["message"], id)?;
                    existing["message"] = Value::from(format!("{before}, {message}"));
                }
                None => {
                    condition["message"] = Value::from(message);
                    merged.push(condition);
                }
            }
        }
    }
    Ok(merged)
}

/// A value as Lua's `..` writes it: strings as they are, numbers as numbers print; anything else
/// is an error.
fn lua_text(value: Option<&Value>, path: &[&str], id: &ObjectRef) -> Result<String> {
    match value {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            _ => n.to_string(),
        }),
        Some(_) => Err(value::wrong(path, "a string", id)),
        None => Err(value::missing(path, id)),
    }
}

fn aggregate(desired: &Value, items: &[Value], flux: &Flux, ctx: &Ctx<'_>) -> Result<Value> {
    let mut object = desired.clone();
    let (generation, observed_generation) = init_generations(&mut object, ctx)?;
    let template_status = get(&object, &["status"]).cloned().unwrap_or(Value::Null);
    let mut last: Vec<Option<Value>> = flux
        .last
        .iter()
        .map(|(field, start)| match start {
            Last::AnyFromEmpty => Some(Value::Object(Map::new())),
            Last::NonEmptyFromBlank => Some(Value::from("")),
            Last::NonEmptyFromTemplate | Last::AnyFromTemplate => {
                get(&template_status, &[field]).cloned()
            }
        })
        .collect();
    let mut sums: Vec<Option<f64>> = flux
        .summed
        .iter()
        .map(|field| get(&template_status, &[field]).and_then(value::as_number))
        .collect();
    let mut caught = 0;
    for item in items {
        let status = get(item, &["status"]);
        if let Some(status) = status {
            for (slot, (field, start)) in last.iter_mut().zip(flux.last) {
                let reported = match start {
                    Last::AnyFromEmpty | Last::AnyFromTemplate => get(status, &[field]),
                    Last::NonEmptyFromBlank | Last::NonEmptyFromTemplate => {
                        non_empty(status, &[field])
                    }
                };
                if let Some(v) = reported {
                    *slot = Some(v.clone());
                }
            }
            for (sum, field) in sums.iter_mut().zip(flux.summed) {
                if let (Some(total), Some(v)) = (sum.as_mut(), get(status, &[field])) {
                    *total += value::as_number(v).ok_or_else(|| {
                        value::wrong(&["statusItems", "status", field], "a number", &ctx.id)
                    })?;
                }
            }
        }
        if caught_up(status, &generation) {
            caught += 1;
        }
    }
    let conditions = merge_conditions(items, &ctx.id)?;
    let status = status_mut(&mut object, &ctx.id)?;
    if caught == items.len() {
        status.insert("observedGeneration".into(), generation);
    } else if flux.keeps_observed_generation {
        status.insert("observedGeneration".into(), observed_generation);
    } else {
        status.remove("observedGeneration");
    }
    for (v, (field, _)) in last.into_iter().zip(flux.last) {
        match v {
            Some(v) => status.insert((*field).to_owned(), v),
            None => status.remove(*field),
        };
    }
    for (v, field) in sums.into_iter().zip(flux.summed) {
        match v {
            Some(v) => status.insert((*field).to_owned(), number(v)),
            None => status.remove(*field),
        };
    }
    status.insert("conditions".into(), Value::Array(conditions));
    Ok(value::shaped_status(object))
}

/// The name of the reference at `path` when the reference is there and its name is not `''`;
/// a reference without a name is an error (the scripts index a table with it).
fn reference_name(object: &Value, path: &[&str], id: &ObjectRef) -> Result<Option<String>> {
    if get(object, path).is_none() {
        return Ok(None);
    }
    let mut name_path = path.to_vec();
    name_path.push("name");
    match get(object, &name_path) {
        None => Err(value::missing(&name_path, id)),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Ok(Some(other.to_string())),
    }
}

/// The Secrets the references at `paths` name.
fn secrets(
    object: &Value,
    ctx: &Ctx<'_>,
    paths: &[&[&str]],
) -> Result<Vec<DependentObjectReference>> {
    let mut names = BTreeSet::new();
    for path in paths {
        names.extend(reference_name(object, path, &ctx.id)?);
    }
    Ok(named_dependencies(
        get(object, &["metadata", "namespace"]),
        &[("Secret", names)],
    ))
}

fn service_account(object: &Value, required: bool, ctx: &Ctx<'_>) -> Result<BTreeSet<String>> {
    match get(object, &["spec", "serviceAccountName"]) {
        Some(Value::String(s)) if s.is_empty() => Ok(BTreeSet::new()),
        Some(Value::String(s)) => Ok(BTreeSet::from([s.clone()])),
        Some(other) => Ok(BTreeSet::from([other.to_string()])),
        // OCIRepository's script uses the name as a table key without checking for nil.
        None if required => Err(value::missing(&["spec", "serviceAccountName"], &ctx.id)),
        None => Ok(BTreeSet::new()),
    }
}

fn oci_dependencies(object: &Value, ctx: &Ctx<'_>) -> Result<Vec<DependentObjectReference>> {
    let mut secrets = BTreeSet::new();
    for path in [
        &["spec", "secretRef"][..],
        &["spec", "verify", "secretRef"],
        &["spec", "certSecretRef"],
    ] {
        secrets.extend(reference_name(object, path, &ctx.id)?);
    }
    let accounts = service_account(object, true, ctx)?;
    Ok(named_dependencies(
        get(object, &["metadata", "namespace"]),
        &[("Secret", secrets), ("ServiceAccount", accounts)],
    ))
}

fn kustomization_dependencies(
    object: &Value,
    ctx: &Ctx<'_>,
) -> Result<Vec<DependentObjectReference>> {
    let mut secrets = BTreeSet::new();
    for path in [
        &["spec", "decryption", "secretRef"][..],
        &["spec", "kubeConfig", "secretRef"],
    ] {
        secrets.extend(reference_name(object, path, &ctx.id)?);
    }
    let accounts = service_account(object, false, ctx)?;
    Ok(named_dependencies(
        get(object, &["metadata", "namespace"]),
        &[("Secret", secrets), ("ServiceAccount", accounts)],
    ))
}

fn helm_release_dependencies(
    object: &Value,
    ctx: &Ctx<'_>,
) -> Result<Vec<DependentObjectReference>> {
    let mut secrets = BTreeSet::new();
    let mut config_maps = BTreeSet::new();
    for source in list(object, &["spec", "valuesFrom"]) {
        let target = match get(source, &["kind"]).and_then(Value::as_str) {
            Some("Secret") => &mut secrets,
            Some("ConfigMap") => &mut config_maps,
            _ => continue,
        };
        match get(source, &["name"]) {
            Some(Value::String(s)) => target.insert(s.clone()),
            Some(other) => target.insert(other.to_string()),
            None => return Err(value::missing(&["spec", "valuesFrom", "name"], &ctx.id)),
        };
    }
    for path in [
        &["spec", "chart", "spec", "verify", "secretRef"][..],
        &["spec", "kubeConfig", "secretRef"],
    ] {
        secrets.extend(reference_name(object, path, &ctx.id)?);
    }
    let accounts = service_account(object, false, ctx)?;
    Ok(named_dependencies(
        get(object, &["metadata", "namespace"]),
        &[
            ("Secret", secrets),
            ("ServiceAccount", accounts),
            ("ConfigMap", config_maps),
        ],
    ))
}
