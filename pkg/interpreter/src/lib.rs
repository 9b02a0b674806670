//! Per-kind resource knowledge (Karmada's "resource interpreter"): replicas and replica requirements,
//! revising replicas, pruning server-set fields, retaining member-owned fields, status reflection,
//! health and status aggregation.
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
//! - binding-status controller: [`Interpreter::aggregate_status`].

mod aggregate;
pub mod division;
mod error;
mod health;
mod interpreter;
pub mod native;
mod object;
mod prune;
mod quantity;
mod reflect;
mod replicas;
mod resources;
mod retain;
mod rules;

pub use division::{
    apply_job_completions, job_completions_per_cluster, should_divide_job_completions,
};
pub use error::{Cause, InterpretError, ObjectRef, Result};
pub use interpreter::Interpreter;
pub use object::go_semantic_eq;
pub use prune::prune_common;
pub use retain::{record_managed_annotations, record_managed_labels, retain_cluster_fields};
pub use rules::{
    AggregateStatusFn, Clock, GroupKind, HealthFn, InterpreterOptions, KindRules, Operation,
    PruneFn, ReflectStatusFn, Replicas, ReplicasFn, RetainFn, ReviseReplicaFn, RuleContext,
};
