//! The per-kind rule table: one [`KindRules`] per [`GroupKind`], each a set of optional
//! operations. Native Kubernetes kinds come pre-registered ([`crate::native`]); custom rules
//! (for CRDs, or to replace a native rule) are added with [`crate::Interpreter::register`].

use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karmada_apis::work::v1alpha2::{AggregatedStatusItem, ReplicaRequirements};
use serde_json::Value;

use crate::error::{Cause, InterpretError, ObjectRef, Result};

/// An API group and kind, e.g. `apps` / `Deployment` (the core group is empty).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKind {
    /// API group; empty for the core group.
    pub group: String,
    /// Kind.
    pub kind: String,
}

impl GroupKind {
    /// A group and kind.
    pub fn new(group: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            kind: kind.into(),
        }
    }

    /// The group and kind of an `apiVersion` (`apps/v1`, `v1`) and kind.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        let group = api_version
            .rsplit_once('/')
            .map_or("", |(group, _version)| group);
        Self::new(group, kind)
    }

    /// The group and kind of an unstructured object.
    pub fn of(object: &Value) -> Result<Self> {
        let id = ObjectRef::of(object);
        if !object.is_object() {
            return Err(Cause::NotAnObject.at(&id));
        }
        match (object.get("apiVersion"), object.get("kind")) {
            (Some(Value::String(api_version)), Some(Value::String(kind))) if !kind.is_empty() => {
                Ok(Self::from_api_version(api_version, kind))
            }
            (Some(Value::String(_)), _) => Err(Cause::Missing {
                path: "kind".into(),
            }
            .at(&id)),
            _ => Err(Cause::Missing {
                path: "apiVersion".into(),
            }
            .at(&id)),
        }
    }
}

impl fmt::Display for GroupKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}", self.kind)
        } else {
            write!(f, "{}.{}", self.kind, self.group)
        }
    }
}

/// The operations of the interpreter (Karmada's `InterpreterOperation`s that karmada-rs implements).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Replicas and per-replica requirements of a workload template.
    InterpretReplica,
    /// Set a workload's replica count to a cluster's share.
    ReviseReplica,
    /// Remove server-set fields before a template goes into a Work.
    Prune,
    /// Keep member-owned fields when updating a member object.
    Retain,
    /// Pick the status to report from a member object.
    ReflectStatus,
    /// Judge a member object's health.
    InterpretHealth,
    /// Fold member statuses into the template's status.
    AggregateStatus,
}

/// Settings of the interpreter that change its results.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterpreterOptions {
    /// Karmada's `ResourceQuotaEstimate` feature gate (default off): replica requirements also
    /// carry the workload's namespace and `priorityClassName`.
    pub resource_quota_estimate: bool,
}

/// Where rules get the current time (for conditions they create).
pub type Clock = Arc<dyn Fn() -> Time + Send + Sync>;

/// What a rule is given besides the object: who the object is, the options and the clock.
pub struct RuleContext<'a> {
    /// The object the rule runs on (for error messages).
    pub object: &'a ObjectRef,
    /// The interpreter's options.
    pub options: &'a InterpreterOptions,
    pub(crate) clock: &'a Clock,
}

impl RuleContext<'_> {
    /// The current time.
    pub fn now(&self) -> Time {
        (self.clock)()
    }

    /// An error about this rule's object.
    pub fn error(&self, cause: Cause) -> InterpretError {
        cause.at(self.object)
    }
}

/// A workload's replica count and what each replica needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replicas {
    /// Desired replicas (for a Job: the pods that run in parallel).
    pub replicas: i32,
    /// Per-replica requirements; `None` when the pods request nothing and have no node constraints.
    pub requirements: Option<ReplicaRequirements>,
}

/// Reads replicas and requirements from a template.
pub type ReplicasFn = Arc<dyn Fn(&Value, &RuleContext<'_>) -> Result<Replicas> + Send + Sync>;
/// Sets the replica count of a manifest.
pub type ReviseReplicaFn =
    Arc<dyn Fn(&mut Value, i64, &RuleContext<'_>) -> Result<()> + Send + Sync>;
/// Removes fields of a kind that must not be propagated (after the common metadata pruning).
pub type PruneFn = Arc<dyn Fn(&mut Value, &RuleContext<'_>) -> Result<()> + Send + Sync>;
/// Copies member-owned fields from the observed member object into the desired one.
pub type RetainFn = Arc<dyn Fn(&mut Value, &Value, &RuleContext<'_>) -> Result<()> + Send + Sync>;
/// Builds the status to report for a member object (`None`: nothing to report yet).
pub type ReflectStatusFn =
    Arc<dyn Fn(&Value, &RuleContext<'_>) -> Result<Option<Value>> + Send + Sync>;
/// Judges whether a member object is healthy.
pub type HealthFn = Arc<dyn Fn(&Value, &RuleContext<'_>) -> Result<bool> + Send + Sync>;
/// Folds member statuses into a template's status; `None` when the status would not change.
pub type AggregateStatusFn = Arc<
    dyn Fn(&Value, &[AggregatedStatusItem], &RuleContext<'_>) -> Result<Option<Value>>
        + Send
        + Sync,
>;

/// The rules for one kind: each operation is optional. An absent operation falls back to the
/// interpreter's default for it (see [`crate::Interpreter`]).
#[derive(Clone, Default)]
pub struct KindRules {
    /// [`Operation::InterpretReplica`].
    pub replicas: Option<ReplicasFn>,
    /// [`Operation::ReviseReplica`].
    pub revise_replica: Option<ReviseReplicaFn>,
    /// [`Operation::Prune`] (kind-specific part).
    pub prune: Option<PruneFn>,
    /// [`Operation::Retain`] (kind-specific part).
    pub retain: Option<RetainFn>,
    /// [`Operation::ReflectStatus`].
    pub reflect_status: Option<ReflectStatusFn>,
    /// [`Operation::InterpretHealth`].
    pub health: Option<HealthFn>,
    /// [`Operation::AggregateStatus`].
    pub aggregate_status: Option<AggregateStatusFn>,
}

impl KindRules {
    /// Sets the replicas rule.
    pub fn with_replicas(
        mut self,
        f: impl Fn(&Value, &RuleContext<'_>) -> Result<Replicas> + Send + Sync + 'static,
    ) -> Self {
        self.replicas = Some(Arc::new(f));
        self
    }

    /// Sets the revise-replica rule.
    pub fn with_revise_replica(
        mut self,
        f: impl Fn(&mut Value, i64, &RuleContext<'_>) -> Result<()> + Send + Sync + 'static,
    ) -> Self {
        self.revise_replica = Some(Arc::new(f));
        self
    }

    /// Sets the prune rule.
    pub fn with_prune(
        mut self,
        f: impl Fn(&mut Value, &RuleContext<'_>) -> Result<()> + Send + Sync + 'static,
    ) -> Self {
        self.prune = Some(Arc::new(f));
        self
    }

    /// Sets the retain rule.
    pub fn with_retain(
        mut self,
        f: impl Fn(&mut Value, &Value, &RuleContext<'_>) -> Result<()> + Send + Sync + 'static,
    ) -> Self {
        self.retain = Some(Arc::new(f));
        self
    }

    /// Sets the reflect-status rule.
    pub fn with_reflect_status(
        mut self,
        f: impl Fn(&Value, &RuleContext<'_>) -> Result<Option<Value>> + Send + Sync + 'static,
    ) -> Self {
        self.reflect_status = Some(Arc::new(f));
        self
    }

    /// Sets the health rule.
    pub fn with_health(
        mut self,
        f: impl Fn(&Value, &RuleContext<'_>) -> Result<bool> + Send + Sync + 'static,
    ) -> Self {
        self.health = Some(Arc::new(f));
        self
    }

    /// Sets the aggregate-status rule.
    pub fn with_aggregate_status(
        mut self,
        f: impl Fn(&Value, &[AggregatedStatusItem], &RuleContext<'_>) -> Result<Option<Value>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.aggregate_status = Some(Arc::new(f));
        self
    }

    /// Whether this kind has a rule for `operation`.
    pub fn has(&self, operation: Operation) -> bool {
        match operation {
            Operation::InterpretReplica => self.replicas.is_some(),
            Operation::ReviseReplica => self.revise_replica.is_some(),
            Operation::Prune => self.prune.is_some(),
            Operation::Retain => self.retain.is_some(),
            Operation::ReflectStatus => self.reflect_status.is_some(),
            Operation::InterpretHealth => self.health.is_some(),
            Operation::AggregateStatus => self.aggregate_status.is_some(),
        }
    }

    /// These rules with every operation `overlay` defines replaced by the overlay's.
    pub fn overlaid_with(self, overlay: KindRules) -> Self {
        Self {
            replicas: overlay.replicas.or(self.replicas),
            revise_replica: overlay.revise_replica.or(self.revise_replica),
            prune: overlay.prune.or(self.prune),
            retain: overlay.retain.or(self.retain),
            reflect_status: overlay.reflect_status.or(self.reflect_status),
            health: overlay.health.or(self.health),
            aggregate_status: overlay.aggregate_status.or(self.aggregate_status),
        }
    }
}

impl fmt::Debug for KindRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ops = [
            Operation::InterpretReplica,
            Operation::ReviseReplica,
            Operation::Prune,
            Operation::Retain,
            Operation::ReflectStatus,
            Operation::InterpretHealth,
            Operation::AggregateStatus,
        ];
        f.debug_set()
            .entries(ops.into_iter().filter(|op| self.has(*op)))
            .finish()
    }
}
