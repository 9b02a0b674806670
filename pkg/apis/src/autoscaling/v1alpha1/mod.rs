//! `autoscaling.karmada.io/v1alpha1`: FederatedHPA.

mod federated_hpa;

pub use federated_hpa::*;

/// The API group of the autoscaling kinds.
pub const GROUP: &str = "autoscaling.karmada.io";
/// The API version of the autoscaling kinds.
pub const VERSION: &str = "v1alpha1";
