//! Per-kind resource knowledge (Karmada's "resource interpreter"): replicas and replica requirements,
//! revising replicas, pruning server-set fields, retaining member-owned fields, status reflection,
//! health, status aggregation and dependencies.
//!
//! Everything works on unstructured objects (`serde_json::Value`), so any kind flows through; what
//! is known about a kind lives in one table of [`KindRules`] keyed by [`GroupKind`], pre-filled with
//! Karmada's native rules (see [`native`]) and open to custom rules ([`Interpreter::register`]).
//! The crate is pure: no I/O, no clients; time comes from an injectable clock.
//!
//! Who calls what:
//! - detector: [`Interpreter::get_replicas`] for `spec.replicas` / `spec.replicaRequirements`;
//! - binding controller: [`Interpreter::revise_replica`], [`should_divide_job_completions`],
//!   [`job_completions_per_cluster`], [`apply_job_completions`], [`Interpreter::prune`],
//!   [`record_managed_labels`], [`record_managed_annotations`];
//! - execution controller: [`Interpreter::retain`], [`Interpreter::matches_member`];
//! - work-status controller: [`Interpreter::reflect_status`], [`Interpreter::interpret_health`];
//! - binding-status controller: [`Interpreter::aggregate_status`];
//! - dependencies distributor: [`Interpreter::get_dependencies`].
//! - every one of them through [`Interpreter::hook_enabled_for`] and the [`layers`] in front of
//!   the native rules, per operation in Karmada's order: ResourceInterpreterCustomizations (Lua,
//!   `karmada-luavm`), then interpreter webhooks, then the built-in third-party interpretations
//!   ([`thirdparty`], [`ThirdParty`]: OpenKruise, Flux, Kubeflow, KubeRay, ... 26 kinds), then
//!   the native rules; `karmada-controllers-common`'s `interpreter` stacks them.
//!
//! ```
//! use karmada_interpreter::{GroupKind, Interpreter, KindRules, Operation};
//! use serde_json::json;
//!
//! let mut interpreter = Interpreter::default();
//! let deployment = json!({
//!     "apiVersion": "apps/v1", "kind": "Deployment",
//!     "metadata": {"namespace": "default", "name": "nginx"},
//!     "spec": {"replicas": 3, "template": {"spec": {"containers": [
//!         {"name": "nginx", "resources": {"requests": {"cpu": "250m"}}}]}}}
//! });
//! let replicas = interpreter.get_replicas(&deployment)?.expect("Deployments have replicas");
//! assert_eq!(replicas.replicas, 3);
//!
//! // A custom kind: only the operations given are overridden, the rest use the defaults.
//! let widget = GroupKind::new("example.io", "Widget");
//! interpreter.register(widget.clone(), KindRules::default().with_health(|o, _| {
//!     Ok(o["status"]["ready"] == json!(true))
//! }));
//! assert!(interpreter.hook_enabled(&widget, Operation::InterpretHealth));
//! # Ok::<(), karmada_interpreter::InterpretError>(())
//! ```
//!
//! Where karmada-rs deliberately differs from Karmada's Go code (all noted on the rules):
//! - a member Deployment/ReplicaSet/StatefulSet/DaemonSet without the
//!   `resourcetemplate.karmada.io/generation` annotation reflects `resourceTemplateGeneration: 0`
//!   instead of failing;
//! - StatefulSet status reflects `observedGeneration` and aggregation compares members with the
//!   template's generation (Karmada's StatefulSet `observedGeneration` can never advance);
//! - "status unchanged" is decided field by field (or by Go zero-value equality), so a template
//!   whose status also carries conditions is not rewritten on every pass;
//! - [`Interpreter::matches_member`] runs the kind's retain rule on the member side too, so e.g.
//!   Services are not updated on every pass;
//! - malformed entries (a ServiceAccount secret without a name, ...) are skipped or reported as
//!   errors instead of panicking.

mod aggregate;
mod dependencies;
pub mod division;
mod error;
mod health;
mod interpreter;
pub mod layers;
pub mod native;
mod object;
mod prune;
mod reflect;
mod replicas;
mod resources;
mod retain;
mod rules;
pub mod thirdparty;

pub use dependencies::{DependentObjectReference, native_dependencies};
pub use division::{
    apply_job_completions, job_completions_per_cluster, should_divide_job_completions,
};
pub use error::{Cause, InterpretError, ObjectRef, Result};
pub use interpreter::Interpreter;
pub use layers::{InterpreterLayer, Layer};
pub use object::go_semantic_eq;
pub use prune::prune_common;
pub use replicas::pod_template_requirements;
pub use retain::{record_managed_annotations, record_managed_labels, retain_cluster_fields};
pub use rules::{
    AggregateStatusFn, Clock, GroupKind, HealthFn, InterpreterOptions, KindRules, Operation,
    PruneFn, ReflectStatusFn, Replicas, ReplicasFn, RetainFn, ReviseReplicaFn, RuleContext,
};
pub use thirdparty::ThirdParty;
