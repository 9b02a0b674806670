//! The `work.karmada.io` API group: Works (v1alpha1) and resource bindings (v1alpha2).

pub mod v1alpha1;
pub mod v1alpha2;

/// The API group of Works and bindings.
pub const GROUP: &str = "work.karmada.io";
