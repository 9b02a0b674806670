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
use crate::rules::{Operation, Replicas};

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
