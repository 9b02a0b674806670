//! The `networking.karmada.io` API group: MultiClusterService and MultiClusterIngress.

pub mod v1alpha1;
