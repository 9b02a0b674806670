//! `lariat`: a shared multi-cluster controller framework on kube-rs.
//!
//! Rancher Lasso's ideas on top of kube-rs: one watch per (cluster, kind) shared by all controllers,
//! caches that start only when used, handler registration, a deduping rate-limited work queue,
//! per-GroupKind worker counts, and a multi-cluster registry with per-cluster cancellation.
//! A controller declares its start-up once with a [`Wiring`]: the caches it waits for, the
//! handlers it registers, then one `run` that waits, reports synced and serves until cancelled.
//!
//! ```no_run
//! # async fn demo(host: kube::Config, member: kube::Config) -> lariat::Result<()> {
//! use std::{sync::Arc, time::Duration};
//! use k8s_openapi::api::apps::v1::Deployment;
//! use lariat::{ClusterOptions, ClusterRegistry, HandlerResult, ObjectKey};
//! use tokio_util::sync::CancellationToken;
//!
//! let shutdown = CancellationToken::new();
//! let clusters = ClusterRegistry::new(shutdown.clone());
//! let host = clusters.add("", host, ClusterOptions::default())?;
//! // this member's caches only see objects labelled example.com/managed=true
//! clusters.add("member1", member, ClusterOptions::with_label_scope("example.com/managed=true"))?;
//!
//! // a cheap handle: no watch is opened until it is used
//! let deployments = host.controllers().for_kind::<Deployment>()?;
//! deployments.register_handler(
//!     "detector",
//!     shutdown.child_token(), // removes the handler when cancelled
//!     |key: ObjectKey, obj: Option<Arc<Deployment>>| async move {
//!         match obj {
//!             None => HandlerResult::Success, // deleted
//!             Some(_d) => HandlerResult::RequeueAfter(Duration::from_secs(30)),
//!         }
//!     },
//! );
//! host.caches().wait_for_sync(Duration::from_secs(120)).await?;
//! clusters.start(); // workers run now (e.g. once elected leader)
//! # Ok(()) }
//! ```

pub mod backoff;
pub mod cache;
pub mod client;
pub mod cluster;
pub mod context;
pub mod controller;
pub mod error;
pub mod events;
pub mod gvk;
pub mod key;
pub mod metrics;
pub mod queue;
pub mod runtime;

pub use cache::{Cache, CacheFactory, CacheOptions, CacheScope, Store, SyncWait};
pub use client::{ClientFactory, ClientOptions};
pub use cluster::{Cluster, ClusterOptions, ClusterRegistry};
pub use controller::{
    ControllerFactory, ControllerOptions, HandlerResult, SharedController, Synced, Wiring,
    WorkerOptions, current_priority,
};
pub use error::{BoxError, Error, Result};
pub use key::ObjectKey;
pub use queue::{Priority, Ranker, RateLimiterOptions, WorkQueue};
