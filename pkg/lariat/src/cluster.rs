//! Clusters: each one gets its own client, cache and controller factories under a child
//! cancellation token; the registry adds and removes them at run time. Removing a cluster stops its
//! workers and watches, frees its caches and deletes its metric series.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::Config;
use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;

use crate::cache::{CacheFactory, CacheOptions, CacheScope};
use crate::client::{ClientFactory, ClientOptions};
use crate::context::ClusterContext;
use crate::controller::{ControllerFactory, ControllerOptions};
use crate::error::{Error, Result};
use crate::metrics::{ClusterMetrics, FrameworkMetrics};

/// Everything configurable about one cluster.
#[derive(Clone, Debug, Default)]
pub struct ClusterOptions {
    /// Client QPS/burst and User-Agent.
    pub clients: ClientOptions,
    /// Cache scopes and transforms.
    pub caches: CacheOptions,
    /// Workers and rate limiting.
    pub controllers: ControllerOptions,
    /// Where the cluster's metric series live (`None`: the process registry,
    /// [`FrameworkMetrics::global`]).
    pub metrics: Option<FrameworkMetrics>,
}

impl ClusterOptions {
    /// Defaults whose caches select only the objects matching `selector` (a label selector),
    /// unless a kind has its own scope: e.g. the objects a control plane placed in a member.
    pub fn with_label_scope(selector: impl Into<String>) -> Self {
        let mut o = Self::default();
        o.caches.default_scope = CacheScope::labels(selector);
        o
    }
}

/// One cluster's factories. Cheap to clone.
#[derive(Clone)]
pub struct Cluster {
    ctx: ClusterContext,
    caches: CacheFactory,
    controllers: ControllerFactory,
}

impl Cluster {
    /// Builds the factories of cluster `name` under a child of `parent`. The control-plane
    /// cluster conventionally uses the empty name, so its metric series carry no `cluster` value.
    pub fn new(
        name: &str,
        config: Config,
        options: ClusterOptions,
        parent: &CancellationToken,
    ) -> Result<Self> {
        let families = match options.metrics {
            Some(m) => m,
            None => FrameworkMetrics::global()?,
        };
        let metrics = ClusterMetrics::new(name, families);
        let clients = ClientFactory::new(name, config, options.clients, metrics.clone())?;
        let ctx = ClusterContext::new(parent.child_token(), metrics, clients);
        let caches = CacheFactory::new(ctx.clone(), options.caches);
        let controllers = ControllerFactory::new(caches.clone(), options.controllers);
        Ok(Self {
            ctx,
            caches,
            controllers,
        })
    }

    /// The cluster name.
    pub fn name(&self) -> &str {
        self.ctx.name()
    }

    /// The cluster's shared context (token, task tracker, metrics, clients).
    pub fn context(&self) -> &ClusterContext {
        &self.ctx
    }

    /// The client factory.
    pub fn clients(&self) -> &ClientFactory {
        self.ctx.clients()
    }

    /// The cache factory.
    pub fn caches(&self) -> &CacheFactory {
        &self.caches
    }

    /// The controller factory.
    pub fn controllers(&self) -> &ControllerFactory {
        &self.controllers
    }

    /// The cluster's metric series.
    pub fn metrics(&self) -> &Arc<ClusterMetrics> {
        self.ctx.metrics()
    }

    /// Stops the cluster: drains its controllers (running handlers get up to `timeout`), stops
    /// every watch and task, frees its caches and deletes its metric series. Returns true if every
    /// task ended in time.
    pub async fn stop(&self, timeout: Duration) -> bool {
        let drained = self.controllers.shutdown(timeout).await;
        self.caches.stop_all();
        self.ctx.token().cancel();
        let tracker = self.ctx.tracker();
        tracker.close();
        let ended = tokio::time::timeout(timeout, tracker.wait()).await.is_ok();
        if !ended {
            tracing::warn!(
                cluster = self.name(),
                tasks = tracker.len(),
                "cluster tasks did not stop in time"
            );
        }
        self.ctx.metrics().remove_all();
        drained && ended
    }
}

/// The set of clusters the process works with.
pub struct ClusterRegistry {
    token: CancellationToken,
    clusters: RwLock<BTreeMap<String, Cluster>>,
    started: AtomicBool,
}

impl ClusterRegistry {
    /// An empty registry; every cluster's token is a child of `token`.
    pub fn new(token: CancellationToken) -> Self {
        Self {
            token,
            clusters: RwLock::new(BTreeMap::new()),
            started: AtomicBool::new(false),
        }
    }

    /// Adds a cluster. If the registry was started, its controllers start at once.
    pub fn add(&self, name: &str, config: Config, options: ClusterOptions) -> Result<Cluster> {
        let mut clusters = self.clusters.write();
        if clusters.contains_key(name) {
            return Err(Error::ClusterExists(name.to_string()));
        }
        let cluster = Cluster::new(name, config, options, &self.token)?;
        if self.started.load(Ordering::Acquire) {
            cluster.controllers().start();
        }
        clusters.insert(name.to_string(), cluster.clone());
        tracing::info!(cluster = name, "cluster added");
        Ok(cluster)
    }

    /// The cluster called `name`.
    pub fn get(&self, name: &str) -> Option<Cluster> {
        self.clusters.read().get(name).cloned()
    }

    /// Names of all clusters, sorted.
    pub fn names(&self) -> Vec<String> {
        self.clusters.read().keys().cloned().collect()
    }

    /// Starts the controllers of every cluster, now and as they are added.
    pub fn start(&self) {
        self.started.store(true, Ordering::Release);
        for c in self.clusters.read().values() {
            c.controllers().start();
        }
    }

    /// Removes a cluster and stops it (see [`Cluster::stop`]).
    pub async fn remove(&self, name: &str, timeout: Duration) -> Result<bool> {
        let cluster = self
            .clusters
            .write()
            .remove(name)
            .ok_or_else(|| Error::ClusterNotFound(name.to_string()))?;
        let clean = cluster.stop(timeout).await;
        tracing::info!(cluster = name, clean, "cluster removed");
        Ok(clean)
    }

    /// Stops every cluster.
    pub async fn shutdown(&self, timeout: Duration) -> bool {
        let all: Vec<Cluster> = std::mem::take(&mut *self.clusters.write())
            .into_values()
            .collect();
        let stops: Vec<_> = all.iter().map(|c| c.stop(timeout)).collect();
        futures::future::join_all(stops)
            .await
            .into_iter()
            .all(|ok| ok)
    }
}
