//! The `remedy.karmada.io` API group.

pub mod v1alpha1;
