//! `lariat`: the shared controller framework every karmada-rs controller is written against.
//!
//! Rancher Lasso's ideas on top of kube-rs: one watch per (cluster, kind) shared by all controllers,
//! caches that start only when used, handler registration, a deduping rate-limited work queue,
//! per-GroupKind worker counts, and a multi-cluster registry with per-cluster cancellation.

pub mod backoff;
pub mod cache;
pub mod client;
pub mod cluster;
pub mod context;
pub mod controller;
pub mod error;
pub mod gvk;
pub mod key;
pub mod metrics;
pub mod queue;
pub mod runtime;

pub use cache::{Cache, CacheFactory, CacheOptions, CacheScope, Store};
pub use client::{ClientFactory, ClientOptions};
pub use cluster::{Cluster, ClusterOptions, ClusterRegistry, MANAGED_SELECTOR};
pub use controller::{
    ControllerFactory, ControllerOptions, HandlerResult, SharedController, WorkerOptions,
};
pub use error::{BoxError, Error, Result};
pub use key::ObjectKey;
pub use queue::{RateLimiterOptions, WorkQueue};
