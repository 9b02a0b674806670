//! `karmadactl interpret`: checks ResourceInterpreterCustomizations and runs one of their rules
//! locally, with Karmada's flags and output. The scripts run in the controllers' Lua VM and
//! customization layer (`karmada-luavm`'s [`Customizations`], the layer the controller-manager puts
//! in front of its interpreter), so a script behaves here as it does in the cluster.
//!
//! Differences from Karmada: `--edit` is not implemented; `-f` takes files, directories and `-`
//! (stdin), not URLs; `--check` also runs each script's top level and requires its function (as
//! the controllers do when they load it), where Karmada only compiles it; a rule that fails exits
//! with status 1 (Karmada prints the error and exits 0).

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use karmada_apis::config::v1alpha1::ResourceInterpreterCustomization;
use karmada_apis::work::v1alpha2::AggregatedStatusItem;
use karmada_interpreter::InterpreterLayer;
use karmada_luavm::{Customizations, Limits, LuaOperation, Script};
use serde_json::{Value, json};

use crate::cli::InterpretArgs;
use crate::util::CommandFailed;

/// One rule of a customization: Karmada's operation name and the customization field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// Karmada's operation name (`--operation`).
    pub name: &'static str,
    /// The script's field under `spec.customizations`.
    pub field: &'static str,
    /// The Lua operation.
    pub operation: LuaOperation,
}

/// Every rule, in Karmada's order (the order `--check` lists them).
pub const RULES: [Rule; 8] = [
    Rule {
        name: "Retain",
        field: "retention",
        operation: LuaOperation::Retain,
    },
    Rule {
        name: "InterpretReplica",
        field: "replicaResource",
        operation: LuaOperation::GetReplicas,
    },
    Rule {
        name: "InterpretComponent",
        field: "componentResource",
        operation: LuaOperation::GetComponents,
    },
    Rule {
        name: "ReviseReplica",
        field: "replicaRevision",
        operation: LuaOperation::ReviseReplica,
    },
    Rule {
        name: "InterpretStatus",
        field: "statusReflection",
        operation: LuaOperation::ReflectStatus,
    },
    Rule {
        name: "AggregateStatus",
        field: "statusAggregation",
        operation: LuaOperation::AggregateStatus,
    },
    Rule {
        name: "InterpretHealth",
        field: "healthInterpretation",
        operation: LuaOperation::InterpretHealth,
    },
    Rule {
        name: "InterpretDependency",
        field: "dependencyInterpretation",
        operation: LuaOperation::GetDependencies,
    },
];

/// The rule for `--operation` (case-insensitive, as in Karmada).
pub fn rule(operation: &str) -> anyhow::Result<Rule> {
    let wanted = operation.trim().to_lowercase();
    RULES
        .into_iter()
        .find(|r| r.name.to_lowercase() == wanted)
        .ok_or_else(|| {
            anyhow!(
                "operation {operation} is not supported. Use one of: {}",
                RULES.map(|r| r.name).join(", ")
            )
        })
}

/// One YAML or JSON document and where it came from.
#[derive(Debug, Clone)]
struct Document {
    source: String,
    value: Value,
}

/// The files `-f` names: a file, every `.json`/`.yaml`/`.yml` file of a directory (with
/// `recursive`, of its subdirectories too), or `-` for stdin.
fn read_documents(paths: &[PathBuf], recursive: bool) -> anyhow::Result<Vec<Document>> {
    let mut docs = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading stdin")?;
            docs.extend(parse_documents("STDIN", &text)?);
            continue;
        }
        let s = path.to_string_lossy();
        if s.starts_with("http://") || s.starts_with("https://") {
            bail!("{s}: URLs are not supported; download the file and pass its path");
        }
        for file in files_of(path, recursive, true)? {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            docs.extend(parse_documents(&file.display().to_string(), &text)?);
        }
    }
    Ok(docs)
}

fn files_of(path: &Path, recursive: bool, top: bool) -> anyhow::Result<Vec<PathBuf>> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("the path {:?} does not exist", path.display().to_string()))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    if !top && !recursive {
        return Ok(Vec::new());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("cannot list {}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    let mut files = Vec::new();
    for entry in entries {
        if entry.is_dir() {
            files.extend(files_of(&entry, recursive, false)?);
        } else if entry
            .extension()
            .is_some_and(|e| e == "json" || e == "yaml" || e == "yml")
        {
            files.push(entry);
        }
    }
    Ok(files)
}

/// The non-empty documents of a YAML (or JSON) stream.
fn parse_documents(source: &str, text: &str) -> anyhow::Result<Vec<Document>> {
    let values: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| anyhow!("error parsing {source}: {e}"))?;
    Ok(values
        .into_iter()
        .filter(|v| !v.is_null())
        .map(|value| Document {
            source: source.to_owned(),
            value,
        })
        .collect())
}

/// Go's `GroupVersionKind.String()` of a document (`/v1, Kind=Pod`).
fn gvk_string(v: &Value) -> String {
    let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={kind}")
}

fn is_customization(v: &Value) -> bool {
    v.get("apiVersion").and_then(Value::as_str) == Some("config.karmada.io/v1alpha1")
        && v.get("kind").and_then(Value::as_str) == Some("ResourceInterpreterCustomization")
}

fn customization(doc: &Document) -> anyhow::Result<ResourceInterpreterCustomization> {
    if !is_customization(&doc.value) {
        bail!(
            "not a ResourceInterpreterCustomization, got {}",
            gvk_string(&doc.value)
        );
    }
    serde_json::from_value(doc.value.clone()).map_err(|e| {
        anyhow!(
            "{}: invalid ResourceInterpreterCustomization {}: {e}",
            doc.source,
            doc.value
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
        )
    })
}

/// Runs `karmadactl interpret`; what it prints on stdout.
pub fn run(args: &InterpretArgs) -> anyhow::Result<String> {
    if args.check && args.edit {
        bail!("you can't set both --check and --edit options");
    }
    if args.edit {
        bail!(
            "--edit is not supported by this karmadactl; edit the file and run --check (see \
             docs/compatibility.md)"
        );
    }
    if args.filename.is_empty() {
        bail!("must specify one of -f and -k");
    }
    let rule = match &args.operation {
        Some(op) if !op.is_empty() => Some(rule(op)?),
        _ => None,
    };
    let docs = read_documents(&args.filename, args.recursive)?;
    if args.check {
        return check(&docs);
    }
    let rule = rule.ok_or_else(|| anyhow!("operation is not set for executing"))?;
    execute(args, rule, &docs)
}

/// `--check`: for each document, its target and whether each rule's script loads.
fn check(docs: &[Document]) -> anyhow::Result<String> {
    let mut out = String::new();
    let mut failed = false;
    for doc in docs {
        out.push_str("-----------------------------------\n");
        let v = &doc.value;
        let source = v
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or(&doc.source);
        out.push_str(&format!("SOURCE: {source}\n"));
        if !is_customization(v) {
            failed = true;
            out.push_str(&format!(
                "not a ResourceInterpreterCustomization, got {}\n",
                gvk_string(v)
            ));
            continue;
        }
        let field = |f: &str| {
            v.pointer(&format!("/spec/target/{f}"))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        let (kind, api_version) = (field("kind"), field("apiVersion"));
        if kind.is_empty() {
            failed = true;
            out.push_str("target.kind no set\n");
            continue;
        }
        if api_version.is_empty() {
            failed = true;
            out.push_str("target.apiVersion no set\n");
            continue;
        }
        out.push_str(&format!("TARGET: {api_version} {kind}\t\n"));
        out.push_str("RULERS:\n");
        for r in RULES {
            out.push_str(&format!("    {}:\t", r.name));
            let script = v
                .pointer(&format!("/spec/customizations/{}/luaScript", r.field))
                .and_then(Value::as_str)
                .unwrap_or("");
            if script.is_empty() {
                out.push_str("UNSET\n");
                continue;
            }
            let name = format!("ResourceInterpreterCustomization {source} {}", r.field);
            match Script::compile(name, r.operation, script, Limits::default()) {
                Ok(_) => out.push_str("PASS\n"),
                Err(e) => {
                    failed = true;
                    out.push_str(&format!("ERROR: {}\t\n", e.to_string().trim()));
                }
            }
        }
    }
    let out = crate::tabwriter::format(&out);
    if failed {
        return Err(CommandFailed::stdout(out).into());
    }
    Ok(out)
}

/// The one object a `--desired-file`/`--observed-file` names.
fn object_of(flag: &str, path: Option<&PathBuf>) -> anyhow::Result<Option<Value>> {
    let Some(path) = path else { return Ok(None) };
    let docs = read_documents(std::slice::from_ref(path), false)
        .with_context(|| format!("fail to get {flag} object"))?;
    match docs.len() {
        0 => bail!("fail to get {flag} object: no object in {}", path.display()),
        1 => Ok(docs.into_iter().next().map(|d| d.value)),
        n => bail!("fail to get {flag} object: get {n} objects, expect one at most"),
    }
}

/// `--operation`: runs the rule and prints each result as Karmada does.
fn execute(args: &InterpretArgs, rule: Rule, docs: &[Document]) -> anyhow::Result<String> {
    let customizations = docs
        .iter()
        .map(customization)
        .collect::<anyhow::Result<Vec<_>>>()
        .map_err(|e| anyhow!("fail to get customization object: {e:#}"))?;
    let desired = object_of("desired", args.desired_file.as_ref())?;
    let observed = object_of("observed", args.observed_file.as_ref())?;
    let status: Vec<AggregatedStatusItem> = match &args.status_file {
        None => Vec::new(),
        Some(path) => read_documents(std::slice::from_ref(path), true)
            .and_then(|docs| {
                docs.into_iter()
                    .map(|d| {
                        status_item(d.value)
                            .with_context(|| format!("{}: not an AggregatedStatusItem", d.source))
                    })
                    .collect()
            })
            .map_err(|e| anyhow!("fail to get status items: {e:#}"))?,
    };
    let layer = Customizations::fixed(customizations, Limits::default());
    let results = run_rule(
        &layer,
        rule,
        desired.as_ref(),
        observed.as_ref(),
        &status,
        args.desired_replica,
    )
    .map_err(|e| anyhow!("Execute {} error: {e:#}", rule.name))?;
    let mut out = String::new();
    let n = results.len();
    for (i, (name, value)) in results.into_iter().enumerate() {
        out.push_str("---\n");
        out.push_str(&format!("# [{}/{n}] {name}:\n", i + 1));
        out.push_str(&crate::yaml::to_string(&value));
    }
    Ok(out)
}

/// A `--status-file` document as an AggregatedStatusItem; like Go's decoding, a missing
/// `clusterName` is empty.
pub fn status_item(mut value: Value) -> anyhow::Result<AggregatedStatusItem> {
    if let Some(m) = value.as_object_mut() {
        m.entry("clusterName").or_insert_with(|| json!(""));
    }
    Ok(serde_json::from_value(value)?)
}

/// Runs `rule` through the customization layer; the named results Karmada prints, in its order.
pub fn run_rule(
    layer: &dyn InterpreterLayer,
    rule: Rule,
    desired: Option<&Value>,
    observed: Option<&Value>,
    status: &[AggregatedStatusItem],
    replica: i32,
) -> anyhow::Result<Vec<(&'static str, Value)>> {
    let not_enabled = || anyhow!("rule is not enabled");
    let object = || -> anyhow::Result<&Value> {
        match (desired, observed) {
            (None, None) => bail!("desired-file, observed-file options are not set"),
            (Some(_), Some(_)) => {
                bail!("you can not specify both desired-file and observed-file options")
            }
            (Some(o), None) | (None, Some(o)) => Ok(o),
        }
    };
    Ok(match rule.operation {
        LuaOperation::Retain => {
            let desired =
                desired.ok_or_else(|| anyhow!("desired, desired-file options are not set"))?;
            let observed =
                observed.ok_or_else(|| anyhow!("observed, observed-file options are not set"))?;
            let retained = layer.retain(desired, observed).ok_or_else(not_enabled)??;
            vec![("retained", retained)]
        }
        LuaOperation::GetReplicas => {
            let r = layer.get_replicas(object()?).ok_or_else(not_enabled)??;
            vec![
                ("replica", json!(r.replicas)),
                ("requires", serde_json::to_value(r.requirements)?),
            ]
        }
        LuaOperation::GetComponents => {
            let c = layer.get_components(object()?).ok_or_else(not_enabled)??;
            vec![("components", serde_json::to_value(c)?)]
        }
        LuaOperation::ReviseReplica => {
            let revised = layer
                .revise_replica(object()?, i64::from(replica))
                .ok_or_else(not_enabled)??;
            vec![("revised", revised)]
        }
        LuaOperation::ReflectStatus => {
            let status = layer.reflect_status(object()?).ok_or_else(not_enabled)??;
            vec![("status", status)]
        }
        LuaOperation::AggregateStatus => {
            let aggregated = layer
                .aggregate_status(object()?, status)
                .ok_or_else(not_enabled)??;
            vec![("aggregatedStatus", aggregated)]
        }
        LuaOperation::InterpretHealth => {
            let healthy = layer
                .interpret_health(object()?)
                .ok_or_else(not_enabled)??;
            vec![("healthy", json!(healthy))]
        }
        LuaOperation::GetDependencies => {
            let deps = layer
                .get_dependencies(object()?)
                .ok_or_else(not_enabled)??;
            vec![("dependencies", serde_json::to_value(deps)?)]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CUSTOMIZATION: &str = r#"
apiVersion: config.karmada.io/v1alpha1
kind: ResourceInterpreterCustomization
metadata:
  name: workload
spec:
  target:
    apiVersion: example.io/v1
    kind: Workload
  customizations:
    replicaResource:
      luaScript: |
        function GetReplicas(obj)
          return obj.spec.replicas, {nodeClaim = {nodeSelector = {disk = "ssd"}}}
        end
    replicaRevision:
      luaScript: |
        function ReviseReplica(obj, desiredReplica)
          obj.spec.replicas = desiredReplica
          return obj
        end
    healthInterpretation:
      luaScript: |
        function InterpretHealth(obj)
          return obj.status.readyReplicas == obj.spec.replicas
        end
    statusAggregation:
      luaScript: |
        function AggregateStatus(desiredObj, statusItems)
          local ready = 0
          for i = 1, #statusItems do
            ready = ready + statusItems[i].status.readyReplicas
          end
          desiredObj.status = {readyReplicas = ready}
          return desiredObj
        end
    dependencyInterpretation:
      luaScript: |
        function GetDependencies(obj)
          return {{apiVersion = "v1", kind = "ConfigMap", namespace = obj.metadata.namespace, name = obj.spec.config}}
        end
"#;

    fn workload() -> Value {
        json!({"apiVersion": "example.io/v1", "kind": "Workload",
               "metadata": {"name": "w", "namespace": "default"},
               "spec": {"replicas": 3, "config": "cfg"}, "status": {"readyReplicas": 3}})
    }

    fn layer() -> Customizations {
        let docs = parse_documents("test", CUSTOMIZATION).unwrap();
        Customizations::fixed(
            docs.iter().map(|d| customization(d).unwrap()).collect(),
            Limits::default(),
        )
    }

    fn run(op: &str, desired: Option<&Value>, observed: Option<&Value>) -> String {
        let items = vec![
            serde_json::from_value(
                json!({"clusterName": "a", "status": {"readyReplicas": 1}, "applied": true}),
            )
            .unwrap(),
            serde_json::from_value(
                json!({"clusterName": "b", "status": {"readyReplicas": 2}, "applied": true}),
            )
            .unwrap(),
        ];
        let results = run_rule(&layer(), rule(op).unwrap(), desired, observed, &items, 5)
            .map_err(|e| e.to_string());
        match results {
            Ok(r) => r
                .into_iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect::<Vec<_>>()
                .join(";"),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn rules_give_karmadas_named_results() {
        let w = workload();
        assert_eq!(
            run("InterpretReplica", None, Some(&w)),
            r#"replica=3;requires={"nodeClaim":{"nodeSelector":{"disk":"ssd"}}}"#
        );
        assert!(run("reviseReplica", None, Some(&w)).contains(r#""replicas":5"#));
        assert_eq!(run("interprethealth", Some(&w), None), "healthy=true");
        let aggregated = run("aggregateStatus", Some(&w), None);
        assert!(aggregated.starts_with("aggregatedStatus="), "{aggregated}");
        assert!(
            aggregated.contains(r#""status":{"readyReplicas":3}"#),
            "{aggregated}"
        );
        assert_eq!(
            run("interpretDependency", Some(&w), None),
            r#"dependencies=[{"apiVersion":"v1","kind":"ConfigMap","name":"cfg","namespace":"default"}]"#
        );
    }

    #[test]
    fn argument_and_rule_errors_are_karmadas() {
        let w = workload();
        assert_eq!(
            run("interpretHealth", None, None),
            "error: desired-file, observed-file options are not set"
        );
        assert_eq!(
            run("interpretHealth", Some(&w), Some(&w)),
            "error: you can not specify both desired-file and observed-file options"
        );
        assert_eq!(
            run("retain", None, Some(&w)),
            "error: desired, desired-file options are not set"
        );
        assert_eq!(
            run("retain", Some(&w), Some(&w)),
            "error: rule is not enabled"
        );
        let other = json!({"apiVersion": "example.io/v2", "kind": "Workload"});
        assert_eq!(
            run("interpretHealth", Some(&other), None),
            "error: rule is not enabled"
        );
        let err = rule("prune").unwrap_err().to_string();
        assert_eq!(
            err,
            "operation prune is not supported. Use one of: Retain, InterpretReplica, \
             InterpretComponent, ReviseReplica, InterpretStatus, AggregateStatus, \
             InterpretHealth, InterpretDependency"
        );
    }

    #[test]
    fn check_lists_every_rule() {
        let mut docs = parse_documents("f.yaml", CUSTOMIZATION).unwrap();
        let out = check(&docs).unwrap();
        assert_eq!(
            out,
            "-----------------------------------\n\
             SOURCE: workload\n\
             TARGET: example.io/v1 Workload   \n\
             RULERS:\n\
             \x20   Retain:                      UNSET\n\
             \x20   InterpretReplica:            PASS\n\
             \x20   InterpretComponent:          UNSET\n\
             \x20   ReviseReplica:               PASS\n\
             \x20   InterpretStatus:             UNSET\n\
             \x20   AggregateStatus:             PASS\n\
             \x20   InterpretHealth:             PASS\n\
             \x20   InterpretDependency:         PASS\n"
        );
        docs.extend(
            parse_documents(
                "bad.yaml",
                "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\n\
                 apiVersion: config.karmada.io/v1alpha1\nkind: ResourceInterpreterCustomization\n\
                 metadata: {name: broken}\nspec:\n  target: {apiVersion: v1, kind: Pod}\n  \
                 customizations:\n    healthInterpretation:\n      luaScript: 'function InterpretHealth(o) retur true end'\n",
            )
            .unwrap(),
        );
        let err = check(&docs).unwrap_err();
        let failed = err.downcast_ref::<CommandFailed>().unwrap();
        assert!(
            failed
                .stdout
                .contains("SOURCE: p\nnot a ResourceInterpreterCustomization, got /v1, Kind=Pod\n"),
            "{}",
            failed.stdout
        );
        assert!(
            failed
                .stdout
                .contains("    InterpretHealth:             ERROR: "),
            "{}",
            failed.stdout
        );
    }
}
