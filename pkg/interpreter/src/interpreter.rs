//! [`Interpreter`]: the entry point controllers call, dispatching to the per-kind rule table.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karmada_apis::config::v1alpha1::DependentObjectReference;
use karmada_apis::work::v1alpha1::ResourceHealth;
use karmada_apis::work::v1alpha2::{AggregatedStatusItem, Component};
use serde_json::Value;

use crate::error::{Cause, ObjectRef, Result};
use crate::layers::{InterpreterLayer, Layer};
use crate::native;
use crate::retain;
use crate::rules::{
    Clock, GroupKind, InterpreterOptions, KindRules, Operation, Replicas, RuleContext,
};

/// Karmada's resource interpreter for unstructured objects: one table of per-kind rules
/// ([`KindRules`] by [`GroupKind`]), pre-filled with the native Kubernetes kinds, that custom rules
/// can extend or override with [`Interpreter::register`].
///
/// Defaults when a kind has no rule for an operation: no replicas, no revision, only the common
/// pruning, only the common (label/annotation/metadata) retention, the whole `.status` reflected,
/// healthy, status not aggregated.
#[derive(Clone)]
pub struct Interpreter {
    rules: HashMap<GroupKind, KindRules>,
    options: InterpreterOptions,
    clock: Clock,
    /// Rule sources in front of `rules` ([`crate::layers`]), first match wins.
    pub(crate) layers: Vec<Layer>,
}

impl Default for Interpreter {
    fn default() -> Self {
        Self::new(InterpreterOptions::default())
    }
}

impl std::fmt::Debug for Interpreter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interpreter")
            .field("rules", &self.rules)
            .field("options", &self.options)
            .field("layers", &self.layers)
            .finish_non_exhaustive()
    }
}

impl Interpreter {
    /// An interpreter with the native Kubernetes rules.
    pub fn new(options: InterpreterOptions) -> Self {
        Self {
            rules: native::rules(),
            options,
            clock: Arc::new(|| Time(k8s_openapi::jiff::Timestamp::now())),
            layers: Vec::new(),
        }
    }

    /// An interpreter without any per-kind rule (every operation uses its default).
    pub fn without_native_rules(options: InterpreterOptions) -> Self {
        Self {
            rules: HashMap::new(),
            ..Self::new(options)
        }
    }

    /// Replaces the clock (tests use a fixed one).
    pub fn with_clock(mut self, clock: impl Fn() -> Time + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The options in effect.
    pub fn options(&self) -> &InterpreterOptions {
        &self.options
    }

    /// Adds rules for a kind: every operation `rules` defines replaces the one registered before
    /// (native or custom); the others stay.
    pub fn register(&mut self, group_kind: GroupKind, rules: KindRules) {
        let merged = match self.rules.remove(&group_kind) {
            Some(existing) => existing.overlaid_with(rules),
            None => rules,
        };
        self.rules.insert(group_kind, merged);
    }

    /// Removes every rule of a kind, returning them.
    pub fn unregister(&mut self, group_kind: &GroupKind) -> Option<KindRules> {
        self.rules.remove(group_kind)
    }

    /// The rules registered for a kind.
    pub fn rules_for(&self, group_kind: &GroupKind) -> Option<&KindRules> {
        self.rules.get(group_kind)
    }

    /// Whether a kind has its own rule for `operation` (Karmada's `HookEnabled`). Operations have
    /// defaults for kinds without a rule (see [`Interpreter`]); this tells whether the kind
    /// overrides it — e.g. the binding controller revises replicas only when this is true for
    /// [`Operation::ReviseReplica`].
    pub fn hook_enabled(&self, group_kind: &GroupKind, operation: Operation) -> bool {
        self.rules
            .get(group_kind)
            .is_some_and(|rules| rules.has(operation))
    }

    fn context<'a>(&'a self, object: &'a ObjectRef) -> RuleContext<'a> {
        RuleContext {
            object,
            options: &self.options,
            clock: &self.clock,
        }
    }

    fn lookup(&self, object: &Value) -> Result<(ObjectRef, Option<&KindRules>)> {
        let group_kind = GroupKind::of(object)?;
        Ok((ObjectRef::of(object), self.rules.get(&group_kind)))
    }

    /// Replicas and per-replica requirements of a template (Karmada's `GetReplicas`), for the
    /// binding's `spec.replicas` / `spec.replicaRequirements`. `Ok(None)` when the kind has no
    /// replicas rule (the binding then has no replicas).
    pub fn get_replicas(&self, object: &Value) -> Result<Option<Replicas>> {
        if let Some(layered) = self.layered(|l| l.get_replicas(object)) {
            return layered.map(Some);
        }
        let (id, rules) = self.lookup(object)?;
        let Some(rule) = rules.and_then(|r| r.replicas.as_ref()) else {
            return Ok(None);
        };
        let mut replicas = rule(object, &self.context(&id))?;
        if self.options.resource_quota_estimate
            && let Some(requirements) = replicas.requirements.as_mut()
            && requirements.namespace.is_empty()
        {
            requirements.namespace = id.namespace.clone();
        }
        Ok(Some(replicas))
    }

    /// Sets a manifest's replicas to a cluster's share (Karmada's `ReviseReplica`). Returns whether
    /// the kind has a rule; without one the manifest is unchanged.
    pub fn revise_replica(&self, object: &mut Value, replicas: i64) -> Result<bool> {
        if let Some(layered) = self.layered(|l| l.revise_replica(object, replicas)) {
            *object = layered?;
            return Ok(true);
        }
        let (id, rules) = self.lookup(object)?;
        let Some(rule) = rules.and_then(|r| r.revise_replica.clone()) else {
            return Ok(false);
        };
        rule(object, replicas, &self.context(&id))?;
        Ok(true)
    }

    /// Removes what the API server sets and what must not reach member clusters (Karmada's
    /// `prune.RemoveIrrelevantFields` with `RemoveJobTTLSeconds`): the common metadata fields and
    /// `status` for every kind, then the kind's own rule.
    pub fn prune(&self, object: &mut Value) -> Result<()> {
        let (id, rules) = self.lookup(object)?;
        crate::prune::prune_common(object);
        if let Some(rule) = rules.and_then(|r| r.prune.clone()) {
            rule(object, &self.context(&id))?;
        }
        Ok(())
    }

    /// Prepares `desired` (the Work's manifest) for an update of the member object `observed`:
    /// keeps the member's resourceVersion, finalizers, ownerReferences and member-added labels and
    /// annotations ([`retain_cluster_fields`](crate::retain_cluster_fields)), then applies the
    /// kind's retain rule (Service clusterIP, ServiceAccount secrets, retained replicas, ...).
    pub fn retain(&self, desired: &mut Value, observed: &Value) -> Result<()> {
        let (id, rules) = self.lookup(desired)?;
        if !observed.is_object() {
            return Err(Cause::NotAnObject.at(&ObjectRef::of(observed)));
        }
        retain::retain_cluster_fields(desired, observed)?;
        if let Some(layered) = self.layered(|l| l.retain(desired, observed)) {
            *desired = layered?;
            return Ok(());
        }
        if let Some(rule) = rules.and_then(|r| r.retain.clone()) {
            rule(desired, observed, &self.context(&id))?;
        }
        Ok(())
    }

    /// Whether updating the member object `observed` with `desired` (already passed through
    /// [`Interpreter::retain`]) would change nothing: the member object, pruned and then retained
    /// against itself, equals `desired`. The execution controller skips the write when this is
    /// true. (Karmada's `resourceDeepEqual` skips the kind's retain rule on the member side, which
    /// makes e.g. every Service look changed; running it keeps the check idempotent.)
    pub fn matches_member(&self, desired: &Value, observed: &Value) -> Result<bool> {
        let mut member = observed.clone();
        self.prune(&mut member)?;
        self.retain(&mut member, observed)?;
        Ok(&member == desired)
    }

    /// The status to record for a member object in `Work.status.manifestStatuses` (Karmada's
    /// `ReflectStatus`): the kind's selection of status fields, else the whole `.status`.
    /// `Ok(None)` when there is nothing to report yet.
    pub fn reflect_status(&self, object: &Value) -> Result<Option<Value>> {
        if let Some(layered) = self.layered(|l| l.reflect_status(object)) {
            return layered.map(Some);
        }
        let (id, rules) = self.lookup(object)?;
        match rules.and_then(|r| r.reflect_status.as_ref()) {
            Some(rule) => rule(object, &self.context(&id)),
            None => crate::reflect::whole_status(object, &self.context(&id)),
        }
    }

    /// The health of a member object: `Healthy` for kinds without a health rule, `Unknown` when the
    /// rule fails (malformed object), else the rule's verdict.
    pub fn interpret_health(&self, object: &Value) -> ResourceHealth {
        match self.try_interpret_health(object) {
            Ok(None | Some(true)) => ResourceHealth::Healthy,
            Ok(Some(false)) => ResourceHealth::Unhealthy,
            Err(_) => ResourceHealth::Unknown,
        }
    }

    /// Like [`Interpreter::interpret_health`] but reports the rule's error (for an event) and
    /// `Ok(None)` when the kind has no health rule.
    pub fn try_interpret_health(&self, object: &Value) -> Result<Option<bool>> {
        if let Some(layered) = self.layered(|l| l.interpret_health(object)) {
            return layered.map(Some);
        }
        let (id, rules) = self.lookup(object)?;
        match rules.and_then(|r| r.health.as_ref()) {
            Some(rule) => rule(object, &self.context(&id)).map(Some),
            None => Ok(None),
        }
    }

    /// Folds the binding's per-cluster statuses into the template's `.status` (Karmada's
    /// `AggregateStatus`). Returns the template's new `.status`, or `None` when the kind has no
    /// aggregation rule or the status would not change (no write needed).
    pub fn aggregate_status(
        &self,
        template: &Value,
        items: &[AggregatedStatusItem],
    ) -> Result<Option<Value>> {
        if let Some(layered) = self.layered(|l| l.aggregate_status(template, items)) {
            let aggregated = layered?;
            let status = aggregated.get("status").cloned().unwrap_or(Value::Null);
            let unchanged = template.get("status").unwrap_or(&Value::Null) == &status;
            return Ok((!unchanged).then_some(status));
        }
        let (id, rules) = self.lookup(template)?;
        match rules.and_then(|r| r.aggregate_status.as_ref()) {
            Some(rule) => rule(template, items, &self.context(&id)),
            None => Ok(None),
        }
    }
}

/// The layers in front of the native rules ([`crate::layers`]).
impl Interpreter {
    /// Puts `layer` in front of the native rules, behind the layers added before (add the
    /// customizations first, then webhooks, then third-party rules).
    pub fn with_layer(mut self, layer: Layer) -> Self {
        self.layers.push(layer);
        self
    }

    /// Whether any layer or the native table has a rule for `operation` on objects of
    /// `api_version`/`kind` (Karmada's `HookEnabled`). Prefer this to
    /// [`Interpreter::hook_enabled`] where the apiVersion is known: layers are keyed by it.
    pub fn hook_enabled_for(&self, api_version: &str, kind: &str, operation: Operation) -> bool {
        self.layers
            .iter()
            .any(|l| l.hook_enabled(api_version, kind, operation))
            || self.hook_enabled(&GroupKind::from_api_version(api_version, kind), operation)
    }

    /// The first layer's answer for an operation, if any layer has a rule.
    pub(crate) fn layered<T>(&self, ask: impl Fn(&dyn InterpreterLayer) -> Option<T>) -> Option<T> {
        self.layers.iter().find_map(|l| ask(l.as_ref()))
    }

    /// The dependencies a layer names for `object` (`None`: no layer has a dependency rule for
    /// its kind, ask the native rules).
    pub fn layered_dependencies(
        &self,
        object: &Value,
    ) -> Option<Result<Vec<DependentObjectReference>>> {
        self.layered(|l| l.get_dependencies(object))
    }

    /// Replicas and requirements per component, from the layers (`None`: no layer has a rule;
    /// there is no native one, as in Karmada).
    pub fn get_components(&self, object: &Value) -> Option<Result<Vec<Component>>> {
        self.layered(|l| l.get_components(object))
    }
}
