//! The `apps.karmada.io` API group.

pub mod v1alpha1;
