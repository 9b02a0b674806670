//! What the controllers share, so that no controller imports another and no domain crate depends on
//! another: the [`ControllerContext`] each controller starts with and the [`MemberClusters`] it
//! reaches members through; the interface of the two binding kinds, status conditions, Events,
//! guarded merge patches for objects we do not own, reading templates through the cache, the Work
//! writer and the propagation metrics (binding and namespace write Works, execution counts member
//! writes), reading Works' manifests;
//! also the errors every controller can meet ([`error::CoreError`]) and its start-up, declared with
//! [`ControllerContext::wiring`] ([`handlers`]); the resource [`interpreter`] with
//! the ResourceInterpreterCustomizations in front of the native rules.

pub mod binding;
pub mod collected_slices;
pub mod conditions;
pub mod context;
pub mod drift;
pub mod drift_policy;
pub mod error;
pub mod failover;
pub mod handlers;
pub mod interpreter;
pub mod manifest;
pub mod members;
pub mod metrics;
pub mod multicluster_service;
pub mod patch;
pub mod priority;
pub mod quota;
pub mod rollout;
pub mod shared_values;
pub mod taints;
pub mod template;
pub mod work;
pub mod work_index;

pub use conditions::set_condition;
pub use context::{BoxError, ControllerContext, ControllerFuture, Settings, StartFn, SyncReporter};
pub use members::MemberClusters;
