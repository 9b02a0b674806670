//! `autoscaling.karmada.io/v1alpha1`: FederatedHPA and cron-scheduled scaling (CronFederatedHPA).

mod cron_federated_hpa;
mod federated_hpa;

pub use cron_federated_hpa::*;
pub use federated_hpa::*;

/// The API group of the autoscaling kinds.
pub const GROUP: &str = "autoscaling.karmada.io";
/// The API version of the autoscaling kinds.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of the autoscaling kinds.
pub const API_VERSION: &str = "autoscaling.karmada.io/v1alpha1";
/// Kind of a FederatedHPA, the only kind of this group a CronFederatedHPA may scale.
pub const FEDERATED_HPA_KIND: &str = "FederatedHPA";
