//! Karmada's policy logic as pure functions, for the detector and binding controllers:
//!
//! - [`selector`]: label selectors, cluster affinities (`util.ClusterMatches`) and resource
//!   selectors with Karmada's implicit priorities;
//! - [`matching`]: which PropagationPolicy or ClusterPropagationPolicy claims a resource template,
//!   and the preemption rules;
//! - [`overrides`]: applying ClusterOverridePolicies and OverridePolicies to a manifest for one
//!   cluster, with the `applied-overrides` annotation records.
//!
//! Nothing here talks to an API server; callers pass the objects from their caches.

pub mod matching;
pub mod overrides;
pub mod selector;

pub use matching::{Claim, PolicyChoice, choose_policy, read_claim};
pub use overrides::{
    AppliedOverride, AppliedOverrides, OverrideError, OverridePolicyKind, OverrideResult,
    apply_overrides,
};
pub use selector::{ImplicitPriority, ResourceIdentity, ResourceRef, cluster_matches};
