//! The Karmada controllers, one module per controller, and what they share: the [`ControllerContext`]
//! each one starts with and the [`MemberClusters`] they reach members through.

pub mod binding;
pub mod binding_status;
pub mod cluster;
pub mod cluster_status;
pub mod common;
pub mod context;
pub mod detector;
pub mod execution;
pub mod members;
pub mod namespace;
pub mod registry;
pub mod scheduler;
pub mod work_status;

pub use context::{BoxError, ControllerContext, ControllerFuture, Settings, StartFn, SyncReporter};
pub use members::MemberClusters;
