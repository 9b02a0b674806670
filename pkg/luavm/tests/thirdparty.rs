//! The third-party interpretations ([`karmada_interpreter::ThirdParty`]) against Karmada v1.16's
//! own: every case of every kind in Karmada's `customizations_tests.yaml` files, read at test time
//! from the pinned `github.com/karmada-io/karmada@v1.16.0` Go module, runs through the native
//! interpretation and through Karmada's Lua customization in this project's Lua VM; both must
//! succeed (Karmada's own test asks that much of its scripts) and give equal answers.
//!
//! Karmada's test data holds inputs only (desired/observed objects, member statuses, replica
//! counts) and no expected results: Karmada's Go test checks that every script runs without an
//! error. The expected answer here is therefore what Karmada's script answers for the case.
//!
//! Compared: replicas and requirements; revised and retained objects whole; the aggregated
//! status (what the binding-status controller writes back; the script's whole answer also drops
//! the template's empty fields, the native one leaves the rest of the template as it was); the
//! reflected status; health; dependencies and components as sets (the scripts list some in Lua's
//! table order, which is not stable); and that each kind defines the same operations. Each case also runs with every member status and with the object's
//! `status` removed, and with other replica counts, so the comparison covers more than the
//! files' happy paths: there both sides must fail, or succeed with equal answers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use karmada_apis::config::v1alpha1::{DependentObjectReference, ResourceInterpreterCustomization};
use karmada_apis::work::v1alpha2::AggregatedStatusItem;
use karmada_interpreter::{InterpreterLayer, InterpreterOptions, ThirdParty};
use karmada_luavm::{Customizations, Limits};
use serde::Deserialize;
use serde_json::Value;

/// Variant runs where both sides failed (the rest gave equal answers).
static BOTH_FAILED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

const MODULE: &str = "github.com/karmada-io/karmada@v1.16.0";
const TREE: &str = "pkg/resourceinterpreter/default/thirdparty/resourcecustomizations";

/// Kinds Karmada ships that have no native interpretation yet (docs/compatibility.md says why).
const NOT_NATIVE: &[&str] = &[];

fn module_dir() -> PathBuf {
    let cache = std::env::var("GOMODCACHE")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| {
            let out = Command::new("go")
                .args(["env", "GOMODCACHE"])
                .output()
                .ok()?;
            let text = String::from_utf8(out.stdout).ok()?;
            Some(text.trim().to_owned()).filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| {
            panic!(
                "cannot find the Go module cache (no GOMODCACHE, no `go env GOMODCACHE`); run \
                 `cd hack/tools/karmada && go mod download -json {MODULE}`"
            )
        });
    let dir = Path::new(&cache).join(MODULE);
    assert!(
        dir.join(TREE).is_dir(),
        "Karmada's module is not in the Go module cache at {}; run \
         `cd hack/tools/karmada && go mod download -json {MODULE}`",
        dir.display()
    );
    dir
}

#[derive(Deserialize)]
struct Tests {
    tests: Vec<Case>,
}

#[derive(Deserialize, Clone)]
#[serde(rename_all = "camelCase")]
struct Case {
    desired_input_path: Option<String>,
    observed_input_path: Option<String>,
    status_input_path: Option<String>,
    #[serde(default)]
    desired_replicas: i64,
    operation: String,
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str_multiple::<Value, Vec<Value>>(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

fn object(dir: &Path, path: &Option<String>) -> Option<Value> {
    let path = path.as_ref()?;
    let mut docs = yaml_docs(&dir.join(path.trim_start_matches('/')));
    assert_eq!(docs.len(), 1, "{path}: one object");
    docs.pop()
}

/// Where an answer differs: the case, and the two answers.
fn differ(what: &str, native: &impl std::fmt::Debug, lua: &impl std::fmt::Debug) -> String {
    format!("{what}:\n  native: {native:?}\n  lua:    {lua:?}")
}

fn sorted(mut deps: Vec<DependentObjectReference>) -> Vec<String> {
    let mut out: Vec<String> = deps
        .drain(..)
        .map(|d| serde_json::to_string(&d).unwrap())
        .collect();
    out.sort();
    out
}

/// Both layers' answers for one operation on one input; `Err` describes a mismatch.
fn compare(
    (native, lua): (&ThirdParty, &Customizations),
    case: &Case,
    subject: &Value,
    observed: Option<&Value>,
    items: &[AggregatedStatusItem],
    replicas: i64,
    must_succeed: bool,
) -> Result<(), String> {
    fn check<T: PartialEq + std::fmt::Debug>(
        what: &str,
        n: Option<karmada_interpreter::Result<T>>,
        l: Option<karmada_interpreter::Result<T>>,
        must_succeed: bool,
    ) -> Result<(), String> {
        match (n, l) {
            (Some(Ok(n)), Some(Ok(l))) if n == l => Ok(()),
            (Some(Ok(n)), Some(Ok(l))) => Err(differ(what, &n, &l)),
            (Some(Err(n)), Some(Err(l))) if !must_succeed => {
                let _ = (n, l);
                BOTH_FAILED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
            (n, l) => Err(differ(what, &n, &l)),
        }
    }
    match case.operation.as_str() {
        "InterpretReplica" => check(
            "replicas",
            native.get_replicas(subject),
            lua.get_replicas(subject),
            must_succeed,
        ),
        "ReviseReplica" => check(
            "revised",
            native.revise_replica(subject, replicas),
            lua.revise_replica(subject, replicas),
            must_succeed,
        ),
        "Retain" => {
            let observed = observed.expect("Retain cases have an observed object");
            check(
                "retained",
                native.retain(subject, observed),
                lua.retain(subject, observed),
                must_succeed,
            )
        }
        "AggregateStatus" => check(
            "aggregated",
            native
                .aggregate_status(subject, items)
                .map(|r| r.map(aggregated_status)),
            lua.aggregate_status(subject, items)
                .map(|r| r.map(aggregated_status)),
            must_succeed,
        ),
        "InterpretStatus" => check(
            "reflected",
            native.reflect_status(subject),
            lua.reflect_status(subject),
            must_succeed,
        ),
        "InterpretHealth" => check(
            "health",
            native.interpret_health(subject),
            lua.interpret_health(subject),
            must_succeed,
        ),
        "InterpretComponent" => check(
            "components",
            native.get_components(subject).map(|r| r.map(by_name)),
            lua.get_components(subject).map(|r| r.map(by_name)),
            must_succeed,
        ),
        "InterpretDependency" => check(
            "dependencies",
            native.get_dependencies(subject).map(|r| r.map(sorted)),
            lua.get_dependencies(subject).map(|r| r.map(sorted)),
            must_succeed,
        ),
        other => Err(format!("unknown operation {other}")),
    }
}

/// Components by name (MPIJob's script lists them in Lua's table order).
fn by_name(mut list: Vec<karmada_apis::work::v1alpha2::Component>) -> Vec<String> {
    list.sort_by(|a, b| a.name.cmp(&b.name));
    list.iter()
        .map(|c| serde_json::to_string(c).unwrap())
        .collect()
}

/// An aggregated object made comparable: condition times the aggregation stamps with the
/// current time (`os.date` in the scripts) are replaced by a marker when within a minute of now,
/// and `status.conditions` is sorted where the scripts build it in Lua's table order.
fn comparable(mut object: Value) -> Value {
    fn mask(v: &mut Value) {
        match v {
            Value::Object(fields) => {
                for (k, child) in fields.iter_mut() {
                    let recent = matches!(k.as_str(), "lastProbeTime" | "lastTransitionTime")
                        && child
                            .as_str()
                            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
                            .is_some_and(|t| {
                                (k8s_openapi::jiff::Timestamp::now().as_second() - t.as_second())
                                    .abs()
                                    < 60
                            });
                    if recent {
                        *child = Value::from("<now>");
                    } else {
                        mask(child);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(mask),
            _ => {}
        }
    }
    mask(&mut object);
    let unordered = matches!(
        object.get("kind").and_then(Value::as_str),
        Some("MPIJob" | "Job" | "UnitedDeployment")
    );
    if unordered && let Some(Value::Array(conditions)) = object.pointer_mut("/status/conditions") {
        conditions.sort_by_key(std::string::ToString::to_string);
    }
    object
}

/// What the controllers take from an aggregation: the status (made comparable).
fn aggregated_status(object: Value) -> Option<Value> {
    comparable(object).get("status").cloned()
}

/// Variations of a case's inputs: without the object's status, without each member's status.
fn variants(
    subject: &Value,
    items: &[AggregatedStatusItem],
) -> Vec<(Value, Vec<AggregatedStatusItem>)> {
    let mut out = Vec::new();
    if subject.get("status").is_some() {
        let mut bare = subject.clone();
        bare.as_object_mut().unwrap().remove("status");
        out.push((bare, items.to_vec()));
    }
    for i in 0..items.len() {
        let mut fewer = items.to_vec();
        fewer[i].status = None;
        out.push((subject.clone(), fewer));
        out.push((subject.clone(), items[..i].to_vec()));
    }
    out
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one walk over every case of every kind, comparing each operation's answers in turn"
)]
fn every_karmada_case_matches_karmadas_scripts() {
    let root = module_dir().join(TREE);
    let native = ThirdParty::new(InterpreterOptions::default());
    let dirs = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect()
    };
    let mut kinds = Vec::new();
    for group in dirs(&root) {
        for version in dirs(&group) {
            kinds.extend(dirs(&version));
        }
    }
    kinds.sort();
    assert_eq!(kinds.len(), 26, "Karmada v1.16 ships 26 third-party kinds");

    let (mut cases, mut variant_runs, mut native_kinds) = (0, 0, 0);
    let mut failures = Vec::new();
    let mut lua_only = Vec::new();
    for dir in &kinds {
        let docs = yaml_docs(&dir.join("customizations.yaml"));
        let customizations: Vec<ResourceInterpreterCustomization> = docs
            .into_iter()
            .map(|d| serde_json::from_value(d).unwrap())
            .collect();
        let target = &customizations[0].spec.target;
        let (api_version, kind) = (target.api_version.clone(), target.kind.clone());
        let name = format!("{api_version} {kind}");
        let lua = Customizations::fixed(customizations, Limits::default());
        let tests: Tests = serde_saphyr::from_str(
            &std::fs::read_to_string(dir.join("customizations_tests.yaml")).unwrap(),
        )
        .unwrap();
        let is_native = native.kind(&api_version, &kind).is_some();
        // The native kind defines exactly the operations Karmada's customization defines.
        if let Some(k) = native.kind(&api_version, &kind) {
            use karmada_interpreter::Operation as Op;
            for op in [
                Op::InterpretReplica,
                Op::ReviseReplica,
                Op::Retain,
                Op::ReflectStatus,
                Op::InterpretHealth,
                Op::AggregateStatus,
            ] {
                if native.hook_enabled(&api_version, &kind, op)
                    != lua.hook_enabled(&api_version, &kind, op)
                {
                    failures.push(format!("{name}: {op:?} defined on one side only"));
                }
            }
            let rules = &customizations_rules(dir);
            if k.has_dependencies() != rules.contains("dependencyInterpretation")
                || k.has_components() != rules.contains("componentResource")
            {
                failures.push(format!(
                    "{name}: dependencies/components defined on one side only"
                ));
            }
        }
        if is_native {
            native_kinds += 1;
        } else {
            lua_only.push(kind.clone());
        }
        for case in &tests.tests {
            cases += 1;
            let desired = object(dir, &case.desired_input_path);
            let observed = object(dir, &case.observed_input_path);
            let items: Vec<AggregatedStatusItem> = case
                .status_input_path
                .as_ref()
                .map(|p| {
                    yaml_docs(&dir.join(p.trim_start_matches('/')))
                        .into_iter()
                        .map(|mut d| {
                            // Go decodes a missing clusterName as "".
                            if d.get("clusterName").is_none() {
                                d["clusterName"] = Value::from("");
                            }
                            serde_json::from_value(d).unwrap()
                        })
                        .collect()
                })
                .unwrap_or_default();
            // Karmada's rules take the desired object, else the observed one (Retain: both).
            let subject = desired
                .clone()
                .or_else(|| observed.clone())
                .expect("a case has an object");
            let label = format!(
                "{name} {} ({:?})",
                case.operation,
                case.desired_input_path
                    .as_ref()
                    .or(case.observed_input_path.as_ref())
            );
            if !is_native {
                // Karmada's own bar: the script runs without an error.
                let ran = compare_lua_only(&lua, case, &subject, observed.as_ref(), &items);
                if let Err(e) = ran {
                    failures.push(format!("{label}: Karmada's script failed: {e}"));
                }
                continue;
            }
            if let Err(e) = compare(
                (&native, &lua),
                case,
                &subject,
                observed.as_ref(),
                &items,
                case.desired_replicas,
                true,
            ) {
                failures.push(format!("{label}: {e}"));
            }
            let mut more = variants(&subject, &items);
            if case.operation == "ReviseReplica" {
                more.push((subject.clone(), items.clone()));
            }
            for (i, (subject, items)) in more.iter().enumerate() {
                variant_runs += 1;
                let replicas = case.desired_replicas + i as i64 + 1;
                if let Err(e) = compare(
                    (&native, &lua),
                    case,
                    subject,
                    observed.as_ref(),
                    items,
                    replicas,
                    false,
                ) {
                    failures.push(format!("{label} variant {i}: {e}"));
                }
            }
        }
    }
    println!(
        "third-party kinds: {} ({native_kinds} native); Karmada cases: {cases}; extra variants: \
         {variant_runs} ({} failed on both sides)",
        kinds.len(),
        BOTH_FAILED.load(std::sync::atomic::Ordering::Relaxed)
    );
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    lua_only.sort();
    let mut expected: Vec<String> = NOT_NATIVE.iter().map(|s| (*s).to_owned()).collect();
    expected.sort();
    assert_eq!(lua_only, expected, "kinds without a native interpretation");
    assert_eq!(cases, 114, "Karmada v1.16's third-party test cases");
}

/// The customization fields Karmada's file defines for a kind.
fn customizations_rules(dir: &Path) -> std::collections::BTreeSet<String> {
    yaml_docs(&dir.join("customizations.yaml"))
        .iter()
        .filter_map(|d| d.pointer("/spec/customizations")?.as_object())
        .flat_map(|rules| rules.keys().cloned())
        .collect()
}

fn compare_lua_only(
    lua: &Customizations,
    case: &Case,
    subject: &Value,
    observed: Option<&Value>,
    items: &[AggregatedStatusItem],
) -> Result<(), String> {
    let failed = |e: karmada_interpreter::InterpretError| e.to_string();
    let none = || "no rule for the operation".to_owned();
    match case.operation.as_str() {
        "InterpretReplica" => lua
            .get_replicas(subject)
            .ok_or_else(none)?
            .map(drop)
            .map_err(failed),
        "ReviseReplica" => lua
            .revise_replica(subject, case.desired_replicas)
            .ok_or_else(none)?
            .map(drop)
            .map_err(failed),
        "Retain" => lua
            .retain(subject, observed.ok_or_else(none)?)
            .ok_or_else(none)?
            .map(drop)
            .map_err(failed),
        "AggregateStatus" => lua
            .aggregate_status(subject, items)
            .ok_or_else(none)?
            .map(drop)
            .map_err(failed),
        "InterpretStatus" => lua
            .reflect_status(subject)
            .ok_or_else(none)?
            .map(drop)
            .map_err(failed),
        "InterpretHealth" => lua
            .interpret_health(subject)
            .ok_or_else(none)?
            .map(drop)
            .map_err(failed),
        "InterpretDependency" => lua
            .get_dependencies(subject)
            .ok_or_else(none)?
            .map(drop)
            .map_err(failed),
        "InterpretComponent" => lua
            .get_components(subject)
            .ok_or_else(none)?
            .map(drop)
            .map_err(failed),
        other => Err(format!("unknown operation {other}")),
    }
}

/// Karmada's lookup order, per operation: a customization's rule first, then the third-party
/// interpretation, then the native rules; another version of a third-party kind is not one.
#[test]
fn customization_then_third_party_then_native_per_operation() {
    use karmada_apis::work::v1alpha1::ResourceHealth;
    use karmada_interpreter::Interpreter;
    use serde_json::json;

    let customization: ResourceInterpreterCustomization = serde_json::from_value(json!({
        "apiVersion": "config.karmada.io/v1alpha1", "kind": "ResourceInterpreterCustomization",
        "metadata": {"name": "cloneset-health"},
        "spec": {"target": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet"},
            "customizations": {"healthInterpretation": {"luaScript":
                "function InterpretHealth(obj) return obj.metadata.labels.healthy == 'yes' end"}}}
    }))
    .unwrap();
    let interpreter = Interpreter::default()
        .with_layer(std::sync::Arc::new(Customizations::fixed(
            vec![customization],
            Limits::default(),
        )))
        .with_layer(std::sync::Arc::new(ThirdParty::new(
            InterpreterOptions::default(),
        )));
    let clone_set = |api_version: &str| {
        json!({"apiVersion": api_version, "kind": "CloneSet",
            "metadata": {"name": "web", "namespace": "default", "generation": 2,
                "labels": {"healthy": "yes"}},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c",
                "resources": {"requests": {"cpu": "100m"}}}]}}},
            "status": {"observedGeneration": 1, "updatedReplicas": 0, "availableReplicas": 0}})
    };
    let v1alpha1 = clone_set("apps.kruise.io/v1alpha1");
    // Health: the customization's rule (the third-party one would say Unhealthy: generation 2
    // not observed yet).
    assert_eq!(
        interpreter.interpret_health(&v1alpha1),
        ResourceHealth::Healthy
    );
    // Replicas: no customization rule, so the third-party one.
    let replicas = interpreter.get_replicas(&v1alpha1).unwrap().unwrap();
    assert_eq!(replicas.replicas, 3);
    assert!(replicas.requirements.is_some());
    let mut revised = v1alpha1.clone();
    assert!(interpreter.revise_replica(&mut revised, 1).unwrap());
    assert_eq!(revised["spec"]["replicas"], json!(1));
    // Another version of the kind: no third-party rule, no replicas (the native default).
    let other = clone_set("apps.kruise.io/v1beta1");
    assert!(interpreter.get_replicas(&other).unwrap().is_none());
    assert!(!interpreter.hook_enabled_for(
        "apps.kruise.io/v1beta1",
        "CloneSet",
        karmada_interpreter::Operation::InterpretReplica
    ));
    assert!(interpreter.hook_enabled_for(
        "apps.kruise.io/v1alpha1",
        "CloneSet",
        karmada_interpreter::Operation::InterpretReplica
    ));
    // A native kind keeps its native rules.
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "default"},
        "spec": {"replicas": 2, "template": {"spec": {"containers": []}}}});
    assert_eq!(
        interpreter
            .get_replicas(&deployment)
            .unwrap()
            .unwrap()
            .replicas,
        2
    );
}
