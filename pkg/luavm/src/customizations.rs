//! The ResourceInterpreterCustomizations in effect, compiled and merged per target kind as
//! Karmada merges them, served as an [`InterpreterLayer`] in front of the native rules.
//!
//! Customizations are read from a [`Source`] (the controllers' shared cache) on each call; when
//! the set of (name, resourceVersion) changed, the scripts are recompiled — only those of changed
//! customizations: compiled scripts are cached per (name, resourceVersion, operation). Until the
//! source has synced, no customization applies (Karmada's interpreter also falls back to the other
//! rules then).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use karmada_apis::config::v1alpha1::{
    DependentObjectReference, LuaScript, ResourceInterpreterCustomization,
};
use karmada_apis::work::v1alpha2::{AggregatedStatusItem, Component};
use karmada_interpreter::{Cause, InterpreterLayer, ObjectRef, Operation, Replicas, Result};
use serde_json::Value;

use crate::error::ScriptError;
use crate::sandbox::Limits;
use crate::script::{LuaOperation, Script};

/// How a script's name starts; the customization's name follows (see [`customization_of`]).
const SCRIPT_PREFIX: &str = "ResourceInterpreterCustomization ";

/// The name of the ResourceInterpreterCustomization whose script failed with `error`.
pub fn customization_of(error: &ScriptError) -> Option<&str> {
    error
        .script()
        .strip_prefix(SCRIPT_PREFIX)?
        .split_whitespace()
        .next()
}

/// The operation field (`retention`, `replicaResource`, ...) of the customization script that
/// failed with `error`.
pub fn operation_of(error: &ScriptError) -> Option<&str> {
    error
        .script()
        .strip_prefix(SCRIPT_PREFIX)?
        .split_whitespace()
        .nth(1)
}

/// Loads every script of `customization` on a fresh state (binary chunk, syntax, top level, the
/// function), as a call would before running its function: the errors of those that do not load,
/// in [`LuaOperation::ALL`] order, each naming the customization and field as a call's error
/// does. What Karmada's webhook refuses at admission (it compiles each script). Blocks while the
/// scripts load (on the Lua threads, within the time limit): call it off the async runtime.
pub fn check_customization(
    customization: &ResourceInterpreterCustomization,
    limits: &Limits,
) -> Vec<ScriptError> {
    let name = customization.metadata.name.clone().unwrap_or_default();
    LuaOperation::ALL
        .into_iter()
        .filter_map(|op| {
            let script = script_of(&customization.spec.customizations, op)?;
            Script::compile(
                format!("{SCRIPT_PREFIX}{name} {}", op.field()),
                op,
                script.lua_script.clone(),
                limits.clone(),
            )
            .err()
        })
        .collect()
}

/// An operation that `customization` and another customization of the same target kind both
/// define: what Karmada's webhook refuses at admission (the later one). Here both are accepted
/// and, per operation, the script of the customization first by name runs ([`Customizations`]);
/// the others' are ignored. Dependency scripts never conflict: every one runs and their answers
/// are merged, as in Karmada.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The operation both define.
    pub operation: LuaOperation,
    /// The other customization's name.
    pub other: String,
    /// The name of the customization whose script runs (first by name of all that define it).
    pub used: String,
}

/// The operations `customization` defines that another of `all` (of the same target apiVersion
/// and kind, with a script for the same operation) also defines, one [`Conflict`] per other
/// customization and operation, by operation then name. `all` may hold `customization` itself.
pub fn conflicts(
    customization: &ResourceInterpreterCustomization,
    all: &[Arc<ResourceInterpreterCustomization>],
) -> Vec<Conflict> {
    let name = customization.metadata.name.as_deref().unwrap_or_default();
    let target = &customization.spec.target;
    let mut others: Vec<&ResourceInterpreterCustomization> = all
        .iter()
        .map(AsRef::as_ref)
        .filter(|c| {
            c.metadata.name.as_deref().unwrap_or_default() != name
                && c.spec.target.api_version == target.api_version
                && c.spec.target.kind == target.kind
        })
        .collect();
    others.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut found = Vec::new();
    for op in LuaOperation::ALL {
        if op == LuaOperation::GetDependencies
            || script_of(&customization.spec.customizations, op).is_none()
        {
            continue;
        }
        let defining: Vec<&str> = others
            .iter()
            .filter(|c| script_of(&c.spec.customizations, op).is_some())
            .map(|c| c.metadata.name.as_deref().unwrap_or_default())
            .collect();
        let used = defining
            .iter()
            .copied()
            .chain(std::iter::once(name))
            .min()
            .unwrap_or(name);
        found.extend(defining.iter().map(|other| Conflict {
            operation: op,
            other: (*other).to_owned(),
            used: used.to_owned(),
        }));
    }
    found
}

/// Where the customizations come from: the full current list, or `None` while not yet known.
pub type Source = Box<dyn Fn() -> Option<Vec<Arc<ResourceInterpreterCustomization>>> + Send + Sync>;

/// A script ready to run, or the error that compiling it gave (returned by every call, so the
/// objects of the kind report it).
type Compiled = std::result::Result<Arc<Script>, ScriptError>;

/// The scripts for one target apiVersion and kind.
#[derive(Default)]
struct Target {
    single: BTreeMap<LuaOperation, Compiled>,
    dependencies: Vec<Compiled>,
}

#[derive(Default)]
struct Loaded {
    synced: bool,
    signature: Vec<(String, String)>,
    targets: HashMap<(String, String), Arc<Target>>,
    cache: HashMap<(String, String, LuaOperation), Compiled>,
}

/// The customizations layer. Cheap to share; safe to call from many tasks at once.
pub struct Customizations {
    source: Source,
    limits: Limits,
    loaded: RwLock<Loaded>,
}

impl fmt::Debug for Customizations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let loaded = self.loaded.read().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Customizations")
            .field("synced", &loaded.synced)
            .field("customizations", &loaded.signature)
            .finish_non_exhaustive()
    }
}

fn script_of(
    rules: &karmada_apis::config::v1alpha1::CustomizationRules,
    op: LuaOperation,
) -> Option<&LuaScript> {
    match op {
        LuaOperation::Retain => rules.retention.as_ref(),
        LuaOperation::GetReplicas => rules.replica_resource.as_ref(),
        LuaOperation::GetComponents => rules.component_resource.as_ref(),
        LuaOperation::ReviseReplica => rules.replica_revision.as_ref(),
        LuaOperation::ReflectStatus => rules.status_reflection.as_ref(),
        LuaOperation::AggregateStatus => rules.status_aggregation.as_ref(),
        LuaOperation::InterpretHealth => rules.health_interpretation.as_ref(),
        LuaOperation::GetDependencies => rules.dependency_interpretation.as_ref(),
    }
    .filter(|s| !s.lua_script.is_empty())
}

impl Customizations {
    /// A layer reading its customizations from `source`, running scripts within `limits`.
    pub fn new(source: Source, limits: Limits) -> Self {
        Self {
            source,
            limits,
            loaded: RwLock::new(Loaded::default()),
        }
    }

    /// A layer over a fixed list (tests, tools).
    pub fn fixed(list: Vec<ResourceInterpreterCustomization>, limits: Limits) -> Self {
        let list: Vec<_> = list.into_iter().map(Arc::new).collect();
        Self::new(Box::new(move || Some(list.clone())), limits)
    }

    /// Errors of the scripts that do not load (binary chunk, syntax, top level, missing
    /// function), by customization name (for events and status). Loads every script.
    pub fn compile_errors(&self) -> Vec<(String, ScriptError)> {
        self.refresh();
        let scripts: Vec<(String, Compiled)> = {
            let loaded = self.loaded.read().unwrap_or_else(PoisonError::into_inner);
            loaded
                .cache
                .iter()
                .map(|((name, _, _), c)| (name.clone(), c.clone()))
                .collect()
        };
        let mut errors: Vec<_> = scripts
            .into_iter()
            .filter_map(|(name, c)| {
                c.and_then(|s| s.check().map(|()| s))
                    .err()
                    .map(|e| (name, e))
            })
            .collect();
        errors.sort_by(|a, b| a.0.cmp(&b.0));
        errors
    }

    /// Reloads when the source's list changed.
    fn refresh(&self) {
        let Some(mut list) = (self.source)() else {
            return;
        };
        list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let signature: Vec<(String, String)> = list
            .iter()
            .map(|c| {
                (
                    c.metadata.name.clone().unwrap_or_default(),
                    c.metadata.resource_version.clone().unwrap_or_default(),
                )
            })
            .collect();
        {
            let loaded = self.loaded.read().unwrap_or_else(PoisonError::into_inner);
            if loaded.synced && loaded.signature == signature {
                return;
            }
        }
        let mut loaded = self.loaded.write().unwrap_or_else(PoisonError::into_inner);
        if loaded.synced && loaded.signature == signature {
            return;
        }
        let mut cache = HashMap::new();
        let mut targets: HashMap<(String, String), Target> = HashMap::new();
        for (c, (name, rv)) in list.iter().zip(&signature) {
            let key = (
                c.spec.target.api_version.clone(),
                c.spec.target.kind.clone(),
            );
            let target = targets.entry(key).or_default();
            for op in LuaOperation::ALL {
                let Some(script) = script_of(&c.spec.customizations, op) else {
                    continue;
                };
                let id = (name.clone(), rv.clone(), op);
                let compiled = loaded.cache.remove(&id).unwrap_or_else(|| {
                    // Loaded on first use, on the Lua threads: a hostile top level never runs
                    // here, under the lock every caller takes.
                    Script::lazy(
                        format!("{SCRIPT_PREFIX}{name} {}", op.field()),
                        op,
                        script.lua_script.clone(),
                        self.limits.clone(),
                    )
                    .map(Arc::new)
                });
                cache.insert(id, compiled.clone());
                if op == LuaOperation::GetDependencies {
                    target.dependencies.push(compiled);
                } else {
                    target.single.entry(op).or_insert(compiled);
                }
            }
        }
        *loaded = Loaded {
            synced: true,
            signature,
            targets: targets.into_iter().map(|(k, v)| (k, Arc::new(v))).collect(),
            cache,
        };
    }

    fn target(&self, api_version: &str, kind: &str) -> Option<Arc<Target>> {
        self.refresh();
        let loaded = self.loaded.read().unwrap_or_else(PoisonError::into_inner);
        loaded
            .targets
            .get(&(api_version.to_owned(), kind.to_owned()))
            .cloned()
    }

    fn script_for(&self, object: &Value, op: LuaOperation) -> Option<Compiled> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        self.target(api_version, kind)?.single.get(&op).cloned()
    }

    fn run<T>(
        &self,
        object: &Value,
        op: LuaOperation,
        f: impl FnOnce(&Script) -> std::result::Result<T, ScriptError>,
    ) -> Option<Result<T>> {
        let compiled = self.script_for(object, op)?;
        Some(
            compiled
                .and_then(|script| f(&script))
                .map_err(|e| layer_error(object, e)),
        )
    }
}

fn layer_error(object: &Value, error: ScriptError) -> karmada_interpreter::InterpretError {
    Cause::Layer(Box::new(error)).at(&ObjectRef::of(object))
}

fn lua_operation(operation: Operation) -> Option<LuaOperation> {
    match operation {
        Operation::InterpretReplica => Some(LuaOperation::GetReplicas),
        Operation::ReviseReplica => Some(LuaOperation::ReviseReplica),
        Operation::Retain => Some(LuaOperation::Retain),
        Operation::ReflectStatus => Some(LuaOperation::ReflectStatus),
        Operation::InterpretHealth => Some(LuaOperation::InterpretHealth),
        Operation::AggregateStatus => Some(LuaOperation::AggregateStatus),
        Operation::Prune => None,
    }
}

impl InterpreterLayer for Customizations {
    fn hook_enabled(&self, api_version: &str, kind: &str, operation: Operation) -> bool {
        let (Some(op), Some(target)) = (lua_operation(operation), self.target(api_version, kind))
        else {
            return false;
        };
        target.single.contains_key(&op)
    }

    fn get_replicas(&self, object: &Value) -> Option<Result<Replicas>> {
        self.run(object, LuaOperation::GetReplicas, |s| {
            s.get_replicas(object)
                .map(|(replicas, requirements)| Replicas {
                    replicas,
                    requirements,
                })
        })
    }

    fn revise_replica(&self, object: &Value, replicas: i64) -> Option<Result<Value>> {
        self.run(object, LuaOperation::ReviseReplica, |s| {
            s.revise_replica(object, replicas)
        })
    }

    fn retain(&self, desired: &Value, observed: &Value) -> Option<Result<Value>> {
        self.run(desired, LuaOperation::Retain, |s| {
            s.retain(desired, observed)
        })
    }

    fn reflect_status(&self, object: &Value) -> Option<Result<Value>> {
        self.run(object, LuaOperation::ReflectStatus, |s| {
            s.reflect_status(object)
        })
    }

    fn interpret_health(&self, object: &Value) -> Option<Result<bool>> {
        self.run(object, LuaOperation::InterpretHealth, |s| {
            s.interpret_health(object)
        })
    }

    fn aggregate_status(
        &self,
        template: &Value,
        items: &[AggregatedStatusItem],
    ) -> Option<Result<Value>> {
        self.run(template, LuaOperation::AggregateStatus, |s| {
            s.aggregate_status(template, items)
        })
    }

    fn get_components(&self, object: &Value) -> Option<Result<Vec<Component>>> {
        self.run(object, LuaOperation::GetComponents, |s| {
            s.get_components(object)
        })
    }

    /// Every customization's dependency script runs; the results are merged without duplicates
    /// and sorted by apiVersion, kind, namespace and name (Karmada's order).
    fn get_dependencies(&self, object: &Value) -> Option<Result<Vec<DependentObjectReference>>> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        let target = self.target(api_version, kind)?;
        if target.dependencies.is_empty() {
            return None;
        }
        let mut all: Vec<DependentObjectReference> = Vec::new();
        for compiled in &target.dependencies {
            let found = match compiled {
                Ok(script) => script.get_dependencies(object),
                Err(e) => Err(e.clone()),
            };
            match found {
                Ok(found) => {
                    for d in found {
                        if let Err(message) = verify_dependency(&d) {
                            return Some(Err(
                                Cause::Layer(message.into()).at(&ObjectRef::of(object))
                            ));
                        }
                        if !all.contains(&d) {
                            all.push(d);
                        }
                    }
                }
                Err(e) => return Some(Err(layer_error(object, e))),
            }
        }
        all.sort_by(|a, b| {
            (&a.api_version, &a.kind, &a.namespace, &a.name).cmp(&(
                &b.api_version,
                &b.kind,
                &b.namespace,
                &b.name,
            ))
        });
        Some(Ok(all))
    }
}

/// Karmada's `VerifyDependencies`: apiVersion and kind are required, and a name or a label
/// selector.
fn verify_dependency(d: &DependentObjectReference) -> std::result::Result<(), String> {
    if d.api_version.is_empty() || d.kind.is_empty() {
        return Err(format!(
            "dependency {d:?}: apiVersion and kind must not be empty"
        ));
    }
    if d.name.is_empty() && d.label_selector.is_none() {
        return Err(format!(
            "dependency {}/{}: dependency can not leave name and labelSelector all empty",
            d.api_version, d.kind
        ));
    }
    Ok(())
}
