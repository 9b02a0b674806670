//! Third-party interpretations: what Karmada v1.16 knows out of the box about workloads and
//! objects of popular projects (OpenKruise, Flux, Kubeflow, KubeRay, Volcano, Flink, Spark,
//! Kyverno, Argo Workflows), written here as native Rust from the behaviour of Karmada's bundled
//! customizations (no Lua runs, and none of Karmada's scripts is part of this project). Karmada
//! consults them after the ResourceInterpreterCustomizations and the interpreter webhooks and
//! before its native (built-in) rules; [`ThirdParty`] is the [`InterpreterLayer`] that plays that
//! part here.
//!
//! Each kind is keyed by its exact apiVersion and kind, and answers exactly the operations
//! Karmada's customization for it defines; for the others the next layer (the native rules) is
//! asked. The table (R: InterpretReplica, V: ReviseReplica, T: Retain, A: AggregateStatus,
//! S: InterpretStatus, H: InterpretHealth, D: InterpretDependency, C: InterpretComponent):
//!
//! | apiVersion | kind | operations |
//! |---|---|---|
//! | apps.kruise.io/v1alpha1 | AdvancedCronJob | A D |
//! | apps.kruise.io/v1alpha1 | BroadcastJob | R V T A S H D |
//! | apps.kruise.io/v1alpha1 | CloneSet | R V A S H D |
//! | apps.kruise.io/v1alpha1 | DaemonSet | A S H D |
//! | apps.kruise.io/v1alpha1 | SidecarSet | R T A S H D |
//! | apps.kruise.io/v1alpha1 | UnitedDeployment | R V A S H D |
//! | apps.kruise.io/v1beta1 | StatefulSet | R V A S H D |
//! | argoproj.io/v1alpha1 | Workflow | R V T H D |
//! | batch.volcano.sh/v1alpha1 | Job | A S H C |
//! | flink.apache.org/v1beta1 | FlinkDeployment | R A S H C |
//! | helm.toolkit.fluxcd.io/v2beta1 | HelmRelease | T A S H D |
//! | kubeflow.org/v1 | Notebook | R A S H |
//! | kubeflow.org/v1 | PyTorchJob | A H D C |
//! | kubeflow.org/v1 | TFJob | A H D C |
//! | kubeflow.org/v2beta1 | MPIJob | A S H C |
//! | kustomize.toolkit.fluxcd.io/v1 | Kustomization | T A S H D |
//! | kyverno.io/v1 | ClusterPolicy, Policy | A S H |
//! | ray.io/v1 | RayCluster | A H C |
//! | ray.io/v1 | RayJob | A H D C |
//! | source.toolkit.fluxcd.io/v1 | GitRepository | T A S H D |
//! | source.toolkit.fluxcd.io/v1beta2 | Bucket, HelmChart, HelmRepository, OCIRepository | T A S H D |
//! | sparkoperator.k8s.io/v1beta2 | SparkApplication | A S H C |
//!
//! The answers equal those of Karmada's scripts, including their quirks (each noted where it is
//! implemented and in docs/compatibility.md), so a workload behaves as under Karmada. Every
//! answer is shaped as a script's answer is once it is JSON again (see `value::shape`): absent
//! and `null` fields are left out, empty lists and objects survive only where the inputs had
//! them. Where a script's order comes from Lua's table iteration (not stable), the native order is
//! sorted: dependencies by kind in the script's order and then by name, MPIJob's components,
//! UnitedDeployment's, MPIJob's and Volcano Job's aggregated conditions by type or status.
//! Conditions an aggregation creates carry the time of the aggregation, as the scripts' do.
//!
//! `karmada-luavm`'s `tests/thirdparty.rs` proves the equality on every case of Karmada's
//! `customizations_tests.yaml` files (read from the pinned Karmada module at test time).

mod argo;
mod flink;
mod flux;
mod kruise;
mod kubeflow;
mod kyverno;
mod ray;
mod spark;
pub(crate) mod value;
mod volcano;

use std::collections::HashMap;
use std::fmt;

use karmada_apis::config::v1alpha1::DependentObjectReference;
use karmada_apis::work::v1alpha2::{AggregatedStatusItem, Component};
use serde_json::Value;

use crate::error::{ObjectRef, Result};
use crate::layers::InterpreterLayer;
use crate::rules::{InterpreterOptions, Operation, Replicas};

/// What a rule gets besides its inputs: the object it is about (for errors) and the options.
pub(crate) struct Ctx<'a> {
    pub(crate) id: ObjectRef,
    pub(crate) options: &'a InterpreterOptions,
}

type ReplicasRule = fn(&Value, &Ctx<'_>) -> Result<Replicas>;
type ReviseRule = fn(&Value, i64, &Ctx<'_>) -> Result<Value>;
type RetainRule = fn(&Value, &Value, &Ctx<'_>) -> Result<Value>;
type AggregateRule = fn(&Value, &[Value], &Ctx<'_>) -> Result<Value>;
type ReflectRule = fn(&Value, &Ctx<'_>) -> Result<Value>;
type HealthRule = fn(&Value, &Ctx<'_>) -> Result<bool>;
type DependenciesRule = fn(&Value, &Ctx<'_>) -> Result<Vec<DependentObjectReference>>;
type ComponentsRule = fn(&Value, &Ctx<'_>) -> Result<Vec<Component>>;

/// The interpretation of one third-party kind: the operations it defines.
#[derive(Clone, Copy, Default)]
pub struct KindInterpretation {
    pub(crate) replicas: Option<ReplicasRule>,
    pub(crate) revise: Option<ReviseRule>,
    pub(crate) retain: Option<RetainRule>,
    pub(crate) aggregate: Option<AggregateRule>,
    pub(crate) reflect: Option<ReflectRule>,
    pub(crate) health: Option<HealthRule>,
    pub(crate) dependencies: Option<DependenciesRule>,
    pub(crate) components: Option<ComponentsRule>,
}

impl KindInterpretation {
    /// Whether the kind defines `operation` (Karmada's `HookEnabled`).
    pub fn has(&self, operation: Operation) -> bool {
        match operation {
            Operation::InterpretReplica => self.replicas.is_some(),
            Operation::ReviseReplica => self.revise.is_some(),
            Operation::Retain => self.retain.is_some(),
            Operation::ReflectStatus => self.reflect.is_some(),
            Operation::InterpretHealth => self.health.is_some(),
            Operation::AggregateStatus => self.aggregate.is_some(),
            Operation::Prune => false,
        }
    }

    /// Whether the kind names dependencies (InterpretDependency).
    pub fn has_dependencies(&self) -> bool {
        self.dependencies.is_some()
    }

    /// Whether the kind has components (InterpretComponent).
    pub fn has_components(&self) -> bool {
        self.components.is_some()
    }
}

/// Every third-party kind: (apiVersion, kind) → its interpretation.
pub fn kinds() -> HashMap<(&'static str, &'static str), KindInterpretation> {
    let mut table = HashMap::new();
    kruise::register(&mut table);
    flux::register(&mut table);
    kyverno::register(&mut table);
    argo::register(&mut table);
    kubeflow::register(&mut table);
    ray::register(&mut table);
    flink::register(&mut table);
    spark::register(&mut table);
    volcano::register(&mut table);
    table
}

/// The third-party layer: put it behind customizations and webhooks, in front of the native rules
/// ([`crate::Interpreter::with_layer`]).
#[derive(Clone)]
pub struct ThirdParty {
    /// kind → (apiVersion, interpretation).
    kinds: HashMap<&'static str, Vec<(&'static str, KindInterpretation)>>,
    options: InterpreterOptions,
}

impl fmt::Debug for ThirdParty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThirdParty")
            .field("kinds", &self.kinds.values().map(Vec::len).sum::<usize>())
            .finish_non_exhaustive()
    }
}

impl ThirdParty {
    /// The layer with every kind, replica requirements computed with `options`.
    pub fn new(options: InterpreterOptions) -> Self {
        let mut by_kind: HashMap<&'static str, Vec<_>> = HashMap::new();
        for ((api_version, kind), interpretation) in kinds() {
            by_kind
                .entry(kind)
                .or_default()
                .push((api_version, interpretation));
        }
        Self {
            kinds: by_kind,
            options,
        }
    }

    /// The interpretation for an apiVersion and kind, if any.
    pub fn kind(&self, api_version: &str, kind: &str) -> Option<&KindInterpretation> {
        self.kinds
            .get(kind)?
            .iter()
            .find(|(v, _)| *v == api_version)
            .map(|(_, k)| k)
    }

    fn find(&self, object: &Value) -> Option<(&KindInterpretation, Ctx<'_>)> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        let found = self.kind(api_version, kind)?;
        Some((
            found,
            Ctx {
                id: ObjectRef::of(object),
                options: &self.options,
            },
        ))
    }
}

impl InterpreterLayer for ThirdParty {
    fn hook_enabled(&self, api_version: &str, kind: &str, operation: Operation) -> bool {
        self.kind(api_version, kind)
            .is_some_and(|k| k.has(operation))
    }

    fn get_replicas(&self, object: &Value) -> Option<Result<Replicas>> {
        let (k, ctx) = self.find(object)?;
        Some((k.replicas?)(object, &ctx))
    }

    fn revise_replica(&self, object: &Value, replicas: i64) -> Option<Result<Value>> {
        let (k, ctx) = self.find(object)?;
        Some((k.revise?)(object, replicas, &ctx))
    }

    fn retain(&self, desired: &Value, observed: &Value) -> Option<Result<Value>> {
        let (k, ctx) = self.find(desired)?;
        Some((k.retain?)(desired, observed, &ctx))
    }

    fn reflect_status(&self, object: &Value) -> Option<Result<Value>> {
        let (k, ctx) = self.find(object)?;
        Some((k.reflect?)(object, &ctx))
    }

    fn interpret_health(&self, object: &Value) -> Option<Result<bool>> {
        let (k, ctx) = self.find(object)?;
        Some((k.health?)(object, &ctx))
    }

    fn aggregate_status(
        &self,
        template: &Value,
        items: &[AggregatedStatusItem],
    ) -> Option<Result<Value>> {
        let (k, ctx) = self.find(template)?;
        let rule = k.aggregate?;
        Some(value::items_value(items, &ctx.id).and_then(|items| rule(template, &items, &ctx)))
    }

    fn get_components(&self, object: &Value) -> Option<Result<Vec<Component>>> {
        let (k, ctx) = self.find(object)?;
        Some((k.components?)(object, &ctx))
    }

    fn get_dependencies(&self, object: &Value) -> Option<Result<Vec<DependentObjectReference>>> {
        let (k, ctx) = self.find(object)?;
        // Each object once, in the order first named (as Karmada merges dependency answers).
        Some((k.dependencies?)(object, &ctx).map(|found| {
            let mut unique: Vec<DependentObjectReference> = Vec::with_capacity(found.len());
            for d in found {
                if !unique.contains(&d) {
                    unique.push(d);
                }
            }
            unique
        }))
    }
}

/// Dependencies of one kind each, in the order given, names sorted and unique, in `namespace`.
pub(crate) fn named_dependencies(
    namespace: Option<&Value>,
    groups: &[(&str, std::collections::BTreeSet<String>)],
) -> Vec<DependentObjectReference> {
    let namespace = namespace.and_then(Value::as_str).unwrap_or_default();
    groups
        .iter()
        .flat_map(|(kind, names)| {
            names
                .iter()
                .map(move |name| DependentObjectReference::named("v1", kind, namespace, name))
        })
        .collect()
}

/// The dependencies of a pod template in `namespace` (the scripts' `kube.getPodDependencies`):
/// those of the Pod it makes, through the native Pod rules; a template they cannot read has none.
pub(crate) fn pod_template_dependencies(
    template: Option<&Value>,
    namespace: Option<&Value>,
) -> Vec<DependentObjectReference> {
    let template = template
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    let mut metadata = template
        .get("metadata")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| Value::Object(Default::default()));
    metadata["namespace"] = namespace.cloned().unwrap_or(Value::Null);
    let pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": template.get("spec").cloned().unwrap_or_else(|| Value::Object(Default::default())),
    });
    match crate::native_dependencies(&pod) {
        Ok(Some(deps)) => deps,
        _ => Vec::new(),
    }
}

/// Replicas and the requirements of `template`'s pods (the scripts' `kube.accuratePodRequirements`).
pub(crate) fn replicas_with_template(
    replicas: f64,
    template: Option<&Value>,
    ctx: &Ctx<'_>,
) -> Result<Replicas> {
    let requirements = match template {
        Some(t) if t.is_object() => crate::pod_template_requirements(t, ctx.options)?,
        Some(_) | None => {
            return Err(value::wrong(&["spec", "template"], "an object", &ctx.id));
        }
    };
    Ok(Replicas {
        replicas: replica_count(replicas, ctx)?,
        requirements,
    })
}

/// A replica count from a script number: truncated toward zero, within int32.
pub(crate) fn replica_count(n: f64, ctx: &Ctx<'_>) -> Result<i32> {
    let t = n.trunc();
    if !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&t) {
        return Err(value::wrong(
            &["spec", "replicas"],
            "within the int32 range",
            &ctx.id,
        ));
    }
    Ok(t as i32)
}

/// Components from their JSON form (name, replicas, replicaRequirements), shaped as a script's
/// list is: empty requirements left out, quantities given as numbers read as quantities.
pub(crate) fn components(list: Vec<Value>, ctx: &Ctx<'_>) -> Result<Vec<Component>> {
    let mut shaped = value::shape(Value::Array(list), false, &[]);
    if let Some(items) = shaped.as_array_mut() {
        for item in items {
            if let Some(Value::Object(requests)) = item
                .get_mut("replicaRequirements")
                .and_then(|r| r.get_mut("resourceRequest"))
            {
                for q in requests.values_mut() {
                    if let Value::Number(n) = q {
                        *q = Value::String(n.to_string());
                    }
                }
            }
        }
    }
    serde_json::from_value(shaped).map_err(|e| {
        crate::error::Cause::Decode {
            path: "components".into(),
            source: e,
        }
        .at(&ctx.id)
    })
}
