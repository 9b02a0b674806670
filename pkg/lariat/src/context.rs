//! What every factory of one cluster shares: its name, cancellation token, task tracker, metric
//! series and clients.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::client::ClientFactory;
use crate::metrics::ClusterMetrics;

/// The shared state of one cluster's factories. Every task of the cluster is spawned on `tracker`
/// and stops when `token` is cancelled.
#[derive(Clone)]
pub struct ClusterContext {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    token: CancellationToken,
    tracker: TaskTracker,
    metrics: Arc<ClusterMetrics>,
    clients: ClientFactory,
}

impl ClusterContext {
    /// Bundles a cluster's parts; `token` should be a child of the process (or registry) token.
    pub fn new(
        token: CancellationToken,
        metrics: Arc<ClusterMetrics>,
        clients: ClientFactory,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                name: clients.cluster().to_string(),
                token,
                tracker: TaskTracker::new(),
                metrics,
                clients,
            }),
        }
    }

    /// The cluster name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The cluster's cancellation token.
    pub fn token(&self) -> &CancellationToken {
        &self.inner.token
    }

    /// The tracker owning every task of the cluster.
    pub fn tracker(&self) -> &TaskTracker {
        &self.inner.tracker
    }

    /// The cluster's metric series.
    pub fn metrics(&self) -> &Arc<ClusterMetrics> {
        &self.inner.metrics
    }

    /// The cluster's clients.
    pub fn clients(&self) -> &ClientFactory {
        &self.inner.clients
    }

    /// Spawns a task owned by this cluster: it is tracked, and it is dropped at the next await
    /// point once the cluster token is cancelled.
    pub fn spawn<F>(&self, fut: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let token = self.inner.token.clone();
        self.inner.tracker.spawn(async move {
            tokio::select! {
                _ = token.cancelled() => {}
                _ = fut => {}
            }
        });
    }
}
