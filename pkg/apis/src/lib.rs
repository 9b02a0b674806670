//! Karmada's API types (`apps.karmada.io`, `autoscaling.karmada.io`, `cluster.karmada.io`, `config.karmada.io`, `networking.karmada.io`, `policy.karmada.io`, `remedy.karmada.io`, `work.karmada.io`, and the MCS API's `multicluster.x-k8s.io`) with Karmada's exact
//! wire shapes, the well-known label/annotation/finalizer names, and Karmada's object-name helpers.
//!
//! The types serialize exactly as Karmada's Go types do (field names, omitted empty fields, enum
//! spellings) and tolerate what a newer Karmada may add: unknown fields are ignored and unknown enum
//! values are kept in an `Other` variant. [`crds::all`] builds the CustomResourceDefinitions, with
//! Karmada's webhook validation expressed as OpenAPI constraints and CEL rules.

// kube's `printcolumn(...)` attributes repeat `type_ = "string"`, which this lint mistakes for
// duplicated attributes.
#![allow(clippy::duplicated_attributes)]
#![warn(missing_docs)]

mod compact;
#[macro_use]
mod macros;
mod schema;

pub mod apps;
pub mod autoscaling;
pub mod cluster;
pub mod config;
pub mod crds;
pub mod multicluster;
pub mod names;
pub mod networking;
pub mod policy;
pub mod policy_rs;
pub mod raw;
pub mod remedy;
pub mod rollout;
pub mod well_known;
pub mod work;

pub use cluster::v1alpha1::{Cluster, ClusterSpec, ClusterStatus};
pub use policy::v1alpha1::{
    ClusterOverridePolicy, ClusterPropagationPolicy, ClusterTaintPolicy, OverridePolicy,
    OverrideSpec, PropagationPolicy, PropagationSpec,
};
pub use work::v1alpha1::{Work, WorkSpec, WorkStatus};
pub use work::v1alpha2::{
    ClusterResourceBinding, ResourceBinding, ResourceBindingSpec, ResourceBindingStatus,
};

/// `skip_serializing_if` helper: Go's `omitempty` for an `int32`.
pub(crate) fn is_zero_i32(value: &i32) -> bool {
    *value == 0
}

/// `skip_serializing_if` helper: Go's `omitempty` for an `int`/`int64`.
pub(crate) fn is_zero_i64(value: &i64) -> bool {
    *value == 0
}
