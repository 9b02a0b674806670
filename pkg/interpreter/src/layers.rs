//! Interpreter layers: rule sources consulted before the native rule table, in Karmada's
//! precedence — ResourceInterpreterCustomization (Lua, `karmada-luavm`), then the interpreter
//! webhooks, then third-party rules ([`crate::ThirdParty`]), then the native rules. A layer answers `None` for an
//! operation it has no rule for, and the next one is asked.
//!
//! Layers are keyed by the object's exact apiVersion and kind, as Karmada keys customizations:
//! a rule for `example.io/v1` does not apply to `example.io/v2` objects.

use std::fmt;
use std::sync::Arc;

use karmada_apis::config::v1alpha1::DependentObjectReference;
use karmada_apis::work::v1alpha2::{AggregatedStatusItem, Component};
use serde_json::Value;

use crate::error::Result;
use crate::interpreter::Interpreter;
use crate::rules::{GroupKind, Operation, Replicas};

/// A source of per-kind rules in front of the native table. Every method answers `None` when
/// the layer has no rule for the object's kind and operation; errors name the object.
pub trait InterpreterLayer: Send + Sync + fmt::Debug {
    /// Whether the layer has a rule for `operation` on `api_version`/`kind` (Karmada's
    /// `HookEnabled`).
    fn hook_enabled(&self, api_version: &str, kind: &str, operation: Operation) -> bool;

    /// Replicas and per-replica requirements (`GetReplicas`).
    fn get_replicas(&self, _object: &Value) -> Option<Result<Replicas>> {
        None
    }

    /// The object with its replicas set to `replicas` (`ReviseReplica`).
    fn revise_replica(&self, _object: &Value, _replicas: i64) -> Option<Result<Value>> {
        None
    }

    /// `desired` with what the member owns kept from `observed` (`Retain`).
    fn retain(&self, _desired: &Value, _observed: &Value) -> Option<Result<Value>> {
        None
    }

    /// The status to report for a member object (`ReflectStatus`).
    fn reflect_status(&self, _object: &Value) -> Option<Result<Value>> {
        None
    }

    /// Whether a member object is healthy (`InterpretHealth`).
    fn interpret_health(&self, _object: &Value) -> Option<Result<bool>> {
        None
    }

    /// The template with the member statuses folded into it (`AggregateStatus`): the whole object.
    fn aggregate_status(
        &self,
        _template: &Value,
        _items: &[AggregatedStatusItem],
    ) -> Option<Result<Value>> {
        None
    }

    /// The objects the object depends on (`GetDependencies`).
    fn get_dependencies(&self, _object: &Value) -> Option<Result<Vec<DependentObjectReference>>> {
        None
    }

    /// Replicas and requirements per component (`GetComponents`).
    fn get_components(&self, _object: &Value) -> Option<Result<Vec<Component>>> {
        None
    }
}

/// A shared layer.
pub type Layer = Arc<dyn InterpreterLayer>;

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
