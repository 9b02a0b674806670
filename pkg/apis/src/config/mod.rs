//! The `config.karmada.io` API group: ResourceInterpreterCustomization (v1alpha1), the Lua rules
//! that teach the resource interpreter about a kind.

pub mod v1alpha1;

/// The API group of the interpreter configuration.
pub const GROUP: &str = "config.karmada.io";
