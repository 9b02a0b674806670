//! Behaviour of every interpreter operation per kind, through the public API (pure, no server).
// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod aggregate;
mod dependencies;
mod health;
mod prune;
mod reflect;
mod replicas;
mod retain;
mod table;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karmada_apis::work::v1alpha2::AggregatedStatusItem;
use karmada_interpreter::{Interpreter, InterpreterOptions};
use serde_json::Value;

/// The fixed "now" of the test interpreter.
pub const NOW: &str = "2026-01-02T03:04:05Z";

/// An interpreter with the native rules and a fixed clock.
pub fn interpreter() -> Interpreter {
    interpreter_with(InterpreterOptions::default())
}

/// Like [`interpreter`] with options.
pub fn interpreter_with(options: InterpreterOptions) -> Interpreter {
    let now: Time = serde_json::from_value(Value::from(NOW)).expect("valid time");
    Interpreter::new(options).with_clock(move || now.clone())
}

/// A member cluster's reported status.
pub fn item(cluster: &str, status: Option<Value>) -> AggregatedStatusItem {
    AggregatedStatusItem {
        cluster_name: cluster.into(),
        status: status.map(Into::into),
        applied: true,
        ..Default::default()
    }
}
