//! `policy.karmada.io/v1alpha1`: propagation, override and cluster taint policies, federated
//! resource quotas.

mod cluster_taint_policy;
mod federated_resource_quota;
mod override_policy;
mod propagation;

pub use cluster_taint_policy::*;
pub use federated_resource_quota::*;
pub use override_policy::*;
pub use propagation::*;

/// The API group of the policy kinds.
pub const GROUP: &str = "policy.karmada.io";
/// The API version of the policy kinds.
pub const VERSION: &str = "v1alpha1";
