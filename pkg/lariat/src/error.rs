//! Errors of the framework. Every variant names the object (cluster, kind, key) and the cause.

use std::time::Duration;

/// A boxed error returned by handlers (the workspace's one definition, from apimachinery).
pub use apimachinery::BoxError;

/// `e` followed by each of its causes not already in the text: a connection error's `Display`
/// says only `tcp connect error`, while what went wrong (`Connection refused`) is its source.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        cause = c.source();
    }
    msg
}

/// Framework errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Building a client for a cluster failed.
    #[error("building client for cluster {cluster:?}: {source}")]
    Client {
        /// Cluster name.
        cluster: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// The cluster's proxy settings cannot be used.
    #[error("cluster {cluster:?}: {source}")]
    Proxy {
        /// Cluster name.
        cluster: String,
        /// Cause.
        #[source]
        source: crate::client::ProxyConfigError,
    },
    /// A header value (such as a User-Agent) was invalid.
    #[error("invalid header value {value:?} for cluster {cluster:?}")]
    InvalidHeader {
        /// Cluster name.
        cluster: String,
        /// The rejected value.
        value: String,
    },
    /// Discovery could not map a kind to a resource.
    #[error("cluster {cluster:?} does not serve kind {gvk}: {source}")]
    UnknownKind {
        /// Cluster name.
        cluster: String,
        /// `group/version, Kind=kind`.
        gvk: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// A cache did not finish its initial list in time.
    #[error("cache for {kind} in cluster {cluster:?} did not sync within {timeout:?} ({listed} objects listed by then){}", last_error.as_ref().map(|e| format!(" (last error: {e})")).unwrap_or_default())]
    SyncTimeout {
        /// Cluster name.
        cluster: String,
        /// The kind (and scope) of the cache.
        kind: String,
        /// How long we waited.
        timeout: Duration,
        /// Objects the initial list had delivered by then: many tells a large cache still
        /// listing from a cache that could not list at all.
        listed: usize,
        /// The last watch error, if any.
        last_error: Option<String>,
    },
    /// A cache was stopped (its cluster removed or the process shutting down).
    #[error("cache for {kind} in cluster {cluster:?} was stopped")]
    CacheStopped {
        /// Cluster name.
        cluster: String,
        /// The kind (and scope) of the cache.
        kind: String,
    },
    /// The same kind and scope were requested with two different Rust representations.
    #[error(
        "cache for {kind} in cluster {cluster:?} already exists as {existing}, cannot also hold it as {requested}: pick one representation per kind"
    )]
    RepresentationConflict {
        /// Cluster name.
        cluster: String,
        /// The kind (and scope).
        kind: String,
        /// Type name of the existing cache.
        existing: &'static str,
        /// Type name that was requested.
        requested: &'static str,
    },
    /// A dynamic object has no `apiVersion`/`kind`, so its controller cannot be chosen.
    #[error("object {name:?} in cluster {cluster:?} has no apiVersion/kind")]
    ObjectWithoutKind {
        /// Cluster name.
        cluster: String,
        /// Object name.
        name: String,
    },
    /// A cluster with this name is already registered.
    #[error("cluster {0:?} is already registered")]
    ClusterExists(String),
    /// No cluster with this name is registered.
    #[error("cluster {0:?} is not registered")]
    ClusterNotFound(String),
    /// The framework's metrics could not be defined or registered.
    #[error("framework metrics: {0}")]
    Metrics(#[from] crate::metrics::MetricsError),
}

/// Result alias of the framework.
pub type Result<T, E = Error> = std::result::Result<T, E>;
